//! What each subcommand does and prints. `main.rs` only parses arguments and calls these.

pub mod agents;
pub mod background;
pub mod completions;
pub mod config;
pub mod run;
pub mod runs;
pub mod show;
