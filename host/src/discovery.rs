//! Resolves kinds to the API's resources (plural name, namespaced or not) through API
//! discovery. Answers are cached; a miss asks the API server again, because custom resources
//! appear while the host runs. Every query is bounded by the host's request timeout.

use std::collections::HashMap;
use std::time::Duration;

use kube::Client;
use kube::core::ApiResource;
use kube::discovery::Scope as KubeScope;
use parking_lot::RwLock;

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

pub struct Discovery {
    client: Client,
    known: RwLock<HashMap<Gvk, Resolved>>,
    timeout: Duration,
}

impl Discovery {
    pub fn new(client: Client, timeout: Duration) -> Self {
        Discovery { client, known: RwLock::default(), timeout }
    }

    pub async fn resolve(&self, gvk: &Gvk) -> Result<Resolved, DiscoveryError> {
        if let Some(resolved) = self.known.read().get(gvk) {
            return Ok(resolved.clone());
        }
        let kind = gvk.to_kube();
        let query = kube::discovery::pinned_kind(&self.client, &kind);
        let answer = tokio::time::timeout(self.timeout, query).await.map_err(|_| DiscoveryError::Timeout(gvk.clone(), self.timeout))?;
        let (api, caps) = answer.map_err(|source| match &source {
            kube::Error::Api(status) if status.code == 404 => DiscoveryError::NotServed(gvk.clone()),
            kube::Error::Discovery(_) => DiscoveryError::NotServed(gvk.clone()),
            _ => DiscoveryError::Query { gvk: gvk.clone(), source },
        })?;
        let scope = match caps.scope {
            KubeScope::Cluster => Scope::Cluster,
            KubeScope::Namespaced => Scope::Namespaced,
        };
        let resolved = Resolved { api, scope };
        self.known.write().insert(gvk.clone(), resolved.clone());
        Ok(resolved)
    }
}
