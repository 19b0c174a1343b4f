//! End-to-end tests of the controller runtime — the shared caches: one watch per kind whatever the
//! plugins' selectors, watches that recover when the control plane restarts, metadata-only kinds
//! and projected kinds. The real `kubewasm run` binary against the local control plane, with the
//! suite's `e2e-guest`; every test runs its own host processes on loopback ports.
//!
//! `cargo test -p kubewasm-tests --test caches`

mod support;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kubewasm_tests::prom::apiserver_watches;
use kubewasm_tests::{ControlPlane, E2eSettings, Host, HostConfig, Options, PluginDir, eventually};
use serde_json::json;
use support::*;

/// Plugins that read ConfigMaps share one watch whatever their label selectors, seen from the API
/// server: its gauge of open WATCH requests for configmaps goes up by one for a host running
/// three (no selector, the default one, another one), and by one more for a second host (which
/// shows that a watch per plugin would be visible). Each still sees only what it selects.
#[tokio::test]
async fn two_plugins_reading_configmaps_share_one_watch() -> Result<()> {
    // Dedicated, with only the namespace controller: nothing else opens or closes configmap
    // watches while this test counts them.
    let cp = ControlPlane::start_with(Options::new().controllers(["namespace"])).await?;
    let client = cp.client().await?;
    let ns = cp.namespace("shared-watch").await?;
    let cms: Api<ConfigMap> = ns.api();
    let watches = || apiserver_watches(&client, "", "configmaps");
    let baseline = watches().await?;

    // Cluster-wide (no --namespace), so the watch is the host's only configmap watch.
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("reader-a").selector(""), "v01");
    dir.install_e2e(&E2eSettings::new("reader-b"), "v01");
    dir.install_e2e(&E2eSettings::new("reader-other").selector("e2e.kubewasm.io/other=yes"), "v01");
    let config = HostConfig::new("shared", dir.path(), cp.kubeconfig_path()).status_configmap(ns.name(), STATUS);
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;

    // Both plugins work (each writes its own output), fed by one watch.
    let want = inputs(&["in"], "x");
    create_primaries(&cms, &want).await?;
    wait_outputs(&cms, "reader-a", &want, Want::default()).await?;
    wait_outputs(&cms, "reader-b", &want, Want::default()).await?;
    // An object only the third selector selects reaches only the third plugin.
    let mut other_only = primary("other-only", "o");
    other_only.metadata.labels = Some([("e2e.kubewasm.io/other".to_string(), "yes".to_string())].into());
    cms.create(&PostParams::default(), &other_only).await?;
    wait_outputs(&cms, "reader-other", &inputs(&["other-only"], "o"), Want::default()).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    ensure!(output(&cms, "other-only", "reader-b").await?.is_none(), "reader-b's selector does not select other-only");
    let expect_one = |n: f64| if n == baseline + 1.0 { Ok(n) } else { Err(anyhow!("{n} configmap watches open, baseline {baseline}")) };
    eventually("one more configmap watch than before the host", CONVERGE, || async { expect_one(watches().await?) }).await?;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        expect_one(watches().await?).context("two plugins must share the host's one configmap watch")?;
    }

    // A second host with one such plugin opens a watch of its own: the gauge counts per watch.
    let other = PluginDir::new();
    other.install_e2e(&E2eSettings::new("reader-c").selector(""), "v01");
    let config = HostConfig::new("other", other.path(), cp.kubeconfig_path()).status_configmap(ns.name(), "other-status");
    let mut second = Host::start(config).await?;
    second.wait_ready(READY).await?;
    wait_outputs(&cms, "reader-c", &want, Want::default()).await?;
    eventually("a second host to add a second watch", CONVERGE, || async {
        let n = watches().await?;
        if n == baseline + 2.0 { Ok(()) } else { Err(anyhow!("{n} configmap watches, baseline {baseline}")) }
    })
    .await?;
    second.stop().await?;
    host.stop().await?;
    Ok(())
}

/// The control plane restarts under a running host: its watches recover (re-list and watch
/// again) and later changes are reconciled.
#[tokio::test]
async fn watches_recover_when_the_control_plane_restarts() -> Result<()> {
    // Stopped with SIGKILL if not gone in 5 s: with watches open, its graceful stop takes a
    // minute (the API server waits for them); a crash is as good a restart for this test.
    let options = Options::new().controllers(["namespace"]).stop_timeout(Duration::from_secs(5));
    let mut cp = ControlPlane::start_with(options).await?;
    let ns = cp.namespace("restart").await?;
    let ns_name = ns.name().to_string();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("phoenix"), "v01");
    let mut host = Host::start(host_config("phoenix", dir.path(), cp.kubeconfig_path(), &ns_name)).await?;
    host.wait_ready(READY).await?;
    let mut want = inputs(&["a", "b"], "1");
    {
        let cms: Api<ConfigMap> = Api::namespaced(cp.client().await?, &ns_name);
        create_primaries(&cms, &want).await?;
        wait_outputs(&cms, "phoenix", &want, Want::default()).await?;
    }

    let port = cp.port();
    let restarting = Instant::now();
    cp.restart().await.map_err(|e| anyhow!("restarting the control plane: {e}"))?;
    eprintln!("the control plane restarted in {:?}", restarting.elapsed());
    ensure!(cp.port() == port, "the control plane came back on another port ({} → {}): the host cannot follow", port, cp.port());

    let cms: Api<ConfigMap> = Api::namespaced(cp.client().await?, &ns_name);
    set_input(&cms, "a", "2").await?;
    want.insert("a".into(), "2".into());
    cms.create(&PostParams::default(), &primary("c", "1")).await?;
    want.insert("c".into(), "1".into());
    cms.delete("b", &DeleteParams::default()).await?;
    want.remove("b");
    // The watches come back after their backoff (kube's: up to 30 s between attempts, and the
    // first watch after the restart is usually refused as too old, which costs one more).
    let recovering = Instant::now();
    wait_outputs_within(&cms, "phoenix", &want, Want::default(), Duration::from_secs(150)).await?;
    eprintln!("converged {:?} after the restart", recovering.elapsed());
    ensure!(host.try_status().is_none(), "the host exited during the restart");
    host.wait_ready(READY).await?;
    host.stop().await?;
    drop(ns);
    Ok(())
}

/// `views.metadata-only` (issue 26 §3): a plugin that only maps ConfigMaps to its primaries
/// (Secrets) declares them metadata-only. Alone, it makes the host watch their
/// `PartialObjectMetadata`: the informer holds metadata (its cache a fraction of the 64 KiB
/// each watched object carries) and the plugin is never handed `data`. A second plugin that needs
/// whole ConfigMaps, hot-loaded beside it, turns that one watch into a watch of whole objects in
/// place — still one ConfigMap informer — and is handed `data`, while the first still sees only
/// metadata and keeps reconciling on changes.
#[tokio::test]
async fn a_metadata_only_kind_is_watched_as_metadata_and_shares_one_watch_with_a_plugin_needing_objects() -> Result<()> {
    const PARENT: &str = "e2e.kubewasm.io/parent";
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("metadata-only").await?;
    let cms: Api<ConfigMap> = ns.api();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = ns.api();
    let dir = PluginDir::new();
    let mapper = |name: &str| E2eSettings::new(name).kind("Secret").map_label(PARENT).related();
    dir.install_e2e(&mapper("meta").metadata_only(), "v01");
    let mut host = Host::start(host_config("metadata-only", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let big = "x".repeat(64 << 10);
    for name in ["w1", "w2"] {
        let watched = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                labels: Some([(PARENT.to_string(), "p".to_string())].into()),
                annotations: Some([(INPUT.to_string(), "1".to_string())].into()),
                ..Default::default()
            },
            data: Some([("big".to_string(), big.clone())].into()),
            ..Default::default()
        };
        cms.create(&PostParams::default(), &watched).await?;
    }
    let primary: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {PRIMARY: "yes"}, "annotations": {INPUT: "1"}},
    }))?;
    secrets.create(&PostParams::default(), &primary).await?;

    // What `plugin` last wrote for `p`: (related, related-data), once `related` is `want`.
    let saw = |plugin: &'static str, want: &'static str| {
        let cms = cms.clone();
        async move {
            eventually(&format!("{plugin} to see {want}"), CONVERGE, || async {
                let data = output(&cms, "p", plugin).await?.unwrap_or_default();
                let field = |key: &str| data.get(key).cloned().unwrap_or_default();
                let (related, with_data) = (field("related"), field("related-data"));
                if related == want { Ok(with_data) } else { Err(anyhow!("{plugin} saw related {related:?}, with data {with_data:?}")) }
            })
            .await
        }
    };
    ensure!(saw("meta", "w1=1,w2=1").await?.is_empty(), "the metadata-only plugin was handed data");
    let configmaps = |content: &'static str| [("resource", "ConfigMap.v1"), ("content", content)];
    let informers = |text: &str| text.lines().filter(|l| l.starts_with("kubewasm_informer_") && l.contains("ConfigMap")).collect::<Vec<_>>().join("\n");
    let text = host.metrics().await?;
    // The namespace's other ConfigMaps too (the outputs, kube-root-ca.crt): one watch per kind.
    ensure!(
        kubewasm_tests::prom::sum(&text, "kubewasm_informer_objects", &configmaps("metadata")) >= 2.0,
        "no metadata-only watch holds the ConfigMaps:\n{}",
        informers(&text)
    );
    let metadata_bytes = kubewasm_tests::prom::sum(&text, "kubewasm_informer_cache_bytes", &configmaps("metadata"));
    ensure!(metadata_bytes < (16 << 10) as f64, "the metadata-only cache holds {metadata_bytes} bytes: the data came along");

    // A plugin needing whole ConfigMaps, hot-loaded: the one watch becomes a watch of objects.
    dir.install_e2e(&mapper("full"), "v01");
    ensure!(saw("full", "w1=1,w2=1").await? == "w1,w2", "the plugin needing objects was not handed data");
    let text = host.metrics().await?;
    let configmap_informers: Vec<_> = kubewasm_tests::prom::samples(&text)
        .into_iter()
        .filter(|s| s.name == "kubewasm_informer_objects" && s.labels.get("resource").map(String::as_str) == Some("ConfigMap.v1"))
        .collect();
    ensure!(
        configmap_informers.len() == 1 && configmap_informers[0].labels["content"] == "objects",
        "not one ConfigMap informer, of whole objects:\n{}",
        informers(&text)
    );
    let object_bytes = host.metric("kubewasm_informer_cache_bytes", &configmaps("objects")).await?;
    ensure!(object_bytes > (128 << 10) as f64, "the shared cache holds {object_bytes} bytes: not the whole objects");

    // Both keep reconciling on changes of the shared watch, each seeing what it declared.
    set_input(&cms, "w1", "2").await?;
    ensure!(saw("meta", "w1=2,w2=1").await?.is_empty(), "after the upgrade, the metadata-only plugin was handed data");
    ensure!(saw("full", "w1=2,w2=1").await? == "w1,w2");
    host.stop().await?;
    Ok(())
}

/// M6: a plugin that reads ConfigMaps metadata-only (`views.metadata-only`), gets one from the
/// cache and updates it would write back an object without its data, wiping it: the update is
/// refused as `invalid` (a Warning Event on the primary), and the ConfigMap keeps its data.
#[tokio::test]
async fn an_update_of_a_metadata_only_kind_is_refused_and_wipes_nothing() -> Result<()> {
    const PARENT: &str = "e2e.kubewasm.io/parent";
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("metadata-update").await?;
    let cms: Api<ConfigMap> = ns.api();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = ns.api();
    let dir = PluginDir::new();
    let settings = E2eSettings::new("meta").kind("Secret").map_label(PARENT).metadata_only().mode("update-watched").extra("update ConfigMap.v1");
    dir.install_e2e(&settings, "v01");
    let mut host = Host::start(host_config("metadata-update", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let watched = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("w".into()), labels: Some([(PARENT.to_string(), "p".to_string())].into()), ..Default::default() },
        data: Some([("kept".to_string(), "yes".to_string())].into()),
        ..Default::default()
    };
    let watched = cms.create(&PostParams::default(), &watched).await?;
    let primary: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {PRIMARY: "yes"}, "annotations": {INPUT: "1"}},
    }))?;
    secrets.create(&PostParams::default(), &primary).await?;
    wait_event(ns.client(), ns.name(), "p", "ReconcileFailed", "update replaces the whole ConfigMap").await?;
    let after = cms.get("w").await?;
    ensure!(after.data == watched.data && after.resource_version() == watched.resource_version(), "the refused update changed w: {after:?}");
    host.stop().await?;
    Ok(())
}
/// A plugin that declares a projection of its primary's kind (`projections`, contract 0.1.5) is
/// handed only the declared fields of its objects beside their metadata — in the request, read
/// back from the cache and in the answer of its apply — while the host caches whole objects; an
/// `update` of a projected kind, which would wipe what the plugin was not handed, is refused
/// with a Warning Event, and the object is left as it was.
#[tokio::test]
async fn a_projected_kind_is_handed_with_only_the_declared_fields() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("projections").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("narrow").reads_fields(&["data.keep", "data.output.gone", "binaryData"]), "v01");
    dir.install_e2e(&E2eSettings::new("updater").mode("update").reads_fields(&["data"]), "v01");
    let mut host = Host::start(host_config("projections", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;

    let mut p = primary("p", "1");
    p.data = Some([("keep", "k"), ("drop", "d"), ("output", "o")].map(|(k, v)| (k.to_string(), v.to_string())).into());
    cms.create(&PostParams::default(), &p).await?;
    let data = eventually("narrow's output", CONVERGE, || async {
        output(&cms, "p", "narrow").await?.filter(|d| d.contains_key("answered")).ok_or_else(|| anyhow!("not yet"))
    })
    .await?;
    // The primary: `data.output.gone` reaches a string, which is kept whole.
    ensure!(data["handed"] == "data(keep,output)", "the request's primary was handed as {:?}", data["handed"]);
    ensure!(data["read"] == "data(keep,output)", "the primary read back from the cache was handed as {:?}", data["read"]);
    // The output ConfigMap's own data keys are the guest's, of which `keep` is none.
    ensure!(data["answered"] == "data()", "the apply's answer was handed as {:?}", data["answered"]);
    let stored = cms.get("p").await?;
    ensure!(stored.data.as_ref().is_some_and(|d| d.len() == 3), "the primary changed: {:?}", stored.data);

    wait_event(ns.client(), ns.name(), "p", "ReconcileFailed", "update replaces the whole ConfigMap").await?;
    let after = cms.get("p").await?;
    ensure!(after.data == stored.data && !after.annotations().contains_key(OUTPUT), "the refused update changed the primary: {after:?}");
    host.stop().await?;
    Ok(())
}
