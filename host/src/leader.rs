//! Leader election over a `coordination.k8s.io/v1` Lease, as client-go does it: the leader
//! renews the lease every retry period; a standby takes it over once it has seen no renewal for
//! a whole lease duration (measured on its own clock, so clocks need not agree). A leader that
//! cannot renew within the renew deadline steps down before anyone can take over. On shutdown
//! the leader releases the lease so a standby takes over at once.
//!
//! Standbys keep their caches warm; only the leader's workers run and only the leader writes
//! (see [`Leadership`]).

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub lease_name: String,
    pub lease_namespace: String,
    /// This host's identity in the lease (pod name, or hostname plus a random suffix).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(lease_name: &str, lease_namespace: &str, identity: &str) -> Self {
        LeaderConfig {
            lease_name: lease_name.into(),
            lease_namespace: lease_namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Whether this host leads now. Cheap to clone and to ask.
#[derive(Clone)]
pub struct Leadership(watch::Receiver<bool>);

impl Leadership {
    /// For a host without leader election: always the leader.
    pub fn always() -> Self {
        Leadership(watch::channel(true).1)
    }

    pub fn is_leader(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until leadership is `leading` (returns at once if it already is). `false` if the
    /// elector is gone.
    pub async fn wait_for(&mut self, leading: bool) -> bool {
        self.0.wait_for(|l| *l == leading).await.is_ok()
    }
}

#[derive(Debug, thiserror::Error)]
enum LeaseError {
    #[error("lease {0} is held by {1}")]
    HeldBy(String, String),
    #[error("lease request failed: {0}")]
    Api(#[from] kube::Error),
}

pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    leading: watch::Sender<bool>,
    status: Gauge,
    /// The last lease record seen and when it was first seen (local clock).
    observed: Option<(String, Instant)>,
}

impl LeaderElector {
    /// `status` is `leader_election_master_status`: 1 while leading.
    pub fn new(client: Client, config: LeaderConfig, status: Gauge) -> (Self, Leadership) {
        let (leading, rx) = watch::channel(false);
        let api = Api::namespaced(client, &config.lease_namespace);
        (LeaderElector { api, config, leading, status, observed: None }, Leadership(rx))
    }

    /// Campaigns, leads and renews until `shutdown`, then releases the lease if held.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut last_renewal: Option<Instant> = None;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(()) => {
                    last_renewal = Some(Instant::now());
                    self.set_leading(true);
                }
                Err(e) => {
                    let lost = last_renewal.is_some_and(|t| t.elapsed() >= self.config.renew_deadline);
                    if self.is_leading() && lost {
                        tracing::warn!(lease = %self.config.lease_name, "lost leadership: could not renew for {:?}: {e}", self.config.renew_deadline);
                        self.set_leading(false);
                        last_renewal = None;
                    } else if self.is_leading() {
                        tracing::warn!(lease = %self.config.lease_name, "renewing the lease failed, retrying: {e}");
                    } else {
                        tracing::debug!(lease = %self.config.lease_name, "standing by: {e}");
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
        if self.is_leading() {
            self.release().await;
        }
    }

    fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    fn set_leading(&mut self, leading: bool) {
        if self.is_leading() != leading {
            tracing::info!(lease = %self.config.lease_name, identity = %self.config.identity, "{}", if leading { "became the leader" } else { "standing by" });
        }
        self.status.set(i64::from(leading));
        self.leading.send_replace(leading);
    }

    async fn try_acquire_or_renew(&mut self) -> Result<(), LeaseError> {
        let now = MicroTime(Timestamp::now());
        let name = &self.config.lease_name;
        let Some(mut lease) = self.api.get_opt(name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
                spec: Some(self.spec(now.clone(), now, 0)),
            };
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
        if !ours && !holder.is_empty() && first_seen.elapsed() < self.config.lease_duration {
            return Err(LeaseError::HeldBy(name.clone(), holder));
        }
        let (acquired, transitions) = if ours {
            (spec.acquire_time.clone().unwrap_or(now.clone()), spec.lease_transitions.unwrap_or(0))
        } else {
            (now.clone(), spec.lease_transitions.unwrap_or(0) + 1)
        };
        lease.spec = Some(self.spec(acquired, now, transitions));
        // Replace carries the resourceVersion we read: a concurrent taker makes this a 409.
        self.api.replace(name, &PostParams::default(), &lease).await?;
        Ok(())
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
    async fn release(&mut self) {
        self.set_leading(false);
        let name = &self.config.lease_name;
        let result = async {
            let mut lease = self.api.get(name).await?;
            let Some(spec) = lease.spec.as_mut() else { return Ok(()) };
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(());
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            self.api.replace(name, &PostParams::default(), &lease).await.map(drop)
        }
        .await;
        match result {
            Ok(()) => tracing::info!(lease = %name, "released the lease"),
            Err(e) => tracing::warn!(lease = %name, "could not release the lease (a standby takes over when it expires): {e}"),
        }
    }
}
