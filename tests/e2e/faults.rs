//! The runtime's fault catalog (issue 3): a trap, an endless loop, a memory bomb, deep recursion,
//! oversized results, broken files, a component of another world, an invalid manifest, a call
//! outside the manifest, and attempts to leave the sandbox; and what crosses the WIT boundary
//! (issue 20): arguments over their bounds, results whose lists alias one buffer, a table bomb. For each: a precise error, the
//! faulting instance discarded, and the same plugin and another loaded plugin still serving.
//!
//! No cluster needed: plugins run against the in-memory cache and recorder of
//! `kubewasm::tools::offline`.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use kubewasm::client::WriteOp;
use kubewasm::manifest::LimitPolicy;
use kubewasm::metrics::PluginMetrics;
use kubewasm::plugin::artifact::ArtifactCache;
use kubewasm::plugin::{LoadError, LoadedPlugin, Loader};
use kubewasm::resource::{Gvk, ObjectKey};
use kubewasm::runtime::{Action, CallError, DescribeError, Fault, GuestErrorCode, PluginRunner, Request, Runtime, RuntimeConfig};
use kubewasm::tools::offline::{FixtureCache, Recorder};
use kubewasm_tests::{components, guests};

fn faulty_wasm() -> PathBuf {
    guests::guest("faulty-guest", "faulty_guest")
}

/// One runtime and artifact cache for the whole file, as in a host.
fn loader() -> &'static Loader {
    static LOADER: OnceLock<(Loader, tempfile::TempDir)> = OnceLock::new();
    let (loader, _) = LOADER.get_or_init(|| {
        let cache = tempfile::tempdir().unwrap();
        let runtime = Arc::new(Runtime::new(RuntimeConfig::default()).unwrap());
        (Loader::new(runtime, Some(ArtifactCache::new(cache.path())), LimitPolicy::default()), cache)
    });
    loader
}

async fn load(name: &str, settings: &str) -> Result<LoadedPlugin, LoadError> {
    let dir = tempfile::tempdir().unwrap();
    let path = guests::install(&faulty_wasm(), dir.path(), name, Some(settings));
    loader().load(&path).await
}

struct Plugin {
    runner: PluginRunner,
    recorder: Arc<Recorder>,
    metrics: PluginMetrics,
}

async fn plugin(name: &str) -> Plugin {
    plugin_with(name, "").await
}

/// A plugin with `[kubewasm]` options (as NAME.toml gives them) after its name.
async fn plugin_with(name: &str, options: &str) -> Plugin {
    let loaded = load(name, &format!("name = \"{name}\"\n{options}")).await.expect("the faulty guest loads");
    let mut cache = FixtureCache::default();
    cache.insert(&configmap_gvk(), &configmap("default", "seed", "ok")).unwrap();
    let recorder = Arc::new(Recorder::default());
    let metrics = PluginMetrics::default();
    let services = kubewasm::tools::offline::services(&cache, &recorder, kubewasm::tools::offline::Writes::Recorded);
    let runner = loader().runtime().runner(loaded.prepared, &loaded.described, services, metrics.clone(), &loaded.settings);
    Plugin { runner, recorder, metrics }
}

fn configmap_gvk() -> Gvk {
    Gvk::new("", "v1", "ConfigMap")
}

fn configmap(ns: &str, name: &str, mode: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}")},
        "data": {"mode": mode},
    })
    .to_string()
}

impl Plugin {
    async fn call(&self, mode: &str) -> Result<Action, CallError> {
        let object = configmap("default", mode, mode);
        self.runner.reconcile(Request { key: ObjectKey::new(Some("default"), mode), object: object.into(), retries: 0 }).await
    }

    async fn call_with(&self, data: serde_json::Value) -> Result<Action, CallError> {
        let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}, "data": data});
        self.runner.reconcile(Request { key: ObjectKey::new(Some("default"), "x"), object: object.to_string().into(), retries: 0 }).await
    }

    /// The calls served by the instance that answers (1 = a fresh instance).
    async fn instance_calls(&self) -> u64 {
        match self.call("count").await {
            Err(CallError::Plugin { message, .. }) => message.trim_start_matches("calls=").parse().unwrap(),
            other => panic!("count answered {other:?}"),
        }
    }

    /// Proves the plugin serves normally: a reconcile that applies a ConfigMap.
    async fn assert_serves(&self) {
        self.recorder.clear();
        assert_eq!(self.call("ok").await, Ok(Action::Done));
        let writes = self.recorder.writes();
        assert_eq!(writes.len(), 1, "one apply: {writes:?}");
        assert_eq!(writes[0].name, "ok-out");
        assert!(matches!(writes[0].op, WriteOp::Apply { force: true, .. }));
    }
}

/// Runs `fault` in one plugin while another keeps serving, then checks both serve afterwards
/// and the faulting instance was replaced.
async fn assert_contained(mode: &str) -> (CallError, Plugin) {
    let faulty = plugin("faulty-a").await;
    let bystander = plugin("faulty-b").await;
    assert_eq!(faulty.instance_calls().await, 1);
    assert_eq!(faulty.instance_calls().await, 2, "a healthy instance is reused");
    let (error, ()) = tokio::join!(faulty.call(mode), bystander.assert_serves());
    let error = error.expect_err("the fault is an error");
    bystander.assert_serves().await;
    assert_eq!(faulty.instance_calls().await, 1, "the faulting instance must be discarded");
    faulty.assert_serves().await;
    (error, faulty)
}

#[tokio::test]
async fn a_trap_is_reported_and_the_instance_discarded() {
    let (error, plugin) = assert_contained("trap").await;
    let CallError::Fault(Fault::Trap(message)) = &error else { panic!("expected a trap, got {error:?}") };
    assert!(message.contains("unreachable"), "a Rust panic traps with `unreachable`: {message}");
    assert_eq!(plugin.metrics.faults.trap.get(), 1);
}

/// Instances past a version's first reserve their memory limit in the plugin memory budget as
/// they are made and give it back when they go; when the budget has no room, a call waits for one
/// of the version's instances instead of failing or passing the budget (issue 26: fifty small
/// plugins must fit the default budget, so a version reserves only its first instance up front).
/// Three calls at once, each looping to its 500 ms deadline: with room for two more instances
/// none waits; with none, two wait and all three still end at their deadline, one at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_past_the_first_reserve_their_memory_and_wait_when_the_budget_is_full() {
    use kubewasm::budget::{MemoryBudget, Share};
    for (extra, expect_waits) in [(2, false), (0, true)] {
        let plugin = plugin_with("looper", "[kubewasm]\nmemory-mib = 16\n").await;
        let limit = plugin.runner.limits().memory_bytes;
        let budget = MemoryBudget::new(limit * (1 + extra), Share::WHOLE, Default::default());
        // What the version reserved for its first instance when it was admitted.
        let _first = budget.account("looper").reserve_first(limit).unwrap();
        let Plugin { runner, recorder, metrics } = plugin;
        let plugin = Plugin { runner: runner.with_budget(&budget), recorder, metrics };
        let calls = futures::future::join_all((0..3).map(|_| plugin.call("loop"))).await;
        for result in calls {
            assert!(matches!(result, Err(CallError::Fault(Fault::Deadline(_)))), "{result:?}");
        }
        let waits = plugin.metrics.budget_waits.get();
        assert_eq!(waits > 0, expect_waits, "{waits} calls waited with room for {extra} more instances");
        assert_eq!(budget.reserved(), limit, "every faulted instance gave its memory back");
        assert_eq!(plugin.metrics.instances.get(), 0);
    }
}

#[tokio::test]
async fn an_endless_loop_is_stopped_at_the_deadline() {
    let plugin = plugin("looper").await;
    let started = Instant::now();
    let error = plugin.call("loop").await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(error, CallError::Fault(Fault::Deadline(Duration::from_millis(500))), "the manifest asks for 500 ms");
    assert!(took >= Duration::from_millis(500) && took < Duration::from_secs(3), "stopped after {took:?}");
    assert_eq!(plugin.metrics.faults.deadline.get(), 1);
    let (error, _) = assert_contained("loop").await;
    assert!(matches!(error, CallError::Fault(Fault::Deadline(_))));
}

#[tokio::test]
async fn a_memory_bomb_is_denied_by_the_cap() {
    let (error, plugin) = assert_contained("memory-bomb").await;
    match error {
        CallError::Fault(Fault::Memory { limit, wanted }) => {
            assert_eq!(limit, 32 << 20, "the manifest asks for 32 MiB");
            assert!(wanted > limit);
        }
        other => panic!("expected a memory fault, got {other:?}"),
    }
    assert_eq!(plugin.metrics.faults.memory.get(), 1);
    assert!(plugin.metrics.memory_refusals.get() >= 1);
}

#[tokio::test]
async fn deep_recursion_traps_on_the_stack_limit() {
    let (error, _) = assert_contained("recursion").await;
    let CallError::Fault(Fault::Trap(message)) = &error else { panic!("expected a trap, got {error:?}") };
    assert!(message.contains("call stack exhausted"), "{message}");
}

#[tokio::test]
async fn oversized_results_are_refused() {
    // An SDK cuts an error message to the contract's 64 KiB before it leaves the guest: an
    // answer, not a fault (the host's own check, for guests without an SDK, is in the boundary
    // tests).
    let plugin = plugin("faulty-message").await;
    let error = plugin.call("oversized-error").await.unwrap_err();
    let CallError::Plugin { message, .. } = &error else { panic!("expected an error value, got {error:?}") };
    assert_eq!(message.len(), 64 * 1024);
    assert_eq!(plugin.metrics.faults.oversized.get(), 0);
    assert_eq!(plugin.instance_calls().await, 2, "an error value does not cost the instance");

    // Making 200 000 keys takes a while on a loaded machine (the host here is a debug build):
    // this plugin's deadline is roomy, so that the size is what refuses them.
    let plugin = plugin_with("faulty-keys", "[kubewasm]\ndeadline-ms = 20000\n").await;
    let object = configmap("default", "many", "oversized-keys");
    let error = plugin.runner.map_related(&configmap_gvk(), object.into(), |_| true).await.unwrap_err();
    let CallError::Fault(Fault::Oversized(message)) = &error else { panic!("expected oversized, got {error:?}") };
    assert!(message.contains("200000 keys"), "{message}");
    let keys = plugin.runner.map_related(&configmap_gvk(), configmap("default", "one", "ok").into(), |_| true).await.unwrap();
    assert_eq!(keys, vec![ObjectKey::new(Some("default"), "one-0")]);
    assert_eq!(plugin.metrics.faults.oversized.get(), 1);
}

/// Every argument over its bound, passed straight to the host (not through the SDK): an `invalid`
/// error value saying the size and the bound, and nothing reaches a backend (an 8 MiB Event name
/// is neither queued nor kept).
#[tokio::test]
async fn arguments_over_their_bounds_are_invalid() {
    let plugin = plugin("bounded").await;
    plugin.recorder.clear();
    let error = plugin.call("oversized-args").await.unwrap_err();
    let CallError::Plugin { message, .. } = &error else { panic!("expected the guest's report, got {error:?}") };
    let answers: Vec<&str> = message.lines().map(|l| l.trim_start_matches("ErrorCode::")).collect();
    assert_eq!(
        answers,
        [
            "Invalid: name is 254 bytes; at most 253",
            "Invalid: namespace is 64 bytes; at most 63",
            "Invalid: kind is 64 bytes; at most 63",
            "Invalid: group is 254 bytes; at most 253",
            "Invalid: label selector is 4097 bytes; at most 4096",
            "Invalid: object is 3145729 bytes; at most 3145728",
            "Invalid: patch body is 3145729 bytes; at most 3145728",
            "Invalid: name is 254 bytes; at most 253",
            "Invalid: name is 8388608 bytes; at most 253",
            "Invalid: event reason must not be empty",
            "Invalid: event reason is 129 bytes; at most 128",
            "Invalid: event note is 1025 bytes; at most 1024",
        ]
    );
    assert!(plugin.recorder.events().is_empty() && plugin.recorder.writes().is_empty(), "nothing over a bound reaches a backend");
    assert_eq!(plugin.instance_calls().await, 2, "an error value does not cost the instance");
}

/// A plugin written by hand (`kubewasm_tests::components`), loaded from `wasm`.
async fn load_component(name: &str, wasm: &[u8]) -> Result<LoadedPlugin, LoadError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.wasm"));
    std::fs::write(&path, wasm).unwrap();
    loader().load(&path).await
}

fn runner_of(loaded: LoadedPlugin) -> (PluginRunner, PluginMetrics) {
    let cache = FixtureCache::default();
    let recorder = Arc::new(Recorder::default());
    let metrics = PluginMetrics::default();
    let services = kubewasm::tools::offline::services(&cache, &recorder, kubewasm::tools::offline::Writes::Recorded);
    (loader().runtime().runner(loaded.prepared, &loaded.described, services, metrics.clone(), &loaded.settings), metrics)
}

/// `map-related` returning a million keys that all point at one 30 MiB name: the host stops
/// lifting them after a bounded amount (an `oversized` fault, not gigabytes copied); a key just
/// over its bound is refused too, and keys within the bounds are served.
#[tokio::test]
async fn map_related_keys_aliasing_one_buffer_are_oversized() {
    let manifest = components::Manifest::new("aliaser", "kubewasm.io/aliaser");
    let object = || configmap("default", "watched", "ok").into();
    for (keys, name_bytes, expected) in [(1_000_000, 30 << 20, "more than map-related may return"), (10, 254, "a key whose name is 254 bytes; at most 253")] {
        let loaded = load_component("aliaser", &components::map_related_alias(&manifest, keys, name_bytes)).await.expect("it loads");
        let (runner, metrics) = runner_of(loaded);
        let error = runner.map_related(&configmap_gvk(), object(), |_| true).await.unwrap_err();
        let CallError::Fault(Fault::Oversized(message)) = &error else { panic!("{keys} keys of {name_bytes} bytes: expected oversized, got {error:?}") };
        assert!(message.contains(expected), "{message}");
        assert_eq!(metrics.faults.oversized.get(), 1);
    }
    let (runner, _) = runner_of(load_component("aliaser", &components::map_related_alias(&manifest, 10, 253)).await.unwrap());
    let keys = runner.map_related(&configmap_gvk(), object(), |_| true).await.expect("keys within the bounds");
    assert_eq!(keys.len(), 10);
    assert_eq!(keys[0].name().len(), 253);
}

/// A manifest whose permission lists a hundred thousand namespaces, all pointing at one 1 MiB
/// buffer, is refused at load once its lift passes the largest valid manifest; namespaces within
/// that but over their bound are refused by name.
#[tokio::test]
async fn a_manifest_aliasing_one_buffer_is_refused_at_load() {
    let manifest = components::Manifest::new("aliased", "kubewasm.io/aliased");
    let err = load_component("aliased", &components::describe_alias(&manifest, 100_000, 1 << 20)).await.unwrap_err();
    let LoadError::Describe(DescribeError::Call(Fault::Oversized(message))) = &err else { panic!("expected oversized, got {err}") };
    assert!(message.contains("more than describe may return"), "{message}");
    let err = load_component("aliased", &components::describe_alias(&manifest, 3, 64)).await.unwrap_err();
    let LoadError::Describe(DescribeError::Manifest(e)) = &err else { panic!("expected an invalid manifest, got {err}") };
    assert_eq!(e.field, "permissions[0].namespaces", "{err}");
}

/// Beside the plugin, twenty core instances of a module with ten tables of a million function
/// references, each filled at instantiation: table space counts in the instance's memory limit,
/// so describing it is a memory fault after 64 MiB, not 1.6 GB. A component of more core
/// instances than any real plugin has is refused by count.
#[tokio::test]
async fn a_table_bomb_is_a_memory_fault() {
    let manifest = components::Manifest::new("bomb", "kubewasm.io/bomb");
    let err = load_component("bomb", &components::table_bomb(&manifest, 20, 10, 1_000_000)).await.unwrap_err();
    let LoadError::Describe(DescribeError::Call(Fault::Memory { limit, .. })) = &err else { panic!("expected a memory fault, got {err}") };
    assert_eq!(*limit, 64 << 20, "the default memory limit");
    let err = load_component("bomb", &components::table_bomb(&manifest, 100, 0, 0)).await.unwrap_err();
    assert!(err.to_string().contains("instance count too high"), "{err}");
    load_component("bomb", &components::table_bomb(&manifest, 10, 1, 1000)).await.expect("a few small tables are fine");
}

#[tokio::test]
async fn a_call_outside_the_manifest_is_forbidden_not_a_trap() {
    let plugin = plugin("nosy").await;
    let error = plugin.call("forbidden-read").await.unwrap_err();
    let CallError::Plugin { code, message } = &error else { panic!("expected an error value, got {error:?}") };
    assert_eq!(*code, GuestErrorCode::Forbidden);
    assert!(message.contains(r#"get Secret.v1 "anything" in namespace default is not granted"#), "{message}");
    assert_eq!(plugin.metrics.forbidden_calls.get(), 1);
    assert_eq!(plugin.instance_calls().await, 2, "an error value does not cost the instance");
    plugin.assert_serves().await;
}

#[tokio::test]
async fn the_sandbox_has_no_files_sockets_or_environment() {
    let plugin = plugin("escapee").await;
    let message = |result: Result<Action, CallError>| match result {
        Err(CallError::Plugin { message, .. }) => message,
        other => panic!("expected the guest's report, got {other:?}"),
    };

    let file = message(plugin.call("sandbox-file").await);
    assert!(file.starts_with("read /etc/hostname: Err("), "{file}");
    let dir = message(plugin.call("sandbox-dir").await);
    assert!(dir.starts_with("list /: Err("), "{dir}");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let socket = message(plugin.call_with(serde_json::json!({"mode": "sandbox-socket", "address": address})).await);
    assert!(socket.starts_with("connect: Err("), "{socket}");
    assert!(listener.accept().is_err(), "nothing may have connected");

    let env = message(plugin.call("sandbox-env").await);
    assert_eq!(env, "env: 0 vars, HOME=None, args: 0");
    plugin.assert_serves().await;
}

/// A user-facing error: one line.
fn one_line(err: impl std::fmt::Display) -> String {
    let text = err.to_string();
    assert!(!text.contains('\n'), "one line expected: {text}");
    text
}

#[tokio::test]
async fn broken_files_give_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let check = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let text = check("notes.wasm", b"this is not webassembly");
    let err = loader().load(&text).await.unwrap_err();
    assert!(matches!(err, LoadError::NotWebAssembly), "{err}");
    one_line(err);

    let core = check("core.wasm", b"\0asm\x01\0\0\0");
    let err = one_line(loader().load(&core).await.unwrap_err());
    assert!(err.contains("core WebAssembly module, not a component"), "{err}");

    let wasm = std::fs::read(faulty_wasm()).unwrap();
    let truncated = check("truncated.wasm", &wasm[..wasm.len() / 2]);
    let err = one_line(loader().load(&truncated).await.unwrap_err());
    assert!(err.starts_with("not a valid component: failed to parse WebAssembly"), "{err}");

    let other_world = guests::guest("wrong-world-guest", "wrong-world");
    let err = one_line(loader().load(&other_world).await.unwrap_err());
    assert!(err.contains("does not export kubewasm:controller/plugin: it exports wasi:cli/run@"), "{err}");
}

#[tokio::test]
async fn a_broken_describe_is_refused_at_load() {
    let err = load("bad", "describe = \"invalid-manifest\"").await.unwrap_err();
    let LoadError::Describe(DescribeError::Manifest(e)) = &err else { panic!("expected an invalid manifest, got {err}") };
    assert_eq!(e.field, "name");
    assert!(err.to_string().contains("\"Not_A_DNS_Label\" must be a DNS-1123 label"), "{err}");

    // `views.metadata-only`: counted before a kind is converted, each kind checked against the
    // manifest's watches.
    let err = one_line(load("flood", "describe = \"metadata-flood\"").await.unwrap_err());
    assert!(err.ends_with("manifest field `views.metadata-only`: 1001 entries; at most 1000"), "{err}");
    let err = one_line(load("unwatched", "describe = \"metadata-unwatched\"").await.unwrap_err());
    assert!(err.contains("`views.metadata-only[0]`: Secret.v1 is neither an `owns` kind nor the kind of a `watches` entry"), "{err}");

    // `projections.fields`: paths counted and measured before they are converted, each kind
    // checked against the manifest.
    let err = one_line(load("fields-flood", "describe = \"fields-flood\"").await.unwrap_err());
    assert!(err.ends_with("manifest field `projections.fields[0].fields`: 65 paths; at most 64"), "{err}");
    let err = one_line(load("fields-deep", "describe = \"fields-deep\"").await.unwrap_err());
    assert!(err.ends_with("manifest field `projections.fields[0].fields[0]`: 9 field names; 1 to 8"), "{err}");
    let err = one_line(load("fields-unwatched", "describe = \"fields-unwatched\"").await.unwrap_err());
    assert!(err.contains("`projections.fields[0]`: Secret.v1 is neither the primary kind, an `owns` kind nor the kind of a `watches` entry"), "{err}");

    let err = load("trapper", "describe = \"trap\"").await.unwrap_err();
    assert!(matches!(err, LoadError::Describe(DescribeError::Call(Fault::Trap(_)))), "{err}");
    assert_eq!(err.to_string(), "describe failed: trapped: wasm trap: wasm `unreachable` instruction executed");

    let err = one_line(load("refuser", "describe = \"refuse\"").await.unwrap_err());
    assert_eq!(err, "describe refused the settings: setting `describe` is \"refuse\"");

    let err = one_line(load("typo", "name = 42").await.unwrap_err());
    assert!(err.starts_with("describe refused the settings: settings: invalid type"), "{err}");
}

/// A second plugin from the same module shares the first one's compiled code while the first
/// is loaded; a restart (a new loader) finds the code in the artifact cache.
#[tokio::test]
async fn plugins_from_one_module_share_its_code_and_a_restart_compiles_nothing() {
    use kubewasm::plugin::artifact::Origin;
    let cache = tempfile::tempdir().unwrap();
    let new_loader = || loader_with_cache(cache.path());
    let dir = tempfile::tempdir().unwrap();
    let a = guests::install(&faulty_wasm(), dir.path(), "a", Some(""));
    let b = guests::install(&faulty_wasm(), dir.path(), "b", Some("describe = \"ok\""));
    let loader = new_loader();
    let first = loader.load(&a).await.unwrap();
    assert_eq!(first.origin, Origin::Compiled);
    let second = loader.load(&b).await.unwrap();
    assert_eq!((second.digest, second.origin), (first.digest, Origin::Shared), "same module, other settings: shared code");
    drop((first, second));
    assert_eq!(loader.load(&a).await.unwrap().origin, Origin::Cache, "nobody holds the code any more: from the artifact cache");
    assert_eq!(new_loader().load(&a).await.unwrap().origin, Origin::Cache, "a restart compiles nothing");
}

/// A corrupt, truncated or unverifiable artifact cache entry is recompiled, never mapped, and the
/// fresh entry then serves the next start.
#[tokio::test]
async fn a_damaged_artifact_is_recompiled_never_loaded() {
    use kubewasm::plugin::artifact::Origin;
    let cache = tempfile::tempdir().unwrap();
    let new_loader = || loader_with_cache(cache.path());
    let dir = tempfile::tempdir().unwrap();
    let plugin = guests::install(&faulty_wasm(), dir.path(), "a", Some(""));
    assert_eq!(new_loader().load(&plugin).await.unwrap().origin, Origin::Compiled);
    let entry = |extension: &str| {
        std::fs::read_dir(cache.path()).unwrap().map(|e| e.unwrap().path()).find(|p| p.to_string_lossy().ends_with(extension)).expect("a cache entry")
    };
    let (artifact, checksum) = (entry(".cwasm"), entry(".cwasm.sha256"));
    type Damage<'a> = (&'static str, Box<dyn Fn() + 'a>);
    let damages: [Damage; 3] = [
        (
            "a flipped byte",
            Box::new(|| {
                let mut bytes = std::fs::read(&artifact).unwrap();
                let middle = bytes.len() / 2;
                bytes[middle] ^= 0xff;
                std::fs::write(&artifact, bytes).unwrap();
            }),
        ),
        (
            "a truncated file",
            Box::new(|| {
                let bytes = std::fs::read(&artifact).unwrap();
                std::fs::write(&artifact, &bytes[..bytes.len() / 3]).unwrap();
            }),
        ),
        ("no checksum", Box::new(|| std::fs::remove_file(&checksum).unwrap())),
    ];
    for (damage, apply) in damages {
        assert_eq!(new_loader().load(&plugin).await.unwrap().origin, Origin::Cache, "before {damage}: from the cache");
        apply();
        let loaded = new_loader().load(&plugin).await.unwrap_or_else(|e| panic!("with {damage}: {e}"));
        assert_eq!(loaded.origin, Origin::Compiled, "with {damage}: recompiled");
    }
    assert_eq!(new_loader().load(&plugin).await.unwrap().origin, Origin::Cache, "the recompiled entry serves again");
}

/// Contract 0.1.1 added exports; a plugin built for 0.1.0 (without them) still loads, describes
/// itself and reconciles, and simply gets no `released` call.
#[tokio::test]
async fn a_plugin_built_for_contract_0_1_0_still_loads_and_reconciles() {
    let dir = tempfile::tempdir().unwrap();
    let path = guests::install(&guests::guest("legacy-guest", "legacy_guest"), dir.path(), "legacy", None);
    let loaded = loader().load(&path).await.expect("a 0.1.0 plugin loads in a 0.1.3 host");
    assert_eq!(loaded.described.manifest.name, "legacy");
    assert!(!loaded.prepared.releases(), "no release export in 0.1.0");
    assert!(loaded.described.manifest.metadata_only.is_empty(), "no views export in 0.1.0: every kind handed whole");
    let mut cache = FixtureCache::default();
    cache.insert(&configmap_gvk(), &configmap("default", "p", "ok")).unwrap();
    let recorder = Arc::new(Recorder::default());
    let services = kubewasm::tools::offline::services(&cache, &recorder, kubewasm::tools::offline::Writes::Recorded);
    let runner = loader().runtime().runner(loaded.prepared, &loaded.described, services, PluginMetrics::default(), &loaded.settings);
    let request = || Request { key: ObjectKey::new(Some("default"), "p"), object: configmap("default", "p", "ok").into(), retries: 0 };
    assert_eq!(runner.reconcile(request()).await, Ok(Action::Done));
    assert_eq!(recorder.writes()[0].name, "p.legacy");
    assert_eq!(runner.released(request()).await, Ok(None), "released is a no-op for a 0.1.0 plugin");
}

/// A host compiles in a process of its own: one over its memory limit or its deadline is stopped
/// and refused with the flag named; one within them stores its artifact in the cache, which the
/// host maps (and a restart finds).
#[tokio::test]
async fn compiles_run_in_a_child_process_bounded_in_memory_and_time() {
    use kubewasm::plugin::artifact::Origin;
    use kubewasm::plugin::compiler::{ChildCompiler, CompileError};
    let program = kubewasm_tests::kubewasm_binary().expect("the kubewasm binary");
    let cache = tempfile::tempdir().unwrap();
    let compiling = |memory_bytes, timeout| loader_with_cache(cache.path()).with_compiler(ChildCompiler { program: program.clone(), memory_bytes, timeout });
    let dir = tempfile::tempdir().unwrap();
    let plugin = guests::install(&faulty_wasm(), dir.path(), "a", Some(""));

    let err = compiling(8 << 20, Duration::from_secs(300)).load(&plugin).await.unwrap_err();
    assert!(matches!(err, LoadError::Compile(CompileError::Memory(_))), "{err}");
    assert!(err.to_string().contains("--compile-memory"), "{err}");
    let err = compiling(1 << 30, Duration::from_millis(1)).load(&plugin).await.unwrap_err();
    assert!(matches!(err, LoadError::Compile(CompileError::Timeout(_))), "{err}");
    assert_eq!(std::fs::read_dir(cache.path()).map_or(0, |d| d.count()), 0, "nothing stored by the stopped compiles");

    let loaded = compiling(1 << 30, Duration::from_secs(300)).load(&plugin).await.expect("compiled in a child");
    assert_eq!(loaded.origin, Origin::Compiled);
    assert_eq!(loader_with_cache(cache.path()).load(&plugin).await.unwrap().origin, Origin::Cache, "the child's artifact serves a restart");

    let broken = dir.path().join("broken.wasm");
    let wasm = std::fs::read(faulty_wasm()).unwrap();
    std::fs::write(&broken, &wasm[..wasm.len() / 2]).unwrap();
    let err = one_line(compiling(1 << 30, Duration::from_secs(300)).load(&broken).await.unwrap_err());
    assert!(err.starts_with("not a valid component: failed to parse WebAssembly"), "the child's own error: {err}");
}

/// A loader with a fresh runtime and the artifact cache in `dir`: what a host (re)start makes.
fn loader_with_cache(dir: &std::path::Path) -> Loader {
    Loader::new(Arc::new(Runtime::new(RuntimeConfig::default()).unwrap()), Some(ArtifactCache::new(dir)), LimitPolicy::default())
}
