//! Runs plugin calls safely: the wasmtime engine (component model, async), the one `bindgen!`,
//! per-instance limits (a deadline per call in the call's own time, with a wall-clock backstop,
//! and each plugin's share of the executor: [`cpu`]; a memory cap), the WASI sandbox, and a
//! small pool of reused instances per plugin version (dropped when idle), each instance holding
//! its memory limit in [`crate::budget`]'s host-wide budget while it exists.
//!
//! A declarative plugin (one whose `composite.describe-composition` answers a composition) is
//! reconciled by the host from its answers ([`composite`]): its `reconcile` and `finalize` are
//! the host's, calling the guest's `sync` or `finalize` and making the writes. Callers see the
//! same runner either way.
//!
//! The runtime runs one call at a time per instance and does not schedule: the controller
//! decides what to call and when. It knows manifests (to check capabilities) but not queues or
//! watches: what a call may reach outside the sandbox comes in as [`host::Services`], whose
//! adapters (`host/`) translate the WIT imports to the cache views, the API client and the Event
//! recorder below it.

mod admission;
pub mod bindings;
pub mod boundary;
mod call;
mod composite;
mod cpu;
mod describe;
pub mod host;
mod instance;
pub mod journal;
mod sandbox;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Engine, Trap};

use self::bindings::reconciler_exports::Request as WitRequest;
use self::bindings::types::{Action as WitAction, ObjectKey as WitKey};
use self::bindings::{
    PACKAGE, PACKAGE_VERSION, access_exports, clusters_exports, composite_exports, plugin_exports, projections_exports, reconciler_exports, release_exports,
    views_exports, webhooks_exports,
};
use self::boundary::{Export, MAX_ERROR_MESSAGE, MAX_MAPPED_KEYS, MAX_NAME, MAX_NAMESPACE, Transfer};
use self::cpu::{CallClock, CpuShare, DeadlineExceeded, Shares, Stalled};
use self::host::{HostContext, LogBudget, Services};
use self::instance::{Exports, Instance, InstanceState};
use crate::budget::{Account, MemoryBudget, Reservation};
use crate::hooks::{Review, Verdict};
use crate::manifest::{LimitPolicy, Limits, Manifest, ManifestError};
use crate::metrics::PluginMetrics;
use crate::resource::{Gvk, ObjectKey};

pub use self::bindings::types::ErrorCode as GuestErrorCode;
pub use self::call::{Action, CallError, Fault, Request, code_name};
pub use self::composite::Answer;

/// How often the engine's epoch advances: the granularity of deadlines and of yielding.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The rule of calls that may read the cache and nothing else.
const MAPPING: &str = "map-related may read the cache and nothing else";
/// The rule of hook calls.
const HOOKING: &str = "webhook calls may read the cache and nothing else";
const COMPOSING: &str =
    "a declarative plugin's customize, sync and finalize may read the cache and nothing else (the host makes every write from their answers)";

/// Mapped keys converted and checked between two yields to the executor (a few hundred
/// microseconds of work).
const KEYS_PER_SLICE: usize = 1024;

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Stop calls at their deadline (epoch interruption). Off only for measuring its cost.
    pub deadlines: bool,
    /// An instance is replaced after this many calls, bounding what a leaking guest can hold.
    pub max_calls_per_instance: u64,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig { deadlines: true, max_calls_per_instance: 10_000 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot configure the WebAssembly engine: {0}")]
    Engine(String),
    #[error("not a valid component: {0}")]
    Compile(String),
    #[error("cannot store the compiled component: {0}")]
    Serialize(String),
    #[error("cannot load the compiled component: {0}")]
    Deserialize(String),
    #[error("{0}")]
    World(String),
    #[error("imports something this host does not provide: {0}")]
    Link(String),
}

/// Why `describe` did not produce a usable manifest.
#[derive(Debug, thiserror::Error)]
pub enum DescribeError {
    #[error("describe failed: {0}")]
    Call(#[from] Fault),
    #[error("describe refused the settings: {0}")]
    Refused(String),
    #[error("invalid manifest: {0}")]
    Manifest(#[from] ManifestError),
}

/// The engine and linker shared by every plugin, and the thread that advances epochs.
pub struct Runtime {
    engine: Engine,
    linker: Linker<InstanceState>,
    config: RuntimeConfig,
    ticker: Option<EpochTicker>,
    /// Each plugin's share of the executor, which all its runners take turns in.
    shares: Shares,
}

/// A component whose world and imports have been checked, ready to instantiate. Clones share
/// the compiled code.
#[derive(Clone)]
pub struct Prepared(Arc<PreparedParts>);

struct PreparedParts {
    pre: InstancePre<InstanceState>,
    indices: ExportIndices,
}

/// A [`Prepared`] that does not keep its code alive: for finding it again while someone holds it.
#[derive(Clone)]
pub struct WeakPrepared(std::sync::Weak<PreparedParts>);

impl WeakPrepared {
    pub fn upgrade(&self) -> Option<Prepared> {
        self.0.upgrade().map(Prepared)
    }
}

/// Where each exported interface's functions are, looked up once per component.
struct ExportIndices {
    plugin: plugin_exports::GuestIndices,
    reconciler: Option<reconciler_exports::GuestIndices>,
    composite: Option<composite_exports::GuestIndices>,
    access: Option<access_exports::GuestIndices>,
    release: Option<release_exports::GuestIndices>,
    views: Option<views_exports::GuestIndices>,
    clusters: Option<clusters_exports::GuestIndices>,
    projections: Option<projections_exports::GuestIndices>,
    webhooks: Option<webhooks_exports::GuestIndices>,
}

impl Prepared {
    /// Whether the plugin exports `release` (built for contract 0.1.1 or later).
    pub fn releases(&self) -> bool {
        self.0.indices.release.is_some()
    }

    pub fn downgrade(&self) -> WeakPrepared {
        WeakPrepared(Arc::downgrade(&self.0))
    }
}

/// What `describe` returned, validated.
#[derive(Debug, Clone)]
pub struct Described {
    pub manifest: Manifest,
    pub limits: Limits,
}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model(true)
            .epoch_interruption(config.deadlines)
            .cranelift_opt_level(wasmtime::OptLevel::Speed)
            // Deep recursion traps at 1 MiB of wasm stack, well inside the 2 MiB fiber stack.
            .max_wasm_stack(1 << 20)
            // Each linear memory reserves 4 GiB of address space plus a 32 MiB guard, so that no
            // access of a 32-bit memory needs a bounds check and no memory ever moves. What that
            // costs is bounded: an instance holds at most 4 memories (`instance::MemoryCap`),
            // and the memory budget holds at most one instance per MiB it has, so even a 4 GiB
            // budget spent on 1 MiB instances of 4 memories each reserves 64 TiB of the 128 TiB
            // a process may address.
            .memory_reservation(4 << 30)
            .memory_guard_size(32 << 20);
        let engine = Engine::new(&wasm).map_err(|e| RuntimeError::Engine(chain(&e)))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| RuntimeError::Engine(chain(&e)))?;
        host::add_to_linker(&mut linker).map_err(|e| RuntimeError::Engine(chain(&e)))?;
        let ticker = config.deadlines.then(|| EpochTicker::start(engine.clone()));
        Ok(Runtime { engine, linker, config, ticker, shares: Shares::default() })
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Compiles a component. CPU-heavy (seconds for Python or JS guests): run it off the async
    /// executor, and prefer the artifact cache.
    pub fn compile(&self, wasm: &[u8]) -> Result<Component, RuntimeError> {
        Component::new(&self.engine, wasm).map_err(|e| RuntimeError::Compile(chain(&e)))
    }

    pub fn serialize(&self, component: &Component) -> Result<Vec<u8>, RuntimeError> {
        component.serialize().map_err(|e| RuntimeError::Serialize(chain(&e)))
    }

    /// Loads a compiled artifact by mapping its file.
    ///
    /// # Safety
    /// The file must hold what [`Runtime::serialize`] wrote under the same
    /// [`Runtime::artifact_tag`], unmodified (the artifact cache verifies a checksum first), and
    /// must not change while the component lives (replace it by renaming another file over it).
    pub unsafe fn deserialize_file(&self, path: &std::path::Path) -> Result<Component, RuntimeError> {
        // SAFETY: forwarded to the caller.
        unsafe { Component::deserialize_file(&self.engine, path) }.map_err(|e| RuntimeError::Deserialize(chain(&e)))
    }

    /// Identifies the engine configuration: artifacts compiled under another tag are unusable.
    pub fn artifact_tag(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut hasher);
        self.config.deadlines.hash(&mut hasher);
        format!("{:016x}", hasher.finish())
    }

    /// Checks that the component is a controller plugin (of either world) of a compatible
    /// contract version and that every import is something this host provides.
    pub fn prepare(&self, component: &Component) -> Result<Prepared, RuntimeError> {
        check_world(&self.engine, component)?;
        let pre = self.linker.instantiate_pre(component).map_err(|e| RuntimeError::Link(chain(&e)))?;
        let world = |e: wasmtime::Error| RuntimeError::World(chain(&e));
        // Interfaces added after 0.1.0 are optional: present, they must be complete.
        let exported = |interface: &str| component.get_export_index(None, format!("{PACKAGE}/{interface}@{PACKAGE_VERSION}")).is_some();
        let indices = ExportIndices {
            plugin: plugin_exports::GuestIndices::new(&pre).map_err(world)?,
            reconciler: exported("reconciler").then(|| reconciler_exports::GuestIndices::new(&pre)).transpose().map_err(world)?,
            composite: exported("composite").then(|| composite_exports::GuestIndices::new(&pre)).transpose().map_err(world)?,
            access: exported("access").then(|| access_exports::GuestIndices::new(&pre)).transpose().map_err(world)?,
            release: exported("release").then(|| release_exports::GuestIndices::new(&pre)).transpose().map_err(world)?,
            views: exported("views").then(|| views_exports::GuestIndices::new(&pre)).transpose().map_err(world)?,
            clusters: exported("clusters").then(|| clusters_exports::GuestIndices::new(&pre)).transpose().map_err(world)?,
            projections: exported("projections").then(|| projections_exports::GuestIndices::new(&pre)).transpose().map_err(world)?,
            webhooks: exported("webhooks").then(|| webhooks_exports::GuestIndices::new(&pre)).transpose().map_err(world)?,
        };
        Ok(Prepared(Arc::new(PreparedParts { pre, indices })))
    }

    /// Instantiates the plugin with no grants and under `limits` (the manifest, which may ask for
    /// others, is not known yet), asks it to describe itself and validates the answer.
    pub async fn describe(
        &self,
        prepared: &Prepared,
        file_name: &str,
        settings: &str,
        policy: &LimitPolicy,
        limits: Limits,
    ) -> Result<Described, DescribeError> {
        let metrics = PluginMetrics::default();
        let host = Arc::new(HostContext {
            plugin: file_name.into(),
            manifest: None,
            services: Services::unreachable(),
            logs: Arc::new(LogBudget::new(metrics.log_dropped.clone())),
            metrics,
            cache_only: None,
        });
        let runner = PluginRunner::new(self, prepared.clone(), host, limits, settings.into());
        let (mut instance, manifest) = runner.instantiate().await?;
        let manifest = manifest.map_err(|message| match boundary::too_long("its message", message.len(), MAX_ERROR_MESSAGE) {
            Some(problem) => DescribeError::Refused(format!("{}… ({problem})", host::log::clip(&message, 1024))),
            None => DescribeError::Refused(message),
        })?;
        let Instance { store, exports, .. } = &mut instance;
        let rules = match &exports.access {
            Some(access) => runner.declared(store, Export::Rules, async |store| access.call_rules(store).await).await?,
            None => Vec::new(),
        };
        let metadata_only = match &exports.views {
            Some(views) => runner.declared(store, Export::MetadataOnly, async |store| views.call_metadata_only(store).await).await?,
            None => Vec::new(),
        };
        let projections = match &exports.projections {
            Some(projections) => runner.declared(store, Export::Projections, async |store| projections.call_fields(store).await).await?,
            None => Vec::new(),
        };
        let scope = match &exports.clusters {
            Some(clusters) => Some(runner.declared(store, Export::Scope, async |store| clusters.call_scope(store).await).await?),
            None => None,
        };
        let composition = match &exports.composite {
            Some(composite) => runner.declared(store, Export::Composition, async |store| composite.call_describe_composition(store).await).await?,
            None => None,
        };
        if composition.is_none() && exports.reconciler.is_none() {
            return Err(DescribeError::Refused(
                "it exports no reconciler, so describe-composition must answer a composition (a declarative-world plugin is declarative)".into(),
            ));
        }
        let hooks = match &exports.webhooks {
            Some(webhooks) => Some(runner.declared(store, Export::Hooks, async |store| webhooks.call_declare(store).await).await?),
            None => None,
        };
        let manifest = describe::manifest(describe::Declared { manifest, rules, metadata_only, projections, composition, scope, hooks })?;
        let limits = manifest.validate(policy)?;
        Ok(Described { manifest, limits })
    }

    /// A runner for a described plugin, whose calls are checked against its manifest.
    pub fn runner(&self, prepared: Prepared, described: &Described, services: Services, metrics: PluginMetrics, settings: &str) -> PluginRunner {
        let host = Arc::new(HostContext {
            plugin: described.manifest.name.as_str().into(),
            manifest: Some(Arc::new(described.manifest.clone())),
            services,
            logs: Arc::new(LogBudget::new(metrics.log_dropped.clone())),
            metrics,
            cache_only: None,
        });
        PluginRunner::new(self, prepared, host, described.limits, settings.into())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.stop();
        }
    }
}

/// Calls into one plugin version: keeps its idle instances, applies its limits.
pub struct PluginRunner {
    engine: Engine,
    prepared: Prepared,
    host: Arc<HostContext>,
    /// `host` for the calls that may read the cache only: `map-related`, or a declarative
    /// plugin's.
    reading_host: Arc<HostContext>,
    /// `host` for hook calls: the cache only.
    hook_host: Arc<HostContext>,
    /// What a declarative plugin's parents asked `customize` for.
    related: composite::Related,
    limits: Limits,
    settings: Arc<str>,
    max_calls_per_instance: u64,
    pool: Mutex<Pool>,
    /// Where instances past the first reserve their memory: the plugin's account in the budget;
    /// `None`: no budget (one-shot commands).
    budget: Option<Account>,
    /// An instance came back or went: room for a call waiting for one.
    returned: tokio::sync::Notify,
    /// How many of its plugin's calls may run at once, in all its runners ([`cpu`]).
    share: CpuShare,
}

/// A version's instances not in a call, and whether its first instance's room (reserved by the
/// version when it was admitted) is in use.
#[derive(Default)]
struct Pool {
    idle: Vec<Pooled>,
    first_taken: bool,
}

/// An instance with the budget it holds.
struct Pooled {
    instance: Instance,
    room: Room,
}

/// What an instance's memory limit is held in.
enum Room {
    /// What the version reserved when it was admitted (one instance's worth).
    First,
    /// Its own reservation, given back when the instance goes.
    Reserved { _held: Reservation },
    /// No budget.
    Unbudgeted,
}

enum Call {
    Reconcile(Request),
    Finalize(Request),
    Released(Request),
    MapRelated(Gvk, Arc<str>),
    /// A declarative plugin's `customize` of the parent at a key.
    Customize(ObjectKey, Arc<str>),
    /// A declarative plugin's `sync` of the parent at a key, or its `finalize` when finalizing.
    Sync(ObjectKey, composite_exports::SyncRequest),
    /// A validating (or, when `mutating`, mutating) hook's answer to a review, within a deadline.
    Admit {
        request: Box<webhooks_exports::AdmissionRequest>,
        mutating: bool,
        deadline: Duration,
    },
    /// Objects to a desired `apiVersion`, within a deadline.
    Convert {
        objects: Vec<String>,
        desired: String,
        deadline: Duration,
    },
}

impl Call {
    /// Whether the call may read the cache and nothing else.
    fn reads_only(&self) -> bool {
        matches!(self, Call::MapRelated(..) | Call::Customize(..) | Call::Sync(..))
    }

    fn hooks(&self) -> bool {
        matches!(self, Call::Admit { .. } | Call::Convert { .. })
    }

    fn export(&self) -> Export {
        match self {
            Call::Reconcile(_) | Call::Finalize(_) | Call::Released(_) => Export::Call,
            Call::MapRelated(..) => Export::MapRelated,
            Call::Customize(..) => Export::Customize,
            Call::Sync(..) => Export::Sync,
            Call::Admit { mutating: false, .. } => Export::Validate,
            Call::Admit { mutating: true, .. } => Export::Mutate,
            Call::Convert { .. } => Export::Convert,
        }
    }

    /// Its deadline of the plugin's own time: a hook's, at most the plugin's.
    fn deadline(&self, limits: &Limits) -> Duration {
        match self {
            Call::Admit { deadline, .. } | Call::Convert { deadline, .. } => (*deadline).min(limits.deadline),
            _ => limits.deadline,
        }
    }
}

enum Output {
    Action(Result<WitAction, bindings::types::Error>),
    Keys(Vec<WitKey>),
    Related(Result<Vec<composite_exports::RelatedRule>, bindings::types::Error>),
    Desired(Result<composite_exports::SyncResponse, bindings::types::Error>),
    Verdict(Verdict),
    Converted(Result<Vec<String>, String>),
}

impl PluginRunner {
    fn new(runtime: &Runtime, prepared: Prepared, host: Arc<HostContext>, limits: Limits, settings: Arc<str>) -> Self {
        let cache_only = |rule| {
            Arc::new(HostContext {
                plugin: host.plugin.clone(),
                manifest: host.manifest.clone(),
                services: host.services.clone(),
                metrics: host.metrics.clone(),
                logs: host.logs.clone(),
                cache_only: Some(rule),
            })
        };
        let reading_host = cache_only(if host.manifest.as_ref().is_some_and(|m| m.composition.is_some()) { COMPOSING } else { MAPPING });
        let hook_host = cache_only(HOOKING);
        let share = runtime.shares.of(&host.plugin);
        PluginRunner {
            engine: runtime.engine.clone(),
            prepared,
            reading_host,
            hook_host,
            related: composite::Related::default(),
            host,
            limits,
            settings,
            max_calls_per_instance: runtime.config.max_calls_per_instance,
            pool: Mutex::default(),
            budget: None,
            returned: tokio::sync::Notify::new(),
            share,
        }
    }

    /// Instances past the first reserve their memory limit in the plugin's account in `budget`
    /// as they are made, and a call that finds it (or the plugin's share of it) full waits for
    /// one of this version's instances instead; the first runs in what was reserved for it when
    /// the version was admitted (or its member controller started).
    pub fn with_budget(mut self, budget: &MemoryBudget) -> Self {
        self.budget = Some(budget.account(&self.host.plugin));
        self
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn manifest(&self) -> Option<&Manifest> {
        self.host.manifest.as_deref()
    }

    /// What calls reach unless given other services.
    pub fn services(&self) -> &Services {
        &self.host.services
    }

    /// Whether the plugin is declarative: the host reconciles it from its answers.
    pub fn declarative(&self) -> bool {
        self.host.manifest.as_ref().is_some_and(|m| m.composition.is_some())
    }

    pub async fn reconcile(&self, request: Request) -> Result<Action, CallError> {
        self.reconcile_or_finalize(request, None, false).await
    }

    /// Reconciles with `services` instead of the plugin's for this call alone: what a journal
    /// records, or a shadow run replays.
    pub async fn reconcile_with(&self, request: Request, services: Services) -> Result<Action, CallError> {
        self.reconcile_or_finalize(request, Some(services), false).await
    }

    pub async fn finalize(&self, request: Request) -> Result<Action, CallError> {
        self.reconcile_or_finalize(request, None, true).await
    }

    /// What a declarative plugin answers for `request`'s parent (`sync`, or `finalize` when
    /// `finalizing`), without anything being managed: what `kubewasm test` compares. Claiming
    /// the children may write (adopting, releasing) to the plugin's services.
    pub async fn answer(&self, request: &Request, finalizing: bool) -> Result<Answer, CallError> {
        composite::answer(self, request, &self.host.services, finalizing).await
    }

    async fn reconcile_or_finalize(&self, request: Request, services: Option<Services>, finalizing: bool) -> Result<Action, CallError> {
        if self.declarative() {
            let services = services.unwrap_or_else(|| self.host.services.clone());
            return composite::reconcile(self, request, &services, finalizing).await;
        }
        let call = if finalizing { Call::Finalize(request) } else { Call::Reconcile(request) };
        self.action(self.invoke(call, services).await?)
    }

    /// Lets the plugin go of a primary that stopped matching its selector; `None` when the
    /// plugin has no `release` export (built for 0.1.0) or is declarative.
    /// A declarative plugin is not told: the host lets its parent go as it is (its children
    /// stay, and go with it).
    pub async fn released(&self, request: Request) -> Result<Option<Action>, CallError> {
        if !self.prepared.releases() || self.declarative() {
            return Ok(None);
        }
        self.action(self.invoke(Call::Released(request), None).await?).map(Some)
    }

    /// Drops the instances that have had nothing to do for `idle` (their memory goes back to the
    /// budget); returns how many.
    pub fn drop_idle_instances(&self, idle: Duration) -> usize {
        let gone: Vec<Pooled> = {
            let mut pool = self.pool.lock();
            let (keep, gone) = std::mem::take(&mut pool.idle).into_iter().partition(|p| p.instance.idle_since.elapsed() < idle);
            pool.idle = keep;
            gone
        };
        let dropped = gone.len();
        for pooled in gone {
            self.discard(pooled.room);
        }
        dropped
    }

    /// Keys of primary objects related to a watched object, for a `map-related` watch: those
    /// of the keys the plugin returned that `keep` accepts.
    ///
    /// They are converted and checked a slice at a time, yielding to the executor in between:
    /// a plugin may return up to [`boundary::MAX_MAPPED_KEYS`] of them per call, and doing that
    /// in one go would hold an executor worker for tens of milliseconds, outside the plugin's
    /// CPU share, while every other plugin's calls wait for it.
    /// An object of a kind the plugin reads metadata-only or projected is handed as such.
    ///
    /// For a declarative plugin, the host maps: the parents whose `customize` rules select the
    /// object.
    pub async fn map_related(&self, resource: &Gvk, object: Arc<str>, keep: impl Fn(&ObjectKey) -> bool) -> Result<Vec<ObjectKey>, CallError> {
        if self.declarative() {
            return Ok(self.related.parents_selecting(resource, &object, keep));
        }
        let object = self.host.as_read(resource, object);
        let Output::Keys(returned) = self.invoke(Call::MapRelated(resource.clone(), object), None).await? else { unreachable!("map-related returns keys") };
        let mut kept = Vec::new();
        let mut returned = returned.into_iter().peekable();
        while returned.peek().is_some() {
            kept.extend(returned.by_ref().take(KEYS_PER_SLICE).map(|k| ObjectKey::new(k.namespace.as_deref(), &k.name)).filter(|key| keep(key)));
            if returned.peek().is_some() {
                tokio::task::yield_now().await;
            }
        }
        Ok(kept)
    }

    /// What the plugin's validating (or, when `mutating`, mutating) hook answers for `review`,
    /// within `deadline` of its own time (at most the plugin's deadline). An answer out of its
    /// bounds is an `oversized` fault.
    pub async fn admit(&self, review: &Review, mutating: bool, deadline: Duration) -> Result<Verdict, CallError> {
        let request = Box::new(admission::request(review));
        match self.invoke(Call::Admit { request, mutating, deadline }, None).await? {
            Output::Verdict(verdict) => Ok(verdict),
            _ => unreachable!("admit returns a verdict"),
        }
    }

    /// The plugin's conversion of `objects` to `desired` (`group/version`), within `deadline` of
    /// its own time: the converted objects, or why they cannot be.
    pub async fn convert(&self, objects: Vec<String>, desired: String, deadline: Duration) -> Result<Result<Vec<String>, String>, CallError> {
        match self.invoke(Call::Convert { objects, desired, deadline }, None).await? {
            Output::Converted(converted) => Ok(converted),
            _ => unreachable!("convert returns objects"),
        }
    }

    /// Whether the plugin exports `webhooks` (built for contract 0.1.6 or later).
    pub fn serves_hooks(&self) -> bool {
        self.prepared.0.indices.webhooks.is_some()
    }

    /// A request as the plugin is handed it: its primary projected if the plugin said so.
    fn wit_request(&self, r: Request) -> WitRequest {
        let object = match self.host.manifest.as_deref() {
            Some(manifest) => self.host.as_answered(&manifest.primary, &r.object),
            None => r.object.to_string(),
        };
        WitRequest { key: WitKey { namespace: r.key.namespace().map(str::to_owned), name: r.key.name().to_owned() }, object, retries: r.retries }
    }

    fn action(&self, output: Output) -> Result<Action, CallError> {
        match output {
            Output::Action(Ok(WitAction::Done)) => Ok(Action::Done),
            Output::Action(Ok(WitAction::RequeueAfter(ms))) => Ok(Action::RequeueAfter(Duration::from_millis(ms))),
            Output::Action(Err(e)) => Err(CallError::Plugin { code: e.code, message: e.message }),
            _ => unreachable!("reconcile and finalize return actions"),
        }
    }

    /// Runs one call in an idle instance (or a new one), enforcing the deadline. An instance
    /// that faulted is dropped; one that succeeded goes back to the pool until it has served
    /// `max_calls_per_instance` calls.
    async fn invoke(&self, call: Call, services: Option<Services>) -> Result<Output, CallError> {
        let Pooled { mut instance, room } = self.checkout().await?;
        let state = instance.store.data_mut();
        state.clock.reset(call.deadline(&self.limits));
        state.key = match &call {
            Call::Reconcile(r) | Call::Finalize(r) | Call::Released(r) => Some(r.key.clone()),
            Call::Customize(key, _) | Call::Sync(key, _) => Some(key.clone()),
            Call::MapRelated(..) | Call::Admit { .. } | Call::Convert { .. } => None,
        };
        state.set_services(services);
        state.call_host = match &call {
            call if call.hooks() => Some(self.hook_host.clone()),
            call if call.reads_only() => Some(self.reading_host.clone()),
            _ => None,
        };
        // A caller may stop waiting (a webhook past its answer's deadline): the instance, in the
        // middle of a call, goes, and its room goes back with it.
        let mut room = InCall { runner: self, room: Some(room) };
        let result = self.run(&mut instance, call).await;
        let room = room.room.take().expect("taken once");
        match result {
            Ok(output) => {
                instance.store.data_mut().set_services(None);
                instance.calls += 1;
                instance.idle_since = Instant::now();
                if instance.calls < self.max_calls_per_instance {
                    self.pool.lock().idle.push(Pooled { instance, room });
                    self.returned.notify_one();
                } else {
                    self.discard(room);
                }
                Ok(output)
            }
            Err(fault) => {
                self.discard(room);
                fault.count(&self.host.metrics.faults);
                tracing::warn!(plugin = %self.host.plugin, memory_bytes = instance.memory_bytes(), "plugin fault: {fault}");
                Err(fault.into())
            }
        }
    }

    async fn run(&self, instance: &mut Instance, call: Call) -> Result<Output, Fault> {
        let clock = instance.store.data().clock.clone();
        let deadline = call.deadline(&self.limits);
        Transfer::expect(&mut instance.store, call.export());
        let Instance { store, exports, .. } = instance;
        let call = async {
            Ok(match (call, &exports.reconciler, &exports.composite) {
                (Call::Reconcile(r), Some(reconciler), _) => Output::Action(reconciler.call_reconcile(&mut *store, &self.wit_request(r)).await?),
                (Call::Finalize(r), Some(reconciler), _) => Output::Action(reconciler.call_finalize(&mut *store, &self.wit_request(r)).await?),
                (Call::Released(r), ..) => {
                    let release = exports.release.as_ref().expect("released() checks the export");
                    Output::Action(release.call_released(&mut *store, &self.wit_request(r)).await?)
                }
                (Call::MapRelated(gvk, object), Some(reconciler), _) => {
                    Output::Keys(reconciler.call_map_related(&mut *store, &(&gvk).into(), &object.to_string()).await?)
                }
                (Call::Customize(_, parent), _, Some(composite)) => Output::Related(composite.call_customize(&mut *store, &parent.to_string()).await?),
                (Call::Sync(_, request), _, Some(composite)) if request.finalizing => Output::Desired(composite.call_finalize(&mut *store, &request).await?),
                (Call::Sync(_, request), _, Some(composite)) => Output::Desired(composite.call_sync(&mut *store, &request).await?),
                (Call::Admit { request, mutating, .. }, ..) => {
                    let hooks = exports.webhooks.as_ref().expect("the webhook server calls plugins that declared hooks");
                    Output::Verdict(if mutating {
                        admission::mutated(hooks.call_mutate(&mut *store, &request).await?)?
                    } else {
                        admission::validated(hooks.call_validate(&mut *store, &request).await?)?
                    })
                }
                (Call::Convert { objects, desired, .. }, ..) => {
                    let hooks = exports.webhooks.as_ref().expect("the webhook server calls plugins that declared hooks");
                    Output::Converted(admission::converted(hooks.call_convert(&mut *store, &objects, &desired).await?)?)
                }
                _ => unreachable!("the runner calls a plugin through the exports its description chose"),
            })
        };
        let output = self.bounded_by(call, clock, deadline).await.map_err(|e| self.classify_call(e, &instance.store, deadline))?;
        check_size(&output)?;
        Ok(output)
    }

    /// Runs a call within the plugin's share of the executor, under the deadline on `clock`:
    /// the epoch callback stops a guest that computes past it, a timer one that waits past it on
    /// its own account (a WASI sleep), and the wall-clock backstop one that waits on the API.
    /// What an export called right after `describe` (`access.rules`, `views.metadata-only`)
    /// declares, within the rest of the deadline instantiating left.
    async fn declared<T>(
        &self,
        store: &mut wasmtime::Store<InstanceState>,
        export: Export,
        call: impl AsyncFnOnce(&mut wasmtime::Store<InstanceState>) -> wasmtime::Result<T>,
    ) -> Result<T, DescribeError> {
        Transfer::expect(&mut *store, export);
        let clock = store.data().clock.clone();
        let declared = self.bounded(call(store), clock).await;
        declared.map_err(|e| DescribeError::Call(self.classify(e, store)))
    }

    async fn bounded<T>(&self, call: impl Future<Output = wasmtime::Result<T>>, clock: Arc<CallClock>) -> wasmtime::Result<T> {
        self.bounded_by(call, clock, self.limits.deadline).await
    }

    async fn bounded_by<T>(&self, call: impl Future<Output = wasmtime::Result<T>>, clock: Arc<CallClock>, deadline: Duration) -> wasmtime::Result<T> {
        cpu::metered(call, clock, self.share.clone(), cpu::backstop(deadline)).await
    }

    fn classify(&self, error: wasmtime::Error, store: &wasmtime::Store<InstanceState>) -> Fault {
        self.classify_call(error, store, self.limits.deadline)
    }

    /// Names what stopped a call (with `deadline`) or an instantiation. A trap is reported by its
    /// code alone: the wasm backtrace goes to the debug log, not into one-line errors.
    fn classify_call(&self, error: wasmtime::Error, store: &wasmtime::Store<InstanceState>, deadline: Duration) -> Fault {
        tracing::debug!(plugin = %self.host.plugin, "call failed: {error:?}");
        if let Some(fault) = error.downcast_ref::<Fault>() {
            return fault.clone();
        }
        if error.downcast_ref::<DeadlineExceeded>().is_some() {
            return Fault::Deadline(deadline);
        }
        if error.downcast_ref::<Stalled>().is_some() {
            return Fault::Stalled(cpu::backstop(deadline));
        }
        if let Some(wanted) = store.data().memory.refused {
            return Fault::Memory { limit: self.limits.memory_bytes, wanted: wanted as u64 };
        }
        if boundary::fuel_exhausted(&error) {
            let transfer = store.data().transfer;
            return Fault::Oversized(format!(
                "more than {} may return ({} bytes), or than a host call may be passed ({} bytes), counting every string and list entry, aliases included",
                transfer.export.name(),
                transfer.export.fuel(),
                transfer.import
            ));
        }
        match error.downcast_ref::<Trap>() {
            Some(trap) => Fault::Trap(trap.to_string()),
            None => Fault::Instantiate(chain(&error)),
        }
    }

    /// An idle instance, or a new one where the budget has room for it; else waits until one of
    /// this version's instances comes back or goes (one is always in a call then: the first
    /// instance's room is the version's own).
    async fn checkout(&self) -> Result<Pooled, Fault> {
        loop {
            let returned = self.returned.notified();
            tokio::pin!(returned);
            returned.as_mut().enable();
            let room = {
                let mut pool = self.pool.lock();
                if let Some(pooled) = pool.idle.pop() {
                    return Ok(pooled);
                }
                if !pool.first_taken {
                    pool.first_taken = true;
                    Some(Room::First)
                } else {
                    match &self.budget {
                        None => Some(Room::Unbudgeted),
                        Some(account) => account.reserve_more(self.limits.memory_bytes).map(|held| Room::Reserved { _held: held }),
                    }
                }
            };
            match room {
                Some(room) => return self.instantiate_for_calls(room).await,
                None => {
                    self.host.metrics.budget_waits.inc();
                    returned.await;
                }
            }
        }
    }

    /// Lets an instance go (dropped with it, or already): its room goes back to the version or
    /// the budget, and a call waiting for an instance may make one.
    fn discard(&self, room: Room) {
        self.host.metrics.instances.dec();
        self.give_back(room);
    }

    fn give_back(&self, room: Room) {
        if let Room::First = room {
            self.pool.lock().first_taken = false;
        }
        drop(room);
        self.returned.notify_one();
    }

    /// A fresh instance for the pool in `room`: instantiated and told its settings through
    /// `describe`.
    async fn instantiate_for_calls(&self, room: Room) -> Result<Pooled, Fault> {
        let (instance, described) = match self.instantiate().await {
            Ok(made) => made,
            Err(fault) => {
                self.give_back(room);
                return Err(fault);
            }
        };
        match described {
            Ok(_) => Ok(Pooled { instance, room }),
            Err(message) => {
                drop(instance);
                self.discard(room);
                let fault = Fault::Instantiate(format!("describe refused the settings: {message}"));
                fault.count(&self.host.metrics.faults);
                Err(fault)
            }
        }
    }

    /// A new instance, instantiated and described within one deadline of its own time.
    ///
    /// A module's first instantiation makes its memory image, a memfd sealed read-only. The
    /// kernel refuses the seal (EBUSY) while something else briefly holds a reference to the fresh
    /// pages — seen once under full load in CI — and wasmtime makes the image again at the next
    /// instantiation: that refusal alone is tried again, on a fresh store, a few times.
    async fn instantiate(&self) -> Result<(Instance, Result<plugin_exports::Manifest, String>), Fault> {
        let mut attempt = 0;
        loop {
            match self.instantiate_once().await {
                Err(Fault::Instantiate(message)) if attempt < 3 && message.contains(SEAL_REFUSED) => {
                    attempt += 1;
                    tracing::debug!(plugin = %self.host.plugin, attempt, "instantiating again: {message}");
                    tokio::time::sleep(Duration::from_millis(10 << attempt)).await;
                }
                Err(fault) => {
                    fault.count(&self.host.metrics.faults);
                    return Err(fault);
                }
                Ok(instance) => return Ok(instance),
            }
        }
    }

    async fn instantiate_once(&self) -> Result<(Instance, Result<plugin_exports::Manifest, String>), Fault> {
        let mut store = Instance::new_store(&self.engine, self.host.clone(), self.limits.memory_bytes, self.limits.deadline);
        let clock = store.data().clock.clone();
        let indices = &self.prepared.0.indices;
        let started = async {
            let instance = self.prepared.0.pre.instantiate_async(&mut store).await?;
            let exports = Exports {
                plugin: indices.plugin.load(&mut store, &instance)?,
                reconciler: indices.reconciler.as_ref().map(|i| i.load(&mut store, &instance)).transpose()?,
                composite: indices.composite.as_ref().map(|i| i.load(&mut store, &instance)).transpose()?,
                access: indices.access.as_ref().map(|i| i.load(&mut store, &instance)).transpose()?,
                views: indices.views.as_ref().map(|i| i.load(&mut store, &instance)).transpose()?,
                clusters: indices.clusters.as_ref().map(|i| i.load(&mut store, &instance)).transpose()?,
                projections: indices.projections.as_ref().map(|i| i.load(&mut store, &instance)).transpose()?,
                release: indices.release.as_ref().map(|i| i.load(&mut store, &instance)).transpose()?,
                webhooks: indices.webhooks.as_ref().map(|i| i.load(&mut store, &instance)).transpose()?,
            };
            Transfer::expect(&mut store, Export::Describe);
            let described = exports.plugin.call_describe(&mut store, &self.settings).await?;
            Ok((exports, described))
        };
        match self.bounded(started, clock).await {
            Ok((exports, described)) => {
                self.host.metrics.instances.inc();
                Ok((Instance { store, exports, calls: 0, idle_since: Instant::now() }, described))
            }
            Err(error) => Err(self.classify(error, &store)),
        }
    }
}

/// The room of an instance in a call, given back if the call is dropped before it ends.
struct InCall<'a> {
    runner: &'a PluginRunner,
    room: Option<Room>,
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        if let Some(room) = self.room.take() {
            self.runner.discard(room);
        }
    }
}

/// wasmtime's error when the kernel refuses to seal a memory image (see `instantiate`).
const SEAL_REFUSED: &str = "cannot add seals to the memfd";

/// The runner as the declarative reconcile sees it: the plugin's manifest, reads and guest calls.
impl composite::Plugin for PluginRunner {
    fn manifest(&self) -> &Manifest {
        self.host.manifest.as_deref().expect("a described plugin's runner has its manifest")
    }

    fn reading_host(&self) -> &HostContext {
        &self.reading_host
    }

    fn memory_bytes(&self) -> u64 {
        self.limits.memory_bytes
    }

    fn related(&self) -> &composite::Related {
        &self.related
    }

    async fn customize(
        &self,
        key: &ObjectKey,
        parent: Arc<str>,
        services: &Services,
    ) -> Result<Result<Vec<composite_exports::RelatedRule>, bindings::types::Error>, CallError> {
        match self.invoke(Call::Customize(key.clone(), parent), Some(services.clone())).await? {
            Output::Related(answer) => Ok(answer),
            _ => unreachable!("customize answers rules"),
        }
    }

    async fn sync(
        &self,
        key: &ObjectKey,
        request: composite_exports::SyncRequest,
        services: &Services,
    ) -> Result<Result<composite_exports::SyncResponse, bindings::types::Error>, CallError> {
        match self.invoke(Call::Sync(key.clone(), request), Some(services.clone())).await? {
            Output::Desired(answer) => Ok(answer),
            _ => unreachable!("sync answers the desired state"),
        }
    }
}

impl Drop for PluginRunner {
    fn drop(&mut self) {
        self.host.metrics.instances.dec_by(self.pool.get_mut().idle.len() as i64);
    }
}

/// Refuses results too large to be anything but a broken plugin.
fn check_size(output: &Output) -> Result<(), Fault> {
    match output {
        Output::Action(Err(e)) if e.message.len() > MAX_ERROR_MESSAGE => {
            Err(Fault::Oversized(format!("an error message of {} bytes; at most {MAX_ERROR_MESSAGE}", e.message.len())))
        }
        Output::Keys(keys) if keys.len() > MAX_MAPPED_KEYS => {
            Err(Fault::Oversized(format!("map-related returned {} keys; at most {MAX_MAPPED_KEYS}", keys.len())))
        }
        Output::Keys(keys) => keys.iter().try_for_each(|key| {
            let namespace = key.namespace.as_deref().and_then(|ns| boundary::too_long("namespace", ns.len(), MAX_NAMESPACE));
            match namespace.or_else(|| boundary::too_long("name", key.name.len(), MAX_NAME)) {
                Some(problem) => Err(Fault::Oversized(format!("map-related returned a key whose {problem}"))),
                None => Ok(()),
            }
        }),
        Output::Related(Ok(rules)) => composite::check_related(rules),
        Output::Desired(Ok(desired)) => composite::check_desired(desired),
        Output::Related(Err(e)) | Output::Desired(Err(e)) if e.message.len() > MAX_ERROR_MESSAGE => {
            Err(Fault::Oversized(format!("an error message of {} bytes; at most {MAX_ERROR_MESSAGE}", e.message.len())))
        }
        _ => Ok(()),
    }
}

/// Checks the component's exports against the `controller` or `declarative` world at a
/// compatible version: `plugin`, and `reconciler` or `composite` (which of the two reconciles is
/// for `describe` to say).
fn check_world(engine: &Engine, component: &Component) -> Result<(), RuntimeError> {
    let exports: Vec<String> = component.component_type().exports(engine).map(|(name, _)| name.to_string()).collect();
    let ours = format!("{PACKAGE}@{PACKAGE_VERSION}");
    // 0.x versions are compatible within a minor version.
    let compatible = |version: &str| version.split('.').take(2).eq(PACKAGE_VERSION.split('.').take(2));
    let version_of = |interface: &str| exports.iter().find_map(|e| e.strip_prefix(&format!("{PACKAGE}/{interface}@")));
    let missing = |what: &str| {
        let found = if exports.is_empty() { "nothing".to_string() } else { exports.join(", ") };
        RuntimeError::World(format!("does not export {what}: it exports {found}; build it for the `controller` (or the `declarative`) world of {ours}"))
    };
    let plugin = version_of("plugin").ok_or_else(|| missing(&format!("{PACKAGE}/plugin")))?;
    let logic =
        version_of("reconciler").or_else(|| version_of("composite")).ok_or_else(|| missing(&format!("{PACKAGE}/reconciler (or {PACKAGE}/composite)")))?;
    for version in [plugin, logic] {
        if !compatible(version) {
            return Err(RuntimeError::World(format!(
                "built for {PACKAGE}@{version}, but this host implements {ours} (compatible: {}.x)",
                PACKAGE_VERSION.rsplit_once('.').map_or(PACKAGE_VERSION, |(minor, _)| minor)
            )));
        }
    }
    Ok(())
}

/// A wasmtime error and its causes on one line.
fn chain(error: &wasmtime::Error) -> String {
    let mut parts: Vec<String> = error.chain().map(ToString::to_string).collect();
    parts.dedup();
    parts.join(": ")
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until stopped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl EpochTicker {
    fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kubewasm-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch thread");
        EpochTicker { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}
