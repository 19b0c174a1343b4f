"""Typed models of the common Kubernetes kinds (those of `kubewasm.kinds`) and every type
they use: TypedDicts, so an object is still the dict the SDK reads and writes. Generated
by scripts/k8s-types.py from the API server's OpenAPI v3 schema; do not edit.

    from typing import cast
    from kubewasm import k8s

    deployment = cast(k8s.Deployment, ctx.get(kinds.DEPLOYMENT, ns, name))
    replicas = deployment["spec"].get("replicas", 1)
    ctx.apply(k8s.ConfigMap(apiVersion="v1", kind="ConfigMap", metadata={"name": "x"}))

Fields the schema requires are `Required`; the rest may be absent. A type checker (mypy,
pyright) checks names and types; at run time these are plain dicts. Import the module
under `if TYPE_CHECKING:` to keep it out of the component.
"""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict


class AWSElasticBlockStoreVolumeSource(TypedDict, total=False):
    """Represents a Persistent Disk resource in AWS."""

    fsType: str
    partition: int
    readOnly: bool
    volumeID: Required[str]


class Affinity(TypedDict, total=False):
    """Affinity is a group of affinity scheduling rules."""

    nodeAffinity: NodeAffinity
    podAffinity: PodAffinity
    podAntiAffinity: PodAntiAffinity


class AggregationRule(TypedDict, total=False):
    """AggregationRule describes how to locate ClusterRoles to aggregate into the ClusterRole"""

    clusterRoleSelectors: list[LabelSelector]


class AppArmorProfile(TypedDict, total=False):
    """AppArmorProfile defines a pod or container's AppArmor settings."""

    localhostProfile: str
    type: Required[str]


class AttachedVolume(TypedDict, total=False):
    """AttachedVolume describes a volume attached to a node"""

    devicePath: Required[str]
    name: Required[str]


class AzureDiskVolumeSource(TypedDict, total=False):
    """AzureDisk represents an Azure Data Disk mount on the host and bind mount to the pod."""

    cachingMode: str
    diskName: Required[str]
    diskURI: Required[str]
    fsType: str
    kind: str
    readOnly: bool


class AzureFilePersistentVolumeSource(TypedDict, total=False):
    """AzureFile represents an Azure File Service mount on the host and bind mount to the pod."""

    readOnly: bool
    secretName: Required[str]
    secretNamespace: str
    shareName: Required[str]


class AzureFileVolumeSource(TypedDict, total=False):
    """AzureFile represents an Azure File Service mount on the host and bind mount to the pod."""

    readOnly: bool
    secretName: Required[str]
    shareName: Required[str]


class CSIPersistentVolumeSource(TypedDict, total=False):
    """Represents storage that is managed by an external CSI volume driver"""

    controllerExpandSecretRef: SecretReference
    controllerPublishSecretRef: SecretReference
    driver: Required[str]
    fsType: str
    nodeExpandSecretRef: SecretReference
    nodePublishSecretRef: SecretReference
    nodeStageSecretRef: SecretReference
    readOnly: bool
    volumeAttributes: dict[str, str]
    volumeHandle: Required[str]


class CSIVolumeSource(TypedDict, total=False):
    """Represents a source location of a volume to mount, managed by an external CSI driver"""

    driver: Required[str]
    fsType: str
    nodePublishSecretRef: LocalObjectReference
    readOnly: bool
    volumeAttributes: dict[str, str]


class Capabilities(TypedDict, total=False):
    """Adds and removes POSIX capabilities from running containers."""

    add: list[str]
    drop: list[str]


class CephFSPersistentVolumeSource(TypedDict, total=False):
    """Represents a Ceph Filesystem mount that lasts the lifetime of a pod Cephfs volumes do not support ownership management or SELinux relabeling."""

    monitors: Required[list[str]]
    path: str
    readOnly: bool
    secretFile: str
    secretRef: SecretReference
    user: str


class CephFSVolumeSource(TypedDict, total=False):
    """Represents a Ceph Filesystem mount that lasts the lifetime of a pod Cephfs volumes do not support ownership management or SELinux relabeling."""

    monitors: Required[list[str]]
    path: str
    readOnly: bool
    secretFile: str
    secretRef: LocalObjectReference
    user: str


class CinderPersistentVolumeSource(TypedDict, total=False):
    """Represents a cinder volume resource in Openstack."""

    fsType: str
    readOnly: bool
    secretRef: SecretReference
    volumeID: Required[str]


class CinderVolumeSource(TypedDict, total=False):
    """Represents a cinder volume resource in Openstack."""

    fsType: str
    readOnly: bool
    secretRef: LocalObjectReference
    volumeID: Required[str]


class ClientIPConfig(TypedDict, total=False):
    """ClientIPConfig represents the configurations of Client IP based session affinity."""

    timeoutSeconds: int


class ClusterRole(TypedDict, total=False):
    """ClusterRole is a cluster level, logical grouping of PolicyRules that can be referenced as a unit by a RoleBinding or ClusterRoleBinding."""

    aggregationRule: AggregationRule
    apiVersion: Required[Literal["rbac.authorization.k8s.io/v1"]]
    kind: Required[Literal["ClusterRole"]]
    metadata: ObjectMeta
    rules: list[PolicyRule]


class ClusterRoleBinding(TypedDict, total=False):
    """ClusterRoleBinding references a ClusterRole, but not contain it."""

    apiVersion: Required[Literal["rbac.authorization.k8s.io/v1"]]
    kind: Required[Literal["ClusterRoleBinding"]]
    metadata: ObjectMeta
    roleRef: Required[RoleRef]
    subjects: list[Subject]


class ClusterTrustBundleProjection(TypedDict, total=False):
    """ClusterTrustBundleProjection describes how to select a set of ClusterTrustBundle objects and project their contents into the pod filesystem."""

    labelSelector: LabelSelector
    name: str
    optional: bool
    path: Required[str]
    signerName: str
    user: int


class Condition(TypedDict, total=False):
    """Condition contains details for one aspect of the current state of this API Resource."""

    lastTransitionTime: Required[str]
    message: Required[str]
    observedGeneration: int
    reason: Required[str]
    status: Required[str]
    type: Required[str]


class ConfigMap(TypedDict, total=False):
    """ConfigMap holds configuration data for pods to consume."""

    apiVersion: Required[Literal["v1"]]
    binaryData: dict[str, str]
    data: dict[str, str]
    immutable: bool
    kind: Required[Literal["ConfigMap"]]
    metadata: ObjectMeta


class ConfigMapEnvSource(TypedDict, total=False):
    """ConfigMapEnvSource selects a ConfigMap to populate the environment variables with."""

    name: str
    optional: bool


class ConfigMapKeySelector(TypedDict, total=False):
    """Selects a key from a ConfigMap."""

    key: Required[str]
    name: str
    optional: bool


class ConfigMapNodeConfigSource(TypedDict, total=False):
    """ConfigMapNodeConfigSource contains the information to reference a ConfigMap as a config source for the Node."""

    kubeletConfigKey: Required[str]
    name: Required[str]
    namespace: Required[str]
    resourceVersion: str
    uid: str


class ConfigMapProjection(TypedDict, total=False):
    """Adapts a ConfigMap into a projected volume."""

    items: list[KeyToPath]
    name: str
    optional: bool


class ConfigMapVolumeSource(TypedDict, total=False):
    """Adapts a ConfigMap into a volume."""

    defaultMode: int
    defaultUser: int
    items: list[KeyToPath]
    name: str
    optional: bool


class Container(TypedDict, total=False):
    """A single application container that you want to run within a pod."""

    args: list[str]
    command: list[str]
    env: list[EnvVar]
    envFrom: list[EnvFromSource]
    image: str
    imagePullPolicy: str
    lifecycle: Lifecycle
    livenessProbe: Probe
    name: Required[str]
    ports: list[ContainerPort]
    readinessProbe: Probe
    resizePolicy: list[ContainerResizePolicy]
    resources: ResourceRequirements
    restartPolicy: str
    restartPolicyRules: list[ContainerRestartRule]
    securityContext: SecurityContext
    startupProbe: Probe
    stdin: bool
    stdinOnce: bool
    terminationMessagePath: str
    terminationMessagePolicy: str
    tty: bool
    volumeDevices: list[VolumeDevice]
    volumeMounts: list[VolumeMount]
    workingDir: str


class ContainerExtendedResourceRequest(TypedDict, total=False):
    """ContainerExtendedResourceRequest has the mapping of container name, extended resource name to the device request name."""

    containerName: Required[str]
    requestName: Required[str]
    resourceName: Required[str]


class ContainerImage(TypedDict, total=False):
    """Describe a container image"""

    names: list[str]
    sizeBytes: int


class ContainerPort(TypedDict, total=False):
    """ContainerPort represents a network port in a single container."""

    containerPort: Required[int]
    hostIP: str
    hostPort: int
    name: str
    protocol: str


class ContainerResizePolicy(TypedDict, total=False):
    """ContainerResizePolicy represents resource resize policy for the container."""

    resourceName: Required[str]
    restartPolicy: Required[str]


class ContainerRestartRule(TypedDict, total=False):
    """ContainerRestartRule describes how a container exit is handled."""

    action: Required[str]
    exitCodes: ContainerRestartRuleOnExitCodes


class ContainerRestartRuleOnExitCodes(TypedDict, total=False):
    """ContainerRestartRuleOnExitCodes describes the condition for handling an exited container based on its exit codes."""

    operator: Required[str]
    values: list[int]


class ContainerState(TypedDict, total=False):
    """ContainerState holds a possible state of container."""

    running: ContainerStateRunning
    terminated: ContainerStateTerminated
    waiting: ContainerStateWaiting


class ContainerStateRunning(TypedDict, total=False):
    """ContainerStateRunning is a running state of a container."""

    startedAt: str


class ContainerStateTerminated(TypedDict, total=False):
    """ContainerStateTerminated is a terminated state of a container."""

    containerID: str
    exitCode: Required[int]
    finishedAt: str
    message: str
    reason: str
    signal: int
    startedAt: str


class ContainerStateWaiting(TypedDict, total=False):
    """ContainerStateWaiting is a waiting state of a container."""

    message: str
    reason: str


class ContainerStatus(TypedDict, total=False):
    """ContainerStatus contains details for the current status of this container."""

    allocatedResources: dict[str, str | int | float]
    allocatedResourcesStatus: list[ResourceStatus]
    containerID: str
    image: Required[str]
    imageID: Required[str]
    lastState: ContainerState
    name: Required[str]
    ready: Required[bool]
    resources: ResourceRequirements
    restartCount: Required[int]
    started: bool
    state: ContainerState
    stopSignal: str
    user: ContainerUser
    volumeMounts: list[VolumeMountStatus]


class ContainerUser(TypedDict, total=False):
    """ContainerUser represents user identity information"""

    linux: LinuxContainerUser


class CronJob(TypedDict, total=False):
    """CronJob represents the configuration of a single cron job."""

    apiVersion: Required[Literal["batch/v1"]]
    kind: Required[Literal["CronJob"]]
    metadata: ObjectMeta
    spec: Required[CronJobSpec]
    status: CronJobStatus


class CronJobSpec(TypedDict, total=False):
    """CronJobSpec describes how the job execution will look like and when it will actually run."""

    concurrencyPolicy: str
    failedJobsHistoryLimit: int
    jobTemplate: Required[JobTemplateSpec]
    schedule: Required[str]
    startingDeadlineSeconds: int
    successfulJobsHistoryLimit: int
    suspend: bool
    timeZone: str


class CronJobStatus(TypedDict, total=False):
    """CronJobStatus represents the current state of a cron job."""

    active: list[ObjectReference]
    lastScheduleTime: str
    lastSuccessfulTime: str


class DaemonEndpoint(TypedDict, total=False):
    """DaemonEndpoint contains information about a single Daemon endpoint."""

    Port: Required[int]


class DaemonSet(TypedDict, total=False):
    """DaemonSet represents the configuration of a daemon set."""

    apiVersion: Required[Literal["apps/v1"]]
    kind: Required[Literal["DaemonSet"]]
    metadata: ObjectMeta
    spec: Required[DaemonSetSpec]
    status: DaemonSetStatus


class DaemonSetCondition(TypedDict, total=False):
    """DaemonSetCondition describes the state of a DaemonSet at a certain point."""

    lastTransitionTime: str
    message: str
    reason: str
    status: str
    type: str


class DaemonSetSpec(TypedDict, total=False):
    """DaemonSetSpec is the specification of a daemon set."""

    minReadySeconds: int
    revisionHistoryLimit: int
    selector: Required[LabelSelector]
    template: Required[PodTemplateSpec]
    updateStrategy: DaemonSetUpdateStrategy


class DaemonSetStatus(TypedDict, total=False):
    """DaemonSetStatus represents the current status of a daemon set."""

    collisionCount: int
    conditions: list[DaemonSetCondition]
    currentNumberScheduled: Required[int]
    desiredNumberScheduled: Required[int]
    numberAvailable: int
    numberMisscheduled: Required[int]
    numberReady: Required[int]
    numberUnavailable: int
    observedGeneration: int
    updatedNumberScheduled: int


class DaemonSetUpdateStrategy(TypedDict, total=False):
    """DaemonSetUpdateStrategy is a struct used to control the update strategy for a DaemonSet."""

    rollingUpdate: RollingUpdateDaemonSet
    type: str


class Deployment(TypedDict, total=False):
    """Deployment enables declarative updates for Pods and ReplicaSets."""

    apiVersion: Required[Literal["apps/v1"]]
    kind: Required[Literal["Deployment"]]
    metadata: ObjectMeta
    spec: Required[DeploymentSpec]
    status: DeploymentStatus


class DeploymentCondition(TypedDict, total=False):
    """DeploymentCondition describes the state of a deployment at a certain point."""

    lastTransitionTime: str
    lastUpdateTime: str
    message: str
    reason: str
    status: str
    type: str


class DeploymentSpec(TypedDict, total=False):
    """DeploymentSpec is the specification of the desired behavior of the Deployment."""

    minReadySeconds: int
    paused: bool
    progressDeadlineSeconds: int
    replicas: int
    revisionHistoryLimit: int
    selector: Required[LabelSelector]
    strategy: DeploymentStrategy
    template: Required[PodTemplateSpec]


class DeploymentStatus(TypedDict, total=False):
    """DeploymentStatus is the most recently observed status of the Deployment."""

    availableReplicas: int
    collisionCount: int
    conditions: list[DeploymentCondition]
    observedGeneration: int
    readyReplicas: int
    replicas: int
    terminatingReplicas: int
    unavailableReplicas: int
    updatedReplicas: int


class DeploymentStrategy(TypedDict, total=False):
    """DeploymentStrategy describes how to replace existing pods with new ones."""

    rollingUpdate: RollingUpdateDeployment
    type: str


class DownwardAPIProjection(TypedDict, total=False):
    """Represents downward API info for projecting into a projected volume."""

    items: list[DownwardAPIVolumeFile]


class DownwardAPIVolumeFile(TypedDict, total=False):
    """DownwardAPIVolumeFile represents information to create the file containing the pod field"""

    fieldRef: ObjectFieldSelector
    mode: int
    path: Required[str]
    resourceFieldRef: ResourceFieldSelector
    user: int


class DownwardAPIVolumeSource(TypedDict, total=False):
    """DownwardAPIVolumeSource represents a volume containing downward API info."""

    defaultMode: int
    defaultUser: int
    items: list[DownwardAPIVolumeFile]


class EmptyDirVolumeSource(TypedDict, total=False):
    """Represents an empty directory for a pod."""

    medium: str
    mode: int
    sizeLimit: str | int | float


class EndpointAddress(TypedDict, total=False):
    """EndpointAddress is a tuple that describes single IP address."""

    hostname: str
    ip: Required[str]
    nodeName: str
    targetRef: ObjectReference


class EndpointPort(TypedDict, total=False):
    """EndpointPort is a tuple that describes a single port."""

    appProtocol: str
    name: str
    port: Required[int]
    protocol: str


class EndpointSubset(TypedDict, total=False):
    """EndpointSubset is a group of addresses with a common set of ports."""

    addresses: list[EndpointAddress]
    notReadyAddresses: list[EndpointAddress]
    ports: list[EndpointPort]


class Endpoints(TypedDict, total=False):
    """Endpoints is a collection of endpoints that implement the actual service."""

    apiVersion: Required[Literal["v1"]]
    kind: Required[Literal["Endpoints"]]
    metadata: ObjectMeta
    subsets: list[EndpointSubset]


class EnvFromSource(TypedDict, total=False):
    """EnvFromSource represents the source of a set of ConfigMaps or Secrets"""

    configMapRef: ConfigMapEnvSource
    prefix: str
    secretRef: SecretEnvSource


class EnvVar(TypedDict, total=False):
    """EnvVar represents an environment variable present in a Container."""

    name: Required[str]
    value: str
    valueFrom: EnvVarSource


class EnvVarSource(TypedDict, total=False):
    """EnvVarSource represents a source for the value of an EnvVar."""

    configMapKeyRef: ConfigMapKeySelector
    fieldRef: ObjectFieldSelector
    fileKeyRef: FileKeySelector
    resourceFieldRef: ResourceFieldSelector
    secretKeyRef: SecretKeySelector


class EphemeralContainer(TypedDict, total=False):
    """An EphemeralContainer is a temporary container that you may add to an existing Pod for user-initiated activities such as debugging."""

    args: list[str]
    command: list[str]
    env: list[EnvVar]
    envFrom: list[EnvFromSource]
    image: str
    imagePullPolicy: str
    lifecycle: Lifecycle
    livenessProbe: Probe
    name: Required[str]
    ports: list[ContainerPort]
    readinessProbe: Probe
    resizePolicy: list[ContainerResizePolicy]
    resources: ResourceRequirements
    restartPolicy: str
    restartPolicyRules: list[ContainerRestartRule]
    securityContext: SecurityContext
    startupProbe: Probe
    stdin: bool
    stdinOnce: bool
    targetContainerName: str
    terminationMessagePath: str
    terminationMessagePolicy: str
    tty: bool
    volumeDevices: list[VolumeDevice]
    volumeMounts: list[VolumeMount]
    workingDir: str


class EphemeralVolumeSource(TypedDict, total=False):
    """Represents an ephemeral volume that is handled by a normal storage driver."""

    volumeClaimTemplate: PersistentVolumeClaimTemplate


class Event(TypedDict, total=False):
    """Event is a report of an event somewhere in the cluster."""

    action: str
    apiVersion: Required[Literal["v1"]]
    count: int
    eventTime: str
    firstTimestamp: str
    involvedObject: Required[ObjectReference]
    kind: Required[Literal["Event"]]
    lastTimestamp: str
    message: str
    metadata: Required[ObjectMeta]
    reason: str
    related: ObjectReference
    reportingComponent: str
    reportingInstance: str
    series: EventSeries
    source: EventSource
    type: str


class EventSeries(TypedDict, total=False):
    """EventSeries contain information on series of events, i.e."""

    count: int
    lastObservedTime: str


class EventSource(TypedDict, total=False):
    """EventSource contains information for an event."""

    component: str
    host: str


class EvictionResponder(TypedDict, total=False):
    """EvictionResponder allows you to specify the responder reacting to an Eviction."""

    name: Required[str]
    priority: Required[int]


class ExecAction(TypedDict, total=False):
    """ExecAction describes a "run in container" action."""

    command: list[str]


class FCVolumeSource(TypedDict, total=False):
    """Represents a Fibre Channel volume."""

    fsType: str
    lun: int
    readOnly: bool
    targetWWNs: list[str]
    wwids: list[str]


class FileKeySelector(TypedDict, total=False):
    """FileKeySelector selects a key of the env file."""

    key: Required[str]
    optional: bool
    path: Required[str]
    volumeName: Required[str]


class FlexPersistentVolumeSource(TypedDict, total=False):
    """FlexPersistentVolumeSource represents a generic persistent volume resource that is provisioned/attached using an exec based plugin."""

    driver: Required[str]
    fsType: str
    options: dict[str, str]
    readOnly: bool
    secretRef: SecretReference


class FlexVolumeSource(TypedDict, total=False):
    """FlexVolume represents a generic volume resource that is provisioned/attached using an exec based plugin."""

    driver: Required[str]
    fsType: str
    options: dict[str, str]
    readOnly: bool
    secretRef: LocalObjectReference


class FlockerVolumeSource(TypedDict, total=False):
    """Represents a Flocker volume mounted by the Flocker agent."""

    datasetName: str
    datasetUUID: str


class GCEPersistentDiskVolumeSource(TypedDict, total=False):
    """Represents a Persistent Disk resource in Google Compute Engine."""

    fsType: str
    partition: int
    pdName: Required[str]
    readOnly: bool


class GRPCAction(TypedDict, total=False):
    """GRPCAction specifies an action involving a GRPC service."""

    mode: str
    port: Required[int]
    service: str


class GitRepoVolumeSource(TypedDict, total=False):
    """Represents a volume that is populated with the contents of a git repository."""

    directory: str
    repository: Required[str]
    revision: str


class GlusterfsPersistentVolumeSource(TypedDict, total=False):
    """Represents a Glusterfs mount that lasts the lifetime of a pod."""

    endpoints: Required[str]
    endpointsNamespace: str
    path: Required[str]
    readOnly: bool


class GlusterfsVolumeSource(TypedDict, total=False):
    """Represents a Glusterfs mount that lasts the lifetime of a pod."""

    endpoints: Required[str]
    path: Required[str]
    readOnly: bool


class HTTPGetAction(TypedDict, total=False):
    """HTTPGetAction describes an action based on HTTP Get requests."""

    host: str
    httpHeaders: list[HTTPHeader]
    path: str
    port: Required[int | str]
    protocol: str
    scheme: str


class HTTPHeader(TypedDict, total=False):
    """HTTPHeader describes a custom header to be used in HTTP probes"""

    name: Required[str]
    value: Required[str]


class HTTPIngressPath(TypedDict, total=False):
    """HTTPIngressPath associates a path with a backend."""

    backend: Required[IngressBackend]
    path: str
    pathType: Required[str]


class HTTPIngressRuleValue(TypedDict, total=False):
    """HTTPIngressRuleValue is a list of http selectors pointing to backends."""

    paths: Required[list[HTTPIngressPath]]


class HostAlias(TypedDict, total=False):
    """HostAlias holds the mapping between IP and hostnames that will be injected as an entry in the pod's hosts file."""

    hostnames: list[str]
    ip: Required[str]


class HostIP(TypedDict, total=False):
    """HostIP represents a single IP address allocated to the host."""

    ip: Required[str]


class HostPathVolumeSource(TypedDict, total=False):
    """Represents a host path mapped into a pod."""

    path: Required[str]
    type: str


class ISCSIPersistentVolumeSource(TypedDict, total=False):
    """ISCSIPersistentVolumeSource represents an ISCSI disk."""

    chapAuthDiscovery: bool
    chapAuthSession: bool
    fsType: str
    initiatorName: str
    iqn: Required[str]
    iscsiInterface: str
    lun: Required[int]
    portals: list[str]
    readOnly: bool
    secretRef: SecretReference
    targetPortal: Required[str]


class ISCSIVolumeSource(TypedDict, total=False):
    """Represents an ISCSI disk."""

    chapAuthDiscovery: bool
    chapAuthSession: bool
    fsType: str
    initiatorName: str
    iqn: Required[str]
    iscsiInterface: str
    lun: Required[int]
    portals: list[str]
    readOnly: bool
    secretRef: LocalObjectReference
    targetPortal: Required[str]


class ImageVolumeSource(TypedDict, total=False):
    """ImageVolumeSource represents a image volume resource."""

    pullPolicy: str
    reference: str


class ImageVolumeStatus(TypedDict, total=False):
    """ImageVolumeStatus represents the image-based volume status."""

    imageRef: Required[str]


class Ingress(TypedDict, total=False):
    """Ingress is a collection of rules that allow inbound connections to reach the endpoints defined by a backend."""

    apiVersion: Required[Literal["networking.k8s.io/v1"]]
    kind: Required[Literal["Ingress"]]
    metadata: ObjectMeta
    spec: IngressSpec
    status: IngressStatus


class IngressBackend(TypedDict, total=False):
    """IngressBackend describes all endpoints for a given service and port."""

    resource: TypedLocalObjectReference
    service: IngressServiceBackend


class IngressLoadBalancerIngress(TypedDict, total=False):
    """IngressLoadBalancerIngress represents the status of a load-balancer ingress point."""

    hostname: str
    ip: str
    ports: list[IngressPortStatus]


class IngressLoadBalancerStatus(TypedDict, total=False):
    """IngressLoadBalancerStatus represents the status of a load-balancer."""

    ingress: list[IngressLoadBalancerIngress]


class IngressPortStatus(TypedDict, total=False):
    """IngressPortStatus represents the error condition of a service port"""

    error: str
    port: Required[int]
    protocol: Required[str]


class IngressRule(TypedDict, total=False):
    """IngressRule represents the rules mapping the paths under a specified host to the related backend services."""

    host: str
    http: HTTPIngressRuleValue


class IngressServiceBackend(TypedDict, total=False):
    """IngressServiceBackend references a Kubernetes Service as a Backend."""

    name: Required[str]
    port: ServiceBackendPort


class IngressSpec(TypedDict, total=False):
    """IngressSpec describes the Ingress the user wishes to exist."""

    defaultBackend: IngressBackend
    ingressClassName: str
    rules: list[IngressRule]
    tls: list[IngressTLS]


class IngressStatus(TypedDict, total=False):
    """IngressStatus describe the current state of the Ingress."""

    loadBalancer: IngressLoadBalancerStatus


class IngressTLS(TypedDict, total=False):
    """IngressTLS describes the transport layer security associated with an ingress."""

    hosts: list[str]
    secretName: str


class Job(TypedDict, total=False):
    """Job represents the configuration of a single job."""

    apiVersion: Required[Literal["batch/v1"]]
    kind: Required[Literal["Job"]]
    metadata: ObjectMeta
    spec: JobSpec
    status: JobStatus


class JobCondition(TypedDict, total=False):
    """JobCondition describes current state of a job."""

    lastProbeTime: str
    lastTransitionTime: str
    message: str
    reason: str
    status: Required[str]
    type: Required[str]


class JobSchedulingConfiguration(TypedDict, total=False):
    """JobSchedulingConfiguration composes the reusable workload-aware scheduling building blocks."""

    disruptionMode: WorkloadPodGroupDisruptionMode
    resourceClaims: list[WorkloadPodGroupResourceClaim]
    schedulingConstraints: WorkloadPodGroupSchedulingConstraints
    schedulingPolicy: WorkloadPodGroupSchedulingPolicy


class JobSpec(TypedDict, total=False):
    """JobSpec describes how the job execution will look like."""

    activeDeadlineSeconds: int
    backoffLimit: int
    backoffLimitPerIndex: int
    completionMode: str
    completions: int
    managedBy: str
    manualSelector: bool
    maxFailedIndexes: int
    parallelism: int
    podFailurePolicy: PodFailurePolicy
    podReplacementPolicy: str
    scheduling: JobSchedulingConfiguration
    selector: LabelSelector
    successPolicy: SuccessPolicy
    suspend: bool
    template: Required[PodTemplateSpec]
    ttlSecondsAfterFinished: int


class JobStatus(TypedDict, total=False):
    """JobStatus represents the current state of a Job."""

    active: int
    completedIndexes: str
    completionTime: str
    conditions: list[JobCondition]
    failed: int
    failedIndexes: str
    ready: int
    startTime: str
    succeeded: int
    terminating: int
    uncountedTerminatedPods: UncountedTerminatedPods


class JobTemplateSpec(TypedDict, total=False):
    """JobTemplateSpec describes the data a Job should have when created from a template"""

    metadata: ObjectMeta
    spec: JobSpec


class KeyToPath(TypedDict, total=False):
    """Maps a string key to a path within a volume."""

    key: Required[str]
    mode: int
    path: Required[str]
    user: int


class LabelSelector(TypedDict, total=False):
    """A label selector is a label query over a set of resources."""

    matchExpressions: list[LabelSelectorRequirement]
    matchLabels: dict[str, str]


class LabelSelectorRequirement(TypedDict, total=False):
    """A label selector requirement is a selector that contains values, a key, and an operator that relates the key and values."""

    key: Required[str]
    operator: Required[str]
    values: list[str]


class Lease(TypedDict, total=False):
    """Lease defines a lease concept."""

    apiVersion: Required[Literal["coordination.k8s.io/v1"]]
    kind: Required[Literal["Lease"]]
    metadata: ObjectMeta
    spec: LeaseSpec


class LeaseSpec(TypedDict, total=False):
    """LeaseSpec is a specification of a Lease."""

    acquireTime: str
    holderIdentity: str
    leaseDurationSeconds: int
    leaseTransitions: int
    preferredHolder: str
    renewTime: str
    strategy: str


class Lifecycle(TypedDict, total=False):
    """Lifecycle describes actions that the management system should take in response to container lifecycle events."""

    postStart: LifecycleHandler
    preStop: LifecycleHandler
    stopSignal: str


class LifecycleHandler(TypedDict, total=False):
    """LifecycleHandler defines a specific action that should be taken in a lifecycle hook."""

    exec: ExecAction
    httpGet: HTTPGetAction
    sleep: SleepAction
    tcpSocket: TCPSocketAction


class LinuxContainerUser(TypedDict, total=False):
    """LinuxContainerUser represents user identity information in Linux containers"""

    gid: Required[int]
    supplementalGroups: list[int]
    uid: Required[int]


class LoadBalancerIngress(TypedDict, total=False):
    """LoadBalancerIngress represents the status of a load-balancer ingress point: traffic intended for the service should be sent to an ingress point."""

    hostname: str
    ip: str
    ipMode: str
    ports: list[PortStatus]


class LoadBalancerStatus(TypedDict, total=False):
    """LoadBalancerStatus represents the status of a load-balancer."""

    ingress: list[LoadBalancerIngress]


class LocalObjectReference(TypedDict, total=False):
    """LocalObjectReference contains enough information to let you locate the referenced object inside the same namespace."""

    name: str


class LocalVolumeSource(TypedDict, total=False):
    """Local represents directly-attached storage with node affinity"""

    fsType: str
    path: Required[str]


class ManagedFieldsEntry(TypedDict, total=False):
    """ManagedFieldsEntry is a workflow-id, a FieldSet and the group version of the resource that the fieldset applies to."""

    apiVersion: str
    fieldsType: str
    fieldsV1: dict[str, Any]
    manager: str
    operation: str
    subresource: str
    time: str


class ModifyVolumeStatus(TypedDict, total=False):
    """ModifyVolumeStatus represents the status object of ControllerModifyVolume operation"""

    status: Required[str]
    targetVolumeAttributesClassName: str


class NFSVolumeSource(TypedDict, total=False):
    """Represents an NFS mount that lasts the lifetime of a pod."""

    path: Required[str]
    readOnly: bool
    server: Required[str]


class Namespace(TypedDict, total=False):
    """Namespace provides a scope for Names."""

    apiVersion: Required[Literal["v1"]]
    kind: Required[Literal["Namespace"]]
    metadata: ObjectMeta
    spec: NamespaceSpec
    status: NamespaceStatus


class NamespaceCondition(TypedDict, total=False):
    """NamespaceCondition contains details about state of namespace."""

    lastTransitionTime: str
    message: str
    reason: str
    status: Required[str]
    type: Required[str]


class NamespaceSpec(TypedDict, total=False):
    """NamespaceSpec describes the attributes on a Namespace."""

    finalizers: list[str]


class NamespaceStatus(TypedDict, total=False):
    """NamespaceStatus is information about the current status of a Namespace."""

    conditions: list[NamespaceCondition]
    phase: str


class Node(TypedDict, total=False):
    """Node is a worker node in Kubernetes."""

    apiVersion: Required[Literal["v1"]]
    kind: Required[Literal["Node"]]
    metadata: ObjectMeta
    spec: NodeSpec
    status: NodeStatus


class NodeAddress(TypedDict, total=False):
    """NodeAddress contains information for the node's address."""

    address: Required[str]
    type: Required[str]


class NodeAffinity(TypedDict, total=False):
    """Node affinity is a group of node affinity scheduling rules."""

    preferredDuringSchedulingIgnoredDuringExecution: list[PreferredSchedulingTerm]
    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector


class NodeAllocatableMappedResources(TypedDict, total=False):
    """NodeAllocatableMappedResources describes mapped node allocatable resource allocations."""

    name: Required[str]
    quantity: Required[str | int | float]


class NodeAllocatableOverheadResources(TypedDict, total=False):
    """NodeAllocatableOverheadResources describes auxiliary overhead resource allocations."""

    name: Required[str]
    perContainer: str | int | float
    perPod: str | int | float


class NodeAllocatableResourceClaimStatus(TypedDict, total=False):
    """NodeAllocatableResourceClaimStatus describes the status of node allocatable resources allocated via DRA."""

    containers: list[str]
    mapping: list[NodeAllocatableMappedResources]
    overhead: list[NodeAllocatableOverheadResources]
    resourceClaimName: Required[str]


class NodeCondition(TypedDict, total=False):
    """NodeCondition contains condition information for a node."""

    lastHeartbeatTime: str
    lastTransitionTime: str
    message: str
    reason: str
    status: Required[str]
    type: Required[str]


class NodeConfigSource(TypedDict, total=False):
    """NodeConfigSource specifies a source of node configuration."""

    configMap: ConfigMapNodeConfigSource


class NodeConfigStatus(TypedDict, total=False):
    """NodeConfigStatus describes the status of the config assigned by Node.Spec.ConfigSource."""

    active: NodeConfigSource
    assigned: NodeConfigSource
    error: str
    lastKnownGood: NodeConfigSource


class NodeDaemonEndpoints(TypedDict, total=False):
    """NodeDaemonEndpoints lists ports opened by daemons running on the Node."""

    kubeletEndpoint: DaemonEndpoint


class NodeFeatures(TypedDict, total=False):
    """NodeFeatures describes the set of features implemented by the CRI implementation."""

    supplementalGroupsPolicy: bool


class NodePodPreemptionPolicy(TypedDict, total=False):
    """NodePodPreemptionPolicy defines the node-level policies governing preemption for pods on this node."""

    disableResizePreemption: list[str]


class NodeRuntimeHandler(TypedDict, total=False):
    """NodeRuntimeHandler is a set of runtime handler information."""

    features: NodeRuntimeHandlerFeatures
    name: str


class NodeRuntimeHandlerFeatures(TypedDict, total=False):
    """NodeRuntimeHandlerFeatures is a set of features implemented by the runtime handler."""

    recursiveReadOnlyMounts: bool
    userNamespaces: bool


class NodeSelector(TypedDict, total=False):
    """A node selector represents the union of the results of one or more label queries over a set of nodes; that is, it represents the OR of the selectors represented by the node selector terms."""

    nodeSelectorTerms: Required[list[NodeSelectorTerm]]


class NodeSelectorRequirement(TypedDict, total=False):
    """A node selector requirement is a selector that contains values, a key, and an operator that relates the key and values."""

    key: Required[str]
    operator: Required[str]
    values: list[str]


class NodeSelectorTerm(TypedDict, total=False):
    """A null or empty node selector term matches no objects."""

    matchExpressions: list[NodeSelectorRequirement]
    matchFields: list[NodeSelectorRequirement]


class NodeSpec(TypedDict, total=False):
    """NodeSpec describes the attributes that a node is created with."""

    configSource: NodeConfigSource
    externalID: str
    podCIDR: str
    podCIDRs: list[str]
    podPreemptionPolicy: NodePodPreemptionPolicy
    providerID: str
    taints: list[Taint]
    unschedulable: bool


class NodeStatus(TypedDict, total=False):
    """NodeStatus is information about the current status of a node."""

    addresses: list[NodeAddress]
    allocatable: dict[str, str | int | float]
    capacity: dict[str, str | int | float]
    conditions: list[NodeCondition]
    config: NodeConfigStatus
    daemonEndpoints: NodeDaemonEndpoints
    declaredFeatures: list[str]
    features: NodeFeatures
    images: list[ContainerImage]
    nodeInfo: NodeSystemInfo
    phase: str
    runtimeHandlers: list[NodeRuntimeHandler]
    volumesAttached: list[AttachedVolume]
    volumesInUse: list[str]


class NodeSwapStatus(TypedDict, total=False):
    """NodeSwapStatus represents swap memory information."""

    capacity: int


class NodeSystemInfo(TypedDict, total=False):
    """NodeSystemInfo is a set of ids/uuids to uniquely identify the node."""

    architecture: Required[str]
    bootID: Required[str]
    containerRuntimeVersion: Required[str]
    kernelVersion: Required[str]
    kubeProxyVersion: Required[str]
    kubeletVersion: Required[str]
    machineID: Required[str]
    operatingSystem: Required[str]
    osImage: Required[str]
    runningInUserNamespace: bool
    swap: NodeSwapStatus
    systemUUID: Required[str]


class ObjectFieldSelector(TypedDict, total=False):
    """ObjectFieldSelector selects an APIVersioned field of an object."""

    apiVersion: str
    fieldPath: Required[str]


class ObjectMeta(TypedDict, total=False):
    """ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create."""

    annotations: dict[str, str]
    creationTimestamp: str
    deletionGracePeriodSeconds: int
    deletionTimestamp: str
    finalizers: list[str]
    generateName: str
    generation: int
    labels: dict[str, str]
    managedFields: list[ManagedFieldsEntry]
    name: str
    namespace: str
    ownerReferences: list[OwnerReference]
    resourceVersion: str
    selfLink: str
    uid: str


class ObjectReference(TypedDict, total=False):
    """ObjectReference contains enough information to let you inspect or modify the referred object."""

    apiVersion: str
    fieldPath: str
    kind: str
    name: str
    namespace: str
    resourceVersion: str
    uid: str


class OwnerReference(TypedDict, total=False):
    """OwnerReference contains enough information to let you identify an owning object."""

    apiVersion: Required[str]
    blockOwnerDeletion: bool
    controller: bool
    kind: Required[str]
    name: Required[str]
    uid: Required[str]


class PersistentVolume(TypedDict, total=False):
    """PersistentVolume (PV) is a storage resource provisioned by an administrator."""

    apiVersion: Required[Literal["v1"]]
    kind: Required[Literal["PersistentVolume"]]
    metadata: ObjectMeta
    spec: PersistentVolumeSpec
    status: PersistentVolumeStatus


class PersistentVolumeClaim(TypedDict, total=False):
    """PersistentVolumeClaim is a user's request for and claim to a persistent volume"""

    apiVersion: Required[Literal["v1"]]
    kind: Required[Literal["PersistentVolumeClaim"]]
    metadata: ObjectMeta
    spec: PersistentVolumeClaimSpec
    status: PersistentVolumeClaimStatus


class PersistentVolumeClaimCondition(TypedDict, total=False):
    """PersistentVolumeClaimCondition contains details about state of pvc"""

    lastProbeTime: str
    lastTransitionTime: str
    message: str
    reason: str
    status: Required[str]
    type: Required[str]


class PersistentVolumeClaimSpec(TypedDict, total=False):
    """PersistentVolumeClaimSpec describes the common attributes of storage devices and allows a Source for provider-specific attributes"""

    accessModes: list[str]
    dataSource: TypedLocalObjectReference
    dataSourceRef: TypedObjectReference
    resources: VolumeResourceRequirements
    selector: LabelSelector
    storageClassName: str
    volumeAttributesClassName: str
    volumeMode: str
    volumeName: str


class PersistentVolumeClaimStatus(TypedDict, total=False):
    """PersistentVolumeClaimStatus is the current status of a persistent volume claim."""

    accessModes: list[str]
    allocatedResourceStatuses: dict[str, str]
    allocatedResources: dict[str, str | int | float]
    capacity: dict[str, str | int | float]
    conditions: list[PersistentVolumeClaimCondition]
    currentVolumeAttributesClassName: str
    healthStatus: VolumeHealthStatus
    modifyVolumeStatus: ModifyVolumeStatus
    phase: str


class PersistentVolumeClaimTemplate(TypedDict, total=False):
    """PersistentVolumeClaimTemplate is used to produce PersistentVolumeClaim objects as part of an EphemeralVolumeSource."""

    metadata: ObjectMeta
    spec: Required[PersistentVolumeClaimSpec]


class PersistentVolumeClaimVolumeSource(TypedDict, total=False):
    """PersistentVolumeClaimVolumeSource references the user's PVC in the same namespace."""

    claimName: Required[str]
    readOnly: bool


class PersistentVolumeSpec(TypedDict, total=False):
    """PersistentVolumeSpec is the specification of a persistent volume."""

    accessModes: list[str]
    awsElasticBlockStore: AWSElasticBlockStoreVolumeSource
    azureDisk: AzureDiskVolumeSource
    azureFile: AzureFilePersistentVolumeSource
    capacity: dict[str, str | int | float]
    cephfs: CephFSPersistentVolumeSource
    cinder: CinderPersistentVolumeSource
    claimRef: ObjectReference
    csi: CSIPersistentVolumeSource
    fc: FCVolumeSource
    flexVolume: FlexPersistentVolumeSource
    flocker: FlockerVolumeSource
    gcePersistentDisk: GCEPersistentDiskVolumeSource
    glusterfs: GlusterfsPersistentVolumeSource
    hostPath: HostPathVolumeSource
    iscsi: ISCSIPersistentVolumeSource
    local: LocalVolumeSource
    mountOptions: list[str]
    nfs: NFSVolumeSource
    nodeAffinity: VolumeNodeAffinity
    persistentVolumeReclaimPolicy: str
    photonPersistentDisk: PhotonPersistentDiskVolumeSource
    portworxVolume: PortworxVolumeSource
    quobyte: QuobyteVolumeSource
    rbd: RBDPersistentVolumeSource
    scaleIO: ScaleIOPersistentVolumeSource
    storageClassName: str
    storageos: StorageOSPersistentVolumeSource
    volumeAttributesClassName: str
    volumeMode: str
    vsphereVolume: VsphereVirtualDiskVolumeSource


class PersistentVolumeStatus(TypedDict, total=False):
    """PersistentVolumeStatus is the current status of a persistent volume."""

    lastPhaseTransitionTime: str
    message: str
    phase: str
    reason: str


class PhotonPersistentDiskVolumeSource(TypedDict, total=False):
    """Represents a Photon Controller persistent disk resource."""

    fsType: str
    pdID: Required[str]


class Pod(TypedDict, total=False):
    """Pod is a collection of containers that can run on a host."""

    apiVersion: Required[Literal["v1"]]
    kind: Required[Literal["Pod"]]
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


class PodAffinity(TypedDict, total=False):
    """Pod affinity is a group of inter pod affinity scheduling rules."""

    preferredDuringSchedulingIgnoredDuringExecution: list[WeightedPodAffinityTerm]
    requiredDuringSchedulingIgnoredDuringExecution: list[PodAffinityTerm]


class PodAffinityTerm(TypedDict, total=False):
    """Defines a set of pods (namely those matching the labelSelector relative to the given namespace(s)) that this pod should be co-located (affinity) or not co-located (anti-affinity) with, where co-located is defined as running on a node whose value of the label with key <topologyKey> matches that of any node on which a pod of the set of pods is running"""

    labelSelector: LabelSelector
    matchLabelKeys: list[str]
    mismatchLabelKeys: list[str]
    namespaceSelector: LabelSelector
    namespaces: list[str]
    topologyKey: Required[str]


class PodAntiAffinity(TypedDict, total=False):
    """Pod anti affinity is a group of inter pod anti affinity scheduling rules."""

    preferredDuringSchedulingIgnoredDuringExecution: list[WeightedPodAffinityTerm]
    requiredDuringSchedulingIgnoredDuringExecution: list[PodAffinityTerm]


class PodCertificateProjection(TypedDict, total=False):
    """PodCertificateProjection provides a private key and X.509 certificate in the pod filesystem."""

    certificateChainPath: str
    credentialBundlePath: str
    keyPath: str
    keyType: Required[str]
    maxExpirationSeconds: int
    signerName: Required[str]
    user: int
    userAnnotations: dict[str, str]


class PodCondition(TypedDict, total=False):
    """PodCondition contains details for the current condition of this pod."""

    lastProbeTime: str
    lastTransitionTime: str
    message: str
    observedGeneration: int
    reason: str
    status: Required[str]
    type: Required[str]


class PodDNSConfig(TypedDict, total=False):
    """PodDNSConfig defines the DNS parameters of a pod in addition to those generated from DNSPolicy."""

    nameservers: list[str]
    options: list[PodDNSConfigOption]
    searches: list[str]


class PodDNSConfigOption(TypedDict, total=False):
    """PodDNSConfigOption defines DNS resolver options of a pod."""

    name: str
    value: str


class PodDisruptionBudget(TypedDict, total=False):
    """PodDisruptionBudget is an object to define the max disruption that can be caused to a collection of pods"""

    apiVersion: Required[Literal["policy/v1"]]
    kind: Required[Literal["PodDisruptionBudget"]]
    metadata: ObjectMeta
    spec: PodDisruptionBudgetSpec
    status: PodDisruptionBudgetStatus


class PodDisruptionBudgetSpec(TypedDict, total=False):
    """PodDisruptionBudgetSpec is a description of a PodDisruptionBudget."""

    maxUnavailable: int | str
    minAvailable: int | str
    selector: LabelSelector
    unhealthyPodEvictionPolicy: str


class PodDisruptionBudgetStatus(TypedDict, total=False):
    """PodDisruptionBudgetStatus represents information about the status of a PodDisruptionBudget."""

    conditions: list[Condition]
    currentHealthy: int
    desiredHealthy: int
    disruptedPods: dict[str, str]
    disruptionsAllowed: int
    expectedPods: int
    observedGeneration: int


class PodExtendedResourceClaimStatus(TypedDict, total=False):
    """PodExtendedResourceClaimStatus is stored in the PodStatus for the extended resource requests backed by DRA."""

    requestMappings: Required[list[ContainerExtendedResourceRequest]]
    resourceClaimName: Required[str]


class PodFailurePolicy(TypedDict, total=False):
    """PodFailurePolicy describes how failed pods influence the backoffLimit."""

    rules: Required[list[PodFailurePolicyRule]]


class PodFailurePolicyOnExitCodesRequirement(TypedDict, total=False):
    """PodFailurePolicyOnExitCodesRequirement describes the requirement for handling a failed pod based on its container exit codes."""

    containerName: str
    operator: Required[str]
    values: Required[list[int]]


class PodFailurePolicyOnPodConditionsPattern(TypedDict, total=False):
    """PodFailurePolicyOnPodConditionsPattern describes a pattern for matching an actual pod condition type."""

    status: str
    type: Required[str]


class PodFailurePolicyRule(TypedDict, total=False):
    """PodFailurePolicyRule describes how a pod failure is handled when the requirements are met."""

    action: Required[str]
    onExitCodes: PodFailurePolicyOnExitCodesRequirement
    onPodConditions: list[PodFailurePolicyOnPodConditionsPattern]


class PodIP(TypedDict, total=False):
    """PodIP represents a single IP address allocated to the pod."""

    ip: Required[str]


class PodOS(TypedDict, total=False):
    """PodOS defines the OS parameters of a pod."""

    name: Required[str]


class PodReadinessGate(TypedDict, total=False):
    """PodReadinessGate contains the reference to a pod condition"""

    conditionType: Required[str]


class PodResourceClaim(TypedDict, total=False):
    """PodResourceClaim references exactly one ResourceClaim, either directly or by naming a ResourceClaimTemplate which is then turned into a ResourceClaim for the pod."""

    name: Required[str]
    resourceClaimName: str
    resourceClaimTemplateName: str


class PodResourceClaimStatus(TypedDict, total=False):
    """PodResourceClaimStatus is stored in the PodStatus for each PodResourceClaim which references a ResourceClaimTemplate."""

    name: Required[str]
    resourceClaimName: str


class PodSchedulingGate(TypedDict, total=False):
    """PodSchedulingGate is associated to a Pod to guard its scheduling."""

    name: Required[str]


class PodSchedulingGroup(TypedDict, total=False):
    """PodSchedulingGroup identifies the runtime scheduling group instance that a Pod belongs to."""

    podGroupName: str


class PodSecurityContext(TypedDict, total=False):
    """PodSecurityContext holds pod-level security attributes and common container settings."""

    appArmorProfile: AppArmorProfile
    fsGroup: int
    fsGroupChangePolicy: str
    runAsGroup: int
    runAsNonRoot: bool
    runAsUser: int
    seLinuxChangePolicy: str
    seLinuxOptions: SELinuxOptions
    seccompProfile: SeccompProfile
    supplementalGroups: list[int]
    supplementalGroupsPolicy: str
    sysctls: list[Sysctl]
    windowsOptions: WindowsSecurityContextOptions


class PodSpec(TypedDict, total=False):
    """PodSpec is a description of a pod."""

    activeDeadlineSeconds: int
    affinity: Affinity
    automountServiceAccountToken: bool
    containers: Required[list[Container]]
    dnsConfig: PodDNSConfig
    dnsPolicy: str
    enableServiceLinks: bool
    ephemeralContainers: list[EphemeralContainer]
    evictionResponders: list[EvictionResponder]
    hostAliases: list[HostAlias]
    hostIPC: bool
    hostNetwork: bool
    hostPID: bool
    hostUsers: bool
    hostname: str
    hostnameOverride: str
    imagePullSecrets: list[LocalObjectReference]
    initContainers: list[Container]
    nodeName: str
    nodeSelector: dict[str, str]
    os: PodOS
    overhead: dict[str, str | int | float]
    preemptionPolicy: str
    priority: int
    priorityClassName: str
    readinessGates: list[PodReadinessGate]
    resourceClaims: list[PodResourceClaim]
    resources: ResourceRequirements
    restartPolicy: str
    runtimeClassName: str
    schedulerName: str
    schedulingGates: list[PodSchedulingGate]
    schedulingGroup: PodSchedulingGroup
    securityContext: PodSecurityContext
    serviceAccount: str
    serviceAccountName: str
    setHostnameAsFQDN: bool
    shareProcessNamespace: bool
    subdomain: str
    terminationGracePeriodSeconds: int
    tolerations: list[Toleration]
    topologySpreadConstraints: list[TopologySpreadConstraint]
    volumes: list[Volume]


class PodStatus(TypedDict, total=False):
    """PodStatus represents information about the status of a pod."""

    allocatedResources: dict[str, str | int | float]
    conditions: list[PodCondition]
    containerStatuses: list[ContainerStatus]
    ephemeralContainerStatuses: list[ContainerStatus]
    extendedResourceClaimStatus: PodExtendedResourceClaimStatus
    hostIP: str
    hostIPs: list[HostIP]
    initContainerStatuses: list[ContainerStatus]
    message: str
    nodeAllocatableResourceClaimStatuses: list[NodeAllocatableResourceClaimStatus]
    nominatedNodeName: str
    observedGeneration: int
    phase: str
    podIP: str
    podIPs: list[PodIP]
    qosClass: str
    reason: str
    resize: str
    resourceClaimStatuses: list[PodResourceClaimStatus]
    resources: ResourceRequirements
    startTime: str
    volumeHealth: list[PodVolumeHealth]


class PodTemplateSpec(TypedDict, total=False):
    """PodTemplateSpec describes the data a pod should have when created from a template"""

    metadata: ObjectMeta
    spec: PodSpec


class PodVolumeHealth(TypedDict, total=False):
    """PodVolumeHealth contains health information for a volume used by a pod, reported by the CSI node plugin via the kubelet."""

    healthConditions: list[VolumeHealthCondition]
    lastTransitionTime: str
    name: Required[str]


class PolicyRule(TypedDict, total=False):
    """PolicyRule holds information that describes a policy rule, but does not contain information about who the rule applies to or which namespace the rule applies to."""

    apiGroups: list[str]
    nonResourceURLs: list[str]
    resourceNames: list[str]
    resources: list[str]
    verbs: Required[list[str]]


class PortStatus(TypedDict, total=False):
    """PortStatus represents the error condition of a service port"""

    error: str
    port: Required[int]
    protocol: Required[str]


class PortworxVolumeSource(TypedDict, total=False):
    """PortworxVolumeSource represents a Portworx volume resource."""

    fsType: str
    readOnly: bool
    volumeID: Required[str]


class PreferredSchedulingTerm(TypedDict, total=False):
    """An empty preferred scheduling term matches all objects with implicit weight 0 (i.e."""

    preference: Required[NodeSelectorTerm]
    weight: Required[int]


class Probe(TypedDict, total=False):
    """Probe describes a health check to be performed against a container to determine whether it is alive or ready to receive traffic."""

    exec: ExecAction
    failureThreshold: int
    grpc: GRPCAction
    httpGet: HTTPGetAction
    initialDelaySeconds: int
    periodSeconds: int
    successThreshold: int
    tcpSocket: TCPSocketAction
    terminationGracePeriodSeconds: int
    timeoutSeconds: int


class ProjectedVolumeSource(TypedDict, total=False):
    """Represents a projected volume source"""

    defaultMode: int
    defaultUser: int
    sources: list[VolumeProjection]


class QuobyteVolumeSource(TypedDict, total=False):
    """Represents a Quobyte mount that lasts the lifetime of a pod."""

    group: str
    readOnly: bool
    registry: Required[str]
    tenant: str
    user: str
    volume: Required[str]


class RBDPersistentVolumeSource(TypedDict, total=False):
    """Represents a Rados Block Device mount that lasts the lifetime of a pod."""

    fsType: str
    image: Required[str]
    keyring: str
    monitors: Required[list[str]]
    pool: str
    readOnly: bool
    secretRef: SecretReference
    user: str


class RBDVolumeSource(TypedDict, total=False):
    """Represents a Rados Block Device mount that lasts the lifetime of a pod."""

    fsType: str
    image: Required[str]
    keyring: str
    monitors: Required[list[str]]
    pool: str
    readOnly: bool
    secretRef: LocalObjectReference
    user: str


class ReplicaSet(TypedDict, total=False):
    """ReplicaSet ensures that a specified number of pod replicas are running at any given time."""

    apiVersion: Required[Literal["apps/v1"]]
    kind: Required[Literal["ReplicaSet"]]
    metadata: ObjectMeta
    spec: Required[ReplicaSetSpec]
    status: ReplicaSetStatus


class ReplicaSetCondition(TypedDict, total=False):
    """ReplicaSetCondition describes the state of a replica set at a certain point."""

    lastTransitionTime: str
    message: str
    reason: str
    status: str
    type: str


class ReplicaSetSpec(TypedDict, total=False):
    """ReplicaSetSpec is the specification of a ReplicaSet."""

    minReadySeconds: int
    replicas: int
    selector: Required[LabelSelector]
    template: PodTemplateSpec


class ReplicaSetStatus(TypedDict, total=False):
    """ReplicaSetStatus represents the current status of a ReplicaSet."""

    availableReplicas: int
    conditions: list[ReplicaSetCondition]
    fullyLabeledReplicas: int
    observedGeneration: int
    readyReplicas: int
    replicas: Required[int]
    terminatingReplicas: int


class ResourceClaim(TypedDict, total=False):
    """ResourceClaim references one entry in PodSpec.ResourceClaims."""

    name: Required[str]
    request: str


class ResourceFieldSelector(TypedDict, total=False):
    """ResourceFieldSelector represents container resources (cpu, memory) and their output format"""

    containerName: str
    divisor: str | int | float
    resource: Required[str]


class ResourceHealth(TypedDict, total=False):
    """ResourceHealth represents the health of a resource."""

    health: str
    message: str
    resourceID: Required[str]


class ResourceRequirements(TypedDict, total=False):
    """ResourceRequirements describes the compute resource requirements."""

    claims: list[ResourceClaim]
    limits: dict[str, str | int | float]
    requests: dict[str, str | int | float]


class ResourceStatus(TypedDict, total=False):
    """ResourceStatus represents the status of a single resource allocated to a Pod."""

    name: Required[str]
    resources: list[ResourceHealth]


class Role(TypedDict, total=False):
    """Role is a namespaced, logical grouping of PolicyRules that can be referenced as a unit by a RoleBinding."""

    apiVersion: Required[Literal["rbac.authorization.k8s.io/v1"]]
    kind: Required[Literal["Role"]]
    metadata: ObjectMeta
    rules: list[PolicyRule]


class RoleBinding(TypedDict, total=False):
    """RoleBinding references a role, but does not contain it."""

    apiVersion: Required[Literal["rbac.authorization.k8s.io/v1"]]
    kind: Required[Literal["RoleBinding"]]
    metadata: ObjectMeta
    roleRef: Required[RoleRef]
    subjects: list[Subject]


class RoleRef(TypedDict, total=False):
    """RoleRef contains information that points to the role being used"""

    apiGroup: str
    kind: Required[str]
    name: Required[str]


class RollingUpdateDaemonSet(TypedDict, total=False):
    """Spec to control the desired behavior of daemon set rolling update."""

    maxSurge: int | str
    maxUnavailable: int | str


class RollingUpdateDeployment(TypedDict, total=False):
    """Spec to control the desired behavior of rolling update."""

    maxSurge: int | str
    maxUnavailable: int | str


class RollingUpdateStatefulSetStrategy(TypedDict, total=False):
    """RollingUpdateStatefulSetStrategy is used to communicate parameter for RollingUpdateStatefulSetStrategyType."""

    maxUnavailable: int | str
    partition: int


class SELinuxOptions(TypedDict, total=False):
    """SELinuxOptions are the labels to be applied to the container"""

    level: str
    role: str
    type: str
    user: str


class ScaleIOPersistentVolumeSource(TypedDict, total=False):
    """ScaleIOPersistentVolumeSource represents a persistent ScaleIO volume"""

    fsType: str
    gateway: Required[str]
    protectionDomain: str
    readOnly: bool
    secretRef: Required[SecretReference]
    sslEnabled: bool
    storageMode: str
    storagePool: str
    system: Required[str]
    volumeName: str


class ScaleIOVolumeSource(TypedDict, total=False):
    """ScaleIOVolumeSource represents a persistent ScaleIO volume"""

    fsType: str
    gateway: Required[str]
    protectionDomain: str
    readOnly: bool
    secretRef: Required[LocalObjectReference]
    sslEnabled: bool
    storageMode: str
    storagePool: str
    system: Required[str]
    volumeName: str


class SeccompProfile(TypedDict, total=False):
    """SeccompProfile defines a pod/container's seccomp profile settings."""

    localhostProfile: str
    type: Required[str]


class Secret(TypedDict, total=False):
    """Secret holds secret data of a certain type."""

    apiVersion: Required[Literal["v1"]]
    data: dict[str, str]
    immutable: bool
    kind: Required[Literal["Secret"]]
    metadata: ObjectMeta
    stringData: dict[str, str]
    type: str


class SecretEnvSource(TypedDict, total=False):
    """SecretEnvSource selects a Secret to populate the environment variables with."""

    name: str
    optional: bool


class SecretKeySelector(TypedDict, total=False):
    """SecretKeySelector selects a key of a Secret."""

    key: Required[str]
    name: str
    optional: bool


class SecretProjection(TypedDict, total=False):
    """Adapts a secret into a projected volume."""

    items: list[KeyToPath]
    name: str
    optional: bool


class SecretReference(TypedDict, total=False):
    """SecretReference represents a Secret Reference."""

    name: str
    namespace: str


class SecretVolumeSource(TypedDict, total=False):
    """Adapts a Secret into a volume."""

    defaultMode: int
    defaultUser: int
    items: list[KeyToPath]
    optional: bool
    secretName: str


class SecurityContext(TypedDict, total=False):
    """SecurityContext holds security configuration that will be applied to a container."""

    allowPrivilegeEscalation: bool
    appArmorProfile: AppArmorProfile
    capabilities: Capabilities
    privileged: bool
    procMount: str
    readOnlyRootFilesystem: bool
    runAsGroup: int
    runAsNonRoot: bool
    runAsUser: int
    seLinuxOptions: SELinuxOptions
    seccompProfile: SeccompProfile
    windowsOptions: WindowsSecurityContextOptions


class Service(TypedDict, total=False):
    """Service is a named abstraction of software service (for example, mysql) consisting of local port (for example 3306) that the proxy listens on, and the selector that determines which pods will answer requests sent through the proxy."""

    apiVersion: Required[Literal["v1"]]
    kind: Required[Literal["Service"]]
    metadata: ObjectMeta
    spec: ServiceSpec
    status: ServiceStatus


class ServiceAccount(TypedDict, total=False):
    """ServiceAccount binds together: * a name, understood by users, and perhaps by peripheral systems, for an identity * a principal that can be authenticated and authorized * a set of secrets"""

    apiVersion: Required[Literal["v1"]]
    automountServiceAccountToken: bool
    imagePullSecrets: list[LocalObjectReference]
    kind: Required[Literal["ServiceAccount"]]
    metadata: ObjectMeta
    secrets: list[ObjectReference]


class ServiceAccountTokenProjection(TypedDict, total=False):
    """ServiceAccountTokenProjection represents a projected service account token volume."""

    audience: str
    expirationSeconds: int
    path: Required[str]
    user: int


class ServiceBackendPort(TypedDict, total=False):
    """ServiceBackendPort is the service port being referenced."""

    name: str
    number: int


class ServicePort(TypedDict, total=False):
    """ServicePort contains information on service's port."""

    appProtocol: str
    name: str
    nodePort: int
    port: Required[int]
    protocol: str
    targetPort: int | str


class ServiceSpec(TypedDict, total=False):
    """ServiceSpec describes the attributes that a user creates on a service."""

    allocateLoadBalancerNodePorts: bool
    clusterIP: str
    clusterIPs: list[str]
    externalIPs: list[str]
    externalName: str
    externalTrafficPolicy: str
    healthCheckNodePort: int
    internalTrafficPolicy: str
    ipFamilies: list[str]
    ipFamilyPolicy: str
    loadBalancerClass: str
    loadBalancerIP: str
    loadBalancerSourceRanges: list[str]
    ports: list[ServicePort]
    publishNotReadyAddresses: bool
    selector: dict[str, str]
    sessionAffinity: str
    sessionAffinityConfig: SessionAffinityConfig
    trafficDistribution: str
    type: str


class ServiceStatus(TypedDict, total=False):
    """ServiceStatus represents the current status of a service."""

    conditions: list[Condition]
    loadBalancer: LoadBalancerStatus


class SessionAffinityConfig(TypedDict, total=False):
    """SessionAffinityConfig represents the configurations of session affinity."""

    clientIP: ClientIPConfig


class SleepAction(TypedDict, total=False):
    """SleepAction describes a "sleep" action."""

    seconds: Required[int]


class StatefulSet(TypedDict, total=False):
    """StatefulSet represents a set of pods with consistent identities."""

    apiVersion: Required[Literal["apps/v1"]]
    kind: Required[Literal["StatefulSet"]]
    metadata: ObjectMeta
    spec: Required[StatefulSetSpec]
    status: StatefulSetStatus


class StatefulSetCondition(TypedDict, total=False):
    """StatefulSetCondition describes the state of a statefulset at a certain point."""

    lastTransitionTime: str
    message: str
    reason: str
    status: str
    type: str


class StatefulSetOrdinals(TypedDict, total=False):
    """StatefulSetOrdinals describes the policy used for replica ordinal assignment in this StatefulSet."""

    start: int


class StatefulSetPersistentVolumeClaimRetentionPolicy(TypedDict, total=False):
    """StatefulSetPersistentVolumeClaimRetentionPolicy describes the policy used for PVCs created from the StatefulSet VolumeClaimTemplates."""

    whenDeleted: str
    whenScaled: str


class StatefulSetSpec(TypedDict, total=False):
    """A StatefulSetSpec is the specification of a StatefulSet."""

    minReadySeconds: int
    ordinals: StatefulSetOrdinals
    persistentVolumeClaimRetentionPolicy: StatefulSetPersistentVolumeClaimRetentionPolicy
    podManagementPolicy: str
    replicas: int
    revisionHistoryLimit: int
    selector: Required[LabelSelector]
    serviceName: str
    template: Required[PodTemplateSpec]
    updateStrategy: StatefulSetUpdateStrategy
    volumeClaimTemplates: list[PersistentVolumeClaim]


class StatefulSetStatus(TypedDict, total=False):
    """StatefulSetStatus represents the current state of a StatefulSet."""

    availableReplicas: int
    collisionCount: int
    conditions: list[StatefulSetCondition]
    currentReplicas: int
    currentRevision: str
    observedGeneration: int
    readyReplicas: int
    replicas: Required[int]
    updateRevision: str
    updatedReplicas: int


class StatefulSetUpdateStrategy(TypedDict, total=False):
    """StatefulSetUpdateStrategy indicates the strategy that the StatefulSet controller will use to perform updates."""

    rollingUpdate: RollingUpdateStatefulSetStrategy
    type: str


class StorageOSPersistentVolumeSource(TypedDict, total=False):
    """Represents a StorageOS persistent volume resource."""

    fsType: str
    readOnly: bool
    secretRef: ObjectReference
    volumeName: str
    volumeNamespace: str


class StorageOSVolumeSource(TypedDict, total=False):
    """Represents a StorageOS persistent volume resource."""

    fsType: str
    readOnly: bool
    secretRef: LocalObjectReference
    volumeName: str
    volumeNamespace: str


class Subject(TypedDict, total=False):
    """Subject contains a reference to the object or user identities a role binding applies to."""

    apiGroup: str
    kind: Required[str]
    name: Required[str]
    namespace: str


class SuccessPolicy(TypedDict, total=False):
    """SuccessPolicy describes when a Job can be declared as succeeded based on the success of some indexes."""

    rules: Required[list[SuccessPolicyRule]]


class SuccessPolicyRule(TypedDict, total=False):
    """SuccessPolicyRule describes rule for declaring a Job as succeeded."""

    succeededCount: int
    succeededIndexes: str


class Sysctl(TypedDict, total=False):
    """Sysctl defines a kernel parameter to be set"""

    name: Required[str]
    value: Required[str]


class TCPSocketAction(TypedDict, total=False):
    """TCPSocketAction describes an action based on opening a socket"""

    host: str
    port: Required[int | str]


class Taint(TypedDict, total=False):
    """The node this Taint is attached to has the "effect" on any pod that does not tolerate the Taint."""

    effect: Required[str]
    key: Required[str]
    timeAdded: str
    value: str


class Toleration(TypedDict, total=False):
    """The pod this Toleration is attached to tolerates any taint that matches the triple <key,value,effect> using the matching operator <operator>."""

    effect: str
    key: str
    operator: str
    tolerationSeconds: int
    value: str


class TopologyConstraint(TypedDict, total=False):
    """TopologyConstraint defines a topology constraint for a PodGroup."""

    key: Required[str]


class TopologySpreadConstraint(TypedDict, total=False):
    """TopologySpreadConstraint specifies how to spread matching pods among the given topology."""

    labelSelector: LabelSelector
    matchLabelKeys: list[str]
    maxSkew: Required[int]
    minDomains: int
    nodeAffinityPolicy: str
    nodeTaintsPolicy: str
    topologyKey: Required[str]
    whenUnsatisfiable: Required[str]


class TypedLocalObjectReference(TypedDict, total=False):
    """TypedLocalObjectReference contains enough information to let you locate the typed referenced object inside the same namespace."""

    apiGroup: str
    kind: Required[str]
    name: Required[str]


class TypedObjectReference(TypedDict, total=False):
    """TypedObjectReference contains enough information to let you locate the typed referenced object"""

    apiGroup: str
    kind: Required[str]
    name: Required[str]
    namespace: str


class UncountedTerminatedPods(TypedDict, total=False):
    """UncountedTerminatedPods holds UIDs of Pods that have terminated but haven't been accounted in Job status counters."""

    failed: list[str]
    succeeded: list[str]


class Volume(TypedDict, total=False):
    """Volume represents a named volume in a pod that may be accessed by any container in the pod."""

    awsElasticBlockStore: AWSElasticBlockStoreVolumeSource
    azureDisk: AzureDiskVolumeSource
    azureFile: AzureFileVolumeSource
    cephfs: CephFSVolumeSource
    cinder: CinderVolumeSource
    configMap: ConfigMapVolumeSource
    csi: CSIVolumeSource
    downwardAPI: DownwardAPIVolumeSource
    emptyDir: EmptyDirVolumeSource
    ephemeral: EphemeralVolumeSource
    fc: FCVolumeSource
    flexVolume: FlexVolumeSource
    flocker: FlockerVolumeSource
    gcePersistentDisk: GCEPersistentDiskVolumeSource
    gitRepo: GitRepoVolumeSource
    glusterfs: GlusterfsVolumeSource
    hostPath: HostPathVolumeSource
    image: ImageVolumeSource
    iscsi: ISCSIVolumeSource
    name: Required[str]
    nfs: NFSVolumeSource
    persistentVolumeClaim: PersistentVolumeClaimVolumeSource
    photonPersistentDisk: PhotonPersistentDiskVolumeSource
    portworxVolume: PortworxVolumeSource
    projected: ProjectedVolumeSource
    quobyte: QuobyteVolumeSource
    rbd: RBDVolumeSource
    scaleIO: ScaleIOVolumeSource
    secret: SecretVolumeSource
    storageos: StorageOSVolumeSource
    vsphereVolume: VsphereVirtualDiskVolumeSource


class VolumeDevice(TypedDict, total=False):
    """volumeDevice describes a mapping of a raw block device within a container."""

    devicePath: Required[str]
    name: Required[str]


class VolumeHealthCondition(TypedDict, total=False):
    """VolumeHealthCondition represents an adverse health condition reported for a volume."""

    message: str
    reason: Required[str]
    status: Required[str]


class VolumeHealthStatus(TypedDict, total=False):
    """VolumeHealthStatus contains health information for a volume reported by the CSI controller plugin."""

    healthConditions: list[VolumeHealthCondition]
    lastTransitionTime: str


class VolumeMount(TypedDict, total=False):
    """VolumeMount describes a mounting of a Volume within a container."""

    bindMountOptions: list[str]
    mountPath: Required[str]
    mountPropagation: str
    name: Required[str]
    readOnly: bool
    recursiveReadOnly: str
    subPath: str
    subPathExpr: str


class VolumeMountStatus(TypedDict, total=False):
    """VolumeMountStatus shows status of volume mounts."""

    mountPath: Required[str]
    name: Required[str]
    readOnly: bool
    recursiveReadOnly: str
    volumeStatus: VolumeStatus


class VolumeNodeAffinity(TypedDict, total=False):
    """VolumeNodeAffinity defines constraints that limit what nodes this volume can be accessed from."""

    required: NodeSelector


class VolumeProjection(TypedDict, total=False):
    """Projection that may be projected along with other supported volume types."""

    clusterTrustBundle: ClusterTrustBundleProjection
    configMap: ConfigMapProjection
    downwardAPI: DownwardAPIProjection
    podCertificate: PodCertificateProjection
    secret: SecretProjection
    serviceAccountToken: ServiceAccountTokenProjection


class VolumeResourceRequirements(TypedDict, total=False):
    """VolumeResourceRequirements describes the storage resource requirements for a volume."""

    limits: dict[str, str | int | float]
    requests: dict[str, str | int | float]


class VolumeStatus(TypedDict, total=False):
    """VolumeStatus represents the status of a mounted volume."""

    image: ImageVolumeStatus


class VsphereVirtualDiskVolumeSource(TypedDict, total=False):
    """Represents a vSphere volume resource."""

    fsType: str
    storagePolicyID: str
    storagePolicyName: str
    volumePath: Required[str]


class WeightedPodAffinityTerm(TypedDict, total=False):
    """The weights of all of the matched WeightedPodAffinityTerm fields are added per-node to find the most preferred node(s)"""

    podAffinityTerm: Required[PodAffinityTerm]
    weight: Required[int]


class WindowsSecurityContextOptions(TypedDict, total=False):
    """WindowsSecurityContextOptions contain Windows-specific options and credentials."""

    gmsaCredentialSpec: str
    gmsaCredentialSpecName: str
    hostProcess: bool
    runAsUserName: str


class WorkloadPodGroupDisruptionMode(TypedDict, total=False):
    """WorkloadPodGroupDisruptionMode defines how individual pods within a group can be disrupted."""

    all: dict[str, Any]
    single: dict[str, Any]


class WorkloadPodGroupGangSchedulingPolicy(TypedDict, total=False):
    """WorkloadPodGroupGangSchedulingPolicy defines the parameters for gang (all-or-nothing) scheduling."""

    minCount: int


class WorkloadPodGroupResourceClaim(TypedDict, total=False):
    """WorkloadPodGroupResourceClaim references a dynamic resource claim that is shared across pods in the group."""

    name: Required[str]
    resourceClaimName: str
    resourceClaimTemplateName: str


class WorkloadPodGroupSchedulingConstraints(TypedDict, total=False):
    """WorkloadPodGroupSchedulingConstraints defines leaf-level scheduling constraints, such as topology."""

    topology: list[TopologyConstraint]


class WorkloadPodGroupSchedulingPolicy(TypedDict, total=False):
    """WorkloadPodGroupSchedulingPolicy defines the scheduling policy for a group of pods managed by a workload controller."""

    basic: dict[str, Any]
    gang: WorkloadPodGroupGangSchedulingPolicy
