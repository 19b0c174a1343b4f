//! How long a failed key waits before it is retried: client-go's `DefaultControllerRateLimiter`,
//! the max of a per-key exponential backoff and a token bucket shared by all keys of one queue.
//! The [`TokenBucket`] is public so the host's other pacers (client QPS, event spam filter) use
//! the same arithmetic. Pure arithmetic on a `now` the caller passes in: no clock, no sleeping,
//! no locking.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::{Key, QueueError};

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

/// golang.org/x/time/rate's `Limiter`: `qps` tokens per second accumulate up to `burst`, and the
/// bucket starts full (x/time/rate's does too, by measuring from the zero time).
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    /// When `tokens` was last brought up to date; `None` while untouched (full).
    last: Option<Instant>,
}

impl TokenBucket {
    pub fn new(qps: f64, burst: u32) -> Self {
        TokenBucket { qps, burst: f64::from(burst), tokens: f64::from(burst), last: None }
    }

    /// Takes a token and returns how long to wait before acting on it (x/time/rate's `Reserve`,
    /// as client-go's workqueue uses it): always succeeds, so tokens go negative and later
    /// reservations queue up behind earlier ones. A `qps` of zero or less waits "forever"
    /// (`Duration::MAX`).
    pub fn reserve(&mut self, now: Instant) -> Duration {
        self.advance(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64(-self.tokens / self.qps).unwrap_or(Duration::MAX)
    }

    /// Changes the rate from `now` on (x/time/rate's `SetLimitAt` and `SetBurstAt`): tokens
    /// accrued so far are kept, up to the new burst, and a debt of reservations already made is
    /// kept too, so lowering the rate slows the next requests at once.
    pub fn set_rate(&mut self, qps: f64, burst: u32, now: Instant) {
        self.advance(now);
        self.qps = qps;
        self.burst = f64::from(burst);
        self.tokens = self.tokens.min(self.burst);
    }

    /// Takes a token if one is there at `now` (x/time/rate's `Allow`); never borrows ahead.
    pub fn try_take(&mut self, now: Instant) -> bool {
        self.advance(now);
        let allowed = self.tokens >= 1.0;
        if allowed {
            self.tokens -= 1.0;
        }
        allowed
    }

    /// Whether the bucket has refilled to `burst` by `now`: it then behaves exactly like a new one
    /// and can be dropped and recreated.
    pub fn is_full(&self, now: Instant) -> bool {
        self.tokens_at(now) >= self.burst
    }

    fn tokens_at(&self, now: Instant) -> f64 {
        // A clock that went backwards refills nothing rather than draining the bucket.
        let elapsed = self.last.map_or(Duration::ZERO, |last| now.saturating_duration_since(last));
        (self.tokens + elapsed.as_secs_f64() * self.qps).min(self.burst)
    }

    fn advance(&mut self, now: Instant) {
        self.tokens = self.tokens_at(now);
        self.last = Some(self.last.map_or(now, |last| last.max(now)));
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
    fn a_lower_rate_takes_effect_at_once_and_keeps_the_debt() {
        let mut bucket = TokenBucket::new(100.0, 100);
        let t0 = Instant::now();
        for _ in 0..110 {
            bucket.reserve(t0);
        }
        // 10 reservations ahead: a debt of 10 tokens, which at 2 per second is 5 s.
        bucket.set_rate(2.0, 5, t0);
        assert_eq!(bucket.reserve(t0), Duration::from_millis(5500));
        // Refill stops at the new burst.
        let later = t0 + Duration::from_secs(3600);
        let waits: Vec<Duration> = (0..6).map(|_| bucket.reserve(later)).collect();
        assert_eq!(waits, [0, 0, 0, 0, 0, 500].map(Duration::from_millis));
    }

    #[test]
    fn bucket_allows_the_burst_then_spaces_retries_by_one_over_qps() {
        let mut bucket = TokenBucket::new(10.0, 100);
        let t0 = Instant::now();
        for _ in 0..100 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
        // Tokens go negative: each reservation waits behind the previous ones.
        let waits: Vec<Duration> = (0..3).map(|_| bucket.reserve(t0)).collect();
        assert_eq!(waits, [100, 200, 300].map(Duration::from_millis));

        // 400 ms later four tokens have come back, three of them already promised.
        assert_eq!(bucket.reserve(t0 + Duration::from_millis(400)), Duration::ZERO);
        assert_eq!(bucket.reserve(t0 + Duration::from_millis(400)), Duration::from_millis(100));

        // Refill stops at the burst.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..100 {
            assert_eq!(bucket.reserve(later), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(later), Duration::from_millis(100));
    }

    #[test]
    fn try_take_only_takes_tokens_that_are_there() {
        let mut bucket = TokenBucket::new(2.0, 2);
        let t0 = Instant::now();
        assert!(bucket.is_full(t0));
        assert!(bucket.try_take(t0));
        assert!(!bucket.is_full(t0));
        assert!(bucket.try_take(t0));
        assert!(!bucket.try_take(t0), "empty: refused, not borrowed");
        assert!(!bucket.try_take(t0 + Duration::from_millis(499)));
        assert!(bucket.try_take(t0 + Duration::from_millis(500)));
        assert!(!bucket.is_full(t0 + Duration::from_millis(999)));
        assert!(bucket.is_full(t0 + Duration::from_millis(1500)));
    }

    #[test]
    fn a_bucket_without_rate_waits_forever() {
        let mut bucket = TokenBucket::new(0.0, 1);
        let t0 = Instant::now();
        assert_eq!(bucket.reserve(t0), Duration::ZERO);
        assert_eq!(bucket.reserve(t0 + Duration::from_secs(3600)), Duration::MAX);
    }

    #[test]
    fn bucket_ignores_a_clock_going_backwards() {
        let mut bucket = TokenBucket::new(1.0, 1);
        let t0 = Instant::now() + Duration::from_secs(10);
        assert_eq!(bucket.reserve(t0), Duration::ZERO);
        assert_eq!(bucket.reserve(t0 - Duration::from_secs(5)), Duration::from_secs(1));
        assert_eq!(bucket.reserve(t0 + Duration::from_secs(2)), Duration::ZERO);
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
