//! The answers to an ACP agent's permission requests: the option it offered for the
//! decision, and how a request put to the parent (`permissions: ask`, see
//! [`crate::backends::ask_parent`]) is answered once settled. A stop withdraws every open
//! question at once: the agent gets `cancelled` for each, as ACP asks of a client that
//! cancels a prompt.

use serde_json::{json, Value};

use crate::backends::ask_parent::{Decided, Reply};
use crate::backends::permissions::{DecidedBy, Decision};
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

/// One request of an ACP agent put to the parent.
#[derive(Debug)]
pub(super) struct AcpReply {
    /// The agent's request id, to answer it.
    pub id: Value,
    pub options: Options,
    /// Shown once allowed.
    pub call: Option<Unannounced>,
}

/// The JSON-RPC reply to request `id` with `outcome`.
pub(super) fn reply_line(id: &Value, outcome: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": outcome}})
}

impl Reply for AcpReply {
    fn answer(&self, (decision, by, reason): Decided) -> (Value, Decided) {
        let (outcome, decision, by, reason) = outcome(&self.options, decision, by, reason);
        (reply_line(&self.id, outcome), (decision, by, reason))
    }

    fn withdrawn(&self) -> Option<Value> {
        Some(reply_line(&self.id, json!({"outcome": "cancelled"})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::ask_parent::{
        Answer, AnswerFuture, Asker, Asking, Asks, Parent, Request, Settled, MAX_OPEN_QUESTIONS,
    };
    use crate::backends::permissions::PermissionRecord;
    use crate::backends::ChildInput;
    use pretty_assertions::assert_eq;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

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

    fn request() -> Request<AcpReply> {
        Request {
            reply: AcpReply {
                id: json!("perm-1"),
                options: vec![
                    ("allow_once".into(), json!("yes")),
                    ("reject_once".into(), json!("no")),
                ],
                call: None,
            },
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
            question: "Allow it?".into(),
        }
    }

    fn asker(answer: Option<Answer>) -> Asker {
        Asker {
            parent: Arc::new(Fixed(answer)),
            agent: "a".into(),
        }
    }

    async fn settled(asks: &Asks<AcpReply>) -> Vec<Settled<AcpReply>> {
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
        let (asks, input) = (Asks::<AcpReply>::default(), ChildInput::new());
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
        let (asks, input) = (Asks::<AcpReply>::default(), ChildInput::new());
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
        let (asks, input) = (Asks::<AcpReply>::default(), ChildInput::new());
        for _ in 0..MAX_OPEN_QUESTIONS {
            assert_eq!(asks.ask(&asker(None), &input, request()), Asking::Out);
        }
        assert_eq!(asks.ask(&asker(None), &input, request()), Asking::TooMany);
        asks.withdraw_all(Some(&input));
        assert_eq!(asks.take_settled().len(), MAX_OPEN_QUESTIONS);
        assert_eq!(asks.ask(&asker(None), &input, request()), Asking::Out);
    }
}
