// Package kinds names the Kubernetes kinds controllers use most, as kubewasm.GVK values:
// kinds.Deployment, kinds.ConfigMap, kinds.Node, ...
package kinds

import "github.com/kubewasm/kubewasm/plugins/go/kubewasm"

var (
	ConfigMap                = kubewasm.GVK{Version: "v1", Kind: "ConfigMap"}
	Secret                   = kubewasm.GVK{Version: "v1", Kind: "Secret"}
	Pod                      = kubewasm.GVK{Version: "v1", Kind: "Pod"}
	Service                  = kubewasm.GVK{Version: "v1", Kind: "Service"}
	ServiceAccount           = kubewasm.GVK{Version: "v1", Kind: "ServiceAccount"}
	Namespace                = kubewasm.GVK{Version: "v1", Kind: "Namespace"}
	Node                     = kubewasm.GVK{Version: "v1", Kind: "Node"}
	PersistentVolumeClaim    = kubewasm.GVK{Version: "v1", Kind: "PersistentVolumeClaim"}
	Event                    = kubewasm.GVK{Group: "events.k8s.io", Version: "v1", Kind: "Event"}
	Deployment               = kubewasm.GVK{Group: "apps", Version: "v1", Kind: "Deployment"}
	StatefulSet              = kubewasm.GVK{Group: "apps", Version: "v1", Kind: "StatefulSet"}
	DaemonSet                = kubewasm.GVK{Group: "apps", Version: "v1", Kind: "DaemonSet"}
	ReplicaSet               = kubewasm.GVK{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	Job                      = kubewasm.GVK{Group: "batch", Version: "v1", Kind: "Job"}
	CronJob                  = kubewasm.GVK{Group: "batch", Version: "v1", Kind: "CronJob"}
	Ingress                  = kubewasm.GVK{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
	NetworkPolicy            = kubewasm.GVK{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}
	Lease                    = kubewasm.GVK{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}
	Role                     = kubewasm.GVK{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}
	RoleBinding              = kubewasm.GVK{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}
	ClusterRole              = kubewasm.GVK{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
	ClusterRoleBinding       = kubewasm.GVK{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}
	CustomResourceDefinition = kubewasm.GVK{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
)
