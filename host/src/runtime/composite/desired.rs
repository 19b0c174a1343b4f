//! A declarative plugin's answer, checked and planned: every desired child validated (a child
//! kind, named, in a namespace its owner reference can span, labels matching the parent's
//! selector, once), made ready to apply (the parent as its controller, the selector's label, the
//! digest of what was desired in `kubewasm.io/applied`), and compared with what is observed to
//! plan the writes per update strategy; and the parent's status as it should be.

use std::collections::HashSet;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::claim::{CONTROLLER_UID, Child, ChildKey, Observed};
use super::{CompositeError, Parent};
use crate::manifest::{ChildRule, ChildSelector, UpdateStrategy};
use crate::resource::{Gvk, ObjectKey, Scope};
use crate::runtime::bindings::composite_exports::SyncResponse;
use crate::runtime::boundary::{MAX_CHILDREN, MAX_DESIRED_BYTES, MAX_NAME, MAX_OBJECT, too_long};
use crate::runtime::call::Fault;
use crate::selector::LabelSelector;

/// The annotation holding the digest of a child's desired state, as last applied.
pub(super) const APPLIED: &str = "kubewasm.io/applied";

/// Refuses an answer over the bounds the WIT states (a fault: the plugin is broken).
pub(in crate::runtime) fn check_desired(answer: &SyncResponse) -> Result<(), Fault> {
    if answer.children.len() > MAX_CHILDREN {
        return Err(Fault::Oversized(format!("sync answered {} children; at most {MAX_CHILDREN}", answer.children.len())));
    }
    let largest = answer.children.iter().chain(&answer.status).map(String::len).max().unwrap_or(0);
    if let Some(problem) = too_long("an object", largest, MAX_OBJECT) {
        return Err(Fault::Oversized(format!("sync answered {problem}")));
    }
    let total: usize = answer.children.iter().chain(&answer.status).map(String::len).sum();
    match too_long("its children and status", total, MAX_DESIRED_BYTES) {
        Some(problem) => Err(Fault::Oversized(format!("sync answered {problem}"))),
        None => Ok(()),
    }
}

/// A desired child, ready to apply.
pub(super) struct Desired {
    pub(super) resource: Gvk,
    pub(super) key: ObjectKey,
    pub(super) object: Value,
    /// No observed child has its key: it is created, never applied over an object of that
    /// name that is not this parent's child. Otherwise its `metadata.uid` is the observed
    /// child's, a precondition of the apply.
    pub(super) new: bool,
    update: UpdateStrategy,
    digest: String,
}

/// The writes that bring the observed children to the desired ones.
pub(super) struct Plan<'a> {
    /// Children to delete first, to be created as desired once gone (`recreate`).
    pub(super) recreate: Vec<&'a Child>,
    /// Children to create, or to apply over (`in-place`).
    pub(super) apply: Vec<Desired>,
    /// Children no longer desired: deleted only once every apply succeeded.
    pub(super) prune: Vec<&'a Child>,
}

/// Validates the desired children and plans the writes; any invalid child refuses the whole
/// answer (nothing is written). `scope` tells a cached kind's scope.
pub(super) fn plan<'a>(
    kinds: &[ChildRule],
    parent: &Parent,
    selector: &LabelSelector,
    generated: ChildSelector,
    observed: &'a Observed,
    children: Vec<String>,
    scope: impl Fn(&Gvk) -> Option<Scope>,
) -> Result<Plan<'a>, CompositeError> {
    let desired =
        children.into_iter().enumerate().map(|(i, text)| prepare(i, &text, kinds, parent, selector, generated, &scope)).collect::<Result<Vec<_>, _>>()?;
    let mut keys = HashSet::new();
    if let Some(twice) = desired.iter().find(|d| !keys.insert(ChildKey::of(&d.resource, &d.key))) {
        return Err(CompositeError::Invalid(format!("desired child {} {} is answered twice", twice.resource.kind, twice.key)));
    }
    let by_key = observed.by_key();
    let mut plan = Plan { recreate: Vec::new(), apply: Vec::new(), prune: Vec::new() };
    plan.prune.extend(observed.all().filter(|c| !c.deleting && !keys.contains(&ChildKey::of(&c.resource, &c.key))));
    drop(keys);
    for wanted in desired {
        match by_key.get(&ChildKey::of(&wanted.resource, &wanted.key)).copied() {
            None => plan.apply.push(Desired { new: true, ..wanted }),
            // Gone soon: created again after its delete brings the parent back.
            Some(child) if child.deleting => {}
            Some(child) => {
                let changed = child.annotation(APPLIED) != Some(wanted.digest.as_str());
                match wanted.update {
                    UpdateStrategy::OnDelete => {}
                    UpdateStrategy::Recreate if changed => plan.recreate.push(child),
                    UpdateStrategy::Recreate => {}
                    UpdateStrategy::InPlace if changed || drifted(&wanted.object, &child.object) => {
                        // Applied to the child observed only: not to another object that took
                        // its name meanwhile.
                        let mut wanted = wanted;
                        wanted.object["metadata"]["uid"] = json!(child.uid);
                        plan.apply.push(wanted);
                    }
                    UpdateStrategy::InPlace => {}
                }
            }
        }
    }
    Ok(plan)
}

/// Checks the `i`th desired child and makes it ready to apply.
fn prepare(
    i: usize,
    text: &str,
    kinds: &[ChildRule],
    parent: &Parent,
    selector: &LabelSelector,
    generated: ChildSelector,
    scope: impl Fn(&Gvk) -> Option<Scope>,
) -> Result<Desired, CompositeError> {
    let invalid = |problem: String| CompositeError::Invalid(format!("desired child {i}: {problem}"));
    let mut object = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => object,
        Ok(_) => return Err(invalid("not a JSON object".into())),
        Err(e) => return Err(invalid(format!("not valid JSON: {e}"))),
    };
    let text_of = |object: &Map<String, Value>, field: &str| object.get(field).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let (Some(api_version), Some(kind)) = (text_of(&object, "apiVersion"), text_of(&object, "kind")) else {
        return Err(invalid("it has no apiVersion or no kind".into()));
    };
    let resource = Gvk::from_api_version(&api_version, &kind);
    let metadata = object.entry("metadata").or_insert_with(|| json!({}));
    let Some(metadata) = metadata.as_object_mut() else { return Err(invalid("its metadata is not an object".into())) };
    // The host decides which object a child's write goes to (see `Desired::new`); the
    // versions and owners of fields are the API server's.
    for field in ["uid", "resourceVersion", "managedFields"] {
        metadata.remove(field);
    }
    let Some(name) = text_of(metadata, "name") else { return Err(invalid(format!("the {kind} has no metadata.name"))) };
    let named = |problem: String| CompositeError::Invalid(format!("desired child {kind} {name}: {problem}"));
    if let Some(problem) = too_long("metadata.name", name.len(), MAX_NAME) {
        return Err(named(problem));
    }
    let Some(rule) = kinds.iter().find(|r| r.resource.group == resource.group && r.resource.kind == resource.kind) else {
        let declared: Vec<String> = kinds.iter().map(|r| r.resource.to_string()).collect();
        return Err(named(format!("{resource} is not one of the plugin's child kinds ({})", declared.join(", "))));
    };
    let given = text_of(metadata, "namespace");
    let namespace = match (parent.key.namespace(), scope(&rule.resource), given) {
        (_, None, _) => return Err(named(format!("{} is not cached (yet): the host cannot tell its scope", rule.resource))),
        (Some(_), Some(Scope::Cluster), _) => {
            return Err(named("a namespaced parent cannot own a cluster-scoped object (an owner reference cannot span scopes)".into()));
        }
        (Some(own), Some(Scope::Namespaced), Some(ns)) if ns != own => {
            return Err(named(format!(
                "it is in namespace {ns}, but a namespaced parent's children live in its own namespace, {own} (an owner reference cannot span namespaces)"
            )));
        }
        (Some(own), Some(Scope::Namespaced), _) => Some(own.to_string()),
        (None, Some(Scope::Namespaced), Some(ns)) => Some(ns),
        (None, Some(Scope::Namespaced), None) => return Err(named("it names no namespace: a cluster-scoped parent's namespaced children name theirs".into())),
        (None, Some(Scope::Cluster), Some(ns)) => return Err(named(format!("{} is cluster-scoped, but namespace {ns} was given", rule.resource))),
        (None, Some(Scope::Cluster), None) => None,
    };
    if let Some(ns) = &namespace {
        metadata.insert("namespace".into(), json!(ns));
    }
    let labels = metadata.entry("labels").or_insert_with(|| json!({}));
    let Some(labels) = labels.as_object_mut() else { return Err(named("its labels are not an object".into())) };
    if generated == ChildSelector::Generated {
        labels.entry(CONTROLLER_UID).or_insert_with(|| json!(parent.uid));
    }
    if labels.values().any(|v| !v.is_string()) {
        return Err(named("a label value is not a string".into()));
    }
    if !selector.matches(|key| labels.get(key).and_then(Value::as_str)) {
        return Err(named(format!("its labels don't match the parent's selector {selector}")));
    }
    let key = ObjectKey::new(namespace.as_deref(), &name);
    let digest = digest(&Value::Object(object.clone()));
    let metadata = object.get_mut("metadata").and_then(Value::as_object_mut).expect("inserted above");
    let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
    let Some(annotations) = annotations.as_object_mut() else { return Err(named("its annotations are not an object".into())) };
    annotations.insert(APPLIED.into(), json!(digest));
    let references = metadata.entry("ownerReferences").or_insert_with(|| json!([]));
    let Some(references) = references.as_array_mut() else { return Err(named("its ownerReferences are not a list".into())) };
    if references.iter().any(|r| r["controller"] == json!(true) && r["uid"] != json!(parent.uid)) {
        return Err(named("it names another controller: its parent is its controller".into()));
    }
    if !references.iter().any(|r| r["uid"] == json!(parent.uid)) {
        references.push(parent.controller_reference());
    }
    Ok(Desired { resource: Gvk::from_api_version(&api_version, &kind), key, object: Value::Object(object), new: false, update: rule.update, digest })
}

/// The parent's status as it should be: the answer's with `observedGeneration` set to the
/// parent's generation; `None` when the answer leaves the status alone.
pub(super) fn status(parent: &Parent, answered: Option<String>) -> Result<Option<Value>, CompositeError> {
    let mut status = match answered.as_deref().map(serde_json::from_str::<Value>) {
        None => return Ok(None),
        Some(Ok(object @ Value::Object(_))) => object,
        Some(Ok(_)) => return Err(CompositeError::Invalid("the status is not a JSON object".into())),
        Some(Err(e)) => return Err(CompositeError::Invalid(format!("the status is not valid JSON: {e}"))),
    };
    if let Some(generation) = parent.object.pointer("/metadata/generation") {
        status["observedGeneration"] = generation.clone();
    }
    Ok(Some(status))
}

/// A digest of a desired object, the same for the same content whatever the order of its keys.
fn digest(object: &Value) -> String {
    let mut hasher = Sha256::new();
    canonical(object, &mut hasher);
    let hash = hasher.finalize();
    hash[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(value: &Value, out: &mut Sha256) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.update(b"{");
            for key in keys {
                out.update(serde_json::to_string(key).unwrap_or_default().as_bytes());
                out.update(b":");
                canonical(&map[key], out);
                out.update(b",");
            }
            out.update(b"}");
        }
        Value::Array(items) => {
            out.update(b"[");
            for item in items {
                canonical(item, out);
                out.update(b",");
            }
            out.update(b"]");
        }
        scalar => out.update(scalar.to_string().as_bytes()),
    }
}

/// Whether someone else changed what `desired` sets on `observed`: a field it gives with another
/// value, or a list of another length. Fields it leaves out are others' (defaults, other
/// managers); of the metadata only labels and annotations count.
fn drifted(desired: &Value, observed: &Value) -> bool {
    let mut desired = desired.clone();
    if let Some(metadata) = desired.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.retain(|k, _| k == "labels" || k == "annotations");
    }
    !covers(observed, &desired)
}

fn covers(observed: &Value, desired: &Value) -> bool {
    match (observed, desired) {
        (Value::Object(o), Value::Object(d)) => d.iter().all(|(k, v)| o.get(k).is_some_and(|ov| covers(ov, v))),
        (Value::Array(o), Value::Array(d)) => o.len() == d.len() && o.iter().zip(d).all(|(ov, dv)| covers(ov, dv)),
        (o, d) => o == d,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::runtime::composite::test_parent;

    fn config_map() -> Gvk {
        Gvk::new("", "v1", "ConfigMap")
    }

    fn rules(update: UpdateStrategy) -> Vec<ChildRule> {
        vec![ChildRule { resource: config_map(), update }]
    }

    fn scope(resource: &Gvk) -> Option<Scope> {
        match resource.kind.as_str() {
            "ConfigMap" => Some(Scope::Namespaced),
            "ClusterRole" => Some(Scope::Cluster),
            _ => None,
        }
    }

    fn generated(parent: &Parent) -> LabelSelector {
        super::super::claim::selector(ChildSelector::Generated, parent).unwrap()
    }

    fn observed(children: &[Value]) -> Observed {
        let children = children
            .iter()
            .map(|c| {
                let key = ObjectKey::new(c.pointer("/metadata/namespace").and_then(Value::as_str), c["metadata"]["name"].as_str().unwrap());
                Child {
                    resource: config_map(),
                    key,
                    json: Arc::from(c.to_string()),
                    object: c.clone(),
                    uid: c["metadata"]["uid"].as_str().unwrap_or("u").into(),
                    deleting: c.pointer("/metadata/deletionTimestamp").is_some(),
                }
            })
            .collect();
        Observed { kinds: vec![(rules(UpdateStrategy::OnDelete).remove(0), children)] }
    }

    fn plan_of<'a>(update: UpdateStrategy, parent: &Parent, observed: &'a Observed, children: &[Value]) -> Result<Plan<'a>, CompositeError> {
        let texts = children.iter().map(ToString::to_string).collect();
        plan(&rules(update), parent, &generated(parent), ChildSelector::Generated, observed, texts, scope)
    }

    #[test]
    fn a_desired_child_gets_its_namespace_label_owner_and_digest() {
        let parent = test_parent(Some("ns"), json!({}));
        let none = observed(&[]);
        let plan = plan_of(
            UpdateStrategy::OnDelete,
            &parent,
            &none,
            &[json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})],
        )
        .unwrap();
        let [created] = plan.apply.as_slice() else { panic!("one apply") };
        assert_eq!(created.key, ObjectKey::new(Some("ns"), "c"));
        let meta = &created.object["metadata"];
        assert_eq!(meta["namespace"], "ns");
        assert_eq!(meta["labels"][CONTROLLER_UID], "parent-uid");
        assert_eq!(
            meta["ownerReferences"][0],
            json!({"apiVersion": "example.com/v1", "kind": "Parent", "name": "p", "uid": "parent-uid", "controller": true, "blockOwnerDeletion": true})
        );
        assert_eq!(meta["annotations"][APPLIED].as_str().unwrap().len(), 32);
    }

    #[test]
    fn the_digest_ignores_key_order_and_sees_any_change() {
        let a = json!({"b": [1, {"y": 2, "x": 1}], "a": "s"});
        let b = json!({"a": "s", "b": [1, {"x": 1, "y": 2}]});
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&json!({"a": "s", "b": [1, {"x": 1, "y": 3}]})));
        assert_ne!(digest(&json!({"a": "1"})), digest(&json!({"a": 1})));
    }

    /// The child as the host would have applied it (its digest annotation set), as stored.
    fn applied(parent: &Parent, child: Value, uid: &str) -> Value {
        let none = observed(&[]);
        let plan = plan_of(UpdateStrategy::OnDelete, parent, &none, &[child]).unwrap();
        let mut stored = plan.apply[0].object.clone();
        stored["metadata"]["uid"] = json!(uid);
        stored["metadata"]["resourceVersion"] = json!("5");
        stored
    }

    #[test]
    fn strategies_decide_what_an_existing_child_gets() {
        let parent = test_parent(Some("ns"), json!({}));
        let v1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"value": "v1"}});
        let v2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"value": "v2"}});
        let mut stored = applied(&parent, v1.clone(), "old");
        // Someone else adds a field: none of the strategies acts on it.
        stored["data"]["side-effect"] = json!("injected");
        let same = observed(std::slice::from_ref(&stored));
        for update in [UpdateStrategy::OnDelete, UpdateStrategy::Recreate, UpdateStrategy::InPlace] {
            let plan = plan_of(update, &parent, &same, std::slice::from_ref(&v1)).unwrap();
            assert!(plan.apply.is_empty() && plan.recreate.is_empty() && plan.prune.is_empty(), "{update:?}: a steady state makes no write");
        }
        // The desired state changes.
        let plan = plan_of(UpdateStrategy::OnDelete, &parent, &same, std::slice::from_ref(&v2)).unwrap();
        assert!(plan.apply.is_empty() && plan.recreate.is_empty(), "on-delete never updates");
        let plan = plan_of(UpdateStrategy::Recreate, &parent, &same, std::slice::from_ref(&v2)).unwrap();
        assert_eq!((plan.recreate.len(), plan.apply.len()), (1, 0), "recreate deletes first, creates once it is gone");
        assert_eq!(plan.recreate[0].uid, "old");
        let plan = plan_of(UpdateStrategy::InPlace, &parent, &same, std::slice::from_ref(&v2)).unwrap();
        assert_eq!((plan.recreate.len(), plan.apply.len()), (0, 1), "in-place applies");
        assert_eq!(plan.apply[0].object["metadata"]["uid"], "old", "to the child observed only");
        // Someone else changes a field the desired state sets: in-place puts it back; recreate
        // waits for the desired state to change (no loop on fields the server rewrites).
        let mut drifted = stored.clone();
        drifted["data"]["value"] = json!("edited");
        let drifted = observed(&[drifted]);
        assert_eq!(plan_of(UpdateStrategy::InPlace, &parent, &drifted, std::slice::from_ref(&v1)).unwrap().apply.len(), 1);
        assert!(plan_of(UpdateStrategy::Recreate, &parent, &drifted, std::slice::from_ref(&v1)).unwrap().recreate.is_empty());
        // A child being deleted is waited for, not written.
        let mut terminating = stored.clone();
        terminating["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
        let terminating = observed(&[terminating]);
        let plan = plan_of(UpdateStrategy::InPlace, &parent, &terminating, std::slice::from_ref(&v2)).unwrap();
        assert!(plan.apply.is_empty() && plan.prune.is_empty());
    }

    #[test]
    fn children_no_longer_desired_are_pruned() {
        let parent = test_parent(Some("ns"), json!({}));
        let old = applied(&parent, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old"}}), "old-uid");
        let present = observed(&[old]);
        let plan =
            plan_of(UpdateStrategy::OnDelete, &parent, &present, &[json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}})]).unwrap();
        assert_eq!(plan.apply.len(), 1);
        assert_eq!(plan.prune.iter().map(|c| c.uid.as_str()).collect::<Vec<_>>(), ["old-uid"]);
    }

    #[test]
    fn an_invalid_child_refuses_the_whole_answer_naming_it() {
        let parent = test_parent(Some("ns"), json!({}));
        let none = observed(&[]);
        let cluster = test_parent(None, json!({}));
        let cm = |meta: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta});
        for (parent, child, needle) in [
            (&parent, json!("text"), "desired child 0: not a JSON object"),
            (&parent, json!({"kind": "ConfigMap", "metadata": {"name": "x"}}), "no apiVersion"),
            (&parent, cm(json!({})), "has no metadata.name"),
            (&parent, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}), "Secret.v1 is not one of the plugin's child kinds"),
            (&parent, cm(json!({"name": "x", "namespace": "other"})), "live in its own namespace, ns"),
            (&parent, cm(json!({"name": "x", "labels": {"kubewasm.io/controller-uid": "someone-else"}})), "don't match the parent's selector"),
            (&parent, cm(json!({"name": "x", "ownerReferences": [{"uid": "u2", "controller": true}]})), "names another controller"),
            (&cluster, cm(json!({"name": "x"})), "names no namespace"),
        ] {
            let err = plan_of(UpdateStrategy::OnDelete, parent, &none, std::slice::from_ref(&child))
                .err()
                .unwrap_or_else(|| panic!("{child} was accepted"))
                .to_string();
            assert!(err.contains(needle), "{child}: {err}");
        }
        let twice = [cm(json!({"name": "x"})), cm(json!({"name": "x", "namespace": "ns"}))];
        let err = plan_of(UpdateStrategy::OnDelete, &parent, &none, &twice).err().unwrap().to_string();
        assert!(err.contains("answered twice"), "{err}");
        let rules = vec![ChildRule { resource: Gvk::new("rbac.authorization.k8s.io", "v1", "ClusterRole"), update: UpdateStrategy::OnDelete }];
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}});
        let err = plan(&rules, &parent, &generated(&parent), ChildSelector::Generated, &none, vec![role.to_string()], scope).err().unwrap().to_string();
        assert!(err.contains("cannot own a cluster-scoped object"), "{err}");
        let plan = plan(&rules, &cluster, &generated(&cluster), ChildSelector::Generated, &none, vec![role.to_string()], scope).unwrap();
        assert_eq!(plan.apply[0].key, ObjectKey::new(None, "r"), "a cluster-scoped parent may own one");
    }

    #[test]
    fn the_status_is_replaced_with_the_observed_generation_or_left_alone() {
        let parent = test_parent(Some("ns"), json!({}));
        assert_eq!(status(&parent, None).unwrap(), None, "no status leaves it alone");
        assert_eq!(status(&parent, Some(r#"{"ready": true}"#.into())).unwrap(), Some(json!({"ready": true, "observedGeneration": 3})));
        assert!(status(&parent, Some("[1]".into())).unwrap_err().to_string().contains("not a JSON object"));
    }

    #[test]
    fn oversized_answers_are_faults() {
        let answer = |children: Vec<String>| SyncResponse { status: None, children, resync_after: None, finalized: false };
        assert!(check_desired(&answer(vec!["{}".into(); MAX_CHILDREN])).is_ok());
        assert!(check_desired(&answer(vec!["{}".into(); MAX_CHILDREN + 1])).unwrap_err().to_string().contains("1001 children"));
        assert!(check_desired(&answer(vec!["x".repeat(MAX_OBJECT + 1)])).unwrap_err().to_string().contains("at most 3145728"));
        assert!(check_desired(&answer(vec!["x".repeat(MAX_OBJECT); 11])).unwrap_err().to_string().contains("children and status"));
    }
}
