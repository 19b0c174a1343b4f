//! A plugin's controller: triggers → queue → workers → plugin → actions.
//!
//! Informer events become keys in the plugin's queue ([`trigger`]); a dispatcher hands keys to
//! up to `max-concurrency` reconciles at once ([`workers`]), only while this host leads and only
//! after the plugin's caches have synced; each reconcile runs the plugin's current version
//! ([`reconcile`]); its result forgets, requeues or retries the key, and an object the plugin
//! keeps faulting on is set aside ([`quarantine`]); each version keeps a tally of the objects it
//! fails on ([`health`]), which the supervisor reads after a hot reload; a candidate version may
//! run in the shadow of the current one ([`shadow`]). A periodic resync
//! enqueues every primary again. The controller outlives plugin versions: [`Controller::swap`]
//! replaces the version while the queue and its backoff state, the plugin's API client (its
//! identity and rate limit, set to the new version's options) and its Event recorder stay.
//!
//! In a ring of replicas (`shard`), a plugin is sharded unless its options say `sharding =
//! false`: its primary and owned watches list only this shard's objects, it reconciles and
//! writes under this replica's membership term instead of the leadership (after its sharded
//! caches have listed since the term began), the children it writes are labelled for this
//! shard ([`sharded`]), and each reconcile first checks that the object is still assigned here —
//! an object to be drained is handed over instead, once no reconcile of it runs (the queue runs
//! a key once at a time). An unsharded plugin runs on the ring's leader only, as without a ring.

mod fleet;
mod health;
mod quarantine;
mod reconcile;
mod shadow;
mod sharded;
mod trigger;
mod workers;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use fleet::{Members, PluginFleet, Targets};
pub use health::Health;
use health::Tally;
pub use quarantine::{DEFAULT_AFTER as DEFAULT_QUARANTINE_AFTER, Listing as QuarantineListing};
use quarantine::{Quarantine, Subject, is_object_fault};
pub use reconcile::Outcome;
use shadow::Shadow;
pub use shadow::{Agreement, Report as ShadowReport};
use trigger::{KeyMapping, MapBacklog, MapKey, Released, Trigger};
use workers::Workers;

use crate::budget::{BudgetError, MemoryBudget, Reservation};
use crate::client::{ApiClient, ClientLimits, Fence};
use crate::cluster::{Fleet as ClusterFleet, Member};
use crate::discovery::Discovery;
use crate::events::{EventRecorder, Reporting};
use crate::identity::Identities;
use crate::informer::{CacheView, InformerError, Informers, Subscription, WatchKey};
use crate::leader::Leadership;
use crate::manifest::{Manifest, Mapping, Role, WatchRole};
use crate::metrics::{ControllerMetrics, Metrics, PluginMetrics};
use crate::plugin::LoadedPlugin;
use crate::queue::{QueueError, RateLimitConfig, Reason, WorkQueue};
use crate::resource::{ObjectKey, Scope};
use crate::runtime::host::{Api, EventSink, Services, Target};
use crate::runtime::{CallError, PluginRunner, Runtime};
use crate::shard::{Claim, ClaimGuard, Shard};

/// Watched objects a plugin may have waiting for `map-related` at once.
const MAP_BACKLOG: usize = 10_000;
/// How often idle instances are looked for.
const IDLE_SWEEP: Duration = Duration::from_secs(10);

/// What every controller of a host shares.
#[derive(Clone)]
pub struct Environment {
    pub discovery: Arc<Discovery>,
    pub informers: Arc<Informers>,
    pub runtime: Arc<Runtime>,
    /// Who each plugin acts as.
    pub identities: Identities,
    /// Leadership, the namespaces served and the host's own objects: what every write respects.
    pub fence: Fence,
    pub metrics: Arc<Metrics>,
    /// This host instance's name, in Events.
    pub instance: String,
    pub request_timeout: Duration,
    /// The most of a rate limit any plugin gets (`--max-plugin-qps`, `--max-plugin-burst`).
    pub client_ceiling: ClientLimits,
    /// How long a version's new watches may take to list everything before it is rejected.
    pub sync_timeout: Duration,
    /// Instances idle this long are released.
    pub idle_instances: Duration,
    /// Faults in a row on one object that quarantine it; 0 never does.
    pub quarantine_after: u32,
    /// How long list and resync work may wait behind live changes in a plugin's queue.
    pub max_queue_wait: Duration,
    /// What instances past a version's first reserve their memory in.
    pub budget: MemoryBudget,
    /// This replica's shard of the ring, when the host runs in one.
    pub shard: Option<Arc<Shard>>,
    /// The member clusters engaged, when the host engages any (`--clusters`, `--cluster-secrets`).
    pub fleet: Option<Arc<ClusterFleet>>,
    /// The member cluster these controllers work in; `None` for the host's own.
    pub member: Option<Arc<Member>>,
}

impl Environment {
    pub fn leadership(&self) -> &Leadership {
        &self.fence.leadership
    }

    /// Namespaces served; empty for all.
    pub fn namespaces(&self) -> &[String] {
        &self.fence.namespaces
    }

    /// The environment of controllers in `member`: its caches and identities, this host's
    /// leadership, no shard (a member's objects are reconciled by the leader: see [`fleet`]).
    fn in_member(&self, member: &Arc<Member>) -> Environment {
        Environment {
            discovery: member.discovery.clone(),
            informers: member.informers.clone(),
            identities: member.identities.clone(),
            // The host's own objects live in its own cluster.
            fence: Fence { host_objects: Arc::new([]), ..self.fence.clone() },
            shard: None,
            member: Some(member.clone()),
            ..self.clone()
        }
    }

    /// The rate limit a plugin's options get on this host.
    fn client_limits(&self, plugin: &LoadedPlugin) -> ClientLimits {
        ClientLimits::granted(&plugin.described.manifest.name, plugin.options.qps, plugin.options.burst, self.client_ceiling)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Watch(#[from] InformerError),
    #[error("workqueue: {0}")]
    Queue(#[from] QueueError),
    #[error("its caches did not sync within {0:?} (is the host allowed to list and watch {1}?)")]
    SyncTimeout(Duration, String),
    #[error("the new version turns sharding {0}: a running plugin keeps its mode; remove the plugin and add it again")]
    ShardingChanged(&'static str),
    #[error("no room for its first instance in this cluster: {0}")]
    Reserve(#[source] BudgetError),
}

/// One loaded version of the plugin with what it watches.
pub struct Version {
    pub plugin: LoadedPlugin,
    pub manifest: Arc<Manifest>,
    pub runner: Arc<PluginRunner>,
    /// The stores of the primary watches: what reconciles read the primary from. The plugin's
    /// own cache view may serve the primary kind from another (broader) watch, which can lag
    /// behind the one whose event enqueued the key.
    primary: CacheView,
    workers: usize,
    subscriptions: Vec<Subscription>,
    /// Finalizers earlier versions used and this one took over.
    pub previous_finalizers: Vec<String>,
    tally: Tally,
    /// What the ring's assigner places for this version, while it runs (sharded plugins).
    _claim: Option<ClaimGuard>,
    /// What the plugin's `fleet` calls into this controller's cluster reach with this version.
    target: Target,
    /// A member controller's first instance's room in the budget (the host's own cluster's is
    /// the plugin slot's, reserved when the version was admitted).
    _first: Option<Reservation>,
}

impl Version {
    /// The informers this version listens to.
    pub fn watches(&self) -> impl Iterator<Item = &WatchKey> {
        self.subscriptions.iter().map(Subscription::key)
    }

    /// How this version is doing: its reconciles and the objects it fails on now.
    pub fn health(&self) -> Health {
        let objects = self.primary_objects().len();
        self.tally.health(|key| self.primary.get(&self.manifest.primary, key).is_some(), objects)
    }

    fn primary_keys(&self) -> Vec<ObjectKey> {
        self.primary_objects().into_iter().map(|(key, _)| key).collect()
    }

    /// How many primaries the host has cached for this version.
    fn primary_count(&self) -> usize {
        self.primary.views(&self.manifest.primary).iter().map(|v| v.count()).sum()
    }

    /// The objects of the primary kind the host has cached for this version.
    pub fn primary_objects(&self) -> Vec<(ObjectKey, Arc<str>)> {
        self.primary.views(&self.manifest.primary).iter().flat_map(|v| v.list(None, None, usize::MAX).unwrap_or_default()).collect()
    }

    /// Waits until every watch has listed once, up to `timeout`.
    async fn synced(&self, timeout: Duration) -> Result<(), ControllerError> {
        for subscription in &self.subscriptions {
            if tokio::time::timeout(timeout, subscription.synced()).await.is_err() {
                return Err(ControllerError::SyncTimeout(timeout, subscription.key().to_string()));
            }
        }
        Ok(())
    }
}

pub struct Controller {
    /// The plugin's name, and in a member cluster `@` and the cluster's: in logs and metrics.
    name: String,
    /// What it does in its cluster: always [`Role::Serve`] in the host's own.
    role: Role,
    /// Every controller of the plugin's targets, for its `fleet` calls.
    targets: Arc<Targets>,
    /// The plugin's controllers in member clusters: in the host's own cluster's, when the host
    /// engages members.
    members: Option<Arc<Members>>,
    env: Arc<Environment>,
    queue: WorkQueue<ObjectKey>,
    /// Requests as the plugin's identity, under its rate limit.
    api: Arc<ApiClient>,
    events: EventRecorder,
    plugin_metrics: PluginMetrics,
    metrics: ControllerMetrics,
    quarantine: Quarantine,
    current: RwLock<Arc<Version>>,
    mapper: Arc<MapBacklog>,
    released: Released,
    workers: Workers,
    synced: watch::Sender<bool>,
    /// Set once the controller's tasks have all ended.
    finished: watch::Sender<bool>,
    /// This replica's shard, when the plugin is sharded.
    shard: Option<Arc<Shard>>,
    /// A candidate version run in the shadow of the current one, if any.
    shadow: RwLock<Option<Arc<Shadow>>>,
    shutdown: CancellationToken,
}

impl Controller {
    /// Starts the controller of a loaded plugin: subscribes its informers and spawns its tasks,
    /// which stop when `shutdown` is cancelled (in-flight reconciles finish first, then queued
    /// Events are sent).
    pub async fn start(env: Arc<Environment>, plugin: LoadedPlugin, shutdown: CancellationToken) -> Result<Arc<Self>, ControllerError> {
        Controller::start_in(env, plugin, Role::Serve, None, shutdown).await
    }

    /// Starts the controller of `plugin` in `env`'s cluster, doing `role` there; a member
    /// cluster's shares the `targets` of the plugin's controller in the host's own.
    async fn start_in(
        env: Arc<Environment>,
        plugin: LoadedPlugin,
        role: Role,
        targets: Option<Arc<Targets>>,
        shutdown: CancellationToken,
    ) -> Result<Arc<Self>, ControllerError> {
        let plugin_name = plugin.described.manifest.name.clone();
        let name = match &env.member {
            Some(member) => format!("{plugin_name}@{}", member.name),
            None => plugin_name.clone(),
        };
        let targets = targets.unwrap_or_default();
        let shard = env.shard.clone().filter(|_| plugin.options.sharding != Some(false));
        // A sharded plugin reconciles and writes under this replica's membership, not the
        // leadership.
        let term = shard.as_ref().map_or_else(|| env.fence.leadership.clone(), |s| s.membership().clone());
        let fence = Fence { leadership: term.clone(), ..env.fence.clone() };
        let queue = WorkQueue::new(RateLimitConfig::default(), env.metrics.workqueue(&name))?.with_max_wait(env.max_queue_wait);
        let limits = env.client_limits(&plugin);
        let kube = env.identities.client_for(&plugin_name);
        let api = Arc::new(ApiClient::new(
            kube.clone(),
            env.discovery.clone(),
            env.informers.clone(),
            plugin.described.manifest.field_manager(),
            limits.bucket(),
            fence,
            env.request_timeout,
        ));
        // The recorder stops after the workers (below), so that their last Events are sent.
        let events_stop = CancellationToken::new();
        let reporting = Reporting { controller: format!("kubewasm/{plugin_name}"), instance: env.instance.clone() };
        let (events, events_task) =
            EventRecorder::start(kube, reporting, api.bucket().clone(), term, env.metrics.events_dropped(&name), env.request_timeout, events_stop.clone());
        let events = events.serving(env.fence.namespaces.clone());
        let map_queue = WorkQueue::new(RateLimitConfig::default(), env.metrics.workqueue(&format!("{name}-map-related")))?;
        let mapper = Arc::new(MapBacklog::new(map_queue, MAP_BACKLOG, env.metrics.mapped_dropped(&name)));
        let plugin_metrics = env.metrics.plugin(&name);
        let released = Released::default();
        let parts = Parts {
            queue: &queue,
            mapper: &mapper,
            released: &released,
            api: api.clone(),
            events: Arc::new(events.clone()),
            metrics: &plugin_metrics,
            inert: role == Role::Reach,
            shard: shard.as_ref(),
            targets: &targets,
        };
        let version = build_version(&env, &parts, plugin, Vec::new()).await?;
        let members = match (&env.fleet, &env.member) {
            (Some(fleet), None) => Some(Members::new(env.clone(), fleet.clone(), targets.clone())),
            _ => None,
        };
        let controller = Arc::new(Controller {
            role,
            targets,
            members,
            metrics: env.metrics.controller(&name),
            quarantine: Quarantine::new(env.quarantine_after, env.metrics.quarantine(&name)),
            workers: Workers::new(version.workers),
            name,
            env,
            queue,
            api,
            events,
            plugin_metrics,
            current: RwLock::new(Arc::new(version)),
            mapper,
            released,
            synced: watch::channel(false).0,
            finished: watch::channel(false).0,
            shard,
            shadow: RwLock::new(None),
            shutdown: shutdown.clone(),
        });
        controller.publish_target();
        let members = controller.members.clone().map(|m| tokio::spawn(m.run(Arc::downgrade(&controller), shutdown.clone())));
        tokio::spawn({
            let controller = controller.clone();
            async move {
                controller.clone().run(shutdown).await;
                if let Some(members) = members {
                    let _ = members.await;
                }
                // Gone with the controller: its gauges must not claim objects for it.
                controller.quarantine.clear();
                if let Some(shard) = &controller.shard {
                    shard.publish(&controller.name, None);
                }
                events_stop.cancel();
                let _ = events_task.await;
                controller.finished.send_replace(true);
            }
        });
        Ok(controller)
    }

    /// [`Controller::start_in`] in a member cluster, boxed and named `Send`: it is started from the
    /// task of the plugin's controller in the host's own cluster, which `start_in` starts.
    fn start_member(
        env: Arc<Environment>,
        plugin: LoadedPlugin,
        role: Role,
        targets: Arc<Targets>,
        shutdown: CancellationToken,
    ) -> futures::future::BoxFuture<'static, Result<Arc<Self>, ControllerError>> {
        Box::pin(Controller::start_in(env, plugin, role, Some(targets), shutdown))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Tells the plugin's other clusters what its `fleet` calls into this one reach now.
    fn publish_target(&self) {
        let member = self.env.member.as_ref();
        let labels = member.map(|m| m.labels.clone()).unwrap_or_default();
        self.targets.publish(member.map(|m| m.name.clone()), self.version().target.clone(), labels, self.synced.subscribe());
    }

    /// Enqueues every cached primary once (a resync); how many.
    fn enqueue_primaries(&self) -> usize {
        let keys = self.version().primary_keys();
        let count = keys.len();
        for key in keys {
            self.queue.add_for(key, Reason::Resync);
        }
        count
    }

    /// The status listing's entries of the plugin's member clusters: running there, or why not.
    pub fn member_entries(&self) -> Vec<(String, String)> {
        self.members.as_ref().map(|m| m.entries(&self.version().manifest.name)).unwrap_or_default()
    }

    /// The version serving now.
    pub fn version(&self) -> Arc<Version> {
        self.current.read().clone()
    }

    /// Whether the caches of the plugin have synced.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// The plugin's API client: its identity, rate limit and fences.
    pub fn api(&self) -> &Arc<ApiClient> {
        &self.api
    }

    /// The plugin's Event recorder.
    pub fn events(&self) -> &EventRecorder {
        &self.events
    }

    /// The objects quarantined now: the first `max` keys and how many there are.
    pub fn quarantined(&self, max: usize) -> QuarantineListing {
        self.quarantine.listing(max)
    }

    /// Replaces the plugin version. Reconciles already running finish on the old version; every
    /// later one runs the new. Informers the new version needs are started and synced (within
    /// the sync timeout, else the new version is refused and the old one keeps serving) before
    /// those only the old one needed are released; then quarantined objects are released and
    /// every primary is enqueued once (level-triggered catch-up). The queue and its backoff
    /// state stay. A new version that renames its finalizer takes over objects carrying the old
    /// name.
    pub async fn swap(&self, plugin: LoadedPlugin) -> Result<Arc<Version>, ControllerError> {
        if self.env.shard.is_some() && self.shard.is_some() != (plugin.options.sharding != Some(false)) {
            return Err(ControllerError::ShardingChanged(if self.shard.is_some() { "off" } else { "on" }));
        }
        let old = self.version();
        let mut previous = old.previous_finalizers.clone();
        previous.extend(old.manifest.finalizer.clone());
        previous.retain(|f| Some(f) != plugin.described.manifest.finalizer.as_ref());
        previous.dedup();
        let parts = Parts {
            queue: &self.queue,
            mapper: &self.mapper,
            released: &self.released,
            api: self.api.clone(),
            events: Arc::new(self.events.clone()),
            metrics: &self.plugin_metrics,
            inert: self.role == Role::Reach,
            shard: self.shard.as_ref(),
            targets: &self.targets,
        };
        let limits = self.env.client_limits(&plugin);
        let version = build_version(&self.env, &parts, plugin, previous).await?;
        version.synced(self.env.sync_timeout).await?;
        let version = Arc::new(version);
        *self.current.write() = version.clone();
        self.publish_target();
        if let Some(members) = &self.members {
            members.version_changed();
        }
        // The new version's rate limit, from its first request on (the bucket outlives versions).
        self.api.set_limits(limits);
        // Growing wakes a dispatcher waiting for a slot; shrinking takes effect as slots return.
        let limit = self.workers.resize(version.workers);
        self.metrics.max_concurrent.set(limit as i64);
        drop(old);
        self.quarantine.clear();
        self.enqueue_primaries();
        Ok(version)
    }

    /// Runs `plugin` in the shadow of the current version ([`shadow`]), in place of any
    /// candidate before: its watches are started and synced (within the sync timeout) without
    /// triggering anything, its writes are dry runs under a rate limit of its own, and its Events
    /// are never sent.
    pub async fn shadow_with(&self, plugin: LoadedPlugin) -> Result<Arc<Version>, ControllerError> {
        let bucket = self.env.client_limits(&plugin).bucket();
        let api: Arc<dyn Api> = Arc::new(self.api.dry_running(bucket));
        // The candidate's faults count as the shadow's, not as the live plugin's.
        let metrics = PluginMetrics::default();
        let parts = Parts {
            queue: &self.queue,
            mapper: &self.mapper,
            released: &self.released,
            api: api.clone(),
            events: Arc::new(Unsent),
            metrics: &metrics,
            inert: true,
            shard: self.shard.as_ref(),
            targets: &self.targets,
        };
        let version = build_version(&self.env, &parts, plugin, Vec::new()).await?;
        version.synced(self.env.sync_timeout).await?;
        let version = Arc::new(version);
        let queue = self.queue.clone();
        let active = self.metrics.active_workers.clone();
        let live_busy = move || !queue.is_empty() || active.get() > 0;
        let shadow = Shadow::start(&self.name, version.clone(), api, &self.env.metrics, live_busy, self.shutdown.child_token());
        if let Some(before) = self.shadow.write().replace(shadow) {
            before.stop();
        }
        Ok(version)
    }

    /// Ends the shadow run, if any; returns its last report.
    pub fn end_shadow(&self) -> Option<ShadowReport> {
        let shadow = self.shadow.write().take()?;
        shadow.stop();
        Some(shadow.report())
    }

    /// What the shadow run found so far, if a candidate runs.
    pub fn shadow_report(&self) -> Option<ShadowReport> {
        self.shadow.read().as_ref().map(|s| s.report())
    }

    /// The candidate running in the shadow, if any.
    pub fn candidate(&self) -> Option<Arc<Version>> {
        self.shadow.read().as_ref().map(|s| s.candidate().clone())
    }

    fn current_shadow(&self) -> Option<Arc<Shadow>> {
        self.shadow.read().clone()
    }

    /// Waits until the controller has stopped after shutdown: no reconcile is running and its
    /// queued Events have been sent.
    pub async fn stopped(&self) {
        let _ = self.finished.subscribe().wait_for(|done| *done).await;
    }

    /// Waits until the caches of the first version have synced, up to the sync timeout.
    pub async fn first_sync(&self) -> Result<(), ControllerError> {
        let timeout = self.env.sync_timeout;
        let mut synced = self.synced.subscribe();
        let done = tokio::time::timeout(timeout, synced.wait_for(|s| *s)).await;
        match done {
            Ok(_) => Ok(()),
            Err(_) => {
                let version = self.version();
                let pending = version.subscriptions.iter().find(|s| !s.is_synced()).map(|s| s.key().to_string()).unwrap_or_default();
                Err(ControllerError::SyncTimeout(timeout, pending))
            }
        }
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let version = self.version();
        let synced = tokio::select! {
            _ = shutdown.cancelled() => false,
            // The supervisor bounds this wait ([`Controller::first_sync`]).
            _ = version.synced(Duration::MAX) => true,
        };
        drop(version);
        if !synced {
            return;
        }
        self.synced.send_replace(true);
        tracing::info!(plugin = %self.name, "caches synced");
        if self.role == Role::Reach {
            // Its caches and client serve the plugin's `fleet` calls; it reconciles nothing.
            shutdown.cancelled().await;
            return;
        }
        let mapper = tokio::spawn(self.clone().map_related(shutdown.clone()));
        let resync = tokio::spawn(self.clone().resync(shutdown.clone()));
        let sweeper = tokio::spawn(self.clone().drop_idle_instances(shutdown.clone()));
        let share = tokio::spawn(self.clone().publish_share(shutdown.clone()));
        self.dispatch(shutdown).await;
        let _ = tokio::join!(mapper, resync, sweeper, share);
    }

    /// What this controller reconciles and writes under: the membership of this replica's shard
    /// when sharded, else the leadership.
    fn term(&self) -> Leadership {
        self.shard.as_ref().map_or_else(|| self.env.leadership().clone(), |s| s.membership().clone())
    }

    /// Waits until this controller may reconcile: the host leads, or (sharded) this replica is
    /// a member and its sharded caches have listed since its term began.
    async fn serving(&self, term: &mut Leadership) -> bool {
        match &self.shard {
            Some(shard) => shard.caught_up().await,
            None => term.wait_until_leading().await,
        }
    }

    /// Hands keys to at most the allowed number of concurrent reconciles, only while this host
    /// leads (sharded: is a member of the ring).
    async fn dispatch(self: &Arc<Self>, shutdown: CancellationToken) {
        let mut leadership = self.term();
        self.metrics.max_concurrent.set(self.workers.limit() as i64);
        loop {
            let lease = tokio::select! {
                _ = shutdown.cancelled() => break,
                lease = async {
                    self.serving(&mut leadership).await;
                    let slot = self.workers.acquire().await;
                    (self.queue.get().await, slot)
                } => lease,
            };
            let (Some(lease), slot) = lease else { break };
            if !leadership.is_leader() {
                // Lost leadership while waiting: hand the key back for the next leader term.
                self.queue.add_for(lease.key().clone(), Reason::Resync);
                continue;
            }
            let controller = self.clone();
            tokio::spawn(async move {
                let version = controller.version();
                let key = lease.key().clone();
                let reasons = lease.reasons();
                let span = tracing::info_span!("reconcile", plugin = %controller.name, key = %key, reason = %reasons);
                let outcome = if controller.held(&version, &key) {
                    tracing::debug!(parent: &span, "quarantined: not reconciled");
                    Outcome::Quarantined
                } else {
                    for reason in reasons.iter() {
                        controller.metrics.count_reason(reason.as_str());
                    }
                    controller.process(&version, &key).instrument(span).await
                };
                match outcome {
                    Outcome::Success => controller.queue.forget(&key),
                    Outcome::RequeueAfter(after) if after < reconcile::MIN_REQUEUE_AFTER => {
                        // "Again soon": through the limiter, so that no plugin can busy-loop.
                        controller.queue.add_rate_limited_for(key, Reason::Requeue);
                    }
                    Outcome::RequeueAfter(after) => {
                        controller.queue.forget(&key);
                        controller.queue.add_after(key, after);
                    }
                    Outcome::Error => controller.queue.add_rate_limited(key),
                    Outcome::Quarantined => controller.queue.forget(&key),
                }
                drop(lease);
                drop(slot);
                controller.metrics.max_concurrent.set(controller.workers.limit() as i64);
            });
        }
        // Graceful: running reconciles finish, nothing new starts.
        self.queue.shut_down_with_drain().await;
        self.mapper.queue.shut_down();
        tracing::info!(plugin = %self.name, "workers stopped");
    }

    /// Runs the plugin's `map-related` for watched objects, off the informers' tasks, and
    /// enqueues the keys it returns — only while this host leads (a standby keeps the backlog
    /// and maps it when it takes over). Several objects at once: one call on the instance the
    /// memory budget reserves for map-related, and more on reconcile worker slots that are free,
    /// so that the instances stay within the reservation. A backlog that overflowed (objects
    /// left out) enqueues every primary instead. A fault is retried with backoff; an object that
    /// keeps faulting is quarantined like a primary ([`quarantine`]).
    async fn map_related(self: Arc<Self>, shutdown: CancellationToken) {
        let mut leadership = self.term();
        let reserved = Arc::new(tokio::sync::Semaphore::new(1));
        loop {
            let lease = tokio::select! {
                _ = shutdown.cancelled() => return,
                lease = async {
                    self.serving(&mut leadership).await;
                    self.resync_if_overflowed();
                    self.mapper.queue.get().await
                } => match lease {
                    Some(lease) => lease,
                    None => return,
                },
            };
            if !leadership.is_leader() {
                self.mapper.queue.add(lease.key().clone());
                continue;
            }
            self.resync_if_overflowed();
            // The reserved instance first, else a free worker slot.
            let place = tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                permit = reserved.clone().acquire_owned() => MapPlace::Reserved { _permit: permit.expect("never closed") },
                slot = self.workers.acquire() => MapPlace::Worker { _slot: slot },
            };
            let controller = self.clone();
            tokio::spawn(async move {
                controller.map_one(lease.key()).await;
                drop(lease);
                drop(place);
            });
        }
    }

    /// After objects were left out of the backlog: every primary, instead of their mappings.
    fn resync_if_overflowed(&self) {
        if !self.mapper.take_overflow() {
            return;
        }
        let primaries = self.enqueue_primaries();
        tracing::warn!(
            plugin = %self.name,
            primaries,
            "more watched objects waited for map-related than the host keeps ({MAP_BACKLOG}): reconciling every primary instead"
        );
    }

    /// Maps one watched object in the state it waits in.
    async fn map_one(&self, slot: &MapKey) {
        let Some(object) = self.mapper.get(slot) else { return };
        let resource = &slot.0;
        let subject = Subject::Watched(resource.clone(), slot.1.clone());
        let seen = reconcile::meta(&object).resource_version.unwrap_or_default();
        if self.quarantine.holds(&subject, || Some(seen.clone())) {
            self.mapper.mapped(slot, &object);
            self.mapper.queue.forget(slot);
            return;
        }
        let version = self.version();
        // Only keys of cached primaries: a reconcile of any other key would find nothing to do,
        // and invented keys would grow the queue without bound.
        let primary = &version.manifest.primary;
        match version.runner.map_related(resource, object.clone(), |key| version.primary.get(primary, key).is_some()).await {
            Ok(keys) => {
                self.quarantine.succeeded(&subject);
                self.mapper.mapped(slot, &object);
                self.mapper.queue.forget(slot);
                keys.into_iter().for_each(|key| self.queue.add_for(key, Reason::Mapped));
            }
            // A fault (map-related returns no errors); one of the object's own is counted
            // towards quarantining it.
            Err(e) => {
                let entered = match &e {
                    CallError::Fault(fault) if is_object_fault(fault) => self.quarantine.fault(&subject, &seen),
                    _ => None,
                };
                let Some(entered) = entered else {
                    tracing::warn!(plugin = %self.name, %resource, object = %slot.1, "map-related failed, retrying with backoff: {e}");
                    self.mapper.queue.add_rate_limited(slot.clone());
                    return;
                };
                self.mapper.mapped(slot, &object);
                self.mapper.queue.forget(slot);
                let note = format!(
                    "map-related of {} faulted {} times in a row on this object (last: the plugin {e}); it is not mapped again until the object changes (any update) or a new version of {} is loaded",
                    self.name, entered.faults, self.name
                );
                tracing::warn!(plugin = %self.name, %resource, object = %slot.1, "{note}");
                self.events.publish(crate::events::ObjectEvent {
                    regarding: resource.clone(),
                    key: slot.1.clone(),
                    uid: crate::resource::uid_of(&object),
                    warning: true,
                    reason: "Quarantined".into(),
                    action: "MapRelated".into(),
                    note,
                });
            }
        }
    }

    /// Enqueues every primary each resync period (controller-runtime's SyncPeriod).
    async fn resync(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            let Some(period) = self.version().manifest.resync else {
                // Resync off; a later version may turn it on, so look again now and then.
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(60)) => continue,
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            self.enqueue_primaries();
        }
    }

    /// Publishes how many primaries this replica has of a sharded plugin, now and then.
    async fn publish_share(self: Arc<Self>, shutdown: CancellationToken) {
        let Some(shard) = self.shard.clone() else { return };
        loop {
            shard.publish(&self.name, Some(self.version().primary_count()));
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
        }
    }

    /// Drops instances that have been idle for a while: an idle plugin holds no linear memory.
    async fn drop_idle_instances(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(IDLE_SWEEP.min(self.env.idle_instances)) => {}
            }
            let dropped = self.version().runner.drop_idle_instances(self.env.idle_instances);
            if dropped > 0 {
                tracing::debug!(plugin = %self.name, dropped, "dropped idle instances");
            }
        }
    }
}

/// The finalizers an object (JSON text) carries.
pub fn finalizers_of(json: &str) -> Vec<String> {
    reconcile::meta(json).finalizers
}

/// Where a `map-related` call runs: the instance reserved for map-related, or a free reconcile
/// worker slot. Held until the call ends.
enum MapPlace {
    Reserved { _permit: tokio::sync::OwnedSemaphorePermit },
    Worker { _slot: workers::Slot },
}

/// What every version of a controller shares.
struct Parts<'a> {
    queue: &'a WorkQueue<ObjectKey>,
    mapper: &'a Arc<MapBacklog>,
    released: &'a Released,
    api: Arc<dyn Api>,
    events: Arc<dyn EventSink>,
    metrics: &'a PluginMetrics,
    /// Watches that trigger nothing: a shadow candidate's.
    inert: bool,
    /// This replica's shard, when the plugin is sharded.
    shard: Option<&'a Arc<Shard>>,
    /// What the plugin's `fleet` calls reach in each of its clusters.
    targets: &'a Arc<Targets>,
}

/// The Event sink of a shadow candidate: its Events are compared, never sent.
struct Unsent;

impl EventSink for Unsent {
    fn publish(&self, _: crate::events::ObjectEvent) {}
}

/// Subscribes the informers a plugin version needs and makes its runner.
async fn build_version(env: &Arc<Environment>, parts: &Parts<'_>, plugin: LoadedPlugin, previous_finalizers: Vec<String>) -> Result<Version, ControllerError> {
    let manifest = Arc::new(plugin.described.manifest.clone());
    // Each member's runner has a first instance of its own: budgeted like the hub's, before
    // anything of the version is built (refused, the member is retried later).
    let first = match env.member {
        Some(_) => Some(env.budget.account(&manifest.name).reserve_first(plugin.described.limits.memory_bytes).map_err(ControllerError::Reserve)?),
        None => None,
    };
    let primary_scope = env
        .discovery
        .resolve(&manifest.primary)
        .await
        .map_err(|source| InformerError::Resolve { key: Box::new(WatchKey::new(manifest.primary.clone(), None)), source })?;
    let primary_namespaced = primary_scope.scope == Scope::Namespaced;
    let releases = plugin.prepared.releases();

    // What to watch, in which namespaces, and what each event means (the manifest's plan, which
    // admission counted). Reads of a resource not listed otherwise are served by a watch that
    // triggers nothing. A sharded plugin's primary and owned watches list only this shard's
    // objects.
    let sharded = parts.shard.map(|s| s.selector().clone());
    let mut subscriptions = Vec::new();
    let mut primary = CacheView::default();
    let mut primary_namespaces = Vec::new();
    for planned in manifest.watch_plan() {
        let server_selector = match &planned.role {
            WatchRole::Primary | WatchRole::Owned => sharded.clone(),
            _ => None,
        };
        let mapping = match &planned.role {
            WatchRole::Primary => KeyMapping::Primary { selector: manifest.primary_selector.clone(), releases },
            WatchRole::Owned => KeyMapping::Owners { controller_only: true },
            WatchRole::Watched(Mapping::OwnerReferences) => KeyMapping::Owners { controller_only: false },
            WatchRole::Watched(Mapping::Label(label)) => KeyMapping::Label(label.clone()),
            WatchRole::Watched(Mapping::MapRelated) => KeyMapping::MapRelated,
            WatchRole::Read => KeyMapping::None,
        };
        let cluster = env.discovery.resolve(&planned.resource).await.map(|r| r.scope == Scope::Cluster).unwrap_or(false);
        for namespace in planned.scopes(env.namespaces(), cluster) {
            let trigger = Arc::new(Trigger {
                queue: parts.queue.clone(),
                primary: manifest.primary.clone(),
                primary_namespaced,
                resource: planned.resource.clone(),
                mapping: if parts.inert { KeyMapping::None } else { mapping.clone() },
                mapper: parts.mapper.clone(),
                released: parts.released.clone(),
            });
            let key = WatchKey {
                resource: planned.resource.clone(),
                namespace: namespace.clone(),
                selector: planned.selector.clone(),
                server_selector: server_selector.clone(),
                metadata_only: planned.metadata_only,
            };
            let subscription = env.informers.subscribe(key, trigger).await?;
            if matches!(mapping, KeyMapping::Primary { .. }) {
                primary.insert(subscription.store().clone(), subscription.selector().cloned());
                primary_namespaces.push(namespace);
            }
            subscriptions.push(subscription);
        }
    }

    // Reads see what the subscriptions select: all of a store when one of them is unfiltered.
    let mut cache = CacheView::default();
    for subscription in &subscriptions {
        cache.insert(subscription.store().clone(), subscription.selector().cloned());
    }
    cache.hand_as(&manifest);
    // A sharded plugin's children are labelled for this shard as they are written, and the
    // assigner places its primaries and children (not a shadow candidate's: it runs on the
    // live version's objects).
    let (api, claim): (Arc<dyn Api>, _) = match parts.shard {
        Some(shard) => {
            let api = Arc::new(sharded::Labelling::new(parts.api.clone(), shard, &manifest));
            let claim = Claim {
                primary: manifest.primary.clone(),
                selector: manifest.primary_selector.clone(),
                owns: manifest.owns.clone(),
                namespaces: primary_namespaces,
            };
            (api, (!parts.inert).then(|| shard.claims().add(&manifest.name, claim)))
        }
        None => (parts.api.clone(), None),
    };
    let target = Target { cache: Arc::new(cache), api, events: parts.events.clone() };
    let here = env.member.as_ref().map(|m| m.name.clone());
    let fleet = Arc::new(PluginFleet { here, targets: parts.targets.clone(), scope: manifest.clusters.clone(), engaged: env.fleet.clone() });
    let services = Services::new(target.clone(), fleet);
    let runner = env.runtime.runner(plugin.prepared.clone(), &plugin.described, services, parts.metrics.clone(), &plugin.settings).with_budget(&env.budget);
    let workers = plugin.options.max_concurrency.unwrap_or(manifest.max_concurrency) as usize;
    Ok(Version {
        plugin,
        manifest,
        runner: Arc::new(runner),
        primary,
        workers,
        subscriptions,
        previous_finalizers,
        tally: Tally::default(),
        _claim: claim,
        target,
        _first: first,
    })
}
