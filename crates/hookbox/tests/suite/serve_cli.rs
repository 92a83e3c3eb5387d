//! `hookbox serve` as a real process: the banner, local-mode refusal of public addresses, and a
//! SIGKILL mid-interaction followed by a restart that marks the interaction failed and finds its
//! environment intact.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

pub(super) struct Server {
    pub(super) child: Child,
    pub(super) addr: String,
    pub(super) banner: String,
}

impl Drop for Server {
    /// A failed assertion must not leave the server (and its environments' mounts) behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn start(data_dir: &std::path::Path) -> Server {
    start_with(data_dir, &[])
}

pub(super) fn start_with(data_dir: &std::path::Path, extra: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(extra)
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
        .lines()
        .find_map(|l| l.strip_prefix("hookbox is listening on http://"))
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
pub(super) fn http(addr: &str, method: &str, path: &str, body: &str) -> String {
    http_key(addr, method, path, body, None)
}

/// [`http`] with an `x-goog-api-key`.
pub(super) fn http_key(
    addr: &str,
    method: &str,
    path: &str,
    body: &str,
    key: Option<&str>,
) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    let key = key
        .map(|k| format!("x-goog-api-key: {k}\r\n"))
        .unwrap_or_default();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{key}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn banner_says_where_and_how_to_connect() {
    let dir = hookbox_test_support::DataDir::new();
    let mut server = start(dir.path());
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    let banner = server
        .banner
        .replace(&dir.path().display().to_string(), "[DATA]")
        .replace(&port, "[PORT]");
    // The runtime line says what this run of the suite asked for (HOOKBOX_RUNTIME).
    let runtime = banner
        .lines()
        .find(|l| l.starts_with("runtime: "))
        .unwrap_or_default()
        .to_owned();
    if std::env::var("HOOKBOX_RUNTIME").as_deref() == Ok("gvisor") {
        assert!(
            runtime.starts_with("runtime: gvisor (runsc release "),
            "{runtime}"
        );
    } else {
        assert_eq!(runtime, "runtime: namespaces");
    }
    let banner = banner.replace(&runtime, "runtime: [RUNTIME]");
    insta::assert_snapshot!(banner);
    let resp = http(&server.addr, "GET", "/v1/environments", "");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
}

#[test]
fn refuses_public_address_without_keys() {
    // Each address is tried in a network namespace of the test's own, with the address on its
    // loopback: nothing there leads off the machine. The port is taken beforehand by the
    // process that becomes `hookbox serve` (the socket stays open across exec), so a server
    // that bound before checking would fail with "cannot listen" instead of refusing.
    if !hookbox_test_require::root("a network namespace of its own (unshare --net)") {
        return;
    }
    const HOLD_PORT: &str = "import os, socket, sys\n\
host, port = sys.argv[1].rsplit(':', 1)\n\
host = host.strip('[]')\n\
s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET)\n\
s.bind((host, int(port)))\n\
s.listen()\n\
os.set_inheritable(s.fileno(), True)\n\
os.execv(sys.argv[2], sys.argv[2:])\n";
    for (listen, ip) in [
        ("0.0.0.0:18080", None),
        ("[::]:18080", None),
        ("10.20.30.40:18080", Some("10.20.30.40")),
        ("192.168.77.1:18080", Some("192.168.77.1")),
        ("100.64.0.9:18080", Some("100.64.0.9")),
        ("203.0.113.9:18080", Some("203.0.113.9")),
        ("8.8.8.8:18080", Some("8.8.8.8")),
    ] {
        let data = hookbox_test_support::DataDir::new();
        let add = ip
            .map(|ip| format!("ip addr add {ip}/32 dev lo && "))
            .unwrap_or_default();
        let mut child = Command::new("unshare")
            .args(["--net", "--", "sh", "-c"])
            .arg(format!(
                "ip link set lo up && {add}exec python3 -c \"$2\" \"$1\" \"$0\" serve --listen \"$1\""
            ))
            .arg(env!("CARGO_BIN_EXE_hookbox"))
            .arg(listen)
            .arg(HOLD_PORT)
            .env_remove("HOOKBOX_API_KEYS")
            .env("HOOKBOX_DATA_DIR", data.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Bounded: a server that did not refuse would serve until killed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("`hookbox serve --listen {listen}` without keys did not refuse");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(!status.success(), "{listen}: {err}");
        assert!(
            err.contains(&format!("refusing {listen}")),
            "{listen}: {err}"
        );
        assert!(err.contains("HOOKBOX_API_KEYS"), "{listen}: {err}");
        assert!(err.contains("--api-key"), "{listen}: {err}");
        assert!(!err.contains("cannot listen"), "{listen}: {err}");
    }
}

#[test]
fn environment_cache_flags_are_accepted_and_a_zero_cap_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--max-open-environments", "0"])
        .env(
            "HOOKBOX_DATA_DIR",
            hookbox_test_support::DataDir::new().path(),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max-open-environments"), "{err}");
    // Valid values get past argument parsing (and then stop at the public address).
    let out = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .args(["--env-idle-timeout", "30", "--max-open-environments", "4"])
        .env_remove("HOOKBOX_API_KEYS")
        .env(
            "HOOKBOX_DATA_DIR",
            hookbox_test_support::DataDir::new().path(),
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing 0.0.0.0:0"), "{err}");
}

#[test]
fn sigkill_mid_interaction_then_restart_marks_it_failed() {
    let dir = hookbox_test_support::DataDir::new();
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
        "GET /v1beta/interactions/{id}?stream=true HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.addr
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

fn cli(data_dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// The JSON body of a raw response. Panics when there is none: a check on a field of a body
/// that is not JSON must fail, not compare against `null`.
pub(super) fn json_body(resp: &str) -> serde_json::Value {
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("the body is not JSON ({e}): {resp}"))
}

#[test]
fn managed_keys_and_a_config_disk_cap_through_the_real_server() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    // A project and a key made with the CLI, before the server starts.
    let made = cli(
        &data,
        &["project", "create", "ops", "--quota", "environments=3"],
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let created = cli(&data, &["key", "create", "--project", "ops"]);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let key = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    assert!(key.starts_with("hbk_"), "{key}");
    let listed = String::from_utf8(cli(&data, &["key", "list"]).stdout).unwrap();
    assert!(listed.contains("ops") && !listed.contains(&key), "{listed}");
    let key_id = listed.split('\t').next().unwrap().to_owned();

    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, "[quotas]\ndisk_bytes_per_environment = 33554432\n").unwrap();
    let mut server = start_with(&data, &["--config", config.to_str().unwrap()]);
    assert!(
        server.banner.contains("API keys required"),
        "{}",
        server.banner
    );
    let resp = http(&server.addr, "GET", "/v1beta/environments", "");
    assert!(
        resp.starts_with("HTTP/1.1 401"),
        "keys exist, so no local mode: {resp}"
    );

    // dd in code_execution meets the 32 MiB cap of the config file.
    let body = r#"{"agent":"antigravity-preview-09-2026","input":"run `dd if=/dev/zero of=/workspace/fill bs=1M count=64`"}"#;
    let resp = http_key(
        &server.addr,
        "POST",
        "/v1beta/interactions",
        body,
        Some(&key),
    );
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("No space left on device"), "{resp}");
    let env_id = json_body(&resp)["environment_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = http_key(
        &server.addr,
        "GET",
        &format!("/v1beta/environments/{env_id}"),
        "",
        Some(&key),
    );
    assert!(shown.starts_with("HTTP/1.1 200"), "{shown}");

    // The project's stored quota override (3 environments) applies: one exists, two more fit.
    for _ in 0..2 {
        let r = http_key(
            &server.addr,
            "POST",
            "/v1beta/environments",
            "{}",
            Some(&key),
        );
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    let r = http_key(
        &server.addr,
        "POST",
        "/v1beta/environments",
        "{}",
        Some(&key),
    );
    assert!(
        r.starts_with("HTTP/1.1 429") && r.contains("environments"),
        "{r}"
    );

    // Revoking the key locks it out at once, without a restart.
    let revoked = cli(&data, &["key", "revoke", &key_id]);
    assert!(
        revoked.status.success(),
        "{}",
        String::from_utf8_lossy(&revoked.stderr)
    );
    let resp = http_key(&server.addr, "GET", "/v1beta/environments", "", Some(&key));
    assert!(resp.starts_with("HTTP/1.1 401"), "{resp}");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    // A project with environments is not removed.
    let rm = cli(&data, &["project", "rm", "ops"]);
    assert!(!rm.status.success());
    assert!(String::from_utf8_lossy(&rm.stderr).contains("still holds"));
}

/// The SSE events (their `data:` JSON) in `raw`, a chunked HTTP response read so far.
fn sse_datas(raw: &str) -> Vec<serde_json::Value> {
    raw.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

#[test]
fn code_execution_output_reaches_the_stream_while_the_code_runs() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let server = start(&data);
    // The code prints, then waits (bounded) for a file that this test creates only once the
    // stream has shown what was printed; then prints again.
    let code = "echo first; i=0; until [ -e /workspace/go ] || [ $i -ge 2400 ]; do sleep 0.05; i=$((i+1)); done; echo second";
    let body = serde_json::json!({
        "agent": "antigravity-preview-09-2026",
        "input": format!("run `{code}`"),
        "stream": true,
    })
    .to_string();
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    write!(s, "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", server.addr, body.len()).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let piece = loop {
        let n = s.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "stream ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some(piece) = sse_datas(&text)
            .into_iter()
            .find(|e| e["event_type"] == "step.delta" && e["delta"]["result"] == "first\n")
        {
            break piece;
        }
    };
    // A piece of running output: outside the main numbering, `<start>.<end offset>`.
    let piece_id = piece["event_id"].as_str().unwrap().to_owned();
    let (start_id, end) = piece_id.split_once('.').expect("a piece id");
    assert_eq!(end, "6");
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        !sse_datas(&text)
            .iter()
            .any(|e| e["event_type"] == "step.delta"
                && e["delta"]["result"]
                    .as_str()
                    .is_some_and(|r| r.contains("second"))),
        "the code already finished: {text}"
    );
    let created = sse_datas(&text)
        .into_iter()
        .find(|e| e["event_type"] == "interaction.created")
        .unwrap();
    let id = created["interaction"]["id"].as_str().unwrap().to_owned();
    let env_id = created["interaction"]["environment_id"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(
        data.join("environments")
            .join(&env_id)
            .join("root/workspace/go"),
        "",
    )
    .unwrap();
    while !String::from_utf8_lossy(&seen).contains("data: [DONE]") {
        let n = s.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "stream ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&seen).into_owned();
    let events = sse_datas(&text);
    // The step's own delta brings only the rest; pieces and delta add up to the stored result.
    let step_start = events.iter().find(|e| e["event_id"] == start_id).unwrap();
    assert_eq!(step_start["event_type"], "step.start");
    assert_eq!(step_start["step"]["type"], "code_execution_result");
    let index = step_start["index"].clone();
    let deltas: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event_type"] == "step.delta" && e["index"] == index)
        .collect();
    let streamed: String = deltas
        .iter()
        .map(|e| e["delta"]["result"].as_str().unwrap())
        .collect();
    let resp = http(
        &server.addr,
        "GET",
        &format!("/v1beta/interactions/{id}"),
        "",
    );
    let stored = json_body(&resp);
    let index = index.as_u64().unwrap() as usize;
    assert_eq!(stored["steps"][index]["result"], "first\nsecond\n");
    assert_eq!(streamed, "first\nsecond\n");
    // Resuming after the piece gives the rest of that output, not all of it again.
    let resp = http(
        &server.addr,
        "GET",
        &format!("/v1beta/interactions/{id}?stream=true&last_event_id={piece_id}"),
        "",
    );
    let resumed = sse_datas(&resp);
    assert_eq!(resumed[0]["event_type"], "step.delta", "{resp}");
    assert_eq!(resumed[0]["delta"]["result"], "second\n");
}

/// A GET stream of interaction `id` on a new connection.
fn open_stream(addr: &str, id: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    write!(s, "GET /v1beta/interactions/{id}?stream=true HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    s
}

/// Reads `s` until one of its events passes `found`; panics if it ends first. What was read.
fn read_until_event(s: &mut TcpStream, found: impl Fn(&serde_json::Value) -> bool) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&seen).into_owned();
        assert!(n > 0, "stream ended first: {text}");
        seen.extend_from_slice(&buf[..n]);
        if sse_datas(&String::from_utf8_lossy(&seen))
            .iter()
            .any(&found)
        {
            return seen;
        }
    }
}

#[test]
fn a_stream_opened_while_code_runs_starts_with_its_output_so_far() {
    // #31: the console opened on a running call showed none of its output until the call
    // ended: a stream that joined after the first piece went out got nothing before the step.
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let server = start(&data);
    let code = "echo first; i=0; until [ -e /workspace/go ] || [ $i -ge 2400 ]; do sleep 0.05; i=$((i+1)); done; echo second";
    let created = post_json(
        &server.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": "antigravity-preview-09-2026", "input": format!("run `{code}`"), "background": true}),
    );
    let id = created["id"].as_str().unwrap().to_owned();
    let env_id = created["environment_id"].as_str().unwrap().to_owned();
    let first_piece = |e: &serde_json::Value| {
        e["event_type"] == "step.delta" && e["delta"]["result"] == "first\n"
    };
    // A first stream sees the piece go out, so it went out before the second one subscribes.
    let mut early = open_stream(&server.addr, &id);
    read_until_event(&mut early, first_piece);
    let mut late = open_stream(&server.addr, &id);
    let seen = read_until_event(&mut late, first_piece);
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        !sse_datas(&text)
            .iter()
            .any(|e| e["event_type"] == "step.delta"
                && e["delta"]["result"]
                    .as_str()
                    .is_some_and(|r| r.contains("second"))),
        "the code already finished: {text}"
    );
    std::fs::write(
        data.join("environments")
            .join(&env_id)
            .join("root/workspace/go"),
        "",
    )
    .unwrap();
    let text = read_stream(&mut late, seen, "data: [DONE]");
    let events = sse_datas(&text);
    let start = events
        .iter()
        .find(|e| e["event_type"] == "step.start" && e["step"]["type"] == "code_execution_result")
        .unwrap();
    // The output so far, then the rest with the step: the stored result, each byte once.
    let streamed: String = events
        .iter()
        .filter(|e| e["event_type"] == "step.delta" && e["index"] == start["index"])
        .map(|e| e["delta"]["result"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "first\nsecond\n", "{text}");
}

/// A fresh database on the test cluster (`HOOKBOX_TEST_POSTGRES_URL`, which scripts/test.sh
/// starts); its URL.
pub(super) fn fresh_database() -> String {
    let base = std::env::var("HOOKBOX_TEST_POSTGRES_URL")
        .expect("HOOKBOX_TEST_POSTGRES_URL (scripts/postgres.sh start prints one)");
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let name = format!("hb_e2e_{}_{n}", std::process::id());
    let out = Command::new("psql")
        .arg(&base)
        .args(["-qc", &format!("CREATE DATABASE {name}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("{}/{name}", base.rsplit_once('/').unwrap().0)
}

pub(super) fn post_json(addr: &str, path: &str, body: &serde_json::Value) -> serde_json::Value {
    let resp = http(addr, "POST", path, &body.to_string());
    let json = json_body(&resp);
    assert!(!json.is_null(), "{resp}");
    json
}

/// Reads an SSE response on `s` until `data: [DONE]`; returns everything read.
fn read_stream(s: &mut TcpStream, mut seen: Vec<u8>, until: &str) -> String {
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains(until) {
        let n = s.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "stream ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a PostgreSQL cluster)"]
fn two_replicas_share_one_database_and_one_survives_the_other() {
    let database = fresh_database();
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let replica_args = [
        "--database",
        database.as_str(),
        "--cluster-secret",
        "a-cluster-secret-for-tests",
        "--lease-ttl",
        "2",
    ];
    let mut a = start_with(&data, &replica_args);
    let b = start_with(&data, &replica_args);
    let agent = "antigravity-preview-09-2026";

    // Created on A (its environment is A's); read and continued on B, which forwards the
    // continuation to A, the environment's holder.
    let first = post_json(
        &a.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": agent, "input": "run `echo from-a > /workspace/a.txt; echo done`"}),
    );
    assert_eq!(first["status"], "completed", "{first}");
    let id = first["id"].as_str().unwrap();
    let env = first["environment_id"].as_str().unwrap().to_owned();
    let on_b = json_body(&http(
        &b.addr,
        "GET",
        &format!("/v1beta/interactions/{id}"),
        "",
    ));
    assert_eq!(on_b["steps"], first["steps"]);
    let served_by = |resp: &str| {
        resp.lines()
            .find_map(|l| l.strip_prefix("x-hookbox-replica: "))
            .map(str::trim)
            .map(str::to_owned)
    };
    let resp_a = http(&a.addr, "GET", "/v1beta/environments", "");
    let resp_b = http(&b.addr, "GET", "/v1beta/environments", "");
    let (replica_a, replica_b) = (served_by(&resp_a).unwrap(), served_by(&resp_b).unwrap());
    assert_ne!(replica_a, replica_b);
    let continued = http(
        &b.addr,
        "POST",
        "/v1beta/interactions",
        &serde_json::json!({"agent": agent, "input": "run `cat /workspace/a.txt`", "previous_interaction_id": id}).to_string(),
    );
    // B handed it to A, which holds the environment, and relayed A's answer.
    assert_eq!(
        served_by(&continued).as_deref(),
        Some(replica_a.as_str()),
        "{continued}"
    );
    let second = json_body(&continued);
    assert_eq!(second["status"], "completed", "{second}");
    assert_eq!(second["environment_id"], env.as_str());
    assert!(second.to_string().contains("from-a"), "{second}");
    // The environment's files, listed and uploaded through B, are served by A, which holds it.
    let listed = http(
        &b.addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace"),
        "",
    );
    assert_eq!(
        served_by(&listed).as_deref(),
        Some(replica_a.as_str()),
        "{listed}"
    );
    assert!(listed.contains("a.txt"), "{listed}");
    let raw = |addr: &str, head: &str, body: &str| {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "{head}Host: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let started = raw(
        &b.addr,
        &format!(
            "PUT /upload/v1beta/environments/{env}/files/workspace/up.txt HTTP/1.1\r\nx-goog-upload-protocol: resumable\r\nx-goog-upload-command: start\r\n"
        ),
        "",
    );
    let session_url = started
        .lines()
        .find_map(|l| l.strip_prefix("x-goog-upload-url: "))
        .unwrap_or_else(|| panic!("{started}"))
        .trim()
        .to_owned();
    let session_path = format!("/upload{}", session_url.split("/upload").nth(1).unwrap());
    let finished = raw(
        &b.addr,
        &format!(
            "POST {session_path} HTTP/1.1\r\nx-goog-upload-command: upload, finalize\r\nx-goog-upload-offset: 0\r\n"
        ),
        "uploaded-through-b",
    );
    assert!(finished.starts_with("HTTP/1.1 200"), "{finished}");
    assert_eq!(
        served_by(&finished).as_deref(),
        Some(replica_a.as_str()),
        "{finished}"
    );
    // The console on B (B's own origin) reaches an environment that A holds: B's browser
    // guard judged the browser's headers, and B forwards without them, so A (whose origin B's
    // is not) serves its peer.
    let from_console = raw(
        &b.addr,
        &format!(
            "GET /v1beta/environments/{env}/files/workspace HTTP/1.1\r\nOrigin: http://{}\r\nSec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: cors\r\n",
            b.addr
        ),
        "",
    );
    assert!(from_console.starts_with("HTTP/1.1 200"), "{from_console}");
    assert_eq!(
        served_by(&from_console).as_deref(),
        Some(replica_a.as_str()),
        "{from_console}"
    );
    // A credential made on B is there for A.
    let made = post_json(
        &b.addr,
        "/v1beta/credentials",
        &serde_json::json!({"id": "shared-token", "type": "bearer_token", "token": "s3cr3t-value"}),
    );
    assert_eq!(made["id"], "shared-token", "{made}");
    let seen = json_body(&http(
        &a.addr,
        "GET",
        "/v1beta/credentials/shared-token",
        "",
    ));
    assert_eq!(seen["id"], "shared-token", "{seen}");
    assert!(!seen.to_string().contains("s3cr3t-value"));

    // A runs a long command; B follows it live (through the database's notifications).
    let running = post_json(
        &a.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": agent, "input": "run `sleep 600`", "environment": env, "background": true}),
    );
    let running_id = running["id"].as_str().unwrap().to_owned();
    let mut follow = TcpStream::connect(&b.addr).unwrap();
    follow
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(
        follow,
        "GET /v1beta/interactions/{running_id}?stream=true HTTP/1.1\r\nHost: {}\r\n\r\n",
        b.addr
    )
    .unwrap();
    let before = read_stream(&mut follow, Vec::new(), "code_execution_call");
    // Cancelling on B an interaction A runs: A stops it, and B relays A's answer.
    let other = post_json(
        &a.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": agent, "input": "run `sleep 601`", "environment": env, "background": true}),
    );
    let other_id = other["id"].as_str().unwrap();
    let cancel = http(
        &b.addr,
        "POST",
        &format!("/v1beta/interactions/{other_id}/cancel"),
        "",
    );
    assert_eq!(
        served_by(&cancel).as_deref(),
        Some(replica_a.as_str()),
        "{cancel}"
    );
    assert_eq!(json_body(&cancel)["status"], "cancelled", "{cancel}");

    // A dies mid-interaction. B fails the interaction (its stream says so and ends) once A's
    // heartbeat lapses, and takes the environment over.
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    let after = read_stream(&mut follow, before.into_bytes(), "data: [DONE]");
    assert!(after.contains(r#""event_type":"error""#), "{after}");
    let failed = json_body(&http(
        &b.addr,
        "GET",
        &format!("/v1beta/interactions/{running_id}"),
        "",
    ));
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("replica"),
        "{failed}"
    );
    // Nothing acknowledged was lost: the first interaction, whole.
    let kept = json_body(&http(
        &b.addr,
        "GET",
        &format!("/v1beta/interactions/{id}"),
        "",
    ));
    assert_eq!(kept["steps"], first["steps"]);
    let third = post_json(
        &b.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": agent, "input": "run `cat /workspace/a.txt`", "environment": env}),
    );
    assert_eq!(third["status"], "completed", "{third}");
    // And a forged forwarding header does not make a replica skip the lease.
    let body =
        serde_json::json!({"agent": agent, "input": "run `true`", "environment": env}).to_string();
    let mut s = TcpStream::connect(&b.addr).unwrap();
    write!(s, "POST /v1beta/interactions HTTP/1.1\r\nHost: {}\r\nx-hookbox-forwarded-by: r_someone\r\nx-hookbox-cluster-secret: wrong-secret-0000\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", b.addr, body.len()).unwrap();
    let mut forged = String::new();
    s.read_to_string(&mut forged).unwrap();
    assert!(forged.starts_with("HTTP/1.1 403"), "{forged}");
    assert!(third.to_string().contains("from-a"), "{third}");
    // B holds the environment now and serves its files itself, the upload through A included.
    let file = http(
        &b.addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace/up.txt?alt=media"),
        "",
    );
    assert_eq!(
        served_by(&file).as_deref(),
        Some(replica_b.as_str()),
        "{file}"
    );
    assert!(file.ends_with("uploaded-through-b"), "{file}");
    drop(b);
}

/// A new environment on the server at `addr` holding the reference's security gate
/// (`tests/fixtures/security-gate`); its id.
pub(super) fn security_gate_environment(addr: &str) -> String {
    let read = |p: &str| {
        std::fs::read_to_string(format!(
            "{}/tests/fixtures/security-gate/.agents/{p}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let env = post_json(
        addr,
        "/v1beta/environments",
        &serde_json::json!({"sources": [
            {"type": "inline", "target": ".agents/hooks.json", "content": read("hooks.json")},
            {"type": "inline", "target": ".agents/hooks-scripts/gate.py", "content": read("hooks-scripts/gate.py")},
        ]}),
    );
    env["id"].as_str().unwrap().to_owned()
}

/// The value of the sample `name{labels}` (labels as printed, in order) in Prometheus text.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn metrics_count_hook_decisions_tool_calls_and_interactions() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let server = start_with(&data, &["--metrics-listen", "127.0.0.1:0"]);
    let metrics_addr = server
        .banner
        .lines()
        .find_map(|l| l.strip_prefix("metrics: http://"))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap()
        .to_owned();
    // The reference's security gate: one allowed call, one denied.
    let env = security_gate_environment(&server.addr);
    for input in ["run `echo fine`", "run `rm -rf /tmp/forbidden`"] {
        let done = post_json(
            &server.addr,
            "/v1beta/interactions",
            &serde_json::json!({"agent": "antigravity-preview-09-2026", "input": input, "environment": env}),
        );
        assert_eq!(done["status"], "completed", "{done}");
    }
    let text = http(&metrics_addr, "GET", "/metrics", "");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let count =
        |series: &str| sample(&text, series).unwrap_or_else(|| panic!("{series} missing:\n{text}"));
    assert_eq!(
        count(r#"hookbox_interactions_total{status="completed"}"#),
        2.0
    );
    assert_eq!(
        count(r#"hookbox_tool_calls_total{tool="code_execution",outcome="denied"}"#),
        1.0
    );
    assert_eq!(
        count(r#"hookbox_tool_calls_total{tool="code_execution",outcome="ok"}"#),
        1.0
    );
    let gate_runs = |outcome: &str| {
        text.lines()
            .filter(|l| l.starts_with("hookbox_hook_handler_runs_total{"))
            .filter(|l| {
                l.contains(r#"event="pre_tool_execution""#)
                    && l.contains(&format!(r#"outcome="{outcome}""#))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert_eq!(gate_runs("deny"), 1.0, "{text}");
    assert_eq!(gate_runs("allow"), 1.0, "{text}");
    assert!(
        text.contains("hookbox_hook_handler_seconds_bucket"),
        "{text}"
    );
    assert!(
        text.contains(r#"hookbox_model_turn_seconds_count{model="offline"}"#),
        "{text}"
    );
    // Three sandboxed programs started (the gate twice, the allowed command once), all warm;
    // one environment is open.
    assert_eq!(
        count(r#"hookbox_sandbox_start_seconds_count{warm="true"}"#),
        3.0
    );
    assert_eq!(count("hookbox_open_environments"), 1.0);
    // Local mode: the API serves them too; the metrics port serves nothing else.
    assert!(http(&server.addr, "GET", "/metrics", "").contains("hookbox_tool_calls_total"));
    assert!(http(&metrics_addr, "GET", "/v1beta/environments", "").starts_with("HTTP/1.1 404"));
}

#[test]
fn the_audit_log_has_a_whole_line_per_decision_even_after_kill_9() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let log = dir.path().join("audit.jsonl");
    let mut server = start_with(&data, &["--audit-log", log.to_str().unwrap()]);
    let read = |path: &std::path::Path| std::fs::read_to_string(path).unwrap_or_default();
    let env = security_gate_environment(&server.addr);
    let denied = post_json(
        &server.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": "antigravity-preview-09-2026", "input": "run `rm -rf /tmp/forbidden`", "environment": env}),
    );
    let denied_id = denied["id"].as_str().unwrap().to_owned();
    // The line is there as soon as the answer is.
    let lines: Vec<serde_json::Value> = read(&log)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let deny = lines
        .iter()
        .find(|l| l["decision"] == "deny")
        .unwrap_or_else(|| panic!("no deny line: {lines:?}"));
    assert_eq!(deny["kind"], "hook");
    assert_eq!(deny["project"], "default");
    assert_eq!(deny["interaction"], denied_id.as_str());
    assert_eq!(deny["environment"], env.as_str());
    assert_eq!(deny["tool"], "code_execution");
    assert_eq!(deny["event"], "pre_tool_execution");
    assert_eq!(deny["handler_type"], "command");
    assert!(
        deny["group"].is_string() && deny["handler"].is_string(),
        "{deny}"
    );
    assert!(
        deny["reason"].as_str().unwrap().contains("blocked"),
        "{deny}"
    );
    assert!(deny["time"].as_str().unwrap().ends_with('Z'));

    // Decisions being written while hookbox is killed: every line in the file is still whole.
    for _ in 0..8 {
        post_json(
            &server.addr,
            "/v1beta/interactions",
            &serde_json::json!({"agent": "antigravity-preview-09-2026", "input": "run `rm -rf /tmp/forbidden`", "environment": env, "background": true}),
        );
    }
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    let text = read(&log);
    assert!(text.ends_with('\n'), "a torn last line: {text:?}");
    for line in text.lines() {
        let parsed: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("torn line {line:?}: {e}"));
        assert!(
            parsed["kind"] == "hook" || parsed["kind"] == "egress",
            "{parsed}"
        );
    }
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&log).unwrap().permissions());
    assert_eq!(mode & 0o077, 0, "the audit log is readable by others");
}

/// A span as an OTLP receiver got it: name, ids, string attributes, and its events (name and
/// attributes).
#[derive(Debug, Clone)]
pub(super) struct GotSpan {
    pub(super) name: String,
    pub(super) trace_id: Vec<u8>,
    pub(super) span_id: Vec<u8>,
    pub(super) parent: Vec<u8>,
    pub(super) attributes: std::collections::HashMap<String, String>,
    pub(super) events: Vec<(String, std::collections::HashMap<String, String>)>,
}

/// An OTLP/HTTP receiver on 127.0.0.1: decodes each export with the official protobuf schema
/// and sends its spans on the returned channel.
pub(super) fn otlp_receiver() -> (u16, std::sync::mpsc::Receiver<Vec<GotSpan>>) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use prost::Message as _;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; len];
                    std::io::Read::read_exact(&mut reader, &mut body).unwrap();
                    let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
                    let attributes =
                        |list: &[opentelemetry_proto::tonic::common::v1::KeyValue]| {
                            list.iter()
                                .filter_map(|kv| {
                                    let v = match kv.value.as_ref()?.value.as_ref()? {
                                        Any::StringValue(v) => v.clone(),
                                        Any::IntValue(v) => v.to_string(),
                                        Any::BoolValue(v) => v.to_string(),
                                        _ => return None,
                                    };
                                    Some((kv.key.clone(), v))
                                })
                                .collect()
                        };
                    let spans = request
                        .resource_spans
                        .iter()
                        .flat_map(|r| &r.scope_spans)
                        .flat_map(|s| &s.spans)
                        .map(|s| GotSpan {
                            name: s.name.clone(),
                            trace_id: s.trace_id.clone(),
                            span_id: s.span_id.clone(),
                            parent: s.parent_span_id.clone(),
                            attributes: attributes(&s.attributes),
                            events: s
                                .events
                                .iter()
                                .map(|e| (e.name.clone(), attributes(&e.attributes)))
                                .collect(),
                        })
                        .collect();
                    let _ = tx.send(spans);
                    let _ = conn.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
                    );
                }
            });
        }
    });
    (port, rx)
}

#[test]
fn an_interaction_is_exported_as_one_span_tree_over_otlp() {
    let (port, spans) = otlp_receiver();
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env_remove("HOOKBOX_API_KEYS")
        .env_remove("GEMINI_API_KEY")
        .env_remove("HOOKBOX_OPENAI_BASE_URL")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = lines
        .by_ref()
        .map(Result::unwrap)
        .find_map(|l| {
            l.strip_prefix("hookbox is listening on http://")
                .and_then(|r| r.split_whitespace().next())
                .map(str::to_owned)
        })
        .unwrap();
    let server = Server {
        child,
        addr,
        banner: String::new(),
    };
    let env = security_gate_environment(&server.addr);
    let done = post_json(
        &server.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": "antigravity-preview-09-2026", "input": "run `rm -rf /tmp/forbidden`", "environment": env}),
    );
    let id = done["id"].as_str().unwrap().to_owned();
    // Batches arrive within the schedule delay; wait for the interaction's root span.
    let mut got: Vec<GotSpan> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !got
        .iter()
        .any(|s| s.name == "interaction" && s.attributes.get("interaction_id") == Some(&id))
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match spans.recv_timeout(left) {
            Ok(batch) => got.extend(batch),
            Err(_) => panic!("no interaction span arrived: {got:#?}"),
        }
    }
    let root = got
        .iter()
        .find(|s| s.name == "interaction" && s.attributes.get("interaction_id") == Some(&id))
        .unwrap()
        .clone();
    assert!(
        root.parent.is_empty(),
        "the interaction is the root: {root:?}"
    );
    assert_eq!(root.attributes["project"], "default");
    let in_trace: Vec<&GotSpan> = got.iter().filter(|s| s.trace_id == root.trace_id).collect();
    let child_of = |parent: &GotSpan, name: &str| {
        in_trace
            .iter()
            .find(|s| s.name == name && s.parent == parent.span_id)
            .map(|s| (*s).clone())
            .unwrap_or_else(|| panic!("no {name} under {}: {in_trace:#?}", parent.name))
    };
    let model = child_of(&root, "model_turn");
    assert_eq!(model.attributes["model"], "offline");
    let tool = child_of(&root, "tool_call");
    assert_eq!(tool.attributes["tool"], "code_execution");
    assert_eq!(tool.attributes["outcome"], "denied");
    let hook = child_of(&tool, "hook_handler");
    assert_eq!(hook.attributes["event"], "pre_tool_execution");
    assert_eq!(hook.attributes["decision"], "deny");
    // A deny reason is policy text that may quote the call: the log and the audit log have
    // it, spans do not (and no log event is exported as a span event).
    assert!(!hook.attributes.contains_key("reason"), "{hook:?}");
    // Never the code or its output.
    for span in &in_trace {
        assert!(span.events.is_empty(), "{span:?}");
        for value in span.attributes.values() {
            assert!(!value.contains("rm -rf"), "{span:?}");
        }
    }
    drop(server);
}

/// Server events of a live socket until one of `event_type` (a batch split); panics when the
/// socket closes first.
fn live_until(
    socket: &mut tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
    event_type: &str,
) -> Vec<serde_json::Value> {
    let mut seen = Vec::new();
    loop {
        let message = socket
            .read()
            .unwrap_or_else(|e| panic!("closed before {event_type}: {e} {seen:?}"));
        let tungstenite::Message::Text(text) = message else {
            continue;
        };
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let events = match value.get("events") {
            Some(serde_json::Value::Array(events)) => events.clone(),
            _ => vec![value],
        };
        for event in events {
            let done = event["event_type"] == event_type;
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

fn live_send(
    socket: &mut tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
    event: serde_json::Value,
) {
    socket
        .send(tungstenite::Message::text(event.to_string()))
        .unwrap();
}

#[test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a PostgreSQL cluster)"]
fn two_replicas_serve_a_live_socket_where_its_environment_is_held() {
    let database = fresh_database();
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let replica_args = [
        "--database",
        database.as_str(),
        "--cluster-secret",
        "a-cluster-secret-for-tests",
        "--lease-ttl",
        "600",
    ];
    let a = start_with(&data, &replica_args);
    let b = start_with(&data, &replica_args);
    let served_by = |resp: &str| {
        resp.lines()
            .find_map(|l| l.strip_prefix("x-hookbox-replica: "))
            .map(str::trim)
            .map(str::to_owned)
    };
    let replica_a = served_by(&http(&a.addr, "GET", "/v1beta/environments", "")).unwrap();
    // Made on A: its environment is A's.
    let first = post_json(
        &a.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": "antigravity-preview-09-2026", "input": "run `echo from-a > /workspace/a.txt`"}),
    );
    assert_eq!(first["status"], "completed", "{first}");
    let env = first["environment_id"].as_str().unwrap().to_owned();

    // A live socket opened on B, continuing it: B relays the socket to A.
    let (mut socket, _) =
        tungstenite::connect(format!("ws://{}/v1beta/interactions/live", b.addr)).unwrap();
    live_send(
        &mut socket,
        serde_json::json!({"event_type": "interaction.connect", "id": "new"}),
    );
    let connected = live_until(&mut socket, "interaction.connected");
    assert_eq!(connected[0]["status"], "pending_create");
    live_send(
        &mut socket,
        serde_json::json!({"event_type": "interaction.create", "previous_interaction_id": first["id"]}),
    );
    let created = live_until(&mut socket, "interaction.created");
    assert!(
        created
            .iter()
            .all(|e| e["event_type"] != "interaction.connected"),
        "one interaction.connected only: {created:?}"
    );
    let live = created.last().unwrap()["interaction_id"]
        .as_str()
        .unwrap()
        .to_owned();
    live_send(
        &mut socket,
        serde_json::json!({"event_type": "input", "content": [{"type": "text", "text": "read `/workspace/a.txt`"}]}),
    );
    let turn = live_until(&mut socket, "interaction.status_update");
    assert_eq!(turn.last().unwrap()["status"], "idle", "{turn:?}");
    assert!(
        turn.iter().any(|e| e["delta"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("from-a"))),
        "{turn:?}"
    );
    drop(socket);
    // Still A's environment (B never took it), and the live interaction is in it.
    let held = http(&b.addr, "GET", &format!("/v1beta/environments/{env}"), "");
    assert_eq!(
        served_by(&held).as_deref(),
        Some(replica_a.as_str()),
        "{held}"
    );
    let stored = json_body(&http(
        &b.addr,
        "GET",
        &format!("/v1beta/interactions/{live}"),
        "",
    ));
    assert_eq!(stored["environment_id"], env.as_str());

    // Reconnecting on B to the live interaction goes on at A.
    let (mut again, _) =
        tungstenite::connect(format!("ws://{}/v1beta/interactions/live", b.addr)).unwrap();
    live_send(
        &mut again,
        serde_json::json!({"event_type": "interaction.connect", "id": live}),
    );
    let connected = live_until(&mut again, "interaction.connected");
    assert_eq!(connected.last().unwrap()["status"], "idle");
    live_send(
        &mut again,
        serde_json::json!({"event_type": "input", "content": [{"type": "text", "text": "run `echo again-on-a >> /workspace/a.txt`"}]}),
    );
    live_until(&mut again, "interaction.status_update");
    live_send(
        &mut again,
        serde_json::json!({"event_type": "interaction.complete"}),
    );
    let end = live_until(&mut again, "interaction.completed");
    assert_eq!(end.last().unwrap()["status"]["code"], 0);
    let file = http(
        &a.addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace/a.txt?alt=media"),
        "",
    );
    assert!(file.ends_with("from-a\nagain-on-a\n"), "{file}");
}
