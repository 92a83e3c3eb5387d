//! Answers a client can act on, through the real server: a credential that does not exist is
//! refused at create (naming the field), one deleted later is named where egress refuses it,
//! every 429 says when to retry, and a store that does not answer is a 503 with `Retry-After`.

use std::net::TcpListener;

use super::serve_cli::{http, json_body, start_with};

const AGENT: &str = "antigravity-preview-09-2026";

fn header<'a>(resp: &'a str, name: &str) -> Option<&'a str> {
    let head = resp.split("\r\n\r\n").next()?;
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn missing_credentials_are_refused_at_create_and_a_deleted_one_is_named() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let log = dir.path().join("audit.jsonl");
    // Egress for api.creds.test can only ever reach this loopback port (held, never served).
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let pin = format!(
        "api.creds.test:443=127.0.0.1:{}",
        sink.local_addr().unwrap().port()
    );
    let server = start_with(
        &data,
        &[
            "--audit-log",
            log.to_str().unwrap(),
            "--egress-allow-cidr",
            "127.0.0.0/8",
            "--egress-resolve",
            &pin,
        ],
    );
    let network = serde_json::json!({"allowlist": [
        {"domain": "pypi.creds.test"},
        {"domain": "api.creds.test", "credential": "tok"},
    ]});
    let refused = http(
        &server.addr,
        "POST",
        "/v1beta/environments",
        &serde_json::json!({"network": network}).to_string(),
    );
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    let error = &json_body(&refused)["error"];
    assert_eq!(error["status"], "INVALID_ARGUMENT");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("`network.allowlist[1].credential`"),
        "{message}"
    );
    assert!(message.contains("`tok`"), "{message}");
    let refused = http(
        &server.addr,
        "POST",
        "/v1beta/interactions",
        &serde_json::json!({"agent": AGENT, "input": "hi", "environment": {"network": network}})
            .to_string(),
    );
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    assert!(
        refused.contains("`environment.network.allowlist[1].credential`"),
        "{refused}"
    );
    let listed = http(&server.addr, "GET", "/v1beta/environments", "");
    assert!(listed.starts_with("HTTP/1.1 200"), "{listed}");
    let envs = json_body(&listed);
    assert!(
        envs["environments"].as_array().is_none_or(Vec::is_empty),
        "a refused create made an environment: {envs}"
    );

    // With the credential it is accepted; deleted later, egress refuses its domain and says why.
    let made = http(
        &server.addr,
        "POST",
        "/v1beta/credentials",
        r#"{"id": "tok", "type": "bearer_token", "token": "tok-secret-value"}"#,
    );
    assert!(made.starts_with("HTTP/1.1 200"), "{made}");
    let env = json_body(&http(
        &server.addr,
        "POST",
        "/v1beta/environments",
        &serde_json::json!({"network": network}).to_string(),
    ));
    let env = env["id"].as_str().unwrap().to_owned();
    // Positive control for the empty listing above: the same listing shows an environment made.
    let listed = json_body(&http(&server.addr, "GET", "/v1beta/environments", ""));
    let ids: Vec<&str> = listed["environments"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert_eq!(ids, [env.as_str()], "{listed}");
    let gone = http(&server.addr, "DELETE", "/v1beta/credentials/tok", "");
    assert!(gone.starts_with("HTTP/1.1 200"), "{gone}");
    let ran = json_body(&http(
        &server.addr,
        "POST",
        "/v1beta/interactions",
        &serde_json::json!({"agent": AGENT, "environment": env,
            "input": "run `curl -sS https://api.creds.test/ 2>&1; echo rc=$?`"})
        .to_string(),
    ));
    let text = ran.to_string();
    assert!(text.contains("403"), "{text}");
    assert!(!text.contains("rc=0"), "{text}");
    let audit = std::fs::read_to_string(&log).unwrap();
    let line: serde_json::Value = audit
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|l| l["kind"] == "egress" && l["host"] == "api.creds.test")
        .unwrap_or_else(|| panic!("no egress line for the host: {audit}"));
    assert_eq!(line["decision"], "blocked", "{line}");
    assert_eq!(line["rule"], "credential-unavailable", "{line}");
    assert_eq!(line["credential"], "tok", "{line}");
    assert_eq!(line["project"], "default", "{line}");
    assert_eq!(line["environment"], env.as_str(), "{line}");
    assert!(!audit.contains("tok-secret-value"));
}

#[test]
fn every_429_says_when_to_retry() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let config = dir.path().join("config.toml");
    // Three requests, then one token per 100 s; one interaction at a time.
    std::fs::write(
        &config,
        "[quotas]\nrequests_per_second = 0.01\nburst = 3\nrunning_interactions = 1\n",
    )
    .unwrap();
    let server = start_with(&data, &["--config", config.to_str().unwrap()]);
    // The first interaction holds the one slot for the whole test (it is killed with the server).
    let body = format!(r#"{{"agent":"{AGENT}","input":"run `sleep 600`","background":true}}"#);
    let first = http(&server.addr, "POST", "/v1beta/interactions", &body);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let second = http(&server.addr, "POST", "/v1beta/interactions", &body);
    assert!(second.starts_with("HTTP/1.1 429"), "{second}");
    assert!(second.contains("running_interactions"), "{second}");
    assert_eq!(header(&second, "retry-after"), Some("2"), "{second}");
    let third = http(&server.addr, "GET", "/v1beta/environments", "");
    assert!(third.starts_with("HTTP/1.1 200"), "{third}");
    let limited = http(&server.addr, "GET", "/v1beta/environments", "");
    assert!(limited.starts_with("HTTP/1.1 429"), "{limited}");
    assert!(limited.contains("requests_per_second"), "{limited}");
    let wait: u32 = header(&limited, "retry-after")
        .unwrap_or_else(|| panic!("{limited}"))
        .parse()
        .unwrap();
    // The bucket is empty: a whole token is 100 s away (a little less as time passes).
    assert!((90..=100).contains(&wait), "{wait}");
}

#[test]
#[ignore = "starts and stops its own PostgreSQL cluster (scripts/postgres.sh); run by scripts/test.sh"]
fn postgres_down_is_a_503_with_retry_after() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres.sh");
    let started = std::process::Command::new(&script)
        .arg("start")
        .output()
        .unwrap();
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let url = String::from_utf8(started.stdout).unwrap().trim().to_owned();
    let dir = hookbox_test_support::DataDir::new();
    let server = start_with(&dir.path().join("data"), &["--database", &url]);
    let ok = http(&server.addr, "GET", "/v1beta/interactions", "");
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let stopped = std::process::Command::new(&script)
        .args(["stop", &url])
        .status()
        .unwrap();
    assert!(stopped.success());
    let body = format!(r#"{{"agent":"{AGENT}","input":"hello"}}"#);
    let resp = http(&server.addr, "POST", "/v1beta/interactions", &body);
    assert!(resp.starts_with("HTTP/1.1 503"), "{resp}");
    assert_eq!(json_body(&resp)["error"]["status"], "UNAVAILABLE", "{resp}");
    assert!(header(&resp, "retry-after").is_some(), "{resp}");
    let ready = http(&server.addr, "GET", "/readyz", "");
    assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
}
