//! An output schema: where it comes from, compiled once with the `jsonschema` crate (no
//! remote or file references are resolved: a `$ref` outside the schema is an error), and
//! the check of an answer against it, with the JSON path of the first error.

use std::path::PathBuf;
use std::sync::Arc;

use jsonschema::paths::{Location, LocationSegment};
use serde_json::Value;

use super::extract::candidates;

/// An error message from the validator is cut to this many characters: it quotes the
/// offending value, which can be the whole answer.
const MAX_ERROR_MESSAGE_CHARS: usize = 300;

/// Where a schema was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaSource {
    /// A JSON file, by an absolute path (whoever gave a relative one resolved it: against
    /// the current directory for `--output-schema`, the agent file's folder for
    /// `output_schema:`).
    File(PathBuf),
    /// The schema itself (MCP `outputSchema`, inline YAML in an agent file).
    Inline(Value),
}

/// Why a schema could not be used. Said before anything is spawned, as INVALID_INPUT,
/// after where the schema was given (which names the file).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SchemaError {
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// `at` is the JSON path, within the schema, of what is wrong.
    #[error("not a valid JSON Schema: {at}: {message}")]
    Invalid { at: String, message: String },
}

/// Why an answer gives no value of its schema; the text follows "Answer does not match
/// the output schema: " or "Answer is ambiguous: " (see [`Mismatch::what`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Mismatch {
    #[error("$: the answer holds no JSON value")]
    NoJson,
    /// The first error of the likeliest JSON value in the answer, at `path` in it.
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    /// Several different values match: `count` of them, the likeliest two shown (compact,
    /// cut). Which the child meant cannot be told (one may be quoted from a file it read).
    #[error(
        "it holds {count} different JSON values that match the output schema: {}",
        listed(values, *count)
    )]
    Ambiguous { values: Vec<String>, count: usize },
}

impl Mismatch {
    /// What is wrong with the answer, after "Answer " (or "Your answer "): it `does not
    /// match the output schema`, or it `is ambiguous`.
    pub(crate) fn what(&self) -> &'static str {
        match self {
            Mismatch::Ambiguous { .. } => "is ambiguous",
            Mismatch::NoJson | Mismatch::Invalid { .. } => "does not match the output schema",
        }
    }
}

/// `a and b`, `a, b and 3 more`.
fn listed(values: &[String], count: usize) -> String {
    let shown = values.join(", ");
    match count.saturating_sub(values.len()) {
        0 => match values {
            [one, two] => format!("{one} and {two}"),
            _ => shown,
        },
        more => format!("{shown} and {more} more"),
    }
}

/// Characters of a value shown in an ambiguity.
const MAX_SHOWN_VALUE_CHARS: usize = 120;

/// A compiled output schema.
#[derive(Clone)]
pub struct OutputSchema {
    value: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OutputSchema").field(&self.value).finish()
    }
}

impl OutputSchema {
    /// Reads (from a file) and compiles a schema.
    pub(crate) fn load(source: &SchemaSource) -> Result<OutputSchema, SchemaError> {
        match source {
            SchemaSource::Inline(value) => OutputSchema::compile(value.clone()),
            SchemaSource::File(path) => {
                let bytes = std::fs::read(path).map_err(SchemaError::Read)?;
                let value = serde_json::from_slice(&bytes).map_err(SchemaError::NotJson)?;
                OutputSchema::compile(value)
            }
        }
    }

    /// Compiles `value`, checking it against its draft's meta-schema first.
    pub(crate) fn compile(value: Value) -> Result<OutputSchema, SchemaError> {
        let validator = jsonschema::validator_for(&value).map_err(|e| SchemaError::Invalid {
            at: json_path(e.instance_path()),
            message: cut(&e.to_string()),
        })?;
        Ok(OutputSchema {
            value: Arc::new(value),
            validator: Arc::new(validator),
        })
    }

    /// The schema on one line, as the child is shown it.
    pub(crate) fn compact(&self) -> String {
        self.value.to_string()
    }

    /// Whether the root is an object schema (`"type": "object"`): the only kind the
    /// providers' own structured-output features (a tool's input, OpenAI's strict
    /// `json_schema` format) take.
    pub(crate) fn is_object_schema(&self) -> bool {
        self.value.get("type").and_then(Value::as_str) == Some("object")
    }

    /// The JSON value in `answer` that matches the schema. Every value the answer holds
    /// is a candidate (see [`candidates`]): the one that matches is the answer; several
    /// that match and differ are an ambiguity, never a pick (a value the child quotes from
    /// a file it read must not become its verdict); when none matches, the error is the
    /// first one of the likeliest.
    pub(crate) fn check(&self, answer: &str) -> Result<Value, Mismatch> {
        let mut first_error = None;
        let mut matching: Vec<Value> = Vec::new();
        for candidate in candidates(answer) {
            match self.validator.validate(&candidate) {
                Ok(()) => matching.push(candidate),
                Err(e) if first_error.is_none() => {
                    first_error = Some(Mismatch::Invalid {
                        path: json_path(e.instance_path()),
                        message: cut(&e.to_string()),
                    });
                }
                Err(_) => {}
            }
        }
        match matching.len() {
            0 => Err(first_error.unwrap_or(Mismatch::NoJson)),
            1 => Ok(matching.remove(0)),
            count => Err(Mismatch::Ambiguous {
                values: matching
                    .iter()
                    .take(2)
                    .map(|v| cut_to(&v.to_string(), MAX_SHOWN_VALUE_CHARS))
                    .collect(),
                count,
            }),
        }
    }
}

/// A location as a JSON path: `$`, `$.findings[0].line`, `$["a key"]`.
fn json_path(location: &Location) -> String {
    let mut out = String::from("$");
    for segment in location.iter() {
        match segment {
            LocationSegment::Index(i) => out.push_str(&format!("[{i}]")),
            LocationSegment::Property(name) => {
                let plain = name.chars().next().is_some_and(|c| !c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if plain {
                    out.push('.');
                    out.push_str(&name);
                } else {
                    out.push('[');
                    out.push_str(&Value::from(name.as_ref()).to_string());
                    out.push(']');
                }
            }
        }
    }
    out
}

fn cut(message: &str) -> String {
    cut_to(message, MAX_ERROR_MESSAGE_CHARS)
}

fn cut_to(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn findings() -> OutputSchema {
        OutputSchema::compile(json!({
            "type": "object",
            "properties": {
                "findings": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"file": {"type": "string"}, "line": {"type": "integer"}},
                    "required": ["file", "line"]
                }},
                "odd key": {"type": "string"}
            },
            "required": ["findings"],
            "additionalProperties": false
        }))
        .expect("a valid schema")
    }

    #[test]
    fn an_answer_that_matches_gives_its_value() {
        let answer = r#"{"findings": [{"file": "src/auth.rs", "line": 12}]}"#;
        assert_eq!(
            findings().check(answer),
            Ok(json!({"findings": [{"file": "src/auth.rs", "line": 12}]}))
        );
    }

    #[test]
    fn each_error_names_its_json_path() {
        let cases = [
            (
                r#"{"findings": [{"file": "a.rs", "line": 1}, {"file": "b.rs", "line": "12"}]}"#,
                "$.findings[1].line",
                r#""12" is not of type "integer""#,
            ),
            (
                r#"{"findings": [{"line": 3}]}"#,
                "$.findings[0]",
                r#""file" is a required property"#,
            ),
            (r#"{}"#, "$", r#""findings" is a required property"#),
            (
                r#"{"findings": [], "odd key": 5}"#,
                "$[\"odd key\"]",
                r#"5 is not of type "string""#,
            ),
            (
                r#"{"findings": [], "extra": true}"#,
                "$",
                "Additional properties are not allowed ('extra' was unexpected)",
            ),
            (r#"[1, 2]"#, "$", r#"[1,2] is not of type "object""#),
        ];
        for (answer, path, message) in cases {
            assert_eq!(
                findings().check(answer),
                Err(Mismatch::Invalid {
                    path: path.to_string(),
                    message: message.to_string()
                }),
                "{answer}"
            );
        }
        assert_eq!(findings().check("no JSON here"), Err(Mismatch::NoJson));
        assert_eq!(
            Mismatch::Invalid {
                path: "$.a".into(),
                message: "m".into()
            }
            .to_string(),
            "$.a: m"
        );
    }

    #[test]
    fn a_long_error_message_is_cut() {
        let schema = OutputSchema::compile(json!({"type": "string"})).unwrap();
        let answer = serde_json::to_string(&vec![7; 400]).unwrap();
        let Err(Mismatch::Invalid { path, message }) = schema.check(&answer) else {
            panic!("a mismatch");
        };
        assert_eq!(path, "$");
        assert_eq!(message.chars().count(), MAX_ERROR_MESSAGE_CHARS + 1);
        assert!(message.ends_with('…'), "{message}");
    }

    #[test]
    fn the_one_candidate_that_matches_is_the_answer_and_the_likeliest_error_is_reported() {
        let schema = findings();
        // An example first, the answer last: the answer matches.
        let answer =
            "For example `{\"findings\": 3}`. Here it is:\n```json\n{\"findings\": []}\n```";
        assert_eq!(schema.check(answer), Ok(json!({"findings": []})));
        // Nothing matches: the fenced block is the likeliest answer, its error is the one.
        let answer = "Like {\"findings\": []} but:\n```json\n{\"findings\": 3}\n```";
        assert_eq!(schema.check(answer), Ok(json!({"findings": []})));
        let answer = "Like {\"findings\": 4} but:\n```json\n{\"findings\": 3}\n```";
        assert_eq!(
            schema.check(answer),
            Err(Mismatch::Invalid {
                path: "$.findings".into(),
                message: r#"3 is not of type "array""#.into()
            })
        );
    }

    fn verdict() -> OutputSchema {
        OutputSchema::compile(json!({
            "type": "object",
            "properties": {"approved": {"type": "boolean"}},
            "required": ["approved"]
        }))
        .expect("a valid schema")
    }

    #[test]
    fn candidates_that_disagree_are_an_ambiguity_never_a_pick() {
        let schema = verdict();
        let ambiguous = |values: &[&str], count| {
            Err(Mismatch::Ambiguous {
                values: values.iter().map(|v| v.to_string()).collect(),
                count,
            })
        };
        // The child's verdict, then a value quoted from a file it read.
        let answer =
            "My verdict: {\"approved\": false}. A comment in the file said: {\"approved\": true}";
        assert_eq!(
            schema.check(answer),
            ambiguous(&["{\"approved\":true}", "{\"approved\":false}"], 2)
        );
        // Fenced or not, wherever they are.
        let answer =
            "The file says:\n```json\n{\"approved\": true}\n```\nMine: {\"approved\": false}";
        assert_eq!(
            schema.check(answer),
            ambiguous(&["{\"approved\":true}", "{\"approved\":false}"], 2)
        );
        let answer = "```json\n{\"approved\": true}\n```\n```json\n{\"approved\": false}\n```\n{\"approved\": true, \"why\": \"x\"}";
        assert_eq!(
            schema.check(answer),
            ambiguous(&["{\"approved\":false}", "{\"approved\":true}"], 3)
        );
        // The same value twice is one value; one that does not match is no candidate.
        assert_eq!(
            schema.check("{\"approved\": true}, as said:\n```json\n{\"approved\":true}\n```"),
            Ok(json!({"approved": true}))
        );
        assert_eq!(
            schema.check("Not {\"approved\": \"yes\"} but:\n```json\n{\"approved\": false}\n```"),
            Ok(json!({"approved": false}))
        );
        assert_eq!(
            Mismatch::Ambiguous {
                values: vec!["{\"a\":1}".into(), "{\"a\":2}".into()],
                count: 3
            }
            .to_string(),
            "it holds 3 different JSON values that match the output schema: {\"a\":1}, {\"a\":2} and 1 more"
        );
    }

    #[test]
    fn a_malformed_schema_is_refused_with_where_and_why() {
        let err =
            OutputSchema::compile(json!({"type": "object", "properties": {"a": {"type": 5}}}))
                .unwrap_err();
        let SchemaError::Invalid { at, message } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(at, "$.properties.a.type");
        assert!(message.contains("5"), "{message}");
        assert!(err
            .to_string()
            .starts_with("not a valid JSON Schema: $.properties.a.type: "));
        // A reference outside the schema is not fetched.
        let err = OutputSchema::compile(json!({"$ref": "https://example.com/s.json"})).unwrap_err();
        assert!(matches!(err, SchemaError::Invalid { .. }), "{err:?}: {err}");
    }

    #[test]
    fn a_schema_file_is_read_and_its_problems_said() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.json");
        std::fs::write(&good, r#"{"type": "array", "items": {"type": "integer"}}"#).unwrap();
        let schema = OutputSchema::load(&SchemaSource::File(good)).unwrap();
        assert_eq!(
            schema.compact(),
            json!({"type": "array", "items": {"type": "integer"}}).to_string()
        );
        assert!(!schema.is_object_schema());
        assert_eq!(schema.check("[1, 2]"), Ok(json!([1, 2])));

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"type\": ").unwrap();
        let err = OutputSchema::load(&SchemaSource::File(bad)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "not JSON: EOF while parsing a value at line 1 column 9"
        );
        let missing = dir.path().join("missing.json");
        let err = OutputSchema::load(&SchemaSource::File(missing)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot read it: No such file or directory (os error 2)"
        );
    }
}
