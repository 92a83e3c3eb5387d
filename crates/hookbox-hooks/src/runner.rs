//! How a command handler's shell line becomes a bounded process.
//!
//! [`CommandRunner`] is the seam between the hooks engine and wherever commands run: the
//! [`LocalRunner`] here spawns `/bin/sh -c` on the host (used where no sandbox is wanted), and
//! `hookbox-sandbox` implements the same trait to run handlers inside an environment.
//! [`supervise`] is the one place that bounds a process: stdin written without blocking on a
//! handler that never reads it, stdout/stderr capped, the whole process group killed on timeout,
//! on output overflow and after the leader exits (so a grandchild holding a pipe cannot stall us).
//!
//! This module must not interpret output; deciding what output means is the engine's job.

use std::fmt;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::watch;

/// Default cap on each of stdout and stderr captured from a handler.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1024 * 1024;

/// How long to keep draining pipes after the process group was killed. Only an escaped process
/// (one that left the group) can hold a pipe open past the kill; this bounds the wait for it.
const DRAIN_GRACE: Duration = Duration::from_millis(250);

/// One command to run.
#[derive(Debug, Clone)]
pub struct CommandRequest {
    /// The shell line, run as `/bin/sh -c <command>`.
    pub command: String,
    /// Written to the process's stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// Wall-clock limit for the whole process tree.
    pub timeout: Duration,
    /// Cap on each of stdout and stderr, in bytes.
    pub output_limit: usize,
}

/// How a supervised process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// The leader exited with this status code.
    Exited(i32),
    /// The leader was killed by this signal (not by us).
    Signaled(i32),
    /// The timeout ran out; the process group was killed.
    TimedOut,
    /// stdout or stderr went past the output limit; the process group was killed.
    OutputLimit,
}

impl fmt::Display for Termination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Termination::Exited(code) => write!(f, "exited with status {code}"),
            Termination::Signaled(sig) => write!(f, "killed by signal {sig}"),
            Termination::TimedOut => f.write_str("timed out"),
            Termination::OutputLimit => f.write_str("output limit exceeded"),
        }
    }
}

/// What a supervised process produced.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    pub termination: Termination,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration: Duration,
}

impl CommandOutput {
    /// True when the leader exited with status 0.
    pub fn success(&self) -> bool {
        self.termination == Termination::Exited(0)
    }
}

/// Errors that stop a command from running at all.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("could not start the process: {0}")]
    Spawn(#[source] io::Error),
    #[error("could not wait for the process: {0}")]
    Wait(#[source] io::Error),
    #[error("the sandbox refused to run the command: {0}")]
    Sandbox(String),
}

/// Runs a command handler's shell line somewhere, bounded.
#[async_trait]
pub trait CommandRunner: Send + Sync + fmt::Debug {
    async fn run(&self, request: CommandRequest) -> Result<CommandOutput, RunnerError>;
}

/// Runs commands directly on the host through `/bin/sh -c`, in a fresh process group, with the
/// given working directory. No isolation at all: for tests and for `--insecure-no-isolation`.
#[derive(Debug, Clone, Default)]
pub struct LocalRunner {
    pub cwd: Option<std::path::PathBuf>,
    pub env: Vec<(String, String)>,
}

#[async_trait]
impl CommandRunner for LocalRunner {
    async fn run(&self, request: CommandRequest) -> Result<CommandOutput, RunnerError> {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(&request.command);
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        supervise(cmd, request.stdin, request.timeout, request.output_limit).await
    }
}

/// Spawns `cmd` in its own process group and supervises it to the end.
///
/// The caller configures program, arguments, environment and working directory; this function
/// owns stdio, the process group and every bound.
pub async fn supervise(
    mut cmd: Command,
    stdin: Vec<u8>,
    timeout: Duration,
    output_limit: usize,
) -> Result<CommandOutput, RunnerError> {
    let started = Instant::now();
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(RunnerError::Spawn)?;
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let group = ProcessGroup(pgid);

    // A handler may never read stdin; writing happens on its own task so it cannot block us,
    // and a broken pipe is expected rather than an error.
    let stdin_task = child.stdin.take().map(|mut pipe| {
        tokio::spawn(async move {
            let _ = pipe.write_all(&stdin).await;
            let _ = pipe.shutdown().await;
        })
    });

    let (overflow_tx, mut overflow_rx) = watch::channel(false);
    let (stdout_sink, stdout_task) =
        spawn_reader(child.stdout.take(), output_limit, overflow_tx.clone());
    let (stderr_sink, stderr_task) = spawn_reader(child.stderr.take(), output_limit, overflow_tx);

    let deadline = tokio::time::Instant::from_std(started + timeout);
    let termination = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => termination_of(status),
            Err(err) => {
                group.kill();
                return Err(RunnerError::Wait(err));
            }
        },
        _ = tokio::time::sleep_until(deadline) => Termination::TimedOut,
        () = overflowed(&mut overflow_rx) => Termination::OutputLimit,
    };

    // Overflow wins over an exit that raced with it: the reader closing its end may itself
    // have ended the writer (SIGPIPE).
    let termination = if *overflow_rx.borrow() {
        Termination::OutputLimit
    } else {
        termination
    };

    // Whatever ended the run, nothing of the handler's tree may outlive it.
    group.kill();
    if termination == Termination::TimedOut || termination == Termination::OutputLimit {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    if let Some(task) = stdin_task {
        task.abort();
    }

    let (stdout, stdout_truncated) = collect(stdout_sink, stdout_task).await;
    let (stderr, stderr_truncated) = collect(stderr_sink, stderr_task).await;
    Ok(CommandOutput {
        termination,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        duration: started.elapsed(),
    })
}

/// Resolves when a reader flags overflow; never when the readers finish without one.
async fn overflowed(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|overflowed| *overflowed).await.is_err() {
        // Both readers ended cleanly and dropped their senders: no overflow can come.
        std::future::pending::<()>().await;
    }
}

/// A process group we created; killing it is idempotent and best effort.
struct ProcessGroup(Option<i32>);

impl ProcessGroup {
    fn kill(&self) {
        if let Some(pgid) = self.0 {
            // ESRCH (group already gone) is the common, harmless case.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

fn termination_of(status: ExitStatus) -> Termination {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Termination::Exited(code),
        (None, Some(sig)) => Termination::Signaled(sig),
        (None, None) => Termination::Exited(-1),
    }
}

/// What a reader task has captured so far; shared so that a reader abandoned after the drain
/// grace still leaves its bytes behind.
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    truncated: bool,
}

type SharedCapture = std::sync::Arc<std::sync::Mutex<Captured>>;

/// Reads until EOF or until `limit` bytes; past the limit it flags overflow and stops reading.
async fn read_capped<R: AsyncRead + Unpin>(
    mut pipe: R,
    limit: usize,
    sink: SharedCapture,
    overflow: watch::Sender<bool>,
) {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Ok(mut captured) = sink.lock() else {
            return;
        };
        let room = limit.saturating_sub(captured.bytes.len());
        if n > room {
            captured.bytes.extend_from_slice(&chunk[..room]);
            captured.truncated = true;
            drop(captured);
            let _ = overflow.send(true);
            return;
        }
        captured.bytes.extend_from_slice(&chunk[..n]);
    }
}

fn spawn_reader<R: AsyncRead + Unpin + Send + 'static>(
    pipe: Option<R>,
    limit: usize,
    overflow: watch::Sender<bool>,
) -> (SharedCapture, Option<tokio::task::JoinHandle<()>>) {
    let sink = SharedCapture::default();
    let task = pipe.map(|pipe| tokio::spawn(read_capped(pipe, limit, sink.clone(), overflow)));
    (sink, task)
}

async fn collect(
    sink: SharedCapture,
    task: Option<tokio::task::JoinHandle<()>>,
) -> (Vec<u8>, bool) {
    let mut escaped = false;
    if let Some(mut task) = task {
        if tokio::time::timeout(DRAIN_GRACE, &mut task).await.is_err() {
            // A process that escaped the group still holds the pipe: keep what we have.
            task.abort();
            escaped = true;
        }
    }
    match sink.lock() {
        Ok(mut captured) => (
            std::mem::take(&mut captured.bytes),
            captured.truncated || escaped,
        ),
        Err(_) => (Vec::new(), true),
    }
}
