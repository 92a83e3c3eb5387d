//! A new warm sandbox's first call is handed over with the sandbox's spec
//! ([`WarmSandbox::start_with_call`]): the init finds it queued once it has built the sandbox,
//! with no wake-up of hookbox in between.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use hookbox_sandbox::Stage;
use hookbox_sandbox::runtime::Launcher;
use hookbox_sandbox::spec::Bind;
use hookbox_sandbox::warm::WarmSandbox;

use super::support::{launcher, stop, text, tree};

const TIMEOUT: Duration = Duration::from_secs(60);

/// An init that reads its first request before it says it is ready (it answers `R` only then),
/// runs the call as a child writing to the call's stdout and reporting exit status 0 on its
/// status channel, and replies with the child's pidfd. Waiting for `R` before sending the call
/// (as hookbox did) deadlocks against it until the start timeout.
const CALL_BEFORE_READY: &str = r#"#!/usr/bin/python3
import os, socket
requests = socket.socket(fileno=6)
payload, fds, _, _ = socket.recv_fds(requests, 4096, 16)
assert payload == b"C" and len(fds) == 6, (payload, len(fds))
spec, stdin, stdout, stderr, status, reply = fds
requests.send(b"R")
pid = os.fork()
if pid == 0:
    os.write(stdout, b"the call came before ready\n")
    os.write(status, b"\x1e0\n")
    os._exit(0)
for fd in (spec, stdin, stdout, stderr, status):
    os.close(fd)
socket.send_fds(socket.socket(fileno=reply), [b"P"], [os.pidfd_open(pid)])
os.waitpid(pid, 0)
requests.recv(16)
"#;

#[tokio::test]
async fn a_new_sandbox_gets_its_first_call_before_it_says_it_is_ready() {
    let dir = tempfile::tempdir().unwrap();
    let init = dir.path().join("call-before-ready");
    std::fs::write(&init, CALL_BEFORE_READY).unwrap();
    std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t = tree(&["/bin/true"]);
    let (key, call) = t.spec.split_call();
    let (sandbox, started) =
        WarmSandbox::start_with_call(&Launcher::standalone(&init), key, None, &call, None)
            .await
            .expect("the init answered ready once it had the call");
    let (out, _) = started
        .unwrap()
        .supervise(Instant::now(), Vec::new(), TIMEOUT, 1 << 16)
        .await
        .unwrap();
    assert_eq!(text(&out.stdout), "the call came before ready\n");
    assert!(out.success(), "{:?}", out.termination);
    stop(sandbox).await;
}

/// Through the real launcher: the call runs in the sandbox; a later call goes the usual way.
#[tokio::test]
async fn the_first_call_handed_over_with_the_spec_runs_in_the_sandbox() {
    let t = tree(&["/bin/sh", "-c", "echo ran; pwd"]);
    let (key, call) = t.spec.split_call();
    let (sandbox, started) = WarmSandbox::start_with_call(&launcher(), key, None, &call, None)
        .await
        .unwrap();
    let (out, _) = started
        .unwrap()
        .supervise(Instant::now(), Vec::new(), TIMEOUT, 1 << 16)
        .await
        .unwrap();
    assert_eq!(text(&out.stdout), "ran\n/workspace\n");
    let again = sandbox
        .call(&call, None)
        .await
        .unwrap()
        .supervise(Instant::now(), Vec::new(), TIMEOUT, 1 << 16)
        .await
        .unwrap()
        .0;
    assert_eq!(text(&again.stdout), "ran\n/workspace\n");
    stop(sandbox).await;
}

/// A sandbox that cannot be built reports the launcher's own failure, as without a queued
/// call, not a broken socket.
#[tokio::test]
async fn a_sandbox_that_cannot_be_built_reports_why_with_a_call_queued() {
    if !hookbox_test_require::root("staging host paths for an unprivileged sandbox uid") {
        return;
    }
    let mut t = tree(&["/bin/true"]);
    let gone = t.dir.path().join("gone");
    t.spec.binds.push(Bind {
        source: gone,
        target: "/data".into(),
        writable: false,
    });
    let (key, call) = t.spec.split_call();
    let err = match WarmSandbox::start_with_call(&launcher(), key, None, &call, None).await {
        Ok(_) => panic!("a sandbox with a missing bind source was built"),
        Err(err) => err,
    };
    assert_eq!(
        (err.stage(), err.errno()),
        (Some(Stage::Staging), Some(libc::ENOENT)),
        "{err}"
    );
}
