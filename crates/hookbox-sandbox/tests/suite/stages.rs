//! A launch that fails says where: the stage of construction (or of a warm call's hand-over)
//! and the errno, carried from the launcher over its status channel or a call's reply socket,
//! and classified transient or not from those alone.

use std::time::Duration;

use hookbox_sandbox::spec::Bind;
use hookbox_sandbox::{SandboxError, Stage};

use super::support::*;

const LIMIT: usize = 64 * 1024;
const TIMEOUT: Duration = Duration::from_secs(60);

/// The stage and errno of a launch that must have failed.
fn failed_at(result: Result<hookbox_process::CommandOutput, SandboxError>) -> SandboxError {
    match result {
        Ok(out) => panic!(
            "the launch ran: {:?} {} {}",
            out.termination,
            text(&out.stdout),
            text(&out.stderr)
        ),
        Err(err) => err,
    }
}

#[tokio::test]
async fn a_bind_source_that_does_not_exist_fails_at_staging_with_enoent() {
    if !hookbox_test_require::root("staging host paths for an unprivileged sandbox uid") {
        return;
    }
    let mut t = tree(&["/bin/true"]);
    let gone = missing(&t);
    t.spec.binds.push(Bind {
        source: gone.clone(),
        target: "/data".into(),
        writable: false,
    });
    let err = failed_at(cold(&t.spec, TIMEOUT, LIMIT).await);
    assert_eq!(err.stage(), Some(Stage::Staging), "{err}");
    assert_eq!(err.errno(), Some(libc::ENOENT), "{err}");
    assert!(
        err.to_string().contains(&gone.display().to_string()),
        "{err}"
    );
    assert!(!err.is_transient());

    // A warm sandbox built from the same spec fails the same way before it is ready, and so
    // does one handed its first call as it starts (the call goes with it).
    let err = warm(&t.spec).await.unwrap_err();
    assert_eq!(
        (err.stage(), err.errno()),
        (Some(Stage::Staging), Some(libc::ENOENT)),
        "{err}"
    );
    let (key, call) = t.spec.split_call();
    let err =
        hookbox_sandbox::warm::WarmSandbox::start_with_call(&launcher(), key, None, None, &call)
            .await
            .unwrap_err();
    assert_eq!(
        (err.stage(), err.errno()),
        (Some(Stage::Staging), Some(libc::ENOENT)),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_working_directory_fails_at_chdir_cold_and_in_a_warm_call() {
    let mut t = tree(&["/bin/true"]);
    t.spec.cwd = "/workspace/not-there".into();
    let err = failed_at(cold(&t.spec, TIMEOUT, LIMIT).await);
    assert_eq!(
        (err.stage(), err.errno()),
        (Some(Stage::Chdir), Some(libc::ENOENT)),
        "{err}"
    );
    assert!(!err.is_transient());

    let sandbox = warm(&t.spec).await.unwrap();
    let err = failed_at(warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await);
    assert_eq!(
        (err.stage(), err.errno()),
        (Some(Stage::Chdir), Some(libc::ENOENT)),
        "{err}"
    );
    // The sandbox itself is fine: the next call runs.
    t.spec.cwd = "/workspace".into();
    t.spec.argv = vec!["/bin/sh".into(), "-c".into(), "pwd".into()];
    let out = warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await.unwrap();
    assert_eq!(text(&out.stdout), "/workspace\n");
    stop(sandbox).await;
}

#[tokio::test]
async fn a_missing_program_fails_at_exec_with_enoent_cold_and_in_a_warm_call() {
    let t = tree(&["/bin/not-a-program"]);
    let err = failed_at(cold(&t.spec, TIMEOUT, LIMIT).await);
    assert_eq!(
        (err.stage(), err.errno()),
        (Some(Stage::Exec), Some(libc::ENOENT)),
        "{err}"
    );
    assert!(err.to_string().contains("/bin/not-a-program"), "{err}");
    assert!(!err.is_transient());

    let sandbox = warm(&t.spec).await.unwrap();
    let err = failed_at(warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await);
    assert_eq!(
        (err.stage(), err.errno()),
        (Some(Stage::Exec), Some(libc::ENOENT)),
        "{err}"
    );
    stop(sandbox).await;
}

// A full pids cgroup is the everyday momentary failure (an environment at its process cap):
// the kernel refuses the fork with EAGAIN, and the launch is worth another try.
#[tokio::test]
async fn a_fork_the_pids_cgroup_refuses_is_transient_cold_and_in_a_warm_call() {
    if !hookbox_test_require::root("creating a pids cgroup") {
        return;
    }
    // Cold: the launcher itself is the one task the cgroup allows, so forking init fails.
    let cgroup = PidsCgroup::new("cold", 1);
    let mut t = tree(&["/bin/true"]);
    t.spec.cgroups = cgroup.0.dirs.clone();
    let err = failed_at(cold(&t.spec, TIMEOUT, LIMIT).await);
    assert_eq!(
        (err.stage(), err.errno()),
        (Some(Stage::Fork), Some(libc::EAGAIN)),
        "{err}"
    );
    assert!(err.is_transient(), "{err}");
    drop(cgroup);

    // Warm: the launcher and the sandbox's init fill the cgroup, so cloning a call fails, and
    // the init says so on the call's reply socket.
    let cgroup = PidsCgroup::new("warm", 2);
    let mut t = tree(&["/bin/true"]);
    t.spec.cgroups = cgroup.0.dirs.clone();
    let sandbox = warm(&t.spec).await.unwrap();
    let err = failed_at(warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await);
    assert_eq!(
        (err.stage(), err.errno()),
        (Some(Stage::CallClone), Some(libc::EAGAIN)),
        "{err}"
    );
    assert!(err.is_transient(), "{err}");
    stop(sandbox).await;
    drop(cgroup);
}

// Under gVisor the launcher is the container's init, in another kernel: its typed report still
// reaches hookbox (through a call's status channel, a host pipe passed in).
#[tokio::test]
async fn under_gvisor_a_missing_program_fails_at_exec_with_enoent() {
    if !hookbox_test_require::root("gVisor sandboxes (runsc runs as root)")
        || !hookbox_test_require::program("runsc", "the gVisor runtime")
    {
        return;
    }
    let runsc = hookbox_sandbox::gvisor::Runsc::detect(
        std::env::var_os("HOOKBOX_TEST_RUNSC")
            .map(std::path::PathBuf::from)
            .as_deref(),
        Default::default(),
    )
    .unwrap();
    let mut t = tree(&["/bin/not-a-program"]);
    t.spec.runtime = hookbox_sandbox::spec::RuntimeKind::Gvisor;
    let (key, _) = t.spec.split_call();
    let sandbox = hookbox_sandbox::warm::WarmSandbox::start_gvisor(&runsc, &launcher(), key, None)
        .await
        .unwrap();
    let err = failed_at(warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await);
    assert_eq!(
        (err.stage(), err.errno()),
        (Some(Stage::Exec), Some(libc::ENOENT)),
        "{err}"
    );
    assert!(!err.is_transient());
    stop(sandbox).await;
}
