//! `GET /stats` (the console's Overview): computed per project from the store. Another
//! project's interactions and paused calls count nowhere in it, and a window out of bounds is a
//! 400 that names the bounds. (Guard traces from real hooks are checked end to end in
//! tests/console, where real hooks files run.)

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::Harness;

const KEY_A: &str = "team-a:key-of-a";
const KEY_B: &str = "team-b:key-of-b";

async fn call(
    h: &Harness,
    key: &str,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let key = key.split_once(':').map_or(key, |(_, k)| k);
    let (status, _, bytes) = h
        .raw(
            method,
            uri,
            &[("x-goog-api-key", key)],
            body.map(|b| b.to_string().into_bytes()),
        )
        .await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn stats_count_only_the_asking_project() {
    let h = Harness::with_keys(vec![KEY_A.into(), KEY_B.into()]);
    let agent = "antigravity-preview-09-2026";
    for input in ["run `echo hi`", "run `make deploy`"] {
        let (s, i) = call(
            &h,
            KEY_A,
            Method::POST,
            "/v1beta/interactions",
            Some(json!({"agent": agent, "input": input})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{i}");
    }
    let (s, a) = call(&h, KEY_A, Method::GET, "/v1beta/stats?window=3600", None).await;
    assert_eq!(s, StatusCode::OK, "{a}");
    assert_eq!(a["interactions"]["total"], 2, "{a}");
    assert_eq!(a["interactions"]["by_status"]["completed"], 1, "{a}");
    assert_eq!(a["interactions"]["by_status"]["requires_action"], 1, "{a}");
    assert_eq!(a["approvals_waiting"], 1, "{a}");
    assert_eq!(
        a["interactions"]["buckets"].as_array().unwrap().len(),
        24,
        "{a}"
    );
    assert_eq!(a["truncated"], false, "{a}");

    let (s, b) = call(&h, KEY_B, Method::GET, "/v1beta/stats?window=3600", None).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["interactions"]["total"], 0, "{b}");
    assert_eq!(b["approvals_waiting"], 0, "{b}");
    assert_eq!(b["events"], json!([]), "{b}");
    assert_eq!(b["guards"], json!([]), "{b}");
}

#[tokio::test]
async fn stats_refuse_a_window_or_buckets_out_of_bounds() {
    let h = Harness::with_keys(vec![KEY_A.into()]);
    for q in [
        "window=59",
        "window=2592001",
        "window=-1",
        "buckets=0",
        "buckets=97",
    ] {
        let (s, body) = call(&h, KEY_A, Method::GET, &format!("/v1beta/stats?{q}"), None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{q}: {body}");
    }
    let (s, body) = call(
        &h,
        KEY_A,
        Method::GET,
        "/v1beta/stats?window=60&buckets=1",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["window"]["seconds"], 60);
}

#[tokio::test]
async fn stats_show_each_visible_projects_quota_limits_and_use() {
    let quotas: hookbox_server::quota::QuotaConfig = toml::from_str(
        "[quotas]\nrunning_interactions = 7\n[projects.team-a.quotas]\nenvironments = 5\n",
    )
    .unwrap();
    let h = Harness::configured(
        tempfile::tempdir().unwrap(),
        vec![KEY_A.into(), KEY_B.into()],
        quotas,
    );
    for _ in 0..2 {
        let (s, e) = call(
            &h,
            KEY_A,
            Method::POST,
            "/v1beta/environments",
            Some(json!({"sources": []})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{e}");
    }
    let quota = |stats: &Value, name: &str| {
        stats["quotas"][0]["quotas"]
            .as_array()
            .and_then(|q| q.iter().find(|q| q["quota"] == name).cloned())
            .unwrap_or(Value::Null)
    };
    let (s, a) = call(&h, KEY_A, Method::GET, "/v1beta/stats?window=3600", None).await;
    assert_eq!(s, StatusCode::OK, "{a}");
    assert_eq!(a["quotas"].as_array().map(Vec::len), Some(1), "{a}");
    assert_eq!(a["quotas"][0]["project"], "team-a", "{a}");
    assert_eq!(
        quota(&a, "environments"),
        json!({"quota": "environments", "limit": 5, "used": 2, "scope": "project"}),
        "{a}"
    );
    assert_eq!(quota(&a, "running_interactions")["limit"], 7, "{a}");
    assert_eq!(quota(&a, "running_interactions")["used"], 0, "{a}");
    assert_eq!(quota(&a, "sandbox_processes")["scope"], "replica", "{a}");
    assert_eq!(quota(&a, "live_sockets")["used"], 0, "{a}");
    // Another project sees only its own quotas and use.
    let (s, b) = call(&h, KEY_B, Method::GET, "/v1beta/stats?window=3600", None).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["quotas"].as_array().map(Vec::len), Some(1), "{b}");
    assert_eq!(b["quotas"][0]["project"], "team-b", "{b}");
    assert_eq!(quota(&b, "environments")["used"], 0, "{b}");
    assert_eq!(quota(&b, "environments")["limit"], 1000, "{b}");
}
