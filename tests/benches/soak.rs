//! The soak run (issue 10), not part of `make test`: two leader-elected hosts against a local
//! control plane for ten minutes (`-- --minutes N`), with object churn, a plugin reload every
//! 20 s, a control-plane restart and two leader kills (each replaced by a new host). At the end
//! the cluster state must equal the expected state exactly — every primary's output shows the
//! number of changes the soak made to it (its last input) and the last plugin version — and each
//! host's resident memory after warm-up is reported (flat: its last sample within 25 % of its
//! first after a minute of life).
//!
//! `cargo bench -p kubewasm-tests --bench soak [-- --minutes 10]`

#[path = "../e2e/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kubewasm_tests::plugindir::{E2eSettings, PluginDir, e2e_guest, variant_of};
use kubewasm_tests::{ControlPlane, Host};
use support::*;

const KEYS: usize = 40;
const RELOAD_EVERY: Duration = Duration::from_secs(20);
/// Changes per second the churn makes (round robin over the keys).
const CHURN_RATE: f64 = 20.0;

fn rss_mib(pid: u32) -> Option<f64> {
    Some(kubewasm_tests::process::rss_bytes(pid)? as f64 / (1 << 20) as f64)
}

/// One host of the soak: its plugin directory and its memory samples (seconds of life, MiB).
struct Member {
    host: Host,
    _dir: PluginDir,
    dir_path: std::path::PathBuf,
    started: Instant,
    rss: Vec<(f64, f64)>,
}

async fn start_member(cp: &ControlPlane, ns: &str, name: &str, wasm: &[u8]) -> Member {
    let dir = PluginDir::new();
    dir.install("soak", wasm, Some(&E2eSettings::new("soak").host(name).max_concurrency(4).to_toml()));
    let host = Host::start(host_config(name, dir.path(), cp.kubeconfig_path(), ns).leader_elect(ns, "soak").log_filter("warn")).await.expect("the host starts");
    Member { host, dir_path: dir.path().to_path_buf(), _dir: dir, started: Instant::now(), rss: Vec::new() }
}

async fn leader(members: &[Member]) -> Option<usize> {
    for (i, m) in members.iter().enumerate() {
        if m.host.metric("leader_election_master_status", &[("name", "soak")]).await.ok() == Some(1.0) {
            return Some(i);
        }
    }
    None
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let minutes: f64 = args.iter().position(|a| a == "--minutes").and_then(|i| args.get(i + 1)).and_then(|m| m.parse().ok()).unwrap_or(10.0);
    let total = Duration::from_secs_f64(minutes * 60.0);
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(soak(total));
}

async fn soak(total: Duration) {
    let mut cp = ControlPlane::start().await.expect("the control plane starts");
    let ns = cp.namespace("soak").await.unwrap();
    let cms: Api<ConfigMap> = ns.api();
    let names: Vec<String> = (0..KEYS).map(|i| format!("s{i:02}")).collect();
    let mut counts: BTreeMap<String, u64> = names.iter().map(|n| (n.clone(), 0)).collect();
    let as_inputs = |counts: &BTreeMap<String, u64>| -> BTreeMap<String, String> { counts.iter().map(|(k, v)| (k.clone(), v.to_string())).collect() };
    create_primaries(&cms, &as_inputs(&counts)).await.unwrap();

    let guest = std::fs::read(e2e_guest()).unwrap();
    let mut version = 1u32;
    let wasm = |version: u32| variant_of(&guest, &format!("v{version:02}"));
    let mut members = vec![start_member(&cp, ns.name(), "h1", &wasm(version)).await];
    members[0].host.wait_metric("leader_election_master_status", &[("name", "soak")], CONVERGE, |v| v == 1.0).await.unwrap();
    members.push(start_member(&cp, ns.name(), "h2", &wasm(version)).await);

    let started = Instant::now();
    let (kill_at, restart_at) = ([total.mul_f64(0.25), total.mul_f64(0.65)], total.mul_f64(0.45));
    let (mut kills, mut restarted, mut next_reload, mut next_sample) = (0usize, false, RELOAD_EVERY, Duration::ZERO);
    let (mut writes, mut failed_writes) = (0u64, 0u64);
    let mut key = 0usize;
    let pace = Duration::from_secs_f64(1.0 / CHURN_RATE);
    while started.elapsed() < total {
        let now = started.elapsed();
        // Churn: the next key's input becomes its change count; a refused write is retried with
        // the same count, so the count is exactly the changes that landed.
        let name = &names[key % KEYS];
        let next = counts[name] + 1;
        match set_input(&cms, name, &next.to_string()).await {
            Ok(_) => {
                counts.insert(name.clone(), next);
                writes += 1;
                key += 1;
            }
            Err(_) => failed_writes += 1,
        }
        if now >= next_reload {
            version += 1;
            for m in &members {
                let tmp = m.dir_path.join(".soak.wasm.tmp");
                std::fs::write(&tmp, wasm(version)).unwrap();
                std::fs::rename(&tmp, m.dir_path.join("soak.wasm")).unwrap();
            }
            next_reload += RELOAD_EVERY;
        }
        if kills < kill_at.len()
            && now >= kill_at[kills]
            && let Some(i) = leader(&members).await
        {
            let mut dead = members.remove(i);
            println!("[{:>5.0}s] killing the leader {}", now.as_secs_f64(), dead.host.name());
            dead.host.kill();
            let name = format!("h{}", 3 + kills);
            members.push(start_member(&cp, ns.name(), &name, &wasm(version)).await);
            kills += 1;
        }
        if !restarted && now >= restart_at {
            println!("[{:>5.0}s] restarting the control plane", now.as_secs_f64());
            cp.restart().await.expect("the control plane restarts");
            restarted = true;
        }
        if now >= next_sample {
            for m in &mut members {
                if let Some(mib) = m.host.pid().and_then(rss_mib) {
                    m.rss.push((m.started.elapsed().as_secs_f64(), mib));
                }
            }
            next_sample += Duration::from_secs(10);
        }
        tokio::time::sleep(pace).await;
    }

    let churned = started.elapsed();
    let want = as_inputs(&counts);
    let last = format!("v{version:02}");
    let converged = wait_outputs_within(&cms, "soak", &want, Want { variant: Some(&last), ..Want::default() }, Duration::from_secs(180)).await;
    println!(
        "\nsoak: {:.1} min, {writes} changes over {KEYS} keys ({failed_writes} refused while the API server was down), {} reloads, {kills} leader kills, control plane restarted: {restarted}",
        churned.as_secs_f64() / 60.0,
        version - 1
    );
    match &converged {
        Ok(()) => println!(
            "final state: every key's output shows its last input ({}..{} changes per key) and version {last}: exact",
            counts.values().min().unwrap(),
            counts.values().max().unwrap()
        ),
        Err(e) => println!("final state: WRONG: {e}"),
    }
    let mut flat = true;
    println!("host RSS (MiB): first sample after 60 s of life -> last sample");
    for m in &members {
        let warm = m.rss.iter().find(|(t, _)| *t >= 60.0).map(|s| s.1);
        let end = m.rss.last().map(|s| s.1);
        if let (Some(warm), Some(end)) = (warm, end) {
            let ok = end <= warm * 1.25;
            flat &= ok;
            println!("  {:<3} {warm:>6.1} -> {end:>6.1}   {}", m.host.name(), if ok { "flat" } else { "GREW" });
        }
    }
    for m in members {
        let _ = m.host.stop().await;
    }
    assert!(converged.is_ok() && flat, "the soak failed (see above)");
}
