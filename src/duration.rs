//! Durations as users write them: `90s`, `15m`, `1h30m`, `250ms`, or plain milliseconds.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (expected e.g. 90s, 15m, 1h30m, 500ms or plain milliseconds)")]
pub(crate) struct DurationError {
    pub input: String,
    pub reason: &'static str,
}

/// Parses a duration. A bare number is milliseconds, because that is what the
/// `timeoutMs`-style fields of the result contract and the MCP tool use.
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
    let mut total_ms: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(err("each unit needs a number before it"));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| err("number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let unit_ms: u64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(err("missing unit after a number")),
            _ => return Err(err("unknown unit (use ms, s, m, h or d)")),
        };
        rest = &rest[unit_len..];
        total_ms = n
            .checked_mul(unit_ms)
            .and_then(|v| total_ms.checked_add(v))
            .ok_or_else(|| err("duration too large"))?;
    }
    Ok(Duration::from_millis(total_ms))
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
        for bad in ["", "abc", "10x", "s", "1h30", "-5s", "1.5s"] {
            let e = parse_duration(bad).unwrap_err();
            assert_eq!(e.input, bad);
            assert!(e.to_string().contains("invalid duration"), "{e}");
        }
        assert_eq!(
            parse_duration("99999999999999999999s").unwrap_err().reason,
            "number too large"
        );
    }
}
