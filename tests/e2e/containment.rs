//! Containment (issue 10) against the real API server: hostile plugins beside a well-behaved one
//! that must not notice them, and a leader cut off from the API server (a black-holing proxy, or
//! a frozen process) that must stop writing before a standby starts.
//!
//! `cargo test -p kubewasm-tests --test containment`
//!
//! The attacker is `tests/guests/hostile`; who wrote what, and when the API server received it,
//! comes from the API server's audit log.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use kubewasm_tests::proxy::{FaultProxy, Mode};
use kubewasm_tests::{ControlPlane, E2eSettings, Host, PluginDir, audit, eventually, guests, prom};
use support::*;

const READY: Duration = Duration::from_secs(60);

fn inputs(names: &[String], input: &str) -> BTreeMap<String, String> {
    names.iter().map(|n| (n.clone(), input.to_string())).collect()
}

/// The host's resident memory, from `/proc/PID/status`.
fn rss_mib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")?;
    Ok(kib / 1024.0)
}

/// A ConfigMap of `bytes` bytes of data that no plugin selects (bulk for the cache).
fn bulk(name: &str, bytes: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        data: Some([("bulk".to_string(), "x".repeat(bytes))].into()),
        ..Default::default()
    }
}

/// A ConfigMap the hostile plugin `plugin` selects.
fn target(plugin: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("target-{plugin}")),
            labels: Some([(format!("hostile.kubewasm.io/{plugin}"), "yes".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Every attack of the hostile guest at once, each by its own plugin, beside a well-behaved
/// plugin: the host stays up and bounded in memory, each attack hits its own limit (seen in the
/// metrics), and the well-behaved plugin reconciles everything, promptly, with every Event.
#[tokio::test]
async fn a_well_behaved_plugin_is_unharmed_by_hostile_neighbours() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("hostile").await?;
    let cms: Api<ConfigMap> = ns.api();
    // 8 MiB of ConfigMaps: twice what the lister (16 MiB of memory) may be answered at once.
    for i in 0..64 {
        cms.create(&PostParams::default(), &bulk(&format!("bulk-{i}"), 128 << 10)).await?;
    }

    let dir = PluginDir::new();
    dir.install_e2e(&E2eSettings::new("good").events(), "v01");
    let hostile = std::fs::read(guests::guest("hostile-guest", "hostile_guest"))?;
    let attacks = [
        ("lister", "list-everything", "[kubewasm]\nmemory-mib = 16\n"),
        ("spammer", "event-spam", ""),
        ("logger", "log-flood", ""),
        ("mapper", "map-flood", ""),
        ("requeuer", "requeue-zero", ""),
        ("hanger", "hang", "[kubewasm]\ndeadline-ms = 2000\n"),
        ("hog", "memory", ""),
    ];
    for (name, attack, options) in attacks {
        let settings = format!("name = {name:?}\nattack = {attack:?}\nselector = \"hostile.kubewasm.io/{name}\"\n{options}");
        dir.install(name, &hostile, Some(&settings));
    }

    let started = Instant::now();
    let mut host = Host::start(host_config("hostile", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let pid = host.pid().context("host pid")?;
    for (name, _, _) in attacks {
        cms.create(&PostParams::default(), &target(name)).await?;
    }

    // Each attack reaches its limit.
    let plugin = |name: &'static str| [("plugin", name)];
    host.wait_metric("kubewasm_plugin_oversized_lists_total", &plugin("lister"), CONVERGE, |v| v > 0.0).await.context("the lister's lists refused")?;
    host.wait_metric("kubewasm_plugin_events_dropped_total", &plugin("spammer"), CONVERGE, |v| v > 0.0).await.context("the spammer's Events dropped")?;
    host.wait_metric("kubewasm_plugin_log_records_dropped_total", &plugin("logger"), CONVERGE, |v| v > 0.0).await.context("the logger's records dropped")?;
    host.wait_metric("kubewasm_plugin_faults_total", &[("plugin", "hanger"), ("kind", "deadline")], CONVERGE, |v| v > 0.0).await.context("the hanger stopped at its deadline")?;
    let log = host.log_text();
    let hog = log.lines().find(|l| l.contains("hog") && l.contains("--plugin-memory-budget"));
    ensure!(hog.is_some(), "the hog was not refused for the memory budget:\n{}", host.log_tail(40));

    // Under attack, the well-behaved plugin does its work, promptly, with all its Events.
    let names: Vec<String> = (0..30).map(|i| format!("good-{i}")).collect();
    let first = Instant::now();
    create_primaries(&cms, &inputs(&names, "1")).await?;
    wait_outputs_within(&cms, "good", &inputs(&names, "1"), Want::default(), Duration::from_secs(30)).await?;
    let created_in = first.elapsed();
    let second = Instant::now();
    for name in &names {
        set_input(&cms, name, "2").await?;
    }
    wait_outputs_within(&cms, "good", &inputs(&names, "2"), Want::default(), Duration::from_secs(30)).await?;
    let updated_in = second.elapsed();
    eventually("an Event per reconcile of the good plugin", CONVERGE, || async {
        let all = events(ns.client(), ns.name()).await?;
        let missing: Vec<String> = names
            .iter()
            .flat_map(|n| ["1", "2"].map(|input| (n, input)))
            .filter(|(n, input)| {
                !all.iter().any(|e| {
                    e.reason.as_deref() == Some("Reconciled")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(n.as_str())
                        && e.note.as_deref().is_some_and(|note| note.contains(input))
                })
            })
            .map(|(n, input)| format!("{n}@{input}"))
            .collect();
        if missing.is_empty() { Ok(()) } else { Err(anyhow!("missing: {missing:?}")) }
    })
    .await?;

    let metrics = host.metrics().await?;
    let count = |name: &str, plugin: &str| prom::sum(&metrics, name, &[("plugin", plugin)]);
    ensure!(count("kubewasm_plugin_events_dropped_total", "good") == 0.0, "the good plugin lost Events");
    ensure!(count("kubewasm_plugin_log_records_dropped_total", "good") == 0.0, "the good plugin lost log records");
    let good_errors = prom::sum(&metrics, "controller_runtime_reconcile_errors_total", &[("controller", "good")]);
    ensure!(good_errors == 0.0, "the good plugin had {good_errors} reconcile errors");

    // The attackers got no more than their budgets.
    let elapsed = started.elapsed().as_secs_f64();
    let requeues = prom::sum(&metrics, "controller_runtime_reconcile_total", &[("controller", "requeuer")]);
    ensure!(requeues < 200.0, "requeue-after 0 ran {requeues} reconciles in {elapsed:.0}s: not rate limited");
    let mapped = prom::sum(&metrics, "workqueue_adds_total", &[("name", "mapper-map-related")]);
    ensure!(mapped > 0.0, "the mapper's map-related was never called: nothing was tried");
    let mapped_queue = prom::sum(&metrics, "workqueue_depth", &[("name", "mapper")]);
    ensure!(mapped_queue <= 2.0, "the mapper's invented keys were queued: depth {mapped_queue}");
    let spam = events(ns.client(), ns.name()).await?.iter().filter(|e| e.reason.as_deref().is_some_and(|r| r.starts_with("Spam"))).count() as f64;
    // The plugin's write budget (qps 20, burst 30) bounds what reaches the API server.
    ensure!(spam <= 30.0 + 20.0 * elapsed, "{spam} spam Events in {elapsed:.0}s");
    let log = host.log_text();
    let flood = log.lines().filter(|l| l.contains("plugin=logger")).count() as f64;
    // The log budget: a burst of 1000, then 100 records a second.
    ensure!(flood <= 1000.0 + 100.0 * elapsed + 50.0, "{flood} log lines of the logger in {elapsed:.0}s");
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    ensure!(longest < 64 << 10, "a log line of {longest} bytes");
    let rss = rss_mib(pid)?;
    ensure!(rss < 768.0, "the host's resident memory grew to {rss:.0} MiB");
    ensure!(host.try_status().is_none(), "the host exited");
    eprintln!(
        "good plugin under attack: 30 creates in {created_in:?}, 30 updates in {updated_in:?}; host RSS {rss:.0} MiB; \
         {requeues} requeue-zero reconciles, {spam} spam Events, {flood} flood log lines in {elapsed:.0}s"
    );
    host.stop().await?;
    Ok(())
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
    let elected = |name: &str, dir: &PluginDir, kubeconfig: &std::path::Path| host_config(name, dir.path(), kubeconfig, ns.name()).leader_elect(ns.name(), lease);

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
    let churn = {
        let (cms, names) = (cms.clone(), names.clone());
        tokio::spawn(async move {
            for round in 1.. {
                for name in &names {
                    let _ = set_input(&cms, name, &round.to_string()).await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;

    let cut_at = Instant::now();
    match cut {
        Cut::Partition => proxy.set(Mode::BlackHole),
        Cut::Freeze => h1.signal(libc::SIGSTOP),
    }
    h2.wait_metric("leader_election_master_status", &status, Duration::from_secs(45), |v| v == 1.0).await.context("the standby takes over")?;
    let takeover = cut_at.elapsed();
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
