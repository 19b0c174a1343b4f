//! A token bucket (golang.org/x/time/rate's `Limiter`): the one pacing arithmetic of the host —
//! the workqueue's retries, each identity's client QPS, the Event spam filter and plugins' log
//! budgets. Pure arithmetic on a `now` the caller passes in: no clock, no sleeping, no locking.

use std::time::Duration;

use tokio::time::Instant;

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
}
