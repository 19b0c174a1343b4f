// Package v1 stands in for k8s.io/api/core/v1 in the SDK's tests of typed objects without
// TypeMeta: a package path ending in core/v1, types named after kinds.
package v1

// TypeMeta is k8s.io/apimachinery's: both fields omitted when empty.
type TypeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

// ObjectMeta is the part of k8s.io/apimachinery's the tests need.
type ObjectMeta struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

type ConfigMap struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	Data       map[string]string `json:"data,omitempty"`
}

type Event struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	Reason     string `json:"reason,omitempty"`
}
