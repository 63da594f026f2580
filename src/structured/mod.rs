//! Structured answers (README, Structured answers): an output schema, from `--output-schema FILE`, the
//! MCP argument `outputSchema` or the agent's `output_schema:` key; the words that ask the
//! child for one JSON value matching it (for CLIs that cannot take the schema themselves)
//! and that ask it again when its answer did not match; and the check of an answer.
//!
//! - [`schema`]: loading and compiling a schema, validating a value, the JSON path of an error.
//! - [`extract`]: the JSON values an answer may hold (bare, fenced, or in prose).

mod extract;
mod schema;

pub(crate) use schema::{Mismatch, OutputSchema, SchemaSource};

/// The task, with the request for one JSON value matching `schema` after it: for CLIs
/// that have no option of their own for a schema.
pub(crate) fn task_prompt(task: &str, schema: &OutputSchema) -> String {
    format!(
        "{task}\n\nAnswer with one JSON value that matches this JSON Schema, and nothing else \
         (no prose around it; a ```json fence is fine):\n{}",
        schema.compact()
    )
}

/// The message of the repair turn: what was wrong with the answer, and the schema again.
pub(crate) fn repair_prompt(schema: &OutputSchema, mismatch: &Mismatch) -> String {
    let what = match mismatch {
        Mismatch::Ambiguous { .. } => "is ambiguous",
        Mismatch::NoJson | Mismatch::Invalid { .. } => "does not match the required output schema",
    };
    format!(
        "Your answer {what}: {mismatch}. Answer again with only one JSON value that matches \
         this JSON Schema, and nothing else:\n{}",
        schema.compact()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn the_prompts_carry_the_task_the_error_and_the_compact_schema() {
        let schema = OutputSchema::compile(json!({"type": "object", "required": ["name"]}))
            .expect("a valid schema");
        assert_eq!(
            task_prompt("Name a fruit.", &schema),
            "Name a fruit.\n\nAnswer with one JSON value that matches this JSON Schema, and nothing else (no prose around it; a ```json fence is fine):\n{\"required\":[\"name\"],\"type\":\"object\"}"
        );
        let mismatch = schema.check("{}").unwrap_err();
        assert_eq!(
            repair_prompt(&schema, &mismatch),
            "Your answer does not match the required output schema: $: \"name\" is a required property. Answer again with only one JSON value that matches this JSON Schema, and nothing else:\n{\"required\":[\"name\"],\"type\":\"object\"}"
        );
    }
}
