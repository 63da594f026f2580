//! One orchestrate at a time makes or removes a worktree of a repository. git's own
//! bookkeeping is not safe against that: `git worktree add` first lists every worktree and
//! reads each one's `commondir` and `HEAD`, and a sibling `worktree add` half-way through
//! has created its `commondir` but not yet written it (git then dies with "failed to read
//! …/commondir: Success", after `-b` had already made the branch).
//!
//! The lock is an `flock` on the repository's shared git dir itself: it needs no file of
//! its own, holds across state directories and processes, and goes with the process that
//! held it, however that process ended.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::WorktreeError;

/// How long to wait for another orchestrate's worktree step on the same repository.
pub(crate) const REPO_LOCK_WAIT: Duration = Duration::from_secs(60);

/// Held while it lives.
pub(crate) struct RepoLock {
    _dir: Option<File>,
}

impl RepoLock {
    /// Waits (at most `wait`) for the lock of the repository whose shared git dir is
    /// `common_dir`. A file system without `flock` (some network ones) goes unlocked.
    pub(crate) fn acquire(common_dir: &Path, wait: Duration) -> Result<RepoLock, WorktreeError> {
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(common_dir)?;
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(2);
        loop {
            // SAFETY: flock on a descriptor we own.
            let r = unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if r == 0 {
                return Ok(RepoLock { _dir: Some(dir) });
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) => {}
                Some(libc::EINTR) => continue,
                _ => {
                    tracing::warn!(
                        "cannot lock {} ({e}); making the worktree without the lock",
                        common_dir.display()
                    );
                    return Ok(RepoLock { _dir: None });
                }
            }
            if Instant::now() >= deadline {
                return Err(WorktreeError::Locked {
                    dir: common_dir.display().to_string(),
                    waited_s: wait.as_secs(),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_and_gives_up_at_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let first = RepoLock::acquire(dir.path(), Duration::from_secs(1)).unwrap();
        let err = RepoLock::acquire(dir.path(), Duration::from_millis(100))
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            format!(
                "another process has held the worktree lock on {} for 0 s (an orchestrate making or removing a worktree of this repository)",
                dir.path().display()
            )
        );
        drop(first);
        assert!(RepoLock::acquire(dir.path(), Duration::from_millis(100)).is_ok());
    }
}
