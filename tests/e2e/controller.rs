//! End-to-end tests of the controller runtime (issue 4): the real `kubewasm run` binary against
//! the local control plane, with the Rust sample-controller and the suite's `e2e-guest`.
//!
//! `cargo test -p kubewasm-tests --test controller`
//!
//! Every test runs its own host processes (on free loopback ports, restricted to the test's
//! namespace); the tests that count watches on the API server or restart it get a dedicated
//! control plane, the others share one.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use kubewasm_tests::plugindir::OUTPUT_LABEL;
use kubewasm_tests::prom::apiserver_watches;
use kubewasm_tests::{ControlPlane, E2eSettings, Host, HostConfig, Options, PluginDir, apply_crd, eventually, guests};
use serde_json::json;
use support::*;

const READY: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// The sample-controller
// ---------------------------------------------------------------------------------------------

fn foo_crd() -> CustomResourceDefinition {
    let yaml = include_str!("../../examples/sample-controller/manifests/crd.yaml");
    serde_saphyr::from_str(yaml).expect("the sample-controller's CRD parses")
}

/// A host running the Rust sample-controller in `ns`, with the Foo CRD installed.
async fn sample_controller(cp: &ControlPlane, ns: &str) -> Result<(Host, PluginDir, ApiResource)> {
    let foos = apply_crd(&cp.client().await?, &foo_crd(), CONVERGE).await?;
    let dir = PluginDir::new();
    let wasm = guests::guest("sample-controller", "sample_controller");
    guests::install(&wasm, dir.path(), "sample-controller", None);
    let mut host = Host::start(host_config("sample", dir.path(), cp.kubeconfig_path(), ns)).await?;
    host.wait_ready(READY).await?;
    Ok((host, dir, foos))
}

fn new_foo(ar: &ApiResource, name: &str, deployment: &str, replicas: i64) -> DynamicObject {
    DynamicObject::new(name, ar).data(json!({"spec": {"deploymentName": deployment, "replicas": replicas}}))
}

fn status_of(object: &DynamicObject) -> (Option<i64>, Option<i64>) {
    let status = object.data.get("status");
    let field = |f: &str| status.and_then(|s| s.get(f)).and_then(|v| v.as_i64());
    (field("availableReplicas"), field("observedGeneration"))
}

/// Marks the Deployment's Pods Ready (there is no kubelet), so that the ReplicaSet and
/// Deployment controllers count them available.
async fn mark_pods_ready(pods: &Api<Pod>, selector: &str) -> Result<usize> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
    let mut marked = 0;
    for pod in pods.list(&ListParams::default().labels(selector)).await?.items {
        let ready = pod.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if !ready && pod.metadata.deletion_timestamp.is_none() {
            pods.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&status)).await?;
            marked += 1;
        }
    }
    Ok(marked)
}

/// Waits until the Foo's status says `replicas` available and its current generation observed,
/// making the Pods Ready as they appear.
async fn wait_foo_status(foos: &Api<DynamicObject>, pods: &Api<Pod>, name: &str, replicas: i64) -> Result<i64> {
    let what = format!("Foo {name} to report {replicas} available replicas for its current generation");
    Ok(eventually(&what, CONVERGE, || async {
        mark_pods_ready(pods, &format!("controller={name}")).await?;
        let object = foos.get(name).await?;
        let generation = object.metadata.generation.context("a Foo has a generation")?;
        match status_of(&object) {
            (Some(available), Some(observed)) if available == replicas && observed == generation => Ok(generation),
            other => Err(anyhow!("generation {generation}, status (availableReplicas, observedGeneration) = {other:?}")),
        }
    })
    .await?)
}

/// A Foo gets a Deployment it controls; its status follows the Deployment's available replicas
/// and the Foo's generation; deleting the Foo removes the Deployment through the API's garbage
/// collector.
#[tokio::test]
async fn sample_controller_keeps_a_deployment_and_the_foo_status() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("sample").await?;
    let (host, _dir, ar) = sample_controller(cp, ns.name()).await?;
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &ar);
    let deployments: Api<Deployment> = ns.api();
    let pods: Api<Pod> = ns.api();

    let created = foos.create(&PostParams::default(), &new_foo(&ar, "alpha", "alpha-web", 1)).await?;
    let uid = created.uid().context("a created Foo has a uid")?;
    let deployment = eventually("the Deployment alpha-web", CONVERGE, || async { deployments.get("alpha-web").await }).await?;
    let owner = deployment.owner_references().first().cloned().context("the Deployment has an owner reference")?;
    ensure!(owner.kind == "Foo" && owner.name == "alpha" && owner.uid == uid && owner.controller == Some(true), "owner reference {owner:?}");
    ensure!(deployment.spec.replicas == Some(1));

    let generation = wait_foo_status(&foos, &pods, "alpha", 1).await?;
    ensure!(generation == 1, "a new Foo is at generation 1, not {generation}");

    // A spec change bumps the generation; the Deployment and the status follow.
    foos.patch("alpha", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 2}}))).await?;
    eventually("the Deployment to ask for 2 replicas", CONVERGE, || async {
        let d = deployments.get("alpha-web").await?;
        match d.spec.replicas {
            Some(2) => Ok(()),
            other => Err(anyhow!("replicas {other:?}")),
        }
    })
    .await?;
    let generation = wait_foo_status(&foos, &pods, "alpha", 2).await?;
    ensure!(generation == 2, "the spec change must bump the generation to 2, not {generation}");

    // Deleting the Foo deletes the Deployment: the garbage collector follows the owner reference.
    foos.delete("alpha", &DeleteParams::default()).await?;
    eventually("the garbage collector to delete the Deployment", CONVERGE, || async {
        match deployments.get_opt("alpha-web").await? {
            None => Ok(()),
            Some(d) => Err(anyhow!("still there (deletionTimestamp {:?})", d.metadata.deletion_timestamp)),
        }
    })
    .await?;
    let reconciles = host.metric("controller_runtime_reconcile_total", &[("controller", "sample-controller"), ("result", "success")]).await?;
    ensure!(reconciles >= 3.0, "expected several successful reconciles, got {reconciles}");
    host.stop().await?;
    Ok(())
}

/// A Deployment of the name a Foo asks for, not owned by that Foo, gets a Warning Event on the
/// Foo and is left exactly as it was.
#[tokio::test]
async fn sample_controller_leaves_a_deployment_it_does_not_own_alone() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("sample-unowned").await?;
    let deployments: Api<Deployment> = ns.api();
    let theirs: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "theirs"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "theirs"}},
            "template": {"metadata": {"labels": {"app": "theirs"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }))?;
    let before = deployments.create(&PostParams::default(), &theirs).await?;

    let (host, _dir, ar) = sample_controller(cp, ns.name()).await?;
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &ar);
    foos.create(&PostParams::default(), &new_foo(&ar, "beta", "theirs", 3)).await?;

    let event = wait_event(ns.client(), ns.name(), "beta", "ErrResourceExists", "\"theirs\" already exists").await?;
    ensure!(event.type_.as_deref() == Some("Warning"), "{event:?}");
    ensure!(event.reporting_controller.as_deref() == Some("kubewasm/sample-controller"), "{event:?}");

    // The Event is sent by the reconcile that decided not to touch the Deployment.
    let after = deployments.get("theirs").await?;
    ensure!(after.owner_references().is_empty(), "the Deployment got owners: {:?}", after.owner_references());
    ensure!(after.spec.replicas == Some(1), "the Deployment's replicas changed: {:?}", after.spec);
    let managers: Vec<String> = after.managed_fields().iter().filter_map(|m| m.manager.clone()).collect();
    ensure!(!managers.iter().any(|m| m.starts_with("kubewasm")), "the plugin wrote to the Deployment: managers {managers:?}");
    ensure!(after.metadata.generation == before.metadata.generation, "the Deployment's spec changed");
    host.stop().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The e2e guest
// ---------------------------------------------------------------------------------------------

fn inputs(names: &[&str], input: &str) -> BTreeMap<String, String> {
    names.iter().map(|n| (n.to_string(), input.to_string())).collect()
}

/// Plugins that read ConfigMaps share one watch whatever their label selectors, seen from the API
/// server: its gauge of open WATCH requests for configmaps goes up by one for a host running
/// three (no selector, the default one, another one), and by one more for a second host (which
/// shows that a watch per plugin would be visible). Each still sees only what it selects.
#[tokio::test]
async fn two_plugins_reading_configmaps_share_one_watch() -> Result<()> {
    // Dedicated, with only the namespace controller: nothing else opens or closes configmap
    // watches while this test counts them.
    let cp = ControlPlane::start_with(Options::new().controllers(["namespace"])).await?;
    let client = cp.client().await?;
    let ns = cp.namespace("shared-watch").await?;
    let cms: Api<ConfigMap> = ns.api();
    let watches = || apiserver_watches(&client, "", "configmaps");
    let baseline = watches().await?;

    // Cluster-wide (no --namespace), so the watch is the host's only configmap watch.
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("reader-a").selector(""), "v01");
    dir.install_e2e(&E2eSettings::new("reader-b"), "v01");
    dir.install_e2e(&E2eSettings::new("reader-other").selector("e2e.kubewasm.io/other=yes"), "v01");
    let config = HostConfig::new("shared", dir.path(), cp.kubeconfig_path()).status_configmap(ns.name(), STATUS);
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;

    // Both plugins work (each writes its own output), fed by one watch.
    let want = inputs(&["in"], "x");
    create_primaries(&cms, &want).await?;
    wait_outputs(&cms, "reader-a", &want, Want::default()).await?;
    wait_outputs(&cms, "reader-b", &want, Want::default()).await?;
    // An object only the third selector selects reaches only the third plugin.
    let mut other_only = primary("other-only", "o");
    other_only.metadata.labels = Some([("e2e.kubewasm.io/other".to_string(), "yes".to_string())].into());
    cms.create(&PostParams::default(), &other_only).await?;
    wait_outputs(&cms, "reader-other", &inputs(&["other-only"], "o"), Want::default()).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    ensure!(output(&cms, "other-only", "reader-b").await?.is_none(), "reader-b's selector does not select other-only");
    let expect_one = |n: f64| if n == baseline + 1.0 { Ok(n) } else { Err(anyhow!("{n} configmap watches open, baseline {baseline}")) };
    eventually("one more configmap watch than before the host", CONVERGE, || async { expect_one(watches().await?) }).await?;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        expect_one(watches().await?).context("two plugins must share the host's one configmap watch")?;
    }

    // A second host with one such plugin opens a watch of its own: the gauge counts per watch.
    let other = PluginDir::new();
    other.install_e2e(&E2eSettings::new("reader-c").selector(""), "v01");
    let config = HostConfig::new("other", other.path(), cp.kubeconfig_path()).status_configmap(ns.name(), "other-status");
    let mut second = Host::start(config).await?;
    second.wait_ready(READY).await?;
    wait_outputs(&cms, "reader-c", &want, Want::default()).await?;
    eventually("a second host to add a second watch", CONVERGE, || async {
        let n = watches().await?;
        if n == baseline + 2.0 { Ok(()) } else { Err(anyhow!("{n} configmap watches, baseline {baseline}")) }
    })
    .await?;
    second.stop().await?;
    host.stop().await?;
    Ok(())
}

/// A second writer keeps changing the objects the plugin updates (with their resourceVersion):
/// the plugin's updates conflict, are retried without a Warning Event, and everything converges.
#[tokio::test]
async fn a_conflict_storm_converges_without_warning_events() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("storm").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("storm").mode("update").max_concurrency(2), "v01");
    let mut host = Host::start(host_config("storm", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let names = ["s0", "s1", "s2", "s3"];
    create_primaries(&cms, &inputs(&names, "0")).await?;

    // Two writers change the inputs for a few seconds, as fast as the API lets them.
    let storm_for = Duration::from_secs(4);
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let cms = cms.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let mut n = 0u32;
                while started.elapsed() < storm_for {
                    let name = names[(n as usize + w) % names.len()];
                    set_input(&cms, name, &format!("w{w}-{n}")).await?;
                    n += 1;
                }
                Ok::<_, anyhow::Error>(n)
            })
        })
        .collect();
    let mut writes = 0;
    for writer in writers {
        writes += writer.await??;
    }

    // Converged: every output annotation matches the input the writers left.
    eventually("every object's output to match its last input", CONVERGE, || async {
        let mut wrong = Vec::new();
        for name in names {
            let cm = cms.get(name).await?;
            let input = cm.annotations().get(INPUT).cloned().unwrap_or_default();
            let output = cm.annotations().get(OUTPUT).cloned();
            if output.as_deref() != Some(&format!("v01:{input}")) {
                wrong.push(format!("{name}: input {input}, output {output:?}"));
            }
        }
        if wrong.is_empty() { Ok(()) } else { Err(anyhow!("{}", wrong.join("; "))) }
    })
    .await?;

    // The storm did cause conflicts (else this test proves nothing) ...
    let errors = host.metric("controller_runtime_reconcile_errors_total", &[("controller", "storm")]).await?;
    ensure!(errors > 0.0, "{writes} competing writes caused no failed (conflicting) update; the test needs a stronger storm");
    // ... and none became a Warning Event.
    assert_no_warnings_but_sentinel(&ns, "sentinel").await?;
    eprintln!("conflict storm: {writes} competing writes, {errors} conflicting reconciles retried");
    host.stop().await?;
    Ok(())
}

/// Plugin faults in a running host — a trap, and a reconcile that computes forever — each become
/// a Warning Event on the object and a count in `kubewasm_plugin_faults_total`; the faulting
/// plugin goes on serving its other objects, and another plugin on the same objects is not
/// disturbed at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_faults_give_events_and_metrics_and_everything_keeps_serving() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("faults").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    let victim = E2eSettings::new("victim");
    // A short deadline, from the operator's side of the settings file.
    let settings = format!("{}\n[kubewasm]\ndeadline-ms = 1000\n", victim.to_toml());
    dir.install("victim", &kubewasm_tests::plugindir::e2e_variant("v01"), Some(&settings));
    dir.install_e2e(&E2eSettings::new("bystander"), "v01");
    let mut host = Host::start(host_config("faults", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let all = inputs(&["healthy", "traps", "spins"], "1");
    create_primaries(&cms, &inputs(&["healthy"], "1")).await?;
    for (name, knob) in [("traps", TRAP), ("spins", SPIN)] {
        let mut object = primary(name, "1");
        object.metadata.annotations.get_or_insert_with(Default::default).insert(knob.into(), "victim".into());
        cms.create(&PostParams::default(), &object).await?;
    }

    wait_event(ns.client(), ns.name(), "traps", "PluginFault", "trapped").await?;
    wait_event(ns.client(), ns.name(), "spins", "PluginFault", "ran past its deadline of 1000 ms").await?;
    for kind in ["trap", "deadline"] {
        let n = host.wait_metric("kubewasm_plugin_faults_total", &[("plugin", "victim"), ("kind", kind)], CONVERGE, |n| n >= 1.0).await?;
        eprintln!("victim: {n} fault(s) of kind {kind}");
    }
    // The bystander reconciled every object, the victim the healthy one; and both keep serving.
    wait_outputs(&cms, "bystander", &all, Want::default()).await?;
    set_input(&cms, "healthy", "2").await?;
    wait_outputs(&cms, "victim", &inputs(&["healthy"], "2"), Want::default()).await?;
    wait_outputs(&cms, "bystander", &inputs(&["healthy"], "2"), Want::default()).await?;
    ensure!(host.metric("kubewasm_plugin_faults_total", &[("plugin", "bystander")]).await? == 0.0, "the bystander faulted");
    host.stop().await?;
    Ok(())
}

/// A poison object (one that makes the plugin trap) is quarantined after K faults in a row: one
/// `Quarantined` Event, no more calls or retries, the metrics say so, and the other objects keep
/// reconciling. A change to the object releases it (here the change also ends the trap, so it is
/// reconciled); so does a new version of the plugin (which is handed the object again, faults K
/// times more, and quarantines it again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_object_is_quarantined_until_it_or_the_plugin_changes() -> Result<()> {
    const K: f64 = 3.0;
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("quarantine").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("victim"), "v01");
    let config = host_config("quarantine", dir.path(), cp.kubeconfig_path(), ns.name()).arg(format!("--quarantine-after={K}"));
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    let plugin = [("plugin", "victim")];
    let traps = [("plugin", "victim"), ("kind", "trap")];

    create_primaries(&cms, &inputs(&["healthy"], "1")).await?;
    let mut poison = primary("poison", "1");
    poison.metadata.annotations.get_or_insert_with(Default::default).insert(TRAP.into(), "victim".into());
    cms.create(&PostParams::default(), &poison).await?;
    host.wait_metric("kubewasm_plugin_quarantines_total", &plugin, CONVERGE, |n| n == 1.0).await?;
    wait_event(ns.client(), ns.name(), "poison", "Quarantined", "faulted 3 times in a row").await?;
    ensure!(host.metric("kubewasm_plugin_quarantined_objects", &plugin).await? == 1.0, "one object quarantined");
    ensure!(host.metric("kubewasm_plugin_faults_total", &traps).await? == K, "K traps, then no more");
    let listed = format!("quarantined=1 keys={}/poison", ns.name());
    let status_entry = || async { anyhow::Ok(cms.get(STATUS).await?.data.and_then(|d| d.get("victim").cloned()).unwrap_or_default()) };
    eventually("the status to list the quarantined object", CONVERGE, || async {
        let entry = status_entry().await?;
        if entry.contains(&listed) { Ok(()) } else { Err(anyhow!("the status entry is {entry:?}")) }
    })
    .await?;

    // The others keep reconciling; the poison object is not retried (with backoff it would have
    // trapped many times over by now), and its quarantine is one Event, not one per try.
    set_input(&cms, "healthy", "2").await?;
    wait_outputs(&cms, "victim", &inputs(&["healthy"], "2"), Want::default()).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(host.metric("kubewasm_plugin_faults_total", &traps).await? == K, "a quarantined object must not be retried");
    let quarantined = |all: &[k8s_openapi::api::events::v1::Event]| {
        all.iter().filter(|e| e.reason.as_deref() == Some("Quarantined")).map(|e| e.series.as_ref().map_or(1, |s| s.count)).sum::<i32>()
    };
    let all = events(ns.client(), ns.name()).await?;
    ensure!(quarantined(&all) == 1, "one Quarantined Event:\n  {}", describe_events(&all));

    // A change to the object releases it.
    annotate(&cms, "poison", &[(TRAP, None), (INPUT, Some("2"))]).await?;
    wait_outputs(&cms, "victim", &inputs(&["poison"], "2"), Want::default()).await?;
    host.wait_metric("kubewasm_plugin_quarantined_objects", &plugin, CONVERGE, |n| n == 0.0).await?;
    eventually("the status to drop the released object", CONVERGE, || async {
        let entry = status_entry().await?;
        if entry.contains("quarantined=") { Err(anyhow!("the status entry is {entry:?}")) } else { Ok(()) }
    })
    .await?;

    // So does a new version of the plugin: quarantined again, then released by a hot reload.
    annotate(&cms, "poison", &[(TRAP, Some("victim"))]).await?;
    host.wait_metric("kubewasm_plugin_quarantines_total", &plugin, CONVERGE, |n| n == 2.0).await?;
    ensure!(host.metric("kubewasm_plugin_faults_total", &traps).await? == 2.0 * K, "K more traps");
    dir.install_e2e(&E2eSettings::new("victim"), "v02");
    wait_outputs(&cms, "victim", &inputs(&["healthy"], "2"), Want { variant: Some("v02"), ..Default::default() }).await?;
    host.wait_metric("kubewasm_plugin_quarantines_total", &plugin, CONVERGE, |n| n == 3.0).await?;
    ensure!(host.metric("kubewasm_plugin_faults_total", &traps).await? == 3.0 * K, "the new version was handed the object K times");
    ensure!(host.metric("kubewasm_plugin_quarantined_objects", &plugin).await? == 1.0, "quarantined again");
    host.stop().await?;
    Ok(())
}

/// The finalizer of the `keeper` plugin.
const KEEPER_FINALIZER: &str = "e2e.kubewasm.io/cleanup";

/// A host running the `keeper` plugin (with a finalizer) in a namespace of its own, and one
/// primary `object` it has reconciled and put its finalizer on.
struct Keeper {
    cms: Api<ConfigMap>,
    host: Host,
    _dir: PluginDir,
    _ns: kubewasm_tests::TestNamespace,
}

impl Keeper {
    async fn start(label: &str, object: &str) -> Result<Keeper> {
        let cp = ControlPlane::shared().await;
        let ns = cp.namespace(label).await?;
        let cms: Api<ConfigMap> = ns.api();
        let dir = PluginDir::new();
        dir.install_e2e(&E2eSettings::new("keeper").finalizer(KEEPER_FINALIZER), "v01");
        let mut host = Host::start(host_config("keeper", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
        host.wait_ready(READY).await?;
        let want = inputs(&[object], "1");
        create_primaries(&cms, &want).await?;
        wait_outputs(&cms, "keeper", &want, Want::default()).await?;
        let finalizers = cms.get(object).await?.finalizers().to_vec();
        ensure!(finalizers.iter().any(|f| f == KEEPER_FINALIZER), "the finalizer was not added: {finalizers:?}");
        Ok(Keeper { cms, host, _dir: dir, _ns: ns })
    }
}

/// The plugin's finalizer is added before its first reconcile; a deletion waits while
/// `finalize` asks for more time and completes once it is done.
#[tokio::test]
async fn deletion_waits_for_the_finalizer() -> Result<()> {
    let Keeper { cms, host, _dir, _ns } = Keeper::start("finalizer", "held").await?;

    let finalizer = KEEPER_FINALIZER;
    cms.delete("held", &DeleteParams::default()).await?;
    // finalize ran and asked to wait ...
    let record = "held.keeper.finalized";
    eventually("finalize to run and wait", CONVERGE, || async {
        match cms.get_opt(record).await?.and_then(|cm| cm.data).and_then(|d| d.get("state").cloned()) {
            Some(state) if state == "waiting" => Ok(()),
            other => Err(anyhow!("finalize record state {other:?}")),
        }
    })
    .await?;
    // ... so the object is still there, being deleted, with the finalizer.
    let pending = cms.get("held").await.context("the object must wait for its finalizer")?;
    ensure!(pending.metadata.deletion_timestamp.is_some(), "no deletionTimestamp");
    ensure!(pending.finalizers().iter().any(|f| f == finalizer), "finalizer gone early: {:?}", pending.finalizers());

    // Let finalize finish: the finalizer is removed and the deletion completes.
    annotate(&cms, "held", &[(RELEASE, Some("true"))]).await?;
    eventually("the deletion to complete", CONVERGE, || async {
        match cms.get_opt("held").await? {
            None => Ok(()),
            Some(cm) => Err(anyhow!("still there with finalizers {:?}", cm.finalizers())),
        }
    })
    .await?;
    let state = cms.get(record).await?.data.and_then(|d| d.get("state").cloned());
    ensure!(state.as_deref() == Some("done"), "finalize's record says {state:?}");
    host.stop().await?;
    Ok(())
}

/// A primary that leaves the plugin's selector (its label removed) loses the host's finalizer
/// with it: the plugin no longer sees the object, so nothing else would ever take it off, and a
/// later deletion would wait forever (audit M5).
#[tokio::test]
async fn a_primary_that_leaves_the_selector_loses_the_finalizer() -> Result<()> {
    let Keeper { cms, host, _dir, _ns } = Keeper::start("unselected", "leaving").await?;
    let finalizer = KEEPER_FINALIZER;

    cms.patch("leaving", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {PRIMARY: null}}}))).await?;
    eventually("the finalizer to go with the label", CONVERGE, || async {
        let object = cms.get("leaving").await?;
        if object.finalizers().iter().any(|f| f == finalizer) { Err(anyhow!("still {:?}", object.finalizers())) } else { Ok(()) }
    })
    .await?;
    cms.delete("leaving", &DeleteParams::default()).await?;
    eventually("the deletion to complete", CONVERGE, || async {
        match cms.get_opt("leaving").await? {
            None => Ok(()),
            Some(cm) => Err(anyhow!("still there with finalizers {:?}", cm.finalizers())),
        }
    })
    .await?;
    host.stop().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Leader election
// ---------------------------------------------------------------------------------------------

/// One write of an output ConfigMap as the API server's watch reported it.
#[derive(Debug, Clone)]
struct Write {
    at: Instant,
    object: String,
    host: String,
}

impl std::fmt::Display for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} by {}", self.object, self.host)
    }
}

fn list(writes: &[Write]) -> String {
    writes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// Records every change to the outputs of plugin `plugin` in `ns`, in the API server's order.
fn record_writes(client: Client, ns: &str, plugin: &str) -> (Arc<Mutex<Vec<Write>>>, tokio::task::JoinHandle<()>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let api: Api<ConfigMap> = Api::namespaced(client, ns);
    let config = watcher::Config::default().labels(&format!("{OUTPUT_LABEL}={plugin}"));
    let sink = log.clone();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(api, config));
        let mut last_rv: BTreeMap<String, String> = BTreeMap::new();
        while let Some(event) = stream.next().await {
            let (watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = (match event {
                Ok(e) => e,
                Err(_) => continue,
            }) else {
                continue;
            };
            // A re-list repeats objects: keep each resourceVersion once.
            let rv = cm.resource_version().unwrap_or_default();
            if last_rv.insert(cm.name_any(), rv.clone()) == Some(rv) {
                continue;
            }
            let data = cm.data.clone().unwrap_or_default();
            sink.lock().unwrap().push(Write { at: Instant::now(), object: cm.name_any(), host: data.get("host").cloned().unwrap_or_default() });
        }
    });
    (log, task)
}

/// Two hosts elect a leader; only the leader reconciles. SIGKILL on the leader: the standby
/// takes over once the lease has expired (15 s) and not before, and the writes of the two never
/// interleave. Then SIGTERM on the new leader releases the lease, and a third host takes over at
/// once.
#[tokio::test]
async fn the_standby_takes_over_when_the_leader_dies() -> Result<()> {
    const LEASE: Duration = Duration::from_secs(15);
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("leader").await?;
    let cms: Api<ConfigMap> = ns.api();
    let lease = "e2e-leader";
    let host_dir = |host: &str| {
        let dir = PluginDir::new();
        dir.install_e2e(&E2eSettings::new("elected").host(host), "v01");
        dir
    };
    let elected = |name: &str, dir: &PluginDir| host_config(name, dir.path(), cp.kubeconfig_path(), ns.name()).leader_elect(ns.name(), lease);
    let status = [("name", lease)];
    let (writes, recorder) = record_writes(ns.client().clone(), ns.name(), "elected");

    let names = ["e0", "e1", "e2"];
    let mut want = inputs(&names, "1");
    create_primaries(&cms, &want).await?;

    let (dir1, dir2) = (host_dir("h1"), host_dir("h2"));
    let mut h1 = Host::start(elected("h1", &dir1)).await?;
    h1.wait_ready(READY).await?;
    h1.wait_metric("leader_election_master_status", &status, CONVERGE, |v| v == 1.0).await?;
    let mut h2 = Host::start(elected("h2", &dir2)).await?;
    h2.wait_ready(READY).await.context("a standby is ready too")?;
    wait_outputs(&cms, "elected", &want, Want { host: Some("h1"), ..Want::default() }).await?;

    // Both run; changes keep coming; only the leader reconciles.
    for round in 2..=4 {
        for name in names {
            set_input(&cms, name, &round.to_string()).await?;
            want.insert(name.into(), round.to_string());
        }
        wait_outputs(&cms, "elected", &want, Want { host: Some("h1"), ..Want::default() }).await?;
    }
    ensure!(h2.metric("leader_election_master_status", &status).await? == 0.0, "h2 must be a standby");
    let standby_reconciles = h2.metric("controller_runtime_reconcile_total", &[("controller", "elected")]).await?;
    ensure!(standby_reconciles == 0.0, "the standby reconciled {standby_reconciles} times");

    // The leader dies without releasing its lease.
    h1.kill();
    let killed = Instant::now();
    h1.wait_exit(Duration::from_secs(10)).await?;
    for name in names {
        set_input(&cms, name, "after-kill").await?;
        want.insert(name.into(), "after-kill".into());
    }
    wait_outputs(&cms, "elected", &want, Want { host: Some("h2"), ..Want::default() }).await?;
    ensure!(h2.metric("leader_election_master_status", &status).await? == 1.0, "h2 must lead now");

    {
        let writes = writes.lock().unwrap();
        let first_h2 = writes.iter().position(|w| w.host == "h2").context("h2 never wrote")?;
        let took = writes[first_h2].at.duration_since(killed);
        // The standby must wait a whole lease duration after the last renewal it saw (at most a
        // retry period, 2 s, before the kill), and should not need much more.
        ensure!(took >= LEASE - Duration::from_secs(3), "the standby wrote {took:?} after the leader died: before its lease could have expired");
        ensure!(took <= LEASE + Duration::from_secs(8), "the standby took {took:?} to take over (lease {LEASE:?})");
        ensure!(writes[first_h2..].iter().all(|w| w.host == "h2"), "the old leader wrote after the new one: {}", list(&writes[first_h2..]));
        ensure!(writes[..first_h2].iter().all(|w| w.host == "h1"), "writes before the takeover: {}", list(&writes[..first_h2]));
        eprintln!("takeover {took:?} after SIGKILL; {} writes recorded", writes.len());
    }

    // A graceful stop releases the lease: a new standby takes over without waiting for expiry.
    let dir3 = host_dir("h3");
    let mut h3 = Host::start(elected("h3", &dir3)).await?;
    h3.wait_ready(READY).await?;
    let stopping = Instant::now();
    h2.stop().await?;
    h3.wait_metric("leader_election_master_status", &status, LEASE, |v| v == 1.0).await?;
    let took = stopping.elapsed();
    ensure!(took < LEASE - Duration::from_secs(5), "after a released lease the takeover took {took:?}");
    for name in names {
        set_input(&cms, name, "after-release").await?;
        want.insert(name.into(), "after-release".into());
    }
    wait_outputs(&cms, "elected", &want, Want { host: Some("h3"), ..Want::default() }).await?;
    recorder.abort();
    h3.stop().await?;
    drop(h1);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Shutdown and control-plane restarts
// ---------------------------------------------------------------------------------------------

/// SIGTERM while a reconcile runs: the host lets it finish, exits cleanly within its grace
/// period, and a new host picks up what changed meanwhile.
#[tokio::test]
async fn sigterm_during_a_long_reconcile_loses_nothing() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("sigterm").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("slowpoke"), "v01");
    let config = host_config("slowpoke", dir.path(), cp.kubeconfig_path(), ns.name()).grace_period(Duration::from_secs(20));
    let mut host = Host::start(config.clone()).await?;
    host.wait_ready(READY).await?;
    let mut want = inputs(&["a", "b", "c"], "1");
    create_primaries(&cms, &want).await?;
    wait_outputs(&cms, "slowpoke", &want, Want::default()).await?;

    // A reconcile that takes 3 s (the plugin's deadline is 5 s).
    annotate(&cms, "a", &[(SLEEP_MS, Some("3000")), (INPUT, Some("2"))]).await?;
    want.insert("a".into(), "2".into());
    host.wait_metric("controller_runtime_active_workers", &[("controller", "slowpoke")], CONVERGE, |v| v == 1.0).await?;
    host.terminate();
    let signalled = Instant::now();
    // Changes while the host stops: whoever runs next must see them.
    set_input(&cms, "b", "2").await?;
    want.insert("b".into(), "2".into());
    cms.create(&PostParams::default(), &primary("d", "1")).await?;
    want.insert("d".into(), "1".into());

    let status = host.wait_exit(Duration::from_secs(30)).await?;
    let took = signalled.elapsed();
    let log = host.log_text();
    ensure!(status.success(), "the host exited with {status} after SIGTERM\n{}", host.log_tail(40));
    ensure!(!log.contains("stopping now"), "the host did not stop gracefully:\n{}", host.log_tail(40));
    ensure!(log.contains("woke up"), "the long reconcile did not finish:\n{}", host.log_tail(40));
    let a = output(&cms, "a", "slowpoke").await?;
    ensure!(a.as_ref().and_then(|d| d.get("input")).map(String::as_str) == Some("2"), "the running reconcile must finish before exit; output {a:?}");
    eprintln!("graceful stop took {took:?}");
    drop(host);

    let mut next = Host::start(config).await?;
    next.wait_ready(READY).await?;
    wait_outputs(&cms, "slowpoke", &want, Want::default()).await?;
    next.stop().await?;
    Ok(())
}

/// The control plane restarts under a running host: its watches recover (re-list and watch
/// again) and later changes are reconciled.
#[tokio::test]
async fn watches_recover_when_the_control_plane_restarts() -> Result<()> {
    // Stopped with SIGKILL if not gone in 5 s: with watches open, its graceful stop takes a
    // minute (the API server waits for them); a crash is as good a restart for this test.
    let options = Options::new().controllers(["namespace"]).stop_timeout(Duration::from_secs(5));
    let mut cp = ControlPlane::start_with(options).await?;
    let ns = cp.namespace("restart").await?;
    let ns_name = ns.name().to_string();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("phoenix"), "v01");
    let mut host = Host::start(host_config("phoenix", dir.path(), cp.kubeconfig_path(), &ns_name)).await?;
    host.wait_ready(READY).await?;
    let mut want = inputs(&["a", "b"], "1");
    {
        let cms: Api<ConfigMap> = Api::namespaced(cp.client().await?, &ns_name);
        create_primaries(&cms, &want).await?;
        wait_outputs(&cms, "phoenix", &want, Want::default()).await?;
    }

    let port = cp.port();
    let restarting = Instant::now();
    cp.restart().await.map_err(|e| anyhow!("restarting the control plane: {e}"))?;
    eprintln!("the control plane restarted in {:?}", restarting.elapsed());
    ensure!(cp.port() == port, "the control plane came back on another port ({} → {}): the host cannot follow", port, cp.port());

    let cms: Api<ConfigMap> = Api::namespaced(cp.client().await?, &ns_name);
    set_input(&cms, "a", "2").await?;
    want.insert("a".into(), "2".into());
    cms.create(&PostParams::default(), &primary("c", "1")).await?;
    want.insert("c".into(), "1".into());
    cms.delete("b", &DeleteParams::default()).await?;
    want.remove("b");
    // The watches come back after their backoff (kube's: up to 30 s between attempts, and the
    // first watch after the restart is usually refused as too old, which costs one more).
    let recovering = Instant::now();
    wait_outputs_within(&cms, "phoenix", &want, Want::default(), Duration::from_secs(150)).await?;
    eprintln!("converged {:?} after the restart", recovering.elapsed());
    ensure!(host.try_status().is_none(), "the host exited during the restart");
    host.wait_ready(READY).await?;
    host.stop().await?;
    drop(ns);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Finalizers left behind, and objects moving between primaries
// ---------------------------------------------------------------------------------------------

/// A plugin removed while objects still carry its finalizer: each object gets a Warning Event
/// saying what to run, the status ConfigMap keeps the plugin's finalizer, a deleted object
/// stays (Terminating), and `kubewasm finalizers release NAME` takes the finalizer off, so the
/// deleted object goes and the others are free.
#[tokio::test]
async fn a_removed_plugins_leftover_finalizers_are_reported_and_released() -> Result<()> {
    const FINALIZER: &str = "e2e.kubewasm.io/leftover";
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("leftover").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("keeper").finalizer(FINALIZER), "v01");
    let mut host = Host::start(host_config("leftover", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let names = ["l0", "l1", "l2"];
    create_primaries(&cms, &inputs(&names, "1")).await?;
    wait_outputs(&cms, "keeper", &inputs(&names, "1"), Want::default()).await?;
    let carrying = |cm: &ConfigMap| cm.finalizers().iter().any(|f| f == FINALIZER);
    eventually("every primary to carry the finalizer", CONVERGE, || async {
        let without: Vec<String> =
            cms.list(&ListParams::default().labels(PRIMARY)).await?.items.iter().filter(|cm| !carrying(cm)).map(|cm| cm.name_any()).collect();
        if without.is_empty() { Ok(()) } else { Err(anyhow!("without: {without:?}")) }
    })
    .await?;

    dir.remove("keeper");
    for name in names {
        wait_event(ns.client(), ns.name(), name, "FinalizerLeftBehind", "kubewasm finalizers release keeper").await?;
    }
    let listed = eventually("the status ConfigMap to keep keeper's finalizer", CONVERGE, || async {
        let status = cms.get(STATUS).await?;
        let entry = status.data.and_then(|d| d.get("keeper").cloned()).unwrap_or_default();
        if entry.contains(FINALIZER) { Ok(entry) } else { Err(anyhow!("keeper: {entry:?}")) }
    })
    .await?;
    cms.delete("l0", &DeleteParams::default()).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = cms.get("l0").await?;
    ensure!(held.metadata.deletion_timestamp.is_some() && carrying(&held), "l0 should be Terminating, held by the finalizer");

    let bin = tokio::task::spawn_blocking(kubewasm_tests::kubewasm_binary).await??;
    let output = tokio::process::Command::new(bin)
        .args(["finalizers", "release", "keeper"])
        .arg(format!("--kubeconfig={}", cp.kubeconfig_path().display()))
        .arg(format!("--status-configmap={}/{STATUS}", ns.name()))
        .output()
        .await?;
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    ensure!(output.status.success(), "kubewasm finalizers release failed: {said}");
    eventually("the deleted object to go and the others to be free", CONVERGE, || async {
        let left: Vec<String> = cms
            .list(&ListParams::default().labels(PRIMARY))
            .await?
            .items
            .iter()
            .filter(|cm| carrying(cm) || cm.name_any() == "l0")
            .map(|cm| cm.name_any())
            .collect();
        if left.is_empty() { Ok(()) } else { Err(anyhow!("still held or present: {left:?}")) }
    })
    .await?;
    eprintln!("status entry: {listed}; release said: {}", said.trim());
    host.stop().await?;
    Ok(())
}

/// A watched object `map-related` keeps trapping on is set aside after `--quarantine-after`
/// faults in a row (a Warning Event on it), not retried forever; once it changes it is mapped
/// again, and its primary reconciled.
#[tokio::test]
async fn a_watched_object_that_map_related_keeps_faulting_on_is_set_aside_until_it_changes() -> Result<()> {
    const PARENT: &str = "e2e.kubewasm.io/parent";
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("map-poison").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("mapper").map_label(PARENT), "v01");
    let mut host = Host::start(host_config("map-poison", dir.path(), cp.kubeconfig_path(), ns.name()).arg("--quarantine-after=3")).await?;
    host.wait_ready(READY).await?;
    create_primaries(&cms, &inputs(&["a"], "1")).await?;
    wait_outputs(&cms, "mapper", &inputs(&["a"], "1"), Want::default()).await?;
    let child = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("poison".into()),
            labels: Some([(PARENT.to_string(), "a".to_string())].into()),
            annotations: Some([(TRAP.to_string(), "mapper".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    cms.create(&PostParams::default(), &child).await?;
    let event = wait_event(ns.client(), ns.name(), "poison", "Quarantined", "map-related of mapper faulted 3 times").await?;
    ensure!(event.type_.as_deref() == Some("Warning"), "{event:?}");
    let traps = [("plugin", "mapper"), ("kind", "trap")];
    let faults = host.metric("kubewasm_plugin_faults_total", &traps).await?;
    ensure!(faults == 3.0, "three faults, then set aside: {faults}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(host.metric("kubewasm_plugin_faults_total", &traps).await? == faults, "not retried once set aside");

    // Changed (no longer asking to trap): mapped again, and `a` reconciled because of it.
    let reconciles =
        |log: &str| log.lines().filter(|l| l.contains(&format!("key={}/a ", ns.name())) && l.contains("mapped") && l.contains("reconciled a ")).count();
    let before = reconciles(&host.log_text());
    cms.patch("poison", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {TRAP: null}}}))).await?;
    eventually("a mapped reconcile of a", CONVERGE, || async {
        if reconciles(&host.log_text()) > before { Ok(()) } else { Err(anyhow!("no mapped reconcile of a since the change")) }
    })
    .await?;
    host.stop().await?;
    Ok(())
}

/// A watched child whose label moves from primary `a` to primary `b` makes the host reconcile
/// both: `map-related` sees its old state (mapping to `a`) as well as its new one (to `b`).
#[tokio::test]
async fn moving_a_child_between_primaries_reconciles_both() -> Result<()> {
    const PARENT: &str = "e2e.kubewasm.io/parent";
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("mapping").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("parents").map_label(PARENT), "v01");
    let mut host = Host::start(host_config("mapping", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    create_primaries(&cms, &inputs(&["a", "b"], "1")).await?;
    wait_outputs(&cms, "parents", &inputs(&["a", "b"], "1"), Want::default()).await?;

    // Reconciles of `name` the host logged as caused by a mapped object.
    let mapped = |log: &str, name: &str| {
        let key = format!("key={}/{name} ", ns.name());
        log.lines().filter(|l| l.contains(&key) && l.contains("mapped") && l.contains(&format!("reconciled {name} "))).count()
    };
    let child = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("child".into()), labels: Some([(PARENT.to_string(), "a".to_string())].into()), ..Default::default() },
        ..Default::default()
    };
    cms.create(&PostParams::default(), &child).await?;
    eventually("the child to map to a", CONVERGE, || async {
        let log = host.log_text();
        if mapped(&log, "a") >= 1 { Ok(()) } else { Err(anyhow!("no mapped reconcile of a yet")) }
    })
    .await?;
    let log = host.log_text();
    let (a_before, b_before) = (mapped(&log, "a"), mapped(&log, "b"));
    cms.patch("child", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {PARENT: "b"}}}))).await?;
    eventually("both a and b to be reconciled after the move", CONVERGE, || async {
        let log = host.log_text();
        let (a, b) = (mapped(&log, "a"), mapped(&log, "b"));
        if a > a_before && b > b_before { Ok(()) } else { Err(anyhow!("a: {a_before} -> {a}, b: {b_before} -> {b}")) }
    })
    .await?;
    host.stop().await?;
    Ok(())
}

/// `map-related` runs only on the leader (M9): a standby keeps the changes of watched objects
/// waiting and runs no plugin code for them; when it takes over it maps what waited, so no
/// primary misses the reconcile its watched objects asked for.
#[tokio::test]
async fn map_related_runs_only_on_the_leader_and_a_standby_catches_up() -> Result<()> {
    const LEASE: Duration = Duration::from_secs(15);
    const PARENT: &str = "e2e.kubewasm.io/parent";
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("map-leader").await?;
    let cms: Api<ConfigMap> = ns.api();
    let lease = "e2e-map-leader";
    let host_dir = || {
        let dir = PluginDir::new();
        dir.install_e2e(&E2eSettings::new("mapper").map_label(PARENT), "v01");
        dir
    };
    let elected = |name: &str, dir: &PluginDir| host_config(name, dir.path(), cp.kubeconfig_path(), ns.name()).leader_elect(ns.name(), lease);
    let status = [("name", lease)];
    let names = ["p0", "p1", "p2", "p3", "p4"];
    create_primaries(&cms, &inputs(&names, "1")).await?;
    let (dir1, dir2) = (host_dir(), host_dir());
    let mut h1 = Host::start(elected("h1", &dir1)).await?;
    h1.wait_ready(READY).await?;
    h1.wait_metric("leader_election_master_status", &status, CONVERGE, |v| v == 1.0).await?;
    let mut h2 = Host::start(elected("h2", &dir2)).await?;
    h2.wait_ready(READY).await?;

    // 50 watched objects, each naming a primary.
    for i in 0..50 {
        let watched = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("w-{i}")),
                labels: Some([(PARENT.to_string(), names[i % names.len()].to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        cms.create(&PostParams::default(), &watched).await?;
    }
    let mapped = [("name", "mapper-map-related")];
    h1.wait_metric("workqueue_work_duration_seconds_count", &mapped, CONVERGE, |v| v >= 50.0).await.context("the leader maps every watched object")?;
    let standby_calls = h2.metric("workqueue_work_duration_seconds_count", &mapped).await?;
    ensure!(standby_calls == 0.0, "the standby ran map-related {standby_calls} times");
    ensure!(h2.metric("kubewasm_plugin_instances", &[("plugin", "mapper")]).await? == 0.0, "the standby instantiated the plugin");
    let waiting = h2.metric("workqueue_depth", &mapped).await?;
    ensure!(waiting >= 50.0, "the standby kept {waiting} watched objects waiting, not 50");

    // The leader dies; the standby takes over and maps what waited.
    h1.kill();
    h2.wait_metric("leader_election_master_status", &status, LEASE * 3, |v| v == 1.0).await.context("h2 takes over")?;
    h2.wait_metric("workqueue_work_duration_seconds_count", &mapped, CONVERGE, |v| v >= 50.0).await.context("the new leader maps what waited")?;
    let every_primary = names.len() as f64;
    h2.wait_metric("kubewasm_reconcile_reasons_total", &[("controller", "mapper"), ("reason", "mapped")], CONVERGE, |v| v >= every_primary)
        .await
        .context("every primary reconciled for its watched objects")?;
    let metrics = h2.metrics().await?;
    ensure!(kubewasm_tests::prom::sum(&metrics, "kubewasm_plugin_mapped_dropped_total", &[("plugin", "mapper")]) == 0.0, "watched objects were left out");
    h2.stop().await?;
    Ok(())
}

/// What `related` says for a primary whose watched objects have `inputs` (as the guest spells
/// it: `NAME=INPUT`, sorted, comma-separated).
fn related(inputs: &BTreeMap<String, String>) -> String {
    let mut entries: Vec<String> = inputs.iter().map(|(name, input)| format!("{name}={input}")).collect();
    entries.sort();
    entries.join(",")
}

/// Waits until every primary's output lists exactly its watched objects' current inputs.
async fn wait_related(cms: &Api<ConfigMap>, plugin: &str, want: &BTreeMap<String, BTreeMap<String, String>>, timeout: Duration) -> Result<()> {
    eventually(&format!("{plugin}'s outputs to show their watched objects' inputs"), timeout, || async {
        let mut wrong = Vec::new();
        for (primary, watched) in want {
            let have = output(cms, primary, plugin).await?.and_then(|d| d.get("related").cloned());
            if have.as_deref() != Some(related(watched).as_str()) {
                wrong.push(format!("{primary}: {have:?}"));
            }
        }
        if wrong.is_empty() { Ok(()) } else { Err(anyhow!("{} stale: {}", wrong.len(), wrong.join("; "))) }
    })
    .await?;
    Ok(())
}

/// `map-related` under churn (audit M9): 50 watched objects, five per primary, change 20 times
/// each as fast as the test can patch them, with a 10 ms `map-related`: every primary ends up
/// reconciled with its watched objects' last inputs (read from the cache: nothing missed), and
/// nothing was dropped. Then the backlog is forced to overflow: 10 300 fillers whose mapping
/// takes a second each fill its 10 000 places, and every watched object changes once more while
/// it is full — those changes are left out (counted in `kubewasm_plugin_mapped_dropped_total`),
/// and the host reconciles every primary instead, so each still shows the last inputs. (Before,
/// a full backlog dropped changes silently: those primaries stayed stale until the 10 h
/// resync.) Prints the churn's catch-up time, map calls and drops.
#[tokio::test]
async fn map_related_under_churn_misses_nothing_even_when_its_backlog_overflows() -> Result<()> {
    const PARENT: &str = "e2e.kubewasm.io/parent";
    const PRIMARIES: usize = 10;
    const WATCHED: usize = 50;
    const FILLERS: usize = 10_300;
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("map-churn").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    let settings = format!("{}[kubewasm]\nqps = 100.0\nburst = 100\n", E2eSettings::new("churn").map_label(PARENT).related().map_sleep_ms(10).to_toml());
    dir.install("churn", &kubewasm_tests::plugindir::e2e_variant("v01"), Some(&settings));
    let mut host = Host::start(host_config("map-churn", dir.path(), cp.kubeconfig_path(), ns.name()).grace_period(Duration::from_secs(2))).await?;
    host.wait_ready(READY).await?;
    let plugin = [("plugin", "churn")];
    let names: Vec<String> = (0..PRIMARIES).map(|i| format!("p{i}")).collect();
    create_primaries(&cms, &names.iter().map(|n| (n.clone(), "1".to_string())).collect()).await?;
    let watched = |input: &str| -> BTreeMap<String, BTreeMap<String, String>> {
        let mut want: BTreeMap<String, BTreeMap<String, String>> = names.iter().map(|n| (n.clone(), BTreeMap::new())).collect();
        for i in 0..WATCHED {
            want.get_mut(&names[i % PRIMARIES]).expect("a primary").insert(format!("w{i}"), input.to_string());
        }
        want
    };
    let child = |name: String, parent: &str, annotations: &[(&str, &str)]| ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name),
            labels: Some([(PARENT.to_string(), parent.to_string())].into()),
            annotations: Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        ..Default::default()
    };
    for i in 0..WATCHED {
        cms.create(&PostParams::default(), &child(format!("w{i}"), &names[i % PRIMARIES], &[(INPUT, "0")])).await?;
    }
    wait_related(&cms, "churn", &watched("0"), CONVERGE).await.context("the watched objects as created")?;

    // Churn: 20 rounds over every watched object.
    let churned = Instant::now();
    for round in 1..=20 {
        for i in 0..WATCHED {
            set_input(&cms, &format!("w{i}"), &round.to_string()).await?;
        }
    }
    let changed_in = churned.elapsed();
    let caught_up = Instant::now();
    wait_related(&cms, "churn", &watched("20"), CONVERGE).await.context("after the churn")?;
    let caught_up_in = caught_up.elapsed();
    let metrics = host.metrics().await?;
    let map_calls = kubewasm_tests::prom::sum(&metrics, "workqueue_work_duration_seconds_count", &[("name", "churn-map-related")]);
    let mapped = kubewasm_tests::prom::sum(&metrics, "kubewasm_reconcile_reasons_total", &[("controller", "churn"), ("reason", "mapped")]);
    ensure!(metrics.contains("kubewasm_plugin_mapped_dropped_total{"), "the host does not report kubewasm_plugin_mapped_dropped_total");
    let dropped = kubewasm_tests::prom::sum(&metrics, "kubewasm_plugin_mapped_dropped_total", &plugin);
    ensure!(dropped == 0.0, "{dropped} changes were left out of a backlog that never filled");
    eprintln!(
        "map-related churn: {} changes of {WATCHED} watched objects in {changed_in:?}, caught up {caught_up_in:?} later; {map_calls} map calls, {mapped} mapped reconciles, 0 dropped",
        20 * WATCHED
    );

    // Overflow: fillers (mapped to no primary, a second each) fill the backlog.
    let flooded = Instant::now();
    futures::stream::iter(0..FILLERS)
        .map(|i| {
            let (cms, filler) = (cms.clone(), child(format!("filler-{i}"), "nobody", &[("e2e.kubewasm.io/map-sleep-ms", "1000")]));
            async move { cms.create(&PostParams::default(), &filler).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    host.wait_metric("kubewasm_plugin_mapped_dropped_total", &plugin, CONVERGE, |v| v > 0.0).await.context("the backlog never overflowed")?;
    let flooded_in = flooded.elapsed();
    // The fillers' own drops are counted as their events arrive: wait until they have all been
    // (no change for two seconds), so that what is left out next is the watched objects' changes.
    let mut full = host.metric("kubewasm_plugin_mapped_dropped_total", &plugin).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = host.metric("kubewasm_plugin_mapped_dropped_total", &plugin).await?;
        if now == full {
            break;
        }
        full = now;
    }
    for i in 0..WATCHED {
        set_input(&cms, &format!("w{i}"), "last").await?;
    }
    // A few more while it is still full: a drop after the last change, so a reconcile of
    // every primary after it too.
    let after = host.metric("kubewasm_plugin_mapped_dropped_total", &plugin).await?;
    for i in 0..20 {
        cms.create(&PostParams::default(), &child(format!("late-{i}"), "nobody", &[("e2e.kubewasm.io/map-sleep-ms", "1000")])).await?;
    }
    let last_drop = host.wait_metric("kubewasm_plugin_mapped_dropped_total", &plugin, CONVERGE, |v| v > after).await?;
    ensure!(after - full >= (WATCHED / 2) as f64, "only {} of the {WATCHED} changes were left out: the backlog was not full", after - full);
    let recovered = Instant::now();
    wait_related(&cms, "churn", &watched("last"), CONVERGE).await.context("every primary reconciled after the overflow")?;
    eprintln!(
        "map-related overflow: {FILLERS} fillers in {flooded_in:?}, {full} of them left out; {last_drop} left out in all ({} while the {WATCHED} watched objects changed last); every primary current {:?} later",
        after - full,
        recovered.elapsed()
    );
    host.stop().await?;
    Ok(())
}

/// `views.metadata-only` (issue 26 §3): a plugin that only maps ConfigMaps to its primaries
/// (Secrets) declares them metadata-only. Alone, it makes the host watch their
/// `PartialObjectMetadata`: the informer holds metadata (its cache a fraction of the 64 KiB
/// each watched object carries) and the plugin is never handed `data`. A second plugin that needs
/// whole ConfigMaps, hot-loaded beside it, turns that one watch into a watch of whole objects in
/// place — still one ConfigMap informer — and is handed `data`, while the first still sees only
/// metadata and keeps reconciling on changes.
#[tokio::test]
async fn a_metadata_only_kind_is_watched_as_metadata_and_shares_one_watch_with_a_plugin_needing_objects() -> Result<()> {
    const PARENT: &str = "e2e.kubewasm.io/parent";
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("metadata-only").await?;
    let cms: Api<ConfigMap> = ns.api();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = ns.api();
    let dir = PluginDir::new();
    let mapper = |name: &str| E2eSettings::new(name).kind("Secret").map_label(PARENT).related();
    dir.install_e2e(&mapper("meta").metadata_only(), "v01");
    let mut host = Host::start(host_config("metadata-only", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let big = "x".repeat(64 << 10);
    for name in ["w1", "w2"] {
        let watched = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                labels: Some([(PARENT.to_string(), "p".to_string())].into()),
                annotations: Some([(INPUT.to_string(), "1".to_string())].into()),
                ..Default::default()
            },
            data: Some([("big".to_string(), big.clone())].into()),
            ..Default::default()
        };
        cms.create(&PostParams::default(), &watched).await?;
    }
    let primary: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {PRIMARY: "yes"}, "annotations": {INPUT: "1"}},
    }))?;
    secrets.create(&PostParams::default(), &primary).await?;

    // What `plugin` last wrote for `p`: (related, related-data), once `related` is `want`.
    let saw = |plugin: &'static str, want: &'static str| {
        let cms = cms.clone();
        async move {
            eventually(&format!("{plugin} to see {want}"), CONVERGE, || async {
                let data = output(&cms, "p", plugin).await?.unwrap_or_default();
                let field = |key: &str| data.get(key).cloned().unwrap_or_default();
                let (related, with_data) = (field("related"), field("related-data"));
                if related == want { Ok(with_data) } else { Err(anyhow!("{plugin} saw related {related:?}, with data {with_data:?}")) }
            })
            .await
        }
    };
    ensure!(saw("meta", "w1=1,w2=1").await?.is_empty(), "the metadata-only plugin was handed data");
    let configmaps = |content: &'static str| [("resource", "ConfigMap.v1"), ("content", content)];
    let informers = |text: &str| text.lines().filter(|l| l.starts_with("kubewasm_informer_") && l.contains("ConfigMap")).collect::<Vec<_>>().join("\n");
    let text = host.metrics().await?;
    // The namespace's other ConfigMaps too (the outputs, kube-root-ca.crt): one watch per kind.
    ensure!(
        kubewasm_tests::prom::sum(&text, "kubewasm_informer_objects", &configmaps("metadata")) >= 2.0,
        "no metadata-only watch holds the ConfigMaps:\n{}",
        informers(&text)
    );
    let metadata_bytes = kubewasm_tests::prom::sum(&text, "kubewasm_informer_cache_bytes", &configmaps("metadata"));
    ensure!(metadata_bytes < (16 << 10) as f64, "the metadata-only cache holds {metadata_bytes} bytes: the data came along");

    // A plugin needing whole ConfigMaps, hot-loaded: the one watch becomes a watch of objects.
    dir.install_e2e(&mapper("full"), "v01");
    ensure!(saw("full", "w1=1,w2=1").await? == "w1,w2", "the plugin needing objects was not handed data");
    let text = host.metrics().await?;
    let configmap_informers: Vec<_> = kubewasm_tests::prom::samples(&text)
        .into_iter()
        .filter(|s| s.name == "kubewasm_informer_objects" && s.labels.get("resource").map(String::as_str) == Some("ConfigMap.v1"))
        .collect();
    ensure!(
        configmap_informers.len() == 1 && configmap_informers[0].labels["content"] == "objects",
        "not one ConfigMap informer, of whole objects:\n{}",
        informers(&text)
    );
    let object_bytes = host.metric("kubewasm_informer_cache_bytes", &configmaps("objects")).await?;
    ensure!(object_bytes > (128 << 10) as f64, "the shared cache holds {object_bytes} bytes: not the whole objects");

    // Both keep reconciling on changes of the shared watch, each seeing what it declared.
    set_input(&cms, "w1", "2").await?;
    ensure!(saw("meta", "w1=2,w2=1").await?.is_empty(), "after the upgrade, the metadata-only plugin was handed data");
    ensure!(saw("full", "w1=2,w2=1").await? == "w1,w2");
    host.stop().await?;
    Ok(())
}

/// M6: a plugin that reads ConfigMaps metadata-only (`views.metadata-only`), gets one from the
/// cache and updates it would write back an object without its data, wiping it: the update is
/// refused as `invalid` (a Warning Event on the primary), and the ConfigMap keeps its data.
#[tokio::test]
async fn an_update_of_a_metadata_only_kind_is_refused_and_wipes_nothing() -> Result<()> {
    const PARENT: &str = "e2e.kubewasm.io/parent";
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("metadata-update").await?;
    let cms: Api<ConfigMap> = ns.api();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = ns.api();
    let dir = PluginDir::new();
    let settings = E2eSettings::new("meta").kind("Secret").map_label(PARENT).metadata_only().mode("update-watched").extra("update ConfigMap.v1");
    dir.install_e2e(&settings, "v01");
    let mut host = Host::start(host_config("metadata-update", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let watched = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("w".into()), labels: Some([(PARENT.to_string(), "p".to_string())].into()), ..Default::default() },
        data: Some([("kept".to_string(), "yes".to_string())].into()),
        ..Default::default()
    };
    let watched = cms.create(&PostParams::default(), &watched).await?;
    let primary: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {PRIMARY: "yes"}, "annotations": {INPUT: "1"}},
    }))?;
    secrets.create(&PostParams::default(), &primary).await?;
    wait_event(ns.client(), ns.name(), "p", "ReconcileFailed", "update replaces the whole ConfigMap").await?;
    let after = cms.get("w").await?;
    ensure!(after.data == watched.data && after.resource_version() == watched.resource_version(), "the refused update changed w: {after:?}");
    host.stop().await?;
    Ok(())
}

/// A plugin that declares a projection of its primary's kind (`projections`, contract 0.1.5) is
/// handed only the declared fields of its objects beside their metadata — in the request, read
/// back from the cache and in the answer of its apply — while the host caches whole objects; an
/// `update` of a projected kind, which would wipe what the plugin was not handed, is refused
/// with a Warning Event, and the object is left as it was.
#[tokio::test]
async fn a_projected_kind_is_handed_with_only_the_declared_fields() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("projections").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("narrow").reads_fields(&["data.keep", "data.output.gone", "binaryData"]), "v01");
    dir.install_e2e(&E2eSettings::new("updater").mode("update").reads_fields(&["data"]), "v01");
    let mut host = Host::start(host_config("projections", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let mut p = primary("p", "1");
    p.data = Some([("keep", "k"), ("drop", "d"), ("output", "o")].map(|(k, v)| (k.to_string(), v.to_string())).into());
    cms.create(&PostParams::default(), &p).await?;
    let data = eventually("narrow's output", CONVERGE, || async {
        output(&cms, "p", "narrow").await?.filter(|d| d.contains_key("answered")).ok_or_else(|| anyhow!("not yet"))
    })
    .await?;
    // The primary: `data.output.gone` reaches a string, which is kept whole.
    ensure!(data["handed"] == "data(keep,output)", "the request's primary was handed as {:?}", data["handed"]);
    ensure!(data["read"] == "data(keep,output)", "the primary read back from the cache was handed as {:?}", data["read"]);
    // The output ConfigMap's own data keys are the guest's, of which `keep` is none.
    ensure!(data["answered"] == "data()", "the apply's answer was handed as {:?}", data["answered"]);
    let stored = cms.get("p").await?;
    ensure!(stored.data.as_ref().is_some_and(|d| d.len() == 3), "the primary changed: {:?}", stored.data);

    wait_event(ns.client(), ns.name(), "p", "ReconcileFailed", "update replaces the whole ConfigMap").await?;
    let after = cms.get("p").await?;
    ensure!(after.data == stored.data && !after.annotations().contains_key(OUTPUT), "the refused update changed the primary: {after:?}");
    host.stop().await?;
    Ok(())
}

/// `list-controlled` answers a primary's children from the host's controller index: the Secrets
/// whose controller reference names it — not one it owns without controlling, nor another
/// primary's — and follows a child whose controller changes.
#[tokio::test]
async fn list_controlled_answers_what_a_primary_controls() -> Result<()> {
    use k8s_openapi::api::core::v1::Secret;
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("controlled").await?;
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("kids").mode("children").owns(), "v01");
    let mut host = Host::start(host_config("controlled", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let cms: Api<ConfigMap> = ns.api();
    let secrets: Api<Secret> = ns.api();
    let a = cms.create(&PostParams::default(), &primary("a", "in")).await?;
    let b = cms.create(&PostParams::default(), &primary("b", "in")).await?;
    let reference = |cm: &ConfigMap, controller: bool| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": cm.name_any(), "uid": cm.uid().unwrap_or_default(), "controller": controller});
    for (name, owner, controller) in [("a-1", &a, true), ("a-2", &a, true), ("a-loose", &a, false), ("b-1", &b, true)] {
        let secret: Secret = serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [reference(owner, controller)]}}))?;
        secrets.create(&PostParams::default(), &secret).await?;
    }
    let said = |notes: Vec<(&'static str, &'static str)>| {
        let client = ns.client().clone();
        let namespace = ns.name().to_string();
        async move {
            eventually(&format!("Events saying {notes:?}"), CONVERGE, || async {
                let events = events(&client, &namespace).await?;
                let says = |primary: &str, note: &str| {
                    events.iter().any(|e| {
                        e.reason.as_deref() == Some("Children")
                            && e.note.as_deref() == Some(note)
                            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(primary)
                    })
                };
                if notes.iter().all(|(primary, note)| says(primary, note)) { Ok(()) } else { Err(anyhow!("{}", describe_events(&events))) }
            })
            .await
        }
    };
    said(vec![("a", "in: a-1,a-2"), ("b", "in: b-1")]).await?;
    // a-2 changes hands: b controls it now.
    secrets.patch("a-2", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"ownerReferences": [reference(&b, true)]}}))).await?;
    said(vec![("a", "in: a-1"), ("b", "in: a-2,b-1")]).await?;
    host.stop().await?;
    Ok(())
}
