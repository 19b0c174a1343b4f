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
        let json: Arc<str> = if self.typed && !self.json.get().contains("\"managedFields\"") {
            // Nothing to cut or add: kept as it came, without a parse.
            Box::<str>::from(self.json).into()
        } else if let Some(trimmed) = trimmed_in_place(self.json.get(), self.typed, resource) {
            trimmed.as_str().into()
        } else {
            // Text no API server writes (an escaped key, duplicate members): the slow way.
            let mut value: serde_json::Value = serde_json::from_str(self.json.get()).map_err(ParseError::Metadata)?;
            if let Some(object) = value.as_object_mut() {
                if let Some(meta) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                    meta.remove("managedFields");
                }
                object.entry("apiVersion").or_insert_with(|| resource.api_version().into());
                object.entry("kind").or_insert_with(|| resource.kind.clone().into());
            }
            value.to_string().into()
        };
        ParsedObject::from_json(json)
    }
}

/// What [`RawObject::into_cached`] makes of `json`, made by cutting and splicing its text, as
/// an API server writes it: `metadata.managedFields` cut out, and for a list item (not `typed`)
/// `apiVersion` and `kind` put first. No tree of the object is built, and no other byte of it
/// changes. `None` when there is nothing to do or the text is not that plain (then the caller
/// takes the slow way through a `Value`).
fn trimmed_in_place(json: &str, typed: bool, resource: &Gvk) -> Option<String> {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        metadata: Option<&'a RawValue>,
        #[serde(rename = "apiVersion", default)]
        api_version: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        kind: Option<serde::de::IgnoredAny>,
    }
    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(rename = "managedFields", borrow)]
        managed_fields: Option<&'a RawValue>,
    }
    let head: Head = serde_json::from_str(json).ok()?;
    let typing = match (typed, head.api_version.is_some(), head.kind.is_some()) {
        (true, ..) => None,
        (false, false, false) => {
            Some(format!("\"apiVersion\":{},\"kind\":{},", serde_json::to_string(&resource.api_version()).ok()?, serde_json::to_string(&resource.kind).ok()?))
        }
        // One of the two present: rare enough for the slow way.
        (false, ..) => return None,
    };
    let managed = serde_json::from_str::<Meta>(head.metadata?.get()).ok()?.managed_fields;
    let (from, to) = match managed {
        Some(value) => {
            let start = value.get().as_ptr() as usize - json.as_ptr() as usize;
            let end = start + value.get().len();
            let key = json[..start].trim_end().strip_suffix(':')?.trim_end().strip_suffix("\"managedFields\"")?.len();
            match json[..key].trim_end().strip_suffix(',') {
                // After another member: cut from its comma.
                Some(before) => (before.len(), end),
                // The first member: cut through the comma after it, if any.
                None => {
                    let after = json[end..].trim_start();
                    (key, after.strip_prefix(',').map_or(end, |rest| json.len() - rest.len()))
                }
            }
        }
        None if typing.is_some() => (json.len(), json.len()),
        None => return None,
    };
    let body = json.strip_prefix('{')?;
    let typing = typing.unwrap_or_default();
    let mut out = String::with_capacity(json.len() + typing.len() - (to - from));
    out.push('{');
    out.push_str(&typing);
    out.push_str(&body[..from - 1]);
    out.push_str(&json[to..]);
    Some(out)
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

    /// The text cut and spliced is the text the slow way (a `Value` tree) gives, member for
    /// member, wherever `managedFields` stands and however the text is spaced.
    #[test]
    fn trimming_in_place_gives_what_the_tree_gives() {
        let deployment = Gvk::new("apps", "v1", "Deployment");
        let slow = |json: &str, typed: bool| {
            let mut value: serde_json::Value = serde_json::from_str(json).unwrap();
            let object = value.as_object_mut().unwrap();
            object["metadata"].as_object_mut().unwrap().remove("managedFields");
            if !typed {
                object.insert("apiVersion".into(), "apps/v1".into());
                object.insert("kind".into(), "Deployment".into());
            }
            value
        };
        let mf = r#""managedFields": [{"manager":"kubectl","fieldsV1":{"f:metadata":{}}}]"#;
        let metas = [
            format!(r#"{{"name":"a",{mf},"labels":{{"x":"y"}}}}"#),
            format!(r#"{{{mf},"name":"a"}}"#),
            format!(r#"{{ {mf} , "name":"a" }}"#),
            format!(r#"{{"name":"a" , {mf} }}"#),
            format!(r#"{{{mf}}}"#),
            r#"{"name":"a"}"#.to_string(),
        ];
        for meta in &metas {
            for (typed, head) in [(true, r#""apiVersion":"apps/v1","kind":"Deployment","#), (false, "")] {
                let json = format!(r#"{{{head}"metadata":{meta},"spec":{{"managedFields":1}}}}"#);
                let Some(cut) = trimmed_in_place(&json, typed, &deployment) else {
                    assert!(typed && !json.contains(r#""managedFields": ["#), "only an object with nothing to do takes no cut: {json}");
                    continue;
                };
                let cut: serde_json::Value = serde_json::from_str(&cut).unwrap_or_else(|e| panic!("{cut} from {json}: {e}"));
                assert_eq!(cut, slow(&json, typed), "{json}");
            }
        }
        // Text an API server does not write goes the slow way.
        assert!(trimmed_in_place(r#"{"metadata":{"managed\u0046ields":[]}}"#, true, &deployment).is_none());
        assert!(trimmed_in_place(r#"{"kind":"Deployment","metadata":{}}"#, false, &deployment).is_none());
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
