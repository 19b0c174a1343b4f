//! The runtime benchmark (issue 3), ratios measured side by side in one run:
//! - per reconcile: the same logic (`bench-logic`) compiled natively and as a plugin, with a
//!   1 KiB and a 16 KiB object, one cache read and one apply into an in-process recorder;
//! - a fresh instance per call vs a reused one; deadlines (epoch interruption) on vs off;
//! - loading a plugin from the artifact cache vs compiling it.
//!
//! `cargo bench -p kubewasm-tests --bench runtime`

use std::sync::Arc;
use std::time::{Duration, Instant};

use kubewasm::manifest::LimitPolicy;
use kubewasm::metrics::PluginMetrics;
use kubewasm::plugin::artifact::ArtifactCache;
use kubewasm::plugin::{LoadedPlugin, Loader};
use kubewasm::resource::{Gvk, ObjectKey};
use kubewasm::runtime::{PluginRunner, Request, Runtime, RuntimeConfig};
use kubewasm::tools::offline::{FixtureCache, Recorder};
use kubewasm_tests::guests;
use kubewasm_tests::timing::{measure, side_by_side};
use parking_lot::Mutex;

fn primary(bytes: usize) -> String {
    let value = "x".repeat(100);
    let data: serde_json::Map<String, serde_json::Value> = (0..bytes / 112).map(|i| (format!("key-{i:05}"), value.clone().into())).collect();
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "primary", "namespace": "bench", "uid": "9f1c2a4e-0000-4000-8000-000000000001", "resourceVersion": "12345"},
        "data": data,
    })
    .to_string()
}

const SETTINGS: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bench-settings","namespace":"bench","uid":"9f1c2a4e-0000-4000-8000-000000000002"},"data":{"prefix":"derived"}}"#;

/// The native side: the same logic, a cache read that copies the text out (as the guest
/// receives a copy), and an apply parsed into JSON and recorded (as the host does).
struct NativeHost {
    cache: FixtureCache,
    recorded: Mutex<Vec<serde_json::Value>>,
}

impl bench_logic::Host for NativeHost {
    fn get(&self, namespace: &str, name: &str) -> Option<String> {
        let key = ObjectKey::new(Some(namespace), name);
        self.cache.view().get(&Gvk::new("", "v1", "ConfigMap"), &key).map(|json| json.to_string())
    }

    fn apply(&self, object: String) -> Result<(), String> {
        let value: serde_json::Value = serde_json::from_str(&object).map_err(|e| e.to_string())?;
        let mut recorded = self.recorded.lock();
        if recorded.len() > 10_000 {
            recorded.clear();
        }
        recorded.push(value);
        Ok(())
    }
}

fn fixture() -> FixtureCache {
    let mut cache = FixtureCache::default();
    cache.insert(&Gvk::new("", "v1", "ConfigMap"), SETTINGS).unwrap();
    cache
}

fn runner(runtime: &Runtime, plugin: &LoadedPlugin, recorder: &Arc<Recorder>) -> PluginRunner {
    let services = kubewasm::tools::offline::services(&fixture(), recorder, kubewasm::tools::offline::Writes::Recorded);
    runtime.runner(plugin.prepared.clone(), &plugin.described, services, PluginMetrics::default(), &plugin.settings)
}

async fn wasm_reconcile(runner: &PluginRunner, recorder: &Recorder, object: &Arc<str>) {
    runner.reconcile(Request { key: ObjectKey::new(Some("bench"), "primary"), object: object.clone(), retries: 0 }).await.expect("the bench plugin reconciles");
    if recorder.write_count() > 10_000 {
        recorder.clear();
    }
}

async fn load(runtime: Arc<Runtime>, cache_dir: &std::path::Path, path: &std::path::Path) -> (LoadedPlugin, Duration) {
    let loader = Loader::new(runtime, Some(ArtifactCache::new(cache_dir)), LimitPolicy::default());
    let started = Instant::now();
    let plugin = loader.load(path).await.expect("the plugin loads");
    (plugin, started.elapsed())
}

fn micros(d: Duration) -> String {
    format!("{:.2} µs", d.as_secs_f64() * 1e6)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let budget = Duration::from_millis(std::env::var("BENCH_MILLIS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500));
    let guest = guests::guest("bench-guest", "bench_guest");
    let sample = guests::guest("sample-controller", "sample_controller");
    let cache_dir = tempfile::tempdir().unwrap();

    let runtime = Arc::new(Runtime::new(RuntimeConfig::default()).unwrap());
    let (plugin, _) = load(runtime.clone(), cache_dir.path(), &guest).await;

    println!("runtime benchmark (mean per call; {budget:?} per measurement; native and plugin in alternating rounds, median)\n");
    println!("per reconcile: parse the primary, one cache read, one apply into an in-process recorder");
    println!("{:<10} {:>12} {:>12} {:>8}", "object", "native", "plugin", "ratio");
    for size in [1024, 16 * 1024] {
        let object: Arc<str> = primary(size).into();
        let native = NativeHost { cache: fixture(), recorded: Mutex::default() };
        let recorder = Arc::new(Recorder::default());
        let wasm = runner(&runtime, &plugin, &recorder);
        let (native_time, wasm_time) =
            side_by_side(2 * budget, async || bench_logic::reconcile(&object, &native).unwrap(), async || wasm_reconcile(&wasm, &recorder, &object).await)
                .await;
        let ratio = wasm_time.as_secs_f64() / native_time.as_secs_f64();
        println!("{:<10} {:>12} {:>12} {:>7.2}x", format!("{} KiB", object.len() / 1024), micros(native_time), micros(wasm_time), ratio);
    }

    let object: Arc<str> = primary(1024).into();
    let recorder = Arc::new(Recorder::default());
    let reused = runner(&runtime, &plugin, &recorder);
    let reused_time = measure(budget, async || wasm_reconcile(&reused, &recorder, &object).await).await;
    let fresh_runtime = Arc::new(Runtime::new(RuntimeConfig { max_calls_per_instance: 1, ..RuntimeConfig::default() }).unwrap());
    let (fresh_plugin, _) = load(fresh_runtime.clone(), cache_dir.path(), &guest).await;
    let fresh = runner(&fresh_runtime, &fresh_plugin, &recorder);
    let fresh_time = measure(budget, async || wasm_reconcile(&fresh, &recorder, &object).await).await;
    println!("\ninstances (1 KiB object)");
    println!("  reused instance          {:>12}", micros(reused_time));
    println!("  fresh instance per call  {:>12}   ({:.1}x the reused)", micros(fresh_time), fresh_time.as_secs_f64() / reused_time.as_secs_f64());

    let no_deadline_runtime = Arc::new(Runtime::new(RuntimeConfig { deadlines: false, ..RuntimeConfig::default() }).unwrap());
    let (no_deadline_plugin, _) = load(no_deadline_runtime.clone(), cache_dir.path(), &guest).await;
    let off = runner(&no_deadline_runtime, &no_deadline_plugin, &recorder);
    let off_time = measure(budget, async || wasm_reconcile(&off, &recorder, &object).await).await;
    println!("\ndeadlines (1 KiB object)");
    println!("  epoch deadline on        {:>12}", micros(reused_time));
    println!("  epoch deadline off       {:>12}   (on costs {:+.1}%)", micros(off_time), (reused_time.as_secs_f64() / off_time.as_secs_f64() - 1.0) * 100.0);

    println!("\nloading a plugin (compile + describe vs artifact cache + describe)");
    for (name, path) in [("bench-guest", &guest), ("sample-controller", &sample)] {
        let size = std::fs::metadata(path).unwrap().len();
        let dir = tempfile::tempdir().unwrap();
        let (_, compiled) = load(runtime.clone(), dir.path(), path).await;
        let mut cached = Duration::MAX;
        for _ in 0..5 {
            cached = cached.min(load(runtime.clone(), dir.path(), path).await.1);
        }
        println!(
            "  {name:<18} {:>5} KB   compiled {:>9.1} ms   cached {:>7.1} ms   ({:.0}x faster)",
            size / 1024,
            compiled.as_secs_f64() * 1e3,
            cached.as_secs_f64() * 1e3,
            compiled.as_secs_f64() / cached.as_secs_f64()
        );
    }
}
