//! The checker that no two hosts reconcile one object at once: the e2e guest (setting `trace`)
//! logs `e2e-trace start NS/NAME` as the first thing of each reconcile and `e2e-trace end
//! NS/NAME` as the last; each host's log stamps them (one clock: every host runs on this
//! machine). Per host, a key's reconciles run one at a time, so a start opens an interval and
//! the next end closes it; one left open (a host killed mid-reconcile, or a trap) lasts until the
//! host's next start of that key or its end. Intervals of one key from two hosts must not
//! overlap, over the whole test.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

/// One reconcile of `key` on `host`, from `start` to `end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    pub host: String,
    pub key: String,
    pub start: Timestamp,
    pub end: Timestamp,
}

/// The reconciles in one host's log; `ended` is when the host stopped (for a reconcile still
/// running then), else the last line's time.
pub fn intervals(host: &str, log: &str, ended: Option<Timestamp>) -> Vec<Interval> {
    let mut open: BTreeMap<String, Timestamp> = BTreeMap::new();
    let mut out = Vec::new();
    let mut last = None;
    for line in log.lines() {
        let Some(at) = line.split_whitespace().next().and_then(|t| t.parse::<Timestamp>().ok()) else { continue };
        last = Some(at);
        let Some(rest) = line.split("e2e-trace ").nth(1) else { continue };
        let mut words = rest.split_whitespace();
        let (Some(what), Some(key)) = (words.next(), words.next()) else { continue };
        match what {
            "start" => {
                if let Some(start) = open.insert(key.to_string(), at) {
                    out.push(Interval { host: host.into(), key: key.into(), start, end: at });
                }
            }
            "end" => {
                if let Some(start) = open.remove(key) {
                    out.push(Interval { host: host.into(), key: key.into(), start, end: at });
                }
            }
            _ => {}
        }
    }
    let end = ended.or(last).unwrap_or_else(Timestamp::now);
    out.extend(open.into_iter().map(|(key, start)| Interval { host: host.into(), key, start, end }));
    out
}

/// Pairs of intervals of one key from two hosts that overlap.
pub fn overlaps(all: &[Interval]) -> Vec<(Interval, Interval)> {
    let mut by_key: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
    for interval in all {
        by_key.entry(&interval.key).or_default().push(interval);
    }
    let mut out = Vec::new();
    for (_, mut list) in by_key {
        list.sort_by_key(|i| i.start);
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                if b.start >= a.end {
                    break;
                }
                if a.host != b.host {
                    out.push(((*a).clone(), (*b).clone()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_two_hosts_in_one_key_at_once_and_nothing_else() {
        let a = "2026-01-01T00:00:01.000000Z  INFO x: e2e-trace start n/k plugin=\"e2e\"\n\
                 2026-01-01T00:00:02.000000Z  INFO x: e2e-trace end n/k plugin=\"e2e\"\n\
                 2026-01-01T00:00:05.000000Z  INFO x: e2e-trace start n/j plugin=\"e2e\"\n";
        let b = "2026-01-01T00:00:02.500000Z  INFO x: e2e-trace start n/k\n\
                 2026-01-01T00:00:03.000000Z  INFO x: e2e-trace end n/k\n\
                 2026-01-01T00:00:05.500000Z  INFO x: e2e-trace start n/j\n\
                 2026-01-01T00:00:06.000000Z  INFO x: e2e-trace end n/j\n";
        let killed: Timestamp = "2026-01-01T00:00:05.600000Z".parse().unwrap();
        let mut all = intervals("a", a, Some(killed));
        all.extend(intervals("b", b, None));
        assert_eq!(all.len(), 4);
        let found = overlaps(&all);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].0.key.as_str(), found[0].0.host.as_str(), found[0].1.host.as_str()), ("n/j", "a", "b"));
        let later: Timestamp = "2026-01-01T00:00:05.400000Z".parse().unwrap();
        let mut all = intervals("a", a, Some(later));
        all.extend(intervals("b", b, None));
        assert!(overlaps(&all).is_empty(), "killed before b started");
    }
}
