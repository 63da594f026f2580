//! Runners: where a child runs. `local` (the default) spawns it here; `slurm` hands its
//! command line to `srun`, so that it runs on a node of a Slurm cluster while orchestrate
//! supervises it as a local child (the stream, the limits, the stops). Named runners in the
//! config (`[runners.gpu] kind = "slurm"`, `args = ["--partition=gpu"]`) add the engine's
//! own options (a partition, an account, a constraint) without new flags.
//!
//! A runner is one implementation of [`Runner`] and one line of [`KINDS`]: the supervisor,
//! the verdict and the renderer drive it through the trait and name no engine. `local.rs`
//! is the trivial one; `slurm.rs` holds everything particular to Slurm (the `srun` command
//! line, the preflight, watching the job start and end, cancelling it); `watchdog.rs` is
//! the process that cancels a job once orchestrate is gone (docs/scale-out.md).

mod local;
mod slurm;
mod watchdog;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

pub(crate) use crate::result::{JobId, RunnerInfo};

/// Every engine a runner can use. A new engine is a file of this folder with its `KIND`,
/// and a line here.
const KINDS: &[&Kind] = &[&local::KIND, &slurm::KIND];

/// The runner a run uses unless told otherwise.
pub(crate) const LOCAL: &str = local::KIND.name;

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One engine: what the rest of orchestrate may know of it before a run starts.
pub struct Kind {
    /// `kind = "…"` in `[runners.NAME]`, the built-in runner's name (`--runner slurm`),
    /// and the result's `runner.kind`.
    name: &'static str,
    /// How messages name the engine ("Subagent could not run on Slurm: …").
    title: &'static str,
    /// The child runs here, in orchestrate's own process tree, and a result needs no
    /// `runner` to say where it ran. Else its sandbox is built where it runs, by
    /// `orchestrate sandbox-exec` in front of its command (`sandbox::remote`).
    here: bool,
    /// The runner of one attempt.
    start: fn(&JobSpec<'_>) -> Box<dyn Runner>,
    /// What the watchdog does with job `handle` (as the runner named it when it started
    /// the watchdog) once orchestrate died before the job settled: cancel it. Runs in the
    /// watchdog process, on a runtime of its own.
    abandon: fn(String) -> BoxFuture<'static, Result<(), String>>,
}

impl Kind {
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn title(&self) -> &'static str {
        self.title
    }

    pub(crate) fn here(&self) -> bool {
        self.here
    }

    pub(crate) fn parse(s: &str) -> Result<&'static Kind, RunnerError> {
        let s = s.trim();
        KINDS
            .iter()
            .copied()
            .find(|k| k.name == s)
            .ok_or_else(|| RunnerError::UnknownKind(s.to_string()))
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Kind) -> bool {
        self.name == other.name
    }
}

impl Eq for Kind {}

/// What one attempt asks of its runner.
#[derive(Debug, Clone)]
pub(crate) struct JobSpec<'a> {
    pub run_id: &'a str,
    /// 1-based, over every model of the run.
    pub attempt: u32,
    pub cwd: &'a Path,
    /// The engine's own backstop on the job: the runtime limit plus the kill grace.
    pub time_limit: Duration,
    /// How long the job may wait to be started.
    pub queue_timeout: Duration,
    /// The named runner's `args`, for the engine's command.
    pub args: &'a [String],
}

/// A command line to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    pub program: OsString,
    pub args: Vec<OsString>,
}

/// A stop the supervisor's lifecycle asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// SIGTERM, or what stands for it: the kill grace follows.
    Graceful,
    /// At once.
    Kill,
}

/// What the supervisor does to the process it started here, for a stop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LocalStop {
    /// Signal the process's tree now.
    pub signal: Option<Stop>,
    /// SIGKILL its tree after this long if it has not exited by then.
    pub kill_after: Option<Duration>,
}

/// The wait for an engine to start the child.
pub(crate) struct Queue {
    /// Given up on after this long (`queue_timeout`).
    pub timeout: Duration,
    /// Resolves once the engine has started the child, or ended it; never otherwise.
    /// Dropped, it stops looking.
    pub started: BoxFuture<'static, ()>,
}

/// How the process started here ended, for [`Runner::settle`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ended<'a> {
    /// Its exit code (128+N when signal N ended it).
    pub exit_code: i32,
    /// The last few KiB of its stderr.
    pub stderr_tail: &'a str,
    /// The engine was seen to start the child, or the child printed.
    pub started: bool,
}

/// What became of the child's job, as the engine tells it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Settled {
    /// Its id (None: the engine refused it before it had one, or could not be asked).
    pub job_id: Option<JobId>,
    /// Where it ran.
    pub node: Option<String>,
    /// The engine's final word on it (`COMPLETED`, `CANCELLED`, `NODE_FAIL`, …).
    pub state: Option<String>,
    /// Why it was waiting at the last look before it started (or was given up on).
    pub pending_reason: Option<String>,
    /// The engine failed the child (refused it, or ended it for reasons of its own), in
    /// the engine's words. Counts only where orchestrate did not stop the child.
    pub failure: Option<String>,
    /// What the result's `warnings` should say (a job the engine still lists as running).
    pub warnings: Vec<String>,
}

/// One attempt's child as an engine runs it: the runner contract of docs/scale-out.md.
/// The supervisor calls `prepare`, starts `wrap`'s command, waits out `queue`, asks `stop`
/// what a stop means, and `settle`s once the process it started is gone.
pub(crate) trait Runner: Send + fmt::Debug {
    /// Before anything is started: whether the engine can take the child (an error in its
    /// own words, said at once rather than after the engine's own retries), and whatever
    /// must clean up after the job should orchestrate die.
    fn prepare(&mut self) -> BoxFuture<'_, Result<(), EngineError>>;

    /// The command orchestrate starts here for `child`: the agent's command line, or a
    /// wrapper in front of it that has to run where the agent runs; it stays in front.
    fn wrap(&self, child: Launch) -> Launch;

    /// The wait before the engine starts the child; None: it starts at once. Called once,
    /// before the command is started.
    fn queue(&mut self) -> Option<Queue>;

    /// Carries out a stop through the engine; says what to do to the local process.
    /// `started`: the engine has started the child (a queued one is cancelled instead).
    fn stop(&mut self, stop: Stop, started: bool) -> LocalStop;

    /// After the local process exited and its tree was reaped: waits (bounded) until the
    /// engine is done with the child, and says what became of it. The run is over only
    /// then.
    fn settle<'a>(&'a mut self, ended: Ended<'a>) -> BoxFuture<'a, Settled>;

    /// Processes the local command leaves behind for a moment are the engine's own
    /// helpers (srun's), not descendants of the agent that outlived it.
    fn owns_local_leftovers(&self) -> bool {
        false
    }
}

/// The engine cannot take the child: in its own words.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EngineError {
    /// Its client command is not installed here (exit code 127, as a shell says).
    #[error(transparent)]
    NotInstalled(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Refused(Box<dyn std::error::Error + Send + Sync>),
}

/// A named runner from the config: `[runners.NAME]` with `kind` and `args`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerDef {
    pub kind: &'static Kind,
    /// Passed to the engine's command (`srun`) after orchestrate's own options, so that
    /// they may override them (`--time`, for one).
    pub args: Vec<String>,
}

/// The runner a run uses, with its name as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunnerChoice {
    pub name: String,
    pub kind: &'static Kind,
    pub args: Vec<String>,
}

impl Default for RunnerChoice {
    fn default() -> Self {
        RunnerChoice {
            name: LOCAL.to_string(),
            kind: &local::KIND,
            args: Vec::new(),
        }
    }
}

impl RunnerChoice {
    /// The runner of one attempt.
    pub(crate) fn start(&self, job: &JobSpec<'_>) -> Box<dyn Runner> {
        (self.kind.start)(job)
    }

    /// Its name when it is a named one (`gpu`), not a built-in one.
    pub(crate) fn named(&self) -> Option<&str> {
        (self.name != self.kind.name).then_some(self.name.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RunnerError {
    #[error("unknown runner kind {:?} (use {})", .0, kind_names(" or "))]
    UnknownKind(String),
    #[error("unknown runner {name:?} (use {}{named})", kind_names(", "))]
    UnknownName { name: String, named: String },
    #[error("runner {0:?} is built in and cannot be redefined")]
    BuiltIn(String),
}

/// The engines' names, for messages: `local, slurm` (`last` before the last one).
fn kind_names(last: &str) -> String {
    let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
    match names.split_last() {
        Some((tail, [])) => tail.to_string(),
        Some((tail, init)) => format!("{}{last}{tail}", init.join(", ")),
        None => String::new(),
    }
}

/// The runner called `name`: a named runner of the config, else a built-in one (each
/// engine is a runner of its own name, with no arguments; `[runners.slurm]` gives the
/// built-in `slurm` runner some).
pub(crate) fn select(
    name: &str,
    named: &BTreeMap<String, RunnerDef>,
) -> Result<RunnerChoice, RunnerError> {
    let name = name.trim();
    if let Some(def) = named.get(name) {
        return Ok(RunnerChoice {
            name: name.to_string(),
            kind: def.kind,
            args: def.args.clone(),
        });
    }
    match Kind::parse(name) {
        Ok(kind) => Ok(RunnerChoice {
            name: name.to_string(),
            kind,
            args: Vec::new(),
        }),
        Err(_) => Err(RunnerError::UnknownName {
            name: name.to_string(),
            named: named.keys().map(|k| format!(", {k}")).collect(),
        }),
    }
}

/// The hidden command a watchdog runs: `orchestrate runner-watchdog KIND HANDLE` (see
/// `watchdog.rs`). Returns its exit status.
pub(crate) fn serve_watchdog(kind: &str, handle: &str) -> i32 {
    match Kind::parse(kind) {
        Ok(kind) => watchdog::serve(kind.abandon, handle),
        Err(e) => {
            eprintln!("orchestrate runner-watchdog: {e}");
            crate::result::exit_status::USAGE
        }
    }
}

/// Reads `[runners]` of a config file: a table of tables, each with `kind` (required) and
/// `args` (a list of strings, optional).
pub(crate) fn parse_table(value: &toml::Value) -> Result<BTreeMap<String, RunnerDef>, String> {
    let toml::Value::Table(table) = value else {
        return Err(format!(
            "expected a table of runners ([runners.NAME] with kind and args), found {}",
            value.type_str()
        ));
    };
    let mut out = BTreeMap::new();
    for (name, def) in table {
        if name == LOCAL {
            return Err(RunnerError::BuiltIn(name.clone()).to_string());
        }
        let toml::Value::Table(def) = def else {
            return Err(format!(
                "runner {name:?}: expected a table with kind and args, found {}",
                def.type_str()
            ));
        };
        for key in def.keys() {
            if key != "kind" && key != "args" {
                return Err(format!(
                    "runner {name:?}: unknown key `{key}` (use kind and args)"
                ));
            }
        }
        let kind = match def.get("kind") {
            Some(toml::Value::String(s)) => {
                Kind::parse(s).map_err(|e| format!("runner {name:?}: {e}"))?
            }
            Some(v) => {
                return Err(format!(
                    "runner {name:?}: `kind` must be a string, found {}",
                    v.type_str()
                ))
            }
            None => {
                return Err(format!(
                    "runner {name:?}: `kind` is required ({})",
                    kind_names(" or ")
                ))
            }
        };
        let args = match def.get("args") {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s.clone()),
                    other => Err(format!(
                        "runner {name:?}: `args` must be a list of strings, found {} in it",
                        other.type_str()
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(v) => {
                return Err(format!(
                    "runner {name:?}: `args` must be a list of strings, found {}",
                    v.type_str()
                ))
            }
        };
        out.insert(name.clone(), RunnerDef { kind, args });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn named(text: &str) -> Result<BTreeMap<String, RunnerDef>, String> {
        let table: toml::Table = text.parse().unwrap();
        parse_table(&table["runners"])
    }

    #[test]
    fn named_runners_are_read_and_selected_before_the_built_in_ones() {
        let runners = named(
            "[runners.gpu]\nkind = \"slurm\"\nargs = [\"--partition=gpu\", \"--time=30\"]\n[runners.slurm]\nkind = \"slurm\"\nargs = [\"--account=a\"]\n",
        )
        .unwrap();
        assert_eq!(
            select("gpu", &runners).unwrap(),
            RunnerChoice {
                name: "gpu".into(),
                kind: &slurm::KIND,
                args: vec!["--partition=gpu".into(), "--time=30".into()],
            }
        );
        assert_eq!(select("slurm", &runners).unwrap().args, ["--account=a"]);
        assert_eq!(select("local", &runners).unwrap(), RunnerChoice::default());
        assert_eq!(
            select("slurm", &BTreeMap::new()).unwrap(),
            RunnerChoice {
                name: "slurm".into(),
                kind: &slurm::KIND,
                args: Vec::new(),
            }
        );
        assert_eq!(
            select("tpu", &runners).unwrap_err().to_string(),
            "unknown runner \"tpu\" (use local, slurm, gpu, slurm)"
        );
    }

    #[test]
    fn a_malformed_runner_table_says_what_is_wrong() {
        let cases = [
            (
                "[runners.a]\nargs = []\n",
                "runner \"a\": `kind` is required (local or slurm)",
            ),
            (
                "[runners.a]\nkind = \"k8s\"\n",
                "runner \"a\": unknown runner kind \"k8s\" (use local or slurm)",
            ),
            (
                "[runners.a]\nkind = \"slurm\"\nargs = \"-p x\"\n",
                "runner \"a\": `args` must be a list of strings, found string",
            ),
            (
                "[runners.a]\nkind = \"slurm\"\nargs = [1]\n",
                "runner \"a\": `args` must be a list of strings, found integer in it",
            ),
            (
                "[runners.a]\nkind = \"slurm\"\npartition = \"x\"\n",
                "runner \"a\": unknown key `partition` (use kind and args)",
            ),
            (
                "[runners.local]\nkind = \"slurm\"\n",
                "runner \"local\" is built in and cannot be redefined",
            ),
            (
                "[runners]\na = 1\n",
                "runner \"a\": expected a table with kind and args, found integer",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(named(text).unwrap_err(), want, "{text}");
        }
    }

    #[test]
    fn runner_info_serializes_to_its_documented_shape() {
        let info = RunnerInfo {
            kind: "slurm".into(),
            name: None,
            job_id: Some(JobId::Number(42)),
            node: Some("n3".into()),
            queue_wait_ms: 120,
            state: Some("COMPLETED".into()),
        };
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            serde_json::json!({"kind": "slurm", "jobId": 42, "node": "n3", "queueWaitMs": 120, "state": "COMPLETED"})
        );
        // A job id that is a name (a pod's) is a string, and both read back.
        let pod = RunnerInfo {
            job_id: Some(JobId::Name("orchestrate-ab12cd34".into())),
            ..info.clone()
        };
        assert_eq!(
            serde_json::to_value(&pod).unwrap()["jobId"],
            serde_json::json!("orchestrate-ab12cd34")
        );
        for info in [info, pod] {
            let back: RunnerInfo =
                serde_json::from_value(serde_json::to_value(&info).unwrap()).unwrap();
            assert_eq!(back, info);
        }
    }
}
