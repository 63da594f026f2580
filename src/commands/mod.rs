//! What each subcommand does and prints. `main.rs` parses arguments (`crate::cli`) and
//! calls [`dispatch`].

pub mod agents;
pub mod background;
pub mod completions;
pub mod config;
pub mod events;
pub mod run;
pub mod runs;
mod sandbox_exec;
pub mod show;
pub mod summary;
pub mod watch;
pub mod worktree;

use crate::cli::{Cli, Command, WorktreeAction};
use crate::session::{FindRunError, RunId, RunIdPrefix, StateDir};

/// Starts building, on a thread of its own, what a run needs first and takes a while to
/// build, when the command line is a run's (`run`, `mcp`): the sanitizer's rules, which
/// take a fraction of a millisecond to compile and which the run's first record needs.
/// Started before the command line is parsed, they are ready by the time the agent and
/// settings are read. A thread that cannot start changes nothing: the first use compiles
/// them.
pub fn warm_up() {
    let sub = std::env::args_os()
        .skip(1)
        .find(|a| !a.as_encoded_bytes().starts_with(b"-"));
    if !sub.is_some_and(|s| s == "run" || s == "mcp") {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("orchestrate-rules".into())
        .spawn(|| {
            crate::sanitize::Sanitizer::global();
        });
}

/// Runs the parsed command and returns the process exit status.
pub fn dispatch(cli: Cli) -> i32 {
    let status = command(cli);
    // The result is out; what the run's spans still need is a bounded wait.
    crate::observe::trace::shutdown();
    status
}

fn command(cli: Cli) -> i32 {
    match cli.command {
        Command::Agents { json, agents_dir } => agents::agents(json, agents_dir),
        Command::Mcp { agents_dir } => serve_mcp(agents_dir),
        Command::Wait {
            run_id,
            timeout,
            output,
        } => background::wait(&run_id, timeout, output),
        Command::Stop { run_id, output } => background::stop(&run_id, output),
        Command::Send {
            run_id,
            message,
            interrupt,
            output,
        } => background::send(&run_id, &message, interrupt, output),
        Command::Runs { json, agent, limit } => runs::runs(json, agent, limit),
        Command::Watch => watch::watch(),
        Command::Show {
            run_id,
            json,
            events,
            follow,
        } => {
            if events || follow {
                events::show_events(&run_id, json, follow)
            } else {
                show::show(&run_id, json)
            }
        }
        Command::Worktree { action } => match action {
            WorktreeAction::Rm {
                run_id,
                keep_branch,
                json,
            } => match find_run(&run_id) {
                Ok(id) => worktree::rm(&id, keep_branch, json),
                Err(why) => refuse_listing(json, &why),
            },
            WorktreeAction::Prune { all, force, json } => worktree::prune(all, force, json),
        },
        Command::Config { json } => config::config(json),
        Command::RunnerWatchdog { kind, handle } => crate::runner::serve_watchdog(&kind, &handle),
        Command::McpRun { agents_dir, run_id } => run::mcp_background(agents_dir, &run_id),
        Command::SandboxExec { plan } => sandbox_exec::sandbox_exec(&plan),
        Command::Completions { shell, standalone } => completions::completions(shell, standalone),
        Command::Run(args) => run::run(*args),
    }
}

/// The run a prefix names in the state directory, or why there is none.
fn find_run(prefix: &RunIdPrefix) -> Result<RunId, String> {
    let state = StateDir::from_env().map_err(|e| e.to_string())?;
    state.find_run(prefix).map_err(|e| match e {
        FindRunError::NoMatch(p) => format!("no run id starts with {p} (see `orchestrate runs`)"),
        other => other.to_string(),
    })
}

/// A command that lists what orchestrate recorded (`runs`, `show`) could not: with
/// `--json`, an `INVALID_INPUT` result on stdout, so that a parent parsing stdout never
/// meets plain text; else the message on stderr. Exit 2 either way.
pub(crate) fn refuse_listing(json: bool, message: &str) -> i32 {
    let refusal = crate::error::RunError::invalid(message);
    if json {
        println!("{}", refusal.to_result(None).to_json_line());
    } else {
        eprintln!("orchestrate: {message}");
    }
    refusal.exit_status()
}

fn serve_mcp(agents_dir: Option<std::path::PathBuf>) -> i32 {
    let served = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .and_then(|rt| {
            let served = rt.block_on(crate::mcp::serve(agents_dir));
            // A read of stdin may still be pending on a blocking thread (after a signal,
            // with the client still there); the runtime must not wait for it.
            rt.shutdown_background();
            served
        });
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("orchestrate mcp: {e}");
            1
        }
    }
}

/// Logs go to stderr; `ORCHESTRATE_LOG` (or `RUST_LOG`) sets the level. Colour only on a
/// terminal, and never with `NO_COLOR` set: a parent reading stderr gets plain text.
pub fn init_tracing() {
    use std::io::IsTerminal;
    let filter = std::env::var("ORCHESTRATE_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "warn".to_string());
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_target(false)
        .without_time()
        .try_init();
}
