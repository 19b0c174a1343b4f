//! Keys waiting for a time before they are added to the queue (client-go's delaying queue): one
//! entry per key, the earliest requested time winning. Plain data; the queue decides when to look
//! at the clock and what "added" means.

use std::collections::{BTreeMap, HashMap};

use tokio::time::Instant;

use super::Key;

#[derive(Debug)]
pub(crate) struct Delayed<K> {
    /// Each key's slot in `by_time`.
    by_key: HashMap<K, (Instant, u64)>,
    /// Ordered by due time, then by arrival (`seq`) so equal times come out first-in first-out.
    by_time: BTreeMap<(Instant, u64), K>,
    seq: u64,
}

impl<K: Key> Delayed<K> {
    pub(crate) fn new() -> Self {
        Delayed { by_key: HashMap::new(), by_time: BTreeMap::new(), seq: 0 }
    }

    /// Schedules `key` for `at`, or moves it earlier if it is already waiting for a later time.
    /// Returns whether `at` became the earliest due time, i.e. whether sleepers must re-arm.
    pub(crate) fn insert(&mut self, key: K, at: Instant) -> bool {
        if let Some(&slot) = self.by_key.get(&key) {
            if slot.0 <= at {
                return false;
            }
            self.by_time.remove(&slot);
        }
        self.seq += 1;
        let slot = (at, self.seq);
        let earliest = self.next_due().is_none_or(|due| at < due);
        self.by_time.insert(slot, key.clone());
        self.by_key.insert(key, slot);
        earliest
    }

    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.by_time.first_key_value().map(|(&(at, _), _)| at)
    }

    /// Takes the earliest key whose time is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<K> {
        let entry = self.by_time.first_entry().filter(|e| e.key().0 <= now)?;
        let key = entry.remove();
        self.by_key.remove(&key);
        Some(key)
    }

    pub(crate) fn clear(&mut self) {
        self.by_key.clear();
        self.by_time.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn drain(delayed: &mut Delayed<&'static str>, now: Instant) -> Vec<&'static str> {
        std::iter::from_fn(|| delayed.pop_due(now)).collect()
    }

    #[test]
    fn pops_in_due_order_and_only_when_due() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut d = Delayed::new();
        assert!(d.insert("late", t0 + ms(30)));
        assert!(d.insert("early", t0 + ms(10)));
        assert!(!d.insert("middle", t0 + ms(20)));
        assert!(!d.insert("tie", t0 + ms(10)));
        assert_eq!(d.next_due(), Some(t0 + ms(10)));
        assert_eq!(drain(&mut d, t0), Vec::<&str>::new());
        assert_eq!(drain(&mut d, t0 + ms(20)), ["early", "tie", "middle"]);
        assert_eq!(drain(&mut d, t0 + ms(100)), ["late"]);
        assert_eq!(d.next_due(), None);
    }

    #[test]
    fn a_key_waits_once_for_its_earliest_time() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut d = Delayed::new();
        d.insert("a", t0 + ms(50));
        assert!(!d.insert("a", t0 + ms(80)), "a later time changes nothing");
        assert_eq!(d.next_due(), Some(t0 + ms(50)));
        assert!(d.insert("a", t0 + ms(5)), "an earlier time moves it");
        assert_eq!(d.next_due(), Some(t0 + ms(5)));
        assert_eq!(drain(&mut d, t0 + ms(1000)), ["a"]);
        d.insert("b", t0);
        d.clear();
        assert_eq!(drain(&mut d, t0 + ms(1000)), Vec::<&str>::new());
    }
}
