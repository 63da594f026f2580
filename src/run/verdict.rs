//! How an attempt ended, decided from what the supervisor saw and what the child said —
//! nothing else. No wording, no processes: the renderer turns a verdict into a result.

use crate::collector::Collector;
use crate::result::{Limit, TimeoutReason};
use crate::runner::EngineError;
use crate::structured::{Mismatch, OutputSchema};
use crate::supervisor::{LeaderExit, Outcome, StopReason, SuperviseError};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// The child gave its final answer.
    Answered,
    /// The program could not be started.
    NotStarted {
        not_found: bool,
        error: String,
    },
    Timeout(TimeoutReason),
    /// A budget was reached and the child stopped there: by orchestrate, or by itself at
    /// a budget it was given. `total`: the budget was its fan-out's, shared by all tasks.
    Budget {
        limit: Limit,
        total: bool,
    },
    /// It only retried or reconnected to its provider, with no progress, and was stopped;
    /// `words` are its own, from its last notice; `retries` in a row without progress.
    Unreachable {
        words: String,
        retries: u32,
    },
    /// Its output passed the hard cap and it was stopped.
    Capped,
    /// A signal to orchestrate, or the MCP client, stopped it.
    Cancelled,
    /// The provider or the CLI reported an error (pi exits 0 on these).
    ProviderError(String),
    /// It exited with a non-zero code and no error of its own.
    Exited(i32),
    /// A signal that orchestrate did not send killed it.
    Signaled(i32),
    /// It ended cleanly but said nothing usable.
    Unanswered,
    /// It answered, but its answer does not match the output schema.
    NotMatchingSchema(Mismatch),
    /// The engine its runner hands it to failed it: refused the job, could not be reached,
    /// or ended it for reasons of its own (a node failure). The message is in the engine's
    /// words.
    Engine(String),
}

impl Verdict {
    pub(super) fn is_success(&self) -> bool {
        *self == Verdict::Answered
    }

    /// The `exitCode` a result reports: the child's own, except where orchestrate decided
    /// (127/126 when it could not start, 124 on a timeout, 0 when it had finished and was
    /// only slow to exit).
    pub(super) fn exit_code(&self, outcome: &Result<Outcome, SuperviseError>) -> i32 {
        match (self, outcome) {
            (
                Verdict::NotStarted {
                    not_found: true, ..
                },
                _,
            ) => 127,
            (Verdict::Engine(_), Err(SuperviseError::Engine(EngineError::NotInstalled(_)))) => 127,
            // An engine's client may exit 0 when the engine failed the child (on a node
            // failure): the run failed all the same.
            (Verdict::Engine(_), Err(_)) => 1,
            (Verdict::Engine(_), Ok(o)) if o.exit.code() == 0 => 1,
            (Verdict::NotStarted { .. }, _) | (_, Err(_)) => 126,
            (Verdict::Timeout(_), _) => 124,
            (_, Ok(o)) if o.stop() == Some(StopReason::AfterTerminalEvent) => 0,
            (_, Ok(o)) => o.exit.code(),
        }
    }
}

pub(crate) fn verdict(outcome: &Result<Outcome, SuperviseError>, collected: &Collector) -> Verdict {
    let o = match outcome {
        Ok(o) => o,
        Err(SuperviseError::Engine(e)) => return Verdict::Engine(e.to_string()),
        Err(e) => {
            return Verdict::NotStarted {
                not_found: e.is_not_found(),
                error: e.to_string(),
            }
        }
    };
    let budget = || {
        collected.limit().map(|limit| Verdict::Budget {
            limit,
            total: collected.limit_is_total(),
        })
    };
    match o.stop() {
        Some(StopReason::RuntimeTimeout) => return Verdict::Timeout(TimeoutReason::Runtime),
        Some(StopReason::IdleTimeout) => return Verdict::Timeout(TimeoutReason::Idle),
        Some(StopReason::ToolTimeout) => return Verdict::Timeout(TimeoutReason::Tool),
        Some(StopReason::QueueTimeout) => return Verdict::Timeout(TimeoutReason::Queue),
        Some(StopReason::OutputCap) => return Verdict::Capped,
        Some(StopReason::Cancelled) => return Verdict::Cancelled,
        Some(StopReason::ProviderUnreachable) => {
            return Verdict::Unreachable {
                words: collected.last_retry().unwrap_or_default().to_string(),
                retries: collected.retries_since_progress(),
            }
        }
        // Stopped for a budget: the collector holds which (a fan-out's total is noted
        // there by the attempt).
        Some(StopReason::Budget) => {
            if let Some(v) = budget() {
                return v;
            }
        }
        Some(StopReason::AfterTerminalEvent) | None => {}
    }
    // What the engine did to a child orchestrate did not stop.
    if let Some(why) = o.settled.failure.as_ref().filter(|_| o.stop().is_none()) {
        return Verdict::Engine(why.clone());
    }
    // A CLI that stopped itself at the budget it was given (claude's cost budget) failed
    // for that reason, whatever error it reports for it.
    if let Some(v) = budget() {
        return v;
    }
    // `exitCode` stays the child's own, but pi exits 0 on a provider error: the error it
    // reported is what says the run failed.
    if let Some(err) = collected.provider_error() {
        return Verdict::ProviderError(err.to_string());
    }
    // A child that said everything and was only slow to exit has succeeded.
    if o.stop().is_none() {
        match o.exit {
            LeaderExit::Exited(0) => {}
            LeaderExit::Exited(code) => return Verdict::Exited(code),
            LeaderExit::Signaled(sig) => return Verdict::Signaled(sig),
        }
    }
    if collected.final_text().is_none_or(|t| t.trim().is_empty()) {
        Verdict::Unanswered
    } else {
        Verdict::Answered
    }
}

/// An answer checked against the output schema, when there is one: the value it holds,
/// or [`Verdict::NotMatchingSchema`]. Any other verdict stands as it is.
pub(crate) fn check_answer(
    verdict: Verdict,
    collected: &Collector,
    schema: Option<&OutputSchema>,
) -> (Verdict, Option<serde_json::Value>) {
    let Some(schema) = schema.filter(|_| verdict.is_success()) else {
        return (verdict, None);
    };
    match schema.check(collected.final_text().unwrap_or_default()) {
        Ok(value) => (Verdict::Answered, Some(value)),
        Err(mismatch) => (Verdict::NotMatchingSchema(mismatch), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::AgentEvent;
    use crate::result::{Leak, Termination};
    use pretty_assertions::assert_eq;
    use std::borrow::Cow;

    fn outcome(exit: LeaderExit, stop: Option<StopReason>) -> Result<Outcome, SuperviseError> {
        let termination = match (stop, exit) {
            (Some(reason), _) => Termination::Terminated { reason },
            (None, LeaderExit::Exited(code)) => Termination::Exited { code },
            (None, LeaderExit::Signaled(signal)) => Termination::Signaled { signal },
        };
        Ok(Outcome {
            exit,
            termination,
            leak: Leak::None,
            containment: crate::platform::Containment::PidNamespace,
            containment_degraded: None,
            sandbox_layers: Default::default(),
            stdout_bytes: 0,
            stderr_tail: String::new(),
            session_write_error: None,
            elapsed: std::time::Duration::from_millis(1),
            queue_wait: std::time::Duration::ZERO,
            settled: Default::default(),
            network_fallback: None,
        })
    }

    fn answered(text: &str) -> Collector {
        let mut c = Collector::new();
        c.apply(AgentEvent::AssistantMessage(Cow::Owned(text.to_string())));
        c
    }

    fn with_error(text: &str, error: &str) -> Collector {
        let mut c = answered(text);
        c.apply(AgentEvent::ProviderError(Cow::Owned(error.to_string())));
        c
    }

    /// Two turns that called tools under a turn budget of 2: the budget is reached.
    fn over_budget() -> Collector {
        let mut c = Collector::new().with_budgets(crate::limits::Budgets {
            max_turns: Some(2),
            ..Default::default()
        });
        for text in ["one", "two"] {
            c.apply(AgentEvent::AssistantMessage(Cow::Borrowed(text)));
            c.apply(AgentEvent::ToolCall {
                name: Cow::Borrowed("read"),
                args: serde_json::Value::Null,
            });
            c.apply(AgentEvent::TurnEnd);
        }
        c
    }

    fn retrying() -> Collector {
        let mut c = Collector::new();
        c.apply(AgentEvent::Retry(Cow::Borrowed(
            "Reconnecting... waiting for network",
        )));
        c
    }

    /// A name, how the child ended, what it said, and the verdict and exit code expected.
    type Case = (
        &'static str,
        Result<Outcome, SuperviseError>,
        Collector,
        Verdict,
        i32,
    );

    #[test]
    fn each_ending_has_its_verdict_and_exit_code() {
        use LeaderExit::{Exited, Signaled};
        let not_found = Err(SuperviseError::Spawn {
            program: "pi".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        let denied = Err(SuperviseError::Spawn {
            program: "pi".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
        let cases: Vec<Case> = vec![
            (
                "answer",
                outcome(Exited(0), None),
                answered("done"),
                Verdict::Answered,
                0,
            ),
            (
                "answer, slow to exit",
                outcome(Signaled(15), Some(StopReason::AfterTerminalEvent)),
                answered("done"),
                Verdict::Answered,
                0,
            ),
            (
                "not found",
                not_found,
                Collector::new(),
                Verdict::NotStarted {
                    not_found: true,
                    error: "failed to start pi: entity not found".into(),
                },
                127,
            ),
            (
                "not executable",
                denied,
                Collector::new(),
                Verdict::NotStarted {
                    not_found: false,
                    error: "failed to start pi: permission denied".into(),
                },
                126,
            ),
            (
                "runtime timeout",
                outcome(Signaled(15), Some(StopReason::RuntimeTimeout)),
                answered("partial"),
                Verdict::Timeout(TimeoutReason::Runtime),
                124,
            ),
            (
                "idle timeout",
                outcome(Signaled(9), Some(StopReason::IdleTimeout)),
                Collector::new(),
                Verdict::Timeout(TimeoutReason::Idle),
                124,
            ),
            (
                "hard cap",
                outcome(Signaled(15), Some(StopReason::OutputCap)),
                answered("x"),
                Verdict::Capped,
                143,
            ),
            (
                "cancelled",
                outcome(Signaled(15), Some(StopReason::Cancelled)),
                answered("x"),
                Verdict::Cancelled,
                143,
            ),
            (
                "provider error, exit 0",
                outcome(Exited(0), None),
                with_error("", "429 rate limited"),
                Verdict::ProviderError("429 rate limited".into()),
                0,
            ),
            (
                "provider error wins over the exit code",
                outcome(Exited(1), None),
                with_error("", "401 bad key"),
                Verdict::ProviderError("401 bad key".into()),
                1,
            ),
            (
                "non-zero exit",
                outcome(Exited(3), None),
                answered("done"),
                Verdict::Exited(3),
                3,
            ),
            (
                "crash",
                outcome(Signaled(11), None),
                answered("partial"),
                Verdict::Signaled(11),
                139,
            ),
            (
                "no answer",
                outcome(Exited(0), None),
                answered("  "),
                Verdict::Unanswered,
                0,
            ),
            (
                "nothing at all",
                outcome(Exited(0), None),
                Collector::new(),
                Verdict::Unanswered,
                0,
            ),
            (
                "tool timeout",
                outcome(Signaled(15), Some(StopReason::ToolTimeout)),
                answered("partial"),
                Verdict::Timeout(TimeoutReason::Tool),
                124,
            ),
            (
                "budget",
                outcome(Signaled(15), Some(StopReason::Budget)),
                over_budget(),
                Verdict::Budget {
                    limit: Limit::Turns { limit: 2, used: 2 },
                    total: false,
                },
                143,
            ),
            (
                "the CLI stopped itself at its budget",
                outcome(Exited(1), None),
                {
                    let mut c = over_budget();
                    c.apply(AgentEvent::ProviderError(Cow::Borrowed("budget")));
                    c
                },
                Verdict::Budget {
                    limit: Limit::Turns { limit: 2, used: 2 },
                    total: false,
                },
                1,
            ),
            (
                "provider unreachable",
                outcome(Signaled(15), Some(StopReason::ProviderUnreachable)),
                retrying(),
                Verdict::Unreachable {
                    words: "Reconnecting... waiting for network".into(),
                    retries: 1,
                },
                143,
            ),
        ];
        for (name, outcome, collected, want, code) in cases {
            let got = verdict(&outcome, &collected);
            assert_eq!((&got, got.exit_code(&outcome)), (&want, code), "{name}");
        }
    }

    #[test]
    fn an_answer_is_checked_against_the_schema_when_there_is_one() {
        let schema = OutputSchema::compile(serde_json::json!({
            "type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}
        }))
        .unwrap();
        assert_eq!(
            check_answer(
                Verdict::Answered,
                &answered("```json\n{\"n\": 1}\n```"),
                Some(&schema)
            ),
            (Verdict::Answered, Some(serde_json::json!({"n": 1})))
        );
        assert_eq!(
            check_answer(
                Verdict::Answered,
                &answered("{\"n\": \"one\"}"),
                Some(&schema)
            ),
            (
                Verdict::NotMatchingSchema(Mismatch::Invalid {
                    path: "$.n".into(),
                    message: "\"one\" is not of type \"integer\"".into()
                }),
                None
            )
        );
        // No schema, or no answer to check: the verdict stands.
        assert_eq!(
            check_answer(Verdict::Answered, &answered("{\"n\": \"one\"}"), None),
            (Verdict::Answered, None)
        );
        assert_eq!(
            check_answer(Verdict::Exited(3), &answered("nope"), Some(&schema)),
            (Verdict::Exited(3), None)
        );
    }

    #[test]
    fn only_an_answer_is_success() {
        assert!(Verdict::Answered.is_success());
        assert!(!Verdict::Unanswered.is_success());
        assert!(!Verdict::Timeout(TimeoutReason::Idle).is_success());
    }
}
