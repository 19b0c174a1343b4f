//! End-to-end tests of hot reload (issue 5): the real `kubewasm run` binary follows its plugin
//! directory while the local control plane's objects change.
//!
//! `cargo test -p kubewasm-tests --test reload`
//!
//! New versions of a plugin are variants of the one `e2e-guest` build (see
//! `kubewasm_tests::plugindir`): the variant is stamped into every output the plugin writes, so
//! the objects show which version reconciled them last.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, PodTemplate};
use kube::api::{Api, PostParams};
use kubewasm_tests::plugindir::e2e_variant;
use kubewasm_tests::prom::apiserver_watches;
use kubewasm_tests::{ControlPlane, E2eSettings, Host, HostConfig, Options, PluginDir, eventually};
use serde_json::json;
use sha2::{Digest, Sha256};
use support::*;

const READY: Duration = Duration::from_secs(60);

fn reloads<'a>(plugin: &'a str, result: &'a str) -> [(&'a str, &'a str); 2] {
    [("plugin", plugin), ("result", result)]
}

const RELOADS: &str = "kubewasm_plugin_reloads_total";

/// What the status ConfigMap says of `plugin` (`version=… digest=sha256:… file=…`).
async fn status_line(cms: &Api<ConfigMap>, plugin: &str) -> Result<String> {
    let status = cms.get(STATUS).await.context("the host's status ConfigMap")?;
    status.data.and_then(|d| d.get(plugin).cloned()).ok_or_else(|| anyhow!("the status ConfigMap does not list {plugin}"))
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A plugin is replaced 20 times while its objects keep changing. Every swap is a reload (not a
/// failure); no reconcile fails; and at the end every object shows its last input — counted per
/// object, so no last event went missing — reconciled by the last version.
#[tokio::test]
async fn twenty_replacements_while_objects_churn() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("reload-churn").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("churn").max_concurrency(2), "v01");
    let mut host = Host::start(host_config("churn", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let keys: Vec<String> = (0..8).map(|i| format!("k{i}")).collect();
    let initial: BTreeMap<String, String> = keys.iter().map(|k| (k.clone(), "n0".to_string())).collect();
    create_primaries(&cms, &initial).await?;
    wait_outputs(&cms, "churn", &initial, Want { variant: Some("v01"), ..Want::default() }).await?;

    // The churn: one change after another, round robin, each input counting that key's changes;
    // half-way, four more objects appear.
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (cms, stop, mut keys) = (cms.clone(), stop.clone(), keys.clone());
        tokio::spawn(async move {
            let mut counts: BTreeMap<String, u32> = keys.iter().map(|k| (k.clone(), 0)).collect();
            let mut n = 0usize;
            while !stop.load(Ordering::SeqCst) {
                if n == 100 {
                    for i in 8..12 {
                        let key = format!("k{i}");
                        cms.create(&PostParams::default(), &primary(&key, "n1")).await?;
                        counts.insert(key.clone(), 1);
                        keys.push(key);
                    }
                }
                let key = &keys[n % keys.len()];
                let count = counts.get_mut(key).expect("counted");
                *count += 1;
                set_input(&cms, key, &format!("n{count}")).await?;
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok::<_, anyhow::Error>(counts)
        })
    };

    for version in 2..=21u32 {
        let variant = format!("v{version:02}");
        dir.replace("churn", &e2e_variant(&variant));
        let swapped = f64::from(version - 1);
        host.wait_metric(RELOADS, &reloads("churn", "reloaded"), CONVERGE, |v| v >= swapped).await?;
        // Let some churn land on this version before the next swap.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let counts = churn.await??;
    ensure!(counts.len() == 12 && counts.values().all(|c| *c >= 10), "the churn was too weak: {counts:?}");

    let last: BTreeMap<String, String> = counts.iter().map(|(k, c)| (k.clone(), format!("n{c}"))).collect();
    wait_outputs(&cms, "churn", &last, Want { variant: Some("v21"), ..Want::default() }).await?;

    ensure!(host.metric(RELOADS, &reloads("churn", "reloaded")).await? == 20.0, "every replacement is one reload");
    ensure!(host.metric(RELOADS, &reloads("churn", "rejected")).await? == 0.0, "no replacement may be rejected");
    ensure!(host.metric(RELOADS, &reloads("churn", "loaded")).await? == 1.0, "a swap is not a fresh load");
    let errors = host.metric("controller_runtime_reconcile_errors_total", &[("controller", "churn")]).await?;
    let faults = host.metric("kubewasm_plugin_faults_total", &[("plugin", "churn")]).await?;
    ensure!(errors == 0.0 && faults == 0.0, "reconciles failed across the swaps: {errors} errors, {faults} faults");
    let total = host.metric("controller_runtime_reconcile_total", &[("controller", "churn"), ("result", "success")]).await?;
    eventually("the status ConfigMap to list churn v21", CONVERGE, || async {
        let line = status_line(&cms, "churn").await?;
        if line.starts_with("version=v21 ") { Ok(()) } else { Err(anyhow!("{line}")) }
    })
    .await?;
    eprintln!("20 swaps under churn: {} input changes, {total} reconciles", counts.values().sum::<u32>());
    host.stop().await?;
    Ok(())
}

/// Broken versions — not WebAssembly, a core module instead of a component, an invalid
/// manifest, a trap in describe — are each rejected with an Event on the status ConfigMap, while
/// the running version keeps serving; a good version then replaces it.
#[tokio::test]
async fn a_broken_version_is_rejected_while_the_old_one_keeps_serving() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("reload-broken").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("fragile"), "v01");
    let mut host = Host::start(host_config("fragile", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let mut want = BTreeMap::from([("o".to_string(), "start".to_string())]);
    create_primaries(&cms, &want).await?;
    wait_outputs(&cms, "fragile", &want, Want { variant: Some("v01"), ..Want::default() }).await?;
    let serving = eventually("the status ConfigMap to list fragile v01", CONVERGE, || async {
        let line = status_line(&cms, "fragile").await?;
        if line.starts_with("version=v01 ") { Ok(line) } else { Err(anyhow!("{line}")) }
    })
    .await?;

    let broken: [(&str, Vec<u8>, &str); 4] = [
        ("not WebAssembly", b"#!/bin/sh\necho this is not a plugin\n".to_vec(), "not WebAssembly"),
        ("a core module", b"\0asm\x01\0\0\0".to_vec(), "core WebAssembly module, not a component"),
        ("an invalid manifest", e2e_variant("bad"), "Not_A_DNS_Label"),
        ("a trap in describe", e2e_variant("trp"), "describe failed"),
    ];
    for (i, (what, bytes, needle)) in broken.iter().enumerate() {
        dir.replace("fragile", bytes);
        let rejected = (i + 1) as f64;
        host.wait_metric(RELOADS, &reloads("fragile", "rejected"), CONVERGE, |v| v >= rejected).await.with_context(|| format!("{what} must be rejected"))?;
        let event = wait_event(ns.client(), ns.name(), STATUS, "PluginRejected", needle).await.with_context(|| format!("the Event for {what}"))?;
        ensure!(event.type_.as_deref() == Some("Warning"), "{what}: {event:?}");
        // The old version still serves.
        let input = format!("after-{i}");
        cms.patch("o", &Default::default(), &kube::api::Patch::Merge(json!({"metadata": {"annotations": {INPUT: input}}}))).await?;
        want.insert("o".into(), input);
        wait_outputs(&cms, "fragile", &want, Want { variant: Some("v01"), ..Want::default() }).await.with_context(|| format!("after {what}"))?;
        ensure!(status_line(&cms, "fragile").await? == serving, "after {what} the status ConfigMap changed");
    }

    dir.replace("fragile", &e2e_variant("v02"));
    host.wait_metric(RELOADS, &reloads("fragile", "reloaded"), CONVERGE, |v| v >= 1.0).await?;
    wait_outputs(&cms, "fragile", &want, Want { variant: Some("v02"), ..Want::default() }).await?;
    ensure!(host.metric(RELOADS, &reloads("fragile", "rejected")).await? == 4.0, "exactly the four broken versions are rejected");
    ensure!(host.metric(RELOADS, &reloads("fragile", "reloaded")).await? == 1.0);
    host.stop().await?;
    Ok(())
}

/// Plugins come and go at runtime, and their watches with them, as the API server sees it:
/// adding a plugin for a resource nobody watched opens a watch; removing a plugin closes the
/// watches no remaining plugin needs, and only those.
#[tokio::test]
async fn watches_follow_the_plugins_that_need_them() -> Result<()> {
    // Dedicated, with only the namespace controller: nothing else opens or closes watches of
    // configmaps or podtemplates while this test counts them.
    let cp = ControlPlane::start_with(Options::new().controllers(["namespace"])).await?;
    let client = cp.client().await?;
    let ns = cp.namespace("reload-watches").await?;
    let cms: Api<ConfigMap> = ns.api();
    let configmap_watches = || apiserver_watches(&client, "", "configmaps");
    let podtemplate_watches = || apiserver_watches(&client, "", "podtemplates");
    let (cm0, pt0) = (configmap_watches().await?, podtemplate_watches().await?);
    ensure!(pt0 == 0.0, "nobody may watch podtemplates before the plugin does: {pt0} watches");

    let dir = PluginDir::new();
    // No primary selectors: one unfiltered watch of the kind, whichever plugins need it.
    dir.install_e2e(&E2eSettings::new("cm-a").selector(""), "v01");
    dir.install_e2e(&E2eSettings::new("cm-b").selector(""), "v01");
    // Cluster-wide: the host's watches are one per resource.
    let config = HostConfig::new("watches", dir.path(), cp.kubeconfig_path()).status_configmap(ns.name(), STATUS);
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    let mut want = BTreeMap::from([("x".to_string(), "1".to_string())]);
    create_primaries(&cms, &want).await?;
    wait_outputs(&cms, "cm-a", &want, Want::default()).await?;

    let expect = |what: &'static str, have: f64, want: f64| if have == want { Ok(()) } else { Err(anyhow!("{have} {what} watches, want {want}")) };
    eventually("the host's one configmap watch", CONVERGE, || async { expect("configmap", configmap_watches().await?, cm0 + 1.0) }).await?;
    expect("podtemplate", podtemplate_watches().await?, pt0)?;

    // A plugin for PodTemplates starts the first podtemplate watch, at runtime.
    dir.install_e2e(&E2eSettings::new("pt").kind("PodTemplate").selector(""), "v01");
    host.wait_metric(RELOADS, &reloads("pt", "loaded"), CONVERGE, |v| v == 1.0).await?;
    eventually("a podtemplate watch", CONVERGE, || async { expect("podtemplate", podtemplate_watches().await?, pt0 + 1.0) }).await?;
    let template: PodTemplate = serde_json::from_value(json!({
        "metadata": {"name": "tpl", "labels": {PRIMARY: "yes"}, "annotations": {INPUT: "t1"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }))?;
    Api::<PodTemplate>::namespaced(ns.client().clone(), ns.name()).create(&PostParams::default(), &template).await?;
    wait_outputs(&cms, "pt", &BTreeMap::from([("tpl".to_string(), "t1".to_string())]), Want::default()).await?;

    // Removing it closes that watch; the configmap watch stays.
    dir.remove("pt");
    host.wait_metric(RELOADS, &reloads("pt", "unloaded"), CONVERGE, |v| v == 1.0).await?;
    eventually("the podtemplate watch to close", CONVERGE, || async { expect("podtemplate", podtemplate_watches().await?, pt0) }).await?;
    expect("configmap", configmap_watches().await?, cm0 + 1.0)?;

    // Removing one of two configmap readers keeps the watch: the other still needs it, and
    // still gets its events through it.
    dir.remove("cm-b");
    host.wait_metric(RELOADS, &reloads("cm-b", "unloaded"), CONVERGE, |v| v == 1.0).await?;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        expect("configmap", configmap_watches().await?, cm0 + 1.0).context("cm-a still needs the configmap watch")?;
    }
    set_input(&cms, "x", "2").await?;
    want.insert("x".into(), "2".into());
    wait_outputs(&cms, "cm-a", &want, Want::default()).await?;

    // The last reader goes: so does the watch.
    dir.remove("cm-a");
    host.wait_metric(RELOADS, &reloads("cm-a", "unloaded"), CONVERGE, |v| v == 1.0).await?;
    eventually("the configmap watch to close", CONVERGE, || async { expect("configmap", configmap_watches().await?, cm0) }).await?;
    host.stop().await?;
    Ok(())
}

/// A plugin file copied slowly and in place (truncate, then chunks with pauses longer than the
/// host's settle time and its rescan period, so that it does look at half-written files) is
/// loaded exactly once, and complete: as a new version over a running plugin, and as a new
/// plugin.
#[tokio::test]
async fn a_slow_copy_is_loaded_once_and_complete() -> Result<()> {
    const PAUSE: Duration = Duration::from_millis(2600);
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("reload-slow").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("slow"), "v01");
    let mut host = Host::start(host_config("slow", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let want = BTreeMap::from([("o".to_string(), "1".to_string())]);
    create_primaries(&cms, &want).await?;
    wait_outputs(&cms, "slow", &want, Want { variant: Some("v01"), ..Want::default() }).await?;

    // Over the running plugin.
    let v02 = e2e_variant("v02");
    dir.write_slowly("slow", &v02, 3, PAUSE).await;
    host.wait_metric(RELOADS, &reloads("slow", "reloaded"), CONVERGE, |v| v >= 1.0).await?;
    wait_outputs(&cms, "slow", &want, Want { variant: Some("v02"), ..Want::default() }).await?;
    let listed = status_line(&cms, "slow").await?;
    ensure!(listed.contains(&format!("digest=sha256:{} ", sha256(&v02))), "the loaded file is not the complete copy: {listed}");

    // A new plugin, its settings first, then the component slowly.
    let settings = E2eSettings::new("slow-new");
    dir.write_atomic("slow-new.toml", settings.to_toml().as_bytes());
    dir.write_slowly("slow-new", &v02, 3, PAUSE).await;
    host.wait_metric(RELOADS, &reloads("slow-new", "loaded"), CONVERGE, |v| v >= 1.0).await?;
    wait_outputs(&cms, "slow-new", &want, Want { variant: Some("v02"), ..Want::default() }).await?;

    // Then one more (atomic) version: once it is in, nothing of the slow copies can still be
    // pending, and the counts are final.
    dir.replace("slow", &e2e_variant("v03"));
    host.wait_metric(RELOADS, &reloads("slow", "reloaded"), CONVERGE, |v| v >= 2.0).await?;
    for (plugin, result, count) in [("slow", "reloaded", 2.0), ("slow", "rejected", 0.0), ("slow", "loaded", 1.0), ("slow-new", "loaded", 1.0), ("slow-new", "rejected", 0.0)] {
        let have = host.metric(RELOADS, &reloads(plugin, result)).await?;
        ensure!(have == count, "{RELOADS}{{plugin={plugin},result={result}}} is {have}, want {count}\n{}", host.log_tail(40));
    }
    // The host did look at the half-written files (else this test shows nothing) and waited.
    let log = host.log_text();
    let waits = log.lines().filter(|l| l.contains("not a complete component yet")).count();
    ensure!(waits >= 2, "the host never saw a half-written file ({waits} waits logged): the copy was not slow enough");
    let loads = log.lines().filter(|l| l.contains("reloaded slow ") || l.contains("loaded slow-new ")).count();
    ensure!(loads == 3, "expected 3 load log lines (2 reloads of slow, 1 load of slow-new), found {loads}");
    host.stop().await?;
    Ok(())
}
