//! Scale-out: every plugin's objects sharded across the host's replicas, on the shard contract of
//! kubernetes-controller-sharding, so that its sharder can drive kubewasm replicas and kubewasm's
//! own assigner can drive them without anything else installed.
//!
//! - Membership ([`lease`]): each replica holds a Lease named after itself in the host's
//!   namespace, labelled `alpha.sharding.timebertt.dev/controllerring=<ring>`, renewed and fenced
//!   by time as the leader's is (a replica that cannot renew stops writing before its Lease can be
//!   taken), released on graceful shutdown. It carries the replica's object counts
//!   ([`OBJECTS_ANNOTATION`]) and the sharded plugins it runs ([`PLUGINS_ANNOTATION`]), written
//!   with each renewal.
//! - Assignment ([`ring`], [`assigner`]): a plugin's objects go to the available shards that run
//!   the plugin by consistent hashing (XXH64, 100 virtual nodes; key `group/kind/namespace/name`,
//!   an owned object by its controller's), as the label
//!   `shard.alpha.sharding.timebertt.dev/<ring>=<shard>`. The built-in assigner runs on the ring's
//!   leader, watching metadata-only the kinds the plugins of every member claim.
//! - A sharded plugin's primary and owned watches list only `shard...=<this shard>` (this
//!   [`Shard`]'s selector): each replica caches its share. Children a sharded plugin creates are
//!   labelled for this shard as they are written (they follow their controller), unless their
//!   kind is a sharded plugin's primary: such a move needs a drain, so the assigner places them.
//! - Handover: the assigner sets `drain.alpha.sharding.timebertt.dev/<ring>`; the shard finishes
//!   the object's reconcile in flight (the queue runs a key once at a time), drops it, and removes
//!   both labels ([`Shard::hand_over`]); only then does the assigner place it on the new shard. A
//!   dead shard's objects move once the assigner has taken its expired Lease.
//! - A replica that (re)gains its membership lists its sharded watches again before it
//!   reconciles ([`Shard::caught_up`]): while it was not a member its objects may have moved, and
//!   its watch may not have said so yet.

pub mod assigner;
pub mod lease;
pub mod ring;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::client::{ApiClient, PatchKind, RequestError, WriteOp, WriteRequest};
use crate::informer::{Informers, WatchKey};
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::resource::{Gvk, ObjectKey};
use crate::selector::LabelSelector;

/// The label of a shard's Lease naming its ring.
pub const RING_LABEL: &str = "alpha.sharding.timebertt.dev/controllerring";
/// `shard.alpha.sharding.timebertt.dev/<ring>`: the shard an object is assigned to.
pub const SHARD_LABEL_PREFIX: &str = "shard.alpha.sharding.timebertt.dev/";
/// `drain.alpha.sharding.timebertt.dev/<ring>`: the shard is to hand the object over.
pub const DRAIN_LABEL_PREFIX: &str = "drain.alpha.sharding.timebertt.dev/";
/// A shard Lease's annotation: the replica's primary objects per sharded plugin (JSON).
pub const OBJECTS_ANNOTATION: &str = "kubewasm.io/shard-objects";
/// A shard Lease's annotation: the sharded plugins running there, each with its [`Claim`] (JSON).
pub const PLUGINS_ANNOTATION: &str = "kubewasm.io/shard-plugins";

pub fn shard_label(ring: &str) -> String {
    format!("{SHARD_LABEL_PREFIX}{ring}")
}

pub fn drain_label(ring: &str) -> String {
    format!("{DRAIN_LABEL_PREFIX}{ring}")
}

/// Who assigns objects to the shards of the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignerMode {
    /// The ring's leader (this host's built-in assigner).
    Builtin,
    /// Something else, such as kubernetes-controller-sharding's sharder with a ControllerRing.
    External,
}

impl std::str::FromStr for AssignerMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "builtin" => Ok(AssignerMode::Builtin),
            "external" => Ok(AssignerMode::External),
            _ => Err(format!("{text:?}: use builtin (the ring's leader assigns) or external (another sharder does)")),
        }
    }
}

/// Where an object stands for this shard, by its labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Assigned here: reconcile it.
    Mine,
    /// Assigned here, and to be handed over.
    Draining,
    /// Not assigned here (moved away while a key waited, or never here).
    Elsewhere,
}

/// What a sharded plugin version asks the assigner to place: its primary kind (the objects its
/// primary selector selects) and the kinds it owns, in the namespaces it watches them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Claim {
    pub primary: Gvk,
    pub selector: Option<LabelSelector>,
    pub owns: Vec<Gvk>,
    /// `None`: every namespace (or a cluster-scoped kind).
    pub namespaces: Vec<Option<String>>,
}

/// The claims of every sharded plugin version running here, by plugin, published in this
/// replica's Lease: the assigner follows the claims of every member.
#[derive(Clone)]
pub struct Claims {
    all: watch::Sender<BTreeMap<u64, (String, Claim)>>,
    next: Arc<AtomicU64>,
    /// The membership Lease's annotations.
    published: Option<watch::Sender<BTreeMap<String, String>>>,
}

impl Default for Claims {
    fn default() -> Self {
        Claims { all: watch::channel(BTreeMap::new()).0, next: Arc::new(AtomicU64::new(1)), published: None }
    }
}

impl Claims {
    /// Claims published into these Lease annotations.
    fn publishing(published: watch::Sender<BTreeMap<String, String>>) -> Self {
        Claims { published: Some(published), ..Claims::default() }
    }

    /// Registers `plugin`'s `claim` until the guard is dropped.
    pub fn add(&self, plugin: &str, claim: Claim) -> ClaimGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.all.send_modify(|all| {
            all.insert(id, (plugin.to_string(), claim));
        });
        self.publish();
        ClaimGuard { claims: self.clone(), id }
    }

    pub fn subscribe(&self) -> watch::Receiver<BTreeMap<u64, (String, Claim)>> {
        self.all.subscribe()
    }

    /// Whether a plugin running here reconciles objects of `resource` (any version) as primaries.
    pub fn is_primary(&self, resource: &Gvk) -> bool {
        self.all.borrow().values().any(|(_, c)| c.primary.group == resource.group && c.primary.kind == resource.kind)
    }

    fn publish(&self) {
        let Some(published) = &self.published else { return };
        let by_plugin: BTreeMap<String, Claim> = self.all.borrow().values().cloned().collect();
        let json = serde_json::to_string(&by_plugin).unwrap_or_default();
        published.send_if_modified(|annotations| {
            if annotations.get(PLUGINS_ANNOTATION) == Some(&json) {
                return false;
            }
            annotations.insert(PLUGINS_ANNOTATION.to_string(), json);
            true
        });
    }
}

/// A version's hold on its claim.
pub struct ClaimGuard {
    claims: Claims,
    id: u64,
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        self.claims.all.send_modify(|all| {
            all.remove(&self.id);
        });
        self.claims.publish();
    }
}

/// This replica's place in the ring: what its sharded controllers need.
pub struct Shard {
    ring: String,
    name: String,
    shard_label: String,
    drain_label: String,
    selector: LabelSelector,
    membership: Leadership,
    informers: Arc<Informers>,
    /// The host's own writes for handovers, fenced by the membership.
    api: Arc<ApiClient>,
    claims: Claims,
    /// Primaries cached per sharded plugin, published in the Lease's annotations.
    counts: Mutex<BTreeMap<String, usize>>,
    published: watch::Sender<BTreeMap<String, String>>,
    /// The term whose start the sharded watches have listed since.
    caught_up: tokio::sync::Mutex<Option<Instant>>,
    metrics: Arc<Metrics>,
}

impl Shard {
    /// `api` writes as the host under `membership`'s fence; `published` is what the membership
    /// Lease carries as annotations.
    pub fn new(
        ring: &str,
        name: &str,
        membership: Leadership,
        informers: Arc<Informers>,
        api: Arc<ApiClient>,
        published: watch::Sender<BTreeMap<String, String>>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let shard_label = shard_label(ring);
        let selector = format!("{shard_label}={name}").parse().expect("a ring and shard name that are label-safe make a selector");
        Shard {
            ring: ring.into(),
            name: name.into(),
            drain_label: drain_label(ring),
            shard_label,
            selector,
            membership,
            informers,
            api,
            claims: Claims::publishing(published.clone()),
            counts: Mutex::default(),
            published,
            caught_up: tokio::sync::Mutex::new(None),
            metrics,
        }
    }

    pub fn ring(&self) -> &str {
        &self.ring
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn shard_label(&self) -> &str {
        &self.shard_label
    }

    /// The membership term: what a sharded plugin's reconciles and writes run under.
    pub fn membership(&self) -> &Leadership {
        &self.membership
    }

    /// The selector of this shard's share, for the API server.
    pub fn selector(&self) -> &LabelSelector {
        &self.selector
    }

    pub fn claims(&self) -> &Claims {
        &self.claims
    }

    /// Where an object with these labels stands.
    pub fn placement<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> Placement {
        match (label(&self.shard_label), label(&self.drain_label)) {
            (Some(shard), _) if shard != self.name => Placement::Elsewhere,
            (None, _) => Placement::Elsewhere,
            (Some(_), Some(_)) => Placement::Draining,
            (Some(_), None) => Placement::Mine,
        }
    }

    /// Waits until this replica is a member and its sharded watches have listed since its term
    /// began (at once when they have). `false` if the elector is gone.
    pub async fn caught_up(&self) -> bool {
        let mut membership = self.membership.clone();
        loop {
            if !membership.wait_until_leading().await {
                return false;
            }
            let Some(since) = membership.since() else { continue };
            let mut caught_up = self.caught_up.lock().await;
            if *caught_up == Some(since) {
                return true;
            }
            let selector = self.selector.clone();
            self.informers.relist_before(since.into_std(), |key: &WatchKey| key.server_selector.as_ref() == Some(&selector)).await;
            tracing::info!(ring = %self.ring, shard = %self.name, "member of the ring; the sharded caches listed since the term began");
            *caught_up = Some(since);
            return true;
        }
    }

    /// Hands an object over: removes the shard and drain labels, on the condition that it has
    /// not changed since `resource_version` (a conflict is retried by the caller). Its cache
    /// entry goes with the answer, so that no later reconcile here finds it.
    pub async fn hand_over(&self, plugin: &str, resource: &Gvk, key: &ObjectKey, resource_version: Option<&str>) -> Result<(), RequestError> {
        let body = serde_json::json!({
            "metadata": {
                "resourceVersion": resource_version,
                "labels": { &self.shard_label: null, &self.drain_label: null },
            },
        });
        let request = WriteRequest {
            resource: resource.clone(),
            namespace: key.namespace().map(Into::into),
            name: key.name().into(),
            op: WriteOp::Patch { patch_type: PatchKind::Merge, body },
        };
        self.api.write(request).await?;
        self.metrics.shard_handovers(plugin).inc();
        tracing::info!(ring = %self.ring, shard = %self.name, plugin, %resource, %key, "handed over");
        Ok(())
    }

    /// Records how many primaries `plugin` has here (`None`: it stopped), for
    /// `kubewasm_shard_objects` and the Lease's annotation.
    pub fn publish(&self, plugin: &str, objects: Option<usize>) {
        let mut counts = self.counts.lock();
        let gauge = self.metrics.shard_objects(plugin);
        match objects {
            Some(n) => {
                counts.insert(plugin.to_string(), n);
                gauge.set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            None => {
                counts.remove(plugin);
                gauge.set(0);
            }
        }
        let json = serde_json::to_string(&*counts).unwrap_or_default();
        self.published.send_if_modified(|annotations| {
            if annotations.get(OBJECTS_ANNOTATION) == Some(&json) {
                return false;
            }
            annotations.insert(OBJECTS_ANNOTATION.to_string(), json);
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys_are_the_contracts() {
        assert_eq!(shard_label("kubewasm"), "shard.alpha.sharding.timebertt.dev/kubewasm");
        assert_eq!(drain_label("kubewasm"), "drain.alpha.sharding.timebertt.dev/kubewasm");
        let (published, annotations) = watch::channel(BTreeMap::new());
        let claims = Claims::publishing(published);
        let mut seen = claims.subscribe();
        let claim = Claim { primary: Gvk::new("", "v1", "ConfigMap"), selector: Some("a=1".parse().unwrap()), owns: vec![], namespaces: vec![None] };
        let guard = claims.add("p", claim.clone());
        assert_eq!(seen.borrow_and_update().len(), 1);
        assert!(claims.is_primary(&Gvk::new("", "v2", "ConfigMap")) && !claims.is_primary(&Gvk::new("", "v1", "Secret")));
        let json = annotations.borrow().get(PLUGINS_ANNOTATION).cloned().unwrap();
        let read: BTreeMap<String, Claim> = serde_json::from_str(&json).unwrap();
        assert_eq!(read, BTreeMap::from([("p".to_string(), claim)]), "the Lease says which plugins run here");
        drop(guard);
        assert!(seen.borrow_and_update().is_empty(), "a dropped version's claim goes");
        assert_eq!(annotations.borrow().get(PLUGINS_ANNOTATION).map(String::as_str), Some("{}"));
    }
}
