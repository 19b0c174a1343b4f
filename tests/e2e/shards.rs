//! Scale-out (issue 22) against the real API server: three `kubewasm` replicas on loopback in one
//! ring share a plugin's primaries, each caching and reconciling about a third of them; a killed
//! replica's objects move within the lease; scaling out and in hands objects over with the drain
//! label; a partitioned replica stops writing before its objects move; and the shard contract
//! holds for an external sharder (the test plays kubernetes-controller-sharding's, which cannot
//! be built here); a plugin with `sharding = false` runs on the leader only. Over each
//! whole test, no object is reconciled by two replicas at once (`kubewasm_tests::trace`).
//!
//! `cargo test -p kubewasm-tests --test shards`

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubewasm::resource::{Gvk, ObjectKey};
use kubewasm::shard::ring::{self, Ring};
use kubewasm_tests::plugindir::OUTPUT_LABEL;
use kubewasm_tests::proxy::{FaultProxy, Mode};
use kubewasm_tests::trace::{self, Interval};
use kubewasm_tests::{ControlPlane, E2eSettings, Host, PluginDir, TestNamespace, audit, eventually};
use serde_json::json;
use support::*;

const READY: Duration = Duration::from_secs(90);
const RING: &str = "ring";
const LEADER: &str = "leader";
const PLUGIN: &str = "sharded";
/// A second plugin whose primaries are the first one's outputs (owned Secrets).
const FOLLOWER: &str = "follower";
const SHARD: &str = "shard.alpha.sharding.timebertt.dev/ring";
const DRAIN: &str = "drain.alpha.sharding.timebertt.dev/ring";
/// The shards' lease duration (client-go's default, the host's).
const LEASE: Duration = Duration::from_secs(15);

/// One replica: its host and the plugin directory it runs (its own, so it stamps its name).
struct Replica {
    host: Host,
    _dir: PluginDir,
    /// When it was killed, for the trace of a reconcile it was in.
    killed: Option<Timestamp>,
}

impl Replica {
    async fn start(ns: &TestNamespace, name: &str, kubeconfig: &std::path::Path, extra: &[&str]) -> Result<Replica> {
        Replica::start_with(ns, name, kubeconfig, extra, &[]).await
    }

    /// With these lines in the plugin's `[kubewasm]` options.
    async fn start_with(ns: &TestNamespace, name: &str, kubeconfig: &std::path::Path, extra: &[&str], options: &[&str]) -> Result<Replica> {
        let mut settings = sharded(name);
        for line in options {
            settings = settings.option(line);
        }
        Replica::start_plugins(ns, name, kubeconfig, extra, &[(settings, "v01")]).await
    }

    /// Running these plugins (settings, variant).
    async fn start_plugins(ns: &TestNamespace, name: &str, kubeconfig: &std::path::Path, extra: &[&str], plugins: &[(E2eSettings, &str)]) -> Result<Replica> {
        let dir = PluginDir::new();
        for (settings, variant) in plugins {
            dir.install_e2e(settings, variant);
        }
        let mut config = host_config(name, dir.path(), kubeconfig, ns.name()).instance(name).shard_ring(ns.name(), LEADER, RING);
        // The plugins' info records only (the trace), so that their log budget (100 records a
        // second) keeps every trace line: a dropped `end` would leave an interval open.
        for (settings, _) in plugins {
            config = config.arg(format!("--plugin-log-level={}=info", settings.name));
        }
        for arg in extra {
            config = config.arg(*arg);
        }
        let mut host = Host::start(config).await?;
        host.wait_ready(READY).await?;
        Ok(Replica { host, _dir: dir, killed: None })
    }

    fn kill(&mut self) {
        self.host.kill();
        self.killed = Some(Timestamp::now());
    }

    fn intervals(&self) -> Vec<Interval> {
        trace::intervals(self.host.instance(), &self.host.log_text(), self.killed)
    }

    async fn objects(&self) -> Result<f64> {
        Ok(self.host.metric("kubewasm_shard_objects", &[("plugin", PLUGIN)]).await?)
    }

    async fn reconciles(&self) -> Result<f64> {
        Ok(self.host.metric("controller_runtime_reconcile_total", &[("controller", PLUGIN)]).await?)
    }
}

/// The suite's plugin on replica `name`: primaries are the labelled ConfigMaps, outputs owned
/// Secrets, every reconcile traced.
fn sharded(name: &str) -> E2eSettings {
    E2eSettings::new(PLUGIN).host(name).owns().trace().max_concurrency(4)
}

fn inputs(count: usize, input: &str) -> BTreeMap<String, String> {
    (0..count).map(|i| (format!("k{i}"), input.to_string())).collect()
}

/// The shard label of every primary (`None`: unassigned).
async fn assignments(cms: &Api<ConfigMap>) -> Result<BTreeMap<String, Option<String>>> {
    let list = cms.list(&ListParams::default().labels(PRIMARY)).await?;
    Ok(list.items.into_iter().map(|cm| (cm.metadata.name.clone().unwrap_or_default(), cm.metadata.labels.unwrap_or_default().get(SHARD).cloned())).collect())
}

/// Waits until every primary is assigned to one of `shards` and none is draining; returns the
/// assignment.
async fn wait_assigned(cms: &Api<ConfigMap>, shards: &[&str], timeout: Duration) -> Result<BTreeMap<String, String>> {
    Ok(eventually(&format!("every primary assigned to one of {shards:?}"), timeout, || async {
        let list = cms.list(&ListParams::default().labels(PRIMARY)).await?;
        let mut out = BTreeMap::new();
        let mut wrong = Vec::new();
        for cm in list.items {
            let name = cm.metadata.name.clone().unwrap_or_default();
            let labels = cm.metadata.labels.unwrap_or_default();
            match labels.get(SHARD) {
                Some(shard) if shards.contains(&shard.as_str()) && !labels.contains_key(DRAIN) => drop(out.insert(name, shard.clone())),
                other => wrong.push(format!("{name}: {other:?} drain={}", labels.contains_key(DRAIN))),
            }
        }
        if wrong.is_empty() { Ok(out) } else { Err(anyhow!("{} not yet: {}", wrong.len(), wrong.iter().take(8).cloned().collect::<Vec<_>>().join("; "))) }
    })
    .await?)
}

/// Every output (an owned Secret) carries the input and was written by the shard its primary is
/// assigned to; its own shard label says the same (children follow their controller).
async fn wait_outputs_on_shards(ns: &TestNamespace, inputs: &BTreeMap<String, String>, shards: &[&str]) -> Result<()> {
    let (cms, secrets): (Api<ConfigMap>, Api<Secret>) = (ns.api(), ns.api());
    eventually("every output from its primary's shard", CONVERGE, || async {
        // The assignment as it is now: the assigner may move objects meanwhile (a replica that
        // joined late draining objects onto itself), and the outputs follow it.
        let assigned = wait_assigned(&cms, shards, CONVERGE).await?;
        let mut wrong = Vec::new();
        for (name, input) in inputs {
            let output = secrets.get_opt(&format!("{name}.{PLUGIN}")).await?;
            let (data, label): (BTreeMap<String, String>, _) = output
                .map(|secret| {
                    let data = secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned())).collect();
                    (data, secret.metadata.labels.unwrap_or_default().get(SHARD).cloned())
                })
                .unwrap_or_default();
            let want = assigned.get(name);
            if data.get("input") != Some(input) || data.get("host") != want || label.as_ref() != want {
                wrong.push(format!("{name}: want input={input} host={want:?}, have {data:?} label {label:?}"));
            }
        }
        if wrong.is_empty() { Ok(()) } else { Err(anyhow!("{}", wrong.iter().take(8).cloned().collect::<Vec<_>>().join("; "))) }
    })
    .await?;
    Ok(())
}

/// The trace checker over every replica that ran in the test. A replica that dropped records of
/// the plugin (over its log budget) may have lost a trace line: that is said instead of a verdict.
async fn assert_never_two_at_once(replicas: &[&Replica]) -> Result<usize> {
    for replica in replicas.iter().filter(|r| r.killed.is_none()) {
        if let Ok(dropped) = replica.host.metric("kubewasm_plugin_log_records_dropped_total", &[("plugin", PLUGIN)]).await {
            ensure!(dropped == 0.0, "{} dropped {dropped} log records of the plugin: the trace is incomplete", replica.host.instance());
        }
    }
    let all: Vec<Interval> = replicas.iter().flat_map(|r| r.intervals()).collect();
    ensure!(!all.is_empty(), "no reconcile traced: the checker would find nothing");
    let overlaps = trace::overlaps(&all);
    ensure!(overlaps.is_empty(), "{} pairs of reconciles of one object on two replicas at once, e.g. {:?}", overlaps.len(), &overlaps[..overlaps.len().min(3)]);
    Ok(all.len())
}

#[tokio::test]
async fn three_replicas_share_the_primaries_each_caching_and_reconciling_a_third() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards").await?;
    let cms: Api<ConfigMap> = ns.api();
    let names = ["shard-a", "shard-b", "shard-c"];
    let mut replicas = Vec::new();
    for name in names {
        replicas.push(Replica::start(&ns, name, cp.kubeconfig_path(), &[]).await?);
    }
    let first = inputs(300, "1");
    create_primaries(&cms, &first).await?;
    wait_outputs_on_shards(&ns, &first, &names).await?;

    // Each caches its share: the ring's split of these 300 keys over these three names.
    let ring = Ring::new(names);
    let cm = kubewasm::resource::Gvk::new("", "v1", "ConfigMap");
    let expected: BTreeMap<&str, usize> = names
        .iter()
        .map(|n| {
            (*n, first.keys().filter(|k| ring.shard_for(&ring::object_key(&cm, &kubewasm::resource::ObjectKey::new(Some(ns.name()), k))) == Some(n)).count())
        })
        .collect();
    let mut cached = BTreeMap::new();
    for (replica, name) in replicas.iter_mut().zip(names) {
        let want = expected[name] as f64;
        let have = replica.host.wait_metric("kubewasm_shard_objects", &[("plugin", PLUGIN)], CONVERGE, |v| v == want).await?;
        ensure!((70.0..=130.0).contains(&have), "{name} caches {have} of 300 primaries (want about 100)");
        cached.insert(name, have);
    }
    let assigned = wait_assigned(&cms, &names, CONVERGE).await?;
    for name in names {
        ensure!(assigned.values().filter(|s| *s == name).count() == expected[name], "{name}'s objects are the ring's choice");
    }

    // One change per object: each is reconciled by its own shard only — about 300 reconciles
    // over the three, and one more per object for the change to its owned output (what one
    // replica does too), not three times that.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut before = Vec::new();
    for r in &replicas {
        before.push(r.reconciles().await?);
    }
    let changed = Timestamp::now();
    let second = inputs(300, "2");
    for name in second.keys() {
        set_input(&cms, name, "2").await?;
    }
    wait_outputs_on_shards(&ns, &second, &names).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut per_replica = BTreeMap::new();
    for ((r, b), name) in replicas.iter().zip(&before).zip(names) {
        per_replica.insert(name, r.reconciles().await? - b);
    }
    let done: f64 = per_replica.values().sum();
    ensure!((300.0..=660.0).contains(&done), "one change to each of 300 objects took {done} reconciles over three replicas");
    let elsewhere: Vec<Interval> = replicas
        .iter()
        .flat_map(|r| r.intervals())
        .filter(|i| i.start >= changed && assigned.get(i.key.rsplit('/').next().unwrap_or_default()) != Some(&i.host))
        .collect();
    ensure!(elsewhere.is_empty(), "reconciled off their shard: {:?}", &elsewhere[..elsewhere.len().min(3)]);

    // `kubewasm shards` shows the ring.
    let bin = tokio::task::spawn_blocking(kubewasm_tests::kubewasm_binary).await??;
    let table = std::process::Command::new(bin)
        .args(["shards", "--ring", RING, "--lease-namespace", ns.name(), "--lease-name", LEADER])
        .arg(format!("--kubeconfig={}", cp.kubeconfig_path().display()))
        .output()?;
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    ensure!(table.starts_with("ring ring: 3 shard(s), 300 primaries"), "kubewasm shards said:\n{table}");
    for name in names {
        ensure!(
            table.lines().any(|l| l.starts_with(name) && l.contains(" ready ") && l.contains(&format!("{PLUGIN}={}", expected[name]))),
            "{name} in:\n{table}"
        );
    }
    let traced = assert_never_two_at_once(&replicas.iter().collect::<Vec<_>>()).await?;
    eprintln!("cached per replica {cached:?}; {done} reconciles for 300 changes ({per_replica:?}); {traced} reconciles traced, none at once\n{table}");
    for r in replicas {
        r.host.stop().await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_killed_replicas_objects_move_within_the_lease_and_nothing_is_lost() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards-kill").await?;
    let cms: Api<ConfigMap> = ns.api();
    let names = ["kill-a", "kill-b", "kill-c"];
    let mut replicas = Vec::new();
    for name in names {
        replicas.push(Replica::start(&ns, name, cp.kubeconfig_path(), &[]).await?);
    }
    let keys: Vec<String> = inputs(90, "0").into_keys().collect();
    create_primaries(&cms, &inputs(90, "0")).await?;
    wait_outputs_on_shards(&ns, &inputs(90, "0"), &names).await?;
    // Not the leader (that would be a leader failover as well): the youngest replica.
    let victim = 2;
    let churn = churn(&cms, &keys, Duration::from_millis(20));
    tokio::time::sleep(Duration::from_secs(3)).await;

    replicas[victim].kill();
    let killed = Instant::now();
    let survivors = [names[0], names[1]];
    wait_assigned(&cms, &survivors, Duration::from_secs(60)).await?;
    let moved = killed.elapsed();
    // The bound: the lease duration (the assigner takes the Lease once it saw no renewal for
    // that long, from its last renewal up to 2 s before the kill) plus the assigner's check and
    // the moves.
    ensure!(moved <= LEASE + Duration::from_secs(8), "the killed replica's objects took {moved:?} to move");
    tokio::time::sleep(Duration::from_secs(3)).await;
    churn.abort();
    let _ = churn.await;
    let last = inputs(90, "final");
    for name in last.keys() {
        set_input(&cms, name, "final").await?;
    }
    wait_outputs_on_shards(&ns, &last, &survivors).await?;
    // The survivors cache the whole of it between them.
    let mut cached = Vec::new();
    for r in &replicas[..2] {
        cached.push(r.objects().await?);
    }
    ensure!(cached.iter().sum::<f64>() == 90.0, "the survivors cache {cached:?} of 90 primaries");
    let traced = assert_never_two_at_once(&replicas.iter().collect::<Vec<_>>()).await?;
    eprintln!("SIGKILL to reassignment of every object: {moved:?}; survivors cache {cached:?}; {traced} reconciles traced, none at once");
    let mut replicas = replicas.into_iter();
    for r in replicas.by_ref().take(2) {
        r.host.stop().await?;
    }
    Ok(())
}

#[tokio::test]
async fn scaling_three_to_four_to_two_hands_objects_over_without_overlap_or_loss() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards-scale").await?;
    let cms: Api<ConfigMap> = ns.api();
    let mut names = vec!["scale-a", "scale-b", "scale-c"];
    let mut replicas = Vec::new();
    for name in &names {
        replicas.push(Replica::start(&ns, name, cp.kubeconfig_path(), &[]).await?);
    }
    let keys: Vec<String> = inputs(90, "0").into_keys().collect();
    create_primaries(&cms, &inputs(90, "0")).await?;
    wait_outputs_on_shards(&ns, &inputs(90, "0"), &names).await?;
    // Slow reconciles, so that drains meet reconciles in flight.
    for key in keys.iter().step_by(3) {
        annotate(&cms, key, &[(SLEEP_MS, Some("300"))]).await?;
    }
    let churn = churn(&cms, &keys, Duration::from_millis(20));

    // 3 → 4: the new replica's share is drained off the others and handed over.
    replicas.push(Replica::start(&ns, "scale-d", cp.kubeconfig_path(), &[]).await?);
    names.push("scale-d");
    replicas[3].host.wait_metric("kubewasm_shard_objects", &[("plugin", PLUGIN)], CONVERGE, |v| v > 0.0).await.context("the fourth replica gets its share")?;
    wait_assigned(&cms, &names, CONVERGE).await?;
    let mut handovers = 0.0;
    for r in &replicas[..3] {
        handovers += r.host.metric("kubewasm_shard_handovers_total", &[("plugin", PLUGIN)]).await?;
    }
    ensure!(handovers > 0.0, "objects reached the new replica without a handover");

    // 4 → 2: two replicas stop gracefully (their Leases are released; their objects move at once).
    let mut stopped = vec![replicas.remove(1), replicas.remove(1)];
    let started = Instant::now();
    for r in &mut stopped {
        r.host.terminate();
    }
    for r in &mut stopped {
        let status = r.host.wait_exit(Duration::from_secs(40)).await?;
        ensure!(status.success(), "{} exited {status}", r.host.name());
    }
    let remaining = ["scale-a", "scale-d"];
    wait_assigned(&cms, &remaining, Duration::from_secs(30)).await?;
    let moved = started.elapsed();
    churn.abort();
    let _ = churn.await;
    let last = inputs(90, "final");
    for name in last.keys() {
        set_input(&cms, name, "final").await?;
    }
    wait_outputs_on_shards(&ns, &last, &remaining).await?;
    let traced = assert_never_two_at_once(&replicas.iter().chain(&stopped).collect::<Vec<_>>()).await?;
    eprintln!("3 → 4: {handovers} handovers; 4 → 2: objects of the stopped replicas placed {moved:?} after SIGTERM; {traced} reconciles traced");
    for r in replicas {
        r.host.stop().await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_partitioned_replica_stops_writing_before_its_objects_move() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards-cut").await?;
    let cms: Api<ConfigMap> = ns.api();
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], cp.port()))).await?;
    let through_proxy = tempfile::NamedTempFile::new()?;
    proxy.kubeconfig(cp.kubeconfig_path(), cp.port(), through_proxy.path())?;
    let names = ["cut-a", "cut-b", "cut-c"];
    // cut-a starts first and leads (assigns); cut-b reaches the API server through the proxy.
    let mut replicas = vec![Replica::start(&ns, names[0], cp.kubeconfig_path(), &[]).await?];
    replicas.push(Replica::start(&ns, names[1], through_proxy.path(), &[]).await?);
    replicas.push(Replica::start(&ns, names[2], cp.kubeconfig_path(), &[]).await?);
    let keys: Vec<String> = inputs(60, "0").into_keys().collect();
    create_primaries(&cms, &inputs(60, "0")).await?;
    wait_outputs_on_shards(&ns, &inputs(60, "0"), &names).await?;
    let before = assignments(&cms).await?;
    let victims = before.values().filter(|s| s.as_deref() == Some(names[1])).count();
    ensure!(victims > 0, "nothing on the replica to cut off");
    let churn = churn(&cms, &keys, Duration::from_millis(20));
    tokio::time::sleep(Duration::from_secs(2)).await;

    proxy.set(Mode::BlackHole);
    let cut = Instant::now();
    wait_assigned(&cms, &[names[0], names[2]], Duration::from_secs(60)).await.context("the cut-off replica's objects move")?;
    let moved = cut.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.set(Mode::Reset);
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.set(Mode::Pass);
    // Back on the network it waits out the assigner's hold on its Lease, relists, and gets its
    // share back through drains.
    replicas[1].host.wait_metric("kubewasm_shard_member", &[("ring", RING)], Duration::from_secs(90), |v| v == 1.0).await.context("it rejoins")?;
    wait_assigned(&cms, &names, CONVERGE).await?;
    churn.abort();
    let _ = churn.await;
    let last = inputs(60, "final");
    for name in last.keys() {
        set_input(&cms, name, "final").await?;
    }
    wait_outputs_on_shards(&ns, &last, &names).await?;

    // From the audit log: the assigner took the Lease of the cut-off replica; between then and
    // its own taking it back, the API server accepted no write from it.
    let agent = format!("({})", names[1]);
    let all = audit::read(cp.data_dir());
    let lease_of = |e: &audit::AuditEvent| e.resource() == "leases" && e.object_ref.as_ref().and_then(|o| o.name.as_deref()) == Some(names[1]);
    let mine = |e: &audit::AuditEvent| {
        e.user_agent.ends_with(&agent) && e.namespace() == Some(ns.name()) && e.accepted() && e.verb != "get" && e.verb != "list" && e.verb != "watch"
    };
    let taken = all
        .iter()
        .filter(|e| lease_of(e) && e.accepted() && e.verb == "update" && !e.user_agent.ends_with(&agent))
        .map(|e| e.request_received_timestamp)
        .min()
        .context("the assigner never took the cut-off replica's Lease")?;
    let back = all
        .iter()
        .filter(|e| lease_of(e) && mine(e) && e.request_received_timestamp > taken)
        .map(|e| e.request_received_timestamp)
        .min()
        .context("it never took its Lease back")?;
    let late: Vec<String> = all
        .iter()
        .filter(|e| mine(e) && e.request_received_timestamp >= taken && e.request_received_timestamp < back)
        .map(|e| format!("{} {} {:?} at {}", e.verb, e.resource(), e.object_ref.as_ref().and_then(|o| o.name.clone()), e.request_received_timestamp))
        .collect();
    ensure!(late.is_empty(), "the cut-off replica wrote after its Lease was taken at {taken}: {late:?}");
    let last_write = all.iter().filter(|e| mine(e) && e.request_received_timestamp < taken).map(|e| e.request_received_timestamp).max().context("no writes")?;
    let traced = assert_never_two_at_once(&replicas.iter().collect::<Vec<_>>()).await?;
    eprintln!(
        "cut off: {victims} objects moved {moved:?} after the cut; its last write {:?} before its Lease was taken; {traced} reconciles traced",
        taken.duration_since(last_write)
    );
    for r in replicas {
        r.host.stop().await?;
    }
    Ok(())
}

/// The shard's half of kubernetes-controller-sharding's contract, driven the way its sharder
/// drives it: the webhook's assignment (a shard label on an unassigned object), the controller's
/// drain (`drain...=true` on the resourceVersion it saw), and the shard's acknowledgement (both
/// labels removed) before the object is assigned again. The replicas run
/// `--shard-assigner=external`; this test plays the sharder: its own module cannot be built here
/// (`go mod download github.com/timebertt/kubernetes-controller-sharding@latest`: "reading
/// https://proxy.golang.org/github.com/timebertt/kubernetes-controller-sharding/@v/list: 403
/// Forbidden; server response: This module version is not available.").
#[tokio::test]
async fn the_shard_contract_holds_when_the_test_plays_the_external_sharder() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards-ext").await?;
    let cms: Api<ConfigMap> = ns.api();
    let names = ["ext-a", "ext-b"];
    let mut replicas = Vec::new();
    for name in names {
        replicas.push(Replica::start(&ns, name, cp.kubeconfig_path(), &["--shard-assigner=external"]).await?);
    }
    let leases: Api<Lease> = ns.api();
    eventually("both shard Leases", CONVERGE, || async {
        let n = leases.list(&ListParams::default().labels(&format!("alpha.sharding.timebertt.dev/controllerring={RING}"))).await?.items.len();
        if n == 2 { Ok(()) } else { Err(anyhow!("{n} shard Leases")) }
    })
    .await?;
    let first = inputs(30, "1");
    create_primaries(&cms, &first).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(assignments(&cms).await?.values().all(Option::is_none), "nothing assigns with an external sharder");
    let patch = |body: serde_json::Value| Patch::Merge(body);
    // The webhook, with only ext-a in the ring.
    for name in first.keys() {
        cms.patch(name, &PatchParams::default(), &patch(json!({"metadata": {"labels": {SHARD: "ext-a"}}}))).await?;
    }
    wait_outputs_on_shards(&ns, &first, &["ext-a"]).await?;

    // ext-b joins the ring: what hashes to it is drained off ext-a, acknowledged, then assigned.
    let ring = Ring::new(names);
    let cm = kubewasm::resource::Gvk::new("", "v1", "ConfigMap");
    let moving: Vec<String> = first
        .keys()
        .filter(|k| ring.shard_for(&ring::object_key(&cm, &kubewasm::resource::ObjectKey::new(Some(ns.name()), k))) == Some("ext-b"))
        .cloned()
        .collect();
    ensure!(!moving.is_empty(), "nothing hashes to ext-b");
    for name in &moving {
        let version = cms.get(name).await?.metadata.resource_version;
        cms.patch(name, &PatchParams::default(), &patch(json!({"metadata": {"resourceVersion": version, "labels": {DRAIN: "true"}}}))).await?;
    }
    eventually("ext-a acknowledges every drain", CONVERGE, || async {
        let now = assignments(&cms).await?;
        let pending: Vec<&String> = moving.iter().filter(|m| now.get(*m).is_some_and(Option::is_some)).collect();
        if pending.is_empty() { Ok(()) } else { Err(anyhow!("still labelled: {pending:?}")) }
    })
    .await?;
    let drains = cms.list(&ListParams::default().labels(DRAIN)).await?.items.len();
    ensure!(drains == 0, "{drains} objects still carry the drain label");
    let handovers = replicas[0].host.metric("kubewasm_shard_handovers_total", &[("plugin", PLUGIN)]).await?;
    ensure!(handovers == moving.len() as f64, "ext-a handed over {handovers} objects, {} were drained", moving.len());
    for name in &moving {
        cms.patch(name, &PatchParams::default(), &patch(json!({"metadata": {"labels": {SHARD: "ext-b"}}}))).await?;
    }
    let second = inputs(30, "2");
    for name in second.keys() {
        set_input(&cms, name, "2").await?;
    }
    wait_outputs_on_shards(&ns, &second, &names).await?;
    let assigned = wait_assigned(&cms, &names, CONVERGE).await?;
    ensure!(moving.iter().all(|m| assigned[m] == "ext-b"), "the drained objects are ext-b's now");
    let traced = assert_never_two_at_once(&replicas.iter().collect::<Vec<_>>()).await?;
    eprintln!("{} objects drained from ext-a and assigned to ext-b by the test's sharder; {traced} reconciles traced", moving.len());
    for r in replicas {
        r.host.stop().await?;
    }
    Ok(())
}

/// `sharding = false`: the plugin runs on the ring's leader only, as without a ring — nothing is
/// labelled, every output is the leader's, the other replica reconciles nothing.
#[tokio::test]
async fn a_plugin_with_sharding_off_runs_on_the_leader_only() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards-off").await?;
    let (cms, secrets): (Api<ConfigMap>, Api<Secret>) = (ns.api(), ns.api());
    let names = ["off-a", "off-b"];
    let mut replicas = Vec::new();
    for name in names {
        replicas.push(Replica::start_with(&ns, name, cp.kubeconfig_path(), &[], &["sharding = false"]).await?);
    }
    let first = inputs(20, "1");
    create_primaries(&cms, &first).await?;
    eventually("every output from the leader", CONVERGE, || async {
        let mut wrong = Vec::new();
        for name in first.keys() {
            let output = secrets.get_opt(&format!("{name}.{PLUGIN}")).await?;
            let data = output.and_then(|s| s.data).unwrap_or_default();
            let host = data.get("host").map(|v| String::from_utf8_lossy(&v.0).into_owned());
            if host.as_deref() != Some(names[0]) {
                wrong.push(format!("{name}: {host:?}"));
            }
        }
        if wrong.is_empty() { Ok(()) } else { Err(anyhow!("{}", wrong.join("; "))) }
    })
    .await?;
    ensure!(assignments(&cms).await?.values().all(Option::is_none), "an unsharded plugin's primaries are not assigned");
    ensure!(replicas[1].reconciles().await? == 0.0, "the replica that does not lead reconciled");
    for r in replicas {
        r.host.stop().await?;
    }
    Ok(())
}

/// The leader's `kubewasm_shard_assignments_total`, all actions (or one).
async fn assignments_total(leader: &Replica, action: Option<&str>) -> Result<f64> {
    let mut labels = vec![("ring", RING)];
    labels.extend(action.map(|a| ("action", a)));
    Ok(leader.host.metric("kubewasm_shard_assignments_total", &labels).await?)
}

/// The audit's H4: plugin `sharded` owns Secrets (its outputs) and plugin `follower` reconciles
/// those Secrets as its primaries, both sharded. Each output is chosen to hash, by its own key,
/// to another shard than its controller: it must land with its controller (placed by the
/// controller's ring key) and stay there — the assigner's writes stop, and no object is
/// reconciled on two replicas at once. Before, the owned path put it on the controller's shard
/// and the primary path drained it to its own, forever.
#[tokio::test]
async fn a_kind_one_plugin_owns_and_another_reconciles_lands_with_its_controller_and_settles() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards-owned").await?;
    let cms: Api<ConfigMap> = ns.api();
    let names = ["own-a", "own-b"];
    let follower =
        |name: &str| E2eSettings::new(FOLLOWER).host(name).kind("Secret").selector(&format!("{OUTPUT_LABEL}={PLUGIN}")).mode("noop").trace().max_concurrency(4);
    let mut replicas = Vec::new();
    for name in names {
        replicas.push(Replica::start_plugins(&ns, name, cp.kubeconfig_path(), &[], &[(sharded(name), "v01"), (follower(name), "v01")]).await?);
    }
    let ring = Ring::new(names);
    let (cm, secret) = (Gvk::new("", "v1", "ConfigMap"), Gvk::new("", "v1", "Secret"));
    let on = |gvk: &Gvk, name: &str| ring.shard_for(&ring::object_key(gvk, &ObjectKey::new(Some(ns.name()), name))).map(String::from);
    let crossed: BTreeMap<String, String> =
        (0..400).map(|i| format!("k{i}")).filter(|k| on(&cm, k) != on(&secret, &format!("{k}.{PLUGIN}"))).take(20).map(|k| (k, "1".to_string())).collect();
    ensure!(crossed.len() == 20, "only {} primaries whose output hashes elsewhere", crossed.len());
    create_primaries(&cms, &crossed).await?;
    wait_outputs_on_shards(&ns, &crossed, &names).await?;
    let settled = eventually("the assigner's writes to stop", CONVERGE, || async {
        let before = assignments_total(&replicas[0], None).await?;
        tokio::time::sleep(Duration::from_secs(10)).await;
        let after = assignments_total(&replicas[0], None).await?;
        if after == before { Ok(after) } else { Err(anyhow!("{before} → {after} assignments in 10 s")) }
    })
    .await?;
    // Still with their controllers, and the follower reconciled them there.
    wait_outputs_on_shards(&ns, &crossed, &names).await?;
    let secrets: Api<Secret> = ns.api();
    for name in crossed.keys() {
        let output = format!("{name}.{PLUGIN}");
        let shard = secrets.get(&output).await?.metadata.labels.unwrap_or_default().get(SHARD).cloned();
        let reconciled: Vec<String> =
            replicas.iter().flat_map(|r| r.intervals()).filter(|i| i.key == format!("{}/{output}", ns.name())).map(|i| i.host).collect();
        // Reconciled where it ended up; on another replica only before a drain handed it over,
        // never at the same time (the trace check below).
        ensure!(shard.as_ref().is_some_and(|s| reconciled.contains(s)), "{output} on {shard:?} reconciled by {reconciled:?}");
    }
    let traced = assert_never_two_at_once(&replicas.iter().collect::<Vec<_>>()).await?;
    eprintln!("{} outputs with their controllers; {settled} assignments in all, then none; {traced} reconciles traced", crossed.len());
    for r in replicas {
        r.host.stop().await?;
    }
    Ok(())
}

/// The audit's M5: the plugin fails to load on the ring's leader (its `describe` traps there),
/// and runs on the two others. The leader still assigns its objects (it follows the claims the
/// other replicas publish), to those two only; before, it followed only its own plugins and
/// assigned nothing, and a replica without the plugin kept a third of the objects unserved.
#[tokio::test]
async fn a_replica_that_does_not_run_the_plugin_gets_none_of_its_objects() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards-missing").await?;
    let cms: Api<ConfigMap> = ns.api();
    let names = ["run-a", "run-b", "run-c"];
    let mut replicas = Vec::new();
    for (i, name) in names.into_iter().enumerate() {
        let variant = if i == 0 { "trp" } else { "v01" };
        replicas.push(Replica::start_plugins(&ns, name, cp.kubeconfig_path(), &[], &[(sharded(name), variant)]).await?);
    }
    let running = [names[1], names[2]];
    let first = inputs(60, "1");
    create_primaries(&cms, &first).await?;
    wait_outputs_on_shards(&ns, &first, &running).await?;
    ensure!(replicas[0].reconciles().await? == 0.0, "the replica without the plugin reconciled");
    let traced = assert_never_two_at_once(&replicas.iter().collect::<Vec<_>>()).await?;
    eprintln!("60 primaries on the two replicas that run the plugin; {traced} reconciles traced");
    for r in replicas {
        r.host.stop().await?;
    }
    Ok(())
}

/// The audit's M4: with sharding, the host labels a plugin's primaries for it, so a sharded
/// plugin must itself be allowed to patch them. Here its identity may read and update its
/// primaries (Secrets), as `kubewasm rbac` grants what it declares, but not patch them: it is
/// refused, naming the rule, and none of its primaries is labelled.
#[tokio::test]
async fn a_sharded_plugin_whose_identity_may_not_patch_its_primaries_is_refused() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards-rbac").await?;
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("reader").kind("Secret"), "v01");
    apply(cp, &rbac(&rbac_args(dir.path(), ns.name())).await?).await?;
    let config =
        host_config("rbac-a", dir.path(), cp.kubeconfig_path(), ns.name()).instance("rbac-a").shard_ring(ns.name(), LEADER, RING).service_accounts(ns.name());
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    let secrets: Api<Secret> = ns.api();
    let mut object = Secret::default();
    object.metadata.name = Some("s0".into());
    object.metadata.labels = Some([(PRIMARY.to_string(), "yes".to_string())].into());
    object.metadata.annotations = Some([(INPUT.to_string(), "1".to_string())].into());
    secrets.create(&PostParams::default(), &object).await?;
    let event = wait_event(ns.client(), ns.name(), STATUS, "PluginRejected", "kubewasm-plugin-reader lacks").await?;
    let note = event.note.unwrap_or_default();
    ensure!(note.contains(r#"resources: ["secrets"], verbs: ["patch"]"#), "the rule is not named: {note}");
    let labels = secrets.get("s0").await?.metadata.labels.unwrap_or_default();
    ensure!(!labels.contains_key(SHARD), "the refused plugin's primary was labelled: {labels:?}");
    host.stop().await?;
    Ok(())
}

/// The audit's L2: a Lease that claims to be a shard of the ring, held for 68 years and never
/// renewed, gets no object; the replicas that renew share them all.
#[tokio::test]
async fn a_phantom_shard_lease_holds_no_share() -> Result<()> {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards-phantom").await?;
    let cms: Api<ConfigMap> = ns.api();
    let names = ["ph-a", "ph-b"];
    let mut replicas = Vec::new();
    for name in names {
        replicas.push(Replica::start(&ns, name, cp.kubeconfig_path(), &[]).await?);
    }
    let leases: Api<Lease> = ns.api();
    let mut phantom = Lease::default();
    phantom.metadata.name = Some("phantom".into());
    phantom.metadata.labels = Some([("alpha.sharding.timebertt.dev/controllerring".to_string(), RING.to_string())].into());
    phantom.spec = Some(LeaseSpec {
        holder_identity: Some("phantom".into()),
        lease_duration_seconds: Some(i32::MAX),
        acquire_time: Some(MicroTime(Timestamp::now())),
        renew_time: Some(MicroTime(Timestamp::now())),
        ..Default::default()
    });
    leases.create(&PostParams::default(), &phantom).await?;
    let first = inputs(40, "1");
    create_primaries(&cms, &first).await?;
    wait_outputs_on_shards(&ns, &first, &names).await?;
    let on_phantom = assignments(&cms).await?.values().filter(|s| s.as_deref() == Some("phantom")).count();
    ensure!(on_phantom == 0, "{on_phantom} primaries on the phantom");
    for r in replicas {
        r.host.stop().await?;
    }
    Ok(())
}

/// The audit's L2: whoever may delete Leases deletes a live shard's. Its term may still run (it
/// renews, recreating the Lease): none of its objects moves, and nothing is reconciled twice.
/// Before, the assigner forgot the shard at once and moved its objects without a drain.
#[tokio::test]
async fn deleting_a_live_shards_lease_moves_none_of_its_objects() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("shards-del").await?;
    let cms: Api<ConfigMap> = ns.api();
    let names = ["del-a", "del-b"];
    let mut replicas = Vec::new();
    for name in names {
        replicas.push(Replica::start(&ns, name, cp.kubeconfig_path(), &[]).await?);
    }
    let first = inputs(40, "1");
    create_primaries(&cms, &first).await?;
    wait_outputs_on_shards(&ns, &first, &names).await?;
    // Placed by the ring of both: a replica joins once it is seen renewing, so the first objects
    // may all land on the other and move over by drains first.
    let ring = Ring::new(names);
    let cm = Gvk::new("", "v1", "ConfigMap");
    let before = eventually("every primary on its ring shard", CONVERGE, || async {
        let now = assignments(&cms).await?;
        let astray: Vec<_> = now.iter().filter(|(k, s)| s.as_deref() != ring.shard_for(&ring::object_key(&cm, &ObjectKey::new(Some(ns.name()), k)))).collect();
        if astray.is_empty() { Ok(now) } else { Err(anyhow!("not yet on their ring shard: {astray:?}")) }
    })
    .await?;
    ensure!(before.values().any(|s| s.as_deref() == Some(names[1])), "nothing on {}", names[1]);
    wait_outputs_on_shards(&ns, &first, &names).await?;
    let moves = assignments_total(&replicas[0], Some("move")).await?;
    let keys: Vec<String> = first.keys().cloned().collect();
    let churn = churn(&cms, &keys, Duration::from_millis(20));

    let leases: Api<Lease> = ns.api();
    let deleted = leases.delete(names[1], &DeleteParams::default()).await?;
    let uid = deleted.left().and_then(|l| l.metadata.uid);
    // Until it renewed (a new Lease) and a while after, every object stays where it was.
    let back = Instant::now();
    let mut renewed = None;
    while renewed.is_none_or(|at: Instant| at.elapsed() < Duration::from_secs(5)) {
        ensure!(back.elapsed() < CONVERGE, "{} never recreated its Lease", names[1]);
        let now = assignments(&cms).await?;
        ensure!(now == before, "objects moved after the Lease was deleted: {:?}", now.iter().filter(|(k, v)| before.get(*k) != Some(*v)).collect::<Vec<_>>());
        if renewed.is_none() && leases.get_opt(names[1]).await?.is_some_and(|l| l.metadata.uid != uid) {
            renewed = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    churn.abort();
    let _ = churn.await;
    ensure!(assignments_total(&replicas[0], Some("move")).await? == moves, "the assigner moved objects without a drain");
    let last = inputs(40, "final");
    for name in last.keys() {
        set_input(&cms, name, "final").await?;
    }
    wait_outputs_on_shards(&ns, &last, &names).await?;
    let traced = assert_never_two_at_once(&replicas.iter().collect::<Vec<_>>()).await?;
    eprintln!("{}'s Lease deleted and renewed: nothing moved; {traced} reconciles traced", names[1]);
    for r in replicas {
        r.host.stop().await?;
    }
    Ok(())
}
