//! The five agent CLIs the contract tests run, each described for the shared scenarios:
//! how it is pointed at the mock and kept offline, and what it sends and prints.

pub mod claude;
pub mod codex;
pub mod gemini;
pub mod opencode;
pub mod pi;
