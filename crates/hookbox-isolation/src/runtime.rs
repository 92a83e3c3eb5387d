//! Runtimes: how a launch spec becomes a sandbox. [`Runtime`] builds one environment's warm
//! sandbox ([`WarmSandbox`]) and has two implementations, [`Namespaces`] (the launcher's
//! namespaces, Landlock and seccomp on the host kernel) and [`Gvisor`] (a runsc container whose
//! init is the launcher, see [`crate::gvisor`]); the caller holds an `Arc<dyn Runtime>` and
//! never asks which. [`launch_cold`] runs one program in a sandbox of its own (namespaces only,
//! `--cold-sandboxes`). Also the plumbing both share: the [`Launcher`] program, the spec memfd,
//! placing descriptors at their agreed numbers, and reading a launcher's status channel.
//!
//! Must not: decide which runtime an environment uses, or build specs (that is the
//! environments crate's runner).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hookbox_hooks::runner::{CommandOutput, OutputTap, RunnerError, supervise_with_tap};

use crate::spec::{LaunchSpec, NETNS_FD, RuntimeKind, SPEC_FD, STATUS_FD};
use crate::warm::WarmSandbox;

/// What serves one connection relayed out of a gVisor sandbox's loopback (the environment's
/// egress proxy).
pub type RelaySink = Arc<dyn Fn(tokio::net::UnixStream) + Send + Sync>;

/// The network a warm sandbox gets: the namespace the namespaces launcher joins (`None`: a
/// fresh loopback-only one), and where a gVisor sandbox's egress connections go (`None`: no
/// egress; gVisor joins no namespace of the host's).
#[derive(Clone, Default)]
pub struct SandboxNet {
    pub netns: Option<Arc<OwnedFd>>,
    pub relay: Option<RelaySink>,
}

impl std::fmt::Debug for SandboxNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxNet")
            .field("netns", &self.netns)
            .field("relay", &self.relay.is_some())
            .finish()
    }
}

/// An isolation runtime: builds the warm sandbox a launch spec's environment part describes.
#[async_trait]
pub trait Runtime: Send + Sync + std::fmt::Debug {
    fn kind(&self) -> RuntimeKind;

    /// Builds the warm sandbox for `key` (see [`LaunchSpec::split_call`]); waits until it can
    /// take calls.
    async fn start(&self, key: LaunchSpec, net: SandboxNet) -> Result<WarmSandbox, RunnerError>;
}

/// The host kernel behind the launcher's namespaces, Landlock and seccomp.
#[derive(Debug, Clone)]
pub struct Namespaces {
    pub launcher: Launcher,
}

#[async_trait]
impl Runtime for Namespaces {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Namespaces
    }

    async fn start(&self, key: LaunchSpec, net: SandboxNet) -> Result<WarmSandbox, RunnerError> {
        WarmSandbox::start(&self.launcher, key, net.netns).await
    }
}

/// gVisor's application kernel: a runsc container per warm sandbox.
#[derive(Debug, Clone)]
pub struct Gvisor {
    pub launcher: Launcher,
    pub runsc: crate::gvisor::Runsc,
}

#[async_trait]
impl Runtime for Gvisor {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Gvisor
    }

    async fn start(&self, key: LaunchSpec, net: SandboxNet) -> Result<WarmSandbox, RunnerError> {
        WarmSandbox::start_gvisor(&self.runsc, &self.launcher, key, net.relay).await
    }
}

/// Runs `spec` once in a sandbox of its own (the launcher builds it and exits with the
/// program), bounded by `timeout` and `output_limit`; returns its output and stage timings.
/// A sandbox that could not be built is an error with the launcher's report.
pub async fn launch_cold(
    launcher: &Launcher,
    spec: &LaunchSpec,
    netns: Option<Arc<OwnedFd>>,
    stdin: Vec<u8>,
    timeout: Duration,
    output_limit: usize,
    tap: Option<OutputTap>,
) -> Result<(CommandOutput, Vec<(String, i128)>), RunnerError> {
    let spec_fd = spec_memfd(spec).map_err(RunnerError::Spawn)?;
    let (status_read, status_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| RunnerError::Spawn(e.into()))?;
    let mut cmd = tokio::process::Command::new(&launcher.program);
    cmd.args(&launcher.args).env_clear();
    let mut inherited: Vec<(OwnedFd, i32)> = vec![(spec_fd, SPEC_FD), (status_write, STATUS_FD)];
    if let Some(ns) = &netns {
        inherited.push((ns.try_clone().map_err(RunnerError::Spawn)?, NETNS_FD));
    }
    // SAFETY: the closure runs between fork and exec and only calls fcntl and dup2, which
    // are async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || place_fds(&inherited));
    }
    tracing::debug!(launcher = %launcher.program.display(), tree = %spec.tree.display(), "launching sandbox");
    let output = supervise_with_tap(cmd, stdin, timeout, output_limit, tap).await;
    // Every writer is gone now: the launcher exited (or was killed) and our copy was dropped
    // with the command, so a non-blocking read sees the whole report if there is one.
    let (report, stages, _) = read_status(&status_read);
    if !report.is_empty() {
        return Err(RunnerError::Sandbox(report));
    }
    output.map(|o| (o, stages))
}

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
        match std::env::var_os(crate::vars::HOOKBOX_SANDBOX_EXEC) {
            Some(path) => Ok(Self::standalone(PathBuf::from(path))),
            None => Ok(Self {
                program: std::env::current_exe()?,
                args: vec![hidden_subcommand.to_owned()],
            }),
        }
    }
}

pub fn spec_memfd(spec: &impl serde::Serialize) -> std::io::Result<OwnedFd> {
    use std::io::{Seek, Write};
    let fd = rustix::fs::memfd_create("hookbox-launch-spec", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&serde_json::to_vec(spec).map_err(std::io::Error::other)?)?;
    file.rewind()?;
    Ok(OwnedFd::from(file))
}

/// The most fds [`place_fds`] places.
const MAX_PLACED: usize = 4;

/// Between fork and exec: puts each fd at its agreed number, without CLOEXEC. Goes through
/// temporary high fds first so that a source already sitting on another target is not clobbered.
/// Allocates nothing (a fixed array), as code between fork and exec must not.
pub fn place_fds(fds: &[(OwnedFd, i32)]) -> std::io::Result<()> {
    let mut temps: [(i32, i32); MAX_PLACED] = [(-1, -1); MAX_PLACED];
    for (temp, (source, target)) in temps.iter_mut().zip(fds) {
        // SAFETY: F_DUPFD_CLOEXEC on an fd we own duplicates it; no memory is touched.
        let dup = unsafe { libc::fcntl(source.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
        if dup < 0 {
            return Err(std::io::Error::last_os_error());
        }
        *temp = (dup, *target);
    }
    for (temp, target) in temps.iter().take(fds.len()) {
        // SAFETY: dup2 onto a small fixed number in the child about to exec; the target is not
        // one of our temporaries (those are >= 10).
        if unsafe { libc::dup2(*temp, *target) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The launcher's failure report (empty: none), its stage-timing lines, and the exit status a
/// warm call reported.
pub fn read_status(fd: &OwnedFd) -> (String, Vec<(String, i128)>, Option<i32>) {
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
    let text = String::from_utf8_lossy(&out);
    let mut report = String::new();
    let mut stages = Vec::new();
    let mut exit = None;
    for line in text.split_inclusive('\n') {
        if let Some(timing) = line.strip_prefix(crate::spec::STAGE_MARK) {
            let mut parts = timing.split_whitespace();
            if let (Some(name), Some(Ok(ns))) = (parts.next(), parts.next().map(str::parse)) {
                stages.push((name.to_owned(), ns));
            }
        } else if let Some(code) = line.strip_prefix(crate::spec::EXIT_MARK) {
            exit = code.trim().parse().ok();
        } else {
            report.push_str(line);
        }
    }
    (report.trim().to_owned(), stages, exit)
}
