//! The `playground` script: a scripted model for trying orchestrate by hand, any number of
//! runs, with any agent CLI the mock speaks to. It decides each reply from the request
//! alone, so that every conversation goes the same way however many came before:
//!
//! 1. no tool result yet: it says what it does and calls the first tool it is offered that
//!    lists the working directory (a listing tool, else a glob, else the shell), with
//!    arguments filled in from that tool's own schema;
//! 2. a tool result: it answers, quoting the task and what the tool returned;
//! 3. no such tool offered: it answers at once, saying so.
//!
//! Every answer starts with [`PLAYGROUND_PREFIX`], so that nobody mistakes it for a model's.

use serde_json::{json, Value};

use super::{json_from_schema, tool_result_texts, user_texts, Api, MockUsage, Reply};

pub const PLAYGROUND_PREFIX: &str = "[scripted mock model, not an LLM]";

/// Tokens each playground reply reports.
const USAGE: MockUsage = MockUsage {
    input: 300,
    output: 20,
    cached: 100,
};

/// How much of a tool's result the answer quotes.
const QUOTED_RESULT_CHARS: usize = 4000;
/// How much of the task the answer repeats.
const QUOTED_TASK_CHARS: usize = 300;

/// Tools that list the working directory, best first: listing and glob tools (a read-only
/// agent has them), then the shells. Names as each CLI offers them: pi `ls`, `find`,
/// `bash`; Claude Code `Glob`, `LS`, `Bash`; codex `exec_command`, `shell`; Gemini CLI
/// `list_directory`, `glob`, `run_shell_command`; opencode `list`, `glob`, `bash`.
const LISTING_TOOLS: &[&str] = &[
    "ls",
    "list",
    "list_directory",
    "LS",
    "bash",
    "Bash",
    "exec_command",
    "shell",
    "run_shell_command",
    "Glob",
    "read",
    "glob",
    "find",
];

/// The reply to one request of the main conversation.
pub fn reply(api: Api, body: &Value) -> Reply {
    // The task: the last text of the user's, without the context a CLI adds in tags
    // before it (Claude Code's `<system-reminder>`, Gemini CLI's `<session_context>`).
    let task = user_texts(api, body)
        .iter()
        .map(|t| untagged(t))
        .rfind(|t| !t.is_empty())
        .map(|t| cut(t, QUOTED_TASK_CHARS))
        .unwrap_or_default();
    let results = tool_result_texts(body);
    if let Some(result) = results.last() {
        let text = format!(
            "{PLAYGROUND_PREFIX} You asked:\n\n> {}\n\nI listed the working directory; the tool returned:\n\n{}",
            task.replace('\n', "\n> "),
            cut(&readable(result), QUOTED_RESULT_CHARS)
        );
        return Reply::text(&text, USAGE);
    }
    match listing_tool(api, body) {
        Some((name, args)) => Reply::text_then_tool(
            &format!("{PLAYGROUND_PREFIX} Let me look at the working directory first."),
            &name,
            args,
            USAGE,
        ),
        None => Reply::text(
            &format!(
                "{PLAYGROUND_PREFIX} You asked:\n\n> {}\n\nI was offered no tool to look around with, so this is all I can say.",
                task.replace('\n', "\n> ")
            ),
            USAGE,
        ),
    }
}

/// The first offered tool of [`LISTING_TOOLS`], with arguments that fit its schema.
fn listing_tool(api: Api, body: &Value) -> Option<(String, Value)> {
    let offered = offered_tool_schemas(api, body);
    LISTING_TOOLS.iter().find_map(|want| {
        offered
            .iter()
            .find(|(name, _)| name == want)
            .map(|(name, schema)| (name.clone(), arguments_for(schema)))
    })
}

/// Each offered tool's name and parameter schema, whatever the API.
pub fn offered_tool_schemas(api: Api, body: &Value) -> Vec<(String, Value)> {
    let tools = body["tools"].as_array().into_iter().flatten();
    let pairs: Vec<(&Value, &Value)> = match api {
        Api::Anthropic => tools.map(|t| (&t["name"], &t["input_schema"])).collect(),
        Api::OpenAiChat => tools
            .map(|t| (&t["function"]["name"], &t["function"]["parameters"]))
            .collect(),
        Api::OpenAiResponses => tools.map(|t| (&t["name"], &t["parameters"])).collect(),
        Api::Gemini => tools
            .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
            .map(|f| {
                let schema = if f["parametersJsonSchema"].is_object() {
                    &f["parametersJsonSchema"]
                } else {
                    &f["parameters"]
                };
                (&f["name"], schema)
            })
            .collect(),
    };
    pairs
        .into_iter()
        .filter_map(|(n, s)| Some((n.as_str()?.to_string(), s.clone())))
        .collect()
}

/// Arguments for a listing tool: each required property filled by what its name says it
/// is (a path or folder: `.`; a pattern: `*`; a command: `ls`), else a minimal value of
/// its schema.
fn arguments_for(schema: &Value) -> Value {
    let mut args = serde_json::Map::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        let Some(name) = name.as_str() else { continue };
        let prop = &schema["properties"][name];
        let ty = prop["type"]
            .as_str()
            .unwrap_or("string")
            .to_ascii_lowercase();
        let lower = name.to_ascii_lowercase();
        let value = if lower.contains("command") || lower == "cmd" {
            if ty == "array" {
                json!(["ls", "-la"])
            } else {
                json!("ls -la")
            }
        } else if lower.contains("pattern") {
            json!("*")
        } else if lower.contains("path") || lower.contains("dir") {
            json!(".")
        } else if lower == "description" {
            json!("List the working directory")
        } else {
            json_from_schema(prop)
        };
        args.insert(name.to_string(), value);
    }
    Value::Object(args)
}

/// `text` without the `<tag>…</tag>` blocks it starts with.
fn untagged(text: &str) -> &str {
    let mut rest = text.trim();
    while let Some(open) = rest.strip_prefix('<') {
        let name: String = open
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        let close = format!("</{name}>");
        match rest.find(&close) {
            Some(at) if !name.is_empty() => rest = rest[at + close.len()..].trim_start(),
            _ => return "",
        }
    }
    rest.trim_end()
}

/// A tool result as a person would read it: Gemini CLI's `{"output": "…"}` unwrapped,
/// Claude Code's `<system-reminder>` blocks left out.
fn readable(result: &str) -> String {
    let text = match serde_json::from_str::<Value>(result) {
        Ok(Value::Object(map)) if map.len() == 1 && map["output"].is_string() => {
            map["output"].as_str().unwrap_or_default().to_string()
        }
        _ => result.to_string(),
    };
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("<system-reminder>") {
        out.push_str(&rest[..start]);
        rest = match rest[start..].find("</system-reminder>") {
            Some(end) => &rest[start + end + "</system-reminder>".len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out.trim().to_string()
}

fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
