//! The one-shot CLI against a bare sandbox: `hookbox tool ENV code_execution` of `true` and
//! `hookbox hooks test` of a tree whose one pre hook runs `true`, each a whole process start,
//! against `bwrap --unshare-all --ro-bind / / true` (bubblewrap: `scripts/bench-deps.sh`),
//! interleaved in one run so that the machine's load hits every variant alike. Prints each
//! variant's mean and p50 and its ratio to bwrap (the goal is at most 2x).
//!
//! Two things would favour one variant over another, and are evened out: the order (what a
//! command's processes leave to the kernel after it ends, a sandbox's teardown or a freed
//! address space, runs beside the next command), so the variants take turns at running first,
//! each following every other as often; and how much of each binary the page cache holds (a
//! binary that is only partly cached maps fewer pages per fault), so the binaries are read
//! whole before the first round.
//!
//! `--baseline PATH` adds the same two commands run by another `hookbox` binary (an older build,
//! copied out of `target/` so that it runs without the standalone launcher beside it), for a
//! before/after in the same run. Run as root (environments have disk images):
//!
//! `cargo bench -p hookbox --bench oneshot [-- --calls N] [--rounds R] [--baseline PATH]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn arg(name: &str) -> Option<String> {
    std::env::args().skip_while(|a| a != name).nth(1)
}

fn number(name: &str, default: usize) -> usize {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One variant: a name and the command it runs.
struct Variant {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    times: Vec<Duration>,
}

impl Variant {
    fn new(name: &str, program: &Path, args: &[&str]) -> Self {
        Variant {
            name: name.to_owned(),
            program: program.to_path_buf(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            times: Vec::new(),
        }
    }

    fn run_once(&mut self) {
        let t = Instant::now();
        let out = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let took = t.elapsed();
        assert!(
            out.status.success(),
            "{} failed: {}\n{}",
            self.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        self.times.push(took);
    }

    fn mean(&self) -> f64 {
        self.times.iter().map(Duration::as_secs_f64).sum::<f64>() / self.times.len() as f64 * 1e3
    }

    fn p50(&self) -> f64 {
        let mut sorted = self.times.clone();
        sorted.sort();
        sorted[sorted.len() / 2].as_secs_f64() * 1e3
    }
}

fn hookbox(binary: &Path, data: &Path, args: &[&str]) -> String {
    let out = Command::new(binary)
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hookbox {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Reads `binary` and the standalone launcher beside it (if there is one) to their ends, so
/// that the page cache holds them whole.
fn cache(binary: &Path) {
    use std::io::Read as _;
    let launcher = binary.with_file_name("hookbox-sandbox-exec");
    for file in [binary, launcher.as_path()] {
        let Ok(mut f) = std::fs::File::open(file) else {
            continue;
        };
        let mut chunk = vec![0u8; 1 << 20];
        while f.read(&mut chunk).unwrap() > 0 {}
    }
}

fn main() {
    assert!(
        rustix::process::geteuid().is_root(),
        "run as root (environments have disk images)"
    );
    let calls = number("--calls", 40);
    let rounds = number("--rounds", 1);
    let candidate =
        PathBuf::from(arg("--binary").unwrap_or_else(|| env!("CARGO_BIN_EXE_hookbox").to_owned()));
    let baseline = arg("--baseline").map(PathBuf::from);
    let bwrap = PathBuf::from("/usr/bin/bwrap");
    assert!(
        bwrap.exists(),
        "bubblewrap is missing: run scripts/bench-deps.sh"
    );

    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("data");
    let env_id = hookbox(&candidate, &data, &["env", "create"])
        .trim()
        .to_owned();
    let tree = scratch.path().join("tree");
    std::fs::create_dir_all(tree.join(".agents")).unwrap();
    std::fs::write(
        tree.join(".agents/hooks.json"),
        r#"{"hooks":{"pre_tool_execution":[{"matcher":"code_execution","hooks":[{"type":"command","command":"true"}]}]}}"#,
    )
    .unwrap();
    let data_s = data.to_str().unwrap().to_owned();
    let tree_s = tree.to_str().unwrap().to_owned();
    let code = r#"{"code":"true"}"#;
    let tool_args = [
        "tool",
        env_id.as_str(),
        "code_execution",
        "--args",
        code,
        "--data-dir",
        data_s.as_str(),
    ];
    let hooks_args = [
        "hooks",
        "test",
        "--root",
        tree_s.as_str(),
        "--tool",
        "code_execution",
        "--args",
        code,
        "--data-dir",
        data_s.as_str(),
    ];
    println!(
        "one-shot CLI: {calls} calls of each variant per round, interleaved, {rounds} round(s)"
    );
    println!("candidate {}", candidate.display());
    cache(&candidate);
    if let Some(b) = &baseline {
        println!("baseline  {}", b.display());
        cache(b);
    }
    for round in 1..=rounds {
        let mut variants = vec![
            Variant::new(
                "bwrap --unshare-all --ro-bind / / true",
                &bwrap,
                &["--unshare-all", "--ro-bind", "/", "/", "true"],
            ),
            Variant::new("hookbox tool code_execution true", &candidate, &tool_args),
            Variant::new("hookbox hooks test (1 hook: true)", &candidate, &hooks_args),
        ];
        if let Some(b) = &baseline {
            variants.push(Variant::new(
                "baseline tool code_execution true",
                b,
                &tool_args,
            ));
            variants.push(Variant::new(
                "baseline hooks test (1 hook: true)",
                b,
                &hooks_args,
            ));
        }
        // One warm-up of each (page cache, the environment's first mount and cgroup).
        for v in &mut variants {
            v.run_once();
            v.times.clear();
        }
        // Each turn starts one variant later: every variant follows every other as often.
        let n = variants.len();
        for turn in 0..calls {
            for k in 0..n {
                variants[(turn + k) % n].run_once();
            }
        }
        let floor = variants[0].mean();
        println!("round {round}:");
        for v in &variants {
            println!(
                "  {:<38} mean {:7.2} ms  p50 {:7.2} ms  {:5.2}x bwrap (mean)",
                v.name,
                v.mean(),
                v.p50(),
                v.mean() / floor
            );
        }
        if baseline.is_some() {
            println!(
                "  candidate / baseline: tool {:.2}x, hooks test {:.2}x (mean)",
                variants[1].mean() / variants[3].mean(),
                variants[2].mean() / variants[4].mean()
            );
        }
    }
    hookbox(&candidate, &data, &["env", "rm", &env_id]);
}
