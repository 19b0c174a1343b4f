//! Acceptance tests of the local control plane (issue 2): a real kube-apiserver + etcd +
//! kube-controller-manager, driven with kube-rs and kubectl.
//!
//! `cargo test -p kubewasm-tests --test controlplane`

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use kubewasm_tests::{ControlPlane, Options, api_code, apply_crd, eventually, process};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.e2e.kubewasm.io" },
        "spec": {
            "group": "e2e.kubewasm.io",
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": { "type": "object", "properties": { "size": { "type": "integer" } } } }
                } }
            }]
        }
    }))
    .expect("a valid CRD")
}

fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..Default::default() },
        data: Some(data.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()),
        ..Default::default()
    }
}

fn widget(ar: &ApiResource, ns: &str, name: &str, size: i64) -> DynamicObject {
    DynamicObject::new(name, ar).within(ns).data(json!({ "spec": { "size": size } }))
}

fn size_of(obj: &DynamicObject) -> Option<i64> {
    obj.data.get("spec")?.get("size")?.as_i64()
}

/// kube-rs: a CRD becomes Established; its objects can be created, listed and watched.
#[tokio::test]
async fn custom_resources_can_be_created_listed_and_watched() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("crd").await?;
    let client = ns.client().clone();
    let ar = apply_crd(&client, &widget_crd(), TIMEOUT).await?;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, ns.name(), &ar);

    let initial = widgets.list(&ListParams::default()).await?;
    ensure!(initial.items.is_empty(), "a fresh namespace has widgets: {:?}", initial.items);
    let from = initial.metadata.resource_version.context("list has a resourceVersion")?;
    let mut events = widgets.watch(&WatchParams::default().timeout(60), &from).await?.boxed();

    for (i, name) in ["widget-a", "widget-b", "widget-c"].into_iter().enumerate() {
        widgets.create(&PostParams::default(), &widget(&ar, ns.name(), name, i as i64)).await?;
    }
    widgets.patch("widget-b", &PatchParams::default(), &Patch::Merge(json!({ "spec": { "size": 42 } }))).await?;

    // The watch sees the three creations and the modification, in order per object.
    let mut added = Vec::new();
    let mut modified = None;
    tokio::time::timeout(Duration::from_secs(30), async {
        while added.len() < 3 || modified.is_none() {
            match events.try_next().await? {
                Some(WatchEvent::Added(o)) => added.push(o.name_any()),
                Some(WatchEvent::Modified(o)) => {
                    ensure!(o.name_any() == "widget-b", "unexpected modification of {}", o.name_any());
                    modified = size_of(&o);
                }
                Some(WatchEvent::Bookmark(_)) => {}
                Some(other) => bail!("unexpected watch event {other:?}"),
                None => bail!("watch ended early"),
            }
        }
        Ok(())
    })
    .await
    .map_err(|_| anyhow!("watch events missing after 30 s: added {added:?}, modified {modified:?}"))??;
    assert_eq!(added, ["widget-a", "widget-b", "widget-c"]);
    assert_eq!(modified, Some(42));

    let listed = widgets.list(&ListParams::default()).await?;
    let got: BTreeMap<String, Option<i64>> = listed.items.iter().map(|o| (o.name_any(), size_of(o))).collect();
    let want: BTreeMap<String, Option<i64>> = [("widget-a", Some(0)), ("widget-b", Some(42)), ("widget-c", Some(2))].map(|(n, s)| (n.to_owned(), s)).into();
    assert_eq!(got, want);
    for o in &listed.items {
        let types = o.types.as_ref().context("listed object has apiVersion/kind")?;
        assert_eq!((types.api_version.as_str(), types.kind.as_str()), ("e2e.kubewasm.io/v1", "Widget"));
    }
    Ok(())
}

/// kubectl (from $KUBECTL or PATH) works against the written kubeconfig: version, apply, get, and
/// custom resources through discovery; what it writes kube-rs reads and vice versa.
#[tokio::test]
async fn kubectl_reads_and_applies() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let kubectl = cp.kubectl()?;
    let ns = cp.namespace("kubectl").await?;
    let n = ns.name();

    // The server reports a real version (stamped at build time) that kubectl can parse.
    let version = kubectl.output(&["version", "-o", "json"], None).await?;
    let stderr = String::from_utf8_lossy(&version.stderr);
    ensure!(version.status.success(), "kubectl version failed: {stderr}");
    // (A client/server skew warning is fine — Debian's kubectl is older — a version kubectl cannot
    // parse, like the unstamped `v0.0.0-master+$Format:%H$`, is not.)
    ensure!(!stderr.contains("parse") && !stderr.contains("$Format"), "kubectl version warned: {stderr}");
    let version: serde_json::Value = serde_json::from_slice(&version.stdout)?;
    let git_version = version["serverVersion"]["gitVersion"].as_str().unwrap_or_default();
    let expected = format!("v{}", kubernetes_module_version()?);
    assert_eq!(git_version, expected, "server version: {version}");

    let manifest = |value: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-kubectl\n  namespace: {n}\ndata:\n  greeting: {value}\n");
    let out = kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&manifest("hello"))).await?;
    assert_eq!(out.trim(), "configmap/from-kubectl created");
    let cms = ns.api::<ConfigMap>();
    let cm = cms.get("from-kubectl").await?;
    assert_eq!(cm.data.unwrap_or_default().get("greeting").map(String::as_str), Some("hello"));

    let out = kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&manifest("again"))).await?;
    assert_eq!(out.trim(), "configmap/from-kubectl configured");
    let cm = cms.get("from-kubectl").await?;
    assert_eq!(cm.data.unwrap_or_default().get("greeting").map(String::as_str), Some("again"));

    cms.create(&PostParams::default(), &configmap("from-kube-rs", &[("answer", "42")])).await?;
    let listed: serde_json::Value = serde_json::from_str(&kubectl.run(&["get", "configmaps", "-n", n, "-o", "json"]).await?)?;
    let mut seen = BTreeMap::new();
    for item in listed["items"].as_array().context("items")? {
        seen.insert(item["metadata"]["name"].as_str().unwrap_or_default().to_owned(), item["data"].clone());
    }
    assert_eq!(seen.get("from-kube-rs"), Some(&json!({ "answer": "42" })), "kubectl get: {seen:?}");
    assert_eq!(seen.get("from-kubectl"), Some(&json!({ "greeting": "again" })), "kubectl get: {seen:?}");

    // Custom resources through kubectl's discovery.
    let ar = apply_crd(ns.client(), &widget_crd(), TIMEOUT).await?;
    let widget_yaml = format!("apiVersion: e2e.kubewasm.io/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: {n}\nspec:\n  size: 7\n");
    let out = kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&widget_yaml)).await?;
    assert_eq!(out.trim(), "widget.e2e.kubewasm.io/w1 created");
    let w1 = Api::<DynamicObject>::namespaced_with(ns.client().clone(), n, &ar).get("w1").await?;
    assert_eq!(size_of(&w1), Some(7));
    let got = kubectl.run(&["get", "widgets", "-n", n, "-o", "jsonpath={.items[*].spec.size}"]).await?;
    assert_eq!(got.trim(), "7");
    Ok(())
}

/// The version of k8s.io/kubernetes that tests/controlplane/go.mod requires.
fn kubernetes_module_version() -> Result<String> {
    let go_mod = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("controlplane/go.mod"))?;
    go_mod.lines().find_map(|l| l.trim().strip_prefix("k8s.io/kubernetes v").map(|v| v.trim().to_owned())).context("go.mod requires k8s.io/kubernetes")
}

/// kube-controller-manager's garbage collector deletes dependents whose owner is gone (deleted, or
/// never existed), and leaves those whose owner exists.
#[tokio::test]
async fn garbage_collector_removes_dependents_of_missing_owners() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("gc").await?;
    let cms = ns.api::<ConfigMap>();
    let pp = PostParams::default();

    let owned_by = |owner: &ConfigMap| OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.name_any(),
        uid: owner.uid().expect("created objects have a uid"),
        ..Default::default()
    };
    let with_owner = |name: &str, owner: OwnerReference| {
        let mut cm = configmap(name, &[("k", "v")]);
        cm.metadata.owner_references = Some(vec![owner]);
        cm
    };

    let owner = cms.create(&pp, &configmap("owner", &[])).await?;
    let survivor_owner = cms.create(&pp, &configmap("survivor-owner", &[])).await?;
    cms.create(&pp, &with_owner("child", owned_by(&owner))).await?;
    cms.create(&pp, &with_owner("survivor", owned_by(&survivor_owner))).await?;
    let ghost = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "ghost".into(),
        uid: "6a1f0c3e-0000-4000-8000-000000000000".into(),
        ..Default::default()
    };
    cms.create(&pp, &with_owner("ghost-child", ghost)).await?;

    let deleted_at = Instant::now();
    cms.delete("owner", &DeleteParams::default()).await?;
    eventually("the dependents of missing owners to be collected", Duration::from_secs(30), || async {
        let mut left = Vec::new();
        for name in ["owner", "child", "ghost-child"] {
            if cms.get_opt(name).await?.is_some() {
                left.push(name);
            }
        }
        if left.is_empty() { Ok(()) } else { Err(anyhow!("still present: {left:?}")) }
    })
    .await?;
    eprintln!("garbage collection took {:?}", deleted_at.elapsed());

    // The collector has run; the dependent of a live owner must still be there.
    let survivor = cms.get_opt("survivor").await?;
    ensure!(survivor.is_some(), "the garbage collector removed a dependent whose owner exists");
    Ok(())
}

/// Optimistic concurrency: an update carrying a stale resourceVersion is rejected with 409 Conflict
/// and does not change the object.
#[tokio::test]
async fn stale_resource_version_update_conflicts() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("conflict").await?;
    let cms = ns.api::<ConfigMap>();

    let v1 = cms.create(&PostParams::default(), &configmap("cm", &[("v", "1")])).await?;
    let mut v2 = v1.clone();
    v2.data = Some([("v".to_owned(), "2".to_owned())].into());
    let v2 = cms.replace("cm", &PostParams::default(), &v2).await?;
    ensure!(v2.resource_version() != v1.resource_version(), "the update did not change resourceVersion");

    let mut stale = v1.clone();
    stale.data = Some([("v".to_owned(), "stale".to_owned())].into());
    let err = cms.replace("cm", &PostParams::default(), &stale).await.err().context("a stale update succeeded")?;
    assert_eq!(api_code(&err), Some(409), "expected 409 Conflict, got {err}");
    if let kube::Error::Api(status) = &err {
        assert_eq!(status.reason, "Conflict");
    }
    let now = cms.get("cm").await?;
    assert_eq!(now.resource_version(), v2.resource_version());
    assert_eq!(now.data.unwrap_or_default().get("v").map(String::as_str), Some("2"));
    Ok(())
}

/// With the watch cache off and etcd compacted every second, a watch from a resourceVersion older
/// than the compaction gets 410 Gone (as an ERROR event or as the response itself).
#[tokio::test]
async fn watch_from_compacted_resource_version_is_gone() -> Result<()> {
    let cp = ControlPlane::start_with(Options::new().watch_cache(false).etcd_compaction_interval(Duration::from_secs(1))).await?;
    let client = cp.client().await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");

    let first = cms.create(&PostParams::default(), &configmap("compacted", &[("n", "0")])).await?;
    let old = first.resource_version().context("resourceVersion")?;

    // While old is not compacted, the watch replays later writes; keep writing until it is gone.
    let mut n = 0;
    let status = eventually("a watch from a compacted resourceVersion to get 410", TIMEOUT, || {
        n += 1;
        let (cms, old) = (cms.clone(), old.clone());
        async move {
            let patch = json!({ "data": { "n": n.to_string() } });
            cms.patch("compacted", &PatchParams::default(), &Patch::Merge(&patch)).await?;
            let wp = WatchParams::default().fields("metadata.name=compacted").timeout(10);
            let mut events = match cms.watch(&wp, &old).await {
                Ok(events) => events.boxed(),
                Err(e) if api_code(&e) == Some(410) => return Ok(e.to_string()),
                Err(e) => return Err(anyhow!(e)),
            };
            match tokio::time::timeout(Duration::from_secs(5), events.next()).await {
                Ok(Some(Ok(WatchEvent::Error(status)))) if status.code == 410 => Ok(format!("{status:?}")),
                Ok(Some(Ok(WatchEvent::Error(status)))) => Err(anyhow!("watch error other than 410: {status:?}")),
                Ok(Some(Ok(event))) => Err(anyhow!("not compacted yet: first event {event:?}")),
                Ok(Some(Err(e))) if api_code(&e) == Some(410) => Ok(e.to_string()),
                Ok(Some(Err(e))) => Err(anyhow!(e)),
                Ok(None) => Err(anyhow!("watch ended without events")),
                Err(_) => Err(anyhow!("no watch event within 5 s")),
            }
        }
    })
    .await
    .map_err(|e| anyhow!("{e}\n{}", cp.logs()))?;
    eprintln!("410 after {n} writes: {status}");

    // The newest resourceVersion is still watchable.
    let latest = cms.get("compacted").await?.resource_version().context("resourceVersion")?;
    let mut events = cms.watch(&WatchParams::default().fields("metadata.name=compacted").timeout(10), &latest).await?.boxed();
    cms.patch("compacted", &PatchParams::default(), &Patch::Merge(json!({ "data": { "n": "last" } }))).await?;
    match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
        Ok(Some(Ok(WatchEvent::Modified(cm)))) => {
            assert_eq!(cm.data.unwrap_or_default().get("n").map(String::as_str), Some("last"));
        }
        other => bail!("a watch from the latest resourceVersion got {other:?}"),
    }
    Ok(())
}

/// SIGTERM stops the control plane cleanly (exit 0, no process left, nothing written outside its
/// data dir); a restart on the same data dir serves the same objects on the same port, and clients
/// made before the restart keep working.
#[tokio::test]
async fn objects_survive_stop_and_restart() -> Result<()> {
    let mut cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    let ar = apply_crd(&client, &widget_crd(), TIMEOUT).await?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &Namespace { metadata: ObjectMeta { name: Some("survivor".into()), ..Default::default() }, ..Default::default() })
        .await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "survivor");
    let cm = cms.create(&PostParams::default(), &configmap("kept", &[("key", "value")])).await?;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "survivor", &ar);
    widgets.create(&PostParams::default(), &widget(&ar, "survivor", "kept", 3)).await?;

    let (port, pid) = (cp.port(), cp.pid().context("running")?);
    let status = cp.stop().await?;
    assert!(status.success(), "SIGTERM did not stop the control plane cleanly: {status}\n{}", cp.logs());
    assert!(!process::exists(pid), "process {pid} still exists after stop");
    assert_no_process_in(&cp.sandbox_dir().join("cwd"))?;
    for dir in ["home", "tmp", "cwd"] {
        let entries: Vec<_> = std::fs::read_dir(cp.sandbox_dir().join(dir))?.flatten().map(|e| e.path()).collect();
        assert!(entries.is_empty(), "the control plane wrote outside its data dir: {entries:?}");
    }
    let stderr = std::fs::read_to_string(cp.run_dir().join("stderr.log"))?;
    assert!(stderr.trim().is_empty(), "the control plane wrote to stderr: {stderr}");
    ensure!(client.apiserver_version().await.is_err(), "the API still answers after stop");

    cp.restart().await?;
    assert_eq!(cp.port(), port, "restart moved to another port");
    // A client made before the restart reconnects (same address, same CA, same credentials).
    let again = eventually("the old client to reconnect", TIMEOUT, || cms.get("kept")).await?;
    assert_eq!(again.uid(), cm.uid());
    assert_eq!(again.data, cm.data);

    let client = cp.client().await?;
    let kept = Api::<DynamicObject>::namespaced_with(client.clone(), "survivor", &ar).get("kept").await?;
    assert_eq!(size_of(&kept), Some(3));
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get("widgets.e2e.kubewasm.io").await?;
    assert!(crd.status.and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| c.type_ == "Established" && c.status == "True"));
    Ok(())
}

/// No live process has its working directory in `dir` (so the stopped control plane left no child).
fn assert_no_process_in(dir: &Path) -> Result<()> {
    let dir = dir.canonicalize()?;
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(cwd) = std::fs::read_link(entry.path().join("cwd"))
            && cwd.starts_with(&dir)
        {
            bail!("process {pid} is still running in {}", dir.display());
        }
    }
    Ok(())
}

/// RBAC is enforced: the unprivileged identity gets 403 until a RoleBinding grants it exactly
/// what the Role says, and no more.
#[tokio::test]
async fn unprivileged_identity_is_denied_until_bound() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("rbac").await?;
    let n = ns.name();
    ns.api::<ConfigMap>().create(&PostParams::default(), &configmap("visible", &[("k", "v")])).await?;

    let user = cp.unprivileged_client().await?;
    let their_cms: Api<ConfigMap> = Api::namespaced(user.clone(), n);
    let forbidden = |what: &str, r: kube::Result<()>| -> Result<()> {
        match r {
            Err(e) if api_code(&e) == Some(403) => Ok(()),
            Err(e) => bail!("{what}: expected 403, got {e}"),
            Ok(()) => bail!("{what}: expected 403, but it was allowed"),
        }
    };
    forbidden("list before binding", their_cms.list(&ListParams::default()).await.map(drop))?;
    forbidden("get before binding", their_cms.get("visible").await.map(drop))?;

    let role = Role {
        metadata: ObjectMeta { name: Some("configmap-reader".into()), ..Default::default() },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            ..Default::default()
        }]),
    };
    ns.api::<Role>().create(&PostParams::default(), &role).await?;
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some("unprivileged-reads-configmaps".into()), ..Default::default() },
        role_ref: RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: "Role".into(), name: "configmap-reader".into() },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "User".into(),
            name: "kubewasm-unprivileged".into(),
            ..Default::default()
        }]),
    };
    ns.api::<RoleBinding>().create(&PostParams::default(), &binding).await?;

    let listed = eventually("the RoleBinding to take effect", Duration::from_secs(30), || async { their_cms.list(&ListParams::default()).await }).await?;
    assert!(listed.items.iter().any(|cm| cm.name_any() == "visible"));
    let visible = their_cms.get("visible").await?;
    assert_eq!(visible.data.unwrap_or_default().get("k").map(String::as_str), Some("v"));

    // Only what the Role grants, only where it is bound.
    forbidden("create", their_cms.create(&PostParams::default(), &configmap("nope", &[])).await.map(drop))?;
    forbidden("list secrets", Api::<Secret>::namespaced(user.clone(), n).list(&ListParams::default()).await.map(drop))?;
    forbidden("list configmaps in another namespace", Api::<ConfigMap>::namespaced(user.clone(), "default").list(&ListParams::default()).await.map(drop))?;

    // kubectl as the same identity agrees.
    let kubectl = cp.kubectl_unprivileged()?;
    let can = |verb: &'static str| {
        let kubectl = kubectl.clone();
        async move {
            let out = kubectl.output(&["auth", "can-i", verb, "configmaps", "-n", n], None).await?;
            Ok::<_, anyhow::Error>(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }
    };
    assert_eq!(can("list").await?, "yes");
    assert_eq!(can("create").await?, "no");
    Ok(())
}

/// The shared control plane's admin is all-powerful and `client_from` works on the kubeconfig.
#[tokio::test]
async fn kubeconfigs_identify_the_two_users() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let whoami = |client: Client| async move {
        let review: serde_json::Value = client
            .request(http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews").header("content-type", "application/json").body(
                serde_json::to_vec(&json!({
                    "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"
                }))?,
            )?)
            .await?;
        Ok::<_, anyhow::Error>(review["status"]["userInfo"].clone())
    };
    let admin = whoami(kubewasm_tests::client_from(cp.kubeconfig_path()).await?).await?;
    assert_eq!(admin["username"], "kubewasm-admin");
    assert!(admin["groups"].as_array().is_some_and(|g| g.iter().any(|g| g == "system:masters")), "{admin}");
    let user = whoami(cp.unprivileged_client().await?).await?;
    assert_eq!(user["username"], "kubewasm-unprivileged");
    assert!(user["groups"].as_array().is_some_and(|g| g.iter().all(|g| g == "system:authenticated")), "the unprivileged user is in extra groups: {user}");
    Ok(())
}
