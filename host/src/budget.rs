//! The host-wide budget of plugin linear memory (`--plugin-memory-budget`). Each plugin version
//! reserves what its instances may grow to — its memory limit × (max-concurrency + 1: its
//! workers and its map-related task) — before it starts, and holds the [`Reservation`] as long
//! as it may run: dropping the guard gives the bytes back. So the plugins' memory limits together
//! never exceed what the host was given for them, and nothing is booked or released by hand: a
//! swap that fails drops the new version's guard and keeps the old one's.

use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::metrics::gauge::Gauge;

/// The budget; clones share it.
#[derive(Clone)]
pub struct MemoryBudget {
    inner: Arc<Inner>,
}

struct Inner {
    total: u64,
    reserved: Mutex<u64>,
    /// The bytes reserved by all plugins together (`kubewasm_plugin_memory_budget_bytes{state="reserved"}`).
    gauge: Gauge,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "needs {needed} bytes of plugin memory ({per_instance} per instance × {instances} instances: max-concurrency + 1), \
     but only {available} of the host's {total} (--plugin-memory-budget) are free: lower its memory limit or \
     max-concurrency (`[kubewasm] memory-mib`, `max-concurrency` in NAME.toml), or raise the budget"
)]
pub struct BudgetError {
    pub needed: u64,
    pub per_instance: u64,
    pub instances: u64,
    pub available: u64,
    pub total: u64,
}

/// Bytes of the budget held for one plugin version; given back when dropped.
#[must_use = "the bytes are given back as soon as the reservation is dropped"]
pub struct Reservation {
    budget: Arc<Inner>,
    bytes: u64,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reservation({} bytes)", self.bytes)
    }
}

impl MemoryBudget {
    /// A budget of `total` bytes whose reservations `gauge` follows.
    pub fn new(total: u64, gauge: Gauge) -> Self {
        MemoryBudget { inner: Arc::new(Inner { total, reserved: Mutex::new(0), gauge }) }
    }

    /// Reserves room for `workers` + 1 instances of `per_instance` bytes each, on top of what is
    /// held already (a new version's reservation is made while the old one still serves: both
    /// run for a moment).
    pub fn reserve(&self, per_instance: u64, workers: u32) -> Result<Reservation, BudgetError> {
        let instances = u64::from(workers) + 1;
        let needed = per_instance.saturating_mul(instances);
        let mut reserved = self.inner.reserved.lock();
        let available = self.inner.total.saturating_sub(*reserved);
        if needed > available {
            return Err(BudgetError { needed, per_instance, instances, available, total: self.inner.total });
        }
        *reserved += needed;
        self.inner.gauge.set(i64::try_from(*reserved).unwrap_or(i64::MAX));
        Ok(Reservation { budget: self.inner.clone(), bytes: needed })
    }

    /// Holds `bytes` for one instance outside any plugin version's reservation (a `describe`
    /// before its plugin is admitted) until the guard is dropped.
    pub fn hold(&self, bytes: u64) -> Result<Reservation, BudgetError> {
        self.reserve(bytes, 0)
    }

    pub fn total(&self) -> u64 {
        self.inner.total
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> u64 {
        *self.inner.reserved.lock()
    }
}

impl Reservation {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut reserved = self.budget.reserved.lock();
        *reserved -= self.bytes;
        self.budget.gauge.set(i64::try_from(*reserved).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_count_every_worker_and_give_back_when_dropped() {
        let gauge = Gauge::default();
        let budget = MemoryBudget::new(1000, gauge.clone());
        let a = budget.reserve(100, 3).unwrap();
        assert_eq!((a.bytes(), gauge.get()), (400, 400), "limit × (max-concurrency + 1)");
        let refused = budget.reserve(100, 6).unwrap_err();
        assert_eq!((refused.needed, refused.available), (700, 600));
        assert!(refused.to_string().contains("--plugin-memory-budget"), "{refused}");
        let b = budget.reserve(100, 5).unwrap();
        assert_eq!(gauge.get(), 1000);
        // A new version of `a` is reserved beside the old one, which still serves: no room.
        assert!(budget.reserve(100, 0).is_err());
        drop(b);
        assert_eq!((budget.reserved(), gauge.get()), (400, 400));
        let a2 = budget.reserve(50, 7).unwrap();
        drop(a);
        assert_eq!(budget.reserved(), a2.bytes());
        drop(a2);
        assert_eq!((budget.reserved(), gauge.get()), (0, 0));
    }

    #[test]
    fn a_huge_ask_is_refused_not_wrapped() {
        let budget = MemoryBudget::new(1 << 30, Gauge::default());
        let refused = budget.reserve(u64::MAX, u32::MAX).unwrap_err();
        assert_eq!(refused.needed, u64::MAX);
        assert_eq!(budget.reserved(), 0);
    }
}
