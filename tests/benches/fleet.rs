//! The multi-cluster benchmark (issue 25): what engaged member clusters cost a host. One plugin
//! (the suite's `e2e-guest`, mode `noop`) serves every member; each member's namespace holds
//! `--objects` ConfigMaps of ~1 KB. Members are engaged one at a time from a `--clusters`
//! directory while the host runs, and after 1, 3 and 10 of them the bench reads the host's PSS
//! (`/proc/PID/smaps_rollup`), its informers (`kubewasm_informer_objects` series: one watch
//! each) and the objects they cache. Engaging each member is timed from its kubeconfig file
//! landing to the plugin having reconciled its whole initial list
//! (`kubewasm_reconcile_reasons_total{controller="PLUGIN@MEMBER"}`).
//!
//! Stand-ins: three member control planes are started; members 4 to 10 reuse one of those API
//! servers under another name. Each member still has its own connection, discovery, informers,
//! caches, identities and controller — what the host pays per member — but the API servers
//! share the load of the extra watches.
//!
//! `cargo bench -p kubewasm-tests --bench fleet [-- --objects 1000]`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use kubewasm_tests::host::{Host, HostConfig, release_binary};
use kubewasm_tests::plugindir::{E2eSettings, INPUT, PRIMARY, PluginDir};
use kubewasm_tests::{ControlPlane, members, process, prom};

const PLUGIN: &str = "spread";
const NAMESPACE: &str = "fleet-bench";
const CONTROL_PLANES: usize = 3;
const MEMBERS: usize = 10;
/// After how many engaged members the host is measured.
const MEASURED: [usize; 3] = [1, 3, 10];
const SETTLE: Duration = Duration::from_secs(5);
const TIMEOUT: Duration = Duration::from_secs(600);
const CLIENT_CONCURRENCY: usize = 32;

fn configmap(i: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("cm-{i:05}")),
            labels: Some(BTreeMap::from([
                (PRIMARY.to_string(), "yes".to_string()),
                ("app.kubernetes.io/name".to_string(), format!("app-{}", i % 20)),
                ("app.kubernetes.io/part-of".to_string(), "fleet-bench".to_string()),
            ])),
            annotations: Some(BTreeMap::from([(INPUT.to_string(), "1".to_string())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("config.yaml".to_string(), format!("# {i}\n{}", "key: value\n".repeat(80)))])),
        ..Default::default()
    }
}

/// A namespace of `objects` ConfigMaps in `cp`.
async fn fill(cp: &ControlPlane, objects: usize) {
    let client = cp.client().await.unwrap();
    let ns = Namespace { metadata: ObjectMeta { name: Some(NAMESPACE.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    futures::stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &configmap(i)).await.expect("create a ConfigMap") }
        })
        .buffer_unordered(CLIENT_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
}

/// Changes one object in `cp` and waits until `controller` has reconciled the change.
async fn live_change(host: &Host, cp: &ControlPlane, controller: &str, round: usize) -> Duration {
    let labels = [("controller", controller), ("reason", "changed")];
    let before = host.metric("kubewasm_reconcile_reasons_total", &labels).await.unwrap_or(0.0);
    let api: Api<ConfigMap> = Api::namespaced(cp.client().await.unwrap(), NAMESPACE);
    let changed = Instant::now();
    let patch = serde_json::json!({"metadata": {"annotations": {INPUT: round.to_string()}}});
    api.patch("cm-00000", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch)).await.unwrap();
    loop {
        if host.metric("kubewasm_reconcile_reasons_total", &labels).await.unwrap_or(0.0) > before {
            return changed.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

struct Point {
    members: usize,
    pss: u64,
    informers: usize,
    cached: f64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let objects: usize =
        args.iter().position(|a| a == "--objects").and_then(|i| args.get(i + 1)).map(|n| n.parse().expect("--objects takes a number")).unwrap_or(1000);
    // SAFETY: set before the async runtime and any other thread start.
    unsafe { std::env::set_var("KUBEWASM_BIN", release_binary()) };
    let started = Instant::now();
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
        let hub = ControlPlane::start().await.unwrap();
        let hub_ns = Namespace { metadata: ObjectMeta { name: Some(NAMESPACE.into()), ..Default::default() }, ..Default::default() };
        Api::<Namespace>::all(hub.client().await.unwrap()).create(&PostParams::default(), &hub_ns).await.unwrap();
        let mut member_cps = Vec::new();
        for _ in 0..CONTROL_PLANES {
            let cp = ControlPlane::start().await.unwrap();
            fill(&cp, objects).await;
            member_cps.push(cp);
        }
        println!("{CONTROL_PLANES} member control planes with {objects} ConfigMaps each, in {:.0} s", started.elapsed().as_secs_f64());

        let dir = PluginDir::new();
        dir.install_e2e(&E2eSettings::new(PLUGIN).mode("noop").serve_members("all"), "v01");
        let clusters = tempfile::tempdir().unwrap();
        let config = HostConfig::new("fleet", dir.path(), hub.kubeconfig_path())
            .namespace(NAMESPACE)
            .arg(format!("--clusters={}", clusters.path().display()))
            .log_filter("warn");
        let mut host = Host::start(config).await.expect("the host starts");
        host.wait_ready(TIMEOUT).await.expect("the host gets ready");
        tokio::time::sleep(SETTLE).await;
        let pid = host.pid().unwrap();
        let alone = process::pss_bytes(pid).unwrap();

        let mut points = Vec::new();
        let mut engaging = Vec::new();
        let mut live = Vec::new();
        for m in 0..MEMBERS {
            let name = format!("m{m}");
            let controller = format!("{PLUGIN}@{name}");
            let begun = Instant::now();
            members::engage(clusters.path(), &name, member_cps[m % CONTROL_PLANES].kubeconfig_path(), &[]).unwrap();
            // While the new member's initial list is worked off, a live change in a member of
            // another control plane, engaged before: how long until it is reconciled.
            if m >= 2 {
                let other = if m % CONTROL_PLANES == 1 { 2 } else { 1 };
                tokio::time::sleep(Duration::from_millis(300)).await;
                live.push(live_change(&host, &member_cps[other], &format!("{PLUGIN}@m{other}"), m).await);
            }
            let labels = [("controller", controller.as_str())];
            host.wait_metric("kubewasm_reconcile_reasons_total", &labels, TIMEOUT, |v| v >= objects as f64).await.expect("the member's objects are reconciled");
            engaging.push(begun.elapsed());
            if MEASURED.contains(&(m + 1)) {
                tokio::time::sleep(SETTLE).await;
                let text = host.metrics().await.unwrap();
                let informers = prom::samples(&text).iter().filter(|s| s.name == "kubewasm_informer_objects").count();
                let cached = prom::sum(&text, "kubewasm_informer_objects", &[]);
                points.push(Point { members: m + 1, pss: process::pss_bytes(pid).unwrap(), informers, cached });
            }
        }
        host.stop().await.expect("the host stops cleanly");

        let mib = |b: f64| b / f64::from(1 << 20);
        println!("\n| engaged members ({objects} ConfigMaps each) | host PSS | above the host alone | per member | informers (watches) | cached objects |");
        println!("|---:|---:|---:|---:|---:|---:|");
        println!("| 0 | {:.1} MiB | | | 1 | 0 |", mib(alone as f64));
        for p in &points {
            let above = p.pss.saturating_sub(alone) as f64;
            println!(
                "| {} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {} | {:.0} |",
                p.members,
                mib(p.pss as f64),
                mib(above),
                mib(above / p.members as f64),
                p.informers,
                p.cached
            );
        }
        let secs: Vec<String> = engaging.iter().map(|d| format!("{:.1}", d.as_secs_f64())).collect();
        println!("\nengaging each member, file → its {objects} objects reconciled (s): {}", secs.join(", "));
        let ms: Vec<String> = live.iter().map(|d| format!("{:.0}", d.as_secs_f64() * 1000.0)).collect();
        live.sort();
        println!(
            "a live change in another member while one is engaged (its {objects} keys queued), change → reconciled (ms): {}; max {:.0} ms",
            ms.join(", "),
            live.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        );
    });
    println!("\nthe bench took {:.0} s", started.elapsed().as_secs_f64());
}
