//! The webhooks suites' custom resource and plugin: a CRD `Widget` (versions v1 and v2) in a
//! group of each test's own, its objects, the `hooks-guest` plugin validating, defaulting and
//! converting them (or attacking the webhook server), and a host serving hooks.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::{ControlPlane, Host, HostConfig, PluginDir, WaitError, eventually, guests, unique_name};

/// How long hooks take to be served after a host starts.
const READY: Duration = Duration::from_secs(60);
/// The status ConfigMap of a webhooks test's host (in its namespace).
const STATUS: &str = "kubewasm-plugins";

/// The suite's plugin, built once.
pub fn hooks_guest() -> Vec<u8> {
    std::fs::read(guests::guest("hooks-guest", "hooks_guest")).expect("read the hooks guest")
}

/// A free loopback port for a host's webhook server (the configurations name it before the host
/// binds it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A CRD `Widget` in a group of the test's own, versions v1 (stored) and v2, any spec.
pub fn widget_crd(group: &str) -> Result<CustomResourceDefinition, serde_json::Error> {
    let version = |name: &str, storage: bool| {
        json!({ "name": name, "served": true, "storage": storage, "schema": { "openAPIV3Schema": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": true } } })
    };
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("widgets.{group}") },
        "spec": { "group": group, "scope": "Namespaced", "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
            "versions": [version("v1", true), version("v2", false)] },
    }))
}

pub fn widgets(client: &Client, ns: &str, group: &str, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, "Widget"), "widgets");
    Api::namespaced_with(client.clone(), ns, &resource)
}

pub fn widget(group: &str, version: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({ "apiVersion": format!("{group}/{version}"), "kind": "Widget", "metadata": { "name": name }, "spec": spec }))
        .expect("a Widget")
}

/// The names a test's hosts share: their Lease (the prefix of the configurations they write)
/// and the Secret of their certificate.
pub struct Shared {
    pub lease: String,
    pub secret: String,
}

impl Shared {
    /// Names no other test uses.
    pub fn unique() -> Self {
        Shared { lease: unique_name("hooks"), secret: unique_name("certs") }
    }
}

/// A host serving `ns`'s hooks on `port`, telling the API server to call `url_port`, with its
/// certificate in a Secret of `ns`; leader-elected on the shared Lease.
pub fn webhook_host(name: &str, dir: &PluginDir, cp: &ControlPlane, ns: &str, shared: &Shared, port: u16, url_port: u16) -> HostConfig {
    HostConfig::new(name, dir.path(), cp.kubeconfig_path())
        .namespace(ns)
        .status_configmap(ns, STATUS)
        .leader_elect(ns, &shared.lease)
        .arg(format!("--identity-namespace={ns}"))
        .arg(format!("--webhook-bind-address=127.0.0.1:{port}"))
        .arg(format!("--webhook-url=https://127.0.0.1:{url_port}"))
        .arg(format!("--webhook-cert-secret={}", shared.secret))
}

/// Waits until the API server calls the host's validating hook: a Widget over the bound is
/// refused with the plugin's message.
pub async fn wait_hooks_served(api: &Api<DynamicObject>, group: &str) -> Result<kube::core::Status, WaitError> {
    eventually("the validating hook to refuse a Widget of size 20", READY, || async {
        let name = unique_name("probe");
        match api.create(&PostParams::default(), &widget(group, "v1", &name, json!({ "size": 20 }))).await {
            Err(kube::Error::Api(status)) if status.message.contains("size must be at most 10") => Ok(*status),
            Err(e) => Err(format!("not yet: {e}")),
            // Not a Widget of the test's: it goes again.
            Ok(_) => Err(match api.delete(&name, &Default::default()).await {
                Ok(_) => "not yet: a Widget of size 20 was stored".to_string(),
                Err(e) => format!("not yet: a Widget of size 20 was stored, and deleting it failed: {e}"),
            }),
        }
    })
    .await
}

/// Waits until the API server calls `plugin`'s validating hook for Widgets of `group`: a probe's
/// answer, whatever it is, is counted by `host` (a hook failing open lets the probe through, so
/// its answer alone cannot tell).
pub async fn wait_hook_called(host: &Host, api: &Api<DynamicObject>, group: &str, plugin: &str) -> Result<(), WaitError> {
    eventually(&format!("the API server to call plugin {plugin}'s hook"), READY, || async {
        let name = unique_name("probe");
        if api.create(&PostParams::default(), &widget(group, "v1", &name, json!({ "size": 1 }))).await.is_ok() {
            let _ = api.delete(&name, &Default::default()).await;
        }
        match host.metric("kubewasm_webhook_answers_total", &[("plugin", plugin)]).await {
            Ok(answers) if answers > 0.0 => Ok(()),
            Ok(_) => Err("not yet".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
}
