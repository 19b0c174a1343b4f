//! The languages benchmark (issue 6), side by side in one run, on the sample-controller's logic:
//! - per reconcile: the sample-controller in Rust, Python, JavaScript and Go as plugins, against
//!   the same logic compiled natively into this benchmark — a new Foo (no Deployment yet) and the
//!   steady state (the Foo's Deployment in the cache); each does one cache read and two applies
//!   into an in-process recorder; each plugin as built (the examples declare the fields they
//!   read: `projections`, contract 0.1.5) and handed whole objects, as before 0.1.5, in the same
//!   rounds;
//! - memory per instance: the linear memory of one instance after its first reconcile and after
//!   5 000;
//! - a fresh instance per call (instantiate + describe + reconcile), for scale;
//! - loading a plugin: compiling it (no artifact cache, `--no-cache`) vs from the artifact cache.
//!
//! `cargo bench -p kubewasm-tests --bench languages` (`BENCH_MILLIS` sets the time per
//! measurement, default 1500). Needs `kubewasm-py`, the JS SDK's tools and Go, as the tests do.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kubewasm::manifest::LimitPolicy;
use kubewasm::metrics::PluginMetrics;
use kubewasm::plugin::artifact::ArtifactCache;
use kubewasm::plugin::{LoadedPlugin, Loader};
use kubewasm::resource::{Gvk, ObjectKey};
use kubewasm::runtime::{Described, PluginRunner, Request, Runtime, RuntimeConfig};
use kubewasm::tools::offline::{FixtureCache, Recorder};
use kubewasm_tests::guests;
use kubewasm_tests::timing::{measure, three_ways};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{Value, json};

fn foo_kind() -> Gvk {
    Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo")
}

fn deployment_kind() -> Gvk {
    Gvk::new("apps", "v1", "Deployment")
}

const FOO_UID: &str = "6c1f5a0e-0000-4000-8000-000000000001";

/// A Foo as the API server returns it.
fn foo() -> String {
    json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": "example", "namespace": "bench", "uid": FOO_UID, "resourceVersion": "4711", "generation": 2,
                     "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {"deploymentName": "example-web", "replicas": 2},
        "status": {"availableReplicas": 2, "observedGeneration": 2},
    })
    .to_string()
}

/// The Foo's Deployment as the API server returns it (defaults, status; about 2 KB).
fn owned_deployment() -> String {
    let labels = json!({"app": "nginx", "controller": "example"});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "example-web", "namespace": "bench", "uid": "6c1f5a0e-0000-4000-8000-000000000002", "resourceVersion": "4712",
            "generation": 1, "creationTimestamp": "2025-01-01T00:00:01Z", "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "example", "uid": FOO_UID,
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "replicas": 2, "progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": "nginx", "image": "nginx:latest", "imagePullPolicy": "Always", "resources": {},
                                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
                    "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                    "securityContext": {}, "terminationGracePeriodSeconds": 30,
                },
            },
        },
        "status": {
            "availableReplicas": 2, "observedGeneration": 1, "readyReplicas": 2, "replicas": 2, "updatedReplicas": 2,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability.",
                 "lastTransitionTime": "2025-01-01T00:00:05Z", "lastUpdateTime": "2025-01-01T00:00:05Z"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                 "message": "ReplicaSet \"example-web-75cf69df9\" has successfully progressed.",
                 "lastTransitionTime": "2025-01-01T00:00:01Z", "lastUpdateTime": "2025-01-01T00:00:05Z"},
            ],
        },
    })
    .to_string()
}

/// The cache of a scenario: the Foo, and the Deployment in the steady state.
fn fixture(with_deployment: bool) -> FixtureCache {
    let mut cache = FixtureCache::default();
    cache.insert(&foo_kind(), &foo()).unwrap();
    cache.add_resource(deployment_kind(), kubewasm::resource::Scope::Namespaced);
    if with_deployment {
        cache.insert(&deployment_kind(), &owned_deployment()).unwrap();
    }
    cache
}

// ---------------------------------------------------------------------------------------------
// The sample-controller's logic, native: what `examples/sample-controller/rust` does, with the
// same host boundary — a cache read copies the text out, an apply hands over JSON text that the
// host parses and records and answers with the object's text, which the logic parses back.
// ---------------------------------------------------------------------------------------------

struct NativeHost {
    cache: FixtureCache,
    recorded: Mutex<Vec<Value>>,
}

impl NativeHost {
    fn get(&self, resource: &Gvk, namespace: &str, name: &str) -> Option<String> {
        let key = ObjectKey::new(Some(namespace), name);
        self.cache.view().get(resource, &key).map(|json| json.to_string())
    }

    fn apply(&self, object: String) -> Result<String, String> {
        let value: Value = serde_json::from_str(&object).map_err(|e| e.to_string())?;
        let mut recorded = self.recorded.lock();
        if recorded.len() > 10_000 {
            recorded.clear();
        }
        recorded.push(value);
        Ok(object)
    }
}

/// The SDK's `DynamicObject`: typed metadata, the rest as JSON.
#[derive(serde::Serialize, Deserialize)]
struct DynamicObject {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    #[serde(flatten)]
    data: serde_json::Map<String, Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct FooSpec {
    deployment_name: Option<String>,
    replicas: Option<i32>,
}

fn native_reconcile(request: &str, host: &NativeHost) -> Result<(), String> {
    let primary: DynamicObject = serde_json::from_str(request).map_err(|e| e.to_string())?;
    let spec: FooSpec = primary.data.get("spec").map(|s| serde_json::from_value(s.clone())).transpose().map_err(|e| e.to_string())?.unwrap_or_default();
    let (name, namespace) = (primary.metadata.name.as_deref().unwrap_or_default(), primary.metadata.namespace.as_deref().unwrap_or_default());
    let Some(deployment_name) = spec.deployment_name.filter(|n| !n.is_empty()) else {
        return Err("spec.deploymentName must be set".into());
    };
    let uid = primary.metadata.uid.as_deref().unwrap_or_default();
    if let Some(existing) = host.get(&deployment_kind(), namespace, &deployment_name) {
        let existing: Deployment = serde_json::from_str(&existing).map_err(|e| e.to_string())?;
        let owned = existing.metadata.owner_references.iter().flatten().any(|r| r.controller == Some(true) && r.uid == uid);
        if !owned {
            return Err(format!("Resource {deployment_name:?} already exists and is not managed by Foo"));
        }
    }
    let owner = OwnerReference {
        api_version: primary.api_version.clone(),
        kind: primary.kind.clone(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let labels = json!({"app": "nginx", "controller": name});
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": deployment_name, "namespace": namespace, "ownerReferences": [owner]},
        "spec": {
            "replicas": spec.replicas.unwrap_or(1),
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}},
        },
    }))
    .map_err(|e| e.to_string())?;
    let applied: Deployment = serde_json::from_str(&host.apply(serde_json::to_string(&deployment).map_err(|e| e.to_string())?)?).map_err(|e| e.to_string())?;
    let available = applied.status.and_then(|s| s.available_replicas).unwrap_or(0);
    let status = DynamicObject {
        api_version: primary.api_version.clone(),
        kind: primary.kind.clone(),
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some(namespace.into()), ..Default::default() },
        data: serde_json::Map::from_iter([("status".to_string(), json!({"availableReplicas": available, "observedGeneration": primary.metadata.generation}))]),
    };
    let _: DynamicObject = serde_json::from_str(&host.apply(serde_json::to_string(&status).map_err(|e| e.to_string())?)?).map_err(|e| e.to_string())?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Plugins
// ---------------------------------------------------------------------------------------------

fn runner(runtime: &Runtime, plugin: &LoadedPlugin, cache: &FixtureCache, recorder: &Arc<Recorder>, metrics: PluginMetrics) -> PluginRunner {
    runner_as(runtime, plugin, &plugin.described, cache, recorder, metrics)
}

/// `runner`, handing the plugin whole objects whatever fields it declared it reads.
fn whole_objects_runner(runtime: &Runtime, plugin: &LoadedPlugin, cache: &FixtureCache, recorder: &Arc<Recorder>) -> PluginRunner {
    let mut described = plugin.described.clone();
    described.manifest.projections.clear();
    runner_as(runtime, plugin, &described, cache, recorder, PluginMetrics::default())
}

fn runner_as(
    runtime: &Runtime,
    plugin: &LoadedPlugin,
    described: &Described,
    cache: &FixtureCache,
    recorder: &Arc<Recorder>,
    metrics: PluginMetrics,
) -> PluginRunner {
    let services = kubewasm::tools::offline::services(cache, recorder, kubewasm::tools::offline::Writes::Recorded);
    runtime.runner(plugin.prepared.clone(), described, services, metrics, &plugin.settings)
}

async fn reconcile(runner: &PluginRunner, recorder: &Recorder, object: &Arc<str>) {
    runner
        .reconcile(Request { key: ObjectKey::new(Some("bench"), "example"), object: object.clone(), retries: 0 })
        .await
        .expect("the sample-controller reconciles");
    if recorder.write_count() > 10_000 {
        recorder.clear();
    }
}

/// Loads `path` with `loader`, timed.
async fn load(loader: &Loader, path: &Path) -> (LoadedPlugin, Duration) {
    let started = Instant::now();
    let plugin = loader.load(path).await.expect("the plugin loads");
    (plugin, started.elapsed())
}

fn micros(d: Duration) -> String {
    format!("{:.2} µs", d.as_secs_f64() * 1e6)
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn mib(bytes: i64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map(|entries| entries.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum()).unwrap_or(0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let budget = Duration::from_millis(std::env::var("BENCH_MILLIS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500));
    let builds: Vec<(&str, PathBuf)> = guests::LANGS.iter().map(|lang| (*lang, guests::example("sample-controller", lang))).collect();
    let runtime = Arc::new(Runtime::new(RuntimeConfig::default()).unwrap());
    let policy = LimitPolicy::default;

    // Loading: compiled every time (no artifact cache) vs from a warm artifact cache.
    println!("languages benchmark: the sample-controller (mean per call; {budget:?} per measurement; each plugin and native in alternating rounds, median)\n");
    println!("loading a plugin (read + compile or deserialize + describe)");
    println!("{:<8} {:>9} {:>11} {:>14} {:>11} {:>9}", "", "wasm", "artifact", "no cache", "cached", "speedup");
    let mut plugins = Vec::new();
    for (lang, path) in &builds {
        let uncached = Loader::new(runtime.clone(), None, policy());
        let (_, compiled) = load(&uncached, path).await;
        let dir = tempfile::tempdir().unwrap();
        let cached_loader = Loader::new(runtime.clone(), Some(ArtifactCache::new(dir.path())), policy());
        let (plugin, _) = load(&cached_loader, path).await;
        let mut cached = Duration::MAX;
        for _ in 0..5 {
            cached = cached.min(load(&cached_loader, path).await.1);
        }
        let wasm = std::fs::metadata(path).unwrap().len();
        println!(
            "{lang:<8} {:>6.1} MB {:>8.1} MB {:>14} {:>11} {:>8.0}x",
            wasm as f64 / 1e6,
            dir_size(dir.path()) as f64 / 1e6,
            millis(compiled),
            millis(cached),
            compiled.as_secs_f64() / cached.as_secs_f64()
        );
        plugins.push((*lang, plugin));
    }

    // Per reconcile, against the native logic.
    let object: Arc<str> = foo().into();
    for (scenario, with_deployment) in [("new Foo: no Deployment yet", false), ("steady state: the Foo's Deployment in the cache", true)] {
        println!("\nper reconcile, {scenario} (one cache read, two applies; handed the fields it reads, and whole objects)");
        let native = NativeHost { cache: fixture(with_deployment), recorded: Mutex::default() };
        println!("{:<8} {:>12} {:>12} {:>10} {:>10} {:>14} {:>10}", "", "per call", "native", "vs native", "vs Rust", "whole objects", "vs native");
        let mut rust_ratio = None;
        for (lang, plugin) in &plugins {
            let cache = fixture(with_deployment);
            let recorder = Arc::new(Recorder::default());
            let wasm = runner(&runtime, plugin, &cache, &recorder, PluginMetrics::default());
            let whole = whole_objects_runner(&runtime, plugin, &cache, &recorder);
            let (native_time, time, whole_time) = three_ways(
                3 * budget,
                async || native_reconcile(&object, &native).unwrap(),
                async || reconcile(&wasm, &recorder, &object).await,
                async || reconcile(&whole, &recorder, &object).await,
            )
            .await;
            let ratio = time.as_secs_f64() / native_time.as_secs_f64();
            let rust = *rust_ratio.get_or_insert(ratio);
            let whole_ratio = whole_time.as_secs_f64() / native_time.as_secs_f64();
            println!(
                "{lang:<8} {:>12} {:>12} {:>9.1}x {:>9.1}x {:>14} {:>9.1}x",
                micros(time),
                micros(native_time),
                ratio,
                ratio / rust,
                micros(whole_time),
                whole_ratio
            );
        }
    }

    // Memory per instance: the linear memory the instance holds (what the memory limit counts).
    println!("\nmemory per instance (linear memory; steady-state reconciles)");
    println!("{:<8} {:>16} {:>17} {:>10}", "", "after 1 call", "after 5 000 calls", "instances");
    for (lang, plugin) in &plugins {
        let cache = fixture(true);
        let recorder = Arc::new(Recorder::default());
        let metrics = PluginMetrics::default();
        let wasm = runner(&runtime, plugin, &cache, &recorder, metrics.clone());
        reconcile(&wasm, &recorder, &object).await;
        let first = metrics.memory_bytes.get();
        // (Fewer than `max_calls_per_instance`, after which the instance would be replaced.)
        for _ in 0..4_999 {
            reconcile(&wasm, &recorder, &object).await;
        }
        println!("{lang:<8} {:>16} {:>17} {:>10}", mib(first), mib(metrics.memory_bytes.get()), metrics.instances.get());
    }

    // A fresh instance for every call: instantiate, describe, reconcile.
    let fresh_runtime = Arc::new(Runtime::new(RuntimeConfig { max_calls_per_instance: 1, ..RuntimeConfig::default() }).unwrap());
    let fresh_dir = tempfile::tempdir().unwrap();
    let fresh_loader = Loader::new(fresh_runtime.clone(), Some(ArtifactCache::new(fresh_dir.path())), policy());
    println!("\na fresh instance per call (instantiate + describe + reconcile; steady state)");
    for (lang, path) in &builds {
        let (plugin, _) = load(&fresh_loader, path).await;
        let cache = fixture(true);
        let recorder = Arc::new(Recorder::default());
        let wasm = runner(&fresh_runtime, &plugin, &cache, &recorder, PluginMetrics::default());
        let time = measure(budget, async || reconcile(&wasm, &recorder, &object).await).await;
        println!("{lang:<8} {:>12}", micros(time));
    }
}
