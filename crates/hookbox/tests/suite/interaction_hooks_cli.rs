//! `pre_interaction` and `post_interaction` hooks (hookbox extensions) through the real
//! `hookbox serve`: a command hook in the environment's sandbox denies a turn whose input
//! mentions a secret, adds context the model sees, and a post hook records how each turn ended
//! in the environment's files. Also `hooks test` for the new events and for `ask`.

use super::serve_cli::{http, json_body, start};
use super::support::{hookbox, stdout};

const HOOKS: &str = r#"{"turns": {
  "pre_interaction": [{"matcher": "*", "hooks": [{"type": "command", "command": "python3 /.agents/turn.py"}]}],
  "post_interaction": [{"matcher": "antigravity-.*", "hooks": [{"type": "command", "command": "python3 /.agents/after.py"}]}]
}}"#;

const TURN: &str = r#"import json, sys
p = json.load(sys.stdin)
if "password" in p["input_text"]:
    print(json.dumps({"decision": "deny", "reason": "no secrets in prompts"}))
else:
    print(json.dumps({"decision": "allow", "additional_context": "this repo uses pnpm"}))
"#;

const AFTER: &str = r#"import json, sys
p = json.load(sys.stdin)
with open("/workspace/turns.log", "a") as f:
    f.write("%s %s %s %s\n" % (p["hook_event_name"], p["interaction_id"], p["status"], json.dumps(p.get("output"))))
"#;

fn env_body() -> String {
    serde_json::json!({"sources": [
        {"type": "inline", "target": ".agents/hooks.json", "content": HOOKS},
        {"type": "inline", "target": ".agents/turn.py", "content": TURN},
        {"type": "inline", "target": ".agents/after.py", "content": AFTER},
    ]})
    .to_string()
}

#[test]
fn interaction_hooks_deny_add_context_and_observe_through_the_server() {
    let dir = hookbox_test_support::DataDir::new();
    let server = start(&dir.path().join("data"));
    let env = json_body(&http(
        &server.addr,
        "POST",
        "/v1beta/environments",
        &env_body(),
    ));
    let env_id = env["id"].as_str().unwrap().to_owned();
    let ask = |input: &str| {
        let body = serde_json::json!({"agent": "antigravity-preview-09-2026", "input": input, "environment": env_id});
        json_body(&http(
            &server.addr,
            "POST",
            "/v1beta/interactions",
            &body.to_string(),
        ))
    };

    // Denied: the turn never reaches the model or a tool; the reason is the error.
    let denied = ask("run `echo my password is hunter2 > /workspace/leak.txt`");
    assert_eq!(denied["status"], "failed", "{denied}");
    assert_eq!(denied["errors"][0]["code"], "denied_by_hook", "{denied}");
    assert_eq!(denied["errors"][0]["message"], "no secrets in prompts");
    assert_eq!(
        denied["steps"].as_array().map(Vec::len),
        Some(1),
        "{denied}"
    );

    // Allowed with context: the model is told (the offline agent repeats what it was told).
    let allowed = ask("run `echo hi`");
    assert_eq!(allowed["status"], "completed", "{allowed}");
    let answer = allowed["steps"].to_string();
    assert!(
        answer.contains("[context from hooks] this repo uses pnpm"),
        "{answer}"
    );

    // The post hook saw both turns end, with their status and output, before they ended.
    let log = http(
        &server.addr,
        "GET",
        &format!("/v1beta/environments/{env_id}/files/workspace/turns.log?alt=media"),
        "",
    );
    let denied_id = denied["id"].as_str().unwrap();
    let allowed_id = allowed["id"].as_str().unwrap();
    assert!(
        log.contains(&format!("post_interaction {denied_id} failed null")),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "post_interaction {allowed_id} completed \"Ran `echo hi`"
        )),
        "{log}"
    );
    assert!(!log.contains("leak"), "{log}");
}

// Issue 31: a pre_interaction handler that failed (fail-open) left no trace in the
// interaction's JSON, and its neighbour's additional_context showed nowhere.
#[test]
fn a_failing_pre_interaction_handler_is_invisible() {
    const TRACED: &str = r#"{"turns": {
      "pre_interaction": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "python3 /.agents/broken.py"},
        {"type": "command", "command": "python3 /.agents/turn.py"}]}],
      "post_interaction": [{"matcher": "*", "hooks": [{"type": "command", "command": "python3 /.agents/after.py"}]}]
    }}"#;
    const BROKEN: &str =
        "import sys\nsys.stderr.write('guard crashed: KeyError tool_name\\n')\nsys.exit(3)\n";
    let dir = hookbox_test_support::DataDir::new();
    let server = start(&dir.path().join("data"));
    let body = serde_json::json!({"sources": [
        {"type": "inline", "target": ".agents/hooks.json", "content": TRACED},
        {"type": "inline", "target": ".agents/broken.py", "content": BROKEN},
        {"type": "inline", "target": ".agents/turn.py", "content": TURN},
        {"type": "inline", "target": ".agents/after.py", "content": AFTER},
    ]});
    let env = json_body(&http(
        &server.addr,
        "POST",
        "/v1beta/environments",
        &body.to_string(),
    ));
    let env_id = env["id"].as_str().unwrap();
    let body = serde_json::json!({"agent": "antigravity-preview-09-2026", "input": "run `echo hi`", "environment": env_id});
    let created = json_body(&http(
        &server.addr,
        "POST",
        "/v1beta/interactions",
        &body.to_string(),
    ));
    // Fail-open: the turn ran.
    assert_eq!(created["status"], "completed", "{created}");
    let id = created["id"].as_str().unwrap();
    let got = json_body(&http(
        &server.addr,
        "GET",
        &format!("/v1beta/interactions/{id}"),
        "",
    ));
    for interaction in [&created, &got] {
        let pre = &interaction["hooks"]["pre"];
        assert_eq!(pre["event"], "pre_interaction", "{interaction}");
        assert_eq!(pre["decision"], "allow", "{interaction}");
        let failed = &pre["trace"][0];
        assert_eq!(failed["outcome"], "failed_open", "{interaction}");
        assert_eq!(failed["failure"]["kind"], "non_zero_exit", "{interaction}");
        assert_eq!(
            failed["target"], "python3 /.agents/broken.py",
            "{interaction}"
        );
        assert!(
            failed["stderr"]
                .as_str()
                .is_some_and(|e| e.contains("guard crashed: KeyError tool_name")),
            "{interaction}"
        );
        assert!(failed["duration_ms"].is_u64(), "{interaction}");
        assert_eq!(pre["trace"][1]["outcome"], "allow", "{interaction}");
        assert_eq!(
            pre["additional_context"],
            serde_json::json!(["this repo uses pnpm"]),
            "{interaction}"
        );
        let post = &interaction["hooks"]["post"];
        assert_eq!(post["event"], "post_interaction", "{interaction}");
        assert_eq!(post["trace"][0]["outcome"], "completed", "{interaction}");
    }
    // Listings stay small: the trace is on the interaction itself, as steps are.
    let listed = json_body(&http(
        &server.addr,
        "GET",
        &format!("/v1beta/interactions?environment_id={env_id}"),
        "",
    ));
    let listed = listed.to_string();
    assert!(
        listed.contains(id) && !listed.contains("guard crashed"),
        "{listed}"
    );
}

#[test]
fn hooks_test_runs_interaction_events_and_reports_ask() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join(".agents")).unwrap();
    std::fs::create_dir_all(root.path().join("workspace")).unwrap();
    std::fs::write(root.path().join(".agents/hooks.json"), HOOKS).unwrap();
    std::fs::write(root.path().join(".agents/turn.py"), TURN).unwrap();
    std::fs::write(root.path().join(".agents/after.py"), AFTER).unwrap();
    let r = root.path().to_str().unwrap();
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--event",
        "pre-interaction",
        "--input",
        "my password is x",
        "--expect",
        "deny",
    ]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("no secrets in prompts"),
        "{}",
        stdout(&out)
    );
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--event",
        "pre-interaction",
        "--input",
        "hello",
        "--expect",
        "allow",
    ]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("context for the model: this repo uses pnpm"),
        "{}",
        stdout(&out)
    );
    // A pre tool hook that asks is reported as ask, and --expect ask holds.
    std::fs::write(
        root.path().join(".agents/hooks.json"),
        r#"{"review": {"pre_tool_execution": [{"matcher": "*", "hooks": [
            {"type": "command", "command": "echo '{\"decision\": \"ask\", \"reason\": \"a person decides\"}'"}]}]}}"#,
    )
    .unwrap();
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--tool",
        "code_execution",
        "--args",
        r#"{"code": "ls"}"#,
        "--expect",
        "ask",
    ]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("decision: ask (group review): a person decides"),
        "{}",
        stdout(&out)
    );
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--tool",
        "code_execution",
        "--args",
        r#"{"code": "ls"}"#,
        "--expect",
        "allow",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
}
