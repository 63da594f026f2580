//! Stopping one run of an orchestrate that may run several (a task of a fan-out, a call
//! of an MCP server), from another process, with no server: the one asking writes
//! [`STOP_REQUEST_FILE`] in the run's folder and sends the run's supervisor
//! [`STOP_SIGNAL`] (only once its pid and start time are checked to be that process's);
//! the supervisor, which listens for the signal, stops each of its runs whose folder
//! holds a request, as a signal to orchestrate stops a run: gracefully the first time,
//! at once the second.
//!
//! A supervisor says that it listens in its runs' `events.jsonl` (`stopSignal`): the
//! signal's default action would end a process that does not.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use nix::sys::signal::Signal;
use tokio_util::sync::CancellationToken;

use super::Liveness;
use crate::observe::line::{Supervisor, Tail, EVENTS_FILE};
use crate::session::{RunDir, RunId, StateDir};
use crate::supervisor::Controls;

pub(crate) const STOP_REQUEST_FILE: &str = "stop-request";
pub(crate) const STOP_SIGNAL: Signal = Signal::SIGUSR1;

/// The runs of this process that a request can stop.
static LIVE: Mutex<Vec<LiveRun>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

struct LiveRun {
    key: u64,
    dir: PathBuf,
    cancel: CancellationToken,
    kill: CancellationToken,
    requests: u32,
}

/// A run that a request can stop, until this is dropped.
#[must_use]
pub(crate) struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|r| r.key != self.0);
    }
}

/// The run in `dir` can be stopped on its own: its controls, which the process's still
/// stop too, and its registration.
pub(crate) fn register(dir: &Path, controls: &Controls) -> (Controls, Registration) {
    // A request left from before (a reused background folder) is not for this run.
    let _ = std::fs::remove_file(dir.join(STOP_REQUEST_FILE));
    let own = Controls {
        cancel: controls.cancel.child_token(),
        kill: controls.kill.child_token(),
        budget: controls.budget.clone(),
    };
    let key = NEXT.fetch_add(1, Ordering::Relaxed);
    LIVE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(LiveRun {
            key,
            dir: dir.to_path_buf(),
            cancel: own.cancel.clone(),
            kill: own.kill.clone(),
            requests: 0,
        });
    (own, Registration(key))
}

/// Listens for [`STOP_SIGNAL`] for as long as the runtime runs. Call once per process,
/// before its runs start.
pub(crate) fn listen() -> io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut usr1 = signal(SignalKind::user_defined1())?;
    crate::observe::events_file::announce_stop_signal(STOP_SIGNAL.as_str());
    Ok(tokio::spawn(async move {
        while usr1.recv().await.is_some() {
            stop_requested();
        }
    }))
}

/// Stops each run whose folder holds a request (the request is used up).
fn stop_requested() {
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    for run in live.iter_mut() {
        if std::fs::remove_file(run.dir.join(STOP_REQUEST_FILE)).is_err() {
            continue;
        }
        run.requests += 1;
        if run.requests == 1 {
            tracing::info!("a stop request: stopping the run in {}", run.dir.display());
            run.cancel.cancel();
        } else {
            run.kill.cancel();
        }
    }
}

/// Why a run could not be asked to stop.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StopError {
    #[error("its orchestrate (pid {0}) has ended")]
    NotRunning(u32),
    #[error("its orchestrate runs in another PID namespace (a sandboxed child's): stop the run that started it")]
    OtherNamespace,
    #[error("its orchestrate (pid {0}) takes no stop requests (an older version): stop that orchestrate, or wait")]
    NotListening(u32),
    #[error("cannot write the stop request in {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot signal its orchestrate (pid {pid}): {source}")]
    Signal {
        pid: u32,
        #[source]
        source: io::Error,
    },
}

/// Asks the supervisor of the run in `run_dir` to stop it.
pub(crate) fn request(run_dir: &Path, supervisor: &Supervisor) -> Result<(), StopError> {
    let pid = supervisor.process.pid;
    match Liveness::of(supervisor) {
        Liveness::Alive => {}
        Liveness::Dead => return Err(StopError::NotRunning(pid)),
        Liveness::Unknown => return Err(StopError::OtherNamespace),
    }
    if supervisor.stop_signal.as_deref() != Some(STOP_SIGNAL.as_str()) {
        return Err(StopError::NotListening(pid));
    }
    let path = run_dir.join(STOP_REQUEST_FILE);
    crate::session::create_private_file(&path)
        .map_err(|source| StopError::Write { path, source })?;
    crate::background::signal_supervisor(&supervisor.process, STOP_SIGNAL)
        .map_err(|source| StopError::Signal { pid, source })
}

/// Asks the orchestrate that runs `run_id` (found by its `events.jsonl`, in the state
/// directory or a nested run's) to stop that run alone. The run's own result says how it
/// ended once it has.
pub(crate) fn request_run(state: &StateDir, run_id: &RunId) -> Result<RunDir, String> {
    let dir = super::find_run_dir(state, run_id)
        .ok_or_else(|| format!("no run {run_id} (see `orchestrate runs`)"))?;
    if let Some(parent) = super::parent_run_dir(&dir.path) {
        // A nested run's records are its parent's child's data: the pid they name may be
        // any process's, so no signal goes to it. Stopping the parent stops its tree.
        let parent = parent.file_name().unwrap_or_default().to_string_lossy();
        return Err(format!(
            "run {run_id} was started by the child of run {parent}: stop run {parent}"
        ));
    }
    let mut tail = Tail::new(dir.path.join(EVENTS_FILE));
    let mut progress = super::Progress::default();
    loop {
        let lines = tail
            .read()
            .map_err(|e| format!("cannot read {}: {e}", tail.path().display()))?;
        if lines.is_empty() {
            break;
        }
        lines.iter().for_each(|l| progress.take(&l.event));
    }
    if progress.ended || dir.result_file().exists() {
        return Err(format!("run {run_id} has already ended"));
    }
    let supervisor = progress.supervisor.ok_or_else(|| {
        format!("run {run_id} has no events yet (or was recorded by an older orchestrate)")
    })?;
    request(&dir.path, &supervisor).map_err(|e| format!("cannot stop run {run_id}: {e}"))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_stops_only_the_run_it_names_then_kills_it() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let process = Controls::default();
        let (run_a, reg_a) = register(&a, &process);
        let (run_b, _reg_b) = register(&b, &process);
        std::fs::write(a.join(STOP_REQUEST_FILE), "").unwrap();
        stop_requested();
        assert!(run_a.cancel.is_cancelled() && !run_a.kill.is_cancelled());
        assert!(!run_b.cancel.is_cancelled() && !process.cancel.is_cancelled());
        assert!(!a.join(STOP_REQUEST_FILE).exists(), "used up");
        std::fs::write(a.join(STOP_REQUEST_FILE), "").unwrap();
        stop_requested();
        assert!(run_a.kill.is_cancelled());
        // Once its run is over, a request does nothing.
        drop(reg_a);
        std::fs::write(a.join(STOP_REQUEST_FILE), "").unwrap();
        stop_requested();
        assert!(a.join(STOP_REQUEST_FILE).exists());
        // The process's own stop still stops every run.
        process.cancel.cancel();
        assert!(run_b.cancel.is_cancelled());
    }
}
