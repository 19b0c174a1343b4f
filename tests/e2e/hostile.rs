//! Containment (issues 10 and 20) against the real API server: one test per attack of a hostile
//! plugin (`tests/guests/hostile`, or written by hand: `kubewasm_tests::components`), each beside
//! a well-behaved plugin (`tests/guests/e2e`, `good`) in the same host. Every test asserts the
//! same promise — the host stays up and under [`RSS_BOUND`], the well-behaved plugin reconciles 30
//! creates and 30 updates each within [`LATENCY_BOUND`] with no error and every Event delivered —
//! and that the attack met its limit (a metric, an Event or a bound on what reached the API server
//! or the log). Attacks on the WIT boundary also keep the host's peak resident memory within
//! [`BOUNDARY_RSS_GROWTH`] of what it was before.
//! Broken infrastructure plays the attacker too (audit M3): an admission webhook that hangs, and
//! a 503/429 storm during a hot reload (`kubewasm_tests::webhook`).
//!
//! `cargo test -p kubewasm-tests --test hostile`

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kubewasm_tests::plugindir::OUTPUT_LABEL;
use kubewasm_tests::webhook::{AdmissionWebhook, Answer};
use kubewasm_tests::widgets::{Shared, free_port, hooks_guest, wait_hook_called, wait_hooks_served, webhook_host, widget, widget_crd, widgets};
use kubewasm_tests::{ControlPlane, E2eSettings, Host, HostConfig, PluginDir, TestNamespace, apply_crd, components, eventually, guests, prom, unique_name};
use serde_json::json;
use support::*;

const READY: Duration = Duration::from_secs(60);
/// The host's resident memory may not pass this, whatever the attack.
const RSS_BOUND: f64 = 512.0;
/// The well-behaved plugin's 30 creates, and then its 30 updates, must each be done within this.
const LATENCY_BOUND: Duration = Duration::from_secs(20);
/// What an attack on the WIT boundary may add to the host's resident memory (issue 20).
const BOUNDARY_RSS_GROWTH: f64 = 200.0;
/// The label the attacker's primaries carry.
const TARGET: &str = "hostile.kubewasm.io/target";

/// A host running the hostile plugin `hostile` (with `attack` and extra `settings`) beside the
/// well-behaved `good`, in a namespace of its own.
struct Siege {
    ns: TestNamespace,
    cms: Api<ConfigMap>,
    host: Host,
    started: Instant,
    /// The host's resident memory once ready, before the attack (MiB).
    baseline: f64,
    dir: PluginDir,
}

/// How the host of a siege runs.
#[derive(Default)]
struct Setup<'a> {
    /// Each plugin as its own ServiceAccount (access reviews at admission), the good plugin's
    /// RBAC applied as `kubewasm rbac` prints it; else as the host.
    service_accounts: bool,
    /// More `kubewasm run` arguments.
    args: &'a [&'a str],
    /// Serve every namespace, not only the siege's own.
    everywhere: bool,
    /// With `service_accounts`, apply what `kubewasm rbac` prints for the hostile plugin too
    /// (which is then there from the start, before the host's memory is noted).
    hostile_rbac: bool,
}

impl Siege {
    async fn namespace(label: &str) -> Result<TestNamespace> {
        Ok(ControlPlane::shared().await.namespace(label).await?)
    }

    /// Starts the host in `ns` and gives the attacker its target object.
    async fn start(ns: TestNamespace, attack: &str, settings: &str) -> Result<Siege> {
        Siege::configured(ns, attack, settings, Setup::default()).await
    }

    /// [`Siege::start`] with the host run as `setup` says.
    async fn configured(ns: TestNamespace, attack: &str, settings: &str, setup: Setup<'_>) -> Result<Siege> {
        Siege::start_with(ns, attack, &hostile_guest()?, &hostile_settings("hostile", attack, settings), setup).await
    }

    /// Starts the host (as `setup` says) running the good plugin, notes its resident memory,
    /// then adds `hostile` as the plugin `hostile` with `toml` as its settings (so that what
    /// loading it costs counts in [`Siege::rss_stayed_bounded`]), and gives it its target object.
    async fn start_with(ns: TestNamespace, attack: &str, hostile: &[u8], toml: &str, setup: Setup<'_>) -> Result<Siege> {
        let cp = ControlPlane::shared().await;
        let dir = PluginDir::new();
        dir.install_e2e(&E2eSettings::new("good").events(), "v01");
        let mut config = match setup.everywhere {
            true => HostConfig::new(attack, dir.path(), cp.kubeconfig_path()).status_configmap(ns.name(), STATUS),
            false => host_config(attack, dir.path(), cp.kubeconfig_path(), ns.name()),
        };
        if setup.service_accounts {
            let mut args = rbac_args(dir.path(), ns.name());
            if setup.everywhere {
                args.retain(|a| !a.starts_with("--namespace="));
            }
            if setup.hostile_rbac {
                dir.install("hostile", hostile, Some(toml));
            } else {
                args.push("--controllers=good".into());
            }
            apply(cp, &rbac(&args).await?).await?;
            config = config.service_accounts(ns.name());
        }
        for arg in setup.args {
            config = config.arg(*arg);
        }
        let started = Instant::now();
        let mut host = Host::start(config).await?;
        host.wait_ready(READY).await?;
        let pid = host.pid().context("host pid")?;
        let baseline = rss_mib(pid)?;
        kubewasm_tests::process::reset_peak_rss(pid)?;
        if !setup.hostile_rbac {
            dir.install("hostile", hostile, Some(toml));
        }
        let cms: Api<ConfigMap> = ns.api();
        let siege = Siege { ns, cms, host, started, baseline, dir };
        siege.target("target").await?;
        Ok(siege)
    }

    /// Another object for the attacker to reconcile.
    async fn target(&self, name: &str) -> Result<()> {
        let target = ConfigMap {
            metadata: ObjectMeta { name: Some(name.into()), labels: Some([(TARGET.to_string(), "yes".to_string())].into()), ..Default::default() },
            ..Default::default()
        };
        self.cms.create(&PostParams::default(), &target).await?;
        Ok(())
    }

    /// The attack on the boundary added at most [`BOUNDARY_RSS_GROWTH`] to the host's resident
    /// memory at its peak; returns the peak (MiB).
    fn rss_stayed_bounded(&self) -> Result<f64> {
        let peak = kubewasm_tests::process::peak_rss_bytes(self.host.pid().context("host pid")?).context("the host is gone")? as f64 / (1 << 20) as f64;
        eprintln!("{}: host RSS {:.0} MiB before the attack, {peak:.0} MiB at its peak", self.host.name(), self.baseline);
        ensure!(peak - self.baseline < BOUNDARY_RSS_GROWTH, "the host's resident memory grew from {:.0} to {peak:.0} MiB", self.baseline);
        Ok(peak)
    }

    /// Waits until the hostile plugin's `metric` (with `labels` besides `plugin="hostile"`) is
    /// above zero: the attack has met its limit.
    async fn limit_reached(&mut self, metric: &str, labels: &[(&str, &str)]) -> Result<f64> {
        let mut all = vec![("plugin", "hostile")];
        all.extend_from_slice(labels);
        self.host.wait_metric(metric, &all, CONVERGE, |v| v > 0.0).await.with_context(|| format!("the attack never reached its limit ({metric})"))
    }

    fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The promise: the well-behaved plugin is unharmed and the host is bounded.
    async fn good_plugin_is_unharmed(&mut self) -> Result<()> {
        let names: Vec<String> = (0..30).map(|i| format!("good-{i}")).collect();
        let inputs = |input: &str| -> BTreeMap<String, String> { names.iter().map(|n| (n.clone(), input.to_string())).collect() };
        let created = Instant::now();
        create_primaries(&self.cms, &inputs("1")).await?;
        wait_outputs_within(&self.cms, "good", &inputs("1"), Want::default(), LATENCY_BOUND).await.context("the good plugin's creates")?;
        let created_in = created.elapsed();
        let updated = Instant::now();
        for name in &names {
            set_input(&self.cms, name, "2").await?;
        }
        wait_outputs_within(&self.cms, "good", &inputs("2"), Want::default(), LATENCY_BOUND).await.context("the good plugin's updates")?;
        let updated_in = updated.elapsed();
        let (client, ns) = (self.ns.client().clone(), self.ns.name().to_string());
        eventually("an Event for every reconcile of the good plugin", CONVERGE, || async {
            let all = events(&client, &ns).await?;
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

        let metrics = self.host.metrics().await?;
        let good = [("plugin", "good")];
        ensure!(prom::sum(&metrics, "kubewasm_plugin_events_dropped_total", &good) == 0.0, "the good plugin lost Events");
        ensure!(prom::sum(&metrics, "kubewasm_plugin_log_records_dropped_total", &good) == 0.0, "the good plugin lost log records");
        ensure!(prom::sum(&metrics, "kubewasm_plugin_faults_total", &good) == 0.0, "the good plugin faulted");
        let errors = prom::sum(&metrics, "controller_runtime_reconcile_errors_total", &[("controller", "good")]);
        ensure!(errors == 0.0, "the good plugin had {errors} reconcile errors");
        let rss = rss_mib(self.host.pid().context("host pid")?)?;
        ensure!(rss < RSS_BOUND, "the host's resident memory grew to {rss:.0} MiB");
        ensure!(self.host.try_status().is_none(), "the host exited:\n{}", self.host.log_tail(40));
        eprintln!("{}: the good plugin's 30 creates took {created_in:?}, 30 updates {updated_in:?}; host RSS {rss:.0} MiB", self.host.name());
        Ok(())
    }

    async fn stop(self) -> Result<()> {
        self.host.stop().await?;
        Ok(())
    }
}

fn hostile_guest() -> Result<Vec<u8>> {
    Ok(std::fs::read(guests::guest("hostile-guest", "hostile_guest"))?)
}

/// The hostile plugin's settings file: top-level keys before any `[kubewasm]` table in `settings`.
fn hostile_settings(name: &str, attack: &str, settings: &str) -> String {
    format!("name = {name:?}\nattack = {attack:?}\nselector = \"{TARGET}\"\n{settings}")
}

/// The host's resident memory in MiB.
fn rss_mib(pid: u32) -> Result<f64> {
    let bytes = kubewasm_tests::process::rss_bytes(pid).context("the host is gone")?;
    Ok(bytes as f64 / (1 << 20) as f64)
}

/// At full concurrency, the attacker lists all of 20 000 cached ConfigMaps in a loop: each
/// list is refused before it is copied (the answer would pass a quarter of its 16 MiB memory),
/// with an error that says how to narrow it.
#[tokio::test]
async fn listing_everything_in_a_loop() -> Result<()> {
    let ns = Siege::namespace("list-everything").await?;
    let cms: Api<ConfigMap> = ns.api();
    futures::stream::iter(0..20_000)
        .map(|i| {
            let cms = cms.clone();
            async move {
                let object = ConfigMap {
                    metadata: ObjectMeta { name: Some(format!("bulk-{i}")), ..Default::default() },
                    data: Some([("bulk".to_string(), "x".repeat(200))].into()),
                    ..Default::default()
                };
                cms.create(&PostParams::default(), &object).await
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    let mut siege = Siege::start(ns, "list-everything", "max-concurrency = 4\n[kubewasm]\nmemory-mib = 16\n").await?;
    siege.limit_reached("kubewasm_plugin_oversized_lists_total", &[]).await?;
    wait_event(siege.ns.client(), siege.ns.name(), "target", "ReconcileFailed", "narrow the list by namespace or label selector").await?;
    siege.good_plugin_is_unharmed().await?;
    siege.stop().await
}

/// A plugin whose memory limit × concurrency (4 GiB × 64) does not fit the host's plugin memory
/// budget is refused at load, with an Event naming the flag; its neighbour runs.
#[tokio::test]
async fn memory_beyond_the_budget() -> Result<()> {
    let ns = Siege::namespace("memory").await?;
    let mut siege = Siege::start(ns, "memory", "").await?;
    wait_event(siege.ns.client(), siege.ns.name(), STATUS, "PluginRejected", "--plugin-memory-budget").await?;
    siege.good_plugin_is_unharmed().await?;
    siege.stop().await
}

/// Event spam with random reasons about random objects: what reaches the API server is bounded
/// by the attacker's own write budget (the host's ceiling, qps 100 and burst 200, which a plugin
/// asking for nothing gets), the rest is dropped and counted; the good plugin's Events all
/// arrive.
#[tokio::test]
async fn event_spam() -> Result<()> {
    let ns = Siege::namespace("event-spam").await?;
    let mut siege = Siege::start(ns, "event-spam", "").await?;
    siege.limit_reached("kubewasm_plugin_events_dropped_total", &[]).await?;
    siege.good_plugin_is_unharmed().await?;
    let spam = events(siege.ns.client(), siege.ns.name()).await?.iter().filter(|e| e.reason.as_deref().is_some_and(|r| r.starts_with("Spam"))).count();
    let elapsed = siege.seconds();
    ensure!(spam as f64 <= 200.0 + 100.0 * elapsed, "{spam} spam Events reached the API server in {elapsed:.0}s");
    siege.stop().await
}

/// A log record with a million fields, then records without pause: one line per record, at
/// most 32 fields, within the per-plugin budget (a burst of 1000, then 100 a second).
#[tokio::test]
async fn log_flood() -> Result<()> {
    let ns = Siege::namespace("log-flood").await?;
    let mut siege = Siege::start(ns, "log-flood", "fields = 1000000\n[kubewasm]\nmemory-mib = 256\n").await?;
    siege.limit_reached("kubewasm_plugin_log_records_dropped_total", &[]).await?;
    siege.good_plugin_is_unharmed().await?;
    let log = siege.host.log_text();
    let elapsed = siege.seconds();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("plugin=hostile")).collect();
    ensure!((lines.len() as f64) <= 1000.0 + 100.0 * elapsed + 50.0, "{} log lines of the attacker in {elapsed:.0}s", lines.len());
    let wide = lines.iter().find(|l| l.contains("1000000 fields")).context("the record with a million fields was not logged at all")?;
    ensure!(wide.len() < 16 << 10, "a record of {} bytes", wide.len());
    siege.stop().await
}

/// For every ConfigMap event the attacker's `map-related` returns 100 000 keys, new ones each
/// time: none of them is a cached primary, so none is queued.
#[tokio::test]
async fn map_related_flood() -> Result<()> {
    let ns = Siege::namespace("map-flood").await?;
    let mut siege = Siege::start(ns, "map-flood", "").await?;
    // The attacker is added once the host is ready: it maps its target before the good plugin's
    // ConfigMaps come.
    siege.host.wait_metric("workqueue_adds_total", &[("name", "hostile-map-related")], CONVERGE, |v| v >= 1.0).await?;
    siege.good_plugin_is_unharmed().await?;
    let metrics = siege.host.metrics().await?;
    let mapped = prom::sum(&metrics, "workqueue_adds_total", &[("name", "hostile-map-related")]);
    ensure!(mapped >= 30.0, "map-related ran for {mapped} ConfigMap events: the flood never happened");
    let depth = prom::sum(&metrics, "workqueue_depth", &[("name", "hostile")]);
    ensure!(depth <= 1.0, "the attacker's invented keys were queued: depth {depth}");
    siege.stop().await
}

/// `requeue-after(0)` forever: rate limited with backoff, not a hot loop.
#[tokio::test]
async fn requeue_zero_hot_loop() -> Result<()> {
    let ns = Siege::namespace("requeue-zero").await?;
    let mut siege = Siege::start(ns, "requeue-zero", "").await?;
    // The attacker is added once the host is ready: its loop has to be running first.
    siege.host.wait_metric("controller_runtime_reconcile_total", &[("controller", "hostile")], CONVERGE, |v| v >= 3.0).await?;
    siege.good_plugin_is_unharmed().await?;
    let calls = siege.host.metric("controller_runtime_reconcile_total", &[("controller", "hostile")]).await?;
    let elapsed = siege.seconds();
    ensure!(calls >= 3.0, "the attacker ran only {calls} times: no loop to stop");
    ensure!(calls < 100.0, "requeue-after 0 ran {calls} reconciles in {elapsed:.0}s");
    siege.stop().await
}

/// A host call that never returns (a WASI sleep of an hour): the call is stopped at the
/// plugin's deadline, a fault counted and reported, and its worker freed.
#[tokio::test]
async fn host_call_that_hangs() -> Result<()> {
    let ns = Siege::namespace("hang").await?;
    let mut siege = Siege::start(ns, "hang", "[kubewasm]\ndeadline-ms = 2000\n").await?;
    siege.limit_reached("kubewasm_plugin_faults_total", &[("kind", "deadline")]).await?;
    wait_event(siege.ns.client(), siege.ns.name(), "target", "PluginFault", "deadline").await?;
    siege.good_plugin_is_unharmed().await?;
    // Retried with backoff, so the deadline is met again: the worker was freed each time.
    siege.host.wait_metric("kubewasm_plugin_faults_total", &[("plugin", "hostile"), ("kind", "deadline")], CONVERGE, |v| v >= 2.0).await?;
    siege.stop().await
}

/// The access reviews of `plugin`'s identity in the test namespace that reached the API server
/// (from its audit log), in the order it answered them.
async fn access_reviews(ns: &str, plugin: &str) -> Vec<kubewasm_tests::audit::AuditEvent> {
    let user = format!("system:serviceaccount:{ns}:kubewasm-plugin-{plugin}");
    let mut reviews: Vec<_> = kubewasm_tests::audit::read(ControlPlane::shared().await.data_dir())
        .into_iter()
        .filter(|e| e.resource() == "selfsubjectaccessreviews" && e.acting_as() == user)
        .collect();
    reviews.sort_by_key(|e| e.stage_timestamp);
    reviews
}

/// The audit's H1, on a host serving every namespace (one serving a list reviews only those):
/// an `access` export of 1000 rules, each with every verb, 100 namespaces and 100 names — 14
/// million access reviews, which admission used to build in one list (gigabytes) and then send. Refused from the numbers, naming the cap, before any review is built: not one
/// reaches the API server, the host's memory stays flat, the neighbour is unharmed.
#[tokio::test]
async fn access_review_flood() -> Result<()> {
    let ns = Siege::namespace("access-flood").await?;
    let setup = Setup { service_accounts: true, everywhere: true, ..Setup::default() };
    let mut siege = Siege::configured(ns, "access-flood", "", setup).await?;
    wait_event(siege.ns.client(), siege.ns.name(), STATUS, "PluginRejected", "--max-admission-reviews=2000").await?;
    siege.good_plugin_is_unharmed().await?;
    let reviews = access_reviews(siege.ns.name(), "hostile").await;
    ensure!(reviews.is_empty(), "{} access reviews of the attacker reached the API server", reviews.len());
    siege.stop().await
}

/// Under the cap, a plugin whose rules stand for 600 access reviews (and whose identity holds
/// none of them, so it is refused and tried again): every review waits for a token of the
/// admissions' shared bucket (here 20 a second, 40 at once), never a burst of all of them.
#[tokio::test]
async fn access_reviews_are_paced() -> Result<()> {
    let ns = Siege::namespace("access-paced").await?;
    let settings = "rules = 6\nverbs = [\"get\"]\nnamespaces = 0\nnames = 100\n";
    let setup = Setup { service_accounts: true, args: &["--admission-qps=20"], ..Setup::default() };
    let mut siege = Siege::configured(ns, "access-flood", settings, setup).await?;
    wait_event(siege.ns.client(), siege.ns.name(), STATUS, "PluginRejected", "kubewasm-plugin-hostile lacks").await?;
    siege.good_plugin_is_unharmed().await?;
    let reviews = access_reviews(siege.ns.name(), "hostile").await;
    ensure!(reviews.len() >= 600, "only {} access reviews: the attack did not happen", reviews.len());
    let window = Duration::from_secs(5);
    let busiest = reviews
        .iter()
        .enumerate()
        .map(|(i, first)| reviews[i..].iter().take_while(|e| e.stage_timestamp.duration_since(first.stage_timestamp).unsigned_abs() < window).count())
        .max()
        .unwrap_or(0);
    // 40 at once, then 20 a second (the good plugin's few share the bucket), and some slack.
    eprintln!("{} access reviews; at most {busiest} in any {window:?}", reviews.len());
    ensure!(busiest <= 40 + 20 * 5 + 10, "{busiest} access reviews within {window:?}");
    siege.stop().await
}

/// The audit's M2, on a host serving every namespace (one serving a list only watches there):
/// a list grant limited to 5000 namespaces (none exists) is refused at load, the field and the
/// cap named; ten grants of 100 namespaces each pass that but need 1000 watches, past the
/// host's 500 per plugin: refused at admission, naming the cap. Not one watch opens on the API
/// server for either.
#[tokio::test]
async fn watch_flood() -> Result<()> {
    let ns = Siege::namespace("watch-flood").await?;
    let admin = ControlPlane::shared().await.client().await?;
    let before = kubewasm_tests::prom::apiserver_watches(&admin, "", "secrets").await?;
    let mut siege = Siege::configured(ns, "watch-flood", "", Setup { everywhere: true, ..Setup::default() }).await?;
    wait_event(siege.ns.client(), siege.ns.name(), STATUS, "PluginRejected", "namespaces`: 5000 entries; at most 100").await?;
    siege.dir.install("wide", &hostile_guest()?, Some(&hostile_settings("wide", "watch-flood", "grants = 10\nnamespaces = 100\n")));
    wait_event(siege.ns.client(), siege.ns.name(), STATUS, "PluginRejected", "more than 500 watches").await?;
    siege.good_plugin_is_unharmed().await?;
    let after = kubewasm_tests::prom::apiserver_watches(&admin, "", "secrets").await?;
    // The control plane's own controllers may open one or two as they start; the attack would
    // open thousands.
    eprintln!("watches of Secrets on the API server: {before} before, {after} after");
    ensure!(after - before < 5.0, "watches of Secrets on the API server grew from {before} to {after}");
    siege.stop().await
}

/// GETs of PodTemplates the API server has served so far (only this attacker reads them).
async fn pod_template_gets(admin: &kube::Client) -> Result<f64> {
    let text = kubewasm_tests::prom::apiserver_metrics(admin).await?;
    Ok(prom::sum(&text, "apiserver_request_total", &[("verb", "GET"), ("resource", "podtemplates")]))
}

/// The GETs over `window`, once they have begun.
async fn gets_during(admin: &kube::Client, window: Duration) -> Result<f64> {
    let start = pod_template_gets(admin).await?;
    tokio::time::sleep(window).await;
    Ok(pod_template_gets(admin).await? - start)
}

/// The audit's M1: a plugin granted only `get` on PodTemplates (every read goes to the API
/// server) reads one in a loop, asking for qps 1000: it gets the host's ceiling
/// (`--max-plugin-qps=5`), and its reads are paced by it; a hot reload that lowers its qps to 1
/// slows them at once.
#[tokio::test]
async fn live_reads_in_a_loop() -> Result<()> {
    let ns = Siege::namespace("get-loop").await?;
    let admin = ControlPlane::shared().await.client().await?;
    let settings = "[kubewasm]\nqps = 1000.0\nburst = 2\ndeadline-ms = 20000\n";
    let setup = Setup { args: &["--max-plugin-qps=5"], ..Setup::default() };
    let mut siege = Siege::configured(ns, "get-loop", settings, setup).await?;
    let before = pod_template_gets(&admin).await?;
    eventually("the attacker's reads", CONVERGE, || async {
        let now = pod_template_gets(&admin).await?;
        if now > before { Ok(()) } else { Err(anyhow!("no GET of PodTemplates yet")) }
    })
    .await?;
    let window = Duration::from_secs(10);
    let capped = gets_during(&admin, window).await?;
    eprintln!("{capped} GETs in {window:?} at the ceiling of 5 per second");
    ensure!((30.0..=5.0 * 10.0 + 2.0 + 5.0).contains(&capped), "{capped} GETs in {window:?} with a ceiling of 5 per second");

    siege.dir.install("hostile", &hostile_guest()?, Some(&hostile_settings("hostile", "get-loop", &settings.replace("1000.0", "1.0"))));
    wait_event(siege.ns.client(), siege.ns.name(), STATUS, "PluginReloaded", "reloaded hostile").await?;
    // Reads already waiting for a token finish at the old pace.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let lowered = gets_during(&admin, window).await?;
    eprintln!("{lowered} GETs in {window:?} after the reload to 1 per second");
    ensure!(lowered <= 1.0 * 10.0 + 2.0 + 3.0, "{lowered} GETs in {window:?} after the reload lowered qps to 1");
    siege.good_plugin_is_unharmed().await?;
    siege.stop().await
}

/// The audit's L12: a plugin declaring only `patch` on Secrets applies one that does not exist.
/// Its identity may create Secrets (RBAC grants more than the manifest) but not read them, so
/// the host cannot tell whether the apply would create: refused, as the manifest lacks
/// `create`, and no Secret is made.
#[tokio::test]
async fn apply_that_would_create_without_a_create_grant() -> Result<()> {
    let ns = Siege::namespace("apply-blind").await?;
    let create = format!(
        r#"{{"apiVersion": "v1", "kind": "List", "items": [
        {{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {{"name": "create-secrets", "namespace": "{ns}"}},
         "rules": [{{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}}]}},
        {{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {{"name": "create-secrets", "namespace": "{ns}"}},
         "roleRef": {{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "create-secrets"}},
         "subjects": [{{"kind": "ServiceAccount", "name": "kubewasm-plugin-hostile", "namespace": "{ns}"}}]}}]}}"#,
        ns = ns.name()
    );
    apply(ControlPlane::shared().await, &create).await?;
    let setup = Setup { service_accounts: true, hostile_rbac: true, ..Setup::default() };
    let mut siege = Siege::configured(ns, "apply-blind", "", setup).await?;
    let outcome = eventually("the blind apply", CONVERGE, || async {
        let log = siege.host.log_text();
        log.lines().find(|l| l.contains("blind apply:")).map(String::from).ok_or_else(|| anyhow!("no attempt yet"))
    })
    .await?;
    ensure!(outcome.contains("Forbidden") && outcome.contains("which the plugin's identity may not read"), "{outcome}");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = siege.ns.api();
    ensure!(secrets.get_opt("blind").await?.is_none(), "the Secret was created without a create grant");
    siege.good_plugin_is_unharmed().await?;
    siege.stop().await
}

/// A plugin that reaches only `env=dev` members writes into an engaged `env=prod` member, into a
/// cluster that is not engaged, and into one whose name is 8 MiB long (straight through the
/// bindings): forbidden (and counted), unavailable, and invalid — refused before the name is
/// copied — and nothing reaches the prod member; the good plugin is unharmed.
#[tokio::test]
async fn reaching_clusters_outside_its_scope() -> Result<()> {
    let ns = Siege::namespace("reach-out").await?;
    let prod = ControlPlane::start().await?;
    let member_ns = k8s_openapi::api::core::v1::Namespace { metadata: ObjectMeta { name: Some(ns.name().into()), ..Default::default() }, ..Default::default() };
    Api::all(prod.client().await?).create(&PostParams::default(), &member_ns).await?;
    let clusters = tempfile::tempdir()?;
    kubewasm_tests::members::engage(clusters.path(), "prod", prod.kubeconfig_path(), &[("env", "prod")])?;
    let arg = format!("--clusters={}", clusters.path().display());
    let setup = Setup { args: &[&arg], ..Setup::default() };
    let mut siege = Siege::configured(ns, "reach-out", "clusters = [\"prod\", \"nowhere\"]", setup).await?;
    let outcomes = eventually("the three reach attacks", CONVERGE, || async {
        let log = siege.host.log_text();
        let outcomes: Vec<String> = ["prod", "nowhere", "<8 MiB name>"]
            .iter()
            .filter_map(|c| log.lines().find(|l| l.contains(&format!("reach attack: {c}:"))).map(String::from))
            .collect();
        if outcomes.len() == 3 { Ok(outcomes) } else { Err(anyhow!("{} of 3 so far", outcomes.len())) }
    })
    .await?;
    ensure!(outcomes[0].contains("Forbidden") && outcomes[0].contains("not within the plugin's clusters"), "{}", outcomes[0]);
    ensure!(outcomes[1].contains("Unavailable") && outcomes[1].contains("not engaged"), "{}", outcomes[1]);
    ensure!(outcomes[2].contains("Invalid") && outcomes[2].contains("cluster is 8388608 bytes; at most 253"), "{}", outcomes[2]);
    siege.limit_reached("kubewasm_plugin_forbidden_calls_total", &[("plugin", "hostile")]).await?;
    let stolen: Api<ConfigMap> = Api::namespaced(prod.client().await?, siege.ns.name());
    ensure!(stolen.get_opt("stolen").await?.is_none(), "the attacker wrote into a member outside its scope");
    siege.good_plugin_is_unharmed().await?;
    siege.rss_stayed_bounded()?;
    siege.stop().await
}

/// A noisy neighbour (H8): the attacker computes without end on 64 objects at once (64 workers,
/// 8 MiB each, a 300 s deadline: within any budget), beside a plugin whose reconciles do about
/// 100 ms of work under a 1 s deadline. The neighbour's reconciles stay within their deadline
/// (measured in their own time, and each plugin holds at most as many ready calls as the host
/// has workers): no deadline fault, no quarantine, no error; and the lease, renewed on a runtime
/// of its own, never lapses. Prints the neighbour's reconcile time alone and under siege, and
/// the lease-renew latency.
#[tokio::test]
async fn noisy_neighbour_busy_loops() -> Result<()> {
    const WORK_MI: &str = "100";
    let cp = ControlPlane::shared().await;
    let ns = Siege::namespace("busy-loop").await?;
    let dir = PluginDir::new();
    let good = format!("{}[kubewasm]\ndeadline-ms = 1000\n", E2eSettings::new("good").max_concurrency(2).to_toml());
    dir.install("good", &kubewasm_tests::plugindir::e2e_variant("v01"), Some(&good));
    let hostile = std::fs::read(guests::guest("hostile-guest", "hostile_guest"))?;
    let toml = "name = \"hostile\"\nattack = \"busy-loop\"\nmax-concurrency = 64\n[kubewasm]\nmemory-mib = 8\ndeadline-ms = 300000\n";
    dir.install("hostile", &hostile, Some(toml));
    let config = host_config("busy-loop", dir.path(), cp.kubeconfig_path(), ns.name()).leader_elect(ns.name(), "kubewasm-busy-loop");
    let mut host = Host::start(config).await?;
    host.wait_ready(READY).await?;
    host.wait_metric("leader_election_master_status", &[], CONVERGE, |v| v == 1.0).await?;
    let cms: Api<ConfigMap> = ns.api();
    let good_time = |metrics: &str| {
        let labels = [("controller", "good")];
        (
            prom::sum(metrics, "controller_runtime_reconcile_time_seconds_sum", &labels),
            prom::sum(metrics, "controller_runtime_reconcile_time_seconds_count", &labels),
        )
    };
    let working = |name: &str, input: &str| {
        let mut cm = primary(name, input);
        cm.metadata.annotations.get_or_insert_with(Default::default).insert("e2e.kubewasm.io/work-mi".into(), WORK_MI.into());
        cm
    };
    let round = |prefix: &'static str, input: &'static str| {
        let cms = cms.clone();
        async move {
            let inputs: BTreeMap<String, String> = (0..10).map(|i| (format!("{prefix}-{i}"), input.to_string())).collect();
            let started = Instant::now();
            for name in inputs.keys() {
                cms.create(&PostParams::default(), &working(name, input)).await?;
            }
            wait_outputs_within(&cms, "good", &inputs, Want::default(), LATENCY_BOUND).await?;
            anyhow::Ok(started.elapsed())
        }
    };

    // Alone.
    let alone_wall = round("alone", "1").await.context("the good plugin alone")?;
    let (sum, count) = good_time(&host.metrics().await?);
    let alone = sum / count;

    // Under siege: the attacker busy on 64 objects.
    for i in 0..64 {
        let target = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("target-{i}")),
                labels: Some([("hostile.kubewasm.io/target".to_string(), "yes".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        cms.create(&PostParams::default(), &target).await?;
    }
    host.wait_metric("controller_runtime_active_workers", &[("controller", "hostile")], CONVERGE, |v| v >= 64.0)
        .await
        .context("the attacker never ran 64 calls")?;
    let sieged_wall = round("sieged", "2").await.context("the good plugin beside the busy loops")?;
    let metrics = host.metrics().await?;
    let (sum2, count2) = good_time(&metrics);
    let sieged = (sum2 - sum) / (count2 - count);
    let good = [("plugin", "good")];
    ensure!(prom::sum(&metrics, "kubewasm_plugin_faults_total", &good) == 0.0, "the good plugin faulted:\n{}", host.log_tail(20));
    ensure!(prom::sum(&metrics, "kubewasm_plugin_quarantined_objects", &good) == 0.0, "objects of the good plugin were quarantined");
    let errors = prom::sum(&metrics, "controller_runtime_reconcile_errors_total", &[("controller", "good")]);
    ensure!(errors == 0.0, "the good plugin had {errors} reconcile errors");
    ensure!(prom::sum(&metrics, "controller_runtime_active_workers", &[("controller", "hostile")]) >= 64.0, "the siege ended early");
    let renew_sum = prom::sum(&metrics, "kubewasm_leader_renew_duration_seconds_sum", &[]);
    let renewals = prom::sum(&metrics, "kubewasm_leader_renew_duration_seconds_count", &[]);
    let slow_renewals = renewals - prom::sum(&metrics, "kubewasm_leader_renew_duration_seconds_bucket", &[("le", "1.0")]);
    ensure!(renewals >= 3.0, "only {renewals} lease renewals");
    ensure!(slow_renewals == 0.0, "{slow_renewals} of {renewals} lease renewals took over 1 s");
    ensure!(prom::sum(&metrics, "leader_election_master_status", &[]) == 1.0, "the host lost its lease");
    ensure!(host.log_text().matches("became the leader").count() == 1, "leadership flapped:\n{}", host.log_tail(40));
    let rss = rss_mib(host.pid().context("host pid")?)?;
    eprintln!(
        "noisy neighbour: the good plugin's reconcile (~{WORK_MI}M rounds) took {:.0} ms alone (10 in {alone_wall:?}), {:.0} ms beside 64 busy loops (10 in {sieged_wall:?}); \
         {renewals} lease renewals, mean {:.1} ms, none over 1 s; host RSS {rss:.0} MiB",
        alone * 1e3,
        sieged * 1e3,
        renew_sum / renewals * 1e3,
    );
    host.stop().await?;
    Ok(())
}

/// Who a hand-written attacker (`kubewasm_tests::components`) says it is: the plugin `hostile`,
/// reconciling the targets.
fn component_manifest() -> components::Manifest {
    components::Manifest::new("hostile", TARGET)
}

/// At full concurrency, the attacker publishes Events about a ConfigMap with an 8 MiB name, 300
/// to a reconcile, straight through the generated bindings: each is refused with `invalid` before
/// the name is copied, so nothing is queued or kept, and the host's memory stays put.
#[tokio::test]
async fn events_about_an_8_mib_name() -> Result<()> {
    let ns = Siege::namespace("event-bomb").await?;
    let mut siege = Siege::start(ns, "event-bomb", "max-concurrency = 4\n").await?;
    for i in 1..4 {
        siege.target(&format!("target-{i}")).await?;
    }
    wait_event(siege.ns.client(), siege.ns.name(), "target", "ReconcileFailed", "name is 8388608 bytes; at most 253").await?;
    siege.good_plugin_is_unharmed().await?;
    siege.rss_stayed_bounded()?;
    let bombs = events(siege.ns.client(), siege.ns.name()).await?.iter().filter(|e| e.reason.as_deref() == Some("Bomb")).count();
    ensure!(bombs == 0, "{bombs} Events about the 8 MiB name were sent");
    siege.stop().await
}

/// The attacker's `map-related` returns a million keys whose names all point at one 30 MiB
/// buffer, for every ConfigMap event: the host stops lifting them within the bound of a valid
/// answer (an `oversized` fault), never copies the names, and the neighbour is unharmed.
#[tokio::test]
async fn map_related_keys_aliasing_one_buffer() -> Result<()> {
    let ns = Siege::namespace("map-alias").await?;
    let hostile = components::map_related_alias(&component_manifest(), 1_000_000, 30 << 20);
    let mut siege = Siege::start_with(ns, "map-alias", &hostile, "", Setup::default()).await?;
    siege.limit_reached("kubewasm_plugin_faults_total", &[("kind", "oversized")]).await?;
    siege.good_plugin_is_unharmed().await?;
    siege.rss_stayed_bounded()?;
    let metrics = siege.host.metrics().await?;
    ensure!(prom::sum(&metrics, "kubewasm_plugin_faults_total", &[("plugin", "hostile"), ("kind", "instantiate")]) == 0.0, "misreported as instantiate");
    siege.stop().await
}

/// A plugin whose manifest's permission lists a hundred thousand namespaces, all pointing at one
/// 1 MiB buffer, is refused at load (`oversized`), having cost the host no more than the largest
/// valid manifest.
#[tokio::test]
async fn describe_aliasing_one_buffer() -> Result<()> {
    let ns = Siege::namespace("describe-alias").await?;
    let hostile = components::describe_alias(&component_manifest(), 100_000, 1 << 20);
    let mut siege = Siege::start_with(ns, "describe-alias", &hostile, "", Setup::default()).await?;
    wait_event(siege.ns.client(), siege.ns.name(), STATUS, "PluginRejected", "more than describe may return").await?;
    siege.good_plugin_is_unharmed().await?;
    siege.rss_stayed_bounded()?;
    siege.stop().await
}

/// Beside its plugin, the attacker's component holds twenty core instances of a module with ten
/// tables of a million function references, filled when it is instantiated to describe itself:
/// table space counts in its memory limit, so it is refused at load with a memory fault.
#[tokio::test]
async fn table_bomb() -> Result<()> {
    let ns = Siege::namespace("table-bomb").await?;
    let hostile = components::table_bomb(&component_manifest(), 20, 10, 1_000_000);
    let mut siege = Siege::start_with(ns, "table-bomb", &hostile, "", Setup::default()).await?;
    wait_event(siege.ns.client(), siege.ns.name(), STATUS, "PluginRejected", "exceeded its memory limit").await?;
    siege.good_plugin_is_unharmed().await?;
    siege.rss_stayed_bounded()?;
    siege.stop().await
}

/// The attacker's settings ask for 4 GiB of memory, and its `describe` touches 3 GiB: describe
/// runs inside the host's plugin memory budget (1 GiB here, as in the chart), so it is refused
/// before it runs, with the budget named.
#[tokio::test]
async fn describe_touching_3_gib() -> Result<()> {
    let ns = Siege::namespace("describe-memory").await?;
    let hostile = std::fs::read(guests::guest("hostile-guest", "hostile_guest"))?;
    let toml = format!("name = \"hostile\"\nattack = \"describe-memory\"\nselector = \"{TARGET}\"\n[kubewasm]\nmemory-mib = 4096\n");
    let mut siege = Siege::start_with(ns, "describe-memory", &hostile, &toml, Setup { args: &["--plugin-memory-budget=1Gi"], ..Setup::default() }).await?;
    wait_event(siege.ns.client(), siege.ns.name(), STATUS, "PluginRejected", "describe would run under its memory limit of 4294967296 bytes").await?;
    siege.good_plugin_is_unharmed().await?;
    siege.rss_stayed_bounded()?;
    siege.stop().await
}

/// H3 of the 2026-12-05 audit: a plugin keeping 16 calls asleep (a WASI sleep, which counts as
/// its own time, up to its 20 s deadline) holds an instance of 96 MiB for each call it may: at
/// most its share of the 1 GiB budget (`--plugin-max-budget-share`, a quarter: its first
/// instance and one more), the other calls waiting for them. So its neighbour's new version
/// still has room to describe itself and load. (Before, the sleeper's instances took all of the
/// budget the neighbour's first left, and the new version was rejected for good.)
#[tokio::test]
async fn a_plugin_holding_its_share_leaves_room_for_another_to_load() -> Result<()> {
    let ns = Siege::namespace("budget-share").await?;
    let settings = "max-concurrency = 16\n[kubewasm]\nmemory-mib = 96\ndeadline-ms = 20000\n";
    let mut siege = Siege::configured(ns, "hang", settings, Setup { args: &["--plugin-memory-budget=1Gi"], ..Setup::default() }).await?;
    for i in 1..16 {
        siege.target(&format!("target-{i}")).await?;
    }
    // Calls that found neither an idle instance nor room for one: the sleeper holds all it may.
    siege.limit_reached("kubewasm_plugin_budget_waits_total", &[]).await?;
    let instances = siege.host.metric("kubewasm_plugin_instances", &[("plugin", "hostile")]).await?;
    ensure!(instances * 96.0 <= 256.0, "the sleeper holds {instances} instances of 96 MiB, past a quarter of the 1 GiB budget");
    siege.dir.install_e2e(&E2eSettings::new("good").events(), "v02");
    wait_event(siege.ns.client(), siege.ns.name(), STATUS, "PluginReloaded", "reloaded good").await?;
    let reserved = siege.host.metric("kubewasm_plugin_memory_budget_bytes", &[("state", "reserved")]).await?;
    ensure!(reserved <= (1u64 << 30) as f64, "{reserved} bytes reserved in a budget of 1 GiB");
    siege.good_plugin_is_unharmed().await?;
    siege.stop().await
}

/// H3: a load refused because the budget is full is looked at again, and loads once room comes
/// back. The attacker's first instance (900 MiB) leaves 60 MiB of the 1 GiB budget beside its
/// neighbour's 64 MiB, too little for the neighbour's new version to describe itself in; the
/// refusal says it is tried again, and once the attacker is removed the new version loads.
/// (Before, the refusal was final: the new version stayed rejected until its file changed.)
#[tokio::test]
async fn a_load_refused_for_a_full_budget_is_retried_when_room_comes_back() -> Result<()> {
    let ns = Siege::namespace("budget-retry").await?;
    let setup = Setup { args: &["--plugin-memory-budget=1Gi"], ..Setup::default() };
    let mut siege = Siege::configured(ns, "none", "[kubewasm]\nmemory-mib = 900\n", setup).await?;
    let (client, ns) = (siege.ns.client().clone(), siege.ns.name().to_string());
    wait_event(&client, &ns, STATUS, "PluginLoaded", "loaded hostile").await?;
    siege.dir.install_e2e(&E2eSettings::new("good").events(), "v02");
    wait_event(&client, &ns, STATUS, "PluginRejected", "--plugin-memory-budget").await?;
    let refused = wait_event(&client, &ns, STATUS, "PluginRejected", "trying again").await?;
    eprintln!("refused while the budget is full: {}", refused.note.unwrap_or_default());
    siege.dir.remove("hostile");
    wait_event(&client, &ns, STATUS, "PluginReloaded", "reloaded good").await?;
    siege.good_plugin_is_unharmed().await?;
    siege.stop().await
}

/// The neighbour of a plugin behind broken infrastructure reconciles the same primaries; its
/// outputs must be written within this of each change, well within the webhook's 10 s hang.
const NEIGHBOUR_BOUND: Duration = Duration::from_secs(5);

/// The well-behaved `good`'s outputs of `inputs` are all written within [`NEIGHBOUR_BOUND`] of
/// `since`; how long they took.
async fn neighbour_keeps_up(cms: &Api<ConfigMap>, inputs: &BTreeMap<String, String>, since: Instant) -> Result<Duration> {
    let left = NEIGHBOUR_BOUND.saturating_sub(since.elapsed());
    wait_outputs_within(cms, "good", inputs, Want::default(), left).await.context("the neighbour's outputs")?;
    Ok(since.elapsed())
}

/// The neighbour faulted and failed nothing.
async fn neighbour_unharmed(host: &Host) -> Result<()> {
    let metrics = host.metrics().await?;
    ensure!(prom::sum(&metrics, "kubewasm_plugin_faults_total", &[("plugin", "good")]) == 0.0, "the neighbour faulted");
    let errors = prom::sum(&metrics, "controller_runtime_reconcile_errors_total", &[("controller", "good")]);
    ensure!(errors == 0.0, "the neighbour had {errors} reconcile errors");
    Ok(())
}

/// Fails at once if `plugin` has set objects aside: its quarantine gauge, or a `Quarantined`
/// Event in the namespace.
async fn nothing_quarantined(host: &Host, ns: &TestNamespace, plugin: &str) -> Result<()> {
    let gauge = host.metric("kubewasm_plugin_quarantined_objects", &[("plugin", plugin)]).await?;
    ensure!(gauge == 0.0, "{gauge} objects of {plugin} were quarantined:\n{}", host.log_tail(30));
    let quarantined: Vec<_> = events(ns.client(), ns.name()).await?.into_iter().filter(|e| e.reason.as_deref() == Some("Quarantined")).collect();
    ensure!(quarantined.is_empty(), "Quarantined Events:\n  {}", describe_events(&quarantined));
    Ok(())
}

/// Waits for `plugin`'s outputs of `inputs` while checking every half second that nothing was
/// quarantined (a failure says so as soon as it happens, not at the timeout).
async fn outputs_without_quarantine(host: &Host, ns: &TestNamespace, plugin: &str, inputs: &BTreeMap<String, String>, want: Want<'_>) -> Result<()> {
    let cms: Api<ConfigMap> = ns.api();
    let watch = async {
        loop {
            nothing_quarantined(host, ns, plugin).await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    tokio::select! {
        done = wait_outputs(&cms, plugin, inputs, want) => done,
        quarantined = watch => quarantined,
    }
}

/// A slow admission webhook (audit M3): every write of the plugin's outputs waits 10 s on a
/// validating webhook (its `timeoutSeconds`; `failurePolicy: Ignore` then lets it through),
/// five times the plugin's 2 s deadline. The waits are the API server's, not the call's own
/// time: no deadline fault, no stalled call (its wall-clock backstop is 62 s), no quarantine
/// and no reconcile error, however often the objects change while the webhook hangs; once it
/// recovers, writes are fast again. (Before deadlines were measured in the call's own time,
/// each reconcile ended as a `deadline` fault at 2 s and after five in a row the object was
/// quarantined.) Its neighbour `good` reconciles the same primaries, its outputs untouched by the
/// webhook, each round within [`NEIGHBOUR_BOUND`]. Prints the reconcile latency under the hung
/// webhook.
#[tokio::test]
async fn a_slow_webhook_quarantines_nothing() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = Siege::namespace("slow-webhook").await?;
    let webhook = AdmissionWebhook::start(cp, &ns, (OUTPUT_LABEL, "patient")).await?;
    webhook.set(Answer::Hang(Duration::from_secs(10)));
    let dir = PluginDir::new();
    let settings = format!("{}[kubewasm]\ndeadline-ms = 2000\n", E2eSettings::new("patient").max_concurrency(4).to_toml());
    dir.install("patient", &kubewasm_tests::plugindir::e2e_variant("v01"), Some(&settings));
    dir.install_e2e(&E2eSettings::new("good"), "v01");
    let mut host = Host::start(host_config("slow-webhook", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let cms: Api<ConfigMap> = ns.api();
    let names = ["a", "b", "c", "d"];
    let inputs = |input: &str| -> BTreeMap<String, String> { names.iter().map(|n| (n.to_string(), input.to_string())).collect() };

    // Two rounds of changes while every output write hangs for 10 s.
    let hung = Instant::now();
    create_primaries(&cms, &inputs("1")).await?;
    let mut neighbour = vec![neighbour_keeps_up(&cms, &inputs("1"), hung).await?];
    outputs_without_quarantine(&host, &ns, "patient", &inputs("1"), Want::default()).await.context("the outputs written past the hung webhook")?;
    let changed = Instant::now();
    for name in names {
        set_input(&cms, name, "2").await?;
    }
    neighbour.push(neighbour_keeps_up(&cms, &inputs("2"), changed).await?);
    outputs_without_quarantine(&host, &ns, "patient", &inputs("2"), Want::default()).await.context("the second round past the hung webhook")?;
    let hung_for = hung.elapsed();
    let reviews = webhook.reviews();
    ensure!(reviews >= 8, "the webhook saw only {reviews} reviews: the writes did not wait on it");
    let metrics = host.metrics().await?;
    let reconcile = [("controller", "patient")];
    let (sum, count) = (
        prom::sum(&metrics, "controller_runtime_reconcile_time_seconds_sum", &reconcile),
        prom::sum(&metrics, "controller_runtime_reconcile_time_seconds_count", &reconcile),
    );
    ensure!(sum / count >= 5.0, "reconciles took {:.1} s on average: the webhook did not slow them", sum / count);

    // The webhook recovers: writes are fast again, and nothing was set aside meanwhile.
    webhook.set(Answer::Allow);
    let recovered = Instant::now();
    for name in names {
        set_input(&cms, name, "3").await?;
    }
    outputs_without_quarantine(&host, &ns, "patient", &inputs("3"), Want::default()).await.context("after the webhook recovered")?;
    let recovered_in = recovered.elapsed();
    let metrics = host.metrics().await?;
    let plugin = [("plugin", "patient")];
    ensure!(prom::sum(&metrics, "kubewasm_plugin_faults_total", &plugin) == 0.0, "the plugin faulted:\n{}", host.log_tail(30));
    let errors = prom::sum(&metrics, "controller_runtime_reconcile_errors_total", &reconcile);
    ensure!(errors == 0.0, "{errors} reconcile errors");
    nothing_quarantined(&host, &ns, "patient").await?;
    neighbour_unharmed(&host).await?;
    eprintln!(
        "slow webhook: {} reconciles averaging {:.1} s behind a 10 s webhook (2 s deadline), two rounds of 4 objects in {hung_for:?}, {reviews} reviews; \
         after recovery 4 objects in {recovered_in:?}; no fault, error or quarantine; the neighbour's rounds took {neighbour:?}",
        count,
        sum / count
    );
    host.stop().await?;
    drop(webhook);
    Ok(())
}

/// A 503/429 storm during a hot reload (audit M3): v02 replaces v01, and while it reconciles
/// every object the API server refuses each of its writes with 503 or 429 (a webhook's answer,
/// which the API server passes on). kube's client retries those until the request timeout, and
/// the plugin then gets `unavailable`: the infrastructure's trouble, which says nothing about the
/// version. So v02 is not rolled back while the storm lasts (no rollback, no `RolledBack`
/// Event), and once the storm ends v02 serves. (Before, the waits ran into the plugin's 5 s
/// deadline as faults, and unavailable errors counted as failing: v02, failing on every object,
/// was rolled back within seconds.) The rollback needs only five reconciles of evidence here, so
/// that v02's ten failed reconciles would be enough if they counted. Its neighbour `good`
/// reconciles the same primaries, its writes untouched by the storm, within [`NEIGHBOUR_BOUND`].
#[tokio::test]
async fn a_503_storm_during_a_reload_rolls_nothing_back() -> Result<()> {
    const STORM: Duration = Duration::from_secs(45);
    let cp = ControlPlane::shared().await;
    let ns = Siege::namespace("storm").await?;
    let webhook = AdmissionWebhook::start(cp, &ns, (OUTPUT_LABEL, "stormy")).await?;
    let dir = PluginDir::new();
    let settings = format!("{}[kubewasm]\nrollback-min-reconciles = 5\n", E2eSettings::new("stormy").max_concurrency(10).to_toml());
    dir.install("stormy", &kubewasm_tests::plugindir::e2e_variant("v01"), Some(&settings));
    dir.install_e2e(&E2eSettings::new("good"), "v01");
    let mut host = Host::start(host_config("storm", dir.path(), cp.kubeconfig_path(), ns.name())).await?;
    host.wait_ready(READY).await?;
    let cms: Api<ConfigMap> = ns.api();
    let names: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
    let inputs = |input: &str| -> BTreeMap<String, String> { names.iter().map(|n| (n.clone(), input.to_string())).collect() };
    create_primaries(&cms, &inputs("1")).await?;
    wait_outputs(&cms, "stormy", &inputs("1"), Want { variant: Some("v01"), ..Want::default() }).await?;

    // The storm starts; v02 is loaded and asked to reconcile every object.
    webhook.set(Answer::Refuse(vec![503, 429]));
    let plugin = [("plugin", "stormy")];
    dir.replace("stormy", &kubewasm_tests::plugindir::e2e_variant("v02"));
    host.wait_metric("kubewasm_plugin_reloads_total", &[("plugin", "stormy"), ("result", "reloaded")], CONVERGE, |n| n == 1.0).await?;
    let storm = Instant::now();
    for name in &names {
        set_input(&cms, name, "2").await?;
    }
    let neighbour = neighbour_keeps_up(&cms, &inputs("2"), storm).await?;
    let mut peak_refused = 0;
    while storm.elapsed() < STORM {
        let rollbacks = host.metric("kubewasm_plugin_rollbacks_total", &plugin).await?;
        ensure!(rollbacks == 0.0, "v02 was rolled back {:?} into the storm:\n{}", storm.elapsed(), host.log_tail(30));
        peak_refused = webhook.refused();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let metrics = host.metrics().await?;
    let errors = prom::sum(&metrics, "controller_runtime_reconcile_errors_total", &[("controller", "stormy")]);
    ensure!(peak_refused >= 20, "the webhook refused only {peak_refused} writes: no storm");
    ensure!(errors >= names.len() as f64, "v02 failed only {errors} reconciles during the storm: the storm did not reach it");

    // The storm ends: v02 serves every object.
    webhook.set(Answer::Allow);
    wait_outputs(&cms, "stormy", &inputs("2"), Want { variant: Some("v02"), ..Want::default() }).await.context("v02 after the storm")?;
    for name in &names {
        set_input(&cms, name, "3").await?;
    }
    wait_outputs(&cms, "stormy", &inputs("3"), Want { variant: Some("v02"), ..Want::default() }).await?;
    ensure!(host.metric("kubewasm_plugin_rollbacks_total", &plugin).await? == 0.0, "v02 was rolled back after the storm");
    let rolled_back: Vec<_> = events(ns.client(), ns.name()).await?.into_iter().filter(|e| e.reason.as_deref() == Some("RolledBack")).collect();
    ensure!(rolled_back.is_empty(), "RolledBack Events:\n  {}", describe_events(&rolled_back));
    let faults = host.metric("kubewasm_plugin_faults_total", &plugin).await?;
    neighbour_unharmed(&host).await?;
    eprintln!(
        "503 storm: {peak_refused} writes refused (503/429 in turn) over {STORM:?} after a reload, {errors} failed reconciles of v02 (unavailable), {faults} faults, no rollback; \
         v02 serves after the storm; the neighbour's round in the storm took {neighbour:?}"
    );
    host.stop().await?;
    drop(webhook);
    Ok(())
}

/// Hostile hooks beside a well-behaved one: hooks that compute forever, trap, answer 100 MiB or
/// sleep past their timeout, each under its failure policy, hammered while the well-behaved
/// plugin's hook answers every request within its latency, the host's memory stays bounded and
/// the API server gets each hostile hook's failure-policy answer.
#[tokio::test]
async fn webhooks_that_loop_trap_flood_or_sleep_are_answered_by_their_failure_policy_and_delay_no_other_plugin() -> Result<()> {
    let cp = ControlPlane::shared().await;
    let ns = cp.namespace("hooks-hostile").await?;
    let calm_group = format!("{}.hooks.kubewasm.io", unique_name("calm"));
    apply_crd(ns.client(), &widget_crd(&calm_group)?, READY).await?;
    let dir = PluginDir::new();
    let guest = hooks_guest();
    dir.install("calm", &guest, Some(&format!("name = \"calm\"\ngroup = \"{calm_group}\"\nmode = \"good\"\n")));
    // Each attacker guards a resource of its own, so the API server's answer for it is its own
    // policy's: loop and huge fail closed, trap and sleep fail open.
    let mut attackers = Vec::new();
    for (mode, policy) in [("loop", "fail"), ("trap", "ignore"), ("huge", "fail"), ("sleep", "ignore")] {
        let group = format!("{}.hooks.kubewasm.io", unique_name(mode));
        apply_crd(ns.client(), &widget_crd(&group)?, READY).await?;
        let settings = format!("name = \"{mode}\"\ngroup = \"{group}\"\nmode = \"{mode}\"\npolicy = \"{policy}\"\ntimeout = 5\n");
        dir.install(mode, &guest, Some(&settings));
        attackers.push((mode, policy, group));
    }
    let port = free_port();
    let mut host = Host::start(webhook_host("hooks-hostile", &dir, cp, ns.name(), &Shared::unique(), port, port)).await?;
    host.wait_ready(READY).await?;
    let calm = widgets(ns.client(), ns.name(), &calm_group, "v1");
    wait_hooks_served(&calm, &calm_group).await?;
    for (mode, _, group) in &attackers {
        wait_hook_called(&host, &widgets(ns.client(), ns.name(), group, "v1"), group, mode).await?;
    }
    let pid = host.pid().context("the host runs")?;
    let baseline = rss_mib(pid)?;
    kubewasm_tests::process::reset_peak_rss(pid)?;

    // Every attacker is called again and again (four at a time each) while the calm plugin's
    // Widgets are created one after another.
    let (client, namespace) = (ns.client().clone(), ns.name().to_owned());
    let hammering: Vec<_> = attackers
        .iter()
        .flat_map(|(mode, _, group)| {
            let (client, namespace) = (client.clone(), namespace.clone());
            (0..4).map(move |worker| {
                let api = widgets(&client, &namespace, group, "v1");
                let (group, mode) = (group.clone(), *mode);
                tokio::spawn(async move {
                    let mut answers = Vec::new();
                    for round in 0..3 {
                        let answer = api.create(&PostParams::default(), &widget(&group, "v1", &format!("{mode}-{worker}-{round}"), json!({ "size": 1 }))).await;
                        answers.push(answer.map(drop).map_err(|e| e.to_string()));
                    }
                    answers
                })
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for i in 0..40 {
        let started = Instant::now();
        calm.create(&PostParams::default(), &widget(&calm_group, "v1", &format!("calm-{i}"), json!({ "size": 2 }))).await.context("a calm Widget")?;
        slowest = slowest.max(started.elapsed());
    }
    let mut answers: Vec<(usize, Result<(), String>)> = Vec::new();
    for (i, task) in hammering.into_iter().enumerate() {
        answers.extend(task.await?.into_iter().map(|a| (i / 4, a)));
    }
    let peak = kubewasm_tests::process::peak_rss_bytes(pid).context("the host is gone")? as f64 / (1 << 20) as f64;
    for (i, (mode, policy, _)) in attackers.iter().enumerate() {
        for (_, answer) in answers.iter().filter(|(a, _)| *a == i) {
            match (*policy, answer) {
                ("fail", Err(message)) => ensure!(message.contains(&format!("of plugin \"{mode}\" failed")), "{mode}: refused with {message}"),
                ("ignore", Ok(())) => {}
                (_, answer) => return Err(anyhow!("{mode} ({policy}): answered {answer:?}")),
            }
        }
        let outcome = if *policy == "fail" { "failed-closed" } else { "failed-open" };
        let counted = host.metric("kubewasm_webhook_answers_total", &[("plugin", mode), ("outcome", outcome)]).await?;
        ensure!(counted >= 1.0, "{mode}: no {outcome} answer counted");
    }
    ensure!(slowest < Duration::from_secs(2), "a calm Widget took {slowest:?} beside the attackers");
    ensure!(peak - baseline < BOUNDARY_RSS_GROWTH, "the host's resident memory grew from {baseline:.0} to {peak:.0} MiB");
    eprintln!("hooks: the calm plugin's slowest create took {slowest:?} beside the attackers; host RSS {baseline:.0} MiB before, {peak:.0} MiB at its peak");
    host.stop().await?;
    Ok(())
}
