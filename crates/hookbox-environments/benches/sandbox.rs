//! Benchmark: environment creation, sandbox start-up (cold: a sandbox per call; warm: a call in
//! the environment's kept sandbox) against bare `unshare -Urnmpf true` and bubblewrap, with the
//! stage breakdown of each, tool calls per second through one pre and one post hook, and memory
//! per idle environment.
//!
//! Run: `cargo bench -p hookbox-environments --bench sandbox`. Prints numbers; asserts nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark binary may panic

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox_environments::environment::Environments;
use hookbox_environments::lifecycle::ToolResult;
use hookbox_environments::runner::{Launcher, SandboxOptions};
use hookbox_environments::source::{EnvironmentSpec, Source};
use hookbox_protocol::{ToolCall, ToolName};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_hookbox-environments-launcher");

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let idx = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[idx]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(name: &str, samples: &mut [Duration]) -> (Duration, Duration) {
    let p50 = percentile(samples, 0.5);
    let p95 = percentile(samples, 0.95);
    println!(
        "{name:<44} p50 {:>8.2} ms   p95 {:>8.2} ms   (n={})",
        ms(p50),
        ms(p95),
        samples.len()
    );
    (p50, p95)
}

fn inline(target: &str, content: &str) -> Source {
    Source::Inline {
        target: target.into(),
        content: content.into(),
        encoding: Default::default(),
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

const HOOKS: &str = r#"{"bench": {
  "pre_tool_execution": [{"matcher": "code_execution", "hooks": [{"type": "command", "command": "cat >/dev/null; echo '{\"decision\":\"allow\"}'"}]}],
  "post_tool_execution": [{"matcher": "code_execution", "hooks": [{"type": "command", "command": "cat >/dev/null"}]}]
}}"#;

fn main() {
    let data = tempfile::tempdir().unwrap();
    let credentials =
        Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data.path()).unwrap());
    let options = SandboxOptions::new(Launcher::standalone(LAUNCHER));
    let egress = hookbox_environments::network::EgressOptions::new(credentials);
    let store = Environments::open(data.path(), options.clone(), egress).unwrap();
    let runs = 60;

    // 1. Bare unshare, the limit.
    let mut unshare = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let status = std::process::Command::new("unshare")
            .args(["-Urnmpf", "true"])
            .status()
            .unwrap();
        assert!(status.success());
        unshare.push(t.elapsed());
    }
    let (unshare_p50, _) = report("unshare -Urnmpf true", &mut unshare);

    // bubblewrap, the reference peer (`scripts/bench-deps.sh` installs it), and a bare spawn.
    let bwrap_p50 = if std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let mut bwrap = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let status = std::process::Command::new("bwrap")
                .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
                .status()
                .unwrap();
            assert!(status.success());
            bwrap.push(t.elapsed());
        }
        Some(report("bwrap --unshare-all --ro-bind / / true", &mut bwrap).0)
    } else {
        println!("bwrap: not installed (scripts/bench-deps.sh installs it); no bwrap ratio");
        None
    };
    let mut spawn = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        assert!(
            std::process::Command::new("true")
                .status()
                .unwrap()
                .success()
        );
        spawn.push(t.elapsed());
    }
    report("spawn true (no sandbox)", &mut spawn);

    // 2. Environment creation with three inline sources.
    let spec = EnvironmentSpec {
        sources: vec![
            inline(".agents/hooks.json", HOOKS),
            inline(".agents/hooks-scripts/gate.py", "print('allow')\n"),
            inline("workspace/private/data.json", "{\"rows\": [1, 2, 3]}\n"),
        ],
        ..Default::default()
    };
    let mut create = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let meta = store
            .create(
                &spec,
                hookbox_environments::source::SourceOrigin::Operator,
                &mut |_| {},
                false,
            )
            .unwrap();
        create.push(t.elapsed());
        ids.push(meta.id);
    }
    let (create_p50, _) = report("env create (3 inline sources)", &mut create);

    // 3. Sandbox start-up: one `true` in a fresh sandbox (cold: namespaces, mounts, Landlock,
    //    seccomp, cgroups), and one `true` started in the environment's warm sandbox (its own
    //    PID, mount and IPC namespace, /proc, limits, Landlock and seccomp), no hooks.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let env = Arc::new(store.open_env(&ids[0]).unwrap());
    let cold_options = SandboxOptions {
        warm: false,
        ..options.clone()
    };
    let cold_store = Environments::open(
        data.path(),
        cold_options.clone(),
        hookbox_environments::network::EgressOptions::new(Arc::new(
            hookbox_egress::credentials::FileCredentialStore::open(data.path()).unwrap(),
        )),
    )
    .unwrap();
    let cold_env = Arc::new(cold_store.open_env(&ids[0]).unwrap());
    let true_p50 = |runner: &hookbox_environments::runner::SandboxRunner, name: &str| {
        let mut samples = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let out = rt
                .block_on(runner.run_argv(
                    vec!["/bin/true".into()],
                    Vec::new(),
                    Duration::from_secs(10),
                    1024,
                ))
                .unwrap();
            assert!(out.success());
            samples.push(t.elapsed());
        }
        report(name, &mut samples).0
    };
    let cold_p50 = true_p50(cold_env.runner(), "sandboxed `true`, cold (own sandbox)");
    let sandbox_p50 = true_p50(env.runner(), "sandboxed `true`, warm (default)");

    // 3a. Where one launch spends its time: the launcher reports the end of every stage.
    for (label, runner) in [("cold", cold_env.runner()), ("warm", env.runner())] {
        let mut per_stage: Vec<(String, Vec<i128>)> = Vec::new();
        for _ in 0..runs {
            let (out, times) = rt
                .block_on(runner.run_argv_timed(vec!["/bin/true".into()], Duration::from_secs(10)))
                .unwrap();
            assert!(out.success());
            for (i, (name, ns)) in times.durations().into_iter().enumerate() {
                if per_stage.len() <= i {
                    per_stage.push((name, Vec::new()));
                }
                per_stage[i].1.push(ns);
            }
        }
        println!(
            "stage breakdown of sandboxed `true`, {label} (p50 of {runs}, each from the end of the one before):"
        );
        let mut total = 0i128;
        for (name, samples) in &mut per_stage {
            samples.sort();
            let p50 = samples[samples.len() / 2];
            total += p50;
            println!("  {name:<28} {:>8.3} ms", p50 as f64 / 1e6);
        }
        println!("  {:<28} {:>8.3} ms", "sum of p50s", total as f64 / 1e6);
    }

    // The same without the environment's cgroups, to show what joining them costs.
    let bare_dir = tempfile::tempdir().unwrap();
    let tree = bare_dir.path().join("root");
    for sub in ["workspace", "tmp", ".agents"] {
        std::fs::create_dir_all(tree.join(sub)).unwrap();
    }
    std::fs::create_dir_all(bare_dir.path().join("mnt")).unwrap();
    let bare = hookbox_environments::runner::SandboxRunner::new(
        Arc::new(cold_options.clone()),
        hookbox_environments::runner::SandboxLayout {
            tree,
            mountpoint: bare_dir.path().join("mnt"),
            frozen_agents: None,
            env: Vec::new(),
            cgroups: Default::default(),
            netns: None,
            identity: options.identities().map(|range| range.nth(1)),
            runtime: Default::default(),
            read_only: false,
        },
    )
    .unwrap();
    true_p50(&bare, "sandboxed `true`, cold, no cgroups");

    // 4. code_execution `true` through one pre and one post hook (three sandboxes per call).
    let call = ToolCall {
        name: ToolName::CodeExecution,
        args: serde_json::json!({"code": "true", "language": "bash"}),
    };
    for (label, env, concurrency) in [
        ("cold", &cold_env, 1usize),
        ("warm", &env, 1),
        ("cold", &cold_env, 8),
        ("warm", &env, 8),
    ] {
        let total = 96;
        let t = Instant::now();
        rt.block_on(async {
            let mut handles = Vec::new();
            for worker in 0..concurrency {
                let env = env.clone();
                let call = call.clone();
                handles.push(tokio::spawn(async move {
                    let mut i = worker;
                    while i < total {
                        let outcome = env.call_tool(call.clone()).await;
                        assert!(
                            matches!(outcome.result, ToolResult::Ok { .. }),
                            "{:?}",
                            outcome.result
                        );
                        assert_eq!(outcome.pre.trace.len(), 1);
                        i += concurrency;
                    }
                }));
            }
            for h in handles {
                h.await.unwrap();
            }
        });
        let elapsed = t.elapsed();
        println!(
            "code_execution `true`, 1 pre + 1 post hook, {label}, concurrency {concurrency}: {:>7.1} calls/s ({total} calls in {:.2} s)",
            total as f64 / elapsed.as_secs_f64(),
            elapsed.as_secs_f64()
        );
    }

    // 4b. What mapping sandboxed root to an unprivileged uid costs a tool call: the same
    //     environment opened by a store that maps it (the default as root) and by one that
    //     does not (sandboxed root = hookbox's uid, as before), calls interleaved so both see the
    //     same machine.
    if let Some(range) = options.identities() {
        let mut unmapped_options = options.clone();
        unmapped_options.identities = None;
        let credentials =
            Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data.path()).unwrap());
        let unmapped_store = Environments::open(
            data.path(),
            unmapped_options,
            hookbox_environments::network::EgressOptions::new(credentials),
        )
        .unwrap();
        let unmapped = unmapped_store.open_env(&ids[0]).unwrap();
        let (mut mapped_lat, mut unmapped_lat) = (Vec::new(), Vec::new());
        for i in 0..400 {
            let (target, lat) = if i % 2 == 0 {
                (&*env, &mut mapped_lat)
            } else {
                (&unmapped, &mut unmapped_lat)
            };
            let t = Instant::now();
            let outcome = rt.block_on(target.call_tool(call.clone()));
            lat.push(t.elapsed());
            assert!(matches!(outcome.result, ToolResult::Ok { .. }));
        }
        let (m50, _) = report(
            &format!("tool call, root = env's uid ({}+)", range.first),
            &mut mapped_lat,
        );
        let (u50, _) = report(
            "tool call, root = hookbox's uid (before)",
            &mut unmapped_lat,
        );
        let mean = |v: &[Duration]| v.iter().map(|d| ms(*d)).sum::<f64>() / v.len() as f64;
        println!(
            "ratio: unprivileged / before = {:.3}x (p50), {:.3}x (mean)",
            ms(m50) / ms(u50),
            mean(&mapped_lat) / mean(&unmapped_lat)
        );
    }

    // 6. Fork time against tree size, beside a plain `cp -a` of the same tree.
    for files in [1_000usize, 100_000] {
        let meta = store
            .create(
                &EnvironmentSpec::default(),
                hookbox_environments::source::SourceOrigin::Operator,
                &mut |_| {},
                false,
            )
            .unwrap();
        let tree = data.path().join("environments").join(&meta.id).join("root");
        for i in 0..files {
            let dir = tree.join(format!("workspace/d{}", i / 1000));
            if i % 1000 == 0 {
                std::fs::create_dir_all(&dir).unwrap();
            }
            std::fs::write(dir.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
        }
        // Once to warm the page cache for both, then measured.
        let warm = store.fork(&meta.id, &EnvironmentSpec::default()).unwrap();
        store.remove(&warm.id).unwrap();
        let t = Instant::now();
        let child = store.fork(&meta.id, &EnvironmentSpec::default()).unwrap();
        let fork_time = t.elapsed();
        let target = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(tree.join("."))
            .arg(target.path())
            .status()
            .unwrap();
        assert!(status.success());
        let cp_time = t.elapsed();
        println!(
            "fork, {files:>6} files: {:>9.1} ms   cp -a: {:>9.1} ms   ratio {:.2}x",
            ms(fork_time),
            ms(cp_time),
            ms(fork_time) / ms(cp_time)
        );
        store.remove(&child.id).unwrap();
        store.remove(&meta.id).unwrap();
    }

    // 5. Memory per idle environment: one never used runs no process; what it costs is the
    //    opened handle in the server (measured) and its files on disk. One that has run a call
    //    keeps its warm sandbox (two processes) until it is closed.
    let before = rss_kib();
    let opened: Vec<_> = ids.iter().map(|id| store.open_env(id).unwrap()).collect();
    let after = rss_kib();
    let disk = store.show(&ids[0]).unwrap();
    println!(
        "idle environment (never used): 0 processes; {:.1} KiB RSS per opened environment handle ({} opened); {} files, {} bytes in its tree",
        (after.saturating_sub(before)) as f64 / opened.len() as f64,
        opened.len(),
        disk.file_count,
        disk.size_bytes
    );
    drop(opened);

    println!(
        "ratios: env create / unshare = {:.2}x   sandboxed true / unshare = {:.2}x",
        ms(create_p50) / ms(unshare_p50),
        ms(sandbox_p50) / ms(unshare_p50)
    );
    if let Some(bwrap_p50) = bwrap_p50 {
        println!(
            "ratio: sandboxed true / bwrap = {:.2}x warm, {:.2}x cold (p50; the goal is <= 1.5x)",
            ms(sandbox_p50) / ms(bwrap_p50),
            ms(cold_p50) / ms(bwrap_p50)
        );
    }
    for id in &ids {
        store.remove(id).unwrap();
    }
}
