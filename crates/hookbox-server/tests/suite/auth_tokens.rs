//! Ephemeral auth tokens through the router: scope, deletion seen by another server on the same
//! database at once (nothing caches a token), and what a token may not do.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use hookbox_server::{AppState, app};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::Harness;

const KEY: &str = "k-tokens";

async fn send(
    state: &AppState,
    method: Method,
    uri: &str,
    key: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("x-goog-api-key", key)
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let resp = app(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn interaction(state: &AppState) -> String {
    let (s, body) = send(
        state,
        Method::POST,
        "/v1beta/interactions",
        KEY,
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "run `echo hi`"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_deleted_token_is_refused_at_once_by_another_server_on_the_same_database() {
    let h = Harness::with_keys(vec![KEY.into()]);
    let other = h.replica(vec![KEY.into()]);
    let id = interaction(&h.state).await;
    let (s, minted) = send(
        &h.state,
        Method::POST,
        &format!("/v1beta/interactions/{id}/auth_tokens"),
        KEY,
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{minted}");
    let token = minted["auth_token"].as_str().unwrap().to_owned();
    let read = format!("/v1beta/interactions/{id}");
    // Used on both servers, so the second has seen (and could have cached) it.
    assert_eq!(
        send(&h.state, Method::GET, &read, &token, None).await.0,
        StatusCode::OK
    );
    assert_eq!(
        send(&other, Method::GET, &read, &token, None).await.0,
        StatusCode::OK
    );
    let bare = token.strip_prefix("auth_tokens/").unwrap();
    let (s, body) = send(
        &h.state,
        Method::DELETE,
        &format!("/v1beta/interactions/{id}/auth_tokens/{bare}"),
        KEY,
        None,
    )
    .await;
    assert_eq!((s, body), (StatusCode::OK, json!({})));
    assert_eq!(
        send(&other, Method::GET, &read, &token, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        send(&h.state, Method::GET, &read, &token, None).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn a_token_is_stored_only_as_its_hash_and_never_answered_again() {
    let h = Harness::with_keys(vec![KEY.into()]);
    let id = interaction(&h.state).await;
    let (_, minted) = send(
        &h.state,
        Method::POST,
        &format!("/v1beta/interactions/{id}/auth_tokens"),
        KEY,
        None,
    )
    .await;
    let token = minted["auth_token"].as_str().unwrap().to_owned();
    let secret = token.strip_prefix("auth_tokens/").unwrap().to_owned();
    assert_eq!(secret.len(), 64);
    drop(h.state);
    let db = std::fs::read(h.dir.path().join("hookbox.db")).unwrap();
    let wal = std::fs::read(h.dir.path().join("hookbox.db-wal")).unwrap_or_default();
    for bytes in [&db, &wal] {
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()));
    }
}

#[tokio::test]
async fn a_token_cannot_reach_past_its_interaction() {
    let h = Harness::with_keys(vec![KEY.into()]);
    let mine = interaction(&h.state).await;
    let other = interaction(&h.state).await;
    let (_, minted) = send(
        &h.state,
        Method::POST,
        &format!("/v1beta/interactions/{mine}/auth_tokens"),
        KEY,
        None,
    )
    .await;
    let token = minted["auth_token"].as_str().unwrap().to_owned();
    let (s, body) = send(
        &h.state,
        Method::GET,
        &format!("/v1beta/interactions/{other}"),
        &token,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{body}");
    let (s, body) = send(
        &h.state,
        Method::POST,
        "/v1beta/interactions",
        &token,
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "run `echo x`", "previous_interaction_id": other})),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{body}");
    for (method, uri) in [
        (Method::GET, "/v1beta/environments".to_owned()),
        (Method::GET, "/v1beta/interactions".to_owned()),
        (
            Method::POST,
            format!("/v1beta/interactions/{mine}/auth_tokens"),
        ),
        (Method::DELETE, format!("/v1beta/interactions/{mine}")),
    ] {
        let (s, body) = send(&h.state, method.clone(), &uri, &token, None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{method} {uri}: {body}");
    }
    let (s, cont) = send(
        &h.state,
        Method::POST,
        "/v1beta/interactions",
        &token,
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "run `echo again`", "previous_interaction_id": mine})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{cont}");
    assert_eq!(cont["status"], "completed", "{cont}");
}

#[tokio::test]
async fn an_expired_token_is_refused_like_a_wrong_key() {
    let h = Harness::with_keys(vec![format!("default:{KEY}")]);
    let id = interaction(&h.state).await;
    // Written straight to the store with an expiry already past (the API refuses one).
    let token = "auth_tokens/00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let record = hookbox_store::AuthTokenRecord {
        id: "atk_expired".into(),
        project: "default".into(),
        interaction_id: id.clone(),
        expires_at: hookbox_store::time::format_unix(1),
        created: hookbox_store::time::format_unix(0),
    };
    h.store
        .create_auth_token(&record, &hookbox_store::keys::hash_key(token))
        .await
        .unwrap();
    let read = format!("/v1beta/interactions/{id}");
    let (s, body) = send(&h.state, Method::GET, &read, token, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["error"]["message"], "API key not valid.");
    // The same record, live, authenticates: what refused it was the expiry alone.
    let live = hookbox_store::AuthTokenRecord {
        id: "atk_live".into(),
        expires_at: hookbox_store::time::format_unix(i64::from(u32::MAX)),
        ..record
    };
    let other = "auth_tokens/ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
    h.store
        .create_auth_token(&live, &hookbox_store::keys::hash_key(other))
        .await
        .unwrap();
    let (s, body) = send(&h.state, Method::GET, &read, other, None).await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn the_expiry_sweep_purges_tokens_expired_past_the_grace_and_keeps_the_rest() {
    let h = Harness::with_keys(vec![format!("default:{KEY}")]);
    let id = interaction(&h.state).await;
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    let grace = hookbox_server::auth_tokens::PURGE_GRACE_SECS;
    let record = |name: &str, expires: i64| hookbox_store::AuthTokenRecord {
        id: format!("atk_{name}"),
        project: "default".into(),
        interaction_id: id.clone(),
        expires_at: hookbox_store::time::format_unix(expires),
        created: hookbox_store::time::format_unix(0),
    };
    let hash = |name: &str| hookbox_store::keys::hash_key(&format!("auth_tokens/{name}"));
    // Expired long ago; expired within the grace; live (minted through the API too).
    let tokens = [
        ("stale", now - grace - 600),
        ("recent", now - 60),
        ("live", now + 3600),
    ];
    for (name, expires) in tokens {
        h.store
            .create_auth_token(&record(name, expires), &hash(name))
            .await
            .unwrap();
    }
    let (s, minted) = send(
        &h.state,
        Method::POST,
        &format!("/v1beta/interactions/{id}/auth_tokens"),
        KEY,
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{minted}");
    let minted = minted["auth_token"].as_str().unwrap().to_owned();

    hookbox_server::lifecycle::sweep(&h.state).await.unwrap();

    assert_eq!(h.store.find_auth_token(&hash("stale")).await.unwrap(), None);
    for name in ["recent", "live"] {
        assert!(
            h.store
                .find_auth_token(&hash(name))
                .await
                .unwrap()
                .is_some(),
            "{name} must be kept"
        );
    }
    // The minted token still works after the sweep.
    let (s, body) = send(
        &h.state,
        Method::GET,
        &format!("/v1beta/interactions/{id}"),
        &minted,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

// Review: nothing bounded how many live tokens an interaction could hold.
#[tokio::test]
async fn minting_past_the_live_token_cap_is_refused_with_a_429_naming_the_cap() {
    let h = Harness::with_keys(vec![KEY.into()]);
    let id = interaction(&h.state).await;
    let uri = format!("/v1beta/interactions/{id}/auth_tokens");
    let mut first = String::new();
    for n in 0..hookbox_store::MAX_LIVE_AUTH_TOKENS {
        let (s, minted) = send(&h.state, Method::POST, &uri, KEY, None).await;
        assert_eq!(s, StatusCode::OK, "{n}: {minted}");
        if n == 0 {
            first = minted["auth_token"].as_str().unwrap().to_owned();
        }
    }
    let (s, body) = send(&h.state, Method::POST, &uri, KEY, None).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&hookbox_store::MAX_LIVE_AUTH_TOKENS.to_string()),
        "{message}"
    );
    // Deleting one makes room for one.
    let token = first.strip_prefix("auth_tokens/").unwrap_or(&first);
    let (s, body) = send(
        &h.state,
        Method::DELETE,
        &format!("{uri}/{token}"),
        KEY,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, body) = send(&h.state, Method::POST, &uri, KEY, None).await;
    assert_eq!(s, StatusCode::OK, "{body}");
}
