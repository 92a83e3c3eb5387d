//! hookbox's opt-in extensions: `"on_failure": "deny"` (fail closed) and `updated_args`
//! (argument rewriting). Without them a file behaves exactly as the reference says; the seed
//! cases in `dispatch.rs` stay as they are.

use std::sync::Arc;

use hookbox_hooks::{Decision, Outcome};
use hookbox_protocol::{ToolCall, ToolName};
use serde_json::json;

use super::support::{call, command, config, engine_in, outcomes, single};

fn fail_closed(cmd: &str, timeout: f64) -> serde_json::Value {
    json!({"type": "command", "command": cmd, "timeout": timeout, "on_failure": "deny"})
}

#[tokio::test]
async fn a_fail_closed_handler_denies_on_every_kind_of_failure() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("exit 3", "exited with status 3"),
        ("true", "printed nothing"),
        ("echo not json", "not JSON"),
        ("echo '{\"verdict\": 1}'", "not a decision"),
        ("sleep 30", "timed out"),
        ("kill -9 $$", "signal 9"),
        ("head -c 3000000 /dev/zero", "more than"),
    ];
    for (cmd, why) in cases {
        let hooks = single("pre_tool_execution", "*", json!([fail_closed(cmd, 1.0)]));
        let d = engine_in(dir.path())
            .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
            .await;
        let Decision::Deny { reason, group } = &d.decision else {
            panic!("{cmd}: {:?}", d.decision)
        };
        assert_eq!(group, "g");
        assert!(
            reason.contains("fail closed") && reason.contains(why),
            "{cmd}: {reason}"
        );
        assert_eq!(outcomes(&d), ["failed_closed"], "{cmd}");
    }
}

#[tokio::test]
async fn fail_closed_is_per_handler_and_the_default_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = single(
        "pre_tool_execution",
        "*",
        json!([command("exit 1", 5.0), {"type": "command", "command": "exit 1", "on_failure": "allow"}]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(outcomes(&d), ["failed_open", "failed_open"]);
    // A post hook has nothing to block: its failure is recorded, the call stands.
    let hooks = single(
        "post_tool_execution",
        "*",
        json!([fail_closed("exit 1", 5.0)]),
    );
    let d = engine_in(dir.path())
        .post_tool(&hooks, &call(ToolName::CodeExecution), "env_1", None)
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(outcomes(&d), ["failed"]);
    // An unreachable http handler that is fail-closed denies too.
    let hooks = single(
        "pre_tool_execution",
        "*",
        json!([{"type": "http", "url": "http://127.0.0.1:9/hook", "timeout": 2, "on_failure": "deny"}]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert!(
        matches!(d.decision, Decision::Deny { .. }),
        "{:?}",
        d.decision
    );
}

#[test]
fn unknown_on_failure_values_are_errors_and_count_as_deny() {
    let (groups, diagnostics) = hookbox_hooks::config::parse(
        "/.agents/hooks.json",
        br#"{"g": {"pre_tool_execution": [{"matcher": "*", "hooks": [
            {"type": "command", "command": "x", "on_failure": "denny"},
            {"type": "command", "command": "y", "on_failure": true}]}]}}"#,
    );
    assert_eq!(diagnostics.len(), 2, "{diagnostics:#?}");
    assert!(
        diagnostics
            .iter()
            .all(|d| d.severity == hookbox_hooks::Severity::Error)
    );
    assert_eq!(
        diagnostics[0].path,
        "$.g.pre_tool_execution[0].hooks[0].on_failure"
    );
    assert!(
        diagnostics[0].message.contains("did you mean \"deny\""),
        "{}",
        diagnostics[0].message
    );
    let handlers = &groups[0].pre_tool_execution[0].handlers;
    assert!(
        handlers
            .iter()
            .all(|h| h.on_failure == hookbox_hooks::OnFailure::Deny)
    );
}

const REWRITE: &str = r#"cat > /dev/null; echo '{"decision": "allow", "updated_args": {"code": "echo rewritten", "language": "bash"}}'"#;

#[tokio::test]
async fn updated_args_reach_later_handlers_and_the_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = single(
        "pre_tool_execution",
        "code_execution",
        json!([
            command(REWRITE, 5.0),
            command("cat > seen.json; echo '{\"decision\": \"allow\"}'", 5.0)
        ]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(outcomes(&d), ["allow_updated", "allow"]);
    let expected = json!({"code": "echo rewritten", "language": "bash"});
    assert_eq!(d.updated_args.as_ref(), Some(&expected));
    let seen: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("seen.json")).unwrap())
            .unwrap();
    assert_eq!(seen["tool_call"]["args"], expected);
    // Without updated_args nothing changes.
    let plain = single(
        "pre_tool_execution",
        "*",
        json!([command("echo '{\"decision\": \"allow\"}'", 5.0)]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&plain, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert_eq!(d.updated_args, None);
    assert!(!serde_json::to_string(&d).unwrap().contains("updated_args"));
}

#[tokio::test]
async fn invalid_updated_args_deny_with_the_validators_reason() {
    let dir = tempfile::tempdir().unwrap();
    let engine =
        engine_in(dir.path()).with_args_validator(Arc::new(|tool, args| match args.get("code") {
            Some(serde_json::Value::String(_)) => Ok(()),
            _ => Err(format!("{tool} needs a string `code`")),
        }));
    let hooks = single(
        "pre_tool_execution",
        "*",
        json!([
            command(
                r#"echo '{"decision": "allow", "updated_args": {"code": 7}}'"#,
                5.0
            ),
            command("echo never >> ran", 5.0),
        ]),
    );
    let d = engine
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    let Decision::Deny { reason, .. } = &d.decision else {
        panic!("{:?}", d.decision)
    };
    assert!(
        reason.contains("invalid") && reason.contains("needs a string `code`"),
        "{reason}"
    );
    assert_eq!(outcomes(&d), ["invalid_update", "skipped"]);
    assert!(!dir.path().join("ran").exists());
    // Not an object at all: denied even without a validator.
    let hooks = single(
        "pre_tool_execution",
        "*",
        json!([command(
            r#"echo '{"decision": "allow", "updated_args": "rm -rf /"}'"#,
            5.0
        )]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert!(
        matches!(&d.trace[0].outcome, Outcome::InvalidUpdate { .. }),
        "{:?}",
        d.trace[0]
    );
}

#[tokio::test]
async fn updated_args_in_a_post_hook_are_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = config(
        r#"{"g": {"post_tool_execution": [{"matcher": "*", "hooks": [{"type": "command", "command": "echo '{\"decision\": \"allow\", \"updated_args\": {\"code\": \"x\"}}'"}]}]}}"#,
    );
    let c = ToolCall {
        name: ToolName::CodeExecution,
        args: json!({"code": "ls", "language": "bash"}),
    };
    let d = engine_in(dir.path())
        .post_tool(&hooks, &c, "env_1", None)
        .await;
    assert_eq!(d.updated_args, None);
    assert_eq!(outcomes(&d), ["completed"]);
    assert!(
        d.trace[0]
            .warning
            .as_deref()
            .unwrap()
            .contains("only in pre_tool_execution")
    );
}

#[tokio::test]
async fn additional_context_is_collected_from_pre_and_post_answers_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let pre = single(
        "pre_tool_execution",
        "code_execution",
        json!([
            command(
                r#"cat > /dev/null; echo '{"decision": "allow", "additional_context": "the repo uses pnpm"}'"#,
                5.0
            ),
            command(
                r#"cat > /dev/null; echo '{"decision": "deny", "reason": "no rm", "additional_context": "use git clean instead"}'"#,
                5.0
            ),
            command(
                r#"cat > /dev/null; echo '{"decision": "allow", "additional_context": 3}'"#,
                5.0
            )
        ]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&pre, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert!(matches!(d.decision, Decision::Deny { .. }));
    assert_eq!(
        d.additional_context,
        ["the repo uses pnpm", "use git clean instead"]
    );
    assert_eq!(
        d.trace[0].additional_context.as_deref(),
        Some("the repo uses pnpm")
    );
    // A post hook's context counts too; one that is not a string is ignored, saying so.
    let post = single(
        "post_tool_execution",
        "*",
        json!([
            command(
                r#"cat > /dev/null; echo '{"additional_context": "tests: 3 failed"}'"#,
                5.0
            ),
            command(
                r#"cat > /dev/null; echo '{"additional_context": ["x"]}'"#,
                5.0
            )
        ]),
    );
    let d = engine_in(dir.path())
        .post_tool(&post, &call(ToolName::CodeExecution), "env_1", None)
        .await;
    assert_eq!(d.additional_context, ["tests: 3 failed"]);
    assert!(
        d.trace[1]
            .warning
            .as_deref()
            .is_some_and(|w| w.contains("must be a string")),
        "{:?}",
        d.trace[1]
    );
    // Without it nothing changes in what is shown.
    let plain = single(
        "pre_tool_execution",
        "*",
        json!([command("echo '{\"decision\": \"allow\"}'", 5.0)]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&plain, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert!(
        !serde_json::to_string(&d)
            .unwrap()
            .contains("additional_context")
    );
}

#[tokio::test]
async fn ask_pauses_the_call_and_a_later_deny_still_wins() {
    let dir = tempfile::tempdir().unwrap();
    let ask = |reason: &str| {
        command(
            &format!("echo '{{\"decision\":\"ask\",\"reason\":\"{reason}\"}}'"),
            5.0,
        )
    };
    // Alone: the decision is ask, with the handler's reason and group.
    let hooks = single("pre_tool_execution", "*", json!([ask("needs a person")]));
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert_eq!(
        d.decision,
        Decision::Ask {
            reason: "needs a person".into(),
            group: "g".into()
        }
    );
    assert_eq!(outcomes(&d), ["ask"]);
    // Handlers after an ask still run: the first ask's reason stands, a rewrite applies to the
    // call the reviewer sees, and a deny wins over the ask.
    let rewrite = command(
        r#"echo '{"decision":"allow","updated_args":{"code":"ls","language":"bash"}}'"#,
        5.0,
    );
    let hooks = single(
        "pre_tool_execution",
        "*",
        json!([ask("first"), ask("second"), rewrite]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert_eq!(d.decision.label(), "ask");
    assert!(matches!(&d.decision, Decision::Ask { reason, .. } if reason == "first"));
    assert_eq!(outcomes(&d), ["ask", "ask", "allow_updated"]);
    assert_eq!(
        d.updated_args,
        Some(json!({"code": "ls", "language": "bash"}))
    );
    let deny = command(r#"echo '{"decision":"deny","reason":"never"}'"#, 5.0);
    let hooks = single("pre_tool_execution", "*", json!([ask("first"), deny]));
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert!(matches!(&d.decision, Decision::Deny { reason, .. } if reason == "never"));
    // A post hook cannot ask: its answer is recorded with a warning, nothing pauses.
    let hooks = single("post_tool_execution", "*", json!([ask("late")]));
    let d = engine_in(dir.path())
        .post_tool(&hooks, &call(ToolName::CodeExecution), "env_1", None)
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(outcomes(&d), ["completed"]);
    assert!(
        d.trace[0]
            .warning
            .as_deref()
            .is_some_and(|w| w.contains("ask")),
        "{:?}",
        d.trace[0]
    );
}

fn turn(
    event: hookbox_protocol::HookEvent,
    agent: &str,
) -> hookbox_protocol::InteractionHookPayload {
    hookbox_protocol::InteractionHookPayload {
        interaction_id: "int_1".into(),
        environment_id: "env_1".into(),
        agent: agent.into(),
        input: None,
        input_text: Some("hello".into()),
        status: None,
        output: None,
        errors: None,
        hook_event_name: event,
    }
}

#[tokio::test]
async fn interaction_events_match_the_agent_and_decide_like_pre_hooks() {
    use hookbox_protocol::HookEvent;
    let dir = tempfile::tempdir().unwrap();
    // The handler sees the interaction payload (no tool_call) and denies by what it reads.
    let hooks = config(
        r#"{"g": {"pre_interaction": [{"matcher": "antigravity-.*", "hooks": [{"type": "command",
            "command": "python3 -c 'import json,sys; p=json.load(sys.stdin); assert \"tool_call\" not in p; print(json.dumps({\"decision\": \"deny\", \"reason\": p[\"input_text\"] + \" from \" + p[\"agent\"]}))'"}]}]}}"#,
    );
    let engine = engine_in(dir.path());
    let d = engine
        .interaction(
            &hooks,
            &turn(HookEvent::PreInteraction, "antigravity-preview-09-2026"),
        )
        .await;
    assert!(
        matches!(&d.decision, Decision::Deny { reason, .. } if reason == "hello from antigravity-preview-09-2026"),
        "{d:?}"
    );
    // Another agent: the matcher does not match, nothing runs.
    let d = engine
        .interaction(&hooks, &turn(HookEvent::PreInteraction, "agents/mine"))
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert!(d.trace.is_empty());
    // Only a tool call can wait for a person: ask is no decision here (fails open), and
    // updated_args is ignored with a warning; context is kept.
    let hooks = single(
        "pre_interaction",
        "*",
        json!([
            command(r#"echo '{"decision": "ask"}'"#, 5.0),
            command(
                r#"echo '{"decision": "allow", "updated_args": {}, "additional_context": "use pnpm"}'"#,
                5.0
            )
        ]),
    );
    let d = engine
        .interaction(&hooks, &turn(HookEvent::PreInteraction, "a"))
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(outcomes(&d), ["failed_open", "allow"]);
    assert!(
        d.trace[1]
            .warning
            .as_deref()
            .is_some_and(|w| w.contains("updated_args"))
    );
    assert_eq!(d.additional_context, ["use pnpm"]);
    // post_interaction observes: a deny there decides nothing.
    let hooks = single(
        "post_interaction",
        "*",
        json!([command(r#"echo '{"decision": "deny"}'"#, 5.0)]),
    );
    let d = engine
        .interaction(&hooks, &turn(HookEvent::PostInteraction, "a"))
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(outcomes(&d), ["completed"]);
}

#[test]
fn interaction_events_parse_without_tool_lints_and_a_reference_file_is_unchanged() {
    let (groups, diagnostics) = hookbox_hooks::config::parse(
        "/.agents/hooks.json",
        br#"{"g": {"pre_interaction": [{"matcher": "my-agent|antigravity-.*", "hooks": [{"type": "command", "command": "x"}]}],
                   "post_interaction": [{"matcher": "*", "hooks": [{"type": "http", "url": "https://audit.example/turn"}]}]}}"#,
    );
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(groups[0].pre_interaction.len(), 1);
    assert_eq!(groups[0].post_interaction.len(), 1);
    assert!(groups[0].pre_tool_execution.is_empty());
    let (groups, _) = hookbox_hooks::config::parse(
        "/.agents/hooks.json",
        br#"{"g": {"pre_tool_execution": [{"matcher": "*", "hooks": [{"type": "command", "command": "x"}]}]}}"#,
    );
    assert!(groups[0].pre_interaction.is_empty() && groups[0].post_interaction.is_empty());
}

#[tokio::test]
async fn only_matchers_written_for_mcp_see_remote_mcp_tools() {
    use hookbox_protocol::HookEvent;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_in(dir.path());
    let deny = |reason: &str| {
        command(
            &format!("echo '{{\"decision\":\"deny\",\"reason\":\"{reason}\"}}'"),
            5.0,
        )
    };
    let hooks = config(
        &json!({
            "star": {"pre_tool_execution": [{"matcher": "*", "hooks": [deny("star")]}]},
            "mcp": {"pre_tool_execution": [{"matcher": "mcp:docs/.*", "hooks": [
                command("python3 -c 'import json,sys; p=json.load(sys.stdin); print(json.dumps({\"decision\": \"deny\", \"reason\": p[\"tool_call\"][\"name\"] + \" \" + p[\"tool_call\"][\"args\"][\"q\"]}))'", 5.0)
            ]}]},
        })
        .to_string(),
    );
    // A remote tool: `*` does not fire (the reference), the mcp: matcher does, with the payload.
    let d = engine
        .named_tool(
            &hooks,
            HookEvent::PreToolExecution,
            "mcp:docs/search",
            &json!({"q": "x"}),
            "env_1",
            None,
        )
        .await;
    assert!(
        matches!(&d.decision, Decision::Deny { reason, group } if reason == "mcp:docs/search x" && group == "mcp"),
        "{d:?}"
    );
    assert_eq!(d.trace.len(), 1);
    // Another server: nothing matches.
    let d = engine
        .named_tool(
            &hooks,
            HookEvent::PreToolExecution,
            "mcp:other/search",
            &json!({"q": "x"}),
            "env_1",
            None,
        )
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert!(d.trace.is_empty());
    // A built-in tool: `*` fires as always, the mcp: matcher never does.
    let d = engine
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_1")
        .await;
    assert!(matches!(&d.decision, Decision::Deny { reason, .. } if reason == "star"));
    assert_eq!(d.trace.len(), 1);
}

/// The environment's injected values, as a fixed list.
#[derive(Debug)]
struct Injected(Vec<String>);

impl hookbox_hooks::scrub::Secrets for Injected {
    fn values(&self) -> Vec<String> {
        self.0.clone()
    }
}

/// Regression (issue 36, item 5): a handler that printed what an upstream echoed (the injected
/// `Authorization` header) put the token into the trace's stderr excerpt, its unparseable
/// output and its deny reason, and from there into logs and spans. Every text is scrubbed.
#[tokio::test]
async fn injected_values_echoed_by_a_handler_are_scrubbed_from_every_text_it_produced() {
    let dir = tempfile::tempdir().unwrap();
    let token = "tok-9f8e7d6c5b4a";
    let engine = engine_in(dir.path()).with_secrets(Arc::new(Injected(vec![
        format!("Bearer {token}"),
        token.to_owned(),
    ])));
    // What the upstream echoed reaches the handlers through files, never their command lines.
    std::fs::write(
        dir.path().join("echo.txt"),
        format!("upstream said: authorization: Bearer {token}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("deny.json"),
        json!({"decision": "deny", "reason": format!("refused, token {token} seen")}).to_string(),
    )
    .unwrap();
    let config = single(
        "pre_tool_execution",
        "*",
        json!([
            command("cat echo.txt >&2; cat echo.txt", 10.0),
            command("cat deny.json", 10.0),
        ]),
    );
    let d = engine
        .pre_tool(&config, &call(ToolName::CodeExecution), "env_x")
        .await;
    let shown = serde_json::to_string(&d).unwrap();
    assert!(!shown.contains(token), "{shown}");
    assert!(
        shown.contains("upstream said: authorization: [redacted]"),
        "{shown}"
    );
    match &d.decision {
        Decision::Deny { reason, .. } => assert_eq!(reason, "refused, token [redacted] seen"),
        other => panic!("{other:?}"),
    }
    // Without secrets nothing is changed (the scrub is not a blanket filter).
    let plain = engine_in(dir.path())
        .pre_tool(&config, &call(ToolName::CodeExecution), "env_x")
        .await;
    assert!(serde_json::to_string(&plain).unwrap().contains(token));
}
