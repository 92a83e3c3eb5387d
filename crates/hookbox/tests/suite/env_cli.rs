//! `hookbox env create --network` and the operator's egress flags of `hookbox tool`.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::process::Command;

use super::support::{hookbox_in, text};

#[test]
fn an_invalid_network_is_refused_naming_the_json_path() {
    let data = hookbox_test_support::DataDir::new();
    let out = hookbox_in(
        data.path(),
        &[
            "env",
            "create",
            "--network",
            r#"{"allowlist": [{"domain": "a.example.com"}, {"domain": "b", "credential": 7}]}"#,
        ],
    );
    assert!(!out.status.success());
    insta::assert_snapshot!(text(&out.stderr), @"error: invalid network.allowlist[1].credential: expected a string");
    let list = hookbox_in(data.path(), &["env", "list"]);
    assert_eq!(text(&list.stdout), "");
}

/// One plain-http request on 127.0.0.1: returns the request head it saw.
fn one_request_receiver() -> (u16, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(stream.read(&mut byte).unwrap(), 1);
            head.push(byte[0]);
        }
        stream
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\nconnection: close\r\n\r\nreceived\n",
            )
            .unwrap();
        String::from_utf8(head).unwrap()
    });
    (port, handle)
}

#[test]
fn tool_reaches_a_pinned_receiver_through_the_proxy_with_the_transform_header() {
    let data = hookbox_test_support::DataDir::new();
    let network = data.path().join("network.json");
    std::fs::write(
        &network,
        r#"{"allowlist": [{"domain": "receiver.test", "transform": {"X-Api-Key": "cli-secret-77"}}]}"#,
    )
    .unwrap();
    let created = hookbox_in(
        data.path(),
        &[
            "env",
            "create",
            "--network",
            &format!("@{}", network.display()),
        ],
    );
    assert!(created.status.success(), "{}", text(&created.stderr));
    let id = text(&created.stdout).trim().to_owned();
    let shown = text(&hookbox_in(data.path(), &["env", "show", &id]).stdout);
    assert!(shown.contains(r#""X-Api-Key": "[redacted]""#), "{shown}");
    assert!(!shown.contains("cli-secret-77"));

    let (port, receiver) = one_request_receiver();
    let pin = format!("receiver.test:80=127.0.0.1:{port}");
    let out = hookbox_in(
        data.path(),
        &[
            "tool",
            &id,
            "code_execution",
            "--args",
            r#"{"code": "curl -sS http://receiver.test/hello", "language": "bash"}"#,
            "--egress-allow-cidr",
            "127.0.0.0/8",
            "--egress-resolve",
            &pin,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        outcome["result"]["output"]["stdout"], "received\n",
        "{outcome}"
    );
    let head = receiver.join().unwrap();
    assert!(head.starts_with("GET /hello HTTP/1.1\r\n"), "{head}");
    assert!(head.contains("\r\nx-api-key: cli-secret-77\r\n"), "{head}");
    assert!(!text(&out.stdout).contains("cli-secret-77"));
    assert!(!text(&out.stderr).contains("cli-secret-77"));
}

#[test]
fn env_fork_copies_files_into_a_new_environment() {
    let data = hookbox_test_support::DataDir::new();
    let created = hookbox_in(
        data.path(),
        &[
            "env",
            "create",
            "--disk-limit",
            "0",
            "--source",
            "inline:workspace/a.txt=from parent",
        ],
    );
    assert!(created.status.success(), "{}", text(&created.stderr));
    let parent = text(&created.stdout).trim().to_owned();
    let forked = hookbox_in(data.path(), &["env", "fork", &parent, "--disk-limit", "0"]);
    assert!(forked.status.success(), "{}", text(&forked.stderr));
    let child = text(&forked.stdout).trim().to_owned();
    assert!(child.starts_with("env_") && child != parent, "{child}");
    let out = hookbox_in(
        data.path(),
        &[
            "tool",
            &child,
            "code_execution",
            "--args",
            r#"{"code": "cat /workspace/a.txt; echo changed > /workspace/a.txt", "language": "bash"}"#,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["result"]["output"]["stdout"], "from parent");
    let original = hookbox_in(
        data.path(),
        &[
            "tool",
            &parent,
            "view_file",
            "--args",
            r#"{"path": "/workspace/a.txt"}"#,
        ],
    );
    assert!(
        text(&original.stdout).contains("from parent"),
        "{}",
        text(&original.stdout)
    );
    let missing = hookbox_in(data.path(), &["env", "fork", "env_doesnotexist0000"]);
    assert!(!missing.status.success());
    assert!(
        text(&missing.stderr).contains("no environment"),
        "{}",
        text(&missing.stderr)
    );
}

#[test]
fn env_create_shows_progress_on_a_terminal_and_nothing_when_piped() {
    let data = hookbox_test_support::DataDir::new();
    let args = [
        "env",
        "create",
        "--disk-limit",
        "0",
        "--source",
        "inline:workspace/a.txt=alpha",
        "--source",
        "inline:workspace/b.txt=beta",
    ];
    // Piped: the id on stdout, nothing on stderr.
    let piped = hookbox_in(data.path(), &args);
    assert!(piped.status.success(), "{}", text(&piped.stderr));
    assert!(text(&piped.stdout).trim().starts_with("env_"));
    assert_eq!(text(&piped.stderr), "");
    // On a terminal (util-linux `script` gives the command a pty): the sources are named as
    // they are materialised.
    let command = std::iter::once(env!("CARGO_BIN_EXE_hookbox"))
        .chain(args)
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let tty = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("HOOKBOX_DATA_DIR", data.path())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(tty.status.success(), "{}", text(&tty.stdout));
    let shown = text(&tty.stdout);
    assert!(shown.contains("[2/2]"), "{shown:?}");
    assert!(shown.contains("env_"), "{shown:?}");
}
