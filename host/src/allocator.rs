//! What the process's allocator keeps of the memory the host has freed. glibc's malloc keeps
//! freed memory in its arenas (one per thread that allocated, up to eight per core) for the life
//! of the process unless asked to hand it back: loading plugins, listing caches and the churn of
//! cached objects replaced by newer versions leave tens of MiB freed but resident
//! (BENCHMARKS.md "Density", "Scale inside one host"). [`return_freed`] hands it back now;
//! [`run_janitor`] does whenever the arenas hold more than a threshold of it.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often the janitor looks, and how much freed memory it lets the arenas keep.
#[derive(Debug, Clone, Copy)]
pub struct Janitor {
    pub period: Duration,
    pub threshold: usize,
}

impl Default for Janitor {
    fn default() -> Self {
        Janitor { period: Duration::from_secs(10), threshold: 16 << 20 }
    }
}

/// Hands the memory the allocator holds freed back to the system.
pub fn return_freed() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Bytes freed but kept in the allocator's arenas (glibc's `mallinfo2().fordblks`); `None` where
/// the allocator does not say.
pub fn held_free() -> Option<usize> {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallinfo2 only reads the allocator's own statistics.
    return Some(unsafe { libc::mallinfo2() }.fordblks);
    #[cfg(not(target_env = "gnu"))]
    None
}

/// Every `period`, hands freed memory back when the arenas hold more than `threshold` of it,
/// until `shutdown`. Both calls walk the arenas' free lists (milliseconds for a heap of
/// hundreds of MiB), so they run on a blocking thread.
pub async fn run_janitor(janitor: Janitor, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(janitor.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let returned = tokio::task::spawn_blocking(move || {
            let held = held_free()?;
            (held > janitor.threshold).then(|| {
                return_freed();
                (held, held_free().unwrap_or(0))
            })
        })
        .await;
        if let Ok(Some((before, after))) = returned {
            tracing::debug!(before, after, "handed freed memory back to the system");
        }
    }
}

#[cfg(all(test, target_env = "gnu"))]
mod tests {
    use super::*;

    fn resident_bytes() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        statm.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap() * 4096
    }

    #[test]
    fn freed_memory_is_counted_and_handed_back() {
        // Small blocks, freed but for every hundredth: the arena cannot shrink from its top, so
        // only a trim gives the pages between the survivors back.
        let blocks: Vec<Vec<u8>> = (0..100_000).map(|i| vec![i as u8; 1000]).collect();
        let kept: Vec<Vec<u8>> = blocks.into_iter().step_by(100).collect();
        let held = held_free().unwrap();
        assert!(held > 50 << 20, "{held} bytes held free after freeing ~99 MB");
        let before = resident_bytes();
        return_freed();
        let after = resident_bytes();
        assert!(before.saturating_sub(after) > 40 << 20, "resident {before} bytes before the trim, {after} after");
        drop(kept);
    }
}
