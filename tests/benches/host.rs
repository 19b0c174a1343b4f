//! The host benchmark (issues 4 and 5), against a real local control plane and the release
//! `kubewasm` binary, numbers side by side in one run:
//! - end-to-end reconciles per second of a no-op Rust plugin fed from the cache;
//! - cache bytes per object against the objects' JSON bytes (from the host's resident memory);
//! - what one plugin costs in memory with a live instance and idle (instances released), per
//!   language, and its first reconcile after the release;
//! - hot-swap latency, from the file in place to the first reconcile on the new version: a Rust
//!   plugin with the artifact cache cold and warm, and a Python and a JS plugin likewise;
//! - writes per second of one plugin acting as the host vs as its own ServiceAccount
//!   (impersonated), to show what per-plugin identity costs;
//! - what a shadow candidate costs the live version: its reconciles per second without and with
//!   a candidate (`NAME.next.wasm`) in its shadow.
//!
//! `cargo bench -p kubewasm-tests --bench host [-- reconciles|idle|identity|shadow|swap]` (needs
//! `kubewasm-py` and `node` for the last two parts, as `make test` installs them).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kubewasm_tests::host::{Host, HostConfig, release_binary};
use kubewasm_tests::plugindir::{E2eSettings, PRIMARY as LABEL, PluginDir, e2e_guest, e2e_variant, variant_of};
use kubewasm_tests::{ControlPlane, TestNamespace, guests, process, prom};

fn rss_bytes(pid: u32) -> u64 {
    process::rss_bytes(pid).expect("the host runs")
}

async fn metric(host: &Host, name: &str, labels: &[(&str, &str)]) -> f64 {
    prom::sum(&host.metrics().await.expect("/metrics answers"), name, labels)
}

/// Polls a metric every few milliseconds until `done`; returns when it first held.
async fn until(host: &Host, name: &str, labels: &[(&str, &str)], done: impl Fn(f64) -> bool) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if done(metric(host, name, labels).await) {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "{name} never reached the expected value\n{}", host.log_tail(40));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Creates `count` labelled ConfigMaps of about `bytes` each, 16 requests at a time; returns
/// the JSON bytes of one as the API server serves it.
async fn create_configmaps(ns: &TestNamespace, count: usize, bytes: usize) -> usize {
    let api: Api<ConfigMap> = ns.api();
    let value = "v".repeat(bytes.saturating_sub(400) / 4);
    let tasks = futures::stream::iter(0..count).map(|i| {
        let api = api.clone();
        let value = value.clone();
        async move {
            let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("cm-{i:06}"), "labels": {LABEL: "true", "app": "bench"}},
                "data": {"a": value, "b": value, "c": value, "d": value},
            }))
            .unwrap();
            api.create(&PostParams::default(), &cm).await.expect("create a ConfigMap");
        }
    });
    use futures::StreamExt;
    tasks.buffer_unordered(16).collect::<Vec<()>>().await;
    let raw =
        ns.client().request_text(http::Request::get(format!("/api/v1/namespaces/{}/configmaps/cm-000000", ns.name())).body(Vec::new()).unwrap()).await.unwrap();
    raw.len()
}

async fn reconciles_and_cache(cp: &ControlPlane) {
    let ns = cp.namespace("bench-cache").await.unwrap();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("noop").mode("noop").max_concurrency(2), "v01");
    let mut host = Host::start(HostConfig::new("bench", dir.path(), cp.kubeconfig_path()).namespace(ns.name()).log_filter("warn")).await.unwrap();
    host.wait_ready(Duration::from_secs(120)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_bytes(host.pid().unwrap());

    let count = 20_000;
    let json_bytes = create_configmaps(&ns, count, 1024).await;
    until(&host, "controller_runtime_reconcile_total", &[("controller", "noop")], |n| n >= count as f64).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_bytes(host.pid().unwrap());
    let per_object = (after.saturating_sub(before)) as f64 / count as f64;

    // Reconciles fed from the cache: restart the host on the full cache; the initial list queues
    // every key, and the workers drain them.
    host.stop().await.unwrap();
    let host = Host::start(HostConfig::new("bench", dir.path(), cp.kubeconfig_path()).namespace(ns.name()).log_filter("warn")).await.unwrap();
    let synced = until(&host, "workqueue_adds_total", &[("name", "noop")], |n| n >= count as f64).await;
    let done = until(&host, "controller_runtime_reconcile_total", &[("controller", "noop")], |n| n >= count as f64).await;
    let rate = count as f64 / done.duration_since(synced).as_secs_f64();
    host.stop().await.unwrap();

    println!("end-to-end reconciles of a no-op Rust plugin fed from the cache (2 workers, {count} objects)");
    println!("  {rate:>10.0} reconciles/s   (target 20 000/s: {:.2}x)", rate / 20_000.0);
    println!("\ncache: {count} ConfigMaps of {json_bytes} JSON bytes each (as the API server serves them, with managedFields)");
    println!("  host memory per object {per_object:>8.0} bytes   = {:.2}x the JSON (target <= 1.2x)", per_object / json_bytes as f64);
}

/// One plugin of the idle and swap parts: a small Rust, Python or JS plugin reconciling the
/// ConfigMaps labeled `label=true`.
struct BenchPlugin {
    language: &'static str,
    name: String,
    wasm: Vec<u8>,
    settings: Option<String>,
    label: String,
}

fn pss_bytes(pid: u32) -> u64 {
    process::pss_bytes(pid).expect("the process runs")
}

/// What one plugin costs the host (PSS) while it has a live instance and once its instances are
/// released for idleness, against a host without plugins; and the first reconcile after the
/// release, which instantiates afresh. One plugin per language, loaded from a warm artifact
/// cache.
async fn idle_cost(cp: &ControlPlane, plugins: &[BenchPlugin]) {
    const IDLE: &str = "--idle-instances=2s";
    let pss_settled = |host: &Host| {
        let pid = host.pid().unwrap();
        async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            pss_bytes(pid)
        }
    };
    let ns = cp.namespace("bench-idle").await.unwrap();
    let empty = PluginDir::new();
    let mut host = Host::start(HostConfig::new("idle", empty.path(), cp.kubeconfig_path()).namespace(ns.name()).arg(IDLE).log_filter("warn")).await.unwrap();
    host.wait_ready(Duration::from_secs(60)).await.unwrap();
    let baseline = pss_settled(&host).await;
    host.stop().await.unwrap();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "
one plugin's cost to the host (PSS; host without plugins: {:.1} MiB), instances released after 2 s idle",
        mib(baseline)
    );
    println!("  {:<8} {:>18} {:>20} {:>14} {:>32}", "", "one live instance", "released (idle)", "the instance", "reconcile after the release");
    for BenchPlugin { language, name, wasm, settings, label } in plugins {
        let ns = cp.namespace("bench-idle").await.unwrap();
        let api: Api<ConfigMap> = ns.api();
        let dir = PluginDir::new();
        dir.install(name, wasm, settings.as_deref());
        // As a host restarts in production: from the artifact cache, compiling nothing.
        let artifacts = tempfile::tempdir().unwrap();
        precompile(artifacts.path(), wasm);
        let config = HostConfig::new("idle", dir.path(), cp.kubeconfig_path()).namespace(ns.name()).artifacts(artifacts.path()).arg(IDLE).log_filter("warn");
        let mut host = Host::start(config).await.unwrap();
        host.wait_ready(Duration::from_secs(300)).await.unwrap();
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": "one", "labels": {label.as_str(): "true"}}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
        until(&host, "controller_runtime_reconcile_total", &[("controller", name)], |n| n >= 1.0).await;
        let live = pss_settled(&host).await;
        until(&host, "kubewasm_plugin_instances", &[("plugin", name)], |n| n == 0.0).await;
        let idle = pss_settled(&host).await;
        let before = metric(&host, "controller_runtime_reconcile_total", &[("controller", name)]).await;
        let started = Instant::now();
        let patch = serde_json::json!({"data": {"touched": "yes"}});
        api.patch("one", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
        let first = until(&host, "controller_runtime_reconcile_total", &[("controller", name)], |n| n > before).await.duration_since(started);
        host.stop().await.unwrap();
        println!(
            "  {language:<8} {:>14.1} MiB {:>16.1} MiB {:>10.1} MiB {:>28.1} ms",
            mib(live),
            mib(idle),
            mib(live.saturating_sub(idle)),
            first.as_secs_f64() * 1e3
        );
    }
}

/// Appends a custom section: the same plugin under a new digest.
fn with_custom_section(wasm: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"kubewasm-bench";
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(tag.as_bytes());
    let mut out = wasm.to_vec();
    out.push(0);
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

/// Time from a new version in place to the first reconcile on it.
async fn swap(host: &Host, dir: &PluginDir, plugin: &str, wasm: &[u8]) -> Duration {
    // Both counters are read before the swap: the catch-up reconcile may be over by the time the
    // reload shows in the metrics. Nothing else makes the plugin reconcile meanwhile.
    let reloads = metric(host, "kubewasm_plugin_reloads_total", &[("plugin", plugin), ("result", "reloaded")]).await;
    let reconciles = metric(host, "controller_runtime_reconcile_total", &[("controller", plugin)]).await;
    let started = Instant::now();
    dir.replace(plugin, wasm);
    until(host, "kubewasm_plugin_reloads_total", &[("plugin", plugin), ("result", "reloaded")], |n| n > reloads).await;
    until(host, "controller_runtime_reconcile_total", &[("controller", plugin)], |n| n > reconciles).await.duration_since(started)
}

/// Puts `wasm` into the artifact cache `cache`, as a warm cache would have it.
fn precompile(cache: &Path, wasm: &[u8]) {
    let file = tempfile::Builder::new().suffix(".wasm").tempfile().unwrap();
    std::fs::write(file.path(), wasm).unwrap();
    let status = Command::new(std::env::var_os("KUBEWASM_BIN").unwrap())
        .arg("check")
        .arg(format!("--cache-dir={}", cache.display()))
        .arg(file.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

async fn swap_latency(cp: &ControlPlane, name: &str, language: &str, wasm: Vec<u8>, settings: Option<&str>, primary: &str) {
    let ns = cp.namespace("bench-swap").await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install(name, &wasm, settings);
    let cache = tempfile::tempdir().unwrap();
    let config = HostConfig::new("swap", dir.path(), cp.kubeconfig_path()).namespace(ns.name()).artifacts(cache.path()).log_filter("warn");
    let host = Host::start(config).await.unwrap();
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": "swapped", "labels": {primary: "true"}}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let mut host = host;
    host.wait_ready(Duration::from_secs(300)).await.unwrap();
    until(&host, "controller_runtime_reconcile_total", &[("controller", name)], |n| n >= 1.0).await;
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for round in 0..3 {
        cold.push(swap(&host, &dir, name, &with_custom_section(&wasm, &format!("cold-{round}"))).await);
        let next = with_custom_section(&wasm, &format!("warm-{round}"));
        precompile(cache.path(), &next);
        warm.push(swap(&host, &dir, name, &next).await);
    }
    host.stop().await.unwrap();
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    println!(
        "  {language:<7} {:>6} KB   cold {:>8.1} ms   warm {:>7.1} ms{}",
        wasm.len() / 1024,
        median(cold),
        median(warm),
        if language == "Rust" { "   (target < 50 ms warm)" } else { "" }
    );
}

/// A `kubewasm new --lang LANG NAME` project (in the returned directory, under `NAME/`): the
/// scaffold's plugin reconciles the ConfigMaps labeled `NAME.example.com/enabled=true`.
fn scaffold(lang: &str, name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(std::env::var_os("KUBEWASM_BIN").unwrap())
        .current_dir(dir.path())
        .args(["new", "--lang", lang, name])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "kubewasm new --lang {lang} {name} failed");
    dir
}

/// Whether to run the part `name`: all of them, unless the command line names some
/// (`cargo bench -p kubewasm-tests --bench host -- swap`; parts: reconciles, copies, swap).
/// Writes per second of one plugin (an apply per reconcile, 4 workers, its client rate limit
/// lifted) over 2 000 primaries, from the initial list queued to the last reconcile: acting as the
/// host, then as its own impersonated ServiceAccount with the RBAC `kubewasm rbac` prints.
async fn identity_cost(cp: &ControlPlane) {
    let count = 2_000;
    let mut rates = Vec::new();
    for identity in ["host", "serviceaccount"] {
        let ns = cp.namespace("bench-identity").await.unwrap();
        create_configmaps(&ns, count, 256).await;
        let dir = PluginDir::new();
        let settings = E2eSettings::new("writer").max_concurrency(4);
        dir.install("writer", &std::fs::read(e2e_guest()).unwrap(), Some(&format!("{}[kubewasm]\nqps = 100000\nburst = 100000\n", settings.to_toml())));
        let status = "kubewasm-plugins";
        let mut config =
            HostConfig::new("identity", dir.path(), cp.kubeconfig_path()).namespace(ns.name()).status_configmap(ns.name(), status).log_filter("warn");
        if identity == "serviceaccount" {
            let rbac = Command::new(std::env::var_os("KUBEWASM_BIN").unwrap())
                .args([
                    "rbac",
                    &format!("--plugins={}", dir.path().display()),
                    &format!("--identity-namespace={}", ns.name()),
                    &format!("--namespace={}", ns.name()),
                ])
                .arg(format!("--status-configmap={}/{status}", ns.name()))
                .output()
                .expect("kubewasm rbac runs");
            assert!(rbac.status.success(), "kubewasm rbac: {}", String::from_utf8_lossy(&rbac.stderr));
            cp.kubectl().unwrap().run_with_stdin(&["apply", "-f", "-"], Some(&String::from_utf8(rbac.stdout).unwrap())).await.unwrap();
            config = config.service_accounts(ns.name());
        }
        let host = Host::start(config).await.unwrap();
        let synced = until(&host, "workqueue_adds_total", &[("name", "writer")], |n| n >= count as f64).await;
        let done = until(&host, "controller_runtime_reconcile_total", &[("controller", "writer")], |n| n >= count as f64).await;
        let errors = metric(&host, "controller_runtime_reconcile_errors_total", &[("controller", "writer")]).await;
        assert_eq!(errors, 0.0, "the writer failed {errors} reconciles as {identity}\n{}", host.log_tail(20));
        rates.push(count as f64 / done.duration_since(synced).as_secs_f64());
        host.stop().await.unwrap();
    }
    println!("\nwrites/s of one plugin (server-side apply per reconcile, 4 workers, {count} primaries)");
    println!("  as the host               {:>8.0}/s", rates[0]);
    println!("  as its own ServiceAccount {:>8.0}/s   ({:.2}x)", rates[1], rates[1] / rates[0]);
}

/// Reconciles/s of a no-op plugin draining all its keys after a hot swap (which enqueues every
/// primary), without and with a candidate in its shadow, in alternating rounds.
async fn shadow_cost(cp: &ControlPlane) {
    let ns = cp.namespace("bench-shadow").await.unwrap();
    let dir = PluginDir::new();
    let settings = E2eSettings::new("noop").mode("noop").max_concurrency(2);
    dir.install_e2e(&settings, "v01");
    let count = 10_000;
    create_configmaps(&ns, count, 1024).await;
    let mut host = Host::start(HostConfig::new("bench-shadow", dir.path(), cp.kubeconfig_path()).namespace(ns.name()).log_filter("warn")).await.unwrap();
    host.wait_ready(Duration::from_secs(120)).await.unwrap();
    until(&host, "controller_runtime_reconcile_total", &[("controller", "noop")], |n| n >= count as f64).await;
    let reloads = |result: &'static str| [("plugin", "noop"), ("result", result)];
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let rounds = 6;
    for round in 0..rounds {
        let shadowed = round % 2 == 1;
        if shadowed {
            // The same logic, another build: a candidate that agrees on every key.
            let candidates = metric(&host, "kubewasm_plugin_reloads_total", &reloads("candidate")).await;
            dir.write_atomic("noop.next.wasm", &e2e_variant(&format!("s{round:02}")));
            until(&host, "kubewasm_plugin_reloads_total", &reloads("candidate"), |n| n > candidates).await;
        }
        let before = metric(&host, "controller_runtime_reconcile_total", &[("controller", "noop")]).await;
        let reloaded = metric(&host, "kubewasm_plugin_reloads_total", &reloads("reloaded")).await;
        dir.replace("noop", &e2e_variant(&format!("v{:02}", round + 2)));
        let swapped = until(&host, "kubewasm_plugin_reloads_total", &reloads("reloaded"), |n| n > reloaded).await;
        let done = until(&host, "controller_runtime_reconcile_total", &[("controller", "noop")], |n| n >= before + count as f64).await;
        rates[usize::from(shadowed)].push(count as f64 / done.duration_since(swapped).as_secs_f64());
        if shadowed {
            let removed = metric(&host, "kubewasm_plugin_reloads_total", &reloads("candidate_removed")).await;
            std::fs::remove_file(dir.path().join("noop.next.wasm")).unwrap();
            until(&host, "kubewasm_plugin_reloads_total", &reloads("candidate_removed"), |n| n > removed).await;
        }
    }
    let shadow = |result: &'static str| {
        let host = &host;
        async move { metric(host, "kubewasm_shadow_reconciles_total", &[("plugin", "noop"), ("result", result)]).await }
    };
    let (same, skipped, other) = (shadow("same").await, shadow("skipped").await, shadow("differs").await + shadow("error").await + shadow("fault").await);
    host.stop().await.unwrap();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (alone, beside) = (median(&mut rates[0]), median(&mut rates[1]));
    println!("\nreconciles/s of a no-op Rust plugin draining {count} keys after a hot swap (2 workers, median of {})", rounds / 2);
    println!("  live alone                   {alone:>8.0}/s");
    println!("  live with a shadow candidate {beside:>8.0}/s   ({:.2}x; target >= 0.90x)", beside / alone);
    println!("  the shadow replayed {same:.0} reconciles (all agreeing: {}), skipped {skipped:.0} under load", other == 0.0);
}

fn wanted(name: &str) -> bool {
    let named: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    named.is_empty() || named.iter().any(|n| n == name)
}

fn main() {
    let bin = release_binary();
    // SAFETY: set before the async runtime and any other thread start.
    unsafe { std::env::set_var("KUBEWASM_BIN", &bin) };
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
        let cp = ControlPlane::start().await.unwrap();
        if wanted("reconciles") {
            reconciles_and_cache(&cp).await;
        }
        if wanted("identity") {
            identity_cost(&cp).await;
        }
        if wanted("shadow") {
            shadow_cost(&cp).await;
        }
        if !wanted("idle") && !wanted("swap") {
            return;
        }
        let rust = std::fs::read(e2e_guest()).unwrap();
        let settings = Some("name = \"swap\"\nmode = \"noop\"\n".to_string());
        let mut plugins = vec![BenchPlugin { language: "Rust", name: "swap".into(), wasm: variant_of(&rust, "v01"), settings, label: LABEL.into() }];
        for (lang, language, app) in [("python", "Python", "app.py"), ("js", "JS", "app.js")] {
            let name = format!("swap-{lang}");
            let project = scaffold(lang, &name);
            let wasm = std::fs::read(guests::cached_plugin(lang, &project.path().join(&name).join(app), &name)).unwrap();
            let label = format!("{name}.example.com/enabled");
            plugins.push(BenchPlugin { language, name, wasm, settings: None, label });
        }
        if wanted("idle") {
            idle_cost(&cp, &plugins).await;
        }
        if wanted("swap") {
            println!("\nhot swap: a new version in place (atomic rename) to the first reconcile on it (median of 3)");
            for BenchPlugin { language, name, wasm, settings, label } in &plugins {
                swap_latency(&cp, name, language, wasm.clone(), settings.as_deref(), label).await;
            }
        }
    });
}
