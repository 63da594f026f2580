//! Linux: the kernel's parent-death signal, and start times from `/proc`.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::unix::StartTime;

#[cfg(test)]
pub(crate) const IMPLEMENTATION: &str = "linux";

/// The child gets SIGKILL from the kernel when orchestrate dies (`PR_SET_PDEATHSIG`). That
/// reaches the child only, not its descendants; they are left to the process group's end
/// and to the pipes they hold.
#[derive(Debug)]
pub(super) struct ParentDeathWatch;

impl ParentDeathWatch {
    /// Makes `cmd` start as the leader of a new group with the parent-death signal set.
    /// Must run on the spawner thread: the signal fires when the forking thread exits.
    pub(super) fn arm(cmd: &mut Command) -> io::Result<ParentDeathWatch> {
        cmd.process_group(0);
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // calls (prctl, getppid, raise).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl; then nobody will send
                // the signal, so die now instead of running orphaned.
                if libc::getppid() as u32 != parent {
                    libc::raise(libc::SIGKILL);
                }
                Ok(())
            });
        }
        Ok(ParentDeathWatch)
    }

    /// The child leads its own group.
    pub(super) fn pgid(&self) -> Option<u32> {
        None
    }

    pub(super) fn disarm(self) {}

    pub(super) fn reap(&mut self) {}

    pub(super) fn reap_if_dead(&mut self) {}
}

/// A live (not zombie) process's start time in clock ticks since boot (`/proc/<pid>/stat`
/// field 22), or None.
pub(crate) fn process_start_time(pid: u32) -> Option<StartTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain anything.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // fields[0] is the state (field 3); starttime is field 22.
    if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    let ticks: u64 = fields.get(19)?.parse().ok()?;
    Some(StartTime(ticks.to_string()))
}
