//! Kubernetes Events (events.k8s.io/v1) about objects. Every plugin has its own
//! [`EventRecorder`] (and the host one for itself): its own bounded queue, its own sender task
//! and client (so Events are recorded as the plugin's identity), its own spam filter per object
//! (client-go's: a burst of 25, then one per 5 minutes), and a token of its identity's write
//! rate limit per Event sent. So one plugin's flood fills only its own queue and spends only its
//! own budget, and a hung API server holds only the sender it hangs (every request is bounded
//! by the request timeout). kube's `Recorder` aggregates exact repeats (same object, reason and
//! note) into an event series. Events are writes: like the client's, they are fenced by
//! leadership — a host that stopped leading drops what it still holds rather than send it late —
//! and a plugin's recorder is fenced to the namespaces the host serves, like its writes: an Event
//! in another namespace is dropped (and counted). An Event about a cluster-scoped object is
//! recorded in `default` (kube's and client-go's convention), so it is fenced as one there.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bucket::TokenBucket;
use crate::client::SharedBucket;
use crate::excerpt::excerpt;
use crate::leader::Leadership;
use crate::resource::{Gvk, ObjectKey};

/// Events one recorder holds waiting to be sent; beyond this, new ones are dropped (and counted).
pub const QUEUE: usize = 256;
const SPAM_BURST: u32 = 25;
const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Spam-filter buckets kept per recorder before refilled ones are forgotten (and all of them,
/// past four times that: a flood of distinct objects only resets its own filter).
const SPAM_BUCKETS: usize = 4096;
/// Series caches kept (one per note) before they are all forgotten.
const MAX_SERIES: usize = 256;
/// The longest note the API server accepts, in bytes (events.k8s.io/v1 `note`).
pub const MAX_NOTE: usize = 1024;

/// One Event about an object, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectEvent {
    pub regarding: Gvk,
    pub key: ObjectKey,
    /// The object's uid when known, so `kubectl describe` finds the event.
    pub uid: Option<String>,
    pub warning: bool,
    pub reason: String,
    pub action: String,
    pub note: String,
}

/// The namespace kube's `Recorder` records Events about cluster-scoped objects in.
const CLUSTER_EVENTS_NAMESPACE: &str = "default";

/// Hands Events to one reporter's sender task. Cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<ObjectEvent>,
    dropped: Counter,
    /// Namespaces its Events may be recorded in; empty for all.
    namespaces: Arc<[String]>,
    /// Whether an Event outside them was logged already (once per recorder, then counted only).
    fenced_logged: Arc<AtomicBool>,
}

/// Who reports: `kubewasm/<plugin>` (or `kubewasm` for the host), on this host instance.
#[derive(Debug, Clone)]
pub struct Reporting {
    pub controller: String,
    pub instance: String,
}

impl EventRecorder {
    /// Queues an Event without waiting; a full queue drops it (and counts it). A note longer than
    /// the API server accepts is cut to fit, ending in `...`.
    pub fn publish(&self, mut event: ObjectEvent) {
        let namespace = event.key.namespace().unwrap_or(CLUSTER_EVENTS_NAMESPACE);
        if !self.namespaces.is_empty() && !self.namespaces.iter().any(|ns| ns == namespace) {
            self.dropped.inc();
            if !self.fenced_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    object = %event.key,
                    reason = %event.reason,
                    "dropped an Event in namespace {namespace}, which this host does not serve (its --namespace list); further ones are only counted"
                );
            }
            return;
        }
        if let Cow::Owned(cut) = excerpt(&event.note, MAX_NOTE) {
            event.note = cut;
        }
        if self.queue.try_send(event).is_err() {
            self.dropped.inc();
        }
    }

    /// Starts the sender task of one reporter: sends as `client`'s identity while `leadership`
    /// holds, one Event per token of `budget`, each request bounded by `timeout`; `dropped`
    /// counts what is lost to a full queue, the spam filter or lost leadership. On `shutdown` it
    /// sends what is queued, then ends.
    pub fn start(
        client: kube::Client,
        reporting: Reporting,
        budget: SharedBucket,
        leadership: Leadership,
        dropped: Counter,
        timeout: Duration,
        shutdown: CancellationToken,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (queue, rx) = mpsc::channel(QUEUE);
        let sender = Sender { client, reporting, budget, leadership, timeout, series: HashMap::new(), spam: HashMap::new(), dropped: dropped.clone() };
        let task = tokio::spawn(sender.run(rx, shutdown));
        (EventRecorder { queue, dropped, namespaces: Arc::new([]), fenced_logged: Arc::default() }, task)
    }

    /// The same recorder, fenced to `namespaces` (empty: all): a plugin's, whose Events are
    /// writes as any other.
    pub fn serving(self, namespaces: Arc<[String]>) -> Self {
        EventRecorder { namespaces, ..self }
    }
}

struct Sender {
    client: kube::Client,
    reporting: Reporting,
    budget: SharedBucket,
    leadership: Leadership,
    timeout: Duration,
    /// One recorder (and its series cache) per note. kube's `Recorder` aggregates by object,
    /// reason and action but not by note: a repeat with another note would only raise the count
    /// of the first Event and keep its (now wrong) note. Keyed by note too, only exact repeats
    /// aggregate; a new note is a new Event.
    series: HashMap<String, Recorder>,
    /// Per object: kind and key.
    spam: HashMap<(Gvk, ObjectKey), TokenBucket>,
    dropped: Counter,
}

impl Sender {
    async fn run(mut self, mut rx: mpsc::Receiver<ObjectEvent>, shutdown: CancellationToken) {
        loop {
            let event = tokio::select! {
                event = rx.recv() => event,
                _ = shutdown.cancelled() => {
                    // Graceful: send what is already queued, then stop.
                    rx.close();
                    while let Ok(event) = rx.try_recv() {
                        self.send(event).await;
                    }
                    return;
                }
            };
            match event {
                Some(event) => self.send(event).await,
                None => return,
            }
        }
    }

    fn allowed(&mut self, event: &ObjectEvent) -> bool {
        let now = Instant::now();
        if self.spam.len() >= SPAM_BUCKETS {
            // Forget buckets that have refilled: they would allow a burst anyway.
            self.spam.retain(|_, bucket| !bucket.is_full(now));
            if self.spam.len() >= 4 * SPAM_BUCKETS {
                self.spam.clear();
            }
        }
        let key = (event.regarding.clone(), event.key.clone());
        let bucket = self.spam.entry(key).or_insert_with(|| TokenBucket::new(1.0 / SPAM_REFILL.as_secs_f64(), SPAM_BURST));
        bucket.try_take(now)
    }

    async fn send(&mut self, event: ObjectEvent) {
        if !self.allowed(&event) {
            self.dropped.inc();
            return;
        }
        // One token of the identity's write budget per Event: waits behind its writes.
        let wait = self.budget.lock().reserve(Instant::now());
        tokio::time::sleep(wait).await;
        if self.series.len() >= MAX_SERIES {
            // Forgetting series only means the next repeat starts a new Event.
            self.series.clear();
        }
        let reporter = Reporter { controller: self.reporting.controller.clone(), instance: Some(self.reporting.instance.clone()) };
        let recorder = self.series.entry(event.note.clone()).or_insert_with(|| Recorder::new(self.client.clone(), reporter));
        let reference = ObjectReference {
            api_version: Some(event.regarding.api_version()),
            kind: Some(event.regarding.kind.clone()),
            namespace: event.key.namespace().map(Into::into),
            name: Some(event.key.name().into()),
            uid: event.uid.clone(),
            ..Default::default()
        };
        let published = Event {
            type_: if event.warning { EventType::Warning } else { EventType::Normal },
            reason: event.reason.clone(),
            note: Some(event.note.clone()),
            action: event.action.clone(),
            secondary: None,
        };
        // Checked after the budget's wait, right before sending; a term that ends while the
        // request is in flight cancels it.
        if !self.leadership.is_leader() {
            self.dropped.inc();
            return;
        }
        let result = tokio::select! {
            biased;
            _ = self.leadership.lost() => {
                self.dropped.inc();
                return;
            }
            result = tokio::time::timeout(self.timeout, recorder.publish(&published, &reference)) => result,
        };
        let failure = match result {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {:?}", self.timeout),
        };
        tracing::warn!(reporter = %self.reporting.controller, object = %event.key, reason = %event.reason, "could not record an event: {failure}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_too_long_for_the_api_server_is_cut_to_fit_at_a_character() {
        let (queue, mut sent) = mpsc::channel(2);
        let recorder = EventRecorder { queue, dropped: Counter::default(), namespaces: Arc::new([]), fenced_logged: Arc::default() };
        let event = |note: String| ObjectEvent {
            regarding: Gvk::new("", "v1", "ConfigMap"),
            key: ObjectKey::new(Some("ns"), "cm"),
            uid: None,
            warning: true,
            reason: "Test".into(),
            action: "Test".into(),
            note,
        };
        recorder.publish(event("é".repeat(MAX_NOTE)));
        let cut = sent.try_recv().unwrap().note;
        assert!(cut.len() <= MAX_NOTE && cut.ends_with("..."), "{} bytes: {cut:?}", cut.len());
        assert_eq!(cut.trim_end_matches('.'), "é".repeat((MAX_NOTE - 3) / 2));
        let fits = "x".repeat(MAX_NOTE);
        recorder.publish(event(fits.clone()));
        assert_eq!(sent.try_recv().unwrap().note, fits);
    }

    #[test]
    fn a_plugins_events_stay_in_the_namespaces_served() {
        let (queue, mut sent) = mpsc::channel(8);
        let dropped = Counter::default();
        let recorder =
            EventRecorder { queue, dropped: dropped.clone(), namespaces: Arc::new([]), fenced_logged: Arc::default() }.serving(["team-a".to_string()].into());
        let about = |namespace: Option<&str>, kind: &str| ObjectEvent {
            regarding: Gvk::new("", "v1", kind),
            key: ObjectKey::new(namespace, "x"),
            uid: None,
            warning: false,
            reason: "Test".into(),
            action: "Test".into(),
            note: "n".into(),
        };
        recorder.publish(about(Some("team-a"), "ConfigMap"));
        recorder.publish(about(Some("team-b"), "ConfigMap"));
        // Recorded in `default`, which this host does not serve.
        recorder.publish(about(None, "Node"));
        assert_eq!(sent.try_recv().unwrap().key.namespace(), Some("team-a"));
        assert!(sent.try_recv().is_err());
        assert_eq!(dropped.get(), 2);
        let everywhere = recorder.serving(["team-a".to_string(), "default".to_string()].into());
        everywhere.publish(about(None, "Node"));
        assert!(sent.try_recv().is_ok(), "a host serving default records Events about cluster-scoped objects");
    }
}
