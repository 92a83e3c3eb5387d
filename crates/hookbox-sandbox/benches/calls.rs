//! Benchmark: what one warm call costs in CPU, this build's launcher against another build's
//! (`--baseline PATH`, e.g. main's `hookbox-sandbox-launcher` copied aside), interleaved.
//!
//! Per round and per launcher (the order flips each round), a warm sandbox is built (not
//! counted), given 10 calls to settle, then `--calls N` calls of `/bin/true` one after another;
//! the CPU they took is read from the bench's own cgroup (v1 `cpuacct.usage` or v2 `cpu.stat`:
//! the launcher's processes, the program, this process's side of each call, and under gVisor
//! the sentry). Run it in a cgroup of its own for that to be the calls' CPU alone, e.g.
//! `mkdir /sys/fs/cgroup/cpuacct/calls; (echo $BASHPID > /sys/fs/cgroup/cpuacct/calls/cgroup.procs;
//! exec BENCH ...)`. Prints CPU per call and wall p50 per round and launcher, and the ratios
//! with their spread. `--gvisor` runs the same under gVisor (root and `runsc`).
//!
//! `--paired N` instead alternates N pairs of calls one by one (the order flipping each pair)
//! between a sandbox of each launcher, each in a v1 cpuacct cgroup of its own (the launcher or
//! runsc, and under gVisor the sentry, are accounted there), so that the load of a shared
//! machine falls on both alike; in six parts, each with fresh sandboxes built in flipping order
//! (two sandboxes of the same launcher differ by up to 1.2x in one run). It prints, per part,
//! each side's wall p50 and its sandbox's CPU per call, and their ratios with the spread.
//!
//! Run: `cargo bench -p hookbox-sandbox --bench calls -- --baseline PATH [--rounds R]
//! [--calls N] [--paired N] [--gvisor]`. Prints numbers; asserts nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark binary may panic

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hookbox_sandbox::gvisor::Runsc;
use hookbox_sandbox::runtime::Launcher;
use hookbox_sandbox::spec::{Bind, Identity, Isolation, LaunchSpec, Limits, Network, RuntimeKind};
use hookbox_sandbox::warm::WarmSandbox;

const THIS: &str = env!("CARGO_BIN_EXE_hookbox-sandbox-launcher");

fn arg(name: &str) -> Option<String> {
    std::env::args().skip_while(|a| a != name).nth(1)
}

/// CPU used so far by this bench's cgroup, in ms (see the module doc).
fn cgroup_cpu_ms() -> f64 {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next().unwrap(), parts.next().unwrap());
        if controllers.split(',').any(|c| c == "cpuacct") {
            let usage = format!("/sys/fs/cgroup/cpuacct{path}/cpuacct.usage");
            let ns: f64 = std::fs::read_to_string(usage)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            return ns / 1e6;
        }
    }
    let line = cgroups.lines().find(|l| l.starts_with("0::")).unwrap();
    let stat = std::fs::read_to_string(format!("/sys/fs/cgroup{}/cpu.stat", &line[3..])).unwrap();
    let usec: f64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    usec / 1e3
}

fn spec(dir: &std::path::Path, runtime: RuntimeKind) -> LaunchSpec {
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("workspace")).unwrap();
    std::fs::create_dir_all(dir.join("mnt")).unwrap();
    LaunchSpec {
        isolation: Isolation::Full,
        argv: vec!["/bin/true".into()],
        direct: None,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: "/workspace".into(),
        tree: root.clone(),
        mountpoint: dir.join("mnt"),
        host_read_only: [
            "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
        ]
        .map(str::to_owned)
        .to_vec(),
        etc_entries: ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf"]
            .map(str::to_owned)
            .to_vec(),
        binds: vec![Bind {
            source: root.join("workspace"),
            target: "/workspace".into(),
            writable: true,
        }],
        files: Vec::new(),
        network: Network::Isolated,
        limits: Limits {
            address_space_bytes: Some(4 << 30),
            nproc: None,
            open_files: 4096,
            file_size_bytes: None,
        },
        cgroups: Vec::new(),
        hostname: "hookbox-bench".into(),
        identity: rustix::process::geteuid().is_root().then_some(Identity {
            uid: 1_000_042_425,
            gid: 1_000_042_425,
        }),
        stage_timings: false,
        parent_pid: i32::try_from(std::process::id()).unwrap(),
        warm: false,
        runtime,
        egress_port: None,
        one_shot: false,
    }
}

/// One call to its end: its wall time.
async fn one(sandbox: &WarmSandbox, call: &hookbox_sandbox::spec::CallSpec) -> Duration {
    let started = Instant::now();
    let out = sandbox
        .call(call, None)
        .await
        .unwrap()
        .supervise(started, Vec::new(), Duration::from_secs(120), 1024)
        .await
        .unwrap()
        .0;
    assert!(out.success(), "{:?}", out.termination);
    started.elapsed()
}

/// CPU per call (ms) and wall p50 of `calls` calls in a fresh warm sandbox of `launcher`.
async fn measure(
    launcher: &str,
    runtime: RuntimeKind,
    runsc: Option<&Runsc>,
    calls: usize,
) -> (f64, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let (sandbox, call) = warm(launcher, runsc, spec(dir.path(), runtime)).await;
    let before = cgroup_cpu_ms();
    let mut walls = Vec::with_capacity(calls);
    for _ in 0..calls {
        walls.push(one(&sandbox, &call).await);
    }
    let cpu = (cgroup_cpu_ms() - before) / calls as f64;
    tokio::task::spawn_blocking(move || drop(sandbox))
        .await
        .unwrap();
    walls.sort();
    (cpu, walls[walls.len() / 2])
}

/// A cpuacct cgroup of this bench's, removed when dropped (once its processes are gone).
struct CpuGroup(PathBuf);

impl CpuGroup {
    fn new(name: &str) -> Self {
        let dir = PathBuf::from(format!(
            "/sys/fs/cgroup/cpuacct/hookbox-bench-calls-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a v1 cpuacct hierarchy at /sys/fs/cgroup/cpuacct");
        Self(dir)
    }

    fn ms(&self) -> f64 {
        let ns: f64 = std::fs::read_to_string(self.0.join("cpuacct.usage"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        ns / 1e6
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// One side of `--paired`: a warm sandbox of one launcher in its own cpuacct cgroup.
async fn paired_side(
    dir: &std::path::Path,
    name: &str,
    launcher: &str,
    runtime: RuntimeKind,
    runsc: Option<&Runsc>,
) -> (CpuGroup, WarmSandbox, hookbox_sandbox::spec::CallSpec) {
    let group = CpuGroup::new(name);
    let mut spec = spec(&dir.join(name), runtime);
    spec.cgroups = vec![group.0.clone()];
    let (sandbox, call) = warm(launcher, runsc, spec).await;
    (group, sandbox, call)
}

/// A warm sandbox of `launcher` for `spec` (under gVisor with `runsc`), after ten calls of
/// warm-up, and the call it runs.
async fn warm(
    launcher: &str,
    runsc: Option<&Runsc>,
    spec: LaunchSpec,
) -> (WarmSandbox, hookbox_sandbox::spec::CallSpec) {
    let (key, call) = spec.split_call();
    let launcher = Launcher::standalone(launcher);
    let sandbox = match runsc {
        Some(runsc) => WarmSandbox::start_gvisor(runsc, &launcher, key, None).await,
        None => WarmSandbox::start(&launcher, key, None).await,
    }
    .unwrap();
    for _ in 0..10 {
        one(&sandbox, &call).await;
    }
    (sandbox, call)
}

/// `--paired` (see the module doc): six parts, each with a fresh sandbox per launcher (built
/// in the order that flips each part, since two sandboxes of one launcher differ too).
async fn paired(baseline: &str, runtime: RuntimeKind, runsc: Option<&Runsc>, pairs: usize) {
    const PARTS: usize = 6;
    println!(
        "{runtime}: {pairs} pairs of /bin/true calls, alternating, in {PARTS} parts with fresh sandboxes; wall p50 (ms) and the sandbox's CPU per call (ms)"
    );
    println!("part  p50_new  p50_base  p50_ratio  cpu_new  cpu_base  cpu_ratio");
    let per_part = pairs.div_ceil(PARTS);
    let (mut wall_ratios, mut cpu_ratios) = (Vec::new(), Vec::new());
    let mut faster = 0;
    for part in 0..PARTS {
        let dir = tempfile::tempdir().unwrap();
        let mut sides = Vec::new();
        let order = if part % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let (name, launcher) = [("new", THIS), ("base", baseline)][side];
            sides.push((
                side,
                paired_side(dir.path(), name, launcher, runtime, runsc).await,
            ));
        }
        sides.sort_by_key(|(side, _)| *side);
        let mut walls = [Vec::new(), Vec::new()];
        let mut cpu = [0.0, 0.0];
        for i in 0..per_part {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            let mut pair = [Duration::ZERO; 2];
            for side in order {
                let (group, sandbox, call) = &sides[side].1;
                let before = group.ms();
                pair[side] = one(sandbox, call).await;
                cpu[side] += group.ms() - before;
                walls[side].push(pair[side]);
            }
            faster += usize::from(pair[0] < pair[1]);
        }
        let p50 = |w: &mut Vec<Duration>| {
            w.sort();
            w[w.len() / 2].as_secs_f64() * 1e3
        };
        let (new, base) = (p50(&mut walls[0]), p50(&mut walls[1]));
        let (cpu_new, cpu_base) = (cpu[0] / per_part as f64, cpu[1] / per_part as f64);
        println!(
            "{:>4}  {new:>7.3}  {base:>8.3}  {:>9.3}  {cpu_new:>7.3}  {cpu_base:>8.3}  {:>9.3}",
            part + 1,
            new / base,
            cpu_new / cpu_base
        );
        wall_ratios.push(new / base);
        cpu_ratios.push(cpu_new / cpu_base);
        for (_, (group, sandbox, _)) in sides {
            tokio::task::spawn_blocking(move || drop(sandbox))
                .await
                .unwrap();
            drop(group);
        }
    }
    println!("wall p50, new / baseline: {}", spread(wall_ratios));
    println!(
        "sandbox CPU per call, new / baseline: {}",
        spread(cpu_ratios)
    );
    println!(
        "pairs in which the new launcher's call was faster: {faster} of {}",
        PARTS * per_part
    );
}

fn spread(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    format!(
        "median {:.3} (min {:.3}, max {:.3})",
        values[values.len() / 2],
        values[0],
        values[values.len() - 1]
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let baseline = arg("--baseline").expect("--baseline PATH (another build's launcher)");
    let rounds: usize = arg("--rounds").map_or(6, |r| r.parse().unwrap());
    let calls: usize = arg("--calls").map_or(200, |n| n.parse().unwrap());
    let gvisor = std::env::args().any(|a| a == "--gvisor");
    let runsc = gvisor.then(|| {
        Runsc::detect(
            std::env::var_os("HOOKBOX_TEST_RUNSC")
                .map(PathBuf::from)
                .as_deref(),
            Default::default(),
        )
        .unwrap()
    });
    let runtime = if gvisor {
        RuntimeKind::Gvisor
    } else {
        RuntimeKind::Namespaces
    };
    if let Some(pairs) = arg("--paired") {
        paired(&baseline, runtime, runsc.as_ref(), pairs.parse().unwrap()).await;
        return;
    }
    println!("{runtime}: {calls} calls of /bin/true per launcher and round; CPU per call in ms");
    println!("round  cpu_new  cpu_base  cpu_ratio  p50_new_ms  p50_base_ms  p50_ratio");
    let (mut cpu_ratios, mut wall_ratios) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let mut results = Vec::new();
        let order = if round % 2 == 1 {
            [THIS, baseline.as_str()]
        } else {
            [baseline.as_str(), THIS]
        };
        for launcher in order {
            results.push((
                launcher,
                measure(launcher, runtime, runsc.as_ref(), calls).await,
            ));
        }
        let get = |which: &str| results.iter().find(|(l, _)| *l == which).unwrap().1;
        let (new, base) = (get(THIS), get(&baseline));
        let cpu_ratio = new.0 / base.0;
        let wall_ratio = new.1.as_secs_f64() / base.1.as_secs_f64();
        println!(
            "{round:>5}  {:>7.3}  {:>8.3}  {cpu_ratio:>9.3}  {:>10.3}  {:>11.3}  {wall_ratio:>9.3}",
            new.0,
            base.0,
            new.1.as_secs_f64() * 1e3,
            base.1.as_secs_f64() * 1e3,
        );
        cpu_ratios.push(cpu_ratio);
        wall_ratios.push(wall_ratio);
    }
    println!("CPU per call, new / baseline: {}", spread(cpu_ratios));
    println!("wall p50 per call, new / baseline: {}", spread(wall_ratios));
}
