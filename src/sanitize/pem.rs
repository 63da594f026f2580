//! PEM private keys, which span lines and so cannot be table rules: raw, with `\n` escapes
//! inside a JSON string (a GCP service-account file, an agent's tool output), and
//! base64-wrapped as a whole (`tls.key: LS0tLS1CRUdJTi…` in a Kubernetes secret).
//!
//! The `BEGIN` and `END` lines stay, so that a reader still sees what was there; the body
//! between them becomes one mask. The body is found by its shape, line by line (base64,
//! the few PEM headers, blank lines), not by looking for the `END` line: a block cut off
//! before its end is masked as far as it goes, and what decides is never something a later
//! rule's mask could change, which keeps sanitizing idempotent.

use std::borrow::Cow;
use std::ops::Range;

use memchr::memmem;

use super::MASK;

/// `-----BEGIN` in base64. A wrapped key is a whole PEM file encoded, so the marker starts
/// the base64 run.
const BASE64_BEGIN: &str = "LS0tLS1CRUdJTi";

/// The families this scanner covers, for `docs/sanitizing.md` and the family count.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const FAMILIES: &[&str] = &["pem-private-key", "pem-private-key-base64"];

#[derive(Debug)]
pub(crate) struct PrivateKeys {
    begin: memmem::Finder<'static>,
    base64: memmem::Finder<'static>,
}

impl PrivateKeys {
    pub(super) fn new() -> PrivateKeys {
        PrivateKeys {
            begin: memmem::Finder::new(b"-----BEGIN ").into_owned(),
            base64: memmem::Finder::new(BASE64_BEGIN.as_bytes()).into_owned(),
        }
    }

    pub(super) fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut masks: Vec<Range<usize>> = Vec::new();
        for at in self.begin.find_iter(text.as_bytes()) {
            // A BEGIN inside a body already masked (`Comment: -----BEGIN …`).
            if masks.last().is_some_and(|m| at < m.end) {
                continue;
            }
            if let Some(body) = private_label(text, at).and_then(|(_, end)| body_at(text, end)) {
                masks.push(body);
            }
        }
        let mut wrapped = Vec::new();
        for at in self.base64.find_iter(text.as_bytes()) {
            if wrapped.last().is_some_and(|m: &Range<usize>| at < m.end) {
                continue;
            }
            if let Some(run) = base64_block(text, at) {
                wrapped.push(run);
            }
        }
        if masks.is_empty() && wrapped.is_empty() {
            return Cow::Borrowed(text);
        }
        masks.extend(wrapped);
        masks.sort_by_key(|m| m.start);
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        for m in masks {
            if m.start < copied {
                continue;
            }
            out.push_str(&text[copied..m.start]);
            out.push_str(MASK);
            copied = m.end;
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }
}

/// A line break: raw (`\n`, `\r\n`), JSON-escaped (`\n`, `\r\n`), or escaped twice.
fn break_len(b: &[u8], i: usize) -> usize {
    let rest = &b[i..];
    for sep in [
        &b"\r\n"[..],
        b"\n",
        b"\\r\\n",
        b"\\n",
        b"\\\\r\\\\n",
        b"\\\\n",
    ] {
        if rest.starts_with(sep) {
            return sep.len();
        }
    }
    0
}

/// The label of a `-----BEGIN <label>-----` line at `at`, when it is a private key's,
/// and where the line ends.
fn private_label(text: &str, at: usize) -> Option<(&str, usize)> {
    let start = at + "-----BEGIN ".len();
    let rest = text.as_bytes().get(start..)?;
    let len = rest
        .iter()
        .take(64)
        .position(|b| !(b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b' '))?;
    let label = &text[start..start + len];
    let end = start + len;
    (label.contains("PRIVATE KEY") && text[end..].starts_with("-----"))
        .then_some((label, end + "-----".len()))
}

/// The body after a private key's `BEGIN` line ending at `header_end`: its base64 lines,
/// PEM headers and blank lines, up to the first line that is none of these (the `END`
/// line, or whatever follows a cut-off block). `None` when there is none, or when it is
/// already a mask. Bodies of different blocks never overlap, so all of them together are
/// read once.
fn body_at(text: &str, header_end: usize) -> Option<Range<usize>> {
    let b = text.as_bytes();
    let mut i = header_end;
    while i < b.len() && break_len(b, i) > 0 {
        i += break_len(b, i);
    }
    let start = i;
    let mut last = start;
    loop {
        let line_start = i;
        let mut j = i;
        while j < b.len() && (is_base64(b[j]) || b[j] == b'-') {
            j += 1;
        }
        let run = &b[line_start..j];
        let line_ends = j == b.len() || b[j] == b'"' || break_len(b, j) > 0;
        if line_ends && !run.contains(&b'-') {
            // A short base64 line ends a body only when it is padded, is a PGP checksum
            // (`=AbCd`) or comes right before the END line or the checksum; otherwise it is
            // more likely a word after a cut-off key.
            let next = &b[(j + break_len(b, j)).min(b.len())..];
            let before_end = j < b.len()
                && break_len(b, j) > 0
                && (next.starts_with(b"-----END ") || next.starts_with(b"="));
            if run.len() >= 16 || run.ends_with(b"=") || run.starts_with(b"=") || before_end {
                last = j;
            } else if !run.is_empty() {
                break;
            }
        } else if is_header_name(run) && b[j..].starts_with(b": ") {
            while j < b.len() && b[j] != b'"' && break_len(b, j) == 0 {
                j += 1;
            }
            last = j;
        } else {
            break;
        }
        if j >= b.len() || b[j] == b'"' {
            break;
        }
        i = j + break_len(b, j);
    }
    (last > start && &text[start..last] != MASK).then_some(start..last)
}

/// The headers a PEM or PGP armoured block may have before its base64.
fn is_header_name(name: &[u8]) -> bool {
    const NAMES: &[&[u8]] = &[
        b"Proc-Type",
        b"DEK-Info",
        b"Version",
        b"Comment",
        b"Hash",
        b"Charset",
        b"MessageID",
    ];
    NAMES.contains(&name)
}

fn is_base64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=')
}

/// A base64-encoded PEM file starting at `at`, when it decodes to a private key: the run
/// of base64 and the base64 lines that continue it (wrapped at 64 or 76 columns).
fn base64_block(text: &str, at: usize) -> Option<Range<usize>> {
    let b = text.as_bytes();
    // The match must start the run, or it is the inside of other base64; a JSON escape
    // (`\n`) before it ends in a letter but is not base64, and padding (`=`) ends a run.
    let escaped = at >= 2 && b[at - 2] == b'\\' && matches!(b[at - 1], b'n' | b'r' | b't');
    if at > 0 && is_base64(b[at - 1]) && b[at - 1] != b'=' && !escaped {
        return None;
    }
    let mut end = at;
    while end < b.len() && is_base64(b[end]) {
        end += 1;
    }
    let head = decode_base64_prefix(&b[at..end], 48);
    if !head.windows(11).any(|w| w == b"PRIVATE KEY") {
        return None;
    }
    // Continuation lines: nothing but base64 after the indentation, until one is padded.
    let mut padded = b[at..end].ends_with(b"=");
    while !padded {
        let br = if end < b.len() { break_len(b, end) } else { 0 };
        if br == 0 {
            break;
        }
        let mut j = end + br;
        while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
            j += 1;
        }
        let run_start = j;
        while j < b.len() && is_base64(b[j]) {
            j += 1;
        }
        let run = &b[run_start..j];
        let ends_line = j == b.len() || b[j] == b'"' || break_len(b, j) > 0;
        if !ends_line || run.is_empty() || (run.len() < 16 && !run.ends_with(b"=")) {
            break;
        }
        padded = run.ends_with(b"=");
        end = j;
    }
    Some(at..end)
}

/// Decodes up to `max` bytes of standard base64; stops at the first non-alphabet byte.
fn decode_base64_prefix(s: &[u8], max: usize) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::new();
    for chunk in s.chunks(4) {
        let Some(v) = chunk.iter().map(|&c| value(c)).collect::<Option<Vec<_>>>() else {
            break;
        };
        if v.len() < 4 {
            break;
        }
        let n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
        if out.len() >= max {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    // Random base64 generated for these tests; not keys.
    const L1: &str = concat!(
        "0/5ri9v+1vv021e1TnrJcTZOeW9X3b21",
        "+WZlfEXj0Kn7zctai7R1UbhGxfiyBRbW"
    );
    const L2: &str = concat!(
        "LIVEy79GUB3yxLs1sGqNii0Q4j5iMN4L",
        "g7zGOpfkSqpD6o6Eblm+s/MXu0kn7RXu"
    );
    const L3: &str = concat!("zI2VxJOgyQA", "rWjEJ/URt==");

    fn run(text: &str) -> String {
        PrivateKeys::new().apply(text).into_owned()
    }

    fn encode(s: &str) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in s.as_bytes().chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &c)| n | (u32::from(c) << (16 - 8 * i)));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    /// `=` is base64's padding: what follows it starts a run of its own, as in
    /// `tls.key=LS0t…` (found by the idempotence property: once a redaction before the `=`
    /// took it, the second pass saw the key).
    #[test]
    fn a_base64_key_right_after_an_equals_sign_is_found() {
        let key = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ";
        assert_eq!(run(&format!("tls.key={key}")), "tls.key=[REDACTED]");
        assert_eq!(run(&format!("Password={key}")), "Password=[REDACTED]");
    }

    #[test]
    fn raw_block_keeps_its_armour_lines() {
        let input = format!(
            "key:\n-----BEGIN RSA PRIVATE KEY-----\n{L1}\n{L2}\n{L3}\n-----END RSA PRIVATE KEY-----\ndone"
        );
        assert_eq!(
            run(&input),
            "key:\n-----BEGIN RSA PRIVATE KEY-----\n[REDACTED]\n-----END RSA PRIVATE KEY-----\ndone"
        );
    }

    #[test]
    fn crlf_block_and_encrypted_headers() {
        let input = format!(
            "-----BEGIN EC PRIVATE KEY-----\r\nProc-Type: 4,ENCRYPTED\r\nDEK-Info: AES-128-CBC,0A1B\r\n\r\n{L1}\r\n-----END EC PRIVATE KEY-----\r\n"
        );
        assert_eq!(
            run(&input),
            "-----BEGIN EC PRIVATE KEY-----\r\n[REDACTED]\r\n-----END EC PRIVATE KEY-----\r\n"
        );
    }

    #[test]
    fn json_escaped_block() {
        let input = format!(
            r#"{{"private_key": "-----BEGIN PRIVATE KEY-----\n{L1}\n{L2}\n-----END PRIVATE KEY-----\n", "x": 1}}"#
        );
        assert_eq!(
            run(&input),
            r#"{"private_key": "-----BEGIN PRIVATE KEY-----\n[REDACTED]\n-----END PRIVATE KEY-----\n", "x": 1}"#
        );
    }

    #[test]
    fn block_cut_before_its_end() {
        let input = format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{L1}\n{L2}\n[truncated]\nnext");
        assert_eq!(
            run(&input),
            "-----BEGIN OPENSSH PRIVATE KEY-----\n[REDACTED]\n[truncated]\nnext"
        );
    }

    #[test]
    fn base64_wrapped_key_with_continuation_lines() {
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{L1}\n-----END PRIVATE KEY-----\n");
        let encoded = encode(&pem);
        let (a, rest) = encoded.split_at(64);
        let (b, c) = rest.split_at(64);
        let input = format!("data:\n  tls.key: {a}\n    {b}\n    {c}\n  tls.crt: x\n");
        assert_eq!(run(&input), "data:\n  tls.key: [REDACTED]\n  tls.crt: x\n");
        let one_line = format!("\"tls.key\":\"{encoded}\"");
        assert_eq!(run(&one_line), "\"tls.key\":\"[REDACTED]\"");
    }

    #[test]
    fn fuzz_regression_a_body_line_that_a_later_mask_shortens() {
        // Found by `cargo fuzz run sanitize`: a line after BEGIN that reads like a header
        // (`…password: …`) was a body line or not depending on its length, which the
        // assignment rule's mask then changed, so a second pass masked more.
        // The failing bytes, as the fuzz target reads them (lossy UTF-8: each lone 0xC4
        // byte is a U+FFFD).
        let bytes = [
            &b"-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD89vcNLYLInpassword: "[..],
            &[0xC4; 26],
            b"FEX6Ppy1tPf9Cnzj4",
            &[0xC4; 58],
            b"p4WGeKLs1Pt8E KEY---r--\n",
        ]
        .concat();
        let input = String::from_utf8_lossy(&bytes);
        let s = crate::sanitize::Sanitizer::new(Some("/root"));
        let once = s.sanitize(&input);
        assert_eq!(s.sanitize(&once), once);
        assert_eq!(
            once,
            "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD89vcNLYLInpassword: [REDACTED] KEY---r--\n"
        );
    }

    #[test]
    fn short_last_line_before_end_and_pgp_checksum() {
        let input = format!(
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: x\n\n{L1}\nXyZ0\n=AbCd\n-----END PGP PRIVATE KEY BLOCK-----"
        );
        assert_eq!(
            run(&input),
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n[REDACTED]\n-----END PGP PRIVATE KEY BLOCK-----"
        );
        let short = format!("-----BEGIN PRIVATE KEY-----\n{L1}\nXyZ0\n-----END PRIVATE KEY-----");
        assert_eq!(
            run(&short),
            "-----BEGIN PRIVATE KEY-----\n[REDACTED]\n-----END PRIVATE KEY-----"
        );
    }

    #[test]
    fn many_begin_lines_stay_linear() {
        let header = "-----BEGIN RSA PRIVATE KEY-----";
        let text = header.repeat(200_000) + "\n" + &"-----END X-----".repeat(1000);
        // Quadratic work on 200,000 BEGIN lines (4e10 steps) takes minutes; linear work takes well
        // under a second. The bound only tells the two apart, on any machine however loaded.
        let start = std::time::Instant::now();
        assert_eq!(run(&text), text);
        assert!(start.elapsed() < std::time::Duration::from_secs(60));
    }

    #[test]
    fn public_material_and_masked_blocks_are_untouched() {
        let cert = format!("-----BEGIN CERTIFICATE-----\n{L1}\n-----END CERTIFICATE-----\n");
        let public = format!("-----BEGIN PUBLIC KEY-----\n{L2}\n-----END PUBLIC KEY-----\n");
        let cert64 = encode(&cert);
        let masked = "-----BEGIN PRIVATE KEY-----\n[REDACTED]\n-----END PRIVATE KEY-----\n";
        let escaped = r#""-----BEGIN PRIVATE KEY-----\n[REDACTED]\n-----END PRIVATE KEY-----\n""#;
        for text in [
            cert.as_str(),
            &public,
            &cert64,
            masked,
            escaped,
            "-----BEGIN PRIVATE KEY-----",
            "mention of -----BEGIN RSA PRIVATE KEY----- in prose",
        ] {
            assert_eq!(run(text), text);
        }
    }
}
