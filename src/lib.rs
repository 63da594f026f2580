//! `orchestrate`: delegate a task to a supervised subagent CLI and get one uniform result.
//!
//! The folders name the concerns: `agents` (definitions and discovery), `backends` (one file
//! per child CLI: its command line and its JSONL dialect), `supervisor` (the child process:
//! spawn, timeouts, caps, kills, reaping), `sanitize` and `truncate` (what may leave the
//! process), `session` (run folders and the run index), `result` (the contract), `run`
//! (one run end to end) and `commands` (what each CLI subcommand prints).

pub mod agents;
pub mod backends;
pub mod background;
pub mod collector;
pub mod commands;
pub mod config;
pub mod duration;
pub mod events;
pub mod history;
pub mod limits;
pub mod mcp;
pub mod platform;
pub mod result;
pub mod run;
pub mod sanitize;
pub mod session;
pub mod supervisor;
pub mod truncate;
