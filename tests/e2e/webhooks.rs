//! Plugins' admission and conversion hooks (issue 41) against the real API server, which calls
//! the host over TLS: the host makes its own CA and certificate, writes the webhook
//! configurations and the CRD's conversion stanza, and answers each review by calling the plugin.
//!
//! `cargo test -p kubewasm-tests --test webhooks`

use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, ListParams, PostParams};
use kubewasm_tests::widgets::{Shared, free_port, hooks_guest, wait_hooks_served, webhook_host, widget, widget_crd, widgets};
use kubewasm_tests::{ControlPlane, Host, PluginDir, apply_crd, eventually, unique_name};
use serde_json::json;

const READY: Duration = Duration::from_secs(60);

/// The tutorial's shape, end to end: an invalid object is refused with the validator's message,
/// a valid one is stored defaulted, and an object written as v2 is stored (as v1) and read back
/// as v1 and as v2 through the plugin's conversion, one by one and in a list.
#[tokio::test]
async fn a_plugin_validates_defaults_and_converts_what_the_api_server_stores() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("hooks").await?;
    let group = format!("{}.hooks.kubewasm.io", unique_name("g"));
    apply_crd(ns.client(), &widget_crd(&group)?, READY).await?;
    let dir = PluginDir::new();
    dir.install("widgets", &hooks_guest(), Some(&format!("name = \"widgets\"\ngroup = \"{group}\"\nmode = \"good\"\n")));
    let port = free_port();
    let mut host = Host::start(webhook_host("hooks", &dir, cp, ns.name(), &Shared::unique(), port, port)).await?;
    host.wait_ready(READY).await?;

    let v1 = widgets(ns.client(), ns.name(), &group, "v1");
    let refused = wait_hooks_served(&v1, &group).await?;
    ensure!(refused.code == 422, "refused with {refused:?}, not 422");

    let stored = v1.create(&PostParams::default(), &widget(&group, "v1", "small", json!({ "size": 3 }))).await?;
    ensure!(stored.data["spec"]["color"] == json!("blue"), "not defaulted: {:?}", stored.data);
    let kept = v1.create(&PostParams::default(), &widget(&group, "v1", "red", json!({ "size": 3, "color": "red" }))).await?;
    ensure!(kept.data["spec"]["color"] == json!("red"), "a set color was changed: {:?}", kept.data);

    // Written as v2, stored as v1, read as either — once the CRD's conversion is in force (the
    // API server takes up the host's patch of the CRD after its validating configuration).
    let v2 = widgets(ns.client(), ns.name(), &group, "v2");
    eventually("a v1 Widget read as v2 through the plugin's conversion", READY, || async {
        let small = v2.get("small").await?;
        match small.data["spec"]["dimensions"]["size"].is_i64() {
            true => Ok(()),
            false => Err(anyhow!("not converted yet: {:?}", small.data)),
        }
    })
    .await?;
    let written = v2.create(&PostParams::default(), &widget(&group, "v2", "new", json!({ "dimensions": { "size": 4 } }))).await?;
    ensure!(written.data["spec"]["dimensions"]["size"] == json!(4), "v2 answer: {:?}", written.data);
    let as_v1 = v1.get("new").await?;
    ensure!(as_v1.data["spec"]["size"] == json!(4) && as_v1.data["spec"]["color"] == json!("blue"), "read as v1: {:?}", as_v1.data);
    let as_v2 = v2.get("small").await?;
    ensure!(as_v2.data["spec"]["dimensions"]["size"] == json!(3) && as_v2.data["spec"].get("size").is_none(), "read as v2: {:?}", as_v2.data);

    // A list converts every object.
    for i in 0..30 {
        v1.create(&PostParams::default(), &widget(&group, "v1", &format!("w{i}"), json!({ "size": i % 10 }))).await?;
    }
    let listed = v2.list(&ListParams::default()).await?;
    ensure!(listed.items.len() == 33, "{} Widgets listed as v2", listed.items.len());
    for item in &listed.items {
        ensure!(item.types.as_ref().is_some_and(|t| t.api_version == format!("{group}/v2")), "{:?}", item.types);
        ensure!(item.data["spec"]["dimensions"]["size"].is_i64(), "not converted: {:?}", item.data);
    }

    let validated = host.metric("kubewasm_webhook_answers_total", &[("plugin", "widgets"), ("hook", "validate"), ("outcome", "denied")]).await?;
    ensure!(validated >= 1.0, "no denial counted");
    let requests = host.metric("controller_runtime_webhook_requests_total", &[("webhook", "/convert/widgets"), ("code", "200")]).await?;
    ensure!(requests >= 1.0, "no conversion request counted");
    host.stop().await?;
    Ok(())
}

/// A removed plugin's configuration is removed, and until it is, its requests are let through:
/// a `Fail` policy never blocks the cluster on a plugin that is gone.
#[tokio::test]
async fn a_removed_plugins_hooks_stop_refusing_at_once() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("hooks-gone").await?;
    let group = format!("{}.hooks.kubewasm.io", unique_name("g"));
    apply_crd(ns.client(), &widget_crd(&group)?, READY).await?;
    let dir = PluginDir::new();
    dir.install("widgets", &hooks_guest(), Some(&format!("name = \"widgets\"\ngroup = \"{group}\"\nmode = \"good\"\n")));
    let port = free_port();
    let shared = Shared::unique();
    let lease = shared.lease.clone();
    let mut host = Host::start(webhook_host("hooks-gone", &dir, cp, ns.name(), &shared, port, port)).await?;
    host.wait_ready(READY).await?;
    let v1 = widgets(ns.client(), ns.name(), &group, "v1");
    wait_hooks_served(&v1, &group).await?;
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(ns.client().clone());
    ensure!(configurations.get_opt(&format!("{lease}-widgets")).await?.is_some(), "no configuration {lease}-widgets");

    dir.remove("widgets");
    eventually("the configuration to go", READY, || async {
        match configurations.get_opt(&format!("{lease}-widgets")).await? {
            None => Ok(()),
            Some(_) => Err(anyhow!("still there")),
        }
    })
    .await?;
    v1.create(&PostParams::default(), &widget(&group, "v1", "big", json!({ "size": 20 }))).await.context("a Widget once refused, with its plugin gone")?;
    host.stop().await?;
    Ok(())
}

/// Two replicas: the leader writes the configuration pointing at the standby, and the standby —
/// which never leads — answers every review.
#[tokio::test]
async fn a_standby_serves_hooks() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("hooks-standby").await?;
    let group = format!("{}.hooks.kubewasm.io", unique_name("g"));
    apply_crd(ns.client(), &widget_crd(&group)?, READY).await?;
    let dir = PluginDir::new();
    dir.install("widgets", &hooks_guest(), Some(&format!("name = \"widgets\"\ngroup = \"{group}\"\nmode = \"good\"\n")));
    let (leader_port, standby_port) = (free_port(), free_port());
    let shared = Shared::unique();
    let replica = |name: &str, port: u16| webhook_host(name, &dir, cp, ns.name(), &shared, port, standby_port);
    let mut leader = Host::start(replica("hooks-leader", leader_port)).await?;
    leader.wait_ready(READY).await?;
    leader.wait_metric("leader_election_master_status", &[], READY, |v| v == 1.0).await?;
    let mut standby = Host::start(replica("hooks-standby", standby_port)).await?;
    standby.wait_ready(READY).await?;

    let v1 = widgets(ns.client(), ns.name(), &group, "v1");
    wait_hooks_served(&v1, &group).await?;
    let stored = v1.create(&PostParams::default(), &widget(&group, "v1", "small", json!({ "size": 1 }))).await?;
    ensure!(stored.data["spec"]["color"] == json!("blue"), "not defaulted: {:?}", stored.data);
    ensure!(standby.metric("leader_election_master_status", &[]).await? == 0.0, "the standby leads");
    let answered = standby.metric("kubewasm_webhook_answers_total", &[("plugin", "widgets")]).await?;
    ensure!(answered >= 2.0, "the standby answered {answered} reviews");
    ensure!(leader.metric("kubewasm_webhook_answers_total", &[("plugin", "widgets")]).await? == 0.0, "the leader answered reviews");

    // The leader stops (a rolling restart): its plugins stop, but their configuration stays for
    // the replica still serving them.
    leader.stop().await?;
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(ns.client().clone());
    let name = format!("{}-widgets", shared.lease);
    ensure!(configurations.get_opt(&name).await?.is_some(), "the stopping leader removed {name}");
    let refused = v1.create(&PostParams::default(), &widget(&group, "v1", "big", json!({ "size": 20 }))).await;
    ensure!(refused.is_err(), "a Widget of size 20 was stored after the leader stopped");
    standby.stop().await?;
    Ok(())
}
