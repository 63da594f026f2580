//! W3C trace context: the ids of a trace and a span, and the `traceparent`/`tracestate`
//! that carry them between processes (here: the `TRACEPARENT`/`TRACESTATE` environment
//! variables, and the `_meta` of an MCP request).

use std::fmt::Write as _;

/// The longest `tracestate` passed on (the W3C limit for what a vendor must propagate).
const MAX_TRACESTATE_BYTES: usize = 512;

/// 16 random bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TraceId(pub [u8; 16]);

/// 8 random bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SpanId(pub [u8; 8]);

impl TraceId {
    pub(crate) fn random() -> TraceId {
        TraceId(random_nonzero())
    }
}

impl SpanId {
    pub(crate) fn random() -> SpanId {
        SpanId(random_nonzero())
    }
}

/// Random bytes from the system's generator; all-zero ids are invalid, so never those.
fn random_nonzero<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    loop {
        if getrandom::fill(&mut bytes).is_err() {
            // No system generator: the clock and the pid still make ids that differ per
            // span in practice, which is all a trace needs.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let seed = nanos ^ (u128::from(std::process::id()) << 64);
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (seed >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(151);
            }
        }
        if bytes.iter().any(|b| *b != 0) {
            return bytes;
        }
    }
}

/// Where a span sits: its trace, its own id, whether it is sampled (exported), and the
/// vendors' `tracestate` that travels with it unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpanContext {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub sampled: bool,
    pub trace_state: String,
}

impl SpanContext {
    /// The first span of a new trace.
    pub(crate) fn root() -> SpanContext {
        SpanContext {
            trace_id: TraceId::random(),
            span_id: SpanId::random(),
            sampled: true,
            trace_state: String::new(),
        }
    }

    /// A new span under this one: the same trace, sampling and state.
    pub(crate) fn child(&self) -> SpanContext {
        SpanContext {
            span_id: SpanId::random(),
            ..self.clone()
        }
    }

    /// `00-<trace id>-<span id>-<flags>`.
    pub(crate) fn traceparent(&self) -> String {
        let mut s = String::with_capacity(55);
        s.push_str("00-");
        hex(&mut s, &self.trace_id.0);
        s.push('-');
        hex(&mut s, &self.span_id.0);
        s.push_str(if self.sampled { "-01" } else { "-00" });
        s
    }

    /// The context a `traceparent` (and its `tracestate`) names, or `None` when the
    /// `traceparent` is not a valid one: a malformed header starts a new trace, as the
    /// W3C specification asks.
    pub(crate) fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
        let tp = traceparent.trim();
        let mut parts = tp.split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || version.eq_ignore_ascii_case("ff") || !is_lower_hex(version) {
            return None;
        }
        // Version 00 has exactly four fields; a later version may add more, after a dash.
        if version == "00" && parts.next().is_some() {
            return None;
        }
        if trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
            return None;
        }
        let trace_id = TraceId(unhex(trace)?);
        let span_id = SpanId(unhex(span)?);
        let [flags] = unhex::<1>(flags)?;
        if trace_id.0 == [0; 16] || span_id.0 == [0; 8] {
            return None;
        }
        Some(SpanContext {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
            trace_state: tracestate.map(clean_tracestate).unwrap_or_default(),
        })
    }
}

/// A `tracestate` as it may be passed on: trimmed, and dropped whole when it is too long
/// or holds anything but printable ASCII (a list member cannot be cut safely).
fn clean_tracestate(s: &str) -> String {
    let s = s.trim();
    if s.len() > MAX_TRACESTATE_BYTES || !s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return String::new();
    }
    s.to_string()
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Lower-case hex only: the W3C format allows no upper case.
fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !is_lower_hex(s) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

pub(crate) fn hex(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const GIVEN: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_traceparent_round_trips_with_its_state() {
        let ctx = SpanContext::parse(GIVEN, Some(" congo=t61rcWkgMzE ")).unwrap();
        assert_eq!(
            ctx,
            SpanContext {
                trace_id: TraceId([
                    0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c,
                    0x80, 0x31, 0x9c
                ]),
                span_id: SpanId([0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]),
                sampled: true,
                trace_state: "congo=t61rcWkgMzE".into(),
            }
        );
        assert_eq!(ctx.traceparent(), GIVEN);
        let child = ctx.child();
        assert_eq!(child.trace_id, ctx.trace_id);
        assert_ne!(child.span_id, ctx.span_id);
        assert_eq!(child.trace_state, ctx.trace_state);
    }

    #[test]
    fn not_sampled_is_kept() {
        let tp = GIVEN.replace("-01", "-00");
        let ctx = SpanContext::parse(&tp, None).unwrap();
        assert!(!ctx.sampled);
        assert_eq!(ctx.traceparent(), tp);
    }

    #[test]
    fn a_later_version_may_add_fields() {
        let tp = format!("01{}-what-comes-next", &GIVEN[2..]);
        assert!(SpanContext::parse(&tp, None).is_some());
    }

    #[test]
    fn malformed_traceparents_are_refused() {
        for bad in [
            "",
            "00",
            "garbage",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
            "0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0é",
        ] {
            assert_eq!(SpanContext::parse(bad, None), None, "{bad:?}");
        }
    }

    #[test]
    fn an_unfit_tracestate_is_dropped_whole() {
        let long = "k=".to_string() + &"v".repeat(MAX_TRACESTATE_BYTES);
        for bad in [long.as_str(), "a=b\u{7}", "a=é"] {
            let ctx = SpanContext::parse(GIVEN, Some(bad)).unwrap();
            assert_eq!(ctx.trace_state, "", "{bad:?}");
        }
    }

    #[test]
    fn new_ids_are_valid_and_differ() {
        let (a, b) = (SpanContext::root(), SpanContext::root());
        assert_ne!(a.trace_id, b.trace_id);
        assert_ne!(a.trace_id.0, [0; 16]);
        assert_eq!(SpanContext::parse(&a.traceparent(), None), Some(a));
    }
}
