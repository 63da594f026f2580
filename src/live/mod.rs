//! Runs as they happen, read from the state directory that orchestrate processes write,
//! with no server: each run's `events.jsonl` (what it does), whether the orchestrate
//! that supervises it is alive, the states of nested runs (a child's own orchestrate
//! keeps its runs in `runs/<id>/child/state` of the run that started it, when the
//! sandbox gives it one), and stop requests (`stop`).

pub(crate) mod stop;
pub(crate) mod tree;

use std::path::{Path, PathBuf};

use crate::background;
use crate::observe::events_file::pid_namespace;
use crate::observe::line::{Event, Supervisor, Tail, EVENTS_FILE};
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
/// supervisor's liveness, or, where that cannot be checked (a nested run's), the run
/// that started it.
pub(crate) fn still_running(run_dir: &Path, supervisor: Option<&Supervisor>) -> bool {
    match supervisor.map(Liveness::of) {
        Some(Liveness::Alive) => true,
        Some(Liveness::Dead) => false,
        // A run that wrote no first line yet: as its folder says (a background run has
        // its supervisor's record from the start).
        None => matches!(
            background::state(&RunDir {
                path: run_dir.to_path_buf(),
            }),
            Ok(background::RunState::Running(_))
        ),
        Some(Liveness::Unknown) => parent_run_dir(run_dir).is_some_and(|parent| {
            let mut progress = Progress::default();
            let mut tail = Tail::new(parent.join(EVENTS_FILE));
            while let Ok(lines) = tail.read() {
                if lines.is_empty() {
                    break;
                }
                lines.iter().for_each(|l| progress.take(&l.event));
            }
            !progress.ended && still_running(&parent, progress.supervisor.as_ref())
        }),
    }
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
