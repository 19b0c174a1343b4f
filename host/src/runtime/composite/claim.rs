//! Which objects are a parent's children (Metacontroller's ControllerRefManager): of each child
//! kind, in the parent's namespace (every namespace for a cluster-scoped parent), those whose
//! controller owner reference is the parent and that match its selector. A matching orphan is
//! adopted, an owned child that stopped matching is released; both are merge patches of
//! `ownerReferences` on the condition of the child's `resourceVersion`. A parent being deleted
//! adopts and releases nothing.

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
        let uid = object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
        let deleting = object.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        Some(Child { resource: resource.clone(), key, json, object, uid, deleting })
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

    /// The observed child of that kind (group and kind: the version is the API's choice) and key.
    pub(super) fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<&Child> {
        self.all().find(|c| c.resource.group == resource.group && c.resource.kind == resource.kind && c.key == *key)
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &Child> {
        self.kinds.iter().flat_map(|(_, children)| children)
    }
}

/// Claims the parent's children of every kind. Every adoption and release is tried; if any
/// failed, the failures are returned (and the parent is synced again with backoff).
pub(super) async fn claim(services: &Services, kinds: &[ChildRule], parent: &Parent, selector: &LabelSelector) -> Result<Observed, Vec<Failed>> {
    let mut observed = Observed { kinds: Vec::new() };
    let mut failed = Vec::new();
    // A parent being deleted adopts nothing: orphans are not even looked at.
    let orphans = (!parent.deleting).then_some(selector);
    for rule in kinds {
        let mut claimed = Vec::new();
        for (key, json) in services.cache.children(&rule.resource, parent.namespace(), &parent.uid, orphans) {
            let Some(child) = Child::parse(&rule.resource, key, json) else { continue };
            let matches = selector.matches(|label| child.label(label));
            match (child.controlled_by(&parent.uid), matches) {
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
                    match services.api.write(child.owner_patch(references)).await {
                        Ok(stored) => claimed.extend(stored.and_then(|json| Child::parse(&rule.resource, child.key.clone(), json))),
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
    use crate::runtime::composite::test_parent;

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
