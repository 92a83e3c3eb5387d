//! Quotas: over one, the API answers 429 RESOURCE_EXHAUSTED naming it, nothing stored changes,
//! and other projects are unaffected.

use axum::http::{Method, StatusCode};
use hookbox_server::quota::QuotaConfig;
use serde_json::{Value, json};

use super::Harness;

const A: &str = "key-of-a";
const B: &str = "key-of-b";

fn harness(config: &str) -> Harness {
    let quotas: QuotaConfig = toml::from_str(config).unwrap();
    quotas.validate().unwrap();
    Harness::configured(
        tempfile::tempdir().unwrap(),
        vec![format!("team-a:{A}"), format!("team-b:{B}")],
        quotas,
    )
}

async fn call(
    h: &Harness,
    key: &str,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
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

fn assert_exhausted(status: StatusCode, body: &Value, quota: &str) {
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(quota), "{message}");
    assert!(message.contains("team-a"), "{message}");
}

#[tokio::test]
async fn the_environments_quota_refuses_the_next_one_and_keeps_the_rest() {
    let h = harness("[projects.team-a.quotas]\nenvironments = 2\n");
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (s, env) = call(&h, A, Method::POST, "/v1beta/environments", Some(json!({}))).await;
        assert_eq!(s, StatusCode::OK, "{env}");
        ids.push(env["id"].as_str().unwrap().to_owned());
    }
    let (s, body) = call(&h, A, Method::POST, "/v1beta/environments", Some(json!({}))).await;
    assert_exhausted(s, &body, "environments");
    // An interaction that would need a new environment is refused the same way, storing nothing.
    let (s, body) = call(
        &h,
        A,
        Method::POST,
        "/v1beta/interactions",
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "hi"})),
    )
    .await;
    assert_exhausted(s, &body, "environments");
    let (_, list) = call(&h, A, Method::GET, "/v1beta/environments", None).await;
    let listed: Vec<&str> = list["environments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ids);
    // Existing environments still work, and team-b is not limited by team-a's quota.
    let (s, i) = call(
        &h,
        A,
        Method::POST,
        "/v1beta/interactions",
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "run `echo still`", "environment": ids[0]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{i}");
    for _ in 0..3 {
        let (s, env) = call(&h, B, Method::POST, "/v1beta/environments", Some(json!({}))).await;
        assert_eq!(s, StatusCode::OK, "{env}");
    }
    // Deleting one makes room again.
    let (s, _) = call(
        &h,
        A,
        Method::DELETE,
        &format!("/v1beta/environments/{}", ids[1]),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, env) = call(&h, A, Method::POST, "/v1beta/environments", Some(json!({}))).await;
    assert_eq!(s, StatusCode::OK, "{env}");
}

#[tokio::test]
async fn the_request_rate_is_a_token_bucket_per_project() {
    // A refill of one request every ~3 hours: the bucket is effectively the burst.
    let h = harness("[projects.team-a.quotas]\nrequests_per_second = 0.0001\nburst = 3\n");
    for _ in 0..3 {
        let (s, body) = call(&h, A, Method::GET, "/v1beta/agents", None).await;
        assert_eq!(s, StatusCode::OK, "{body}");
    }
    let (s, body) = call(&h, A, Method::GET, "/v1beta/agents", None).await;
    assert_exhausted(s, &body, "requests_per_second");
    let (s, _) = call(&h, B, Method::GET, "/v1beta/agents", None).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn running_interactions_are_capped_and_a_finished_one_frees_its_place() {
    let h = harness("[projects.team-a.quotas]\nrunning_interactions = 1\n");
    let (s, first) = call(
        &h,
        A,
        Method::POST,
        "/v1beta/interactions",
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "run `sleep 600`", "background": true})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{first}");
    let id = first["id"].as_str().unwrap().to_owned();
    let (s, body) = call(
        &h,
        A,
        Method::POST,
        "/v1beta/interactions",
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "hi"})),
    )
    .await;
    assert_exhausted(s, &body, "running_interactions");
    // team-b runs while team-a is at its cap.
    let (s, other) = call(
        &h,
        B,
        Method::POST,
        "/v1beta/interactions",
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "hi"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{other}");
    // Cancel waits until the run has stopped; its place is free afterwards.
    let (s, cancelled) = call(
        &h,
        A,
        Method::POST,
        &format!("/v1beta/interactions/{id}/cancel"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{cancelled}");
    let (s, next) = call(
        &h,
        A,
        Method::POST,
        "/v1beta/interactions",
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "hi"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{next}");
}

#[test]
fn config_files_with_typos_or_bad_values_are_refused() {
    assert!(toml::from_str::<QuotaConfig>("[quotas]\nenviroments = 1\n").is_err());
    let bad: QuotaConfig = toml::from_str("[quotas]\ndisk_bytes_per_environment = 1024\n").unwrap();
    assert!(bad.validate().unwrap_err().contains("16 MiB"));
    let bad: QuotaConfig = toml::from_str("[projects.\"Bad Name\".quotas]\nburst = 1\n").unwrap();
    assert!(bad.validate().unwrap_err().contains("Bad Name"));
    let unknown = toml::from_str::<QuotaConfig>("[defaults]\nruntime = \"firecracker\"\n");
    assert!(unknown.unwrap_err().to_string().contains("firecracker"));
}

#[test]
fn the_config_gives_projects_a_runtime_over_its_defaults() {
    use hookbox_environments::RuntimeKind;
    let config: QuotaConfig = toml::from_str(
        "[defaults]\nruntime = \"gvisor\"\n[projects.trusted]\nruntime = \"namespaces\"\n[projects.other.quotas]\nburst = 5\n",
    )
    .unwrap();
    assert_eq!(config.runtime("trusted"), Some(RuntimeKind::Namespaces));
    assert_eq!(config.runtime("other"), Some(RuntimeKind::Gvisor));
    assert_eq!(config.runtime("unnamed"), Some(RuntimeKind::Gvisor));
    assert!(config.names_runtime(RuntimeKind::Gvisor));
    let plain: QuotaConfig = toml::from_str("[quotas]\nburst = 5\n").unwrap();
    assert_eq!(plain.runtime("any"), None);
    assert!(!plain.names_runtime(RuntimeKind::Gvisor));
}
