//! The supervisor: runs one child in its own process group and returns a typed outcome.
//!
//! One `select!` loop per child drives an explicit state machine (`Phase`): running, exit
//! grace after the dialect's final event, terminating (SIGTERM sent, SIGKILL due), killed,
//! and draining after the leader exited. Every path ends with the group killed and the
//! leader reaped.

mod framing;
mod imp;
mod outcome;
mod unix;

pub(crate) use imp::{supervise, ChildSpec, Controls, LineSink, OutputSinks};
pub(crate) use outcome::{Outcome, StopReason, SuperviseError};
pub(crate) use unix::LeaderExit;
