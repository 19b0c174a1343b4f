//! The Helm chart (`charts/kubewasm`): it lints, the API server accepts all it renders, its
//! Deployment keeps the contract its README states, its RBAC is all the real host needs to
//! serve a Plugin, and its identity policy lets a team create only the Plugins whose identity
//! it may `use`.
//!
//! `cargo test -p kubewasm-tests --test chart`
//!
//! `helm` is built from `tests/tools` (helm.sh/helm/v4) once per machine.

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kubewasm_tests::build::{Tool, go_tool};
use kubewasm_tests::crd::install_plugin_crd;
use kubewasm_tests::guests::workspace_root;
use kubewasm_tests::plugindir::e2e_variant;
use kubewasm_tests::registry::Registry;
use kubewasm_tests::{ControlPlane, E2eSettings, Host, HostConfig, PluginDir, accounts, audit, eventually, kubewasm_binary};
use serde_json::Value;
use support::*;

const RELEASE: &str = "kubewasm";

fn chart() -> PathBuf {
    workspace_root().join("charts/kubewasm")
}

/// `helm ARGS`, requiring success; its stdout.
async fn helm(args: &[&str]) -> Result<String> {
    let bin = tokio::task::spawn_blocking(|| go_tool(Tool::Helm)).await??;
    let out = tokio::process::Command::new(bin).args(args).output().await?;
    ensure!(out.status.success(), "helm {} failed:\n{}{}", args.join(" "), String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?)
}

/// Values declaring two plugins: `writer` (the suite's e2e guest: its rules cluster-wide, its
/// Plugin from `module`) and `reader` (a Role in `team_ns` only, and no Plugin: applied by hand).
fn two_plugins(module: &str, team_ns: &str) -> String {
    format!(
        r#"
plugins:
  - name: writer
    module: {module}
    pollInterval: 30s
    settings: {{name: writer}}
    rules:
      - {{apiGroups: [""], resources: [configmaps], verbs: [create, delete, get, list, patch, update, watch]}}
      - {{apiGroups: [""], resources: [configmaps/finalizers], verbs: [update]}}
      - {{apiGroups: [events.k8s.io], resources: [events], verbs: [create, patch]}}
  - name: reader
    rules:
      - {{apiGroups: [events.k8s.io], resources: [events], verbs: [create, patch]}}
    namespaceRules:
      {team_ns}:
        - {{apiGroups: [apps], resources: [deployments], verbs: [get, list, watch]}}
insecureRegistries: ["{registry}"]
registryCredentials:
  dockerConfigJson: '{{"auths": {{"registry.example.com": {{"auth": "dTpw"}}}}}}'
"#,
        registry = module.split('/').next().unwrap_or_default()
    )
}

/// `helm ARGS -f VALUES` with `values` in a file.
async fn helm_with_values(args: &[&str], values: &str) -> Result<String> {
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), values)?;
    let path = file.path().to_str().context("a UTF-8 temporary path")?;
    helm(&[args, &["-f", path]].concat()).await
}

/// What the chart renders for a release in `namespace` with `values`, as YAML.
async fn template(namespace: &str, values: &str) -> Result<String> {
    let chart = chart();
    helm_with_values(&["template", RELEASE, chart.to_str().context("a UTF-8 path")?, "--namespace", namespace], values).await
}

/// The rendered YAML as objects.
fn objects(yaml: &str) -> Result<Vec<Value>> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).map_err(|e| anyhow!("the chart renders YAML that does not parse: {e}"))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Result<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).ok_or_else(|| anyhow!("no {kind} {name} rendered"))
}

#[tokio::test]
async fn the_chart_lints_with_its_defaults_and_with_plugins() -> Result<()> {
    let chart = chart();
    let chart = chart.to_str().context("a UTF-8 path")?;
    helm(&["lint", "--strict", chart]).await?;
    // Every template: plugins, registry credentials, the ServiceMonitor.
    let values = two_plugins("registry.example.com/team/writer:0.1.0", "team-a");
    helm_with_values(&["lint", "--strict", chart, "--set", "serviceMonitor.enabled=true"], &values).await?;
    helm(&["lint", "--strict", chart, "--set", "memberClusters.fromSecrets=true"]).await?;
    Ok(())
}

/// Member clusters from Secrets: the flag, and the one rule it needs (listing and watching the
/// Secrets of the release namespace); neither without the value.
#[tokio::test]
async fn member_clusters_from_secrets_get_the_flag_and_the_rule() -> Result<()> {
    for on in [false, true] {
        let yaml = template("fleet", &format!("memberClusters: {{fromSecrets: {on}}}\n")).await?;
        let objects = objects(&yaml)?;
        let args = &find(&objects, "Deployment", RELEASE)?["spec"]["template"]["spec"]["containers"][0]["args"];
        let flag = args.as_array().context("args")?.iter().any(|a| a == "--cluster-secrets");
        let role = find(&objects, "Role", RELEASE)?;
        let rule = role["rules"]
            .as_array()
            .context("rules")?
            .iter()
            .any(|r| r["resources"] == serde_json::json!(["secrets"]) && r["verbs"] == serde_json::json!(["list", "watch"]));
        ensure!(flag == on && rule == on, "fromSecrets={on}: flag {flag}, rule {rule}");
    }
    Ok(())
}

/// `kubewasm ARGS`, requiring success; its stdout.
async fn kubewasm(args: &[&str]) -> Result<String> {
    let bin = tokio::task::spawn_blocking(kubewasm_binary).await??;
    let out = tokio::process::Command::new(bin).args(args).env("RUST_LOG", "warn").output().await?;
    ensure!(out.status.success(), "kubewasm {} failed:\n{}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?)
}

/// `kubewasm rbac --plugins DIR --values` prints values the chart takes (its schema checks
/// them), from which it makes the very identity `kubewasm rbac --plugin NAME` prints: the same
/// ServiceAccount, Roles and bindings, with the same rules. No cluster needed.
#[tokio::test]
async fn rbac_values_make_the_identity_rbac_prints() -> Result<()> {
    const NAMESPACE: &str = "team";
    let plugins = PluginDir::new();
    plugins.install_e2e(&E2eSettings::new("writer"), "v01");
    let dir = plugins.path().to_str().context("a UTF-8 path")?.to_string();
    let values = kubewasm(&["rbac", "--plugins", &dir, "--values"]).await?;
    let rendered = objects(&template(NAMESPACE, &values).await?)?;
    let printed = objects(&kubewasm(&["rbac", "--plugins", &dir, "--plugin", "writer", "--identity-namespace", NAMESPACE]).await?)?;
    ensure!(printed.iter().any(|o| o["kind"] == "ClusterRole"), "the e2e guest has cluster-wide rules: {printed:?}");
    for object in &printed {
        let (kind, name) = (&object["kind"], &object["metadata"]["name"]);
        let chart = rendered
            .iter()
            .find(|o| o["kind"] == *kind && o["metadata"]["name"] == *name && o["metadata"]["namespace"] == object["metadata"]["namespace"])
            .ok_or_else(|| anyhow!("the chart renders no {kind} {name} from:\n{values}"))?;
        for field in ["rules", "roleRef", "subjects"] {
            ensure!(chart[field] == object[field], "{kind} {name}: the chart's {field} {} differ from kubewasm rbac's {}", chart[field], object[field]);
        }
    }
    Ok(())
}

/// Everything the chart renders passes the API server's validation and admission (a
/// server-side dry run). The ServiceMonitor stays off: the control plane has no such kind.
#[tokio::test]
async fn the_api_server_accepts_what_the_chart_renders() -> Result<()> {
    let cp = ControlPlane::shared().await;
    // For real: a dry run of a Plugin needs its kind served.
    install_plugin_crd(&cp.client().await?).await?;
    let ns = cp.namespace("chart-dry-run").await?;
    let yaml = template(ns.name(), &two_plugins("registry.example.com/team/writer:0.1.0", ns.name())).await?;
    cp.kubectl()?.run_with_stdin(&["apply", "--dry-run=server", "-f", "-"], Some(&yaml)).await?;
    Ok(())
}

/// The contract the README states, on the defaults.
#[tokio::test]
async fn the_deployment_elects_a_leader_runs_restricted_and_is_probed() -> Result<()> {
    let objects = objects(&template("kubewasm", "").await?)?;
    let deployment = find(&objects, "Deployment", RELEASE)?;
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"].as_array().context("args")?.iter().filter_map(Value::as_str).collect();
    assert_eq!(deployment["spec"]["replicas"], 3);
    for arg in ["--leader-elect", "--lease-namespace=kubewasm", "--shard-ring=kubewasm", "--plugin-source=resources", "--identity-namespace=kubewasm"] {
        assert!(args.contains(&arg), "{arg} missing: {args:?}");
    }

    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));

    let port = |name: &str| container["ports"].as_array().and_then(|ports| ports.iter().find(|p| p["name"] == name)).map(|p| p["containerPort"].clone());
    assert_eq!(port("health"), Some(8081.into()));
    assert_eq!(port("metrics"), Some(8080.into()));
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(container[probe]["httpGet"], serde_json::json!({"path": path, "port": "health"}), "{probe}");
    }

    // The cache flag names a writable emptyDir: the root filesystem is read-only.
    let cache = args.iter().find_map(|a| a.strip_prefix("--cache-dir=")).context("--cache-dir")?;
    let mount = container["volumeMounts"].as_array().and_then(|m| m.iter().find(|m| m["mountPath"] == cache)).context("no volume mounted at the cache")?;
    let volume = pod["volumes"].as_array().and_then(|v| v.iter().find(|v| v["name"] == mount["name"])).context("the cache's volume")?;
    assert!(volume["emptyDir"].is_object(), "{volume}");
    Ok(())
}

/// Webhooks, in both certificate modes: the Service (443 to the container's webhook port, on the
/// host's pods), the port, the flags (the Service `--webhook-service` names is the one rendered;
/// a cert-manager certificate mounted where `--webhook-cert-dir` reads it, else the host's own
/// Secret), the writer's cluster rules (patch of only the CRDs converted) and the certificate
/// Secret by name; none of it by default.
#[tokio::test]
async fn webhooks_get_their_service_port_flags_certificate_and_rbac() -> Result<()> {
    const NS: &str = "hooks";
    let defaults = objects(&template(NS, "").await?)?;
    ensure!(find(&defaults, "Service", "kubewasm-webhooks").is_err(), "a webhook Service by default");
    for cert_manager in [false, true] {
        let values = format!(
            "webhooks: {{enabled: true, port: 9444, conversionCRDs: [cronjobs.batch.tutorial.kubebuilder.io], \
             certManager: {{enabled: {cert_manager}, issuerRef: {{kind: ClusterIssuer, name: ca}}}}}}\n"
        );
        let objects = objects(&template(NS, &values).await?)?;
        let deployment = find(&objects, "Deployment", RELEASE)?;
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let args: Vec<&str> = container["args"].as_array().context("args")?.iter().filter_map(Value::as_str).collect();
        let port = container["ports"].as_array().and_then(|p| p.iter().find(|p| p["name"] == "webhooks")).context("no webhooks port")?;
        assert_eq!(port["containerPort"], 9444);

        let service = find(&objects, "Service", "kubewasm-webhooks")?;
        assert_eq!(service["spec"]["ports"], serde_json::json!([{"name": "webhooks", "port": 443, "targetPort": "webhooks"}]));
        assert_eq!(service["spec"]["selector"], deployment["spec"]["selector"]["matchLabels"], "the Service selects the host's pods");
        for arg in ["--webhook-bind-address=:9444", "--webhook-service=hooks/kubewasm-webhooks:443"] {
            assert!(args.contains(&arg), "cert-manager {cert_manager}: {arg} missing: {args:?}");
        }

        let role = find(&objects, "Role", RELEASE)?;
        let secret_rules: Vec<&Value> =
            role["rules"].as_array().context("rules")?.iter().filter(|r| r["resources"] == serde_json::json!(["secrets"])).collect();
        if cert_manager {
            let dir = args.iter().find_map(|a| a.strip_prefix("--webhook-cert-dir=")).context("--webhook-cert-dir")?;
            let mount =
                container["volumeMounts"].as_array().and_then(|m| m.iter().find(|m| m["mountPath"] == dir)).context("nothing mounted at the cert dir")?;
            let volume = pod["volumes"].as_array().and_then(|v| v.iter().find(|v| v["name"] == mount["name"])).context("the cert dir's volume")?;
            let certificate = find(&objects, "Certificate", "kubewasm-webhooks")?;
            assert_eq!(volume["secret"]["secretName"], certificate["spec"]["secretName"]);
            assert_eq!(certificate["spec"]["dnsNames"][0], "kubewasm-webhooks.hooks.svc");
            assert_eq!(certificate["spec"]["issuerRef"], serde_json::json!({"kind": "ClusterIssuer", "name": "ca", "group": "cert-manager.io"}));
            assert!(!args.iter().any(|a| a.starts_with("--webhook-cert-secret")), "{args:?}");
            assert!(secret_rules.is_empty(), "no Secret of its own with cert-manager: {secret_rules:?}");
        } else {
            assert!(args.contains(&"--webhook-cert-secret=kubewasm-webhook-certs"), "{args:?}");
            ensure!(find(&objects, "Certificate", "kubewasm-webhooks").is_err(), "a Certificate without cert-manager");
            assert_eq!(
                secret_rules,
                [
                    &serde_json::json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}),
                    &serde_json::json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["kubewasm-webhook-certs"], "verbs": ["get", "update"]}),
                ]
            );
        }

        let cluster_role = find(&objects, "ClusterRole", &format!("kubewasm:{NS}:{RELEASE}"))?;
        let rules = cluster_role["rules"].as_array().context("rules")?;
        for rule in [
            serde_json::json!({"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"], "verbs": ["create", "delete", "get", "list", "patch"]}),
            serde_json::json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list"]}),
            serde_json::json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "resourceNames": ["cronjobs.batch.tutorial.kubebuilder.io"], "verbs": ["patch"]}),
        ] {
            assert!(rules.contains(&rule), "{rule} missing: {rules:?}");
        }
    }
    Ok(())
}

/// The host may act as exactly the declared plugins: their ServiceAccounts by name, and no
/// impersonation at all without a plugin (empty resource names would mean every account).
#[tokio::test]
async fn the_host_impersonates_exactly_the_declared_plugins() -> Result<()> {
    let impersonated = |objects: &[Value]| -> Result<Vec<Value>> {
        let role = find(objects, "Role", RELEASE)?;
        let rules = role["rules"].as_array().context("rules")?;
        Ok(rules.iter().filter(|r| r["verbs"].as_array().is_some_and(|v| v.contains(&"impersonate".into()))).cloned().collect())
    };
    assert_eq!(impersonated(&objects(&template("kubewasm", "").await?)?)?, Vec::<Value>::new());
    let with_plugins = objects(&template("kubewasm", &two_plugins("registry.example.com/team/writer:0.1.0", "team-a")).await?)?;
    let rules = impersonated(&with_plugins)?;
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0]["resources"], serde_json::json!(["serviceaccounts"]));
    assert_eq!(rules[0]["resourceNames"], serde_json::json!(["kubewasm-plugin-writer", "kubewasm-plugin-reader"]));
    Ok(())
}

/// The chart's RBAC is all the host needs: with only what the chart renders applied (the
/// Deployment aside), the real host — authenticated as the chart's ServiceAccount with a token,
/// run with the Deployment's own arguments — takes the Lease, pulls the Plugin's module from a
/// registry, and the plugin reconciles with the rights the chart gave its ServiceAccount, with
/// no request forbidden. The test control plane has no kubelet, so the Deployment's pods never
/// start; this test stands in for them.
#[tokio::test]
async fn the_charts_rbac_is_enough_for_the_host_to_serve_a_plugin() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let plugin_kind = install_plugin_crd(&cp.client().await?).await?;
    let ns = cp.namespace("chart").await?;
    let registry = tokio::task::spawn_blocking(Registry::start).await??;
    let module = format!("{}/e2e/writer:v1", registry.host());
    let store = tempfile::tempdir()?;
    let registries = kubewasm::oci::Registries::new(&Default::default(), store.path().into());
    registries.push(&kubewasm::oci::parse_reference(&module)?, e2e_variant("v01")).await?;

    let objects = objects(&template(ns.name(), &two_plugins(&module, ns.name())).await?)?;
    let deployment = find(&objects, "Deployment", RELEASE)?;
    let rest: Vec<&Value> = objects.iter().filter(|o| o["kind"] != "Deployment").collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": rest});
    cp.kubectl()?.run_with_stdin(&["apply", "-f", "-"], Some(&list.to_string())).await?;
    let kubeconfig = tempfile::NamedTempFile::new()?;
    accounts::service_account_kubeconfig(cp, ns.name(), RELEASE, kubeconfig.path()).await?;

    // The Deployment's arguments, but for those the harness sets: its own ports and cache, and
    // the plugin source and identity namespace (the same: checked).
    let args: Vec<String> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .context("args")?
        .iter()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    let own = [format!("--identity-namespace={}", ns.name()), "--plugin-source=resources".into()];
    ensure!(own.iter().all(|a| args.contains(a)), "{args:?}");
    let harness = ["run", "--metrics-addr=", "--health-addr=", "--cache-dir="];
    let mut config = HostConfig::resources("chart", ns.name(), kubeconfig.path()).service_accounts(ns.name());
    for arg in args.into_iter().filter(|a| !own.contains(a) && !harness.iter().any(|h| a.starts_with(h))) {
        config = config.arg(arg);
    }
    let mut host = Host::start(config).await?;
    host.wait_ready(Duration::from_secs(60)).await?;

    let cms: Api<ConfigMap> = ns.api();
    let inputs = BTreeMap::from([("a".to_string(), "1".to_string())]);
    create_primaries(&cms, &inputs).await?;
    wait_outputs(&cms, "writer", &inputs, Want::default()).await?;
    let plugins: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), &plugin_kind);
    eventually("Plugin writer to be Ready", CONVERGE, || async {
        let plugin = plugins.get("writer").await.map_err(|e| e.to_string())?;
        let conditions = plugin.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
        match conditions.iter().find(|c| c["type"] == "Ready") {
            Some(c) if c["status"] == "True" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await?;
    ensure!(!host.log_text().contains("forbidden"), "forbidden requests with the chart's RBAC:\n{}", host.log_tail(40));
    host.stop().await?;
    Ok(())
}

/// The chart's identity policy checks exactly what the host requires of it.
#[tokio::test]
async fn the_identity_policy_checks_what_the_host_requires() -> Result<()> {
    let on = objects(&template("kubewasm", "").await?)?;
    let policy = find(&on, "ValidatingAdmissionPolicy", "kubewasm-plugin-identity.kubewasm")?;
    assert_eq!(policy["spec"]["validations"][0]["expression"], kubewasm::identity::POLICY_EXPRESSION);
    let binding = find(&on, "ValidatingAdmissionPolicyBinding", "kubewasm-plugin-identity.kubewasm")?;
    assert_eq!(binding["spec"]["validationActions"], serde_json::json!(["Deny"]));
    let deployment = find(&on, "Deployment", RELEASE)?;
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].as_array().context("args")?;
    assert!(args.contains(&"--plugin-identity-policy=kubewasm-plugin-identity.kubewasm".into()), "{args:?}");
    let off = objects(&template("kubewasm", "identityPolicy: {enabled: false}").await?)?;
    assert!(off.iter().all(|o| o["kind"] != "ValidatingAdmissionPolicy"));
    let args = find(&off, "Deployment", RELEASE)?["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    assert!(args.as_array().context("args")?.contains(&"--plugin-identity-policy=".into()), "{args}");
    Ok(())
}

/// A client of the control plane acting as `user` (impersonated by the admin), in no group.
async fn as_user(cp: &ControlPlane, user: &str) -> Result<kube::Client> {
    let mut config = kube::Config::from_custom_kubeconfig(kube::config::Kubeconfig::read_from(cp.kubeconfig_path())?, &Default::default()).await?;
    config.auth_info.impersonate = Some(user.into());
    Ok(kube::Client::try_from(config)?)
}

/// A Plugin running the suite's e2e guest as `name`, its primaries labelled `selector`.
fn plugin_object(kind: &kube::core::ApiResource, name: &str, module: &str, selector: &str) -> Result<DynamicObject> {
    let mut plugin = DynamicObject::new(name, kind);
    plugin.data = serde_json::json!({"spec": {"module": module, "pollInterval": "10s", "settings": {"name": name, "selector": selector}}});
    Ok(plugin)
}

/// The audit's H4: a plugin acts as `kubewasm-plugin-NAME`, NAME being its Plugin's, and RBAC
/// cannot limit `create` to a name. With the chart's policy, team b — which may create and
/// update any Plugin in the namespace, but `use` only the identity `b` — cannot create Plugin
/// `a`, nor change its spec once team a made it: the API server refuses, naming the missing
/// `use`, and nothing is ever written as `kubewasm-plugin-a` until team a creates its Plugin.
/// Without the policy in force, the host admits no plugin.
#[tokio::test]
async fn a_team_gets_only_the_plugin_identity_it_may_use() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let plugin_kind = install_plugin_crd(&cp.client().await?).await?;
    let ns = cp.namespace("identity-policy").await?;
    let registry = tokio::task::spawn_blocking(Registry::start).await??;
    let module = format!("{}/e2e/team:v1", registry.host());
    let store = tempfile::tempdir()?;
    let registries = kubewasm::oci::Registries::new(&Default::default(), store.path().into());
    registries.push(&kubewasm::oci::parse_reference(&module)?, e2e_variant("v01")).await?;

    let rules = r#"
    rules:
      - {apiGroups: [""], resources: [configmaps], verbs: [create, delete, get, list, patch, update, watch]}
      - {apiGroups: [""], resources: [configmaps/finalizers], verbs: [update]}
      - {apiGroups: [events.k8s.io], resources: [events], verbs: [create, patch]}"#;
    let values = format!(
        "plugins:\n  - name: a\n    owners: [{{kind: User, name: team-a}}]{rules}\n  - name: b\n    owners: [{{kind: User, name: team-b}}]{rules}\ninsecureRegistries: [\"{}\"]\n",
        registry.host()
    );
    let rendered = objects(&template(ns.name(), &values).await?)?;
    let deployment = find(&rendered, "Deployment", RELEASE)?.clone();
    let rest: Vec<&Value> = rendered.iter().filter(|o| o["kind"] != "Deployment").collect();
    cp.kubectl()?.run_with_stdin(&["apply", "-f", "-"], Some(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": rest}).to_string())).await?;
    // Both teams may create and change any Plugin here: RBAC cannot say which by name.
    let authors = format!(
        r#"{{"apiVersion": "v1", "kind": "List", "items": [
        {{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {{"name": "plugin-authors", "namespace": "{ns}"}},
         "rules": [{{"apiGroups": ["kubewasm.io"], "resources": ["plugins"], "verbs": ["create", "get", "list", "update", "patch"]}}]}},
        {{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {{"name": "plugin-authors", "namespace": "{ns}"}},
         "roleRef": {{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "plugin-authors"}},
         "subjects": [{{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "team-a"}}, {{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "team-b"}}]}}]}}"#,
        ns = ns.name()
    );
    cp.kubectl()?.run_with_stdin(&["apply", "-f", "-"], Some(&authors)).await?;

    // The host as the chart runs it: its ServiceAccount's token, the Deployment's arguments.
    let kubeconfig = tempfile::NamedTempFile::new()?;
    accounts::service_account_kubeconfig(cp, ns.name(), RELEASE, kubeconfig.path()).await?;
    let args: Vec<String> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .context("args")?
        .iter()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    let own = [format!("--identity-namespace={}", ns.name()), "--plugin-source=resources".into()];
    let harness = ["run", "--metrics-addr=", "--health-addr=", "--cache-dir="];
    let mut config = HostConfig::resources("identity-policy", ns.name(), kubeconfig.path()).service_accounts(ns.name());
    for arg in args.iter().filter(|a| !own.contains(a) && !harness.iter().any(|h| a.starts_with(h))) {
        config = config.arg(arg.clone());
    }
    let mut host = Host::start(config.clone()).await?;
    host.wait_ready(Duration::from_secs(60)).await?;

    let plugins_as = |client: kube::Client| Api::<DynamicObject>::namespaced_with(client, ns.name(), &plugin_kind);
    let (team_a, team_b) = (plugins_as(as_user(cp, "team-a").await?), plugins_as(as_user(cp, "team-b").await?));
    // The policy takes a moment to be in force after it is created.
    let refused = eventually("team b's Plugin a refused", CONVERGE, || async {
        match team_b.create(&PostParams::default(), &plugin_object(&plugin_kind, "a", &module, "team.kubewasm.io/a")?).await {
            Ok(_) => {
                team_b.delete("a", &Default::default()).await?;
                Err(anyhow!("team b created Plugin a"))
            }
            Err(e) => Ok(e),
        }
    })
    .await?;
    ensure!(kubewasm_tests::api_code(&refused) == Some(403), "{refused}");
    ensure!(refused.to_string().contains("needs the verb use on identities.kubewasm.io named a"), "{refused}");
    team_b.create(&PostParams::default(), &plugin_object(&plugin_kind, "b", &module, "team.kubewasm.io/b")?).await.context("team b's own Plugin")?;

    let cms: Api<ConfigMap> = ns.api();
    let labelled = |name: &str, team: &str| {
        let mut object = primary(name, "1");
        object.metadata.labels = Some([(format!("team.kubewasm.io/{team}"), "yes".to_string())].into());
        object
    };
    cms.create(&PostParams::default(), &labelled("pa", "a")).await?;
    cms.create(&PostParams::default(), &labelled("pb", "b")).await?;
    wait_outputs(&cms, "b", &BTreeMap::from([("pb".to_string(), "1".to_string())]), Want::default()).await?;
    let as_plugin = |plugin: &str| {
        let user = format!("system:serviceaccount:{}:kubewasm-plugin-{plugin}", ns.name());
        audit::read(cp.data_dir()).into_iter().filter(|e| e.acting_as() == user && e.resource() != "selfsubjectaccessreviews").count()
    };
    ensure!(as_plugin("a") == 0, "{} writes as kubewasm-plugin-a before team a made its Plugin", as_plugin("a"));
    ensure!(as_plugin("b") > 0, "no write as kubewasm-plugin-b: the audit shows nothing");

    // Team a may; then team b may not change a's module.
    team_a.create(&PostParams::default(), &plugin_object(&plugin_kind, "a", &module, "team.kubewasm.io/a")?).await.context("team a's own Plugin")?;
    wait_outputs(&cms, "a", &BTreeMap::from([("pa".to_string(), "1".to_string())]), Want::default()).await?;
    ensure!(as_plugin("a") > 0, "no write as kubewasm-plugin-a");
    let patch = serde_json::json!({"spec": {"module": format!("{}/e2e/someone-else:v1", registry.host())}});
    let changed = team_b.patch("a", &PatchParams::default(), &Patch::Merge(&patch)).await;
    ensure!(changed.as_ref().err().and_then(kubewasm_tests::api_code) == Some(403), "team b changed Plugin a: {changed:?}");
    let relabel = serde_json::json!({"metadata": {"labels": {"reviewed-by": "team-b"}}});
    team_b.patch("a", &PatchParams::default(), &Patch::Merge(&relabel)).await.context("a label is no change of identity")?;
    host.stop().await?;

    // Without the binding, the policy is not in force: a host starting now admits nothing.
    let binding = format!("kubewasm-plugin-identity.{}", ns.name());
    cp.kubectl()?.run(&["delete", "validatingadmissionpolicybinding", &binding]).await?;
    let mut host = Host::start(config).await?;
    let plugins = plugins_as(ns.client().clone());
    eventually("Plugin a refused for want of the policy", CONVERGE, || async {
        let plugin = plugins.get("a").await?;
        let conditions = plugin.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let ready = conditions.iter().find(|c| c["type"] == "Ready").cloned().unwrap_or_default();
        let message = ready["message"].as_str().unwrap_or_default();
        if ready["status"] == "False" && message.contains("not protected") { Ok(()) } else { Err(anyhow!("{ready}")) }
    })
    .await?;
    ensure!(host.try_status().is_none(), "the host exited:\n{}", host.log_tail(40));
    host.stop().await?;
    Ok(())
}

/// The audit's H6: with `memberClusters.fromSecrets`, whoever may write a Secret in the release
/// namespace would enrol a cluster under a name and labels of their choosing. The chart's policy
/// lets only `memberClusters.policy.enrollers` create a Secret labelled `kubewasm.io/cluster`,
/// under an allowed name and allowed label values; other Secrets are untouched by it.
#[tokio::test]
async fn only_enrollers_enrol_member_clusters_under_the_names_and_labels_allowed() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("enrol-policy").await?;
    let values = "memberClusters:\n  fromSecrets: true\n  policy:\n    enabled: true\n    enrollers: [{kind: User, name: ops}]\n    names: [eu]\n    labels: {env: [prod]}\n";
    let rendered = objects(&template(ns.name(), values).await?)?;
    let policies: Vec<&Value> = rendered.iter().filter(|o| o["kind"].as_str().is_some_and(|k| k.starts_with("ValidatingAdmissionPolicy"))).collect();
    cp.kubectl()?.run_with_stdin(&["apply", "-f", "-"], Some(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": policies}).to_string())).await?;
    // RBAC lets both write Secrets here: it cannot tell a cluster Secret from another.
    let writers = format!(
        r#"{{"apiVersion": "v1", "kind": "List", "items": [
        {{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {{"name": "secret-writers", "namespace": "{ns}"}},
         "rules": [{{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "get", "update", "delete"]}}]}},
        {{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {{"name": "secret-writers", "namespace": "{ns}"}},
         "roleRef": {{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secret-writers"}},
         "subjects": [{{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ops"}}, {{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "intruder"}}]}}]}}"#,
        ns = ns.name()
    );
    cp.kubectl()?.run_with_stdin(&["apply", "-f", "-"], Some(&writers)).await?;
    let secret = |name: &str, labels: &[(&str, &str)]| -> Result<k8s_openapi::api::core::v1::Secret> {
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        Ok(serde_json::from_value(serde_json::json!({"metadata": {"name": name, "labels": labels}, "stringData": {"kubeconfig": "{}"}}))?)
    };
    let secrets_as = |client: kube::Client| Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client, ns.name());
    let (ops, intruder) = (secrets_as(as_user(cp, "ops").await?), secrets_as(as_user(cp, "intruder").await?));
    let cluster = [("kubewasm.io/cluster", "true"), ("env", "prod")];
    // The policy takes a moment to be in force after it is created.
    let refused = eventually("the intruder's cluster Secret refused", CONVERGE, || async {
        match intruder.create(&PostParams::default(), &secret("eu", &cluster)?).await {
            Ok(_) => {
                intruder.delete("eu", &Default::default()).await?;
                Err(anyhow!("the intruder enrolled eu"))
            }
            Err(e) => Ok(e),
        }
    })
    .await?;
    ensure!(kubewasm_tests::api_code(&refused) == Some(403) && refused.to_string().contains("may not enrol member clusters"), "{refused}");
    for (name, labels, why) in [
        ("us", &cluster[..], "not one of memberClusters.policy.names"),
        ("eu", &[("kubewasm.io/cluster", "true"), ("env", "dev")][..], "outside memberClusters.policy.labels"),
    ] {
        let refused = ops.create(&PostParams::default(), &secret(name, labels)?).await.err().with_context(|| format!("ops enrolled {name} {labels:?}"))?;
        ensure!(refused.to_string().contains(why), "{name}: {refused}");
    }
    ops.create(&PostParams::default(), &secret("eu", &cluster)?).await.context("ops enrols eu, env=prod")?;
    intruder.create(&PostParams::default(), &secret("unrelated", &[])?).await.context("a Secret that is no cluster is not the policy's")?;
    Ok(())
}
