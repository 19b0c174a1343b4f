//! Metacontroller's configmappropagation example as a kubewasm declarative plugin, in Rust: the
//! twin of `../python`, answering the same (the end-to-end suite checks that both make the same
//! objects).
//!
//! A ConfigMapPropagation (examples.metacontroller.io/v1alpha1, cluster-scoped) names a source
//! ConfigMap (`spec.sourceNamespace` / `spec.sourceName`) and the namespaces it is copied into
//! (`spec.targetNamespaces`). For each propagation labelled `version=v1` the plugin answers one
//! ConfigMap per target namespace, named as the source and holding its `data`, and a status
//! counting the copies expected and the copies the propagation has; the host applies the copies
//! (in place when the source changes), deletes those no longer wanted, and writes the status.
//! While the source does not exist, no copy is wanted.

use kubewasm_sdk::k8s_openapi::api::core::v1::ConfigMap;
use kubewasm_sdk::prelude::*;
use kubewasm_sdk::serde_json::{Value, json};

struct ConfigMapPropagation;

/// The source ConfigMap's namespace and name, as the propagation names them.
fn source(parent: &DynamicObject) -> (String, String) {
    let field = |name: &str| parent.data.get("spec").and_then(|s| s.get(name)).and_then(Value::as_str).unwrap_or_default().to_string();
    (field("sourceNamespace"), field("sourceName"))
}

impl Composite for ConfigMapPropagation {
    type Parent = DynamicObject;
    type Settings = ();

    fn new(_: ()) -> Result<Self, String> {
        Ok(ConfigMapPropagation)
    }

    fn manifest(&self) -> Manifest {
        Manifest::new("configmap-propagation", "0.1.0")
            // Metacontroller's parentResource, with its labelSelector.
            .primary_gvk(&Gvk::new("examples.metacontroller.io", "v1alpha1", "ConfigMapPropagation"))
            .primary_selector("version=v1")
            // childResources: ConfigMaps, updated in place (the generated selector is the default).
            .child::<ConfigMap>(UpdateStrategy::InPlace)
            // A change of a source ConfigMap syncs the propagations whose customize rule names it.
            .watches::<ConfigMap>(Mapping::MapRelated)
    }

    fn customize(&self, parent: &DynamicObject, _: &Context) -> kubewasm_sdk::Result<Vec<RelatedRule>> {
        let (namespace, name) = source(parent);
        if namespace.is_empty() || name.is_empty() {
            // The CRD requires both; without them there is nothing to copy.
            return Ok(Vec::new());
        }
        Ok(vec![RelatedRule::named::<ConfigMap>(Some(&namespace), &[&name])])
    }

    fn sync(&self, request: &SyncRequest<DynamicObject>, ctx: &Context) -> kubewasm_sdk::Result<SyncResponse> {
        let parent = &request.parent;
        let (namespace, name) = source(parent);
        let targets: Vec<String> = parent
            .data
            .get("spec")
            .and_then(|s| s.get("targetNamespaces"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(Into::into)
            .collect();
        let status = json!({"expected_copies": targets.len(), "actual_copies": request.children::<ConfigMap>()?.len()});
        let source = request.related::<ConfigMap>()?.into_iter().find(|cm| cm.namespace() == Some(namespace.as_str()) && cm.name() == name);
        let Some(source) = source else {
            ctx.info(&format!("no source ConfigMap {namespace}/{name}: no copies"));
            return Ok(SyncResponse::new().status(status));
        };
        let data = source.data.unwrap_or_default();
        let copies =
            targets.iter().map(|target| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": target}, "data": data}));
        Ok(SyncResponse::new().status(status).children(copies))
    }
}

kubewasm_sdk::export_composite!(ConfigMapPropagation);
