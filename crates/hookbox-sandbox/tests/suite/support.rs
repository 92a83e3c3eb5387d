//! A throwaway sandbox tree, its launch spec, and launches through the crate's own launcher
//! binary: cold ([`cold`]) or as calls of a warm sandbox ([`warm`], [`warm_call`]).

use std::path::Path;
use std::time::{Duration, Instant};

use hookbox_process::CommandOutput;
use hookbox_sandbox::SandboxError;
use hookbox_sandbox::runtime::{Launcher, launch_cold};
use hookbox_sandbox::spec::{Bind, Identity, Isolation, LaunchSpec, Limits, Network, RuntimeKind};
use hookbox_sandbox::warm::WarmSandbox;

pub const LAUNCHER: &str = env!("CARGO_BIN_EXE_hookbox-sandbox-launcher");

pub fn launcher() -> Launcher {
    Launcher::standalone(LAUNCHER)
}

/// As host root (as CI runs), sandboxes run as an unprivileged host uid, as an environment's
/// would; unprivileged, as our own.
pub fn identity() -> Option<Identity> {
    rustix::process::geteuid().is_root().then_some(Identity {
        uid: 1_000_042_424,
        gid: 1_000_042_424,
    })
}

/// A tree with a `/workspace` (the working directory) and the spec that runs `argv` in it.
pub struct Tree {
    pub dir: tempfile::TempDir,
    pub spec: LaunchSpec,
}

pub fn tree(argv: &[&str]) -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("workspace")).unwrap();
    std::fs::create_dir_all(dir.path().join("mnt")).unwrap();
    let spec = LaunchSpec {
        isolation: Isolation::Full,
        argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        direct: None,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: "/workspace".into(),
        tree: root.clone(),
        mountpoint: dir.path().join("mnt"),
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
            address_space_bytes: None,
            nproc: None,
            open_files: 1024,
            file_size_bytes: None,
        },
        cgroups: Vec::new(),
        hostname: "hookbox-test".into(),
        identity: identity(),
        stage_timings: false,
        parent_pid: i32::try_from(std::process::id()).unwrap(),
        warm: false,
        runtime: RuntimeKind::Namespaces,
        egress_port: None,
        one_shot: false,
    };
    Tree { dir, spec }
}

/// Runs `spec` once in a sandbox of its own.
pub async fn cold(
    spec: &LaunchSpec,
    timeout: Duration,
    output_limit: usize,
) -> Result<CommandOutput, SandboxError> {
    launch_cold(
        &launcher(),
        spec,
        None,
        Vec::new(),
        timeout,
        output_limit,
        None,
    )
    .await
    .map(|(output, _)| output)
}

/// Builds the warm sandbox `spec`'s environment part describes.
pub async fn warm(spec: &LaunchSpec) -> Result<WarmSandbox, SandboxError> {
    let (key, _) = spec.split_call();
    WarmSandbox::start(&launcher(), key, None).await
}

/// Runs `spec`'s call in `sandbox`.
pub async fn warm_call(
    sandbox: &WarmSandbox,
    spec: &LaunchSpec,
    timeout: Duration,
    output_limit: usize,
) -> Result<CommandOutput, SandboxError> {
    let (_, call) = spec.split_call();
    let started = Instant::now();
    sandbox
        .call(&call, None)
        .await?
        .supervise(started, Vec::new(), timeout, output_limit)
        .await
        .map(|(output, _)| output)
}

/// Stops a warm sandbox off the async executor (its stop waits for the launcher to exit).
pub async fn stop(sandbox: WarmSandbox) {
    tokio::task::spawn_blocking(move || drop(sandbox))
        .await
        .unwrap();
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A path under the tree that does not exist.
pub fn missing(tree: &Tree) -> std::path::PathBuf {
    let path = tree.dir.path().join("root/not-there");
    assert!(!Path::new(&path).exists());
    path
}

/// The environment's pids cgroup with room for `max` tasks, removed when dropped.
pub struct PidsCgroup(pub hookbox_sandbox::cgroup::EnvCgroups);

impl PidsCgroup {
    pub fn new(name: &str, max: u64) -> Self {
        let id = format!("isolation-test-{}-{name}", std::process::id());
        let cgroups = hookbox_sandbox::cgroup::setup(&id, max, 1 << 30);
        assert!(
            cgroups.pids,
            "this machine offers no pids cgroup to cap a sandbox with"
        );
        Self(cgroups)
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        hookbox_sandbox::cgroup::remove(&self.0);
    }
}

/// What a program sees of its confinement: its capability sets, no-new-privileges and seccomp
/// state (`/proc/self/status`), its limits (`/proc/self/limits`), and where it may create a file.
pub const CONFINEMENT: &str = "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status; \
    grep -E '^Max (core file size|file size|address space|open files|processes) ' /proc/self/limits; \
    for d in / /dev /workspace /dev/shm; do \
      if (: > \"$d/probe-$$\") 2>/dev/null; then echo \"create in $d allowed\"; \
      else echo \"create in $d denied\"; fi; \
    done";

/// [`tree`] running [`CONFINEMENT`], with a value of its own for every limit the launcher sets
/// (none of them a default a program would have anyway).
pub fn confinement_tree() -> Tree {
    let mut t = tree(&["/bin/sh", "-c", CONFINEMENT]);
    t.spec.limits = Limits {
        address_space_bytes: Some(3 << 30),
        nproc: Some(4321),
        open_files: 777,
        file_size_bytes: Some(5 << 20),
    };
    // The sandbox's root is an unprivileged host uid: it may create files here only if the
    // directory lets it (Landlock is then what may still refuse).
    let workspace = t.dir.path().join("root/workspace");
    std::fs::set_permissions(
        &workspace,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    t
}

/// The lines [`CONFINEMENT`] must print in a sandbox of `confinement_tree`, whitespace runs
/// made single spaces: the launcher's `KEPT_CAPABILITIES` (and `CAP_SYSLOG` under gVisor) in
/// every set of sandboxed root but the inheritable and ambient ones, which are empty; the
/// tree's limits, and no core dumps; creating a file only in `/workspace` and `/dev/shm` (`/`
/// is read-only; under namespaces Landlock refuses `/dev`, a writable tmpfs), and the seccomp
/// filter in force.
pub fn expected_confinement(runtime: RuntimeKind) -> Vec<String> {
    let gvisor = runtime == RuntimeKind::Gvisor;
    let caps = if gvisor {
        "00000004000004ff"
    } else {
        "00000000000004ff"
    };
    let mut lines = vec![
        "CapInh: 0000000000000000".to_owned(),
        format!("CapPrm: {caps}"),
        format!("CapEff: {caps}"),
        format!("CapBnd: {caps}"),
    ];
    // gVisor's status shows neither the ambient set nor no-new-privileges.
    if !gvisor {
        lines.push("CapAmb: 0000000000000000".into());
        lines.push("NoNewPrivs: 1".into());
    }
    lines.push("Seccomp: 2".into());
    lines.extend(
        [
            "Max file size 5242880 5242880 bytes",
            "Max core file size 0 0 bytes",
            "Max processes 4321 4321 processes",
            "Max open files 777 777 files",
            "Max address space 3221225472 3221225472 bytes",
            "create in / denied",
        ]
        .map(str::to_owned),
    );
    lines.push(format!(
        "create in /dev {}",
        if gvisor { "allowed" } else { "denied" }
    ));
    lines.push("create in /workspace allowed".into());
    lines.push("create in /dev/shm allowed".into());
    lines
}

/// `stdout` of [`CONFINEMENT`] as [`expected_confinement`] spells it.
pub fn confinement_lines(stdout: &[u8]) -> Vec<String> {
    text(stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Waits until process `pid` is blocked in the system call whose `/proc/PID/syscall` line starts
/// with `prefix` (its number, then its arguments), for at most `within`; `doing` says what it
/// was expected to be doing, for the failure.
pub fn wait_until_blocked_in(pid: u32, prefix: &str, within: std::time::Duration, doing: &str) {
    let deadline = std::time::Instant::now() + within;
    loop {
        let syscall = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap();
        if syscall.starts_with(prefix) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "process {pid} is not {doing}: {syscall}"
        );
        std::thread::yield_now();
    }
}
