//! The kinds of value a setting takes, each read the same way from every surface: a flag's
//! or a variable's text, a config file's TOML, an agent file's YAML, an MCP argument's
//! JSON. A kind says what it expects and what it got in the same words everywhere
//! (`expected a whole number of at least 1, got 0`), shows its value as `orchestrate
//! config` prints it, and describes its MCP argument as JSON Schema.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value as Json};
use yaml_serde::Value as Yaml;

use crate::backends::permissions::PermissionMode;
use crate::backends::BackendChoice;
use crate::network::HostPattern;
use crate::result::{Network, SandboxMode};
use crate::runner::{self, RunnerDef};
use crate::structured::{OutputSchema, SchemaSource};
use crate::units::{self, parse_duration, Usd};

/// A value as one surface gives it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Raw<'a> {
    /// A flag's or an environment variable's text.
    Text(&'a str),
    /// A value of a config file.
    Toml(&'a toml::Value),
    /// A value of an agent file's front matter, under `key` (a key that ends in `_ms` or
    /// `Ms` names milliseconds), in the file's folder `dir`.
    Yaml {
        value: &'a Yaml,
        key: &'a str,
        dir: &'a Path,
    },
    /// An MCP tool argument; a duration there is whole milliseconds (`timeoutMs`).
    Json(&'a Json),
}

impl Raw<'_> {
    /// The value as a message shows it: text quoted, numbers as they are, else its type.
    pub(crate) fn got(&self) -> String {
        match self {
            Raw::Text(s) => format!("{s:?}"),
            Raw::Toml(v) => match v {
                toml::Value::String(s) => format!("{s:?}"),
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::Datetime(d) => format!("the date {d}"),
                toml::Value::Array(_) => "a list".to_string(),
                toml::Value::Table(_) => "a table".to_string(),
            },
            Raw::Yaml { value, .. } => describe_yaml(value),
            Raw::Json(v) => match v {
                Json::Null => "null".to_string(),
                Json::Bool(b) => b.to_string(),
                Json::Number(n) => n.to_string(),
                Json::String(s) => format!("{s:?}"),
                Json::Array(_) => "a list".to_string(),
                Json::Object(_) => "an object".to_string(),
            },
        }
    }

    /// Its text, for a kind read from text: a string anywhere, and a YAML number as
    /// written (`model: 4`).
    fn text(&self) -> Option<Cow<'_, str>> {
        match self {
            Raw::Text(s) => Some(Cow::Borrowed(s)),
            Raw::Toml(toml::Value::String(s)) => Some(Cow::Borrowed(s)),
            Raw::Yaml {
                value: Yaml::String(s),
                ..
            } => Some(Cow::Borrowed(s)),
            Raw::Yaml {
                value: Yaml::Number(n),
                ..
            } => Some(Cow::Owned(n.to_string())),
            Raw::Json(Json::String(s)) => Some(Cow::Borrowed(s)),
            _ => None,
        }
    }

    /// A number given as a number (not as text), as a whole number if it is one.
    fn number(&self) -> Option<Number> {
        let whole = |i: Option<i64>, u: Option<u64>, f: Option<f64>| match (i, u) {
            (Some(i), _) => Some(Number::Whole(i.into())),
            (None, Some(u)) => Some(Number::Whole(u.into())),
            (None, None) => f.map(Number::Fraction),
        };
        match self {
            Raw::Toml(toml::Value::Integer(n)) => Some(Number::Whole((*n).into())),
            Raw::Toml(toml::Value::Float(f)) => Some(Number::Fraction(*f)),
            Raw::Yaml {
                value: Yaml::Number(n),
                ..
            } => whole(n.as_i64(), n.as_u64(), n.as_f64()),
            Raw::Json(Json::Number(n)) => whole(n.as_i64(), n.as_u64(), n.as_f64()),
            _ => None,
        }
    }

    fn boolean(&self) -> Option<bool> {
        match self {
            Raw::Toml(toml::Value::Boolean(b)) => Some(*b),
            Raw::Yaml {
                value: Yaml::Bool(b),
                ..
            } => Some(*b),
            Raw::Json(Json::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    /// An agent file's empty value (`model:` or `model: ""`), which means "not set" to
    /// every tool that writes these files.
    pub(crate) fn is_unset(&self) -> bool {
        matches!(self, Raw::Yaml { value, .. } if value.is_null() || value.as_str().is_some_and(|s| s.trim().is_empty()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Number {
    Whole(i128),
    Fraction(f64),
}

pub(crate) fn describe_yaml(v: &Yaml) -> String {
    match v {
        Yaml::Null => "nothing".to_string(),
        Yaml::Bool(b) => b.to_string(),
        Yaml::Number(n) => n.to_string(),
        Yaml::String(s) => format!("{s:?}"),
        Yaml::Sequence(_) => "a list".to_string(),
        Yaml::Mapping(_) => "a mapping".to_string(),
        Yaml::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

/// `expected <what>, got <the value>`.
pub(crate) fn expected(what: &str, raw: Raw<'_>) -> String {
    format!("expected {what}, got {}", raw.got())
}

/// One kind of value.
pub(crate) trait Kind<T>: Sync {
    /// Reads a value from any surface.
    fn read(&self, raw: Raw<'_>) -> Result<T, String>;

    /// The value as `orchestrate config` prints it (and a config file takes it back).
    fn show(&self, value: &T) -> Json;

    /// The JSON Schema of its MCP argument, without a description.
    fn schema(&self) -> Json {
        json!({"type": "string"})
    }

    /// The names it takes, when they are few (for completion and `--help`).
    fn names(&self) -> Option<Vec<String>> {
        None
    }

    /// Whether a flag's value may start with `-` (a negative number, refused with its
    /// reason rather than taken for another flag).
    fn numeric(&self) -> bool {
        false
    }

    /// A value set in a higher config layer over one in a lower: it replaces it.
    fn over(&self, _lower: &T, upper: T) -> T {
        upper
    }
}

/// A duration: text with units (`90s`); a config file's `0`; in an agent file, a number
/// under a key that names milliseconds (`timeout_ms: 5000`); as an MCP argument (`…Ms`),
/// whole milliseconds.
pub(crate) struct Dur {
    /// Zero is refused: a zero limit would stop the child at once.
    pub positive: bool,
}

impl Kind<Duration> for Dur {
    fn read(&self, raw: Raw<'_>) -> Result<Duration, String> {
        let d = match raw {
            Raw::Json(v) => v
                .as_u64()
                .map(Duration::from_millis)
                .ok_or_else(|| expected("a whole number of milliseconds", raw))?,
            Raw::Yaml { key, .. } if key.ends_with("_ms") || key.ends_with("Ms") => {
                match (raw.number(), raw.text()) {
                    (Some(Number::Whole(ms)), _) => u64::try_from(ms)
                        .map(Duration::from_millis)
                        .map_err(|_| expected("a whole number of milliseconds", raw))?,
                    (None, Some(text)) => match units::parse_whole(&text) {
                        Some(ms) => u64::try_from(ms)
                            .map(Duration::from_millis)
                            .map_err(|_| expected("a whole number of milliseconds", raw))?,
                        None => parse_duration(&text).map_err(|e| e.to_string())?,
                    },
                    _ => return Err(expected("a whole number of milliseconds", raw)),
                }
            }
            _ => match (raw.number(), raw.text()) {
                (Some(Number::Whole(0)), _) => Duration::ZERO,
                (Some(Number::Whole(n)), _) if n < 0 => {
                    return Err(format!("must not be negative (got {n})"))
                }
                (Some(Number::Whole(n)), _) => {
                    return Err(format!(
                        "invalid duration {n}: {}",
                        units::unit_hint(&n.to_string())
                    ))
                }
                (Some(Number::Fraction(f)), _) if f.is_finite() && f > 0.0 => {
                    return Err(format!(
                        "invalid duration {f}: {}",
                        units::unit_hint(&f.to_string())
                    ))
                }
                (None, Some(text)) => parse_duration(&text).map_err(|e| e.to_string())?,
                _ => {
                    return Err(expected(
                        &format!("a duration ({})", units::DURATION_EXAMPLES),
                        raw,
                    ))
                }
            },
        };
        if self.positive && d.is_zero() {
            return Err("must be greater than zero (leave it out for the default)".to_string());
        }
        Ok(d)
    }

    fn show(&self, value: &Duration) -> Json {
        json!(units::format_duration(*value))
    }

    fn schema(&self) -> Json {
        json!({"type": "integer", "minimum": u64::from(self.positive)})
    }

    fn numeric(&self) -> bool {
        true
    }
}

/// A whole number within a range: turns, tokens, bytes, tasks.
pub(crate) struct Count {
    pub min: u64,
    pub max: u64,
}

impl Count {
    pub(crate) const POSITIVE: Count = Count {
        min: 1,
        max: u64::MAX,
    };

    fn what(&self) -> String {
        if self.max == u64::MAX {
            format!("a whole number of at least {}", self.min)
        } else {
            format!("a whole number from {} to {}", self.min, self.max)
        }
    }

    fn read_u64(&self, raw: Raw<'_>) -> Result<u64, String> {
        let n = match (raw.number(), raw.text()) {
            (Some(Number::Whole(n)), _) => Some(n),
            (Some(Number::Fraction(_)), _) => None,
            (None, Some(text)) if !matches!(raw, Raw::Json(_)) => units::parse_whole(&text),
            _ => None,
        };
        n.filter(|n| (i128::from(self.min)..=i128::from(self.max)).contains(n))
            .map(|n| n as u64)
            .ok_or_else(|| expected(&self.what(), raw))
    }
}

/// The integer types a count is kept in.
pub(crate) trait Whole: Copy + Send + Sync + 'static {
    fn from_u64(n: u64) -> Self;
    fn to_u64(self) -> u64;
}

impl Whole for u64 {
    fn from_u64(n: u64) -> Self {
        n
    }
    fn to_u64(self) -> u64 {
        self
    }
}

impl Whole for u32 {
    fn from_u64(n: u64) -> Self {
        u32::try_from(n).unwrap_or(u32::MAX)
    }
    fn to_u64(self) -> u64 {
        self.into()
    }
}

impl Whole for usize {
    fn from_u64(n: u64) -> Self {
        usize::try_from(n).unwrap_or(usize::MAX)
    }
    fn to_u64(self) -> u64 {
        self as u64
    }
}

impl<T: Whole> Kind<T> for Count {
    fn read(&self, raw: Raw<'_>) -> Result<T, String> {
        self.read_u64(raw).map(T::from_u64)
    }

    fn show(&self, value: &T) -> Json {
        json!(value.to_u64())
    }

    fn schema(&self) -> Json {
        json!({"type": "integer", "minimum": self.min})
    }

    fn numeric(&self) -> bool {
        true
    }
}

/// An amount of US dollars: a number, or text such as `0.50` or `$0.50`.
pub(crate) struct Dollars;

impl Kind<Usd> for Dollars {
    fn read(&self, raw: Raw<'_>) -> Result<Usd, String> {
        let usd = match (raw.number(), raw.text()) {
            (Some(Number::Whole(n)), _) => Usd::new(n as f64),
            (Some(Number::Fraction(f)), _) => Usd::new(f),
            (None, Some(text)) => Usd::parse(&text),
            _ => None,
        };
        usd.ok_or_else(|| expected(units::USD_EXPECTED, raw))
    }

    fn show(&self, value: &Usd) -> Json {
        json!(value.dollars())
    }

    fn schema(&self) -> Json {
        json!({"type": "number"})
    }

    fn numeric(&self) -> bool {
        true
    }
}

/// Text that must not be empty: a model's name, a runner's.
pub(crate) struct Text;

impl Kind<String> for Text {
    fn read(&self, raw: Raw<'_>) -> Result<String, String> {
        let text = raw.text().ok_or_else(|| expected("text", raw))?;
        match text.trim() {
            "" => Err("must not be empty".to_string()),
            t => Ok(t.to_string()),
        }
    }

    fn show(&self, value: &String) -> Json {
        json!(value)
    }
}

/// Model names: a list, or a comma-separated string of them.
pub(crate) struct Names;

/// A list of strings from a config file's array, or a comma-separated string from any
/// surface; items are trimmed and empty ones dropped. `what` names the expected shape in
/// the error.
fn text_list(raw: Raw<'_>, what: &str) -> Result<Vec<String>, String> {
    fn strings<'v, V: 'v>(
        items: impl IntoIterator<Item = &'v V>,
        as_str: impl Fn(&'v V) -> Option<&'v str>,
    ) -> Option<Vec<String>> {
        items
            .into_iter()
            .map(|v| as_str(v).map(str::to_string))
            .collect()
    }
    let texts: Vec<String> = match raw {
        Raw::Toml(toml::Value::Array(items)) => {
            strings(items, toml::Value::as_str).ok_or_else(|| expected(what, raw))?
        }
        Raw::Yaml {
            value: Yaml::Sequence(items),
            ..
        } => strings(items, Yaml::as_str).ok_or_else(|| expected(what, raw))?,
        Raw::Json(Json::Array(items)) => {
            strings(items, Json::as_str).ok_or_else(|| expected(what, raw))?
        }
        _ => match raw.text() {
            Some(text) => text.split(',').map(str::to_string).collect(),
            None => return Err(expected(what, raw)),
        },
    };
    Ok(texts
        .into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect())
}

impl Kind<Vec<String>> for Names {
    fn read(&self, raw: Raw<'_>) -> Result<Vec<String>, String> {
        text_list(
            raw,
            "a list of model names, or a comma-separated string of them",
        )
    }

    fn show(&self, value: &Vec<String>) -> Json {
        json!(value)
    }

    fn schema(&self) -> Json {
        json!({"type": "array", "items": {"type": "string"}})
    }
}

/// A child CLI: `auto`, or a backend's name or alias.
pub(crate) struct Backend;

impl Kind<BackendChoice> for Backend {
    fn read(&self, raw: Raw<'_>) -> Result<BackendChoice, String> {
        let text = raw.text().ok_or_else(|| expected("text", raw))?;
        BackendChoice::parse(&text).map_err(|e| e.to_string())
    }

    fn show(&self, value: &BackendChoice) -> Json {
        json!(value.name())
    }

    fn names(&self) -> Option<Vec<String>> {
        let names = crate::backends::Backend::all().map(crate::backends::Backend::name);
        Some(
            std::iter::once("auto")
                .chain(names)
                .map(String::from)
                .collect(),
        )
    }
}

/// A sandbox mode, or `auto` (`None`): read-only for an agent that cannot write,
/// workspace-write for the others.
pub(crate) struct Sandbox;

impl Kind<Option<SandboxMode>> for Sandbox {
    fn read(&self, raw: Raw<'_>) -> Result<Option<SandboxMode>, String> {
        let text = raw.text().ok_or_else(|| expected("text", raw))?;
        match text.trim() {
            "auto" => Ok(None),
            other => SandboxMode::parse(other).map(Some),
        }
    }

    fn show(&self, value: &Option<SandboxMode>) -> Json {
        json!(value.map_or("auto", SandboxMode::name))
    }

    fn schema(&self) -> Json {
        json!({"type": "string", "enum": enum_names::<SandboxMode>()})
    }

    // `auto`, the default, is taken but not offered.
    fn names(&self) -> Option<Vec<String>> {
        Some(enum_names::<SandboxMode>())
    }
}

/// The child's network: `on`, `off` or `provider` (a boolean is `on` or `off`), or `auto`
/// (`None`): provider for an agent that cannot write, on for the others.
pub(crate) struct NetworkKind;

impl Kind<Option<Network>> for NetworkKind {
    fn read(&self, raw: Raw<'_>) -> Result<Option<Network>, String> {
        if let Some(b) = raw.boolean() {
            return Ok(Some(if b { Network::On } else { Network::Off }));
        }
        let text = raw
            .text()
            .ok_or_else(|| expected(&format!("{} or auto", Network::NAMES), raw))?;
        match text.trim() {
            "auto" => Ok(None),
            other => Network::parse(other).map(Some),
        }
    }

    fn show(&self, value: &Option<Network>) -> Json {
        json!(value.map_or("auto", Network::name))
    }

    fn schema(&self) -> Json {
        json!({"type": "string", "enum": enum_names::<Network>()})
    }

    // `auto`, the default, is taken but not offered.
    fn names(&self) -> Option<Vec<String>> {
        Some(enum_names::<Network>())
    }
}

/// How a child's permission requests are answered: `policy`, `ask`, `allow` or `deny`.
pub(crate) struct Permissions;

impl Kind<PermissionMode> for Permissions {
    fn read(&self, raw: Raw<'_>) -> Result<PermissionMode, String> {
        let text = raw
            .text()
            .ok_or_else(|| expected(PermissionMode::NAMES, raw))?;
        PermissionMode::parse(&text)
    }

    fn show(&self, value: &PermissionMode) -> Json {
        json!(value.name())
    }

    fn schema(&self) -> Json {
        json!({"type": "string", "enum": enum_names::<PermissionMode>()})
    }

    fn names(&self) -> Option<Vec<String>> {
        Some(enum_names::<PermissionMode>())
    }
}

/// Hosts a `network: provider` child may reach: a list, or a comma-separated string, of
/// names (`pypi.org`), `*.domain` for every name under one, or IP addresses. Each layer
/// adds to the ones below it (an agent's own hosts are not lost to a flag's).
pub(crate) struct Hosts;

impl Kind<Vec<HostPattern>> for Hosts {
    fn read(&self, raw: Raw<'_>) -> Result<Vec<HostPattern>, String> {
        text_list(
            raw,
            "a list of host names, or a comma-separated string of them",
        )?
        .iter()
        .map(|h| HostPattern::parse(h))
        .collect()
    }

    fn show(&self, value: &Vec<HostPattern>) -> Json {
        json!(value.iter().map(ToString::to_string).collect::<Vec<_>>())
    }

    fn schema(&self) -> Json {
        json!({"type": "array", "items": {"type": "string"}})
    }

    fn over(&self, lower: &Vec<HostPattern>, upper: Vec<HostPattern>) -> Vec<HostPattern> {
        let mut all = lower.clone();
        for host in upper {
            if !all.contains(&host) {
                all.push(host);
            }
        }
        all
    }
}

/// A switch: `true`/`false`, and in text also 1/0, yes/no, on/off.
pub(crate) struct Switch;

impl Kind<bool> for Switch {
    fn read(&self, raw: Raw<'_>) -> Result<bool, String> {
        if let Some(b) = raw.boolean() {
            return Ok(b);
        }
        let text = match (raw.number(), raw) {
            (Some(Number::Whole(n @ (0 | 1))), Raw::Yaml { .. }) => return Ok(n == 1),
            (_, Raw::Text(_) | Raw::Yaml { .. }) => raw.text(),
            _ => None,
        };
        match text.map(|t| t.trim().to_ascii_lowercase()).as_deref() {
            Some("1" | "true" | "yes" | "on") => Ok(true),
            Some("0" | "false" | "no" | "off") => Ok(false),
            _ => Err(expected("true or false", raw)),
        }
    }

    fn show(&self, value: &bool) -> Json {
        json!(value)
    }

    fn schema(&self) -> Json {
        json!({"type": "boolean"})
    }
}

/// Where the child works: `worktree` (true: a git worktree of its own) or `none`.
pub(crate) struct Isolation;

impl Kind<bool> for Isolation {
    fn read(&self, raw: Raw<'_>) -> Result<bool, String> {
        let text = raw
            .text()
            .ok_or_else(|| expected("worktree or none", raw))?;
        match text.trim() {
            "worktree" => Ok(true),
            "none" => Ok(false),
            other => Err(format!(
                "unknown isolation {other:?} (use worktree or none)"
            )),
        }
    }

    fn show(&self, value: &bool) -> Json {
        json!(if *value { "worktree" } else { "none" })
    }

    fn schema(&self) -> Json {
        json!({"type": "string", "enum": ["worktree", "none"]})
    }

    fn names(&self) -> Option<Vec<String>> {
        Some(vec!["worktree".into(), "none".into()])
    }
}

/// Named runners: a config file's `[runners.NAME]` tables, each with `kind` and `args`. A
/// project file's entry replaces the user file's of the same name.
pub(crate) struct Runners;

impl Kind<BTreeMap<String, RunnerDef>> for Runners {
    fn read(&self, raw: Raw<'_>) -> Result<BTreeMap<String, RunnerDef>, String> {
        match raw {
            Raw::Toml(value) => runner::parse_table(value),
            _ => Err(
                "named runners are set in a config file ([runners.NAME] with kind and args), not in the environment"
                    .to_string(),
            ),
        }
    }

    fn show(&self, value: &BTreeMap<String, RunnerDef>) -> Json {
        value
            .iter()
            .map(|(name, def)| {
                (
                    name.clone(),
                    json!({"kind": def.kind.name(), "args": def.args}),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    fn over(
        &self,
        lower: &BTreeMap<String, RunnerDef>,
        upper: BTreeMap<String, RunnerDef>,
    ) -> BTreeMap<String, RunnerDef> {
        let mut all = lower.clone();
        all.extend(upper);
        all
    }
}

/// The JSON Schema an answer must match: a file (a flag's path, relative to the current
/// directory; an agent file's, relative to its folder), or the schema itself (an agent
/// file's YAML mapping, checked as it is read; an MCP argument's object).
pub(crate) struct Schema;

impl Kind<SchemaSource> for Schema {
    fn read(&self, raw: Raw<'_>) -> Result<SchemaSource, String> {
        const WHAT: &str = "a JSON Schema (a YAML mapping) or the path of a JSON Schema file";
        match raw {
            Raw::Text(path) => {
                let path = PathBuf::from(path);
                Ok(SchemaSource::File(
                    std::path::absolute(&path).unwrap_or(path),
                ))
            }
            Raw::Json(Json::Object(schema)) => {
                Ok(SchemaSource::Inline(Json::Object(schema.clone())))
            }
            // A schema sent as a string of JSON is named as such, not quoted whole.
            Raw::Json(Json::String(_)) => {
                Err("expected a JSON Schema (an object), got a string".to_string())
            }
            Raw::Json(_) => Err(expected("a JSON Schema (an object)", raw)),
            Raw::Yaml {
                value: value @ Yaml::Mapping(_),
                ..
            } => {
                let json = serde_json::to_value(value).map_err(|e| format!("not JSON: {e}"))?;
                OutputSchema::compile(json.clone()).map_err(|e| e.to_string())?;
                Ok(SchemaSource::Inline(json))
            }
            Raw::Yaml {
                value: Yaml::String(s),
                dir,
                ..
            } if !s.trim().is_empty() => Ok(SchemaSource::File(dir.join(s.trim()))),
            _ => Err(expected(WHAT, raw)),
        }
    }

    fn show(&self, value: &SchemaSource) -> Json {
        match value {
            SchemaSource::File(path) => json!(path.display().to_string()),
            SchemaSource::Inline(schema) => schema.clone(),
        }
    }

    fn schema(&self) -> Json {
        json!({"type": "object"})
    }
}

/// The names a serde enum is written with, from its JSON schema (the names MCP's tool
/// schema offers too): a new variant is offered without a change here.
fn enum_names<T: schemars::JsonSchema>() -> Vec<String> {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    let alternatives = schema["oneOf"]
        .as_array()
        .into_iter()
        .chain(schema["anyOf"].as_array())
        .flatten();
    schema["enum"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(alternatives.flat_map(|alt| {
            std::iter::once(&alt["const"]).chain(alt["enum"].as_array().into_iter().flatten())
        }))
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn yaml(text: &str) -> Yaml {
        yaml_serde::from_str(text).unwrap()
    }

    fn from_yaml<T>(kind: &dyn Kind<T>, key: &str, text: &str) -> Result<T, String> {
        kind.read(Raw::Yaml {
            value: &yaml(text),
            key,
            dir: Path::new("/agents"),
        })
    }

    #[test]
    fn a_duration_reads_the_same_from_every_surface_that_takes_text() {
        let d = Dur { positive: true };
        let want = Ok(Duration::from_secs(90));
        assert_eq!(d.read(Raw::Text("90s")), want);
        assert_eq!(d.read(Raw::Toml(&toml::Value::String("90s".into()))), want);
        assert_eq!(from_yaml(&d, "timeout", "90s"), want);
        assert_eq!(d.read(Raw::Json(&json!(90_000))), want);
        let hint = "a number needs a unit: did you mean 5s? (units: ms, s, m, h, d)";
        for got in [
            d.read(Raw::Text("5")),
            d.read(Raw::Toml(&toml::Value::String("5".into()))),
            d.read(Raw::Toml(&toml::Value::Integer(5))),
            from_yaml(&d, "timeout", "5"),
            from_yaml(&d, "timeout", "\"5\""),
        ] {
            let e = got.unwrap_err();
            assert!(e.ends_with(hint), "{e}");
        }
        // A key that names milliseconds takes them.
        assert_eq!(
            from_yaml(&d, "timeout_ms", "5000"),
            Ok(Duration::from_secs(5))
        );
        assert_eq!(
            from_yaml(&d, "idleTimeoutMs", "\"30s\""),
            Ok(Duration::from_secs(30))
        );
        assert_eq!(
            d.read(Raw::Json(&json!("soon"))),
            Err("expected a whole number of milliseconds, got \"soon\"".to_string())
        );
        assert_eq!(
            d.read(Raw::Text("0")),
            Err("must be greater than zero (leave it out for the default)".to_string())
        );
        assert_eq!(
            Dur { positive: false }.read(Raw::Toml(&toml::Value::Integer(0))),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            Dur { positive: false }.read(Raw::Toml(&toml::Value::Integer(-5))),
            Err("must not be negative (got -5)".to_string())
        );
    }

    #[test]
    fn enum_names_are_what_the_parsers_take() {
        assert_eq!(
            enum_names::<SandboxMode>(),
            ["read-only", "workspace-write", "off"]
        );
        assert_eq!(enum_names::<Network>(), ["on", "off", "provider"]);
        for name in enum_names::<SandboxMode>() {
            assert_eq!(
                Sandbox
                    .read(Raw::Text(&name))
                    .map(|m| m.map(SandboxMode::name)),
                Ok(Some(name.as_str()))
            );
        }
        for name in enum_names::<Network>() {
            assert_eq!(
                NetworkKind
                    .read(Raw::Text(&name))
                    .map(|m| m.map(Network::name)),
                Ok(Some(name.as_str()))
            );
        }
    }

    #[test]
    fn counts_dollars_and_names_say_what_they_expected_and_what_they_got() {
        let count = |raw| Kind::<u64>::read(&Count::POSITIVE, raw);
        assert_eq!(count(Raw::Text("200_000")), Ok(200_000));
        assert_eq!(
            from_yaml::<u64>(&Count::POSITIVE, "max_tokens", "200_000"),
            Ok(200_000)
        );
        assert_eq!(
            count(Raw::Text("0")),
            Err("expected a whole number of at least 1, got \"0\"".to_string())
        );
        assert_eq!(
            count(Raw::Json(&json!("3"))),
            Err("expected a whole number of at least 1, got \"3\"".to_string())
        );
        assert_eq!(
            Kind::<usize>::read(
                &Count { min: 1, max: 64 },
                Raw::Toml(&toml::Value::Integer(65))
            ),
            Err("expected a whole number from 1 to 64, got 65".to_string())
        );
        assert_eq!(
            from_yaml::<u64>(&Count::POSITIVE, "max_turns", "2.5"),
            Err("expected a whole number of at least 1, got 2.5".to_string())
        );
        assert_eq!(Dollars.read(Raw::Text("$0.25")).map(Usd::dollars), Ok(0.25));
        assert_eq!(
            Dollars.read(Raw::Json(&json!(-1))),
            Err(
                "expected an amount of US dollars greater than 0, such as 0.50, got -1".to_string()
            )
        );
        assert_eq!(
            Names.read(Raw::Text("a, b,")),
            Ok(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(
            from_yaml(&Names, "fallback_models", "{a: 1}"),
            Err("expected a list of model names, or a comma-separated string of them, got a mapping".to_string())
        );
        assert_eq!(
            Text.read(Raw::Toml(&toml::Value::Integer(3))),
            Err("expected text, got 3".to_string())
        );
    }
}
