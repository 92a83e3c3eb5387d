//! Benchmark: the gVisor runtime against the namespaces one, in one run, as ratios.
//!
//! - a warm `true` tool call (code_execution, no hooks) under each runtime, and a fresh
//!   `runsc do true` (a whole gVisor sandbox for one program) as the baseline the issue names;
//! - opening an environment cold (the first call builds its warm sandbox);
//! - file-heavy calls: `git status` over 10 000 files, and `python3 -c 'import json'`.
//!
//! `--gvisor-breakdown` measures only where a warm gVisor call's time goes: the floor (the same
//! programs started inside the running sandbox, timed there, in the same run), the whole call
//! seen from hookbox, a command hook `sh SCRIPT` exec'd directly against the same written
//! `sh 'SCRIPT'` (through `/bin/sh -c`), alternating, the launcher's stages of the call
//! inside gVisor, and an interaction's two calls back to back (a gate, then `bash -c true`):
//! from the call host reading each to its program's exec.
//!
//! `--warm-vs-fresh` measures only issue 35's third gVisor goal, a warm `true` tool call
//! against a fresh `runsc do true`, interleaved: per round, `--runs N` of each alternating one by
//! one, so that the load of a shared machine falls on both alike; it prints each round's p50s
//! and ratio, and the ratios' spread over `--rounds R` rounds.
//!
//! Run: `cargo bench -p hookbox-environments --bench runtimes [-- --runs N]
//! [--gvisor-breakdown | --warm-vs-fresh [--rounds R]]`. Needs root and `runsc` on PATH (scripts/setup.sh). Prints numbers;
//! asserts nothing. `HOOKBOX_SANDBOX_EXEC=PATH` launches the sandboxes with that launcher.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark binary may panic

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox_environments::environment::{Environment, Environments};
use hookbox_environments::lifecycle::ToolResult;
use hookbox_environments::runner::{GvisorSettings, Launcher, SandboxOptions};
use hookbox_environments::source::EnvironmentSpec;
use hookbox_protocol::{ToolCall, ToolName};
use hookbox_sandbox::spec::RuntimeKind;

const LAUNCHER: &str = env!("CARGO_BIN_EXE_hookbox-environments-launcher");

/// The bench's own launcher, or `$HOOKBOX_SANDBOX_EXEC` (as `hookbox serve` honours it), so that
/// two launcher builds can be compared in one run.
fn launcher() -> Launcher {
    Launcher::standalone(
        std::env::var_os("HOOKBOX_SANDBOX_EXEC")
            .map_or_else(|| LAUNCHER.into(), std::path::PathBuf::from),
    )
}

fn p50(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn bash(code: &str) -> ToolCall {
    ToolCall {
        name: ToolName::CodeExecution,
        args: serde_json::json!({"code": code, "language": "bash"}),
    }
}

async fn ok(env: &Environment, code: &str) -> Duration {
    let t = Instant::now();
    let out = env.call_tool(bash(code)).await;
    let elapsed = t.elapsed();
    match out.result {
        ToolResult::Ok { output } if output.json()["exit_code"] == 0 => elapsed,
        other => panic!("{code}: {other:?}"),
    }
}

struct Row {
    warm_true: Duration,
    open_cold: Duration,
    git_status: Duration,
    import_json: Duration,
}

async fn measure(runtime: RuntimeKind, runs: usize) -> Row {
    let data = tempfile::tempdir().unwrap();
    let (store, meta) = environment(data.path(), runtime);

    let mut opens = Vec::new();
    for _ in 0..runs.min(10) {
        let t = Instant::now();
        let env = store.open_env(&meta.id).unwrap();
        ok(&env, "true").await;
        opens.push(t.elapsed());
    }
    let env = store.open_env(&meta.id).unwrap();
    ok(&env, "true").await;
    // 10 000 files in a git repository (set up once, not measured).
    ok(
        &env,
        "mkdir -p /workspace/repo && cd /workspace/repo && git init -q && \
         python3 -c 'import os\nfor d in range(100):\n os.makedirs(f\"d{d}\", exist_ok=True)\n for f in range(100):\n  open(f\"d{d}/f{f}\", \"w\").write(str(f))' && \
         git -c user.email=b@b -c user.name=b add -A && git -c user.email=b@b -c user.name=b commit -qm files",
    )
    .await;
    let mut warm = Vec::new();
    let mut git = Vec::new();
    let mut json = Vec::new();
    for _ in 0..runs {
        warm.push(ok(&env, "true").await);
    }
    for _ in 0..runs.min(20) {
        git.push(
            ok(
                &env,
                "cd /workspace/repo && git status --porcelain >/dev/null",
            )
            .await,
        );
        json.push(ok(&env, "python3 -c 'import json'").await);
    }
    drop(env);
    let _ = store.remove(&meta.id);
    Row {
        warm_true: p50(&mut warm),
        open_cold: p50(&mut opens),
        git_status: p50(&mut git),
        import_json: p50(&mut json),
    }
}

/// A fresh gVisor sandbox for one `true`: `runsc do`, the way one would without hookbox.
fn runsc_do_true(runs: usize) -> Duration {
    let root = tempfile::tempdir().unwrap();
    let mut samples: Vec<Duration> = (0..runs.min(20))
        .map(|_| runsc_do_true_once(root.path()))
        .collect();
    p50(&mut samples)
}

/// One `runsc do /bin/true` with its state under `root`, timed.
fn runsc_do_true_once(root: &std::path::Path) -> Duration {
    let t = Instant::now();
    let status = std::process::Command::new("runsc")
        .arg(format!("--root={}", root.display()))
        .args(["--network=none", "--platform=systrap", "do", "/bin/true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "runsc do true failed");
    t.elapsed()
}

/// Where a warm gVisor call's time goes, in one run: each program's start inside the running
/// sandbox (timed by bash there, one call looping), the same program as a whole warm call timed
/// by hookbox, and the stages of a warm `/bin/true` call inside gVisor (each from the end of the
/// one before, on gVisor's clock; the first, from hookbox's request, is left out: the clocks
/// differ).
async fn gvisor_breakdown(runs: usize) {
    let data = tempfile::tempdir().unwrap();
    let (store, meta) = environment(data.path(), RuntimeKind::Gvisor);
    let env = store.open_env(&meta.id).unwrap();
    ok(&env, "true").await;
    let timeout = Duration::from_secs(60);
    let runner = env.runner();
    println!("program            in-sandbox floor_ms  warm call_ms  call/floor  overhead_ms");
    for (name, argv) in [
        ("/bin/true", vec!["/bin/true"]),
        ("sh -c true", vec!["/bin/sh", "-c", "true"]),
        ("bash -c true", vec!["/bin/bash", "-c", "true"]),
    ] {
        // The floor: `runs` starts of the program inside the running sandbox, timed there.
        let quoted = argv.join(" ");
        let script = format!(
            "s=$EPOCHREALTIME; for i in $(seq {runs}); do {quoted} </dev/null; done; e=$EPOCHREALTIME; echo \"$s $e\""
        );
        let out = runner
            .run_argv(
                vec!["/bin/bash".into(), "-c".into(), script],
                Vec::new(),
                timeout,
                1 << 16,
            )
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut it = text.split_whitespace().map(|v| v.parse::<f64>().unwrap());
        let (s, e) = (it.next().unwrap(), it.next().unwrap());
        let floor = (e - s) * 1000.0 / runs as f64;
        let mut samples = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let out = runner
                .run_argv(
                    argv.iter().map(|a| a.to_string()).collect(),
                    Vec::new(),
                    timeout,
                    1 << 16,
                )
                .await
                .unwrap();
            assert!(out.success(), "{name}");
            samples.push(t.elapsed());
        }
        let call = ms(p50(&mut samples));
        println!(
            "{name:<18} {floor:>19.2}  {call:>12.2}  {:>9.2}x  {:>11.2}",
            call / floor,
            call - floor
        );
    }
    // A command hook `sh SCRIPT`: exec'd directly by the init (one simple command), against the
    // same script written `sh 'SCRIPT'` (not plain words: through `/bin/sh -c`, a second shell,
    // as every hook ran before), calls alternating; and the floor of `sh SCRIPT` inside.
    runner
        .run_argv(
            vec![
                "/bin/sh".into(),
                "-c".into(),
                "echo 'exit 0' > /tmp/gate.sh".into(),
            ],
            Vec::new(),
            timeout,
            1 << 16,
        )
        .await
        .unwrap();
    let script = format!(
        "s=$EPOCHREALTIME; for i in $(seq {runs}); do sh /tmp/gate.sh </dev/null; done; e=$EPOCHREALTIME; echo \"$s $e\""
    );
    let out = runner
        .run_argv(
            vec!["/bin/bash".into(), "-c".into(), script],
            Vec::new(),
            timeout,
            1 << 16,
        )
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().unwrap());
    let (s, e) = (it.next().unwrap(), it.next().unwrap());
    let floor = (e - s) * 1000.0 / runs as f64;
    let (mut direct, mut shell) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        for (line, samples) in [
            ("sh /tmp/gate.sh", &mut direct),
            ("sh '/tmp/gate.sh'", &mut shell),
        ] {
            let request = hookbox_hooks::command::CommandRequest {
                command: line.into(),
                stdin: Vec::new(),
                timeout,
                output_limit: 1 << 16,
            };
            let t = Instant::now();
            let out = hookbox_hooks::command::CommandRunner::run(runner, request)
                .await
                .unwrap();
            assert!(out.success(), "{line}");
            samples.push(t.elapsed());
        }
    }
    let (direct, shell) = (ms(p50(&mut direct)), ms(p50(&mut shell)));
    println!(
        "hook `sh /tmp/gate.sh`: floor {floor:.2} ms; exec'd directly {direct:.2} ms ({:.2}x the floor); through /bin/sh -c {shell:.2} ms ({:.2}x); direct/shell {:.3}x",
        direct / floor,
        shell / floor,
        direct / shell
    );
    // Concurrency 16: `sh -c true` as warm calls from 16 tasks, against the same programs
    // started by 16 loops at once inside the sandbox.
    let per_task = runs.div_ceil(4).max(2);
    let script = format!(
        "s=$EPOCHREALTIME; for j in $(seq 16); do (for i in $(seq {per_task}); do sh -c true </dev/null; done) & done; wait; e=$EPOCHREALTIME; echo \"$s $e\""
    );
    let out = runner
        .run_argv(
            vec!["/bin/bash".into(), "-c".into(), script],
            Vec::new(),
            timeout,
            1 << 16,
        )
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().unwrap());
    let (s, e) = (it.next().unwrap(), it.next().unwrap());
    let floor_rate = (16 * per_task) as f64 / (e - s);
    let t = Instant::now();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let runner = runner.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    let argv = vec!["/bin/sh".into(), "-c".into(), "true".into()];
                    let out = runner
                        .run_argv(argv, Vec::new(), Duration::from_secs(120), 1 << 16)
                        .await
                        .unwrap();
                    assert!(out.success());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let rate = (16 * per_task) as f64 / t.elapsed().as_secs_f64();
    println!(
        "`sh -c true` at concurrency 16: {rate:.1} calls/s; the same programs started inside the sandbox by 16 loops: {floor_rate:.1}/s; {:.2}x",
        rate / floor_rate
    );
    let mut per_stage: Vec<(String, Vec<i128>)> = Vec::new();
    let mut totals = Vec::new();
    for _ in 0..runs {
        let (out, times) = runner
            .run_argv_timed(vec!["/bin/true".into()], timeout)
            .await
            .unwrap();
        assert!(out.success());
        totals.push(Duration::from_nanos((times.ended - times.started) as u64));
        for (i, (name, ns)) in times.durations().into_iter().enumerate() {
            if per_stage.len() <= i {
                per_stage.push((name, Vec::new()));
            }
            per_stage[i].1.push(ns);
        }
    }
    println!(
        "stages of a warm gVisor `/bin/true` call (p50 of {runs}; whole call {:.2} ms):",
        ms(p50(&mut totals))
    );
    // The first stage and the last span both clocks; only the ones inside gVisor are shown.
    let inside = per_stage.len().saturating_sub(1);
    for (name, samples) in per_stage.iter_mut().take(inside).skip(1) {
        samples.sort();
        println!(
            "  {name:<28} {:>8.3} ms",
            samples[samples.len() / 2] as f64 / 1e6
        );
    }
    // An interaction's two calls back to back (the gate `sh /tmp/gate.sh`, then `bash -c
    // true`), with their stages: from the call host reading the call (`call_received`) to its
    // program's clone being confined and about to exec (`seccomp_installed`), both on gVisor's
    // clock.
    // Per call of the pair: received to exec (ms), whole calls.
    let mut rows: [(Vec<f64>, Vec<Duration>); 2] = Default::default();
    for _ in 0..runs {
        for (i, argv) in [
            vec!["/bin/sh", "/tmp/gate.sh"],
            vec!["/bin/bash", "-c", "true"],
        ]
        .into_iter()
        .enumerate()
        {
            let argv = argv.into_iter().map(String::from).collect();
            let (out, times) = runner.run_argv_timed(argv, timeout).await.unwrap();
            assert!(out.success());
            let at = |name: &str| {
                times
                    .stages
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, ns)| *ns)
            };
            let row = &mut rows[i];
            row.1
                .push(Duration::from_nanos((times.ended - times.started) as u64));
            if let (Some(received), Some(confined)) = (at("call_received"), at("seccomp_installed"))
            {
                row.0.push((confined - received) as f64 / 1e6);
            }
        }
    }
    println!("back-to-back gate + tool calls ({runs} pairs), p50 ms:");
    for (name, (start, whole)) in ["gate `sh /tmp/gate.sh`", "tool `bash -c true`"]
        .iter()
        .zip(rows.iter_mut())
    {
        start.sort_by(f64::total_cmp);
        println!(
            "  {name:<24} whole call {:>7.2}  received to exec {:>6.2}",
            ms(p50(whole)),
            start.get(start.len() / 2).copied().unwrap_or(f64::NAN)
        );
    }
    drop(env);
    let _ = store.remove(&meta.id);
}

/// A store under `data` whose sandboxes run under `runtime`, and an empty environment in it.
fn environment(
    data: &std::path::Path,
    runtime: RuntimeKind,
) -> (
    Environments,
    hookbox_environments::environment::EnvironmentMeta,
) {
    let mut options = SandboxOptions::new(launcher());
    options.runtime = runtime;
    options.gvisor = GvisorSettings::new(None, Default::default());
    let credentials =
        Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data).unwrap());
    let store = Environments::open(
        data,
        options,
        hookbox_environments::network::EgressOptions::new(credentials),
    )
    .unwrap();
    let meta = store
        .create(
            &EnvironmentSpec::default(),
            hookbox_environments::source::SourceOrigin::Operator,
            &mut |_| {},
            false,
        )
        .unwrap();
    (store, meta)
}

/// `--warm-vs-fresh` (see the module doc).
async fn warm_vs_fresh(runs: usize, rounds: usize) {
    let data = tempfile::tempdir().unwrap();
    let (store, meta) = environment(data.path(), RuntimeKind::Gvisor);
    let env = store.open_env(&meta.id).unwrap();
    for _ in 0..5 {
        ok(&env, "true").await;
    }
    let root = tempfile::tempdir().unwrap();
    let fresh = || runsc_do_true_once(root.path());
    println!(
        "round  warm_true_ms  runsc_do_true_ms  warm/fresh  ({runs} of each per round, alternating)"
    );
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let (mut warm, mut cold) = (Vec::new(), Vec::new());
        for i in 0..runs {
            if (i + round) % 2 == 0 {
                warm.push(ok(&env, "true").await);
                cold.push(fresh());
            } else {
                cold.push(fresh());
                warm.push(ok(&env, "true").await);
            }
        }
        let (w, c) = (ms(p50(&mut warm)), ms(p50(&mut cold)));
        println!("{round:>5}  {w:>12.2}  {c:>16.2}  {:>9.3}x", w / c);
        ratios.push(w / c);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "warm gVisor call / fresh runsc do true: median {:.3}x (min {:.3}, max {:.3}; goal <= 0.25x)",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
    drop(env);
    let _ = store.remove(&meta.id);
}

fn main() {
    let runs: usize = std::env::args()
        .skip_while(|a| a != "--runs")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if std::env::args().any(|a| a == "--warm-vs-fresh") {
        let rounds: usize = std::env::args()
            .skip_while(|a| a != "--rounds")
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(5);
        rt.block_on(warm_vs_fresh(runs, rounds));
        return;
    }
    if std::env::args().any(|a| a == "--gvisor-breakdown") {
        rt.block_on(gvisor_breakdown(runs));
        return;
    }
    let ns = rt.block_on(measure(RuntimeKind::Namespaces, runs));
    let gv = rt.block_on(measure(RuntimeKind::Gvisor, runs));
    let fresh = runsc_do_true(runs);
    println!("what                                    namespaces_ms  gvisor_ms  gvisor/namespaces");
    for (name, a, b) in [
        ("warm `true` tool call", ns.warm_true, gv.warm_true),
        (
            "environment open, cold (first call)",
            ns.open_cold,
            gv.open_cold,
        ),
        ("git status, 10 000 files", ns.git_status, gv.git_status),
        ("python3 -c 'import json'", ns.import_json, gv.import_json),
    ] {
        println!(
            "{name:<40} {:>13.2}  {:>9.2}  {:>17.2}x",
            ms(a),
            ms(b),
            b.as_secs_f64() / a.as_secs_f64()
        );
    }
    println!(
        "fresh `runsc do true`: {:.2} ms; warm gVisor call / fresh runsc do: {:.2}x (goal <= 0.25x)",
        ms(fresh),
        gv.warm_true.as_secs_f64() / fresh.as_secs_f64()
    );
}
