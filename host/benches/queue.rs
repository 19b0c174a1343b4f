//! Workqueue throughput: add/get/done triples per second with metrics on, each case beside a
//! plain `tokio::sync::mpsc` channel moving the same keys, against the ≥ 1 M/s target.
//! Run with `cargo bench -p kubewasm --bench queue`; results go to BENCHMARKS.md ("Workqueue").

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubewasm::metrics::Metrics;
use kubewasm::queue::{RateLimitConfig, WorkQueue};
use kubewasm::resource::ObjectKey;
use tokio::runtime::{Builder, Runtime};
use tokio::sync::mpsc;

const KEYS: usize = 10_000;
const TARGET_PER_SEC: f64 = 1e6;
/// Each case runs one warm-up round, then rounds for `WINDOWS` windows of `WINDOW` each and
/// reports its best window: the machine is shared, and the best window is the least disturbed.
const WINDOWS: u32 = 5;
const WINDOW: Duration = Duration::from_millis(200);

fn main() {
    let keys: Arc<[ObjectKey]> = (0..KEYS).map(|i| ObjectKey::new(Some("default"), &format!("object-{i}"))).collect();
    let metrics = Arc::new(Metrics::new());
    let single = Builder::new_current_thread().enable_time().build().unwrap();
    let two = Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();

    println!("workqueue: {KEYS} distinct ObjectKeys, metrics on; ops = add/get/done triples (send/recv pairs for mpsc)");
    println!("{:<52} {:>12} {:>10} {:>10}", "case", "ops/s", "vs 1 M/s", "vs mpsc");

    // One queue per case, reused by its rounds: each round leaves it as it found it.
    let q = || WorkQueue::new(RateLimitConfig::default(), metrics.workqueue("bench")).unwrap();
    let queue = q();
    compare("1 task: add→get→done per key", measure(&single, || interleaved(queue.clone(), keys.clone())), measure(&single, || mpsc_interleaved(keys.clone())));
    let queue = q();
    compare(
        "1 task: add all keys, then get→done all",
        measure(&single, || batched(queue.clone(), keys.clone(), 1)),
        measure(&single, || mpsc_batched(keys.clone())),
    );
    let queue = q();
    compare(
        "1 task: dedup, 4 adds per key, then get→done all",
        measure(&single, || batched(queue.clone(), keys.clone(), 4)),
        measure(&single, || mpsc_batched(keys.clone())),
    );
    let queue = q();
    compare(
        "2 workers on 2 threads: get→done→add back",
        measure(&two, || two_workers(queue.clone(), keys.clone())),
        measure(&two, || mpsc_two_workers(keys.clone())),
    );
}

/// Ops per second of the rounds `round` builds (each resolving to the number of ops it did).
fn measure<F: Future<Output = usize>>(rt: &Runtime, round: impl Fn() -> F) -> f64 {
    rt.block_on(round());
    let window = || {
        let (start, mut ops) = (Instant::now(), 0);
        while start.elapsed() < WINDOW {
            ops += rt.block_on(round());
        }
        ops as f64 / start.elapsed().as_secs_f64()
    };
    (0..WINDOWS).map(|_| window()).fold(0.0, f64::max)
}

fn compare(case: &str, queue: f64, mpsc: f64) {
    println!("{case:<52} {queue:>12.0} {:>9.2}× {:>9.2}×", queue / TARGET_PER_SEC, queue / mpsc);
    println!("{:<52} {mpsc:>12.0} {:>9.2}×", "  baseline: mpsc unbounded channel", mpsc / TARGET_PER_SEC);
}

async fn interleaved(q: WorkQueue<ObjectKey>, keys: Arc<[ObjectKey]>) -> usize {
    for key in keys.iter() {
        q.add(key.clone());
        drop(q.get().await);
    }
    keys.len()
}

async fn batched(q: WorkQueue<ObjectKey>, keys: Arc<[ObjectKey]>, adds_per_key: usize) -> usize {
    for _ in 0..adds_per_key {
        for key in keys.iter() {
            q.add(key.clone());
        }
    }
    while !q.is_empty() {
        drop(q.get().await);
    }
    keys.len()
}

/// Both workers keep every key circulating (so the queue ends each round full, and the next
/// round's adds deduplicate): the mutex is contended on every operation.
async fn two_workers(q: WorkQueue<ObjectKey>, keys: Arc<[ObjectKey]>) -> usize {
    for key in keys.iter() {
        q.add(key.clone());
    }
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move {
                for _ in 0..KEYS * 5 {
                    let key = q.get().await.unwrap().key().clone();
                    q.add(key);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    2 * KEYS * 5
}

async fn mpsc_interleaved(keys: Arc<[ObjectKey]>) -> usize {
    let (tx, mut rx) = mpsc::unbounded_channel();
    for key in keys.iter() {
        tx.send(key.clone()).unwrap();
        rx.recv().await.unwrap();
    }
    keys.len()
}

async fn mpsc_batched(keys: Arc<[ObjectKey]>) -> usize {
    let (tx, mut rx) = mpsc::unbounded_channel();
    for key in keys.iter() {
        tx.send(key.clone()).unwrap();
    }
    for _ in 0..keys.len() {
        rx.recv().await.unwrap();
    }
    keys.len()
}

/// mpsc has one receiver: the two workers share it behind an async mutex, the usual idiom.
async fn mpsc_two_workers(keys: Arc<[ObjectKey]>) -> usize {
    let (tx, rx) = mpsc::unbounded_channel();
    for key in keys.iter() {
        tx.send(key.clone()).unwrap();
    }
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (tx, rx) = (tx.clone(), rx.clone());
            tokio::spawn(async move {
                for _ in 0..KEYS * 5 {
                    let key = rx.lock().await.recv().await.unwrap();
                    tx.send(key).unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    2 * KEYS * 5
}
