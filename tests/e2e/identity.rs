//! Per-plugin identities (issue 9) against the real API server: every plugin acts as its own
//! ServiceAccount, RBAC decides what it may do, and the host refuses to start what RBAC does not
//! allow — with the rule named — and starts it once the rule is applied, without a restart.
//!
//! `cargo test -p kubewasm-tests --test identity`
//!
//! The API server's audit log (written by the test control plane) says who made each write and
//! as whom.

mod support;

use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kubewasm_tests::{ControlPlane, E2eSettings, Host, PluginDir, accounts, audit, eventually, guests, unique_name};
use support::*;

const READY: Duration = Duration::from_secs(60);

/// The host runs with only what `kubewasm rbac` printed — as a ServiceAccount whose token comes
/// from the TokenRequest API, as in a cluster — and every write it makes for the plugin
/// (outputs, Events) is authorized as the plugin's ServiceAccount, none as the host.
#[tokio::test]
async fn every_write_for_a_plugin_is_authorized_as_its_own_service_account() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("identity").await?;
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("writer").events(), "v01");

    let mut args = rbac_args(dir.path(), ns.name());
    args.extend([format!("--service-account={}:kubewasm-host", ns.name()), format!("--name={}", unique_name("kubewasm-host"))]);
    let yaml = rbac(&args).await?;
    for needle in ["name: kubewasm-plugin-writer\n", "kind: RoleBinding", "- impersonate", "- kubewasm-plugin-writer"] {
        ensure!(yaml.contains(needle), "{needle:?} missing from:\n{yaml}");
    }
    apply(cp, &yaml).await?;
    let kubeconfig = tempfile::NamedTempFile::new()?;
    accounts::service_account_kubeconfig(cp, ns.name(), "kubewasm-host", kubeconfig.path()).await?;

    let config = host_config("identity", dir.path(), kubeconfig.path(), ns.name()).service_accounts(ns.name());
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    let cms: Api<ConfigMap> = ns.api();
    let names = ["a", "b", "c"];
    create_primaries(&cms, &inputs(&names, "1")).await?;
    wait_outputs(&cms, "writer", &inputs(&names, "1"), Want::default()).await?;
    for name in names {
        wait_event(ns.client(), ns.name(), name, "Reconciled", "1").await?;
    }

    let host_user = format!("system:serviceaccount:{}:kubewasm-host", ns.name());
    let plugin_user = format!("system:serviceaccount:{}:kubewasm-plugin-writer", ns.name());
    let writes: Vec<audit::AuditEvent> =
        audit::read(cp.data_dir()).into_iter().filter(|e| e.user.username == host_user && e.namespace() == Some(ns.name())).collect();
    // The host's own: its status ConfigMap and the Events about it.
    let own = |e: &audit::AuditEvent| {
        let name = e.object_ref.as_ref().and_then(|o| o.name.as_deref()).unwrap_or_default();
        name == STATUS || (e.resource() == "events" && name.starts_with(&format!("{STATUS}.")))
    };
    let for_plugin: Vec<&audit::AuditEvent> = writes.iter().filter(|e| !own(e)).collect();
    ensure!(for_plugin.iter().any(|e| e.resource() == "configmaps"), "no output write of the plugin in the audit log");
    ensure!(for_plugin.iter().any(|e| e.resource() == "events"), "no Event of the plugin in the audit log");
    let as_host: Vec<String> =
        for_plugin.iter().filter(|e| e.acting_as() != plugin_user).map(|e| format!("{} {} as {}", e.verb, e.resource(), e.acting_as())).collect();
    ensure!(as_host.is_empty(), "writes for the plugin not authorized as its ServiceAccount: {as_host:?}");
    ensure!(writes.iter().filter(|e| own(e)).all(|e| e.impersonated_user.is_none()), "the host's own writes are its own");
    let log = host.log_text();
    ensure!(!log.contains("forbidden"), "forbidden requests with the printed RBAC:\n{}", host.log_tail(40));
    host.stop().await?;
    Ok(())
}

/// A plugin whose identity lacks what it declares does not start, and the Event names the
/// missing rule; a new version that asks for more than its identity holds is refused while the
/// old one keeps serving. Once the rules are applied, both start without a host restart.
#[tokio::test]
async fn what_rbac_does_not_allow_is_refused_naming_the_rule_and_starts_once_it_is_applied() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("admission").await?;
    let dir = PluginDir::new();
    let base = E2eSettings::new("needy");
    dir.install_e2e(&base, "v01");
    apply(cp, &rbac(&rbac_args(dir.path(), ns.name())).await?).await?;

    let config = host_config("admission", dir.path(), cp.kubeconfig_path(), ns.name()).service_accounts(ns.name());
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    let cms: Api<ConfigMap> = ns.api();
    create_primaries(&cms, &inputs(&["p"], "1")).await?;
    wait_outputs(&cms, "needy", &inputs(&["p"], "1"), Want::default()).await?;

    // A new version asking to read Secrets: refused, the rule named; the old one serves on.
    let more = base.clone().extra("get Secret.v1");
    dir.install_e2e(&more, "v02");
    let event = wait_event(ns.client(), ns.name(), STATUS, "PluginRejected", "lacks").await?;
    let note = event.note.unwrap_or_default();
    ensure!(note.contains(r#"resources: ["secrets"], verbs: ["get"]"#) && note.contains("kubewasm rbac --plugin needy"), "the rule is not named: {note}");
    set_input(&cms, "p", "2").await?;
    wait_outputs(&cms, "needy", &inputs(&["p"], "2"), Want { variant: Some("v01"), ..Default::default() }).await?;

    // A second plugin with no RBAC at all is refused too.
    let other = E2eSettings::new("other").selector("e2e.kubewasm.io/other");
    dir.install_e2e(&other, "v01");
    wait_event(ns.client(), ns.name(), STATUS, "PluginRejected", "kubewasm-plugin-other lacks").await?;

    // The admin applies what `kubewasm rbac` prints now: both start, on the host's next look.
    apply(cp, &rbac(&rbac_args(dir.path(), ns.name())).await?).await?;
    set_input(&cms, "p", "3").await?;
    wait_outputs(&cms, "needy", &inputs(&["p"], "3"), Want { variant: Some("v02"), ..Default::default() }).await?;
    let mut labelled = primary("q", "1");
    labelled.metadata.labels = Some([("e2e.kubewasm.io/other".to_string(), "yes".to_string())].into());
    cms.create(&Default::default(), &labelled).await?;
    wait_outputs(&cms, "other", &inputs(&["q"], "1"), Want::default()).await?;
    host.wait_ready(READY).await?;
    host.stop().await?;
    Ok(())
}

/// Plugins declaring `patch` on Leases in the host's namespace get nowhere near the host's own
/// Lease. One declares every Lease (and RBAC grants it, as `kubewasm rbac` printed): the host
/// refuses, its own object whatever the manifest says. The other declares only a Lease of its
/// own: the host refuses (not granted), and so does the API server when the plugin's identity
/// asks it directly. Leadership goes on.
#[tokio::test]
async fn no_plugin_can_touch_the_hosts_lease() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("lease").await?;
    let dir = PluginDir::new();
    let hostile = std::fs::read(guests::guest("hostile-guest", "hostile_guest"))?;
    let lease = format!("{}/kubewasm", ns.name());
    dir.install("greedy", &hostile, Some(&format!("name = \"greedy\"\nattack = \"lease\"\nlease = \"{lease}\"\n")));
    dir.install("narrow", &hostile, Some(&format!("name = \"narrow\"\nattack = \"lease\"\nlease = \"{lease}\"\nlease-names = [\"narrow\"]\n")));
    let mut args = rbac_args(dir.path(), ns.name());
    args.push(format!("--lease={lease}"));
    apply(cp, &rbac(&args).await?).await?;

    let config = host_config("lease", dir.path(), cp.kubeconfig_path(), ns.name()).service_accounts(ns.name()).leader_elect(ns.name(), "kubewasm");
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    let leases: Api<Lease> = ns.api();
    let holder = || async {
        let lease = leases.get("kubewasm").await?;
        Ok::<_, anyhow::Error>(lease.spec.and_then(|s| s.holder_identity).unwrap_or_default())
    };
    let before =
        eventually("the host to hold its Lease", READY, || async { holder().await.and_then(|h| if h.is_empty() { Err(anyhow!("no holder")) } else { Ok(h) }) })
            .await?;
    let cms: Api<ConfigMap> = ns.api();
    let mut target = primary("attack", "1");
    target.metadata.labels = Some([("hostile.kubewasm.io/target".to_string(), "yes".to_string())].into());
    cms.create(&Default::default(), &target).await?;
    for (plugin, refusal) in [("greedy", "the host's own object"), ("narrow", "is not granted by the plugin's manifest")] {
        eventually(&format!("{plugin}'s attack refused"), READY, || async {
            let log = host.log_text();
            let line = log.lines().find(|l| l.contains("lease attack:") && l.contains(&format!("plugin={plugin}"))).ok_or_else(|| anyhow!("no attack yet"))?;
            if line.contains("Forbidden") && line.contains(refusal) { Ok(()) } else { Err(anyhow!("not refused as expected: {line}")) }
        })
        .await?;
    }
    ensure!(holder().await? == before, "the Lease changed hands");
    let plugin_users: Vec<String> = ["greedy", "narrow"].iter().map(|p| format!("system:serviceaccount:{}:kubewasm-plugin-{p}", ns.name())).collect();
    let touched: Vec<String> = audit::read(cp.data_dir())
        .into_iter()
        .filter(|e| e.resource() == "leases" && e.namespace() == Some(ns.name()) && plugin_users.iter().any(|u| u == e.acting_as()))
        .map(|e| format!("{} by {}", e.verb, e.acting_as()))
        .collect();
    ensure!(touched.is_empty(), "plugins' Lease writes reached the API server: {touched:?}");

    // Past the host: the narrow plugin's identity may not patch that Lease either.
    let as_plugin = kube::Client::try_from({
        let mut config = kube::Config::from_custom_kubeconfig(kube::config::Kubeconfig::read_from(cp.kubeconfig_path())?, &Default::default()).await?;
        config.auth_info.impersonate = Some(plugin_users[1].clone());
        config
    })?;
    let refused = Api::<Lease>::namespaced(as_plugin, ns.name())
        .patch("kubewasm", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"holderIdentity": "hostile"}})))
        .await
        .err()
        .context("RBAC let the plugin's identity patch the host's Lease")?;
    ensure!(kubewasm_tests::api_code(&refused) == Some(403), "expected 403, got {refused}");
    ensure!(host.metrics().await?.contains("leader_election_master_status{name=\"kubewasm\"} 1"), "the host no longer leads");
    host.stop().await?;
    Ok(())
}

/// A plugin name belongs to one file: a second file claiming it is refused, naming the first,
/// whether the first is still starting (waiting for a resource the API server does not serve)
/// or running.
#[tokio::test]
async fn a_second_file_cannot_take_a_plugin_name() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("names").await?;
    let dir = PluginDir::new();
    let wasm = std::fs::read(kubewasm_tests::plugindir::e2e_guest())?;
    // `first` waits for a kind nobody serves: it stays starting.
    dir.install("first", &wasm, Some(&E2eSettings::new("twin").kind("NotServed").to_toml()));
    let config = host_config("names", dir.path(), cp.kubeconfig_path(), ns.name());
    let mut host = Host::start(config).await?;
    dir.install("second", &wasm, Some(&E2eSettings::new("twin").to_toml()));
    let first = dir.wasm_path("first").display().to_string();
    wait_event(ns.client(), ns.name(), STATUS, "PluginRejected", &format!("already taken by {first}")).await?;
    // Now running under `first`, serving ConfigMaps: a third claim is refused all the same.
    dir.install("first", &wasm, Some(&E2eSettings::new("twin").to_toml()));
    host.wait_ready(READY).await?;
    dir.install("third", &wasm, Some(&E2eSettings::new("twin").selector("e2e.kubewasm.io/third").to_toml()));
    let third = dir.wasm_path("third").display().to_string();
    eventually("the third file refused", READY, || async {
        let all = events(ns.client(), ns.name()).await?;
        let found = all.iter().any(|e| e.note.as_deref().is_some_and(|n| n.contains(&format!("rejected {third}")) && n.contains(&first)));
        if found { Ok(()) } else { Err(anyhow!("Events so far:\n  {}", describe_events(&all))) }
    })
    .await?;
    let cms: Api<ConfigMap> = ns.api();
    create_primaries(&cms, &inputs(&["x"], "1")).await?;
    wait_outputs(&cms, "twin", &inputs(&["x"], "1"), Want::default()).await?;
    host.stop().await?;
    Ok(())
}

/// What `kubewasm rbac` prints applies cleanly (server-side dry run), and a grant limited to a
/// namespace becomes a Role there and nowhere else: no ClusterRole carries it.
#[tokio::test]
async fn kubewasm_rbac_applies_cleanly_and_keeps_namespace_limited_grants_in_their_namespaces() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("rbac-dry").await?;
    let team = cp.namespace("rbac-team").await?;
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("scoped").extra(&format!("get,list Secret.v1 ns={}", team.name())), "v01");
    dir.install("sample-controller", &std::fs::read(guests::guest("sample-controller", "sample_controller"))?, None);
    let yaml = rbac(&[
        format!("--plugins={}", dir.path().display()),
        format!("--identity-namespace={}", ns.name()),
        format!("--status-configmap={}/{STATUS}", ns.name()),
        format!("--lease={}/kubewasm", ns.name()),
    ])
    .await?;
    cp.kubectl()?.run_with_stdin(&["apply", "--dry-run=server", "-f", "-"], Some(&yaml)).await.context("the printed RBAC does not apply")?;
    let docs: Vec<serde_json::Value> = yaml.split("\n---\n").map(|d| serde_saphyr::from_str(d).map_err(|e| anyhow!("{e}: {d}"))).collect::<Result<_>>()?;
    let secrets_in = |doc: &serde_json::Value| {
        doc["rules"].as_array().into_iter().flatten().any(|r| r["resources"].as_array().is_some_and(|rs| rs.iter().any(|x| x == "secrets")))
    };
    let with_secrets: Vec<(String, String)> = docs
        .iter()
        .filter(|d| secrets_in(d))
        .map(|d| (d["kind"].as_str().unwrap_or_default().to_string(), d["metadata"]["namespace"].as_str().unwrap_or_default().to_string()))
        .collect();
    // The plugin's Role, and the host's (it watches them there for the plugin): nothing else.
    ensure!(
        !with_secrets.is_empty() && with_secrets.iter().all(|(kind, namespace)| kind == "Role" && namespace == team.name()),
        "Secrets granted where they should not be: {with_secrets:?}"
    );
    Ok(())
}

/// What a namespace-onboarding controller needs: binding the ClusterRole `edit` (which the test
/// control plane's aggregation controller fills with its real rules). With a declared `bind` on
/// `edit`, the API server lets the plugin's ServiceAccount create the RoleBinding; a plugin
/// declaring only `create` on RoleBindings is refused by the API server ("not currently held"),
/// and its Warning Event says so.
#[tokio::test]
async fn binding_the_edit_role_needs_a_declared_bind_grant() -> Result<()> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("onboarding").await?;
    let roles: Api<ClusterRole> = Api::all(ns.client().clone());
    eventually("the aggregated ClusterRole edit to carry rules", READY, || async {
        let edit = roles.get("edit").await?;
        let rules = edit.rules.unwrap_or_default().len();
        if rules > 5 { Ok(()) } else { Err(anyhow!("edit has {rules} rules")) }
    })
    .await?;

    let dir = PluginDir::new();
    let rolebindings = "create,patch RoleBinding.v1.rbac.authorization.k8s.io";
    dir.install_e2e(
        &E2eSettings::new("onboarder").mode("rolebinding").extra(rolebindings).extra("bind ClusterRole.v1.rbac.authorization.k8s.io name=edit"),
        "v01",
    );
    dir.install_e2e(&E2eSettings::new("unbound").mode("rolebinding").selector("e2e.kubewasm.io/unbound").extra(rolebindings).events(), "v01");
    let yaml = rbac(&rbac_args(dir.path(), ns.name())).await?;
    ensure!(yaml.contains("- bind") && yaml.contains("- edit"), "no bind rule on edit in:\n{yaml}");
    apply(cp, &yaml).await?;
    let mut host = Host::start(host_config("onboarding", dir.path(), cp.kubeconfig_path(), ns.name()).service_accounts(ns.name())).await?;
    host.wait_ready(READY).await?;

    let cms: Api<ConfigMap> = ns.api();
    create_primaries(&cms, &inputs(&["team-a"], "team-a-sa")).await?;
    let bindings: Api<RoleBinding> = ns.api();
    eventually("the onboarder's RoleBinding", CONVERGE, || async { Ok::<_, anyhow::Error>(bindings.get("team-a-edit").await?) }).await?;

    let mut unbound = primary("team-b", "team-b-sa");
    unbound.metadata.labels = Some([("e2e.kubewasm.io/unbound".to_string(), "yes".to_string())].into());
    cms.create(&Default::default(), &unbound).await?;
    wait_event(ns.client(), ns.name(), "team-b", "ReconcileFailed", "not currently held").await?;
    ensure!(bindings.get_opt("team-b-edit").await?.is_none(), "the unbound plugin created its RoleBinding");
    host.stop().await?;
    Ok(())
}
