//! Go plugins (issue 12) through the host's real runtime:
//!
//! - the garbage-collector guard of the Go SDK: 50 000 reconciles of the Go sample-controller on
//!   ONE instance (the host's instance recycling turned off), each with a cache read and two
//!   applies whose answers the host writes into the plugin's memory through `cabi_realloc`; and
//!   10 000 map-related calls of the Go reboot coordinator, each listing 30 Nodes (30 allocations
//!   by the host per call). Without the guard a collection ending inside `cabi_realloc` traps the
//!   instance now and then — the same 50 000-reconcile loop on a build with the guard taken out
//!   trapped at calls 1 932, 9 433 and 18 070 ("cannot leave component instance") — and one call
//!   (a table test) never shows it;
//! - `kubewasm build --lang go` refuses what is not a Go plugin with a message that says why.
//!
//! No cluster needed: plugins run against `kubewasm::tools::offline`. `cargo test -p kubewasm-tests
//! --test go`; needs Go 1.26 on `PATH` (the Go plugins are built with the workspace's
//! `kubewasm build --lang go`, and kept by digest in the target directory).

use std::sync::Arc;
use std::time::Instant;

use kubewasm::manifest::LimitPolicy;
use kubewasm::metrics::PluginMetrics;
use kubewasm::plugin::artifact::ArtifactCache;
use kubewasm::plugin::{LoadedPlugin, Loader};
use kubewasm::resource::{Gvk, ObjectKey};
use kubewasm::runtime::{Action, PluginRunner, Request, Runtime, RuntimeConfig};
use kubewasm::tools::offline::{FixtureCache, Recorder};
use kubewasm_tests::guests;
use serde_json::json;

/// Calls per instance: above the probe's 36 000, and above the host's default recycling
/// (10 000 calls), which is turned off here.
const CALLS: usize = 50_000;

fn foo_kind() -> Gvk {
    Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo")
}

fn node_kind() -> Gvk {
    Gvk::new("", "v1", "Node")
}

/// A runtime that never replaces an instance for its number of calls, and a loader on it.
fn loader() -> (Loader, tempfile::TempDir) {
    let runtime = Runtime::new(RuntimeConfig { max_calls_per_instance: u64::MAX, ..RuntimeConfig::default() }).unwrap();
    let artifacts = tempfile::tempdir().unwrap();
    (Loader::new(Arc::new(runtime), Some(ArtifactCache::new(artifacts.path())), LimitPolicy::default()), artifacts)
}

async fn load(loader: &Loader, example: &'static str, settings: Option<&str>) -> (LoadedPlugin, tempfile::TempDir) {
    let wasm = tokio::task::spawn_blocking(move || guests::example(example, "go")).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = guests::install(&wasm, dir.path(), example, settings);
    (loader.load(&path).await.unwrap_or_else(|e| panic!("the Go {example} loads: {e}")), dir)
}

fn runner(loader: &Loader, plugin: &LoadedPlugin, cache: &FixtureCache, recorder: &Arc<Recorder>, metrics: &PluginMetrics) -> PluginRunner {
    let services = kubewasm::tools::offline::services(cache, recorder, kubewasm::tools::offline::Writes::Recorded);
    loader.runtime().runner(plugin.prepared.clone(), &plugin.described, services, metrics.clone(), &plugin.settings)
}

/// Asserts that every call ran in the one instance: none faulted, one instance is alive.
fn one_instance(metrics: &PluginMetrics, what: &str) {
    let faults = &metrics.faults;
    let faulted = faults.trap.get() + faults.deadline.get() + faults.memory.get() + faults.oversized.get() + faults.instantiate.get();
    assert_eq!(faulted, 0, "{what}: {faulted} faults");
    assert_eq!(metrics.instances.get(), 1, "{what}: the calls did not all run in one instance");
}

/// What the timings printed are of: a debug host is several times slower than a release one.
const BUILD: &str = if cfg!(debug_assertions) { "debug" } else { "release" };

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_sample_controller_reconciles_50_000_times_on_one_instance() {
    let (loader, _artifacts) = loader();
    let (plugin, _dir) = load(&loader, "sample-controller", None).await;
    // The steady state: the Foo's Deployment is in the cache, so every reconcile reads it (about
    // 1 KB into the plugin's memory), applies it and applies the Foo's status.
    let foo = json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": "example", "namespace": "default", "uid": "foo-uid", "generation": 2, "resourceVersion": "7"},
        "spec": {"deploymentName": "example-web", "replicas": 2},
    });
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "example-web", "namespace": "default", "uid": "dep-uid", "resourceVersion": "8", "generation": 1,
                     "ownerReferences": [{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "example", "uid": "foo-uid", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx", "controller": "example"}},
                 "template": {"metadata": {"labels": {"app": "nginx", "controller": "example"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}},
        "status": {"availableReplicas": 2, "readyReplicas": 2, "replicas": 2, "updatedReplicas": 2, "observedGeneration": 1},
    });
    let mut cache = FixtureCache::default();
    cache.insert(&foo_kind(), &foo.to_string()).unwrap();
    cache.insert(&Gvk::new("apps", "v1", "Deployment"), &deployment.to_string()).unwrap();
    let recorder = Arc::new(Recorder::default());
    let metrics = PluginMetrics::default();
    let runner = runner(&loader, &plugin, &cache, &recorder, &metrics);
    let object: Arc<str> = foo.to_string().into();

    let started = Instant::now();
    let mut first_memory = 0;
    for call in 0..CALLS {
        let request = Request { key: ObjectKey::new(Some("default"), "example"), object: object.clone(), retries: 0 };
        match runner.reconcile(request).await {
            Ok(Action::Done) => {}
            other => panic!("reconcile {call} of {CALLS} on one instance: {other:?}"),
        }
        if call == 0 {
            first_memory = metrics.memory_bytes.get();
        }
        if recorder.write_count() >= 1_000 {
            assert_eq!(recorder.write_count() % 2, 0, "two applies per reconcile");
            recorder.clear();
        }
    }
    let elapsed = started.elapsed();
    one_instance(&metrics, "the Go sample-controller");
    let memory = metrics.memory_bytes.get();
    println!(
        "Go sample-controller: {CALLS} reconciles on one instance in {:.1} s ({:.1} µs each, {} host); linear memory {:.1} MiB after 1 call, {:.1} MiB after {CALLS}",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / CALLS as f64,
        BUILD,
        mib(first_memory),
        mib(memory)
    );
    // The collector runs: memory stays bounded, not growing with the number of calls.
    assert!(memory < 32 << 20, "linear memory grew to {:.1} MiB", mib(memory));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_reboot_coordinator_maps_10_000_times_on_one_instance() {
    let (loader, _artifacts) = loader();
    let (plugin, _dir) = load(&loader, "reboot-coordinator", Some("maxUnavailable = 2\n")).await;
    // 30 Nodes, 10 of them waiting: every map-related call lists all 30 (about 10 KB written
    // into the plugin's memory, in 30 allocations) and answers 10 keys.
    let mut cache = FixtureCache::default();
    for i in 0..30 {
        let mut annotations = serde_json::Map::new();
        if i % 3 == 0 {
            annotations.insert("reboot.kubewasm.io/reboot-needed".into(), json!("true"));
        }
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{i:02}"), "uid": format!("uid-{i}"), "annotations": annotations, "labels": {"kubernetes.io/hostname": format!("node-{i:02}")}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": "2025-01-01T00:00:00Z"}]},
        });
        cache.insert(&node_kind(), &node.to_string()).unwrap();
    }
    let recorder = Arc::new(Recorder::default());
    let metrics = PluginMetrics::default();
    let runner = runner(&loader, &plugin, &cache, &recorder, &metrics);
    let event: Arc<str> = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-01"}}).to_string().into();

    const MAPS: usize = 10_000;
    let started = Instant::now();
    for call in 0..MAPS {
        let keys =
            runner.map_related(&node_kind(), event.clone(), |_| true).await.unwrap_or_else(|e| panic!("map-related {call} of {MAPS} on one instance: {e}"));
        assert_eq!(keys.len(), 10, "call {call}: {keys:?}");
    }
    let elapsed = started.elapsed();
    one_instance(&metrics, "the Go reboot coordinator");
    println!(
        "Go reboot coordinator: {MAPS} map-related calls (30 Nodes listed each) on one instance in {:.1} s ({:.1} µs each, {} host); linear memory {:.1} MiB",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / MAPS as f64,
        BUILD,
        mib(metrics.memory_bytes.get())
    );
}

#[test]
fn kubewasm_build_refuses_what_is_not_a_go_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let kubewasm = kubewasm_tests::kubewasm_binary().unwrap();
    // No go.mod.
    let output = std::process::Command::new(&kubewasm).args(["build", "--lang", "go"]).arg(dir.path()).output().unwrap();
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && error.contains("no go.mod") && error.trim().lines().count() == 1, "{error}");
    // A Go module that does not compile: go's own message comes through.
    std::fs::write(dir.path().join("go.mod"), "module broken\n\ngo 1.26\n").unwrap();
    std::fs::write(dir.path().join("main.go"), "package main\n\nfunc main() { undefined() }\n").unwrap();
    let output = std::process::Command::new(&kubewasm).args(["build", "--lang", "go"]).arg(dir.path()).output().unwrap();
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && error.contains("go build") && error.contains("undefined"), "{error}");
    // A Go program that does not use the SDK exports nothing of the world.
    std::fs::write(dir.path().join("main.go"), "package main\n\nfunc main() {}\n").unwrap();
    let output = std::process::Command::new(&kubewasm).args(["build", "--lang", "go"]).arg(dir.path()).output().unwrap();
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && error.contains("making a component"), "{error}");
    assert!(std::fs::read_dir(dir.path()).unwrap().flatten().all(|e| !e.file_name().to_string_lossy().ends_with(".wasm")), "nothing is written on failure");
}
