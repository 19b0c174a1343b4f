//! The host side of the WIT imports: one file per interface, each implementing its generated
//! `Host` trait on a narrow context that sees only what that interface needs.
//!
//! Every call is checked against the plugin's manifest (the capability check) before it reaches
//! a backend: the cache, the API writer and the event sink are trusted and know nothing of
//! plugins' permissions. A refused call is a `forbidden` error value for the guest, a warning in
//! the host log and a count in `kubewasm_plugin_forbidden_calls_total` — never a trap.

pub mod cache;
pub mod client;
pub mod events;
pub mod log;

use std::sync::Arc;

use wasmtime::component::Linker;

use super::bindings::types::{Error as GuestError, ErrorCode};
use super::instance::InstanceState;
use crate::manifest::{Manifest, Subresource, Verb};
use crate::metrics::PluginMetrics;
use crate::resource::Gvk;

pub use cache::{CacheReader, Scope};
pub use client::{ApiWriter, PatchKind, WriteOp, WriteRequest};
pub use events::{EventSink, PluginEvent};

/// What a plugin's calls may reach outside the sandbox. Shared by all its instances.
#[derive(Clone)]
pub struct Services {
    pub cache: Arc<dyn CacheReader>,
    pub writer: Arc<dyn ApiWriter>,
    pub events: Arc<dyn EventSink>,
}

impl Services {
    /// Services for a plugin that has not described itself yet: every call is refused before it
    /// gets here, so these are never reached.
    pub fn unreachable() -> Self {
        let none = Arc::new(Nothing);
        Services { cache: none.clone(), writer: none.clone(), events: none }
    }
}

/// The identity, grants and services of one loaded plugin version.
pub struct HostContext {
    pub plugin: Arc<str>,
    /// `None` while the plugin describes itself: it may only log.
    pub manifest: Option<Arc<Manifest>>,
    pub services: Services,
    pub metrics: PluginMetrics,
}

impl HostContext {
    /// The capability check. `Err` is the error value the guest receives.
    fn check(&self, verb: Verb, resource: &Gvk, subresource: Option<Subresource>, namespace: Option<&str>) -> Result<&Manifest, GuestError> {
        let Some(manifest) = self.manifest.as_deref() else {
            return Err(self.refuse(format!("{} {resource}: host calls are not available during describe", verb.as_str())));
        };
        if manifest.allows(verb, resource, subresource, namespace) {
            return Ok(manifest);
        }
        let target = match (subresource, namespace) {
            (Some(sub), Some(ns)) => format!("{resource} {} in namespace {ns}", sub.as_str()),
            (Some(sub), None) => format!("{resource} {}", sub.as_str()),
            (None, Some(ns)) => format!("{resource} in namespace {ns}"),
            (None, None) => format!("{resource} in all namespaces"),
        };
        Err(self.refuse(format!("{} {target} is not granted by the plugin's manifest", verb.as_str())))
    }

    fn refuse(&self, message: String) -> GuestError {
        tracing::warn!(plugin = %self.plugin, "forbidden host call: {message}");
        self.metrics.forbidden_calls.inc();
        GuestError { code: ErrorCode::Forbidden, message }
    }
}

pub(crate) fn error(code: ErrorCode, message: impl Into<String>) -> GuestError {
    GuestError { code, message: message.into() }
}

/// Largest object a guest may send; the API server refuses bigger requests anyway (3 MiB).
pub(crate) const MAX_OBJECT_BYTES: usize = 3 << 20;

/// Registers the four kubewasm interfaces, each with its own narrow context.
pub fn add_to_linker(linker: &mut Linker<InstanceState>) -> wasmtime::Result<()> {
    use super::bindings::kubewasm::controller as wit;
    wit::types::add_to_linker::<InstanceState, cache::CacheData>(linker, cache::context)?;
    wit::cache::add_to_linker::<InstanceState, cache::CacheData>(linker, cache::context)?;
    wit::client::add_to_linker::<InstanceState, client::ClientData>(linker, client::context)?;
    wit::events::add_to_linker::<InstanceState, events::EventsData>(linker, events::context)?;
    wit::log::add_to_linker::<InstanceState, log::LogData>(linker, log::context)?;
    Ok(())
}

/// Backend of [`Services::unreachable`].
struct Nothing;

impl CacheReader for Nothing {
    fn scope(&self, _: &Gvk) -> Option<Scope> {
        None
    }
    fn get(&self, _: &Gvk, _: &crate::resource::ObjectKey) -> Option<Arc<str>> {
        None
    }
    fn list(&self, _: &Gvk, _: Option<&str>, _: Option<&crate::selector::LabelSelector>) -> Vec<(crate::resource::ObjectKey, Arc<str>)> {
        Vec::new()
    }
}

#[async_trait::async_trait]
impl ApiWriter for Nothing {
    async fn write(&self, _: WriteRequest) -> Result<Option<String>, GuestError> {
        Err(error(ErrorCode::Unavailable, "no API access during describe"))
    }
}

impl EventSink for Nothing {
    fn publish(&self, _: PluginEvent) {}
}
