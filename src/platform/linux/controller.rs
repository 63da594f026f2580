//! The controller: a small process between orchestrate and the child that holds the
//! child's whole tree, so that no descendant outlives the run.
//!
//! orchestrate clones itself (no exec: the controller is a copy of orchestrate that only
//! makes system calls) and the controller starts the child (in its own memory until the
//! child's exec, as `posix_spawn` does):
//!
//! ```text
//! orchestrate ── controller ── child (the agent CLI) ── its descendants
//!    │  SIGTERM: forwarded to the tree          (PID 1 of a new PID namespace,
//!    │  SIGKILL (namespace) / SIGUSR1 (subreaper): the whole tree dies
//!    └─ reads a 12-byte record of the child's exit on a pipe
//! ```
//!
//! Two modes, the first that works on this machine:
//! - **PID namespace** (`CLONE_NEWPID` + `CLONE_NEWNS`, and `CLONE_NEWUSER` when
//!   orchestrate is not root): the controller is the
//!   namespace's init. When it dies, however it dies (orchestrate's SIGKILL, or the
//!   parent-death signal when orchestrate itself is SIGKILLed), the kernel kills every
//!   process in the namespace, including those that called `setsid` or were detached.
//!   It mounts a fresh `/proc` for the namespace (some CLIs look themselves up there).
//! - **Subreaper** (`PR_SET_CHILD_SUBREAPER`): where namespaces are denied. Orphaned
//!   descendants are reparented to the controller instead of to init, and it kills them,
//!   generation by generation, when asked to. This holds for a stop by orchestrate but
//!   not when orchestrate is SIGKILLed: the controller dies with it before it can act.
//!
//! The child leads a process group of its own inside the tree. orchestrate never
//! signals it directly: its SIGTERM goes to the controller, which forwards it (to every
//! process of the namespace, or to the child's group and the orphans it adopted), so a
//! graceful stop keeps its grace. A command that is itself PID 1 would ignore that SIGTERM
//! (the kernel drops signals that an init has no handler for), which is why the child is
//! never PID 1.
//!
//! Everything after the clone runs in a copy of a multi-threaded process, where another
//! thread may have held a lock (malloc's) at the moment of the copy. So the controller and
//! the child before its exec make system calls only: no allocation, no locks, no
//! formatting; every string and pointer array is built before the clone.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::super::landlock::RawRules;
use super::listeners::{self, ListenSpec};
use super::mounts::MountPlan;
use super::seccomp::Filter;

/// Where a failure before the child's exec happened, reported with its errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum Stage {
    /// orchestrate went away before the controller was told to go on.
    ParentGone = 1,
    MountPrivate = 2,
    MountProc = 3,
    MountTmp = 4,
    Loopback = 5,
    Subreaper = 6,
    Fork = 7,
    Stdio = 8,
    Chdir = 9,
    Landlock = 10,
    DropCapabilities = 11,
    Exec = 12,
    Mounts = 13,
    Session = 14,
    Seccomp = 15,
    Listen = 16,
}

impl Stage {
    fn from_u32(n: u32) -> Option<Stage> {
        use Stage::*;
        [
            ParentGone,
            MountPrivate,
            MountProc,
            MountTmp,
            Loopback,
            Subreaper,
            Fork,
            Stdio,
            Chdir,
            Landlock,
            DropCapabilities,
            Exec,
            Mounts,
            Session,
            Seccomp,
            Listen,
        ]
        .into_iter()
        .find(|s| *s as u32 == n)
    }

    /// A failure of the controller's own set-up: this mode does not work here, try the
    /// next. Later stages concern the child itself and are the run's error.
    pub(super) fn is_setup(self) -> bool {
        matches!(
            self,
            Stage::MountPrivate
                | Stage::MountProc
                | Stage::MountTmp
                | Stage::Mounts
                | Stage::Loopback
                | Stage::Subreaper
        )
    }

    pub(super) fn describe(self) -> &'static str {
        match self {
            Stage::ParentGone => "orchestrate went away during the spawn",
            Stage::MountPrivate => "making the mount namespace private",
            Stage::MountProc => "mounting /proc for the PID namespace",
            Stage::MountTmp => "mounting the private temporary directory",
            Stage::Loopback => "bringing up the loopback interface",
            Stage::Subreaper => "becoming a child subreaper",
            Stage::Fork => "forking the child",
            Stage::Stdio => "setting up the child's stdin, stdout and stderr",
            Stage::Chdir => "changing to the working directory",
            Stage::Landlock => "enforcing the Landlock sandbox",
            Stage::DropCapabilities => "dropping root's capabilities",
            Stage::Exec => "executing the program",
            Stage::Mounts => "building the child's view of the filesystem",
            Stage::Session => "starting a session without a terminal",
            Stage::Seccomp => "installing the seccomp filter",
            Stage::Listen => "listening for the network proxy inside the child's network namespace",
        }
    }
}

/// How the controller holds the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// PID 1 of new namespaces; `clone_flags` says which (always PID and mount).
    Namespace {
        clone_flags: libc::c_int,
    },
    Subreaper,
}

/// Everything the controller and the child need, built before the clone.
pub(super) struct Plan {
    pub mode: Mode,
    pub program: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    pub cwd: CString,
    /// The child's view of the filesystem (namespace mode only).
    pub mounts: Option<MountPlan>,
    /// The child's Landlock ruleset, built by the controller after the mounts.
    pub landlock: Option<RawRules>,
    /// Installed by the child just before its exec.
    pub seccomp: Option<Filter>,
    /// The child starts a session of its own (no controlling terminal) rather than only
    /// a process group.
    pub new_session: bool,
    /// Drop every capability before exec (a sandboxed child of root).
    pub drop_capabilities: bool,
    /// The child's stdin is a pipe from orchestrate rather than /dev/null.
    pub stdin_pipe: bool,
    /// TCP listeners to make inside the new network namespace and hand to orchestrate
    /// (see `listeners.rs`).
    pub listen: Vec<ListenSpec>,
}

/// The orchestrate side of a started controller.
#[derive(Debug)]
pub(super) struct Started {
    pub pid: u32,
    /// Kept open for the controller's life: it checks that orchestrate is alive by this
    /// pipe not being closed.
    pub alive: OwnedFd,
    /// Non-blocking; the child's exit record arrives here.
    pub status: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The writing end of the child's stdin, when the plan asked for a pipe.
    pub stdin: Option<OwnedFd>,
    /// The listeners made inside the child's network namespace, one per `Plan::listen`
    /// entry (None: an optional one that could not be made).
    pub listeners: Vec<Option<OwnedFd>>,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum StartError {
    /// The clone itself was refused (namespaces not allowed).
    #[error("clone failed: {0}")]
    Clone(#[source] io::Error),
    #[error("writing the user namespace's id maps failed: {0}")]
    IdMap(#[source] io::Error),
    #[error("{} failed: {source}", .stage.describe())]
    Stage {
        stage: Stage,
        /// What the stage was at (a path of the view, a Landlock rule's path), if known.
        at: Option<String>,
        #[source]
        source: io::Error,
    },
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// The child's exit as the controller saw it, and whether other processes of the tree
/// were alive at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ExitRecord {
    /// `waitpid` status.
    pub status: libc::c_int,
    pub leftovers: bool,
}

const RECORD_BYTES: usize = 8;

impl ExitRecord {
    fn encode(self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[..4].copy_from_slice(&self.status.to_ne_bytes());
        b[4..].copy_from_slice(&u32::from(self.leftovers).to_ne_bytes());
        b
    }

    fn decode(b: &[u8; RECORD_BYTES]) -> ExitRecord {
        ExitRecord {
            status: libc::c_int::from_ne_bytes(b[..4].try_into().expect("4 bytes")),
            leftovers: u32::from_ne_bytes(b[4..].try_into().expect("4 bytes")) != 0,
        }
    }
}

/// Reads the exit record if it has arrived. `Ok(None)`: not yet (or the controller
/// ended without one).
pub(super) fn read_record(status: &OwnedFd) -> io::Result<Option<ExitRecord>> {
    let mut b = [0u8; RECORD_BYTES];
    // SAFETY: reading into a buffer of the given size.
    let n = unsafe { libc::read(status.as_raw_fd(), b.as_mut_ptr().cast(), RECORD_BYTES) };
    match n {
        n if n == RECORD_BYTES as isize => Ok(Some(ExitRecord::decode(&b))),
        // EOF, or a torn record (never written so by the controller).
        n if n >= 0 => Ok(None),
        _ => {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            }
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: new descriptors, now ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The capacity asked for the child's stdout pipe: with the default 64 KiB a child that
/// streams fast waits each time the pipe is full and orchestrate wakes for every 64 KiB.
/// Four times that, not the system's 1 MiB maximum: an unprivileged user's pipes share a
/// quota of pages (`/proc/sys/fs/pipe-user-pages-soft`, 64 MiB by default), past which
/// every new pipe of that user gets the smallest capacity: a fleet must not use it up.
const STDOUT_PIPE_BYTES: libc::c_int = 256 * 1024;

/// Grows the pipe of `fd` to [`STDOUT_PIPE_BYTES`] where the system allows it (a user
/// past its quota keeps the capacity it has: only speed depends on it).
fn widen(fd: &OwnedFd) {
    // SAFETY: F_SETPIPE_SZ on a pipe we own; a refusal changes nothing.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, STDOUT_PIPE_BYTES) };
}

/// The descriptors the controller and the child use, as raw numbers (copied by the clone).
#[derive(Clone, Copy)]
struct ChildFds {
    alive: RawFd,
    /// orchestrate's end of `alive`, which the copy closes at once: while it held one, a
    /// hang-up could not tell it that orchestrate had died.
    alive_writer: RawFd,
    report: RawFd,
    status: RawFd,
    /// The reading end of the child's stdin pipe, or -1 for /dev/null.
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    /// The controller's end of the listeners' channel; -1 when there are none.
    listen: RawFd,
}

/// A null-terminated array of pointers into `strings`.
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Starts the controller, which starts the child. Returns once the child has exec'd (or
/// why it could not). Must run on the spawner thread: the parent-death signal fires
/// when the thread that cloned exits.
pub(super) fn start(plan: &Plan, id_maps: Option<&IdMaps>) -> Result<Started, StartError> {
    let (alive_r, alive_w) = pipe()?;
    let (report_r, report_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    let (stdout_r, stdout_w) = pipe()?;
    widen(&stdout_w);
    let (stderr_r, stderr_w) = pipe()?;
    let stdin = if plan.stdin_pipe { Some(pipe()?) } else { None };
    let channel = match plan.listen.is_empty() {
        true => None,
        false => Some(listeners::channel()?),
    };
    let argv = pointers(&plan.argv);
    let envp = pointers(&plan.envp);
    let args = own_arguments();
    // Where the controller keeps the descriptors of the mounts it copies (its own copy of
    // this memory after the clone).
    let mut mount_fds: Vec<libc::c_int> =
        vec![-1; plan.mounts.as_ref().map_or(0, MountPlan::clone_count)];
    let mount_fds = mount_fds.as_mut_ptr();
    let fds = ChildFds {
        alive: alive_r.as_raw_fd(),
        alive_writer: alive_w.as_raw_fd(),
        report: report_w.as_raw_fd(),
        status: status_w.as_raw_fd(),
        stdin: stdin.as_ref().map_or(-1, |(r, _)| r.as_raw_fd()),
        stdout: stdout_w.as_raw_fd(),
        stderr: stderr_w.as_raw_fd(),
        listen: channel
            .as_ref()
            .map_or(-1, |(_, theirs)| theirs.as_raw_fd()),
    };
    let flags = match plan.mode {
        Mode::Namespace { clone_flags } => clone_flags,
        Mode::Subreaper => 0,
    };

    // No signal may run one of orchestrate's handlers in the copy before it has taken
    // over its signals; the copy starts with this mask and keeps everything blocked.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid sigset_t pointers.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
    }
    // SAFETY: a fork-like clone (no shared memory, a copy of this stack); the child
    // branch never returns and only makes system calls.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid == 0 {
        // SAFETY: in the copy; see the module's notes.
        unsafe { controller_main(plan, &argv, &envp, fds, mount_fds, args) }
    }
    let clone_error = io::Error::last_os_error();
    // SAFETY: restores this thread's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    // The copies the controller and the child hold are theirs; ours go.
    let stdin = stdin.map(|(r, w)| {
        drop(r);
        w
    });
    drop((alive_r, report_w, status_w, stdout_w, stderr_w));
    let channel = channel.map(|(ours, _theirs)| ours);
    if pid < 0 {
        return Err(StartError::Clone(clone_error));
    }
    let pid = pid as libc::pid_t;
    let abandon = |e: StartError| {
        // SAFETY: our own unreaped child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        e
    };
    if let Some(maps) = id_maps {
        if let Err(e) = maps.write(pid) {
            return Err(abandon(StartError::IdMap(e)));
        }
    }
    // Go on.
    // SAFETY: writing one byte from a valid buffer.
    if unsafe { libc::write(alive_w.as_raw_fd(), b"g".as_ptr().cast(), 1) } != 1 {
        return Err(abandon(StartError::Io(io::Error::last_os_error())));
    }
    // EOF once the child has exec'd (the report pipe closes on exec) and the controller
    // has closed its copy; or a failure report first.
    let mut report = [0u8; REPORT_BYTES];
    let n = read_full(&report_r, &mut report)?;
    if n == report.len() {
        let stage = u32::from_ne_bytes(report[..4].try_into().expect("4 bytes"));
        let errno = i32::from_ne_bytes(report[4..8].try_into().expect("4 bytes"));
        let index = u32::from_ne_bytes(report[8..].try_into().expect("4 bytes"));
        let stage = Stage::from_u32(stage).unwrap_or(Stage::Exec);
        let at = match stage {
            Stage::Mounts => plan.mounts.as_ref().map(|m| m.describe(index)),
            Stage::Landlock => plan.landlock.as_ref().map(|l| l.describe(index)),
            _ => None,
        };
        // The controller exits on its own after a failure (set-up: at once; the
        // child's: once it has reaped it).
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        return Err(StartError::Stage {
            stage,
            at,
            source: io::Error::from_raw_os_error(errno),
        });
    }
    set_nonblocking(&status_r)?;
    // Sent before the child was forked: here by now.
    let listeners = match &channel {
        Some(ours) => listeners::receive(ours, plan.listen.len()).map_err(|e| abandon(e.into()))?,
        None => Vec::new(),
    };
    Ok(Started {
        pid: pid as u32,
        alive: alive_w,
        status: status_r,
        stdout: stdout_r,
        stderr: stderr_r,
        stdin,
        listeners,
    })
}

fn read_full(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reading into the rest of a valid buffer.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                buf.len() - got,
            )
        };
        match n {
            0 => break,
            n if n > 0 => got += n as usize,
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(got)
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on an open descriptor.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The user namespace's id maps, written by orchestrate (which owns the namespace) before
/// the controller goes on.
#[derive(Debug, Clone)]
pub(super) struct IdMaps {
    /// `deny` for an unprivileged owner (required before it may write `gid_map`).
    pub setgroups_deny: bool,
    pub uid_map: String,
    pub gid_map: String,
}

impl IdMaps {
    /// Root keeps every id (so files keep their owners and root its access to them) but
    /// holds its capabilities only inside the namespace; anyone else maps their own ids.
    /// (orchestrate uses a user namespace when it is not root, and for an unsandboxed
    /// child of root with a network of its own.)
    pub(super) fn for_current_user() -> IdMaps {
        // SAFETY: no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if uid == 0 {
            IdMaps {
                setgroups_deny: false,
                uid_map: "0 0 4294967295\n".into(),
                gid_map: "0 0 4294967295\n".into(),
            }
        } else {
            IdMaps {
                setgroups_deny: true,
                uid_map: format!("{uid} {uid} 1\n"),
                gid_map: format!("{gid} {gid} 1\n"),
            }
        }
    }

    fn write(&self, pid: libc::pid_t) -> io::Result<()> {
        let dir = format!("/proc/{pid}");
        if self.setgroups_deny {
            std::fs::write(format!("{dir}/setgroups"), "deny")?;
        }
        std::fs::write(format!("{dir}/uid_map"), &self.uid_map)?;
        std::fs::write(format!("{dir}/gid_map"), &self.gid_map)
    }
}

// ---------------------------------------------------------------------------------------
// After the clone: system calls only.

pub(super) fn errno() -> libc::c_int {
    // SAFETY: reading the thread's errno.
    unsafe { *libc::__errno_location() }
}

/// A failure report: stage, errno, and an index into the stage's paths.
const REPORT_BYTES: usize = 12;

/// Reports a failure to orchestrate and exits.
unsafe fn fail(report: RawFd, stage: Stage, err: libc::c_int) -> ! {
    // SAFETY: see `fail_at`.
    unsafe { fail_at(report, stage, err, 0) }
}

/// Reports a failure at `index` of the stage's paths to orchestrate and exits.
unsafe fn fail_at(report: RawFd, stage: Stage, err: libc::c_int, index: u32) -> ! {
    let mut b = [0u8; REPORT_BYTES];
    b[..4].copy_from_slice(&(stage as u32).to_ne_bytes());
    b[4..8].copy_from_slice(&err.to_ne_bytes());
    b[8..].copy_from_slice(&index.to_ne_bytes());
    // SAFETY: writing a valid buffer, then exiting without running any handler.
    unsafe {
        libc::write(report, b.as_ptr().cast(), b.len());
        libc::_exit(127)
    }
}

/// The child's stack until its exec (it shares the controller's memory until then). What
/// runs on it is `child_main`: system calls and a few small frames.
const CHILD_STACK_BYTES: usize = 256 * 1024;

/// What `child_entry` passes on to `child_main`.
struct ChildStart<'a> {
    plan: &'a Plan,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    fds: ChildFds,
    parent: libc::pid_t,
    ruleset: Option<RawFd>,
}

extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildStart` on the controller's stack, which the controller,
    // suspended until this exec's or exits, keeps.
    unsafe {
        let start = &*(arg as *const ChildStart<'_>);
        child_main(
            start.plan,
            start.argv,
            start.envp,
            start.fds,
            start.parent,
            start.ruleset,
        )
    }
}

/// Starts the child in the controller's memory (`CLONE_VM | CLONE_VFORK`, as
/// `posix_spawn` does), on a stack of its own; returns once it has exec'd or exited.
/// A fork would copy the page tables of the controller (a copy of orchestrate, several
/// megabytes) only for the exec to throw them away. Nothing in `child_main` allocates or
/// writes the controller's memory but its own stack and the thread's `errno`, which the
/// controller does not read across this call. The signal handlers, descriptors and
/// credentials are the child's own (no `CLONE_SIGHAND`, `CLONE_FILES` nor `CLONE_THREAD`).
/// Returns -1 (errno set) when it cannot start.
unsafe fn start_child(start: &ChildStart<'_>) -> libc::pid_t {
    // SAFETY: system calls on a mapping of our own; `start` outlives the call.
    unsafe {
        let page = page_size();
        let bytes = CHILD_STACK_BYTES + page;
        let stack = libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        );
        if stack == libc::MAP_FAILED {
            return -1;
        }
        // A guard page below: an overflow faults rather than write the heap.
        libc::mprotect(stack, page, libc::PROT_NONE);
        let top = (stack as usize + bytes) & !15;
        let pid = libc::clone(
            child_entry,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            start as *const ChildStart<'_> as *mut libc::c_void,
        );
        let saved = errno();
        libc::munmap(stack, bytes);
        *libc::__errno_location() = saved;
        pid
    }
}

/// Closes every descriptor from `first` on (or marks it close-on-exec).
unsafe fn close_from(first: libc::c_uint, cloexec: bool) {
    let flags = if cloexec {
        libc::CLOSE_RANGE_CLOEXEC
    } else {
        0
    };
    // SAFETY: plain system calls.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, flags) == 0 {
            return;
        }
        // Before Linux 5.11 (5.9 without the flag): one call per possible descriptor.
        let mut limit: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        let last = limit.rlim_cur.min(1 << 16) as libc::c_int;
        for fd in first as libc::c_int..last {
            if cloexec {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            } else {
                libc::close(fd);
            }
        }
    }
}

/// The signals the controller waits for; everything else stays blocked and pending.
const WAITED: [libc::c_int; 7] = [
    libc::SIGCHLD,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Where the kernel keeps this process's command line (`/proc/self/cmdline` reads it
/// from there): its own memory, at the top of its first stack.
#[derive(Debug, Clone, Copy)]
struct ArgumentArea {
    start: usize,
    end: usize,
}

impl ArgumentArea {
    /// Overwrites the arguments with zeros but for the first word, `orchestrate`.
    ///
    /// # Safety
    /// In a copy of this process (the memory is the command line's, writable, and read
    /// by nothing else of the copy).
    unsafe fn blank(self) {
        const NAME: &[u8] = b"orchestrate";
        let len = self.end - self.start;
        // SAFETY: the range is this process's argument area (see the caller's contract).
        unsafe {
            libc::memset(self.start as *mut libc::c_void, 0, len);
            if len > NAME.len() {
                std::ptr::copy_nonoverlapping(NAME.as_ptr(), self.start as *mut u8, NAME.len());
            }
        }
    }
}

/// This process's argument area, read once from `/proc/self/stat` (fields 48 and 49,
/// after the command name, which may hold spaces and parentheses).
fn own_arguments() -> Option<ArgumentArea> {
    static AREA: std::sync::OnceLock<Option<ArgumentArea>> = std::sync::OnceLock::new();
    *AREA.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let (_, after_name) = stat.rsplit_once(')')?;
        let mut fields = after_name.split_ascii_whitespace().skip(45);
        let start = fields.next()?.parse().ok()?;
        let end = fields.next()?.parse().ok()?;
        (start < end).then_some(ArgumentArea { start, end })
    })
}

unsafe fn controller_main(
    plan: &Plan,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    fds: ChildFds,
    mount_fds: *mut libc::c_int,
    args: Option<ArgumentArea>,
) -> ! {
    // SAFETY: system calls only, on descriptors and memory this copy owns.
    unsafe {
        let in_namespace = matches!(plan.mode, Mode::Namespace { .. });
        // Told apart from orchestrate in `ps`/`top`.
        libc::prctl(libc::PR_SET_NAME, c"orch-controller".as_ptr());
        // The child reads its PID 1's command line (`/proc/1/cmdline` is readable by
        // anyone, unlike its environment): orchestrate's, every task of a fan-out
        // included. This copy's own memory holds it, so it is blanked here only.
        if let Some(area) = args {
            area.blank();
        }
        // Children are reaped here, never discarded: SIGCHLD must not be ignored.
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        // orchestrate says go once the id maps are written. If it died before the
        // parent-death signal was armed (a new process may wait for a core while
        // orchestrate goes on), its end of `alive` is closed: the read ends (or the poll
        // below sees the hang-up) and nothing may run orphaned. This copy's own copy of
        // that end goes first, or the hang-up never comes.
        libc::close(fds.alive_writer);
        let mut go = 0u8;
        if libc::read(fds.alive, (&mut go as *mut u8).cast(), 1) != 1 {
            fail(fds.report, Stage::ParentGone, 0);
        }
        let mut pfd = libc::pollfd {
            fd: fds.alive,
            events: 0,
            revents: 0,
        };
        if libc::poll(&mut pfd, 1, 0) > 0 && pfd.revents & libc::POLLHUP != 0 {
            fail(fds.report, Stage::ParentGone, 0);
        }
        // Not a process the child may read or write through /proc (it is not confined).
        // After the go: orchestrate has written its id maps, which this makes root's.
        libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong);
        // A group of its own: a terminal's ^C to orchestrate's group does not reach it.
        libc::setpgid(0, 0);
        if in_namespace {
            // Nothing mounted here may show in orchestrate's namespace.
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ) != 0
            {
                fail(fds.report, Stage::MountPrivate, errno());
            }
            match &plan.mounts {
                Some(view) => {
                    if let Err((index, e)) = view.apply(mount_fds) {
                        fail_at(fds.report, Stage::Mounts, e, index);
                    }
                }
                None => {
                    if libc::mount(
                        c"proc".as_ptr(),
                        c"/proc".as_ptr(),
                        c"proc".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        std::ptr::null(),
                    ) != 0
                    {
                        fail(fds.report, Stage::MountProc, errno());
                    }
                }
            }
            if let Mode::Namespace { clone_flags } = plan.mode {
                if clone_flags & libc::CLONE_NEWNET != 0 {
                    if let Err(e) = loopback_up() {
                        fail(fds.report, Stage::Loopback, e);
                    }
                    if fds.listen >= 0 {
                        if let Err(e) = listeners::make_and_send(&plan.listen, fds.listen) {
                            fail(fds.report, Stage::Listen, e);
                        }
                    }
                }
            }
        } else if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) != 0 {
            fail(fds.report, Stage::Subreaper, errno());
        }
        // The rules name what the child sees, so they are made after its mounts.
        let ruleset = match &plan.landlock {
            Some(rules) => match rules.build() {
                Ok(fd) => Some(fd),
                Err((index, e)) => fail_at(fds.report, Stage::Landlock, e, index),
            },
            None => None,
        };
        let me = libc::getpid();
        let start = ChildStart {
            plan,
            argv,
            envp,
            fds,
            parent: if in_namespace { 1 } else { me },
            ruleset,
        };
        let child = start_child(&start);
        if child < 0 {
            fail(fds.report, Stage::Fork, errno());
        }
        // Keep only the status pipe (and the memory file the login copies go to), away
        // from 0-2; those point at /dev/null so that the controller holds none of
        // orchestrate's descriptors (its stdout, the child's pipes).
        let status = libc::fcntl(fds.status, libc::F_DUPFD, 10);
        let logins = match plan.mounts.as_ref().and_then(MountPlan::login_fd) {
            Some(fd) if status >= 0 => libc::fcntl(fd, libc::F_DUPFD, status + 1),
            _ => -1,
        };
        if status >= 0 {
            libc::syscall(libc::SYS_close_range, 0, (status - 1) as libc::c_uint, 0);
            if logins > status + 1 {
                libc::syscall(
                    libc::SYS_close_range,
                    (status + 1) as libc::c_uint,
                    (logins - 1) as libc::c_uint,
                    0,
                );
            }
            close_from(status.max(logins) as libc::c_uint + 1, false);
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            if null == 0 {
                libc::dup2(0, 1);
                libc::dup2(0, 2);
            }
        }
        let logins = plan
            .mounts
            .as_ref()
            .filter(|_| logins >= 0)
            .map(|m| (m, logins));
        // What the login files' copy reads at the child's exit stays; the rest goes.
        let mut kept = [(0usize, 0usize); MAX_KEPT_RANGES];
        let count = match logins {
            None => Some(0),
            Some((mounts, _)) => mounts.login_ranges(&mut kept),
        };
        if let Some(n) = count {
            release_heap(&kept[..n]);
        }
        control(in_namespace, child, status, logins)
    }
}

/// The most address ranges the controller keeps of orchestrate's heap (the login files'
/// plan: one per file and two more); with more it keeps the whole heap.
const MAX_KEPT_RANGES: usize = 16;

/// Gives back this copy's pages of orchestrate's heap but those holding the address ranges
/// `keep` (start, end). Each heap page orchestrate writes after the clone is copied for
/// orchestrate and the old one stays the controller's, so a controller that lives as long
/// as its child comes to own most of orchestrate's heap as it was (0.46 MiB of a
/// controller's 0.6 MiB with 256 children alive). Past this point the controller reads
/// only its stack and `keep`; the pages dropped would read as zeros.
unsafe fn release_heap(keep: &[(usize, usize)]) {
    // SAFETY: system calls on this copy's own heap, of which nothing but `keep` is read
    // from here on.
    unsafe {
        let page = page_size();
        let start = start_brk();
        let end = libc::syscall(libc::SYS_brk, 0) as usize;
        if start == 0 || end <= start || start % page != 0 {
            return;
        }
        let mut run = start;
        let mut at = start;
        while at < end {
            let next = at.saturating_add(page);
            if keep.iter().any(|&(a, b)| a < next && b > at) {
                if at > run {
                    libc::madvise(run as *mut libc::c_void, at - run, libc::MADV_DONTNEED);
                }
                run = next;
            }
            at = next;
        }
        if end > run {
            libc::madvise(run as *mut libc::c_void, end - run, libc::MADV_DONTNEED);
        }
    }
}

fn page_size() -> usize {
    // SAFETY: a plain query.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(1) as usize
}

/// Where this process's heap starts (`start_brk`, the 47th field of `/proc/self/stat`),
/// or 0 when it cannot be read.
unsafe fn start_brk() -> usize {
    // SAFETY: system calls into our own buffer.
    unsafe {
        let fd = libc::open(
            c"/proc/self/stat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return 0;
        }
        let mut buf = [0u8; 1024];
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        if n <= 0 {
            return 0;
        }
        parse_start_brk(&buf[..n as usize])
    }
}

/// `start_brk` from the text of `/proc/<pid>/stat`, or 0. The command name, in
/// parentheses, may itself hold spaces and parentheses: the fields start after the last
/// `)`, the 3rd (the state) first. No allocation: it runs in the controller.
fn parse_start_brk(stat: &[u8]) -> usize {
    const START_BRK_AFTER_NAME: usize = 47 - 3;
    let Some(close) = stat.iter().rposition(|&b| b == b')') else {
        return 0;
    };
    let Some(field) = stat[close + 1..]
        .split(|&b| b == b' ' || b == b'\n')
        .filter(|f| !f.is_empty())
        .nth(START_BRK_AFTER_NAME)
    else {
        return 0;
    };
    let mut value = 0usize;
    for &b in field {
        if !b.is_ascii_digit() {
            return 0;
        }
        value = match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(usize::from(b - b'0')))
        {
            Some(v) => v,
            None => return 0,
        };
    }
    value
}

/// Waits for signals: reaps, forwards, reports the child's exit (having copied out its
/// CLI's login files, when `logins` says where), and ends the tree when asked (subreaper
/// mode; in a namespace orchestrate's SIGKILL does that).
unsafe fn control(
    in_namespace: bool,
    child: libc::pid_t,
    status: RawFd,
    logins: Option<(&MountPlan, RawFd)>,
) -> ! {
    // SAFETY: system calls only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in WAITED {
            libc::sigaddset(&mut set, s);
        }
        let mut child_alive = true;
        let mut reported = false;
        loop {
            let sig = libc::sigwaitinfo(&set, std::ptr::null_mut());
            match sig {
                libc::SIGCHLD => {}
                libc::SIGUSR1 if !in_namespace => {
                    kill_tree(child, child_alive);
                    // Everything is reaped; the child's status is no longer known here
                    // (orchestrate reports it as killed).
                    libc::_exit(0);
                }
                s if s > 0 => forward(in_namespace, child, child_alive, s),
                _ => continue,
            }
            // Reap whatever ended: the child, and orphans handed to us. All of them before
            // the child's exit is judged: a child that exits without reaping its own
            // children (node does) hands their zombies to us at its exit, and a zombie
            // still answers the null signal `others_alive` sends.
            let mut child_status = None;
            loop {
                let mut st = 0;
                let p = libc::waitpid(-1, &mut st, libc::WNOHANG);
                if p <= 0 {
                    break;
                }
                if p == child {
                    child_alive = false;
                    child_status = Some(st);
                }
            }
            if let Some(st) = child_status {
                // Before the record: orchestrate reads the copies once it has it.
                if let Some((mounts, into)) = logins {
                    mounts.copy_logins(into);
                }
                let record = ExitRecord {
                    status: st,
                    leftovers: others_alive(in_namespace),
                }
                .encode();
                libc::write(status, record.as_ptr().cast(), record.len());
                reported = true;
            }
            if reported && !others_alive(in_namespace) {
                libc::_exit(0);
            }
        }
    }
}

/// Whether any process of the tree other than the controller is alive (zombies already
/// reaped by the caller).
unsafe fn others_alive(in_namespace: bool) -> bool {
    // SAFETY: a null signal to every process of the namespace (never the controller
    // itself); or reading our own children.
    unsafe {
        if in_namespace {
            libc::kill(-1, 0) == 0
        } else {
            let mut buf = [0u8; 64];
            children(&mut buf, &mut |_| {}) > 0
        }
    }
}

/// Sends `sig` to the tree: in a namespace to every process in it; otherwise to the
/// child's group while the child lives, and to every orphan handed to the controller.
unsafe fn forward(in_namespace: bool, child: libc::pid_t, child_alive: bool, sig: libc::c_int) {
    // SAFETY: signals to processes of our own tree (unreaped children: their pids cannot
    // have been reused).
    unsafe {
        if in_namespace {
            libc::kill(-1, sig);
            return;
        }
        if child_alive {
            libc::kill(-child, sig);
        }
        let mut buf = [0u8; 4096];
        children(&mut buf, &mut |pid| {
            if pid != child {
                libc::kill(pid, sig);
            }
        });
    }
}

/// Subreaper mode: SIGKILL the child's group and every process handed to the controller,
/// generation by generation, reaping each, until it has no child left.
unsafe fn kill_tree(child: libc::pid_t, child_alive: bool) {
    /// A bound on the generations, so that a pathological tree cannot hold the
    /// controller for ever.
    const MAX_GENERATIONS: usize = 1000;
    // SAFETY: signals and waits on our own children.
    unsafe {
        if child_alive {
            libc::kill(-child, libc::SIGKILL);
        }
        let mut buf = [0u8; 4096];
        for _ in 0..MAX_GENERATIONS {
            let n = children(&mut buf, &mut |pid| {
                libc::kill(pid, libc::SIGKILL);
            });
            if n == 0 {
                break;
            }
            children(&mut buf, &mut |pid| {
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            });
        }
    }
}

/// Calls `each` with every child of this (single-threaded) process, from
/// `/proc/self/task/<pid>/children`, and returns how many there were.
unsafe fn children(buf: &mut [u8], each: &mut dyn FnMut(libc::pid_t)) -> usize {
    // SAFETY: system calls into our own buffers.
    unsafe {
        let mut path = [0u8; 64];
        let prefix = b"/proc/self/task/";
        path[..prefix.len()].copy_from_slice(prefix);
        let mut at = prefix.len();
        at += write_decimal(&mut path[at..], libc::getpid() as u64);
        let suffix = b"/children\0";
        path[at..at + suffix.len()].copy_from_slice(suffix);
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return 0;
        }
        let mut count = 0;
        let mut value: i64 = -1;
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            for &b in &buf[..n as usize] {
                if b.is_ascii_digit() {
                    value = value.max(0) * 10 + i64::from(b - b'0');
                } else if value >= 0 {
                    each(value as libc::pid_t);
                    count += 1;
                    value = -1;
                }
            }
        }
        if value >= 0 {
            each(value as libc::pid_t);
            count += 1;
        }
        libc::close(fd);
        count
    }
}

fn write_decimal(out: &mut [u8], mut n: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        out[i] = digits[len - 1 - i];
    }
    len
}

/// `struct ifreq` with the flags member of its union, padded to the kernel's size.
#[repr(C)]
struct IfreqFlags {
    name: [u8; 16],
    flags: libc::c_short,
    _pad: [u8; 22],
}

const SIOCGIFFLAGS: libc::c_ulong = 0x8913;
const SIOCSIFFLAGS: libc::c_ulong = 0x8914;

/// A new network namespace has only `lo`, and down.
unsafe fn loopback_up() -> Result<(), libc::c_int> {
    // SAFETY: a socket and two ioctls on a valid ifreq.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(errno());
        }
        let mut req = IfreqFlags {
            name: [0; 16],
            flags: 0,
            _pad: [0; 22],
        };
        req.name[..2].copy_from_slice(b"lo");
        let ok = libc::ioctl(s, SIOCGIFFLAGS as _, &mut req) == 0 && {
            req.flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(s, SIOCSIFFLAGS as _, &req) == 0
        };
        let e = errno();
        libc::close(s);
        if ok {
            Ok(())
        } else {
            Err(e)
        }
    }
}

unsafe fn child_main(
    plan: &Plan,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    fds: ChildFds,
    parent: libc::pid_t,
    ruleset: Option<RawFd>,
) -> ! {
    // SAFETY: system calls only, then exec.
    unsafe {
        // Default dispositions (orchestrate ignores SIGPIPE; handlers do not survive the
        // exec, ignored signals would), then nothing blocked.
        for sig in 1..libc::SIGRTMAX() {
            libc::signal(sig, libc::SIG_DFL);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // Outside a namespace the controller's death is orchestrate's; take the child too.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        if libc::getppid() != parent {
            libc::_exit(127);
        }
        if plan.new_session {
            // A session of its own: no controlling terminal, so /dev/tty names none of the
            // user's terminals (and it leads its own process group, as below).
            if libc::setsid() < 0 {
                fail(fds.report, Stage::Session, errno());
            }
        } else {
            libc::setpgid(0, 0);
        }
        // stdin /dev/null (or orchestrate's pipe), stdout and stderr the pipes. Copies above
        // 2 first, so that no dup2 can overwrite a descriptor still needed.
        let input = if fds.stdin >= 0 {
            fds.stdin
        } else {
            libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC)
        };
        let (null, out, err) = (
            libc::fcntl(input, libc::F_DUPFD_CLOEXEC, 10),
            libc::fcntl(fds.stdout, libc::F_DUPFD_CLOEXEC, 10),
            libc::fcntl(fds.stderr, libc::F_DUPFD_CLOEXEC, 10),
        );
        if null < 0
            || out < 0
            || err < 0
            || libc::dup2(null, 0) < 0
            || libc::dup2(out, 1) < 0
            || libc::dup2(err, 2) < 0
        {
            fail(fds.report, Stage::Stdio, errno());
        }
        if libc::chdir(plan.cwd.as_ptr()) != 0 {
            fail(fds.report, Stage::Chdir, errno());
        }
        if let Some(ruleset) = ruleset {
            if let Err(e) = super::super::landlock::restrict_self(ruleset) {
                fail(fds.report, Stage::Landlock, e);
            }
        }
        if plan.drop_capabilities {
            if let Err(e) = super::super::landlock::drop_all_capabilities() {
                fail(fds.report, Stage::DropCapabilities, e);
            }
        }
        if let Some(filter) = &plan.seccomp {
            // Set by restrict_self already; seccomp needs it without Landlock too.
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            if let Err(e) = filter.install() {
                fail(fds.report, Stage::Seccomp, e);
            }
        }
        // Nothing but 0-2 crosses the exec: not orchestrate's descriptors, not those
        // whoever started orchestrate leaked to it. (The report pipe closes on the exec
        // itself, which tells orchestrate it happened.)
        close_from(3, true);
        libc::execve(plan.program.as_ptr(), argv.as_ptr(), envp.as_ptr());
        fail(fds.report, Stage::Exec, errno());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_brk_is_read_after_the_last_parenthesis_of_the_name() {
        // A command name with spaces and parentheses, then fields 3 to 52.
        let fields: Vec<String> = (3..=52)
            .map(|i| match i {
                3 => "S".to_string(),
                47 => "94558713327616".to_string(),
                _ => i.to_string(),
            })
            .collect();
        let stat = format!("4242 (a) b (c)) {}\n", fields.join(" "));
        assert_eq!(parse_start_brk(stat.as_bytes()), 94558713327616);
        // Cut short, or no name at all: nothing to release.
        assert_eq!(parse_start_brk(b"4242 (x) S 1 2 3\n"), 0);
        assert_eq!(parse_start_brk(b"no name here"), 0);
    }

    #[test]
    fn start_brk_of_this_process_is_where_its_heap_mapping_starts() {
        // SAFETY: reads our own /proc/self/stat.
        let start = unsafe { start_brk() };
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let heap = maps
            .lines()
            .find(|l| l.ends_with("[heap]"))
            .expect("a [heap] mapping");
        let first = usize::from_str_radix(heap.split('-').next().unwrap(), 16).unwrap();
        assert_eq!(start, first, "{heap}");
        assert_eq!(start % page_size(), 0);
    }
}
