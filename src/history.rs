//! Reading the run history (the state directory's `runs.jsonl`, one line per run): the
//! index, what each run's
//! outcome was, and totals per agent.
//!
//! The index is written by concurrent runs, each appending one line in one write, and it
//! outlives versions of orchestrate; so a line that does not parse is skipped and reported,
//! never fatal, and the rest of the history stays readable.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde::Serialize;

use crate::result::{ErrorCode, Usage};
use crate::session::{IndexEntry, StateDir, INDEX_FILE};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Index {
    /// In file order, which is the order runs finished.
    pub entries: Vec<IndexEntry>,
    /// 1-based line number and why the line was skipped.
    pub skipped: Vec<(usize, String)>,
}

/// What became of a run, as `orchestrate runs` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RunStatus {
    Ok,
    /// Succeeded; only `content` was cut to the truncation limits.
    Truncated,
    Timeout,
    /// Passed the hard output cap and was stopped.
    Capped,
    Failed,
    /// Refused before a child ran (bad input, disabled, too deep).
    Refused,
}

impl RunStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Truncated => "truncated",
            RunStatus::Timeout => "timeout",
            RunStatus::Capped => "capped",
            RunStatus::Failed => "failed",
            RunStatus::Refused => "refused",
        }
    }

    pub(crate) fn is_success(self) -> bool {
        matches!(self, RunStatus::Ok | RunStatus::Truncated)
    }
}

/// The one place a run's status is derived from its index line.
pub(crate) fn status(entry: &IndexEntry) -> RunStatus {
    status_of(entry.error.as_deref(), entry.exit_code)
}

/// A run's status from its error code (`None` on success) and its child's exit code.
pub(crate) fn status_of(error: Option<&str>, exit_code: i32) -> RunStatus {
    let Some(code) = error else {
        return if exit_code == 0 {
            RunStatus::Ok
        } else {
            RunStatus::Failed
        };
    };
    // A code this version does not know (a newer orchestrate wrote it) still failed.
    match serde_json::from_value::<ErrorCode>(serde_json::Value::String(code.to_string())) {
        Ok(ErrorCode::SubagentTimeout) => RunStatus::Timeout,
        // The same code means "content was cut" on a successful run and "the hard cap
        // stopped the child" on a failed one; only the latter has a non-zero exit code.
        Ok(ErrorCode::SubagentOutputTruncated) if exit_code == 0 => RunStatus::Truncated,
        Ok(ErrorCode::SubagentOutputTruncated) => RunStatus::Capped,
        Ok(
            ErrorCode::InvalidInput
            | ErrorCode::UnknownAgent
            | ErrorCode::SubagentsDisabled
            | ErrorCode::SubagentDisabled
            | ErrorCode::SubagentDepthExceeded,
        ) => RunStatus::Refused,
        Ok(ErrorCode::SubagentFailed) | Err(_) => RunStatus::Failed,
    }
}

/// Totals over the runs of one agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentTotals {
    pub runs: u64,
    /// Runs that did not succeed, timeouts included.
    pub failures: u64,
    pub timeouts: u64,
    pub usage: Usage,
    pub duration_ms: u64,
}

pub(crate) fn totals(entries: &[IndexEntry]) -> BTreeMap<String, AgentTotals> {
    let mut out: BTreeMap<String, AgentTotals> = BTreeMap::new();
    for e in entries {
        let t = out.entry(e.agent.clone()).or_default();
        let s = status(e);
        t.runs += 1;
        t.failures += u64::from(!s.is_success());
        t.timeouts += u64::from(s == RunStatus::Timeout);
        t.usage.add(&e.usage);
        t.duration_ms += e.duration_ms;
    }
    out
}

/// Reads `runs.jsonl`. A state folder without one has no runs yet, which is no error.
pub(crate) fn read_index(state: &StateDir) -> io::Result<Index> {
    let path = state.root.join(INDEX_FILE);
    match File::open(&path) {
        Ok(f) => parse_index(BufReader::new(f)).map_err(|e| {
            io::Error::new(e.kind(), format!("failed to read {}: {e}", path.display()))
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Index::default()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("failed to open {}: {e}", path.display()),
        )),
    }
}

pub(crate) fn parse_index(mut reader: impl BufRead) -> io::Result<Index> {
    let mut index = Index::default();
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(index);
        }
        number += 1;
        let complete = line.ends_with(b"\n");
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        match serde_json::from_slice::<IndexEntry>(text) {
            Ok(entry) => index.entries.push(entry),
            // Only the last line can lack its newline; it is a run being appended right
            // now, or one that died mid-write.
            Err(e) if !complete => index
                .skipped
                .push((number, format!("incomplete last line (no newline): {e}"))),
            Err(e) => index
                .skipped
                .push((number, format!("not a run record: {e}"))),
        }
    }
}

/// Newest first by start time; among equal start times, the later line first.
pub(crate) fn newest_first(entries: &[IndexEntry]) -> Vec<&IndexEntry> {
    let mut sorted: Vec<&IndexEntry> = entries.iter().rev().collect();
    sorted.sort_by_key(|e| std::cmp::Reverse(e.started_at_ms));
    sorted
}

/// The last `lines` lines of a text file, reading at most its last `max_bytes` so that a
/// child that flooded stderr does not cost a full read. Missing file → `None`.
pub(crate) fn tail_lines(path: &Path, lines: usize, max_bytes: u64) -> io::Result<Option<String>> {
    let mut f = match crate::session::open_record(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let start = len.saturating_sub(max_bytes);
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    f.take(max_bytes).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut text: &str = &text;
    if start > 0 {
        // The first line was cut by the byte window; a partial line would mislead.
        text = text.split_once('\n').map_or("", |(_, rest)| rest);
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    let all: Vec<&str> = text.split('\n').collect();
    let from = all.len().saturating_sub(lines);
    let mut tail = all[from..].join("\n");
    if !tail.is_empty() {
        tail.push('\n');
    }
    Ok(Some(tail))
}

/// `2025-06-01T12:34:56Z` for a Unix time in milliseconds (UTC; no time zone database).
pub(crate) fn format_timestamp(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    pub(crate) fn entry(run_id: &str, agent: &str, started: u64) -> IndexEntry {
        IndexEntry {
            run_id: run_id.into(),
            agent: agent.into(),
            backend: "pi".into(),
            model: None,
            started_at_ms: started,
            duration_ms: 1000,
            exit_code: 0,
            error: None,
            usage: Usage {
                input: 10,
                output: 5,
                cache_read: 2,
                cache_write: 1,
                cost: 0.25,
                turns: 1,
            },
            cwd: "/w".into(),
            session_file: format!("/s/{run_id}/session.jsonl"),
            worktree: None,
            task: None,
        }
    }

    fn failed(mut e: IndexEntry, code: &str, exit: i32) -> IndexEntry {
        e.error = Some(code.into());
        e.exit_code = exit;
        e
    }

    fn line(e: &IndexEntry) -> String {
        serde_json::to_string(e).unwrap()
    }

    #[test]
    fn status_follows_error_code_and_exit_code() {
        let e = entry("a", "x", 1);
        let cases = [
            (e.clone(), RunStatus::Ok),
            (
                IndexEntry {
                    exit_code: 3,
                    ..e.clone()
                },
                RunStatus::Failed,
            ),
            (
                failed(e.clone(), "SUBAGENT_TIMEOUT", 124),
                RunStatus::Timeout,
            ),
            (
                failed(e.clone(), "SUBAGENT_OUTPUT_TRUNCATED", 0),
                RunStatus::Truncated,
            ),
            (
                failed(e.clone(), "SUBAGENT_OUTPUT_TRUNCATED", 143),
                RunStatus::Capped,
            ),
            (failed(e.clone(), "SUBAGENT_FAILED", 0), RunStatus::Failed),
            (failed(e.clone(), "SUBAGENT_FAILED", 127), RunStatus::Failed),
            (failed(e.clone(), "INVALID_INPUT", 1), RunStatus::Refused),
            (
                failed(e.clone(), "SUBAGENT_DEPTH_EXCEEDED", 1),
                RunStatus::Refused,
            ),
            (failed(e.clone(), "SOMETHING_NEW", 0), RunStatus::Failed),
        ];
        let got: Vec<(Option<String>, i32, RunStatus)> = cases
            .iter()
            .map(|(e, _)| (e.error.clone(), e.exit_code, status(e)))
            .collect();
        let want: Vec<(Option<String>, i32, RunStatus)> = cases
            .iter()
            .map(|(e, s)| (e.error.clone(), e.exit_code, *s))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn corrupt_and_half_written_lines_are_skipped_with_their_numbers() {
        let a = entry("aaaaaaaa", "explorer", 1);
        let b = entry("bbbbbbbb", "reviewer", 2);
        let text = format!(
            "{}\n{{\"runId\": \"garbage\n\n{}\n\u{0}\u{1}binary\n{{\"runId\":\"cccccccc\",\"agent\"",
            line(&a),
            line(&b)
        );
        let index = parse_index(text.as_bytes()).unwrap();
        assert_eq!(index.entries, vec![a, b]);
        let skipped: Vec<usize> = index.skipped.iter().map(|(n, _)| *n).collect();
        assert_eq!(skipped, vec![2, 5, 6]);
        assert!(index.skipped[0].1.starts_with("not a run record: "));
        assert!(index.skipped[2]
            .1
            .starts_with("incomplete last line (no newline): "));
    }

    #[test]
    fn a_complete_last_line_without_newline_is_kept() {
        let a = entry("aaaaaaaa", "explorer", 1);
        let text = format!("\r\n{}", line(&a));
        assert_eq!(
            parse_index(text.as_bytes()).unwrap(),
            Index {
                entries: vec![a],
                skipped: vec![]
            }
        );
    }

    #[test]
    fn a_missing_index_is_an_empty_history() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: tmp.path().join("nothing-here"),
        };
        assert_eq!(read_index(&state).unwrap(), Index::default());
    }

    #[test]
    fn reads_what_append_index_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: tmp.path().to_path_buf(),
        };
        let a = entry("aaaaaaaa", "explorer", 1);
        let b = failed(entry("bbbbbbbb", "explorer", 2), "SUBAGENT_TIMEOUT", 124);
        state.append_index(&a).unwrap();
        state.append_index(&b).unwrap();
        assert_eq!(read_index(&state).unwrap().entries, vec![a, b]);
    }

    #[test]
    fn totals_count_runs_failures_timeouts_and_usage_per_agent() {
        let runs = vec![
            entry("1", "explorer", 1),
            failed(entry("2", "explorer", 2), "SUBAGENT_TIMEOUT", 124),
            failed(entry("3", "explorer", 3), "SUBAGENT_OUTPUT_TRUNCATED", 0),
            failed(entry("4", "reviewer", 4), "SUBAGENT_FAILED", 1),
        ];
        let mut explorer_usage = Usage::default();
        for _ in 0..3 {
            explorer_usage.add(&runs[0].usage);
        }
        assert_eq!(
            totals(&runs),
            BTreeMap::from([
                (
                    "explorer".to_string(),
                    AgentTotals {
                        runs: 3,
                        failures: 1,
                        timeouts: 1,
                        usage: explorer_usage,
                        duration_ms: 3000,
                    }
                ),
                (
                    "reviewer".to_string(),
                    AgentTotals {
                        runs: 1,
                        failures: 1,
                        timeouts: 0,
                        usage: runs[0].usage,
                        duration_ms: 1000,
                    }
                ),
            ])
        );
    }

    #[test]
    fn newest_first_sorts_by_start_then_by_line() {
        let runs = vec![
            entry("a", "x", 5),
            entry("b", "x", 9),
            entry("c", "x", 5),
            entry("d", "x", 1),
        ];
        let ids: Vec<&str> = newest_first(&runs)
            .iter()
            .map(|e| e.run_id.as_str())
            .collect();
        assert_eq!(ids, ["b", "c", "a", "d"]);
    }

    #[test]
    fn tail_keeps_the_last_lines_within_the_byte_window() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("stderr.log");
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, &text).unwrap();
        let want: String = (28..=30).map(|i| format!("line {i}\n")).collect();
        assert_eq!(tail_lines(&p, 3, 1 << 20).unwrap(), Some(want));
        // A 12-byte window holds "\nline 30\n" after a cut line: only whole lines remain.
        assert_eq!(
            tail_lines(&p, 3, 12).unwrap(),
            Some("line 30\n".to_string())
        );
        std::fs::write(&p, "").unwrap();
        assert_eq!(tail_lines(&p, 3, 100).unwrap(), Some(String::new()));
        assert_eq!(tail_lines(&tmp.path().join("none"), 3, 100).unwrap(), None);
    }

    #[test]
    fn timestamps_are_utc_iso_8601() {
        assert_eq!(format_timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_timestamp(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(format_timestamp(1_748_781_296_789), "2025-06-01T12:34:56Z");
    }
}
