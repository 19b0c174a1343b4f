//! Multi-cluster (issue 25) against real control planes: the hub (the shared one, where the host
//! runs) and member clusters started by each test, engaged from a directory of kubeconfig files
//! (`--clusters DIR`) while the host runs.
//!
//! `cargo test -p kubewasm-tests --test fleet`

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kubewasm_tests::{ControlPlane, E2eSettings, Host, PluginDir, audit, eventually, guests, members};
use support::*;

const READY: Duration = Duration::from_secs(60);
/// How soon a member engaged at run time must be served, its existing objects included.
const ENGAGED: Duration = Duration::from_secs(30);

/// A member cluster for one test, with the test's namespace.
struct MemberCluster {
    name: &'static str,
    cp: ControlPlane,
    cms: Api<ConfigMap>,
}

impl MemberCluster {
    async fn start(name: &'static str, namespace: &str) -> Result<Self> {
        let cp = ControlPlane::start().await?;
        let client = cp.client().await?;
        let ns = Namespace { metadata: ObjectMeta { name: Some(namespace.into()), ..Default::default() }, ..Default::default() };
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
        Ok(MemberCluster { name, cms: Api::namespaced(client, namespace), cp })
    }

    fn engage(&self, dir: &Path, labels: &[(&str, &str)]) -> Result<()> {
        Ok(members::engage(dir, self.name, self.cp.kubeconfig_path(), labels)?)
    }

    fn disengage(&self, dir: &Path) -> Result<()> {
        Ok(members::disengage(dir, self.name)?)
    }
}

/// The `cluster` an output says it was made in.
async fn output_cluster(cms: &Api<ConfigMap>, primary: &str, plugin: &str) -> Result<Option<String>> {
    Ok(output(cms, primary, plugin).await?.and_then(|d| d.get("cluster").cloned()))
}

fn inputs(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A plugin serving every member reconciles objects in the hub and in both members, each where
/// it lives; a member engaged at run time is served within seconds, its existing objects
/// included; a disengaged member's changes are no longer reconciled.
#[tokio::test]
async fn a_plugin_serves_its_members_and_one_engaged_at_run_time() -> Result<()> {
    let hub = ControlPlane::shared().await;
    let ns = hub.namespace("fleet").await?;
    let (m1, m2) = tokio::try_join!(MemberCluster::start("m1", ns.name()), MemberCluster::start("m2", ns.name()))?;
    let clusters = tempfile::tempdir()?;
    m1.engage(clusters.path(), &[])?;
    create_primaries(&m1.cms, &inputs(&[("a", "1"), ("b", "1")])).await?;
    create_primaries(&m2.cms, &inputs(&[("c", "1")])).await?;
    let hub_cms: Api<ConfigMap> = ns.api();
    create_primaries(&hub_cms, &inputs(&[("h", "1")])).await?;

    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("spread").serve_members("all"), "v01");
    let config = host_config("fleet", dir.path(), hub.kubeconfig_path(), ns.name()).arg(format!("--clusters={}", clusters.path().display()));
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;

    wait_outputs(&hub_cms, "spread", &inputs(&[("h", "1")]), Want::default()).await?;
    wait_outputs(&m1.cms, "spread", &inputs(&[("a", "1"), ("b", "1")]), Want::default()).await?;
    ensure!(output_cluster(&hub_cms, "h", "spread").await?.as_deref() == Some(""), "the hub's output names a member");
    ensure!(output_cluster(&m1.cms, "a", "spread").await?.as_deref() == Some("m1"), "m1's output does not say m1");
    ensure!(output(&m2.cms, "c", "spread").await?.is_none(), "m2 is served before it is engaged");

    // m2 is engaged while the host runs: its existing object is reconciled, as an initial list.
    let engaged = Instant::now();
    m2.engage(clusters.path(), &[])?;
    wait_outputs_within(&m2.cms, "spread", &inputs(&[("c", "1")]), Want::default(), ENGAGED).await?;
    println!("a member engaged at run time was served, its existing object included, in {:?}", engaged.elapsed());
    ensure!(output_cluster(&m2.cms, "c", "spread").await?.as_deref() == Some("m2"), "m2's output does not say m2");
    set_input(&m2.cms, "c", "2").await?;
    wait_outputs(&m2.cms, "spread", &inputs(&[("c", "2")]), Want::default()).await?;

    // Disengaged: m2's changes stay unreconciled while the others' are.
    m2.disengage(clusters.path())?;
    eventually("m2 to be disengaged", Duration::from_secs(20), || async {
        ensure!(host.log_text().contains("disengaged cluster"), "not yet");
        Ok(())
    })
    .await?;
    set_input(&m2.cms, "c", "3").await?;
    set_input(&m1.cms, "a", "3").await?;
    wait_outputs(&m1.cms, "spread", &inputs(&[("a", "3")]), Want::default()).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let c = output(&m2.cms, "c", "spread").await?.and_then(|d| d.get("input").cloned());
    ensure!(c.as_deref() == Some("2"), "a disengaged member's change was reconciled: {c:?}");
    host.stop().await?;
    Ok(())
}

/// A member whose API server stops delays only its own keys: the other member's and the hub's
/// changes are reconciled as fast as before; once it is back, its changes are caught up.
#[tokio::test]
async fn a_member_that_stops_answering_delays_only_its_own_work() -> Result<()> {
    let hub = ControlPlane::shared().await;
    let ns = hub.namespace("outage").await?;
    let (mut m1, m2) = tokio::try_join!(MemberCluster::start("m1", ns.name()), MemberCluster::start("m2", ns.name()))?;
    let clusters = tempfile::tempdir()?;
    m1.engage(clusters.path(), &[])?;
    m2.engage(clusters.path(), &[])?;
    create_primaries(&m1.cms, &inputs(&[("a", "1")])).await?;
    create_primaries(&m2.cms, &inputs(&[("b", "1")])).await?;
    let hub_cms: Api<ConfigMap> = ns.api();
    create_primaries(&hub_cms, &inputs(&[("h", "1")])).await?;

    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("spread").serve_members("all"), "v01");
    let config = host_config("outage", dir.path(), hub.kubeconfig_path(), ns.name()).arg(format!("--clusters={}", clusters.path().display()));
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    wait_outputs(&m1.cms, "spread", &inputs(&[("a", "1")]), Want::default()).await?;
    wait_outputs(&m2.cms, "spread", &inputs(&[("b", "1")]), Want::default()).await?;

    // How long a change takes with every member up.
    let before = Instant::now();
    set_input(&m2.cms, "b", "2").await?;
    wait_outputs(&m2.cms, "spread", &inputs(&[("b", "2")]), Want::default()).await?;
    let up = before.elapsed();

    m1.cp.stop().await?;
    // Changes in m2 and the hub while m1 is down, each timed.
    let mut during = Vec::new();
    for round in 3..6 {
        let input = round.to_string();
        let started = Instant::now();
        set_input(&m2.cms, "b", &input).await?;
        set_input(&hub_cms, "h", &input).await?;
        wait_outputs_within(&m2.cms, "spread", &inputs(&[("b", &input)]), Want::default(), Duration::from_secs(10)).await?;
        wait_outputs_within(&hub_cms, "spread", &inputs(&[("h", &input)]), Want::default(), Duration::from_secs(10)).await?;
        during.push(started.elapsed());
    }
    println!("a change in m2 and the hub: {up:?} with every member up; {during:?} with m1 down");
    ensure!(host.try_status().is_none(), "the host exited while a member was down:\n{}", host.log_tail(40));

    m1.cp.restart().await?;
    let m1_cms: Api<ConfigMap> = Api::namespaced(m1.cp.client().await?, ns.name());
    set_input(&m1_cms, "a", "2").await?;
    wait_outputs(&m1_cms, "spread", &inputs(&[("a", "2")]), Want::default()).await?;
    let log = host.log_text();
    ensure!(!log.contains("Quarantined") && !log.contains("panicked"), "m1's outage faulted or quarantined:\n{}", host.log_tail(40));
    host.stop().await?;
    Ok(())
}

/// A hub plugin (the Rust example) copies a ConfigMap into every member labelled env=prod, as
/// its own identity in each (the members' audit logs say so); a prod member where that identity
/// lacks RBAC is refused by admission — the cluster and the rule named — and gets its copy once
/// the rule is applied there; a dev member gets none; deleting the source deletes the copies.
#[tokio::test]
async fn a_hub_plugin_propagates_into_prod_members_as_its_own_identity() -> Result<()> {
    propagation("rust", true).await
}

/// The same example written in Go behaves alike (without the refused member).
#[tokio::test]
async fn the_go_propagation_example_propagates_alike() -> Result<()> {
    propagation("go", false).await
}

async fn propagation(lang: &str, refused_member: bool) -> Result<()> {
    let hub = ControlPlane::shared().await;
    let ns = hub.namespace(&format!("propagate-{lang}")).await?;
    let (m1, m2, m3) = tokio::try_join!(MemberCluster::start("m1", ns.name()), MemberCluster::start("m2", ns.name()), MemberCluster::start("m3", ns.name()))?;
    let dir = PluginDir::new();
    std::fs::copy(guests::example("fleet-propagation", lang), dir.path().join("fleet-propagation.wasm"))?;
    let grants = rbac(&rbac_args(dir.path(), ns.name())).await?;
    apply(hub, &grants).await?;
    apply(&m1.cp, &grants).await?;
    apply(&m3.cp, &grants).await?;
    if !refused_member {
        apply(&m2.cp, &grants).await?;
    }
    let clusters = tempfile::tempdir()?;
    m1.engage(clusters.path(), &[("env", "prod")])?;
    m2.engage(clusters.path(), &[("env", "prod")])?;
    m3.engage(clusters.path(), &[("env", "dev")])?;
    let config = host_config("propagate", dir.path(), hub.kubeconfig_path(), ns.name())
        .service_accounts(ns.name())
        .arg(format!("--clusters={}", clusters.path().display()));
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;

    let hub_cms: Api<ConfigMap> = ns.api();
    let source = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            labels: Some([("fleet.kubewasm.io/propagate".to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        data: Some([("level".to_string(), "debug".to_string())].into()),
        ..Default::default()
    };
    hub_cms.create(&PostParams::default(), &source).await?;
    let copied = |cms: Api<ConfigMap>| async move { Ok::<_, anyhow::Error>(cms.get_opt("settings").await?.and_then(|cm| cm.data).unwrap_or_default()) };
    eventually("the copy in m1", CONVERGE, || async {
        ensure!(copied(m1.cms.clone()).await?.get("level").map(String::as_str) == Some("debug"), "not yet");
        Ok(())
    })
    .await
    .map_err(|e| anyhow!("{e}\n{}", host.log_tail(60)))?;

    if refused_member {
        // m2: refused by admission, with the cluster and the missing rule named.
        eventually("m2's refusal", Duration::from_secs(30), || async {
            let log = host.log_text();
            let line = log.lines().find(|l| l.contains(r#"not running in cluster "m2""#)).unwrap_or_default().to_string();
            ensure!(line.contains(r#"admission in cluster "m2""#) && line.contains("kubewasm-plugin-fleet-propagation lacks"), "not yet: {line:?}");
            ensure!(line.contains(r#"resources: ["configmaps"]"#), "the rule is not named: {line}");
            Ok(())
        })
        .await?;
        ensure!(m2.cms.get_opt("settings").await?.is_none(), "a copy in m2, whose RBAC refuses the plugin");
    }
    ensure!(m3.cms.get_opt("settings").await?.is_none(), "a copy in m3, which is not env=prod");

    // Every write in m1 was the plugin's identity's, impersonated with m1's credentials.
    let plugin_user = format!("system:serviceaccount:{}:kubewasm-plugin-fleet-propagation", ns.name());
    let writes: Vec<audit::AuditEvent> = audit::read(m1.cp.data_dir())
        .into_iter()
        .filter(|e| e.namespace() == Some(ns.name()) && e.resource() == "configmaps" && matches!(e.verb.as_str(), "create" | "patch" | "update"))
        .collect();
    ensure!(!writes.is_empty(), "no write of the copy in m1's audit log");
    ensure!(
        writes.iter().all(|e| e.acting_as() == plugin_user),
        "writes in m1 not as {plugin_user}: {:?}",
        writes.iter().map(|e| e.acting_as()).collect::<Vec<_>>()
    );

    // RBAC applied in m2: the host's next try admits the plugin there, and the copy follows.
    if refused_member {
        apply(&m2.cp, &grants).await?;
    }
    eventually("the copy in m2", CONVERGE, || async {
        ensure!(copied(m2.cms.clone()).await?.get("level").map(String::as_str) == Some("debug"), "not yet");
        Ok(())
    })
    .await?;
    ensure!(m3.cms.get_opt("settings").await?.is_none(), "a copy in m3, which is not env=prod");

    // Deleting the source deletes the copies first (the finalizer).
    hub_cms.delete("settings", &DeleteParams::default()).await?;
    eventually("the copies gone", CONVERGE, || async {
        ensure!(m1.cms.get_opt("settings").await?.is_none() && m2.cms.get_opt("settings").await?.is_none(), "not yet");
        ensure!(hub_cms.get_opt("settings").await?.is_none(), "the source is still there");
        Ok(())
    })
    .await?;
    host.stop().await?;
    Ok(())
}

/// Members engaged from kubeconfig Secrets (`--cluster-secrets`): a labelled Secret engages its
/// cluster, with the Secret's labels; one whose credentials may not impersonate the plugin's
/// identity is refused for that plugin, the cluster and the reason named, while the other is
/// served; deleting a Secret disengages its cluster.
#[tokio::test]
async fn members_from_secrets_and_one_whose_credentials_cannot_impersonate() -> Result<()> {
    let hub = ControlPlane::shared().await;
    let ns = hub.namespace("secrets").await?;
    let member = MemberCluster::start("m1", ns.name()).await?;
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("spread").serve_members("env=prod"), "v01");
    let grants = rbac(&rbac_args(dir.path(), ns.name())).await?;
    apply(hub, &grants).await?;
    apply(&member.cp, &grants).await?;
    create_primaries(&member.cms, &inputs(&[("a", "1")])).await?;

    let config = host_config("secrets", dir.path(), hub.kubeconfig_path(), ns.name()).service_accounts(ns.name()).arg("--cluster-secrets");
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;

    // The same API server twice: as its admin (m1), and as a user who may not impersonate (m2).
    let secrets: Api<Secret> = ns.api();
    let kubeconfig_secret = |name: &str, kubeconfig: &Path| -> Result<Secret> {
        let labels = [("kubewasm.io/cluster", "true"), ("env", "prod")].map(|(k, v)| (k.to_string(), v.to_string()));
        Ok(Secret {
            metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels.into()), ..Default::default() },
            string_data: Some([("value".to_string(), std::fs::read_to_string(kubeconfig)?)].into()),
            ..Default::default()
        })
    };
    secrets.create(&PostParams::default(), &kubeconfig_secret("m1", member.cp.kubeconfig_path())?).await?;
    secrets.create(&PostParams::default(), &kubeconfig_secret("m2", member.cp.unprivileged_kubeconfig_path())?).await?;
    wait_outputs(&member.cms, "spread", &inputs(&[("a", "1")]), Want::default()).await?;
    ensure!(output_cluster(&member.cms, "a", "spread").await?.as_deref() == Some("m1"), "m1's output does not say m1");
    let refusal = eventually("m2's refusal", Duration::from_secs(30), || async {
        let log = host.log_text();
        log.lines().find(|l| l.contains(r#"not running in cluster "m2""#)).map(String::from).ok_or_else(|| anyhow!("not yet"))
    })
    .await?;
    ensure!(refusal.contains(r#"admission in cluster "m2""#) && refusal.contains("impersonate"), "the refusal does not say why: {refusal}");
    let refusals = host.metric("kubewasm_plugin_cluster_refusals_total", &[("plugin", "spread"), ("cluster", "m2")]).await?;
    ensure!(refusals >= 1.0, "m2's refusal is not counted");

    secrets.delete("m1", &DeleteParams::default()).await?;
    eventually("m1 to be disengaged", Duration::from_secs(20), || async {
        ensure!(host.log_text().lines().any(|l| l.contains("disengaged cluster") && l.contains("m1")), "not yet");
        Ok(())
    })
    .await?;
    set_input(&member.cms, "a", "2").await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let a = output(&member.cms, "a", "spread").await?.and_then(|d| d.get("input").cloned());
    ensure!(a.as_deref() == Some("1"), "a disengaged member's change was reconciled: {a:?}");
    host.stop().await?;
    Ok(())
}

/// An HTTP server on loopback standing in for whatever a kubeconfig's author points `server` at:
/// it keeps the head of every request and answers 503.
struct Capture {
    port: u16,
    heads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Capture {
    async fn start() -> Result<Self> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = heads.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let kept = kept.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    kept.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                    let _ = conn.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
                });
            }
        });
        Ok(Capture { port, heads, task })
    }

    fn server(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The `Authorization` lines of every request so far.
    fn authorizations(&self) -> Vec<String> {
        let heads = self.heads.lock().unwrap();
        heads.iter().flat_map(|h| h.lines()).filter(|l| l.to_ascii_lowercase().starts_with("authorization:")).map(String::from).collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A labelled cluster Secret holding a kubeconfig for `server` whose one user is `user`.
fn cluster_secret(name: &str, server: &str, user: serde_json::Value) -> Result<Secret> {
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "m",
        "clusters": [{"name": "m", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "m", "context": {"cluster": "m", "user": "u"}}],
    });
    Ok(Secret {
        metadata: ObjectMeta { name: Some(name.into()), labels: Some([("kubewasm.io/cluster".to_string(), "true".to_string())].into()), ..Default::default() },
        string_data: Some([("value".to_string(), serde_json::to_string(&kubeconfig)?)].into()),
        ..Default::default()
    })
}

/// K1: whoever may write a cluster Secret must not make the host run a program or send a file
/// of its disk (its own ServiceAccount token, here a stand-in) to a server of their choice. A
/// Secret whose user reads `tokenFile`, and one whose user is an `exec` plugin, both pointing
/// at capture servers, are refused — an Event on each Secret naming the field, counted by
/// reason — even with plain HTTP allowed (`--unsafe-member-clusters-allow-insecure`); their
/// capture servers see no Authorization header, and the program never runs. A third Secret with
/// an inline token shows that the host does contact what a Secret names.
#[tokio::test]
async fn member_kubeconfigs_from_secrets_are_data_never_a_program_or_a_path() -> Result<()> {
    let hub = ControlPlane::shared().await;
    let ns = hub.namespace("kubeconfig-data").await?;
    let (stolen, executed, control) = tokio::try_join!(Capture::start(), Capture::start(), Capture::start())?;
    let scratch = tempfile::tempdir()?;
    let token = scratch.path().join("token");
    std::fs::write(&token, "the-hosts-own-serviceaccount-token")?;
    let marker = scratch.path().join("executed");
    let program = scratch.path().join("credentials.sh");
    let credential = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-token"}}"#;
    std::fs::write(&program, format!("#!/bin/sh\ntouch {}\necho '{credential}'\n", marker.display()))?;
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;

    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("spread").serve_members("all"), "v01");
    let config = host_config("kubeconfig-data", dir.path(), hub.kubeconfig_path(), ns.name())
        .arg(format!("--identity-namespace={}", ns.name()))
        .arg("--cluster-secrets")
        .arg("--unsafe-member-clusters-allow-insecure");
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;

    let secrets: Api<Secret> = ns.api();
    let exec =
        serde_json::json!({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": program.display().to_string(), "interactiveMode": "Never"}});
    for secret in [
        cluster_secret("token-file", &stolen.server(), serde_json::json!({"tokenFile": token.display().to_string()}))?,
        cluster_secret("exec", &executed.server(), exec)?,
        cluster_secret("inline", &control.server(), serde_json::json!({"token": "inline-token"}))?,
    ] {
        secrets.create(&PostParams::default(), &secret).await?;
    }
    eventually("the inline Secret's member to be contacted", CONVERGE, || async {
        ensure!(control.authorizations().iter().any(|a| a.ends_with("Bearer inline-token")), "not yet: {:?}", control.authorizations());
        Ok(())
    })
    .await?;

    let client = hub.client().await?;
    let refused = async {
        wait_event(&client, ns.name(), "token-file", "ClusterRefused", "users[0].user.tokenFile").await?;
        wait_event(&client, ns.name(), "exec", "ClusterRefused", "users[0].user.exec").await
    };
    if let Err(e) = refused.await {
        // What the attacker got instead, for the failure message.
        return Err(anyhow!(
            "{e}\nthe tokenFile Secret's server saw {:?}; the exec Secret's saw {:?}; the program ran: {}\n{}",
            stolen.authorizations(),
            executed.authorizations(),
            marker.exists(),
            host.log_tail(40)
        ));
    }
    let log = host.log_text();
    for (secret, field) in [("token-file", "users[0].user.tokenFile"), ("exec", "users[0].user.exec")] {
        let from = format!("Secret {}/{secret}", ns.name());
        ensure!(log.lines().any(|l| l.contains(&from) && l.contains(field)), "no log line names {from} and {field}");
    }
    for reason in ["file", "program"] {
        let refusals = host.metric("kubewasm_member_refusals_total", &[("reason", reason)]).await?;
        ensure!(refusals >= 1.0, "no refusal counted for reason {reason}");
    }
    ensure!(stolen.authorizations().is_empty(), "the tokenFile Secret's server got {:?}", stolen.authorizations());
    ensure!(executed.authorizations().is_empty(), "the exec Secret's server got {:?}", executed.authorizations());
    ensure!(!marker.exists(), "the exec Secret's program ran on the host");
    host.stop().await?;
    Ok(())
}

/// Member API servers that play the attacker (H1, M3): one answers every list with a body that
/// never ends, one with 64 MiB, one sends a watch that never makes a line, one answers every
/// access review 503 with a 2 MiB HTML page. The host's memory stays within +200 MiB of its
/// baseline; each hostile member is reported in the status, unreachable or refused, the reason
/// named and the entry cut to a few KiB (a 2 MiB one would push the status ConfigMap past what
/// the API server stores); a healthy member and the hub are reconciled all along.
#[tokio::test]
async fn hostile_members_neither_exhaust_the_host_nor_hold_up_the_others() -> Result<()> {
    use kubewasm_tests::hostile_member::{Behaviour, HostileMember};
    const RSS_GROWTH_MIB: f64 = 200.0;
    const ENTRY_BYTES: usize = 4096;

    let hub = ControlPlane::shared().await;
    let ns = hub.namespace("hostile-members").await?;
    let healthy = MemberCluster::start("healthy", ns.name()).await?;
    let mut hostile = Vec::new();
    for (name, behaviour, reason) in [
        ("endless", Behaviour::EndlessList, "--member-max-body"),
        ("huge", Behaviour::HugeList, "--member-max-body"),
        ("no-newline", Behaviour::EndlessWatchLine, "--member-max-watch-line"),
        // Refused by admission: the 503 page cut, or the deadline when kube's retries of a 503
        // outlast it; either way named.
        ("error-page", Behaviour::ErrorPage, "admission in cluster \"error-page\""),
    ] {
        hostile.push((name, reason, HostileMember::start(behaviour).await.map_err(|e| anyhow!("{name}: {e}"))?));
    }
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("spread").serve_members("all"), "v01");
    let grants = rbac(&rbac_args(dir.path(), ns.name())).await?;
    apply(hub, &grants).await?;
    apply(&healthy.cp, &grants).await?;
    create_primaries(&healthy.cms, &inputs(&[("a", "1")])).await?;
    let hub_cms: Api<ConfigMap> = ns.api();
    create_primaries(&hub_cms, &inputs(&[("h", "1")])).await?;
    let clusters = tempfile::tempdir()?;
    healthy.engage(clusters.path(), &[])?;
    let config = host_config("hostile-members", dir.path(), hub.kubeconfig_path(), ns.name())
        .service_accounts(ns.name())
        .arg(format!("--clusters={}", clusters.path().display()));
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    wait_outputs(&hub_cms, "spread", &inputs(&[("h", "1")]), Want::default()).await?;
    wait_outputs(&healthy.cms, "spread", &inputs(&[("a", "1")]), Want::default()).await?;
    let pid = host.pid().ok_or_else(|| anyhow!("the host has no pid"))?;
    let mib = |bytes: Option<u64>| bytes.map(|b| b as f64 / (1 << 20) as f64).ok_or_else(|| anyhow!("the host is gone:\n{}", host.log_tail(40)));
    let baseline = mib(kubewasm_tests::process::rss_bytes(pid))?;

    for (name, _, member) in &hostile {
        members::engage(clusters.path(), name, member.kubeconfig_path(), &[])?;
    }
    let status: Api<ConfigMap> = ns.api();
    // Admissions in every member are one round (M7: the round waits on its slowest member).
    let entries = eventually("every hostile member reported with its reason", Duration::from_secs(180), || async {
        let data = status.get(STATUS).await?.data.unwrap_or_default();
        let mut entries = Vec::new();
        for (name, reason, _) in &hostile {
            let entry = data.get(&format!("spread.cluster.{name}")).ok_or_else(|| anyhow!("no entry for {name} yet"))?;
            ensure!(entry.contains(reason) && (entry.contains("unreachable: ") || entry.contains("refused: ")), "{name} not yet reported: {entry:.300}");
            entries.push((*name, entry.clone()));
        }
        Ok(entries)
    })
    .await
    .map_err(|e| {
        let asked: Vec<String> = hostile.iter().map(|(name, _, m)| format!("{name}: {:?}", m.requests().iter().take(20).collect::<Vec<_>>())).collect();
        anyhow!("{e}\nwhat the host asked the hostile members:\n{}\n{}", asked.join("\n"), host.log_tail(40))
    })?;
    for (name, entry) in &entries {
        println!("{name}: {} bytes: {entry:.400}", entry.len());
        ensure!(entry.len() <= ENTRY_BYTES, "{name}'s status entry is {} bytes", entry.len());
    }
    for (cluster, reason) in [("endless", "body"), ("huge", "body"), ("no-newline", "watch-line")] {
        let refused = host.metric("kubewasm_member_answers_refused_total", &[("cluster", cluster), ("reason", reason)]).await?;
        ensure!(refused >= 1.0, "{cluster}'s refused answers ({reason}) are not counted");
    }

    // While they go on, the healthy member and the hub are served as before.
    set_input(&healthy.cms, "a", "2").await?;
    set_input(&hub_cms, "h", "2").await?;
    wait_outputs_within(&healthy.cms, "spread", &inputs(&[("a", "2")]), Want::default(), Duration::from_secs(20)).await?;
    wait_outputs_within(&hub_cms, "spread", &inputs(&[("h", "2")]), Want::default(), Duration::from_secs(20)).await?;

    let peak = mib(kubewasm_tests::process::peak_rss_bytes(pid))?;
    println!("host RSS {baseline:.0} MiB before the hostile members, {peak:.0} MiB at its peak");
    ensure!(peak - baseline < RSS_GROWTH_MIB, "the host's resident memory grew from {baseline:.0} to {peak:.0} MiB");
    let longest = host.log_text().lines().map(str::len).max().unwrap_or_default();
    ensure!(longest <= 16 << 10, "a log line of {longest} bytes");
    host.stop().await?;
    Ok(())
}
