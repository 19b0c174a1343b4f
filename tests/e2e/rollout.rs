//! Safe rollout (issue 14): a candidate version (`NAME.next.wasm`) runs in the shadow of the
//! live one against the local control plane. The live version is the Rust sample-controller; a
//! candidate identical in logic is the same controller in JavaScript, and a differing candidate
//! is that JavaScript with the replica count capped at 2. What the candidates do is compared
//! with what the live version did, shown by `kubewasm rollout status`, and never stored; a
//! candidate that agrees is promoted automatically.
//!
//! Shadow runs are bounded and leak nothing (audit H3, H5): with the suite's `e2e-guest` as live
//! version and candidate, a live version listing thousands of objects per reconcile costs the
//! host bounded memory, and Secret values the two write reach neither the status ConfigMap nor
//! the log.
//!
//! `cargo test -p kubewasm-tests --test rollout`. Needs the JS SDK's tools (`npm install` in
//! `plugins/js`; `scripts/env.sh` does).

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kubewasm_tests::guests;
use kubewasm_tests::{ControlPlane, E2eSettings, Host, PluginDir, TestNamespace, apply_crd, eventually, kubewasm_binary};
use serde_json::json;
use support::{CONVERGE, STATUS, host_config};

/// A JS plugin not yet in the artifact cache is compiled first (tens of seconds, debug build).
const READY: Duration = Duration::from_secs(180);
const PLUGIN: &str = "sample-controller";
const SHADOW: &str = "kubewasm_shadow_reconciles_total";
const RELOADS: &str = "kubewasm_plugin_reloads_total";

fn shadow(result: &str) -> [(&str, &str); 2] {
    [("plugin", PLUGIN), ("result", result)]
}

/// The sample-controller in JavaScript with the replica count capped at 2: differs from the
/// live version on exactly the Foos asking for more.
fn capped_candidate() -> PathBuf {
    let source = guests::workspace_root().join("examples/sample-controller/js/sample-controller.js");
    let text = std::fs::read_to_string(&source).expect("read the JS sample-controller");
    let original = "replicas: o.field(foo, 'spec.replicas', 1),";
    assert!(text.contains(original), "the JS sample-controller no longer sets replicas as this test expects");
    let capped = text.replace(original, "replicas: Math.min(o.field(foo, 'spec.replicas', 1), 2),");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = dir.path().join("sample-controller.js");
    std::fs::write(&app, capped).expect("write the capped controller");
    guests::cached_plugin("js", &app, "sample-controller-capped")
}

async fn foo_resource(cp: &ControlPlane) -> Result<ApiResource> {
    let crd: CustomResourceDefinition = serde_saphyr::from_str(include_str!("../../examples/sample-controller/manifests/crd.yaml"))?;
    Ok(apply_crd(&cp.client().await?, &crd, CONVERGE).await?)
}

/// Foos `f1`..`f4`, asking for 1 to 4 replicas of a Deployment `fN-web`; returns once the live
/// version has made those Deployments.
async fn create_foos(foos: &Api<DynamicObject>, ar: &ApiResource, deployments: &Api<Deployment>) -> Result<()> {
    for n in 1..=4 {
        let object = DynamicObject::new(&format!("f{n}"), ar).data(json!({"spec": {"deploymentName": format!("f{n}-web"), "replicas": n}}));
        foos.create(&PostParams::default(), &object).await?;
    }
    eventually("the live version's Deployments", CONVERGE, || async {
        let counts = replicas(deployments).await?;
        if counts == [1, 2, 3, 4] { Ok(()) } else { Err(anyhow!("replicas {counts:?}")) }
    })
    .await?;
    Ok(())
}

/// The replica counts of the Deployments `f1-web`..`f4-web`, once all exist.
async fn replicas(deployments: &Api<Deployment>) -> Result<Vec<i32>> {
    let mut counts = Vec::new();
    for n in 1..=4 {
        let d = deployments.get_opt(&format!("f{n}-web")).await?.ok_or_else(|| anyhow!("f{n}-web does not exist yet"))?;
        counts.push(d.spec.replicas.unwrap_or_default());
    }
    Ok(counts)
}

/// Touches every Foo (a label, no spec change): the live version reconciles each again.
async fn touch_foos(foos: &Api<DynamicObject>, round: u32) -> Result<()> {
    for n in 1..=4 {
        foos.patch(&format!("f{n}"), &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"touched": round.to_string()}}}))).await?;
    }
    Ok(())
}

/// `kubewasm rollout status` for the test's host.
async fn rollout_status(cp: &ControlPlane, ns: &TestNamespace) -> Result<String> {
    let output = tokio::process::Command::new(kubewasm_binary()?)
        .args(["rollout", "status", PLUGIN, "--status-configmap", &format!("{}/{STATUS}", ns.name())])
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .output()
        .await?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    ensure!(output.status.success(), "kubewasm rollout status failed: {text}");
    Ok(text)
}

/// Copies `wasm` in as the candidate, atomically (written aside, renamed into place).
fn install_candidate(dir: &Path, wasm: &Path) {
    let aside = dir.join(format!(".{PLUGIN}.next.wasm.partial"));
    std::fs::copy(wasm, &aside).expect("copy the candidate");
    std::fs::rename(&aside, dir.join(format!("{PLUGIN}.next.wasm"))).expect("rename the candidate into place");
}

#[tokio::test]
async fn a_candidate_is_compared_with_the_live_version_and_nothing_it_does_is_stored() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ar = foo_resource(cp).await?;
    let ns = cp.namespace("rollout-shadow").await?;
    let dir = PluginDir::new();
    guests::install(&guests::example(PLUGIN, "rust"), dir.path(), PLUGIN, None);
    let same_logic = tokio::task::spawn_blocking(|| guests::example(PLUGIN, "js")).await?;
    let capped = tokio::task::spawn_blocking(capped_candidate).await?;
    let mut host = Host::start(host_config("rollout-shadow", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &ar);
    let deployments: Api<Deployment> = ns.api();
    create_foos(&foos, &ar, &deployments).await?;

    // The same logic in another language agrees on every key.
    install_candidate(dir.path(), &same_logic);
    host.wait_metric(RELOADS, &[("plugin", PLUGIN), ("result", "candidate")], READY, |n| n == 1.0).await.context("the JS candidate must start")?;
    touch_foos(&foos, 1).await?;
    host.wait_metric(SHADOW, &shadow("same"), CONVERGE, |n| n >= 4.0).await.context("the identical candidate agrees on all four Foos")?;
    for result in ["differs", "error", "fault"] {
        ensure!(host.metric(SHADOW, &shadow(result)).await? == 0.0, "the identical candidate {result}: {}", rollout_status(cp, &ns).await?);
    }
    let status = eventually("rollout status to show four agreeing keys", CONVERGE, || async {
        let status = rollout_status(cp, &ns).await?;
        if status.contains("keys: 4 agree, 0 do not") { Ok(status) } else { Err(anyhow!("{status}")) }
    })
    .await?;
    eprintln!("{status}");

    // A candidate capping replicas at 2 differs on exactly f3 and f4, with a readable diff.
    install_candidate(dir.path(), &capped);
    host.wait_metric(RELOADS, &[("plugin", PLUGIN), ("result", "candidate")], READY, |n| n == 2.0).await.context("the capped candidate must start")?;
    touch_foos(&foos, 2).await?;
    let status = eventually("rollout status to show f3 and f4 differing", CONVERGE, || async {
        let status = rollout_status(cp, &ns).await?;
        if status.contains("keys: 2 agree, 2 do not") { Ok(status) } else { Err(anyhow!("{status}")) }
    })
    .await?;
    eprintln!("{status}");
    let namespace = ns.name();
    ensure!(status.contains(&format!("not agreeing: {namespace}/f3 (differs), {namespace}/f4 (differs)")), "{status}");
    let removed = |n: u32| status.lines().any(|l| l.starts_with('-') && l.trim_start_matches('-').trim() == format!("replicas: {n}"));
    let added = status.lines().any(|l| l.starts_with('+') && l.trim_start_matches('+').trim() == "replicas: 2");
    ensure!(removed(3) && removed(4) && added, "the diffs must show replicas 3 and 4 against 2:\n{status}");
    ensure!(!status.contains(&format!("--- {namespace}/f1")) && !status.contains(&format!("--- {namespace}/f2")), "f1 and f2 agree: {status}");

    // Nothing the candidate did was stored: the Deployments keep the live version's replicas,
    // and only the live version's field manager ever wrote them.
    ensure!(replicas(&deployments).await? == [1, 2, 3, 4], "the candidate's writes were stored");
    for n in 3..=4 {
        let d = deployments.get(&format!("f{n}-web")).await?;
        let managers: Vec<String> = d.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
        ensure!(managers.iter().all(|m| !m.contains("next")), "{managers:?}");
    }
    // Removing the candidate ends the shadow run.
    std::fs::remove_file(dir.path().join(format!("{PLUGIN}.next.wasm")))?;
    host.wait_metric(RELOADS, &[("plugin", PLUGIN), ("result", "candidate_removed")], CONVERGE, |n| n == 1.0).await?;
    let cms: Api<ConfigMap> = ns.api();
    eventually("the rollout report to go from the status ConfigMap", CONVERGE, || async {
        let data = cms.get(STATUS).await?.data.unwrap_or_default();
        if data.contains_key(&format!("{PLUGIN}.rollout")) { Err(anyhow!("still listed")) } else { Ok(()) }
    })
    .await?;
    host.stop().await?;
    Ok(())
}

/// With `--promote-after 4`, a candidate that agrees on four reconciles is renamed over the live
/// file and loaded as the live version.
#[tokio::test]
async fn a_candidate_that_agrees_is_promoted() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ar = foo_resource(cp).await?;
    let ns = cp.namespace("rollout-promote").await?;
    let dir = PluginDir::new();
    guests::install(&guests::example(PLUGIN, "rust"), dir.path(), PLUGIN, None);
    let same_logic = tokio::task::spawn_blocking(|| guests::example(PLUGIN, "js")).await?;
    let config = host_config("rollout-promote", dir.path(), cp.kubeconfig_path(), ns.name()).arg("--promote-after=4");
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &ar);
    let deployments: Api<Deployment> = ns.api();
    create_foos(&foos, &ar, &deployments).await?;

    install_candidate(dir.path(), &same_logic);
    host.wait_metric(RELOADS, &[("plugin", PLUGIN), ("result", "candidate")], READY, |n| n == 1.0).await?;
    touch_foos(&foos, 1).await?;
    host.wait_metric(RELOADS, &[("plugin", PLUGIN), ("result", "promoted")], READY, |n| n == 1.0).await.context("the agreeing candidate must be promoted")?;
    ensure!(!dir.path().join(format!("{PLUGIN}.next.wasm")).exists(), "the candidate file was renamed over the live one");
    let js_digest = kubewasm::plugin::Digest::of(&std::fs::read(&same_logic)?).to_string();
    let cms: Api<ConfigMap> = ns.api();
    eventually("the status ConfigMap to list the promoted version", CONVERGE, || async {
        let entry = cms.get(STATUS).await?.data.unwrap_or_default().get(PLUGIN).cloned().unwrap_or_default();
        if entry.contains(&format!("digest=sha256:{js_digest}")) && !entry.contains("candidate=") { Ok(()) } else { Err(anyhow!("{entry}")) }
    })
    .await?;
    // The promoted version serves: a new Foo gets its Deployment.
    let foo = DynamicObject::new("f5", &ar).data(json!({"spec": {"deploymentName": "f5-web", "replicas": 1}}));
    foos.create(&PostParams::default(), &foo).await?;
    eventually("f5's Deployment", CONVERGE, || async { deployments.get("f5-web").await.map(|_| ()).map_err(anyhow::Error::from) }).await?;
    host.stop().await?;
    Ok(())
}

/// `kubewasm` with `args`; its output, and whether it succeeded.
async fn kubewasm(args: &[&str]) -> Result<(bool, String)> {
    let output = tokio::process::Command::new(kubewasm_binary()?).args(args).output().await?;
    Ok((output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)))
}

/// `kubewasm record` turns what the plugin does with three Foos into cases: they replay green
/// against the version they were recorded from and red, on exactly the Foo whose replicas the
/// capped candidate changes, against it.
#[tokio::test]
async fn a_recorded_case_replays_green_against_its_version_and_red_against_another() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ar = foo_resource(cp).await?;
    let ns = cp.namespace("rollout-record").await?;
    let live = guests::example(PLUGIN, "rust");
    let capped = tokio::task::spawn_blocking(capped_candidate).await?;
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &ar);
    let deployments: Api<Deployment> = ns.api();
    let taken: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "taken"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "taken"}}, "template": {"metadata": {"labels": {"app": "taken"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }))?;
    deployments.create(&PostParams::default(), &taken).await?;
    for (name, spec) in [
        ("f1", json!({"deploymentName": "f1-web", "replicas": 1})),
        ("f3", json!({"deploymentName": "taken", "replicas": 3})),
        ("f4", json!({"deploymentName": "f4-web", "replicas": 4})),
    ] {
        foos.create(&PostParams::default(), &DynamicObject::new(name, &ar).data(json!({ "spec": spec }))).await?;
    }
    let cases = tempfile::tempdir()?;
    let artifacts = guests::target_dir().join("kubewasm-tests/artifacts");
    let (artifacts, cases_dir, kubeconfig) =
        (artifacts.to_string_lossy().into_owned(), cases.path().to_string_lossy().into_owned(), cp.kubeconfig_path().to_string_lossy().into_owned());
    let keys: Vec<String> = ["f1", "f3", "f4"].iter().map(|n| format!("{}/{n}", ns.name())).collect();
    let mut record = vec!["record", live.to_str().context("path")?];
    record.extend(keys.iter().map(String::as_str));
    record.extend(["-o", &cases_dir, "--kubeconfig", &kubeconfig, "--cache-dir", &artifacts]);
    let (ok, output) = kubewasm(&record).await?;
    ensure!(ok, "kubewasm record failed: {output}");
    let taken_case = std::fs::read_to_string(cases.path().join(format!("{}-f3.yaml", ns.name())))?;
    ensure!(
        taken_case.contains("name: taken") && taken_case.contains("ErrResourceExists"),
        "f3's case holds the Deployment it read and its Warning:\n{taken_case}"
    );
    ensure!(!taken_case.contains("managedFields"), "{taken_case}");

    let (ok, report) = kubewasm(&["test", live.to_str().context("path")?, &cases_dir, "--cache-dir", &artifacts]).await?;
    ensure!(ok && report.contains("3 passed; 0 failed"), "the recorded cases must pass against the version they were recorded from:\n{report}");
    let (ok, report) = kubewasm(&["test", capped.to_str().context("path")?, &cases_dir, "--cache-dir", &artifacts]).await?;
    ensure!(!ok && report.contains("2 passed; 1 failed"), "only f4 asks for more than 2 replicas:\n{report}");
    ensure!(report.contains(&format!("case {}-f4 ... FAILED", ns.name())), "{report}");
    // Nothing was written to the cluster: f1 has no Deployment.
    ensure!(deployments.get_opt("f1-web").await?.is_none(), "kubewasm record must not write");
    Ok(())
}

/// The e2e guest as a candidate: variant `variant` copied in as `NAME.next.wasm`, atomically.
fn install_e2e_candidate(dir: &PluginDir, name: &str, variant: &str) {
    dir.write_atomic(&format!("{name}.next.wasm"), &kubewasm_tests::plugindir::e2e_variant(variant));
}

/// Secret values never leave a shadow run (audit H5): the live version (v01) applies a Secret
/// whose `data.k` (base64) and `stringData.s` hold `TOKEN:v01`, its candidate (v02) the same
/// Secret with `TOKEN:v02`. The two differ on exactly that, and the shadow says so — but neither
/// value, plain or base64, appears in the status ConfigMap (`kubectl get cm -o yaml`, the
/// `NAME.rollout` entry included) or anywhere in the host's log; the stored Secret keeps the
/// live version's value.
#[tokio::test]
async fn secret_values_never_reach_the_status_configmap_or_the_log() -> Result<()> {
    use base64::Engine as _;
    use k8s_openapi::api::core::v1::Secret;
    const NAME: &str = "keeper";
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("rollout-secrets").await?;
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new(NAME).mode("secret").extra("get,create,patch Secret.v1"), "v01");
    let mut host = Host::start(host_config("rollout-secrets", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let cms: Api<ConfigMap> = ns.api();
    let secrets: Api<Secret> = ns.api();
    let token = kubewasm_tests::unique_name("h5-token");
    let (live, candidate) = (format!("{token}:v01"), format!("{token}:v02"));
    let b64 = |v: &str| base64::engine::general_purpose::STANDARD.encode(v);
    cms.create(&PostParams::default(), &support::primary("vault", &token)).await?;
    let stored = |secret: Secret| secret.data.unwrap_or_default().get("k").map(|v| String::from_utf8_lossy(&v.0).into_owned());
    eventually("the live version's Secret", CONVERGE, || async {
        match secrets.get_opt(&format!("vault.{NAME}")).await?.map(stored) {
            Some(Some(v)) if v == live => Ok(()),
            other => Err(anyhow!("{other:?}")),
        }
    })
    .await?;

    install_e2e_candidate(&dir, NAME, "v02");
    host.wait_metric(RELOADS, &[("plugin", NAME), ("result", "candidate")], READY, |n| n == 1.0).await.context("the candidate must start")?;
    // A change that is not the input: the live version reconciles (and applies its Secret) again.
    support::annotate(&cms, "vault", &[("e2e.kubewasm.io/touched", Some("1"))]).await?;
    host.wait_metric(SHADOW, &[("plugin", NAME), ("result", "differs")], CONVERGE, |n| n >= 1.0).await.context("the candidate's Secret differs")?;
    let kubectl = cp.kubectl()?;
    let yaml = eventually("the rollout report in the status ConfigMap", CONVERGE, || async {
        let yaml = kubectl.run(&["get", "cm", STATUS, "-n", ns.name(), "-o", "yaml"]).await?;
        if yaml.contains(&format!("{NAME}.rollout")) && yaml.contains("vault (differs)") { Ok(yaml) } else { Err(anyhow!("{yaml}")) }
    })
    .await?;
    let log = host.log_text();
    let leaks: Vec<String> = [&live, &candidate]
        .into_iter()
        .flat_map(|v| [v.clone(), b64(v)])
        .flat_map(|needle| {
            let places = [("the status ConfigMap", yaml.contains(&needle)), ("the host log", log.contains(&needle))];
            places.into_iter().filter(|(_, found)| *found).map(move |(place, _)| format!("{needle:?} in {place}"))
        })
        .collect();
    ensure!(leaks.is_empty(), "Secret values leaked: {leaks:?}\n--- status ConfigMap\n{yaml}");
    ensure!(secrets.get(&format!("vault.{NAME}")).await.map(stored)? == Some(live.clone()), "the candidate's Secret was stored");
    eprintln!(
        "shadow secrets: live and candidate differ on a Secret's values; none of the 4 spellings (plain, base64) in the status ConfigMap ({} bytes) or the host log ({} bytes)",
        yaml.len(),
        log.len()
    );
    host.stop().await?;
    Ok(())
}

/// Samples the resident memory of `pid` every 100 ms until stopped; the peak, in MiB.
struct PeakRss {
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl PeakRss {
    fn start(pid: u32) -> PeakRss {
        let peak = Arc::new(AtomicU64::new(0));
        let seen = peak.clone();
        let task = tokio::spawn(async move {
            while let Some(bytes) = kubewasm_tests::process::rss_bytes(pid) {
                seen.fetch_max(bytes, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        PeakRss { peak, task }
    }

    fn stop(self) -> f64 {
        self.task.abort();
        self.peak.load(Ordering::Relaxed) as f64 / f64::from(1 << 20)
    }
}

/// A shadow run costs bounded memory however much the live version reads (audit H3): 1000
/// primaries, each reconcile listing every ConfigMap the plugin sees (4000: the primaries and
/// 3000 watched fillers). Each live reconcile's journal of that list would pin the whole answer
/// while it waits for the candidate, up to 1000 of them; the journals are now held to a byte
/// bound (a journal past an eighth of the candidate's memory limit is skipped, the waiting ones
/// together within the limit). The host's peak RSS while all 1000 primaries are reconciled with
/// a candidate may pass the peak of the same round without one by at most [`SHADOW_RSS_BOUND`].
/// Prints both peaks.
#[tokio::test]
async fn a_candidate_costs_bounded_memory_however_much_the_live_version_lists() -> Result<()> {
    const PRIMARIES: usize = 1000;
    const FILLERS: usize = 3000;
    const FILLER: &str = "e2e.kubewasm.io/filler";
    const NAME: &str = "reader";
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("rollout-memory").await?;
    let cms: Api<ConfigMap> = ns.api();
    let created = std::time::Instant::now();
    let objects = (0..FILLERS)
        .map(|i| ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("filler-{i}")),
                labels: Some([(FILLER.to_string(), "none".to_string())].into()),
                ..Default::default()
            },
            data: Some([("bulk".to_string(), "x".repeat(200))].into()),
            ..Default::default()
        })
        .chain((0..PRIMARIES).map(|i| support::primary(&format!("p{i}"), "1")));
    futures::stream::iter(objects)
        .map(|object| {
            let cms = cms.clone();
            async move { cms.create(&PostParams::default(), &object).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    let created_in = created.elapsed();

    let dir = PluginDir::new();
    // Fillers are watched (so the plugin sees them), mapped to no primary.
    let settings =
        format!("{}[kubewasm]\nqps = 100.0\nburst = 100\nmemory-mib = {MEMORY_MIB}\n", E2eSettings::new(NAME).map_label(FILLER).list_all(1).to_toml());
    dir.install(NAME, &kubewasm_tests::plugindir::e2e_variant("v01"), Some(&settings));
    let mut host = Host::start(host_config("rollout-memory", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let pid = host.pid().context("host pid")?;
    let names: Vec<String> = (0..PRIMARIES).map(|i| format!("p{i}")).collect();
    let inputs = |input: &str| -> BTreeMap<String, String> { names.iter().map(|n| (n.clone(), input.to_string())).collect() };
    let settle = Duration::from_secs(180);
    support::wait_outputs_within(&cms, NAME, &inputs("1"), support::Want::default(), settle).await.context("the first round")?;
    let listed = support::output(&cms, "p0", NAME).await?.unwrap_or_default().get("listed").cloned().unwrap_or_default();
    ensure!(listed == (PRIMARIES + FILLERS).to_string(), "a reconcile listed {listed} ConfigMaps, not {}", PRIMARIES + FILLERS);

    // One round of every primary without a candidate, then one with.
    let round = |input: &'static str| {
        let (cms, names) = (cms.clone(), names.clone());
        async move {
            let started = std::time::Instant::now();
            for name in &names {
                support::set_input(&cms, name, input).await?;
            }
            let want: BTreeMap<String, String> = names.iter().map(|n| (n.clone(), input.to_string())).collect();
            support::wait_outputs_within(&cms, NAME, &want, support::Want::default(), settle).await?;
            anyhow::Ok(started.elapsed())
        }
    };
    let sampler = PeakRss::start(pid);
    let alone_in = round("2").await.context("the round without a candidate")?;
    let alone = sampler.stop();

    install_e2e_candidate(&dir, NAME, "v02");
    host.wait_metric(RELOADS, &[("plugin", NAME), ("result", "candidate")], READY, |n| n == 1.0).await.context("the candidate must start")?;
    let sampler = PeakRss::start(pid);
    let shadowed_in = round("3").await.context("the round with a candidate")?;
    // The backlog drains after the live round: keep sampling while it does.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let shadowed = sampler.stop();
    let metrics = host.metrics().await?;
    let shadow = |result: &str| kubewasm_tests::prom::sum(&metrics, SHADOW, &[("plugin", NAME), ("result", result)]);
    let (replayed, skipped) = (shadow("same") + shadow("differs") + shadow("error") + shadow("fault"), shadow("skipped"));
    ensure!(replayed >= 1.0, "the candidate replayed nothing: no shadow run to measure");
    eprintln!(
        "shadow memory: {PRIMARIES} primaries each listing {} ConfigMaps (created in {created_in:?}): host peak RSS {alone:.0} MiB without a candidate \
         (round {alone_in:?}), {shadowed:.0} MiB with one (round {shadowed_in:?}; {replayed} replayed, {skipped} skipped); +{:.0} MiB, bound +{SHADOW_RSS_BOUND:.0} MiB",
        PRIMARIES + FILLERS,
        shadowed - alone,
    );
    ensure!(shadowed - alone <= SHADOW_RSS_BOUND, "the candidate cost {:.0} MiB of host memory, more than {SHADOW_RSS_BOUND:.0} MiB", shadowed - alone);
    host.stop().await?;
    Ok(())
}

/// The plugin's memory limit (MiB), the live version's and the candidate's: enough for a list of
/// 4000 ConfigMaps, and small enough that an unbounded backlog of journals shows (it added
/// 184 MiB to the peak when the journals were held to no byte bound).
const MEMORY_MIB: u32 = 32;
/// What a candidate may add to the host's peak RSS: its two instances and the journals waiting
/// for it, each within its memory limit ([`MEMORY_MIB`]), its compiled module besides.
const SHADOW_RSS_BOUND: f64 = 3.0 * MEMORY_MIB as f64;
