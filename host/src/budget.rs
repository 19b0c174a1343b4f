//! The host-wide budget of plugin linear memory (`--plugin-memory-budget`). Every instance that
//! exists holds its memory limit in it: a plugin version reserves its first instance's before it
//! is admitted (so it can always run one call), and each further instance reserves its own when
//! the runtime makes it and gives it back when it goes (see `runtime`). So the memory limits of all
//! instances together never exceed what the host was given for them, while a plugin that is idle,
//! or busy on one key at a time, costs one instance's worth whatever its max-concurrency — fifty
//! small plugins fit the default budget. A [`Reservation`] is a guard: dropping it gives the bytes
//! back, so nothing is booked or released by hand (a swap that fails drops the new version's guard
//! and keeps the old one's).

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
    "needs {needed} bytes of plugin memory (its memory limit, for one instance), but only {available} of the host's \
     {total} (--plugin-memory-budget) are free: lower its memory limit (`[kubewasm] memory-mib` in NAME.toml), or \
     raise the budget"
)]
pub struct BudgetError {
    pub needed: u64,
    pub available: u64,
    pub total: u64,
}

/// Bytes of the budget held for one instance; given back when dropped.
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

    /// Reserves `bytes` (one instance's memory limit) on top of what is held already (a new
    /// version's first instance is reserved while the old one still serves: both run for a
    /// moment; a `describe` before its plugin is admitted holds its limit the same way).
    pub fn reserve(&self, bytes: u64) -> Result<Reservation, BudgetError> {
        let mut reserved = self.inner.reserved.lock();
        let available = self.inner.total.saturating_sub(*reserved);
        if bytes > available {
            return Err(BudgetError { needed: bytes, available, total: self.inner.total });
        }
        *reserved += bytes;
        self.inner.gauge.set(i64::try_from(*reserved).unwrap_or(i64::MAX));
        Ok(Reservation { budget: self.inner.clone(), bytes })
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
    fn reservations_add_up_and_give_back_when_dropped() {
        let gauge = Gauge::default();
        let budget = MemoryBudget::new(1000, gauge.clone());
        let a = budget.reserve(400).unwrap();
        assert_eq!((a.bytes(), gauge.get()), (400, 400));
        let refused = budget.reserve(700).unwrap_err();
        assert_eq!((refused.needed, refused.available), (700, 600));
        assert!(refused.to_string().contains("--plugin-memory-budget"), "{refused}");
        let b = budget.reserve(600).unwrap();
        assert_eq!(gauge.get(), 1000);
        assert!(budget.reserve(1).is_err(), "full");
        drop(b);
        assert_eq!((budget.reserved(), gauge.get()), (400, 400));
        let a2 = budget.reserve(350).unwrap();
        drop(a);
        assert_eq!(budget.reserved(), a2.bytes());
        drop(a2);
        assert_eq!((budget.reserved(), gauge.get()), (0, 0));
    }

    #[test]
    fn a_huge_ask_is_refused_not_wrapped() {
        let budget = MemoryBudget::new(1 << 30, Gauge::default());
        let _held = budget.reserve(1).unwrap();
        let refused = budget.reserve(u64::MAX).unwrap_err();
        assert_eq!(refused.needed, u64::MAX);
        assert_eq!(budget.reserved(), 1);
    }
}
