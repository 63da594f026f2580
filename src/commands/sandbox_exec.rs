//! `orchestrate sandbox-exec PLAN`: orchestrate's process on a cluster's node, between the
//! runner's command and the agent's (`sandbox/remote.rs` says what crosses over). It builds the
//! child's sandbox there exactly as a local run does, writes the layers that held as its
//! first stderr line, relays the child's stdout and stderr, passes a stop on to the
//! child's tree, and exits with the child's status (128+N for signal N). What the sandbox
//! holds for the run (placeholders, its CLI's login) is let go once the tree is gone.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::{sleep, sleep_until, Instant};

use crate::backends::Backend;
use crate::platform::{self, GroupChild, LeaderExit, SpawnSpec};
use crate::sandbox::remote::{self, NodePlan};
use crate::sandbox::{self, ChildEnv, Places, Prepared};

/// Once the child exited, how long descendants that still hold its pipes may go on
/// writing before its tree is killed.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);
/// After that kill, how long the pipes may take to close before the relay stops anyway.
const CLOSE_AFTER_KILL: Duration = Duration::from_secs(2);
/// When both pipes are closed but no exit was noticed yet, look again this often.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(50);
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Its own exit statuses, as a shell's: the child could not be started (126), its
/// program was not found (127).
const CANNOT_START: i32 = 126;
const NOT_FOUND: i32 = 127;

/// Runs the plan at `plan_path`; returns the process's exit status.
pub(crate) fn sandbox_exec(plan_path: &Path) -> i32 {
    // No orchestrate sandbox encloses this process on the node, whatever the submitting
    // side's environment says of its own.
    std::env::remove_var(sandbox::OUTER_VAR);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(CANNOT_START, format!("cannot start its runtime: {e}")),
    };
    runtime.block_on(run(plan_path))
}

fn fail(status: i32, message: String) -> i32 {
    let mut name = [0u8; 256];
    // SAFETY: the buffer is as long as said; the name is NUL-terminated within it or
    // truncated, and read up to its first NUL.
    unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len() - 1) };
    let end = name.iter().position(|b| *b == 0).unwrap_or(0);
    let node = String::from_utf8_lossy(&name[..end]);
    eprintln!("orchestrate {} on {node}: {message}", remote::COMMAND);
    status
}

async fn run(plan_path: &Path) -> i32 {
    // Before the child exists, so that no stop can be missed.
    let signals = match Stops::new() {
        Ok(s) => s,
        Err(e) => return fail(CANNOT_START, format!("cannot watch for signals: {e}")),
    };
    let plan = match NodePlan::read(plan_path) {
        Ok(p) => p,
        Err(e) => return fail(CANNOT_START, e.to_string()),
    };
    let backend = match Backend::parse(&plan.backend) {
        Ok(b) => b,
        Err(e) => return fail(CANNOT_START, format!("{}: {e}", plan_path.display())),
    };
    let mechanism = match platform::sandbox_mechanism() {
        Ok(m) => m,
        Err(why) => {
            return fail(
                CANNOT_START,
                format!(
                    "the sandbox {} cannot be had on this node: {why}",
                    plan.mode
                ),
            )
        }
    };
    // The node's own default state directories (its home may not be this machine's).
    let other_states = crate::session::StateDir::defaults();
    let places = Places {
        state_root: &plan.state_root,
        other_states: &other_states,
        run_dir: &plan.run_dir,
        workspace: &plan.workspace,
        git: &plan.git,
        nests: plan.nests,
    };
    // The child's environment is this process's own: the runner's command carried
    // orchestrate's here.
    let prepared = sandbox::confinement(
        &plan.sandbox(mechanism),
        &backend.sandbox_needs(),
        &ChildEnv { overrides: &[] },
        &places,
    );
    let Prepared {
        mut confinement,
        env,
        env_remove,
        held,
    } = match prepared {
        Ok(p) => p,
        Err(e) => return fail(CANNOT_START, format!("cannot prepare the sandbox: {e}")),
    };
    // `network off`: the node's own network namespace, as here.
    confinement.no_network = plan.network == crate::result::Network::Off;
    let spawned = platform::spawn(SpawnSpec {
        // A child that talks (ACP) is refused for a node before its plan is written.
        stdin_pipe: false,
        program: plan.program.clone().into(),
        args: plan.args.iter().map(Into::into).collect(),
        cwd: plan.cwd.clone(),
        env,
        env_remove,
        confinement,
    });
    let mut group = match spawned {
        Ok(g) => g,
        Err(e) => {
            let status = if e.kind() == std::io::ErrorKind::NotFound {
                NOT_FOUND
            } else {
                CANNOT_START
            };
            return fail(status, format!("could not start {}: {e}", plan.program));
        }
    };
    // The first line on stderr: nothing of the child's is relayed before it.
    {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(remote::report_line(group.layers()).as_bytes());
        let _ = err.flush();
    }
    let exit = relay(&mut group, signals).await;
    let _ = group.kill_and_reap();
    // The tree is gone: what the sandbox held for it is let go.
    drop(held);
    match exit {
        Ok(LeaderExit::Exited(code)) => code,
        Ok(LeaderExit::Signaled(n)) => 128 + n,
        Err(e) => fail(CANNOT_START, format!("lost the child: {e}")),
    }
}

/// The signals that stop the child gracefully (Slurm's `scancel --signal=TERM`, srun's
/// own forwarding of an interrupt or a hangup).
struct Stops {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    child: tokio::signal::unix::Signal,
}

impl Stops {
    fn new() -> std::io::Result<Stops> {
        Ok(Stops {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
            child: signal(SignalKind::child())?,
        })
    }
}

/// Copies the child's stdout and stderr to this process's until the child exited and its
/// pipes closed; passes stops on. Returns the child's exit.
async fn relay(group: &mut GroupChild, mut stops: Stops) -> std::io::Result<LeaderExit> {
    let mut out = pipe::Receiver::from_owned_fd(group.take_stdout().expect("piped"))?;
    let mut err = pipe::Receiver::from_owned_fd(group.take_stderr().expect("piped"))?;
    let notice: Option<AsyncFd<OwnedFd>> = match group.exit_notice() {
        // SAFETY: the AsyncFd owns the descriptor (a duplicate), which stays open and the
        // same for its whole life.
        Some(fd) => Some(unsafe { AsyncFd::register(fd?) }.map_err(std::io::Error::from)?),
        None => None,
    };
    let (mut out_open, mut err_open) = (true, true);
    // A reader gone (srun's pipe closed) only stops the copying, not the draining.
    let (mut out_ok, mut err_ok) = (true, true);
    let mut obuf = vec![0u8; READ_CHUNK_BYTES];
    let mut ebuf = vec![0u8; READ_CHUNK_BYTES];
    let mut exit: Option<LeaderExit> = None;
    let mut kill_at: Option<Instant> = None;
    let mut give_up_at: Option<Instant> = None;
    let far = Instant::now() + Duration::from_secs(86_400 * 365);
    loop {
        if exit.is_none() {
            if let Some(e) = group.peek_exit()? {
                exit = Some(e);
                kill_at = Some(Instant::now() + DRAIN_AFTER_EXIT);
            }
        }
        if let Some(e) = exit {
            if !out_open && !err_open {
                return Ok(e);
            }
        }
        tokio::select! {
            r = out.read(&mut obuf), if out_open => match r {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => out_ok = out_ok && copy(&mut std::io::stdout().lock(), &obuf[..n]),
            },
            r = err.read(&mut ebuf), if err_open => match r {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => err_ok = err_ok && copy(&mut std::io::stderr().lock(), &ebuf[..n]),
            },
            _ = stops.term.recv() => { let _ = group.terminate(); }
            _ = stops.int.recv() => { let _ = group.terminate(); }
            _ = stops.hup.recv() => { let _ = group.terminate(); }
            _ = stops.child.recv(), if exit.is_none() => {}
            ready = readable(notice.as_ref()), if exit.is_none() => {
                if let Ok(mut guard) = ready {
                    guard.clear_ready();
                }
            }
            _ = sleep(EXIT_POLL_INTERVAL), if exit.is_none() && !out_open && !err_open => {}
            _ = sleep_until(kill_at.unwrap_or(far)), if kill_at.is_some() => {
                kill_at = None;
                let _ = group.kill();
                give_up_at = Some(Instant::now() + CLOSE_AFTER_KILL);
            }
            _ = sleep_until(give_up_at.unwrap_or(far)), if give_up_at.is_some() => {
                return Ok(exit.expect("the kill follows the exit"));
            }
        }
    }
}

fn copy(to: &mut dyn Write, bytes: &[u8]) -> bool {
    to.write_all(bytes).and_then(|()| to.flush()).is_ok()
}

async fn readable(
    notice: Option<&AsyncFd<OwnedFd>>,
) -> std::io::Result<tokio::io::unix::AsyncFdReadyGuard<'_, OwnedFd>> {
    match notice {
        Some(fd) => fd.readable().await,
        None => std::future::pending().await,
    }
}
