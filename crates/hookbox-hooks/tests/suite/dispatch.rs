//! The dispatch rules of spec §2–§6, each through real `/bin/sh` handlers.

use hookbox_hooks::{Decision, Failure, Outcome};
use hookbox_protocol::ToolName;
use serde_json::json;

use super::support::{call, command, config, engine_in, outcomes, single};

const DENY: &str = r#"echo '{"decision":"deny","reason":"nope"}'"#;
const ALLOW: &str = r#"echo '{"decision":"allow"}'"#;

#[tokio::test]
async fn deny_blocks_with_the_reason_and_skips_the_remaining_handlers() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = single(
        "pre_tool_execution",
        "code_execution",
        json!([
            command("echo first >> ran; echo '{\"decision\":\"allow\"}'", 5.0),
            command(&format!("echo second >> ran; {DENY}"), 5.0),
            command("echo third >> ran", 5.0),
        ]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert_eq!(
        d.decision,
        Decision::Deny {
            reason: "nope".into(),
            group: "g".into()
        }
    );
    assert_eq!(outcomes(&d), ["allow", "deny", "skipped"]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ran")).unwrap(),
        "first\nsecond\n"
    );
}

#[tokio::test]
async fn every_matching_group_runs_in_file_order() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = config(
        r#"{
          "zeta":  {"pre_tool_execution": [{"matcher": "view_file", "hooks": [{"type":"command","command":"echo zeta >> ran"}]}]},
          "alpha": {"pre_tool_execution": [{"matcher": ".*_file", "hooks": [{"type":"command","command":"echo alpha >> ran"}]},
                                           {"matcher": "list_dir", "hooks": [{"type":"command","command":"echo never >> ran"}]},
                                           {"matcher": "*", "hooks": [{"type":"command","command":"echo star >> ran"}]}]}
        }"#,
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::ViewFile), "env_1")
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ran")).unwrap(),
        "zeta\nalpha\nstar\n"
    );
    let groups: Vec<&str> = d.trace.iter().map(|t| t.group.as_str()).collect();
    assert_eq!(groups, ["zeta", "alpha", "alpha"]);
}

#[tokio::test]
async fn a_disabled_group_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = config(&format!(
        r#"{{"off": {{"enabled": false, "pre_tool_execution": [{{"matcher": "*", "hooks": [{}]}}]}},
             "on":  {{"pre_tool_execution": [{{"matcher": "*", "hooks": [{}]}}]}}}}"#,
        command(&format!("touch off-ran; {DENY}"), 5.0),
        command("touch on-ran", 5.0),
    ));
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::DeleteFile), "env_1")
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert!(!dir.path().join("off-ran").exists());
    assert!(dir.path().join("on-ran").exists());
    assert_eq!(outcomes(&d), ["disabled", "failed_open"]);
}

#[tokio::test]
async fn matchers_select_tools_as_the_reference_table_says() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[ToolName])] = &[
        ("code_execution", &[ToolName::CodeExecution]),
        (
            "view_file|write_to_file",
            &[ToolName::ViewFile, ToolName::WriteToFile],
        ),
        (
            ".*_file",
            &[
                ToolName::ViewFile,
                ToolName::WriteToFile,
                ToolName::DeleteFile,
            ],
        ),
        ("*_file", &[]),
        ("", &ToolName::ALL),
        ("*", &ToolName::ALL),
        (".*", &ToolName::ALL),
    ];
    let engine = engine_in(dir.path());
    for (matcher, expected) in cases {
        let (groups, _) = hookbox_hooks::config::parse(
            "/.agents/hooks.json",
            json!({"g": {"pre_tool_execution": [{"matcher": matcher, "hooks": [command(DENY, 5.0)]}]}})
                .to_string()
                .as_bytes(),
        );
        let hooks = hookbox_hooks::HooksConfig { groups };
        for tool in ToolName::ALL {
            let d = engine.pre_tool(&hooks, &call(tool), "env_1").await;
            let denied = matches!(d.decision, Decision::Deny { .. });
            assert_eq!(
                denied,
                expected.contains(&tool),
                "matcher {matcher:?} on {tool}"
            );
        }
    }
}

#[tokio::test]
async fn every_failure_fails_open_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(String, FailureCheck)> = vec![
        (format!("{DENY}; exit 1"), |f| {
            matches!(f, Failure::NonZeroExit { code: 1 })
        }),
        ("kill -KILL $$".into(), |f| {
            matches!(f, Failure::Signaled { signal: 9 })
        }),
        ("sleep 30".into(), |f| matches!(f, Failure::TimedOut { .. })),
        ("echo not json at all".into(), |f| {
            matches!(f, Failure::NotJson { .. })
        }),
        ("true".into(), |f| matches!(f, Failure::EmptyOutput)),
        ("echo '{\"decision\":\"maybe\"}'".into(), |f| {
            matches!(f, Failure::NotADecision { .. })
        }),
        ("echo '{\"deny\":true}'".into(), |f| {
            matches!(f, Failure::NotADecision { .. })
        }),
        ("echo '{\"decision\":'".into(), |f| {
            matches!(f, Failure::NotJson { .. })
        }),
        ("head -c 100000000 /dev/zero".into(), |f| {
            matches!(f, Failure::OutputLimit { .. })
        }),
        ("/nonexistent/hook-binary".into(), |f| {
            matches!(f, Failure::NonZeroExit { code: 127 })
        }),
    ];
    let engine = engine_in(dir.path());
    for (cmd, expected) in cases {
        let hooks = single("pre_tool_execution", "*", json!([command(&cmd, 0.5)]));
        let d = engine
            .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
            .await;
        assert_eq!(d.decision, Decision::Allow, "{cmd}");
        match &d.trace[0].outcome {
            Outcome::FailedOpen { failure } => assert!(expected(failure), "{cmd}: {failure:?}"),
            other => panic!("{cmd}: expected failed_open, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_failing_handler_does_not_stop_a_later_deny() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = single(
        "pre_tool_execution",
        "*",
        json!([command("exit 2", 5.0), command(DENY, 5.0)]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::WriteToFile), "env_1")
        .await;
    assert!(matches!(d.decision, Decision::Deny { .. }));
    assert_eq!(outcomes(&d), ["failed_open", "deny"]);
}

#[tokio::test]
async fn deny_with_leading_whitespace_and_trailing_newline_still_denies() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = single(
        "pre_tool_execution",
        "*",
        json!([command(
            r#"printf '  \n\t{"decision": "deny", "reason": "spaced"}\n'"#,
            5.0
        )]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::ListDir), "env_1")
        .await;
    assert_eq!(
        d.decision,
        Decision::Deny {
            reason: "spaced".into(),
            group: "g".into()
        }
    );
}

#[tokio::test]
async fn pre_payload_has_the_reference_fields_and_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = single(
        "pre_tool_execution",
        "*",
        json!([command(&format!("cat > payload.json; {ALLOW}"), 5.0)]),
    );
    let call = hookbox_protocol::ToolCall {
        name: ToolName::CodeExecution,
        args: json!({"code": "rm -rf /tmp/forbidden", "language": "bash"}),
    };
    engine_in(dir.path())
        .pre_tool(&hooks, &call, "env_xyz789")
        .await;
    let payload: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("payload.json")).unwrap()).unwrap();
    assert_eq!(payload["tool_call"]["name"], "code_execution");
    assert_eq!(
        payload["tool_call"]["args"]["code"],
        "rm -rf /tmp/forbidden"
    );
    assert_eq!(payload["environment_id"], "env_xyz789");
    assert_eq!(payload["hook_event_name"], "pre_tool_execution");
    assert!(payload.get("error").is_none());
}

#[tokio::test]
async fn post_payload_carries_error_only_when_there_was_one_and_output_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = single(
        "post_tool_execution",
        "*",
        json!([command(&format!("cat >> payloads.jsonl; {DENY}"), 5.0)]),
    );
    let engine = engine_in(dir.path());
    let with_error = engine
        .post_tool(
            &hooks,
            &call(ToolName::ViewFile),
            "env_1",
            Some("No such file"),
        )
        .await;
    let without = engine
        .post_tool(&hooks, &call(ToolName::ViewFile), "env_1", None)
        .await;
    // A deny printed by a post hook changes nothing.
    assert_eq!(with_error.decision, Decision::Allow);
    assert_eq!(outcomes(&with_error), ["completed"]);
    assert_eq!(without.decision, Decision::Allow);
    let text = std::fs::read_to_string(dir.path().join("payloads.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["error"], "No such file");
    assert_eq!(lines[0]["hook_event_name"], "post_tool_execution");
    assert!(lines[1].get("error").is_none());
}

#[tokio::test]
async fn post_hook_failures_are_traced_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = single(
        "post_tool_execution",
        "*",
        json!([command("echo oops >&2; exit 4", 5.0), command("true", 5.0)]),
    );
    let d = engine_in(dir.path())
        .post_tool(&hooks, &call(ToolName::DeleteFile), "env_1", None)
        .await;
    assert_eq!(outcomes(&d), ["failed", "completed"]);
    assert_eq!(d.trace[0].stderr.as_deref(), Some("oops\n"));
}

#[tokio::test]
async fn pre_hooks_do_not_fire_for_post_rules_and_vice_versa() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = single("post_tool_execution", "*", json!([command(DENY, 5.0)]));
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert!(d.trace.is_empty());
    assert_eq!(d.decision, Decision::Allow);
}

/// Recognises the expected failure.
type FailureCheck = fn(&Failure) -> bool;
