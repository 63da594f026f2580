//! Truncation of `content[0].text`: the head is kept (50 KiB and 2000 lines by default, cut
//! on a UTF-8 boundary), and a marker line says how much was shown and where the full
//! output is (README, The result).

pub(crate) const DEFAULT_MAX_BYTES: usize = 50 * 1024;
pub(crate) const DEFAULT_MAX_LINES: usize = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TruncateLimits {
    pub max_bytes: usize,
    pub max_lines: usize,
}

impl Default for TruncateLimits {
    fn default() -> Self {
        TruncateLimits {
            max_bytes: DEFAULT_MAX_BYTES,
            max_lines: DEFAULT_MAX_LINES,
        }
    }
}

/// What was kept of a text that did not fit. Lines count as `str::lines` counts them; a
/// partly kept last line counts as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Truncation {
    pub shown_lines: usize,
    pub total_lines: usize,
    pub shown_bytes: usize,
    pub total_bytes: usize,
}

impl Truncation {
    /// The `details.error.message` that goes with `SUBAGENT_OUTPUT_TRUNCATED`.
    pub(crate) fn error_message(&self) -> String {
        format!(
            "Output truncated: showing {} of {} lines",
            self.shown_lines, self.total_lines
        )
    }

    fn marker(&self, session_file: &str) -> String {
        format!(
            "[TRUNCATED: showing first {} of {} lines, {} of {} bytes - full output at {}]",
            self.shown_lines, self.total_lines, self.shown_bytes, self.total_bytes, session_file
        )
    }
}

/// Keeps at most `limits.max_lines` lines and `limits.max_bytes` bytes of the head of
/// `text`, whichever is reached first, never splitting a character, and appends the marker
/// line. Text within both limits comes back unchanged with `None`.
pub(crate) fn truncate_head(
    text: &str,
    limits: TruncateLimits,
    session_file: &str,
) -> (String, Option<Truncation>) {
    truncate_head_of_longer(text, Missing::default(), limits, session_file)
}

/// What a text lacks of the whole it is the head of: bytes and lines (as `str::lines`
/// counts them) that were only counted, never kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Missing {
    pub bytes: usize,
    pub lines: usize,
}

/// As [`truncate_head`], for `text` that is the head of a longer text lacking `missing`:
/// the marker's totals count what is missing, and a text that lacks anything is always
/// marked, even when it fits.
pub(crate) fn truncate_head_of_longer(
    text: &str,
    missing: Missing,
    limits: TruncateLimits,
    session_file: &str,
) -> (String, Option<Truncation>) {
    let total_bytes = text.len() + missing.bytes;
    let total_lines = text.lines().count() + missing.lines;
    let whole = missing == Missing::default();
    if whole && total_bytes <= limits.max_bytes && total_lines <= limits.max_lines {
        return (text.to_string(), None);
    }

    let mut end = text.len();
    if total_lines > limits.max_lines {
        // More lines than allowed means at least `max_lines` line breaks: keep through the
        // last allowed one.
        end = match limits.max_lines.checked_sub(1) {
            None => 0,
            Some(n) => memchr::memchr_iter(b'\n', text.as_bytes())
                .nth(n)
                .map_or(text.len(), |i| i + 1),
        };
    }
    if end > limits.max_bytes {
        end = limits.max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
    }
    let kept = &text[..end];
    let truncation = Truncation {
        shown_lines: kept.lines().count(),
        total_lines,
        shown_bytes: kept.len(),
        total_bytes,
    };
    let marker = truncation.marker(session_file);
    let mut out = String::with_capacity(kept.len() + 1 + marker.len());
    out.push_str(kept);
    if !kept.is_empty() && !kept.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&marker);
    (out, Some(truncation))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const SESSION: &str = "/tmp/run/session.jsonl";

    fn limits(max_bytes: usize, max_lines: usize) -> TruncateLimits {
        TruncateLimits {
            max_bytes,
            max_lines,
        }
    }

    #[test]
    fn the_head_of_a_longer_text_counts_what_it_lacks() {
        let missing = Missing {
            bytes: 1000,
            lines: 10,
        };
        // Within the limits, but only the head of the text: still marked, with the totals.
        assert_eq!(
            truncate_head_of_longer("a\nb", missing, limits(100, 100), SESSION),
            (
                format!("a\nb\n[TRUNCATED: showing first 2 of 12 lines, 3 of 1003 bytes - full output at {SESSION}]"),
                Some(Truncation {
                    shown_lines: 2,
                    total_lines: 12,
                    shown_bytes: 3,
                    total_bytes: 1003
                })
            )
        );
        assert_eq!(
            truncate_head_of_longer("abcdef", missing, limits(4, 100), SESSION).1,
            Some(Truncation {
                shown_lines: 1,
                total_lines: 11,
                shown_bytes: 4,
                total_bytes: 1006
            })
        );
    }

    #[test]
    fn defaults() {
        assert_eq!(TruncateLimits::default(), limits(51_200, 2000));
    }

    #[test]
    fn within_limits_is_unchanged() {
        for text in ["", "one line", "a\nb\nc\n", "a\nb\nc"] {
            assert_eq!(
                truncate_head(text, limits(100, 3), SESSION),
                (text.to_string(), None)
            );
        }
    }

    #[test]
    fn exactly_at_both_limits_is_unchanged() {
        let text = "abc\ndef\n"; // 8 bytes, 2 lines
        assert_eq!(
            truncate_head(text, limits(8, 2), SESSION),
            (text.to_string(), None)
        );
    }

    #[test]
    fn line_limit_first() {
        let text = "l1\nl2\nl3\nl4\nl5\n";
        let (out, t) = truncate_head(text, limits(1000, 2), SESSION);
        assert_eq!(
            out,
            "l1\nl2\n[TRUNCATED: showing first 2 of 5 lines, 6 of 15 bytes - full output at /tmp/run/session.jsonl]"
        );
        let t = t.expect("truncated");
        assert_eq!(
            t,
            Truncation {
                shown_lines: 2,
                total_lines: 5,
                shown_bytes: 6,
                total_bytes: 15
            }
        );
        assert_eq!(t.error_message(), "Output truncated: showing 2 of 5 lines");
    }

    #[test]
    fn byte_limit_first_counts_a_partial_line_as_shown() {
        let text = "abcdef\nghijkl\nmnopqr";
        let (out, t) = truncate_head(text, limits(10, 100), SESSION);
        assert_eq!(
            out,
            "abcdef\nghi\n[TRUNCATED: showing first 2 of 3 lines, 10 of 20 bytes - full output at /tmp/run/session.jsonl]"
        );
        assert_eq!(
            t.expect("truncated").error_message(),
            "Output truncated: showing 2 of 3 lines"
        );
    }

    #[test]
    fn byte_cut_never_splits_a_character() {
        // 'é' is 2 bytes at 3..5: a limit of 4 falls inside it.
        let (out, t) = truncate_head("abcé\nx", limits(4, 100), SESSION);
        assert_eq!(
            out,
            "abc\n[TRUNCATED: showing first 1 of 2 lines, 3 of 7 bytes - full output at /tmp/run/session.jsonl]"
        );
        assert_eq!(t.expect("truncated").shown_bytes, 3);
        // '🦀' is 4 bytes at 2..6: every limit inside it keeps "ab".
        for max in 2..6 {
            let (out, t) = truncate_head("ab🦀cd", limits(max, 100), SESSION);
            assert_eq!(
                out,
                "ab\n[TRUNCATED: showing first 1 of 1 lines, 2 of 8 bytes - full output at /tmp/run/session.jsonl]",
                "max_bytes {max}"
            );
            assert_eq!(t.expect("truncated").shown_bytes, 2);
        }
        let (out, _) = truncate_head("ab🦀cd", limits(6, 100), SESSION);
        assert!(out.starts_with("ab🦀\n[TRUNCATED: showing first 1 of 1 lines, 6 of 8 bytes"));
    }

    #[test]
    fn byte_limit_within_the_line_limit_cut() {
        // The line cut would keep 12 bytes; the byte limit then takes over.
        let text = "aaaaa\nbbbbb\nccccc\n";
        let (out, t) = truncate_head(text, limits(8, 2), SESSION);
        assert_eq!(
            out,
            "aaaaa\nbb\n[TRUNCATED: showing first 2 of 3 lines, 8 of 18 bytes - full output at /tmp/run/session.jsonl]"
        );
        assert_eq!(t.expect("truncated").shown_lines, 2);
    }

    #[test]
    fn one_byte_over_is_truncated() {
        let (out, t) = truncate_head("abc\ndef\n!", limits(8, 100), SESSION);
        assert_eq!(
            out,
            "abc\ndef\n[TRUNCATED: showing first 2 of 3 lines, 8 of 9 bytes - full output at /tmp/run/session.jsonl]"
        );
        assert!(t.is_some());
    }

    #[test]
    fn crlf_lines_are_counted_like_str_lines() {
        let text = "a\r\nb\r\nc\r\n";
        let (out, t) = truncate_head(text, limits(100, 1), SESSION);
        assert_eq!(
            out,
            "a\r\n[TRUNCATED: showing first 1 of 3 lines, 3 of 9 bytes - full output at /tmp/run/session.jsonl]"
        );
        assert_eq!(t.expect("truncated").total_lines, 3);
    }

    #[test]
    fn zero_limits_keep_nothing() {
        let (out, t) = truncate_head("abc", limits(0, 10), SESSION);
        assert_eq!(
            out,
            "[TRUNCATED: showing first 0 of 1 lines, 0 of 3 bytes - full output at /tmp/run/session.jsonl]"
        );
        assert_eq!(t.expect("truncated").shown_lines, 0);
        let (out, _) = truncate_head("a\nb", limits(10, 0), SESSION);
        assert!(out.starts_with("[TRUNCATED: showing first 0 of 2 lines, 0 of 3 bytes"));
    }
}
