//! The metadata-only benchmark (issue 26 §3): one plugin that only maps Pods to its primaries
//! (the suite's `e2e-guest`: primary Secrets, a `map-related` watch of Pods labelled with the
//! Secret they belong to), over N Pods in one namespace, run twice against one local control
//! plane, side by side: declaring Pods metadata-only (`views.metadata-only`), and not.
//!
//! Per variant: start a release host over the plugin and time until it is ready (the Pod watch
//! has listed), let it settle, then read the host's PSS (`/proc/PID/smaps_rollup`) and what its
//! Pod informer caches (`kubewasm_informer_objects`, `kubewasm_informer_cache_bytes`); change
//! one mapped Pod and time until its primary is reconciled for it (the watch works either way).
//!
//! The Pods are plain ones of one container as a Deployment would make them (labels, requests,
//! a probe, environment); nothing schedules them, so they stay Pending, as big as they are made.
//!
//! `cargo bench -p kubewasm-tests --bench metadata [-- --pods 50000]`

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubewasm_tests::host::{Host, HostConfig, release_binary};
use kubewasm_tests::plugindir::{E2eSettings, INPUT, PRIMARY, PluginDir};
use kubewasm_tests::{ControlPlane, process, prom};
use serde_json::json;

const PARENT: &str = "bench.kubewasm.io/parent";
const PLUGIN: &str = "pods";
/// Primaries (Secrets) the Pods are spread over.
const PRIMARIES: usize = 10;
const SETTLE: Duration = Duration::from_secs(5);
const TIMEOUT: Duration = Duration::from_secs(900);
/// Requests the bench keeps in flight while it creates Pods.
const CLIENT_CONCURRENCY: usize = 32;

#[derive(Debug)]
struct Measured {
    ready: Duration,
    pss: u64,
    cached_objects: f64,
    cache_bytes: f64,
    change_seen: Duration,
}

fn pod(i: usize) -> Pod {
    let app = format!("app-{}", i % PRIMARIES);
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("{app}-{i:06}"),
            "labels": {"app": app, "pod-template-hash": "5d8f9c7b6", PARENT: format!("p{}", i % PRIMARIES)},
            "annotations": {INPUT: "1"},
        },
        "spec": {"containers": [{
            "name": "app",
            "image": "registry.example.com/team/app:1.27.3",
            "ports": [{"containerPort": 8080, "name": "http"}],
            "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
        }]},
    }))
    .unwrap()
}

async fn run(cp: &ControlPlane, ns: &str, metadata_only: bool) -> Measured {
    let dir = PluginDir::new();
    let settings = E2eSettings::new(PLUGIN).kind("Secret").map_label(PARENT).watch_kind("Pod");
    dir.install_e2e(&if metadata_only { settings.metadata_only() } else { settings }, "v01");
    let started = Instant::now();
    let config = HostConfig::new("metadata", dir.path(), cp.kubeconfig_path()).namespace(ns).log_filter("warn");
    let mut host = Host::start(config).await.expect("the host starts");
    host.wait_ready(TIMEOUT).await.expect("the host gets ready");
    let ready = started.elapsed();
    tokio::time::sleep(SETTLE).await;
    let pss = process::pss_bytes(host.pid().unwrap()).expect("the host runs");
    let text = host.metrics().await.unwrap();
    let pods = [("resource", "Pod.v1")];
    let (cached_objects, cache_bytes) = (prom::sum(&text, "kubewasm_informer_objects", &pods), prom::sum(&text, "kubewasm_informer_cache_bytes", &pods));

    // One mapped Pod changes: its primary is reconciled for it either way.
    let pods_api: Api<Pod> = Api::namespaced(cp.client().await.unwrap(), ns);
    let mapped = [("controller", PLUGIN), ("reason", "mapped")];
    let before = host.metric("kubewasm_reconcile_reasons_total", &mapped).await.unwrap();
    let changed = Instant::now();
    let touched = if metadata_only { "metadata" } else { "whole" };
    pods_api
        .patch(&pod(0).metadata.name.unwrap(), &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"touched": touched}}})))
        .await
        .unwrap();
    host.wait_metric("kubewasm_reconcile_reasons_total", &mapped, TIMEOUT, |v| v > before).await.expect("the Pod's change maps to its primary");
    let change_seen = changed.elapsed();
    host.stop().await.expect("the host stops cleanly");
    let measured = Measured { ready, pss, cached_objects, cache_bytes, change_seen };
    eprintln!("metadata-only={metadata_only}: {measured:?}");
    measured
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pods: usize =
        args.iter().position(|a| a == "--pods").and_then(|i| args.get(i + 1)).map(|n| n.parse().expect("--pods takes a number")).unwrap_or(50_000);
    // SAFETY: set before the async runtime and any other thread start.
    unsafe { std::env::set_var("KUBEWASM_BIN", release_binary()) };
    let started = Instant::now();
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
        let cp = ControlPlane::start().await.unwrap();
        let ns = cp.namespace("metadata").await.unwrap();
        let secrets: Api<Secret> = ns.api();
        for p in 0..PRIMARIES {
            let primary: Secret =
                serde_json::from_value(json!({"metadata": {"name": format!("p{p}"), "labels": {PRIMARY: "yes"}, "annotations": {INPUT: "1"}}})).unwrap();
            secrets.create(&PostParams::default(), &primary).await.unwrap();
        }
        let api: Api<Pod> = ns.api();
        let created = Instant::now();
        futures::stream::iter(0..pods)
            .map(|i| {
                let api = api.clone();
                async move { api.create(&PostParams::default(), &pod(i)).await.expect("create a Pod") }
            })
            .buffer_unordered(CLIENT_CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
        println!("created {pods} Pods in {:.0} s", created.elapsed().as_secs_f64());
        let whole = run(&cp, ns.name(), false).await;
        let metadata = run(&cp, ns.name(), true).await;
        let mib = |b: f64| b / f64::from(1 << 20);
        println!("\n| {pods} Pods, one plugin mapping them | metadata-only | whole objects | ratio |");
        println!("|---|---:|---:|---:|");
        let row = |what: &str, m: f64, w: f64, unit: &str| println!("| {what} | {m:.1}{unit} | {w:.1}{unit} | {:.2}× |", m / w);
        row("host PSS after sync", mib(metadata.pss as f64), mib(whole.pss as f64), " MiB");
        row("Pod informer cache", mib(metadata.cache_bytes), mib(whole.cache_bytes), " MiB");
        row("cache bytes per Pod", metadata.cache_bytes / metadata.cached_objects, whole.cache_bytes / whole.cached_objects, " B");
        row("start → ready", metadata.ready.as_secs_f64(), whole.ready.as_secs_f64(), " s");
        row("a Pod's change → its reconcile", metadata.change_seen.as_secs_f64() * 1000.0, whole.change_seen.as_secs_f64() * 1000.0, " ms");
    });
    println!("\nthe bench took {:.0} s", started.elapsed().as_secs_f64());
}
