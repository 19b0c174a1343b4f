//! End-to-end tests of the controller runtime — leadership: a standby takes over when the leader
//! dies, and SIGTERM in a long reconcile loses nothing — every write recorded from the API server's
//! side. The real `kubewasm run` binary against the local control plane, with the Rust sample-
//! controller and the suite's `e2e-guest`; every test runs its own host processes on loopback
//! ports.
//!
//! `cargo test -p kubewasm-tests --test leadership`

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use kubewasm_tests::plugindir::OUTPUT_LABEL;
use kubewasm_tests::{ControlPlane, E2eSettings, Host, PluginDir};
use support::*;

/// One write of an output ConfigMap as the API server's watch reported it.
#[derive(Debug, Clone)]
struct Write {
    at: Instant,
    object: String,
    host: String,
}

impl std::fmt::Display for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} by {}", self.object, self.host)
    }
}

fn list(writes: &[Write]) -> String {
    writes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// Records every change to the outputs of plugin `plugin` in `ns`, in the API server's order.
fn record_writes(client: Client, ns: &str, plugin: &str) -> (Arc<Mutex<Vec<Write>>>, tokio::task::JoinHandle<()>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let api: Api<ConfigMap> = Api::namespaced(client, ns);
    let config = watcher::Config::default().labels(&format!("{OUTPUT_LABEL}={plugin}"));
    let sink = log.clone();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(api, config));
        let mut last_rv: BTreeMap<String, String> = BTreeMap::new();
        while let Some(event) = stream.next().await {
            let (watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = (match event {
                Ok(e) => e,
                Err(_) => continue,
            }) else {
                continue;
            };
            // A re-list repeats objects: keep each resourceVersion once.
            let rv = cm.resource_version().unwrap_or_default();
            if last_rv.insert(cm.name_any(), rv.clone()) == Some(rv) {
                continue;
            }
            let data = cm.data.clone().unwrap_or_default();
            sink.lock().unwrap().push(Write { at: Instant::now(), object: cm.name_any(), host: data.get("host").cloned().unwrap_or_default() });
        }
    });
    (log, task)
}

/// Two hosts elect a leader; only the leader reconciles. SIGKILL on the leader: the standby
/// takes over once the lease has expired (15 s) and not before, and the writes of the two never
/// interleave. Then SIGTERM on the new leader releases the lease, and a third host takes over at
/// once.
#[tokio::test]
async fn the_standby_takes_over_when_the_leader_dies() -> Result<()> {
    const LEASE: Duration = Duration::from_secs(15);
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("leader").await?;
    let cms: Api<ConfigMap> = ns.api();
    let lease = "e2e-leader";
    let host_dir = |host: &str| {
        let dir = PluginDir::new();
        dir.install_e2e(&E2eSettings::new("elected").host(host), "v01");
        dir
    };
    let elected = |name: &str, dir: &PluginDir| host_config(name, dir.path(), cp.kubeconfig_path(), ns.name()).leader_elect(ns.name(), lease);
    let status = [("name", lease)];
    let (writes, recorder) = record_writes(ns.client().clone(), ns.name(), "elected");

    let names = ["e0", "e1", "e2"];
    let mut want = inputs(&names, "1");
    create_primaries(&cms, &want).await?;

    let (dir1, dir2) = (host_dir("h1"), host_dir("h2"));
    let mut h1 = Host::start(elected("h1", &dir1)).await?;
    h1.wait_ready(READY).await?;
    h1.wait_metric("leader_election_master_status", &status, CONVERGE, |v| v == 1.0).await?;
    let mut h2 = Host::start(elected("h2", &dir2)).await?;
    h2.wait_ready(READY).await.context("a standby is ready too")?;
    wait_outputs(&cms, "elected", &want, Want { host: Some("h1"), ..Want::default() }).await?;

    // Both run; changes keep coming; only the leader reconciles.
    for round in 2..=4 {
        for name in names {
            set_input(&cms, name, &round.to_string()).await?;
            want.insert(name.into(), round.to_string());
        }
        wait_outputs(&cms, "elected", &want, Want { host: Some("h1"), ..Want::default() }).await?;
    }
    ensure!(h2.metric("leader_election_master_status", &status).await? == 0.0, "h2 must be a standby");
    let standby_reconciles = h2.metric("controller_runtime_reconcile_total", &[("controller", "elected")]).await?;
    ensure!(standby_reconciles == 0.0, "the standby reconciled {standby_reconciles} times");

    // The leader dies without releasing its lease.
    h1.kill();
    let killed = Instant::now();
    h1.wait_exit(Duration::from_secs(10)).await?;
    for name in names {
        set_input(&cms, name, "after-kill").await?;
        want.insert(name.into(), "after-kill".into());
    }
    wait_outputs(&cms, "elected", &want, Want { host: Some("h2"), ..Want::default() }).await?;
    ensure!(h2.metric("leader_election_master_status", &status).await? == 1.0, "h2 must lead now");

    {
        let writes = writes.lock().unwrap();
        let first_h2 = writes.iter().position(|w| w.host == "h2").context("h2 never wrote")?;
        let took = writes[first_h2].at.duration_since(killed);
        // The standby must wait a whole lease duration after the last renewal it saw (at most a
        // retry period, 2 s, before the kill), and should not need much more.
        ensure!(took >= LEASE - Duration::from_secs(3), "the standby wrote {took:?} after the leader died: before its lease could have expired");
        ensure!(took <= LEASE + Duration::from_secs(8), "the standby took {took:?} to take over (lease {LEASE:?})");
        ensure!(writes[first_h2..].iter().all(|w| w.host == "h2"), "the old leader wrote after the new one: {}", list(&writes[first_h2..]));
        ensure!(writes[..first_h2].iter().all(|w| w.host == "h1"), "writes before the takeover: {}", list(&writes[..first_h2]));
        eprintln!("takeover {took:?} after SIGKILL; {} writes recorded", writes.len());
    }

    // A graceful stop releases the lease: a new standby takes over without waiting for expiry.
    let dir3 = host_dir("h3");
    let mut h3 = Host::start(elected("h3", &dir3)).await?;
    h3.wait_ready(READY).await?;
    let stopping = Instant::now();
    h2.stop().await?;
    h3.wait_metric("leader_election_master_status", &status, LEASE, |v| v == 1.0).await?;
    let took = stopping.elapsed();
    ensure!(took < LEASE - Duration::from_secs(5), "after a released lease the takeover took {took:?}");
    for name in names {
        set_input(&cms, name, "after-release").await?;
        want.insert(name.into(), "after-release".into());
    }
    wait_outputs(&cms, "elected", &want, Want { host: Some("h3"), ..Want::default() }).await?;
    recorder.abort();
    h3.stop().await?;
    drop(h1);
    Ok(())
}

/// SIGTERM while a reconcile runs: the host lets it finish, exits cleanly within its grace
/// period, and a new host picks up what changed meanwhile.
#[tokio::test]
async fn sigterm_during_a_long_reconcile_loses_nothing() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("sigterm").await?;
    let cms: Api<ConfigMap> = ns.api();
    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("slowpoke"), "v01");
    let config = host_config("slowpoke", dir.path(), cp.kubeconfig_path(), ns.name()).grace_period(Duration::from_secs(20));
    let mut host = Host::start(config.clone()).await?;
    host.wait_ready(READY).await?;
    let mut want = inputs(&["a", "b", "c"], "1");
    create_primaries(&cms, &want).await?;
    wait_outputs(&cms, "slowpoke", &want, Want::default()).await?;

    // A reconcile that takes 3 s (the plugin's deadline is 5 s).
    annotate(&cms, "a", &[(SLEEP_MS, Some("3000")), (INPUT, Some("2"))]).await?;
    want.insert("a".into(), "2".into());
    host.wait_metric("controller_runtime_active_workers", &[("controller", "slowpoke")], CONVERGE, |v| v == 1.0).await?;
    host.terminate();
    let signalled = Instant::now();
    // Changes while the host stops: whoever runs next must see them.
    set_input(&cms, "b", "2").await?;
    want.insert("b".into(), "2".into());
    cms.create(&PostParams::default(), &primary("d", "1")).await?;
    want.insert("d".into(), "1".into());

    let status = host.wait_exit(Duration::from_secs(30)).await?;
    let took = signalled.elapsed();
    let log = host.log_text();
    ensure!(status.success(), "the host exited with {status} after SIGTERM\n{}", host.log_tail(40));
    ensure!(!log.contains("stopping now"), "the host did not stop gracefully:\n{}", host.log_tail(40));
    ensure!(log.contains("woke up"), "the long reconcile did not finish:\n{}", host.log_tail(40));
    let a = output(&cms, "a", "slowpoke").await?;
    ensure!(a.as_ref().and_then(|d| d.get("input")).map(String::as_str) == Some("2"), "the running reconcile must finish before exit; output {a:?}");
    eprintln!("graceful stop took {took:?}");
    drop(host);

    let mut next = Host::start(config).await?;
    next.wait_ready(READY).await?;
    wait_outputs(&cms, "slowpoke", &want, Want::default()).await?;
    next.stop().await?;
    Ok(())
}
