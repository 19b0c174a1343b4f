//! What the end-to-end suites of the controller runtime and hot reload share: the
//! `e2e-guest`'s object conventions (labels and annotations, see `tests/guests/e2e`), waiting for
//! its outputs, Events, and hosts configured for one test namespace.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Result, anyhow};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kubewasm_tests::{HostConfig, TestNamespace, eventually};
use serde_json::json;

pub use kubewasm_tests::plugindir::{INPUT, PRIMARY};
/// The annotation the guest's `update` mode writes on the primary.
pub const OUTPUT: &str = "e2e.kubewasm.io/output";
/// Makes a reconcile sleep this many milliseconds first.
pub const SLEEP_MS: &str = "e2e.kubewasm.io/sleep-ms";
/// `"true"` makes a reconcile fail (a Warning Event).
pub const FAIL: &str = "e2e.kubewasm.io/fail";
/// Names a plugin that traps when it reconciles the object.
pub const TRAP: &str = "e2e.kubewasm.io/trap";
/// Names a variant of the plugin that traps when it reconciles the object.
pub const TRAP_VARIANT: &str = "e2e.kubewasm.io/trap-variant";
/// Names a plugin that computes forever when it reconciles the object (stopped at its deadline).
pub const SPIN: &str = "e2e.kubewasm.io/spin";
/// `"true"` lets `finalize` finish.
pub const RELEASE: &str = "e2e.kubewasm.io/release";

/// How long a host may take to be ready.
pub const READY: Duration = Duration::from_secs(60);

/// How long a state may take to converge.
pub const CONVERGE: Duration = Duration::from_secs(60);

/// The status ConfigMap each test's host uses (in the test namespace, so hosts don't share it).
pub const STATUS: &str = "kubewasm-plugins";

/// `kubewasm rbac ARGS`, its YAML.
pub async fn rbac(args: &[String]) -> Result<String> {
    Ok(kubewasm_tests::host::rbac(args).await?)
}

/// The arguments that make `kubewasm rbac` print for a host serving only `ns`, with the plugins'
/// ServiceAccounts and the status ConfigMap there.
pub fn rbac_args(dir: &Path, ns: &str) -> Vec<String> {
    vec![format!("--plugins={}", dir.display()), format!("--identity-namespace={ns}"), format!("--namespace={ns}"), format!("--status-configmap={ns}/{STATUS}")]
}

/// `kubectl apply` of `yaml`, as the control plane's admin.
pub async fn apply(cp: &kubewasm_tests::ControlPlane, yaml: &str) -> Result<()> {
    cp.kubectl()?.run_with_stdin(&["apply", "-f", "-"], Some(yaml)).await?;
    Ok(())
}

/// A host for one test: serving only `ns`, with its status ConfigMap (and plugin Events) there.
pub fn host_config(name: &str, plugins: &Path, kubeconfig: &Path, ns: &str) -> HostConfig {
    HostConfig::new(name, plugins, kubeconfig).namespace(ns).status_configmap(ns, STATUS)
}

/// A primary ConfigMap of the guest with `input`.
/// The same input for every named primary.
pub fn inputs(names: &[&str], input: &str) -> BTreeMap<String, String> {
    names.iter().map(|n| (n.to_string(), input.to_string())).collect()
}

pub fn primary(name: &str, input: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([(PRIMARY.to_string(), "yes".to_string())].into()),
            annotations: Some([(INPUT.to_string(), input.to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Creates primaries `k0`..`k{count-1}` with input `1`, the first `trapping` of them asking
/// variant `variant` to trap (a new version that breaks on objects the one before handled);
/// returns their inputs.
pub async fn create_trapping_primaries(cms: &Api<ConfigMap>, count: usize, trapping: usize, variant: &str) -> Result<BTreeMap<String, String>> {
    let inputs: BTreeMap<String, String> = (0..count).map(|i| (format!("k{i}"), "1".to_string())).collect();
    for (i, name) in inputs.keys().enumerate() {
        let mut object = primary(name, "1");
        if i < trapping {
            object.metadata.annotations.get_or_insert_with(Default::default).insert(TRAP_VARIANT.into(), variant.into());
        }
        cms.create(&PostParams::default(), &object).await?;
    }
    Ok(inputs)
}

pub async fn create_primaries(cms: &Api<ConfigMap>, inputs: &BTreeMap<String, String>) -> Result<()> {
    for (name, input) in inputs {
        cms.create(&PostParams::default(), &primary(name, input)).await?;
    }
    Ok(())
}

/// Keeps changing the inputs of `names`, round after round, pausing `pause` after each change,
/// until aborted.
pub fn churn(cms: &Api<ConfigMap>, names: &[String], pause: Duration) -> tokio::task::JoinHandle<()> {
    let (cms, names) = (cms.clone(), names.to_vec());
    tokio::spawn(async move {
        for round in 1.. {
            for name in &names {
                let _ = set_input(&cms, name, &round.to_string()).await;
                tokio::time::sleep(pause).await;
            }
        }
    })
}

/// Merge-patches annotations (`None` removes one): no resourceVersion, so it never conflicts.
pub async fn annotate(cms: &Api<ConfigMap>, name: &str, annotations: &[(&str, Option<&str>)]) -> Result<ConfigMap> {
    let map: serde_json::Map<String, serde_json::Value> = annotations.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    Ok(cms.patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": map}}))).await?)
}

pub async fn set_input(cms: &Api<ConfigMap>, name: &str, input: &str) -> Result<ConfigMap> {
    annotate(cms, name, &[(INPUT, Some(input))]).await
}

/// The data of the output ConfigMap that `plugin` wrote for `primary`, if there is one.
pub async fn output(cms: &Api<ConfigMap>, primary: &str, plugin: &str) -> Result<Option<BTreeMap<String, String>>> {
    Ok(cms.get_opt(&format!("{primary}.{plugin}")).await?.map(|cm| cm.data.unwrap_or_default()))
}

/// What an output must say.
#[derive(Debug, Clone, Default)]
pub struct Want<'a> {
    pub variant: Option<&'a str>,
    pub host: Option<&'a str>,
}

/// Waits until `plugin`'s output for every primary in `inputs` carries that primary's input
/// (and the wanted variant and host). The error lists every output that is not there yet.
pub async fn wait_outputs(cms: &Api<ConfigMap>, plugin: &str, inputs: &BTreeMap<String, String>, want: Want<'_>) -> Result<()> {
    wait_outputs_within(cms, plugin, inputs, want, CONVERGE).await
}

/// [`wait_outputs`] with another timeout.
pub async fn wait_outputs_within(cms: &Api<ConfigMap>, plugin: &str, inputs: &BTreeMap<String, String>, want: Want<'_>, timeout: Duration) -> Result<()> {
    let what = format!("{plugin}'s outputs to show {} inputs ({want:?})", inputs.len());
    eventually(&what, timeout, || async {
        let mut wrong = Vec::new();
        for (name, input) in inputs {
            let data = output(cms, name, plugin).await?;
            let ok = data.as_ref().is_some_and(|d| {
                d.get("input") == Some(input)
                    && want.variant.is_none_or(|v| d.get("variant").map(String::as_str) == Some(v))
                    && want.host.is_none_or(|h| d.get("host").map(String::as_str) == Some(h))
            });
            if !ok {
                wrong.push(format!("{name}: want input={input}, have {data:?}"));
            }
        }
        if wrong.is_empty() { Ok(()) } else { Err(anyhow!("{}", wrong.join("; "))) }
    })
    .await?;
    Ok(())
}

/// The events.k8s.io/v1 Events of a namespace.
pub async fn events(client: &Client, ns: &str) -> Result<Vec<Event>> {
    Ok(Api::<Event>::namespaced(client.clone(), ns).list(&ListParams::default()).await?.items)
}

/// One line per Event, for failure messages.
pub fn describe_events(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| {
            let regarding = e.regarding.as_ref().and_then(|r| r.name.clone()).unwrap_or_default();
            format!(
                "{} {} on {regarding} by {}: {}",
                e.type_.as_deref().unwrap_or("?"),
                e.reason.as_deref().unwrap_or("?"),
                e.reporting_controller.as_deref().unwrap_or("?"),
                e.note.as_deref().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Waits for an Event about object `regarding` with `reason` whose note contains `needle`.
pub async fn wait_event(client: &Client, ns: &str, regarding: &str, reason: &str, needle: &str) -> Result<Event> {
    let what = format!("an Event {reason} on {regarding} saying {needle:?}");
    Ok(eventually(&what, CONVERGE, || async {
        let all = events(client, ns).await?;
        all.iter()
            .find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(regarding)
                    && e.note.as_deref().is_some_and(|n| n.contains(needle))
            })
            .cloned()
            .ok_or_else(|| anyhow!("Events so far:\n  {}", describe_events(&all)))
    })
    .await?)
}

/// Checks that the only Warning Events in the namespace are about `allowed` objects.
///
/// Absence cannot be polled for, so first a sentinel: the primary `sentinel` is made to fail,
/// and its `ReconcileFailed` Warning awaited. The host sends Events in order, so any Warning
/// that an earlier reconcile produced has been sent by then.
pub async fn assert_no_warnings_but_sentinel(ns: &TestNamespace, sentinel: &str) -> Result<()> {
    let cms: Api<ConfigMap> = ns.api();
    let mut object = primary(sentinel, "sentinel");
    object.metadata.annotations.get_or_insert_with(Default::default).insert(FAIL.into(), "true".into());
    cms.create(&PostParams::default(), &object).await?;
    wait_event(ns.client(), ns.name(), sentinel, "ReconcileFailed", "asks to fail").await?;
    let all = events(ns.client(), ns.name()).await?;
    let warnings: Vec<Event> = all
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) != Some(sentinel))
        .collect();
    if warnings.is_empty() { Ok(()) } else { Err(anyhow!("unexpected Warning Events:\n  {}", describe_events(&warnings))) }
}
