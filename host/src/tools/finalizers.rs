//! Finalizers a removed plugin left behind, and the way out: `kubewasm finalizers release NAME`
//! finds what the host recorded for the plugin in its status ConfigMap (its finalizer and
//! primary kind) and takes that finalizer off every object of the kind that still carries it,
//! so that objects stuck Terminating go away. Only a removed plugin's record counts. A one-shot
//! operator command, run with the operator's own credentials.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};

use crate::discovery::Discovery;
use crate::informer::raw::RawObject;
use crate::resource::{Gvk, ObjectKey, Scope};

/// A finalizer left on objects of a kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub finalizer: String,
    pub primary: Gvk,
}

#[derive(Debug, thiserror::Error)]
pub enum FinalizersError {
    #[error("cannot read the status ConfigMap {0}: {1}")]
    Status(String, #[source] kube::Error),
    #[error(
        "the status ConfigMap {configmap} records no finalizer left by plugin {plugin:?} (it records one only when a plugin is removed while objects carry its finalizer); name it with --finalizer and --resource"
    )]
    NotRecorded { configmap: String, plugin: String },
    #[error(
        "plugin {plugin:?} is not removed: the status ConfigMap {configmap} lists it as {entry:?}. Only a removed plugin's finalizer is released (a running plugin removes its own); name one with --finalizer and --resource"
    )]
    NotRemoved { configmap: String, plugin: String, entry: String },
    #[error(transparent)]
    Resolve(#[from] crate::discovery::DiscoveryError),
    #[error("cannot list {0}: {1}")]
    List(Gvk, #[source] kube::Error),
    #[error("cannot patch {0} {1}: {2}")]
    Patch(Gvk, ObjectKey, #[source] kube::Error),
}

/// What the host recorded about `plugin`'s finalizer when it was removed.
pub async fn recorded(client: &kube::Client, namespace: &str, name: &str, plugin: &str) -> Result<Leftover, FinalizersError> {
    let configmap = format!("{namespace}/{name}");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let status = api.get(name).await.map_err(|e| FinalizersError::Status(configmap.clone(), e))?;
    let entry = status.data.as_ref().and_then(|d| d.get(plugin)).map(String::as_str);
    leftover_of(entry).map_err(|unusable| match unusable {
        Unusable::NotRecorded => FinalizersError::NotRecorded { configmap, plugin: plugin.into() },
        Unusable::NotRemoved => FinalizersError::NotRemoved { configmap, plugin: plugin.into(), entry: entry.unwrap_or_default().chars().take(256).collect() },
    })
}

/// Why a status entry names no finalizer to release.
#[derive(Debug, PartialEq, Eq)]
enum Unusable {
    NotRecorded,
    NotRemoved,
}

/// The finalizer a plugin's status entry records as left behind. Only the entry of a removed
/// plugin (`state=removed`) counts, which the host writes itself from checked values. A running
/// plugin's entry carries its version and must never be read as one (a version such as
/// `0 primary=Pod.v1 finalizer=...` would then aim the release at another controller's
/// finalizer, with the operator's credentials).
fn leftover_of(entry: Option<&str>) -> Result<Leftover, Unusable> {
    let entry = entry.ok_or(Unusable::NotRecorded)?;
    // `status::removed_entry` leads with it; no running plugin's entry does.
    if !entry.starts_with("state=removed ") {
        return Err(Unusable::NotRemoved);
    }
    let fields = crate::supervisor::status::parse_entry(entry);
    let finalizer = fields.get("finalizer").ok_or(Unusable::NotRecorded)?;
    let primary = fields.get("primary").and_then(|p| p.parse().ok()).ok_or(Unusable::NotRecorded)?;
    Ok(Leftover { finalizer: finalizer.to_string(), primary })
}

/// Removes the finalizer from every object of its kind that carries it; returns their keys.
/// Each patch tests the finalizers it read (a JSON patch `test`), so a concurrent change is
/// never overwritten; such an object is read again and retried.
pub async fn release(client: &kube::Client, leftover: &Leftover) -> Result<Vec<ObjectKey>, FinalizersError> {
    let discovery = Discovery::new(client.clone(), crate::client::DEFAULT_REQUEST_TIMEOUT);
    let resolved = discovery.resolve(&leftover.primary).await?;
    let all: Api<RawObject> = Api::all_with(client.clone(), &resolved.api);
    let list = all.list(&ListParams::default()).await.map_err(|e| FinalizersError::List(leftover.primary.clone(), e))?;
    let mut released = Vec::new();
    for item in list.items {
        let object = item.into_cached(&leftover.primary).map(|o| (o.key, o.entry.json().clone()));
        let Ok((key, json)) = object else { continue };
        let api: Api<RawObject> = match (resolved.scope, key.namespace()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resolved.api),
            _ => Api::all_with(client.clone(), &resolved.api),
        };
        let mut finalizers = crate::controller::finalizers_of(&json);
        for attempt in 0..5 {
            if !finalizers.contains(&leftover.finalizer) {
                break;
            }
            let rest: Vec<&String> = finalizers.iter().filter(|f| **f != leftover.finalizer).collect();
            let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
                {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                {"op": "replace", "path": "/metadata/finalizers", "value": rest},
            ]))
            .expect("a valid JSON patch");
            match api.patch(key.name(), &PatchParams::default(), &Patch::<()>::Json(patch)).await {
                Ok(_) => {
                    released.push(key.clone());
                    break;
                }
                // Changed meanwhile (the test failed) or gone: read it again.
                Err(kube::Error::Api(status)) if (status.code == 422 || status.code == 409) && attempt < 4 => {
                    match api.get_opt(key.name()).await.map_err(|e| FinalizersError::Patch(leftover.primary.clone(), key.clone(), e))? {
                        Some(fresh) => finalizers = crate::controller::finalizers_of(fresh.json()),
                        None => break,
                    }
                }
                Err(kube::Error::Api(status)) if status.code == 404 => break,
                Err(e) => return Err(FinalizersError::Patch(leftover.primary.clone(), key.clone(), e)),
            }
        }
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::status::{removed_entry, running_entry};

    #[test]
    fn only_a_removed_plugins_entry_names_a_finalizer_to_release() {
        let read = |entry: &str| leftover_of(Some(entry));
        let foo = Gvk::new("example.com", "v1", "Foo");
        let removed = read(&removed_entry("example.com/cleanup", &foo, 3)).unwrap();
        assert_eq!(removed, Leftover { finalizer: "example.com/cleanup".into(), primary: foo });
        // What a version with spaces and `=` once made of a running plugin's entry.
        let forged = running_entry("0 primary=Pod.v1 finalizer=batch.kubernetes.io/job-tracking", "abc", "/p/x.wasm", None);
        assert_eq!(read(&forged), Err(Unusable::NotRemoved));
        assert_eq!(read(&format!("x {forged} state=removed")), Err(Unusable::NotRemoved), "state must lead the entry");
        assert_eq!(read("state=removed objects=0"), Err(Unusable::NotRecorded));
        assert_eq!(leftover_of(None), Err(Unusable::NotRecorded));
    }
}
