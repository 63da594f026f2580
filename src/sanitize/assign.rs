//! Layer (c): generic assignments of secrets, `DB_PASSWORD=…`, `"api_key": "…"`,
//! `--token=…`, `client_secret: …`, `POSTGRES_PASSWORD: …`. The key's name decides that a
//! value is a secret; the value decides whether it is a real one or a placeholder, a
//! reference, a path or code.
//!
//! Where the assignment stands changes how literal its value is: an env file, a dotted
//! property key at the start of its line (`spring.datasource.password=…`) and a printed
//! struct (`&{User:app Password:…}`) hold literals, code holds expressions. Sentences hold
//! secrets too (`the staging password is …`), and so do percent-encoded query strings
//! inside other URLs (`%3Ftoken%3D…`).
//!
//! A hand-written scanner rather than a regex: the key keywords are case-insensitive and
//! sit at the end of a name of any length, which no literal prefilter can anchor on, and
//! deciding about the value needs the name and the kind of separator anyway. One literal
//! search over the keywords' three spellings finds the candidates.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};

use super::literals::Literals;
use super::value::{
    ends_with_ignore_ascii_case, is_hex_or_uuid, is_label, is_path, is_placeholder, is_prose_word,
    literal_reads_as_code, looks_like_random_token, looks_random, password_reads_as_code,
    percent_decode, reads_as_code,
};
use super::MASK;

mod names;
mod prose;

use names::{inside_arn, name_around, strength_of, Strength, ANCHORS};
#[cfg(test)]
pub(crate) use names::{KEYWORDS, PROSE_FAMILIES};
use prose::prose_value;

/// Bounds on how far a candidate is followed, so that pathological input (megabytes of
/// `tokentoken…` or an unterminated quote) stays linear.
const MAX_VALUE: usize = 1024;
/// How far back a printed struct's opening `{` or `map[` is looked for.
const MAX_DUMP_LOOKBACK_BYTES: usize = 512;

#[derive(Debug)]
pub(crate) struct Assignments {
    /// Built directly rather than through `regex`, whose meta engine cost about a
    /// million instructions to build: a sixth of a whole trivial run. The names' keywords
    /// are common words (`token`, `auth`), so the search is called once per word: the
    /// SIMD searcher made this scan four times faster than a standard automaton.
    anchors: Literals,
}

impl Assignments {
    pub(super) fn new() -> Assignments {
        Assignments {
            anchors: Literals::new(ANCHORS),
        }
    }

    pub(super) fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let bytes = text.as_bytes();
        let mut out = String::new();
        let mut copied = 0;
        let mut pos = 0;
        let ends = ValueEnds::new();
        let mut last_name: Option<(&[u8], Option<Strength>)> = None;
        while let Some((hit_start, hit_end, _)) = self.anchors.find(bytes, pos) {
            pos = hit_end;
            let Some((start, end)) = name_around(bytes, hit_start, hit_end - hit_start) else {
                continue;
            };
            // The rest of this name holds no other candidate.
            pos = pos.max(end);
            if start < copied || inside_arn(bytes, start) {
                continue;
            }
            // Names repeat (a JSON stream's keys, a file of settings): the last one's
            // strength is kept.
            let mut strength = |name: &'a [u8]| match last_name {
                Some((last, strength)) if last == name => strength,
                _ => {
                    let strength = strength_of(name);
                    last_name = Some((name, strength));
                    strength
                }
            };
            let found = if separator_follows(bytes, end) {
                strength(&bytes[start..end])
                    .and_then(|strength| secret_value(text, start, end, strength, &ends))
            } else if let Some(vs) = encoded_value_start(bytes, start, end) {
                strength(&bytes[start..end])
                    .and_then(|strength| encoded_value(text, start, end, vs, strength, &ends))
            } else {
                // Most candidates are words in prose or code (`the token is`, `auth(req)`):
                // only a sentence that gives the value is worth a closer look.
                prose_value(text, start, end, &ends)
            };
            let Some((vs, ve)) = found else {
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

/// Bytes that end any unquoted value. `<` and `{` are here so that `<YOUR_KEY>` and
/// `{{ secrets.X }}` give an empty value; `(` so that a call is recognised. Besides these,
/// `&` ends a value in a URL query (a password elsewhere may hold one), and `]` ends a
/// value in a printed Go map (`map[password:x]`): see [`unquoted_end`].
fn ends_any_value(c: u8) -> bool {
    c.is_ascii_whitespace()
        || c.is_ascii_control()
        || matches!(
            c,
            b'"' | b'\'' | b'`' | b'\\' | b',' | b';' | b'|' | b'(' | b')' | b'{' | b'}' | b'<'
        )
}

/// The next byte at or after a value's start that [`ends_any_value`], remembered between
/// the candidates of one text. Their values start further and further on, so each byte is
/// looked at about once however many names a stretch holds: `token=token=…` looked a
/// kilobyte ahead from every name before.
///
/// It also remembers the last verdict on a value ([`ValueEnds::judged`]): text that repeats
/// an assignment (a setting printed on every line of a log) has it judged once.
struct ValueEnds(Cell<(usize, usize)>, RefCell<Verdict>);

/// A verdict and everything it was given: where the value and the name stand in the text
/// (compared by content), and what of the key and the context the judgement reads.
#[derive(Default)]
struct Verdict {
    value: (usize, usize),
    name: (usize, usize),
    /// The strength, how the key was written and the context, as [`judge`] or
    /// [`judge_prose`] read them; `None` before the first verdict.
    given: Option<Given>,
    secret: bool,
}

/// Strength, `spaced`, `tight`, the context of an assignment or `None` for prose, quoted.
type Given = (Strength, bool, bool, Option<Context>, bool);

impl ValueEnds {
    fn new() -> ValueEnds {
        // `from > end`: nothing known yet.
        ValueEnds(Cell::new((1, 0)), RefCell::new(Verdict::default()))
    }

    fn from(&self, b: &[u8], i: usize) -> usize {
        let (from, end) = self.0.get();
        if from <= i && i <= end {
            return end;
        }
        let end = b[i..]
            .iter()
            .position(|&c| ends_any_value(c))
            .map_or(b.len(), |n| i + n);
        self.0.set((i, end));
        end
    }

    /// `judge()`, which is `given` the rest of what decides the verdict about the value at
    /// `value` assigned to the name at `name` in `text`, unless the last verdict was given
    /// exactly the same.
    fn judged(
        &self,
        text: &str,
        value: (usize, usize),
        name: (usize, usize),
        given: Given,
        judge: impl FnOnce() -> bool,
    ) -> bool {
        let b = text.as_bytes();
        let same = |a: (usize, usize), c: (usize, usize)| b[a.0..a.1] == b[c.0..c.1];
        let mut last = self.1.borrow_mut();
        if last.given == Some(given) && same(last.value, value) && same(last.name, name) {
            return last.secret;
        }
        let secret = judge();
        *last = Verdict {
            value,
            name,
            given: Some(given),
            secret,
        };
        secret
    }
}

/// The byte range of the value assigned to the name at `start..end`, if it is a secret.
fn secret_value(
    text: &str,
    start: usize,
    end: usize,
    strength: Strength,
    ends: &ValueEnds,
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
        name_at: start,
        strength,
        env_style: sep == Sep::Tight && is_env_name(name.as_bytes()),
        tight: sep == Sep::Tight,
        in_query: start > 0 && matches!(b[start - 1], b'?' | b'&'),
        spaced: sep == Sep::Other,
        property: is_property_key(b, start, end, name, sep),
        dump: sep == Sep::Colon && b.get(end) == Some(&b':') && in_dump(b, start, end, ends),
        ends,
    };
    value_at(text, i, &key, sep == Sep::Colon && !key.dump)
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
    /// Where `name` starts in the text.
    name_at: usize,
    strength: Strength,
    /// `NAME=value`, where a value is a literal string even when it is a plain word.
    env_style: bool,
    /// `name=value` with no blanks: a literal in shells, URLs and CLI flags.
    tight: bool,
    /// `?name=value&…`: `&` ends the value.
    in_query: bool,
    /// ` = `, `:=`, `=>`: what code assigns with.
    spaced: bool,
    /// A dotted property key starting its line (`spring.datasource.password=…`) or a JVM
    /// `-D` flag: its value, to the end of the line, is a literal.
    property: bool,
    /// `Name:value` in a printed struct or map (`&{User:app Password:…}`): a literal.
    dump: bool,
    ends: &'a ValueEnds,
}

/// Where and how a value was written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// In quotes: a string literal.
    Quoted,
    /// `NAME=value` in an env file or shell.
    EnvLiteral,
    /// A property file's value or a printed struct's field: data, though it may look like
    /// an identifier (`HarborFalconLantern`); only calls, indexes and field paths are code.
    Literal,
    /// Anything else: a literal, or code. `line_end`: nothing but blanks or a comment
    /// follows on its line, as in YAML and `.properties` files.
    Unquoted { line_end: bool },
}

fn value_at(text: &str, i: usize, key: &Key, may_be_typed: bool) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let (vs, ve, context) = if let Some(q) = quote_at(b, i) {
        let vs = i + q.len();
        let window = &b[vs..b.len().min(vs + MAX_VALUE)];
        match closing_quote(window, q) {
            Some(n) => {
                let literal = key.dump || (key.property && ends_line(b, vs + n + q.len()));
                let context = if literal {
                    Context::Literal
                } else {
                    Context::Quoted
                };
                (vs, vs + n, context)
            }
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
                    property: false,
                    ..*key
                };
                return value_at(text, after, &typed, false);
            }
        }
        let line_end = ends_line(b, ve);
        let context = if key.env_style {
            Context::EnvLiteral
        } else if key.dump || (key.property && (line_end || key.name.starts_with("-D"))) {
            Context::Literal
        } else {
            Context::Unquoted { line_end }
        };
        (i, ve, context)
    };
    let value = &text[vs..ve];
    // Too short a value is no secret, which `judge` finds first: most candidates of
    // ordinary text, not worth remembering.
    if value.len() < min_chars(key.strength, context) {
        return None;
    }
    let name = (key.name_at, key.name_at + key.name.len());
    let given = (key.strength, key.spaced, key.tight, Some(context), false);
    key.ends
        .judged(text, (vs, ve), name, given, || judge(value, key, context))
        .then_some((vs, ve))
}

/// Where the quote `q` (`"`, `'`, `` ` `` or JSON's `\"`) closes in `window`, if it does
/// before the line ends. Looks only as far as the first of the two.
fn closing_quote(window: &[u8], q: &[u8]) -> Option<usize> {
    let last = q[q.len() - 1];
    let mut from = 0;
    while let Some(n) = memchr::memchr2(last, b'\n', &window[from..]) {
        let at = from + n;
        if window[at] == b'\n' {
            return None;
        }
        if q.len() == 1 || (at >= 1 && window[at - 1] == q[0]) {
            return Some(at + 1 - q.len());
        }
        from = at + 1;
    }
    None
}

/// The fewest characters a secret of this strength has in this context.
fn min_chars(strength: Strength, context: Context) -> usize {
    match (strength, context) {
        (Strength::Password, Context::Unquoted { .. }) => 6,
        (Strength::Password, _) => 4,
        _ => 8,
    }
}

/// Whether the value is a secret, given its key and context.
fn judge(value: &str, key: &Key, context: Context) -> bool {
    // A URL is where a secret is used, not the secret; its password is the URL rule's.
    let random = || looks_random(value) && !value.contains("://");
    let min_chars = min_chars(key.strength, context);
    // Cheapest first: most candidates fail the first checks.
    if value.len() < min_chars
        || (!value.is_ascii() && value.chars().count() < min_chars)
        || (key.strength != Strength::Password && value.contains(char::is_whitespace))
        || is_label(value, key.name)
        || is_path(value)
        || is_placeholder(value)
    {
        return false;
    }
    match (key.strength, context) {
        (Strength::Password, Context::Quoted | Context::EnvLiteral) => true,
        (Strength::Password, Context::Literal) => {
            !literal_reads_as_code(value) && !is_prose_word(value)
        }
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
        (Strength::Secret, Context::Literal) => {
            !literal_reads_as_code(value) && !is_prose_word(value)
        }
        (Strength::Secret, Context::Quoted) => random(),
        (Strength::Secret, Context::Unquoted { .. }) => random() && !reads_as_code(value),
        (Strength::Key, Context::Quoted | Context::EnvLiteral | Context::Literal) => {
            looks_like_random_token(value)
        }
        (Strength::Key, Context::Unquoted { .. }) => {
            looks_like_random_token(value) && !reads_as_code(value)
        }
        (Strength::VendorKey, Context::Unquoted { .. }) => {
            looks_like_vendor_key(value) && !reads_as_code(value)
        }
        (Strength::VendorKey, _) => looks_like_vendor_key(value),
    }
}

/// What vendors without a prefix issue: 16+ characters of a token alphabet, random, hex
/// or a UUID.
fn looks_like_vendor_key(value: &str) -> bool {
    value.len() >= 16
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'_' | b'-'))
        && (is_hex_or_uuid(value) || looks_random(value))
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

/// Only blanks between the start of the line and `i`: a raw line break, a JSON `\n`
/// escape, or the opening quote of a JSON string (a file's content, a JSON key).
fn starts_line(b: &[u8], i: usize) -> bool {
    let mut i = i;
    while i > 0 && matches!(b[i - 1], b' ' | b'\t') {
        i -= 1;
    }
    i == 0
        || matches!(b[i - 1], b'\n' | b'\r')
        || (i >= 2 && b[i - 2] == b'\\' && matches!(b[i - 1], b'n' | b'r'))
        || (b[i - 1] == b'"' && (i == 1 || matches!(b[i - 2], b':' | b'[' | b'{' | b',' | b' ')))
}

/// End of an unquoted value starting at `i`; `None` when there is none or it is too long
/// to be a secret.
fn unquoted_end(b: &[u8], i: usize, key: &Key) -> Option<usize> {
    let limit = b.len().min(i + MAX_VALUE);
    let end = key.ends.from(b, i).min(limit);
    let window = &b[i..end];
    let amp = key.in_query || key.strength != Strength::Password;
    let soft = match (amp, key.dump) {
        (true, true) => memchr::memchr2(b'&', b']', window),
        (true, false) => memchr::memchr(b'&', window),
        (false, true) => memchr::memchr(b']', window),
        (false, false) => None,
    };
    let j = soft.map_or(end, |n| i + n);
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

/// The objects code assigns fields of (`self.password = …`, `this.token = …`): a dotted
/// name starting with one of these is code, not a property key.
const CODE_OBJECTS: &[&str] = &[
    "self", "this", "cls", "me", "super", "window", "document", "process", "os", "sys", "module",
    "exports", "props", "state", "ctx", "req", "res", "request", "response", "obj", "opts",
    "options", "args", "params", "user", "form", "data", "body", "input", "client",
];

/// A dotted key naming a password or a secret (`spring.datasource.password`,
/// `app.jwt.secret`, `security.jwt.secret-key`) at the start of its line in a `.properties`
/// file or `application.yml`, or `-Dapp.jwt.secret` on a JVM command line. Code assigns
/// fields the same way (`self.password = …`, `    creds.access_key = …`), so a `=` line
/// must not be indented, and `self.`, `this.` and their kin are code.
fn is_property_key(b: &[u8], start: usize, end: usize, name: &str, sep: Sep) -> bool {
    if !name.contains('.') {
        return false;
    }
    let secretish = ["password", "passwd", "passphrase", "secret"]
        .iter()
        .chain(&["secret-key", "secret_key", "secretkey"])
        .any(|s| ends_with_ignore_ascii_case(name.as_bytes(), s));
    if !secretish {
        return false;
    }
    if let Some(property) = name.strip_prefix("-D") {
        return property.contains('.');
    }
    let Some((first, _)) = name.split_once('.') else {
        return false;
    };
    let indented = start > 0 && matches!(b[start - 1], b' ' | b'\t');
    let yaml = sep == Sep::Colon || b[end..].starts_with(b":");
    !first.is_empty()
        && !name.contains("..")
        && !name.ends_with('.')
        && !CODE_OBJECTS.iter().any(|o| o.eq_ignore_ascii_case(first))
        && (yaml || !indented)
        && starts_line(b, start)
}

/// `Name:value` inside a printed struct or map: Go's `%+v` (`&{Host:db Password:x}`), Go
/// maps (`map[password:x]`). The name follows `{`, `[` or a space, the `:` is tight on both
/// sides, the value ends at a space, `}` or `]`, and an unclosed `map[`, or `{` before an
/// exported (capitalised) field name, comes before it on its line. Minified JavaScript
/// writes objects the same way (`{credentials:credential}`), with lowercase keys.
fn in_dump(b: &[u8], start: usize, colon: usize, ends: &ValueEnds) -> bool {
    if start == 0 || !matches!(b[start - 1], b'{' | b'[' | b' ') {
        return false;
    }
    if b.get(colon + 1)
        .is_none_or(|c| c.is_ascii_whitespace() || matches!(c, b'"' | b'\'' | b'{' | b'['))
    {
        return false;
    }
    let lo = start.saturating_sub(MAX_DUMP_LOOKBACK_BYTES);
    let mut depth = 0usize;
    let mut opened = false;
    for i in (lo..start).rev() {
        match b[i] {
            b'\n' => return false,
            b'}' | b']' => depth += 1,
            b'{' | b'[' if depth > 0 => depth -= 1,
            b'{' => {
                opened = b[start].is_ascii_uppercase();
                break;
            }
            b'[' => {
                opened = i >= 3 && &b[i - 3..i] == b"map";
                break;
            }
            _ => {}
        }
    }
    if !opened {
        return false;
    }
    // The value ends where an unquoted value ends, and that must be where a printed field
    // ends.
    let v = colon + 1;
    let end = ends.from(b, v).min(b.len().min(v + MAX_VALUE));
    let value_end = memchr::memchr2(b']', b'[', &b[v..end]).map_or(end, |n| v + n);
    value_end == b.len() || matches!(b[value_end], b' ' | b'\t' | b'}' | b']' | b'"')
}

/// Where the value starts after `%3D` (`=` percent-encoded), for a name that is a
/// parameter of a percent-encoded query (`%3Ftoken%3D…`, `%26token%3D…`, `?token%3D…`).
fn encoded_value_start(b: &[u8], start: usize, end: usize) -> Option<usize> {
    let separator = b.get(end..end + 3)?;
    if !separator.eq_ignore_ascii_case(b"%3D") {
        return None;
    }
    let opened = (start >= 1 && matches!(b[start - 1], b'?' | b'&'))
        || (start >= 3
            && (b[start - 3..start].eq_ignore_ascii_case(b"%3F")
                || b[start - 3..start].eq_ignore_ascii_case(b"%26")));
    opened.then_some(end + 3)
}

/// The value of a percent-encoded query parameter: up to the next encoded `&` or `#`, or
/// whatever ends the enclosing URL; judged decoded.
fn encoded_value(
    text: &str,
    start: usize,
    end: usize,
    vs: usize,
    strength: Strength,
    ends: &ValueEnds,
) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let limit = b.len().min(vs + MAX_VALUE);
    let mut ve = vs;
    while ve < limit {
        let c = b[ve];
        if c.is_ascii_whitespace()
            || c.is_ascii_control()
            || matches!(c, b'&' | b'"' | b'\'' | b'`' | b'\\' | b'<' | b'>')
            || (c == b'%'
                && b.get(ve + 1..ve + 3).is_some_and(|e| {
                    e.eq_ignore_ascii_case(b"26") || e.eq_ignore_ascii_case(b"23")
                }))
        {
            break;
        }
        ve += 1;
    }
    if ve == vs {
        return None;
    }
    let key = Key {
        name: &text[start..end],
        name_at: start,
        strength,
        env_style: false,
        tight: true,
        in_query: true,
        spaced: false,
        property: false,
        dump: false,
        ends,
    };
    let value = percent_decode(&text[vs..ve]);
    judge(&value, &key, Context::Unquoted { line_end: false }).then_some((vs, ve))
}

#[cfg(test)]
mod tests;
