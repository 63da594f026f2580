//! The supervisor: runs one child in its own process group and returns a typed outcome.
//!
//! One `select!` loop per child (`event_loop.rs`) drives an explicit state machine
//! (`lifecycle.rs`) whose phases hold their deadlines: running, exit grace after the
//! dialect's final event, cancelling (a talking child asked through its own protocol to
//! stop), terminating (SIGTERM sent, SIGKILL due), killed, and draining after the leader
//! exited. Every path ends with the group killed and the leader reaped.
//!
//! A child orchestrate talks to has its stdin as a pipe (`channel.rs`): writers queue
//! lines on a [`ChildInput`], and the loop writes them as the child reads.
//! The operating-system calls are in `crate::platform`.

mod channel;
mod event_loop;
mod framing;
mod lifecycle;
mod outcome;
#[cfg(test)]
mod tests;

pub(crate) use crate::platform::LeaderExit;
pub(crate) use channel::ChildInput;
#[cfg(test)]
pub(crate) use channel::InputError;
pub(crate) use event_loop::{supervise, ChildSpec, Controls, LineSink, OutputSinks};
pub(crate) use lifecycle::StreamFacts;
pub(crate) use outcome::{Outcome, StopReason, SuperviseError};
