//! Runners: where a child runs. `local` (the default) spawns it here; `slurm` hands its
//! command line to `srun`, so that it runs on a node of a Slurm cluster while orchestrate
//! supervises it as a local child (the stream, the limits, the stops). Named runners in the
//! config (`[runners.gpu] kind = "slurm"`, `args = ["--partition=gpu"]`) add the engine's
//! own options (a partition, an account, a constraint) without new flags.
//!
//! `slurm.rs` holds what is particular to Slurm: the `srun` command line, the preflight,
//! watching the job start and end, and cancelling it.

pub(crate) mod slurm;

use std::collections::BTreeMap;

/// The built-in runner names.
pub(crate) const LOCAL: &str = RunnerKind::Local.name();
pub(crate) const SLURM: &str = RunnerKind::Slurm.name();

pub(crate) use crate::result::{RunnerInfo, RunnerKind};

impl RunnerKind {
    pub(crate) fn parse(s: &str) -> Result<RunnerKind, RunnerError> {
        match s.trim() {
            LOCAL => Ok(RunnerKind::Local),
            SLURM => Ok(RunnerKind::Slurm),
            other => Err(RunnerError::UnknownKind(other.to_string())),
        }
    }
}

/// A named runner from the config: `[runners.NAME]` with `kind` and `args`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerDef {
    pub kind: RunnerKind,
    /// Passed to the engine's command (`srun`) after orchestrate's own options, so that
    /// they may override them (`--time`, for one).
    pub args: Vec<String>,
}

/// The runner a run uses, with its name as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Runner {
    pub name: String,
    pub kind: RunnerKind,
    pub args: Vec<String>,
}

impl Default for Runner {
    fn default() -> Self {
        Runner {
            name: LOCAL.to_string(),
            kind: RunnerKind::Local,
            args: Vec::new(),
        }
    }
}

impl Runner {
    pub(crate) fn is_local(&self) -> bool {
        self.kind == RunnerKind::Local
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RunnerError {
    #[error("unknown runner kind {0:?} (use local or slurm)")]
    UnknownKind(String),
    #[error("unknown runner {name:?} (use local, slurm{named})")]
    UnknownName { name: String, named: String },
    #[error("runner {0:?} is built in and cannot be redefined")]
    BuiltIn(String),
}

/// The runner called `name`: a named runner of the config, else a built-in one (`local`,
/// or `slurm` with no arguments of its own; a `[runners.slurm]` table gives it some).
pub(crate) fn select(
    name: &str,
    named: &BTreeMap<String, RunnerDef>,
) -> Result<Runner, RunnerError> {
    let name = name.trim();
    if let Some(def) = named.get(name) {
        return Ok(Runner {
            name: name.to_string(),
            kind: def.kind,
            args: def.args.clone(),
        });
    }
    match name {
        LOCAL => Ok(Runner::default()),
        SLURM => Ok(Runner {
            name: SLURM.to_string(),
            kind: RunnerKind::Slurm,
            args: Vec::new(),
        }),
        _ => Err(RunnerError::UnknownName {
            name: name.to_string(),
            named: named.keys().map(|k| format!(", {k}")).collect(),
        }),
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
                RunnerKind::parse(s).map_err(|e| format!("runner {name:?}: {e}"))?
            }
            Some(v) => {
                return Err(format!(
                    "runner {name:?}: `kind` must be a string, found {}",
                    v.type_str()
                ))
            }
            None => {
                return Err(format!(
                    "runner {name:?}: `kind` is required (local or slurm)"
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
            Runner {
                name: "gpu".into(),
                kind: RunnerKind::Slurm,
                args: vec!["--partition=gpu".into(), "--time=30".into()],
            }
        );
        assert_eq!(select("slurm", &runners).unwrap().args, ["--account=a"]);
        assert_eq!(select("local", &runners).unwrap(), Runner::default());
        assert_eq!(
            select("slurm", &BTreeMap::new()).unwrap(),
            Runner {
                name: "slurm".into(),
                kind: RunnerKind::Slurm,
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
            kind: RunnerKind::Slurm,
            name: None,
            job_id: Some(42),
            node: Some("n3".into()),
            queue_wait_ms: 120,
            state: Some("COMPLETED".into()),
        };
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            serde_json::json!({"kind": "slurm", "jobId": 42, "node": "n3", "queueWaitMs": 120, "state": "COMPLETED"})
        );
    }
}
