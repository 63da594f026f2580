//! Durations as users write them: `90s`, `15m`, `1h30m`, `250ms`, or plain milliseconds.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (expected e.g. 90s, 15m, 1h30m, 500ms or plain milliseconds)")]
pub(crate) struct DurationError {
    pub input: String,
    pub reason: &'static str,
}

/// Parses a duration. A bare number is milliseconds, because that is what the
/// `timeoutMs`-style fields of the result contract and the MCP tool use. A number with a
/// unit may have a decimal part (`1.5m`, `0.5s`).
pub(crate) fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        let ms: u64 = s.parse().map_err(|_| err("number too large"))?;
        return Ok(Duration::from_millis(ms));
    }
    if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(err(
            "a number without a unit is whole milliseconds (add a unit: 1.5s)",
        ));
    }
    const NANOS_PER_MS: u128 = 1_000_000;
    let mut total_ns: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(err("each unit needs a number before it"));
        }
        let whole = u128::from(
            rest[..digits]
                .parse::<u64>()
                .map_err(|_| err("number too large"))?,
        );
        rest = &rest[digits..];
        // The decimal part, as digits and their count (`.25` is 25 and 2).
        let mut fraction: (u128, u32) = (0, 0);
        if let Some(after) = rest.strip_prefix('.') {
            let n = after.bytes().take_while(|b| b.is_ascii_digit()).count();
            if n == 0 {
                return Err(err("a decimal point needs digits after it"));
            }
            // Past nanoseconds, further digits change nothing.
            let kept = &after[..n.min(12)];
            fraction = (kept.parse().expect("digits"), kept.len() as u32);
            rest = &after[n..];
        }
        let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let unit_ms: u128 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(err("missing unit after a number")),
            _ => return Err(err("unknown unit (use ms, s, m, h or d)")),
        };
        rest = &rest[unit_len..];
        let unit_ns = unit_ms * NANOS_PER_MS;
        let part = whole
            .checked_mul(unit_ns)
            .map(|w| w + fraction.0 * unit_ns / 10u128.pow(fraction.1))
            .ok_or_else(|| err("duration too large"))?;
        total_ns = total_ns
            .checked_add(part)
            .filter(|ns| *ns <= u128::from(u64::MAX) * NANOS_PER_MS)
            .ok_or_else(|| err("duration too large"))?;
    }
    let secs = u64::try_from(total_ns / 1_000_000_000).map_err(|_| err("duration too large"))?;
    Ok(Duration::new(secs, (total_ns % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_documented_forms() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2500"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration(" 1m5s "), Ok(Duration::from_secs(65)));
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        for bad in ["", "abc", "10x", "s", "1h30", "-5s", ".5s", "1.s", "1.5.5s"] {
            let e = parse_duration(bad).unwrap_err();
            assert_eq!(e.input, bad);
            assert!(e.to_string().contains("invalid duration"), "{e}");
        }
        assert_eq!(
            parse_duration("99999999999999999999s").unwrap_err().reason,
            "number too large"
        );
    }

    #[test]
    fn decimals_are_accepted_with_a_unit() {
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.25h"), Ok(Duration::from_secs(4500)));
        assert_eq!(parse_duration("1h0.5m"), Ok(Duration::from_secs(3630)));
        assert_eq!(parse_duration("2.5ms"), Ok(Duration::from_micros(2500)));
        assert_eq!(
            parse_duration("1.5").unwrap_err().reason,
            "a number without a unit is whole milliseconds (add a unit: 1.5s)"
        );
    }
}
