//! What a new user meets in the first hour (#31 items 4, 5, 11, 12): exit statuses, where a
//! "not found" looked, flags that agree, messages that say how to fix it. Each test failed on the
//! code before the fix.

use std::path::Path;
use std::process::{Command, Output};

use super::support::{filtered, hookbox, hookbox_in, text, tree};

fn hookbox_env(envs: &[(&str, &str)], cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookbox"));
    cmd.args(args).current_dir(cwd).env_remove("RUST_LOG");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// #31 item 4: a usage error exited 2, the status of a denied call.
#[test]
fn a_usage_error_exits_64_not_the_denied_status() {
    let out = hookbox(&["tool"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    let out = hookbox(&["hooks", "check", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    // A malformed argument found after parsing is a usage error too.
    let root = tree("security-gate");
    let r = root.path().to_str().unwrap();
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--tool",
        "view_file",
        "--args",
        "[1]",
    ]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    // --help is not an error.
    assert_eq!(hookbox(&["--help"]).status.code(), Some(0));
}

/// #31 item 4: the statuses were documented only in the README.
#[test]
fn help_and_man_page_list_the_exit_statuses() {
    let help = text(&hookbox(&["--help"]).stdout);
    let listed = help
        .split_once("Exit status:")
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    insta::assert_snapshot!(listed, @r"
      0   success
      1   failure: an error; a tool that failed (hookbox tool); a gate not in force (hooks check);
          a decision other than --expect (hooks test)
      2   denied: a pre hook denied the call, which did not run (hookbox tool)
      3   asked: a pre hook asks a person to approve the call, which did not run; approvals need
          hookbox serve (hookbox tool)
      64  usage error: an unknown or missing flag, or a malformed argument
    A reader of stdout that goes away (| head) ends the command quietly with 0, except that
    hookbox tool, hooks check and hooks test keep the status above, serve keeps serving, and
    key create revokes the key nobody could read and fails with 1.
    ");
    let man = text(&hookbox(&["manpage"]).stdout);
    assert!(man.contains("Exit status:"), "{man}");
    assert!(man.contains(r"64  usage error"), "{man}");
    // #31 item 11: the NAME line said "hookbox \- hookbox: a self-hosted ...".
    let name = man
        .lines()
        .skip_while(|l| *l != ".SH NAME")
        .nth(1)
        .unwrap_or_default();
    insta::assert_snapshot!(name, @r"hookbox \- A self\-hosted agent sandbox with hooks");
}

/// #31 item 11: `hookbox manpage DIR` was refused (only `--out-dir DIR` worked).
#[test]
fn manpage_takes_the_directory_as_an_argument() {
    let dir = tempfile::tempdir().unwrap();
    let out = hookbox(&["manpage", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.path().join("hookbox.1").is_file());
    assert!(dir.path().join("hookbox-serve.1").is_file());
    let old = tempfile::tempdir().unwrap();
    let out = hookbox(&["manpage", "--out-dir", old.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(old.path().join("hookbox.1").is_file());
}

/// #31 item 11: `hookbox --verbose` listed the hidden `__sandbox-exec`.
#[test]
fn no_command_shows_help_without_the_internal_subcommand() {
    let out = hookbox(&["--verbose"]);
    assert_eq!(out.status.code(), Some(64));
    let err = text(&out.stderr);
    assert!(err.contains("Usage: hookbox"), "{err}");
    assert!(!err.contains("__sandbox-exec"), "{err}");
}

/// #31 item 5: `HOOKBOX_DATA_DIR=` silently used the current directory and created
/// `hookbox.db`, `secret.key` and `environments/` there.
#[test]
fn an_empty_data_dir_variable_is_refused_and_creates_nothing() {
    let cwd = tempfile::tempdir().unwrap();
    for args in [&["env", "list"][..], &["credential", "list"][..]] {
        let out = hookbox_env(&[("HOOKBOX_DATA_DIR", "")], cwd.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        insta::allow_duplicates! {
            insta::assert_snapshot!(text(&out.stderr), @"error: HOOKBOX_DATA_DIR is set but empty; name a directory or unset it (an empty value would put the database, secret key and environments in the current directory)");
        }
    }
    let left: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// #31 item 5: `error: no environment env_…` named neither the data dir nor how to change it.
#[test]
fn environment_not_found_names_the_data_dir_and_how_to_change_it() {
    let data = hookbox_test_support::DataDir::new();
    let out = hookbox_in(data.path(), &["env", "show", "env_doesnotexist0000"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(filtered(&text(&out.stderr), data.path()), @"error: no environment `env_doesnotexist0000` in the data dir [ROOT] (the default: $HOOKBOX_DATA_DIR, else ~/.local/share/hookbox); --data-dir or HOOKBOX_DATA_DIR chooses another (a `hookbox serve` sees this one only with the same --data-dir)");
    let out = hookbox_in(
        data.path(),
        &[
            "tool",
            "env_doesnotexist0000",
            "list_dir",
            "--data-dir",
            data.path().to_str().unwrap(),
        ],
    );
    assert!(
        text(&out.stderr).contains("(--data-dir)"),
        "{}",
        text(&out.stderr)
    );
}

/// #31 item 5: `hooks test` created the data dir's database although no handler needed one.
#[test]
fn hooks_test_without_http_handlers_creates_no_database() {
    let root = tree("security-gate");
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("never-made");
    let out = hookbox_env(
        &[("HOOKBOX_DATA_DIR", dir.to_str().unwrap())],
        root.path(),
        &[
            "hooks",
            "test",
            "--tool",
            "view_file",
            "--args",
            r#"{"path":"/x"}"#,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!dir.exists(), "hooks test made {}", dir.display());
}

/// #31 item 11: a missing `--root` printed its OS error twice.
#[test]
fn a_missing_root_prints_its_os_error_once() {
    let out = hookbox(&["hooks", "check", "--root", "/nonexistent/hookbox"]);
    insta::assert_snapshot!(text(&out.stderr), @"error: cannot use /nonexistent/hookbox as the sandbox root: cannot open the tree root /nonexistent/hookbox: No such file or directory (os error 2)");
}

/// #31 item 11: `hooks test --root` was required where `hooks check --root` defaults to `.`;
/// `--args @FILE` did not work where `--network @FILE` did; `--environment-id` matched no other
/// command's spelling; `--json` said `dispatch` where `hookbox tool` says `pre`/`post`.
#[test]
fn hooks_test_flags_agree_with_the_other_commands() {
    let root = tree("security-gate");
    let args = root.path().join("args.json");
    std::fs::write(
        &args,
        r#"{"code":"rm -rf /tmp/forbidden","language":"bash"}"#,
    )
    .unwrap();
    let at_file = format!("@{}", args.display());
    for id_flag in ["--env-id", "--environment-id"] {
        let out = hookbox_env(
            &[],
            root.path(),
            &[
                "hooks",
                "test",
                "--tool",
                "code_execution",
                "--args",
                &at_file,
                id_flag,
                "env_mine",
                "--json",
            ],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["pre"]["decision"], "deny", "{report}");
        assert_eq!(report["pre"], report["dispatch"]);
    }
}

/// #31 item 4: a denied call printed nothing on stderr (only the JSON on stdout).
#[test]
fn a_denied_call_says_so_in_one_line_on_stderr() {
    let data = hookbox_test_support::DataDir::new();
    let gate = super::support::fixture("security-gate").join(".agents");
    let hooks = format!(
        "inline:.agents/hooks.json=@{}",
        gate.join("hooks.json").display()
    );
    let script = format!(
        "inline:.agents/hooks-scripts/gate.py=@{}",
        gate.join("hooks-scripts/gate.py").display()
    );
    let created = hookbox_in(
        data.path(),
        &[
            "env",
            "create",
            "--disk-limit",
            "0",
            "--source",
            &hooks,
            "--source",
            &script,
        ],
    );
    assert!(created.status.success(), "{}", text(&created.stderr));
    let id = text(&created.stdout).trim().to_owned();
    let out = hookbox_in(
        data.path(),
        &[
            "tool",
            &id,
            "code_execution",
            "--args",
            r#"{"code": "rm -rf /tmp/forbidden", "language": "bash"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    insta::assert_snapshot!(text(&out.stderr), @"hookbox: code_execution denied by a pre hook: Destructive command blocked by security gate.");
    // #31 item 11: `env list` printed epoch integers where the API prints RFC 3339.
    let listed = hookbox_in(data.path(), &["env", "list"]);
    let meta: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let rfc3339 = regex::Regex::new(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$").unwrap();
    for key in ["created_at", "updated_at", "last_accessed_at"] {
        let at = meta[key].as_str().unwrap_or_default();
        assert!(rfc3339.is_match(at), "{key}: {meta}");
    }
}

/// #31 item 12: a post hook that could not write `/workspace` of a root-owned tree got a bare
/// PermissionError; the notes about a missing `workspace/` or `tmp/` were printed on every run.
#[test]
fn hooks_test_explains_who_hooks_run_as_only_when_a_handler_failed() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join(".agents")).unwrap();
    std::fs::create_dir_all(root.path().join("workspace")).unwrap();
    std::fs::write(
        root.path().join(".agents/hooks.json"),
        r#"{"audit": {"post_tool_execution": [{"matcher": "*", "hooks": [
            {"type": "command", "command": "touch /workspace/audit.log"}]}]}}"#,
    )
    .unwrap();
    let r = root.path().to_str().unwrap();
    let out = hookbox(&[
        "hooks", "test", "--root", r, "--event", "post", "--tool", "list_dir",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = filtered(&text(&out.stderr), root.path());
    if rustix::process::geteuid().is_root() {
        assert!(
            err.contains("note: [ROOT] belongs to root, so hooks run as the unprivileged uid"),
            "{err}"
        );
    }
    // A run where nothing failed says nothing.
    std::fs::write(
        root.path().join(".agents/hooks.json"),
        r#"{"audit": {"post_tool_execution": [{"matcher": "*", "hooks": [
            {"type": "command", "command": "true"}]}]}}"#,
    )
    .unwrap();
    let out = hookbox(&[
        "hooks", "test", "--root", r, "--event", "post", "--tool", "list_dir",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
}

/// #31 item 1: `hookbox env create` beside a running `hookbox serve --data-dir D` made an
/// environment the server, the SDK and the console answered 404 for. Both directions, with a
/// real server process sharing the data dir (SQLite in WAL mode and the environments folder).
#[test]
fn the_cli_and_a_running_server_see_the_same_environments() {
    use super::serve_cli::{http, start};
    let data = hookbox_test_support::DataDir::new();
    let server = start(data.path());
    // CLI → server: created by the CLI, seen by the API; removed by the CLI, gone from the API.
    let created = hookbox_in(
        data.path(),
        &[
            "env",
            "create",
            "--disk-limit",
            "0",
            "--source",
            "inline:workspace/a.txt=from the cli",
        ],
    );
    assert!(created.status.success(), "{}", text(&created.stderr));
    let id = text(&created.stdout).trim().to_owned();
    let got = http(
        &server.addr,
        "GET",
        &format!("/v1beta/environments/{id}"),
        "",
    );
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    let listed = http(&server.addr, "GET", "/v1beta/environments", "");
    assert!(listed.contains(&id), "{listed}");
    let files = http(
        &server.addr,
        "GET",
        &format!("/v1beta/environments/{id}/files/workspace"),
        "",
    );
    assert!(files.contains("a.txt"), "{files}");
    // Server → CLI: created through the API, listed and used by the CLI, removed by the CLI.
    let made = http(
        &server.addr,
        "POST",
        "/v1beta/environments",
        r#"{"sources": []}"#,
    );
    assert!(made.starts_with("HTTP/1.1 200"), "{made}");
    let body = made.split("\r\n\r\n").nth(1).unwrap_or_default();
    let body = body.trim_start_matches(|c: char| c.is_ascii_hexdigit() || c.is_whitespace());
    let api_id = regex::Regex::new(r#""id":"(env_[a-z0-9]+)""#)
        .unwrap()
        .captures(body)
        .map(|c| c[1].to_owned())
        .unwrap_or_else(|| panic!("{made}"));
    let cli_list = text(&hookbox_in(data.path(), &["env", "list"]).stdout);
    assert!(cli_list.contains(&api_id), "{cli_list}");
    let tool = hookbox_in(
        data.path(),
        &[
            "tool",
            &api_id,
            "list_dir",
            "--args",
            r#"{"path": "/workspace"}"#,
        ],
    );
    assert!(tool.status.success(), "{}", text(&tool.stderr));
    for gone in [&id, &api_id] {
        let rm = hookbox_in(data.path(), &["env", "rm", gone]);
        assert!(rm.status.success(), "{}", text(&rm.stderr));
        let got = http(
            &server.addr,
            "GET",
            &format!("/v1beta/environments/{gone}"),
            "",
        );
        assert!(got.starts_with("HTTP/1.1 404"), "{got}");
    }
}

/// #31 item 8: `GET /` was a JSON 404, `/favicon.ico` a 404, and the banner never named the
/// console. The browser guard still judges both (a foreign Origin is refused).
#[test]
fn the_root_leads_to_the_console_and_the_favicon_is_served() {
    use super::serve_cli::{http, start};
    let data = hookbox_test_support::DataDir::new();
    let server = start(data.path());
    assert!(
        server
            .banner
            .contains(&format!("console: http://{}/console\n", server.addr)),
        "{}",
        server.banner
    );
    let root = http(&server.addr, "GET", "/", "");
    assert!(root.starts_with("HTTP/1.1 303"), "{root}");
    assert!(
        root.to_ascii_lowercase().contains("location: /console\r\n"),
        "{root}"
    );
    let icon = http(&server.addr, "GET", "/favicon.ico", "");
    assert!(icon.starts_with("HTTP/1.1 200"), "{icon}");
    assert!(icon.contains("image/svg+xml"), "{icon}");
    let mut s = std::net::TcpStream::connect(&server.addr).unwrap();
    use std::io::{Read as _, Write as _};
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: {}\r\nOrigin: https://evil.example\r\nConnection: close\r\n\r\n",
        server.addr
    )
    .unwrap();
    let mut foreign = String::new();
    s.read_to_string(&mut foreign).unwrap();
    assert!(foreign.starts_with("HTTP/1.1 403"), "{foreign}");
}

/// #31 item 7: the log on stderr carried ANSI colour codes when stderr was a file or a pipe.
#[test]
fn logs_have_no_colour_codes_when_stderr_is_not_a_terminal() {
    let data = hookbox_test_support::DataDir::new();
    let out = hookbox_in(
        data.path(),
        &[
            "tool",
            "env_doesnotexist0000",
            "list_dir",
            "--egress-allow-cidr",
            "10.0.0.0/8",
        ],
    );
    let err = text(&out.stderr);
    assert!(err.contains("WARN"), "a warning is logged: {err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
}

/// #31 item 10: `scripts/serve.sh` ran the whole setup, building the test tools (Garage and
/// cargo-deb from source, PostgreSQL) that serving never uses. Run on a copy of the scripts
/// whose `tools.sh` only leaves a mark.
#[test]
fn setup_for_serving_installs_no_test_tools() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(repo.join("scripts/setup.sh"), dir.path().join("setup.sh")).unwrap();
    let mark = dir.path().join("tools-ran");
    std::fs::write(
        dir.path().join("tools.sh"),
        // Never hands out a runsc to link (setup.sh has linked the real one on a test machine).
        format!(
            "#!/bin/sh\n[ \"$1\" = runsc ] && exit 1\necho \"$@\" >> {}\n",
            mark.display()
        ),
    )
    .unwrap();
    let chmod = Command::new("chmod")
        .args(["755"])
        .arg(dir.path().join("tools.sh"))
        .status()
        .unwrap();
    assert!(chmod.success());
    let serve = Command::new("bash")
        .arg(dir.path().join("setup.sh"))
        .arg("serve")
        .output()
        .unwrap();
    assert!(serve.status.success(), "{}", text(&serve.stderr));
    assert!(!mark.exists(), "setup.sh serve ran tools.sh");
    // The test mode (the default, what scripts/test.sh and .ci/run use) still builds them.
    let test = Command::new("bash")
        .arg(dir.path().join("setup.sh"))
        .output()
        .unwrap();
    assert!(test.status.success(), "{}", text(&test.stderr));
    assert!(mark.exists(), "setup.sh (test) did not run tools.sh");
}

/// #31 item 7: a failing `pre_interaction` handler was logged with the agent's name in the
/// `tool` field (which metrics also label by).
#[test]
fn an_interaction_hook_failure_logs_the_agent_as_agent_not_tool() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join(".agents")).unwrap();
    std::fs::write(
        root.path().join(".agents/hooks.json"),
        r#"{"g": {"pre_interaction": [{"matcher": "*", "hooks": [{"type": "command", "command": "exit 3"}]}]}}"#,
    )
    .unwrap();
    let r = root.path().to_str().unwrap();
    let out = hookbox(&[
        "-v",
        "hooks",
        "test",
        "--root",
        r,
        "--event",
        "pre-interaction",
        "--input",
        "hi",
        "--agent",
        "my-agent",
    ]);
    let err = text(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.contains("hook handler failed"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains(r#"agent="my-agent""#), "{line}");
    assert!(!line.contains(r#"tool="my-agent""#), "{line}");
}

/// #31 item 6: a hooks file with invalid JSON (which lets every call through, as the reference
/// says) was never logged by the server. Now a WARN with the file and the error, once per change
/// of the file however many calls read it, and a counter.
#[test]
fn a_broken_hooks_file_is_logged_once_per_change_and_counted() {
    use std::io::{BufRead as _, BufReader};
    let data = hookbox_test_support::DataDir::new();
    let log = data.path().join("serve.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .env_remove("HOOKBOX_API_KEYS")
        .env_remove("GEMINI_API_KEY")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stdout = child.stdout.take().unwrap();
    let child = Kill(child);
    // The reader lives as long as the server: a closed pipe would fail its next print.
    let mut lines = BufReader::new(stdout).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("hookbox is listening on http://")
                .and_then(|r| r.split_whitespace().next().map(str::to_owned))
        })
        .unwrap();
    let http = super::serve_cli::http;
    let made = http(
        &addr,
        "POST",
        "/v1beta/environments",
        r#"{"sources": [{"type": "inline", "target": ".agents/hooks.json", "content": "{not json"}]}"#,
    );
    let id = regex::Regex::new(r#""id":"(env_[a-z0-9]+)""#)
        .unwrap()
        .captures(&made)
        .map(|c| c[1].to_owned())
        .unwrap_or_else(|| panic!("{made}"));
    for _ in 0..2 {
        let body = format!(
            r#"{{"agent": "antigravity-preview-09-2026", "input": "run `true`", "environment": "{id}"}}"#
        );
        let done = http(&addr, "POST", "/v1beta/interactions", &body);
        assert!(done.contains(r#""status":"completed""#), "{done}");
    }
    let metrics = http(&addr, "GET", "/metrics", "");
    assert!(
        metrics.contains("hookbox_hooks_file_errors_total 1\n"),
        "{metrics}"
    );
    drop(child);
    drop(lines);
    let logged = std::fs::read_to_string(&log).unwrap();
    let warns: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("hooks file has an error"))
        .collect();
    assert_eq!(warns.len(), 1, "{logged}");
    assert!(warns[0].contains("WARN"), "{}", warns[0]);
    assert!(warns[0].contains("/.agents/hooks.json"), "{}", warns[0]);
    assert!(warns[0].contains("not valid JSON"), "{}", warns[0]);
}

/// #31 item 4: a handler whose script does not exist fails open on every call, and `hooks check
/// --root` says so, but the server said nothing. Now its hooks report lists it (so the console
/// marks "broken hooks") and it is logged once per change and counted; the call still runs as
/// the reference would run it (the lint reports, never blocks).
#[test]
fn a_hooks_script_that_does_not_exist_is_silent_on_the_server() {
    use std::io::{BufRead as _, BufReader};
    let data = hookbox_test_support::DataDir::new();
    let log = data.path().join("serve.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .env_remove("HOOKBOX_API_KEYS")
        .env_remove("GEMINI_API_KEY")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stdout = child.stdout.take().unwrap();
    let child = Kill(child);
    let mut lines = BufReader::new(stdout).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("hookbox is listening on http://")
                .and_then(|r| r.split_whitespace().next().map(str::to_owned))
        })
        .unwrap();
    let http = super::serve_cli::http;
    let hooks = r#"{"gate": {"pre_tool_execution": [{"matcher": "code_execution", "hooks": [{"type": "command", "command": "python3 /.agents/hooks-scripts/nope.py"}]}]}}"#;
    let body = serde_json::json!({"sources": [
        {"type": "inline", "target": ".agents/hooks.json", "content": hooks},
        {"type": "inline", "target": "workspace/a.txt", "content": "a"},
    ]});
    let made = http(&addr, "POST", "/v1beta/environments", &body.to_string());
    let id = regex::Regex::new(r#""id":"(env_[a-z0-9]+)""#)
        .unwrap()
        .captures(&made)
        .map(|c| c[1].to_owned())
        .unwrap_or_else(|| panic!("{made}"));
    for _ in 0..2 {
        let body = format!(
            r#"{{"agent": "antigravity-preview-09-2026", "input": "run `echo ran-anyway`", "environment": "{id}"}}"#
        );
        let done = http(&addr, "POST", "/v1beta/interactions", &body);
        // Fail-open, as the reference: the lint never stops the call.
        assert!(done.contains(r#""status":"completed""#), "{done}");
        assert!(done.contains("ran-anyway"), "{done}");
        assert!(done.contains(r#""outcome":"failed_open""#), "{done}");
    }
    let report = super::serve_cli::json_body(&http(
        &addr,
        "GET",
        &format!("/v1beta/environments/{id}/hooks"),
        "",
    ));
    let errors: Vec<&serde_json::Value> = report["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["severity"] == "error")
        .collect();
    assert_eq!(errors.len(), 1, "{report}");
    assert!(
        errors[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("/.agents/hooks-scripts/nope.py")),
        "{report}"
    );
    let metrics = http(&addr, "GET", "/metrics", "");
    assert!(
        metrics.contains("hookbox_hooks_file_errors_total 1\n"),
        "{metrics}"
    );
    drop(child);
    drop(lines);
    let logged = std::fs::read_to_string(&log).unwrap();
    let warns: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("cannot run in the sandbox"))
        .collect();
    assert_eq!(warns.len(), 1, "{logged}");
    assert!(warns[0].contains("WARN"), "{}", warns[0]);
    assert!(warns[0].contains("nope.py"), "{}", warns[0]);
}
