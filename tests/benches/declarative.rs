//! The declarative benchmark (issue 24): the Kubernetes sample-controller written two ways, over
//! the same Foos on one local control plane, side by side:
//! - imperative: `examples/sample-controller/rust` (`reconcile` server-side applies the
//!   Deployment and the Foo's status itself, on every reconcile);
//! - declarative: `tests/guests/sample-declarative` (`sync` answers the Deployment and the
//!   status; the host applies what differs from what it observes, and nothing else).
//!
//! Per variant, each in a release host of its own and a namespace of its own, one after the
//! other (the order alternates between rounds): create N Foos, start the host and time until
//! every Foo has its Deployment and a status with `observedGeneration` (the bench watches both),
//! then until the host's queue has been quiet for 3 s. Count over that window the reconciles
//! (`controller_runtime_reconcile_total`, and by why they were queued), the writes the host made
//! (the API server's audit log: every write request, by the host's User-Agent, in the variant's
//! namespace) and the reads made of Foos and Deployments (the API server's
//! `apiserver_request_total`, GET and LIST; nobody else reads them in the window: the bench
//! watches, and the control plane runs only its namespace controller, so no Deployment gets
//! ReplicaSets, Pods or a status). Then the steady state: annotate every Foo (a new
//! resourceVersion, the same generation: nothing to do), time until the host counted N more
//! reconciles, wait until it is quiet, and count what that cost the same way. Last, the Foos and
//! Deployments the two variants left must be the same (without identities, versions, times, and
//! the host's own `kubewasm.io/controller-uid` label and `kubewasm.io/applied` annotation on a
//! declarative plugin's children), or the bench fails before printing its table.
//!
//! `cargo bench -p kubewasm-tests --bench declarative [-- --foos 200] [--rounds 1]`

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm_tests::host::{Host, HostConfig, release_binary};
use kubewasm_tests::{ControlPlane, Options, PluginDir, apply_crd, audit, guests, prom};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(300);
/// How long the host's reconcile count must stand still (with an empty queue and no worker
/// busy) for a phase to be over.
const QUIET: Duration = Duration::from_secs(3);
/// Requests the bench keeps in flight while it creates and annotates Foos.
const CLIENT_CONCURRENCY: usize = 16;
/// The annotation the steady-state phase sets on every Foo.
const RESYNC: &str = "bench.kubewasm.io/resync";
/// What the host adds to a declarative plugin's children, left out of the comparison.
const HOST_LABEL: &str = "kubewasm.io/controller-uid";
const HOST_ANNOTATION: &str = "kubewasm.io/applied";
/// Metadata that differs between two runs of the same logic.
const VOLATILE_METADATA: &[&str] = &["uid", "resourceVersion", "creationTimestamp", "managedFields", "namespace", "selfLink"];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Imperative,
    Declarative,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Imperative => "imperative",
            Variant::Declarative => "declarative",
        }
    }

    /// The plugin's component (built on first use).
    fn wasm(self) -> PathBuf {
        match self {
            Variant::Imperative => guests::guest("sample-controller", "sample_controller"),
            Variant::Declarative => guests::guest("sample-declarative", "sample_declarative"),
        }
    }
}

/// Counters at one moment: the host's reconciles, the writes it made so far (audit log) and the
/// API server's reads of Foos and Deployments.
struct Counters {
    reconciles: f64,
    errors: f64,
    reasons: BTreeMap<String, f64>,
    writes: BTreeMap<String, usize>,
    reads: BTreeMap<String, f64>,
}

impl Counters {
    /// `host` is `None` before it starts (nothing reconciled yet); `instance` is its identity,
    /// which its User-Agent ends with.
    async fn read(cp: &ControlPlane, client: &kube::Client, host: Option<&Host>, instance: &str, ns: &str) -> Counters {
        let text = match host {
            Some(host) => host.metrics().await.expect("the host's /metrics"),
            None => String::new(),
        };
        let mut reasons = BTreeMap::new();
        for sample in prom::samples(&text).into_iter().filter(|s| s.name == "kubewasm_reconcile_reasons_total") {
            *reasons.entry(sample.labels.get("reason").cloned().unwrap_or_default()).or_default() += sample.value;
        }
        let agent = format!("({instance})");
        let mut writes = BTreeMap::new();
        for event in audit::read(cp.data_dir()).iter().filter(|e| e.user_agent.ends_with(&agent) && e.namespace() == Some(ns)) {
            let subresource = event.object_ref.as_ref().and_then(|o| o.subresource.as_deref()).filter(|s| !s.is_empty());
            let mut what = format!("{} {}{}", event.verb, event.resource(), subresource.map(|s| format!("/{s}")).unwrap_or_default());
            if !event.accepted() {
                what.push_str(&format!(" ({})", event.response_status.as_ref().map_or(0, |s| s.code)));
            }
            *writes.entry(what).or_default() += 1;
        }
        let served = prom::apiserver_metrics(client).await.expect("the API server's /metrics");
        let mut reads = BTreeMap::new();
        for sample in prom::samples(&served).into_iter().filter(|s| s.name == "apiserver_request_total") {
            let (verb, resource) = (s_label(&sample, "verb"), s_label(&sample, "resource"));
            if ["GET", "LIST"].contains(&verb) && ["foos", "deployments"].contains(&resource) {
                let subresource = s_label(&sample, "subresource");
                let what = if subresource.is_empty() { format!("{verb} {resource}") } else { format!("{verb} {resource}/{subresource}") };
                *reads.entry(what).or_default() += sample.value;
            }
        }
        Counters {
            reconciles: prom::sum(&text, "controller_runtime_reconcile_total", &[]),
            errors: prom::sum(&text, "controller_runtime_reconcile_errors_total", &[]),
            reasons,
            writes,
            reads,
        }
    }

    /// What happened between `before` and now.
    fn since(&self, before: &Counters) -> Cost {
        fn minus<V: Copy + PartialEq + Default + std::ops::Sub<Output = V>>(now: &BTreeMap<String, V>, before: &BTreeMap<String, V>) -> BTreeMap<String, V> {
            now.iter().map(|(k, v)| (k.clone(), *v - before.get(k).copied().unwrap_or_default())).filter(|(_, v)| *v != V::default()).collect()
        }
        Cost {
            reconciles: self.reconciles - before.reconciles,
            errors: self.errors - before.errors,
            reasons: minus(&self.reasons, &before.reasons),
            writes: minus(&self.writes, &before.writes),
            reads: minus(&self.reads, &before.reads),
        }
    }
}

fn s_label<'a>(sample: &'a prom::Sample, label: &str) -> &'a str {
    sample.labels.get(label).map_or("", String::as_str)
}

/// What one phase cost.
#[derive(Debug, Clone)]
struct Cost {
    reconciles: f64,
    errors: f64,
    /// Reconciles by why their key was queued (a reconcile counts each of its reasons).
    reasons: BTreeMap<String, f64>,
    /// Write requests by verb and resource (`patch foos/status`; a refused one with its code).
    writes: BTreeMap<String, usize>,
    /// GETs and LISTs of Foos and Deployments.
    reads: BTreeMap<String, f64>,
}

impl Cost {
    fn writes(&self) -> f64 {
        self.writes.values().sum::<usize>() as f64
    }

    fn reads(&self) -> f64 {
        self.reads.values().fold(0.0, |sum, v| sum + v)
    }

    fn calls_per_reconcile(&self) -> f64 {
        (self.writes() + self.reads()) / self.reconciles
    }
}

/// When a phase's reconciles happened, as the bench polled the host's count.
#[derive(Debug, Clone, Copy)]
struct Timeline {
    /// The count first moved.
    first: Instant,
    /// It last moved before the host went quiet.
    last: Instant,
    /// The phase's condition first held.
    done: Instant,
}

impl Timeline {
    /// Reconciles per second from the first to the last (`count` of them).
    fn rate(&self, count: f64) -> f64 {
        count / self.last.duration_since(self.first).as_secs_f64()
    }
}

/// One phase: its timeline (times from the phase's start) and what it cost.
#[derive(Debug)]
struct Phase {
    /// Phase start → the host ready (a phase that starts a host).
    ready: Option<Duration>,
    /// Phase start → its condition held.
    done: Duration,
    /// First reconcile → last reconcile before the host went quiet (converging), or → the
    /// condition held (every Foo reconciled).
    busy: Duration,
    rate: f64,
    cost: Cost,
}

/// What one variant measured.
#[derive(Debug)]
struct Measured {
    variant: Variant,
    /// Host start with the Foos there (cold artifact cache) → every Foo has its Deployment and
    /// a status for its generation, and the host is quiet.
    converge: Phase,
    /// Annotating every Foo → the host counted a reconcile per Foo, and is quiet.
    annotate: Phase,
    /// A second host (warm artifact cache) → it counted a reconcile per Foo, and is quiet.
    restart: Phase,
    /// The Foos and Deployments it left, normalized.
    snapshot: Value,
}

/// What the bench's watches saw: per Foo whether its status is for its generation, and the
/// Deployments by name.
#[derive(Default)]
struct Seen {
    foos: HashMap<String, bool>,
    deployments: HashSet<String>,
    foos_listed: bool,
    deployments_listed: bool,
}

impl Seen {
    fn converged(&self, n: usize) -> bool {
        self.foos.len() == n && self.foos.values().all(|done| *done) && self.deployments.len() == n
    }
}

/// Watches the namespace's Foos and Deployments into `seen` (one LIST each, then a watch).
fn watch(foos: Api<DynamicObject>, deployments: Api<Deployment>, seen: &Arc<Mutex<Seen>>) -> [tokio::task::JoinHandle<()>; 2] {
    let on_foos = seen.clone();
    let foo_task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(foos, watcher::Config::default()).default_backoff());
        // An error is retried by the watcher (after a backoff); the phases' timeouts bound it.
        while let Some(event) = events.next().await {
            let mut seen = on_foos.lock().unwrap();
            match event {
                Ok(watcher::Event::Apply(foo) | watcher::Event::InitApply(foo)) => {
                    let generation = foo.metadata.generation;
                    let observed = foo.data.pointer("/status/observedGeneration").and_then(Value::as_i64);
                    seen.foos.insert(foo.metadata.name.unwrap_or_default(), observed.is_some() && observed == generation);
                }
                Ok(watcher::Event::Delete(foo)) => {
                    seen.foos.remove(&foo.metadata.name.unwrap_or_default());
                }
                Ok(watcher::Event::InitDone) => seen.foos_listed = true,
                Ok(watcher::Event::Init) | Err(_) => {}
            }
        }
    });
    let on_deployments = seen.clone();
    let deployment_task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(deployments, watcher::Config::default()).default_backoff());
        while let Some(event) = events.next().await {
            let mut seen = on_deployments.lock().unwrap();
            match event {
                Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) => {
                    seen.deployments.insert(d.metadata.name.unwrap_or_default());
                }
                Ok(watcher::Event::Delete(d)) => {
                    seen.deployments.remove(&d.metadata.name.unwrap_or_default());
                }
                Ok(watcher::Event::InitDone) => seen.deployments_listed = true,
                Ok(watcher::Event::Init) | Err(_) => {}
            }
        }
    });
    [foo_task, deployment_task]
}

async fn wait_for(what: &str, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < TIMEOUT, "timed out after {TIMEOUT:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls the host's `/metrics` at `addr` every [`POLL`] from `baseline` reconciles on until
/// `done(count)` held and the count has then stood still for [`QUIET`] with nothing queued or
/// running: when the count first moved, last moved, and when `done` first held.
async fn follow(name: &str, addr: SocketAddr, baseline: f64, done: impl Fn(f64) -> bool) -> Timeline {
    let started = Instant::now();
    let (mut last, mut first, mut moved, mut held) = (baseline, None, Instant::now(), None);
    loop {
        let now = Instant::now();
        // Not serving yet (the host is starting): nothing moved.
        if let Ok(text) = scrape(name, addr).await {
            let total = prom::sum(&text, "controller_runtime_reconcile_total", &[]);
            let busy = prom::sum(&text, "workqueue_depth", &[]) + prom::sum(&text, "controller_runtime_active_workers", &[]);
            if total != last {
                (last, moved) = (total, now);
                first.get_or_insert(now);
            }
            if held.is_none() && done(total) {
                held = Some(now);
            }
            if let (Some(first), Some(done)) = (first, held)
                && busy == 0.0
                && moved.elapsed() >= QUIET
            {
                return Timeline { first, last: moved, done };
            }
            assert!(started.elapsed() < TIMEOUT, "{name}: not done and quiet after {TIMEOUT:?}: {total} reconciles, {busy} queued or running");
        }
        tokio::time::sleep(POLL).await;
    }
}

fn foo_crd() -> CustomResourceDefinition {
    serde_saphyr::from_str(include_str!("../../examples/sample-controller/manifests/crd.yaml")).expect("the sample-controller's CRD parses")
}

/// Foo `i`: Deployment `foo-NNNN-web` with 1–3 replicas, or (every fifth) the default.
fn foo(ar: &ApiResource, i: usize) -> DynamicObject {
    let name = format!("foo-{i:04}");
    let spec = if i.is_multiple_of(5) {
        json!({"deploymentName": format!("{name}-web")})
    } else {
        json!({"deploymentName": format!("{name}-web"), "replicas": i % 3 + 1})
    };
    DynamicObject::new(&name, ar).data(json!({ "spec": spec }))
}

/// `object` without what differs between runs of the same logic: [`VOLATILE_METADATA`], the
/// host's own label and annotation; owner references keep their kind and name, not their uid.
fn normalize(mut object: Value) -> Value {
    let meta = object.get_mut("metadata").and_then(Value::as_object_mut).expect("an object has metadata");
    meta.retain(|k, _| !VOLATILE_METADATA.contains(&k.as_str()));
    for (field, host_key) in [("labels", HOST_LABEL), ("annotations", HOST_ANNOTATION)] {
        let emptied = meta.get_mut(field).and_then(Value::as_object_mut).is_some_and(|map| {
            map.remove(host_key);
            map.is_empty()
        });
        if emptied {
            meta.remove(field);
        }
    }
    for owner in meta.get_mut("ownerReferences").and_then(Value::as_array_mut).into_iter().flatten() {
        owner["uid"] = json!("<uid>");
    }
    object
}

/// The namespace's Foos (name, generation, spec, status) and Deployments (normalized), by name;
/// checks there are `n` of each and every Foo's status is for its generation.
async fn snapshot(foos: &Api<DynamicObject>, deployments: &Api<Deployment>, n: usize, variant: Variant) -> Value {
    let mut foo_rows = Vec::new();
    for foo in foos.list(&ListParams::default()).await.expect("list the Foos").items {
        let value = serde_json::to_value(&foo).unwrap();
        let generation = &value["metadata"]["generation"];
        assert_eq!(&value["status"]["observedGeneration"], generation, "{}: Foo {} has status {}", variant.name(), value["metadata"]["name"], value["status"]);
        foo_rows.push(json!({"name": value["metadata"]["name"], "generation": generation, "spec": value["spec"], "status": value["status"]}));
    }
    let mut deployment_rows: Vec<Value> = deployments
        .list(&ListParams::default())
        .await
        .expect("list the Deployments")
        .items
        .iter()
        .map(|d| normalize(serde_json::to_value(d).unwrap()))
        .collect();
    let by_name = |a: &Value, b: &Value| {
        a.pointer("/metadata/name").or(a.get("name")).map(Value::to_string).cmp(&b.pointer("/metadata/name").or(b.get("name")).map(Value::to_string))
    };
    foo_rows.sort_by(by_name);
    deployment_rows.sort_by(by_name);
    assert_eq!((foo_rows.len(), deployment_rows.len()), (n, n), "{}: Foos and Deployments", variant.name());
    json!({"foos": foo_rows, "deployments": deployment_rows})
}

/// Fails loudly, with the first pair that differs, unless both variants left the same objects.
fn assert_same(imperative: &Measured, declarative: &Measured) {
    for kind in ["foos", "deployments"] {
        let (a, b) = (imperative.snapshot[kind].as_array().unwrap(), declarative.snapshot[kind].as_array().unwrap());
        if let Some((x, y)) = a.iter().zip(b).find(|(x, y)| x != y) {
            panic!(
                "the variants left different {kind}:\n--- imperative ---\n{}\n--- declarative ---\n{}",
                serde_json::to_string_pretty(x).unwrap(),
                serde_json::to_string_pretty(y).unwrap()
            );
        }
    }
}

async fn run(cp: &ControlPlane, ar: &ApiResource, variant: Variant, n: usize) -> Measured {
    let client = cp.client().await.unwrap();
    let ns = cp.namespace(&format!("declarative-{}", variant.name())).await.unwrap();
    let foos: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns.name(), ar);
    let deployments: Api<Deployment> = ns.api();
    futures::stream::iter(0..n)
        .map(|i| {
            let foos = foos.clone();
            async move { foos.create(&PostParams::default(), &foo(ar, i)).await.expect("create a Foo") }
        })
        .buffer_unordered(CLIENT_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let watches = watch(foos.clone(), deployments.clone(), &seen);
    wait_for("the bench's watches to list", || {
        let seen = seen.lock().unwrap();
        seen.foos_listed && seen.deployments_listed
    })
    .await;

    let dir = PluginDir::new();
    let plugin = match variant {
        Variant::Imperative => "sample-controller",
        Variant::Declarative => "sample-declarative",
    };
    guests::install(&variant.wasm(), dir.path(), plugin, None);
    let instance = kubewasm_tests::unique_name(variant.name());
    let config = HostConfig::new(variant.name(), dir.path(), cp.kubeconfig_path()).namespace(ns.name()).instance(&instance).log_filter("warn");
    let start = Counters::read(cp, &client, None, &instance, ns.name()).await;
    let started = Instant::now();
    let mut host = Host::start(config).await.expect("the host starts");
    host.wait_ready(TIMEOUT).await.expect("the host gets ready");
    let ready = started.elapsed();
    wait_for(&format!("{}: every Foo's Deployment and status", variant.name()), || seen.lock().unwrap().converged(n)).await;
    let converged = started.elapsed();
    let settled = wait_quiet(&host).await.duration_since(started);
    let quiet = Counters::read(cp, &client, Some(&host), &instance, ns.name()).await;
    let converge = quiet.since(&start);

    // The steady state: every Foo changes, but not its generation.
    let resync_started = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let foos = foos.clone();
            async move {
                let patch = json!({"metadata": {"annotations": {RESYNC: "1"}}});
                foos.patch(&format!("foo-{i:04}"), &PatchParams::default(), &Patch::Merge(patch)).await.expect("annotate a Foo")
            }
        })
        .buffer_unordered(CLIENT_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let want = quiet.reconciles + n as f64;
    host.wait_metric("controller_runtime_reconcile_total", &[], TIMEOUT, |v| v >= want).await.expect("every Foo is reconciled again");
    let resynced = resync_started.elapsed();
    wait_quiet(&host).await;
    let steady = Counters::read(cp, &client, Some(&host), &instance, ns.name()).await.since(&quiet);
    assert!(seen.lock().unwrap().converged(n), "{}: a Foo's status is not for its generation after the annotation", variant.name());

    let snapshot = snapshot(&foos, &deployments, n, variant).await;
    host.stop().await.expect("the host stops cleanly");
    watches.iter().for_each(|w| w.abort());

    // The next variant starts on a clean API server: this one's namespace gone.
    let namespace = ns.name().to_string();
    drop(ns);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let deadline = Instant::now() + TIMEOUT;
    while namespaces.get_opt(&namespace).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "namespace {namespace} is still there {TIMEOUT:?} after its deletion");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let measured = Measured { variant, ready, converged, settled, converge, resynced, steady, snapshot };
    eprintln!(
        "{}: ready {:?}, converged {:?}, settled {:?}, {:?}; resynced {:?}, {:?}",
        variant.name(),
        ready,
        converged,
        settled,
        measured.converge,
        resynced,
        measured.steady
    );
    measured
}

fn print_table(n: usize, order: [Variant; 2], imperative: &Measured, declarative: &Measured) {
    println!("\n{n} Foos, run {} first:\n", order[0].name());
    println!("| {n} Foos | imperative | declarative | declarative / imperative |");
    println!("|---|---:|---:|---:|");
    let row = |what: &str, f: &dyn Fn(&Measured) -> f64, unit: &str, decimals: usize| {
        let (a, b) = (f(imperative), f(declarative));
        let ratio = if a != 0.0 && a.is_finite() && b.is_finite() { format!("{:.2}×", b / a) } else { "—".into() };
        println!("| {what} | {a:.decimals$}{unit} | {b:.decimals$}{unit} | {ratio} |");
    };
    let text = |what: &str, f: &dyn Fn(&Measured) -> String| println!("| {what} | {} | {} | |", f(imperative), f(declarative));
    let list =
        |map: Vec<(String, f64)>| if map.is_empty() { "none".to_string() } else { map.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ") };
    let secs = |d: Duration| d.as_secs_f64();
    let per = |x: f64, reconciles: f64| if reconciles > 0.0 { x / reconciles } else { f64::NAN };
    row("host start → ready (plugin compiled, caches synced)", &|m| secs(m.ready), " s", 2);
    row("host start → every Foo has its Deployment and status", &|m| secs(m.converged), " s", 2);
    row("ready → every Foo has its Deployment and status", &|m| secs(m.converged - m.ready), " s", 2);
    row("reconciles until quiet", &|m| m.converge.reconciles, "", 0);
    text("… by why they were queued", &|m| list(m.converge.reasons.iter().map(|(k, v)| (k.clone(), *v)).collect()));
    row("reconciles/s (ready → last reconcile)", &|m| m.converge.reconciles / secs(m.settled.saturating_sub(m.ready)), "", 0);
    row("write requests", &|m| m.converge.writes(), "", 0);
    text("… by verb and resource", &|m| list(m.converge.writes.iter().map(|(k, v)| (k.clone(), *v as f64)).collect()));
    row("reads of Foos and Deployments (GET, LIST)", &|m| m.converge.reads(), "", 0);
    row("writes per reconcile", &|m| per(m.converge.writes(), m.converge.reconciles), "", 2);
    row("API calls per reconcile (writes + reads)", &|m| per(m.converge.writes() + m.converge.reads(), m.converge.reconciles), "", 2);
    row("steady state: annotate every Foo → each reconciled again", &|m| secs(m.resynced), " s", 2);
    row("steady state: reconciles until quiet", &|m| m.steady.reconciles, "", 0);
    row("steady state: write requests", &|m| m.steady.writes(), "", 0);
    text("… by verb and resource", &|m| list(m.steady.writes.iter().map(|(k, v)| (k.clone(), *v as f64)).collect()));
    row("steady state: reads of Foos and Deployments", &|m| m.steady.reads(), "", 0);
    row("steady state: API calls per reconcile", &|m| per(m.steady.writes() + m.steady.reads(), m.steady.reconciles), "", 2);
    row("reconcile errors", &|m| m.converge.errors + m.steady.errors, "", 0);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let number = |flag: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(|n| n.parse().unwrap_or_else(|_| panic!("{flag} takes a number")))
            .unwrap_or(default)
    };
    let (n, rounds) = (number("--foos", 200), number("--rounds", 1));
    // SAFETY: set before the async runtime and any other thread start.
    unsafe { std::env::set_var("KUBEWASM_BIN", release_binary()) };
    // Built before any clock starts.
    Variant::Imperative.wasm();
    Variant::Declarative.wasm();
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    println!("load average at the start: {}", load());
    let started = Instant::now();
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
        // Only the namespace controller: no Deployment gets ReplicaSets or a status, so the host
        // under test is the only one writing or reading Foos and Deployments.
        let cp = ControlPlane::start_with(Options::new().controllers(["namespace"])).await.unwrap();
        let ar = apply_crd(&cp.client().await.unwrap(), &foo_crd(), TIMEOUT).await.unwrap();
        for round in 0..rounds {
            let order = if round.is_multiple_of(2) { [Variant::Imperative, Variant::Declarative] } else { [Variant::Declarative, Variant::Imperative] };
            let mut measured = Vec::new();
            for variant in order {
                measured.push(run(&cp, &ar, variant, n).await);
            }
            measured.sort_by_key(|m| m.variant == Variant::Declarative);
            assert_same(&measured[0], &measured[1]);
            print_table(n, order, &measured[0], &measured[1]);
        }
    });
    println!("\nload average at the end: {}; the bench took {:.0} s", load(), started.elapsed().as_secs_f64());
}
