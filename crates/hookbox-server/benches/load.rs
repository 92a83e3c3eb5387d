//! Load benchmark of `hookbox-server`: interactions per second and p50/p99 latency at
//! concurrency 1, 16 and 64, with the offline agent running one `code_execution` per interaction
//! behind a one-command pre-hook gate, over real HTTP on 127.0.0.1; then RSS after 1000
//! interactions. Run: `cargo bench -p hookbox-server --bench load [-- --per-level N]`.
//!
//! The gate here spawns `/bin/sh -c <command>` with the hook payload on stdin, which is what a
//! command hook costs; once the sandbox is wired in, swap `GatedLocal` for the real executor.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hookbox_agent::LoopConfig;
use hookbox_agent::local::LocalBackend;
use hookbox_agent::offline::OfflineModel;
use hookbox_agent::seams::{ToolExecution, ToolExecutor};
use hookbox_protocol::{HookEvent, HookPayload, ToolCall};
use hookbox_server::{AppState, Services};
use hookbox_store::{SecretKey, SqliteOptions, SqliteStore};
use tokio::io::AsyncWriteExt;

const GATE: &str = r#"read -r payload; case "$payload" in *"rm -rf"*) echo '{"decision":"deny","reason":"blocked"}';; *) echo '{"decision":"allow"}';; esac"#;

#[derive(Debug)]
struct GatedLocal(Arc<LocalBackend>);

#[async_trait]
impl ToolExecutor for GatedLocal {
    async fn execute(&self, env: &str, call: &ToolCall) -> ToolExecution {
        let payload = HookPayload {
            tool_call: call.clone(),
            environment_id: env.to_owned(),
            error: None,
            hook_event_name: HookEvent::PreToolExecution,
        };
        let mut child = tokio::process::Command::new("/bin/sh")
            .args(["-c", GATE])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(serde_json::to_string(&payload).unwrap().as_bytes())
            .await
            .unwrap();
        stdin.write_all(b"\n").await.unwrap();
        drop(stdin);
        let out = child.wait_with_output().await.unwrap();
        if String::from_utf8_lossy(&out.stdout).contains("\"deny\"") {
            return ToolExecution::denied("blocked");
        }
        self.0.execute(env, call).await
    }
}

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

#[tokio::main]
async fn main() {
    let per_level: usize = std::env::args()
        .skip_while(|a| a != "--per-level")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(
        &dir.path().join("hookbox.db"),
        SecretKey::from_bytes([3; 32]),
        &SqliteOptions::default(),
    )
    .unwrap();
    let local = Arc::new(LocalBackend::new(dir.path().join("envs")));
    std::fs::create_dir_all(dir.path().join("envs")).unwrap();
    let state = AppState::new(Services {
        store: Arc::new(store),
        model: Arc::new(OfflineModel::new().unwrap()),
        executor: Arc::new(GatedLocal(local.clone())),
        environments: local.clone(),
        api_keys: vec![],
        loop_config: LoopConfig::default(),
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
        .json(&serde_json::json!({}))
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
