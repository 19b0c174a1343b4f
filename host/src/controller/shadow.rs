//! A candidate version run in the shadow of the live one. Each live reconcile is journaled
//! ([`crate::runtime::journal`]) and handed here as a [`Trace`]; the candidate reconciles the
//! same key with the same object, and its reads are answered as the live version's were (the
//! cache may have moved on since — not least by the live version's own writes). Its writes are
//! never stored: one equal to a live write gets that write's answer; any other goes to the API
//! server as a dry run (`dryRun=All`: real admission and validation). Its Events are kept, not
//! sent. The host then compares what the two did — the calls (server-set fields aside), the
//! Events and the result — and tallies per key whether they agree, keeping the first diffs.
//!
//! The shadow never slows the live version: it has its own instances, its own rate limit for
//! dry runs, one worker, and a backlog of at most [`BACKLOG`] keys (the newest trace per key)
//! and at most the candidate's memory limit in bytes: the candidate reserves two instances of
//! the memory budget and its one worker uses one, so the journals it waits on are held to the
//! other. A live call journaled past [`Shadow::trace_bytes`] (an eighth of that) is skipped;
//! while the live version has work, the shadow takes at most [`SHARE`] of the time (it pauses
//! after each call for the rest). Its faults and errors are counted, never retried, and never
//! reach the live queue.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Version;
use crate::case;
use crate::client::{RequestError, WriteOp, WriteRequest};
use crate::events::ObjectEvent;
use crate::excerpt::excerpt;
use crate::metrics::Metrics;
use crate::resource::{Gvk, ObjectKey, Scope};
use crate::runtime::host::{Alone, Api, CacheReader, Clock, EventSink, Services};
use crate::runtime::journal::{Entries, Written};
use crate::runtime::{Action, CallError, Request};
use crate::selector::LabelSelector;

/// Keys waiting for the shadow at most; traces beyond are skipped.
pub const BACKLOG: usize = 1_000;
/// The share of the backlog's bytes one trace may take.
const TRACE_SHARE: usize = 8;
/// The share of time the shadow may take while the live version has work.
pub const SHARE: f64 = 0.1;
/// Diffs kept for the status, with their keys.
const DIFFS_KEPT: usize = 5;
/// Longest diff kept.
const DIFF_BYTES: usize = 4096;

/// One live reconcile: its input, what it did, and its result.
pub struct Trace {
    pub request: Request,
    pub live: Entries,
    pub result: Result<Action, CallError>,
}

/// How a shadow reconcile compared with the live one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Agreement {
    Same,
    Differs,
    /// The candidate returned an error value where the live version did not.
    Error,
    /// The candidate trapped, ran past its deadline or its memory.
    Fault,
    /// Not replayed: the backlog was full, or a newer trace of the key replaced it.
    Skipped,
}

impl Agreement {
    pub const ALL: [Agreement; 5] = [Agreement::Same, Agreement::Differs, Agreement::Error, Agreement::Fault, Agreement::Skipped];

    pub fn label(self) -> &'static str {
        match self {
            Agreement::Same => "same",
            Agreement::Differs => "differs",
            Agreement::Error => "error",
            Agreement::Fault => "fault",
            Agreement::Skipped => "skipped",
        }
    }
}

/// What the shadow found so far.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The candidate's version and digest.
    pub version: String,
    pub digest: String,
    /// Reconciles by how they compared.
    pub counts: BTreeMap<Agreement, u64>,
    /// Each key's last comparison.
    pub keys: BTreeMap<ObjectKey, Agreement>,
    /// The first keys that did not agree, with what differed.
    pub diffs: Vec<(ObjectKey, String)>,
}

impl Report {
    pub fn count(&self, agreement: Agreement) -> u64 {
        self.counts.get(&agreement).copied().unwrap_or(0)
    }

    /// The counts for people: `4 same, 1 differs, 0 error, 0 fault, 0 skipped`.
    pub fn summary(&self) -> String {
        Agreement::ALL.iter().map(|a| format!("{} {}", self.count(*a), a.label())).collect::<Vec<_>>().join(", ")
    }

    /// The counts as one field: `same:4,differs:1,error:0,fault:0,skipped:0`.
    pub fn counts_field(&self) -> String {
        Agreement::ALL.iter().map(|a| format!("{}:{}", a.label(), self.count(*a))).collect::<Vec<_>>().join(",")
    }

    /// Whether the candidate agreed at least `n` times and never did otherwise (skips aside).
    pub fn agreed(&self, n: u64) -> bool {
        n > 0 && self.count(Agreement::Same) >= n && [Agreement::Differs, Agreement::Error, Agreement::Fault].iter().all(|a| self.count(*a) == 0)
    }
}

/// A candidate version and its worker.
pub struct Shadow {
    plugin: String,
    candidate: Arc<Version>,
    /// The candidate's dry-run client.
    api: Arc<dyn Api>,
    backlog: Mutex<Backlog>,
    /// The most bytes of journals waiting at once (the candidate's memory limit).
    backlog_bytes: usize,
    wake: Notify,
    report: Mutex<Report>,
    counters: HashMap<Agreement, Counter>,
    stop: CancellationToken,
}

#[derive(Default)]
struct Backlog {
    order: VecDeque<ObjectKey>,
    traces: HashMap<ObjectKey, Trace>,
    /// What the waiting traces' journals hold.
    bytes: usize,
}

impl Shadow {
    /// Starts the worker of `candidate` (built inert: its watches enqueue nothing), whose writes
    /// go through `api` (a dry-run client). `live_busy` says whether the live version has work.
    pub fn start(
        plugin: &str,
        candidate: Arc<Version>,
        api: Arc<dyn Api>,
        metrics: &Metrics,
        live_busy: impl Fn() -> bool + Send + Sync + 'static,
        stop: CancellationToken,
    ) -> Arc<Self> {
        let report = Report { version: candidate.manifest.version.clone(), digest: candidate.plugin.digest.to_string(), ..Report::default() };
        let backlog_bytes = usize::try_from(candidate.runner.limits().memory_bytes).unwrap_or(usize::MAX);
        let shadow = Arc::new(Shadow {
            plugin: plugin.into(),
            candidate,
            api,
            backlog: Mutex::default(),
            backlog_bytes,
            wake: Notify::new(),
            report: Mutex::new(report),
            counters: Agreement::ALL.iter().map(|a| (*a, metrics.shadow(plugin, a.label()))).collect(),
            stop,
        });
        tokio::spawn(shadow.clone().run(live_busy));
        shadow
    }

    /// The most a live call's journal may hold to be replayed.
    pub fn trace_bytes(&self) -> usize {
        self.backlog_bytes / TRACE_SHARE
    }

    pub fn candidate(&self) -> &Arc<Version> {
        &self.candidate
    }

    pub fn report(&self) -> Report {
        self.report.lock().clone()
    }

    /// Stops the worker; a call running finishes first.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Hands over a live reconcile; never waits. A full backlog skips it; an older trace of the
    /// same key still waiting is replaced (and counted skipped).
    pub fn offer(&self, trace: Trace) {
        let key = trace.request.key.clone();
        let bytes = held_bytes(&trace);
        let mut backlog = self.backlog.lock();
        let waiting = backlog.traces.get(&key).map(held_bytes);
        // Over the bytes: a journal that overflowed, or one the backlog has no room for.
        if trace.live.overflowed || backlog.bytes - waiting.unwrap_or(0) + bytes > self.backlog_bytes {
            drop(backlog);
            self.count(Agreement::Skipped);
            return;
        }
        if let Some(before) = waiting {
            backlog.bytes = backlog.bytes - before + bytes;
            backlog.traces.insert(key, trace);
            drop(backlog);
            self.count(Agreement::Skipped);
        } else if backlog.order.len() >= BACKLOG {
            drop(backlog);
            self.count(Agreement::Skipped);
        } else {
            backlog.bytes += bytes;
            backlog.traces.insert(key.clone(), trace);
            backlog.order.push_back(key);
            drop(backlog);
            self.wake.notify_one();
        }
    }

    fn next(&self) -> Option<Trace> {
        let mut backlog = self.backlog.lock();
        let key = backlog.order.pop_front()?;
        let trace = backlog.traces.remove(&key)?;
        backlog.bytes -= held_bytes(&trace);
        Some(trace)
    }

    fn count(&self, agreement: Agreement) {
        self.counters[&agreement].inc();
        *self.report.lock().counts.entry(agreement).or_default() += 1;
    }

    async fn run(self: Arc<Self>, live_busy: impl Fn() -> bool) {
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = self.wake.notified() => {}
            }
            while let Some(trace) = self.next() {
                let started = Instant::now();
                self.replay(trace).await;
                // The rest of the time is the live version's while it has work.
                let pause = started.elapsed().mul_f64(1.0 / SHARE - 1.0);
                if live_busy() {
                    tokio::select! {
                        _ = self.stop.cancelled() => return,
                        _ = tokio::time::sleep(pause) => {}
                    }
                }
                if self.stop.is_cancelled() {
                    return;
                }
            }
        }
    }

    async fn replay(&self, trace: Trace) {
        let replay = Arc::new(Replay {
            live: trace.live,
            cache: self.candidate.runner.services().cache.clone(),
            api: self.api.clone(),
            used: Mutex::default(),
            own: Mutex::default(),
        });
        let key = trace.request.key.clone();
        let result = self.candidate.runner.reconcile_with(trace.request, replay.services()).await;
        let own = replay.own.lock().clone();
        let (agreement, diff) = compare(&replay.live, &trace.result, &own, &result);
        if agreement != Agreement::Same {
            tracing::info!(plugin = %self.plugin, key = %key, candidate = %self.candidate.manifest.version, "shadow {}: {}", agreement.label(), diff.as_deref().unwrap_or_default().replace('\n', " | "));
        }
        self.count(agreement);
        let mut report = self.report.lock();
        report.keys.insert(key.clone(), agreement);
        if let Some(diff) = diff
            && report.diffs.len() < DIFFS_KEPT
            && !report.diffs.iter().any(|(k, _)| *k == key)
        {
            report.diffs.push((key, excerpt(&diff, DIFF_BYTES).into_owned()));
        }
    }
}

impl Drop for Shadow {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What a waiting trace holds: its journal and the object it was handed.
fn held_bytes(trace: &Trace) -> usize {
    trace.live.bytes + trace.request.object.len()
}

/// How the candidate's call compared with the live one, and what differed.
fn compare(live: &Entries, live_result: &Result<Action, CallError>, own: &Entries, result: &Result<Action, CallError>) -> (Agreement, Option<String>) {
    if let Err(CallError::Fault(fault)) = result {
        return (Agreement::Fault, Some(format!("the candidate {fault}")));
    }
    let spell = |entries: &Entries, result: &Result<Action, CallError>, calls: fn(&WriteRequest) -> Value| {
        json!({
            "calls": entries.writes.iter().map(|w| calls(&w.request)).collect::<Vec<_>>(),
            "events": entries.events.iter().map(case::event).collect::<Vec<_>>(),
            // An error is compared by its code: messages may word the same failure differently.
            "result": match result {
                Err(CallError::Plugin { code, .. }) => json!({"error": crate::runtime::code_name(*code)}),
                other => case::result(other),
            },
        })
    };
    if spell(live, live_result, comparable) == spell(own, result, comparable) {
        return (Agreement::Same, None);
    }
    // What is shown (the log, the status ConfigMap) is spelled redacted.
    let (theirs, ours) = (spell(live, live_result, shown), spell(own, result, shown));
    let mut diff = case::diff_labelled("live and candidate", ("live", &theirs), ("candidate", &ours))
        .unwrap_or_else(|| "the calls differ in Secret values, which are not shown\n".to_string());
    // What the dry runs of calls only the candidate made said.
    for written in own.writes.iter().filter(|w| w.result.is_err()) {
        diff.push_str(&format!(
            "dry run of {} {}: {}\n",
            written.request.resource.kind,
            written.request.name,
            written.result.as_ref().err().map(String::as_str).unwrap_or_default()
        ));
    }
    match result {
        Err(CallError::Plugin { .. }) if live_result.is_ok() => (Agreement::Error, Some(diff)),
        _ => (Agreement::Differs, Some(diff)),
    }
}

/// A write as compared: its case spelling without the fields the API server sets.
fn comparable(request: &WriteRequest) -> Value {
    without_server_fields(case::call(request))
}

/// A write as a diff shows it: compared, and redacted.
fn shown(request: &WriteRequest) -> Value {
    without_server_fields(case::redacted_call(request))
}

fn without_server_fields(mut call: Value) -> Value {
    if let Some(metadata) =
        call.as_object_mut().and_then(|c| c.values_mut().next()).and_then(|object| object.get_mut("metadata")).and_then(Value::as_object_mut)
    {
        for field in ["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink"] {
            metadata.remove(field);
        }
    }
    call
}

/// The services of one shadow call: reads answered as the live call's were, writes compared
/// with the live call's and otherwise dry-run, Events kept.
struct Replay {
    live: Entries,
    cache: Arc<dyn CacheReader>,
    api: Arc<dyn Api>,
    /// Live writes already matched by one of the candidate's.
    used: Mutex<Vec<usize>>,
    own: Mutex<Entries>,
}

impl Replay {
    fn services(self: &Arc<Self>) -> Services {
        // A candidate reaches no other cluster: its writes there could not be dry runs compared here.
        Services { cache: self.clone(), api: self.clone(), events: self.clone(), clock: Clock::System, fleet: Arc::new(Alone) }
    }

    /// The answer of an equal live write not matched yet, if it succeeded.
    fn matching(&self, request: &WriteRequest) -> Option<Option<Arc<str>>> {
        let wanted = comparable(request);
        let mut used = self.used.lock();
        let (index, written) = self.live.writes.iter().enumerate().find(|(i, w)| !used.contains(i) && w.result.is_ok() && comparable(&w.request) == wanted)?;
        used.push(index);
        written.result.clone().ok()
    }

    /// The request as a dry run can judge it after the live version wrote the same object: no
    /// longer conditional on the version it read, and a create (of what the live version
    /// created) as an update.
    fn after_live(&self, mut request: WriteRequest) -> WriteRequest {
        let same_target = |w: &Written| w.request.resource == request.resource && w.request.namespace == request.namespace && w.request.name == request.name;
        if !self.live.writes.iter().any(same_target) {
            return request;
        }
        request.op = match request.op {
            WriteOp::Create { object, .. } => WriteOp::Update { object, status: false },
            other => other,
        };
        if let WriteOp::Update { object, .. } = &mut request.op
            && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
        {
            metadata.remove("resourceVersion");
        }
        request
    }
}

impl CacheReader for Replay {
    fn scope(&self, resource: &Gvk) -> Option<Scope> {
        self.cache.scope(resource)
    }

    fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<Arc<str>> {
        self.live.get(resource, key).unwrap_or_else(|| self.cache.get(resource, key))
    }

    fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&LabelSelector>, max_bytes: usize) -> Result<Vec<(ObjectKey, Arc<str>)>, usize> {
        let text = selector.map(ToString::to_string);
        self.live.list(resource, namespace, text.as_deref()).unwrap_or_else(|| self.cache.list(resource, namespace, selector, max_bytes))
    }

    fn children(&self, resource: &Gvk, namespace: Option<&str>, owner: &str, orphans: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)> {
        let text = orphans.map(ToString::to_string);
        self.live.children(resource, namespace, owner, text.as_deref()).unwrap_or_else(|| self.cache.children(resource, namespace, owner, orphans))
    }
}

#[async_trait::async_trait]
impl Api for Replay {
    async fn write(&self, request: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
        let result = match self.matching(&request) {
            Some(answer) => Ok(answer),
            None => self.api.write(self.after_live(request.clone())).await,
        };
        let recorded = result.as_ref().map(Clone::clone).map_err(ToString::to_string);
        self.own.lock().writes.push(Written { request, result: recorded });
        result
    }

    async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, RequestError> {
        match self.live.live(resource, &ObjectKey::new(namespace, name)) {
            Some(answer) => Ok(answer),
            None => self.api.get(resource, namespace, name).await,
        }
    }
}

impl EventSink for Replay {
    fn publish(&self, event: ObjectEvent) {
        self.own.lock().events.push(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::client::PatchKind;

    fn apply(replicas: i64, resource_version: &str) -> WriteRequest {
        WriteRequest {
            resource: Gvk::new("apps", "v1", "Deployment"),
            namespace: Some("ns".into()),
            name: "web".into(),
            op: WriteOp::Apply {
                object: json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns", "resourceVersion": resource_version}, "spec": {"replicas": replicas}}),
                force: true,
                status: false,
            },
        }
    }

    struct Unreached;

    #[async_trait::async_trait]
    impl Api for Unreached {
        async fn write(&self, _: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
            unreachable!("the test sends nothing")
        }
        async fn get(&self, _: &Gvk, _: Option<&str>, _: &str) -> Result<Option<String>, RequestError> {
            unreachable!("the test reads nothing")
        }
    }

    fn entries(writes: Vec<WriteRequest>) -> Entries {
        Entries { writes: writes.into_iter().map(|request| Written { request, result: Ok(None) }).collect(), ..Entries::default() }
    }

    #[test]
    fn equal_calls_agree_whatever_the_server_set() {
        let (agreement, diff) = compare(&entries(vec![apply(3, "1")]), &Ok(Action::Done), &entries(vec![apply(3, "7")]), &Ok(Action::Done));
        assert_eq!((agreement, diff), (Agreement::Same, None));
    }

    #[test]
    fn another_replica_count_differs_with_a_diff_naming_it() {
        let (agreement, diff) = compare(&entries(vec![apply(3, "1")]), &Ok(Action::Done), &entries(vec![apply(2, "1")]), &Ok(Action::Done));
        assert_eq!(agreement, Agreement::Differs);
        let diff = diff.unwrap();
        let line = |sign: char, text: &str| diff.lines().any(|l| l.strip_prefix(sign).is_some_and(|rest| rest.trim() == text));
        assert!(line('-', "replicas: 3") && line('+', "replicas: 2"), "{diff}");
    }

    #[test]
    fn a_secret_written_otherwise_differs_without_its_values_in_the_diff() {
        let secret = |value: &str| WriteRequest {
            resource: Gvk::new("", "v1", "Secret"),
            namespace: Some("ns".into()),
            name: "s".into(),
            op: WriteOp::Apply {
                object: json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": value}}),
                force: true,
                status: false,
            },
        };
        let (agreement, diff) = compare(&entries(vec![secret("djE=")]), &Ok(Action::Done), &entries(vec![secret("djI=")]), &Ok(Action::Done));
        assert_eq!(agreement, Agreement::Differs);
        let diff = diff.unwrap();
        assert!(!diff.contains("djE=") && !diff.contains("djI="), "{diff}");
        assert!(diff.contains("Secret values"), "{diff}");
        // A JSON patch of the Secret too.
        let patch = |value: &str| WriteRequest {
            op: WriteOp::Patch { patch_type: PatchKind::Json, body: json!([{"op": "replace", "path": "/data/k", "value": value}]) },
            ..secret("")
        };
        let (_, diff) = compare(&entries(vec![patch("djE=")]), &Ok(Action::Done), &entries(vec![patch("djI="), patch("djM=")]), &Ok(Action::Done));
        let diff = diff.unwrap();
        assert!(["djE=", "djI=", "djM="].iter().all(|v| !diff.contains(v)), "{diff}");
    }

    #[test]
    fn an_error_where_the_live_version_succeeded_is_an_error_and_equal_errors_agree() {
        let failed = Err(CallError::Plugin { code: crate::runtime::GuestErrorCode::Conflict, message: "a".into() });
        let again = Err(CallError::Plugin { code: crate::runtime::GuestErrorCode::Conflict, message: "worded otherwise".into() });
        assert_eq!(compare(&entries(vec![]), &Ok(Action::Done), &entries(vec![]), &failed).0, Agreement::Error);
        assert_eq!(compare(&entries(vec![]), &failed, &entries(vec![]), &again).0, Agreement::Same);
        assert_eq!(compare(&entries(vec![]), &Ok(Action::Done), &entries(vec![]), &Ok(Action::RequeueAfter(Duration::from_secs(5)))).0, Agreement::Differs);
    }

    #[test]
    fn an_update_after_the_live_write_is_judged_unconditionally() {
        let object = json!({"metadata": {"name": "web", "namespace": "ns", "resourceVersion": "5"}});
        let update = |object: Value| WriteRequest { op: WriteOp::Update { object, status: false }, ..apply(1, "1") };
        let patch = WriteRequest { op: WriteOp::Patch { patch_type: PatchKind::Merge, body: json!({}) }, ..apply(1, "1") };
        let replay = Replay {
            live: entries(vec![patch]),
            cache: Arc::new(crate::informer::CacheView::default()),
            api: Arc::new(Unreached),
            used: Mutex::default(),
            own: Mutex::default(),
        };
        let WriteOp::Update { object: judged, .. } = replay.after_live(update(object.clone())).op else { panic!("still an update") };
        assert!(judged["metadata"].get("resourceVersion").is_none(), "{judged}");
        let elsewhere = WriteRequest { name: "other".into(), ..update(object) };
        let WriteOp::Update { object: kept, .. } = replay.after_live(elsewhere).op else { panic!() };
        assert_eq!(kept["metadata"]["resourceVersion"], "5", "an object the live version did not write keeps its precondition");
    }
}
