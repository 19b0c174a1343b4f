//! The workqueue through its public API. Time-dependent tests run on tokio's paused clock, which
//! jumps straight to the next timer when every task is idle: no real sleeping.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::{Instant, timeout};

use super::*;
use crate::metrics::Metrics;

fn queue(metrics: &Metrics) -> WorkQueue<&'static str> {
    WorkQueue::new(RateLimitConfig::default(), metrics.workqueue("test")).unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Whether `get` would hand something out right now.
async fn nothing_ready(q: &WorkQueue<&'static str>) -> bool {
    timeout(ms(1), q.get()).await.is_err()
}

/// A series' value in the exposition, summed over its other labels (the depth's priorities),
/// e.g. `sample(&text, "workqueue_depth")`.
fn sample(text: &str, series: &str) -> f64 {
    let prefix = format!("{series}{{");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(&prefix)).collect();
    assert!(!lines.is_empty(), "no {series} in:\n{text}");
    lines.iter().map(|line| line.rsplit(' ').next().unwrap().parse::<f64>().unwrap()).sum()
}

#[tokio::test(start_paused = true)]
async fn adds_of_a_queued_key_deduplicate_and_order_is_first_in_first_out() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    for key in ["a", "b", "a", "c", "b", "a"] {
        q.add(key);
    }
    assert_eq!(q.len(), 3);
    let mut got = Vec::new();
    while !q.is_empty() {
        got.push(*q.get().await.unwrap().key());
    }
    assert_eq!(got, ["a", "b", "c"]);
    assert!(nothing_ready(&q).await);
}

#[tokio::test(start_paused = true)]
async fn a_key_added_while_held_is_handed_out_again_only_after_release() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    q.add("a");
    let lease = q.get().await.unwrap();
    q.add("a");
    q.add("a");
    assert_eq!(q.len(), 0, "held keys are not ready");
    assert!(nothing_ready(&q).await);

    drop(lease);
    assert_eq!(q.len(), 1, "queued once for the adds made while held");
    let again = q.get().await.unwrap();
    assert_eq!(*again.key(), "a");
    drop(again);
    assert!(nothing_ready(&q).await);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_getter_is_woken_by_an_add() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    let getter = tokio::spawn({
        let q = q.clone();
        async move { *q.get().await.unwrap().key() }
    });
    tokio::task::yield_now().await;
    q.add("x");
    assert_eq!(getter.await.unwrap(), "x");
}

/// Several workers on several threads, adders hammering a few keys: no key is ever held twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_key_is_ever_held_by_two_workers() {
    const KEYS: [&str; 8] = ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"];
    let metrics = Metrics::new();
    let q = queue(&metrics);
    let held = Arc::new(parking_lot::Mutex::new(HashSet::new()));
    let overlap = Arc::new(AtomicBool::new(false));
    let processed = Arc::new(AtomicUsize::new(0));

    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (q, held, overlap, processed) = (q.clone(), held.clone(), overlap.clone(), processed.clone());
            tokio::spawn(async move {
                while let Some(lease) = q.get().await {
                    if !held.lock().insert(*lease.key()) {
                        overlap.store(true, Ordering::SeqCst);
                    }
                    // Hold the key across a suspension so others get a chance to collide.
                    tokio::task::yield_now().await;
                    held.lock().remove(lease.key());
                    processed.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let adders: Vec<_> = (0..2)
        .map(|n| {
            let q = q.clone();
            tokio::spawn(async move {
                for i in 0..5_000 {
                    q.add(KEYS[(i * 3 + n) % KEYS.len()]);
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for adder in adders {
        adder.await.unwrap();
    }
    // Let the workers empty the queue, then stop them. Bounded: workers that died would
    // otherwise leave this loop spinning.
    let emptied = async {
        while !q.is_empty() {
            tokio::task::yield_now().await;
        }
    };
    timeout(Duration::from_secs(10), emptied).await.expect("the workers empty the queue");
    q.shut_down_with_drain().await;
    for worker in workers {
        worker.await.unwrap();
    }
    assert!(!overlap.load(Ordering::SeqCst), "a key was held by two workers at once");
    assert!(processed.load(Ordering::SeqCst) >= KEYS.len());
    assert!(held.lock().is_empty());
}

#[tokio::test(start_paused = true)]
async fn delayed_keys_come_out_when_due_keeping_each_keys_earliest_time() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    let t0 = Instant::now();
    q.add_after("a", ms(30));
    q.add_after("b", ms(10));
    q.add_after("a", ms(20)); // earlier: wins
    q.add_after("c", ms(50));
    q.add_after("c", ms(100)); // later: ignored
    q.add_after("now", Duration::ZERO);
    assert_eq!(q.len(), 1, "a zero delay adds at once; the others wait");

    let mut got = Vec::new();
    for _ in 0..4 {
        let lease = q.get().await.unwrap();
        got.push((*lease.key(), Instant::now() - t0));
    }
    assert_eq!(got, [("now", ms(0)), ("b", ms(10)), ("a", ms(20)), ("c", ms(50))]);
    assert!(nothing_ready(&q).await, "each key came out once");
    assert_eq!(sample(&metrics.encode(), "workqueue_retries_total"), 6.0);
}

#[tokio::test(start_paused = true)]
async fn a_sleeping_getter_rearms_for_an_earlier_delayed_key() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    let t0 = Instant::now();
    q.add_after("late", Duration::from_secs(3600));
    let getter = tokio::spawn({
        let q = q.clone();
        async move { (*q.get().await.unwrap().key(), Instant::now()) }
    });
    tokio::task::yield_now().await;
    q.add_after("soon", ms(5));
    assert_eq!(getter.await.unwrap(), ("soon", t0 + ms(5)));
}

#[tokio::test(start_paused = true)]
async fn several_keys_falling_due_together_wake_several_getters() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move {
                let lease = q.get().await.unwrap();
                // Keep holding it so each getter must take a different key.
                tokio::time::sleep(Duration::from_secs(1)).await;
                *lease.key()
            })
        })
        .collect();
    tokio::task::yield_now().await;
    for key in ["x", "y", "z"] {
        q.add_after(key, ms(10));
    }
    let mut got: Vec<_> = Vec::new();
    for getter in getters {
        got.push(getter.await.unwrap());
    }
    got.sort();
    assert_eq!(got, ["x", "y", "z"]);
}

#[tokio::test(start_paused = true)]
async fn rate_limited_adds_back_off_exponentially_until_forgotten() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    let mut waits = Vec::new();
    for _ in 0..4 {
        let t = Instant::now();
        q.add_rate_limited("a");
        drop(q.get().await.unwrap());
        waits.push(Instant::now() - t);
    }
    assert_eq!(waits, [ms(5), ms(10), ms(20), ms(40)]);
    assert_eq!(q.num_requeues(&"a"), 4);

    q.forget(&"a");
    assert_eq!(q.num_requeues(&"a"), 0);
    let t = Instant::now();
    q.add_rate_limited("a");
    drop(q.get().await.unwrap());
    assert_eq!(Instant::now() - t, ms(5));
}

#[tokio::test(start_paused = true)]
async fn a_key_failing_while_held_is_retried_after_release() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    q.add("a");
    let lease = q.get().await.unwrap();
    q.add_rate_limited("a");
    tokio::time::sleep(ms(50)).await;
    assert!(nothing_ready(&q).await, "due, but still held");
    drop(lease);
    assert_eq!(*q.get().await.unwrap().key(), "a");
}

#[test]
fn rejects_a_rate_limit_that_never_retries() {
    let metrics = Metrics::new();
    let config = RateLimitConfig { burst: 0, ..RateLimitConfig::default() };
    assert_eq!(WorkQueue::<&str>::new(config, metrics.workqueue("bad")).unwrap_err(), QueueError::RateLimitBurst);
}

#[tokio::test(start_paused = true)]
async fn shut_down_releases_getters_at_once_and_ignores_later_adds() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    q.add("held");
    let held = q.get().await.unwrap();
    let waiting = tokio::spawn({
        let q = q.clone();
        async move { q.get().await.is_none() }
    });
    tokio::task::yield_now().await;
    q.add_after("delayed", ms(10));
    // Queued but not yet taken by the woken getter: shutdown comes first.
    q.add("queued");
    q.shut_down();
    assert!(waiting.await.unwrap());
    assert!(q.get().await.is_none(), "queued keys are not handed out after shutdown");
    q.add("new");
    q.add_after("new", ms(1));
    tokio::time::sleep(ms(100)).await;
    assert!(q.get().await.is_none());
    assert_eq!(*held.key(), "held", "leases out stay valid");
}

#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_waits_for_leases_out() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    q.add("a");
    q.add("b");
    let a = q.get().await.unwrap();
    let b = q.get().await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(q.get().await.is_none(), "no new keys while draining");
    drop(a);
    tokio::task::yield_now().await;
    assert!(!drain.is_finished());
    drop(b);
    timeout(ms(1), drain).await.expect("drained once the last lease was released").unwrap();
    // Nothing out: returns at once.
    timeout(ms(1), q.shut_down_with_drain()).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_worker_releases_its_key() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    q.add("a");
    let worker = tokio::spawn({
        let q = q.clone();
        async move {
            let _lease = q.get().await.unwrap();
            std::future::pending::<()>().await;
        }
    });
    tokio::task::yield_now().await;
    q.add("a");
    assert!(nothing_ready(&q).await);
    worker.abort();
    _ = worker.await;
    assert_eq!(*q.get().await.unwrap().key(), "a");
}

#[tokio::test(start_paused = true)]
async fn metrics_follow_the_queue() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    q.add("a");
    q.add("a");
    q.add("b");
    q.add_rate_limited("c");
    let text = metrics.encode();
    assert_eq!(sample(&text, "workqueue_depth"), 2.0);
    assert_eq!(sample(&text, "workqueue_adds_total"), 2.0);
    assert_eq!(sample(&text, "workqueue_retries_total"), 1.0);

    tokio::time::sleep(ms(250)).await;
    let a = q.get().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let b = q.get().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let text = metrics.encode();
    assert_eq!(sample(&text, "workqueue_depth"), 1.0, "c fell due and waits");
    assert_eq!(sample(&text, "workqueue_adds_total"), 3.0);
    assert_eq!(sample(&text, "workqueue_queue_duration_seconds_count"), 2.0);
    assert_eq!(sample(&text, "workqueue_queue_duration_seconds_sum"), 0.25 + 2.25);
    assert_eq!(sample(&text, "workqueue_unfinished_work_seconds"), 3.0 + 1.0);
    assert_eq!(sample(&text, "workqueue_longest_running_processor_seconds"), 3.0);

    drop(a);
    drop(b);
    let text = metrics.encode();
    assert_eq!(sample(&text, "workqueue_work_duration_seconds_count"), 2.0);
    assert_eq!(sample(&text, "workqueue_work_duration_seconds_sum"), 4.0);
    assert_eq!(sample(&text, "workqueue_unfinished_work_seconds"), 0.0);
    assert!(text.contains(r#"workqueue_work_duration_seconds_bucket{le="10.0",name="test",controller="test"} 2"#), "{text}");

    drop(q);
    assert_eq!(sample(&metrics.encode(), "workqueue_depth"), 0.0, "a dropped queue takes its keys out of the depth");
}

#[tokio::test(start_paused = true)]
async fn a_key_carries_every_reason_it_was_queued_for_until_a_worker_takes_it() {
    let metrics = Metrics::new();
    let q = queue(&metrics);
    q.add_for("a", Reason::Owned);
    q.add_for("a", Reason::Changed);
    let lease = q.get().await.unwrap();
    assert_eq!(lease.reasons().to_string(), "changed,owned");
    // Queued again while held: its new reasons wait for the next worker.
    q.add_for("a", Reason::Mapped);
    drop(lease);
    assert_eq!(q.get().await.unwrap().reasons().to_string(), "mapped");

    // Delayed adds say why they were delayed, and merge with what arrives meanwhile.
    q.add_rate_limited("b");
    q.add_after("c", ms(10));
    q.add_for("c", Reason::Resync);
    assert_eq!(q.get().await.unwrap().reasons().to_string(), "resync", "c is queued at once by the resync");
    tokio::time::sleep(ms(20)).await;
    let mut seen: Vec<String> = Vec::new();
    for _ in 0..2 {
        let lease = q.get().await.unwrap();
        seen.push(format!("{}:{}", lease.key(), lease.reasons()));
    }
    seen.sort();
    assert_eq!(seen, ["b:retry", "c:requeue"]);
    q.add("d");
    assert_eq!(q.get().await.unwrap().reasons().to_string(), "-");
}

#[tokio::test(start_paused = true)]
async fn live_changes_go_before_background_work_which_ages_into_turns() {
    let metrics = Metrics::new();
    let q: WorkQueue<&'static str> = queue(&metrics).with_max_wait(Duration::from_secs(10));
    for key in ["r1", "r2", "r3"] {
        q.add_for(key, Reason::Resync);
    }
    q.add_for("live1", Reason::Changed);
    q.add_for("live2", Reason::Owned);
    // A resync key that changes meanwhile moves ahead (the higher of its reasons).
    q.add_for("r3", Reason::Changed);
    let text = metrics.encode();
    let depth = |priority: &str| {
        let line = format!(r#"workqueue_depth{{name="test",controller="test",priority="{priority}"}} "#);
        text.lines().find_map(|l| l.strip_prefix(&line)).map(|v| v.parse::<f64>().unwrap())
    };
    assert_eq!((depth("0"), depth("-100")), (Some(3.0), Some(2.0)), "r3 moved lanes:\n{text}");
    let order = |n: usize| {
        let q = q.clone();
        async move {
            let mut got = Vec::new();
            for _ in 0..n {
                let lease = q.get().await.unwrap();
                got.push(*lease.key());
            }
            got
        }
    };
    assert_eq!(order(3).await, ["live1", "live2", "r3"]);
    assert_eq!(order(2).await, ["r1", "r2"], "then the background lane, in order");

    // A steady stream of changes: without aging the resync keys would wait forever.
    q.add_for("b1", Reason::Listed);
    q.add_for("b2", Reason::Listed);
    for i in 0..4 {
        q.add_for(["l0", "l1", "l2", "l3"][i], Reason::Changed);
    }
    assert_eq!(order(2).await, ["l0", "l1"], "young background keys wait");
    tokio::time::advance(Duration::from_secs(11)).await;
    assert_eq!(order(4).await, ["b1", "l2", "b2", "l3"], "aged, they take turns with the live lane");
    assert_eq!(sample(&metrics.encode(), "workqueue_starved_total"), 2.0);
}

#[tokio::test]
async fn a_queue_that_worked_off_a_big_list_gives_its_room_back() {
    let metrics = Metrics::new();
    let q: WorkQueue<String> = WorkQueue::new(RateLimitConfig::default(), metrics.workqueue("test")).unwrap();
    for i in 0..100_000 {
        q.add_for(format!("key-{i}"), if i % 2 == 0 { Reason::Listed } else { Reason::Changed });
    }
    let full = q.shared.state.lock().room();
    assert!(full >= 200_000, "room for every key in the table and its lane: {full}");
    for _ in 0..99_990 {
        drop(q.get().await.unwrap());
    }
    let idle = q.shared.state.lock().room();
    assert!(idle < 5_000, "ten keys left, room for {idle}");
    for _ in 0..10 {
        drop(q.get().await.unwrap());
    }
    assert_eq!(q.len(), 0);
}
