//! What each subcommand does and prints. `main.rs` only parses arguments and calls these.

pub mod agents;
pub mod run;
