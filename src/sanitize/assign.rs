//! Generic assignments of secrets: `DB_PASSWORD=…`, `"api_key": "…"`, `--token=…`,
//! `client_secret: …`. The key name decides that a value is a secret; the value decides
//! whether it is a real one or a placeholder, a reference or code.
//!
//! A hand-written scanner rather than a regex: the key keywords are case-insensitive and
//! sit at the end of a name of any length, which no literal prefilter can anchor on, and
//! deciding about the value needs the name and the kind of separator anyway.

use std::borrow::Cow;

use memchr::memmem;

use super::value::{
    ends_with_ignore_ascii_case, is_label, is_placeholder, looks_random, reads_as_code,
};
use super::MASK;

/// Literals of which one occurs in every name that `SUFFIXES` accepts, in the three
/// spellings names come in (`api_key`, `apiKey`/`ApiKey`, `API_KEY`).
const ANCHORS: &[&str] = &[
    "token", "Token", "TOKEN", "secret", "Secret", "SECRET", "passw", "Passw", "PASSW", "key",
    "Key", "KEY",
];

/// A name is a secret's name when it ends (ASCII case-insensitively) with one of these.
/// Plain `*_KEY` is left out on purpose: `PRIMARY_KEY`, `SORT_KEY`, `CACHE_KEY` are not
/// secrets.
const SUFFIXES: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "secretkey",
    "secret_key",
    "secret-key",
    "accesskey",
    "access_key",
    "access-key",
    "privatekey",
    "private_key",
    "private-key",
];

/// Names that end like a secret's but hold none: pagination and progress tokens.
const NOT_SECRETS: &[&str] = &[
    "progresstoken",
    "progress_token",
    "pagetoken",
    "page_token",
    "nexttoken",
    "next_token",
    "continuationtoken",
    "continuation_token",
    "synctoken",
    "sync_token",
];

/// Bounds on how far a candidate is followed, so that pathological input (megabytes of
/// `tokentoken…` or an unterminated quote) stays linear.
const MAX_NAME: usize = 128;
const MAX_VALUE: usize = 1024;

/// Values shorter than this are left alone: `token: str`, `password: ""`, `token=abc`.
const MIN_VALUE_CHARS: usize = 8;

#[derive(Debug)]
pub(crate) struct Assignments {
    anchors: Vec<memmem::Finder<'static>>,
}

/// How sure the context makes us that the value is a secret rather than a word or code.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A password in quotes, or `NAME=value` in env/shell style: anything that is not a
    /// placeholder or reference. Passwords are chosen by people and need not look random.
    Literal,
    /// Any other quoted value: a string, but `"progress-1"` or `"fresh-token"` is not a
    /// secret, so it must look random.
    Quoted,
    /// An unquoted value after `:` or ` = ` may be code (`token: TokenType`,
    /// `password = pw`): it must look random and not read as code.
    Unquoted,
}

impl Assignments {
    pub fn new() -> Assignments {
        Assignments {
            anchors: ANCHORS
                .iter()
                .map(|a| memmem::Finder::new(a.as_bytes()))
                .collect(),
        }
    }

    pub fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let bytes = text.as_bytes();
        let mut names = Vec::new();
        for anchor in &self.anchors {
            for pos in anchor.find_iter(bytes) {
                if let Some((start, end)) = name_around(bytes, pos, anchor.needle().len()) {
                    let name = &bytes[start..end];
                    let is =
                        |list: &[&str]| list.iter().any(|s| ends_with_ignore_ascii_case(name, s));
                    if is(SUFFIXES) && !is(NOT_SECRETS) {
                        names.push((start, end));
                    }
                }
            }
        }
        if names.is_empty() {
            return Cow::Borrowed(text);
        }
        // `SECRET_KEY` is found through both `SECRET` and `KEY`.
        names.sort_unstable();
        names.dedup();

        let mut out = String::new();
        let mut copied = 0;
        for (start, end) in names {
            if start < copied {
                continue;
            }
            let Some((vs, ve)) = secret_value(text, start, end) else {
                continue;
            };
            if vs < copied {
                continue;
            }
            out.push_str(&text[copied..vs]);
            out.push_str(MASK);
            copied = ve;
        }
        if copied == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// The whole name around an anchor found at `pos`, or `None` when the name is too long to
/// be one or is a shell reference (`$TOKEN`, `${TOKEN:-default}`) rather than an assignment.
fn name_around(b: &[u8], pos: usize, len: usize) -> Option<(usize, usize)> {
    let mut start = pos;
    while start > 0 && is_name_byte(b[start - 1]) {
        start -= 1;
        if pos - start > MAX_NAME {
            return None;
        }
    }
    // In JSON-escaped text `\nAPI_KEY=` reads as the name `nAPI_KEY`.
    if start > 0 && b[start - 1] == b'\\' && matches!(b[start], b'n' | b'r' | b't') && start < pos {
        start += 1;
    }
    let mut end = pos + len;
    while end < b.len() && is_name_byte(b[end]) {
        end += 1;
        if end - pos > MAX_NAME {
            return None;
        }
    }
    let before = if start > 0 { b[start - 1] } else { b' ' };
    if before == b'$' || (before == b'{' && start >= 2 && b[start - 2] == b'$') {
        return None;
    }
    Some((start, end))
}

/// Skips one SGR colour code, raw (`ESC[1;31m`) or JSON-escaped (`\u001b[0m`).
fn skip_ansi(b: &[u8], i: usize) -> usize {
    let rest = &b[i..];
    let body = if rest.starts_with(b"\x1b[") {
        2
    } else if rest.len() >= 7 && rest[..6].eq_ignore_ascii_case(b"\\u001b") && rest[6] == b'[' {
        7
    } else {
        return i;
    };
    let mut j = i + body;
    while j < b.len() && (b[j].is_ascii_digit() || b[j] == b';') {
        j += 1;
    }
    if j < b.len() && b[j] == b'm' {
        j + 1
    } else {
        i
    }
}

fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t') {
        i += 1;
    }
    i
}

/// A quote, plain or JSON-escaped: returns its bytes.
fn quote_at(b: &[u8], i: usize) -> Option<&[u8]> {
    match b.get(i..)? {
        [b'\\', b'"' | b'\'', ..] => Some(&b[i..i + 2]),
        [b'"' | b'\'' | b'`', ..] => Some(&b[i..i + 1]),
        _ => None,
    }
}

/// Bytes that end an unquoted value. `<` and `{` are here so that `<YOUR_KEY>` and
/// `{{ secrets.X }}` give an empty value; `(` so that a call is recognised.
fn ends_unquoted(b: u8) -> bool {
    b.is_ascii_whitespace()
        || b.is_ascii_control()
        || matches!(
            b,
            b'"' | b'\''
                | b'`'
                | b'\\'
                | b','
                | b';'
                | b'&'
                | b'|'
                | b'('
                | b')'
                | b'{'
                | b'}'
                | b'<'
        )
}

/// The byte range of the value assigned to the name at `start..end`, if it is a secret.
fn secret_value(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let mut i = end;
    if let Some(q) = quote_at(b, i) {
        i += q.len();
    }
    let (i, sep) = separator(b, skip_ansi(b, i))?;
    let name = &text[start..end];
    let key = Key {
        name,
        env_style: sep == Sep::Tight && is_env_name(name.as_bytes()),
        password: ["password", "passwd"]
            .iter()
            .any(|s| ends_with_ignore_ascii_case(name.as_bytes(), s)),
    };
    value_at(text, i, &key, sep == Sep::Colon)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sep {
    /// `=` with no blank on either side, as in `.env` files and shells.
    Tight,
    /// `:` alone, which may also start a type annotation.
    Colon,
    /// Any other: ` = `, `:=`, `=>`, `: ` after a quoted key.
    Other,
}

/// Parses blanks, a separator and blanks from `i`; returns where the value starts.
fn separator(b: &[u8], i: usize) -> Option<(usize, Sep)> {
    let at = skip_blanks(b, i);
    let rest = &b[at..];
    let (len, sep) = if rest.starts_with(b":=") || rest.starts_with(b"=>") {
        (2, Sep::Other)
    } else if rest.first() == Some(&b'=') && !matches!(rest.get(1), Some(b'=' | b'~')) {
        (1, Sep::Tight)
    } else if rest.first() == Some(&b':') && rest.get(1) != Some(&b':') {
        (1, Sep::Colon)
    } else {
        return None;
    };
    let value = skip_blanks(b, at + len);
    let sep = match sep {
        Sep::Tight if at != i || value != at + len => Sep::Other,
        sep => sep,
    };
    Some((skip_ansi(b, value), sep))
}

/// What the name of an assignment says about its value.
struct Key<'a> {
    name: &'a str,
    /// `NAME=value`, where a value is a literal string even when it is a plain word.
    env_style: bool,
    /// Passwords are chosen by people: they need not look random and may hold spaces.
    password: bool,
}

fn value_at(text: &str, i: usize, key: &Key, may_be_typed: bool) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let (vs, ve, kind) = if let Some(q) = quote_at(b, i) {
        let kind = if key.password || key.env_style {
            Kind::Literal
        } else {
            Kind::Quoted
        };
        let vs = i + q.len();
        let window = &b[vs..b.len().min(vs + MAX_VALUE)];
        let line = &window[..memchr::memchr(b'\n', window).unwrap_or(window.len())];
        match memmem::find(line, q) {
            Some(n) => (vs, vs + n, kind),
            // No closing quote on the line (the text was cut, or the quote is an
            // apostrophe): judge the word after it.
            None => (vs, unquoted_end(b, vs)?, kind),
        }
    } else {
        let ve = unquoted_end(b, i)?;
        if b.get(ve) == Some(&b'(') {
            return None;
        }
        // `apiKey: string = "…"`, `api_key: str = "…"`: what follows `:` was a type.
        if may_be_typed {
            if let Some((after, Sep::Other | Sep::Tight)) = separator(b, ve) {
                let typed = Key {
                    env_style: false,
                    ..*key
                };
                return value_at(text, after, &typed, false);
            }
        }
        (
            i,
            ve,
            if key.env_style {
                Kind::Literal
            } else {
                Kind::Unquoted
            },
        )
    };
    let value = &text[vs..ve];
    // A URL is where a secret is used, not the secret; its password is the URL rule's.
    let random = || looks_random(value) && !value.contains("://");
    let secret = value.chars().count() >= MIN_VALUE_CHARS
        && !is_placeholder(value)
        && !is_label(value, key.name)
        && (key.password || !value.contains(char::is_whitespace))
        && match kind {
            Kind::Literal => true,
            Kind::Quoted => random(),
            Kind::Unquoted => random() && !reads_as_code(value),
        };
    secret.then_some((vs, ve))
}

/// End of an unquoted value starting at `i`; `None` when there is none or it is too long
/// to be a secret.
fn unquoted_end(b: &[u8], i: usize) -> Option<usize> {
    let limit = b.len().min(i + MAX_VALUE);
    let mut j = i;
    while j < limit && !ends_unquoted(b[j]) {
        j += 1;
    }
    (j > i && (j < limit || limit == b.len())).then_some(j)
}

/// `DB_PASSWORD`, `export`ed or not: in `.env` files and shells a value after `=` is a
/// literal string even when it is a plain word.
fn is_env_name(name: &[u8]) -> bool {
    name.iter().any(|b| b.is_ascii_uppercase())
        && name
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn run(input: &str) -> String {
        Assignments::new().apply(input).into_owned()
    }

    #[test]
    fn env_and_shell_assignments() {
        let input = "DB_PASSWORD=postgres123\nexport GITLAB_TOKEN=Zq8Wm3Xr7Kp2Ln9V\nAPP_SECRET=supersecretvalue\n";
        assert_eq!(
            run(input),
            "DB_PASSWORD=[REDACTED]\nexport GITLAB_TOKEN=[REDACTED]\nAPP_SECRET=[REDACTED]\n"
        );
    }

    #[test]
    fn env_references_are_untouched() {
        let input = "DB_PASSWORD=$POSTGRES_PASSWORD\nGITLAB_TOKEN=${CI_JOB_TOKEN}\n\
                     NPM_TOKEN=${{ secrets.NPM_TOKEN }}\nAPI_TOKEN=$(gh auth token)\n\
                     echo ${API_TOKEN:-default123value}\nOPENAI_API_KEY=\nAPI_KEY=<YOUR_API_KEY>\n\
                     PRIMARY_KEY=identifier_column\nSECRET_KEY=changeme\nAPI_KEY=your-api-key\n";
        assert_eq!(run(input), input);
    }

    #[test]
    fn json_yaml_and_code_literals() {
        let cases = [
            (
                r#"{"api_key": "q7VbN2xK9mPz", "n": 1}"#,
                r#"{"api_key": "[REDACTED]", "n": 1}"#,
            ),
            (
                r#"{\"client_secret\":\"Hs8Dj3Fg6Kl1\"}"#,
                r#"{\"client_secret\":\"[REDACTED]\"}"#,
            ),
            (
                "password: 'correct horse battery'",
                "password: '[REDACTED]'",
            ),
            (
                "  access_token: ya29a0AfH6SMB3x\n",
                "  access_token: [REDACTED]\n",
            ),
            (
                "client = Client(api_key=\"Tg5Xk2Rm9Qp4\")",
                "client = Client(api_key=\"[REDACTED]\")",
            ),
            (
                "spring.datasource.password=hunter2hunter2",
                "spring.datasource.password=[REDACTED]",
            ),
            (
                "mysql --password=Pz4Lw7Nz3Bv8 db",
                "mysql --password=[REDACTED] db",
            ),
            ("X-Auth-Token: 9f8e7d6c5b4a3210", "X-Auth-Token: [REDACTED]"),
            (
                "const apiKey = `Hc6Jd1Fs0YaT`;",
                "const apiKey = `[REDACTED]`;",
            ),
            (
                "\\nSECRET_KEY=django-insecure-value\\n",
                "\\nSECRET_KEY=[REDACTED]\\n",
            ),
            (
                "\x1b[33mAPI_KEY\x1b[0m=\x1b[31mq7VbN2xK9mPz\x1b[0m",
                "\x1b[33mAPI_KEY\x1b[0m=\x1b[31m[REDACTED]\x1b[0m",
            ),
            (
                "GET /cb?state=1&token=a1b2c3d4e5f6&x=2",
                "GET /cb?state=1&token=[REDACTED]&x=2",
            ),
            ("token=q7VbN2xK9mPz", "token=[REDACTED]"),
            (
                "const apiKey: string = 'Fs0YaTg5Pz4L';",
                "const apiKey: string = '[REDACTED]';",
            ),
            (
                "    api_key: str = \"Fs0YaTg5Pz4L\"",
                "    api_key: str = \"[REDACTED]\"",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(run(input), expected, "input: {input}");
        }
    }

    #[test]
    fn short_values_are_untouched_and_eight_characters_are_masked() {
        assert_eq!(run("password: \"hunter2\""), "password: \"hunter2\"");
        assert_eq!(
            run("\"password\": \"hunter22\""),
            "\"password\": \"[REDACTED]\""
        );
    }

    #[test]
    fn code_and_prose_are_untouched() {
        let input = "token: string\n\
                     api_key: Optional[str] = None\n\
                     client_secret: ClientSecret,\n\
                     secret_key = settings.SECRET_KEY\n\
                     access_token = response.json()[\"access_token\"]\n\
                     token = getToken(user1)\n\
                     api_key = os.environ[\"OPENAI_API_KEY\"]\n\
                     const key = process.env.OPENAI_API_KEY;\n\
                     if password == \"hunter2hunter2\" {}\n\
                     let t = Token::new(a1b2c3d4e5);\n\
                     The password: is kept in the vault.\n\
                     max_tokens: 4096\n\
                     API_KEY: required\n\
                     \"password\": \"${DB_PASSWORD}\"\n\
                     password = \"***\"\n\
                     \"token\": \"xxxxxxxxxxxx\"\n\
                     \"token\": \"[REDACTED]\"\n\
                     OPENAI_API_KEY\n\
                     pub const IFLA_INET6_TOKEN: _bindgen_ty_5 = _bindgen_ty_5::IFLA_INET6_TOKEN;\n\
                     pub const SYS_memfd_secret: c_long = __X32_SYSCALL_BIT + 447;\n\
                     pub const ASC_REQ_NO_TOKEN: ASC_REQ_FLAGS = 16777216u32;\n\
                     pub const FILTER_E_PASSWORD: HRESULT = 0x8004170B_u32 as _;\n\
                     pub frag_token: crate::__u32,\n\
                     {\"progressToken\": \"progress-1\", \"nextPageToken\": \"CAoQAA9x2\"}\n\
                     {\"access_token\":\"fresh-token\",\"refresh_token\":\"unsupported\"}\n";
        assert_eq!(run(input), input);
    }

    #[test]
    fn masked_vendor_values_are_not_masked_again() {
        let input = "OPENAI_API_KEY=sk-proj-[REDACTED]\n\"token\": \"ghp_[REDACTED]\"";
        assert_eq!(run(input), input);
    }
}
