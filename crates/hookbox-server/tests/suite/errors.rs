use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::Harness;

fn assert_rpc(status: StatusCode, body: &Value, want: StatusCode, rpc: &str, needle: &str) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["error"]["code"], want.as_u16(), "{body}");
    assert_eq!(body["error"]["status"], rpc, "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains(needle), "{msg:?} should mention {needle:?}");
}

#[tokio::test]
async fn request_errors_say_what_was_wrong() {
    let h = Harness::new();
    let (s, _, b) = h
        .raw(
            Method::POST,
            "/v1beta/interactions",
            &[],
            Some(b"{\"agent\": ".to_vec()),
        )
        .await;
    assert_rpc(
        s,
        &serde_json::from_slice(&b).unwrap(),
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
        "Invalid JSON payload",
    );

    let (s, b) = h
        .call(
            Method::POST,
            "/v1beta/interactions",
            Some(json!({"agent": "gpt-7", "input": "x"})),
        )
        .await;
    assert_rpc(
        s,
        &b,
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
        "Unknown agent `gpt-7`",
    );

    let (s, b) = h
        .call(
            Method::POST,
            "/v1beta/interactions",
            Some(json!({"model": "gemini-2.5-flash", "input": "x"})),
        )
        .await;
    assert_rpc(
        s,
        &b,
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
        "set `agent`",
    );

    let (s, b) = h
        .call(
            Method::POST,
            "/v1beta/interactions",
            Some(json!({"agent": "antigravity-preview-09-2026"})),
        )
        .await;
    assert_rpc(
        s,
        &b,
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
        "`input` is required",
    );

    let (s, b) = h.call(Method::POST, "/v1beta/interactions", Some(json!({"agent": "antigravity-preview-09-2026", "input": "x", "environment": "env_missing"}))).await;
    assert_rpc(
        s,
        &b,
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        "Environment `env_missing` not found",
    );

    let (s, b) = h.call(Method::POST, "/v1beta/interactions", Some(json!({"agent": "antigravity-preview-09-2026", "input": "x", "previous_interaction_id": "int_nope"}))).await;
    assert_rpc(s, &b, StatusCode::NOT_FOUND, "NOT_FOUND", "int_nope");

    let (s, b) = h.call(Method::POST, "/v1beta/interactions", Some(json!({"agent": "antigravity-preview-09-2026", "input": "x",
        "environment": {"sources": [{"type": "inline", "target": "../../etc/evil", "content": "x"}]}}))).await;
    assert_rpc(
        s,
        &b,
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
        "Invalid source",
    );

    let (s, b) = h
        .call(
            Method::POST,
            "/v1beta/interactions",
            Some(json!({"agent": "antigravity-preview-09-2026", "input": 5})),
        )
        .await;
    assert_rpc(
        s,
        &b,
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
        "Invalid interaction request",
    );

    let (s, b) = h
        .call(
            Method::GET,
            "/v1beta/interactions/missing?stream=false",
            None,
        )
        .await;
    assert_rpc(
        s,
        &b,
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        "Interaction `missing` not found",
    );

    let (s, b) = h.call(Method::GET, "/v2/nothing", None).await;
    assert_rpc(
        s,
        &b,
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        "No such endpoint",
    );
}

#[tokio::test]
async fn bad_sources_leave_no_environment_behind() {
    let h = Harness::new();
    let (s, _) = h
        .call(
            Method::POST,
            "/v1/environments",
            Some(json!({"sources": [
        {"type": "inline", "target": "ok.txt", "content": "x"},
        {"type": "inline", "target": "bad.bin", "content": "%%%", "encoding": "base64"}]})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (_, list) = h.call(Method::GET, "/v1/environments", None).await;
    assert_eq!(list["environments"], json!([]));
    assert_eq!(
        std::fs::read_dir(h.dir.path().join("envs"))
            .unwrap()
            .count(),
        0
    );
}
