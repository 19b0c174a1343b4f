//! The examples in every language (issues 6 and 12), and the scaffolder:
//!
//! - table tests: every example in Rust, Python, JavaScript, Go and C runs its shared `cases/`
//!   through the kubewasm library (`kubewasm::tools::tabletest`, what `kubewasm test` runs);
//! - SDK conformance: the conformance plugin of `tests/conformance`, one per language with the
//!   same behaviour, passes the same cases in every language — a panic or exception in
//!   reconcile or map-related is a fault, an unknown setting is refused, requeue delays arrive
//!   in milliseconds, error codes and messages round-trip, over-long values get the host's
//!   `invalid` (issue 21 §2, issue 20 item 1);
//! - cross-language end-to-end: every example in every language runs in the real `kubewasm run`
//!   against the local control plane, and the objects it leaves are identical across languages —
//!   for the sample-controller the Deployments, Foo statuses and Events made from the same Foos;
//!   for the reboot coordinator the Nodes after a reboot round under a simulated node agent,
//!   which also checks that `maxUnavailable` (from `reboot-coordinator.toml`) is never exceeded;
//! - `kubewasm new` in every language makes a project that builds, passes `kubewasm check` and
//!   its own table-test case;
//! - the Python and TypeScript SDKs' Kubernetes types are those the control plane's OpenAPI
//!   schema generates (`scripts/k8s-types.py --check`).
//!
//! `cargo test -p kubewasm-tests --test examples`. Needs `kubewasm-py` on `PATH`, the JS SDK's
//! tools (`npm install` in `plugins/js`; `scripts/env.sh` installs both), Go 1.26 and clang-16
//! with wasi-libc (Go and C plugins are built with the workspace's `kubewasm build --lang go|c`).
//! Python, JS, Go and C builds are kept in the target directory (see `guests::example`).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use kubewasm::manifest::LimitPolicy;
use kubewasm::plugin::Loader;
use kubewasm::plugin::artifact::ArtifactCache;
use kubewasm::runtime::{Runtime, RuntimeConfig};
use kubewasm_tests::guests::{self, LANGS, workspace_root};
use kubewasm_tests::{ControlPlane, Host, PluginDir, apply_crd, eventually, kubewasm_binary, unique_name};
use serde_json::{Value, json};
use support::{CONVERGE, host_config};

/// How long a host may take to be ready: a Python or JS plugin not yet in the artifact cache is
/// compiled first (tens of seconds in a debug build).
const READY: Duration = Duration::from_secs(180);

/// The artifact cache of the table tests and of `kubewasm check` and `kubewasm test` here:
/// compiled plugins keyed by digest and engine configuration, kept across runs in the target
/// directory (a Python or JS plugin takes tens of seconds to compile in a debug build). Hosts
/// keep their own (see `kubewasm_tests::host`).
fn artifact_cache_dir() -> PathBuf {
    guests::target_dir().join("kubewasm-tests/artifacts")
}

/// The built example, building it on a blocking thread.
async fn built(example: &'static str, lang: &'static str) -> Result<PathBuf> {
    Ok(tokio::task::spawn_blocking(move || guests::example(example, lang)).await?)
}

/// The example built in each of [`LANGS`], one after another (the builds are heavy).
async fn built_in_every_language(example: &'static str) -> Result<Vec<(&'static str, PathBuf)>> {
    let mut wasms = Vec::new();
    for lang in LANGS {
        wasms.push((lang, built(example, lang).await?));
    }
    Ok(wasms)
}

// ---------------------------------------------------------------------------------------------
// Table tests
// ---------------------------------------------------------------------------------------------

/// Runs `examples/<example>/cases` against the example built in `lang`, as `kubewasm test` does.
/// An example whose plugin needs settings to load ships them in `manifests/` (its first
/// `*.toml`), which go beside the plugin, as they would in a host's plugin directory.
async fn table_test(example: &'static str, lang: &'static str) -> Result<()> {
    let wasm = built(example, lang).await?;
    let dir = workspace_root().join("examples").join(example);
    let mut settings: Vec<PathBuf> = std::fs::read_dir(dir.join("manifests")).map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect()).unwrap_or_default();
    settings.retain(|p| p.extension().is_some_and(|x| x == "toml"));
    settings.sort();
    let wasm = match settings.first() {
        Some(toml) => {
            let beside = tempfile::Builder::new().prefix("kubewasm-example-").tempdir()?.keep();
            std::fs::copy(&wasm, beside.join(format!("{example}.wasm")))?;
            std::fs::copy(toml, beside.join(format!("{example}.toml")))?;
            beside.join(format!("{example}.wasm"))
        }
        None => wasm,
    };
    run_cases(&format!("{example} in {lang}"), &wasm, &dir.join("cases")).await
}

/// Runs `tests/conformance/cases` against the conformance plugin built in `lang`.
async fn conformance_test(lang: &'static str) -> Result<()> {
    let wasm = tokio::task::spawn_blocking(move || guests::conformance(lang)).await?;
    run_cases(&format!("the conformance plugin in {lang}"), &wasm, &workspace_root().join("tests/conformance/cases")).await
}

/// Runs the cases of `cases` against the plugin `wasm`, failing with the report unless all pass.
async fn run_cases(what: &str, wasm: &Path, cases: &Path) -> Result<()> {
    let runtime = Arc::new(Runtime::new(RuntimeConfig::default())?);
    let loader = Loader::new(runtime, Some(ArtifactCache::new(artifact_cache_dir())), LimitPolicy::default());
    let plugin = loader.load(wasm).await.with_context(|| format!("loading {}", wasm.display()))?;
    let mut report = String::new();
    let (passed, failed) = kubewasm::tools::tabletest::run_dir(loader.runtime(), &plugin, &LimitPolicy::default(), cases, &mut report).await?;
    let report = quoted(&report);
    ensure!(failed == 0, "{what}: {failed} of {} cases failed:{report}", passed + failed);
    ensure!(passed > 0, "{what}: no cases in {}", cases.display());
    Ok(())
}

/// A `kubewasm test` report to quote in a failure message: without its "test result:" line,
/// which `scripts/test.sh` would count as cargo's own.
fn quoted(report: &str) -> String {
    report.replace("test result:", "cases:")
}

macro_rules! table_tests {
    ($($test:ident: $example:literal, $lang:literal;)*) => {$(
        #[tokio::test]
        async fn $test() -> Result<()> {
            table_test($example, $lang).await
        }
    )*};
}

table_tests! {
    table_tests_sample_controller_rust: "sample-controller", "rust";
    table_tests_sample_controller_python: "sample-controller", "python";
    table_tests_sample_controller_js: "sample-controller", "js";
    table_tests_reboot_coordinator_rust: "reboot-coordinator", "rust";
    table_tests_reboot_coordinator_python: "reboot-coordinator", "python";
    table_tests_reboot_coordinator_js: "reboot-coordinator", "js";
    table_tests_sample_controller_go: "sample-controller", "go";
    table_tests_reboot_coordinator_go: "reboot-coordinator", "go";
    table_tests_configmap_propagation_python: "configmap-propagation", "python";
    table_tests_configmap_propagation_rust: "configmap-propagation", "rust";
    table_tests_crd_roles_js: "crd-roles", "js";
    table_tests_update_strategy_go: "update-strategy", "go";
    table_tests_cronjob_go: "cronjob", "go";
    table_tests_cronjob_rust: "cronjob", "rust";
    table_tests_cronjob_js: "cronjob", "js";
    table_tests_sample_controller_c: "sample-controller", "c";
    table_tests_reboot_coordinator_c: "reboot-coordinator", "c";
    table_tests_cronjob_python: "cronjob", "python";
    table_tests_cronjob_c: "cronjob", "c";
    table_tests_fleet_propagation_rust: "fleet-propagation", "rust";
    table_tests_fleet_propagation_go: "fleet-propagation", "go";
    table_tests_fleet_propagation_python: "fleet-propagation", "python";
    table_tests_fleet_propagation_js: "fleet-propagation", "js";
    table_tests_fleet_propagation_c: "fleet-propagation", "c";
}

macro_rules! conformance_tests {
    ($($test:ident: $lang:literal;)*) => {$(
        #[tokio::test]
        async fn $test() -> Result<()> {
            conformance_test($lang).await
        }
    )*};
}

conformance_tests! {
    conformance_rust: "rust";
    conformance_python: "python";
    conformance_js: "js";
    conformance_go: "go";
    conformance_c: "c";
}

/// A case's `now` stops the plugin's wall clock, its update is stored so that it reads it back
/// (at the next resourceVersion after the cache's highest), and `match: fields` compares the
/// update on the fields the case gives — which the same expectation compared exactly does not
/// pass, nor the case under another `now`.
#[tokio::test]
async fn a_case_stops_the_clock_and_reads_its_own_writes() -> Result<()> {
    let wasm = tokio::task::spawn_blocking(kubewasm_tests::plugindir::e2e_guest).await?;
    let cases = tempfile::tempdir()?;
    let case = |now: &str, compare: &str| {
        format!(
            r#"
settings: {{mode: stamp}}
now: {now}
cache:
  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: a, namespace: ns, resourceVersion: "41", labels: {{e2e.kubewasm.io/primary: "yes"}}}}}}
  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: b, namespace: ns, resourceVersion: "7"}}}}
reconcile: {{namespace: ns, name: a}}
expect:
  match: {compare}
  calls:
    - update: {{metadata: {{name: a, annotations: {{e2e.kubewasm.io/output: "1767323045"}}}}}}
  events:
    - {{reason: Stamped, note: read back 1767323045 at resourceVersion 42}}
"#
        )
    };
    std::fs::write(cases.path().join("1-fields.yaml"), case("2026-01-02T03:04:05Z", "fields"))?;
    std::fs::write(cases.path().join("2-exact.yaml"), case("2026-01-02T03:04:05Z", "exact"))?;
    std::fs::write(cases.path().join("3-later.yaml"), case("2026-01-02T03:04:06Z", "fields"))?;
    let runtime = Arc::new(Runtime::new(RuntimeConfig::default())?);
    let loader = Loader::new(runtime, Some(ArtifactCache::new(artifact_cache_dir())), LimitPolicy::default());
    let plugin = loader.load(&wasm).await?;
    let mut report = String::new();
    let (passed, failed) = kubewasm::tools::tabletest::run_dir(loader.runtime(), &plugin, &LimitPolicy::default(), cases.path(), &mut report).await?;
    let report = quoted(&report);
    ensure!((passed, failed) == (1, 2), "only the case comparing the given fields at the right time passes:{report}");
    ensure!(report.contains("case 1-fields ... ok") && report.contains("case 2-exact ... FAILED"), "{report}");
    ensure!(report.contains("1767323046"), "the later case's plugin stamped its own now:{report}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Comparing objects across languages
// ---------------------------------------------------------------------------------------------

/// Fields that differ between two runs of the same logic: identities, versions, times, and who
/// wrote what when.
const VOLATILE_METADATA: &[&str] = &["uid", "resourceVersion", "creationTimestamp", "managedFields", "namespace", "selfLink"];
const TIMESTAMPS: &[&str] = &["lastTransitionTime", "lastUpdateTime", "lastHeartbeatTime", "lastProbeTime", "timeAdded"];

/// `object` without what [`VOLATILE_METADATA`] and [`TIMESTAMPS`] name; owner references keep
/// their kind and name, not their uid; conditions are sorted by type (their order is the order
/// they were first set in).
fn normalize(mut object: Value) -> Value {
    fn strip_times(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.retain(|k, _| !TIMESTAMPS.contains(&k.as_str()));
                if let Some(Value::Array(conditions)) = map.get_mut("conditions") {
                    conditions.sort_by(|a, b| a["type"].to_string().cmp(&b["type"].to_string()));
                }
                map.values_mut().for_each(strip_times);
            }
            Value::Array(items) => items.iter_mut().for_each(strip_times),
            _ => {}
        }
    }
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| !VOLATILE_METADATA.contains(&k.as_str()));
        if let Some(owners) = meta.get_mut("ownerReferences").and_then(Value::as_array_mut) {
            for owner in owners {
                owner["uid"] = json!("<uid>");
            }
        }
    }
    strip_times(&mut object);
    object
}

/// Fails with both sides, pretty-printed, when the runs' snapshots differ.
fn assert_identical(what: &str, runs: &[(&str, Value)]) -> Result<()> {
    let (first_lang, first) = &runs[0];
    for (lang, snapshot) in &runs[1..] {
        if snapshot != first {
            bail!(
                "{what}: {lang} differs from {first_lang}\n--- {first_lang} ---\n{}\n--- {lang} ---\n{}",
                serde_json::to_string_pretty(first)?,
                serde_json::to_string_pretty(snapshot)?
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The sample-controller in every language
// ---------------------------------------------------------------------------------------------

fn foo_crd() -> CustomResourceDefinition {
    let yaml = include_str!("../../examples/sample-controller/manifests/crd.yaml");
    serde_saphyr::from_str(yaml).expect("the sample-controller's CRD parses")
}

/// The Foos every language gets: two with a Deployment of their own (one with the default
/// replicas), one naming a Deployment it does not own, one without a Deployment name.
fn sample_foos(ar: &ApiResource) -> Vec<DynamicObject> {
    let with_spec = |name: &str, spec: Value| DynamicObject::new(name, ar).data(json!({ "spec": spec }));
    vec![
        with_spec("alpha", json!({"deploymentName": "alpha-web", "replicas": 1})),
        with_spec("beta", json!({"deploymentName": "beta-web"})),
        with_spec("gamma", json!({"deploymentName": "taken", "replicas": 3})),
        with_spec("delta", json!({"replicas": 1})),
    ]
}

/// A Deployment nobody's Foo owns, named as Foo gamma asks.
fn taken() -> Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": "taken"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "taken"}},
            "template": {"metadata": {"labels": {"app": "taken"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }))?)
}

/// Marks every Pod of the namespace Ready (there is no kubelet), so that the ReplicaSet and
/// Deployment controllers count them available.
async fn mark_pods_ready(pods: &Api<Pod>) -> Result<()> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
    for pod in pods.list(&ListParams::default()).await?.items {
        let ready = pod.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if !ready && pod.metadata.deletion_timestamp.is_none() {
            pods.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&status)).await?;
        }
    }
    Ok(())
}

/// Whether a Deployment has rolled out completely: every replica updated and available, and its
/// status written for its current generation.
fn rolled_out(d: &Deployment) -> Result<()> {
    let want = d.spec.replicas.unwrap_or(1);
    let status = d.status.clone().unwrap_or_default();
    let progressing = status.conditions.iter().flatten().find(|c| c.type_.as_deref() == Some("Progressing")).and_then(|c| c.reason.clone());
    let done = status.observed_generation == d.metadata.generation
        && status.replicas == Some(want)
        && status.updated_replicas == Some(want)
        && status.ready_replicas == Some(want)
        && status.available_replicas == Some(want)
        && progressing.as_deref() == Some("NewReplicaSetAvailable");
    if done { Ok(()) } else { Err(anyhow!("{} not rolled out: want {want}, status {status:?}", d.name_any())) }
}

/// The Foo's (availableReplicas, observedGeneration) once they match `replicas` and its
/// generation.
async fn foo_converged(foos: &Api<DynamicObject>, name: &str, replicas: i64) -> Result<()> {
    let object = foos.get(name).await?;
    let status = object.data.get("status").cloned().unwrap_or_default();
    let generation = object.metadata.generation;
    if status["availableReplicas"].as_i64() == Some(replicas) && status["observedGeneration"].as_i64() == generation {
        Ok(())
    } else {
        Err(anyhow!("Foo {name} at generation {generation:?} has status {status}, want {replicas} available"))
    }
}

/// Runs the sample-controller built in `lang` in a host of its own, in a namespace of its own,
/// takes the Foos through creation and a spec change, and returns the objects it left.
async fn sample_run(cp: &ControlPlane, ar: &ApiResource, lang: &str, wasm: &Path) -> Result<Value> {
    let ns = cp.namespace(&format!("sample-{lang}")).await?;
    let dir = PluginDir::new();
    guests::install(wasm, dir.path(), "sample-controller", None);
    let mut host = Host::start(host_config(&format!("sample-{lang}"), dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), ar);
    let deployments: Api<Deployment> = ns.api();
    let pods: Api<Pod> = ns.api();
    deployments.create(&PostParams::default(), &taken()?).await?;
    for object in sample_foos(ar) {
        foos.create(&PostParams::default(), &object).await?;
    }
    let converge = |wants: Vec<(&'static str, i64)>| {
        let (foos, deployments, pods) = (&foos, &deployments, &pods);
        async move {
            eventually(&format!("{lang}: the Foos {wants:?} and their Deployments to converge"), CONVERGE, || async {
                mark_pods_ready(pods).await?;
                for (name, replicas) in &wants {
                    foo_converged(foos, name, *replicas).await?;
                }
                deployments.list(&ListParams::default()).await?.items.iter().try_for_each(rolled_out)
            })
            .await
        }
    };
    converge(vec![("alpha", 1), ("beta", 1)]).await?;
    foos.patch("alpha", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 2}}))).await?;
    converge(vec![("alpha", 2), ("beta", 1)]).await?;
    let events = eventually(&format!("{lang}: the Warning Events on gamma and delta"), CONVERGE, || async {
        let events = foo_events(ns.client(), ns.name()).await?;
        let seen = |regarding: &str, reason: &str| events.iter().any(|e| e["regarding"] == regarding && e["reason"] == reason);
        if seen("Foo/gamma", "ErrResourceExists") && seen("Foo/delta", "InvalidSpec") { Ok(events) } else { Err(anyhow!("Events on Foos so far: {events:?}")) }
    })
    .await?;

    let mut foo_snapshot = Vec::new();
    for object in foos.list(&ListParams::default()).await?.items {
        let value = normalize(serde_json::to_value(&object)?);
        foo_snapshot.push(
            json!({"name": value["metadata"]["name"], "generation": value["metadata"]["generation"], "spec": value["spec"], "status": value.get("status")}),
        );
    }
    let deployment_snapshot: Vec<Value> =
        deployments.list(&ListParams::default()).await?.items.iter().map(|d| Ok(normalize(serde_json::to_value(d)?))).collect::<Result<_>>()?;
    host.stop().await?;
    Ok(json!({"foos": foo_snapshot, "deployments": deployment_snapshot, "events": events}))
}

/// The distinct Events about Foos in the namespace (type, reason, action, note, reporter), sorted.
async fn foo_events(client: &Client, ns: &str) -> Result<Vec<Value>> {
    let events = Api::<Event>::namespaced(client.clone(), ns).list(&ListParams::default()).await?.items;
    let distinct: BTreeSet<String> = events
        .iter()
        .filter_map(|e| {
            let regarding = e.regarding.as_ref().filter(|r| r.kind.as_deref() == Some("Foo"))?;
            let value = json!({
                "regarding": format!("Foo/{}", regarding.name.as_deref().unwrap_or_default()),
                "type": e.type_, "reason": e.reason, "action": e.action, "note": e.note,
                "reportingController": e.reporting_controller,
            });
            Some(value.to_string())
        })
        .collect();
    Ok(distinct.iter().map(|text| serde_json::from_str(text).expect("our own JSON")).collect())
}

/// The sample-controller in Rust, Python, JavaScript, Go and C, each in its own host and namespace,
/// turns the same Foos into the same Deployments, Foo statuses and Events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_controller_makes_the_same_objects_in_every_language() -> Result<()> {
    let wasms = built_in_every_language("sample-controller").await?;
    let cp = ControlPlane::shared().await;
    let ar = apply_crd(&cp.client().await?, &foo_crd(), CONVERGE).await?;
    let runs = futures::future::join_all(wasms.iter().map(|(lang, wasm)| sample_run(cp, &ar, lang, wasm))).await;
    let mut snapshots = Vec::new();
    for ((lang, _), run) in wasms.iter().zip(runs) {
        snapshots.push((*lang, run.with_context(|| format!("the sample-controller in {lang}"))?));
    }
    let (_, rust) = &snapshots[0];
    ensure!(rust["deployments"].as_array().map(Vec::len) == Some(3), "expected alpha-web, beta-web and taken: {rust:#}");
    assert_identical("the sample-controller's objects", &snapshots)
}

/// `kubewasm record` of the sample-controller in every language replays green against the
/// version it was recorded from: the cases hold the objects as the host caches them (no
/// `managedFields`, which a typed Go update would otherwise carry from the listed object into
/// its calls), the time of the recording as `now`, and what the plugin does on the case's own
/// cache, its writes stored as the test runner stores them.
#[tokio::test]
async fn recordings_replay_green_in_every_language() -> Result<()> {
    let wasms = built_in_every_language("sample-controller").await?;
    let cp = ControlPlane::shared().await;
    let ar = apply_crd(&cp.client().await?, &foo_crd(), CONVERGE).await?;
    let ns = cp.namespace("sample-record").await?;
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &ar);
    ns.api::<Deployment>().create(&PostParams::default(), &taken()?).await?;
    for object in sample_foos(&ar) {
        foos.create(&PostParams::default(), &object).await?;
    }
    let keys: Vec<String> = ["alpha", "beta", "gamma", "delta"].iter().map(|name| format!("{}/{name}", ns.name())).collect();
    let artifacts = artifact_cache_dir().to_string_lossy().into_owned();
    let kubeconfig = cp.kubeconfig_path().to_string_lossy().into_owned();
    for (lang, wasm) in &wasms {
        let cases = tempfile::tempdir()?;
        let (wasm, cases_dir) = (wasm.to_string_lossy().into_owned(), cases.path().to_string_lossy().into_owned());
        let mut record = vec!["record", wasm.as_str()];
        record.extend(keys.iter().map(String::as_str));
        record.extend(["-o", &cases_dir, "--kubeconfig", &kubeconfig, "--cache-dir", &artifacts]);
        kubewasm(cases.path(), &record).with_context(|| format!("recording the {lang} sample-controller"))?;
        let alpha = std::fs::read_to_string(cases.path().join(format!("{}-alpha.yaml", ns.name())))?;
        ensure!(alpha.contains("\nnow: ") && alpha.contains("applyStatus") && !alpha.contains("managedFields"), "{lang}: alpha's case:\n{alpha}");
        let report = kubewasm(cases.path(), &["test", &wasm, &cases_dir, "--cache-dir", &artifacts])
            .with_context(|| format!("the {lang} sample-controller's recorded cases must pass against it"))?;
        ensure!(report.contains("4 passed; 0 failed"), "{lang}: {}", quoted(&report));
    }
    ensure!(ns.api::<Deployment>().get_opt("alpha-web").await?.is_none(), "kubewasm record must not write");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The reboot coordinator in every language, under a simulated node agent
// ---------------------------------------------------------------------------------------------

const REBOOT_NEEDED: &str = "reboot.kubewasm.io/reboot-needed";
const REBOOT_NOW: &str = "reboot.kubewasm.io/reboot-now";
/// Labels the Nodes of one run, for the agent's watch and the cleanup.
const RUN_LABEL: &str = "examples.kubewasm.io/run";
const NODES: usize = 5;
const MAX_UNAVAILABLE: usize = 2;
/// How long the simulated agent keeps a Node down.
const REBOOT_TIME: Duration = Duration::from_millis(500);

/// A Node as the coordinator judges it.
#[derive(Debug, Clone, Copy, Default)]
struct NodeState {
    needed: bool,
    now: bool,
    ready: bool,
}

impl NodeState {
    fn of(node: &Node) -> NodeState {
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        let ready =
            node.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|c| c.iter().find(|c| c.type_ == "Ready")).is_some_and(|c| c.status == "True");
        NodeState { needed: annotations.contains_key(REBOOT_NEEDED), now: annotations.contains_key(REBOOT_NOW), ready }
    }
    fn unavailable(self) -> bool {
        self.now || !self.ready
    }
}

/// What the agent saw, in the API server's order.
#[derive(Debug, Default)]
struct AgentLog {
    nodes: BTreeMap<String, NodeState>,
    /// Nodes in the order they were given `reboot-now`.
    granted: Vec<String>,
    /// The most Nodes unavailable at once, and the states when that was first reached.
    peak: usize,
    peak_at: String,
    rebooted: BTreeMap<String, usize>,
}

impl AgentLog {
    fn observe(&mut self, node: &Node) {
        let name = node.name_any();
        let state = NodeState::of(node);
        let before = self.nodes.insert(name.clone(), state).unwrap_or_default();
        if state.now && !before.now {
            self.granted.push(name);
        }
        let unavailable = self.nodes.values().filter(|s| s.unavailable()).count();
        if unavailable > self.peak {
            self.peak = unavailable;
            self.peak_at = format!("{:?}", self.nodes);
        }
    }
}

fn ready_status(ready: bool) -> Value {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let (status, reason) = if ready { ("True", "KubeletReady") } else { ("False", "KubeletNotReady") };
    json!({"status": {"conditions": [{"type": "Ready", "status": status, "reason": reason, "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
}

/// The node agent's side of one reboot: NotReady, then both annotations removed and Ready again.
async fn reboot(nodes: Api<Node>, name: String, log: Arc<Mutex<AgentLog>>) -> Result<()> {
    nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(ready_status(false))).await?;
    tokio::time::sleep(REBOOT_TIME).await;
    let clear = json!({"metadata": {"annotations": {REBOOT_NEEDED: null, REBOOT_NOW: null}}});
    nodes.patch(&name, &PatchParams::default(), &Patch::Merge(clear)).await?;
    nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(ready_status(true))).await?;
    *log.lock().unwrap().rebooted.entry(name).or_default() += 1;
    Ok(())
}

/// Plays the node agent for the Nodes labeled `run`: watches them, keeps the [`AgentLog`], and
/// reboots every Node given `reboot-now` once.
fn spawn_agent(client: Client, run: &str, log: Arc<Mutex<AgentLog>>) -> tokio::task::JoinHandle<Result<()>> {
    let nodes: Api<Node> = Api::all(client);
    let config = watcher::Config::default().labels(&format!("{RUN_LABEL}={run}"));
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(nodes.clone(), config));
        let mut rebooting = BTreeSet::new();
        let mut reboots = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                event = stream.next() => {
                    let node = match event {
                        Some(Ok(watcher::Event::Apply(node) | watcher::Event::InitApply(node))) => node,
                        Some(_) => continue,
                        None => bail!("the Node watch ended"),
                    };
                    log.lock().unwrap().observe(&node);
                    let state = NodeState::of(&node);
                    if state.now && state.ready && rebooting.insert(node.name_any()) {
                        reboots.spawn(reboot(nodes.clone(), node.name_any(), log.clone()));
                    }
                    // A Node that has finished its reboot may be granted again (it would be a bug).
                    if !state.now && state.ready {
                        rebooting.remove(&node.name_any());
                    }
                }
                Some(done) = reboots.join_next() => done??,
            }
        }
    })
}

/// One round of the coordinator built in `lang`: `NODES` Ready Nodes all ask for a reboot; the
/// agent reboots whatever is granted. Returns the final Nodes (by index, normalized) and the log.
async fn reboot_round(cp: &ControlPlane, lang: &str, wasm: &Path) -> Result<(Value, AgentLog)> {
    let client = cp.client().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let run = unique_name(&format!("reboot-{lang}"));
    let names: Vec<String> = (0..NODES).map(|i| format!("{run}-{i}")).collect();
    let cleanup = NodeCleanup { client: client.clone(), run: run.clone() };
    // Every Node exists and is Ready before the coordinator starts, so none counts as unavailable
    // on its way in.
    for name in &names {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": {RUN_LABEL: run}}}))?;
        nodes.create(&PostParams::default(), &node).await?;
        nodes.patch_status(name, &PatchParams::default(), &Patch::Merge(ready_status(true))).await?;
    }

    let ns = cp.namespace(&format!("reboot-{lang}")).await?;
    let dir = PluginDir::new();
    guests::install(wasm, dir.path(), "reboot-coordinator", Some(&format!("maxUnavailable = {MAX_UNAVAILABLE}\n")));
    let mut host = Host::start(host_config(&format!("reboot-{lang}"), dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let log = Arc::new(Mutex::new(AgentLog::default()));
    let agent = spawn_agent(client.clone(), &run, log.clone());
    eventually(&format!("{lang}: the agent to see the {NODES} Nodes"), CONVERGE, || async {
        let seen = log.lock().unwrap().nodes.len();
        if seen == NODES { Ok(()) } else { Err(anyhow!("{seen} seen")) }
    })
    .await?;
    for name in &names {
        nodes.patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {REBOOT_NEEDED: "true"}}}))).await?;
    }
    let finished = eventually(&format!("{lang}: every Node to reboot once and be back"), CONVERGE, || async {
        if agent.is_finished() {
            return Ok(Err(anyhow!("the agent stopped")));
        }
        let log = log.lock().unwrap();
        let back = log.nodes.values().all(|s| !s.needed && !s.now && s.ready);
        if back && log.rebooted.len() == NODES {
            Ok(Ok(()))
        } else {
            Err(anyhow!("granted {:?}, rebooted {:?}, nodes {:?}", log.granted, log.rebooted, log.nodes))
        }
    })
    .await;
    agent.abort();
    if let Ok(Err(e)) = agent.await {
        return Err(e.context(format!("{lang}: the node agent failed")));
    }
    finished??;
    host.stop().await?;

    let mut snapshot = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut node = normalize(serde_json::to_value(nodes.get(name).await?)?);
        node["metadata"]["name"] = json!(format!("node-{i}"));
        node["metadata"]["labels"][RUN_LABEL] = json!("<run>");
        snapshot.push(json!({"metadata": node["metadata"], "spec": node["spec"], "conditions": node["status"]["conditions"]}));
    }
    drop(cleanup);
    let log = std::mem::take(&mut *log.lock().unwrap());
    Ok((Value::Array(snapshot), log))
}

/// Deletes a run's Nodes (cluster-scoped: no namespace takes them along) when dropped.
struct NodeCleanup {
    client: Client,
    run: String,
}

impl Drop for NodeCleanup {
    fn drop(&mut self) {
        let (client, selector) = (self.client.clone(), format!("{RUN_LABEL}={}", self.run));
        // The test's runtime may be the one dropping us: delete from a thread with its own.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            rt.block_on(async {
                let nodes: Api<Node> = Api::all(client);
                let _ =
                    tokio::time::timeout(Duration::from_secs(10), nodes.delete_collection(&DeleteParams::default(), &ListParams::default().labels(&selector)))
                        .await;
            });
        })
        .join();
    }
}

/// The reboot coordinator in Rust, Python, JavaScript, Go and C: under the same simulated node agent,
/// every Node reboots exactly once, never more than `maxUnavailable` (from the plugin's settings
/// file) are unavailable at once — and that many are, so the setting was read — and the Nodes
/// end identical. The languages run one after another: Nodes are cluster-scoped, and each
/// coordinator counts every Node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reboot_coordinator_keeps_max_unavailable_in_every_language() -> Result<()> {
    let wasms = built_in_every_language("reboot-coordinator").await?;
    let cp = ControlPlane::shared().await;
    // Every language runs, and every problem is reported, before the test fails.
    let mut snapshots = Vec::new();
    let mut problems = Vec::new();
    for (lang, wasm) in &wasms {
        let (nodes, log) = reboot_round(cp, lang, wasm).await?;
        println!("{lang}: reboots granted in order {:?}; at most {} unavailable at once", log.granted, log.peak);
        if log.peak > MAX_UNAVAILABLE {
            problems.push(format!("{lang}: {} Nodes were unavailable at once (maxUnavailable {MAX_UNAVAILABLE}): {}", log.peak, log.peak_at));
        }
        if log.peak < MAX_UNAVAILABLE {
            problems.push(format!(
                "{lang}: never more than {} Node unavailable at once: maxUnavailable = {MAX_UNAVAILABLE} from the settings file was not used",
                log.peak
            ));
        }
        if log.granted.len() != NODES || log.rebooted.values().any(|n| *n != 1) {
            problems.push(format!("{lang}: every Node must reboot exactly once: granted {:?}, rebooted {:?}", log.granted, log.rebooted));
        }
        snapshots.push((*lang, nodes));
    }
    if let Err(e) = assert_identical("the Nodes after a reboot round", &snapshots) {
        problems.push(e.to_string());
    }
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Metacontroller's examples as declarative plugins (issue 24), as their test.sh checks them
// ---------------------------------------------------------------------------------------------

/// How long to watch for something that must not happen.
const QUIET: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------------
// The kubebuilder tutorial's CronJob controller, in Go, Rust and JavaScript
// ---------------------------------------------------------------------------------------------

/// How long a CronJob every minute may take to start its first Job: the next minute boundary,
/// and the host's requeue and the Job's creation after it.
const NEXT_MINUTE: Duration = Duration::from_secs(100);

/// The run time of a Job name `<cronjob>-<unix seconds>`, an RFC 3339 time, or a "next run at"
/// message: each differs with the minute a run happened in.
fn without_run_times(value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Some((prefix, digits)) = s.rsplit_once('-')
                && digits.len() >= 10
                && digits.bytes().all(|b| b.is_ascii_digit())
            {
                *s = format!("{prefix}-<run>");
            } else if s.len() >= 20 && s.contains("T") && s.ends_with('Z') {
                *s = s.split(' ').map(|w| if w.ends_with('Z') && w.contains('T') { "<time>" } else { w }).collect::<Vec<_>>().join(" ");
            }
        }
        Value::Object(map) => map.values_mut().for_each(without_run_times),
        Value::Array(items) => items.iter_mut().for_each(without_run_times),
        _ => {}
    }
}

/// The CronJob example in `lang`, as the tutorial runs it: a CronJob every minute gets the
/// status of a scheduled CronJob at once, its first Job at the next minute (named after the run,
/// controlled by the CronJob, with the template's labels, annotations and containers, listed as
/// active with the run as the last schedule time), then is suspended. Returns the CronJob's
/// status at each step and the Job, without run times.
async fn cronjob_run(cp: &ControlPlane, ar: &ApiResource, lang: &str, wasm: &Path) -> Result<Value> {
    let ns = cp.namespace(&format!("cronjob-{lang}")).await?;
    let dir = PluginDir::new();
    guests::install(wasm, dir.path(), "cronjob", None);
    let mut host = Host::start(host_config(&format!("cronjob-{lang}"), dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let cronjobs: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), ar);
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = ns.api();
    let spec = json!({
        "schedule": "* * * * *",
        "concurrencyPolicy": "Forbid",
        "jobTemplate": {
            "metadata": {"labels": {"app": "hello"}, "annotations": {"team": "batch"}},
            "spec": {"template": {"spec": {"containers": [{"name": "hello", "image": "busybox", "args": ["/bin/sh", "-c", "date"]}], "restartPolicy": "OnFailure"}}},
        },
    });
    cronjobs.create(&PostParams::default(), &DynamicObject::new("hello", ar).data(json!({ "spec": spec }))).await?;
    let condition = |cronjob: &DynamicObject, status: &str, reason: &str| {
        let conditions = cronjob.data.get("status").and_then(|s| s["conditions"].as_array());
        conditions.into_iter().flatten().any(|c| c["type"] == "Available" && c["status"] == status && c["reason"] == reason)
    };
    let status_of = |cronjob: DynamicObject| {
        let mut status = normalize(serde_json::to_value(&cronjob)?)["status"].take();
        without_run_times(&mut status);
        if let Some(active) = status.get_mut("active").and_then(Value::as_array_mut) {
            active.iter_mut().for_each(|r| r["uid"] = json!("<uid>"));
            active.iter_mut().for_each(|r| r["namespace"] = json!("<namespace>"));
        }
        anyhow::Ok(status)
    };
    let scheduled = eventually(&format!("{lang}: the new CronJob to report its next run"), CONVERGE, || async {
        let cronjob = cronjobs.get("hello").await?;
        if condition(&cronjob, "True", "Scheduled") { Ok(cronjob) } else { Err(anyhow!("status {:?}", cronjob.data.get("status"))) }
    })
    .await?;

    let job = eventually(&format!("{lang}: the first run's Job"), NEXT_MINUTE, || async {
        jobs.list(&ListParams::default()).await?.items.into_iter().next().ok_or_else(|| anyhow!("no Job yet"))
    })
    .await?;
    let run = job.metadata.annotations.as_ref().and_then(|a| a.get("batch.tutorial.kubebuilder.io/scheduled-at")).cloned().unwrap_or_default();
    let run_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
        serde_json::from_value(json!(run)).with_context(|| format!("{lang}: the Job's scheduled-at {run:?}"))?;
    let unix = run_time.0.as_second();
    ensure!(job.metadata.name.as_deref() == Some(&format!("hello-{unix}")), "{lang}: the Job {:?} is not named after its run {run}", job.metadata.name);
    ensure!(unix % 60 == 0, "{lang}: the run {run} is not on a minute");
    let running = eventually(&format!("{lang}: the CronJob to list its running Job"), CONVERGE, || async {
        let cronjob = cronjobs.get("hello").await?;
        let status = cronjob.data.get("status").cloned().unwrap_or_default();
        if status["lastScheduleTime"] == json!(run) && status["active"][0]["name"] == json!(format!("hello-{unix}")) {
            Ok(cronjob)
        } else {
            Err(anyhow!("status {status}"))
        }
    })
    .await?;

    cronjobs.patch("hello", &PatchParams::default(), &Patch::Merge(json!({"spec": {"suspend": true}}))).await?;
    let suspended = eventually(&format!("{lang}: the suspended CronJob to say so"), CONVERGE, || async {
        let cronjob = cronjobs.get("hello").await?;
        if condition(&cronjob, "False", "Suspended") { Ok(cronjob) } else { Err(anyhow!("status {:?}", cronjob.data.get("status"))) }
    })
    .await?;
    let jobs_now = jobs.list(&ListParams::default()).await?.items.len();
    ensure!(jobs_now == 1, "{lang}: Forbid with a running Job, then suspended: {jobs_now} Jobs");

    let mut job = serde_json::to_value(&job)?;
    let mut job = json!({
        "metadata": {"name": job["metadata"]["name"].take(), "labels": job["metadata"]["labels"]["app"].take(),
                     "annotations": job["metadata"]["annotations"].take(), "ownerReferences": job["metadata"]["ownerReferences"].take()},
        "containers": job["spec"]["template"]["spec"]["containers"].take(),
    });
    job["metadata"]["ownerReferences"][0]["uid"] = json!("<uid>");
    without_run_times(&mut job);
    host.stop().await?;
    Ok(json!({"scheduled": status_of(scheduled)?, "running": status_of(running)?, "suspended": status_of(suspended)?, "job": job}))
}

/// The CronJob example in Go (typed k8s.io/api Jobs, robfig/cron), Rust (k8s-openapi, croner),
/// JavaScript (croner), Python (`kubewasm.k8s` Jobs, croniter) and C (its own cron parser), side
/// by side: each runs the tutorial's CronJob as `cronjob_run` says, and what they leave is
/// identical.
#[tokio::test]
async fn cronjob_runs_alike_in_every_language() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let crd = &crds("examples/cronjob/manifests/crd.yaml")?[0];
    let ar = apply_crd(&cp.client().await?, crd, CONVERGE).await?;
    let wasms = built_in_every_language("cronjob").await?;
    // Side by side: each waits for a minute boundary.
    let runs = futures::future::join_all(wasms.iter().map(|(lang, wasm)| cronjob_run(cp, &ar, lang, wasm))).await;
    let mut snapshots = Vec::new();
    for ((lang, _), run) in wasms.iter().zip(runs) {
        snapshots.push((*lang, run.with_context(|| format!("the CronJob example in {lang}"))?));
    }
    assert_identical("the CronJob statuses and Job of the CronJob example", &snapshots)
}

/// The CRDs of a YAML file of one or more documents.
fn crds(path: &str) -> Result<Vec<CustomResourceDefinition>> {
    let text = std::fs::read_to_string(workspace_root().join(path))?;
    text.split("\n---").filter(|doc| doc.contains("kind: CustomResourceDefinition")).map(|doc| Ok(serde_saphyr::from_str(doc)?)).collect()
}

/// The ConfigMap `name` in `ns`, once `check` accepts it.
async fn config_map_in(client: &Client, ns: &str, name: &str, what: &str, check: impl Fn(&ConfigMap) -> bool) -> Result<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    Ok(eventually(&format!("ConfigMap {ns}/{name} {what}"), CONVERGE, || async {
        match api.get_opt(name).await? {
            Some(cm) if check(&cm) => Ok(cm),
            Some(cm) => Err(anyhow!("it is {:?}", cm.data)),
            None => Err(anyhow!("it does not exist")),
        }
    })
    .await?)
}

fn value_of(cm: &ConfigMap, key: &str) -> Option<String> {
    cm.data.as_ref().and_then(|d| d.get(key).cloned())
}

/// configmap-propagation in `lang`: Metacontroller's test.sh (the copies in the three target
/// namespaces, `actual_copies` 3, none for the `version=v2` propagation), then a change of the
/// source reaching every copy in place. Returns the copies and the status it left.
async fn propagation_run(cp: &ControlPlane, lang: &str, wasm: &Path) -> Result<Value> {
    let client = cp.client().await?;
    let mut namespaces = BTreeMap::new();
    for role in ["original", "one", "two", "three", "four", "five"] {
        namespaces.insert(role, cp.namespace(&format!("cmp-{lang}-{role}")).await?);
    }
    let ns = |role: &str| namespaces[role].name().to_string();
    let dir = PluginDir::new();
    guests::install(wasm, dir.path(), "configmap-propagation", None);
    let mut config = host_config(&format!("cmp-{lang}"), dir.path(), cp.kubeconfig_path(), &ns("original"));
    for role in ["one", "two", "three", "four", "five"] {
        config = config.namespace(&ns(role));
    }
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;

    let source: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "settings"}, "data": {"some": "value", "other": "value"}}))?;
    Api::<ConfigMap>::namespaced(client.clone(), &ns("original")).create(&PostParams::default(), &source).await?;
    let crd = &crds("examples/configmap-propagation/manifests/crd.yaml")?[0];
    let ar = apply_crd(&client, crd, CONVERGE).await?;
    let propagations: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let propagation = |name: &str, version: &str, targets: &[&str]| -> Result<DynamicObject> {
        let targets: Vec<String> = targets.iter().map(|t| ns(t)).collect();
        let spec = json!({"sourceName": "settings", "sourceNamespace": ns("original"), "targetNamespaces": targets});
        let mut object = DynamicObject::new(name, &ar).data(json!({ "spec": spec }));
        object.metadata.labels = Some([("version".to_string(), version.to_string())].into());
        Ok(object)
    };
    let managed = format!("settings-propagation-{lang}");
    let unmanaged = format!("settings-propagation-unmanaged-{lang}");
    propagations.create(&PostParams::default(), &propagation(&managed, "v1", &["one", "two", "three"])?).await?;
    propagations.create(&PostParams::default(), &propagation(&unmanaged, "v2", &["four", "five"])?).await?;

    for role in ["one", "two", "three"] {
        config_map_in(&client, &ns(role), "settings", "to be copied", |_| true).await?;
    }
    let status = eventually(&format!("{lang}: {managed}'s status to count 3 copies"), CONVERGE, || async {
        let p = propagations.get(&managed).await?;
        let status = p.data.get("status").cloned().unwrap_or_default();
        if status["actual_copies"] == json!(3) && status["observedGeneration"] == json!(p.metadata.generation) {
            Ok(status)
        } else {
            Err(anyhow!("status {status}"))
        }
    })
    .await?;
    tokio::time::sleep(QUIET).await;
    for role in ["four", "five"] {
        let copy = Api::<ConfigMap>::namespaced(client.clone(), &ns(role)).get_opt("settings").await?;
        ensure!(copy.is_none(), "{lang}: the version=v2 propagation was served: a copy in {role}");
    }

    // The source changes: every copy follows, in place.
    Api::<ConfigMap>::namespaced(client.clone(), &ns("original"))
        .patch("settings", &PatchParams::default(), &Patch::Merge(json!({"data": {"some": "changed"}})))
        .await?;
    let mut copies = Vec::new();
    for role in ["one", "two", "three"] {
        let copy = config_map_in(&client, &ns(role), "settings", "to follow the source", |cm| value_of(cm, "some").as_deref() == Some("changed")).await?;
        let mut copy = normalize(serde_json::to_value(&copy)?);
        // The parent and the namespaces differ between the runs, and so the digest of each copy.
        copy["metadata"]["labels"]["kubewasm.io/controller-uid"] = json!("<parent uid>");
        copy["metadata"]["annotations"]["kubewasm.io/applied"] = json!("<digest>");
        copy["metadata"]["ownerReferences"][0]["name"] = json!("<parent>");
        copy["target"] = json!(role);
        copies.push(copy);
    }
    for name in [&managed, &unmanaged] {
        propagations.delete(name, &DeleteParams::default()).await?;
    }
    host.stop().await?;
    Ok(json!({"copies": copies, "status": status}))
}

/// configmap-propagation in Python and in Rust: each passes Metacontroller's test, and the
/// copies and status they leave are identical.
#[tokio::test]
async fn configmap_propagation_copies_alike_in_python_and_rust() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let mut runs = Vec::new();
    for lang in ["python", "rust"] {
        let wasm = built("configmap-propagation", lang).await?;
        runs.push((lang, propagation_run(cp, lang, &wasm).await?));
    }
    assert_identical("the copies and status of configmap-propagation", &runs)
}

/// crd-roles (JavaScript): an annotated CRD gets its `<name>-reader` ClusterRole, owned by it (the
/// garbage collector deletes it with the CRD); an unannotated one gets none; the CRD's status
/// stays the API server's.
#[tokio::test]
async fn crd_roles_gives_annotated_crds_their_reader_role() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let client = cp.client().await?;
    let wasm = built("crd-roles", "js").await?;
    let ns = cp.namespace("crd-roles").await?;
    let dir = PluginDir::new();
    guests::install(&wasm, dir.path(), "crd-roles", None);
    let mut host = Host::start(host_config("crd-roles", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let mut example = crds("examples/crd-roles/manifests/my-crd.yaml")?.remove(0);
    let plural = unique_name("roletests");
    example.metadata.name = Some(format!("{plural}.ctl.rlg.io"));
    example.spec.names.plural = plural.clone();
    example.spec.names.singular = None;
    example.spec.names.kind = format!("R{}", plural.replace('-', ""));
    let mut plain = example.clone();
    let plain_plural = format!("{plural}-plain");
    plain.metadata.name = Some(format!("{plain_plural}.ctl.rlg.io"));
    plain.metadata.annotations = None;
    plain.spec.names.plural = plain_plural.clone();
    plain.spec.names.kind = format!("P{}", plural.replace('-', ""));
    apply_crd(&client, &example, CONVERGE).await?;
    apply_crd(&client, &plain, CONVERGE).await?;
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role_name = format!("{plural}.ctl.rlg.io-reader");
    let crd_uid = crd_api.get(&format!("{plural}.ctl.rlg.io")).await?.uid();
    let role = eventually("the reader ClusterRole", CONVERGE, || async { roles.get_opt(&role_name).await?.ok_or_else(|| anyhow!("not yet")) }).await?;
    ensure!(
        role.owner_references().iter().any(|r| r.controller == Some(true) && Some(&r.uid) == crd_uid.as_ref()),
        "owned by its CRD: {:?}",
        role.metadata.owner_references
    );
    ensure!(role.rules.as_ref().is_none_or(|r| r.is_empty()), "no rules: {:?}", role.rules);
    tokio::time::sleep(QUIET).await;
    ensure!(roles.get_opt(&format!("{plain_plural}.ctl.rlg.io-reader")).await?.is_none(), "an unannotated CRD got a role");
    let status = crd_api.get(&format!("{plural}.ctl.rlg.io")).await?.status.unwrap_or_default();
    ensure!(status.conditions.iter().flatten().any(|c| c.type_ == "Established"), "the CRD's own status is left alone: {status:?}");

    crd_api.delete(&format!("{plural}.ctl.rlg.io"), &DeleteParams::default()).await?;
    crd_api.delete(&format!("{plain_plural}.ctl.rlg.io"), &DeleteParams::default()).await?;
    eventually("the role to go with its CRD", Duration::from_secs(120), || async {
        if roles.get_opt(&role_name).await?.is_none() { Ok(()) } else { Err(anyhow!("still there")) }
    })
    .await?;
    host.stop().await?;
    Ok(())
}

/// update-strategy (Go), the plugin installed twice (`on-delete-demo`, `recreate-demo`), through
/// the phases of Metacontroller's test.sh: out-of-band fields recreate nothing; a new
/// configData recreates the RecreateDemo's ConfigMap (once: no loop) and leaves the
/// OnDeleteDemo's alone until it is deleted by hand.
#[tokio::test]
async fn update_strategy_recreates_or_waits_as_metacontrollers_test_says() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let client = cp.client().await?;
    let wasm = built("update-strategy", "go").await?;
    let ns = cp.namespace("update-strategy").await?;
    let dir = PluginDir::new();
    for name in ["on-delete-demo", "recreate-demo"] {
        let settings = std::fs::read_to_string(workspace_root().join(format!("examples/update-strategy/manifests/{name}.toml")))?;
        guests::install(&wasm, dir.path(), name, Some(&settings));
    }
    let mut host = Host::start(host_config("update-strategy", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    let mut kinds = BTreeMap::new();
    for crd in crds("examples/update-strategy/manifests/crds.yaml")? {
        let ar = apply_crd(&client, &crd, CONVERGE).await?;
        kinds.insert(ar.kind.clone(), Api::<DynamicObject>::namespaced_with(client.clone(), ns.name(), &ar));
    }
    host.wait_ready(READY).await?;
    let cms: Api<ConfigMap> = ns.api();
    for (kind, name) in [("OnDeleteDemo", "odd-instance"), ("RecreateDemo", "rcd-instance")] {
        let object: DynamicObject =
            serde_json::from_value(json!({"apiVersion": "ctl.example.com/v1", "kind": kind, "metadata": {"name": name}, "spec": {"configData": "v1"}}))?;
        kinds[kind].create(&PostParams::default(), &object).await?;
    }
    let value = |want: &'static str| move |cm: &ConfigMap| value_of(cm, "value").as_deref() == Some(want);
    // Phase 1: both ConfigMaps, with v1.
    for name in ["odd-instance-data", "rcd-instance-data"] {
        config_map_in(&client, ns.name(), name, "with v1", value("v1")).await?;
    }
    // Phase 2: a field added out of band recreates nothing.
    for name in ["odd-instance-data", "rcd-instance-data"] {
        cms.patch(name, &PatchParams::default(), &Patch::Merge(json!({"data": {"side-effect": "injected"}}))).await?;
    }
    let before = cms.get("rcd-instance-data").await?.uid();
    tokio::time::sleep(QUIET).await;
    let after = cms.get("rcd-instance-data").await?;
    ensure!(after.uid() == before && value_of(&after, "side-effect").as_deref() == Some("injected"), "an out-of-band field recreated the child");
    // Phase 3: a new configData recreates the RecreateDemo's ConfigMap, once.
    for (kind, name) in [("OnDeleteDemo", "odd-instance"), ("RecreateDemo", "rcd-instance")] {
        kinds[kind].patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"configData": "v2"}}))).await?;
    }
    let recreated = config_map_in(&client, ns.name(), "rcd-instance-data", "recreated with v2", value("v2")).await?;
    ensure!(recreated.uid() != before && value_of(&recreated, "side-effect").is_none(), "recreated, not updated: {:?}", recreated.data);
    cms.patch("rcd-instance-data", &PatchParams::default(), &Patch::Merge(json!({"data": {"side-effect": "injected"}}))).await?;
    tokio::time::sleep(QUIET).await;
    ensure!(cms.get("rcd-instance-data").await?.uid() == recreated.uid(), "a recreate loop");
    // OnDelete: untouched until deleted by hand, then made anew.
    let odd = cms.get("odd-instance-data").await?;
    ensure!(
        value_of(&odd, "value").as_deref() == Some("v1") && value_of(&odd, "side-effect").as_deref() == Some("injected"),
        "on-delete updated: {:?}",
        odd.data
    );
    cms.delete("odd-instance-data", &DeleteParams::default()).await?;
    let remade = config_map_in(&client, ns.name(), "odd-instance-data", "made again with v2", value("v2")).await?;
    ensure!(value_of(&remade, "side-effect").is_none());
    host.stop().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// kubewasm new
// ---------------------------------------------------------------------------------------------

/// Runs the `kubewasm` binary with `args` in `dir`; its stdout, or an error with both outputs.
fn kubewasm(dir: &Path, args: &[&str]) -> Result<String> {
    let bin = kubewasm_binary()?;
    let output = Command::new(&bin).current_dir(dir).args(args).env("RUST_LOG", "warn").output()?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(output.status.success(), "kubewasm {} failed ({}):\n{}{}", args.join(" "), output.status, quoted(&stdout), String::from_utf8_lossy(&output.stderr));
    Ok(stdout)
}

/// Builds a scaffolded project as its README says: the component `NAME.wasm` in the project.
fn build_scaffold(lang: &str, mode: &str, project: &Path, name: &str) -> Result<PathBuf> {
    let wasm = project.join(format!("{name}.wasm"));
    match lang {
        "rust" => {
            // The workspace's target directory: the SDK's dependencies are already built there.
            let target = guests::target_dir();
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let output = Command::new(cargo)
                .current_dir(project)
                .env("CARGO_TARGET_DIR", &target)
                .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
                .output()?;
            ensure!(output.status.success(), "cargo build of the Rust scaffold failed:\n{}", String::from_utf8_lossy(&output.stderr));
            std::fs::copy(target.join(kubewasm::tools::scaffold::artifact(kubewasm::tools::scaffold::Lang::Rust, name)), &wasm)?;
        }
        // Built as the README says (`kubewasm-py build app.py`, `kubewasm-js build app.js`);
        // kept by digest, so an unchanged scaffold and SDK are not rebuilt on every run.
        "python" => _ = std::fs::copy(guests::cached_plugin(lang, &project.join("app.py"), &format!("scaffold-{mode}-python")), &wasm)?,
        "js" => _ = std::fs::copy(guests::cached_plugin(lang, &project.join("app.js"), &format!("scaffold-{mode}-js")), &wasm)?,
        // As the README and the Makefile say: the unit tests, then `kubewasm build --lang go`.
        "go" => {
            let output = Command::new("go").current_dir(project).args(["test", "./..."]).output()?;
            ensure!(
                output.status.success(),
                "go test in the Go scaffold failed:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            kubewasm(project, &["build", "--lang", "go", ".", "-o", &wasm.to_string_lossy()])?;
        }
        // As the README and the Makefile say.
        "c" => _ = kubewasm(project, &["build", "--lang", "c", ".", "-o", &wasm.to_string_lossy()])?,
        other => bail!("unknown language {other}"),
    }
    Ok(wasm)
}

/// `kubewasm new --lang LANG --mode MODE` makes a project that builds without edits, that
/// `kubewasm check` loads, and whose own table-test cases pass.
async fn scaffold(lang: &'static str, mode: &'static str) -> Result<()> {
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::Builder::new().prefix(&format!("kubewasm-new-{lang}-")).tempdir()?;
        // One name per mode: the Rust builds share a target directory.
        let name = if mode == "declarative" { "cm-summaries" } else { "cm-summary" };
        let created = kubewasm(dir.path(), &["new", "--lang", lang, "--mode", mode, name])?;
        ensure!(created.contains(&format!("kubewasm test {name}.wasm cases")), "kubewasm new printed:\n{created}");
        ensure!(created.contains(&format!("It uses the {lang} SDK at /")), "kubewasm new names the SDK it uses:\n{created}");
        let project = dir.path().join(name);
        ensure!(project.join("README.md").is_file() && project.join("cases").is_dir(), "{created}");
        let wasm = build_scaffold(lang, mode, &project, name)?;
        let cache = format!("--cache-dir={}", artifact_cache_dir().display());
        let check = kubewasm(&project, &["check", &cache, &wasm.to_string_lossy()])?;
        ensure!(check.contains(&format!("Name:            {name}\n")), "kubewasm check printed:\n{check}");
        ensure!(check.contains("Declarative:") == (mode == "declarative"), "kubewasm check printed:\n{check}");
        ensure!(check.contains(&format!("selector {name}.example.com/enabled=true")), "kubewasm check printed:\n{check}");
        let test = kubewasm(&project, &["test", &cache, &wasm.to_string_lossy(), "cases"])?;
        ensure!(test.contains("test result: ok. 2 passed; 0 failed"), "kubewasm test printed:\n{}", quoted(&test));
        // A refusal the plugin does not make fails the case.
        let wrong = project.join("wrong-cases");
        std::fs::create_dir(&wrong)?;
        std::fs::write(wrong.join("refuses-a-good-suffix.yaml"), "settings: {suffix: fine}\nexpect: {refused: suffix must be}\n")?;
        let failed = Command::new(kubewasm_binary()?).current_dir(&project).args(["test", &cache, &wasm.to_string_lossy(), "wrong-cases"]).output()?;
        let report = String::from_utf8_lossy(&failed.stdout);
        ensure!(!failed.status.success() && report.contains("the settings were accepted"), "kubewasm test of a wrong refusal printed:\n{}", quoted(&report));
        // Nothing is overwritten.
        let again = Command::new(kubewasm_binary()?).current_dir(dir.path()).args(["new", "--lang", lang, name]).output()?;
        ensure!(!again.status.success(), "kubewasm new overwrote a project");
        let error = String::from_utf8_lossy(&again.stderr);
        ensure!(error.trim().lines().count() == 1 && error.contains("not empty"), "{error}");
        Ok(())
    })
    .await?
}

macro_rules! scaffold_tests {
    ($($test:ident: $lang:literal, $mode:literal;)*) => {$(
        #[tokio::test]
        async fn $test() -> Result<()> {
            scaffold($lang, $mode).await
        }
    )*};
}

scaffold_tests! {
    new_rust_project_builds_checks_and_passes_its_case: "rust", "controller";
    new_python_project_builds_checks_and_passes_its_case: "python", "controller";
    new_js_project_builds_checks_and_passes_its_case: "js", "controller";
    new_go_project_builds_checks_and_passes_its_case: "go", "controller";
    new_c_project_builds_checks_and_passes_its_case: "c", "controller";
    new_declarative_rust_project_builds_checks_and_passes_its_case: "rust", "declarative";
    new_declarative_python_project_builds_checks_and_passes_its_case: "python", "declarative";
    new_declarative_js_project_builds_checks_and_passes_its_case: "js", "declarative";
    new_declarative_go_project_builds_checks_and_passes_its_case: "go", "declarative";
}

#[test]
fn new_refuses_a_name_that_is_not_a_dns_label() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let output = Command::new(kubewasm_binary()?).current_dir(dir.path()).args(["new", "--lang", "js", "My_Plugin"]).output()?;
    ensure!(!output.status.success(), "accepted My_Plugin");
    let error = String::from_utf8_lossy(&output.stderr);
    ensure!(error.trim().lines().count() == 1 && error.contains("DNS-1123"), "{error}");
    ensure!(std::fs::read_dir(dir.path())?.next().is_none(), "wrote something anyway");
    Ok(())
}

/// The typed models of the Python SDK (`kubewasm.k8s`) and the JS SDK (`@kubewasm/sdk/k8s`) are
/// what `scripts/k8s-types.py` generates from the OpenAPI v3 schema of the control plane the
/// suite runs: a Kubernetes upgrade that changes a common kind fails here until they are
/// regenerated.
#[tokio::test]
async fn the_sdks_kubernetes_types_follow_the_api_servers_schema() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let output = Command::new("python3")
        .arg(workspace_root().join("scripts/k8s-types.py"))
        .args(["--check", "--kubeconfig"])
        .arg(cp.kubeconfig_path())
        .env("KUBECTL", kubewasm_tests::kubectl_path()?)
        .output()?;
    ensure!(output.status.success(), "the generated types are stale:\n{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Ok(())
}
