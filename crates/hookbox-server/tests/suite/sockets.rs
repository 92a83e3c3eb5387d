//! Real sockets: the server on 127.0.0.1:0, a real HTTP client.

use std::net::SocketAddr;

use futures::StreamExt;
use hookbox_server::app;
use hookbox_test_support::{TestServer, spawn_server};
use serde_json::{Value, json};

use super::{Harness, sse_events};

/// The whole app on 127.0.0.1:0; stops when the handle is dropped.
async fn start(h: &Harness) -> (SocketAddr, TestServer) {
    let server = spawn_server(app(h.state.clone())).await;
    (server.addr, server)
}

#[tokio::test]
async fn sse_arrives_incrementally_over_a_socket() {
    let h = Harness::new();
    let (addr, _stop) = start(&h).await;
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1beta/interactions"))
        .header("x-goog-api-key", "anything")
        .json(&json!({"agent": "antigravity-preview-09-2026", "input": "create `/workspace/n.txt` containing 'x' then read it back", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    let mut chunks = 0;
    while let Some(chunk) = body.next().await {
        text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        chunks += 1;
    }
    assert!(chunks > 1, "events should not arrive as one buffered body");
    let events = sse_events(&text);
    assert_eq!(events.last().unwrap(), "[DONE]");
    let completed: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
    assert_eq!(completed["interaction"]["status"], "completed");
    let env = completed["interaction"]["environment_id"].as_str().unwrap();
    let bytes = reqwest::get(format!(
        "http://{addr}/v1beta/environments/{env}/files/workspace/n.txt?alt=media"
    ))
    .await
    .unwrap()
    .bytes()
    .await
    .unwrap();
    assert_eq!(&bytes[..], b"x");
}

#[tokio::test]
async fn resumable_upload_protocol() {
    let h = Harness::new();
    let (addr, _stop) = start(&h).await;
    let client = reqwest::Client::new();
    let env: Value = client
        .post(format!("http://{addr}/v1beta/environments"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = env["id"].as_str().unwrap();
    let start = client
        .put(format!("http://{addr}/upload/v1beta/environments/{id}/files/data/x.txt?extract=false&overwrite=true"))
        .header("X-Goog-Upload-Protocol", "resumable")
        .header("X-Goog-Upload-Command", "start")
        .header("X-Goog-Upload-Header-Content-Length", "10")
        .header("X-Goog-Upload-Header-Content-Type", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(start.status(), 200);
    let url = start.headers()["x-goog-upload-url"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(url.starts_with(&format!("http://{addr}/upload/")), "{url}");
    let first = client
        .post(&url)
        .header("X-Goog-Upload-Command", "upload")
        .header("X-Goog-Upload-Offset", "0")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(first.headers()["x-goog-upload-status"], "active");
    let wrong = client
        .post(&url)
        .header("X-Goog-Upload-Command", "upload, finalize")
        .header("X-Goog-Upload-Offset", "3")
        .body("world")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 400);
    let last = client
        .post(&url)
        .header("X-Goog-Upload-Command", "upload, finalize")
        .header("X-Goog-Upload-Offset", "5")
        .body("world")
        .send()
        .await
        .unwrap();
    assert_eq!(last.status(), 200);
    assert_eq!(last.headers()["x-goog-upload-status"], "final");
    let file: Value = last.json().await.unwrap();
    assert_eq!(file["files"][0]["path"], "/data/x.txt");
    assert_eq!(file["files"][0]["size_bytes"], "10");
    let got = client
        .get(format!(
            "http://{addr}/v1beta/environments/{id}/files/data/x.txt?alt=media"
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(got, "helloworld");
    // The session is gone once finalized.
    assert_eq!(
        client
            .post(&url)
            .header("X-Goog-Upload-Command", "finalize")
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}
