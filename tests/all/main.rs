//! The integration tests that run under the standard harness, one module per behaviour,
//! in one binary: each test binary links the whole crate, so 35 of them cost
//! 35 links after every change. The contract harnesses (`contract_*`,
//! `e2e_mcp_parent`, `slurm`), which have a `main` of their own, the mock LLM's self-test,
//! the sanitizer's corpus, `traces` (with the mock LLM's OTLP receiver) and `memory` stay
//! binaries of their own (`memory` reads the peak RSS of the orchestrate it starts, which
//! counts the pages of the process it was forked from: this binary's, grown by every other
//! test, would swamp it).
//!
//! One module: `cargo test --test all hostile::` (or a test's name).

#[path = "../support/mod.rs"]
mod support;

mod acp;
mod agents_cli;
mod background;
mod budgets;
mod cli_errors;
mod config_cli;
mod events;
mod fallback;
mod fanout;
mod history_cli;
mod hostile;
mod liveness;
mod lossy_text;
mod mcp_elicit;
mod mcp_server;
mod network;
mod odd_usage;
mod output_limits;
mod process_tree;
mod progress_tty;
mod refusals;
mod resume;
mod retries;
mod run_success;
mod sandbox;
mod sanitizing;
mod send;
mod settings_precedence;
mod signals;
mod state_dir;
mod streaming;
mod structured;
mod text_summary;
mod timeouts;
mod watch;
mod worktree_attacks;
mod worktrees;
