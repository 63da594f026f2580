//! Regex-shaped secrets: one [`TokenRule`] per family, in two tables: `vendor` (prefixed
//! vendor tokens) and `structural` (headers, URLs, command lines, cookies, named cloud
//! credentials). Adding a family is adding one entry to one of them (a [`token_rules!`]
//! table, a rule to an entry), with a test case in that file's `cases()`.
//!
//! All rules run in one pass. A single literal search over every rule's gates (the regex
//! crate compiles an alternation of literals to Aho-Corasick or Teddy) finds the lines that
//! may hold a secret and which rules they may concern; then only those rules' regexes run,
//! and only on those lines. Text without any gate is scanned once and never reaches a
//! regex; one `memmem` scan per gate instead was measured at a quarter of the speed.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::Regex;

use super::value::{
    has_digit, has_upper_and_lower, is_filler, is_placeholder, looks_random, reads_as_code,
};
use super::{structural, vendor, MASK};

/// One family of secrets found by a regex.
#[derive(Debug)]
pub(crate) struct TokenRule {
    /// Shown in tests, in `docs/sanitizing.md` and in debugging; no output depends on it.
    pub family: &'static str,
    /// Case-sensitive literals of which one must occur on a line before the regex runs on
    /// it. Most text contains none of them, so most text never reaches a regex.
    pub gates: &'static [&'static str],
    /// Literals that must all occur on the line too (`@` for a password in a URL): a
    /// second, cheaper check before the regex, for gates that are common in ordinary text.
    pub requires: &'static [&'static str],
    /// `{LEAD}` expands to the left boundary below. The regex runs on one line at a time
    /// (`^` and `$` are that line's ends). Everything the regex matches is kept except the
    /// named group `secret`, which becomes [`MASK`]; so whatever a family may keep (its
    /// public prefix, a header name, a scheme) sits outside that group.
    pub pattern: &'static str,
    /// Decides whether this match is really a secret.
    pub accept: fn(&Candidate) -> bool,
    /// Where the `secret` group starts in a match (an offset in it), for a family whose
    /// group ends the match at a place that a scan of the match finds without a regex:
    /// resolving the group costs several times finding the match, which text made of
    /// secrets pays for every one. `None` from it, or no locator, and the regex resolves
    /// the group; debug builds (every test) resolve it both ways and check they agree.
    pub locate: Option<fn(&str) -> Option<usize>>,
}

/// A table of [`TokenRule`]s, one rule to an entry after the comment that says why it is
/// shaped so:
///
/// ```text
/// "family" [gates…] accept [requires [literals…]] [locate function]
///     pattern;
/// ```
///
/// `gates` may also name a constant array of gates; `locate` names the family's
/// [`TokenRule::locate`]. The entries stay a `const` table of
/// typed values: an unknown `accept` function or a missing field fails to compile, and
/// nothing is parsed at run time.
macro_rules! token_rules {
    (@requires) => { &[] };
    (@requires $requires:tt) => { &$requires };
    (@locate) => { None };
    (@locate $locate:ident) => { Some($locate) };
    ($(
        $family:literal $gates:tt $accept:ident
        $(requires $requires:tt)? $(locate $locate:ident)? $pattern:literal;
    )*) => {
        &[$(
            $crate::sanitize::rules::TokenRule {
                family: $family,
                gates: &$gates,
                requires: token_rules!(@requires $($requires)?),
                pattern: $pattern,
                accept: $accept,
                locate: token_rules!(@locate $($locate)?),
            },
        )*]
    };
}
pub(crate) use token_rules;

/// What `accept` sees of a match: the `secret` group and the rest of its line on each side.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate<'a> {
    pub secret: &'a str,
    pub before: &'a str,
    pub after: &'a str,
}

/// A token starts at an ASCII word boundary, or right after something that ends in a word
/// character without being part of the token: a JSON escape (`\n`, `\t`, `\r`, `\u0026`),
/// a percent-escape (`%20`, `%3D`) or an SGR colour code (raw or JSON-escaped). `\b` alone
/// would miss exactly the tokens that agents print in logs, URLs and JSON transcripts. The
/// regex crate has no look-behind, so the escape is matched and kept as non-secret text.
pub(crate) const LEAD: &str =
    r"(?:(?-u:\b)|\\[nrt]|\x1b\[[0-9;]*m|\\u001[bB]\[[0-9;]*m|\\u[0-9A-Fa-f]{4}|%[0-9A-Fa-f]{2})";

/// The rules in the order they run: vendor tokens first, so that a vendor token keeps its
/// public prefix wherever it appears (`Authorization: token ghp_[REDACTED]`).
pub(crate) fn all_rules() -> impl Iterator<Item = &'static TokenRule> {
    vendor::RULES.iter().chain(structural::RULES.iter())
}

/// A [`TokenRule`] whose regex is built the first time a line passes its literal gate:
/// building every family's regex up front cost more than a whole trivial run, and most
/// output never opens most gates.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    rule: &'static TokenRule,
    regex: OnceLock<Regex>,
}

impl CompiledRule {
    pub(super) fn new(rule: &'static TokenRule) -> CompiledRule {
        CompiledRule {
            rule,
            regex: OnceLock::new(),
        }
    }

    /// Panics on an invalid pattern: patterns are constants of this crate, so that is a bug
    /// that any test run finds (`every_pattern_compiles`).
    fn regex(&self) -> &Regex {
        self.regex.get_or_init(|| {
            let rule = self.rule;
            let pattern = rule.pattern.replace("{LEAD}", LEAD);
            let regex = Regex::new(&pattern).unwrap_or_else(|e| {
                panic!("sanitizer pattern {} does not compile: {e}", rule.family)
            });
            assert!(
                regex.capture_names().any(|n| n == Some("secret")),
                "secret rule {} has no `secret` group",
                rule.family
            );
            regex
        })
    }

    /// The index of the `secret` group, which every pattern has (checked when it is built).
    fn secret_group(&self) -> usize {
        self.regex()
            .capture_names()
            .position(|n| n == Some("secret"))
            .expect("every rule has a `secret` group")
    }

    pub(super) fn family(&self) -> &'static str {
        self.rule.family
    }

    /// Masks this family's secrets in one line (no `\n` inside).
    pub(super) fn apply_line<'a>(&self, line: &'a str) -> Cow<'a, str> {
        if !self
            .rule
            .requires
            .iter()
            .all(|r| memchr::memmem::find(line.as_bytes(), r.as_bytes()).is_some())
        {
            return Cow::Borrowed(line);
        }
        let mut out = String::new();
        let mut copied = 0;
        let regex = self.regex();
        let secret_group = self.secret_group();
        // Allocated for the first match whose groups the regex resolves: most lines that
        // reach a rule have none, and a located secret needs none.
        let mut groups: Option<regex::CaptureLocations> = None;
        for found in regex.find_iter(line) {
            // Resolving groups costs far more than finding the match, so it is skipped for
            // a match longer than any token (a megabyte run of token characters after a
            // prefix) and for one that ends in a mask: its secret was masked already, by
            // another rule or an earlier round.
            if found.len() > MAX_CAPTURE_SPAN_BYTES || found.as_str().ends_with(MASK) {
                continue;
            }
            let located = self
                .rule
                .locate
                .and_then(|locate| locate(found.as_str()))
                .map(|offset| (found.start() + offset, found.end()));
            // The same match, its groups resolved on its own span (the text before it still
            // counts for look-around).
            let resolve = |groups: &mut Option<regex::CaptureLocations>| {
                let groups = groups.get_or_insert_with(|| regex.capture_locations());
                regex
                    .captures_read_at(groups, &line[..found.end()], found.start())
                    .and_then(|_| groups.get(secret_group))
            };
            #[cfg(debug_assertions)]
            if let Some(located) = located {
                assert_eq!(
                    Some(located),
                    resolve(&mut groups),
                    "{} locates its secret where its regex does not in {:?}",
                    self.rule.family,
                    found.as_str()
                );
            }
            let Some((start, end)) = located.or_else(|| resolve(&mut groups)) else {
                continue;
            };
            let candidate = Candidate {
                secret: &line[start..end],
                before: &line[..start],
                after: &line[end..],
            };
            // Already masked by an earlier rule or an earlier round: masking again would
            // only stack masks. A run of filler (`ghp_xxxx…`, `AKIAXXXX…`) is a
            // placeholder in any family.
            if start == end
                || start < copied
                || candidate.after.starts_with(MASK)
                || is_filler(candidate.secret)
                || !(self.rule.accept)(&candidate)
            {
                continue;
            }
            out.push_str(&line[copied..start]);
            out.push_str(MASK);
            copied = end;
        }
        if copied == 0 {
            return Cow::Borrowed(line);
        }
        out.push_str(&line[copied..]);
        Cow::Owned(out)
    }
}

/// The longest match whose groups are resolved: longer than any secret a rule masks (AWS
/// session tokens run to a few kilobytes), far shorter than the lines of a transcript.
const MAX_CAPTURE_SPAN_BYTES: usize = 16 * 1024;

/// A set of rule indices.
#[derive(Clone, Copy, Default, Debug)]
struct RuleSet([u64; 4]);

impl RuleSet {
    const CAPACITY: usize = 256;

    fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    fn union(&mut self, other: &RuleSet) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a |= b;
        }
    }

    /// The indices in increasing order, a set bit at a time.
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(word, &bits)| {
            let mut bits = bits;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let bit = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    word * 64 + bit
                })
            })
        })
    }
}

/// Text at least this long gets the DFA prefilter (see [`TokenRules`]).
const DFA_MIN_TEXT_BYTES: usize = 64 * 1024;
/// Once this sanitizer has read this much text, short texts get the DFA too: a stream of
/// many small pieces (a run's streamed answer, sanitized a message at a time) pays for the
/// DFA's build in its first few megabytes.
const DFA_AFTER_TEXT_BYTES: usize = 4 * 1024 * 1024;

/// Gate hits on one line after which the rest of the line is read in one overlapping pass
/// rather than a search per hit (see [`TokenRules::each_gate`]).
const DENSE_LINE_GATE_HITS: usize = 8;

fn build_prefilter(
    gates: &[(&'static [u8], RuleSet)],
    kind: aho_corasick::AhoCorasickKind,
) -> aho_corasick::AhoCorasick {
    aho_corasick::AhoCorasick::builder()
        .kind(Some(kind))
        .build(gates.iter().map(|(g, _)| *g))
        .expect("a set of literals builds")
}

/// Every token rule, with the one literal search that gates them all.
#[derive(Debug)]
pub(crate) struct TokenRules {
    rules: Vec<CompiledRule>,
    /// Every distinct gate literal in one automaton. A contiguous NFA builds in
    /// microseconds, which is what a short answer needs; a DFA scans about twice as fast
    /// but costs milliseconds to build, so it is built only when large text comes.
    prefilter: aho_corasick::AhoCorasick,
    prefilter_dfa: OnceLock<aho_corasick::AhoCorasick>,
    /// The text read so far, until it reaches [`DFA_AFTER_TEXT_BYTES`].
    read_bytes: std::sync::atomic::AtomicUsize,
    /// Every gate in a DFA stepped by hand for overlapping matches, for lines dense with
    /// gates: built the first time one comes.
    all_gates: OnceLock<aho_corasick::dfa::DFA>,
    /// Each distinct gate literal and the rules it gates.
    gates: Vec<(&'static [u8], RuleSet)>,
    /// For each gate, its rules and those of every gate it holds: all are on the line
    /// when it is.
    within: Vec<RuleSet>,
    /// For each gate, the other gates that hold it or start with it, and where it starts
    /// in them.
    around: Vec<Vec<(usize, usize)>>,
}

impl TokenRules {
    pub(super) fn new() -> TokenRules {
        let rules: Vec<CompiledRule> = all_rules().map(CompiledRule::new).collect();
        assert!(rules.len() <= RuleSet::CAPACITY, "too many token rules");
        let mut gates: Vec<(&'static [u8], RuleSet)> = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            for gate in rule.rule.gates {
                assert!(
                    !gate.is_empty() && !gate.contains('\n'),
                    "gate of {} must be a non-empty literal within a line",
                    rule.family()
                );
                let at = match gates.iter().position(|(g, _)| *g == gate.as_bytes()) {
                    Some(at) => at,
                    None => {
                        gates.push((gate.as_bytes(), RuleSet::default()));
                        gates.len() - 1
                    }
                };
                gates[at].1.insert(i);
            }
        }
        let prefilter = build_prefilter(&gates, aho_corasick::AhoCorasickKind::ContiguousNFA);
        // The automaton itself, run over each gate, finds the gates inside it: a few
        // thousand bytes, where comparing every pair cost millions of instructions.
        let mut within: Vec<RuleSet> = gates.iter().map(|(_, set)| *set).collect();
        let mut around: Vec<Vec<(usize, usize)>> = vec![Vec::new(); gates.len()];
        for (outer, (gate, _)) in gates.iter().enumerate() {
            for inner in prefilter.find_overlapping_iter(*gate) {
                let i = inner.pattern().as_usize();
                if i != outer {
                    let rules = gates[i].1;
                    within[outer].union(&rules);
                    around[i].push((outer, inner.start()));
                }
            }
        }
        TokenRules {
            rules,
            prefilter,
            prefilter_dfa: OnceLock::new(),
            read_bytes: std::sync::atomic::AtomicUsize::new(0),
            all_gates: OnceLock::new(),
            gates,
            within,
            around,
        }
    }

    pub(super) fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let bytes = text.as_bytes();
        let mut out = String::new();
        let mut copied = 0;
        // The line being collected: its bounds and the rules its gates named.
        let mut line: Option<(usize, usize, RuleSet)> = None;
        self.each_gate(bytes, |p, named| match &mut line {
            Some((_, end, set)) if p < *end => {
                set.union(named);
                *end
            }
            _ => {
                if let Some((start, end, set)) = line.take() {
                    self.flush(text, start, end, &set, &mut out, &mut copied);
                }
                let start = memchr::memrchr(b'\n', &bytes[..p]).map_or(0, |i| i + 1);
                let end = memchr::memchr(b'\n', &bytes[p..]).map_or(bytes.len(), |i| p + i);
                line = Some((start, end, *named));
                end
            }
        });
        if let Some((start, end, set)) = line {
            self.flush(text, start, end, &set, &mut out, &mut copied);
        }
        if copied == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    /// Counts `n` more bytes read; whether the text read so far (these included) reached
    /// [`DFA_AFTER_TEXT_BYTES`].
    fn read_enough(&self, n: usize) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if self.prefilter_dfa.get().is_some() {
            return true;
        }
        self.read_bytes.fetch_add(n, Relaxed).saturating_add(n) >= DFA_AFTER_TEXT_BYTES
    }

    /// Calls `each` with the start of every gate hit and the rules of every gate found
    /// there. The search reports the gate that ends first and goes on from the next byte,
    /// so a longer gate around it (`security-token=` around `ecurity-token`) is never
    /// reported itself: each hit also counts the gates it holds, and those around it that
    /// the text holds too. An overlapping search would report them all, at a tenth of the
    /// sanitizer's time on ordinary text.
    ///
    /// Each hit, every gate around it included, counts a gate occurrence that starts at or
    /// before it, and every occurrence is counted by the hit of the search it falls in. So
    /// a line with many hits (`Authorization: Bearer …` repeated), which would cost a
    /// search per hit, is read past its [`DENSE_LINE_GATE_HITS`]th in one overlapping pass
    /// that names every gate occurring in the rest of it: the same rules, far fewer calls.
    /// `each` returns the end of the hit's line.
    fn each_gate(&self, bytes: &[u8], mut each: impl FnMut(usize, &RuleSet) -> usize) {
        let long = bytes.len() >= DFA_MIN_TEXT_BYTES || self.read_enough(bytes.len());
        let prefilter = if long {
            self.prefilter_dfa
                .get_or_init(|| build_prefilter(&self.gates, aho_corasick::AhoCorasickKind::DFA))
        } else {
            &self.prefilter
        };
        let mut pos = 0;
        // The end of the line of the last hit, and how many hits it has had.
        let (mut line_end, mut line_hits) = (0, 0);
        while let Some(hit) = prefilter.find(aho_corasick::Input::new(bytes).range(pos..)) {
            let (p, g) = (hit.start(), hit.pattern().as_usize());
            let mut named = self.within[g];
            for &(h, offset) in &self.around[g] {
                if p >= offset && bytes[p - offset..].starts_with(self.gates[h].0) {
                    named.union(&self.gates[h].1);
                }
            }
            pos = p + 1;
            line_hits = if p < line_end { line_hits + 1 } else { 1 };
            line_end = each(p, &named);
            if line_hits >= DENSE_LINE_GATE_HITS {
                let mut rest = RuleSet::default();
                self.name_all_gates(&bytes[pos..line_end], &mut rest);
                each(p, &rest);
                pos = line_end;
            }
        }
    }

    /// Adds the rules of every gate occurring in `bytes`: a DFA stepped a byte at a time,
    /// each state knowing the gates that end there, so a gate costs no search of its own.
    fn name_all_gates(&self, bytes: &[u8], named: &mut RuleSet) {
        use aho_corasick::automaton::Automaton;
        let dfa = self.all_gates.get_or_init(|| {
            aho_corasick::dfa::DFA::builder()
                .prefilter(false)
                .build(self.gates.iter().map(|(g, _)| *g))
                .expect("a set of literals builds")
        });
        let anchored = aho_corasick::Anchored::No;
        let mut state = dfa
            .start_state(anchored)
            .expect("the DFA searches unanchored");
        for &byte in bytes {
            state = dfa.next_state(anchored, state, byte);
            if dfa.is_special(state) && dfa.is_match(state) {
                for i in 0..dfa.match_len(state) {
                    named.union(&self.gates[dfa.match_pattern(state, i).as_usize()].1);
                }
            }
        }
    }

    /// The rules that the gates on a one-line text name (tests).
    #[cfg(test)]
    fn rules_named_on(&self, line: &str) -> RuleSet {
        let mut named = RuleSet::default();
        self.each_gate(line.as_bytes(), |_, set| {
            named.union(set);
            line.len()
        });
        named
    }

    /// Runs the named rules, in table order, on the line `start..end`.
    fn flush(
        &self,
        text: &str,
        start: usize,
        end: usize,
        set: &RuleSet,
        out: &mut String,
        copied: &mut usize,
    ) {
        let mut line = Cow::Borrowed(&text[start..end]);
        for i in set.iter() {
            if let Cow::Owned(s) = self.rules[i].apply_line(&line) {
                line = Cow::Owned(s);
            }
        }
        if let Cow::Owned(line) = line {
            super::reserve_copy(out, text.len());
            out.push_str(&text[*copied..start]);
            out.push_str(&line);
            *copied = end;
        }
    }
}

// What the tables' `accept` functions are built from.

pub(crate) fn always(_: &Candidate) -> bool {
    true
}

/// A letter and a digit: every random alphanumeric token of 16+ characters has both.
pub(crate) fn alnum(c: &Candidate) -> bool {
    has_digit(c.secret) && c.secret.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Real keys are long base62 strings, so they contain all three classes; kebab-case words
/// that happen to start with a prefix (`sk-spinner-double-bounce`) do not.
pub(crate) fn mixed_alnum(c: &Candidate) -> bool {
    has_digit(c.secret) && has_upper_and_lower(c.secret)
}

/// Random by [`looks_random`], for tokens whose alphabet may lack digits (base64).
pub(crate) fn random(c: &Candidate) -> bool {
    looks_random(c.secret)
}

pub(crate) fn not_placeholder(c: &Candidate) -> bool {
    !is_placeholder(c.secret)
}

pub(crate) fn random_not_placeholder(c: &Candidate) -> bool {
    looks_random(c.secret) && !is_placeholder(c.secret)
}

/// The token ends where the match ends: for fixed-length formats whose alphabet has no
/// ASCII word boundary to close them (`-`, `~`, `.`).
pub(crate) fn ends_here(c: &Candidate) -> bool {
    !c.after
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'~' | b'.'))
}

/// Without a scheme the value could as well be code (`authorization: base64.decode(x)`,
/// `Authorization: WINBIO_PRESENCE_0`) or the scheme itself before a reference
/// (`Bearer $TOKEN`).
pub(crate) fn raw_credential(c: &Candidate) -> bool {
    c.secret.len() >= 8
        && !AUTH_SCHEMES
            .iter()
            .any(|w| w.eq_ignore_ascii_case(c.secret))
        && random_not_placeholder(c)
        && !reads_as_code(c.secret)
        && !c.after.starts_with('(')
}

/// `Authorization` schemes whose credential follows after a space. Also used to tell a
/// scheme word from a raw credential.
pub(crate) const AUTH_SCHEMES: &[&str] = &[
    "bearer",
    "basic",
    "token",
    "digest",
    "negotiate",
    "ntlm",
    "dpop",
    "apikey",
    "sso-key",
];

/// Test support shared by the two tables' tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// One family's test: `positive` becomes `masked` through that family's rule alone
    /// and through the whole sanitizer; `negative` is left alone by the whole sanitizer.
    pub(crate) struct Case {
        pub family: &'static str,
        pub positive: String,
        pub masked: String,
        pub negative: String,
    }

    pub(crate) fn case(
        family: &'static str,
        positive: String,
        masked: &str,
        negative: &str,
    ) -> Case {
        Case {
            family,
            positive,
            masked: masked.to_string(),
            negative: negative.to_string(),
        }
    }

    /// Checks the locator of `family` against its regex on lines made of `slots`: each
    /// line is one choice from every slot in turn, the whole repeated once or twice, so
    /// that the rule matches in all the shapes the choices make and around them: wherever
    /// the regex matches, the locator finds the start of the `secret` group that the
    /// regex resolves, or leaves it to the regex.
    pub(crate) fn check_locator(table: &'static [TokenRule], family: &str, slots: &[&[&str]]) {
        let rule = table
            .iter()
            .find(|r| r.family == family)
            .unwrap_or_else(|| panic!("no family {family}"));
        let locate = rule.locate.expect("the family has a locator");
        let compiled = CompiledRule::new(rule);
        let (regex, group) = (compiled.regex(), compiled.secret_group());
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let (mut located, mut matches) = (0, 0);
        for _ in 0..100_000 {
            let line: String = (0..1 + next(2))
                .flat_map(|_| {
                    slots
                        .iter()
                        .map(|slot| slot[next(slot.len())])
                        .collect::<Vec<_>>()
                })
                .collect();
            for found in regex.find_iter(&line) {
                matches += 1;
                let caps = regex
                    .captures_at(&line[..found.end()], found.start())
                    .expect("a match has its groups");
                let secret = caps.get(group).expect("the secret group takes part");
                assert_eq!(secret.end(), found.end(), "{family}: {line:?}");
                if let Some(offset) = locate(found.as_str()) {
                    located += 1;
                    assert_eq!(
                        found.start() + offset,
                        secret.start(),
                        "{family} in {:?}",
                        found.as_str()
                    );
                }
            }
        }
        // The slots must make the rule match often, and the locator must read nearly all
        // of those matches, or the check checks little.
        assert!(matches >= 10_000, "{family}: {matches} matches");
        assert!(
            located * 10 >= matches * 9,
            "{family}: located {located} of {matches}"
        );
    }

    /// Checks that every family of `table` has a case and every case holds.
    pub(crate) fn check_table(table: &'static [TokenRule], cases: &[Case]) {
        for rule in table {
            // Built lazily in production; every one must build.
            let _ = CompiledRule::new(rule).regex();
        }
        let sanitizer = crate::sanitize::Sanitizer::new(None);
        for rule in table {
            assert!(
                cases.iter().any(|c| c.family == rule.family),
                "family {} has no test case",
                rule.family
            );
        }
        for case in cases {
            let rule = table
                .iter()
                .find(|r| r.family == case.family)
                .unwrap_or_else(|| panic!("no family {}", case.family));
            let compiled = CompiledRule::new(rule);
            let alone: String = case
                .positive
                .split('\n')
                .map(|l| compiled.apply_line(l).into_owned())
                .collect::<Vec<_>>()
                .join("\n");
            assert_eq!(
                alone, case.masked,
                "family {} alone on {:?}",
                case.family, case.positive
            );
            assert_eq!(
                sanitizer.sanitize(&case.positive),
                case.masked,
                "family {}: sanitizer on {:?}",
                case.family,
                case.positive
            );
            assert_eq!(
                sanitizer.sanitize(&case.negative),
                case.negative,
                "family {}: negative {:?}",
                case.family,
                case.negative
            );
            for text in [&case.masked, &case.negative] {
                assert_eq!(sanitizer.sanitize(text), *text, "idempotent on {text:?}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_compiles_under_its_own_name() {
        let mut families: Vec<_> = all_rules().map(|r| r.family).collect();
        let n = families.len();
        families.sort_unstable();
        families.dedup();
        assert_eq!(families.len(), n, "family names are unique");
        // Compiling panics with the family's name on a bad pattern.
        assert_eq!(TokenRules::new().rules.len(), n);
    }

    #[test]
    fn rule_sets_hold_every_index() {
        let mut set = RuleSet::default();
        for i in [0, 63, 64, 130, 255] {
            set.insert(i);
        }
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 63, 64, 130, 255]);
    }

    #[test]
    fn overlapping_gates_all_count() {
        // `sk-ant-oat` holds the gates `sk-ant-oat` and `sk-`; `xoxe.xoxp-` holds `xoxe`
        // and, inside it, `xoxp-`.
        let rules = TokenRules::new();
        let key = concat!("sk-ant-oat01-", "Hs8Dj3Fg6Kl1Zx4Cv7Bn0Mq2We5Rt9Yu");
        assert_eq!(rules.apply(key), "sk-ant-oat01-[REDACTED]");
    }

    #[test]
    fn a_gate_inside_a_longer_one_does_not_hide_it() {
        // `security-token=` (pre-signed URLs) holds `ecurity-token` (AWS session tokens)
        // and `-token` (API-key headers), which end before it: every gate on the line
        // must still name its rules.
        let rules = TokenRules::new();
        let line = "https://b.oss-cn-hangzhou.aliyuncs.com/o?security-token=q7VbN2xK9mPzR4tLw8Yc";
        let set = rules.rules_named_on(line);
        let names: Vec<&str> = set.iter().map(|i| rules.rules[i].family()).collect();
        assert!(names.contains(&"presigned-url-credential"), "{names:?}");
        assert!(names.contains(&"aws-session-token"), "{names:?}");
        assert!(names.contains(&"api-key-header"), "{names:?}");
    }

    #[test]
    fn every_gate_on_a_line_names_its_rules_however_dense() {
        // Lines made of gates and pieces of gates, overlapping and run together, with few
        // hits and with many (past DENSE_LINE_GATE_HITS, where the rest of the line is
        // read in one pass): the rules named are those of every gate the line holds.
        let rules = TokenRules::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        for round in 0..400 {
            let mut line = Vec::new();
            for _ in 0..1 + round % 40 {
                let (gate, _) = rules.gates[next(rules.gates.len())];
                let (a, b) = (next(gate.len()), next(gate.len() + 1));
                match next(4) {
                    0 => line.extend_from_slice(&gate[a.min(b)..a.max(b)]),
                    1 => line.extend_from_slice(b" x="),
                    _ => line.extend_from_slice(gate),
                }
            }
            let line = String::from_utf8_lossy(&line).replace('\n', " ");
            let mut expected = RuleSet::default();
            for (gate, set) in &rules.gates {
                if memchr::memmem::find(line.as_bytes(), gate).is_some() {
                    expected.union(set);
                }
            }
            let named = rules.rules_named_on(&line);
            assert_eq!(
                named.iter().collect::<Vec<_>>(),
                expected.iter().collect::<Vec<_>>(),
                "{line:?}"
            );
        }
    }

    #[test]
    fn after_megabytes_of_text_short_texts_get_the_dfa_and_the_same_masks() {
        // The dense-line test's lines, named once by the contiguous NFA and again once the
        // sanitizer has read enough to use the DFA for short texts too.
        let rules = TokenRules::new();
        let lines: Vec<String> = rules
            .gates
            .iter()
            .map(|(g, _)| format!("x {} y", String::from_utf8_lossy(g)))
            .chain([concat!("sk-ant-oat01-", "Hs8Dj3Fg6Kl1Zx4Cv7Bn0Mq2We5Rt9Yu").to_string()])
            .collect();
        let read = |rules: &TokenRules| -> Vec<(Vec<usize>, String)> {
            lines
                .iter()
                .map(|l| {
                    (
                        rules.rules_named_on(l).iter().collect(),
                        rules.apply(l).into_owned(),
                    )
                })
                .collect()
        };
        let before = read(&rules);
        assert!(rules.prefilter_dfa.get().is_none(), "short texts, the NFA");
        let filler = "plain text without a gate\n".repeat(DFA_MIN_TEXT_BYTES / 32);
        while !rules.read_enough(0) {
            assert!(matches!(rules.apply(&filler), Cow::Borrowed(_)));
        }
        let after = read(&rules);
        assert!(rules.prefilter_dfa.get().is_some(), "the DFA was built");
        assert_eq!(before, after);
    }

    #[test]
    fn lines_without_gates_are_borrowed() {
        let rules = TokenRules::new();
        let text = "plain text\nwith lines\n";
        assert!(matches!(rules.apply(text), Cow::Borrowed(_)));
    }
}
