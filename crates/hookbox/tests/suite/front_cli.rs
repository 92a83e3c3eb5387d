//! The two binaries (issue 35, goal 2): `hookbox`, the small front that runs the one-shot
//! commands and the launcher itself, and `hookbox-full`, which it execs for the rest.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::support::{text, tree};

/// `hooks test` of an `rm -rf` in fixture tree `root` (security-gate), expecting its deny.
fn deny_test(root: &str) -> [&str; 10] {
    [
        "hooks",
        "test",
        "--root",
        root,
        "--tool",
        "code_execution",
        "--args",
        r#"{"code":"rm -rf /tmp/forbidden","language":"bash"}"#,
        "--expect",
        "deny",
    ]
}

/// `hookbox serve` is the same process as before (pid, arguments and name as `ps` shows them),
/// its program `hookbox-full` from beside the front.
#[test]
fn serve_runs_in_hookbox_full_in_the_same_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = super::serve_cli::start(dir.path());
    let pid = server.child.id();
    let front = Path::new(env!("CARGO_BIN_EXE_hookbox"));
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(
        exe,
        front.with_file_name("hookbox-full").canonicalize().unwrap()
    );
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    assert_eq!(argv[0], front.as_os_str().as_encoded_bytes());
    assert_eq!(argv[1], b"serve");
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim_end(), "hookbox");
    let resp = super::serve_cli::http(&server.addr, "GET", "/v1/environments", "");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
}

/// A directory holding only the front (no `hookbox-full`, no standalone launcher), on the
/// target's file system (a hard link: no copy of a large binary, none still open for writing).
fn front_alone() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let front = dir.path().join("hookbox");
    std::fs::hard_link(env!("CARGO_BIN_EXE_hookbox"), &front).unwrap();
    (dir, front)
}

fn run(front: &Path, data: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(front);
    cmd.args(args)
        .env("HOOKBOX_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .env_remove("HOOKBOX_SANDBOX_EXEC")
        .env_remove("HOOKBOX_HANDED_OVER_BY")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The front alone runs the one-shot commands, sandbox included, by itself; for a command of
/// the whole CLI, or spans to export, it says what is missing and where it looked.
#[test]
fn the_front_alone_runs_one_shot_commands_and_names_what_the_rest_needs() {
    let (dir, front) = front_alone();
    let data = tempfile::tempdir().unwrap();
    let root = tree("security-gate");
    let r = root.path().to_str().unwrap();
    let deny = deny_test(r);
    let out = run(&front, data.path(), &deny, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let missing = dir.path().join("hookbox-full").display().to_string();
    // A data dir that is a file: were the front to serve by itself, it would fail at once
    // rather than serve until killed.
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let serve = ["serve", "--data-dir", file.to_str().unwrap()];
    for args in [&serve[..], &["mcp", "--env-id", "x"], &["manpage"]] {
        let out = run(&front, data.path(), args, &[]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(&missing), "{args:?}: {err}");
    }
    // A usage error is the front's to report, before any hand-over.
    let out = run(&front, data.path(), &["serve", "--no-such-flag"], &[]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    // Spans are exported only by the whole CLI; without it a one-shot command (a gate) still
    // decides, and says that its spans are not exported.
    let otel = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")];
    let out = run(&front, data.path(), &deny, &otel);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&missing) && err.contains("spans are not exported"),
        "{err}"
    );

    // A `hookbox-full` that is the front itself would hand the command back forever.
    std::os::unix::fs::symlink("hookbox", dir.path().join("hookbox-full")).unwrap();
    let out = run(&front, data.path(), &serve, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("handed the command back"), "{err}");
}

/// With OTLP export asked for, a one-shot command runs in `hookbox-full`, which exports its
/// spans and keeps the command's exit status.
#[test]
fn a_one_shot_command_exports_its_spans_through_the_whole_cli() {
    let (otlp_port, spans) = super::serve_cli::otlp_receiver();
    let data = tempfile::tempdir().unwrap();
    let root = tree("security-gate");
    let r = root.path().to_str().unwrap();
    let endpoint = format!("http://127.0.0.1:{otlp_port}");
    let out = run(
        Path::new(env!("CARGO_BIN_EXE_hookbox")),
        data.path(),
        &deny_test(r),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let mut names = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !names.iter().any(|n: &String| n == "hook_handler") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match spans.recv_timeout(left) {
            Ok(batch) => names.extend(batch.into_iter().map(|s| s.name)),
            Err(_) => panic!("no hook_handler span arrived: {names:?}"),
        }
    }
}

/// `hookbox-full` refuses a command a front of another version handed over (it parsed the
/// arguments by its own rules), and tells how to mend it.
#[test]
fn the_whole_cli_refuses_a_front_of_another_version() {
    let data = tempfile::tempdir().unwrap();
    let full = Path::new(env!("CARGO_BIN_EXE_hookbox-full"));
    let out = run(full, data.path(), &["--version"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run(
        full,
        data.path(),
        &["--version"],
        &[("HOOKBOX_HANDED_OVER_BY", "0.0.0-other")],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("hookbox 0.0.0-other") && err.contains("reinstall"),
        "{err}"
    );
}

/// The system call the keeper sleeps in (rustix's `pause`).
#[cfg(not(any(target_arch = "aarch64", target_arch = "riscv64")))]
const PAUSE: libc::c_long = libc::SYS_pause;
#[cfg(any(target_arch = "aarch64", target_arch = "riscv64"))]
const PAUSE: libc::c_long = libc::SYS_ppoll;

/// Runs the command in its arguments after the first as a child subreaper: finds the command's
/// keeper (its child asleep in the system call numbered by the first argument, [`PAUSE`]) while
/// the command runs, lists the keeper's descriptors, waits for the command, then reaps every
/// process orphaned to it (the keeper, the sandbox's launcher). Prints what it saw as JSON.
/// `alarm` bounds it all: a process that never ends makes it say so and fail.
const REAPER: &str = r#"
import ctypes, json, os, signal, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
def expired(*_):
    me = os.getpid()
    with open(f'/proc/{me}/task/{me}/children') as f:
        sys.exit(f'processes still alive after 60 s: {f.read()}')
signal.signal(signal.SIGALRM, expired)
signal.alarm(60)
pause = sys.argv[1] + ' '
front = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
def keeper_of(pid):
    try:
        with open(f'/proc/{pid}/task/{pid}/children') as f:
            children = [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return None
    for child in children:
        try:
            with open(f'/proc/{child}/syscall') as f:
                if f.read().startswith(pause):
                    return child
        except OSError:
            pass
    return None
keeper = None
while keeper is None and front.poll() is None:
    keeper = keeper_of(front.pid)
    time.sleep(0.001)
fds = sorted(os.listdir(f'/proc/{keeper}/fd')) if keeper else None
out, err = front.communicate()
ends = {}
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        break
    ends[pid] = status
keeper_end = ends.get(keeper)
print(json.dumps({
    'front': front.returncode,
    'stderr': err.decode(),
    'stdout': json.loads(out)['result']['output']['stdout'] if front.returncode == 0 else None,
    'keeper_found': keeper is not None,
    'keeper_fds': fds,
    'keeper_killed_by': os.WTERMSIG(keeper_end) if keeper_end is not None and os.WIFSIGNALED(keeper_end) else None,
}))
"#;

/// Issue 35: a one-shot command's exit does not wait for its address space to be freed: a
/// keeper process shares it (`cli::keeper`) and is killed by the command's end. The keeper holds
/// none of the command's descriptors (a pipe its caller reads would stay open), and ends (by
/// its parent-death signal, SIGKILL) once the command ended, for its new parent to reap.
#[test]
fn a_one_shot_commands_keeper_holds_no_descriptor_and_ends_with_it() {
    if !hookbox_test_require::program("python3", "the child subreaper around the command") {
        return;
    }
    let data = hookbox_test_support::DataDir::new();
    let created = super::support::hookbox_in(data.path(), &["env", "create"]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    let id = text(&created.stdout).trim().to_owned();
    let out = Command::new("python3")
        .args(["-c", REAPER, &PAUSE.to_string()])
        .args([env!("CARGO_BIN_EXE_hookbox"), "tool", &id])
        .args(["code_execution", "--args"])
        .arg(r#"{"code": "sleep 1; echo slept", "language": "bash"}"#)
        .env("HOOKBOX_DATA_DIR", data.path())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["front"], 0, "{seen}");
    assert_eq!(seen["stdout"], "slept\n", "{seen}");
    assert_eq!(seen["keeper_found"], true, "{seen}");
    assert_eq!(seen["keeper_fds"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["keeper_killed_by"], libc::SIGKILL, "{seen}");
}
