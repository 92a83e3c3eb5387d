//! `hookbox hooks check` and `hookbox hooks test` on the reference documentation's examples.

use std::process::Output;

use super::support::{filtered, hookbox, stdout, text, tree};

/// `hookbox hooks test --root ROOT --tool TOOL --args ARGS EXTRA...`
fn hooks_test(root: &str, tool: &str, args: &str, extra: &[&str]) -> Output {
    let mut argv = vec![
        "hooks", "test", "--root", root, "--tool", tool, "--args", args,
    ];
    argv.extend_from_slice(extra);
    hookbox(&argv)
}

const RM_RF: &str = r#"{"code":"rm -rf /tmp/forbidden","language":"bash"}"#;

#[test]
fn security_gate_denies_rm_rf_with_the_reference_reason() {
    let root = tree("security-gate");
    let r = root.path().to_str().unwrap();
    let out = hooks_test(r, "code_execution", RM_RF, &["--expect", "deny"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!(filtered(&stdout(&out), root.path()), @r#"
    hooks files: /.agents/hooks.json
    pre_tool_execution code_execution
      security-gate pre_tool_execution[0].hooks[0] command "python3 /.agents/hooks-scripts/gate.py"
        → deny: Destructive command blocked by security gate. ([N] ms)
    decision: deny (group security-gate): Destructive command blocked by security gate.
    "#);
}

#[test]
fn security_gate_allows_ls() {
    let root = tree("security-gate");
    let r = root.path().to_str().unwrap();
    let out = hooks_test(
        r,
        "code_execution",
        r#"{"code":"ls","language":"bash"}"#,
        &["--expect", "allow"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout(&out).ends_with("decision: allow\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn expect_mismatch_exits_non_zero() {
    let root = tree("security-gate");
    let r = root.path().to_str().unwrap();
    let out = hooks_test(r, "code_execution", RM_RF, &["--expect", "allow"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn privacy_gate_blocks_private_and_allows_public_paths() {
    let root = tree("privacy-gate");
    let r = root.path().to_str().unwrap();
    let denied = hooks_test(
        r,
        "view_file",
        r#"{"path":"/workspace/private/employees.json"}"#,
        &["--json"],
    );
    let report: serde_json::Value = serde_json::from_slice(&denied.stdout).unwrap();
    assert_eq!(report["dispatch"]["decision"], "deny");
    assert_eq!(
        report["dispatch"]["reason"],
        "Access to confidential `/private/` records is blocked by PII compliance policy. Query approved `/public/` summary tables instead."
    );
    let allowed = hooks_test(
        r,
        "view_file",
        r#"{"path":"/workspace/public/summary.json"}"#,
        &["--json"],
    );
    let report: serde_json::Value = serde_json::from_slice(&allowed.stdout).unwrap();
    assert_eq!(report["dispatch"]["decision"], "allow");
    assert_eq!(report["dispatch"]["trace"][0]["outcome"], "allow");
    // The gate only matches view_file.
    let listed = hooks_test(
        r,
        "list_dir",
        r#"{"path":"/workspace/private"}"#,
        &["--json"],
    );
    let report: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(report["dispatch"]["trace"], serde_json::json!([]));
}

#[test]
fn catch_all_audit_sees_every_tool_and_a_disabled_group_never_runs() {
    let root = tree("audit");
    let r = root.path().to_str().unwrap();
    let pre = hooks_test(
        r,
        "delete_file",
        r#"{"path":"/workspace/a"}"#,
        &["--expect", "allow"],
    );
    assert!(pre.status.success(), "{}", stdout(&pre));
    assert!(
        stdout(&pre).contains("→ skipped: group disabled"),
        "{}",
        stdout(&pre)
    );
    assert!(!root.path().join("tmp/disabled-ran").exists());

    for tool in [
        "code_execution",
        "view_file",
        "write_to_file",
        "replace_file_content",
        "list_dir",
        "delete_file",
    ] {
        let post = hooks_test(r, tool, "{}", &["--event", "post", "--error", "boom"]);
        assert!(post.status.success(), "{}", stdout(&post));
    }
    let log = std::fs::read_to_string(root.path().join("tmp/audit.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tools: Vec<&str> = events
        .iter()
        .map(|e| e["tool_call"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "code_execution",
            "view_file",
            "write_to_file",
            "replace_file_content",
            "list_dir",
            "delete_file"
        ]
    );
    assert!(events.iter().all(|e| e["error"] == "boom"));
}

#[test]
fn check_passes_the_reference_configuration() {
    let root = tree("security-gate");
    let out = hookbox(&["hooks", "check", "--root", root.path().to_str().unwrap()]);
    assert!(out.status.success());
    insta::assert_snapshot!(filtered(&stdout(&out), root.path()), @r#"
    /.agents/hooks.json
      security-gate
        pre_tool_execution[0] matcher "code_execution" → code_execution
          [0] command "python3 /.agents/hooks-scripts/gate.py" (timeout 10 s)

    1 file(s), 1 group(s): 0 error(s), 0 warning(s)
    "#);
}

#[test]
fn check_reports_every_broken_part_and_fails() {
    let root = tree("broken");
    let out = hookbox(&["hooks", "check", "--root", root.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(filtered(&stdout(&out), root.path()));
}

/// #31: an event key typo, a matcher naming no tool, a typo inside an alternation and handler
/// scripts that are missing, not executable or whose program is not on PATH left `hooks check`
/// at exit 0 (two warnings, the rest unreported) while the gate was not in force.
#[test]
fn check_fails_when_a_gate_the_file_meant_is_not_in_force() {
    let root = tree("gate-gone");
    let out = hookbox(&["hooks", "check", "--root", root.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    insta::assert_snapshot!(filtered(&stdout(&out), root.path()));
}

/// #31: `--expect deny` on an allowed call exited 1 without a word.
#[test]
fn expect_mismatch_says_expected_and_got_and_why() {
    let root = tree("security-gate");
    let r = root.path().to_str().unwrap();
    let denied = hooks_test(r, "code_execution", RM_RF, &["--expect", "allow"]);
    assert_eq!(denied.status.code(), Some(1));
    let allowed = hooks_test(
        r,
        "view_file",
        r#"{"path":"/workspace/a"}"#,
        &["--expect", "deny"],
    );
    assert_eq!(allowed.status.code(), Some(1));
    insta::assert_snapshot!(
        format!("{}{}", text(&denied.stderr), text(&allowed.stderr)),
        @r"
    expected allow, got deny: group security-gate denied: Destructive command blocked by security gate.
    expected deny, got allow: no handler matches pre_tool_execution view_file
    "
    );
}

#[test]
fn check_and_test_refuse_bad_input_clearly() {
    let root = tree("security-gate");
    let r = root.path().to_str().unwrap();
    let bad_json = hooks_test(r, "view_file", "{nope", &[]);
    assert_eq!(bad_json.status.code(), Some(64), "a usage error");
    assert!(String::from_utf8_lossy(&bad_json.stderr).contains("--args is not valid JSON"));
    let bad_tool = hookbox(&["hooks", "test", "--root", r, "--tool", "read_file"]);
    assert!(String::from_utf8_lossy(&bad_tool.stderr).contains("did you mean `view_file`?"));
    let no_root = hookbox(&["hooks", "check", "--root", "/nonexistent/hookbox"]);
    assert_eq!(no_root.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&no_root.stderr)
            .contains("cannot use /nonexistent/hookbox as the sandbox root")
    );
}

#[test]
fn http_hooks_go_through_egress_so_loopback_is_refused_and_fails_open() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join(".agents")).unwrap();
    // A real listener, so that a direct POST would succeed and deny.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/gate",
        listener.local_addr().unwrap().port()
    );
    std::fs::write(
        root.path().join(".agents/hooks.json"),
        serde_json::json!({"remote-gate": {"pre_tool_execution": [
            {"matcher": "*", "hooks": [{"type": "http", "url": url, "timeout": 5}]}
        ]}})
        .to_string(),
    )
    .unwrap();
    let r = root.path().to_str().unwrap();
    for network in [None, Some(r#"{"allowlist":[{"domain":"*"}]}"#)] {
        let mut args = vec!["hooks", "test", "--root", r, "--tool", "list_dir", "--json"];
        if let Some(n) = network {
            args.extend(["--network", n]);
        }
        let out = hookbox(&args);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        let entry = &report["dispatch"]["trace"][0];
        assert_eq!(report["dispatch"]["decision"], "allow", "{report:#}");
        assert_eq!(entry["outcome"], "failed_open", "{report:#}");
        let message = entry["failure"]["message"].as_str().unwrap();
        assert!(message.contains("blocked by network policy"), "{message}");
    }
}
