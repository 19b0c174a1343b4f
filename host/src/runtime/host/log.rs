//! `kubewasm:controller/log`: the guest's structured log records, written to the host's log
//! tagged with the plugin's name and the key being reconciled — within the plugin's
//! [`LogBudget`], which its stdout and stderr lines share.

use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use tokio::time::Instant;
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, WasmList, WasmStr};

use super::super::bindings::log::{Field, Level};
use super::super::bindings::{PACKAGE, PACKAGE_VERSION};
use super::HostState;
use crate::queue::rate_limit::TokenBucket;

/// Records a plugin may write per second, and at once.
const RECORDS_PER_SECOND: f64 = 100.0;
const RECORDS_BURST: u32 = 1000;
/// Fields kept per record; the rest are counted in a `dropped_fields` field.
const MAX_FIELDS: usize = 32;
const MAX_KEY: usize = 128;
/// Longest message and field value written; longer ones are cut.
pub const MAX_TEXT: usize = 8 * 1024;

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

/// Registers `log.emit` by hand rather than through the generated `Host` trait: the generated
/// code would copy every field of a record into host memory before the budget is looked at (a
/// million fields, a hundred megabytes), while this reads the guest's list in place and takes
/// only what is kept.
pub fn add_to_linker<T: HostState>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut log = linker.instance(&format!("{PACKAGE}/log@{PACKAGE_VERSION}"))?;
    log.func_wrap("emit", |mut store: StoreContextMut<'_, T>, (level, message, fields): (Level, WasmStr, WasmList<Field>)| {
        let host = store.data().host().clone();
        let key = store.data().key().map(ToString::to_string).unwrap_or_default();
        if !host.logs.admit(&host.plugin) {
            return Ok(());
        }
        let count = fields.len();
        let mut text = String::new();
        for field in fields.iter(&mut store)?.take(MAX_FIELDS) {
            let field = field?;
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(clip(&field.key, MAX_KEY));
            text.push('=');
            text.push_str(clip(&field.value, MAX_TEXT));
        }
        if count > MAX_FIELDS {
            text.push_str(&format!(" dropped_fields={}", count - MAX_FIELDS));
        }
        let message = message.to_str(&store)?;
        let (plugin, message, fields) = (&*host.plugin, clip(&message, MAX_TEXT), text);
        macro_rules! emit {
            ($level:ident) => {
                tracing::$level!(target: "kubewasm::plugin", plugin, key, fields, "{message}")
            };
        }
        match level {
            Level::Trace => emit!(trace),
            Level::Debug => emit!(debug),
            Level::Info => emit!(info),
            Level::Warn => emit!(warn),
            Level::Error => emit!(error),
        }
        Ok(())
    })
}
