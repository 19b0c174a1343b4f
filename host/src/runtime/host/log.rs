//! `kubewasm:controller/log`: the guest's structured log records, written to the host's log
//! tagged with the plugin's name and the key being reconciled — within the plugin's
//! [`LogBudget`], which its stdout and stderr lines share.

use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use tokio::time::Instant;
use wasmtime::StoreContextMut;
use wasmtime::component::{ComponentType, Lift, Linker, WasmList, WasmStr};

use super::super::bindings::log::Level;
use super::super::bindings::{PACKAGE, PACKAGE_VERSION};
use super::HostState;
use crate::bucket::TokenBucket;
use crate::logging::{PLUGIN_TARGET, as_plugin};

/// Records a plugin may write per second, and at once.
const RECORDS_PER_SECOND: f64 = 100.0;
const RECORDS_BURST: u32 = 1000;
/// Fields kept per record; the rest are counted in a `dropped_fields` field.
const MAX_FIELDS: usize = 32;
const MAX_KEY: usize = 128;
/// Longest message and field value written; longer ones are cut.
pub const MAX_TEXT: usize = 8 * 1024;
/// A field is read (and then cut) only if its key and value are within this together, so that
/// a record costs the host the same however long the guest's strings are; a longer field is
/// dropped and counted with the fields over [`MAX_FIELDS`].
const MAX_FIELD_READ: usize = 64 * 1024;

/// How much one plugin may write to the host's log. Shared by its instances.
pub struct LogBudget {
    bucket: Mutex<TokenBucket>,
    dropped: Counter,
    /// When a drop was last reported in the host log (at most once a minute).
    reported: Mutex<Option<Instant>>,
}

impl LogBudget {
    /// `dropped` counts the records refused.
    pub fn new(dropped: Counter) -> Self {
        LogBudget { bucket: Mutex::new(TokenBucket::new(RECORDS_PER_SECOND, RECORDS_BURST)), dropped, reported: Mutex::new(None) }
    }

    /// Takes one record's worth; `false` (and counted) when the plugin is over its budget.
    pub fn admit(&self, plugin: &str) -> bool {
        let now = Instant::now();
        if self.bucket.lock().try_take(now) {
            return true;
        }
        self.dropped.inc();
        let mut reported = self.reported.lock();
        if reported.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(60)) {
            *reported = Some(now);
            tracing::warn!(
                plugin,
                "the plugin logs more than {RECORDS_PER_SECOND} records a second: dropping records (see kubewasm_plugin_log_records_dropped_total)"
            );
        }
        false
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub fn clip(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `log.field`, in place.
#[derive(ComponentType, Lift)]
#[component(record)]
struct LazyField {
    key: WasmStr,
    value: WasmStr,
}

/// Whether the host's log keeps records of this level (a record it would not keep is not read).
/// Asked as the plugin's (`logging::as_plugin`): a plugin may have a level of its own.
fn enabled(level: Level) -> bool {
    macro_rules! enabled {
        ($level:ident) => {
            tracing::enabled!(target: PLUGIN_TARGET, tracing::Level::$level)
        };
    }
    match level {
        Level::Trace => enabled!(TRACE),
        Level::Debug => enabled!(DEBUG),
        Level::Info => enabled!(INFO),
        Level::Warn => enabled!(WARN),
        Level::Error => enabled!(ERROR),
    }
}

/// Registers `log.emit` by hand rather than through the generated `Host` trait: the generated
/// code would copy every field of a record into host memory before the level or the budget is
/// looked at (a million fields, a hundred megabytes), while this reads the guest's list in place
/// and takes only what is kept, each field under a fuel of its own ([`MAX_FIELD_READ`]).
pub fn add_to_linker<T: HostState>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut log = linker.instance(&format!("{PACKAGE}/log@{PACKAGE_VERSION}"))?;
    log.func_wrap("emit", |mut store: StoreContextMut<'_, T>, (level, message, fields): (Level, WasmStr, WasmList<LazyField>)| {
        let host = store.data().host().clone();
        if !as_plugin(&host.plugin, || enabled(level)) || !host.logs.admit(&host.plugin) {
            return Ok(());
        }
        let key = store.data().key().map(ToString::to_string).unwrap_or_default();
        let mut dropped = fields.len().saturating_sub(MAX_FIELDS);
        let mut text = String::new();
        for i in 0..fields.len().min(MAX_FIELDS) {
            // The store's call hook sets the fuel back when this call returns.
            store.set_hostcall_fuel(MAX_FIELD_READ);
            let field = match fields.get(&mut store, i) {
                Some(Ok(field)) => field,
                Some(Err(e)) if super::super::boundary::fuel_exhausted(&e) => {
                    dropped += 1;
                    continue;
                }
                Some(Err(e)) => return Err(e),
                None => break,
            };
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(clip(&field.key.to_str(&store)?, MAX_KEY));
            text.push('=');
            text.push_str(clip(&field.value.to_str(&store)?, MAX_TEXT));
        }
        if dropped > 0 {
            text.push_str(&format!(" dropped_fields={dropped}"));
        }
        let message = message.to_str(&store)?;
        let (plugin, message, fields) = (&*host.plugin, clip(&message, MAX_TEXT), text);
        macro_rules! emit {
            ($level:ident) => {
                tracing::$level!(target: PLUGIN_TARGET, plugin, key, fields, "{message}")
            };
        }
        as_plugin(&host.plugin, || match level {
            Level::Trace => emit!(trace),
            Level::Debug => emit!(debug),
            Level::Info => emit!(info),
            Level::Warn => emit!(warn),
            Level::Error => emit!(error),
        });
        Ok(())
    })
}
