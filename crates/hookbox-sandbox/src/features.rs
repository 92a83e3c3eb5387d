//! Kernel feature detection: which primitives the sandbox needs and which are missing, each named
//! so that a refusal tells the user what to enable. This module only probes; the decision to
//! refuse or to run without isolation belongs to the caller.

use std::fmt;

/// A kernel feature the sandbox relies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    UserNamespaces,
    Landlock,
    Seccomp,
    Openat2,
    /// Only needed when hookbox runs as root, where `RLIMIT_NPROC` does not apply.
    PidsCgroup,
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Feature::UserNamespaces => {
                "user namespaces for unprivileged uids (user.max_user_namespaces > 0, kernel.unprivileged_userns_clone = 1, kernel.apparmor_restrict_unprivileged_userns = 0); sandboxes create theirs as the environment's unprivileged uid"
            }
            Feature::Landlock => "Landlock (CONFIG_SECURITY_LANDLOCK and landlock in lsm=)",
            Feature::Seccomp => "seccomp filters (CONFIG_SECCOMP_FILTER)",
            Feature::Openat2 => "openat2(2) (Linux 5.6+)",
            Feature::PidsCgroup => {
                "a writable pids cgroup controller (cgroup v1 /sys/fs/cgroup/pids or v2 with pids delegated), needed to cap processes when hookbox runs as root"
            }
        })
    }
}

/// Probes the kernel-wide features (the pids cgroup is checked per environment).
pub fn missing() -> Vec<Feature> {
    let mut missing = Vec::new();
    let max_userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    // The launcher creates the user namespace after dropping to the environment's unprivileged
    // uid, so unprivileged user namespaces must be allowed even when hookbox runs as root.
    let sysctl_is = |path: &str, value: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim() == value)
            .unwrap_or(false)
    };
    let unprivileged_ok = !sysctl_is("/proc/sys/kernel/unprivileged_userns_clone", "0")
        && !sysctl_is(
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
        );
    if max_userns == 0 || !unprivileged_ok {
        missing.push(Feature::UserNamespaces);
    }
    // SAFETY: landlock_create_ruleset with a null attr, size 0 and the VERSION flag only returns
    // the ABI version (or an error); it creates nothing.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    if abi < 1 {
        missing.push(Feature::Landlock);
    }
    // SAFETY: PR_GET_SECCOMP only reads the calling thread's seccomp mode.
    if unsafe { libc::prctl(libc::PR_GET_SECCOMP) } < 0 {
        missing.push(Feature::Seccomp);
    }
    if matches!(
        rustix::fs::openat2(
            rustix::fs::CWD,
            "/",
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
            rustix::fs::ResolveFlags::empty(),
        ),
        Err(rustix::io::Errno::NOSYS)
    ) {
        missing.push(Feature::Openat2);
    }
    missing
}
