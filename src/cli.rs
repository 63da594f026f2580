//! The command line: its grammar (clap), the typed value of every flag, and what a bad
//! argument prints. A parse error in a JSON mode is an `INVALID_INPUT` result on stdout
//! like any other refusal, so a parent parsing stdout never meets plain text.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::backends::BackendChoice;
use crate::cli_help::{choices, enum_names};
use crate::commands::run::{OutputFormat, Plan};
use crate::duration::parse_duration;
use crate::error::RunError;
use crate::result::{exit_status, DetailLevel};
use crate::run::RunRequest;
use crate::sandbox::{Network, SandboxMode};
use crate::session::{RunId, RunIdPrefix};
use crate::structured::SchemaSource;

#[derive(Parser, Debug)]
#[command(
    name = "orchestrate",
    version,
    about = "Delegate a task to a supervised subagent CLI and get one uniform JSON result.",
    after_help = "Examples:\n  orchestrate run explorer \"find where auth is handled\"\n  orchestrate run reviewer \"review src/auth\" --timeout 10m -o text\n  orchestrate run --task explorer=\"find auth\" --task reviewer=\"review src/auth\"\n  orchestrate agents\n  orchestrate runs\n  orchestrate show <RUN_ID>\n  orchestrate config\n  orchestrate completions bash > ~/.local/share/bash-completion/completions/orchestrate\n  orchestrate mcp"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run AGENT on TASK and print the result.
    Run(Box<RunArgs>),
    /// Serve MCP on stdio: tools `subagent` and `list_agents`.
    Mcp {
        /// A folder of agent files that takes precedence over every other scope.
        #[arg(long, value_parser = agents_dir)]
        agents_dir: Option<PathBuf>,
    },
    /// Wait for a background run and print its result (exit status as in the foreground;
    /// 124 if --timeout passes first).
    Wait {
        /// The run's id as `run --background` or `orchestrate runs` printed it, or its
        /// first digits (a unique prefix).
        #[arg(value_parser = run_id_prefix)]
        run_id: RunIdPrefix,
        /// Give up after this long (90s, 15m, …), printing that it still runs.
        #[arg(long, value_parser = duration)]
        timeout: Option<Duration>,
        /// json: the result as one line; text: the answer on stdout and a summary on
        /// stderr; stream-json: as json (the run is already under way).
        #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
        output: Format,
    },
    /// Stop a background run (its whole process tree) and print its result.
    Stop {
        /// The run's id as `run --background` or `orchestrate runs` printed it, or its
        /// first digits (a unique prefix).
        #[arg(value_parser = run_id_prefix)]
        run_id: RunIdPrefix,
        /// json: the stopped run's result as one line; text: its answer on stdout and a
        /// summary on stderr; stream-json: as json.
        #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
        output: Format,
    },
    /// Recent runs, newest first, and totals per agent (tokens, cost, failures).
    Runs {
        /// One JSON object: `runs`, `totals`, `skippedLines`.
        #[arg(long)]
        json: bool,
        /// Only runs of this agent (totals too).
        #[arg(long)]
        agent: Option<String>,
        /// How many recent runs to list; totals always cover every run.
        #[arg(long, default_value_t = crate::commands::runs::DEFAULT_LIMIT)]
        limit: usize,
    },
    /// One run: its result, its session file and the last lines of its stderr.
    Show {
        /// The run's id as `orchestrate runs` prints it, or its first digits (a unique
        /// prefix).
        #[arg(value_parser = run_id_prefix)]
        run_id: RunIdPrefix,
        /// One JSON object: runId, runDir, sessionFile, status, result, stderrTail (with
        /// --events: the lines of events.jsonl as written).
        #[arg(long)]
        json: bool,
        /// The run's events (events.jsonl): text, tool calls, usage, limits, stops,
        /// retries, its end; one line each.
        #[arg(long)]
        events: bool,
        /// Follow a run in progress: print its events as they come until it ends
        /// (implies --events).
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Remove the git worktrees that runs with --isolation worktree kept for review.
    Worktree {
        #[command(subcommand)]
        action: WorktreeAction,
    },
    /// The effective defaults (config files, ORCHESTRATE_* variables) and where each came from.
    Config {
        /// One JSON object: {key: {value, source}}.
        #[arg(long)]
        json: bool,
    },
    /// Started by orchestrate itself before it submits a job to a cluster engine: cancels
    /// the job should orchestrate die before the job is over.
    #[command(name = "runner-watchdog", hide = true)]
    RunnerWatchdog {
        /// The runner's engine (`slurm`).
        kind: String,
        /// The job, as the engine's cancel step names it.
        handle: String,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) that
    /// completes subcommands, flags, flag values, agent names and run ids by asking
    /// orchestrate; regenerate it after an update.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
        /// A script that never calls orchestrate back: no agent names or run ids.
        #[arg(long = "static")]
        standalone: bool,
    },
    /// List the agents a run can use and the file each came from.
    Agents {
        /// One JSON object with `agents` and `problems`.
        #[arg(long)]
        json: bool,
        /// A folder of agent files that takes precedence over every other scope.
        #[arg(long, value_parser = agents_dir)]
        agents_dir: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum WorktreeAction {
    /// Remove a run's worktree (whatever is in it) and its branch.
    Rm {
        /// The run's id as `orchestrate runs` prints it, or its first digits (a unique
        /// prefix).
        #[arg(value_parser = run_id_prefix)]
        run_id: RunIdPrefix,
        /// Keep the branch orchestrate/<run id> (and so its commits).
        #[arg(long)]
        keep_branch: bool,
        /// One JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Remove every kept worktree whose branch is merged into its repository's HEAD, with
    /// its branch; one with uncommitted changes only with --force.
    Prune {
        /// Remove unmerged ones too.
        #[arg(long)]
        all: bool,
        /// Remove worktrees with uncommitted changes too (they are lost).
        #[arg(long)]
        force: bool,
        /// One JSON object on stdout: removed and kept.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The agent's name (see `orchestrate agents`).
    pub agent: Option<String>,
    /// What the agent should do.
    pub task: Option<String>,
    /// AGENT=TASK; repeat to run several tasks concurrently (or in order with --chain).
    #[arg(long = "task", value_name = "AGENT=TASK")]
    pub tasks: Vec<String>,
    /// Run the --task list in order; `{previous}` in a task is the previous step's output.
    #[arg(long)]
    pub chain: bool,
    /// Parallel tasks running at once (1 to 64). Default 4.
    #[arg(long, allow_hyphen_values = true, value_parser = concurrency)]
    pub concurrency: Option<usize>,
    /// The child CLI; auto: the first installed of claude, pi, codex, gemini, opencode,
    /// cursor-agent.
    #[arg(long, value_parser = choices(backend, backend_names))]
    pub backend: Option<BackendChoice>,
    /// Model passed to the child CLI.
    #[arg(long)]
    pub model: Option<String>,
    /// Working directory of the child.
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// A folder of agent files that takes precedence over every other scope.
    #[arg(long, value_parser = agents_dir)]
    pub agents_dir: Option<PathBuf>,
    /// Maximum runtime (90s, 15m, 1h30m or milliseconds). Default 15m.
    #[arg(long, allow_hyphen_values = true, value_parser = positive_duration)]
    pub timeout: Option<Duration>,
    /// Maximum time without progress from the child: text, a tool call or its result,
    /// usage, a new turn (retries, reconnects and stderr chatter are none). Paused while a
    /// tool runs (--tool-timeout bounds that). Default 3m.
    #[arg(long, allow_hyphen_values = true, value_parser = positive_duration)]
    pub idle_timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when stopping the child. Default 5s.
    #[arg(long, allow_hyphen_values = true, value_parser = duration)]
    pub kill_grace: Option<Duration>,
    /// Time the child may take to exit after its final event. Default 2s.
    #[arg(long, allow_hyphen_values = true, value_parser = duration)]
    pub exit_grace: Option<Duration>,
    /// Hard cap on the child's stdout+stderr bytes; passing it stops the child. Default 64 MiB.
    #[arg(long, allow_hyphen_values = true, value_parser = positive_integer)]
    pub max_output_bytes: Option<u64>,
    /// Bytes of `content[0].text` kept before truncation. Default 51200.
    #[arg(long, allow_hyphen_values = true, value_parser = positive_integer)]
    pub max_bytes: Option<u64>,
    /// Lines of `content[0].text` kept before truncation. Default 2000.
    #[arg(long, allow_hyphen_values = true, value_parser = positive_integer)]
    pub max_lines: Option<u64>,
    /// Attempts in all when the provider fails transiently (rate limit, overload, 5xx,
    /// connection reset). Default 2.
    #[arg(long, allow_hyphen_values = true, value_parser = positive_integer)]
    pub attempts: Option<u64>,
    /// Maximum time one tool call may run with no tool finishing (the idle timeout does
    /// not apply while a tool runs). Default 10m.
    #[arg(long, allow_hyphen_values = true, value_parser = positive_duration)]
    pub tool_timeout: Option<Duration>,
    /// Maximum time the child may only retry or reconnect to its provider, with no
    /// progress, before it fails as unable to reach it. Default 60s.
    #[arg(long, allow_hyphen_values = true, value_parser = positive_duration)]
    pub connect_timeout: Option<Duration>,
    /// Stop the child once it goes on past this many turns (keeping its partial answer).
    #[arg(long, allow_hyphen_values = true, value_parser = positive_integer)]
    pub max_turns: Option<u64>,
    /// Stop the child once it has used this many input + output + cache-write tokens.
    #[arg(long, allow_hyphen_values = true, value_parser = positive_integer)]
    pub max_tokens: Option<u64>,
    /// Stop the child once it has cost this many US dollars (e.g. 0.50).
    #[arg(long, allow_hyphen_values = true, value_parser = usd, value_name = "USD")]
    pub max_cost: Option<f64>,
    /// With --task: no task starts once the tasks together have cost this many US
    /// dollars, and running ones are stopped.
    #[arg(long, allow_hyphen_values = true, value_parser = usd, value_name = "USD")]
    pub max_total_cost: Option<f64>,
    /// A model to run instead when the model fails with a quota, rate-limit, overload or
    /// unknown-model error (after its retries); repeat for several, tried in order.
    #[arg(long = "fallback-model", value_name = "MODEL")]
    pub fallback_models: Vec<String>,
    /// Sandbox of the child. Default: read-only for an agent that cannot write,
    /// workspace-write for the others.
    #[arg(long, value_parser = choices(sandbox_mode, enum_names::<SandboxMode>))]
    pub sandbox: Option<SandboxMode>,
    /// off: the child gets no network at all (only a loopback of its own). Default on.
    #[arg(long, value_parser = choices(network, enum_names::<Network>))]
    pub network: Option<Network>,
    /// Where the child runs: local (the default), slurm (through srun on a Slurm
    /// cluster), or a runner named in the config ([runners.NAME]).
    #[arg(long, value_name = "NAME")]
    pub runner: Option<String>,
    /// How long a job may wait in the cluster's queue before it starts (it counts against
    /// no other limit meanwhile). Default 10m.
    #[arg(long, allow_hyphen_values = true, value_parser = positive_duration)]
    pub queue_timeout: Option<Duration>,
    /// worktree: the child works in a new git worktree on branch orchestrate/<run id>,
    /// made from HEAD; none: in the working directory (the default).
    #[arg(long, value_parser = choices(isolation, isolation_names))]
    pub isolation: Option<bool>,
    /// A JSON Schema file the answer must match: the answer is validated JSON, in
    /// `structured` and as compact JSON in `content[0].text` (over the agent's
    /// `output_schema:`).
    #[arg(long, value_name = "FILE")]
    pub output_schema: Option<PathBuf>,
    /// Continue an earlier run's child session (pi, claude, codex) with a follow-up:
    /// `orchestrate run --resume RUN_ID "follow-up"`.
    #[arg(long, value_name = "RUN_ID")]
    pub resume: Option<String>,
    /// Start the run detached and return at once with its run id; `orchestrate wait ID`
    /// prints the result.
    #[arg(long)]
    pub background: bool,
    /// The run id of a background run (set by `--background` for the detached supervisor).
    #[arg(long, hide = true, value_parser = run_id)]
    pub run_id: Option<RunId>,
    /// json: one line; text: the answer on stdout and a summary on stderr; stream-json:
    /// NDJSON streaming updates while the child runs, then the result.
    #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
    pub output: Format,
    /// How much of the result a JSON format prints: lean (the answer, usage, errors, the
    /// session file) or full (also every step of the run, as result.json keeps it).
    #[arg(long, value_enum, default_value = "lean")]
    pub details: Details,
}

/// `--details`: see [`crate::result::DetailLevel`].
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Details {
    Lean,
    Full,
}

impl From<Details> for DetailLevel {
    fn from(d: Details) -> Self {
        match d {
            Details::Lean => DetailLevel::Lean,
            Details::Full => DetailLevel::Full,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Text,
    StreamJson,
}

impl From<Format> for OutputFormat {
    fn from(f: Format) -> Self {
        match f {
            Format::Json => OutputFormat::Json,
            Format::Text => OutputFormat::Text,
            Format::StreamJson => OutputFormat::StreamJson,
        }
    }
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err("must be greater than zero".to_string()),
        d => Ok(d),
    }
}

fn positive_integer(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{s:?} is not a positive integer"))
}

fn usd(s: &str) -> Result<f64, String> {
    s.trim()
        .trim_start_matches('$')
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n > 0.0)
        .ok_or_else(|| format!("{s:?} is not an amount of US dollars greater than 0, such as 0.50"))
}

fn concurrency(s: &str) -> Result<usize, String> {
    s.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=crate::config::MAX_CONCURRENCY as usize).contains(n))
        .ok_or_else(|| format!("{s:?} is not a number from 1 to 64"))
}

/// `--agents-dir` names a folder the caller expects agents in: one that is not there is a
/// mistake to report, not a folder to skip.
fn agents_dir(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => Ok(path),
        Ok(_) => Err(format!("{s} is not a folder")),
        Err(e) => Err(format!("cannot use agents folder {s}: {e}")),
    }
}

fn run_id(s: &str) -> Result<RunId, String> {
    RunId::parse(s).map_err(|e| e.to_string())
}

fn run_id_prefix(s: &str) -> Result<RunIdPrefix, String> {
    RunIdPrefix::parse(s).map_err(|e| e.to_string())
}

fn sandbox_mode(s: &str) -> Result<SandboxMode, String> {
    SandboxMode::parse(s)
}

fn network(s: &str) -> Result<Network, String> {
    Network::parse(s)
}

/// `worktree` (true) or `none` (false).
fn isolation(s: &str) -> Result<bool, String> {
    match s.trim() {
        "worktree" => Ok(true),
        "none" => Ok(false),
        other => Err(format!(
            "unknown isolation {other:?} (use worktree or none)"
        )),
    }
}

fn backend(s: &str) -> Result<BackendChoice, String> {
    BackendChoice::parse(s).map_err(|e| e.to_string())
}

/// What `--backend`, `--sandbox`, `--network` and `--isolation` offer in help and
/// completion.
fn backend_names() -> Vec<String> {
    std::iter::once("auto")
        .chain(crate::backends::Backend::ALL.iter().map(|b| b.name()))
        .map(str::to_string)
        .collect()
}

fn isolation_names() -> Vec<String> {
    vec!["worktree".into(), "none".into()]
}

/// Parses the process's arguments. On a bad argument, prints what the subcommand's output
/// format calls for and returns the exit status to end with; `--help` and `--version`
/// print as usual and end with 0.
pub fn parse() -> Result<Cli, i32> {
    let args: Vec<OsString> = std::env::args_os().collect();
    crate::cli_help::command()
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(|err| report_parse_error(&err, &args))
}

fn report_parse_error(err: &clap::Error, args: &[OsString]) -> i32 {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) || err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    {
        let _ = err.print();
        return err.exit_code();
    }
    // Usage text stays on stderr; the parent reading stdout gets a result.
    let _ = err.print();
    if wants_json(args) {
        let rendered = err.render().to_string();
        let first = rendered.lines().next().unwrap_or_default();
        let message = first.strip_prefix("error: ").unwrap_or(first);
        let result = RunError::invalid(message).to_result(None);
        println!("{}", result.to_json_line());
    }
    exit_status::USAGE
}

/// Whether the subcommand being parsed prints JSON on stdout: `run`, `wait` and `stop`
/// unless `-o text`; `runs`, `show`, `agents` and `config` with `--json`.
fn wants_json(args: &[OsString]) -> bool {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let Some(sub) = args.iter().find(|a| !a.starts_with('-')) else {
        return false;
    };
    match sub.as_str() {
        "run" | "wait" | "stop" => {
            let text = args
                .windows(2)
                .any(|w| matches!(w[0].as_str(), "-o" | "--output") && w[1] == "text")
                || args
                    .iter()
                    .any(|a| a == "--output=text" || a == "-otext" || a == "-o=text");
            !text
        }
        "runs" | "show" | "agents" | "config" | "worktree" => args.iter().any(|a| a == "--json"),
        _ => false,
    }
}

impl RunArgs {
    pub fn format(&self) -> OutputFormat {
        self.output.into()
    }

    pub fn detail(&self) -> DetailLevel {
        self.details.into()
    }

    /// One run, or several from `--task AGENT=TASK` (parallel, or in order with `--chain`).
    pub fn into_plan(mut self) -> Result<Plan, RunError> {
        let tasks = std::mem::take(&mut self.tasks);
        let chain = self.chain;
        let concurrency = self.concurrency.take();
        if tasks.is_empty() {
            if chain {
                return Err(RunError::invalid("--chain needs --task AGENT=TASK steps"));
            }
            return Ok(Plan::Single(Box::new(self.into_request())));
        }
        if self.agent.is_some() || self.task.is_some() {
            return Err(RunError::invalid(
                "give either AGENT TASK or --task AGENT=TASK, not both",
            ));
        }
        let base = self.into_request();
        let reqs = tasks
            .iter()
            .map(|t| match t.split_once('=') {
                Some((agent, task)) if !agent.trim().is_empty() => Ok(RunRequest {
                    agent: agent.trim().to_string(),
                    task: task.to_string(),
                    ..base.clone()
                }),
                _ => Err(RunError::invalid(format!(
                    "--task {t:?}: expected AGENT=TASK"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(if chain {
            Plan::Chain(reqs, concurrency)
        } else {
            Plan::Parallel(reqs, concurrency)
        })
    }

    fn into_request(mut self) -> RunRequest {
        if self.resume.is_some() && self.task.is_none() {
            // `run --resume ID "follow-up"`: the one positional is the task; the agent is
            // the earlier run's.
            self.task = self.agent.take();
        }
        let usize_of = |n: Option<u64>| n.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        RunRequest {
            agent: self.agent.unwrap_or_default(),
            task: self.task.unwrap_or_default(),
            backend: self.backend,
            model: self.model,
            cwd: self.cwd,
            agents_dir: self.agents_dir,
            runtime_timeout: self.timeout,
            idle_timeout: self.idle_timeout,
            kill_grace: self.kill_grace,
            terminal_exit_grace: self.exit_grace,
            max_output_bytes: self.max_output_bytes,
            run_id: self.run_id.map(|id| id.to_string()),
            resume: self.resume,
            attempts: self.attempts.map(|n| n.min(u64::from(u32::MAX)) as u32),
            max_bytes: usize_of(self.max_bytes),
            max_lines: usize_of(self.max_lines),
            tool_timeout: self.tool_timeout,
            connect_timeout: self.connect_timeout,
            max_turns: self.max_turns,
            max_tokens: self.max_tokens,
            max_cost: self.max_cost,
            max_total_cost: self.max_total_cost,
            fallback_models: (!self.fallback_models.is_empty()).then_some(self.fallback_models),
            sandbox: self.sandbox,
            network: self.network,
            worktree: self.isolation,
            // Relative to where the command was typed, not to `--cwd`.
            output_schema: self
                .output_schema
                .map(|p| SchemaSource::File(std::path::absolute(&p).unwrap_or(p))),
            runner: self.runner,
            queue_timeout: self.queue_timeout,
        }
    }

    /// Whether this is one `AGENT TASK` (or a resume) that can run in the background.
    pub fn is_single_task(&self) -> bool {
        let one_task = (self.agent.is_some() && self.task.is_some())
            || (self.resume.is_some() && self.agent.is_some());
        self.tasks.is_empty() && one_task
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        std::iter::once("orchestrate")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn json_modes_are_told_from_the_subcommand_and_its_format_flag() {
        let cases: [(&[&str], bool); 10] = [
            (&["run", "--bogus"], true),
            (&["run", "x", "y", "-o", "text", "--bogus"], false),
            (&["run", "x", "y", "--output=text", "--bogus"], false),
            (&["run", "-o", "stream-json", "--bogus"], true),
            (&["wait", "ab12cd34", "--timeout", "abc"], true),
            (&["stop"], true),
            (&["runs", "--json", "--limit", "x"], true),
            (&["runs", "--limit", "x"], false),
            (&["mcp", "--bogus"], false),
            (&["--bogus"], false),
        ];
        for (args, want) in cases {
            assert_eq!(wants_json(&os(args)), want, "{args:?}");
        }
    }

    #[test]
    fn flag_values_are_typed_with_reasons() {
        assert_eq!(positive_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(
            positive_duration("0"),
            Err("must be greater than zero".to_string())
        );
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        assert_eq!(positive_integer("12"), Ok(12));
        assert_eq!(
            positive_integer("-5"),
            Err("\"-5\" is not a positive integer".to_string())
        );
        assert_eq!(
            concurrency("65"),
            Err("\"65\" is not a number from 1 to 64".into())
        );
        assert_eq!(usd("$0.50"), Ok(0.5));
        assert_eq!(
            usd("0"),
            Err("\"0\" is not an amount of US dollars greater than 0, such as 0.50".to_string())
        );
        assert!(backend("cluade")
            .unwrap_err()
            .contains("unknown backend \"cluade\""));
    }
}
