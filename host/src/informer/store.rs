//! The cache of one watched resource: objects as JSON text, keyed by namespace/name, with their
//! labels for selectors. Readers get `Arc<str>` handles, so a read never copies or
//! re-serializes and never sees a half-applied update; a guest receives its own copy when the
//! runtime lowers the text into its memory.
//!
//! A [`Store`] is read-only; its one [`Writer`] stays with the informer that fills it (as
//! kube-runtime's reflector splits `Writer` from `Store`), so nothing a subscriber or a plugin
//! does can change the shared cache. The writer also keeps tombstones of deleted objects, so
//! that an answer to a write that arrives after the object's deletion was seen (or after its
//! writer deleted it) cannot bring it back.
//!
//! A store holds whole objects or, fed by a metadata-only watch, their metadata alone
//! ([`Store::holds_objects`]); [`metadata_of`] gives a whole object's metadata the same shape.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque, hash_map};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::resource::{Gvk, ObjectKey, Scope};
use crate::selector::LabelSelector;

/// An object as the cache holds it.
#[derive(Debug, Clone)]
pub struct Entry {
    json: Arc<str>,
    labels: Labels,
    /// `metadata.resourceVersion` as a number; 0 when missing or not numeric.
    version: u64,
    /// A hash of `metadata.uid`; 0 when missing. Tells a re-created object from the one deleted.
    uid: u64,
    /// A hash of the uid of its controller owner reference; 0 when it has none: a parent finds
    /// its children without parsing every object.
    controller: u64,
}

impl Entry {
    pub fn json(&self) -> &Arc<str> {
        &self.json
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(&self.json, key)
    }

    /// `metadata.resourceVersion` as a number; 0 when missing or not numeric.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn matches(&self, selector: &LabelSelector) -> bool {
        selector.matches(|k| self.label(k))
    }

    /// Whether its controller owner reference names `owner`.
    pub fn controlled_by(&self, owner: Owner) -> bool {
        self.controller == owner.0
    }

    /// Whether no controller owner reference names anything (an orphan, to a parent that may
    /// adopt it).
    pub fn is_orphan(&self) -> bool {
        self.controller == 0
    }

    /// Bytes this entry holds on the heap (for the cache-size benchmark).
    pub fn heap_bytes(&self) -> usize {
        // Arc header (two counters) + text, and the labels' own copy if they have one.
        16 + self.json.len() + self.labels.heap_bytes()
    }
}

/// `json` (an object) with only its `apiVersion`, `kind` and `metadata`, without
/// `metadata.managedFields` (which cached objects never carry). Text that is not an object gives
/// `{}`: nothing of it is handed on.
pub fn metadata_of(json: &str) -> Arc<str> {
    crate::projection::project(json, &crate::projection::METADATA_ONLY).into()
}

/// An object that may control others, by its uid, as entries keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner(u64);

impl Owner {
    pub fn new(uid: &str) -> Self {
        Owner(uid_hash(uid))
    }
}

/// A uid as entries keep it: a hash, never 0.
fn uid_hash(uid: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    uid.hash(&mut hasher);
    hasher.finish().max(1)
}

/// Where an entry's labels are. An API server's labels need no JSON escapes (their keys and values
/// are letters, digits and `-_./`), so the object's own text serves them: a scan of its
/// `metadata.labels` finds a label as fast as a copy would, and the copy (a fifth of a small
/// object's cached bytes) is not made. Labels with escapes (no API server sends them; a test or a
/// recording may) are unescaped into a packed copy, `key\0value\0...`.
#[derive(Debug, Clone)]
enum Labels {
    /// The byte range of the `{...}` of `metadata.labels` in the entry's text (empty: none).
    InText {
        start: u32,
        len: u32,
    },
    Packed(Box<str>),
}

impl Labels {
    const NONE: Labels = Labels::InText { start: 0, len: 0 };

    /// The labels of `json`, whose `metadata.labels` is `raw` (a slice of `json`): validated as
    /// an object of strings, as a map would be.
    fn of(json: &str, raw: Option<&RawValue>) -> Result<Self, serde_json::Error> {
        let Some(raw) = raw else { return Ok(Labels::NONE) };
        let text = raw.get();
        let start = text.as_ptr() as usize - json.as_ptr() as usize;
        if !text.contains('\\')
            && let (Ok(start), Ok(len)) = (u32::try_from(start), u32::try_from(text.len()))
        {
            // Only validated: strings without escapes borrow, so nothing is copied.
            let _: Option<HashMap<&str, &str>> = serde_json::from_str(text)?;
            return Ok(Labels::InText { start, len });
        }
        let pairs: Option<BTreeMap<Cow<'_, str>, Cow<'_, str>>> = serde_json::from_str(text)?;
        let mut packed = String::new();
        for (k, v) in pairs.iter().flatten() {
            packed.push_str(k);
            packed.push('\0');
            packed.push_str(v);
            packed.push('\0');
        }
        Ok(Labels::Packed(packed.into_boxed_str()))
    }

    /// The value of label `key` of the entry whose text is `json`.
    fn get<'a>(&'a self, json: &'a str, key: &str) -> Option<&'a str> {
        match self {
            Labels::InText { start, len } => {
                let text = json.get(*start as usize..(*start + *len) as usize)?;
                // `{"k":"v","k2":"v2"}`: every string is a key or a value, none holds a quote.
                value_of(text.split('"').skip(1).step_by(2), key)
            }
            Labels::Packed(packed) => value_of(packed.split('\0'), key),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Labels::InText { .. } => 0,
            Labels::Packed(packed) => packed.len(),
        }
    }
}

/// The value after `key` in `key, value, key, value, ...`.
fn value_of<'a>(mut pairs: impl Iterator<Item = &'a str>, key: &str) -> Option<&'a str> {
    while let (Some(k), Some(v)) = (pairs.next(), pairs.next()) {
        if k == key {
            return Some(v);
        }
    }
    None
}

/// An object parsed just enough to be cached.
#[derive(Debug, Clone)]
pub struct ParsedObject {
    pub key: ObjectKey,
    pub entry: Entry,
}

#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("object is not JSON with metadata.name: {0}")]
    Metadata(#[source] serde_json::Error),
}

impl ParsedObject {
    /// Reads name, namespace, labels, resourceVersion and uid from the object's JSON text,
    /// keeping the text as is.
    pub fn from_json(json: Arc<str>) -> Result<Self, ParseError> {
        #[derive(Deserialize)]
        struct Head<'a> {
            #[serde(borrow)]
            metadata: Meta<'a>,
        }
        #[derive(Deserialize)]
        struct Meta<'a> {
            #[serde(borrow)]
            name: Cow<'a, str>,
            #[serde(borrow, default)]
            namespace: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            labels: Option<&'a RawValue>,
            #[serde(borrow, default, rename = "resourceVersion")]
            resource_version: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            uid: Option<Cow<'a, str>>,
            #[serde(borrow, default, rename = "ownerReferences")]
            owner_references: Vec<OwnerReference<'a>>,
        }
        #[derive(Deserialize)]
        struct OwnerReference<'a> {
            #[serde(borrow)]
            uid: Cow<'a, str>,
            #[serde(default)]
            controller: Option<bool>,
        }
        let meta = serde_json::from_str::<Head>(&json).map_err(ParseError::Metadata)?.metadata;
        let key = ObjectKey::new(meta.namespace.as_deref().filter(|ns| !ns.is_empty()), &meta.name);
        let labels = Labels::of(&json, meta.labels).map_err(ParseError::Metadata)?;
        let version = meta.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0);
        let uid = meta.uid.as_deref().map_or(0, uid_hash);
        let controller = meta.owner_references.iter().find(|r| r.controller == Some(true)).map_or(0, |r| uid_hash(&r.uid));
        drop(meta);
        Ok(ParsedObject { key, entry: Entry { json, labels, version, uid, controller } })
    }
}

/// The objects of one resource (within one namespace scope and label selector), read-only.
pub struct Store {
    resource: Gvk,
    scope: Scope,
    /// The one namespace this store holds, or `None` for all namespaces.
    namespace: Option<String>,
    /// Whole objects (`true`), or only their metadata: a metadata-only watch fills it.
    holds_objects: AtomicBool,
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    objects: HashMap<ObjectKey, Entry>,
    /// The keys of the objects each controller owns, by the hash of its uid: a parent's children
    /// in O(children) (`cache.list-controlled`, a declarative parent's claim). Two `Arc` handles
    /// per controlled object; objects without a controller are not in it.
    controlled: HashMap<u64, Children>,
    /// One shared copy of each namespace name.
    namespaces: HashSet<Arc<str>>,
    /// Objects known to be deleted, by key: their uid and last resourceVersion, and when.
    tombstones: HashMap<ObjectKey, Tombstone>,
    /// The tombstones in the order they were laid, so that the expired ones go from the front
    /// one by one: a delete never scans them all (50 k deletes in a TTL would be O(n²)).
    buried_order: VecDeque<(ObjectKey, Instant)>,
    /// Objects put in from their writer's answer whose watch event has not come yet: a relist
    /// that finds one as cached must still announce it, since nobody has heard of it. Only keys
    /// written since the last event of each, so few.
    unannounced: HashSet<ObjectKey>,
}

/// The keys one controller owns. Most own one object of a kind (a ConfigMap per parent, one
/// Deployment's ReplicaSet), kept inline: a set for one key would cost an allocation of ~160
/// bytes per controlled object.
enum Children {
    One(ObjectKey),
    /// Boxed: a set inline would make every `One` 48 bytes instead of 32.
    #[allow(clippy::box_collection)]
    Many(Box<HashSet<ObjectKey>>),
}

impl Children {
    fn insert(&mut self, key: ObjectKey) {
        match self {
            Children::One(only) if *only == key => {}
            Children::One(only) => *self = Children::Many(Box::new(HashSet::from([only.clone(), key]))),
            Children::Many(keys) => _ = keys.insert(key),
        }
    }

    /// Removes `key`; whether none are left.
    fn remove(&mut self, key: &ObjectKey) -> bool {
        match self {
            Children::One(only) => only == key,
            Children::Many(keys) => {
                keys.remove(key);
                keys.is_empty()
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = &ObjectKey> {
        let (one, many) = match self {
            Children::One(only) => (Some(only), None),
            Children::Many(keys) => (None, Some(keys.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

#[derive(Debug, Clone, Copy)]
struct Tombstone {
    uid: u64,
    version: u64,
    at: Instant,
}

/// Tombstones are kept this long (answers in flight arrive within a request timeout)...
const TOMBSTONE_TTL: Duration = Duration::from_secs(300);
/// ...and at most this many: past it the oldest go first, young or not (a churn of deletes must
/// not grow the cache without bound; an answer older than 64 k deletes is very late indeed).
const TOMBSTONES_MAX: usize = 65_536;

impl Tombstone {
    /// Whether `entry` is the deleted object (or an older state of it).
    fn buries(&self, entry: &Entry) -> bool {
        if self.uid != 0 && entry.uid != 0 {
            return self.uid == entry.uid;
        }
        entry.version != 0 && entry.version <= self.version
    }
}

impl Inner {
    /// Caches `entry` under `key` (interned), keeping the controller index; returns the entry it
    /// replaced.
    fn put(&mut self, key: ObjectKey, entry: Entry) -> Option<Entry> {
        let key = self.intern(key);
        if entry.controller != 0 {
            match self.controlled.entry(entry.controller) {
                hash_map::Entry::Occupied(mut children) => children.get_mut().insert(key.clone()),
                hash_map::Entry::Vacant(slot) => _ = slot.insert(Children::One(key.clone())),
            }
        }
        let controller = entry.controller;
        let old = self.objects.insert(key.clone(), entry);
        if let Some(old) = &old
            && old.controller != controller
        {
            self.unindex(&key, old.controller);
        }
        old
    }

    /// Takes `key` out of the cache and the controller index. Whatever took it out tells the
    /// subscribers (the watch's delete, a relist's end) or was their doing (a writer's delete), so
    /// its write is no longer unannounced.
    fn take(&mut self, key: &ObjectKey) -> Option<Entry> {
        self.unannounced.remove(key);
        let entry = self.objects.remove(key)?;
        self.unindex(key, entry.controller);
        Some(entry)
    }

    fn unindex(&mut self, key: &ObjectKey, controller: u64) {
        if let Some(children) = self.controlled.get_mut(&controller)
            && children.remove(key)
        {
            self.controlled.remove(&controller);
        }
    }

    fn intern(&mut self, key: ObjectKey) -> ObjectKey {
        let Some(ns) = key.namespace_arc() else { return key };
        let shared = match self.namespaces.get(ns) {
            Some(shared) => shared.clone(),
            None => {
                self.namespaces.insert(ns.clone());
                ns.clone()
            }
        };
        ObjectKey::from_parts(Some(shared), Arc::from(key.name()))
    }

    fn bury(&mut self, key: &ObjectKey, uid: u64, version: u64) {
        let now = Instant::now();
        while let Some((oldest, at)) = self.buried_order.front() {
            if now.duration_since(*at) < TOMBSTONE_TTL && self.buried_order.len() < TOMBSTONES_MAX {
                break;
            }
            // Only if it is still that tombstone: a key buried again later has a newer one.
            if self.tombstones.get(oldest).is_some_and(|t| t.at == *at) {
                self.tombstones.remove(oldest);
            }
            self.buried_order.pop_front();
        }
        self.tombstones.insert(key.clone(), Tombstone { uid, version, at: now });
        self.buried_order.push_back((key.clone(), now));
    }

    /// Caches `object` unless it was deleted or the cache holds a newer state of it.
    fn newer(&mut self, object: ParsedObject) -> Inserted {
        if self.buried(&object) {
            return Inserted::Buried;
        }
        if let Some(cached) = self.objects.get(&object.key)
            && object.entry.version != 0
            && cached.version > object.entry.version
        {
            return Inserted::Stale(cached.clone());
        }
        let old = self.put(object.key, object.entry.clone());
        Inserted::Cached { now: object.entry, old }
    }

    /// Whether `object` was deleted already; a newer object under the key clears the tombstone.
    fn buried(&mut self, object: &ParsedObject) -> bool {
        match self.tombstones.get(&object.key) {
            Some(tombstone) if tombstone.buries(&object.entry) => true,
            Some(_) => {
                self.tombstones.remove(&object.key);
                false
            }
            None => false,
        }
    }
}

impl Store {
    /// Whether this store holds objects of `namespace` (`None`: of every namespace).
    pub fn covers(&self, namespace: Option<&str>) -> bool {
        self.namespace.is_none() || self.namespace.as_deref() == namespace
    }

    pub fn resource(&self) -> &Gvk {
        &self.resource
    }

    pub fn scope(&self) -> Scope {
        self.scope
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<str>> {
        self.inner.read().objects.get(key).map(|e| e.json.clone())
    }

    pub fn entry(&self, key: &ObjectKey) -> Option<Entry> {
        self.inner.read().objects.get(key).cloned()
    }

    /// Objects in `namespace` (all when `None`) matching `selector`, sorted by key.
    pub fn list(&self, namespace: Option<&str>, selector: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)> {
        self.list_bounded(namespace, selector, usize::MAX).unwrap_or_default()
    }

    /// Like [`Store::list`], but gives up once the objects' text passes `max_bytes`, returning
    /// `Err` with the bytes the whole answer would have had (counted, not copied).
    pub fn list_bounded(&self, namespace: Option<&str>, selector: Option<&LabelSelector>, max_bytes: usize) -> Result<Vec<(ObjectKey, Arc<str>)>, usize> {
        self.list_where(namespace, |entry| selector.is_none_or(|s| entry.matches(s)), max_bytes)
    }

    /// Like [`Store::list_bounded`], with any filter on the entries.
    pub fn list_where(&self, namespace: Option<&str>, filter: impl Fn(&Entry) -> bool, max_bytes: usize) -> Result<Vec<(ObjectKey, Arc<str>)>, usize> {
        let inner = self.inner.read();
        let filter = &filter;
        let matching =
            || inner.objects.iter().filter(move |(key, _)| namespace.is_none() || key.namespace() == namespace).filter(move |(_, entry)| filter(entry));
        let mut found = Vec::new();
        let mut bytes = 0usize;
        for (key, entry) in matching() {
            bytes = bytes.saturating_add(entry.json.len());
            if bytes > max_bytes {
                let total = matching().map(|(_, e)| e.json.len()).sum();
                return Err(total);
            }
            found.push((key.clone(), entry.json.clone()));
        }
        drop(inner);
        found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(found)
    }

    /// Handles to the objects in `namespace` (all when `None`) whose controller is `owner` and
    /// that `filter` admits, unsorted: from the controller index, never a scan.
    pub fn controlled_where(&self, namespace: Option<&str>, owner: Owner, filter: impl Fn(&Entry) -> bool) -> Vec<(ObjectKey, Entry)> {
        let inner = self.inner.read();
        let Some(children) = inner.controlled.get(&owner.0) else { return Vec::new() };
        children
            .iter()
            .filter(|key| namespace.is_none() || key.namespace() == namespace)
            .filter_map(|key| inner.objects.get(key).filter(|entry| entry.controller == owner.0 && filter(entry)).map(|entry| (key.clone(), entry.clone())))
            .collect()
    }

    /// A snapshot of the objects in `namespace` (all when `None`) that `filter` admits, unsorted.
    pub fn entries_where(&self, namespace: Option<&str>, filter: impl Fn(&Entry) -> bool) -> Vec<(ObjectKey, Entry)> {
        let inner = self.inner.read();
        inner
            .objects
            .iter()
            .filter(|(key, entry)| (namespace.is_none() || key.namespace() == namespace) && filter(entry))
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect()
    }

    /// A snapshot of every object.
    pub fn entries(&self) -> Vec<(ObjectKey, Entry)> {
        self.inner.read().objects.iter().map(|(k, e)| (k.clone(), e.clone())).collect()
    }

    pub fn keys(&self) -> Vec<ObjectKey> {
        self.inner.read().objects.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.inner.read().objects.len()
    }

    /// Whether its entries may be whole objects; `false`: each is metadata alone.
    pub fn holds_objects(&self) -> bool {
        self.holds_objects.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes held: entries, keys and the table itself.
    pub fn heap_bytes(&self) -> usize {
        let inner = self.inner.read();
        let table = inner.objects.capacity() * (std::mem::size_of::<ObjectKey>() + std::mem::size_of::<Entry>() + 1);
        let entries: usize = inner.objects.iter().map(|(k, e)| e.heap_bytes() + 16 + k.name().len()).sum();
        let namespaces: usize = inner.namespaces.iter().map(|ns| 16 + ns.len() + std::mem::size_of::<Arc<str>>()).sum();
        table + entries + namespaces
    }
}

/// The one handle that changes a [`Store`]: kept by its informer (or a test fixture).
pub struct Writer {
    store: Arc<Store>,
}

/// What [`Writer::insert_newer`] (or [`Writer::written`], [`Writer::relisted`]) did.
pub enum Inserted {
    /// The object is cached now; `old` is the state it replaced.
    Cached { now: Entry, old: Option<Entry> },
    /// The cache already holds a newer state, which stays.
    Stale(Entry),
    /// The object was deleted already.
    Buried,
    /// A list found it as the cache held it, and its subscribers have heard of that state: no
    /// news.
    Unchanged,
}

impl Writer {
    /// An empty store of `resource`, holding objects of `namespace` (`None`: all namespaces).
    pub fn new(resource: Gvk, scope: Scope, namespace: Option<String>) -> Self {
        Writer { store: Arc::new(Store { resource, scope, namespace, holds_objects: AtomicBool::new(true), inner: RwLock::default() }) }
    }

    /// Says whether what it is being filled with from now on are whole objects. A store that
    /// held metadata and is told objects (a watch of whole objects replacing a metadata-only
    /// one) holds some of each until that watch has listed.
    pub fn set_holds_objects(&self, objects: bool) {
        self.store.holds_objects.store(objects, Ordering::Release);
    }

    /// A read handle.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Adds or replaces an object unconditionally (fixtures).
    pub fn insert(&self, object: ParsedObject) {
        self.store.inner.write().put(object.key, object.entry);
    }

    /// Adds or replaces an object unless the cache already holds a newer version of it or the
    /// object was deleted.
    ///
    /// The cache can be ahead of its watch because a plugin's own writes are put in as soon as
    /// the API server answers (so its next reconcile reads what it wrote); the watch then still
    /// delivers the older events in flight, which must not roll the object back. Kubernetes calls
    /// resourceVersions opaque, but etcd's are increasing integers; when one is not numeric
    /// (version 0) the newest arrival wins, as in a plain reflector.
    pub fn insert_newer(&self, object: ParsedObject) -> Inserted {
        let mut inner = self.store.inner.write();
        // The watch's event: whatever comes of it, its subscribers hear of it.
        inner.unannounced.remove(&object.key);
        inner.newer(object)
    }

    /// Like [`Writer::insert_newer`], for an object its writer just wrote (the API server's
    /// answer): cached now, announced when its watch event comes (or a relist finds it).
    pub fn written(&self, object: ParsedObject) -> Inserted {
        let mut inner = self.store.inner.write();
        let key = object.key.clone();
        let inserted = inner.newer(object);
        if matches!(inserted, Inserted::Cached { .. }) {
            inner.unannounced.insert(key);
        }
        inserted
    }

    /// Removes an object the watch saw deleted (`last` is its final state) and returns the
    /// entry the cache held.
    pub fn remove(&self, key: &ObjectKey, last: &Entry) -> Option<Entry> {
        let mut inner = self.store.inner.write();
        let cached = inner.take(key);
        let uid = if last.uid != 0 { last.uid } else { cached.as_ref().map_or(0, |c| c.uid) };
        let version = last.version.max(cached.as_ref().map_or(0, |c| c.version));
        inner.bury(key, uid, version);
        cached
    }

    /// Removes an object that left a watch the API server filters by label (it may come back,
    /// with the same uid and a newer version): buried by version only, so that an older state
    /// cannot return but a newer one can.
    pub fn left(&self, key: &ObjectKey, last: &Entry) -> Option<Entry> {
        let mut inner = self.store.inner.write();
        let cached = inner.take(key);
        let version = last.version.max(cached.as_ref().map_or(0, |c| c.version));
        inner.bury(key, 0, version);
        cached
    }

    /// Removes an object its writer just deleted (the watch has not said so yet).
    pub fn forget(&self, key: &ObjectKey) -> Option<Entry> {
        let mut inner = self.store.inner.write();
        let cached = inner.take(key)?;
        inner.bury(key, cached.uid, cached.version);
        Some(cached)
    }

    /// Puts in one object of a full list, whatever the cache held (a list is the truth), and
    /// returns the state it replaced. An object known to be deleted is left out: a list served
    /// from a lagging cache may still hold it. A relist goes through here object by object, as
    /// the list's pages arrive, so that it never holds the old cache and the whole new list at
    /// once (twice the memory after an API server restart, audit M10).
    ///
    /// An object found as the cache holds it (same uid and resourceVersion, its subscribers told)
    /// is no news: `Unchanged`, so a relist after a broken watch announces only what changed
    /// meanwhile. Announcing every object again (as client-go's and kube-rs's reflectors do)
    /// had every plugin reconcile the whole cache after each API server restart: 100 k writes
    /// for the API server to answer while it served the list, and live changes waiting behind
    /// the list.
    pub fn relisted(&self, object: ParsedObject) -> Inserted {
        let mut inner = self.store.inner.write();
        if inner.buried(&object) {
            return Inserted::Buried;
        }
        let announced = !inner.unannounced.remove(&object.key);
        let same = |old: &Entry| old.version != 0 && old.version == object.entry.version && old.uid == object.entry.uid;
        match inner.put(object.key, object.entry.clone()) {
            Some(old) if announced && same(&old) => Inserted::Unchanged,
            old => Inserted::Cached { now: object.entry, old },
        }
    }

    /// Ends a full list: removes what it did not hold and returns those entries.
    pub fn relist_done(&self, listed: &HashSet<ObjectKey>) -> Vec<(ObjectKey, Entry)> {
        let mut inner = self.store.inner.write();
        let gone: Vec<ObjectKey> = inner.objects.keys().filter(|key| !listed.contains(*key)).cloned().collect();
        gone.into_iter().filter_map(|key| inner.take(&key).map(|entry| (key, entry))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(ns: &str, name: &str, labels: &str) -> ParsedObject {
        let json = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}","labels":{{{labels}}}}}}}"#);
        ParsedObject::from_json(json.into()).unwrap()
    }

    #[test]
    fn metadata_keeps_the_type_and_metadata_only() {
        let whole = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"y"}},"data":{"big":"value"}}"#;
        assert_eq!(&*metadata_of(whole), r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"y"}}}"#);
        let listed = r#"{"metadata":{"name":"a","managedFields":[{"manager":"m"}]},"spec":{}}"#;
        assert_eq!(&*metadata_of(listed), r#"{"metadata":{"name":"a"}}"#, "managedFields go, even from an object no cache trimmed");
        assert_eq!(&*metadata_of("[1]"), "{}");
    }

    #[test]
    fn parses_key_and_labels_without_touching_the_text() {
        let o = object("ns", "a", r#""app":"web","tier":"fe""#);
        assert_eq!(o.key.to_string(), "ns/a");
        assert_eq!(o.entry.label("app"), Some("web"));
        assert_eq!(o.entry.label("tier"), Some("fe"));
        assert_eq!(o.entry.label("missing"), None);
        assert!(o.entry.json().contains(r#""kind":"ConfigMap""#));
        let cluster = ParsedObject::from_json(r#"{"metadata":{"name":"node-1"}}"#.into()).unwrap();
        assert_eq!(cluster.key.namespace(), None);
        assert!(ParsedObject::from_json(r#"{"metadata":{}}"#.into()).is_err());
    }

    #[test]
    fn labels_are_read_in_the_text_and_unescaped_into_a_copy_only_when_escaped() {
        let labels = |metadata: &str| ParsedObject::from_json(format!(r#"{{"metadata":{{"name":"a",{metadata}}}}}"#).into()).map(|o| o.entry);
        let spaced = labels(r#""labels" : { "app.kubernetes.io/name" : "web" , "tier":"" }"#).unwrap();
        assert_eq!((spaced.label("app.kubernetes.io/name"), spaced.label("tier"), spaced.label("web")), (Some("web"), Some(""), None));
        assert!(matches!(spaced.labels, Labels::InText { .. }), "no copy of labels an API server sends");
        assert_eq!(spaced.heap_bytes(), 16 + spaced.json().len());
        let escaped = labels(r#""labels":{"a\"b":"c\\d","e":"\u0066"}"#).unwrap();
        assert_eq!((escaped.label("a\"b"), escaped.label("e")), (Some("c\\d"), Some("f")));
        assert!(matches!(escaped.labels, Labels::Packed(_)));
        assert_eq!(labels(r#""labels":null"#).unwrap().label("null"), None);
        assert!(labels(r#""labels":{"a":1}"#).is_err(), "a label that is not a string is refused as before");
        assert!(labels(r#""labels":["a","b"]"#).is_err());
    }

    #[test]
    fn lists_by_namespace_and_selector_sorted() {
        let writer = Writer::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        writer.insert(object("b", "x", r#""app":"web""#));
        writer.insert(object("a", "y", r#""app":"db""#));
        writer.insert(object("a", "x", r#""app":"web""#));
        let store = writer.store();
        let web: LabelSelector = "app=web".parse().unwrap();
        let keys = |v: Vec<(ObjectKey, Arc<str>)>| v.into_iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>();
        assert_eq!(keys(store.list(None, None)), ["a/x", "a/y", "b/x"]);
        assert_eq!(keys(store.list(Some("a"), None)), ["a/x", "a/y"]);
        assert_eq!(keys(store.list(None, Some(&web))), ["a/x", "b/x"]);
    }

    /// A relist, object by object, then what it did not hold goes.
    fn relist(writer: &Writer, objects: Vec<ParsedObject>) -> Vec<(ObjectKey, Entry)> {
        let listed: HashSet<ObjectKey> = objects.iter().map(|o| o.key.clone()).collect();
        for object in objects {
            writer.relisted(object);
        }
        writer.relist_done(&listed)
    }

    #[test]
    fn a_relist_reports_what_disappeared() {
        let writer = Writer::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        writer.insert(object("a", "gone", ""));
        writer.insert(object("a", "kept", ""));
        let removed = relist(&writer, vec![object("a", "kept", ""), object("a", "new", "")]);
        assert_eq!(removed.into_iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>(), ["a/gone"]);
        assert_eq!(writer.store().len(), 2);
        assert!(writer.store().get(&ObjectKey::new(Some("a"), "new")).is_some());
    }

    /// A relist announces what changed while the watch was away, what is new, and what a writer
    /// put in whose watch event never came; not what the cache held as listed.
    #[test]
    fn a_relist_announces_only_news() {
        let writer = Writer::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        let named = |name: &str, version: &str, uid: &str| {
            let json = format!(r#"{{"metadata":{{"name":"{name}","namespace":"n","resourceVersion":"{version}","uid":"{uid}"}}}}"#);
            ParsedObject::from_json(json.into()).unwrap()
        };
        for object in
            [named("same", "5", "u1"), named("changed", "5", "u2"), named("recreated", "5", "u3"), named("opaque", "x", "u4"), named("heard", "5", "u5")]
        {
            drop(writer.insert_newer(object));
        }
        drop(writer.written(named("written", "9", "u6")));
        drop(writer.written(named("heard", "9", "u5")));
        drop(writer.insert_newer(named("heard", "9", "u5")));
        let relisted = |object: ParsedObject| cached(writer.relisted(object)).split(' ').next().unwrap().to_string();
        assert_eq!(relisted(named("same", "5", "u1")), "unchanged");
        assert_eq!(relisted(named("changed", "7", "u2")), "cached");
        assert_eq!(relisted(named("recreated", "5", "u9")), "cached", "another object under the name");
        assert_eq!(relisted(named("opaque", "x", "u4")), "cached", "a version that is not a number says nothing");
        assert_eq!(relisted(named("new", "8", "u7")), "cached");
        assert_eq!(relisted(named("written", "9", "u6")), "cached", "its writer's answer was cached, its watch event never came");
        assert_eq!(relisted(named("written", "9", "u6")), "unchanged", "announced once");
        assert_eq!(relisted(named("heard", "9", "u5")), "unchanged", "its watch event came after the answer");
        // Written, then gone while the watch was away: reported gone, and its mark goes with it.
        drop(writer.written(named("vanished", "10", "u8")));
        let gone = writer.relist_done(&["same", "changed", "recreated", "opaque", "new", "written", "heard"].map(|n| ObjectKey::new(Some("n"), n)).into());
        assert_eq!(gone.iter().map(|(key, _)| key.name()).collect::<Vec<_>>(), ["vanished"]);
        assert!(writer.store.inner.read().unannounced.is_empty());
    }

    fn at(version: &str, uid: &str, data: &str) -> ParsedObject {
        let json = format!(r#"{{"metadata":{{"name":"a","namespace":"n","resourceVersion":"{version}","uid":"{uid}"}},"data":{{"v":"{data}"}}}}"#);
        ParsedObject::from_json(json.into()).unwrap()
    }

    fn cached(inserted: Inserted) -> String {
        match inserted {
            Inserted::Cached { now, .. } => format!("cached {}", now.json()),
            Inserted::Stale(kept) => format!("stale, kept {}", kept.json()),
            Inserted::Buried => "buried".into(),
            Inserted::Unchanged => "unchanged".into(),
        }
    }

    #[test]
    fn insert_newer_keeps_a_newer_version_and_takes_non_numeric_ones() {
        let writer = Writer::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        let data = |writer: &Writer| writer.store().get(&ObjectKey::new(Some("n"), "a")).unwrap().contains("written");
        assert!(cached(writer.insert_newer(at("10", "u1", "written"))).starts_with("cached"));
        // An older event still in flight on the watch does not roll the write back...
        assert!(cached(writer.insert_newer(at("9", "u1", "older"))).contains("stale, kept"));
        assert!(data(&writer));
        // ...the same or a newer version replaces it, and so does a version that is not a number.
        let Inserted::Cached { old: Some(old), .. } = writer.insert_newer(at("10", "u1", "echo")) else { panic!("replaced") };
        assert!(old.json().contains("written"), "the replaced state is handed back");
        writer.insert_newer(at("11", "u1", "written"));
        assert!(data(&writer));
        assert!(cached(writer.insert_newer(at("opaque", "u1", "other"))).contains("other"));
    }

    #[test]
    fn a_deleted_object_is_not_brought_back_by_late_answers_or_lagging_lists() {
        let key = ObjectKey::new(Some("n"), "a");
        let writer = Writer::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        writer.insert_newer(at("10", "u1", "v"));
        // The watch saw the delete; then the answer to a write made before it arrives.
        let last = at("12", "u1", "v").entry;
        assert!(writer.remove(&key, &last).is_some());
        assert!(matches!(writer.insert_newer(at("11", "u1", "late")), Inserted::Buried));
        assert!(writer.store().get(&key).is_none());
        // A list served from a lagging cache still has it: left out.
        relist(&writer, vec![at("10", "u1", "v")]);
        assert!(writer.store().get(&key).is_none());
        // An object re-created under the same name is a new object.
        assert!(cached(writer.insert_newer(at("20", "u2", "new"))).starts_with("cached"));
        assert!(writer.store().get(&key).unwrap().contains("new"));

        // The plugin deleted it itself: gone at once, and the watch's last modification of
        // the old object (in flight) does not bring it back.
        assert!(writer.forget(&key).is_some());
        assert!(writer.store().get(&key).is_none());
        assert!(matches!(writer.insert_newer(at("21", "u2", "in flight")), Inserted::Buried));
    }

    #[test]
    fn bounded_lists_stop_without_building_the_answer() {
        let writer = Writer::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        for i in 0..10 {
            writer.insert(object("a", &format!("o{i}"), ""));
        }
        let one = writer.store().get(&ObjectKey::new(Some("a"), "o0")).unwrap().len();
        assert_eq!(writer.store().list_bounded(None, None, one * 10).unwrap().len(), 10);
        assert_eq!(writer.store().list_bounded(None, None, one * 10 - 1).unwrap_err(), one * 10);
    }

    #[test]
    fn tombstones_expire_from_the_oldest_and_are_bounded() {
        let writer = Writer::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        let last = at("1", "u", "v").entry;
        for i in 0..(TOMBSTONES_MAX + 10) {
            writer.remove(&ObjectKey::new(Some("n"), &format!("o{i}")), &last);
        }
        let inner = writer.store.inner.read();
        assert_eq!(inner.tombstones.len(), TOMBSTONES_MAX);
        assert!(!inner.tombstones.contains_key(&ObjectKey::new(Some("n"), "o0")), "the oldest went first");
        assert!(inner.tombstones.contains_key(&ObjectKey::new(Some("n"), &format!("o{}", TOMBSTONES_MAX + 9))));
        drop(inner);
        // A key buried twice keeps its newer tombstone when the older one expires.
        let key = ObjectKey::new(Some("n"), "again");
        writer.remove(&key, &last);
        writer.remove(&key, &last);
        for i in 0..TOMBSTONES_MAX {
            writer.remove(&ObjectKey::new(Some("m"), &format!("p{i}")), &last);
            if writer.store.inner.read().buried_order.front().is_some_and(|(k, _)| *k == key) {
                break;
            }
        }
        writer.remove(&ObjectKey::new(Some("m"), "one-more"), &last);
        assert!(writer.store.inner.read().tombstones.contains_key(&key), "its second tombstone stays");
    }

    #[test]
    fn namespaces_are_shared_between_keys() {
        let writer = Writer::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        writer.insert(object("team", "a", ""));
        writer.insert(object("team", "b", ""));
        let keys = writer.store().keys();
        assert!(Arc::ptr_eq(keys[0].namespace_arc().unwrap(), keys[1].namespace_arc().unwrap()));
    }

    #[test]
    fn the_controller_index_follows_inserts_changes_of_controller_and_removals() {
        let child = |name: &str, owner: Option<&str>| {
            let refs = owner
                .map(|uid| format!(r#","ownerReferences":[{{"uid":"{uid}","controller":true}},{{"uid":"other","controller":false}}]"#))
                .unwrap_or_default();
            ParsedObject::from_json(format!(r#"{{"metadata":{{"name":"{name}","namespace":"ns"{refs}}}}}"#).into()).unwrap()
        };
        let names = |store: &Store, owner: &str| {
            let mut found: Vec<String> = store.controlled_where(None, Owner::new(owner), |_| true).into_iter().map(|(k, _)| k.name().to_string()).collect();
            found.sort();
            found
        };
        let writer = Writer::new(Gvk::new("", "v1", "Secret"), Scope::Namespaced, None);
        writer.insert(child("a-1", Some("a")));
        writer.insert(child("a-2", Some("a")));
        writer.insert(child("b-1", Some("b")));
        writer.insert(child("none", None));
        let store = writer.store();
        assert_eq!(names(store, "a"), ["a-1", "a-2"]);
        assert!(names(store, "other").is_empty(), "a reference that is not the controller's does not count");
        writer.insert(child("a-2", Some("b")));
        assert_eq!((names(store, "a"), names(store, "b")), (vec!["a-1".to_string()], vec!["a-2".to_string(), "b-1".to_string()]));
        writer.forget(&ObjectKey::new(Some("ns"), "b-1"));
        let listed: HashSet<ObjectKey> = [ObjectKey::new(Some("ns"), "a-1")].into();
        writer.relist_done(&listed);
        assert_eq!(names(store, "a"), ["a-1"]);
        assert!(names(store, "b").is_empty());
        assert!(store.inner.read().controlled.len() == 1, "no empty sets are kept");
        assert!(store.controlled_where(Some("elsewhere"), Owner::new("a"), |_| true).is_empty());
    }
}
