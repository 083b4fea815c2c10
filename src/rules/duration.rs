//! Go `time.ParseDuration` syntax (`300ms`, `1.5h`, `2h45m`), used by upstream's pause-period annotation and
//! by our duration flags.
//!
//! Pure: no client, no I/O.

use std::time::Duration;

/// A duration that could not be parsed, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {value:?}: {reason}")]
pub struct DurationError {
    /// The input.
    pub value: String,
    /// What is wrong.
    pub reason: &'static str,
}

/// Parses a Go duration. Negative durations are rejected (upstream accepts them, but they mean nothing here).
pub fn parse_go_duration(value: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError { value: value.to_owned(), reason };
    let s = value.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(err("negative durations are not allowed"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty"));
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let number: f64 = rest[..num_len].parse().map_err(|_| err("bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(err("missing unit (ns, us, ms, s, m, h)")),
            _ => return Err(err("unknown unit (ns, us, ms, s, m, h)")),
        };
        rest = &rest[unit_len..];
        total += number * seconds;
    }
    // Go's durations are int64 nanoseconds: anything longer is invalid there too ("3000000000000000h").
    if total > MAX_GO_DURATION_SECS {
        return Err(err("out of range (longer than Go's maximum of about 292 years)"));
    }
    Duration::try_from_secs_f64(total).map_err(|_| err("out of range"))
}

/// `math.MaxInt64` nanoseconds, in seconds.
const MAX_GO_DURATION_SECS: f64 = 9_223_372_036.854_775;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_examples() {
        assert_eq!(parse_go_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("2h45m"), Ok(Duration::from_secs(9900)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("10s"), Ok(Duration::from_secs(10)));
    }

    #[test]
    fn rejects_malformed_values_with_a_reason() {
        for bad in ["", "10", "5x", "-1s", "s", "1..2s", "3000000000000000h", "1e3s", "NaNs", "inf"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} should fail");
        }
        assert_eq!(parse_go_duration("10").map_err(|e| e.reason), Err("missing unit (ns, us, ms, s, m, h)"));
    }
}
