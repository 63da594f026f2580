//! `orchestrate`: delegate a task to a supervised subagent CLI and get one uniform result.
//!
//! The folders name the concerns: `agents` (definitions and discovery), `backends` (one file
//! per child CLI: its command line and its JSONL dialect), `supervisor` (the child process:
//! spawn, timeouts, caps, kills, reaping), `sanitize` and `truncate` (what may leave the
//! process), `session` (run folders and the run index), `structured` (output schemas and
//! the JSON in an answer), `result` (the contract), `run`
//! (one run end to end: resolve, attempt, verdict, render), `observe` (what a run's
//! observers are handed as it happens, and its `events.jsonl`), `live` (runs in progress
//! as other processes read them, and stopping one), `cli` (the
//! command line) and `commands` (what each subcommand does and prints).
//!
//! The library's API is the command line (`cli`, `commands`), the result contract
//! (`result`) and the sanitizer (`sanitize`); everything else is internal.

// Public items in crate-private modules say more than they mean. (For the library only:
// the test crates' shared support modules are `pub` by necessity.)
#![warn(unreachable_pub)]

pub(crate) mod agents;
pub(crate) mod backends;
pub(crate) mod background;
pub mod cli;
pub(crate) mod cli_help;
pub(crate) mod collector;
pub mod commands;
pub(crate) mod config;
pub(crate) mod duration;
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod history;
pub(crate) mod limits;
pub(crate) mod live;
pub(crate) mod mcp;
pub(crate) mod observe;
pub(crate) mod platform;
pub mod result;
pub(crate) mod run;
pub(crate) mod runner;
pub(crate) mod sandbox;
pub mod sanitize;
pub(crate) mod session;
pub(crate) mod structured;
pub(crate) mod supervisor;
pub(crate) mod truncate;
pub(crate) mod worktree;

/// Entry points for the fuzz targets; not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    use crate::backends::DialectKind;
    use crate::collector::Collector;

    /// Feeds `text`, line by line, through every dialect into a collector, then reads
    /// everything a result reads from the collector. Nothing may panic.
    pub fn every_dialect(text: &str) {
        for kind in DialectKind::ALL {
            let mut parser = kind.parser();
            let mut collector = Collector::new();
            for line in text.split('\n') {
                if !parser.parse_line(line, &mut |e| {
                    collector.apply(e);
                }) {
                    collector.note_skipped_line();
                }
            }
            let _ = collector.usage();
            let _ = collector.display_items();
            let _ = collector.final_text();
            let _ = collector.partial_text();
            let _ = collector.provider_error();
            let _ = collector.session_id();
            let _ = collector.terminal_seen();
        }
    }
}
