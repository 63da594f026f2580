//! The JSON values an answer holds. Models asked for JSON answer bare, in a ```json fence,
//! or with a sentence around it; every value is a candidate (the schema check takes the one
//! that matches, and calls several that match and differ an ambiguity), the likeliest
//! first, for the error of an answer where none matches.

use serde_json::Value;

/// Answers longer than this are not searched for JSON inside prose (every `{` and `[` is
/// a try, each up to the end of the text); a bare or fenced answer of any size is read.
const MAX_PROSE_SCAN_BYTES: usize = 256 * 1024;
/// At most this many `{`/`[` are tried as the start of a value in prose.
const MAX_PROSE_STARTS: usize = 2_000;

/// The JSON values `answer` may be, likeliest first: the whole answer; the fenced blocks
/// (```json or a bare ```), the last first; then objects and arrays inside the prose,
/// outermost only, the last first. A value found twice is given once.
pub(super) fn candidates(answer: &str) -> Vec<Value> {
    let answer = answer.trim_start_matches('\u{feff}').trim();
    let mut out: Vec<Value> = Vec::new();
    let mut add = |v: Value| {
        if !out.contains(&v) {
            out.push(v);
        }
    };
    if let Ok(v) = serde_json::from_str::<Value>(answer) {
        add(v);
    }
    for block in fenced_blocks(answer).into_iter().rev() {
        if let Ok(v) = serde_json::from_str::<Value>(block.trim()) {
            add(v);
        }
    }
    if answer.len() <= MAX_PROSE_SCAN_BYTES {
        for v in values_in_prose(answer).into_iter().rev() {
            add(v);
        }
    }
    out
}

/// The contents of the fenced code blocks whose info string is empty or starts with
/// `json` (```json, ```JSON, ```jsonc, ~~~json). An unclosed fence is not a block.
fn fenced_blocks(text: &str) -> Vec<String> {
    struct Open<'a> {
        fence: &'a str,
        json: bool,
        lines: Vec<&'a str>,
    }
    let mut blocks = Vec::new();
    let mut open: Option<Open<'_>> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        // Up to three spaces of indentation, as CommonMark allows.
        let indented = line.len() - trimmed.len() > 3;
        let fence_len = trimmed.len() - trimmed.trim_start_matches('`').len();
        let fence_len = if fence_len > 0 {
            fence_len
        } else {
            trimmed.len() - trimmed.trim_start_matches('~').len()
        };
        let fence = &trimmed[..fence_len];
        match &mut open {
            None if !indented && fence.len() >= 3 => {
                let info = trimmed[fence.len()..].trim().to_ascii_lowercase();
                open = Some(Open {
                    fence,
                    json: info.is_empty() || info.starts_with("json"),
                    lines: Vec::new(),
                });
            }
            None => {}
            Some(o) => {
                // A closing fence: the same character, at least as long, nothing after it.
                let closes = !indented
                    && fence.len() >= o.fence.len()
                    && fence.starts_with(&o.fence[..1])
                    && trimmed[fence.len()..].trim().is_empty();
                if !closes {
                    o.lines.push(line);
                    continue;
                }
                if o.json {
                    blocks.push(o.lines.join("\n"));
                }
                open = None;
            }
        }
    }
    blocks
}

/// Objects and arrays that parse where a `{` or `[` starts them, outermost only (a value
/// found is skipped over), in order.
fn values_in_prose(text: &str) -> Vec<Value> {
    let mut values = Vec::new();
    let mut at = 0;
    let mut tries = 0;
    while let Some(offset) = text[at..].find(['{', '[']) {
        let start = at + offset;
        tries += 1;
        if tries > MAX_PROSE_STARTS {
            break;
        }
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                values.push(v);
                at = start + stream.byte_offset();
            }
            _ => at = start + 1,
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn a_bare_answer_is_the_value() {
        assert_eq!(candidates(r#"{"a": 1}"#), vec![json!({"a": 1})]);
        assert_eq!(candidates("  \n[1, 2]\n "), vec![json!([1, 2])]);
        assert_eq!(
            candidates("\u{feff}\"just a string\""),
            vec![json!("just a string")]
        );
        assert_eq!(candidates("42"), vec![json!(42)]);
    }

    #[test]
    fn a_fenced_answer_is_read_with_or_without_a_language() {
        assert_eq!(
            candidates("```json\n{\"a\": 1}\n```"),
            vec![json!({"a": 1})]
        );
        assert_eq!(candidates("```\n[true]\n```\n"), vec![json!([true])]);
        assert_eq!(
            candidates("~~~JSON\n{\"a\": {\"b\": [1]}}\n~~~"),
            vec![json!({"a": {"b": [1]}})]
        );
        // Not JSON by its language, and not a fence when unclosed: the prose scan still
        // finds the object.
        assert_eq!(
            candidates("```python\nx = 1\n```\n```json\n{\"open\": 1}"),
            vec![json!({"open": 1})]
        );
        // Another language's block is skipped whole: its closing fence opens nothing.
        assert_eq!(
            fenced_blocks("```python\nprint([1])\n```\ntext\n```json\n{\"a\": 1}\n```"),
            vec!["{\"a\": 1}".to_string()]
        );
    }

    #[test]
    fn prose_around_the_value_is_ignored() {
        assert_eq!(
            candidates(
                "Here is the result:\n\n```json\n{\"a\": 1}\n```\n\nLet me know if you need more."
            ),
            vec![json!({"a": 1})]
        );
        assert_eq!(
            candidates("The answer is {\"a\": [1, {\"b\": 2}]}. Done."),
            vec![json!({"a": [1, {"b": 2}]})]
        );
        // Brackets in prose that are not JSON are passed over.
        assert_eq!(
            candidates("See [the docs] and {braces}; then [1, 2] and {\"k\": \"v\"}."),
            vec![json!({"k": "v"}), json!([1, 2])]
        );
    }

    #[test]
    fn several_values_come_last_first_fenced_before_prose() {
        assert_eq!(
            candidates("First {\"n\": 1}.\n```json\n{\"n\": 2}\n```\n```json\n{\"n\": 3}\n```\nThen {\"n\": 4}."),
            vec![json!({"n": 3}), json!({"n": 2}), json!({"n": 4}), json!({"n": 1})]
        );
    }

    #[test]
    fn no_json_gives_no_candidate() {
        assert_eq!(candidates(""), Vec::<Value>::new());
        assert_eq!(candidates("I could not find it."), Vec::<Value>::new());
        assert_eq!(candidates("{unclosed: [1, 2"), Vec::<Value>::new());
    }

    #[test]
    fn a_long_answer_of_brackets_gives_nothing() {
        // Each `[` is a start that fails (nesting deeper than serde_json's limit); the
        // tries stop at the bound.
        let text = "[".repeat(MAX_PROSE_SCAN_BYTES / 2);
        assert_eq!(candidates(&text), Vec::<Value>::new());
        assert_eq!(values_in_prose(&text), Vec::<Value>::new());
    }
}
