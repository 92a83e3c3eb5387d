//! Stopping `hookbox serve` with SIGTERM: the drain lets a running interaction finish, turns new
//! ones away with 503 and `Retry-After`, and leaves no mount or loop device behind; past the
//! grace period, or at a second signal, what still runs ends `failed`, as after a crash.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use super::lifecycle_cli::wait_for;
use super::serve_cli::{Server, http, json_body, start_with};

const AGENT: &str = "antigravity-preview-09-2026";

fn signal(server: &Server, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Starts `command` in the background and returns (interaction id, stream) once the command
/// runs (its call step is stored, and streamed, before it runs).
fn start_running(server: &Server, command: &str) -> (String, TcpStream, Vec<u8>) {
    let body = format!(r#"{{"agent":"{AGENT}","input":"run `{command}`","background":true}}"#);
    let created = json_body(&http(&server.addr, "POST", "/v1beta/interactions", &body));
    let id = created["id"].as_str().unwrap().to_owned();
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    write!(
        stream,
        "GET /v1beta/interactions/{id}?stream=true HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.addr
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("code_execution_call") {
        let n = stream.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "stream ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    (id, stream, seen)
}

/// A workload that runs until the test releases it, so it is still running whatever a drain or
/// a hand-over takes: it creates `/workspace/NAME.running` when it starts, waits for
/// `/workspace/NAME.release` (see [`release`]), then prints `done` (spelt with an empty `''`
/// inside, so the text is only in the stream once the command has printed it, not already in the
/// call's arguments).
fn held(name: &str, done: &str) -> String {
    let (head, tail) = done.split_at(done.len() / 2);
    format!(
        "touch /workspace/{name}.running; until [ -e /workspace/{name}.release ]; do sleep 0.05; done; echo {head}''{tail}"
    )
}

/// Where environment `env` of a server with data dir `data` keeps its `/workspace`.
fn workspace(data: &Path, env: &str) -> std::path::PathBuf {
    data.join("environments").join(env).join("root/workspace")
}

/// Waits (bounded) until the [`held`] workload `name` runs in environment `env`.
fn wait_held(data: &Path, env: &str, name: &str) {
    let marker = workspace(data, env).join(format!("{name}.running"));
    wait_for(
        Duration::from_secs(30),
        &format!("the workload to create {}", marker.display()),
        || marker.exists().then_some(()),
    );
}

/// Lets the [`held`] workload `name` in environment `env` finish.
fn release(data: &Path, env: &str, name: &str) {
    std::fs::write(workspace(data, env).join(format!("{name}.release")), b"").unwrap();
}

fn environment_of(server: &Server, id: &str) -> String {
    let got = json_body(&http(
        &server.addr,
        "GET",
        &format!("/v1beta/interactions/{id}"),
        "",
    ));
    got["environment_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{got}"))
        .to_owned()
}

/// Polls `/readyz` until it says the server drains.
fn wait_draining(server: &Server) {
    wait_for(Duration::from_secs(10), "/readyz to turn 503", || {
        let resp = http(&server.addr, "GET", "/readyz", "");
        resp.starts_with("HTTP/1.1 503").then_some(())
    });
}

fn wait_exit(server: &mut Server) -> std::process::ExitStatus {
    wait_for(Duration::from_secs(60), "hookbox to exit", || {
        server.child.try_wait().unwrap()
    })
}

/// Mounts (from this mount namespace, which the server shares) and loop devices beneath `dir`.
fn mounts_and_loops_under(dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap();
    let mut found: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|target| Path::new(target).starts_with(&dir))
        .map(|t| format!("mount {t}"))
        .collect();
    for entry in std::fs::read_dir("/sys/block").unwrap().flatten() {
        if let Ok(backing) = std::fs::read_to_string(entry.path().join("loop/backing_file"))
            && Path::new(backing.trim()).starts_with(&dir)
        {
            found.push(format!(
                "{} on {}",
                entry.file_name().to_string_lossy(),
                backing.trim()
            ));
        }
    }
    found
}

/// Processes in environment `env`'s cgroups (`hookbox/<env>`), by scanning /proc.
fn processes_of(env: &str) -> Vec<String> {
    let needle = format!("/hookbox/{env}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read_to_string(e.path().join("cgroup")).is_ok_and(|c| {
                c.lines()
                    .any(|l| l.ends_with(&needle) || l.contains(&format!("{needle}/")))
            })
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn interaction_after_restart(data: &Path, id: &str) -> serde_json::Value {
    let server = start_with(data, &[]);
    json_body(&http(
        &server.addr,
        "GET",
        &format!("/v1beta/interactions/{id}"),
        "",
    ))
}

#[test]
fn sigterm_drains_a_running_interaction_and_leaves_no_mount() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let mut server = start_with(&data, &[]);
    // The workload runs until the drain's checks are done: then the test releases it.
    let (id, mut stream, mut seen) = start_running(&server, &held("drain", "drained-ok"));
    assert!(
        !mounts_and_loops_under(&data).is_empty(),
        "the environment's disk should be mounted while it runs"
    );
    let env = environment_of(&server, &id);
    wait_held(&data, &env, "drain");
    // Positive control for the check at the end that no process outlived the server.
    wait_for(
        Duration::from_secs(10),
        "the command to run in its environment's cgroup",
        || (!processes_of(&env).is_empty()).then_some(()),
    );
    signal(&server, "TERM");
    wait_draining(&server);

    // New work is turned away with a hint when to retry; reads still work.
    let body = format!(r#"{{"agent":"{AGENT}","input":"hello"}}"#);
    let refused = http(&server.addr, "POST", "/v1beta/interactions", &body);
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(
        refused
            .to_ascii_lowercase()
            .contains("\r\nretry-after: 2\r\n"),
        "{refused}"
    );
    assert_eq!(json_body(&refused)["error"]["status"], "UNAVAILABLE");
    let listed = http(&server.addr, "GET", "/v1beta/interactions", "");
    assert!(listed.starts_with("HTTP/1.1 200"), "{listed}");
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "hookbox stopped while an interaction still ran"
    );

    // The running one finishes once released, and its stream says so.
    release(&data, &env, "drain");
    stream.read_to_end(&mut seen).unwrap();
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.contains("drained-ok"), "{seen}");
    assert!(seen.contains("\"completed\""), "{seen}");
    let status = wait_exit(&mut server);
    assert!(status.success(), "{status}");
    // The disk is unmounted and its loop device let go (the kernel may detach it just after).
    wait_for(
        Duration::from_secs(10),
        "the loop device to be detached",
        || mounts_and_loops_under(&data).is_empty().then_some(()),
    );
    // No sandbox process outlived the server.
    assert_eq!(processes_of(&env), Vec::<String>::new());

    let after = interaction_after_restart(&data, &id);
    assert_eq!(after["status"], "completed", "{after}");
}

#[test]
fn past_the_grace_period_or_at_a_second_signal_running_work_fails() {
    for second_signal in [false, true] {
        let dir = hookbox_test_support::DataDir::new();
        let data = dir.path().join("data");
        let grace = if second_signal { "600" } else { "0.5" };
        let mut server = start_with(&data, &["--shutdown-grace", grace]);
        // A workload that never ends by itself.
        let (id, _stream, _) = start_running(&server, "sleep infinity");
        signal(&server, "TERM");
        if second_signal {
            wait_draining(&server);
            signal(&server, "INT");
        }
        let status = wait_exit(&mut server);
        assert!(status.success(), "{status}");
        wait_for(
            Duration::from_secs(10),
            "the loop device to be detached",
            || mounts_and_loops_under(&data).is_empty().then_some(()),
        );
        // Failed by the stop itself (not by the next start's recovery, which says `interrupted`).
        let after = interaction_after_restart(&data, &id);
        assert_eq!(after["status"], "failed", "{after}");
        assert_eq!(after["errors"][0]["code"], "server_stopped", "{after}");
        assert!(
            after["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("hookbox stopped"),
            "{after}"
        );
    }
}

fn served_by(resp: &str) -> Option<String> {
    resp.lines()
        .find_map(|l| l.strip_prefix("x-hookbox-replica: "))
        .map(|s| s.trim().to_owned())
}

#[test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a PostgreSQL cluster)"]
fn two_replicas_hand_over_at_a_clean_stop() {
    let database = super::serve_cli::fresh_database();
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    // Leases that would outlast the test: B gets A's environment at once only if A releases it.
    let replica_args = [
        "--database",
        database.as_str(),
        "--cluster-secret",
        "a-cluster-secret-for-tests",
        "--lease-ttl",
        "600",
    ];
    let mut a = start_with(&data, &replica_args);
    let b = start_with(&data, &replica_args);
    let replica_b = served_by(&http(&b.addr, "GET", "/v1beta/environments", "")).unwrap();
    let made = super::serve_cli::post_json(
        &a.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": AGENT, "input": "run `echo kept-on-a > /workspace/a.txt`"}),
    );
    assert_eq!(made["status"], "completed", "{made}");
    let env = made["environment_id"].as_str().unwrap().to_owned();
    // Runs on A until the hand-over has been checked: then the test releases it.
    let (running, mut stream, mut seen) = start_running(&a, &held("handover", "finished-on-a"));
    let running_env = environment_of(&a, &running);
    wait_held(&data, &running_env, "handover");
    signal(&a, "TERM");
    wait_draining(&a);

    // A new interaction sent to the draining A runs on B.
    let body = format!(r#"{{"agent":"{AGENT}","input":"run `echo on-b`"}}"#);
    let moved = http(&a.addr, "POST", "/v1beta/interactions", &body);
    assert_eq!(
        served_by(&moved).as_deref(),
        Some(replica_b.as_str()),
        "{moved}"
    );
    assert_eq!(json_body(&moved)["status"], "completed", "{moved}");
    // A hands its idle environment over as the drain begins: B serves it (sent to either
    // replica) while A still runs its other interaction, long before the 600 s lease would
    // have expired.
    let body = serde_json::json!({"agent": AGENT, "input": "run `cat /workspace/a.txt`", "environment": env})
        .to_string();
    let resp = wait_for(
        Duration::from_secs(20),
        "B to take the idle environment",
        || {
            let resp = http(&a.addr, "POST", "/v1beta/interactions", &body);
            (!resp.starts_with("HTTP/1.1 503")).then_some(resp)
        },
    );
    assert!(
        a.child.try_wait().unwrap().is_none(),
        "A had already stopped: the environment was not handed over during the drain"
    );
    assert_eq!(
        served_by(&resp).as_deref(),
        Some(replica_b.as_str()),
        "{resp}"
    );
    let after = json_body(&resp);
    assert_eq!(after["status"], "completed", "{after}");
    assert!(after.to_string().contains("kept-on-a"), "{after}");

    release(&data, &running_env, "handover");
    stream.read_to_end(&mut seen).unwrap();
    assert!(String::from_utf8_lossy(&seen).contains("finished-on-a"));
    assert!(wait_exit(&mut a).success());
    // After A's stop, B serves it when asked directly too.
    let resp = http(&b.addr, "POST", "/v1beta/interactions", &body);
    assert_eq!(
        served_by(&resp).as_deref(),
        Some(replica_b.as_str()),
        "{resp}"
    );
    assert_eq!(json_body(&resp)["status"], "completed", "{resp}");
}

#[test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL and HOOKBOX_TEST_SNAPSHOT_URL (scripts/test.sh starts both)"]
fn replicas_without_a_shared_disk_lose_nothing_at_a_clean_stop() {
    let database = super::serve_cli::fresh_database();
    let store = super::lifecycle_cli::garage_url();
    let dir = hookbox_test_support::DataDir::new();
    // Separate data dirs sharing only the credential key; leases that outlast the test, so B
    // gets A's environment at once only because A let it go, with its last checkpoint uploaded.
    let args = [
        "--database",
        database.as_str(),
        "--cluster-secret",
        "a-cluster-secret-for-tests",
        "--lease-ttl",
        "600",
        "--snapshot-store",
        store.as_str(),
    ];
    let mut a = start_with(&dir.path().join("a"), &args);
    let b_data = dir.path().join("b");
    std::fs::create_dir_all(&b_data).unwrap();
    std::fs::copy(dir.path().join("a/secret.key"), b_data.join("secret.key")).unwrap();
    let b = start_with(&b_data, &args);
    let replica_b = served_by(&http(&b.addr, "GET", "/v1beta/environments", "")).unwrap();

    // Written on A, whose checkpoint runs in the background (no --checkpoint-wait); A is
    // stopped right after the answer, while that upload may still run.
    let made = super::serve_cli::post_json(
        &a.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": AGENT, "input": "run `head -c 20000000 /dev/urandom > /workspace/big.bin; sha256sum /workspace/big.bin > /workspace/sum.txt; echo kept-at-stop > /workspace/last.txt`"}),
    );
    assert_eq!(made["status"], "completed", "{made}");
    let env = made["environment_id"].as_str().unwrap().to_owned();
    let sum_on_a = http(
        &a.addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace/sum.txt?alt=media"),
        "",
    );
    signal(&a, "TERM");
    assert!(wait_exit(&mut a).success());

    // B restores it from the object store at once and has every byte A wrote.
    let body = serde_json::json!({"agent": AGENT, "environment": env,
        "input": "run `cat /workspace/last.txt; sha256sum -c /workspace/sum.txt`"})
    .to_string();
    let resp = http(&b.addr, "POST", "/v1beta/interactions", &body);
    assert_eq!(
        served_by(&resp).as_deref(),
        Some(replica_b.as_str()),
        "{resp}"
    );
    let after = json_body(&resp);
    assert_eq!(after["status"], "completed", "{after}");
    let text = after.to_string();
    assert!(text.contains("kept-at-stop"), "{text}");
    assert!(text.contains("big.bin: OK"), "{text}");
    let sum_on_b = http(
        &b.addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace/sum.txt?alt=media"),
        "",
    );
    assert_eq!(
        sum_on_a.split("\r\n\r\n").nth(1),
        sum_on_b.split("\r\n\r\n").nth(1)
    );
}
