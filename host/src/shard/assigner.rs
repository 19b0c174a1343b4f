//! The built-in assigner: run by the ring's leader (the host's leader Lease), it puts every
//! object of the sharded plugins on a shard, following kubernetes-controller-sharding's sharder:
//!
//! - It watches the ring's shard Leases and keeps their states ([`super::lease::Observed`]). Each
//!   sharded plugin has a ring of its own: the available shards, seen renewing, whose Lease says
//!   they run it ([`super::PLUGINS_ANNOTATION`]) — a replica where the plugin failed to load gets
//!   none of its objects. A Lease unchanged for its lease duration is taken (holder
//!   `kubewasm-assigner`, for twice the duration: proof that the API answers, and that the
//!   shard, fenced by the same time, has stopped): the shard is dead and its objects move. A
//!   Lease dead for a minute is deleted.
//! - It lists and watches the sharded kinds metadata-only (what the sharded plugins of every
//!   member claim, [`super::Claim`]): the primaries their selectors select, and the kinds they
//!   own. It keeps per object only its shard and drain labels, its resourceVersion and, for an
//!   owned object, its controller.
//! - Per primary: its ring key is its own, or its controller's when it is owned (so that it
//!   lands with its controller even when another plugin reconciles it); unassigned → its
//!   children first, then the primary, labelled for the shard its plugin's ring gives; on a
//!   shard that runs the plugin but is no longer the ring's choice → the drain label (the shard
//!   hands it over, and it comes back here unassigned); on a shard that is unavailable or does
//!   not run the plugin → moved (children first). Per owned object that is no plugin's primary:
//!   it follows its controller's current shard. An object that is some plugin's primary only
//!   ever changes shards through a drain while a shard may be reconciling it. Every write is a
//!   merge patch carrying the resourceVersion it was decided on (a conflict is retried).
//!
//! New objects are assigned from the watch, not by a mutating webhook: a webhook needs a serving
//! certificate the API server trusts and a configuration that follows every hot reload of the
//! plugins' kinds, and sits in the path of every create; here a root object costs one label
//! patch a watch round-trip after it appears, and the children a sharded plugin creates cost none
//! (the host labels them as it writes them). The sweep after a ring change, every
//! [`RESYNC`] and after a (re)list is the resync that catches what the watch missed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, PartialObjectMeta, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::lease::{Observed, ShardState};
use super::ring::{self, Ring};
use super::{Claim, RING_LABEL, drain_label, shard_label};
use crate::client::{ApiClient, PatchKind, WriteOp, WriteRequest};
use crate::discovery::Discovery;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::queue::{RateLimitConfig, WorkQueue};
use crate::resource::{Gvk, ObjectKey};

/// The holder the assigner writes into a dead shard's Lease.
pub const HOLDER: &str = "kubewasm-assigner";
/// How often every object is checked again, whatever the watches said.
pub const RESYNC: Duration = Duration::from_secs(300);
/// Objects placed at once.
const WORKERS: usize = 16;

/// What the assigner needs besides its clients.
#[derive(Debug, Clone)]
pub struct AssignerConfig {
    pub ring: String,
    /// Where the shard Leases live.
    pub lease_namespace: String,
}

/// One object to look at: a primary, or an owned object (by the kind it was watched as).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Work {
    Object(Gvk, ObjectKey),
    Child(Gvk, ObjectKey),
}

/// What the assigner keeps of an object.
#[derive(Debug, Clone, Default)]
struct Meta {
    shard: Option<String>,
    drain: bool,
    version: Option<String>,
    /// An owned object's controller: (group, kind, name), in its namespace.
    owner: Option<(String, String, String)>,
}

/// A kind by (group, kind), any version.
type GroupKind = (String, String);
/// A controller by (group, kind, namespace, name).
type OwnerKey = (String, String, Option<String>, String);

/// What one metadata watch is for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Role {
    /// The primaries of this plugin (selected by the selector).
    Primary(String),
    /// Owned objects, kept when their controller is one of these (group, kind).
    Owned(BTreeSet<GroupKind>),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Spec {
    resource: Gvk,
    namespace: Option<String>,
    selector: Option<String>,
    role: Role,
}

/// The watches the claims (by plugin) ask for.
fn specs(claims: &[(String, Claim)]) -> BTreeSet<Spec> {
    let mut owners: BTreeMap<(Gvk, Option<String>), BTreeSet<GroupKind>> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (plugin, claim) in claims {
        for namespace in &claim.namespaces {
            out.insert(Spec {
                resource: claim.primary.clone(),
                namespace: namespace.clone(),
                selector: claim.selector.as_ref().map(|s| s.as_str().to_string()),
                role: Role::Primary(plugin.clone()),
            });
            for owned in &claim.owns {
                owners.entry((owned.clone(), namespace.clone())).or_default().insert((claim.primary.group.clone(), claim.primary.kind.clone()));
            }
        }
    }
    out.extend(owners.into_iter().map(|((resource, namespace), kinds)| Spec { resource, namespace, selector: None, role: Role::Owned(kinds) }));
    out
}

/// Everything the watches have seen, by watch.
#[derive(Default)]
struct Index {
    watches: HashMap<u64, (Spec, HashMap<ObjectKey, Meta>)>,
    /// Owned objects by their controller: (group, kind, namespace, name) → (watch, key).
    children: HashMap<OwnerKey, HashSet<(u64, ObjectKey)>>,
}

impl Spec {
    fn plugin(&self) -> Option<&str> {
        match &self.role {
            Role::Primary(plugin) => Some(plugin),
            Role::Owned(_) => None,
        }
    }
}

impl Index {
    /// The object as a primary, and the plugin whose ring places it (of several, the first by
    /// name, so that every decision picks the same ring).
    fn primary(&self, resource: &Gvk, key: &ObjectKey) -> Option<(&str, &Meta)> {
        self.watches
            .values()
            .filter(|(spec, _)| spec.resource == *resource)
            .filter_map(|(spec, objects)| Some((spec.plugin()?, objects.get(key)?)))
            .min_by_key(|(plugin, _)| *plugin)
    }

    fn owned(&self, resource: &Gvk, key: &ObjectKey) -> Option<&Meta> {
        self.watches.values().filter(|(spec, _)| spec.plugin().is_none() && spec.resource == *resource).find_map(|(_, objects)| objects.get(key))
    }

    /// The ring key of an object: its controller's when it is owned by a sharded plugin's
    /// primary kind (it lands with its controller), else its own.
    fn ring_key(&self, resource: &Gvk, key: &ObjectKey) -> String {
        match self.owned(resource, key).and_then(|m| m.owner.as_ref()) {
            Some((group, kind, name)) => ring::controller_key(group, kind, key.namespace(), name),
            None => ring::object_key(resource, key),
        }
    }

    /// The owned objects whose controller is the primary `key` of `resource`.
    fn children_of(&self, resource: &Gvk, key: &ObjectKey) -> Vec<(Gvk, ObjectKey, Meta)> {
        let owner = (resource.group.clone(), resource.kind.clone(), key.namespace().map(String::from), key.name().to_string());
        let Some(children) = self.children.get(&owner) else { return Vec::new() };
        children
            .iter()
            .filter_map(|(watch, child)| {
                let (spec, objects) = self.watches.get(watch)?;
                Some((spec.resource.clone(), child.clone(), objects.get(child)?.clone()))
            })
            .collect()
    }

    fn insert(&mut self, watch: u64, key: ObjectKey, meta: Meta) {
        let Some((spec, objects)) = self.watches.get_mut(&watch) else { return };
        if let Role::Owned(kinds) = &spec.role {
            let wanted = meta.owner.as_ref().is_some_and(|(group, kind, _)| kinds.contains(&(group.clone(), kind.clone())));
            if !wanted {
                self.remove(watch, &key);
                return;
            }
        }
        let old = objects.insert(key.clone(), meta.clone());
        if spec.plugin().is_none() {
            let parent = |m: &Meta| m.owner.clone().map(|(group, kind, name)| (group, kind, key.namespace().map(String::from), name));
            if let Some(old) = old.as_ref().and_then(parent)
                && Some(&old) != parent(&meta).as_ref()
                && let Some(set) = self.children.get_mut(&old)
            {
                set.remove(&(watch, key.clone()));
            }
            if let Some(owner) = parent(&meta) {
                self.children.entry(owner).or_default().insert((watch, key));
            }
        }
    }

    fn remove(&mut self, watch: u64, key: &ObjectKey) {
        let Some((_, objects)) = self.watches.get_mut(&watch) else { return };
        if let Some(Meta { owner: Some((group, kind, name)), .. }) = objects.remove(key) {
            let owner = (group, kind, key.namespace().map(String::from), name);
            if let Some(set) = self.children.get_mut(&owner) {
                set.remove(&(watch, key.clone()));
                if set.is_empty() {
                    self.children.remove(&owner);
                }
            }
        }
    }

    fn drop_watch(&mut self, watch: u64) {
        let keys: Vec<ObjectKey> = self.watches.get(&watch).map(|(_, o)| o.keys().cloned().collect()).unwrap_or_default();
        for key in keys {
            self.remove(watch, &key);
        }
        self.watches.remove(&watch);
    }

    fn all_work(&self) -> Vec<Work> {
        self.watches
            .values()
            .flat_map(|(spec, objects)| {
                objects.keys().map(move |key| match spec.role {
                    Role::Primary(_) => Work::Object(spec.resource.clone(), key.clone()),
                    Role::Owned(_) => Work::Child(spec.resource.clone(), key.clone()),
                })
            })
            .collect()
    }

    fn len(&self) -> usize {
        self.watches.values().map(|(_, objects)| objects.len()).sum()
    }
}

/// The shards as the assigner sees them, and the ring each sharded plugin's make.
#[derive(Default)]
struct Members {
    leases: HashMap<String, Observed>,
    /// By plugin: the shards that run it.
    rings: BTreeMap<String, Ring>,
}

impl Members {
    /// Whether `shard` is available and runs `plugin`: only then can it hand the plugin's
    /// objects over (or be reconciling them).
    fn serves(&self, shard: &str, plugin: &str, now: Instant) -> bool {
        self.leases.get(shard).is_some_and(|o| o.state(now).is_available() && o.claims().contains_key(plugin))
    }

    /// Rebuilds the rings from the shards that may join; whether one changed.
    fn rebuild(&mut self, now: Instant) -> bool {
        let mut shards: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (name, observed) in self.leases.iter().filter(|(_, o)| o.joins(now)) {
            for plugin in observed.claims().keys() {
                shards.entry(plugin.clone()).or_default().push(name);
            }
        }
        let rings: BTreeMap<String, Ring> = shards.into_iter().map(|(plugin, shards)| (plugin, Ring::new(shards))).collect();
        let changed = rings != self.rings;
        self.rings = rings;
        changed
    }

    /// What the available members' plugins claim (each claim once).
    fn claims(&self, now: Instant) -> Vec<(String, Claim)> {
        let mut claims: Vec<(String, Claim)> = Vec::new();
        for observed in self.leases.values().filter(|o| o.state(now).is_available()) {
            for (plugin, claim) in observed.claims() {
                if !claims.iter().any(|(p, c)| p == plugin && c == claim) {
                    claims.push((plugin.clone(), claim.clone()));
                }
            }
        }
        claims.sort_by(|a, b| a.0.cmp(&b.0));
        claims
    }

    /// Whether every member has shown whether it renews: before, a ring could lack a live shard.
    fn settled(&self, now: Instant) -> bool {
        self.leases.values().all(|o| o.settled(now))
    }

    /// The rings, for the log.
    fn describe(&self) -> BTreeMap<&str, &[String]> {
        self.rings.iter().map(|(plugin, ring)| (plugin.as_str(), ring.shards())).collect()
    }
}

/// A decision about one object.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// Label it for `shard` (dropping any drain label); `Move` counts an object taken from an
    /// unavailable shard, `Assign` one that had none, `Child` an owned object following its
    /// controller.
    Place { resource: Gvk, key: ObjectKey, version: Option<String>, shard: String, action: &'static str },
    /// Ask its shard to hand it over.
    Drain { resource: Gvk, key: ObjectKey, version: Option<String> },
}

/// What to do for `work`, in order (children before their parent).
fn decide(work: &Work, index: &Index, members: &Members, now: Instant) -> Vec<Step> {
    match work {
        Work::Object(resource, key) => {
            let Some((plugin, meta)) = index.primary(resource, key) else { return Vec::new() };
            // No shard runs the plugin: its objects stay where they are.
            let Some(want) = members.rings.get(plugin).and_then(|ring| ring.shard_for(&index.ring_key(resource, key))) else { return Vec::new() };
            // Children that are a plugin's primaries move by their own drain.
            let children = |steps: &mut Vec<Step>| {
                for (child_resource, child, child_meta) in index.children_of(resource, key) {
                    if child_meta.shard.as_deref() != Some(want) && index.primary(&child_resource, &child).is_none() {
                        steps.push(Step::Place { resource: child_resource, key: child, version: child_meta.version, shard: want.into(), action: "child" });
                    }
                }
            };
            let mut steps = Vec::new();
            match meta.shard.as_deref() {
                Some(current) if current == want => {
                    // Draining though it is to stay: its shard removes the labels, and it comes back.
                    if !meta.drain {
                        children(&mut steps);
                    }
                }
                Some(current) if members.serves(current, plugin, now) => {
                    if !meta.drain {
                        steps.push(Step::Drain { resource: resource.clone(), key: key.clone(), version: meta.version.clone() });
                    }
                }
                current => {
                    children(&mut steps);
                    let action = if current.is_some() { "move" } else { "assign" };
                    steps.push(Step::Place { resource: resource.clone(), key: key.clone(), version: meta.version.clone(), shard: want.into(), action });
                }
            }
            steps
        }
        Work::Child(resource, key) => {
            // Also a primary: placed as one (by its controller's key, through a drain).
            if index.primary(resource, key).is_some() {
                return Vec::new();
            }
            let Some(Meta { owner: Some((group, kind, name)), shard, version, .. }) = index.owned(resource, key) else { return Vec::new() };
            // Its controller, as watched (any version of the kind).
            let parent = index
                .watches
                .values()
                .filter(|(spec, _)| spec.plugin().is_some() && spec.resource.group == *group && spec.resource.kind == *kind)
                .find_map(|(_, objects)| objects.get(&ObjectKey::new(key.namespace(), name)));
            match parent {
                // A controller being placed or handed over moves its children itself.
                Some(Meta { shard: Some(owner_shard), drain: false, .. }) if shard.as_ref() != Some(owner_shard) => {
                    vec![Step::Place { resource: resource.clone(), key: key.clone(), version: version.clone(), shard: owner_shard.clone(), action: "child" }]
                }
                _ => Vec::new(),
            }
        }
    }
}

/// Reads the assigner's part of an object's metadata.
fn meta_of(object: &PartialObjectMeta<DynamicObject>, shard_label: &str, drain_label: &str) -> Meta {
    let labels = object.metadata.labels.as_ref();
    let owner = object.metadata.owner_references.as_ref().and_then(|refs| refs.iter().find(|r| r.controller == Some(true))).map(|r| {
        let group = r.api_version.split_once('/').map_or("", |(g, _)| g).to_string();
        (group, r.kind.clone(), r.name.clone())
    });
    Meta {
        shard: labels.and_then(|l| l.get(shard_label)).cloned(),
        drain: labels.is_some_and(|l| l.contains_key(drain_label)),
        version: object.metadata.resource_version.clone(),
        owner,
    }
}

fn key_of(object: &PartialObjectMeta<DynamicObject>) -> ObjectKey {
    ObjectKey::new(object.metadata.namespace.as_deref(), object.metadata.name.as_deref().unwrap_or_default())
}

pub struct Assigner {
    client: kube::Client,
    discovery: Arc<Discovery>,
    /// The host's writes, fenced by the ring leadership.
    api: Arc<ApiClient>,
    config: AssignerConfig,
    metrics: Arc<Metrics>,
    timeout: Duration,
}

/// What one term of the assigner shares between its tasks.
struct Term {
    index: Mutex<Index>,
    members: Mutex<Members>,
    queue: WorkQueue<Work>,
    shard_label: String,
    drain_label: String,
    /// Whether the Leases and the first watches have listed: nothing is placed before.
    ready: watch::Sender<bool>,
    /// What the members' plugins claim, as the Leases say.
    claims: watch::Sender<Vec<(String, Claim)>>,
}

impl Term {
    fn sweep(&self) {
        let work = self.index.lock().all_work();
        for item in work {
            self.queue.add(item);
        }
    }

    /// After the members changed: the claims they publish, and (when a ring changed) every
    /// object looked at again.
    fn members_changed(&self, ring: &str, rings_changed: bool) {
        let claims = self.members.lock().claims(Instant::now());
        self.claims.send_if_modified(|current| {
            let changed = *current != claims;
            *current = claims;
            changed
        });
        if rings_changed {
            tracing::info!(%ring, rings = ?self.members.lock().describe(), "the ring changed");
            if *self.ready.borrow() {
                self.sweep();
            }
        }
    }
}

impl Assigner {
    pub fn new(client: kube::Client, discovery: Arc<Discovery>, api: Arc<ApiClient>, config: AssignerConfig, metrics: Arc<Metrics>, timeout: Duration) -> Self {
        Assigner { client, discovery, api, config, metrics, timeout }
    }

    /// Assigns while this host leads, until `shutdown`; a lost term stops every watch and write
    /// of it (the fence stops writes in flight), and the next term starts afresh.
    pub async fn run(self, mut leadership: Leadership, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                leading = leadership.wait_until_leading() => if !leading { return },
            }
            tracing::info!(ring = %self.config.ring, "assigning the ring's objects (this host leads)");
            let term = shutdown.child_token();
            tokio::select! {
                _ = self.lead(&leadership, term.clone()) => {}
                _ = leadership.lost() => tracing::info!(ring = %self.config.ring, "stopped assigning: no longer the leader"),
                _ = shutdown.cancelled() => {}
            }
            term.cancel();
        }
    }

    async fn lead(&self, leadership: &Leadership, stop: CancellationToken) {
        let queue = match WorkQueue::new(RateLimitConfig::default(), self.metrics.workqueue("kubewasm-assigner")) {
            Ok(queue) => queue,
            Err(e) => return tracing::error!("the assigner's queue: {e}"),
        };
        let term = Arc::new(Term {
            index: Mutex::default(),
            members: Mutex::default(),
            queue,
            shard_label: shard_label(&self.config.ring),
            drain_label: drain_label(&self.config.ring),
            ready: watch::channel(false).0,
            claims: watch::channel(Vec::new()).0,
        });
        let (leases_synced, leases_listed) = watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(watch_leases(self.client.clone(), self.config.clone(), term.clone(), leases_synced, stop.clone()));
        tasks.spawn(tend_leases(self.client.clone(), self.config.clone(), term.clone(), leadership.clone(), self.metrics.clone(), self.timeout, stop.clone()));
        for _ in 0..WORKERS {
            tasks.spawn(work(term.clone(), self.api.clone(), self.config.ring.clone(), self.metrics.clone()));
        }
        self.follow_claims(&term, leases_listed, stop.clone()).await;
        term.queue.shut_down();
        tasks.shutdown().await;
    }

    /// Starts and stops the metadata watches as the members' claims change, sweeps every
    /// [`RESYNC`], and opens the gate once the Leases and the first watches have listed and
    /// every member has shown whether it renews.
    async fn follow_claims(&self, term: &Arc<Term>, mut leases_listed: watch::Receiver<bool>, stop: CancellationToken) {
        let mut claims = term.claims.subscribe();
        let mut running: BTreeMap<Spec, (u64, CancellationToken, watch::Receiver<bool>)> = BTreeMap::new();
        let mut next_id = 1u64;
        let mut resync = tokio::time::interval(RESYNC);
        resync.tick().await;
        loop {
            let wanted = specs(&claims.borrow_and_update());
            for (spec, (id, cancel, _)) in running.extract_if(.., |spec, _| !wanted.contains(spec)) {
                cancel.cancel();
                term.index.lock().drop_watch(id);
                tracing::info!(ring = %self.config.ring, resource = %spec.resource, "no longer placing these objects");
            }
            for spec in wanted {
                if running.contains_key(&spec) {
                    continue;
                }
                let (id, cancel, (synced_tx, synced)) = (next_id, stop.child_token(), watch::channel(false));
                next_id += 1;
                term.index.lock().watches.insert(id, (spec.clone(), HashMap::new()));
                tokio::spawn(watch_objects(self.client.clone(), self.discovery.clone(), spec.clone(), id, term.clone(), synced_tx, cancel.clone()));
                running.insert(spec, (id, cancel, synced));
            }
            self.metrics.shard_assigner_objects(&self.config.ring).set(i64::try_from(term.index.lock().len()).unwrap_or(i64::MAX));
            let settled = term.members.lock().settled(Instant::now());
            if !*term.ready.borrow() && *leases_listed.borrow() && settled && running.values().all(|(_, _, synced)| *synced.borrow()) {
                term.ready.send_replace(true);
                term.sweep();
            }
            let ready = *term.ready.borrow();
            tokio::select! {
                _ = stop.cancelled() => break,
                changed = claims.changed() => if changed.is_err() { break },
                // Until the gate opens, look at the watches' progress often.
                _ = leases_listed.changed(), if !ready => {}
                _ = tokio::time::sleep(Duration::from_millis(200)), if !ready => {}
                _ = resync.tick() => term.sweep(),
                // The object count, now and then.
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
        }
        for (_, (_, cancel, _)) in running {
            cancel.cancel();
        }
    }
}

/// Keeps the Lease view of the ring current.
async fn watch_leases(client: kube::Client, config: AssignerConfig, term: Arc<Term>, synced: watch::Sender<bool>, stop: CancellationToken) {
    let api: Api<Lease> = Api::namespaced(client, &config.lease_namespace);
    let selector = format!("{RING_LABEL}={}", config.ring);
    let mut stream = std::pin::pin!(watcher(api, watcher::Config::default().labels(&selector)).default_backoff());
    let mut listed: HashSet<String> = HashSet::new();
    loop {
        let event = tokio::select! {
            _ = stop.cancelled() => return,
            event = stream.next() => event,
        };
        let now = Instant::now();
        let listed_all = matches!(event, Some(Ok(watcher::Event::InitDone)));
        let changed = {
            let mut members = term.members.lock();
            match event {
                Some(Ok(watcher::Event::Init)) => {
                    listed.clear();
                    false
                }
                Some(Ok(watcher::Event::InitApply(lease) | watcher::Event::Apply(lease))) => {
                    let name = lease.metadata.name.clone().unwrap_or_default();
                    listed.insert(name.clone());
                    match members.leases.get_mut(&name) {
                        Some(seen) => seen.update(lease, now),
                        None => drop(members.leases.insert(name, Observed::new(lease, now))),
                    }
                    members.rebuild(now)
                }
                // A held Lease deleted: its holder may still be in its term, so its objects stay
                // until that has run out.
                Some(Ok(watcher::Event::Delete(lease))) => {
                    forget(&mut members, lease.metadata.name.as_deref().unwrap_or_default(), now);
                    members.rebuild(now)
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    let gone: Vec<String> = members.leases.keys().filter(|name| !listed.contains(*name)).cloned().collect();
                    for name in gone {
                        forget(&mut members, &name, now);
                    }
                    members.rebuild(now)
                }
                Some(Err(e)) => {
                    tracing::warn!(ring = %config.ring, "watching the shard Leases failed, retrying: {e}");
                    false
                }
                None => return,
            }
        };
        term.members_changed(&config.ring, changed);
        if listed_all {
            synced.send_replace(true);
        }
    }
}

/// A shard's Lease is gone: forgotten, unless it was available — then its holder may still be in
/// its term, and it stays until that has run out.
fn forget(members: &mut Members, name: &str, now: Instant) {
    match members.leases.get_mut(name) {
        Some(seen) if seen.state(now).is_available() => seen.delete(),
        _ => drop(members.leases.remove(name)),
    }
}

/// Watches the time: takes the Leases of shards that stopped renewing, deletes orphaned ones,
/// rebuilds the ring when a state changes by itself, and counts the members by state.
async fn tend_leases(
    client: kube::Client,
    config: AssignerConfig,
    term: Arc<Term>,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    timeout: Duration,
    stop: CancellationToken,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.lease_namespace);
    loop {
        let now = Instant::now();
        let (to_take, to_delete, next) = {
            let mut members = term.members.lock();
            // A deleted Lease whose term ran out a minute ago: nothing left to delete.
            members.leases.retain(|_, seen| !(seen.is_deleted() && seen.state(now) == ShardState::Orphaned));
            let mut counts: BTreeMap<ShardState, i64> = ShardState::ALL.iter().map(|s| (*s, 0)).collect();
            let (mut take, mut delete) = (Vec::new(), Vec::new());
            for (name, seen) in &members.leases {
                let state = seen.state(now);
                *counts.entry(state).or_default() += 1;
                match state {
                    ShardState::Expired | ShardState::Uncertain => take.push((name.clone(), seen.clone())),
                    ShardState::Orphaned => delete.push((name.clone(), seen.lease.metadata.resource_version.clone())),
                    _ => {}
                }
            }
            for (state, n) in counts {
                metrics.shard_members(&config.ring, state.as_str()).set(n);
            }
            let next = members.leases.values().map(Observed::next_change).min().unwrap_or(now + Duration::from_secs(5));
            (take, delete, next)
        };
        for (name, seen) in to_take {
            if !leadership.is_leader() {
                break;
            }
            match tokio::time::timeout(timeout, take(&api, &seen)).await {
                Ok(Ok(())) => {
                    tracing::warn!(ring = %config.ring, shard = %name, "the shard stopped renewing its Lease for {:?}: took it; its objects move", seen.lease_duration())
                }
                Ok(Err(e)) => tracing::warn!(ring = %config.ring, shard = %name, "could not take the expired Lease (its objects stay until it is taken): {e}"),
                Err(_) => tracing::warn!(ring = %config.ring, shard = %name, "taking the expired Lease got no answer within {timeout:?}"),
            }
        }
        for (name, version) in to_delete {
            if !leadership.is_leader() {
                break;
            }
            let params = DeleteParams { preconditions: Some(Preconditions { resource_version: version, uid: None }), ..Default::default() };
            match tokio::time::timeout(timeout, api.delete(&name, &params)).await {
                Ok(Ok(_)) => tracing::info!(ring = %config.ring, shard = %name, "deleted the Lease of a shard dead for a minute"),
                Ok(Err(e)) => tracing::debug!(ring = %config.ring, shard = %name, "deleting an orphaned Lease: {e}"),
                Err(_) => {}
            }
        }
        let changed = term.members.lock().rebuild(Instant::now());
        term.members_changed(&config.ring, changed);
        // At the next change of state, and at least every second (a take to retry).
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(next.min(Instant::now() + Duration::from_secs(1))) => {}
        }
    }
}

/// Takes a shard's expired Lease as the sharder does: held by the assigner for twice its
/// duration, a transition more. The replace carries the resourceVersion seen: a renewal that
/// got in first makes it a conflict.
async fn take(api: &Api<Lease>, seen: &Observed) -> Result<(), kube::Error> {
    let mut lease = seen.lease.clone();
    let spec = lease.spec.get_or_insert_with(Default::default);
    let now = MicroTime(Timestamp::now());
    spec.holder_identity = Some(HOLDER.into());
    spec.lease_duration_seconds = Some(i32::try_from(seen.lease_duration().as_secs() * 2).unwrap_or(i32::MAX));
    spec.acquire_time = Some(now.clone());
    spec.renew_time = Some(now);
    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    let name = lease.metadata.name.clone().unwrap_or_default();
    api.replace(&name, &PostParams::default(), &lease).await.map(drop)
}

/// One metadata-only list+watch of a sharded kind, into the index; every change queues the
/// object.
async fn watch_objects(
    client: kube::Client,
    discovery: Arc<Discovery>,
    spec: Spec,
    id: u64,
    term: Arc<Term>,
    synced: watch::Sender<bool>,
    stop: CancellationToken,
) {
    let resolved = loop {
        match discovery.resolve(&spec.resource).await {
            Ok(resolved) => break resolved,
            Err(e) => tracing::warn!(resource = %spec.resource, "the assigner cannot watch it yet, retrying: {e}"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    };
    let api: Api<PartialObjectMeta<DynamicObject>> = match &spec.namespace {
        Some(ns) => Api::namespaced_with(client, ns, &resolved.api),
        None => Api::all_with(client, &resolved.api),
    };
    // Listed in pages (kube's watcher asks for 500 objects at a time), not from the API server's
    // cache at resourceVersion 0 as the sharder lists: the API server ignores the page size
    // there and answers every object of the kind in one response, which would be parsed whole
    // (managedFields included) however many objects the ring has. A page costs a consistent read.
    let mut config = watcher::Config::default();
    if let Some(selector) = &spec.selector {
        config = config.labels(selector);
    }
    let work = |key: ObjectKey| match spec.role {
        Role::Primary(_) => Work::Object(spec.resource.clone(), key),
        Role::Owned(_) => Work::Child(spec.resource.clone(), key),
    };
    let mut stream = std::pin::pin!(watcher(api, config).default_backoff());
    let mut listed: HashSet<ObjectKey> = HashSet::new();
    loop {
        let event = tokio::select! {
            _ = stop.cancelled() => return,
            event = stream.next() => event,
        };
        match event {
            Some(Ok(watcher::Event::Init)) => listed.clear(),
            Some(Ok(watcher::Event::InitApply(object) | watcher::Event::Apply(object))) => {
                let key = key_of(&object);
                term.index.lock().insert(id, key.clone(), meta_of(&object, &term.shard_label, &term.drain_label));
                listed.insert(key.clone());
                term.queue.add(work(key));
            }
            Some(Ok(watcher::Event::Delete(object))) => term.index.lock().remove(id, &key_of(&object)),
            Some(Ok(watcher::Event::InitDone)) => {
                {
                    let mut index = term.index.lock();
                    let gone: Vec<ObjectKey> =
                        index.watches.get(&id).map(|(_, o)| o.keys().filter(|k| !listed.contains(*k)).cloned().collect()).unwrap_or_default();
                    for key in gone {
                        index.remove(id, &key);
                    }
                }
                listed = HashSet::new();
                synced.send_replace(true);
            }
            Some(Err(e)) => tracing::warn!(resource = %spec.resource, "the assigner's watch failed, retrying: {e}"),
            None => return,
        }
    }
}

/// Places objects from the queue, once the gate is open.
async fn work(term: Arc<Term>, api: Arc<ApiClient>, ring: String, metrics: Arc<Metrics>) {
    let mut ready = term.ready.subscribe();
    if ready.wait_for(|r| *r).await.is_err() {
        return;
    }
    while let Some(lease) = term.queue.get().await {
        let item = lease.key().clone();
        let steps = {
            let (index, members) = (term.index.lock(), term.members.lock());
            decide(&item, &index, &members, Instant::now())
        };
        let mut failed = false;
        for step in steps {
            if let Err(e) = apply(&term, &api, &step).await {
                tracing::debug!(%ring, ?step, "placing failed, retrying: {e}");
                failed = true;
                break;
            }
            let action = match &step {
                Step::Place { action, .. } => action,
                Step::Drain { .. } => &"drain",
            };
            metrics.shard_assignments(&ring, action).inc();
            tracing::debug!(%ring, ?step, "placed");
        }
        if failed {
            term.queue.add_rate_limited(item);
        } else {
            term.queue.forget(&item);
        }
        drop(lease);
    }
}

/// Writes one step: a merge patch of the labels on the resourceVersion decided on; the answer
/// goes into the index at once, so that a key queued again before its watch event is decided on
/// what was written.
async fn apply(term: &Term, api: &ApiClient, step: &Step) -> Result<(), crate::client::RequestError> {
    let (resource, key, version, labels) = match step {
        Step::Place { resource, key, version, shard, .. } => (resource, key, version, serde_json::json!({ &term.shard_label: shard, &term.drain_label: null })),
        Step::Drain { resource, key, version } => (resource, key, version, serde_json::json!({ &term.drain_label: "true" })),
    };
    let request = WriteRequest {
        resource: resource.clone(),
        namespace: key.namespace().map(Into::into),
        name: key.name().into(),
        op: WriteOp::Patch { patch_type: PatchKind::Merge, body: serde_json::json!({"metadata": {"resourceVersion": version, "labels": labels}}) },
    };
    let written = api.write(request).await?;
    if let Some(json) = written
        && let Ok(object) = serde_json::from_str::<PartialObjectMeta<DynamicObject>>(&json)
    {
        let meta = meta_of(&object, &term.shard_label, &term.drain_label);
        let mut index = term.index.lock();
        let holders: Vec<u64> =
            index.watches.iter().filter(|(_, (spec, objects))| spec.resource == *resource && objects.contains_key(key)).map(|(id, _)| *id).collect();
        for id in holders {
            index.insert(id, key.clone(), meta.clone());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn lease(name: &str, holder: &str, plugins: &[&str], transitions: i32) -> Lease {
        let cm = Gvk::new("", "v1", "ConfigMap");
        let claims: BTreeMap<&str, Claim> =
            plugins.iter().map(|p| (*p, Claim { primary: cm.clone(), selector: None, owns: vec![cm.clone()], namespaces: vec![Some("n".into())] })).collect();
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some([(super::super::PLUGINS_ANNOTATION.to_string(), serde_json::to_string(&claims).unwrap())].into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(Timestamp::now())),
                lease_duration_seconds: Some(15),
                lease_transitions: Some(transitions),
                ..Default::default()
            }),
        }
    }

    /// Shards (name, holder, plugins it runs), each seen renewing once.
    fn running(shards: &[(&str, &str, &[&str])]) -> Members {
        let mut members = Members::default();
        for (name, holder, plugins) in shards {
            let mut seen = Observed::new(lease(name, holder, plugins, 0), Instant::now());
            seen.update(lease(name, holder, plugins, 1), Instant::now());
            members.leases.insert(name.to_string(), seen);
        }
        members.rebuild(Instant::now());
        members
    }

    /// Shards running plugin `p`.
    fn members(shards: &[(&str, &str)]) -> Members {
        running(&shards.iter().map(|(name, holder)| (*name, *holder, &["p"][..])).collect::<Vec<_>>())
    }

    fn meta(shard: Option<&str>, drain: bool, owner: Option<&str>) -> Meta {
        Meta {
            shard: shard.map(Into::into),
            drain,
            version: Some("7".into()),
            owner: owner.map(|name| ("".to_string(), "ConfigMap".to_string(), name.to_string())),
        }
    }

    /// An index with one primary watch of ConfigMaps and one of the ConfigMaps they own.
    fn index(primaries: &[(&str, Meta)], children: &[(&str, Meta)]) -> Index {
        let cm = Gvk::new("", "v1", "ConfigMap");
        let mut index = Index::default();
        index.watches.insert(1, (Spec { resource: cm.clone(), namespace: Some("n".into()), selector: None, role: Role::Primary("p".into()) }, HashMap::new()));
        let owned = Role::Owned([("".to_string(), "ConfigMap".to_string())].into());
        index.watches.insert(2, (Spec { resource: cm, namespace: Some("n".into()), selector: None, role: owned }, HashMap::new()));
        for (name, m) in primaries {
            index.insert(1, ObjectKey::new(Some("n"), name), m.clone());
        }
        for (name, m) in children {
            index.insert(2, ObjectKey::new(Some("n"), name), m.clone());
        }
        index
    }

    fn shard_of(members: &Members, name: &str) -> String {
        members.rings["p"].shard_for(&ring::object_key(&Gvk::new("", "v1", "ConfigMap"), &ObjectKey::new(Some("n"), name))).unwrap().to_string()
    }

    fn object(name: &str) -> Work {
        Work::Object(Gvk::new("", "v1", "ConfigMap"), ObjectKey::new(Some("n"), name))
    }

    #[test]
    fn an_unassigned_primary_goes_where_the_ring_says_after_its_children() {
        let members = members(&[("a", "a"), ("b", "b"), ("c", "c")]);
        let want = shard_of(&members, "p");
        let index = index(&[("p", meta(None, false, None))], &[("p.out", meta(Some("elsewhere"), false, Some("p"))), ("q.out", meta(None, false, Some("q")))]);
        let steps = decide(&object("p"), &index, &members, Instant::now());
        let placed: Vec<(&str, &str, &str)> = steps
            .iter()
            .map(|s| match s {
                Step::Place { key, shard, action, .. } => (key.name(), shard.as_str(), *action),
                Step::Drain { .. } => panic!("nothing to drain: {s:?}"),
            })
            .collect();
        assert_eq!(placed, [("p.out", want.as_str(), "child"), ("p", want.as_str(), "assign")]);
    }

    #[test]
    fn a_primary_on_a_live_shard_is_drained_and_on_a_dead_one_moved() {
        let members = members(&[("a", "a"), ("b", "b"), ("gone", HOLDER)]);
        let want = shard_of(&members, "p");
        let other = if want == "a" { "b" } else { "a" };
        let on_live = index(&[("p", meta(Some(other), false, None))], &[]);
        assert!(matches!(decide(&object("p"), &on_live, &members, Instant::now()).as_slice(), [Step::Drain { .. }]));
        let draining = index(&[("p", meta(Some(other), true, None))], &[]);
        assert!(decide(&object("p"), &draining, &members, Instant::now()).is_empty(), "its shard hands it over first");
        let on_dead = index(&[("p", meta(Some("gone"), true, None))], &[]);
        assert!(matches!(decide(&object("p"), &on_dead, &members, Instant::now()).as_slice(), [Step::Place { action: "move", .. }]));
        let in_place = index(&[("p", meta(Some(&want), false, None))], &[]);
        assert!(decide(&object("p"), &in_place, &members, Instant::now()).is_empty());
    }

    #[test]
    fn a_child_follows_its_controller_unless_the_controller_is_moving() {
        let members = members(&[("a", "a"), ("b", "b")]);
        let child = Work::Child(Gvk::new("", "v1", "ConfigMap"), ObjectKey::new(Some("n"), "p.out"));
        let settled = index(&[("p", meta(Some("a"), false, None))], &[("p.out", meta(Some("b"), false, Some("p")))]);
        assert!(matches!(decide(&child, &settled, &members, Instant::now()).as_slice(), [Step::Place { shard, action: "child", .. }] if shard == "a"));
        let draining = index(&[("p", meta(Some("a"), true, None))], &[("p.out", meta(Some("b"), false, Some("p")))]);
        assert!(decide(&child, &draining, &members, Instant::now()).is_empty());
        let unassigned = index(&[("p", meta(None, false, None))], &[("p.out", meta(Some("b"), false, Some("p")))]);
        assert!(decide(&child, &unassigned, &members, Instant::now()).is_empty());
    }

    #[test]
    fn the_index_keeps_only_children_of_sharded_kinds_and_forgets_them() {
        let mut index = index(&[], &[("p.out", meta(None, false, Some("p")))]);
        index.insert(2, ObjectKey::new(Some("n"), "stray"), Meta { owner: Some(("apps".into(), "Deployment".into(), "d".into())), ..Default::default() });
        index.insert(2, ObjectKey::new(Some("n"), "loose"), Meta::default());
        assert_eq!(index.len(), 1, "owned by something not sharded, or by nothing: not kept");
        assert_eq!(index.children_of(&Gvk::new("", "v1", "ConfigMap"), &ObjectKey::new(Some("n"), "p")).len(), 1);
        index.remove(2, &ObjectKey::new(Some("n"), "p.out"));
        assert!(index.children.is_empty());
    }

    #[test]
    fn claims_become_one_watch_per_primary_and_per_owned_kind() {
        let cm = Gvk::new("", "v1", "ConfigMap");
        let claim = |selector: &str| Claim {
            primary: cm.clone(),
            selector: Some(selector.parse().unwrap()),
            owns: vec![cm.clone()],
            namespaces: vec![Some("n".into())],
        };
        let x = || "x".to_string();
        let specs = specs(&[(x(), claim("a=1")), (x(), claim("b=1")), (x(), claim("a=1"))]);
        assert_eq!(specs.iter().filter(|s| s.plugin().is_some()).count(), 2, "one per selector");
        assert_eq!(specs.iter().filter(|s| s.plugin().is_none()).count(), 1, "owned kinds once");
    }

    /// The audit's H4: `p.out` is owned by `p` and also a plugin's primary. It is placed by its
    /// controller's ring key (with `p`), only ever moved off a live shard by a drain, and never
    /// by the owned path.
    #[test]
    fn an_owned_primary_lands_with_its_controller_and_moves_only_by_a_drain() {
        let members = members(&[("a", "a"), ("b", "b"), ("c", "c")]);
        let want = shard_of(&members, "p");
        let other = if want == "a" { "b" } else { "a" };
        let out = |shard: Option<&str>| meta(shard, false, Some("p"));
        let output = Work::Object(Gvk::new("", "v1", "ConfigMap"), ObjectKey::new(Some("n"), "p.out"));
        let child = Work::Child(Gvk::new("", "v1", "ConfigMap"), ObjectKey::new(Some("n"), "p.out"));
        let elsewhere = index(&[("p", meta(Some(&want), false, None)), ("p.out", out(Some(other)))], &[("p.out", out(Some(other)))]);
        assert!(decide(&child, &elsewhere, &members, Instant::now()).is_empty(), "not moved as a child");
        assert!(matches!(decide(&output, &elsewhere, &members, Instant::now()).as_slice(), [Step::Drain { .. }]));
        let unassigned = index(&[("p", meta(None, false, None)), ("p.out", out(None))], &[("p.out", out(None))]);
        assert!(
            matches!(decide(&output, &unassigned, &members, Instant::now()).as_slice(), [Step::Place { shard, action: "assign", .. }] if *shard == want),
            "placed by its controller's key"
        );
        assert!(
            matches!(decide(&object("p"), &unassigned, &members, Instant::now()).as_slice(), [Step::Place { key, .. }] if key.name() == "p"),
            "its controller does not carry it along"
        );
    }

    /// The audit's M5: a plugin's ring is the shards that run it; its objects on a shard that
    /// does not (nothing there would hand them over) move at once.
    #[test]
    fn a_plugins_ring_is_the_shards_that_run_it() {
        let members = running(&[("a", "a", &["p"]), ("b", "b", &["p"]), ("c", "c", &["other"])]);
        assert_eq!(members.rings["p"].shards(), ["a", "b"]);
        assert_eq!(members.rings["other"].shards(), ["c"]);
        let on_c = index(&[("p", meta(Some("c"), false, None))], &[]);
        assert!(matches!(decide(&object("p"), &on_c, &members, Instant::now()).as_slice(), [Step::Place { shard, action: "move", .. }] if shard != "c"));
        assert_eq!(members.claims(Instant::now()).iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["other", "p"]);
    }
}
