//! Environments over time, through the real `hookbox serve`: expiry after the project's TTL
//! (a 2 s TTL here), and snapshots in a real object store (Garage, started by
//! scripts/objectstore.sh) carrying environments between replicas that share no data dir.

use std::time::{Duration, Instant};

use super::serve_cli::{Server, fresh_database, http, json_body, post_json, start_with};

const AGENT: &str = "antigravity-preview-09-2026";

/// Polls `check` until it returns `Some`, for at most `limit` (an observable condition, not a
/// sleep standing in for one).
pub(super) fn wait_for<T>(limit: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn status_line(resp: &str) -> &str {
    resp.lines().next().unwrap_or_default()
}

fn get(addr: &str, path: &str) -> serde_json::Value {
    json_body(&http(addr, "GET", path, ""))
}

#[test]
fn environments_expire_after_their_ttl_and_say_so() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[quotas]\nenvironment_ttl_seconds = 2\n").unwrap();
    let config = config.to_string_lossy().into_owned();
    let server = start_with(
        &data,
        &["--config", config.as_str(), "--expiry-interval", "0.2"],
    );
    let addr = server.addr.clone();

    // An interaction running longer than the TTL keeps its environment. The workload runs until
    // the test releases it, and "longer than the TTL" is observed, not slept: an idle environment
    // made after the workload started has expired (so the TTL has passed for both and the sweeper
    // has run since), while the running one is still active.
    let running = post_json(
        &addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": AGENT, "input": "run `touch /workspace/held.running; until [ -e /workspace/held.release ]; do sleep 0.05; done; echo kept > /workspace/kept.txt`", "background": true}),
    );
    let id = running["id"].as_str().unwrap().to_owned();
    let env = running["environment_id"].as_str().unwrap().to_owned();
    let workspace = data.join("environments").join(&env).join("root/workspace");
    wait_for(Duration::from_secs(30), "the workload to start", || {
        workspace.join("held.running").exists().then_some(())
    });
    let idle = post_json(&addr, "/v1beta/environments", &serde_json::json!({}));
    let idle = idle["id"].as_str().unwrap().to_owned();
    wait_for(
        Duration::from_secs(30),
        "the idle environment to expire",
        || {
            let e = get(&addr, &format!("/v1beta/environments/{idle}"));
            (e["status"] == "expired").then_some(())
        },
    );
    let shown = get(&addr, &format!("/v1beta/environments/{env}"));
    assert_eq!(
        shown["status"], "active",
        "expired under a running interaction: {shown}"
    );
    std::fs::write(workspace.join("held.release"), b"").unwrap();
    let done = wait_for(Duration::from_secs(30), "the long interaction", || {
        let i = get(&addr, &format!("/v1beta/interactions/{id}"));
        (i["status"] != "in_progress").then_some(i)
    });
    assert_eq!(done["status"], "completed", "{done}");
    let file = http(
        &addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace/kept.txt?alt=media"),
        "",
    );
    assert!(file.ends_with("kept\n"), "{file}");

    // Unused past the TTL: expired, files gone, metadata kept.
    let expired = wait_for(Duration::from_secs(30), "the environment to expire", || {
        let e = get(&addr, &format!("/v1beta/environments/{env}"));
        (e["status"] == "expired").then_some(e)
    });
    assert_eq!(expired["id"], env.as_str());
    // The record says expired first (so nothing uses it), then the files go.
    let on_disk = data.join("environments").join(&env);
    wait_for(
        Duration::from_secs(30),
        "the expired environment's files to go",
        || (!on_disk.exists()).then_some(()),
    );
    let listed = get(&addr, "/v1beta/environments");
    assert!(listed.to_string().contains(&env), "{listed}");

    // Everything that would use it says it expired, and when.
    let uses = [
        (
            "POST",
            "/v1beta/interactions".to_owned(),
            serde_json::json!({"agent": AGENT, "input": "run `ls`", "environment": env})
                .to_string(),
        ),
        (
            "POST",
            "/v1beta/interactions".to_owned(),
            serde_json::json!({"agent": AGENT, "input": "run `ls`", "previous_interaction_id": id})
                .to_string(),
        ),
        (
            "GET",
            format!("/v1beta/environments/{env}/files"),
            String::new(),
        ),
        (
            "GET",
            format!("/v1beta/environments/{env}/files/workspace/kept.txt?alt=media"),
            String::new(),
        ),
        (
            "POST",
            "/v1beta/environments".to_owned(),
            serde_json::json!({"from_environment": env}).to_string(),
        ),
    ];
    for (method, path, body) in uses {
        let resp = http(&addr, method, &path, &body);
        assert!(
            status_line(&resp).contains(" 400 "),
            "{method} {path}: {resp}"
        );
        let error = json_body(&resp);
        assert_eq!(error["error"]["status"], "FAILED_PRECONDITION", "{resp}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&env) && message.contains("expired at 20"),
            "{message}"
        );
    }
    let upload = http(
        &addr,
        "PUT",
        &format!("/upload/v1beta/environments/{env}/files/workspace/x.txt"),
        "",
    );
    assert!(upload.contains("FAILED_PRECONDITION"), "{upload}");
    let metrics = http(&addr, "GET", "/metrics", "");
    assert!(
        metrics.contains("hookbox_environment_lifecycle_total{operation=\"expire\"} 2"),
        "{metrics}"
    );
    // Deleting it still works.
    let deleted = http(&addr, "DELETE", &format!("/v1beta/environments/{env}"), "");
    assert!(status_line(&deleted).contains(" 200 "), "{deleted}");
    drop(server);
}

#[test]
fn bad_ttls_and_snapshot_urls_are_refused_at_start() {
    let dir = hookbox_test_support::DataDir::new();
    for (value, needle) in [
        ("-1", "environment_ttl_seconds"),
        ("\"soon\"", "environment_ttl_seconds"),
    ] {
        let config = dir.path().join("bad.toml");
        std::fs::write(
            &config,
            format!("[quotas]\nenvironment_ttl_seconds = {value}\n"),
        )
        .unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookbox"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(needle),
            "{value}: {err}"
        );
    }
    for url in [
        "ftp://nowhere/x?secret_access_key=topsecret",
        // Reachable by no one: a closed port on loopback.
        "s3://b/p?endpoint=http://127.0.0.1:1&region=r&access_key_id=k&secret_access_key=topsecret",
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookbox"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(["--snapshot-store", url])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{url} was accepted");
        assert!(err.contains("snapshot store"), "{err}");
        assert!(!err.contains("topsecret"), "the secret was shown: {err}");
    }
}

/// Held shared by the tests that need the shared Garage store up throughout, and exclusively by
/// the one that takes it down for a while.
pub(super) static STORE_UP: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A Garage store for one test (`HOOKBOX_TEST_SNAPSHOT_URL`, from scripts/objectstore.sh).
pub(super) fn garage_url() -> String {
    std::env::var("HOOKBOX_TEST_SNAPSHOT_URL")
        .expect("HOOKBOX_TEST_SNAPSHOT_URL (scripts/objectstore.sh start prints one)")
}

fn objectstore(command: &str, url: &str) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/objectstore.sh");
    let out = std::process::Command::new(script)
        .args([command, url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "objectstore.sh {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Retries a request while it answers 503 (the lease of a dead replica not yet expired),
/// as the SDK does; the last answer.
pub(super) fn retrying(addr: &str, method: &str, path: &str, body: &str) -> String {
    wait_for(Duration::from_secs(60), path, || {
        let resp = http(addr, method, path, body);
        (!status_line(&resp).contains(" 503 ")).then_some(resp)
    })
}

#[test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL and HOOKBOX_TEST_SNAPSHOT_URL (scripts/test.sh starts both)"]
fn replicas_without_a_shared_disk_carry_environments_through_the_object_store() {
    let database = fresh_database();
    let store = garage_url();
    let dir = hookbox_test_support::DataDir::new();
    let args = |extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--database",
            database.as_str(),
            "--cluster-secret",
            "a-cluster-secret-for-tests",
            "--lease-ttl",
            "2",
            "--snapshot-store",
            store.as_str(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        v.extend(extra.iter().map(|s| (*s).to_owned()));
        v
    };
    // Separate data dirs; they share only the credential key, copied from the first replica.
    let start = |name: &str, extra: &[&'static str]| -> Server {
        let data = dir.path().join(name);
        let key = dir.path().join("a").join("secret.key");
        if name != "a" {
            std::fs::create_dir_all(&data).unwrap();
            std::fs::copy(&key, data.join("secret.key")).unwrap();
        }
        let a = args(extra);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        start_with(&data, &refs)
    };
    let mut a = start("a", &["--checkpoint-wait"]);
    let audit = dir.path().join("b-audit.jsonl");
    let audit_arg: &'static str = Box::leak(audit.to_string_lossy().into_owned().into_boxed_str());
    let b = start("b", &["--audit-log", audit_arg]);

    // 1. Written on A, which completes only once the checkpoint is uploaded; then A dies.
    let first = post_json(
        &a.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": AGENT, "input": "run `head -c 300000 /dev/urandom | base64 > /workspace/big.txt; echo from-a > /workspace/a.txt; echo done`"}),
    );
    assert_eq!(first["status"], "completed", "{first}");
    let env = first["environment_id"].as_str().unwrap().to_owned();
    let big_on_a = http(
        &a.addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace/big.txt?alt=media"),
        "",
    );
    // A second environment that only A ever had: its blocks are corrupted below.
    let other = post_json(
        &a.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": AGENT, "input": "run `echo other > /workspace/o.txt`"}),
    );
    assert_eq!(other["status"], "completed", "{other}");
    let other_env = other["environment_id"].as_str().unwrap().to_owned();
    a.child.kill().unwrap();
    a.child.wait().unwrap();

    // 2. B restores it from the snapshot (once A's lease lapses) and serves it.
    let file = retrying(
        &b.addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace/a.txt?alt=media"),
        "",
    );
    assert!(file.ends_with("from-a\n"), "{file}");
    let big_on_b = http(
        &b.addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace/big.txt?alt=media"),
        "",
    );
    assert_eq!(
        big_on_b.split("\r\n\r\n").nth(1),
        big_on_a.split("\r\n\r\n").nth(1),
        "the restored file differs"
    );
    assert!(dir.path().join("b/environments").join(&env).exists());
    let seen = post_json(
        &b.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": AGENT, "input": "run `cat /workspace/a.txt; echo more > /workspace/b.txt`", "environment": env}),
    );
    assert_eq!(seen["status"], "completed", "{seen}");
    assert!(seen.to_string().contains("from-a"), "{seen}");

    // 3. A corrupt block: the restore refuses, naming the environment.
    corrupt_one_chunk(&store, &other_env);
    let refused = retrying(
        &b.addr,
        "GET",
        &format!("/v1beta/environments/{other_env}/files/workspace/o.txt?alt=media"),
        "",
    );
    assert!(status_line(&refused).contains(" 500 "), "{refused}");
    assert!(
        refused.contains(&other_env) && refused.contains("corrupt"),
        "{refused}"
    );
    assert!(!dir.path().join("b/environments").join(&other_env).exists());

    // 4. The store goes down mid-run: B keeps working, says so, and uploads once it is back.
    // The other tests on the shared store wait until it is back.
    let outage = STORE_UP.write().unwrap_or_else(|p| p.into_inner());
    objectstore("down", &store);
    let during = post_json(
        &b.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": AGENT, "input": "run `echo written-while-down > /workspace/down.txt`", "environment": env}),
    );
    assert_eq!(during["status"], "completed", "{during}");
    let degraded = wait_for(
        Duration::from_secs(60),
        "/readyz to report the failing store",
        || {
            let r = get(&b.addr, "/readyz");
            (r["status"] == "degraded").then_some(r)
        },
    );
    assert!(
        degraded["snapshots"]["pending_checkpoints"].as_u64() >= Some(1),
        "{degraded}"
    );
    assert!(
        !degraded.to_string().contains("secret_access_key=")
            || degraded.to_string().contains("secret_access_key=***"),
        "{degraded}"
    );
    objectstore("up", &store);
    wait_for(
        Duration::from_secs(120),
        "the pending checkpoint to be uploaded",
        || {
            let r = get(&b.addr, "/readyz");
            (r["status"] == "ready" && r["snapshots"]["pending_checkpoints"] == 0).then_some(())
        },
    );
    drop(outage);
    // Metrics and the audit log said so too.
    let metrics = http(&b.addr, "GET", "/metrics", "");
    for operation in ["restore", "checkpoint", "checkpoint_failed"] {
        assert!(
            metrics.contains(&format!(
                "hookbox_environment_lifecycle_total{{operation=\"{operation}\"}}"
            )),
            "{operation}: {metrics}"
        );
    }
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failed = lines
        .iter()
        .find(|l| l["kind"] == "snapshot" && l["event"] == "snapshot.failed")
        .unwrap_or_else(|| panic!("no snapshot failure in the audit log: {lines:?}"));
    assert_eq!(failed["environment"], env.as_str(), "{failed}");
    assert!(
        !failed
            .to_string()
            .contains(store.rsplit('=').next().unwrap_or("?")),
        "the secret reached the audit log"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "snapshot.restore" && l["environment"] == env.as_str()),
        "{lines:?}"
    );
    // Nothing was lost: a third replica with an empty disk sees the write made while down.
    let mut b = b;
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let c = start("c", &[]);
    // Its first request is a fork: the parent exists only in the object store now.
    let forked = retrying(
        &c.addr,
        "POST",
        "/v1beta/environments",
        &serde_json::json!({"from_environment": env}).to_string(),
    );
    let child = json_body(&forked)["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{forked}"))
        .to_owned();
    assert_ne!(child, env);
    for id in [&child, &env] {
        let file = http(
            &c.addr,
            "GET",
            &format!("/v1beta/environments/{id}/files/workspace/down.txt?alt=media"),
            "",
        );
        assert!(file.ends_with("written-while-down\n"), "{id}: {file}");
    }
    drop(c);
}

/// Overwrites one chunk of `env`'s snapshot in the store at `url` with garbage, through the
/// S3 API.
fn corrupt_one_chunk(url: &str, env: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use futures::TryStreamExt;
        let loc = hookbox_snapshot::location::parse(url).unwrap();
        let prefix = object_store::path::Path::from(format!("{}/envs/{env}/chunks", loc.prefix));
        let chunks: Vec<_> = loc.store.list(Some(&prefix)).try_collect().await.unwrap();
        let victim = chunks.iter().max_by_key(|o| o.size).unwrap();
        loc.store
            .put(
                &victim.location,
                object_store::PutPayload::from_static(b"not the block"),
            )
            .await
            .unwrap();
    });
}
