//! One key through the plugin: for a sharded plugin, whether the object is still this shard's
//! (or is to be handed over), finalizer bookkeeping (including names earlier versions used),
//! the release of primaries that stopped matching the selector, the call (journaled for a
//! shadow candidate when one runs), and what its result
//! means for the queue, the metrics, the quarantine, the version's tally and the object's
//! Events.

use std::time::{Duration, Instant};

use serde::Deserialize;

use super::quarantine::{Entered, Subject, is_object_fault};
use super::shadow::Trace;
use super::{Controller, Version};
use crate::client::{PatchKind, RequestError, WriteOp, WriteRequest};
use crate::events::ObjectEvent;
use crate::resource::{ObjectKey, uid_of};
use crate::runtime::journal::Journal;
use crate::runtime::{Action, CallError, Fault, GuestErrorCode, Request, code_name};
use crate::shard::Placement;

/// A `requeue-after` shorter than this means "again soon" and goes through the rate limiter.
pub const MIN_REQUEUE_AFTER: Duration = Duration::from_secs(1);

/// What became of one reconcile, for the queue and `controller_runtime_reconcile_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    RequeueAfter(Duration),
    /// Failed: retried with backoff.
    Error,
    /// Quarantined (by this reconcile's fault, or before): not retried until the object or the
    /// plugin changes.
    Quarantined,
}

/// The few fields of the primary object the host itself acts on.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Meta {
    pub(super) resource_version: Option<String>,
    deletion_timestamp: Option<String>,
    pub(crate) finalizers: Vec<String>,
    labels: std::collections::BTreeMap<String, String>,
}

pub(crate) fn meta(json: &str) -> Meta {
    #[derive(Deserialize)]
    struct Object {
        #[serde(default)]
        metadata: Meta,
    }
    serde_json::from_str::<Object>(json).map(|o| o.metadata).unwrap_or_default()
}

/// Why a reconcile failed.
enum Failure {
    /// The plugin's call failed. `seen` is the resourceVersion of the object it was handed; none
    /// for a released object, which is not cached any more (and so cannot be quarantined).
    Call { error: CallError, seen: Option<String> },
    /// Adding or removing the finalizer failed.
    Finalizer(RequestError),
    /// Handing the object over to another shard (removing its labels) failed.
    Handover(RequestError),
}

impl Controller {
    /// Reconciles `key` with the current plugin version and records the outcome.
    pub(super) async fn process(&self, version: &Version, key: &ObjectKey) -> Outcome {
        let started = Instant::now();
        self.metrics.active_workers.inc();
        let result = self.reconcile_key(version, key).await;
        self.metrics.active_workers.dec();
        self.metrics.reconcile_time.observe(started.elapsed().as_secs_f64());
        // A call that ends without a fault breaks the key's streak of faults; a failure before
        // the call (the finalizer write) or before the object was seen (instantiation) does not.
        let subject = Subject::Primary(key.clone());
        let outcome = match result {
            Ok(action) => {
                self.quarantine.succeeded(&subject);
                version.tally.record(key, false);
                match action {
                    Action::Done => Outcome::Success,
                    Action::RequeueAfter(after) => Outcome::RequeueAfter(after),
                }
            }
            Err(failure) => {
                self.report(version, key, &failure);
                // Only the plugin's own failures say how this version does: a conflict is
                // another actor's doing, an outage the infrastructure's, a finalizer write the
                // host's.
                if let Failure::Call { error, .. } = &failure {
                    version.tally.record_failure(key, error);
                }
                match failure {
                    Failure::Call { error: CallError::Fault(fault), seen: Some(seen) } if is_object_fault(&fault) => {
                        match self.quarantine.fault(&subject, &seen) {
                            Some(entered) => {
                                self.report_quarantine(version, key, &fault, entered);
                                Outcome::Quarantined
                            }
                            None => Outcome::Error,
                        }
                    }
                    Failure::Call { error: CallError::Plugin { .. }, .. } => {
                        self.quarantine.succeeded(&subject);
                        Outcome::Error
                    }
                    _ => Outcome::Error,
                }
            }
        };
        match outcome {
            Outcome::Success => self.metrics.count_success(),
            Outcome::RequeueAfter(_) => self.metrics.count_requeue_after(),
            Outcome::Error | Outcome::Quarantined => self.metrics.count_error(),
        }
        outcome
    }

    /// Whether `key` is quarantined at the resourceVersion its object has now (a changed object
    /// is released).
    pub(super) fn held(&self, version: &Version, key: &ObjectKey) -> bool {
        let current = || version.primary.get(&version.manifest.primary, key).map(|json| meta(&json).resource_version.unwrap_or_default());
        self.quarantine.holds(&Subject::Primary(key.clone()), current)
    }

    async fn reconcile_key(&self, version: &Version, key: &ObjectKey) -> Result<Action, Failure> {
        let manifest = &version.manifest;
        // From the primary watch itself: the store whose event enqueued this key is never
        // behind that event (another watch of the same kind may be).
        let Some(mut object) = version.primary.get(&manifest.primary, key) else {
            return self.release(version, key).await;
        };
        let meta = meta(&object);
        // Sharded: a key can outlive the object's move (a delayed requeue, a retry); an object
        // to be drained is handed over now that no reconcile of it runs here.
        if let Some(shard) = &self.shard {
            match shard.placement(|label| meta.labels.get(label).map(String::as_str)) {
                Placement::Mine => {}
                Placement::Elsewhere => return Ok(Action::Done),
                Placement::Draining => {
                    shard.hand_over(&self.name, &manifest.primary, key, meta.resource_version.as_deref()).await.map_err(Failure::Handover)?;
                    return Ok(Action::Done);
                }
            }
        }
        // Matching again: no longer released.
        self.released.lock().remove(key);
        // What the plugin is handed, for the quarantine: this state, or the one the finalizer
        // write below makes.
        let mut seen = meta.resource_version.clone().unwrap_or_default();
        let retries = self.queue.num_requeues(key);
        let deleting = meta.deletion_timestamp.is_some();
        let ours = |f: &String| Some(f) == manifest.finalizer.as_ref() || version.previous_finalizers.contains(f);
        if meta.finalizers.iter().any(ours) || manifest.finalizer.is_some() {
            if deleting {
                if !meta.finalizers.iter().any(ours) {
                    return Ok(Action::Done);
                }
                let request = Request { key: key.clone(), object, retries };
                return match version.runner.finalize(request).await.map_err(|error| Failure::Call { error, seen: Some(seen) })? {
                    Action::Done => {
                        let rest = meta.finalizers.iter().filter(|f| !ours(f)).cloned().collect();
                        self.set_finalizers(version, key, &meta, rest).await.map(|_| Action::Done)
                    }
                    requeue => Ok(requeue),
                };
            }
            // Exactly the current finalizer: add it, and take over names earlier versions used.
            let mut wanted: Vec<String> = meta.finalizers.iter().filter(|f| !version.previous_finalizers.contains(f)).cloned().collect();
            if let Some(finalizer) = &manifest.finalizer
                && !wanted.contains(finalizer)
            {
                wanted.push(finalizer.clone());
            }
            if wanted != meta.finalizers {
                object = self.set_finalizers(version, key, &meta, wanted).await?;
                seen = self::meta(&object).resource_version.unwrap_or_default();
            }
        } else if deleting {
            return Ok(Action::Done);
        }
        let request = Request { key: key.clone(), object, retries };
        let result = match self.current_shadow() {
            None => version.runner.reconcile(request).await,
            // Journaled for the candidate to replay.
            Some(shadow) => {
                let journal = Journal::bounded(version.runner.services().clone(), shadow.trace_bytes());
                let result = version.runner.reconcile_with(request.clone(), journal.services()).await;
                shadow.offer(Trace { request, live: journal.entries(), result: result.clone() });
                result
            }
        };
        result.map_err(|error| Failure::Call { error, seen: Some(seen) })
    }

    /// A key whose primary is not in the cache: deleted (nothing to do), or released — it
    /// stopped matching the selector — and the plugin is told once.
    async fn release(&self, version: &Version, key: &ObjectKey) -> Result<Action, Failure> {
        let Some(last) = self.released.lock().get(key).cloned() else {
            return Ok(Action::Done);
        };
        let request = Request { key: key.clone(), object: last.clone(), retries: self.queue.num_requeues(key) };
        let action = version.runner.released(request).await.map_err(|error| Failure::Call { error, seen: None })?;
        if !matches!(action, Some(Action::RequeueAfter(_))) {
            self.drop_finalizer(version, key, &last).await?;
            let mut released = self.released.lock();
            // Unless it was released again (a newer state) meanwhile.
            if released.get(key).is_some_and(|s| std::sync::Arc::ptr_eq(s, &last)) {
                released.remove(key);
            }
        }
        Ok(action.unwrap_or(Action::Done))
    }

    /// Takes the host's finalizer off a primary that stopped matching the selector: the plugin is
    /// no longer responsible for it, and no later event of it reaches this plugin — its deletion
    /// would otherwise wait forever. Read live (the object is outside every view of the plugin),
    /// and patched on the condition that it has not changed since (a conflict is retried).
    async fn drop_finalizer(&self, version: &Version, key: &ObjectKey, last: &str) -> Result<(), Failure> {
        let ours = |f: &String| Some(f) == version.manifest.finalizer.as_ref() || version.previous_finalizers.contains(f);
        if !meta(last).finalizers.iter().any(ours) {
            return Ok(());
        }
        let current = self.api.get(&version.manifest.primary, key.namespace(), key.name()).await.map_err(Failure::Finalizer)?;
        let Some(current) = current else { return Ok(()) };
        let meta = meta(&current);
        if !meta.finalizers.iter().any(ours) {
            return Ok(());
        }
        let rest = meta.finalizers.iter().filter(|f| !ours(f)).cloned().collect();
        self.set_finalizers(version, key, &meta, rest).await.map(drop)
    }

    /// Replaces the primary's finalizers, as the plugin, on the condition that it has not
    /// changed since it was read (a stale resourceVersion is a conflict, retried without an
    /// Event).
    async fn set_finalizers(&self, version: &Version, key: &ObjectKey, meta: &Meta, finalizers: Vec<String>) -> Result<std::sync::Arc<str>, Failure> {
        let body = serde_json::json!({
            "metadata": { "finalizers": finalizers, "resourceVersion": meta.resource_version },
        });
        let request = WriteRequest {
            resource: version.manifest.primary.clone(),
            namespace: key.namespace().map(Into::into),
            name: key.name().into(),
            op: WriteOp::Patch { patch_type: PatchKind::Merge, body },
        };
        self.api.write(request).await.map(Option::unwrap_or_default).map_err(Failure::Finalizer)
    }

    /// Logs a failure and records a Warning Event on the object, except for conflicts: another
    /// actor changed the object first, which is normal and simply retried.
    fn report(&self, version: &Version, key: &ObjectKey, failure: &Failure) {
        let (reason, note, conflict) = match failure {
            Failure::Call { error: CallError::Plugin { code, message }, .. } => {
                ("ReconcileFailed", format!("{}: {message}", code_name(*code)), *code == GuestErrorCode::Conflict)
            }
            Failure::Call { error: CallError::Fault(fault), .. } => ("PluginFault", format!("the plugin {fault}"), false),
            Failure::Finalizer(e) => ("FinalizerUpdateFailed", e.to_string(), e.status() == Some(409)),
            Failure::Handover(e) => ("HandoverFailed", e.to_string(), e.status() == Some(409)),
        };
        if conflict {
            tracing::debug!(plugin = %self.name, key = %key, "conflict, retrying: {note}");
            return;
        }
        self.warn(version, key, reason, note);
    }

    /// Logs and records (once, as it enters) that `key` is quarantined, and how to release it.
    fn report_quarantine(&self, version: &Version, key: &ObjectKey, fault: &Fault, entered: Entered) {
        let name = &self.name;
        let note = format!(
            "{name} faulted {} times in a row on this object (last: the plugin {fault}); it is not reconciled by {name} again until the object changes (any update) or a new version of {name} is loaded",
            entered.faults
        );
        self.warn(version, key, "Quarantined", note);
    }

    /// Logs a warning and records it as a Warning Event on the object.
    fn warn(&self, version: &Version, key: &ObjectKey, reason: &str, note: String) {
        tracing::warn!(plugin = %self.name, key = %key, reason, "{}", note.replace('\n', " "));
        let uid = version.primary.get(&version.manifest.primary, key).and_then(|json| uid_of(&json));
        self.events.publish(ObjectEvent {
            regarding: version.manifest.primary.clone(),
            key: key.clone(),
            uid,
            warning: true,
            reason: reason.into(),
            action: "Reconcile".into(),
            note,
        });
    }
}
