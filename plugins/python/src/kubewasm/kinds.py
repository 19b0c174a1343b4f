"""Kinds of the built-in Kubernetes resources controllers use most. Custom resources:
`Gvk("example.com", "v1", "Foo")`."""

from .core import Gvk

# core/v1
CONFIG_MAP = Gvk("", "v1", "ConfigMap")
ENDPOINTS = Gvk("", "v1", "Endpoints")
EVENT = Gvk("", "v1", "Event")
NAMESPACE = Gvk("", "v1", "Namespace")
NODE = Gvk("", "v1", "Node")
PERSISTENT_VOLUME = Gvk("", "v1", "PersistentVolume")
PERSISTENT_VOLUME_CLAIM = Gvk("", "v1", "PersistentVolumeClaim")
POD = Gvk("", "v1", "Pod")
SECRET = Gvk("", "v1", "Secret")
SERVICE = Gvk("", "v1", "Service")
SERVICE_ACCOUNT = Gvk("", "v1", "ServiceAccount")

# apps/v1
DAEMON_SET = Gvk("apps", "v1", "DaemonSet")
DEPLOYMENT = Gvk("apps", "v1", "Deployment")
REPLICA_SET = Gvk("apps", "v1", "ReplicaSet")
STATEFUL_SET = Gvk("apps", "v1", "StatefulSet")

# batch/v1
CRON_JOB = Gvk("batch", "v1", "CronJob")
JOB = Gvk("batch", "v1", "Job")

# others
INGRESS = Gvk("networking.k8s.io", "v1", "Ingress")
LEASE = Gvk("coordination.k8s.io", "v1", "Lease")
POD_DISRUPTION_BUDGET = Gvk("policy", "v1", "PodDisruptionBudget")
CLUSTER_ROLE = Gvk("rbac.authorization.k8s.io", "v1", "ClusterRole")
CLUSTER_ROLE_BINDING = Gvk("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")
ROLE = Gvk("rbac.authorization.k8s.io", "v1", "Role")
ROLE_BINDING = Gvk("rbac.authorization.k8s.io", "v1", "RoleBinding")
