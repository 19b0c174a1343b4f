//! Kubernetes Events (events.k8s.io/v1) from plugins and from the host about plugins: queued
//! without blocking the caller, rate-limited per object and reason (client-go's spam filter:
//! a burst of 25, then one per 5 minutes), and sent by kube's `Recorder`, which aggregates
//! exact repeats (same object, reason and note) into an event series. The reporting controller
//! is `kubewasm/<plugin>`.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::queue::rate_limit::TokenBucket;
use crate::runtime::host::{EventSink, PluginEvent};

/// Events waiting to be sent; beyond this, new ones are dropped (and counted).
const BACKLOG: usize = 4096;
const SPAM_BURST: u32 = 25;
const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Series caches kept (one per plugin and note) before they are all forgotten.
const MAX_RECORDERS: usize = 1024;

/// Hands events to the sender task. Cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<PluginEvent>,
    dropped: Counter,
}

impl EventSink for EventRecorder {
    fn publish(&self, event: PluginEvent) {
        if self.queue.try_send(event).is_err() {
            self.dropped.inc();
        }
    }
}

impl EventRecorder {
    /// Starts the sender task. `instance` names this host in the events (its pod name).
    /// `dropped` counts events lost to a full backlog or the rate limit.
    pub fn start(client: Client, instance: String, dropped: Counter, shutdown: CancellationToken) -> (Self, tokio::task::JoinHandle<()>) {
        let (queue, rx) = mpsc::channel(BACKLOG);
        let sender = Sender { client, instance, recorders: HashMap::new(), spam: HashMap::new(), dropped: dropped.clone() };
        let task = tokio::spawn(sender.run(rx, shutdown));
        (EventRecorder { queue, dropped }, task)
    }
}

struct Sender {
    client: Client,
    instance: String,
    /// One recorder (and its series cache) per reporting plugin and note. kube's `Recorder`
    /// aggregates by object, reason and action but not by note: a repeat with another note
    /// would only raise the count of the first Event and keep its (now wrong) note. Keyed by
    /// note too, only exact repeats aggregate; a new note is a new Event.
    recorders: HashMap<(String, String), Recorder>,
    spam: HashMap<(String, String, String), TokenBucket>,
    dropped: Counter,
}

impl Sender {
    async fn run(mut self, mut rx: mpsc::Receiver<PluginEvent>, shutdown: CancellationToken) {
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

    fn allowed(&mut self, event: &PluginEvent) -> bool {
        let key = (event.plugin.clone(), event.key.to_string(), event.reason.clone());
        let now = tokio::time::Instant::now();
        if self.spam.len() > 10_000 {
            // Forget buckets that have refilled: they would allow a burst anyway.
            self.spam.retain(|_, bucket| !bucket.is_full(now));
        }
        let bucket = self.spam.entry(key).or_insert_with(|| TokenBucket::new(1.0 / SPAM_REFILL.as_secs_f64(), SPAM_BURST));
        bucket.try_take(now)
    }

    async fn send(&mut self, event: PluginEvent) {
        if !self.allowed(&event) {
            self.dropped.inc();
            return;
        }
        if self.recorders.len() > MAX_RECORDERS {
            // Forgetting series only means the next repeat starts a new Event.
            self.recorders.clear();
        }
        let recorder = self.recorders.entry((event.plugin.clone(), event.note.clone())).or_insert_with(|| {
            Recorder::new(self.client.clone(), Reporter { controller: format!("kubewasm/{}", event.plugin), instance: Some(self.instance.clone()) })
        });
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
        if let Err(e) = recorder.publish(&published, &reference).await {
            tracing::warn!(plugin = %event.plugin, object = %event.key, reason = %event.reason, "could not record an event: {e}");
        }
    }
}
