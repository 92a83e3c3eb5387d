//! The host runner and `supervise`: bounds on time, output and process trees.

use std::time::Duration;

use hookbox_hooks::command::{CommandRequest, CommandRunner, LocalRunner, Termination};

fn request(command: &str, timeout: Duration, limit: usize) -> CommandRequest {
    CommandRequest {
        command: command.to_owned(),
        stdin: Vec::new(),
        timeout,
        output_limit: limit,
    }
}

/// Waits (bounded) for the process to exit, through a pidfd, so the check does not race with
/// the delivery of SIGKILL. True when it is gone.
fn is_gone(pid: &str) -> bool {
    let pid: libc::pid_t = pid.trim().parse().unwrap();
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    let fd = fd as libc::c_int;
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: pfd is a valid pollfd for the duration of the call; fd is closed right after.
    let ready = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd) };
    ready == 1
}

#[tokio::test]
async fn timeout_kills_the_whole_tree_including_a_grandchild_holding_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    // The handler never ends by itself within the test's bound (an hour's sleep). It says it started
    // only once its grandchild runs and "started" is written (the pid file appears last, by
    // rename), so a run killed before that proves nothing and is tried again with a doubled
    // time-out: the test waits for that event, not for a clock. Only a hung run fails the bound.
    let cmd = format!(
        "sleep 3600 & echo $! > {pid}.tmp; echo started; mv {pid}.tmp {pid}; exec sleep 3600",
        pid = pidfile.display()
    );
    let mut timeout = Duration::from_millis(300);
    let (out, pid) = loop {
        let out = LocalRunner::default()
            .run(request(&cmd, timeout, 1024))
            .await
            .unwrap();
        // Whenever it was killed, it was killed by the time-out: it never ends on its own.
        assert_eq!(out.termination, Termination::TimedOut);
        if let Ok(pid) = std::fs::read_to_string(&pidfile) {
            break (out, pid);
        }
        assert!(
            timeout < Duration::from_secs(60),
            "the handler never started within a {timeout:?} time-out"
        );
        timeout *= 2;
    };
    assert_eq!(out.stdout, b"started\n");
    assert!(is_gone(&pid), "grandchild {pid} survived the timeout");
}

#[tokio::test]
async fn a_background_child_holding_stdout_does_not_stall_after_the_leader_exits() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("bg.pid");
    let cmd = format!(
        "sleep 60 & echo $! > {}; echo '{{\"decision\":\"deny\"}}'",
        pidfile.display()
    );
    // Were we waiting for EOF on stdout, this would end in TimedOut after 60 s.
    let out = LocalRunner::default()
        .run(request(&cmd, Duration::from_secs(60), 1024))
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.stdout, b"{\"decision\":\"deny\"}\n");
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    assert!(is_gone(&pid), "background child {pid} outlived its hook");
}

#[tokio::test]
async fn output_past_the_limit_is_cut_and_the_process_killed() {
    // 100 MB of output against a 1 MiB cap.
    let out = LocalRunner::default()
        .run(request(
            "head -c 100000000 /dev/zero",
            Duration::from_secs(60),
            1024 * 1024,
        ))
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::OutputLimit);
    assert_eq!(out.stdout.len(), 1024 * 1024);
    assert!(out.stdout_truncated);
}

#[tokio::test]
async fn stderr_is_capped_too() {
    let out = LocalRunner::default()
        .run(request(
            "head -c 5000000 /dev/zero >&2",
            Duration::from_secs(60),
            4096,
        ))
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::OutputLimit);
    assert_eq!(out.stderr.len(), 4096);
}

#[tokio::test]
async fn a_handler_that_never_reads_stdin_does_not_block_the_writer() {
    // 8 MiB is far beyond a pipe's buffer; the write must not hold up the run.
    let mut req = request("echo ok", Duration::from_secs(60), 1024);
    req.stdin = vec![b'x'; 8 * 1024 * 1024];
    let out = LocalRunner::default().run(req).await.unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.stdout, b"ok\n");
}

#[tokio::test]
async fn stdin_reaches_the_handler_and_exit_codes_and_signals_are_reported() {
    let mut req = request("cat; exit 3", Duration::from_secs(60), 1024);
    req.stdin = b"payload".to_vec();
    let out = LocalRunner::default().run(req).await.unwrap();
    assert_eq!(out.termination, Termination::Exited(3));
    assert_eq!(out.stdout, b"payload");

    let out = LocalRunner::default()
        .run(request("kill -SEGV $$", Duration::from_secs(60), 1024))
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Signaled(11));
}

#[tokio::test]
async fn a_missing_working_directory_is_a_spawn_error() {
    let runner = LocalRunner {
        cwd: Some("/nonexistent/hookbox-test".into()),
        env: Vec::new(),
    };
    assert!(
        runner
            .run(request("true", Duration::from_secs(5), 1024))
            .await
            .is_err()
    );
}
