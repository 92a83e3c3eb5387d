//! Vendor dialects through the engine with real processes and a real HTTP server: precedence
//! across handlers, http handlers, time-outs per vendor (and Cursor's failClosed), the vendor's
//! environment variables and Gemini's substitution, interaction events.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hookbox_hooks::dialect::{Dialect, load};
use hookbox_hooks::{Decision, HooksConfig};
use hookbox_protocol::{HookEvent, InteractionHookPayload, ToolName};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Incoming;
use serde_json::json;
use tokio::net::TcpListener;

use super::support::{call, engine_in, outcomes};

fn vendor(dialect: Dialect, json: serde_json::Value) -> HooksConfig {
    let (group, diagnostics) =
        load::parse(dialect, "/workspace/f.json", json.to_string().as_bytes());
    assert!(
        diagnostics
            .iter()
            .all(|d| d.severity != hookbox_hooks::Severity::Error),
        "{diagnostics:#?}"
    );
    HooksConfig {
        groups: vec![group.unwrap()],
    }
}

fn claude_pre(matcher: &str, handlers: serde_json::Value) -> HooksConfig {
    vendor(
        Dialect::ClaudeCode,
        json!({"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": handlers}]}}),
    )
}

fn cmd(c: &str) -> serde_json::Value {
    json!({"type": "command", "command": c})
}

fn reason(d: &hookbox_hooks::Dispatch) -> &str {
    match &d.decision {
        Decision::Deny { reason, .. } | Decision::Ask { reason, .. } => reason,
        Decision::Allow => "",
    }
}

#[tokio::test]
async fn claude_precedence_deny_over_ask_over_allow() {
    let dir = tempfile::tempdir().unwrap();
    let ask = r#"echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"check"}}'"#;
    let deny = r#"echo '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"no"}}'"#;
    let hooks = claude_pre("Bash", json!([cmd(ask), cmd(deny), cmd("echo after")]));
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_v")
        .await;
    assert_eq!(d.decision.label(), "deny");
    assert_eq!(reason(&d), "no");
    assert_eq!(outcomes(&d), ["ask", "deny", "skipped"]);
    let hooks = claude_pre("Bash", json!([cmd(ask), cmd("true")]));
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_v")
        .await;
    assert_eq!(d.decision.label(), "ask");
    // Not matched: Read is not Bash.
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::ViewFile), "env_v")
        .await;
    assert!(d.trace.is_empty());
}

#[tokio::test]
async fn the_vendor_environment_and_gemini_substitution() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = claude_pre(
        "Bash",
        json!([cmd(r#"echo "dir=$CLAUDE_PROJECT_DIR" >&2; exit 2"#)]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_v")
        .await;
    assert_eq!(reason(&d), "dir=/workspace");
    // Gemini substitutes into the command text: single quotes do not stop it.
    let hooks = vendor(
        Dialect::GeminiCli,
        json!({"hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [cmd("echo 'at $GEMINI_PROJECT_DIR'; exit 3")]}]}}),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_v")
        .await;
    assert_eq!(reason(&d), "at /workspace");
    assert_eq!(
        d.trace[0].target, "echo 'at $GEMINI_PROJECT_DIR'; exit 3",
        "the trace keeps the file's text"
    );
}

#[tokio::test]
async fn the_input_is_the_vendors_shape() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = claude_pre("Bash", json!([cmd("cat > input.json")]));
    engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_v")
        .await;
    let input: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("input.json")).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "Bash");
    assert_eq!(input["tool_input"], json!({"command": "ls"}));
    assert_eq!(input["cwd"], "/workspace");
    assert_eq!(input["session_id"], "env_v");
    assert!(
        input["tool_use_id"]
            .as_str()
            .unwrap()
            .starts_with("hookbox_")
    );
}

#[tokio::test]
async fn time_outs_proceed_except_cursor_fail_closed() {
    let dir = tempfile::tempdir().unwrap();
    let hang = json!({"type": "command", "command": "exec sleep 30", "timeout": 1});
    let d = engine_in(dir.path())
        .pre_tool(
            &claude_pre("Bash", json!([hang])),
            &call(ToolName::CodeExecution),
            "env_v",
        )
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(outcomes(&d), ["failed_open"]);
    let cursor = vendor(
        Dialect::Cursor,
        json!({"version": 1, "hooks": {"beforeShellExecution": [{"command": "exec sleep 30", "timeout": 1, "failClosed": true}]}}),
    );
    let d = engine_in(dir.path())
        .pre_tool(&cursor, &call(ToolName::CodeExecution), "env_v")
        .await;
    assert_eq!(d.decision.label(), "deny");
    assert!(reason(&d).contains("timed out"), "{}", reason(&d));
    // beforeShellExecution does not fire for a file read.
    let d = engine_in(dir.path())
        .pre_tool(&cursor, &call(ToolName::ViewFile), "env_v")
        .await;
    assert!(d.trace.is_empty());
}

#[tokio::test]
async fn unsupported_handler_types_are_failures_under_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let (group, _) = load::parse(
        Dialect::ClaudeCode,
        "/workspace/.claude/settings.json",
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "agent", "prompt": "safe?"}]}]}})
            .to_string()
            .as_bytes(),
    );
    let hooks = HooksConfig {
        groups: vec![group.unwrap()],
    };
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_v")
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(outcomes(&d), ["failed_open"]);
}

#[tokio::test]
async fn claude_http_handlers_post_the_vendor_input_and_a_2xx_json_body_decides() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let seen_server = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let seen = seen_server.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        seen.lock()
                            .unwrap()
                            .push(serde_json::from_slice(&body).unwrap());
                        let answer = br#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"remote policy"}}"#;
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                            answer,
                        ))))
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let hooks = claude_pre(
        "Bash",
        json!([{"type": "http", "url": format!("http://{addr}/hook"), "timeout": 10}]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_v")
        .await;
    assert_eq!(reason(&d), "remote policy");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0]["hook_event_name"], "PreToolUse");
    assert_eq!(seen[0]["tool_input"]["command"], "ls");
}

#[tokio::test]
async fn prompt_events_deny_or_add_context() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = vendor(
        Dialect::ClaudeCode,
        json!({"hooks": {"UserPromptSubmit": [{"hooks": [cmd(
            r#"grep -q password && echo '{"decision":"block","reason":"no secrets in prompts"}' || echo 'be brief'"#
        )]}]}}),
    );
    let payload = |text: &str| InteractionHookPayload {
        interaction_id: "int_1".into(),
        environment_id: "env_v".into(),
        agent: "a".into(),
        input: None,
        input_text: Some(text.into()),
        status: None,
        output: None,
        errors: None,
        hook_event_name: HookEvent::PreInteraction,
    };
    let d = engine_in(dir.path())
        .interaction(&hooks, &payload("my password is x"))
        .await;
    assert_eq!(reason(&d), "no secrets in prompts");
    let d = engine_in(dir.path())
        .interaction(&hooks, &payload("hello"))
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(d.additional_context, ["be brief"]);
}
