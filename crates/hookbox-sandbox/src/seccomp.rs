//! The seccomp filter applied to every sandboxed process: a deny list, each syscall with why.
//!
//! Default allow, listed syscalls fail with `EPERM` (so programs get a clean error rather than a
//! kill). `clone3` fails with `ENOSYS` in a second filter, because its flags live in memory that
//! seccomp cannot inspect; libc then falls back to `clone`, whose namespace flags are checked.
//!
//! This module builds and installs filters; it must not decide anything else about the sandbox.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

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

fn arch() -> Result<TargetArch, SeccompError> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::Arch(std::env::consts::ARCH.to_owned()))
}

fn masked(arg: u8, len: SeccompCmpArgLen, bits: u64) -> Result<SeccompRule, SeccompError> {
    let condition = SeccompCondition::new(arg, len, SeccompCmpOp::MaskedEq(bits), bits)
        .map_err(|e| SeccompError::Build(e.to_string()))?;
    SeccompRule::new(vec![condition]).map_err(|e| SeccompError::Build(e.to_string()))
}

fn equals(arg: u8, len: SeccompCmpArgLen, value: u64) -> Result<SeccompRule, SeccompError> {
    let condition = SeccompCondition::new(arg, len, SeccompCmpOp::Eq, value)
        .map_err(|e| SeccompError::Build(e.to_string()))?;
    SeccompRule::new(vec![condition]).map_err(|e| SeccompError::Build(e.to_string()))
}

/// The two BPF programs: the `EPERM` deny list and the `clone3` → `ENOSYS` filter.
/// The compiled filters, built once per sandbox and installed by each program's init.
pub type Programs = [BpfProgram; 2];

pub fn build() -> Result<Programs, SeccompError> {
    build_except(&[])
}

/// The deny list for calls inside gVisor, where `syslog` reads gVisor's own kernel log (which
/// is how a program can tell which kernel it runs on), never the host's.
pub fn build_gvisor() -> Result<Programs, SeccompError> {
    build_except(&[libc::SYS_syslog])
}

fn build_except(allowed: &[i64]) -> Result<Programs, SeccompError> {
    let arch = arch()?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED
        .iter()
        .filter(|(nr, _, _)| !allowed.contains(nr))
        .map(|(nr, _, _)| (*nr, Vec::new()))
        .collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|(flag, _)| masked(0, SeccompCmpArgLen::Qword, *flag))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    let ioctl_rules = DENIED_IOCTLS
        .iter()
        .map(|(request, _)| equals(1, SeccompCmpArgLen::Dword, *request))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, ioctl_rules);
    let deny = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| SeccompError::Build(e.to_string()))?;
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(|e| SeccompError::Build(e.to_string()))?;
    let deny: BpfProgram = deny
        .try_into()
        .map_err(|e: seccompiler::BackendError| SeccompError::Build(e.to_string()))?;
    let clone3: BpfProgram = clone3
        .try_into()
        .map_err(|e: seccompiler::BackendError| SeccompError::Build(e.to_string()))?;
    Ok([deny, clone3])
}

/// Installs both filters on the calling thread (sets `no_new_privs` first).
pub fn install(programs: &Programs) -> Result<(), SeccompError> {
    for program in programs {
        seccompiler::apply_filter(program).map_err(SeccompError::Install)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
