//! `hookbox hooks gate` and `hookbox hooks install` through the binary, on real files: the
//! payloads the CLIs really send (tests/fixtures/gate-payloads), a real policy run in the
//! sandbox (tests/fixtures/gate-policy), and the installed command run by `sh` as a CLI runs it.
//! The four real CLIs run in tests/agent_clis.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use super::support::{fixture, text, tree};

fn hookbox_cmd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookbox"));
    cmd.env_remove("RUST_LOG").env(
        "HOOKBOX_DATA_DIR",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("hookbox-data"),
    );
    cmd
}

fn with_stdin(mut cmd: Command, stdin: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    // A writer thread: a gate that stops reading early must not deadlock the test.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// `hookbox hooks gate --protocol PROTOCOL --root ROOT EXTRA...` with `payload` on stdin.
fn gate(root: &Path, protocol: &str, payload: &Value, extra: &[&str]) -> Output {
    let mut cmd = hookbox_cmd();
    cmd.args(["hooks", "gate", "--protocol", protocol, "--root"])
        .arg(root)
        .args(extra);
    with_stdin(cmd, payload.to_string().as_bytes())
}

fn answer(out: &Output) -> Value {
    let stdout = text(&out.stdout);
    if stdout.trim().is_empty() {
        return Value::Null;
    }
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn payload(name: &str) -> Value {
    let path = fixture("gate-payloads").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A shell call of `command` as each CLI's pre-tool hook receives it.
fn shell_payload(protocol: &str, command: &str) -> Value {
    let mut p = match protocol {
        "claude-code" => payload("claude-code.json"),
        "gemini-cli" => payload("gemini-cli.json"),
        "codex" => payload("codex.json"),
        "copilot" => payload("copilot.json"),
        _ => json!({"hook_event_name": "preToolUse", "conversation_id": "c1",
                    "generation_id": "g1", "tool_name": "Shell",
                    "tool_input": {"command": "", "working_directory": "/home/dev/project"},
                    "tool_use_id": "t1", "cwd": "/home/dev/project"}),
    };
    let key = if protocol == "copilot" {
        "toolArgs"
    } else {
        "tool_input"
    };
    p[key]["command"] = json!(command);
    p
}

/// The reason (or `None` for no deny) in each CLI's deny answer.
fn denied_reason(protocol: &str, a: &Value) -> Option<String> {
    let (decision, reason) = match protocol {
        "claude-code" | "codex" => (
            &a["hookSpecificOutput"]["permissionDecision"],
            &a["hookSpecificOutput"]["permissionDecisionReason"],
        ),
        "gemini-cli" => (&a["decision"], &a["reason"]),
        "cursor" => (&a["permission"], &a["agent_message"]),
        _ => (&a["permissionDecision"], &a["permissionDecisionReason"]),
    };
    (decision == "deny").then(|| reason.as_str().unwrap_or_default().to_owned())
}

const PROTOCOLS: [&str; 5] = ["claude-code", "gemini-cli", "codex", "cursor", "copilot"];

#[test]
fn gate_denies_rm_rf_in_each_clis_protocol_with_the_policys_reason() {
    let root = tree("gate-policy");
    for protocol in PROTOCOLS {
        let out = gate(
            root.path(),
            protocol,
            &shell_payload(protocol, "rm -rf victim"),
            &[],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{protocol}: {}",
            text(&out.stderr)
        );
        assert_eq!(
            denied_reason(protocol, &answer(&out)).as_deref(),
            Some("no rm -rf in this project"),
            "{protocol}: {}",
            text(&out.stdout)
        );
    }
}

#[test]
fn gate_allows_a_harmless_call_by_saying_nothing() {
    let root = tree("gate-policy");
    for protocol in PROTOCOLS {
        let out = gate(root.path(), protocol, &shell_payload(protocol, "ls"), &[]);
        assert_eq!(out.status.code(), Some(0), "{protocol}");
        assert_eq!(text(&out.stdout), "", "{protocol}: {}", text(&out.stderr));
    }
}

#[test]
fn ask_rewrite_and_context_reach_each_cli_in_its_own_fields() {
    let root = tree("gate-policy");
    let r = root.path();
    let ask = |p| answer(&gate(r, p, &shell_payload(p, "./deploy.sh"), &[]));
    assert_eq!(
        ask("claude-code")["hookSpecificOutput"]["permissionDecision"],
        "ask"
    );
    assert_eq!(ask("gemini-cli")["decision"], "ask");
    assert_eq!(ask("copilot")["permissionDecision"], "ask");
    // Codex lets an `ask` through and Cursor does not enforce it: there it is a deny.
    assert!(denied_reason("codex", &ask("codex")).is_some_and(|r| r.contains("deploys need")));
    assert!(denied_reason("cursor", &ask("cursor")).is_some_and(|r| r.contains("deploys need")));

    let rw = |p| answer(&gate(r, p, &shell_payload(p, "rewrite-me"), &[]));
    let claude = rw("claude-code");
    assert_eq!(
        claude["hookSpecificOutput"]["updatedInput"],
        json!({"command": "echo rewritten", "description": "run the command the user asked for"})
    );
    assert_eq!(claude["hookSpecificOutput"]["permissionDecision"], "allow");
    assert_eq!(
        rw("gemini-cli")["hookSpecificOutput"]["tool_input"]["command"],
        "echo rewritten"
    );
    assert_eq!(
        rw("codex")["hookSpecificOutput"]["updatedInput"],
        json!({"command": "echo rewritten"})
    );
    assert_eq!(
        rw("cursor")["updated_input"],
        json!({"command": "echo rewritten", "working_directory": "/home/dev/project"})
    );
    assert_eq!(rw("copilot")["modifiedArgs"]["command"], "echo rewritten");

    let context = answer(&gate(
        r,
        "claude-code",
        &shell_payload("claude-code", "context-please"),
        &[],
    ));
    assert_eq!(
        context["hookSpecificOutput"]["additionalContext"],
        "remember the style guide"
    );
    assert!(context["hookSpecificOutput"]["permissionDecision"].is_null());
}

#[test]
fn file_paths_in_the_project_are_seen_from_the_sandbox_root() {
    let root = tree("gate-policy");
    let project = root.path().canonicalize().unwrap();
    let p = json!({"hook_event_name": "PreToolUse", "tool_name": "Write",
        "cwd": project, "tool_input": {"file_path": project.join("src/a.rs"), "content": "x"}});
    let out = gate(&project, "claude-code", &p, &[]);
    assert_eq!(
        denied_reason("claude-code", &answer(&out)).as_deref(),
        Some("path=/src/a.rs")
    );
    // Relative to the CLI's directory; outside the project, the host path as it is.
    let p = json!({"hook_event_name": "BeforeTool", "tool_name": "read_file",
        "cwd": project.join("src"), "tool_input": {"file_path": "../../elsewhere/b"}});
    let out = gate(&project, "gemini-cli", &p, &[]);
    let outside = project.parent().unwrap().join("elsewhere/b");
    assert_eq!(
        denied_reason("gemini-cli", &answer(&out)),
        Some(format!("path={}", outside.display()))
    );
}

#[test]
fn policy_handlers_cannot_write_to_the_project_unless_writable() {
    let root = tree("gate-policy");
    let written = root.path().join("workspace/written");
    let p = shell_payload("claude-code", "try-to-write");
    let out = gate(root.path(), "claude-code", &p, &[]);
    assert_eq!(text(&out.stdout), "", "{}", text(&out.stderr));
    assert!(!written.exists(), "the read-only project was written");
    let out = gate(root.path(), "claude-code", &p, &["--writable"]);
    assert_eq!(text(&out.stdout), "", "{}", text(&out.stderr));
    assert!(written.exists(), "--writable did not let the policy write");
}

#[test]
fn every_failure_of_the_gate_denies() {
    let root = tree("gate-policy");
    let empty = tempfile::tempdir().unwrap();
    let broken = tree("broken");
    let cases: Vec<(&Path, Vec<u8>, Vec<&str>, &str)> = vec![
        (root.path(), b"not json".to_vec(), vec![], "not JSON"),
        (
            root.path(),
            vec![b' '; 17 << 20],
            vec![],
            "the hook payload is over 16 MiB",
        ),
        (
            root.path(),
            br#"{"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {}}"#
                .to_vec(),
            vec![],
            "was run for PostToolUse",
        ),
        (
            empty.path(),
            shell_payload("claude-code", "ls").to_string().into_bytes(),
            vec!["--require-policy"],
            "has no .agents/hooks.json",
        ),
        (
            broken.path(),
            shell_payload("claude-code", "ls").to_string().into_bytes(),
            vec![],
            "the policy has errors",
        ),
        (
            Path::new("/nonexistent/project"),
            shell_payload("claude-code", "ls").to_string().into_bytes(),
            vec![],
            "cannot use /nonexistent/project",
        ),
    ];
    for (dir, stdin, extra, needle) in cases {
        let mut cmd = hookbox_cmd();
        cmd.args(["hooks", "gate", "--protocol", "claude-code", "--root"])
            .arg(dir)
            .args(&extra);
        let out = with_stdin(cmd, &stdin);
        assert_eq!(out.status.code(), Some(0));
        let reason = denied_reason("claude-code", &answer(&out))
            .unwrap_or_else(|| panic!("{needle}: not denied: {}", text(&out.stdout)));
        assert!(
            reason.starts_with("hookbox gate failed") && reason.contains(needle),
            "{needle}: {reason}"
        );
    }
    // Without --require-policy a project with no policy has nothing to object to.
    let out = gate(
        empty.path(),
        "claude-code",
        &shell_payload("claude-code", "rm -rf /"),
        &[],
    );
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn gate_decisions_go_to_the_audit_log() {
    let root = tree("gate-policy");
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("audit.jsonl");
    let out = gate(
        root.path(),
        "copilot",
        &shell_payload("copilot", "rm -rf victim"),
        &["--audit-log", log.to_str().unwrap()],
    );
    assert!(denied_reason("copilot", &answer(&out)).is_some());
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines.iter().any(|l| l["kind"] == "hook"
            && l["decision"] == "deny"
            && l["reason"] == "no rm -rf in this project"),
        "{lines:?}"
    );
    // A failure of the gate itself is audited as the deny it is.
    let mut cmd = hookbox_cmd();
    cmd.args(["hooks", "gate", "--protocol", "codex", "--audit-log"])
        .arg(&log)
        .arg("--root")
        .arg(root.path());
    let out = with_stdin(cmd, b"not json");
    assert!(denied_reason("codex", &answer(&out)).is_some());
    let last: Value = serde_json::from_str(
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["kind"], "hook", "{last}");
    assert_eq!(last["group"], "hookbox-gate", "{last}");
    assert_eq!(last["decision"], "deny", "{last}");
    assert!(
        last["failure"]
            .as_str()
            .is_some_and(|f| f.contains("not JSON")),
        "{last}"
    );
}

fn install(project: &Path, home: &Path, args: &[&str]) -> Output {
    hookbox_cmd()
        .args(["hooks", "install"])
        .args(args)
        .arg("--root")
        .arg(project)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .env_remove("COPILOT_HOME")
        .output()
        .unwrap()
}

#[test]
fn install_merges_shows_the_diff_is_idempotent_and_uninstall_restores() {
    let project = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let settings = project.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mine = json!({
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {"PreToolUse": [{"matcher": "Edit", "hooks": [
            {"type": "command", "command": "./format.sh"}]}]},
        "model": "opus"
    });
    std::fs::write(&settings, serde_json::to_string_pretty(&mine).unwrap()).unwrap();

    let out = install(project.path(), home.path(), &["--for", "claude-code"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains(&format!("+++ {}", settings.display())),
        "{shown}"
    );
    assert!(shown.contains("+            \"command\": \"'"), "{shown}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(doc["permissions"], mine["permissions"]);
    assert_eq!(doc["model"], "opus");
    assert_eq!(
        doc["hooks"]["PreToolUse"][0],
        mine["hooks"]["PreToolUse"][0]
    );
    let command = doc["hooks"]["PreToolUse"][1]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        command.contains(
            "hooks gate --protocol claude-code --root \"$CLAUDE_PROJECT_DIR\" --require-policy || {"
        ),
        "{command}"
    );

    let bytes = std::fs::read(&settings).unwrap();
    let again = install(project.path(), home.path(), &["--for", "claude-code"]);
    assert!(text(&again.stdout).contains("already installed"));
    assert_eq!(std::fs::read(&settings).unwrap(), bytes);

    let gone = install(
        project.path(),
        home.path(),
        &["--for", "claude-code", "--uninstall"],
    );
    assert!(gone.status.success());
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(doc, mine);

    // --user writes the user's file; Copilot's own file goes away on --uninstall.
    let out = install(project.path(), home.path(), &["--for", "copilot", "--user"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let user_file = home.path().join(".copilot/hooks/hookbox-gate.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&user_file).unwrap()).unwrap();
    assert!(
        doc["hooks"]["preToolUse"][0]["bash"]
            .as_str()
            .unwrap()
            .contains("--root \"$COPILOT_PROJECT_DIR\" ||"),
        "a user-level gate must not require a policy in every project: {doc}"
    );
    install(
        project.path(),
        home.path(),
        &["--for", "copilot", "--user", "--uninstall"],
    );
    assert!(!user_file.exists());
}

#[test]
fn codex_install_prints_the_trust_lines() {
    let project = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = install(project.path(), home.path(), &["--for", "codex"]);
    let shown = text(&out.stdout);
    let project = std::path::absolute(project.path()).unwrap();
    assert!(
        shown.contains(&format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"",
            project.display()
        )),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "[hooks.state.\"{}:pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:",
            project.join(".codex/hooks.json").display()
        )),
        "{shown}"
    );
}

/// The installed command, run by `sh -c` as the CLIs run it: it denies through the policy, and
/// denies (exit 2, the CLI's deny JSON) when the gate cannot start.
#[test]
fn the_installed_command_denies_even_when_the_gate_is_missing() {
    let root = tree("gate-policy");
    let home = tempfile::tempdir().unwrap();
    let run_installed = |binary: &str| {
        let p = root.path();
        let _ = std::fs::remove_file(p.join(".claude/settings.json"));
        let mut args = vec!["--for", "claude-code"];
        if !binary.is_empty() {
            args.extend(["--binary", binary]);
        }
        let out = install(p, home.path(), &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let doc: Value = serde_json::from_str(
            &std::fs::read_to_string(p.join(".claude/settings.json")).unwrap(),
        )
        .unwrap();
        let command = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut sh = Command::new("sh");
        sh.args(["-c", &command])
            .current_dir(p)
            .env("CLAUDE_PROJECT_DIR", p)
            .env("HOOKBOX_DATA_DIR", home.path());
        with_stdin(
            sh,
            shell_payload("claude-code", "rm -rf victim")
                .to_string()
                .as_bytes(),
        )
    };
    let out = run_installed("");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        denied_reason("claude-code", &answer(&out)).as_deref(),
        Some("no rm -rf in this project")
    );
    let out = run_installed("/nonexistent/hookbox");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        denied_reason("claude-code", &answer(&out))
            .is_some_and(|r| r.contains("hookbox hooks gate could not run"))
    );
    assert!(text(&out.stderr).contains("hookbox hooks gate could not run"));
}

/// With --hook-dialects the gate also decides with other CLIs' hooks files, but never runs the
/// answering CLI's own hooks (that CLI runs them) nor a gate entry (it would run itself).
#[test]
fn vendor_files_join_the_policy_but_no_hook_runs_twice() {
    let root = tree("gate-dialects");
    let home = tempfile::tempdir().unwrap();
    // The project's Claude settings hold a gate entry whose binary cannot start: run, it denies.
    let out = install(
        root.path(),
        home.path(),
        &["--for", "claude-code", "--binary", "/nonexistent/hookbox"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let all = ["--hook-dialects", "all"];

    // Gemini's hook is part of the policy for Claude Code and Codex...
    for protocol in ["claude-code", "codex"] {
        let out = gate(
            root.path(),
            protocol,
            &shell_payload(protocol, "rm -rf victim"),
            &all,
        );
        assert_eq!(
            denied_reason(protocol, &answer(&out)).as_deref(),
            Some("the Gemini hook says no"),
            "{protocol}: {}",
            text(&out.stderr)
        );
    }
    // ...but not for Gemini CLI, which runs it itself.
    let out = gate(
        root.path(),
        "gemini-cli",
        &shell_payload("gemini-cli", "rm -rf victim"),
        &all,
    );
    assert_eq!(text(&out.stdout), "", "{}", text(&out.stderr));
    // The gate entry read from .claude/settings.json is not a handler (it would deny: its
    // binary is missing), for any protocol that reads Claude's files.
    for protocol in ["gemini-cli", "codex"] {
        let out = gate(root.path(), protocol, &shell_payload(protocol, "ls"), &all);
        assert_eq!(text(&out.stdout), "", "{protocol}: {}", text(&out.stderr));
    }
    // Nor anywhere else hookbox reads vendor files (hooks test here; serve by the same loader),
    // and hooks check says why it is left out.
    let r = root.path().to_str().unwrap();
    let mut test = hookbox_cmd();
    test.args([
        "hooks",
        "test",
        "--root",
        r,
        "--hook-dialects",
        "claude-code",
    ])
    .args(["--tool", "code_execution", "--args", r#"{"code": "ls"}"#])
    .args(["--expect", "allow"]);
    let out = test.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stdout));
    let mut check = hookbox_cmd();
    check.args([
        "hooks",
        "check",
        "--root",
        r,
        "--hook-dialects",
        "claude-code",
    ]);
    let out = check.output().unwrap();
    assert!(
        text(&out.stdout).contains("the `hookbox hooks gate` entry"),
        "{}",
        text(&out.stdout)
    );
    // Without --hook-dialects only .agents/hooks.json decides.
    let out = gate(
        root.path(),
        "codex",
        &shell_payload("codex", "rm -rf victim"),
        &[],
    );
    assert_eq!(text(&out.stdout), "");
}
