//! Supervising one process tree to its end, bounded.
//!
//! [`supervise`] spawns a [`Command`] in a fresh process group; [`supervise_spawned`] takes a
//! tree started by someone else (a warm sandbox's call) as a [`Spawned`]: its pipes, how to learn
//! that it ended, how to kill it. Either way this module owns stdio and every bound: stdin
//! written on its own task when there is any (a program that never reads it cannot block us, a
//! broken pipe is expected; none is closed at once), stdout and stderr capped, the whole tree
//! killed at the time-out, on output overflow and once the leader ended (so a grandchild
//! holding a pipe cannot stall us), and the pipes drained within [`DRAIN_GRACE`] after that.
//!
//! This module must not interpret output; deciding what output means is the caller's job.

use std::fmt;
use std::future::Future;
use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::watch;

use crate::ProcessError;

/// Default cap on each of stdout and stderr captured from a handler.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1024 * 1024;

/// How long to keep draining pipes after the process group was killed. Only an escaped process
/// (one that left the group) can hold a pipe open past the kill; this bounds the wait for it.
pub const DRAIN_GRACE: Duration = Duration::from_millis(250);

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

/// Spawns `cmd` in its own process group and supervises it to the end.
///
/// The caller configures program, arguments, environment and working directory; this function
/// owns stdio, the process group and every bound.
pub async fn supervise(
    cmd: Command,
    stdin: Vec<u8>,
    timeout: Duration,
    output_limit: usize,
) -> Result<CommandOutput, ProcessError> {
    supervise_with_tap(cmd, stdin, timeout, output_limit, None).await
}

/// Sees each chunk of a process's stdout as it is captured (never more than the output limit).
pub type OutputTap = std::sync::Arc<dyn Fn(&[u8]) + Send + Sync>;

/// [`supervise`], with `tap` seeing stdout as it is produced.
pub async fn supervise_with_tap(
    mut cmd: Command,
    stdin: Vec<u8>,
    timeout: Duration,
    output_limit: usize,
    tap: Option<OutputTap>,
) -> Result<CommandOutput, ProcessError> {
    let started = Instant::now();
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(ProcessError::Spawn)?;
    // The child leads its own group (`process_group(0)`), so its pid is the group's id.
    let group = child.id().and_then(|id| i32::try_from(id).ok());
    let spawned = Spawned {
        stdin: child
            .stdin
            .take()
            .map(|p| Box::new(p) as Box<dyn AsyncWrite + Send + Unpin>),
        stdout: child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn OutputPipe>),
        stderr: child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn OutputPipe>),
        // Killing the group (whose leader is the child) ends this wait too.
        ended: Box::pin(async move { child.wait().await.map(termination_of) }),
        kill: Box::new(move || {
            if let Some(pgid) = group {
                kill_group(pgid);
            }
        }),
        stdout_tap: tap,
        writers_gone_at_end: false,
    };
    supervise_spawned(spawned, started, stdin, timeout, output_limit).await
}

/// A readable end of a process's stdout or stderr.
pub trait OutputPipe: AsyncRead + AsFd + Unpin + Send {}
impl<T: AsyncRead + AsFd + Unpin + Send> OutputPipe for T {}

/// A process tree started by someone else (a local child, or a call of a warm sandbox), handed
/// to [`supervise_spawned`] to be bounded: its pipes, how to learn that it ended, how to kill it.
pub struct Spawned {
    pub stdin: Option<Box<dyn AsyncWrite + Send + Unpin>>,
    pub stdout: Option<Box<dyn OutputPipe>>,
    pub stderr: Option<Box<dyn OutputPipe>>,
    /// Resolves once the tree's leader has ended, with how it ended. Must also resolve after
    /// `kill`.
    pub ended: Pin<Box<dyn Future<Output = io::Result<Termination>> + Send>>,
    /// Kills the whole tree; idempotent and best effort.
    pub kill: Box<dyn Fn() + Send + Sync>,
    /// Sees stdout as it is captured.
    pub stdout_tap: Option<OutputTap>,
    /// When `ended` resolves, no writer of stdout or stderr is left (the runtime saw the whole
    /// tree go), so what is in the pipes then is all there is: they are drained at once
    /// instead of waiting for EOF. For runtimes whose pipes reach EOF late (gVisor releases a
    /// host descriptor after the process that held it is gone).
    pub writers_gone_at_end: bool,
}

impl fmt::Debug for Spawned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spawned").finish_non_exhaustive()
    }
}

/// Supervises `spawned` (started at `started`) to the end: `stdin` written without blocking
/// on a process that never reads it, stdout/stderr capped at `output_limit`, the tree killed at
/// `timeout`, on overflow and once the leader ended.
pub async fn supervise_spawned(
    spawned: Spawned,
    started: Instant,
    stdin: Vec<u8>,
    timeout: Duration,
    output_limit: usize,
) -> Result<CommandOutput, ProcessError> {
    let Spawned {
        stdin: stdin_pipe,
        stdout,
        stderr,
        mut ended,
        kill,
        stdout_tap,
        writers_gone_at_end,
    } = spawned;
    // A handler may never read stdin; writing happens on its own task so it cannot block us,
    // and a broken pipe is expected rather than an error. With nothing to write (a tool call's
    // program) the pipe is closed at once: the same end of input, without a task.
    let stdin_pipe = stdin_pipe.filter(|_| !stdin.is_empty());
    let stdin_task = stdin_pipe.map(|mut pipe| {
        tokio::spawn(async move {
            let _ = pipe.write_all(&stdin).await;
            let _ = pipe.shutdown().await;
        })
    });

    let (overflow_tx, mut overflow_rx) = watch::channel(false);
    let stdout_reader = spawn_tapped_reader(stdout, output_limit, overflow_tx.clone(), stdout_tap);
    let stderr_reader = spawn_reader(stderr, output_limit, overflow_tx);

    let deadline = tokio::time::Instant::from_std(started + timeout);
    // A finished future must not be polled again: remember whether the leader's end was seen.
    let mut leader_ended = false;
    let termination = tokio::select! {
        status = &mut ended => match status {
            Ok(termination) => {
                leader_ended = true;
                termination
            }
            Err(err) => {
                kill();
                return Err(ProcessError::Wait(err));
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
    kill();
    if !leader_ended {
        let _ = ended.await;
    }
    if let Some(task) = stdin_task {
        task.abort();
    }

    // `ended` has resolved by now on every path (the leader ended, or was killed and seen to).
    let drain_now = writers_gone_at_end;
    let (stdout, stdout_truncated) = collect(stdout_reader, drain_now).await;
    let (stderr, stderr_truncated) = collect(stderr_reader, drain_now).await;
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

/// Kills process group `pgid` with SIGKILL: idempotent and best effort (a group already gone,
/// `ESRCH`, is the common, harmless case). Only for groups the caller created.
pub fn kill_group(pgid: i32) {
    if pgid > 0 {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// How a child's exit status reads as a [`Termination`].
pub fn termination_of(status: ExitStatus) -> Termination {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Termination::Exited(code),
        (None, Some(sig)) => Termination::Signaled(sig),
        (None, None) => Termination::Exited(-1),
    }
}

/// What a reader task has captured so far; shared so that the caller reads it once the task is
/// done.
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    truncated: bool,
    tap: Option<OutputTap>,
}

type SharedCapture = std::sync::Arc<std::sync::Mutex<Captured>>;

/// Appends `bytes` to `sink` up to `limit`; `false` (and the overflow flag) past it.
fn capture(
    sink: &SharedCapture,
    limit: usize,
    bytes: &[u8],
    overflow: &watch::Sender<bool>,
) -> bool {
    let mut captured = sink.lock().unwrap_or_else(|p| p.into_inner());
    let room = limit.saturating_sub(captured.bytes.len());
    let kept = &bytes[..bytes.len().min(room)];
    captured.bytes.extend_from_slice(kept);
    if let Some(tap) = &captured.tap
        && !kept.is_empty()
    {
        tap(kept);
    }
    if bytes.len() > room {
        captured.truncated = true;
        drop(captured);
        let _ = overflow.send(true);
        return false;
    }
    true
}

/// How much of a stream [`read_capped`] takes per read.
const CHUNK: usize = 64 * 1024;

/// Reads until EOF or until `limit` bytes (then it flags overflow and stops). When `stop` is
/// raised (the drain grace ran out: a process that left the group may hold the pipe forever),
/// it takes everything already in the pipe with non-blocking reads and returns: bytes the
/// handler wrote before it exited are never lost to a reader that was scheduled late.
/// Returns whether the pipe reached EOF.
async fn read_capped<R: AsyncRead + AsFd + Unpin>(
    mut pipe: R,
    limit: usize,
    sink: SharedCapture,
    overflow: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) -> bool {
    // Every read goes into its spare capacity (`read_buf`; the drain's reads likewise), which is
    // never zeroed: a zeroed 64 KiB per stream per call was 1 % of a loaded server's CPU.
    // Emptied after each read.
    let mut chunk: Vec<u8> = Vec::with_capacity(CHUNK);
    loop {
        tokio::select! {
            biased;
            read = pipe.read_buf(&mut chunk) => {
                let n = match read {
                    Ok(0) | Err(_) => return true,
                    Ok(n) => n,
                };
                let kept = capture(&sink, limit, &chunk[..n], &overflow);
                chunk.clear();
                if !kept {
                    return true;
                }
            }
            _ = stop.wait_for(|stop| *stop) => {
                // tokio made the pipe non-blocking, so these reads end at "empty for now".
                loop {
                    chunk.clear();
                    let read = rustix::io::read(
                        pipe.as_fd(),
                        rustix::buffer::spare_capacity(&mut chunk),
                    );
                    match read {
                        Ok(0) => return true,
                        Ok(n) => {
                            if !capture(&sink, limit, &chunk[..n], &overflow) {
                                return true;
                            }
                        }
                        Err(rustix::io::Errno::INTR) => continue,
                        Err(_) => return false,
                    }
                }
            }
        }
    }
}

/// A reader task and the switch that tells it to drain and stop.
struct Reader {
    sink: SharedCapture,
    task: Option<tokio::task::JoinHandle<bool>>,
    stop: watch::Sender<bool>,
}

fn spawn_reader<R: AsyncRead + AsFd + Unpin + Send + 'static>(
    pipe: Option<R>,
    limit: usize,
    overflow: watch::Sender<bool>,
) -> Reader {
    spawn_tapped_reader(pipe, limit, overflow, None)
}

fn spawn_tapped_reader<R: AsyncRead + AsFd + Unpin + Send + 'static>(
    pipe: Option<R>,
    limit: usize,
    overflow: watch::Sender<bool>,
    tap: Option<OutputTap>,
) -> Reader {
    let sink = SharedCapture::new(std::sync::Mutex::new(Captured {
        tap,
        ..Captured::default()
    }));
    let (stop, stop_rx) = watch::channel(false);
    let task =
        pipe.map(|pipe| tokio::spawn(read_capped(pipe, limit, sink.clone(), overflow, stop_rx)));
    Reader { sink, task, stop }
}

/// Waits for the reader to reach EOF; past [`DRAIN_GRACE`] it tells it to take what is in the
/// pipe and stop. `truncated` when the output hit the limit or the pipe never reached EOF.
/// `drain_now`: no writer is left, so the reader takes what is in the pipe at once, and that
/// counts as EOF.
async fn collect(reader: Reader, drain_now: bool) -> (Vec<u8>, bool) {
    let Reader { sink, task, stop } = reader;
    let mut escaped = false;
    if let Some(mut task) = task {
        if drain_now {
            let _ = stop.send(true);
            let _ = task.await;
            let mut captured = sink.lock().unwrap_or_else(|p| p.into_inner());
            let truncated = captured.truncated;
            return (std::mem::take(&mut captured.bytes), truncated);
        }
        let eof = match tokio::time::timeout(DRAIN_GRACE, &mut task).await {
            Ok(done) => done.unwrap_or(false),
            Err(_) => {
                let _ = stop.send(true);
                task.await.unwrap_or(false)
            }
        };
        escaped = !eof;
    }
    let mut captured = sink.lock().unwrap_or_else(|p| p.into_inner());
    (
        std::mem::take(&mut captured.bytes),
        captured.truncated || escaped,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// A pipe whose write end stays open (as when a process that left the group holds it), with
    /// `bytes` already written into it.
    fn held_pipe(bytes: &[u8]) -> (tokio::net::unix::pipe::Receiver, std::fs::File) {
        let (read, write) = nix::unistd::pipe().unwrap();
        let mut write = std::fs::File::from(write);
        write.write_all(bytes).unwrap();
        let read = tokio::net::unix::pipe::Receiver::from_owned_fd(read).unwrap();
        (read, write)
    }

    // Regression: a reader that had not yet read when the drain grace ran out was aborted, and
    // a handler's decision sitting in the pipe was reported as "printed nothing" (fail open).
    #[tokio::test]
    async fn a_stopped_reader_still_takes_what_is_in_the_pipe() {
        let (read, _holder) = held_pipe(b"{\"decision\":\"deny\",\"reason\":\"r\"}\n");
        let (overflow, _overflow_rx) = watch::channel(false);
        let (stop, stop_rx) = watch::channel(true);
        let sink = SharedCapture::default();
        // Stopped before its first poll: it must drain, not give up.
        let eof = read_capped(read, 1024, sink.clone(), overflow, stop_rx).await;
        drop(stop);
        assert!(!eof, "the holder keeps the pipe open");
        let captured = sink.lock().unwrap();
        assert_eq!(
            captured.bytes,
            b"{\"decision\":\"deny\",\"reason\":\"r\"}\n"
        );
        assert!(!captured.truncated);
    }

    // Issue 35: the reader reads into one buffer's spare capacity and empties it after each
    // read. A stream of many reads (a writer thread's pieces, none a multiple of the buffer)
    // arrives whole and in order.
    #[tokio::test]
    async fn a_stream_of_many_reads_arrives_whole_and_in_order() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let read = tokio::net::unix::pipe::Receiver::from_owned_fd(read).unwrap();
        let sent: Vec<u8> = (0..5 * CHUNK + 777).map(|i| (i % 251) as u8).collect();
        let pieces = sent.clone();
        let writer = std::thread::spawn(move || {
            let mut write = std::fs::File::from(write);
            for piece in pieces.chunks(10_007) {
                write.write_all(piece).unwrap();
            }
        });
        let (overflow, _overflow_rx) = watch::channel(false);
        let reader = spawn_reader(Some(read), sent.len() + 1, overflow);
        // The writer's end is closed before `collect` starts its drain grace: only reads are
        // left, never a wait for the writer.
        tokio::task::spawn_blocking(move || writer.join().unwrap())
            .await
            .unwrap();
        let (bytes, truncated) = collect(reader, false).await;
        assert!(!truncated);
        assert_eq!(bytes.len(), sent.len());
        assert!(bytes == sent, "the bytes arrived changed or out of order");
    }

    #[tokio::test]
    async fn collect_reports_an_unfinished_pipe_as_truncated_with_its_bytes() {
        let (read, holder) = held_pipe(b"partial");
        let (overflow, _overflow_rx) = watch::channel(false);
        let reader = spawn_reader(Some(read), 1024, overflow);
        let (bytes, truncated) = collect(reader, false).await;
        assert_eq!(bytes, b"partial");
        assert!(truncated);
        drop(holder);
    }

    // A runtime that saw every writer go (gVisor closes host descriptors late): the pipe is
    // taken as it is, whole and not truncated, although its write end is still open here.
    #[tokio::test]
    async fn collect_with_every_writer_gone_takes_the_pipe_at_once_untruncated() {
        let (read, holder) = held_pipe(b"all of it");
        let (overflow, _overflow_rx) = watch::channel(false);
        let reader = spawn_reader(Some(read), 1024, overflow);
        let (bytes, truncated) = collect(reader, true).await;
        assert_eq!(bytes, b"all of it");
        assert!(!truncated);
        drop(holder);
    }
}
