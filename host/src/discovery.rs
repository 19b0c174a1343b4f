//! Resolves kinds to the API's resources (plural name, namespaced or not) through API
//! discovery. Answers are cached. "Not served" is cached for a short while ([`MISS_TTL`]): a
//! kind asked for again and again (a typo, a CRD not installed yet, a plugin probing invented
//! kinds) costs one query per period, and a CRD installed meanwhile is seen within it. Callers
//! that act for a plugin take a token of its rate limit before a query that is not answered
//! from memory ([`Discovery::is_cached`]). Every query is bounded by the host's request timeout.

use std::collections::HashMap;
use std::time::Duration;

use kube::Client;
use kube::core::ApiResource;
use kube::discovery::Scope as KubeScope;
use parking_lot::RwLock;
use tokio::time::Instant;

use crate::resource::{Gvk, Scope};

/// A kind as the API serves it.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub api: ApiResource,
    pub scope: Scope,
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("the API server does not serve {0}")]
    NotServed(Gvk),
    #[error("API discovery of {gvk} failed: {source}")]
    Query {
        gvk: Gvk,
        #[source]
        source: kube::Error,
    },
    #[error("API discovery of {0} got no answer within {1:?}")]
    Timeout(Gvk, Duration),
}

impl DiscoveryError {
    /// Whether asking again later can help (the API server was unreachable).
    pub fn is_transient(&self) -> bool {
        matches!(self, DiscoveryError::Query { .. } | DiscoveryError::Timeout(..))
    }
}

/// How long a kind the API server does not serve is taken as not served without asking again.
pub const MISS_TTL: Duration = Duration::from_secs(10);
/// Kinds remembered as not served; past this, expired ones are forgotten, and all of them past
/// twice this (a flood of invented kinds only resets its own answers).
const MAX_MISSES: usize = 4096;

pub struct Discovery {
    client: Client,
    known: RwLock<HashMap<Gvk, Resolved>>,
    /// Kinds found not served, and when.
    missing: RwLock<HashMap<Gvk, Instant>>,
    timeout: Duration,
}

impl Discovery {
    pub fn new(client: Client, timeout: Duration) -> Self {
        Discovery { client, known: RwLock::default(), missing: RwLock::default(), timeout }
    }

    /// Whether [`Discovery::resolve`] answers `gvk` from memory, without a query.
    pub fn is_cached(&self, gvk: &Gvk) -> bool {
        self.known.read().contains_key(gvk) || self.missed_lately(gvk)
    }

    fn missed_lately(&self, gvk: &Gvk) -> bool {
        self.missing.read().get(gvk).is_some_and(|at| at.elapsed() < MISS_TTL)
    }

    /// Remembers that `gvk` is not served, and says so.
    fn missed(&self, gvk: &Gvk) -> DiscoveryError {
        let mut missing = self.missing.write();
        if missing.len() >= MAX_MISSES {
            missing.retain(|_, at| at.elapsed() < MISS_TTL);
            if missing.len() >= 2 * MAX_MISSES {
                missing.clear();
            }
        }
        missing.insert(gvk.clone(), Instant::now());
        DiscoveryError::NotServed(gvk.clone())
    }

    pub async fn resolve(&self, gvk: &Gvk) -> Result<Resolved, DiscoveryError> {
        if let Some(resolved) = self.known.read().get(gvk) {
            return Ok(resolved.clone());
        }
        if self.missed_lately(gvk) {
            return Err(DiscoveryError::NotServed(gvk.clone()));
        }
        let kind = gvk.to_kube();
        let query = kube::discovery::pinned_kind(&self.client, &kind);
        let answer = tokio::time::timeout(self.timeout, query).await.map_err(|_| DiscoveryError::Timeout(gvk.clone(), self.timeout))?;
        let (api, caps) = answer.map_err(|source| match &source {
            kube::Error::Api(status) if status.code == 404 => self.missed(gvk),
            kube::Error::Discovery(_) => self.missed(gvk),
            _ => DiscoveryError::Query { gvk: gvk.clone(), source },
        })?;
        let scope = match caps.scope {
            KubeScope::Cluster => Scope::Cluster,
            KubeScope::Namespaced => Scope::Namespaced,
        };
        let resolved = Resolved { api, scope };
        self.known.write().insert(gvk.clone(), resolved.clone());
        self.missing.write().remove(gvk);
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::FakeApi;

    #[tokio::test(start_paused = true)]
    async fn a_kind_not_served_is_asked_about_once_per_period() {
        let api = FakeApi::serving_nothing();
        let discovery = Discovery::new(api.client.clone(), Duration::from_secs(1));
        let gvk = Gvk::new("invented.example.com", "v1", "Thing");
        for _ in 0..100 {
            assert!(matches!(discovery.resolve(&gvk).await, Err(DiscoveryError::NotServed(_))));
        }
        assert_eq!(api.requests().len(), 1);
        assert!(discovery.is_cached(&gvk));
        tokio::time::advance(MISS_TTL).await;
        assert!(!discovery.is_cached(&gvk), "a CRD installed meanwhile must be found");
        let _ = discovery.resolve(&gvk).await;
        assert_eq!(api.requests().len(), 2);
    }
}
