//! Timing for the benchmark binaries: the mean time of an operation over a time budget.

use std::time::{Duration, Instant};

/// Runs `op` 200 times to warm up, then repeatedly for about `budget`, and returns the mean time
/// per call.
pub async fn measure<F: AsyncFnMut()>(budget: Duration, mut op: F) -> Duration {
    const BATCH: u32 = 50;
    for _ in 0..200 {
        op().await;
    }
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
