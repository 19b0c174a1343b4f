//! `kubewasm rbac` against the real API server: a host running as a user with no permissions
//! of its own cannot start its plugin; with exactly the roles `kubewasm rbac` prints for that
//! plugin directory, it runs it — the sample-controller turns a Foo into a Deployment and writes
//! the Foo's status — without a single forbidden request.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kubewasm_tests::host::{Host, HostConfig, kubewasm_binary};
use kubewasm_tests::plugindir::PluginDir;
use kubewasm_tests::{ControlPlane, apply_crd, eventually, guests, unique_name};

fn crd() -> CustomResourceDefinition {
    let path = guests::workspace_root().join("examples/sample-controller/manifests/crd.yaml");
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn the_roles_kubewasm_rbac_prints_are_enough_to_run_the_plugins() {
    let cp = ControlPlane::shared().await;
    let admin = cp.client().await.unwrap();
    apply_crd(&admin, &crd(), Duration::from_secs(60)).await.unwrap();
    let ns = cp.namespace("rbac").await.unwrap();
    let dir = PluginDir::new();
    let wasm = std::fs::read(guests::guest("sample-controller", "sample_controller")).unwrap();
    dir.install("sample-controller", &wasm, None);

    // Without roles, the unprivileged user cannot watch Foos: the plugin never gets ready.
    let config = HostConfig::new("unprivileged", dir.path(), cp.unprivileged_kubeconfig_path())
        .namespace(ns.name())
        .status_configmap(ns.name(), "kubewasm-plugins");
    let mut host = Host::start(config).await.unwrap();
    assert!(host.wait_ready(Duration::from_secs(5)).await.is_err(), "a host without permissions must not be ready");

    // With the printed roles (bound to that user), it recovers on its own and serves.
    let role = unique_name("kubewasm-rbac");
    let bin = tokio::task::spawn_blocking(kubewasm_binary).await.unwrap().unwrap();
    let output = std::process::Command::new(bin)
        .args(["rbac", "--user", "kubewasm-unprivileged", "--name", &role])
        .arg(format!("--status-configmap={}/kubewasm-plugins", ns.name()))
        .arg(format!("--plugins={}", dir.path().display()))
        .output()
        .unwrap();
    assert!(output.status.success(), "kubewasm rbac failed: {}", String::from_utf8_lossy(&output.stderr));
    let yaml = String::from_utf8(output.stdout).unwrap();
    for needle in ["kind: ClusterRole\n", "- deployments", "- foos/status", "name: kubewasm-unprivileged", "- events"] {
        assert!(yaml.contains(needle), "{needle:?} missing from:\n{yaml}");
    }
    cp.kubectl().unwrap().run_with_stdin(&["apply", "-f", "-"], Some(&yaml)).await.unwrap();
    host.wait_ready(Duration::from_secs(60)).await.unwrap();

    let foos: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        ns.name(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo")),
    );
    let foo: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": "rbac-foo"}, "spec": {"deploymentName": "rbac-deploy", "replicas": 2},
    }))
    .unwrap();
    foos.create(&PostParams::default(), &foo).await.unwrap();
    let deployments: Api<Deployment> = ns.api();
    eventually("the Deployment and the Foo's status", Duration::from_secs(60), || async {
        let deployment = deployments.get_opt("rbac-deploy").await.map_err(|e| e.to_string())?.ok_or("no Deployment yet")?;
        let owner = deployment.metadata.owner_references.unwrap_or_default();
        if owner.first().map(|o| o.name.as_str()) != Some("rbac-foo") {
            return Err(format!("not owned by the Foo: {owner:?}"));
        }
        let foo = foos.get("rbac-foo").await.map_err(|e| e.to_string())?;
        let observed = foo.data.pointer("/status/observedGeneration").cloned();
        if observed != Some(serde_json::json!(1)) {
            return Err(format!("status not written yet: {:?}", foo.data.get("status")));
        }
        Ok(())
    })
    .await
    .unwrap();

    let log = host.log_text();
    let since_ready = log.rsplit_once("caches synced").map_or(log.as_str(), |(_, after)| after);
    assert!(!since_ready.to_lowercase().contains("forbidden"), "forbidden requests after the roles were applied:\n{since_ready}");
    host.stop().await.unwrap();
    let _ = cp.kubectl().unwrap().run(&["delete", "clusterrole,clusterrolebinding", &role, "--ignore-not-found"]).await;
}
