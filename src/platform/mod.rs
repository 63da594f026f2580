//! The operating-system layer under the supervisor: starting a child as a member of a new
//! process group that dies with orchestrate, signalling and probing that group, watching
//! the child's exit without reaping it, and telling a process from a later one that reused
//! its pid.
//!
//! `unix.rs` holds what every Unix shares (process groups, `killpg`, `waitid`). Two things
//! differ, and each implementation provides them with the same names:
//! - `ParentDeathWatch`: how the child's group dies when orchestrate dies, even by SIGKILL.
//! - `process_start_time`: a process's start time, which with its pid names it uniquely.
//!
//! `linux.rs` uses the kernel's parent-death signal (`prctl(PR_SET_PDEATHSIG)`) and
//! `/proc/<pid>/stat`. `portable.rs` works on any Unix (macOS, the BSDs): a watchdog process
//! leads the child's group and kills it when orchestrate's end of a pipe closes, and start
//! times come from `ps`. Linux uses `linux.rs` unless the cargo feature `portable` asks
//! for `portable.rs`, so that the portable path is tested on Linux too.
//!
//! New ways of killing a whole tree (a subreaper, PID namespaces, cgroups) belong here,
//! behind the same functions.

#[cfg(not(unix))]
compile_error!(
    "orchestrate supports Unix only (Linux, macOS, the BSDs): it supervises its children \
     through process groups, POSIX signals and waitid"
);

#[cfg(all(target_os = "linux", not(feature = "portable")))]
#[path = "linux.rs"]
mod imp;
#[cfg(all(unix, any(not(target_os = "linux"), feature = "portable")))]
#[path = "portable.rs"]
mod imp;
mod unix;

pub(crate) use imp::process_start_time;
#[cfg(test)]
pub(crate) use imp::IMPLEMENTATION;
pub(crate) use unix::{
    group_exists, peek_exit, signal_group, spawn_in_new_group, LeaderExit, StartTime,
};
