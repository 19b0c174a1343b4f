//! A plugin's controller: triggers → queue → workers → plugin → actions.
//!
//! Informer events become keys in the plugin's queue ([`trigger`]); a dispatcher hands keys to
//! up to `max-concurrency` reconciles at once, only while this host leads and only after the
//! plugin's caches have synced; each reconcile runs the plugin's current version
//! ([`reconcile`]); its result forgets, requeues or retries the key. A periodic resync enqueues
//! every primary again. The controller outlives plugin versions: [`Controller::swap`] replaces
//! the version while the queue and its backoff state stay.

mod reconcile;
mod trigger;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use reconcile::Outcome;
use trigger::{MapRequest, Mapping as TriggerMapping, Trigger};

use crate::client::{ClientLimits, KubeWriter};
use crate::discovery::Discovery;
use crate::events::EventRecorder;
use crate::informer::{CacheView, InformerError, Informers, Subscription, WatchKey};
use crate::leader::Leadership;
use crate::manifest::{Manifest, Mapping};
use crate::metrics::{ControllerMetrics, Metrics};
use crate::plugin::LoadedPlugin;
use crate::queue::{QueueError, RateLimitConfig, WorkQueue};
use crate::resource::{Gvk, ObjectKey};
use crate::runtime::host::{Scope, Services};
use crate::runtime::{PluginMetrics, PluginRunner, Runtime};

/// What every controller of a host shares.
pub struct Environment {
    pub client: kube::Client,
    pub discovery: Arc<Discovery>,
    pub informers: Arc<Informers>,
    pub runtime: Arc<Runtime>,
    pub events: EventRecorder,
    pub leadership: Leadership,
    /// Namespaces served; empty for all.
    pub namespaces: Vec<String>,
    pub metrics: Arc<Metrics>,
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Watch(#[from] InformerError),
    #[error("workqueue: {0}")]
    Queue(#[from] QueueError),
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
}

impl Version {
    /// The informers this version listens to.
    pub fn watches(&self) -> impl Iterator<Item = &WatchKey> {
        self.subscriptions.iter().map(Subscription::key)
    }

    fn primary_keys(&self) -> Vec<ObjectKey> {
        self.primary.stores(&self.manifest.primary).iter().flat_map(|s| s.keys()).collect()
    }

    async fn synced(&self) {
        for subscription in &self.subscriptions {
            subscription.synced().await;
        }
    }
}

pub struct Controller {
    name: String,
    env: Arc<Environment>,
    queue: WorkQueue<ObjectKey>,
    writer: Arc<KubeWriter>,
    plugin_metrics: PluginMetrics,
    metrics: ControllerMetrics,
    current: RwLock<Arc<Version>>,
    mapper: mpsc::UnboundedSender<MapRequest>,
    synced: watch::Sender<bool>,
    /// Set once the controller's tasks have all ended.
    finished: watch::Sender<bool>,
    /// Tells the dispatcher that the number of workers may have changed.
    resized: tokio::sync::Notify,
}

impl Controller {
    /// Starts the controller of a loaded plugin: subscribes its informers and spawns its tasks,
    /// which stop when `shutdown` is cancelled (in-flight reconciles finish first).
    pub async fn start(env: Arc<Environment>, plugin: LoadedPlugin, shutdown: CancellationToken) -> Result<Arc<Self>, ControllerError> {
        let name = plugin.described.manifest.name.clone();
        let queue = WorkQueue::new(RateLimitConfig::default(), env.metrics.workqueue(&name))?;
        let limits = ClientLimits {
            qps: plugin.options.qps.unwrap_or(ClientLimits::default().qps),
            burst: plugin.options.burst.unwrap_or(ClientLimits::default().burst),
        };
        let writer = Arc::new(KubeWriter::new(env.client.clone(), env.discovery.clone(), env.informers.clone(), &name, limits, env.leadership.clone()));
        let (mapper, mapper_rx) = mpsc::unbounded_channel();
        let plugin_metrics = env.metrics.plugin(&name);
        let version = build_version(&env, &queue, &mapper, &writer, &plugin_metrics, plugin).await?;
        let controller = Arc::new(Controller {
            metrics: env.metrics.controller(&name),
            name,
            env,
            queue,
            writer,
            plugin_metrics,
            current: RwLock::new(Arc::new(version)),
            mapper,
            synced: watch::channel(false).0,
            finished: watch::channel(false).0,
            resized: Default::default(),
        });
        tokio::spawn(controller.clone().run(mapper_rx, shutdown));
        Ok(controller)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The version serving now.
    pub fn version(&self) -> Arc<Version> {
        self.current.read().clone()
    }

    /// Whether the caches of the plugin have synced.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Replaces the plugin version. Reconciles already running finish on the old version; every
    /// later one runs the new. Informers the new version needs are started before those only
    /// the old one needed are released; then every primary is enqueued once (level-triggered
    /// catch-up). The queue and its backoff state stay.
    pub async fn swap(&self, plugin: LoadedPlugin) -> Result<Arc<Version>, ControllerError> {
        let version = build_version(&self.env, &self.queue, &self.mapper, &self.writer, &self.plugin_metrics, plugin).await?;
        version.synced().await;
        let version = Arc::new(version);
        let old = std::mem::replace(&mut *self.current.write(), version.clone());
        self.metrics.max_concurrent.set(version.workers as i64);
        self.resized.notify_one();
        drop(old);
        for key in version.primary_keys() {
            self.queue.add(key);
        }
        Ok(version)
    }

    /// Waits until the controller has stopped after shutdown: no reconcile is running.
    pub async fn stopped(&self) {
        let _ = self.finished.subscribe().wait_for(|done| *done).await;
    }

    async fn run(self: Arc<Self>, mapper_rx: mpsc::UnboundedReceiver<MapRequest>, shutdown: CancellationToken) {
        let version = self.version();
        let synced = tokio::select! {
            _ = shutdown.cancelled() => false,
            _ = version.synced() => true,
        };
        drop(version);
        if synced {
            self.synced.send_replace(true);
            tracing::info!(plugin = %self.name, "caches synced");
            let mapper = tokio::spawn(self.clone().map_related(mapper_rx, shutdown.clone()));
            let resync = tokio::spawn(self.clone().resync(shutdown.clone()));
            self.dispatch(shutdown).await;
            let _ = tokio::join!(mapper, resync);
        }
        self.finished.send_replace(true);
    }

    /// Hands keys to at most `workers` concurrent reconciles, only while this host leads.
    async fn dispatch(self: &Arc<Self>, shutdown: CancellationToken) {
        let mut leadership = self.env.leadership.clone();
        let mut capacity = self.version().workers;
        let permits = Arc::new(Semaphore::new(capacity));
        self.metrics.max_concurrent.set(capacity as i64);
        loop {
            let lease = tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.resized.notified() => {
                    capacity = resize(&permits, capacity, self.version().workers);
                    continue;
                }
                lease = async {
                    leadership.wait_for(true).await;
                    let permit = permits.clone().acquire_owned().await.expect("never closed");
                    (self.queue.get().await, permit)
                } => lease,
            };
            let (Some(lease), permit) = lease else { break };
            if !leadership.is_leader() {
                // Lost leadership while waiting: hand the key back for the next leader term.
                self.queue.add(lease.key().clone());
                continue;
            }
            let controller = self.clone();
            tokio::spawn(async move {
                let version = controller.version();
                let key = lease.key().clone();
                match controller.process(&version, &key).await {
                    Outcome::Success => controller.queue.forget(&key),
                    Outcome::RequeueAfter(after) => {
                        controller.queue.forget(&key);
                        controller.queue.add_after(key, after);
                    }
                    Outcome::Error => controller.queue.add_rate_limited(key),
                }
                drop(lease);
                drop(permit);
            });
        }
        // Graceful: running reconciles finish, nothing new starts.
        self.queue.shut_down_with_drain().await;
        tracing::info!(plugin = %self.name, "workers stopped");
    }

    /// Runs the plugin's `map-related` for watched objects, one at a time, off the informers'
    /// tasks, and enqueues the keys it returns.
    async fn map_related(self: Arc<Self>, mut requests: mpsc::UnboundedReceiver<MapRequest>, shutdown: CancellationToken) {
        loop {
            let (resource, object) = tokio::select! {
                _ = shutdown.cancelled() => return,
                request = requests.recv() => match request {
                    Some(request) => request,
                    None => return,
                },
            };
            match self.version().runner.map_related(&resource, object).await {
                Ok(keys) => keys.into_iter().for_each(|key| self.queue.add(key)),
                Err(e) => tracing::warn!(plugin = %self.name, %resource, "map-related failed: {e}"),
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
            for key in self.version().primary_keys() {
                self.queue.add(key);
            }
        }
    }
}

/// Adds or withdraws permits so that `to` reconciles may run at once.
fn resize(permits: &Semaphore, from: usize, to: usize) -> usize {
    if to > from {
        permits.add_permits(to - from);
    } else {
        permits.forget_permits(from - to);
    }
    to
}

/// Subscribes the informers a plugin version needs and makes its runner.
async fn build_version(
    env: &Arc<Environment>,
    queue: &WorkQueue<ObjectKey>,
    mapper: &mpsc::UnboundedSender<MapRequest>,
    writer: &Arc<KubeWriter>,
    plugin_metrics: &PluginMetrics,
    plugin: LoadedPlugin,
) -> Result<Version, ControllerError> {
    let manifest = Arc::new(plugin.described.manifest.clone());
    let primary_scope = env.discovery.resolve(&manifest.primary).await.map_err(|source| InformerError::Resolve {
        key: Box::new(WatchKey { resource: manifest.primary.clone(), namespace: None, selector: None }),
        source,
    })?;
    let primary_namespaced = primary_scope.scope == Scope::Namespaced;

    // What to watch, and what each event means. Reads of a resource not listed otherwise are
    // served by a watch that triggers nothing.
    let mut wanted: Vec<(Gvk, Option<crate::selector::LabelSelector>, TriggerMapping)> =
        vec![(manifest.primary.clone(), manifest.primary_selector.clone(), TriggerMapping::Primary)];
    for owned in &manifest.owns {
        wanted.push((owned.clone(), None, TriggerMapping::Owners { controller_only: true }));
    }
    for watch in &manifest.watches {
        let mapping = match &watch.mapping {
            Mapping::OwnerReferences => TriggerMapping::Owners { controller_only: false },
            Mapping::Label(label) => TriggerMapping::Label(label.clone()),
            Mapping::MapRelated => TriggerMapping::MapRelated,
        };
        wanted.push((watch.resource.clone(), watch.selector.clone(), mapping));
    }
    // A primary selector also bounds what the plugin reads of its primary's kind: the primary
    // watch serves those reads, unless a grant to list the kind asks for all of it. (A second,
    // unfiltered watch would cache every selected object twice.)
    for resource in manifest.cached_resources() {
        let served = wanted.iter().any(|(gvk, selector, _)| gvk == resource && selector.is_none());
        let selected_primary = *resource == manifest.primary && manifest.primary_selector.is_some() && !manifest.lists(resource);
        if !served && !selected_primary {
            wanted.push((resource.clone(), None, TriggerMapping::None));
        }
    }

    let namespaces: Vec<Option<String>> =
        if env.namespaces.is_empty() { vec![None] } else { env.namespaces.iter().cloned().map(Some).collect() };
    let mut subscriptions = Vec::new();
    let mut primary = CacheView::default();
    for (resource, selector, mapping) in wanted {
        let cluster = env.discovery.resolve(&resource).await.map(|r| r.scope == Scope::Cluster).unwrap_or(false);
        let scopes: &[Option<String>] = if cluster { &[None] } else { &namespaces };
        for namespace in scopes {
            let trigger = Arc::new(Trigger {
                queue: queue.clone(),
                primary: manifest.primary.clone(),
                primary_namespaced,
                resource: resource.clone(),
                mapping: mapping.clone(),
                mapper: mapper.clone(),
            });
            let key = WatchKey { resource: resource.clone(), namespace: namespace.clone(), selector: selector.clone() };
            let subscription = env.informers.subscribe(key, trigger).await?;
            if matches!(mapping, TriggerMapping::Primary) {
                primary.insert(subscription.store().clone());
            }
            subscriptions.push(subscription);
        }
    }

    // Reads go to the broadest store of each resource: an unfiltered watch when there is one.
    let mut cache = CacheView::default();
    for subscription in &subscriptions {
        let resource = &subscription.key().resource;
        let unfiltered = subscriptions.iter().any(|s| s.key().resource == *resource && s.key().selector.is_none());
        if subscription.key().selector.is_none() || !unfiltered {
            cache.insert(subscription.store().clone());
        }
    }
    let cache = Arc::new(cache);
    let services = Services { cache, writer: writer.clone(), events: Arc::new(env.events.clone()) };
    let runner = env.runtime.runner(plugin.prepared.clone(), &plugin.described, services, plugin_metrics.clone(), &plugin.settings);
    let workers = plugin.options.max_concurrency.unwrap_or(manifest.max_concurrency) as usize;
    Ok(Version { plugin, manifest, runner: Arc::new(runner), primary, workers, subscriptions })
}
