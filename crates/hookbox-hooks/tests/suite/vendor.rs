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
                        let headers: serde_json::Map<String, serde_json::Value> = req
                            .headers()
                            .iter()
                            .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap())))
                            .collect();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let mut seen_body: serde_json::Value =
                            serde_json::from_slice(&body).unwrap();
                        seen_body["__headers"] = serde_json::Value::Object(headers);
                        seen.lock().unwrap().push(seen_body);
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
    // Claude Code's `allowedEnvVars`: only listed variables are interpolated, and only from
    // what the environment declares (HOME is the host's, never read).
    let hooks = claude_pre(
        "Bash",
        json!([{"type": "http", "url": format!("http://{addr}/hook"), "timeout": 10,
                "headers": {"X-Team": "team-${TEAM}-$TEAM", "X-Not": "[$SECRET_TOKEN]", "X-Home": "[$HOME]",
                            "X-Multi": "$MULTI", "X-Price": "$5 ok"},
                "allowedEnvVars": ["TEAM", "HOME", "MULTI"]}]),
    );
    let engine = engine_in(dir.path()).with_declared_env(vec![
        ("TEAM".into(), "blue".into()),
        ("SECRET_TOKEN".into(), "s3cret".into()),
        ("MULTI".into(), "a\r\nInjected: 1".into()),
    ]);
    let d = engine
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_v")
        .await;
    assert_eq!(reason(&d), "remote policy");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0]["hook_event_name"], "PreToolUse");
    assert_eq!(seen[0]["tool_input"]["command"], "ls");
    // No file exists where an http receiver runs.
    assert_eq!(seen[0]["transcript_path"], serde_json::Value::Null);
    let h = &seen[0]["__headers"];
    assert_eq!(h["x-team"], "team-blue-blue");
    assert_eq!(h["x-not"], "[]", "not in allowedEnvVars");
    assert_eq!(h["x-home"], "[]", "the host's HOME is never read");
    assert!(h.get("x-multi").is_none(), "a line break drops the header");
    assert!(h.get("injected").is_none());
    assert_eq!(h["x-price"], "$5 ok");
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

/// A Claude hook reads the interaction's steps at its `transcript_path` (twice: a real file, not
/// a pipe), and its post hook sees the tool's output as `tool_response`; nothing of the file is
/// left behind; a reference handler in the same dispatch gets exactly the reference payload.
#[tokio::test]
async fn transcript_path_is_a_real_file_and_post_hooks_see_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let read = r#"cat > in.json; p=$(python3 -c 'import json,sys; print(json.load(open("in.json"))["transcript_path"])'); cp "$p" tr.jsonl; wc -l < "$p" > again; ls -a /dev/shm /tmp > listing 2>/dev/null; true"#;
    let mut hooks = vendor(
        Dialect::ClaudeCode,
        json!({"hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [cmd(read)]}],
            "PostToolUse": [{"matcher": "Bash", "hooks": [cmd("cat > post.json")]}]
        }}),
    );
    let reference = super::support::single(
        "post_tool_execution",
        "*",
        json!([super::support::command("cat > ref.json", 30.0)]),
    );
    hooks.groups.insert(0, reference.groups[0].clone());
    let transcript = b"{\"type\":\"user_input\",\"content\":[{\"type\":\"text\",\"text\":\"hi 'there' $HOME\"}]}\n{\"type\":\"code_execution_call\",\"id\":\"c1\",\"arguments\":{\"code\":\"ls\"}}\nnot json\n".to_vec();
    let extras = hookbox_hooks::VendorExtras {
        transcript: transcript.clone(),
        ..Default::default()
    };
    let engine = engine_in(dir.path());
    let pre = hookbox_protocol::HookPayload {
        tool_call: call(ToolName::CodeExecution),
        environment_id: "env_v".into(),
        error: None,
        hook_event_name: HookEvent::PreToolExecution,
    };
    let d = engine.dispatch_with(&hooks, &pre, &extras).await;
    assert_eq!(outcomes(&d), ["allow"], "{:#?}", d.trace);
    let input: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("in.json")).unwrap()).unwrap();
    assert_eq!(input["transcript_path"], json!("/proc/self/fd/8"));
    let copy = std::fs::read_to_string(dir.path().join("tr.jsonl")).unwrap();
    // Lines that are not JSON objects are never written; the others are byte for byte.
    let expected: String = String::from_utf8(transcript)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(copy, expected);
    let again = std::fs::read_to_string(dir.path().join("again")).unwrap();
    assert_eq!(again.trim(), "2", "read a second time at the same path");
    let listing = std::fs::read_to_string(dir.path().join("listing")).unwrap();
    assert!(
        !listing.contains(".hookbox-transcript-"),
        "the file's name is gone before the hook runs: {listing}"
    );

    // Post: the tool's output as Claude's Bash `tool_response`; the reference input unchanged.
    let post = hookbox_protocol::HookPayload {
        hook_event_name: HookEvent::PostToolExecution,
        ..pre
    };
    let extras = hookbox_hooks::VendorExtras {
        tool_output: Some(json!({"stdout": "a.txt\n", "stderr": "warning: x", "exit_code": 0})),
        ..Default::default()
    };
    let d = engine.dispatch_with(&hooks, &post, &extras).await;
    assert_eq!(outcomes(&d), ["completed", "completed"], "{:#?}", d.trace);
    let vendor_in: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("post.json")).unwrap()).unwrap();
    assert_eq!(
        vendor_in["tool_response"],
        json!({"stdout": "a.txt\n", "stderr": "warning: x", "interrupted": false, "isImage": false})
    );
    let ref_in: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("ref.json")).unwrap()).unwrap();
    assert_eq!(ref_in, serde_json::to_value(&post).unwrap());
}

/// Outside an interaction (`hooks test`, `hookbox tool`) the file exists and has no lines; an
/// http handler, which runs where no such file is, gets `null`.
#[tokio::test]
async fn without_an_interaction_the_transcript_is_an_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = claude_pre(
        "Bash",
        json!([cmd(
            r#"cat > in.json; test -f /proc/self/fd/8 && wc -c < /proc/self/fd/8 > size"#
        )]),
    );
    engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_v")
        .await;
    let size = std::fs::read_to_string(dir.path().join("size")).unwrap();
    assert_eq!(size.trim(), "0");
}

/// Each vendor writes the output in its own field: Gemini's `llmContent`, Copilot's
/// `toolResult.textResultForLlm`, Cursor's `afterShellExecution` `output`; bounded.
#[test]
fn each_vendor_shapes_the_tool_response() {
    use hookbox_hooks::dialect::events::PayloadStyle;
    use hookbox_hooks::dialect::payload::{Moment, TOOL_RESPONSE_LIMIT, write};
    use hookbox_hooks::dialect::tools::VendorCall;
    let out = json!({"stdout": "hello\n", "stderr": "", "exit_code": 0});
    let big = json!({"stdout": "é".repeat(TOOL_RESPONSE_LIMIT), "stderr": "", "exit_code": 0});
    let call = VendorCall {
        tool_name: "Bash".into(),
        tool_input: json!({"command": "ls"}),
        chunk: None,
    };
    let at = |d, s, name: &str, output| {
        let m = Moment {
            environment_id: "env",
            tool_output: Some(output),
            ..Moment::default()
        };
        write(d, s, name, HookEvent::PostToolExecution, Some(&call), &m)
    };
    let g = at(Dialect::GeminiCli, PayloadStyle::Native, "AfterTool", &out);
    assert_eq!(g["tool_response"]["llmContent"], json!("hello\n"));
    let c = at(Dialect::Copilot, PayloadStyle::Native, "postToolUse", &out);
    assert_eq!(c["toolResult"]["textResultForLlm"], json!("hello\n"));
    let cur = at(
        Dialect::Cursor,
        PayloadStyle::Native,
        "afterShellExecution",
        &out,
    );
    assert_eq!(cur["output"], json!("hello\n"));
    let file = json!({"path": "/workspace/a", "bytes_written": 3});
    let w = at(
        Dialect::ClaudeCode,
        PayloadStyle::Native,
        "PostToolUse",
        &file,
    );
    assert_eq!(
        w["tool_response"],
        json!({"stdout": "", "stderr": "", "interrupted": false, "isImage": false})
    );
    let g = at(Dialect::GeminiCli, PayloadStyle::Native, "AfterTool", &big);
    assert!(g["tool_response"]["llmContent"].as_str().unwrap().len() <= TOOL_RESPONSE_LIMIT);
}
