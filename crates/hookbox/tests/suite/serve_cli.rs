//! `hookbox serve` as a real process: the banner, local-mode refusal of public addresses, and a
//! SIGKILL mid-interaction followed by a restart that marks the interaction failed and finds its
//! environment intact.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

struct Server {
    child: Child,
    addr: String,
    banner: String,
}

fn start(data_dir: &std::path::Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .env_remove("HOOKBOX_API_KEYS")
        .env_remove("GEMINI_API_KEY")
        .env_remove("HOOKBOX_OPENAI_BASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut banner = String::new();
    // The banner ends with the env-var hint; it is printed once the socket is bound.
    for line in lines.by_ref() {
        let line = line.unwrap();
        banner.push_str(&line);
        banner.push('\n');
        if line.starts_with("or set ") {
            break;
        }
    }
    let addr = banner
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    Server {
        child,
        addr,
        banner,
    }
}

/// One HTTP/1.1 request; returns the raw response (headers and body).
fn http(addr: &str, method: &str, path: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn banner_says_where_and_how_to_connect() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path());
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    let banner = server
        .banner
        .replace(&dir.path().display().to_string(), "[DATA]")
        .replace(&port, "[PORT]");
    insta::assert_snapshot!(banner);
    let resp = http(&server.addr, "GET", "/v1/environments", "");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
}

#[test]
fn refuses_public_address_without_keys() {
    let out = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("HOOKBOX_API_KEYS")
        .env("HOOKBOX_DATA_DIR", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing 0.0.0.0:0"), "{err}");
}

#[test]
fn environment_cache_flags_are_accepted_and_a_zero_cap_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--max-open-environments", "0"])
        .env("HOOKBOX_DATA_DIR", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max-open-environments"), "{err}");
    // Valid values get past argument parsing (and then stop at the public address).
    let out = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .args(["--env-idle-timeout", "30", "--max-open-environments", "4"])
        .env_remove("HOOKBOX_API_KEYS")
        .env("HOOKBOX_DATA_DIR", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing 0.0.0.0:0"), "{err}");
}

#[test]
fn sigkill_mid_interaction_then_restart_marks_it_failed() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(&dir.path().join("data"));
    // The command runs in the sandbox until hookbox dies (the sandbox dies with it).
    let body =
        r#"{"agent":"antigravity-preview-09-2026","input":"run `sleep 600`","background":true}"#;
    let resp = http(&server.addr, "POST", "/v1beta/interactions", body);
    let json: serde_json::Value =
        serde_json::from_str(resp.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let id = json["id"].as_str().unwrap().to_owned();
    let env_id = json["environment_id"].as_str().unwrap().to_owned();

    // Follow the stream until the command is running (its call step is stored before it runs).
    let mut s = TcpStream::connect(&server.addr).unwrap();
    write!(
        s,
        "GET /v1beta/interactions/{id}?stream=true HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("code_execution_call") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "stream ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();

    let mut server = start(&dir.path().join("data"));
    let resp = http(
        &server.addr,
        "GET",
        &format!("/v1beta/interactions/{id}?stream=false"),
        "",
    );
    let json: serde_json::Value =
        serde_json::from_str(resp.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(json["status"], "failed", "{json}");
    assert!(
        json["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("hookbox stopped")
    );
    assert_eq!(json["steps"][1]["type"], "code_execution_call");
    // The environment survived the crash and is usable again.
    let resp = http(
        &server.addr,
        "GET",
        &format!("/v1beta/environments/{env_id}/files/?recursive=true"),
        "",
    );
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("\"/workspace\""), "{resp}");
    let body = format!(
        r#"{{"agent":"antigravity-preview-09-2026","input":"run `echo again`","environment":"{env_id}"}}"#
    );
    let resp = http(&server.addr, "POST", "/v1beta/interactions", &body);
    // The answer (not just the echoed input): the command ran in the sandbox.
    assert!(resp.contains(r"Ran `echo again`:\nagain"), "{resp}");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
}
