//! Runtimes: how a launch spec becomes a sandbox. [`Runtime`] builds one environment's warm
//! sandbox ([`WarmSandbox`]) and has two implementations, [`Namespaces`] (the launcher's
//! namespaces, Landlock and seccomp on the host kernel) and [`Gvisor`] (a runsc container whose
//! init is the launcher, see [`crate::gvisor`]); the caller holds an `Arc<dyn Runtime>` and
//! never asks which. [`launch_cold`] runs one program in a sandbox of its own (namespaces only,
//! `--cold-sandboxes`). Both hand the launch over through [`crate::handoff`] and read what
//! went wrong from [`crate::status`]; every failure is a typed [`SandboxError`].
//!
//! Must not: decide which runtime an environment uses, or build specs (that is the
//! environments crate's runner).

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hookbox_process::{CommandOutput, OutputTap, supervise_with_tap};

use crate::error::{SandboxError, Stage};
use crate::handoff::{place_fds, spec_memfd};
use crate::spec::{CallSpec, LaunchSpec, NETNS_FD, RuntimeKind, SPEC_FD, STATUS_FD};
use crate::warm::{SentCall, WarmSandbox};

pub use crate::handoff::Launcher;
pub use crate::warm::RelaySink;

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

    /// Builds the warm sandbox for `key` (see [`LaunchSpec::split_call`]), waits until it can
    /// take calls, and sends it `first` (see [`WarmSandbox::send_call`]; a runtime may send it
    /// before the sandbox is ready). The sandbox, and that send's result.
    async fn start(
        &self,
        key: LaunchSpec,
        net: SandboxNet,
        first: &CallSpec,
    ) -> Result<(WarmSandbox, Result<SentCall, SandboxError>), SandboxError>;
}

/// The host kernel behind the launcher's namespaces, Landlock and seccomp.
#[derive(Debug, Clone)]
pub struct Namespaces {
    pub launcher: Launcher,
    /// A launcher started early, which the next sandbox takes (see [`crate::early`]); usually
    /// empty.
    pub early: Arc<crate::early::EarlySlot>,
}

#[async_trait]
impl Runtime for Namespaces {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Namespaces
    }

    async fn start(
        &self,
        key: LaunchSpec,
        net: SandboxNet,
        first: &CallSpec,
    ) -> Result<(WarmSandbox, Result<SentCall, SandboxError>), SandboxError> {
        let early = self.early.take(&self.launcher);
        WarmSandbox::start_with_call(&self.launcher, key, net.netns, early, first).await
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

    /// The first call goes once the sandbox is ready: gVisor's init reads its spec from the
    /// request socket, before any call.
    async fn start(
        &self,
        key: LaunchSpec,
        net: SandboxNet,
        first: &CallSpec,
    ) -> Result<(WarmSandbox, Result<SentCall, SandboxError>), SandboxError> {
        let sandbox =
            WarmSandbox::start_gvisor(&self.runsc, &self.launcher, key, net.relay).await?;
        let sent = sandbox.send_call(first).await;
        Ok((sandbox, sent))
    }
}

/// Runs `spec` once in a sandbox of its own (the launcher builds it and exits with the
/// program), bounded by `timeout` and `output_limit`; returns its output and stage timings.
/// A sandbox that could not be built is the launcher's typed report.
pub async fn launch_cold(
    launcher: &Launcher,
    spec: &LaunchSpec,
    netns: Option<Arc<OwnedFd>>,
    stdin: Vec<u8>,
    timeout: Duration,
    output_limit: usize,
    tap: Option<OutputTap>,
) -> Result<(CommandOutput, Vec<(String, i128)>), SandboxError> {
    let spec_fd = spec_memfd(spec).map_err(SandboxError::spawn)?;
    let (status_read, status_write) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(SandboxError::spawn)?;
    let mut cmd = tokio::process::Command::new(&launcher.program);
    cmd.args(&launcher.args).env_clear();
    let mut inherited: Vec<(OwnedFd, i32)> = vec![(spec_fd, SPEC_FD), (status_write, STATUS_FD)];
    if let Some(ns) = &netns {
        inherited.push((ns.try_clone().map_err(SandboxError::spawn)?, NETNS_FD));
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
    let status = crate::status::read_status(&status_read, Stage::Unknown);
    if let Some(failure) = status.failure {
        return Err(failure.into());
    }
    Ok((output?, status.stages))
}
