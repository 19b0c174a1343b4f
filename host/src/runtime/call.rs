//! What a call into a plugin is and how it ends: the request it gets, the action it answers, and
//! how it fails — an error value the plugin returned, or a fault the host stopped it with. Shared
//! by the runner and the declarative reconcile (`composite`), which both make calls.

use std::sync::Arc;
use std::time::Duration;

use super::bindings::types::ErrorCode;
use crate::metrics::FaultCounters;
use crate::resource::ObjectKey;

/// A call stopped by the host. The instance it ran in is discarded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    #[error("trapped: {0}")]
    Trap(String),
    /// Used its deadline of its own time (running, or in a wait of its own).
    #[error("ran past its deadline of {} ms", .0.as_millis())]
    Deadline(Duration),
    /// Waited on the API server (or was starved) past the wall-clock backstop without using its
    /// own deadline: the infrastructure's trouble, not the object's or the version's.
    #[error("stalled: still waiting on host calls after {} ms (its own time was within the deadline)", .0.as_millis())]
    Stalled(Duration),
    #[error("exceeded its memory limit of {limit} bytes (wanted {wanted})")]
    Memory { limit: u64, wanted: u64 },
    #[error("returned too much: {0}")]
    Oversized(String),
    #[error("could not be instantiated: {0}")]
    Instantiate(String),
}

impl Fault {
    /// The `kind` label of `kubewasm_plugin_faults_total`.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Trap(_) => "trap",
            Fault::Deadline(_) => "deadline",
            Fault::Stalled(_) => "stalled",
            Fault::Memory { .. } => "memory",
            Fault::Oversized(_) => "oversized",
            Fault::Instantiate(_) => "instantiate",
        }
    }

    pub(super) fn count(&self, metrics: &FaultCounters) {
        match self {
            Fault::Trap(_) => &metrics.trap,
            Fault::Deadline(_) => &metrics.deadline,
            Fault::Stalled(_) => &metrics.stalled,
            Fault::Memory { .. } => &metrics.memory,
            Fault::Oversized(_) => &metrics.oversized,
            Fault::Instantiate(_) => &metrics.instantiate,
        }
        .inc();
    }
}

/// How a reconcile, finalize or map call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The plugin returned an error value.
    #[error("{}: {message}", code_name(*code))]
    Plugin { code: ErrorCode, message: String },
    #[error(transparent)]
    Fault(#[from] Fault),
}

/// The WIT name of an error code, for messages and metric labels.
pub fn code_name(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::NotFound => "not-found",
        ErrorCode::AlreadyExists => "already-exists",
        ErrorCode::Conflict => "conflict",
        ErrorCode::Forbidden => "forbidden",
        ErrorCode::Invalid => "invalid",
        ErrorCode::Unavailable => "unavailable",
        ErrorCode::Other => "other",
    }
}

/// What to do with a key after a successful call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Done,
    RequeueAfter(Duration),
}

/// One primary object to reconcile or finalize.
#[derive(Debug, Clone)]
pub struct Request {
    pub key: ObjectKey,
    pub object: Arc<str>,
    pub retries: u32,
}
