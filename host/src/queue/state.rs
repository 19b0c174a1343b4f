//! The workqueue's bookkeeping behind its one lock: which keys are queued (in which lane),
//! being processed, processed-and-dirty or waiting for a time, each key's failures, and the
//! `workqueue_*` series that follow from those transitions. Synchronous, and the time comes from the caller (the
//! tests' paused clock works); waking and waiting belong to the handle in `queue/mod.rs`.

use std::collections::VecDeque;
use std::collections::hash_map::{Entry, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::delay::Delayed;
use super::rate_limit::{RateLimitConfig, RateLimiter};
use super::{Key, Priority, Reason, Reasons};
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
    /// Its place in a lane while it is ready: the lane and the number of its entry there. A key
    /// moved to the live lane leaves a stale entry behind in the background lane, skipped when it
    /// comes up (a search through the lane on every promotion would cost O(n)).
    place: Option<(Priority, u64)>,
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

/// Whether a table or lane holds far more room than keys: a queue that worked off an initial list
/// of 100 k keys would otherwise keep room for them for good (~100 bytes a key, per plugin) while
/// it idles. Shrinking to twice the keys once they fill an eighth keeps the cost amortized O(1).
fn oversized(len: usize, capacity: usize) -> bool {
    capacity > 1024 && len * 8 < capacity
}

#[derive(Debug)]
pub(crate) struct State<K: Key> {
    items: HashMap<K, Item>,
    /// Keys queued and not being processed, per [`Priority`], first-in first-out: each key's
    /// current entry exactly once (and stale entries of promoted keys).
    lanes: [VecDeque<(K, u64)>; 2],
    /// Numbers the lane entries.
    entries: u64,
    /// Keys ready, whatever their lane.
    ready: usize,
    /// A background key waiting longer than this is served in turn with the live lane.
    max_wait: Duration,
    /// Whether the last key handed out while both lanes had keys came from the live lane.
    last_live: bool,
    delayed: Delayed<K>,
    /// Why each delayed key was delayed, handed on when it falls due.
    delayed_reasons: HashMap<K, Reasons>,
    limiter: RateLimiter<K>,
    processing: usize,
    shutting_down: bool,
    metrics: WorkqueueMetrics,
}

impl<K: Key> State<K> {
    pub(crate) fn new(rate_limit: &RateLimitConfig, max_wait: Duration, metrics: WorkqueueMetrics) -> Self {
        State {
            items: HashMap::new(),
            lanes: [VecDeque::new(), VecDeque::new()],
            entries: 0,
            ready: 0,
            max_wait,
            last_live: false,
            delayed: Delayed::new(),
            delayed_reasons: HashMap::new(),
            limiter: RateLimiter::new(rate_limit),
            processing: 0,
            shutting_down: false,
            metrics,
        }
    }

    pub(crate) fn set_max_wait(&mut self, max_wait: Duration) {
        self.max_wait = max_wait;
    }

    /// Puts a ready key at the back of `lane`.
    fn enter(&mut self, key: &K, lane: Priority) -> (Priority, u64) {
        self.entries += 1;
        self.lanes[lane as usize].push_back((key.clone(), self.entries));
        self.metrics.depth[lane as usize].inc();
        (lane, self.entries)
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
                    // Ready in the background lane, and live now: moved ahead.
                    if let Some((Priority::Background, _)) = item.place
                        && item.reasons.priority() == Priority::Live
                    {
                        let key = slot.key().clone();
                        self.metrics.depth[Priority::Background as usize].dec();
                        let place = self.enter(&key, Priority::Live);
                        self.items.get_mut(&key).expect("present").place = Some(place);
                    }
                    return false;
                }
                // Processing: `done` queues it, so it never reaches two workers at once.
                item.queued_since = Some(now());
                self.metrics.adds.inc();
                return false;
            }
            Entry::Vacant(slot) => {
                let key = slot.key().clone();
                slot.insert(Item { queued_since: Some(now()), processing_since: None, reasons, place: None });
                let place = self.enter(&key, reasons.priority());
                self.items.get_mut(&key).expect("present").place = Some(place);
                self.ready += 1;
                true
            }
        };
        self.metrics.adds.inc();
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
        let Some((key, lane)) = self.next(now) else {
            return Take::Wait(self.delayed.next_due());
        };
        let item = self.items.get_mut(&key).expect("a ready key has an item");
        let queued_since = item.queued_since.take().expect("a ready key is queued");
        item.processing_since = Some(now);
        item.place = None;
        let reasons = std::mem::take(&mut item.reasons);
        self.processing += 1;
        self.ready -= 1;
        let waited = now - queued_since;
        self.metrics.depth[lane as usize].dec();
        self.metrics.queue_duration[lane as usize].observe(waited.as_secs_f64());
        if lane == Priority::Background && waited > self.max_wait {
            self.metrics.starved.inc();
        }
        Take::Key(key, reasons, promoted.saturating_sub(1))
    }

    /// The front of `lane` once stale entries are dropped, and when it was queued.
    fn front(&mut self, lane: Priority) -> Option<Instant> {
        let items = &self.items;
        let queue = &mut self.lanes[lane as usize];
        while let Some((key, entry)) = queue.front() {
            match items.get(key) {
                Some(item) if item.place == Some((lane, *entry)) => return item.queued_since,
                _ => {
                    queue.pop_front();
                }
            }
        }
        None
    }

    /// The key to hand out next, and its lane: the live lane's first, unless the background
    /// lane's first has waited past the bound — then the two lanes take turns.
    fn next(&mut self, now: Instant) -> Option<(K, Priority)> {
        let live = self.front(Priority::Live).is_some();
        let background = self.front(Priority::Background);
        let aged = background.is_some_and(|since| now.saturating_duration_since(since) >= self.max_wait);
        let lane = match (live, background) {
            (false, None) => return None,
            (true, Some(_)) if aged && self.last_live => Priority::Background,
            (true, _) => Priority::Live,
            (false, Some(_)) => Priority::Background,
        };
        if background.is_some() && live {
            self.last_live = lane == Priority::Live;
        }
        let queue = &mut self.lanes[lane as usize];
        let next = queue.pop_front().map(|(key, _)| (key, lane));
        if oversized(queue.len(), queue.capacity()) {
            queue.shrink_to(queue.len() * 2);
        }
        next
    }

    /// Releases a key a worker took; queues it again if it was added meanwhile.
    pub(crate) fn done(&mut self, key: &K, now: Instant) -> Done {
        let (key, mut item) = self.items.remove_entry(key).expect("a key being processed has an item");
        let started = item.processing_since.take().expect("done is called once per take");
        self.processing -= 1;
        self.metrics.work_duration.observe((now - started).as_secs_f64());
        let requeued = item.queued_since.is_some();
        if requeued {
            item.place = Some(self.enter(&key, item.reasons.priority()));
            self.ready += 1;
            self.items.insert(key, item);
        } else if oversized(self.items.len(), self.items.capacity()) {
            self.items.shrink_to(self.items.len() * 2);
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
        self.ready
    }

    /// The keys its tables and lanes have room for.
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        self.items.capacity() + self.lanes.iter().map(|lane| lane.capacity()).sum::<usize>()
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
        for item in self.items.values().filter(|item| item.queued_since.is_some()) {
            let lane = item.place.map_or(item.reasons.priority(), |(lane, _)| lane);
            self.metrics.depth[lane as usize].dec();
        }
        self.metrics.unfinished_work.set(0.0);
        self.metrics.longest_running_processor.set(0.0);
    }
}
