//! The bounds every sandboxed program runs within, cold and in a warm sandbox: the time-out
//! takes the whole sandbox (a grandchild holding stdout included) and output past the cap is
//! cut with the program killed.

use std::time::Duration;

use hookbox_process::Termination;

use super::support::*;

/// Starts a grandchild that holds stdout, says so, and never ends by itself.
const HOLDS_STDOUT: &str = "sleep 3600 & echo started; exec sleep 3600";

/// Runs [`HOLDS_STDOUT`] with growing time-outs until one lets it say it started (a run killed
/// before that proves nothing): the test waits for that event, not for a clock; only a hung run
/// fails the bound.
async fn until_started<F, Fut>(mut run: F) -> hookbox_process::CommandOutput
where
    F: FnMut(Duration) -> Fut,
    Fut: std::future::Future<Output = hookbox_process::CommandOutput>,
{
    let mut timeout = Duration::from_millis(500);
    loop {
        let out = run(timeout).await;
        // Whenever it was killed, it was killed by the time-out: it never ends on its own.
        assert_eq!(out.termination, Termination::TimedOut);
        if out.stdout == b"started\n" {
            return out;
        }
        assert!(
            timeout < Duration::from_secs(60),
            "the program never started within a {timeout:?} time-out"
        );
        timeout *= 2;
    }
}

#[tokio::test]
async fn a_time_out_kills_the_whole_sandbox_even_a_grandchild_holding_stdout() {
    let t = tree(&["/bin/sh", "-c", HOLDS_STDOUT]);
    let out = until_started(|timeout| {
        let spec = t.spec.clone();
        async move { cold(&spec, timeout, 1024).await.unwrap() }
    })
    .await;
    // EOF on both pipes: every process that held them, the grandchild too, is gone.
    assert!(
        !out.stdout_truncated && !out.stderr_truncated,
        "a process outlived the time-out and held the pipes"
    );

    let sandbox = warm(&t.spec).await.unwrap();
    let out = until_started(|timeout| {
        let (sandbox, spec) = (&sandbox, t.spec.clone());
        async move { warm_call(sandbox, &spec, timeout, 1024).await.unwrap() }
    })
    .await;
    assert!(
        !out.stdout_truncated && !out.stderr_truncated,
        "a process of the call outlived the time-out and held the pipes"
    );
    // The warm sandbox outlives its killed call.
    let mut next = t.spec.clone();
    next.argv = vec!["/bin/sh".into(), "-c".into(), "echo next".into()];
    let out = warm_call(&sandbox, &next, Duration::from_secs(60), 1024)
        .await
        .unwrap();
    assert_eq!(text(&out.stdout), "next\n");
    stop(sandbox).await;
}

#[tokio::test]
async fn output_past_the_cap_is_cut_and_the_sandbox_killed() {
    let t = tree(&["/bin/sh", "-c", "yes"]);
    let timeout = Duration::from_secs(60);
    let out = cold(&t.spec, timeout, 4096).await.unwrap();
    assert_eq!(out.termination, Termination::OutputLimit);
    assert_eq!(out.stdout.len(), 4096);
    assert!(out.stdout_truncated);

    let sandbox = warm(&t.spec).await.unwrap();
    let out = warm_call(&sandbox, &t.spec, timeout, 4096).await.unwrap();
    assert_eq!(out.termination, Termination::OutputLimit);
    assert_eq!(out.stdout.len(), 4096);
    assert!(out.stdout_truncated);
    stop(sandbox).await;
}
