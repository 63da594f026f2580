//! How the child process ended and what became of its descendants, as the result reports
//! them: internally tagged by `kind`.
//!
//! ```json
//! {"kind": "exited", "code": 0}
//! {"kind": "signaled", "signal": 11}
//! {"kind": "terminated", "reason": "idleTimeout"}
//! {"kind": "killed", "reason": "runtimeTimeout", "kill": "escalated"}
//! {"kind": "heldPipes"}
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why orchestrate stopped the child (the first reason wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    RuntimeTimeout,
    IdleTimeout,
    /// The child's total output passed the hard cap.
    OutputCap,
    /// A signal to orchestrate or a cancel from the MCP client.
    Cancelled,
    /// The dialect's final event arrived and the child did not exit within the grace.
    /// The run still counts as finished.
    AfterTerminalEvent,
    /// A budget (turns, tokens, cost) was reached and the child went on.
    Budget,
    /// One tool call ran longer than the tool limit with no tool finishing.
    ToolTimeout,
    /// The child only retried or reconnected to its provider, for the connect limit or
    /// too many times in a row.
    ProviderUnreachable,
    /// Its job waited in the cluster engine's queue for the queue timeout without starting.
    QueueTimeout,
}

/// How orchestrate's SIGKILL to the child's group came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum KillKind {
    /// SIGTERM went first and the grace ran out.
    Escalated,
    /// Without waiting out a grace: the grace is zero, or a second cancel cut it short.
    Immediate,
    /// The child had already exited on its own (its code is the result's `exitCode`);
    /// what was left of its group was killed.
    Leftovers,
}

/// How the child process ended: the program orchestrate started, not its descendants
/// (see `Leak` for those).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Termination {
    /// It exited on its own; orchestrate had not signalled it.
    Exited { code: i32 },
    /// A signal orchestrate did not send ended it: a crash, the OOM killer, someone's
    /// `kill`.
    Signaled { signal: i32 },
    /// Orchestrate's SIGTERM to its group stopped it within the grace.
    Terminated { reason: StopReason },
    /// Orchestrate SIGKILLed its group.
    Killed { reason: StopReason, kill: KillKind },
}

impl Termination {
    /// Why orchestrate stopped the child, if it did.
    pub fn stop_reason(self) -> Option<StopReason> {
        match self {
            Termination::Exited { .. } | Termination::Signaled { .. } => None,
            Termination::Terminated { reason } | Termination::Killed { reason, .. } => Some(reason),
        }
    }
}

/// Descendants of the child that outlived it. Each kind but `none` means orchestrate found
/// them and SIGKILLed them with the group, except `abandoned`, where the kill did not
/// reach whatever held the pipes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Leak {
    #[default]
    None,
    /// After the child exited, descendants kept its stdout or stderr open until
    /// orchestrate killed them.
    HeldPipes,
    /// After the child exited, descendants that had closed the pipes were still in its
    /// process group and were killed with it. Best effort: one that dies and is reaped
    /// between that kill and the look is not seen.
    StayedInGroup,
    /// The pipes stayed open even after SIGKILL to the group: something that left the
    /// group (`setsid`) holds them and may still be running. Orchestrate stopped reading.
    /// (Only where the tree is held by a process group alone: the portable watchdog.)
    Abandoned,
    /// After the child exited, descendants that had closed the pipes were still alive
    /// somewhere in its tree (its PID namespace, or adopted by its subreaper), whatever
    /// session or group they had moved to, and were killed with the tree.
    Outlived,
}

impl Leak {
    pub fn is_none(&self) -> bool {
        *self == Leak::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn terminations_and_leaks_serialize_to_their_documented_shapes() {
        let terminations = [
            Termination::Exited { code: 0 },
            Termination::Signaled { signal: 11 },
            Termination::Terminated {
                reason: StopReason::IdleTimeout,
            },
            Termination::Killed {
                reason: StopReason::RuntimeTimeout,
                kill: KillKind::Escalated,
            },
            Termination::Killed {
                reason: StopReason::Cancelled,
                kill: KillKind::Immediate,
            },
            Termination::Killed {
                reason: StopReason::OutputCap,
                kill: KillKind::Leftovers,
            },
            Termination::Terminated {
                reason: StopReason::AfterTerminalEvent,
            },
            Termination::Terminated {
                reason: StopReason::Budget,
            },
            Termination::Killed {
                reason: StopReason::ToolTimeout,
                kill: KillKind::Escalated,
            },
            Termination::Terminated {
                reason: StopReason::ProviderUnreachable,
            },
        ];
        assert_eq!(
            serde_json::to_value(terminations).unwrap(),
            json!([
                {"kind": "exited", "code": 0},
                {"kind": "signaled", "signal": 11},
                {"kind": "terminated", "reason": "idleTimeout"},
                {"kind": "killed", "reason": "runtimeTimeout", "kill": "escalated"},
                {"kind": "killed", "reason": "cancelled", "kill": "immediate"},
                {"kind": "killed", "reason": "outputCap", "kill": "leftovers"},
                {"kind": "terminated", "reason": "afterTerminalEvent"},
                {"kind": "terminated", "reason": "budget"},
                {"kind": "killed", "reason": "toolTimeout", "kill": "escalated"},
                {"kind": "terminated", "reason": "providerUnreachable"},
            ])
        );
        let leaks = [
            Leak::None,
            Leak::HeldPipes,
            Leak::StayedInGroup,
            Leak::Abandoned,
            Leak::Outlived,
        ];
        assert_eq!(
            serde_json::to_value(leaks).unwrap(),
            json!([
                {"kind": "none"},
                {"kind": "heldPipes"},
                {"kind": "stayedInGroup"},
                {"kind": "abandoned"},
                {"kind": "outlived"},
            ])
        );
        // And back, as `wait` and `show` read them from result.json.
        for t in terminations {
            let back: Termination =
                serde_json::from_value(serde_json::to_value(t).unwrap()).unwrap();
            assert_eq!(back, t);
        }
        for l in leaks {
            let back: Leak = serde_json::from_value(serde_json::to_value(l).unwrap()).unwrap();
            assert_eq!(back, l);
        }
    }

    #[test]
    fn the_stop_reason_is_the_terminations() {
        assert_eq!(Termination::Exited { code: 1 }.stop_reason(), None);
        assert_eq!(Termination::Signaled { signal: 9 }.stop_reason(), None);
        assert_eq!(
            Termination::Terminated {
                reason: StopReason::Cancelled
            }
            .stop_reason(),
            Some(StopReason::Cancelled)
        );
        assert_eq!(
            Termination::Killed {
                reason: StopReason::OutputCap,
                kill: KillKind::Leftovers
            }
            .stop_reason(),
            Some(StopReason::OutputCap)
        );
    }
}
