//! End-to-end tests of the controller runtime — `map-related`: watched objects mapped to primaries
//! — set aside while it faults, children moved between primaries, run only on the leader with a
//! standby catching up, and nothing missed under churn. The real `kubewasm run` binary against the
//! local control plane, with the suite's `e2e-guest`; every test runs its own host processes on
//! loopback ports.
//!
//! `cargo test -p kubewasm-tests --test mapping`

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubewasm_tests::{ControlPlane, E2eSettings, Host, PluginDir, eventually};
use serde_json::json;
use support::*;

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
