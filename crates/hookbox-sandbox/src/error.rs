//! Why a program did not run in a sandbox, typed: the [`Stage`] of construction (or of a warm
//! call's hand-over) that failed, the errno where the kernel gave one, and the launcher's own
//! words for people. [`SandboxError::is_transient`] answers "may another try succeed" from
//! these, never from a message.
//!
//! The launcher runs in another process (and under gVisor, in another kernel): it reports a
//! failure as one [`LaunchFailure`] line on its status channel, or as a message on a warm call's
//! reply socket ([`LaunchFailure::encode`]); the host side reads it back with
//! [`LaunchFailure::decode`] (see [`crate::status`]).

use std::path::PathBuf;

use hookbox_process::{ProcessError, is_momentary};
use serde::{Deserialize, Serialize};

use crate::seccomp;
use crate::spec::{FAIL_MARK, SPEC_FD, WARM_FD};

/// The step of building a sandbox, or of starting a call in a warm one, that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Reading the launch spec (the memfd at fd 3, or the one sent on the socket there to a
    /// launcher started early; a warm call's; gVisor's first message).
    Spec,
    /// Arming the parent-death signal, or finding the parent already gone.
    Parent,
    /// Joining the environment's cgroups.
    Cgroup,
    /// Joining the environment's network namespace (`setns`).
    JoinNetwork,
    /// Opening and staging the host paths an unprivileged sandbox binds (under gVisor: the
    /// wrapper's read-only staging).
    Staging,
    /// Becoming the sandbox's unprivileged host uid and gid.
    IdentityDrop,
    /// Creating the user, mount, PID, IPC, UTS (and network) namespaces (`unshare`), and
    /// handing the new network namespace to the sandbox's init.
    Namespaces,
    /// Writing the user namespace's id maps.
    IdMaps,
    /// Forking the sandbox's init (or gVisor's egress relay).
    Fork,
    /// `setsid`.
    Session,
    /// A mount: the root tmpfs, host binds, `/dev`, `/proc`, staging.
    Mount,
    /// Mountpoints and generated files in the new root.
    Prepare,
    /// `pivot_root` into the new root.
    PivotRoot,
    /// Setting the hostname (UTS namespace).
    Hostname,
    /// Bringing up loopback in a fresh network namespace (under gVisor: the egress relay's
    /// listener).
    Loopback,
    /// Changing to the working directory.
    Chdir,
    /// Resource limits (`setrlimit`).
    Limits,
    /// Dropping capabilities from the bounding set.
    Capabilities,
    /// Landlock.
    Landlock,
    /// Building or installing the seccomp filters.
    Seccomp,
    /// Starting the program itself (`posix_spawn`, `execve`), or an argument with a NUL.
    Exec,
    /// Waiting for the sandbox's init or program.
    Wait,
    /// A warm sandbox's socket protocol, on either side: sending a call, the sandbox not ready
    /// in time, the sandbox gone.
    WarmSocket,
    /// Cloning a warm call into its own PID, mount and IPC namespaces.
    CallClone,
    /// gVisor: `runsc` itself (not usable, or what it reported), the OCI bundle, the wrapper.
    Runsc,
    /// A report that named no stage (text only, such as from an older launcher).
    Unknown,
}

/// A failed stage, as the launcher (or the host side of a warm sandbox) reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct LaunchFailure {
    pub stage: Stage,
    /// The errno of the failed system call, where there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    /// What failed, for people (paths, the syscall, what the kernel must allow).
    pub message: String,
}

impl LaunchFailure {
    pub fn new(stage: Stage, errno: Option<i32>, message: impl Into<String>) -> Self {
        Self {
            stage,
            errno,
            message: message.into(),
        }
    }

    /// Whether building the sandbox (or starting the call) again may succeed. Nothing ran when
    /// any stage failed, so another try is always safe; it is only worth it where the kernel
    /// said "not now".
    pub fn is_transient(&self) -> bool {
        let momentary = self.errno.is_some_and(is_momentary);
        match self.stage {
            // The kernel creates something per launch here (a namespace, a task, a mount):
            // EAGAIN, ENOMEM or ENOSPC mean a limit is reached for now (a pids cgroup, the user
            // namespace or mount count, memory pressure).
            Stage::Namespaces | Stage::Fork | Stage::CallClone | Stage::Mount | Stage::Exec => {
                momentary
            }
            // The same spec on the same host fails the same way again (a missing path, a
            // kernel without Landlock, a seccomp or capability refusal, a full root tmpfs), or
            // the failure says nothing about resources.
            Stage::Spec
            | Stage::Parent
            | Stage::Cgroup
            | Stage::JoinNetwork
            | Stage::Staging
            | Stage::IdentityDrop
            | Stage::IdMaps
            | Stage::Session
            | Stage::Prepare
            | Stage::PivotRoot
            | Stage::Hostname
            | Stage::Loopback
            | Stage::Chdir
            | Stage::Limits
            | Stage::Capabilities
            | Stage::Landlock
            | Stage::Seccomp
            | Stage::Wait
            | Stage::Runsc
            | Stage::Unknown => false,
            // The warm sandbox is gone or broken: the runner builds a new one by itself, once.
            Stage::WarmSocket => false,
        }
    }

    /// The line (or socket message) that carries this failure from the launcher to hookbox:
    /// [`FAIL_MARK`], its JSON, a newline.
    pub fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_string(self).unwrap_or_else(|_| {
            // A struct of a unit enum, an integer and a string always serialises; keep the
            // stage anyway should it not.
            format!(r#"{{"stage":"unknown","message":{:?}}}"#, self.message)
        });
        format!("{FAIL_MARK}{json}\n").into_bytes()
    }

    /// Reads what [`Self::encode`] wrote; `None` when `text` is not such a line.
    pub fn decode(text: &str) -> Option<Self> {
        let json = text.strip_prefix(FAIL_MARK)?;
        serde_json::from_str(json.trim_end()).ok()
    }
}

/// A step of sandbox construction that failed, inside the launcher (see [`crate::launcher`]);
/// it reaches hookbox as a [`LaunchFailure`] ([`LaunchError::failure`]).
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("reading the launch spec from fd {SPEC_FD}: {0}")]
    ReadSpec(String),
    #[error("arming the parent-death signal (prctl PR_SET_PDEATHSIG): {0}")]
    Pdeathsig(nix::Error),
    #[error("the parent process exited before the sandbox started")]
    ParentGone,
    #[error("joining cgroup {path}: {source}")]
    Cgroup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("joining the environment's network namespace (setns CLONE_NEWNET): {0}")]
    JoinNetwork(nix::Error),
    #[error(
        "creating namespaces (unshare user/mount/pid/ipc/uts): {0}; the kernel must allow user namespaces (user.max_user_namespaces > 0)"
    )]
    Unshare(nix::Error),
    #[error(
        "creating the sandbox's network namespace (unshare net): {0}; the kernel must allow network namespaces (user.max_net_namespaces > 0)"
    )]
    NetworkNamespace(nix::Error),
    #[error("handing the sandbox's new network namespace to its init: {0}")]
    NetworkHandover(std::io::Error),
    #[error("writing {file} (user namespace id maps): {source}")]
    IdMap {
        file: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("fork: {0}")]
    Fork(nix::Error),
    #[error("staging {path} for the unprivileged sandbox: {source}")]
    Stage {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("becoming the sandbox's unprivileged host identity (uid {uid}, gid {gid}): {source}")]
    DropIdentity {
        uid: u32,
        gid: u32,
        #[source]
        source: nix::Error,
    },
    #[error("setsid: {0}")]
    Setsid(nix::Error),
    #[error("mount {what} at {target}: {source}")]
    Mount {
        what: String,
        target: String,
        #[source]
        source: nix::Error,
    },
    #[error("preparing {path} in the new root: {source}")]
    Prepare {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("pivot_root: {0}")]
    PivotRoot(nix::Error),
    #[error("sethostname (UTS namespace): {0}")]
    Hostname(nix::Error),
    #[error("bringing up the loopback interface: {0}")]
    Loopback(std::io::Error),
    #[error("chdir {path}: {source}")]
    Chdir {
        path: String,
        #[source]
        source: nix::Error,
    },
    #[error("setrlimit {resource}: {source}")]
    Rlimit {
        resource: &'static str,
        #[source]
        source: nix::Error,
    },
    #[error("Landlock: {0}; hookbox needs Landlock (CONFIG_SECURITY_LANDLOCK, lsm=landlock)")]
    Landlock(String),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
    #[error("dropping capability {cap} from the bounding set: {source}")]
    CapDrop {
        cap: i32,
        #[source]
        source: std::io::Error,
    },
    #[error("the program or an argument contains a NUL byte")]
    Nul,
    #[error("waiting for the sandbox: {0}")]
    Wait(nix::Error),
    #[error("the warm sandbox's request socket (fd {WARM_FD}): {0}")]
    WarmSocket(std::io::Error),
}

impl LaunchError {
    /// The stage of construction this error belongs to.
    pub fn stage(&self) -> Stage {
        match self {
            LaunchError::ReadSpec(_) => Stage::Spec,
            LaunchError::Pdeathsig(_) | LaunchError::ParentGone => Stage::Parent,
            LaunchError::Cgroup { .. } => Stage::Cgroup,
            LaunchError::JoinNetwork(_) => Stage::JoinNetwork,
            LaunchError::Unshare(_)
            | LaunchError::NetworkNamespace(_)
            | LaunchError::NetworkHandover(_) => Stage::Namespaces,
            LaunchError::IdMap { .. } => Stage::IdMaps,
            LaunchError::Fork(_) => Stage::Fork,
            LaunchError::Stage { .. } => Stage::Staging,
            LaunchError::DropIdentity { .. } => Stage::IdentityDrop,
            LaunchError::Setsid(_) => Stage::Session,
            LaunchError::Mount { .. } => Stage::Mount,
            LaunchError::Prepare { .. } => Stage::Prepare,
            LaunchError::PivotRoot(_) => Stage::PivotRoot,
            LaunchError::Hostname(_) => Stage::Hostname,
            LaunchError::Loopback(_) => Stage::Loopback,
            LaunchError::Chdir { .. } => Stage::Chdir,
            LaunchError::Rlimit { .. } => Stage::Limits,
            LaunchError::Landlock(_) => Stage::Landlock,
            LaunchError::Seccomp(_) => Stage::Seccomp,
            LaunchError::CapDrop { .. } => Stage::Capabilities,
            LaunchError::Nul => Stage::Exec,
            LaunchError::Wait(_) => Stage::Wait,
            LaunchError::WarmSocket(_) => Stage::WarmSocket,
        }
    }

    /// The errno of the failed system call, where there was one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            LaunchError::Pdeathsig(e)
            | LaunchError::JoinNetwork(e)
            | LaunchError::Unshare(e)
            | LaunchError::NetworkNamespace(e)
            | LaunchError::Fork(e)
            | LaunchError::DropIdentity { source: e, .. }
            | LaunchError::Setsid(e)
            | LaunchError::Mount { source: e, .. }
            | LaunchError::PivotRoot(e)
            | LaunchError::Hostname(e)
            | LaunchError::Chdir { source: e, .. }
            | LaunchError::Rlimit { source: e, .. }
            | LaunchError::Wait(e) => Some(*e as i32),
            LaunchError::Cgroup { source: e, .. }
            | LaunchError::IdMap { source: e, .. }
            | LaunchError::Stage { source: e, .. }
            | LaunchError::Prepare { source: e, .. }
            | LaunchError::Loopback(e)
            | LaunchError::NetworkHandover(e)
            | LaunchError::CapDrop { source: e, .. }
            | LaunchError::WarmSocket(e) => e.raw_os_error(),
            LaunchError::Seccomp(e) => e.errno(),
            LaunchError::ReadSpec(_)
            | LaunchError::ParentGone
            | LaunchError::Landlock(_)
            | LaunchError::Nul => None,
        }
    }

    /// What hookbox is told: the stage, the errno and this error's message.
    pub fn failure(&self) -> LaunchFailure {
        LaunchFailure::new(self.stage(), self.errno(), self.to_string())
    }
}

/// Why a program did not run in a sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A stage of construction or of a call's hand-over failed.
    #[error(transparent)]
    Launch(#[from] LaunchFailure),
    /// Starting the launcher (or a descriptor its hand-over needed), or waiting for it, failed.
    #[error(transparent)]
    Process(#[from] ProcessError),
}

impl SandboxError {
    /// A host-side failure to prepare or start a launch (a memfd, a pipe, a socket, the spawn).
    pub fn spawn(err: impl Into<std::io::Error>) -> Self {
        SandboxError::Process(ProcessError::Spawn(err.into()))
    }

    /// The stage that failed, for a failure inside the sandbox's construction.
    pub fn stage(&self) -> Option<Stage> {
        match self {
            SandboxError::Launch(failure) => Some(failure.stage),
            SandboxError::Process(_) => None,
        }
    }

    /// The errno of the failure, where there is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            SandboxError::Launch(failure) => failure.errno,
            SandboxError::Process(err) => err.errno(),
        }
    }

    /// Whether launching again may succeed (see [`LaunchFailure::is_transient`] and
    /// [`ProcessError::is_transient`]).
    pub fn is_transient(&self) -> bool {
        match self {
            SandboxError::Launch(failure) => failure.is_transient(),
            SandboxError::Process(err) => err.is_transient(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_survives_its_line_and_other_text_is_not_one() {
        let failure = LaunchFailure::new(
            Stage::Namespaces,
            Some(libc::ENOSPC),
            "creating namespaces: ENOSPC: No space left on device\nsecond line",
        );
        let line = String::from_utf8(failure.encode()).unwrap();
        assert!(line.starts_with(FAIL_MARK) && line.ends_with('\n'));
        assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
        assert_eq!(LaunchFailure::decode(&line), Some(failure));
        assert_eq!(LaunchFailure::decode("runsc: container failed\n"), None);
        assert_eq!(LaunchFailure::decode(&format!("{FAIL_MARK}not json")), None);
    }

    #[test]
    fn transient_means_a_momentary_errno_where_the_kernel_allocates() {
        for stage in [
            Stage::Namespaces,
            Stage::Fork,
            Stage::CallClone,
            Stage::Mount,
        ] {
            for errno in [libc::EAGAIN, libc::ENOMEM, libc::ENOSPC] {
                assert!(LaunchFailure::new(stage, Some(errno), "").is_transient());
            }
            assert!(!LaunchFailure::new(stage, Some(libc::EPERM), "").is_transient());
            assert!(!LaunchFailure::new(stage, None, "").is_transient());
        }
        for stage in [
            Stage::Landlock,
            Stage::Prepare,
            Stage::WarmSocket,
            Stage::Unknown,
        ] {
            assert!(!LaunchFailure::new(stage, Some(libc::EAGAIN), "").is_transient());
        }
        let spawn = SandboxError::spawn(std::io::Error::from_raw_os_error(libc::EAGAIN));
        assert!(spawn.is_transient());
        assert_eq!(spawn.stage(), None);
        assert_eq!(spawn.errno(), Some(libc::EAGAIN));
    }
}
