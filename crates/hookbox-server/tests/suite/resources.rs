use axum::http::{Method, StatusCode};
use serde_json::json;

use super::Harness;

#[tokio::test]
async fn credentials_crud_never_returns_secrets() {
    let h = Harness::new();
    let bodies = [
        json!({"id": "cred_bearer", "token": "s3cr3t-bearer", "header_name": "Authorization", "prefix": "Bearer", "type": "bearer_token"}),
        json!({"id": "cred_env", "injection_location": ["header", "query"], "value": "v4lue-env", "trusted_domains": ["api.example.com"], "type": "environment_variable"}),
        json!({"client_id": "cid", "client_secret": "csec-oauth", "id": "cred_oauth", "refresh_token": "rt-oauth", "token_url": "https://oauth2.example.com/token", "scopes": ["a"], "type": "oauth2"}),
    ];
    let mut all_text = String::new();
    for b in &bodies {
        let (s, c) = h
            .call(Method::POST, "/v1/credentials", Some(b.clone()))
            .await;
        assert_eq!(s, StatusCode::OK, "{c}");
        assert_eq!(c["id"], b["id"]);
        assert_eq!(c["type"], b["type"]);
        assert_eq!(c["status"], "active");
        assert!(c["create_time"].as_str().unwrap().ends_with('Z'));
        all_text.push_str(&c.to_string());
    }
    let (s, dup) = h
        .call(Method::POST, "/v1/credentials", Some(bodies[0].clone()))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{dup}");
    assert!(
        dup["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already exists")
    );

    let (_, list) = h
        .call(Method::GET, "/v1/credentials?page_size=2", None)
        .await;
    assert_eq!(list["credentials"].as_array().unwrap().len(), 2);
    let token = list["next_page_token"].as_str().unwrap();
    let (_, rest) = h
        .call(
            Method::GET,
            &format!("/v1/credentials?page_size=2&page_token={token}"),
            None,
        )
        .await;
    assert_eq!(rest["credentials"][0]["id"], "cred_oauth");
    all_text.push_str(&list.to_string());

    let (s, upd) = h
        .call(
            Method::PATCH,
            "/v1/credentials/cred_bearer?update_mask=token",
            Some(json!({"token": "new-s3cr3t", "type": "bearer_token"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{upd}");
    all_text.push_str(&upd.to_string());
    let (s, bad) = h
        .call(
            Method::PATCH,
            "/v1/credentials/cred_bearer",
            Some(json!({"value": "x", "type": "environment_variable"})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}");
    let (_, got) = h
        .call(Method::GET, "/v1/credentials/cred_bearer", None)
        .await;
    all_text.push_str(&got.to_string());
    for secret in ["s3cr3t", "v4lue", "csec", "rt-oauth"] {
        assert!(!all_text.contains(secret), "{secret} leaked");
    }
    let (s, missing) = h
        .call(
            Method::POST,
            "/v1/credentials",
            Some(json!({"id": "c", "type": "bearer_token"})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("token"),
        "{missing}"
    );
    assert_eq!(
        h.call(Method::DELETE, "/v1/credentials/cred_env", None)
            .await,
        (StatusCode::OK, json!({}))
    );
    assert_eq!(
        h.call(Method::GET, "/v1/credentials/cred_env", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn agents_crud() {
    let h = Harness::new();
    let body = json!({"base_agent": "antigravity-preview-09-2026", "description": "d", "id": "agent_1", "system_instruction": "s", "tools": [{"type": "code_execution"}]});
    let (s, a) = h.call(Method::POST, "/v1/agents", Some(body.clone())).await;
    assert_eq!((s, &a), (StatusCode::OK, &body));
    assert_eq!(
        h.call(Method::GET, "/v1/agents/agent_1", None).await.1,
        body
    );
    assert_eq!(
        h.call(Method::GET, "/v1/agents", None).await.1["agents"],
        json!([body])
    );
    assert_eq!(
        h.call(
            Method::POST,
            "/v1/agents",
            Some(json!({"base_agent": "nope"}))
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        h.call(Method::DELETE, "/v1/agents/agent_1", None).await,
        (StatusCode::OK, json!({}))
    );
    assert_eq!(
        h.call(Method::GET, "/v1/agents/agent_1", None).await.0,
        StatusCode::NOT_FOUND
    );
}
