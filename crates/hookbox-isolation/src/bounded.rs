//! Host helper programs (`mkfs.ext4`, `mount`, `cp`) run to completion within a deadline: the
//! process is killed past it, and its stderr is drained on its own thread (so a chatty program
//! cannot block on a full pipe) with only the first [`STDERR_KEEP`] bytes kept for the error.
//! This module runs trusted host tools only; sandboxed code goes through the launcher.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How much of a failed program's stderr its error keeps.
const STDERR_KEEP: u64 = 4096;

/// Runs `cmd` (stdin and stdout null) and waits at most `timeout`. `Err` says what went wrong:
/// it could not start, it was killed at the deadline, or its non-zero status and stderr.
pub fn run(cmd: Command, timeout: Duration) -> Result<(), String> {
    run_capturing(cmd, timeout, false).map(drop)
}

/// [`run`], returning the first [`STDOUT_KEEP`] bytes of its stdout.
pub fn output(cmd: Command, timeout: Duration) -> Result<Vec<u8>, String> {
    run_capturing(cmd, timeout, true)
}

/// How much of a program's stdout [`output`] keeps.
const STDOUT_KEEP: u64 = 64 * 1024;

fn run_capturing(mut cmd: Command, timeout: Duration, stdout: bool) -> Result<Vec<u8>, String> {
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
        .map_err(|e| format!("cannot run it: {e}"))?;
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
                return Err(format!("timed out after {timeout:?}"));
            }
            // Host tools finish in milliseconds; a short poll keeps this synchronous.
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let stderr = drain.and_then(|d| d.join().ok()).unwrap_or_default();
    let stdout = out.and_then(|d| d.join().ok()).unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        Err(format!("{status}: {}", stderr.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_failure_with_stderr_and_a_deadline() {
        assert_eq!(run(Command::new("true"), Duration::from_secs(10)), Ok(()));
        let mut echo = Command::new("echo");
        echo.arg("out");
        assert_eq!(output(echo, Duration::from_secs(10)).unwrap(), b"out\n");
        let mut loud = Command::new("sh");
        loud.args([
            "-c",
            "head -c 200000 /dev/zero | tr '\\\\0' x >&2; echo bad >&2; exit 3",
        ]);
        let err = run(loud, Duration::from_secs(10)).unwrap_err();
        assert!(err.contains("exit status: 3"), "{err}");
        assert!(err.len() < 5000, "only the start of stderr is kept");
        let mut slow = Command::new("sleep");
        slow.arg("30");
        let err = run(slow, Duration::from_millis(100)).unwrap_err();
        assert!(err.contains("timed out"), "{err}");
    }
}
