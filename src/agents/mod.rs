//! Agent definitions: Markdown files with YAML front matter, discovered across scopes.
//!
//! An agent file is `---`, YAML, `---`, then the system prompt as Markdown. The format is
//! deliberately the one Claude Code and pi already use, so their agent folders are read as
//! they are: unknown keys are ignored and the same `name`/`description`/`tools`/`model` keys
//! mean the same thing.
//!
//! - [`frontmatter`]: one file's text to an [`AgentDef`] or an [`AgentProblem`].
//! - [`discovery`]: which folders are searched, in which order, and the resulting [`Catalog`].
//! - [`builtin`]: the five agents embedded in the binary from the repository's `agents/`.

mod builtin;
mod discovery;
mod frontmatter;

use std::path::PathBuf;

use serde_json::json;

use crate::backends::tools::{Permissions, Tool};
use crate::backends::{AgentBrief, Backend, BackendChoice};
use crate::settings::Values;

pub(crate) use discovery::{discover, Catalog, DiscoveryOptions};
#[cfg(test)]
pub(crate) use frontmatter::parse_agent_file;

/// One agent: what the parent asks for by name, and how its child is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentDef {
    pub name: String,
    pub description: String,
    /// In the order written, read into the one tool vocabulary. Empty means the backend's
    /// default set; mapping them to a backend's own tool names is the backend's job.
    pub tools: Vec<Tool>,
    pub readonly: bool,
    /// The settings its file sets (`model:`, `timeout:`, `max_cost:`, `sandbox:`, …): over
    /// the environment's and the config's, under the flags'.
    pub settings: Values,
    /// For the generic `command` backend: the command template (`{task}`,
    /// `{system_prompt_file}`, `{model}` placeholders) and the dialect of its output.
    pub command: Option<String>,
    pub dialect: Option<Backend>,
    /// `false` keeps the agent listed so a run of it can say why it refuses (SUBAGENT_DISABLED).
    pub enabled: bool,
    /// The Markdown body, without the blank lines around it, line endings normalized to `\n`.
    pub system_prompt: String,
    pub source: AgentSource,
}

impl AgentDef {
    /// What a backend needs of this agent to run it.
    pub(crate) fn brief(&self) -> AgentBrief {
        AgentBrief {
            name: self.name.clone(),
            source: self.source.display(),
            tools: self.tools.clone(),
            readonly: self.readonly,
            system_prompt: self.system_prompt.clone(),
            command: self.command.clone(),
            dialect: self.dialect,
            // Its own `acp_command:`; a run puts the config's in where it has none.
            acp_command: self.settings.acp_command.clone(),
        }
    }

    /// What it may do, from its tools and `readonly`.
    pub(crate) fn permissions(&self) -> Permissions {
        Permissions::new(&self.tools, self.readonly)
    }

    /// The shape `orchestrate agents --json` prints for each agent.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        json!({
            "name": self.name,
            "description": self.description,
            "tools": self.tools.iter().map(Tool::name).collect::<Vec<_>>(),
            "model": self.settings.model,
            "backend": self.settings.backend.map(BackendChoice::name),
            "readonly": self.readonly,
            "enabled": self.enabled,
            "source": self.source.display(),
            "scope": self.source.scope(),
        })
    }
}

/// Where a definition was found; serialized lowercase (`"flag"` is `--agents-dir`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Scope {
    Flag,
    Project,
    User,
    Builtin,
}

impl Scope {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scope::Flag => "flag",
            Scope::Project => "project",
            Scope::User => "user",
            Scope::Builtin => "builtin",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AgentSource {
    Builtin,
    File { path: PathBuf, scope: Scope },
}

impl AgentSource {
    /// `"builtin"`, or the file's path (absolute when it came from [`discover`]).
    pub(crate) fn display(&self) -> String {
        match self {
            AgentSource::Builtin => "builtin".to_string(),
            AgentSource::File { path, .. } => path.display().to_string(),
        }
    }

    pub(crate) fn scope(&self) -> Scope {
        match self {
            AgentSource::Builtin => Scope::Builtin,
            AgentSource::File { scope, .. } => *scope,
        }
    }
}

/// A file or folder that could not be turned into an agent. Reported, never fatal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {reason}", .file.display(), .line.map(|l| format!(":{l}")).unwrap_or_default())]
pub(crate) struct AgentProblem {
    pub file: PathBuf,
    /// 1-based line in the file, when one line is to blame.
    pub line: Option<usize>,
    pub reason: String,
}

/// The shape `orchestrate agents --json` prints for each problem.
pub(crate) fn problem_json(p: &AgentProblem) -> serde_json::Value {
    json!({
        "file": p.file.display().to_string(),
        "line": p.line,
        "reason": p.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn sample() -> AgentDef {
        AgentDef {
            name: "explorer".into(),
            description: "Finds things.".into(),
            tools: vec![Tool::Read, Tool::Grep],
            readonly: true,
            settings: Values {
                backend: Some(BackendChoice::Named(Backend::named("pi"))),
                ..Values::default()
            },
            command: None,
            dialect: None,
            enabled: true,
            system_prompt: "You explore.".into(),
            source: AgentSource::File {
                path: PathBuf::from("/p/.claude/agents/explorer.md"),
                scope: Scope::Project,
            },
        }
    }

    #[test]
    fn agent_json_has_the_listed_fields_with_nulls_for_unset_options() {
        assert_eq!(
            sample().to_json(),
            json!({
                "name": "explorer",
                "description": "Finds things.",
                "tools": ["read", "grep"],
                "model": null,
                "backend": "pi",
                "readonly": true,
                "enabled": true,
                "source": "/p/.claude/agents/explorer.md",
                "scope": "project",
            })
        );
        let builtin = AgentDef {
            source: AgentSource::Builtin,
            ..sample()
        };
        let j = builtin.to_json();
        assert_eq!(
            (j["source"].clone(), j["scope"].clone()),
            (json!("builtin"), json!("builtin"))
        );
    }

    #[test]
    fn scopes_serialize_lowercase() {
        let all = [Scope::Flag, Scope::Project, Scope::User, Scope::Builtin];
        let json: Vec<_> = all
            .iter()
            .map(|s| serde_json::to_value(s).unwrap())
            .collect();
        assert_eq!(
            json,
            vec![
                json!("flag"),
                json!("project"),
                json!("user"),
                json!("builtin")
            ]
        );
        assert_eq!(
            all.map(|s| s.to_string()),
            ["flag", "project", "user", "builtin"]
        );
    }

    #[test]
    fn problem_display_and_json() {
        let p = AgentProblem {
            file: PathBuf::from("/a/b.md"),
            line: Some(4),
            reason: "bad".into(),
        };
        assert_eq!(p.to_string(), "/a/b.md:4: bad");
        assert_eq!(
            problem_json(&p),
            json!({"file": "/a/b.md", "line": 4, "reason": "bad"})
        );
        let p = AgentProblem { line: None, ..p };
        assert_eq!(p.to_string(), "/a/b.md: bad");
        assert_eq!(
            problem_json(&p),
            json!({"file": "/a/b.md", "line": null, "reason": "bad"})
        );
    }
}
