//! Timing for the benchmark binaries: the mean time of an operation over a time budget, alone or
//! side by side with another.

use std::time::{Duration, Instant};

const WARM_UP: u32 = 200;

/// Rounds of a side-by-side measurement.
const ROUNDS: u32 = 7;

/// Runs `op` 200 times to warm up, then repeatedly for about `budget`, and returns the mean time
/// per call.
pub async fn measure<F: AsyncFnMut()>(budget: Duration, mut op: F) -> Duration {
    warm_up(&mut op).await;
    mean(budget, &mut op).await
}

/// Measures two operations in alternating rounds (7 of `budget / 7` each, after a warm-up of
/// both) and returns each one's median round mean. A shared VM's speed drifts by tens of percent
/// within seconds; alternating exposes both to the same drift, so their ratio holds where two
/// measurements one after the other would not.
pub async fn side_by_side<A: AsyncFnMut(), B: AsyncFnMut()>(budget: Duration, mut a: A, mut b: B) -> (Duration, Duration) {
    warm_up(&mut a).await;
    warm_up(&mut b).await;
    let round = budget / ROUNDS;
    let (mut a_rounds, mut b_rounds) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        a_rounds.push(mean(round, &mut a).await);
        b_rounds.push(mean(round, &mut b).await);
    }
    (median(a_rounds), median(b_rounds))
}

/// `side_by_side` of three operations: each round runs all three in turn.
pub async fn three_ways<A: AsyncFnMut(), B: AsyncFnMut(), C: AsyncFnMut()>(budget: Duration, mut a: A, mut b: B, mut c: C) -> (Duration, Duration, Duration) {
    warm_up(&mut a).await;
    warm_up(&mut b).await;
    warm_up(&mut c).await;
    let round = budget / ROUNDS;
    let mut rounds: [Vec<Duration>; 3] = Default::default();
    for _ in 0..ROUNDS {
        rounds[0].push(mean(round, &mut a).await);
        rounds[1].push(mean(round, &mut b).await);
        rounds[2].push(mean(round, &mut c).await);
    }
    let [a, b, c] = rounds.map(median);
    (a, b, c)
}

async fn warm_up<F: AsyncFnMut()>(op: &mut F) {
    for _ in 0..WARM_UP {
        op().await;
    }
}

async fn mean<F: AsyncFnMut()>(budget: Duration, op: &mut F) -> Duration {
    const BATCH: u32 = 50;
    let started = Instant::now();
    let mut n = 0u32;
    while started.elapsed() < budget {
        for _ in 0..BATCH {
            op().await;
        }
        n += BATCH;
    }
    started.elapsed() / n
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
