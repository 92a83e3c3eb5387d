//! The launch spec: everything the launcher needs to build one sandbox and exec one program.
//!
//! The spec travels from the hookbox process to the launcher as JSON in a sealed memfd at
//! [`SPEC_FD`] (or sent as one on a socket there, to a launcher started before its spec:
//! [`crate::early`]), never in environment variables (those would leak into the sandbox) nor argv
//! (size limits, visible in `ps`). This module owns the shape only; it must not do I/O.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The sandbox's `/etc/resolv.conf`: a resolver on loopback where nothing answers, so DNS is
/// not a way out (names are resolved by the egress proxy).
pub const SANDBOX_RESOLV_CONF: &str = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n";

/// The fd number on which the launcher finds the JSON spec.
pub const SPEC_FD: i32 = 3;
/// The fd number on which the launcher reports a setup or exec failure (a [`FAIL_MARK`] line,
/// see `crate::status`), then exits with [`EXIT_SETUP_FAILED`] or [`EXIT_EXEC_FAILED`]. Closed
/// on a successful exec, so silence means the program ran.
pub const STATUS_FD: i32 = 4;
/// The fd number of an inherited network namespace, when [`Network::Join`] names it.
pub const NETNS_FD: i32 = 5;

/// The fd number of a warm sandbox's request socket, when [`LaunchSpec::warm`] is set.
pub const WARM_FD: i32 = 6;

/// The first byte of a stage-timing line on [`STATUS_FD`] (never part of a failure report).
pub const STAGE_MARK: char = '\u{1f}';
/// The first byte of the line with which a warm sandbox's call reports its program's exit
/// status (`<mark><code>\n`) on its status channel, just before it ends.
pub const EXIT_MARK: char = '\u{1e}';

/// The first byte of the line with which the launcher reports a failure: the stage, the errno
/// and the message as JSON (`crate::error::LaunchFailure`). Also the first byte of a warm call's
/// reply when the call could not be started.
pub const FAIL_MARK: char = '\u{1d}';

/// The launcher's exit status when building the sandbox failed.
pub const EXIT_SETUP_FAILED: i32 = 125;
/// The launcher's exit status when the program could not be executed.
pub const EXIT_EXEC_FAILED: i32 = 127;

/// How much isolation to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// Namespaces, pivot_root, Landlock, seccomp, limits. The only mode for real use.
    Full,
    /// No isolation at all: the program runs on the host with the tree's `workspace` as cwd.
    /// Only reachable through `--insecure-no-isolation`, which warns on every run.
    InsecureNone,
}

/// Which kernel the sandbox's programs talk to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeKind {
    /// The host's kernel, behind namespaces, Landlock and seccomp (built by the launcher).
    #[default]
    Namespaces,
    /// gVisor's application kernel (`runsc`), itself confined by its own seccomp policy and the
    /// namespaces and cgroup hookbox puts around it. Inside, the launcher only serves calls: the
    /// root is built by runsc from an OCI bundle, Landlock does not exist (ENOSYS), and the
    /// seccomp deny list is enforced by gVisor's own seccomp.
    Gvisor,
}

impl RuntimeKind {
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Namespaces => "namespaces",
            RuntimeKind::Gvisor => "gvisor",
        }
    }
}

impl std::fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RuntimeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "namespaces" => Ok(RuntimeKind::Namespaces),
            "gvisor" => Ok(RuntimeKind::Gvisor),
            other => Err(format!(
                "unknown runtime `{other}` (expected `namespaces` or `gvisor`)"
            )),
        }
    }
}

/// Which network namespace the sandbox lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Network {
    /// A fresh namespace per sandbox (shared by a warm sandbox's calls), with only `lo` up.
    Isolated,
    /// Join the namespace whose fd the launcher inherits at [`NETNS_FD`]. The egress issue
    /// creates one namespace per environment (with its proxy listening inside) and passes it
    /// here, so every sandbox of the environment shares it.
    Join,
}

/// A directory of the host bound into the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// Host path.
    pub source: PathBuf,
    /// Absolute sandbox path (top-level, such as `/workspace`).
    pub target: String,
    pub writable: bool,
}

/// A host file bound read-only at an absolute sandbox path (created on the root tmpfs if
/// missing; an existing file, even in a read-only bind, is covered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileBind {
    /// Host path.
    pub source: PathBuf,
    /// Absolute sandbox path, under `/etc` (the egress CA bundle and its overlays).
    pub target: String,
}

/// Resource limits applied to the sandbox's processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Address-space cap per process (`RLIMIT_AS`), when no memory cgroup caps the environment.
    pub address_space_bytes: Option<u64>,
    /// `RLIMIT_NPROC`, when no pids cgroup caps the environment (ineffective for host root).
    pub nproc: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
    /// `RLIMIT_FSIZE`: largest file a process may write.
    pub file_size_bytes: Option<u64>,
}

/// The host uid and gid that root inside the sandbox maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
}

/// Everything one launch needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    pub isolation: Isolation,
    /// Program (absolute sandbox path) and arguments.
    pub argv: Vec<String>,
    /// When `argv` is `/bin/sh -c LINE` and LINE is one simple command of plain words
    /// ([`hookbox_process::simple_command`]): those words, which the sandbox's init execs
    /// directly, as `/bin/sh` would (program resolved on the call's `PATH`, environment in the
    /// shell's order with its `PWD`, a signal death reported as the shell does), falling back to
    /// `argv` on anything it cannot do identically (see `crate::direct`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<Vec<String>>,
    /// The program's whole environment; nothing else is inherited.
    pub env: Vec<(String, String)>,
    /// Working directory inside the sandbox.
    pub cwd: String,
    /// The environment's tree on the host (used directly only by [`Isolation::InsecureNone`]).
    pub tree: PathBuf,
    /// An empty host directory on which the new root tmpfs is mounted (in the sandbox's own
    /// mount namespace, so the host never sees it).
    pub mountpoint: PathBuf,
    /// Host directories bound read-only at the same path (`/usr`, `/bin`, ...); a host symlink
    /// (merged-`/usr` layouts) is reproduced as the same symlink.
    pub host_read_only: Vec<String>,
    /// Entries of the host's `/etc` exposed read-only (files or directories).
    pub etc_entries: Vec<String>,
    /// The environment's directories, in order.
    pub binds: Vec<Bind>,
    /// Files bound read-only after `/etc` is assembled.
    #[serde(default)]
    pub files: Vec<FileBind>,
    pub network: Network,
    pub limits: Limits,
    /// cgroup directories the launcher joins before anything else (pids and memory caps).
    pub cgroups: Vec<PathBuf>,
    pub hostname: String,
    /// Who the sandbox is on the host. `Some`: the launcher (started as host root) stages the
    /// host paths it needs in a private mount namespace, becomes this unprivileged uid/gid, and
    /// only then creates the user namespace, so sandboxed root is this uid on the host and holds
    /// no capability over host-owned files. `None`: sandboxed root is the launcher's own uid (an
    /// unprivileged hookbox, where that uid is already unprivileged).
    #[serde(default)]
    pub identity: Option<Identity>,
    /// Report when each stage of construction ends (benchmarks only): the launcher writes
    /// `STAGE_MARK`-prefixed lines `<stage> <CLOCK_MONOTONIC ns>` to [`STATUS_FD`], which the
    /// runner separates from a failure report.
    #[serde(default)]
    pub stage_timings: bool,
    /// The pid of the process that spawned the launcher; if it is gone by the time the
    /// parent-death signal is armed, the launcher exits.
    pub parent_pid: i32,
    /// Build the sandbox once and keep it (a warm sandbox): instead of running `argv`, PID 1
    /// serves [`CallSpec`]s from the socket at [`WARM_FD`], each in its own PID, mount and IPC
    /// namespace with a fresh `/proc` and `/dev/shm`, its own limits, Landlock and seccomp.
    #[serde(default)]
    pub warm: bool,
    /// The kernel the sandbox runs on. Under [`RuntimeKind::Gvisor`] the spec is the warm
    /// sandbox's and reaches the launcher inside gVisor over its request socket.
    #[serde(default)]
    pub runtime: RuntimeKind,
    /// The egress proxy's port on the sandbox's `127.0.0.1`, which the launcher inside gVisor
    /// relays to hookbox's proxy (under namespaces the proxy itself listens there).
    #[serde(default)]
    pub egress_port: Option<u16>,
    /// The process that builds this warm sandbox exits right after its calls (the one-shot
    /// commands): a call host then resets its IPC namespace and `/dev/shm` when its next call
    /// comes, not as soon as a call ended, so the command's last call ends without that work
    /// (see `call_host`). No call runs in a host that was not reset.
    #[serde(default)]
    pub one_shot: bool,
}

/// One program run in a warm sandbox: what differs between calls of one environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSpec {
    pub argv: Vec<String>,
    /// [`LaunchSpec::direct`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<Vec<String>>,
    pub env: Vec<(String, String)>,
    pub cwd: String,
    #[serde(default)]
    pub stage_timings: bool,
}

impl LaunchSpec {
    /// The part of the spec a warm sandbox is built from (`warm` set, the per-call fields
    /// emptied), and the call that the rest describes. Two launches whose environment parts are
    /// equal can share one warm sandbox.
    pub fn split_call(&self) -> (LaunchSpec, CallSpec) {
        let call = CallSpec {
            argv: self.argv.clone(),
            direct: self.direct.clone(),
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            stage_timings: self.stage_timings,
        };
        let base = LaunchSpec {
            argv: Vec::new(),
            direct: None,
            env: Vec::new(),
            cwd: String::new(),
            stage_timings: false,
            warm: true,
            ..self.clone()
        };
        (base, call)
    }

    /// This environment part with `call`'s fields put back.
    pub fn with_call(&self, call: CallSpec) -> LaunchSpec {
        LaunchSpec {
            argv: call.argv,
            direct: call.direct,
            env: call.env,
            cwd: call.cwd,
            stage_timings: call.stage_timings,
            warm: false,
            ..self.clone()
        }
    }
}

/// The files generated in every sandbox's `/etc` (by the namespaces launcher, or in the bundle).
pub fn generated_etc(hostname: &str) -> [(&'static str, String); 5] {
    [
        (
            "passwd",
            "root:x:0:0:root:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
                .to_owned(),
        ),
        ("group", "root:x:0:\nnogroup:x:65534:\n".to_owned()),
        ("hostname", format!("{hostname}\n")),
        (
            "hosts",
            format!("127.0.0.1 localhost {hostname}\n::1 localhost {hostname}\n"),
        ),
        // DNS must not be a channel out: nothing answers here, names are resolved by the proxy.
        (
            "resolv.conf",
            SANDBOX_RESOLV_CONF.to_owned(),
        ),
    ]
}
