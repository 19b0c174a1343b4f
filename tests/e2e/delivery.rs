//! End-to-end tests of cluster delivery (issue 11): plugins pushed with `kubewasm push` to a
//! real OCI registry (go-containerregistry's, on loopback) and run by a host from Plugin
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
