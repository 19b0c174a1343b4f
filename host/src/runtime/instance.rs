//! One live instance of a plugin: its store (WASI context, memory cap, the clock its deadline is
//! measured on) and the interfaces it exports. Created by [`super::PluginRunner`], reused across calls, dropped after
//! a fault or when idle.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::{access_exports, plugin_exports, reconciler_exports, release_exports};
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

/// Caps the total linear memory of one instance (a component may hold several core memories)
/// and remembers a refused growth, so a trap that follows can be reported as what it is.
pub(super) struct MemoryCap {
    limit: usize,
    used: usize,
    pub(super) refused: Option<usize>,
    metrics: PluginMetrics,
}

impl MemoryCap {
    /// The most linear memory the instance may hold.
    pub(super) fn limit(&self) -> usize {
        self.limit
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let total = self.used - current + desired;
        if total > self.limit {
            self.refused = Some(total);
            self.metrics.memory_refusals.inc();
            return Ok(false);
        }
        self.used = total;
        self.metrics.memory_bytes.inc_by((desired - current) as i64);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        // Tables hold function references; a million is far beyond any real guest.
        Ok(desired <= 1_000_000)
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        self.metrics.memory_bytes.dec_by(self.used as i64);
    }
}

/// The interfaces an instance exports: `access` and `release` only when built for 0.1.1 or later.
pub(super) struct Exports {
    pub(super) plugin: plugin_exports::Guest,
    pub(super) reconciler: reconciler_exports::Guest,
    pub(super) access: Option<access_exports::Guest>,
    pub(super) release: Option<release_exports::Guest>,
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
            wasi: super::sandbox::wasi_ctx(&host.plugin, &host.logs),
            table: ResourceTable::new(),
            memory: MemoryCap { limit: usize::try_from(memory_limit).unwrap_or(usize::MAX), used: 0, refused: None, metrics },
            host,
            call_host: None,
            key: None,
            services: None,
        };
        let mut store = Store::new(engine, state);
        store.limiter(|state| &mut state.memory);
        // Each epoch tick yields to the executor (a busy guest never starves a tokio worker)
        // and stops the call once it has used its deadline of its own time.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| match ctx.data().clock.tick() {
            Ok(()) => Ok(UpdateDeadline::Yield(1)),
            Err(exceeded) => Err(exceeded.into()),
        });
        store
    }

    /// Linear memory currently held by this instance.
    pub(super) fn memory_bytes(&self) -> usize {
        self.store.data().memory.used
    }
}
