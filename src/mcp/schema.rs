//! The tools' schemas as `tools/list` gives them. Every parent session that registers the
//! server loads them, so they stay small (every tool together under 2,800 bytes;
//! `tests/all/mcp_server.rs` measures it), and they are plain JSON Schema 2020-12 that strict
//! validators accept: no `format` outside the standard vocabulary (schemars writes `uint64`,
//! which clients log as unknown), no boolean schemas, no `$ref` to resolve.

use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{json, Value};

/// The `format` values of JSON Schema 2020-12 (its format vocabulary); anything else is
/// an extension that validators reject or warn about.
pub(crate) const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// The input schema of `T` (a tool's arguments), compacted: see [`compact`].
pub(crate) fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = schema.to_value();
    compact(&mut value);
    // The type's own doc comment: the tool's description already says what it is.
    if let Some(o) = value.as_object_mut() {
        o.remove("description");
    }
    Arc::new(match value {
        Value::Object(o) => o,
        // A struct's schema is always an object; an argument-less tool takes `{}`.
        _ => JsonObject::from_iter([("type".to_string(), json!("object"))]),
    })
}

/// An object without properties: the arguments of a tool that takes none.
pub(crate) fn no_input() -> Arc<JsonObject> {
    Arc::new(JsonObject::from_iter([(
        "type".to_string(),
        json!("object"),
    )]))
}

/// What `subagent`'s `structuredContent` (the result's lean details) holds, in brief: the
/// top-level fields, every other one allowed. The README (The result) describes them;
/// spelling each out here would be loaded into every session for a model that reads the
/// answer, not the schema.
pub(crate) fn subagent_output() -> Arc<JsonObject> {
    let schema = json!({
        "type": "object",
        "properties": {
            "mode": {"type": "string"},
            "runId": {"type": "string"},
            "results": {"type": "array", "items": {"type": "object"}},
            "error": {"type": "object"},
        },
        "required": ["mode", "results"],
    });
    match schema {
        Value::Object(o) => Arc::new(o),
        _ => unreachable!("a json! object literal"),
    }
}

/// Drops what costs bytes and tells a model nothing, and what strict validators reject:
/// `$schema` and `title`; `default` (descriptions say the defaults that matter); the `null`
/// of an optional field's type (leaving it out is how it is omitted); non-standard
/// `format`s; `additionalProperties` that allows anything. Then checks that no boolean
/// schema is left.
pub(crate) fn compact(schema: &mut Value) {
    match schema {
        Value::Object(o) => {
            for key in ["$schema", "title", "default"] {
                o.remove(key);
            }
            if o.get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
            {
                o.remove("format");
            }
            if let Some(Value::Array(types)) = o.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    o.insert("type".to_string(), only);
                }
            }
            if let Some(Value::Array(values)) = o.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            for (key, sub) in o.iter_mut() {
                match key.as_str() {
                    // Maps of names to schemas: each value is a schema.
                    "properties" | "$defs" => {
                        if let Value::Object(props) = sub {
                            props.values_mut().for_each(compact_subschema);
                        }
                    }
                    "items" | "additionalProperties" | "not" => compact_subschema(sub),
                    "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                        if let Value::Array(subs) = sub {
                            subs.iter_mut().for_each(compact_subschema);
                        }
                    }
                    _ => {}
                }
            }
            // Any additional property is what JSON Schema allows without the keyword.
            if o.get("additionalProperties") == Some(&json!({})) {
                o.remove("additionalProperties");
            }
            flatten_choices(o);
        }
        Value::Array(_) | Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// An optional value and an enum whose variants carry doc comments come out of schemars
/// as `anyOf: [X, {type: null}]` and `oneOf` of one `const` per variant, each with its
/// description: written as X itself, and as a plain `enum` of the values, so that an
/// argument costs the same bytes whatever its type's documentation says: the description
/// inside the `anyOf` (the type's doc comment) is left out, the argument's own stays.
fn flatten_choices(o: &mut serde_json::Map<String, Value>) {
    if let Some(Value::Array(subs)) = o.get("anyOf") {
        let mut rest = subs
            .iter()
            .filter(|s| s.get("type") != Some(&json!("null")));
        if let (Some(Value::Object(only)), None) = (rest.next(), rest.next()) {
            let only = only.clone();
            o.remove("anyOf");
            for (k, v) in only.into_iter().filter(|(k, _)| k != "description") {
                o.entry(k).or_insert(v);
            }
        }
    }
    let values: Option<Vec<Value>> = match o.get("oneOf") {
        Some(Value::Array(variants)) => variants
            .iter()
            .map(|v| {
                let single = v
                    .get("enum")
                    .and_then(Value::as_array)
                    .filter(|e| e.len() == 1);
                v.get("const")
                    .or_else(|| single.map(|e| &e[0]))
                    .filter(|c| c.is_string())
                    .cloned()
            })
            .collect(),
        _ => None,
    };
    if let Some(values) = values {
        o.remove("oneOf");
        o.insert("type".to_string(), json!("string"));
        o.insert("enum".to_string(), Value::Array(values));
    }
}

/// A subschema: compacted, and `true` (anything) written as `{}`, which means the same and
/// which every validator takes. `additionalProperties: false` is a keyword's value, not a
/// subschema to widen, and stays.
fn compact_subschema(sub: &mut Value) {
    match sub {
        Value::Bool(true) => *sub = json!({}),
        _ => compact(sub),
    }
}

/// Every place in `schema` that strict JSON Schema would reject or warn about: a
/// non-standard `format`, or a boolean where a schema belongs (`additionalProperties:
/// false` aside).
#[cfg(test)]
fn strictness_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    walk(schema, "#", &mut problems);
    problems
}

#[cfg(test)]
fn walk(schema: &Value, path: &str, problems: &mut Vec<String>) {
    let Value::Object(o) = schema else {
        problems.push(format!("{path}: {schema} is not a schema object"));
        return;
    };
    if let Some(f) = o.get("format").and_then(Value::as_str) {
        if !STANDARD_FORMATS.contains(&f) {
            problems.push(format!("{path}/format: non-standard format {f:?}"));
        }
    }
    for (key, sub) in o {
        let here = format!("{path}/{key}");
        match (key.as_str(), sub) {
            ("properties" | "$defs" | "patternProperties", Value::Object(props)) => {
                for (name, s) in props {
                    walk(s, &format!("{here}/{name}"), problems);
                }
            }
            ("additionalProperties", Value::Bool(false)) => {}
            ("items" | "additionalProperties" | "not" | "contains", s) => walk(s, &here, problems),
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(subs)) => {
                for (i, s) in subs.iter().enumerate() {
                    walk(s, &format!("{here}/{i}"), problems);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// What a tool takes.
    #[derive(JsonSchema, serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        /// Who.
        name: Option<String>,
        /// How long.
        #[schemars(range(min = 1))]
        wait_ms: Option<u64>,
        #[serde(default)]
        items: Vec<Item>,
        anything: Option<serde_json::Value>,
        level: Option<Level>,
        /// Which mode.
        mode: Option<Mode>,
        object: Option<serde_json::Map<String, serde_json::Value>>,
    }

    /// A mode whose variants say what they do: their words are for the code, not for
    /// every parent session's tool list.
    #[derive(JsonSchema, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Mode {
        On,
        /// Nothing at all, which takes a long sentence to explain.
        Off,
    }

    #[derive(JsonSchema, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Level {
        Low,
        High,
    }

    #[derive(JsonSchema, serde::Deserialize)]
    #[allow(dead_code)]
    struct Item {
        n: u32,
    }

    #[test]
    fn schemars_output_is_compacted_to_strict_json_schema() {
        let schema = Value::Object((*input_schema::<Args>()).clone());
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "name": {"type": "string", "description": "Who."},
                    "level": {"type": "string", "enum": ["low", "high"]},
                    "mode": {"type": "string", "enum": ["on", "off"], "description": "Which mode."},
                    "waitMs": {"type": "integer", "minimum": 1, "description": "How long."},
                    "items": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"n": {"type": "integer", "minimum": 0}},
                        "required": ["n"]
                    }},
                    "anything": {},
                    "object": {"type": "object"}
                }
            })
        );
        assert_eq!(strictness_problems(&schema), Vec::<String>::new());
    }

    #[test]
    fn strictness_problems_name_formats_and_boolean_schemas() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "integer", "format": "uint64"},
            "b": {"type": "string", "format": "date-time"},
            "c": {"type": "array", "items": true},
            "d": {"type": "object", "additionalProperties": false}
        }});
        assert_eq!(
            strictness_problems(&schema),
            vec![
                "#/properties/a/format: non-standard format \"uint64\"".to_string(),
                "#/properties/c/items: true is not a schema object".to_string(),
            ]
        );
    }

    #[test]
    fn the_output_schema_is_strict() {
        let schema = Value::Object((*subagent_output()).clone());
        assert_eq!(strictness_problems(&schema), Vec::<String>::new());
    }
}
