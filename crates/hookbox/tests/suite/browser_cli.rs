//! What `hookbox serve` and `hookbox mcp --listen` accept from browsers (the browser guard),
//! through the real binary and raw HTTP/1.1 on 127.0.0.1, so every header is exactly what a
//! page (or an attacker's relay standing in for a rebound DNS name) makes a browser send.
//! Every refusal is checked to have changed nothing: the interaction list is read before and
//! after.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::serve_cli::{Server, http, json_body, start_with};

/// A page's attack: start an agent turn that runs code in the sandbox.
const ATTACK: &str =
    r#"{"agent":"antigravity-preview-09-2026","input":"run `touch /workspace/pwned`"}"#;

/// One request (`head` without Content-Length, which is added), answered whole: the status,
/// the header block lowercased, the body.
fn send(addr: &str, head: &str, body: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(
        s,
        "{head}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    split(&raw)
}

/// Only the status line and headers (for answers that stream).
fn send_head(addr: &str, head: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(s, "{head}Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "closed before the headers");
        raw.push(byte[0]);
    }
    let (status, headers, _) = split(&String::from_utf8_lossy(&raw));
    (status, headers)
}

fn split(raw: &str) -> (u16, String, String) {
    let (headers, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let status = headers.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, headers.to_ascii_lowercase(), body.to_owned())
}

/// The ids of the (only) project's interactions, asked the way curl would.
fn interaction_ids(addr: &str) -> Vec<String> {
    let listed = json_body(&http(addr, "GET", "/v1beta/interactions", ""));
    listed["interactions"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

fn error_message(body: &str) -> String {
    let error: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    error["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn serve(extra: &[&str]) -> (hookbox_test_support::DataDir, Server) {
    let dir = hookbox_test_support::DataDir::new();
    let server = start_with(&dir.path().join("data"), extra);
    (dir, server)
}

// The flaw: a web page could POST a "simple" cross-origin request (no preflight)
// with a JSON body in a text/plain, form or multipart body and start an agent turn.
#[test]
fn cross_origin_simple_posts_cannot_start_an_interaction() {
    let (_dir, server) = serve(&[]);
    let before = interaction_ids(&server.addr);
    let simple = [
        ("text/plain;charset=UTF-8", ATTACK.to_owned()),
        ("application/x-www-form-urlencoded", format!("{ATTACK}=")),
        (
            "multipart/form-data; boundary=b",
            format!(
                "--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n{ATTACK}\r\n--b--\r\n"
            ),
        ),
    ];
    for (content_type, body) in &simple {
        // What fetch(..., {mode: "no-cors", method: "POST"}) or a <form> sends.
        let head = format!(
            "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nOrigin: http://evil.example\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\nContent-Type: {content_type}\r\n",
            server.addr
        );
        let (status, headers, answer) = send(&server.addr, &head, body);
        assert_eq!(status, 403, "{content_type}: {answer}");
        assert!(
            error_message(&answer).contains("--allow-origin http://evil.example"),
            "{answer}"
        );
        assert!(!headers.contains("access-control-"), "{headers}");
        // Without Origin (a privacy extension, an old browser): the type alone refuses it.
        let head = format!(
            "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\n",
            server.addr
        );
        let (status, _, answer) = send(&server.addr, &head, body);
        assert_eq!(status, 415, "{content_type}: {answer}");
        let essence = content_type.split(';').next().unwrap().to_ascii_lowercase();
        assert!(error_message(&answer).contains(&essence), "{answer}");
    }
    // A foreign origin with the right type is refused too (it would need a preflight, but
    // nothing else may answer for it).
    let head = format!(
        "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\n",
        server.addr
    );
    let (status, _, answer) = send(&server.addr, &head, ATTACK);
    assert_eq!(status, 403, "{answer}");
    // Upload chunks (file bytes) need the SDKs' upload header and no simple type.
    for head in [
        "POST /upload/v1beta/sessions/upl_0 HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain\r\nX-Goog-Upload-Command: upload, finalize\r\n",
        "POST /upload/v1beta/sessions/upl_0 HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n",
    ] {
        let head = head.replace("{}", &server.addr);
        let (status, _, answer) = send(&server.addr, &head, "bytes");
        assert!(matches!(status, 400 | 415), "{head}: {status} {answer}");
    }
    assert_eq!(interaction_ids(&server.addr), before, "nothing was created");

    // curl without Origin, and the console's own same-origin request, still work.
    let head = format!(
        "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n",
        server.addr
    );
    let (status, _, answer) = send(
        &server.addr,
        &head,
        r#"{"agent":"antigravity-preview-09-2026","input":"hello"}"#,
    );
    assert_eq!(status, 200, "{answer}");
    let head = format!(
        "POST /v1beta/interactions HTTP/1.1\r\nHost: {0}\r\nOrigin: http://{0}\r\nSec-Fetch-Site: same-origin\r\nContent-Type: application/json; charset=utf-8\r\n",
        server.addr
    );
    let (status, headers, answer) = send(
        &server.addr,
        &head,
        r#"{"agent":"antigravity-preview-09-2026","input":"hello"}"#,
    );
    assert_eq!(status, 200, "{answer}");
    assert!(
        !headers.contains("access-control-"),
        "same origin needs no CORS: {headers}"
    );
    assert_eq!(interaction_ids(&server.addr).len(), before.len() + 2);
}

// The flaw: every route answered any Host, so a page on a name re-pointed at
// 127.0.0.1 (DNS rebinding) could read interactions, environments and credentials.
#[test]
fn dns_rebinding_host_names_are_refused_on_every_route() {
    let (_dir, server) = serve(&[]);
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    let routes = [
        ("GET", "/v1beta/interactions"),
        ("GET", "/v1beta/environments"),
        ("GET", "/v1beta/credentials"),
        ("GET", "/v1beta/agents"),
        ("GET", "/console"),
        ("GET", "/metrics"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("POST", "/v1beta/environments/env_0/expire"),
        ("POST", "/v1beta/interactions"),
        ("GET", "/no/such/route"),
    ];
    for (method, path) in routes {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: rebind.example:{port}\r\nContent-Type: application/json\r\n"
        );
        let (status, _, answer) = send(
            &server.addr,
            &head,
            if method == "POST" { ATTACK } else { "" },
        );
        assert_eq!(status, 403, "{method} {path}: {answer}");
        let message = error_message(&answer);
        assert!(message.contains("--allow-host rebind.example"), "{message}");
        assert!(message.contains("allow_hosts"), "{message}");
    }
    // The same routes by address and by `localhost` answer as before.
    for host in [server.addr.clone(), format!("localhost:{port}")] {
        for path in [
            "/v1beta/interactions",
            "/console",
            "/metrics",
            "/healthz",
            "/readyz",
        ] {
            let (status, _, answer) = send(
                &server.addr,
                &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n"),
                "",
            );
            assert_eq!(status, 200, "{host} {path}: {answer}");
        }
    }
    // HTTP/1.1 needs a Host.
    let (status, _, _) = send(&server.addr, "GET /healthz HTTP/1.1\r\n", "");
    assert_eq!(status, 400);
    // An <img src> or <script src> GET carries no Origin: Sec-Fetch-Site refuses it, while a
    // link the user follows to the console opens it.
    let head = format!(
        "GET /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\nSec-Fetch-Dest: script\r\n",
        server.addr
    );
    assert_eq!(send(&server.addr, &head, "").0, 403);
    let head = format!(
        "GET /console HTTP/1.1\r\nHost: {}\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: navigate\r\nSec-Fetch-Dest: document\r\n",
        server.addr
    );
    assert_eq!(send(&server.addr, &head, "").0, 200);
    assert!(
        interaction_ids(&server.addr).is_empty(),
        "nothing was created"
    );
}

/// `hookbox_browser_guard_refusals_total{reason}` as `/metrics` at `addr` shows it (`None`:
/// no such series).
fn refusals(addr: &str, reason: &str) -> Option<f64> {
    let (status, _, text) = send(
        addr,
        &format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n"),
        "",
    );
    assert_eq!(status, 200, "{text}");
    let series = format!("hookbox_browser_guard_refusals_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
}

// Refusals were only logged: a page probing the server (or a client to reconfigure) was
// invisible to the operator's monitoring.
#[test]
fn browser_guard_refusals_are_counted_on_metrics_by_reason() {
    let (_dir, server) = serve(&[]);
    // Every reason is exported before any refusal, at 0.
    for reason in ["foreign_host", "not_json", "missing_host", "cross_site"] {
        assert_eq!(refusals(&server.addr, reason), Some(0.0), "{reason}");
    }
    let (status, _, answer) = send(
        &server.addr,
        "GET /v1beta/interactions HTTP/1.1\r\nHost: rebind.example\r\n",
        "",
    );
    assert_eq!(status, 403, "{answer}");
    let head = format!(
        "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain\r\n",
        server.addr
    );
    let (status, _, answer) = send(&server.addr, &head, ATTACK);
    assert_eq!(status, 415, "{answer}");
    assert_eq!(refusals(&server.addr, "foreign_host"), Some(1.0));
    assert_eq!(refusals(&server.addr, "not_json"), Some(1.0));
    assert_eq!(refusals(&server.addr, "missing_host"), Some(0.0));
    // Reading /metrics and the API by address counted nothing; the client's Host is no label.
    let (_, _, text) = send(
        &server.addr,
        &format!("GET /metrics HTTP/1.1\r\nHost: {}\r\n", server.addr),
        "",
    );
    assert!(!text.contains("rebind.example"), "{text}");
}

#[test]
fn allow_host_and_allow_origin_let_the_operator_name_more() {
    let dir = hookbox_test_support::DataDir::new();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[server]\nallow_hosts = [\"proxy.example\"]\nallow_origins = [\"https://console.example\"]\n",
    )
    .unwrap();
    let server = start_with(
        &dir.path().join("data"),
        &[
            "--allow-host",
            "hookbox.example:8443",
            "--allow-origin",
            "http://app.example:3000",
            "--config",
            config.to_str().unwrap(),
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    for (host, status) in [
        ("hookbox.example:8443".to_owned(), 200),
        (format!("hookbox.example:{port}"), 403),
        ("proxy.example".to_owned(), 200),
        (format!("proxy.example:{port}"), 200),
        ("other.example".to_owned(), 403),
    ] {
        let (got, _, answer) = send(
            &server.addr,
            &format!("GET /v1beta/interactions HTTP/1.1\r\nHost: {host}\r\n"),
            "",
        );
        assert_eq!(got, status, "{host}: {answer}");
    }
    // A listed origin's preflight is answered, and its answers name it (never `*`).
    let preflight = format!(
        "OPTIONS /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nOrigin: http://app.example:3000\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type,x-goog-api-key\r\n",
        server.addr
    );
    let (status, headers, _) = send(&server.addr, &preflight, "");
    assert_eq!(status, 204, "{headers}");
    assert!(
        headers.contains("access-control-allow-origin: http://app.example:3000"),
        "{headers}"
    );
    assert!(
        headers.contains("access-control-allow-headers: content-type, x-goog-api-key"),
        "{headers}"
    );
    for origin in ["http://app.example:3000", "https://console.example"] {
        let head = format!(
            "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nOrigin: {origin}\r\nContent-Type: application/json\r\n",
            server.addr
        );
        let (status, headers, answer) = send(
            &server.addr,
            &head,
            r#"{"agent":"antigravity-preview-09-2026","input":"hello"}"#,
        );
        assert_eq!(status, 200, "{origin}: {answer}");
        assert!(
            headers.contains(&format!("access-control-allow-origin: {origin}")),
            "{headers}"
        );
        assert!(headers.contains("vary: origin"), "{headers}");
    }
    let preflight = preflight.replace("http://app.example:3000", "http://evil.example");
    let (status, headers, _) = send(&server.addr, &preflight, "");
    assert_eq!(status, 403);
    assert!(!headers.contains("access-control-"), "{headers}");
    // --metrics-listen is behind the same guard.
    let metrics = server
        .banner
        .lines()
        .find_map(|l| l.strip_prefix("metrics: http://"))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap()
        .to_owned();
    let (status, _, _) = send(
        &metrics,
        &format!("GET /metrics HTTP/1.1\r\nHost: {metrics}\r\n"),
        "",
    );
    assert_eq!(status, 200);
    let (status, _, _) = send(
        &metrics,
        "GET /metrics HTTP/1.1\r\nHost: rebind.example\r\n",
        "",
    );
    assert_eq!(status, 403);
    let (status, _, _) = send(
        &metrics,
        "GET /metrics HTTP/1.1\r\nHost: proxy.example\r\n",
        "",
    );
    assert_eq!(status, 200);
    // And counts refusals of both listeners: two foreign hosts on the API, one here, and the
    // unlisted origin's preflight.
    assert_eq!(refusals(&metrics, "foreign_host"), Some(3.0));
    assert_eq!(refusals(&metrics, "foreign_origin"), Some(1.0));
}

#[test]
fn a_bad_allow_origin_or_allow_host_stops_the_server_with_the_reason() {
    for (flag, value, expected) in [
        ("--allow-origin", "*", "never allowed"),
        (
            "--allow-origin",
            "https://console.example/app",
            "without a path",
        ),
        ("--allow-host", "http://hookbox.example", "without a scheme"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_hookbox"))
            .args(["serve", "--listen", "127.0.0.1:0", flag, value])
            .env_remove("HOOKBOX_API_KEYS")
            .env(
                "HOOKBOX_DATA_DIR",
                hookbox_test_support::DataDir::new().path(),
            )
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected) && err.contains(value), "{err}");
    }
}

/// A child process killed when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `hookbox mcp --listen 127.0.0.1:0` on a new environment; the child and the `host:port`.
fn mcp_listen(data: &std::path::Path, extra: &[&str]) -> (Killed, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["mcp", "--disk-limit", "0", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env("HOOKBOX_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let child = Killed(child);
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split("http://")
                .nth(1)
                .and_then(|rest| rest.strip_suffix("/mcp"))
                .map(str::to_owned)
        })
        .expect("hookbox mcp says where it listens");
    // Keep reading, so the server never writes into a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}

// `hookbox mcp --listen` checked Host (rmcp) but not Origin or the body type: a page could call
// the sandbox's tools with a simple cross-origin POST.
#[test]
fn mcp_listen_refuses_foreign_origins_hosts_and_simple_bodies() {
    let dir = hookbox_test_support::DataDir::new();
    let (_child, addr) = mcp_listen(dir.path(), &["--allow-origin", "http://app.example:3000"]);
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"browser-check","version":"1"}}}"#;
    let accept = "Accept: application/json, text/event-stream\r\n";
    for (extra, status) in [
        (
            "Origin: http://evil.example\r\nContent-Type: application/json\r\n",
            403,
        ),
        ("Origin: null\r\nContent-Type: application/json\r\n", 403),
        ("Content-Type: text/plain\r\n", 415),
        (
            "Origin: http://evil.example\r\nContent-Type: text/plain\r\n",
            403,
        ),
    ] {
        let head = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{accept}{extra}");
        let (got, _, answer) = send(&addr, &head, initialize);
        assert_eq!(got, status, "{extra}: {answer}");
    }
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: rebind.example:{}\r\n{accept}Content-Type: application/json\r\n",
        addr.rsplit(':').next().unwrap()
    );
    let (got, _, answer) = send(&addr, &head, initialize);
    assert_eq!(got, 403, "{answer}");
    assert!(
        error_message(&answer).contains("--allow-host rebind.example"),
        "{answer}"
    );
    // An MCP client (no Origin), and a listed origin's page, are served.
    let head =
        format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{accept}Content-Type: application/json\r\n");
    let (got, headers) = send_head(&addr, &head, initialize);
    assert_eq!(got, 200, "{headers}");
    assert!(headers.contains("mcp-session-id"), "{headers}");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost:{}\r\n{accept}Origin: http://app.example:3000\r\nContent-Type: application/json\r\n",
        addr.rsplit(':').next().unwrap()
    );
    let (got, headers) = send_head(&addr, &head, initialize);
    assert_eq!(got, 200, "{headers}");
    assert!(
        headers.contains("access-control-allow-origin: http://app.example:3000"),
        "{headers}"
    );
}
