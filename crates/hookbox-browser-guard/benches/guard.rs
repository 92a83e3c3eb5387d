//! What the browser guard costs: `Policy::decide` alone, and requests per second through a real
//! loopback socket to a trivial route with and without the guard, same run (the baseline).
//! `cargo bench -p hookbox-browser-guard`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use axum::Router;
use axum::routing::post;
use hookbox_browser_guard::Policy;
use http::{HeaderMap, HeaderValue, Method, Uri, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REQUESTS: usize = 20_000;
const ROUNDS: usize = 3;

fn sdk_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in [
        ("host", "127.0.0.1:8080"),
        ("content-type", "application/json"),
        ("content-length", "58"),
        ("x-goog-api-key", "local"),
        (
            "x-goog-api-client",
            "google-genai-sdk/3.6.1 gl-python/3.11.7",
        ),
        ("origin", "http://127.0.0.1:8080"),
        ("sec-fetch-site", "same-origin"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    h
}

fn decide_ns(policy: &Policy) -> f64 {
    let headers = sdk_headers();
    let uri: Uri = "/v1beta/interactions".parse().unwrap();
    let start = Instant::now();
    for _ in 0..1_000_000 {
        std::hint::black_box(policy.decide(
            &Method::POST,
            &uri,
            Version::HTTP_11,
            std::hint::black_box(&headers),
        ));
    }
    start.elapsed().as_nanos() as f64 / 1e6
}

async fn serve(router: Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// Sequential keep-alive requests on one connection; requests per second.
async fn rate(addr: std::net::SocketAddr) -> f64 {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = r#"{"agent":"antigravity-preview-09-2026","input":"hello"}"#;
    let request = format!(
        "POST /v1beta/interactions HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nSec-Fetch-Site: same-origin\r\nx-goog-api-key: local\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut buf = vec![0u8; 4096];
    let start = Instant::now();
    for _ in 0..REQUESTS {
        s.write_all(request.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        while !got.ends_with(b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        assert!(
            got.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&got)
        );
    }
    REQUESTS as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let mut policy = Policy::new();
    policy.allow_host("hookbox.example.com").unwrap();
    policy.allow_origin("https://console.example.com").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let route = || Router::new().route("/v1beta/interactions", post(|| async { "" }));
        let bare = serve(route()).await;
        let guarded = serve(policy.protect(route())).await;
        rate(bare).await; // warm-up
        rate(guarded).await;
        for round in 1..=ROUNDS {
            let (b, g) = (rate(bare).await, rate(guarded).await);
            println!(
                "round {round}: bare {b:.0} req/s, guarded {g:.0} req/s ({:.3}x); decide() {:.0} ns",
                g / b,
                decide_ns(&policy)
            );
        }
    });
}
