//! `controlplane-bench`: the control-plane numbers recorded in BENCHMARKS.md.
//!
//! ```text
//! cargo run -p kubewasm-tests --release --bin controlplane-bench -- [--runs N] [--idle-secs S] [--cold-build]
//! ```
//!
//! For each run: a start on a fresh data directory and a restart on the same one, each timed from
//! spawning the binary to its `ready` line; the stop in between (SIGTERM to exit); and the resident
//! memory (VmRSS) after the control plane has idled `--idle-secs`; then the latency of 200
//! sequential ConfigMap creations. `--cold-build` additionally
//! times a `go build` with an empty Go build cache (the module cache is used as it is) into a
//! throw-away directory; this takes ~10 minutes on two cores.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kubewasm_tests::build::{self, BuildSettings, Provenance};
use kubewasm_tests::{ControlPlane, Options};

struct Args {
    runs: usize,
    idle: Duration,
    cold_build: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { runs: 3, idle: Duration::from_secs(20), cold_build: false };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--runs" => args.runs = value("--runs")?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--idle-secs" => args.idle = Duration::from_secs(value("--idle-secs")?.parse().map_err(|e| format!("--idle-secs: {e}"))?),
            "--cold-build" => args.cold_build = true,
            other => {
                return Err(format!("unknown argument {other:?}; usage: [--runs N] [--idle-secs S] [--cold-build]"));
            }
        }
    }
    Ok(args)
}

/// User + system CPU seconds of all waited-for children so far.
fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// (VmRSS, VmHWM) in MiB.
fn memory_mib(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status.lines().find_map(|l| l.strip_prefix(name)).and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok()).map(|kib| kib / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Creates `n` ConfigMaps one after the other; returns (median, p99) latency in ms.
async fn write_latency(cp: &ControlPlane, n: usize) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let cms: Api<ConfigMap> = Api::namespaced(cp.client().await?, "default");
    let mut ms = Vec::with_capacity(n);
    for i in 0..n {
        let cm = ConfigMap {
            metadata: ObjectMeta { name: Some(format!("bench-{i}")), ..Default::default() },
            data: Some([("i".to_owned(), i.to_string())].into()),
            ..Default::default()
        };
        let t = Instant::now();
        cms.create(&PostParams::default(), &cm).await?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Ok((ms[n / 2], ms[(n * 99 / 100).min(n - 1)]))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let go = std::process::Command::new("go").arg("version").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    println!("machine: {cores} cores; {}", go.as_deref().unwrap_or("go: not found"));

    if args.cold_build {
        let cache = tempfile::tempdir()?;
        let gocache = tempfile::tempdir()?;
        println!("cold build: GOCACHE={} (empty), module cache as is ...", gocache.path().display());
        let settings = BuildSettings {
            cache_root: Some(cache.path().to_owned()),
            env: vec![("GOCACHE".into(), gocache.path().display().to_string())],
            ignore_prebuilt: true,
        };
        let started = Instant::now();
        let cpu_before = children_cpu_seconds();
        let built = build::build_with(&settings)?;
        let cpu = children_cpu_seconds() - cpu_before;
        let size = std::fs::metadata(&built.path)?.len() as f64 / (1024.0 * 1024.0);
        println!("cold build: {:.0} s wall, {cpu:.0} s CPU (user+sys of go and its compilers), binary {size:.0} MiB", started.elapsed().as_secs_f64());
    }

    let started = Instant::now();
    let binary = build::ensure_binary()?;
    match binary.provenance {
        Provenance::Built(t) => println!("binary: built now in {:.0} s: {}", t.as_secs_f64(), binary.path.display()),
        Provenance::Cached => println!("binary: cached ({:.2} s to find): {}", started.elapsed().as_secs_f64(), binary.path.display()),
        Provenance::Prebuilt => println!("binary: prebuilt: {}", binary.path.display()),
    }

    println!();
    println!(
        "| run | fresh start → ready | stop (SIGTERM → exit) | restart → ready | RSS idle {} s | peak RSS | create ConfigMap p50 / p99 |",
        args.idle.as_secs()
    );
    println!("|---|---|---|---|---|---|---|");
    let (mut fresh, mut restart, mut stop, mut rss, mut write) = (vec![], vec![], vec![], vec![], vec![]);
    for run in 1..=args.runs {
        let t = Instant::now();
        let mut cp = ControlPlane::start_binary(binary.path.clone(), Options::default()).await?;
        let fresh_s = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let status = cp.stop().await?;
        let stop_s = t.elapsed().as_secs_f64();
        if !status.success() {
            return Err(format!("control plane stopped uncleanly: {status}\n{}", cp.logs()).into());
        }

        let t = Instant::now();
        cp.restart().await?;
        let restart_s = t.elapsed().as_secs_f64();

        tokio::time::sleep(args.idle).await;
        let pid = cp.pid().ok_or("not running")?;
        let (rss_mib, hwm_mib) = memory_mib(pid).ok_or("cannot read /proc/PID/status")?;
        let (p50, p99) = write_latency(&cp, 200).await?;
        println!("| {run} | {fresh_s:.2} s | {stop_s:.2} s | {restart_s:.2} s | {rss_mib:.0} MiB | {hwm_mib:.0} MiB | {p50:.1} / {p99:.1} ms |");
        write.push(p50);
        fresh.push(fresh_s);
        restart.push(restart_s);
        stop.push(stop_s);
        rss.push(rss_mib);
        cp.stop().await?;
    }
    println!();
    println!(
        "median: fresh start {:.2} s, restart {:.2} s, stop {:.2} s, idle RSS {:.0} MiB, create p50 {:.1} ms",
        median(fresh),
        median(restart),
        median(stop),
        median(rss),
        median(write)
    );
    Ok(())
}
