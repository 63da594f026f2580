//! Values with units, each with one parser: durations (`90s`, `15m`, `1h30m`, `500ms`),
//! amounts of US dollars (`0.50`, `$0.50`) and whole numbers (tokens, turns, bytes). Every
//! surface that takes a setting as text (flags, the environment, config files, agent
//! files) reads it through these, so that `5` means the same everywhere: for a duration,
//! nothing, since a number without its unit is refused with a hint (`did you mean 5s?`).

use std::time::Duration;

/// What a duration looks like, for messages.
pub(crate) const DURATION_EXAMPLES: &str = "e.g. 90s, 15m, 1h30m or 500ms";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub(crate) struct DurationError {
    pub input: String,
    pub reason: String,
}

/// Parses a duration: numbers each followed by a unit (`ms`, `s`, `m`, `h`, `d`), with a
/// decimal part if wanted (`1.5m`, `0.5s`). A number without a unit is refused, with the
/// same number in seconds as the hint: `5` would be five seconds to `timeout(1)` and five
/// milliseconds to a `…Ms` field, and a guess either way stops a run at the wrong time.
/// Zero is zero in every unit and needs none.
pub(crate) fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason: &str| DurationError {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err(&format!("empty ({DURATION_EXAMPLES})")));
    }
    if is_plain_number(s) {
        if s.bytes().all(|b| b == b'0' || b == b'.') {
            return Ok(Duration::ZERO);
        }
        return Err(err(&unit_hint(s)));
    }
    const NANOS_PER_MS: u128 = 1_000_000;
    let general = |why: &str| err(&format!("{why} ({DURATION_EXAMPLES})"));
    let mut total_ns: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(general("each unit needs a number before it"));
        }
        let whole = u128::from(
            rest[..digits]
                .parse::<u64>()
                .map_err(|_| general("number too large"))?,
        );
        rest = &rest[digits..];
        // The decimal part, as digits and their count (`.25` is 25 and 2).
        let mut fraction: (u128, u32) = (0, 0);
        if let Some(after) = rest.strip_prefix('.') {
            let n = after.bytes().take_while(|b| b.is_ascii_digit()).count();
            if n == 0 {
                return Err(general("a decimal point needs digits after it"));
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
            "" => return Err(general("missing unit after a number")),
            _ => return Err(general("unknown unit (use ms, s, m, h or d)")),
        };
        rest = &rest[unit_len..];
        let unit_ns = unit_ms * NANOS_PER_MS;
        let part = whole
            .checked_mul(unit_ns)
            .map(|w| w + fraction.0 * unit_ns / 10u128.pow(fraction.1))
            .ok_or_else(|| general("duration too large"))?;
        total_ns = total_ns
            .checked_add(part)
            .filter(|ns| *ns <= u128::from(u64::MAX) * NANOS_PER_MS)
            .ok_or_else(|| general("duration too large"))?;
    }
    let secs =
        u64::try_from(total_ns / 1_000_000_000).map_err(|_| general("duration too large"))?;
    Ok(Duration::new(secs, (total_ns % 1_000_000_000) as u32))
}

/// Digits, perhaps with a decimal part: `5`, `1.5` (not `5.`, `.5` or `1.2.3`).
fn is_plain_number(s: &str) -> bool {
    let mut parts = s.splitn(2, '.');
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    parts.next().is_some_and(digits) && parts.next().is_none_or(digits)
}

/// Why `number` (digits, perhaps with a decimal point) is not a duration, and what it
/// probably meant.
pub(crate) fn unit_hint(number: &str) -> String {
    format!("a number needs a unit: did you mean {number}s? (units: ms, s, m, h, d)")
}

/// The shortest form [`parse_duration`] reads back: `15m`, `1h30m`, `1s500ms`, `0s`.
pub(crate) fn format_duration(d: Duration) -> String {
    let total_ms = d.as_millis();
    if total_ms == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    let parts = [(3_600_000, "h"), (60_000, "m"), (1_000, "s"), (1, "ms")];
    let mut rest = total_ms;
    for (unit_ms, unit) in parts {
        let n = rest / unit_ms;
        rest %= unit_ms;
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    out
}

/// An amount of US dollars, greater than zero and finite: a budget.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Usd(f64);

/// What an amount of dollars looks like, for messages.
pub(crate) const USD_EXPECTED: &str = "an amount of US dollars greater than 0, such as 0.50";

/// An amount of US dollars, zero included (what is left of a budget): `0.50`, `$0.50`,
/// ` 2 `; finite and not negative.
pub(crate) fn parse_dollars(text: &str) -> Option<f64> {
    let text = text.trim();
    text.strip_prefix('$')
        .unwrap_or(text)
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
}

impl Usd {
    /// `0.50`, `$0.50`, ` 2 `.
    pub(crate) fn parse(text: &str) -> Option<Usd> {
        parse_dollars(text).and_then(Usd::new)
    }

    /// `dollars` when it is a budget (finite and greater than zero).
    pub(crate) fn new(dollars: f64) -> Option<Usd> {
        (dollars.is_finite() && dollars > 0.0).then_some(Usd(dollars))
    }

    pub(crate) fn dollars(self) -> f64 {
        self.0
    }
}

// A `Usd` is never NaN, so its equality is total.
impl Eq for Usd {}

/// A whole number from the text of a flag or a variable (`200_000` reads as 200000), or
/// `None`; the caller checks its range.
pub(crate) fn parse_whole(text: &str) -> Option<i128> {
    let t = text.trim().replace('_', "");
    if t.is_empty() || t.starts_with('+') {
        return None;
    }
    t.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn accepts_documented_forms() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration(" 1m5s "), Ok(Duration::from_secs(65)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(2 * 86_400)));
    }

    #[test]
    fn a_number_without_a_unit_is_refused_with_a_hint_and_zero_needs_none() {
        for (bare, hint) in [
            ("5", "5s"),
            ("2500", "2500s"),
            ("1.5", "1.5s"),
            (" 90 ", "90s"),
        ] {
            assert_eq!(
                parse_duration(bare),
                Err(DurationError {
                    input: bare.to_string(),
                    reason: format!(
                        "a number needs a unit: did you mean {hint}? (units: ms, s, m, h, d)"
                    ),
                }),
            );
        }
        assert_eq!(
            parse_duration("5").unwrap_err().to_string(),
            "invalid duration \"5\": a number needs a unit: did you mean 5s? (units: ms, s, m, h, d)"
        );
        for zero in ["0", "00", "0.0", "0s", "0ms"] {
            assert_eq!(parse_duration(zero), Ok(Duration::ZERO), "{zero}");
        }
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        for bad in [
            "", "abc", "10x", "s", "1h30", "-5s", ".5s", "1.s", "1.5.5s", ".", "0.", "5.", "1.2.3",
            "1e3", "-5", "5S",
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert_eq!(e.input, bad);
            assert!(e.to_string().starts_with("invalid duration"), "{e}");
            assert!(!e.reason.contains("did you mean"), "{bad}: {e}");
        }
        assert_eq!(
            parse_duration("soon").unwrap_err().to_string(),
            "invalid duration \"soon\": each unit needs a number before it (e.g. 90s, 15m, 1h30m or 500ms)"
        );
        assert_eq!(
            parse_duration("99999999999999999999s").unwrap_err().reason,
            "number too large (e.g. 90s, 15m, 1h30m or 500ms)"
        );
    }

    #[test]
    fn decimals_are_accepted_with_a_unit() {
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.25h"), Ok(Duration::from_secs(4500)));
        assert_eq!(parse_duration("1h0.5m"), Ok(Duration::from_secs(3630)));
        assert_eq!(parse_duration("2.5ms"), Ok(Duration::from_micros(2500)));
    }

    #[test]
    fn durations_format_as_they_parse() {
        for (ms, text) in [
            (0, "0s"),
            (500, "500ms"),
            (1_500, "1s500ms"),
            (90_000, "1m30s"),
            (900_000, "15m"),
            (5_400_000, "1h30m"),
            (90_000_000, "25h"),
        ] {
            let d = Duration::from_millis(ms);
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d));
        }
    }

    #[test]
    fn dollars_are_positive_and_finite() {
        assert_eq!(Usd::parse("$0.50").map(Usd::dollars), Some(0.5));
        assert_eq!(Usd::parse(" 2 ").map(Usd::dollars), Some(2.0));
        for bad in ["0", "-1", "free", "$", "inf", "NaN", ""] {
            assert_eq!(Usd::parse(bad), None, "{bad}");
        }
        // What is left of a budget may be nothing.
        assert_eq!(parse_dollars(" $0 "), Some(0.0));
        for bad in ["-1", "inf", "NaN", "free", ""] {
            assert_eq!(parse_dollars(bad), None, "{bad}");
        }
    }

    #[test]
    fn whole_numbers_allow_underscores_and_nothing_else() {
        assert_eq!(parse_whole(" 200_000 "), Some(200_000));
        assert_eq!(parse_whole("-3"), Some(-3));
        for bad in ["", "1.5", "64MiB", "+3", "1e3"] {
            assert_eq!(parse_whole(bad), None, "{bad}");
        }
    }
}
