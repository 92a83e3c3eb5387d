//! Issue 36: bounds on what a client can make the server hold (upload sessions, MCP servers per
//! request), validation of the headers hookbox will send, and transform values redacted
//! wherever an environment spec is echoed. Each test is named after the flaw it guards.

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode};
use serde_json::{Value, json};

use super::Harness;
use hookbox_server::uploads::UploadOptions;

const KEY_A: &str = "team-a:key-of-a";
const KEY_B: &str = "team-b:key-of-b";
const AGENT: &str = "antigravity-preview-09-2026";

fn key(spec: &str) -> &str {
    spec.split_once(':').map(|(_, k)| k).unwrap_or(spec)
}

fn two_projects(uploads: impl FnOnce(&std::path::Path) -> UploadOptions) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let uploads = uploads(&dir.path().join("uploads"));
    Harness::with_uploads(
        dir,
        vec![KEY_A.into(), KEY_B.into()],
        Default::default(),
        uploads,
    )
}

async fn call_as(
    h: &Harness,
    key_spec: &str,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> (StatusCode, HeaderMap, Value) {
    let mut all = vec![("x-goog-api-key", key(key_spec))];
    all.extend_from_slice(headers);
    let (status, headers, bytes) = h.raw(method, uri, &all, body).await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, headers, value)
}

async fn post(h: &Harness, key_spec: &str, uri: &str, body: Value) -> (StatusCode, Value) {
    let (s, _, v) = call_as(
        h,
        key_spec,
        Method::POST,
        uri,
        &[],
        Some(body.to_string().into_bytes()),
    )
    .await;
    (s, v)
}

async fn environment(h: &Harness, key_spec: &str) -> String {
    let (s, env) = post(h, key_spec, "/v1beta/environments", json!({})).await;
    assert_eq!(s, StatusCode::OK, "{env}");
    env["id"].as_str().unwrap().to_owned()
}

/// Opens an upload session; `Ok(session)` or the refusal.
async fn start_upload(
    h: &Harness,
    key_spec: &str,
    env: &str,
    path: &str,
) -> Result<String, (StatusCode, Value)> {
    let (s, headers, body) = call_as(
        h,
        key_spec,
        Method::PUT,
        &format!("/upload/v1beta/environments/{env}/files/{path}"),
        &[
            ("x-goog-upload-protocol", "resumable"),
            ("x-goog-upload-command", "start"),
        ],
        None,
    )
    .await;
    if s != StatusCode::OK {
        return Err((s, body));
    }
    let url = headers["x-goog-upload-url"].to_str().unwrap();
    Ok(url.rsplit('/').next().unwrap().to_owned())
}

async fn chunk(
    h: &Harness,
    key_spec: &str,
    session: &str,
    command: &str,
    offset: u64,
    bytes: Vec<u8>,
) -> (StatusCode, HeaderMap, Value) {
    let offset = offset.to_string();
    call_as(
        h,
        key_spec,
        Method::POST,
        &format!("/upload/v1beta/sessions/{session}"),
        &[
            ("x-goog-upload-command", command),
            ("x-goog-upload-offset", &offset),
        ],
        Some(bytes),
    )
    .await
}

/// The upload spools this process holds open (anonymous files in `dir`).
fn open_spools(dir: &std::path::Path) -> usize {
    let dir = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with(&dir))
        .count()
}

/// Regression (issue 36, flaw 4): one global cap of 64 unfinished uploads served every
/// project, so project b opening 63 sessions made project a's uploads fail until a restart.
/// Each project now has its own number of sessions.
#[tokio::test]
async fn one_project_filling_its_upload_sessions_leaves_another_projects_uploads_working() {
    let h = two_projects(|spool| UploadOptions {
        spool_dir: spool.to_owned(),
        ..Default::default()
    });
    let env_a = environment(&h, KEY_A).await;
    let env_b = environment(&h, KEY_B).await;
    let mut opened = 0;
    let mut refusal = None;
    for i in 0..64 {
        match start_upload(&h, KEY_B, &env_b, &format!("workspace/b{i}.txt")).await {
            Ok(_) => opened += 1,
            Err(e) => {
                refusal = Some(e);
                break;
            }
        }
    }
    assert_eq!(
        opened,
        hookbox_server::uploads::DEFAULT_SESSIONS_PER_PROJECT
    );
    let (status, body) = refusal.expect("project b was never refused");
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body.to_string().contains("--upload-sessions-per-project"),
        "{body}"
    );
    // Project a is untouched: it opens, sends and finalizes an upload.
    let session = start_upload(&h, KEY_A, &env_a, "workspace/a.txt")
        .await
        .unwrap();
    let (s, headers, body) = chunk(
        &h,
        KEY_A,
        &session,
        "upload, finalize",
        0,
        b"from a".to_vec(),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(headers["x-goog-upload-status"], "final");
    let (s, _, text) = call_as(
        &h,
        KEY_A,
        Method::GET,
        &format!("/v1beta/environments/{env_a}/files/workspace/a.txt?alt=media"),
        &[],
        None,
    )
    .await;
    assert_eq!((s, text), (StatusCode::OK, json!("from a")));
}

/// Regression (issue 36, flaw 4): upload sessions never expired, each holding its bytes. A
/// session left untouched past the idle timeout is dropped and its spool deleted; a `query`
/// only looks (it does not keep the session alive).
#[tokio::test]
async fn an_idle_upload_session_expires_and_its_spool_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("uploads");
    let h = Harness::with_uploads(
        dir,
        vec![KEY_A.into()],
        Default::default(),
        UploadOptions {
            spool_dir: spool.clone(),
            idle_timeout: Duration::from_secs(1),
            ..Default::default()
        },
    );
    let env = environment(&h, KEY_A).await;
    let session = start_upload(&h, KEY_A, &env, "workspace/idle.bin")
        .await
        .unwrap();
    let (s, headers, body) = chunk(&h, KEY_A, &session, "upload", 0, vec![7u8; 4096]).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(headers["x-goog-upload-size-received"], "4096");
    assert_eq!(open_spools(&spool), 1, "the chunk is spooled to a file");
    // Poll (without touching it) until the session is gone; the bound only fails a hung test.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, _, body) = chunk(&h, KEY_A, &session, "query", 0, Vec::new()).await;
        if s == StatusCode::NOT_FOUND {
            assert!(body.to_string().contains("expired"), "{body}");
            break;
        }
        assert_eq!(s, StatusCode::OK, "{body}");
        assert!(Instant::now() < deadline, "the idle session never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        open_spools(&spool),
        0,
        "the expired session's spool is deleted"
    );
    // The rest of the upload is refused, as for any unknown session.
    let (s, _, _) = chunk(&h, KEY_A, &session, "upload, finalize", 4096, vec![1]).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

/// Regression (issue 36, flaw 4): unfinished uploads buffered up to 1 GiB each in memory with
/// nothing bounding them together. Bytes are spooled within a per-project share and a budget
/// for all projects, and a refusal names the bound.
#[tokio::test]
async fn unfinished_uploads_are_held_within_a_project_share_and_a_global_budget() {
    let h = two_projects(|spool| UploadOptions {
        spool_dir: spool.to_owned(),
        bytes_per_project: 600_000,
        budget_bytes: 1_000_000,
        ..Default::default()
    });
    let env_a = environment(&h, KEY_A).await;
    let env_b = environment(&h, KEY_B).await;
    let a = start_upload(&h, KEY_A, &env_a, "workspace/a.bin")
        .await
        .unwrap();
    let (s, _, body) = chunk(&h, KEY_A, &a, "upload", 0, vec![1u8; 500_000]).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    // Past a's share: refused, naming it; a's session stays usable.
    let (s, headers, body) = chunk(&h, KEY_A, &a, "upload", 500_000, vec![1u8; 200_000]).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(headers.contains_key("retry-after"));
    assert!(
        body.to_string().contains("--upload-project-bytes"),
        "{body}"
    );
    // b fits its own share, but not the budget left by a.
    let b = start_upload(&h, KEY_B, &env_b, "workspace/b.bin")
        .await
        .unwrap();
    let (s, _, body) = chunk(&h, KEY_B, &b, "upload", 0, vec![2u8; 550_000]).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(body.to_string().contains("--upload-budget-bytes"), "{body}");
    // Once a finishes, b has room.
    let (s, _, body) = chunk(&h, KEY_A, &a, "upload, finalize", 500_000, vec![3u8; 10]).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["files"][0]["size_bytes"], "500010", "{body}");
    let (s, _, body) = chunk(&h, KEY_B, &b, "upload, finalize", 0, vec![2u8; 550_000]).await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

fn mcp_server(name: &str) -> Value {
    json!({"type": "mcp_server", "name": name, "url": format!("https://{name}.example.test/mcp")})
}

/// Regression (issue 36, flaw 3): nothing capped the `mcp_server` entries of a request (each a
/// connection and a listing held for the run).
#[tokio::test]
async fn more_mcp_servers_than_the_limit_are_refused_at_create() {
    let h = Harness::new();
    let limit = hookbox_agent::mcp::MAX_SERVERS;
    let tools: Vec<Value> = (0..=limit).map(|i| mcp_server(&format!("s{i}"))).collect();
    let (s, body) = h
        .call(
            Method::POST,
            "/v1beta/interactions",
            Some(json!({"agent": AGENT, "input": "hi", "tools": tools})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.to_string()
            .contains(&format!("at most {limit} MCP servers")),
        "{body}"
    );
    let tools: Vec<Value> = (0..limit).map(|i| mcp_server(&format!("s{i}"))).collect();
    let (s, body) = h
        .call(
            Method::POST,
            "/v1beta/interactions",
            Some(json!({"agent": AGENT, "input": "hi", "tools": tools})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

/// Regression (issue 36, flaw 8): names the model calls MCP tools by could be taken twice (a
/// server named after another's prefix, a client function in a server's namespace), one
/// silently shadowing the other. Such requests are refused at create.
#[tokio::test]
async fn mcp_tool_names_that_could_shadow_each_other_are_refused_at_create() {
    let h = Harness::new();
    for (tools, needle) in [
        (
            json!([mcp_server("a"), mcp_server("a__b")]),
            "`a__b`: it starts with `a__`",
        ),
        (
            json!([mcp_server("docs"), {"type": "function", "name": "docs__search"}]),
            "function name `docs__search`",
        ),
    ] {
        let (s, body) = h
            .call(
                Method::POST,
                "/v1beta/interactions",
                Some(json!({"agent": AGENT, "input": "hi", "tools": tools})),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.to_string().contains(needle), "{body}");
    }
    // Names that cannot clash are fine.
    let (s, body) = h
        .call(
            Method::POST,
            "/v1beta/interactions",
            Some(json!({"agent": AGENT, "input": "hi", "tools": [
                mcp_server("a"), mcp_server("ab"), {"type": "function", "name": "a_b"}]})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

/// Regression (issue 36, flaw 8): a bearer token with CR/LF, or a header name with a space,
/// was accepted and then silently never injected (credentials, allowlist transforms of stored
/// requests, mcp_server headers). Each is refused where it is given, naming the field, never
/// echoing a secret.
#[tokio::test]
async fn header_names_and_values_that_could_never_be_sent_are_refused_at_create() {
    let h = Harness::new();
    let secret = "tok-CRLF-9f8e7d";
    let refused = [
        (
            "/v1beta/credentials",
            json!({"id": "c1", "type": "bearer_token", "token": format!("{secret}\r\nX-Evil: 1")}),
            "`token`",
        ),
        (
            "/v1beta/credentials",
            json!({"id": "c2", "type": "bearer_token", "token": secret, "header_name": "X Api Key"}),
            "`header_name`",
        ),
        (
            "/v1beta/credentials",
            json!({"id": "c3", "type": "bearer_token", "token": secret, "prefix": "Bearer\n"}),
            "`prefix`",
        ),
        (
            "/v1beta/triggers",
            json!({"schedule": "0 0 1 1 *", "time_zone": "UTC", "interaction": {"agent": AGENT, "input": "x",
                "environment": {"network": {"allowlist": [{"domain": "api.example.test",
                    "transform": {"X Token": secret}}]}}}}),
            "`interaction.environment.network.allowlist[0].transform.X Token`",
        ),
        (
            "/v1beta/triggers",
            json!({"schedule": "0 0 1 1 *", "time_zone": "UTC", "interaction": {"agent": AGENT, "input": "x",
                "environment": {"network": {"allowlist": [{"domain": "api.example.test",
                    "transform": {"Authorization": format!("Bearer {secret}\r\n")}}]}}}}),
            "CR, LF or NUL",
        ),
        (
            "/v1beta/triggers",
            json!({"schedule": "0 0 1 1 *", "time_zone": "UTC", "interaction": {"agent": AGENT, "input": "x",
                "tools": [{"type": "mcp_server", "name": "docs", "url": "https://docs.example.test/mcp",
                    "headers": {"X Key": secret}}]}}),
            "In `interaction`: Invalid `tools[0].headers.X Key`",
        ),
        (
            "/v1beta/agents",
            json!({"id": "ag", "base_agent": AGENT, "base_environment": {"network": {"allowlist": [
                {"domain": "api.example.test", "transform": {"Authorization": format!("Bearer {secret}\n")}}]}}}),
            "`base_environment.network.allowlist[0].transform.Authorization`",
        ),
        (
            "/v1beta/interactions",
            json!({"agent": AGENT, "input": "x", "tools": [{"type": "mcp_server", "name": "docs",
                "url": "https://docs.example.test/mcp", "headers": {"Authorization": format!("Bearer {secret}\r\nX: y")}}]}),
            "`tools[0].headers.Authorization`",
        ),
    ];
    for (uri, body, field) in refused {
        let (s, answer) = h.call(Method::POST, uri, Some(body.clone())).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri} {body}: {answer}");
        let text = answer.to_string();
        assert!(text.contains(field), "{uri}: {text}");
        assert!(!text.contains(secret), "the secret is echoed: {text}");
    }
    // An update is checked the same way.
    let (s, c) = h
        .call(
            Method::POST,
            "/v1beta/credentials",
            Some(json!({"id": "ok", "type": "bearer_token", "token": secret})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{c}");
    let (s, answer) = h
        .call(
            Method::PATCH,
            "/v1beta/credentials/ok",
            Some(json!({"type": "bearer_token", "header_name": "Bad Name"})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{answer}");
    assert!(answer.to_string().contains("`header_name`"), "{answer}");
}

/// Regression (issue 36, flaw 6): GET and list of triggers and agents returned
/// `network.allowlist[].transform` values in clear (`Authorization: Bearer …`), while GET
/// /environments redacted them. Every echo of an environment spec redacts them.
#[tokio::test]
async fn triggers_and_agents_show_transform_values_redacted() {
    let h = Harness::new();
    let secret = "Bearer transform-secret-31337";
    let network = json!({"allowlist": [{"domain": "api.example.test", "transform": {"Authorization": secret}}]});
    let (s, created) = h
        .call(
            Method::POST,
            "/v1beta/triggers",
            Some(json!({"schedule": "0 0 1 1 *", "time_zone": "UTC", "interaction": {
                "agent": AGENT, "input": "x", "environment": {"type": "remote", "network": network}}})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{created}");
    let id = created["id"].as_str().unwrap();
    let (s, agent) = h
        .call(
            Method::POST,
            "/v1beta/agents",
            Some(json!({"id": "with-net", "base_agent": AGENT,
                "base_environment": {"type": "remote", "network": network}})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{agent}");
    let mut shown = vec![created.clone(), agent.clone()];
    for uri in [
        format!("/v1beta/triggers/{id}"),
        "/v1beta/triggers".to_owned(),
        "/v1beta/agents/with-net".to_owned(),
        "/v1beta/agents".to_owned(),
    ] {
        let (s, body) = h.call(Method::GET, &uri, None).await;
        assert_eq!(s, StatusCode::OK, "{uri}: {body}");
        shown.push(body);
    }
    for body in &shown {
        let text = body.to_string();
        assert!(!text.contains("transform-secret"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
    }
    // The domain and the header's name are still shown.
    assert_eq!(
        shown[2]["interaction"]["environment"]["network"]["allowlist"][0]["domain"],
        "api.example.test"
    );
    assert_eq!(
        shown[4]["base_environment"]["network"]["allowlist"][0]["transform"]["Authorization"],
        "[redacted]"
    );
}
