//! The sandbox a plugin instance lives in: WASI with everything denied but clocks and random,
//! and stdout/stderr turned into the host's log lines tagged with the plugin's name, within the
//! plugin's log budget. The wall clock is the system's, or a fixed time (a table test's `now`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use parking_lot::Mutex;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

use super::host::{Clock, LogBudget};
use crate::logging::{PLUGIN_TARGET, as_plugin};

struct FixedWallClock(Duration);

impl wasmtime_wasi::HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        self.0
    }
}

/// WASI context for one instance: no preopened directories, no environment, no arguments, no
/// sockets, no name lookup, stdin closed.
pub fn wasi_ctx(plugin: &Arc<str>, budget: &Arc<LogBudget>, clock: Clock) -> WasiCtx {
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(GuestOutput::new(plugin, budget, Stream::Stdout))
        .stderr(GuestOutput::new(plugin, budget, Stream::Stderr))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if let Clock::Fixed(at) = clock {
        // Before the epoch is not a time a cluster object can carry; such a case is refused when read.
        builder.wall_clock(FixedWallClock(at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default()));
    }
    builder.build()
}

#[derive(Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

/// A guest output stream that emits one `tracing` event per line. Partial lines are buffered
/// (bounded, so a guest printing without newlines cannot grow host memory).
#[derive(Clone)]
struct GuestOutput {
    plugin: Arc<str>,
    budget: Arc<LogBudget>,
    stream: Stream,
    pending: Arc<Mutex<Vec<u8>>>,
}

/// Longest line kept; the rest of an overlong line is cut.
const MAX_LINE: usize = 16 * 1024;

impl GuestOutput {
    fn new(plugin: &Arc<str>, budget: &Arc<LogBudget>, stream: Stream) -> Self {
        GuestOutput { plugin: plugin.clone(), budget: budget.clone(), stream, pending: Default::default() }
    }

    fn emit(&self, line: &[u8]) {
        // A line the log would not keep costs no budget.
        let kept = as_plugin(&self.plugin, || match self.stream {
            Stream::Stdout => tracing::enabled!(target: PLUGIN_TARGET, tracing::Level::INFO),
            Stream::Stderr => tracing::enabled!(target: PLUGIN_TARGET, tracing::Level::WARN),
        });
        if !kept || !self.budget.admit(&self.plugin) {
            return;
        }
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches('\r');
        as_plugin(&self.plugin, || match self.stream {
            Stream::Stdout => tracing::info!(target: PLUGIN_TARGET, plugin = %self.plugin, stream = "stdout", "{line}"),
            Stream::Stderr => tracing::warn!(target: PLUGIN_TARGET, plugin = %self.plugin, stream = "stderr", "{line}"),
        });
    }

    fn write_bytes(&self, mut bytes: &[u8]) {
        let mut pending = self.pending.lock();
        while let Some(newline) = bytes.iter().position(|&b| b == b'\n') {
            pending.extend_from_slice(&bytes[..newline]);
            self.emit(&pending[..pending.len().min(MAX_LINE)]);
            pending.clear();
            bytes = &bytes[newline + 1..];
        }
        let room = MAX_LINE.saturating_sub(pending.len());
        pending.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

impl Drop for GuestOutput {
    fn drop(&mut self) {
        // The last clone flushes a final line that had no newline.
        if Arc::strong_count(&self.pending) == 1 {
            let pending = std::mem::take(&mut *self.pending.lock());
            if !pending.is_empty() {
                self.emit(&pending);
            }
        }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.write_bytes(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(MAX_LINE)
    }
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>, buf: &[u8]) -> std::task::Poll<std::io::Result<usize>> {
        self.write_bytes(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
