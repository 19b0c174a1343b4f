//! The reconcile logic the runtime benchmark measures, written once and compiled twice: natively
//! into the benchmark, and into the `bench-guest` plugin. It parses the primary object (a
//! ConfigMap), reads one related object from the cache, and applies one derived object.

use std::collections::BTreeMap;

use serde::Deserialize;

/// What the logic needs from its host.
pub trait Host {
    /// A cached object's JSON text.
    fn get(&self, namespace: &str, name: &str) -> Option<String>;
    /// Server-side applies an object given as JSON text.
    fn apply(&self, object: String) -> Result<(), String>;
}

#[derive(Deserialize)]
struct ConfigMap {
    metadata: Metadata,
    #[serde(default)]
    data: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
    namespace: String,
    uid: String,
}

pub fn reconcile(object: &str, host: &impl Host) -> Result<(), String> {
    let primary: ConfigMap = serde_json::from_str(object).map_err(|e| e.to_string())?;
    let meta = &primary.metadata;
    let settings = host.get(&meta.namespace, "bench-settings").ok_or("bench-settings is not cached")?;
    let settings: ConfigMap = serde_json::from_str(&settings).map_err(|e| e.to_string())?;
    let prefix = settings.data.get("prefix").map(String::as_str).unwrap_or("out");
    let bytes: usize = primary.data.values().map(String::len).sum();
    let derived = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": format!("{prefix}-{}", meta.name),
            "namespace": meta.namespace,
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": meta.name, "uid": meta.uid, "controller": true}],
        },
        "data": {"keys": primary.data.len().to_string(), "bytes": bytes.to_string()},
    });
    host.apply(derived.to_string())
}
