use axum::http::{HeaderMap, Method, StatusCode};
use serde_json::json;

use super::Harness;

#[tokio::test]
async fn create_get_list_fork_delete() {
    let h = Harness::new();
    let (s, env) = h.call(Method::POST, "/v1/environments", Some(json!({"network": {"allowlist": [{"domain": "*"}]}, "sources": [{"content": "hi", "target": "a.txt", "type": "inline"}]}))).await;
    assert_eq!(s, StatusCode::OK, "{env}");
    let id = env["id"].as_str().unwrap();
    assert_eq!(env["status"], "active");
    // int64 fields are decimal strings (the Java SDK refuses numbers there).
    assert_eq!(env["file_count"], "1");
    assert_eq!(env["size_bytes"], "2");
    assert_eq!(env["network"], json!({"allowlist": [{"domain": "*"}]}));

    let (s, fork) = h
        .call(
            Method::POST,
            "/v1/environments",
            Some(json!({"from_environment": format!("environments/{id}"), "network": "disabled"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{fork}");
    assert_ne!(fork["id"], env["id"]);
    assert_eq!(fork["network"], "disabled");
    assert_eq!(fork["file_count"], "1");
    let (s, bad) = h
        .call(
            Method::POST,
            "/v1/environments",
            Some(json!({"from_environment": id, "sources": [{"target": "x", "content": ""}]})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}");

    let (_, list) = h
        .call(Method::GET, "/v1/environments?page_size=1", None)
        .await;
    assert_eq!(list["environments"].as_array().unwrap().len(), 1);
    assert!(list["next_page_token"].is_string());

    assert_eq!(
        h.call(Method::DELETE, &format!("/v1/environments/{id}"), None)
            .await,
        (StatusCode::OK, json!({}))
    );
    assert_eq!(
        h.call(Method::GET, &format!("/v1/environments/{id}"), None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    // The fork is independent.
    let (_, _, a) = h
        .raw(
            Method::GET,
            &format!(
                "/v1/environments/{}/files/a.txt?alt=media",
                fork["id"].as_str().unwrap()
            ),
            &[],
            None,
        )
        .await;
    assert_eq!(a, b"hi");
}

#[tokio::test]
async fn files_list_download_and_paths() {
    let h = Harness::new();
    let (_, env) = h
        .call(
            Method::POST,
            "/v1/environments",
            Some(json!({"sources": [
        {"type": "inline", "target": "workspace/a.txt", "content": "A"},
        {"type": "inline", "target": "workspace/sub dir/x.txt", "content": "XX"}]})),
        )
        .await;
    let id = env["id"].as_str().unwrap();
    let (s, files) = h
        .call(
            Method::GET,
            &format!("/v1/environments/{id}/files/workspace?page_size=5&recursive=true"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{files}");
    let paths: Vec<_> = files["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/workspace/a.txt",
            "/workspace/sub dir",
            "/workspace/sub dir/x.txt"
        ]
    );
    let (_, one) = h
        .call(
            Method::GET,
            &format!("/v1/environments/{id}/files/workspace/sub%20dir/x.txt"),
            None,
        )
        .await;
    assert_eq!(
        one["files"],
        json!([{"name": "x.txt", "path": "/workspace/sub dir/x.txt", "type": "file", "size_bytes": "2", "modified": one["files"][0]["modified"]}])
    );
    let (_, root) = h
        .call(Method::GET, &format!("/v1/environments/{id}/files/"), None)
        .await;
    assert_eq!(root["files"][0]["path"], "/workspace");
    let (s, _, bytes) = h
        .raw(
            Method::GET,
            &format!("/v1/environments/{id}/files/workspace/a.txt?alt=media"),
            &[],
            None,
        )
        .await;
    assert_eq!((s, bytes.as_slice()), (StatusCode::OK, b"A".as_slice()));
    let (s, _, body) = h
        .raw(
            Method::GET,
            &format!("/v1/environments/{id}/files/nofile.txt?alt=media"),
            &[],
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["status"], "NOT_FOUND");
    let (s, esc) = h
        .call(
            Method::GET,
            &format!("/v1/environments/{id}/files/workspace/../../x?alt=media"),
            None,
        )
        .await;
    assert!(
        s == StatusCode::BAD_REQUEST || s == StatusCode::NOT_FOUND,
        "{s} {esc}"
    );
}

// The Java SDK posts upload chunks to `X-Goog-Upload-URL` as given (Python swaps in its own
// scheme and host), so behind a TLS-terminating proxy the URL must say https.
#[tokio::test]
async fn upload_url_keeps_the_host_and_the_forwarded_scheme() {
    let h = Harness::new();
    let (_, env) = h
        .call(Method::POST, "/v1beta/environments", Some(json!({})))
        .await;
    let id = env["id"].as_str().unwrap();
    let start = [
        ("x-goog-upload-protocol", "resumable"),
        ("x-goog-upload-command", "start"),
    ];
    let uri = format!("/upload/v1beta/environments/{id}/files/a.txt");
    let url = |headers: HeaderMap| headers["x-goog-upload-url"].to_str().unwrap().to_owned();
    for (extra, prefix) in [
        (
            vec![("host", "hookbox.example:8443")],
            "http://hookbox.example:8443/upload/v1beta/sessions/",
        ),
        (
            vec![("host", "hookbox.example"), ("x-forwarded-proto", "https")],
            "https://hookbox.example/upload/v1beta/sessions/",
        ),
        (
            vec![
                ("host", "hookbox.example"),
                ("forwarded", "for=1.2.3.4;proto=https;host=x"),
            ],
            "https://hookbox.example/upload/v1beta/sessions/",
        ),
        (
            vec![("host", "hookbox.example"), ("x-forwarded-proto", "gopher")],
            "http://hookbox.example/upload/v1beta/sessions/",
        ),
    ] {
        let headers: Vec<(&str, &str)> =
            start.iter().copied().chain(extra.iter().copied()).collect();
        let (s, got, _) = h.raw(Method::PUT, &uri, &headers, None).await;
        assert_eq!(s, StatusCode::OK);
        assert!(
            url(got.clone()).starts_with(prefix),
            "{extra:?}: {}",
            url(got)
        );
    }
}
