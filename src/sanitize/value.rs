//! What a candidate value looks like: random, a placeholder, code, or a label. Shared by the
//! rules that find values (`rules`, `assign`), which decide with these whether to mask.

use super::MASK;

/// Cheap stand-in for an entropy test: a random string of 8+ characters from a mixed
/// alphabet almost always has both a letter and a digit, while words rarely do.
pub(crate) fn looks_random(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit()) && s.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Values that stand for a secret without being one: references to the environment or
/// to a template, documentation placeholders, and masks (ours and other tools').
pub(crate) fn is_placeholder(value: &str) -> bool {
    let v = value.trim();
    let Some(&first) = v.as_bytes().first() else {
        return true;
    };
    if v.contains(MASK) || matches!(first, b'$' | b'<' | b'{' | b'%') || v.starts_with("#{") {
        return true;
    }
    if v.chars()
        .all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '-' | '_' | '#' | '•' | '…'))
    {
        return true;
    }
    const WORDS: &[&str] = &[
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
    ];
    const WHOLE: &[&str] = &["null", "none", "nil", "undefined", "true", "false"];
    starts_with_ignore_ascii_case(v, "your")
        || WORDS.iter().any(|w| contains_ignore_ascii_case(v, w))
        || WHOLE.iter().any(|w| w.eq_ignore_ascii_case(v))
}

/// Values that read as code rather than data: `settings.SECRET_KEY`, `os.environ["X"]`,
/// `Optional[str]`, `oauth2::Token`, `isOAuthToken2`, `_bindgen_ty_5`, `16777216u32`.
/// Only for unquoted values, where code is what an assignment usually holds.
pub(crate) fn reads_as_code(value: &str) -> bool {
    let digits = value.bytes().filter(u8::is_ascii_digit).count();
    value.contains(['[', ']'])
        || value.contains("::")
        || (value.contains('.') && value.split('.').all(|s| s.len() <= 32 && is_identifier(s)))
        // Identifiers rarely have two digits; random strings of 20+ characters rarely
        // have fewer.
        || (is_identifier(value) && digits <= 1 && value.len() < 20)
        || is_constant_name(value)
        || is_number_literal(value)
}

/// Values that name something rather than hold a secret: an environment variable or
/// constant (`"AWS_SECRET_ACCESS_KEY"`), or the key's own name spelled again
/// (`PASSWORD: "PASSWORD"`, `X_AWS_EC2_METADATA_TOKEN = "x-aws-ec2-metadata-token"`).
pub(crate) fn is_label(value: &str, name: &str) -> bool {
    let squash = |s: &str| -> Vec<u8> {
        s.bytes()
            .filter(u8::is_ascii_alphanumeric)
            .map(|b| b.to_ascii_lowercase())
            .collect()
    };
    let (value_key, name_key) = (squash(value), squash(name));
    is_constant_name(value)
        || (value_key.len() >= 4
            && (name_key.ends_with(&value_key) || value_key.ends_with(&name_key)))
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

pub(crate) fn starts_with_ignore_ascii_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

pub(crate) fn ends_with_ignore_ascii_case(s: &[u8], suffix: &str) -> bool {
    s.len() >= suffix.len() && s[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

fn contains_ignore_ascii_case(s: &str, needle: &str) -> bool {
    s.as_bytes()
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            assert!(is_placeholder(p), "{p}");
        }
        for v in ["hunter22", "q7VbN2xK", "pass", "password"] {
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
