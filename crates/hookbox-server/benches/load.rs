//! Load benchmark of `hookbox-server` on the real pipeline: interactions per second and p50/p99
//! latency, with the offline agent running one `code_execution` per interaction in a real
//! sandbox behind a one-command pre-hook gate (hooks engine → command hook in the sandbox → tool
//! in the sandbox), over real HTTP on 127.0.0.1 with SQLite: cold sandboxes (one per call) at
//! concurrency 1 and 16, then warm sandboxes (the default) at 1, 16 and 64, with the ratio; what
//! metrics and OTLP traces cost (off, then on); the server's RSS after warm-up, 1000 and 10 000
//! interactions; then PostgreSQL (`scripts/postgres.sh`): one replica, two replicas sharing the
//! database and a data dir, and two replicas forwarding every interaction to the other, with the
//! ratios to SQLite; checkpointing to an object store after every interaction, off and on; and
//! what cluster-wide quotas cost (counted in PostgreSQL, against a lone server's memory).
//! `--only-runtimes` compares warm sandboxes under namespaces and gVisor at concurrency 1 and 16,
//! then prints issue 35's goal 1 in `--rounds N` rounds: the floor of an interaction's programs
//! inside one running gVisor sandbox (the gate's `sh` then `bash -c true`, timed there, one pair
//! at a time and 16 loops at once) and the gVisor server's p50 at concurrency 1 and rate at 16 as
//! ratios of it; `--baseline-launcher PATH` (another build's `hookbox-sandbox-launcher`) adds the
//! same server launched by PATH, interleaved; `--goal-only` skips the namespaces comparison.
//! `--only-server [--rounds N]` is issue 35's floor: in each round, raw `sh -c true; bash -c
//! true` pairs (unsandboxed, 16 worker threads) then the warm server at concurrency 16, with the
//! ratio, and the same for the gate written `exec sh …` and `sh '…'` (the latter not one simple
//! command of plain words, so still through `/bin/sh -c`: the path before direct exec), with each
//! gate's CPU per interaction (the bench's cgroup's CPU time: run it in a cgroup of its own, e.g.
//! a fresh `cpuacct` directory it is moved into, for those columns to be its own); then the load
//! gate (128 `rm -rf` interactions at concurrency 64, every one denied) and the server's RSS over
//! `--total` interactions.
//! Run: `cargo bench -p hookbox-server --bench load [-- --per-level N] [--total N]
//! [--only-snapshots] [--only-quotas] [--only-runtimes [--rounds N] [--baseline-launcher PATH]
//! [--goal-only]] [--only-server [--rounds N]]`.
//!
//! The bench binary is also its own sandbox launcher (`__sandbox-exec`), as `hookbox` is; with
//! `HOOKBOX_SANDBOX_EXEC=PATH` (as `hookbox serve` honours it) sandboxes are launched by PATH
//! instead, e.g. `target/release/hookbox-sandbox-launcher`, the size of the installed
//! `hookbox-sandbox-exec` rather than of this whole binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox_agent::LoopConfig;
use hookbox_agent::offline::OfflineModel;
use hookbox_environments::environment::Environments;
use hookbox_environments::network::EgressOptions;
use hookbox_environments::runner::{Launcher, SandboxOptions};
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

/// CPU time used so far by every process of this bench's cgroup (the server, its client and
/// every sandbox it started), in ms: cgroup v2 `cpu.stat` `usage_usec`, or v1 `cpuacct.usage`.
/// Only this bench's own when it runs in a cgroup of its own (`--only-server` prints it per
/// interaction: CPU is what a level costs, whatever else the machine runs meanwhile).
fn cgroup_cpu_ms() -> Option<f64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "cpuacct") {
            let usage = format!("/sys/fs/cgroup/cpuacct{path}/cpuacct.usage");
            let ns: f64 = std::fs::read_to_string(usage).ok()?.trim().parse().ok()?;
            return Some(ns / 1e6);
        }
    }
    let line = cgroups.lines().find(|l| l.starts_with("0::"))?;
    let stat = std::fs::read_to_string(format!("/sys/fs/cgroup{}/cpu.stat", &line[3..])).ok()?;
    let usec: f64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))?
        .trim()
        .parse()
        .ok()?;
    Some(usec / 1e3)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Median, min and max of per-round values, as the rounds' summary lines print them.
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

fn spread(mut values: Vec<f64>) -> Spread {
    values.sort_by(f64::total_cmp);
    Spread {
        median: values[values.len() / 2],
        min: values[0],
        max: values[values.len() - 1],
    }
}

fn main() {
    // Re-executed as the sandbox launcher: must stay single-threaded, so before any runtime.
    if std::env::args().nth(1).as_deref() == Some(LAUNCHER_SUBCOMMAND) {
        std::process::exit(hookbox_sandbox::launcher_main());
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench());
}

/// A server on 127.0.0.1 over its own data dir and SQLite, with one environment holding the
/// gate; `warm` chooses warm sandboxes (the default) or a sandbox per call.
async fn start_server(
    warm: bool,
) -> (
    std::net::SocketAddr,
    serde_json::Value,
    hookbox_test_support::DataDir,
) {
    start_with(Setup {
        warm,
        ..Setup::default()
    })
    .await
}

/// [`start_server`] set up as `setup` says.
async fn start_with(
    setup: Setup,
) -> (
    std::net::SocketAddr,
    serde_json::Value,
    hookbox_test_support::DataDir,
) {
    let (addr, body, dir, _) = start_with_envs(setup).await;
    (addr, body, dir)
}

/// [`start_with`], also returning the server's environments.
async fn start_with_envs(
    setup: Setup,
) -> (
    std::net::SocketAddr,
    serde_json::Value,
    hookbox_test_support::DataDir,
    Environments,
) {
    // Its environment's disk is a loop-mounted image, detached when this goes.
    let dir = hookbox_test_support::DataDir::new();
    let store = SqliteStore::open(
        &dir.path().join("hookbox.db"),
        SecretKey::from_bytes([3; 32]),
        &SqliteOptions::default(),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (addr, envs) = serve_with_envs(listener, dir.path(), Arc::new(store), None, &setup);
    let body = gated_environment(addr).await;
    (addr, body, dir, envs)
}

/// How a bench server's sandboxes and environments are set up.
#[derive(Debug, Clone, Default)]
struct Setup {
    warm: bool,
    /// Each environment's disk image cap; `None`: a plain directory.
    disk: Option<u64>,
    /// Snapshots to this object store (checkpoint after every interaction).
    snapshots: Option<String>,
    /// The environments' runtime.
    runtime: hookbox_environments::RuntimeKind,
    /// Sandboxes launched by this program instead of the one `hookbox serve` would find (a
    /// previous build's `hookbox-sandbox-launcher`, for before/after in one run).
    launcher: Option<std::path::PathBuf>,
}

/// Serves the API over `store` and the environments in `data` on `listener`.
fn serve_on(
    listener: tokio::net::TcpListener,
    data: &std::path::Path,
    store: Arc<dyn hookbox_store::Store>,
    cluster: Option<hookbox_server::cluster::ClusterConfig>,
    setup: &Setup,
) -> std::net::SocketAddr {
    serve_with_envs(listener, data, store, cluster, setup).0
}

/// [`serve_on`], also returning the server's environments (to run programs in one of them
/// beside the server).
fn serve_with_envs(
    listener: tokio::net::TcpListener,
    data: &std::path::Path,
    store: Arc<dyn hookbox_store::Store>,
    cluster: Option<hookbox_server::cluster::ClusterConfig>,
    setup: &Setup,
) -> (std::net::SocketAddr, Environments) {
    // As `hookbox serve` finds it: `HOOKBOX_SANDBOX_EXEC` (the small standalone launcher, as
    // installed) when set, else this binary.
    let launcher = match &setup.launcher {
        Some(path) => Launcher::standalone(path),
        None => Launcher::from_env_or_current_exe(LAUNCHER_SUBCOMMAND).unwrap(),
    };
    let credentials =
        Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data).unwrap());
    let options = SandboxOptions {
        warm: setup.warm,
        disk_limit_bytes: setup.disk,
        runtime: setup.runtime,
        ..SandboxOptions::new(launcher)
    };
    let envs = Environments::open(data, options, EgressOptions::new(credentials)).unwrap();
    let mut backend = SandboxBackend::new(envs.clone());
    let returned = envs.clone();
    let mut lifecycle = hookbox_server::lifecycle::Lifecycle::default();
    if let Some(url) = &setup.snapshots {
        let manager = hookbox_snapshot::Manager::new(
            hookbox_snapshot::Snapshots::open(url).unwrap(),
            envs,
            Default::default(),
        );
        backend = backend.with_snapshots(manager.clone());
        lifecycle.snapshots = Some(manager);
    }
    let backend = Arc::new(backend);
    let state = AppState::replica(
        Services {
            store,
            model: Arc::new(OfflineModel::new().unwrap()),
            executor: backend.clone(),
            environments: backend,
            api_keys: vec![],
            allow_keyless: true,
            loop_config: LoopConfig::default(),
            quotas: unbinding_quotas(),
            sandbox_slots: None,
            lifecycle,
            uploads: Default::default(),
        },
        cluster,
    );
    let addr = listener.local_addr().unwrap();
    // What `hookbox serve` listens with, so the guard's cost is in the numbers.
    let guard = hookbox_server::browser_policy(&Default::default(), &[], &[], None).unwrap();
    tokio::spawn(async move {
        hookbox_server::serve(listener, state, &guard, std::future::pending()).await
    });
    (addr, returned)
}

/// The default quotas but a request bucket that never runs dry: the bench measures what serving
/// (and, for the quota rows, counting) costs, not the 429s of the default 1000 requests/s,
/// which reads at concurrency 16 exceed. A high rate alone is not enough on PostgreSQL (a
/// replica refills by `now()` of its transaction, which can be before the last take's when
/// replicas queue on the bucket's row, so a high rate also drains it), hence the burst too; a
/// replica then takes 50 tokens per round trip to PostgreSQL instead of 40.
fn unbinding_quotas() -> hookbox_server::quota::QuotaConfig {
    let mut config = hookbox_server::quota::QuotaConfig::default();
    config.quotas.requests_per_second = Some(1e9);
    config.quotas.burst = Some(1_000_000_000);
    config
}

/// A new environment holding the gate, made through `addr`; the interaction body that uses it.
async fn gated_environment(addr: std::net::SocketAddr) -> serde_json::Value {
    environment_with(addr, HOOKS).await
}

/// [`gated_environment`] with `hooks` as its hooks file.
async fn environment_with(addr: std::net::SocketAddr, hooks: &str) -> serde_json::Value {
    let env: serde_json::Value = reqwest::Client::new()
        .post(format!("http://{addr}/v1beta/environments"))
        .json(&serde_json::json!({"sources": [
            {"type": "inline", "target": ".agents/hooks.json", "content": hooks},
            {"type": "inline", "target": ".agents/gate.sh", "content": GATE},
        ]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    serde_json::json!({"agent": "antigravity-preview-09-2026", "input": "run `true`", "environment": env["id"]})
}

/// An OTLP/HTTP receiver on 127.0.0.1 that accepts every export (and counts them).
fn otlp_sink() -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = count.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut writer = conn.try_clone().unwrap();
                let mut reader = std::io::BufReader::new(conn);
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
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
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let _ = writer.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
                    );
                }
            });
        }
    });
    (addr, count)
}

/// A throwaway PostgreSQL cluster (`scripts/postgres.sh`), stopped when dropped.
struct Postgres(String);

impl Postgres {
    fn start() -> Option<Self> {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres.sh");
        let out = std::process::Command::new(script)
            .arg("start")
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!("postgres: {}", String::from_utf8_lossy(&out.stderr));
            return None;
        }
        Some(Self(String::from_utf8_lossy(&out.stdout).trim().to_owned()))
    }

    /// A fresh database's URL.
    fn database(&self, name: &str) -> String {
        let out = std::process::Command::new("psql")
            .arg(&self.0)
            .args(["-qc", &format!("CREATE DATABASE {name}")])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!("{}/{name}", self.0.rsplit_once('/').unwrap().0)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres.sh");
        let _ = std::process::Command::new(script)
            .args(["stop", &self.0])
            .status();
    }
}

/// `n` replicas on `database` sharing `data`, each heartbeating; their addresses.
async fn replicas(database: &str, data: &std::path::Path, n: usize) -> Vec<std::net::SocketAddr> {
    let mut addrs = Vec::new();
    for i in 0..n {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let store = hookbox_store::PostgresStore::connect_replica(
            database,
            SecretKey::from_bytes([3; 32]),
            &Default::default(),
            hookbox_store::Replica {
                id: format!("r_bench{i}"),
                url: format!("http://{addr}"),
                lease_ttl: Duration::from_secs(10),
            },
        )
        .await
        .unwrap();
        let cluster = store.cluster().unwrap();
        cluster.heartbeat().await.unwrap();
        tokio::spawn(hookbox_server::cluster::run(cluster.clone()));
        let config = hookbox_server::cluster::ClusterConfig {
            cluster,
            secret: "a-bench-cluster-secret".into(),
        };
        addrs.push(serve_on(
            listener,
            data,
            Arc::new(store),
            Some(config),
            &Setup {
                warm: true,
                ..Setup::default()
            },
        ));
    }
    addrs
}

/// [`one`] against a (server, body) target.
async fn one_at(
    client: &reqwest::Client,
    (addr, body): &(std::net::SocketAddr, serde_json::Value),
) -> Duration {
    one(client.clone(), *addr, body.clone()).await
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
    level_over(client, &[(addr, body.clone())], concurrency, n).await
}

/// [`level`] with the workers spread over `targets` (a server and the body it gets).
async fn level_over(
    client: &reqwest::Client,
    targets: &[(std::net::SocketAddr, serde_json::Value)],
    concurrency: usize,
    n: usize,
) -> (f64, Duration, Duration, usize) {
    let start = Instant::now();
    let per_task = n.div_ceil(concurrency);
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let (addr, body) = targets[worker % targets.len()].clone();
        let client = client.clone();
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

/// What checkpointing after every interaction costs: the same warm server with disk images,
/// snapshots off, then on (to `HOOKBOX_BENCH_SNAPSHOT_URL`, else a `file://` directory), at
/// concurrency 16; then the checkpoints that ran.
async fn snapshot_rows(client: &reqwest::Client, per_level: usize) {
    let scratch = tempfile::tempdir().unwrap();
    let url = std::env::var("HOOKBOX_BENCH_SNAPSHOT_URL")
        .unwrap_or_else(|_| format!("file://{}/objects", scratch.path().display()));
    let mut rates = Vec::new();
    for snapshots in [None, Some(url.clone())] {
        let on = snapshots.is_some();
        // 1 GiB disk images, as snapshots need.
        let (addr, body, _dir) = start_with(Setup {
            warm: true,
            disk: Some(1 << 30),
            snapshots,
            ..Setup::default()
        })
        .await;
        for _ in 0..16 {
            one(client.clone(), addr, body.clone()).await;
        }
        let (rate, p50, p99, n) = level(client, addr, &body, 16, per_level).await;
        println!(
            "checkpoints {}: {n} interactions at concurrency 16: {rate:.1}/s (p50 {:.1} ms, p99 {:.1} ms)",
            if on { "on " } else { "off" },
            p50.as_secs_f64() * 1000.0,
            p99.as_secs_f64() * 1000.0
        );
        rates.push(rate);
    }
    println!(
        "checkpointing after every interaction: {:.3}x interactions/s of it off (the goal is >= 0.8x; store {})",
        rates[1] / rates[0],
        hookbox_snapshot::location::redact(&url)
    );
}

/// `n` authenticated reads (`GET /v1beta/agents`), `concurrency` at a time: reads per second.
async fn reads(
    client: &reqwest::Client,
    addr: std::net::SocketAddr,
    concurrency: usize,
    n: usize,
) -> f64 {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..n.div_ceil(concurrency) {
                let resp = client
                    .get(format!("http://{addr}/v1beta/agents"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 200);
                resp.bytes().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (n.div_ceil(concurrency) * concurrency) as f64 / start.elapsed().as_secs_f64()
}

/// What cluster-wide quotas cost: a lone server on PostgreSQL (quotas counted in its memory)
/// against one replica (the request bucket, running interactions and tool calls counted in
/// PostgreSQL), for reads and for interactions.
async fn quota_rows(client: &reqwest::Client, per_level: usize) {
    let Some(pg) = Postgres::start() else {
        println!("postgres: not available (scripts/setup.sh installs it); no quota rows");
        return;
    };
    let dir = hookbox_test_support::DataDir::new();
    let store = hookbox_store::PostgresStore::connect(
        &pg.database("bench_lone"),
        SecretKey::from_bytes([3; 32]),
        &Default::default(),
    )
    .await
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let lone = serve_on(
        listener,
        dir.path(),
        Arc::new(store),
        None,
        &Setup {
            warm: true,
            ..Setup::default()
        },
    );
    let dir2 = hookbox_test_support::DataDir::new();
    let replica = replicas(&pg.database("bench_quotas"), dir2.path(), 1).await[0];
    let n = per_level * 8;
    let mut rows = Vec::new();
    for (label, addr) in [("quotas in memory ", lone), ("quotas in postgres", replica)] {
        let body = gated_environment(addr).await;
        for _ in 0..16 {
            one(client.clone(), addr, body.clone()).await;
        }
        reads(client, addr, 16, 256).await;
        let r1 = reads(client, addr, 1, n / 4).await;
        let r16 = reads(client, addr, 16, n).await;
        let (i16, ..) = level(client, addr, &body, 16, per_level).await;
        println!(
            "{label}: reads {r1:.0}/s at concurrency 1, {r16:.0}/s at 16; interactions {i16:.1}/s at 16"
        );
        rows.push((r1, r16, i16));
    }
    let (lone, shared) = (rows[0], rows[1]);
    println!(
        "cluster-wide quotas: {:.0} us more per request at concurrency 1; {:.3}x reads/s and {:.3}x interactions/s at 16",
        (1.0 / shared.0 - 1.0 / lone.0) * 1e6,
        shared.1 / lone.1,
        shared.2 / lone.2
    );
}

/// Warm sandboxes at concurrency 1 and 16 under each runtime, with gVisor's rate at 16 as a
/// ratio of the namespaces one (same gate, same interaction); then issue 35's goal 1 in
/// `rounds` rounds (see [`gvisor_goal_rows`]): gVisor's floor and the gVisor server at concurrency
/// 1 and 16 against it, and, with `baseline` (another build's `hookbox-sandbox-launcher`), the
/// same server launched by it, interleaved with this build's in every round.
async fn runtime_rows(
    client: &reqwest::Client,
    per_level: usize,
    rounds: usize,
    baseline: Option<std::path::PathBuf>,
) {
    use hookbox_environments::RuntimeKind;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("runtime     concurrency  interactions  per_second  p50_ms  p99_ms");
    let mut rates = Vec::new();
    for runtime in [RuntimeKind::Namespaces, RuntimeKind::Gvisor] {
        let (addr, body, _dir) = start_with(Setup {
            warm: true,
            runtime,
            ..Setup::default()
        })
        .await;
        for _ in 0..16 {
            one(client.clone(), addr, body.clone()).await;
        }
        let (rate1, p50_1, p99_1, n1) = level(client, addr, &body, 1, per_level.div_ceil(4)).await;
        println!(
            "{:<10}  {:>11}  {n1:>12}  {rate1:>10.1}  {:>6.1}  {:>6.1}",
            runtime.name(),
            1,
            ms(p50_1),
            ms(p99_1)
        );
        // The gate written `sh '/.agents/gate.sh'`: through `/bin/sh -c` (a second shell), as
        // every gate ran before a simple command was exec'd directly; same sandbox, right after.
        let shell_body = environment_with(
            addr,
            &HOOKS.replace("\"sh /.agents/gate.sh\"", "\"sh '/.agents/gate.sh'\""),
        )
        .await;
        one(client.clone(), addr, shell_body.clone()).await;
        // One interaction of each, alternating, so that the machine's noise hits both alike.
        let (mut direct, mut shell) = (Vec::new(), Vec::new());
        for _ in 0..per_level.div_ceil(4) {
            direct.push(one(client.clone(), addr, body.clone()).await);
            shell.push(one(client.clone(), addr, shell_body.clone()).await);
        }
        direct.sort();
        shell.sort();
        let (p50_d, p50_s) = (percentile(&direct, 0.5), percentile(&shell, 0.5));
        println!(
            "{:<10}  c1 alternating: the gate p50 {:.1} ms, through /bin/sh -c p50 {:.1} ms: {:.3}x",
            runtime.name(),
            ms(p50_d),
            ms(p50_s),
            ms(p50_d) / ms(p50_s)
        );
        let (rate, p50, p99, n) = level(client, addr, &body, 16, per_level).await;
        println!(
            "{:<10}  {:>11}  {n:>12}  {rate:>10.1}  {:>6.1}  {:>6.1}",
            runtime.name(),
            16,
            ms(p50),
            ms(p99)
        );
        rates.push(rate);
    }
    println!(
        "gvisor/namespaces interactions per second at concurrency 16: {:.2}x",
        rates[1] / rates[0]
    );
    gvisor_goal_rows(client, per_level, rounds, baseline).await;
}

/// A hook's payload, about the size of the server's.
const PAYLOAD: &str = r#"{"hook_event_name":"pre_tool_execution","tool_name":"code_execution","tool_input":{"code":"true","language":"bash"}}"#;

/// The gate as the floor runs it inside the sandbox, and the tool's program.
const FLOOR_GATE: &str = "sh /.agents/gate.sh </dev/null >/dev/null";
const FLOOR_TOOL: &str = "bash -c true </dev/null";

/// Runs bash `script` (which prints two `$EPOCHREALTIME`s) in `runner`: the seconds between.
async fn timed_in(runner: &hookbox_environments::runner::SandboxRunner, script: String) -> f64 {
    let out = runner
        .run_argv(
            vec!["/bin/bash".into(), "-c".into(), script],
            Vec::new(),
            Duration::from_secs(300),
            1 << 16,
        )
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().unwrap());
    let (s, e) = (it.next().unwrap(), it.next().unwrap());
    e - s
}

/// `body` `n` times in a row inside the sandbox, timed there: ms each.
async fn floor_each(
    runner: &hookbox_environments::runner::SandboxRunner,
    body: &str,
    n: usize,
) -> f64 {
    let script = format!(
        "s=$EPOCHREALTIME; for i in $(seq {n}); do {body}; done; e=$EPOCHREALTIME; echo \"$s $e\""
    );
    timed_in(runner, script).await * 1000.0 / n as f64
}

/// The floor at concurrency 16: 16 loops of `per_loop` gate + tool pairs at once inside the
/// sandbox, timed there: pairs per second (what the floor allows on the machine's cores).
async fn floor_c16(runner: &hookbox_environments::runner::SandboxRunner, per_loop: usize) -> f64 {
    let script = format!(
        "s=$EPOCHREALTIME; for j in $(seq 16); do (for i in $(seq {per_loop}); do {FLOOR_GATE}; {FLOOR_TOOL}; done) & done; wait; e=$EPOCHREALTIME; echo \"$s $e\""
    );
    (16 * per_loop) as f64 / timed_in(runner, script).await
}

/// One warm call of `argv` with `stdin`, checked: its wall time from hookbox's side.
async fn call_in(
    runner: &hookbox_environments::runner::SandboxRunner,
    argv: &[&str],
    stdin: &str,
) -> Duration {
    let t = Instant::now();
    let out = runner
        .run_argv(
            argv.iter().map(|a| a.to_string()).collect(),
            stdin.as_bytes().to_vec(),
            Duration::from_secs(120),
            1 << 16,
        )
        .await
        .unwrap();
    assert!(out.success(), "{argv:?}");
    t.elapsed()
}

/// The gate as a command hook runs it (`/bin/sh -c`, its payload on stdin) and the tool.
const GATE_ARGV: [&str; 3] = ["/bin/sh", "-c", "sh /.agents/gate.sh"];
const TOOL_ARGV: [&str; 3] = ["/bin/bash", "-c", "true"];

/// Where a gVisor interaction's time goes without the server, in `runner`'s sandbox: the
/// gate and the tool alone inside it (ms each), the same as `n` warm calls each from
/// hookbox's runner (p50 ms), and pairs of those calls from 16 tasks (pairs per second).
async fn call_breakdown(
    runner: &hookbox_environments::runner::SandboxRunner,
    n: usize,
) -> [f64; 5] {
    let gate = floor_each(runner, FLOOR_GATE, n).await;
    let tool = floor_each(runner, FLOOR_TOOL, n).await;
    let (mut gates, mut tools) = (Vec::new(), Vec::new());
    for _ in 0..n {
        gates.push(call_in(runner, &GATE_ARGV, PAYLOAD).await);
        tools.push(call_in(runner, &TOOL_ARGV, "").await);
    }
    gates.sort();
    tools.sort();
    let t = Instant::now();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let runner = runner.clone();
            tokio::spawn(async move {
                for _ in 0..2 {
                    call_in(&runner, &GATE_ARGV, PAYLOAD).await;
                    call_in(&runner, &TOOL_ARGV, "").await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let pairs = 32.0 / t.elapsed().as_secs_f64();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    [
        gate,
        tool,
        ms(percentile(&gates, 0.5)),
        ms(percentile(&tools, 0.5)),
        pairs,
    ]
}

/// Issue 35's goal 1 under `hookbox serve --runtime gvisor`, `rounds` rounds, each
/// interleaving short batches so that the machine's load is the same for what is compared:
/// the floor of an interaction's programs inside one running gVisor sandbox (an environment
/// with the same files, opened as the server opens its own, so built the way hookbox builds it;
/// the gate `sh /.agents/gate.sh` then `bash -c true`, timed there), then each build's server
/// (this one, and `baseline`'s launcher when given, each its own server, order alternating)
/// at concurrency 1 (p50 over `per_level / 4` interactions); the floor at concurrency 16 (16
/// loops at once), then each server at concurrency 16 (`per_level / 2` interactions). Ratios
/// to the floor of the same round, with their spread; then where the time goes without the
/// server ([`call_breakdown`]).
async fn gvisor_goal_rows(
    client: &reqwest::Client,
    per_level: usize,
    rounds: usize,
    baseline: Option<std::path::PathBuf>,
) {
    use hookbox_environments::RuntimeKind;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut builds: Vec<(&str, Option<std::path::PathBuf>)> = vec![("this", None)];
    if let Some(path) = baseline {
        builds.push(("baseline", Some(path)));
    }
    let mut servers = Vec::new();
    let mut floor_env = None;
    for (name, launcher) in &builds {
        let (addr, body, dir, envs) = start_with_envs(Setup {
            warm: true,
            runtime: RuntimeKind::Gvisor,
            launcher: launcher.clone(),
            ..Setup::default()
        })
        .await;
        for _ in 0..4 {
            one(client.clone(), addr, body.clone()).await;
        }
        if floor_env.is_none() {
            // The server never opens this one.
            let floor_body = gated_environment(addr).await;
            let id = floor_body["environment"].as_str().unwrap().to_owned();
            floor_env = Some(tokio::task::block_in_place(|| envs.open_env(&id).unwrap()));
        }
        servers.push((*name, addr, body, dir, envs));
    }
    let floor_env = floor_env.unwrap();
    let runner = floor_env.runner().clone();
    // Once unmeasured: the programs' files in gVisor's caches, as the server's are.
    floor_each(&runner, &format!("{FLOOR_GATE}; {FLOOR_TOOL}"), 2).await;
    let n1 = per_level.div_ceil(4).max(4);
    let n16 = per_level.div_ceil(2).max(16);
    println!(
        "round  build     floor_pair_ms  c1_p50_ms  c1_ratio  floor_c16_pairs_per_s  c16_per_s  c16_p50_ms  c16_ratio"
    );
    let mut ratios: std::collections::BTreeMap<&str, (Vec<f64>, Vec<f64>)> = Default::default();
    for round in 1..=rounds {
        let mut order: Vec<usize> = (0..servers.len()).collect();
        if round % 2 == 0 {
            order.reverse();
        }
        let pair_ms = floor_each(&runner, &format!("{FLOOR_GATE}; {FLOOR_TOOL}"), 10).await;
        let mut c1 = Vec::new();
        for &i in &order {
            let (_, addr, body, _, _) = &servers[i];
            c1.push((i, level(client, *addr, body, 1, n1).await.1));
        }
        let floor_rate = floor_c16(&runner, 2).await;
        let mut c16 = Vec::new();
        for &i in &order {
            let (_, addr, body, _, _) = &servers[i];
            let (rate, p50, _, _) = level(client, *addr, body, 16, n16).await;
            c16.push((i, rate, p50));
        }
        for (i, server) in servers.iter().enumerate() {
            let name = server.0;
            let p50_1 = c1.iter().find(|(j, _)| *j == i).unwrap().1;
            let &(_, rate, p50) = c16.iter().find(|(j, _, _)| *j == i).unwrap();
            let c1_ratio = ms(p50_1) / pair_ms;
            let c16_ratio = rate / floor_rate;
            println!(
                "{round:>5}  {name:<8}  {pair_ms:>13.1}  {:>9.1}  {c1_ratio:>7.2}x  {floor_rate:>21.1}  {rate:>9.1}  {:>10.1}  {c16_ratio:>8.2}x",
                ms(p50_1),
                ms(p50)
            );
            let entry = ratios.entry(name).or_default();
            entry.0.push(c1_ratio);
            entry.1.push(c16_ratio);
        }
    }
    for (name, (c1, c16)) in ratios {
        let (c1, c16) = (spread(c1), spread(c16));
        println!(
            "{name}: c1 p50 / floor median {:.2}x (min {:.2}, max {:.2}; goal <= 1.1x); c16 / floor median {:.2}x (min {:.2}, max {:.2}; goal >= 0.8x)",
            c1.median, c1.min, c1.max, c16.median, c16.min, c16.max
        );
    }
    // Without the server, in the floor's sandbox (this build's launcher), then the server of
    // this build at concurrency 1 right after.
    let [gate, tool, gate_call, tool_call, call_pairs] = call_breakdown(&runner, 10).await;
    let floor_rate = floor_c16(&runner, 2).await;
    let (_, addr, body, _, _) = &servers[0];
    let p50_1 = ms(level(client, *addr, body, 1, n1).await.1);
    println!(
        "without the server: in the sandbox gate {gate:.1} ms, bash -c true {tool:.1} ms; as warm calls from the runner: gate {gate_call:.1} ms (+{:.1}), bash {tool_call:.1} ms (+{:.1}); 16 tasks of call pairs {call_pairs:.1}/s ({:.2}x the floor's {floor_rate:.1}/s); this server's c1 p50 {p50_1:.1} ms, {:.1} ms beyond both calls",
        gate_call - gate,
        tool_call - tool,
        call_pairs / floor_rate,
        p50_1 - gate_call - tool_call
    );
    tokio::task::block_in_place(|| drop(floor_env));
}

/// `n` pairs of `sh -c true` then `bash -c true`, spawned directly (no sandbox) by `workers`
/// threads: pairs per second. What the server's interaction needs at least: its gate is a
/// shell, its tool a bash.
fn raw_pairs(workers: usize, n: usize) -> f64 {
    let per_worker = n.div_ceil(workers);
    let start = Instant::now();
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..per_worker {
                    for shell in ["sh", "bash"] {
                        let status = std::process::Command::new(shell)
                            .args(["-c", "true"])
                            .status()
                            .unwrap();
                        assert!(status.success());
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    (per_worker * workers) as f64 / start.elapsed().as_secs_f64()
}

/// The load gate: `n` interactions asking for `rm -rf`, `concurrency` at a time, each one
/// denied by the gate (a lost decision would let the call run, or fail open).
async fn load_gate(
    client: &reqwest::Client,
    addr: std::net::SocketAddr,
    environment: &serde_json::Value,
    concurrency: usize,
    n: usize,
) {
    let mut body = environment.clone();
    body["input"] = serde_json::json!("Run `rm -rf /tmp/forbidden` using code_execution.");
    let per_task = n.div_ceil(concurrency);
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let client = client.clone();
            let body = body.clone();
            tokio::spawn(async move {
                let mut denied = 0usize;
                for _ in 0..per_task {
                    let resp = client
                        .post(format!("http://{addr}/v1beta/interactions"))
                        .json(&body)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(resp.status(), 200);
                    let v: serde_json::Value = resp.json().await.unwrap();
                    assert_eq!(v["status"], "completed", "{v}");
                    let result = &v["steps"][2];
                    assert_eq!(result["hooks"]["pre"]["trace"][0]["outcome"], "deny", "{v}");
                    assert_eq!(result["is_error"], true, "{v}");
                    denied += 1;
                }
                denied
            })
        })
        .collect();
    let mut denied = 0;
    for t in tasks {
        denied += t.await.unwrap();
    }
    assert_eq!(denied, per_task * concurrency);
    println!(
        "load gate: {denied} of {denied} `rm -rf` interactions denied at concurrency {concurrency}"
    );
}

/// Issue 35's server goal: rounds of raw spawn pairs against the warm server at concurrency 16
/// (same run, interleaved), the ratio of each round and their spread; the load gate; RSS.
async fn server_rows(client: &reqwest::Client, per_level: usize, rounds: usize, total: usize) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (addr, body, _dir) = start_server(true).await;
    for _ in 0..16 {
        one(client.clone(), addr, body.clone()).await;
    }
    let rss_start = rss_kib();
    let mut done = 16;
    let mut ratios = Vec::new();
    // The same gate written `exec sh …`: its `/bin/sh -c` becomes the gate's shell instead of
    // starting a second one (what the hook's author can save).
    let exec_body = environment_with(addr, &HOOKS.replace("\"sh /", "\"exec sh /")).await;
    for _ in 0..16 {
        one(client.clone(), addr, exec_body.clone()).await;
    }
    let mut exec_ratios = Vec::new();
    // The same gate written `sh '/.agents/gate.sh'`: not one simple command of plain words, so
    // it keeps the `/bin/sh -c` in front (two shells, as every gate had before the sandbox
    // exec'd a simple command directly): the old path, in the same run.
    let shell_body = environment_with(
        addr,
        &HOOKS.replace("\"sh /.agents/gate.sh\"", "\"sh '/.agents/gate.sh'\""),
    )
    .await;
    for _ in 0..16 {
        one(client.clone(), addr, shell_body.clone()).await;
    }
    let mut shell_ratios = Vec::new();
    // CPU per interaction of each gate (the whole cgroup's, see `cgroup_cpu_ms`), per round.
    let mut cpu: [Vec<f64>; 3] = Default::default();
    println!(
        "round  raw_pairs_per_s  server_per_s  p50_ms  p99_ms  ratio  exec_gate_per_s  exec_ratio  shell_gate_per_s  shell_ratio  cpu_ms: gate  exec  shell"
    );
    for round in 1..=rounds {
        let raw = tokio::task::spawn_blocking(move || raw_pairs(16, per_level))
            .await
            .unwrap();
        let mut cpu_of = |slot: usize, before: Option<f64>, n: usize| {
            let used = cgroup_cpu_ms().zip(before).map(|(a, b)| (a - b) / n as f64);
            cpu[slot].push(used.unwrap_or(f64::NAN));
            used.unwrap_or(f64::NAN)
        };
        let before = cgroup_cpu_ms();
        let (rate, p50, p99, n) = level(client, addr, &body, 16, per_level).await;
        let gate_cpu = cpu_of(0, before, n);
        let before = cgroup_cpu_ms();
        let (exec_rate, _, _, m) = level(client, addr, &exec_body, 16, per_level).await;
        let exec_cpu = cpu_of(1, before, m);
        let before = cgroup_cpu_ms();
        let (shell_rate, _, _, k) = level(client, addr, &shell_body, 16, per_level).await;
        let shell_cpu = cpu_of(2, before, k);
        done += n + m + k;
        ratios.push(rate / raw);
        exec_ratios.push(exec_rate / raw);
        shell_ratios.push(shell_rate / raw);
        println!(
            "{round:>5}  {raw:>15.1}  {rate:>12.1}  {:>6.1}  {:>6.1}  {:>5.3}  {exec_rate:>15.1}  {:>10.3}  {shell_rate:>16.1}  {:>11.3}  {gate_cpu:>12.2}  {exec_cpu:>4.2}  {shell_cpu:>5.2}",
            ms(p50),
            ms(p99),
            rate / raw,
            exec_rate / raw,
            shell_rate / raw
        );
    }
    for (name, values) in ["gate", "exec gate", "shell gate"].into_iter().zip(cpu) {
        let cpu = spread(values);
        println!(
            "CPU per interaction, {name}: median {:.2} ms (min {:.2}, max {:.2})",
            cpu.median, cpu.min, cpu.max
        );
    }
    let shell = spread(shell_ratios);
    println!(
        "the gate as `sh '/.agents/gate.sh'` (through /bin/sh -c): median {:.3}x (min {:.3}, max {:.3})",
        shell.median, shell.min, shell.max
    );
    let exec = spread(exec_ratios);
    println!(
        "the gate as `exec sh /.agents/gate.sh`: median {:.3}x (min {:.3}, max {:.3})",
        exec.median, exec.min, exec.max
    );
    let server = spread(ratios);
    println!(
        "server / raw pairs at concurrency 16: median {:.3}x (min {:.3}, max {:.3}, {rounds} rounds; the goal is >= 0.5x)",
        server.median, server.min, server.max
    );
    load_gate(client, addr, &body, 64, 128).await;
    done += 128;
    let mut rss_at = Vec::new();
    for target in [1000usize, total] {
        if done < target {
            let (_, _, _, n) = level(client, addr, &body, 16, target - done).await;
            done += n;
        }
        rss_at.push((done, rss_kib()));
    }
    let shown: Vec<String> = rss_at
        .iter()
        .map(|(n, kib)| format!("after {n} interactions: {kib}"))
        .collect();
    println!("rss_kib after warm-up: {rss_start}; {}", shown.join("; "));
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
    if std::env::args().any(|a| a == "--only-snapshots") {
        snapshot_rows(&client, per_level).await;
        return;
    }
    if std::env::args().any(|a| a == "--only-quotas") {
        quota_rows(&client, per_level).await;
        return;
    }
    if std::env::args().any(|a| a == "--only-runtimes") {
        let rounds = std::env::args()
            .skip_while(|a| a != "--rounds")
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(2);
        let baseline = std::env::args()
            .skip_while(|a| a != "--baseline-launcher")
            .nth(1)
            .map(std::path::PathBuf::from);
        if std::env::args().any(|a| a == "--goal-only") {
            gvisor_goal_rows(&client, per_level, rounds, baseline).await;
        } else {
            runtime_rows(&client, per_level, rounds, baseline).await;
        }
        return;
    }
    if std::env::args().any(|a| a == "--only-server") {
        let rounds = std::env::args()
            .skip_while(|a| a != "--rounds")
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(3);
        server_rows(&client, per_level, rounds, total_target).await;
        return;
    }
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
    // What metrics and traces cost: the same level without any subscriber (events disabled),
    // then with the metrics layer counting and every span exported over OTLP/HTTP to a receiver
    // on 127.0.0.1 (as `hookbox serve` runs with OTEL_EXPORTER_OTLP_ENDPOINT set).
    let (off, ..) = level(&client, addr, &body, 16, per_level).await;
    let (receiver, received) = otlp_sink();
    let provider = {
        use opentelemetry::trace::TracerProvider as _;
        use opentelemetry_otlp::WithExportConfig as _;
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(format!("http://{receiver}/v1/traces"))
            .build()
            .unwrap();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .build();
        let tracer = provider.tracer("hookbox-bench");
        let _ = tracing_subscriber::registry()
            .with(
                hookbox_server::metrics::MetricsLayer
                    .with_filter(hookbox_server::metrics::layer_targets()),
            )
            .with(
                tracing_opentelemetry::layer()
                    .with_tracer(tracer)
                    .with_filter(hookbox_server::metrics::layer_targets()),
            )
            .try_init();
        provider
    };
    let (on, ..) = level(&client, addr, &body, 16, per_level).await;
    let _ = provider.force_flush();
    let counted = hookbox_server::metrics::Metrics::global().render();
    assert!(counted.contains("hookbox_tool_calls_total"), "{counted}");
    let exports = received.load(std::sync::atomic::Ordering::Relaxed);
    assert!(exports > 0, "no span export reached the receiver");
    println!(
        "metrics + traces at concurrency 16: {off:.1} interactions/s off, {on:.1} on = {:.3}x (the goal is >= 0.95x; {exports} OTLP exports received)",
        on / off
    );
    total += 2 * per_level;

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

    snapshot_rows(&client, per_level).await;
    quota_rows(&client, per_level).await;

    // PostgreSQL: one replica, then two sharing the database and a data dir (each client
    //    talks to one replica, in the environment that replica holds), then every request sent
    //    to the replica that does not hold the environment (forwarded).
    match Postgres::start() {
        None => {
            println!("postgres: not available (scripts/setup.sh installs it); no PostgreSQL rows")
        }
        Some(pg) => {
            let dir = hookbox_test_support::DataDir::new();
            let one = replicas(&pg.database("bench_one"), dir.path(), 1).await;
            let target = [(one[0], gated_environment(one[0]).await)];
            for _ in 0..16 {
                one_at(&client, &target[0]).await;
            }
            for concurrency in [1usize, 16] {
                let (rate, p50, p99, n) =
                    level_over(&client, &target, concurrency, per_level).await;
                rates.insert(("pg1", concurrency), rate);
                println!(
                    "{:>9}  {concurrency:>11}  {n:>12}  {rate:>10.1}  {:>6.1}  {:>6.1}  {:>7.2}",
                    "pg x1",
                    ms(p50),
                    ms(p99),
                    ms(p99) / ms(p50)
                );
            }
            let dir2 = hookbox_test_support::DataDir::new();
            let two = replicas(&pg.database("bench_two"), dir2.path(), 2).await;
            let mut targets = Vec::new();
            for addr in &two {
                let target = (*addr, gated_environment(*addr).await);
                // The first interaction takes the environment's lease for this replica.
                one_at(&client, &target).await;
                targets.push(target);
            }
            for concurrency in [1usize, 16] {
                let (rate, p50, p99, n) =
                    level_over(&client, &targets, concurrency, per_level).await;
                rates.insert(("pg2", concurrency), rate);
                println!(
                    "{:>9}  {concurrency:>11}  {n:>12}  {rate:>10.1}  {:>6.1}  {:>6.1}  {:>7.2}",
                    "pg x2",
                    ms(p50),
                    ms(p99),
                    ms(p99) / ms(p50)
                );
            }
            // Each replica asked for the other's environment: every interaction forwarded.
            let crossed = [
                (two[0], targets[1].1.clone()),
                (two[1], targets[0].1.clone()),
            ];
            let (rate, p50, p99, n) = level_over(&client, &crossed, 16, per_level).await;
            println!(
                "{:>9}  {:>11}  {n:>12}  {rate:>10.1}  {:>6.1}  {:>6.1}  {:>7.2}",
                "pg x2 fwd",
                16,
                ms(p50),
                ms(p99),
                ms(p99) / ms(p50)
            );
            for concurrency in [1usize, 16] {
                println!(
                    "ratio at concurrency {concurrency}: postgres x1 / sqlite = {:.2}x, postgres x2 / sqlite = {:.2}x interactions/s",
                    rates[&("pg1", concurrency)] / rates[&("warm", concurrency)],
                    rates[&("pg2", concurrency)] / rates[&("warm", concurrency)]
                );
            }
        }
    }
}
