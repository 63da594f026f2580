//! Secrets given in sentences: `the staging password is …`, `my API key is …`, `I set
//! the password to …`.

use super::super::value::{
    is_path, is_placeholder, is_prose_value, is_prose_word, looks_random, password_reads_as_code,
    reads_as_code,
};
use super::names::Strength;
use super::{skip_blanks, ValueEnds, MAX_VALUE};

/// Words between a secret's name and `is` in a sentence (`password for the admin account
/// is`), and before the name for `set the password to`.
const MAX_PROSE_WORDS: usize = 5;

/// `the staging password is …`, `Password for the admin account is …`, `my API key is
/// …`, `I set the password to …`: the range of the value a sentence gives for the word at
/// `start..end`, if it looks like that kind of secret.
pub(super) fn prose_value(
    text: &str,
    start: usize,
    end: usize,
    ends: &ValueEnds,
) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    // The first look is two bytes: prose has a space after the name, then `is`, `was`,
    // `for`, `of`, `on`, `in` or `to`. Most names in text are followed by neither.
    if b.get(end) != Some(&b' ')
        || !b
            .get(end + 1)
            .is_some_and(|c| matches!(c.to_ascii_lowercase(), b'i' | b'w' | b'f' | b'o' | b't'))
    {
        return None;
    }
    let name = &b[start..end];
    if !name.iter().all(u8::is_ascii_alphabetic) || (start > 0 && !is_word_gap(b[start - 1])) {
        return None;
    }
    let strength = prose_strength(b, start, name)?;
    let mut words = Words { b, at: end };
    let mut word = words.next()?;
    if is_one_of(word, &["for", "of", "on", "in"]) {
        // `password for the admin account is`
        let mut found = false;
        for _ in 0..MAX_PROSE_WORDS {
            word = words.next()?;
            if is_one_of(word, &["is", "was"]) {
                found = true;
                break;
            }
        }
        if !found {
            return None;
        }
    }
    if is_one_of(word, &["is", "was"]) {
        let mark = words.at;
        if !words
            .next()
            .is_some_and(|w| is_one_of(w, &["now", "still", "currently", "just", "also"]))
        {
            words.at = mark;
        }
        let mark = words.at;
        let set = words
            .next()
            .is_some_and(|w| is_one_of(w, &["set", "changed", "reset", "updated"]));
        if !(set && words.next().is_some_and(|w| is_one_of(w, &["to"]))) {
            words.at = mark;
        }
    } else if !(is_one_of(word, &["to"]) && set_before(b, start)) {
        // `set the password to …`: only after a verb that sets it.
        return None;
    }
    let vs = skip_blanks(b, words.at);
    if vs == words.at && vs < b.len() {
        // No blank after the last word: not a sentence.
        return None;
    }
    let (vs, ve, quoted) = match b.get(vs) {
        Some(&q @ (b'"' | b'\'' | b'`')) => {
            let limit = b.len().min(vs + 1 + MAX_VALUE);
            let close = b[vs + 1..limit]
                .iter()
                .position(|&c| c == q || c == b'\n')
                .map(|n| vs + 1 + n)
                .filter(|&c| b[c] == q)?;
            (vs + 1, close, true)
        }
        _ => {
            let limit = b.len().min(vs + MAX_VALUE);
            let mut ve = vs;
            while ve < limit
                && !b[ve].is_ascii_whitespace()
                && !matches!(b[ve], b'"' | b'\'' | b'`' | b'\\' | b'<' | b'>')
            {
                ve += 1;
            }
            // A sentence's own punctuation after the value.
            while ve > vs && matches!(b[ve - 1], b'.' | b',' | b';' | b':') {
                ve -= 1;
            }
            if ve > vs && b[ve - 1] == b')' && !b[vs..ve].contains(&b'(') {
                ve -= 1;
            }
            (vs, ve, false)
        }
    };
    let value = text.get(vs..ve)?;
    // The name plays no part in the verdict on prose.
    let given = (strength, false, false, None, quoted);
    ends.judged(text, (vs, ve), (0, 0), given, || {
        judge_prose(value, strength, quoted)
    })
    .then_some((vs, ve))
}

/// Whether `c` may stand before a word of a sentence.
fn is_word_gap(c: u8) -> bool {
    c.is_ascii_whitespace() || matches!(c, b'"' | b'\'' | b'(' | b'*' | b'_' | b'>' | b'-')
}

/// The kind of secret a word of a sentence names: passwords, or keys, tokens and secrets.
fn prose_strength(b: &[u8], start: usize, name: &[u8]) -> Option<Strength> {
    if is_one_of(name, &["password", "passwd", "passphrase"]) {
        Some(Strength::Password)
    } else if is_one_of(name, &["secret", "token"]) {
        Some(Strength::Secret)
    } else if is_one_of(name, &["key"]) {
        // `API key`, `access key`, `secret key`: a key is a secret only with its kind.
        let before = &b[..start.saturating_sub(1)];
        let word_start = before
            .iter()
            .rposition(|c| !c.is_ascii_alphabetic())
            .map_or(0, |i| i + 1);
        let qualifier = &before[word_start..];
        let kinds = [
            "api",
            "access",
            "secret",
            "private",
            "license",
            "encryption",
            "signing",
            "master",
        ];
        is_one_of(qualifier, &kinds).then_some(Strength::Secret)
    } else {
        None
    }
}

/// `word` is one of `words`, ASCII case-insensitively.
fn is_one_of(word: &[u8], words: &[&str]) -> bool {
    words
        .iter()
        .any(|w| word.eq_ignore_ascii_case(w.as_bytes()))
}

/// A verb that sets a password among the few words before the name (`I set the password
/// to …`, `we changed the root password to …`).
fn set_before(b: &[u8], start: usize) -> bool {
    let lo = start.saturating_sub(48);
    b[lo..start]
        .split(|c| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .rev()
        .take(MAX_PROSE_WORDS)
        .any(|w| {
            is_one_of(
                w,
                &["set", "change", "changed", "reset", "update", "updated"],
            )
        })
}

/// The words of a sentence after a position: runs of non-blank bytes separated by blanks,
/// on one line.
struct Words<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Words<'a> {
    fn next(&mut self) -> Option<&'a [u8]> {
        let start = skip_blanks(self.b, self.at);
        if start == self.at && start != 0 {
            // Words are separated by blanks.
            if !matches!(self.b.get(start.wrapping_sub(1)), Some(b' ' | b'\t')) {
                return None;
            }
        }
        let mut end = start;
        while end < self.b.len() && end - start < 32 && self.b[end].is_ascii_alphabetic() {
            end += 1;
        }
        if end == start || !self.b.get(end).is_none_or(|c| matches!(c, b' ' | b'\t')) {
            return None;
        }
        self.at = end;
        Some(&self.b[start..end])
    }
}

/// A value that a sentence gives for a password (people's choice: a digit or a symbol in
/// it, or quotes around it) or for a key or token (random).
fn judge_prose(value: &str, strength: Strength, quoted: bool) -> bool {
    // What a value of its kind must have first, then what rules it out: most sentences
    // fail the first checks.
    let shaped = match strength {
        Strength::Password if quoted => value.chars().count() >= 4 && !reads_as_code(value),
        Strength::Password => {
            let symbol = value.bytes().any(|c| b"!@#$%^&*+=?~".contains(&c));
            value.chars().count() >= 6
                && (value.bytes().any(|c| c.is_ascii_digit()) || symbol)
                && !is_prose_value(value)
                && !password_reads_as_code(value)
        }
        _ => {
            value.len() >= if quoted { 8 } else { 16 }
                && !value.contains(char::is_whitespace)
                && looks_random(value)
        }
    };
    shaped
        && !value.contains("://")
        && !is_prose_word(value)
        && !is_path(value)
        && !is_placeholder(value)
}
