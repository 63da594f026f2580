//! The permission requests put to the parent (`permissions: ask`) while the agent waits
//! for their answers.
//!
//! The dialect reads the agent's lines one at a time and must not wait, so each question
//! is a task of its own: when the parent answers (or does not, within the bound), the task
//! writes the agent's answer through its stdin and leaves the decision here; the dialect
//! emits it with the next line it reads (the agent's next line follows the answer). A stop
//! withdraws every open question at once: the agent gets `cancelled` for each, as ACP asks
//! of a client that cancels a prompt, and the parent's request is cancelled too, so that
//! no unanswered question can hold a stop up.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::backends::ask_parent::{Answer, Asker, MAX_PARENT_ANSWER_WAIT_SECS};
use crate::backends::permissions::{DecidedBy, Decision, PermissionRecord};
use crate::backends::ChildInput;

/// Questions one run may have out to the parent at once; a request past it is decided by
/// the policy (a child asking without end must not flood the parent with questions).
pub(super) const MAX_OPEN_QUESTIONS: usize = 8;

/// What became of a request put to [`Asks::ask`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asking {
    Out,
    /// No async runtime to wait on (a dialect driven outside one): decide here.
    NoRuntime,
    /// [`MAX_OPEN_QUESTIONS`] are already out.
    TooMany,
}

/// The options an agent offered with one request: `(kind, optionId)`.
pub(super) type Options = Vec<(String, Value)>;

/// The answer for `decision`: the first option of its kind (once rather than always, so
/// that every later request is decided, and listed, too), else `cancelled`, which rejects.
/// Returns the outcome to send and the decision as it stands after it.
pub(super) fn outcome(
    options: &Options,
    decision: Decision,
    by: DecidedBy,
    reason: Option<String>,
) -> (Value, Decision, DecidedBy, Option<String>) {
    let wanted: &[&str] = match decision {
        Decision::Allowed => &["allow_once", "allow_always"],
        Decision::Rejected => &["reject_once", "reject_always"],
        Decision::Cancelled => &[],
    };
    let option = wanted
        .iter()
        .find_map(|kind| options.iter().find(|(k, _)| k == kind).map(|(_, id)| id));
    match option {
        Some(id) => (
            json!({"outcome": "selected", "optionId": id}),
            decision,
            by,
            reason,
        ),
        None if decision == Decision::Cancelled => {
            (json!({"outcome": "cancelled"}), decision, by, reason)
        }
        // No option says it: `cancelled` is the only answer left, and it rejects.
        None => (
            json!({"outcome": "cancelled"}),
            Decision::Cancelled,
            if by == DecidedBy::Allow {
                DecidedBy::Policy
            } else {
                by
            },
            reason.or_else(|| Some("the agent offered no option of the kind decided".to_string())),
        ),
    }
}

/// A tool call first seen in its permission request (gemini sends no `tool_call` for it),
/// shown once it is allowed.
#[derive(Debug, Clone)]
pub(super) struct Unannounced {
    pub id: String,
    pub name: String,
    pub args: Value,
}

/// A request whose answer is settled, for the dialect to emit.
#[derive(Debug)]
pub(super) struct Settled {
    pub record: PermissionRecord,
    pub warning: Option<String>,
    pub call: Option<Unannounced>,
}

/// A question out to the parent.
struct Open {
    /// The agent's request id, to answer it.
    id: Value,
    options: Options,
    record: PermissionRecord,
    /// What the policy decides when the parent does not answer.
    fallback: (Decision, DecidedBy, Option<String>),
    call: Option<Unannounced>,
    withdraw: CancellationToken,
}

#[derive(Default)]
struct Shared {
    open: Vec<(u64, Open)>,
    settled: Vec<Settled>,
    next: u64,
}

/// The questions of one conversation.
#[derive(Default)]
pub(super) struct Asks {
    shared: Arc<Mutex<Shared>>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// One request, as the dialect read it.
pub(super) struct Request {
    pub id: Value,
    pub options: Options,
    pub record: PermissionRecord,
    pub fallback: (Decision, DecidedBy, Option<String>),
    pub call: Option<Unannounced>,
    pub question: String,
}

impl Asks {
    /// Puts `req` to the parent on the current runtime, unless it cannot be asked now.
    pub(super) fn ask(&self, asker: &Asker, input: &ChildInput, req: Request) -> Asking {
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
                    id: req.id,
                    options: req.options,
                    record: req.record,
                    fallback: req.fallback,
                    call: req.call,
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
    pub(super) fn take_settled(&self) -> Vec<Settled> {
        std::mem::take(&mut lock(&self.shared).settled)
    }

    /// Withdraws every open question (the run stops): each request is answered
    /// `cancelled` through `input` and recorded as decided by the stop.
    pub(super) fn withdraw_all(&self, input: Option<&ChildInput>) {
        let mut s = lock(&self.shared);
        for (_, open) in std::mem::take(&mut s.open) {
            open.withdraw.cancel();
            send_outcome(input, &open.id, json!({"outcome": "cancelled"}));
            s.settled.push(Settled {
                record: PermissionRecord {
                    decision: Decision::Cancelled,
                    by: DecidedBy::Stop,
                    reason: None,
                    ..open.record
                },
                warning: None,
                call: None,
            });
        }
    }
}

/// The conversation is gone: the parent is not left with questions nobody waits for.
impl Drop for Asks {
    fn drop(&mut self) {
        for (_, open) in lock(&self.shared).open.drain(..) {
            open.withdraw.cancel();
        }
    }
}

fn send_outcome(input: Option<&ChildInput>, id: &Value, outcome: Value) {
    let reply = json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": outcome}});
    if let Some(input) = input {
        if let Err(e) = input.send_json(&reply) {
            tracing::debug!("permission answer not written to the ACP agent: {e}");
        }
    }
}

/// The parent's `answer` to question `key`, unless the question was withdrawn meanwhile:
/// the decision is left for the dialect first, then the agent is answered.
fn settle(shared: &Mutex<Shared>, key: u64, answer: Answer, input: &ChildInput) {
    let mut s = lock(shared);
    let Some(at) = s.open.iter().position(|(k, _)| *k == key) else {
        return;
    };
    let (_, open) = s.open.remove(at);
    let (decision, by, reason, warning) = match answer {
        Answer::Allow => (Decision::Allowed, DecidedBy::Parent, None, None),
        Answer::Deny(why) => (
            Decision::Rejected,
            DecidedBy::Parent,
            Some(why.into_owned()),
            None,
        ),
        Answer::Unanswered(why) => {
            let (d, by, reason) = open.fallback;
            let warning = format!(
                "permissions ask: the parent did not answer ({why}); the request for {} was decided by policy",
                open.record.tool
            );
            (d, by, reason, Some(warning))
        }
        // Withdrawn by a stop, which answered the agent itself.
        Answer::Withdrawn => return,
    };
    let (reply, decision, by, reason) = outcome(&open.options, decision, by, reason);
    s.settled.push(Settled {
        record: PermissionRecord {
            decision,
            by,
            reason,
            ..open.record
        },
        warning,
        call: open.call.filter(|_| decision == Decision::Allowed),
    });
    send_outcome(Some(input), &open.id, reply);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::ask_parent::{AnswerFuture, Parent};
    use pretty_assertions::assert_eq;

    /// Answers every question with `answer`, at once or (`None`) only once withdrawn.
    struct Fixed(Option<Answer>);

    impl Parent for Fixed {
        fn ask(&self, _: String, _: Duration, withdraw: CancellationToken) -> AnswerFuture {
            let answer = self.0.clone();
            Box::pin(async move {
                match answer {
                    Some(a) => a,
                    None => {
                        withdraw.cancelled().await;
                        Answer::Withdrawn
                    }
                }
            })
        }
    }

    fn request() -> Request {
        Request {
            id: json!("perm-1"),
            options: vec![
                ("allow_once".into(), json!("yes")),
                ("reject_once".into(), json!("no")),
            ],
            record: PermissionRecord {
                tool: "edit".into(),
                decision: Decision::Cancelled,
                by: DecidedBy::Stop,
                title: Some("write x.txt".into()),
                reason: None,
            },
            fallback: (
                Decision::Rejected,
                DecidedBy::Policy,
                Some("the agent is read-only".into()),
            ),
            call: None,
            question: "Allow it?".into(),
        }
    }

    fn asker(answer: Option<Answer>) -> Asker {
        Asker {
            parent: Arc::new(Fixed(answer)),
            agent: "a".into(),
        }
    }

    async fn settled(asks: &Asks) -> Vec<Settled> {
        for _ in 0..1000 {
            let s = asks.take_settled();
            if !s.is_empty() {
                return s;
            }
            tokio::task::yield_now().await;
        }
        panic!("nothing settled");
    }

    #[tokio::test]
    async fn no_answer_falls_back_to_the_policy_with_a_warning_and_the_agent_is_answered() {
        let (asks, input) = (Asks::default(), ChildInput::new());
        let no_answer = Answer::Unanswered("no answer within 120 s".into());
        assert_eq!(
            asks.ask(&asker(Some(no_answer)), &input, request()),
            Asking::Out
        );
        let s = settled(&asks).await;
        assert_eq!(s.len(), 1);
        assert_eq!(
            s[0].record,
            PermissionRecord {
                tool: "edit".into(),
                decision: Decision::Rejected,
                by: DecidedBy::Policy,
                title: Some("write x.txt".into()),
                reason: Some("the agent is read-only".into()),
            }
        );
        assert_eq!(
            s[0].warning.as_deref(),
            Some("permissions ask: the parent did not answer (no answer within 120 s); the request for edit was decided by policy")
        );
        let reply = br#"{"id":"perm-1","jsonrpc":"2.0","result":{"outcome":{"optionId":"no","outcome":"selected"}}}"#;
        assert_eq!(input.pending(), reply.len() + 1);
    }

    #[tokio::test]
    async fn a_stop_withdraws_the_question_and_a_late_answer_changes_nothing() {
        let (asks, input) = (Asks::default(), ChildInput::new());
        assert_eq!(asks.ask(&asker(None), &input, request()), Asking::Out);
        tokio::task::yield_now().await;
        asks.withdraw_all(Some(&input));
        let cancelled =
            br#"{"id":"perm-1","jsonrpc":"2.0","result":{"outcome":{"outcome":"cancelled"}}}"#;
        let s = asks.take_settled();
        assert_eq!(
            (s.len(), s[0].record.decision, s[0].record.by),
            (1, Decision::Cancelled, DecidedBy::Stop)
        );
        // The task sees the withdrawal and answers nothing more.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(asks.take_settled().is_empty());
        assert_eq!(input.pending(), cancelled.len() + 1);
    }

    #[tokio::test]
    async fn past_the_open_questions_bound_a_request_is_left_to_the_policy() {
        let (asks, input) = (Asks::default(), ChildInput::new());
        for _ in 0..MAX_OPEN_QUESTIONS {
            assert_eq!(asks.ask(&asker(None), &input, request()), Asking::Out);
        }
        assert_eq!(asks.ask(&asker(None), &input, request()), Asking::TooMany);
        asks.withdraw_all(Some(&input));
        assert_eq!(asks.take_settled().len(), MAX_OPEN_QUESTIONS);
        assert_eq!(asks.ask(&asker(None), &input, request()), Asking::Out);
    }
}
