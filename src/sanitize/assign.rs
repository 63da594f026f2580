//! Layer (c): generic assignments of secrets, `DB_PASSWORD=…`, `"api_key": "…"`,
//! `--token=…`, `client_secret: …`, `POSTGRES_PASSWORD: …`. The key's name decides that a
//! value is a secret; the value decides whether it is a real one or a placeholder, a
//! reference or code.
//!
//! A hand-written scanner rather than a regex: the key keywords are case-insensitive and
//! sit at the end of a name of any length, which no literal prefilter can anchor on, and
//! deciding about the value needs the name and the kind of separator anyway. One literal
//! search over the keywords' three spellings finds the candidates.

use std::borrow::Cow;

use memchr::memmem;

use super::value::{
    ends_with_ignore_ascii_case, is_label, is_placeholder, is_prose_word, looks_like_random_token,
    looks_random, password_reads_as_code, reads_as_code,
};
use super::MASK;

/// Literals of which one occurs in every name that `SUFFIXES` accepts, in the three
/// spellings names come in (`api_key`, `apiKey`/`ApiKey`, `API_KEY`).
const ANCHORS: &[&str] = &[
    "token", "Token", "TOKEN", "secret", "Secret", "SECRET", "passw", "Passw", "PASSW", "passp",
    "Passp", "PASSP", "key", "Key", "KEY", "auth", "Auth", "AUTH", "cred", "Cred", "CRED",
];

/// How strongly a name says "secret", which sets how much the value must look like one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Strength {
    /// Passwords are chosen by people: any value that is not a placeholder, a reference,
    /// code or a word of prose.
    Password,
    /// Tokens, secrets, API keys, credentials: a literal string in env files and quotes, a
    /// random-looking value elsewhere.
    Secret,
    /// Any other `*_KEY`/`*Key`: most are not secrets (`PRIMARY_KEY`, `cacheKey`), so only
    /// a long random token, never a hash or UUID.
    Key,
}

/// One family of the generic layer: a name ending (ASCII case-insensitively) with one of
/// `suffixes`. Listed in `docs/sanitizing.md`.
pub(crate) struct Keyword {
    #[cfg_attr(not(test), allow(dead_code))]
    pub family: &'static str,
    pub suffixes: &'static [&'static str],
    strength: Strength,
}

pub(crate) const KEYWORDS: &[Keyword] = &[
    Keyword {
        family: "password-assignment",
        suffixes: &["password", "passwd"],
        strength: Strength::Password,
    },
    Keyword {
        family: "passphrase-assignment",
        suffixes: &["passphrase"],
        strength: Strength::Password,
    },
    Keyword {
        family: "secret-assignment",
        suffixes: &["secret"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "token-assignment",
        suffixes: &["token"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "api-key-assignment",
        suffixes: &["apikey", "api_key", "api-key"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "access-or-secret-key-assignment",
        suffixes: &[
            "secretkey",
            "secret_key",
            "secret-key",
            "accesskey",
            "access_key",
            "access-key",
        ],
        strength: Strength::Secret,
    },
    Keyword {
        family: "private-key-assignment",
        suffixes: &["privatekey", "private_key", "private-key"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "credential-assignment",
        suffixes: &["credential", "credentials", "creds"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "auth-assignment",
        suffixes: &["auth"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "other-key-assignment",
        suffixes: &["_key", "-key", ".key"],
        strength: Strength::Key,
    },
];

/// Names that end like a secret's but hold none: pagination and progress tokens, and keys
/// that are ids.
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
    "cancellationtoken",
    "cancellation_token",
    "primary_key",
    "primarykey",
    "foreign_key",
    "foreignkey",
    "sort_key",
    "sortkey",
    "partition_key",
    "partitionkey",
    "cache_key",
    "cachekey",
    "hash_key",
    "hashkey",
    "range_key",
    "rangekey",
    "row_key",
    "rowkey",
    "routing_key",
    "routingkey",
    "idempotency_key",
    "idempotencykey",
    "lookup_key",
    "lookupkey",
    "dedup_key",
    "dedupkey",
    "public_key",
    "publickey",
    "public-key",
    "pub_key",
    "object_key",
    "objectkey",
    "query_key",
    "querykey",
    "i18n_key",
    "translation_key",
    "group_key",
    "map_key",
    "sort-key",
    "host_key",
    "hostkey",
];

/// Bounds on how far a candidate is followed, so that pathological input (megabytes of
/// `tokentoken…` or an unterminated quote) stays linear.
const MAX_NAME: usize = 128;
const MAX_VALUE: usize = 1024;

#[derive(Debug)]
pub(crate) struct Assignments {
    /// Built directly rather than through `regex`, whose meta engine cost about a
    /// million instructions to build: a sixth of a whole trivial run.
    anchors: aho_corasick::AhoCorasick,
}

impl Assignments {
    pub(super) fn new() -> Assignments {
        Assignments {
            anchors: aho_corasick::AhoCorasick::new(ANCHORS).expect("a set of literals builds"),
        }
    }

    pub(super) fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let bytes = text.as_bytes();
        let mut out = String::new();
        let mut copied = 0;
        let mut pos = 0;
        while let Some(hit) = self
            .anchors
            .find(aho_corasick::Input::new(bytes).range(pos..))
        {
            pos = hit.end();
            let Some((start, end)) = name_around(bytes, hit.start(), hit.len()) else {
                continue;
            };
            // The rest of this name holds no other candidate.
            pos = pos.max(end);
            // Most candidates are words in prose or code (`the token is`, `auth(req)`):
            // without a separator after the name there is nothing to judge.
            if start < copied || !separator_follows(bytes, end) {
                continue;
            }
            let Some(strength) = strength_of(&bytes[start..end]) else {
                continue;
            };
            let Some((vs, ve)) = secret_value(text, start, end, strength) else {
                continue;
            };
            if vs < copied {
                continue;
            }
            super::reserve_copy(&mut out, text.len());
            out.push_str(&text[copied..vs]);
            out.push_str(MASK);
            copied = ve;
            pos = pos.max(ve);
        }
        if copied == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }
}

/// Cheap first look: a separator after the name, its closing quote and blanks.
fn separator_follows(b: &[u8], end: usize) -> bool {
    let mut i = end;
    if let Some(q) = quote_at(b, i) {
        i += q.len();
    }
    let i = skip_blanks(b, skip_ansi(b, i));
    matches!(b.get(i), Some(b'=' | b':'))
}

/// The strength of a secret's name, or `None` for any other name.
fn strength_of(name: &[u8]) -> Option<Strength> {
    let ends = |s: &&str| ends_with_ignore_ascii_case(name, s);
    if NOT_SECRETS.iter().any(ends) {
        return None;
    }
    for keyword in KEYWORDS.iter().filter(|k| k.strength != Strength::Key) {
        if keyword.suffixes.iter().any(ends) {
            return Some(keyword.strength);
        }
    }
    // `STRIPE_KEY`, `license-key`, `encryptionKey`, but not `monkey` or `hotkey`.
    let camel_key =
        name.len() > 3 && name.ends_with(b"Key") && name[name.len() - 4].is_ascii_lowercase();
    let separated = KEYWORDS
        .iter()
        .filter(|k| k.strength == Strength::Key)
        .any(|k| k.suffixes.iter().any(ends));
    (camel_key || separated).then_some(Strength::Key)
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
/// `{{ secrets.X }}` give an empty value; `(` so that a call is recognised. `&` ends a
/// value in a URL query; a password elsewhere may hold one.
fn ends_unquoted(b: u8, key: &Key) -> bool {
    b.is_ascii_whitespace()
        || b.is_ascii_control()
        || (b == b'&' && (key.in_query || key.strength != Strength::Password))
        || matches!(
            b,
            b'"' | b'\'' | b'`' | b'\\' | b',' | b';' | b'|' | b'(' | b')' | b'{' | b'}' | b'<'
        )
}

/// The byte range of the value assigned to the name at `start..end`, if it is a secret.
fn secret_value(
    text: &str,
    start: usize,
    end: usize,
    strength: Strength,
) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let mut i = end;
    if let Some(q) = quote_at(b, i) {
        i += q.len();
    }
    let (i, sep) = separator(b, skip_ansi(b, i))?;
    let name = &text[start..end];
    let key = Key {
        name,
        strength,
        env_style: sep == Sep::Tight && is_env_name(name.as_bytes()),
        tight: sep == Sep::Tight,
        in_query: start > 0 && matches!(b[start - 1], b'?' | b'&'),
        spaced: sep == Sep::Other,
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
    strength: Strength,
    /// `NAME=value`, where a value is a literal string even when it is a plain word.
    env_style: bool,
    /// `name=value` with no blanks: a literal in shells, URLs and CLI flags.
    tight: bool,
    /// `?name=value&…`: `&` ends the value.
    in_query: bool,
    /// ` = `, `:=`, `=>`: what code assigns with.
    spaced: bool,
}

/// Where and how a value was written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// In quotes: a string literal.
    Quoted,
    /// `NAME=value` in an env file or shell.
    EnvLiteral,
    /// Anything else: a literal, or code. `line_end`: nothing but blanks or a comment
    /// follows on its line, as in YAML and `.properties` files.
    Unquoted { line_end: bool },
}

fn value_at(text: &str, i: usize, key: &Key, may_be_typed: bool) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let (vs, ve, context) = if let Some(q) = quote_at(b, i) {
        let vs = i + q.len();
        let window = &b[vs..b.len().min(vs + MAX_VALUE)];
        let line = &window[..memchr::memchr(b'\n', window).unwrap_or(window.len())];
        match memmem::find(line, q) {
            Some(n) => (vs, vs + n, Context::Quoted),
            // No closing quote on the line (the text was cut, or the quote is an
            // apostrophe): judge the word after it.
            None => (vs, unquoted_end(b, vs, key)?, Context::Quoted),
        }
    } else {
        let ve = unquoted_end(b, i, key)?;
        if b.get(ve) == Some(&b'(') {
            return None;
        }
        // `apiKey: string = "…"`, `api_key: str = "…"`: what follows `:` was a type.
        if may_be_typed {
            if let Some((after, Sep::Other | Sep::Tight)) = separator(b, ve) {
                let typed = Key {
                    env_style: false,
                    tight: false,
                    spaced: true,
                    ..*key
                };
                return value_at(text, after, &typed, false);
            }
        }
        let context = if key.env_style {
            Context::EnvLiteral
        } else {
            Context::Unquoted {
                line_end: ends_line(b, ve),
            }
        };
        (i, ve, context)
    };
    judge(&text[vs..ve], key, context).then_some((vs, ve))
}

/// Whether the value is a secret, given its key and context.
fn judge(value: &str, key: &Key, context: Context) -> bool {
    // A URL is where a secret is used, not the secret; its password is the URL rule's.
    let random = || looks_random(value) && !value.contains("://");
    let min_chars = match (key.strength, context) {
        (Strength::Password, Context::Unquoted { .. }) => 6,
        (Strength::Password, _) => 4,
        _ => 8,
    };
    if value.chars().count() < min_chars
        || is_placeholder(value)
        || is_label(value, key.name)
        || (key.strength != Strength::Password && value.contains(char::is_whitespace))
    {
        return false;
    }
    match (key.strength, context) {
        (Strength::Password, Context::Quoted | Context::EnvLiteral) => true,
        (Strength::Password, Context::Unquoted { line_end }) => {
            // After ` = ` a plain word is a variable (`self.password = credentials`);
            // an INI file's password has a digit or a symbol more often than not.
            let plain_word = value.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_');
            let word_or_code = password_reads_as_code(value)
                || is_prose_word(value)
                || value.contains(char::is_whitespace)
                || (key.spaced && plain_word);
            (random() && !reads_as_code(value)) || (!word_or_code && (key.tight || line_end))
        }
        (Strength::Secret, Context::EnvLiteral) => true,
        (Strength::Secret, Context::Quoted) => random(),
        (Strength::Secret, Context::Unquoted { .. }) => random() && !reads_as_code(value),
        (Strength::Key, Context::Quoted | Context::EnvLiteral) => looks_like_random_token(value),
        (Strength::Key, Context::Unquoted { .. }) => {
            looks_like_random_token(value) && !reads_as_code(value)
        }
    }
}

/// Nothing but blanks, a comment, or the end of the enclosing JSON string follows `i` on
/// its line.
fn ends_line(b: &[u8], i: usize) -> bool {
    let j = skip_blanks(b, i);
    matches!(
        b.get(j..),
        None | Some([] | [b'\n' | b'\r' | b'#' | b'"', ..] | [b'\\', b'n' | b'r' | b'"', ..])
    )
}

/// End of an unquoted value starting at `i`; `None` when there is none or it is too long
/// to be a secret.
fn unquoted_end(b: &[u8], i: usize, key: &Key) -> Option<usize> {
    let limit = b.len().min(i + MAX_VALUE);
    let mut j = i;
    while j < limit && !ends_unquoted(b[j], key) {
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
    fn short_values_are_untouched_except_passwords() {
        assert_eq!(run("token: \"a1b2c3d\""), "token: \"a1b2c3d\"");
        assert_eq!(
            run("\"api_key\": \"q7VbN2xK\""),
            "\"api_key\": \"[REDACTED]\""
        );
        // People choose short passwords; four characters in quotes or an env file are
        // enough, six unquoted.
        assert_eq!(run("password: \"hunter2\""), "password: \"[REDACTED]\"");
        assert_eq!(run("DB_PASSWORD=root"), "DB_PASSWORD=[REDACTED]");
        assert_eq!(run("password: abc12"), "password: abc12");
        assert_eq!(run("password: hunter2"), "password: [REDACTED]");
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

    /// One positive and one negative case per generic family.
    #[test]
    fn every_generic_family() {
        let cases: &[(&str, &str, &str, &str)] = &[
            (
                "password-assignment",
                "services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: supersecret\n",
                "services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: [REDACTED]\n",
                "password: hashedPassword\nPassword: required\nself.password = password\n",
            ),
            (
                "passphrase-assignment",
                "ssh_passphrase = 'correct horse battery staple'",
                "ssh_passphrase = '[REDACTED]'",
                "passphrase: <prompted>",
            ),
            (
                "secret-assignment",
                "client_secret: Hs8Dj3Fg6Kl1Zx4C",
                "client_secret: [REDACTED]",
                "client_secret: ClientSecret,",
            ),
            (
                "token-assignment",
                "{\"refresh_token\":\"Zq8Wm3Xr7Kp2Ln9V\"}",
                "{\"refresh_token\":\"[REDACTED]\"}",
                "{\"nextPageToken\": \"CAoQAA9x2\", \"access_token\": \"fresh-token\"}",
            ),
            (
                "api-key-assignment",
                "const apiKey = `Hc6Jd1Fs0YaT`;",
                "const apiKey = `[REDACTED]`;",
                "api_key = os.environ[\"OPENAI_API_KEY\"]",
            ),
            (
                "access-or-secret-key-assignment",
                "AWS_SECRET_KEY=q7VbN2xK9mPzR4tL",
                "AWS_SECRET_KEY=[REDACTED]",
                "secret_key = settings.SECRET_KEY",
            ),
            (
                "private-key-assignment",
                "\"private_key\": \"a1b2c3d4e5f6a7b8\"",
                "\"private_key\": \"[REDACTED]\"",
                "private_key: PathBuf,",
            ),
            (
                "credential-assignment",
                "registry_credentials=Zq8Wm3Xr7Kp2Ln9V",
                "registry_credentials=[REDACTED]",
                "fetch(url, { credentials: \"include\" })",
            ),
            (
                "auth-assignment",
                "{\"auths\":{\"ghcr.io\":{\"auth\":\"bWU6cTdWYk4yeEs5bVB6\"}}}",
                "{\"auths\":{\"ghcr.io\":{\"auth\":\"[REDACTED]\"}}}",
                "auth: true\noauth: \"oauth2\"\nauth = AuthConfig(user)",
            ),
            (
                "other-key-assignment",
                "STRIPE_KEY=Zq8Wm3Xr7Kp2Ln9VbT4c\nlicenseKey: \"Q7vBn2Xk9MpZr4TlWy8C\"",
                "STRIPE_KEY=[REDACTED]\nlicenseKey: \"[REDACTED]\"",
                "PRIMARY_KEY=identifier_column\ncacheKey: \"Zq8Wm3Xr7Kp2Ln9VbT4c\"\n\
                 object_key: uploads/2024/a1b2c3d4e5f6.png\nmonkey=Zq8Wm3Xr7Kp2Ln9VbT4c\n\
                 etag_key: 3f786850e387550fdab836ed7e6dc881de23001b",
            ),
        ];
        for family in KEYWORDS {
            assert!(
                cases.iter().any(|c| c.0 == family.family),
                "family {} has no case",
                family.family
            );
        }
        for (family, positive, masked, negative) in cases {
            assert_eq!(run(positive), *masked, "{family}: {positive}");
            assert_eq!(run(negative), *negative, "{family}: {negative}");
        }
    }

    #[test]
    fn passwords_in_yaml_env_and_code() {
        let cases = [
            ("password: correcthorse\n", "password: [REDACTED]\n"),
            (
                "  password: Password1  # dev\n",
                "  password: [REDACTED]  # dev\n",
            ),
            ("PASSWORD=letmein", "PASSWORD=[REDACTED]"),
            (
                "[pypi]\npassword = hunter2\n",
                "[pypi]\npassword = [REDACTED]\n",
            ),
            (
                "?user=me&password=hunter22&x=1",
                "?user=me&password=[REDACTED]&x=1",
            ),
            (
                "spring.datasource.password=Tr0ub4dor&3",
                "spring.datasource.password=[REDACTED]",
            ),
            ("Password: \"P@ss word\",", "Password: \"[REDACTED]\","),
            (
                "\"content\":\"db:\\n  password: supersecret\\n\"",
                "\"content\":\"db:\\n  password: [REDACTED]\\n\"",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(run(input), expected, "input: {input}");
        }
        let untouched = "password: String,\n\
                         password: Option<String>,\n\
                         password = None\n\
                         password = kwargs.get(\"password\")\n\
                         Password: cfg.Password,\n\
                         password: &'a str,\n\
                         password = \"***\"\n\
                         the password: supersecret is wrong\n\
                         passwd:         files systemd\n\
                         password: ${DB_PASSWORD}\n\
                         password: changeme\n\
                         self.username, self.password = credentials\n\
                         \"smithy.api#noAuth\": createSmithyApiNoAuthHttpAuthOption,\n";
        assert_eq!(run(untouched), untouched);
    }

    #[test]
    fn masked_vendor_values_are_not_masked_again() {
        let input = "OPENAI_API_KEY=sk-proj-[REDACTED]\n\"token\": \"ghp_[REDACTED]\"";
        assert_eq!(run(input), input);
    }
}
