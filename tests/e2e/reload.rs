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
    for (plugin, result, count) in
        [("slow", "reloaded", 2.0), ("slow", "rejected", 0.0), ("slow", "loaded", 1.0), ("slow-new", "loaded", 1.0), ("slow-new", "rejected", 0.0)]
    {
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

/// A plugin that is still starting — its primary kind is not served (as when its CRD is not
/// installed yet) — is visible to reload and unload: a new version replaces it and runs, and
/// removing another's file stops it for good.
#[tokio::test]
async fn a_plugin_still_starting_is_replaced_or_removed() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("reload-starting").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("early").kind("Widget"), "v01");
    dir.install_e2e(&E2eSettings::new("gone").kind("Widget"), "v01");
    let mut host = Host::start(host_config("starting", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    let waiting = |log: &str, plugin: &str| log.lines().filter(|l| l.contains(&format!("plugin={plugin}")) && l.contains("cannot start yet")).count();
    eventually("both plugins to wait for their kind", CONVERGE, || async {
        let log = host.log_text();
        if waiting(&log, "early") > 0 && waiting(&log, "gone") > 0 { Ok(()) } else { Err(anyhow!("not waiting yet")) }
    })
    .await?;

    dir.install_e2e(&E2eSettings::new("early"), "v02");
    let want = BTreeMap::from([("o".to_string(), "1".to_string())]);
    create_primaries(&cms, &want).await?;
    wait_outputs(&cms, "early", &want, Want { variant: Some("v02"), ..Want::default() }).await?;

    dir.remove("gone");
    host.wait_metric(RELOADS, &reloads("gone", "unloaded"), CONVERGE, |v| v >= 1.0).await?;
    let at_removal = waiting(&host.log_text(), "gone");
    // Its retries (1 s, then doubling) would have shown by now.
    tokio::time::sleep(Duration::from_secs(5)).await;
    ensure!(waiting(&host.log_text(), "gone") == at_removal, "the removed plugin is still trying to start:\n{}", host.log_tail(20));
    ensure!(status_line(&cms, "gone").await.is_err(), "the status ConfigMap still lists the removed plugin");
    host.wait_ready(READY).await.context("ready once nothing is left starting")?;
    host.stop().await?;
    Ok(())
}

/// One plugin whose primary kind is not served (its CRD is not installed) keeps no replica
/// NotReady: the host is ready once the others serve, and the status ConfigMap lists the
/// waiting plugin as starting (audit M6: one team's typo stalled every host rollout).
#[tokio::test]
async fn a_plugin_waiting_for_its_crd_does_not_hold_readiness() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("reload-nocrd").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("typo").kind("Widget"), "v01");
    dir.install_e2e(&E2eSettings::new("fine"), "v01");
    let mut host = Host::start(host_config("nocrd", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await.context("ready while typo waits for its kind")?;
    let want = BTreeMap::from([("o".to_string(), "1".to_string())]);
    create_primaries(&cms, &want).await?;
    wait_outputs(&cms, "fine", &want, Want::default()).await?;
    eventually("the status ConfigMap to list typo as starting", CONVERGE, || async {
        let line = status_line(&cms, "typo").await?;
        if line.starts_with("state=starting ") { Ok(()) } else { Err(anyhow!("{line}")) }
    })
    .await?;
    ensure!(host.log_text().contains("cannot start yet"), "typo is not waiting for its kind:\n{}", host.log_tail(20));
    host.stop().await?;
    Ok(())
}

/// A new version whose new watch can never sync (the host's identity may not list Secrets) is
/// rejected after the sync timeout, with an Event naming the watch, while the old version serves
/// on; meanwhile another plugin reloads — nothing waits for the stuck sync.
#[tokio::test]
async fn a_version_that_never_syncs_is_rejected_in_bounded_time_while_others_reload() -> Result<()> {
    const SYNC_TIMEOUT: Duration = Duration::from_secs(15);
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("reload-unsynced").await?;
    let cms: Api<ConfigMap> = ns.api();
    // The unprivileged user may use ConfigMaps and Events in the namespace, nothing else.
    let rbac = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: host, namespace: {ns}}}\nrules:\n\
         - {{apiGroups: [\"\"], resources: [configmaps, configmaps/finalizers], verbs: [\"*\"]}}\n\
         - {{apiGroups: [\"\", events.k8s.io], resources: [events], verbs: [create, patch, update, get, list, watch]}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: host, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: host}}\n\
         subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: kubewasm-unprivileged}}]\n",
        ns = ns.name()
    );
    cp.kubectl()?.run_with_stdin(&["apply", "-f", "-"], Some(&rbac)).await?;
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("stuck"), "v01");
    dir.install_e2e(&E2eSettings::new("other"), "v01");
    let config = host_config("unsynced", dir.path(), cp.unprivileged_kubeconfig_path(), ns.name()).arg(format!("--sync-timeout={}s", SYNC_TIMEOUT.as_secs()));
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    let mut want = BTreeMap::from([("o".to_string(), "1".to_string())]);
    create_primaries(&cms, &want).await?;
    wait_outputs(&cms, "stuck", &want, Want { variant: Some("v01"), ..Want::default() }).await?;
    wait_outputs(&cms, "other", &want, Want { variant: Some("v01"), ..Want::default() }).await?;

    let replaced = std::time::Instant::now();
    dir.install_e2e(&E2eSettings::new("stuck").extra("get,list,watch Secret.v1"), "v02");
    tokio::time::sleep(Duration::from_secs(2)).await;
    dir.replace("other", &e2e_variant("v02"));
    host.wait_metric(RELOADS, &reloads("other", "reloaded"), CONVERGE, |v| v >= 1.0).await?;
    wait_outputs(&cms, "other", &want, Want { variant: Some("v02"), ..Want::default() }).await?;
    let other_done = replaced.elapsed();
    ensure!(other_done < SYNC_TIMEOUT, "the other plugin's reload waited for the stuck sync ({other_done:?})");

    let event = wait_event(ns.client(), ns.name(), STATUS, "PluginRejected", "did not sync within").await?;
    let rejected = replaced.elapsed();
    ensure!(rejected < SYNC_TIMEOUT + Duration::from_secs(20), "the stuck version was rejected only after {rejected:?}");
    ensure!(event.note.as_deref().is_some_and(|n| n.contains("stuck") && n.contains("Secret")), "the Event names the plugin and the watch: {event:?}");
    set_input(&cms, "o", "2").await?;
    want.insert("o".into(), "2".into());
    wait_outputs(&cms, "stuck", &want, Want { variant: Some("v01"), ..Want::default() }).await.context("the old version serves on")?;
    eprintln!("other reloaded {other_done:?} after the stuck version came; the stuck one was rejected after {rejected:?}");
    host.stop().await?;
    Ok(())
}

/// Under load, lowering a plugin's max-concurrency drains to the new setting and starts
/// nothing beyond it; raising it again uses the new capacity and no more. Sampled from
/// `controller_runtime_active_workers` every 50 ms throughout.
#[tokio::test]
async fn concurrency_down_and_up_under_load_never_exceeds_the_setting() -> Result<()> {
    const SLEEP_MS: u64 = 1000;
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("reload-concurrency").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    let settings = |workers: u32| E2eSettings::new("busy").max_concurrency(workers);
    dir.install_e2e(&settings(8), "v01");
    let mut host = Host::start(host_config("concurrency", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let names: Vec<String> = (0..24).map(|i| format!("c{i}")).collect();
    let inputs: BTreeMap<String, String> = names.iter().map(|n| (n.clone(), "0".to_string())).collect();
    create_primaries(&cms, &inputs).await?;
    for name in &names {
        annotate(&cms, name, &[(support::SLEEP_MS, Some(&SLEEP_MS.to_string()))]).await?;
    }
    // Load: every primary changes again and again.
    let churn = churn(&cms, &names, Duration::from_millis(10));
    let samples: Arc<std::sync::Mutex<Vec<(std::time::Instant, f64)>>> = Default::default();
    let sampler = {
        let (samples, addr) = (samples.clone(), host.metrics_addr());
        tokio::spawn(async move {
            loop {
                if let Ok(text) = kubewasm_tests::host::scrape("concurrency", addr).await {
                    let active = kubewasm_tests::prom::sum(&text, "controller_runtime_active_workers", &[("controller", "busy")]);
                    samples.lock().unwrap().push((std::time::Instant::now(), active));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let active = [("controller", "busy")];
    host.wait_metric("controller_runtime_active_workers", &active, CONVERGE, |v| v >= 8.0).await.context("all 8 workers busy")?;
    tokio::time::sleep(Duration::from_secs(2)).await;

    dir.write_atomic("busy.toml", settings(2).to_toml().as_bytes());
    let down = std::time::Instant::now();
    host.wait_metric(RELOADS, &reloads("busy", "reloaded"), CONVERGE, |v| v >= 1.0).await?;
    // The reconciles running at the change finish; then no more than two at a time.
    let drained = std::time::Instant::now() + Duration::from_millis(SLEEP_MS + 1500);
    tokio::time::sleep_until(drained.into()).await;
    tokio::time::sleep(Duration::from_secs(4)).await;

    dir.write_atomic("busy.toml", settings(5).to_toml().as_bytes());
    let up = std::time::Instant::now();
    host.wait_metric(RELOADS, &reloads("busy", "reloaded"), CONVERGE, |v| v >= 2.0).await?;
    host.wait_metric("controller_runtime_active_workers", &active, CONVERGE, |v| v >= 5.0).await.context("the raised setting is used")?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    churn.abort();
    sampler.abort();

    let samples = samples.lock().unwrap().clone();
    let over = |from: std::time::Instant, to: std::time::Instant, limit: f64| -> Vec<f64> {
        samples.iter().filter(|(at, v)| *at >= from && *at < to && *v > limit).map(|(_, v)| *v).collect()
    };
    let start = samples.first().map(|s| s.0).context("no samples")?;
    let end = std::time::Instant::now();
    ensure!(over(start, end, 8.0).is_empty(), "more than 8 active: {:?}", over(start, end, 8.0));
    ensure!(over(drained, up, 2.0).is_empty(), "more than 2 active after lowering to 2: {:?}", over(drained, up, 2.0));
    ensure!(over(up, end, 5.0).is_empty(), "more than 5 active after raising to 5: {:?}", over(up, end, 5.0));
    let in_window = samples.iter().filter(|(at, _)| *at >= drained && *at < up).count();
    ensure!(in_window >= 20, "only {in_window} samples while the setting was 2");
    let limit = host.metric("controller_runtime_max_concurrent_reconciles", &active).await?;
    ensure!(limit == 5.0, "max_concurrent_reconciles says {limit}");
    let before = samples.iter().filter(|(at, _)| *at < down).count();
    ensure!(before >= 5, "only {before} samples before lowering the setting");
    eprintln!("{} samples; lowered at +{:?}, raised at +{:?}", samples.len(), down.duration_since(start), up.duration_since(start));
    host.stop().await?;
    Ok(())
}

/// Automatic rollback (issue 14): a new version that faults on 6 of 10 objects the version
/// before handled is swapped back, with a Warning Event and a metric; the file left in place is
/// not loaded again, even rewritten with the same content, until it changes — and a fixed
/// version then loads as any reload does.
#[tokio::test]
async fn a_version_failing_on_most_objects_is_rolled_back_until_the_file_changes() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("reload-rollback").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    let settings = E2eSettings::new("wobbly");
    dir.install_e2e(&settings, "v01");
    let mut host = Host::start(host_config("rollback", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let plugin = [("plugin", "wobbly")];
    let traps = [("plugin", "wobbly"), ("kind", "trap")];

    let want = create_trapping_primaries(&cms, 10, 6, "v02").await?;
    wait_outputs(&cms, "wobbly", &want, Want { variant: Some("v01"), ..Want::default() }).await?;
    ensure!(host.metric("kubewasm_plugin_faults_total", &plugin).await? == 0.0, "v01 handles every object");

    dir.install_e2e(&settings, "v02");
    host.wait_metric("kubewasm_plugin_rollbacks_total", &plugin, CONVERGE, |n| n == 1.0).await.context("v02 must be rolled back")?;
    ensure!(host.metric("kubewasm_plugin_faults_total", &traps).await? > 0.0, "v02 ran and trapped");
    let event = wait_event(ns.client(), ns.name(), STATUS, "RolledBack", "rolled back wobbly v02").await?;
    ensure!(event.type_.as_deref() == Some("Warning"), "{event:?}");
    let note = event.note.unwrap_or_default();
    ensure!(note.contains("to v01") && note.contains("of 10 objects"), "{note}");
    // v01 serves again: every object is reconciled by it after the swap back.
    let changed: BTreeMap<String, String> = want.keys().map(|k| (k.clone(), "2".to_string())).collect();
    for name in changed.keys() {
        set_input(&cms, name, "2").await?;
    }
    wait_outputs(&cms, "wobbly", &changed, Want { variant: Some("v01"), ..Want::default() }).await?;
    eventually("the status ConfigMap to list wobbly v01", CONVERGE, || async {
        let line = status_line(&cms, "wobbly").await?;
        if line.starts_with("version=v01 ") { Ok(()) } else { Err(anyhow!("{line}")) }
    })
    .await?;

    // The v02 file stays, and is written again with the same content: not loaded again.
    let faults = host.metric("kubewasm_plugin_faults_total", &traps).await?;
    dir.install_e2e(&settings, "v02");
    tokio::time::sleep(Duration::from_secs(8)).await;
    ensure!(status_line(&cms, "wobbly").await?.starts_with("version=v01 "), "v02 was loaded again");
    ensure!(host.metric(RELOADS, &reloads("wobbly", "reloaded")).await? == 1.0, "only the first v02 was a reload");
    ensure!(host.metric("kubewasm_plugin_rollbacks_total", &plugin).await? == 1.0);
    ensure!(host.metric("kubewasm_plugin_faults_total", &traps).await? == faults, "nothing ran v02 again");

    // A fixed version changes the file: loaded as usual, and kept.
    dir.install_e2e(&settings, "v03");
    host.wait_metric(RELOADS, &reloads("wobbly", "reloaded"), CONVERGE, |n| n == 2.0).await?;
    wait_outputs(&cms, "wobbly", &changed, Want { variant: Some("v03"), ..Want::default() }).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(host.metric("kubewasm_plugin_rollbacks_total", &plugin).await? == 1.0, "v03 is not rolled back");
    ensure!(status_line(&cms, "wobbly").await?.starts_with("version=v03 "));
    host.stop().await?;
    Ok(())
}

/// A standby judges a hot-reloaded version by its own reconciles once it leads: its rollback
/// window counts time spent leading only. Two hosts share a plugin directory; v02 (trapping on
/// 6 of 10 objects) is installed; the leader rolls it back; the standby, past the window on the
/// clock but never having led, still holds v01 at hand — when the leader dies, the standby takes
/// over, runs v02, and rolls it back too.
#[tokio::test]
async fn a_standby_judges_a_new_version_once_it_takes_over() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("reload-takeover").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    let settings = E2eSettings::new("wobbly");
    dir.install_e2e(&settings, "v01");
    let lease = "e2e-takeover";
    let status = [("name", lease)];
    let elected = |name: &str| {
        host_config(name, dir.path(), cp.kubeconfig_path(), ns.name())
            .leader_elect(ns.name(), lease)
            .arg("--rollback-window=5s")
            .status_configmap(ns.name(), &format!("{STATUS}-{name}"))
    };
    let mut h1 = Host::start(elected("h1")).await?;
    h1.wait_ready(READY).await?;
    h1.wait_metric("leader_election_master_status", &status, CONVERGE, |v| v == 1.0).await?;
    let mut h2 = Host::start(elected("h2")).await?;
    h2.wait_ready(READY).await?;
    let want = create_trapping_primaries(&cms, 10, 6, "v02").await?;
    wait_outputs(&cms, "wobbly", &want, Want { variant: Some("v01"), ..Want::default() }).await?;

    dir.install_e2e(&settings, "v02");
    let plugin = [("plugin", "wobbly")];
    h1.wait_metric("kubewasm_plugin_rollbacks_total", &plugin, CONVERGE, |n| n == 1.0).await.context("the leader rolls v02 back")?;
    h2.wait_metric(RELOADS, &reloads("wobbly", "reloaded"), CONVERGE, |n| n == 1.0).await.context("the standby loads v02 too")?;
    // Past the 5 s window on the clock; the standby has not led, so nothing is decided yet.
    tokio::time::sleep(Duration::from_secs(8)).await;
    ensure!(h2.metric("kubewasm_plugin_rollbacks_total", &plugin).await? == 0.0, "a standby reconciles nothing and judges nothing");
    ensure!(h2.metric("controller_runtime_reconcile_total", &[("controller", "wobbly")]).await? == 0.0);

    h1.kill();
    h1.wait_exit(Duration::from_secs(10)).await?;
    h2.wait_metric("leader_election_master_status", &status, CONVERGE, |v| v == 1.0).await?;
    h2.wait_metric("kubewasm_plugin_rollbacks_total", &plugin, CONVERGE, |n| n == 1.0)
        .await
        .context("the new leader judges v02 by its own reconciles and rolls it back")?;
    let changed: BTreeMap<String, String> = want.keys().map(|k| (k.clone(), "2".to_string())).collect();
    for name in changed.keys() {
        set_input(&cms, name, "2").await?;
    }
    wait_outputs(&cms, "wobbly", &changed, Want { variant: Some("v01"), ..Want::default() }).await?;
    h2.stop().await?;
    Ok(())
}

/// Fifty plugins of the default memory limit load under the default plugin memory budget
/// (issue 26): each version reserves its first instance's limit at admission (64 MiB; 3.2 GiB of
/// the 4 GiB in all), not limit × (max-concurrency + 1), which let only twenty-one in. Then they
/// all reconcile one object, the budget never passed.
#[tokio::test]
async fn fifty_plugins_load_under_the_default_memory_budget() -> Result<()> {
    const PLUGINS: usize = 50;
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("reload-fifty").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    let names: Vec<String> = (0..PLUGINS).map(|i| format!("p{i:02}")).collect();
    for name in &names {
        dir.install_e2e(&E2eSettings::new(name), "v01");
    }
    let mut host = Host::start(host_config("fifty", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(Duration::from_secs(300)).await?;
    let reserved = host.metric("kubewasm_plugin_memory_budget_bytes", &[("state", "reserved")]).await?;
    let total = host.metric("kubewasm_plugin_memory_budget_bytes", &[("state", "total")]).await?;
    ensure!(total == (4u64 << 30) as f64, "the default budget is 4 GiB, not {total}");
    ensure!(reserved == (PLUGINS as u64 * (64 << 20)) as f64, "{reserved} bytes reserved: not one 64 MiB instance for each of {PLUGINS} plugins");
    let want = BTreeMap::from([("x".to_string(), "1".to_string())]);
    create_primaries(&cms, &want).await?;
    for name in &names {
        wait_outputs(&cms, name, &want, Want::default()).await.with_context(|| format!("plugin {name}"))?;
    }
    let metrics = host.metrics().await?;
    ensure!(kubewasm_tests::prom::sum(&metrics, RELOADS, &[("result", "loaded")]) == PLUGINS as f64, "not every plugin loaded:\n{}", host.log_tail(20));
    ensure!(kubewasm_tests::prom::sum(&metrics, "kubewasm_plugin_memory_budget_bytes", &[("state", "reserved")]) <= (4u64 << 30) as f64);
    host.stop().await?;
    Ok(())
}
