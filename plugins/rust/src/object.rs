//! Objects as the SDK hands them to a controller: k8s-openapi types or [`DynamicObject`], with
//! the metadata helpers controllers need (keys, owner references, finalizers).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::bindings::kubewasm::controller::types as wit;

/// A Kubernetes kind: group ("" for core), version, kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl Gvk {
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Gvk { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// Parses `apiVersion` and `kind` as objects carry them.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        match api_version.split_once('/') {
            Some((group, version)) => Gvk::new(group, version, kind),
            None => Gvk::new("", api_version, kind),
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// The kind of a k8s-openapi type.
pub fn gvk_of<K: k8s_openapi::Resource>() -> Gvk {
    Gvk::new(K::GROUP, K::VERSION, K::KIND)
}

impl From<wit::Gvk> for Gvk {
    fn from(g: wit::Gvk) -> Self {
        Gvk { group: g.group, version: g.version, kind: g.kind }
    }
}

impl From<&Gvk> for wit::Gvk {
    fn from(g: &Gvk) -> Self {
        wit::Gvk { group: g.group.clone(), version: g.version.clone(), kind: g.kind.clone() }
    }
}

/// An object's namespace (none when cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        ObjectKey { namespace: namespace.map(Into::into), name: name.into() }
    }
}

impl From<wit::ObjectKey> for ObjectKey {
    fn from(k: wit::ObjectKey) -> Self {
        ObjectKey { namespace: k.namespace, name: k.name }
    }
}

impl From<ObjectKey> for wit::ObjectKey {
    fn from(k: ObjectKey) -> Self {
        wit::ObjectKey { namespace: k.namespace, name: k.name }
    }
}

/// Anything the SDK can read, write and describe: k8s-openapi types and [`DynamicObject`].
pub trait Object: Serialize + DeserializeOwned {
    fn gvk(&self) -> Gvk;
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;
}

impl<K> Object for K
where
    K: k8s_openapi::Resource + k8s_openapi::Metadata<Ty = ObjectMeta> + Serialize + DeserializeOwned,
{
    fn gvk(&self) -> Gvk {
        gvk_of::<K>()
    }
    fn meta(&self) -> &ObjectMeta {
        k8s_openapi::Metadata::metadata(self)
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        k8s_openapi::Metadata::metadata_mut(self)
    }
}

/// An object of any kind, for custom resources without generated types: typed metadata, the
/// rest as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DynamicObject {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Every other top-level field (`spec`, `status`, `data`, ...).
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

impl DynamicObject {
    pub fn new(gvk: &Gvk, namespace: Option<&str>, name: &str) -> Self {
        DynamicObject {
            api_version: gvk.api_version(),
            kind: gvk.kind.clone(),
            metadata: ObjectMeta { name: Some(name.into()), namespace: namespace.map(Into::into), ..Default::default() },
            data: Default::default(),
        }
    }

    /// A top-level field such as `spec` or `status`.
    pub fn field(&self, name: &str) -> Option<&serde_json::Value> {
        self.data.get(name)
    }

    /// Reads a top-level field into a type, e.g. `obj.parse_field::<FooSpec>("spec")`.
    pub fn parse_field<T: DeserializeOwned>(&self, name: &str) -> crate::Result<Option<T>> {
        self.data.get(name).map(|v| T::deserialize(v).map_err(crate::Error::from)).transpose()
    }

    /// Sets the condition of its type in `status.conditions`, as controller-runtime's
    /// `meta.SetStatusCondition` does (and the other SDKs' `set_condition`): added when missing;
    /// otherwise its fields replaced, and `lastTransitionTime` set to now (whole seconds, UTC,
    /// from the host's clock) only when its `status` changes. Returns whether anything changed.
    pub fn set_condition(&mut self, condition: &StatusCondition) -> bool {
        let now = || {
            let seconds = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            k8s_openapi::jiff::Timestamp::from_second(seconds.try_into().unwrap_or(i64::MAX)).unwrap_or_default().to_string()
        };
        let status = self.data.entry("status").or_insert_with(|| serde_json::json!({}));
        if !status.is_object() {
            *status = serde_json::json!({});
        }
        let conditions = status.as_object_mut().expect("an object").entry("conditions").or_insert_with(|| serde_json::json!([]));
        if !conditions.is_array() {
            *conditions = serde_json::json!([]);
        }
        let list = conditions.as_array_mut().expect("an array");
        let mut wanted = serde_json::json!({"type": condition.type_, "status": condition.status, "reason": condition.reason, "message": condition.message});
        if let Some(generation) = condition.observed_generation {
            wanted["observedGeneration"] = generation.into();
        }
        let Some(existing) = list.iter_mut().find(|c| c["type"] == condition.type_.as_str()) else {
            wanted["lastTransitionTime"] = now().into();
            list.push(wanted);
            return true;
        };
        let mut changed = false;
        if existing["status"] != wanted["status"] || existing.get("lastTransitionTime").is_none() {
            existing["lastTransitionTime"] = now().into();
            changed = true;
        }
        for (key, value) in wanted.as_object().expect("an object") {
            if existing.get(key) != Some(value) {
                existing[key.as_str()] = value.clone();
                changed = true;
            }
        }
        changed
    }
}

/// A status condition as [`DynamicObject::set_condition`] takes it: `metav1.Condition` without
/// the `lastTransitionTime` the SDK keeps. `status` is `True`, `False` or `Unknown`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCondition {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub observed_generation: Option<i64>,
}

impl Object for DynamicObject {
    fn gvk(&self) -> Gvk {
        Gvk::from_api_version(&self.api_version, &self.kind)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Metadata shortcuts for every [`Object`].
pub trait ResourceExt: Object {
    fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }
    fn namespace(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }
    fn key(&self) -> ObjectKey {
        ObjectKey::new(self.namespace(), self.name())
    }
    fn uid(&self) -> Option<&str> {
        self.meta().uid.as_deref()
    }
    fn generation(&self) -> Option<i64> {
        self.meta().generation
    }
    fn label(&self, key: &str) -> Option<&str> {
        self.meta().labels.as_ref()?.get(key).map(String::as_str)
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        self.meta().annotations.as_ref()?.get(key).map(String::as_str)
    }
    fn owner_references(&self) -> &[OwnerReference] {
        self.meta().owner_references.as_deref().unwrap_or_default()
    }
    /// Whether `owner` is this object's controller (the owner reference with `controller: true`).
    fn is_controlled_by(&self, owner: &impl Object) -> bool {
        let uid = owner.meta().uid.as_deref();
        self.owner_references().iter().any(|r| r.controller == Some(true) && Some(r.uid.as_str()) == uid)
    }
    /// An owner reference making this object the controller of a child, so the child is
    /// garbage-collected with it and its events reach this object's controller.
    fn controller_owner_ref(&self) -> OwnerReference {
        let gvk = self.gvk();
        OwnerReference {
            api_version: gvk.api_version(),
            kind: gvk.kind,
            name: self.name().into(),
            uid: self.uid().unwrap_or_default().into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
    fn is_deleting(&self) -> bool {
        self.meta().deletion_timestamp.is_some()
    }
}

impl<T: Object> ResourceExt for T {}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn condition(status: &str, message: &str) -> StatusCondition {
        StatusCondition { type_: "Ready".into(), status: status.into(), reason: "Checked".into(), message: message.into(), observed_generation: Some(2) }
    }

    #[test]
    fn set_condition_keeps_the_transition_time_until_the_status_changes() {
        let mut obj = DynamicObject::new(&Gvk::new("example.com", "v1", "Foo"), Some("ns"), "a");
        assert!(obj.set_condition(&condition("True", "fine")));
        let first = obj.data["status"]["conditions"][0].clone();
        assert_eq!(first["observedGeneration"], json!(2));
        let at = first["lastTransitionTime"].as_str().expect("a time").to_owned();
        assert!(at.ends_with('Z') && !at.contains('.'), "whole seconds, UTC: {at}");

        // Pretend it was set long ago: a new message keeps the time, a new status does not.
        obj.data["status"]["conditions"][0]["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
        assert!(!obj.set_condition(&condition("True", "fine")), "nothing changed");
        assert!(obj.set_condition(&condition("True", "still fine")));
        assert_eq!(obj.data["status"]["conditions"][0]["lastTransitionTime"], json!("2020-01-01T00:00:00Z"));
        assert!(obj.set_condition(&condition("False", "broken")));
        assert_ne!(obj.data["status"]["conditions"][0]["lastTransitionTime"], json!("2020-01-01T00:00:00Z"));
        assert_eq!(obj.data["status"]["conditions"].as_array().map(Vec::len), Some(1));
    }
}
