//! End-to-end tests of declarative plugins (issue 24): the real `kubewasm run` binary runs the
//! suite's `composite-guest` (`tests/guests/composite`), whose parents (`Composite` objects of
//! `e2e.kubewasm.io/v1`) spell out the children and status it answers with, against the local
//! control plane. Each test checks one of the host's promises (Metacontroller's semantics):
//! claiming, adoption and release, no takeover of an object that is not a child (by one host or
//! a shard ring), the update strategies, delete before create, validation,
//! pruning only after every apply succeeded, the status always written with
//! `observedGeneration`, finalize with and without the plugin, related objects.
//!
//! `cargo test -p kubewasm-tests --test declarative`

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kubewasm_tests::{ControlPlane, Host, PluginDir, TestNamespace, apply_crd, eventually, guests};
use serde_json::{Value, json};
use support::*;

const READY: Duration = Duration::from_secs(60);
const CONTROLLER_UID: &str = "kubewasm.io/controller-uid";
/// How long to watch for something that must not happen.
const QUIET: Duration = Duration::from_secs(4);

fn composite_crd() -> CustomResourceDefinition {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "composites.e2e.kubewasm.io"},
        "spec": {
            "group": "e2e.kubewasm.io",
            "scope": "Namespaced",
            "names": {"plural": "composites", "singular": "composite", "kind": "Composite", "listKind": "CompositeList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": open, "status": open}}},
            }],
        },
    }))
    .expect("the Composite CRD")
}

/// One test's world: its namespace, a host running the composite guest with `settings` (TOML
/// lines besides its name) — or the first of a shard ring's replicas, each running it —, and the
/// APIs of parents and ConfigMaps.
struct World {
    /// The plugin's name.
    name: String,
    ns: TestNamespace,
    host: Host,
    /// The ring's other replicas.
    others: Vec<Host>,
    dir: PluginDir,
    parents: Api<DynamicObject>,
    resource: ApiResource,
    cms: Api<ConfigMap>,
    client: Client,
}

impl World {
    async fn start(prefix: &str, settings: &[&str]) -> Result<World> {
        World::start_replicas(prefix, settings, 1).await
    }

    /// With `replicas` hosts in one shard ring (one host alone, without a ring).
    async fn start_replicas(prefix: &str, settings: &[&str], replicas: usize) -> Result<World> {
        let cp = ControlPlane::shared().await;
        let client = cp.client().await?;
        let resource = apply_crd(&client, &composite_crd(), CONVERGE).await?;
        let ns = cp.namespace(prefix).await?;
        let dir = PluginDir::new();
        let mut toml = format!("name = \"{prefix}\"\n");
        for line in settings {
            toml.push_str(line);
            toml.push('\n');
        }
        guests::install(&guests::guest("composite-guest", "composite_guest"), dir.path(), prefix, Some(&toml));
        let mut hosts = Vec::new();
        for i in 0..replicas {
            let config = host_config(prefix, dir.path(), cp.kubeconfig_path(), ns.name());
            let config = if replicas == 1 { config } else { config.instance(&format!("{prefix}-{i}")).shard_ring(ns.name(), "leader", "ring") };
            let mut host = Host::start(config).await?;
            host.wait_ready(READY).await?;
            hosts.push(host);
        }
        let host = hosts.remove(0);
        let parents = Api::namespaced_with(client.clone(), ns.name(), &resource);
        let cms = ns.api();
        Ok(World { name: prefix.into(), ns, host, others: hosts, dir, parents, resource, cms, client })
    }

    async fn create(&self, name: &str, spec: Value) -> Result<DynamicObject> {
        let parent = DynamicObject::new(name, &self.resource).data(json!({ "spec": spec }));
        Ok(self.parents.create(&PostParams::default(), &parent).await?)
    }

    /// Replaces the parent's spec as a whole (a new generation).
    async fn respec(&self, name: &str, spec: Value) -> Result<DynamicObject> {
        Ok(eventually(&format!("{name}'s spec to be replaced"), CONVERGE, || async {
            let mut parent = self.parents.get(name).await?;
            parent.data["spec"] = spec.clone();
            self.parents.replace(name, &PostParams::default(), &parent).await
        })
        .await?)
    }

    /// Waits until the parent's status reports its current generation, and returns it.
    async fn synced(&self, name: &str) -> Result<DynamicObject> {
        Ok(eventually(&format!("{name}'s status to observe its generation"), CONVERGE, || async {
            let parent = self.parents.get(name).await?;
            let observed = parent.data.pointer("/status/observedGeneration").and_then(Value::as_i64);
            if observed.is_some() && observed == parent.metadata.generation { Ok(parent) } else { Err(anyhow!("status {:?}", parent.data.get("status"))) }
        })
        .await?)
    }

    /// Waits until ConfigMap `name` exists and `check` accepts it.
    async fn child(&self, name: &str, what: &str, check: impl Fn(&ConfigMap) -> bool) -> Result<ConfigMap> {
        Ok(eventually(&format!("ConfigMap {name} {what}"), CONVERGE, || async {
            match self.cms.get_opt(name).await? {
                Some(cm) if check(&cm) => Ok(cm),
                Some(cm) => Err(anyhow!("it is {:?} {:?} owners {:?}", cm.metadata.labels, cm.data, cm.metadata.owner_references)),
                None => Err(anyhow!("it does not exist")),
            }
        })
        .await?)
    }

    async fn gone(&self, name: &str) -> Result<()> {
        Ok(eventually(&format!("ConfigMap {name} to be gone"), CONVERGE, || async {
            match self.cms.get_opt(name).await? {
                None => Ok(()),
                Some(cm) => Err(anyhow!("still there (deleting: {})", cm.metadata.deletion_timestamp.is_some())),
            }
        })
        .await?)
    }

    /// How many reconciles the plugin has finished.
    async fn reconciles(&self) -> Result<f64> {
        let text = self.host.metrics().await?;
        let ours = format!("controller=\"{}\"", self.name);
        Ok(text
            .lines()
            .filter(|l| l.starts_with("controller_runtime_reconcile_total{") && l.contains(&ours))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }
}

fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn data_of(cm: &ConfigMap, key: &str) -> Option<String> {
    cm.data.as_ref().and_then(|d| d.get(key).cloned())
}

fn controlled_by(cm: &ConfigMap, parent: &DynamicObject) -> bool {
    cm.metadata.owner_references.iter().flatten().any(|r| r.controller == Some(true) && Some(&r.uid) == parent.metadata.uid.as_ref())
}

/// Children are created owned by their parent (controller owner reference, the selector's
/// label), its status is replaced and carries its generation; a sync that finds everything as
/// desired writes nothing at all.
#[tokio::test]
async fn children_are_created_owned_and_a_steady_state_writes_nothing() -> Result<()> {
    let w = World::start("steady", &["strategy = \"in-place\""]).await?;
    let parent = w.create("p", json!({"children": [config_map("c1", json!({"a": "1"})), config_map("c2", json!({}))], "status": {"phase": "Ready"}})).await?;
    for name in ["c1", "c2"] {
        let cm = w.child(name, "owned by p", |cm| controlled_by(cm, &parent)).await?;
        ensure!(cm.labels().get(CONTROLLER_UID) == parent.metadata.uid.as_ref(), "{name} carries the parent's uid label: {:?}", cm.labels());
    }
    let synced = eventually("the status to list both children", CONVERGE, || async {
        let p = w.synced("p").await?;
        let observed = p.data.pointer("/status/observed").cloned().unwrap_or_default();
        if observed == json!(["c1", "c2"]) && p.data.pointer("/status/phase") == Some(&json!("Ready")) {
            Ok(p)
        } else {
            Err(anyhow!("status {:?}", p.data.get("status")))
        }
    })
    .await?;

    // A change that does not bump the generation (an annotation) syncs again: nothing to write.
    let versions = |cms: &[ConfigMap]| cms.iter().map(|c| (c.name_any(), c.resource_version())).collect::<BTreeMap<_, _>>();
    let before = versions(&w.cms.list(&ListParams::default()).await?.items);
    let done = w.reconciles().await?;
    let touched = w.parents.patch("p", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"touch": "1"}}}))).await?;
    eventually("another sync of p", CONVERGE, || async { if w.reconciles().await? > done { Ok(()) } else { Err(anyhow!("not yet")) } }).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = versions(&w.cms.list(&ListParams::default()).await?.items);
    ensure!(before == after, "the children were written again: {before:?} -> {after:?}");
    let now = w.parents.get("p").await?;
    ensure!(now.resource_version() == touched.resource_version(), "the status was written again: {:?}", now.data.get("status"));
    ensure!(synced.metadata.generation == now.metadata.generation);
    w.host.stop().await?;
    Ok(())
}

/// `recreate`: a changed desired state deletes the child (its UID as precondition) and creates
/// it anew once it is gone; fields added by others trigger nothing, and there is no loop.
#[tokio::test]
async fn recreate_deletes_before_it_creates_and_never_loops() -> Result<()> {
    let w = World::start("recreate", &["strategy = \"recreate\""]).await?;
    w.create("p", json!({"children": [config_map("c", json!({"value": "v1"}))]})).await?;
    let first = w.child("c", "with v1", |cm| data_of(cm, "value").as_deref() == Some("v1")).await?;
    let uid = first.uid();
    w.cms.patch("c", &PatchParams::default(), &Patch::Merge(json!({"data": {"side-effect": "injected"}}))).await?;
    tokio::time::sleep(QUIET).await;
    let same = w.cms.get("c").await?;
    ensure!(same.uid() == uid && data_of(&same, "side-effect").as_deref() == Some("injected"), "a field added by someone else recreated the child");

    w.respec("p", json!({"children": [config_map("c", json!({"value": "v2"}))]})).await?;
    let second = w.child("c", "recreated with v2", |cm| data_of(cm, "value").as_deref() == Some("v2")).await?;
    ensure!(second.uid() != uid, "recreate made a new object");
    ensure!(data_of(&second, "side-effect").is_none(), "the new object is the desired one only");
    w.cms.patch("c", &PatchParams::default(), &Patch::Merge(json!({"data": {"side-effect": "again"}}))).await?;
    tokio::time::sleep(QUIET).await;
    ensure!(w.cms.get("c").await?.uid() == second.uid(), "no recreate loop");
    w.host.stop().await?;
    Ok(())
}

/// `on-delete`: an existing child is never updated; deleted by hand, it comes back as desired.
#[tokio::test]
async fn on_delete_never_updates_and_recreates_what_was_deleted() -> Result<()> {
    let w = World::start("ondelete", &[]).await?;
    w.create("p", json!({"children": [config_map("c", json!({"value": "v1"}))]})).await?;
    w.child("c", "with v1", |cm| data_of(cm, "value").as_deref() == Some("v1")).await?;
    w.respec("p", json!({"children": [config_map("c", json!({"value": "v2"}))]})).await?;
    w.synced("p").await?;
    tokio::time::sleep(QUIET).await;
    ensure!(data_of(&w.cms.get("c").await?, "value").as_deref() == Some("v1"), "on-delete updated the child");
    w.cms.delete("c", &DeleteParams::default()).await?;
    w.child("c", "created again with v2", |cm| data_of(cm, "value").as_deref() == Some("v2")).await?;
    w.host.stop().await?;
    Ok(())
}

/// `in-place`: the child keeps its identity and gets the new desired state; an edit of a field
/// the plugin sets is put back, an edit of another field stays.
#[tokio::test]
async fn in_place_applies_over_the_child_and_puts_desired_fields_back() -> Result<()> {
    let w = World::start("inplace", &["strategy = \"in-place\""]).await?;
    w.create("p", json!({"children": [config_map("c", json!({"value": "v1", "dropped": "in v2"}))]})).await?;
    let first = w.child("c", "with v1", |cm| data_of(cm, "value").as_deref() == Some("v1")).await?;
    w.respec("p", json!({"children": [config_map("c", json!({"value": "v2"}))]})).await?;
    // The fields the child was created with are the plugin's applied ones: one no longer
    // desired goes.
    let second = w
        .child("c", "updated to v2, without the dropped field", |cm| data_of(cm, "value").as_deref() == Some("v2") && data_of(cm, "dropped").is_none())
        .await?;
    ensure!(second.uid() == first.uid(), "in-place kept the object");
    w.cms.patch("c", &PatchParams::default(), &Patch::Merge(json!({"data": {"value": "edited", "mine": "kept"}}))).await?;
    w.child("c", "with v2 again and the other field kept", |cm| {
        data_of(cm, "value").as_deref() == Some("v2") && data_of(cm, "mine").as_deref() == Some("kept")
    })
    .await?;
    w.host.stop().await?;
    Ok(())
}

/// H5: an object that is not a parent's child is never taken over by a child of the same name:
/// the parent's sync creates its children, the API server refuses the one whose name is taken,
/// and the parent gets a Warning Event saying so; the object keeps its data and owners. In a
/// shard ring, where a replica's cache holds only its shard's children, as by a host alone.
async fn never_takes_over(w: &World) -> Result<()> {
    let victim = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("victim".into()), ..Default::default() },
        data: Some([("owner".to_string(), "someone else".to_string())].into()),
        ..Default::default()
    };
    let victim = w.cms.create(&PostParams::default(), &victim).await?;
    let parent = w.create("p", json!({"children": [config_map("victim", json!({"owner": "the plugin"})), config_map("mine", json!({}))]})).await?;
    w.child("mine", "owned by p", |cm| controlled_by(cm, &parent)).await?;
    wait_event(&w.client, w.ns.name(), "p", "ReconcileFailed", "/victim exists and is not a child of this parent").await?;
    let after = w.cms.get("victim").await?;
    ensure!(after.data == victim.data, "victim's data was taken over: {:?}", after.data);
    ensure!(after.metadata.owner_references == victim.metadata.owner_references, "victim was given owners: {:?}", after.metadata.owner_references);
    ensure!(after.resource_version() == victim.resource_version(), "victim was written");
    Ok(())
}

#[tokio::test]
async fn an_object_named_as_a_child_is_never_taken_over_by_a_host_alone() -> Result<()> {
    let w = World::start("takeover", &["strategy = \"in-place\""]).await?;
    never_takes_over(&w).await?;
    w.host.stop().await?;
    Ok(())
}

#[tokio::test]
async fn an_object_named_as_a_child_is_never_taken_over_in_a_shard_ring() -> Result<()> {
    let w = World::start_replicas("takeover-ring", &["strategy = \"in-place\""], 2).await?;
    never_takes_over(&w).await?;
    for host in w.others {
        host.stop().await?;
    }
    w.host.stop().await?;
    Ok(())
}

/// With the parent's `spec.selector`, a matching orphan is adopted (not recreated, and with
/// `on-delete` not changed either); one that stops matching is released (its owner reference
/// removed), not deleted.
#[tokio::test]
async fn matching_orphans_are_adopted_and_children_that_stop_matching_released() -> Result<()> {
    let w = World::start("adopt", &["selector = \"spec\""]).await?;
    let orphan = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("o".into()), labels: Some([("app".to_string(), "a".to_string())].into()), ..Default::default() },
        data: Some([("origin".to_string(), "test".to_string())].into()),
        ..Default::default()
    };
    let orphan = w.cms.create(&PostParams::default(), &orphan).await?;
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o", "labels": {"app": "a"}}, "data": {"origin": "plugin"}});
    let parent = w.create("p", json!({"selector": {"matchLabels": {"app": "a"}}, "children": [desired]})).await?;
    let adopted = w.child("o", "adopted by p", |cm| controlled_by(cm, &parent)).await?;
    ensure!(adopted.uid() == orphan.uid(), "adopted, not recreated");
    ensure!(data_of(&adopted, "origin").as_deref() == Some("test"), "on-delete leaves an adopted child as it was");

    w.respec("p", json!({"selector": {"matchLabels": {"app": "other"}}, "children": []})).await?;
    let released = w.child("o", "released", |cm| !controlled_by(cm, &parent)).await?;
    ensure!(released.uid() == orphan.uid(), "released, not deleted");
    w.synced("p").await?;
    ensure!(w.cms.get_opt("o").await?.is_some(), "a released child is not pruned");
    w.host.stop().await?;
    Ok(())
}

/// An invalid desired child (here: in another namespace) fails the whole sync with a Warning
/// Event naming it, and nothing changes: not the other children, not the status.
#[tokio::test]
async fn an_invalid_desired_child_fails_the_sync_and_changes_nothing() -> Result<()> {
    let w = World::start("invalid", &["strategy = \"in-place\""]).await?;
    w.create("p", json!({"children": [config_map("c", json!({"value": "v1"}))], "status": {"phase": "One"}})).await?;
    w.child("c", "with v1", |cm| data_of(cm, "value").as_deref() == Some("v1")).await?;
    let before = w.synced("p").await?;
    let elsewhere = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "kube-system"}});
    w.respec("p", json!({"children": [config_map("c", json!({"value": "v2"})), elsewhere], "status": {"phase": "Two"}})).await?;
    wait_event(&w.client, w.ns.name(), "p", "ReconcileFailed", "a namespaced parent's children live in its own namespace").await?;
    let now = w.parents.get("p").await?;
    ensure!(now.data.pointer("/status/phase") == Some(&json!("One")), "the status was written: {:?}", now.data.get("status"));
    ensure!(now.data.pointer("/status/observedGeneration") == before.data.pointer("/status/observedGeneration"));
    ensure!(data_of(&w.cms.get("c").await?, "value").as_deref() == Some("v1"), "the valid child was changed");
    w.host.stop().await?;
    Ok(())
}

/// Children no longer desired are pruned only once every apply succeeded: an apply the API
/// server refuses keeps the old child, and the status is written all the same (with the new
/// generation); once the answer is fixed, the old child goes.
#[tokio::test]
async fn pruning_waits_for_every_apply_and_the_status_is_always_written() -> Result<()> {
    let w = World::start("prune", &["strategy = \"in-place\""]).await?;
    w.create("p", json!({"children": [config_map("old", json!({"a": "1"}))]})).await?;
    w.child("old", "to exist", |_| true).await?;
    // ConfigMap data values are strings: the API server refuses this one.
    let refused = config_map("refused", json!({"n": 5}));
    w.respec("p", json!({"children": [config_map("new", json!({"a": "2"})), refused], "status": {"phase": "Two"}})).await?;
    w.child("new", "to exist", |_| true).await?;
    wait_event(&w.client, w.ns.name(), "p", "ReconcileFailed", "creating ConfigMap").await?;
    let parent = w.synced("p").await?;
    ensure!(parent.data.pointer("/status/phase") == Some(&json!("Two")), "the status is written even though an apply failed");
    tokio::time::sleep(QUIET).await;
    ensure!(w.cms.get_opt("old").await?.is_some(), "old was pruned although an apply failed");
    w.respec("p", json!({"children": [config_map("new", json!({"a": "2"}))]})).await?;
    w.gone("old").await?;
    ensure!(w.cms.get_opt("refused").await?.is_none());
    w.host.stop().await?;
    Ok(())
}

/// With a finalizer, a deleted parent stays until `finalize` says it is finalized; its
/// children are deleted meanwhile (finalize answers none).
#[tokio::test]
async fn finalize_runs_before_the_parent_goes() -> Result<()> {
    let w = World::start("finalize", &["finalizer = \"e2e.kubewasm.io/cleanup\""]).await?;
    w.create("p", json!({"children": [config_map("c", json!({}))], "finalized": false})).await?;
    w.child("c", "to exist", |_| true).await?;
    eventually("p to carry the finalizer", CONVERGE, || async {
        let p = w.parents.get("p").await?;
        if p.finalizers().iter().any(|f| f == "e2e.kubewasm.io/cleanup") { Ok(()) } else { Err(anyhow!("{:?}", p.finalizers())) }
    })
    .await?;
    w.parents.delete("p", &DeleteParams::default()).await?;
    w.gone("c").await?;
    let held = eventually("finalize to report on p", CONVERGE, || async {
        let p = w.parents.get("p").await?;
        if p.data.pointer("/status/finalizing") == Some(&json!(true)) { Ok(p) } else { Err(anyhow!("{:?}", p.data.get("status"))) }
    })
    .await?;
    ensure!(held.metadata.deletion_timestamp.is_some(), "p is being deleted");
    w.parents.patch("p", &PatchParams::default(), &Patch::Merge(json!({"spec": {"finalized": true}}))).await?;
    eventually("p to go", CONVERGE, || async { if w.parents.get_opt("p").await?.is_none() { Ok(()) } else { Err(anyhow!("still there")) } }).await?;
    w.host.stop().await?;
    Ok(())
}

/// Without its plugin, a parent held by its finalizer is let go by `kubewasm finalizers
/// release`, and the API server's garbage collector removes its children through their owner
/// references: nothing needs the plugin to find them.
#[tokio::test]
async fn without_the_plugin_the_garbage_collector_removes_the_children() -> Result<()> {
    let w = World::start("orphaned", &["finalizer = \"e2e.kubewasm.io/cleanup\""]).await?;
    w.create("p", json!({"children": [config_map("c1", json!({})), config_map("c2", json!({}))]})).await?;
    w.child("c1", "to exist", |_| true).await?;
    w.child("c2", "to exist", |_| true).await?;
    eventually("p to carry the finalizer", CONVERGE, || async {
        if w.parents.get("p").await?.finalizers().is_empty() { Err(anyhow!("not yet")) } else { Ok(()) }
    })
    .await?;
    w.dir.remove("orphaned");
    wait_event(&w.client, w.ns.name(), "p", "FinalizerLeftBehind", "kubewasm finalizers release orphaned").await?;
    w.parents.delete("p", &DeleteParams::default()).await?;
    let bin = tokio::task::spawn_blocking(kubewasm_tests::kubewasm_binary).await??;
    let cp = ControlPlane::shared().await;
    let output = tokio::process::Command::new(bin)
        .args(["finalizers", "release", "orphaned"])
        .arg(format!("--kubeconfig={}", cp.kubeconfig_path().display()))
        .arg(format!("--status-configmap={}/{STATUS}", w.ns.name()))
        .output()
        .await?;
    ensure!(output.status.success(), "kubewasm finalizers release: {}", String::from_utf8_lossy(&output.stderr));
    // The garbage collector learns a new CRD's kind at its discovery resync (~30 s).
    let slow = Duration::from_secs(120);
    eventually("p and its children to go", slow, || async {
        let left: Vec<String> = w.cms.list(&ListParams::default().labels(CONTROLLER_UID)).await?.items.iter().map(|c| c.name_any()).collect();
        match (w.parents.get_opt("p").await?, left.is_empty()) {
            (None, true) => Ok(()),
            (parent, _) => Err(anyhow!("parent there: {}, children: {left:?}", parent.is_some())),
        }
    })
    .await
    .context("the garbage collector")?;
    w.host.stop().await?;
    Ok(())
}

/// `customize` names related objects: they reach `sync` (here copied into children), and a
/// change to one syncs its parent again.
#[tokio::test]
async fn related_objects_reach_sync_and_their_changes_resync_the_parent() -> Result<()> {
    let w = World::start("related", &["strategy = \"in-place\""]).await?;
    let source = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("source".into()),
            labels: Some([("e2e.kubewasm.io/related".to_string(), "yes".to_string())].into()),
            ..Default::default()
        },
        data: Some([("k".to_string(), "1".to_string())].into()),
        ..Default::default()
    };
    w.cms.create(&PostParams::default(), &source).await?;
    w.create("p", json!({"related": [{"namespace": w.ns.name(), "names": ["source"]}], "copyRelated": true})).await?;
    w.child("source-copy", "with k=1", |cm| data_of(cm, "k").as_deref() == Some("1")).await?;
    let parent = w.synced("p").await?;
    ensure!(parent.data.pointer("/status/related") == Some(&json!(["source"])), "{:?}", parent.data.get("status"));
    w.cms.patch("source", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "2"}}))).await?;
    w.child("source-copy", "with k=2", |cm| data_of(cm, "k").as_deref() == Some("2")).await?;
    w.host.stop().await?;
    Ok(())
}

/// A declarative candidate runs in the shadow of the live version like any other: compared by
/// the writes its answer makes (dry runs, never stored): the same answer agrees, another
/// differs.
#[tokio::test]
async fn a_candidates_answer_is_compared_with_the_live_ones() -> Result<()> {
    const SHADOW: &str = "kubewasm_shadow_reconciles_total";
    const RELOADS: &str = "kubewasm_plugin_reloads_total";
    let mut w = World::start("shadow", &["strategy = \"in-place\""]).await?;
    let shadow = |result| [("plugin", "shadow"), ("result", result)];
    let wasm = std::fs::read(guests::guest("composite-guest", "composite_guest"))?;
    // The same build and settings: the same answers.
    w.dir.write_atomic("shadow.next.toml", b"name = \"shadow\"\nstrategy = \"in-place\"\n");
    w.dir.write_atomic("shadow.next.wasm", &wasm);
    w.host.wait_metric(RELOADS, &[("plugin", "shadow"), ("result", "candidate")], READY, |n| n >= 1.0).await.context("the candidate starts")?;
    w.parents
        .create(&PostParams::default(), &DynamicObject::new("same", &w.resource).data(json!({"spec": {"children": [config_map("c", json!({}))]}})))
        .await?;
    w.host.wait_metric(SHADOW, &shadow("same"), CONVERGE, |n| n >= 1.0).await.context("the same answer agrees")?;

    // Another answer: every child renamed.
    w.dir.write_atomic("shadow.next.toml", b"name = \"shadow\"\nstrategy = \"in-place\"\nsuffix = \"-next\"\n");
    w.host.wait_metric(RELOADS, &[("plugin", "shadow"), ("result", "candidate")], READY, |n| n >= 2.0).await.context("the new candidate starts")?;
    w.parents
        .create(&PostParams::default(), &DynamicObject::new("other", &w.resource).data(json!({"spec": {"children": [config_map("o", json!({}))]}})))
        .await?;
    w.host.wait_metric(SHADOW, &shadow("differs"), CONVERGE, |n| n >= 1.0).await.context("another answer differs")?;
    w.child("o", "made by the live version", |_| true).await?;
    ensure!(w.cms.get_opt("o-next").await?.is_none(), "the candidate's writes are dry runs");
    w.host.stop().await?;
    Ok(())
}

/// A parent the plugin faults on again and again is quarantined as any primary is (one Warning
/// Event, no more retries until it changes), and the plugin keeps serving the others; an error
/// the plugin returns is retried, never quarantined.
#[tokio::test]
async fn a_parent_the_plugin_faults_on_is_quarantined_and_the_others_are_served() -> Result<()> {
    let w = World::start("faulting", &[]).await?;
    w.create("poison", json!({"panic": "no"})).await?;
    w.create("failing", json!({"fail": "not yet"})).await?;
    wait_event(&w.client, w.ns.name(), "poison", "Quarantined", "faulted 5 times in a row").await?;
    wait_event(&w.client, w.ns.name(), "failing", "ReconcileFailed", "not yet").await?;
    w.create("fine", json!({"children": [config_map("fine-child", json!({}))]})).await?;
    w.child("fine-child", "made for the healthy parent", |_| true).await?;
    let quarantined = w.host.metric("kubewasm_plugin_quarantined_objects", &[("plugin", "faulting")]).await?;
    ensure!(quarantined == 1.0, "only the faulting parent is set aside: {quarantined}");
    w.host.stop().await?;
    Ok(())
}
