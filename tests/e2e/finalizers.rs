//! End-to-end tests of the controller runtime — finalizers: deletion waits for the plugin's, a
//! primary that leaves the selector loses it, and a removed plugin's leftovers are reported and
//! released (`kubewasm finalizers release`). The real `kubewasm run` binary against the local
//! control plane, with the suite's `e2e-guest`; every test runs its own host processes on loopback
//! ports.
//!
//! `cargo test -p kubewasm-tests --test finalizers`

mod support;

use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kubewasm_tests::{ControlPlane, E2eSettings, Host, PluginDir, eventually};
use serde_json::json;
use support::*;

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
