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

/// The launcher joins the environment's cgroups by moving its one thread (cgroup v1's `tasks`,
/// which skips the kernel's global lock); the program, and what it forks, must still be in
/// every one of them, cold and in a warm sandbox's call.
#[tokio::test]
async fn the_program_and_its_children_run_in_every_environment_cgroup() {
    if !hookbox_test_require::root("creating an environment's cgroups") {
        return;
    }
    let id = format!("bounds-test-{}-membership", std::process::id());
    let cgroups = hookbox_sandbox::cgroup::setup(&id, 64, 1 << 30);
    // Removed however the test ends (a failed assertion included).
    struct Removed(hookbox_sandbox::cgroup::EnvCgroups);
    impl Drop for Removed {
        fn drop(&mut self) {
            hookbox_sandbox::cgroup::remove(&self.0);
        }
    }
    let cgroups = Removed(cgroups);
    let cgroups = &cgroups.0;
    assert!(
        cgroups.pids && cgroups.memory,
        "this machine offers pids and memory cgroups; the sandbox must use them: {cgroups:?}"
    );
    let mut t = tree(&[
        "/bin/sh",
        "-c",
        "cat /proc/self/cgroup; echo --; (cat /proc/self/cgroup)",
    ]);
    t.spec.cgroups = cgroups.dirs.clone();
    let in_every_cgroup = |out: &hookbox_process::CommandOutput| {
        let stdout = text(&out.stdout);
        let (program, child) = stdout.split_once("--\n").expect("both listings");
        for listing in [program, child] {
            for controller in ["pids", "memory"] {
                let member = listing.lines().any(|line| {
                    let mut parts = line.splitn(3, ':');
                    let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
                    let named = controllers
                        .is_some_and(|c| c.is_empty() || c.split(',').any(|c| c == controller));
                    named && path.is_some_and(|p| p.ends_with(&format!("/hookbox/{id}")))
                });
                assert!(member, "not in the {controller} cgroup:\n{listing}");
            }
        }
    };
    let out = cold(&t.spec, Duration::from_secs(60), 1 << 16)
        .await
        .unwrap();
    in_every_cgroup(&out);
    let sandbox = warm(&t.spec).await.unwrap();
    let out = warm_call(&sandbox, &t.spec, Duration::from_secs(60), 1 << 16)
        .await
        .unwrap();
    in_every_cgroup(&out);
    stop(sandbox).await;
}

/// A one-shot process does not wait for the sandbox's init to acknowledge the stop (a wake-up
/// of the init and then one of the process, on its path to exit): with the init frozen
/// (SIGSTOP), the stop still returns and leaves the launcher alone, neither waited for nor
/// killed; once the init runs again it reads the end of requests and both exit cleanly. (The
/// stop used to wait for the init to close its socket, and killed the launcher when it did not.)
#[tokio::test]
async fn a_detached_stop_does_not_wait_for_the_init() {
    let t = tree(&["/bin/sh", "-c", "echo ran"]);
    let sandbox = warm(&t.spec).await.unwrap().detached_stop(true);
    let out = warm_call(&sandbox, &t.spec, Duration::from_secs(60), 1 << 16)
        .await
        .unwrap();
    assert_eq!(text(&out.stdout), "ran\n");
    let pid = sandbox.launcher_pid().expect("a running launcher");
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    let init: i32 = children
        .split_whitespace()
        .next()
        .expect("the launcher's one child, the init")
        .parse()
        .unwrap();
    let init = nix::unistd::Pid::from_raw(init);
    nix::sys::signal::kill(init, nix::sys::signal::Signal::SIGSTOP).unwrap();
    stop(sandbox).await;
    // The stop returned with the init still frozen: the launcher (waiting for it) is alive and
    // still our child.
    let pidfd = hookbox_process::pidfd::Pidfd::open(pid).expect("the launcher is not reaped");
    assert!(
        !pidfd.wait_exited(Duration::ZERO),
        "the launcher ended while its init was frozen"
    );
    nix::sys::signal::kill(init, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert!(
        pidfd.wait_exited(Duration::from_secs(60)),
        "the launcher did not exit once its init ran again"
    );
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap());
    assert_eq!(
        nix::sys::wait::waitpid(pid, None).unwrap(),
        nix::sys::wait::WaitStatus::Exited(pid, 0),
        "the launcher must exit cleanly, not be killed"
    );
}

/// A one-shot process drops its warm sandbox without waiting for the kernel to tear the
/// sandbox's namespaces down: the stop returns at once, leaving the launcher unreaped, and the launcher then exits by itself, cleanly (not killed).
#[tokio::test]
async fn a_detached_stop_leaves_the_launcher_to_exit_by_itself() {
    let t = tree(&["/bin/sh", "-c", "echo ran"]);
    let sandbox = warm(&t.spec).await.unwrap().detached_stop(true);
    let out = warm_call(&sandbox, &t.spec, Duration::from_secs(60), 1 << 16)
        .await
        .unwrap();
    assert_eq!(text(&out.stdout), "ran\n");
    let pid = sandbox.launcher_pid().expect("a running launcher");
    stop(sandbox).await;
    // Still our child, not reaped by the stop; it ends on its own (a hung one fails the bound).
    let pidfd = hookbox_process::pidfd::Pidfd::open(pid).expect("the launcher is not reaped yet");
    assert!(
        pidfd.wait_exited(Duration::from_secs(60)),
        "the launcher did not exit after its init stopped serving"
    );
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap());
    assert_eq!(
        nix::sys::wait::waitpid(pid, None).unwrap(),
        nix::sys::wait::WaitStatus::Exited(pid, 0),
        "the launcher must exit cleanly, not be killed"
    );
}
