//! The keyed workqueue, with client-go's `RateLimitingInterface` semantics made async: adds of a
//! key deduplicate, a key is never held by two workers at once (one added while held is queued
//! again when released), delayed adds keep the earliest time, failed keys are retried after a
//! per-key exponential backoff under a token bucket, and shutdown can wait for in-flight work.
//!
//! Keys wait in two lanes, as in controller-runtime's priority queue: live changes (an object,
//! a child or a watched object changed; retries and requeues) go before background work (a
//! list, a resync, a catch-up after a reload), first-in first-out within each, a key taking the
//! higher of its reasons' lanes. Unlike controller-runtime's, background keys age: one that has
//! waited longer than the queue's bound ([`WorkQueue::with_max_wait`]) is served in turn with the
//! live lane, so a busy stream of changes can never starve a resync (controller-runtime #3496),
//! and a resync storm delays a live change by at most one background key per live one.
//! It knows keys only — not objects, plugins or Kubernetes — and spawns no task: getters sleep
//! until the earliest delayed key is due.
//!
//! A controller runs N workers (its max concurrency), each looping like this:
//!
//! ```no_run
//! # use std::time::Duration;
//! # use kubewasm::queue::WorkQueue;
//! # async fn reconcile(_: &String) -> Result<Option<Duration>, ()> { Ok(None) }
//! async fn worker(queue: WorkQueue<String>) {
//!     while let Some(lease) = queue.get().await {
//!         match reconcile(lease.key()).await {
//!             Ok(None) => queue.forget(lease.key()),
//!             Ok(Some(after)) => {
//!                 queue.forget(lease.key());
//!                 queue.add_after(lease.key().clone(), after);
//!             }
//!             Err(()) => queue.add_rate_limited(lease.key().clone()),
//!         }
//!         // Dropping the lease is client-go's `Done`.
//!     }
//! }
//! ```

mod delay;
pub mod rate_limit;
mod state;
#[cfg(test)]
mod tests;

use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

pub use rate_limit::RateLimitConfig;
use state::{State, Take};

pub use crate::metrics::Priority;
use crate::metrics::{Refresh, WorkqueueMetrics};

/// How long a background key may wait behind live ones before it is served in turn with them.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(30);

/// What the queue needs of a key: cheap to clone (it is stored in the queue and in the item
/// table), hashable, and shareable between worker tasks.
pub trait Key: Clone + Eq + Hash + Send + Sync + 'static {}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Key for T {}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueueError {
    #[error("rate limit: qps must be positive, got {0}")]
    RateLimitQps(f64),
    #[error("rate limit: burst must be at least 1")]
    RateLimitBurst,
}

/// Why a key was queued, carried to the worker that gets it (kube-runtime's `ReconcileReason`):
/// into the reconcile's log span and a metric label. A key queued several times before a worker
/// takes it carries every reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The object itself changed (or appeared).
    Changed,
    /// An object it owns changed.
    Owned,
    /// A watched object mapped to it changed.
    Mapped,
    /// It stopped matching the primary selector.
    Released,
    /// The periodic resync, a catch-up after a reload, or leadership regained.
    Resync,
    /// Seen in a (re)list of a watch: an initial list, a relist, or the cache handed to a plugin
    /// that subscribed late.
    Listed,
    /// A failed attempt, retried with backoff.
    Retry,
    /// Asked for by the last reconcile (`requeue-after`).
    Requeue,
}

impl Reason {
    const ALL: [Reason; 8] = [Reason::Changed, Reason::Owned, Reason::Mapped, Reason::Released, Reason::Resync, Reason::Listed, Reason::Retry, Reason::Requeue];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Changed => "changed",
            Reason::Owned => "owned",
            Reason::Mapped => "mapped",
            Reason::Released => "released",
            Reason::Resync => "resync",
            Reason::Listed => "listed",
            Reason::Retry => "retry",
            Reason::Requeue => "requeue",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of [`Reason`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reasons(u8);

impl Reasons {
    /// The lane these reasons put a key in: background only when nothing but a list or a resync
    /// asked for it (a key queued with no reason is a live change).
    pub fn priority(self) -> Priority {
        let background = Reason::Resync.bit() | Reason::Listed.bit();
        if self.0 != 0 && self.0 & !background == 0 { Priority::Background } else { Priority::Live }
    }

    pub fn contains(self, reason: Reason) -> bool {
        self.0 & reason.bit() != 0
    }

    pub fn iter(self) -> impl Iterator<Item = Reason> {
        Reason::ALL.into_iter().filter(move |r| self.contains(*r))
    }
}

impl From<Reason> for Reasons {
    fn from(reason: Reason) -> Self {
        Reasons(reason.bit())
    }
}

impl std::ops::BitOr for Reasons {
    type Output = Reasons;
    fn bitor(self, other: Reasons) -> Reasons {
        Reasons(self.0 | other.0)
    }
}

impl std::fmt::Display for Reasons {
    /// `changed,owned`; `-` when there is no reason recorded.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.iter().map(Reason::as_str).collect();
        f.write_str(if names.is_empty() { "-" } else { "" })?;
        f.write_str(&names.join(","))
    }
}

/// A handle on one queue; clones share it.
#[derive(Debug)]
pub struct WorkQueue<K: Key> {
    shared: Arc<Shared<K>>,
}

impl<K: Key> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue { shared: self.shared.clone() }
    }
}

#[derive(Debug)]
struct Shared<K: Key> {
    state: Mutex<State<K>>,
    /// Getters wait here for a key to become ready, an earlier delayed key, or shutdown.
    ready: Notify,
    /// `shut_down_with_drain` waits here for the last lease to be released.
    drained: Notify,
}

impl<K: Key> WorkQueue<K> {
    pub fn new(rate_limit: RateLimitConfig, metrics: WorkqueueMetrics) -> Result<Self, QueueError> {
        rate_limit.validate()?;
        let state = State::new(&rate_limit, DEFAULT_MAX_WAIT, metrics.clone());
        let shared = Arc::new(Shared { state: Mutex::new(state), ready: Notify::new(), drained: Notify::new() });
        let hook = Arc::downgrade(&shared);
        metrics.refresh_on_scrape(hook);
        Ok(WorkQueue { shared })
    }

    /// Sets how long a background key may wait behind live ones (default [`DEFAULT_MAX_WAIT`]).
    pub fn with_max_wait(self, max_wait: Duration) -> Self {
        self.shared.state.lock().set_max_wait(max_wait);
        self
    }

    /// Queues `key` unless it is already queued; ignored once shut down.
    pub fn add(&self, key: K) {
        let ready = self.shared.state.lock().add(key, Reasons::default(), Instant::now);
        self.shared.wake(usize::from(ready));
    }

    /// [`add`](Self::add), recording why.
    pub fn add_for(&self, key: K, reason: Reason) {
        let ready = self.shared.state.lock().add(key, reason.into(), Instant::now);
        self.shared.wake(usize::from(ready));
    }

    /// Queues `key` once `delay` has passed (reason: requeue). A key already waiting keeps the
    /// earlier of its two times. Counts as a retry (`workqueue_retries_total`), as in client-go.
    pub fn add_after(&self, key: K, delay: Duration) {
        let wake = self.shared.state.lock().add_after(key, delay, Reason::Requeue.into(), Instant::now());
        self.shared.wake(usize::from(wake));
    }

    /// Records a failure of `key` and queues it after the rate limiter's delay: the larger of
    /// its exponential backoff and the token bucket's wait (reason: retry).
    pub fn add_rate_limited(&self, key: K) {
        self.add_rate_limited_for(key, Reason::Retry);
    }

    /// [`add_rate_limited`](Self::add_rate_limited), recording another reason: a key that asked
    /// to come back at once goes through the limiter too, so that it cannot busy-loop.
    pub fn add_rate_limited_for(&self, key: K, reason: Reason) {
        let wake = self.shared.state.lock().add_rate_limited(key, reason, Instant::now());
        self.shared.wake(usize::from(wake));
    }

    /// Resets `key`'s backoff; call it when the key was processed successfully.
    pub fn forget(&self, key: &K) {
        self.shared.state.lock().forget(key);
    }

    /// How many times `key` has failed since it was last forgotten.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.shared.state.lock().num_requeues(key)
    }

    /// Keys ready to be handed out (not those being processed or waiting for a time).
    pub fn len(&self) -> usize {
        self.shared.state.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for a key and leases it to the caller until the [`Lease`] is dropped. Returns `None`
    /// once the queue is shut down. Cancel-safe: a dropped `get` takes nothing.
    pub async fn get(&self) -> Option<Lease<K>> {
        loop {
            // Created before looking so that a shutdown or add racing with the look still
            // wakes it (`notify_waiters` reaches futures created earlier; `notify_one` leaves a
            // permit).
            let notified = pin!(self.shared.ready.notified());
            let taken = self.shared.state.lock().take(Instant::now());
            match taken {
                Take::Key(key, reasons, more) => {
                    self.shared.wake(more);
                    return Some(Lease { key, reasons, shared: self.shared.clone() });
                }
                Take::ShutDown => return None,
                Take::Wait(None) => notified.await,
                // Waking at the due time with nothing to do is fine: the loop looks again.
                Take::Wait(Some(due)) => _ = tokio::time::timeout_at(due, notified).await,
            }
        }
    }

    /// Stops the queue at once: getters, waiting or not, get `None`; adds are ignored; keys still
    /// queued or waiting for a time are dropped. Leases already out stay valid.
    pub fn shut_down(&self) {
        self.shared.state.lock().shut_down();
        self.shared.ready.notify_waiters();
    }

    /// [`shut_down`](Self::shut_down), then waits until every lease out has been released.
    /// Bound it with a timeout if a worker may hang.
    pub async fn shut_down_with_drain(&self) {
        // Created before shutting down, so the last release's notification cannot be missed.
        let drained = pin!(self.shared.drained.notified());
        self.shut_down();
        if self.shared.state.lock().processing() > 0 {
            drained.await;
        }
    }
}

impl<K: Key> Shared<K> {
    /// Wakes up to `n` getters, one per key that became ready.
    fn wake(&self, n: usize) {
        for _ in 0..n {
            self.ready.notify_one();
        }
    }

    fn done(&self, key: &K) {
        let done = self.state.lock().done(key, Instant::now());
        self.wake(usize::from(done.requeued));
        if done.drained {
            self.drained.notify_waiters();
        }
    }
}

impl<K: Key> Refresh for Shared<K> {
    fn refresh(&self) {
        self.state.lock().refresh_in_flight(Instant::now());
    }
}

/// A key handed to one worker. While it lives no other worker gets the same key; dropping it
/// releases the key (client-go's `Done`), also when the worker's task is cancelled or panics.
#[derive(Debug)]
pub struct Lease<K: Key> {
    key: K,
    reasons: Reasons,
    shared: Arc<Shared<K>>,
}

impl<K: Key> Lease<K> {
    pub fn key(&self) -> &K {
        &self.key
    }

    /// Why the key was queued.
    pub fn reasons(&self) -> Reasons {
        self.reasons
    }
}

impl<K: Key> Drop for Lease<K> {
    fn drop(&mut self) {
        self.shared.done(&self.key);
    }
}
