//! `permissions: ask`: a child's permission request put to the parent that started the
//! run, and the answer it gives.
//!
//! A parent can be asked only while it waits for the run: a foreground `subagent` call of
//! `orchestrate mcp` whose client declared MCP elicitation (`crate::mcp` asks it with
//! `elicitation/create`). Everywhere else ([`ParentAsk::Unreachable`]) `ask` is decided by
//! the policy, and the run's warning says why no parent was asked.
//!
//! The question is short and safe to show: the agent, what kind of call, and what it
//! touches (the command, the files, else the child's title), with secrets masked and home
//! directories as `~`, at most [`MAX_QUESTION_BYTES`] bytes.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How long a parent may take to answer one request before the policy decides it. A
/// person may be the one answering, so it is generous; the run's own timeouts still end
/// the run sooner when they come first.
pub(crate) const MAX_PARENT_ANSWER_WAIT_SECS: u64 = 120;

/// The question shown to the parent is cut to this many bytes (on a UTF-8 boundary).
pub(crate) const MAX_QUESTION_BYTES: usize = 1024;

/// Why `ask` cannot reach a parent when nothing else is known: a command-line run, or a
/// background one (its `subagent` call answered at once).
pub(crate) const NO_PARENT: &str = "no parent is waiting for this run to ask (only a foreground subagent call of orchestrate mcp, whose client supports MCP elicitation, can be asked)";

/// The parent's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Allow,
    /// Denied, declined or cancelled by the parent: why, in its words.
    Deny(Cow<'static, str>),
    /// No answer came (the bound passed, the client failed or is gone): why.
    Unanswered(String),
    /// The run is being stopped: the question was withdrawn.
    Withdrawn,
}

pub(crate) type AnswerFuture = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// Someone a permission request can be put to.
pub(crate) trait Parent: Send + Sync {
    /// Asks `message`; waits at most `wait`, and withdraws the question (telling the
    /// parent) once `withdraw` is cancelled.
    fn ask(&self, message: String, wait: Duration, withdraw: CancellationToken) -> AnswerFuture;
}

/// Whether a run's permission requests can go to its parent.
#[derive(Clone)]
pub(crate) enum ParentAsk {
    Reachable(Arc<dyn Parent>),
    /// Why not.
    Unreachable(Cow<'static, str>),
}

impl Default for ParentAsk {
    fn default() -> Self {
        ParentAsk::Unreachable(Cow::Borrowed(NO_PARENT))
    }
}

impl std::fmt::Debug for ParentAsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParentAsk::Reachable(_) => f.write_str("Reachable"),
            ParentAsk::Unreachable(why) => f.debug_tuple("Unreachable").field(why).finish(),
        }
    }
}

/// The parent one run asks, with the run's agent (named in each question).
#[derive(Clone)]
pub(crate) struct Asker {
    pub parent: Arc<dyn Parent>,
    pub agent: String,
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker").field("agent", &self.agent).finish()
    }
}

/// The same parent asked for the same agent.
impl PartialEq for Asker {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.parent, &other.parent) && self.agent == other.agent
    }
}

impl Eq for Asker {}

/// What a request wants, as the child described it, for the question.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Question<'a> {
    pub agent: &'a str,
    /// The tool's name (or kind) as the policy sees it.
    pub tool: &'a str,
    pub kind: Option<&'a str>,
    /// The command it runs, where the child gave one.
    pub command: Option<&'a str>,
    pub paths: Vec<String>,
    pub title: Option<&'a str>,
}

impl Question<'_> {
    /// One line for the parent: `Subagent implementer asks to run a command (execute):
    /// touch x.txt. Allow it?`, sanitized and bounded.
    pub(crate) fn message(&self) -> String {
        let action = match self.kind {
            Some("edit") => "edit files",
            Some("delete") => "delete files",
            Some("move") => "move files",
            Some("execute") => "run a command",
            Some("fetch") => "fetch from the network",
            Some("read" | "search") => "read files",
            Some("switch_mode") => "switch its mode",
            _ => "use a tool",
        };
        let what = match (self.command, self.paths.is_empty(), self.title) {
            (Some(cmd), _, _) => cmd.to_string(),
            (None, false, _) => self.paths.join(", "),
            (None, true, Some(title)) => title.to_string(),
            (None, true, None) => String::new(),
        };
        let mut text = format!("Subagent {} asks to {action} ({})", self.agent, self.tool);
        if !what.is_empty() {
            text.push_str(": ");
            text.push_str(&what);
        }
        // One line: a newline in a command could make the rest look like orchestrate's.
        let text: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let clean = crate::sanitize::Sanitizer::global().sanitize(&text);
        const ASK: &str = ". Allow it?";
        let room = MAX_QUESTION_BYTES - ASK.len();
        let mut out = if clean.len() > room {
            let cut = crate::collector::cut_utf8(&clean, room - "…".len());
            format!("{cut}…")
        } else {
            clean.into_owned()
        };
        out.push_str(ASK);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_question_names_the_agent_the_call_and_what_it_touches() {
        let q = Question {
            agent: "implementer",
            tool: "execute",
            kind: Some("execute"),
            command: Some("touch x.txt"),
            paths: vec!["ignored".into()],
            title: Some("ignored"),
        };
        assert_eq!(
            q.message(),
            "Subagent implementer asks to run a command (execute): touch x.txt. Allow it?"
        );
        let q = Question {
            agent: "a",
            tool: "edit",
            kind: Some("edit"),
            paths: vec!["src/a.rs".into(), "src/b.rs".into()],
            ..Question::default()
        };
        assert_eq!(
            q.message(),
            "Subagent a asks to edit files (edit): src/a.rs, src/b.rs. Allow it?"
        );
        let q = Question {
            agent: "a",
            tool: "deploy",
            kind: Some("other"),
            title: Some("Deploy now"),
            ..Question::default()
        };
        assert_eq!(
            q.message(),
            "Subagent a asks to use a tool (deploy): Deploy now. Allow it?"
        );
    }

    #[test]
    fn secrets_are_masked_lines_joined_and_the_question_bounded() {
        let key = format!("sk-ant-api03-{}", "a1B2c3D4e5F6g7H8".repeat(6));
        let command = format!("curl -H 'x-api-key: {key}' https://x\nrm -rf /");
        let q = Question {
            agent: "a",
            tool: "execute",
            kind: Some("execute"),
            command: Some(&command),
            ..Question::default()
        };
        let m = q.message();
        assert!(!m.contains(&key), "{m}");
        assert!(m.contains(crate::sanitize::MASK), "{m}");
        assert!(!m.contains('\n'), "{m}");
        let long = "é".repeat(4 * MAX_QUESTION_BYTES);
        let q = Question {
            command: Some(&long),
            ..q
        };
        let m = q.message();
        assert!(m.len() <= MAX_QUESTION_BYTES, "{}", m.len());
        assert!(m.ends_with("é…. Allow it?"), "{m}");
    }
}
