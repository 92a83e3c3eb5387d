//! Issue 36, flaw 5, against the real binary: what the OTLP spans, the server log and the audit
//! log carry about a tool call and its hooks, and what the API's stored trace keeps of an
//! upstream's echo of an injected header.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::serve_cli::{GotSpan, Server, http, json_body, otlp_receiver, post_json};

/// The model's arguments (`run \`echo …\``).
const MODEL_ARGS: &str = "MDL-ARG-7f3a";
/// What a hook prints to stderr, and to stdout instead of a decision.
const HOOK_STDERR: &str = "HK-ERR-8b1c";
const HOOK_STDOUT: &str = "HK-OUT-2d9e";
/// What a hook rewrites the arguments to (`updated_args`).
const UPDATED_ARGS: &str = "UPD-ARG-5c4f";
/// The value the environment's egress injects (an allowlist `transform`).
const INJECTED: &str = "INJ-SECRET-6a7b0c1d";
/// A hook's deny reason: policy text, in the log and the audit log, never in spans.
const DENY_REASON: &str = "DENY-RSN-3e8f";

/// An upstream on 127.0.0.1 that answers every request with the request's head, as an API
/// that echoes what it was sent does. Returns its port and the heads it got.
fn echo_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let got = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            got.lock().unwrap().push(head.clone());
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
                head.len()
            );
        }
    });
    (port, seen)
}

/// Regression (issue 36, flaw 5): the `tool call finished` event carried the whole hook trace
/// (`updated_args`, `ran_with_args`, handlers' stderr and output excerpts, including an
/// upstream's echo of an injected `Authorization` header) into the server log and, as a span
/// event, to the OTLP collector; `hook.failed` carried output excerpts into the audit log.
/// None of the markers reaches the spans, the log or the audit log; the deny reason reaches
/// the log and the audit log only; the injected value never reaches the stored trace (the
/// egress masks the upstream's echo of it before the hook reads it).
#[test]
fn telemetry_carries_no_arguments_hook_output_or_injected_secrets() {
    let (echo_port, echoed) = echo_server();
    let (otlp_port, spans) = otlp_receiver();
    let dir = hookbox_test_support::DataDir::new();
    let audit = dir.path().join("audit.jsonl");
    let log = dir.path().join("serve.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["-v", "serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--audit-log")
        .arg(&audit)
        .args(["--egress-allow-cidr", "127.0.0.1/32"])
        .env_remove("HOOKBOX_API_KEYS")
        .env_remove("GEMINI_API_KEY")
        .env_remove("HOOKBOX_OPENAI_BASE_URL")
        .env_remove("RUST_LOG")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{otlp_port}"),
        )
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Kept open to the end: the server still prints after the line read here.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = lines
        .by_ref()
        .map(Result::unwrap)
        .find_map(|l| {
            l.strip_prefix("hookbox is listening on http://")
                .and_then(|r| r.split_whitespace().next())
                .map(str::to_owned)
        })
        .unwrap();
    let server = Server {
        child,
        addr,
        banner: String::new(),
    };

    // The first handler fetches from the upstream through the egress proxy (which injects the
    // transform), prints what came back and a marker to stderr, and prints no decision; the
    // second rewrites the arguments; a third denies every view_file with a reason.
    let echo_hook = format!(
        r#"import sys, urllib.request
sys.stdin.read()
body = urllib.request.urlopen("http://127.0.0.1:{echo_port}/echo", timeout=20).read().decode()
print("{HOOK_STDERR} upstream said: " + body, file=sys.stderr)
print("{HOOK_STDOUT} not a decision")
"#
    );
    let rewrite = format!(
        r#"import json, sys
sys.stdin.read()
print(json.dumps({{"decision": "allow", "updated_args": {{"code": "echo {UPDATED_ARGS}", "language": "bash"}}}}))
"#
    );
    let deny = format!(
        r#"import json, sys
sys.stdin.read()
print(json.dumps({{"decision": "deny", "reason": "{DENY_REASON}"}}))
"#
    );
    let hooks = json!({"audit": {"pre_tool_execution": [
        {"matcher": "code_execution", "hooks": [
            {"type": "command", "command": "python3 /.agents/echo_hook.py", "timeout": 30},
            {"type": "command", "command": "python3 /.agents/rewrite.py", "timeout": 30}]},
        {"matcher": "view_file", "hooks": [
            {"type": "command", "command": "python3 /.agents/deny.py", "timeout": 30}]}]}});
    let done = post_json(
        &server.addr,
        "/v1beta/interactions",
        &json!({
            "agent": "antigravity-preview-09-2026",
            "input": format!("run `echo {MODEL_ARGS}` then read `/workspace/none.txt`"),
            "environment": {"type": "remote",
                "sources": [
                    {"type": "inline", "target": ".agents/hooks.json", "content": hooks.to_string()},
                    {"type": "inline", "target": ".agents/echo_hook.py", "content": echo_hook},
                    {"type": "inline", "target": ".agents/rewrite.py", "content": rewrite},
                    {"type": "inline", "target": ".agents/deny.py", "content": deny}],
                "network": {"allowlist": [{"domain": "127.0.0.1",
                    "transform": {"Authorization": format!("Bearer {INJECTED}")}}]}},
        }),
    );
    assert_eq!(done["status"], "completed", "{done:#}");
    let id = done["id"].as_str().unwrap().to_owned();

    // Positive controls: the upstream got the injected header, the hooks ran as written.
    assert!(
        echoed
            .lock()
            .unwrap()
            .iter()
            .any(|h| h.contains(&format!("Bearer {INJECTED}"))),
        "the egress never injected the transform: {:?}",
        echoed.lock().unwrap()
    );
    let stored = http(
        &server.addr,
        "GET",
        &format!("/v1beta/interactions/{id}"),
        "",
    );
    let stored_json = json_body(&stored);
    let stored_text = stored_json.to_string();
    assert!(
        stored_text.contains(HOOK_STDERR) && stored_text.contains(UPDATED_ARGS),
        "the stored trace is the tenant's and keeps what the hooks said: {stored_text}"
    );
    assert!(stored_text.contains(DENY_REASON), "{stored_text}");
    // The upstream's echo of the injected value never reached the hook: the egress masked it
    // (every byte a `*`) before the sandbox read the response, so the trace has the mask.
    assert!(!stored_text.contains(INJECTED), "{stored_text}");
    let masked = "*".repeat(format!("Bearer {INJECTED}").len());
    assert!(
        stored_text.contains(&format!("authorization: {masked}")),
        "{stored_text}"
    );

    // Every span of the interaction's trace, once its root arrived.
    let mut got: Vec<GotSpan> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !got
        .iter()
        .any(|s| s.name == "interaction" && s.attributes.get("interaction_id") == Some(&id))
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match spans.recv_timeout(left) {
            Ok(batch) => got.extend(batch),
            Err(_) => panic!("no interaction span arrived: {got:#?}"),
        }
    }
    let root = got
        .iter()
        .find(|s| s.name == "interaction" && s.attributes.get("interaction_id") == Some(&id))
        .unwrap()
        .clone();
    let in_trace: Vec<&GotSpan> = got.iter().filter(|s| s.trace_id == root.trace_id).collect();
    assert!(
        in_trace.iter().filter(|s| s.name == "tool_call").count() == 2
            && in_trace.iter().filter(|s| s.name == "hook_handler").count() == 3,
        "{in_trace:#?}"
    );
    let exported = format!("{in_trace:?}");
    let audit_text = std::fs::read_to_string(&audit).unwrap();
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        audit_text.contains(&id) && audit_text.contains("\"kind\":\"hook\""),
        "{audit_text}"
    );
    assert!(log_text.contains("tool call finished"), "{log_text}");
    for marker in [MODEL_ARGS, HOOK_STDERR, HOOK_STDOUT, UPDATED_ARGS, INJECTED] {
        assert!(
            !exported.contains(marker),
            "{marker} in the spans: {exported}"
        );
        assert!(
            !log_text.contains(marker),
            "{marker} in the server log: {log_text}"
        );
        assert!(
            !audit_text.contains(marker),
            "{marker} in the audit log: {audit_text}"
        );
    }
    // The deny reason is the operator's to read (log, audit log), not the collector's.
    assert!(!exported.contains(DENY_REASON), "{exported}");
    assert!(audit_text.contains(DENY_REASON), "{audit_text}");
    drop(server);
    drop(lines);
}
