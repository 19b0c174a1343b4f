//! One key through the plugin: finalizer bookkeeping, the call, and what its result means for
//! the queue, the metrics and the object's Events.

use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{Controller, Version};
use crate::resource::ObjectKey;
use crate::runtime::bindings::types::Error as GuestError;
use crate::runtime::host::{ApiWriter, CacheReader, EventSink, PatchKind, PluginEvent, WriteOp, WriteRequest};
use crate::runtime::{Action, CallError, GuestErrorCode, Request, code_name};

/// What became of one reconcile, for the queue and `controller_runtime_reconcile_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    RequeueAfter(Duration),
    /// Failed: retried with backoff.
    Error,
}

/// The few fields of the primary object the host itself acts on.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Meta {
    uid: Option<String>,
    resource_version: Option<String>,
    deletion_timestamp: Option<String>,
    finalizers: Vec<String>,
}

fn meta(json: &str) -> Meta {
    #[derive(Deserialize)]
    struct Object {
        #[serde(default)]
        metadata: Meta,
    }
    serde_json::from_str::<Object>(json).map(|o| o.metadata).unwrap_or_default()
}

/// Why a reconcile failed.
enum Failure {
    Call(CallError),
    /// Adding or removing the finalizer failed.
    Finalizer(GuestError),
}

impl Controller {
    /// Reconciles `key` with the current plugin version and records the outcome.
    pub(super) async fn process(&self, version: &Version, key: &ObjectKey) -> Outcome {
        let started = Instant::now();
        self.metrics.active_workers.inc();
        let result = self.reconcile_key(version, key).await;
        self.metrics.active_workers.dec();
        self.metrics.reconcile_time.observe(started.elapsed().as_secs_f64());
        let outcome = match result {
            Ok(Action::Done) => Outcome::Success,
            Ok(Action::RequeueAfter(after)) => Outcome::RequeueAfter(after),
            Err(failure) => {
                self.report(version, key, failure);
                Outcome::Error
            }
        };
        self.metrics.count(outcome);
        outcome
    }

    async fn reconcile_key(&self, version: &Version, key: &ObjectKey) -> Result<Action, Failure> {
        let manifest = &version.manifest;
        // From the primary watch itself: the store whose event enqueued this key is never
        // behind that event (another watch of the same kind may be).
        let Some(mut object) = version.primary.get(&manifest.primary, key) else {
            // Gone from the cache: deleted, nothing left to reconcile.
            return Ok(Action::Done);
        };
        let meta = meta(&object);
        let retries = self.queue.num_requeues(key);
        let deleting = meta.deletion_timestamp.is_some();
        if let Some(finalizer) = &manifest.finalizer {
            let ours = meta.finalizers.iter().any(|f| f == finalizer);
            if deleting {
                if !ours {
                    return Ok(Action::Done);
                }
                let request = Request { key: key.clone(), object, retries };
                return match version.runner.finalize(request).await.map_err(Failure::Call)? {
                    Action::Done => {
                        let rest = meta.finalizers.iter().filter(|f| *f != finalizer).cloned().collect();
                        self.set_finalizers(version, key, &meta, rest).await.map(|_| Action::Done)
                    }
                    requeue => Ok(requeue),
                };
            }
            if !ours {
                let mut with = meta.finalizers.clone();
                with.push(finalizer.clone());
                object = self.set_finalizers(version, key, &meta, with).await?.into();
            }
        } else if deleting {
            return Ok(Action::Done);
        }
        version.runner.reconcile(Request { key: key.clone(), object, retries }).await.map_err(Failure::Call)
    }

    /// Replaces the primary's finalizers, on the condition that it has not changed since it was
    /// read (a stale resourceVersion is a conflict, retried without an Event).
    async fn set_finalizers(&self, version: &Version, key: &ObjectKey, meta: &Meta, finalizers: Vec<String>) -> Result<String, Failure> {
        let body = serde_json::json!({
            "metadata": { "finalizers": finalizers, "resourceVersion": meta.resource_version },
        });
        let request = WriteRequest {
            resource: version.manifest.primary.clone(),
            namespace: key.namespace().map(Into::into),
            name: key.name().into(),
            op: WriteOp::Patch { patch_type: PatchKind::Merge, body },
        };
        self.writer.write(request).await.map(Option::unwrap_or_default).map_err(Failure::Finalizer)
    }

    /// Logs a failure and records a Warning Event on the object, except for conflicts: another
    /// actor changed the object first, which is normal and simply retried.
    fn report(&self, version: &Version, key: &ObjectKey, failure: Failure) {
        let (reason, note, conflict) = match &failure {
            Failure::Call(CallError::Plugin { code, message }) => {
                ("ReconcileFailed", format!("{}: {message}", code_name(*code)), *code == GuestErrorCode::Conflict)
            }
            Failure::Call(CallError::Fault(fault)) => ("PluginFault", format!("the plugin {fault}"), false),
            Failure::Finalizer(e) => ("FinalizerUpdateFailed", format!("{}: {}", code_name(e.code), e.message), e.code == GuestErrorCode::Conflict),
        };
        if conflict {
            tracing::debug!(plugin = %self.name, key = %key, "conflict, retrying: {note}");
            return;
        }
        tracing::warn!(plugin = %self.name, key = %key, reason, "{note}");
        let uid = version.primary.get(&version.manifest.primary, key).and_then(|json| meta(&json).uid);
        self.env.events.publish(PluginEvent {
            plugin: self.name.clone(),
            regarding: version.manifest.primary.clone(),
            key: key.clone(),
            uid,
            warning: true,
            reason: reason.into(),
            action: "Reconcile".into(),
            note: truncate(note, 1024),
        });
    }
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max - 3;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}
