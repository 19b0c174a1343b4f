//! Leader election over a `coordination.k8s.io/v1` Lease, as client-go does it: the leader
//! renews the lease every retry period; a standby takes it over once it has seen no renewal for
//! a whole lease duration (measured on its own clock, so clocks need not agree). On shutdown the
//! leader releases the lease so a standby takes over at once.
//!
//! Leadership is fenced by time, not only by what the last renewal said. Every Lease request is
//! bounded by the renew deadline, and a term lasts until `renew deadline` after the start of the
//! last successful renewal: after that instant [`Leadership::is_leader`] is false whatever the
//! elector is doing (blocked on a black-holed connection, or the whole process stopped). A
//! standby can only take over a lease duration after it last saw the record change, which is
//! later than the moment the old leader stopped (renew deadline < lease duration), so two hosts
//! never write at once — up to the time a request takes from the last check to the wire, which
//! is why writers check just before sending and cancel what is in flight when the term ends.
//!
//! A host that loses its term goes back to standby with its caches warm and campaigns again
//! (rather than exiting, as controller-runtime does): it writes nothing until it holds the Lease
//! again, and takes over at once if the other host goes away.
//!
//! The same elector holds a shard's membership Lease (`shard`): a Lease named after the host,
//! carrying the ring's label and the annotations the host publishes about itself, written with
//! every renewal (so they cost no request of their own).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a Lease of this host lasts unrenewed (client-go's default).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub lease_name: String,
    pub lease_namespace: String,
    /// This host's identity in the lease (pod name, or hostname plus a random suffix).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// Labels the Lease carries (merged into those others set on it).
    pub labels: BTreeMap<String, String>,
    /// Annotations written with each renewal, as they are then.
    pub annotations: Option<watch::Receiver<BTreeMap<String, String>>>,
}

impl LeaderConfig {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(lease_name: &str, lease_namespace: &str, identity: &str) -> Self {
        LeaderConfig {
            lease_name: lease_name.into(),
            lease_namespace: lease_namespace.into(),
            identity: identity.into(),
            lease_duration: LEASE_DURATION,
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            labels: BTreeMap::new(),
            annotations: None,
        }
    }
}

/// Where this host stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Term {
    Standby,
    /// Leading until the instant, or for good (`None`: no election), since `since` (when the
    /// request that began this term was sent).
    Leading {
        until: Option<Instant>,
        since: Instant,
    },
}

/// Whether this host leads now. Cheap to clone and to ask.
#[derive(Clone)]
pub struct Leadership(watch::Receiver<Term>);

impl Leadership {
    /// For a host without leader election: always the leader.
    pub fn always() -> Self {
        Leadership(watch::channel(Term::Leading { until: None, since: Instant::now() }).1)
    }

    /// When the current term began, if this host leads now.
    pub fn since(&self) -> Option<Instant> {
        match *self.0.borrow() {
            Term::Leading { since, .. } if self.is_leader() => Some(since),
            _ => None,
        }
    }

    /// Whether this host may write now: it leads and its term has not run out.
    pub fn is_leader(&self) -> bool {
        match *self.0.borrow() {
            Term::Standby => false,
            Term::Leading { until, .. } => until.is_none_or(|until| Instant::now() < until),
        }
    }

    /// Waits until this host leads (at once if it does). `false` if the elector is gone.
    pub async fn wait_until_leading(&mut self) -> bool {
        loop {
            if self.is_leader() {
                return true;
            }
            if self.0.changed().await.is_err() {
                return false;
            }
        }
    }

    /// Resolves once this host does not lead: at once for a standby, else when the term runs
    /// out or the elector steps down, whichever comes first.
    pub async fn lost(&self) {
        let mut term = self.0.clone();
        loop {
            let current = *term.borrow_and_update();
            match current {
                Term::Standby => return,
                Term::Leading { until: Some(until), .. } if Instant::now() >= until => return,
                Term::Leading { until, .. } => {
                    let expiry = async {
                        match until {
                            Some(until) => tokio::time::sleep_until(until).await,
                            None => std::future::pending().await,
                        }
                    };
                    let mut expiry = std::pin::pin!(expiry);
                    tokio::select! {
                        changed = term.changed() => {
                            // No elector (any more): the term can only run out.
                            if changed.is_err() {
                                expiry.await;
                                return;
                            }
                        }
                        _ = &mut expiry => return,
                    }
                }
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum LeaseError {
    #[error("lease {0} is held by {1}")]
    HeldBy(String, String),
    #[error("lease request failed: {0}")]
    Api(#[from] kube::Error),
    #[error("lease request got no answer within {0:?}")]
    Timeout(Duration),
}

pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    term: watch::Sender<Term>,
    status: Gauge,
    /// How long each renewal took (while leading).
    renew: Histogram,
    /// The last lease record seen and when it was first seen (local clock).
    observed: Option<(String, Instant)>,
}

impl LeaderElector {
    /// `status` is `leader_election_master_status`: 1 while leading; `renew` is
    /// `kubewasm_leader_renew_duration_seconds`.
    pub fn new(client: Client, config: LeaderConfig, status: Gauge, renew: Histogram) -> (Self, Leadership) {
        let (term, rx) = watch::channel(Term::Standby);
        let api = Api::namespaced(client, &config.lease_namespace);
        (LeaderElector { api, config, term, status, renew, observed: None }, Leadership(rx))
    }

    /// Campaigns, leads and renews until `shutdown`, then releases the lease if held.
    pub async fn run(mut self, shutdown: CancellationToken) {
        loop {
            let started = Instant::now();
            // A leader's request may take until its term ends; a standby's, one retry period.
            let bound = match *self.term.borrow() {
                Term::Leading { until: Some(until), .. } => until.saturating_duration_since(started).max(Duration::from_millis(100)),
                _ => self.config.retry_period.max(Duration::from_secs(1)),
            };
            let renewing = self.leadership().is_leader();
            let attempt = tokio::time::timeout(bound, self.try_acquire_or_renew()).await.unwrap_or(Err(LeaseError::Timeout(bound)));
            if renewing {
                self.renew.observe(started.elapsed().as_secs_f64());
            }
            match attempt {
                Ok(()) => self.lead_until(started, started + self.config.renew_deadline),
                Err(e) if self.is_leading() => {
                    if self.leadership().is_leader() {
                        tracing::warn!(lease = %self.config.lease_name, "renewing the lease failed, retrying: {e}");
                    } else {
                        tracing::warn!(lease = %self.config.lease_name, "lost leadership: no renewal within {:?}: {e}", self.config.renew_deadline);
                        self.stand_by();
                    }
                }
                Err(e) => tracing::debug!(lease = %self.config.lease_name, "standing by: {e}"),
            }
            // Wake at the end of the term too, to report the loss when it happens.
            let term_end = match *self.term.borrow() {
                Term::Leading { until: Some(until), .. } => until,
                _ => Instant::now() + self.config.retry_period,
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.config.retry_period) => {}
                _ = tokio::time::sleep_until(term_end) => {}
            }
            if self.is_leading() && !self.leadership().is_leader() {
                tracing::warn!(lease = %self.config.lease_name, "lost leadership: no renewal within {:?}", self.config.renew_deadline);
                self.stand_by();
            }
        }
        if self.leadership().is_leader() {
            self.give_up().await;
        }
        self.stand_by();
    }

    fn leadership(&self) -> Leadership {
        Leadership(self.term.subscribe())
    }

    fn is_leading(&self) -> bool {
        matches!(*self.term.borrow(), Term::Leading { .. })
    }

    /// Extends the term to `until`; a new one begins at `started` when this host did not lead.
    fn lead_until(&mut self, started: Instant, until: Instant) {
        let since = match *self.term.borrow() {
            Term::Leading { since, .. } => since,
            Term::Standby => {
                tracing::info!(lease = %self.config.lease_name, identity = %self.config.identity, "became the leader");
                started
            }
        };
        self.status.set(1);
        self.term.send_replace(Term::Leading { until: Some(until), since });
    }

    fn stand_by(&mut self) {
        if self.is_leading() {
            tracing::info!(lease = %self.config.lease_name, identity = %self.config.identity, "standing by");
        }
        self.status.set(0);
        self.term.send_replace(Term::Standby);
    }

    async fn try_acquire_or_renew(&mut self) -> Result<(), LeaseError> {
        let now = MicroTime(Timestamp::now());
        let name = &self.config.lease_name;
        let Some(mut lease) = self.api.get_opt(name).await? else {
            let mut lease = Lease { metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() }, spec: Some(self.spec(now.clone(), now, 0)) };
            self.mark(&mut lease.metadata);
            self.api.create(&PostParams::default(), &lease).await?;
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        // A record that changes is alive; one unchanged for a lease duration has expired.
        let record = format!("{holder}/{:?}/{:?}", spec.renew_time, spec.lease_transitions);
        let first_seen = match &self.observed {
            Some((seen, at)) if *seen == record => *at,
            _ => {
                self.observed = Some((record, Instant::now()));
                Instant::now()
            }
        };
        let ours = holder == self.config.identity;
        // A record that still names this host but that this host no longer leads under (it lost
        // its term) is treated like anyone else's: wait for it to expire, so that a standby that
        // took over meanwhile is never cut short.
        let expired = first_seen.elapsed() >= self.config.lease_duration;
        let renewing = ours && self.leadership().is_leader();
        if !holder.is_empty() && !renewing && !expired {
            return Err(LeaseError::HeldBy(name.clone(), holder));
        }
        let (acquired, transitions) = if renewing {
            (spec.acquire_time.clone().unwrap_or(now.clone()), spec.lease_transitions.unwrap_or(0))
        } else {
            (now.clone(), spec.lease_transitions.unwrap_or(0) + 1)
        };
        lease.spec = Some(self.spec(acquired, now, transitions));
        self.mark(&mut lease.metadata);
        // Replace carries the resourceVersion we read: a concurrent taker makes this a 409.
        self.api.replace(name, &PostParams::default(), &lease).await?;
        Ok(())
    }

    /// Sets this host's labels and its current annotations, keeping what others set.
    fn mark(&self, metadata: &mut ObjectMeta) {
        if !self.config.labels.is_empty() {
            metadata.labels.get_or_insert_with(Default::default).extend(self.config.labels.clone());
        }
        if let Some(annotations) = &self.config.annotations {
            let now = annotations.borrow().clone();
            if !now.is_empty() {
                metadata.annotations.get_or_insert_with(Default::default).extend(now);
            }
        }
    }

    fn spec(&self, acquired: MicroTime, renewed: MicroTime, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs().try_into().unwrap_or(i32::MAX)),
            acquire_time: Some(acquired),
            renew_time: Some(renewed),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// Gives the lease up so that a standby need not wait for it to expire.
    async fn give_up(&mut self) {
        self.stand_by();
        let name = self.config.lease_name.clone();
        let bound = self.config.renew_deadline;
        let result = tokio::time::timeout(bound, async {
            let mut lease = self.api.get(&name).await?;
            let Some(spec) = lease.spec.as_mut() else { return Ok(()) };
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(());
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            self.api.replace(&name, &PostParams::default(), &lease).await.map(drop)
        })
        .await
        .unwrap_or(Err(kube::Error::Service(format!("no answer within {bound:?}").into())));
        match result {
            Ok(()) => tracing::info!(lease = %name, "released the lease"),
            Err(e) => tracing::warn!(lease = %name, "could not release the lease (a standby takes over when it expires): {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_term_ends_on_time_even_if_nobody_says_so() {
        let (tx, rx) = watch::channel(Term::Leading { until: Some(Instant::now() + Duration::from_secs(10)), since: Instant::now() });
        let leadership = Leadership(rx);
        assert!(leadership.is_leader());
        let lost = tokio::spawn({
            let leadership = leadership.clone();
            async move {
                leadership.lost().await;
                Instant::now()
            }
        });
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert!(leadership.is_leader());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!leadership.is_leader(), "the term ran out; the sender never changed it");
        let at = lost.await.unwrap();
        assert!(at.elapsed() < Duration::from_millis(10));
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn without_an_elector_leadership_is_never_lost() {
        let leadership = Leadership::always();
        assert!(leadership.is_leader());
        let lost = tokio::time::timeout(Duration::from_secs(3600), leadership.lost()).await;
        assert!(lost.is_err(), "a host without leader election leads for good");
    }

    #[tokio::test(start_paused = true)]
    async fn standing_by_ends_the_term_and_leading_again_is_awaited() {
        let (tx, rx) = watch::channel(Term::Leading { until: None, since: Instant::now() });
        let mut leadership = Leadership(rx);
        assert!(leadership.is_leader());
        let lost = tokio::spawn({
            let leadership = leadership.clone();
            async move { leadership.lost().await }
        });
        tx.send_replace(Term::Standby);
        lost.await.unwrap();
        assert!(!leadership.is_leader());
        let waiting = tokio::spawn(async move { leadership.wait_until_leading().await });
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(!waiting.is_finished());
        tx.send_replace(Term::Leading { until: Some(Instant::now() + Duration::from_secs(1)), since: Instant::now() });
        assert!(waiting.await.unwrap());
    }
}
