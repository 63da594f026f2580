//! The summary `-o text` prints on stderr after the answer: what happened, for a human at
//! a terminal. One line for one run; for a fan-out or a chain, a line for the whole and a
//! line per task; for a background run, whether it started or still runs.

use crate::result::{exit_status, Mode, RunResult, SingleResult, Usage};

/// How much of a failed task's error its summary line quotes (its first line, cut here).
const TASK_ERROR_CHARS: usize = 120;

/// The summary of `result`, printed by a command that exits with `status`.
pub fn summary(result: &RunResult, status: i32) -> String {
    let details = &result.details;
    let code = details.error.as_ref().map(|e| e.code.as_str());
    if let Some(bg) = &details.background {
        // A background run that is still going: just started (the command succeeded), or
        // `wait`/`stop` gave up on it.
        let what = if status == exit_status::SUCCESS {
            "started in the background"
        } else {
            "still running"
        };
        return format!(
            "[orchestrate] run {} {what} (supervisor pid {}) session={}",
            details.run_id.as_deref().unwrap_or("?"),
            bg.supervisor_pid,
            bg.session_file
        );
    }
    let status_word = code.unwrap_or("ok");
    match (details.mode, details.results.as_slice()) {
        (_, []) => match &details.run_id {
            Some(id) => format!("[orchestrate] run {id} {status_word}"),
            None => format!("[orchestrate] {status_word}"),
        },
        (Mode::Single, [r, ..]) => {
            format!("[orchestrate] {} {status_word} {}", r.agent, task_line(r))
        }
        (mode, results) => {
            let mut total = Usage::default();
            for r in results {
                total.add(&r.usage);
            }
            let what = match mode {
                Mode::Chain if code.is_some() => {
                    format!("chain {status_word} stopped at step {}", results.len())
                }
                Mode::Chain => format!("chain {status_word} {} steps", results.len()),
                _ => format!("parallel {status_word} {} tasks", results.len()),
            };
            let mut out = format!(
                "[orchestrate] {what}: {}; {}",
                counts(results),
                usage_fields(&total)
            );
            for (i, r) in results.iter().enumerate() {
                out.push_str(&format!(
                    "\n[orchestrate]   {}. {} {} {}",
                    i + 1,
                    r.agent,
                    task_status(r),
                    task_line(r)
                ));
                if let Some(error) = &r.error {
                    out.push_str(": ");
                    out.push_str(&first_line_cut(error, TASK_ERROR_CHARS));
                }
            }
            out
        }
    }
}

/// `ok`, `timeout` or `failed`, as a chain judges a step: a task whose result carries an
/// error failed (a truncated answer is no error of the task's own).
fn task_status(r: &SingleResult) -> &'static str {
    if r.timeout_reason.is_some() {
        "timeout"
    } else if r.error.is_some() {
        "failed"
    } else {
        "ok"
    }
}

/// `2 ok, 1 failed`: how many tasks ended which way, in that order.
fn counts(results: &[SingleResult]) -> String {
    ["ok", "timeout", "failed"]
        .into_iter()
        .filter_map(|word| {
            let n = results.iter().filter(|r| task_status(r) == word).count();
            (n > 0).then(|| format!("{n} {word}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn usage_fields(u: &Usage) -> String {
    format!(
        "turns={} tokens in={} out={} cache r/w={}/{} cost=${:.4}",
        u.turns, u.input, u.output, u.cache_read, u.cache_write, u.cost
    )
}

/// Duration, usage and session file of one run.
fn task_line(r: &SingleResult) -> String {
    format!(
        "{:.1}s {} session={}",
        r.duration_ms as f64 / 1000.0,
        usage_fields(&r.usage),
        r.session_file
    )
}

fn first_line_cut(text: &str, max_chars: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Background, Details, ErrorCode, ErrorInfo, TextContent, TimeoutReason};
    use pretty_assertions::assert_eq;

    fn task(agent: &str, input: u64, error: Option<&str>, exit_code: i32) -> SingleResult {
        SingleResult {
            agent: agent.into(),
            exit_code,
            error: error.map(str::to_string),
            usage: Usage {
                input,
                output: 10,
                turns: 1,
                cost: 0.5,
                ..Usage::default()
            },
            duration_ms: 1500,
            session_file: format!("/s/{agent}.jsonl"),
            ..SingleResult::default()
        }
    }

    fn result(mode: Mode, results: Vec<SingleResult>, code: Option<ErrorCode>) -> RunResult {
        RunResult {
            content: vec![TextContent::text("answer")],
            details: Details {
                mode,
                run_id: Some("abcd1234".into()),
                results,
                error: code.map(|code| ErrorInfo {
                    code,
                    message: "m".into(),
                }),
                streaming: None,
                background: None,
                scheduler: Default::default(),
                tree_usage: None,
            },
        }
    }

    #[test]
    fn one_run_is_one_line() {
        let r = result(Mode::Single, vec![task("explorer", 100, None, 0)], None);
        assert_eq!(
            summary(&r, 0),
            "[orchestrate] explorer ok 1.5s turns=1 tokens in=100 out=10 cache r/w=0/0 cost=$0.5000 session=/s/explorer.jsonl"
        );
    }

    #[test]
    fn a_fan_out_names_each_task_with_its_own_status_and_adds_up_usage() {
        let mut timed_out = task("c", 1, Some("Subagent timed out"), 124);
        timed_out.timeout_reason = Some(TimeoutReason::Idle);
        let refused = SingleResult {
            agent: "nope".into(),
            exit_code: 2,
            error: Some("Unknown agent: nope. Available agents: a\nsecond line".into()),
            ..SingleResult::default()
        };
        let r = result(
            Mode::Parallel,
            vec![
                task("a", 100, None, 0),
                task("b", 200, Some("pi exited with code 3"), 3),
                timed_out,
                refused,
            ],
            Some(ErrorCode::SubagentFailed),
        );
        assert_eq!(
            summary(&r, 1),
            "\
[orchestrate] parallel SUBAGENT_FAILED 4 tasks: 1 ok, 1 timeout, 2 failed; turns=3 tokens in=301 out=30 cache r/w=0/0 cost=$1.5000
[orchestrate]   1. a ok 1.5s turns=1 tokens in=100 out=10 cache r/w=0/0 cost=$0.5000 session=/s/a.jsonl
[orchestrate]   2. b failed 1.5s turns=1 tokens in=200 out=10 cache r/w=0/0 cost=$0.5000 session=/s/b.jsonl: pi exited with code 3
[orchestrate]   3. c timeout 1.5s turns=1 tokens in=1 out=10 cache r/w=0/0 cost=$0.5000 session=/s/c.jsonl: Subagent timed out
[orchestrate]   4. nope failed 0.0s turns=0 tokens in=0 out=0 cache r/w=0/0 cost=$0.0000 session=: Unknown agent: nope. Available agents: a"
        );
    }

    #[test]
    fn a_chain_says_where_it_stopped_or_how_many_steps_ran() {
        let stopped = result(
            Mode::Chain,
            vec![task("a", 1, None, 0), task("b", 1, Some("boom"), 1)],
            Some(ErrorCode::SubagentFailed),
        );
        assert!(summary(&stopped, 1).starts_with(
            "[orchestrate] chain SUBAGENT_FAILED stopped at step 2: 1 ok, 1 failed; turns=2"
        ));
        let done = result(
            Mode::Chain,
            vec![task("a", 1, None, 0), task("b", 1, None, 0)],
            None,
        );
        assert!(summary(&done, 0).starts_with("[orchestrate] chain ok 2 steps: 2 ok; turns=2"));
    }

    #[test]
    fn a_background_run_started_or_still_running_is_not_ok() {
        let mut r = result(Mode::Single, vec![], None);
        r.details.background = Some(Background {
            status: "running".into(),
            session_file: "/s/x.jsonl".into(),
            supervisor_pid: 42,
            tasks: Vec::new(),
        });
        assert_eq!(
            summary(&r, 0),
            "[orchestrate] run abcd1234 started in the background (supervisor pid 42) session=/s/x.jsonl"
        );
        assert_eq!(
            summary(&r, 124),
            "[orchestrate] run abcd1234 still running (supervisor pid 42) session=/s/x.jsonl"
        );
    }

    #[test]
    fn a_refusal_names_its_code() {
        let r = result(Mode::Single, vec![], Some(ErrorCode::UnknownAgent));
        assert_eq!(summary(&r, 2), "[orchestrate] run abcd1234 UNKNOWN_AGENT");
    }
}
