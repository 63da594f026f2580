//! A regex that runs only on the lines that hold one of its gate literals.
//!
//! Finding a literal with `memchr::memmem` is an order of magnitude faster than any regex
//! scan, and most text holds no gate at all; when it does, the regex still searches only
//! those lines rather than the whole text. This is exact as long as no match can span a
//! line break, which every pattern given here must guarantee.

use std::borrow::Cow;
use std::ops::Range;

use memchr::memmem;
use std::sync::OnceLock;

use regex::{Captures, Regex};

#[derive(Debug)]
pub(crate) struct GatedRegex {
    gates: Vec<memmem::Finder<'static>>,
    name: &'static str,
    pattern: String,
    /// Built when a gate first matches: most text never opens one.
    regex: OnceLock<Regex>,
}

impl GatedRegex {
    /// Panics on an invalid pattern: patterns are constants of this crate, so that is a bug
    /// that any test run finds.
    pub(super) fn new(name: &'static str, gates: &[&str], pattern: &str) -> GatedRegex {
        GatedRegex {
            gates: gates
                .iter()
                .map(|g| memmem::Finder::new(g.as_bytes()).into_owned())
                .collect(),
            name,
            pattern: pattern.to_string(),
            regex: OnceLock::new(),
        }
    }

    fn regex(&self) -> &Regex {
        self.regex.get_or_init(|| {
            Regex::new(&self.pattern)
                .unwrap_or_else(|e| panic!("sanitizer pattern {} does not compile: {e}", self.name))
        })
    }

    /// For each match, `edit` gets the captures and the end of the match's line and may
    /// return a byte range inside the match; every range returned is replaced with `with`.
    pub(super) fn replace<'a>(
        &self,
        text: &'a str,
        with: &str,
        mut edit: impl FnMut(&Captures, usize) -> Option<Range<usize>>,
    ) -> Cow<'a, str> {
        let bytes = text.as_bytes();
        let find_from = |gate: &memmem::Finder, from: usize| {
            gate.find(&bytes[from..]).map_or(usize::MAX, |i| from + i)
        };
        // The next occurrence of each gate, so that every gate scans the text only once.
        let mut next: Vec<usize> = self.gates.iter().map(|g| find_from(g, 0)).collect();
        let mut out = String::new();
        let mut copied = 0;
        while let Some(hit) = next.iter().copied().min().filter(|&h| h != usize::MAX) {
            let line_start = memchr::memrchr(b'\n', &bytes[..hit]).map_or(0, |i| i + 1);
            let line_end = memchr::memchr(b'\n', &bytes[hit..]).map_or(bytes.len(), |i| hit + i);
            // The haystack ends with the line so that no match runs past it, and starts
            // with the whole text so that `\b` and the like see what precedes the line.
            let haystack = &text[..line_end];
            let mut at = line_start;
            while let Some(caps) = self.regex().captures_at(haystack, at) {
                let whole = caps.get(0).expect("group 0 is the whole match");
                if whole.is_empty() {
                    break;
                }
                at = whole.end();
                if let Some(range) = edit(&caps, line_end) {
                    if range.start >= copied {
                        super::reserve_copy(&mut out, text.len());
                        out.push_str(&text[copied..range.start]);
                        out.push_str(with);
                        copied = range.end;
                    }
                }
            }
            for (gate, n) in self.gates.iter().zip(next.iter_mut()) {
                if *n <= line_end {
                    *n = find_from(gate, line_end);
                }
            }
        }
        if copied == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }
}
