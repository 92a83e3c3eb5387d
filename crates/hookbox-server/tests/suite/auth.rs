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
    // Loopback, all of 127.0.0.0/8 and ::1, is served without keys.
    for loopback in [
        "127.0.0.1:8080",
        "127.0.0.2:8080",
        "127.255.255.254:1",
        "[::1]:8080",
    ] {
        assert!(
            hookbox_server::check_listen_addr(loopback.parse().unwrap(), false).is_ok(),
            "{loopback}"
        );
    }
    // Every other address is refused without a key: the wildcards, private, shared, link-local
    // and public ones, IPv4 and IPv6. (A pure check: no socket is made, no packet sent.)
    for other in [
        "0.0.0.0:8080",
        "[::]:8080",
        "10.1.2.3:8080",
        "172.16.0.1:8080",
        "192.168.1.10:8080",
        "100.64.0.1:8080",
        "169.254.169.254:80",
        "8.8.8.8:8080",
        "203.0.113.9:443",
        "[fd00::1]:8080",
        "[fe80::1]:8080",
        "[2001:db8::1]:8080",
    ] {
        let addr = other.parse().unwrap();
        let err = hookbox_server::check_listen_addr(addr, false).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("HOOKBOX_API_KEYS"), "{other}: {text}");
        assert!(
            text.contains(&format!("refusing {addr}")),
            "{other}: {text}"
        );
        // With a key, any address may be served.
        assert!(
            hookbox_server::check_listen_addr(addr, true).is_ok(),
            "{other}"
        );
    }
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
