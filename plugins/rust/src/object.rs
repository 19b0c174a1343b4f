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
