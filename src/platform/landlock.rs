//! Landlock (Linux 5.13+): the kernel's unprivileged access control, here restricting
//! where the child may write.
//!
//! The ruleset is built in orchestrate, where allocating and opening paths is fine, and
//! enforced in the child between fork and exec with two system calls (`prctl` and
//! `landlock_restrict_self`), which is all that is allowed there. That split is why the
//! system calls are made directly rather than through the `landlock` crate, whose
//! enforcement allocates.
//!
//! Only writes are handled: reading and executing stay unrestricted, so no rule is needed
//! for them, and ioctls on devices (terminals) are left alone. A process under the ruleset
//! can still write beneath the directories and to the files it names, and nowhere else;
//! the kernel also refuses it any mount, so it cannot undo the ruleset by remounting.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
#[cfg(any(test, feature = "portable"))]
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
#[cfg(any(test, feature = "portable"))]
use std::path::Path;
use std::sync::OnceLock;

const CREATE_RULESET_VERSION: u32 = 1 << 0;
const RULE_PATH_BENEATH: libc::c_int = 1;

const ACCESS_FS_WRITE_FILE: u64 = 1 << 1;
const ACCESS_FS_REMOVE_DIR: u64 = 1 << 4;
const ACCESS_FS_REMOVE_FILE: u64 = 1 << 5;
const ACCESS_FS_MAKE_CHAR: u64 = 1 << 6;
const ACCESS_FS_MAKE_DIR: u64 = 1 << 7;
const ACCESS_FS_MAKE_REG: u64 = 1 << 8;
const ACCESS_FS_MAKE_SOCK: u64 = 1 << 9;
const ACCESS_FS_MAKE_FIFO: u64 = 1 << 10;
const ACCESS_FS_MAKE_BLOCK: u64 = 1 << 11;
const ACCESS_FS_MAKE_SYM: u64 = 1 << 12;
/// ABI 2: linking or renaming a file into another directory.
const ACCESS_FS_REFER: u64 = 1 << 13;
/// ABI 3: truncating a file (`O_TRUNC`, `truncate`).
const ACCESS_FS_TRUNCATE: u64 = 1 << 14;

/// Every right that changes the filesystem, in ABI 1.
const WRITES_ABI1: u64 = ACCESS_FS_WRITE_FILE
    | ACCESS_FS_REMOVE_DIR
    | ACCESS_FS_REMOVE_FILE
    | ACCESS_FS_MAKE_CHAR
    | ACCESS_FS_MAKE_DIR
    | ACCESS_FS_MAKE_REG
    | ACCESS_FS_MAKE_SOCK
    | ACCESS_FS_MAKE_FIFO
    | ACCESS_FS_MAKE_BLOCK
    | ACCESS_FS_MAKE_SYM;
/// The rights a rule on a file (rather than a directory) may carry.
const FILE_WRITES: u64 = ACCESS_FS_WRITE_FILE | ACCESS_FS_TRUNCATE;

/// `struct landlock_ruleset_attr` up to `handled_access_fs`; the kernel reads the fields
/// it knows beyond the size given as zero, so this works with every ABI.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

#[cfg_attr(feature = "portable", allow(dead_code))]
/// `struct landlock_ruleset_attr` with the scopes of ABI 6.
#[repr(C)]
struct ScopedRulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[cfg_attr(feature = "portable", allow(dead_code))]
/// ABI 6: abstract unix sockets created outside the domain cannot be connected to, and
/// processes outside it cannot be signalled.
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
#[cfg_attr(feature = "portable", allow(dead_code))]
const SCOPE_SIGNAL: u64 = 1 << 1;

/// `struct landlock_path_beneath_attr` (packed in the kernel's UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI the kernel offers, or why there is none (not built in, not enabled at
/// boot, a kernel before 5.13). Asked once.
pub(crate) fn abi() -> Result<u32, String> {
    static ABI: OnceLock<Result<u32, String>> = OnceLock::new();
    ABI.get_or_init(|| {
        // SAFETY: with a null attribute and the version flag the call only returns a number.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<RulesetAttr>(),
                0usize,
                CREATE_RULESET_VERSION,
            )
        };
        if v >= 1 {
            Ok(v as u32)
        } else {
            let e = io::Error::last_os_error();
            Err(match e.raw_os_error() {
                Some(libc::ENOSYS) => "Landlock is not in this kernel (Linux 5.13 or later)".into(),
                Some(libc::EOPNOTSUPP) => {
                    "Landlock is built into this kernel but not enabled (lsm= boot option)".into()
                }
                _ => format!("Landlock is not usable: {e}"),
            })
        }
    })
    .clone()
}

/// The write rights the running kernel knows.
fn handled_writes(abi: u32) -> u64 {
    let mut rights = WRITES_ABI1;
    if abi >= 2 {
        rights |= ACCESS_FS_REFER;
    }
    if abi >= 3 {
        rights |= ACCESS_FS_TRUNCATE;
    }
    rights
}

/// A ruleset under construction: every write is denied except where a rule allows it.
/// (The portable platform's: the Linux controller builds a [`RawRules`] after its mounts.)
#[cfg(any(test, feature = "portable"))]
#[derive(Debug)]
pub(crate) struct Ruleset {
    fd: OwnedFd,
    handled: u64,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RulesetError {
    #[error("{0}")]
    Unavailable(String),
    #[cfg(any(test, feature = "portable"))]
    #[error("failed to create the Landlock ruleset: {0}")]
    Create(#[source] io::Error),
    #[error("cannot allow writes to {path}: {source}")]
    Rule {
        path: String,
        #[source]
        source: io::Error,
    },
}

#[cfg(any(test, feature = "portable"))]
impl Ruleset {
    pub(crate) fn new() -> Result<Ruleset, RulesetError> {
        let abi = abi().map_err(RulesetError::Unavailable)?;
        let handled = handled_writes(abi);
        let attr = RulesetAttr {
            handled_access_fs: handled,
        };
        // SAFETY: `attr` is a valid attribute of the size given.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                std::mem::size_of::<RulesetAttr>(),
                0u32,
            )
        };
        if fd < 0 {
            return Err(RulesetError::Create(io::Error::last_os_error()));
        }
        // SAFETY: the kernel returned a new descriptor (close-on-exec), now ours.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        Ok(Ruleset { fd, handled })
    }

    /// Allows every write beneath `path` (a directory) or to it (a file).
    pub(crate) fn allow_writes(&mut self, path: &Path) -> Result<(), RulesetError> {
        let fail = |source| RulesetError::Rule {
            path: path.display().to_string(),
            source,
        };
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| fail(io::Error::from(io::ErrorKind::InvalidInput)))?;
        // SAFETY: a valid C string; O_PATH opens without reading anything.
        let raw = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(fail(io::Error::last_os_error()));
        }
        // SAFETY: a new descriptor, now ours.
        let target = unsafe { OwnedFd::from_raw_fd(raw) };
        let is_dir = std::fs::metadata(path).map_err(fail)?.is_dir();
        let allowed = if is_dir {
            self.handled
        } else {
            self.handled & FILE_WRITES
        };
        add_rule(self.fd.as_raw_fd(), target.as_raw_fd(), allowed).map_err(fail)
    }

    /// The ruleset's descriptor, for [`restrict_self`] in the child.
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn add_rule(ruleset: RawFd, target: RawFd, allowed: u64) -> io::Result<()> {
    let attr = PathBeneathAttr {
        allowed_access: allowed,
        parent_fd: target,
    };
    // SAFETY: `attr` is a valid rule; both descriptors are open.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A ruleset the controller builds after the child's mounts, so that its rules name what
/// the child sees (a new tmpfs, an overlay): its paths ready as C strings.
#[cfg_attr(feature = "portable", allow(dead_code))]
#[derive(Debug)]
pub(crate) struct RawRules {
    handled: u64,
    scoped: u64,
    paths: Vec<CString>,
}

#[cfg_attr(feature = "portable", allow(dead_code))]
impl RawRules {
    pub(crate) fn new(paths: &[std::path::PathBuf]) -> Result<RawRules, RulesetError> {
        let abi = abi().map_err(RulesetError::Unavailable)?;
        let paths = paths
            .iter()
            .map(|p| {
                CString::new(p.as_os_str().as_bytes()).map_err(|_| RulesetError::Rule {
                    path: p.display().to_string(),
                    source: io::Error::from(io::ErrorKind::InvalidInput),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(RawRules {
            handled: handled_writes(abi),
            scoped: if abi >= 6 {
                SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
            } else {
                0
            },
            paths,
        })
    }

    /// Whether the scopes (abstract sockets, signals) are part of it.
    pub(crate) fn scopes(&self) -> bool {
        self.scoped != 0
    }

    /// The ruleset's descriptor. A path that does not exist is left out; another failure
    /// names the path's index (`paths.len()` for the ruleset itself) and the errno.
    ///
    /// # Safety
    /// System calls only: it runs in the controller, a copy of a multi-threaded process.
    pub(crate) unsafe fn build(&self) -> Result<RawFd, (u32, libc::c_int)> {
        let errno = || {
            // SAFETY: this thread's errno.
            unsafe { *libc::__errno_location() }
        };
        let attr = ScopedRulesetAttr {
            handled_access_fs: self.handled,
            handled_access_net: 0,
            scoped: self.scoped,
        };
        let size = if self.scoped != 0 {
            std::mem::size_of::<ScopedRulesetAttr>()
        } else {
            std::mem::size_of::<RulesetAttr>()
        };
        // SAFETY: `attr` starts with the fields of every size given.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const ScopedRulesetAttr,
                size,
                0u32,
            )
        } as RawFd;
        if fd < 0 {
            return Err((self.paths.len() as u32, errno()));
        }
        for (i, path) in self.paths.iter().enumerate() {
            // SAFETY: a valid C string; the descriptor is ours and closed below.
            unsafe {
                let target = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                if target < 0 {
                    if errno() == libc::ENOENT {
                        continue;
                    }
                    return Err((i as u32, errno()));
                }
                let mut st: libc::stat = std::mem::zeroed();
                let is_dir =
                    libc::fstat(target, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR;
                let allowed = if is_dir {
                    self.handled
                } else {
                    self.handled & FILE_WRITES
                };
                let r = add_rule(fd, target, allowed);
                libc::close(target);
                if let Err(e) = r {
                    return Err((i as u32, e.raw_os_error().unwrap_or(0)));
                }
            }
        }
        Ok(fd)
    }

    /// The path of index `i`, for an error message.
    pub(crate) fn describe(&self, i: u32) -> String {
        self.paths
            .get(i as usize)
            .map_or("the ruleset".to_string(), |p| {
                p.to_string_lossy().into_owned()
            })
    }
}

/// Enforces the ruleset on the calling process and everything it starts from now on.
/// Sets `no_new_privs` first, which an unprivileged process needs and which keeps a
/// set-user-ID program from shedding the ruleset.
///
/// # Safety
/// Async-signal-safe: only system calls, so it may run between fork and exec.
pub(crate) unsafe fn restrict_self(ruleset: RawFd) -> Result<(), libc::c_int> {
    // SAFETY: plain system calls on a descriptor the caller owns.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(*libc::__errno_location());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
            return Err(*libc::__errno_location());
        }
    }
    Ok(())
}

/// `struct __user_cap_header_struct` and one `__user_cap_data_struct` pair (version 3).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// Beyond every capability a kernel defines today.
const LAST_CAPABILITY: libc::c_ulong = 63;

/// A sandboxed child of root: gives up every capability for good (bounding set, ambient,
/// then effective, permitted and inheritable), so that it cannot mount, load modules or
/// override file permissions to get around the sandbox.
///
/// # Safety
/// Async-signal-safe: only system calls, so it may run between fork and exec.
pub(crate) unsafe fn drop_all_capabilities() -> Result<(), libc::c_int> {
    // SAFETY: prctl and capset on this process.
    unsafe {
        for cap in 0..=LAST_CAPABILITY {
            // EINVAL past the kernel's last capability (they are numbered from 0 without
            // a gap): nothing further to drop.
            if libc::prctl(libc::PR_CAPBSET_DROP, cap) != 0
                && *libc::__errno_location() == libc::EINVAL
            {
                break;
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
        let header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            return Err(*libc::__errno_location());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// In a forked child: enforce `ruleset`, try to create each file, report which could be
    /// created as a bit mask in the exit code.
    fn writes_allowed(ruleset: &Ruleset, files: &[&Path]) -> Vec<bool> {
        let cs: Vec<CString> = files
            .iter()
            .map(|p| CString::new(p.as_os_str().as_bytes()).unwrap())
            .collect();
        let fd = ruleset.raw_fd();
        // SAFETY: the child makes only system calls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                if restrict_self(fd).is_err() {
                    libc::_exit(255);
                }
                let mut mask = 0;
                for (i, c) in cs.iter().enumerate() {
                    let f = libc::open(c.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o600);
                    if f >= 0 {
                        mask |= 1 << i;
                        libc::close(f);
                    }
                }
                libc::_exit(mask);
            }
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let code = libc::WEXITSTATUS(status);
        assert_ne!(code, 255, "restrict_self failed");
        (0..files.len()).map(|i| code & (1 << i) != 0).collect()
    }

    #[test]
    fn writes_are_allowed_beneath_the_rules_and_nowhere_else() {
        if let Err(why) = abi() {
            eprintln!("skipped: {why}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (ok, other) = (dir.path().join("ok"), dir.path().join("other"));
        std::fs::create_dir_all(ok.join("deeper")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let mut rules = Ruleset::new().unwrap();
        rules.allow_writes(&ok).unwrap();
        let got = writes_allowed(
            &rules,
            &[
                &ok.join("a"),
                &ok.join("deeper/b"),
                &other.join("c"),
                &dir.path().join("d"),
            ],
        );
        assert_eq!(got, [true, true, false, false]);
        assert!(!other.join("c").exists());
    }

    #[test]
    fn a_rule_on_a_file_allows_writing_that_file_only() {
        if abi().is_err() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let mut rules = Ruleset::new().unwrap();
        rules.allow_writes(&file).unwrap();
        assert_eq!(
            writes_allowed(&rules, &[&file, &dir.path().join("g")]),
            [true, false]
        );
    }

    #[test]
    fn a_missing_path_is_an_error_naming_it() {
        if abi().is_err() {
            return;
        }
        let mut rules = Ruleset::new().unwrap();
        let err = rules
            .allow_writes(Path::new("/nonexistent/orchestrate"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot allow writes to /nonexistent/orchestrate: No such file or directory (os error 2)"
        );
    }
}
