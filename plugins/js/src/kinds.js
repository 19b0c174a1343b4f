// Kinds of the built-in Kubernetes resources controllers use most. Custom resources:
// gvk("example.com", "v1", "Foo").

import { gvk } from './core.js';

// core/v1
export const CONFIG_MAP = gvk('', 'v1', 'ConfigMap');
export const ENDPOINTS = gvk('', 'v1', 'Endpoints');
export const EVENT = gvk('', 'v1', 'Event');
export const NAMESPACE = gvk('', 'v1', 'Namespace');
export const NODE = gvk('', 'v1', 'Node');
export const PERSISTENT_VOLUME = gvk('', 'v1', 'PersistentVolume');
export const PERSISTENT_VOLUME_CLAIM = gvk('', 'v1', 'PersistentVolumeClaim');
export const POD = gvk('', 'v1', 'Pod');
export const SECRET = gvk('', 'v1', 'Secret');
export const SERVICE = gvk('', 'v1', 'Service');
export const SERVICE_ACCOUNT = gvk('', 'v1', 'ServiceAccount');

// apps/v1
export const DAEMON_SET = gvk('apps', 'v1', 'DaemonSet');
export const DEPLOYMENT = gvk('apps', 'v1', 'Deployment');
export const REPLICA_SET = gvk('apps', 'v1', 'ReplicaSet');
export const STATEFUL_SET = gvk('apps', 'v1', 'StatefulSet');

// batch/v1
export const CRON_JOB = gvk('batch', 'v1', 'CronJob');
export const JOB = gvk('batch', 'v1', 'Job');

// others
export const INGRESS = gvk('networking.k8s.io', 'v1', 'Ingress');
export const LEASE = gvk('coordination.k8s.io', 'v1', 'Lease');
export const POD_DISRUPTION_BUDGET = gvk('policy', 'v1', 'PodDisruptionBudget');
export const CLUSTER_ROLE = gvk('rbac.authorization.k8s.io', 'v1', 'ClusterRole');
export const CLUSTER_ROLE_BINDING = gvk('rbac.authorization.k8s.io', 'v1', 'ClusterRoleBinding');
export const ROLE = gvk('rbac.authorization.k8s.io', 'v1', 'Role');
export const ROLE_BINDING = gvk('rbac.authorization.k8s.io', 'v1', 'RoleBinding');
