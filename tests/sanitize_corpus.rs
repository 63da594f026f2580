//! The sanitizer against its own corpus (`tests/fixtures/sanitize-corpus/`): secrets
//! labelled by kind and family, and look-alikes that must stay byte for byte. Prints recall
//! per kind, the false-positive rate and the precision
//! (`cargo test --test sanitize_corpus -- --nocapture`), and fails below the floors: every
//! positive masked, no negative changed.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use orchestrate::sanitize::Sanitizer;

const MASK: &str = "[REDACTED]";

/// What the corpus must reach: every positive masked, no negative touched.
const MIN_RECALL_PERCENT: f64 = 100.0;
const MAX_FALSE_POSITIVE_PERCENT: f64 = 0.0;

/// The corpus's values come from this seed, so every run sees the same ones.
const SEED: u64 = 0x5eed_c0de_2024_0515;

/// xorshift64*: enough to make values of the right shape; not for anything secret.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn from(&mut self, alphabet: &[u8], len: usize) -> String {
        (0..len)
            .map(|_| char::from(alphabet[self.below(alphabet.len())]))
            .collect()
    }
}

const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGITS: &[u8] = b"0123456789";
const WORDS: &[&str] = &[
    "harbor", "falcon", "lantern", "meadow", "copper", "willow", "summit", "ember", "quartz",
    "staging", "orchid", "basalt", "tundra", "juniper", "saffron", "glacier",
];

fn capitalized(word: &str) -> String {
    let mut s = word.to_string();
    s[..1].make_ascii_uppercase();
    s
}

/// Puts a digit, an uppercase and a lowercase letter at fixed places of a random token,
/// so that every generated token has the mix a real one of its length has.
fn mix(mut s: String, digits: bool, upper: bool, lower: bool, rng: &mut Rng) -> String {
    let mut bytes = std::mem::take(&mut s).into_bytes();
    let n = bytes.len();
    if n >= 8 {
        if digits {
            bytes[1] = DIGITS[rng.below(10)];
            bytes[n / 2] = DIGITS[rng.below(10)];
        }
        if upper {
            bytes[2] = UPPER[rng.below(26)];
        }
        if lower {
            bytes[3] = LOWER[rng.below(26)];
        }
    }
    String::from_utf8(bytes).expect("ASCII")
}

fn percent_encode_b64(s: &str) -> String {
    s.replace('+', "%2B").replace('/', "%2F")
}

/// One value of a corpus placeholder type (see the corpus README).
fn generate(kind: &str, len: Option<usize>, rng: &mut Rng) -> String {
    let n = || len.unwrap_or_else(|| panic!("«{kind}» needs a length"));
    let alnum: Vec<u8> = [UPPER, LOWER, DIGITS].concat();
    match kind {
        "hex" => {
            let s = rng.from(b"0123456789abcdef", n());
            mix(s, true, false, false, rng)
        }
        "HEX" => mix(rng.from(b"0123456789ABCDEF", n()), true, false, false, rng),
        "alnum" => mix(rng.from(&alnum, n()), true, true, true, rng),
        "upper" => mix(
            rng.from(&[UPPER, DIGITS].concat(), n()),
            true,
            true,
            false,
            rng,
        ),
        "lower" => mix(
            rng.from(&[LOWER, DIGITS].concat(), n()),
            true,
            false,
            true,
            rng,
        ),
        "digits" => rng.from(DIGITS, n()),
        "b64" => {
            // Not starting with `/`, which the corpus writes out where it matters.
            let s = mix(
                rng.from(&[&alnum[..], b"+/"].concat(), n()),
                true,
                true,
                true,
                rng,
            );
            s.replacen('/', "Q", usize::from(s.starts_with('/')))
        }
        "b64url" => mix(
            rng.from(&[&alnum[..], b"-_"].concat(), n()),
            true,
            true,
            true,
            rng,
        ),
        "b64pct" => percent_encode_b64(&mix(
            rng.from(&[&alnum[..], b"+/"].concat(), n()),
            true,
            true,
            true,
            rng,
        )),
        "pw" => format!(
            "{}{}{}",
            capitalized(rng.pick(WORDS)),
            1000 + rng.below(9000),
            rng.pick(&["!", "#", "@", "%", "&", "*"])
        ),
        "pwl" => format!("{}{}", rng.pick(WORDS), 1000 + rng.below(9000)),
        "phrase" => (0..3).map(|_| capitalized(rng.pick(WORDS))).collect(),
        "words" => (0..4)
            .map(|_| rng.pick(WORDS))
            .collect::<Vec<_>>()
            .join(" "),
        "word" => rng.pick(WORDS).to_string(),
        "uuid" => {
            let h = rng.from(b"0123456789abcdef", 32);
            format!(
                "{}-{}-4{}-a{}-{}",
                &h[..8],
                &h[8..12],
                &h[13..16],
                &h[17..20],
                &h[20..]
            )
        }
        other => panic!("unknown corpus placeholder type «{other}»"),
    }
}

#[derive(Debug, Clone)]
struct Case {
    kind: String,
    family: Option<String>,
    file: String,
    line: usize,
    input: String,
    expected: Option<String>,
    /// The generated values that are secrets: none may survive sanitizing.
    secrets: Vec<String>,
}

/// Replaces every `«…»` in `template`: `«type:len»`, `«type:len@name»` (bound, reused by
/// `«@name»`). Returns the text and the values that are secrets.
fn expand(
    template: &str,
    bound: &mut BTreeMap<String, String>,
    rng: &mut Rng,
) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut secrets = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('«') {
        out.push_str(&rest[..open]);
        let after = &rest[open + '«'.len_utf8()..];
        let close = after.find('»').expect("a placeholder closes with »");
        let spec = &after[..close];
        rest = &after[close + '»'.len_utf8()..];
        if let Some(name) = spec.strip_prefix('@') {
            let value = bound
                .get(name)
                .unwrap_or_else(|| panic!("«@{name}» before its binding"));
            out.push_str(value);
            continue;
        }
        let (spec, name) = match spec.split_once('@') {
            Some((spec, name)) => (spec, Some(name)),
            None => (spec, None),
        };
        let (kind, len) = match spec.split_once(':') {
            Some((kind, len)) => (kind, Some(len.parse().expect("a length"))),
            None => (spec, None),
        };
        let value = generate(kind, len, rng);
        match name {
            Some(name) => {
                if !name.starts_with("keep") {
                    secrets.push(value.clone());
                }
                bound.insert(name.to_string(), value.clone());
            }
            None => secrets.push(value.clone()),
        }
        out.push_str(&value);
    }
    out.push_str(rest);
    (out.replace('⏎', "\n"), secrets)
}

struct Corpus {
    positives: Vec<Case>,
    negatives: Vec<Case>,
}

fn load() -> Corpus {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sanitize-corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus folder")
        .map(|e| e.expect("a corpus entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    let mut rng = Rng(SEED);
    let mut corpus = Corpus {
        positives: Vec::new(),
        negatives: Vec::new(),
    };
    for path in files {
        let kind = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 file name")
            .to_string();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).expect("a readable corpus file");
        let mut family: Option<String> = None;
        let mut bound = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let case = |input: String, secrets: Vec<String>, family: &Option<String>| Case {
                kind: kind.clone(),
                family: family.clone(),
                file: file.clone(),
                line,
                input,
                expected: None,
                secrets,
            };
            if let Some(f) = raw.strip_prefix("@family ") {
                family = Some(f.trim().to_string());
            } else if let Some(t) = raw.strip_prefix("+ ") {
                bound.clear();
                let (input, secrets) = expand(t, &mut bound, &mut rng);
                assert!(
                    family.is_some(),
                    "{file}:{line}: a positive needs an @family above it"
                );
                corpus.positives.push(case(input, secrets, &family));
            } else if let Some(t) = raw.strip_prefix("= ") {
                let (expected, _) = expand(t, &mut bound, &mut rng);
                let last = corpus
                    .positives
                    .last_mut()
                    .filter(|c| c.file == file && c.expected.is_none())
                    .unwrap_or_else(|| panic!("{file}:{line}: `=` must follow a positive"));
                last.expected = Some(expected);
            } else if let Some(t) = raw.strip_prefix("- ") {
                bound.clear();
                let (input, _) = expand(t, &mut bound, &mut rng);
                corpus.negatives.push(case(input, Vec::new(), &None));
            } else {
                assert!(
                    raw.trim().is_empty() || raw.starts_with('#'),
                    "{file}:{line}: a corpus line starts with `+ `, `= `, `- `, `@family `, `#`"
                );
            }
        }
    }
    corpus
}

/// Why a positive failed, or `None` when it was masked as it should be.
fn judge_positive(sanitizer: &Sanitizer, case: &Case) -> Option<String> {
    let out = sanitizer.sanitize(&case.input).into_owned();
    let again = sanitizer.sanitize(&out).into_owned();
    if again != out {
        return Some(format!("not idempotent: {out:?} -> {again:?}"));
    }
    if let Some(expected) = &case.expected {
        if &out != expected {
            return Some(format!("got      {out:?}\n    expected {expected:?}"));
        }
    }
    for secret in &case.secrets {
        // Not the value, and not its last characters either: a mask that stops short
        // leaks the end of the secret.
        let tail = &secret[secret.len().saturating_sub(6)..];
        if out.contains(secret.as_str()) || (secret.len() >= 10 && out.contains(tail)) {
            return Some(format!("secret {secret:?} survives in {out:?}"));
        }
    }
    (!out.contains(MASK)).then(|| format!("nothing masked in {out:?}"))
}

/// Why a negative failed, or `None` when it was left byte for byte.
fn judge_negative(sanitizer: &Sanitizer, case: &Case) -> Option<String> {
    match sanitizer.sanitize(&case.input) {
        Cow::Borrowed(same) if same == case.input => None,
        Cow::Borrowed(_) => Some("borrowed output differs from the input".to_string()),
        Cow::Owned(out) => Some(format!("changed to {out:?}")),
    }
}

#[derive(Default)]
struct Tally {
    positives: usize,
    masked: usize,
    negatives: usize,
    changed: usize,
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        100.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

#[test]
fn corpus_recall_per_kind_and_false_positives() {
    let corpus = load();
    // No home is mapped, so that a path in a case stays as written.
    let sanitizer = Sanitizer::new(None);
    let mut kinds: BTreeMap<String, Tally> = BTreeMap::new();
    let mut families: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut failures = String::new();
    for case in &corpus.positives {
        let tally = kinds.entry(case.kind.clone()).or_default();
        tally.positives += 1;
        let family = families
            .entry(case.family.clone().unwrap_or_default())
            .or_default();
        family.0 += 1;
        match judge_positive(&sanitizer, case) {
            None => {
                tally.masked += 1;
                family.1 += 1;
            }
            Some(why) => {
                let _ = writeln!(
                    failures,
                    "MISSED {}:{} [{}] {:?}\n    {why}",
                    case.file,
                    case.line,
                    case.family.as_deref().unwrap_or("?"),
                    case.input
                );
            }
        }
    }
    for case in &corpus.negatives {
        let tally = kinds.entry(case.kind.clone()).or_default();
        tally.negatives += 1;
        if let Some(why) = judge_negative(&sanitizer, case) {
            tally.changed += 1;
            let _ = writeln!(
                failures,
                "FALSE POSITIVE {}:{} {:?}\n    {why}",
                case.file, case.line, case.input
            );
        }
    }

    let mut report =
        String::from("kind                       positives  recall   negatives  false positives\n");
    let mut total = Tally::default();
    for (kind, t) in &kinds {
        let _ = writeln!(
            report,
            "{kind:<26} {:>9}  {:>6.1}%  {:>9}  {:>6.1}%",
            t.positives,
            percent(t.masked, t.positives),
            t.negatives,
            percent(t.changed, t.negatives)
        );
        total.positives += t.positives;
        total.masked += t.masked;
        total.negatives += t.negatives;
        total.changed += t.changed;
    }
    let recall = percent(total.masked, total.positives);
    let false_positives = percent(total.changed, total.negatives);
    let precision = percent(total.masked, total.masked + total.changed);
    let _ = writeln!(
        report,
        "{:<26} {:>9}  {recall:>6.1}%  {:>9}  {false_positives:>6.1}%\nprecision {precision:.1}% ({} families)",
        "all", total.positives, total.negatives, families.len()
    );
    println!("{report}");
    if !failures.is_empty() {
        println!("{failures}");
    }
    assert!(
        recall >= MIN_RECALL_PERCENT && false_positives <= MAX_FALSE_POSITIVE_PERCENT,
        "corpus below its floors (recall {recall:.1}% < {MIN_RECALL_PERCENT}% or false positives \
         {false_positives:.1}% > {MAX_FALSE_POSITIVE_PERCENT}%):\n{report}\n{failures}"
    );
}

/// The corpus must keep covering what it claims: a positive and a negative for every kind,
/// and values that the placeholders really generate.
#[test]
fn every_kind_has_positives_and_negatives() {
    let corpus = load();
    let mut kinds: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for c in &corpus.positives {
        kinds.entry(&c.kind).or_default().0 += 1;
        assert!(!c.secrets.is_empty(), "{}:{} has no secret", c.file, c.line);
    }
    for c in &corpus.negatives {
        kinds.entry(&c.kind).or_default().1 += 1;
    }
    let expected = [
        "config-property-keys",
        "credential-file-paths",
        "encoded-webhook",
        "header-map-basic-auth",
        "key-names",
        "ordinary",
        "prefix-placeholders",
        "presigned-url",
        "prose",
        "sdk-positional",
        "secret-identifiers",
        "struct-dumps",
        "vendor-variable-names",
    ];
    assert_eq!(kinds.keys().copied().collect::<Vec<_>>(), expected);
    for (kind, (pos, neg)) in kinds {
        assert!(
            pos >= 2 && neg >= 5,
            "{kind}: {pos} positives, {neg} negatives"
        );
    }
}
