//! http handlers against a real HTTP server on 127.0.0.1.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hookbox_hooks::{Decision, Failure, Outcome};
use hookbox_protocol::ToolName;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::json;
use tokio::net::TcpListener;

use super::support::{call, engine_in, single};

/// What the server saw: (path, headers, body).
type Seen = Arc<Mutex<Vec<(String, Vec<(String, String)>, Vec<u8>)>>>;

async fn serve() -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let seen_server = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let seen = seen_server.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let seen = seen.clone();
                    async move { Ok::<_, Infallible>(respond(req, seen).await) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    (addr, seen)
}

async fn respond(req: Request<Incoming>, seen: Seen) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
    seen.lock().unwrap().push((path.clone(), headers, body));
    let (status, body): (u16, Vec<u8>) = match path.as_str() {
        "/deny" => (
            200,
            br#"{"decision":"deny","reason":"http says no"}"#.to_vec(),
        ),
        "/allow" => (200, br#"{"decision":"allow"}"#.to_vec()),
        "/error-deny" => (500, br#"{"decision":"deny","reason":"500"}"#.to_vec()),
        "/forbidden-deny" => (403, br#"{"decision":"deny","reason":"403"}"#.to_vec()),
        "/big" => (200, vec![b' '; 3 * 1024 * 1024]),
        "/hang" => std::future::pending().await,
        _ => (200, b"{}".to_vec()),
    };
    Response::builder()
        .status(status)
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn http_hook(url: String, timeout: f64) -> serde_json::Value {
    json!({"type": "http", "url": url, "timeout": timeout, "headers": {"X-Event-Source": "agent-sandbox"}})
}

#[tokio::test]
async fn http_deny_blocks_and_the_event_is_posted_as_json_with_headers() {
    let (addr, seen) = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let hooks = single(
        "pre_tool_execution",
        "*",
        json!([http_hook(format!("http://{addr}/deny"), 5.0)]),
    );
    let d = engine_in(dir.path())
        .pre_tool(&hooks, &call(ToolName::CodeExecution), "env_h")
        .await;
    assert_eq!(
        d.decision,
        Decision::Deny {
            reason: "http says no".into(),
            group: "g".into()
        }
    );
    let seen = seen.lock().unwrap();
    let (path, headers, body) = &seen[0];
    assert_eq!(path, "/deny");
    assert!(headers.contains(&("x-event-source".into(), "agent-sandbox".into())));
    assert!(headers.contains(&("content-type".into(), "application/json".into())));
    let payload: serde_json::Value = serde_json::from_slice(body).unwrap();
    assert_eq!(payload["tool_call"]["name"], "code_execution");
    assert_eq!(payload["environment_id"], "env_h");
}

#[tokio::test]
async fn http_failures_fail_open() {
    let (addr, _) = serve().await;
    // A port with nothing listening: bind, note it, close.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_in(dir.path());
    let cases: Vec<(String, FailureCheck)> = vec![
        (format!("http://{addr}/error-deny"), |f| {
            matches!(f, Failure::HttpStatus { status: 500 })
        }),
        (format!("http://{addr}/forbidden-deny"), |f| {
            matches!(f, Failure::HttpStatus { status: 403 })
        }),
        (format!("http://{addr}/hang"), |f| {
            matches!(f, Failure::TimedOut { .. })
        }),
        (format!("http://{addr}/big"), |f| {
            matches!(f, Failure::ResponseTooLarge { .. })
        }),
        (format!("http://{addr}/plain"), |f| {
            matches!(f, Failure::NotADecision { .. })
        }),
        (format!("http://{closed}/deny"), |f| {
            matches!(f, Failure::Http { .. })
        }),
    ];
    for (url, expected) in cases {
        let hooks = single(
            "pre_tool_execution",
            "*",
            json!([http_hook(url.clone(), 0.5)]),
        );
        let d = engine
            .pre_tool(&hooks, &call(ToolName::ViewFile), "env_h")
            .await;
        assert_eq!(d.decision, Decision::Allow, "{url}");
        match &d.trace[0].outcome {
            Outcome::FailedOpen { failure } => assert!(expected(failure), "{url}: {failure:?}"),
            other => panic!("{url}: expected failed_open, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn post_http_hooks_receive_the_error_field() {
    let (addr, seen) = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let hooks = single(
        "post_tool_execution",
        "view_file|write_to_file|replace_file_content",
        json!([http_hook(format!("http://{addr}/events"), 5.0)]),
    );
    let engine = engine_in(dir.path());
    engine
        .post_tool(
            &hooks,
            &call(ToolName::WriteToFile),
            "env_h",
            Some("disk full"),
        )
        .await;
    // list_dir is not matched, so only one event arrives.
    engine
        .post_tool(&hooks, &call(ToolName::ListDir), "env_h", None)
        .await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let payload: serde_json::Value = serde_json::from_slice(&seen[0].2).unwrap();
    assert_eq!(payload["error"], "disk full");
    assert_eq!(payload["tool_call"]["name"], "write_to_file");
}

/// Recognises the expected failure.
type FailureCheck = fn(&Failure) -> bool;
