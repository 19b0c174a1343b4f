//! Shard Leases: how a replica holds its membership (a Lease named after itself, labelled with
//! the ring, renewed and fenced by [`crate::leader`]) and what state a shard is in, as
//! kubernetes-controller-sharding defines the states (`pkg/sharding/leases`): ready, expired,
//! uncertain (available: objects stay), dead (released, or taken by the assigner), orphaned
//! (dead for a minute: the Lease is deleted).
//!
//! The sharder reads those states off the record's times (`renewTime + leaseDurationSeconds`
//! against its own clock). [`Observed`] measures them as a standby does in [`crate::leader`]:
//! from when the assigner first saw the record change, on its own clock, so clocks need not
//! agree — a record the assigner has just begun watching is ready for a whole lease duration.
//! [`from_record`] is the sharder's rule, for `kubewasm shards`.
//!
//! Whoever may write Leases in the namespace can make one look like a shard, so the assigner
//! trusts a Lease no further than it can watch it: it joins the ring only once it has been seen
//! renewed, its duration counts for at most this host's own ([`LEASE_DURATION`]), and a Lease
//! deleted while held stays in force until its term could have run out (its holder may still be
//! reconciling under it).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::{Claim, PLUGINS_ANNOTATION, RING_LABEL};
use crate::leader::{LEASE_DURATION, LeaderConfig};

/// How long a dead shard's Lease stays before it is deleted (the sharder's `leaseTTL`).
pub const ORPHAN_AFTER: Duration = Duration::from_secs(60);
/// A Lease without `leaseDurationSeconds` is taken to have this one (the sharder's default).
const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// A shard's state, ordered as the sharder orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ShardState {
    Unknown,
    Orphaned,
    Dead,
    Uncertain,
    Expired,
    Ready,
}

impl ShardState {
    pub const ALL: [ShardState; 5] = [ShardState::Orphaned, ShardState::Dead, ShardState::Uncertain, ShardState::Expired, ShardState::Ready];

    /// Whether objects may be assigned to (and stay on) the shard.
    pub fn is_available(self) -> bool {
        self >= ShardState::Uncertain
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ShardState::Unknown => "unknown",
            ShardState::Orphaned => "orphaned",
            ShardState::Dead => "dead",
            ShardState::Uncertain => "uncertain",
            ShardState::Expired => "expired",
            ShardState::Ready => "ready",
        }
    }
}

/// The membership Lease of replica `identity` in `ring`: named after it, held by it, labelled
/// with the ring.
pub fn membership(ring: &str, identity: &str, namespace: &str) -> LeaderConfig {
    let mut config = LeaderConfig::new(identity, namespace, identity);
    config.labels = BTreeMap::from([(RING_LABEL.to_string(), ring.to_string())]);
    config
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref().filter(|h| !h.is_empty())
}

fn duration(lease: &Lease) -> Duration {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map_or(DEFAULT_LEASE_DURATION, Duration::from_secs)
}

/// Whether the Lease is held by the shard it is named after.
pub fn held_by_its_shard(lease: &Lease) -> bool {
    lease.metadata.name.as_deref().is_some_and(|name| holder(lease) == Some(name))
}

/// The sharder's rule: the state from the record's own times, at `now`.
pub fn from_record(lease: &Lease, now: Timestamp) -> ShardState {
    let Some(spec) = &lease.spec else { return ShardState::Unknown };
    let lease_duration = duration(lease);
    let to_expired = match (&spec.acquire_time, &spec.renew_time, spec.lease_duration_seconds) {
        (Some(_), Some(renewed), Some(_)) => {
            let expires = renewed.0.as_millisecond() + i64::try_from(lease_duration.as_millis()).unwrap_or(i64::MAX);
            expires - now.as_millisecond()
        }
        _ => 0,
    };
    let lease_ms = i64::try_from(lease_duration.as_millis()).unwrap_or(i64::MAX);
    if !held_by_its_shard(lease) {
        let orphan_ms = i64::try_from(ORPHAN_AFTER.as_millis()).unwrap_or(i64::MAX);
        return if to_expired + orphan_ms <= 0 { ShardState::Orphaned } else { ShardState::Dead };
    }
    match to_expired {
        t if t + lease_ms <= 0 => ShardState::Uncertain,
        t if t <= 0 => ShardState::Expired,
        _ => ShardState::Ready,
    }
}

/// A shard Lease as the assigner has watched it.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The record (holder, renew time, transitions): a change means the holder is alive.
    record: String,
    /// When this record was first seen, on the assigner's clock.
    since: Instant,
    held: bool,
    /// The record's duration, at most [`LEASE_DURATION`].
    lease_duration: Duration,
    /// Whether its holder has been seen renewing it since it was first watched.
    renewed: bool,
    /// Deleted while held: kept until its term has run out.
    deleted: bool,
    /// The sharded plugins it runs, by name (its annotation).
    claims: BTreeMap<String, Claim>,
    /// The Lease as last seen (its resourceVersion, for taking it).
    pub lease: Lease,
}

impl Observed {
    pub fn new(lease: Lease, now: Instant) -> Self {
        let claims =
            lease.metadata.annotations.as_ref().and_then(|a| a.get(PLUGINS_ANNOTATION)).and_then(|json| serde_json::from_str(json).ok()).unwrap_or_default();
        Observed {
            record: record(&lease),
            since: now,
            held: held_by_its_shard(&lease),
            lease_duration: duration(&lease).min(LEASE_DURATION),
            renewed: false,
            deleted: false,
            claims,
            lease,
        }
    }

    /// Takes a newer state of the Lease; the clock restarts only if the record changed, and a
    /// change by its own holder is a renewal.
    pub fn update(&mut self, lease: Lease, now: Instant) {
        let changed = record(&lease) != self.record;
        let since = if changed { now } else { self.since };
        let renewed = self.renewed || (changed && held_by_its_shard(&lease));
        *self = Observed { since, renewed, ..Observed::new(lease, now) };
    }

    /// The Lease is gone from the API: its holder's term runs on until it expires.
    pub fn delete(&mut self) {
        self.deleted = true;
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted
    }

    /// Whether it may join the ring at `now`: available, and seen renewed.
    pub fn joins(&self, now: Instant) -> bool {
        self.renewed && self.state(now).is_available()
    }

    /// Whether the assigner knows all it will of this shard: renewed, or no longer ready.
    pub fn settled(&self, now: Instant) -> bool {
        self.renewed || self.state(now) != ShardState::Ready
    }

    /// The sharded plugins it runs, with what each claims.
    pub fn claims(&self) -> &BTreeMap<String, Claim> {
        &self.claims
    }

    pub fn state(&self, now: Instant) -> ShardState {
        let unchanged = now.saturating_duration_since(self.since);
        if !self.held {
            return if unchanged >= ORPHAN_AFTER { ShardState::Orphaned } else { ShardState::Dead };
        }
        if self.deleted {
            // Nothing to take: its holder's fence ends its term on the same clock.
            return match unchanged {
                u if u >= self.lease_duration + ORPHAN_AFTER => ShardState::Orphaned,
                u if u >= self.lease_duration => ShardState::Dead,
                _ => ShardState::Ready,
            };
        }
        if unchanged >= 2 * self.lease_duration {
            ShardState::Uncertain
        } else if unchanged >= self.lease_duration {
            ShardState::Expired
        } else {
            ShardState::Ready
        }
    }

    pub fn lease_duration(&self) -> Duration {
        self.lease_duration
    }

    /// When the state next changes by itself (time passing).
    pub fn next_change(&self) -> Instant {
        let marks: &[Duration] = match (self.held, self.deleted) {
            (false, _) => &[ORPHAN_AFTER],
            (true, true) => &[self.lease_duration, self.lease_duration + ORPHAN_AFTER],
            (true, false) => &[self.lease_duration, self.lease_duration * 2],
        };
        let now = Instant::now();
        marks.iter().map(|m| self.since + *m).find(|at| *at > now).unwrap_or(now + Duration::from_secs(3600))
    }
}

/// `kubewasm shards`: the ring's members, their states (the sharder's rule, at `now`), when each
/// renewed, and the primaries each has per plugin (from its Lease's annotation); `leader` is the
/// replica that assigns.
pub fn table(ring: &str, leases: &[Lease], leader: Option<&str>, now: Timestamp) -> String {
    let mut rows = vec![["SHARD".to_string(), "STATE".into(), "HOLDER".into(), "RENEWED".into(), "OBJECTS".into()]];
    let mut total = 0u64;
    let mut sorted: Vec<&Lease> = leases.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for lease in sorted {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let renewed = lease.spec.as_ref().and_then(|s| s.renew_time.as_ref()).map_or("never".to_string(), |t| {
            let ago = (now.as_millisecond() - t.0.as_millisecond()).max(0) / 1000;
            format!("{ago}s ago")
        });
        let counts: BTreeMap<String, u64> = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(super::OBJECTS_ANNOTATION))
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        total += counts.values().sum::<u64>();
        let objects = if counts.is_empty() { "-".to_string() } else { counts.iter().map(|(p, n)| format!("{p}={n}")).collect::<Vec<_>>().join(" ") };
        let mut shard = name.clone();
        if leader == Some(name.as_str()) {
            shard.push_str(" (assigner)");
        }
        let holder = holder(lease).unwrap_or("-").to_string();
        rows.push([shard, from_record(lease, now).as_str().into(), holder, renewed, objects]);
    }
    let widths: Vec<usize> = (0..5).map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    let mut out = format!("ring {ring}: {} shard(s), {total} primaries\n", leases.len());
    for row in rows {
        let line: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn record(lease: &Lease) -> String {
    let spec = lease.spec.clone().unwrap_or_default();
    format!("{:?}/{:?}/{:?}", spec.holder_identity, spec.renew_time, spec.lease_transitions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    fn lease(name: &str, holder: Option<&str>, renewed: Timestamp, seconds: i32) -> Lease {
        Lease {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                acquire_time: Some(MicroTime(renewed)),
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(seconds),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn the_record_rule_is_the_sharders() {
        let now = Timestamp::now();
        let ago = |s: i64| now - jiff_span(s);
        assert_eq!(from_record(&lease("a", Some("a"), ago(5), 15), now), ShardState::Ready);
        assert_eq!(from_record(&lease("a", Some("a"), ago(20), 15), now), ShardState::Expired);
        assert_eq!(from_record(&lease("a", Some("a"), ago(31), 15), now), ShardState::Uncertain);
        assert_eq!(from_record(&lease("a", None, ago(5), 15), now), ShardState::Dead, "released");
        assert_eq!(from_record(&lease("a", Some("kubewasm-assigner"), ago(5), 30), now), ShardState::Dead, "taken by the assigner");
        assert_eq!(from_record(&lease("a", None, ago(90), 15), now), ShardState::Orphaned);
        assert!(ShardState::Uncertain.is_available() && !ShardState::Dead.is_available());
    }

    fn jiff_span(seconds: i64) -> k8s_openapi::jiff::SignedDuration {
        k8s_openapi::jiff::SignedDuration::from_secs(seconds)
    }

    #[test]
    fn the_table_shows_states_counts_and_the_assigner() {
        let now = Timestamp::now();
        let mut a = lease("a", Some("a"), now - jiff_span(2), 15);
        a.metadata.annotations = Some([(super::super::OBJECTS_ANNOTATION.to_string(), r#"{"e2e":101,"other":3}"#.to_string())].into());
        let b = lease("b", Some("kubewasm-assigner"), now - jiff_span(4), 30);
        let table = table("r", &[b, a], Some("a"), now);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "ring r: 2 shard(s), 104 primaries");
        assert_eq!(lines[2], "a (assigner)  ready  a                  2s ago   e2e=101 other=3");
        assert_eq!(lines[3], "b             dead   kubewasm-assigner  4s ago   -");
    }

    #[tokio::test(start_paused = true)]
    async fn observed_states_run_on_the_assigners_clock() {
        // A record renewed long ago by the shard's clock, but just seen: ready for a whole lease.
        let old = Timestamp::now() - jiff_span(3600);
        let mut seen = Observed::new(lease("a", Some("a"), old, 15), Instant::now());
        assert_eq!(seen.state(Instant::now()), ShardState::Ready);
        tokio::time::advance(Duration::from_secs(14)).await;
        // Renewed: the clock restarts.
        seen.update(lease("a", Some("a"), old + jiff_span(1), 15), Instant::now());
        tokio::time::advance(Duration::from_secs(14)).await;
        assert_eq!(seen.state(Instant::now()), ShardState::Ready);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(seen.state(Instant::now()), ShardState::Expired);
        tokio::time::advance(Duration::from_secs(15)).await;
        assert_eq!(seen.state(Instant::now()), ShardState::Uncertain);
        seen.update(lease("a", Some("kubewasm-assigner"), Timestamp::now(), 30), Instant::now());
        assert_eq!(seen.state(Instant::now()), ShardState::Dead);
        tokio::time::advance(ORPHAN_AFTER).await;
        assert_eq!(seen.state(Instant::now()), ShardState::Orphaned);
    }

    /// The audit's L2: a Lease nobody renews never joins the ring, whatever duration it claims
    /// (it counts for the host's own); a held Lease deleted stays in force until its term ran
    /// out.
    #[tokio::test(start_paused = true)]
    async fn a_lease_joins_once_renewed_lasts_the_hosts_term_at_most_and_outlives_its_deletion() {
        let now = Timestamp::now();
        let phantom = Observed::new(lease("phantom", Some("phantom"), now, i32::MAX), Instant::now());
        assert!(!phantom.joins(Instant::now()) && !phantom.settled(Instant::now()), "not seen renewed");
        tokio::time::advance(LEASE_DURATION).await;
        assert_eq!(phantom.state(Instant::now()), ShardState::Expired, "68 years claimed, the host's term counted");
        assert!(phantom.settled(Instant::now()));

        let mut live = Observed::new(lease("a", Some("a"), now, 15), Instant::now());
        live.update(lease("a", Some("a"), now + jiff_span(2), 15), Instant::now());
        assert!(live.joins(Instant::now()));
        live.delete();
        tokio::time::advance(Duration::from_secs(14)).await;
        assert_eq!(live.state(Instant::now()), ShardState::Ready, "deleted, but its holder's term may still run");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(live.state(Instant::now()), ShardState::Dead);
        tokio::time::advance(ORPHAN_AFTER).await;
        assert_eq!(live.state(Instant::now()), ShardState::Orphaned);
    }
}
