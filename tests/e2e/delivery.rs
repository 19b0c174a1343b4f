//! End-to-end tests of cluster delivery (issue 11): plugins pushed with `kubewasm push` to a
//! real OCI registry (go-containerregistry's on loopback; push and pull also against the CNCF
//! distribution registry) and run by a host from Plugin
//! resources on the local control plane; pulls that fail in every way a registry can fail.
//!
//! `cargo test -p kubewasm-tests --test delivery`

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kubewasm_tests::build::{Tool, go_tool};
use kubewasm_tests::crd::install_plugin_crd;
use kubewasm_tests::plugindir::e2e_variant;
use kubewasm_tests::proxy::{FaultProxy, Mode};
use kubewasm_tests::registry::Registry;
use kubewasm_tests::{ControlPlane, E2eSettings, Host, HostConfig, TestNamespace, eventually, kubewasm_binary};
use serde_json::json;
use sha2::{Digest, Sha256};
use support::*;

const READY: Duration = Duration::from_secs(60);

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// `kubewasm push` of the e2e guest's `variant` to `reference`; returns the module's digest.
/// (Async: the registry may sit behind a proxy served by this test's runtime.)
async fn push(variant: &str, reference: &str) -> Result<String> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("e2e.wasm");
    let wasm = e2e_variant(variant);
    std::fs::write(&file, &wasm)?;
    let out = tokio::process::Command::new(kubewasm_binary()?)
        .args(["push", &file.display().to_string(), reference])
        .arg(format!("--cache-dir={}", dir.path().join("cache").display()))
        .output()
        .await?;
    ensure!(out.status.success(), "kubewasm push failed: {}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    ensure!(said.contains(&format!("to {reference}")) && said.contains("(sha256:"), "push says where it pushed and the digest: {said}");
    Ok(sha256(&wasm))
}

/// `kubewasm pull REFERENCE -o DIR` into a fresh directory (and cache): the pulled bytes, or
/// what the command said when it failed.
async fn pull(reference: &str) -> Result<std::result::Result<Vec<u8>, String>> {
    let dir = tempfile::tempdir()?;
    let out = tokio::process::Command::new(kubewasm_binary()?)
        .args(["pull", reference, "-o", &dir.path().display().to_string()])
        .arg(format!("--cache-dir={}", dir.path().join("cache").display()))
        .output()
        .await?;
    if !out.status.success() {
        return Ok(Err(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    Ok(Ok(std::fs::read(dir.path().join("e2e.wasm"))?))
}

/// The guest's settings, as a Plugin's `spec.settings`.
fn settings(settings: &E2eSettings) -> serde_json::Value {
    toml::from_str(&settings.to_toml()).expect("the guest's settings are TOML")
}

fn plugin(name: &str, module: &str, settings_: &E2eSettings) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kubewasm.io/v1alpha1",
        "kind": "Plugin",
        "metadata": {"name": name},
        "spec": {"module": module, "settings": settings(settings_), "pollInterval": "2s"},
    }))
    .expect("a Plugin")
}

async fn set_spec(plugins: &Api<DynamicObject>, name: &str, spec: serde_json::Value) -> Result<()> {
    plugins.patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": spec}))).await?;
    Ok(())
}

/// Waits until the Plugin's Ready condition has `status` and `reason` (and its status the
/// generation it was given); returns its status.
async fn wait_ready(plugins: &Api<DynamicObject>, name: &str, status: &str, reason: &str) -> Result<serde_json::Value> {
    eventually(&format!("Plugin {name} Ready={status} ({reason})"), CONVERGE, || async {
        let object = plugins.get(name).await?;
        let have = object.data["status"].clone();
        let ready = have["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Ready")).cloned().unwrap_or_default();
        let current = have["observedGeneration"] == json!(object.metadata.generation);
        if ready["status"] == status && ready["reason"] == reason && current { Ok(have) } else { Err(anyhow!("status so far: {have}")) }
    })
    .await
    .map_err(Into::into)
}

struct Setup {
    ns: TestNamespace,
    plugins: Api<DynamicObject>,
    cms: Api<ConfigMap>,
    host: Host,
}

async fn setup(cp: &ControlPlane, name: &str) -> Result<Setup> {
    let resource: ApiResource = install_plugin_crd(&cp.client().await?).await?;
    let ns = cp.namespace(name).await?;
    let plugins: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &resource);
    let cms: Api<ConfigMap> = ns.api();
    let config = HostConfig::resources(name, ns.name(), cp.kubeconfig_path()).namespace(ns.name()).status_configmap(ns.name(), STATUS);
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    Ok(Setup { ns, plugins, cms, host })
}

/// push → Plugin → pulled, loaded and reconciling; `kubectl get plugins` shows it Ready with
/// its digest. A settings change is a hot swap; a new digest behind the tag is picked up on the
/// next poll; deleting the Plugin stops its controller.
#[tokio::test]
async fn a_pushed_plugin_runs_from_its_resource_and_follows_it() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let registry = Registry::start()?;
    let Setup { ns, plugins, cms, mut host } = setup(cp, "delivery-run").await?;
    let reference = format!("{}/team/e2e:1", registry.host());
    let v01 = push("v01", &reference).await?;
    let pulled = pull(&reference).await?.map_err(|e| anyhow!("kubewasm pull: {e}"))?;
    ensure!(sha256(&pulled) == v01, "kubewasm pull gives back the pushed module");

    plugins.create(&PostParams::default(), &plugin("deliv", &reference, &E2eSettings::new("deliv").host("first"))).await?;
    let status = wait_ready(&plugins, "deliv", "True", "Running").await?;
    ensure!(status["digest"] == v01.as_str(), "the status names the module's digest {v01}: {status}");
    ensure!(status["version"].is_string() && status["lastError"] == "", "{status}");
    let mut inputs = BTreeMap::from([("a".to_string(), "1".to_string()), ("b".to_string(), "1".to_string())]);
    create_primaries(&cms, &inputs).await?;
    wait_outputs(&cms, "deliv", &inputs, Want { variant: Some("v01"), host: Some("first") }).await?;

    let table = cp.kubectl()?.run(&["get", "plugins", "-n", ns.name()]).await?;
    let row = table.lines().find(|l| l.starts_with("deliv ")).with_context(|| format!("kubectl get plugins lists deliv:\n{table}"))?;
    for column in ["NAME", "VERSION", "DIGEST", "READY", "AGE"] {
        ensure!(table.lines().next().is_some_and(|h| h.contains(column)), "column {column} in:\n{table}");
    }
    ensure!(row.contains(&v01) && row.contains("True") && row.contains("Running"), "the row shows digest, Ready and reason: {row}");

    // Settings change: a hot swap to the same module with new settings.
    set_spec(&plugins, "deliv", json!({"settings": settings(&E2eSettings::new("deliv").host("second"))})).await?;
    host.wait_metric("kubewasm_plugin_reloads_total", &[("plugin", "deliv"), ("result", "reloaded")], CONVERGE, |v| v >= 1.0).await?;
    wait_ready(&plugins, "deliv", "True", "Running").await?;
    inputs.insert("a".into(), "2".into());
    set_input(&cms, "a", "2").await?;
    wait_outputs(&cms, "deliv", &BTreeMap::from([("a".to_string(), "2".to_string())]), Want { variant: Some("v01"), host: Some("second") }).await?;

    // A new digest behind the same tag: picked up on the next poll (2 s).
    let v02 = push("v02", &reference).await?;
    eventually("the new digest to run", CONVERGE, || async {
        let status = plugins.get("deliv").await?.data["status"].clone();
        if status["digest"] == v02.as_str() { Ok::<_, anyhow::Error>(()) } else { Err(anyhow!("{status}")) }
    })
    .await?;
    inputs.insert("b".into(), "2".into());
    set_input(&cms, "b", "2").await?;
    wait_outputs(&cms, "deliv", &inputs, Want { variant: Some("v02"), host: Some("second") }).await?;

    // Deleted: the controller stops (no output follows a change) and leaves the status listing.
    plugins.delete("deliv", &DeleteParams::default()).await?;
    host.wait_metric("kubewasm_plugin_reloads_total", &[("plugin", "deliv"), ("result", "unloaded")], CONVERGE, |v| v == 1.0).await?;
    set_input(&cms, "a", "3").await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let out = output(&cms, "a", "deliv").await?.unwrap_or_default();
    ensure!(out.get("input").map(String::as_str) == Some("2"), "a stopped plugin reconciles nothing: {out:?}");
    let listing = cms.get(STATUS).await?.data.unwrap_or_default();
    ensure!(!listing.contains_key("deliv"), "the status ConfigMap no longer lists it: {listing:?}");
    host.stop().await?;
    Ok(())
}

/// A Plugin's `spec.candidate` runs in the shadow of its module: its writes are dry runs (the
/// outputs stay the live version's), the Plugin's status and `kubewasm rollout status` show how
/// it compares, and `kubewasm rollout promote NAME --resource NS` makes it the module.
#[tokio::test]
async fn a_plugin_candidate_runs_in_the_shadow_until_its_owner_promotes_it() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let registry = Registry::start()?;
    let Setup { ns, plugins, cms, mut host } = setup(cp, "delivery-shadow").await?;
    let (live_ref, candidate_ref) = (format!("{}/team/shad:1", registry.host()), format!("{}/team/shad:2", registry.host()));
    let v01 = push("v01", &live_ref).await?;
    let v02 = push("v02", &candidate_ref).await?;
    plugins.create(&PostParams::default(), &plugin("shad", &live_ref, &E2eSettings::new("shad"))).await?;
    wait_ready(&plugins, "shad", "True", "Running").await?;
    let inputs = BTreeMap::from([("a".to_string(), "1".to_string()), ("b".to_string(), "1".to_string())]);
    create_primaries(&cms, &inputs).await?;
    wait_outputs(&cms, "shad", &inputs, Want { variant: Some("v01"), ..Want::default() }).await?;

    // v02 stamps its variant into the outputs: it differs from v01 on every key.
    set_spec(&plugins, "shad", json!({"candidate": candidate_ref})).await?;
    host.wait_metric("kubewasm_plugin_reloads_total", &[("plugin", "shad"), ("result", "candidate")], CONVERGE, |v| v == 1.0).await?;
    let changed = BTreeMap::from([("a".to_string(), "2".to_string()), ("b".to_string(), "2".to_string())]);
    for (name, input) in &changed {
        set_input(&cms, name, input).await?;
    }
    wait_outputs(&cms, "shad", &changed, Want { variant: Some("v01"), ..Want::default() }).await?;
    let candidate = eventually("status.candidate to show two differing reconciles", CONVERGE, || async {
        let candidate = plugins.get("shad").await?.data["status"]["candidate"].clone();
        let shadow = candidate["shadow"].as_str().unwrap_or_default().to_string();
        if shadow.contains("differs:2") || shadow.contains("differs:3") || shadow.contains("differs:4") { Ok(candidate) } else { Err(anyhow!("{candidate}")) }
    })
    .await?;
    ensure!(candidate["digest"] == v02.as_str() && candidate["agreed"] == false && candidate["module"] == candidate_ref.as_str(), "{candidate}");
    let status_args =
        ["rollout", "status", "shad", "--status-configmap", &format!("{}/{STATUS}", ns.name()), "--kubeconfig", &cp.kubeconfig_path().display().to_string()];
    // The status ConfigMap is rewritten within 5 s of a change.
    eventually("rollout status to show the diff", CONVERGE, || async {
        let out = tokio::process::Command::new(kubewasm_binary()?).args(status_args).output().await?;
        let report = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        if out.status.success() && report.contains("-      variant: v01") && report.contains("+      variant: v02") { Ok(()) } else { Err(anyhow!("{report}")) }
    })
    .await?;
    ensure!(output(&cms, "a", "shad").await?.unwrap_or_default().get("variant").map(String::as_str) == Some("v01"), "nothing the candidate did is stored");

    // The owner promotes it: the module becomes the candidate, which goes.
    let promote = ["rollout", "promote", "shad", "--resource", ns.name(), "--kubeconfig", &cp.kubeconfig_path().display().to_string()];
    let out = tokio::process::Command::new(kubewasm_binary()?).args(promote).output().await?;
    ensure!(out.status.success(), "kubewasm rollout promote: {}", String::from_utf8_lossy(&out.stderr));
    let spec = plugins.get("shad").await?.data["spec"].clone();
    ensure!(spec["module"] == candidate_ref.as_str() && spec.get("candidate").is_none(), "{spec}");
    host.wait_metric("kubewasm_plugin_reloads_total", &[("plugin", "shad"), ("result", "promoted")], CONVERGE, |v| v == 1.0).await?;
    eventually("the status to show v02 and no candidate", CONVERGE, || async {
        let status = plugins.get("shad").await?.data["status"].clone();
        if status["digest"] == v02.as_str() && status.get("candidate").is_none() { Ok::<_, anyhow::Error>(()) } else { Err(anyhow!("{status}")) }
    })
    .await?;
    set_input(&cms, "a", "3").await?;
    wait_outputs(&cms, "shad", &BTreeMap::from([("a".to_string(), "3".to_string())]), Want { variant: Some("v02"), ..Want::default() }).await?;
    ensure!(v01 != v02);
    host.stop().await?;
    Ok(())
}

/// A Plugin whose new module is rolled back (it traps on most objects the module before handled)
/// says so in its status: `Ready=False`, reason `RolledBack`, naming both digests, while the
/// module before serves; a fixed module is loaded as usual.
#[tokio::test]
async fn a_rolled_back_module_shows_in_the_plugins_status() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let registry = Registry::start()?;
    let Setup { ns: _ns, plugins, cms, mut host } = setup(cp, "delivery-rollback").await?;
    let reference = format!("{}/team/wobbly", registry.host());
    let v01 = push("v01", &format!("{reference}:1")).await?;
    let v02 = push("v02", &format!("{reference}:2")).await?;
    let v03 = push("v03", &format!("{reference}:3")).await?;
    let tag = |n: u32| format!("{reference}:{n}");
    plugins.create(&PostParams::default(), &plugin("wobbly", &tag(1), &E2eSettings::new("wobbly"))).await?;
    wait_ready(&plugins, "wobbly", "True", "Running").await?;
    let inputs = create_trapping_primaries(&cms, 10, 6, "v02").await?;
    wait_outputs(&cms, "wobbly", &inputs, Want { variant: Some("v01"), ..Want::default() }).await?;

    set_spec(&plugins, "wobbly", json!({"module": tag(2)})).await?;
    host.wait_metric("kubewasm_plugin_rollbacks_total", &[("plugin", "wobbly")], CONVERGE, |n| n == 1.0).await.context("v02 must be rolled back")?;
    let status = wait_ready(&plugins, "wobbly", "False", "RolledBack").await?;
    let message = status["conditions"][0]["message"].as_str().unwrap_or_default();
    ensure!(message.contains(&v02) && status["digest"] == v01.as_str(), "the status names the rolled-back module and what runs: {status}");

    set_spec(&plugins, "wobbly", json!({"module": tag(3)})).await?;
    let status = wait_ready(&plugins, "wobbly", "True", "Running").await?;
    ensure!(status["digest"] == v03.as_str(), "{status}");
    host.stop().await?;
    Ok(())
}

/// Every way a pull can fail — a reference without a registry, a tag that isn't there, an
/// image that isn't a Wasm artifact, a blob that doesn't match its digest, a registry that is
/// down — gives `Ready=False` with its reason and an Event, while the version already running
/// keeps serving; once the registry behaves, the Plugin recovers.
/// `kubewasm push` to a registry that answers a finished blob upload without the `Location`
/// header the distribution spec asks for (as `crane registry serve` does): the push goes
/// through, and the module pulls back whole. No cluster needed.
#[tokio::test]
async fn push_takes_a_finished_blob_upload_without_a_location() -> Result<()> {
    let registry = Registry::start()?;
    registry.omit_location(true)?;
    let reference = format!("{}/team/e2e:no-location", registry.host());
    let digest = push("v01", &reference).await?;
    let pulled = pull(&reference).await?.map_err(|e| anyhow!("kubewasm pull after the push: {e}"))?;
    ensure!(sha256(&pulled) == digest, "pulled {} rather than the pushed {digest}", sha256(&pulled));
    Ok(())
}

/// `kubewasm push` and `pull` against the CNCF distribution registry (registry:2, what most
/// hosted registries build on), as against go-containerregistry's in the other tests.
#[tokio::test]
async fn push_and_pull_through_the_distribution_registry() -> Result<()> {
    let registry = tokio::task::spawn_blocking(Registry::start_distribution).await??;
    let reference = format!("{}/team/e2e:1", registry.host());
    let digest = push("v01", &reference).await?;
    let pulled = pull(&reference).await?.map_err(|e| anyhow!("kubewasm pull after the push: {e}"))?;
    ensure!(sha256(&pulled) == digest, "pulled {} rather than the pushed {digest}", sha256(&pulled));
    Ok(())
}

#[tokio::test]
async fn failed_pulls_keep_the_running_version_and_recover() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let registry = Registry::start()?;
    let proxy = FaultProxy::start(registry.addr()).await?;
    let Setup { ns, plugins, cms, host } = setup(cp, "delivery-faults").await?;
    let client = cp.client().await?;
    // Reached through the proxy, so that the registry can go down.
    let reference = format!("{}/team/e2e:1", proxy.addr());
    let v01 = push("v01", &reference).await?;
    plugins.create(&PostParams::default(), &plugin("faulty", &reference, &E2eSettings::new("faulty"))).await?;
    wait_ready(&plugins, "faulty", "True", "Running").await?;
    create_primaries(&cms, &BTreeMap::from([("p".to_string(), "0".to_string())])).await?;
    let mut round = 0;
    let mut still_serving = async |what: &str| -> Result<()> {
        round += 1;
        let input = round.to_string();
        set_input(&cms, "p", &input).await?;
        wait_outputs(&cms, "faulty", &BTreeMap::from([("p".to_string(), input)]), Want { variant: Some("v01"), ..Want::default() })
            .await
            .with_context(|| format!("v01 keeps serving after {what}"))
    };

    let cases: [(&str, String, &str, &str); 3] = [
        ("a reference without a registry", "team/e2e:1".into(), "BadReference", "name the registry"),
        ("a missing tag", format!("{}/team/e2e:nope", proxy.addr()), "NotFound", "e2e:nope"),
        ("an image that is not a Wasm artifact", not_wasm(&registry)?, "WrongMediaType", "not a Wasm artifact"),
    ];
    for (what, module, reason, needle) in cases {
        set_spec(&plugins, "faulty", json!({"module": module})).await?;
        let status = wait_ready(&plugins, "faulty", "False", reason).await.with_context(|| what.to_string())?;
        ensure!(status["lastError"].as_str().is_some_and(|e| e.contains(needle)), "{what}: lastError names the problem: {status}");
        ensure!(status["digest"] == v01.as_str(), "{what}: the status still names the running digest: {status}");
        wait_event(&client, ns.name(), "faulty", reason, needle).await?;
        still_serving(what).await?;
    }

    // A registry that serves corrupted blobs: the new digest behind the tag is refused.
    set_spec(&plugins, "faulty", json!({"module": reference})).await?;
    wait_ready(&plugins, "faulty", "True", "Running").await?;
    registry.tamper(true)?;
    let v03 = push("v03", &reference).await?;
    let refused = pull(&reference).await?.err().context("kubewasm pull of a corrupted blob must fail")?;
    ensure!(refused.contains("Digest") && refused.lines().count() == 1, "one line naming the digest check: {refused}");
    wait_ready(&plugins, "faulty", "False", "DigestMismatch").await?;
    wait_event(&client, ns.name(), "faulty", "DigestMismatch", "").await?;
    still_serving("a corrupted blob").await?;
    registry.tamper(false)?;
    let status = wait_ready(&plugins, "faulty", "True", "Running").await?;
    ensure!(status["digest"] == v03.as_str(), "recovered onto the new digest: {status}");

    // The registry goes down: the tag cannot be resolved; back up, it recovers.
    proxy.set(Mode::Reset);
    wait_ready(&plugins, "faulty", "False", "RegistryUnreachable").await?;
    proxy.set(Mode::Pass);
    wait_ready(&plugins, "faulty", "True", "Running").await?;
    ensure!(host.metric("kubewasm_plugin_faults_total", &[("plugin", "faulty")]).await? == 0.0, "no plugin fault along the way");
    host.stop().await?;
    Ok(())
}

/// Pushes an ordinary container image (crane, from scratch) and returns its reference: an OCI
/// artifact, but not a Wasm one.
fn not_wasm(registry: &Registry) -> Result<String> {
    let dir = tempfile::tempdir()?;
    let layer = dir.path().join("layer.tar");
    tar_with_one_file(&layer)?;
    let reference = format!("{}/team/not-wasm:1", registry.host());
    let out = Command::new(go_tool(Tool::Crane)?)
        .args(["append", "--insecure", "--oci-empty-base", "-f", &layer.display().to_string(), "-t", &reference])
        .output()?;
    ensure!(out.status.success(), "crane append: {}", String::from_utf8_lossy(&out.stderr));
    Ok(reference)
}

/// A tar archive holding one small file, written by hand (ustar header + data + end blocks).
fn tar_with_one_file(path: &Path) -> Result<()> {
    let data = b"not a plugin\n";
    let mut header = [0u8; 512];
    header[..5].copy_from_slice(b"hello");
    header[100..108].copy_from_slice(b"0000644\0");
    header[108..116].copy_from_slice(b"0000000\0");
    header[116..124].copy_from_slice(b"0000000\0");
    header[124..136].copy_from_slice(format!("{:011o}\0", data.len()).as_bytes());
    header[136..148].copy_from_slice(b"00000000000\0");
    header[156] = b'0';
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    header[148..156].copy_from_slice(b"        ");
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let mut tar = header.to_vec();
    tar.extend_from_slice(data);
    tar.resize(512 + 512, 0);
    tar.extend_from_slice(&[0u8; 1024]);
    std::fs::write(path, tar)?;
    Ok(())
}

/// The host's peak resident memory so far (`VmHWM`), in bytes.
fn peak_rss(host: &Host) -> Result<u64> {
    let pid = host.pid().context("the host runs")?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: u64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).context("VmHWM")?;
    Ok(kib << 10)
}

/// Waits (at most `within`) until the Plugin's Ready condition has `reason`; returns its status.
async fn wait_reason(plugins: &Api<DynamicObject>, name: &str, reason: &str, within: Duration) -> Result<serde_json::Value> {
    eventually(&format!("Plugin {name} Ready=False ({reason})"), within, || async {
        let have = plugins.get(name).await?.data["status"].clone();
        if have["conditions"][0]["reason"] == reason { Ok(have) } else { Err(anyhow!("status so far: {have}")) }
    })
    .await
    .map_err(Into::into)
}

/// A registry that plays the attacker (C3, M11): an endless module, a module larger than its
/// manifest declares, a multi-GB manifest, a manifest trickled a byte every 29 s, a module
/// redirected to the host's own `/readyz`, and 404 pages carrying a marker. Each Plugin fails with
/// a reason that names what happened and no response text; host memory stays bounded; and a
/// well-behaved Plugin beside them keeps being updated meanwhile.
#[tokio::test]
async fn a_hostile_registry_neither_exhausts_nor_stalls_the_host() -> Result<()> {
    use kubewasm_tests::hostile_registry::{HostileRegistry, MARKER};
    let cp = ControlPlane::shared().await;
    let registry = Registry::start()?;
    let hostile = HostileRegistry::start(8 << 20).await?;
    let resource: ApiResource = install_plugin_crd(&cp.client().await?).await?;
    let ns = cp.namespace("delivery-hostile").await?;
    let plugins: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &resource);
    let cms: Api<ConfigMap> = ns.api();
    let config = HostConfig::resources("delivery-hostile", ns.name(), cp.kubeconfig_path())
        .namespace(ns.name())
        .status_configmap(ns.name(), STATUS)
        .arg("--pull-timeout=20s")
        .arg("--max-module-bytes=8Mi");
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    let client = cp.client().await?;

    let steady = format!("{}/team/e2e:1", registry.host());
    push("v01", &steady).await?;
    plugins.create(&PostParams::default(), &plugin("steady", &steady, &E2eSettings::new("steady").host("first"))).await?;
    wait_ready(&plugins, "steady", "True", "Running").await?;
    create_primaries(&cms, &BTreeMap::from([("p".to_string(), "0".to_string())])).await?;
    wait_outputs(&cms, "steady", &BTreeMap::from([("p".to_string(), "0".to_string())]), Want { host: Some("first"), ..Want::default() }).await?;
    let baseline = peak_rss(&host)?;

    hostile.redirect_to(&format!("http://{}/readyz?x", host.health_addr()));
    let attacks = [
        ("endless", "TooLarge"),
        ("larger", "TooLarge"),
        ("huge-manifest", "TooLarge"),
        ("trickle", "PullTimeout"),
        ("redirect", "DigestMismatch"),
        ("not-found", "NotFound"),
        ("missing", "NotFound"),
    ];
    let started = std::time::Instant::now();
    for (name, _) in attacks {
        plugins.create(&PostParams::default(), &plugin(name, &format!("{}/team/{name}:1", hostile.host()), &E2eSettings::new(name))).await?;
    }
    // Meanwhile the steady Plugin is updated, and its update runs within seconds.
    set_spec(&plugins, "steady", json!({"settings": settings(&E2eSettings::new("steady").host("second"))})).await?;
    host.wait_metric("kubewasm_plugin_reloads_total", &[("plugin", "steady"), ("result", "reloaded")], Duration::from_secs(15), |v| v >= 1.0)
        .await
        .context("the steady Plugin's update must not wait for the hostile registry")?;
    let updated = started.elapsed();
    set_input(&cms, "p", "1").await?;
    wait_outputs_within(
        &cms,
        "steady",
        &BTreeMap::from([("p".to_string(), "1".to_string())]),
        Want { host: Some("second"), ..Want::default() },
        Duration::from_secs(15),
    )
    .await?;

    for (name, reason) in attacks {
        let status = wait_reason(&plugins, name, reason, CONVERGE).await?;
        let last_error = status["lastError"].as_str().unwrap_or_default();
        eprintln!("{name}: {reason} after {:?}: {last_error}", started.elapsed());
        ensure!(!last_error.contains(MARKER) && !last_error.contains("<html"), "{name}: no response body in lastError: {last_error}");
    }
    let trickle = plugins.get("trickle").await?.data["status"]["lastError"].as_str().unwrap_or_default().to_string();
    ensure!(trickle.contains("--pull-timeout"), "the trickle ends at the pull's deadline: {trickle}");
    let notes = describe_events(&events(&client, ns.name()).await?);
    ensure!(!notes.contains(MARKER), "no response body in any Event:\n{notes}");
    let peak = peak_rss(&host)?;
    eprintln!("host peak RSS: {} MiB before the attacks, {} MiB after; steady's update ran {updated:?} after they began", baseline >> 20, peak >> 20);
    ensure!(peak.saturating_sub(baseline) < 100 << 20, "host peak RSS grew from {} MiB to {} MiB", baseline >> 20, peak >> 20);
    ensure!(host.metric("kubewasm_plugin_faults_total", &[("plugin", "steady")]).await? == 0.0, "the steady Plugin never faulted");
    host.stop().await?;
    Ok(())
}

/// A Plugin's spec with `settings` and `[kubewasm]` options.
fn plugin_with(name: &str, module: &str, settings_: &E2eSettings, options: serde_json::Value, poll: &str) -> DynamicObject {
    let mut settings = settings(settings_);
    settings["kubewasm"] = options;
    serde_json::from_value(json!({
        "apiVersion": "kubewasm.io/v1alpha1",
        "kind": "Plugin",
        "metadata": {"name": name},
        "spec": {"module": module, "settings": settings, "pollInterval": poll},
    }))
    .expect("a Plugin")
}

/// One Plugin's slow start holds up nobody (M4) and a hostile `pollInterval` stops nothing (H2):
/// two Plugins whose `describe` sleeps 300 s and two whose `pollInterval` overflows a duration
/// (`18446744073709551615s1s`, which the CRD admits and which panicked the two shared workers)
/// beside them; a third Plugin is still loaded within 10 s, and deleting a running one stops it
/// at once.
#[tokio::test]
async fn slow_or_hostile_plugins_hold_up_no_other_plugin() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let registry = Registry::start()?;
    let Setup { ns: _ns, plugins, cms, mut host } = setup(cp, "delivery-pipelines").await?;
    let reference = format!("{}/team/e2e:1", registry.host());
    push("v01", &reference).await?;
    plugins.create(&PostParams::default(), &plugin("going", &reference, &E2eSettings::new("going"))).await?;
    wait_ready(&plugins, "going", "True", "Running").await?;
    create_primaries(&cms, &BTreeMap::from([("p".to_string(), "0".to_string())])).await?;
    wait_outputs(&cms, "going", &BTreeMap::from([("p".to_string(), "0".to_string())]), Want::default()).await?;

    for name in ["slow-a", "slow-b"] {
        let settings = E2eSettings::new(name).describe_sleep_ms(300_000);
        plugins.create(&PostParams::default(), &plugin_with(name, &reference, &settings, json!({"deadline-ms": 300_000}), "2s")).await?;
    }
    for name in ["overflow-a", "overflow-b"] {
        plugins.create(&PostParams::default(), &plugin_with(name, &reference, &E2eSettings::new(name), json!({}), "18446744073709551615s1s")).await?;
    }
    // Both slow describes are under way.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let started = std::time::Instant::now();
    plugins.create(&PostParams::default(), &plugin("third", &reference, &E2eSettings::new("third"))).await?;
    eventually("the third Plugin to run", Duration::from_secs(10), || async {
        let status = plugins.get("third").await?.data["status"].clone();
        if status["conditions"][0]["reason"] == "Running" { Ok::<_, anyhow::Error>(()) } else { Err(anyhow!("{status}")) }
    })
    .await
    .context("a Plugin must load while two others describe themselves slowly")?;
    let loaded = started.elapsed();

    let started = std::time::Instant::now();
    plugins.delete("going", &DeleteParams::default()).await?;
    host.wait_metric("kubewasm_plugin_reloads_total", &[("plugin", "going"), ("result", "unloaded")], Duration::from_secs(10), |v| v == 1.0)
        .await
        .context("a deleted Plugin must stop while others describe themselves slowly")?;
    let stopped = started.elapsed();
    for name in ["overflow-a", "overflow-b"] {
        let status = wait_reason(&plugins, name, "InvalidSpec", CONVERGE).await?;
        ensure!(status["lastError"].as_str().is_some_and(|e| e.contains("pollInterval")), "{status}");
    }
    eprintln!("beside two 300 s describes: a Plugin loaded in {loaded:?}, a deleted one stopped in {stopped:?}");
    ensure!(!host.log_text().contains("panicked"), "no delivery task panicked");
    host.stop().await?;
    Ok(())
}

/// `kubewasm push`, returning the manifest digest it printed.
async fn push_for_digest(variant: &str, reference: &str) -> Result<String> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("e2e.wasm");
    std::fs::write(&file, e2e_variant(variant))?;
    let out = tokio::process::Command::new(kubewasm_binary()?)
        .args(["push", &file.display().to_string(), reference])
        .arg(format!("--cache-dir={}", dir.path().join("cache").display()))
        .output()
        .await?;
    ensure!(out.status.success(), "kubewasm push failed: {}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    said.split("(sha256:").nth(1).and_then(|r| r.split(')').next()).map(|hex| format!("sha256:{hex}")).with_context(|| format!("a digest in: {said}"))
}

/// A host restarted while the registry is down (M8) runs the last modules it pulled, from the
/// cache directory it kept: a Plugin pinned by digest as if nothing happened, a Plugin on a tag
/// with its last resolution (its status says the registry is unreachable and what runs).
#[tokio::test]
async fn a_host_restarted_while_the_registry_is_down_runs_its_last_modules() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let registry = Registry::start()?;
    let proxy = FaultProxy::start(registry.addr()).await?;
    let resource: ApiResource = install_plugin_crd(&cp.client().await?).await?;
    let ns = cp.namespace("delivery-offline").await?;
    let plugins: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &resource);
    let cms: Api<ConfigMap> = ns.api();
    let cache = tempfile::tempdir()?;
    let config = HostConfig::resources("delivery-offline", ns.name(), cp.kubeconfig_path())
        .namespace(ns.name())
        .status_configmap(ns.name(), STATUS)
        .artifacts(cache.path());
    let mut first = Host::start(config.clone()).await?;
    first.wait_ready(READY).await?;
    let tagged = format!("{}/team/e2e:1", proxy.addr());
    let manifest = push_for_digest("v01", &tagged).await?;
    let pinned = format!("{}/team/e2e@{manifest}", proxy.addr());
    plugins.create(&PostParams::default(), &plugin("pinned", &pinned, &E2eSettings::new("pinned"))).await?;
    plugins.create(&PostParams::default(), &plugin("tagged", &tagged, &E2eSettings::new("tagged"))).await?;
    wait_ready(&plugins, "pinned", "True", "Running").await?;
    wait_ready(&plugins, "tagged", "True", "Running").await?;
    first.stop().await?;

    proxy.set(Mode::Reset);
    let mut second = Host::start(config).await?;
    second.wait_ready(READY).await?;
    let inputs = BTreeMap::from([("p".to_string(), "1".to_string())]);
    create_primaries(&cms, &inputs).await?;
    for name in ["pinned", "tagged"] {
        wait_outputs(&cms, name, &inputs, Want { variant: Some("v01"), ..Want::default() }).await.with_context(|| format!("{name} runs after the restart"))?;
    }
    wait_ready(&plugins, "pinned", "True", "Running").await?;
    let status = wait_ready(&plugins, "tagged", "False", "RegistryUnreachable").await?;
    ensure!(status["lastError"].as_str().is_some_and(|e| e.contains("runs the last module pulled")), "the status says what runs: {status}");
    ensure!(status["digest"].as_str().is_some_and(|d| d.starts_with("sha256:")), "{status}");

    proxy.set(Mode::Pass);
    wait_ready(&plugins, "tagged", "True", "Running").await?;
    second.stop().await?;
    Ok(())
}
