//! Turns informer events into keys of primary objects, as the manifest says: an event on a
//! primary enqueues its own key; on an owned object, its controlling owner's; on a watched
//! object, what the watch's mapping gives. An update enqueues the targets of both the old and
//! the new state (an owner reference or a label that moved reaches both primaries, as in
//! controller-runtime). A primary that stops matching the primary selector is handed to the
//! plugin once more, as released.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use serde::Deserialize;

use crate::informer::{Entry, Event, Subscriber};
use crate::queue::{Reason, WorkQueue};
use crate::resource::{Gvk, ObjectKey};
use crate::selector::LabelSelector;

/// How an event becomes keys.
#[derive(Debug, Clone)]
pub enum KeyMapping {
    /// The object is a primary: its own key. With a selector, an object that stops matching it
    /// is released (when the plugin takes releases).
    Primary { selector: Option<LabelSelector>, releases: bool },
    /// Its owners of the primary kind; only the controlling one when `controller_only`.
    Owners { controller_only: bool },
    /// The primary named by this label, in the object's namespace.
    Label(String),
    /// Ask the plugin (`map-related`), off the informer's task.
    MapRelated,
    /// Cached for reads only: no keys.
    None,
}

/// Primaries that stopped matching the selector, with their last state, until the plugin has
/// been told (or they match again).
pub type Released = Arc<Mutex<HashMap<ObjectKey, Arc<str>>>>;

/// Watched objects waiting for `map-related`, deduplicated: per object, its current state and
/// the oldest state not mapped yet (so an object that moved from one primary to another reaches
/// both). Bounded: past `max` objects, a new one is not kept but counted, and the backlog is
/// marked overflowed: its owner then reconciles every primary instead (level-triggered, so no
/// change is lost; [`MapBacklog::take_overflow`]). Entries leave once mapped; a fault leaves them
/// for a retry with backoff.
pub struct MapBacklog {
    pub queue: WorkQueue<MapKey>,
    objects: Mutex<HashMap<MapKey, Arc<str>>>,
    max: usize,
    dropped: Counter,
    overflowed: AtomicBool,
}

/// One state of one watched object: (resource, key, whether it is a state it left).
pub type MapKey = (Gvk, ObjectKey, bool);

impl MapBacklog {
    pub fn new(queue: WorkQueue<MapKey>, max: usize, dropped: Counter) -> Self {
        MapBacklog { queue, objects: Mutex::default(), max, dropped, overflowed: AtomicBool::new(false) }
    }

    fn push(&self, resource: &Gvk, key: &ObjectKey, object: &Arc<str>, previous: bool) {
        let slot = (resource.clone(), key.clone(), previous);
        {
            let mut objects = self.objects.lock();
            let full = objects.len() >= self.max;
            match objects.get_mut(&slot) {
                // The oldest unmapped previous state is the one to map; the newest current one.
                Some(_) if previous => return,
                Some(state) => *state = object.clone(),
                None if full => {
                    self.dropped.inc();
                    self.overflowed.store(true, Ordering::Release);
                    return;
                }
                None => {
                    objects.insert(slot.clone(), object.clone());
                }
            }
        }
        self.queue.add(slot);
    }

    /// Whether objects were left out since the last time it was asked (and so every primary
    /// must be reconciled).
    pub fn take_overflow(&self) -> bool {
        self.overflowed.swap(false, Ordering::AcqRel)
    }

    /// The state to map for `slot`, if it still waits.
    pub fn get(&self, slot: &MapKey) -> Option<Arc<str>> {
        self.objects.lock().get(slot).cloned()
    }

    /// Done with `slot` at `state`; a newer state that arrived meanwhile stays for its turn.
    pub fn mapped(&self, slot: &MapKey, state: &Arc<str>) {
        let mut objects = self.objects.lock();
        if objects.get(slot).is_some_and(|s| Arc::ptr_eq(s, state)) {
            objects.remove(slot);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.objects.lock().len()
    }
}

pub struct Trigger {
    pub queue: WorkQueue<ObjectKey>,
    pub primary: Gvk,
    /// Whether primary keys carry a namespace.
    pub primary_namespaced: bool,
    pub resource: Gvk,
    pub mapping: KeyMapping,
    pub mapper: Arc<MapBacklog>,
    pub released: Released,
}

impl Subscriber for Trigger {
    fn on_event(&self, event: Event<'_>) {
        let (key, object, old, listed) = match event {
            Event::Applied { key, object, old, listed } => (key, object, old, listed),
            Event::Deleted { key, object } => (key, object, None, false),
        };
        // What a list says waits behind what the watch saw change (the queue's background lane).
        let reason = |live: Reason| if listed { Reason::Listed } else { live };
        match &self.mapping {
            KeyMapping::Primary { selector, releases } => {
                let matches = |entry: &Entry| selector.as_ref().is_none_or(|s| s.matches(|k| entry.label(k)));
                // Gone from a filtered watch without matching any more, or changed so that it no
                // longer matches: released rather than deleted.
                if *releases && !matches(object) {
                    self.released.lock().insert(key.clone(), object.json().clone());
                    self.queue.add_for(key.clone(), Reason::Released);
                } else {
                    self.queue.add_for(key.clone(), reason(Reason::Changed));
                }
            }
            KeyMapping::Owners { controller_only } => {
                let mut targets = owners(object, &self.primary, *controller_only);
                if let Some(old) = old {
                    targets.extend(owners(old, &self.primary, *controller_only));
                }
                targets.sort();
                targets.dedup();
                for owner in targets {
                    self.queue.add_for(self.primary_key(key, &owner), reason(Reason::Owned));
                }
            }
            KeyMapping::Label(label) => {
                let mut targets: Vec<&str> = object.label(label).into_iter().collect();
                targets.extend(old.and_then(|old| old.label(label)));
                targets.dedup();
                for name in targets {
                    self.queue.add_for(self.primary_key(key, name), reason(Reason::Mapped));
                }
            }
            KeyMapping::MapRelated => {
                if let Some(old) = old {
                    self.mapper.push(&self.resource, key, old.json(), true);
                }
                self.mapper.push(&self.resource, key, object.json(), false);
            }
            KeyMapping::None => {}
        }
    }
}

impl Trigger {
    /// The key of primary `name` related to the object at `key`: same namespace, or none for a
    /// cluster-scoped primary.
    fn primary_key(&self, key: &ObjectKey, name: &str) -> ObjectKey {
        let namespace = if self.primary_namespaced { key.namespace() } else { None };
        ObjectKey::new(namespace, name)
    }
}

/// Names of the owners of kind `primary` in the object's `ownerReferences`.
fn owners(entry: &Entry, primary: &Gvk, controller_only: bool) -> Vec<String> {
    // The cache knows already whether it has a controller: no parse for the many that don't.
    if controller_only && entry.is_orphan() {
        return Vec::new();
    }
    #[derive(Deserialize)]
    struct Object {
        metadata: Meta,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        #[serde(default)]
        owner_references: Vec<OwnerRef>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct OwnerRef {
        api_version: String,
        kind: String,
        name: String,
        #[serde(default)]
        controller: bool,
    }
    let Ok(object) = serde_json::from_str::<Object>(entry.json()) else { return Vec::new() };
    object
        .metadata
        .owner_references
        .into_iter()
        .filter(|r| r.kind == primary.kind && Gvk::from_api_version(&r.api_version, &r.kind).group == primary.group)
        .filter(|r| r.controller || !controller_only)
        .map(|r| r.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::ParsedObject;

    fn entry(json: serde_json::Value) -> (ObjectKey, Entry) {
        let parsed = ParsedObject::from_json(json.to_string().into()).unwrap();
        (parsed.key, parsed.entry)
    }

    struct Fixture {
        trigger: Trigger,
        queue: WorkQueue<ObjectKey>,
        mapper: Arc<MapBacklog>,
    }

    fn trigger(mapping: KeyMapping, primary_namespaced: bool) -> Fixture {
        let metrics = crate::metrics::Metrics::new();
        let queue = WorkQueue::new(Default::default(), metrics.workqueue("t")).unwrap();
        let map_queue = WorkQueue::new(Default::default(), metrics.workqueue("t-map")).unwrap();
        let mapper = Arc::new(MapBacklog::new(map_queue, 2, metrics.mapped_dropped("t")));
        let trigger = Trigger {
            queue: queue.clone(),
            primary: Gvk::new("example.com", "v1", "Foo"),
            primary_namespaced,
            resource: Gvk::new("apps", "v1", "Deployment"),
            mapping,
            mapper: mapper.clone(),
            released: Released::default(),
        };
        Fixture { trigger, queue, mapper }
    }

    fn child(owner_refs: serde_json::Value, labels: serde_json::Value) -> (ObjectKey, Entry) {
        entry(serde_json::json!({"metadata": {"name": "child", "namespace": "ns", "ownerReferences": owner_refs, "labels": labels}}))
    }

    async fn queued(queue: &WorkQueue<ObjectKey>) -> Vec<String> {
        let mut keys = Vec::new();
        while !queue.is_empty() {
            let lease = queue.get().await.unwrap();
            keys.push(format!("{}:{}", lease.key(), lease.reasons()));
        }
        keys.sort();
        keys
    }

    fn applied<'a>(key: &'a ObjectKey, object: &'a Entry, old: Option<&'a Entry>) -> Event<'a> {
        Event::Applied { key, object, old, listed: false }
    }

    #[tokio::test]
    async fn owned_objects_enqueue_their_controlling_owner_of_the_primary_kind() {
        let f = trigger(KeyMapping::Owners { controller_only: true }, true);
        let (key, entry) = child(
            serde_json::json!([
                {"apiVersion": "example.com/v1", "kind": "Foo", "name": "mine", "uid": "1", "controller": true},
                {"apiVersion": "example.com/v1", "kind": "Foo", "name": "not-controller", "uid": "2"},
                {"apiVersion": "other.com/v1", "kind": "Foo", "name": "other-group", "uid": "3", "controller": true},
            ]),
            serde_json::json!({}),
        );
        f.trigger.on_event(Event::Deleted { key: &key, object: &entry });
        assert_eq!(queued(&f.queue).await, ["ns/mine:owned"]);
    }

    #[tokio::test]
    async fn what_a_list_says_is_background_work_what_the_watch_saw_is_live() {
        let refs = serde_json::json!([{"apiVersion": "example.com/v1", "kind": "Foo", "name": "a", "uid": "1", "controller": true}]);
        let f = trigger(KeyMapping::Owners { controller_only: true }, true);
        let (key, entry) = child(refs, serde_json::json!({}));
        f.trigger.on_event(Event::Applied { key: &key, object: &entry, old: None, listed: true });
        assert_eq!(queued(&f.queue).await, ["ns/a:listed"]);
        f.trigger.on_event(Event::Applied { key: &key, object: &entry, old: None, listed: true });
        f.trigger.on_event(applied(&key, &entry, None));
        assert_eq!(queued(&f.queue).await, ["ns/a:owned,listed"], "a change while listed moves it to the live lane");
    }

    #[tokio::test]
    async fn watched_objects_map_by_owner_references_or_label() {
        let refs = serde_json::json!([{"apiVersion": "example.com/v1", "kind": "Foo", "name": "a", "uid": "1"}]);
        let by_owner = trigger(KeyMapping::Owners { controller_only: false }, true);
        let (key, entry) = child(refs, serde_json::json!({"foo": "b"}));
        by_owner.trigger.on_event(applied(&key, &entry, None));
        assert_eq!(queued(&by_owner.queue).await, ["ns/a:owned"]);

        let by_label = trigger(KeyMapping::Label("foo".into()), false);
        by_label.trigger.on_event(applied(&key, &entry, None));
        assert_eq!(queued(&by_label.queue).await, ["b:mapped"], "a cluster-scoped primary has no namespace");
    }

    #[tokio::test]
    async fn an_update_reaches_the_targets_of_the_old_and_the_new_state() {
        let (key, before) = child(
            serde_json::json!([{"apiVersion": "example.com/v1", "kind": "Foo", "name": "a", "uid": "1", "controller": true}]),
            serde_json::json!({"foo": "a"}),
        );
        let (_, after) = child(
            serde_json::json!([{"apiVersion": "example.com/v1", "kind": "Foo", "name": "b", "uid": "2", "controller": true}]),
            serde_json::json!({"foo": "b"}),
        );
        let by_label = trigger(KeyMapping::Label("foo".into()), true);
        by_label.trigger.on_event(applied(&key, &after, Some(&before)));
        assert_eq!(queued(&by_label.queue).await, ["ns/a:mapped", "ns/b:mapped"]);
        let by_owner = trigger(KeyMapping::Owners { controller_only: true }, true);
        by_owner.trigger.on_event(applied(&key, &after, Some(&before)));
        assert_eq!(queued(&by_owner.queue).await, ["ns/a:owned", "ns/b:owned"]);
    }

    #[tokio::test]
    async fn map_related_goes_to_a_bounded_backlog_of_states() {
        let f = trigger(KeyMapping::MapRelated, true);
        let (key, before) = child(serde_json::json!([]), serde_json::json!({"v": "1"}));
        let (_, middle) = child(serde_json::json!([]), serde_json::json!({"v": "2"}));
        let (_, after) = child(serde_json::json!([]), serde_json::json!({"v": "3"}));
        f.trigger.on_event(applied(&key, &middle, Some(&before)));
        f.trigger.on_event(applied(&key, &after, Some(&middle)));
        assert!(f.queue.is_empty());
        let resource = Gvk::new("apps", "v1", "Deployment");
        // The oldest state it left, and the newest: one entry each.
        assert_eq!(f.mapper.len(), 2);
        let previous = f.mapper.get(&(resource.clone(), key.clone(), true)).unwrap();
        let current = f.mapper.get(&(resource.clone(), key.clone(), false)).unwrap();
        assert!(previous.contains(r#""v":"1""#) && current.contains(r#""v":"3""#));
        // Full (2 here): another object is dropped and counted, the known ones still update.
        let (other, _) = entry(serde_json::json!({"metadata": {"name": "other", "namespace": "ns"}}));
        assert!(!f.mapper.take_overflow());
        f.trigger.on_event(applied(&other, &after, None));
        assert_eq!(f.mapper.len(), 2);
        assert!(f.mapper.take_overflow(), "a left-out object is never silent: the owner resyncs every primary");
        assert!(!f.mapper.take_overflow(), "once");
        // Mapped at one state while a newer one arrived: the newer one stays.
        f.mapper.mapped(&(resource.clone(), key.clone(), false), &previous);
        assert_eq!(f.mapper.len(), 2);
        f.mapper.mapped(&(resource.clone(), key.clone(), false), &current);
        assert_eq!(f.mapper.len(), 1);
    }

    #[tokio::test]
    async fn a_primary_that_stops_matching_the_selector_is_released() {
        let selector: LabelSelector = "app=web".parse().unwrap();
        let f = trigger(KeyMapping::Primary { selector: Some(selector.clone()), releases: true }, true);
        let (key, web) = entry(serde_json::json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}}}));
        let (_, db) = entry(serde_json::json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "db"}}}));
        f.trigger.on_event(applied(&key, &web, None));
        // A filtered watch reports an object that left it as deleted, in its new state.
        f.trigger.on_event(Event::Deleted { key: &key, object: &db });
        assert_eq!(queued(&f.queue).await, ["ns/p:changed,released"]);
        assert!(f.trigger.released.lock()[&key].contains(r#""db""#));
        // Deleted while matching: a plain delete.
        let g = trigger(KeyMapping::Primary { selector: Some(selector.clone()), releases: true }, true);
        g.trigger.on_event(Event::Deleted { key: &key, object: &web });
        assert_eq!(queued(&g.queue).await, ["ns/p:changed"]);
        assert!(g.trigger.released.lock().is_empty());
        // A plugin built for 0.1.0 takes no releases.
        let h = trigger(KeyMapping::Primary { selector: Some(selector), releases: false }, true);
        h.trigger.on_event(Event::Deleted { key: &key, object: &db });
        assert!(h.trigger.released.lock().is_empty());
    }
}
