//! Turns informer events into keys of primary objects, as the manifest says: an event on a
//! primary enqueues its own key; on an owned object, its controlling owner's; on a watched
//! object, what the watch's mapping gives.

use std::sync::Arc;

use serde::Deserialize;
use tokio::sync::mpsc;

use crate::informer::{Entry, Event, Subscriber};
use crate::queue::WorkQueue;
use crate::resource::{Gvk, ObjectKey};

/// How an event becomes keys.
#[derive(Debug, Clone)]
pub enum Mapping {
    /// The object is a primary: its own key.
    Primary,
    /// Its owners of the primary kind; only the controlling one when `controller_only`.
    Owners { controller_only: bool },
    /// The primary named by this label, in the object's namespace.
    Label(String),
    /// Ask the plugin (`map-related`), off the informer's task.
    MapRelated,
    /// Cached for reads only: no keys.
    None,
}

/// Work for the plugin's mapper task: an object of `resource` to map to primary keys.
pub type MapRequest = (Gvk, Arc<str>);

pub struct Trigger {
    pub queue: WorkQueue<ObjectKey>,
    pub primary: Gvk,
    /// Whether primary keys carry a namespace.
    pub primary_namespaced: bool,
    pub resource: Gvk,
    pub mapping: Mapping,
    pub mapper: mpsc::UnboundedSender<MapRequest>,
}

impl Subscriber for Trigger {
    fn on_event(&self, event: Event<'_>) {
        let (Event::Applied(key, entry) | Event::Deleted(key, entry)) = event;
        match &self.mapping {
            Mapping::Primary => self.queue.add(key.clone()),
            Mapping::Owners { controller_only } => {
                for owner in owners(entry, &self.primary, *controller_only) {
                    self.queue.add(self.primary_key(key, &owner));
                }
            }
            Mapping::Label(label) => {
                if let Some(name) = entry.label(label) {
                    self.queue.add(self.primary_key(key, name));
                }
            }
            Mapping::MapRelated => {
                // The receiver is gone only while the controller shuts down.
                let _ = self.mapper.send((self.resource.clone(), entry.json().clone()));
            }
            Mapping::None => {}
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

    fn trigger(mapping: Mapping, primary_namespaced: bool) -> (Trigger, WorkQueue<ObjectKey>, mpsc::UnboundedReceiver<MapRequest>) {
        let queue = WorkQueue::new(Default::default(), crate::metrics::Metrics::new().workqueue("t")).unwrap();
        let (mapper, rx) = mpsc::unbounded_channel();
        let trigger = Trigger {
            queue: queue.clone(),
            primary: Gvk::new("example.com", "v1", "Foo"),
            primary_namespaced,
            resource: Gvk::new("apps", "v1", "Deployment"),
            mapping,
            mapper,
        };
        (trigger, queue, rx)
    }

    fn child(owner_refs: serde_json::Value, labels: serde_json::Value) -> (ObjectKey, Entry) {
        entry(serde_json::json!({"metadata": {"name": "child", "namespace": "ns", "ownerReferences": owner_refs, "labels": labels}}))
    }

    async fn queued(queue: &WorkQueue<ObjectKey>) -> Vec<String> {
        let mut keys = Vec::new();
        while !queue.is_empty() {
            keys.push(queue.get().await.unwrap().key().to_string());
        }
        keys.sort();
        keys
    }

    #[tokio::test]
    async fn owned_objects_enqueue_their_controlling_owner_of_the_primary_kind() {
        let (trigger, queue, _) = trigger(Mapping::Owners { controller_only: true }, true);
        let (key, entry) = child(
            serde_json::json!([
                {"apiVersion": "example.com/v1", "kind": "Foo", "name": "mine", "uid": "1", "controller": true},
                {"apiVersion": "example.com/v1", "kind": "Foo", "name": "not-controller", "uid": "2"},
                {"apiVersion": "other.com/v1", "kind": "Foo", "name": "other-group", "uid": "3", "controller": true},
            ]),
            serde_json::json!({}),
        );
        trigger.on_event(Event::Deleted(&key, &entry));
        assert_eq!(queued(&queue).await, ["ns/mine"]);
    }

    #[tokio::test]
    async fn watched_objects_map_by_owner_references_or_label() {
        let refs = serde_json::json!([{"apiVersion": "example.com/v1", "kind": "Foo", "name": "a", "uid": "1"}]);
        let (by_owner, queue, _) = trigger(Mapping::Owners { controller_only: false }, true);
        let (key, entry) = child(refs, serde_json::json!({"foo": "b"}));
        by_owner.on_event(Event::Applied(&key, &entry));
        assert_eq!(queued(&queue).await, ["ns/a"]);

        let (by_label, queue, _) = trigger(Mapping::Label("foo".into()), false);
        by_label.on_event(Event::Applied(&key, &entry));
        assert_eq!(queued(&queue).await, ["b"], "a cluster-scoped primary has no namespace");
    }

    #[tokio::test]
    async fn map_related_goes_to_the_mapper() {
        let (trigger, queue, mut rx) = trigger(Mapping::MapRelated, true);
        let (key, entry) = child(serde_json::json!([]), serde_json::json!({}));
        trigger.on_event(Event::Applied(&key, &entry));
        let (resource, json) = rx.try_recv().unwrap();
        assert_eq!(resource.kind, "Deployment");
        assert!(json.contains("\"child\""));
        assert!(queue.is_empty());
    }
}
