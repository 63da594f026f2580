//! A line of the child's stdout as text a JSON parser accepts, losing only what is damaged:
//! bytes that are not UTF-8 and lone UTF-16 surrogate escapes (`\ud800`, which node's
//! `JSON.stringify` writes for a broken string and serde_json refuses) both become U+FFFD.
//! A damaged character must not cost the whole line: its text, its usage, or the answer.

use std::borrow::Cow;

/// `line` as UTF-8 text with every damaged character replaced. Lines that need nothing
/// (nearly all) are borrowed as they are.
pub(super) fn decode_line(line: &[u8]) -> Cow<'_, str> {
    let text = match simdutf8::basic::from_utf8(line) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(line),
    };
    match repair_lone_surrogates(&text) {
        Some(repaired) => Cow::Owned(repaired),
        None => text,
    }
}

/// Replaces each `\uXXXX` escape of a surrogate that is not half of a pair with `\ufffd`.
/// None when there is none (the common case costs one substring search).
fn repair_lone_surrogates(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    // Every surrogate escape starts `\ud` or `\uD`; most lines have no `\u` at all.
    memchr::memmem::find(bytes, b"\\u")?;
    let mut out: Option<String> = None;
    let mut copied = 0; // bytes of `text` already in `out`
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        // An escape: `\` and the escaped character (which may itself be a `\`).
        if bytes.get(i + 1) != Some(&b'u') {
            i += 2;
            continue;
        }
        let Some(unit) = hex4(bytes, i + 2) else {
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => {
                // A high surrogate is whole only when a low one follows at once.
                let next = (bytes.get(i + 6) == Some(&b'\\') && bytes.get(i + 7) == Some(&b'u'))
                    .then(|| hex4(bytes, i + 8))
                    .flatten();
                match next {
                    Some(0xDC00..=0xDFFF) => {
                        i += 12;
                        continue;
                    }
                    _ => true,
                }
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
            o.push_str(&text[copied..i]);
            o.push_str("\\ufffd");
            copied = i + 6;
        }
        i += 6;
    }
    let mut o = out?;
    o.push_str(&text[copied..]);
    Some(o)
}

/// The value of four hex digits at `at`, if there are four.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let s = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parsed(line: &[u8]) -> String {
        let v: serde_json::Value = serde_json::from_str(&decode_line(line)).expect("valid JSON");
        v["t"].as_str().unwrap().to_string()
    }

    #[test]
    fn clean_lines_are_borrowed_unchanged() {
        for line in [
            &br#"{"t":"plain"}"#[..],
            br#"{"t":"escapes \n \" \\ \u00e9 \ud83e\udd80"}"#,
            "{\"t\":\"raw é 🦀\"}".as_bytes(),
        ] {
            assert!(matches!(decode_line(line), Cow::Borrowed(_)), "{line:?}");
        }
        assert_eq!(parsed(br#"{"t":"\ud83e\udd80"}"#), "🦀");
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let cases: [(&[u8], &str); 6] = [
            (br#"{"t":"a\ud800b"}"#, "a\u{FFFD}b"),
            (br#"{"t":"a\uDC00b"}"#, "a\u{FFFD}b"),
            // A high surrogate followed by something other than a low one.
            (br#"{"t":"\ud800\u0041"}"#, "\u{FFFD}A"),
            (br#"{"t":"\ud800\ud800\udc00"}"#, "\u{FFFD}\u{10000}"),
            // At the very end of the string.
            (br#"{"t":"x\ud83e"}"#, "x\u{FFFD}"),
            // A pair stays whole next to a lone one.
            (br#"{"t":"\ud83e\udd80\udd80"}"#, "🦀\u{FFFD}"),
        ];
        for (line, want) in cases {
            assert_eq!(parsed(line), want, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn an_escaped_backslash_before_u_is_not_an_escape() {
        // `\\ud800` is a backslash followed by the letters "ud800".
        let line = br#"{"t":"\\ud800"}"#;
        assert!(matches!(decode_line(line), Cow::Borrowed(_)));
        assert_eq!(parsed(line), "\\ud800");
    }

    #[test]
    fn bytes_that_are_not_utf8_become_replacement_characters() {
        assert_eq!(
            parsed(b"{\"t\":\"caf\xe9 \xff\xfe ok\"}"),
            "caf\u{FFFD} \u{FFFD}\u{FFFD} ok"
        );
        // Both kinds of damage in one line.
        assert_eq!(parsed(b"{\"t\":\"\xe9\\udc00\"}"), "\u{FFFD}\u{FFFD}");
    }
}
