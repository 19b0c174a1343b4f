//! Durations as Kubernetes and Go write them: `500ms`, `30s`, `5m`, `1h30m` (Go's
//! `time.ParseDuration` without fractions, signs or the µs/ns units), for the command line's
//! flags and a Plugin's `spec.pollInterval`. Untrusted text may reach it (a Plugin author
//! chooses `pollInterval`): every step is checked, and a total beyond what Go's `time.Duration`
//! holds (2^63 - 1 ns, about 292 years) is refused as Go refuses it, never wrapped or panicked on.

use std::time::Duration;

/// Go's `time.Duration` is an `int64` of nanoseconds.
const MAX_NANOS: u128 = i64::MAX as u128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{0:?} is not a duration such as 500ms, 30s, 5m or 1h30m")]
    Syntax(String),
    #[error("{0:?} is longer than a duration can be (about 292 years)")]
    TooLong(String),
}

/// Parses a sequence of `NUMBER UNIT` (units `ms`, `s`, `m`, `h`), e.g. `1h30m`; `0s` is zero.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let syntax = || DurationError::Syntax(text.into());
    let mut nanos: u128 = 0;
    let mut rest = text;
    if rest.is_empty() {
        return Err(syntax());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(syntax());
        }
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail.find(|c: char| c.is_ascii_digit()).unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale: u128 = match unit {
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(syntax()),
        };
        // A number with more digits than a u128 holds is certainly too long.
        let n: u128 = number.parse().map_err(|_| DurationError::TooLong(text.into()))?;
        nanos = n
            .checked_mul(scale)
            .and_then(|part| nanos.checked_add(part))
            .filter(|&total| total <= MAX_NANOS)
            .ok_or_else(|| DurationError::TooLong(text.into()))?;
        rest = tail;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| DurationError::TooLong(text.into()))?;
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1m500ms"), Ok(Duration::from_millis(60_500)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        for bad in ["", "5 m", "m", "5", "5d", "-5s", "1.5s", "5ms5"] {
            assert_eq!(parse(bad), Err(DurationError::Syntax(bad.into())), "{bad:?}");
        }
    }

    /// The audit's H2: this overflowed `Duration` addition (and `n * 60` in debug builds).
    #[test]
    fn overflow_is_refused_not_panicked_on() {
        for long in ["18446744073709551615s1s", "18446744073709551615h", "9223372037s", "99999999999999999999999999999999999999999999s", "2562048h"] {
            assert_eq!(parse(long), Err(DurationError::TooLong(long.into())), "{long:?}");
        }
        // Go's largest: 2562047h47m16.854775807s.
        assert!(parse("2562047h47m16s").is_ok());
    }
}
