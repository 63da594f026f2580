//! One search for a handful of literals that occur often in ordinary text (`token`,
//! `auth`, `sers\`): the packed SIMD searcher (Teddy) when the CPU has it, an automaton
//! otherwise. Called once per hit, so the per-call cost matters as much as the scan: the
//! packed searcher measured 2.9 GB/s where an automaton restarted at each hit gave 1.9.

use aho_corasick::packed;

#[derive(Debug)]
pub(crate) enum Literals {
    Packed(packed::Searcher),
    Automaton(aho_corasick::AhoCorasick),
}

impl Literals {
    /// Leftmost-first: at a position, the first listed literal that matches wins.
    pub(super) fn new(literals: &[&str]) -> Literals {
        let packed = packed::Config::new()
            .match_kind(packed::MatchKind::LeftmostFirst)
            .builder()
            .extend(literals)
            .build();
        match packed {
            Some(searcher) => Literals::Packed(searcher),
            None => Literals::Automaton(
                aho_corasick::AhoCorasick::builder()
                    .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                    .build(literals)
                    .expect("a set of literals builds"),
            ),
        }
    }

    /// The next literal at or after `from`: its start, its end and its index.
    pub(super) fn find(&self, haystack: &[u8], from: usize) -> Option<(usize, usize, usize)> {
        if from > haystack.len() {
            return None;
        }
        let found = match self {
            Literals::Packed(searcher) => {
                searcher.find_in(haystack, aho_corasick::Span::from(from..haystack.len()))
            }
            Literals::Automaton(automaton) => {
                automaton.find(aho_corasick::Input::new(haystack).range(from..))
            }
        };
        found.map(|m| (m.start(), m.end(), m.pattern().as_usize()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_literal_leftmost_first_and_at_the_edges() {
        let literals = Literals::new(&["token", "tok", "auth"]);
        let text = b"auth x token tok";
        let mut found = Vec::new();
        let mut pos = 0;
        while let Some((s, e, i)) = literals.find(text, pos) {
            found.push((s, e, i));
            pos = e;
        }
        assert_eq!(found, [(0, 4, 2), (7, 12, 0), (13, 16, 1)]);
        assert_eq!(literals.find(b"to", 0), None);
        assert_eq!(literals.find(text, text.len() + 1), None);
        let automaton = Literals::Automaton(
            aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(["token", "tok", "auth"])
                .unwrap(),
        );
        assert_eq!(automaton.find(text, 5), Some((7, 12, 0)));
    }
}
