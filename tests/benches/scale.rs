//! The scale benchmark (issue 26): ten controllers over N ConfigMaps of about 1 KB in one
//! namespace, kubewasm against one controller-runtime manager running ten controllers
//! (`tests/peers/controller-runtime`), side by side on one local control plane, for growing N.
//!
//! Primaries are added as N grows and spread evenly over the controllers (`cK` selects
//! `bench.kubewasm.io/controller=cK`); every controller applies an owned output ConfigMap per
//! primary (kubewasm: ten copies of the suite's e2e guest; the peer: its ten controllers), so the
//! namespace holds 2N ConfigMaps once converged, and both variants cache all of them. Per size
//! and variant (which goes first alternates between sizes):
//! - start it and time until every output exists (the host with its guest precompiled in a
//!   kept `--cache-dir`, as a user's host restarts);
//! - settle, then its PSS, and the objects it caches (counted and sized by a list of them);
//! - restart the control plane (its watches break, and come back refused as too old: a relist)
//!   and read the variant's peak RSS from just before until a primary changed after the restart
//!   has its output written again and a while longer, against its RSS before;
//! - kubewasm only: hot-load an eleventh plugin selecting every primary onto the synced informer
//!   (its initial list: N keys in the background lane) and time until it has been handed them
//!   all; meanwhile give controller `c1` live changes one after another and time each from the
//!   change until its output is written, and read `c1`'s live-lane queue waits and the late
//!   plugin's keys served by aging;
//! - stop it, and delete the outputs.
//!
//! At the end, per variant: the marginal bytes per cached object between the smallest and the
//! largest size, beside the mean JSON size of the namespace's ConfigMaps.
//!
//! `cargo bench -p kubewasm-tests --bench scale [-- --sizes 1000,10000,50000,100000]`

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, ObjectList, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm_tests::build::{Tool, go_tool};
use kubewasm_tests::host::{Host, HostConfig, release_binary};
use kubewasm_tests::peer::Peers;
use kubewasm_tests::plugindir::{E2eSettings, INPUT, OUTPUT_LABEL, PluginDir, e2e_guest};
use kubewasm_tests::{ControlPlane, Options, process, prom};
use serde_json::json;

const CONTROLLERS: usize = 10;
/// Controller `cK` selects `SELECTOR=cK` (the peer's `selectorKey`).
const SELECTOR: &str = "bench.kubewasm.io/controller";
const SETTLE: Duration = Duration::from_secs(5);
/// How long after the restart's change is reconciled the peak is still watched: a relist that
/// began with the change goes on after it.
const AFTER_RESTART: Duration = Duration::from_secs(15);
const TIMEOUT: Duration = Duration::from_secs(1800);
/// Requests the bench keeps in flight while it creates and deletes.
const CLIENT_CONCURRENCY: usize = 32;

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Kubewasm,
    Manager,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Kubewasm => "kubewasm",
            Variant::Manager => "manager",
        }
    }
}

#[derive(Debug)]
struct Measured {
    /// From start until every output exists.
    converged: Duration,
    pss: u64,
    /// ConfigMaps in the namespace after the settle (what both variants cache).
    objects: usize,
    /// kubewasm only: what its informers say they hold (`kubewasm_informer_cache_bytes`).
    cache_bytes: Option<f64>,
    rss_before_restart: u64,
    peak_rss_restart: u64,
    /// From the control plane back until the change made after it is reconciled.
    caught_up: Duration,
    /// kubewasm only: the late plugin and the live changes beside it.
    joined: Option<Joined>,
    /// The namespace's ConfigMaps' mean JSON size, as listed and without `managedFields`
    /// (which kubewasm's cache drops and controller-runtime's keeps); same for both variants.
    json: (f64, f64),
}

/// A plugin hot-loaded onto a synced informer with N keys to work off, and another plugin's live
/// changes meanwhile.
#[derive(Debug)]
struct Joined {
    /// From the file dropped until the late plugin's queue has had all N keys.
    handed_list: Duration,
    /// Each of `c1`'s live changes, from the patch until its output has it, sorted.
    live: Vec<Duration>,
    /// `c1`'s live-lane queue waits during the changes: how many, and how many of them ≤ 100 ms.
    live_waits: (f64, f64),
    /// The late plugin's reconciles by the end of the changes, and its keys served by aging.
    late_reconciled: f64,
    late_starved: f64,
    /// Where a slow live change went, over the changes: `c1`'s reconciles that took over a
    /// second and those that failed, and the requests the API server's priority and fairness
    /// turned away (429).
    c1_slow_reconciles: f64,
    c1_errors: f64,
    rejected: f64,
    /// Which of the changes (counted from 0) took longest, and how long its patch took to be
    /// answered (the rest is the watch, the queue and the reconcile).
    slowest: usize,
    slowest_patch: Duration,
}

enum Running {
    /// The host, and its plugin directory.
    Host {
        host: Box<Host>,
        plugins: PluginDir,
    },
    Peers(Peers),
}

impl Running {
    fn pid(&self) -> u32 {
        match self {
            Running::Host { host, .. } => host.pid().expect("the host runs"),
            Running::Peers(peers) => peers.pids()[0],
        }
    }

    async fn stop(self) {
        match self {
            Running::Host { host, .. } => {
                host.stop().await.expect("the host stops cleanly");
            }
            Running::Peers(peers) => peers.stop().await,
        }
    }
}

fn controller(i: usize) -> String {
    format!("c{}", i % CONTROLLERS)
}

fn primary_name(i: usize) -> String {
    format!("p{i:06}")
}

/// A primary of about 1 KB as the API server returns it: the labels and annotations a chart
/// gives a ConfigMap, and a small configuration file.
fn primary(i: usize) -> ConfigMap {
    let app = format!("app-{}", i % 97);
    serde_json::from_value(json!({
        "metadata": {
            "name": primary_name(i),
            "labels": {
                SELECTOR: controller(i),
                "app.kubernetes.io/name": app,
                "app.kubernetes.io/instance": format!("{app}-prod"),
                "app.kubernetes.io/part-of": "storefront",
                "app.kubernetes.io/managed-by": "Helm",
                "app.kubernetes.io/version": "1.27.3",
                "helm.sh/chart": "storefront-4.2.1",
            },
            "annotations": {
                INPUT: "1",
                "meta.helm.sh/release-name": "storefront",
                "meta.helm.sh/release-namespace": "storefront",
            },
        },
        "data": {
            "LOG_LEVEL": "info",
            "config.yaml": format!(
                "server:\n  port: 8080\n  readTimeout: 30s\n  writeTimeout: 30s\ncache:\n  enabled: true\n  ttl: 300s\n  maxEntries: 10000\nupstream:\n  url: http://{app}.storefront.svc.cluster.local:8080\n  retries: 3\nfeatures:\n  checkout: true\n  recommendations: false\n  id: {i}\n"
            ),
        },
    }))
    .unwrap()
}

/// Creates primaries `from..to`.
async fn create_primaries(api: &Api<ConfigMap>, from: usize, to: usize) {
    futures::stream::iter(from..to)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &primary(i)).await.expect("create a primary") }
        })
        .buffer_unordered(CLIENT_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
}

/// Every ConfigMap of the namespace, a page at a time, handed to `each`.
async fn each_configmap(api: &Api<ConfigMap>, mut each: impl FnMut(&ConfigMap)) {
    let mut params = ListParams::default().limit(500);
    loop {
        let page: ObjectList<ConfigMap> = api.list(&params).await.expect("list ConfigMaps");
        page.items.iter().for_each(&mut each);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return,
        }
    }
}

/// The namespace's ConfigMaps: how many, and their mean JSON size as listed and without
/// `managedFields`.
async fn json_sizes(api: &Api<ConfigMap>) -> (usize, f64, f64) {
    let (mut count, mut whole, mut without) = (0usize, 0usize, 0usize);
    each_configmap(api, |cm| {
        count += 1;
        whole += serde_json::to_vec(cm).unwrap().len();
        let mut trimmed = cm.clone();
        trimmed.metadata.managed_fields = None;
        without += serde_json::to_vec(&trimmed).unwrap().len();
    })
    .await;
    (count, whole as f64 / count as f64, without as f64 / count as f64)
}

async fn start(variant: Variant, cp: &ControlPlane, peer: &std::path::Path, ns: &str) -> Running {
    let names: Vec<String> = (0..CONTROLLERS).map(controller).collect();
    match variant {
        Variant::Kubewasm => {
            let dir = PluginDir::new();
            for name in &names {
                dir.install_e2e(&E2eSettings::new(name).selector(&format!("{SELECTOR}={name}")), "v01");
            }
            let config = HostConfig::new("scale", dir.path(), cp.kubeconfig_path()).namespace(ns).log_filter("warn").artifacts(&artifacts());
            let mut host = Host::start(config).await.expect("the host starts");
            host.wait_ready(TIMEOUT).await.expect("the host gets ready");
            Running::Host { host: Box::new(host), plugins: dir }
        }
        Variant::Manager => Running::Peers(Peers::start(peer, cp.kubeconfig_path(), ns, &[names.join(",")], TIMEOUT).await),
    }
}

/// The hosts' `--cache-dir`, kept from one start to the next as a user's is: a host's start
/// loads the guest precompiled, as a manager's starts a compiled binary.
fn artifacts() -> std::path::PathBuf {
    kubewasm_tests::guests::target_dir().join("kubewasm-tests/scale-artifacts")
}

/// Waits until `expected` outputs exist (a watch of their metadata, closed when it returns).
async fn wait_outputs(client: &kube::Client, ns: &str, expected: usize) {
    let metadata: Api<kube::api::PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), ns);
    let outputs = watcher(metadata, watcher::Config::default().labels(OUTPUT_LABEL)).default_backoff().applied_objects();
    let mut outputs = std::pin::pin!(outputs);
    let mut seen = HashSet::new();
    let counted = async {
        while seen.len() < expected {
            // An error is retried by the watcher (after a backoff); the timeout bounds it.
            if let Some(Ok(output)) = outputs.next().await {
                seen.insert(output.metadata.name.unwrap());
            }
        }
    };
    tokio::time::timeout(TIMEOUT, counted).await.unwrap_or_else(|_| panic!("not all {expected} outputs appeared"));
}

/// The plugin hot-loaded onto the synced informer.
const LATE: &str = "late";
/// The live changes `c1` gets while the late plugin works off its list.
const LIVE_CHANGES: usize = 100;

/// Hot-loads [`LATE`] (selecting every primary) into the running host and measures it and `c1`'s
/// live changes beside it (see [`Joined`]); then removes it.
async fn late_joiner(host: &mut Host, dir: &PluginDir, api: &Api<ConfigMap>, n: usize) -> Joined {
    let c1 = [("name", "c1"), ("priority", "0")];
    let waits = |text: &str| {
        (
            prom::sum(text, "workqueue_queue_duration_seconds_count", &c1),
            prom::sum(text, "workqueue_queue_duration_seconds_bucket", &[c1[0], c1[1], ("le", "0.1")]),
        )
    };
    let reconciles = |text: &str| {
        let c1 = [("controller", "c1")];
        let over_a_second = prom::sum(text, "controller_runtime_reconcile_time_seconds_count", &c1)
            - prom::sum(text, "controller_runtime_reconcile_time_seconds_bucket", &[c1[0], ("le", "1.0")]);
        (over_a_second, prom::sum(text, "controller_runtime_reconcile_errors_total", &c1))
    };
    let rejected = || async {
        prom::sum(&prom::apiserver_metrics(&api.clone().into_client()).await.unwrap_or_default(), "apiserver_flowcontrol_rejected_requests_total", &[])
    };
    let text = host.metrics().await.unwrap();
    let (before, reconciles_before, rejected_before) = (waits(&text), reconciles(&text), rejected().await);
    let dropped = Instant::now();
    dir.install_e2e(&E2eSettings::new(LATE).selector(SELECTOR), "v01");
    host.wait_metric("workqueue_adds_total", &[("name", LATE)], TIMEOUT, |adds| adds >= n as f64).await.expect("the late plugin is handed its list");
    let handed_list = dropped.elapsed();
    let mut live = Vec::with_capacity(LIVE_CHANGES);
    let mut patches = Vec::with_capacity(LIVE_CHANGES);
    for k in 0..LIVE_CHANGES {
        // c1's primaries are those with an index of 1 modulo the controllers.
        let primary = primary_name(1 + CONTROLLERS * (k % (n / CONTROLLERS)));
        let value = format!("live-{n}-{k}");
        let changed = Instant::now();
        api.patch(&primary, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {INPUT: &value}}}))).await.expect("change a primary");
        patches.push(changed.elapsed());
        let output = format!("{primary}.c1");
        while api.get(&output).await.ok().and_then(|cm| cm.data).and_then(|d| d.get("input").cloned()).as_deref() != Some(value.as_str()) {
            assert!(changed.elapsed() < TIMEOUT, "{output} never got {value}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        live.push(changed.elapsed());
    }
    let slowest = (0..live.len()).max_by_key(|&k| live[k]).expect("changes were made");
    live.sort();
    let text = host.metrics().await.unwrap();
    let after = waits(&text);
    let reconciles_after = reconciles(&text);
    let late_reconciled = prom::sum(&text, "controller_runtime_reconcile_total", &[("controller", LATE)]);
    let late_starved = prom::sum(&text, "workqueue_starved_total", &[("name", LATE)]);
    dir.remove(LATE);
    Joined {
        handed_list,
        live,
        live_waits: (after.0 - before.0, after.1 - before.1),
        late_reconciled,
        late_starved,
        c1_slow_reconciles: reconciles_after.0 - reconciles_before.0,
        c1_errors: reconciles_after.1 - reconciles_before.1,
        rejected: rejected().await - rejected_before,
        slowest,
        slowest_patch: patches[slowest],
    }
}

/// Deletes every output, a controller's at a time, and waits until none is left.
async fn delete_outputs(api: &Api<ConfigMap>) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        for name in (0..CONTROLLERS).map(controller).chain([LATE.to_string()]) {
            // One controller's outputs per request keeps each under the API server's request
            // timeout; one that times out goes on deleting, and the next round finishes it.
            let _ = api.delete_collection(&DeleteParams::background(), &ListParams::default().labels(&format!("{OUTPUT_LABEL}={name}"))).await;
        }
        let left = api.list_metadata(&ListParams::default().labels(OUTPUT_LABEL).limit(1)).await.expect("list outputs");
        if left.items.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "outputs are still there");
    }
}

/// Restarts the control plane under the running variant and reads its peak RSS from just before
/// until a primary changed afterwards has its output again, and [`AFTER_RESTART`] longer.
/// Returns (RSS before, peak, time to catch up).
async fn restart_under(cp: &mut ControlPlane, running: &Running, ns: &str, change: &str) -> (u64, u64, Duration) {
    let pid = running.pid();
    let before = process::rss_bytes(pid).expect("the variant runs");
    process::reset_peak_rss(pid).expect("reset the peak RSS");
    cp.restart().await.expect("the control plane restarts");
    let back = Instant::now();
    let api: Api<ConfigMap> = Api::namespaced(cp.client().await.unwrap(), ns);
    let first = primary_name(0);
    api.patch(&first, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {INPUT: change}}}))).await.expect("change a primary");
    let output = format!("{first}.{}", controller(0));
    loop {
        let written = api.get_opt(&output).await.ok().flatten().and_then(|cm| cm.data).and_then(|d| d.get("input").cloned());
        if written.as_deref() == Some(change) {
            break;
        }
        assert!(back.elapsed() < TIMEOUT, "{output} was not written again after the restart");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let caught_up = back.elapsed();
    tokio::time::sleep(AFTER_RESTART).await;
    (before, process::peak_rss_bytes(pid).expect("the variant runs"), caught_up)
}

async fn run(cp: &mut ControlPlane, peer: &std::path::Path, ns: &str, variant: Variant, n: usize) -> Measured {
    let client = cp.client().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    let running = start(variant, cp, peer, ns).await;
    wait_outputs(&client, ns, n).await;
    let converged = started.elapsed();
    tokio::time::sleep(SETTLE).await;
    let pss = process::pss_bytes(running.pid()).expect("the variant runs");
    let (objects, json, json_trimmed) = json_sizes(&api).await;
    let cache_bytes = match &running {
        Running::Host { host, .. } => Some(prom::sum(&host.metrics().await.unwrap(), "kubewasm_informer_cache_bytes", &[("resource", "ConfigMap.v1")])),
        Running::Peers(_) => None,
    };
    let (rss_before_restart, peak_rss_restart, caught_up) = restart_under(cp, &running, ns, &format!("restart-{n}-{}", variant.name())).await;
    let mut running = running;
    let joined = match &mut running {
        Running::Host { host, plugins } => {
            let api: Api<ConfigMap> = Api::namespaced(cp.client().await.unwrap(), ns);
            Some(late_joiner(host, plugins, &api, n).await)
        }
        Running::Peers(_) => None,
    };
    running.stop().await;
    let api: Api<ConfigMap> = Api::namespaced(cp.client().await.unwrap(), ns);
    delete_outputs(&api).await;
    let measured = Measured { converged, pss, objects, cache_bytes, rss_before_restart, peak_rss_restart, caught_up, joined, json: (json, json_trimmed) };
    eprintln!("N={n} {}: {measured:?}", variant.name());
    measured
}

fn print_table(rows: &[(usize, [Measured; 2])]) {
    let mib = |b: f64| b / f64::from(1 << 20);
    println!("\n| N | what | kubewasm | manager | kubewasm / manager |");
    println!("|---:|---|---:|---:|---:|");
    for (n, [k, m]) in rows {
        let line = |what: &str, f: &dyn Fn(&Measured) -> Option<f64>, unit: &str, decimals: usize| {
            let cell = |x: &Measured| f(x).map_or("—".to_string(), |v| format!("{v:.decimals$}{unit}"));
            let ratio = match (f(k), f(m)) {
                (Some(a), Some(b)) if b != 0.0 => format!("{:.2}×", a / b),
                _ => "—".to_string(),
            };
            println!("| {n} | {what} | {} | {} | {ratio} |", cell(k), cell(m));
        };
        line("start → every output", &|x| Some(x.converged.as_secs_f64()), " s", 1);
        line("PSS after sync", &|x| Some(mib(x.pss as f64)), " MiB", 1);
        line("ConfigMaps cached", &|x| Some(x.objects as f64), "", 0);
        line("their mean JSON, as listed", &|x| Some(x.json.0), " B", 0);
        line("informer cache, by its own count", &|x| x.cache_bytes.map(mib), " MiB", 1);
        line("RSS before the API server restart", &|x| Some(mib(x.rss_before_restart as f64)), " MiB", 1);
        line("peak RSS during the restart", &|x| Some(mib(x.peak_rss_restart as f64)), " MiB", 1);
        line("peak / before", &|x| Some(x.peak_rss_restart as f64 / x.rss_before_restart as f64), "×", 2);
        line("restart → a change reconciled", &|x| Some(x.caught_up.as_secs_f64()), " s", 1);
        if let Some(j) = &k.joined {
            let at = |q: f64| j.live[((j.live.len() as f64 * q).ceil() as usize).clamp(1, j.live.len()) - 1].as_secs_f64() * 1000.0;
            println!("| {n} | a plugin hot-loaded: handed its {n} keys after | {:.2} s | | |", j.handed_list.as_secs_f64());
            println!(
                "| {n} | meanwhile c1's {} live changes → output, p50 / p99 / max | {:.0} / {:.0} / {:.0} ms | | |",
                j.live.len(),
                at(0.5),
                at(0.99),
                at(1.0)
            );
            println!("| {n} | c1's live queue waits ≤ 100 ms | {:.0} of {:.0} | | |", j.live_waits.1, j.live_waits.0);
            println!("| {n} | the late plugin: reconciled meanwhile, keys served by aging | {:.0}, {:.0} | | |", j.late_reconciled, j.late_starved);
            println!(
                "| {n} | meanwhile: c1's reconciles over 1 s, c1's failed reconciles, requests the API server turned away; the slowest change, its patch answered after | {:.0}, {:.0}, {:.0}; #{}, {:.0} ms | | |",
                j.c1_slow_reconciles,
                j.c1_errors,
                j.rejected,
                j.slowest,
                j.slowest_patch.as_secs_f64() * 1000.0
            );
        }
    }
    if let ([(n0, [k0, m0]), ..], [.., (n1, [k1, m1])]) = (rows, rows)
        && n1 > n0
    {
        let (json, json_trimmed) = k1.json;
        let marginal = |a: &Measured, b: &Measured| (b.pss as f64 - a.pss as f64) / (b.objects as f64 - a.objects as f64);
        let (k, m) = (marginal(k0, k1), marginal(m0, m1));
        println!("\n| marginal PSS per cached ConfigMap, N = {n0} → {n1} | kubewasm | manager | kubewasm / manager |");
        println!("|---|---:|---:|---:|");
        println!("| bytes | {k:.0} | {m:.0} | {:.2}× |", k / m);
        println!("| per byte of its JSON ({json:.0} B as listed) | {:.2}× | {:.2}× | |", k / json, m / json);
        println!("| per byte of its JSON without managedFields ({json_trimmed:.0} B) | {:.2}× | {:.2}× | |", k / json_trimmed, m / json_trimmed);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = args
        .iter()
        .position(|a| a == "--sizes")
        .and_then(|i| args.get(i + 1))
        .map(|list| list.split(',').map(|n| n.parse().expect("--sizes takes numbers, e.g. 1000,10000")).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 50_000, 100_000]);
    assert!(sizes.windows(2).all(|w| w[0] < w[1]), "--sizes must grow: primaries are only added");
    // SAFETY: set before the async runtime and any other thread start.
    unsafe { std::env::set_var("KUBEWASM_BIN", release_binary()) };
    let peer = go_tool(Tool::ControllerRuntime).expect("the controller-runtime peer builds");
    // Built before any clock starts: the first host would otherwise wait for cargo.
    e2e_guest();
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    println!("load average at the start: {}", load());
    let started = Instant::now();
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
        // Stopped with SIGKILL if not gone in 5 s: with watches open its graceful stop takes a
        // minute, and a crash is as good a restart here.
        let mut cp = ControlPlane::start_with(Options::new().stop_timeout(Duration::from_secs(5))).await.unwrap();
        let mut ns = cp.namespace("scale").await.unwrap();
        ns.keep();
        let ns = ns.name().to_string();
        // A first start with no primaries compiles the guest into the artifact cache.
        start(Variant::Kubewasm, &cp, &peer, &ns).await.stop().await;
        let mut rows = Vec::new();
        let mut made = 0;
        for (round, &n) in sizes.iter().enumerate() {
            let api: Api<ConfigMap> = Api::namespaced(cp.client().await.unwrap(), &ns);
            let creating = Instant::now();
            create_primaries(&api, made, n).await;
            println!("created primaries {made}..{n} in {:.0} s", creating.elapsed().as_secs_f64());
            made = n;
            let order = if round % 2 == 0 { [Variant::Kubewasm, Variant::Manager] } else { [Variant::Manager, Variant::Kubewasm] };
            let mut measured = Vec::new();
            for variant in order {
                measured.push((variant, run(&mut cp, &peer, &ns, variant, n).await));
            }
            measured.sort_by_key(|(v, _)| *v != Variant::Kubewasm);
            let [(_, k), (_, m)]: [(Variant, Measured); 2] = measured.try_into().ok().unwrap();
            rows.push((n, [k, m]));
        }
        print_table(&rows);
    });
    println!("\nload average at the end: {}; the bench took {:.0} s", load(), started.elapsed().as_secs_f64());
}
