//! `orchestrate runs [--json] [--agent A] [--limit N]`: recent runs, newest first, and
//! totals per agent over the whole index.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use crate::background::{self, RunState};
use crate::history::{self, AgentTotals};
use crate::result::exit_status;
use crate::session::{IndexEntry, StateDir, INDEX_FILE};

pub fn runs(json: bool, agent: Option<String>, limit: usize) -> i32 {
    let state = match StateDir::from_env() {
        Ok(s) => s,
        Err(e) => return super::refuse_listing(json, &e.to_string()),
    };
    let index = match history::read_index(&state) {
        Ok(i) => i,
        Err(e) => return super::refuse_listing(json, &e.to_string()),
    };
    let index_path = state.root.join(INDEX_FILE);
    for (line, why) in &index.skipped {
        tracing::warn!("{}:{line}: skipped: {why}", index_path.display());
    }
    let selected: Vec<IndexEntry> = match &agent {
        Some(a) => index
            .entries
            .into_iter()
            .filter(|e| &e.agent == a)
            .collect(),
        None => index.entries,
    };
    let totals = history::totals(&selected);
    let recent: Vec<&IndexEntry> = history::newest_first(&selected)
        .into_iter()
        .take(limit)
        .collect();
    // Background runs without a result yet are not in the index; a dead supervisor is
    // reported as such, never as running forever.
    let unfinished: Vec<(String, &'static str, u32)> = background::unfinished(&state)
        .into_iter()
        .filter_map(|(id, s)| match s {
            RunState::Running(r) => Some((id, "running", r.pid)),
            RunState::Dead(r) => Some((id, "supervisor died", r.pid)),
            _ => None,
        })
        .collect();
    // Kept worktrees stay listed, whatever the limit, until removed.
    let worktrees = super::worktree::kept(&state, &selected);
    let text = if json {
        let value = json!({
            "unfinished": unfinished.iter().map(|(id, status, pid)| json!({"runId": id, "status": status, "supervisorPid": pid})).collect::<Vec<_>>(),
            "worktrees": worktrees.iter().map(|w| w.to_json()).collect::<Vec<_>>(),
            "runs": recent.iter().map(|e| run_json(e)).collect::<Vec<_>>(),
            "totals": totals,
            "skippedLines": index.skipped.len(),
        });
        format!("{value}\n")
    } else {
        let mut text = String::new();
        if !unfinished.is_empty() {
            text.push_str("Background runs without a result:\n");
            for (id, status, pid) in &unfinished {
                text.push_str(&format!("  {id}  {status} (supervisor pid {pid})\n"));
            }
            text.push('\n');
        }
        text.push_str(&render_text(
            &recent,
            selected.len(),
            &totals,
            agent.as_deref(),
            &index_path,
        ));
        if !worktrees.is_empty() {
            text.push_str(
                "\nWorktrees kept for review (merge the branch, then `orchestrate worktree rm RUN` or `orchestrate worktree prune`):\n",
            );
            for w in &worktrees {
                let r = &w.record;
                text.push_str(&format!(
                    "  {}  {}  {}  ({})\n",
                    r.run_id,
                    r.branch,
                    r.path,
                    w.to_json()["state"].as_str().unwrap_or_default()
                ));
            }
        }
        text
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => exit_status::SUCCESS,
        Err(_) => exit_status::FAILURE,
    }
}

/// The index line as written, plus what a reader would otherwise have to derive.
pub fn run_json(entry: &IndexEntry) -> Value {
    let mut v = serde_json::to_value(entry).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        map.insert("status".into(), json!(history::status(entry)));
        map.insert(
            "startedAt".into(),
            json!(history::format_timestamp(entry.started_at_ms)),
        );
    }
    v
}

pub fn render_text(
    recent: &[&IndexEntry],
    total_runs: usize,
    totals: &BTreeMap<String, AgentTotals>,
    agent: Option<&str>,
    index_path: &Path,
) -> String {
    if total_runs == 0 {
        return match agent {
            Some(a) => format!("No runs of agent {a} in {}.\n", index_path.display()),
            None => format!("No runs recorded yet in {}.\n", index_path.display()),
        };
    }
    let mut out = String::new();
    if !recent.is_empty() {
        let rows = recent
            .iter()
            .map(|e| {
                vec![
                    e.run_id.clone(),
                    history::format_timestamp(e.started_at_ms),
                    e.agent.clone(),
                    e.backend.clone(),
                    history::status(e).as_str().to_string(),
                    human_duration(e.duration_ms),
                    thousands(e.usage.input),
                    thousands(e.usage.output),
                    cost(e.usage.cost),
                    e.task.as_deref().map_or(String::new(), task_cell),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "RUN", "STARTED", "AGENT", "BACKEND", "STATUS", "DURATION", "IN", "OUT", "COST",
                "TASK",
            ],
            &[
                false, false, false, false, false, true, true, true, true, false,
            ],
            rows,
        ));
    }
    if recent.len() < total_runs {
        out.push_str(&format!(
            "({} of {total_runs} runs shown, newest first; --limit N shows more)\n",
            recent.len()
        ));
    }
    out.push_str("\nTotals per agent:\n");
    let rows = totals
        .iter()
        .map(|(agent, t)| {
            vec![
                agent.clone(),
                t.runs.to_string(),
                t.failures.to_string(),
                t.timeouts.to_string(),
                thousands(t.usage.input),
                thousands(t.usage.output),
                thousands(t.usage.cache_read),
                thousands(t.usage.cache_write),
                cost(t.usage.cost),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "AGENT",
            "RUNS",
            "FAILED",
            "TIMEOUTS",
            "IN",
            "OUT",
            "CACHE READ",
            "CACHE WRITE",
            "COST",
        ],
        &[false, true, true, true, true, true, true, true, true],
        rows,
    ));
    out
}

/// How much of a task the run table shows: its first line, cut to this many characters.
const TASK_CELL_CHARS: usize = 50;

/// The task's first line, cut to [`TASK_CELL_CHARS`] (`…` when there was more).
fn task_cell(task: &str) -> String {
    let line = task.lines().next().unwrap_or_default();
    match line.char_indices().nth(TASK_CELL_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// Columns padded to their widest cell; numbers right-aligned so that magnitudes line up.
fn table(header: &[&str], right: &[bool], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let header_row: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let mut out = String::new();
    for row in std::iter::once(&header_row).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                let w = widths[i];
                if right[i] {
                    format!("{cell:>w$}")
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// `850ms`, `12.3s`, `4m05s`, `1h02m`: precise where it matters, short where it does not.
pub fn human_duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, ms % 60_000 / 1000),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn cost(usd: f64) -> String {
    if usd == 0.0 {
        "$0".to_string()
    } else {
        format!("${usd:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Usage;
    use pretty_assertions::assert_eq;

    fn entry(run_id: &str, agent: &str, started: u64) -> IndexEntry {
        IndexEntry {
            run_id: run_id.into(),
            agent: agent.into(),
            backend: "pi".into(),
            model: None,
            started_at_ms: started,
            duration_ms: 12_345,
            exit_code: 0,
            error: None,
            usage: Usage {
                input: 1234,
                output: 56,
                cache_read: 7000,
                cache_write: 0,
                cost: 0.0123,
                turns: 2,
            },
            cwd: "/w".into(),
            session_file: "/s".into(),
            worktree: None,
            task: None,
        }
    }

    #[test]
    fn text_has_an_aligned_run_table_and_a_totals_table() {
        let a = entry("aaaaaaaa", "explorer", 1_748_781_296_000);
        let b = IndexEntry {
            error: Some("SUBAGENT_TIMEOUT".into()),
            exit_code: 124,
            duration_ms: 600_000,
            agent: "reviewer".into(),
            backend: "claude".into(),
            task: Some(format!("review {}\nsecond line", "é".repeat(60))),
            ..entry("bbbbbbbb", "reviewer", 1_748_781_356_000)
        };
        let all = vec![a.clone(), b.clone()];
        let totals = history::totals(&all);
        let text = render_text(&[&b, &a], 3, &totals, None, Path::new("/state/runs.jsonl"));
        assert_eq!(
            text,
            format!(
                "\
RUN       STARTED               AGENT     BACKEND  STATUS   DURATION     IN  OUT     COST  TASK
bbbbbbbb  2025-06-01T12:35:56Z  reviewer  claude   timeout    10m00s  1,234   56  $0.0123  review {}…
aaaaaaaa  2025-06-01T12:34:56Z  explorer  pi       ok          12.3s  1,234   56  $0.0123
(2 of 3 runs shown, newest first; --limit N shows more)

Totals per agent:
AGENT     RUNS  FAILED  TIMEOUTS     IN  OUT  CACHE READ  CACHE WRITE     COST
explorer     1       0         0  1,234   56       7,000            0  $0.0123
reviewer     1       1         1  1,234   56       7,000            0  $0.0123
",
                "é".repeat(43)
            )
        );
    }

    #[test]
    fn text_says_when_there_is_nothing() {
        let p = Path::new("/state/runs.jsonl");
        assert_eq!(
            render_text(&[], 0, &BTreeMap::new(), None, p),
            "No runs recorded yet in /state/runs.jsonl.\n"
        );
        assert_eq!(
            render_text(&[], 0, &BTreeMap::new(), Some("x"), p),
            "No runs of agent x in /state/runs.jsonl.\n"
        );
    }

    #[test]
    fn json_of_a_run_adds_status_and_start_time() {
        let e = entry("aaaaaaaa", "explorer", 1_748_781_296_789);
        assert_eq!(
            run_json(&e),
            json!({
                "runId": "aaaaaaaa", "agent": "explorer", "backend": "pi", "model": null,
                "startedAtMs": 1_748_781_296_789u64, "durationMs": 12_345, "exitCode": 0,
                "error": null,
                "usage": {"input": 1234, "output": 56, "cacheRead": 7000, "cacheWrite": 0,
                          "cost": 0.0123, "turns": 2},
                "cwd": "/w", "sessionFile": "/s",
                "status": "ok", "startedAt": "2025-06-01T12:34:56Z",
            })
        );
    }

    #[test]
    fn numbers_are_formatted_for_reading() {
        assert_eq!(
            [0, 999, 1_000, 1_234_567].map(thousands),
            ["0", "999", "1,000", "1,234,567"]
        );
        assert_eq!(
            [850, 12_345, 245_000, 3_720_000].map(human_duration),
            ["850ms", "12.3s", "4m05s", "1h02m"]
        );
        assert_eq!([0.0, 0.01234, 2.5].map(cost), ["$0", "$0.0123", "$2.5000"]);
    }
}
