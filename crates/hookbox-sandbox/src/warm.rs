//! Warm sandboxes: one environment's sandbox built once and kept while the environment is open,
//! each call started inside it (see the launcher's `serve`).
//!
//! [`WarmSandbox::start`] spawns the launcher with [`LaunchSpec::warm`] (or hands the spec to
//! one started before it was known, [`WarmSandbox::start_with`] and [`crate::early`]) and waits
//! until its init says it is ready ([`WarmSandbox::start_with_call`] also hands it its first
//! call before that, which the init finds once ready); [`WarmSandbox::call`] hands it one call
//! (spec memfd, stdio, status channel, reply socket: [`WarmSandbox::send_call`], then
//! [`SentCall::started`] for the host's answer) and returns a [`Call`], which
//! [`Call::supervise`] runs to its end with
//! `hookbox_process`'s bounds: its end is `X` on its reply socket (or, from a call host that
//! died, its host's pidfd becoming readable), and its kill is a shutdown of that socket, which
//! the call's host answers by killing the call's processes. A sandbox that does not start, or a call
//! that cannot be handed over, is a typed [`SandboxError`]: the launcher's own report of the
//! stage that failed, or [`Stage::WarmSocket`] for the socket protocol itself. Dropping the
//! sandbox closes its socket; its init exits once its last call ended, and the drop waits
//! (bounded) for that, so an environment's mounts are gone when it is. A one-shot process
//! ([`WarmSandbox::detached_stop`]) waits for neither the init nor the kernel's teardown of the
//! sandbox's namespaces in the launcher's exit: it tells the init to stop and goes.
//!
//! This module must not decide when a sandbox may be shared (the runner compares specs) nor
//! re-implement supervision.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookbox_process::pidfd::Pidfd;
use hookbox_process::{OutputPipe, OutputTap, Spawned, Termination};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncWrite, Interest};
use tokio::net::unix::pipe;

use crate::early::EarlyLauncher;
use crate::error::{LaunchFailure, SandboxError, Stage};
use crate::fdpass;
use crate::handoff::{Launcher, LauncherChild, place_fds, spawn_launcher, spec_memfd};
use crate::spec::{CallSpec, LaunchSpec, SPEC_FD, STATUS_FD, WARM_FD};
use crate::status::read_status;

/// What serves one connection relayed out of a gVisor sandbox's loopback (the environment's
/// egress proxy).
pub type RelaySink = Arc<dyn Fn(tokio::net::UnixStream) + Send + Sync>;

/// How long a warm sandbox may take to be built.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long dropping a warm sandbox waits for its init to exit before killing it.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What a call's status channel held once it ended: the failure (none: the program ran), stage
/// timings, and the exit status its init reported (none: it was killed).
pub type CallStatus = crate::status::StatusReport;

/// One environment's kept sandbox.
#[derive(Debug)]
pub struct WarmSandbox {
    /// Our end of the request socket (non-blocking).
    socket: AsyncFd<OwnedFd>,
    /// The environment part of the spec it was built from (see [`LaunchSpec::split_call`]).
    key: LaunchSpec,
    /// The netns it joined, compared by identity.
    netns: Option<Arc<OwnedFd>>,
    /// The launcher (namespaces) or `runsc run` (gVisor).
    launcher: Mutex<Option<LauncherChild>>,
    /// Under gVisor: the container to remove once it stopped.
    container: Option<Container>,
    /// Stop without waiting for the launcher's exit (see [`Self::detached_stop`]).
    detached_stop: bool,
}

/// A gVisor sandbox's container: its bundle and runsc state (removed with it), and the task
/// serving its relayed egress connections.
#[derive(Debug)]
struct Container {
    runsc: crate::gvisor::Runsc,
    id: String,
    bundle: tempfile::TempDir,
    /// The bundle's lock (see [`crate::gvisor::lock_bundle`]): a sweep leaves it alone.
    _lock: OwnedFd,
    egress: Option<tokio::task::AbortHandle>,
}

impl Container {
    fn state(&self) -> std::path::PathBuf {
        self.bundle.path().join("state")
    }
}

impl WarmSandbox {
    /// Whether a launch of `key` in `netns` can run in this sandbox.
    pub fn serves(&self, key: &LaunchSpec, netns: &Option<Arc<OwnedFd>>) -> bool {
        self.key == *key
            && match (&self.netns, netns) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }

    /// Builds the sandbox for `key` (which must have `warm` set) with `launcher`.
    pub async fn start(
        launcher: &Launcher,
        key: LaunchSpec,
        netns: Option<Arc<OwnedFd>>,
    ) -> Result<Self, SandboxError> {
        Self::start_with(launcher, key, netns, None).await
    }

    /// [`Self::start`], by handing `key` to `early` (a launcher of `launcher` started before
    /// the spec was known, see [`crate::early`]) when it can take it, else by spawning one.
    pub async fn start_with(
        launcher: &Launcher,
        key: LaunchSpec,
        netns: Option<Arc<OwnedFd>>,
        early: Option<EarlyLauncher>,
    ) -> Result<Self, SandboxError> {
        let (sandbox, status_read) = Self::launch(launcher, key, netns, early)?;
        sandbox.ready(status_read).await
    }

    /// [`Self::start_with`], with `first` handed to the init together with the spec: the init
    /// finds it in its request socket as soon as it is ready, instead of saying so and waiting
    /// for us to send it (a wake-up of ours and then one of the init, on the first call's
    /// path). The sandbox once ready, and `first` sent (whether its host could start it is for
    /// [`SentCall::started`] to say).
    pub async fn start_with_call(
        launcher: &Launcher,
        key: LaunchSpec,
        netns: Option<Arc<OwnedFd>>,
        early: Option<EarlyLauncher>,
        first: &CallSpec,
    ) -> Result<(Self, Result<SentCall, SandboxError>), SandboxError> {
        let (sandbox, status_read) = Self::launch(launcher, key, netns, early)?;
        // A sandbox that fails to start drops the call with its request socket; `ready` says
        // why it failed.
        let sent = sandbox.send_call(first).await;
        let sandbox = sandbox.ready(status_read).await?;
        Ok((sandbox, sent))
    }

    /// The sandbox for `key` with its launcher started (`early`'s, when it can take `key`;
    /// one that cannot is killed and reaped by `hand`), not ready yet; our end of its status
    /// pipe.
    fn launch(
        launcher: &Launcher,
        key: LaunchSpec,
        netns: Option<Arc<OwnedFd>>,
        early: Option<EarlyLauncher>,
    ) -> Result<(Self, OwnedFd), SandboxError> {
        let handed = early.and_then(|early| early.hand(&key, netns.as_deref()));
        let (child, status_read, ours) = match handed {
            Some(handed) => handed,
            None => Self::spawn(launcher, &key, &netns).map_err(SandboxError::spawn)?,
        };
        rustix::io::ioctl_fionbio(&ours, true).map_err(SandboxError::spawn)?;
        let sandbox = Self {
            socket: register(ours, Interest::READABLE | Interest::WRITABLE)
                .map_err(SandboxError::spawn)?,
            key,
            netns,
            launcher: Mutex::new(child.own()),
            container: None,
            detached_stop: false,
        };
        Ok((sandbox, status_read))
    }

    /// Spawns the launcher for `key` (in `netns`).
    fn spawn(
        launcher: &Launcher,
        key: &LaunchSpec,
        netns: &Option<Arc<OwnedFd>>,
    ) -> std::io::Result<Launched> {
        let netns = netns.as_deref().map(OwnedFd::try_clone).transpose()?;
        spawn_warm_launcher(launcher, spec_memfd(key)?, netns)
    }

    /// Builds the sandbox for `key` as a gVisor container (see [`crate::gvisor`]): writes its
    /// bundle, starts `runsc run` in a fresh network namespace inside the environment's
    /// cgroups, sends the spec (and the egress channel, when `joined` allows egress) and waits
    /// until the init inside says it is ready.
    pub async fn start_gvisor(
        runsc: &crate::gvisor::Runsc,
        launcher: &Launcher,
        key: LaunchSpec,
        relay: Option<RelaySink>,
    ) -> Result<Self, SandboxError> {
        // Once per process, what an earlier hookbox left behind when it died goes first.
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            let runsc = runsc.clone();
            tokio::task::spawn_blocking(move || runsc.sweep_bundles(&std::env::temp_dir()));
        });
        let bundle = tempfile::Builder::new()
            .prefix(crate::gvisor::BUNDLE_PREFIX)
            .tempdir()
            .map_err(SandboxError::spawn)?;
        let lock = crate::gvisor::lock_bundle(bundle.path()).map_err(SandboxError::spawn)?;
        let staged =
            crate::gvisor::write_bundle(bundle.path(), &key, &launcher.program, &launcher.args)
                .map_err(LaunchFailure::from)?;
        let id = bundle
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "hookbox-gvisor".into());
        let state = bundle.path().join("state");
        std::fs::create_dir(&state).map_err(SandboxError::spawn)?;
        let (status_read, status_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(SandboxError::spawn)?;
        let (ours, theirs) = fdpass::pair().map_err(SandboxError::spawn)?;
        let wrap = runsc.run_wrapped(&state, bundle.path(), &id, staged);
        let wrap_fd = spec_memfd(&wrap).map_err(SandboxError::spawn)?;
        let mut cmd = std::process::Command::new(&launcher.program);
        cmd.args(&launcher.args)
            .env_clear()
            .env(crate::env_vars::WRAP_MARKER, "1")
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::from(status_write));
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let cgroups = crate::cgroup::ProcsFiles::open(&key.cgroups).map_err(SandboxError::spawn)?;
        let inherited = [(wrap_fd, SPEC_FD)];
        // SAFETY: the closure runs between fork and exec and only calls write, fcntl, dup2 and
        // prctl, which are async-signal-safe; it allocates nothing.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                cgroups.join()?;
                place_fds(&inherited)?;
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = Unowned(Some(LauncherChild::from_pid(
            cmd.spawn().map_err(SandboxError::spawn)?.id(),
        )));
        drop(cmd);
        rustix::io::ioctl_fionbio(&ours, true).map_err(SandboxError::spawn)?;
        let spec_fd = spec_memfd(&key).map_err(SandboxError::spawn)?;
        let egress = match relay {
            Some(sink) => {
                let (host, guest) = fdpass::pair().map_err(SandboxError::spawn)?;
                Some((host, guest, sink))
            }
            None => None,
        };
        let mut sandbox = Self {
            socket: register(ours, Interest::READABLE | Interest::WRITABLE)
                .map_err(SandboxError::spawn)?,
            key,
            netns: None,
            launcher: Mutex::new(child.own()),
            container: Some(Container {
                runsc: runsc.clone(),
                id,
                bundle,
                _lock: lock,
                egress: None,
            }),
            detached_stop: false,
        };
        let mut fds = vec![spec_fd.as_fd()];
        if let Some((_, guest, _)) = &egress {
            fds.push(guest.as_fd());
        }
        let sent = sandbox.send(b"S", &fds).await;
        drop(fds);
        if let Err(e) = sent {
            // The wrapper or runsc may have stopped already (a bind it could not stage).
            return Err(sandbox.failed(
                status_read,
                warm_socket(
                    e.raw_os_error(),
                    format!("the gVisor sandbox's socket: {e}"),
                ),
            ));
        }
        if let Some((host, guest, sink)) = egress {
            drop(guest);
            let task = tokio::spawn(serve_relayed(host, sink));
            if let Some(container) = sandbox.container.as_mut() {
                container.egress = Some(task.abort_handle());
            }
        }
        sandbox.ready(status_read).await
    }

    /// Waits until the sandbox's init says it is ready; otherwise stops it and reports why.
    async fn ready(self, status_read: OwnedFd) -> Result<Self, SandboxError> {
        let sandbox = self;
        let ready = tokio::time::timeout(START_TIMEOUT, sandbox.recv()).await;
        match ready {
            Ok(Ok(message)) if message.payload == b"R" => Ok(sandbox),
            other => Err(sandbox.failed(
                status_read,
                match other {
                    Err(_) => warm_socket(
                        None,
                        format!(
                            "the warm sandbox was not ready within {}s",
                            START_TIMEOUT.as_secs()
                        ),
                    ),
                    Ok(Err(e)) => {
                        warm_socket(e.raw_os_error(), format!("the warm sandbox's socket: {e}"))
                    }
                    Ok(Ok(_)) => warm_socket(None, "the warm sandbox ended before it was ready"),
                },
            )),
        }
    }

    /// Stops a sandbox that did not start and says why: the launcher's (or runsc's) own report
    /// when it wrote one before exiting, else `otherwise`. Under gVisor, text on the channel
    /// that the launcher did not write is runsc's.
    fn failed(self, status_read: OwnedFd, otherwise: LaunchFailure) -> SandboxError {
        self.stop();
        let untyped = match self.container {
            Some(_) => Stage::Runsc,
            None => Stage::Unknown,
        };
        read_status(&status_read, untyped)
            .failure
            .unwrap_or(otherwise)
            .into()
    }

    async fn recv(&self) -> std::io::Result<fdpass::Message> {
        recv_on(&self.socket).await
    }

    async fn send(
        &self,
        payload: &[u8],
        fds: &[std::os::fd::BorrowedFd<'_>],
    ) -> std::io::Result<()> {
        loop {
            let mut guard = self.socket.writable().await?;
            match guard.try_io(|s| fdpass::send(s.get_ref().as_fd(), payload, fds)) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Starts `call` in this sandbox; [`Call::supervise`] runs it to its end. An error means
    /// nothing ran (the sandbox is gone: start another, or the init could not clone the call, or
    /// a one-shot command's host could not be reset for it, which the error's stage says).
    pub async fn call(
        &self,
        call: &CallSpec,
        stdout_tap: Option<OutputTap>,
    ) -> Result<Call, SandboxError> {
        let sent = self.send_call(call).await?;
        sent.started(stdout_tap).await
    }

    /// The first half of [`Self::call`]: hands `call` to the init, which takes it once it is
    /// ready (a sandbox still starting keeps it in its request socket until then);
    /// [`SentCall::started`] waits for its host's answer.
    pub async fn send_call(&self, call: &CallSpec) -> Result<SentCall, SandboxError> {
        let spec_fd = spec_memfd(call).map_err(SandboxError::spawn)?;
        let cloexec = rustix::pipe::PipeFlags::CLOEXEC;
        let (stdin_read, stdin_write) =
            rustix::pipe::pipe_with(cloexec).map_err(SandboxError::spawn)?;
        let (stdout_read, stdout_write) =
            rustix::pipe::pipe_with(cloexec).map_err(SandboxError::spawn)?;
        let (stderr_read, stderr_write) =
            rustix::pipe::pipe_with(cloexec).map_err(SandboxError::spawn)?;
        let (status_read, status_write) =
            rustix::pipe::pipe_with(cloexec).map_err(SandboxError::spawn)?;
        let (reply_ours, reply_theirs) = fdpass::pair().map_err(SandboxError::spawn)?;
        self.send(
            b"C",
            &[
                spec_fd.as_fd(),
                stdin_read.as_fd(),
                stdout_write.as_fd(),
                stderr_write.as_fd(),
                status_write.as_fd(),
                reply_theirs.as_fd(),
            ],
        )
        .await
        .map_err(|e| warm_socket(e.raw_os_error(), format!("the warm sandbox is gone: {e}")))?;
        // Only the call may hold the write ends now, so EOF means it is done with them.
        drop((
            spec_fd,
            stdin_read,
            stdout_write,
            stderr_write,
            status_write,
            reply_theirs,
        ));
        Ok(SentCall {
            reply: reply_ours,
            stdin_write,
            stdout_read,
            stderr_read,
            status_read,
        })
    }

    /// For a process that exits right after its calls (the one-shot CLI): when `detached`,
    /// [`Self::stop`] (and so the drop) of a namespaces sandbox tells its init to stop (closes
    /// our side of the request socket) and returns at once. It waits neither for the init to
    /// leave its request loop (a wake-up of the init and then one of ours, on a loaded machine
    /// each a wait for a core) nor for the launcher's exit, in which the kernel tears the
    /// sandbox's namespaces down (a mount namespace of some fifty mounts, the network, IPC and
    /// user namespaces: most of a one-shot call's wall time on a loaded machine). Nothing
    /// sandboxed runs by then: every call ended (its host said so once it had killed and
    /// reaped every process of the call; the caller awaited it), no new call can start (the
    /// socket is shut for writing), and the init, its idle call hosts and the launcher only
    /// exit; all die with this process anyway (their parent-death signals). The launcher is not
    /// reaped here, so a long-lived process must not use this. Under gVisor it has no effect
    /// (the container is removed once `runsc` exited).
    pub fn detached_stop(mut self, detached: bool) -> Self {
        self.detached_stop = detached;
        self
    }

    /// The launcher's (or `runsc run`'s) pid while the sandbox runs.
    pub fn launcher_pid(&self) -> Option<u32> {
        self.launcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(LauncherChild::id)
    }

    /// Waits (bounded by `STOP_GRACE`) for the launcher to exit after our socket closed, then
    /// kills its group if it has not. Blocking: the sandbox's init exits as soon as its last
    /// call has, which is before anyone drops the sandbox. Idempotent; a gVisor container that
    /// did not end cleanly is also killed and deleted with runsc, so none of its processes is
    /// left in the environment's cgroup when this returns, unless the sandbox was made with
    /// [`Self::detached_stop`] (then this does not block: the init and the launcher may still
    /// be exiting, in the cgroup).
    pub fn stop(&self) {
        let Some(mut child) = self
            .launcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return;
        };
        if self.detached_stop && self.container.is_none() {
            // Half-close: the init reads EOF, leaves its loop and exits; nothing waits for that
            // (it would cost the init's wake-up and then ours, on the one-shot command's path).
            // Not reaped: the launcher exits by itself (or with us, by its parent-death signal)
            // and is reaped by whoever inherits it (forgetting its handle waits for nothing).
            let _ = rustix::net::shutdown(self.socket.get_ref(), rustix::net::Shutdown::Write);
            let _ = child;
            return;
        }
        // Closing our end is what tells init to finish; `shutdown` does it while the AsyncFd
        // still owns the descriptor.
        let _ = rustix::net::shutdown(self.socket.get_ref(), rustix::net::Shutdown::Both);
        let exited = Pidfd::open(child.id()).is_ok_and(|pidfd| pidfd.wait_exited(STOP_GRACE));
        // A gVisor sandbox that died (a fork bomb at the host cap, an OOM kill) leaves its
        // `runsc run` with a failure status while its other processes may still be going.
        let clean = exited && matches!(child.try_wait(), Ok(Some(status)) if status.success());
        if let Some(container) = &self.container {
            if let Some(task) = &container.egress {
                task.abort();
            }
            if !clean {
                container.runsc.remove(&container.state(), &container.id);
            }
        }
        if !exited {
            tracing::warn!(
                pid = child.id(),
                "warm sandbox did not stop in time; killing it"
            );
            // The launcher leads its own group (`process_group(0)` at spawn).
            if let Ok(pgid) = i32::try_from(child.id()) {
                hookbox_process::kill_group(pgid);
            }
        }
        let _ = child.wait();
    }
}

/// A call handed to a warm sandbox's init ([`WarmSandbox::send_call`]) whose host has not
/// answered yet: our ends of its reply socket, stdio and status pipe.
#[derive(Debug)]
pub struct SentCall {
    reply: OwnedFd,
    stdin_write: OwnedFd,
    stdout_read: OwnedFd,
    stderr_read: OwnedFd,
    status_read: OwnedFd,
}

impl SentCall {
    /// The second half of [`WarmSandbox::call`]: waits for the host's answer. An error means
    /// nothing ran, as there.
    pub async fn started(self, stdout_tap: Option<OutputTap>) -> Result<Call, SandboxError> {
        let SentCall {
            reply: reply_ours,
            stdin_write,
            stdout_read,
            stderr_read,
            status_read,
        } = self;
        rustix::io::ioctl_fionbio(&reply_ours, true).map_err(SandboxError::spawn)?;
        let reply =
            Arc::new(register(reply_ours, Interest::READABLE).map_err(SandboxError::spawn)?);
        let message = recv_on(&reply)
            .await
            .map_err(|e| warm_socket(e.raw_os_error(), format!("the call's reply socket: {e}")))?;
        let handle = match (message.payload.as_slice(), message.fds.into_iter().next()) {
            // Namespaces: a call host ([`crate::call_host`]) with its pidfd.
            (b"H", Some(pidfd)) => CallHandle::Host {
                reply,
                host: Pidfd::from_owned(pidfd),
            },
            // A launcher of a build before call hosts (`HOOKBOX_SANDBOX_EXEC` may name one, and
            // benchmarks compare with one): the call's own process, ended with its namespace.
            (b"P", Some(pidfd)) => CallHandle::Pidfd(Pidfd::from_owned(pidfd)),
            // A gVisor call host: no pidfd crosses out; the reply socket stands in for one.
            (b"P", None) => CallHandle::Reply(reply),
            ([], None) => return Err(warm_socket(None, "the warm sandbox is gone").into()),
            // The init could not start the call and said why (typed), or, from a launcher that
            // does not type its reports, in words.
            (report, _) => {
                let text = String::from_utf8_lossy(report);
                return Err(LaunchFailure::decode(&text)
                    .unwrap_or_else(|| LaunchFailure::new(Stage::Unknown, None, text.trim()))
                    .into());
            }
        };

        let (status_tx, status_rx) = tokio::sync::oneshot::channel();
        let ended = {
            let handle = handle.clone();
            async move {
                // Whoever stops waiting (a cancelled interaction) ends the call with the wait.
                let _kill_on_drop = KillOnDrop(handle.clone());
                handle.ended().await?;
                // The call's init wrote everything before it exited; nobody else holds the pipe.
                let status = read_status(&status_read, Stage::Unknown);
                let termination = match status.exit {
                    Some(code) => Termination::Exited(code),
                    None => Termination::Signaled(libc::SIGKILL),
                };
                let _ = status_tx.send(status);
                Ok(termination)
            }
        };
        // The call's host reaped every process of the call before saying so; a host that died
        // instead is waited for until its namespace is gone (under gVisor the init says `X`
        // for it).
        let writers_gone_at_end = !matches!(handle, CallHandle::Pidfd(_));
        let kill = move || handle.kill();
        let spawned = Spawned {
            stdin: Some(Box::new(
                pipe::Sender::from_owned_fd(stdin_write).map_err(SandboxError::spawn)?,
            ) as Box<dyn AsyncWrite + Send + Unpin>),
            stdout: Some(Box::new(
                pipe::Receiver::from_owned_fd(stdout_read).map_err(SandboxError::spawn)?,
            ) as Box<dyn OutputPipe>),
            stderr: Some(Box::new(
                pipe::Receiver::from_owned_fd(stderr_read).map_err(SandboxError::spawn)?,
            ) as Box<dyn OutputPipe>),
            ended: Box::pin(ended),
            kill: Box::new(kill),
            stdout_tap,
            writers_gone_at_end,
        };
        Ok(Call {
            spawned,
            status: status_rx,
        })
    }
}

/// A warm sandbox's launcher, spawned (or an early one handed its spec): the launcher, our end
/// of its status pipe and our end of its request socket.
pub(crate) type Launched = (Unowned, OwnedFd, OwnedFd);

/// Spawns `launcher` for a warm sandbox with `spec` at [`SPEC_FD`] (the spec's memfd, or the
/// socket an early launcher waits on for it, [`crate::early`]), a status pipe, a request
/// socket, and `netns` at [`crate::spec::NETNS_FD`].
pub(crate) fn spawn_warm_launcher(
    launcher: &Launcher,
    spec: OwnedFd,
    netns: Option<OwnedFd>,
) -> std::io::Result<Launched> {
    let (status_read, status_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let (ours, theirs) = fdpass::pair()?;
    let mut inherited = vec![
        (spec, SPEC_FD),
        (status_write, STATUS_FD),
        (theirs, WARM_FD),
    ];
    inherited.extend(netns.map(|ns| (ns, crate::spec::NETNS_FD)));
    let child = Unowned::new(spawn_launcher(launcher, &inherited)?);
    // Only the launcher may hold these now.
    drop(inherited);
    Ok((child, status_read, ours))
}

/// A launcher (or `runsc run`) spawned for a sandbox not built yet: killed with its process
/// group and reaped should building the sandbox fail before it owns it, so that a server that
/// keeps running is left no zombie.
#[derive(Debug)]
pub(crate) struct Unowned(Option<LauncherChild>);

impl Unowned {
    pub(crate) fn new(child: LauncherChild) -> Self {
        Self(Some(child))
    }

    /// The launcher's process id (0 once owned).
    pub(crate) fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, LauncherChild::id)
    }

    /// Hands the launcher to the sandbox that now owns it.
    fn own(mut self) -> Option<LauncherChild> {
        self.0.take()
    }
}

impl Drop for Unowned {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            // The launcher leads its own group (`process_group(0)` at spawn).
            if let Ok(pgid) = i32::try_from(child.id()) {
                hookbox_process::kill_group(pgid);
            }
            let _ = child.wait();
        }
    }
}

/// A call started in a warm sandbox: a [`Spawned`] that ends when the call's init has (and with
/// it, its whole PID namespace), and what the call reported on its status channel by then.
pub struct Call {
    spawned: Spawned,
    status: tokio::sync::oneshot::Receiver<CallStatus>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").finish_non_exhaustive()
    }
}

impl Call {
    /// Supervises the call (started at `started`) to its end with `hookbox_process`'s bounds
    /// (`stdin`, `timeout`, `output_limit`); its output and stage timings, or the failure its
    /// init reported (a call that could not be confined or exec'd ran nothing).
    pub async fn supervise(
        self,
        started: std::time::Instant,
        stdin: Vec<u8>,
        timeout: Duration,
        output_limit: usize,
    ) -> Result<(hookbox_process::CommandOutput, Vec<(String, i128)>), SandboxError> {
        let output =
            hookbox_process::supervise_spawned(self.spawned, started, stdin, timeout, output_limit)
                .await;
        let status = self.status.await.unwrap_or_default();
        if let Some(failure) = status.failure {
            return Err(failure.into());
        }
        Ok((output?, status.stages))
    }
}

/// How hookbox sees one call end and ends it: through its reply socket. Its host says `X` there
/// once every process of the call was reaped (or gVisor's init, for a host that died), and
/// kills the call when hookbox shuts its end down or closes it. A namespaces call also comes with its
/// host's pidfd: a host that died without `X` (its end of the socket closed) is waited for
/// there, since a pidfd reports only once the host's whole PID namespace is gone. The pidfd is
/// never signalled: the host outlives the call, and may be running another one by then.
#[derive(Debug, Clone)]
enum CallHandle {
    Host {
        reply: Arc<AsyncFd<OwnedFd>>,
        host: Pidfd,
    },
    Reply(Arc<AsyncFd<OwnedFd>>),
    /// A call process of a launcher from before call hosts: its end is its pidfd's, and its
    /// kill a signal to it (its whole PID namespace goes with it).
    Pidfd(Pidfd),
}

impl CallHandle {
    async fn ended(&self) -> std::io::Result<()> {
        let (reply, host) = match self {
            CallHandle::Host { reply, host } => (reply, Some(host)),
            CallHandle::Reply(reply) => (reply, None),
            CallHandle::Pidfd(pidfd) => return pidfd.exited().await,
        };
        loop {
            let message = recv_on(reply).await?;
            if message.payload == b"X" {
                return Ok(());
            }
            if message.payload.is_empty() && message.fds.is_empty() {
                return match host {
                    Some(host) => host.exited().await,
                    None => Ok(()),
                };
            }
        }
    }

    fn kill(&self) {
        match self {
            CallHandle::Host { reply, .. } | CallHandle::Reply(reply) => {
                let _ = rustix::net::shutdown(reply.get_ref(), rustix::net::Shutdown::Write);
            }
            CallHandle::Pidfd(pidfd) => pidfd.kill(),
        }
    }
}

/// Kills a call's PID namespace when dropped (harmless once it has ended).
struct KillOnDrop(CallHandle);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.kill();
    }
}

/// Serves a gVisor sandbox's egress channel: each `E` asks for one connection to the proxy,
/// answered with (`F`) one end of a fresh socket pair whose other end goes to `sink`.
async fn serve_relayed(channel: OwnedFd, sink: RelaySink) {
    let channel = match rustix::io::ioctl_fionbio(&channel, true)
        .map_err(std::io::Error::from)
        .and_then(|()| register(channel, Interest::READABLE | Interest::WRITABLE))
    {
        Ok(channel) => channel,
        Err(error) => {
            tracing::error!(%error, "gVisor egress channel");
            return;
        }
    };
    loop {
        match recv_on(&channel).await {
            Ok(message) if message.payload == b"E" => {}
            _ => return,
        }
        let (ours, theirs) = match std::os::unix::net::UnixStream::pair() {
            Ok(pair) => pair,
            Err(error) => {
                tracing::warn!(%error, "gVisor egress relay: no socket pair");
                continue;
            }
        };
        let served = ours
            .set_nonblocking(true)
            .and_then(|()| tokio::net::UnixStream::from_std(ours));
        match served {
            Ok(stream) => sink(stream),
            Err(error) => tracing::warn!(%error, "gVisor egress relay"),
        }
        let theirs = OwnedFd::from(theirs);
        loop {
            let Ok(mut guard) = channel.writable().await else {
                return;
            };
            match guard.try_io(|s| fdpass::send(s.get_ref().as_fd(), b"F", &[theirs.as_fd()])) {
                Ok(Ok(())) => break,
                Ok(Err(_)) => return,
                Err(_would_block) => continue,
            }
        }
    }
}

/// One message from a non-blocking socket, waiting for it to be readable.
async fn recv_on(socket: &AsyncFd<OwnedFd>) -> std::io::Result<fdpass::Message> {
    loop {
        let mut guard = socket.readable().await?;
        match guard.try_io(|s| fdpass::recv(s.get_ref())) {
            Ok(result) => return result,
            Err(_would_block) => continue,
        }
    }
}

/// Registers an owned descriptor with the reactor.
fn register<T: AsRawFd>(fd: T, interest: Interest) -> std::io::Result<AsyncFd<T>> {
    // SAFETY: `fd` owns its descriptor (an OwnedFd, or an Arc of one), so it stays open and the
    // same for as long as the AsyncFd holds it.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(|e| e.into_parts().1)
}

impl Drop for WarmSandbox {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A failure of the warm sandbox's socket protocol, seen from hookbox's side.
fn warm_socket(errno: Option<i32>, message: impl Into<String>) -> LaunchFailure {
    LaunchFailure::new(Stage::WarmSocket, errno, message)
}
