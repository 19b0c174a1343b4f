//! One live instance of a plugin: its store (WASI context, memory cap, the clock its deadline is
//! measured on) and the interfaces it exports. Created by [`super::PluginRunner`], reused across calls, dropped after
//! a fault or when idle.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::{
    access_exports, clusters_exports, composite_exports, plugin_exports, projections_exports, reconciler_exports, release_exports, views_exports,
    webhooks_exports,
};
use super::boundary::Transfer;
use super::cpu::{self, CallClock};
use super::host::{HostContext, HostState, Services};
use crate::metrics::PluginMetrics;
use crate::resource::ObjectKey;

/// The data of one instance's store.
pub struct InstanceState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(super) memory: MemoryCap,
    pub(super) host: Arc<HostContext>,
    /// The plugin's context for the current call alone (`map-related`'s: the cache only).
    pub(super) call_host: Option<Arc<HostContext>>,
    /// The key being reconciled, for log context.
    pub(super) key: Option<ObjectKey>,
    /// The current call's own time, against its deadline ([`cpu`]).
    pub(super) clock: Arc<CallClock>,
    /// The plugin's services, their API waits kept off the clock.
    plugin_services: Services,
    /// Services for the current call alone, instead of the plugin's.
    services: Option<Services>,
    /// How much may be lifted out of the guest's memory, now.
    pub(super) transfer: Transfer,
}

impl AsMut<Transfer> for InstanceState {
    fn as_mut(&mut self) -> &mut Transfer {
        &mut self.transfer
    }
}

impl InstanceState {
    /// Hands the current call `services` (timed like the plugin's) instead of the plugin's.
    pub(super) fn set_services(&mut self, services: Option<Services>) {
        self.services = services.map(|s| cpu::timed(&s, &self.clock));
    }
}

impl HostState for InstanceState {
    fn host(&self) -> &Arc<HostContext> {
        self.call_host.as_ref().unwrap_or(&self.host)
    }
    fn memory_limit(&self) -> u64 {
        self.memory.limit() as u64
    }
    fn key(&self) -> Option<&ObjectKey> {
        self.key.as_ref()
    }
    fn services(&self) -> &Services {
        self.services.as_ref().unwrap_or(&self.plugin_services)
    }
}

impl WasiView for InstanceState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Caps what one instance may hold: its linear memories and its tables together (a component
/// may hold several of each) within its memory limit, and how many core instances, memories and
/// tables its store may have. Remembers a refused growth, so a trap that follows can be reported
/// as what it is.
pub(super) struct MemoryCap {
    limit: usize,
    used: usize,
    pub(super) refused: Option<usize>,
    metrics: PluginMetrics,
}

/// What the store of one instance may create. The largest real guests need 14 core instances
/// (Python), 1 memory and 2 tables: these leave room for other toolchains, and keep a hostile
/// component from reserving address space by the thousand (each memory reserves 4 GiB of it,
/// see `Runtime::new`).
const MAX_INSTANCES: usize = 64;
const MAX_MEMORIES: usize = 4;
const MAX_TABLES: usize = 64;
/// What one table element costs the host: a function reference is a pointer.
const TABLE_ELEMENT_BYTES: usize = size_of::<usize>();

impl MemoryCap {
    /// The most linear memory and table space the instance may hold.
    pub(super) fn limit(&self) -> usize {
        self.limit
    }

    /// Takes `desired - current` more bytes, or refuses them (and remembers it).
    fn grow(&mut self, current: usize, desired: usize) -> bool {
        let total = self.used.saturating_sub(current).saturating_add(desired);
        if total > self.limit {
            self.refused = Some(total);
            self.metrics.memory_refusals.inc();
            return false;
        }
        self.used = total;
        self.metrics.memory_bytes.inc_by(desired.saturating_sub(current) as i64);
        true
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(self.grow(current, desired))
    }

    fn table_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(self.grow(current.saturating_mul(TABLE_ELEMENT_BYTES), desired.saturating_mul(TABLE_ELEMENT_BYTES)))
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        self.metrics.memory_bytes.dec_by(self.used as i64);
    }
}

/// The interfaces an instance exports: `access` and `release` only when built for 0.1.1 or later,
/// `views` for 0.1.2 or later, `composite` for 0.1.3 or later, `clusters` for 0.1.4 or later,
/// `projections` for 0.1.5 or later, `webhooks` for 0.1.6 or later; `reconciler` unless built for
/// the `declarative` world.
pub(super) struct Exports {
    pub(super) plugin: plugin_exports::Guest,
    pub(super) reconciler: Option<reconciler_exports::Guest>,
    pub(super) composite: Option<composite_exports::Guest>,
    pub(super) access: Option<access_exports::Guest>,
    pub(super) release: Option<release_exports::Guest>,
    pub(super) views: Option<views_exports::Guest>,
    pub(super) clusters: Option<clusters_exports::Guest>,
    pub(super) projections: Option<projections_exports::Guest>,
    pub(super) webhooks: Option<webhooks_exports::Guest>,
}

/// A live instance and its exports.
pub(super) struct Instance {
    pub(super) store: Store<InstanceState>,
    pub(super) exports: Exports,
    pub(super) calls: u64,
    /// When it last finished a call (or was created), for releasing idle instances.
    pub(super) idle_since: Instant,
}

impl Instance {
    pub(super) fn new_store(engine: &wasmtime::Engine, host: Arc<HostContext>, memory_limit: u64, deadline: Duration) -> Store<InstanceState> {
        let metrics = host.metrics.clone();
        let clock = Arc::new(CallClock::new(deadline));
        let state = InstanceState {
            plugin_services: cpu::timed(&host.services, &clock),
            clock,
            wasi: super::sandbox::wasi_ctx(&host.plugin, &host.logs, host.services.clock),
            table: ResourceTable::new(),
            memory: MemoryCap { limit: usize::try_from(memory_limit).unwrap_or(usize::MAX), used: 0, refused: None, metrics },
            host,
            call_host: None,
            key: None,
            services: None,
            transfer: Transfer::new(memory_limit),
        };
        let mut store = Store::new(engine, state);
        store.limiter(|state| &mut state.memory);
        store.call_hook(Transfer::on_crossing);
        // Each epoch tick yields to the executor (a busy guest never starves a tokio worker)
        // and stops the call once it has used its deadline of its own time.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| match ctx.data().clock.tick() {
            Ok(()) => Ok(UpdateDeadline::Yield(1)),
            Err(exceeded) => Err(exceeded.into()),
        });
        store
    }

    /// Linear memory and tables currently held by this instance.
    pub(super) fn memory_bytes(&self) -> usize {
        self.store.data().memory.used
    }
}
