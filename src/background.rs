//! Background runs: each one is a detached `orchestrate run` (its own session, no terminal,
//! not a child anyone waits for) that writes `result.json` like any run. `supervisor.json`
//! records its pid and start time so that a supervisor that died (SIGKILL, reboot) is seen
//! as dead rather than shown as running forever. A result its run folder cannot take (a
//! full disk, a state directory turned read-only) is kept outside the state directory, in
//! a folder of the user's own under the system's temporary directory, where `wait` finds
//! it.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{self, Read, Seek};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::platform::{self, StartTime};
use crate::result::{Background, BackgroundTask, Details, ErrorCode, Mode, RunResult, TextContent};
use crate::session::{self, RunDir, RunId, StateDir};

pub(crate) const SUPERVISOR_FILE: &str = "supervisor.json";
pub(crate) const SUPERVISOR_LOG: &str = "supervisor.log";
pub(crate) const EXIT_STATUS_FILE: &str = "exit-status";
/// The arguments of an MCP `subagent` call run in the background, for its supervisor.
pub(crate) const MCP_REQUEST_FILE: &str = "mcp-request.json";
/// A background fan-out's mode and tasks, each with the run id chosen for it at the start
/// ([`FanoutRecord`]): its supervisor runs each task under that id.
pub(crate) const TASKS_FILE: &str = "tasks.json";
/// Bytes of the end of `supervisor.log` read for its last line.
const LOG_TAIL_BYTES: u64 = 4096;
/// Characters of that line quoted in a dead supervisor's result.
const MAX_LOG_LINE_CHARS: usize = 300;

/// A background run's result as kept outside its run folder, with the status it maps to.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    exit_status: i32,
    result: RunResult,
}

/// Who supervises a background run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SupervisorRecord {
    pub pid: u32,
    /// The process's start time as the platform tells it: with the pid, it tells the
    /// supervisor from a later process that reused its pid. Absent when it could not be
    /// read (then only the pid is checked), and in records of older versions, which kept
    /// `startTicks` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<StartTime>,
    pub started_at_ms: u64,
}

/// How a background run stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RunState {
    /// `result.json` exists; the process exit status it maps to.
    Finished(Box<RunResult>, i32),
    Running(SupervisorRecord),
    /// The supervisor is gone and left no result.
    Dead(SupervisorRecord),
    /// Neither a result nor a supervisor record: not a background run, or not started.
    Unknown,
}

/// A background fan-out as its starter planned it ([`TASKS_FILE`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FanoutRecord {
    pub mode: Mode,
    pub tasks: Vec<BackgroundTask>,
}

/// A fan-out about to start in the background: its mode and each task's agent, in order.
pub(crate) type FanoutPlan = (Mode, Vec<String>);

/// A background run just started.
pub(crate) struct Started {
    pub run_id: String,
    pub run_dir: RunDir,
    pub pid: u32,
    /// A fan-out's plan, with each task's run id (its folder made already).
    pub fanout: Option<FanoutRecord>,
}

impl Started {
    /// The result that says so: `text`, and the run's id, supervisor, session file (a
    /// single run's) and tasks (a fan-out's).
    pub(crate) fn result(&self, text: String) -> RunResult {
        running_result(
            text,
            &self.run_id,
            self.pid,
            &self.run_dir,
            self.fanout.as_ref(),
        )
    }
}

/// Starts `orchestrate <run_args> --run-id <id>` detached. `mcp_request`, when given, is
/// written to the run folder first ([`MCP_REQUEST_FILE`]); so is a fan-out's plan
/// (`fanout`: its mode and each task's agent), once each task has a run id and a folder
/// ([`TASKS_FILE`]), so that the caller can name the tasks (to `send` them messages)
/// before they start.
pub(crate) fn start(
    run_args: &[OsString],
    state: &StateDir,
    mcp_request: Option<&[u8]>,
    fanout: Option<FanoutPlan>,
) -> io::Result<Started> {
    let run_id = RunId::new();
    let run_dir = state.create_run(&run_id)?;
    if let Some(bytes) = mcp_request {
        write_atomic(&run_dir, MCP_REQUEST_FILE, bytes)?;
    }
    let fanout = match fanout {
        Some((mode, agents)) => {
            let tasks = agents
                .into_iter()
                .map(|agent| {
                    let id = RunId::new();
                    state.create_run(&id)?;
                    Ok(BackgroundTask {
                        agent,
                        run_id: id.to_string(),
                    })
                })
                .collect::<io::Result<Vec<_>>>()?;
            let record = FanoutRecord { mode, tasks };
            write_atomic(
                &run_dir,
                TASKS_FILE,
                &serde_json::to_vec(&record).map_err(io::Error::other)?,
            )?;
            Some(record)
        }
        None => None,
    };
    let log = run_dir.create_file(SUPERVISOR_LOG)?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(run_args)
        .arg("--run-id")
        .arg(run_id.as_str())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
    // SAFETY: setsid is async-signal-safe. A new session has no controlling terminal, so
    // closing the caller's terminal sends it no SIGHUP, and it is in no process group of
    // the caller's shell.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    let pid = child.id();
    // Not waited for: when the caller exits, init adopts and reaps it.
    drop(child);
    let record = SupervisorRecord {
        pid,
        start_time: platform::process_start_time(pid),
        started_at_ms: session::now_unix_ms(),
    };
    write_atomic(
        &run_dir,
        SUPERVISOR_FILE,
        &serde_json::to_vec(&record).map_err(io::Error::other)?,
    )?;
    Ok(Started {
        run_id: run_id.to_string(),
        run_dir,
        pid,
        fanout,
    })
}

/// The plan of the background fan-out whose folder is `run_dir`; None for a single run.
/// A plan that cannot be read is an error naming the file.
pub(crate) fn fanout_record(run_dir: &RunDir) -> Result<Option<FanoutRecord>, String> {
    let file = run_dir.path.join(TASKS_FILE);
    match std::fs::read(&file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{}: {e}", file.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", file.display())),
    }
}

/// Written by the supervisor after `result.json`: the exit status the run maps to (130
/// when cancelled, which the result alone cannot say).
pub(crate) fn record_exit_status(run_dir: &RunDir, status: i32) -> io::Result<()> {
    write_atomic(run_dir, EXIT_STATUS_FILE, format!("{status}\n").as_bytes())
}

/// The warning of a result its run folder could not take.
pub(crate) fn unrecorded_warning(run_dir: &RunDir, e: &io::Error) -> String {
    format!(
        "the result could not be recorded in {}: {e}",
        run_dir.path.display()
    )
}

/// Where results are kept that their run folders could not take: `orchestrate-<uid>` in
/// the system's temporary directory (`$TMPDIR`, else `/tmp`), apart from the state
/// directory, as a rule on another disk.
fn kept_dir() -> PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("orchestrate-{me}"))
}

/// The kept result of the run whose folder is `run_dir`.
fn kept_file(run_dir: &RunDir) -> Option<PathBuf> {
    let id = run_dir.path.file_name()?.to_str()?;
    RunId::parse(id).ok()?;
    Some(kept_dir().join(format!("{id}.json")))
}

/// Records a finished background run for `wait`: `result.json` and its exit status in the
/// run folder, else (the folder cannot take them) the result, with warnings that say why
/// and where it went, kept outside the state directory. The error says what could not be
/// done, for the supervisor's log.
pub(crate) fn record_result(
    run_dir: &RunDir,
    result: &mut RunResult,
    status: i32,
) -> Result<(), String> {
    let Err(e) = run_dir
        .write_result(result)
        .and_then(|()| record_exit_status(run_dir, status))
    else {
        return Ok(());
    };
    let why = unrecorded_warning(run_dir, &e);
    let Some(file) = kept_file(run_dir) else {
        return Err(why);
    };
    let run_id = run_dir
        .path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    let warnings = [
        why.clone(),
        format!(
            "the result was kept in {} instead (`orchestrate wait {run_id}` reads it there)",
            file.display()
        ),
    ];
    if let Some(single) = result.details.results.first_mut() {
        for w in warnings {
            if !single.warnings.contains(&w) {
                single.warnings.push(w);
            }
        }
    }
    let kept = Kept {
        exit_status: status,
        result: result.clone(),
    };
    let written = serde_json::to_vec(&kept)
        .map_err(io::Error::other)
        .and_then(|bytes| {
            session::private_dir(&kept_dir())?;
            RunDir { path: kept_dir() }.write_atomic(&format!("{run_id}.json"), &bytes)
        });
    match written {
        Ok(()) => Err(format!("{why}; it was kept in {}", file.display())),
        Err(e) => Err(format!(
            "{why}; nor could it be kept in {}: {e}. The result: {}",
            file.display(),
            result.to_json_line()
        )),
    }
}

/// The result kept for the run whose folder is `run_dir`, if there is one.
fn read_kept(run_dir: &RunDir) -> Option<Kept> {
    let file = kept_file(run_dir)?;
    let mut bytes = Vec::new();
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&file)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Moves a kept result into its run folder once that folder can take it again.
pub(crate) fn adopt_kept(run_dir: &RunDir) {
    let (Some(kept), Some(file)) = (read_kept(run_dir), kept_file(run_dir)) else {
        return;
    };
    if run_dir.result_file().exists() {
        return;
    }
    let adopted = run_dir
        .write_result(&kept.result)
        .and_then(|()| record_exit_status(run_dir, kept.exit_status))
        .and_then(|()| std::fs::remove_file(&file));
    if let Err(e) = adopted {
        tracing::debug!("the kept result {} stays there: {e}", file.display());
    }
}

pub(crate) fn state(run_dir: &RunDir) -> io::Result<RunState> {
    let record: Option<SupervisorRecord> = match std::fs::read(run_dir.path.join(SUPERVISOR_FILE)) {
        Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(io::Error::other)?),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let alive = record.as_ref().is_some_and(is_same_process);
    match (read_result(run_dir)?, read_exit_status(run_dir), record) {
        (Some(result), Some(status), _) => Ok(RunState::Finished(Box::new(result), status)),
        // The supervisor writes result.json, then its exit status, then exits: between
        // the two it is still finishing.
        (Some(_), None, Some(record)) if alive => Ok(RunState::Running(record)),
        (Some(result), None, _) => {
            let status = result.exit_status();
            Ok(RunState::Finished(Box::new(result), status))
        }
        (None, _, Some(record)) if alive => Ok(RunState::Running(record)),
        (None, _, Some(record)) => {
            // It may have finished between the looks, or kept its result elsewhere.
            match (read_result(run_dir)?, read_kept(run_dir)) {
                (Some(result), _) => {
                    let status = read_exit_status(run_dir).unwrap_or_else(|| result.exit_status());
                    Ok(RunState::Finished(Box::new(result), status))
                }
                (None, Some(kept)) => {
                    Ok(RunState::Finished(Box::new(kept.result), kept.exit_status))
                }
                (None, None) => Ok(RunState::Dead(record)),
            }
        }
        (None, _, None) => Ok(RunState::Unknown),
    }
}

fn read_result(run_dir: &RunDir) -> io::Result<Option<RunResult>> {
    match std::fs::read(run_dir.result_file()) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(io::Error::other),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn read_exit_status(run_dir: &RunDir) -> Option<i32> {
    std::fs::read_to_string(run_dir.path.join(EXIT_STATUS_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Records the failure of a run whose supervisor died, so that every later look agrees:
/// the result says so, with the last line of the supervisor's log (its last words on
/// what went wrong) and, when the run folder cannot take it, why it is not recorded.
pub(crate) fn mark_dead(
    run_dir: &RunDir,
    run_id: &RunId,
    record: &SupervisorRecord,
) -> (RunResult, i32) {
    let mut message = format!(
        "The background supervisor of run {run_id} (pid {}) died before the run finished; \
         its session so far is in {}.",
        record.pid,
        run_dir.session_file().display()
    );
    if let Some(line) = last_log_line(run_dir) {
        message.push_str(&format!(" Its log ends with: {line}"));
    }
    let result = |message: String| {
        RunResult::refusal(ErrorCode::SubagentFailed, message, Some(run_id.to_string()))
    };
    let dead = result(message.clone());
    match run_dir
        .write_result(&dead)
        .and_then(|()| record_exit_status(run_dir, 1))
    {
        Ok(()) => (dead, 1),
        Err(e) => (
            result(format!(
                "{message} (this could not be recorded in {}: {e})",
                run_dir.path.display()
            )),
            1,
        ),
    }
}

/// The last non-empty line of the supervisor's log, cut.
fn last_log_line(run_dir: &RunDir) -> Option<String> {
    let mut f = std::fs::File::open(run_dir.path.join(SUPERVISOR_LOG)).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(io::SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)))
        .ok()?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).ok()?;
    let tail = String::from_utf8_lossy(&tail);
    let line = tail.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    Some(match line.char_indices().nth(MAX_LOG_LINE_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_string(),
    })
}

/// Background runs that have no result yet, newest first.
pub(crate) fn unfinished(state: &StateDir) -> Vec<(String, RunState)> {
    let Ok(entries) = std::fs::read_dir(state.runs_dir()) else {
        return Vec::new();
    };
    let mut out: Vec<(String, RunState)> = entries
        .flatten()
        .filter_map(|e| {
            // Only folders named as runs are: anything else there is not ours to read.
            let id = RunId::parse(e.file_name().to_str()?).ok()?;
            let dir = state.run_dir(&id);
            if !dir.path.join(SUPERVISOR_FILE).exists() || dir.result_file().exists() {
                return None;
            }
            self::state(&dir).ok().map(|s| (id.to_string(), s))
        })
        .collect();
    out.sort_by_key(|(_, s)| match s {
        RunState::Running(r) | RunState::Dead(r) => std::cmp::Reverse(r.started_at_ms),
        _ => std::cmp::Reverse(0),
    });
    out
}

/// Whether the recorded supervisor is alive: its pid is a live process that started when
/// the record says. A record without a start time (of an older version, or whose start
/// time could not be read) proves nothing: the pid may be anyone's by now.
pub(crate) fn is_same_process(record: &SupervisorRecord) -> bool {
    let Some(recorded) = &record.start_time else {
        return false;
    };
    // Only a pid that names one process: 0 and -1 (u32::MAX) would signal groups or all.
    if record.pid < 2 || record.pid > i32::MAX as u32 {
        return false;
    }
    platform::process_start_time(record.pid).is_some_and(|started| started == *recorded)
}

/// Sends `signal` to the recorded supervisor, only when its start time (checked again
/// just before) is the recorded one.
pub(crate) fn signal_supervisor(record: &SupervisorRecord, signal: Signal) -> io::Result<()> {
    if !is_same_process(record) {
        return Err(io::Error::other(format!(
            "pid {} is not the supervisor the record names",
            record.pid
        )));
    }
    kill(Pid::from_raw(record.pid as i32), signal).map_err(io::Error::from)
}

fn write_atomic(run_dir: &RunDir, name: &str, bytes: &[u8]) -> io::Result<()> {
    run_dir.write_atomic(name, bytes)
}

/// How a run stands at one look.
pub(crate) enum Look {
    /// Its result and the exit status it maps to.
    Ended(Box<RunResult>, i32),
    /// A background run still running: a result that says so.
    Running(Box<RunResult>),
    /// Not a background run (or not one of this state directory), and no result yet.
    Unknown,
}

/// Looks once at the run `run_id`: its result when it has ended (a supervisor that died
/// is recorded as the run's failure; a result kept outside the state directory goes into
/// the run folder as soon as that can take it).
pub(crate) fn look(state: &StateDir, run_id: &RunId) -> std::io::Result<Look> {
    let run_dir = state.run_dir(run_id);
    Ok(match self::state(&run_dir)? {
        RunState::Finished(result, status) => {
            adopt_kept(&run_dir);
            Look::Ended(result, status)
        }
        RunState::Dead(record) => {
            let (result, status) = mark_dead(&run_dir, run_id, &record);
            Look::Ended(Box::new(result), status)
        }
        RunState::Unknown => Look::Unknown,
        RunState::Running(record) => Look::Running(Box::new(running(run_id, &record, &run_dir))),
    })
}

/// The result of a background run still running: what it is (a fan-out's mode and tasks
/// from its plan), who supervises it.
pub(crate) fn running(run_id: &RunId, record: &SupervisorRecord, run_dir: &RunDir) -> RunResult {
    // A plan that cannot be read leaves out the tasks: `wait` still says it runs.
    let fanout = fanout_record(run_dir).ok().flatten();
    running_result(
        format!("Run {run_id} is still running."),
        run_id.as_str(),
        record.pid,
        run_dir,
        fanout.as_ref(),
    )
}

fn running_result(
    text: String,
    run_id: &str,
    pid: u32,
    run_dir: &RunDir,
    fanout: Option<&FanoutRecord>,
) -> RunResult {
    // A fan-out has no session of its own: each task has one.
    let session = match fanout {
        Some(_) => String::new(),
        None => run_dir.session_file().to_string_lossy().into_owned(),
    };
    RunResult {
        content: vec![TextContent::text(text)],
        details: Details {
            mode: fanout.map_or(Mode::Single, |f| f.mode),
            run_id: Some(run_id.to_string()),
            results: Vec::new(),
            error: None,
            streaming: None,
            background: Some(Background {
                status: "running".into(),
                session_file: session,
                supervisor_pid: pid,
                tasks: fanout.map(|f| f.tasks.clone()).unwrap_or_default(),
            }),
            scheduler: Default::default(),
            tree_usage: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn our_own_process_is_alive_and_a_stale_record_is_not() {
        let me = std::process::id();
        let started = platform::process_start_time(me).expect("our own start time");
        let live = SupervisorRecord {
            pid: me,
            start_time: Some(started),
            started_at_ms: 0,
        };
        assert!(is_same_process(&live));
        let reused = SupervisorRecord {
            start_time: Some(serde_json::from_value(serde_json::json!("another time")).unwrap()),
            ..live.clone()
        };
        assert!(
            !is_same_process(&reused),
            "a different start time means the pid was reused"
        );
        let unknown = SupervisorRecord {
            start_time: None,
            ..live.clone()
        };
        assert!(
            !is_same_process(&unknown),
            "without a start time nothing proves the pid is the supervisor"
        );
        for pid in [0, 1, u32::MAX, i32::MAX as u32 + 1] {
            let group = SupervisorRecord {
                pid,
                ..live.clone()
            };
            assert!(!is_same_process(&group), "pid {pid}");
        }
        let gone = SupervisorRecord {
            pid: u32::MAX - 1,
            ..live
        };
        assert!(!is_same_process(&gone));
    }

    #[test]
    fn a_record_of_an_older_version_reads_without_its_start_ticks() {
        let old: SupervisorRecord = serde_json::from_str(
            r#"{"pid": 4242, "startTicks": 123456, "startedAtMs": 1700000000000}"#,
        )
        .unwrap();
        assert_eq!(
            old,
            SupervisorRecord {
                pid: 4242,
                start_time: None,
                started_at_ms: 1_700_000_000_000,
            }
        );
    }
}
