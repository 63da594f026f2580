//! The operating-system layer under the supervisor: starting a child so that its whole
//! tree of processes dies with the run (and with orchestrate), confining what it may
//! write, stopping it gracefully or at once, watching its exit without reaping it, and
//! telling a process from a later one that reused its pid.
//!
//! `spawn` takes a [`SpawnSpec`] and returns a `GroupChild` with the same methods on
//! every platform (`peek_exit`, `terminate`, `kill`, `kill_and_reap`, `leftovers`, …).
//! What holds the tree differs ([`Containment`]):
//! - `linux/` (the default on Linux): a controller process holds the child's tree, as the
//!   init of a new PID namespace where one can be had, else as a child subreaper. The
//!   sandbox is Landlock (`landlock.rs`).
//! - `portable.rs` (macOS, the BSDs; Linux with the `portable` feature, so that it is
//!   tested here too): a watchdog process leads the child's process group and kills it
//!   when orchestrate dies. No sandbox on macOS; Landlock on Linux.
//!
//! `unix.rs` holds what every Unix shares: the spawner thread, `killpg`, `waitid`.

#[cfg(not(unix))]
compile_error!(
    "orchestrate supports Unix only (Linux, macOS, the BSDs): it supervises its children \
     through process groups, POSIX signals and waitid"
);

#[cfg(all(target_os = "linux", not(feature = "portable")))]
#[path = "linux/mod.rs"]
mod imp;
#[cfg(all(unix, any(not(target_os = "linux"), feature = "portable")))]
#[path = "portable.rs"]
mod imp;
#[cfg(target_os = "linux")]
mod landlock;
mod path;
mod unix;

use std::ffi::OsString;
use std::path::PathBuf;

#[cfg(test)]
pub(crate) use imp::IMPLEMENTATION;
pub(crate) use imp::{
    network_namespaces, process_start_time, sandbox_mechanism, spawn, GroupChild,
};
pub(crate) use path::find_program;
pub(crate) use unix::{LeaderExit, StartTime};

/// Set for a confined child: the layers that held (a nested orchestrate counts them as
/// its own). It only ever lowers what a nested orchestrate demands of its own sandbox,
/// inside this one. The platform sets it as it starts the child; the sandbox reads it.
pub(crate) const OUTER_VAR: &str = "ORCHESTRATE_SANDBOX_OUTER";

/// What to start: stdin is /dev/null (or a pipe, see `stdin_pipe`), stdout and stderr are
/// pipes, and nothing else of orchestrate's descriptors (nor of those it inherited) reaches
/// the child.
#[derive(Debug, Clone)]
pub(crate) struct SpawnSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// Added to orchestrate's own environment (`PWD` follows `cwd`).
    pub env: Vec<(OsString, OsString)>,
    /// Removed from orchestrate's own environment.
    pub env_remove: Vec<OsString>,
    pub confinement: Confinement,
    /// The child's stdin is a pipe whose writing end `GroupChild::take_stdin` hands out
    /// (for a backend that talks to its child), rather than /dev/null.
    pub stdin_pipe: bool,
}

/// What the child may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Confinement {
    /// The child (and everything it starts) may write only beneath these directories and
    /// to these files (Landlock); `None`: wherever its permissions allow. With a [`View`],
    /// the paths of its writable mounts are added.
    pub writable: Option<Vec<PathBuf>>,
    /// The filesystem the child sees, where a mount namespace can be had.
    pub view: Option<View>,
    /// A network namespace of its own, with only its own loopback: nothing of the host's
    /// network is reachable but through `listen`.
    pub no_network: bool,
    /// With `no_network`: where the namespace cannot be had, run with the host's network
    /// instead of failing (`GroupChild::take_listeners` then says None).
    pub network_optional: bool,
    /// With `no_network`: TCP listeners made on the namespace's loopback before the child
    /// starts, handed to orchestrate (`GroupChild::take_listeners`), which serves them
    /// from outside the namespace.
    pub listen: Vec<Listen>,
    /// No controlling terminal, and the seccomp filter (terminal injection, ptrace,
    /// io_uring, mounts and new namespaces, unix and vsock sockets).
    pub harden: bool,
    /// The mode was asked for explicitly: a layer that cannot be had refuses the spawn
    /// instead of leaving it out, unless `outer` holds it.
    pub strict: bool,
    /// Layers an enclosing orchestrate sandbox already holds (this orchestrate runs inside
    /// one).
    pub outer: Vec<String>,
}

/// A listening address inside the child's network namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Listen {
    pub addr: std::net::SocketAddr,
    /// Where it cannot be made (the IPv6 loopback of a kernel without IPv6), the child
    /// runs without it.
    pub optional: bool,
}

/// The filesystem the child sees: the whole tree read-only (no set-user-ID, no devices),
/// fresh `/proc`, `/dev` (the few devices every program uses, a terminal multiplexer of
/// its own), `/tmp`, `/var/tmp`, `/dev/shm` and `/run`, then `mounts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct View {
    /// Applied shallowest path first; on one path, in the order of [`MountKind`].
    pub mounts: Vec<(PathBuf, MountKind)>,
    /// What the child reads as it is, read-only, even where it lies in a directory the
    /// view empties (`/tmp`, orchestrate's state): its working directory, its home, its
    /// run folder.
    pub visible: Vec<PathBuf>,
    /// Files in private layers (its CLI's login) whose private version the platform
    /// copies out at the child's exit.
    pub logins: Option<LoginCopies>,
    /// For some of the [`MountKind::Copy`] paths, the file whose bytes the copy holds in
    /// place of the path's own: a version the sandbox wrote without what the child must
    /// not read (git's configuration without its credentials).
    pub copied_from: Vec<(PathBuf, PathBuf)>,
}

/// Where the platform copies, at the child's exit, the private layer's version of each
/// of `files` (those that are there): into `into`, a memory file the sandbox policy
/// reads after the run, each copy as `index: u32 LE, length: u64 LE, bytes`.
#[derive(Debug, Clone)]
pub(crate) struct LoginCopies {
    pub files: Vec<PathBuf>,
    pub into: std::sync::Arc<std::os::fd::OwnedFd>,
}

impl LoginCopies {
    /// The largest file copied; a token file is a few KiB.
    pub(crate) const MAX_BYTES: u64 = 1 << 20;
    /// Each copy's header: the file's index (u32) and length (u64), little-endian.
    pub(crate) const HEADER_BYTES: usize = 12;
}

impl PartialEq for LoginCopies {
    fn eq(&self, other: &LoginCopies) -> bool {
        use std::os::fd::AsRawFd;
        self.files == other.files && self.into.as_raw_fd() == other.into.as_raw_fd()
    }
}

impl Eq for LoginCopies {}

/// What the child sees at a path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MountKind {
    /// The real directory, writable.
    Writable,
    /// The real directory to read; what the child writes there goes to a private layer,
    /// gone with the run.
    Private,
    /// An empty directory of its own, writable, gone with the run.
    Scratch,
    /// A private copy of the file, writable, over it: made for the run in the child's own
    /// memory (its `/run`), never on disk, gone with the run.
    Copy,
    /// The real path, read-only. A symbolic link is covered itself, by an empty file (it
    /// cannot be replaced; what it points to is covered on its own).
    ReadOnly,
    /// A directory seen empty and read-only but for the view's places under it, which
    /// are carried in as they are (read-only; their own mounts follow): orchestrate's
    /// state directory, of which a child sees its own run folder alone.
    Emptied,
    /// Empty: an empty directory, or an empty file for anything else; read-only.
    Hidden,
}

/// The sandbox's layers that held for a child, and why each missing one is missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Layers {
    pub held: Vec<&'static str>,
    pub missing: Vec<(&'static str, String)>,
}

/// The layers of a sandbox, as the result names them.
#[cfg_attr(feature = "portable", allow(dead_code))]
pub(crate) mod layer {
    /// The read-only view of the filesystem with its writable places and covers.
    pub(crate) const MOUNTS: &str = "mounts";
    /// Landlock's write rules.
    pub(crate) const LANDLOCK: &str = "landlock";
    /// Landlock's scopes: abstract unix sockets and signals do not reach outside.
    pub(crate) const SCOPES: &str = "scopes";
    /// The seccomp filter.
    pub(crate) const SECCOMP: &str = "seccomp";
    /// A session of its own, without a controlling terminal.
    pub(crate) const NO_TTY: &str = "no-tty";
    /// Only the child's own PIDs are visible, and every descendant dies with the run.
    pub(crate) const PID_NAMESPACE: &str = "pid-namespace";
    /// No network but a loopback of its own.
    pub(crate) const NETWORK_NAMESPACE: &str = "network-namespace";
    /// Every layer, for reading their names back (a report from a node).
    pub(crate) const ALL: &[&str] = &[
        MOUNTS,
        LANDLOCK,
        SCOPES,
        SECCOMP,
        NO_TTY,
        PID_NAMESPACE,
        NETWORK_NAMESPACE,
    ];
}

/// What holds the child's tree. (Each platform constructs its own variants.)
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Containment {
    /// The init of a PID namespace of its own: every descendant dies with the run, and
    /// with orchestrate however it dies.
    PidNamespace,
    /// A child subreaper adopts orphaned descendants and kills them with the run; they
    /// survive a SIGKILL of orchestrate itself.
    Subreaper,
    /// The portable watchdog kills the child's process group; a descendant that leaves
    /// the group survives.
    Watchdog,
}

/// Descendants that were alive when the child exited. (Each platform constructs its own
/// variants.)
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leftovers {
    None,
    /// In the child's process group (all the portable watchdog can see).
    InGroup,
    /// Anywhere in the child's tree (PID namespace or subreaper).
    InTree,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::time::{Duration, Instant};

    fn sh(script: &str) -> SpawnSpec {
        SpawnSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: "/".into(),
            env: Vec::new(),
            env_remove: Vec::new(),
            confinement: Confinement::default(),
            stdin_pipe: false,
        }
    }

    fn wait_for_exit(child: &mut GroupChild) -> LeaderExit {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(exit) = child.peek_exit().expect("peek") {
                return exit;
            }
            assert!(Instant::now() < deadline, "the child never exited");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn an_exit_is_seen_and_seen_again() {
        let mut child = spawn(sh("exit 3")).expect("spawn");
        assert_eq!(wait_for_exit(&mut child), LeaderExit::Exited(3));
        assert_eq!(child.peek_exit().unwrap(), Some(LeaderExit::Exited(3)));
        child.kill_and_reap().unwrap();
        assert_eq!(child.leftovers(), Leftovers::None);
    }

    #[test]
    fn a_graceful_stop_reaches_the_child_and_a_death_by_signal_is_seen() {
        let mut child = spawn(sh("exec sleep 30")).expect("spawn");
        assert_eq!(child.peek_exit().unwrap(), None);
        child.terminate().unwrap();
        assert_eq!(
            wait_for_exit(&mut child),
            LeaderExit::Signaled(libc::SIGTERM)
        );
        child.kill_and_reap().unwrap();
    }

    #[test]
    fn a_kill_ends_a_child_that_ignores_sigterm() {
        let mut child = spawn(sh("trap '' TERM; while :; do sleep 1; done")).expect("spawn");
        // Let the shell install its trap.
        std::thread::sleep(Duration::from_millis(300));
        child.terminate().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(child.peek_exit().unwrap(), None, "SIGTERM was ignored");
        child.kill().unwrap();
        assert_eq!(
            wait_for_exit(&mut child),
            LeaderExit::Signaled(libc::SIGKILL)
        );
        child.kill_and_reap().unwrap();
    }

    #[test]
    fn the_pipes_carry_stdout_and_stderr_and_stdin_is_empty() {
        use std::io::Read;
        let mut child = spawn(sh("cat; echo out; echo err >&2")).expect("spawn");
        let mut out = String::new();
        std::fs::File::from(child.take_stdout().unwrap())
            .read_to_string(&mut out)
            .unwrap();
        let mut err = String::new();
        std::fs::File::from(child.take_stderr().unwrap())
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!((out.as_str(), err.as_str()), ("out\n", "err\n"));
        assert_eq!(wait_for_exit(&mut child), LeaderExit::Exited(0));
        child.kill_and_reap().unwrap();
    }

    /// With a stdin pipe, what orchestrate writes is what the child reads, and closing
    /// orchestrate's end is the child's end of input.
    #[test]
    fn a_stdin_pipe_carries_what_is_written_and_closing_it_ends_the_input() {
        use std::io::{Read, Write};
        let mut spec = sh("while read -r line; do echo \"got $line\"; done; echo eof");
        spec.stdin_pipe = true;
        let mut child = spawn(spec).expect("spawn");
        let mut stdin = std::fs::File::from(child.take_stdin().expect("a stdin pipe"));
        assert!(child.take_stdin().is_none(), "handed out once");
        stdin.write_all(b"one\ntwo\n").unwrap();
        drop(stdin);
        let mut out = String::new();
        std::fs::File::from(child.take_stdout().unwrap())
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "got one\ngot two\neof\n");
        assert_eq!(wait_for_exit(&mut child), LeaderExit::Exited(0));
        child.kill_and_reap().unwrap();
    }

    #[test]
    fn without_a_stdin_pipe_there_is_none_to_take() {
        let mut child = spawn(sh("exit 0")).expect("spawn");
        assert!(child.take_stdin().is_none());
        assert_eq!(wait_for_exit(&mut child), LeaderExit::Exited(0));
        child.kill_and_reap().unwrap();
    }

    #[test]
    fn a_missing_program_is_not_found() {
        let mut spec = sh("");
        spec.program = "/nonexistent/program".into();
        let err = spawn(spec.clone()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
        spec.program = "no-such-program-orchestrate".into();
        let err = spawn(spec).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    }

    #[test]
    fn the_environment_is_orchestrates_plus_the_specs_and_pwd_follows_cwd() {
        use std::io::Read;
        let mut spec = sh("echo \"$ORCHESTRATE_PLATFORM_TEST|$PWD|$(pwd)\"");
        spec.env
            .push(("ORCHESTRATE_PLATFORM_TEST".into(), "set".into()));
        spec.cwd = "/usr".into();
        let mut child = spawn(spec).expect("spawn");
        let mut out = String::new();
        std::fs::File::from(child.take_stdout().unwrap())
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "set|/usr|/usr\n");
        child.kill_and_reap().unwrap();
    }

    /// A sandboxed child cannot write outside its rules, and a sandboxed child of root has
    /// no capability left to get around them; unsandboxed, root keeps its capabilities.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_sandboxed_child_writes_only_where_allowed_and_root_loses_its_capabilities() {
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        let (ok, no) = (dir.path().join("ok"), dir.path().join("no"));
        std::fs::create_dir_all(&ok).unwrap();
        let script = format!(
            "echo x > {ok}/f && echo wrote-ok; echo x > {no} 2>/dev/null || echo denied; grep -E '^Cap(Eff|Bnd)' /proc/self/status",
            ok = ok.display(),
            no = no.display()
        );
        let output = |confinement: Confinement| {
            let mut spec = sh(&script);
            spec.confinement = confinement;
            let mut child = spawn(spec).expect("spawn");
            let mut out = String::new();
            std::fs::File::from(child.take_stdout().unwrap())
                .read_to_string(&mut out)
                .unwrap();
            child.kill_and_reap().unwrap();
            out
        };
        let sandboxed = output(Confinement {
            writable: Some(vec![ok.clone()]),
            ..Confinement::default()
        });
        // SAFETY: no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(!no.exists());
        if root {
            // The bounding set is empty too: dropping stops at the first number the
            // kernel does not know, and none it knows is left.
            assert_eq!(
                sandboxed,
                "wrote-ok\ndenied\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
            );
            let free = output(Confinement::default());
            assert!(free.starts_with("wrote-ok\nCapEff:\t"), "{free}");
            assert!(!free.contains("CapEff:\t0000000000000000"), "{free}");
            assert!(!free.contains("CapBnd:\t0000000000000000"), "{free}");
        } else {
            assert!(
                sandboxed.starts_with("wrote-ok\ndenied\nCapEff:\t0000000000000000\n"),
                "{sandboxed}"
            );
        }
    }

    /// Listeners asked for in the child's network namespace are made there and handed
    /// back: what the child sends to them arrives here, outside; an optional one that
    /// cannot be made is None; without a network namespace there are none.
    #[cfg(all(target_os = "linux", not(feature = "portable")))]
    #[test]
    fn listeners_made_in_the_childs_network_namespace_are_served_from_outside() {
        use std::io::Read;
        let mut spec = sh("echo hello-from-inside > /dev/tcp/127.0.0.1/4000 && echo sent");
        spec.program = "/bin/bash".into();
        spec.confinement = Confinement {
            no_network: true,
            listen: vec![
                Listen {
                    addr: "127.0.0.1:4000".parse().unwrap(),
                    optional: false,
                },
                // Not an address of the namespace's loopback: it cannot be made.
                Listen {
                    addr: "192.0.2.77:4000".parse().unwrap(),
                    optional: true,
                },
            ],
            ..Confinement::default()
        };
        let mut child = spawn(spec).expect("spawn");
        let listeners = child.take_listeners().expect("a network namespace");
        assert_eq!(listeners.len(), 2);
        assert!(listeners[1].is_none(), "the optional one could not be made");
        let listener = listeners[0].as_ref().expect("the required one");
        listener.set_nonblocking(false).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = String::new();
        conn.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello-from-inside\n");
        let mut out = String::new();
        std::fs::File::from(child.take_stdout().unwrap())
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "sent\n");
        assert_eq!(wait_for_exit(&mut child), LeaderExit::Exited(0));
        child.kill_and_reap().unwrap();
        // A required listener that cannot be made fails the spawn, saying where.
        let mut spec = sh("true");
        spec.confinement = Confinement {
            no_network: true,
            listen: vec![Listen {
                addr: "192.0.2.77:4000".parse().unwrap(),
                optional: false,
            }],
            ..Confinement::default()
        };
        let err = spawn(spec).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "listening for the network proxy inside the child's network namespace failed"
            ),
            "{err}"
        );
    }

    /// Descendants alive when the child exits are counted, and killed with the run.
    #[test]
    fn a_descendant_alive_at_the_childs_exit_is_a_leftover_and_dies_with_the_run() {
        let mut child = spawn(sh("sleep 30 >/dev/null 2>&1 & exit 0")).expect("spawn");
        assert_eq!(wait_for_exit(&mut child), LeaderExit::Exited(0));
        child.kill_and_reap().unwrap();
        // The portable path counts them only while they take their SIGKILL (best effort).
        if IMPLEMENTATION == "linux" {
            assert_eq!(child.leftovers(), Leftovers::InTree);
        }
    }
}
