//! The `orchestrate` command line: parses arguments and dispatches to `commands`.

use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use orchestrate::commands::{self, run::OutputFormat, run::Plan};
use orchestrate::duration::parse_duration;
use orchestrate::result::{ErrorCode, RunResult};
use orchestrate::run::RunRequest;

#[derive(Parser, Debug)]
#[command(
    name = "orchestrate",
    version,
    about = "Delegate a task to a supervised subagent CLI and get one uniform JSON result.",
    after_help = "Examples:\n  orchestrate run explorer \"find where auth is handled\"\n  orchestrate run reviewer \"review src/auth\" --timeout 10m -o text\n  orchestrate run --task explorer=\"find auth\" --task reviewer=\"review src/auth\"\n  orchestrate agents\n  orchestrate runs\n  orchestrate show <RUN_ID>\n  orchestrate config\n  orchestrate completions bash > ~/.local/share/bash-completion/completions/orchestrate\n  orchestrate mcp"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run AGENT on TASK and print the result.
    Run(Box<RunArgs>),
    /// Serve MCP on stdio: tools `subagent` and `list_agents`.
    Mcp {
        /// A folder of agent files that takes precedence over every other scope.
        #[arg(long)]
        agents_dir: Option<PathBuf>,
    },
    /// Wait for a background run and print its result (exit status as in the foreground;
    /// 124 if --timeout passes first).
    Wait {
        run_id: String,
        /// Give up after this long (90s, 15m, …), printing that it still runs.
        #[arg(long)]
        timeout: Option<String>,
        #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
        output: Format,
    },
    /// Stop a background run (its whole process tree) and print its result.
    Stop {
        run_id: String,
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
        #[arg(long, default_value_t = commands::runs::DEFAULT_LIMIT)]
        limit: usize,
    },
    /// One run: its result, its session file and the last lines of its stderr.
    Show {
        /// The run's id: 8 hex digits, as `orchestrate runs` prints it.
        run_id: String,
        /// One JSON object: runId, runDir, sessionFile, status, result, stderrTail.
        #[arg(long)]
        json: bool,
    },
    /// The effective defaults (config files, ORCHESTRATE_* variables) and where each came from.
    Config {
        /// One JSON object: {key: {value, source}}.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// List the agents a run can use and the file each came from.
    Agents {
        /// One JSON object with `agents` and `problems`.
        #[arg(long)]
        json: bool,
        /// A folder of agent files that takes precedence over every other scope.
        #[arg(long)]
        agents_dir: Option<PathBuf>,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The agent's name (see `orchestrate agents`).
    agent: Option<String>,
    /// What the agent should do.
    task: Option<String>,
    /// AGENT=TASK; repeat to run several tasks concurrently (or in order with --chain).
    #[arg(long = "task", value_name = "AGENT=TASK")]
    tasks: Vec<String>,
    /// Run the --task list in order; `{previous}` in a task is the previous step's output.
    #[arg(long)]
    chain: bool,
    /// Parallel tasks running at once. Default 4.
    #[arg(long, allow_hyphen_values = true)]
    concurrency: Option<String>,
    /// Child CLI: claude, pi, codex, gemini, opencode, cursor, command, or auto (the first
    /// installed of claude, pi, codex, gemini, opencode, cursor-agent).
    #[arg(long)]
    backend: Option<String>,
    /// Model passed to the child CLI.
    #[arg(long)]
    model: Option<String>,
    /// Working directory of the child.
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// A folder of agent files that takes precedence over every other scope.
    #[arg(long)]
    agents_dir: Option<PathBuf>,
    /// Maximum runtime (90s, 15m, 1h30m or milliseconds). Default 15m.
    #[arg(long, allow_hyphen_values = true)]
    timeout: Option<String>,
    /// Maximum time without any output from the child. Default 3m.
    #[arg(long, allow_hyphen_values = true)]
    idle_timeout: Option<String>,
    /// Time between SIGTERM and SIGKILL when stopping the child. Default 5s.
    #[arg(long, allow_hyphen_values = true)]
    kill_grace: Option<String>,
    /// Time the child may take to exit after its final event. Default 2s.
    #[arg(long, allow_hyphen_values = true)]
    exit_grace: Option<String>,
    /// Hard cap on the child's stdout+stderr bytes; passing it stops the child. Default 64 MiB.
    #[arg(long, allow_hyphen_values = true)]
    max_output_bytes: Option<String>,
    /// Bytes of `content[0].text` kept before truncation. Default 51200.
    #[arg(long, allow_hyphen_values = true)]
    max_bytes: Option<String>,
    /// Lines of `content[0].text` kept before truncation. Default 2000.
    #[arg(long, allow_hyphen_values = true)]
    max_lines: Option<String>,
    /// Attempts in all when the provider fails transiently (rate limit, overload, 5xx,
    /// connection reset). Default 2.
    #[arg(long, allow_hyphen_values = true)]
    attempts: Option<String>,
    /// Continue an earlier run's child session (pi, claude, codex) with a follow-up:
    /// `orchestrate run --resume RUN_ID "follow-up"`.
    #[arg(long, value_name = "RUN_ID")]
    resume: Option<String>,
    /// Start the run detached and return at once with its run id; `orchestrate wait ID`
    /// prints the result.
    #[arg(long)]
    background: bool,
    /// The run id of a background run (set by `--background` for the detached supervisor).
    #[arg(long, hide = true)]
    run_id: Option<String>,
    /// json: one line; text: the answer on stdout and a summary on stderr; stream-json:
    /// NDJSON streaming updates while the child runs, then the result.
    #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
    output: Format,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Format {
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

/// `run … --background`: the same arguments, minus the flag, run by a detached supervisor.
fn start_background(args: &RunArgs, format: OutputFormat) -> i32 {
    let one_task = (args.agent.is_some() && args.task.is_some())
        || (args.resume.is_some() && args.agent.is_some());
    if !args.tasks.is_empty() || !one_task {
        let r = RunResult::refusal(
            ErrorCode::InvalidInput,
            "Invalid input: --background runs one AGENT TASK",
            None,
        );
        return commands::run::print_result(format, &r, 2);
    }
    let run_args: Vec<std::ffi::OsString> = std::env::args_os()
        .skip(1)
        .filter(|a| a != "--background")
        .collect();
    commands::background::start(run_args, args.agent.as_deref().unwrap_or_default(), format)
}

fn main() {
    init_tracing();
    let cli = Cli::parse();
    let status = match cli.command {
        Command::Agents { json, agents_dir } => commands::agents::agents(json, agents_dir),
        Command::Mcp { agents_dir } => serve_mcp(agents_dir),
        Command::Wait {
            run_id,
            timeout,
            output,
        } => match timeout.as_deref().map(parse_duration).transpose() {
            Ok(t) => commands::background::wait(&run_id, t, output.into()),
            Err(e) => {
                eprintln!("orchestrate wait: --timeout: {e}");
                2
            }
        },
        Command::Stop { run_id, output } => commands::background::stop(&run_id, output.into()),
        Command::Runs { json, agent, limit } => commands::runs::runs(json, agent, limit),
        Command::Show { run_id, json } => commands::show::show(&run_id, json),
        Command::Config { json } => commands::config::config(json),
        Command::Completions { shell } => {
            commands::completions::completions(shell, &mut Cli::command())
        }
        Command::Run(args) => {
            let format: OutputFormat = args.output.into();
            if args.background {
                start_background(&args, format)
            } else {
                match run_plan(*args) {
                    Ok(plan) => block_on_run(plan, format),
                    Err(message) => {
                        let result = RunResult::refusal(ErrorCode::InvalidInput, message, None);
                        commands::run::print_result(format, &result, result.exit_status())
                    }
                }
            }
        }
    };
    std::process::exit(status);
}

/// Runs on a current-thread runtime: the work is I/O-bound, and one thread keeps the
/// run's cost and its memory small. A panic still prints a valid JSON result.
fn block_on_run(plan: Plan, format: OutputFormat) -> i32 {
    let outcome = std::panic::catch_unwind(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok::<i32, std::io::Error>(rt.block_on(commands::run::run_command(plan, format)))
    });
    match outcome {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => commands::run::print_internal_error(
            format,
            &format!("failed to start the runtime: {e}"),
        ),
        Err(_) => commands::run::print_internal_error(format, "orchestrate panicked (see stderr)"),
    }
}

fn serve_mcp(agents_dir: Option<PathBuf>) -> i32 {
    let served = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .and_then(|rt| rt.block_on(orchestrate::mcp::serve(agents_dir)));
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("orchestrate mcp: {e}");
            1
        }
    }
}

/// One run, or several from `--task AGENT=TASK` (parallel, or in order with `--chain`).
fn run_plan(mut a: RunArgs) -> Result<Plan, String> {
    let tasks = std::mem::take(&mut a.tasks);
    let chain = a.chain;
    let concurrency = a.concurrency.take();
    if tasks.is_empty() {
        if chain {
            return Err("Invalid input: --chain needs --task AGENT=TASK steps".to_string());
        }
        return run_request(a).map(|r| Plan::Single(Box::new(r)));
    }
    if a.agent.is_some() || a.task.is_some() {
        return Err(
            "Invalid input: give either AGENT TASK or --task AGENT=TASK, not both".to_string(),
        );
    }
    let concurrency = concurrency
        .map(|c| {
            c.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=64).contains(n))
                .ok_or_else(|| {
                    format!("Invalid input: --concurrency: {c:?} is not a number from 1 to 64")
                })
        })
        .transpose()?;
    let base = run_request(a)?;
    let reqs = tasks
        .iter()
        .map(|t| match t.split_once('=') {
            Some((agent, task)) if !agent.trim().is_empty() => Ok(RunRequest {
                agent: agent.trim().to_string(),
                task: task.to_string(),
                ..base.clone()
            }),
            _ => Err(format!("Invalid input: --task {t:?}: expected AGENT=TASK")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(if chain {
        Plan::Chain(reqs, concurrency)
    } else {
        Plan::Parallel(reqs, concurrency)
    })
}

fn run_request(mut a: RunArgs) -> Result<RunRequest, String> {
    if a.resume.is_some() && a.task.is_none() {
        // `run --resume ID "follow-up"`: the one positional is the task; the agent is the
        // earlier run's.
        a.task = a.agent.take();
    }
    let duration = |flag: &str, v: &Option<String>| {
        v.as_deref()
            .map(|s| parse_duration(s).map_err(|e| format!("Invalid input: --{flag}: {e}")))
            .transpose()
    };
    let number = |flag: &str, v: &Option<String>| {
        v.as_deref()
            .map(|s| {
                s.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        format!("Invalid input: --{flag}: {s:?} is not a positive integer")
                    })
            })
            .transpose()
    };
    let positive = |flag: &str, d: Option<std::time::Duration>| match d {
        Some(d) if d.is_zero() => Err(format!("Invalid input: --{flag} must be greater than zero")),
        other => Ok(other),
    };
    Ok(RunRequest {
        agent: a.agent.unwrap_or_default(),
        task: a.task.unwrap_or_default(),
        backend: a.backend,
        model: a.model,
        cwd: a.cwd,
        agents_dir: a.agents_dir,
        runtime_timeout: positive("timeout", duration("timeout", &a.timeout)?)?,
        idle_timeout: positive("idle-timeout", duration("idle-timeout", &a.idle_timeout)?)?,
        kill_grace: duration("kill-grace", &a.kill_grace)?,
        terminal_exit_grace: duration("exit-grace", &a.exit_grace)?,
        max_output_bytes: number("max-output-bytes", &a.max_output_bytes)?,
        run_id: a.run_id,
        resume: a.resume,
        attempts: number("attempts", &a.attempts)?.map(|n| n.min(u64::from(u32::MAX)) as u32),
        max_bytes: number("max-bytes", &a.max_bytes)?.map(|n| n as usize),
        max_lines: number("max-lines", &a.max_lines)?.map(|n| n as usize),
    })
}

fn init_tracing() {
    let filter = std::env::var("ORCHESTRATE_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "warn".to_string());
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_target(false)
        .without_time()
        .try_init();
}
