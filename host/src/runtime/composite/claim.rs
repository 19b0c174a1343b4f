//! Which objects are a parent's children (Metacontroller's ControllerRefManager): of each child
//! kind, in the parent's namespace (every namespace for a cluster-scoped parent), those whose
//! controller owner reference is the parent and that match its selector. A matching orphan is
//! adopted, an owned child that stopped matching is released; both are merge patches of
//! `ownerReferences` on the condition of the child's `resourceVersion`. A parent being deleted
//! adopts and releases nothing. Under the generated selector, the owner reference alone claims:
//! the label is the host's own, and a child someone stripped of it gets it back with its next
//! apply, rather than being released and then refused as someone else's.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{CompositeError, Failed, Parent};
use crate::client::{PatchKind, WriteOp, WriteRequest};
use crate::manifest::{ChildRule, ChildSelector};
use crate::resource::{Gvk, ObjectKey};
use crate::runtime::bindings::composite_exports::Objects;
use crate::runtime::host::Services;
use crate::selector::LabelSelector;

/// The label of a generated selector: every child carries its parent's uid under it.
pub(super) const CONTROLLER_UID: &str = "kubewasm.io/controller-uid";

/// The selector a parent claims its children by.
pub(super) fn selector(kind: ChildSelector, parent: &Parent) -> Result<LabelSelector, CompositeError> {
    match kind {
        ChildSelector::Generated => {
            format!("{CONTROLLER_UID}={}", parent.uid).parse().map_err(|e: crate::selector::SelectorError| CompositeError::Selector(e.to_string()))
        }
        ChildSelector::ParentSpec => match parent.object.pointer("/spec/selector") {
            Some(object) => LabelSelector::from_object(object).map_err(|e| CompositeError::Selector(format!(".spec.selector: {e}"))),
            None => Err(CompositeError::Selector(".spec.selector must have either matchLabels, matchExpressions, or both".into())),
        },
    }
}

/// A child as observed.
pub(super) struct Child {
    pub(super) resource: Gvk,
    pub(super) key: ObjectKey,
    pub(super) json: Arc<str>,
    pub(super) object: Value,
    pub(super) uid: String,
    pub(super) deleting: bool,
}

impl Child {
    fn parse(resource: &Gvk, key: ObjectKey, json: Arc<str>) -> Option<Self> {
        let object: Value = serde_json::from_str(&json).ok()?;
        Some(Self::of(resource, key, json, object))
    }

    fn of(resource: &Gvk, key: ObjectKey, json: Arc<str>, object: Value) -> Self {
        let uid = object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
        let deleting = object.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        Child { resource: resource.clone(), key, json, object, uid, deleting }
    }

    /// This child as adopted: with `references`, at the version the write answered.
    fn adopted(&self, references: Vec<Value>, stored: Option<&str>) -> Self {
        let mut object = self.object.clone();
        object["metadata"]["ownerReferences"] = Value::Array(references);
        let version = stored.and_then(|s| serde_json::from_str::<Value>(s).ok()).and_then(|s| s.pointer("/metadata/resourceVersion").cloned());
        if let Some(version) = version {
            object["metadata"]["resourceVersion"] = version;
        }
        Self::of(&self.resource, self.key.clone(), object.to_string().into(), object)
    }

    pub(super) fn label(&self, key: &str) -> Option<&str> {
        self.object.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str)
    }

    pub(super) fn annotation(&self, key: &str) -> Option<&str> {
        self.object.pointer("/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str)
    }

    fn owner_references(&self) -> Vec<Value> {
        self.object.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default()
    }

    fn controlled_by(&self, uid: &str) -> bool {
        self.owner_references().iter().any(|r| r["controller"] == json!(true) && r["uid"] == json!(uid))
    }

    /// A merge patch replacing its owner references, on the condition that it has not changed.
    fn owner_patch(&self, references: Vec<Value>) -> WriteRequest {
        let version = self.object.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null);
        WriteRequest {
            resource: self.resource.clone(),
            namespace: self.key.namespace().map(Into::into),
            name: self.key.name().into(),
            op: WriteOp::Patch { patch_type: PatchKind::Merge, body: json!({"metadata": {"ownerReferences": references, "resourceVersion": version}}) },
        }
    }
}

/// A child's identity among a parent's children: its group, kind and key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct ChildKey<'a> {
    group: &'a str,
    kind: &'a str,
    key: &'a ObjectKey,
}

impl<'a> ChildKey<'a> {
    pub(super) fn of(resource: &'a Gvk, key: &'a ObjectKey) -> Self {
        ChildKey { group: &resource.group, kind: &resource.kind, key }
    }
}

/// A parent's claimed children, by kind (every child kind, in the composition's order).
pub(super) struct Observed {
    pub(super) kinds: Vec<(ChildRule, Vec<Child>)>,
}

impl Observed {
    /// What `sync-request.children` holds: an entry per kind, its items sorted by key.
    pub(super) fn handed(&self) -> Vec<Objects> {
        self.kinds
            .iter()
            .map(|(rule, children)| Objects { resource: (&rule.resource).into(), items: children.iter().map(|c| c.json.to_string()).collect() })
            .collect()
    }

    /// The observed children by kind (group and kind: the version is the API's choice) and key.
    pub(super) fn by_key(&self) -> HashMap<ChildKey<'_>, &Child> {
        self.all().map(|c| (ChildKey::of(&c.resource, &c.key), c)).collect()
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &Child> {
        self.kinds.iter().flat_map(|(_, children)| children)
    }
}

/// Claims the parent's children of every kind. Every adoption and release is tried; if any
/// failed, the failures are returned (and the parent is synced again with backoff).
pub(super) async fn claim(
    services: &Services,
    kinds: &[ChildRule],
    parent: &Parent,
    selector: &LabelSelector,
    kind: ChildSelector,
) -> Result<Observed, Vec<Failed>> {
    let mut observed = Observed { kinds: Vec::new() };
    let mut failed = Vec::new();
    // A parent being deleted adopts nothing: orphans are not even looked at.
    let orphans = (!parent.deleting).then_some(selector);
    for rule in kinds {
        let mut claimed = Vec::new();
        for (key, json) in services.cache.children(&rule.resource, parent.namespace(), &parent.uid, orphans) {
            let Some(child) = Child::parse(&rule.resource, key, json) else { continue };
            let controlled = child.controlled_by(&parent.uid);
            let matches = selector.matches(|label| child.label(label)) || (controlled && kind == ChildSelector::Generated);
            match (controlled, matches) {
                (true, true) => claimed.push(child),
                (true, false) if !parent.deleting => {
                    let references = child.owner_references().into_iter().filter(|r| r["uid"] != json!(parent.uid)).collect();
                    if let Err(error) = services.api.write(child.owner_patch(references)).await {
                        failed.push(Failed::new(format!("releasing {} {}", child.resource.kind, child.key), error));
                    }
                }
                (false, true) if !child.deleting && !parent.deleting => {
                    let mut references = child.owner_references();
                    references.push(parent.controller_reference());
                    match services.api.write(child.owner_patch(references.clone())).await {
                        Ok(stored) => claimed.push(child.adopted(references, stored.as_deref())),
                        Err(error) => failed.push(Failed::new(format!("adopting {} {}", child.resource.kind, child.key), error)),
                    }
                }
                _ => {}
            }
        }
        observed.kinds.push((rule.clone(), claimed));
    }
    if failed.is_empty() { Ok(observed) } else { Err(failed) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Scope;
    use crate::runtime::composite::test_parent;
    use crate::runtime::host::Services;
    use crate::tools::offline::{FixtureCache, Recorder};

    fn config_maps() -> Gvk {
        Gvk::new("", "v1", "ConfigMap")
    }

    /// Services over a cache holding `objects` (ConfigMaps), recording writes.
    fn services(objects: &[Value]) -> (Services, Arc<Recorder>, FixtureCache) {
        let mut cache = FixtureCache::default();
        cache.add_resource(config_maps(), Scope::Namespaced);
        for object in objects {
            cache.insert(&config_maps(), &object.to_string()).unwrap();
        }
        let recorder = Arc::new(Recorder::default());
        (crate::tools::offline::services(&cache, &recorder, crate::tools::offline::Writes::Recorded), recorder, cache)
    }

    fn child(name: &str, labels: Value, controller: Option<&str>) -> Value {
        let owners: Vec<Value> =
            controller.iter().map(|uid| json!({"apiVersion": "example.com/v1", "kind": "Parent", "name": "p", "uid": uid, "controller": true})).collect();
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"), "resourceVersion": "3", "labels": labels, "ownerReferences": owners}, "data": {"k": name}})
    }

    #[tokio::test]
    async fn the_owner_reference_claims_under_the_generated_selector_and_adoption_keeps_the_object() {
        let parent = test_parent(Some("ns"), json!({}));
        let label = json!({CONTROLLER_UID: "parent-uid"});
        let (services, recorder, _cache) = services(&[
            child("owned", label.clone(), Some("parent-uid")),
            // Someone stripped the host's label: still the parent's child, not released.
            child("stripped", json!({}), Some("parent-uid")),
            // An orphan carrying the label: adopted, as it is.
            child("orphan", label.clone(), None),
            // Another parent's child, and an orphan without the label: not this parent's.
            child("other", label, Some("someone-else")),
            child("stranger", json!({}), None),
        ]);
        let rules = [ChildRule { resource: config_maps(), update: crate::manifest::UpdateStrategy::OnDelete }];
        let selector = selector(ChildSelector::Generated, &parent).unwrap();
        let observed = claim(&services, &rules, &parent, &selector, ChildSelector::Generated).await.unwrap();
        let names: Vec<&str> = observed.all().map(|c| c.key.name()).collect();
        assert_eq!(names, ["orphan", "owned", "stripped"]);
        let writes = recorder.writes();
        assert_eq!(writes.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(), ["orphan"], "only the orphan is patched (adopted)");
        let adopted = observed.all().find(|c| c.key.name() == "orphan").unwrap();
        assert_eq!(adopted.object["data"]["k"], "orphan", "the adopted child is the object, not the write's answer");
        assert_eq!(adopted.object["metadata"]["ownerReferences"][0]["uid"], "parent-uid");
        assert_eq!(adopted.uid, "orphan-uid");
    }

    #[tokio::test]
    async fn a_child_that_stops_matching_the_parents_spec_selector_is_released() {
        let parent = test_parent(Some("ns"), json!({"spec": {"selector": {"matchLabels": {"app": "a"}}}}));
        let (services, recorder, _cache) =
            services(&[child("kept", json!({"app": "a"}), Some("parent-uid")), child("moved", json!({"app": "b"}), Some("parent-uid"))]);
        let rules = [ChildRule { resource: config_maps(), update: crate::manifest::UpdateStrategy::OnDelete }];
        let selector = selector(ChildSelector::ParentSpec, &parent).unwrap();
        let observed = claim(&services, &rules, &parent, &selector, ChildSelector::ParentSpec).await.unwrap();
        assert_eq!(observed.all().map(|c| c.key.name()).collect::<Vec<_>>(), ["kept"]);
        let writes = recorder.writes();
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].name, "moved");
        let crate::client::WriteOp::Patch { body, .. } = &writes[0].op else { panic!("a patch: {:?}", writes[0].op) };
        assert_eq!(body["metadata"]["ownerReferences"], json!([]), "its reference to the parent removed");
        assert_eq!(body["metadata"]["resourceVersion"], "3", "on the condition that it did not change");
    }

    #[test]
    fn a_generated_selector_names_the_parent_and_a_spec_selector_is_required() {
        let parent = test_parent(Some("ns"), json!({}));
        assert_eq!(selector(ChildSelector::Generated, &parent).unwrap().as_str(), "kubewasm.io/controller-uid=parent-uid");
        let err = selector(ChildSelector::ParentSpec, &parent).unwrap_err().to_string();
        assert!(err.contains(".spec.selector must have either matchLabels, matchExpressions, or both"), "{err}");
        let parent = test_parent(Some("ns"), json!({"spec": {"selector": {"matchLabels": {"app": "a"}}}}));
        assert_eq!(selector(ChildSelector::ParentSpec, &parent).unwrap().as_str(), "app=a");
    }
}
