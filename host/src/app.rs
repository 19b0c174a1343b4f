//! `kubewasm run`, wired in numbered phases. Owns shutdown: the first SIGTERM/SIGINT stops
//! gracefully (no new reconciles, running ones finish, the leader releases its lease, queued
//! events are sent); a second signal, or the grace period running out, stops at once.
//!
//! In a ring (`--shard-ring`), each replica also holds its shard membership Lease (released
//! after its workers stopped, like the leader's), its sharded plugins reconcile their share under
//! it, and the leader runs the ring's assigner.
//!
//! Leader election, shard membership and the HTTP endpoints run on a runtime of their own ([`ControlRuntime`]:
//! one thread, its own timers, I/O driver and API connections), so that however busy the plugins
//! keep the main runtime's workers, a lease renewal or a probe never waits behind them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::budget::MemoryBudget;
use crate::client::{ApiClient, ClientLimits, Fence, HostObject};
use crate::controller::Environment;
use crate::delivery::PluginResources;
use crate::discovery::Discovery;
use crate::events::{EventRecorder, Reporting};
use crate::identity::{AdmissionLimits, Identities, IdentityMode};
use crate::informer::Informers;
use crate::leader::{LeaderConfig, LeaderElector, Leadership};
use crate::manifest::LimitPolicy;
use crate::metrics::Metrics;
use crate::oci::Registries;
use crate::plugin::Loader;
use crate::plugin::artifact::ArtifactCache;
use crate::resource::Gvk;
use crate::runtime::{Runtime, RuntimeConfig};
use crate::shard::assigner::{Assigner, AssignerConfig};
use crate::shard::{AssignerMode, Shard};
use crate::supervisor::status::StatusPublisher;
use crate::supervisor::{ControllerFilter, StatusObject, Supervisor};
use crate::webhook::certs::{CertError, CertSource, ServingCerts};
use crate::webhook::configuration::Writer;
use crate::webhook::{Hooked, WebhookError};

/// Everything `kubewasm run` takes from its flags.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The plugin directory, if plugins come from one.
    pub plugins: Option<PathBuf>,
    /// Serve the Plugin resources of `identity_namespace`.
    pub plugin_resources: bool,
    /// How registries are reached, for Plugin resources.
    pub registries: crate::oci::RegistryOptions,
    pub kubeconfig: Option<PathBuf>,
    pub namespaces: Vec<String>,
    pub controllers: ControllerFilter,
    pub metrics_addr: SocketAddr,
    pub health_addr: SocketAddr,
    pub leader_elect: bool,
    pub lease_name: String,
    pub lease_namespace: String,
    pub artifacts: Option<PathBuf>,
    /// Size limit of the cache directory (`artifacts`, or the Plugins' files and modules).
    pub cache_max_bytes: u64,
    pub grace_period: Duration,
    /// Follow the plugin directory and hot-reload changes.
    pub watch: bool,
    /// The ConfigMap listing the running plugins, which plugin load Events are about.
    pub status: StatusObject,
    pub plugin_identity: IdentityMode,
    /// Where the plugins' ServiceAccounts live.
    pub identity_namespace: String,
    /// The most of a rate limit any plugin gets.
    pub client_ceiling: ClientLimits,
    /// What admission lets one plugin take.
    pub admission: AdmissionLimits,
    /// The ValidatingAdmissionPolicy that must be in force while Plugin resources are served
    /// with a ServiceAccount per plugin.
    pub identity_policy: Option<String>,
    pub request_timeout: Duration,
    pub sync_timeout: Duration,
    /// Host-wide budget of plugin linear memory, in bytes.
    pub plugin_memory_budget: u64,
    /// The most of it one plugin's instances past a first one may bring it to.
    pub plugin_budget_share: crate::budget::Share,
    /// How plugins are compiled when there is an artifact cache.
    pub compile: crate::plugin::compiler::ChildCompiler,
    /// Instances idle this long are released.
    pub idle_instances: Duration,
    /// Faults in a row on one object that quarantine it; 0 never does.
    pub quarantine_after: u32,
    /// How long list and resync work may wait behind live changes.
    pub max_queue_wait: Duration,
    /// When a hot-reloaded version is rolled back.
    pub rollback: crate::supervisor::rollout::Policy,
    /// The ring this replica shards plugins in (its membership Lease lives beside the leader's).
    pub shard_ring: Option<String>,
    /// Who places the ring's objects.
    pub shard_assigner: AssignerMode,
    /// Client-side rate limit of the assigner's label writes.
    pub shard_assign_limits: ClientLimits,
    /// A directory of member clusters' kubeconfig files.
    pub clusters: Option<PathBuf>,
    /// Member clusters from kubeconfig Secrets in the identity namespace.
    pub cluster_secrets: bool,
    /// Whether members may be reached over plain HTTP or unverified TLS.
    pub member_transport: crate::cluster::kubeconfig::Transport,
    /// How much of a member's answers the host reads.
    pub member_answers: crate::cluster::answers::Caps,
    /// Plugins' hooks, when served.
    pub webhooks: Option<WebhookConfig>,
}

/// The webhook server: where it listens, its certificate, and how the API server reaches it.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    pub bind: SocketAddr,
    pub certs: WebhookCerts,
    /// `None`: nothing is written (the configurations are the user's).
    pub endpoint: Option<crate::webhook::configuration::Endpoint>,
    /// What the host's own certificate is for.
    pub dns_names: Vec<String>,
}

#[derive(Debug, Clone)]
pub enum WebhookCerts {
    /// `tls.crt` and `tls.key` in a directory, reloaded when they change.
    Dir(PathBuf),
    /// The host's own, in a Secret.
    Secret { namespace: String, name: String },
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Webhooks(#[from] WebhookError),
    #[error("the webhook server's certificate: {0}")]
    WebhookCerts(#[from] CertError),
    #[error(transparent)]
    PluginDir(#[from] crate::supervisor::DirError),
    #[error("cannot connect to Kubernetes: {0}")]
    Connect(#[from] crate::client::ConnectError),
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
    #[error("cannot start the control runtime (leader election, HTTP endpoints): {0}")]
    Control(#[source] std::io::Error),
    #[error("cannot create a directory for the Plugins' files in {dir}: {source}")]
    ResourcesDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// This host's name in leases and events: the pod's name when set (Downward API), else the
/// hostname with the process id.
fn identity() -> String {
    std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "kubewasm".into());
        format!("{}-{}", host.trim(), std::process::id())
    })
}

pub async fn run(config: RunConfig) -> Result<(), AppError> {
    // The first signal starts a graceful shutdown, from any phase on; a second one forces it.
    let (shutdown, forced) = (CancellationToken::new(), CancellationToken::new());
    {
        let (shutdown, forced) = (shutdown.clone(), forced.clone());
        let mut signals = Signals::new();
        tokio::spawn(async move {
            signals.next().await;
            shutdown.cancel();
            signals.next().await;
            forced.cancel();
        });
    }

    // 1. Kubernetes and the host's own endpoints.
    if let Some(dir) = &config.plugins {
        crate::supervisor::plugin_files(dir)?;
    }
    // The Plugins' files and pulled modules live in the artifact cache (an emptyDir in a pod),
    // else in the temporary directory. The Plugins' files are written anew (this process's own
    // directory); pulled modules and compiled artifacts stay, so that a restart while a registry
    // is down still runs the last modules pulled, and are kept under --cache-max-bytes.
    let files_root = config.artifacts.clone().unwrap_or_else(std::env::temp_dir);
    let resources_dir = match config.plugin_resources {
        true => Some(files_root.join("plugins").join(std::process::id().to_string())).map(|dir| {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map(|_| dir.clone()).map_err(|source| AppError::ResourcesDir { dir, source })
        }),
        false => None,
    }
    .transpose()?;
    let cached = match &config.artifacts {
        Some(dir) => vec![dir.clone()],
        None => vec![files_root.join("oci"), files_root.join("plugins").join(std::process::id().to_string())],
    };
    let cache_task = tokio::spawn(crate::cache_dir::CacheLimit::new(cached, config.cache_max_bytes).run(shutdown.clone()));
    let janitor_task = tokio::spawn(crate::allocator::run_janitor(crate::allocator::Janitor::default(), shutdown.clone()));
    let instance = identity();
    let client = crate::client::connect(config.kubeconfig.as_deref(), &instance).await?;
    let control = ControlRuntime::start()?;
    let metrics = Arc::new(Metrics::new());
    // Ready once the supervisor exists, every plugin's caches have synced and (when served)
    // the Plugins have been listed.
    let ready_source: Arc<Mutex<Option<Arc<Supervisor>>>> = Arc::default();
    let ready_resources: Arc<Mutex<Option<Arc<PluginResources>>>> = Arc::default();
    let ready = {
        let (source, resources) = (ready_source.clone(), ready_resources.clone());
        let serving_resources = config.plugin_resources;
        Arc::new(move || {
            source.lock().as_ref().map_or(Err("starting".to_string()), |s| s.readiness())?;
            match resources.lock().as_ref() {
                Some(r) => r.readiness(),
                None if serving_resources => Err("starting".to_string()),
                None => Ok(()),
            }
        })
    };
    let (metrics_at, health_at) = control.run(crate::server::serve(config.metrics_addr, config.health_addr, metrics.clone(), ready, shutdown.clone())).await?;
    tracing::info!(metrics = %metrics_at, health = %health_at, "serving /metrics, /healthz and /readyz");

    // 2. Leadership: standbys keep warm caches, only the leader's workers run and write.
    // The lease is released only after the workers have stopped, so that the next leader never
    // overlaps with reconciles still finishing here.
    let leading = CancellationToken::new();
    let (leadership, elector) = if config.leader_elect {
        let lease = LeaderConfig::new(&config.lease_name, &config.lease_namespace, &instance);
        // A client of its own, made on the control runtime: its connections are served there.
        let (kubeconfig, who) = (config.kubeconfig.clone(), instance.clone());
        let lease_client = control.run(async move { crate::client::connect(kubeconfig.as_deref(), &who).await }).await?;
        let (elector, leadership) = LeaderElector::new(lease_client, lease, metrics.leader(&config.lease_name), metrics.leader_renew(&config.lease_name));
        (leadership, Some(control.spawn(elector.run(leading.clone()))))
    } else {
        (Leadership::always(), None)
    };
    // Membership of the ring: a Lease named after this replica, on the control runtime too.
    let (published, published_rx) = tokio::sync::watch::channel(std::collections::BTreeMap::new());
    let (membership, member_elector) = match &config.shard_ring {
        Some(ring) => {
            let mut lease = crate::shard::lease::membership(ring, &instance, &config.lease_namespace);
            lease.annotations = Some(published_rx);
            let (kubeconfig, who) = (config.kubeconfig.clone(), instance.clone());
            let lease_client = control.run(async move { crate::client::connect(kubeconfig.as_deref(), &who).await }).await?;
            let (elector, membership) = LeaderElector::new(lease_client, lease, metrics.shard_member(ring), metrics.leader_renew(&instance));
            (Some(membership), Some(control.spawn(elector.run(leading.clone()))))
        }
        None => (None, None),
    };

    // 3. The shared machinery: runtime, informers, identities, the fences on every write.
    let runtime = Arc::new(Runtime::new(RuntimeConfig::default())?);
    // Plugins are compiled in processes of their own and described inside the memory budget,
    // before anything of theirs is admitted.
    let budget = MemoryBudget::new(config.plugin_memory_budget, config.plugin_budget_share, metrics.memory_budget("reserved"));
    let loader = Loader::new(runtime.clone(), config.artifacts.clone().map(ArtifactCache::new), LimitPolicy::default())
        .with_compiler(config.compile.clone())
        .with_budget(budget.clone());
    let discovery = Arc::new(Discovery::new(client.clone(), config.request_timeout));
    let namespaces: Arc<[String]> = config.namespaces.clone().into();
    let mut host_objects =
        vec![HostObject { resource: Gvk::new("", "v1", "ConfigMap"), namespace: Some(config.status.namespace.clone()), name: config.status.name.clone() }];
    if config.leader_elect {
        host_objects.push(HostObject {
            resource: Gvk::new("coordination.k8s.io", "v1", "Lease"),
            namespace: Some(config.lease_namespace.clone()),
            name: config.lease_name.clone(),
        });
    }
    if config.shard_ring.is_some() {
        host_objects.push(HostObject {
            resource: Gvk::new("coordination.k8s.io", "v1", "Lease"),
            namespace: Some(config.lease_namespace.clone()),
            name: instance.clone(),
        });
    }
    let fence = Fence { leadership: leadership.clone(), namespaces: namespaces.clone(), host_objects: host_objects.into() };
    let informers = Informers::new(client.clone(), discovery.clone(), shutdown.clone(), metrics.informers());
    let mut identities = Identities::new(
        config.plugin_identity,
        config.identity_namespace.clone(),
        client.clone(),
        discovery.clone(),
        namespaces.clone(),
        config.request_timeout,
        config.admission,
    );
    // The host's own writes for the ring: handovers under the membership, the assigner's labels
    // under the leadership. Plugins' namespaces only; the host's own objects are not written.
    let shard = membership.map(|membership| {
        let fence = Fence { leadership: membership.clone(), ..fence.clone() };
        let api = Arc::new(ApiClient::new(
            client.clone(),
            discovery.clone(),
            informers.clone(),
            "kubewasm-shard".into(),
            ClientLimits::default().bucket(),
            fence,
            config.request_timeout,
        ));
        let ring = config.shard_ring.clone().unwrap_or_default();
        Arc::new(Shard::new(&ring, &instance, membership, informers.clone(), api, published, metrics.clone()))
    });
    let assigner_task = match (&shard, config.shard_assigner) {
        (Some(shard), AssignerMode::Builtin) => {
            let api = Arc::new(ApiClient::new(
                client.clone(),
                discovery.clone(),
                informers.clone(),
                "kubewasm-assigner".into(),
                config.shard_assign_limits.bucket(),
                fence.clone(),
                config.request_timeout,
            ));
            let assigner_config = AssignerConfig { ring: shard.ring().into(), lease_namespace: config.lease_namespace.clone() };
            let assigner = Assigner::new(client.clone(), discovery.clone(), api, assigner_config, metrics.clone(), config.request_timeout);
            Some(tokio::spawn(assigner.run(leadership.clone(), shutdown.clone())))
        }
        _ => None,
    };
    // Whoever may create Plugins must not get any identity by naming a Plugin after it.
    if let Some(policy) = config.identity_policy.clone().filter(|_| config.plugin_resources && config.plugin_identity == IdentityMode::ServiceAccount) {
        identities = identities.with_policy(policy);
    }
    let fleet = (config.clusters.is_some() || config.cluster_secrets).then(|| {
        let settings = crate::cluster::Settings {
            instance: instance.clone(),
            identity_mode: config.plugin_identity,
            identity_namespace: config.identity_namespace.clone(),
            namespaces: namespaces.clone(),
            request_timeout: config.request_timeout,
            max_answer: config.member_answers,
            admission: config.admission,
            metrics: metrics.clone(),
            transport: config.member_transport,
        };
        let fleet = crate::cluster::Fleet::new(settings, shutdown.clone());
        if let Some(dir) = config.clusters.clone() {
            tokio::spawn(crate::cluster::files::run(dir, fleet.clone(), shutdown.clone()));
        }
        fleet
    });
    let env = Arc::new(Environment {
        discovery: discovery.clone(),
        informers: informers.clone(),
        runtime,
        identities,
        fence: fence.clone(),
        metrics: metrics.clone(),
        instance: instance.clone(),
        request_timeout: config.request_timeout,
        client_ceiling: config.client_ceiling,
        sync_timeout: config.sync_timeout,
        idle_instances: config.idle_instances,
        quarantine_after: config.quarantine_after,
        max_queue_wait: config.max_queue_wait,
        budget: budget.clone(),
        shard,
        fleet,
        member: None,
    });

    // 4. The host's own writes and Events (its status ConfigMap), as the host.
    let host_bucket = ClientLimits::default().bucket();
    // The host's own objects may live outside the namespaces served to plugins.
    let host_fence = Fence { host_objects: Arc::new([]), namespaces: Arc::new([]), ..fence };
    let host_api = Arc::new(ApiClient::new(
        client.clone(),
        discovery.clone(),
        informers.clone(),
        "kubewasm".into(),
        host_bucket.clone(),
        host_fence,
        config.request_timeout,
    ));
    let events_shutdown = CancellationToken::new();
    let (events, events_task) = EventRecorder::start(
        client.clone(),
        Reporting { controller: "kubewasm".into(), instance },
        host_bucket,
        leadership.clone(),
        metrics.events_dropped(""),
        config.request_timeout,
        events_shutdown.clone(),
    );
    // Refused cluster Secrets are reported on the Secrets, as the host.
    if let Some(fleet) = env.fleet.clone().filter(|_| config.cluster_secrets) {
        tokio::spawn(crate::cluster::secrets::run(client.clone(), config.identity_namespace.clone(), fleet, events.clone(), shutdown.clone()));
    }
    let status = Arc::new(StatusPublisher::new(config.status.clone(), host_api.clone(), events.clone(), metrics.clone(), leadership.clone()));

    // 5. Plugins: one controller per file of the plugin directory, followed for changes, and
    // one per Plugin resource; their hooks served on every replica, from the start.
    let hooked = Hooked::default();
    let webhooks_shutdown = CancellationToken::new();
    let webhook_tasks = match &config.webhooks {
        Some(webhooks) => {
            let fence = WebhookFence { leadership: leadership.clone(), namespaces: config.namespaces.clone(), host: config.lease_name.clone() };
            let reach = WebhookReach { client: client.clone(), discovery: discovery.clone(), events: events.clone() };
            let stops = WebhookStops { serving: webhooks_shutdown.clone(), writing: shutdown.clone() };
            start_webhooks(webhooks, reach, hooked.clone(), fence, metrics.clone(), stops).await?
        }
        None => Vec::new(),
    };
    metrics.memory_budget("total").set(i64::try_from(budget.total()).unwrap_or(i64::MAX));
    let supervisor =
        Supervisor::new(env, loader, config.controllers.clone(), config.plugins.clone(), status, budget, config.rollback, hooked, shutdown.clone());
    *ready_source.lock() = Some(supervisor.clone());
    supervisor.clone().run(config.watch).await?;
    let resources_task = resources_dir.map(|dir| {
        let registries = Registries::new(&config.registries, files_root.join("oci"));
        let resources = PluginResources::new(config.identity_namespace.clone(), dir, registries, supervisor.clone(), host_api, events, leadership, &metrics);
        *ready_resources.lock() = Some(resources.clone());
        tokio::spawn(resources.run(informers, shutdown.clone()))
    });

    // 6. Serve until told to stop.
    shutdown.cancelled().await;
    tracing::info!("shutting down: finishing running reconciles (signal again to stop at once)");
    let graceful = async {
        if let Some(task) = resources_task {
            let _ = task.await;
        }
        supervisor.stopped().await;
        // Other replicas answer hooks from now on; those in flight here finish.
        webhooks_shutdown.cancel();
        for task in webhook_tasks {
            let _ = task.await;
        }
        if let Some(task) = assigner_task {
            let _ = task.await;
        }
        // Workers have stopped: the Leases go (a standby leads, the ring moves this shard's
        // objects at once).
        leading.cancel();
        if let Some(elector) = elector {
            let _ = elector.await;
        }
        if let Some(elector) = member_elector {
            let _ = elector.await;
        }
        events_shutdown.cancel();
        let _ = events_task.await;
        let _ = cache_task.await;
        let _ = janitor_task.await;
    };
    tokio::select! {
        _ = graceful => tracing::info!("stopped"),
        _ = forced.cancelled() => tracing::warn!("second signal: stopping now"),
        _ = tokio::time::sleep(config.grace_period) => tracing::warn!("grace period of {:?} over: stopping now", config.grace_period),
    }
    Ok(())
}

/// What the webhook server and writer reach: the API server, its kinds, the host's Events.
struct WebhookReach {
    client: kube::Client,
    discovery: Arc<Discovery>,
    events: EventRecorder,
}

/// When the webhook server and the writer stop. The writer stops as shutdown begins: the
/// plugins stopping then must not take their configurations with them (the other replicas go on
/// serving them); the server stops once the plugins have, after the requests in flight.
struct WebhookStops {
    serving: CancellationToken,
    writing: CancellationToken,
}

/// Who writes the webhook configurations, and for which namespaces.
struct WebhookFence {
    leadership: Leadership,
    namespaces: Vec<String>,
    /// This host's name (its Lease's): the configurations' prefix.
    host: String,
}

/// Starts the webhook server with its certificate and, when the API server is told where it is,
/// the leader's writer of the configurations.
async fn start_webhooks(
    config: &WebhookConfig,
    reach: WebhookReach,
    hooked: Hooked,
    fence: WebhookFence,
    metrics: Arc<Metrics>,
    stops: WebhookStops,
) -> Result<Vec<tokio::task::JoinHandle<()>>, AppError> {
    let source = match &config.certs {
        WebhookCerts::Dir(dir) => CertSource::Dir(dir.clone()),
        WebhookCerts::Secret { namespace, name } => {
            CertSource::Managed { api: reach.client.clone(), namespace: namespace.clone(), name: name.clone(), dns_names: config.dns_names.clone() }
        }
    };
    let certs = ServingCerts::start(source, metrics.certs(), stops.serving.clone()).await?;
    let listener = crate::webhook::listen(config.bind).await?;
    tracing::info!(addr = %listener.local_addr().unwrap_or(config.bind), "serving plugins' webhooks");
    let mut tasks = vec![tokio::spawn(crate::webhook::serve(listener, certs.tls_config(), hooked.clone(), metrics, reach.events, stops.serving))];
    if let Some(endpoint) = config.endpoint.clone() {
        let writer =
            Writer { api: reach.client, discovery: reach.discovery, hooked, host: fence.host, endpoint, ca: certs.ca_bundle(), namespaces: fence.namespaces };
        tasks.push(tokio::spawn(writer.run(fence.leadership, stops.writing)));
    }
    Ok(tasks)
}

/// The runtime of the host's own control loop: one worker thread, timers and I/O of its own.
/// Dropped without waiting (what runs there has been told to stop by then).
struct ControlRuntime(Option<tokio::runtime::Runtime>);

impl ControlRuntime {
    fn start() -> Result<Self, AppError> {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("kubewasm-control").enable_all().build().map_err(AppError::Control)?;
        Ok(ControlRuntime(Some(runtime)))
    }

    fn spawn<F: Future<Output: Send + 'static> + Send + 'static>(&self, task: F) -> tokio::task::JoinHandle<F::Output> {
        self.0.as_ref().expect("the control runtime runs until dropped").spawn(task)
    }

    /// Runs `task` there and waits for it from here.
    async fn run<F: Future<Output: Send + 'static> + Send + 'static>(&self, task: F) -> F::Output {
        match self.spawn(task).await {
            Ok(output) => output,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

impl Drop for ControlRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// SIGTERM and SIGINT, installed once (so none is missed between two waits).
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Signals {
            term: signal(SignalKind::terminate()).expect("installing a SIGTERM handler"),
            int: signal(SignalKind::interrupt()).expect("installing a SIGINT handler"),
        }
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
