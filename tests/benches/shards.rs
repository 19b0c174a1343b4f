//! The scale-out benchmark (issue 22): one plugin's primaries reconciled by one unsharded replica,
//! then by three replicas in one ring, side by side in one run against one local control plane,
//! each with the host's default flags (the built-in assigner writes at `--shard-assign-qps`), the
//! plugin with eight reconcile workers and the request rate a replica allows a plugin at most by
//! default (100 a second, bursts of 200).
//!
//! Per variant, in a fresh namespace: create the primaries (the suite's `e2e-guest`, writing one
//! owned Secret per primary), start the replicas and time until every output exists; let it
//! settle, change every primary's input and time until every output carries the new one, counting
//! the reconciles of each replica and the output writes the API server served; then read each
//! replica's PSS (`/proc/PID/smaps_rollup`) and how many primaries it caches
//! (`kubewasm_shard_objects`). For the ring also: the assigner's labels written and objects kept,
//! its memory (the leader's PSS less the mean of the others'), and the time from a SIGKILL of one
//! non-leader replica until none of the primaries carries its shard label any more.
//!
//! The replicas share the machine's cores with each other and with the API server and etcd, so
//! the times say what the rate limits and the assigner cost, not what three machines would do.
//!
//! `cargo bench -p kubewasm-tests --bench shards [-- --primaries 30000]`

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm_tests::host::{Host, HostConfig, release_binary};
use kubewasm_tests::plugindir::{E2eSettings, INPUT, OUTPUT_LABEL, PRIMARY, PluginDir};
use kubewasm_tests::{ControlPlane, TestNamespace, process, prom};
use parking_lot::Mutex;

const PLUGIN: &str = "sharded";
const RING: &str = "bench";
const LEADER: &str = "bench-leader";
const SHARD: &str = "shard.alpha.sharding.timebertt.dev/bench";
const REPLICAS: usize = 3;
/// Time after the last output for queues to drain and the numbers to stop moving.
const SETTLE: Duration = Duration::from_secs(5);
const TIMEOUT: Duration = Duration::from_secs(1800);
/// The plugin's reconcile workers (`max-concurrency`): with the default one, a replica reconciles
/// one object per API round trip (about 25 a second here) and the default write rate limit is
/// never reached; eight is what a controller of tens of thousands of objects is given.
const WORKERS: u32 = 8;
/// The plugin's request rate (its `qps` and `burst` options): the most a replica allows a plugin
/// by default (`--max-plugin-qps`, `--max-plugin-burst`). Without them it gets
/// controller-runtime's default, 20 a second, and a replica needs 25 minutes per 30 000 writes.
const QPS: u32 = 100;
const BURST: u32 = 200;
/// Requests the bench keeps in flight while it creates or changes primaries.
const CLIENT_CONCURRENCY: usize = 32;

/// What one variant measured.
#[derive(Debug, Default)]
struct Measured {
    replicas: usize,
    /// Start of the replicas → every output exists.
    initial: Duration,
    /// A change to every primary → every output carries it.
    changed: Duration,
    /// Per replica.
    pss: Vec<u64>,
    cached: Vec<f64>,
    reconciles: Vec<f64>,
    /// Output writes the API server served during the change (every replica's).
    writes: f64,
    /// The ring only.
    assigner: Option<Assigner>,
}

#[derive(Debug)]
struct Assigner {
    labels_written: f64,
    objects_kept: f64,
    /// The leader's PSS less the mean of the other replicas'.
    memory: i64,
    /// SIGKILL of a non-leader → none of the primaries is labelled for it.
    reassigned: Duration,
    moved: usize,
}

/// The latest input of every output, kept by a watch of the outputs.
#[derive(Clone, Default)]
struct Outputs(Arc<Mutex<HashMap<String, String>>>);

impl Outputs {
    fn watch(ns: &TestNamespace) -> (Outputs, tokio::task::JoinHandle<()>) {
        let outputs = Outputs::default();
        let api: Api<Secret> = ns.api();
        let stream = watcher(api, watcher::Config::default().labels(&format!("{OUTPUT_LABEL}={PLUGIN}"))).default_backoff().applied_objects();
        let seen = outputs.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                // An error is retried by the watcher (after a backoff); the caller's timeout bounds it.
                let Ok(secret) = event else { continue };
                let input = secret.data.as_ref().and_then(|d| d.get("input")).map(|v| String::from_utf8_lossy(&v.0).into_owned());
                if let (Some(name), Some(input)) = (secret.metadata.name, input) {
                    seen.0.lock().insert(name, input);
                }
            }
        });
        (outputs, task)
    }

    /// Waits until `count` outputs carry `input`.
    async fn wait_all(&self, count: usize, input: &str) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let done = self.0.lock().values().filter(|v| *v == input).count();
            if done >= count {
                return;
            }
            assert!(Instant::now() < deadline, "only {done} of {count} outputs carry input {input}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn primary(i: usize, input: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("p{i:05}"), "labels": {PRIMARY: "yes"}, "annotations": {INPUT: input}},
        "data": {"a": "primary"},
    }))
    .unwrap()
}

async fn create_primaries(api: &Api<ConfigMap>, count: usize) {
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &primary(i, "1")).await.expect("create a primary") }
        })
        .buffer_unordered(CLIENT_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
}

async fn set_inputs(api: &Api<ConfigMap>, count: usize, input: &str) {
    let patch = serde_json::json!({"metadata": {"annotations": {INPUT: input}}});
    futures::stream::iter(0..count)
        .map(|i| {
            let (api, patch) = (api.clone(), patch.clone());
            async move { api.patch(&format!("p{i:05}"), &PatchParams::default(), &Patch::Merge(&patch)).await.expect("change a primary") }
        })
        .buffer_unordered(CLIENT_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
}

/// The writes of outputs (Secrets) the API server has served: creates, patches and applies.
async fn output_writes(client: &kube::Client) -> f64 {
    let text = prom::apiserver_metrics(client).await.expect("the API server's /metrics");
    ["CREATE", "PATCH", "APPLY", "UPDATE"].iter().map(|verb| prom::sum(&text, "apiserver_request_total", &[("resource", "secrets"), ("verb", verb)])).sum()
}

async fn start_replica(cp: &ControlPlane, ns: &str, name: &str, sharded: bool) -> (Host, PluginDir) {
    let dir = PluginDir::new();
    dir.install_e2e(
        &E2eSettings::new(PLUGIN)
            .selector(&format!("{PRIMARY}=yes"))
            .owns()
            .max_concurrency(WORKERS)
            .option(&format!("qps = {QPS}"))
            .option(&format!("burst = {BURST}")),
        "v01",
    );
    let mut config = HostConfig::new(name, dir.path(), cp.kubeconfig_path()).namespace(ns).instance(name).log_filter("warn");
    if sharded {
        config = config.shard_ring(ns, LEADER, RING);
    }
    let mut host = Host::start(config).await.expect("the replica starts");
    host.wait_ready(TIMEOUT).await.expect("the replica gets ready");
    (host, dir)
}

/// Each replica's reconciles of the plugin so far.
async fn reconciles(replicas: &[(Host, PluginDir)]) -> Vec<f64> {
    let mut out = Vec::new();
    for (host, _) in replicas {
        out.push(host.metric("controller_runtime_reconcile_total", &[("controller", PLUGIN)]).await.unwrap());
    }
    out
}

/// The primaries labelled for `shard`.
async fn labelled_for(api: &Api<PartialObjectMeta<ConfigMap>>, shard: &str) -> usize {
    api.list_metadata(&ListParams::default().labels(&format!("{PRIMARY}=yes,{SHARD}={shard}"))).await.expect("list the primaries").items.len()
}

async fn run(cp: &ControlPlane, primaries: usize, replicas: usize) -> Measured {
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&format!("shards-{replicas}")).await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    let metadata: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), ns.name());
    let (outputs, watch) = Outputs::watch(&ns);
    let created = Instant::now();
    create_primaries(&api, primaries).await;
    eprintln!("{replicas} replica(s): created {primaries} primaries in {:.0} s", created.elapsed().as_secs_f64());

    let sharded = replicas > 1;
    let names: Vec<String> = (0..replicas).map(|i| format!("replica-{i}")).collect();
    let started = Instant::now();
    let mut running = Vec::new();
    for name in &names {
        running.push(start_replica(cp, ns.name(), name, sharded).await);
    }
    outputs.wait_all(primaries, "1").await;
    let initial = started.elapsed();
    eprintln!("{replicas} replica(s): every output in {:.0} s", initial.as_secs_f64());

    tokio::time::sleep(SETTLE).await;
    let (before, writes_before) = (reconciles(&running).await, output_writes(&client).await);
    let change = Instant::now();
    set_inputs(&api, primaries, "2").await;
    outputs.wait_all(primaries, "2").await;
    let changed = change.elapsed();
    eprintln!("{replicas} replica(s): every output changed in {:.0} s", changed.as_secs_f64());
    tokio::time::sleep(SETTLE).await;
    let after = reconciles(&running).await;
    let writes = output_writes(&client).await - writes_before;

    let mut measured =
        Measured { replicas, initial, changed, reconciles: after.iter().zip(&before).map(|(a, b)| a - b).collect(), writes, ..Default::default() };
    for (host, _) in &running {
        measured.pss.push(process::pss_bytes(host.pid().unwrap()).expect("the replica runs"));
        measured.cached.push(if sharded { host.metric("kubewasm_shard_objects", &[("plugin", PLUGIN)]).await.unwrap() } else { primaries as f64 });
    }

    if sharded {
        let mut leader = None;
        for (i, (host, _)) in running.iter().enumerate() {
            if host.metric("leader_election_master_status", &[("name", LEADER)]).await.unwrap() == 1.0 {
                leader = Some(i);
            }
        }
        let leader = leader.expect("one replica leads the ring");
        let (host, _) = &running[leader];
        let labels_written = host.metric("kubewasm_shard_assignments_total", &[]).await.unwrap();
        let objects_kept = host.metric("kubewasm_shard_assigner_objects", &[]).await.unwrap();
        let others: Vec<u64> = measured.pss.iter().enumerate().filter(|(i, _)| *i != leader).map(|(_, p)| *p).collect();
        let memory = measured.pss[leader] as i64 - (others.iter().sum::<u64>() / others.len() as u64) as i64;

        let victim = (leader + 1) % replicas;
        let moved = labelled_for(&metadata, &names[victim]).await;
        running[victim].0.kill();
        let killed = Instant::now();
        let deadline = killed + TIMEOUT;
        while labelled_for(&metadata, &names[victim]).await > 0 {
            assert!(Instant::now() < deadline, "the killed replica's primaries were not reassigned");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let reassigned = killed.elapsed();
        eprintln!("3 replicas: the {moved} primaries of a killed replica reassigned in {:.0} s", reassigned.as_secs_f64());
        measured.assigner = Some(Assigner { labels_written, objects_kept, memory, reassigned, moved });
    }
    // The killed replica's stop reports its SIGKILL; the others stop cleanly.
    for (host, _dir) in running {
        drop(host.stop().await);
    }
    watch.abort();
    eprintln!("{measured:?}");
    measured
}

fn print_table(one: &Measured, ring: &Measured, primaries: usize) {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let max = |v: &[f64]| v.iter().cloned().fold(f64::MIN, f64::max);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let list = |v: &[f64], unit: &str, decimals: usize| v.iter().map(|x| format!("{x:.decimals$}{unit}")).collect::<Vec<_>>().join(" / ");
    println!("\n{primaries} primaries of one plugin (each with one owned output Secret)\n");
    println!("| what | 1 replica | {} replicas (each) | {} replicas / 1 |", ring.replicas, ring.replicas);
    println!("|---|---:|---:|---:|");
    let pss = |m: &Measured| m.pss.iter().map(|&b| mib(b)).collect::<Vec<_>>();
    println!("| PSS per replica | {:.1} MiB | {} | {:.2}× (largest) |", pss(one)[0], list(&pss(ring), " MiB", 1), max(&pss(ring)) / pss(one)[0]);
    println!("| primaries cached per replica | {:.0} | {} | {:.2}× (mean) |", one.cached[0], list(&ring.cached, "", 0), mean(&ring.cached) / one.cached[0]);
    let secs = |d: Duration| d.as_secs_f64();
    println!("| start → every output | {:.0} s | {:.0} s | {:.2}× |", secs(one.initial), secs(ring.initial), secs(ring.initial) / secs(one.initial));
    println!(
        "| change to every primary → every output | {:.0} s | {:.0} s | {:.2}× |",
        secs(one.changed),
        secs(ring.changed),
        secs(ring.changed) / secs(one.changed)
    );
    let rate = |m: &Measured| m.reconciles.iter().map(|r| r / secs(m.changed)).collect::<Vec<_>>();
    println!(
        "| reconciles/s per replica, during the change | {:.0} | {} | {:.2}× (sum) |",
        rate(one)[0],
        list(&rate(ring), "", 0),
        rate(ring).iter().sum::<f64>() / rate(one)[0]
    );
    let writes = |m: &Measured| m.writes / secs(m.changed);
    println!(
        "| output writes/s the API server served, during the change (per replica) | {:.0} | {:.0} ({:.0} in all) | {:.2}× (in all) |",
        writes(one),
        writes(ring) / ring.replicas as f64,
        writes(ring),
        writes(ring) / writes(one)
    );
    if let Some(a) = &ring.assigner {
        println!(
            "\nThe assigner (on the ring's leader): {:.0} labels written, metadata of {:.0} objects kept, {:.1} MiB more PSS than the mean of the other replicas;",
            a.labels_written,
            a.objects_kept,
            a.memory as f64 / (1 << 20) as f64
        );
        println!("SIGKILL of a non-leader replica → its {} primaries labelled for the others: {:.1} s.", a.moved, secs(a.reassigned));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let primaries: usize = args
        .iter()
        .position(|a| a == "--primaries")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse().expect("--primaries takes a number, e.g. 30000"))
        .unwrap_or(30_000);
    let host = release_binary();
    // SAFETY: set before the async runtime and any other thread start.
    unsafe { std::env::set_var("KUBEWASM_BIN", &host) };
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    println!("load average at the start: {}", load());
    let started = Instant::now();
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
        let cp = ControlPlane::start().await.unwrap();
        let one = run(&cp, primaries, 1).await;
        let ring = run(&cp, primaries, REPLICAS).await;
        print_table(&one, &ring, primaries);
    });
    println!("\nload average at the end: {}; the bench took {:.0} s", load(), started.elapsed().as_secs_f64());
}
