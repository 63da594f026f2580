//! The crate's layering, checked from its source: which top-level module names which, read
//! off every `crate::…` path outside comments, strings and `#[cfg(test)]` items.
//!
//! - `result`, the contract every surface returns, stands on nothing else of the crate:
//!   the types a result is made of live in it, and their implementations depend on it.
//! - No module depends on itself through others: the graph of top-level modules has no
//!   cycle, so each can be read (and changed) knowing only the ones below it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module and the top-level modules its code names.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).expect("under src");
        let first = rel.components().next().expect("a path under src");
        let top = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        if is_test_module_file(&file) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a source file");
        let code = without_test_items(&code_only(&text));
        let deps = graph.entry(top.clone()).or_default();
        for name in crate_paths(&code) {
            if name != top {
                deps.insert(name);
            }
        }
    }
    graph
}

/// Whether `file` is a `tests.rs` that its parent module includes as `#[cfg(test)] mod
/// tests;`: a test item kept in a file of its own.
fn is_test_module_file(file: &Path) -> bool {
    if file.file_name().is_none_or(|n| n != "tests.rs") {
        return false;
    }
    let Some(dir) = file.parent() else {
        return false;
    };
    let parents = [dir.join("mod.rs"), dir.with_extension("rs")];
    parents.iter().any(|p| {
        std::fs::read_to_string(p).is_ok_and(|text| {
            let code = code_only(&text);
            let lines: Vec<&str> = code.lines().map(str::trim).collect();
            lines
                .windows(2)
                .any(|w| w[0] == "#[cfg(test)]" && w[1] == "mod tests;")
        })
    })
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// `text` with comments, string literals and character literals blanked out (each byte
/// becomes a space, line breaks kept), so that what is left is code.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                blank(&mut out, b[i]);
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    blank(&mut out, b[i]);
                    blank(&mut out, b[i + 1]);
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    blank(&mut out, b[i]);
                    blank(&mut out, b[i + 1]);
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(rest) {
            // r"…", r#"…"#, br#"…"#: ends at a quote followed by as many hashes.
            let open = rest.iter().position(|&c| c == b'"').expect("a quote") + 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let end = rest[open..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(rest.len(), |p| open + p + close.len());
            for &c in &rest[..end] {
                blank(&mut out, c);
            }
            i += end;
        } else if b[i] == b'"' {
            blank(&mut out, b[i]);
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                blank(&mut out, b[i]);
                i += 1;
            }
            if i < b.len() {
                blank(&mut out, b[i]);
                i += 1;
            }
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{1F600}'), or a lifetime ('a), left as is.
            let len = char_literal_len(rest);
            if len > 0 {
                for &c in &rest[..len] {
                    blank(&mut out, c);
                }
                i += len;
            } else {
                out.push(b[i]);
                i += 1;
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The number of `#`s of a raw string literal starting here (after an optional `b`).
fn raw_string_start(rest: &[u8]) -> Option<usize> {
    let rest = rest.strip_prefix(b"b").unwrap_or(rest);
    let rest = rest.strip_prefix(b"r")?;
    let hashes = rest.iter().take_while(|&&c| c == b'#').count();
    (rest.get(hashes) == Some(&b'"')).then_some(hashes)
}

/// The length of a character literal starting here, or 0 for a lifetime.
fn char_literal_len(rest: &[u8]) -> usize {
    if rest.get(1) == Some(&b'\\') {
        return rest[2..]
            .iter()
            .position(|&c| c == b'\'')
            .map_or(0, |p| p + 3);
    }
    let s = std::str::from_utf8(&rest[1..rest.len().min(6)]).unwrap_or_else(|e| {
        std::str::from_utf8(&rest[1..1 + e.valid_up_to()]).expect("valid up to here")
    });
    match s.chars().next() {
        Some(c) if s[c.len_utf8()..].starts_with('\'') => 1 + c.len_utf8() + 1,
        _ => 0,
    }
}

/// `code` without the items marked `#[cfg(test)]` (a test module, a test-only import).
fn without_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        // The item ends at its first `;` outside braces, or where its first brace closes.
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The top-level module of every `crate::` path in `code`, `crate::{a, b::c}` included.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let after = code[at + "crate::".len()..].trim_start();
        if let Some(group) = after.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            names.extend(
                group
                    .split(',')
                    .map(|part| ident(part.trim()))
                    .filter(|n| !n.is_empty()),
            );
        } else {
            let name = ident(after);
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// A cycle of the graph, as the modules along it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|n| n == node).expect("on the path");
                let mut cycle = path[from..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_string(), Mark::Open);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, marks, path) {
                return Some(cycle);
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut marks, &mut Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn graph() -> BTreeMap<String, BTreeSet<String>> {
        module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
    }

    #[test]
    fn the_result_contract_depends_on_nothing_else_of_the_crate() {
        let g = graph();
        assert_eq!(g.get("result"), Some(&BTreeSet::new()), "{g:#?}");
    }

    #[test]
    fn the_contract_backends_agents_sandbox_and_runners_form_no_cycle() {
        let g = graph();
        let core = ["result", "backends", "agents", "sandbox", "runner"];
        // Every path between two of them, through any module, counts.
        let reach = |from: &str| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from.to_string()];
            while let Some(n) = todo.pop() {
                for next in g.get(&n).into_iter().flatten() {
                    if seen.insert(next.clone()) {
                        todo.push(next.clone());
                    }
                }
            }
            seen
        };
        let mut both_ways = Vec::new();
        for (i, a) in core.iter().enumerate() {
            for b in &core[i + 1..] {
                if reach(a).contains(*b) && reach(b).contains(*a) {
                    both_ways.push((*a, *b));
                }
            }
        }
        assert_eq!(both_ways, Vec::<(&str, &str)>::new(), "{g:#?}");
    }

    #[test]
    fn no_module_depends_on_itself_through_others() {
        let g = graph();
        assert_eq!(find_cycle(&g), None, "{g:#?}");
    }

    #[test]
    fn the_reader_sees_code_only() {
        let text = "use crate::a; // crate::b\n/* crate::c /* nested */ crate::d */\nlet s = \"crate::e\"; let r = r#\"crate::f\"#; let c = '\"'; fn f<'a>(x: &'a crate::g::T) {}\nuse crate::{h, i::j};\n#[cfg(test)]\nmod tests { fn t() { crate::k::x(); let b = '}'; } }\nuse crate::l;";
        let code = without_test_items(&code_only(text));
        assert_eq!(
            crate_paths(&code).into_iter().collect::<Vec<_>>(),
            ["a", "g", "h", "i", "l"]
        );
    }

    #[test]
    fn a_cycle_is_found_and_shown_along_its_path() {
        let g: BTreeMap<String, BTreeSet<String>> = [
            ("a", vec!["b"]),
            ("b", vec!["c"]),
            ("c", vec!["a"]),
            ("d", vec![]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
        assert_eq!(
            find_cycle(&g),
            Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
        );
    }
}
