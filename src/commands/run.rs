//! `orchestrate run`: one run, its result on stdout, signals turned into a graceful stop.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use tokio::signal::unix::{signal, SignalKind};

pub use crate::cli::OutputFormat;
use crate::cli::RunArgs;
use crate::error::RunError;
use crate::result::RunOutput;
use crate::result::{internal_error_json, DetailLevel, RunResult};
use crate::run::{self as pipeline, Observer, Plan, RunEnv};
use crate::session::RunId;
use crate::supervisor::Controls;

/// The one-line progress display on stderr, drawn only on a terminal that can take it.
struct ProgressLine {
    agent: String,
    started: Instant,
    drawn: bool,
}

impl ProgressLine {
    fn wanted() -> bool {
        std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb")
    }

    fn draw(&mut self, update: &RunResult) {
        let Some(s) = update.details.streaming.as_ref() else {
            return;
        };
        let tool = s
            .current_tool
            .as_ref()
            .map_or(String::new(), |name| format!(" · {name}"));
        let tokens = s.usage.tokens();
        let line = format!(
            "[orchestrate] {} {:.1}s · turn {}{tool} · {tokens} tokens",
            self.agent,
            self.started.elapsed().as_secs_f64(),
            s.turn_count
        );
        // No colour is ever used, so NO_COLOR needs nothing more than that; `\r` and
        // erase-line redraw in place.
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
        self.drawn = true;
    }

    fn clear(&self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

/// `orchestrate run …`: in the background, or here and now. Returns the exit status.
pub fn run(args: RunArgs) -> i32 {
    let format = args.format();
    let detail = args.detail();
    if args.background {
        return start_background(&args, format);
    }
    match args.into_plan() {
        Ok(plan) => block_on_run(plan, Print { format, detail }),
        Err(e) => print_result(format, &e.to_result(None), e.exit_status()),
    }
}

/// `orchestrate mcp-run`: the arguments of an MCP `subagent` call (written in the run
/// folder by the MCP server), run as the background run `run_id`. A refusal is recorded as
/// the run's result, for `wait`.
pub fn mcp_background(agents_dir: Option<std::path::PathBuf>, run_id: &RunId) -> i32 {
    let print = Print {
        format: OutputFormat::Json,
        detail: DetailLevel::Lean,
    };
    let state = match crate::session::StateDir::from_env() {
        Ok(state) => state,
        Err(e) => return print_internal_error(print.format, &e.to_string()),
    };
    let dir = state.run_dir(run_id);
    let file = dir.path.join(crate::background::MCP_REQUEST_FILE);
    let req = std::fs::read(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))
        .and_then(|bytes| {
            serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", file.display()))
        })
        .map_err(RunError::invalid)
        .and_then(|args| crate::mcp::background_request(args, agents_dir, run_id));
    match req {
        Ok(plan) => block_on_run(plan, print),
        Err(e) => {
            let mut result = e.to_result(Some(run_id.as_str()));
            if let Err(why) = crate::background::record_result(&dir, &mut result, e.exit_status()) {
                tracing::error!("{why}");
            }
            print_result(print.format, &result, e.exit_status())
        }
    }
}

/// How the result is printed: the format, and how much of it a JSON format carries.
#[derive(Debug, Clone, Copy)]
pub struct Print {
    pub format: OutputFormat,
    pub detail: DetailLevel,
}

/// `run … --background`: the same arguments, minus the flag, run by a detached supervisor.
fn start_background(args: &RunArgs, format: OutputFormat) -> i32 {
    let (what, fanout) = match args.background_plan() {
        Ok(plan) => plan,
        Err(e) => return print_result(format, &e.to_result(None), e.exit_status()),
    };
    let run_args: Vec<std::ffi::OsString> = std::env::args_os()
        .skip(1)
        .filter(|a| a != "--background")
        .collect();
    super::background::start(run_args, &what, fanout, format)
}

/// Runs on a current-thread runtime: the work is I/O-bound, and one thread keeps the
/// run's cost and its memory small. A panic still prints a valid JSON result.
fn block_on_run(plan: Plan, print: Print) -> i32 {
    let format = print.format;
    let outcome = std::panic::catch_unwind(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok::<i32, std::io::Error>(rt.block_on(run_command(plan, print)))
    });
    match outcome {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => print_internal_error(format, &format!("failed to start the runtime: {e}")),
        Err(_) => print_internal_error(format, "orchestrate panicked (see stderr)"),
    }
}

/// Runs the plan and prints the result. Returns the process exit status.
async fn run_command(plan: Plan, print: Print) -> i32 {
    let Print { format, detail } = print;
    let controls = Controls::default();
    let watcher = match watch_signals(controls.clone()) {
        Ok(w) => w,
        Err(e) => {
            return print_internal_error(
                format,
                &format!("failed to install signal handlers: {e}"),
            );
        }
    };
    // Not listening costs only `orchestrate stop` and `watch` the stop of one run.
    let _stop_requests = crate::live::stop::listen()
        .inspect_err(|e| tracing::warn!("stop requests are not taken: {e}"))
        .ok();
    let mut env = match RunEnv::load(&RunEnv::cwd_of(plan.cwd())) {
        Ok(env) => env,
        Err(e) => return print_result(format, &e.to_result(None), e.exit_status()),
    };
    // A background run (its id was checked as `--run-id` was parsed, or chosen by the MCP
    // server): whoever waits for it reads its result from its folder, even for a refusal
    // that never reached the child.
    let background = plan.run_id().and_then(|id| RunId::parse(id).ok());
    let req = match plan {
        Plan::Single(req) => *req,
        fanout => {
            let mut output = match &background {
                Some(id) => match as_background_fanout(fanout, &mut env, id) {
                    Ok(fanout) => {
                        let output = fanout.run(&env, &controls, None, None).await;
                        remove_unrun_task_folders(&env, id);
                        output
                    }
                    Err(e) => RunOutput::from_result(e.to_result(Some(id.as_str()))),
                },
                None => fanout.run(&env, &controls, None, None).await,
            };
            if let Some(id) = &background {
                record_background(&env, id, &mut output);
            }
            watcher.abort();
            return print_result_at(print, &output.result, output.exit_status);
        }
    };
    let progress = std::sync::Mutex::new(ProgressLine {
        agent: req.agent.clone(),
        started: Instant::now(),
        drawn: false,
    });
    let show_progress = ProgressLine::wanted();
    let observer: Option<Observer<'_>> = if format == OutputFormat::StreamJson || show_progress {
        Some(Observer::new(detail, |update: &RunResult| {
            if show_progress {
                progress.lock().expect("progress lock").draw(update);
            }
            if format == OutputFormat::StreamJson {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{}", update.to_json_line());
                let _ = out.flush();
            }
        }))
    } else {
        None
    };
    let mut output = pipeline::run(&req, &env, &controls, observer).await;
    if let Some(id) = &background {
        record_background(&env, id, &mut output);
    }
    progress.lock().expect("progress lock").clear();
    watcher.abort();
    print_result_at(print, &output.result, output.exit_status)
}

/// Records a background run's result in its folder, for `wait`.
fn record_background(env: &RunEnv, id: &RunId, output: &mut RunOutput) {
    let dir = env.state.run_dir(id);
    if let Err(e) = crate::background::record_result(&dir, &mut output.result, output.exit_status) {
        tracing::error!("{e}");
    }
}

/// The fan-out of background run `id` as its starter planned it: each task under the run
/// id chosen for it (whose folder exists), the fan-out under `id`.
fn as_background_fanout(plan: Plan, env: &mut RunEnv, id: &RunId) -> Result<Plan, RunError> {
    let record = crate::background::fanout_record(&env.state.run_dir(id))
        .map_err(RunError::invalid)?
        .ok_or_else(|| {
            RunError::invalid(format!(
                "run {id} has no plan of its tasks ({}): a fan-out runs in the background only as `run --background` starts it",
                crate::background::TASKS_FILE
            ))
        })?;
    let assign = |mut reqs: Vec<crate::run::RunRequest>| {
        if reqs.len() != record.tasks.len() {
            return Err(RunError::invalid(format!(
                "run {id} planned {} tasks, the command line has {}",
                record.tasks.len(),
                reqs.len()
            )));
        }
        for (req, task) in reqs.iter_mut().zip(&record.tasks) {
            req.run_id = Some(task.run_id.clone());
        }
        Ok(reqs)
    };
    let plan = match plan {
        Plan::Parallel(reqs) => Plan::Parallel(assign(reqs)?),
        Plan::Chain(reqs) => Plan::Chain(assign(reqs)?),
        single => single,
    };
    env.fanout_id = Some(id.to_string());
    Ok(plan)
}

/// Removes the folders made at the start for tasks of background fan-out `id` that never
/// ran (stopped before their turn, a chain stopped early): empty but for the child's
/// empty place. A folder with anything in it stays.
fn remove_unrun_task_folders(env: &RunEnv, id: &RunId) {
    let Ok(Some(record)) = crate::background::fanout_record(&env.state.run_dir(id)) else {
        return;
    };
    for task in &record.tasks {
        let Ok(task_id) = RunId::parse(&task.run_id) else {
            continue;
        };
        let dir = env.state.run_dir(&task_id);
        // Each fails, changing nothing, unless the folder is empty by then.
        let _ = std::fs::remove_dir(dir.child_dir());
        let _ = std::fs::remove_dir(&dir.path);
    }
}

/// First INT/TERM/HUP: stop the child's group gracefully. Second: kill it at once.
fn watch_signals(controls: Controls) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        let mut seen = 0;
        loop {
            let name = tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
            };
            seen += 1;
            if seen == 1 && crate::run::tree_spent_above() {
                // The orchestrate above stops this one for the tree's budget: its children
                // stop for that budget, which their results say.
                tracing::info!("{name}: the tree's budget is spent; stopping the subagent");
                controls.budget.cancel();
            } else if seen == 1 {
                tracing::info!("{name}: stopping the subagent (send it again to kill at once)");
                controls.cancel.cancel();
            } else {
                tracing::info!("{name} again: killing the subagent");
                controls.kill.cancel();
            }
        }
    }))
}

/// Prints the lean result (what a parent acts on; README, The result) and returns
/// `status`.
pub fn print_result(format: OutputFormat, result: &RunResult, status: i32) -> i32 {
    print_result_at(
        Print {
            format,
            detail: DetailLevel::Lean,
        },
        result,
        status,
    )
}

/// Prints the result with the detail asked for and returns `status`.
pub fn print_result_at(print: Print, result: &RunResult, status: i32) -> i32 {
    let mut out = std::io::stdout().lock();
    let written = match print.format {
        OutputFormat::Json | OutputFormat::StreamJson => {
            writeln!(out, "{}", result.to_stdout_line(print.detail))
        }
        OutputFormat::Text => {
            let text = result.content.first().map_or("", |c| c.text.as_str());
            let r = writeln!(out, "{text}");
            eprintln!("{}", super::summary::summary(result, status));
            r
        }
    };
    let _ = out.flush();
    // A closed stdout (the parent went away) must not turn a success into a crash; the
    // result is in result.json regardless.
    if written.is_err() {
        tracing::warn!("could not write the result to stdout");
    }
    status
}

pub fn print_internal_error(format: OutputFormat, message: &str) -> i32 {
    match format {
        OutputFormat::Json | OutputFormat::StreamJson => {
            println!("{}", internal_error_json(message))
        }
        OutputFormat::Text => eprintln!("orchestrate: internal error: {message}"),
    }
    1
}

#[cfg(test)]
mod tests {
    /// The unwinder is linked statically (`build.rs`): a panic still unwinds to
    /// `catch_unwind`, which is how a run that panics still prints a result. Were
    /// unwinding broken, this would abort the test binary.
    #[test]
    fn a_panic_unwinds_to_catch_unwind() {
        let caught = std::panic::catch_unwind(|| -> u32 { panic!("unwound") });
        let message = caught.expect_err("the panic is caught");
        assert_eq!(message.downcast_ref::<&str>(), Some(&"unwound"));
    }
}
