// Package v1 stands in for k8s.io/api/events/v1 (group events.k8s.io) in the SDK's tests of
// typed objects without TypeMeta: an Event of another group than the core one's.
package v1

import corev1 "github.com/kubewasm/kubewasm/plugins/go/internal/typedtest/core/v1"

type Event struct {
	corev1.TypeMeta   `json:",inline"`
	corev1.ObjectMeta `json:"metadata,omitempty"`
	Note              string `json:"note,omitempty"`
}
