//! Safe rollout (issue 14): a candidate version (`NAME.next.wasm`) runs in the shadow of the
//! live one against the local control plane. The live version is the Rust sample-controller; a
//! candidate identical in logic is the same controller in JavaScript, and a differing candidate
//! is that JavaScript with the replica count capped at 2. What the candidates do is compared
//! with what the live version did, shown by `kubewasm rollout status`, and never stored; a
//! candidate that agrees is promoted automatically.
//!
//! `cargo test -p kubewasm-tests --test rollout`. Needs the JS SDK's tools (`npm install` in
//! `plugins/js`; `scripts/env.sh` does).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kubewasm_tests::guests;
use kubewasm_tests::{ControlPlane, Host, PluginDir, TestNamespace, apply_crd, eventually, kubewasm_binary};
use serde_json::json;
use support::{CONVERGE, STATUS, host_config};

/// A JS plugin not yet in the artifact cache is compiled first (tens of seconds, debug build).
const READY: Duration = Duration::from_secs(180);
const PLUGIN: &str = "sample-controller";
const SHADOW: &str = "kubewasm_shadow_reconciles_total";
const RELOADS: &str = "kubewasm_plugin_reloads_total";

fn shadow(result: &str) -> [(&str, &str); 2] {
    [("plugin", PLUGIN), ("result", result)]
}

/// The sample-controller in JavaScript with the replica count capped at 2: differs from the
/// live version on exactly the Foos asking for more.
fn capped_candidate() -> PathBuf {
    let source = guests::workspace_root().join("examples/sample-controller/js/sample-controller.js");
    let text = std::fs::read_to_string(&source).expect("read the JS sample-controller");
    let original = "replicas: o.field(foo, 'spec.replicas', 1),";
    assert!(text.contains(original), "the JS sample-controller no longer sets replicas as this test expects");
    let capped = text.replace(original, "replicas: Math.min(o.field(foo, 'spec.replicas', 1), 2),");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = dir.path().join("sample-controller.js");
    std::fs::write(&app, capped).expect("write the capped controller");
    guests::cached_plugin("js", &app, "sample-controller-capped")
}

async fn foo_resource(cp: &ControlPlane) -> Result<ApiResource> {
    let crd: CustomResourceDefinition = serde_saphyr::from_str(include_str!("../../examples/sample-controller/manifests/crd.yaml"))?;
    Ok(apply_crd(&cp.client().await?, &crd, CONVERGE).await?)
}

/// Foos `f1`..`f4`, asking for 1 to 4 replicas of a Deployment `fN-web`; returns once the live
/// version has made those Deployments.
async fn create_foos(foos: &Api<DynamicObject>, ar: &ApiResource, deployments: &Api<Deployment>) -> Result<()> {
    for n in 1..=4 {
        let object = DynamicObject::new(&format!("f{n}"), ar).data(json!({"spec": {"deploymentName": format!("f{n}-web"), "replicas": n}}));
        foos.create(&PostParams::default(), &object).await?;
    }
    eventually("the live version's Deployments", CONVERGE, || async {
        let counts = replicas(deployments).await?;
        if counts == [1, 2, 3, 4] { Ok(()) } else { Err(anyhow!("replicas {counts:?}")) }
    })
    .await?;
    Ok(())
}

/// The replica counts of the Deployments `f1-web`..`f4-web`, once all exist.
async fn replicas(deployments: &Api<Deployment>) -> Result<Vec<i32>> {
    let mut counts = Vec::new();
    for n in 1..=4 {
        let d = deployments.get_opt(&format!("f{n}-web")).await?.ok_or_else(|| anyhow!("f{n}-web does not exist yet"))?;
        counts.push(d.spec.replicas.unwrap_or_default());
    }
    Ok(counts)
}

/// Touches every Foo (a label, no spec change): the live version reconciles each again.
async fn touch_foos(foos: &Api<DynamicObject>, round: u32) -> Result<()> {
    for n in 1..=4 {
        foos.patch(&format!("f{n}"), &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"touched": round.to_string()}}}))).await?;
    }
    Ok(())
}

/// `kubewasm rollout status` for the test's host.
async fn rollout_status(cp: &ControlPlane, ns: &TestNamespace) -> Result<String> {
    let output = tokio::process::Command::new(kubewasm_binary()?)
        .args(["rollout", "status", PLUGIN, "--status-configmap", &format!("{}/{STATUS}", ns.name())])
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .output()
        .await?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    ensure!(output.status.success(), "kubewasm rollout status failed: {text}");
    Ok(text)
}

/// Copies `wasm` in as the candidate, atomically (written aside, renamed into place).
fn install_candidate(dir: &Path, wasm: &Path) {
    let aside = dir.join(format!(".{PLUGIN}.next.wasm.partial"));
    std::fs::copy(wasm, &aside).expect("copy the candidate");
    std::fs::rename(&aside, dir.join(format!("{PLUGIN}.next.wasm"))).expect("rename the candidate into place");
}

#[tokio::test]
async fn a_candidate_is_compared_with_the_live_version_and_nothing_it_does_is_stored() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ar = foo_resource(cp).await?;
    let ns = cp.namespace("rollout-shadow").await?;
    let dir = PluginDir::new();
    guests::install(&guests::example(PLUGIN, "rust"), dir.path(), PLUGIN, None);
    let same_logic = tokio::task::spawn_blocking(|| guests::example(PLUGIN, "js")).await?;
    let capped = tokio::task::spawn_blocking(capped_candidate).await?;
    let mut host = Host::start(host_config("rollout-shadow", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &ar);
    let deployments: Api<Deployment> = ns.api();
    create_foos(&foos, &ar, &deployments).await?;

    // The same logic in another language agrees on every key.
    install_candidate(dir.path(), &same_logic);
    host.wait_metric(RELOADS, &[("plugin", PLUGIN), ("result", "candidate")], READY, |n| n == 1.0).await.context("the JS candidate must start")?;
    touch_foos(&foos, 1).await?;
    host.wait_metric(SHADOW, &shadow("same"), CONVERGE, |n| n >= 4.0).await.context("the identical candidate agrees on all four Foos")?;
    for result in ["differs", "error", "fault"] {
        ensure!(host.metric(SHADOW, &shadow(result)).await? == 0.0, "the identical candidate {result}: {}", rollout_status(cp, &ns).await?);
    }
    let status = eventually("rollout status to show four agreeing keys", CONVERGE, || async {
        let status = rollout_status(cp, &ns).await?;
        if status.contains("keys: 4 agree, 0 do not") { Ok(status) } else { Err(anyhow!("{status}")) }
    })
    .await?;
    eprintln!("{status}");

    // A candidate capping replicas at 2 differs on exactly f3 and f4, with a readable diff.
    install_candidate(dir.path(), &capped);
    host.wait_metric(RELOADS, &[("plugin", PLUGIN), ("result", "candidate")], READY, |n| n == 2.0).await.context("the capped candidate must start")?;
    touch_foos(&foos, 2).await?;
    let status = eventually("rollout status to show f3 and f4 differing", CONVERGE, || async {
        let status = rollout_status(cp, &ns).await?;
        if status.contains("keys: 2 agree, 2 do not") { Ok(status) } else { Err(anyhow!("{status}")) }
    })
    .await?;
    eprintln!("{status}");
    let namespace = ns.name();
    ensure!(status.contains(&format!("not agreeing: {namespace}/f3 (differs), {namespace}/f4 (differs)")), "{status}");
    let removed = |n: u32| status.lines().any(|l| l.starts_with('-') && l.trim_start_matches('-').trim() == format!("replicas: {n}"));
    let added = status.lines().any(|l| l.starts_with('+') && l.trim_start_matches('+').trim() == "replicas: 2");
    ensure!(removed(3) && removed(4) && added, "the diffs must show replicas 3 and 4 against 2:\n{status}");
    ensure!(!status.contains(&format!("--- {namespace}/f1")) && !status.contains(&format!("--- {namespace}/f2")), "f1 and f2 agree: {status}");

    // Nothing the candidate did was stored: the Deployments keep the live version's replicas,
    // and only the live version's field manager ever wrote them.
    ensure!(replicas(&deployments).await? == [1, 2, 3, 4], "the candidate's writes were stored");
    for n in 3..=4 {
        let d = deployments.get(&format!("f{n}-web")).await?;
        let managers: Vec<String> = d.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
        ensure!(managers.iter().all(|m| !m.contains("next")), "{managers:?}");
    }
    // Removing the candidate ends the shadow run.
    std::fs::remove_file(dir.path().join(format!("{PLUGIN}.next.wasm")))?;
    host.wait_metric(RELOADS, &[("plugin", PLUGIN), ("result", "candidate_removed")], CONVERGE, |n| n == 1.0).await?;
    let cms: Api<ConfigMap> = ns.api();
    eventually("the rollout report to go from the status ConfigMap", CONVERGE, || async {
        let data = cms.get(STATUS).await?.data.unwrap_or_default();
        if data.contains_key(&format!("{PLUGIN}.rollout")) { Err(anyhow!("still listed")) } else { Ok(()) }
    })
    .await?;
    host.stop().await?;
    Ok(())
}

/// With `--promote-after 4`, a candidate that agrees on four reconciles is renamed over the live
/// file and loaded as the live version.
#[tokio::test]
async fn a_candidate_that_agrees_is_promoted() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ar = foo_resource(cp).await?;
    let ns = cp.namespace("rollout-promote").await?;
    let dir = PluginDir::new();
    guests::install(&guests::example(PLUGIN, "rust"), dir.path(), PLUGIN, None);
    let same_logic = tokio::task::spawn_blocking(|| guests::example(PLUGIN, "js")).await?;
    let config = host_config("rollout-promote", dir.path(), cp.kubeconfig_path(), ns.name()).arg("--promote-after=4");
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &ar);
    let deployments: Api<Deployment> = ns.api();
    create_foos(&foos, &ar, &deployments).await?;

    install_candidate(dir.path(), &same_logic);
    host.wait_metric(RELOADS, &[("plugin", PLUGIN), ("result", "candidate")], READY, |n| n == 1.0).await?;
    touch_foos(&foos, 1).await?;
    host.wait_metric(RELOADS, &[("plugin", PLUGIN), ("result", "promoted")], READY, |n| n == 1.0).await.context("the agreeing candidate must be promoted")?;
    ensure!(!dir.path().join(format!("{PLUGIN}.next.wasm")).exists(), "the candidate file was renamed over the live one");
    let js_digest = kubewasm::plugin::Digest::of(&std::fs::read(&same_logic)?).to_string();
    let cms: Api<ConfigMap> = ns.api();
    eventually("the status ConfigMap to list the promoted version", CONVERGE, || async {
        let entry = cms.get(STATUS).await?.data.unwrap_or_default().get(PLUGIN).cloned().unwrap_or_default();
        if entry.contains(&format!("digest=sha256:{js_digest}")) && !entry.contains("candidate=") { Ok(()) } else { Err(anyhow!("{entry}")) }
    })
    .await?;
    // The promoted version serves: a new Foo gets its Deployment.
    let foo = DynamicObject::new("f5", &ar).data(json!({"spec": {"deploymentName": "f5-web", "replicas": 1}}));
    foos.create(&PostParams::default(), &foo).await?;
    eventually("f5's Deployment", CONVERGE, || async { deployments.get("f5-web").await.map(|_| ()).map_err(anyhow::Error::from) }).await?;
    host.stop().await?;
    Ok(())
}

/// `kubewasm` with `args`; its output, and whether it succeeded.
async fn kubewasm(args: &[&str]) -> Result<(bool, String)> {
    let output = tokio::process::Command::new(kubewasm_binary()?).args(args).output().await?;
    Ok((output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)))
}

/// `kubewasm record` turns what the plugin does with three Foos into cases: they replay green
/// against the version they were recorded from and red, on exactly the Foo whose replicas the
/// capped candidate changes, against it.
#[tokio::test]
async fn a_recorded_case_replays_green_against_its_version_and_red_against_another() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ar = foo_resource(cp).await?;
    let ns = cp.namespace("rollout-record").await?;
    let live = guests::example(PLUGIN, "rust");
    let capped = tokio::task::spawn_blocking(capped_candidate).await?;
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &ar);
    let deployments: Api<Deployment> = ns.api();
    let taken: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "taken"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "taken"}}, "template": {"metadata": {"labels": {"app": "taken"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }))?;
    deployments.create(&PostParams::default(), &taken).await?;
    for (name, spec) in [
        ("f1", json!({"deploymentName": "f1-web", "replicas": 1})),
        ("f3", json!({"deploymentName": "taken", "replicas": 3})),
        ("f4", json!({"deploymentName": "f4-web", "replicas": 4})),
    ] {
        foos.create(&PostParams::default(), &DynamicObject::new(name, &ar).data(json!({ "spec": spec }))).await?;
    }
    let cases = tempfile::tempdir()?;
    let artifacts = guests::target_dir().join("kubewasm-tests/artifacts");
    let (artifacts, cases_dir, kubeconfig) =
        (artifacts.to_string_lossy().into_owned(), cases.path().to_string_lossy().into_owned(), cp.kubeconfig_path().to_string_lossy().into_owned());
    let keys: Vec<String> = ["f1", "f3", "f4"].iter().map(|n| format!("{}/{n}", ns.name())).collect();
    let mut record = vec!["record", live.to_str().context("path")?];
    record.extend(keys.iter().map(String::as_str));
    record.extend(["-o", &cases_dir, "--kubeconfig", &kubeconfig, "--cache-dir", &artifacts]);
    let (ok, output) = kubewasm(&record).await?;
    ensure!(ok, "kubewasm record failed: {output}");
    let taken_case = std::fs::read_to_string(cases.path().join(format!("{}-f3.yaml", ns.name())))?;
    ensure!(
        taken_case.contains("name: taken") && taken_case.contains("ErrResourceExists"),
        "f3's case holds the Deployment it read and its Warning:\n{taken_case}"
    );
    ensure!(!taken_case.contains("managedFields"), "{taken_case}");

    let (ok, report) = kubewasm(&["test", live.to_str().context("path")?, &cases_dir, "--cache-dir", &artifacts]).await?;
    ensure!(ok && report.contains("3 passed; 0 failed"), "the recorded cases must pass against the version they were recorded from:\n{report}");
    let (ok, report) = kubewasm(&["test", capped.to_str().context("path")?, &cases_dir, "--cache-dir", &artifacts]).await?;
    ensure!(!ok && report.contains("2 passed; 1 failed"), "only f4 asks for more than 2 replicas:\n{report}");
    ensure!(report.contains(&format!("case {}-f4 ... FAILED", ns.name())), "{report}");
    // Nothing was written to the cluster: f1 has no Deployment.
    ensure!(deployments.get_opt("f1-web").await?.is_none(), "kubewasm record must not write");
    Ok(())
}
