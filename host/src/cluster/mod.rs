//! Member clusters: the clusters a host engages besides its own, while it runs.
//!
//! A member's kubeconfig is data, never a program or a path: [`kubeconfig`] checks it before any
//! client is built from it, and a refusal is logged, counted and (for a Secret) reported on the
//! Secret.
//!
//! Providers say which clusters exist — [`files`]: one kubeconfig file per cluster in a
//! directory (`--clusters DIR`); [`secrets`]: kubeconfig Secrets in the host's namespace
//! labelled `kubewasm.io/cluster=true` — and hand each over as an [`Offer`]. The [`Fleet`] owns
//! every engaged [`Member`]: a connection over its kubeconfig, its discovery, its shared
//! informers (one per resource and namespace, as in the host's own cluster) and the plugins'
//! identities there. It tells its subscribers (the plugins' controllers) which members are
//! engaged now; disengaging one stops its informers. Engaging does not wait for the cluster to
//! answer: a member whose API server is down is engaged, and only its own work waits.
//!
//! The host's own cluster is not a member: leader election, shards, the status object and the
//! Plugin resources stay there.

pub mod answers;
pub mod files;
pub mod kubeconfig;
pub mod secrets;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::answers::Answers;
use crate::discovery::Discovery;
use crate::identity::{AdmissionLimits, Identities, IdentityMode};
use crate::informer::Informers;
use crate::metrics::Metrics;
use crate::resource::is_dns_subdomain;

/// The kubeconfig context extension whose object holds a member's labels (a file provider's
/// only place for them; a Secret's own labels serve for the Secret provider).
pub const LABELS_EXTENSION: &str = "kubewasm.io/labels";
/// The label that makes a Secret in the host's namespace a member cluster's kubeconfig.
pub const SECRET_LABEL: &str = "kubewasm.io/cluster";

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cluster name {0:?} must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)")]
    Name(String),
    #[error("cluster {name:?}: {source}")]
    Connect {
        name: String,
        #[source]
        source: crate::client::ConnectError,
    },
    #[error("cluster {name:?} is already engaged from {by}; {from} is ignored until it changes")]
    Taken { name: String, by: String, from: String },
    #[error("cluster {name:?}: its kubeconfig is refused: {source}")]
    Kubeconfig {
        name: String,
        #[source]
        source: kubeconfig::KubeconfigError,
    },
    #[error("cluster {name:?}: the {LABELS_EXTENSION} extension of its kubeconfig's current context must be an object of strings: {problem}")]
    Labels { name: String, problem: String },
}

impl ClusterError {
    /// The refusal's kind, for the `reason` label of `kubewasm_member_refusals_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            ClusterError::Name(_) => "name",
            ClusterError::Connect { .. } => "connect",
            ClusterError::Taken { .. } => "taken",
            ClusterError::Kubeconfig { source, .. } => source.reason(),
            ClusterError::Labels { .. } => "labels",
        }
    }
}

/// A cluster a provider offers: its name, labels and kubeconfig.
pub struct Offer {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub kubeconfig: kube::config::Kubeconfig,
    /// Where it comes from, in messages: `file /etc/clusters/eu.yaml`, `Secret kubewasm/eu`.
    pub source: String,
    /// A digest of everything above: an offer equal to the engaged one changes nothing.
    pub digest: u64,
}

/// What every member's informers and identities are made with: the host's settings.
#[derive(Clone)]
pub struct Settings {
    pub instance: String,
    pub identity_mode: IdentityMode,
    pub identity_namespace: String,
    /// Namespaces served; empty for all (the same in every cluster).
    pub namespaces: Arc<[String]>,
    pub request_timeout: Duration,
    /// The most of a member's response body and of its watch lines.
    pub max_answer: answers::Caps,
    pub admission: AdmissionLimits,
    pub metrics: Arc<Metrics>,
    /// Whether members may be reached over plain HTTP or unverified TLS.
    pub transport: kubeconfig::Transport,
}

/// An engaged member cluster and what the host keeps for it.
pub struct Member {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub discovery: Arc<Discovery>,
    pub informers: Arc<Informers>,
    /// Who the plugins act as there, and their admission (access reviews in that cluster).
    pub identities: Identities,
    /// What the member answers is bounded by, and whether it counts as unreachable.
    pub answers: Answers,
    source: String,
    digest: u64,
    /// Stops its informers.
    stop: CancellationToken,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The engaged members, by name.
pub type Engaged = BTreeMap<String, Arc<Member>>;

/// The members engaged now: their one owner.
pub struct Fleet {
    engaged: watch::Sender<Engaged>,
    settings: Settings,
    shutdown: CancellationToken,
}

impl Fleet {
    pub fn new(settings: Settings, shutdown: CancellationToken) -> Arc<Self> {
        Arc::new(Fleet { engaged: watch::channel(Engaged::new()).0, settings, shutdown })
    }

    /// The members engaged now, and every change to them.
    pub fn subscribe(&self) -> watch::Receiver<Engaged> {
        self.engaged.subscribe()
    }

    /// The members engaged now.
    pub fn engaged(&self) -> Engaged {
        self.engaged.borrow().clone()
    }

    /// Engages the cluster `offer` names, or engages it anew when its offer changed (its
    /// kubeconfig or labels): the plugins' work there restarts from an initial list. A name
    /// engaged from another source is refused, and so is a kubeconfig that is not data only
    /// ([`kubeconfig::check`]); every refusal is counted.
    pub async fn engage(&self, offer: Offer) -> Result<(), ClusterError> {
        let engaged = self.try_engage(offer).await;
        if let Err(e) = &engaged {
            self.refused(e.reason());
        }
        engaged
    }

    /// Counts an offer refused for `reason` (by the fleet, or by a provider that could not
    /// read it).
    fn refused(&self, reason: &str) {
        self.settings.metrics.member_refusals(reason).inc();
    }

    async fn try_engage(&self, offer: Offer) -> Result<(), ClusterError> {
        if !is_dns_subdomain(&offer.name) {
            return Err(ClusterError::Name(offer.name));
        }
        if let Some(engaged) = self.engaged.borrow().get(&offer.name) {
            if engaged.source != offer.source {
                return Err(ClusterError::Taken { name: offer.name, by: engaged.source.clone(), from: offer.source });
            }
            if engaged.digest == offer.digest {
                return Ok(());
            }
        }
        let Offer { name, labels, kubeconfig, source, digest } = offer;
        kubeconfig::check(&kubeconfig, self.settings.transport).map_err(|source| ClusterError::Kubeconfig { name: name.clone(), source })?;
        let s = &self.settings;
        let answers = Answers::new(&name, s.max_answer.within(s.request_timeout), &s.metrics);
        let client = crate::client::connect_to(kubeconfig, &source, &s.instance, |stack| stack.with_layer(&answers).build())
            .await
            .map_err(|source| ClusterError::Connect { name: name.clone(), source })?;
        let discovery = Arc::new(Discovery::new(client.clone(), s.request_timeout));
        let stop = self.shutdown.child_token();
        let informers = Informers::new(client.clone(), discovery.clone(), stop.clone(), s.metrics.informers_in(&name));
        let identities = Identities::new(
            s.identity_mode,
            s.identity_namespace.clone(),
            client.clone(),
            discovery.clone(),
            s.namespaces.clone(),
            s.request_timeout,
            s.admission,
        );
        let member = Arc::new(Member { name: name.clone(), labels, discovery, informers, identities, answers, source, digest, stop });
        tracing::info!(cluster = %name, source = %member.source, labels = ?member.labels, "engaged cluster");
        self.engaged.send_modify(|engaged| {
            engaged.insert(name, member);
        });
        Ok(())
    }

    /// Disengages `name` if `source` engaged it: its informers stop once the plugins working
    /// there have let go of it.
    pub fn disengage(&self, name: &str, source: &str) {
        let gone = self.engaged.send_if_modified(|engaged| match engaged.get(name) {
            Some(member) if member.source == source => engaged.remove(name).is_some(),
            _ => false,
        });
        if gone {
            tracing::info!(cluster = %name, %source, "disengaged cluster");
        }
    }

    /// The members a provider engaged (whose source it recognizes), with their sources.
    fn engaged_from(&self, source: impl Fn(&str) -> bool) -> Vec<(String, String)> {
        self.engaged.borrow().values().filter(|m| source(&m.source)).map(|m| (m.name.clone(), m.source.clone())).collect()
    }
}

/// The labels a kubeconfig's current context carries in its [`LABELS_EXTENSION`] extension.
pub fn context_labels(name: &str, kubeconfig: &kube::config::Kubeconfig) -> Result<BTreeMap<String, String>, ClusterError> {
    let current = kubeconfig.current_context.as_deref();
    let context = kubeconfig.contexts.iter().find(|c| Some(c.name.as_str()) == current).and_then(|c| c.context.as_ref());
    let Some(extension) = context.and_then(|c| c.extensions.as_ref()).and_then(|e| e.iter().find(|e| e.name == LABELS_EXTENSION)) else {
        return Ok(BTreeMap::new());
    };
    serde_json::from_value(extension.extension.clone()).map_err(|e| ClusterError::Labels { name: name.to_string(), problem: e.to_string() })
}

/// A digest of what makes an offer: a changed one re-engages the cluster.
pub fn digest(parts: &[&[u8]]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: eu
clusters:
- name: eu
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: admin
  user: {token: abc}
contexts:
- name: other
  context: {cluster: eu, user: admin, extensions: [{name: kubewasm.io/labels, extension: {env: dev}}]}
- name: eu
  context:
    cluster: eu
    user: admin
    extensions:
    - name: kubewasm.io/labels
      extension: {env: prod, region: eu}
"#;

    #[test]
    fn labels_come_from_the_current_context() {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(KUBECONFIG).unwrap();
        let labels = context_labels("eu", &kubeconfig).unwrap();
        assert_eq!(labels, BTreeMap::from([("env".into(), "prod".into()), ("region".into(), "eu".into())]));
    }

    #[test]
    fn labels_that_are_not_strings_are_refused_with_the_extension_named() {
        let text = KUBECONFIG.replace("{env: prod, region: eu}", "{env: [prod]}");
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        let e = context_labels("eu", &kubeconfig).unwrap_err().to_string();
        assert!(e.starts_with("cluster \"eu\": the kubewasm.io/labels extension"), "{e}");
    }

    #[test]
    fn a_context_without_the_extension_has_no_labels() {
        let text = KUBECONFIG.replace("current-context: eu", "current-context: none");
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert!(context_labels("eu", &kubeconfig).unwrap().is_empty());
    }
}
