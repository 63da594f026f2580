//! Any Unix (macOS, the BSDs, and Linux with the `portable` feature): a watchdog process
//! kills the child's group when orchestrate dies, and start times come from `ps`.
//!
//! The watchdog is a tiny `/bin/sh` that leads the child's process group and reads a pipe
//! whose only writer is orchestrate. When orchestrate dies, however it dies, the kernel
//! closes that writer; the watchdog's read ends and it runs `kill -s KILL 0`, which kills
//! its own group: the child, every descendant that stayed in the group, and the watchdog
//! itself. Nothing names a pid, so pid reuse cannot misdirect the signal, and because the
//! watchdog leads the group and is orchestrate's child, the group id stays reserved for as
//! long as orchestrate has not reaped it.
//!
//! The child joins the watchdog's group from its own fork, before exec. Until its exec the
//! forked child also holds the pipe's writer, so even if orchestrate dies mid-spawn the
//! watchdog's read cannot end before the child is in the group it kills.
//!
//! A shell rather than a re-exec of orchestrate: `/bin/sh` exists on every Unix, and it
//! works the same from the `orchestrate` binary, the test binaries and any other program
//! linking this library. Unlike on Linux, where the child leads its group, the child here is
//! not a group leader and so could leave the group with `setsid`; its descendants can do
//! that on either path.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use nix::fcntl::{fcntl, FcntlArg, FdFlag};
use nix::sys::signal::Signal;

use super::unix::{
    group_exists, on_lasting_thread, peek_exit, signal_group, LeaderExit, StartTime,
};
use super::{layer, Containment, Layers, Leftovers, SpawnSpec};

#[cfg(test)]
pub(crate) const IMPLEMENTATION: &str = "portable";

const SHELL: &str = "/bin/sh";
/// Reads until orchestrate's end of the pipe closes, then kills the whole group. Nothing
/// is ever written to the pipe; the loop only makes a stray line harmless.
const WATCHDOG_SCRIPT: &str = "while read -r line; do :; done; kill -s KILL 0";
/// Signals the watchdog ignores, set before exec (a non-interactive shell cannot undo
/// that): the supervisor's SIGTERM to the group must not end it before the child, and
/// stop signals must not freeze it.
const WATCHDOG_IGNORED_SIGNALS: [libc::c_int; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
];

/// A child in the watchdog's process group.
#[derive(Debug)]
pub(crate) struct GroupChild {
    child: Child,
    watch: ParentDeathWatch,
    reaped: bool,
    others_in_group: bool,
    layers: Layers,
}

impl GroupChild {
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn take_stdout(&mut self) -> Option<OwnedFd> {
        self.child.stdout.take().map(OwnedFd::from)
    }

    /// The writing end of the child's stdin, when the spec asked for a pipe.
    pub(crate) fn take_stdin(&mut self) -> Option<OwnedFd> {
        self.child.stdin.take().map(OwnedFd::from)
    }

    pub(crate) fn take_stderr(&mut self) -> Option<OwnedFd> {
        self.child.stderr.take().map(OwnedFd::from)
    }

    /// The child's exit raises SIGCHLD; nothing else to watch.
    pub(crate) fn exit_notice(&self) -> Option<io::Result<OwnedFd>> {
        None
    }

    pub(crate) fn containment(&self) -> Containment {
        Containment::Watchdog
    }

    pub(crate) fn degraded(&self) -> Option<&str> {
        None
    }

    /// No network namespace here: never any listeners.
    pub(crate) fn take_listeners(&mut self) -> Option<Vec<Option<std::net::TcpListener>>> {
        None
    }

    /// The sandbox layers that held (Landlock at most), and those missing.
    pub(crate) fn layers(&self) -> &Layers {
        &self.layers
    }

    /// The child's exit, seen without reaping it: until it is reaped the group id stays
    /// reserved, so the group can still be signalled safely.
    pub(crate) fn peek_exit(&mut self) -> io::Result<Option<LeaderExit>> {
        if self.reaped {
            return Ok(self.child.try_wait()?.map(|st| {
                use std::os::unix::process::ExitStatusExt;
                match st.signal() {
                    Some(sig) => LeaderExit::Signaled(sig),
                    None => LeaderExit::Exited(st.code().unwrap_or(0)),
                }
            }));
        }
        peek_exit(self.child.id())
    }

    fn pgid(&self) -> u32 {
        self.watch.watchdog.id()
    }

    /// SIGTERM to the group: the child and what stayed in its group (the watchdog
    /// ignores it).
    pub(crate) fn terminate(&self) -> io::Result<()> {
        signal_group(self.pgid(), Signal::SIGTERM)
    }

    /// SIGKILL to the group, the watchdog included.
    pub(crate) fn kill(&self) -> io::Result<()> {
        signal_group(self.pgid(), Signal::SIGKILL)
    }

    /// SIGKILLs the whole group, then reaps the child and the watchdog. Until both are
    /// reaped the group id cannot be reused, so the signal cannot reach a stranger.
    pub(crate) fn kill_and_reap(&mut self) -> io::Result<()> {
        if self.reaped {
            return Ok(());
        }
        let _ = self.kill();
        let waited = self.child.wait();
        self.watch.reap();
        self.reaped = true;
        // A zombie child and the watchdog answer signals too, so survivors can only be
        // counted once both are reaped (best effort: one dying right then is missed); a
        // null signal cannot harm whoever answers.
        self.others_in_group = group_exists(self.pgid());
        waited.map(drop)
    }

    pub(crate) fn leftovers(&self) -> Leftovers {
        if self.others_in_group {
            Leftovers::InGroup
        } else {
            Leftovers::None
        }
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.kill();
            // Reaps at once what already died; the rest is reaped when orchestrate exits.
            let _ = self.child.try_wait();
            self.watch.reap_if_dead();
        }
    }
}

/// The sandbox is Landlock on Linux; macOS and the BSDs have none orchestrate can use.
pub(crate) fn sandbox_mechanism() -> Result<&'static str, String> {
    #[cfg(target_os = "linux")]
    return super::landlock::abi().map(|_| "landlock");
    #[cfg(not(target_os = "linux"))]
    return Err("no sandbox mechanism on this system".into());
}

const NO_NETWORK_NAMESPACES: &str =
    "a network of the child's own needs a network namespace, which the portable path does not use";

/// Whether the child can have a network of its own (`Confinement::no_network`): never here.
pub(crate) fn network_namespaces() -> Result<(), String> {
    Err(NO_NETWORK_NAMESPACES.to_string())
}

/// Starts `spec` in a new process group led by a watchdog that kills the group when
/// orchestrate dies.
pub(crate) fn spawn(spec: SpawnSpec) -> io::Result<GroupChild> {
    let c = &spec.confinement;
    let mut layers = Layers::default();
    if c.view.is_some() {
        let why = "the portable platform uses no mount namespace";
        if c.strict {
            return Err(io::Error::other(format!(
                "the sandbox was asked for, but its mount layer cannot be had: {why}"
            )));
        }
        layers.missing.push((layer::MOUNTS, why.to_string()));
    }
    if c.harden {
        layers.missing.push((
            layer::SECCOMP,
            "the portable platform installs no seccomp filter".into(),
        ));
    }
    if c.no_network && !c.network_optional {
        return Err(io::Error::other(format!(
            "{}: {NO_NETWORK_NAMESPACES}",
            if c.listen.is_empty() {
                "network off"
            } else {
                "network provider"
            }
        )));
    }
    #[cfg(target_os = "linux")]
    let ruleset = match &c.writable {
        None => None,
        Some(paths) => {
            layers.held.push(layer::LANDLOCK);
            let mut rules = super::landlock::Ruleset::new().map_err(io::Error::other)?;
            for p in paths {
                rules.allow_writes(p).map_err(io::Error::other)?;
            }
            Some(rules)
        }
    };
    #[cfg(not(target_os = "linux"))]
    if c.writable.is_some() {
        return Err(io::Error::other("no sandbox mechanism on this system"));
    }
    let mut cmd = Command::new(&spec.program);
    for k in &spec.env_remove {
        cmd.env_remove(k);
    }
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        // Shells keep PWD in step with the working directory, and some CLIs (opencode)
        // take their project folder from it rather than from getcwd().
        .env("PWD", &spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin_pipe {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(target_os = "linux")]
    let landlock_fd = ruleset.as_ref().map(|r| r.raw_fd());
    // SAFETY: no preconditions.
    #[cfg(target_os = "linux")]
    let drop_capabilities = landlock_fd.is_some() && unsafe { libc::geteuid() } == 0;
    // SAFETY: the closure makes system calls only (it runs between fork and exec).
    unsafe {
        cmd.pre_exec(move || {
            #[cfg(target_os = "linux")]
            if let Some(fd) = landlock_fd {
                super::landlock::restrict_self(fd).map_err(io::Error::from_raw_os_error)?;
            }
            #[cfg(target_os = "linux")]
            if drop_capabilities {
                super::landlock::drop_all_capabilities().map_err(io::Error::from_raw_os_error)?;
            }
            cloexec_from_3();
            Ok(())
        });
    }
    on_lasting_thread(move || {
        #[cfg(target_os = "linux")]
        let _ruleset = ruleset;
        let watch = ParentDeathWatch::arm(&mut cmd)?;
        match cmd.spawn() {
            Ok(child) => Ok(GroupChild {
                child,
                watch,
                reaped: false,
                others_in_group: false,
                layers,
            }),
            Err(e) => {
                watch.disarm();
                Err(e)
            }
        }
    })
}

/// Marks every descriptor from 3 on close-on-exec, so that nothing orchestrate inherited
/// reaches the child. Async-signal-safe.
fn cloexec_from_3() {
    // SAFETY: plain system calls.
    unsafe {
        #[cfg(target_os = "linux")]
        if libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return;
        }
        let mut limit: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        let last = (limit.rlim_cur as u64).min(1 << 16) as libc::c_int;
        for fd in 3..last {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

#[derive(Debug)]
pub(super) struct ParentDeathWatch {
    watchdog: Child,
    /// Orchestrate's end of the watchdog's pipe. Closing it (orchestrate exiting, or
    /// dropping this) tells the watchdog to kill the group.
    parent_alive: Option<OwnedFd>,
}

impl ParentDeathWatch {
    /// Starts the watchdog as the leader of a new group and makes `cmd` join that group.
    pub(super) fn arm(cmd: &mut Command) -> io::Result<ParentDeathWatch> {
        let (read_end, write_end) = nix::unistd::pipe()?;
        // Where pipes cannot be created close-on-exec atomically, a fork on another
        // thread could inherit the writer in between; every spawn of a supervised child
        // runs on the one spawner thread, so none of them can.
        for fd in [&read_end, &write_end] {
            fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        }
        let mut watchdog = Command::new(SHELL);
        watchdog
            .args(["-c", WATCHDOG_SCRIPT, "orchestrate-watchdog"])
            // Nothing of the run's environment (ORCHESTRATE_RUN_ID, secrets) and no hold
            // on the working directory.
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::from(read_end))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        // SAFETY: signal() is async-signal-safe; the closure runs between fork and exec.
        unsafe {
            watchdog.pre_exec(|| {
                for sig in WATCHDOG_IGNORED_SIGNALS {
                    if libc::signal(sig, libc::SIG_IGN) == libc::SIG_ERR {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let watchdog_child = watchdog.spawn()?;
        // Drops our copy of the reader with the command.
        drop(watchdog);
        cmd.process_group(watchdog_child.id() as i32);
        Ok(ParentDeathWatch {
            watchdog: watchdog_child,
            parent_alive: Some(write_end),
        })
    }

    /// The child could not be started: end and reap the watchdog.
    pub(super) fn disarm(mut self) {
        self.parent_alive = None;
        let _ = signal_group(self.watchdog.id(), Signal::SIGKILL);
        let _ = self.watchdog.wait();
    }

    /// Called once the group was SIGKILLed, the watchdog with it.
    pub(super) fn reap(&mut self) {
        // Closing our end first means that even a watchdog the SIGKILL somehow missed
        // ends on its own, so the wait cannot hang.
        self.parent_alive = None;
        let _ = self.watchdog.wait();
    }

    pub(super) fn reap_if_dead(&mut self) {
        self.parent_alive = None;
        let _ = self.watchdog.try_wait();
    }

    /// What orchestrate's death does to the watchdog: its pipe closes. Returns how the
    /// watchdog ended.
    #[cfg(test)]
    fn parent_died(&mut self) -> io::Result<std::process::ExitStatus> {
        self.parent_alive = None;
        self.watchdog.wait()
    }
}

/// A live (not zombie) process's start time as `ps` prints it (`lstart`, to the second,
/// in UTC and the C locale so that it reads the same whoever asks), or None.
///
/// `ps` works the same on Linux and macOS, so this path is tested on Linux too; a
/// platform call (`sysctl(KERN_PROC)` on macOS) would avoid the extra process.
pub(crate) fn process_start_time(pid: u32) -> Option<StartTime> {
    let ps = if Path::new("/bin/ps").exists() {
        "/bin/ps"
    } else {
        "ps"
    };
    let out = Command::new(ps)
        .args(["-o", "stat=", "-o", "lstart=", "-p"])
        .arg(pid.to_string())
        .env("LC_ALL", "C")
        .env("TZ", "UTC0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut words = text.lines().next()?.split_whitespace();
    let state = words.next()?;
    if state.starts_with('Z') {
        return None;
    }
    let started = words.collect::<Vec<_>>().join(" ");
    (!started.is_empty()).then_some(StartTime(started))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn sh(script: &str) -> SpawnSpec {
        SpawnSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: "/".into(),
            env: Vec::new(),
            env_remove: Vec::new(),
            confinement: super::super::Confinement::default(),
            stdin_pipe: false,
        }
    }

    /// What orchestrate's death does, without killing the test: the watchdog's pipe
    /// closes, and it kills the whole group and itself.
    #[test]
    fn when_the_watchdogs_pipe_closes_it_kills_the_group_and_itself() {
        use std::os::unix::process::ExitStatusExt;
        // A descendant that would outlive the child: the watchdog must get it too.
        let mut group = spawn(sh("sleep 30 & wait")).expect("spawn");
        let watchdog = group.watch.parent_died().expect("wait for the watchdog");
        assert_eq!(watchdog.signal(), Some(libc::SIGKILL), "{watchdog:?}");
        let pgid = group.pgid();
        group.kill_and_reap().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while group_exists(pgid) {
            assert!(
                Instant::now() < deadline,
                "the sleep outlived the group's kill"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A failed spawn ends the watchdog it had started: it was the only member of its
    /// group, so the group is gone.
    #[test]
    fn a_failed_spawn_ends_its_watchdog() {
        let mut cmd = Command::new("/nonexistent/program");
        let watch = ParentDeathWatch::arm(&mut cmd).expect("watchdog");
        let pgid = watch.watchdog.id();
        assert!(group_exists(pgid));
        watch.disarm();
        assert!(!group_exists(pgid));
    }

    #[test]
    fn the_child_is_in_the_watchdogs_group_not_ours() {
        let mut group = spawn(sh("exec sleep 30")).expect("spawn");
        // SAFETY: getpgid has no preconditions.
        let child_pgid = unsafe { libc::getpgid(group.id() as libc::pid_t) } as u32;
        let ours = unsafe { libc::getpgrp() } as u32;
        assert_eq!(child_pgid, group.pgid());
        assert_ne!(child_pgid, ours);
        assert_ne!(group.pgid(), group.id(), "the watchdog leads the group");
        group.kill_and_reap().unwrap();
        assert!(!group_exists(group.pgid()));
    }
}
