//! How long a failed key waits before it is retried: client-go's `DefaultControllerRateLimiter`,
//! the max of a per-key exponential backoff and a token bucket shared by all keys of one queue.
//! The bucket is [`crate::bucket`]'s, which the host's other pacers (client QPS, event spam
//! filter, log budgets) share. Pure arithmetic on a `now` the caller passes in: no clock, no sleeping,
//! no locking.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::{Key, QueueError};
use crate::bucket::TokenBucket;

/// Retry pacing for one queue. The defaults are client-go's (`DefaultControllerRateLimiter`).
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimitConfig {
    /// The first retry's delay; each further failure of the same key doubles it.
    pub base_delay: Duration,
    /// The cap of the per-key backoff.
    pub max_delay: Duration,
    /// Sustained retries per second across all keys; `f64::INFINITY` disables the bucket.
    pub qps: f64,
    /// Retries allowed at once before `qps` pacing starts.
    pub burst: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig { base_delay: Duration::from_millis(5), max_delay: Duration::from_secs(1000), qps: 10.0, burst: 100 }
    }
}

impl RateLimitConfig {
    pub(crate) fn validate(&self) -> Result<(), QueueError> {
        // `qps` divides and `burst` bounds a reservation: zero would make every retry wait forever.
        if self.qps.is_nan() || self.qps <= 0.0 {
            return Err(QueueError::RateLimitQps(self.qps));
        }
        if self.burst == 0 {
            return Err(QueueError::RateLimitBurst);
        }
        Ok(())
    }
}

/// `MaxOfRateLimiter(ItemExponentialFailureRateLimiter, BucketRateLimiter)`.
#[derive(Debug)]
pub(crate) struct RateLimiter<K> {
    failures: HashMap<K, u32>,
    base_delay: Duration,
    max_delay: Duration,
    bucket: TokenBucket,
}

impl<K: Key> RateLimiter<K> {
    pub(crate) fn new(config: &RateLimitConfig) -> Self {
        RateLimiter { failures: HashMap::new(), base_delay: config.base_delay, max_delay: config.max_delay, bucket: TokenBucket::new(config.qps, config.burst) }
    }

    /// Records one more failure of `key` and returns how long its retry must wait.
    pub(crate) fn when(&mut self, key: &K, now: Instant) -> Duration {
        self.backoff(key).max(self.bucket.reserve(now))
    }

    /// `base_delay · 2^failures`, capped at `max_delay`; computed in floating point, as client-go
    /// does, so a long failure streak saturates instead of overflowing.
    fn backoff(&mut self, key: &K) -> Duration {
        let failures = match self.failures.get_mut(key) {
            Some(failures) => failures,
            None => self.failures.entry(key.clone()).or_default(),
        };
        let exponent = *failures;
        *failures = failures.saturating_add(1);
        let secs = self.base_delay.as_secs_f64() * 2f64.powf(f64::from(exponent));
        if secs >= self.max_delay.as_secs_f64() { self.max_delay } else { Duration::from_secs_f64(secs) }
    }

    /// Forgets `key`'s failures: its next failure starts again at `base_delay`. The bucket is
    /// shared by all keys and keeps its state.
    pub(crate) fn forget(&mut self, key: &K) {
        self.failures.remove(key);
    }

    pub(crate) fn num_requeues(&self, key: &K) -> u32 {
        self.failures.get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(config: RateLimitConfig) -> RateLimiter<&'static str> {
        RateLimiter::new(&config)
    }

    fn no_bucket() -> RateLimitConfig {
        RateLimitConfig { qps: f64::INFINITY, ..RateLimitConfig::default() }
    }

    #[test]
    fn backoff_doubles_from_5ms_caps_at_1000s_and_forget_resets_it() {
        let mut rl = limiter(no_bucket());
        let now = Instant::now();
        let delays: Vec<Duration> = (0..5).map(|_| rl.when(&"a", now)).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80].map(Duration::from_millis));
        assert_eq!(rl.num_requeues(&"a"), 5);
        // Other keys back off independently.
        assert_eq!(rl.when(&"b", now), Duration::from_millis(5));

        // 5 ms · 2^17 = 655 s, 2^18 would be 1311 s: capped from the 19th failure on.
        for _ in 5..17 {
            rl.when(&"a", now);
        }
        assert_eq!(rl.when(&"a", now), Duration::from_millis(5 << 17));
        assert_eq!(rl.when(&"a", now), Duration::from_secs(1000));
        for _ in 0..2000 {
            assert_eq!(rl.when(&"a", now), Duration::from_secs(1000));
        }

        rl.forget(&"a");
        assert_eq!(rl.num_requeues(&"a"), 0);
        assert_eq!(rl.when(&"a", now), Duration::from_millis(5));
        assert_eq!(rl.num_requeues(&"b"), 1);
    }

    #[test]
    fn combined_delay_is_the_larger_of_backoff_and_bucket() {
        let mut rl = limiter(RateLimitConfig { qps: 10.0, burst: 2, ..RateLimitConfig::default() });
        let now = Instant::now();
        // Within the burst the backoff decides.
        assert_eq!(rl.when(&"a", now), Duration::from_millis(5));
        assert_eq!(rl.when(&"a", now), Duration::from_millis(10));
        // Bucket empty: the bucket decides while its wait is the longer one...
        assert_eq!(rl.when(&"b", now), Duration::from_millis(100));
        assert_eq!(rl.when(&"b", now), Duration::from_millis(200));
        // ...and the backoff again once it has grown past it.
        for _ in 0..5 {
            rl.when(&"a", now + Duration::from_secs(3600));
        }
        assert_eq!(rl.when(&"a", now + Duration::from_secs(3600)), Duration::from_millis(5 << 7));
    }

    #[test]
    fn rejects_configs_that_would_never_retry() {
        assert!(RateLimitConfig::default().validate().is_ok());
        assert!(no_bucket().validate().is_ok());
        for qps in [0.0, -1.0, f64::NAN] {
            assert!(matches!(RateLimitConfig { qps, ..RateLimitConfig::default() }.validate(), Err(QueueError::RateLimitQps(_))));
        }
        assert!(matches!(RateLimitConfig { burst: 0, ..RateLimitConfig::default() }.validate(), Err(QueueError::RateLimitBurst)));
    }
}
