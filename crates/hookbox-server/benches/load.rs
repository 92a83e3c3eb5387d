//! Load benchmark of `hookbox-server` on the real pipeline: interactions per second and p50/p99
//! latency, with the offline agent running one `code_execution` per interaction in a real
//! sandbox behind a one-command pre-hook gate (hooks engine → command hook in the sandbox → tool
//! in the sandbox), over real HTTP on 127.0.0.1 with SQLite: cold sandboxes (one per call) at
//! concurrency 1 and 16, then warm sandboxes (the default) at 1, 16 and 64, with the ratio; then
//! the server's RSS after warm-up, 1000 and 10 000 interactions.
//! Run: `cargo bench -p hookbox-server --bench load [-- --per-level N] [--total N]`.
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

/// A server on 127.0.0.1 over its own data dir, with one environment holding the gate; `warm`
/// chooses warm sandboxes (the default) or a sandbox per call.
async fn start_server(
    warm: bool,
) -> (
    std::net::SocketAddr,
    serde_json::Value,
    hookbox_test_support::DataDir,
) {
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
    let options = SandboxOptions {
        warm,
        ..SandboxOptions::new(launcher)
    };
    let envs = EnvStore::open(dir.path(), options, EgressOptions::new(credentials)).unwrap();
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
    let env: serde_json::Value = reqwest::Client::new()
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
    let body = serde_json::json!({"agent": "antigravity-preview-09-2026", "input": "run `true`", "environment": env["id"]});
    (addr, body, dir)
}

/// One interaction, checked: completed, and the gate ran (and allowed) before the tool.
async fn one(
    client: reqwest::Client,
    addr: std::net::SocketAddr,
    body: serde_json::Value,
) -> Duration {
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
    let result = &v["steps"][2];
    assert_eq!(
        result["hooks"]["pre"]["trace"][0]["outcome"], "allow",
        "{v}"
    );
    assert_eq!(result["is_error"], false, "{v}");
    t.elapsed()
}

/// `n` interactions, `concurrency` at a time: (interactions/s, p50, p99).
async fn level(
    client: &reqwest::Client,
    addr: std::net::SocketAddr,
    body: &serde_json::Value,
    concurrency: usize,
    n: usize,
) -> (f64, Duration, Duration, usize) {
    let start = Instant::now();
    let per_task = n.div_ceil(concurrency);
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, body) = (client.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_task);
            for _ in 0..per_task {
                lat.push(one(client.clone(), addr, body.clone()).await);
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let elapsed = start.elapsed();
    lat.sort();
    (
        lat.len() as f64 / elapsed.as_secs_f64(),
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        lat.len(),
    )
}

async fn bench() {
    let per_level: usize = std::env::args()
        .skip_while(|a| a != "--per-level")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let total_target: usize = std::env::args()
        .skip_while(|a| a != "--total")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let client = reqwest::Client::new();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("sandboxes  concurrency  interactions  per_second  p50_ms  p99_ms  p99/p50");
    let mut rates = std::collections::HashMap::new();
    // Cold first (a sandbox per call, as before warm sandboxes), on its own server and data dir.
    {
        let (addr, body, _dir) = start_server(false).await;
        for _ in 0..16 {
            one(client.clone(), addr, body.clone()).await;
        }
        for concurrency in [1usize, 16] {
            let (rate, p50, p99, n) = level(&client, addr, &body, concurrency, per_level).await;
            rates.insert(("cold", concurrency), rate);
            println!(
                "{:>9}  {concurrency:>11}  {n:>12}  {rate:>10.1}  {:>6.1}  {:>6.1}  {:>7.2}",
                "cold",
                ms(p50),
                ms(p99),
                ms(p99) / ms(p50)
            );
        }
    }
    let (addr, body, _dir) = start_server(true).await;
    for _ in 0..16 {
        one(client.clone(), addr, body.clone()).await;
    }
    let rss_start = rss_kib();
    let mut total = 16;
    for concurrency in [1usize, 16, 64] {
        let (rate, p50, p99, n) = level(&client, addr, &body, concurrency, per_level).await;
        total += n;
        rates.insert(("warm", concurrency), rate);
        println!(
            "{:>9}  {concurrency:>11}  {n:>12}  {rate:>10.1}  {:>6.1}  {:>6.1}  {:>7.2}",
            "warm",
            ms(p50),
            ms(p99),
            ms(p99) / ms(p50)
        );
    }
    for concurrency in [1usize, 16] {
        println!(
            "ratio: warm / cold at concurrency {concurrency} = {:.2}x interactions/s",
            rates[&("warm", concurrency)] / rates[&("cold", concurrency)]
        );
    }
    // Memory: the server's RSS after warm-up, after 1000 and after `total_target` interactions
    // (run 16 at a time); growth between the last two would be a leak, not a cache.
    let mut rss_at = Vec::new();
    for target in [1000usize, total_target] {
        if total < target {
            let (_, _, _, n) = level(&client, addr, &body, 16, target - total).await;
            total += n;
        }
        rss_at.push((total, rss_kib()));
    }
    let shown: Vec<String> = rss_at
        .iter()
        .map(|(n, kib)| format!("after {n} interactions: {kib}"))
        .collect();
    println!("rss_kib after warm-up: {rss_start}; {}", shown.join("; "));
}
