//! The host's Prometheus metrics: one [`Registry`], the metric families registered in it by name,
//! and the per-controller handles resolved from them ([`WorkqueueMetrics`]). Components record
//! through handles they were given, with plain labels; this module does not know queues,
//! controllers, plugins or HTTP, and it only reads live state through the [`Refresh`] hooks
//! components register.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// All of the host's metrics. Shared (behind an `Arc`) by everything that records or serves them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    workqueue: WorkqueueFamilies,
    controller: ControllerFamilies,
    plugin: PluginFamilies,
    host: HostFamilies,
    shard: ShardFamilies,
    informer: InformerFamilies,
    webhook: WebhookFamilies,
    certs: CertMetrics,
    refreshers: Refreshers,
}

impl Metrics {
    /// The media type of [`Metrics::encode`]'s output, for the `/metrics` response.
    pub const CONTENT_TYPE: &'static str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

    pub fn new() -> Self {
        let mut registry = Registry::default();
        let workqueue = WorkqueueFamilies::register(&mut registry);
        let controller = ControllerFamilies::register(&mut registry);
        let plugin = PluginFamilies::register(&mut registry);
        let host = HostFamilies::register(&mut registry);
        let shard = ShardFamilies::register(&mut registry);
        let informer = InformerFamilies::register(&mut registry);
        let webhook = WebhookFamilies::register(&mut registry);
        let certs = CertMetrics::register(&mut registry);
        Metrics { registry, workqueue, controller, plugin, host, shard, informer, webhook, certs, refreshers: Refreshers::default() }
    }

    /// The workqueue handles for one controller. Resolved once per queue because looking a label
    /// set up in a family takes a lock and a hash, too slow for every queue operation.
    pub fn workqueue(&self, name: &str) -> WorkqueueMetrics {
        let labels = ControllerLabels { name: name.to_owned(), controller: name.to_owned() };
        let f = &self.workqueue;
        let by_priority = |priority: Priority| PriorityLabels { name: name.to_owned(), controller: name.to_owned(), priority: priority.label().to_owned() };
        WorkqueueMetrics {
            depth: Priority::ALL.map(|p| f.depth.get_or_create_owned(&by_priority(p))),
            adds: f.adds.get_or_create_owned(&labels),
            queue_duration: Priority::ALL.map(|p| f.queue_duration.get_or_create_owned(&by_priority(p))),
            starved: f.starved.get_or_create_owned(&labels),
            work_duration: f.work_duration.get_or_create_owned(&labels),
            retries: f.retries.get_or_create_owned(&labels),
            unfinished_work: f.unfinished_work.get_or_create_owned(&labels),
            longest_running_processor: f.longest_running_processor.get_or_create_owned(&labels),
            refreshers: self.refreshers.clone(),
        }
    }

    /// The `controller_runtime_*` handles for one controller.
    pub fn controller(&self, name: &str) -> ControllerMetrics {
        let labels = OnlyController { controller: name.to_owned() };
        let result =
            |result: &str| self.controller.reconcile_total.get_or_create_owned(&ResultLabels { controller: name.to_owned(), result: result.to_owned() });
        let f = &self.controller;
        ControllerMetrics {
            success: result("success"),
            error: result("error"),
            requeue_after: result("requeue_after"),
            errors: f.reconcile_errors.get_or_create_owned(&labels),
            reconcile_time: f.reconcile_time.get_or_create_owned(&labels),
            max_concurrent: f.max_concurrent.get_or_create_owned(&labels),
            active_workers: f.active_workers.get_or_create_owned(&labels),
            controller: name.to_owned(),
            reasons: self.plugin.reasons.clone(),
        }
    }

    /// The `kubewasm_plugin_*` handles for one plugin.
    pub fn plugin(&self, name: &str) -> PluginMetrics {
        let labels = PluginLabels { plugin: name.to_owned() };
        let fault = |kind: &str| self.plugin.faults.get_or_create_owned(&FaultLabels { plugin: name.to_owned(), kind: kind.to_owned() });
        let f = &self.plugin;
        PluginMetrics {
            faults: FaultCounters {
                trap: fault("trap"),
                deadline: fault("deadline"),
                stalled: fault("stalled"),
                memory: fault("memory"),
                oversized: fault("oversized"),
                instantiate: fault("instantiate"),
            },
            memory_bytes: f.memory_bytes.get_or_create_owned(&labels),
            memory_refusals: f.memory_refusals.get_or_create_owned(&labels),
            forbidden_calls: f.forbidden_calls.get_or_create_owned(&labels),
            instances: f.instances.get_or_create_owned(&labels),
            budget_waits: f.budget_waits.get_or_create_owned(&labels),
            log_dropped: f.log_dropped.get_or_create_owned(&labels),
            oversized_lists: f.oversized_lists.get_or_create_owned(&labels),
        }
    }

    /// `kubewasm_plugin_events_dropped_total` for one reporter (a plugin, or `""` for the
    /// host's own Events): lost to a full queue, the spam filter or lost leadership.
    pub fn events_dropped(&self, plugin: &str) -> Counter {
        self.plugin.events_dropped.get_or_create_owned(&PluginLabels { plugin: plugin.to_owned() })
    }

    /// `kubewasm_plugin_quarantined_objects` and `kubewasm_plugin_quarantines_total` for one
    /// plugin.
    pub fn quarantine(&self, plugin: &str) -> QuarantineMetrics {
        let labels = PluginLabels { plugin: plugin.to_owned() };
        QuarantineMetrics { objects: self.plugin.quarantined.get_or_create_owned(&labels), entered: self.plugin.quarantines.get_or_create_owned(&labels) }
    }

    /// `kubewasm_plugin_cluster_refusals_total` for one plugin in one member cluster.
    pub fn member_refused(&self, plugin: &str, cluster: &str) -> Counter {
        self.plugin.member_refusals.get_or_create_owned(&MemberLabels { plugin: plugin.to_owned(), cluster: cluster.to_owned() })
    }

    /// `kubewasm_member_refusals_total` for one reason a provider's member cluster was not
    /// engaged (a kubeconfig field refused, a name taken, ...).
    pub fn member_refusals(&self, reason: &str) -> Counter {
        self.host.member_refusals.get_or_create_owned(&OnlyReason { reason: reason.to_owned() })
    }

    /// `kubewasm_member_answers_refused_total` for one member cluster and reason.
    pub fn member_answers_refused(&self, cluster: &str, reason: &str) -> Counter {
        self.host.member_answers_refused.get_or_create_owned(&AnswerLabels { cluster: cluster.to_owned(), reason: reason.to_owned() })
    }

    /// controller-runtime's `controller_runtime_webhook_*` handles for one webhook path.
    pub fn webhook(&self, path: &str) -> WebhookMetrics {
        let labels = WebhookLabels { webhook: path.to_owned() };
        WebhookMetrics {
            latency: self.webhook.latency.get_or_create_owned(&labels),
            in_flight: self.webhook.in_flight.get_or_create_owned(&labels),
            requests: self.webhook.requests.clone(),
            webhook: path.to_owned(),
        }
    }

    /// `kubewasm_webhook_answers_total` for one hook of a plugin and one outcome: `allowed`,
    /// `denied`, `failed-open` or `failed-closed` (a fault answered by the failure policy),
    /// `gone` (a plugin no longer served).
    pub fn webhook_answers(&self, plugin: &str, hook: &str, outcome: &str) -> Counter {
        self.webhook.answers.get_or_create_owned(&HookLabels { plugin: plugin.to_owned(), hook: hook.to_owned(), outcome: outcome.to_owned() })
    }

    /// `kubewasm_plugin_rollbacks_total` for one plugin.
    pub fn rollbacks(&self, plugin: &str) -> Counter {
        self.plugin.rollbacks.get_or_create_owned(&PluginLabels { plugin: plugin.to_owned() })
    }

    /// `kubewasm_plugin_mapped_dropped_total`: watched objects left out of the plugin's full
    /// backlog of `map-related` calls (every primary is reconciled instead).
    pub fn mapped_dropped(&self, plugin: &str) -> Counter {
        self.plugin.mapped_dropped.get_or_create_owned(&PluginLabels { plugin: plugin.to_owned() })
    }

    /// `kubewasm_shadow_reconciles_total` for one plugin and result (`same`, `differs`,
    /// `error`, `fault`, `skipped`).
    pub fn shadow(&self, plugin: &str, result: &str) -> Counter {
        self.plugin.shadow.get_or_create_owned(&ReloadLabels { plugin: plugin.to_owned(), result: result.to_owned() })
    }

    /// `kubewasm_plugin_memory_budget_bytes`: the host's plugin memory budget and what is
    /// reserved of it (`state="total|reserved"`).
    pub fn memory_budget(&self, state: &str) -> Gauge {
        self.host.memory_budget.get_or_create_owned(&StateLabels { state: state.to_owned() })
    }

    /// `kubewasm_plugin_reloads_total` for one plugin and result (`loaded`, `reloaded`,
    /// `rejected`, `rolled_back`, `unloaded`).
    pub fn reloads(&self, plugin: &str, result: &str) -> Counter {
        self.plugin.reloads.get_or_create_owned(&ReloadLabels { plugin: plugin.to_owned(), result: result.to_owned() })
    }

    /// `leader_election_master_status` for a lease: 1 while this host leads.
    pub fn leader(&self, lease: &str) -> Gauge {
        self.host.leader.get_or_create_owned(&LeaseLabels { name: lease.to_owned() })
    }

    /// `kubewasm_leader_renew_duration_seconds` for a lease.
    pub fn leader_renew(&self, lease: &str) -> Histogram {
        self.host.leader_renew.get_or_create_owned(&LeaseLabels { name: lease.to_owned() })
    }

    /// `kubewasm_shard_objects`: the primaries a sharded plugin has on this replica.
    pub fn shard_objects(&self, plugin: &str) -> Gauge {
        self.shard.objects.get_or_create_owned(&PluginLabels { plugin: plugin.to_owned() })
    }

    /// `kubewasm_shard_handovers_total`: objects this replica handed over when asked to drain.
    pub fn shard_handovers(&self, plugin: &str) -> Counter {
        self.shard.handovers.get_or_create_owned(&PluginLabels { plugin: plugin.to_owned() })
    }

    /// `kubewasm_shard_member`: 1 while this replica holds its membership Lease in the ring.
    pub fn shard_member(&self, ring: &str) -> Gauge {
        self.shard.member.get_or_create_owned(&RingLabels { ring: ring.to_owned() })
    }

    /// `kubewasm_shard_assignments_total` for one action of the assigner (`assign`, `drain`,
    /// `move`, `child`).
    pub fn shard_assignments(&self, ring: &str, action: &str) -> Counter {
        self.shard.assignments.get_or_create_owned(&RingActionLabels { ring: ring.to_owned(), action: action.to_owned() })
    }

    /// `kubewasm_shard_ring_members`: the ring's shards by state, as the assigner sees them.
    pub fn shard_members(&self, ring: &str, state: &str) -> Gauge {
        self.shard.members.get_or_create_owned(&RingStateLabels { ring: ring.to_owned(), state: state.to_owned() })
    }

    /// `kubewasm_shard_assigner_objects`: the objects the assigner keeps metadata of.
    pub fn shard_assigner_objects(&self, ring: &str) -> Gauge {
        self.shard.assigner_objects.get_or_create_owned(&RingLabels { ring: ring.to_owned() })
    }

    /// The `kubewasm_informer_*` handles: what the shared informers cache, set at scrape time.
    pub fn informers(&self) -> InformerMetrics {
        self.informers_in("")
    }

    /// The `kubewasm_informer_*` handles of a member cluster's informers.
    pub fn informers_in(&self, cluster: &str) -> InformerMetrics {
        InformerMetrics { families: self.informer.clone(), refreshers: self.refreshers.clone(), cluster: cluster.into() }
    }

    /// The `certwatcher_*` counters of the webhook server's certificate.
    pub fn certs(&self) -> CertMetrics {
        self.certs.clone()
    }

    /// The Prometheus text exposition (OpenMetrics flavour, ending in `# EOF`) of every metric,
    /// after letting registered components refresh the gauges computed from live state.
    pub fn encode(&self) -> String {
        self.refreshers.refresh_all();
        let mut out = String::new();
        text::encode(&mut out, &self.registry).expect("writing to a String does not fail");
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Something whose gauges are computed from its live state at scrape time rather than kept up to
/// date on every operation (e.g. "how long have the in-flight items been running").
pub trait Refresh: Send + Sync {
    fn refresh(&self);
}

/// The registered [`Refresh`] hooks. Held weakly so a component that goes away simply stops
/// being refreshed; dead entries are pruned at the next scrape.
#[derive(Clone, Default)]
struct Refreshers(Arc<Mutex<Vec<Weak<dyn Refresh>>>>);

impl Refreshers {
    fn register(&self, hook: Weak<dyn Refresh>) {
        let mut hooks = self.0.lock();
        // Pruned here too, so hooks of short-lived components do not pile up between scrapes.
        hooks.retain(|hook| hook.strong_count() > 0);
        hooks.push(hook);
    }

    fn refresh_all(&self) {
        self.0.lock().retain(|hook| match hook.upgrade() {
            Some(live) => {
                live.refresh();
                true
            }
            None => false,
        });
    }
}

impl std::fmt::Debug for Refreshers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Refreshers").field("hooks", &self.0.lock().len()).finish()
    }
}

/// controller-runtime labels its per-controller series with both `name` and `controller`, both
/// set to the controller's name; dashboards written for it select on either.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    name: String,
    controller: String,
}

/// [`ControllerLabels`] and a queue priority, as controller-runtime's priority queue labels its
/// depth: `0` for live changes, `-100` for list and resync work.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PriorityLabels {
    name: String,
    controller: String,
    priority: String,
}

type SecondsGauge = Gauge<f64, AtomicU64>;

/// controller-runtime's workqueue histogram buckets: `ExponentialBuckets(10e-9, 10, 12)`,
/// 10 ns to 1000 s.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-9, 10.0, 12))
}

/// The `workqueue_*` families, named as client-go/controller-runtime name them. Counters are
/// registered without `_total` and seconds-valued series with [`Unit::Seconds`]: the encoder
/// appends the suffixes, so the exposed names come out exactly as controller-runtime's.
#[derive(Debug)]
struct WorkqueueFamilies {
    depth: Family<PriorityLabels, Gauge>,
    adds: Family<ControllerLabels, Counter>,
    queue_duration: Family<PriorityLabels, Histogram>,
    starved: Family<ControllerLabels, Counter>,
    work_duration: Family<ControllerLabels, Histogram>,
    retries: Family<ControllerLabels, Counter>,
    unfinished_work: Family<ControllerLabels, SecondsGauge>,
    longest_running_processor: Family<ControllerLabels, SecondsGauge>,
}

impl WorkqueueFamilies {
    /// Help texts are client-go's, minus the final period the encoder appends.
    fn register(registry: &mut Registry) -> Self {
        let families = WorkqueueFamilies {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            starved: Family::default(),
            work_duration: Family::new_with_constructor(duration_histogram),
            retries: Family::default(),
            unfinished_work: Family::default(),
            longest_running_processor: Family::default(),
        };
        registry.register("workqueue_depth", "Current depth of workqueue", families.depth.clone());
        registry.register("workqueue_adds", "Total number of adds handled by workqueue", families.adds.clone());
        registry.register_with_unit(
            "workqueue_queue_duration",
            "How long in seconds an item stays in workqueue before being requested",
            Unit::Seconds,
            families.queue_duration.clone(),
        );
        registry.register_with_unit(
            "workqueue_work_duration",
            "How long in seconds processing an item from workqueue takes",
            Unit::Seconds,
            families.work_duration.clone(),
        );
        registry.register("workqueue_retries", "Total number of retries handled by workqueue", families.retries.clone());
        registry.register(
            "workqueue_starved",
            "Keys handed out only because they had waited longer than the queue's aging bound (--max-queue-wait) behind live changes",
            families.starved.clone(),
        );
        registry.register_with_unit(
            "workqueue_unfinished_work",
            "How many seconds of work has been done that is in progress and hasn't been observed by \
             work_duration. Large values indicate stuck threads. One can deduce the number of stuck \
             threads by observing the rate at which this increases",
            Unit::Seconds,
            families.unfinished_work.clone(),
        );
        registry.register_with_unit(
            "workqueue_longest_running_processor",
            "How many seconds has the longest running processor for workqueue been running",
            Unit::Seconds,
            families.longest_running_processor.clone(),
        );
        families
    }
}

/// One controller's workqueue series, resolved. Cheap to clone: every field is a shared handle.
#[derive(Debug, Clone)]
pub struct WorkqueueMetrics {
    /// By [`Priority`].
    pub(crate) depth: [Gauge; 2],
    pub(crate) adds: Counter,
    pub(crate) queue_duration: [Histogram; 2],
    pub(crate) starved: Counter,
    pub(crate) work_duration: Histogram,
    pub(crate) retries: Counter,
    pub(crate) unfinished_work: SecondsGauge,
    pub(crate) longest_running_processor: SecondsGauge,
    refreshers: Refreshers,
}

impl WorkqueueMetrics {
    /// Asks for `hook` to be refreshed before every scrape, for as long as it lives.
    pub(crate) fn refresh_on_scrape(&self, hook: Weak<dyn Refresh>) {
        self.refreshers.register(hook);
    }
}

/// A workqueue's two lanes: live changes first, list and resync work behind them (until it ages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Live = 0,
    Background = 1,
}

impl Priority {
    pub const ALL: [Priority; 2] = [Priority::Live, Priority::Background];

    /// controller-runtime's numbers for the two.
    fn label(self) -> &'static str {
        match self {
            Priority::Live => "0",
            Priority::Background => "-100",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OnlyController {
    controller: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

/// The handles of one webhook path.
#[derive(Debug, Clone)]
pub struct WebhookMetrics {
    pub latency: Histogram,
    pub in_flight: Gauge,
    requests: Family<WebhookCodeLabels, Counter>,
    webhook: String,
}

impl WebhookMetrics {
    /// Counts a request answered with HTTP status `code`.
    pub fn answered(&self, code: u16) {
        self.requests.get_or_create(&WebhookCodeLabels { webhook: self.webhook.clone(), code: code.to_string() }).inc();
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    webhook: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookCodeLabels {
    webhook: String,
    code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    plugin: String,
    hook: String,
    outcome: String,
}

/// The webhook server's families: controller-runtime's names, and kubewasm's per hook.
#[derive(Debug)]
struct WebhookFamilies {
    requests: Family<WebhookCodeLabels, Counter>,
    latency: Family<WebhookLabels, Histogram>,
    in_flight: Family<WebhookLabels, Gauge>,
    answers: Family<HookLabels, Counter>,
}

impl WebhookFamilies {
    fn register(registry: &mut Registry) -> Self {
        let families = WebhookFamilies {
            requests: Family::default(),
            latency: Family::new_with_constructor(webhook_histogram),
            in_flight: Family::default(),
            answers: Family::default(),
        };
        registry.register("controller_runtime_webhook_requests", "Total number of admission requests by HTTP status code", families.requests.clone());
        registry.register_with_unit(
            "controller_runtime_webhook_latency",
            "Histogram of the latency of processing admission requests",
            Unit::Seconds,
            families.latency.clone(),
        );
        registry.register("controller_runtime_webhook_requests_in_flight", "Current number of admission requests being served", families.in_flight.clone());
        registry.register(
            "kubewasm_webhook_answers",
            "Answers of plugins' hooks by outcome: allowed, denied, failed-open or failed-closed (the plugin faulted and the hook's failure policy answered), gone (the plugin is no longer served)",
            families.answers.clone(),
        );
        families
    }
}

/// controller-runtime's webhook latency buckets (Prometheus' defaults).
fn webhook_histogram() -> Histogram {
    Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
}

/// controller-runtime's reconcile time buckets.
fn reconcile_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
        6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
    ])
}

/// The `controller_runtime_*` families, named and labelled as controller-runtime's.
#[derive(Debug)]
struct ControllerFamilies {
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<OnlyController, Counter>,
    reconcile_time: Family<OnlyController, Histogram>,
    max_concurrent: Family<OnlyController, Gauge>,
    active_workers: Family<OnlyController, Gauge>,
}

impl ControllerFamilies {
    fn register(registry: &mut Registry) -> Self {
        let families = ControllerFamilies {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_histogram),
            max_concurrent: Family::default(),
            active_workers: Family::default(),
        };
        registry.register("controller_runtime_reconcile", "Total number of reconciliations per controller", families.reconcile_total.clone());
        registry.register("controller_runtime_reconcile_errors", "Total number of reconciliation errors per controller", families.reconcile_errors.clone());
        registry.register_with_unit(
            "controller_runtime_reconcile_time",
            "Length of time per reconciliation per controller",
            Unit::Seconds,
            families.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            families.max_concurrent.clone(),
        );
        registry.register("controller_runtime_active_workers", "Number of currently used workers per controller", families.active_workers.clone());
        families
    }
}

/// One controller's `controller_runtime_*` series, resolved.
#[derive(Debug, Clone)]
pub struct ControllerMetrics {
    success: Counter,
    error: Counter,
    requeue_after: Counter,
    errors: Counter,
    pub reconcile_time: Histogram,
    pub max_concurrent: Gauge,
    pub active_workers: Gauge,
    controller: String,
    reasons: Family<ReasonLabels, Counter>,
}

impl ControllerMetrics {
    /// Counts a successful reconcile.
    pub fn count_success(&self) {
        self.success.inc();
    }

    /// Counts a successful reconcile that asked to be called again.
    pub fn count_requeue_after(&self) {
        self.requeue_after.inc();
    }

    /// Counts a failed reconcile.
    pub fn count_error(&self) {
        self.errors.inc();
        self.error.inc();
    }

    /// Counts a reconcile under why its key was queued (`kubewasm_reconcile_reasons_total`).
    pub fn count_reason(&self, reason: &str) {
        self.reasons.get_or_create(&ReasonLabels { controller: self.controller.clone(), reason: reason.to_owned() }).inc();
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberLabels {
    plugin: String,
    cluster: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    plugin: String,
    kind: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    plugin: String,
    result: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    controller: String,
    reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

/// The `kubewasm_plugin_*` families.
#[derive(Debug)]
struct PluginFamilies {
    faults: Family<FaultLabels, Counter>,
    memory_bytes: Family<PluginLabels, Gauge>,
    memory_refusals: Family<PluginLabels, Counter>,
    forbidden_calls: Family<PluginLabels, Counter>,
    instances: Family<PluginLabels, Gauge>,
    budget_waits: Family<PluginLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    log_dropped: Family<PluginLabels, Counter>,
    events_dropped: Family<PluginLabels, Counter>,
    mapped_dropped: Family<PluginLabels, Counter>,
    oversized_lists: Family<PluginLabels, Counter>,
    reasons: Family<ReasonLabels, Counter>,
    quarantined: Family<PluginLabels, Gauge>,
    quarantines: Family<PluginLabels, Counter>,
    rollbacks: Family<PluginLabels, Counter>,
    member_refusals: Family<MemberLabels, Counter>,
    shadow: Family<ReloadLabels, Counter>,
}

impl PluginFamilies {
    fn register(registry: &mut Registry) -> Self {
        let families = PluginFamilies {
            faults: Family::default(),
            memory_bytes: Family::default(),
            memory_refusals: Family::default(),
            forbidden_calls: Family::default(),
            instances: Family::default(),
            budget_waits: Family::default(),
            reloads: Family::default(),
            log_dropped: Family::default(),
            events_dropped: Family::default(),
            mapped_dropped: Family::default(),
            oversized_lists: Family::default(),
            reasons: Family::default(),
            quarantined: Family::default(),
            quarantines: Family::default(),
            rollbacks: Family::default(),
            member_refusals: Family::default(),
            shadow: Family::default(),
        };
        registry.register(
            "kubewasm_plugin_faults",
            "Plugin calls stopped by the host, by kind: trap, deadline (its own time), stalled (waiting on host calls past the wall-clock backstop), memory, oversized, instantiate",
            families.faults.clone(),
        );
        registry.register_with_unit("kubewasm_plugin_memory", "Linear memory held by the plugin's live instances", Unit::Bytes, families.memory_bytes.clone());
        registry.register(
            "kubewasm_plugin_memory_limit_hits",
            "Memory growths refused because they would pass the plugin's memory limit",
            families.memory_refusals.clone(),
        );
        registry.register(
            "kubewasm_plugin_forbidden_calls",
            "Host calls refused because the plugin's manifest does not grant them",
            families.forbidden_calls.clone(),
        );
        registry.register("kubewasm_plugin_instances", "Live instances of the plugin", families.instances.clone());
        registry.register("kubewasm_plugin_reloads", "Plugin loads, reloads, rejected versions and unloads, by result", families.reloads.clone());
        registry.register(
            "kubewasm_plugin_log_records_dropped",
            "Log records (and stdout/stderr lines) dropped because the plugin was over its log budget",
            families.log_dropped.clone(),
        );
        registry.register(
            "kubewasm_plugin_events_dropped",
            "Events dropped: the plugin's queue was full, the per-object spam filter refused them, or the host stopped leading (plugin=\"\" for the host's own)",
            families.events_dropped.clone(),
        );
        registry.register(
            "kubewasm_plugin_mapped_dropped",
            "Watched objects not mapped one by one with map-related because the plugin's backlog of them was full (every primary is reconciled instead)",
            families.mapped_dropped.clone(),
        );
        registry.register(
            "kubewasm_plugin_budget_waits",
            "Calls that waited for one of the plugin's instances because the plugin memory budget had no room for another",
            families.budget_waits.clone(),
        );
        registry.register(
            "kubewasm_plugin_oversized_lists",
            "list-objects calls refused because the answer would pass the plugin's bound",
            families.oversized_lists.clone(),
        );
        registry.register(
            "kubewasm_reconcile_reasons",
            "Reconciles by why their key was queued: changed, owned, mapped, released, resync, retry, requeue",
            families.reasons.clone(),
        );
        registry.register(
            "kubewasm_plugin_quarantined_objects",
            "Objects the plugin faulted on too many times in a row, set aside until they or the plugin change",
            families.quarantined.clone(),
        );
        registry.register("kubewasm_plugin_quarantines", "Objects put in quarantine, each time one entered it", families.quarantines.clone());
        registry.register(
            "kubewasm_plugin_cluster_refusals",
            "Times the plugin could not start (or take a new version) in a member cluster in its scope: refused by admission there, or the cluster did not answer (retried)",
            families.member_refusals.clone(),
        );
        registry.register(
            "kubewasm_plugin_rollbacks",
            "Hot-reloaded versions swapped back to the version before because they failed on clearly more objects",
            families.rollbacks.clone(),
        );
        registry.register(
            "kubewasm_shadow_reconciles",
            "Reconciles a candidate version replayed in the shadow of the live one, by how they compared: same, differs, error, fault, or skipped (the live version moved on faster than the shadow's share of time allowed)",
            families.shadow.clone(),
        );
        families
    }
}

/// One plugin's `kubewasm_plugin_*` series, recorded by the runtime. `Default` gives unregistered
/// handles, for runs without a registry (tests, `kubewasm check`).
#[derive(Clone, Default)]
pub struct PluginMetrics {
    pub faults: FaultCounters,
    pub memory_bytes: Gauge,
    pub memory_refusals: Counter,
    pub forbidden_calls: Counter,
    pub instances: Gauge,
    /// Calls that waited for an instance: the memory budget had no room for another.
    pub budget_waits: Counter,
    pub log_dropped: Counter,
    pub oversized_lists: Counter,
}

/// One plugin's quarantine series. `Default` gives unregistered handles.
#[derive(Clone, Default)]
pub struct QuarantineMetrics {
    /// Objects quarantined now.
    pub objects: Gauge,
    /// Entries into quarantine.
    pub entered: Counter,
}

/// `kubewasm_plugin_faults_total` by kind.
#[derive(Clone, Default)]
pub struct FaultCounters {
    pub trap: Counter,
    pub deadline: Counter,
    pub stalled: Counter,
    pub memory: Counter,
    pub oversized: Counter,
    pub instantiate: Counter,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

/// Host-wide families.
#[derive(Debug)]
struct HostFamilies {
    leader: Family<LeaseLabels, Gauge>,
    leader_renew: Family<LeaseLabels, Histogram>,
    memory_budget: Family<StateLabels, Gauge>,
    member_refusals: Family<OnlyReason, Counter>,
    member_answers_refused: Family<AnswerLabels, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OnlyReason {
    reason: String,
}

impl HostFamilies {
    fn register(registry: &mut Registry) -> Self {
        let families = HostFamilies {
            leader: Family::default(),
            leader_renew: Family::new_with_constructor(reconcile_histogram),
            memory_budget: Family::default(),
            member_refusals: Family::default(),
            member_answers_refused: Family::default(),
        };
        registry.register("leader_election_master_status", "Whether this host is the leader of the lease (1) or not (0)", families.leader.clone());
        registry.register_with_unit(
            "kubewasm_leader_renew_duration",
            "Length of time each renewal of a lease this host leads under took, from its start to the API server's answer",
            Unit::Seconds,
            families.leader_renew.clone(),
        );
        registry.register_with_unit(
            "kubewasm_plugin_memory_budget",
            "The host's budget of plugin linear memory (state=total) and what plugins reserved of it (state=reserved)",
            Unit::Bytes,
            families.memory_budget.clone(),
        );
        registry.register(
            "kubewasm_member_refusals",
            "Times a member cluster a provider offered (a kubeconfig file or Secret) was not engaged, by reason: a kubeconfig field that is a program, a file, an impersonation, a proxy, a server that is not https or insecure TLS; a name that is taken or invalid; labels or a kubeconfig that do not parse",
            families.member_refusals.clone(),
        );
        registry.register(
            "kubewasm_member_answers_refused",
            "Answers of a member cluster's API server refused, by cluster and reason: body (over --member-max-body), watch-line (over --member-max-watch-line), deadline (a request not answered whole within --request-timeout), idle (a watch without a whole line for long)",
            families.member_answers_refused.clone(),
        );
        families
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnswerLabels {
    cluster: String,
    reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RingLabels {
    ring: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RingActionLabels {
    ring: String,
    action: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RingStateLabels {
    ring: String,
    state: String,
}

/// The `kubewasm_shard_*` families.
#[derive(Debug)]
struct ShardFamilies {
    objects: Family<PluginLabels, Gauge>,
    handovers: Family<PluginLabels, Counter>,
    member: Family<RingLabels, Gauge>,
    assignments: Family<RingActionLabels, Counter>,
    members: Family<RingStateLabels, Gauge>,
    assigner_objects: Family<RingLabels, Gauge>,
}

impl ShardFamilies {
    fn register(registry: &mut Registry) -> Self {
        let families = ShardFamilies {
            objects: Family::default(),
            handovers: Family::default(),
            member: Family::default(),
            assignments: Family::default(),
            members: Family::default(),
            assigner_objects: Family::default(),
        };
        registry.register("kubewasm_shard_objects", "Primary objects of a sharded plugin cached on this replica (its share)", families.objects.clone());
        registry.register(
            "kubewasm_shard_handovers",
            "Objects this replica handed over (drain acknowledged: shard and drain labels removed)",
            families.handovers.clone(),
        );
        registry.register("kubewasm_shard_member", "Whether this replica holds its membership Lease in the ring (1) or not (0)", families.member.clone());
        registry.register(
            "kubewasm_shard_assignments",
            "Label writes of the ring's assigner: assign (unassigned object), drain (asked its shard to hand it over), move (taken from an unavailable shard), child (an owned object following its controller)",
            families.assignments.clone(),
        );
        registry.register("kubewasm_shard_ring_members", "The ring's shards by state, as the assigner sees them", families.members.clone());
        registry.register("kubewasm_shard_assigner_objects", "Objects whose metadata the assigner keeps", families.assigner_objects.clone());
        families
    }
}

/// The `kubewasm_informer_*` families.
#[derive(Debug, Clone, Default)]
struct InformerFamilies {
    objects: Family<InformerLabels, Gauge>,
    bytes: Family<InformerLabels, Gauge>,
}

impl InformerFamilies {
    fn register(registry: &mut Registry) -> Self {
        let families = InformerFamilies::default();
        registry.register(
            "kubewasm_informer_objects",
            "Objects in each shared informer's cache, by resource, namespace (empty: all), the selector the API server applies (empty: none) and content (objects: whole objects; metadata: a metadata-only watch)",
            families.objects.clone(),
        );
        registry.register_with_unit("kubewasm_informer_cache", "Approximate heap bytes of each shared informer's cache", Unit::Bytes, families.bytes.clone());
        families
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InformerLabels {
    /// The member cluster; empty for the host's own.
    cluster: String,
    resource: String,
    namespace: String,
    selector: String,
    content: String,
}

/// What the informers report: the whole set at each scrape, from their live state.
#[derive(Debug, Clone)]
pub struct InformerMetrics {
    families: InformerFamilies,
    refreshers: Refreshers,
    /// Whose informers these are: a member cluster's name, empty for the host's own.
    cluster: String,
}

impl Default for InformerMetrics {
    /// Handles registered nowhere (tests, one-shot commands).
    fn default() -> Self {
        InformerMetrics { families: InformerFamilies::default(), refreshers: Refreshers::default(), cluster: String::new() }
    }
}

impl InformerMetrics {
    /// Asks for `hook` to be refreshed before every scrape, for as long as it lives.
    pub(crate) fn refresh_on_scrape(&self, hook: Weak<dyn Refresh>) {
        self.refreshers.register(hook);
    }

    /// Forgets every informer's figures: a refresh then sets those of the informers still running.
    /// Only the host's own informers clear: theirs refresh first (registered at start, before any
    /// member's), so the members' that refresh after them set theirs again, and a disengaged
    /// member's figures are gone at the next scrape.
    pub(crate) fn clear(&self) {
        if self.cluster.is_empty() {
            self.families.objects.clear();
            self.families.bytes.clear();
        }
    }

    /// One informer's figures: its resource, its (namespace, server-side selector), whether it
    /// caches only its objects' metadata.
    pub(crate) fn set(&self, resource: &str, (namespace, selector): (&str, &str), metadata_only: bool, objects: usize, bytes: usize) {
        let content = if metadata_only { "metadata" } else { "objects" };
        let labels = InformerLabels {
            cluster: self.cluster.clone(),
            resource: resource.to_owned(),
            namespace: namespace.to_owned(),
            selector: selector.to_owned(),
            content: content.to_owned(),
        };
        self.families.objects.get_or_create(&labels).set(i64::try_from(objects).unwrap_or(i64::MAX));
        self.families.bytes.get_or_create(&labels).set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}

/// controller-runtime's certwatcher counters, for the webhook server's certificate: every read of
/// it (from its files, or from the Secret the host keeps it in) and the failed ones. `Default`
/// gives unregistered handles.
#[derive(Debug, Clone, Default)]
pub struct CertMetrics {
    pub reads: Counter,
    pub read_errors: Counter,
}

impl CertMetrics {
    /// Help texts are controller-runtime's.
    fn register(registry: &mut Registry) -> Self {
        let certs = CertMetrics::default();
        registry.register("certwatcher_read_certificate", "Total number of certificate reads", certs.reads.clone());
        registry.register("certwatcher_read_certificate_errors", "Total number of certificate read errors", certs.read_errors.clone());
        certs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_every_workqueue_series_with_the_controller_labels() {
        let metrics = Metrics::new();
        let queue = metrics.workqueue("foo");
        queue.adds.inc();
        queue.retries.inc();
        queue.starved.inc();
        let text = metrics.encode();
        let labels = r#"name="foo",controller="foo""#;
        assert!(text.contains(r#"workqueue_depth{name="foo",controller="foo",priority="-100"} 0"#), "{text}");
        for series in [
            "workqueue_depth",
            "workqueue_starved_total",
            "workqueue_adds_total",
            "workqueue_queue_duration_seconds_bucket",
            "workqueue_queue_duration_seconds_count",
            "workqueue_work_duration_seconds_sum",
            "workqueue_retries_total",
            "workqueue_unfinished_work_seconds",
            "workqueue_longest_running_processor_seconds",
        ] {
            let line = text.lines().find(|l| l.starts_with(series)).unwrap_or_else(|| panic!("{series} in:\n{text}"));
            assert!(line.contains(labels), "{line}");
        }
        assert!(text.contains(&format!("workqueue_adds_total{{{labels}}} 1\n")), "{text}");
        // controller-runtime's smallest and largest buckets.
        assert!(text.contains(r#"workqueue_work_duration_seconds_bucket{le="1e-8","#), "{text}");
        assert!(text.contains(r#"workqueue_work_duration_seconds_bucket{le="1000.0","#), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn refreshes_live_hooks_before_encoding_and_drops_dead_ones() {
        struct SetsGauge(SecondsGauge);
        impl Refresh for SetsGauge {
            fn refresh(&self) {
                self.0.set(2.5);
            }
        }
        let metrics = Metrics::new();
        let queue = metrics.workqueue("bar");
        let hook: Arc<dyn Refresh> = Arc::new(SetsGauge(queue.unfinished_work.clone()));
        queue.refresh_on_scrape(Arc::downgrade(&hook));
        assert!(metrics.encode().contains(r#"workqueue_unfinished_work_seconds{name="bar",controller="bar"} 2.5"#));
        drop(hook);
        metrics.encode();
        assert!(metrics.refreshers.0.lock().is_empty());
    }
}
