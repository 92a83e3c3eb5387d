//! A warm namespaces sandbox's call hosts (the launcher's `call_host`): one process per call's
//! PID, mount and IPC namespaces, kept from one call to the next. Through the real launcher:
//! a host is reused, and nothing a call leaves (processes, `/dev/shm` files, System V objects)
//! reaches the next; a call killed at its timeout or dropped unsupervised leaves its host to the
//! next call; an untouched `/dev/shm` is kept.
//!
//! Which host ran a call shows inside it: `/proc/self/ns/pid` names the host's PID namespace.

use std::time::{Duration, Instant};

use hookbox_process::Termination;
use hookbox_sandbox::warm::WarmSandbox;

use super::support::*;

const LIMIT: usize = 64 * 1024;
const TIMEOUT: Duration = Duration::from_secs(60);

/// What a call sees of its host: PID and IPC namespaces, `/dev/shm`'s change time (a fresh
/// mount's is its own; a file made there changes it), and how many
/// files, System V shared memory segments and `sleep` processes there are.
const LOOK: &str = r#"readlink /proc/self/ns/pid
readlink /proc/self/ns/ipc
stat -c %z /dev/shm
ls -A /dev/shm | wc -l
ipcs -m | grep -c '^0x'
cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$'
true
"#;

#[derive(Debug, PartialEq, Eq)]
struct Seen {
    pid_ns: String,
    ipc_ns: String,
    shm_ctime: String,
    shm_files: u32,
    shm_segments: u32,
    sleeps: u32,
}

fn seen(stdout: &[u8]) -> Seen {
    let text = text(stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 6, "unexpected output: {text:?}");
    let n = |i: usize| lines[i].trim().parse::<u32>().unwrap();
    Seen {
        pid_ns: lines[0].to_owned(),
        ipc_ns: lines[1].to_owned(),
        shm_ctime: lines[2].to_owned(),
        shm_files: n(3),
        shm_segments: n(4),
        sleeps: n(5),
    }
}

async fn run(
    sandbox: &WarmSandbox,
    t: &Tree,
    script: &str,
    timeout: Duration,
) -> (Termination, Seen) {
    let mut spec = t.spec.clone();
    spec.argv = vec!["/bin/sh".into(), "-c".into(), script.into()];
    let out = warm_call(sandbox, &spec, timeout, LIMIT).await.unwrap();
    (out.termination, seen(&out.stdout))
}

#[tokio::test]
async fn a_host_serves_call_after_call_and_none_sees_what_the_last_left() {
    let t = tree(&["/bin/true"]);
    let sandbox = warm(&t.spec).await.unwrap();

    // The first call leaves a segment, a file and a sleeping child that holds its stdout: the
    // call still ends when its shell does.
    let leave = format!("ipcmk -M 4096 >/dev/null; touch /dev/shm/left; sleep 1000 &\n{LOOK}");
    let started = Instant::now();
    let (ended, first) = run(&sandbox, &t, &leave, TIMEOUT).await;
    assert_eq!(ended, Termination::Exited(0));
    assert!(
        started.elapsed() < TIMEOUT,
        "the call waited for its orphan"
    );
    assert_eq!(
        (first.shm_files, first.shm_segments, first.sleeps),
        (1, 1, 1),
        "the first call did not leave what the test expects"
    );

    let (ended, second) = run(&sandbox, &t, LOOK, TIMEOUT).await;
    assert_eq!(ended, Termination::Exited(0));
    assert_eq!(
        second.pid_ns, first.pid_ns,
        "the call did not reuse the host"
    );
    assert_ne!(second.ipc_ns, first.ipc_ns, "the IPC namespace was kept");
    assert_ne!(
        second.shm_ctime, first.shm_ctime,
        "a used /dev/shm was kept"
    );
    assert_eq!(
        (second.shm_files, second.shm_segments, second.sleeps),
        (0, 0, 0),
        "the last call's file, segment or process reached this one"
    );

    // The second call left /dev/shm as it found it: the third gets the same mount, whose change
    // time did not move.
    let (_, third) = run(&sandbox, &t, LOOK, TIMEOUT).await;
    assert_eq!(third.pid_ns, first.pid_ns);
    assert_eq!(
        third.shm_ctime, second.shm_ctime,
        "an untouched /dev/shm was remounted"
    );
    stop(sandbox).await;
}

#[tokio::test]
async fn a_call_killed_at_its_timeout_leaves_its_host_to_the_next_call() {
    let t = tree(&["/bin/true"]);
    let sandbox = warm(&t.spec).await.unwrap();
    let (_, before) = run(&sandbox, &t, LOOK, TIMEOUT).await;

    let mut spec = t.spec.clone();
    spec.argv = vec![
        "/bin/sh".into(),
        "-c".into(),
        "sleep 1000 & exec sleep 1001".into(),
    ];
    let out = tokio::time::timeout(
        TIMEOUT,
        warm_call(&sandbox, &spec, Duration::from_millis(500), LIMIT),
    )
    .await
    .expect("the timed-out call was not killed")
    .unwrap();
    assert_eq!(out.termination, Termination::TimedOut);

    let (ended, after) = run(&sandbox, &t, LOOK, TIMEOUT).await;
    assert_eq!(ended, Termination::Exited(0));
    assert_eq!(
        after.pid_ns, before.pid_ns,
        "the killed call's host was not reused"
    );
    assert_eq!(after.sleeps, 0, "a process of the killed call survived");
    stop(sandbox).await;
}

#[tokio::test]
async fn a_call_dropped_unsupervised_is_killed_and_its_host_serves_the_next() {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let t = tree(&["/bin/true"]);
    let sandbox = warm(&t.spec).await.unwrap();
    // The program holds the write end of a FIFO: reading it to its end means the program is
    // gone.
    let fifo = t.dir.path().join("root/workspace/fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o666)).unwrap();

    let mut spec = t.spec.clone();
    spec.argv = vec![
        "/bin/sh".into(),
        "-c".into(),
        "exec sleep 1002 > /workspace/fifo".into(),
    ];
    let (_, call) = spec.split_call();
    let started = sandbox.call(&call, None).await.unwrap();
    // Opening for reading returns once the program opened its end.
    let mut reader = tokio::time::timeout(
        TIMEOUT,
        tokio::task::spawn_blocking(move || std::fs::File::open(fifo).unwrap()),
    )
    .await
    .expect("the program never opened the FIFO")
    .unwrap();
    // Nobody waits for the call any more: its reply socket closes, and its host kills it.
    drop(started);
    tokio::time::timeout(
        TIMEOUT,
        tokio::task::spawn_blocking(move || {
            let mut rest = Vec::new();
            reader.read_to_end(&mut rest).unwrap();
        }),
    )
    .await
    .expect("the dropped call's program was not killed")
    .unwrap();

    let (ended, after) = run(&sandbox, &t, LOOK, TIMEOUT).await;
    assert_eq!(ended, Termination::Exited(0));
    assert_eq!(after.sleeps, 0);
    stop(sandbox).await;
}

#[tokio::test]
async fn a_host_whose_limits_a_call_changed_serves_no_other_call() {
    let t = tree(&["/bin/true"]);
    let sandbox = warm(&t.spec).await.unwrap();
    // A call's processes share the host's uid, so they can lower its limits; the host is then
    // retired, and the next call runs in a new one with the spec's limits.
    let lower = format!("prlimit --pid 1 --nofile=20:20 --fsize=1000:1000\n{LOOK}");
    let (ended, first) = run(&sandbox, &t, &lower, TIMEOUT).await;
    assert_eq!(ended, Termination::Exited(0));

    let mut spec = t.spec.clone();
    spec.argv = vec![
        "/bin/sh".into(),
        "-c".into(),
        "ulimit -n; ulimit -f; readlink /proc/self/ns/pid".into(),
    ];
    let out = warm_call(&sandbox, &spec, TIMEOUT, LIMIT).await.unwrap();
    assert!(out.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[..2],
        ["1024", "unlimited"],
        "the last call's limits reached this one"
    );
    assert_ne!(
        lines[2], first.pid_ns,
        "the changed host served another call"
    );
    stop(sandbox).await;
}
