//! Shared informers: one list+watch per (resource, namespace scope, label selector) for every
//! plugin that needs it, each feeding a [`Store`] and telling its subscribers what changed.
//! Informers don't know who listens: a subscriber is anything that takes events. Each informer
//! keeps the only [`Writer`] of its store; everyone else holds read-only [`Store`] handles.
//!
//! The watch itself is kube-rs's `watcher` (re-list on 410 Gone, bookmarks, backoff); the
//! reflector store is ours, because kube's keeps a typed object per entry, and the cache here
//! keeps JSON text that a guest can be handed without re-serializing (see [`store`]).

pub mod raw;
pub mod store;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use store::{Entry, Inserted, ParsedObject, Store, Writer};

use self::raw::RawObject;
use crate::discovery::{Discovery, DiscoveryError};
use crate::resource::{Gvk, ObjectKey, Scope};
use crate::selector::LabelSelector;

/// What one informer watches.
#[derive(Debug, Clone)]
pub struct WatchKey {
    pub resource: Gvk,
    /// `None`: every namespace (and always for cluster-scoped resources).
    pub namespace: Option<String>,
    pub selector: Option<LabelSelector>,
}

impl WatchKey {
    fn identity(&self) -> (&Gvk, Option<&str>, Option<&str>) {
        (&self.resource, self.namespace.as_deref(), self.selector.as_ref().map(LabelSelector::as_str))
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
    Applied { key: &'a ObjectKey, object: &'a Entry, old: Option<&'a Entry> },
    /// Gone from this watch: deleted, or (for a watch with a label selector) no longer
    /// matching it. `object` is its final state as the watch reported it.
    Deleted { key: &'a ObjectKey, object: &'a Entry },
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

/// One running list+watch, its store and its subscribers.
pub struct Informer {
    key: WatchKey,
    store: Writer,
    synced: watch::Receiver<bool>,
    subscribers: RwLock<Vec<(u64, Arc<dyn Subscriber>)>>,
    stop: CancellationToken,
}

impl Informer {
    fn notify(&self, event: Event<'_>) {
        for (_, subscriber) in self.subscribers.read().iter() {
            subscriber.on_event(event);
        }
    }

    /// Applies one watcher event to the store and tells the subscribers.
    fn apply(&self, event: watcher::Event<RawObject>, relist: &mut Vec<ParsedObject>) {
        let parse = |raw: RawObject| match raw.into_cached(&self.key.resource) {
            Ok(object) => Some(object),
            Err(e) => {
                tracing::warn!(informer = %self.key, "skipping an object that does not parse: {e}");
                None
            }
        };
        match event {
            watcher::Event::Init => relist.clear(),
            watcher::Event::InitApply(raw) => relist.extend(parse(raw)),
            watcher::Event::InitDone => {
                let listed = std::mem::take(relist);
                let before: std::collections::HashMap<ObjectKey, Entry> = self.store.store().entries().into_iter().collect();
                let keys: Vec<(ObjectKey, Entry)> = listed.iter().map(|o| (o.key.clone(), o.entry.clone())).collect();
                for (key, entry) in self.store.replace_all(listed) {
                    self.notify(Event::Deleted { key: &key, object: &entry });
                }
                for (key, entry) in &keys {
                    if self.store.store().entry(key).is_some() {
                        self.notify(Event::Applied { key, object: entry, old: before.get(key) });
                    }
                }
            }
            watcher::Event::Apply(raw) => {
                if let Some(object) = parse(raw) {
                    let key = object.key.clone();
                    match self.store.insert_newer(object) {
                        Inserted::Cached { now, old } => self.notify(Event::Applied { key: &key, object: &now, old: old.as_ref() }),
                        // Still worth a look: level-triggered subscribers read the cache anyway.
                        Inserted::Stale(kept) => self.notify(Event::Applied { key: &key, object: &kept, old: None }),
                        Inserted::Buried => {}
                    }
                }
            }
            watcher::Event::Delete(raw) => {
                if let Some(object) = parse(raw) {
                    // The watch's final state: for a filtered watch that an object left, the
                    // state that no longer matches.
                    self.store.remove(&object.key, &object.entry);
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
    registry: Weak<Informers>,
}

impl Subscription {
    pub fn store(&self) -> &Arc<Store> {
        self.informer.store.store()
    }

    pub fn key(&self) -> &WatchKey {
        &self.informer.key
    }

    /// Waits until the informer has listed everything once.
    pub async fn synced(&self) {
        let mut synced = self.informer.synced.clone();
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
            subscribers.retain(|(id, _)| *id != self.id);
            subscribers.is_empty()
        };
        if empty && let Some(registry) = self.registry.upgrade() {
            registry.release(&self.informer);
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
}

impl Informers {
    pub fn new(client: Client, discovery: Arc<Discovery>, shutdown: CancellationToken) -> Arc<Self> {
        Arc::new(Informers { client, discovery, live: Mutex::default(), next_id: AtomicU64::new(1), shutdown })
    }

    /// Subscribes to the informer for `key`, starting it if nobody watches that yet. The
    /// subscriber first receives every object already cached, then every change.
    pub async fn subscribe(self: &Arc<Self>, mut key: WatchKey, subscriber: Arc<dyn Subscriber>) -> Result<Subscription, InformerError> {
        let resolved = self.discovery.resolve(&key.resource).await.map_err(|source| InformerError::Resolve { key: Box::new(key.clone()), source })?;
        if resolved.scope == Scope::Cluster {
            key.namespace = None;
        }
        let informer = {
            let mut live = self.live.lock();
            match live.get(&key) {
                Some(informer) => informer.clone(),
                None => {
                    let informer = self.start(key.clone(), resolved);
                    live.insert(key, informer.clone());
                    informer
                }
            }
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut subscribers = informer.subscribers.write();
            for (key, entry) in informer.store.store().entries() {
                subscriber.on_event(Event::Applied { key: &key, object: &entry, old: None });
            }
            subscribers.push((id, subscriber));
        }
        Ok(Subscription { informer, id, registry: Arc::downgrade(self) })
    }

    /// Puts an object a plugin just wrote (the API server's answer) into every cache that holds
    /// objects like it, so the plugin's next reconcile reads its own write instead of the state
    /// before it (two reconciles in a row would otherwise both act on the old state). The watch
    /// event that follows still reaches every subscriber.
    pub fn observe_write(&self, resource: &Gvk, written: RawObject) {
        let informers: Vec<Arc<Informer>> = self.live.lock().values().filter(|i| &i.key.resource == resource).cloned().collect();
        if informers.is_empty() {
            return;
        }
        let object = match written.into_cached(resource) {
            Ok(object) => object,
            Err(e) => {
                tracing::debug!(%resource, "not caching a written object that does not parse: {e}");
                return;
            }
        };
        for informer in informers {
            let selected = informer.key.selector.as_ref().is_none_or(|s| s.matches(|k| object.entry.label(k)));
            if selected && informer.store.store().covers(object.key.namespace()) {
                informer.store.insert_newer(object.clone());
            }
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

    fn release(&self, informer: &Arc<Informer>) {
        let mut live = self.live.lock();
        // Someone may have subscribed again between the last unsubscribe and this lock.
        if informer.subscribers.read().is_empty() && live.get(&informer.key).is_some_and(|i| Arc::ptr_eq(i, informer)) {
            live.remove(&informer.key);
            informer.stop.cancel();
            tracing::info!(informer = %informer.key, "stopped watching: no subscribers left");
        }
    }

    fn start(&self, key: WatchKey, resolved: crate::discovery::Resolved) -> Arc<Informer> {
        let (synced_tx, synced) = watch::channel(false);
        let informer = Arc::new(Informer {
            store: Writer::new(key.resource.clone(), resolved.scope, key.namespace.clone()),
            key,
            synced,
            subscribers: RwLock::default(),
            stop: self.shutdown.child_token(),
        });
        let api: Api<RawObject> = match &informer.key.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resolved.api),
            None => Api::all_with(self.client.clone(), &resolved.api),
        };
        let mut config = watcher::Config::default();
        if let Some(selector) = &informer.key.selector {
            config = config.labels(selector.as_str());
        }
        let task = informer.clone();
        tokio::spawn(async move {
            tracing::info!(informer = %task.key, "watching");
            let mut stream = std::pin::pin!(watcher(api, config).default_backoff());
            let mut relist = Vec::new();
            loop {
                let event = tokio::select! {
                    _ = task.stop.cancelled() => break,
                    event = stream.next() => event,
                };
                match event {
                    Some(Ok(event)) => {
                        let done = matches!(event, watcher::Event::InitDone);
                        task.apply(event, &mut relist);
                        if done {
                            synced_tx.send_replace(true);
                        }
                    }
                    Some(Err(e)) => tracing::warn!(informer = %task.key, "watch failed, retrying with backoff: {e}"),
                    None => break,
                }
            }
        });
        informer
    }
}

/// A plugin's view of the caches: the stores of each resource it may read (one per namespace
/// when the host serves several).
#[derive(Clone, Default)]
pub struct CacheView {
    stores: HashMap<Gvk, Vec<Arc<Store>>>,
}

impl CacheView {
    pub fn insert(&mut self, store: Arc<Store>) {
        let stores = self.stores.entry(store.resource().clone()).or_default();
        if !stores.iter().any(|s| Arc::ptr_eq(s, &store)) {
            stores.push(store);
        }
    }

    pub fn stores(&self, resource: &Gvk) -> &[Arc<Store>] {
        self.stores.get(resource).map(Vec::as_slice).unwrap_or_default()
    }

    /// Whether the objects of `resource` live in namespaces; `None` when it is not cached.
    pub fn scope(&self, resource: &Gvk) -> Option<Scope> {
        self.stores(resource).first().map(|s| s.scope())
    }

    pub fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<Arc<str>> {
        self.stores(resource).iter().filter(|s| s.covers(key.namespace())).find_map(|s| s.get(key))
    }

    /// Objects in `namespace` (all when `None`) matching `selector`, sorted by key; `Err` with
    /// the bytes the answer would have had when they pass `max_bytes`.
    pub fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&LabelSelector>, max_bytes: usize) -> Result<Vec<(ObjectKey, Arc<str>)>, usize> {
        let stores: Vec<&Arc<Store>> = self.stores(resource).iter().filter(|s| namespace.is_none() || s.covers(namespace)).collect();
        if let [store] = stores.as_slice() {
            return store.list_bounded(namespace, selector, max_bytes);
        }
        let mut all = Vec::new();
        let mut budget = max_bytes;
        for store in stores {
            match store.list_bounded(namespace, selector, budget) {
                Ok(found) => {
                    budget -= found.iter().map(|(_, json)| json.len()).sum::<usize>();
                    all.extend(found);
                }
                Err(_) => {
                    // Counted, not copied: a bound of 0 makes each store count its answer.
                    let total = self.stores(resource).iter().filter_map(|s| s.list_bounded(namespace, selector, 0).err()).sum();
                    return Err(total);
                }
            }
        }
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(all)
    }
}
