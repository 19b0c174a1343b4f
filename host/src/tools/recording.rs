//! `kubewasm record`: turns what a plugin sees and does for chosen objects into table-test
//! cases, so that an incident becomes a regression case in one command. The objects the plugin
//! may read are listed from the cluster (as the caller of the command) and cached as the host
//! caches them (without `managedFields`); the plugin reconciles each chosen key against that
//! snapshot the way `kubewasm test` runs it (writes stored in the snapshot, never sent; the wall
//! clock stopped at the time of the recording), and a journal of the call
//! ([`crate::runtime::journal`]) says which objects it read. The case holds those objects (the
//! primary first), the key, the time as `now`, and as expectations the calls, Events and result
//! of the plugin run once more on the case's own cache — which is what `kubewasm test` does, so
//! the case replays green against the version it was recorded from (resourceVersions the
//! plugin's writes are answered with count from the case's objects, not the cluster's), and
//! `kubewasm test NEW.wasm DIR` checks a new version against it. Secrets' values are never
//! written out (each becomes an empty string; the keys stay).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::case;
use crate::discovery::{Discovery, DiscoveryError};
use crate::informer::ParsedObject;
use crate::informer::raw::RawObject;
use crate::metrics::PluginMetrics;
use crate::plugin::LoadedPlugin;
use crate::resource::{Gvk, ObjectKey};
use crate::runtime::host::Clock;
use crate::runtime::journal::{Journal, Read};
use crate::runtime::{Request, Runtime};
use crate::tools::offline::{FixtureCache, Recorder};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Resolve(#[from] DiscoveryError),
    #[error("cannot list {0}: {1}")]
    List(Gvk, #[source] kube::Error),
    #[error("{0}: {1}")]
    Object(Gvk, String),
    #[error("{key} is not a {primary} in the cluster (give NAMESPACE/NAME, or NAME for a cluster-scoped kind)")]
    NotFound { key: ObjectKey, primary: Gvk },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Records one case per key into `dir`; returns the files written.
pub async fn record(runtime: &Runtime, plugin: &LoadedPlugin, client: kube::Client, keys: &[ObjectKey], dir: &Path) -> Result<Vec<PathBuf>, RecordError> {
    let manifest = &plugin.described.manifest;
    let discovery = Discovery::new(client.clone(), Duration::from_secs(30));
    let mut listed = Vec::new();
    for resource in manifest.cached_resources() {
        let resolved = discovery.resolve(resource).await?;
        let list =
            Api::<RawObject>::all_with(client.clone(), &resolved.api).list(&ListParams::default()).await.map_err(|e| RecordError::List(resource.clone(), e))?;
        let objects: Result<Vec<ParsedObject>, _> = list.items.into_iter().map(|object| object.into_cached(resource)).collect();
        listed.push((resource.clone(), resolved.scope, objects.map_err(|e| RecordError::Object(resource.clone(), e.to_string()))?));
    }
    std::fs::create_dir_all(dir).map_err(|source| RecordError::Write { path: dir.into(), source })?;
    let mut written = Vec::new();
    for key in keys {
        // Each key against the cluster as listed, not as an earlier key's writes left it.
        let mut cache = FixtureCache::default();
        for (resource, scope, objects) in &listed {
            cache.add_resource(resource.clone(), *scope);
            for object in objects {
                cache.insert_parsed(resource, object.clone());
            }
        }
        // The primary as the cache holds it: the request hands it as the plugin reads it.
        let object = cache.view().get(&manifest.primary, key).ok_or_else(|| RecordError::NotFound { key: key.clone(), primary: manifest.primary.clone() })?;
        cache.hand_as(manifest);
        let now = stopped_clock();
        let recorder = Arc::new(Recorder::default());
        let mut services = crate::tools::offline::services(&cache, &recorder, crate::tools::offline::Writes::Stored);
        services.clock = Clock::Fixed(now);
        let journal = Journal::new(services);
        let runner = runtime.runner(plugin.prepared.clone(), &plugin.described, journal.services(), PluginMetrics::default(), &plugin.settings);
        runner.reconcile(Request { key: key.clone(), object: object.clone(), retries: 0 }).await.ok();
        let entries = journal.entries();

        // The primary, then every object a read returned, once each.
        let mut seen = BTreeSet::new();
        let mut objects = Vec::new();
        let mut add = |resource: &Gvk, key: &ObjectKey, json: &str| {
            if seen.insert((resource.to_string(), key.clone())) {
                objects.push(cached(json));
            }
        };
        add(&manifest.primary, key, &object);
        for read in &entries.reads {
            match read {
                Read::Get { resource, key, answer: Some(json) } => add(resource, key, json),
                Read::List { resource, answer: Ok(items), .. } | Read::Children { resource, answer: items, .. } => {
                    items.iter().for_each(|(key, json)| add(resource, key, json))
                }
                Read::Live { resource, key, answer: Some(Some(json)) } => add(resource, key, json),
                _ => {}
            }
        }
        // Once more, on the case's own cache: the expectations are what `kubewasm test` will see.
        let cache = crate::tools::tabletest::fixture(manifest, &objects).map_err(|e| RecordError::Object(manifest.primary.clone(), e))?;
        let recorder = Arc::new(Recorder::default());
        let mut services = crate::tools::offline::services(&cache, &recorder, crate::tools::offline::Writes::Stored);
        services.clock = Clock::Fixed(now);
        let runner = runtime.runner(plugin.prepared.clone(), &plugin.described, services, PluginMetrics::default(), &plugin.settings);
        let primary = cache.view().get(&manifest.primary, key).unwrap_or_else(|| object.clone());
        let result = runner.reconcile(Request { key: key.clone(), object: primary, retries: 0 }).await;
        let calls: Vec<Value> = recorder.writes().iter().map(case::redacted_call).collect();
        let events: Vec<Value> = recorder.events().iter().map(case::event).collect();
        let version_seen = object_field(&object, "resourceVersion");
        let spec = match key.namespace() {
            Some(ns) => json!({"namespace": ns, "name": key.name()}),
            None => json!({"name": key.name()}),
        };
        let case = json!({
            "description": format!("{} {key} at resourceVersion {version_seen}, recorded with {} {} by kubewasm record", manifest.primary.kind, manifest.name, manifest.version),
            "now": k8s_openapi::jiff::Timestamp::try_from(now).map(|t| t.to_string()).unwrap_or_default(),
            "cache": objects,
            "reconcile": spec,
            "expect": {"result": case::result(&result), "calls": calls, "events": events},
        });
        let text = serde_saphyr::to_string(&case).map_err(|e| RecordError::Object(manifest.primary.clone(), e.to_string()))?;
        let path = dir.join(format!("{}.yaml", key.to_string().replace('/', "-")));
        std::fs::write(&path, text).map_err(|source| RecordError::Write { path: path.clone(), source })?;
        written.push(path);
    }
    Ok(written)
}

/// Now, in whole seconds: the time a recorded case's plugin reads, as its `now` spells it.
fn stopped_clock() -> SystemTime {
    let seconds = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

fn object_field(json: &str, field: &str) -> String {
    serde_json::from_str::<Value>(json).ok().and_then(|v| v["metadata"][field].as_str().map(String::from)).unwrap_or_default()
}

/// A cached object as a case holds it: without the server's bookkeeping of field owners, and
/// with a Secret's values emptied.
fn cached(json: &str) -> Value {
    let mut object: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    case::redacted_object(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_values_are_never_written_out() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "managedFields": [{}]}, "data": {"password": "aHVudGVyMg=="}, "stringData": {"token": "t"}});
        let object = cached(&secret.to_string());
        assert_eq!(object["data"], json!({"password": ""}));
        assert_eq!(object["stringData"], json!({"token": ""}));
        assert!(object["metadata"].get("managedFields").is_none());
        let secret_write = |op| crate::client::WriteRequest { resource: Gvk::new("", "v1", "Secret"), namespace: Some("ns".into()), name: "s".into(), op };
        let call = case::redacted_call(&secret_write(crate::client::WriteOp::Apply { object: secret.clone(), force: true, status: false }));
        assert_eq!(call["apply"]["data"]["password"], "");
        let merge = crate::client::WriteOp::Patch { patch_type: crate::client::PatchKind::Merge, body: json!({"data": {"k": "c2VjcmV0"}}) };
        assert_eq!(case::redacted_call(&secret_write(merge))["patch"]["body"]["data"]["k"], "");
        // A JSON patch: an array of operations, each with its own path.
        let ops = json!([
            {"op": "add", "path": "/data/k", "value": "c2VjcmV0"},
            {"op": "replace", "path": "/stringData", "value": {"t": "plain"}},
            {"op": "add", "path": "", "value": {"data": {"x": "eA=="}}},
            {"op": "add", "path": "/metadata/labels/a", "value": "kept"},
        ]);
        let json_patch = case::redacted_call(&secret_write(crate::client::WriteOp::Patch { patch_type: crate::client::PatchKind::Json, body: ops }));
        let text = json_patch.to_string();
        for value in ["c2VjcmV0", "plain", "eA=="] {
            assert!(!text.contains(value), "{value} in {text}");
        }
        assert!(text.contains("kept"), "{text}");
        let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}});
        assert_eq!(case::redacted_object(configmap.clone()), configmap, "other kinds keep their data");
    }
}
