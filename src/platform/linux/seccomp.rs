//! The child's seccomp filter: a short list of system calls (or of their arguments) a
//! child never needs and an attacker would use, each refused with an errno; everything
//! else is allowed.
//!
//! Refused: pushing input into a terminal (`ioctl` TIOCSTI and TIOCLINUX); reading or
//! writing another process (`ptrace`, `process_vm_readv/writev`); `io_uring` (whose
//! operations a filter cannot see); mounting and leaving the namespaces
//! (`mount`, `umount2`, `pivot_root`, the new mount API, `unshare`, `setns`, `clone` with
//! a namespace flag; `clone3`, whose flags a filter cannot read, gets ENOSYS so that libc
//! falls back to `clone`); the kernel's keyrings (`keyctl`, `add_key`, `request_key`);
//! `bpf` and `userfaultfd`; vsock sockets (a way out of a virtual machine); setting a
//! set-user-ID or set-group-ID bit (`chmod` and its kin).
//!
//! The program is written here rather than with a filter compiler: it is a few dozen
//! instructions, and a deny-list compiled for x86_64 by `seccompiler` lets through the
//! same calls made with x32 numbers (which carry x86_64's audit arch); this one refuses
//! every x32 number first. It is built in orchestrate and installed by the child just
//! before its exec, after `no_new_privs` (set with Landlock), with one system call.

/// `struct seccomp_data` offsets.
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
/// x86_64's x32 system calls have this bit set in their number.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;
const AF_VSOCK: u32 = 40;
/// `S_ISUID | S_ISGID`.
const SET_ID_BITS: u32 = 0o6000;
/// fchmodat2 (Linux 6.6): the same number on every architecture, which `libc` does not
/// define for every one of them.
const SYS_FCHMODAT2: libc::c_long = 452;
/// Every `CLONE_NEW*` flag `clone` takes.
const CLONE_NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP) as u32;

/// What a rule looks at besides the system call's number.
enum When {
    Always,
    /// The low 32 bits of argument `arg` are one of `values`.
    ArgIs(u32, &'static [u32]),
    /// The low 32 bits of argument `arg` have one of `mask`'s bits.
    ArgHasAny(u32, u32),
}

fn rules() -> Vec<(libc::c_long, When, libc::c_int)> {
    use When::*;
    let mut rules = vec![
        (
            libc::SYS_ioctl,
            ArgIs(1, &[TIOCSTI, TIOCLINUX]),
            libc::EPERM,
        ),
        (libc::SYS_ptrace, Always, libc::EPERM),
        (libc::SYS_process_vm_readv, Always, libc::EPERM),
        (libc::SYS_process_vm_writev, Always, libc::EPERM),
        (libc::SYS_io_uring_setup, Always, libc::ENOSYS),
        (libc::SYS_io_uring_enter, Always, libc::ENOSYS),
        (libc::SYS_io_uring_register, Always, libc::ENOSYS),
        (libc::SYS_mount, Always, libc::EPERM),
        (libc::SYS_umount2, Always, libc::EPERM),
        (libc::SYS_pivot_root, Always, libc::EPERM),
        (libc::SYS_open_tree, Always, libc::EPERM),
        (libc::SYS_move_mount, Always, libc::EPERM),
        (libc::SYS_fsopen, Always, libc::EPERM),
        (libc::SYS_fsconfig, Always, libc::EPERM),
        (libc::SYS_fsmount, Always, libc::EPERM),
        (libc::SYS_fspick, Always, libc::EPERM),
        (libc::SYS_mount_setattr, Always, libc::EPERM),
        (libc::SYS_unshare, Always, libc::EPERM),
        (libc::SYS_setns, Always, libc::EPERM),
        (libc::SYS_clone, ArgHasAny(0, CLONE_NAMESPACES), libc::EPERM),
        (libc::SYS_clone3, Always, libc::ENOSYS),
        (libc::SYS_keyctl, Always, libc::EPERM),
        (libc::SYS_add_key, Always, libc::EPERM),
        (libc::SYS_request_key, Always, libc::EPERM),
        (libc::SYS_bpf, Always, libc::EPERM),
        (libc::SYS_userfaultfd, Always, libc::EPERM),
        (libc::SYS_socket, ArgIs(0, &[AF_VSOCK]), libc::EPERM),
    ];
    // A set-ID bit on a file in a writable place outlives the run: nosuid holds only
    // inside the sandbox, and outside whoever reaches the file would run it as its owner.
    #[cfg(target_arch = "x86_64")]
    rules.push((libc::SYS_chmod, ArgHasAny(1, SET_ID_BITS), libc::EPERM));
    rules.extend([
        (libc::SYS_fchmod, ArgHasAny(1, SET_ID_BITS), libc::EPERM),
        (libc::SYS_fchmodat, ArgHasAny(2, SET_ID_BITS), libc::EPERM),
        (SYS_FCHMODAT2, ArgHasAny(2, SET_ID_BITS), libc::EPERM),
    ]);
    rules
}

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// A compiled filter, ready for [`Filter::install`].
#[derive(Debug)]
pub(super) struct Filter {
    program: Vec<libc::sock_filter>,
}

impl Filter {
    /// The filter for this architecture, or None where orchestrate has none (only x86_64
    /// and aarch64 are written here).
    pub(super) fn new() -> Option<Filter> {
        if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            return None;
        }
        Some(Filter { program: program() })
    }

    /// Installs the filter on the calling thread (and what it execs). `no_new_privs`
    /// must be set.
    ///
    /// # Safety
    /// One system call: fine between fork and exec.
    pub(super) unsafe fn install(&self) -> Result<(), libc::c_int> {
        let prog = libc::sock_fprog {
            len: self.program.len() as libc::c_ushort,
            filter: self.program.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: a valid program for the kernel to copy.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &prog as *const libc::sock_fprog,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            // SAFETY: this thread's errno.
            Err(unsafe { *libc::__errno_location() })
        }
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn program() -> Vec<libc::sock_filter> {
    let mut p = vec![
        stmt(BPF_LD_W_ABS, ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, NR),
    ];
    #[cfg(target_arch = "x86_64")]
    p.extend([jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1), errno(libc::ENOSYS)]);
    let mut rules = rules();
    rules.sort_by_key(|(nr, _, _)| *nr);
    p.extend(search(&rules));
    p
}

/// Rules with at most this many numbers are checked one by one; more are split in two.
const RULES_PER_LEAF: usize = 2;

/// The checks of `rules` (sorted by number), with the call's number loaded: a binary
/// search over their numbers, then the one rule's own check; a number none of them has
/// is allowed. The kernel runs the program over every system call number when it is
/// installed (to learn which are allowed whatever their arguments), and runs it again
/// on each call whose rule looks at an argument: a search takes about 8 instructions
/// where a list of every rule took about 90 (80 µs of every sandboxed child's start).
fn search(rules: &[(libc::c_long, When, libc::c_int)]) -> Vec<libc::sock_filter> {
    if rules.len() <= RULES_PER_LEAF {
        let mut p = Vec::new();
        for (nr, when, e) in rules {
            let check = check(when, *e);
            p.push(jump(BPF_JEQ_K, *nr as u32, 0, offset(check.len())));
            p.extend(check);
        }
        p.push(stmt(BPF_RET_K, RET_ALLOW));
        return p;
    }
    let (below, from) = rules.split_at(rules.len() / 2);
    let below = search(below);
    let mut p = vec![jump(BPF_JGE_K, from[0].0 as u32, offset(below.len()), 0)];
    p.extend(below);
    p.extend(search(from));
    p
}

/// What is refused of a call whose number is the rule's: always, or by an argument.
fn check(when: &When, e: libc::c_int) -> Vec<libc::sock_filter> {
    let refuse = errno(e);
    let allow = stmt(BPF_RET_K, RET_ALLOW);
    match *when {
        When::Always => vec![refuse],
        When::ArgIs(arg, values) => {
            let mut p = vec![stmt(BPF_LD_W_ABS, arg_low(arg))];
            for (j, v) in values.iter().enumerate() {
                // Past the compares left and the allow, to the refusal.
                p.push(jump(BPF_JEQ_K, *v, offset(values.len() - j), 0));
            }
            p.extend([allow, refuse]);
            p
        }
        When::ArgHasAny(arg, mask) => vec![
            stmt(BPF_LD_W_ABS, arg_low(arg)),
            jump(BPF_JSET_K, mask, 1, 0),
            allow,
            refuse,
        ],
    }
}

fn errno(e: libc::c_int) -> libc::sock_filter {
    stmt(BPF_RET_K, RET_ERRNO | (e as u32 & 0xffff))
}

/// A jump over `n` instructions; a conditional jump reaches at most 255.
fn offset(n: usize) -> u8 {
    u8::try_from(n).expect("a seccomp jump spans at most 255 instructions")
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn program() -> Vec<libc::sock_filter> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    type Call = fn() -> bool;

    /// In a forked child: install the filter, make each call, report which behaved as
    /// expected (each call says).
    fn as_expected(calls: &[Call]) -> Vec<bool> {
        let filter = Filter::new().expect("a filter for this architecture");
        // SAFETY: the child makes only system calls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                if filter.install().is_err() {
                    libc::_exit(255);
                }
                let mut mask = 0;
                for (i, call) in calls.iter().enumerate() {
                    if call() {
                        mask |= 1 << i;
                    }
                }
                libc::_exit(mask);
            }
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "the child died: {status}");
        let code = libc::WEXITSTATUS(status);
        assert_ne!(code, 255, "installing the filter failed");
        (0..calls.len()).map(|i| code & (1 << i) != 0).collect()
    }

    fn failed_with(rc: i64, want: libc::c_int) -> bool {
        // SAFETY: this thread's errno.
        rc < 0 && unsafe { *libc::__errno_location() } == want
    }

    #[test]
    fn the_filter_refuses_what_it_lists_and_allows_the_rest() {
        // SAFETY (each call): system calls with harmless arguments, in the forked child.
        let refused: [Call; 7] = [
            || {
                failed_with(
                    unsafe { libc::ioctl(0, libc::TIOCSTI, c"x".as_ptr()) } as i64,
                    libc::EPERM,
                )
            },
            || {
                failed_with(
                    unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) },
                    libc::EPERM,
                )
            },
            || {
                failed_with(
                    unsafe { libc::unshare(libc::CLONE_NEWUSER) } as i64,
                    libc::EPERM,
                )
            },
            || {
                let flags = (libc::CLONE_NEWNS | libc::SIGCHLD) as u64;
                failed_with(
                    unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) },
                    libc::EPERM,
                )
            },
            || {
                failed_with(
                    unsafe { libc::syscall(libc::SYS_clone3, 0, 0) },
                    libc::ENOSYS,
                )
            },
            || {
                failed_with(
                    unsafe { libc::socket(AF_VSOCK as i32, libc::SOCK_STREAM, 0) } as i64,
                    libc::EPERM,
                )
            },
            || {
                failed_with(
                    unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, 0) },
                    libc::ENOSYS,
                )
            },
        ];
        assert_eq!(as_expected(&refused), [true; 7]);
        let allowed: [Call; 3] = [
            || unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) } >= 0,
            || unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) } >= 0,
            || {
                let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
                // ENOTTY on a descriptor that is no terminal: the call went through.
                failed_with(
                    unsafe { libc::ioctl(2, libc::TIOCGWINSZ, &mut ws) } as i64,
                    libc::ENOTTY,
                ) || unsafe { libc::ioctl(2, libc::TIOCGWINSZ, &mut ws) } == 0
            },
        ];
        assert_eq!(as_expected(&allowed), [true; 3]);
    }

    /// What the kernel does with `program` for a call: its return value and how many
    /// instructions it ran. Knows the instructions `program` is made of.
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> (u32, usize) {
        let word = |offset: u32| match offset {
            NR => nr,
            ARCH => arch,
            o => {
                let i = (o - 16) / 8;
                assert_eq!(o, arg_low(i), "only an argument's low half is loaded");
                args[i as usize] as u32
            }
        };
        let (mut pc, mut acc, mut ran) = (0usize, 0u32, 0);
        loop {
            let insn = program.get(pc).expect("every path ends in a return");
            ran += 1;
            pc += 1;
            let taken = match insn.code {
                BPF_LD_W_ABS => {
                    acc = word(insn.k);
                    continue;
                }
                BPF_RET_K => return (insn.k, ran),
                BPF_JEQ_K => acc == insn.k,
                BPF_JGE_K => acc >= insn.k,
                BPF_JSET_K => acc & insn.k != 0,
                code => panic!("an instruction the program does not use: {code:#x}"),
            };
            pc += usize::from(if taken { insn.jt } else { insn.jf });
        }
    }

    /// What the rules say of a call, read from the table the program is built from.
    fn decided(arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        if arch != AUDIT_ARCH {
            return RET_KILL_PROCESS;
        }
        #[cfg(target_arch = "x86_64")]
        if nr & X32_SYSCALL_BIT != 0 {
            return RET_ERRNO | libc::ENOSYS as u32;
        }
        let Some((_, when, e)) = rules().into_iter().find(|(n, _, _)| *n as u32 == nr) else {
            return RET_ALLOW;
        };
        let refused = match when {
            When::Always => true,
            When::ArgIs(arg, values) => values.contains(&(args[arg as usize] as u32)),
            When::ArgHasAny(arg, mask) => args[arg as usize] as u32 & mask != 0,
        };
        if refused {
            RET_ERRNO | e as u32
        } else {
            RET_ALLOW
        }
    }

    #[test]
    fn the_program_decides_every_call_as_the_rules_say_in_a_few_instructions() {
        let numbers: Vec<libc::c_long> = rules().iter().map(|(n, _, _)| *n).collect();
        let mut distinct = numbers.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), numbers.len(), "one rule per system call");
        let program = program();
        // Arguments: none, each value and mask bit the rules name (in every argument),
        // every bit, and a value in the high half only.
        let mut values: Vec<u64> = vec![0, u64::MAX, 1 << 40];
        for (_, when, _) in rules() {
            match when {
                When::Always => {}
                When::ArgIs(_, vs) => values.extend(vs.iter().map(|v| u64::from(*v))),
                When::ArgHasAny(_, mask) => {
                    values.extend((0..32).map(|b| 1u64 << b).filter(|b| *b as u32 & mask != 0))
                }
            }
        }
        let mut most_ran = 0;
        let mut checked = 0;
        #[cfg(target_arch = "x86_64")]
        let x32: &[u32] = &[0, X32_SYSCALL_BIT];
        #[cfg(not(target_arch = "x86_64"))]
        let x32: &[u32] = &[0];
        for arch in [AUDIT_ARCH, 0x4000_0003 /* i386 */] {
            for nr in (0..1024).chain([u32::MAX]) {
                for bit in x32 {
                    let nr = nr | bit;
                    for v in &values {
                        for arg in 0..6 {
                            let mut args = [0u64; 6];
                            args[arg] = *v;
                            let (got, ran) = run(&program, arch, nr, args);
                            assert_eq!(
                                got,
                                decided(arch, nr, args),
                                "arch {arch:#x}, call {nr:#x}, argument {arg} = {v:#x}"
                            );
                            most_ran = most_ran.max(ran);
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked} calls checked");
        // Arch, number, x32, a search over the rules' numbers, their check.
        assert!(most_ran <= 20, "a call ran {most_ran} instructions");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_numbers_are_refused() {
        // getpid with the x32 bit.
        let calls: [Call; 1] =
            [|| failed_with(unsafe { libc::syscall(0x4000_0000 | 39) }, libc::ENOSYS)];
        assert_eq!(as_expected(&calls), [true]);
    }
}
