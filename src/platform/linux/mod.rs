//! Linux: the child under a controller process that holds its whole tree (a PID
//! namespace where one can be had, else a child subreaper), and start times from `/proc`.
//! See `controller.rs` for how the tree is held and stopped.

mod controller;
mod listeners;

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use controller::{IdMaps, Mode, Plan, StartError};

use super::landlock::Ruleset;
use super::unix::{on_spawner_thread, peek_exit, LeaderExit, StartTime};
use super::{Confinement, Containment, Leftovers, SpawnSpec};

#[cfg(test)]
pub(crate) const IMPLEMENTATION: &str = "linux";

/// `ORCHESTRATE_CONTAINMENT=pidns|subreaper` forces one mode (diagnostics and tests);
/// unset or `auto`, the strongest that works.
const CONTAINMENT_VAR: &str = "ORCHESTRATE_CONTAINMENT";

/// The clone flags tried and found not to work here, with why (asked once per set).
static UNAVAILABLE: Mutex<Vec<(libc::c_int, String)>> = Mutex::new(Vec::new());

fn unavailable(flags: libc::c_int) -> Option<String> {
    let known = UNAVAILABLE.lock().unwrap_or_else(|p| p.into_inner());
    known
        .iter()
        .find(|(f, _)| *f == flags)
        .map(|(_, r)| r.clone())
}

fn mark_unavailable(flags: libc::c_int, why: String) {
    tracing::debug!("PID namespaces (clone flags {flags:#x}) are not available: {why}");
    UNAVAILABLE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((flags, why));
}

/// The mechanism the sandbox uses here, or why there is none.
pub(crate) fn sandbox_mechanism() -> Result<&'static str, String> {
    super::landlock::abi().map(|_| "landlock")
}

/// Whether the child can have a network of its own (`Confinement::no_network`), as far as
/// is known before trying: not when forced into subreaper mode, nor where a namespace
/// already failed to start.
pub(crate) fn network_namespaces() -> Result<(), String> {
    if std::env::var(CONTAINMENT_VAR).as_deref() == Ok("subreaper") {
        return Err(format!("{CONTAINMENT_VAR}=subreaper: no namespaces"));
    }
    let known = UNAVAILABLE.lock().unwrap_or_else(|p| p.into_inner());
    match known.iter().find(|(f, _)| f & libc::CLONE_NEWNET != 0) {
        Some((_, why)) => Err(why.clone()),
        None => Ok(()),
    }
}

/// A started child: its controller, the pipes of its stdout and stderr, and its exit
/// once the controller reported it.
#[derive(Debug)]
pub(crate) struct GroupChild {
    controller: u32,
    mode: Mode,
    /// Closing it (orchestrate exiting) is how the controller knows, during its start,
    /// that orchestrate is gone; kept for the child's life.
    _alive: OwnedFd,
    status: OwnedFd,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    exit: Option<(LeaderExit, bool)>,
    reaped: bool,
    degraded: Option<String>,
    /// The listeners made inside the child's network namespace; None without one.
    listeners: Option<Vec<Option<OwnedFd>>>,
}

impl GroupChild {
    /// The controller's pid (for logs).
    pub(crate) fn id(&self) -> u32 {
        self.controller
    }

    pub(crate) fn take_stdout(&mut self) -> Option<OwnedFd> {
        self.stdout.take()
    }

    pub(crate) fn take_stderr(&mut self) -> Option<OwnedFd> {
        self.stderr.take()
    }

    /// A descriptor that becomes readable when the child's exit can be read with
    /// [`GroupChild::peek_exit`] (a duplicate of the controller's status pipe; the
    /// controller's own exit raises SIGCHLD, the child's does not reach orchestrate).
    pub(crate) fn exit_notice(&self) -> Option<io::Result<OwnedFd>> {
        Some(self.status.try_clone())
    }

    pub(crate) fn containment(&self) -> Containment {
        match self.mode {
            Mode::Namespace { .. } => Containment::PidNamespace,
            Mode::Subreaper => Containment::Subreaper,
        }
    }

    /// Why a weaker containment than a PID namespace is in use.
    pub(crate) fn degraded(&self) -> Option<&str> {
        self.degraded.as_deref()
    }

    /// The listeners asked for in `Confinement::listen`, made inside the child's network
    /// namespace, in that order (None: an optional one that could not be made); None when
    /// the child got no network namespace (an optional one that could not be had).
    pub(crate) fn take_listeners(&mut self) -> Option<Vec<Option<std::net::TcpListener>>> {
        self.listeners.take().map(|fds| {
            fds.into_iter()
                .map(|fd| fd.map(std::net::TcpListener::from))
                .collect()
        })
    }

    /// The child's exit, once it has exited (its descendants may live on).
    pub(crate) fn peek_exit(&mut self) -> io::Result<Option<LeaderExit>> {
        if let Some((exit, _)) = self.exit {
            return Ok(Some(exit));
        }
        if self.take_record()? {
            return Ok(self.exit.map(|(e, _)| e));
        }
        if self.reaped || peek_exit(self.controller)?.is_some() {
            // A record written before the controller ended is readable now.
            if !self.take_record()? {
                // The controller died first (orchestrate's kill): the tree went with it.
                self.exit = Some((LeaderExit::Signaled(libc::SIGKILL), false));
            }
            return Ok(self.exit.map(|(e, _)| e));
        }
        Ok(None)
    }

    fn take_record(&mut self) -> io::Result<bool> {
        Ok(match controller::read_record(&self.status)? {
            Some(record) => {
                self.exit = Some((wait_status(record.status), record.leftovers));
                true
            }
            None => false,
        })
    }

    /// Asks for a graceful stop: the controller forwards SIGTERM to the tree.
    pub(crate) fn terminate(&self) -> io::Result<()> {
        self.signal_controller(libc::SIGTERM)
    }

    /// Ends the whole tree at once.
    pub(crate) fn kill(&self) -> io::Result<()> {
        match self.mode {
            // The namespace's init dying takes everything in it.
            Mode::Namespace { .. } => self.signal_controller(libc::SIGKILL),
            // The controller kills what it holds, then exits.
            Mode::Subreaper => self.signal_controller(libc::SIGUSR1),
        }
    }

    fn signal_controller(&self, sig: libc::c_int) -> io::Result<()> {
        if self.reaped {
            return Ok(());
        }
        // SAFETY: the controller is our unreaped child: its pid cannot name another.
        if unsafe { libc::kill(self.controller as libc::pid_t, sig) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Ends the tree and reaps the controller.
    pub(crate) fn kill_and_reap(&mut self) -> io::Result<()> {
        if self.reaped {
            return Ok(());
        }
        let _ = self.kill();
        let _ = self.peek_exit();
        // SAFETY: reaping our own child.
        let rc = unsafe { libc::waitpid(self.controller as libc::pid_t, std::ptr::null_mut(), 0) };
        self.reaped = true;
        let _ = self.peek_exit();
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether descendants outlived the child (alive in its tree when it exited).
    pub(crate) fn leftovers(&self) -> Leftovers {
        match self.exit {
            Some((_, true)) => Leftovers::InTree,
            _ => Leftovers::None,
        }
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.kill();
            // Reaps at once what already died; the rest is reaped when orchestrate exits.
            // SAFETY: our own child.
            unsafe {
                libc::waitpid(
                    self.controller as libc::pid_t,
                    std::ptr::null_mut(),
                    libc::WNOHANG,
                )
            };
        }
    }
}

fn wait_status(status: libc::c_int) -> LeaderExit {
    if libc::WIFSIGNALED(status) {
        LeaderExit::Signaled(libc::WTERMSIG(status))
    } else {
        LeaderExit::Exited(libc::WEXITSTATUS(status))
    }
}

/// Starts `spec` under a controller, in the strongest containment that works here.
pub(crate) fn spawn(spec: SpawnSpec) -> io::Result<GroupChild> {
    let env = child_environment(&spec);
    let program = resolve_program(&spec.program, &env)?;
    let ruleset = match &spec.confinement.writable {
        None => None,
        Some(paths) => Some(ruleset(paths).map_err(io::Error::other)?),
    };
    let plan_parts = PlanParts {
        program: cstring(program.as_os_str())?,
        argv: std::iter::once(spec.program.as_os_str())
            .chain(spec.args.iter().map(OsString::as_os_str))
            .map(cstring)
            .collect::<io::Result<_>>()?,
        envp: env
            .iter()
            .filter(|(k, _)| !k.is_empty() && !k.as_bytes().contains(&b'='))
            .map(|(k, v)| {
                let mut kv = k.clone();
                kv.push("=");
                kv.push(v);
                cstring(&kv)
            })
            .collect::<io::Result<_>>()?,
        cwd: cstring(spec.cwd.as_os_str())?,
    };
    let confinement = spec.confinement;
    on_spawner_thread(move || start_in_best_mode(plan_parts, &confinement, ruleset))
}

struct PlanParts {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
}

fn start_in_best_mode(
    parts: PlanParts,
    confinement: &Confinement,
    ruleset: Option<Ruleset>,
) -> io::Result<GroupChild> {
    // SAFETY: no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let sandboxed = ruleset.is_some();
    // Anyone but root needs a user namespace to own the others. Root needs none; its
    // sandboxed child gives up every capability instead (cheaper than a user namespace,
    // whose id maps orchestrate would have to write for each run). An unsandboxed child
    // of root with a network of its own gets one all the same: root's capabilities over
    // the host would undo the network namespace (unmount the namespace's /proc, join a
    // host process's network namespace from the one under it), while inside its own it
    // keeps them for what it does (a CLI's own bubblewrap sandbox).
    let userns = !root || (confinement.no_network && !sandboxed);
    let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    if userns {
        flags |= libc::CLONE_NEWUSER;
    }
    if confinement.no_network {
        flags |= libc::CLONE_NEWNET;
    }
    let forced = std::env::var(CONTAINMENT_VAR).unwrap_or_default();
    let degraded;
    let mut plan = Plan {
        mode: Mode::Namespace { clone_flags: flags },
        program: parts.program,
        argv: parts.argv,
        envp: parts.envp,
        cwd: parts.cwd,
        private_tmp: match &confinement.private_tmp {
            Some(p) => Some(cstring(p.as_os_str())?),
            None => None,
        },
        landlock: ruleset.as_ref().map(Ruleset::raw_fd),
        drop_capabilities: root && sandboxed,
        listen: if confinement.no_network {
            confinement
                .listen
                .iter()
                .map(listeners::ListenSpec::new)
                .collect()
        } else {
            Vec::new()
        },
    };
    if plan.listen.len() > listeners::MAX_LISTENERS {
        return Err(io::Error::other(format!(
            "at most {} listeners fit in a network namespace, {} were asked for",
            listeners::MAX_LISTENERS,
            plan.listen.len()
        )));
    }
    if forced == "subreaper" {
        degraded = Some(format!("{CONTAINMENT_VAR}=subreaper"));
    } else if let Some(why) = unavailable(flags) {
        degraded = Some(why);
    } else {
        let maps = userns.then(IdMaps::for_current_user);
        match controller::start(&plan, maps.as_ref()) {
            Ok(started) => return Ok(child(started, plan.mode, None, confinement.no_network)),
            Err(StartError::Clone(e)) => {
                let why = format!("clone of a new PID namespace failed: {e}");
                mark_unavailable(flags, why.clone());
                degraded = Some(why);
            }
            Err(e @ StartError::IdMap(_)) => {
                mark_unavailable(flags, e.to_string());
                degraded = Some(e.to_string());
            }
            Err(StartError::Stage { stage, source }) if stage.is_setup() => {
                let why = format!("{} failed: {source}", stage.describe());
                mark_unavailable(flags, why.clone());
                degraded = Some(why);
            }
            Err(e) => return Err(start_error(e)),
        }
    }
    if forced == "pidns" {
        return Err(io::Error::other(format!(
            "{CONTAINMENT_VAR}=pidns, but PID namespaces are not available: {}",
            degraded.unwrap_or_default()
        )));
    }
    if confinement.no_network && !confinement.network_optional {
        return Err(io::Error::other(format!(
            "{} needs a network namespace, which is not available here: {}",
            if confinement.listen.is_empty() {
                "network off"
            } else {
                "network provider"
            },
            degraded.unwrap_or_default()
        )));
    }
    plan.mode = Mode::Subreaper;
    plan.private_tmp = None;
    plan.listen.clear();
    match controller::start(&plan, None) {
        Ok(started) => Ok(child(started, plan.mode, degraded, false)),
        Err(e) => Err(start_error(e)),
    }
}

fn child(
    started: controller::Started,
    mode: Mode,
    degraded: Option<String>,
    own_network: bool,
) -> GroupChild {
    GroupChild {
        listeners: own_network.then_some(started.listeners),
        controller: started.pid,
        mode,
        _alive: started.alive,
        status: started.status,
        stdout: Some(started.stdout),
        stderr: Some(started.stderr),
        exit: None,
        reaped: false,
        degraded,
    }
}

/// The run's error, keeping the errno's kind (a missing program is `NotFound`, which
/// the result reports as exit code 127).
fn start_error(e: StartError) -> io::Error {
    match e {
        StartError::Stage { stage, source } => io::Error::new(
            source.kind(),
            format!("{} failed: {source}", stage.describe()),
        ),
        StartError::Clone(source) | StartError::IdMap(source) | StartError::Io(source) => source,
    }
}

fn ruleset(writable: &[PathBuf]) -> Result<Ruleset, super::landlock::RulesetError> {
    let mut rules = Ruleset::new()?;
    for path in writable {
        rules.allow_writes(path)?;
    }
    Ok(rules)
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} contains a NUL byte", s.to_string_lossy()),
        )
    })
}

/// orchestrate's environment with the spec's variables on top, and `PWD` following the
/// working directory (shells keep it in step, and some CLIs, opencode, take their
/// project folder from it rather than from getcwd()).
fn child_environment(spec: &SpawnSpec) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !spec.env_remove.contains(k))
        .collect();
    let mut set = |k: &OsStr, v: &OsStr| match env.iter_mut().find(|(key, _)| key == k) {
        Some(entry) => entry.1 = v.to_os_string(),
        None => env.push((k.to_os_string(), v.to_os_string())),
    };
    set(OsStr::new("PWD"), spec.cwd.as_os_str());
    for (k, v) in &spec.env {
        set(k, v);
    }
    env
}

/// Looks the program up like `execvp` would, on the child's PATH. The child executes
/// the path found (`execve`), since the lookup allocates.
fn resolve_program(program: &OsStr, env: &[(OsString, OsString)]) -> io::Result<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let not_found = || {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} not found on PATH", program.to_string_lossy()),
        )
    };
    if program.is_empty() {
        return Err(not_found());
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
        .ok_or_else(not_found)
}

fn is_executable(p: &Path) -> bool {
    let Ok(c) = CString::new(p.as_os_str().to_owned().into_vec()) else {
        return false;
    };
    // SAFETY: a valid C string.
    p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

/// A live (not zombie) process's start time in clock ticks since boot (`/proc/<pid>/stat`
/// field 22), or None.
pub(crate) fn process_start_time(pid: u32) -> Option<StartTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain anything.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // fields[0] is the state (field 3); starttime is field 22.
    if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    let ticks: u64 = fields.get(19)?.parse().ok()?;
    Some(StartTime(ticks.to_string()))
}
