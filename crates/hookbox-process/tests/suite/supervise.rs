//! [`hookbox_process::supervise`] and [`hookbox_process::supervise_spawned`] on real processes:
//! what escapes the process group, what the tap sees, and the typed errors.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookbox_process::pidfd::Pidfd;
use hookbox_process::{ProcessError, Spawned, Termination, supervise, supervise_with_tap};
use tokio::process::Command;

fn sh(script: &str) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(script);
    cmd
}

// A process that left the group (setsid) survives the group's kill and holds stdout open: the
// run still ends (after the drain grace), with every byte written before the leader exited, and
// says the output may be incomplete.
#[tokio::test]
async fn a_process_that_escaped_the_group_cannot_stall_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("escaped.pid");
    // The leader learns the escaped process's pid through a FIFO (a read that waits for the
    // write), records it, and exits; the escaped process keeps stdout.
    let script = format!(
        "mkfifo {fifo}; setsid sh -c 'echo $$ > {fifo}; exec sleep 3600' & \
         read pid < {fifo}; echo $pid > {pid}; echo decided",
        fifo = dir.path().join("pid.fifo").display(),
        pid = pidfile.display()
    );
    let out = supervise(sh(&script), Vec::new(), Duration::from_secs(600), 1024)
        .await
        .unwrap();
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The escaped process is not ours to keep: end it before asserting anything.
    let escaped = Pidfd::open(pid);
    if let Ok(escaped) = &escaped {
        escaped.kill();
    }
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.stdout, b"decided\n");
    assert!(out.stdout_truncated, "the pipe never reached EOF");
    escaped.unwrap().exited().await.unwrap();
}

#[tokio::test]
async fn the_tap_sees_stdout_as_captured_never_past_the_limit() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tap = {
        let seen = seen.clone();
        Arc::new(move |chunk: &[u8]| seen.lock().unwrap().extend_from_slice(chunk))
    };
    let out = supervise_with_tap(
        sh("head -c 100000 /dev/zero | tr '\\0' x"),
        Vec::new(),
        Duration::from_secs(60),
        4096,
        Some(tap),
    )
    .await
    .unwrap();
    assert_eq!(out.termination, Termination::OutputLimit);
    assert_eq!(*seen.lock().unwrap(), out.stdout);
    assert_eq!(out.stdout, vec![b'x'; 4096]);
}

#[tokio::test]
async fn a_program_that_cannot_start_is_a_typed_spawn_error() {
    let err = supervise(
        Command::new("/nonexistent/hookbox-test-program"),
        Vec::new(),
        Duration::from_secs(5),
        1024,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ProcessError::Spawn(_)), "{err}");
    assert_eq!(err.errno(), Some(libc::ENOENT));
    assert!(!err.is_transient());
}

// A tree handed over by someone else (as a warm sandbox's call is) whose end cannot be waited
// for is killed, and the failure is a typed wait error.
#[tokio::test]
async fn a_spawned_tree_whose_wait_fails_is_killed() {
    let mut child = std::process::Command::new("sleep")
        .arg("3600")
        .spawn()
        .unwrap();
    let pidfd = Pidfd::open(child.id()).unwrap();
    let spawned = Spawned {
        stdin: None,
        stdout: None,
        stderr: None,
        ended: Box::pin(async { Err(std::io::Error::from_raw_os_error(libc::ECHILD)) }),
        kill: Box::new({
            let pidfd = pidfd.clone();
            move || pidfd.kill()
        }),
        stdout_tap: None,
        writers_gone_at_end: false,
    };
    let err = hookbox_process::supervise_spawned(
        spawned,
        Instant::now(),
        Vec::new(),
        Duration::from_secs(3600),
        1024,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ProcessError::Wait(_)), "{err}");
    assert!(!err.is_transient());
    pidfd.exited().await.unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
}

// Nothing to write is the end of input at once (the pipe closed without a task writing nothing
// first): a program reading its stdin to the end ends with what it read, nothing; given input,
// it reads all of it.
#[tokio::test]
async fn a_program_reading_its_stdin_to_the_end_sees_empty_input_end_and_given_input_whole() {
    // A stdin left open would end this at its timeout instead.
    let out = supervise(sh("wc -c"), Vec::new(), Duration::from_secs(20), 1024)
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    let out = supervise(
        sh("wc -c"),
        vec![b'x'; 100_000],
        Duration::from_secs(600),
        1024,
    )
    .await
    .unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "100000");
}
