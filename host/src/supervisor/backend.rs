//! What a plugin slot drives, as traits: a loaded plugin version ([`Module`]), the controller that
//! runs it ([`Running`]), and the layers below that load files, admit identities, start
//! controllers and tell about them ([`Backend`]). [`HostBackend`] is the real one — the loader,
//! RBAC admission, [`Controller`], the status ConfigMap; the slots' unit tests drive a fake, with
//! no cluster and no WebAssembly.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::files::{ControllerFilter, Files};
use super::rollout;
use super::status::{self, StatusPublisher, Transition};
use super::{QUARANTINE_LISTED, Supervisor};
use crate::budget::MemoryBudget;
use crate::controller::{Controller, ControllerError, Environment, Health, ShadowReport};
use crate::events::ObjectEvent;
use crate::identity::AdmissionError;
use crate::manifest::Manifest;
use crate::plugin::{Digest, LoadError, LoadedPlugin, Loader, PluginOptions};
use crate::webhook::Hooked;

/// A loaded, described plugin version.
pub trait Module: Clone + Send + Sync + 'static {
    fn manifest(&self) -> &Manifest;
    fn digest(&self) -> Digest;
    /// The settings as the plugin's `describe` gets them.
    fn settings(&self) -> &str;
    fn options(&self) -> &PluginOptions;
    /// Linear memory one instance may hold.
    fn memory_bytes(&self) -> u64;
}

/// A plugin's controller, running one version at a time (and perhaps a candidate in its shadow).
#[async_trait::async_trait]
pub trait Running<P>: Send + Sync + 'static {
    /// Waits until the first version's caches have synced (bounded by the sync timeout).
    async fn first_sync(&self) -> Result<(), ControllerError>;
    fn is_synced(&self) -> bool;
    /// The version serving now.
    fn serving(&self) -> P;
    /// How the version serving now is doing.
    fn health(&self) -> Health;
    /// Replaces the version; the old one keeps serving when it fails.
    async fn swap(&self, plugin: P) -> Result<(), ControllerError>;
    /// The finalizers the serving version uses, its own and those it took over.
    fn finalizers(&self) -> Vec<String>;
    /// Runs `plugin` in the shadow of the version serving, in place of any candidate before.
    async fn shadow(&self, plugin: P) -> Result<(), ControllerError>;
    /// Ends the shadow run, returning its last report.
    fn end_shadow(&self) -> Option<ShadowReport>;
    fn shadow_report(&self) -> Option<ShadowReport>;
    /// Waits until it has stopped (after its stop token was cancelled): running reconciles
    /// finished, queued Events sent.
    async fn stopped(&self);
    /// Objects that still carry its finalizers as it goes away get a Warning Event each; the
    /// status entry that keeps them listed, if there are any.
    fn leftover_finalizers(&self) -> Option<String>;
    /// Its entries in the status listing.
    fn list(&self, file: &Path, listing: &mut BTreeMap<String, String>);
}

/// The layers a slot works through.
#[async_trait::async_trait]
pub trait Backend: Send + Sync + 'static {
    type Plugin: Module;
    type Controller: Running<Self::Plugin>;

    /// Reads, compiles (or fetches from the artifact cache) and describes a plugin file.
    async fn load(&self, path: &Path) -> Result<Self::Plugin, LoadError>;
    /// Asks the cluster whether the plugin's identity may do all its manifest declares (and, when
    /// `options` shard it here, patch what the assigner labels for it).
    async fn admit(&self, manifest: &Manifest, options: &PluginOptions) -> Result<(), AdmissionError>;
    /// Starts a controller for `plugin`, stopping when `stop` is cancelled; fails while a
    /// resource it needs is not served (yet).
    async fn start(&self, plugin: Self::Plugin, stop: CancellationToken) -> Result<Arc<Self::Controller>, ControllerError>;
    /// Whether `--controllers` enables the plugin.
    fn enables(&self, name: &str) -> bool;
    fn budget(&self) -> &MemoryBudget;
    fn rollout(&self) -> rollout::Policy;
    /// Whether this host leads now: a rollback window counts leading time only.
    fn leading(&self) -> bool;
    /// Records a transition: the status listing first (so the Event can name its object), then
    /// the log line, the metric and the Event.
    async fn report(&self, plugin: &str, transition: Transition, note: String);
    /// Rewrites the status listing (what runs changed without a transition to record).
    async fn publish(&self);
    /// Has a file of the plugin directory looked at again after a growing delay though it does
    /// not change; `None` for files other sources hand over (they decide when to hand over again).
    async fn retry_later(&self, path: &Path) -> Option<Duration>;
}

impl Module for LoadedPlugin {
    fn manifest(&self) -> &Manifest {
        &self.described.manifest
    }
    fn digest(&self) -> Digest {
        self.digest
    }
    fn settings(&self) -> &str {
        &self.settings
    }
    fn options(&self) -> &PluginOptions {
        &self.options
    }
    fn memory_bytes(&self) -> u64 {
        self.described.limits.memory_bytes
    }
}

#[async_trait::async_trait]
impl Running<LoadedPlugin> for Controller {
    async fn first_sync(&self) -> Result<(), ControllerError> {
        Controller::first_sync(self).await
    }
    fn is_synced(&self) -> bool {
        Controller::is_synced(self)
    }
    fn serving(&self) -> LoadedPlugin {
        self.version().plugin.clone()
    }
    fn health(&self) -> Health {
        self.version().health()
    }
    async fn swap(&self, plugin: LoadedPlugin) -> Result<(), ControllerError> {
        Controller::swap(self, plugin).await.map(drop)
    }
    fn finalizers(&self) -> Vec<String> {
        let version = self.version();
        version.manifest.finalizer.iter().chain(&version.previous_finalizers).cloned().collect()
    }
    async fn shadow(&self, plugin: LoadedPlugin) -> Result<(), ControllerError> {
        self.shadow_with(plugin).await.map(drop)
    }
    fn end_shadow(&self) -> Option<ShadowReport> {
        Controller::end_shadow(self)
    }
    fn shadow_report(&self) -> Option<ShadowReport> {
        Controller::shadow_report(self)
    }
    async fn stopped(&self) {
        Controller::stopped(self).await
    }

    fn leftover_finalizers(&self) -> Option<String> {
        let version = self.version();
        let finalizers = self.finalizers();
        let finalizer = finalizers.first()?;
        let carrying: Vec<_> =
            version.primary_objects().into_iter().filter(|(_, json)| crate::controller::finalizers_of(json).iter().any(|f| finalizers.contains(f))).collect();
        if carrying.is_empty() {
            return None;
        }
        let name = self.name();
        tracing::warn!(plugin = name, finalizer = %finalizer, objects = carrying.len(), "removed while objects still carry its finalizer: release them with `kubewasm finalizers release {name}`");
        for (key, json) in &carrying {
            self.events().publish(ObjectEvent {
                regarding: version.manifest.primary.clone(),
                key: key.clone(),
                uid: crate::resource::uid_of(json),
                warning: true,
                reason: "FinalizerLeftBehind".into(),
                action: "Unload".into(),
                note: format!(
                    "plugin {name} was removed; its finalizer {finalizer} keeps this object from being deleted. Run `kubewasm finalizers release {name}` to remove it"
                ),
            });
        }
        Some(status::removed_entry(finalizer, &version.manifest.primary, carrying.len()))
    }

    fn list(&self, file: &Path, listing: &mut BTreeMap<String, String>) {
        let v = self.version();
        let mut entry = status::running_entry(&v.manifest.version, &v.plugin.digest.to_string(), &file.display().to_string(), v.manifest.finalizer.as_deref());
        entry.extend(status::quarantine_fields(&self.quarantined(QUARANTINE_LISTED)));
        if let Some(report) = Controller::shadow_report(self) {
            entry.push_str(&status::shadow_fields(&report));
            listing.insert(status::rollout_key(self.name()), status::rollout_report(self.name(), &v.manifest.version, &report));
        }
        listing.insert(self.name().to_string(), entry);
        listing.extend(self.member_entries());
    }
}

/// The real layers: the loader, RBAC admission, controllers, the status ConfigMap.
pub struct HostBackend {
    pub(super) env: Arc<Environment>,
    pub(super) loader: Loader,
    pub(super) filter: ControllerFilter,
    pub(super) budget: MemoryBudget,
    pub(super) rollout: rollout::Policy,
    pub(super) status: Arc<StatusPublisher>,
    /// The plugin directory's files, for retries of its refused files.
    pub(super) files: Arc<tokio::sync::Mutex<Files>>,
    /// The supervisor, whose slots make the status listing.
    pub(super) supervisor: OnceLock<Weak<Supervisor<HostBackend>>>,
    /// The plugins whose hooks the webhook server answers.
    pub(super) hooked: Hooked,
}

impl HostBackend {
    fn listing(&self) -> impl FnOnce() -> BTreeMap<String, String> + Send + 'static {
        let supervisor = self.supervisor.get().cloned();
        move || supervisor.and_then(|s| s.upgrade()).map(|s| s.listing()).unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl Backend for HostBackend {
    type Plugin = LoadedPlugin;
    type Controller = Controller;

    async fn load(&self, path: &Path) -> Result<LoadedPlugin, LoadError> {
        let loaded = self.loader.load(path).await;
        // Compiling and reading plugins leave tens of MiB freed: back at once, not at the
        // janitor's next look.
        crate::allocator::return_freed();
        loaded
    }

    async fn admit(&self, manifest: &Manifest, options: &PluginOptions) -> Result<(), AdmissionError> {
        let sharded = self.env.shard.is_some() && options.sharding != Some(false);
        self.env.identities.admit(manifest, sharded).await
    }

    /// Starts the controller and serves the plugin's hooks from its serving version (every
    /// replica serves hooks, standbys too) until it stops.
    async fn start(&self, plugin: LoadedPlugin, stop: CancellationToken) -> Result<Arc<Controller>, ControllerError> {
        let name = plugin.described.manifest.name.clone();
        let controller = Controller::start(self.env.clone(), plugin, stop.clone()).await?;
        let serving = Arc::downgrade(&controller);
        let number = self.hooked.serve(&name, Arc::new(move || serving.upgrade().map(|c| c.version().runner.clone())));
        let hooked = self.hooked.clone();
        tokio::spawn(async move {
            stop.cancelled().await;
            hooked.withdraw(&name, number);
        });
        Ok(controller)
    }

    fn enables(&self, name: &str) -> bool {
        self.filter.enables(name)
    }

    fn budget(&self) -> &MemoryBudget {
        &self.budget
    }

    fn rollout(&self) -> rollout::Policy {
        self.rollout
    }

    fn leading(&self) -> bool {
        self.env.leadership().is_leader()
    }

    async fn report(&self, plugin: &str, transition: Transition, note: String) {
        let uid = match self.status.publish(self.listing()).await {
            Ok(uid) => uid,
            Err(e) => {
                let object = self.status.object();
                tracing::warn!(configmap = %format!("{}/{}", object.namespace, object.name), "cannot update the status ConfigMap: {e}");
                None
            }
        };
        self.status.record(plugin, transition, &note, uid);
    }

    async fn publish(&self) {
        if let Err(e) = self.status.publish(self.listing()).await {
            tracing::warn!("cannot update the status ConfigMap: {e}");
        }
    }

    async fn retry_later(&self, path: &Path) -> Option<Duration> {
        self.files.lock().await.retry_later(path)
    }
}
