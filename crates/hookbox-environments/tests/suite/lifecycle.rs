//! The tool-call lifecycle through real hooks running in the sandbox.

use hookbox_environments::lifecycle::ToolResult;
use serde_json::json;

use super::common::*;

fn gate_spec(freeze: bool) -> serde_json::Value {
    json!({
        "sources": [
            {"type": "inline", "target": ".agents/hooks.json", "content": fixture("hooks.json")},
            {"type": "inline", "target": ".agents/hooks-scripts/gate.py", "content": fixture("gate.py")},
            {"type": "inline", "target": "tmp/forbidden/keep", "content": "precious"},
        ],
        "freeze_hooks": freeze,
    })
}

#[tokio::test]
async fn reference_gate_denies_rm_rf_and_the_directory_survives() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(&store, gate_spec(false));
    let env = store.open_env(&meta.id).unwrap();

    let denied = env
        .call_tool(call(
            "code_execution",
            json!({"code": "rm -rf /tmp/forbidden", "language": "bash"}),
        ))
        .await;
    assert_eq!(
        denied.result,
        ToolResult::Denied {
            reason: "Destructive command blocked by security gate.".into()
        }
    );
    assert!(denied.post.is_none());
    assert_eq!(denied.pre.trace.len(), 1);

    let allowed = env
        .call_tool(call(
            "code_execution",
            json!({"code": "cat /tmp/forbidden/keep", "language": "bash"}),
        ))
        .await;
    let ToolResult::Ok { output } = &allowed.result else {
        panic!("{:?}", allowed.result)
    };
    let output = output.json();
    assert_eq!(output["stdout"], "precious");
    assert_eq!(output["exit_code"], 0);
    assert!(
        data.path()
            .join("environments")
            .join(&meta.id)
            .join("root/tmp/forbidden/keep")
            .exists()
    );
}

const AUDIT: &str = r#"{"audit": {"post_tool_execution": [{"matcher": ".*", "hooks": [
  {"type": "command", "command": "cat >> /tmp/post.log; echo >> /tmp/post.log"}]}]}}"#;

fn post_payloads(env: &hookbox_environments::environment::Environment) -> Vec<serde_json::Value> {
    let bytes = env.tree().read_file("/tmp/post.log", 1 << 20).unwrap();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn post_hooks_get_error_for_stderr_and_failed_fs_ops_only() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(
        &store,
        json!({"sources": [{"type": "inline", "target": ".agents/hooks.json", "content": AUDIT}]}),
    );
    let env = store.open_env(&meta.id).unwrap();

    let out = env
        .call_tool(call(
            "code_execution",
            json!({"code": "echo out; echo oops >&2; exit 3", "language": "bash"}),
        ))
        .await;
    let ToolResult::Ok { output } = &out.result else {
        panic!("{:?}", out.result)
    };
    let output = output.json();
    assert_eq!(output["exit_code"], 3);
    env.call_tool(call(
        "write_to_file",
        json!({"path": "a.txt", "content": "x"}),
    ))
    .await;
    let missing = env
        .call_tool(call("view_file", json!({"path": "missing.txt"})))
        .await;
    assert!(matches!(missing.result, ToolResult::Error { .. }));
    let py = env
        .call_tool(call(
            "code_execution",
            json!({"code": "print(6*7)", "language": "python"}),
        ))
        .await;
    let ToolResult::Ok { output } = &py.result else {
        panic!("{:?}", py.result)
    };
    let output = output.json();
    assert_eq!(output["stdout"], "42\n");

    let payloads = post_payloads(&env);
    assert_eq!(payloads.len(), 4);
    assert_eq!(payloads[0]["error"], "oops\n");
    assert_eq!(payloads[0]["environment_id"], meta.id.as_str());
    assert_eq!(payloads[0]["hook_event_name"], "post_tool_execution");
    assert!(payloads[1].get("error").is_none(), "{}", payloads[1]);
    assert!(
        payloads[2]["error"]
            .as_str()
            .unwrap()
            .contains("missing.txt")
    );
    assert!(payloads[3].get("error").is_none());
}

#[tokio::test]
async fn hooks_edited_by_the_agent_take_effect_unless_frozen() {
    let deny_all = r#"{"g": {"pre_tool_execution": [{"matcher": "list_dir", "hooks": [{"type": "command", "command": "echo '{\"decision\":\"deny\",\"reason\":\"no listing\"}'"}]}]}}"#;
    for freeze in [false, true] {
        let data = tempfile::tempdir().unwrap();
        let store = store_with(data.path(), options());
        let meta = create(&store, gate_spec(freeze));
        let env = store.open_env(&meta.id).unwrap();
        // The agent rewrites its hooks from inside the sandbox and through the file tool.
        let code = format!("cat > /.agents/hooks.json <<'EOF'\n{deny_all}\nEOF");
        let edit = env
            .call_tool(call(
                "code_execution",
                json!({"code": code, "language": "bash"}),
            ))
            .await;
        let tool_edit = env
            .call_tool(call(
                "write_to_file",
                json!({"path": "/workspace/.agents/hooks.json", "content": deny_all}),
            ))
            .await;
        assert!(matches!(tool_edit.result, ToolResult::Ok { .. }));
        let listed = env
            .call_tool(call("list_dir", json!({"path": "/workspace"})))
            .await;
        if freeze {
            let ToolResult::Ok { output } = &edit.result else {
                panic!("{:?}", edit.result)
            };
            let output = output.json();
            assert!(
                output["stderr"].as_str().unwrap().contains("Read-only"),
                "{output}"
            );
            assert!(
                matches!(listed.result, ToolResult::Ok { .. }),
                "{:?}",
                listed.result
            );
            let write = env
                .call_tool(call(
                    "write_to_file",
                    json!({"path": "/.agents/hooks.json", "content": "{}"}),
                ))
                .await;
            assert!(matches!(write.result, ToolResult::Error { .. }));
            // The frozen gate still runs.
            let denied = env
                .call_tool(call(
                    "code_execution",
                    json!({"code": "rm -rf /tmp/forbidden", "language": "bash"}),
                ))
                .await;
            assert!(matches!(denied.result, ToolResult::Denied { .. }));
        } else {
            assert_eq!(
                listed.result,
                ToolResult::Denied {
                    reason: "no listing".into()
                }
            );
        }
    }
}

const WAITING_GATE: &str = r#"{"gate": {"pre_tool_execution": [{"matcher": "code_execution", "hooks": [
  {"type": "command", "command": "echo '{\"decision\": \"deny\", \"reason\": \"gate ran\"}'"}]}]}}"#;

#[tokio::test]
async fn the_sandbox_process_quota_refuses_tools_and_queues_hooks() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let plain = create(&store, json!({"sources": []}));
    let gated = create(
        &store,
        json!({"sources": [{"type": "inline", "target": ".agents/hooks.json", "content": WAITING_GATE}]}),
    );
    let registry = hookbox_environments::slots::SlotRegistry::new(1);
    let env = store.open_env_with(&plain.id, Some(&registry)).unwrap();
    let gated_env = std::sync::Arc::new(store.open_env_with(&gated.id, Some(&registry)).unwrap());
    let held = registry.for_project(None).try_acquire().unwrap();

    // A tool call finds no slot: a clear error for the model, nothing ran.
    let refused = env
        .call_tool(call(
            "code_execution",
            json!({"code": "touch /workspace/ran", "language": "bash"}),
        ))
        .await;
    let ToolResult::Error { error } = &refused.result else {
        panic!("{:?}", refused.result)
    };
    assert!(
        error.contains("quota exceeded: sandbox_processes"),
        "{error}"
    );
    assert!(env.tree().metadata("/workspace/ran").is_err());

    // A hook waits for the slot instead of failing open; it runs once the slot is free.
    let waiting = tokio::spawn({
        let env = gated_env.clone();
        async move {
            env.call_tool(call(
                "code_execution",
                json!({"code": "true", "language": "bash"}),
            ))
            .await
        }
    });
    tokio::task::yield_now().await;
    assert_eq!(registry.for_project(None).in_use(), 1);
    drop(held);
    let outcome = waiting.await.unwrap();
    assert_eq!(
        outcome.result,
        ToolResult::Denied {
            reason: "gate ran".into()
        }
    );
    assert_eq!(registry.for_project(None).in_use(), 0);
    let ran = env
        .call_tool(call(
            "code_execution",
            json!({"code": "echo ok", "language": "bash"}),
        ))
        .await;
    assert!(
        matches!(ran.result, ToolResult::Ok { .. }),
        "{:?}",
        ran.result
    );
}

// Regression: under load the reference gate's decision was sometimes lost ("failed_open",
// "printed nothing") although the gate always prints one: its output sat in the pipe while a
// starved reader task ran out its drain grace. 64 concurrent calls in one environment must
// each be denied by the gate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_calls_in_one_environment_are_all_denied() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let mut spec = gate_spec(false);
    if gvisor() {
        // 64 python3 starts at once take gVisor on 2 cores past the reference's 10 s: what is
        // tested is that no decision is lost, not gVisor's throughput, so the gate gets 120 s.
        let hooks = fixture("hooks.json").replace("\"timeout\": 10", "\"timeout\": 120");
        assert!(hooks.contains("120"));
        spec["sources"][0]["content"] = json!(hooks);
    }
    let meta = create(&store, spec);
    let env = std::sync::Arc::new(store.open_env(&meta.id).unwrap());
    let calls: Vec<_> = (0..64)
        .map(|i| {
            let env = env.clone();
            tokio::spawn(async move {
                env.call_tool(call(
                    "code_execution",
                    json!({"code": format!("rm -rf /tmp/forbidden # {i}"), "language": "bash"}),
                ))
                .await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for c in calls {
        outcomes.push(c.await.unwrap());
    }
    let not_denied: Vec<String> = outcomes
        .iter()
        .filter(|o| !matches!(o.result, ToolResult::Denied { .. }))
        .map(|o| serde_json::to_string(&o.pre).unwrap())
        .collect();
    assert!(
        not_denied.is_empty(),
        "{} of 64 not denied: {:?}",
        not_denied.len(),
        not_denied.first()
    );
    assert!(
        data.path()
            .join("environments")
            .join(&meta.id)
            .join("root/tmp/forbidden/keep")
            .exists()
    );
}

const REWRITING: &str = r#"{"rewrite": {
  "pre_tool_execution": [{"matcher": "code_execution", "hooks": [{"type": "command",
    "command": "python3 -c 'import json,sys; p=json.load(sys.stdin); a=p[\"tool_call\"][\"args\"]; print(json.dumps({\"decision\": \"allow\", \"updated_args\": {\"code\": a[\"code\"].replace(\"original\", \"rewritten\"), \"language\": \"bash\"}} if \"bad\" not in a[\"code\"] else {\"decision\": \"allow\", \"updated_args\": {\"cmd\": \"x\"}}))'"}]}],
  "post_tool_execution": [{"matcher": "code_execution", "hooks": [{"type": "command",
    "command": "cat > /tmp/post.json"}]}]
}}"#;

#[tokio::test]
async fn a_pre_hook_rewrites_arguments_and_invalid_rewrites_are_denied() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(
        &store,
        json!({"sources": [{"type": "inline", "target": ".agents/hooks.json", "content": REWRITING}]}),
    );
    let env = store.open_env(&meta.id).unwrap();
    let outcome = env
        .call_tool(call(
            "code_execution",
            json!({"code": "echo original", "language": "bash"}),
        ))
        .await;
    let ToolResult::Ok { output } = &outcome.result else {
        panic!("{:?}", outcome.result)
    };
    let output = output.json();
    assert_eq!(output["stdout"], "rewritten\n");
    assert_eq!(outcome.call.args["code"], "echo rewritten");
    assert_eq!(
        outcome.original_args,
        Some(json!({"code": "echo original", "language": "bash"}))
    );
    let post: serde_json::Value =
        serde_json::from_slice(&env.tree().read_file("/tmp/post.json", 1 << 20).unwrap()).unwrap();
    assert_eq!(post["tool_call"]["args"]["code"], "echo rewritten");

    // Arguments the tool would refuse never reach it.
    let denied = env
        .call_tool(call(
            "code_execution",
            json!({"code": "echo bad", "language": "bash"}),
        ))
        .await;
    let ToolResult::Denied { reason } = &denied.result else {
        panic!("{:?}", denied.result)
    };
    assert!(
        reason.contains("invalid") && reason.contains("cmd"),
        "{reason}"
    );
}

const REMOTE_HOOKS: &str = r#"{"mcp": {
  "pre_tool_execution": [
    {"matcher": "*", "hooks": [{"type": "command", "command": "cat >/dev/null; echo '{\"decision\": \"deny\", \"reason\": \"star\"}'"}]},
    {"matcher": "mcp:docs/blocked", "hooks": [{"type": "command", "command": "cat >/dev/null; echo '{\"decision\": \"deny\", \"reason\": \"no docs\"}'"}]},
    {"matcher": "mcp:docs/asked", "hooks": [{"type": "command", "command": "cat >/dev/null; echo '{\"decision\": \"ask\", \"reason\": \"check\"}'"}]},
    {"matcher": "mcp:docs/search", "hooks": [{"type": "command", "command": "cat >/dev/null; echo '{\"decision\": \"allow\", \"updated_args\": {\"q\": \"rewritten\"}}'"}]}
  ],
  "post_tool_execution": [
    {"matcher": "mcp:docs/search", "hooks": [{"type": "command", "command": "cat > /tmp/post.json"}]}
  ]
}}"#;

/// Runs `name` through the lifecycle as a remote MCP tool whose server answers `reply`; also
/// the arguments the server got (`None`: it was never called).
async fn remote(
    env: &hookbox_environments::environment::Environment,
    name: &str,
    reply: hookbox_environments::lifecycle::RemoteReply,
) -> (
    hookbox_environments::lifecycle::Outcome,
    Option<serde_json::Value>,
) {
    let got = std::sync::Mutex::new(None);
    let outcome = env
        .call_remote_tool(
            name.into(),
            json!({"q": "original"}),
            Box::new(|args| {
                *got.lock().unwrap() = Some(args);
                Box::pin(async move { reply })
            }),
        )
        .await;
    (outcome, got.into_inner().unwrap())
}

// A remote MCP server's tool takes the one lifecycle: only `mcp:` matchers see it, a deny or an
// ask stops it before the server is called, `updated_args` reach the server, post hooks hear
// of its error, and a call no hook matched has no trace.
#[tokio::test]
async fn a_remote_tool_goes_through_the_lifecycle_with_mcp_hooks_only() {
    use hookbox_environments::lifecycle::RemoteReply;
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(
        &store,
        json!({"sources": [{"type": "inline", "target": ".agents/hooks.json", "content": REMOTE_HOOKS}]}),
    );
    let env = store.open_env(&meta.id).unwrap();
    let answer = |text: &str, is_error| RemoteReply {
        text: text.into(),
        is_error,
    };

    let (denied, got) = remote(&env, "mcp:docs/blocked", answer("x", false)).await;
    assert_eq!(got, None, "a denied call never reaches the server");
    assert_eq!(
        denied.result,
        ToolResult::Denied {
            reason: "no docs".into()
        }
    );
    assert_eq!(
        (denied.view.output.clone(), denied.view.is_error),
        (json!("no docs"), true)
    );
    assert_eq!(denied.trace["pre"]["decision"], "deny", "{}", denied.trace);

    let (asked, got) = remote(&env, "mcp:docs/asked", answer("x", false)).await;
    assert_eq!(got, None, "nobody can approve a remote call");
    let ToolResult::Denied { reason } = &asked.result else {
        panic!("{:?}", asked.result)
    };
    assert!(
        reason.contains("(check)") && reason.contains("approvals are for the sandbox's own tools"),
        "{reason}"
    );

    let (failed, got) = remote(&env, "mcp:docs/search", answer("boom", true)).await;
    assert_eq!(got, Some(json!({"q": "rewritten"})));
    assert_eq!(
        (failed.view.output.clone(), failed.view.is_error),
        (json!("boom"), true)
    );
    let post: serde_json::Value =
        serde_json::from_slice(&env.tree().read_file("/tmp/post.json", 1 << 20).unwrap()).unwrap();
    assert_eq!(post["error"], "boom");
    assert_eq!(post["tool_call"]["name"], "mcp:docs/search");
    assert_eq!(post["tool_call"]["args"], json!({"q": "rewritten"}));
    assert!(failed.trace.get("post").is_some(), "{}", failed.trace);

    let (plain, got) = remote(&env, "mcp:other/tool", answer("answer", false)).await;
    assert_eq!(
        got,
        Some(json!({"q": "original"})),
        "`*` does not match MCP tools"
    );
    assert_eq!(
        (plain.view.output.clone(), plain.view.is_error),
        (json!("answer"), false)
    );
    assert_eq!(plain.trace, serde_json::Value::Null);
}

// Issue 35: every call rewrote `environment.json` (a temporary file and a rename, which ext4
// flushes), even a read in a second already recorded; a write still records its generation
// (in the activity record, `environment.json` left as it is).
#[tokio::test]
async fn a_read_in_a_second_already_recorded_rewrites_no_metadata() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(
        &store,
        json!({"sources": [{"type": "inline", "target": "workspace/a.txt", "content": "a"}]}),
    );
    let path = data
        .path()
        .join("environments")
        .join(&meta.id)
        .join(hookbox_environments::environment::META_FILE);
    // Recorded later than any call of this test can run: every second is "already recorded".
    let mut stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let later = stored["last_accessed_at"].as_u64().unwrap() + 3600;
    stored["last_accessed_at"] = json!(later);
    std::fs::write(&path, serde_json::to_vec_pretty(&stored).unwrap()).unwrap();
    let before = std::fs::read(&path).unwrap();

    let env = store.open_env(&meta.id).unwrap();
    for (tool, args) in [
        ("view_file", json!({"path": "/workspace/a.txt"})),
        ("list_dir", json!({"path": "/workspace"})),
    ] {
        let out = env.call_tool(call(tool, args)).await;
        assert!(
            matches!(out.result, ToolResult::Ok { .. }),
            "{:?}",
            out.result
        );
        assert_eq!(
            String::from_utf8_lossy(&std::fs::read(&path).unwrap()),
            String::from_utf8_lossy(&before),
            "{tool} rewrote the metadata"
        );
    }
    // Nor its activity record, once started.
    let activity = path.with_file_name(hookbox_environments::environment::ACTIVITY_FILE);
    let recorded = std::fs::read(&activity).unwrap();
    let out = env
        .call_tool(call("view_file", json!({"path": "/workspace/a.txt"})))
        .await;
    assert!(matches!(out.result, ToolResult::Ok { .. }));
    assert_eq!(std::fs::read(&activity).unwrap(), recorded);
    // A write is recorded: its generation grows (what a snapshot checks), the time kept.
    bash_ok(&env, "true").await;
    let after = hookbox_environments::environment::read_meta(path.parent().unwrap()).unwrap();
    assert_eq!(after.generation, stored["generation"].as_u64().unwrap() + 1);
    assert_eq!(after.last_accessed_at, later);
}
