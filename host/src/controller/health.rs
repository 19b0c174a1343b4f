//! How one version of a plugin is doing: how many reconciles it has run, and which objects its
//! last reconcile failed on (a fault, or an error result other than a conflict). An object counts
//! once however often it is retried, and stops counting once a reconcile of it succeeds: what is
//! measured is the share of objects a version is failing on now, not a rate of calls that
//! retries would inflate. Trouble of the infrastructure ([`Judged::Nothing`]: the API server
//! unavailable, throttling or timing out, a call stalled on it) says nothing about the version
//! and is not recorded, so an outage inside the rollback window never rolls a good version back.
//! The supervisor compares versions with it after a hot reload; the controller only keeps the
//! tally.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::resource::ObjectKey;
use crate::runtime::{CallError, Fault, GuestErrorCode};

/// What one failed call says about the version that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// The version fails on the object.
    Failing,
    /// Not a failure of the version: another actor changed the object first (a conflict).
    Fine,
    /// Nothing: the infrastructure failed the call (`unavailable`, or stalled on the API).
    Nothing,
}

impl Judged {
    pub fn of(error: &CallError) -> Judged {
        match error {
            CallError::Plugin { code: GuestErrorCode::Conflict, .. } => Judged::Fine,
            CallError::Plugin { code: GuestErrorCode::Unavailable, .. } | CallError::Fault(Fault::Stalled(_)) => Judged::Nothing,
            CallError::Plugin { .. } | CallError::Fault(_) => Judged::Failing,
        }
    }
}

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
    /// Records one failed reconcile of `key`, as [`Judged::of`] its error.
    pub fn record_failure(&self, key: &ObjectKey, error: &CallError) {
        match Judged::of(error) {
            Judged::Failing => self.record(key, true),
            Judged::Fine => self.record(key, false),
            Judged::Nothing => {}
        }
    }

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

    #[test]
    fn the_infrastructures_trouble_says_nothing_about_the_version() {
        let tally = Tally::default();
        let error = |code| CallError::Plugin { code, message: String::new() };
        // A 503 storm (or APF's 429s) reaches the plugin as `unavailable`; a hung webhook stalls it.
        tally.record_failure(&key("a"), &error(GuestErrorCode::Unavailable));
        tally.record_failure(&key("b"), &CallError::Fault(Fault::Stalled(std::time::Duration::from_secs(65))));
        assert_eq!(tally.health(|_| true, 3), Health { reconciles: 0, failing: 0, objects: 3 });
        tally.record_failure(&key("a"), &error(GuestErrorCode::Other));
        tally.record_failure(&key("b"), &CallError::Fault(Fault::Deadline(std::time::Duration::from_secs(5))));
        tally.record_failure(&key("c"), &error(GuestErrorCode::Conflict));
        assert_eq!(tally.health(|_| true, 3), Health { reconciles: 3, failing: 2, objects: 3 });
        // An outage while an object fails leaves it failing: what it says is nothing new.
        tally.record_failure(&key("a"), &error(GuestErrorCode::Unavailable));
        assert_eq!(tally.health(|_| true, 3).failing, 2);
    }
}
