//! Load benchmark of `hookbox-server` on the real pipeline: interactions per second and p50/p99
//! latency at concurrency 1, 16 and 64, with the offline agent running one `code_execution` per
//! interaction in a real sandbox behind a one-command pre-hook gate (hooks engine → command hook
//! in the sandbox → tool in the sandbox), over real HTTP on 127.0.0.1 with SQLite; then RSS after
//! 1000 interactions. Run: `cargo bench -p hookbox-server --bench load [-- --per-level N]`.
//!
//! The bench binary is also its own sandbox launcher (`__sandbox-exec`), as `hookbox` is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox_agent::LoopConfig;
use hookbox_agent::offline::OfflineModel;
use hookbox_sandbox::environment::Store as EnvStore;
use hookbox_sandbox::network::EgressOptions;
use hookbox_sandbox::runner::{Launcher, SandboxOptions};
use hookbox_server::sandbox::SandboxBackend;
use hookbox_server::{AppState, Services};
use hookbox_store::{SecretKey, SqliteOptions, SqliteStore};

const LAUNCHER_SUBCOMMAND: &str = "__sandbox-exec";

/// The gate: one command hook on `code_execution`, denying `rm -rf`.
const GATE: &str = r#"read -r payload; case "$payload" in *"rm -rf"*) echo '{"decision":"deny","reason":"blocked"}';; *) echo '{"decision":"allow"}';; esac"#;
const HOOKS: &str = r#"{"gate": {"pre_tool_execution": [{"matcher": "code_execution", "hooks": [{"type": "command", "command": "sh /.agents/gate.sh", "timeout": 10}]}]}}"#;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(str::to_owned)
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn main() {
    // Re-executed as the sandbox launcher: must stay single-threaded, so before any runtime.
    if std::env::args().nth(1).as_deref() == Some(LAUNCHER_SUBCOMMAND) {
        std::process::exit(hookbox_sandbox::launcher::main());
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench());
}

async fn bench() {
    let per_level: usize = std::env::args()
        .skip_while(|a| a != "--per-level")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    // Its environment's disk is a loop-mounted image, detached when this goes.
    let dir = hookbox_test_support::DataDir::new();
    let store = SqliteStore::open(
        &dir.path().join("hookbox.db"),
        SecretKey::from_bytes([3; 32]),
        &SqliteOptions::default(),
    )
    .unwrap();
    let launcher = Launcher {
        program: std::env::current_exe().unwrap(),
        args: vec![LAUNCHER_SUBCOMMAND.to_owned()],
    };
    let credentials =
        Arc::new(hookbox_egress::credentials::FileCredentialStore::open(dir.path()).unwrap());
    let envs = EnvStore::open(
        dir.path(),
        SandboxOptions::new(launcher),
        EgressOptions::new(credentials),
    )
    .unwrap();
    let backend = Arc::new(SandboxBackend::new(envs));
    let state = AppState::new(Services {
        store: Arc::new(store),
        model: Arc::new(OfflineModel::new().unwrap()),
        executor: backend.clone(),
        environments: backend,
        api_keys: vec![],
        allow_keyless: true,
        loop_config: LoopConfig::default(),
        quotas: Default::default(),
        sandbox_slots: None,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(hookbox_server::serve(
        listener,
        state,
        std::future::pending(),
    ));
    let client = reqwest::Client::new();
    let env: serde_json::Value = client
        .post(format!("http://{addr}/v1beta/environments"))
        .json(&serde_json::json!({"sources": [
            {"type": "inline", "target": ".agents/hooks.json", "content": HOOKS},
            {"type": "inline", "target": ".agents/gate.sh", "content": GATE},
        ]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let env_id = env["id"].as_str().unwrap().to_owned();
    let body = serde_json::json!({"agent": "antigravity-preview-09-2026", "input": "run `true`", "environment": env_id});

    let one = move |client: reqwest::Client, body: serde_json::Value| async move {
        let t = Instant::now();
        let resp = client
            .post(format!("http://{addr}/v1beta/interactions"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let v: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(v["status"], "completed");
        // The gate ran (and allowed) before the tool ran.
        let result = &v["steps"][2];
        assert_eq!(
            result["hooks"]["pre"]["trace"][0]["outcome"], "allow",
            "{v}"
        );
        assert_eq!(result["is_error"], false, "{v}");
        t.elapsed()
    };
    // Warm up.
    for _ in 0..16 {
        one(client.clone(), body.clone()).await;
    }
    let rss_start = rss_kib();
    let mut total = 16;
    println!("concurrency  interactions  per_second  p50_ms  p99_ms");
    for concurrency in [1usize, 16, 64] {
        let start = Instant::now();
        let per_task = per_level.div_ceil(concurrency);
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let (client, body) = (client.clone(), body.clone());
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::with_capacity(per_task);
                for _ in 0..per_task {
                    lat.push(one(client.clone(), body.clone()).await);
                }
                lat
            }));
        }
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await.unwrap());
        }
        let elapsed = start.elapsed();
        total += lat.len();
        lat.sort();
        println!(
            "{concurrency:>11}  {:>12}  {:>10.1}  {:>6.1}  {:>6.1}",
            lat.len(),
            lat.len() as f64 / elapsed.as_secs_f64(),
            percentile(&lat, 0.50).as_secs_f64() * 1000.0,
            percentile(&lat, 0.99).as_secs_f64() * 1000.0
        );
    }
    while total < 1000 {
        one(client.clone(), body.clone()).await;
        total += 1;
    }
    println!(
        "rss_kib after warm-up: {rss_start}; after {total} interactions: {}",
        rss_kib()
    );
}
