//! Observers of runs: the one place where what happens in a run is handed out, as it
//! happens, to whatever records or exports it (the run's `events.jsonl`, traces).
//!
//! An observer sees a run from its start to its result:
//!
//! - [`RunStart`]: who and what (agent, backend, model, task, folders), where it sits in a
//!   tree (the fan-out or chain it is a task of, the run whose child started this
//!   orchestrate, from `ORCHESTRATE_RUN_ID`);
//! - [`RunEvent`]s with their wall-clock times: each attempt of the child (and why there
//!   was another: a retry, a fallback model, a repair turn), every normalized
//!   [`AgentEvent`] the child's dialect produced, a budget reached, orchestrate stopping
//!   the child, each attempt's end, and the run's result;
//! - [`GroupEvent`]s: a fan-out or chain starting and ending, around its tasks' runs.
//!
//! # Adding an observer
//!
//! 1. Implement [`Observe`] (one value for the whole process, `Send + Sync`): its
//!    [`Observe::run`] is asked once per run and returns a [`RunObserver`] for that run,
//!    or `None` to sit it out; [`Observe::group`] hears of fan-outs and chains.
//! 2. Implement [`RunObserver`] for the per-run part: [`RunObserver::on_event`] gets every
//!    event in order, [`RunObserver::child_env`] may add variables to each attempt's child
//!    (a trace context), and [`RunObserver::flush`] is called whenever the child's output
//!    has been read to a pause: the time to write out what is buffered.
//! 3. Add it to [`Hub::standard`] (where the environment asks for it).
//!
//! `on_event` runs on the hot path, once for each event of the child's stream: it must
//! not block (no network, no waiting on locks others hold long) and should stay cheap,
//! handing slow work to a thread of its own. The events are **not sanitized**: the
//! child's text, tool arguments and errors are as the child printed them, and an observer
//! that writes any of it out sanitizes it first ([`crate::sanitize::Sanitizer`]), at text
//! boundaries that never show a secret in part (see `events_file`).
//!
//! With no observer, a run pays one branch per line of the child's output.

pub(crate) mod events_file;
pub(crate) mod line;

pub(crate) mod trace;

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::events::AgentEvent;
use crate::result::RunOutput;
use crate::result::{Limit, Mode};
use crate::supervisor::StopReason;

/// What the observers of every run are: the process-wide half of each observer, shared
/// by every run (and every task of a fan-out). Cheap to clone.
#[derive(Clone)]
pub(crate) struct Hub {
    observers: Arc<[Arc<dyn Observe>]>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hub({} observers)", self.observers.len())
    }
}

impl Default for Hub {
    fn default() -> Self {
        Hub::none()
    }
}

impl Hub {
    /// No observers at all.
    pub(crate) fn none() -> Hub {
        Hub::with(Vec::new())
    }

    /// What every run of this process gets: the run's `events.jsonl`.
    pub(crate) fn standard() -> Hub {
        Hub::standard_within(None)
    }

    /// What every run of a call gets that was handed a trace context of its own (an MCP
    /// request's `_meta`): the run's `events.jsonl`, and its spans when traces are exported
    /// or a context is to be handed on.
    pub(crate) fn standard_within(trace_context: Option<trace::SpanContext>) -> Hub {
        let mut observers: Vec<Arc<dyn Observe>> = vec![Arc::new(events_file::EventsFile)];
        if let Some(tracer) = trace::Tracer::for_call(trace_context) {
            observers.push(Arc::new(tracer));
        }
        Hub::with(observers)
    }

    pub(crate) fn with(observers: Vec<Arc<dyn Observe>>) -> Hub {
        Hub {
            observers: observers.into(),
        }
    }

    /// The observers of one run, each asked whether it wants to watch it.
    pub(crate) fn run(&self, start: &RunStart<'_>) -> Observers {
        Observers {
            list: self.observers.iter().filter_map(|o| o.run(start)).collect(),
        }
    }

    /// Tells every observer of a fan-out or chain starting or ending.
    pub(crate) fn group(&self, event: &GroupEvent<'_>) {
        if self.observers.is_empty() {
            return;
        }
        let at = SystemTime::now();
        for o in self.observers.iter() {
            o.group(at, event);
        }
    }
}

/// The process-wide half of an observer (see the module's documentation).
pub(crate) trait Observe: Send + Sync {
    /// An observer for the run that starts, or `None` to sit it out.
    fn run(&self, start: &RunStart<'_>) -> Option<Box<dyn RunObserver>>;

    /// A fan-out or chain starts (before any of its tasks' runs) or ends (after all of
    /// them).
    fn group(&self, _at: SystemTime, _event: &GroupEvent<'_>) {}
}

/// The per-run half of an observer (see the module's documentation).
pub(crate) trait RunObserver: Send {
    /// One event of the run, in order, with the wall-clock time it happened.
    fn on_event(&mut self, at: SystemTime, event: &RunEvent<'_>);

    /// Variables to add to the environment of attempt `attempt`'s child, before it
    /// starts (after [`RunEvent::Attempt`]).
    fn child_env(&mut self, _attempt: u32, _env: &mut Vec<(OsString, OsString)>) {}

    /// The child's output has been read as far as it went for now.
    fn flush(&mut self) {}
}

/// A run as it starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunStart<'a> {
    pub run_id: &'a str,
    pub agent: &'a str,
    pub backend: &'a str,
    /// The model asked for (each attempt says the one it runs).
    pub model: Option<&'a str>,
    /// As given, not sanitized.
    pub task: &'a str,
    pub cwd: &'a Path,
    pub run_dir: &'a Path,
    /// How deep in a tree of orchestrate runs this one is (0 for a run a person or a
    /// parent agent started).
    pub depth: u32,
    /// The run whose child started this orchestrate (`ORCHESTRATE_RUN_ID`).
    pub parent_run_id: Option<&'a str>,
    /// The fan-out or chain this run is a task of.
    pub group: Option<&'a GroupSlot>,
}

/// A task's place in a fan-out or chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupSlot {
    /// The fan-out's id: the `runId` of its combined result.
    pub id: String,
    pub mode: Mode,
    /// 0-based.
    pub index: usize,
    pub count: usize,
}

/// A fan-out or chain starting or ending. (`events.jsonl` is per run, and each task's
/// names its group: not every observer reads every field.)
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
pub(crate) enum GroupEvent<'a> {
    Started {
        id: &'a str,
        mode: Mode,
        count: usize,
        /// As [`RunStart::parent_run_id`].
        parent_run_id: Option<&'a str>,
    },
    Ended {
        id: &'a str,
        mode: Mode,
        output: &'a RunOutput,
    },
}

/// Why an attempt runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptKind {
    /// The task's first attempt.
    First,
    /// Again after a transient failure.
    Retry,
    /// With the next fallback model, the previous one being unavailable.
    Fallback,
    /// A turn continuing the child's session because the answer did not match the
    /// output schema.
    Repair,
    /// A turn continuing the child's session with messages sent to the run.
    Message,
}

impl AttemptKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AttemptKind::First => "first",
            AttemptKind::Retry => "retry",
            AttemptKind::Fallback => "fallback",
            AttemptKind::Repair => "repair",
            AttemptKind::Message => "message",
        }
    }
}

/// What happens in a run, in order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RunEvent<'a> {
    /// Attempt `n` (1-based, over every model and turn) starts its child.
    Attempt {
        n: u32,
        model: Option<&'a str>,
        kind: AttemptKind,
    },
    /// One normalized event of the child's stream (stdout, or its stderr for the CLIs
    /// that report there).
    Child(&'a AgentEvent<'a>),
    /// A budget was reached: the child is being stopped.
    LimitReached(Limit),
    /// orchestrate stopped the attempt's child, for this reason.
    Stopped(StopReason),
    /// Attempt `n` ended with this output.
    AttemptEnded { n: u32, output: &'a RunOutput },
    /// Attempt `attempt` of `of` failed transiently; another follows after `wait`.
    Retrying {
        attempt: u32,
        of: u32,
        reason: &'a str,
        wait: Duration,
    },
    /// `from` is unavailable; the next attempt runs `to`.
    FallingBack {
        from: Option<&'a str>,
        to: Option<&'a str>,
        reason: &'a str,
    },
    /// The run's result: the last event.
    Ended { output: &'a RunOutput },
}

/// The observers of one run (none, most often, in a library use without any).
#[derive(Default)]
pub(crate) struct Observers {
    list: Vec<Box<dyn RunObserver>>,
}

impl Observers {
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn emit(&mut self, event: &RunEvent<'_>) {
        if self.list.is_empty() {
            return;
        }
        self.emit_at(SystemTime::now(), event);
    }

    /// As [`Observers::emit`], at a time already read (one per line of the child's
    /// output, however many events it holds).
    pub(crate) fn emit_at(&mut self, at: SystemTime, event: &RunEvent<'_>) {
        for o in &mut self.list {
            o.on_event(at, event);
        }
    }

    pub(crate) fn child_env(&mut self, attempt: u32, env: &mut Vec<(OsString, OsString)>) {
        for o in &mut self.list {
            o.child_env(attempt, env);
        }
    }

    pub(crate) fn flush(&mut self) {
        for o in &mut self.list {
            o.flush();
        }
    }
}

#[cfg(test)]
mod tests;
