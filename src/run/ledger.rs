//! The tree's ledger: how a nested orchestrate tells the orchestrate above it what its
//! tree has spent.
//!
//! The parent gives a child that may start orchestrate runs a folder of its own in the
//! run folder, `child/ledger/`, writable by the child even in its sandbox (it is the
//! child's own place), and names it in `ORCHESTRATE_TREE_LEDGER`. Each nested orchestrate
//! process writes one file there, `<its run id>.json`: its tree's whole spend so far, as a
//! usage object, replaced whole (written beside and renamed) whenever it changes. The
//! parent polls the folder and adds the files up as that child's nested spend. The one
//! word that goes down: once the tree's budget is spent, the parent leaves the mark
//! `spent` in the folder, and the nested runs stop their children for it.
//!
//! Files, not a socket: a folder the child may write is all the sandbox leaves it (a
//! socket in orchestrate's state directory may be hidden from it), a file needs nothing
//! running on either side, and it works where the child runs on another node through a
//! shared filesystem. Everything in the folder is the child's to write, so its parent
//! reads it as untrusted: regular files only (no link followed, no FIFO opened
//! blocking), a few KiB each, a bounded number of them, every number checked.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;

use super::total::TotalBudget;
use crate::result::Usage;
use crate::sandbox::CHILD_DIR;

/// The folder a nesting child's runs report in, in its own place in the run folder.
const LEDGER_DIR: &str = "ledger";
/// How often a parent looks at a nesting child's ledger. A nested run's report reaches
/// the root within this per level: well inside the time a model takes for a turn.
pub(crate) const LEDGER_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// The most files a parent reads in one ledger folder; a child writing more is
/// counted for these.
pub(crate) const MAX_LEDGER_FILES: usize = 64;
/// The most bytes of one ledger file read: a usage object takes about 100.
pub(crate) const MAX_LEDGER_FILE_BYTES: u64 = 4096;

/// Where the orchestrate runs a nesting child starts report their spend: `child/ledger`
/// in the run folder `run_dir`.
pub(crate) fn dir(run_dir: &Path) -> PathBuf {
    run_dir.join(CHILD_DIR).join(LEDGER_DIR)
}

/// Creates the ledger folder, private to the user.
pub(crate) fn create_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The mark a parent leaves in a nesting child's ledger folder once the tree's budget is
/// spent: the orchestrate runs below stop their children for it (with the tree's budget
/// as the reason) instead of waiting to be stopped. A child may make it too, which stops
/// only its own tree.
const SPENT_MARK: &str = "spent";

/// Leaves the spent mark in `dir` (best effort: whatever a child put there in its place
/// is not followed, and opening never blocks).
pub(crate) fn mark_spent(dir: &Path) {
    let Ok(dir) = open_folder(dir) else {
        return;
    };
    let _ = openat(
        &dir,
        SPENT_MARK,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    );
}

/// Opens the ledger folder itself, not a link the child put in its place (`child/` is
/// the child's to write): what is read or written there goes through this descriptor.
fn open_folder(dir: &Path) -> std::io::Result<OwnedFd> {
    File::options()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
        .map(OwnedFd::from)
}

/// Whether the orchestrate above marked the tree's budget spent in `dir`.
pub(crate) fn is_spent(dir: &Path) -> bool {
    dir.join(SPENT_MARK).symlink_metadata().is_ok()
}

/// Whether the orchestrate that started this process marked the tree's budget spent.
pub(crate) fn spent_above() -> bool {
    std::env::var_os(super::total::TREE_LEDGER_VAR)
        .filter(|d| !d.is_empty())
        .is_some_and(|d| is_spent(Path::new(&d)))
}

/// Cancels `reached` once the orchestrate above marks the tree's budget spent in `dir`,
/// looking every [`LEDGER_POLL_INTERVAL`]; stops looking when `stop` is cancelled. Must
/// be called within the runtime.
pub(crate) fn watch_spent(
    dir: PathBuf,
    reached: tokio_util::sync::CancellationToken,
    stop: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(LEDGER_POLL_INTERVAL);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = reached.cancelled() => return,
                _ = interval.tick() => {}
            }
            if is_spent(&dir) {
                reached.cancel();
                return;
            }
        }
    });
}

/// Writes one orchestrate's spend for the orchestrate above it.
#[derive(Debug)]
pub(crate) struct LedgerWriter {
    file: PathBuf,
    tmp: PathBuf,
    /// One warning when the folder cannot be written, not one per report.
    warned: AtomicBool,
}

impl LedgerWriter {
    /// The file `<id>.json` in `dir`, the folder the parent named.
    pub(crate) fn new(dir: &Path, id: &str) -> LedgerWriter {
        LedgerWriter {
            file: dir.join(format!("{id}.json")),
            tmp: dir.join(format!(".{id}.json.tmp")),
            warned: AtomicBool::new(false),
        }
    }

    /// Replaces the file with `spent`, whole: a reader sees the last report or this one.
    pub(crate) fn write(&self, spent: &Usage) {
        let result = (|| -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&self.tmp)?;
            f.write_all(&serde_json::to_vec(spent).map_err(std::io::Error::other)?)?;
            drop(f);
            std::fs::rename(&self.tmp, &self.file)
        })();
        if let Err(e) = result {
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "cannot report this run's spend to the orchestrate that started it ({}): {e}; its tree budget counts only what it sees itself",
                    self.file.display()
                );
            }
        }
    }
}

/// The sum of the reports in `dir`: its first [`MAX_LEDGER_FILES`] `*.json` regular
/// files of at most [`MAX_LEDGER_FILE_BYTES`], each a usage object with sane numbers
/// (anything else is skipped).
pub(crate) fn read(dir: &Path) -> Usage {
    let Ok(folder) = open_folder(dir) else {
        return Usage::default();
    };
    // The names may come from a folder swapped in since: each file is opened in the one
    // held.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Usage::default();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".json") && !name.starts_with('.')
        })
        .take(MAX_LEDGER_FILES)
        .filter_map(|e| read_report(&folder, &e.file_name()))
        .fold(Usage::default(), |acc, u| super::total::sum(&acc, &u))
}

fn read_report(folder: &OwnedFd, name: &std::ffi::OsStr) -> Option<Usage> {
    // O_NONBLOCK: a FIFO put there opens at once instead of waiting for a writer.
    let f = File::from(
        openat(
            folder,
            name,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?,
    );
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_LEDGER_FILE_BYTES {
        return None;
    }
    let mut text = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_LEDGER_FILE_BYTES).read_to_end(&mut text).ok()?;
    let u: Usage = serde_json::from_slice(&text).ok()?;
    (u.cost.is_finite() && u.cost >= 0.0).then_some(u)
}

/// Watches a nesting child's ledger while it runs, adding what its nested runs report
/// to task `task` of `total`. Stops (after a last look) when dropped.
pub(crate) struct Watch {
    stop: tokio_util::sync::CancellationToken,
    dir: PathBuf,
    total: Arc<TotalBudget>,
    task: usize,
}

impl Watch {
    /// Must be called within the runtime.
    pub(crate) fn start(dir: PathBuf, total: Arc<TotalBudget>, task: usize) -> Watch {
        total.nesting(&dir);
        let stop = tokio_util::sync::CancellationToken::new();
        let (d, t, s) = (dir.clone(), total.clone(), stop.clone());
        tokio::spawn(async move {
            let mut seen: Option<SystemTime> = None;
            let mut ticks: u32 = 0;
            let mut interval = tokio::time::interval(LEDGER_POLL_INTERVAL);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut marked = false;
            loop {
                tokio::select! {
                    _ = s.cancelled() => return,
                    // Reached from above (or marked here already): the runs below stop too.
                    _ = t.reached.cancelled(), if !marked => {
                        mark_spent(&d);
                        marked = true;
                        continue;
                    }
                    _ = interval.tick() => {}
                }
                // A report is a rename into the folder, which changes its mtime; the
                // files are read only then (and every second, whatever the clock did).
                let mtime = std::fs::metadata(&d).and_then(|m| m.modified()).ok();
                ticks = ticks.wrapping_add(1);
                if mtime.is_some() && (mtime != seen || ticks % 20 == 0) {
                    seen = mtime;
                    t.report_nested(task, &read(&d));
                }
            }
        });
        Watch {
            stop,
            dir,
            total,
            task,
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.cancel();
        self.total.report_nested(self.task, &read(&self.dir));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn reports_are_summed_and_whatever_else_is_in_the_folder_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let a = Usage {
            input: 100,
            output: 10,
            cost: 0.25,
            turns: 2,
            ..Usage::default()
        };
        LedgerWriter::new(d, "aaaa0001").write(&a);
        LedgerWriter::new(d, "aaaa0002").write(&a);
        // Not reports: a link, a FIFO, a huge file, garbage, a negative cost, a temp file.
        std::os::unix::fs::symlink(d.join("aaaa0001.json"), d.join("link.json")).unwrap();
        nix::unistd::mkfifo(&d.join("fifo.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::write(d.join("big.json"), vec![b' '; 5000]).unwrap();
        std::fs::write(d.join("junk.json"), "not json").unwrap();
        std::fs::write(d.join("neg.json"), r#"{"cost": -5}"#).unwrap();
        std::fs::write(d.join("huge.json"), r#"{"input": 1e999}"#).unwrap();
        std::fs::write(d.join(".x.json.tmp"), r#"{"cost": 9}"#).unwrap();
        assert_eq!(
            read(d),
            Usage {
                input: 200,
                output: 20,
                cost: 0.5,
                turns: 4,
                ..Usage::default()
            }
        );
        // A report replaces the one before.
        LedgerWriter::new(d, "aaaa0002").write(&Usage::default());
        assert_eq!(read(d).cost, 0.25);
        assert_eq!(read(&d.join("missing")), Usage::default());
    }

    #[test]
    fn the_spent_mark_follows_no_link_and_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(!is_spent(d));
        mark_spent(d);
        assert!(is_spent(d));
        // A child's link in its place: the mark is not written through it.
        let other = tempfile::tempdir().unwrap();
        let target = other.path().join("target");
        std::fs::write(&target, "mine").unwrap();
        let linked = d.join("linked");
        std::fs::create_dir(&linked).unwrap();
        std::os::unix::fs::symlink(&target, linked.join(SPENT_MARK)).unwrap();
        mark_spent(&linked);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "mine");
        // A FIFO with no reader: opening it fails at once instead of waiting.
        let fifo = d.join("fifo");
        std::fs::create_dir(&fifo).unwrap();
        nix::unistd::mkfifo(&fifo.join(SPENT_MARK), nix::sys::stat::Mode::S_IRWXU).unwrap();
        mark_spent(&fifo);
        assert!(is_spent(&fifo));
    }

    /// The child owns `child/`, so it can put a link where its ledger folder was: the
    /// parent then neither writes its mark into the folder the link names (a file of the
    /// user's) nor reads reports from there.
    #[test]
    fn a_ledger_folder_swapped_for_a_link_is_neither_written_nor_read() {
        let dir = tempfile::tempdir().unwrap();
        let users = dir.path().join("users");
        std::fs::create_dir(&users).unwrap();
        std::fs::write(users.join("usage.json"), r#"{"input": 7}"#).unwrap();
        let ledger = dir.path().join("ledger");
        std::os::unix::fs::symlink(&users, &ledger).unwrap();
        mark_spent(&ledger);
        assert_eq!(
            std::fs::read_dir(&users)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect::<Vec<_>>(),
            vec!["usage.json".to_string()]
        );
        assert!(!is_spent(&ledger));
        assert_eq!(read(&ledger), Usage::default());
    }

    #[test]
    fn saturating_sums_survive_absurd_reports() {
        let dir = tempfile::tempdir().unwrap();
        for id in ["a", "b"] {
            std::fs::write(
                dir.path().join(format!("{id}.json")),
                format!(r#"{{"input": {}}}"#, u64::MAX),
            )
            .unwrap();
        }
        assert_eq!(read(dir.path()).input, u64::MAX);
    }
}
