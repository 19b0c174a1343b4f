//! Quarantine of poison objects: which keys made the plugin fault how many times in a row, and
//! which of them are set aside. An object whose reconciles fault (trap, deadline, memory,
//! oversized result; not a call stalled on the API server, see [`is_object_fault`]) `after` times in a row is quarantined at the resourceVersion the plugin
//! last saw: the controller stops handing it to the plugin — no retry with backoff, no Event per
//! fault — until the object changes (another resourceVersion, or it leaves the cache) or the
//! plugin's version changes. So one poison object cannot keep a worker busy forever.
//!
//! A watched object whose `map-related` calls keep faulting is quarantined the same way, by
//! the same bookkeeping ([`Subject::Watched`]): one gauge, one listing for the status.
//!
//! Only the bookkeeping and its two series (`kubewasm_plugin_quarantined_objects`,
//! `kubewasm_plugin_quarantines_total`) live here; the controller decides what to skip and
//! records the Event.

use std::collections::HashMap;
use std::fmt;

use parking_lot::Mutex;

use crate::metrics::QuarantineMetrics;
use crate::resource::{Gvk, ObjectKey};
use crate::runtime::Fault;

/// What is quarantined: a primary (by `reconcile`), or a watched object (by `map-related`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    Primary(ObjectKey),
    Watched(Gvk, ObjectKey),
}

impl fmt::Display for Subject {
    /// A primary by its key (`ns/name`); a watched object by kind and key (`Pod.v1 ns/name`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Primary(key) => key.fmt(f),
            Subject::Watched(resource, key) => write!(f, "{resource} {key}"),
        }
    }
}

impl From<ObjectKey> for Subject {
    fn from(key: ObjectKey) -> Self {
        Subject::Primary(key)
    }
}

/// Faults in a row that quarantine an object, unless the host is told otherwise.
pub const DEFAULT_AFTER: u32 = 5;

/// Whether a fault says something about the object. An instance that could not even be
/// instantiated failed before it saw the object: that fault would hit any key. A call stalled on
/// the API server (a hung webhook, an outage) is the infrastructure's trouble; a deadline is
/// measured in the call's own time, so neither a slow API server nor a busy neighbour makes one.
pub fn is_object_fault(fault: &Fault) -> bool {
    !matches!(fault, Fault::Instantiate(_) | Fault::Stalled(_))
}

pub struct Quarantine {
    /// Faults in a row that quarantine a key; 0 turns quarantine off.
    after: u32,
    keys: Mutex<HashMap<Subject, Streak>>,
    metrics: QuarantineMetrics,
}

/// One key's faults since its last call that did not fault.
#[derive(Debug)]
struct Streak {
    faults: u32,
    /// Set once quarantined: the resourceVersion it was quarantined at.
    held_at: Option<String>,
}

/// A key that has just been quarantined.
#[derive(Debug, PartialEq, Eq)]
pub struct Entered {
    pub faults: u32,
}

/// The quarantined keys, for a status: the first few (in key order) and how many there are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub count: usize,
    pub first: Vec<Subject>,
}

impl Quarantine {
    pub fn new(after: u32, metrics: QuarantineMetrics) -> Self {
        Quarantine { after, keys: Mutex::default(), metrics }
    }

    /// Records a fault of `key` at `resource_version` (what the plugin was handed). Returns
    /// [`Entered`] when this fault quarantines it.
    pub fn fault(&self, key: &Subject, resource_version: &str) -> Option<Entered> {
        if self.after == 0 {
            return None;
        }
        let mut keys = self.keys.lock();
        let streak = keys.entry(key.clone()).or_insert(Streak { faults: 0, held_at: None });
        streak.faults += 1;
        if streak.faults < self.after || streak.held_at.is_some() {
            return None;
        }
        streak.held_at = Some(resource_version.to_string());
        let faults = streak.faults;
        self.metrics.objects.set(held(&keys) as i64);
        self.metrics.entered.inc();
        Some(Entered { faults })
    }

    /// A call for `key` ended without a fault: its streak is over.
    pub fn succeeded(&self, key: &Subject) {
        let mut keys = self.keys.lock();
        if !keys.is_empty() && keys.remove(key).is_some_and(|s| s.held_at.is_some()) {
            self.metrics.objects.set(held(&keys) as i64);
        }
    }

    /// Whether `key` stays quarantined, given the resourceVersion of the object now (`None`:
    /// not cached any more). An object that changed is released, and its streak starts over.
    /// `current` is asked only for a quarantined key: most keys are never parsed here.
    pub fn holds(&self, key: &Subject, current: impl FnOnce() -> Option<String>) -> bool {
        let mut keys = self.keys.lock();
        if keys.is_empty() {
            return false;
        }
        let Some(at) = keys.get(key).and_then(|s| s.held_at.as_deref()) else { return false };
        if current().as_deref() == Some(at) {
            return true;
        }
        keys.remove(key);
        self.metrics.objects.set(held(&keys) as i64);
        false
    }

    /// Lets every key go and forgets every streak: a new version of the plugin deserves a new
    /// try.
    pub fn clear(&self) {
        self.keys.lock().clear();
        self.metrics.objects.set(0);
    }

    /// The quarantined keys: at most `max` of them, and their count.
    pub fn listing(&self, max: usize) -> Listing {
        let keys = self.keys.lock();
        let mut held: Vec<&Subject> = keys.iter().filter(|(_, s)| s.held_at.is_some()).map(|(k, _)| k).collect();
        held.sort();
        Listing { count: held.len(), first: held.into_iter().take(max).cloned().collect() }
    }
}

fn held(keys: &HashMap<Subject, Streak>) -> usize {
    keys.values().filter(|s| s.held_at.is_some()).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Subject {
        Subject::Primary(ObjectKey::new(Some("ns"), name))
    }

    fn quarantine(after: u32) -> Quarantine {
        Quarantine::new(after, QuarantineMetrics::default())
    }

    #[test]
    fn the_kth_fault_in_a_row_quarantines_once() {
        let q = quarantine(3);
        assert_eq!(q.fault(&key("a"), "1"), None);
        assert_eq!(q.fault(&key("a"), "1"), None);
        assert_eq!(q.fault(&key("a"), "1"), Some(Entered { faults: 3 }));
        assert!(q.holds(&key("a"), || Some("1".into())));
        // Faults of a held key (a run that was already going) do not enter it again.
        assert_eq!(q.fault(&key("a"), "1"), None);
        assert_eq!(q.metrics.entered.get(), 1);
        assert_eq!(q.metrics.objects.get(), 1);
        assert!(!q.holds(&key("b"), || panic!("a key never quarantined is not looked at")));
    }

    #[test]
    fn a_call_without_a_fault_ends_the_streak() {
        let q = quarantine(2);
        assert_eq!(q.fault(&key("a"), "1"), None);
        q.succeeded(&key("a"));
        assert_eq!(q.fault(&key("a"), "1"), None, "the streak started over");
        assert_eq!(q.fault(&key("a"), "1"), Some(Entered { faults: 2 }));
        // Other keys keep their own streaks.
        assert_eq!(q.fault(&key("b"), "7"), None);
        assert_eq!(q.listing(10), Listing { count: 1, first: vec![key("a")] });
    }

    #[test]
    fn a_changed_or_vanished_object_is_released() {
        let q = quarantine(1);
        q.fault(&key("a"), "1");
        q.fault(&key("b"), "5");
        assert_eq!(q.metrics.objects.get(), 2);
        assert!(!q.holds(&key("a"), || Some("2".into())), "a new resourceVersion releases it");
        assert!(!q.holds(&key("a"), || Some("1".into())), "released for good, not held again");
        assert!(!q.holds(&key("b"), || None), "deleted (or no longer selected)");
        assert_eq!(q.metrics.objects.get(), 0);
        assert_eq!(q.listing(10), Listing::default());
        // Released with its streak gone: it takes `after` new faults again.
        assert_eq!(q.fault(&key("a"), "2"), Some(Entered { faults: 1 }));
        assert_eq!(q.metrics.entered.get(), 3);
    }

    #[test]
    fn a_new_version_releases_everything() {
        let q = quarantine(2);
        for name in ["a", "b"] {
            q.fault(&key(name), "1");
            q.fault(&key(name), "1");
        }
        q.fault(&key("c"), "1");
        q.clear();
        assert!(!q.holds(&key("a"), || Some("1".into())));
        assert_eq!(q.metrics.objects.get(), 0);
        assert_eq!(q.fault(&key("c"), "1"), None, "streaks start over too");
    }

    #[test]
    fn the_listing_is_capped_and_counts_all() {
        let q = quarantine(1);
        for i in 0..15 {
            q.fault(&key(&format!("k{i:02}")), "1");
        }
        let listing = q.listing(10);
        assert_eq!(listing.count, 15);
        assert_eq!(listing.first, (0..10).map(|i| key(&format!("k{i:02}"))).collect::<Vec<_>>());
    }

    #[test]
    fn watched_objects_share_the_bookkeeping_and_are_told_apart_from_primaries() {
        let q = quarantine(1);
        let pod = Subject::Watched(Gvk::new("", "v1", "Pod"), ObjectKey::new(Some("ns"), "a"));
        assert_eq!(q.fault(&pod, "3"), Some(Entered { faults: 1 }));
        assert!(!q.holds(&key("a"), || Some("3".into())), "the primary ns/a is another object");
        assert!(q.holds(&pod, || Some("3".into())));
        q.fault(&key("a"), "1");
        assert_eq!(q.metrics.objects.get(), 2, "one gauge");
        let listing = q.listing(10);
        assert_eq!(listing.first.iter().map(ToString::to_string).collect::<Vec<_>>(), ["ns/a", "Pod.v1 ns/a"]);
    }

    #[test]
    fn zero_turns_it_off() {
        let q = quarantine(0);
        for _ in 0..100 {
            assert_eq!(q.fault(&key("a"), "1"), None);
        }
        assert!(!q.holds(&key("a"), || Some("1".into())));
    }

    #[test]
    fn only_faults_of_the_call_itself_count() {
        assert!(is_object_fault(&Fault::Trap("unreachable".into())));
        assert!(is_object_fault(&Fault::Deadline(std::time::Duration::from_secs(1))));
        assert!(is_object_fault(&Fault::Memory { limit: 1, wanted: 2 }));
        assert!(!is_object_fault(&Fault::Instantiate("over the memory budget".into())));
        assert!(!is_object_fault(&Fault::Stalled(std::time::Duration::from_secs(65))), "waiting on the API server is not the object's fault");
    }
}
