//! Runs as they happen, read from the state directory that orchestrate processes write,
//! with no server: each run's `events.jsonl` (what it does), whether the orchestrate
//! that supervises it is alive, the states of nested runs (a child's own orchestrate
//! keeps its runs in `runs/<id>/child/state` of the run that started it, when the
//! sandbox gives it one), and stop requests (`stop`).

pub(crate) mod inbox;
pub(crate) mod stop;
pub(crate) mod tree;

use std::path::{Path, PathBuf};

use crate::background;
use crate::observe::events_file::pid_namespace;
use crate::observe::line::{Event, EventLine, Supervisor, EVENTS_FILE};
use crate::sandbox::{CHILD_DIR, NESTED_STATE};
use crate::session::{RunDir, RunId, StateDir};

/// Where a child's own orchestrate keeps its state, inside the run folder of the run
/// that started it (the child's place in it, which the sandbox gives the child).
fn child_state(run_dir: &Path) -> PathBuf {
    run_dir.join(CHILD_DIR).join(NESTED_STATE)
}

/// Whether the orchestrate supervising a run is alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    Alive,
    Dead,
    /// Its pid is in another PID namespace (a nested run in a sandbox): it cannot be
    /// checked from here.
    Unknown,
}

impl Liveness {
    pub(crate) fn of(supervisor: &Supervisor) -> Liveness {
        if supervisor.pid_ns.is_some() && supervisor.pid_ns != pid_namespace() {
            return Liveness::Unknown;
        }
        if background::is_same_process(&supervisor.process) {
            Liveness::Alive
        } else {
            Liveness::Dead
        }
    }
}

/// The run folder `id` names: in the state directory, else in the state of a child of
/// one of its runs (at any depth).
pub(crate) fn find_run_dir(state: &StateDir, id: &RunId) -> Option<RunDir> {
    let dir = state.run_dir(id);
    if dir.path.is_dir() {
        return Some(dir);
    }
    nested_states(&state.root)
        .into_iter()
        .find_map(|root| find_run_dir(&StateDir { root }, id))
}

/// The states of the children of this state's runs.
pub(crate) fn nested_states(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join("runs")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| RunId::parse(n).is_ok())
        })
        .map(|e| child_state(&e.path()))
        .filter(|p| p.join("runs").is_dir())
        .collect()
}

/// The run folder of the run whose child keeps `run_dir` in its state, if it is one.
pub(crate) fn parent_run_dir(run_dir: &Path) -> Option<PathBuf> {
    // <parent>/child/state/runs/<id>
    let parent = run_dir.parent()?.parent()?.parent()?.parent()?;
    (run_dir.parent()?.parent()? == child_state(parent)).then(|| parent.to_path_buf())
}

/// What a run's events say of its end, and its supervisor, as far as they have been read.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    pub supervisor: Option<Supervisor>,
    pub ended: bool,
}

impl Progress {
    pub(crate) fn take(&mut self, event: &Event) {
        match event {
            Event::Run(info) => self.supervisor = Some(info.supervisor.clone()),
            Event::End(_) => self.ended = true,
            _ => {}
        }
    }
}

/// Whether the run in `run_dir`, which has not ended, is still supervised: its
/// supervisor's liveness; for a nested run, the run that started it too.
pub(crate) fn still_running(run_dir: &Path, supervisor: Option<&Supervisor>) -> bool {
    let liveness = supervisor.map(Liveness::of);
    if let Some(parent) = parent_run_dir(run_dir) {
        // A nested run's records are its parent's child's writing, and its supervisor is
        // most often in the child's PID namespace: whatever they claim, the run lasts no
        // longer than the run that started it, whose end ends its whole tree.
        return liveness != Some(Liveness::Dead) && parent_still_running(&parent);
    }
    match liveness {
        Some(Liveness::Alive) => true,
        Some(Liveness::Dead | Liveness::Unknown) => false,
        // A run that wrote no first line yet: as its folder says (a background run has
        // its supervisor's record from the start).
        None => matches!(
            background::state(&RunDir {
                path: run_dir.to_path_buf(),
            }),
            Ok(background::RunState::Running(_))
        ),
    }
}

/// Whether the run in `run_dir`, which started a nested run, runs still: its first line
/// and its last (an end) say, without reading the rest of its events.
fn parent_still_running(run_dir: &Path) -> bool {
    let events = run_dir.join(EVENTS_FILE);
    let Ok(meta) = std::fs::metadata(&events) else {
        return still_running(run_dir, None);
    };
    let supervisor = match tree::read_first_line(&events) {
        Some(EventLine {
            event: Event::Run(info),
            ..
        }) => Some(info.supervisor),
        _ => None,
    };
    !tree::has_ended(&events, meta.len()) && still_running(run_dir, supervisor.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_runs_folder_names_its_parent_run() {
        assert_eq!(
            parent_run_dir(Path::new("/s/runs/ab12cd34/child/state/runs/cd34ab12")),
            Some(PathBuf::from("/s/runs/ab12cd34"))
        );
        assert_eq!(parent_run_dir(Path::new("/s/runs/cd34ab12")), None);
    }

    #[test]
    fn a_run_is_found_in_the_state_of_its_parents_child() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: dir.path().to_path_buf(),
        };
        let nested = dir
            .path()
            .join("runs/ab12cd34/child/state/runs/cd34ab12/child/state/runs/0000ffff");
        std::fs::create_dir_all(&nested).unwrap();
        let id = RunId::parse("0000ffff").unwrap();
        assert_eq!(find_run_dir(&state, &id).map(|d| d.path), Some(nested));
        assert_eq!(
            find_run_dir(&state, &RunId::parse("00001111").unwrap()),
            None
        );
    }
}
