//! How a child's permission requests are answered (`permissions: policy | ask | allow |
//! deny`), and the record of each decision that the result carries.
//!
//! An agent CLI that asks before it runs a tool (an ACP agent's `session/request_permission`,
//! claude's `can_use_tool` with streamed input) gets its answer from here, never from a person: `allow` and `deny` answer every request
//! alike; `policy` decides each from the agent's own definition (its tools, `readonly`)
//! and its sandbox, by the rule in [`PermissionPolicy::decide`]; `ask` puts each to the
//! parent where one waits for the run and can be asked ([`super::ask_parent`]), and is
//! `policy` with a warning everywhere else.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ask_parent::Asker;
use super::tools::{Permissions, Tool};
use crate::sandbox::{normalize_lexically, SandboxMode};

pub(crate) use crate::result::{DecidedBy, Decision, PermissionRecord};

/// `permissions:` as an agent file, the config, `--permissions` or MCP names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PermissionMode {
    /// Decided from the agent's tools and sandbox.
    #[default]
    Policy,
    /// Asked of the parent (MCP elicitation); `policy` where it cannot be asked.
    Ask,
    /// Every request allowed.
    Allow,
    /// Every request rejected.
    Deny,
}

impl PermissionMode {
    pub const NAMES: &'static str = "policy, ask, allow, deny";

    pub fn parse(s: &str) -> Result<PermissionMode, String> {
        match s.trim() {
            "policy" => Ok(PermissionMode::Policy),
            "ask" => Ok(PermissionMode::Ask),
            "allow" => Ok(PermissionMode::Allow),
            "deny" => Ok(PermissionMode::Deny),
            other => Err(format!(
                "unknown permissions mode {other:?} (use {})",
                Self::NAMES
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PermissionMode::Policy => "policy",
            PermissionMode::Ask => "ask",
            PermissionMode::Allow => "allow",
            PermissionMode::Deny => "deny",
        }
    }

    /// What the run says when `ask` finds no parent to ask (`why`).
    pub fn unasked_warning(why: &str) -> String {
        format!("permissions ask: {why}; the child's permission requests are decided by policy")
    }
}

impl std::fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One permission request, as the child described the tool call it wants to make.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolRequest {
    /// The tool's own name where the child gives one (`Bash`, `write_file`), else its
    /// kind (`execute`, `edit`), else its title.
    pub name: String,
    /// What kind of operation the child says it is (ACP's `ToolKind`: `read`, `edit`,
    /// `delete`, `move`, `search`, `execute`, `think`, `fetch`, `switch_mode`, `other`).
    /// None only where `name` is the tool's own name: a name taken from a title comes
    /// with `other`, so that a title never decides what a request is.
    pub kind: Option<String>,
    /// The files it touches, as the child gave them.
    pub paths: Vec<PathBuf>,
}

/// What a request is, for the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Read,
    Edit,
    Execute,
    Fetch,
    SwitchMode,
    Other,
}

impl ToolRequest {
    fn action(&self) -> Action {
        match self.kind.as_deref() {
            Some("read" | "search" | "think") => Action::Read,
            Some("edit" | "delete" | "move") => Action::Edit,
            Some("execute") => Action::Execute,
            Some("fetch") => Action::Fetch,
            Some("switch_mode") => Action::SwitchMode,
            // `other` (or a kind unknown here) is the child's word that it is none of the
            // above: a name that reads like one of them does not make it one.
            Some(_) => Action::Other,
            // No kind: the tool's own name may say.
            None => match Tool::parse(&self.name) {
                Tool::Read | Tool::Grep | Tool::Find | Tool::Ls => Action::Read,
                Tool::Edit | Tool::Write => Action::Edit,
                Tool::Bash => Action::Execute,
                Tool::Native(_) => Action::Other,
            },
        }
    }
}

/// Everything the rule reads: the mode, the agent's tools, whether it may write, where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionPolicy {
    pub mode: PermissionMode,
    /// The agent's tools as its file lists them (empty: its CLI's own set).
    pub tools: Vec<Tool>,
    /// The agent cannot write (`readonly: true`, or tools that cannot change anything).
    pub readonly: bool,
    pub sandbox: SandboxMode,
    /// The child's working directory: relative paths in a request are taken from here.
    pub cwd: PathBuf,
    /// Where an edit may land: the working directory (or the run's worktree).
    pub workspace: Vec<PathBuf>,
    /// The parent `ask` puts requests to, where one can be asked.
    pub(crate) parent: Option<Asker>,
}

/// Nothing may be written, and every tool is the CLI's own: what a backend's tests build
/// with.
impl Default for PermissionPolicy {
    fn default() -> Self {
        PermissionPolicy {
            mode: PermissionMode::Policy,
            tools: Vec::new(),
            readonly: true,
            sandbox: SandboxMode::ReadOnly,
            cwd: PathBuf::from("/"),
            workspace: Vec::new(),
            parent: None,
        }
    }
}

impl PermissionPolicy {
    pub(crate) fn new(
        mode: PermissionMode,
        agent: &Permissions,
        sandbox: SandboxMode,
        cwd: &Path,
        workspace: &[PathBuf],
        parent: Option<Asker>,
    ) -> PermissionPolicy {
        PermissionPolicy {
            mode,
            tools: agent.tools.clone(),
            readonly: agent.readonly,
            sandbox,
            cwd: cwd.to_path_buf(),
            workspace: workspace.to_vec(),
            parent: parent.filter(|_| mode == PermissionMode::Ask),
        }
    }

    /// The parent a request goes to before the rule: only under `ask`, where one can be
    /// asked ([`PermissionPolicy::decide`] is then what decides when it does not answer).
    pub(crate) fn parent(&self) -> Option<&Asker> {
        self.parent
            .as_ref()
            .filter(|_| self.mode == PermissionMode::Ask)
    }

    /// Answers `req`: the decision, who made it, and why.
    ///
    /// The rule of `policy`, by what the request is (its kind, else its tool's name):
    /// - reading (`read`, `search`, `think`): allowed (the sandbox bounds what is readable);
    /// - an edit (`edit`, `delete`, `move`): allowed when the agent may write (it is not
    ///   read-only, its sandbox is not `read-only`, and it lists `edit` or `write`, or no
    ///   tools at all) and every path the request names is inside its workspace;
    /// - running a command (`execute`): allowed when the agent lists `bash` (or no tools),
    ///   and, for a read-only agent, only inside a sandbox that keeps it read-only;
    /// - `fetch`: allowed when the agent lists a web tool (a name with `web` or `fetch`) or
    ///   no tools;
    /// - `switch_mode`: rejected (a mode of the CLI's own could lift what is decided here);
    /// - anything else (`other`): allowed when the agent lists that native tool by name,
    ///   or lists no tools and may write; else rejected. A name of orchestrate's own tools
    ///   under `other` is rejected: it may be only a title.
    pub fn decide(&self, req: &ToolRequest) -> (Decision, DecidedBy, Option<String>) {
        match self.mode {
            PermissionMode::Allow => return (Decision::Allowed, DecidedBy::Allow, None),
            PermissionMode::Deny => return (Decision::Rejected, DecidedBy::Deny, None),
            PermissionMode::Policy | PermissionMode::Ask => {}
        }
        let verdict = match req.action() {
            Action::Read => Ok(()),
            Action::Edit => self.may_edit(req),
            Action::Execute => self.may_execute(),
            Action::Fetch => {
                if self.tools.is_empty()
                    || self.tools.iter().any(|t| {
                        let n = t.name().to_ascii_lowercase();
                        n.contains("web") || n.contains("fetch")
                    })
                {
                    Ok(())
                } else {
                    Err("the agent lists no web tool".to_string())
                }
            }
            Action::SwitchMode => Err(
                "orchestrate keeps the agent's mode: a mode of its own could lift these decisions"
                    .to_string(),
            ),
            Action::Other => {
                // A native tool is allowed by its name; orchestrate's own tools by what a
                // request is, above, never by a name that may be only a title.
                let native =
                    |t: &Tool| matches!(t, Tool::Native(n) if n.eq_ignore_ascii_case(&req.name));
                if self.tools.iter().any(native) {
                    Ok(())
                } else if !matches!(Tool::parse(&req.name), Tool::Native(_)) {
                    Err(format!(
                        "{} is an `other` call, not one of the agent's own tools",
                        req.name
                    ))
                } else if self.tools.is_empty() {
                    self.may_write()
                        .map_err(|why| format!("{why}, and {} is not a known tool", req.name))
                } else {
                    Err(format!("{} is not among the agent's tools", req.name))
                }
            }
        };
        match verdict {
            Ok(()) => (Decision::Allowed, DecidedBy::Policy, None),
            Err(why) => (Decision::Rejected, DecidedBy::Policy, Some(why)),
        }
    }

    fn may_write(&self) -> Result<(), String> {
        if self.readonly {
            return Err("the agent is read-only".to_string());
        }
        if self.sandbox == SandboxMode::ReadOnly {
            return Err("its sandbox is read-only".to_string());
        }
        Ok(())
    }

    fn may_edit(&self, req: &ToolRequest) -> Result<(), String> {
        self.may_write()?;
        if !(self.tools.is_empty() || self.tools.iter().any(Tool::writes)) {
            return Err("the agent lists neither edit nor write".to_string());
        }
        for path in &req.paths {
            let path = normalize_lexically(&self.cwd.join(path));
            if !self
                .workspace
                .iter()
                .any(|w| path.starts_with(normalize_lexically(w)))
            {
                return Err(format!("{} is outside the workspace", path.display()));
            }
        }
        Ok(())
    }

    fn may_execute(&self) -> Result<(), String> {
        if !(self.tools.is_empty() || self.tools.contains(&Tool::Bash)) {
            return Err("the agent does not list bash".to_string());
        }
        if self.readonly && self.sandbox == SandboxMode::Off {
            return Err(
                "the agent is read-only and no sandbox keeps a command from writing".to_string(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::permission_counts as counts;
    use pretty_assertions::assert_eq;

    fn policy(tools: &[&str], readonly: bool, sandbox: SandboxMode) -> PermissionPolicy {
        PermissionPolicy {
            mode: PermissionMode::Policy,
            tools: tools.iter().map(|t| Tool::parse(t)).collect(),
            readonly,
            sandbox,
            cwd: PathBuf::from("/work/repo"),
            workspace: vec![PathBuf::from("/work/repo")],
            parent: None,
        }
    }

    fn req(name: &str, kind: Option<&str>, paths: &[&str]) -> ToolRequest {
        ToolRequest {
            name: name.to_string(),
            kind: kind.map(str::to_string),
            paths: paths.iter().map(PathBuf::from).collect(),
        }
    }

    fn decided(p: &PermissionPolicy, r: &ToolRequest) -> (Decision, Option<String>) {
        let (d, by, why) = p.decide(r);
        assert_eq!(by, DecidedBy::Policy);
        (d, why)
    }

    #[test]
    fn an_other_call_is_judged_by_its_own_tool_name_never_by_one_of_orchestrates_tools() {
        let reader = policy(&["read", "bash", "deploy"], true, SandboxMode::ReadOnly);
        // A name from a title, as the ACP client passes it: with the kind `other`.
        for name in ["Read", "read", "bash"] {
            assert_eq!(
                decided(&reader, &req(name, Some("other"), &["/etc/shadow"])),
                (
                    Decision::Rejected,
                    Some(format!(
                        "{name} is an `other` call, not one of the agent's own tools"
                    ))
                )
            );
        }
        // A native tool the agent lists is allowed by name; a tool's own name without a
        // kind says what it is.
        assert_eq!(
            decided(&reader, &req("deploy", Some("other"), &[])),
            (Decision::Allowed, None)
        );
        assert_eq!(
            decided(&reader, &req("Read", None, &["/etc/shadow"])),
            (Decision::Allowed, None)
        );
    }

    #[test]
    fn a_read_only_agents_edit_is_rejected_and_an_implementers_edit_in_its_workspace_allowed() {
        let reader = policy(&["read", "grep", "bash"], true, SandboxMode::ReadOnly);
        let edit = req("Write", Some("edit"), &["src/a.rs"]);
        assert_eq!(
            decided(&reader, &edit),
            (Decision::Rejected, Some("the agent is read-only".into()))
        );
        let implementer = policy(
            &["read", "edit", "write", "bash"],
            false,
            SandboxMode::WorkspaceWrite,
        );
        assert_eq!(decided(&implementer, &edit), (Decision::Allowed, None));
        // Out of the workspace, also through `..`.
        for outside in ["/etc/passwd", "../other/x", "/work/repo/../../root/.bashrc"] {
            let (d, why) = decided(&implementer, &req("Write", Some("edit"), &[outside]));
            assert_eq!(d, Decision::Rejected, "{outside}");
            assert!(why.unwrap().ends_with("is outside the workspace"));
        }
        // A writer boxed in a read-only sandbox, or without a writing tool.
        let boxed = policy(&["edit", "bash"], false, SandboxMode::ReadOnly);
        assert_eq!(
            decided(&boxed, &edit),
            (Decision::Rejected, Some("its sandbox is read-only".into()))
        );
        let shell_only = policy(&["read", "bash"], false, SandboxMode::WorkspaceWrite);
        assert_eq!(
            decided(&shell_only, &edit).0,
            Decision::Rejected,
            "bash alone is no edit tool"
        );
    }

    #[test]
    fn commands_follow_bash_and_reads_are_always_allowed() {
        let reader = policy(&["read", "grep", "bash"], true, SandboxMode::ReadOnly);
        let run = req("execute", Some("execute"), &[]);
        assert_eq!(decided(&reader, &run), (Decision::Allowed, None));
        let unboxed_reader = policy(&["read", "bash"], true, SandboxMode::Off);
        assert_eq!(decided(&unboxed_reader, &run).0, Decision::Rejected);
        let no_bash = policy(&["read", "edit"], false, SandboxMode::WorkspaceWrite);
        assert_eq!(
            decided(&no_bash, &run),
            (
                Decision::Rejected,
                Some("the agent does not list bash".into())
            )
        );
        for kind in ["read", "search", "think"] {
            assert_eq!(
                decided(&no_bash, &req("x", Some(kind), &["/etc/hosts"])).0,
                Decision::Allowed
            );
        }
        // No kind: the name says.
        assert_eq!(
            decided(&no_bash, &req("Bash", None, &[])).0,
            Decision::Rejected
        );
        assert_eq!(
            decided(&no_bash, &req("Edit", None, &["x"])).0,
            Decision::Allowed
        );
    }

    #[test]
    fn unknown_tools_mode_switches_and_fetches() {
        let listed = policy(
            &["read", "mcp__db__query"],
            false,
            SandboxMode::WorkspaceWrite,
        );
        assert_eq!(
            decided(&listed, &req("mcp__db__query", Some("other"), &[])).0,
            Decision::Allowed
        );
        assert_eq!(
            decided(&listed, &req("deploy", Some("other"), &[])),
            (
                Decision::Rejected,
                Some("deploy is not among the agent's tools".into())
            )
        );
        let any = policy(&[], false, SandboxMode::WorkspaceWrite);
        assert_eq!(
            decided(&any, &req("deploy", None, &[])).0,
            Decision::Allowed
        );
        let any_reader = policy(&[], true, SandboxMode::ReadOnly);
        assert_eq!(
            decided(&any_reader, &req("deploy", None, &[])),
            (
                Decision::Rejected,
                Some("the agent is read-only, and deploy is not a known tool".into())
            )
        );
        assert_eq!(
            decided(&any, &req("plan", Some("switch_mode"), &[])).0,
            Decision::Rejected
        );
        assert_eq!(
            decided(&listed, &req("web", Some("fetch"), &[])).0,
            Decision::Rejected
        );
        let web = policy(&["WebFetch"], false, SandboxMode::WorkspaceWrite);
        assert_eq!(
            decided(&web, &req("web", Some("fetch"), &[])).0,
            Decision::Allowed
        );
    }

    #[test]
    fn allow_and_deny_answer_everything_alike_and_ask_without_a_parent_is_policy() {
        let mut p = policy(&["read"], true, SandboxMode::ReadOnly);
        let edit = req("Write", Some("edit"), &["/etc/passwd"]);
        p.mode = PermissionMode::Allow;
        assert_eq!(p.decide(&edit), (Decision::Allowed, DecidedBy::Allow, None));
        p.mode = PermissionMode::Deny;
        let read = req("Read", Some("read"), &[]);
        assert_eq!(p.decide(&read), (Decision::Rejected, DecidedBy::Deny, None));
        p.mode = PermissionMode::Ask;
        assert_eq!(p.decide(&edit).1, DecidedBy::Policy);
        assert_eq!(p.parent(), None);
    }

    #[test]
    fn modes_parse_by_name_and_a_bad_one_is_named() {
        for m in ["policy", "ask", "allow", "deny"] {
            assert_eq!(PermissionMode::parse(m).unwrap().name(), m);
        }
        assert_eq!(
            PermissionMode::parse("yolo"),
            Err("unknown permissions mode \"yolo\" (use policy, ask, allow, deny)".into())
        );
    }

    #[test]
    fn lean_counts() {
        let r = |decision| PermissionRecord {
            tool: "t".into(),
            decision,
            by: DecidedBy::Policy,
            title: None,
            reason: None,
        };
        assert_eq!(
            counts(&[
                r(Decision::Allowed),
                r(Decision::Rejected),
                r(Decision::Allowed)
            ]),
            serde_json::json!({"allowed": 2, "rejected": 1})
        );
    }
}
