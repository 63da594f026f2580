//! The command line: its grammar (clap), the typed value of every flag, and what a bad
//! argument prints. A parse error in a JSON mode is an `INVALID_INPUT` result on stdout
//! like any other refusal, so a parent parsing stdout never meets plain text.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::error::RunError;
use crate::result::{exit_status, DetailLevel, Mode};
use crate::run::{Plan, RunRequest};
use crate::session::{RunId, RunIdPrefix};
use crate::settings::Values;
use crate::units::parse_duration;

/// How many recent runs `orchestrate runs` lists unless told.
pub const RUNS_LISTED: usize = 20;

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
    /// Serve MCP on stdio: tools `subagent`, `list_agents`, and `send`, `wait`, `stop` for
    /// background runs.
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
        output: OutputFormat,
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
        output: OutputFormat,
    },
    /// Send a message to a run still running (a background run, a task of a fan-out): pi
    /// gets it in the turn under way (steered); an ACP agent as its next prompt in the same
    /// process once its turn ends; claude and codex as a new turn of their own session once
    /// their turn ends. The run's
    /// result lists it under `messages`, with how it was delivered. Refused for a run that
    /// has ended, and for CLIs that cannot continue a session (gemini, opencode: use their
    /// ACP presets).
    Send {
        /// The run's id as `run --background` or `orchestrate runs` printed it, or its
        /// first digits (a unique prefix).
        #[arg(value_parser = run_id_prefix)]
        run_id: RunIdPrefix,
        /// The message, as the child will read it.
        message: String,
        /// Cancel the child's current turn for the message, where its CLI can (ACP agents:
        /// `session/cancel`, then the message as the next prompt); elsewhere the message
        /// waits for the turn to end, as without it.
        #[arg(long)]
        interrupt: bool,
        /// json: one line saying it is queued; text: that line's text.
        #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
        output: OutputFormat,
    },
    /// The runs in progress and just ended, live, as a tree (fan-outs, chains, nested
    /// runs): agent, backend, state, turn, tool, time, tokens, cost, and the selected
    /// run's latest events; `s` stops the selected run. Needs a terminal.
    Watch,
    /// Recent runs, newest first, and totals per agent (tokens, cost, failures).
    Runs {
        /// One JSON object: `runs`, `totals`, `skippedLines`.
        #[arg(long)]
        json: bool,
        /// Only runs of this agent (totals too).
        #[arg(long)]
        agent: Option<String>,
        /// How many recent runs to list; totals always cover every run.
        #[arg(long, default_value_t = RUNS_LISTED)]
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
    /// Started by orchestrate's MCP server for a `subagent` call with `background: true`:
    /// runs the call's arguments, which the server wrote in the run folder, as that
    /// background run.
    #[command(name = "mcp-run", hide = true)]
    McpRun {
        #[arg(long, value_parser = agents_dir)]
        agents_dir: Option<PathBuf>,
        #[arg(long, value_parser = run_id)]
        run_id: RunId,
    },
    /// Started by orchestrate itself on a cluster's node, in front of the agent's command:
    /// builds the child's sandbox there from the plan orchestrate wrote in the run folder.
    #[command(name = "sandbox-exec", hide = true)]
    SandboxExec {
        /// The plan (`<run folder>/sandbox-exec.json`).
        plan: PathBuf,
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
    /// Working directory of the child.
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// A folder of agent files that takes precedence over every other scope.
    #[arg(long, value_parser = agents_dir)]
    pub agents_dir: Option<PathBuf>,
    // The settings, one flag each (`--timeout`, `--max-cost`, `--sandbox`, …), from the
    // table in `crate::settings`.
    #[command(flatten)]
    pub settings: Values,
    /// Continue an earlier run's child session (pi, claude, codex) with a follow-up:
    /// `orchestrate run --resume RUN_ID "follow-up"`.
    #[arg(long, value_name = "RUN_ID")]
    pub resume: Option<String>,
    /// Start the run (or the --task fan-out) detached and return at once with its run id
    /// (and each task's); `orchestrate wait ID` prints the result, `stop ID` stops it.
    #[arg(long)]
    pub background: bool,
    /// The run id of a background run (set by `--background` for the detached supervisor).
    #[arg(long, hide = true, value_parser = run_id)]
    pub run_id: Option<RunId>,
    /// json: one line; text: the answer on stdout and a summary on stderr; stream-json:
    /// NDJSON streaming updates while the child runs, then the result.
    #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
    pub output: OutputFormat,
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

/// `-o`: how the result is printed.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Json,
    Text,
    // NDJSON streaming updates while the child runs, then the final result. (A doc
    // comment here would be a description in every completion script.)
    StreamJson,
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
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

/// The whole command line as a person meets it: [`Cli`]'s grammar with the help headings
/// and value hints of `crate::cli_help`. Parsing, help and completion all use this.
pub(crate) fn command() -> clap::Command {
    crate::cli_help::presented(<Cli as clap::CommandFactory>::command())
}

/// Parses the process's arguments. On a bad argument, prints what the subcommand's output
/// format calls for and returns the exit status to end with; `--help` and `--version`
/// print as usual and end with 0.
pub fn parse() -> Result<Cli, i32> {
    let args: Vec<OsString> = std::env::args_os().collect();
    // The headings and value hints that `cli_help` adds show only in help and completions:
    // a command line is parsed without them (a tenth of a millisecond of every run), and
    // parsed again with them only to print help.
    <Cli as clap::CommandFactory>::command()
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(|err| match shows_help(&err) {
            true => command().try_get_matches_from(&args).err().unwrap_or(err),
            false => err,
        })
        .map_err(|err| report_parse_error(&err, &args))
}

fn shows_help(err: &clap::Error) -> bool {
    use clap::error::ErrorKind;
    matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    )
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
        self.output
    }

    pub fn detail(&self) -> DetailLevel {
        self.details.into()
    }

    /// One run, or several from `--task AGENT=TASK` (parallel, or in order with `--chain`).
    pub fn into_plan(mut self) -> Result<Plan, RunError> {
        let tasks = std::mem::take(&mut self.tasks);
        let chain = self.chain;
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
            .map(|t| {
                let (agent, task) = parse_task(t)?;
                Ok(RunRequest {
                    agent,
                    task,
                    ..base.clone()
                })
            })
            .collect::<Result<Vec<_>, RunError>>()?;
        Ok(if chain {
            Plan::Chain(reqs)
        } else {
            Plan::Parallel(reqs)
        })
    }

    fn into_request(mut self) -> RunRequest {
        if self.resume.is_some() && self.task.is_none() {
            // `run --resume ID "follow-up"`: the one positional is the task; the agent is
            // the earlier run's.
            self.task = self.agent.take();
        }
        RunRequest {
            agent: self.agent.unwrap_or_default(),
            task: self.task.unwrap_or_default(),
            cwd: self.cwd,
            agents_dir: self.agents_dir,
            run_id: self.run_id.map(|id| id.to_string()),
            resume: self.resume,
            settings: self.settings,
        }
    }

    /// What a background run of these arguments runs, refused as the foreground run
    /// would refuse it: one `AGENT TASK` (or a resume) as the agent's name; a fan-out
    /// (`--task`, `--chain`) as its description, its mode and each task's agent.
    pub(crate) fn background_plan(
        &self,
    ) -> Result<(String, Option<crate::background::FanoutPlan>), RunError> {
        if self.tasks.is_empty() {
            let one_task = (self.agent.is_some() && self.task.is_some())
                || (self.resume.is_some() && self.agent.is_some());
            if self.chain {
                return Err(RunError::invalid("--chain needs --task AGENT=TASK steps"));
            }
            if !one_task {
                return Err(RunError::invalid(
                    "--background runs AGENT TASK, or --task AGENT=TASK (repeated)",
                ));
            }
            return Ok((self.agent.clone().unwrap_or_default(), None));
        }
        if self.agent.is_some() || self.task.is_some() {
            return Err(RunError::invalid(
                "give either AGENT TASK or --task AGENT=TASK, not both",
            ));
        }
        let agents = self
            .tasks
            .iter()
            .map(|t| parse_task(t).map(|(agent, _)| agent))
            .collect::<Result<Vec<_>, _>>()?;
        let n = agents.len();
        Ok(if self.chain {
            (format!("a chain of {n} steps"), Some((Mode::Chain, agents)))
        } else {
            (
                format!("{n} tasks in parallel"),
                Some((Mode::Parallel, agents)),
            )
        })
    }
}

/// `--task AGENT=TASK` as its agent and task.
fn parse_task(t: &str) -> Result<(String, String), RunError> {
    match t.split_once('=') {
        Some((agent, task)) if !agent.trim().is_empty() => {
            Ok((agent.trim().to_string(), task.to_string()))
        }
        _ => Err(RunError::invalid(format!(
            "--task {t:?}: expected AGENT=TASK"
        ))),
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
    fn wait_takes_a_duration_with_its_unit() {
        assert_eq!(duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        assert_eq!(
            duration("5"),
            Err("invalid duration \"5\": a number needs a unit: did you mean 5s? (units: ms, s, m, h, d)".to_string())
        );
    }
}
