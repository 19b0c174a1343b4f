//! The host's Prometheus metrics: one [`Registry`], the metric families registered in it by name,
//! and the per-controller handles resolved from them ([`WorkqueueMetrics`]). Components record
//! through handles they were given; this module does not know queues, plugins or HTTP, and it
//! only reads live state through the [`Refresh`] hooks components register.

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
    refreshers: Refreshers,
}

impl Metrics {
    /// The media type of [`Metrics::encode`]'s output, for the `/metrics` response.
    pub const CONTENT_TYPE: &'static str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

    pub fn new() -> Self {
        let mut registry = Registry::default();
        let workqueue = WorkqueueFamilies::register(&mut registry);
        Metrics { registry, workqueue, refreshers: Refreshers::default() }
    }

    /// The workqueue handles for one controller. Resolved once per queue because looking a label
    /// set up in a family takes a lock and a hash, too slow for every queue operation.
    pub fn workqueue(&self, name: &str) -> WorkqueueMetrics {
        let labels = ControllerLabels { name: name.to_owned(), controller: name.to_owned() };
        let f = &self.workqueue;
        WorkqueueMetrics {
            depth: f.depth.get_or_create_owned(&labels),
            adds: f.adds.get_or_create_owned(&labels),
            queue_duration: f.queue_duration.get_or_create_owned(&labels),
            work_duration: f.work_duration.get_or_create_owned(&labels),
            retries: f.retries.get_or_create_owned(&labels),
            unfinished_work: f.unfinished_work.get_or_create_owned(&labels),
            longest_running_processor: f.longest_running_processor.get_or_create_owned(&labels),
            refreshers: self.refreshers.clone(),
        }
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
    depth: Family<ControllerLabels, Gauge>,
    adds: Family<ControllerLabels, Counter>,
    queue_duration: Family<ControllerLabels, Histogram>,
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
    pub(crate) depth: Gauge,
    pub(crate) adds: Counter,
    pub(crate) queue_duration: Histogram,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_every_workqueue_series_with_the_controller_labels() {
        let metrics = Metrics::new();
        let queue = metrics.workqueue("foo");
        queue.adds.inc();
        queue.retries.inc();
        let text = metrics.encode();
        let labels = r#"name="foo",controller="foo""#;
        for series in [
            "workqueue_depth",
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
