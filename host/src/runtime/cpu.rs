//! CPU isolation between plugins on the shared executor: what a call's deadline is measured in,
//! and how much of the executor one plugin's calls may hold at once.
//!
//! Every plugin runs on the same few tokio workers, so a wall-clock deadline would let a busy
//! neighbour make any plugin fault. A call's deadline is measured instead on its [`CallClock`]:
//! the time it spends running (polled by the executor: the guest and the synchronous host code
//! it calls) plus the time it waits for something it chose itself (a WASI sleep or poll). Not
//! counted: the time it sits in the executor's queue after an epoch yield or waits for its
//! plugin's [`CpuShare`] (a neighbour's doing), and the time it waits for the API server (the
//! infrastructure's: a slow webhook, APF throttling, the plugin's own rate limit). A much longer
//! wall-clock backstop ([`backstop`]) still ends a call that waits on the API for good; that is a
//! [`Stalled`], not a deadline fault, because it says nothing about the object or the version.
//!
//! [`CpuShare`] is the fair part: at most as many calls of one plugin run at a moment as
//! the executor has workers, the others wait in their plugin's FIFO instead of the executor's
//! queue. So a plugin with 64 busy calls holds as many run-queue places as one with a single
//! call, and each plugin with work gets a turn every few time slices (one slice is one epoch
//! tick, 10 ms) whatever its concurrency. A place is held across epoch yields (handed to the
//! next waiting call of the same plugin at each one) and given up whenever the call waits. The
//! share is the plugin's, not a runner's ([`Shares`]): its versions, its shadow candidate and its
//! controllers in member clusters all take turns in one.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
// Tokio's clock (the monotonic clock, unless a test pauses it), so that timers and charges agree.
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::host::{Api, ClusterInfo, Fleet, Services, Target, Unreached};
use crate::client::{RequestError, WriteRequest};
use crate::resource::Gvk;

/// How much longer than its deadline a call may take in wall-clock time (waiting on the API
/// server, or starved) before it is stopped as stalled: two requests at the default request
/// timeout (30 s).
const BACKSTOP_GRACE: Duration = Duration::from_secs(60);

/// The wall-clock bound of a call whose deadline is `deadline`.
pub(super) fn backstop(deadline: Duration) -> Duration {
    deadline.saturating_mul(2).max(deadline.saturating_add(BACKSTOP_GRACE))
}

/// Raised when a call ran past its own deadline.
#[derive(Debug, thiserror::Error)]
#[error("deadline exceeded")]
pub(super) struct DeadlineExceeded;

/// Raised when a call took longer than its wall-clock backstop without using up its deadline:
/// it waited on the API server (or for the executor) that long.
#[derive(Debug, thiserror::Error)]
#[error("stalled past the wall-clock backstop")]
pub(super) struct Stalled;

/// What a call is doing now, as far as its clock is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Being polled: its own time.
    Running,
    /// Pending for a reason of its own (a WASI sleep or poll): its own time.
    Waiting,
    /// Pending after an epoch yield, or waiting for its plugin's share: a neighbour's time.
    Queued,
    /// Waiting for the API server: the infrastructure's time.
    Api,
}

/// One instance's clock, reset for each call. Read and written only by the task that polls the
/// call (and the epoch callback, which runs inside that poll), so the lock is never contended.
#[derive(Debug)]
pub(super) struct CallClock(Mutex<ClockState>);

#[derive(Debug)]
struct ClockState {
    budget: Duration,
    used: Duration,
    phase: Phase,
    since: Instant,
    /// Host calls to the API in progress (one at a time today; counted to be safe).
    api_depth: u32,
}

impl ClockState {
    /// Charges the time since the last change if the phase counts, then moves to `phase`.
    fn enter(&mut self, phase: Phase, now: Instant) {
        if matches!(self.phase, Phase::Running | Phase::Waiting) {
            self.used += now.saturating_duration_since(self.since);
        }
        self.phase = phase;
        self.since = now;
    }

    fn used(&self, now: Instant) -> Duration {
        match self.phase {
            Phase::Running | Phase::Waiting => self.used + now.saturating_duration_since(self.since),
            Phase::Queued | Phase::Api => self.used,
        }
    }
}

impl CallClock {
    pub(super) fn new(budget: Duration) -> Self {
        CallClock(Mutex::new(ClockState { budget, used: Duration::ZERO, phase: Phase::Queued, since: Instant::now(), api_depth: 0 }))
    }

    /// Starts over for a call with `budget` of its own time.
    pub(super) fn reset(&self, budget: Duration) {
        *self.0.lock() = ClockState { budget, used: Duration::ZERO, phase: Phase::Queued, since: Instant::now(), api_depth: 0 };
    }

    /// The call's own time so far.
    pub(super) fn used(&self) -> Duration {
        self.0.lock().used(Instant::now())
    }

    /// From the epoch callback: `Err` once the call has used its budget; else it yields, and the
    /// time until it runs again is not its own.
    pub(super) fn tick(&self) -> Result<(), DeadlineExceeded> {
        let mut state = self.0.lock();
        let now = Instant::now();
        if state.used(now) >= state.budget {
            return Err(DeadlineExceeded);
        }
        state.enter(Phase::Queued, now);
        Ok(())
    }

    /// The guarded host call waits for the API server until the guard is dropped.
    pub(super) fn api_wait(self: &Arc<Self>) -> ApiWait {
        let mut state = self.0.lock();
        state.api_depth += 1;
        state.enter(Phase::Api, Instant::now());
        ApiWait(self.clone())
    }

    fn polling(&self) {
        let mut state = self.0.lock();
        if state.api_depth == 0 {
            state.enter(Phase::Running, Instant::now());
        }
    }

    /// After a poll that returned pending: why.
    fn pending(&self) -> Pending {
        let mut state = self.0.lock();
        let now = Instant::now();
        match state.phase {
            Phase::Running => {
                state.enter(Phase::Waiting, now);
                Pending::Waiting(state.budget.saturating_sub(state.used(now)))
            }
            Phase::Waiting => Pending::Waiting(state.budget.saturating_sub(state.used(now))),
            Phase::Queued => Pending::Yielded,
            Phase::Api => Pending::Api,
        }
    }

    /// Woken but waiting for the plugin's share: no longer its own time.
    fn queued(&self) {
        let mut state = self.0.lock();
        if state.phase == Phase::Waiting {
            state.enter(Phase::Queued, Instant::now());
        }
    }

    fn finished(&self) {
        let mut state = self.0.lock();
        if state.phase == Phase::Running {
            state.enter(Phase::Queued, Instant::now());
        }
    }
}

/// Why a call's poll returned pending.
enum Pending {
    /// An epoch yield: it is ready to run again.
    Yielded,
    /// A wait of its own, with this much of its budget left.
    Waiting(Duration),
    /// A request to the API server.
    Api,
}

/// A host call waiting for the API server; the clock runs again when it is dropped.
pub(super) struct ApiWait(Arc<CallClock>);

impl Drop for ApiWait {
    fn drop(&mut self) {
        let mut state = self.0.0.lock();
        state.api_depth = state.api_depth.saturating_sub(1);
        if state.api_depth == 0 {
            // Back in the guest's poll: its own time again.
            state.enter(Phase::Running, Instant::now());
        }
    }
}

/// `services` whose API waits are kept off `clock`.
pub(super) fn timed(services: &Services, clock: &Arc<CallClock>) -> Services {
    Services {
        api: Arc::new(TimedApi { inner: services.api.clone(), clock: clock.clone() }),
        fleet: Arc::new(TimedFleet { inner: services.fleet.clone(), clock: clock.clone() }),
        ..services.clone()
    }
}

/// The plugin's fleet, its other clusters' APIs timed as its own.
struct TimedFleet {
    inner: Arc<dyn Fleet>,
    clock: Arc<CallClock>,
}

impl Fleet for TimedFleet {
    fn here(&self) -> Option<&str> {
        self.inner.here()
    }

    fn clusters(&self) -> Vec<ClusterInfo> {
        self.inner.clusters()
    }

    fn target(&self, cluster: Option<&str>) -> Result<Target, Unreached> {
        let target = self.inner.target(cluster)?;
        Ok(Target { api: Arc::new(TimedApi { inner: target.api, clock: self.clock.clone() }), ..target })
    }
}

/// The plugin's API, with the time its requests take kept off the calling instance's clock.
struct TimedApi {
    inner: Arc<dyn Api>,
    clock: Arc<CallClock>,
}

#[async_trait::async_trait]
impl Api for TimedApi {
    async fn write(&self, request: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
        let _wait = self.clock.api_wait();
        self.inner.write(request).await
    }

    async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, RequestError> {
        let _wait = self.clock.api_wait();
        self.inner.get(resource, namespace, name).await
    }
}

/// One plugin version's share of the executor: how many of its calls may be ready to run at
/// once. A call holds a place from its first poll until it waits (for the API server, or a
/// sleep of its own) or ends, and across its epoch yields; at a yield it hands the place to the
/// next of its plugin's calls waiting for one, if any, and queues behind them.
#[derive(Debug, Clone)]
pub(super) struct CpuShare(Arc<Semaphore>);

impl CpuShare {
    /// As many as the current runtime has workers (one outside a runtime): one plugin alone can
    /// still use every worker, and many busy plugins get turns in proportion to one another.
    pub(super) fn for_current_runtime() -> Self {
        let workers = tokio::runtime::Handle::try_current().map(|h| h.metrics().num_workers()).unwrap_or(1);
        CpuShare::new(workers.max(1))
    }

    pub(super) fn new(slots: usize) -> Self {
        CpuShare(Arc::new(Semaphore::new(slots)))
    }
}

/// Each plugin's [`CpuShare`], while one of its runners holds it.
#[derive(Default)]
pub(super) struct Shares(Mutex<HashMap<Arc<str>, Weak<Semaphore>>>);

impl Shares {
    /// The share of `plugin`: the one its other runners hold, or a new one.
    pub(super) fn of(&self, plugin: &Arc<str>) -> CpuShare {
        let mut shares = self.0.lock();
        if let Some(held) = shares.get(plugin).and_then(Weak::upgrade) {
            return CpuShare(held);
        }
        shares.retain(|_, weak| weak.strong_count() > 0);
        let share = CpuShare::for_current_runtime();
        shares.insert(plugin.clone(), Arc::downgrade(&share.0));
        share
    }
}

type Acquire = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, tokio::sync::AcquireError>> + Send>>;

/// Runs `call` on `clock` within `share`: its own time bounded by the clock's budget, its wall
/// time by `backstop`.
pub(super) fn metered<F: Future>(call: F, clock: Arc<CallClock>, share: CpuShare, backstop: Duration) -> Metered<F> {
    clock.0.lock().since = Instant::now();
    Metered { call: Box::pin(call), clock, share, permit: None, acquiring: None, waiting: None, backstop: Box::pin(tokio::time::sleep(backstop)) }
}

pub(super) struct Metered<F: Future> {
    call: Pin<Box<F>>,
    clock: Arc<CallClock>,
    share: CpuShare,
    permit: Option<OwnedSemaphorePermit>,
    acquiring: Option<Acquire>,
    /// Ends a call whose own wait (a WASI sleep) outlasts its budget.
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
    backstop: Pin<Box<tokio::time::Sleep>>,
}

impl<F, T> Future for Metered<F>
where
    F: Future<Output = wasmtime::Result<T>>,
{
    type Output = wasmtime::Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.backstop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(Stalled.into()));
        }
        if let Some(waiting) = &mut this.waiting
            && waiting.as_mut().poll(cx).is_ready()
            && this.clock.used() >= this.clock.0.lock().budget
        {
            return Poll::Ready(Err(DeadlineExceeded.into()));
        }
        if this.permit.is_none() {
            this.clock.queued();
            let acquiring = this.acquiring.get_or_insert_with(|| Box::pin(this.share.0.clone().acquire_owned()));
            match acquiring.as_mut().poll(cx) {
                Poll::Ready(permit) => this.permit = Some(permit.expect("the share's semaphore is never closed")),
                Poll::Pending => return Poll::Pending,
            }
            this.acquiring = None;
        }
        this.clock.polling();
        let polled = this.call.as_mut().poll(cx);
        if let Poll::Ready(result) = polled {
            this.permit = None;
            this.clock.finished();
            return Poll::Ready(result);
        }
        match this.clock.pending() {
            Pending::Yielded => {
                // Behind the plugin's other calls waiting for a place, if there are any.
                this.permit = None;
                if let Ok(permit) = this.share.0.clone().try_acquire_owned() {
                    this.permit = Some(permit);
                }
            }
            Pending::Waiting(left) => {
                this.permit = None;
                let mut timer = Box::pin(tokio::time::sleep(left));
                // Registered now, so that it wakes this task.
                let _ = timer.as_mut().poll(cx);
                this.waiting = Some(timer);
            }
            Pending::Api => this.permit = None,
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that computes for `slices` × `slice` in steps, yielding between them as the epoch
    /// callback makes a guest do.
    async fn compute(clock: Arc<CallClock>, slices: u32, slice: Duration) -> wasmtime::Result<()> {
        for _ in 0..slices {
            let end = Instant::now() + slice;
            while Instant::now() < end {
                std::hint::spin_loop();
            }
            clock.tick()?;
            Yield(false).await;
        }
        Ok(())
    }

    /// Yields as wasmtime's epoch yield does: wakes itself at once and returns pending once.
    struct Yield(bool);

    impl Future for Yield {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    fn clock(budget: Duration) -> Arc<CallClock> {
        Arc::new(CallClock::new(budget))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn time_in_the_queue_is_not_the_calls_own() {
        // A 100 ms call beside 8 busy neighbours on one worker: about a second of wall time,
        // about 100 ms of its own.
        let share = CpuShare::new(1);
        let neighbours: Vec<_> = (0..8)
            .map(|_| {
                let c = clock(Duration::from_secs(60));
                tokio::spawn(metered(compute(c.clone(), 40, Duration::from_millis(10)), c, CpuShare::new(1), Duration::from_secs(60)))
            })
            .collect();
        let mine = clock(Duration::from_millis(300));
        let started = Instant::now();
        // A task like the others (block_on's own future is polled only every few dozen tasks).
        tokio::spawn(metered(compute(mine.clone(), 10, Duration::from_millis(10)), mine.clone(), share, Duration::from_secs(60))).await.unwrap().unwrap();
        let wall = started.elapsed();
        let own = mine.used();
        assert!(wall > Duration::from_millis(400), "the neighbours took their turns: {wall:?}");
        assert!(own < Duration::from_millis(200), "own time {own:?} of a 100 ms call (wall {wall:?})");
        for n in neighbours {
            n.abort();
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_that_computes_past_its_budget_stops() {
        let c = clock(Duration::from_millis(50));
        let result = metered(compute(c.clone(), 100, Duration::from_millis(10)), c, CpuShare::new(1), Duration::from_secs(60)).await;
        assert!(result.unwrap_err().downcast_ref::<DeadlineExceeded>().is_some());
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_sleep_of_its_own_counts_and_waiting_on_the_api_does_not() {
        // A WASI sleep is the guest's own choice: a 10 s sleep ends a 2 s call at 2 s.
        let c = clock(Duration::from_secs(2));
        let started = tokio::time::Instant::now();
        let result = metered(
            async {
                tokio::time::sleep(Duration::from_secs(10)).await;
                wasmtime::Result::Ok(())
            },
            c,
            CpuShare::new(1),
            backstop(Duration::from_secs(2)),
        )
        .await;
        assert!(result.unwrap_err().downcast_ref::<DeadlineExceeded>().is_some());
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        // 10 s waiting on the API server (a slow webhook) is nobody's fault within the backstop.
        let c = clock(Duration::from_secs(2));
        let waits = c.clone();
        let call = async move {
            let _api = waits.api_wait();
            tokio::time::sleep(Duration::from_secs(10)).await;
            wasmtime::Result::Ok(())
        };
        metered(call, c.clone(), CpuShare::new(1), backstop(Duration::from_secs(2))).await.unwrap();
        assert!(c.used() < Duration::from_millis(10), "{:?}", c.used());
        // Waiting for good: stopped at the backstop, as stalled.
        let c = clock(Duration::from_secs(2));
        let waits = c.clone();
        let started = tokio::time::Instant::now();
        let call = async move {
            let _api = waits.api_wait();
            std::future::pending::<()>().await;
            wasmtime::Result::Ok(())
        };
        let result = metered(call, c, CpuShare::new(1), backstop(Duration::from_secs(2))).await;
        assert!(result.unwrap_err().downcast_ref::<Stalled>().is_some());
        assert_eq!(started.elapsed(), backstop(Duration::from_secs(2)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_plugin_with_many_busy_calls_gets_no_more_turns_than_one_with_a_single_call() {
        // Plugin A: 16 calls that never end; plugin B: one 100 ms call. One worker, one slot each.
        let a = CpuShare::new(1);
        let busy: Vec<_> = (0..16)
            .map(|_| {
                let c = clock(Duration::from_secs(600));
                tokio::spawn(metered(compute(c.clone(), u32::MAX, Duration::from_millis(10)), c, a.clone(), Duration::from_secs(600)))
            })
            .collect();
        tokio::task::yield_now().await;
        let mine = clock(Duration::from_secs(5));
        let started = Instant::now();
        tokio::spawn(metered(compute(mine.clone(), 10, Duration::from_millis(10)), mine, CpuShare::new(1), Duration::from_secs(60))).await.unwrap().unwrap();
        let wall = started.elapsed();
        // Without the share it would take about 17 × 100 ms; with it, about 2 × 100 ms.
        assert!(wall < Duration::from_millis(600), "B's 100 ms call took {wall:?} beside 16 busy calls of A");
        for b in busy {
            b.abort();
        }
    }
}
