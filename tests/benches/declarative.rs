//! The declarative benchmark (issue 24): the Kubernetes sample-controller written two ways, over
//! the same Foos on one local control plane, side by side:
//! - imperative: `examples/sample-controller/rust` (`reconcile` server-side applies the
//!   Deployment and the Foo's status itself, on every reconcile);
//! - declarative: `tests/guests/sample-declarative` (`sync` answers the Deployment and the
//!   status; the host applies what differs from what it observes, and nothing else).
//!
//! Per variant, each in release hosts of its own and a namespace of its own, one after the other
//! (the order alternates between rounds), three phases, each followed until the host's reconcile
//! count has stood still for 3 s with nothing queued or running:
//! 1. converging: N Foos exist, a host starts (cold artifact cache); time until every Foo has
//!    its Deployment and a status with `observedGeneration` (the bench watches both);
//! 2. every Foo annotated: a new resourceVersion, the same generation, nothing to do; time
//!    until the host counted N more reconciles;
//! 3. host restarted: the host stops and another starts (warm artifact cache), lists every Foo
//!    and reconciles it, with nothing to do; time until it counted N reconciles.
//!
//! Each phase's reconciles are the host's `controller_runtime_reconcile_total` (and by why they
//! were queued, `kubewasm_reconcile_reasons_total`), polled every 20 ms; its writes are every
//! write request in the API server's audit log with the host's User-Agent in the variant's
//! namespace; its reads are the API server's `apiserver_request_total` GETs and LISTs of Foos
//! and Deployments (nobody else reads them meanwhile: the bench watches, and the control plane
//! runs only its namespace controller, so no Deployment gets ReplicaSets, Pods or a status and
//! `availableReplicas` stays 0). Last, the Foos and Deployments the two variants left must be
//! the same (without identities, versions, times, and the host's own `kubewasm.io/controller-uid`
//! label and `kubewasm.io/applied` annotation on a declarative plugin's children), or the bench
//! fails before printing its table.
//!
//! Every plugin's writes go through the host's per-plugin rate limit: by default 100 requests/s,
//! burst 200 (`--max-plugin-qps Q` gives both hosts `--max-plugin-qps=Q --max-plugin-burst=2Q`).
//!
//! `cargo bench -p kubewasm-tests --bench declarative [-- --foos 200] [--rounds 1] [--max-plugin-qps Q]`

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm_tests::host::{Host, HostConfig, release_binary, scrape};
use kubewasm_tests::{ControlPlane, Options, PluginDir, apply_crd, audit, guests, prom};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(300);
/// How long the host's reconcile count must stand still (with an empty queue and no worker
/// busy) for a phase to be over.
const QUIET: Duration = Duration::from_secs(3);
/// How often the bench reads the host's reconcile count.
const POLL: Duration = Duration::from_millis(20);
/// Requests the bench keeps in flight while it creates and annotates Foos.
const CLIENT_CONCURRENCY: usize = 16;
/// The annotation the steady-state phase sets on every Foo.
const RESYNC: &str = "bench.kubewasm.io/resync";
/// What the host adds to a declarative plugin's children, left out of the comparison.
const HOST_LABEL: &str = "kubewasm.io/controller-uid";
const HOST_ANNOTATION: &str = "kubewasm.io/applied";
/// `kubewasm run` flags of every host: `--max-plugin-qps`/`--max-plugin-burst` when given.
static HOST_ARGS: OnceLock<Vec<String>> = OnceLock::new();
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
    /// Seconds spent in reconciles (`controller_runtime_reconcile_time_seconds_sum`).
    seconds: f64,
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
            seconds: prom::sum(&text, "controller_runtime_reconcile_time_seconds_sum", &[]),
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
            seconds: self.seconds - before.seconds,
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
    /// Seconds spent in them, by the host's reconcile-time histogram.
    seconds: f64,
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

/// When a phase's reconciles happened, as the bench polled the host's count every [`POLL`].
#[derive(Debug, Clone, Copy)]
struct Timeline {
    /// The last poll before the count first moved (so that `first → …` spans are at most one
    /// poll longer than they were, never shorter).
    first: Instant,
    /// The poll that saw the count last move before the host went quiet.
    last: Instant,
    /// The poll that saw the phase's condition first hold.
    done: Instant,
}

/// One phase and what it cost.
#[derive(Debug)]
struct Phase {
    /// Phase start → the host ready (a phase that starts a host).
    ready: Option<Duration>,
    /// Phase start → its condition held.
    done: Duration,
    /// The reconciles' span: first → last before the host went quiet; in a phase that waits
    /// for a reconcile per Foo, first → the N-th.
    busy: Duration,
    /// Reconciles per second over `busy`: all of them, or the N.
    rate: f64,
    cost: Cost,
}

impl Phase {
    /// `per_foo`: `Some(n)` for a phase that waits for a reconcile per Foo.
    fn new(started: Instant, ready: Option<Duration>, timeline: Timeline, cost: Cost, per_foo: Option<usize>) -> Phase {
        let (busy, reconciles) = match per_foo {
            None => (timeline.last.duration_since(timeline.first), cost.reconciles),
            Some(n) => (timeline.done.duration_since(timeline.first), n as f64),
        };
        Phase { ready, done: timeline.done.duration_since(started), busy, rate: reconciles / busy.as_secs_f64(), cost }
    }
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
    let mut still = started;
    loop {
        let now = Instant::now();
        // Not serving yet (the host is starting): nothing moved.
        if let Ok(text) = scrape(name, addr).await {
            let total = prom::sum(&text, "controller_runtime_reconcile_total", &[]);
            let busy = prom::sum(&text, "workqueue_depth", &[]) + prom::sum(&text, "controller_runtime_active_workers", &[]);
            if total != last {
                (last, moved) = (total, now);
                first.get_or_insert(still);
            } else if first.is_none() {
                still = now;
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

/// Starts a host over the variant's plugin (in `dir`, compiled into `artifacts`) and follows it
/// until `done` held and it is quiet (`per_foo` as for [`Phase::new`]); the phase's cost is what
/// happened meanwhile.
async fn host_phase(
    cp: &ControlPlane,
    variant: Variant,
    ns: &str,
    dir: &PluginDir,
    artifacts: &Path,
    done: impl Fn(f64) -> bool,
    per_foo: Option<usize>,
) -> (Host, String, Phase) {
    let client = cp.client().await.unwrap();
    let instance = kubewasm_tests::unique_name(variant.name());
    let mut config =
        HostConfig::new(variant.name(), dir.path(), cp.kubeconfig_path()).namespace(ns).instance(&instance).artifacts(artifacts).log_filter("warn");
    for arg in HOST_ARGS.get().into_iter().flatten() {
        config = config.arg(arg);
    }
    let before = Counters::read(cp, &client, None, &instance, ns).await;
    let started = Instant::now();
    let mut host = Host::start(config).await.expect("the host starts");
    let addr = host.metrics_addr();
    let (ready, timeline) = tokio::join!(
        async {
            host.wait_ready(TIMEOUT).await.expect("the host gets ready");
            started.elapsed()
        },
        follow(variant.name(), addr, 0.0, done)
    );
    let cost = Counters::read(cp, &client, Some(&host), &instance, ns).await.since(&before);
    (host, instance, Phase::new(started, Some(ready), timeline, cost, per_foo))
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
    let artifacts = tempfile::Builder::new().prefix("kubewasm-declarative-artifacts-").tempdir().unwrap();

    // Converging: the Foos are there when the host starts.
    let (host, instance, converge) = host_phase(cp, variant, ns.name(), &dir, artifacts.path(), |_| seen.lock().unwrap().converged(n), None).await;

    // The steady state: every Foo changes, but not its generation.
    let before = Counters::read(cp, &client, Some(&host), &instance, ns.name()).await;
    let started = Instant::now();
    let annotate = futures::stream::iter(0..n)
        .map(|i| {
            let foos = foos.clone();
            async move {
                let patch = json!({"metadata": {"annotations": {RESYNC: "1"}}});
                foos.patch(&format!("foo-{i:04}"), &PatchParams::default(), &Patch::Merge(patch)).await.expect("annotate a Foo")
            }
        })
        .buffer_unordered(CLIENT_CONCURRENCY)
        .collect::<Vec<_>>();
    let want = before.reconciles + n as f64;
    let ((), timeline) = tokio::join!(async { drop(annotate.await) }, follow(variant.name(), host.metrics_addr(), before.reconciles, |v| v >= want));
    let cost = Counters::read(cp, &client, Some(&host), &instance, ns.name()).await.since(&before);
    let annotate = Phase::new(started, None, timeline, cost, Some(n));
    assert!(seen.lock().unwrap().converged(n), "{}: a Foo's status is not for its generation after the annotation", variant.name());
    host.stop().await.expect("the host stops cleanly");

    // The steady state again: a new host lists every Foo and reconciles it, with nothing to do.
    let (host, _, restart) = host_phase(cp, variant, ns.name(), &dir, artifacts.path(), |v| v >= n as f64, Some(n)).await;
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
    eprintln!("{}:\n  converge {converge:?}\n  annotate {annotate:?}\n  restart {restart:?}", variant.name());
    Measured { variant, converge, annotate, restart, snapshot }
}

fn print_table(n: usize, order: [Variant; 2], imperative: &Measured, declarative: &Measured) {
    println!("\n{n} Foos, {} first:\n", order[0].name());
    println!("| {n} Foos | imperative | declarative | declarative / imperative |");
    println!("|---|---:|---:|---:|");
    let row = |what: &str, a: f64, b: f64, unit: &str, decimals: usize| {
        let ratio = if a != 0.0 && a.is_finite() && b.is_finite() { format!("{:.2}×", b / a) } else { "—".into() };
        println!("| {what} | {a:.decimals$}{unit} | {b:.decimals$}{unit} | {ratio} |");
    };
    let text = |what: &str, a: String, b: String| println!("| {what} | {a} | {b} | |");
    fn list<V: std::fmt::Display>(map: &BTreeMap<String, V>) -> String {
        if map.is_empty() { "none".into() } else { map.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ") }
    }
    let secs = |d: Duration| d.as_secs_f64();
    let ready = |p: &Phase| p.ready.map_or(f64::NAN, secs);
    let phases = [
        ("converging", &imperative.converge, &declarative.converge),
        ("every Foo annotated", &imperative.annotate, &declarative.annotate),
        ("host restarted", &imperative.restart, &declarative.restart),
    ];
    for (name, a, b) in phases {
        match name {
            "converging" => {
                row("converging: host start → ready (plugin compiled, caches synced)", ready(a), ready(b), " s", 2);
                row("converging: host start → every Foo has its Deployment and status", secs(a.done), secs(b.done), " s", 2);
                row("converging: first → last reconcile", secs(a.busy), secs(b.busy), " s", 2);
            }
            "every Foo annotated" => row("every Foo annotated: first annotation → a reconcile per Foo", secs(a.done), secs(b.done), " s", 2),
            _ => {
                row("host restarted: host start → ready (warm artifact cache)", ready(a), ready(b), " s", 2);
                row("host restarted: host start → a reconcile per Foo", secs(a.done), secs(b.done), " s", 2);
            }
        }
        row(&format!("{name}: reconciles/s"), a.rate, b.rate, "", 0);
        row(&format!("{name}: reconciles until quiet"), a.cost.reconciles, b.cost.reconciles, "", 0);
        let mean = |p: &Phase| p.cost.seconds / p.cost.reconciles * 1000.0;
        row(&format!("{name}: mean reconcile time"), mean(a), mean(b), " ms", 2);
        text(&format!("{name}: … queued as"), list(&a.cost.reasons), list(&b.cost.reasons));
        row(&format!("{name}: write requests"), a.cost.writes(), b.cost.writes(), "", 0);
        text(&format!("{name}: … by verb and resource"), list(&a.cost.writes), list(&b.cost.writes));
        text(&format!("{name}: reads of Foos and Deployments"), list(&a.cost.reads), list(&b.cost.reads));
        row(&format!("{name}: API calls per reconcile"), a.cost.calls_per_reconcile(), b.cost.calls_per_reconcile(), "", 2);
        row(&format!("{name}: reconcile errors"), a.cost.errors, b.cost.errors, "", 0);
    }
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
    // The host's ceiling on a plugin's request rate (by default 100/s, burst 200), for both.
    let qps = number("--max-plugin-qps", 0);
    let host_args = if qps > 0 { vec![format!("--max-plugin-qps={qps}"), format!("--max-plugin-burst={}", 2 * qps)] } else { Vec::new() };
    println!("host flags: {host_args:?}");
    HOST_ARGS.set(host_args).unwrap();
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
