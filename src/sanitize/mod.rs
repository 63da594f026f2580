//! Sanitizing of everything that leaves the process (SPEC section 6): secrets are masked,
//! home directories become `~`, long stack traces are cut.
//!
//! Each round runs these in order, each on the previous one's output:
//! - `paths`: home directories;
//! - `rules`: secrets with a regex shape (vendor tokens, `Authorization` headers, bearer
//!   tokens, passwords in URLs), one table entry per family;
//! - `assign`: `name = value` assignments whose name says the value is a secret;
//! - `stack`: stack traces.
//!
//! `value` holds the judgement they share about a candidate value (random, placeholder,
//! code, label); `gated` runs a regex only on the lines that hold one of its literals.
//!
//! Ordinary text is scanned a few times by `memchr` and rarely reaches a regex, and a rule
//! that changes nothing allocates nothing, which is how [`Sanitizer::sanitize`] returns
//! [`Cow::Borrowed`] for clean text.

mod assign;
mod gated;
mod paths;
mod rules;
mod stack;
mod value;

use std::borrow::Cow;
use std::sync::LazyLock;

/// What a secret is replaced with. Rules recognise it, so that sanitizing twice changes
/// nothing the second time.
pub(crate) const MASK: &str = "[REDACTED]";

/// Rounds after the first; in practice a second round finds nothing, the rest are a bound.
const MAX_EXTRA_ROUNDS: usize = 4;

/// All rules, compiled once. Build one per process ([`Sanitizer::global`]) or per home.
#[derive(Debug)]
pub struct Sanitizer {
    tokens: Vec<rules::CompiledRule>,
    assignments: assign::Assignments,
    homes: paths::HomeDirs,
}

impl Sanitizer {
    /// `home` is the user's actual home directory; it becomes `~` even when it is not under
    /// `/home`, `/Users` or `C:\Users` (`/root`, `/var/lib/jenkins`).
    pub fn new(home: Option<&str>) -> Sanitizer {
        Sanitizer {
            tokens: rules::TOKEN_RULES
                .iter()
                .map(rules::CompiledRule::new)
                .collect(),
            assignments: assign::Assignments::new(),
            homes: paths::HomeDirs::new(home),
        }
    }

    /// The process-wide sanitizer for `$HOME`, built on first use.
    pub fn global() -> &'static Sanitizer {
        static GLOBAL: LazyLock<Sanitizer> =
            LazyLock::new(|| Sanitizer::new(std::env::var("HOME").ok().as_deref()));
        &GLOBAL
    }

    /// Masks secrets, maps home directories to `~` and folds long stack traces. Borrowed
    /// exactly when nothing changed; idempotent.
    pub fn sanitize<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = self.round(text);
        // Each rule parses the text on its own, so one rule's mask can change another's
        // context: masking a value can remove the quote that closed an earlier value, or
        // put a `]` where a path now starts. Repeating until nothing changes is what makes
        // sanitizing idempotent; clean text never gets a second round.
        for _ in 0..MAX_EXTRA_ROUNDS {
            let Cow::Owned(current) = &out else {
                break;
            };
            let next = match self.round(current) {
                Cow::Owned(next) => next,
                Cow::Borrowed(_) => break,
            };
            out = Cow::Owned(next);
        }
        out
    }

    fn round<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        // Paths first, so that the secret rules see paths in their final form and a second
        // round rarely has anything left to do.
        replace_if_owned(&mut out, |t| self.homes.apply(t));
        for rule in &self.tokens {
            replace_if_owned(&mut out, |t| rule.apply(t));
        }
        replace_if_owned(&mut out, |t| self.assignments.apply(t));
        replace_if_owned(&mut out, stack::fold_stack_traces);
        out
    }

    /// Sanitizes every string value in place, at any depth. Object keys are left alone:
    /// they are field names chosen by the child CLI's schema, not data.
    pub fn sanitize_json(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) => {
                if let Cow::Owned(clean) = self.sanitize(s) {
                    *s = clean;
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.sanitize_json(v)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|v| self.sanitize_json(v)),
            serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
            }
        }
    }
}

/// Runs one rule on the current text and keeps its output only when it changed something,
/// so that a chain of untouched rules never allocates.
fn replace_if_owned<'a>(text: &mut Cow<'a, str>, rule: impl for<'b> Fn(&'b str) -> Cow<'b, str>) {
    let changed = match rule(text) {
        Cow::Owned(s) => Some(s),
        Cow::Borrowed(_) => None,
    };
    if let Some(s) = changed {
        *text = Cow::Owned(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    const GHP: &str = concat!("ghp_", "R8kZ2mQ9pL4wX7nB3vH6cJ1dF5sG0aYtE2uK");
    const OPENAI_PROJ: &str = concat!(
        "sk-proj-",
        "a8Fz2Kq9Lm4Xw7Rb3Tn6Yp1Hs5Dj0Gc-Ve_Uk8Mi2No4Ql7Pt9Ry3Sw6Zx1Ab5"
    );

    fn sanitize(text: &str) -> String {
        Sanitizer::new(Some("/root")).sanitize(text).into_owned()
    }

    #[test]
    fn ordinary_text_is_borrowed_byte_for_byte() {
        let text = "commit 3f786850e387550fdab836ed7e6dc881de23001b\n\
                    id: 123e4567-e89b-12d3-a456-426614174000\n\
                    \"integrity\": \"sha512-Kq5sNclPz7QV2+lfQIuuTVbYz8Rz0aA7x3hG1Lw9Yk2dE4fRt6uJ8mN0pQ3sV5xZ7bC9eF1gH3iJ5kL7mN9oP1qR3A==\"\n\
                    version 1.2.3-beta.4+build.5, see https://docs.rs/regex/1.11.0/regex/#syntax\n\
                    set OPENAI_API_KEY and read process.env.OPENAI_API_KEY; GITHUB_TOKEN is optional\n\
                    sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 /usr/lib/x.so\n\
                    let token = lexer.next_token(); map.insert(key, value); password: <hidden>\n\
                    Authorization header missing; task-runner risk-matrix disk-usage\n";
        let sanitizer = Sanitizer::new(Some("/root"));
        assert!(matches!(sanitizer.sanitize(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn families_together_in_one_transcript() {
        let input = format!(
            "$ cat /home/dev/app/.env\nOPENAI_API_KEY={OPENAI_PROJ}\nDB_PASSWORD=postgres123\n\
             $ curl -v -H \"Authorization: Bearer a1b2c3d4e5\" https://u:pw1@api.x.io\n\
             remote: {GHP}\n"
        );
        let expected = "$ cat ~/app/.env\nOPENAI_API_KEY=sk-proj-[REDACTED]\nDB_PASSWORD=[REDACTED]\n\
                        $ curl -v -H \"Authorization: Bearer [REDACTED]\" https://u:[REDACTED]@api.x.io\n\
                        remote: ghp_[REDACTED]\n";
        assert_eq!(sanitize(&input), expected);
    }

    #[test]
    fn tokens_at_the_edges_and_in_punctuation() {
        let cases = [
            (GHP.to_string(), "ghp_[REDACTED]"),
            (format!("{GHP}."), "ghp_[REDACTED]."),
            (format!("[{GHP}]"), "[ghp_[REDACTED]]"),
            (format!("f({GHP}),"), "f(ghp_[REDACTED]),"),
            (
                format!("\x1b[32m{GHP}\x1b[0m"),
                "\x1b[32mghp_[REDACTED]\x1b[0m",
            ),
            (
                format!("\\u001b[32m{GHP}\\u001b[0m"),
                "\\u001b[32mghp_[REDACTED]\\u001b[0m",
            ),
            (
                format!(r#"{{\"text\":\"key:\n{GHP}\"}}"#),
                r#"{\"text\":\"key:\nghp_[REDACTED]\"}"#,
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(sanitize(&input), expected, "input: {input:?}");
        }
    }

    #[test]
    fn own_home_and_stack_traces() {
        let mut input = String::from("Error: boom\n");
        for i in 0..7 {
            input.push_str(&format!("    at f{i} (/root/app/m.js:{i}:1)\n"));
        }
        let expected = "Error: boom\n\
                        \x20   at f0 (~/app/m.js:0:1)\n\
                        \x20   at f1 (~/app/m.js:1:1)\n\
                        \x20   at f2 (~/app/m.js:2:1)\n\
                        \x20   at f3 (~/app/m.js:3:1)\n\
                        \x20   at f4 (~/app/m.js:4:1)\n\
                        \x20   … 2 more frames\n";
        assert_eq!(sanitize(&input), expected);
    }

    #[test]
    fn json_strings_are_sanitized_and_keys_are_not() {
        let mut value = json!({
            "api_key": format!("token {GHP}"),
            "args": {"command": "cat /home/dev/.netrc", "n": 3, "list": [GHP, null, true]},
        });
        Sanitizer::new(None).sanitize_json(&mut value);
        assert_eq!(
            value,
            json!({
                "api_key": "token ghp_[REDACTED]",
                "args": {"command": "cat ~/.netrc", "n": 3, "list": ["ghp_[REDACTED]", null, true]},
            })
        );
    }

    #[test]
    fn global_is_built_once() {
        assert!(std::ptr::eq(Sanitizer::global(), Sanitizer::global()));
        assert_eq!(Sanitizer::global().sanitize(GHP), "ghp_[REDACTED]");
    }

    #[test]
    fn sanitizing_twice_changes_nothing() {
        let mixed = format!(
            "Authorization: token {GHP}\nAPI_KEY=\"{OPENAI_PROJ}\"\nhttps://a:{GHP}@h\nsecret: q1w2e3r4t5\n"
        );
        // The rest were found by the property test: one rule's edit changing what another
        // rule sees (a path mapped inside a value, a mask before a path, a masked value
        // that held the quote closing an earlier one).
        let inputs = [
            mixed.as_str(),
            "\"password\": \"C:\\Users\\https://hooks.slack.com/services/  3: a::b\n",
            "sk-aAaa0aAAAaAAaaaaA00a/root[REDACTED]",
            "API_KEY=\\\"00aAaaaA&[REDACTED]\"password\": \"/home//home/\\\"",
        ];
        for input in inputs {
            let once = sanitize(input);
            assert_eq!(sanitize(&once), once, "input: {input:?}");
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Pieces that push the rules into their corners: prefixes, keywords, separators,
        /// quotes, escapes, masks, frame lines.
        fn piece() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("sk-".to_string()),
                Just("sk-ant-api03-".to_string()),
                Just("ghp_".to_string()),
                Just("github_pat_".to_string()),
                Just("AKIA".to_string()),
                Just("xoxb-".to_string()),
                Just("https://hooks.slack.com/services/".to_string()),
                Just("Authorization: Bearer ".to_string()),
                Just("bearer ".to_string()),
                Just("://u:".to_string()),
                Just("@".to_string()),
                Just("API_KEY=".to_string()),
                Just("\"password\": \"".to_string()),
                Just("token: ".to_string()),
                Just("[REDACTED]".to_string()),
                Just("/home/".to_string()),
                Just("C:\\Users\\".to_string()),
                Just("/root".to_string()),
                Just("\\n".to_string()),
                Just("\\\"".to_string()),
                Just("\x1b[31m".to_string()),
                Just("\\u001b[0m".to_string()),
                Just("C:\\\\Users\\\\".to_string()),
                Just("Basic ".to_string()),
                Just("export DB_PASSWORD=".to_string()),
                Just("_TOKEN".to_string()),
                Just(": str = ".to_string()),
                Just("\r\n".to_string()),
                Just("    at f (a.js:1:2)\n".to_string()),
                Just("  File \"a.py\", line 1, in f\n    g()\n".to_string()),
                Just("  3: a::b\n".to_string()),
                Just("main.f()\n\t/a.go:1 +0x1\n".to_string()),
                "[A-Za-z0-9]{1,40}",
                "[ -~]{1,20}",
                "[ \n\t\"'=:,.()\\[\\]{}/\\\\-]{1,4}",
                "\\PC{1,8}",
            ]
        }

        /// Built once: compiling the rules for every case would dominate the run time.
        static SANITIZER: LazyLock<Sanitizer> = LazyLock::new(|| Sanitizer::new(Some("/root")));

        fn text() -> impl Strategy<Value = String> {
            prop::collection::vec(piece(), 0..24).prop_map(|v| v.concat())
        }

        /// Text built only from pieces that are not secret-shaped in any combination.
        fn clean_text() -> impl Strategy<Value = String> {
            let word = prop_oneof![
                "[0-9a-f]{40}",
                "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                "sha512-[A-Za-z0-9+/]{40}==",
                "[0-9]{1,2}\\.[0-9]{1,2}\\.[0-9]{1,2}",
                "https://[a-z]{3,8}\\.com/[a-z]{1,8}",
                "[a-z]{1,10}",
                Just("OPENAI_API_KEY".to_string()),
                Just("process.env.OPENAI_API_KEY".to_string()),
                Just("/usr/local/bin".to_string()),
                Just("é".to_string()),
            ];
            let sep = prop_oneof![Just(" "), Just("\n"), Just(", "), Just("; "), Just("/")];
            prop::collection::vec((word, sep), 0..40)
                .prop_map(|v| v.into_iter().map(|(w, s)| w + s).collect())
        }

        proptest! {
            // PROPTEST_CASES raises the count for a longer search.
            #![proptest_config(ProptestConfig {
                cases: ProptestConfig::default().cases.max(2000),
                ..ProptestConfig::default()
            })]

            #[test]
            fn never_panics_and_is_idempotent(input in text()) {
                let once = SANITIZER.sanitize(&input).into_owned();
                let twice = SANITIZER.sanitize(&once).into_owned();
                prop_assert_eq!(twice, once);
            }

            #[test]
            fn clean_text_is_borrowed(input in clean_text()) {
                prop_assert!(matches!(SANITIZER.sanitize(&input), Cow::Borrowed(_)));
            }
        }
    }

    /// Throughput on 10 MB of ordinary text (code, logs, JSON, no secrets) and on a
    /// transcript that has a few. Run with
    /// `cargo test --release --lib -- --ignored --nocapture throughput`.
    #[test]
    #[ignore]
    fn throughput() {
        fn measure(label: &str, text: &str) {
            let s = Sanitizer::new(Some("/root"));
            let mb = text.len() as f64 / 1e6;
            let start = std::time::Instant::now();
            let mut newlines = 0;
            for _ in 0..5 {
                newlines +=
                    memchr::memchr_iter(b'\n', std::hint::black_box(text.as_bytes())).count();
            }
            let baseline = 5.0 * mb / start.elapsed().as_secs_f64();
            let start = std::time::Instant::now();
            let mut changed = 0;
            for _ in 0..5 {
                changed += usize::from(matches!(
                    s.sanitize(std::hint::black_box(text)),
                    Cow::Owned(_)
                ));
            }
            let rate = 5.0 * mb / start.elapsed().as_secs_f64();
            println!(
                "{label}: {mb:.1} MB, sanitize {rate:.0} MB/s (memchr newline baseline {baseline:.0} MB/s; {newlines} newlines, changed {changed}/5)"
            );
        }
        let ordinary = ordinary_text(10_000_000);
        measure("ordinary", &ordinary);
        let mut transcript = String::with_capacity(ordinary.len() + 4096);
        for (i, chunk) in ordinary.as_bytes().chunks(1_000_000).enumerate() {
            transcript.push_str(std::str::from_utf8(chunk).unwrap_or_default());
            transcript.push_str(&format!(
                "\nexport GITHUB_TOKEN={GHP}\n/home/dev{i}/x\nAuthorization: Bearer q1w2e3r4t5y6u7i8\n"
            ));
        }
        measure("transcript with secrets", &transcript);
    }

    /// Deterministic mix of Rust and TypeScript code, log lines and JSON events, with the
    /// words (`token`, `key`, `secret`, `password`, `Authorization`) that gate the rules.
    fn ordinary_text(bytes: usize) -> String {
        const LINES: &[&str] = &[
            "    let token = lexer.next_token()?;\n",
            "    for (key, value) in map.iter() { out.insert(key.clone(), value); }\n",
            "2024-05-01T12:00:03.123Z INFO request id=123e4567-e89b-12d3-a456-426614174000 status=200 took=12ms\n",
            "{\"type\":\"tool_call\",\"name\":\"read\",\"args\":{\"path\":\"src/main.rs\",\"offset\":120},\"usage\":{\"input\":1234}}\n",
            "commit 3f786850e387550fdab836ed7e6dc881de23001b Merge pull request #42 from org/feature\n",
            "export function verifyPassword(hash: string, input: string): boolean {\n",
            "      \"integrity\": \"sha512-Kq5sNclPz7QV2+lfQIuuTVbYz8Rz0aA7x3hG1Lw9Yk2dE4fRt6uJ8mN0pQ3sV5x==\",\n",
            "// The secret is read from the environment at startup; see docs/config.md.\n",
            "if (!headers.Authorization) throw new Error(\"missing Authorization header\");\n",
            "   Compiling regex-automata v0.4.9 (https://github.com/rust-lang/regex)\n",
            "warning: unused variable: `api_key_name` at src/config.rs:88:9\n",
            "The quick brown fox jumps over the lazy dog while the build runs on /usr/local/bin.\n",
            "        assert_eq!(parse(\"a=1\"), Ok(Pair { key: \"a\", value: 1 }));\n",
            "fn sanitize(text: &str) -> Cow<'_, str> { /* masks secrets */ todo!() }\n",
        ];
        let mut out = String::with_capacity(bytes + 200);
        let mut i: usize = 0;
        while out.len() < bytes {
            // A fixed stride through the lines so that neighbours vary.
            out.push_str(LINES[(i * 7 + i / LINES.len()) % LINES.len()]);
            i += 1;
        }
        out
    }
}
