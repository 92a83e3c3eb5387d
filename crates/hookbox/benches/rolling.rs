//! Rolling restart under load: two `hookbox serve` replicas (real processes) on one PostgreSQL
//! database (`scripts/postgres.sh`) and one data dir, with clients running interactions against
//! both through a client that retries 503 (after its `Retry-After`) and refused connections.
//! Each replica in turn gets SIGTERM, drains, exits and is replaced by a new one. Prints how many
//! interactions completed, how many failed (the goal is none), how many retries it took and how
//! long each drain lasted. Exits non-zero if any interaction failed.
//!
//! Run: `cargo bench -p hookbox --bench rolling [-- --clients N] [--seconds S]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

const AGENT: &str = "antigravity-preview-09-2026";
const SECRET: &str = "a-rolling-bench-cluster-secret";

fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn script(name: &str) -> String {
    format!("{}/../../scripts/{name}", env!("CARGO_MANIFEST_DIR"))
}

struct Replica {
    child: Child,
    addr: String,
}

fn start_replica(data: &std::path::Path, database: &str) -> Replica {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .args(["--database", database, "--cluster-secret", SECRET])
        .env_remove("HOOKBOX_API_KEYS")
        .env_remove("GEMINI_API_KEY")
        .env_remove("HOOKBOX_OPENAI_BASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut addr = None;
    for line in lines {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("hookbox is listening on http://") {
            addr = rest.split_whitespace().next().map(str::to_owned);
        }
        if line.starts_with("or set ") {
            break;
        }
    }
    Replica {
        child,
        addr: addr.expect("no listening line"),
    }
}

/// One request; `None` when the connection failed.
fn request(addr: &str, method: &str, path: &str, body: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(120))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    (!out.is_empty()).then_some(out)
}

fn status(resp: &str) -> u16 {
    resp.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn body(resp: &str) -> serde_json::Value {
    resp.split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(serde_json::Value::Null)
}

fn retry_after(resp: &str) -> Duration {
    let secs = resp
        .lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("retry-after")
                .then(|| v.trim().parse::<u64>().ok())?
        })
        .unwrap_or(1);
    Duration::from_secs(secs.min(10))
}

#[derive(Default)]
struct Tally {
    completed: AtomicUsize,
    failed: AtomicUsize,
    retried: AtomicUsize,
}

/// Sends `body` until a replica answers it for good: 503 and refused connections are retried
/// (another replica, after `Retry-After`). Returns the final answer.
fn with_retries(
    targets: &RwLock<Vec<String>>,
    turn: &mut usize,
    path: &str,
    body: &str,
    tally: &Tally,
) -> Option<String> {
    for _ in 0..200 {
        let addr = {
            let live = targets.read().unwrap();
            *turn += 1;
            live[*turn % live.len()].clone()
        };
        match request(&addr, "POST", path, body) {
            Some(resp) if status(&resp) == 503 => {
                tally.retried.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(retry_after(&resp));
            }
            Some(resp) => return Some(resp),
            None => {
                tally.retried.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    None
}

fn main() {
    let clients = arg("--clients", 8);
    let seconds = arg("--seconds", 3) as u64;
    let started = Command::new(script("postgres.sh"))
        .arg("start")
        .output()
        .unwrap();
    if !started.status.success() {
        println!(
            "postgres: not available (scripts/setup.sh installs it): {}",
            String::from_utf8_lossy(&started.stderr)
        );
        return;
    }
    let pg = String::from_utf8(started.stdout).unwrap().trim().to_owned();
    let created = Command::new("psql")
        .arg(&pg)
        .args(["-qc", "CREATE DATABASE rolling"])
        .status()
        .unwrap();
    assert!(created.success());
    let database = format!("{}/rolling", pg.rsplit_once('/').unwrap().0);
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let mut replicas = vec![
        start_replica(&data, &database),
        start_replica(&data, &database),
    ];
    let targets = Arc::new(RwLock::new(
        replicas.iter().map(|r| r.addr.clone()).collect::<Vec<_>>(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut workers = Vec::new();
    for worker in 0..clients {
        let (targets, stop, tally, failures) = (
            targets.clone(),
            stop.clone(),
            tally.clone(),
            failures.clone(),
        );
        workers.push(std::thread::spawn(move || {
            let mut turn = worker;
            // Each client works in an environment of its own, made on one of the replicas.
            let made = with_retries(&targets, &mut turn, "/v1beta/environments", "{}", &tally)
                .expect("no replica made the environment");
            let env = body(&made)["id"].as_str().unwrap().to_owned();
            let input = serde_json::json!({"agent": AGENT, "environment": env,
                "input": "run `sleep 0.3; echo rolled`"})
            .to_string();
            while !stop.load(Ordering::Relaxed) {
                let answer =
                    with_retries(&targets, &mut turn, "/v1beta/interactions", &input, &tally);
                let done = answer.as_deref().map(body).unwrap_or_default();
                if done["status"] == "completed" && done.to_string().contains("rolled") {
                    tally.completed.fetch_add(1, Ordering::Relaxed);
                } else {
                    tally.failed.fetch_add(1, Ordering::Relaxed);
                    failures
                        .lock()
                        .unwrap()
                        .push(answer.unwrap_or_else(|| "no answer after 200 tries".into()));
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(seconds));
    let mut drains = Vec::new();
    for replica in &mut replicas {
        let before = tally.completed.load(Ordering::Relaxed);
        let signalled = Instant::now();
        let killed = Command::new("kill")
            .args(["-TERM", &replica.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let exit = replica.child.wait().unwrap();
        drains.push((signalled.elapsed(), exit.success()));
        let fresh = start_replica(&data, &database);
        {
            let mut live = targets.write().unwrap();
            live.retain(|a| a != &replica.addr);
            live.push(fresh.addr.clone());
        }
        *replica = fresh;
        // Let the new replica take work before the next one goes.
        while tally.completed.load(Ordering::Relaxed) < before + clients {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    for mut r in replicas {
        let _ = r.child.kill();
        let _ = r.child.wait();
    }
    let _ = Command::new(script("postgres.sh"))
        .args(["stop", &pg])
        .status();
    let (completed, failed, retried) = (
        tally.completed.load(Ordering::Relaxed),
        tally.failed.load(Ordering::Relaxed),
        tally.retried.load(Ordering::Relaxed),
    );
    let shown: Vec<String> = drains
        .iter()
        .map(|(d, ok)| {
            format!(
                "{:.2} s{}",
                d.as_secs_f64(),
                if *ok { "" } else { " (exit failed)" }
            )
        })
        .collect();
    println!(
        "rolling restart of 2 replicas under {clients} clients: {completed} interactions completed, {failed} failed (the goal is 0), {retried} retries of 503 or refused connections; drains took {}",
        shown.join(", ")
    );
    for f in failures.lock().unwrap().iter().take(3) {
        println!("failed: {}", f.lines().last().unwrap_or_default());
    }
    if failed > 0 || drains.iter().any(|(_, ok)| !ok) {
        std::process::exit(1);
    }
}
