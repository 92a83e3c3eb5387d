//! A command whose stdout reader went away (`hookbox ... | head -c1`) ends quietly: no panic, no
//! error text. Rust ignores SIGPIPE, so such a write fails with EPIPE, on which `println!` panics
//! ("failed printing to stdout: Broken pipe", status 101). The status is 0, except that `hooks
//! check`, `hooks test` and `hookbox tool` keep their verdict.
//!
//! The reader is gone before the command writes at all: its stdout is the write end of a pipe
//! whose read end is already closed, so every write fails with EPIPE, with no race against a
//! reader that closes after its first byte.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use super::support::{hookbox_in, text, tree};

/// Runs the binary with stdout on a pipe nobody reads.
fn hookbox_reader_gone(args: &[&str]) -> Output {
    hookbox_reader_gone_in(
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("hookbox-data"),
        args,
    )
}

/// Runs the binary with its data dir at `data` and stdout on a pipe nobody reads.
fn hookbox_reader_gone_in(data: &Path, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(args)
        .env_remove("RUST_LOG")
        .env("HOOKBOX_DATA_DIR", data)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        !text(&out.stderr).contains("panicked") && !text(&out.stderr).contains("Broken pipe"),
        "{}",
        text(&out.stderr)
    );
    out
}

#[test]
fn broken_pipe_on_stdout_ends_a_command_quietly_with_0() {
    let root = tree("vendor/codex");
    let r = root.path().to_str().unwrap();
    let out = hookbox_reader_gone(&[
        "hooks", "convert", "--root", r, "--to", "codex", "--from", "codex",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn broken_pipe_on_stdout_keeps_the_verdict_of_hooks_check() {
    let good = tree("security-gate");
    for json in [false, true] {
        let mut argv = vec!["hooks", "check", "--root", good.path().to_str().unwrap()];
        if json {
            argv.push("--json");
        }
        let out = hookbox_reader_gone(&argv);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let broken = tree("broken");
    let out = hookbox_reader_gone(&["hooks", "check", "--root", broken.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[test]
fn broken_pipe_on_stdout_keeps_the_verdict_of_hooks_test() {
    let root = tree("security-gate");
    let r = root.path().to_str().unwrap();
    let rm_rf = r#"{"code":"rm -rf /tmp/forbidden","language":"bash"}"#;
    for (expect, status) in [("deny", 0), ("allow", 1)] {
        let out = hookbox_reader_gone(&[
            "hooks",
            "test",
            "--root",
            r,
            "--tool",
            "code_execution",
            "--args",
            rm_rf,
            "--expect",
            expect,
        ]);
        assert_eq!(out.status.code(), Some(status), "{}", text(&out.stderr));
    }
}

#[test]
fn broken_pipe_on_stdout_keeps_the_status_of_hookbox_tool_and_ends_env_list_with_0() {
    let data = hookbox_test_support::DataDir::new();
    let created = hookbox_in(
        data.path(),
        &[
            "env",
            "create",
            "--disk-limit",
            "0",
            "--source",
            "inline:workspace/a.txt=hello",
        ],
    );
    assert!(created.status.success(), "{}", text(&created.stderr));
    let env = text(&created.stdout).trim().to_owned();
    let ran = hookbox_reader_gone_in(
        data.path(),
        &[
            "tool",
            &env,
            "code_execution",
            "--args",
            r#"{"code": "seq 100000", "language": "bash"}"#,
        ],
    );
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran.stderr));
    let failed = hookbox_reader_gone_in(
        data.path(),
        &[
            "tool",
            &env,
            "view_file",
            "--args",
            r#"{"path": "/workspace/missing.txt"}"#,
        ],
    );
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed.stderr));
    for argv in [&["env", "list"][..], &["env", "show", &env]] {
        let out = hookbox_reader_gone_in(data.path(), argv);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
}

/// `hooks install` prints its diff before it writes the settings file: a reader that went away
/// must not leave the gate uninstalled behind a successful exit.
#[test]
fn broken_pipe_on_stdout_still_installs_the_gate() {
    let project = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["hooks", "install", "--for", "claude-code", "--root"])
        .arg(project.path())
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        !text(&out.stderr).contains("panicked"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let settings = std::fs::read_to_string(project.path().join(".claude/settings.json")).unwrap();
    assert!(settings.contains("hookbox"), "{settings}");
}

/// A new API key is shown once: if nobody could read it, it is revoked and the command fails,
/// rather than leaving a working key no one has.
#[test]
fn broken_pipe_on_stdout_revokes_a_key_nobody_saw_and_fails() {
    let data = tempfile::tempdir().unwrap();
    let made = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["project", "create", "ops"])
        .env("HOOKBOX_DATA_DIR", data.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made.stderr));
    let out = hookbox_reader_gone_in(data.path(), &["key", "create", "--project", "ops"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("revoked"),
        "{}",
        text(&out.stderr)
    );
    let listed = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["key", "list"])
        .env("HOOKBOX_DATA_DIR", data.path())
        .output()
        .unwrap();
    let listed = text(&listed.stdout);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.contains("revoked"), "{listed}");
}
