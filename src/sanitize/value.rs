//! What a candidate value looks like: random, a placeholder, code, or a label. Shared by the
//! rules that find values (`rules`, `assign`), which decide with these whether to mask.

use std::sync::LazyLock;

use super::MASK;

/// A randomness test that needs no entropy tables: random strings from a mixed alphabet
/// switch between letters and digits all the time, while words, identifiers and versions
/// with a number (`postgres123`, `user_profile_42`, `v1_release_candidate3`) switch at most
/// once per segment.
///
/// Random: a segment (a run of ASCII letters and digits) switches between letters and
/// digits at least twice, or, for base64 without digits, a segment of 20+ letters switches
/// case at least once every four letters.
pub(crate) fn looks_random(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        let (mut digit_switches, mut case_switches, mut upper_pairs) = (0usize, 0usize, 0usize);
        while i + 1 < b.len() && b[i + 1].is_ascii_alphanumeric() {
            let (x, y) = (b[i], b[i + 1]);
            if x.is_ascii_digit() != y.is_ascii_digit() {
                digit_switches += 1;
            } else if x.is_ascii_alphabetic() && x.is_ascii_uppercase() != y.is_ascii_uppercase() {
                case_switches += 1;
            } else if x.is_ascii_uppercase() {
                upper_pairs += 1;
            }
            i += 1;
        }
        i += 1;
        let len = i - start;
        // camelCase identifiers switch case often too, but almost never put two capitals
        // side by side, which random letters do every fourth pair.
        if digit_switches >= 2 || (len >= 20 && case_switches * 4 >= len && upper_pairs * 16 >= len)
        {
            return true;
        }
    }
    false
}

/// A stricter test for values whose name only weakly says "secret" (`*_KEY`): at least 16
/// characters of a token alphabet, random, and not a hash, a UUID or a path, which are what
/// such names hold when they are not secrets (cache keys, object keys, ids).
pub(crate) fn looks_like_random_token(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 16
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'_' | b'-'))
        && !b.contains(&b'/')
        && !is_hex_or_uuid(s)
        && looks_random(s)
}

/// Lowercase or uppercase hexadecimal, possibly in UUID groups: hashes, git SHAs, ids.
pub(crate) fn is_hex_or_uuid(s: &str) -> bool {
    let hex = |c: &u8| c.is_ascii_hexdigit() || *c == b'-';
    let b = s.as_bytes();
    b.iter().all(hex)
        && (b
            .iter()
            .all(|c| !c.is_ascii_alphabetic() || c.is_ascii_lowercase())
            || b.iter()
                .all(|c| !c.is_ascii_alphabetic() || c.is_ascii_uppercase()))
}

/// Values that stand for a secret without being one: references to the environment or
/// to a template, documentation placeholders, and masks (ours and other tools').
pub(crate) fn is_placeholder(value: &str) -> bool {
    let v = value.trim();
    let Some(&first) = v.as_bytes().first() else {
        return true;
    };
    if matches!(first, b'$' | b'<' | b'{' | b'%' | b'[' | b'(') || v.starts_with("#{") {
        return true;
    }
    if v.chars()
        .all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '-' | '_' | '#' | '•' | '…' | '?'))
    {
        return true;
    }
    // One character repeated (`aaaaaaaa`, `00000000`) is filler, and so is a run of
    // masking characters after a prefix (`ghp_xxxx…`).
    if (v.len() >= 4 && v.bytes().all(|c| c == v.as_bytes()[0])) || is_filler(v) {
        return true;
    }
    // Build-time filter tokens (Maven's `@@db.password@@`, Gradle's `@token@`).
    if v.len() > 2 && v.starts_with('@') && v.ends_with('@') {
        return true;
    }
    if is_secret_reference(v) {
        return true;
    }
    const WHOLE: &[&str] = &[
        "null",
        "none",
        "nil",
        "undefined",
        "true",
        "false",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "token",
        "apikey",
        "api_key",
        "api-key",
        "string",
        "str",
        "test",
        "testing",
        "sample",
        "hidden",
        "empty",
        "required",
        "optional",
        "default",
        "unset",
        "value",
        "todo",
        "tbd",
        "n/a",
        "mask",
        "masked",
    ];
    starts_with_ignore_ascii_case(v, "your")
        || WHOLE.iter().any(|w| w.eq_ignore_ascii_case(v))
        || PLACEHOLDER_PARTS.is_match(v)
}

/// What a placeholder holds anywhere in it, in one case-insensitive search: our mask and
/// other tools' (an ellipsis or a run of asterisks after a prefix: `sk-...`, `ghp_***`,
/// `sk-proj-...a1B2`), references to the environment or to templates, and the words docs
/// put in place of a secret. No real token holds any of them. (Four `x`s do, one random
/// token in some thousands, either case: a run of masking `x`s is [`is_filler`]'s.)
static PLACEHOLDER_PARTS: LazyLock<aho_corasick::AhoCorasick> = LazyLock::new(|| {
    aho_corasick::AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build([
            MASK,
            "...",
            "…",
            "***",
            "•",
            "changeme",
            "change_me",
            "change-me",
            "placeholder",
            "example",
            "your_",
            "your-",
            "redacted",
            "process.env",
            "os.environ",
            "getenv",
            "import.meta.env",
            "secrets.",
            "****",
            "dummy",
            "notasecret",
            "not-a-secret",
            "insert_",
            "insert-",
            "replace_",
            "replace-",
            "replaceme",
            ".vault.azure.net/secrets/",
            ".vault.azure.net/keys/",
        ])
        .expect("a set of literals builds")
});

/// The run of masking characters that docs and other tools print in place of a token, or
/// put after its public prefix (`ghp_xxxxxxxx…`, `AKIAXXXXXXXXXXXXXXXX`, Slack's
/// `T00000000/B00000000/XXXXXXXX…`): six of `x`, `X`, `*`, `#` or `0` in a row, or `x`s
/// ending the value after its prefix's separator (`sk-xxx`). A random token has six equal
/// characters in a row too rarely to matter.
pub(crate) fn is_filler(s: &str) -> bool {
    let b = s.as_bytes();
    let mut run = 1;
    for w in b.windows(2) {
        if w[0] == w[1] && matches!(w[0], b'x' | b'X' | b'*' | b'#' | b'0') {
            run += 1;
            if run >= 6 {
                return true;
            }
        } else {
            run = 1;
        }
    }
    let x_tail = b
        .iter()
        .rev()
        .take_while(|c| matches!(c, b'x' | b'X'))
        .count();
    x_tail >= 3 && b.len() > x_tail && matches!(b[b.len() - x_tail - 1], b'-' | b'_' | b'.')
}

/// Where a secret is kept rather than the secret: secret-manager ARNs and resource names,
/// 1Password and Vault references, files (`classpath:`, `file:`). Key Vault URIs are in
/// [`PLACEHOLDER_PARTS`].
pub(crate) fn is_secret_reference(v: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "arn:",
        "op://",
        "vault:",
        "vault://",
        "sm://",
        "gcpsm://",
        "awssm:",
        "awssm://",
        "ssm:",
        "ssm://",
        "secretsmanager:",
        "gcp:secretmanager:",
        "azurekeyvault:",
        "azurekeyvault://",
        "keyvault:",
        "keyvault://",
        "akv://",
        "doppler://",
        "infisical://",
        "@microsoft.keyvault(",
        "classpath:",
        "file:",
    ];
    PREFIXES.iter().any(|p| starts_with_ignore_ascii_case(v, p))
        || (starts_with_ignore_ascii_case(v, "projects/")
            && ["/secrets/", "/keyRings/", "/cryptoKeys/"]
                .iter()
                .any(|part| v.contains(part)))
}

/// A file system path (`/run/secrets/db_password`, `~/.ssh/id_ed25519`,
/// `C:\keys\sa.json`, `./certs/key.pem`): where a credential is kept. Base64 can start
/// with `/` too, so a path must also read as one: components of file name characters, none
/// a long random run, and a known root, a dot folder, a file extension or three plain
/// components.
pub(crate) fn is_path(v: &str) -> bool {
    let b = v.as_bytes();
    let rest = if let Some(r) = ["~/", "./", "../", "\\\\", "\\", "/"]
        .iter()
        .find_map(|root| v.strip_prefix(root))
    {
        r
    } else if b.len() > 3
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && matches!(b[2], b'\\' | b'/')
    {
        &v[3..]
    } else {
        return false;
    };
    let components: Vec<&str> = rest.split(['/', '\\']).filter(|c| !c.is_empty()).collect();
    let Some(first) = components.first() else {
        return false;
    };
    let file_name_chars = |c: &str| {
        c.bytes()
            .all(|x| x.is_ascii_alphanumeric() || matches!(x, b'.' | b'_' | b'-' | b'@' | b'~'))
    };
    let random_run = |c: &str| c.len() >= 16 && !c.contains('.') && looks_random(c);
    if !components
        .iter()
        .all(|c| file_name_chars(c) && !random_run(c))
    {
        return false;
    }
    const ROOTS: &[&str] = &[
        "etc",
        "run",
        "var",
        "home",
        "users",
        "opt",
        "usr",
        "tmp",
        "srv",
        "mnt",
        "secrets",
        "root",
        "app",
        "data",
        "certs",
        "keys",
        "config",
        "workspace",
        "private",
        "media",
        "volumes",
        "proc",
        "dev",
    ];
    let known_root = first.starts_with('.') || ROOTS.iter().any(|r| r.eq_ignore_ascii_case(first));
    let last = components[components.len() - 1];
    let extension = last.rfind('.').is_some_and(|dot| {
        let ext = &last[dot + 1..];
        dot > 0 && (1..=8).contains(&ext.len()) && ext.bytes().all(|x| x.is_ascii_alphanumeric())
    });
    let plain = components.len() >= 3 && components.iter().all(|c| !looks_random(c));
    // `./x`, `../x`, `~/x` are paths whatever their names hold, if nothing in them is
    // random.
    let relative = ["./", "../", "~/"].iter().any(|r| v.starts_with(r))
        && components.iter().all(|c| !looks_random(c));
    known_root || extension || plain || relative
}

/// A value that a sentence puts after "password is" without it being a password: a
/// compound (`SHA256-hashed`, `AES-256-encrypted`), a date, a time or a version.
pub(crate) fn is_prose_value(v: &str) -> bool {
    // The last part after a `-` is a word of four letters or more with a word's ending,
    // in any case (compared without a lowercased copy).
    let compound = v.rsplit_once('-').is_some_and(|(_, last)| {
        last.len() >= 4
            && last.bytes().all(|c| c.is_ascii_alphabetic())
            && [
                "ed", "ing", "based", "only", "like", "safe", "free", "length",
            ]
            .iter()
            .any(|s| ends_with_ignore_ascii_case(last.as_bytes(), s))
    });
    let numeric = v
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b':' | b'/'))
        && v.bytes().any(|c| !c.is_ascii_digit());
    compound || numeric
}

/// Decodes `%XX` escapes (twice-encoded `%25XX` too); anything else stays.
pub(crate) fn percent_decode(s: &str) -> String {
    let mut s = s.to_string();
    for _ in 0..2 {
        if !s.contains('%') {
            break;
        }
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            let hex = |c: u8| char::from(c).to_digit(16);
            match (
                b[i],
                b.get(i + 1).and_then(|&c| hex(c)),
                b.get(i + 2).and_then(|&c| hex(c)),
            ) {
                (b'%', Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                }
                (c, _, _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        s = String::from_utf8_lossy(&out).into_owned();
    }
    s
}

/// Values that read as code rather than data: `settings.SECRET_KEY`, `os.environ["X"]`,
/// `Optional[str]`, `oauth2::Token`, `isOAuthToken2`, `_bindgen_ty_5`, `16777216u32`.
/// Only for unquoted values, where code is what an assignment usually holds.
pub(crate) fn reads_as_code(value: &str) -> bool {
    let digits = value.bytes().filter(u8::is_ascii_digit).count();
    value.contains(['[', ']'])
        || value.contains("::")
        || is_dotted_path(value)
        // Identifiers rarely have two digits; random strings of 20+ characters rarely
        // have fewer.
        || (is_identifier(value) && digits <= 1 && value.len() < 20)
        || is_constant_name(value)
        || is_number_literal(value)
}

/// Like [`reads_as_code`], for an unquoted value under a password's name, which people
/// choose and which need not look random (`supersecret`, `Password1`): code here is what an
/// identifier looks like when it is plainly one (`hashedPassword`, `db_password`,
/// `PasswordField`, `form.password`, `Optional[str]`).
pub(crate) fn password_reads_as_code(value: &str) -> bool {
    let b = value.as_bytes();
    let upper = b.iter().filter(|c| c.is_ascii_uppercase()).count();
    let camel = b
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    value.contains(['[', ']', '('])
        || value.contains("::")
        || is_dotted_path(value)
        || is_constant_name(value)
        || (is_identifier(value)
            && !b.iter().any(u8::is_ascii_digit)
            && (camel || value.contains('_') || upper >= 2))
}

/// Code where a value is otherwise a literal (a property file, a printed struct): a call,
/// an index, a path to a field, a type. A plain identifier is data there.
pub(crate) fn literal_reads_as_code(value: &str) -> bool {
    value.contains(['[', ']', '(', ')']) || value.contains("::") || is_dotted_path(value)
}

/// `a.b.c` where every part is an identifier: a field path, not a secret.
fn is_dotted_path(value: &str) -> bool {
    value.contains('.') && value.split('.').all(|s| s.len() <= 32 && is_identifier(s))
}

/// Values that name something rather than hold a secret: an environment variable or
/// constant (`"AWS_SECRET_ACCESS_KEY"`), or the key's own name spelled again
/// (`PASSWORD: "PASSWORD"`, `X_AWS_EC2_METADATA_TOKEN = "x-aws-ec2-metadata-token"`).
pub(crate) fn is_label(value: &str, name: &str) -> bool {
    if is_constant_name(value) {
        return true;
    }
    // The letters and digits of both, lowercased, compared from the end: one must end
    // the other, and the value must have four of them.
    let (v, n) = (value.as_bytes(), name.as_bytes());
    let (mut i, mut j, mut matched) = (v.len(), n.len(), 0);
    loop {
        while i > 0 && !v[i - 1].is_ascii_alphanumeric() {
            i -= 1;
        }
        while j > 0 && !n[j - 1].is_ascii_alphanumeric() {
            j -= 1;
        }
        if i == 0 || j == 0 {
            break;
        }
        if !v[i - 1].eq_ignore_ascii_case(&n[j - 1]) {
            return false;
        }
        matched += 1;
        i -= 1;
        j -= 1;
    }
    matched >= 4 || matched + v[..i].iter().filter(|c| c.is_ascii_alphanumeric()).count() >= 4
}

/// Everyday words that follow a password's name in prose or docs, never as its value.
pub(crate) fn is_prose_word(value: &str) -> bool {
    const WORDS: &[&str] = &[
        "required",
        "optional",
        "enabled",
        "disabled",
        "provided",
        "missing",
        "incorrect",
        "invalid",
        "unknown",
        "expired",
        "protected",
        "authentication",
        "authenticated",
        "prompt",
        "prompted",
        "forgotten",
        "changed",
        "updated",
        "reset",
        "accepted",
        "rejected",
        "mismatch",
        "generated",
        "configured",
        "encrypted",
        "hashed",
        "ignored",
        "supplied",
        "specified",
        "available",
        "unavailable",
        "needed",
        "set",
        "files",
        "option",
        "options",
        "flag",
        "flags",
        "argument",
        "arguments",
        "parameter",
        "parameters",
        "field",
        "instead",
        "combination",
        "and",
        "or",
        "is",
        "was",
        "for",
        "with",
        "when",
        "from",
        "then",
    ];
    WORDS.iter().any(|w| w.eq_ignore_ascii_case(value))
}

fn is_identifier(s: &str) -> bool {
    s.bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// `SCREAMING_SNAKE_CASE`: constants and environment variable names.
fn is_constant_name(s: &str) -> bool {
    is_identifier(s) && s.contains('_') && !s.bytes().any(|c| c.is_ascii_lowercase())
}

/// A decimal or hex integer, signed, with `_` separators and a type suffix (`u32`, `L`).
fn is_number_literal(value: &str) -> bool {
    let value = value.trim_start_matches(['-', '+']);
    let (digits, is_digit): (&str, fn(&u8) -> bool) = match value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
    {
        Some(hex) => (hex, u8::is_ascii_hexdigit),
        None => (value, u8::is_ascii_digit),
    };
    let body = digits
        .bytes()
        .take_while(|c| is_digit(c) || *c == b'_')
        .count();
    const SUFFIXES: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64",
    ];
    let suffix = digits[body..].trim_start_matches('_');
    body > 0
        && digits.as_bytes()[0] != b'_'
        && (suffix.is_empty()
            || SUFFIXES.contains(&suffix)
            || (suffix.len() <= 3
                && suffix
                    .bytes()
                    .all(|c| matches!(c, b'u' | b'U' | b'l' | b'L'))))
}

pub(crate) fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

pub(crate) fn has_upper_and_lower(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_uppercase()) && s.bytes().any(|b| b.is_ascii_lowercase())
}

pub(crate) fn starts_with_ignore_ascii_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

pub(crate) fn ends_with_ignore_ascii_case(s: &[u8], suffix: &str) -> bool {
    // The last byte first: most suffixes a name is checked against end differently.
    let (Some(&last), Some(&want)) = (s.last(), suffix.as_bytes().last()) else {
        return suffix.is_empty();
    };
    last.eq_ignore_ascii_case(&want)
        && s.len() >= suffix.len()
        && s[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn randomness() {
        for r in [
            "q7VbN2xK9mPz",
            "a1b2c3d4e5f6",
            "9f8e7d6c5b4a3210",
            "ya29a0AfH6SMB3x",
            "hunter2hunter2",
            "123e4567-e89b-12d3-a456-426614174000",
            "dXNlcjpwYXNzd29yZA==",
            "kQZrTmwBXpLcVnDaYeHsUgJf",
        ] {
            assert!(looks_random(r), "{r}");
        }
        for w in [
            "postgres123",
            "user_profile_42",
            "v1_release_candidate3",
            "session-2024",
            "supersecret",
            "hashedPassword",
            "",
            "1.2.3",
            "AbcdefghijklmnopqrstuV",
            "createSmithyApiNoAuthHttpAuthOption",
        ] {
            assert!(!looks_random(w), "{w}");
        }
    }

    #[test]
    fn random_tokens_are_not_hashes_or_paths() {
        assert!(looks_like_random_token("Zq8Wm3Xr7Kp2Ln9VbT4c"));
        for v in [
            "3f786850e387550fdab836ed7e6dc881de23001b",
            "123e4567-e89b-12d3-a456-426614174000",
            "uploads/2024/a1b2c3d4e5.png",
            "q7VbN2xK9mPz",
            "user:42:profile:a1b2c3",
        ] {
            assert!(!looks_like_random_token(v), "{v}");
        }
    }

    #[test]
    fn placeholders() {
        for p in [
            "${X}",
            "$X",
            "<YOUR_KEY>",
            "***",
            "xxxx",
            "changeme",
            "your-api-key",
            "[REDACTED]",
            "{{ token }}",
            "process.env.X",
            "os.environ['X']",
            "aaaaaaaa",
            "string",
            "sk-xxxxxxxxxxxxxxxx",
            "%(password)s",
        ] {
            assert!(is_placeholder(p), "{p}");
        }
        for v in ["hunter22", "q7VbN2xK", "pass", "supersecret", "Password1"] {
            assert!(!is_placeholder(v), "{v}");
        }
    }

    #[test]
    fn code() {
        for c in [
            "settings.SECRET_KEY",
            "Optional[str]",
            "oauth2::Token",
            "isOAuthToken2",
            "_bindgen_ty_5",
            "__X32_SYSCALL_BIT",
            "16777216u32",
            "-2147205110i32",
            "0x8004170B_u32",
            "1024",
        ] {
            assert!(reads_as_code(c), "{c}");
        }
        for v in [
            "q7VbN2xK9mPz",
            "a1b2c3d4e5f6",
            "Zq8Wm3Xr7Kp2Ln9V",
            "12345678abc",
            "0x1g2h3j4k",
        ] {
            assert!(!reads_as_code(v), "{v}");
        }
    }

    #[test]
    fn password_code() {
        for c in [
            "hashedPassword",
            "db_password",
            "PasswordField",
            "form.password",
            "Optional[str]",
            "getpass()",
            "DB_PASSWORD",
        ] {
            assert!(password_reads_as_code(c), "{c}");
        }
        for v in [
            "supersecret",
            "Password1",
            "hunter2",
            "correct-horse",
            "Tr0ub4dor&3",
        ] {
            assert!(!password_reads_as_code(v), "{v}");
        }
    }

    #[test]
    fn labels() {
        assert!(is_label("PASSWORD", "PASSWORD"));
        assert!(is_label(
            "challengePassword",
            "AttributeOID.CHALLENGE_PASSWORD"
        ));
        assert!(is_label(
            "x-aws-ec2-metadata-token",
            "X_AWS_EC2_METADATA_TOKEN"
        ));
        assert!(is_label("AWS_SECRET_ACCESS_KEY", "ENV_SECRET"));
        assert!(!is_label("q7VbN2xK9mPz", "api_key"));
        assert!(!is_label("Tg5Xk2Rm9Qp4", "PASSWORD"));
    }
}
