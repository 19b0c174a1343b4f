//! The host side of the WIT imports: one file per interface, each implementing its generated
//! `Host` trait on a narrow context that sees only what that interface needs, and adapting the
//! Kubernetes layer below (the informers' caches, the API client, the Event recorder) to the
//! contract: nothing below the runtime knows of WIT types or error codes.
//!
//! Every call is checked against the plugin's manifest (the capability check) before it reaches
//! a backend: the cache, the API client and the event recorder know nothing of plugins'
//! permissions (the API server checks the plugin's identity again on everything that reaches
//! it). A refused call is a `forbidden` error value for the guest, a warning in the host log and
//! a count in `kubewasm_plugin_forbidden_calls_total` — never a trap.

mod args;
pub mod cache;
pub mod client;
pub mod events;
pub mod fleet;
pub mod log;

use std::sync::Arc;
use std::time::SystemTime;

use wasmtime::component::Linker;

use super::bindings::types::{Error as GuestError, ErrorCode};
use crate::manifest::{Manifest, Verb};
use crate::metrics::PluginMetrics;
use crate::resource::Gvk;
use crate::resource::ObjectKey;

pub use cache::CacheReader;
pub use client::Api;
pub use events::EventSink;
pub use fleet::{Alone, ClusterInfo, Fleet, Target, Unreached};
pub use log::LogBudget;

/// The time a guest's wall clock tells (its monotonic clock is always the system's: a guest
/// timing its own work, or waiting, must see time pass).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Clock {
    #[default]
    System,
    /// Always this instant: what a case or a recording ran at, so that a plugin that reads the
    /// time (a condition's lastTransitionTime, a schedule) makes the same calls on every run.
    Fixed(SystemTime),
}

/// What a plugin's calls may reach outside the sandbox. Shared by all its instances.
#[derive(Clone)]
pub struct Services {
    pub cache: Arc<dyn CacheReader>,
    pub api: Arc<dyn Api>,
    pub events: Arc<dyn EventSink>,
    /// The time the guest's WASI wall clock tells.
    pub clock: Clock,
    /// The other clusters the plugin reaches, and which one these services act in.
    pub fleet: Arc<dyn Fleet>,
}

impl Services {
    /// Services reaching `target`, with `fleet` for the plugin's other clusters, on the system
    /// clock.
    pub fn new(target: Target, fleet: Arc<dyn Fleet>) -> Self {
        let Target { cache, api, events } = target;
        Services { cache, api, events, clock: Clock::System, fleet }
    }

    /// Services for a plugin that has not described itself yet: every call is refused before it
    /// gets here, so these are never reached.
    pub fn unreachable() -> Self {
        let none = Arc::new(Nothing);
        Services { cache: none.clone(), api: none.clone(), events: none, clock: Clock::System, fleet: Arc::new(Alone) }
    }
}

/// The identity, grants and services of one loaded plugin version.
pub struct HostContext {
    pub plugin: Arc<str>,
    /// `None` while the plugin describes itself: it may only log.
    pub manifest: Option<Arc<Manifest>>,
    pub services: Services,
    pub metrics: PluginMetrics,
    /// The plugin's log budget, shared by its instances and their stdout and stderr.
    pub logs: Arc<LogBudget>,
    /// Set, to the rule it states, for calls that may read the cache and nothing else
    /// (`map-related`; a declarative plugin's `customize`, `sync` and `finalize`): `client` and
    /// `events` calls (and reads served live by the API server) are refused with `forbidden`.
    pub cache_only: Option<&'static str>,
}

impl HostContext {
    /// The capability check. `Err` is the error value the guest receives.
    fn check(&self, verb: Verb, resource: &Gvk, subresource: Option<&str>, namespace: Option<&str>, name: Option<&str>) -> Result<&Manifest, GuestError> {
        let Some(manifest) = self.manifest.as_deref() else {
            return Err(self.refuse(format!("{verb} {resource}: host calls are not available during describe")));
        };
        if manifest.allows(verb, resource, subresource, namespace, name) {
            return Ok(manifest);
        }
        let mut target = resource.to_string();
        if let Some(sub) = subresource {
            target.push_str(&format!(" {sub}"));
        }
        if let Some(name) = name {
            target.push_str(&format!(" {name:?}"));
        }
        match namespace {
            Some(ns) => target.push_str(&format!(" in namespace {ns}")),
            None if name.is_none() => target.push_str(" in all namespaces"),
            None => {}
        }
        Err(self.refuse(format!("{verb} {target} is not granted by the plugin's manifest")))
    }

    /// Refuses `what` in a call that may only read the cache.
    fn cache_only(&self, what: &str) -> Result<(), GuestError> {
        match self.cache_only {
            Some(rule) => Err(self.refuse(format!("{what} refused: {rule}"))),
            None => Ok(()),
        }
    }

    /// `json`, an object of `resource`, as the plugin is handed it by a request, a write's
    /// answer or a read from the API server: projected if it declared a projection of the kind.
    /// (Those of a metadata-only kind are handed whole: `views.metadata-only` covers reads.)
    pub(crate) fn as_answered(&self, resource: &Gvk, json: &str) -> String {
        match self.manifest.as_deref().and_then(|m| m.projection(resource)) {
            Some(fields) => crate::projection::project(json, fields),
            None => json.to_owned(),
        }
    }

    /// `json`, an object of `resource` from a cache, as `map-related` hands it: its metadata for
    /// a metadata-only kind, projected for a projected one.
    pub(crate) fn as_read(&self, resource: &Gvk, json: Arc<str>) -> Arc<str> {
        match self.manifest.as_deref().and_then(|m| m.reads(resource)) {
            Some(fields) => crate::projection::project(&json, fields).into(),
            None => json,
        }
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

/// What the interfaces need of an instance's store data: the plugin's context, its memory
/// limit and the key being reconciled. The instance implements it, so that these files never
/// name the instance that holds them.
pub trait HostState: Send + 'static {
    fn host(&self) -> &Arc<HostContext>;
    /// The instance's memory limit in bytes.
    fn memory_limit(&self) -> u64;
    /// The key being reconciled, for log context.
    fn key(&self) -> Option<&ObjectKey>;
    /// What this call's requests reach: the plugin's services, or the ones the caller gave for
    /// this call alone ([`crate::runtime::PluginRunner::reconcile_with`]).
    fn services(&self) -> &Services;
}

/// Registers the five kubewasm interfaces, each with its own narrow context. Each file
/// registers its functions by hand with the arguments read in place ([`args`]), rather than
/// through the generated `add_to_linker`, which would copy every string before any check.
pub fn add_to_linker<T: HostState>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    super::bindings::kubewasm::controller::types::add_to_linker::<T, cache::CacheData>(linker, cache::context::<T>)?;
    cache::add_to_linker(linker)?;
    client::add_to_linker(linker)?;
    events::add_to_linker(linker)?;
    fleet::add_to_linker(linker)?;
    log::add_to_linker(linker)
}

/// Backend of [`Services::unreachable`].
struct Nothing;

impl CacheReader for Nothing {
    fn scope(&self, _: &Gvk) -> Option<crate::resource::Scope> {
        None
    }
    fn get(&self, _: &Gvk, _: &crate::resource::ObjectKey) -> Option<Arc<str>> {
        None
    }
    fn list(
        &self,
        _: &Gvk,
        _: Option<&str>,
        _: Option<&crate::selector::LabelSelector>,
        _: usize,
    ) -> Result<Vec<(crate::resource::ObjectKey, Arc<str>)>, usize> {
        Ok(Vec::new())
    }
    fn children(&self, _: &Gvk, _: Option<&str>, _: &str, _: Option<&crate::selector::LabelSelector>) -> Vec<(crate::resource::ObjectKey, Arc<str>)> {
        Vec::new()
    }
}

#[async_trait::async_trait]
impl Api for Nothing {
    async fn write(&self, _: crate::client::WriteRequest) -> Result<Option<Arc<str>>, crate::client::RequestError> {
        Err(crate::client::RequestError::Standby)
    }
    async fn get(&self, _: &Gvk, _: Option<&str>, _: &str) -> Result<Option<String>, crate::client::RequestError> {
        Ok(None)
    }
}

impl EventSink for Nothing {
    fn publish(&self, _: crate::events::ObjectEvent) {}
}
