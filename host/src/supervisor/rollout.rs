//! The rollout lifecycle: the policy (host flags, overridden per plugin in `NAME.toml`), the
//! [`Probation`] of a version just swapped in by a hot reload — watched for a window, the version
//! it replaced kept at hand with its memory reservation, so that a rollback always fits — and the
//! verdicts: when the new version is clearly worse and is rolled back, and when a candidate that
//! agreed with the live version in its shadow run is promoted. A plugin's slot acts on them.
//!
//! A version is judged by the share of the cached objects whose last reconcile by it failed (a
//! fault or an error result; see `controller::Health`): an object counts once however often it
//! is retried. The new version is rolled back when, with enough evidence, its share is at least
//! the threshold and at least [`MARGIN`] above the previous version's share (measured over its
//! life, when it was replaced). Objects every version fails on do not make a new one worse.

use std::time::Duration;

use tokio::time::Instant;

use crate::budget::Reservation;
use crate::controller::{Agreement, Health, ShadowReport};
use crate::plugin::PluginOptions;

/// Share of failing objects that rolls a new version back, unless told otherwise.
pub const DEFAULT_THRESHOLD: f64 = 0.5;
/// How much worse than the previous version a new one must be: objects that already failed
/// before are not the new version's doing.
pub const MARGIN: f64 = 0.25;
/// Reconciles a new version must have run before it is judged, unless told otherwise.
pub const DEFAULT_MIN_RECONCILES: u64 = 20;
/// How long a new version is watched (and the previous one kept to swap back to).
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(300);
/// How often a version on probation, and a candidate waiting for promotion, are looked at.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Share of failing objects that rolls back; 0 turns rollback off.
    pub threshold: f64,
    pub min_reconciles: u64,
    pub window: Duration,
    /// Agreeing shadow reconciles that promote a candidate; 0 never promotes automatically.
    pub promote_after: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { threshold: DEFAULT_THRESHOLD, min_reconciles: DEFAULT_MIN_RECONCILES, window: DEFAULT_WINDOW, promote_after: 0 }
    }
}

/// What to do about a new version now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Not enough evidence yet, or not worse yet: look again.
    Watch,
    /// The window is over: the new version stays, the previous one is let go.
    Keep,
    /// Clearly worse: swap the previous version back. The shares of failing objects.
    RollBack { before: f64, after: f64 },
}

impl Policy {
    /// This policy with a plugin's `[kubewasm]` overrides.
    pub fn for_plugin(&self, options: &PluginOptions) -> Policy {
        Policy {
            threshold: options.rollback_threshold.unwrap_or(self.threshold),
            min_reconciles: options.rollback_min_reconciles.unwrap_or(self.min_reconciles),
            window: self.window,
            promote_after: options.promote_after.unwrap_or(self.promote_after),
        }
    }

    pub fn is_off(&self) -> bool {
        self.threshold <= 0.0
    }

    /// Judges the new version (`after`, `elapsed` since it was swapped in) against the one it
    /// replaced (`before`). A controller with few objects cannot run `min_reconciles`
    /// reconciles: for it, two per object are enough evidence (a failing object has been
    /// retried once).
    pub fn judge(&self, before: &Health, after: &Health, elapsed: Duration) -> Verdict {
        let evidence = after.objects > 0 && after.reconciles >= self.min_reconciles.min(2 * after.objects as u64);
        let (before, after) = (failing_share(before), failing_share(after));
        if !self.is_off() && evidence && after >= self.threshold && after >= before + MARGIN {
            Verdict::RollBack { before, after }
        } else if elapsed >= self.window {
            Verdict::Keep
        } else {
            Verdict::Watch
        }
    }
}

/// A version just swapped in, on watch, and the version it replaced, to swap back to.
pub struct Probation<P> {
    pub previous: P,
    /// What the previous version had reserved, held until the window ends: a rollback never
    /// waits for memory.
    pub reservation: Reservation,
    /// How the previous version did over its life.
    baseline: Health,
    policy: Policy,
    /// The time judged so far: only time spent leading counts (a standby reconciles nothing).
    judged_for: Duration,
    last: Instant,
}

impl<P> Probation<P> {
    pub fn new(previous: P, reservation: Reservation, baseline: Health, policy: Policy, now: Instant) -> Self {
        Probation { previous, reservation, baseline, policy, judged_for: Duration::ZERO, last: now }
    }

    /// Counts the time since the last look (if this host led meanwhile) and judges `health`,
    /// the new version's.
    pub fn judge(&mut self, now: Instant, leading: bool, health: &Health) -> Verdict {
        if leading {
            self.judged_for += now.saturating_duration_since(self.last);
        }
        self.last = now;
        self.policy.judge(&self.baseline, health, self.judged_for)
    }
}

/// What to do about a candidate waiting for promotion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotion {
    /// Not enough agreeing reconciles yet.
    Wait,
    /// It agreed `after` times and never otherwise.
    Promote,
    /// It differed, erred or faulted: it is left for `kubewasm rollout promote`.
    Never,
}

/// Judges a candidate's shadow run against the agreeing reconciles `after` that promote it.
pub fn promotion(report: &ShadowReport, after: u64) -> Promotion {
    if [Agreement::Differs, Agreement::Error, Agreement::Fault].iter().any(|a| report.count(*a) > 0) {
        Promotion::Never
    } else if report.agreed(after) {
        Promotion::Promote
    } else {
        Promotion::Wait
    }
}

/// The share of cached objects a version fails on.
pub fn failing_share(health: &Health) -> f64 {
    if health.objects == 0 { 0.0 } else { (health.failing as f64 / health.objects as f64).min(1.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn health(reconciles: u64, failing: usize, objects: usize) -> Health {
        Health { reconciles, failing, objects }
    }

    #[test]
    fn a_version_failing_on_a_share_above_the_threshold_is_rolled_back() {
        let policy = Policy::default();
        let before = health(1000, 0, 10);
        assert_eq!(policy.judge(&before, &health(40, 6, 10), MINUTE), Verdict::RollBack { before: 0.0, after: 0.6 });
        // Below the threshold: watched until the window ends, then kept.
        assert_eq!(policy.judge(&before, &health(40, 4, 10), MINUTE), Verdict::Watch);
        assert_eq!(policy.judge(&before, &health(40, 4, 10), DEFAULT_WINDOW), Verdict::Keep);
    }

    #[test]
    fn not_before_enough_reconciles() {
        let policy = Policy::default();
        let before = health(1000, 0, 100);
        assert_eq!(policy.judge(&before, &health(19, 19, 100), MINUTE), Verdict::Watch);
        assert_eq!(policy.judge(&before, &health(20, 19, 100), MINUTE), Verdict::Watch, "19 of 100 objects is not half");
        assert_eq!(policy.judge(&before, &health(200, 60, 100), MINUTE), Verdict::RollBack { before: 0.0, after: 0.6 });
        // Few objects: two reconciles per object are enough.
        assert_eq!(policy.judge(&health(10, 0, 3), &health(5, 3, 3), MINUTE), Verdict::Watch);
        assert_eq!(policy.judge(&health(10, 0, 3), &health(6, 3, 3), MINUTE), Verdict::RollBack { before: 0.0, after: 1.0 });
        // No objects, no judgement.
        assert_eq!(policy.judge(&before, &health(100, 0, 0), MINUTE), Verdict::Watch);
    }

    #[test]
    fn only_clearly_worse_than_the_version_before() {
        let policy = Policy::default();
        // The previous version failed on 40% already: 60% is not a quarter worse.
        assert_eq!(policy.judge(&health(1000, 4, 10), &health(40, 6, 10), MINUTE), Verdict::Watch);
        assert_eq!(policy.judge(&health(1000, 4, 10), &health(40, 7, 10), MINUTE), Verdict::RollBack { before: 0.4, after: 0.7 });
    }

    #[test]
    fn probation_counts_leading_time_only() {
        let budget = crate::budget::MemoryBudget::new(100, crate::budget::Share::WHOLE, Default::default());
        let start = Instant::now();
        let mut probation = Probation::new((), budget.account("a").reserve_first(10).unwrap(), health(1000, 0, 10), Policy::default(), start);
        let fine = health(40, 0, 10);
        // Standing by for longer than the window: nothing judged yet.
        assert_eq!(probation.judge(start + DEFAULT_WINDOW * 2, false, &fine), Verdict::Watch);
        assert_eq!(probation.judge(start + DEFAULT_WINDOW * 2 + MINUTE, true, &fine), Verdict::Watch);
        assert_eq!(probation.judge(start + DEFAULT_WINDOW * 3, true, &fine), Verdict::Keep);
        assert_eq!(budget.reserved(), 10, "the previous version's reservation is held while on watch");
        drop(probation);
        assert_eq!(budget.reserved(), 0);
    }

    #[test]
    fn zero_turns_it_off_and_plugins_override_the_host() {
        let off = Policy { threshold: 0.0, ..Policy::default() };
        assert!(off.is_off());
        assert_eq!(off.judge(&health(100, 0, 10), &health(100, 10, 10), MINUTE), Verdict::Watch);
        let options = PluginOptions { rollback_threshold: Some(0.2), rollback_min_reconciles: Some(5), ..Default::default() };
        let policy = Policy::default().for_plugin(&options);
        assert_eq!(policy, Policy { threshold: 0.2, min_reconciles: 5, window: DEFAULT_WINDOW, promote_after: 0 });
        assert_eq!(policy.judge(&health(100, 0, 100), &health(5, 30, 100), MINUTE), Verdict::RollBack { before: 0.0, after: 0.3 });
        assert!(Policy::default().for_plugin(&PluginOptions { rollback_threshold: Some(0.0), ..Default::default() }).is_off());
    }
}
