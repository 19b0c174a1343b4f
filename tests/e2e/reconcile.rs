//! End-to-end tests of the controller runtime — the sample-controller and the e2e guest
//! reconciling: a Deployment kept and its Foo's status, an object not owned left alone, conflict
//! storms, plugin faults and quarantine, and `list-controlled`. The real `kubewasm run` binary
//! against the local control plane, with the Rust sample-controller and the suite's `e2e-guest`;
//! every test runs its own host processes on loopback ports.
//!
//! `cargo test -p kubewasm-tests --test reconcile`

mod support;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kubewasm_tests::{ControlPlane, E2eSettings, Host, PluginDir, apply_crd, eventually, guests};
use serde_json::json;
use support::*;

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
