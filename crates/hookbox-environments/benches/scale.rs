//! Cost that grows with the number of environments held: creates `--envs N` environments (a
//! 10 GiB disk cap each, as `hookbox serve` gives by default), each as an interaction that
//! creates its environment does (create, open, one `true` call; closed after), and prints at 100,
//! 1 000 and 5 000 held (those up to N) and at N: the creation latency (create + open + first
//! call) over the last `--window` creations (p50, and p25-p75 for the spread) split into the
//! create and the open with its first call, the close after it (its unmount and cgroup removal),
//! the warm-call latency in the newest environment, this process's RSS, the mounts in its mount
//! table, the loop devices in use on the machine, the cgroups its environments hold and the disk
//! an environment takes. Each mark's last `window` creations alternate with as many in an empty
//! store (created, used once, removed), and "vs empty" is their ratio: the cost of what is held,
//! with the machine's load the same on both sides. With `--keep-mounted` closed environments keep their disks mounted (as
//! before idle disks were unmounted), for a before/after in one build.
//!
//! The machine is shared: compare the marks of one run (the ratio printed last), never runs at
//! different times.
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

/// How many of `ids` have a cgroup directory (in any hierarchy this process is in).
fn cgroups_of(ids: &std::collections::HashSet<String>) -> usize {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mut parents = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            for mount in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
                parents.push(std::path::Path::new(mount).join(path).join("hookbox"));
            }
        }
        for controller in controllers
            .split(',')
            .filter(|c| ["pids", "memory"].contains(c))
        {
            parents.push(
                std::path::Path::new("/sys/fs/cgroup")
                    .join(controller)
                    .join(path)
                    .join("hookbox"),
            );
        }
    }
    parents
        .iter()
        .filter_map(|p| std::fs::read_dir(p).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| ids.contains(&*e.file_name().to_string_lossy()))
        .count()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn p50(samples: &[Duration]) -> Duration {
    quantile(samples, 0.5)
}

/// One creation: the create, the open with its first call, and the close after.
#[derive(Clone, Copy)]
struct Creation {
    create: Duration,
    open_call: Duration,
    close: Duration,
}

impl Creation {
    fn total(&self) -> Duration {
        self.create + self.open_call
    }
}

fn main() {
    assert!(
        rustix::process::geteuid().is_root(),
        "run as root (environments have disk images)"
    );
    let n = arg("--envs", 300);
    let window = arg("--window", 50).max(1);
    let keep_mounted = std::env::args().any(|a| a == "--keep-mounted");
    let data = tempfile::tempdir().unwrap();
    let credentials =
        Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data.path()).unwrap());
    let mut options = SandboxOptions::new(Launcher::standalone(LAUNCHER));
    options.disk_limit_bytes = Some(10 << 30);
    options.unmount_when_closed = !keep_mounted;
    let egress = hookbox_environments::network::EgressOptions::new(credentials);
    let store = Environments::open(data.path(), options.clone(), egress.clone()).unwrap();
    // The control: an empty store, creating (and removing) one environment after each of the
    // main store's last `window` before a mark, so both see the same load on the machine.
    let control_data = tempfile::tempdir().unwrap();
    let control = Environments::open(control_data.path(), options, egress).unwrap();
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
    let make = |store: &Environments| {
        let t = Instant::now();
        let meta = store
            .create(
                &EnvironmentSpec::default(),
                SourceOrigin::Operator,
                &mut |_| {},
                false,
            )
            .unwrap();
        let create = t.elapsed();
        let t = Instant::now();
        let env = store.open_env(&meta.id).unwrap();
        call_true(&env);
        (meta.id, env, create, t.elapsed())
    };
    let mut marks: Vec<usize> = [100, 1_000, 5_000].into_iter().filter(|m| *m < n).collect();
    marks.push(n);
    println!(
        "{n} environments, 10 GiB cap each, closed disks {}; creation = create + open + first `true` (not the close), over the last {window} creations",
        if keep_mounted {
            "kept mounted"
        } else {
            "unmounted"
        }
    );
    println!(
        "{:>6}  {:>21}  {:>8}  {:>7}  {:>10}  {:>7}  {:>8}  {:>7}  {:>6}  {:>5}  {:>7}  {:>8}",
        "held",
        "creation ms p50 [IQR]",
        "vs empty",
        "create",
        "open+call",
        "close",
        "warm ms",
        "RSS MiB",
        "mounts",
        "loops",
        "cgroups",
        "disk/env"
    );
    let mut ids: Vec<String> = Vec::new();
    let mut creations: Vec<Creation> = Vec::new();
    let mut controls: Vec<Duration> = Vec::new();
    let mut first: Option<[f64; 4]> = None;
    let mut last: Option<[f64; 4]> = None;
    for held in 1..=n {
        let (id, env, create, open_call) = make(&store);
        ids.push(id.clone());
        let mut warm = Vec::new();
        if marks.contains(&held) {
            for _ in 0..window {
                let t = Instant::now();
                call_true(&env);
                warm.push(t.elapsed());
            }
        }
        // The close (and its unmount) is not the interaction's: the server closes idle ones.
        let t = Instant::now();
        drop(env);
        creations.push(Creation {
            create,
            open_call,
            close: t.elapsed(),
        });
        if marks.iter().any(|m| held <= *m && held + window > *m) {
            let (id, env, create, open_call) = make(&control);
            drop(env);
            controls.push(create + open_call);
            control.remove(&id).unwrap();
        }
        if !marks.contains(&held) {
            continue;
        }
        let recent = &creations[creations.len().saturating_sub(window)..];
        let totals: Vec<Duration> = recent.iter().map(Creation::total).collect();
        let quartiles = [0.25, 0.5, 0.75].map(|q| ms(quantile(&totals, q)));
        let controlled = quartiles[1] / ms(p50(&controls[controls.len().saturating_sub(window)..]));
        let marked = [quartiles[0], quartiles[1], quartiles[2], controlled];
        first.get_or_insert(marked);
        last = Some(marked);
        let step =
            |f: fn(&Creation) -> Duration| ms(p50(&recent.iter().map(f).collect::<Vec<_>>()));
        let ours: std::collections::HashSet<String> = ids.iter().cloned().collect();
        println!(
            "{held:>6}  {:>7.1} [{:>5.1}-{:>5.1}]  {:>7.2}x  {:>7.1}  {:>10.1}  {:>7.1}  {:>8.2}  {:>7.1}  {:>6}  {:>5}  {:>7}  {:>6.2}MB",
            quartiles[1],
            quartiles[0],
            quartiles[2],
            controlled,
            step(|c| c.create),
            step(|c| c.open_call),
            step(|c| c.close),
            ms(p50(&warm)),
            rss_mib(),
            mounts(),
            loop_devices(),
            cgroups_of(&ours),
            allocated(&store.dir_of(&id).unwrap()) as f64 / 1e6,
        );
    }
    if let (Some(first), Some(last)) = (first, last) {
        println!(
            "creation at {n} held / at the first mark: {:.2}x p50 ({:.2}x p25, {:.2}x p75); against an empty store's in the same windows: {:.2}x (goal <= 1.2x from 100 to 5 000)",
            last[1] / first[1],
            last[0] / first[0],
            last[2] / first[2],
            last[3] / first[3],
        );
    }
    // Remove every environment (their cgroups too), then anything still mounted (the
    // tempdir's drop alone would leave mounts and cgroups behind).
    for id in &ids {
        let _ = store.remove(id);
    }
    hookbox_environments::disk::unmount_all_under(data.path());
    hookbox_environments::disk::unmount_all_under(control_data.path());
}
