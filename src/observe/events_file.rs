//! `events.jsonl` in the run folder: the run's events as they happen (the lines of
//! [`super::line`]), the same for every CLI, for `orchestrate show --events`, `--follow`
//! and `orchestrate watch`.
//!
//! - **Sanitized**, by the sanitizer the result uses, and only ever whole: streamed text
//!   is held until its line ends (or its message, or a tool call, ends it), as the
//!   streaming updates do, so that a secret written across several deltas is never seen
//!   in part. Tool arguments, errors and the task are sanitized too.
//! - **Coalesced**: a line of text per event at most as often as the child's output is
//!   read (the deltas of one read go out together), not one per delta.
//! - **Bounded**: at most [`MAX_EVENTS_FILE_BYTES`]. Past [`MAX_EVENTS_FILE_BYTES`] less
//!   [`END_RESERVE_BYTES`], a `cut` line says so and only what ends the run is written:
//!   attempts, retries, budgets, stops and the `end` line with the count of the events
//!   left out. After the cut, the child's events cost next to nothing.
//!
//! Written by orchestrate alone (the child never gets the run folder to write), buffered,
//! and flushed whenever the child's output has been read as far as it went.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use super::line::{EndInfo, Event, GroupInfo, RunInfo, Supervisor, EVENTS_FILE};
use super::{Observe, RunEvent, RunObserver, RunStart};
use crate::background::SupervisorRecord;
use crate::collector::{cut_utf8, unescape_in_pieces};
use crate::events::{AgentEvent, TextKind};
use crate::result::RunOutput;
use crate::result::{exit_status, Usage};
use crate::sanitize::Sanitizer;
use crate::session::RunDir;

/// The most an events file holds, in bytes.
pub(crate) const MAX_EVENTS_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Bytes kept for what ends a run once the file is cut.
pub(crate) const END_RESERVE_BYTES: u64 = 64 * 1024;
/// Bytes of one line of the child's text held until it ends; past this the line's head
/// is written with the count of the bytes left out.
const MAX_LINE_TEXT_BYTES: usize = 64 * 1024;
/// Bytes kept of an error or retry message.
const MAX_MESSAGE_BYTES: usize = 2 * 1024;
/// Bytes kept of a string inside a tool call's arguments.
const MAX_ARG_STRING_BYTES: usize = 1024;
/// Tool arguments longer than this as JSON are replaced by their size.
const MAX_ARGS_JSON_BYTES: usize = 16 * 1024;
/// Tools tracked from start to end (for their names and durations); older ones are
/// forgotten.
const MAX_TOOLS_TRACKED: usize = 64;
/// The buffer in front of the file.
const BUFFER_BYTES: usize = 64 * 1024;

/// Writes every run's `events.jsonl`.
pub(crate) struct EventsFile;

impl Observe for EventsFile {
    fn run(&self, start: &RunStart<'_>) -> Option<Box<dyn RunObserver>> {
        let dir = RunDir {
            path: start.run_dir.to_path_buf(),
        };
        let file = match dir.create_file(EVENTS_FILE) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!("the run's events are not recorded: {e}");
                return None;
            }
        };
        let mut writer = Writer::new(file);
        writer.write(SystemTime::now(), &run_line(start), Weight::Critical);
        writer.flush_file();
        Some(Box::new(writer))
    }
}

fn run_line(start: &RunStart<'_>) -> Event {
    let pid = std::process::id();
    Event::Run(Box::new(RunInfo {
        run_id: start.run_id.to_string(),
        agent: start.agent.to_string(),
        backend: start.backend.to_string(),
        model: start.model.map(str::to_string),
        task: crate::session::index_task(start.task),
        cwd: start.cwd.to_string_lossy().into_owned(),
        depth: start.depth,
        parent_run_id: start.parent_run_id.map(str::to_string),
        group: start.group.map(|g| GroupInfo {
            id: g.id.clone(),
            mode: g.mode,
            index: g.index,
            count: g.count,
        }),
        supervisor: Supervisor {
            process: SupervisorRecord {
                pid,
                start_time: crate::platform::process_start_time(pid),
                started_at_ms: crate::session::now_unix_ms(),
            },
            pid_ns: pid_namespace(),
            stop_signal: STOP_SIGNAL.get().map(|s| s.to_string()),
        },
    }))
}

/// The signal on which this process takes stop requests for one of its runs, once it
/// listens for one; its runs' first lines say so.
static STOP_SIGNAL: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Says in every later run's first line that this process stops one run on `signal`
/// (see `live::stop`).
pub(crate) fn announce_stop_signal(signal: &'static str) {
    let _ = STOP_SIGNAL.set(signal);
}

/// This process's PID namespace, where there are any.
pub(crate) fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// An [`super::line::EventLine`] to write, without a copy of its event.
#[derive(serde::Serialize)]
struct LineRef<'e> {
    at: u64,
    #[serde(flatten)]
    event: &'e Event,
}

/// How much a line matters once the file is full.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Weight {
    /// Left out once the file is cut.
    Ordinary,
    /// What ends a run: written until the file is full.
    Critical,
}

struct Writer {
    out: Option<BufWriter<File>>,
    written: u64,
    cut: bool,
    dropped: u64,
    line: Vec<u8>,
    text: PendingText,
    /// Deltas arrived since the current message began: its complete text is not written
    /// again.
    deltas_in_message: bool,
    usage: Usage,
    cli_total: Option<Usage>,
    turns: u64,
    /// Tool calls not yet started, oldest first: a start takes its name from them.
    called: VecDeque<String>,
    /// Tools started and not ended: id, name, start.
    running: VecDeque<(Option<String>, Option<String>, SystemTime)>,
    /// A provider error was written and no success yet.
    provider_error: bool,
    session_id: Option<String>,
}

impl Writer {
    fn new(file: File) -> Writer {
        Writer {
            out: Some(BufWriter::with_capacity(BUFFER_BYTES, file)),
            written: 0,
            cut: false,
            dropped: 0,
            line: Vec::with_capacity(1024),
            text: PendingText::default(),
            deltas_in_message: false,
            usage: Usage::default(),
            cli_total: None,
            turns: 0,
            called: VecDeque::new(),
            running: VecDeque::new(),
            provider_error: false,
            session_id: None,
        }
    }

    /// Writes one line, unless the file is past its limit for lines of this weight.
    fn write(&mut self, at: SystemTime, event: &Event, weight: Weight) {
        if self.out.is_none() {
            return;
        }
        if weight == Weight::Ordinary && self.cut {
            self.dropped += 1;
            return;
        }
        let line = LineRef {
            at: unix_ms(at),
            event,
        };
        self.line.clear();
        if serde_json::to_writer(&mut self.line, &line).is_err() {
            return;
        }
        self.line.push(b'\n');
        let len = self.line.len() as u64;
        let room = match weight {
            Weight::Ordinary => MAX_EVENTS_FILE_BYTES - END_RESERVE_BYTES,
            Weight::Critical => MAX_EVENTS_FILE_BYTES,
        };
        if self.written + len > room {
            self.dropped += 1;
            if weight == Weight::Ordinary {
                self.cut = true;
                let cut = Event::Cut {
                    limit_bytes: MAX_EVENTS_FILE_BYTES,
                };
                self.write(at, &cut, Weight::Critical);
            }
            return;
        }
        let out = self.out.as_mut().expect("checked above");
        if let Err(e) = out.write_all(&self.line) {
            self.fail(&e);
            return;
        }
        self.written += len;
    }

    fn flush_file(&mut self) {
        if let Some(out) = self.out.as_mut() {
            if let Err(e) = out.flush() {
                self.fail(&e);
            }
        }
    }

    /// A write failed (a full disk): the rest of the run's events are not recorded.
    fn fail(&mut self, e: &std::io::Error) {
        tracing::warn!("writing the run's {EVENTS_FILE} failed, its events stop here: {e}");
        self.out = None;
    }

    /// Writes the complete lines of the text held, or all of it when `whole` (its
    /// message ended).
    fn write_text(&mut self, at: SystemTime, whole: bool) {
        if let Some(text) = self.text.take(whole) {
            let text = Sanitizer::global().sanitize(&text).into_owned();
            self.write(at, &Event::Text { text }, Weight::Ordinary);
        }
    }

    fn push_text(&mut self, at: SystemTime, text: &str) {
        if self.cut {
            self.dropped += 1;
            return;
        }
        let mut rest = text;
        while !rest.is_empty() && !self.cut {
            rest = self.text.push(rest);
            if !rest.is_empty() {
                // No room but complete lines: they go now, and make room.
                self.write_text(at, false);
            }
        }
    }

    fn child(&mut self, at: SystemTime, event: &AgentEvent<'_>) {
        match event {
            AgentEvent::MessageStart => {
                self.write_text(at, true);
                self.deltas_in_message = false;
            }
            AgentEvent::TextDelta(t) => {
                self.deltas_in_message = true;
                self.push_text(at, t);
            }
            AgentEvent::AssistantMessage(t) => {
                if !self.deltas_in_message {
                    self.push_text(at, t);
                }
                self.write_text(at, true);
                self.deltas_in_message = false;
            }
            AgentEvent::StreamedMessageEnd => {
                self.write_text(at, true);
                self.deltas_in_message = false;
            }
            AgentEvent::LongText {
                parts,
                separator,
                kind,
            } => {
                let streamed = self.deltas_in_message;
                if *kind == TextKind::Delta {
                    self.deltas_in_message = true;
                }
                if *kind == TextKind::Final || (*kind == TextKind::Message && streamed) {
                    self.write_text(at, true);
                    return;
                }
                for (i, raw) in parts.iter().enumerate() {
                    if i > 0 {
                        self.push_text(at, separator);
                    }
                    if self.cut {
                        break;
                    }
                    unescape_in_pieces(raw.get(), &mut |piece| self.push_text(at, piece));
                }
                if *kind == TextKind::Message {
                    self.write_text(at, true);
                    self.deltas_in_message = false;
                }
            }
            AgentEvent::FinalText(_) => self.write_text(at, true),
            AgentEvent::ToolCall { name, args } => {
                self.write_text(at, true);
                if self.called.len() == MAX_TOOLS_TRACKED {
                    self.called.pop_front();
                }
                self.called.push_back(name.to_string());
                if self.cut {
                    self.dropped += 1;
                    return;
                }
                let args = tool_args(args);
                let call = Event::ToolCall {
                    name: name.to_string(),
                    args,
                };
                self.write(at, &call, Weight::Ordinary);
            }
            AgentEvent::ToolStart { id } => {
                if self.running.len() == MAX_TOOLS_TRACKED {
                    self.running.pop_front();
                }
                let id = id
                    .as_deref()
                    .map(|id| cut_utf8(id, MAX_MESSAGE_BYTES).to_string());
                self.running.push_back((id, self.called.pop_front(), at));
            }
            AgentEvent::ToolEnd { id } => {
                let at_index = match id {
                    Some(id) => self
                        .running
                        .iter()
                        .position(|(t, _, _)| t.as_deref() == Some(id.as_ref())),
                    None => (!self.running.is_empty()).then_some(0),
                };
                let started = at_index.and_then(|i| self.running.remove(i));
                let (name, duration_ms) = match started {
                    Some((_, name, since)) => (
                        name,
                        at.duration_since(since).ok().map(|d| d.as_millis() as u64),
                    ),
                    None => (None, None),
                };
                let end = Event::ToolEnd {
                    id: id
                        .as_deref()
                        .map(|id| cut_utf8(id, MAX_MESSAGE_BYTES).to_string()),
                    name,
                    duration_ms,
                };
                self.write(at, &end, Weight::Ordinary);
            }
            AgentEvent::Usage(u) => {
                self.usage.add(u);
                let usage = Event::Usage {
                    usage: Some(*u),
                    total: self.total(),
                };
                self.write(at, &usage, Weight::Ordinary);
            }
            AgentEvent::UsageTotal(u) => {
                self.cli_total = Some(*u);
                let usage = Event::Usage {
                    usage: None,
                    total: self.total(),
                };
                self.write(at, &usage, Weight::Ordinary);
            }
            AgentEvent::TurnEnd => {
                self.write_text(at, true);
                self.turns += 1;
                let turn = Event::TurnEnd { turn: self.turns };
                self.write(at, &turn, Weight::Ordinary);
            }
            AgentEvent::Retry(words) => {
                let message = message(words);
                self.write(at, &Event::CliRetry { message }, Weight::Ordinary);
            }
            AgentEvent::ProviderError(words) => {
                self.provider_error = true;
                let message = message(words);
                self.write(at, &Event::ProviderError { message }, Weight::Ordinary);
            }
            AgentEvent::Recovered => {
                // Some CLIs say so after every turn: only a recovery from an error is news.
                if std::mem::take(&mut self.provider_error) {
                    self.write(at, &Event::Recovered, Weight::Ordinary);
                }
            }
            AgentEvent::SessionId(id) => {
                let id = cut_utf8(id, MAX_MESSAGE_BYTES);
                if self.session_id.as_deref() != Some(id) {
                    self.session_id = Some(id.to_string());
                    let line = Event::SessionId { id: id.to_string() };
                    self.write(at, &line, Weight::Ordinary);
                }
            }
            AgentEvent::CostBudgetReached => {
                self.write(at, &Event::CliBudgetReached, Weight::Ordinary)
            }
            AgentEvent::Terminal => self.write_text(at, true),
            AgentEvent::Working => {}
            // A permission the run decided, and what the child's protocol warned of: both
            // in the result (`permissions`, `warnings`); an ACP child's events are
            // otherwise the same as every CLI's.
            AgentEvent::Permission(_) | AgentEvent::Warning(_) => {}
            // The delay a CLI says it waits before retrying: its retry line says it too.
            AgentEvent::RetryDelay(_) => {}
            // The result's warnings name each odd field once; it is no event of the run.
            AgentEvent::OddField { .. } => {}
        }
    }

    fn total(&self) -> Usage {
        let mut total = self.cli_total.unwrap_or(self.usage);
        if total.turns == 0 {
            total.turns = self.turns;
        }
        total
    }
}

impl RunObserver for Writer {
    fn on_event(&mut self, at: SystemTime, event: &RunEvent<'_>) {
        match event {
            RunEvent::Child(e) => self.child(at, e),
            RunEvent::Attempt { n, model, kind } => {
                self.write_text(at, true);
                self.deltas_in_message = false;
                self.called.clear();
                self.running.clear();
                let line = Event::Attempt {
                    n: *n,
                    model: model.map(str::to_string),
                    kind: kind.as_str().to_string(),
                };
                self.write(at, &line, Weight::Critical);
                self.flush_file();
            }
            RunEvent::LimitReached(limit) => {
                self.write_text(at, true);
                self.write(at, &Event::Limit(*limit), Weight::Critical);
            }
            RunEvent::Stopped(reason) => {
                self.write_text(at, true);
                self.write(at, &Event::Stop { reason: *reason }, Weight::Critical);
            }
            RunEvent::AttemptEnded { n, output } => {
                self.write_text(at, true);
                let single = output.result.details.results.first();
                let line = Event::AttemptEnd {
                    n: *n,
                    exit_code: single.map_or(output.exit_status, |r| r.exit_code),
                    error: single
                        .and_then(|r| r.error.as_deref())
                        .or(output
                            .result
                            .details
                            .error
                            .as_ref()
                            .map(|e| e.message.as_str()))
                        .map(message),
                };
                self.write(at, &line, Weight::Critical);
                self.flush_file();
            }
            RunEvent::Retrying {
                attempt,
                of,
                reason,
                wait,
            } => {
                let line = Event::Retry {
                    attempt: *attempt,
                    of: *of,
                    reason: reason.to_string(),
                    wait_ms: wait.as_millis() as u64,
                };
                self.write(at, &line, Weight::Critical);
                self.flush_file();
            }
            RunEvent::FallingBack { from, to, reason } => {
                let line = Event::Fallback {
                    from: from.map(str::to_string),
                    to: to.map(str::to_string),
                    reason: reason.to_string(),
                };
                self.write(at, &line, Weight::Critical);
            }
            RunEvent::Ended { output } => {
                self.write_text(at, true);
                let line = Event::End(Box::new(end_info(output, self.dropped)));
                self.write(at, &line, Weight::Critical);
                self.flush_file();
                self.out = None;
            }
        }
    }

    fn flush(&mut self) {
        if self.out.is_none() {
            return;
        }
        self.write_text(SystemTime::now(), false);
        self.flush_file();
    }
}

fn end_info(output: &RunOutput, dropped: u64) -> EndInfo {
    let single = output.result.details.results.first();
    let error = output.result.details.error.clone().map(|mut e| {
        e.message = message(&e.message);
        e
    });
    let exit_code = single.map_or(output.exit_status, |r| r.exit_code);
    let status = if output.exit_status == exit_status::CANCELLED {
        "cancelled"
    } else {
        crate::history::status_of(error.as_ref().map(|e| e.code.as_str()), exit_code).as_str()
    };
    EndInfo {
        status: status.to_string(),
        exit_code,
        error,
        usage: single.map(|r| r.usage).unwrap_or_default(),
        duration_ms: single.map_or(0, |r| r.duration_ms),
        limit: single.and_then(|r| r.limit),
        dropped_events: dropped,
    }
}

/// An error or notice, sanitized and cut.
fn message(words: &str) -> String {
    let sanitized = Sanitizer::global().sanitize(words);
    cut_utf8(&sanitized, MAX_MESSAGE_BYTES).to_string()
}

/// A tool call's arguments, sanitized, their long strings cut; when still too long as
/// JSON, only their size.
fn tool_args(args: &serde_json::Value) -> serde_json::Value {
    let mut args = args.clone();
    cut_strings(&mut args);
    Sanitizer::global().sanitize_json(&mut args);
    let len = serde_json::to_string(&args).map_or(0, |s| s.len());
    if len > MAX_ARGS_JSON_BYTES {
        return serde_json::json!({ "…": format!("{len} bytes of arguments left out") });
    }
    args
}

fn cut_strings(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) if s.len() > MAX_ARG_STRING_BYTES => {
            let cut = cut_utf8(s, MAX_ARG_STRING_BYTES).len();
            s.truncate(cut);
            s.push('…');
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(cut_strings),
        serde_json::Value::Object(o) => o.values_mut().for_each(cut_strings),
        _ => {}
    }
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The child's text not yet written: whole lines go out; the line being written waits
/// for its end. A line longer than [`MAX_LINE_TEXT_BYTES`] keeps its head, and the
/// bytes past it are counted until it ends.
#[derive(Default)]
struct PendingText {
    text: String,
    /// The line in progress passed the limit: bytes of it left out so far.
    overflow: Option<u64>,
}

impl PendingText {
    /// Takes in as much of `t` as fits and returns the rest: none, unless the text held
    /// has no room left (then its complete lines should be taken out, or, when it holds
    /// only the line in progress, that line is cut and the rest is counted).
    fn push<'t>(&mut self, t: &'t str) -> &'t str {
        if let Some(dropped) = self.overflow.as_mut() {
            match memchr::memchr(b'\n', t.as_bytes()) {
                None => {
                    *dropped += t.len() as u64;
                    return "";
                }
                Some(i) => {
                    *dropped += i as u64;
                    let left_out = std::mem::take(dropped);
                    self.overflow = None;
                    self.text
                        .push_str(&format!(" [… {left_out} bytes left out]\n"));
                    // The long line is whole now; what follows waits for room.
                    return &t[i + 1..];
                }
            }
        }
        let room = MAX_LINE_TEXT_BYTES.saturating_sub(self.text.len());
        if t.len() <= room {
            self.text.push_str(t);
            return "";
        }
        if self.text.contains('\n') {
            // Complete lines can make room.
            return t;
        }
        let head = cut_utf8(t, room);
        self.text.push_str(head);
        self.overflow = Some(0);
        self.push(&t[head.len()..])
    }

    /// The complete lines held (all of it when `whole`), if any.
    fn take(&mut self, whole: bool) -> Option<String> {
        if whole {
            if let Some(left_out) = self.overflow.take() {
                self.text
                    .push_str(&format!(" [… {left_out} bytes left out]"));
            }
            return (!self.text.is_empty()).then(|| std::mem::take(&mut self.text));
        }
        let end = memchr::memrchr(b'\n', self.text.as_bytes())? + 1;
        let rest = self.text.split_off(end);
        Some(std::mem::replace(&mut self.text, rest))
    }
}

#[cfg(test)]
mod tests;
