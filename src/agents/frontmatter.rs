//! One agent file's text to an [`AgentDef`]: split off the front matter, read it as YAML,
//! check each known key, and point every problem at the line of the file that caused it.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use yaml_serde::{Mapping, Value};

use super::{AgentDef, AgentProblem, AgentSource, Scope};
use crate::backends::tools::Tool;
use crate::backends::Backend;
use crate::settings::kinds::{describe_yaml, Raw};
use crate::settings::{AnySetting, Values, SETTINGS};

/// The opening `---` is line 1, so front matter line `i` (0-based) is file line `i + 2`.
const FIRST_FRONT_LINE: usize = 2;

const MISSING_FRONT_MATTER: &str = "missing front matter: the file must start with a --- line";

/// The most front matter read as YAML. Real agent files have a few hundred bytes of keys;
/// the YAML parser's cost grows faster than the text (200 KB of `[` took 40 s), so more
/// is a problem with the file, found before any parsing.
pub(crate) const MAX_FRONT_MATTER_BYTES: usize = 64 * 1024;
/// The deepest nesting of flow collections (`[`, `{`) and block sequences (`- - -`) read
/// as YAML. The keys orchestrate reads are flat; the parser gives up at 128 levels anyway,
/// but only after scanning the whole text.
pub(crate) const MAX_FRONT_MATTER_NESTING: usize = 32;

/// Parses one agent file. `path` is only recorded (in the source and in problems); nothing
/// is read from disk. With `Scope::Builtin` the source is [`AgentSource::Builtin`].
pub(crate) fn parse_agent_file(
    text: &str,
    path: &Path,
    scope: Scope,
) -> Result<AgentDef, AgentProblem> {
    parse_detailed(text, path, scope).map(|parsed| parsed.def)
}

pub(super) struct Parsed {
    pub def: AgentDef,
    /// Line of the `name:` key, so a duplicate name in the same folder can point at it.
    pub name_line: Option<usize>,
}

/// A problem before it is tied to a file.
type Located = (Option<usize>, String);

pub(super) fn parse_detailed(
    text: &str,
    path: &Path,
    scope: Scope,
) -> Result<Parsed, AgentProblem> {
    let problem = |(line, reason): Located| AgentProblem {
        file: path.to_path_buf(),
        line,
        reason,
    };
    let doc = split(text).map_err(problem)?;
    check_bounds(&doc.front).map_err(problem)?;
    let map = read_yaml(&doc.front).map_err(problem)?;
    let fields = Fields {
        front: &doc.front,
        map: &map,
    };
    let mut errors: Vec<Located> = Vec::new();

    let name_line = fields.line_of("name");
    let name = if fields.value("name").is_some() {
        let name = fields.read(&["name"], as_text, &mut errors);
        if let Some(Err(why)) = name.as_deref().map(check_name) {
            errors.push((name_line, format!("invalid `name`: {why}")));
        }
        name.unwrap_or_default()
    } else {
        // Claude Code and pi name an agent after its file when `name` is absent.
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        if let Err(why) = check_name(&stem) {
            errors.push((
                None,
                format!("no `name` key, and the file name does not make a valid one: {why}"),
            ));
        }
        stem
    };
    let description = fields
        .read(&["description"], as_text, &mut errors)
        .unwrap_or_default();
    let tools = fields
        .read(&["tools"], as_tools, &mut errors)
        .unwrap_or_default();
    let command = fields.read(&["command"], as_text, &mut errors);
    let dialect = fields.read(&["dialect"], as_dialect, &mut errors);
    let readonly = fields
        .read(&["readonly"], as_bool, &mut errors)
        .unwrap_or(false);
    let enabled = fields
        .read(&["enabled"], as_bool, &mut errors)
        .unwrap_or(true);
    let mut settings = Values::default();
    let dir = path.parent().unwrap_or(Path::new(""));
    for setting in SETTINGS {
        fields.read_setting(*setting, dir, &mut settings, &mut errors);
    }

    // One problem per file keeps the report short; the first in the file is the one a
    // person fixing it from the top would meet first.
    if let Some(first) = errors
        .into_iter()
        .min_by_key(|(line, _)| line.unwrap_or(usize::MAX))
    {
        return Err(problem(first));
    }

    let source = match scope {
        Scope::Builtin => AgentSource::Builtin,
        scope => AgentSource::File {
            path: path.to_path_buf(),
            scope,
        },
    };
    Ok(Parsed {
        def: AgentDef {
            name,
            description,
            tools,
            readonly,
            settings,
            command: command.filter(|c| !c.is_empty()),
            dialect: dialect.flatten(),
            enabled,
            system_prompt: doc.body,
            source,
        },
        name_line,
    })
}

struct Document<'a> {
    /// Front matter lines without line endings; index `i` is file line `i + FIRST_FRONT_LINE`.
    front: Vec<&'a str>,
    body: String,
}

fn split(text: &str) -> Result<Document<'_>, Located> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    if lines.next().map(str::trim_end) != Some("---") {
        return Err((Some(1), MISSING_FRONT_MATTER.to_string()));
    }
    let mut front = Vec::new();
    let mut closed = false;
    for line in lines.by_ref() {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        front.push(line);
    }
    if !closed {
        return Err((
            Some(1),
            "unterminated front matter: the --- on line 1 has no closing --- line".to_string(),
        ));
    }
    let body: Vec<&str> = lines.collect();
    let is_text = |l: &&str| !l.trim().is_empty();
    let body = match (
        body.iter().position(is_text),
        body.iter().rposition(is_text),
    ) {
        (Some(first), Some(last)) => body[first..=last].join("\n"),
        _ => String::new(),
    };
    Ok(Document { front, body })
}

/// Refuses front matter larger than [`MAX_FRONT_MATTER_BYTES`] or nested deeper than
/// [`MAX_FRONT_MATTER_NESTING`], in one pass over the text. The nesting is counted the
/// way YAML opens it: `[`/`{` outside quotes and comments, and the `- ` items that open a
/// sequence on a line; closing brackets end their levels. A plain scalar holding `[` may
/// count a level it does not open, which only matters past the limit.
fn check_bounds(front: &[&str]) -> Result<(), Located> {
    let bytes: usize = front.iter().map(|l| l.len() + 1).sum();
    if bytes > MAX_FRONT_MATTER_BYTES {
        return Err((
            Some(FIRST_FRONT_LINE),
            format!(
                "front matter is {bytes} bytes, more than the {MAX_FRONT_MATTER_BYTES} allowed"
            ),
        ));
    }
    let too_deep = |i: usize| {
        Err((
            Some(i + FIRST_FRONT_LINE),
            format!(
                "front matter nests deeper than {MAX_FRONT_MATTER_NESTING} levels; \
                 agent keys are flat"
            ),
        ))
    };
    let mut flow: usize = 0;
    let mut quote: Option<char> = None;
    for (i, line) in front.iter().enumerate() {
        if flow == 0 && quote.is_none() {
            let mut rest = line.trim_start_matches([' ', '\t']);
            let mut items = 0;
            while let Some(r) = rest
                .strip_prefix('-')
                .filter(|r| r.starts_with([' ', '\t']))
            {
                items += 1;
                rest = r.trim_start_matches([' ', '\t']);
            }
            if items > MAX_FRONT_MATTER_NESTING {
                return too_deep(i);
            }
        }
        let mut prev = ' ';
        for c in line.chars() {
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    '#' if prev.is_whitespace() => break,
                    '"' | '\'' if prev.is_whitespace() || "[{,:".contains(prev) => quote = Some(c),
                    '[' | '{' => {
                        flow += 1;
                        if flow > MAX_FRONT_MATTER_NESTING {
                            return too_deep(i);
                        }
                    }
                    ']' | '}' => flow = flow.saturating_sub(1),
                    _ => {}
                },
            }
            prev = c;
        }
        // A single-quoted scalar may span lines; a double-quoted one too.
    }
    Ok(())
}

fn read_yaml(front: &[&str]) -> Result<Mapping, Located> {
    let value = match yaml_serde::from_str::<Value>(&front.join("\n")) {
        Ok(value) => value,
        Err(strict) => match quote_colon_values(front)
            .and_then(|repaired| yaml_serde::from_str::<Value>(&repaired).ok())
        {
            Some(value) => value,
            None => return Err(yaml_problem(front, &strict)),
        },
    };
    match value {
        // Front matter that is empty or only comments.
        Value::Null => Ok(Mapping::new()),
        Value::Mapping(map) => Ok(map),
        other => Err((
            Some(FIRST_FRONT_LINE),
            format!(
                "front matter must be YAML `key: value` lines, not {}",
                describe_yaml(&other)
            ),
        )),
    }
}

/// Many published Claude Code agents have `description: Use this when: ...`, an unquoted
/// `: ` inside a value. Strict YAML reads that as a nested mapping and fails; Claude Code
/// tolerates it, and those files must work unchanged here too. So after a strict failure,
/// quote such values on top-level `key: value` lines and try once more.
fn quote_colon_values(front: &[&str]) -> Option<String> {
    let mut changed = false;
    let lines: Vec<String> = front
        .iter()
        .map(|line| match quote_colon_value(line) {
            Some(quoted) => {
                changed = true;
                quoted
            }
            None => (*line).to_string(),
        })
        .collect();
    changed.then(|| lines.join("\n"))
}

fn quote_colon_value(line: &str) -> Option<String> {
    let (key, rest) = line.split_once(':')?;
    let is_key_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if key.is_empty() || !key.chars().all(is_key_char) || !rest.starts_with([' ', '\t']) {
        return None;
    }
    let value = rest.trim();
    // Values YAML gives a meaning to (quotes, flow collections, block scalars, anchors,
    // aliases, tags, comments) are left for the strict error to describe.
    if value.is_empty() || value.starts_with(['"', '\'', '[', '{', '|', '>', '&', '*', '!', '#']) {
        return None;
    }
    if !(value.contains(": ") || value.contains(":\t") || value.ends_with(':')) {
        return None;
    }
    // A JSON string is a valid YAML double-quoted scalar.
    let quoted = serde_json::to_string(value).ok()?;
    Some(format!("{key}: {quoted}"))
}

fn yaml_problem(front: &[&str], err: &yaml_serde::Error) -> Located {
    static LINE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\bline (\d+)").unwrap());
    static DUPLICATE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"duplicate entry with key "([^"]*)""#).unwrap());

    // The YAML parser counts from the first front matter line; people count from the top
    // of the file.
    let raw = err.to_string();
    let message = LINE.replace_all(&raw, |c: &regex::Captures| {
        let n: usize = c[1].parse().unwrap_or(0);
        format!("line {}", n + FIRST_FRONT_LINE - 1)
    });
    let reason = format!("invalid YAML in front matter: {message}");
    // For a repeated key the parser points at the start of the mapping; the second
    // occurrence is the line to fix.
    if let Some(key) = DUPLICATE.captures(&message).map(|c| c[1].to_string()) {
        if let Some(line) = key_lines(front, &key).nth(1) {
            return (Some(line), reason);
        }
    }
    let line = err.location().map(|l| l.line() + FIRST_FRONT_LINE - 1);
    (line, reason)
}

/// File lines holding the top-level key `key` (unquoted or quoted).
fn key_lines<'a>(front: &'a [&'a str], key: &'a str) -> impl Iterator<Item = usize> + 'a {
    front
        .iter()
        .enumerate()
        .filter(move |(_, line)| {
            ["", "\"", "'"]
                .iter()
                .find_map(|q| line.strip_prefix(q)?.strip_prefix(key)?.strip_prefix(q))
                .is_some_and(|rest| rest.trim_start_matches([' ', '\t']).starts_with(':'))
        })
        .map(|(i, _)| i + FIRST_FRONT_LINE)
}

struct Fields<'a> {
    front: &'a [&'a str],
    map: &'a Mapping,
}

impl Fields<'_> {
    /// A key whose value is null (`model:`) counts as absent, as it does for Claude Code.
    fn value(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn line_of(&self, key: &str) -> Option<usize> {
        key_lines(self.front, key).next()
    }

    /// Reads `setting` from the first of its keys present, recording a problem when its
    /// value does not read or when two of its keys are both set.
    fn read_setting(
        &self,
        setting: &dyn AnySetting,
        dir: &Path,
        values: &mut Values,
        errors: &mut Vec<Located>,
    ) {
        let Some((key, value)) = self.present(setting.surfaces().agent, errors) else {
            return;
        };
        if let Err(e) = setting.read(values, Raw::Yaml { value, key, dir }) {
            errors.push((self.line_of(key), format!("invalid `{key}`: {e}")));
        }
    }

    /// The first present key of `keys` (a key and its aliases) and its value; a problem
    /// when two of them are both set.
    fn present(
        &self,
        keys: &[&'static str],
        errors: &mut Vec<Located>,
    ) -> Option<(&'static str, &Value)> {
        let mut present = keys
            .iter()
            .filter_map(|&key| self.value(key).map(|value| (key, value)));
        let (key, value) = present.next()?;
        if let Some((other, _)) = present.next() {
            errors.push((
                self.line_of(other),
                format!("`{key}` and `{other}` are both set; keep one"),
            ));
            return None;
        }
        Some((key, value))
    }

    /// Reads the first present key of `keys` (a key and its aliases), recording a problem
    /// when its value does not convert or when two aliases are both set.
    fn read<T>(
        &self,
        keys: &[&'static str],
        convert: impl Fn(&Value) -> Result<T, ValueError>,
        errors: &mut Vec<Located>,
    ) -> Option<T> {
        let (key, value) = self.present(keys, errors)?;
        match convert(value) {
            Ok(v) => Some(v),
            Err(e) => {
                errors.push((self.line_of(key), format!("invalid `{key}`: {e}")));
                None
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum ValueError {
    #[error("expected {expected}, got {got}")]
    WrongType { expected: &'static str, got: String },
    /// A name that is not one of the known ones; the message lists them.
    #[error("{0}")]
    Named(String),
}

fn wrong(expected: &'static str, got: &Value) -> ValueError {
    ValueError::WrongType {
        expected,
        got: describe_yaml(got),
    }
}

fn as_text(v: &Value) -> Result<String, ValueError> {
    match v {
        Value::String(s) => Ok(s.trim().to_string()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(wrong("text", other)),
    }
}

fn as_dialect(v: &Value) -> Result<Option<Backend>, ValueError> {
    let name = as_text(v)?;
    if name.is_empty() {
        return Ok(None);
    }
    Backend::parse_dialect(&name)
        .map(Some)
        .map_err(|e| ValueError::Named(e.to_string()))
}

fn as_tools(v: &Value) -> Result<Vec<Tool>, ValueError> {
    const EXPECTED: &str = "a comma-separated string or a list of tool names";
    match v {
        Value::String(s) => Ok(s
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(Tool::parse)
            .collect()),
        Value::Sequence(items) => {
            let mut tools = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Value::String(s) if !s.trim().is_empty() => tools.push(Tool::parse(s)),
                    other => {
                        return Err(ValueError::WrongType {
                            expected: "every list item to be a tool name",
                            got: describe_yaml(other),
                        })
                    }
                }
            }
            Ok(tools)
        }
        other => Err(wrong(EXPECTED, other)),
    }
}

/// devkit-pi wrote `readonly: "1"`, and hand-written files say `yes`; accept the usual
/// spellings rather than reject a file over them.
fn as_bool(v: &Value) -> Result<bool, ValueError> {
    const EXPECTED: &str = "true or false";
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Number(n) if n.as_u64() == Some(1) => Ok(true),
        Value::Number(n) if n.as_u64() == Some(0) => Ok(false),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(wrong(EXPECTED, v)),
        },
        other => Err(wrong(EXPECTED, other)),
    }
}

/// Names are typed on command lines and used in file names, so keep them to a safe set.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".to_string());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "{name:?} contains {bad:?}; a name may only contain letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::BackendChoice;
    use crate::structured::SchemaSource;
    use crate::units::Usd;
    use pretty_assertions::assert_eq;
    use std::path::PathBuf;
    use std::time::Duration;

    fn path() -> PathBuf {
        PathBuf::from("/proj/.orchestrate/agents/explorer.md")
    }

    fn parse(text: &str) -> Result<AgentDef, AgentProblem> {
        parse_agent_file(text, &path(), Scope::Project)
    }

    fn problem(text: &str) -> (Option<usize>, String) {
        let p = parse(text).expect_err("expected a problem");
        assert_eq!(p.file, path());
        (p.line, p.reason)
    }

    #[test]
    fn full_orchestrate_file() {
        let text = "\
---
name: explorer
description: Read-only codebase exploration; answers \"where is X / how does Y work\".
tools: read, grep, find, ls          # comma string or YAML list
model: claude-haiku-4-5
backend: pi
timeout: 10m
idle_timeout: 90s
max_turns: 12
max_tokens: 200_000
max_cost: 0.50
tool_timeout: 5m
connect_timeout: 30s
fallback_models: [claude-sonnet-4-5, gpt-5.5]
runner: gpu
queue_timeout: 5m
readonly: true
enabled: true
---

You are a fast, read-only code explorer.

Be precise.

";
        assert_eq!(
            parse(text).unwrap(),
            AgentDef {
                name: "explorer".into(),
                description:
                    "Read-only codebase exploration; answers \"where is X / how does Y work\"."
                        .into(),
                tools: vec![Tool::Read, Tool::Grep, Tool::Find, Tool::Ls],
                readonly: true,
                settings: Values {
                    model: Some("claude-haiku-4-5".into()),
                    backend: Some(BackendChoice::Named(Backend::named("pi"))),
                    timeout: Some(Duration::from_secs(600)),
                    idle_timeout: Some(Duration::from_secs(90)),
                    max_turns: Some(12),
                    max_tokens: Some(200_000),
                    max_cost: Usd::new(0.5),
                    tool_timeout: Some(Duration::from_secs(300)),
                    connect_timeout: Some(Duration::from_secs(30)),
                    fallback_models: Some(vec!["claude-sonnet-4-5".into(), "gpt-5.5".into()]),
                    queue_timeout: Some(Duration::from_secs(300)),
                    runner: Some("gpu".into()),
                    ..Values::default()
                },
                command: None,
                dialect: None,
                enabled: true,
                system_prompt: "You are a fast, read-only code explorer.\n\nBe precise.".into(),
                source: AgentSource::File {
                    path: path(),
                    scope: Scope::Project,
                },
            }
        );
    }

    #[test]
    fn claude_code_file_with_capitalized_tools_and_unknown_keys() {
        let text = "\
---
name: code-reviewer
description: Expert code review specialist. Use proactively after writing code.
tools: Read, Grep, Glob, Bash
model: sonnet
color: blue
permissionMode: default
---
You are a senior code reviewer.
";
        let p = PathBuf::from("/home/u/.claude/agents/code-reviewer.md");
        assert_eq!(
            parse_agent_file(text, &p, Scope::User).unwrap(),
            AgentDef {
                name: "code-reviewer".into(),
                description: "Expert code review specialist. Use proactively after writing code."
                    .into(),
                tools: vec![Tool::Read, Tool::Grep, Tool::Find, Tool::Bash],
                readonly: false,
                settings: Values {
                    model: Some("sonnet".into()),
                    ..Values::default()
                },
                command: None,
                dialect: None,
                enabled: true,
                system_prompt: "You are a senior code reviewer.".into(),
                source: AgentSource::File {
                    path: p.clone(),
                    scope: Scope::User,
                },
            }
        );
    }

    #[test]
    fn yaml_list_of_tools_keeps_order() {
        let def = parse("---\nname: x\ntools: [\"Read\", \"Grep\"]\n---\nbody").unwrap();
        assert_eq!(def.tools, vec![Tool::Read, Tool::Grep]);
        let def = parse("---\nname: x\ntools:\n  - bash\n  - \" read \"\n  - WebFetch\n---\nbody")
            .unwrap();
        assert_eq!(
            def.tools,
            vec![Tool::Bash, Tool::Read, Tool::Native("WebFetch".into())]
        );
    }

    #[test]
    fn crlf_and_bom() {
        let text = "\u{feff}---\r\nname: x\r\ndescription: d\r\nreadonly: \"1\"\r\n---\r\n\r\nline one\r\nline two\r\n";
        let def = parse(text).unwrap();
        assert_eq!(
            (def.name.as_str(), def.description.as_str(), def.readonly),
            ("x", "d", true)
        );
        assert_eq!(def.system_prompt, "line one\nline two");
    }

    #[test]
    fn minimal_file_takes_name_from_stem_and_defaults_the_rest() {
        let def = parse("---\n---\n").unwrap();
        assert_eq!(
            def,
            AgentDef {
                name: "explorer".into(),
                description: String::new(),
                tools: vec![],
                readonly: false,
                settings: Values::default(),
                command: None,
                dialect: None,
                enabled: true,
                system_prompt: String::new(),
                source: AgentSource::File {
                    path: path(),
                    scope: Scope::Project,
                },
            }
        );
        // Empty values mean "not set", as in Claude Code files.
        let def = parse("---\nname: y\nmodel:\ntools:\nbackend: \"\"\n---\nb").unwrap();
        assert_eq!(
            (def.name.as_str(), def.settings.model, def.settings.backend),
            ("y", None, None)
        );
        assert!(def.tools.is_empty());
    }

    #[test]
    fn aliases_and_spellings() {
        let def = parse(
            "---\ntimeoutMs: 120000\nidleTimeoutMs: \"30s\"\nmaxTurns: \"7\"\nreadonly: yes\nenabled: \"false\"\n---\n",
        )
        .unwrap();
        assert_eq!(
            (
                def.settings.timeout,
                def.settings.idle_timeout,
                def.settings.max_turns,
                def.readonly,
                def.enabled
            ),
            (
                Some(Duration::from_secs(120)),
                Some(Duration::from_secs(30)),
                Some(7),
                true,
                false
            )
        );
        let def = parse("---\ntimeout_ms: 5000\nidle_timeout_ms: 2000\n---\n").unwrap();
        assert_eq!(
            (def.settings.timeout, def.settings.idle_timeout),
            (Some(Duration::from_secs(5)), Some(Duration::from_secs(2)))
        );
        let def = parse("---\nidleTimeout: 1m\nreadonly: 0\n---\n").unwrap();
        assert_eq!(
            (def.settings.idle_timeout, def.readonly),
            (Some(Duration::from_secs(60)), false)
        );
    }

    #[test]
    fn unquoted_colon_in_description_is_tolerated_like_claude_code() {
        let text = "---\nname: hunter\ndescription: Use this agent when: reviewing PRs. Examples: user: \"check it\"\ntools: Read, Grep\n---\nbody\n";
        let def = parse(text).unwrap();
        assert_eq!(
            def.description,
            "Use this agent when: reviewing PRs. Examples: user: \"check it\""
        );
        assert_eq!(def.tools, vec![Tool::Read, Tool::Grep]);
    }

    #[test]
    fn missing_and_unterminated_front_matter() {
        assert_eq!(
            problem("# Explorer\n\nYou explore.\n"),
            (Some(1), MISSING_FRONT_MATTER.to_string())
        );
        assert_eq!(problem(""), (Some(1), MISSING_FRONT_MATTER.to_string()));
        assert_eq!(
            problem("---\nname: x\n\nbody without a closing line\n"),
            (
                Some(1),
                "unterminated front matter: the --- on line 1 has no closing --- line".into()
            )
        );
    }

    #[test]
    fn yaml_syntax_error_reports_the_file_line() {
        let (line, reason) =
            problem("---\nname: x\ndescription: ok\ntools: [read, grep\nmodel: m\n---\nbody\n");
        assert_eq!(line, Some(5));
        assert!(
            reason.starts_with("invalid YAML in front matter: "),
            "{reason}"
        );
        // The message's own line numbers are file lines too.
        assert!(reason.contains("at line 5 column"), "{reason}");
        assert!(reason.contains("flow sequence at line 4"), "{reason}");

        let (line, reason) = problem("---\nname: x\n  oops: 1\n---\n");
        assert_eq!(line, Some(3), "{reason}");
    }

    #[test]
    fn duplicate_yaml_key_points_at_the_second_occurrence() {
        let (line, reason) = problem("---\nname: x\nmodel: a\nmodel: b\n---\n");
        assert_eq!(line, Some(4));
        assert!(
            reason.contains("duplicate entry with key \"model\""),
            "{reason}"
        );
    }

    #[test]
    fn front_matter_that_is_not_a_mapping() {
        assert_eq!(
            problem("---\n- a\n- b\n---\n"),
            (
                Some(2),
                "front matter must be YAML `key: value` lines, not a list".into()
            )
        );
    }

    #[test]
    fn each_bad_value_names_the_key_and_its_line() {
        let cases: &[(&str, &str, usize, &str)] = &[
            ("timeout", "soon", 4, "invalid `timeout`: invalid duration \"soon\""),
            ("timeout", "0s", 4, "invalid `timeout`: must be greater than zero"),
            ("timeout", "5", 4, "invalid `timeout`: invalid duration 5: a number needs a unit: did you mean 5s?"),
            ("timeout", "\"90\"", 4, "invalid `timeout`: invalid duration \"90\": a number needs a unit: did you mean 90s?"),
            ("timeoutMs", "-5", 4, "invalid `timeoutMs`: expected a whole number of milliseconds, got -5"),
            ("idle_timeout", "[1]", 4, "invalid `idle_timeout`: expected a duration (e.g. 90s, 15m, 1h30m or 500ms), got a list"),
            ("max_turns", "-3", 4, "invalid `max_turns`: expected a whole number of at least 1, got -3"),
            ("maxTurns", "0", 4, "invalid `maxTurns`: expected a whole number of at least 1, got 0"),
            ("max_turns", "2.5", 4, "invalid `max_turns`: expected a whole number of at least 1, got 2.5"),
            ("max_tokens", "lots", 4, "invalid `max_tokens`: expected a whole number of at least 1, got \"lots\""),
            ("max_cost", "-1", 4, "invalid `max_cost`: expected an amount of US dollars greater than 0, such as 0.50, got -1"),
            ("maxCostUsd", "\"$0\"", 4, "invalid `maxCostUsd`: expected an amount of US dollars greater than 0, such as 0.50, got \"$0\""),
            ("tool_timeout", "0s", 4, "invalid `tool_timeout`: must be greater than zero"),
            ("connectTimeout", "soon", 4, "invalid `connectTimeout`: invalid duration \"soon\""),
            ("fallback_models", "{a: 1}", 4, "invalid `fallback_models`: expected a list of model names, or a comma-separated string of them, got a mapping"),
            ("tools", "5", 4, "invalid `tools`: expected a comma-separated string or a list of tool names, got 5"),
            ("tools", "[read, 3]", 4, "invalid `tools`: expected every list item to be a tool name, got 3"),
            ("tools", "{a: 1}", 4, "invalid `tools`: expected a comma-separated string or a list of tool names, got a mapping"),
            ("enabled", "maybe", 4, "invalid `enabled`: expected true or false, got \"maybe\""),
            ("enabled", "2", 4, "invalid `enabled`: expected true or false, got 2"),
            ("model", "[a, b]", 4, "invalid `model`: expected text, got a list"),
            ("backend", "true", 4, "invalid `backend`: expected text, got true"),
            ("description", "{x: 1}", 4, "invalid `description`: expected text, got a mapping"),
        ];
        for (key, value, line, reason) in cases {
            let text = format!(
                "---\nname: x\n# a comment line\n{key}: {value}\nreadonly: false\n---\nbody\n"
            );
            let (got_line, got_reason) = problem(&text);
            assert_eq!(got_line, Some(*line), "{key}: {value} -> {got_reason}");
            assert!(
                got_reason.starts_with(reason),
                "{key}: {value}\n  got:  {got_reason}\n  want: {reason}…"
            );
        }
    }

    #[test]
    fn quoted_key_is_found_for_its_line() {
        assert_eq!(
            problem("---\nname: x\n\"max_turns\": nope\n---\n"),
            (
                Some(3),
                "invalid `max_turns`: expected a whole number of at least 1, got \"nope\"".into()
            )
        );
    }

    #[test]
    fn two_aliases_set_is_a_problem() {
        assert_eq!(
            problem("---\ntimeout: 5m\ntimeoutMs: 1000\n---\n"),
            (
                Some(3),
                "`timeout` and `timeoutMs` are both set; keep one".into()
            )
        );
    }

    #[test]
    fn the_first_problem_in_the_file_is_reported() {
        let (line, reason) = problem("---\nname: x\nenabled: maybe\ntimeout: soon\n---\n");
        assert_eq!(line, Some(3), "{reason}");
        assert!(reason.starts_with("invalid `enabled`"), "{reason}");
    }

    #[test]
    fn bad_names() {
        assert_eq!(
            problem("---\ndescription: d\nname: \"  \"\n---\n"),
            (Some(3), "invalid `name`: the name is empty".into())
        );
        assert_eq!(
            problem("---\nname: my agent\n---\n"),
            (
                Some(2),
                "invalid `name`: \"my agent\" contains ' '; a name may only contain letters, digits, '.', '_' and '-'".into()
            )
        );
        assert_eq!(problem("---\nname: a/b\n---\n").0, Some(2));
        assert_eq!(
            problem("---\nname: [a]\n---\n"),
            (Some(2), "invalid `name`: expected text, got a list".into())
        );
        let p =
            parse_agent_file("---\n---\n", Path::new("/x/my agent.md"), Scope::User).unwrap_err();
        assert_eq!(p.line, None);
        assert!(
            p.reason
                .starts_with("no `name` key, and the file name does not make a valid one"),
            "{}",
            p.reason
        );
        // Numbers are fine as names and the allowed punctuation is kept.
        assert_eq!(parse("---\nname: 42\n---\n").unwrap().name, "42");
        assert_eq!(parse("---\nname: a.b_c-D\n---\n").unwrap().name, "a.b_c-D");
    }

    #[test]
    fn an_output_schema_is_inline_yaml_or_a_path_next_to_the_agent_file() {
        let text = "---\nname: x\noutput_schema:\n  type: object\n  properties:\n    files: {type: array, items: {type: string}}\n    count: {type: integer, minimum: 0}\n  required: [files]\n---\nP\n";
        assert_eq!(
            parse(text).unwrap().settings.output_schema,
            Some(SchemaSource::Inline(serde_json::json!({
                "type": "object",
                "properties": {
                    "files": {"type": "array", "items": {"type": "string"}},
                    "count": {"type": "integer", "minimum": 0}
                },
                "required": ["files"]
            })))
        );
        // A path is relative to the agent file's folder; an absolute one is kept.
        assert_eq!(
            parse("---\nname: x\noutputSchema: schemas/answer.json\n---\nP\n")
                .unwrap()
                .settings
                .output_schema,
            Some(SchemaSource::File(PathBuf::from(
                "/proj/.orchestrate/agents/schemas/answer.json"
            )))
        );
        assert_eq!(
            parse("---\nname: x\noutput_schema: /etc/s.json\n---\nP\n")
                .unwrap()
                .settings
                .output_schema,
            Some(SchemaSource::File(PathBuf::from("/etc/s.json")))
        );
    }

    #[test]
    fn a_broken_inline_output_schema_is_a_problem_on_its_line() {
        let (line, reason) =
            problem("---\nname: x\noutput_schema:\n  type: object\n  required: yes\n---\nP\n");
        assert_eq!(line, Some(3), "{reason}");
        assert!(
            reason.starts_with("invalid `output_schema`: not a valid JSON Schema: $.required: "),
            "{reason}"
        );
        assert_eq!(
            problem("---\nname: x\noutput_schema: 5\n---\nP\n"),
            (
                Some(3),
                "invalid `output_schema`: expected a JSON Schema (a YAML mapping) or the path of a JSON Schema file, got 5".to_string()
            )
        );
    }

    #[test]
    fn builtin_scope_gives_builtin_source() {
        let def =
            parse_agent_file("---\nname: x\n---\nb", Path::new("x.md"), Scope::Builtin).unwrap();
        assert_eq!(def.source, AgentSource::Builtin);
    }

    #[test]
    fn body_keeps_inner_blank_lines_and_indentation() {
        let def = parse("---\nname: x\n---\n\n\n    indented\n\n  - item\n   \n\n").unwrap();
        assert_eq!(def.system_prompt, "    indented\n\n  - item");
        // A later --- is body text, not more front matter.
        let def = parse("---\nname: x\n---\na\n---\nb").unwrap();
        assert_eq!(def.system_prompt, "a\n---\nb");
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "---",
            "---\n",
            "---\n---",
            "---\n:\n---",
            "---\n{{{{\n---",
            "---\n\t\u{0}\n---",
            "---\n!!binary x\n---",
            "---\nname: *a\n---",
            "---\r\n---\r\n",
            "\u{feff}",
            "---\nname: [\n---\nname: ok\n---\n",
        ] {
            let _ = parse(text);
        }
    }

    #[test]
    fn a_backend_or_dialect_typo_is_a_problem_on_its_line() {
        assert_eq!(
            problem("---\nname: x\ndescription: d\nbackend: cluade\n---\nP\n"),
            (
                Some(4),
                "invalid `backend`: unknown backend \"cluade\" (available: auto, claude, pi, codex, gemini, opencode, cursor, command)".to_string()
            )
        );
        assert_eq!(
            problem("---\nname: x\nbackend: command\ndialect: klingon\n---\nP\n"),
            (
                Some(4),
                "invalid `dialect`: unknown dialect \"klingon\" (available: claude, pi, codex, gemini, opencode, cursor)".to_string()
            )
        );
        let def = parse("---\nname: x\nbackend: claude-code\ndialect: codex\n---\nP\n").unwrap();
        assert_eq!(
            (def.settings.backend, def.dialect),
            (
                Some(BackendChoice::Named(Backend::named("claude"))),
                Some(Backend::named("codex"))
            )
        );
    }

    /// A hostile agent file must cost milliseconds, not the 40 s (release; minutes in a
    /// debug build) that YAML parsing of 200 KB of `[` took. The bound is generous; the
    /// speed itself is measured in `scripts/bench`.
    #[test]
    fn hostile_front_matter_is_a_problem_found_at_once() {
        let cases = [
            // The reported file: 200 KB of `[`.
            (
                format!("extra: {}", "[".repeat(200_000)),
                "front matter is 200016 bytes, more than the 65536 allowed",
            ),
            // Within the size bound, each way of nesting.
            (
                format!("extra: {}", "[".repeat(60_000)),
                "nests deeper than 32",
            ),
            (
                format!("extra: {}", "{a: ".repeat(15_000)),
                "nests deeper than 32",
            ),
            (
                format!("extra:\n  {}x", "- ".repeat(30_000)),
                "nests deeper than 32",
            ),
        ];
        for (front, why) in cases {
            let text = format!("---\nname: x\n{front}\n---\nBody.\n");
            let started = std::time::Instant::now();
            let err = parse(&text).unwrap_err();
            let took = started.elapsed();
            assert!(err.reason.contains(why), "{}", err.reason);
            assert!(
                took < std::time::Duration::from_secs(5),
                "{why}: took {took:?}"
            );
        }
    }

    #[test]
    fn brackets_in_quotes_and_comments_and_shallow_nesting_are_fine() {
        let deep_ok = format!("{}x{}", "[".repeat(32), "]".repeat(32));
        let text = format!(
            "---\nname: x\ndescription: \"see [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ here\" # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n\
             tools: [read, grep]\nextra: {deep_ok}\nlist:\n  - - - a\n---\nBody.\n"
        );
        let def = parse(&text).unwrap();
        assert_eq!(def.tools.len(), 2);
    }
}
