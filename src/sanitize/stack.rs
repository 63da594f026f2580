//! Stack traces longer than [`KEPT_FRAMES`] frames are cut to their first frames plus one
//! line `… N more frames`: the top of a trace says where it failed, the rest is mostly
//! runtime plumbing that costs the parent agent context.
//!
//! A line scanner, not a regex: a frame is one or more lines (a Python frame is its
//! `File` line plus the source line under it; a Go frame is the function line plus its
//! file line), and runs must be counted across lines. Lines are either the text's own
//! (`\n`), or, inside a JSON string that holds a whole trace, its `\n` escapes.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::{memchr, memmem};

pub(crate) const KEPT_FRAMES: usize = 5;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Node/JS (`    at fn (file:1:2)`) and Java (`\tat a.B.c(B.java:10)`) share a shape.
    At,
    Python,
    /// Frames are numbered; a run continues only with the next number.
    Rust(u64),
    Go,
}

impl Kind {
    fn continues(self, next: Kind) -> bool {
        match (self, next) {
            (Kind::Rust(n), Kind::Rust(m)) => n.checked_add(1) == Some(m),
            (a, b) => a == b,
        }
    }
}

/// One line: `start..` its first byte in the text, `next` where the following line starts,
/// `text` its content without the line break, JSON escapes decoded.
struct Line<'a> {
    start: usize,
    next: usize,
    text: Cow<'a, str>,
}

/// How a region of text is cut into lines.
trait Lines {
    /// Where the region ends; lines start before it.
    fn end(&self) -> usize;
    fn line_at<'a>(&self, text: &'a str, start: usize) -> Line<'a>;
    /// The indentation of the line at `start` as written in the text.
    fn indent<'a>(&self, text: &'a str, start: usize) -> &'a str;
    /// The line break that ends `removed`, as written in the text, if any.
    fn newline(&self, removed: &str) -> &'static str;
}

/// The text's own lines.
struct Plain {
    len: usize,
}

impl Lines for Plain {
    fn end(&self) -> usize {
        self.len
    }

    fn line_at<'a>(&self, text: &'a str, start: usize) -> Line<'a> {
        let rest = &text.as_bytes()[start..];
        let (end, next) = match memchr(b'\n', rest) {
            Some(n) => (start + n, start + n + 1),
            None => (text.len(), text.len()),
        };
        let end = if end > start && text.as_bytes()[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        Line {
            start,
            next,
            text: Cow::Borrowed(&text[start..end]),
        }
    }

    fn indent<'a>(&self, text: &'a str, start: usize) -> &'a str {
        let line = &text[start..];
        &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
    }

    fn newline(&self, removed: &str) -> &'static str {
        if removed.ends_with("\r\n") {
            "\r\n"
        } else if removed.ends_with('\n') {
            "\n"
        } else {
            ""
        }
    }
}

/// The lines of a JSON string's content inside one line of text: split at `\n` escapes.
struct Escaped {
    end: usize,
}

impl Lines for Escaped {
    fn end(&self) -> usize {
        self.end
    }

    fn line_at<'a>(&self, text: &'a str, start: usize) -> Line<'a> {
        let b = text.as_bytes();
        let mut i = start;
        let mut escapes = false;
        let (content_end, next) = loop {
            if i >= self.end {
                break (self.end, self.end);
            }
            if b[i] == b'\\' && i + 1 < self.end {
                if b[i + 1] == b'n' {
                    break (i, i + 2);
                }
                escapes = true;
                i += 2;
            } else if b[i] == b'"' && i > start {
                // The end of the JSON string: what follows is JSON, never a frame.
                break (i, i);
            } else {
                i += 1;
            }
        };
        let raw = &text[start..content_end];
        let raw = raw.strip_suffix("\\r").unwrap_or(raw);
        let text = if escapes {
            Cow::Owned(unescape(raw))
        } else {
            Cow::Borrowed(raw)
        };
        Line { start, next, text }
    }

    fn indent<'a>(&self, text: &'a str, start: usize) -> &'a str {
        let b = text.as_bytes();
        let mut i = start;
        while i < self.end {
            if b[i] == b' ' {
                i += 1;
            } else if b[i] == b'\\' && b.get(i + 1) == Some(&b't') {
                i += 2;
            } else {
                break;
            }
        }
        &text[start..i]
    }

    fn newline(&self, removed: &str) -> &'static str {
        if removed.ends_with("\\r\\n") {
            "\\r\\n"
        } else if removed.ends_with("\\n") {
            "\\n"
        } else {
            ""
        }
    }
}

/// Decodes the JSON escapes that frames contain; others stay as written.
fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('/') => out.push('/'),
            Some('r') => {}
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

fn split_indent(s: &str) -> (&str, &str) {
    let body = s.trim_start_matches([' ', '\t']);
    (&s[..s.len() - body.len()], body)
}

fn has_colon_digit(s: &str) -> bool {
    memchr::memchr_iter(b':', s.as_bytes())
        .any(|i| s.as_bytes().get(i + 1).is_some_and(u8::is_ascii_digit))
}

/// `at` plus a location: `file:line:col`, or a parenthesised one without line numbers
/// (`(native)`, `(<anonymous>)`, `(index 0)`, `(Native Method)`, `(Unknown Source)`).
fn is_at_frame(indent: &str, body: &str) -> bool {
    !indent.is_empty()
        && body.starts_with("at ")
        && (has_colon_digit(body)
            || (body.ends_with(')') && body.contains('('))
            || body == "at <anonymous>")
}

/// The line that replaced folded frames: never a frame itself, or folding twice would
/// fold it with what follows (a Go marker line before a stray `\t…go:` line reads as a
/// function line).
fn is_marker(body: &str) -> bool {
    body.starts_with("… ") && body.ends_with(" more frames")
}

fn classify<L: Lines>(lines: &L, text: &str, line: &Line) -> Option<Kind> {
    let (indent, body) = split_indent(&line.text);
    let first = *body.as_bytes().first()?;
    if is_marker(body) {
        return None;
    }
    if first == b'F' && body.starts_with("File \"") && body.contains("\", line ") {
        return Some(Kind::Python);
    }
    if first == b'a' && is_at_frame(indent, body) {
        return Some(Kind::At);
    }
    let next = || (line.next < lines.end()).then(|| lines.line_at(text, line.next));
    if first.is_ascii_digit() {
        let digits = body.bytes().take_while(u8::is_ascii_digit).count();
        let symbol = body[digits..].strip_prefix(": ")?;
        let number = body[..digits].parse().ok()?;
        let has_location = next().is_some_and(|next| {
            let (next_indent, next_body) = split_indent(&next.text);
            next_indent.len() > indent.len() && next_body.starts_with("at ")
        });
        let symbolic =
            symbol.contains("::") || symbol.starts_with(['_', '<']) || symbol.starts_with("0x");
        return (symbolic || has_location).then_some(Kind::Rust(number));
    }
    if indent.is_empty()
        && next().is_some_and(|next| next.text.starts_with('\t') && next.text.contains(".go:"))
    {
        return Some(Kind::Go);
    }
    None
}

/// Where the frame that starts with `line` ends: after its continuation lines.
fn frame_end<L: Lines>(lines: &L, text: &str, line: &Line, kind: Kind) -> usize {
    match kind {
        Kind::At => line.next,
        Kind::Go => {
            if line.next < lines.end() {
                lines.line_at(text, line.next).next
            } else {
                line.next
            }
        }
        Kind::Python | Kind::Rust(_) => {
            let indent = split_indent(&line.text).0.len();
            let mut pos = line.next;
            while pos < lines.end() {
                let next = lines.line_at(text, pos);
                let (next_indent, body) = split_indent(&next.text);
                let deeper = next_indent.len() > indent && !body.is_empty();
                let continues = match kind {
                    Kind::Python => deeper && !body.starts_with("File \""),
                    _ => deeper && body.starts_with("at "),
                };
                if !continues {
                    break;
                }
                pos = next.next;
            }
            pos
        }
    }
}

/// Folds the traces of one region starting at `from`, appending to `out` from `copied`.
fn fold_region<L: Lines>(lines: &L, text: &str, from: usize, out: &mut String, copied: &mut usize) {
    let mut pos = from;
    while pos < lines.end() {
        let line = lines.line_at(text, pos);
        let Some(kind) = classify(lines, text, &line) else {
            pos = line.next;
            continue;
        };
        let mut frames = 1;
        let mut cut_at = None;
        let mut prev = kind;
        let mut end = frame_end(lines, text, &line, kind);
        while end < lines.end() {
            let next = lines.line_at(text, end);
            match classify(lines, text, &next) {
                Some(k) if prev.continues(k) => {
                    frames += 1;
                    if frames == KEPT_FRAMES + 1 {
                        cut_at = Some(next.start);
                    }
                    prev = k;
                    end = frame_end(lines, text, &next, k);
                }
                _ => break,
            }
        }
        if let Some(cut_at) = cut_at {
            let newline = lines.newline(&text[cut_at..end]);
            super::reserve_copy(out, text.len());
            out.push_str(&text[*copied..cut_at]);
            out.push_str(lines.indent(text, line.start));
            out.push_str(&format!("… {} more frames{newline}", frames - KEPT_FRAMES));
            *copied = end;
        }
        pos = end.max(line.next);
    }
}

pub(crate) fn fold_stack_traces(text: &str) -> Cow<'_, str> {
    let plain = fold_plain(text);
    match fold_escaped(&plain) {
        Some(s) => Cow::Owned(s),
        None => plain,
    }
}

fn fold_plain(text: &str) -> Cow<'_, str> {
    // Fewer lines than a foldable trace has frames: nothing to do, and no scan.
    if memchr::memchr_iter(b'\n', text.as_bytes())
        .nth(KEPT_FRAMES - 1)
        .is_none()
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::new();
    let mut copied = 0;
    fold_region(&Plain { len: text.len() }, text, 0, &mut out, &mut copied);
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Traces inside JSON strings: only lines with enough `\n` escapes and a frame's mark are
/// split at their escapes.
fn fold_escaped(text: &str) -> Option<String> {
    // Built once: this runs on every read of a child's text.
    static FINDERS: LazyLock<(memmem::Finder<'static>, [memmem::Finder<'static>; 4])> =
        LazyLock::new(|| {
            (
                memmem::Finder::new(b"\\n"),
                [
                    memmem::Finder::new(b"at "),
                    memmem::Finder::new(b"File \\\""),
                    memmem::Finder::new(b".go:"),
                    memmem::Finder::new(b"::"),
                ],
            )
        });
    let (escape, marks) = &*FINDERS;
    let mut out = String::new();
    let mut copied = 0;
    let mut start = 0;
    let b = text.as_bytes();
    while start < b.len() {
        let end = memchr(b'\n', &b[start..]).map_or(b.len(), |i| start + i);
        let line = &b[start..end];
        if escape.find_iter(line).nth(KEPT_FRAMES - 1).is_some()
            && marks.iter().any(|m| m.find(line).is_some())
        {
            fold_region(&Escaped { end }, text, start, &mut out, &mut copied);
        }
        start = end + 1;
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn fold(text: &str) -> String {
        fold_stack_traces(text).into_owned()
    }

    fn node_trace(frames: usize) -> String {
        let mut s = String::from("TypeError: x is undefined\n");
        for i in 0..frames {
            s.push_str(&format!("    at f{i} (/app/src/m{i}.js:{}:7)\n", i + 10));
        }
        s
    }

    #[test]
    fn node_trace_is_cut_to_five_frames() {
        let input = node_trace(8) + "done\n";
        let expected = "TypeError: x is undefined\n\
                        \x20   at f0 (/app/src/m0.js:10:7)\n\
                        \x20   at f1 (/app/src/m1.js:11:7)\n\
                        \x20   at f2 (/app/src/m2.js:12:7)\n\
                        \x20   at f3 (/app/src/m3.js:13:7)\n\
                        \x20   at f4 (/app/src/m4.js:14:7)\n\
                        \x20   … 3 more frames\n\
                        done\n";
        assert_eq!(fold(&input), expected);
    }

    #[test]
    fn node_frames_of_every_shape() {
        let input = "Error: boom\n\
                     \x20   at Object.<anonymous> (/app/a.js:1:1)\n\
                     \x20   at new Promise (<anonymous>)\n\
                     \x20   at async Promise.all (index 0)\n\
                     \x20   at node:internal/main/run_main_module:28:49\n\
                     \x20   at process.processTicksAndRejections (node:internal/process/task_queues:95:5)\n\
                     \x20   at Module._compile (node:internal/modules/cjs/loader:1256:14)\n";
        let expected = "Error: boom\n\
                        \x20   at Object.<anonymous> (/app/a.js:1:1)\n\
                        \x20   at new Promise (<anonymous>)\n\
                        \x20   at async Promise.all (index 0)\n\
                        \x20   at node:internal/main/run_main_module:28:49\n\
                        \x20   at process.processTicksAndRejections (node:internal/process/task_queues:95:5)\n\
                        \x20   … 1 more frames\n";
        assert_eq!(fold(input), expected);
    }

    #[test]
    fn folding_twice_changes_nothing() {
        let once = fold(&node_trace(9));
        assert_eq!(fold(&once), once);
    }

    #[test]
    fn huge_frame_numbers_do_not_overflow() {
        let input = "18446744073709551615: a::b\n0: a::b\n".repeat(4);
        assert_eq!(fold(&input), input);
    }

    #[test]
    fn five_frames_are_untouched() {
        let input = node_trace(5);
        assert_eq!(fold(&input), input);
        let text = "    at least once\n    at noon\n".repeat(4);
        assert_eq!(fold(&text), text);
    }

    #[test]
    fn python_frames_are_pairs() {
        let mut input = String::from("Traceback (most recent call last):\n");
        for i in 0..7 {
            input.push_str(&format!(
                "  File \"/app/m{i}.py\", line {i}, in f{i}\n    g{i}()\n"
            ));
        }
        input.push_str("    ^^^^\nValueError: boom");
        let expected = "Traceback (most recent call last):\n\
                        \x20 File \"/app/m0.py\", line 0, in f0\n    g0()\n\
                        \x20 File \"/app/m1.py\", line 1, in f1\n    g1()\n\
                        \x20 File \"/app/m2.py\", line 2, in f2\n    g2()\n\
                        \x20 File \"/app/m3.py\", line 3, in f3\n    g3()\n\
                        \x20 File \"/app/m4.py\", line 4, in f4\n    g4()\n\
                        \x20 … 2 more frames\n\
                        ValueError: boom";
        assert_eq!(fold(&input), expected);
    }

    #[test]
    fn python_without_a_trace_is_untouched() {
        let input = "File \"a.py\" was opened\n".repeat(7);
        assert_eq!(fold(&input), input);
    }

    #[test]
    fn java_trace_keeps_tab_indentation() {
        let mut input =
            String::from("Exception in thread \"main\" java.lang.IllegalStateException\r\n");
        for i in 0..9 {
            input.push_str(&format!("\tat com.example.C{i}.m(C{i}.java:{i})\r\n"));
        }
        input.push_str("Caused by: x");
        let expected = "Exception in thread \"main\" java.lang.IllegalStateException\r\n\
                        \tat com.example.C0.m(C0.java:0)\r\n\
                        \tat com.example.C1.m(C1.java:1)\r\n\
                        \tat com.example.C2.m(C2.java:2)\r\n\
                        \tat com.example.C3.m(C3.java:3)\r\n\
                        \tat com.example.C4.m(C4.java:4)\r\n\
                        \t… 4 more frames\r\n\
                        Caused by: x";
        assert_eq!(fold(&input), expected);
    }

    #[test]
    fn rust_backtrace_with_and_without_locations() {
        let mut input = String::from("stack backtrace:\n");
        for i in 0..8 {
            input.push_str(&format!("  {i:2}: app::module::f{i}\n"));
            if i % 2 == 0 {
                input.push_str(&format!("             at ./src/m{i}.rs:{i}:5\n"));
            }
        }
        let expected = "stack backtrace:\n\
                        \x20  0: app::module::f0\n             at ./src/m0.rs:0:5\n\
                        \x20  1: app::module::f1\n\
                        \x20  2: app::module::f2\n             at ./src/m2.rs:2:5\n\
                        \x20  3: app::module::f3\n\
                        \x20  4: app::module::f4\n             at ./src/m4.rs:4:5\n\
                        \x20  … 3 more frames\n";
        assert_eq!(fold(&input), expected);
    }

    #[test]
    fn numbered_lists_are_untouched() {
        let input = (0..9)
            .map(|i| format!("  {i}: step number {i}\n"))
            .collect::<String>();
        assert_eq!(fold(&input), input);
        // Numbers must follow each other.
        let input = (0..9)
            .map(|i| format!("  {}: a::b\n", i * 2))
            .collect::<String>();
        assert_eq!(fold(&input), input);
    }

    #[test]
    fn go_trace_without_final_newline() {
        let mut input = String::from("panic: boom\n\ngoroutine 1 [running]:\n");
        for i in 0..7 {
            input.push_str(&format!("main.f{i}(0x1)\n\t/src/app/main.go:{i} +0x1d\n"));
        }
        input.push_str("created by main.main in goroutine 1\n\t/src/app/main.go:99 +0x25");
        let expected = "panic: boom\n\ngoroutine 1 [running]:\n\
                        main.f0(0x1)\n\t/src/app/main.go:0 +0x1d\n\
                        main.f1(0x1)\n\t/src/app/main.go:1 +0x1d\n\
                        main.f2(0x1)\n\t/src/app/main.go:2 +0x1d\n\
                        main.f3(0x1)\n\t/src/app/main.go:3 +0x1d\n\
                        main.f4(0x1)\n\t/src/app/main.go:4 +0x1d\n\
                        … 3 more frames";
        assert_eq!(fold(&input), expected);
    }

    #[test]
    fn go_source_is_untouched() {
        let input = "func main() {\n\tfmt.Println(\"x.go:1\")\n}\n".repeat(4);
        assert_eq!(fold(&input), input);
    }

    #[test]
    fn trace_inside_a_json_string() {
        let mut trace = String::from("Traceback (most recent call last):\\n");
        for i in 0..7 {
            trace.push_str(&format!(
                "  File \\\"/app/m{i}.py\\\", line {i}, in f{i}\\n    g{i}()\\n"
            ));
        }
        trace.push_str("ValueError: boom");
        let input = format!("{{\"type\":\"tool_result\",\"content\":\"{trace}\"}}\n");
        let expected =
            "{\"type\":\"tool_result\",\"content\":\"Traceback (most recent call last):\\n\
                        \x20 File \\\"/app/m0.py\\\", line 0, in f0\\n    g0()\\n\
                        \x20 File \\\"/app/m1.py\\\", line 1, in f1\\n    g1()\\n\
                        \x20 File \\\"/app/m2.py\\\", line 2, in f2\\n    g2()\\n\
                        \x20 File \\\"/app/m3.py\\\", line 3, in f3\\n    g3()\\n\
                        \x20 File \\\"/app/m4.py\\\", line 4, in f4\\n    g4()\\n\
                        \x20 … 2 more frames\\n\
                        ValueError: boom\"}\n";
        assert_eq!(fold(&input), expected);
        assert_eq!(fold(expected), expected);
    }

    #[test]
    fn java_and_node_traces_inside_json_strings() {
        let java: String = (0..8)
            .map(|i| format!("\\n\\tat com.example.C{i}.m(C{i}.java:{i})"))
            .collect();
        let input = format!("{{\"error\":\"java.lang.IllegalStateException{java}\"}}");
        let out = fold(&input);
        assert!(
            out.ends_with("\\n\\tat com.example.C4.m(C4.java:4)\\n\\t… 3 more frames\"}"),
            "{out}"
        );
        let node: String = (0..7)
            .map(|i| format!("\\n    at f{i} (/app/m.js:{i}:1)"))
            .collect();
        let input = format!("\"Error: x{node}\\nnext\"");
        assert_eq!(
            fold(&input),
            "\"Error: x\\n    at f0 (/app/m.js:0:1)\\n    at f1 (/app/m.js:1:1)\\n    at f2 (/app/m.js:2:1)\\n    at f3 (/app/m.js:3:1)\\n    at f4 (/app/m.js:4:1)\\n    … 2 more frames\\nnext\""
        );
    }

    #[test]
    fn json_strings_without_traces_are_untouched() {
        let input = "{\"text\":\"look at this\\nand at that\\n1\\n2\\n3\\n4\\n5\\n6 a::b\"}";
        assert_eq!(fold(input), input);
    }

    #[test]
    fn fuzz_regression_marker_before_a_stray_go_file_line() {
        // Found by `cargo fuzz run sanitize`: the marker line, unindented, followed by a
        // tab-indented `.go:` line, read as a Go frame on the second pass and was folded
        // again.
        let mut input = String::new();
        for i in 0..8 {
            input.push_str(&format!("main.f{i}()\n\t/a.go:{i} +0x1\n"));
        }
        input.push_str("\t/a.go:9 +0x1\nnext\n");
        let once = fold(&input);
        assert!(
            once.ends_with("main.f4()\n\t/a.go:4 +0x1\n… 3 more frames\n\t/a.go:9 +0x1\nnext\n")
        );
        assert_eq!(fold(&once), once);
    }

    #[test]
    fn two_traces_are_cut_separately() {
        let input = node_trace(6) + &node_trace(7);
        let out = fold(&input);
        assert_eq!(out.matches("more frames").count(), 2);
        assert!(out.contains("    … 1 more frames\nTypeError"));
        assert!(out.ends_with("    … 2 more frames\n"));
    }
}
