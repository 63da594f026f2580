//! The table of regex-shaped secrets: prefixed vendor tokens, `Authorization` headers, bare
//! bearer tokens and passwords in URLs. Adding a family is adding one `TokenRule` entry.

use std::borrow::Cow;

use super::gated::GatedRegex;
use super::value::{is_placeholder, looks_random, reads_as_code};
use super::MASK;

/// One family of secrets found by a regex.
#[derive(Debug)]
pub(crate) struct TokenRule {
    /// Shown only in test failures and debugging; no output depends on it.
    pub family: &'static str,
    /// Case-sensitive literals of which one must occur before the regex runs at all. Most
    /// text contains none of them, so most text never reaches a regex.
    pub gates: &'static [&'static str],
    /// `{LEAD}` expands to the left boundary below. A match must not span a line break
    /// (the regex runs only on lines that hold a gate). Everything the regex matches is kept
    /// except the named group `secret`, which becomes [`MASK`]; so whatever a family may
    /// keep (its public prefix, a header name, a scheme) sits outside that group.
    pub pattern: &'static str,
    /// Decides whether this match is really a secret, from the text of `secret` and the
    /// rest of its line.
    pub accept: fn(secret: &str, after: &str) -> bool,
}

/// A token starts at an ASCII word boundary, or right after a JSON escape (`\n`, `\t`, `\r`)
/// or an SGR colour code (raw or JSON-escaped): those end in a letter, so `\b` alone would
/// miss exactly the tokens that agents print in logs and JSON transcripts. The regex crate
/// has no look-behind, so the escape is matched and kept as part of the non-secret text.
const LEAD: &str = r"(?:(?-u:\b)|\\[nrt]|\x1b\[[0-9;]*m|\\u001[bB]\[[0-9;]*m)";

/// `Authorization` schemes whose credential follows after a space. Also used to tell a
/// scheme word from a raw credential.
const AUTH_SCHEMES: &[&str] = &[
    "bearer",
    "basic",
    "token",
    "digest",
    "negotiate",
    "ntlm",
    "dpop",
    "apikey",
];

/// Order matters only for how a secret is masked, never for whether: the specific vendor
/// rules run first so that a vendor token keeps its public prefix wherever it appears, and
/// every rule leaves alone a candidate that is already followed by [`MASK`].
pub(crate) const TOKEN_RULES: &[TokenRule] = &[
    TokenRule {
        family: "anthropic",
        gates: &["sk-ant-"],
        pattern: r"{LEAD}sk-ant-(?P<secret>[A-Za-z0-9_-]{20,})",
        accept: mixed_alnum,
    },
    TokenRule {
        family: "openai",
        gates: &["sk-"],
        pattern: r"{LEAD}sk-(?:proj-|svcacct-|admin-)?(?P<secret>[A-Za-z0-9_-]{20,})",
        accept: mixed_alnum,
    },
    TokenRule {
        family: "aws-access-key-id",
        gates: &["AKIA", "ASIA", "ABIA", "ACCA"],
        pattern: r"{LEAD}(?:AKIA|ASIA|ABIA|ACCA)(?P<secret>[A-Z0-9]{16})(?-u:\b)",
        accept: always,
    },
    TokenRule {
        family: "github-classic",
        gates: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        pattern: r"{LEAD}gh[pousr]_(?P<secret>[A-Za-z0-9]{36,})",
        accept: always,
    },
    TokenRule {
        family: "github-fine-grained",
        gates: &["github_pat_"],
        pattern: r"{LEAD}github_pat_(?P<secret>[A-Za-z0-9_]{22,})",
        accept: always,
    },
    TokenRule {
        family: "slack-token",
        gates: &["xox"],
        pattern: r"{LEAD}xox[bpars]-(?P<secret>[A-Za-z0-9-]{10,})",
        accept: has_digit,
    },
    TokenRule {
        family: "slack-webhook",
        gates: &["hooks.slack.com"],
        // `\/` is how JSON writers that escape slashes print the same URL.
        pattern: r"https?:(?:\\?/){2}hooks\.slack\.com(?:\\?/)(?:services|workflows|triggers)(?:\\?/)(?P<secret>(?:[A-Za-z0-9_-]|\\?/){8,})",
        accept: always,
    },
    TokenRule {
        family: "authorization-scheme",
        gates: &["uthorization", "UTHORIZATION"],
        pattern: r#"{LEAD}(?i-u:(?:proxy-)?authorization(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?:bearer|basic|token|digest|negotiate|ntlm|dpop|apikey)[ \t]+)(?P<secret>[A-Za-z0-9._~+/=:-]+)"#,
        accept: not_placeholder,
    },
    TokenRule {
        // A header value without a scheme; it must look like a credential, since
        // "Authorization: required" is prose.
        family: "authorization-raw",
        gates: &["uthorization", "UTHORIZATION"],
        pattern: r#"{LEAD}(?i-u:(?:proxy-)?authorization(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?)(?P<secret>[A-Za-z0-9._~+/=:-]+)"#,
        accept: raw_credential,
    },
    TokenRule {
        family: "bearer",
        gates: &["earer", "EARER"],
        pattern: r"{LEAD}(?i-u:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)",
        accept: random_not_placeholder,
    },
    TokenRule {
        family: "url-password",
        gates: &["://", r":\/\/"],
        // The scheme stays outside the match so that the regex starts at the literal `:`.
        pattern: r#":(?:\\?/){2}[^\s:/?#@"'<>\\]*:(?P<secret>[^\s/?#@"'<>\\]+)@"#,
        accept: not_placeholder,
    },
];

/// A [`TokenRule`] with its regex and gates built.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    rule: &'static TokenRule,
    regex: GatedRegex,
}

impl CompiledRule {
    pub fn new(rule: &'static TokenRule) -> CompiledRule {
        let regex = GatedRegex::new(
            rule.family,
            rule.gates,
            &rule.pattern.replace("{LEAD}", LEAD),
        );
        assert!(
            regex.regex().capture_names().any(|n| n == Some("secret")),
            "secret rule {} has no `secret` group",
            rule.family
        );
        CompiledRule { rule, regex }
    }

    pub fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.regex.replace(text, MASK, |caps, line_end| {
            let secret = caps.name("secret")?;
            let after = &text[secret.end()..line_end];
            // Already masked by an earlier rule or an earlier round: masking again would
            // only stack masks.
            let masked = after.starts_with(MASK);
            (!masked && (self.rule.accept)(secret.as_str(), after)).then(|| secret.range())
        })
    }
}

fn always(_: &str, _: &str) -> bool {
    true
}

fn has_digit(secret: &str, _: &str) -> bool {
    secret.bytes().any(|b| b.is_ascii_digit())
}

/// Real keys are long base62 strings, so they contain all three classes; kebab-case words
/// that happen to start with `sk-` (`sk-spinner-double-bounce`) do not.
fn mixed_alnum(secret: &str, _: &str) -> bool {
    secret.bytes().any(|b| b.is_ascii_digit())
        && secret.bytes().any(|b| b.is_ascii_uppercase())
        && secret.bytes().any(|b| b.is_ascii_lowercase())
}

fn not_placeholder(secret: &str, _: &str) -> bool {
    !is_placeholder(secret)
}

fn random_not_placeholder(secret: &str, _: &str) -> bool {
    looks_random(secret) && !is_placeholder(secret)
}

/// Without a scheme the value could as well be code (`authorization: base64.decode(x)`,
/// `Authorization: WINBIO_PRESENCE_0`) or the scheme itself before a reference
/// (`Bearer $TOKEN`).
fn raw_credential(secret: &str, after: &str) -> bool {
    secret.len() >= 8
        && !AUTH_SCHEMES.iter().any(|w| w.eq_ignore_ascii_case(secret))
        && random_not_placeholder(secret, after)
        && !reads_as_code(secret)
        && !after.starts_with('(')
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    // Test values are random strings generated for these tests, split with `concat!` so
    // that secret scanners do not flag the source file.
    const ANT: &str = concat!(
        "sk-ant-api03-",
        "q7VbN2xK9mPzR4tLwY8cHf3Jd6GsUa1EoTn5Bi0Ml-_Zr7Xk2Qv9Wp4Hs8Dj3Fg6",
        "AA"
    );
    const ANT_ADMIN: &str = concat!("sk-ant-admin01-", "Tg5Xk2Rm9Qp4Lw7Nz3Bv8Hc6Jd1Fs0Ya");
    const ANT_OAT: &str = concat!("sk-ant-oat01-", "Hs8Dj3Fg6Kl1Zx4Cv7Bn0Mq2We5Rt9Yu");
    const ANT_ORT: &str = concat!("sk-ant-ort01-", "Pz4Lw7Nz3Bv8Hc6Jd1Fs0YaTg5Xk2Rm9Q");
    const OPENAI: &str = concat!("sk-", "Xk2Rm9Qp4Lw7Nz3Bv8HcT3BlbkFJ6Jd1Fs0YaTg5Pz4Lw7N");
    const OPENAI_PROJ: &str = concat!(
        "sk-proj-",
        "a8Fz2Kq9Lm4Xw7Rb3Tn6Yp1Hs5Dj0Gc-Ve_Uk8Mi2No4Ql7Pt9Ry3Sw6Zx1Ab5"
    );
    const OPENAI_SVC: &str = concat!("sk-svcacct-", "Ve8Uk2Mi4No7Ql9Pt3Ry6Sw1Zx5Ab0Cd");
    const AWS: &str = concat!("AKIA", "Q7XK2M9RZP4LW3NB");
    const AWS_STS: &str = concat!("ASIA", "Z3PL8QW2XK7RM4NV");
    const GHP: &str = concat!("ghp_", "R8kZ2mQ9pL4wX7nB3vH6cJ1dF5sG0aYtE2uK");
    const GHS: &str = concat!("ghs_", "N4vH6cJ1dF5sG0aYtE2uKR8kZ2mQ9pL4wX7q");
    const GH_PAT: &str = concat!(
        "github_pat_",
        "11ABCDE2F0q7VbN2xK9mPzR4t_LwY8cHf3Jd6GsUa1EoTn5Bi0MlZr7Xk2Qv9Wp4Hs8Dj3Fg6Kl1Zx4Cv7Bn0Mq2We5"
    );
    const XOXB: &str = concat!(
        "xoxb-",
        "2384756019283-4958671203948-Qz7Xk2Rm9Lp4Wn3Bv8Hc6Jd1"
    );
    const XOXP: &str = concat!("xoxp-", "5918273645-5029384756-6172839405-a9f3c2e8b7d1");
    const WEBHOOK: &str = concat!(
        "https://hooks.slack.com/services/",
        "T04QZ7XK2/B05RM9QPL/q7VbN2xK9mPzR4tLwY8cHf3J"
    );

    fn run(input: &str) -> String {
        let rules: Vec<CompiledRule> = TOKEN_RULES.iter().map(CompiledRule::new).collect();
        let mut text = input.to_string();
        for rule in &rules {
            text = rule.apply(&text).into_owned();
        }
        text
    }

    #[test]
    fn every_rule_compiles_under_its_own_name() {
        let mut families: Vec<_> = TOKEN_RULES.iter().map(|r| r.family).collect();
        families.sort_unstable();
        families.dedup();
        assert_eq!(families.len(), TOKEN_RULES.len());
        // Compiling panics with the family's name on a bad pattern.
        assert_eq!(
            TOKEN_RULES.iter().map(CompiledRule::new).count(),
            TOKEN_RULES.len()
        );
    }

    #[test]
    fn anthropic_keys_keep_only_the_vendor_prefix() {
        for key in [ANT, ANT_ADMIN, ANT_OAT, ANT_ORT] {
            assert_eq!(run(&format!("key={key}.")), "key=sk-ant-[REDACTED].");
        }
    }

    #[test]
    fn anthropic_lookalike_is_untouched() {
        let text = "the sk-ant-design-system-components package";
        assert_eq!(run(text), text);
    }

    #[test]
    fn openai_keys_keep_their_kind() {
        assert_eq!(run(&format!("({OPENAI})")), "(sk-[REDACTED])");
        assert_eq!(run(&format!("[{OPENAI_PROJ}]")), "[sk-proj-[REDACTED]]");
        assert_eq!(run(OPENAI_SVC), "sk-svcacct-[REDACTED]");
    }

    #[test]
    fn openai_lookalikes_are_untouched() {
        let text = "class=\"sk-spinner-double-bounce-animation\" risk-Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op task-2Xk9Rm4Lw7Nz3Bv8Hc6J";
        assert_eq!(run(text), text);
    }

    #[test]
    fn aws_access_key_ids_keep_the_prefix() {
        assert_eq!(
            run(&format!("aws_access_key_id = {AWS}\n{AWS_STS},")),
            "aws_access_key_id = AKIA[REDACTED]\nASIA[REDACTED],"
        );
    }

    #[test]
    fn aws_lookalikes_are_untouched() {
        // One character too many, and lowercase letters, are not access key ids.
        let text = concat!(
            "AKIA",
            "Q7XK2M9RZP4LW3NBX and AKIAq7xk2m9rzp4lw3nb and AKIA alone"
        );
        assert_eq!(run(text), text);
    }

    #[test]
    fn github_tokens_keep_the_prefix() {
        assert_eq!(
            run(&format!("\"{GHP}\", {GHS}. {GH_PAT}")),
            "\"ghp_[REDACTED]\", ghs_[REDACTED]. github_pat_[REDACTED]"
        );
    }

    #[test]
    fn github_lookalikes_are_untouched() {
        let text = "ghp_short and github_pat_ and myghp_R8kZ2mQ9pL4wX7nB3vH6cJ1dF5sG0aYtE2uK";
        assert_eq!(run(text), text);
    }

    #[test]
    fn slack_tokens_and_webhooks() {
        assert_eq!(
            run(&format!("SLACK={XOXB} {XOXP}\npost to {WEBHOOK}.")),
            "SLACK=xoxb-[REDACTED] xoxp-[REDACTED]\npost to https://hooks.slack.com/services/[REDACTED]."
        );
    }

    #[test]
    fn slack_lookalikes_are_untouched() {
        let text = "xoxb- and xoxo-hugs-and-kisses and https://hooks.slack.com/ and https://api.slack.com/apps";
        assert_eq!(run(text), text);
    }

    #[test]
    fn authorization_headers_in_every_dress() {
        let cases = [
            (
                "Authorization: Bearer abc.def-ghi",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                "> authorization: Basic dXNlcjpwYXNzd29yZA==\r\n",
                "> authorization: Basic [REDACTED]\r\n",
            ),
            (
                "Proxy-Authorization: token 9f8e7d6c5b4a",
                "Proxy-Authorization: token [REDACTED]",
            ),
            ("AUTHORIZATION: q8W3e5R7t9Y1u", "AUTHORIZATION: [REDACTED]"),
            (
                r#"curl -H "Authorization: Bearer x7Kq2" https://api.example.com"#,
                r#"curl -H "Authorization: Bearer [REDACTED]" https://api.example.com"#,
            ),
            (
                r#"{"authorization": "Bearer x7Kq2"}"#,
                r#"{"authorization": "Bearer [REDACTED]"}"#,
            ),
            (
                r#"{\"Authorization\":\"Bearer x7Kq2\"}"#,
                r#"{\"Authorization\":\"Bearer [REDACTED]\"}"#,
            ),
            (
                "\x1b[1mAuthorization\x1b[0m: x",
                "\x1b[1mAuthorization\x1b[0m: x",
            ),
            (
                "\\nAuthorization: Basic Zm9vOmJhcg==",
                "\\nAuthorization: Basic [REDACTED]",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(run(input), expected, "input: {input}");
        }
    }

    #[test]
    fn authorization_words_and_references_are_untouched() {
        let text =
            "Authorization: required\nthe Authorization header\nAuthorization: Bearer $TOKEN\n\
                    -H 'Authorization: Bearer <token>'\nauthorization: Bearer ${API_TOKEN}\n\
                    Authorization: Bearer YOUR_TOKEN\nAuthorization: Bearer [REDACTED]\n\
                    authorization_url: https://example.com/oauth\n\
                    pub Authorization: WINBIO_PRESENCE_0,\n\
                    authorization = base64.decodebytes(authorization)\n\
                    authorization: credentials3.token_type + \" \" + tokens.access_token";
        assert_eq!(run(text), text);
    }

    #[test]
    fn vendor_token_in_a_header_keeps_its_prefix() {
        assert_eq!(
            run(&format!("Authorization: token {GHP}")),
            "Authorization: token ghp_[REDACTED]"
        );
    }

    #[test]
    fn bare_bearer_tokens() {
        assert_eq!(
            run("sent bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl)"),
            "sent bearer [REDACTED])"
        );
    }

    #[test]
    fn bearer_in_a_json_escaped_log_line() {
        assert_eq!(
            run(r#"{\"msg\":\"sending\nBearer Zq8Wm3Xr7Kp2Ln9Vb4Tc\"}"#),
            r#"{\"msg\":\"sending\nBearer [REDACTED]\"}"#
        );
    }

    #[test]
    fn bearer_in_prose_is_untouched() {
        let text = "Bearer authentication_is_simple; Bearer tokens expire; Bearer a1b2c3";
        assert_eq!(run(text), text);
    }

    #[test]
    fn passwords_in_urls() {
        let cases = [
            (
                "postgres://app:hunter2@db:5432/x",
                "postgres://app:[REDACTED]@db:5432/x",
            ),
            ("redis://:s3cr3t@cache", "redis://:[REDACTED]@cache"),
            ("(https://user:pass@host)", "(https://user:[REDACTED]@host)"),
            (
                r#""https:\/\/u:p4ss@h.io""#,
                r#""https:\/\/u:[REDACTED]@h.io""#,
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(run(input), expected, "input: {input}");
        }
    }

    #[test]
    fn urls_without_passwords_are_untouched() {
        let text = "https://example.com:8443/a@b ssh://git@github.com/x.git \
                    postgres://app:${DB_PASSWORD}@db postgres://app:****@db http://[::1]:80/";
        assert_eq!(run(text), text);
    }
}
