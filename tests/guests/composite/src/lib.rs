//! The declarative suite's plugin (`tests/e2e/declarative.rs`): a declarative controller of the
//! kind its settings name (in `e2e.kubewasm.io/v1`) with ConfigMap children, whose parents spell
//! out the answer, so one build serves every test:
//!
//! - `spec.children`: the desired children, returned as they are;
//! - `spec.status`: the status (the plugin adds `observed`: the names of the ConfigMaps it was
//!   handed, and `related`: the names of the related objects);
//! - `spec.related`: `customize` rules (`namespace`, `names`, `labelSelector`) over ConfigMaps;
//!   with `spec.copyRelated`, each related ConfigMap is also desired as a child `<name>-copy`
//!   holding its data;
//! - `spec.resyncAfterMs`; `spec.fail`: `sync` fails with this message; `spec.panic`: it panics
//!   (a fault);
//! - when finalizing: `spec.finalizeChildren` (none by default) and `spec.finalized` (true by
//!   default).
//!
//! Settings choose the name, the parent kind, the update strategy of the ConfigMaps, the child
//! selector, a finalizer, and a suffix appended to every child's name (another version's answer,
//! for shadow runs).

use std::time::Duration;

use kubewasm_sdk::k8s_openapi::api::core::v1::ConfigMap;
use kubewasm_sdk::prelude::*;
use kubewasm_sdk::serde_json::{Value, json};

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
struct Settings {
    name: Option<String>,
    /// The parent kind in `e2e.kubewasm.io/v1` (default `Composite`).
    kind: Option<String>,
    /// `on-delete` (default), `recreate` or `in-place`.
    strategy: Option<String>,
    /// `generated` (default) or `spec`.
    selector: Option<String>,
    finalizer: Option<String>,
    suffix: Option<String>,
}

struct Echo {
    settings: Settings,
}

fn spec<'a>(parent: &'a DynamicObject, field: &str) -> Option<&'a Value> {
    parent.data.get("spec").and_then(|s| s.get(field))
}

impl Composite for Echo {
    type Parent = DynamicObject;
    type Settings = Settings;

    fn new(settings: Settings) -> Result<Self, String> {
        Ok(Echo { settings })
    }

    fn manifest(&self) -> Manifest {
        let s = &self.settings;
        let strategy = match s.strategy.as_deref() {
            None | Some("on-delete") => UpdateStrategy::OnDelete,
            Some("recreate") => UpdateStrategy::Recreate,
            Some("in-place") => UpdateStrategy::InPlace,
            Some(other) => panic!("strategy {other:?}"),
        };
        let selector = if s.selector.as_deref() == Some("spec") { ChildSelector::ParentSpecSelector } else { ChildSelector::Generated };
        let parent = Gvk::new("e2e.kubewasm.io", "v1", s.kind.as_deref().unwrap_or("Composite"));
        let mut manifest = Manifest::new(s.name.as_deref().unwrap_or("composite"), "0.1.0")
            .primary_gvk(&parent)
            .child::<ConfigMap>(strategy)
            .child_selector(selector)
            .watches_gvk(&Gvk::new("", "v1", "ConfigMap"), Mapping::MapRelated, Some("e2e.kubewasm.io/related"));
        if let Some(finalizer) = &s.finalizer {
            manifest = manifest.finalizer(finalizer);
        }
        manifest
    }

    fn customize(&self, parent: &DynamicObject, _: &Context) -> kubewasm_sdk::Result<Vec<RelatedRule>> {
        let rules = spec(parent, "related").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(rules
            .iter()
            .map(|r| RelatedRule {
                resource: Gvk::new("", "v1", "ConfigMap"),
                namespace: r["namespace"].as_str().map(Into::into),
                names: r["names"].as_array().into_iter().flatten().filter_map(Value::as_str).map(Into::into).collect(),
                label_selector: r["labelSelector"].as_str().map(Into::into),
            })
            .collect())
    }

    fn sync(&self, request: &SyncRequest<DynamicObject>, _: &Context) -> kubewasm_sdk::Result<SyncResponse> {
        let parent = &request.parent;
        if let Some(message) = spec(parent, "panic").and_then(Value::as_str) {
            panic!("{message}");
        }
        if let Some(message) = spec(parent, "fail").and_then(Value::as_str) {
            return Err(Error::new(ErrorCode::Other, message));
        }
        let observed: Vec<String> = request.children::<ConfigMap>()?.iter().map(|c| c.metadata.name.clone().unwrap_or_default()).collect();
        let related: Vec<ConfigMap> = request.related::<ConfigMap>()?;
        let mut status = spec(parent, "status").cloned().unwrap_or_else(|| json!({}));
        status["observed"] = json!(observed);
        status["related"] = json!(related.iter().map(|c| c.metadata.name.clone().unwrap_or_default()).collect::<Vec<_>>());
        let mut answer = SyncResponse::new().status(status);
        for child in spec(parent, "children").and_then(Value::as_array).into_iter().flatten() {
            let mut child = child.clone();
            if let (Some(suffix), Some(name)) = (&self.settings.suffix, child.pointer("/metadata/name").and_then(Value::as_str)) {
                child["metadata"]["name"] = json!(format!("{name}{suffix}"));
            }
            answer = answer.child(child);
        }
        if spec(parent, "copyRelated").and_then(Value::as_bool) == Some(true) {
            for source in &related {
                let name = format!("{}-copy", source.metadata.name.as_deref().unwrap_or_default());
                answer = answer.child(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": source.data}));
            }
        }
        if let Some(ms) = spec(parent, "resyncAfterMs").and_then(Value::as_u64) {
            answer = answer.resync_after(Duration::from_millis(ms));
        }
        Ok(answer)
    }

    fn finalize(&self, request: &SyncRequest<DynamicObject>, _: &Context) -> kubewasm_sdk::Result<SyncResponse> {
        let parent = &request.parent;
        let done = spec(parent, "finalized").and_then(Value::as_bool).unwrap_or(true);
        let children = spec(parent, "finalizeChildren").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(SyncResponse::new().status(json!({"finalizing": true})).children(children).finalized(done).resync_after(Duration::from_secs(1)))
    }
}

kubewasm_sdk::export_composite!(Echo);
