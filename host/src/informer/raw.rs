//! The object type the kube watcher decodes into: the JSON text as received, plus the few
//! metadata fields the watcher itself needs. No `serde_json::Value` tree is ever built for a
//! watched object.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, PartialObjectMeta, Resource};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::store::{ParseError, ParsedObject};
use crate::resource::Gvk;

/// An object as JSON text.
#[derive(Clone, Debug)]
pub struct RawObject {
    metadata: ObjectMeta,
    json: Box<RawValue>,
    /// Whether the text carries `apiVersion` and `kind`: the items of a list response don't.
    typed: bool,
}

impl RawObject {
    pub fn json(&self) -> &str {
        self.json.get()
    }

    /// Wraps JSON text for a request body.
    pub fn from_json(json: String) -> Result<Self, serde_json::Error> {
        serde_json::from_str(&json)
    }

    /// Converts into a cache entry of `resource`. `metadata.managedFields` is dropped first: it
    /// is often a third of an object, plugins have no use for it, and controller-runtime's
    /// caches offer the same trim. An object from a list response gets the `apiVersion` and
    /// `kind` the API server leaves out of list items: a plugin is always handed whole objects,
    /// however the informer came by them.
    pub fn into_cached(self, resource: &Gvk) -> Result<ParsedObject, ParseError> {
        let json: Arc<str> = if !self.typed || self.json.get().contains("\"managedFields\"") {
            let mut value: serde_json::Value = serde_json::from_str(self.json.get()).map_err(ParseError::Metadata)?;
            if let Some(object) = value.as_object_mut() {
                if let Some(meta) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                    meta.remove("managedFields");
                }
                object.entry("apiVersion").or_insert_with(|| resource.api_version().into());
                object.entry("kind").or_insert_with(|| resource.kind.clone().into());
            }
            value.to_string().into()
        } else {
            Box::<str>::from(self.json).into()
        };
        ParsedObject::from_json(json)
    }
}

/// An object as a metadata-only watch reports it: `metadata` alone, typed as the API server's
/// `meta.k8s.io/v1` `PartialObjectMetadata`.
pub type RawMetadata = PartialObjectMeta<RawObject>;

impl RawObject {
    /// What a metadata-only watch reported, as an object of `resource` holding `apiVersion`,
    /// `kind` and `metadata` (without `managedFields`): what a plugin declaring the kind
    /// metadata-only is handed, whichever watch the host keeps of it.
    pub fn from_metadata(partial: RawMetadata, resource: &Gvk) -> Result<Self, serde_json::Error> {
        #[derive(Serialize)]
        struct Head<'a> {
            #[serde(rename = "apiVersion")]
            api_version: &'a str,
            kind: &'a str,
            metadata: &'a ObjectMeta,
        }
        let mut metadata = partial.metadata;
        metadata.managed_fields = None;
        let api_version = resource.api_version();
        RawObject::from_json(serde_json::to_string(&Head { api_version: &api_version, kind: &resource.kind, metadata: &metadata })?)
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct Meta {
            name: Option<String>,
            namespace: Option<String>,
            resource_version: Option<String>,
            uid: Option<String>,
        }
        #[derive(Deserialize)]
        struct Head {
            #[serde(default)]
            metadata: Meta,
            #[serde(rename = "apiVersion", default)]
            api_version: Option<serde::de::IgnoredAny>,
            #[serde(default)]
            kind: Option<serde::de::IgnoredAny>,
        }
        let json = Box::<RawValue>::deserialize(d)?;
        let head = serde_json::from_str::<Head>(json.get()).map_err(serde::de::Error::custom)?;
        let typed = head.api_version.is_some() && head.kind.is_some();
        let meta = head.metadata;
        let metadata = ObjectMeta { name: meta.name, namespace: meta.namespace, resource_version: meta.resource_version, uid: meta.uid, ..Default::default() };
        Ok(RawObject { metadata, json, typed })
    }
}

impl Serialize for RawObject {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

impl Resource for RawObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_text_and_drops_managed_fields() {
        let json = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"7","managedFields":[{"manager":"kubectl"}],"labels":{"x":"y"}},"data":{"k":"v"}}"#;
        let raw = RawObject::from_json(json.into()).unwrap();
        assert_eq!(raw.meta().resource_version.as_deref(), Some("7"));
        assert_eq!(raw.json(), json);
        assert_eq!(serde_json::to_string(&raw).unwrap(), json);
        let cached = raw.into_cached(&Gvk::new("", "v1", "ConfigMap")).unwrap();
        assert!(!cached.entry.json().contains("managedFields"));
        assert!(cached.entry.json().contains(r#""data":{"k":"v"}"#));
        assert_eq!(cached.entry.label("x"), Some("y"));
    }

    #[test]
    fn list_items_get_their_api_version_and_kind() {
        let item = r#"{"metadata":{"name":"a","namespace":"ns","resourceVersion":"7"},"data":{"k":"v"}}"#;
        let cached = RawObject::from_json(item.into()).unwrap().into_cached(&Gvk::new("apps", "v1", "Deployment")).unwrap();
        let value: serde_json::Value = serde_json::from_str(cached.entry.json()).unwrap();
        assert_eq!(value["apiVersion"], "apps/v1");
        assert_eq!(value["kind"], "Deployment");
        assert_eq!(value["data"]["k"], "v");
        let whole = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#;
        let cached = RawObject::from_json(whole.into()).unwrap().into_cached(&Gvk::new("", "v1", "ConfigMap")).unwrap();
        assert_eq!(&**cached.entry.json(), whole, "a whole object is kept as it came");
    }

    #[test]
    fn a_metadata_only_object_is_named_as_its_kind_without_managed_fields() {
        let partial: RawMetadata = serde_json::from_str(
            r#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"name":"a","namespace":"ns","resourceVersion":"7","labels":{"x":"y"},"managedFields":[{"manager":"kubectl"}]}}"#,
        )
        .unwrap();
        let raw = RawObject::from_metadata(partial, &Gvk::new("apps", "v1", "Deployment")).unwrap();
        let value: serde_json::Value = serde_json::from_str(raw.json()).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7", "labels": {"x": "y"}}})
        );
        assert_eq!(raw.meta().resource_version.as_deref(), Some("7"), "the watcher resumes from its version");
    }

    #[test]
    fn bookmarks_decode() {
        let raw = RawObject::from_json(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12"}}"#.into()).unwrap();
        assert_eq!(raw.meta().resource_version.as_deref(), Some("12"));
    }
}
