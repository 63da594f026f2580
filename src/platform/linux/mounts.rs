//! The child's view of the filesystem, built by the controller in the child's new mount
//! namespace before it forks the child.
//!
//! [`MountPlan::new`] turns a [`View`] into steps whose every path is a C string, in
//! orchestrate, where allocating and looking at the filesystem is fine; [`MountPlan::apply`]
//! runs them in the controller with system calls only (see `controller.rs`). The steps:
//!
//! 1. Detached copies (`open_tree`) of what stays writable and of the devices the child
//!    gets, taken while the tree still has the host's flags.
//! 2. The whole tree read-only, without set-user-ID and device files, in one call
//!    (`mount_setattr` with `AT_RECURSIVE`): writes and metadata changes (mode, times,
//!    xattrs) fail with EROFS everywhere.
//! 3. A fresh `/proc` (its `sys`, `sysrq-trigger`, `irq` and `bus` read-only), a `/dev` of
//!    its own (null, zero, full, random, urandom, tty, a new `pts` instance, `shm`), and
//!    empty `/tmp`, `/var/tmp` and `/run` (the last hides the runtime sockets: ssh-agent,
//!    gpg, D-Bus, docker). `/etc/resolv.conf` still resolves when it points into `/run`.
//! 4. The view's own mounts, shallowest first: the writable copies put back, private
//!    overlays, scratch directories, private copies of files, read-only covers, emptied
//!    directories with the places under them carried back in (orchestrate's state, of
//!    which the child sees its own run folder), empty covers.
//!
//! As an unprivileged user this happens in a user namespace of the child's own, where the
//! mounts copied from the host are locked: the child cannot unmount a cover to see what
//! it hides. The new mount API needs Linux 5.12; Landlock, the other layer that confines
//! writes, needs 5.13, so a kernel without it has neither.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::super::{LoginCopies, MountKind, View};

const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `struct mount_attr` (Linux 5.12).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// The devices bound into the child's `/dev`.
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];
/// Parts of `/proc` that change the whole machine, covered read-only.
const PROC_COVERS: [&str; 4] = ["sys", "sysrq-trigger", "irq", "bus"];
/// Where the controller keeps the private layers of overlays (in the child's `/run`).
const STAGING: &str = "/run/.orchestrate";

/// One step of the view's own mounts, its paths ready for the controller.
#[derive(Debug)]
enum Step {
    /// Puts back the writable copy `clone` (an index into the detached copies).
    Attach {
        clone: usize,
        target: CString,
    },
    Overlay {
        target: CString,
        /// The staging directory, its upper and work directories.
        dirs: [CString; 3],
        options: CString,
    },
    Scratch {
        target: CString,
    },
    /// A private copy of the file at `target`, made at `staged` (in the child's `/run`),
    /// put over it.
    Copy {
        staged: CString,
        target: CString,
        /// What the copy is made of: `target` itself, or the view's version of it.
        source: CString,
    },
    ReadOnly {
        target: CString,
    },
    HideDir {
        target: CString,
    },
    /// An empty read-only directory over `target`, with the places under it carried in.
    Emptied {
        target: CString,
        carried: Vec<Carried>,
    },
    /// `/dev/null`, read-only, over a file, a socket or a symbolic link (not followed).
    HideFile {
        target: CString,
    },
}

/// A place the child still sees under a directory the view empties, read-only (a writable
/// place gets its own mount over it later).
#[derive(Debug)]
struct Carried {
    /// Its detached copy (an index into the plan's copies).
    clone: usize,
    /// The folders between the emptied directory and it, shallowest first, to create.
    parents: Vec<CString>,
    target: CString,
    is_dir: bool,
}

/// A view's steps, built before the clone.
#[derive(Debug)]
pub(super) struct MountPlan {
    /// Copied (detached) before the tree is made read-only: writable places, devices,
    /// and what is carried into the new `/tmp`, `/var/tmp` and `/run`.
    clones: Vec<CString>,
    /// `(clone, /dev/<name>)` for each device.
    devices: Vec<(usize, CString)>,
    /// What the child must still see under `/tmp`, `/var/tmp`, `/run` and `/dev/shm` (a
    /// workspace in /tmp, /etc/resolv.conf's target in /run).
    carried: Vec<Carried>,
    tmpfs_dirs: Vec<CString>,
    proc_covers: Vec<CString>,
    steps: Vec<Step>,
    /// The path of each step, for error messages.
    step_paths: Vec<PathBuf>,
    /// `(index, the file in its overlay's upper directory)` for each login file the
    /// controller copies out at the child's exit, and where to.
    logins: Vec<(u32, CString)>,
    login_fd: Option<libc::c_int>,
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} contains a NUL byte", p.display()),
        )
    })
}

fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// The overlay option value: commas, colons and backslashes would end or split it.
fn overlay_safe(p: &Path) -> bool {
    !p.as_os_str()
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b',' | b':' | b'\\'))
}

impl MountPlan {
    /// The steps for `view`. Paths that do not exist are left out (the policy creates
    /// what must exist); a private overlay whose path the option syntax cannot carry is
    /// read-only instead.
    pub(super) fn new(view: &View, program: &Path) -> io::Result<MountPlan> {
        let mut mounts: Vec<&(PathBuf, MountKind)> = view.mounts.iter().collect();
        // Paths of one depth do not hold one another: ordered among themselves only so
        // that the same mount asked twice (a home inside the workspace protects its
        // settings twice) is made once.
        mounts.sort_by(|a, b| (depth(&a.0), &a.1, &a.0).cmp(&(depth(&b.0), &b.1, &b.0)));
        mounts.dedup();
        let mut plan = MountPlan {
            clones: Vec::new(),
            devices: Vec::new(),
            carried: Vec::new(),
            tmpfs_dirs: Vec::new(),
            proc_covers: PROC_COVERS
                .iter()
                .map(|n| Path::new("/proc").join(n))
                .map(|p| cstr(&p))
                .collect::<io::Result<_>>()?,
            steps: Vec::new(),
            step_paths: Vec::new(),
            logins: Vec::new(),
            login_fd: None,
        };
        // What the child must still see where the view empties a directory: every place of
        // the view (the later steps work on them), what it must read (its working
        // directory, its home, its program), and where /etc/resolv.conf points
        // (systemd-resolved keeps it in /run; without it no name resolves).
        let places: Vec<PathBuf> = view
            .mounts
            .iter()
            .filter(|(_, k)| *k != MountKind::Hidden)
            .map(|(p, _)| p.clone())
            .chain(view.visible.iter().cloned())
            .chain(program.parent().and_then(|p| std::fs::canonicalize(p).ok()))
            .chain(std::fs::canonicalize("/etc/resolv.conf").ok())
            .collect();
        let mut uppers: Vec<(&Path, PathBuf)> = Vec::new();
        let (mut overlays, mut copies) = (0, 0);
        for (path, kind) in mounts {
            let Ok(meta) = std::fs::symlink_metadata(path) else {
                continue;
            };
            let target = cstr(path)?;
            let step = match kind {
                MountKind::Writable if meta.is_dir() => {
                    plan.clones.push(target.clone());
                    Step::Attach {
                        clone: plan.clones.len() - 1,
                        target,
                    }
                }
                MountKind::Writable => continue,
                MountKind::Private if meta.is_dir() && overlay_safe(path) => {
                    let staging = Path::new(STAGING).join(format!("o{overlays}"));
                    overlays += 1;
                    let (upper, work) = (staging.join("u"), staging.join("w"));
                    uppers.push((path.as_path(), upper.clone()));
                    let options = format!(
                        "lowerdir={},upperdir={},workdir={}",
                        path.display(),
                        upper.display(),
                        work.display()
                    );
                    Step::Overlay {
                        target,
                        dirs: [cstr(&staging)?, cstr(&upper)?, cstr(&work)?],
                        options: CString::new(options).map_err(io::Error::other)?,
                    }
                }
                // A symbolic link is covered itself (not what it points to, which gets a
                // cover of its own), by an empty file: a mount point cannot be removed
                // or renamed, and nothing but a file can be mounted over a link.
                MountKind::Private | MountKind::ReadOnly if meta.is_symlink() => {
                    Step::HideFile { target }
                }
                MountKind::Private | MountKind::ReadOnly => Step::ReadOnly { target },
                MountKind::Scratch if meta.is_dir() => Step::Scratch { target },
                MountKind::Scratch => continue,
                MountKind::Copy if meta.is_file() => {
                    let staged = Path::new(STAGING).join(format!("c{copies}"));
                    copies += 1;
                    let source = view
                        .copied_from
                        .iter()
                        .find(|(t, _)| t == path)
                        .map_or(Ok(target.clone()), |(_, from)| cstr(from))?;
                    Step::Copy {
                        staged: cstr(&staged)?,
                        target,
                        source,
                    }
                }
                MountKind::Copy => continue,
                MountKind::Emptied if meta.is_dir() => Step::Emptied {
                    target,
                    carried: plan.carry(path, &places)?,
                },
                MountKind::Hidden if meta.is_dir() => Step::HideDir { target },
                MountKind::Hidden | MountKind::Emptied => Step::HideFile { target },
            };
            plan.steps.push(step);
            plan.step_paths.push(path.clone());
        }
        if let Some(logins) = &view.logins {
            use std::os::fd::AsRawFd;
            for (i, file) in logins.files.iter().enumerate() {
                let upper = uppers
                    .iter()
                    .filter(|(dir, _)| file.starts_with(dir))
                    .max_by_key(|(dir, _)| depth(dir))
                    .and_then(|(dir, upper)| Some(upper.join(file.strip_prefix(dir).ok()?)));
                if let Some(upper) = upper {
                    plan.logins.push((i as u32, cstr(&upper)?));
                }
            }
            plan.login_fd = Some(logins.into.as_raw_fd());
        }
        for name in DEVICES {
            let host = Path::new("/dev").join(name);
            if std::fs::metadata(&host).is_ok() {
                plan.clones.push(cstr(&host)?);
                plan.devices.push((plan.clones.len() - 1, cstr(&host)?));
            }
        }
        let mut emptied = Vec::new();
        for dir in ["/tmp", "/var/tmp", "/run"] {
            // A symbolic link (`/var/tmp` -> `/tmp`) is followed by mount: its target is
            // covered already.
            if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
                plan.tmpfs_dirs.push(cstr(Path::new(dir))?);
                emptied.push(PathBuf::from(dir));
            }
        }
        // The new /dev's shm is empty too (mounted with /dev).
        emptied.push(PathBuf::from("/dev/shm"));
        for root in &emptied {
            let carried = plan.carry(root, &places)?;
            plan.carried.extend(carried);
        }
        Ok(plan)
    }

    /// The places under `root` the child must still see, shallowest first, each once (not
    /// under another one carried): a detached copy of each is taken with the others.
    fn carry(&mut self, root: &Path, places: &[PathBuf]) -> io::Result<Vec<Carried>> {
        let mut wanted: Vec<&PathBuf> = places
            .iter()
            .filter(|p| p.starts_with(root) && p.as_path() != root)
            .collect();
        wanted.sort_by_key(|p| depth(p));
        let mut done: Vec<&Path> = Vec::new();
        let mut carried = Vec::new();
        for p in wanted {
            if done.iter().any(|c| p.starts_with(c)) {
                continue;
            }
            let Ok(meta) = std::fs::metadata(p) else {
                continue;
            };
            let parents = p
                .ancestors()
                .skip(1)
                .take_while(|a| *a != root)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .map(cstr)
                .collect::<io::Result<_>>()?;
            self.clones.push(cstr(p)?);
            carried.push(Carried {
                clone: self.clones.len() - 1,
                parents,
                target: cstr(p)?,
                is_dir: meta.is_dir(),
            });
            done.push(p);
        }
        Ok(carried)
    }

    /// How many detached copies [`MountPlan::apply`] takes (the size of its scratch).
    pub(super) fn clone_count(&self) -> usize {
        self.clones.len()
    }

    /// The path of step `index`, for an error report.
    pub(super) fn describe(&self, index: u32) -> String {
        let i = index as usize;
        let fixed = self.steps.len();
        match self.step_paths.get(i) {
            Some(p) => p.display().to_string(),
            None => match i - fixed {
                0 => "/ (read-only)".into(),
                1 => "/proc".into(),
                2 => "/dev".into(),
                3 => "/tmp, /var/tmp, /run".into(),
                _ => format!("step {i}"),
            },
        }
    }

    /// Builds the view, in the controller (a fresh mount namespace whose propagation from
    /// the host is already one-way). `fds` has room for [`MountPlan::clone_count`]
    /// descriptors. On failure: the step's index (as [`MountPlan::describe`] reads it)
    /// and the errno.
    ///
    /// # Safety
    /// System calls only: it runs in the copy of a multi-threaded process.
    pub(super) unsafe fn apply(&self, fds: *mut libc::c_int) -> Result<(), (u32, libc::c_int)> {
        let fixed = self.steps.len() as u32;
        // SAFETY: system calls on prepared C strings; `fds` has room for every clone.
        unsafe {
            for (i, source) in self.clones.iter().enumerate() {
                let fd = open_tree(libc::AT_FDCWD, source.as_ptr(), AT_RECURSIVE);
                if fd < 0 {
                    return Err((fixed, errno()));
                }
                *fds.add(i) = fd;
            }
            let all = MountAttr {
                attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                attr_clr: 0,
                propagation: 0,
                userns_fd: 0,
            };
            if mount_setattr(libc::AT_FDCWD, c"/".as_ptr(), AT_RECURSIVE, &all) != 0 {
                return Err((fixed, errno()));
            }
            self.proc().map_err(|e| (fixed + 1, e))?;
            self.dev(fds).map_err(|e| (fixed + 2, e))?;
            self.tmpfs(fds).map_err(|e| (fixed + 3, e))?;
            for (i, step) in self.steps.iter().enumerate() {
                match step.apply(fds) {
                    Ok(()) => {}
                    // A cover over what an emptied directory hides already.
                    Err(libc::ENOENT)
                        if matches!(
                            step,
                            Step::ReadOnly { .. } | Step::HideDir { .. } | Step::HideFile { .. }
                        ) => {}
                    Err(e) => return Err((i as u32, e)),
                }
            }
            for i in 0..self.clones.len() {
                libc::close(*fds.add(i));
            }
        }
        Ok(())
    }

    /// Where the controller copies the login files (kept open past its own clean-up).
    pub(super) fn login_fd(&self) -> Option<libc::c_int> {
        self.login_fd.filter(|_| !self.logins.is_empty())
    }

    /// The address ranges `copy_logins` reads (this plan, the list, each path), into `out`;
    /// their count, or None when `out` is too short. No allocation: it runs in the
    /// controller.
    pub(super) fn login_ranges(&self, out: &mut [(usize, usize)]) -> Option<usize> {
        fn range<T: ?Sized>(p: *const T, bytes: usize) -> (usize, usize) {
            let a = p.cast::<u8>() as usize;
            (a, a.saturating_add(bytes))
        }
        let list = self.logins.as_slice();
        let ranges = [
            range(self, std::mem::size_of::<Self>()),
            range(list.as_ptr(), std::mem::size_of_val(list)),
        ];
        let paths = list
            .iter()
            .map(|(_, path)| range(path.as_ptr(), path.as_bytes_with_nul().len()));
        let mut n = 0;
        for r in ranges.into_iter().chain(paths) {
            *out.get_mut(n)? = r;
            n += 1;
        }
        Some(n)
    }

    /// Copies the private layer's version of each login file that is there into `into`
    /// (see `LoginCopies`), at the child's exit.
    ///
    /// # Safety
    /// System calls only: it runs in the controller.
    pub(super) unsafe fn copy_logins(&self, into: libc::c_int) {
        const CHUNK_BYTES: usize = 4096;
        // SAFETY: system calls on prepared C strings and our own descriptors and buffers.
        unsafe {
            for (index, upper) in &self.logins {
                // Not following a link, nor waiting on a FIFO the child may have put there.
                let fd = libc::open(
                    upper.as_ptr(),
                    libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
                );
                if fd < 0 {
                    continue;
                }
                let mut st: libc::stat = std::mem::zeroed();
                let size = if libc::fstat(fd, &mut st) == 0
                    && st.st_mode & libc::S_IFMT == libc::S_IFREG
                    && (st.st_size as u64) <= LoginCopies::MAX_BYTES
                {
                    st.st_size as u64
                } else {
                    libc::close(fd);
                    continue;
                };
                let mut header = [0u8; LoginCopies::HEADER_BYTES];
                header[..4].copy_from_slice(&index.to_le_bytes());
                header[4..].copy_from_slice(&size.to_le_bytes());
                write_all(into, &header);
                let mut buf = [0u8; CHUNK_BYTES];
                let mut left = size as usize;
                while left > 0 {
                    let n = libc::read(fd, buf.as_mut_ptr().cast(), left.min(CHUNK_BYTES));
                    if n <= 0 {
                        // Shorter than it was: padded, so the next header stays in place
                        // (and the copy, no longer JSON, is not written back).
                        buf.fill(0);
                        while left > 0 {
                            let k = left.min(CHUNK_BYTES);
                            write_all(into, &buf[..k]);
                            left -= k;
                        }
                        break;
                    }
                    write_all(into, &buf[..n as usize]);
                    left -= n as usize;
                }
                libc::close(fd);
            }
        }
    }

    unsafe fn proc(&self) -> Result<(), libc::c_int> {
        // SAFETY: system calls on prepared C strings.
        unsafe {
            check(libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ))?;
            for cover in &self.proc_covers {
                match read_only_bind(cover) {
                    Err(libc::ENOENT) | Ok(()) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    unsafe fn dev(&self, fds: *mut libc::c_int) -> Result<(), libc::c_int> {
        // SAFETY: system calls on prepared C strings and the clones' descriptors.
        unsafe {
            check(libc::mount(
                c"tmpfs".as_ptr(),
                c"/dev".as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NOEXEC,
                c"mode=0755,size=64k".as_ptr().cast(),
            ))?;
            for (clone, target) in &self.devices {
                let f = libc::open(
                    target.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o666,
                );
                if f < 0 {
                    return Err(errno());
                }
                libc::close(f);
                check(move_mount(*fds.add(*clone), target.as_ptr()))?;
            }
            for dir in [c"/dev/pts", c"/dev/shm"] {
                check(libc::mkdir(dir.as_ptr(), 0o755))?;
            }
            check(libc::mount(
                c"devpts".as_ptr(),
                c"/dev/pts".as_ptr(),
                c"devpts".as_ptr(),
                libc::MS_NOSUID | libc::MS_NOEXEC,
                c"newinstance,ptmxmode=0666,mode=0620".as_ptr().cast(),
            ))?;
            check(libc::mount(
                c"tmpfs".as_ptr(),
                c"/dev/shm".as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                c"mode=1777".as_ptr().cast(),
            ))?;
            for (target, link) in [
                (c"pts/ptmx", c"/dev/ptmx"),
                (c"/proc/self/fd", c"/dev/fd"),
                (c"/proc/self/fd/0", c"/dev/stdin"),
                (c"/proc/self/fd/1", c"/dev/stdout"),
                (c"/proc/self/fd/2", c"/dev/stderr"),
            ] {
                check(libc::symlink(target.as_ptr(), link.as_ptr()))?;
            }
            read_only_mount(c"/dev")?;
        }
        Ok(())
    }

    unsafe fn tmpfs(&self, fds: *mut libc::c_int) -> Result<(), libc::c_int> {
        // SAFETY: system calls on prepared C strings and the clones' descriptors.
        unsafe {
            for dir in &self.tmpfs_dirs {
                check(libc::mount(
                    c"tmpfs".as_ptr(),
                    dir.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    c"mode=1777".as_ptr().cast(),
                ))?;
            }
            carry_in(&self.carried, fds)?;
            check(libc::mkdir(c"/run/.orchestrate".as_ptr(), 0o700))?;
        }
        Ok(())
    }
}

/// Makes the mount at `target` read-only, not those under it.
///
/// # Safety
/// A system call on a C string.
unsafe fn read_only_mount(target: &std::ffi::CStr) -> Result<(), libc::c_int> {
    let ro = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a valid C string and attribute struct.
    check(unsafe { mount_setattr(libc::AT_FDCWD, target.as_ptr(), 0, &ro) })
}

/// Puts each carried place back at its path, read-only, in a directory emptied just before.
///
/// # Safety
/// System calls only; `fds` holds the plan's detached copies.
unsafe fn carry_in(carried: &[Carried], fds: *mut libc::c_int) -> Result<(), libc::c_int> {
    // SAFETY: system calls on prepared C strings and the clones' descriptors.
    unsafe {
        for c in carried {
            for p in &c.parents {
                match libc::mkdir(p.as_ptr(), 0o755) {
                    0 => {}
                    _ if errno() == libc::EEXIST => {}
                    _ => return Err(errno()),
                }
            }
            if c.is_dir {
                check(libc::mkdir(c.target.as_ptr(), 0o755))?;
            } else {
                let f = libc::open(
                    c.target.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644,
                );
                if f < 0 {
                    return Err(errno());
                }
                libc::close(f);
            }
            let fd = *fds.add(c.clone);
            set_read_only(fd)?;
            check(move_mount(fd, c.target.as_ptr()))?;
        }
    }
    Ok(())
}

impl Step {
    unsafe fn apply(&self, fds: *mut libc::c_int) -> Result<(), libc::c_int> {
        // SAFETY: system calls on prepared C strings.
        unsafe {
            match self {
                Step::Attach { clone, target } => {
                    check(move_mount(*fds.add(*clone), target.as_ptr()))
                }
                Step::Overlay {
                    target,
                    dirs,
                    options,
                } => {
                    for d in dirs {
                        check(libc::mkdir(d.as_ptr(), 0o700))?;
                    }
                    check(libc::mount(
                        c"overlay".as_ptr(),
                        target.as_ptr(),
                        c"overlay".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV,
                        options.as_ptr().cast(),
                    ))
                }
                Step::Scratch { target } => check(libc::mount(
                    c"tmpfs".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    c"mode=0700".as_ptr().cast(),
                )),
                Step::Copy {
                    staged,
                    target,
                    source,
                } => {
                    copy_file(source, staged)?;
                    let fd = open_tree(libc::AT_FDCWD, staged.as_ptr(), 0);
                    if fd < 0 {
                        return Err(errno());
                    }
                    let r = check(move_mount(fd, target.as_ptr()));
                    libc::close(fd);
                    r
                }
                Step::ReadOnly { target } => read_only_bind(target),
                Step::HideDir { target } => check(libc::mount(
                    c"tmpfs".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"mode=0700,size=4k".as_ptr().cast(),
                )),
                Step::Emptied { target, carried } => {
                    check(libc::mount(
                        c"tmpfs".as_ptr(),
                        target.as_ptr(),
                        c"tmpfs".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        c"mode=0755,size=16k".as_ptr().cast(),
                    ))?;
                    carry_in(carried, fds)?;
                    // Read-only once what it holds is in place: the child makes nothing
                    // there (the mounts carried in keep their own flags).
                    read_only_mount(target)
                }
                Step::HideFile { target } => {
                    let fd = open_tree(libc::AT_FDCWD, c"/dev/null".as_ptr(), 0);
                    if fd < 0 {
                        return Err(errno());
                    }
                    let r = set_read_only(fd).and_then(|()| check(move_mount(fd, target.as_ptr())));
                    libc::close(fd);
                    r
                }
            }
        }
    }
}

/// Copies the file `from` (not following a link) to a new file `to`, mode 0600.
unsafe fn copy_file(from: &CString, to: &CString) -> Result<(), libc::c_int> {
    const CHUNK_BYTES: usize = 16 * 1024;
    // SAFETY: system calls on valid C strings and our own descriptors and buffer.
    unsafe {
        let src = libc::open(
            from.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        );
        if src < 0 {
            return Err(errno());
        }
        let dst = libc::open(
            to.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o600,
        );
        if dst < 0 {
            let e = errno();
            libc::close(src);
            return Err(e);
        }
        let mut buf = [0u8; CHUNK_BYTES];
        let result = loop {
            let n = libc::read(src, buf.as_mut_ptr().cast(), CHUNK_BYTES);
            if n == 0 {
                break Ok(());
            }
            if n < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                break Err(errno());
            }
            write_all(dst, &buf[..n as usize]);
        };
        libc::close(src);
        libc::close(dst);
        result
    }
}

/// Writes all of `bytes` (system calls only).
unsafe fn write_all(fd: libc::c_int, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writing from a valid buffer.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

fn errno() -> libc::c_int {
    // SAFETY: reading this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn check(rc: libc::c_int) -> Result<(), libc::c_int> {
    if rc == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// A detached copy of the tree at `path` (`flags`: `AT_RECURSIVE` or 0), close-on-exec.
unsafe fn open_tree(
    dirfd: libc::c_int,
    path: *const libc::c_char,
    flags: libc::c_uint,
) -> libc::c_int {
    // SAFETY: a plain system call.
    unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            dirfd,
            path,
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | flags,
        ) as libc::c_int
    }
}

/// Attaches the detached tree `fd` at `target` (a symbolic link there is not followed).
unsafe fn move_mount(fd: libc::c_int, target: *const libc::c_char) -> libc::c_int {
    // SAFETY: a plain system call.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target,
            MOVE_MOUNT_F_EMPTY_PATH,
        ) as libc::c_int
    }
}

unsafe fn mount_setattr(
    dirfd: libc::c_int,
    path: *const libc::c_char,
    flags: libc::c_uint,
    attr: &MountAttr,
) -> libc::c_int {
    // SAFETY: a plain system call with a valid attribute of the size given.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path,
            flags,
            attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) as libc::c_int
    }
}

/// Makes the detached tree `fd` read-only, all of it.
unsafe fn set_read_only(fd: libc::c_int) -> Result<(), libc::c_int> {
    let ro = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a plain system call.
    check(unsafe {
        mount_setattr(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
            &ro,
        )
    })
}

/// Covers `target` with a read-only copy of itself (and of what is mounted beneath it).
unsafe fn read_only_bind(target: &CString) -> Result<(), libc::c_int> {
    // SAFETY: system calls on a valid C string and our own descriptor.
    unsafe {
        let fd = open_tree(libc::AT_FDCWD, target.as_ptr(), AT_RECURSIVE);
        if fd < 0 {
            return Err(errno());
        }
        let r = set_read_only(fd).and_then(|()| check(move_mount(fd, target.as_ptr())));
        libc::close(fd);
        r
    }
}

#[cfg(test)]
mod plan_tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_mount_asked_twice_is_made_once_and_each_depth_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let (a, b) = (root.join("a"), root.join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let view = View {
            mounts: vec![
                (b.clone(), MountKind::ReadOnly),
                (a.clone(), MountKind::ReadOnly),
                (root.clone(), MountKind::Writable),
                (b.clone(), MountKind::ReadOnly),
                (a.clone(), MountKind::Hidden),
            ],
            visible: Vec::new(),
            logins: None,
            copied_from: Vec::new(),
        };
        let plan = MountPlan::new(&view, Path::new("/bin/true")).unwrap();
        // By depth, then by kind (a read-only before a hidden), then by path.
        assert_eq!(plan.step_paths, [root, a.clone(), b, a]);
    }
}

#[cfg(test)]
mod login_range_tests {
    use super::*;

    fn plan_with(logins: Vec<(u32, CString)>) -> MountPlan {
        MountPlan {
            clones: Vec::new(),
            devices: Vec::new(),
            carried: Vec::new(),
            tmpfs_dirs: Vec::new(),
            proc_covers: Vec::new(),
            steps: Vec::new(),
            step_paths: Vec::new(),
            logins,
            login_fd: Some(9),
        }
    }

    #[test]
    fn the_login_ranges_cover_the_plan_its_list_and_every_path() {
        let plan = plan_with(vec![
            (0, c"/run/o/0/upper/.credentials.json".into()),
            (3, c"/run/o/3/upper/auth.json".into()),
        ]);
        let mut out = [(0usize, 0usize); 8];
        let n = plan.login_ranges(&mut out).expect("room for 4");
        assert_eq!(n, 4);
        let covered = |p: usize, len: usize| out[..n].iter().any(|&(a, b)| a <= p && p + len <= b);
        assert!(covered(
            &plan as *const MountPlan as usize,
            std::mem::size_of::<MountPlan>()
        ));
        let list = plan.logins.as_slice();
        assert!(covered(list.as_ptr() as usize, std::mem::size_of_val(list)));
        for (_, path) in list {
            assert!(covered(
                path.as_ptr() as usize,
                path.as_bytes_with_nul().len()
            ));
        }
        // No room for them all: None, and the controller keeps the whole heap.
        assert_eq!(plan.login_ranges(&mut out[..3]), None);
    }
}
