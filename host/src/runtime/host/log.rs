//! `kubewasm:controller/log`: the guest's structured log records, written to the host's log
//! tagged with the plugin's name and the key being reconciled.

use wasmtime::component::HasData;

use super::super::bindings::log::{Field, Host, Level};
use super::super::instance::InstanceState;
use crate::resource::ObjectKey;

pub struct LogCtx<'a> {
    plugin: &'a str,
    key: Option<&'a ObjectKey>,
}

pub struct LogData;

impl HasData for LogData {
    type Data<'a> = LogCtx<'a>;
}

pub fn context(state: &mut InstanceState) -> LogCtx<'_> {
    LogCtx { plugin: &state.host.plugin, key: state.key.as_ref() }
}

/// Longest message and field value written; longer ones are cut, so a guest cannot flood the
/// host log with one call.
const MAX_TEXT: usize = 8 * 1024;

fn clip(s: &str) -> &str {
    if s.len() <= MAX_TEXT {
        return s;
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl Host for LogCtx<'_> {
    fn emit(&mut self, level: Level, message: String, fields: Vec<Field>) -> wasmtime::Result<()> {
        let fields = fields
            .iter()
            .map(|f| format!("{}={}", clip(&f.key), clip(&f.value)))
            .collect::<Vec<_>>()
            .join(" ");
        let key = self.key.map(ToString::to_string).unwrap_or_default();
        let (plugin, message) = (self.plugin, clip(&message));
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
    }
}
