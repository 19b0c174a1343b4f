//! Shared informers: one list+watch per (resource, namespace scope) for every plugin that needs
//! it, whatever label selectors they use, each feeding a [`Store`] and telling its subscribers
//! what changed. A subscriber with a selector sees only what its selector selects, as through a
//! filtered watch of its own: an object that stops matching is deleted for it. One watch per
//! resource, as controller-runtime's manager shares one informer per kind, keeps the API
//! server's watch count at one per resource however many plugins read it; the price is that the
//! cache holds every object of the kind, selected or not (see BENCHMARKS.md, "Density").
//! Informers don't know who listens: a subscriber is anything that takes events. Each informer
//! keeps the only [`Writer`] of its store; everyone else holds read-only [`Store`] handles.
//!
//! The watch itself is kube-rs's `watcher` (re-list on 410 Gone, bookmarks, backoff); the
//! reflector store is ours, because kube's keeps a typed object per entry, and the cache here
//! keeps JSON text that a guest can be handed without re-serializing (see [`store`]). A re-list
//! tells subscribers only what changed while the watch was away (new, changed, gone, or written
//! by a plugin and never heard of), not every object again: after an API server restart the
//! plugins reconcile what moved, not the whole cache ([`store::Writer::relisted`]).
//!
//! A key may also carry a selector for the API server ([`WatchKey::server_selector`]): that
//! informer lists and watches only what it selects, and caches only that — a shard's share of a
//! kind (`shard`). Such a watch is a watch of its own, shared by the subscribers that ask for the
//! same one. An object leaving it may come back later (the same uid, a newer version), so it is
//! buried by version only; and it can be made to list again ([`Informers::relist_before`]), so
//! that a cache that may have missed moves is as fresh as a consistent list.
//!
//! A subscriber may need only the objects' metadata ([`WatchKey::metadata_only`]). An informer
//! all of whose subscribers do watches `PartialObjectMetadata` and caches metadata alone; the
//! first subscriber needing whole objects turns it into a watch of whole objects in place — the
//! same store, relisted incrementally, that subscriber synced only once the whole objects are in
//! — so that one kind never has two caches. It stays so until it stops: a later downgrade would
//! relist for a saving that the next such subscriber undoes.

pub mod raw;
pub mod store;

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, DynamicResourceScope};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

pub use store::{Entry, Inserted, Owner, ParsedObject, Store, Writer};

use self::raw::{RawMetadata, RawObject};
use crate::discovery::{Discovery, DiscoveryError};
use crate::excerpt::excerpt;
use crate::manifest::Manifest;
use crate::metrics::{InformerMetrics, Refresh};
use crate::projection::Fields;
use crate::resource::{Gvk, ObjectKey, Scope};
use crate::selector::LabelSelector;

/// The most of a failed watch's error logged: an API server's error page may be long.
const ERROR_BYTES: usize = 2048;

/// What a subscriber wants to see: the objects of a resource in a namespace (or all), those
/// matching a selector if it has one. The informer behind it watches the resource and namespace.
#[derive(Debug, Clone)]
pub struct WatchKey {
    pub resource: Gvk,
    /// `None`: every namespace (and always for cluster-scoped resources).
    pub namespace: Option<String>,
    pub selector: Option<LabelSelector>,
    /// A selector the API server applies: the informer lists, watches and caches only these.
    pub server_selector: Option<LabelSelector>,
    /// The subscriber needs only the objects' metadata. Not part of the informer's identity: one
    /// informer serves subscribers of both kinds.
    pub metadata_only: bool,
}

impl WatchKey {
    /// All objects of `resource` in `namespace` (all namespaces when `None`).
    pub fn new(resource: Gvk, namespace: Option<String>) -> Self {
        WatchKey { resource, namespace, selector: None, server_selector: None, metadata_only: false }
    }

    fn identity(&self) -> (&Gvk, Option<&str>, Option<&str>, Option<&str>) {
        (&self.resource, self.namespace.as_deref(), self.selector.as_ref().map(LabelSelector::as_str), self.server_selector.as_ref().map(LabelSelector::as_str))
    }
}

impl PartialEq for WatchKey {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for WatchKey {}

impl Hash for WatchKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.identity().hash(state)
    }
}

impl std::fmt::Display for WatchKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.resource)?;
        if let Some(ns) = &self.namespace {
            write!(f, " in {ns}")?;
        }
        if let Some(selector) = &self.server_selector {
            write!(f, " listing only {selector}")?;
        }
        if let Some(selector) = &self.selector {
            write!(f, " matching {selector}")?;
        }
        Ok(())
    }
}

/// A change to a watched object, as a subscriber sees it.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// Added, changed, or seen again in a re-list; `old` is the state the cache held before,
    /// if any (an update that moves an object from one target to another must reach both).
    /// `listed`: from a (re)list, or the cache handed to a late subscriber, rather than a change
    /// the watch saw — background work for a queue.
    Applied { key: &'a ObjectKey, object: &'a Entry, old: Option<&'a Entry>, listed: bool },
    /// Gone from this watch: deleted, or (for a watch with a label selector) no longer
    /// matching it. `object` is its final state as the watch reported it.
    Deleted { key: &'a ObjectKey, object: &'a Entry },
}

impl Event<'_> {
    fn to_owned(self) -> OwnedEvent {
        match self {
            Event::Applied { key, object, old, listed } => OwnedEvent::Applied { key: key.clone(), object: object.clone(), old: old.cloned(), listed },
            Event::Deleted { key, object } => OwnedEvent::Deleted { key: key.clone(), object: object.clone() },
        }
    }
}

/// An [`Event`] kept for later: handles to the key and states, not copies of them.
enum OwnedEvent {
    Applied { key: ObjectKey, object: Entry, old: Option<Entry>, listed: bool },
    Deleted { key: ObjectKey, object: Entry },
}

impl OwnedEvent {
    fn as_event(&self) -> Event<'_> {
        match self {
            OwnedEvent::Applied { key, object, old, listed } => Event::Applied { key, object, old: old.as_ref(), listed: *listed },
            OwnedEvent::Deleted { key, object } => Event::Deleted { key, object },
        }
    }
}

/// Takes events from an informer. Called on the informer's task: must not block.
pub trait Subscriber: Send + Sync {
    fn on_event(&self, event: Event<'_>);
}

#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    #[error("cannot watch {key}: {source}")]
    Resolve {
        key: Box<WatchKey>,
        #[source]
        source: DiscoveryError,
    },
}

/// One running list+watch (its key has no subscriber's selector), its store and its subscribers.
pub struct Informer {
    key: WatchKey,
    /// Also says what the watch lists: whole objects, or metadata ([`Writer::set_holds_objects`]).
    store: Writer,
    /// Whether it has listed what its subscribers need once.
    synced: watch::Sender<bool>,
    /// The last list: when it began (`None`: not yet) and whether it has ended.
    lists: watch::Sender<ListRound>,
    /// Asks the watch task to list again.
    relist: Notify,
    subscribers: RwLock<Vec<Arc<Subscribed>>>,
    stop: CancellationToken,
}

#[derive(Debug, Clone, Copy, Default)]
struct ListRound {
    started: Option<Instant>,
    done: bool,
}

struct Subscribed {
    id: u64,
    selector: Option<LabelSelector>,
    subscriber: Arc<dyn Subscriber>,
    /// While the cache is handed to it as its initial list (outside the informer's lock: the
    /// watch and the other subscribers go on meanwhile), the events that arrive wait here, in
    /// order, and follow the list.
    catching_up: Mutex<Option<Vec<OwnedEvent>>>,
}

impl Subscribed {
    fn new(id: u64, selector: Option<LabelSelector>, subscriber: Arc<dyn Subscriber>) -> Self {
        Subscribed { id, selector, subscriber, catching_up: Mutex::new(Some(Vec::new())) }
    }

    /// An event from the watch: delivered, or held while the initial list is handed over.
    fn take(&self, event: Event<'_>) {
        if let Some(held) = self.catching_up.lock().as_mut() {
            held.push(event.to_owned());
            return;
        }
        self.deliver(event);
    }

    /// Hands it `cached` as its initial list, then the events held meanwhile; from then on it
    /// takes events as they come.
    fn catch_up(&self, cached: Vec<(ObjectKey, Entry)>) {
        for (key, entry) in &cached {
            self.deliver(Event::Applied { key, object: entry, old: None, listed: true });
        }
        drop(cached);
        // Locked while the held events go: one arriving meanwhile waits and follows them.
        let mut held = self.catching_up.lock();
        for event in held.take().into_iter().flatten() {
            self.deliver(event.as_event());
        }
    }

    /// Passes the event on as this subscriber's own filtered watch would have reported it.
    fn deliver(&self, event: Event<'_>) {
        let Some(selector) = &self.selector else { return self.subscriber.on_event(event) };
        match event {
            Event::Applied { key, object, old, listed } => {
                let old = old.filter(|o| o.matches(selector));
                if object.matches(selector) {
                    self.subscriber.on_event(Event::Applied { key, object, old, listed });
                } else if old.is_some() {
                    // It left the selection: gone, in its state that no longer matches.
                    self.subscriber.on_event(Event::Deleted { key, object });
                }
            }
            Event::Deleted { object, .. } => {
                if object.matches(selector) {
                    self.subscriber.on_event(event);
                }
            }
        }
    }
}

impl Informer {
    fn notify(&self, event: Event<'_>) {
        for subscribed in self.subscribers.read().iter() {
            subscribed.take(event);
        }
    }

    /// Adds a subscriber and hands it the cache as its initial list. The informer's lock is held
    /// only to take a snapshot (handles, not copies); the list itself is handed without it, so a
    /// slow subscriber joining a big cache stalls neither the watch nor anyone else.
    fn add(&self, subscribed: Subscribed) {
        let subscribed = Arc::new(subscribed);
        let cached = {
            let mut subscribers = self.subscribers.write();
            subscribers.push(subscribed.clone());
            self.store.store().entries()
        };
        subscribed.catch_up(cached);
    }

    /// Applies one watcher event to the store and tells the subscribers. A (re)list is applied
    /// object by object as it arrives, `listed` keeping the keys seen; what it did not hold goes
    /// at its end.
    fn apply(&self, event: watcher::Event<RawObject>, listed: &mut HashSet<ObjectKey>) {
        let parse = |raw: RawObject| match raw.into_cached(&self.key.resource) {
            Ok(object) => Some(object),
            Err(e) => {
                tracing::warn!(informer = %self.key, "skipping an object that does not parse: {e}");
                None
            }
        };
        match event {
            watcher::Event::Init => listed.clear(),
            watcher::Event::InitApply(raw) => {
                if let Some(object) = parse(raw) {
                    let key = object.key.clone();
                    listed.insert(key.clone());
                    if let Inserted::Cached { now, old } = self.store.relisted(object) {
                        self.notify(Event::Applied { key: &key, object: &now, old: old.as_ref(), listed: true });
                    }
                }
            }
            watcher::Event::InitDone => {
                for (key, entry) in self.store.relist_done(listed) {
                    self.notify(Event::Deleted { key: &key, object: &entry });
                }
                *listed = HashSet::new();
            }
            watcher::Event::Apply(raw) => {
                if let Some(object) = parse(raw) {
                    let key = object.key.clone();
                    match self.store.insert_newer(object) {
                        Inserted::Cached { now, old } => self.notify(Event::Applied { key: &key, object: &now, old: old.as_ref(), listed: false }),
                        // Still worth a look: level-triggered subscribers read the cache anyway.
                        Inserted::Stale(kept) => self.notify(Event::Applied { key: &key, object: &kept, old: None, listed: false }),
                        Inserted::Buried | Inserted::Unchanged => {}
                    }
                }
            }
            watcher::Event::Delete(raw) => {
                if let Some(object) = parse(raw) {
                    // The watch's final state: for a filtered watch that an object left, the
                    // state that no longer matches.
                    match self.key.server_selector {
                        Some(_) => self.store.left(&object.key, &object.entry),
                        None => self.store.remove(&object.key, &object.entry),
                    };
                    self.notify(Event::Deleted { key: &object.key, object: &object.entry });
                }
            }
        }
    }
}

/// A subscriber's hold on an informer. Dropping it unsubscribes; the last one stops the watch.
pub struct Subscription {
    informer: Arc<Informer>,
    id: u64,
    selector: Option<LabelSelector>,
    registry: Weak<Informers>,
}

impl Subscription {
    /// The whole store, selected or not.
    pub fn store(&self) -> &Arc<Store> {
        self.informer.store.store()
    }

    /// The informer's key (without a selector).
    pub fn key(&self) -> &WatchKey {
        &self.informer.key
    }

    pub fn selector(&self) -> Option<&LabelSelector> {
        self.selector.as_ref()
    }

    /// Waits until the informer has listed everything once (as whole objects, if this
    /// subscriber needs them).
    pub async fn synced(&self) {
        let mut synced = self.informer.synced.subscribe();
        let _ = synced.wait_for(|s| *s).await;
    }

    pub fn is_synced(&self) -> bool {
        *self.informer.synced.borrow()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let empty = {
            let mut subscribers = self.informer.subscribers.write();
            subscribers.retain(|s| s.id != self.id);
            subscribers.is_empty()
        };
        if empty && let Some(registry) = self.registry.upgrade() {
            registry.stop_unused(&self.informer);
        }
    }
}

/// All informers of the host.
pub struct Informers {
    client: Client,
    discovery: Arc<Discovery>,
    live: Mutex<HashMap<WatchKey, Arc<Informer>>>,
    next_id: AtomicU64,
    shutdown: CancellationToken,
    metrics: InformerMetrics,
}

impl Informers {
    pub fn new(client: Client, discovery: Arc<Discovery>, shutdown: CancellationToken, metrics: InformerMetrics) -> Arc<Self> {
        let informers = Arc::new(Informers { client, discovery, live: Mutex::default(), next_id: AtomicU64::new(1), shutdown, metrics });
        let hook: Arc<dyn Refresh> = informers.clone();
        informers.metrics.refresh_on_scrape(Arc::downgrade(&hook));
        informers
    }

    /// Subscribes to the informer of `key`'s resource and namespace, starting it if nobody
    /// watches that yet. The subscriber first receives every object already cached that its
    /// selector selects, then every change to those.
    pub async fn subscribe(self: &Arc<Self>, mut key: WatchKey, subscriber: Arc<dyn Subscriber>) -> Result<Subscription, InformerError> {
        let resolved = self.discovery.resolve(&key.resource).await.map_err(|source| InformerError::Resolve { key: Box::new(key.clone()), source })?;
        if resolved.scope == Scope::Cluster {
            key.namespace = None;
        }
        let selector = key.selector.take();
        let metadata_only = std::mem::take(&mut key.metadata_only);
        let informer = {
            let mut live = self.live.lock();
            match live.get(&key) {
                Some(informer) => {
                    if !metadata_only && !informer.store.store().holds_objects() {
                        // Under the registry's lock, so that two such subscribers upgrade once.
                        tracing::info!(informer = %informer.key, "watching whole objects instead of metadata: a subscriber needs them");
                        informer.store.set_holds_objects(true);
                        informer.synced.send_replace(false);
                        informer.relist.notify_one();
                    }
                    informer.clone()
                }
                None => {
                    let informer = self.start(key.clone(), resolved, metadata_only);
                    live.insert(key, informer.clone());
                    informer
                }
            }
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        informer.add(Subscribed::new(id, selector.clone(), subscriber));
        Ok(Subscription { informer, id, selector, registry: Arc::downgrade(self) })
    }

    /// Puts an object a plugin just wrote (the API server's answer) into every cache that holds
    /// objects like it, so the plugin's next reconcile reads its own write instead of the state
    /// before it (two reconciles in a row would otherwise both act on the old state). The watch
    /// event that follows still reaches every subscriber. Returns the object as cached (without
    /// `managedFields`): the answer the plugin gets is what its next read returns.
    pub fn observe_write(&self, resource: &Gvk, written: RawObject) -> Arc<str> {
        let answer: Arc<str> = written.json().into();
        let object = match written.into_cached(resource) {
            Ok(object) => object,
            Err(e) => {
                tracing::debug!(%resource, "not caching a written object that does not parse: {e}");
                return answer;
            }
        };
        let answer = object.entry.json().clone();
        let informers: Vec<Arc<Informer>> = self.live.lock().values().filter(|i| &i.key.resource == resource).cloned().collect();
        // What a metadata-only watch would have reported of it, made at most once.
        let metadata = std::cell::OnceCell::new();
        for informer in informers {
            if !informer.store.store().covers(object.key.namespace()) {
                continue;
            }
            let cached = match informer.store.store().holds_objects() {
                true => object.clone(),
                false => match metadata.get_or_init(|| ParsedObject::from_json(store::metadata_of(object.entry.json()))) {
                    Ok(metadata) => metadata.clone(),
                    Err(_) => continue,
                },
            };
            match &informer.key.server_selector {
                // Written out of this watch's selection: gone from it now, as the watch will say.
                Some(selector) if !cached.entry.matches(selector) => drop(informer.store.left(&cached.key, &cached.entry)),
                _ => drop(informer.store.written(cached)),
            }
        }
        answer
    }

    /// Makes every informer that `which` picks, and whose last list began before `since`, list
    /// again (a consistent list), and waits until each has listed once since then.
    pub async fn relist_before(&self, since: Instant, which: impl Fn(&WatchKey) -> bool) {
        let stale: Vec<Arc<Informer>> =
            self.live.lock().values().filter(|i| which(&i.key) && i.lists.borrow().started.is_none_or(|started| started < since)).cloned().collect();
        for informer in &stale {
            informer.relist.notify_one();
        }
        for informer in stale {
            let mut lists = informer.lists.subscribe();
            let _ = lists.wait_for(|round| round.done && round.started.is_some_and(|started| started >= since)).await;
        }
    }

    /// Takes an object its writer just deleted out of every cache holding it, so that the
    /// writer's next read no longer sees it. Subscribers hear of it from the watch, as usual.
    pub fn observe_delete(&self, resource: &Gvk, key: &ObjectKey) {
        let informers: Vec<Arc<Informer>> = self.live.lock().values().filter(|i| &i.key.resource == resource).cloned().collect();
        for informer in informers {
            informer.store.forget(key);
        }
    }

    /// The watches running now.
    pub fn active(&self) -> Vec<WatchKey> {
        self.live.lock().keys().cloned().collect()
    }

    /// Stops `informer`'s watch once nothing subscribes to it.
    fn stop_unused(&self, informer: &Arc<Informer>) {
        let mut live = self.live.lock();
        // Someone may have subscribed again between the last unsubscribe and this lock.
        if informer.subscribers.read().is_empty() && live.get(&informer.key).is_some_and(|i| Arc::ptr_eq(i, informer)) {
            live.remove(&informer.key);
            informer.stop.cancel();
            tracing::info!(informer = %informer.key, "stopped watching: no subscribers left");
        }
    }

    fn start(&self, key: WatchKey, resolved: crate::discovery::Resolved, metadata_only: bool) -> Arc<Informer> {
        let store = Writer::new(key.resource.clone(), resolved.scope, key.namespace.clone());
        store.set_holds_objects(!metadata_only);
        let informer = Arc::new(Informer {
            store,
            key,
            synced: watch::channel(false).0,
            lists: watch::channel(ListRound::default()).0,
            relist: Notify::new(),
            subscribers: RwLock::default(),
            stop: self.shutdown.child_token(),
        });
        let mut config = watcher::Config::default();
        if let Some(selector) = &informer.key.server_selector {
            config = config.labels(selector.as_str());
        }
        let (client, api_resource) = (self.client.clone(), resolved.api);
        let namespace = informer.key.namespace.clone();
        let resource = informer.key.resource.clone();
        // A watcher of what the store is to hold now: whole objects or metadata.
        let open = move |objects: bool| -> BoxStream<'static, watcher::Result<watcher::Event<RawObject>>> {
            if objects {
                return watcher(api::<RawObject>(&client, namespace.as_deref(), &api_resource), config.clone()).default_backoff().boxed();
            }
            // `Api<PartialObjectMeta<_>>` makes metadata-only requests.
            let resource = resource.clone();
            watcher(api::<RawMetadata>(&client, namespace.as_deref(), &api_resource), config.clone())
                .default_backoff()
                .filter_map(move |event| std::future::ready(event.map(|event| as_objects(event, &resource)).transpose()))
                .boxed()
        };
        let task = informer.clone();
        tokio::spawn(async move {
            let mut objects = task.store.store().holds_objects();
            tracing::info!(informer = %task.key, metadata_only = !objects, "watching");
            let mut stream = open(objects);
            let mut listed = HashSet::new();
            loop {
                let event = tokio::select! {
                    _ = task.stop.cancelled() => break,
                    // A new watcher begins with a list (applied as a relist: what it does not
                    // hold goes at its end).
                    _ = task.relist.notified() => {
                        tracing::debug!(informer = %task.key, "listing again");
                        objects = task.store.store().holds_objects();
                        stream = open(objects);
                        continue;
                    }
                    event = stream.next() => event,
                };
                match event {
                    Some(Ok(event)) => {
                        // Init comes before the list is requested: a list begun after an
                        // instant reads the state after it.
                        if matches!(event, watcher::Event::Init) {
                            task.lists.send_replace(ListRound { started: Some(Instant::now()), done: false });
                        }
                        let done = matches!(event, watcher::Event::InitDone);
                        task.apply(event, &mut listed);
                        if done {
                            task.lists.send_modify(|round| round.done = true);
                            // A metadata list ending after a subscriber asked for whole objects
                            // syncs nobody: the whole objects' list is on its way.
                            if objects || !task.store.store().holds_objects() {
                                task.synced.send_replace(true);
                            }
                        }
                    }
                    Some(Err(e)) => tracing::warn!(informer = %task.key, "watch failed, retrying with backoff: {}", excerpt(&e.to_string(), ERROR_BYTES)),
                    None => break,
                }
            }
        });
        informer
    }
}

impl Refresh for Informers {
    fn refresh(&self) {
        let live: Vec<Arc<Informer>> = self.live.lock().values().cloned().collect();
        self.metrics.clear();
        for informer in live {
            let (key, store) = (&informer.key, informer.store.store());
            let scope = (key.namespace.as_deref().unwrap_or_default(), key.server_selector.as_ref().map(LabelSelector::as_str).unwrap_or_default());
            self.metrics.set(&key.resource.to_string(), scope, !store.holds_objects(), store.len(), store.heap_bytes());
        }
    }
}

/// The API of `api_resource`'s objects in `namespace` (all namespaces when `None`), as `K`.
fn api<K>(client: &Client, namespace: Option<&str>, api_resource: &ApiResource) -> Api<K>
where
    K: kube::Resource<DynamicType = ApiResource, Scope = DynamicResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, api_resource),
        None => Api::all_with(client.clone(), api_resource),
    }
}

/// A metadata-only watch's event as its objects' metadata, named as objects of `resource`; an
/// object that does not convert is skipped (it cannot be cached either).
fn as_objects(event: watcher::Event<RawMetadata>, resource: &Gvk) -> Option<watcher::Event<RawObject>> {
    let convert = |partial| {
        RawObject::from_metadata(partial, resource).map_err(|e| tracing::warn!(%resource, "skipping an object whose metadata does not convert: {e}")).ok()
    };
    Some(match event {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(partial) => watcher::Event::InitApply(convert(partial)?),
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::Apply(partial) => watcher::Event::Apply(convert(partial)?),
        watcher::Event::Delete(partial) => watcher::Event::Delete(convert(partial)?),
    })
}

/// A plugin's view of the caches: for each resource it may read, the stores (one per namespace
/// when the host serves several) and, per store, the selectors that bound what it sees.
#[derive(Clone, Default)]
pub struct CacheView {
    stores: HashMap<Gvk, Vec<StoreView>>,
}

/// Part of a store: the objects matching any of `selectors`, or all when `None`; of each only
/// `fields` when given (see [`crate::projection`]).
#[derive(Clone)]
pub struct StoreView {
    store: Arc<Store>,
    selectors: Option<Vec<LabelSelector>>,
    fields: Option<Arc<Fields>>,
}

impl StoreView {
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    fn admits(&self, entry: &Entry) -> bool {
        self.selectors.as_ref().is_none_or(|all| all.iter().any(|s| entry.matches(s)))
    }

    /// What of each object it hands out, when that is less than the store holds (a store of
    /// metadata holds what a metadata-only view hands).
    fn projection(&self) -> Option<&Fields> {
        self.fields.as_deref().filter(|f| !f.is_metadata_only() || self.store.holds_objects())
    }

    /// An entry's object as handed.
    fn handed(&self, entry: &Entry) -> Arc<str> {
        match self.projection() {
            Some(fields) => crate::projection::project(entry.json(), fields).into(),
            None => entry.json().clone(),
        }
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<str>> {
        let entry = self.store.entry(key).filter(|e| self.admits(e))?;
        Some(self.handed(&entry))
    }

    /// How many objects it admits.
    pub fn count(&self) -> usize {
        if self.selectors.is_none() {
            return self.store.len();
        }
        // Counted as the filter sees them; none is copied.
        let admitted = std::cell::Cell::new(0usize);
        let _ = self.store.list_where(
            None,
            |e| {
                admitted.set(admitted.get() + usize::from(self.admits(e)));
                false
            },
            usize::MAX,
        );
        admitted.get()
    }

    /// Objects in `namespace` (all when `None`) matching `selector` too, sorted by key; `Err`
    /// as [`Store::list_bounded`].
    pub fn list(&self, namespace: Option<&str>, selector: Option<&LabelSelector>, max_bytes: usize) -> Result<Vec<(ObjectKey, Arc<str>)>, usize> {
        let admits = |e: &Entry| self.admits(e) && selector.is_none_or(|s| e.matches(s));
        if self.projection().is_none() {
            return self.store.list_where(namespace, admits, max_bytes);
        }
        // Bounded by what it hands out: the whole objects are only handles here.
        let mut listed = Vec::new();
        let mut bytes = 0usize;
        for (key, entry) in self.store.entries_where(namespace, admits) {
            let handed = self.handed(&entry);
            bytes = bytes.saturating_add(handed.len());
            if bytes <= max_bytes {
                listed.push((key, handed));
            }
        }
        if bytes > max_bytes {
            return Err(bytes);
        }
        listed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(listed)
    }
}

impl StoreView {
    /// Objects in `namespace` (all when `None`) that `owner` controls and, with `orphans`, those
    /// no one controls that match it, sorted by key.
    /// The controlled ones come from the store's controller index; orphans take a scan.
    fn children(&self, namespace: Option<&str>, owner: Owner, orphans: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)> {
        let mut found = self.store.controlled_where(namespace, owner, |e| self.admits(e));
        if let Some(selector) = orphans {
            found.extend(self.store.entries_where(namespace, |e| self.admits(e) && e.is_orphan() && e.matches(selector)));
        }
        found.into_iter().map(|(key, entry)| (key, self.handed(&entry))).collect()
    }
}

impl CacheView {
    /// Adds what `selector` selects of `store` (all of it with `None`).
    pub fn insert(&mut self, store: Arc<Store>, selector: Option<LabelSelector>) {
        let views = self.stores.entry(store.resource().clone()).or_default();
        match views.iter_mut().find(|v| Arc::ptr_eq(&v.store, &store)) {
            Some(view) => match (&mut view.selectors, selector) {
                (Some(all), Some(selector)) => all.push(selector),
                (selectors, _) => *selectors = None,
            },
            None => views.push(StoreView { store, selectors: selector.map(|s| vec![s]), fields: None }),
        }
    }

    /// Hands out what `manifest` reads of each kind: only the metadata of its metadata-only
    /// kinds (`views.metadata-only`), only the fields of its projected ones (`projections`).
    pub fn hand_as(&mut self, manifest: &Manifest) {
        for (resource, views) in &mut self.stores {
            if let Some(fields) = manifest.reads(resource) {
                let fields = Arc::new(fields.clone());
                views.iter_mut().for_each(|view| view.fields = Some(fields.clone()));
            }
        }
    }

    /// Hands out only `fields` of `resource`'s objects.
    #[cfg(test)]
    fn project(&mut self, resource: &Gvk, fields: &Arc<Fields>) {
        for view in self.stores.get_mut(resource).into_iter().flatten() {
            view.fields = Some(fields.clone());
        }
    }

    pub fn views(&self, resource: &Gvk) -> &[StoreView] {
        self.stores.get(resource).map(Vec::as_slice).unwrap_or_default()
    }

    /// Whether the objects of `resource` live in namespaces; `None` when it is not cached.
    pub fn scope(&self, resource: &Gvk) -> Option<Scope> {
        self.views(resource).first().map(|v| v.store.scope())
    }

    pub fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<Arc<str>> {
        self.views(resource).iter().filter(|v| v.store.covers(key.namespace())).find_map(|v| v.get(key))
    }

    /// Objects of `resource` in `namespace` (all when `None`) whose controller owner reference
    /// names the object of uid `owner` and, with `orphans`, those without a controller owner
    /// that match it, sorted by key: a parent's children and the orphans it may adopt. Found by
    /// the hash each entry keeps of its controller's uid, not by parsing the objects.
    pub fn children(&self, resource: &Gvk, namespace: Option<&str>, owner: &str, orphans: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)> {
        let owner = Owner::new(owner);
        let mut all: Vec<_> = self
            .views(resource)
            .iter()
            .filter(|v| namespace.is_none() || v.store.covers(namespace))
            .flat_map(|v| v.children(namespace, owner, orphans))
            .collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all.dedup_by(|a, b| a.0 == b.0);
        all
    }

    /// Objects in `namespace` (all when `None`) matching `selector`, sorted by key; `Err` with
    /// the bytes the answer would have had when they pass `max_bytes`.
    pub fn list(
        &self,
        resource: &Gvk,
        namespace: Option<&str>,
        selector: Option<&LabelSelector>,
        max_bytes: usize,
    ) -> Result<Vec<(ObjectKey, Arc<str>)>, usize> {
        let views: Vec<&StoreView> = self.views(resource).iter().filter(|v| namespace.is_none() || v.store.covers(namespace)).collect();
        if let [view] = views.as_slice() {
            return view.list(namespace, selector, max_bytes);
        }
        let mut all = Vec::new();
        let mut budget = max_bytes;
        for view in &views {
            match view.list(namespace, selector, budget) {
                Ok(found) => {
                    budget -= found.iter().map(|(_, json)| json.len()).sum::<usize>();
                    all.extend(found);
                }
                Err(_) => {
                    // Counted, not copied: a bound of 0 makes each store count its answer.
                    let total = views.iter().filter_map(|v| v.list(namespace, selector, 0).err()).sum();
                    return Err(total);
                }
            }
        }
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, app: &str) -> ParsedObject {
        let json = format!(r#"{{"metadata":{{"name":"{name}","namespace":"n","resourceVersion":"1","labels":{{"app":"{app}"}}}}}}"#);
        ParsedObject::from_json(json.into()).unwrap()
    }

    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl Subscriber for Seen {
        fn on_event(&self, event: Event<'_>) {
            let said = match event {
                Event::Applied { key, old, .. } => format!("applied {} old={}", key.name(), old.is_some()),
                Event::Deleted { key, .. } => format!("deleted {}", key.name()),
            };
            self.0.lock().push(said);
        }
    }

    /// A subscriber with a selector hears what a filtered watch of its own would have said.
    #[test]
    fn a_selector_sees_its_objects_come_and_go_as_through_its_own_watch() {
        let seen = Arc::new(Seen::default());
        let subscribed = Subscribed::new(1, Some("app=web".parse().unwrap()), seen.clone());
        let (web, db) = (entry("a", "web"), entry("a", "db"));
        let key = &web.key;
        subscribed.deliver(Event::Applied { key, object: &web.entry, old: None, listed: false });
        subscribed.deliver(Event::Applied { key, object: &web.entry, old: Some(&web.entry), listed: false });
        subscribed.deliver(Event::Applied { key, object: &db.entry, old: Some(&web.entry), listed: false });
        subscribed.deliver(Event::Applied { key, object: &db.entry, old: Some(&db.entry), listed: false });
        subscribed.deliver(Event::Applied { key, object: &web.entry, old: Some(&db.entry), listed: false });
        subscribed.deliver(Event::Deleted { key, object: &web.entry });
        subscribed.deliver(Event::Deleted { key, object: &db.entry });
        assert_eq!(*seen.0.lock(), ["applied a old=false", "applied a old=true", "deleted a", "applied a old=false", "deleted a"]);
    }

    /// Records names like [`Seen`], but blocks in its first event until released.
    struct Slow {
        seen: Seen,
        started: Mutex<Option<std::sync::mpsc::Sender<()>>>,
        release: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Subscriber for Slow {
        fn on_event(&self, event: Event<'_>) {
            if let Some(started) = self.started.lock().take() {
                started.send(()).unwrap();
                self.release.lock().recv().unwrap();
            }
            self.seen.on_event(event);
        }
    }

    /// A subscriber joining a cache is handed it outside the informer's lock: a change the watch
    /// sees meanwhile reaches the others at once, and the joiner right after its list.
    #[test]
    fn a_late_subscriber_slow_to_take_its_list_holds_up_nobody() {
        let resource = Gvk::new("", "v1", "ConfigMap");
        let informer = Arc::new(Informer {
            key: WatchKey::new(resource.clone(), None),
            store: Writer::new(resource, Scope::Namespaced, None),
            synced: watch::channel(true).0,
            lists: watch::channel(ListRound::default()).0,
            relist: Notify::new(),
            subscribers: RwLock::default(),
            stop: CancellationToken::new(),
        });
        for name in ["o1", "o2", "o3"] {
            informer.store.insert(entry(name, "web"));
        }
        let seen = Arc::new(Seen::default());
        informer.add(Subscribed::new(1, None, seen.clone()));
        seen.0.lock().clear();
        let (started, on_its_list) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel();
        let slow = Arc::new(Slow { seen: Seen::default(), started: Mutex::new(Some(started)), release: Mutex::new(released) });
        let joining = std::thread::spawn({
            let (informer, slow) = (informer.clone(), slow.clone());
            move || informer.add(Subscribed::new(2, None, slow))
        });
        on_its_list.recv().unwrap();
        // The watch sees a change while the joiner is still on its list.
        let changed = entry("o9", "web");
        informer.store.insert(changed.clone());
        let watch = std::thread::spawn({
            let informer = informer.clone();
            move || informer.notify(Event::Applied { key: &changed.key, object: &changed.entry, old: None, listed: false })
        });
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while seen.0.lock().is_empty() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let heard = seen.0.lock().clone();
        release.send(()).unwrap();
        assert_eq!(heard, ["applied o9 old=false"], "the others hear of the change while the joiner takes its list");
        watch.join().unwrap();
        joining.join().unwrap();
        let joiner = slow.seen.0.lock().clone();
        assert_eq!(joiner.len(), 4, "{joiner:?}");
        assert_eq!(joiner[3], "applied o9 old=false", "the change follows the list it missed: {joiner:?}");
    }

    #[test]
    fn a_metadata_only_view_of_whole_objects_hands_their_metadata_bounded_by_its_size() {
        let resource = Gvk::new("", "v1", "ConfigMap");
        let writer = Writer::new(resource.clone(), Scope::Namespaced, None);
        let big = |name: &str| {
            let json =
                format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"n"}},"data":{{"k":"{}"}}}}"#, "x".repeat(10_000));
            ParsedObject::from_json(json.into()).unwrap()
        };
        writer.insert(big("a"));
        writer.insert(big("b"));
        let mut view = CacheView::default();
        view.insert(writer.store().clone(), None);
        view.project(&resource, &Arc::new(crate::projection::METADATA_ONLY.clone()));
        let a = view.get(&resource, &ObjectKey::new(Some("n"), "a")).unwrap();
        assert_eq!(&*a, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n"}}"#);
        let listed = view.list(&resource, None, None, 2 * a.len()).expect("two objects' metadata fit where one whole object would not");
        assert_eq!(listed.iter().map(|(k, _)| k.name()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(listed.iter().all(|(_, json)| !json.contains(r#""data":"#)));
        assert_eq!(view.list(&resource, None, None, a.len()).unwrap_err(), 2 * a.len(), "over the bound: the size it would have had");
        // A store a metadata-only watch fills is handed as it is.
        writer.set_holds_objects(false);
        assert!(view.get(&resource, &ObjectKey::new(Some("n"), "a")).unwrap().contains(r#""data":"#), "not cut again");
        // Declared fields are handed, and bound the answer by their size.
        writer.set_holds_objects(true);
        view.project(&resource, &Arc::new(Fields::new([["data", "other"]])));
        let a = view.get(&resource, &ObjectKey::new(Some("n"), "a")).unwrap();
        assert_eq!(&*a, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n"},"data":{}}"#);
        assert_eq!(view.list(&resource, None, None, 2 * a.len()).unwrap().len(), 2);
        assert_eq!(view.children(&resource, None, "no-such-owner", None).len(), 0);
    }

    #[test]
    fn a_view_reads_only_what_its_selectors_select_unless_one_takes_all() {
        let writer = Writer::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        writer.insert(entry("w", "web"));
        writer.insert(entry("d", "db"));
        let resource = Gvk::new("", "v1", "ConfigMap");
        let (w, d) = (ObjectKey::new(Some("n"), "w"), ObjectKey::new(Some("n"), "d"));
        let mut view = CacheView::default();
        view.insert(writer.store().clone(), Some("app=web".parse().unwrap()));
        assert!(view.get(&resource, &w).is_some() && view.get(&resource, &d).is_none());
        assert_eq!(view.list(&resource, None, None, usize::MAX).unwrap().len(), 1);
        view.insert(writer.store().clone(), Some("app=db".parse().unwrap()));
        assert_eq!(view.list(&resource, None, None, usize::MAX).unwrap().len(), 2, "either selector admits");
        assert_eq!(view.list(&resource, None, Some(&"app=db".parse().unwrap()), usize::MAX).unwrap().len(), 1, "and the request's selector too");
        let mut all = CacheView::default();
        all.insert(writer.store().clone(), Some("app=web".parse().unwrap()));
        all.insert(writer.store().clone(), None);
        assert!(all.get(&resource, &d).is_some(), "an unfiltered subscription reads everything");
    }
}
