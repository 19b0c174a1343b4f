//! The host's log: stderr, one line per record, at the level `--log-level` (or `RUST_LOG`)
//! sets, except that the records of a plugin named in `--plugin-log-level NAME=LEVEL` are kept
//! at that plugin's level.
//!
//! Every record a plugin writes (its log records, its stdout and stderr lines) has the target
//! [`PLUGIN_TARGET`] and is written inside [`as_plugin`], which tells the filter whose it is
//! before any of its fields are read — so a plugin's level also decides whether the host reads
//! the record out of the guest at all, and a record nobody keeps costs no log budget.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Arc;

use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber, span};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The target of every record a plugin writes.
pub const PLUGIN_TARGET: &str = "kubewasm::plugin";

#[derive(Debug, thiserror::Error)]
pub enum LevelError {
    #[error("{0:?} is not a log level: use one of trace, debug, info, warn, error, off")]
    Level(String),
    #[error("{0:?}: write it as NAME=LEVEL, e.g. my-plugin=debug")]
    Override(String),
}

/// A level as `--log-level` takes it.
pub fn parse_level(text: &str) -> Result<LevelFilter, LevelError> {
    // LevelFilter's own parser also takes numbers, which nobody means here.
    match text.to_ascii_lowercase().as_str() {
        "trace" => Ok(LevelFilter::TRACE),
        "debug" => Ok(LevelFilter::DEBUG),
        "info" => Ok(LevelFilter::INFO),
        "warn" => Ok(LevelFilter::WARN),
        "error" => Ok(LevelFilter::ERROR),
        "off" => Ok(LevelFilter::OFF),
        _ => Err(LevelError::Level(text.to_string())),
    }
}

/// `NAME=LEVEL` as `--plugin-log-level` takes it.
pub fn parse_plugin_level(text: &str) -> Result<(String, LevelFilter), LevelError> {
    match text.split_once('=') {
        Some((name, level)) if !name.is_empty() => Ok((name.to_string(), parse_level(level)?)),
        _ => Err(LevelError::Override(text.to_string())),
    }
}

thread_local! {
    /// The plugin whose record this thread is writing, if any.
    static WRITING: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Runs `write` — a plugin's record, or the check whether it would be kept — as `plugin`'s.
pub fn as_plugin<R>(plugin: &Arc<str>, write: impl FnOnce() -> R) -> R {
    /// Puts back the plugin that was writing before, also when `write` panics.
    struct Restore(Option<Arc<str>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            WRITING.set(self.0.take());
        }
    }
    let _restore = Restore(WRITING.replace(Some(plugin.clone())));
    write()
}

/// The levels: `base` for everything, a plugin's own for its records.
pub struct Levels {
    base: EnvFilter,
    plugins: HashMap<String, LevelFilter>,
}

impl Levels {
    /// `RUST_LOG` when it is set (and parses), else `default`; `plugins` on top of either.
    pub fn from_env(default: LevelFilter, plugins: impl IntoIterator<Item = (String, LevelFilter)>) -> Self {
        let base = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::default().add_directive(default.into()));
        Levels { base, plugins: plugins.into_iter().collect() }
    }

    /// The level of the record about to be written, if it is a plugin's with a level of its own.
    fn plugin_level(&self, meta: &Metadata<'_>) -> Option<LevelFilter> {
        if self.plugins.is_empty() || meta.target() != PLUGIN_TARGET {
            return None;
        }
        WRITING.with_borrow(|writing| writing.as_deref().and_then(|plugin| self.plugins.get(plugin)).copied())
    }

    /// Sets up the process's log on stderr, as text or JSON.
    pub fn init(self, json: bool) {
        let layer = tracing_subscriber::fmt::layer().with_writer(|| OneLine(std::io::stderr()));
        if json {
            tracing_subscriber::registry().with(self).with(layer.json()).init();
        } else {
            tracing_subscriber::registry().with(self).with(layer.with_ansi(std::io::stderr().is_terminal())).init();
        }
    }
}

/// A filter of the whole subscriber, as `EnvFilter` is when it is a layer: a per-layer filter
/// would not answer `tracing::enabled!` (the registry reports a record enabled unless every
/// per-layer filter refused it), and the host asks that before it reads a plugin's record.
impl<S: Subscriber> Layer<S> for Levels {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        let base = Layer::<S>::register_callsite(&self.base, meta);
        // Whether a plugin's record is kept depends on whose it is: ask every time.
        if !self.plugins.is_empty() && meta.target() == PLUGIN_TARGET { Interest::sometimes() } else { base }
    }

    fn enabled(&self, meta: &Metadata<'_>, cx: Context<'_, S>) -> bool {
        match self.plugin_level(meta) {
            Some(level) => level >= *meta.level(),
            None => Layer::enabled(&self.base, meta, cx),
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        // No hint from the base means it may keep anything.
        let base = Layer::<S>::max_level_hint(&self.base)?;
        Some(self.plugins.values().fold(base, |max, &level| max.max(level)))
    }

    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, cx: Context<'_, S>) {
        Layer::on_new_span(&self.base, attrs, id, cx);
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, cx: Context<'_, S>) {
        Layer::on_record(&self.base, id, values, cx);
    }

    fn on_enter(&self, id: &span::Id, cx: Context<'_, S>) {
        Layer::on_enter(&self.base, id, cx);
    }

    fn on_exit(&self, id: &span::Id, cx: Context<'_, S>) {
        Layer::on_exit(&self.base, id, cx);
    }

    fn on_close(&self, id: span::Id, cx: Context<'_, S>) {
        Layer::on_close(&self.base, id, cx);
    }
}

/// Writes each formatted record with its inner line breaks escaped (`\n`), keeping the final
/// one, so that line-oriented log processing never splits a record (an API server's
/// multi-line error, a plugin's text). The formatter hands over one whole record per `write`.
struct OneLine<W>(W);

impl<W: std::io::Write> std::io::Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let body = buf.strip_suffix(b"\n").unwrap_or(buf);
        if !body.contains(&b'\n') && !body.contains(&b'\r') {
            return self.0.write_all(buf).map(|_| buf.len());
        }
        let mut line = Vec::with_capacity(buf.len() + 16);
        for &b in body {
            match b {
                b'\n' => line.extend_from_slice(b"\\n"),
                b'\r' => line.extend_from_slice(b"\\r"),
                b => line.push(b),
            }
        }
        if body.len() < buf.len() {
            line.push(b'\n');
        }
        self.0.write_all(&line).map(|_| buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// What a subscriber filtered by `levels` writes while `f` runs.
    fn written(levels: Levels, f: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        let layer = tracing_subscriber::fmt::layer().with_ansi(false).with_writer(move || Sink(sink.clone()));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(levels).with(layer), f);
        String::from_utf8(out.lock().unwrap().clone()).unwrap()
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// One plugin's records at `level`, written as `runtime::host::log` writes them, and whether
    /// the host would have read it out of the guest.
    fn record(plugin: &str, level: tracing::Level) -> bool {
        let plugin: Arc<str> = plugin.into();
        as_plugin(&plugin, || {
            let plugin = &*plugin;
            match level {
                tracing::Level::DEBUG => {
                    tracing::debug!(target: PLUGIN_TARGET, plugin, "debug from {plugin}");
                    tracing::enabled!(target: PLUGIN_TARGET, tracing::Level::DEBUG)
                }
                tracing::Level::INFO => {
                    tracing::info!(target: PLUGIN_TARGET, plugin, "info from {plugin}");
                    tracing::enabled!(target: PLUGIN_TARGET, tracing::Level::INFO)
                }
                _ => unreachable!("the tests write debug and info"),
            }
        })
    }

    #[test]
    fn a_plugins_level_raises_or_lowers_only_its_own_records() {
        let levels = Levels {
            base: EnvFilter::default().add_directive(LevelFilter::INFO.into()),
            plugins: [("chatty".to_string(), LevelFilter::DEBUG), ("noisy".to_string(), LevelFilter::WARN)].into(),
        };
        let mut read = Vec::new();
        let out = written(levels, || {
            for plugin in ["chatty", "noisy", "other"] {
                read.push((plugin, record(plugin, tracing::Level::DEBUG), record(plugin, tracing::Level::INFO)));
            }
            tracing::debug!("host debug");
            tracing::info!("host info");
            // Not inside as_plugin: the base level decides.
            tracing::debug!(target: PLUGIN_TARGET, plugin = "chatty", "unattributed debug");
        });
        assert_eq!(read, [("chatty", true, true), ("noisy", false, false), ("other", false, true)]);
        assert!(out.contains("debug from chatty") && out.contains("info from chatty"), "{out}");
        assert!(!out.contains("from noisy"), "{out}");
        assert!(out.contains("info from other") && !out.contains("debug from other"), "{out}");
        assert!(out.contains("host info") && !out.contains("host debug") && !out.contains("unattributed"), "{out}");
        assert_eq!(out.lines().count(), 4, "{out}");
    }

    #[test]
    fn without_plugin_levels_the_base_decides() {
        let levels = Levels { base: EnvFilter::new("warn,kubewasm::plugin=debug"), plugins: HashMap::new() };
        let out = written(levels, || {
            assert!(record("p", tracing::Level::DEBUG));
            tracing::info!("host info");
        });
        assert!(out.contains("debug from p") && !out.contains("host info"), "{out}");
    }

    #[test]
    fn levels_parse_or_say_what_to_write() {
        assert_eq!(parse_level("DEBUG").unwrap(), LevelFilter::DEBUG);
        assert_eq!(parse_plugin_level("my-plugin=off").unwrap(), ("my-plugin".to_string(), LevelFilter::OFF));
        assert_eq!(parse_level("3").unwrap_err().to_string(), r#""3" is not a log level: use one of trace, debug, info, warn, error, off"#);
        assert_eq!(parse_plugin_level("my-plugin").unwrap_err().to_string(), r#""my-plugin": write it as NAME=LEVEL, e.g. my-plugin=debug"#);
        assert_eq!(parse_plugin_level("=debug").unwrap_err().to_string(), r#""=debug": write it as NAME=LEVEL, e.g. my-plugin=debug"#);
        assert!(parse_plugin_level("p=loud").unwrap_err().to_string().starts_with(r#""loud" is not a log level"#));
    }
}
