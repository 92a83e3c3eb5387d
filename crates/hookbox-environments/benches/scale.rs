//! Cost that grows with the number of environments held: creates `--envs N` environments (a
//! 10 GiB disk cap each, as `hookbox serve` gives by default), each as an interaction that
//! creates its environment does (create, open, one `true` call; closed after), and prints at 100,
//! 1 000 and 5 000 held (those up to N) and at N: the creation latency (create + open + first
//! call) over the last `--window` creations, the warm-call latency in the newest environment,
//! this process's RSS, the mounts in its mount table, the loop devices in use and the disk an
//! environment takes. With `--keep-mounted` closed environments keep their disks mounted (as
//! before idle disks were unmounted), for a before/after in one build.
//!
//! Run as root: `cargo bench -p hookbox-environments --bench scale [-- --envs N] [--window W]
//! [--keep-mounted]` (default N = 300; the goal is measured with `--envs 5000`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox_environments::environment::Environments;
use hookbox_environments::runner::{Launcher, SandboxOptions};
use hookbox_environments::source::{EnvironmentSpec, SourceOrigin};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_hookbox-environments-launcher");

fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn mounts() -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .count()
}

/// Loop devices bound to a file (`/sys/block/loopN/loop/backing_file` exists).
fn loop_devices() -> usize {
    std::fs::read_dir("/sys/block")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("loop"))
        .filter(|e| e.path().join("loop/backing_file").exists())
        .count()
}

/// Bytes allocated on the host for environment `dir` (its image and metadata, not what is
/// mounted).
fn allocated(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::symlink_metadata(e.path()).ok())
        .filter(|m| m.is_file())
        .map(|m| m.blocks() * 512)
        .sum()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn p50(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn main() {
    assert!(
        rustix::process::geteuid().is_root(),
        "run as root (environments have disk images)"
    );
    let n = arg("--envs", 300);
    let window = arg("--window", 20).max(1);
    let keep_mounted = std::env::args().any(|a| a == "--keep-mounted");
    let data = tempfile::tempdir().unwrap();
    let credentials =
        Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data.path()).unwrap());
    let mut options = SandboxOptions::new(Launcher::standalone(LAUNCHER));
    options.disk_limit_bytes = Some(10 << 30);
    options.unmount_when_closed = !keep_mounted;
    let egress = hookbox_environments::network::EgressOptions::new(credentials);
    let store = Environments::open(data.path(), options, egress).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let call_true = |env: &hookbox_environments::environment::Environment| {
        let out = rt
            .block_on(env.runner().run_argv(
                vec!["/bin/true".into()],
                Vec::new(),
                Duration::from_secs(30),
                1024,
            ))
            .unwrap();
        assert!(out.success());
    };
    let mut marks: Vec<usize> = [100, 1_000, 5_000].into_iter().filter(|m| *m < n).collect();
    marks.push(n);
    println!(
        "{n} environments, 10 GiB cap each, closed disks {}; creation = create + open + first `true` (not the close), p50 of the last {window}",
        if keep_mounted {
            "kept mounted"
        } else {
            "unmounted"
        }
    );
    println!(
        "{:>6}  {:>12}  {:>12}  {:>9}  {:>7}  {:>6}  {:>9}",
        "held", "creation ms", "warm call ms", "RSS MiB", "mounts", "loops", "disk/env"
    );
    let mut ids: Vec<String> = Vec::new();
    let mut creations: Vec<Duration> = Vec::new();
    let mut first: Option<f64> = None;
    for held in 1..=n {
        let t = Instant::now();
        let meta = store
            .create(
                &EnvironmentSpec::default(),
                SourceOrigin::Operator,
                &mut |_| {},
                false,
            )
            .unwrap();
        ids.push(meta.id.clone());
        let env = store.open_env(&meta.id).unwrap();
        call_true(&env);
        // The close (and its unmount) is not the interaction's: the server closes idle ones.
        creations.push(t.elapsed());
        if !marks.contains(&held) {
            drop(env);
            continue;
        }
        let mut warm = Vec::new();
        for _ in 0..window {
            let t = Instant::now();
            call_true(&env);
            warm.push(t.elapsed());
        }
        drop(env);
        let recent = &creations[creations.len().saturating_sub(window)..];
        let creation = ms(p50(recent));
        first.get_or_insert(creation);
        println!(
            "{held:>6}  {creation:>12.1}  {:>12.2}  {:>9.1}  {:>7}  {:>6}  {:>7.2}MB",
            ms(p50(&warm)),
            rss_mib(),
            mounts(),
            loop_devices(),
            allocated(&store.dir_of(&meta.id).unwrap()) as f64 / 1e6,
        );
    }
    if let (Some(first), Some(last)) = (first, creations.len().checked_sub(window)) {
        let last = ms(p50(&creations[last..]));
        println!(
            "creation at {n} held / at the first mark: {:.2}x (goal <= 1.2x from 100 to 5 000)",
            last / first
        );
    }
    // Remove every environment (their cgroups too), then anything still mounted (the
    // tempdir's drop alone would leave mounts and cgroups behind).
    for id in &ids {
        let _ = store.remove(id);
    }
    hookbox_environments::disk::unmount_all_under(data.path());
}
