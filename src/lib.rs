//! `orchestrate`: delegate a task to a supervised subagent CLI and get one uniform result.
//!
//! The modules, from the bottom floor up; each stands on the floors below it (no module
//! depends on itself through others: `layering` checks it).
//!
//! - The contract: `result` (what every surface returns; it names no other module) and
//!   `units` (durations, dollars and counts, one parser each).
//! - What a run is asked for: `settings` (every setting, declared once, read from every
//!   surface), `config` (config files and the environment), `agents` (definitions and
//!   discovery), `structured` (output schemas and the JSON in an answer).
//! - The child: `backends` (one file per child CLI: its command line and its JSONL
//!   dialect), `events` and `collector` (the normalized events and what a result is folded
//!   from), `supervisor` (spawn, timeouts, caps, kills, reaping) over `platform` (the
//!   operating system), `sandbox`, `runner` and `worktree` (where the child runs and what
//!   holds it), `session` (run folders and the run index).
//! - What may leave the process: `sanitize`, `truncate`; `history` (reading the index).
//! - One run end to end: `run` (resolve, attempt, verdict, render), refusing with `error`;
//!   `observe` (what a run's observers are handed as it happens: its `events.jsonl`, traces).
//! - Runs as other processes see them: `live` (runs in progress read from the state
//!   directory, and stopping one).
//! - The surfaces: `cli` (the command line), `commands` (what each subcommand does and
//!   prints), `mcp` (the MCP server), `background` (detached runs).
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
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod history;
#[cfg(test)]
mod layering;
pub(crate) mod limits;
pub(crate) mod live;
pub(crate) mod mcp;
pub(crate) mod network;
pub(crate) mod observe;
pub(crate) mod platform;
pub mod result;
pub(crate) mod run;
pub(crate) mod runner;
pub(crate) mod sandbox;
pub mod sanitize;
pub(crate) mod session;
pub(crate) mod settings;
pub(crate) mod structured;
pub(crate) mod supervisor;
pub(crate) mod truncate;
pub(crate) mod units;
pub(crate) mod worktree;

/// Entry points for the fuzz targets; not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    use crate::backends::Backend;
    use crate::collector::Collector;

    /// Feeds `text`, line by line, through every dialect into a collector, then reads
    /// everything a result reads from the collector. Nothing may panic.
    pub fn every_dialect(text: &str) {
        // The ACP dialect talks, but reads a stream like the others.
        for kind in Backend::dialects().chain(Backend::parse("acp").ok()) {
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
            let _ = collector.usage_saturated();
            let _ = collector.reported();
            for odd in collector.odd_fields() {
                let _ = (odd.problem.to_string(), odd.problem.consequence());
            }
        }
    }
}
