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
//!
//! A dialect reads the child's lines one at a time and must not wait, so each question is
//! a task of its own ([`Asks`]): when the parent answers (or does not, within the bound),
//! the task writes the child's answer through its stdin, in the child's protocol
//! ([`Reply`]), and leaves the decision for the dialect to emit with the next line it
//! reads. A stop withdraws every open question at once: the child is answered, and the
//! parent's request is cancelled too, so that no unanswered question can hold a stop up.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::permissions::{DecidedBy, Decision, PermissionRecord};
use super::ChildInput;

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

/// Questions one run may have out to the parent at once; a request past it is decided by
/// the policy (a child asking without end must not flood the parent with questions).
pub(crate) const MAX_OPEN_QUESTIONS: usize = 8;

/// A decision: what, by whom, and why.
pub(crate) type Decided = (Decision, DecidedBy, Option<String>);

/// How one request is answered in its child's protocol.
pub(crate) trait Reply: Send + 'static {
    /// The line that answers the child with `decided`, and the decision as it stands after
    /// it (a protocol may have no way to say it: an ACP agent that offered no option of
    /// that kind is answered `cancelled`).
    fn answer(&self, decided: Decided) -> (Value, Decided);
    /// The line that answers the child when a stop withdraws the question, if any.
    fn withdrawn(&self) -> Option<Value>;
}

/// What became of a request put to [`Asks::ask`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asking {
    Out,
    /// No async runtime to wait on (a dialect driven outside one): decide here.
    NoRuntime,
    /// [`MAX_OPEN_QUESTIONS`] are already out.
    TooMany,
}

/// One request, as the dialect read it.
pub(crate) struct Request<R> {
    /// How the child is answered, and whatever else the dialect needs back once settled.
    pub reply: R,
    pub record: PermissionRecord,
    /// What the policy decides when the parent does not answer.
    pub fallback: Decided,
    pub question: String,
}

/// A request whose answer is settled (and written), for the dialect to emit.
#[derive(Debug)]
pub(crate) struct Settled<R> {
    pub record: PermissionRecord,
    pub warning: Option<String>,
    pub reply: R,
}

/// A question out to the parent.
struct Open<R> {
    reply: R,
    record: PermissionRecord,
    fallback: Decided,
    withdraw: CancellationToken,
}

struct Shared<R> {
    open: Vec<(u64, Open<R>)>,
    settled: Vec<Settled<R>>,
    next: u64,
}

/// What the conversation and the tasks waiting for the parent's answers share.
struct Inner<R> {
    state: Mutex<Shared<R>>,
    /// Set once `settled` has an entry: the dialect looks for settled decisions after
    /// every line of the child's, and takes the lock only when there are some.
    has_settled: AtomicBool,
}

/// The questions of one conversation out to its parent.
pub(crate) struct Asks<R> {
    shared: Arc<Inner<R>>,
}

impl<R> Default for Asks<R> {
    fn default() -> Self {
        Asks {
            shared: Arc::new(Inner {
                state: Mutex::new(Shared {
                    open: Vec::new(),
                    settled: Vec::new(),
                    next: 0,
                }),
                has_settled: AtomicBool::new(false),
            }),
        }
    }
}

fn lock<R>(shared: &Inner<R>) -> MutexGuard<'_, Shared<R>> {
    shared.state.lock().unwrap_or_else(|p| p.into_inner())
}

fn send(input: &ChildInput, line: &Value) {
    if let Err(e) = input.send_json(line) {
        tracing::debug!("permission answer not written to the child: {e}");
    }
}

impl<R: Reply> Asks<R> {
    /// Puts `req` to the parent on the current runtime, unless it cannot be asked now.
    pub(crate) fn ask(&self, asker: &Asker, input: &ChildInput, req: Request<R>) -> Asking {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Asking::NoRuntime;
        };
        let withdraw = CancellationToken::new();
        let key = {
            let mut s = lock(&self.shared);
            if s.open.len() >= MAX_OPEN_QUESTIONS {
                return Asking::TooMany;
            }
            let key = s.next;
            s.next += 1;
            s.open.push((
                key,
                Open {
                    reply: req.reply,
                    record: req.record,
                    fallback: req.fallback,
                    withdraw: withdraw.clone(),
                },
            ));
            key
        };
        let (shared, input, parent) = (self.shared.clone(), input.clone(), asker.parent.clone());
        let wait = Duration::from_secs(MAX_PARENT_ANSWER_WAIT_SECS);
        runtime.spawn(async move {
            let answer = parent.ask(req.question, wait, withdraw).await;
            settle(&shared, key, answer, &input);
        });
        Asking::Out
    }

    /// The decisions settled since the last call.
    pub(crate) fn take_settled(&self) -> Vec<Settled<R>> {
        // A decision settled after the flag was read is taken by the next call.
        if !self.shared.has_settled.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut lock(&self.shared).settled)
    }

    /// Withdraws every open question (the run stops): each request is answered as its
    /// protocol answers a withdrawn one, through `input`, and recorded as cancelled by the
    /// stop.
    pub(crate) fn withdraw_all(&self, input: Option<&ChildInput>) {
        self.withdraw_where(|_| true, input);
    }

    /// Withdraws the open questions whose request `which` picks (the child took it back
    /// itself, or the run stops), as [`Asks::withdraw_all`].
    pub(crate) fn withdraw_where(&self, which: impl Fn(&R) -> bool, input: Option<&ChildInput>) {
        let mut s = lock(&self.shared);
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut s.open)
            .into_iter()
            .partition(|(_, open)| which(&open.reply));
        s.open = kept;
        for (_, open) in gone {
            open.withdraw.cancel();
            if let (Some(input), Some(line)) = (input, open.reply.withdrawn()) {
                send(input, &line);
            }
            s.settled.push(Settled {
                record: PermissionRecord {
                    decision: Decision::Cancelled,
                    by: DecidedBy::Stop,
                    reason: None,
                    ..open.record
                },
                warning: None,
                reply: open.reply,
            });
            self.shared.has_settled.store(true, Ordering::Release);
        }
    }
}

/// The conversation is gone: the parent is not left with questions nobody waits for.
impl<R> Drop for Asks<R> {
    fn drop(&mut self) {
        for (_, open) in lock(&self.shared).open.drain(..) {
            open.withdraw.cancel();
        }
    }
}

/// The parent's `answer` to question `key`, unless the question was withdrawn meanwhile:
/// the decision is left for the dialect first, then the child is answered.
fn settle<R: Reply>(shared: &Inner<R>, key: u64, answer: Answer, input: &ChildInput) {
    let mut s = lock(shared);
    let Some(at) = s.open.iter().position(|(k, _)| *k == key) else {
        return;
    };
    let (_, open) = s.open.remove(at);
    let (decided, warning) = match answer {
        Answer::Allow => ((Decision::Allowed, DecidedBy::Parent, None), None),
        Answer::Deny(why) => (
            (
                Decision::Rejected,
                DecidedBy::Parent,
                Some(why.into_owned()),
            ),
            None,
        ),
        Answer::Unanswered(why) => {
            let warning = format!(
                "permissions ask: the parent did not answer ({why}); the request for {} was decided by policy",
                open.record.tool
            );
            (open.fallback, Some(warning))
        }
        // Withdrawn by a stop, which answered the child itself.
        Answer::Withdrawn => return,
    };
    let (line, (decision, by, reason)) = open.reply.answer(decided);
    s.settled.push(Settled {
        record: PermissionRecord {
            decision,
            by,
            reason,
            ..open.record
        },
        warning,
        reply: open.reply,
    });
    shared.has_settled.store(true, Ordering::Release);
    send(input, &line);
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
