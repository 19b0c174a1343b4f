//! The workqueue's bookkeeping behind its one lock: which keys are queued, being processed,
//! processed-and-dirty or waiting for a time, each key's failures, and the `workqueue_*` series
//! that follow from those transitions. Synchronous, and the time comes from the caller (the
//! tests' paused clock works); waking and waiting belong to the handle in `queue/mod.rs`.

use std::collections::VecDeque;
use std::collections::hash_map::{Entry, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::delay::Delayed;
use super::rate_limit::{RateLimitConfig, RateLimiter};
use super::{Key, Reason, Reasons};
use crate::metrics::WorkqueueMetrics;

/// Where one key stands; a key with neither time set has no entry at all.
#[derive(Debug)]
struct Item {
    /// Set from the first add until a worker gets the key ("dirty" in client-go): its presence
    /// is what deduplicates adds, and its value feeds `workqueue_queue_duration_seconds`.
    queued_since: Option<Instant>,
    /// Set while a worker holds the key; a key added meanwhile is queued only when it is done.
    processing_since: Option<Instant>,
    /// Why it is queued (every reason since a worker last took it).
    reasons: Reasons,
}

/// What [`State::take`] found.
pub(crate) enum Take<K> {
    /// A key for a worker, why it was queued, and how many more keys became ready for other
    /// getters to be told of.
    Key(K, Reasons, usize),
    /// Nothing ready yet: wait for an add or until the given time when a delayed key falls due.
    Wait(Option<Instant>),
    ShutDown,
}

/// What [`State::done`] changed.
pub(crate) struct Done {
    /// The key was added while it was processed and is queued again.
    pub(crate) requeued: bool,
    /// The queue is shutting down and nothing is processing any more.
    pub(crate) drained: bool,
}

#[derive(Debug)]
pub(crate) struct State<K: Key> {
    items: HashMap<K, Item>,
    /// Keys queued and not being processed, first-in first-out: each exactly once.
    ready: VecDeque<K>,
    delayed: Delayed<K>,
    /// Why each delayed key was delayed, handed on when it falls due.
    delayed_reasons: HashMap<K, Reasons>,
    limiter: RateLimiter<K>,
    processing: usize,
    shutting_down: bool,
    metrics: WorkqueueMetrics,
}

impl<K: Key> State<K> {
    pub(crate) fn new(rate_limit: &RateLimitConfig, metrics: WorkqueueMetrics) -> Self {
        State {
            items: HashMap::new(),
            ready: VecDeque::new(),
            delayed: Delayed::new(),
            delayed_reasons: HashMap::new(),
            limiter: RateLimiter::new(rate_limit),
            processing: 0,
            shutting_down: false,
            metrics,
        }
    }

    /// Queues `key` unless it is already queued. Returns whether it became ready for a getter.
    /// Takes the clock rather than the time because duplicate adds, the common case in an event
    /// storm, do not need it and reading it costs as much as the rest of the add.
    pub(crate) fn add(&mut self, key: K, reasons: Reasons, now: impl FnOnce() -> Instant) -> bool {
        if self.shutting_down {
            return false;
        }
        let ready = match self.items.entry(key) {
            Entry::Occupied(mut slot) => {
                let item = slot.get_mut();
                item.reasons = item.reasons | reasons;
                if item.queued_since.is_some() {
                    return false;
                }
                // Processing: `done` queues it, so it never reaches two workers at once.
                item.queued_since = Some(now());
                false
            }
            Entry::Vacant(slot) => {
                self.ready.push_back(slot.key().clone());
                slot.insert(Item { queued_since: Some(now()), processing_since: None, reasons });
                true
            }
        };
        self.metrics.adds.inc();
        self.metrics.depth.inc();
        ready
    }

    /// Adds `key` once `delay` has passed. Returns whether getters must be woken: the key is
    /// ready now, or it is due before anything else waiting and sleepers must re-arm.
    pub(crate) fn add_after(&mut self, key: K, delay: Duration, reasons: Reasons, now: Instant) -> bool {
        if self.shutting_down {
            return false;
        }
        // client-go counts every delayed add as a retry, requeue-after included.
        self.metrics.retries.inc();
        if delay.is_zero() {
            return self.add(key, reasons, || now);
        }
        // Beyond what `Instant` can hold is "never" in practice; a year stands in for it.
        let at = now.checked_add(delay).unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600));
        let slot = self.delayed_reasons.entry(key.clone()).or_default();
        *slot = *slot | reasons;
        self.delayed.insert(key, at)
    }

    /// Adds `key` after the rate limiter's delay for one more failure of it.
    pub(crate) fn add_rate_limited(&mut self, key: K, reason: Reason, now: Instant) -> bool {
        if self.shutting_down {
            return false;
        }
        let delay = self.limiter.when(&key, now);
        self.add_after(key, delay, reason.into(), now)
    }

    /// Hands the next ready key to a worker, first moving delayed keys that are due into line.
    pub(crate) fn take(&mut self, now: Instant) -> Take<K> {
        if self.shutting_down {
            return Take::ShutDown;
        }
        let mut promoted = 0;
        while let Some(key) = self.delayed.pop_due(now) {
            let reasons = self.delayed_reasons.remove(&key).unwrap_or_default();
            promoted += usize::from(self.add(key, reasons, || now));
        }
        let Some(key) = self.ready.pop_front() else {
            return Take::Wait(self.delayed.next_due());
        };
        let item = self.items.get_mut(&key).expect("a ready key has an item");
        let queued_since = item.queued_since.take().expect("a ready key is queued");
        item.processing_since = Some(now);
        let reasons = std::mem::take(&mut item.reasons);
        self.processing += 1;
        self.metrics.depth.dec();
        self.metrics.queue_duration.observe((now - queued_since).as_secs_f64());
        Take::Key(key, reasons, promoted.saturating_sub(1))
    }

    /// Releases a key a worker took; queues it again if it was added meanwhile.
    pub(crate) fn done(&mut self, key: &K, now: Instant) -> Done {
        let (key, mut item) = self.items.remove_entry(key).expect("a key being processed has an item");
        let started = item.processing_since.take().expect("done is called once per take");
        self.processing -= 1;
        self.metrics.work_duration.observe((now - started).as_secs_f64());
        let requeued = item.queued_since.is_some();
        if requeued {
            self.ready.push_back(key.clone());
            self.items.insert(key, item);
        }
        Done { requeued, drained: self.shutting_down && self.processing == 0 }
    }

    pub(crate) fn forget(&mut self, key: &K) {
        self.limiter.forget(key);
    }

    pub(crate) fn num_requeues(&self, key: &K) -> u32 {
        self.limiter.num_requeues(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.ready.len()
    }

    pub(crate) fn processing(&self) -> usize {
        self.processing
    }

    /// Stops handing out and accepting keys. Delayed keys are dropped: nothing will get them.
    pub(crate) fn shut_down(&mut self) {
        self.shutting_down = true;
        self.delayed.clear();
        self.delayed_reasons.clear();
    }

    /// Sets the in-flight gauges from the keys being processed at `now`.
    pub(crate) fn refresh_in_flight(&self, now: Instant) {
        let (total, longest) = self
            .items
            .values()
            .filter_map(|item| item.processing_since)
            .map(|since| (now - since).as_secs_f64())
            .fold((0.0, 0.0), |(total, longest): (f64, f64), secs| (total + secs, longest.max(secs)));
        self.metrics.unfinished_work.set(total);
        self.metrics.longest_running_processor.set(longest);
    }
}

impl<K: Key> Drop for State<K> {
    /// The series outlive the queue (a reloaded plugin's new queue reuses them): take back what
    /// this queue still contributes so they do not report its leftovers forever.
    fn drop(&mut self) {
        let queued = self.items.values().filter(|item| item.queued_since.is_some()).count();
        self.metrics.depth.dec_by(i64::try_from(queued).unwrap_or(i64::MAX));
        self.metrics.unfinished_work.set(0.0);
        self.metrics.longest_running_processor.set(0.0);
    }
}
