use axum::http::{Method, StatusCode};

use super::Harness;

#[tokio::test]
async fn keys_are_required_when_configured() {
    let h = Harness::with_keys(vec!["k-123".into()]);
    let uri = "/v1beta/environments";
    let (s, _, body) = h.raw(Method::GET, uri, &[], None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED");
    assert_eq!(
        h.raw(Method::GET, uri, &[("x-goog-api-key", "nope")], None)
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        h.raw(Method::GET, uri, &[("x-goog-api-key", "k-123")], None)
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        h.raw(Method::GET, uri, &[("authorization", "Bearer k-123")], None)
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        h.raw(Method::GET, "/v1beta/environments?key=k-123", &[], None)
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        h.raw(Method::GET, "/v1beta/environments?key=k-12", &[], None)
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn local_mode_needs_no_key_but_refuses_public_addresses() {
    let h = Harness::new();
    assert_eq!(
        h.raw(Method::GET, "/v1/environments", &[], None).await.0,
        StatusCode::OK
    );
    assert!(hookbox_server::check_listen_addr("127.0.0.1:8080".parse().unwrap(), false).is_ok());
    assert!(hookbox_server::check_listen_addr("[::1]:8080".parse().unwrap(), false).is_ok());
    let err =
        hookbox_server::check_listen_addr("0.0.0.0:8080".parse().unwrap(), false).unwrap_err();
    assert!(err.to_string().contains("HOOKBOX_API_KEYS"));
    assert!(hookbox_server::check_listen_addr("0.0.0.0:8080".parse().unwrap(), true).is_ok());
}

#[tokio::test]
async fn health_and_readiness_need_no_key_and_say_nothing_of_projects() {
    let h = Harness::with_keys(vec!["team:secret-key".into()]);
    for (uri, status) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let (s, _, body) = h.raw(Method::GET, uri, &[], None).await;
        assert_eq!(s, StatusCode::OK, "{uri}");
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v, serde_json::json!({"status": status}));
    }
    // Everything else still needs the key.
    let (s, _, _) = h.raw(Method::GET, "/v1beta/environments", &[], None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _, _) = h.raw(Method::GET, "/healthz/x", &[], None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}
