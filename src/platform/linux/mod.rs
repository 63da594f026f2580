//! Linux: the child under a controller process that holds its whole tree (a PID
//! namespace where one can be had, else a child subreaper), and start times from `/proc`.
//! See `controller.rs` for how the tree is held and stopped.

mod controller;
mod listeners;
mod mounts;
mod seccomp;

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use controller::{IdMaps, Mode, Plan, StartError};
use mounts::MountPlan;
use seccomp::Filter;

use super::landlock::RawRules;
use super::unix::{on_lasting_thread, peek_exit, LeaderExit, StartTime};
use super::{layer, Confinement, Containment, Layers, Leftovers, MountKind, SpawnSpec};

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

/// The mechanism the sandbox uses here. Which of its layers hold is known at the spawn
/// (a mount namespace may be refused, Landlock missing): it says so then.
pub(crate) fn sandbox_mechanism() -> Result<&'static str, String> {
    Ok("namespaces")
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
    stdin: Option<OwnedFd>,
    exit: Option<(LeaderExit, bool)>,
    reaped: bool,
    degraded: Option<String>,
    /// The listeners made inside the child's network namespace; None without one.
    listeners: Option<Vec<Option<OwnedFd>>>,
    layers: Layers,
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

    /// The writing end of the child's stdin, when the spec asked for a pipe.
    pub(crate) fn take_stdin(&mut self) -> Option<OwnedFd> {
        self.stdin.take()
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

    /// The sandbox layers that held, and those that could not be had.
    pub(crate) fn layers(&self) -> &Layers {
        &self.layers
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
        if self.take_record().is_ok() && matches!(self.exit, Some((_, false))) {
            // The child exited with nothing of its tree left: the controller exits by
            // itself, having written the record. Its exit is not waited for: it tears
            // down the child's namespaces, and unmounting the child's view waits for an
            // RCU grace period (milliseconds, tens of them on a loaded machine).
            reap_later(self.controller);
            self.reaped = true;
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

/// Reaps `pid`, a child of ours that is exiting by itself, at once if it is done, else
/// on a thread of its own (which orchestrate's own exit does not wait for: the exiting
/// process is then reaped by whoever inherits it).
fn reap_later(pid: u32) {
    // SAFETY: reaping our own child, once.
    let done = unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG) };
    if done == 0 {
        let spawned = std::thread::Builder::new()
            .name("orch-reap".into())
            .spawn(move || {
                // SAFETY: as above; no one else waits for it.
                unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) };
            });
        if spawned.is_err() {
            // SAFETY: as above.
            unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) };
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
    let stdin_pipe = spec.stdin_pipe;
    on_lasting_thread(move || start_in_best_mode(plan_parts, &confinement, stdin_pipe))
}

struct PlanParts {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
}

/// Where the child may write as Landlock sees it: the confinement's paths, and with the
/// mount layer the view's writable places and the fresh temporary directories (without
/// it, those would be the host's own, shared with everyone).
fn landlock_paths(c: &Confinement, with_view: bool) -> Vec<PathBuf> {
    let mut paths = c.writable.clone().unwrap_or_default();
    if let (Some(view), true) = (&c.view, with_view) {
        // A private copy is writable where it is mounted over its file; without the
        // mounts the path is the user's own file.
        paths.extend(
            view.mounts
                .iter()
                .filter(|(_, k)| matches!(k, MountKind::Copy))
                .map(|(p, _)| p.clone()),
        );
    }
    if with_view {
        paths.extend(["/tmp", "/var/tmp", "/dev/shm", "/dev/pts"].map(PathBuf::from));
    }
    paths.extend(
        ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"]
            .map(PathBuf::from)
            .into_iter()
            .filter(|p| p.exists()),
    );
    paths
}

/// What the view cannot give without a mount namespace, as the warnings say it.
fn lost_without_mounts(c: &Confinement) -> Vec<&'static str> {
    let Some(view) = &c.view else {
        return Vec::new();
    };
    let mut lost = vec!["the read-only view of the filesystem: metadata (modes, times, xattrs) can change outside its writable places"];
    let has = |k: fn(&MountKind) -> bool| view.mounts.iter().any(|(_, m)| k(m));
    if has(|m| matches!(m, MountKind::Hidden)) {
        lost.push(
            "the covers over credentials (~/.ssh, ~/.aws, other CLIs' logins): they are readable",
        );
    }
    if has(|m| matches!(m, MountKind::Emptied)) {
        lost.push("the cover over orchestrate's other runs (their sessions, results and worktrees): they are readable");
    }
    if has(|m| matches!(m, MountKind::ReadOnly)) {
        lost.push("the read-only protected paths inside its writable places (.git, editor and agent settings)");
    }
    if has(|m| matches!(m, MountKind::Private)) {
        lost.push("the private layer over its CLI's settings: what it writes there stays");
    }
    if !view.copied_from.is_empty() {
        lost.push("the copies of git's configuration without its credentials: the credentials in it are readable");
    }
    lost.push("the empty /tmp and /run: runtime sockets there are reachable");
    lost
}

fn start_in_best_mode(
    parts: PlanParts,
    c: &Confinement,
    stdin_pipe: bool,
) -> io::Result<GroupChild> {
    // SAFETY: no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let sandboxed = c.writable.is_some() || c.view.is_some();
    let outer_holds = |l: &str| c.outer.iter().any(|o| o == l);
    let mut layers = Layers::default();
    // Anyone but root needs a user namespace to own the others. Root needs none; its
    // sandboxed child gives up every capability instead (cheaper than a user namespace,
    // whose id maps orchestrate would have to write for each run). An unsandboxed child
    // of root with a network of its own gets one all the same: root's capabilities over
    // the host would undo the network namespace (unmount the namespace's /proc, join a
    // host process's network namespace from the one under it), while inside its own it
    // keeps them for what it does (a CLI's own bubblewrap sandbox).
    let userns = !root || (c.no_network && !sandboxed);
    let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    if userns {
        flags |= libc::CLONE_NEWUSER;
    }
    if c.no_network {
        flags |= libc::CLONE_NEWNET;
    }
    let mounts = match &c.view {
        Some(view) => Some(MountPlan::new(
            view,
            Path::new(OsStr::from_bytes(parts.program.as_bytes())),
        )?),
        None => None,
    };
    let rules = |with_view: bool| -> io::Result<Option<RawRules>> {
        if !sandboxed {
            return Ok(None);
        }
        match RawRules::new(&landlock_paths(c, with_view)) {
            Ok(r) => Ok(Some(r)),
            Err(super::landlock::RulesetError::Unavailable(why)) => {
                if c.strict && !outer_holds(layer::LANDLOCK) {
                    return Err(io::Error::other(format!(
                        "the sandbox was asked for, but its Landlock layer cannot be had: {why}"
                    )));
                }
                Ok(None)
            }
            Err(e) => Err(io::Error::other(e)),
        }
    };
    let seccomp = if c.harden { Filter::new() } else { None };
    if c.harden && seccomp.is_none() {
        layers.missing.push((
            layer::SECCOMP,
            "orchestrate has no seccomp filter for this architecture".into(),
        ));
    }
    let forced = std::env::var(CONTAINMENT_VAR).unwrap_or_default();
    let degraded;
    let mut plan = Plan {
        mode: Mode::Namespace { clone_flags: flags },
        program: parts.program,
        argv: parts.argv,
        envp: parts.envp,
        cwd: parts.cwd,
        mounts,
        landlock: rules(c.view.is_some())?,
        seccomp,
        new_session: true,
        drop_capabilities: root && sandboxed,
        stdin_pipe,
        listen: if c.no_network {
            c.listen.iter().map(listeners::ListenSpec::new).collect()
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
    let held = |plan: &Plan, namespace: bool| {
        let mut held = Vec::new();
        if namespace {
            held.push(layer::PID_NAMESPACE);
            if plan.mounts.is_some() {
                held.push(layer::MOUNTS);
            }
            if c.no_network {
                held.push(layer::NETWORK_NAMESPACE);
            }
        }
        if let Some(r) = &plan.landlock {
            held.push(layer::LANDLOCK);
            if r.scopes() {
                held.push(layer::SCOPES);
            }
        }
        if plan.seccomp.is_some() {
            held.push(layer::SECCOMP);
        }
        held.push(layer::NO_TTY);
        held
    };
    // A nested orchestrate learns which layers enclose it (the inherited list is part of
    // the new one).
    if sandboxed {
        let prefix = format!("{}=", super::OUTER_VAR);
        plan.envp
            .retain(|e| !e.as_bytes().starts_with(prefix.as_bytes()));
    }
    let base_env = plan.envp.len();
    let mark = |plan: &mut Plan, held: &[&str]| -> io::Result<()> {
        plan.envp.truncate(base_env);
        if sandboxed {
            let mut all: Vec<&str> = c.outer.iter().map(String::as_str).collect();
            all.extend(held.iter().copied());
            all.sort_unstable();
            all.dedup();
            plan.envp.push(cstring(OsStr::new(&format!(
                "{}={}",
                super::OUTER_VAR,
                all.join(",")
            )))?);
        }
        Ok(())
    };
    if forced == "subreaper" {
        degraded = Some(format!("{CONTAINMENT_VAR}=subreaper"));
    } else if let Some(why) = unavailable(flags) {
        degraded = Some(why);
    } else {
        let maps = userns.then(IdMaps::for_current_user);
        let held_here = held(&plan, true);
        mark(&mut plan, &held_here)?;
        match controller::start(&plan, maps.as_ref()) {
            Ok(started) => {
                layers.held = held(&plan, true);
                note_missing(&mut layers, &plan, c);
                return Ok(child(started, plan.mode, None, layers, c.no_network));
            }
            Err(StartError::Clone(e)) => {
                let why = format!("clone of a new PID namespace failed: {e}");
                mark_unavailable(flags, why.clone());
                degraded = Some(why);
            }
            Err(e @ StartError::IdMap(_)) => {
                mark_unavailable(flags, e.to_string());
                degraded = Some(e.to_string());
            }
            Err(StartError::Stage { stage, at, source }) if stage.is_setup() => {
                let why = match at {
                    Some(at) => format!("{} failed at {at}: {source}", stage.describe()),
                    None => format!("{} failed: {source}", stage.describe()),
                };
                mark_unavailable(flags, why.clone());
                degraded = Some(why);
            }
            Err(e) => return Err(start_error(e)),
        }
    }
    let why = degraded.clone().unwrap_or_default();
    if forced == "pidns" {
        return Err(io::Error::other(format!(
            "{CONTAINMENT_VAR}=pidns, but PID namespaces are not available: {why}"
        )));
    }
    if c.no_network && !c.network_optional {
        return Err(io::Error::other(format!(
            "{} needs a network namespace, which is not available here: {why}",
            if c.listen.is_empty() {
                "network off"
            } else {
                "network provider"
            },
        )));
    }
    if c.view.is_some() {
        if c.strict && !outer_holds(layer::MOUNTS) {
            return Err(io::Error::other(format!(
                "the sandbox was asked for, but its mount layer (a mount namespace) cannot be had here: {why}"
            )));
        }
        if !outer_holds(layer::MOUNTS) {
            layers.missing.push((
                layer::MOUNTS,
                format!(
                    "no mount namespace ({why}); the child runs without {}",
                    lost_without_mounts(c).join("; ")
                ),
            ));
        }
    }
    plan.mode = Mode::Subreaper;
    plan.mounts = None;
    plan.listen.clear();
    plan.landlock = rules(false)?;
    let held_here = held(&plan, false);
    mark(&mut plan, &held_here)?;
    match controller::start(&plan, None) {
        Ok(started) => {
            layers.held = held(&plan, false);
            note_missing(&mut layers, &plan, c);
            Ok(child(started, plan.mode, degraded, layers, false))
        }
        Err(e) => Err(start_error(e)),
    }
}

/// The sandbox layers a confining plan could not include (other than the mount layer,
/// whose absence the caller notes with its reason).
fn note_missing(layers: &mut Layers, plan: &Plan, c: &Confinement) {
    let sandboxed = c.writable.is_some() || c.view.is_some();
    if !sandboxed {
        return;
    }
    let outer = |l: &str| c.outer.iter().any(|o| o == l);
    match &plan.landlock {
        None if !outer(layer::LANDLOCK) => layers.missing.push((
            layer::LANDLOCK,
            match super::landlock::abi() {
                Err(why) => why,
                Ok(_) => "Landlock is not in use".into(),
            },
        )),
        Some(r) if !r.scopes() && !c.no_network && !outer(layer::SCOPES) => layers.missing.push((
            layer::SCOPES,
            "Landlock's scopes need Linux 6.12: abstract unix sockets outside (an X server, a D-Bus bus) can be connected to and processes of the same user signalled".into(),
        )),
        _ => {}
    }
}

fn child(
    started: controller::Started,
    mode: Mode,
    degraded: Option<String>,
    layers: Layers,
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
        stdin: started.stdin,
        exit: None,
        reaped: false,
        degraded,
        layers,
    }
}

/// The run's error, keeping the errno's kind (a missing program is `NotFound`, which
/// the result reports as exit code 127).
fn start_error(e: StartError) -> io::Error {
    match e {
        StartError::Stage { stage, at, source } => io::Error::new(
            source.kind(),
            match at {
                Some(at) => format!("{} failed at {at}: {source}", stage.describe()),
                None => format!("{} failed: {source}", stage.describe()),
            },
        ),
        StartError::Clone(source) | StartError::IdMap(source) | StartError::Io(source) => source,
    }
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
