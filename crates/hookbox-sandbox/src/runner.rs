//! [`SandboxRunner`]: runs a program inside one environment's sandbox, bounded by
//! `hookbox_hooks::runner::supervise`. It is the `CommandRunner` the hooks engine uses for the
//! environment's command handlers, and what `code_execution` runs through.
//!
//! It builds the [`LaunchSpec`], hands it to the launcher in a memfd, and reads the launcher's
//! status pipe afterwards so that a sandbox that could not be built is an error, never a silent
//! "allow". It must not re-implement supervision (timeouts, output caps, killing the group).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hookbox_hooks::runner::{CommandOutput, CommandRequest, CommandRunner, RunnerError, supervise};
use hookbox_rootfs::{EntryKind, RootDir};

use crate::cgroup::EnvCgroups;
use crate::spec::{Bind, Isolation, LaunchSpec, Limits, NETNS_FD, Network, SPEC_FD, STATUS_FD};
use crate::vars;

/// Top-level names of the sandbox that come from the host or the launcher, never from the
/// environment's tree.
pub const RESERVED_TOP_LEVEL: &[&str] = &[
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc", "dev", "sys",
];

/// Host directories bound read-only into every sandbox.
const HOST_READ_ONLY: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The curated part of the host's `/etc`: what dynamic linking, name resolution, TLS and
/// common tools need; nothing with secrets (no shadow, no ssh keys, no machine-id).
const ETC_ENTRIES: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "resolv.conf",
    "localtime",
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
    "protocols",
    "services",
    "bash.bashrc",
    "profile",
    "inputrc",
    "python3",
    "python3.11",
    "gitconfig",
];

/// The program that builds sandboxes: a binary path plus the arguments that select launcher mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl Launcher {
    /// `hookbox-sandbox-exec` (or any binary whose main is [`crate::launcher::main`]).
    pub fn standalone(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
        }
    }

    /// `$HOOKBOX_SANDBOX_EXEC` if set, else the current executable with `hidden_subcommand`.
    pub fn from_env_or_current_exe(hidden_subcommand: &str) -> std::io::Result<Self> {
        match std::env::var_os(vars::HOOKBOX_SANDBOX_EXEC) {
            Some(path) => Ok(Self::standalone(PathBuf::from(path))),
            None => Ok(Self {
                program: std::env::current_exe()?,
                args: vec![hidden_subcommand.to_owned()],
            }),
        }
    }
}

/// Resource caps for an environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Processes (and threads) alive at once in the environment.
    pub max_processes: u64,
    /// Memory for the environment (cgroup) or per process address space (rlimit fallback).
    pub memory_bytes: u64,
    pub open_files: u64,
    pub file_size_bytes: Option<u64>,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self {
            max_processes: 512,
            memory_bytes: 4 << 30,
            open_files: 4096,
            file_size_bytes: None,
        }
    }
}

/// How sandboxes are built, shared by every environment of a hookbox process.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    pub launcher: Launcher,
    pub isolation: Isolation,
    pub limits: ResourceLimits,
    /// Wall-clock limit of one `code_execution` call.
    pub tool_timeout: Duration,
    /// Cap on each of stdout and stderr of a tool call.
    pub output_limit: usize,
}

impl SandboxOptions {
    pub fn new(launcher: Launcher) -> Self {
        Self {
            launcher,
            isolation: Isolation::Full,
            limits: ResourceLimits::default(),
            tool_timeout: Duration::from_secs(300),
            output_limit: hookbox_hooks::runner::DEFAULT_OUTPUT_LIMIT,
        }
    }
}

/// The parts of one environment the runner needs.
#[derive(Debug, Clone)]
pub struct SandboxLayout {
    /// The environment's tree on the host.
    pub tree: PathBuf,
    /// An empty host directory, the new root's mountpoint.
    pub mountpoint: PathBuf,
    /// When hooks are frozen: the snapshot of `/.agents`, bound read-only in its place.
    pub frozen_agents: Option<PathBuf>,
    /// The environment's variables, applied over the defaults.
    pub env: Vec<(String, String)>,
    pub cgroups: EnvCgroups,
    /// A network namespace to join instead of a fresh one (the egress issue's per-environment
    /// namespace). `None`: a fresh namespace with only loopback.
    pub netns: Option<Arc<OwnedFd>>,
}

impl SandboxLayout {
    /// A layout for any directory tree that stands for the sandbox root (as `hookbox hooks test
    /// --root DIR` needs): no variables, no cgroups, fresh network. The mountpoint is a shared empty
    /// directory `<tmp>/hookbox-sandbox-mnt-<uid>`; sandboxes only mount on it inside their own
    /// mount namespace, so one directory serves all of them.
    pub fn for_tree(tree: PathBuf) -> std::io::Result<Self> {
        let uid = rustix::process::geteuid().as_raw();
        let mountpoint = std::env::temp_dir().join(format!("hookbox-sandbox-mnt-{uid}"));
        match std::fs::create_dir(&mountpoint) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let meta = std::fs::symlink_metadata(&mountpoint)?;
        if !meta.is_dir() || std::os::unix::fs::MetadataExt::uid(&meta) != uid {
            return Err(std::io::Error::other(format!(
                "{} is not a directory owned by uid {uid}",
                mountpoint.display()
            )));
        }
        Ok(Self {
            tree,
            mountpoint,
            frozen_agents: None,
            env: Vec::new(),
            cgroups: EnvCgroups::default(),
            netns: None,
        })
    }
}

/// Runs programs inside one environment's sandbox.
#[derive(Debug, Clone)]
pub struct SandboxRunner {
    options: Arc<SandboxOptions>,
    layout: Arc<SandboxLayout>,
    tree: Arc<RootDir>,
}

const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

impl SandboxRunner {
    pub fn new(options: Arc<SandboxOptions>, layout: SandboxLayout) -> Result<Self, RunnerError> {
        let tree = RootDir::open(&layout.tree).map_err(|e| RunnerError::Sandbox(e.to_string()))?;
        Ok(Self {
            options,
            layout: Arc::new(layout),
            tree: Arc::new(tree),
        })
    }

    pub fn options(&self) -> &SandboxOptions {
        &self.options
    }

    /// The environment's own directories, bound writable at the same top-level name, except
    /// reserved names and, when frozen, `/.agents` (bound read-only from the snapshot).
    fn binds(&self) -> Result<Vec<Bind>, RunnerError> {
        let entries = self
            .tree
            .list_dir("/")
            .map_err(|e| RunnerError::Sandbox(format!("listing the environment: {e}")))?;
        let mut binds: Vec<Bind> = entries
            .into_iter()
            .filter(|e| e.kind == EntryKind::Dir)
            .filter(|e| !RESERVED_TOP_LEVEL.contains(&e.name.as_str()))
            .filter(|e| !(e.name == ".agents" && self.layout.frozen_agents.is_some()))
            .map(|e| Bind {
                source: self.layout.tree.join(&e.name),
                target: format!("/{}", e.name),
                writable: true,
            })
            .collect();
        if let Some(frozen) = &self.layout.frozen_agents {
            binds.push(Bind {
                source: frozen.clone(),
                target: "/.agents".into(),
                writable: false,
            });
        }
        Ok(binds)
    }

    fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = [
            ("PATH", DEFAULT_PATH),
            ("HOME", "/workspace"),
            ("LANG", "C.UTF-8"),
            ("USER", "root"),
            ("TMPDIR", "/tmp"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        for (key, value) in &self.layout.env {
            env.retain(|(k, _)| k != key);
            env.push((key.clone(), value.clone()));
        }
        env
    }

    /// The spec for running `argv` in this environment.
    pub fn spec(&self, argv: Vec<String>) -> Result<LaunchSpec, RunnerError> {
        let limits = &self.options.limits;
        let cgroups = &self.layout.cgroups;
        Ok(LaunchSpec {
            isolation: self.options.isolation,
            argv,
            env: self.env(),
            // A bare tree (hooks test) may lack /workspace; the root is the only other choice.
            cwd: match self.tree.metadata("/workspace") {
                Ok(meta) if meta.kind == EntryKind::Dir => "/workspace".into(),
                _ => "/".into(),
            },
            tree: self.layout.tree.clone(),
            mountpoint: self.layout.mountpoint.clone(),
            host_read_only: HOST_READ_ONLY.iter().map(|s| (*s).to_owned()).collect(),
            etc_entries: ETC_ENTRIES.iter().map(|s| (*s).to_owned()).collect(),
            binds: self.binds()?,
            network: match self.layout.netns {
                Some(_) => Network::Join,
                None => Network::Isolated,
            },
            limits: Limits {
                address_space_bytes: (!cgroups.memory).then_some(limits.memory_bytes),
                nproc: (!cgroups.pids).then_some(limits.max_processes),
                open_files: limits.open_files,
                file_size_bytes: limits.file_size_bytes,
            },
            cgroups: cgroups.dirs.clone(),
            hostname: "hookbox".into(),
            parent_pid: i32::try_from(std::process::id()).unwrap_or(0),
        })
    }

    /// Runs `argv` in the sandbox with `stdin`, bounded by `timeout` and `output_limit`.
    pub async fn run_argv(
        &self,
        argv: Vec<String>,
        stdin: Vec<u8>,
        timeout: Duration,
        output_limit: usize,
    ) -> Result<CommandOutput, RunnerError> {
        let spec = self.spec(argv)?;
        let spec_fd = spec_memfd(&spec).map_err(RunnerError::Spawn)?;
        let (status_read, status_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|e| RunnerError::Spawn(e.into()))?;
        let netns = self.layout.netns.clone();

        let mut cmd = tokio::process::Command::new(&self.options.launcher.program);
        cmd.args(&self.options.launcher.args).env_clear();
        let inherited: Vec<(OwnedFd, i32)> = vec![(spec_fd, SPEC_FD), (status_write, STATUS_FD)];
        // SAFETY: the closure runs between fork and exec and only calls fcntl and dup2, which
        // are async-signal-safe; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || place_fds(&inherited, netns.as_deref()));
        }
        tracing::debug!(launcher = %self.options.launcher.program.display(), tree = %self.layout.tree.display(), "launching sandbox");
        let output = supervise(cmd, stdin, timeout, output_limit).await;
        // Every writer is gone now: the launcher exited (or was killed) and our copy was dropped
        // with the command, so a non-blocking read sees the whole report if there is one.
        let report = read_status(&status_read);
        if !report.is_empty() {
            return Err(RunnerError::Sandbox(report));
        }
        if self.options.isolation == Isolation::InsecureNone {
            tracing::warn!("ran WITHOUT isolation (--insecure-no-isolation)");
        }
        output
    }

    /// The environment's tree on the host.
    pub fn tree_path(&self) -> &Path {
        &self.layout.tree
    }
}

#[async_trait]
impl CommandRunner for SandboxRunner {
    async fn run(&self, request: CommandRequest) -> Result<CommandOutput, RunnerError> {
        self.run_argv(
            vec!["/bin/sh".into(), "-c".into(), request.command],
            request.stdin,
            request.timeout,
            request.output_limit,
        )
        .await
    }
}

fn spec_memfd(spec: &LaunchSpec) -> std::io::Result<OwnedFd> {
    use std::io::{Seek, Write};
    let fd = rustix::fs::memfd_create("hookbox-launch-spec", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&serde_json::to_vec(spec).map_err(std::io::Error::other)?)?;
    file.rewind()?;
    Ok(OwnedFd::from(file))
}

/// Between fork and exec: puts each fd at its agreed number, without CLOEXEC. Goes through
/// temporary high fds first so that a source already sitting on another target is not clobbered.
fn place_fds(fds: &[(OwnedFd, i32)], netns: Option<&OwnedFd>) -> std::io::Result<()> {
    let mut moves: [(i32, i32); 3] = [(-1, -1); 3];
    for (slot, (fd, target)) in moves.iter_mut().zip(fds) {
        *slot = (fd.as_raw_fd(), *target);
    }
    if let Some(ns) = netns {
        moves[2] = (ns.as_raw_fd(), NETNS_FD);
    }
    let mut temps: [i32; 3] = [-1; 3];
    for (temp, (source, _)) in temps.iter_mut().zip(moves.iter()) {
        if *source < 0 {
            continue;
        }
        // SAFETY: F_DUPFD_CLOEXEC on an fd we own duplicates it; no memory is touched.
        let dup = unsafe { libc::fcntl(*source, libc::F_DUPFD_CLOEXEC, 10) };
        if dup < 0 {
            return Err(std::io::Error::last_os_error());
        }
        *temp = dup;
    }
    for (temp, (_, target)) in temps.iter().zip(moves.iter()) {
        if *temp < 0 {
            continue;
        }
        // SAFETY: dup2 onto a small fixed number in the child about to exec; the target is not
        // one of our temporaries (those are >= 10).
        if unsafe { libc::dup2(*temp, *target) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn read_status(fd: &OwnedFd) -> String {
    let _ = rustix::fs::fcntl_setfl(fd, rustix::fs::OFlags::NONBLOCK);
    let mut buf = vec![0u8; 8192];
    let mut out = Vec::new();
    while let Ok(n) = rustix::io::read(fd, &mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() > 64 * 1024 {
            break;
        }
    }
    String::from_utf8_lossy(&out).trim().to_owned()
}
