//! The object type the kube watcher decodes into: the JSON text as received, plus the few
//! metadata fields the watcher itself needs. No `serde_json::Value` tree is ever built for a
//! watched object.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::store::{ParseError, ParsedObject};

/// An object as JSON text.
#[derive(Clone, Debug)]
pub struct RawObject {
    metadata: ObjectMeta,
    json: Box<RawValue>,
}

impl RawObject {
    pub fn json(&self) -> &str {
        self.json.get()
    }

    /// Wraps JSON text for a request body.
    pub fn from_json(json: String) -> Result<Self, serde_json::Error> {
        serde_json::from_str(&json)
    }

    /// Converts into a cache entry. `metadata.managedFields` is dropped first: it is often a
    /// third of an object, plugins have no use for it, and controller-runtime's caches offer the
    /// same trim.
    pub fn into_cached(self) -> Result<ParsedObject, ParseError> {
        let json: Arc<str> = if self.json.get().contains("\"managedFields\"") {
            let mut value: serde_json::Value = serde_json::from_str(self.json.get()).map_err(ParseError::Metadata)?;
            if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                meta.remove("managedFields");
            }
            value.to_string().into()
        } else {
            Box::<str>::from(self.json).into()
        };
        ParsedObject::from_json(json)
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
        }
        let json = Box::<RawValue>::deserialize(d)?;
        let meta = serde_json::from_str::<Head>(json.get()).map_err(serde::de::Error::custom)?.metadata;
        let metadata = ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            resource_version: meta.resource_version,
            uid: meta.uid,
            ..Default::default()
        };
        Ok(RawObject { metadata, json })
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
        let cached = raw.into_cached().unwrap();
        assert!(!cached.entry.json().contains("managedFields"));
        assert!(cached.entry.json().contains(r#""data":{"k":"v"}"#));
        assert_eq!(cached.entry.label("x"), Some("y"));
    }

    #[test]
    fn bookmarks_decode() {
        let raw = RawObject::from_json(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12"}}"#.into()).unwrap();
        assert_eq!(raw.meta().resource_version.as_deref(), Some("12"));
    }
}
