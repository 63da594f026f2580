//! Sanitizing of everything that leaves the process (`output`, `content`, `error`,
//! `displayItems`, streaming updates, stderr shown by `show`): secrets are masked,
//! home directories become `~`, long stack traces are cut. `docs/sanitizing.md` lists the
//! families and what is left alone.
//!
//! Each round runs these in order, each on the previous one's output:
//! - `pem`: PEM private keys (raw, JSON-escaped, base64-wrapped), which span lines;
//! - `paths`: home directories;
//! - `rules`: secrets with a regex shape, one table entry per family: layer (a) prefixed
//!   vendor tokens in `vendor`, layer (b) structural secrets in `structural` (headers, URLs,
//!   command lines, cookies, named cloud credentials), all gated by one literal search;
//! - `assign`: layer (c), `name = value` assignments whose name says the value is a secret;
//! - `stack`: stack traces, in the text's own lines and inside JSON strings.
//!
//! Then the line stages (`paths`, `rules`, `assign`) are repeated on the lines that an edit
//! left a mark on, until nothing changes: that is what makes sanitizing idempotent.
//!
//! `value` holds the judgement they share about a candidate value (random, placeholder,
//! code, label); `gated` runs a regex only on the lines that hold one of its literals.
//!
//! Ordinary text is scanned a few times by literal searches and rarely reaches a regex,
//! and a rule that changes nothing allocates nothing, which is how
//! [`Sanitizer::sanitize`] returns [`Cow::Borrowed`] for clean text.

mod assign;
mod gated;
mod literals;
mod paths;
mod pem;
mod rules;
mod stack;
mod structural;
mod value;
mod vendor;

use std::borrow::Cow;
use std::sync::OnceLock;

/// What a secret is replaced with. Rules recognise it, so that sanitizing twice changes
/// nothing the second time.
pub(crate) const MASK: &str = "[REDACTED]";

/// Repeats of the line stages on the lines an edit marked ([`Sanitizer::touch_up`]); in
/// practice the first finds nothing, the rest are a bound.
const MAX_EXTRA_ROUNDS: usize = 4;

/// All rules, compiled once. Build one per process ([`Sanitizer::global`]) or per home.
#[derive(Debug)]
pub struct Sanitizer {
    private_keys: pem::PrivateKeys,
    tokens: rules::TokenRules,
    assignments: assign::Assignments,
    homes: paths::HomeDirs,
}

impl Sanitizer {
    /// `home` is the user's actual home directory; it becomes `~` even when it is not under
    /// `/home`, `/Users` or `C:\Users` (`/root`, `/var/lib/jenkins`).
    pub fn new(home: Option<&str>) -> Sanitizer {
        Sanitizer {
            private_keys: pem::PrivateKeys::new(),
            tokens: rules::TokenRules::new(),
            assignments: assign::Assignments::new(),
            homes: paths::HomeDirs::new(home),
        }
    }

    /// The process-wide sanitizer for `$HOME`, built on first use. A caller that finds it
    /// being built (by a run's warm-up thread) waits for it; one that comes before anyone
    /// started builds it. Building a second one instead cost a quiet machine 0.8 ms of
    /// CPU per run and saved no wall time: the first record needs the rules about when
    /// the warm-up thread has them.
    pub fn global() -> &'static Sanitizer {
        static GLOBAL: OnceLock<Sanitizer> = OnceLock::new();
        GLOBAL.get_or_init(|| Sanitizer::new(std::env::var("HOME").ok().as_deref()))
    }

    /// Masks secrets, maps home directories to `~` and folds long stack traces. Borrowed
    /// exactly when nothing changed; idempotent.
    pub fn sanitize<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.round(text) {
            Cow::Borrowed(text) => Cow::Borrowed(text),
            Cow::Owned(first) => Cow::Owned(self.touch_up(&first).unwrap_or(first)),
        }
    }

    /// Whether `text` holds a secret this sanitizer would mask (a private key, a token of a
    /// known shape, a secret assignment); home directories and stack traces, which it
    /// also rewrites, are no secret.
    pub(crate) fn holds_secret(&self, text: &str) -> bool {
        matches!(self.private_keys.apply(text), Cow::Owned(_))
            || matches!(self.line_stages_after_paths(text), Cow::Owned(_))
    }

    fn round<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        // PEM keys first, on the text as it came: their bodies are base64, in which no
        // other rule may change a character before they are found. Then paths, so that
        // the secret rules see paths in their final form.
        replace_if_owned(&mut out, |t| self.private_keys.apply(t));
        replace_if_owned(&mut out, |t| self.homes.apply(t));
        replace_if_owned(&mut out, |t| self.line_stages_after_paths(t));
        replace_if_owned(&mut out, stack::fold_stack_traces);
        out
    }

    fn line_stages_after_paths<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        replace_if_owned(&mut out, |t| self.tokens.apply(t));
        replace_if_owned(&mut out, |t| self.assignments.apply(t));
        out
    }

    /// Each rule parses the text on its own, so one rule's mask can change another's
    /// context: masking a value can remove the quote that closed an earlier value, or put
    /// a `]` where a path now starts. Repeating until nothing changes is what makes
    /// sanitizing idempotent.
    ///
    /// Only the stages that work line by line (paths, token rules, assignments) can be
    /// affected, and only on lines that an edit left a mark on (a mask or a `~`): every
    /// other line went through them unchanged and would again. So the repeats run on
    /// those lines alone, batched into one text, and cost nothing on the rest. PEM keys
    /// and stack traces are never created by an edit, and their stages are idempotent.
    /// `None` when nothing changed.
    fn touch_up(&self, text: &str) -> Option<String> {
        let b = text.as_bytes();
        let mut marks: Vec<usize> = memchr::memmem::find_iter(b, MASK.as_bytes())
            .chain(memchr::memchr_iter(b'~', b))
            .collect();
        marks.sort_unstable();
        // Each mark's line start, searched back only to the previous mark: a long line
        // with many masks would otherwise be scanned back once per mask.
        let mut starts: Vec<usize> = Vec::new();
        let (mut scanned, mut start) = (0, 0);
        for p in marks {
            if let Some(i) = memchr::memrchr(b'\n', &b[scanned..p]) {
                start = scanned + i + 1;
            }
            scanned = p;
            if starts.last() != Some(&start) {
                starts.push(start);
            }
        }
        let lines: Vec<(usize, usize)> = starts
            .into_iter()
            .map(|s| (s, memchr::memchr(b'\n', &b[s..]).map_or(b.len(), |i| s + i)))
            .collect();
        let batch = lines
            .iter()
            .map(|&(s, e)| &text[s..e])
            .collect::<Vec<_>>()
            .join("\n");
        let mut current = Cow::Borrowed(batch.as_str());
        for _ in 0..MAX_EXTRA_ROUNDS {
            let mut next = Cow::Borrowed(&*current);
            replace_if_owned(&mut next, |t| self.homes.apply(t));
            replace_if_owned(&mut next, |t| self.line_stages_after_paths(t));
            match next {
                Cow::Owned(next) => current = Cow::Owned(next),
                Cow::Borrowed(_) => break,
            }
        }
        let Cow::Owned(current) = current else {
            return None;
        };
        let edited: Vec<&str> = current.split('\n').collect();
        // Masks never hold a line break; should that ever change, a whole round is right.
        if edited.len() != lines.len() {
            return Some(self.round(text).into_owned());
        }
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        for (&(s, e), line) in lines.iter().zip(edited) {
            out.push_str(&text[copied..s]);
            out.push_str(line);
            copied = e;
        }
        out.push_str(&text[copied..]);
        Some(out)
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

/// The secret families, by layer: `"vendor"` (a), `"structural"` (b), `"generic"` (c).
/// What `docs/sanitizing.md` lists, which a test checks.
#[cfg(test)]
pub(crate) fn families() -> Vec<(&'static str, &'static str)> {
    let mut all: Vec<_> = vendor::RULES.iter().map(|r| ("vendor", r.family)).collect();
    all.extend(structural::RULES.iter().map(|r| ("structural", r.family)));
    all.extend(pem::FAMILIES.iter().map(|f| ("structural", *f)));
    all.extend(assign::KEYWORDS.iter().map(|k| ("generic", k.family)));
    all.extend(assign::PROSE_FAMILIES.iter().map(|f| ("generic", *f)));
    all
}

/// Sizes `out`, the edited copy of a text, for the whole text on its first write: it then
/// grows without copying, and text that no rule edits still allocates nothing.
fn reserve_copy(out: &mut String, len: usize) {
    if out.capacity() == 0 {
        out.reserve(len + len / 64 + 64);
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
    fn what_is_left_alone_byte_for_byte() {
        let text = "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main, abbrev 3f78685)\n\
                    md5 9e107d9d372bb6826bd81d3542a419d6 sha1 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12\n\
                    sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n\
                    request 123e4567-e89b-12d3-a456-426614174000 and 550E8400-E29B-41D4-A716-446655440000\n\
                    \"integrity\": \"sha512-Kq5sNclPz7QV2+lfQIuuTVbYz8Rz0aA7x3hG1Lw9Yk2dE4fRt6uJ8mN0pQ3sV5x==\"\n\
                    golang.org/x/text v0.14.0 h1:ScX5w1eTa3QqT8oi6+ziP7dTV1S2+ALU0bI+0zXKWiQ=\n\
                    golang.org/x/text v0.14.0/go.mod h1:18ZOQIKpY8NJVqYksKHtTdi31H5itFRjB5/qKTNYzSU=\n\
                    image: ghcr.io/org/app@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945\n\
                    <img src=\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==\">\n\
                    serde 1.0.219, tokio v1.45.1, node v20.11.0-alpine, 2.0.0-rc.1+build.42\n\
                    https://github.com/org/repo/blob/main/src/lib.rs#L10 and https://api.example.com:8443/v1/items?page=2&limit=50\n\
                    git@github.com:org/repo.git ssh://git@host:22/x postgres://db:5432/app\n\
                    OPENAI_API_KEY ANTHROPIC_API_KEY GITHUB_TOKEN AWS_SECRET_ACCESS_KEY $DB_PASSWORD ${NPM_TOKEN}\n\
                    token = get_token(); api_key: str; password: Optional[str] = None; secret_key = settings.SECRET_KEY\n\
                    GITHUB_TOKEN=ghp_[REDACTED] Authorization: Bearer [REDACTED] https://u:[REDACTED]@h\n\
                    -----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUZ3VpZGVsaW5lcy1leGFtcGxl\n-----END CERTIFICATE-----\n\
                    ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHb0Y3VwZGF0ZXMtYXJlLXB1YmxpYw me@host\n\
                    pk_live_51HqLyjWDarjtT1zdp7dc and pk.eyJ1IjoiYWJjIiwiYSI6IjEyMyJ9.public\n";
        let sanitizer = Sanitizer::new(Some("/root"));
        let out = sanitizer.sanitize(text);
        assert_eq!(out, text);
        assert!(matches!(out, Cow::Borrowed(_)));
    }

    #[test]
    fn every_context_around_a_token() {
        let cases = [
            (GHP.to_string(), "ghp_[REDACTED]".to_string()),
            (format!("{GHP}."), "ghp_[REDACTED].".to_string()),
            (format!("[{GHP}]"), "[ghp_[REDACTED]]".to_string()),
            (format!("f({GHP}),"), "f(ghp_[REDACTED]),".to_string()),
            (
                format!("<{GHP}>&x:{GHP};"),
                "<ghp_[REDACTED]>&x:ghp_[REDACTED];".to_string(),
            ),
            (format!("{GHP}\r\n"), "ghp_[REDACTED]\r\n".to_string()),
            (
                format!("\x1b[32m{GHP}\x1b[0m"),
                "\x1b[32mghp_[REDACTED]\x1b[0m".to_string(),
            ),
            (
                format!("\\u001b[32m{GHP}\\u001b[0m"),
                "\\u001b[32mghp_[REDACTED]\\u001b[0m".to_string(),
            ),
            (
                format!(r#"{{\"text\":\"key:\n{GHP}\"}}"#),
                r#"{\"text\":\"key:\nghp_[REDACTED]\"}"#.to_string(),
            ),
            (
                format!(r#"{{"text":"a\t{OPENAI_PROJ}\u0026b=c"}}"#),
                r#"{"text":"a\tsk-proj-[REDACTED]\u0026b=c"}"#.to_string(),
            ),
            (
                format!(r#""url":"https:\/\/x.io\/?t={GHP}\u0026y=1""#),
                r#""url":"https:\/\/x.io\/?t=ghp_[REDACTED]\u0026y=1""#.to_string(),
            ),
            (
                format!("q=%22{GHP}%22&r=%20{OPENAI_PROJ}%0A"),
                "q=%22ghp_[REDACTED]%22&r=%20sk-proj-[REDACTED]%0A".to_string(),
            ),
            (format!("\\u0026{GHP}"), "\\u0026ghp_[REDACTED]".to_string()),
        ];
        for (input, expected) in cases {
            assert_eq!(sanitize(&input), expected, "input: {input:?}");
        }
    }

    #[test]
    fn masks_keep_only_the_public_prefix() {
        // Whatever a token's context, nothing of it survives past its prefix: not one
        // trailing character.
        for token in [GHP, OPENAI_PROJ] {
            let body = &token[token.len() - 12..];
            for wrap in ["{}", "\"{}\"", "{}=", "{}-suffix", "{}_x", "{}\\n", "({})"] {
                let out = sanitize(&wrap.replace("{}", token));
                assert!(!out.contains(body), "{out}");
            }
        }
    }

    #[test]
    fn there_are_sixty_families_and_the_docs_list_them_all() {
        let families = families();
        let count = |layer| families.iter().filter(|(l, _)| *l == layer).count();
        assert!(families.len() >= 60, "{} families", families.len());
        assert!(count("vendor") >= 40 && count("structural") >= 15 && count("generic") >= 8);
        let docs = include_str!("../../docs/sanitizing.md");
        for (layer, family) in &families {
            assert!(
                docs.contains(&format!("`{family}`")),
                "docs/sanitizing.md does not list the {layer} family `{family}`"
            );
        }
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

    /// Inputs on which `cargo fuzz run sanitize` found sanitizing not idempotent, exactly
    /// as the fuzz target reads them (lossy UTF-8).
    #[test]
    fn fuzz_regressions() {
        let inputs: [&[u8]; 2] = [
            // A PEM body line that read as a header or not depending on its length, which
            // the assignment rule's mask then changed.
            b"-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD89vcNLYLInpassword: \xc4\xc4\
              \xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\
              \xc4\xc4\xc4FEX6Ppy1tPf9Cnzj4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\
              \xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\
              \xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\xc4\
              \xc4\xc4\xc4p4WGeKLs1Pt8E KEY---r--\n",
            // A folded Go trace whose marker line, before a stray `\t…go:` line, read as a
            // frame on the second pass.
            b"eExpdock\x8dmiaen.rzb()\n\t/a.go:1 h\xe8hhhhhh+01\nA\xef\xbf\xbd\xef\xbf\xbdrf()\n\t\
              /a.go:1 hhhhhhh+0x1\nA\xef\xbf\xbd\xef\xbf\xbdN=1f()\n\t/a.go:x1\nAf()\n\t/a.go:1 h\
              \xe8hhhhhh+0x1\n\xbf\xbd\xef\xbf\xbd\xefArf()\n\t/a.go:1 hhhhhhh+0x1\nA()\n\t/a.go:1\
              \x20hhhhhhh+0x1\nA\xef\xbf\xbd\xef\xbf\xbdN=1f()\n\t/a.go:x1\nAf()\n\t/a.go:1 h\xe8hhhh\
              hh+0x\xef\xbf\xbd\xef\xbf\xbdN=1f()\n\t/a.go:1 +authorization%3A%200x1\nA\xef\xbf\
              \xbd\xef\xbf[\xbdN=1_pat_9\n",
        ];
        let sanitizer = Sanitizer::new(Some("/root"));
        for bytes in inputs {
            let input = String::from_utf8_lossy(bytes);
            let once = sanitizer.sanitize(&input).into_owned();
            assert_eq!(sanitizer.sanitize(&once), once, "input: {input:?}");
        }
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
        /// quotes, escapes, masks, frame lines, PEM armour.
        fn piece() -> impl Strategy<Value = String> {
            let literals: Vec<String> = [
                "sk-",
                "sk-ant-api03-",
                "sk-proj-",
                "sk-or-v1-",
                "ghp_",
                "github_pat_",
                "glpat-",
                "AKIA",
                "xoxb-",
                "xoxe.xoxp-",
                "AIza",
                "ya29.",
                "npm_",
                "hf_",
                "eyJ",
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.",
                "SK",
                "key-",
                "-us1",
                "Q~",
                "sig=",
                "AccountKey=",
                ":AA",
                "https://hooks.slack.com/services/",
                "https://discord.com/api/webhooks/",
                "Authorization: Bearer ",
                "authorization%3A%20Basic%20",
                "bearer ",
                "x-api-key: ",
                "://u:",
                "%3A%2F%2Fu%3A",
                "%40",
                "@",
                "API_KEY=",
                "\"password\": \"",
                "password: ",
                "Password=",
                ";Pwd=",
                "token: ",
                "auth=",
                "Cookie: sessionid=",
                "; token=",
                "curl -u a:",
                "login me password ",
                "mysql -p",
                "--password ",
                "aws_secret_access_key=",
                "\"SessionToken\":\"",
                "<password>",
                "</password>",
                "[REDACTED]",
                "/home/",
                "/Users/",
                "C:\\Users\\",
                "\"C:\\Users\\J S\\",
                "/root",
                "-----BEGIN RSA PRIVATE KEY-----",
                "-----END RSA PRIVATE KEY-----",
                "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ",
                "\\n",
                "\\\"",
                "\\u0026",
                "\\/",
                "%20",
                "\x1b[31m",
                "\\u001b[0m",
                "C:\\\\Users\\\\",
                "Basic ",
                "export DB_PASSWORD=",
                "_TOKEN",
                ": str = ",
                "\r\n",
                "    at f (a.js:1:2)\n",
                "\\n    at f (a.js:1:2)",
                "  File \"a.py\", line 1, in f\n    g()\n",
                "  3: a::b\n",
                "main.f()\n\t/a.go:1 +0x1\n",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            prop_oneof![
                4 => prop::sample::select(literals),
                2 => "[A-Za-z0-9]{1,40}",
                1 => "[A-Za-z0-9+/=_-]{16,60}",
                1 => "[ -~]{1,20}",
                1 => "[ \n\t\"'=:;,.()\\[\\]{}/\\\\&%-]{1,4}",
                1 => "\\PC{1,8}",
            ]
        }

        /// Built once: compiling the rules for every case would dominate the run time.
        static SANITIZER: std::sync::LazyLock<Sanitizer> =
            std::sync::LazyLock::new(|| Sanitizer::new(Some("/root")));

        fn text() -> impl Strategy<Value = String> {
            prop::collection::vec(piece(), 0..32).prop_map(|v| v.concat())
        }

        /// Text built only from pieces that are not secret-shaped in any combination.
        fn clean_text() -> impl Strategy<Value = String> {
            let word = prop_oneof![
                "[0-9a-f]{40}",
                "[0-9a-f]{7}",
                "[0-9a-f]{64}",
                "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                "[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}",
                "sha512-[A-Za-z0-9+/]{40}==",
                "h1:[A-Za-z0-9+/]{43}=",
                "sha256:[0-9a-f]{64}",
                "data:image/png;base64,[A-Za-z0-9+/]{40}==",
                "v?[0-9]{1,2}\\.[0-9]{1,2}\\.[0-9]{1,2}(-rc\\.[0-9])?",
                "https://[a-z]{3,8}\\.com(:[0-9]{4})?/[a-z]{1,8}(\\?[a-z]=[0-9])?",
                "[a-z]{1,10}",
                "[A-Z][a-z]{1,8}",
                "[A-Z]{2,6}_[A-Z]{2,6}_(KEY|TOKEN|SECRET|PASSWORD)",
                Just("OPENAI_API_KEY".to_string()),
                Just("process.env.OPENAI_API_KEY".to_string()),
                Just("${GITHUB_TOKEN}".to_string()),
                Just("ghp_[REDACTED]".to_string()),
                Just("Authorization: Bearer [REDACTED]".to_string()),
                Just("/usr/local/bin".to_string()),
                Just("é".to_string()),
                Just("漢字".to_string()),
            ];
            let sep = prop_oneof![
                Just(" "),
                Just("\n"),
                Just(", "),
                Just("; "),
                Just("/"),
                Just("\r\n"),
                Just("\""),
            ];
            prop::collection::vec((word, sep), 0..40)
                .prop_map(|v| v.into_iter().map(|(w, s)| w + s).collect())
        }

        /// A vendor token (prefix, random body) in a random context that bounds it.
        fn token_in_context() -> impl Strategy<Value = (String, String, String)> {
            let token = prop_oneof![
                "[A-Za-z0-9]{33}".prop_map(|b| ("ghp_".to_string(), b + "a1Z")),
                "[A-Za-z0-9_-]{40}".prop_map(|b| ("sk-proj-".to_string(), b + "a1Z")),
                "[A-Za-z0-9_-]{90}".prop_map(|b| ("sk-ant-api03-".to_string(), b + "a1Z")),
                "[A-Za-z0-9_]{79}".prop_map(|b| ("github_pat_".to_string(), b + "a1Z")),
                "[A-Za-z0-9]{49}".prop_map(|b| ("gsk_".to_string(), b + "a1Z")),
                "[A-Za-z0-9]{33}".prop_map(|b| ("npm_".to_string(), b + "a1Z")),
                "[A-Za-z0-9_-]{17}".prop_map(|b| ("glpat-".to_string(), b + "a1Z")),
                "[A-Za-z0-9_-]{32}".prop_map(|b| ("AIza".to_string(), b + "a1Z")),
                "[0-9]{12}-[A-Za-z0-9]{20}".prop_map(|b| ("xoxb-".to_string(), b + "a1Z")),
                "[A-Za-z0-9]{96}".prop_map(|b| ("sk_live_".to_string(), b + "a1Z")),
                "[a-z]{17}[A-Z]{17}".prop_map(|b| ("hf_".to_string(), b)),
            ];
            let before = prop::sample::select(vec![
                "",
                " ",
                "\"",
                "'",
                "\\n",
                "\\t",
                "\x1b[31m",
                "\\u001b[1m",
                "%20",
                "%22",
                "=",
                "(",
                "[",
                ":",
                "\\u0026",
                "\\\"",
                "Bearer ",
                "token ",
                "://u:",
                "\r\n",
                "<",
                ",",
            ]);
            let after = prop::sample::select(vec![
                "",
                ".",
                "\"",
                "'",
                "\\n",
                ")",
                "]",
                "&",
                ",",
                ">",
                ":",
                "\r\n",
                "%22",
                "\x1b[0m",
                "\\u001b[0m",
                "\\\"",
                ";",
                " ",
                "@h",
                "\\u0026x=1",
                "}",
            ]);
            (token, before, after)
                .prop_map(|((prefix, body), b, a)| (format!("{b}{prefix}{body}{a}"), prefix, body))
        }

        /// A random secret of 24+ characters with digits and both cases, in one of the
        /// contexts that the second round of rules reads: a property key, a printed
        /// struct, a sentence, a header map, a pre-signed URL, a percent-encoded query, an
        /// SDK constructor, an encryption key's name. Returns the text and the secret.
        fn secret_in_new_context() -> impl Strategy<Value = (String, String)> {
            let secret = "[a-z]{4}[0-9]{2}[A-Z]{4}[0-9]{2}[A-Za-z0-9]{12,30}";
            let context = prop::sample::select(vec![
                "spring.datasource.password={}",
                "app.jwt.secret: {}",
                "java -Dapp.jwt.secret={} -jar a.jar",
                "&{Host:db Password:{} DB:0}",
                "map[client_secret:{} user:app]",
                "The staging password is {} for now.",
                "My API key is {}.",
                "headers[\"Authorization\"] = \"Basic {}\"",
                "xhr.setRequestHeader('Authorization', 'Bearer {}');",
                "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={}&x=1",
                "?next=https%3A%2F%2Fx.io%2Fcb%3Ftoken%3D{}%26v%3D2",
                "ENCRYPTION_KEY={}",
                "ALGOLIA_ADMIN_KEY={}",
                "\"SecretString\": \"{}\"",
            ]);
            (secret, context).prop_map(|(secret, context)| (context.replace("{}", &secret), secret))
        }

        /// Look-alikes that the second round must leave byte for byte: placeholders after
        /// a vendor prefix, paths to credentials, references to secret managers.
        fn look_alike() -> impl Strategy<Value = String> {
            let prefix = prop::sample::select(vec![
                "sk-",
                "sk-ant-api03-",
                "sk-proj-",
                "ghp_",
                "github_pat_",
                "xoxb-",
                "glpat-",
                "hf_",
                "npm_",
                "AKIA",
                "AIza",
                "gsk_",
                "sk_live_",
            ]);
            let filler = prop::sample::select(vec![
                "...",
                "…",
                "***",
                "xxxxxxxxxxxxxxxxxxxx",
                "XXXXXXXXXXXXXXXXXXXX",
            ]);
            let name = prop::sample::select(vec![
                "OPENAI_API_KEY",
                "GITHUB_TOKEN",
                "DB_PASSWORD",
                "CLIENT_SECRET",
                "API_TOKEN",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "TLS_PRIVATE_KEY",
                "ENCRYPTION_KEY",
            ]);
            let placeholder =
                (name.clone(), prefix, filler).prop_map(|(n, p, f)| format!("{n}={p}{f}"));
            let root = prop::sample::select(vec![
                "/etc/",
                "/run/secrets/",
                "/var/secrets/",
                "~/.config/",
                "./",
                "/opt/app/",
            ]);
            let path = (
                name.clone(),
                root,
                "[a-z][a-z_-]{1,12}",
                prop::sample::select(vec![".json", ".pem", ".key", ""]),
            )
                .prop_map(|(n, r, file, ext)| format!("{n}={r}{file}{ext}"));
            let arn = (name, "[0-9]{12}", "[a-z]{2,8}/[a-z]{2,8}", "[A-Za-z0-9]{6}").prop_map(
                |(n, account, path, suffix)| {
                    format!("{n}=arn:aws:secretsmanager:us-east-1:{account}:secret:{path}-{suffix}")
                },
            );
            prop_oneof![placeholder, path, arn]
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
                prop_assert!(std::str::from_utf8(once.as_bytes()).is_ok());
                let twice = SANITIZER.sanitize(&once).into_owned();
                prop_assert_eq!(twice, once);
            }

            #[test]
            fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
                let input = String::from_utf8_lossy(&bytes);
                let once = SANITIZER.sanitize(&input).into_owned();
                prop_assert_eq!(SANITIZER.sanitize(&once).into_owned(), once);
            }

            #[test]
            fn clean_text_is_borrowed(input in clean_text()) {
                let out = SANITIZER.sanitize(&input);
                prop_assert!(matches!(out, Cow::Borrowed(_)), "changed: {:?}", out);
            }

            #[test]
            fn a_secret_in_a_new_context_never_survives((input, secret) in secret_in_new_context()) {
                let out = SANITIZER.sanitize(&input);
                prop_assert!(!out.contains(&secret), "{:?} -> {:?}", input, out);
                prop_assert!(!out.contains(&secret[secret.len() - 6..]), "{:?} -> {:?}", input, out);
                prop_assert_eq!(SANITIZER.sanitize(&out).into_owned(), out.into_owned());
            }

            #[test]
            fn look_alikes_are_left_alone(input in look_alike(), (before, after) in (clean_text(), clean_text())) {
                for text in [input.clone(), format!("{before}\n{input}\n{after}")] {
                    let out = SANITIZER.sanitize(&text);
                    prop_assert!(matches!(out, Cow::Borrowed(_)), "{:?} -> {:?}", text, out);
                }
            }

            #[test]
            fn a_token_never_survives_its_context(
                (input, prefix, body) in token_in_context(),
                (before, after) in (text(), text()),
            ) {
                for text in [input.clone(), format!("{before}\n{input}\n{after}")] {
                    let out = SANITIZER.sanitize(&text);
                    prop_assert!(!out.contains(&body), "{:?} -> {:?}", text, out);
                    // Not even the token's last characters.
                    let tail = &body[body.len() - 6..];
                    prop_assert!(!out.contains(tail), "{:?} -> {:?}", text, out);
                    prop_assert!(out.contains(MASK));
                    let _ = &prefix;
                }
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
