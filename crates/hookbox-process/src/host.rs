//! Trusted host tools (`mkfs.ext4`, `mount`, `cp`, `runsc`) run to completion within a deadline,
//! from synchronous code: the process is killed past it, and its stderr is drained on its own
//! thread (so a chatty program cannot block on a full pipe) with only the first
//! [`STDERR_KEEP`] bytes kept for the error. Sandboxed code never runs this way; it goes through
//! the launcher and [`crate::supervise`](mod@crate::supervise).

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How much of a failed program's stderr its error keeps.
pub const STDERR_KEEP: u64 = 4096;

/// How much of a program's stdout [`output`] keeps.
pub const STDOUT_KEEP: u64 = 64 * 1024;

/// Why a host tool did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// It could not be started.
    #[error("cannot run it: {0}")]
    Start(#[source] std::io::Error),
    /// It was still running at the deadline and was killed.
    #[error("timed out after {0:?}")]
    TimedOut(Duration),
    /// Waiting for it failed.
    #[error("{0}")]
    Wait(#[source] std::io::Error),
    /// It exited unsuccessfully; `stderr` is the start of what it said.
    #[error("{status}: {stderr}")]
    Failed { status: ExitStatus, stderr: String },
}

/// Runs `cmd` (stdin and stdout null) and waits at most `timeout`.
pub fn run(cmd: Command, timeout: Duration) -> Result<(), HostError> {
    run_capturing(cmd, timeout, false).map(drop)
}

/// [`run`], returning the first [`STDOUT_KEEP`] bytes of its stdout.
pub fn output(cmd: Command, timeout: Duration) -> Result<Vec<u8>, HostError> {
    run_capturing(cmd, timeout, true)
}

fn run_capturing(mut cmd: Command, timeout: Duration, stdout: bool) -> Result<Vec<u8>, HostError> {
    let mut child = cmd
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(if stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::piped())
        .spawn()
        .map_err(HostError::Start)?;
    let drain = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut kept = String::new();
            let _ = pipe.by_ref().take(STDERR_KEEP).read_to_string(&mut kept);
            let _ = std::io::copy(&mut pipe, &mut std::io::sink());
            kept
        })
    });
    let out = child.stdout.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let _ = pipe.by_ref().take(STDOUT_KEEP).read_to_end(&mut kept);
            let _ = std::io::copy(&mut pipe, &mut std::io::sink());
            kept
        })
    });
    let started = Instant::now();
    let status: ExitStatus = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HostError::TimedOut(timeout));
            }
            // Host tools finish in milliseconds; a short poll keeps this synchronous.
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(HostError::Wait(e)),
        }
    };
    let stderr = drain.and_then(|d| d.join().ok()).unwrap_or_default();
    let stdout = out.and_then(|d| d.join().ok()).unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        Err(HostError::Failed {
            status,
            stderr: stderr.trim().to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_failure_with_stderr_and_a_deadline() {
        run(Command::new("true"), Duration::from_secs(10)).unwrap();
        let mut echo = Command::new("echo");
        echo.arg("out");
        assert_eq!(output(echo, Duration::from_secs(10)).unwrap(), b"out\n");
        let mut loud = Command::new("sh");
        loud.args([
            "-c",
            "head -c 200000 /dev/zero | tr '\\\\0' x >&2; echo bad >&2; exit 3",
        ]);
        let err = run(loud, Duration::from_secs(10)).unwrap_err().to_string();
        assert!(err.contains("exit status: 3"), "{err}");
        assert!(err.len() < 5000, "only the start of stderr is kept");
        let mut slow = Command::new("sleep");
        slow.arg("30");
        let err = run(slow, Duration::from_millis(100))
            .unwrap_err()
            .to_string();
        assert!(err.contains("timed out"), "{err}");
    }
}
