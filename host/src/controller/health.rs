//! How one version of a plugin is doing: how many reconciles it has run, and which objects its
//! last reconcile failed on (a fault, or an error result other than a conflict). An object counts
//! once however often it is retried, and stops counting once a reconcile of it succeeds: what is
//! measured is the share of objects a version is failing on now, not a rate of calls that
//! retries would inflate. The supervisor compares versions with it after a hot reload; the
//! controller only keeps the tally.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::resource::ObjectKey;

#[derive(Default)]
pub struct Tally {
    reconciles: AtomicU64,
    failing: Mutex<HashSet<ObjectKey>>,
}

/// A version's record at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Health {
    /// Reconciles this version has run (retries included).
    pub reconciles: u64,
    /// Cached primaries whose last reconcile by this version failed.
    pub failing: usize,
    /// Primaries cached now.
    pub objects: usize,
}

impl Tally {
    /// Records one reconcile of `key` that reached the plugin.
    pub fn record(&self, key: &ObjectKey, failed: bool) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        let mut failing = self.failing.lock();
        if failed {
            failing.insert(key.clone());
        } else if !failing.is_empty() {
            failing.remove(key);
        }
    }

    /// The record now; `cached` says whether a key's object is still cached (an object deleted
    /// while failing is not failing any more), `objects` how many are.
    pub fn health(&self, cached: impl Fn(&ObjectKey) -> bool, objects: usize) -> Health {
        let mut failing = self.failing.lock();
        failing.retain(|key| cached(key));
        Health { reconciles: self.reconciles.load(Ordering::Relaxed), failing: failing.len(), objects }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(Some("ns"), name)
    }

    #[test]
    fn an_object_counts_once_and_until_it_succeeds() {
        let tally = Tally::default();
        for _ in 0..5 {
            tally.record(&key("a"), true);
        }
        tally.record(&key("b"), true);
        tally.record(&key("c"), false);
        assert_eq!(tally.health(|_| true, 3), Health { reconciles: 7, failing: 2, objects: 3 });
        tally.record(&key("b"), false);
        assert_eq!(tally.health(|_| true, 3).failing, 1);
        // Deleted while failing: no longer counted.
        assert_eq!(tally.health(|k| *k != key("a"), 2), Health { reconciles: 8, failing: 0, objects: 2 });
    }
}
