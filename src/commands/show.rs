//! `orchestrate show <RUN_ID> [--json]`: one run's result, its session file and the tail
//! of its stderr.

use std::io::Write;

use serde_json::{json, Value};

use crate::commands::runs::{cost, human_duration, thousands};
use crate::history::{self, Index};
use crate::result::exit_status;
use crate::sanitize::Sanitizer;
use crate::session::{FindRunError, IndexEntry, RunDir, RunIdPrefix, StateDir};

pub const STDERR_TAIL_LINES: usize = 20;
/// Enough for 20 long lines; a flooded stderr.log is never read whole.
const STDERR_TAIL_BYTES: u64 = 64 * 1024;
const RECENT_IDS_IN_ERROR: usize = 5;

pub fn show(prefix: &RunIdPrefix, json: bool) -> i32 {
    let state = match StateDir::from_env() {
        Ok(s) => s,
        Err(e) => return super::refuse_listing(json, &e.to_string()),
    };
    // A state directory that is no folder can hold no run (and says why).
    if let Err(e) = std::fs::read_dir(&state.root) {
        if e.kind() != std::io::ErrorKind::NotFound {
            let why = format!(
                "cannot read the state directory {}: {e}",
                state.root.display()
            );
            return super::refuse_listing(json, &why);
        }
    }
    // The index only adds a status line here; its skipped lines are `runs`'s to report,
    // and an unreadable index must not hide a run folder that is there.
    let index = history::read_index(&state).unwrap_or_else(|e| {
        tracing::warn!("{e}");
        Index::default()
    });
    let run_id = match state.find_run(prefix) {
        Ok(id) => id,
        Err(FindRunError::NoMatch(p)) => {
            return super::refuse_listing(json, &unknown_run_message(p.as_str(), &index, &state))
        }
        Err(e) => return super::refuse_listing(json, &e.to_string()),
    };
    let id = run_id.as_str();
    let run = state.run_dir(&run_id);
    if !run.path.is_dir() {
        return super::refuse_listing(json, &unknown_run_message(id, &index, &state));
    }
    let result = read_result(&run);
    let stderr_tail =
        match history::tail_lines(&run.stderr_file(), STDERR_TAIL_LINES, STDERR_TAIL_BYTES) {
            Ok(t) => t.unwrap_or_default(),
            Err(e) => {
                tracing::warn!("failed to read {}: {e}", run.stderr_file().display());
                String::new()
            }
        };
    // stderr.log is the child's raw stream; what leaves the process is sanitized.
    let stderr_tail = Sanitizer::global().sanitize(&stderr_tail).into_owned();
    let entry = index.entries.iter().rev().find(|e| e.run_id == id);
    let text = if json {
        let value = json!({
            "runId": id,
            "runDir": run.path.to_string_lossy(),
            "sessionFile": run.session_file().to_string_lossy(),
            "status": entry.map(history::status),
            "result": result,
            "stderrTail": stderr_tail,
        });
        format!("{value}\n")
    } else {
        render_text(id, &run, entry, result.as_ref(), &stderr_tail)
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => exit_status::SUCCESS,
        Err(_) => exit_status::FAILURE,
    }
}

pub fn unknown_run_message(id: &str, index: &Index, state: &StateDir) -> String {
    let mut recent: Vec<&str> = Vec::new();
    for e in history::newest_first(&index.entries) {
        if !recent.contains(&e.run_id.as_str()) {
            recent.push(&e.run_id);
        }
        if recent.len() == RECENT_IDS_IN_ERROR {
            break;
        }
    }
    if recent.is_empty() {
        format!(
            "Unknown run id: {id}. No runs are recorded in {}.",
            state.root.display()
        )
    } else {
        format!(
            "Unknown run id: {id}. Most recent runs: {}",
            recent.join(", ")
        )
    }
}

/// `result.json` as written, without forcing it into this version's types: a run recorded
/// by another version must still show.
fn read_result(run: &RunDir) -> Option<Value> {
    let path = run.result_file();
    match std::fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("{}: not valid JSON: {e}", path.display());
                None
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!("failed to read {}: {e}", path.display());
            None
        }
    }
}

pub fn render_text(
    id: &str,
    run: &RunDir,
    entry: Option<&IndexEntry>,
    result: Option<&Value>,
    stderr_tail: &str,
) -> String {
    let mut out = String::new();
    match entry {
        Some(e) => out.push_str(&format!(
            "Run {id}: {} on {}, {}, {}, {} in / {} out, {}, started {}\n\n",
            e.agent,
            e.backend,
            history::status(e).as_str(),
            human_duration(e.duration_ms),
            thousands(e.usage.input),
            thousands(e.usage.output),
            cost(e.usage.cost),
            history::format_timestamp(e.started_at_ms),
        )),
        None => out.push_str(&format!(
            "Run {id} (not in the run index: still running, or interrupted)\n\n"
        )),
    }
    match result.and_then(|r| r["content"][0]["text"].as_str()) {
        Some(text) => {
            out.push_str(text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
        None if result.is_some() => out.push_str("(result.json has no content text)\n"),
        None => out.push_str(&format!(
            "(no readable result at {}: the run is still going, or orchestrate stopped before writing it)\n",
            run.result_file().display()
        )),
    }
    out.push_str(&format!(
        "\nSession file: {}\n",
        run.session_file().display()
    ));
    if let Some(w) = result
        .map(|r| &r["details"]["results"][0]["worktree"])
        .filter(|w| w.is_object())
    {
        let files = w["changedFiles"].as_array().map_or(0, Vec::len);
        let state = if w["kept"] == json!(true) {
            format!("{files} file(s) changed, kept")
        } else {
            "no changes, removed".to_string()
        };
        out.push_str(&format!(
            "Worktree: {} (branch {}, from {}): {state}\n",
            w["path"].as_str().unwrap_or_default(),
            w["branch"].as_str().unwrap_or_default(),
            w["baseCommit"]
                .as_str()
                .map_or("", |c| &c[..c.len().min(12)]),
        ));
    }
    if stderr_tail.is_empty() {
        out.push_str(&format!(
            "Stderr: (empty) {}\n",
            run.stderr_file().display()
        ));
    } else {
        out.push_str(&format!(
            "Stderr (last {STDERR_TAIL_LINES} lines of {}):\n",
            run.stderr_file().display()
        ));
        for line in stderr_tail.lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Usage;
    use pretty_assertions::assert_eq;
    use std::path::PathBuf;

    fn entry(run_id: &str, started: u64) -> IndexEntry {
        IndexEntry {
            run_id: run_id.into(),
            agent: "explorer".into(),
            backend: "pi".into(),
            model: None,
            started_at_ms: started,
            duration_ms: 1500,
            exit_code: 0,
            error: None,
            usage: Usage {
                input: 1000,
                output: 20,
                cost: 0.5,
                ..Usage::default()
            },
            cwd: "/w".into(),
            session_file: "/s".into(),
            worktree: None,
            task: None,
        }
    }

    #[test]
    fn unknown_id_lists_the_five_most_recent_runs() {
        let state = StateDir {
            root: PathBuf::from("/state"),
        };
        let entries = (1..=7).map(|i| entry(&format!("0000000{i}"), i)).collect();
        let index = Index {
            entries,
            skipped: vec![],
        };
        assert_eq!(
            unknown_run_message("deadbeef", &index, &state),
            "Unknown run id: deadbeef. Most recent runs: 00000007, 00000006, 00000005, 00000004, 00000003"
        );
        assert_eq!(
            unknown_run_message("deadbeef", &Index::default(), &state),
            "Unknown run id: deadbeef. No runs are recorded in /state."
        );
    }

    #[test]
    fn text_has_status_result_session_and_stderr() {
        let run = RunDir {
            path: PathBuf::from("/state/runs/abcd1234"),
        };
        let result = json!({"content": [{"type": "text", "text": "The answer."}], "details": {}});
        assert_eq!(
            render_text(
                "abcd1234",
                &run,
                Some(&entry("abcd1234", 1_748_781_296_000)),
                Some(&result),
                "warn: a\nwarn: b\n"
            ),
            "\
Run abcd1234: explorer on pi, ok, 1.5s, 1,000 in / 20 out, $0.5000, started 2025-06-01T12:34:56Z

The answer.

Session file: /state/runs/abcd1234/session.jsonl
Stderr (last 20 lines of /state/runs/abcd1234/stderr.log):
  warn: a
  warn: b
"
        );
        assert_eq!(
            render_text("abcd1234", &run, None, None, ""),
            "\
Run abcd1234 (not in the run index: still running, or interrupted)

(no readable result at /state/runs/abcd1234/result.json: the run is still going, or orchestrate stopped before writing it)

Session file: /state/runs/abcd1234/session.jsonl
Stderr: (empty) /state/runs/abcd1234/stderr.log
"
        );
    }
}
