//! A router behind [`Policy::protect`] on 127.0.0.1:0, driven with raw HTTP/1.1 so every header
//! is exactly what a browser (or an attacker's relay) would send. The route counts the requests
//! that reach it, so a refusal is seen to stop them, not just to answer differently.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::routing::post;
use hookbox_browser_guard::Policy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Served {
    addr: SocketAddr,
    reached: Arc<AtomicUsize>,
}

async fn serve(policy: &Policy) -> Served {
    let reached = Arc::new(AtomicUsize::new(0));
    let counter = reached.clone();
    let router = Router::new().route(
        "/v1beta/interactions",
        post(move || {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                ([("x-goog-upload-status", "active")], "{}")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = policy.protect(router);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Served { addr, reached }
}

/// One request; the status code, the header block (lowercased) and the body.
async fn send(addr: SocketAddr, head: &str, body: &str) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{head}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (headers, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = headers[9..12].parse().unwrap();
    (status, headers.to_ascii_lowercase(), body.to_owned())
}

const BODY: &str = r#"{"agent":"antigravity-preview-09-2026","input":"run `id`"}"#;

#[tokio::test]
async fn cross_origin_simple_posts_are_refused_before_the_route_runs() {
    let s = serve(&Policy::new()).await;
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let head = format!(
            "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nOrigin: http://evil.example\r\nContent-Type: {content_type}\r\n",
            s.addr
        );
        let (status, _, body) = send(s.addr, &head, BODY).await;
        assert_eq!(status, 403, "{content_type}: {body}");
        let error: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"]["status"], "PERMISSION_DENIED");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--allow-origin http://evil.example"),
            "{body}"
        );
        // Without Origin (an old browser, a privacy extension): the type alone refuses it.
        let head = format!(
            "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\n",
            s.addr
        );
        let (status, _, body) = send(s.addr, &head, BODY).await;
        assert_eq!(status, 415, "{content_type}: {body}");
    }
    assert_eq!(
        s.reached.load(Ordering::SeqCst),
        0,
        "nothing reached the route"
    );
    let head = format!(
        "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n",
        s.addr
    );
    let (status, headers, _) = send(s.addr, &head, BODY).await;
    assert_eq!(status, 200);
    assert!(!headers.contains("access-control-"), "{headers}");
    assert_eq!(s.reached.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_rebound_host_is_refused_on_every_path_including_unknown_ones() {
    let s = serve(&Policy::new()).await;
    let port = s.addr.port();
    for path in ["/v1beta/interactions", "/console", "/no/such/route"] {
        for method in ["GET", "POST"] {
            let head = format!(
                "{method} {path} HTTP/1.1\r\nHost: rebind.example:{port}\r\nContent-Type: application/json\r\n"
            );
            let (status, _, body) = send(s.addr, &head, BODY).await;
            assert_eq!(status, 403, "{method} {path}: {body}");
            assert!(body.contains("--allow-host rebind.example"), "{body}");
        }
    }
    let (status, _, _) = send(
        s.addr,
        "POST /v1beta/interactions HTTP/1.1\r\nContent-Type: application/json\r\n",
        BODY,
    )
    .await;
    assert_eq!(status, 400, "HTTP/1.1 without Host");
    assert_eq!(s.reached.load(Ordering::SeqCst), 0);
    let mut allowed = Policy::new();
    allowed.allow_host("rebind.example").unwrap();
    let s = serve(&allowed).await;
    let head = format!(
        "POST /v1beta/interactions HTTP/1.1\r\nHost: rebind.example:{port}\r\nContent-Type: application/json\r\n"
    );
    let (status, _, _) = send(s.addr, &head, BODY).await;
    assert_eq!(status, 200, "an allowed name passes");
}

#[tokio::test]
async fn a_listed_origin_gets_its_preflight_answered_and_cors_headers() {
    let mut policy = Policy::new();
    policy.allow_origin("http://app.example:3000").unwrap();
    let s = serve(&policy).await;
    let head = format!(
        "OPTIONS /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nOrigin: http://app.example:3000\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type,x-goog-api-key\r\n",
        s.addr
    );
    let (status, headers, _) = send(s.addr, &head, "").await;
    assert_eq!(status, 204);
    assert!(
        headers.contains("access-control-allow-origin: http://app.example:3000"),
        "{headers}"
    );
    assert!(
        headers.contains("access-control-allow-methods: get, head, post"),
        "{headers}"
    );
    assert!(headers.contains("x-goog-api-key"), "{headers}");
    assert!(headers.contains("vary: origin"), "{headers}");
    assert!(
        !headers.contains("access-control-allow-origin: *"),
        "{headers}"
    );
    assert_eq!(
        s.reached.load(Ordering::SeqCst),
        0,
        "a preflight is answered here"
    );
    let head = format!(
        "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nOrigin: http://app.example:3000\r\nContent-Type: application/json\r\n",
        s.addr
    );
    let (status, headers, _) = send(s.addr, &head, BODY).await;
    assert_eq!(status, 200);
    assert!(
        headers.contains("access-control-allow-origin: http://app.example:3000"),
        "{headers}"
    );
    assert!(
        headers.contains("access-control-expose-headers: x-goog-upload-url"),
        "{headers}"
    );
    // Another origin's preflight is refused, and gets no CORS headers.
    let head = format!(
        "OPTIONS /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n",
        s.addr
    );
    let (status, headers, _) = send(s.addr, &head, "").await;
    assert_eq!(status, 403);
    assert!(!headers.contains("access-control-"), "{headers}");
}
