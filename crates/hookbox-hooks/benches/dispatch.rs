//! Dispatch overhead and matcher cost. Run with `cargo bench -p hookbox-hooks --bench dispatch`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
//!
//! Baselines are measured in the same run: a pre hook whose handler is `true` against spawning
//! `/bin/sh -c true` directly (the physical limit is the spawn itself). Prints microseconds and
//! ratios; asserts nothing. `HOOKBOX_BENCH_ITERS` sets the number of calls (default 1000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox_hooks::command::LocalRunner;
use hookbox_hooks::config::parse;
use hookbox_hooks::http::DirectPoster;
use hookbox_hooks::{HookEngine, HooksConfig};
use hookbox_protocol::{ToolCall, ToolName};

fn stats(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = samples.iter().map(|d| us(*d)).sum::<f64>() / samples.len() as f64;
    let p50 = us(samples[samples.len() / 2]);
    let p95 = us(samples[samples.len() * 95 / 100]);
    (mean, p50, p95)
}

fn config(json: &str) -> HooksConfig {
    let (groups, _) = parse("/.agents/hooks.json", json.as_bytes());
    HooksConfig { groups }
}

fn main() {
    let iters: usize = std::env::var("HOOKBOX_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let engine = HookEngine::new(
        Arc::new(LocalRunner::default()),
        Arc::new(DirectPoster::new().expect("http client")),
    );
    let hooks = config(
        r#"{"g":{"pre_tool_execution":[{"matcher":"code_execution","hooks":[{"type":"command","command":"true"}]}]}}"#,
    );
    let call = ToolCall {
        name: ToolName::CodeExecution,
        args: serde_json::json!({"code": "ls", "language": "bash"}),
    };

    // Interleave the two so that machine noise hits both alike.
    let mut bare = Vec::with_capacity(iters);
    let mut hooked = Vec::with_capacity(iters);
    rt.block_on(async {
        for _ in 0..10 {
            let _ = engine.pre_tool(&hooks, &call, "env_bench").await;
        }
        for _ in 0..iters {
            let start = Instant::now();
            let status = tokio::process::Command::new("/bin/sh")
                .arg("-c")
                .arg("true")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .await
                .expect("spawn");
            assert!(status.success());
            bare.push(start.elapsed());

            let start = Instant::now();
            let d = engine.pre_tool(&hooks, &call, "env_bench").await;
            hooked.push(start.elapsed());
            assert_eq!(d.trace.len(), 1);
        }
    });
    let (bare_mean, bare_p50, bare_p95) = stats(bare);
    let (hook_mean, hook_p50, hook_p95) = stats(hooked);
    println!("dispatch overhead, {iters} calls (µs: mean / p50 / p95)");
    println!("  bare spawn of /bin/sh -c true : {bare_mean:8.1} / {bare_p50:8.1} / {bare_p95:8.1}");
    println!("  pre hook running `true`       : {hook_mean:8.1} / {hook_p50:8.1} / {hook_p95:8.1}");
    println!(
        "  ratio hook / bare             : {:8.2} / {:8.2} / {:8.2}",
        hook_mean / bare_mean,
        hook_p50 / bare_p50,
        hook_p95 / bare_p95
    );

    // Matcher evaluation: 100 groups, a mix of exact names, alternations and wildcards.
    let patterns = [
        "code_execution",
        "view_file|write_to_file",
        ".*_file",
        "list_dir",
        "(view|delete)_file",
        "replace_file_content",
        "*",
        "read_file",
    ];
    let mut doc = serde_json::Map::new();
    for i in 0..100 {
        doc.insert(
            format!("group-{i}"),
            serde_json::json!({"pre_tool_execution": [{"matcher": patterns[i % patterns.len()], "hooks": [{"type": "command", "command": "true"}]}]}),
        );
    }
    let text = serde_json::Value::Object(doc).to_string();
    let parse_iters = 200;
    let start = Instant::now();
    for _ in 0..parse_iters {
        std::hint::black_box(parse("/.agents/hooks.json", text.as_bytes()));
    }
    let parse_us = start.elapsed().as_secs_f64() * 1e6 / parse_iters as f64;
    let hooks = config(&text);
    let match_iters = 20_000;
    let start = Instant::now();
    let mut matched = 0usize;
    for i in 0..match_iters {
        let tool = ToolName::ALL[i % ToolName::ALL.len()];
        for group in &hooks.groups {
            for rule in &group.pre_tool_execution {
                if rule.matcher.matches(std::hint::black_box(tool.as_str())) {
                    matched += 1;
                }
            }
        }
    }
    let match_us = start.elapsed().as_secs_f64() * 1e6 / match_iters as f64;
    println!("matchers, 100 groups");
    println!("  parse + compile the file      : {parse_us:8.1} µs");
    println!("  match one tool against all    : {match_us:8.2} µs ({matched} matches)");
}
