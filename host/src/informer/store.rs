//! The cache of one watched resource: objects as JSON text, keyed by namespace/name, with their
//! labels for selectors. Readers get `Arc<str>` handles, so a read never copies or
//! re-serializes and never sees a half-applied update; a guest receives its own copy when the
//! runtime lowers the text into its memory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;
use std::borrow::Cow;

use serde::Deserialize;

use crate::resource::{Gvk, ObjectKey};
use crate::runtime::host::Scope;
use crate::selector::LabelSelector;

/// An object as the cache holds it.
#[derive(Debug, Clone)]
pub struct Entry {
    json: Arc<str>,
    labels: Labels,
    /// `metadata.resourceVersion` as a number; 0 when missing or not numeric.
    version: u64,
}

impl Entry {
    pub fn json(&self) -> &Arc<str> {
        &self.json
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }

    /// Bytes this entry holds on the heap (for the cache-size benchmark).
    pub fn heap_bytes(&self) -> usize {
        // Arc header (two counters) + text, and the labels' text.
        16 + self.json.len() + self.labels.0.len()
    }
}

/// Labels packed into one string, `key\0value\0key\0value`: one allocation per object instead of
/// a map, and a linear scan is fast for the handful of labels objects carry.
#[derive(Debug, Clone, Default)]
struct Labels(Box<str>);

impl Labels {
    fn new<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Self {
        let mut packed = String::new();
        for (k, v) in pairs {
            packed.push_str(k);
            packed.push('\0');
            packed.push_str(v);
            packed.push('\0');
        }
        Labels(packed.into_boxed_str())
    }

    fn get(&self, key: &str) -> Option<&str> {
        let mut parts = self.0.split('\0');
        while let (Some(k), Some(v)) = (parts.next(), parts.next()) {
            if k == key {
                return Some(v);
            }
        }
        None
    }
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
    /// Reads name, namespace and labels from the object's JSON text, keeping the text as is.
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
            labels: Option<BTreeMap<Cow<'a, str>, Cow<'a, str>>>,
            #[serde(borrow, default, rename = "resourceVersion")]
            resource_version: Option<Cow<'a, str>>,
        }
        let meta = serde_json::from_str::<Head>(&json).map_err(ParseError::Metadata)?.metadata;
        let key = ObjectKey::new(meta.namespace.as_deref().filter(|ns| !ns.is_empty()), &meta.name);
        let labels = Labels::new(meta.labels.iter().flatten().map(|(k, v)| (k.as_ref(), v.as_ref())));
        let version = meta.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0);
        drop(meta);
        Ok(ParsedObject { key, entry: Entry { json, labels, version } })
    }
}

/// The objects of one resource (within one namespace scope and label selector).
pub struct Store {
    resource: Gvk,
    scope: Scope,
    /// The one namespace this store holds, or `None` for all namespaces.
    namespace: Option<String>,
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    objects: HashMap<ObjectKey, Entry>,
    /// One shared copy of each namespace name.
    namespaces: HashSet<Arc<str>>,
}

impl Inner {
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
}

impl Store {
    pub fn new(resource: Gvk, scope: Scope, namespace: Option<String>) -> Self {
        Store { resource, scope, namespace, inner: RwLock::default() }
    }

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

    /// Adds or replaces an object; returns the entry it replaced.
    pub fn insert(&self, object: ParsedObject) -> Option<Entry> {
        let mut inner = self.inner.write();
        let key = inner.intern(object.key);
        inner.objects.insert(key, object.entry)
    }

    /// Adds or replaces an object unless the cache already holds a newer version of it, and
    /// returns the entry the cache holds afterwards.
    ///
    /// The cache can be ahead of its watch because a plugin's own writes are put in as soon as
    /// the API server answers (so its next reconcile reads what it wrote); the watch then still
    /// delivers the older events in flight, which must not roll the object back. Kubernetes calls
    /// resourceVersions opaque, but etcd's are increasing integers; when one is not numeric
    /// (version 0) the newest arrival wins, as in a plain reflector.
    pub fn insert_newer(&self, object: ParsedObject) -> Entry {
        let mut inner = self.inner.write();
        if let Some(cached) = inner.objects.get(&object.key)
            && object.entry.version != 0
            && cached.version > object.entry.version
        {
            return cached.clone();
        }
        let key = inner.intern(object.key);
        inner.objects.insert(key, object.entry.clone());
        object.entry
    }

    pub fn remove(&self, key: &ObjectKey) -> Option<Entry> {
        self.inner.write().objects.remove(key)
    }

    /// Replaces the whole content (after a full list) and returns the entries that are gone.
    pub fn replace_all(&self, objects: Vec<ParsedObject>) -> Vec<(ObjectKey, Entry)> {
        let mut fresh = Inner::default();
        for object in objects {
            let key = fresh.intern(object.key);
            fresh.objects.insert(key, object.entry);
        }
        let mut inner = self.inner.write();
        let old = std::mem::replace(&mut *inner, fresh);
        old.objects.into_iter().filter(|(key, _)| !inner.objects.contains_key(key)).collect()
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<str>> {
        self.inner.read().objects.get(key).map(|e| e.json.clone())
    }

    pub fn entry(&self, key: &ObjectKey) -> Option<Entry> {
        self.inner.read().objects.get(key).cloned()
    }

    /// Objects in `namespace` (all when `None`) matching `selector`, sorted by key.
    pub fn list(&self, namespace: Option<&str>, selector: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)> {
        let inner = self.inner.read();
        let mut found: Vec<(ObjectKey, Arc<str>)> = inner
            .objects
            .iter()
            .filter(|(key, _)| namespace.is_none() || key.namespace() == namespace)
            .filter(|(_, entry)| selector.is_none_or(|s| s.matches(|k| entry.labels.get(k))))
            .map(|(key, entry)| (key.clone(), entry.json.clone()))
            .collect();
        drop(inner);
        found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        found
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

#[cfg(test)]
mod tests {
    use super::*;

    fn object(ns: &str, name: &str, labels: &str) -> ParsedObject {
        let json = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}","labels":{{{labels}}}}}}}"#);
        ParsedObject::from_json(json.into()).unwrap()
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
    fn lists_by_namespace_and_selector_sorted() {
        let store = Store::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        store.insert(object("b", "x", r#""app":"web""#));
        store.insert(object("a", "y", r#""app":"db""#));
        store.insert(object("a", "x", r#""app":"web""#));
        let web: LabelSelector = "app=web".parse().unwrap();
        let keys = |v: Vec<(ObjectKey, Arc<str>)>| v.into_iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>();
        assert_eq!(keys(store.list(None, None)), ["a/x", "a/y", "b/x"]);
        assert_eq!(keys(store.list(Some("a"), None)), ["a/x", "a/y"]);
        assert_eq!(keys(store.list(None, Some(&web))), ["a/x", "b/x"]);
    }

    #[test]
    fn replace_all_reports_what_disappeared() {
        let store = Store::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        store.insert(object("a", "gone", ""));
        store.insert(object("a", "kept", ""));
        let removed = store.replace_all(vec![object("a", "kept", ""), object("a", "new", "")]);
        assert_eq!(removed.into_iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>(), ["a/gone"]);
        assert_eq!(store.len(), 2);
        assert!(store.get(&ObjectKey::new(Some("a"), "new")).is_some());
    }

    #[test]
    fn insert_newer_keeps_a_newer_version_and_takes_non_numeric_ones() {
        let store = Store::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        let at = |version: &str, data: &str| {
            let json = format!(r#"{{"metadata":{{"name":"a","namespace":"n","resourceVersion":"{version}"}},"data":{{"v":"{data}"}}}}"#);
            ParsedObject::from_json(json.into()).unwrap()
        };
        let data = |store: &Store| store.get(&ObjectKey::new(Some("n"), "a")).unwrap().contains("written");
        assert!(store.insert_newer(at("10", "written")).json().contains("written"));
        // An older event still in flight on the watch does not roll the write back...
        assert!(store.insert_newer(at("9", "older")).json().contains("written"));
        assert!(data(&store));
        // ...the same or a newer version replaces it, and so does a version that is not a number.
        assert!(store.insert_newer(at("10", "echo")).json().contains("echo"));
        store.insert_newer(at("11", "written"));
        assert!(data(&store));
        assert!(store.insert_newer(at("opaque", "other")).json().contains("other"));
    }

    #[test]
    fn namespaces_are_shared_between_keys() {
        let store = Store::new(Gvk::new("", "v1", "ConfigMap"), Scope::Namespaced, None);
        store.insert(object("team", "a", ""));
        store.insert(object("team", "b", ""));
        let keys = store.keys();
        assert!(Arc::ptr_eq(keys[0].namespace_arc().unwrap(), keys[1].namespace_arc().unwrap()));
    }
}
