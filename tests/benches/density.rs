//! The density benchmark (issue 13): the same small controller run three ways against one local
//! control plane, side by side in one run, for N controllers each:
//! - kubewasm: N copies of the suite's `e2e-guest` plugin (its default `output` mode) in one
//!   release `kubewasm` host;
//! - manager: one controller-runtime manager running N controllers (`tests/peers/controller-
//!   runtime`, which does what the guest does);
//! - processes: N controller-runtime processes, one controller each.
//!
//! Controller `cK` selects the ConfigMaps labelled `bench.kubewasm.io/controller=cK` and applies
//! an owned output ConfigMap for each. Per run (a fresh namespace each): start the variant and
//! wait until it is ready (caches synced), create 20 primaries per controller, time until every
//! output exists, let it settle, then read the summed PSS of the variant's processes
//! (`/proc/PID/smaps_rollup`) and the watches it holds open on the API server (its gauge before
//! the start and after the settle); for kubewasm also the PSS once the plugins' instances were
//! released for idleness, and the time a second host over the same plugins takes to get ready
//! with the artifact cache the first one filled; stop it and delete the namespace.
//!
//! kubewasm runs as a user runs it: default flags, each plugin acting as its own ServiceAccount
//! with the RBAC `kubewasm rbac` prints (`--plugin-identity host`: as the host, for comparison).
//!
//! `cargo bench -p kubewasm-tests --bench density [-- --n 1,10,50] [--plugin-identity host]`

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PartialObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm_tests::build::{Tool, go_tool};
use kubewasm_tests::host::{Host, HostConfig, rbac, release_binary};
use kubewasm_tests::peer::Peers;
use kubewasm_tests::plugindir::{E2eSettings, INPUT, OUTPUT_LABEL, PluginDir, e2e_guest};
use kubewasm_tests::{ControlPlane, process, prom};

const PER_CONTROLLER: usize = 20;
/// Controller `cK` selects `SELECTOR=cK` (the peer's `selectorKey`).
const SELECTOR: &str = "bench.kubewasm.io/controller";
/// Time after the last output for queues to drain, watches of the bench to close and the
/// numbers to stop moving.
const SETTLE: Duration = Duration::from_secs(5);
const TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Clone, Copy)]
enum Variant {
    Kubewasm,
    Manager,
    Processes,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Kubewasm => "kubewasm",
            Variant::Manager => "manager",
            Variant::Processes => "processes",
        }
    }
}

/// What one run measured.
#[derive(Debug)]
struct Measured {
    processes: usize,
    ready: Duration,
    converged: Duration,
    pss: u64,
    configmap_watches: f64,
    watches: f64,
    /// kubewasm only: the PSS once every plugin's instances were released for idleness.
    idle_pss: Option<u64>,
    /// kubewasm only: a second host over the same plugins, from start to ready, with the
    /// artifact cache the first one filled.
    warm_ready: Option<Duration>,
}

/// Whom kubewasm's plugins act as (`--plugin-identity`).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Identity {
    /// Each its own ServiceAccount, the host's default.
    ServiceAccount,
    /// The host's own identity.
    Host,
}

/// A running variant, with what must live as long as it does: the host's plugin directory and
/// artifact cache.
enum Running {
    Host(Box<Host>, PluginDir, tempfile::TempDir, Identity),
    Peers(Peers),
}

impl Running {
    fn pids(&self) -> Vec<u32> {
        match self {
            Running::Host(host, ..) => host.pid().into_iter().collect(),
            Running::Peers(peers) => peers.pids(),
        }
    }

    async fn stop(self) {
        match self {
            Running::Host(host, ..) => {
                host.stop().await.expect("the host stops cleanly");
            }
            Running::Peers(peers) => peers.stop().await,
        }
    }
}

/// The proportional set size of process `pid`: its private pages plus its share of the pages it
/// shares (the peer binary's code among N peers), so that summing it over processes is fair.
fn pss_bytes(pid: u32) -> u64 {
    process::pss_bytes(pid).expect("the process runs")
}

/// Open watches on the API server: (of ConfigMaps, of anything).
async fn watches(client: &kube::Client) -> (f64, f64) {
    let text = prom::apiserver_metrics(client).await.expect("the API server's /metrics");
    let watches = |labels: &[(&str, &str)]| prom::sum(&text, "apiserver_longrunning_requests", labels);
    (watches(&[("verb", "WATCH"), ("resource", "configmaps")]), watches(&[("verb", "WATCH")]))
}

/// Waits until the count of open watches has held for ten seconds: a fresh control plane's own
/// controllers (the garbage collector watches every resource) open theirs for a while after it
/// is ready, and would otherwise count toward the first run.
async fn wait_watches_steady(client: &kube::Client) {
    let (mut last, mut since) = (watches(client).await, Instant::now());
    while since.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = watches(client).await;
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
}

/// Instances idle this long are released (the default is 60 s): after the settle, so that the
/// main measurement sees live instances, and soon enough for the idle one.
const IDLE_INSTANCES: &str = "--idle-instances=12s";

/// The status ConfigMap of the kubewasm runs, in their namespace.
const STATUS: &str = "kubewasm-plugins";

async fn start_host(cp: &ControlPlane, ns: &str, names: &[String], identity: Identity) -> Running {
    let dir = PluginDir::new();
    for name in names {
        dir.install_e2e(&E2eSettings::new(name).selector(&format!("{SELECTOR}={name}")), "v01");
    }
    if identity == Identity::ServiceAccount {
        // What an operator applies: the plugins' ServiceAccounts and RBAC as `kubewasm rbac`
        // prints them (the host itself runs as the admin, who may impersonate them).
        let args = [
            format!("--plugins={}", dir.path().display()),
            format!("--identity-namespace={ns}"),
            format!("--namespace={ns}"),
            format!("--status-configmap={ns}/{STATUS}"),
        ];
        let yaml = rbac(&args).await.expect("kubewasm rbac");
        cp.kubectl().unwrap().run_with_stdin(&["apply", "-f", "-"], Some(&yaml)).await.expect("apply the plugins' RBAC");
    }
    let artifacts = tempfile::Builder::new().prefix("kubewasm-density-artifacts-").tempdir().unwrap();
    let host = host_over(cp, ns, &dir, artifacts.path(), identity).await;
    Running::Host(Box::new(host), dir, artifacts, identity)
}

async fn host_over(cp: &ControlPlane, ns: &str, dir: &PluginDir, artifacts: &Path, identity: Identity) -> Host {
    // The default plugin memory budget (4 GiB): it holds each instance's memory limit, a plugin's
    // first at load and the rest as they are made, so fifty plugins of the guest's default limit
    // (64 MiB) fit. It reserves, it allocates nothing.
    let config = HostConfig::new("density", dir.path(), cp.kubeconfig_path())
        .namespace(ns)
        .status_configmap(ns, STATUS)
        .artifacts(artifacts)
        .arg(IDLE_INSTANCES)
        .log_filter("warn");
    let config = match identity {
        Identity::ServiceAccount => config.service_accounts(ns),
        Identity::Host => config,
    };
    let mut host = Host::start(config).await.expect("the host starts");
    host.wait_ready(TIMEOUT).await.expect("the host gets ready");
    host
}

/// kubewasm only: the PSS once the plugins' instances are released, then the time a second host
/// over the same plugins and artifact cache takes to get ready. Stops the host.
async fn idle_and_warm_restart(cp: &ControlPlane, ns: &str, running: Running) -> (u64, Duration) {
    let Running::Host(mut host, dir, artifacts, identity) = running else { unreachable!("kubewasm runs a host") };
    host.wait_metric("kubewasm_plugin_instances", &[], TIMEOUT, |live| live == 0.0).await.expect("the idle instances are released");
    tokio::time::sleep(SETTLE).await;
    let idle = pss_bytes(host.pid().unwrap());
    host.stop().await.expect("the host stops cleanly");
    let started = Instant::now();
    let again = host_over(cp, ns, &dir, artifacts.path(), identity).await;
    let warm = started.elapsed();
    again.stop().await.expect("the host stops cleanly");
    (idle, warm)
}

/// Creates `PER_CONTROLLER` primaries for each controller, 16 requests at a time.
async fn create_primaries(api: &Api<ConfigMap>, names: &[String]) {
    let objects = names.iter().flat_map(|name| (0..PER_CONTROLLER).map(move |i| (name.clone(), i)));
    futures::stream::iter(objects)
        .map(|(name, i)| {
            let api = api.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("{name}-p{i:02}"), "labels": {SELECTOR: name}, "annotations": {INPUT: "1"}},
                    "data": {"a": "primary"},
                }))
                .unwrap();
                api.create(&PostParams::default(), &cm).await.expect("create a primary");
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

async fn run(cp: &ControlPlane, peer: &Path, variant: Variant, n: usize, identity: Identity) -> Measured {
    let client = cp.client().await.unwrap();
    let ns = cp.namespace("density").await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    let before = watches(&client).await;

    let started = Instant::now();
    let running = match variant {
        Variant::Kubewasm => start_host(cp, ns.name(), &names, identity).await,
        Variant::Manager => Running::Peers(Peers::start(peer, cp.kubeconfig_path(), ns.name(), &[names.join(",")], TIMEOUT).await),
        Variant::Processes => Running::Peers(Peers::start(peer, cp.kubeconfig_path(), ns.name(), &names, TIMEOUT).await),
    };
    let ready = started.elapsed();

    // The bench's own watch of the outputs is closed before the watches are counted.
    let expected = n * PER_CONTROLLER;
    let metadata: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), ns.name());
    let outputs = watcher(metadata, watcher::Config::default().labels(OUTPUT_LABEL)).default_backoff().applied_objects();
    let counted = tokio::spawn(async move {
        let mut seen = HashSet::new();
        let mut outputs = std::pin::pin!(outputs);
        while seen.len() < expected {
            // An error is retried by the watcher (after a backoff); the timeout below bounds it.
            if let Some(Ok(output)) = outputs.next().await {
                seen.insert(output.metadata.name.unwrap());
            }
        }
    });
    let created = Instant::now();
    create_primaries(&api, &names).await;
    tokio::time::timeout(TIMEOUT, counted).await.unwrap_or_else(|_| panic!("not all {expected} outputs appeared")).unwrap();
    let converged = created.elapsed();

    tokio::time::sleep(SETTLE).await;
    let pids = running.pids();
    let pss = pids.iter().map(|&pid| pss_bytes(pid)).sum();
    let after = watches(&client).await;
    let (idle_pss, warm_ready) = match variant {
        Variant::Kubewasm => {
            let (idle, warm) = idle_and_warm_restart(cp, ns.name(), running).await;
            (Some(idle), Some(warm))
        }
        _ => {
            running.stop().await;
            (None, None)
        }
    };

    // The next run starts on a clean API server: this one's namespace gone, its watches closed.
    let namespace = ns.name().to_string();
    drop(ns);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let (present, open) = (namespaces.get_opt(&namespace).await.unwrap().is_some(), watches(&client).await.1);
        if !present && open <= before.1 {
            break;
        }
        assert!(Instant::now() < deadline, "after the run: namespace {namespace} still there: {present}; watches open {open}, before the run {}", before.1);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let measured =
        Measured { processes: pids.len(), ready, converged, pss, configmap_watches: after.0 - before.0, watches: after.1 - before.1, idle_pss, warm_ready };
    eprintln!("N={n} {}: {measured:?}", variant.name());
    measured
}

fn print_table(rows: &[(usize, [Measured; 3])]) {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!("\n| N | what | kubewasm | manager | processes | kubewasm / manager | kubewasm / processes |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for (n, [k, m, p]) in rows {
        // A row's value, `None` where the variant has no such thing.
        let line = |what: &str, f: &dyn Fn(&Measured) -> Option<f64>, unit: &str, decimals: usize| {
            let cell = |x: &Measured| f(x).map_or("—".to_string(), |v| format!("{v:.decimals$}{unit}"));
            let ratio = |x: &Measured| match (f(k), f(x)) {
                (Some(a), Some(b)) if b != 0.0 => format!("{:.2}×", a / b),
                _ => "—".to_string(),
            };
            println!("| {n} | {what} | {} | {} | {} | {} | {} |", cell(k), cell(m), cell(p), ratio(m), ratio(p));
        };
        line("processes", &|x| Some(x.processes as f64), "", 0);
        line("start → ready", &|x| Some(x.ready.as_secs_f64()), " s", 2);
        line("restart → ready, warm artifact cache", &|x| x.warm_ready.map(|d| d.as_secs_f64()), " s", 2);
        line(&format!("create {} primaries → all outputs", n * PER_CONTROLLER), &|x| Some(x.converged.as_secs_f64()), " s", 2);
        line("PSS, summed", &|x| Some(mib(x.pss)), " MiB", 1);
        line("PSS, instances released (idle)", &|x| x.idle_pss.map(mib), " MiB", 1);
        line("ConfigMap watches", &|x| Some(x.configmap_watches), "", 0);
        line("watches, all resources", &|x| Some(x.watches), "", 0);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ns: Vec<usize> = args
        .iter()
        .position(|a| a == "--n")
        .and_then(|i| args.get(i + 1))
        .map(|list| list.split(',').map(|n| n.parse().expect("--n takes numbers, e.g. 1,10,50")).collect())
        .unwrap_or_else(|| vec![1, 10, 50]);
    let identity = match args.iter().position(|a| a == "--plugin-identity").and_then(|i| args.get(i + 1)).map(String::as_str) {
        None | Some("serviceaccount") => Identity::ServiceAccount,
        Some("host") => Identity::Host,
        Some(other) => panic!("--plugin-identity {other}: use serviceaccount (the default) or host"),
    };
    println!("kubewasm's plugins act as: {identity:?}");
    let host = release_binary();
    // SAFETY: set before the async runtime and any other thread start.
    unsafe { std::env::set_var("KUBEWASM_BIN", &host) };
    let peer = go_tool(Tool::ControllerRuntime).expect("the controller-runtime peer builds");
    // Built before any clock starts: the first host would otherwise wait for cargo.
    e2e_guest();
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    println!("load average at the start: {}", load());
    let started = Instant::now();
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
        let cp = ControlPlane::start().await.unwrap();
        wait_watches_steady(&cp.client().await.unwrap()).await;
        let mut rows = Vec::new();
        for n in ns {
            let kubewasm = run(&cp, &peer, Variant::Kubewasm, n, identity).await;
            let manager = run(&cp, &peer, Variant::Manager, n, identity).await;
            let processes = run(&cp, &peer, Variant::Processes, n, identity).await;
            rows.push((n, [kubewasm, manager, processes]));
        }
        print_table(&rows);
    });
    println!("\nload average at the end: {}; the bench took {:.0} s", load(), started.elapsed().as_secs_f64());
}
