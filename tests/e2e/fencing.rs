//! Fenced leadership (issue 10) against the real API server: a leader cut off from the API
//! server — by a fault-injection proxy that black-holes its traffic, or by freezing the process —
//! writes nothing once a standby has taken over, and goes back to standing by.
//!
//! `cargo test -p kubewasm-tests --test fencing`
//!
//! Who wrote what, and when the API server received it, comes from the API server's audit log.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kubewasm_tests::proxy::{FaultProxy, Mode};
use kubewasm_tests::{ControlPlane, E2eSettings, Host, PluginDir, audit};
use support::*;

const READY: Duration = Duration::from_secs(60);

fn inputs(names: &[String], input: &str) -> BTreeMap<String, String> {
    names.iter().map(|n| (n.clone(), input.to_string())).collect()
}

/// How a leader is cut off.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// A proxy between it and the API server black-holes its traffic, then resets its
    /// connections before the network heals.
    Partition,
    /// SIGSTOP, then SIGCONT once the standby leads.
    Freeze,
}

/// Two elected hosts; the leader (reaching the API server through a fault proxy) is cut off while
/// its reconciles are in flight and inputs keep changing. The standby takes over, and the API
/// server accepts no write from the old leader after the standby's takeover — the audit log
/// proves it, by receive time. The old leader goes back to standing by and converges with the
/// new one.
async fn leader_is_fenced(cut: Cut) -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("fenced").await?;
    let cms: Api<ConfigMap> = ns.api();
    let lease = "fenced";
    let status = [("name", lease)];

    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], cp.port()))).await?;
    let through_proxy = tempfile::NamedTempFile::new()?;
    proxy.kubeconfig(cp.kubeconfig_path(), cp.port(), through_proxy.path())?;
    let host_dir = |host: &str| {
        let dir = PluginDir::new();
        dir.install_e2e(&E2eSettings::new("fenced").host(host).events().max_concurrency(4), "v01");
        dir
    };
    let (dir1, dir2) = (host_dir("h1"), host_dir("h2"));
    let elected =
        |name: &str, dir: &PluginDir, kubeconfig: &std::path::Path| host_config(name, dir.path(), kubeconfig, ns.name()).leader_elect(ns.name(), lease);

    // Slow reconciles, so that some are in flight when the leader is cut off.
    let names: Vec<String> = (0..6).map(|i| format!("f{i}")).collect();
    create_primaries(&cms, &inputs(&names, "0")).await?;
    for name in &names {
        annotate(&cms, name, &[(SLEEP_MS, Some("700"))]).await?;
    }
    let mut h1 = Host::start(elected("h1", &dir1, through_proxy.path())).await?;
    h1.wait_ready(READY).await?;
    h1.wait_metric("leader_election_master_status", &status, CONVERGE, |v| v == 1.0).await?;
    let mut h2 = Host::start(elected("h2", &dir2, cp.kubeconfig_path())).await?;
    h2.wait_ready(READY).await?;
    wait_outputs(&cms, "fenced", &inputs(&names, "0"), Want { host: Some("h1"), ..Want::default() }).await?;
    let (h1_agent, h2_agent) = (format!("({})", h1.instance()), format!("({})", h2.instance()));

    // Inputs keep changing, straight to the API server, for the whole test.
    let churn = churn(&cms, &names, Duration::from_millis(100));
    tokio::time::sleep(Duration::from_secs(2)).await;

    let cut_at = Instant::now();
    match cut {
        Cut::Partition => proxy.set(Mode::BlackHole),
        Cut::Freeze => h1.signal(libc::SIGSTOP),
    }
    h2.wait_metric("leader_election_master_status", &status, Duration::from_secs(45), |v| v == 1.0).await.context("the standby takes over")?;
    let takeover = cut_at.elapsed();
    // client-go's bound: the lease duration (15 s) plus the renew deadline (10 s), plus a retry.
    ensure!(takeover <= Duration::from_secs(15 + 10 + 2), "the standby took {takeover:?} to take over");
    tokio::time::sleep(Duration::from_secs(3)).await;
    match cut {
        Cut::Partition => {
            // Whatever the old leader sent into the black hole is dropped, then the network heals.
            proxy.set(Mode::Reset);
            tokio::time::sleep(Duration::from_secs(1)).await;
            proxy.set(Mode::Pass);
        }
        Cut::Freeze => h1.signal(libc::SIGCONT),
    }
    // Back on the network, the old leader stands by while inputs keep changing.
    tokio::time::sleep(Duration::from_secs(8)).await;
    churn.abort();
    let _ = churn.await;
    for name in &names {
        set_input(&cms, name, "final").await?;
    }
    wait_outputs(&cms, "fenced", &inputs(&names, "final"), Want { host: Some("h2"), ..Want::default() }).await?;
    ensure!(h1.try_status().is_none(), "the old leader exited (it should stand by):\n{}", h1.log_tail(30));
    h1.wait_metric("leader_election_master_status", &status, CONVERGE, |v| v == 0.0).await.context("the old leader stands by")?;
    ensure!(h1.log_text().contains("lost leadership"), "the old leader never noticed:\n{}", h1.log_tail(30));

    let by = |agent: &str, e: &audit::AuditEvent| e.user_agent.ends_with(agent) && e.namespace() == Some(ns.name()) && e.accepted();
    let all = audit::read(cp.data_dir());
    let acquired: Timestamp = all
        .iter()
        .filter(|e| by(&h2_agent, e) && e.resource() == "leases")
        .map(|e| e.request_received_timestamp)
        .min()
        .context("no Lease write by the standby in the audit log")?;
    // The old leader's writes for its plugin: outputs and Events (not the status ConfigMap).
    let plugin_writes: Vec<&audit::AuditEvent> = all
        .iter()
        .filter(|e| by(&h1_agent, e) && matches!(e.resource(), "configmaps" | "events"))
        .filter(|e| e.object_ref.as_ref().and_then(|o| o.name.as_deref()).is_none_or(|n| n != STATUS && !n.starts_with(&format!("{STATUS}."))))
        .collect();
    ensure!(plugin_writes.iter().any(|e| e.resource() == "configmaps"), "the old leader never wrote an output: nothing to prove");
    let late: Vec<String> = plugin_writes
        .iter()
        .filter(|e| e.request_received_timestamp >= acquired)
        .map(|e| format!("{} {} {:?} at {}", e.verb, e.resource(), e.object_ref.as_ref().and_then(|o| o.name.clone()), e.request_received_timestamp))
        .collect();
    ensure!(late.is_empty(), "the old leader wrote after the standby took over at {acquired}: {late:?}");
    let last = plugin_writes.iter().map(|e| e.request_received_timestamp).max().context("no writes")?;
    eprintln!("{cut:?}: standby led {takeover:?} after the cut; the old leader's last write {:?} before the takeover", acquired.duration_since(last));
    h1.stop().await?;
    h2.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_partitioned_leader_stops_writing_before_the_standby_takes_over() -> Result<()> {
    leader_is_fenced(Cut::Partition).await
}

#[tokio::test]
async fn a_frozen_leader_writes_nothing_when_it_wakes_after_the_takeover() -> Result<()> {
    leader_is_fenced(Cut::Freeze).await
}
