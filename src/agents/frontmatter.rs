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
mod tests;
