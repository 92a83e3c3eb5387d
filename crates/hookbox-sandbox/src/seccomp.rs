//! The seccomp filter applied to every sandboxed process: a deny list, each syscall with why.
//!
//! Default allow, listed syscalls fail with `EPERM` (so programs get a clean error rather than a
//! kill). `clone3` fails with `ENOSYS`, because its flags live in memory that seccomp cannot
//! inspect; libc then falls back to `clone`, whose namespace flags are checked. Under gVisor,
//! signals (and pidfds) aimed at PID 1, a warm call's host, fail with `EPERM`
//! (`SIGNAL_TARGETS`).
//!
//! It is one classic-BPF program ([`build`], [`build_gvisor`]), laid out as a binary search
//! over the syscall number (its layout is documented on `build_except`, `tree` and `leaf`).
//! Every syscall pays the depth of the tree (at most 13 instructions) instead of the length of
//! a linear list, and so does every evaluation the kernel that runs the sandbox makes of it:
//! gVisor re-evaluates a task's filters for every syscall number at each install and each fork
//! of a filtered task (`populateCache`), and the host kernel verifies and JIT-compiles it at
//! each attach. It used to be two linear filters compiled by `seccompiler` (the deny list, then
//! `clone3`); the module's tests evaluate the old pair and this program for every syscall
//! number and argument case and require the same verdicts, except x32 system calls, now denied
//! (see [`build`]).
//! A warm call host gets the same verdicts as two programs ([`Stacked`]): its own part, with
//! the few calls it still makes itself allowed ([`HOST_NEEDS`], which must name every call of
//! the deny list `call_host` makes once it is set up), and a short one each program adds.
//!
//! This module builds and installs the filter; it must not decide anything else about the
//! sandbox.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, sock_filter};

/// Syscalls denied outright, with the reason each is on the list.
pub const DENIED: &[(i64, &str, &str)] = &[
    (
        libc::SYS_ptrace,
        "ptrace",
        "inspect or steer other processes",
    ),
    (
        libc::SYS_process_vm_readv,
        "process_vm_readv",
        "read another process's memory",
    ),
    (
        libc::SYS_process_vm_writev,
        "process_vm_writev",
        "write another process's memory",
    ),
    (
        libc::SYS_io_uring_setup,
        "io_uring_setup",
        "io_uring bypasses seccomp for its operations",
    ),
    (
        libc::SYS_io_uring_enter,
        "io_uring_enter",
        "io_uring bypasses seccomp for its operations",
    ),
    (
        libc::SYS_io_uring_register,
        "io_uring_register",
        "io_uring bypasses seccomp for its operations",
    ),
    (
        libc::SYS_mount,
        "mount",
        "would reshape the sandbox's filesystem view",
    ),
    (
        libc::SYS_umount2,
        "umount2",
        "would uncover what the sandbox's mounts hide",
    ),
    (
        libc::SYS_pivot_root,
        "pivot_root",
        "would change the sandbox's root",
    ),
    (
        libc::SYS_chroot,
        "chroot",
        "classic escape helper with nested roots",
    ),
    (
        libc::SYS_open_tree,
        "open_tree",
        "new mount API: clones mounts",
    ),
    (
        libc::SYS_move_mount,
        "move_mount",
        "new mount API: attaches mounts",
    ),
    (
        libc::SYS_fsopen,
        "fsopen",
        "new mount API: creates filesystems",
    ),
    (libc::SYS_fsconfig, "fsconfig", "new mount API"),
    (libc::SYS_fsmount, "fsmount", "new mount API"),
    (
        libc::SYS_fspick,
        "fspick",
        "new mount API: reconfigures mounts",
    ),
    (
        libc::SYS_mount_setattr,
        "mount_setattr",
        "would clear read-only flags",
    ),
    (libc::SYS_kexec_load, "kexec_load", "replaces the kernel"),
    (
        libc::SYS_kexec_file_load,
        "kexec_file_load",
        "replaces the kernel",
    ),
    (
        libc::SYS_bpf,
        "bpf",
        "kernel attack surface, can read kernel memory",
    ),
    (
        libc::SYS_perf_event_open,
        "perf_event_open",
        "kernel attack surface, side channels",
    ),
    (
        libc::SYS_keyctl,
        "keyctl",
        "kernel keyrings are not namespaced",
    ),
    (
        libc::SYS_add_key,
        "add_key",
        "kernel keyrings are not namespaced",
    ),
    (
        libc::SYS_request_key,
        "request_key",
        "kernel keyrings are not namespaced",
    ),
    (
        libc::SYS_unshare,
        "unshare",
        "new namespaces would let code regain capabilities",
    ),
    (libc::SYS_setns, "setns", "joining other namespaces"),
    (
        libc::SYS_userfaultfd,
        "userfaultfd",
        "widens kernel race windows for exploits",
    ),
    (
        libc::SYS_open_by_handle_at,
        "open_by_handle_at",
        "opens files by handle, bypassing paths (shocker)",
    ),
    (
        libc::SYS_name_to_handle_at,
        "name_to_handle_at",
        "pairs with open_by_handle_at",
    ),
    (libc::SYS_init_module, "init_module", "loads kernel code"),
    (libc::SYS_finit_module, "finit_module", "loads kernel code"),
    (
        libc::SYS_delete_module,
        "delete_module",
        "unloads kernel code",
    ),
    (libc::SYS_reboot, "reboot", "host power state"),
    (libc::SYS_swapon, "swapon", "host memory configuration"),
    (libc::SYS_swapoff, "swapoff", "host memory configuration"),
    (libc::SYS_acct, "acct", "host process accounting"),
    (libc::SYS_quotactl, "quotactl", "host filesystem quotas"),
    (libc::SYS_syslog, "syslog", "reads the kernel log"),
    (libc::SYS_settimeofday, "settimeofday", "host clock"),
    (libc::SYS_clock_settime, "clock_settime", "host clock"),
    (libc::SYS_clock_adjtime, "clock_adjtime", "host clock"),
    (
        libc::SYS_fanotify_init,
        "fanotify_init",
        "watches the whole filesystem",
    ),
    (
        libc::SYS_lookup_dcookie,
        "lookup_dcookie",
        "kernel profiling interface",
    ),
];

/// `clone` flags that create namespaces; a `clone` carrying any of them is denied (same reason as
/// `unshare`).
const NAMESPACE_FLAGS: &[(u64, &str)] = &[
    (libc::CLONE_NEWUSER as u64, "CLONE_NEWUSER"),
    (libc::CLONE_NEWNS as u64, "CLONE_NEWNS"),
    (libc::CLONE_NEWPID as u64, "CLONE_NEWPID"),
    (libc::CLONE_NEWNET as u64, "CLONE_NEWNET"),
    (libc::CLONE_NEWIPC as u64, "CLONE_NEWIPC"),
    (libc::CLONE_NEWUTS as u64, "CLONE_NEWUTS"),
    (libc::CLONE_NEWCGROUP as u64, "CLONE_NEWCGROUP"),
];

/// System calls that signal a process named by their first argument, and `pidfd_open` (a
/// pidfd can be signalled): `EPERM` when it names PID 1, in gVisor's filter only. A warm call's
/// PID 1 is its call host (see `call_host`), which must outlive the call and end it when asked;
/// a program that stopped it would hang its call past its timeout, one that killed it would end
/// its call as killed. Under namespaces the kernel drops such signals from inside the PID
/// namespace (the host installs no handler) and Landlock scopes them too, so that filter stays
/// as short as it was (its length is paid at every program's attach); gVisor does neither. (A
/// process group is signalled by a negative number: under gVisor the program has its own
/// session, so no group it can name holds PID 1, and `kill(-1)` leaves PID 1 out everywhere.)
const SIGNAL_TARGETS: &[(i64, &str)] = &[
    (libc::SYS_kill, "kill"),
    (libc::SYS_tkill, "tkill"),
    (libc::SYS_tgkill, "tgkill"),
    (libc::SYS_rt_sigqueueinfo, "rt_sigqueueinfo"),
    (libc::SYS_rt_tgsigqueueinfo, "rt_tgsigqueueinfo"),
    (libc::SYS_pidfd_open, "pidfd_open"),
];

/// `ioctl` requests denied: pushing input into a terminal (TIOCSTI, TIOCLINUX) would let code type
/// commands into the user's shell if a terminal ever leaked in.
// The ioctl request type differs between architectures, hence the cast.
#[allow(clippy::unnecessary_cast)]
const DENIED_IOCTLS: &[(u64, &str)] = &[(libc::TIOCSTI as u64, "TIOCSTI"), (0x541C, "TIOCLINUX")];

/// Why a filter could not be built or installed.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("unsupported architecture for seccomp: {0}")]
    Arch(String),
    #[error("building the seccomp filter: {0}")]
    Build(String),
    #[error("installing the seccomp filter (seccomp): {0}")]
    Install(#[source] seccompiler::Error),
}

impl SeccompError {
    /// The errno of a failed install (`prctl` or `seccomp`), where there was one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            SeccompError::Install(err) => std::error::Error::source(err)
                .and_then(|source| source.downcast_ref::<std::io::Error>())
                .and_then(std::io::Error::raw_os_error),
            SeccompError::Arch(_) | SeccompError::Build(_) => None,
        }
    }
}

/// A compiled filter (one program), built once per sandbox and installed by each program
/// before its `execve` (or, split in two, by a call host and its programs: [`Stacked`]). (The
/// name is from when there were two.)
pub type Programs = BpfProgram;

// Classic BPF opcodes (linux/bpf_common.h), the only ones the filter uses.
/// `A = *(u32 *)(seccomp_data + k)`.
const LD_W_ABS: u16 = 0x20; // BPF_LD (0x00) | BPF_W (0x00) | BPF_ABS (0x20)
/// `if A == k` goto jt else jf.
const JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
/// `if A >= k` goto jt else jf (unsigned).
const JGE_K: u16 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
/// `if A & k != 0` goto jt else jf.
const JSET_K: u16 = 0x05 | 0x40; // BPF_JMP | BPF_JSET | BPF_K
/// return k (the verdict).
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

// Offsets in `struct seccomp_data` (linux/seccomp.h): `int nr; u32 arch; u64
// instruction_pointer; u64 args[6];`. The supported architectures are little-endian, so an
// argument's low 32 bits are at its offset.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;
const fn data_arg_low(index: u32) -> u32 {
    16 + 8 * index
}

/// The x32 ABI's syscalls are x86_64's with this bit set (and `arch` still `AUDIT_ARCH_X86_64`).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32 & libc::SECCOMP_RET_DATA);
const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | (libc::ENOSYS as u32 & libc::SECCOMP_RET_DATA);
const RET_KILL_PROCESS: u32 = libc::SECCOMP_RET_KILL_PROCESS;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// `AUDIT_ARCH_*` (linux/audit.h) of the architecture hookbox was built for: `EM_*` | 64-bit |
/// little-endian.
fn audit_arch() -> Result<u32, SeccompError> {
    const AUDIT_64BIT_LE: u32 = 0x8000_0000 | 0x4000_0000;
    match std::env::consts::ARCH {
        "x86_64" => Ok(62 | AUDIT_64BIT_LE),
        "aarch64" => Ok(183 | AUDIT_64BIT_LE),
        "riscv64" => Ok(243 | AUDIT_64BIT_LE),
        other => Err(SeccompError::Arch(other.to_owned())),
    }
}

/// What the filter answers for a syscall number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Allow,
    /// `EPERM`.
    Deny,
    /// `ENOSYS` (`clone3`).
    NoSys,
    /// `clone`: `EPERM` if its flags (argument 0) carry a namespace flag, else allowed.
    CloneFlags,
    /// `ioctl`: `EPERM` for the requests in [`DENIED_IOCTLS`] (argument 1), else allowed.
    IoctlRequest,
    /// [`SIGNAL_TARGETS`]: `EPERM` if argument 0 (a pid, as the kernel reads it: its low 32
    /// bits) is 1, else allowed.
    NotPidOne,
}

/// A syscall number as the filter compares it (below the x32 bit).
fn number(nr: i64) -> Result<u32, SeccompError> {
    u32::try_from(nr)
        .ok()
        .filter(|nr| *nr < X32_SYSCALL_BIT)
        .ok_or_else(|| SeccompError::Build(format!("syscall number {nr} out of range")))
}

/// The verdict for every syscall number, as sorted intervals covering `0..=u32::MAX`: each
/// `(start, verdict)` holds until the next start. Adjacent equal verdicts are merged.
fn intervals(allowed: &[i64], shield_pid_one: bool) -> Result<Vec<(u32, Verdict)>, SeccompError> {
    let mut special = BTreeMap::new();
    for (nr, _, _) in DENIED.iter().filter(|(nr, _, _)| !allowed.contains(nr)) {
        special.insert(number(*nr)?, Verdict::Deny);
    }
    let signals = SIGNAL_TARGETS
        .iter()
        .filter(|_| shield_pid_one)
        .map(|(nr, _)| (*nr, Verdict::NotPidOne));
    for (nr, verdict) in [
        (libc::SYS_clone3, Verdict::NoSys),
        (libc::SYS_clone, Verdict::CloneFlags),
        (libc::SYS_ioctl, Verdict::IoctlRequest),
    ]
    .into_iter()
    .chain(signals)
    {
        if special.insert(number(nr)?, verdict).is_some() {
            return Err(SeccompError::Build(format!("syscall {nr} listed twice")));
        }
    }
    Ok(covering(special))
}

/// The intervals covering `0..=u32::MAX` with the verdicts of `special` and `Allow` between
/// them, and (on x86_64) `Deny` over the x32 numbers.
fn covering(special: BTreeMap<u32, Verdict>) -> Vec<(u32, Verdict)> {
    let mut out: Vec<(u32, Verdict)> = Vec::new();
    let mut push = |start: u32, verdict: Verdict| match out.last() {
        Some((_, last)) if *last == verdict => {}
        _ => out.push((start, verdict)),
    };
    let mut next = 0u32;
    for (nr, verdict) in special {
        if nr > next {
            push(next, Verdict::Allow);
        }
        push(nr, verdict);
        next = nr + 1;
    }
    push(next, Verdict::Allow);
    if cfg!(target_arch = "x86_64") {
        // x32 system calls: all denied (the kernel returns ENOSYS for them where x32 is off).
        // The x86_64 numbers above stop short of the bit, so this splits the last interval.
        push(X32_SYSCALL_BIT, Verdict::Deny);
        push(X32_SYSCALL_BIT << 1, Verdict::Allow);
    }
    out
}

/// The instructions deciding one interval's verdict (the syscall number is in `A`).
fn leaf(verdict: Verdict) -> Result<Vec<sock_filter>, SeccompError> {
    Ok(match verdict {
        Verdict::Allow => vec![stmt(RET_K, RET_ALLOW)],
        Verdict::Deny => vec![stmt(RET_K, RET_EPERM)],
        Verdict::NoSys => vec![stmt(RET_K, RET_ENOSYS)],
        Verdict::CloneFlags => {
            // Every namespace flag is one bit of the low 32 bits, so "flags & flag == flag for
            // some flag" is "flags & (all of them) != 0", one JSET.
            let mut mask = 0u32;
            for (flag, name) in NAMESPACE_FLAGS {
                match u32::try_from(*flag) {
                    Ok(bit) if bit.count_ones() == 1 => mask |= bit,
                    _ => return Err(SeccompError::Build(format!("{name} is not one low bit"))),
                }
            }
            vec![
                stmt(LD_W_ABS, data_arg_low(0)), // A = low 32 bits of clone's flags
                jump(JSET_K, mask, 0, 1),        // any namespace flag? fall through : skip one
                stmt(RET_K, RET_EPERM),
                stmt(RET_K, RET_ALLOW),
            ]
        }
        Verdict::IoctlRequest => {
            // The kernel reads an ioctl's request as `unsigned int`: only its low 32 bits count.
            let count = DENIED_IOCTLS.len();
            let mut code = vec![stmt(LD_W_ABS, data_arg_low(1))]; // A = the request
            for (i, (request, name)) in DENIED_IOCTLS.iter().enumerate() {
                let request = u32::try_from(*request)
                    .map_err(|_| SeccompError::Build(format!("{name} is not 32 bits")))?;
                // Equal: jump over the rest of the comparisons and the allow, to the EPERM.
                let to_deny = u8::try_from(count - i)
                    .map_err(|_| SeccompError::Build("too many ioctl requests".into()))?;
                code.push(jump(JEQ_K, request, to_deny, 0));
            }
            code.push(stmt(RET_K, RET_ALLOW));
            code.push(stmt(RET_K, RET_EPERM));
            code
        }
        Verdict::NotPidOne => vec![
            stmt(LD_W_ABS, data_arg_low(0)), // A = the pid (the kernel reads an int)
            jump(JEQ_K, 1, 0, 1),            // PID 1? fall through : skip one
            stmt(RET_K, RET_EPERM),
            stmt(RET_K, RET_ALLOW),
        ],
    })
}

/// The binary search over `intervals` (non-empty; the syscall number is in `A`): one interval
/// is its leaf; more are split in half at the first start of the upper half, `A >= start`
/// jumping over the lower half's code to the upper half's. Returned in the order they run.
fn tree(intervals: &[(u32, Verdict)]) -> Result<Vec<sock_filter>, SeccompError> {
    match intervals {
        [] => return Err(SeccompError::Build("no interval".into())),
        [(_, verdict)] => return leaf(*verdict),
        _ => {}
    }
    let (lower, upper) = intervals.split_at(intervals.len() / 2);
    let lower = tree(lower)?;
    let upper_code = tree(upper)?;
    let over_lower = u8::try_from(lower.len())
        .map_err(|_| SeccompError::Build("a branch is longer than a jump reaches".into()))?;
    let mut code = Vec::with_capacity(1 + lower.len() + upper_code.len());
    code.push(jump(JGE_K, upper[0].0, over_lower, 0));
    code.extend(lower);
    code.extend(upper_code);
    Ok(code)
}

/// The filter of a sandbox under namespaces (the host kernel enforces it).
pub fn build() -> Result<Programs, SeccompError> {
    build_except(&[], false)
}

/// The deny list for calls inside gVisor, where `syslog` reads gVisor's own kernel log (which
/// is how a program can tell which kernel it runs on), never the host's; and where no signal
/// may name PID 1 (`SIGNAL_TARGETS`).
pub fn build_gvisor() -> Result<Programs, SeccompError> {
    build_except(&[libc::SYS_syslog], true)
}

/// The program, in the order it runs:
///
/// 1. `A = arch`; if it is the architecture hookbox was built for, skip the next; else
///    `KILL_PROCESS` (a foreign ABI, e.g. i386 through `int 0x80`, would give the numbers other
///    meanings). As the old filter did.
/// 2. `A = nr`, then the binary search ([`tree`]) over the intervals of numbers with one verdict
///    ([`intervals`]): at each node `A >= start of the upper half` jumps over the lower half.
///    Each leaf returns `ALLOW`, `ERRNO(EPERM)` or `ERRNO(ENOSYS)`, or, for `clone`, `ioctl`
///    and (`shield_pid_one`) the [`SIGNAL_TARGETS`], loads the argument and compares it (see
///    [`leaf`]). On x86_64 the x32 numbers
///    (`0x4000_0000..0x8000_0000`) are one more `EPERM` interval; the old filter allowed them,
///    so x32 binaries (where the kernel enables that ABI) bypassed the deny list.
fn build_except(allowed: &[i64], shield_pid_one: bool) -> Result<Programs, SeccompError> {
    program(&intervals(allowed, shield_pid_one)?)
}

/// The program deciding `intervals` (see [`build_except`]).
fn program(intervals: &[(u32, Verdict)]) -> Result<Programs, SeccompError> {
    let mut program = vec![
        stmt(LD_W_ABS, DATA_ARCH),        // A = arch
        jump(JEQ_K, audit_arch()?, 1, 0), // ours: skip the kill
        stmt(RET_K, RET_KILL_PROCESS),    // foreign architecture
        stmt(LD_W_ABS, DATA_NR),          // A = syscall number
    ];
    program.extend(tree(intervals)?);
    Ok(program)
}

/// The system calls of the deny list that a warm sandbox's call host (`call_host`) still makes
/// once it installed [`Stacked::host`] on itself: to renew its `/dev/shm` (`umount2`, `mount`)
/// and its IPC namespace (`unshare`), and to mount the new namespace's message queues where no
/// call sees them (`fsopen`, `fsconfig`, `fsmount`). [`Stacked::call`] denies them.
pub const HOST_NEEDS: &[i64] = &[
    libc::SYS_umount2,
    libc::SYS_mount,
    libc::SYS_unshare,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
];

/// [`build`]'s filter as two programs, for a process that confines itself once and starts many
/// programs: it installs `host` on itself, and each program it starts adds `call`. Stacked,
/// they answer every system call as [`build`]'s one program does (every filter runs and the
/// strictest verdict wins): `host` is that program with [`HOST_NEEDS`] allowed, `call` denies
/// [`HOST_NEEDS`] (with the same architecture check, and x32 denied) and allows the rest.
///
/// Why: the kernel's work at each attach (copying, checking and JIT-compiling the program,
/// and evaluating it for every system call number to cache the verdicts that hold whatever
/// the arguments) and when the last process under it exits grows with the program's length;
/// `call` is 21 instructions, against `build`'s 116 (on x86_64).
#[derive(Debug, Clone)]
pub struct Stacked {
    pub host: Programs,
    pub call: Programs,
}

/// [`Stacked`] for a sandbox under namespaces (the host kernel enforces it).
pub fn build_stacked() -> Result<Stacked, SeccompError> {
    let mut denied = BTreeMap::new();
    for nr in HOST_NEEDS {
        denied.insert(number(*nr)?, Verdict::Deny);
    }
    Ok(Stacked {
        host: build_except(HOST_NEEDS, false)?,
        call: program(&covering(denied))?,
    })
}

/// Installs the filter on the calling thread (sets `no_new_privs` first).
pub fn install(program: &Programs) -> Result<(), SeccompError> {
    seccompiler::apply_filter(program).map_err(SeccompError::Install)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    #[test]
    fn filter_builds_and_lists_each_required_syscall_with_a_reason() {
        assert!(build().is_ok());
        for required in [
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "io_uring_setup",
            "mount",
            "umount2",
            "pivot_root",
            "kexec_load",
            "bpf",
            "perf_event_open",
            "keyctl",
            "unshare",
            "setns",
        ] {
            let entry = DENIED.iter().find(|(_, name, _)| *name == required);
            assert!(
                entry.is_some_and(|(_, _, why)| !why.is_empty()),
                "{required} missing"
            );
        }
    }

    /// The filters as they were built before the binary search (two linear `seccompiler`
    /// programs: the deny list, then `clone3`), kept to compare against; with the
    /// [`SIGNAL_TARGETS`] rules added since.
    fn old_pair(allowed: &[i64], shield_pid_one: bool) -> Vec<BpfProgram> {
        let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
        let masked = |arg, len, bits| {
            SeccompRule::new(vec![
                SeccompCondition::new(arg, len, SeccompCmpOp::MaskedEq(bits), bits).unwrap(),
            ])
            .unwrap()
        };
        let equals = |arg, len, value| {
            SeccompRule::new(vec![
                SeccompCondition::new(arg, len, SeccompCmpOp::Eq, value).unwrap(),
            ])
            .unwrap()
        };
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED
            .iter()
            .filter(|(nr, _, _)| !allowed.contains(nr))
            .map(|(nr, _, _)| (*nr, Vec::new()))
            .collect();
        rules.insert(
            libc::SYS_clone,
            NAMESPACE_FLAGS
                .iter()
                .map(|(flag, _)| masked(0, SeccompCmpArgLen::Qword, *flag))
                .collect(),
        );
        rules.insert(
            libc::SYS_ioctl,
            DENIED_IOCTLS
                .iter()
                .map(|(request, _)| equals(1, SeccompCmpArgLen::Dword, *request))
                .collect(),
        );
        for (nr, _) in SIGNAL_TARGETS.iter().filter(|_| shield_pid_one) {
            rules.insert(*nr, vec![equals(0, SeccompCmpArgLen::Dword, 1)]);
        }
        let deny = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )
        .unwrap();
        let clone3 = SeccompFilter::new(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS as u32),
            arch,
        )
        .unwrap();
        vec![deny.try_into().unwrap(), clone3.try_into().unwrap()]
    }

    /// `struct seccomp_data` as the kernel lays it out (little-endian).
    fn data(nr: u32, arch: u32, args: [u64; 6]) -> [u8; 64] {
        let mut bytes = [0u8; 64];
        bytes[0..4].copy_from_slice(&nr.to_le_bytes());
        bytes[4..8].copy_from_slice(&arch.to_le_bytes());
        bytes[8..16].copy_from_slice(&0x7f00_dead_beefu64.to_le_bytes());
        for (i, arg) in args.iter().enumerate() {
            bytes[16 + 8 * i..24 + 8 * i].copy_from_slice(&arg.to_le_bytes());
        }
        bytes
    }

    /// A classic-BPF interpreter for the instructions seccomp accepts (loads of the data,
    /// ALU with constants, jumps, returns), strict: anything else, a jump out of the program, a
    /// load out of bounds or running off the end fails the test. Both the old pair and the new
    /// program run through it alike.
    fn run(program: &[sock_filter], data: &[u8; 64]) -> u32 {
        run_counted(program, data).0
    }

    /// [`run`], and how many instructions ran.
    fn run_counted(program: &[sock_filter], data: &[u8; 64]) -> (u32, usize) {
        let (mut a, mut x, mut pc, mut steps) = (0u32, 0u32, 0usize, 0usize);
        let mut mem = [0u32; 16];
        loop {
            let ins = &program[pc];
            steps += 1;
            let k = ins.k;
            let (class, op, src) = (ins.code & 0x07, ins.code & 0xf0, ins.code & 0x08);
            pc += 1;
            match class {
                // BPF_LD
                0x00 => match ins.code & 0xe0 {
                    0x20 => {
                        assert_eq!(ins.code & 0x18, 0x00, "only 32-bit loads");
                        let at = k as usize;
                        assert!(at.is_multiple_of(4) && at + 4 <= 64, "load at {at}");
                        a = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                    }
                    0x00 => a = k,               // BPF_IMM
                    0x60 => a = mem[k as usize], // BPF_MEM
                    0x80 => a = 64,              // BPF_LEN
                    mode => panic!("load mode {mode:#x}"),
                },
                // BPF_LDX
                0x01 => match ins.code & 0xe0 {
                    0x00 => x = k,
                    0x60 => x = mem[k as usize],
                    0x80 => x = 64,
                    mode => panic!("ldx mode {mode:#x}"),
                },
                0x02 => mem[k as usize] = a, // BPF_ST
                0x03 => mem[k as usize] = x, // BPF_STX
                // BPF_ALU
                0x04 => {
                    let operand = if src == 0 { k } else { x };
                    a = match op {
                        0x00 => a.wrapping_add(operand),
                        0x10 => a.wrapping_sub(operand),
                        0x20 => a.wrapping_mul(operand),
                        0x30 => a / operand,
                        0x40 => a | operand,
                        0x50 => a & operand,
                        0x60 => a << operand,
                        0x70 => a >> operand,
                        0x80 => a.wrapping_neg(),
                        0xa0 => a ^ operand,
                        _ => panic!("alu op {op:#x}"),
                    };
                }
                // BPF_JMP
                0x05 => {
                    let operand = if src == 0 { k } else { x };
                    let taken = match op {
                        0x00 => {
                            pc += k as usize;
                            assert!(pc < program.len(), "ja out of the program");
                            continue;
                        }
                        0x10 => a == operand,
                        0x20 => a > operand,
                        0x30 => a >= operand,
                        0x40 => a & operand != 0,
                        _ => panic!("jmp op {op:#x}"),
                    };
                    pc += usize::from(if taken { ins.jt } else { ins.jf });
                    assert!(pc < program.len(), "jump out of the program");
                }
                // BPF_RET
                0x06 => {
                    let ret = match ins.code & 0x18 {
                        0x00 => k,
                        0x10 => a,
                        rval => panic!("ret rval {rval:#x}"),
                    };
                    return (ret, steps);
                }
                // BPF_MISC: TAX / TXA
                0x07 => {
                    if ins.code & 0xf8 == 0 {
                        x = a
                    } else {
                        a = x
                    }
                }
                _ => unreachable!(),
            }
        }
    }

    /// What the kernel answers with several filters installed (`seccomp_run_filters`): every
    /// filter runs, the most recent first, and the lowest action (as a signed number) wins; on a
    /// tie the most recent filter's data.
    fn run_all(filters: &[BpfProgram], data: &[u8; 64]) -> u32 {
        let mut ret = libc::SECCOMP_RET_ALLOW;
        for filter in filters.iter().rev() {
            let cur = run(filter, data);
            let action = |v: u32| (v & libc::SECCOMP_RET_ACTION_FULL) as i32;
            if action(cur) < action(ret) {
                ret = cur;
            }
        }
        ret
    }

    fn arch() -> u32 {
        audit_arch().unwrap()
    }

    /// The argument cases: flags and requests the filter looks at, with and without high bits.
    fn arg_cases() -> Vec<[u64; 6]> {
        let mut cases = vec![[0; 6], [u64::MAX; 6]];
        let sigchld = libc::SIGCHLD as u64;
        let mut first_args = vec![
            sigchld,
            libc::CLONE_VM as u64 | libc::CLONE_FS as u64 | libc::CLONE_THREAD as u64,
            0xffff_ffff_0000_0000 | sigchld,
            libc::CLONE_NEWTIME as u64 | sigchld, // not a flag the filter names
            NAMESPACE_FLAGS.iter().fold(0, |all, (flag, _)| all | flag),
            // Pids: 1 (as the kernel reads it, with or without high bits), others.
            1,
            0xffff_ffff_0000_0001,
            0x1_0000_0000,
            2,
            u32::MAX as u64,
        ];
        for (flag, _) in NAMESPACE_FLAGS {
            first_args.extend([*flag, *flag | sigchld, *flag | 0xffff_ffff_0000_0000]);
        }
        #[allow(clippy::unnecessary_cast)]
        let requests = [
            libc::TIOCSTI as u64,
            0x541C,
            libc::TIOCSTI as u64 | 0x1_0000_0000,
            0x541C | 0xdead_0000_0000_0000,
            libc::TCGETS as u64,
            libc::FIONREAD as u64,
            0x541D,
        ];
        for first in first_args {
            cases.push([first, 0, 0, 0, 0, 0]);
        }
        for request in requests {
            cases.push([3, request, 0, 0, 0, 0]);
            cases.push([u64::MAX, request, 0, 0, 0, 0]);
        }
        cases
    }

    fn differential(allowed: &[i64], shield_pid_one: bool, new: &BpfProgram) {
        let old = old_pair(allowed, shield_pid_one);
        let native = arch();
        let mut checked = 0;
        for nr in 0..=1023u32 {
            for args in arg_cases() {
                let input = data(nr, native, args);
                assert_eq!(
                    run(new, &input),
                    run_all(&old, &input),
                    "syscall {nr} with {args:x?}"
                );
                checked += 1;
            }
        }
        assert!(checked > 1024 * 20);
        // Numbers past the table and the edges of the tree's intervals, all allowed before and
        // now; on x86_64 the x32 range is the one difference (see below).
        for nr in [1024, 0x3fff_ffff, 0x8000_0000, 0xffff_fffe, u32::MAX] {
            let input = data(nr, native, [0; 6]);
            assert_eq!(run(new, &input), run_all(&old, &input), "syscall {nr:#x}");
            assert_eq!(run(new, &input), libc::SECCOMP_RET_ALLOW, "syscall {nr:#x}");
        }
        // A foreign architecture (i386, aarch64 or x86_64, whichever is not ours): killed, by
        // both, whatever the number.
        for foreign in [0x4000_0003u32, 0xc000_00b7, 0xc000_003e, 0] {
            if foreign == native {
                continue;
            }
            for nr in (0..=1023u32).chain([0x4000_0000 | 39, u32::MAX]) {
                let input = data(nr, foreign, [0; 6]);
                assert_eq!(run(new, &input), libc::SECCOMP_RET_KILL_PROCESS);
                assert_eq!(run_all(&old, &input), libc::SECCOMP_RET_KILL_PROCESS);
            }
        }
    }

    #[test]
    fn one_binary_search_filter_decides_every_syscall_as_the_old_pair_did() {
        differential(&[], false, &build().unwrap());
    }

    #[test]
    fn the_gvisor_filter_decides_every_syscall_as_the_old_gvisor_pair_did() {
        let new = build_gvisor().unwrap();
        differential(&[libc::SYS_syslog], true, &new);
        let input = data(libc::SYS_syslog as u32, arch(), [0; 6]);
        assert_eq!(run(&new, &input), libc::SECCOMP_RET_ALLOW);
    }

    /// The stacked pair answers exactly as the one program: every number (x32's and the
    /// table's edges included) with every argument case, and a foreign architecture; the host
    /// part lets the host's own calls through; the call part is short.
    #[test]
    fn the_stacked_pair_decides_every_syscall_as_the_one_program_does() {
        let one = build().unwrap();
        let Stacked { host, call } = build_stacked().unwrap();
        let stacked = [host.clone(), call.clone()];
        let native = arch();
        let numbers = (0..=1023u32)
            .chain((0..=1023u32).map(|nr| nr | X32_SYSCALL_BIT))
            .chain([1024, 0x3fff_ffff, 0x7fff_ffff, 0x8000_0000, u32::MAX]);
        let mut checked = 0;
        for nr in numbers {
            for args in arg_cases() {
                let input = data(nr, native, args);
                assert_eq!(
                    run_all(&stacked, &input),
                    run(&one, &input),
                    "syscall {nr:#x} with {args:x?}"
                );
                checked += 1;
            }
        }
        assert!(checked > 2048 * 20);
        for foreign in [0x4000_0003u32, 0xc000_00b7, 0xc000_003e, 0] {
            if foreign == native {
                continue;
            }
            for nr in [0, 26, 101, 0x4000_0000 | 39, u32::MAX] {
                let input = data(nr, foreign, [0; 6]);
                assert_eq!(run(&call, &input), libc::SECCOMP_RET_KILL_PROCESS);
                assert_eq!(run_all(&stacked, &input), libc::SECCOMP_RET_KILL_PROCESS);
            }
        }
        for nr in HOST_NEEDS {
            let input = data(*nr as u32, native, [0; 6]);
            assert_eq!(run(&host, &input), RET_ALLOW, "the host's {nr}");
            assert_eq!(run(&call, &input), RET_EPERM, "a call's {nr}");
        }
        assert!(
            call.len() * 5 < one.len(),
            "the call part: {} instructions, the one program {}",
            call.len(),
            one.len()
        );
    }

    #[test]
    fn verdicts_of_the_named_cases() {
        let program = build().unwrap();
        let native = arch();
        let verdict = |nr: i64, args: [u64; 6]| run(&program, &data(nr as u32, native, args));
        for (nr, name, _) in DENIED {
            assert_eq!(verdict(*nr, [0; 6]), RET_EPERM, "{name}");
        }
        assert_eq!(verdict(libc::SYS_clone3, [0; 6]), RET_ENOSYS);
        let sigchld = libc::SIGCHLD as u64;
        assert_eq!(
            verdict(libc::SYS_clone, [sigchld, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        for (flag, name) in NAMESPACE_FLAGS {
            assert_eq!(
                verdict(libc::SYS_clone, [flag | sigchld, 0, 0, 0, 0, 0]),
                RET_EPERM,
                "{name}"
            );
        }
        for (request, name) in DENIED_IOCTLS {
            assert_eq!(
                verdict(libc::SYS_ioctl, [0, *request, 0, 0, 0, 0]),
                RET_EPERM,
                "{name}"
            );
        }
        #[allow(clippy::unnecessary_cast)]
        let tcgets = libc::TCGETS as u64;
        assert_eq!(verdict(libc::SYS_ioctl, [0, tcgets, 0, 0, 0, 0]), RET_ALLOW);
        // Signals naming PID 1: refused under gVisor only (see `SIGNAL_TARGETS`).
        let gvisor = build_gvisor().unwrap();
        let gvisor_verdict = |nr: i64, args: [u64; 6]| run(&gvisor, &data(nr as u32, native, args));
        let usr1 = libc::SIGUSR1 as u64;
        for (nr, name) in SIGNAL_TARGETS {
            for pid_one in [1, 0xffff_ffff_0000_0001] {
                let args = [pid_one, usr1, 0, 0, 0, 0];
                assert_eq!(gvisor_verdict(*nr, args), RET_EPERM, "{name}");
                assert_eq!(verdict(*nr, args), RET_ALLOW, "{name}");
            }
            // Any other process, the caller's group (0), everything (-1), a group (-2).
            for other in [2, 0, u64::MAX, u64::MAX - 1] {
                let args = [other, usr1, 0, 0, 0, 0];
                assert_eq!(gvisor_verdict(*nr, args), RET_ALLOW, "{name}");
            }
        }
        for allowed in [
            libc::SYS_read,
            libc::SYS_getpid,
            libc::SYS_execve,
            libc::SYS_openat,
        ] {
            assert_eq!(verdict(allowed, [0; 6]), RET_ALLOW, "{allowed}");
        }
    }

    /// The old pair let x32 system calls through (their numbers matched no rule), so on a kernel
    /// with x32 enabled an x32 binary could call `ptrace`, `mount` or `unshare`. Denied now.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_syscalls_bypassing_the_deny_list_are_denied() {
        let program = build().unwrap();
        let old = old_pair(&[], false);
        for nr in (0..=1023u32)
            .map(|nr| nr | X32_SYSCALL_BIT)
            .chain([0x7fff_ffff])
        {
            let input = data(nr, arch(), [0; 6]);
            assert_eq!(run(&program, &input), RET_EPERM, "x32 syscall {nr:#x}");
            assert_eq!(
                run_all(&old, &input),
                libc::SECCOMP_RET_ALLOW,
                "old, {nr:#x}"
            );
        }
    }

    #[test]
    fn the_search_is_shallow() {
        // Instructions run per syscall: logarithmic in the list for the new program, against
        // the old pair's linear walk (which every allowed syscall paid in full).
        let program = build().unwrap();
        let old = old_pair(&[], false);
        let native = arch();
        let (mut new_deepest, mut new_total, mut old_total) = (0, 0, 0);
        for nr in 0..=1023u32 {
            let input = data(nr, native, [0; 6]);
            let (_, steps) = run_counted(&program, &input);
            new_deepest = new_deepest.max(steps);
            new_total += steps;
            old_total += old.iter().map(|f| run_counted(f, &input).1).sum::<usize>();
        }
        assert!(
            new_deepest <= 16,
            "{new_deepest} instructions on the longest path"
        );
        assert!(
            new_total * 5 < old_total,
            "{new_total} instructions for 1024 numbers, the old pair {old_total}"
        );
        assert!(program.len() < 200, "{} instructions", program.len());
    }
}
