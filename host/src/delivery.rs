//! Plugin resources (`plugins.kubewasm.io`, `v1alpha1`): the host's own controller, which pulls
//! each Plugin's module from its OCI registry, hands it to the [`Supervisor`] and writes what
//! happened into the Plugin's status.
//!
//! It keeps the rules the host enforces for plugins: Plugins come from a shared informer (one
//! watch, in the host's namespace), each key is reconciled by one task at a time from a
//! rate-limited [`WorkQueue`], failures back off per key, status is written with
//! `observedGeneration` by server-side apply (no conflicts to retry), and a change of the
//! `Ready` condition is an Event on the Plugin. Only the leader writes; every replica pulls and
//! loads, so standbys stay warm.
//!
//! Each Plugin has a pipeline of its own: a key handed out by the queue gets a task for that one
//! reconcile (pull, hand over, status), so no Plugin waits for another's pull, compile, describe
//! or sync — a slow or hostile one holds up nobody's load, update or deletion. A pull in flight
//! is cancelled when its Plugin is deleted or its spec changes (the key is queued again and
//! looks afresh); what the supervisor does with a module it was handed runs to its end (its own
//! deadlines bound it). A task that panics is logged and its key retried with backoff: a bad
//! Plugin never stops the others, and nothing is lost. Untrusted text in a spec (a module
//! reference, settings, `pollInterval`) is parsed without panics ([`read_plugin`],
//! [`PluginObject::spec`]).
//!
//! A Plugin's module and settings become `NAME.wasm` and `NAME.toml` in a directory of the
//! host's own (the supervisor's unit is a file), written whole before they are handed over. A
//! version that cannot be pulled or is refused leaves the running one serving. A host that
//! starts while a Plugin's registry is unreachable runs the last module it pulled for that
//! reference, if its cache still has it (`Registries::last_known`), and says so in the status. A Plugin's
//! `spec.candidate` becomes `NAME.next.wasm`, run in the shadow of the live version; its status
//! shows how the shadow run compares, and whether the candidate has agreed long enough to be
//! promoted. Promotion is the Plugin's owner's edit (`module` set to the candidate — `kubewasm
//! rollout promote NAME --resource NS` makes it): the host never rewrites a spec, which a
//! GitOps tool would only revert.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use oci_client::Reference;
use parking_lot::Mutex;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::client::{ApiClient, WriteOp, WriteRequest};
use crate::events::{EventRecorder, ObjectEvent};
use crate::excerpt::excerpt;
use crate::informer::{Event, Informers, Store, Subscriber, Subscription, WatchKey};
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::oci::{OciError, Pulled, Registries, parse_reference, place, write_atomically};
use crate::plugin::candidate_of;
use crate::queue::{Lease, RateLimitConfig, WorkQueue};
use crate::resource::{Gvk, ObjectKey};
use crate::supervisor::{PluginState, RejectReason, Supervisor};

/// How often a tag is resolved again when the Plugin does not say.
pub const DEFAULT_POLL: Duration = Duration::from_secs(300);
/// How often a starting plugin is looked at, until it runs or fails.
const STARTING_RECHECK: Duration = Duration::from_secs(2);
/// A standby looks again this often, to write status once it leads.
const STANDBY_RECHECK: Duration = Duration::from_secs(15);
/// A Plugin with a candidate is looked at again this often: its shadow counts change as it runs.
const CANDIDATE_RECHECK: Duration = Duration::from_secs(5);
/// A Plugin whose module is pinned is looked at again this often, for a rollback since.
const ROLLBACK_RECHECK: Duration = Duration::from_secs(30);

/// The Plugin kind.
pub fn plugin_kind() -> Gvk {
    Gvk::new("kubewasm.io", "v1alpha1", "Plugin")
}

/// A Plugin resource as the host reads it ([`read_plugin`]).
#[derive(Debug, Deserialize)]
pub struct PluginObject {
    metadata: Metadata,
    spec: PluginSpec,
    #[serde(default)]
    status: serde_json::Value,
}

/// Reads a Plugin from its JSON. Untrusted: never panics.
pub fn read_plugin(json: &str) -> Result<PluginObject, serde_json::Error> {
    serde_json::from_str(json)
}

/// What a Plugin's spec asks for, checked.
#[derive(Debug, Clone)]
pub struct Spec {
    pub module: Reference,
    /// `spec.settings` as `NAME.toml` holds them.
    pub settings: String,
    /// How often a tag is resolved again.
    pub poll: Duration,
}

impl PluginObject {
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The spec, checked: the module reference, the settings as TOML, the poll interval (a
    /// `pollInterval` of zero means the default).
    pub fn spec(&self) -> Result<Spec, Failure> {
        let poll = match self.spec.poll_interval.as_deref().map(crate::duration::parse) {
            None => DEFAULT_POLL,
            Some(Ok(poll)) if poll.is_zero() => DEFAULT_POLL,
            Some(Ok(poll)) => poll,
            Some(Err(e)) => return Err(Failure { reason: FailReason::InvalidSpec, message: format!("spec.pollInterval: {e}"), retry: false }),
        };
        let module = parse_reference(&self.spec.module)?;
        let settings = settings_toml(self.spec.settings.as_ref())?;
        Ok(Spec { module, settings, poll })
    }
}

#[derive(Debug, Deserialize)]
struct Metadata {
    name: String,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    uid: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PluginSpec {
    module: String,
    #[serde(default)]
    settings: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    poll_interval: Option<String>,
    /// A version to run in the shadow of `module`.
    #[serde(default)]
    candidate: Option<String>,
}

/// Why a Plugin's spec does not run (the running version, if any, keeps serving).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The `Ready` condition's reason.
    pub reason: FailReason,
    pub message: String,
    /// Whether to try again (with backoff) without a spec change.
    pub retry: bool,
}

/// Why a Plugin does not run: its registry, its spec, or the supervisor's refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    /// The supervisor refused the module it was handed.
    Refused(RejectReason),
    /// Pulling the module failed (the registry's reason: `TooLarge`, `PullTimeout`, ...).
    Pull(&'static str),
    InvalidSpec,
    InvalidSettings,
    /// `--controllers` disables it on this host.
    Disabled,
    /// The Plugin changed while its module was pulled.
    Cancelled,
}

impl FailReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailReason::Refused(reason) => reason.as_str(),
            FailReason::Pull(reason) => reason,
            FailReason::InvalidSpec => "InvalidSpec",
            FailReason::InvalidSettings => "InvalidSettings",
            FailReason::Disabled => "Disabled",
            FailReason::Cancelled => "Cancelled",
        }
    }
}

impl From<OciError> for Failure {
    fn from(e: OciError) -> Self {
        // What the registry serves is wrong, not unreachable: looked at again at the next poll
        // (or spec change), not pulled again and again with backoff.
        let retry = !matches!(e, OciError::Reference { .. } | OciError::MediaType { .. } | OciError::TooLarge { .. } | OciError::Digest { .. })
            && !matches!(&e, OciError::PullManifest { source, .. } | OciError::PullLayer { source, .. } if source.reason() == "TooLarge");
        Failure { reason: FailReason::Pull(e.reason()), message: e.to_string(), retry }
    }
}

/// What a reference resolved to (or why it could not be pulled, when trying again at once
/// would not help), and when.
struct Resolved {
    module: String,
    pulled: Result<Pulled, Failure>,
    at: Instant,
}

/// The pulls in flight, by Plugin, with the generation each works from: cancelled when their
/// Plugin goes or its spec changes.
#[derive(Default)]
struct InFlight(Mutex<HashMap<ObjectKey, (Option<i64>, CancellationToken)>>);

impl InFlight {
    fn start(&self, key: &ObjectKey, generation: Option<i64>) -> CancellationToken {
        let token = CancellationToken::new();
        self.0.lock().insert(key.clone(), (generation, token.clone()));
        token
    }

    fn end(&self, key: &ObjectKey) {
        self.0.lock().remove(key);
    }

    /// Cancels `key`'s pull unless it works from `generation` (`None`: the Plugin is gone).
    fn changed(&self, key: &ObjectKey, generation: Option<Option<i64>>) {
        let in_flight = self.0.lock();
        if let Some((working, token)) = in_flight.get(key)
            && generation.is_none_or(|g| g != *working)
        {
            token.cancel();
        }
    }

    fn cancel_all(&self) {
        self.0.lock().values().for_each(|(_, token)| token.cancel());
    }
}

/// The Plugin controller.
pub struct PluginResources {
    namespace: String,
    dir: PathBuf,
    registries: Registries,
    supervisor: Arc<Supervisor>,
    api: Arc<ApiClient>,
    events: EventRecorder,
    leadership: Leadership,
    queue: WorkQueue<ObjectKey>,
    /// Per Plugin: the last resolution of its reference.
    resolved: Mutex<HashMap<String, Resolved>>,
    /// Per Plugin: the module digest and settings handed to the supervisor.
    applied: Mutex<HashMap<String, (String, String)>>,
    /// Per Plugin: the candidate's reference, resolution and digest handed to the supervisor.
    candidates: Mutex<HashMap<String, Resolved>>,
    in_flight: Arc<InFlight>,
    /// Per Plugin: the module handed over from the cache because the registry was unreachable
    /// when this host started, until a pull succeeds.
    from_cache: Mutex<HashMap<String, String>>,
    subscription: Mutex<Option<Subscription>>,
}

/// Queues the key of every Plugin that changes, and cancels its pull if the spec it works from
/// is not the Plugin's any more.
struct Enqueue {
    queue: WorkQueue<ObjectKey>,
    in_flight: Arc<InFlight>,
}

#[derive(Deserialize)]
struct GenerationOnly {
    metadata: GenerationField,
}

#[derive(Deserialize)]
struct GenerationField {
    #[serde(default)]
    generation: Option<i64>,
}

impl Subscriber for Enqueue {
    fn on_event(&self, event: Event<'_>) {
        match event {
            Event::Applied { key, object, .. } => {
                let generation = serde_json::from_str::<GenerationOnly>(object.json()).ok().and_then(|o| o.metadata.generation);
                self.in_flight.changed(key, Some(generation));
                self.queue.add(key.clone());
            }
            Event::Deleted { key, .. } => {
                self.in_flight.changed(key, None);
                self.queue.add(key.clone());
            }
        }
    }
}

impl PluginResources {
    /// `dir` is the host's own directory for the Plugins' files (emptied here).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        namespace: String,
        dir: PathBuf,
        registries: Registries,
        supervisor: Arc<Supervisor>,
        api: Arc<ApiClient>,
        events: EventRecorder,
        leadership: Leadership,
        metrics: &Metrics,
    ) -> Arc<Self> {
        let queue = WorkQueue::new(
            RateLimitConfig { base_delay: Duration::from_secs(1), max_delay: Duration::from_secs(30), ..Default::default() },
            metrics.workqueue("kubewasm-plugins"),
        )
        .expect("a valid rate limit");
        Arc::new(PluginResources {
            namespace,
            dir,
            registries,
            supervisor,
            api,
            events,
            leadership,
            queue,
            resolved: Default::default(),
            applied: Default::default(),
            candidates: Default::default(),
            in_flight: Default::default(),
            from_cache: Default::default(),
            subscription: Default::default(),
        })
    }

    /// `Ok` once every Plugin has been looked at once.
    pub fn readiness(&self) -> Result<(), String> {
        match &*self.subscription.lock() {
            Some(s) if s.is_synced() => Ok(()),
            _ => Err(format!("not ready: Plugins in {} not listed yet", self.namespace)),
        }
    }

    /// Watches the Plugins (waiting for their CRD if it is not installed) and runs a pipeline
    /// per Plugin until `shutdown`.
    pub async fn run(self: Arc<Self>, informers: Arc<Informers>, shutdown: CancellationToken) {
        let key = WatchKey::new(plugin_kind(), Some(self.namespace.clone()));
        let mut delay = Duration::from_secs(1);
        let enqueue = Arc::new(Enqueue { queue: self.queue.clone(), in_flight: self.in_flight.clone() });
        let subscription = loop {
            match informers.subscribe(key.clone(), enqueue.clone()).await {
                Ok(subscription) => break subscription,
                Err(e) => tracing::warn!("cannot watch Plugins yet (is the CRD plugins.kubewasm.io installed?), retrying in {delay:?}: {e}"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(delay) => delay = (delay * 2).min(Duration::from_secs(30)),
            }
        };
        let store = subscription.store().clone();
        *self.subscription.lock() = Some(subscription);
        tracing::info!(namespace = %self.namespace, "serving Plugin resources");
        // The queue hands a key to one holder at a time, so there is at most one task per Plugin.
        let mut pipelines = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                lease = self.queue.get() => match lease {
                    Some(lease) => _ = pipelines.spawn(self.clone().pipeline(store.clone(), lease)),
                    None => break,
                },
                Some(_) = pipelines.join_next(), if !pipelines.is_empty() => {}
                _ = shutdown.cancelled() => break,
            }
        }
        self.queue.shut_down();
        self.in_flight.cancel_all();
        while pipelines.join_next().await.is_some() {}
    }

    /// One reconcile of one Plugin, then what comes next for its key. A panic is caught here:
    /// logged, and the key retried with backoff.
    async fn pipeline(self: Arc<Self>, store: Arc<Store>, lease: Lease<ObjectKey>) {
        let key = lease.key().clone();
        let next = std::panic::AssertUnwindSafe(self.reconcile(&store, &key)).catch_unwind().await;
        self.in_flight.end(&key);
        match next {
            Ok(Next::Done) => self.queue.forget(&key),
            Ok(Next::After(after)) => {
                self.queue.forget(&key);
                self.queue.add_after(key, after);
            }
            Ok(Next::Backoff) => self.queue.add_rate_limited(key),
            Err(panic) => {
                let what = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_default();
                tracing::error!(plugin = key.name(), "reconciling the Plugin panicked (a host bug; retrying with backoff): {what}");
                self.queue.add_rate_limited(key);
            }
        }
        // Dropping the lease hands the key back to the queue.
        drop(lease);
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.wasm"))
    }

    async fn reconcile(&self, store: &Store, key: &ObjectKey) -> Next {
        let name = key.name();
        let Some(json) = store.get(key) else {
            self.resolved.lock().remove(name);
            self.from_cache.lock().remove(name);
            self.drop_candidate(name).await;
            if self.applied.lock().remove(name).is_some() {
                self.supervisor.remove(&self.path(name)).await;
                let _ = std::fs::remove_file(self.path(name));
                let _ = std::fs::remove_file(self.path(name).with_extension("toml"));
                tracing::info!(plugin = name, "Plugin deleted: stopped");
            }
            return Next::Done;
        };
        let plugin = match read_plugin(&json) {
            Ok(plugin) => plugin,
            Err(e) => {
                tracing::warn!(plugin = name, "skipping a Plugin that does not parse: {e}");
                return Next::Done;
            }
        };
        let cancel = self.in_flight.start(key, plugin.metadata.generation);
        let spec = plugin.spec();
        let outcome = match &spec {
            Ok(spec) => self.bring_up(&plugin, spec, &cancel).await,
            Err(failure) => Err(failure.clone()),
        };
        if cancel.is_cancelled() {
            // Deleted or changed meanwhile: the key is queued again and looks afresh.
            return Next::Done;
        }
        if let Err(failure) = &outcome {
            tracing::warn!(plugin = name, reason = failure.reason.as_str(), "{}", failure.message);
        }
        let state = self.supervisor.state(name);
        let candidate = match (&plugin.spec.candidate, &state, &spec) {
            (Some(reference), PluginState::Running { .. }, Ok(spec)) => Some(self.bring_up_candidate(&plugin, spec, reference, &cancel).await),
            (Some(_), _, _) => {
                Some(Err(Failure { reason: FailReason::Refused(RejectReason::NotRunning), message: "waits for the live version to run".into(), retry: true }))
            }
            (None, _, _) => {
                self.drop_candidate(name).await;
                None
            }
        };
        if cancel.is_cancelled() {
            return Next::Done;
        }
        let poll = spec.as_ref().map_or(DEFAULT_POLL, |s| s.poll);
        let pinned = spec.as_ref().is_ok_and(|s| s.module.digest().is_some());
        let mut status = self.status(&plugin, &outcome, &state);
        if let Some(candidate) = &candidate {
            status["candidate"] = self.candidate_status(&plugin, candidate);
        }
        let written = self.write_status(&plugin, key, status).await;
        if candidate.is_some() && outcome.is_ok() {
            return Next::After(CANDIDATE_RECHECK);
        }
        match (&outcome, &state) {
            (Err(failure), _) if failure.retry => Next::Backoff,
            (Ok(()), PluginState::Starting) => Next::After(STARTING_RECHECK),
            (Ok(()), PluginState::Stopped { error: Some(_) }) => Next::Backoff,
            _ if !written => Next::After(STANDBY_RECHECK),
            _ if !pinned => Next::After(poll),
            // A version just loaded may still be rolled back: its status must follow.
            _ => Next::After(ROLLBACK_RECHECK),
        }
    }

    /// Pulls `reference` (a resolution, or a failure not worth retrying at once, is reused for
    /// `poll`), unless `cancel` fires first.
    async fn pull(
        &self,
        memo: &Mutex<HashMap<String, Resolved>>,
        name: &str,
        module: &str,
        reference: &Reference,
        poll: Duration,
        cancel: &CancellationToken,
    ) -> Result<Pulled, Failure> {
        let known = memo.lock().get(name).filter(|r| r.module == module && r.at.elapsed() < poll).map(|r| r.pulled.clone());
        if let Some(known) = known {
            return known;
        }
        let pulled = tokio::select! {
            pulled = self.registries.pull(reference) => pulled.map_err(Failure::from),
            _ = cancel.cancelled() => return Err(Failure { reason: FailReason::Cancelled, message: "the Plugin changed while its module was pulled".into(), retry: true }),
        };
        if pulled.as_ref().is_ok() || pulled.as_ref().is_err_and(|f| !f.retry) {
            memo.lock().insert(name.into(), Resolved { module: module.into(), pulled: pulled.clone(), at: Instant::now() });
        }
        pulled
    }

    /// Pulls the Plugin's module (resolving a tag at most once per poll interval) and hands it
    /// with its settings to the supervisor, unless that is what it already has. A host that has
    /// handed over nothing for the Plugin yet and cannot reach its registry hands over the last
    /// module it pulled for the reference, if it still has it.
    async fn bring_up(&self, plugin: &PluginObject, spec: &Spec, cancel: &CancellationToken) -> Result<(), Failure> {
        let name = plugin.metadata.name.as_str();
        let failure = match self.pull(&self.resolved, name, &plugin.spec.module, &spec.module, spec.poll, cancel).await {
            Ok(pulled) => {
                self.from_cache.lock().remove(name);
                return self.hand_over(name, &pulled, &spec.settings).await;
            }
            Err(failure) if matches!(failure.reason, FailReason::Pull("RegistryUnreachable" | "PullTimeout")) => failure,
            Err(failure) => return Err(failure),
        };
        if !self.applied.lock().contains_key(name)
            && let Some(pulled) = self.registries.last_known(&spec.module)
        {
            tracing::warn!(plugin = name, digest = %pulled.layer_digest, "registry unreachable: running the last module pulled for {}", plugin.spec.module);
            self.hand_over(name, &pulled, &spec.settings).await?;
            self.from_cache.lock().insert(name.into(), pulled.layer_digest);
        }
        match self.from_cache.lock().get(name) {
            Some(digest) => {
                Err(Failure { message: format!("{}; runs the last module pulled for it ({digest}), from the host's cache", failure.message), ..failure })
            }
            None => Err(failure),
        }
    }

    /// Hands the module and settings to the supervisor as `NAME.wasm` and `NAME.toml`, unless
    /// that is what it already runs.
    async fn hand_over(&self, name: &str, pulled: &Pulled, settings: &str) -> Result<(), Failure> {
        let wanted = (pulled.layer_digest.clone(), settings.to_string());
        let stopped = matches!(self.supervisor.state(name), PluginState::Stopped { .. });
        if self.applied.lock().get(name) == Some(&wanted) && !stopped {
            return Ok(());
        }
        let path = self.path(name);
        write_atomically(&path.with_extension("toml"), settings.as_bytes()).map_err(Failure::from)?;
        place(&pulled.path, &path).map_err(Failure::from)?;
        self.applied.lock().insert(name.into(), wanted);
        match self.supervisor.apply(&path, name).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(Failure { reason: FailReason::Disabled, message: format!("{name} is disabled by the host's --controllers"), retry: false }),
            Err(rejection) => {
                // Handed over again on the next try.
                self.applied.lock().remove(name);
                Err(Failure { reason: FailReason::Refused(rejection.reason), message: rejection.why, retry: rejection.retry })
            }
        }
    }

    /// Pulls the Plugin's candidate and hands it to the supervisor as `NAME.next.wasm` (with the
    /// Plugin's settings), unless that is what it already has.
    async fn bring_up_candidate(&self, plugin: &PluginObject, spec: &Spec, module: &str, cancel: &CancellationToken) -> Result<(), Failure> {
        let name = plugin.metadata.name.as_str();
        let reference = parse_reference(module)?;
        let running = self.supervisor.shadow_report(name).map(|r| format!("sha256:{}", r.digest));
        let pulled = self.pull(&self.candidates, name, module, &reference, spec.poll, cancel).await?;
        if running.as_deref() == Some(pulled.layer_digest.as_str()) {
            return Ok(());
        }
        let path = candidate_of(&self.path(name));
        place(&pulled.path, &path).map_err(Failure::from)?;
        match self.supervisor.apply(&path, name).await {
            Ok(_) => Ok(()),
            Err(rejection) => {
                // Pulled again and handed over on the next try.
                self.candidates.lock().remove(name);
                Err(Failure { reason: FailReason::Refused(rejection.reason), message: rejection.why, retry: rejection.retry })
            }
        }
    }

    /// Ends the shadow run of a Plugin whose candidate went (one was handed over if its file is
    /// there).
    async fn drop_candidate(&self, name: &str) {
        self.candidates.lock().remove(name);
        let path = candidate_of(&self.path(name));
        if path.exists() {
            self.supervisor.remove(&path).await;
            let _ = std::fs::remove_file(path);
        }
    }

    /// `status.candidate`: the candidate that runs in the shadow and how it compares so far.
    fn candidate_status(&self, plugin: &PluginObject, outcome: &Result<(), Failure>) -> serde_json::Value {
        let name = plugin.metadata.name.as_str();
        let report = self.supervisor.shadow_report(name);
        let agreed = report.as_ref().is_some_and(|r| r.agreed(self.supervisor.promote_after(name).max(1)));
        serde_json::json!({
            "module": plugin.spec.candidate,
            "digest": report.as_ref().map(|r| format!("sha256:{}", r.digest)),
            "version": report.as_ref().map(|r| r.version.clone()),
            "shadow": report.as_ref().map(|r| r.counts_field()),
            "agreed": agreed,
            "lastError": outcome.as_ref().err().map(|f| excerpt(&format!("{}: {}", f.reason.as_str(), f.message), 2048).into_owned()).unwrap_or_default(),
        })
    }

    /// The status the Plugin should have.
    fn status(&self, plugin: &PluginObject, outcome: &Result<(), Failure>, state: &PluginState) -> serde_json::Value {
        let rolled_back = self.supervisor.rolled_back(&self.path(&plugin.metadata.name));
        let Ready { ready, reason, message } = Ready::of(&plugin.metadata.name, outcome, state, rolled_back.as_deref());
        let (version, digest) = match state {
            PluginState::Running { version, digest } => (Some(version.clone()), Some(digest.clone())),
            _ => (None, None),
        };
        let status_text = if ready { "True" } else { "False" };
        let previous = ready_condition(&plugin.status);
        let unchanged = previous.as_ref().is_some_and(|c| c["status"] == status_text && c["reason"] == reason);
        let since = match previous {
            Some(c) if unchanged => c["lastTransitionTime"].clone(),
            _ => serde_json::Value::String(now_rfc3339()),
        };
        serde_json::json!({
            "observedGeneration": plugin.metadata.generation,
            "module": plugin.spec.module,
            "digest": digest,
            "version": version,
            "lastError": if ready { String::new() } else { message.clone() },
            "conditions": [{
                "type": "Ready",
                "status": status_text,
                "reason": reason,
                "message": excerpt(&message, 2048),
                "observedGeneration": plugin.metadata.generation,
                "lastTransitionTime": since,
            }],
        })
    }

    /// Writes the status if it changed, as the leader; records a change of `Ready` as an Event.
    /// `false` on a standby (or when the write failed): look again later.
    async fn write_status(&self, plugin: &PluginObject, key: &ObjectKey, status: serde_json::Value) -> bool {
        if !self.leadership.is_leader() {
            return false;
        }
        let mut current = plugin.status.clone();
        if let Some(map) = current.as_object_mut() {
            map.retain(|_, v| !v.is_null());
        }
        let mut wanted = status.clone();
        if let Some(map) = wanted.as_object_mut() {
            map.retain(|_, v| !v.is_null());
        }
        if current == wanted {
            return true;
        }
        let before = ready_condition(&plugin.status);
        let now = ready_condition(&status).expect("a Ready condition");
        if before.as_ref().is_none_or(|b| b["status"] != now["status"] || b["reason"] != now["reason"] || b["message"] != now["message"]) {
            let reason = now["reason"].as_str().unwrap_or_default();
            self.events.publish(ObjectEvent {
                regarding: plugin_kind(),
                key: key.clone(),
                uid: plugin.metadata.uid.clone(),
                warning: Ready::warns(now["status"] == "True", reason),
                reason: reason.into(),
                action: "Load".into(),
                note: now["message"].as_str().unwrap_or_default().into(),
            });
        }
        let object = serde_json::json!({
            "apiVersion": plugin_kind().api_version(),
            "kind": "Plugin",
            "metadata": {"name": plugin.metadata.name, "namespace": self.namespace},
            "status": wanted,
        });
        let request = WriteRequest {
            resource: plugin_kind(),
            namespace: Some(self.namespace.clone()),
            name: plugin.metadata.name.clone(),
            op: WriteOp::Apply { object, force: true, status: true },
        };
        match self.api.write(request).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(plugin = %plugin.metadata.name, "cannot write the Plugin's status: {e}");
                false
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PromoteError {
    #[error("cannot read Plugin {0}: {1}")]
    Read(String, #[source] kube::Error),
    #[error("Plugin {0} has no spec.candidate to promote")]
    NoCandidate(String),
    #[error("cannot update Plugin {0}: {1}")]
    Update(String, #[source] kube::Error),
}

/// Promotes a Plugin's candidate, as its owner (`kubewasm rollout promote NAME --resource NS`):
/// `module` becomes the candidate, which goes; conditional on the Plugin not having changed
/// since it was read. Returns the module that runs now.
pub async fn promote(client: &kube::Client, namespace: &str, name: &str) -> Result<String, PromoteError> {
    use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
    let resource = ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("kubewasm.io", "v1alpha1", "Plugin"));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let full = format!("{namespace}/{name}");
    let plugin = api.get(name).await.map_err(|e| PromoteError::Read(full.clone(), e))?;
    let candidate = plugin.data["spec"]["candidate"].as_str().map(String::from).ok_or_else(|| PromoteError::NoCandidate(full.clone()))?;
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": plugin.metadata.resource_version},
        "spec": {"module": candidate, "candidate": null},
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|e| PromoteError::Update(full, e))?;
    Ok(candidate)
}

enum Next {
    Done,
    After(Duration),
    Backoff,
}

/// The Plugin's `Ready` condition as the host sees it.
struct Ready {
    ready: bool,
    reason: &'static str,
    message: String,
}

/// The reason while the module is pulled and admitted but its caches have not synced yet.
const SYNCING: &str = "Syncing";

impl Ready {
    /// `rolled_back`: the digest of the module swapped back out, if the running version is the
    /// one before it.
    fn of(name: &str, outcome: &Result<(), Failure>, state: &PluginState, rolled_back: Option<&str>) -> Ready {
        let (ready, reason, message) = match (outcome, state, rolled_back) {
            // The registry is down and the last module pulled was handed over: it is syncing, and
            // the status says so until it runs (then it says unreachable, with what runs).
            (Err(f), PluginState::Starting, _) if matches!(f.reason, FailReason::Pull("RegistryUnreachable" | "PullTimeout")) => {
                (false, SYNCING, format!("{}; waiting for its caches to sync", f.message))
            }
            (Err(f), _, _) => (false, f.reason.as_str(), f.message.clone()),
            (Ok(()), PluginState::Running { version, digest }, Some(module)) => (
                false,
                "RolledBack",
                format!(
                    "the module (sha256:{module}) failed on clearly more objects than the version before and was rolled back: {version} ({digest}) runs; it is not loaded again until the module or its settings change"
                ),
            ),
            (Ok(()), PluginState::Running { version, digest }, None) => (true, "Running", format!("{name} {version} ({digest}) runs")),
            (Ok(()), PluginState::Starting, _) => (false, SYNCING, "pulled and admitted; waiting for its caches to sync".into()),
            (Ok(()), PluginState::Stopped { error }, _) => (false, "SyncFailed", error.clone().unwrap_or_else(|| "not running".into())),
        };
        Ready { ready, reason, message }
    }

    /// Whether a change to this condition is recorded as a Warning Event rather than a Normal
    /// one: every load passes through Syncing, and a Plugin disabled by `--controllers` or
    /// superseded mid-pull is what its operator asked for, so only failures warn (a user
    /// watching `kubectl get events --field-selector type=Warning` sees only those).
    fn warns(ready: bool, reason: &str) -> bool {
        !ready && ![SYNCING, FailReason::Disabled.as_str(), FailReason::Cancelled.as_str()].contains(&reason)
    }
}

fn ready_condition(status: &serde_json::Value) -> Option<serde_json::Value> {
    status["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready").cloned()
}

/// `spec.settings` as `NAME.toml` holds them.
fn settings_toml(settings: Option<&serde_json::Map<String, serde_json::Value>>) -> Result<String, Failure> {
    let Some(settings) = settings else { return Ok(String::new()) };
    toml::to_string(settings).map_err(|e| Failure {
        reason: FailReason::InvalidSettings,
        message: format!("spec.settings cannot be written as TOML (no nulls; tables inside arrays must be alike): {e}"),
        retry: false,
    })
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_become_toml() {
        let settings: serde_json::Map<String, serde_json::Value> = serde_json::from_str(r#"{"replicas": 2, "kubewasm": {"max-concurrency": 3}}"#).unwrap();
        let toml = settings_toml(Some(&settings)).unwrap();
        let back: toml::Table = toml.parse().unwrap();
        assert_eq!(back["replicas"].as_integer(), Some(2));
        assert_eq!(back["kubewasm"]["max-concurrency"].as_integer(), Some(3));
        let null: serde_json::Map<String, serde_json::Value> = serde_json::from_str(r#"{"a": null}"#).unwrap();
        assert_eq!(settings_toml(Some(&null)).unwrap_err().reason, FailReason::InvalidSettings);
        assert_eq!(settings_toml(None).unwrap(), "");
    }

    /// The Event recorded for each state a Plugin's `Ready` condition can change to.
    #[test]
    fn only_failures_are_warning_events() {
        let running = PluginState::Running { version: "1.0.0".into(), digest: "sha256:ab".into() };
        let failed = |reason| Err::<(), _>(Failure { reason, message: "m".into(), retry: false });
        let cases = [
            (Ok(()), PluginState::Starting, None, "Syncing", false),
            (Ok(()), running.clone(), None, "Running", false),
            (failed(FailReason::Disabled), PluginState::Stopped { error: None }, None, "Disabled", false),
            (failed(FailReason::Cancelled), PluginState::Starting, None, "Cancelled", false),
            (Ok(()), running.clone(), Some("cd"), "RolledBack", true),
            (Ok(()), PluginState::Stopped { error: Some("caches did not sync".into()) }, None, "SyncFailed", true),
            (failed(FailReason::Pull("PullTimeout")), PluginState::Stopped { error: None }, None, "PullTimeout", true),
            (failed(FailReason::Pull("RegistryUnreachable")), PluginState::Starting, None, "Syncing", false),
            (failed(FailReason::Pull("RegistryUnreachable")), running.clone(), None, "RegistryUnreachable", true),
            (failed(FailReason::InvalidSpec), PluginState::Stopped { error: None }, None, "InvalidSpec", true),
        ];
        for (outcome, state, rolled_back, reason, warning) in cases {
            let ready = Ready::of("p", &outcome, &state, rolled_back);
            assert_eq!(ready.reason, reason);
            assert_eq!(Ready::warns(ready.ready, ready.reason), warning, "{reason}");
        }
    }
}
