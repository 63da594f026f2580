//! The sandbox of a child that runs on another machine (a cluster's node). orchestrate's
//! own process there is `orchestrate sandbox-exec PLAN`, which the runner's command starts
//! in front of the agent's: it builds the same sandbox a local run gets ([`confinement`],
//! then `platform::spawn`), with the node's own namespaces, Landlock and seccomp, relays
//! the child's output, and exits with its status (`commands/sandbox_exec.rs`).
//!
//! What crosses over:
//! - The plan ([`NodePlan`]): the sandbox's inputs (mode, network, the backend, the run's
//!   places) and the agent's command line, written by orchestrate into the run folder, its
//!   own record, which every child sees read-only. The run folder, the workspace and
//!   orchestrate's binary must be at the same paths on the node: a shared filesystem.
//! - The child's environment: the runner's command carries orchestrate's (`srun
//!   --export=ALL`), and `sandbox-exec` scrubs it there as a local run's is scrubbed.
//! - The layers that held: the first line `sandbox-exec` writes on stderr, before the
//!   child's output is relayed, so the child cannot write before it ([`report_line`],
//!   [`parse_report`]); orchestrate's stderr reader takes it off the stream.
//!
//! [`confinement`]: super::confinement

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{SandboxMode, SandboxPlan};
use crate::platform::{layer, Layers};
use crate::result::Network;

/// The hidden command orchestrate starts on the node.
pub(crate) const COMMAND: &str = "sandbox-exec";

/// What the first stderr line of `sandbox-exec` starts with.
pub(crate) const REPORT_PREFIX: &str = "orchestrate-sandbox: ";

/// The longest report line read; one is a few hundred bytes.
pub(crate) const MAX_REPORT_BYTES: usize = 16 * 1024;

/// Everything `sandbox-exec` needs on the node, as the run folder keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct NodePlan {
    pub mode: SandboxMode,
    pub network: Network,
    /// The mode was asked for: a layer the node cannot build refuses the run there.
    pub requested: bool,
    /// The backend whose CLI the child runs (its homes, its login).
    pub backend: String,
    pub state_root: PathBuf,
    pub run_dir: PathBuf,
    pub workspace: Vec<PathBuf>,
    pub git: Vec<PathBuf>,
    pub nests: bool,
    /// The agent's command line and where it starts.
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanError {
    #[error("the agent's command line is not UTF-8 ({0:?}), which a plan for the node must be")]
    NotUtf8(std::ffi::OsString),
    #[error("cannot read the sandbox plan {} here (the run folder must be on a filesystem the node shares, at the same path): {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the sandbox plan {} is malformed: {source}", path.display())]
    Malformed {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl NodePlan {
    /// The plan of `sandbox` for the agent's command line.
    pub(crate) fn new(
        sandbox: &SandboxPlan,
        network: Network,
        backend: &str,
        places: &super::Places<'_>,
        program: &std::ffi::OsStr,
        args: &[std::ffi::OsString],
        cwd: &Path,
    ) -> Result<NodePlan, PlanError> {
        let utf8 = |s: &std::ffi::OsStr| {
            s.to_str()
                .map(str::to_string)
                .ok_or_else(|| PlanError::NotUtf8(s.to_os_string()))
        };
        Ok(NodePlan {
            mode: sandbox.mode,
            network,
            requested: sandbox.requested,
            backend: backend.to_string(),
            state_root: places.state_root.to_path_buf(),
            run_dir: places.run_dir.to_path_buf(),
            workspace: places.workspace.to_vec(),
            git: places.git.to_vec(),
            nests: places.nests,
            program: utf8(program)?,
            args: args.iter().map(|a| utf8(a)).collect::<Result<_, _>>()?,
            cwd: cwd.to_path_buf(),
        })
    }

    /// The plan as its file holds it.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("paths and strings serialize");
        bytes.push(b'\n');
        bytes
    }

    pub(crate) fn read(path: &Path) -> Result<NodePlan, PlanError> {
        let bytes = std::fs::read(path).map_err(|source| PlanError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|source| PlanError::Malformed {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The sandbox it asks for.
    pub(crate) fn sandbox(&self, mechanism: &'static str) -> SandboxPlan {
        SandboxPlan {
            mode: self.mode,
            mechanism: Some(mechanism),
            warning: None,
            requested: self.requested,
        }
    }
}

/// The name of attempt `n`'s plan in the run folder (`sandbox-exec.json`, and
/// `sandbox-exec.attempt-N.json` for a retry, as the session files are named).
pub(crate) fn plan_file_name(n: u32) -> String {
    match n {
        0 | 1 => format!("{COMMAND}.json"),
        n => format!("{COMMAND}.attempt-{n}.json"),
    }
}

/// Whether `network` holds on a node as it does here: a mode held by a process of
/// orchestrate's on this machine would not reach the child there.
pub(crate) fn network_reaches_node(network: Network) -> bool {
    match network {
        // `off` is the node's own network namespace, made by the node's controller.
        Network::On | Network::Off => true,
        // Its proxy runs where orchestrate does.
        Network::Provider => false,
    }
}

#[derive(Serialize, Deserialize)]
struct Report {
    held: Vec<String>,
    #[serde(default)]
    missing: Vec<(String, String)>,
}

/// The line `sandbox-exec` writes first: the layers that held on the node.
pub(crate) fn report_line(layers: &Layers) -> String {
    let report = Report {
        held: layers.held.iter().map(|l| l.to_string()).collect(),
        missing: layers
            .missing
            .iter()
            .map(|(l, why)| (l.to_string(), why.clone()))
            .collect(),
    };
    format!(
        "{REPORT_PREFIX}{}\n",
        serde_json::to_string(&report).expect("strings serialize")
    )
}

/// The layers of a report line; None if `line` is not one. Names this orchestrate does not
/// know are left out.
pub(crate) fn parse_report(line: &[u8]) -> Option<Layers> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let json = line.strip_prefix(REPORT_PREFIX.as_bytes())?;
    let report: Report = serde_json::from_slice(json).ok()?;
    let known = |name: &str| layer::ALL.iter().copied().find(|l| *l == name);
    Some(Layers {
        held: report.held.iter().filter_map(|l| known(l)).collect(),
        missing: report
            .missing
            .into_iter()
            .filter_map(|(l, why)| known(&l).map(|l| (l, why)))
            .collect(),
    })
}

/// Takes the report off a stream of stderr: holds the stream back up to the end of each
/// line until the report came, passes every other line on, and keeps the layers. The
/// first report is the one: `sandbox-exec` writes it before the child's output can reach
/// the stream, so the child cannot write one before it; later ones are the child's.
#[derive(Debug, Default)]
pub(crate) struct ReportReader {
    /// Held back while the report is awaited; None once it came (or cannot come).
    held: Option<Vec<u8>>,
    layers: Option<Layers>,
}

impl ReportReader {
    pub(crate) fn new() -> ReportReader {
        ReportReader {
            held: Some(Vec::new()),
            layers: None,
        }
    }

    /// Takes `chunk` in; returns what passes on now (None: all of `chunk`, as it is).
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Option<Vec<u8>> {
        let held = self.held.as_mut()?;
        held.extend_from_slice(chunk);
        let mut passed = Vec::new();
        while let Some(end) = held.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = held.drain(..=end).collect();
            if let Some(layers) = parse_report(&line) {
                self.layers = Some(layers);
                passed.append(held);
                self.held = None;
                return Some(passed);
            }
            passed.extend_from_slice(&line);
        }
        // A line this long is no report.
        if held.len() > MAX_REPORT_BYTES {
            passed.append(held);
            self.held = None;
        }
        Some(passed)
    }

    /// At the stream's end: what is still held back.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        self.held.take().unwrap_or_default()
    }

    /// The layers the report said held; None without a report.
    pub(crate) fn layers(&self) -> Option<&Layers> {
        self.layers.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_report_line_reads_back_as_the_layers_it_says() {
        let layers = Layers {
            held: vec![layer::PID_NAMESPACE, layer::MOUNTS, layer::SECCOMP],
            missing: vec![(layer::SCOPES, "Linux 6.12 is needed".to_string())],
        };
        let line = report_line(&layers);
        assert!(
            line.starts_with(REPORT_PREFIX) && line.ends_with('\n'),
            "{line}"
        );
        assert_eq!(parse_report(line.as_bytes()), Some(layers));
        // Not a report: anything else, or a report of names this build does not know.
        assert_eq!(parse_report(b"srun: error: something"), None);
        assert_eq!(parse_report(b"orchestrate-sandbox: {not json"), None);
        assert_eq!(
            parse_report(b"orchestrate-sandbox: {\"held\":[\"mounts\",\"teleport\"]}"),
            Some(Layers {
                held: vec![layer::MOUNTS],
                missing: Vec::new()
            })
        );
    }

    #[test]
    fn the_first_report_is_taken_off_the_stream_in_any_chunks_and_later_ones_are_passed_on() {
        let layers = Layers {
            held: vec![layer::MOUNTS, layer::SECCOMP],
            missing: Vec::new(),
        };
        let report = report_line(&layers);
        let forged = report_line(&Layers {
            held: vec![layer::NO_TTY],
            missing: Vec::new(),
        });
        let stream = format!("srun: warning\n{report}child says\n{forged}last");
        for size in [1, 2, 7, 64, stream.len()] {
            let mut reader = ReportReader::new();
            let mut passed = Vec::new();
            for chunk in stream.as_bytes().chunks(size) {
                match reader.push(chunk) {
                    Some(p) => passed.extend(p),
                    None => passed.extend_from_slice(chunk),
                }
            }
            passed.extend(reader.finish());
            assert_eq!(
                (String::from_utf8(passed).unwrap(), reader.layers()),
                (
                    format!("srun: warning\nchild says\n{forged}last"),
                    Some(&layers)
                ),
                "chunks of {size}"
            );
        }
        // No report: everything passes on, at the end if not before.
        let mut reader = ReportReader::new();
        assert_eq!(
            reader.push(b"error: no plan\npartial"),
            Some(b"error: no plan\n".to_vec())
        );
        assert_eq!(
            (reader.finish(), reader.layers()),
            (b"partial".to_vec(), None)
        );
        // A line too long to be a report ends the wait.
        let mut reader = ReportReader::new();
        let long = vec![b'x'; MAX_REPORT_BYTES + 1];
        assert_eq!(reader.push(&long), Some(long.clone()));
        assert_eq!(reader.push(report.as_bytes()), None);
        assert_eq!(reader.layers(), None);
    }

    #[test]
    fn a_plan_reads_back_as_written_and_a_malformed_one_says_where() {
        let dir = tempfile::tempdir().unwrap();
        let plan = NodePlan {
            mode: SandboxMode::ReadOnly,
            network: Network::Off,
            requested: true,
            backend: "pi".into(),
            state_root: "/s".into(),
            run_dir: "/s/runs/ab12cd34".into(),
            workspace: vec!["/w".into()],
            git: Vec::new(),
            nests: false,
            program: "pi".into(),
            args: vec!["-p".into(), "task".into()],
            cwd: "/w".into(),
        };
        assert_eq!(
            (plan_file_name(1), plan_file_name(2)),
            (
                "sandbox-exec.json".to_string(),
                "sandbox-exec.attempt-2.json".to_string()
            )
        );
        let path = dir.path().join(plan_file_name(1));
        std::fs::write(&path, plan.to_json()).unwrap();
        assert_eq!(NodePlan::read(&path).unwrap(), plan);
        std::fs::write(dir.path().join("bad.json"), "{\"mode\": 3}").unwrap();
        let err = NodePlan::read(&dir.path().join("bad.json")).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "the sandbox plan {}/bad.json is malformed: ",
                dir.path().display()
            )),
            "{err}"
        );
        let err = NodePlan::read(&dir.path().join("none.json")).unwrap_err();
        assert!(
            err.to_string().contains("a filesystem the node shares"),
            "{err}"
        );
    }
}
