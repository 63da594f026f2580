//! `orchestrate show RUN_ID --events [--json] [--follow]`: a run's `events.jsonl`, one
//! line per event for a person (or the lines as written with `--json`), and with
//! `--follow` the events of a run in progress as they come, until it ends.

use std::io::Write;
use std::time::Duration;

use crate::commands::runs::{cost, human_duration, thousands};
use crate::history;
use crate::live::{self, Progress};
use crate::observe::line::{Event, EventLine, Tail, EVENTS_FILE};
use crate::result::exit_status;
use crate::session::{FindRunError, RunIdPrefix, StateDir};

/// How often `--follow` looks for new lines: often enough to read as live, rarely enough
/// to cost nothing.
pub(crate) const FOLLOW_POLL_INTERVAL: Duration = Duration::from_millis(200);

pub fn show_events(prefix: &RunIdPrefix, json: bool, follow: bool) -> i32 {
    let state = match StateDir::from_env() {
        Ok(s) => s,
        Err(e) => return super::refuse_listing(json, &e.to_string()),
    };
    let found = state.find_run(prefix).map_err(|e| match e {
        FindRunError::NoMatch(p) => format!("no run id starts with {p} (see `orchestrate runs`)"),
        other => other.to_string(),
    });
    let run_dir = match found.map(|id| (live::find_run_dir(&state, &id), id)) {
        Ok((Some(dir), _)) => dir,
        Ok((None, id)) => {
            return super::refuse_listing(
                json,
                &format!("Unknown run id: {id} (see `orchestrate runs`)"),
            )
        }
        Err(why) => return super::refuse_listing(json, &why),
    };
    let mut tail = Tail::new(run_dir.path.join(EVENTS_FILE));
    let mut progress = Progress::default();
    let mut printer = Printer::new(json);
    loop {
        let lines = match tail.read() {
            Ok(lines) => lines,
            Err(e) => {
                let why = format!("cannot read {}: {e}", tail.path().display());
                return super::refuse_listing(json, &why);
            }
        };
        for line in &lines {
            progress.take(&line.event);
            if !printer.print(line) {
                // Nobody reads any more (a closed pipe).
                return exit_status::SUCCESS;
            }
        }
        if !lines.is_empty() {
            continue;
        }
        if progress.ended || !follow {
            break;
        }
        if !live::still_running(&run_dir.path, progress.supervisor.as_ref()) {
            // It may have written its last lines since the read.
            let last = tail.read().unwrap_or_default();
            for line in &last {
                progress.take(&line.event);
                printer.print(line);
            }
            if progress.ended {
                break;
            }
            let who = progress
                .supervisor
                .as_ref()
                .map_or(String::new(), |s| format!(" (pid {})", s.process.pid));
            eprintln!(
                "orchestrate: the orchestrate that ran {}{who} is gone; the run ended without its end event",
                run_dir.path.display()
            );
            return exit_status::FAILURE;
        }
        std::thread::sleep(FOLLOW_POLL_INTERVAL);
    }
    if !tail.exists() {
        let why = format!(
            "no {EVENTS_FILE} in {}: the run was recorded by an older orchestrate, or has not started",
            run_dir.path.display()
        );
        return super::refuse_listing(json, &why);
    }
    if tail.skipped > 0 {
        eprintln!(
            "orchestrate: {} line(s) of {} were not events and were skipped",
            tail.skipped,
            tail.path().display()
        );
    }
    exit_status::SUCCESS
}

struct Printer {
    json: bool,
    out: std::io::Stdout,
}

impl Printer {
    fn new(json: bool) -> Printer {
        Printer {
            json,
            out: std::io::stdout(),
        }
    }

    /// Prints one line; false once stdout is closed.
    fn print(&mut self, line: &EventLine) -> bool {
        let text = if self.json {
            match serde_json::to_string(line) {
                Ok(s) => s + "\n",
                Err(_) => return true,
            }
        } else {
            render(line)
        };
        let mut out = self.out.lock();
        out.write_all(text.as_bytes()).is_ok() && out.flush().is_ok()
    }
}

/// `HH:MM:SS.mmm` (UTC) for a Unix time in milliseconds.
pub(crate) fn clock(unix_ms: u64) -> String {
    let stamp = history::format_timestamp(unix_ms);
    let time = stamp.get(11..19).unwrap_or("00:00:00");
    format!("{time}.{:03}", unix_ms % 1000)
}

/// One event for a person: its time, what it is, and its details; a text's lines below
/// one another.
pub(crate) fn render(line: &EventLine) -> String {
    let (what, detail) = describe(&line.event);
    let detail = printable(&detail);
    let head = format!("{}  {what:<8}", clock(line.at));
    let mut out = String::new();
    let mut lines = detail.lines();
    match lines.next() {
        Some(first) => {
            out.push_str(&head);
            out.push(' ');
            out.push_str(first);
        }
        None => out.push_str(head.trim_end()),
    }
    out.push('\n');
    for more in lines {
        out.push_str(&" ".repeat(head.chars().count() + 1));
        out.push_str(more);
        out.push('\n');
    }
    out
}

/// `text` with its control characters but line breaks and tabs shown as `\u{FFFD}`: the
/// child's words reach a terminal, and an escape sequence in them would drive it (clear
/// the screen, rewrite what was printed, set the window's title).
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.contains(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| if bad(c) { '\u{FFFD}' } else { c })
            .collect(),
    )
}

/// An event's kind and details, in words.
pub(crate) fn describe(event: &Event) -> (&'static str, String) {
    match event {
        Event::Run(r) => {
            let model = r
                .model
                .as_ref()
                .map_or(String::new(), |m| format!(" ({m})"));
            let mut where_ = String::new();
            if let Some(g) = &r.group {
                let what = match g.mode {
                    crate::result::Mode::Chain => "step",
                    _ => "task",
                };
                where_.push_str(&format!(
                    ", {what} {} of {} in {}",
                    g.index + 1,
                    g.count,
                    g.id
                ));
            }
            if let Some(p) = &r.parent_run_id {
                where_.push_str(&format!(", started by run {p}"));
            }
            (
                "run",
                format!(
                    "{} {} on {}{model}{where_}: {}",
                    r.run_id, r.agent, r.backend, r.task
                ),
            )
        }
        Event::Attempt { n, model, kind } => (
            "attempt",
            format!(
                "{n} ({kind}){}",
                model
                    .as_ref()
                    .map_or(String::new(), |m| format!(", model {m}"))
            ),
        ),
        Event::Text { text } => ("text", text.trim_end_matches('\n').to_string()),
        Event::ToolCall { name, args } => ("tool", format!("{name} {args}")),
        Event::ToolEnd {
            name, duration_ms, ..
        } => (
            "done",
            format!(
                "{}{}",
                name.as_deref().unwrap_or("tool"),
                duration_ms.map_or(String::new(), |ms| format!(" ({})", human_duration(ms)))
            ),
        ),
        Event::Usage { usage, total } => (
            "usage",
            format!(
                "{}{} tokens, {} so far",
                usage.map_or(String::new(), |u| format!(
                    "{} in / {} out; ",
                    thousands(u.input),
                    thousands(u.output)
                )),
                thousands(total.tokens()),
                cost(total.cost)
            ),
        ),
        Event::TurnEnd { turn } => ("turn", format!("{turn} done")),
        Event::CliRetry { message } => ("retrying", message.clone()),
        Event::ProviderError { message } => ("error", message.clone()),
        Event::Recovered => ("recovered", String::new()),
        Event::SessionId { id } => ("session", id.clone()),
        Event::CliBudgetReached => ("budget", "the CLI stopped at its cost budget".into()),
        Event::Limit(limit) => ("limit", limit_words(limit)),
        Event::Stop { reason } => (
            "stop",
            serde_json::to_value(reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        ),
        Event::AttemptEnd {
            n,
            exit_code,
            error,
        } => (
            "attempt",
            format!(
                "{n} ended, exit {exit_code}{}",
                error.as_ref().map_or(String::new(), |e| format!(": {e}"))
            ),
        ),
        Event::Retry {
            attempt,
            of,
            reason,
            wait_ms,
        } => (
            "retry",
            format!(
                "attempt {attempt} of {of} failed ({reason}); again in {}",
                human_duration(*wait_ms)
            ),
        ),
        Event::Fallback { from, to, reason } => (
            "fallback",
            format!(
                "{} is unavailable ({reason}); now {}",
                from.as_deref().unwrap_or("the default model"),
                to.as_deref().unwrap_or("the default model")
            ),
        ),
        Event::Cut { limit_bytes } => (
            "cut",
            format!(
                "the events file reached its limit of {} bytes; only the run's end follows",
                thousands(*limit_bytes)
            ),
        ),
        Event::End(end) => (
            "end",
            format!(
                "{}, exit {}, {}, {} tokens, {}{}{}",
                end.status,
                end.exit_code,
                human_duration(end.duration_ms),
                thousands(end.usage.tokens()),
                cost(end.usage.cost),
                end.error
                    .as_ref()
                    .map_or(String::new(), |e| format!(": {}", e.message)),
                if end.dropped_events > 0 {
                    format!(" ({} events left out)", thousands(end.dropped_events))
                } else {
                    String::new()
                }
            ),
        ),
        Event::Unknown => ("event", "(of a kind this version does not know)".into()),
    }
}

fn limit_words(limit: &crate::result::Limit) -> String {
    use crate::result::Limit;
    match limit {
        Limit::Turns { limit, used } => format!("turns: {used} of {limit}"),
        Limit::Tokens { limit, used } => {
            format!("tokens: {} of {}", thousands(*used), thousands(*limit))
        }
        Limit::Cost { limit, used } => format!("cost: {} of {}", cost(*used), cost(*limit)),
        Limit::TreeCost { limit, used } => {
            format!("the tree's cost: {} of {}", cost(*used), cost(*limit))
        }
        Limit::TreeTokens { limit, used } => format!(
            "the tree's tokens: {} of {}",
            thousands(*used),
            thousands(*limit)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn line(json: &str) -> EventLine {
        EventLine::parse(json).unwrap()
    }

    #[test]
    fn events_read_as_lines_with_their_times() {
        let lines = [
            r#"{"at":1760000000123,"type":"run","runId":"ab12cd34","agent":"explorer","backend":"pi","task":"find auth","cwd":"/w","depth":1,"parentRunId":"0000ffff","group":{"id":"cd34ab12","mode":"parallel","index":1,"count":3},"supervisor":{"pid":42,"startedAtMs":1}}"#,
            r#"{"at":1760000000200,"type":"text","text":"I'll look.\nThen read.\n"}"#,
            r#"{"at":1760000000300,"type":"toolCall","name":"read","args":{"path":"src/auth.rs"}}"#,
            r#"{"at":1760000001500,"type":"toolEnd","id":"t1","name":"read","durationMs":1200}"#,
            r#"{"at":1760000001600,"type":"usage","usage":{"input":1200,"output":80},"total":{"input":1200,"output":80,"cost":0.0123}}"#,
            r#"{"at":1760000001700,"type":"limit","kind":"turns","limit":1,"used":1}"#,
            r#"{"at":1760000002000,"type":"end","status":"failed","exitCode":143,"error":{"code":"SUBAGENT_FAILED","message":"Stopped at the turn budget."},"usage":{"input":1200,"output":80,"cost":0.0123},"durationMs":1877}"#,
        ];
        let text: String = lines.iter().map(|l| render(&line(l))).collect();
        assert_eq!(
            text,
            "\
08:53:20.123  run      ab12cd34 explorer on pi, task 2 of 3 in cd34ab12, started by run 0000ffff: find auth
08:53:20.200  text     I'll look.
                       Then read.
08:53:20.300  tool     read {\"path\":\"src/auth.rs\"}
08:53:21.500  done     read (1.2s)
08:53:21.600  usage    1,200 in / 80 out; 1,280 tokens, $0.0123 so far
08:53:21.700  limit    turns: 1 of 1
08:53:22.000  end      failed, exit 143, 1.9s, 1,280 tokens, $0.0123: Stopped at the turn budget.
"
        );
    }

    #[test]
    fn escape_sequences_in_the_childs_words_never_reach_the_terminal() {
        let text = render(&line(
            r#"{"at":1760000000200,"type":"text","text":"a\u001b[2J\u001b]0;pwned\u0007b\r\nc\td\n"}"#,
        ));
        assert_eq!(
            text,
            "08:53:20.200  text     a\u{FFFD}[2J\u{FFFD}]0;pwned\u{FFFD}b\u{FFFD}\n                       c\td\n"
        );
    }
}
