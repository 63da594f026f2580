//! The lines of a run's `events.jsonl`: one JSON object each, `{"at": <Unix time in
//! milliseconds>, "type": "...", ...}`. Written by [`super::events_file`], read by
//! `orchestrate show --events` and `orchestrate watch`. Readers skip the types they do
//! not know (a newer orchestrate may write more).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::background::SupervisorRecord;
use crate::result::{ErrorInfo, Limit, Mode, Usage};
use crate::supervisor::StopReason;

pub(crate) const EVENTS_FILE: &str = "events.jsonl";

/// One line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct EventLine {
    /// Unix time in milliseconds.
    pub at: u64,
    #[serde(flatten)]
    pub event: Event,
}

/// What a line says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub(crate) enum Event {
    /// The first line: what runs, where, and who supervises it.
    Run(Box<RunInfo>),
    /// An attempt of the child starts: `kind` is first, retry, fallback or repair.
    Attempt {
        n: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        kind: String,
    },
    /// The child's text, whole lines (or the rest of a finished message), sanitized.
    Text { text: String },
    /// The child called a tool; `args` sanitized, long strings cut.
    ToolCall { name: String, args: Value },
    /// A tool finished: the name of the call it ended, when known, and how long it ran.
    ToolEnd {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    /// Usage of one request (`usage`), and the run's total so far.
    Usage {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        total: Usage,
    },
    /// A turn of the child ended (1-based count).
    TurnEnd { turn: u64 },
    /// The CLI retrying or reconnecting to its provider, in its words.
    CliRetry { message: String },
    /// The provider or the CLI reported an error.
    ProviderError { message: String },
    /// A later message succeeded after a provider error.
    Recovered,
    /// The child's own session id (what `run --resume` continues).
    SessionId { id: String },
    /// The CLI stopped itself at the cost budget orchestrate gave it.
    CliBudgetReached,
    /// A budget was reached; the child is being stopped.
    Limit(Limit),
    /// orchestrate stopped the attempt's child.
    Stop { reason: StopReason },
    /// An attempt ended.
    AttemptEnd {
        n: u32,
        exit_code: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// orchestrate retries after a transient failure, in `wait_ms`.
    Retry {
        attempt: u32,
        of: u32,
        reason: String,
        wait_ms: u64,
    },
    /// The model is unavailable; the next attempt runs `to`.
    Fallback {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<String>,
        reason: String,
    },
    /// The file reached its size limit: what follows is only what ends the run.
    Cut { limit_bytes: u64 },
    /// The last line: the run's result.
    End(Box<EndInfo>),
    /// A type this version does not know.
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunInfo {
    pub run_id: String,
    pub agent: String,
    pub backend: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The task's start, sanitized.
    pub task: String,
    pub cwd: String,
    pub depth: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupInfo>,
    pub supervisor: Supervisor,
}

/// The fan-out or chain a run is a task of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GroupInfo {
    pub id: String,
    pub mode: Mode,
    /// 0-based.
    pub index: usize,
    pub count: usize,
}

/// The orchestrate process that runs it: whether it is still alive, and how to ask it
/// to stop this run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Supervisor {
    #[serde(flatten)]
    pub process: SupervisorRecord,
    /// Its PID namespace (the inode of `/proc/self/ns/pid`): a pid means nothing to a
    /// reader in another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_ns: Option<u64>,
    /// The signal that makes it look for stop requests in its runs' folders, when it
    /// listens for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EndInfo {
    /// ok, truncated, timeout, capped, failed, refused, or cancelled.
    pub status: String,
    /// The child's exit code, as the result has it.
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    pub usage: Usage,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// The child's events (each piece of streamed text counts) and lines left out once
    /// the file reached its size limit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_events: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl EventLine {
    /// One line of the file; `None` for one that is not JSON (a line cut short by a
    /// crash).
    pub(crate) fn parse(line: &str) -> Option<EventLine> {
        serde_json::from_str(line).ok()
    }
}

/// Reads a growing events file from where the last read ended: each call returns the
/// lines completed since (a line still being written waits for its end).
#[derive(Debug)]
pub(crate) struct Tail {
    path: std::path::PathBuf,
    offset: u64,
    partial: Vec<u8>,
    /// A line past [`MAX_EVENT_LINE_BYTES`] is being passed over until its end.
    passing_over: bool,
    /// Lines that were not JSON (or too long to be).
    pub skipped: u64,
}

/// The most one read takes in; the rest waits for the next.
const TAIL_READ_BYTES: u64 = 1024 * 1024;
/// The longest line a reader takes: what orchestrate writes is far shorter (a text line of
/// 64 KiB is at most six times that escaped); a longer one is not its writing, and is skipped.
pub(crate) const MAX_EVENT_LINE_BYTES: usize = 1024 * 1024;

impl Tail {
    pub(crate) fn new(path: std::path::PathBuf) -> Tail {
        Tail {
            path,
            offset: 0,
            partial: Vec::new(),
            passing_over: false,
            skipped: 0,
        }
    }

    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Whether the file exists yet.
    pub(crate) fn exists(&self) -> bool {
        self.path.is_file()
    }

    /// The lines completed since the last call; none when the file does not exist (yet).
    pub(crate) fn read(&mut self) -> std::io::Result<Vec<EventLine>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = match crate::session::open_record(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let len = f.metadata()?.len();
        if len < self.offset {
            // Written anew (a background run's folder reused): start over.
            self.offset = 0;
            self.partial.clear();
            self.passing_over = false;
        }
        if len == self.offset {
            return Ok(Vec::new());
        }
        f.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = std::mem::take(&mut self.partial);
        let read = f.take(TAIL_READ_BYTES).read_to_end(&mut bytes)?;
        self.offset += read as u64;
        if self.passing_over {
            match memchr::memchr(b'\n', &bytes) {
                Some(i) => {
                    bytes.drain(..=i);
                    self.passing_over = false;
                }
                None => return Ok(Vec::new()),
            }
        }
        let complete = memchr::memrchr(b'\n', &bytes).map_or(0, |i| i + 1);
        self.partial = bytes.split_off(complete);
        if self.partial.len() > MAX_EVENT_LINE_BYTES {
            self.partial = Vec::new();
            self.passing_over = true;
            self.skipped += 1;
        }
        let mut lines = Vec::new();
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            match std::str::from_utf8(line).ok().and_then(EventLine::parse) {
                Some(l) => lines.push(l),
                None => self.skipped += 1,
            }
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    /// A nested run's events file lies in a child's place, where the child could make it a
    /// link to a file of the user's, or a FIFO that no one writes: neither is read, and
    /// neither blocks the reader.
    #[test]
    fn an_events_file_that_is_a_link_or_a_fifo_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("id_rsa");
        std::fs::write(&secret, "{\"at\":1,\"type\":\"text\",\"text\":\"KEY\"}\n").unwrap();
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let err = Tail::new(link).read().expect_err("a link is refused");
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
        let fifo = dir.path().join("fifo.jsonl");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = Tail::new(fifo).read().expect_err("a FIFO is refused");
        assert!(err.to_string().contains("not a regular file"), "{err}");
        assert_eq!(Tail::new(secret).read().unwrap().len(), 1, "a file is read");
    }

    #[test]
    fn lines_read_back_as_written() {
        let lines = [
            json!({"at": 1, "type": "text", "text": "a\nb"}),
            json!({"at": 2, "type": "limit", "kind": "turns", "limit": 2, "used": 2}),
            json!({"at": 3, "type": "stop", "reason": "idleTimeout"}),
            json!({"at": 4, "type": "toolEnd", "id": "t1", "name": "read", "durationMs": 12}),
            json!({"at": 5, "type": "recovered"}),
            json!({"at": 6, "type": "end", "status": "ok", "exitCode": 0,
                   "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": 0.5, "turns": 1},
                   "durationMs": 9}),
            json!({"at": 7, "type": "run", "runId": "ab12cd34", "agent": "a", "backend": "pi",
                   "task": "t", "cwd": "/w", "depth": 0,
                   "group": {"id": "cd34ab12", "mode": "parallel", "index": 1, "count": 3},
                   "supervisor": {"pid": 42, "startedAtMs": 5, "pidNs": 4026531836u64, "stopSignal": "SIGUSR1"}}),
        ];
        for want in lines {
            let line = EventLine::parse(&want.to_string()).expect("parses");
            assert_eq!(serde_json::to_value(&line).unwrap(), want);
        }
    }

    #[test]
    fn unknown_types_and_broken_lines_are_told_apart() {
        assert_eq!(
            EventLine::parse(r#"{"at": 3, "type": "plan", "entries": []}"#),
            Some(EventLine {
                at: 3,
                event: Event::Unknown
            })
        );
        assert_eq!(EventLine::parse(r#"{"at": 3, "type": "te"#), None);
    }

    #[test]
    fn a_tail_returns_each_line_once_and_waits_for_a_line_being_written() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        let mut tail = Tail::new(path.clone());
        assert_eq!(tail.read().unwrap(), vec![]);
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"{\"at\": 1, \"type\": \"recovered\"}\n{\"at\": 2, \"ty")
            .unwrap();
        let first = tail.read().unwrap();
        assert_eq!(
            first,
            vec![EventLine {
                at: 1,
                event: Event::Recovered
            }]
        );
        writeln!(f, "pe\": \"recovered\"}}\nnot json").unwrap();
        assert_eq!(
            tail.read().unwrap(),
            vec![EventLine {
                at: 2,
                event: Event::Recovered
            }]
        );
        assert_eq!(tail.skipped, 1);
        assert_eq!(tail.read().unwrap(), vec![]);
    }

    /// A nested run's events file is written by a child: a line that never ends costs a
    /// reader a bounded amount of memory, and the lines after it still read.
    #[test]
    fn a_line_that_never_ends_is_skipped_in_bounded_memory() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        let mut f = std::fs::File::create(&path).unwrap();
        let mut tail = Tail::new(path.clone());
        let chunk = vec![b'x'; 1024 * 1024];
        for _ in 0..(MAX_EVENT_LINE_BYTES / chunk.len() + 3) {
            f.write_all(&chunk).unwrap();
            assert_eq!(tail.read().unwrap(), vec![]);
            assert!(tail.partial.len() <= MAX_EVENT_LINE_BYTES);
        }
        f.write_all(b"xx\n{\"at\": 2, \"type\": \"recovered\"}\n")
            .unwrap();
        let mut lines = Vec::new();
        loop {
            let more = tail.read().unwrap();
            if more.is_empty() {
                break;
            }
            lines.extend(more);
        }
        assert_eq!(
            lines,
            vec![EventLine {
                at: 2,
                event: Event::Recovered
            }]
        );
        assert_eq!(tail.skipped, 1);
    }
}
