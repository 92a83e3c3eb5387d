//! The gVisor runtime's host side: finding a usable `runsc`, writing the OCI bundle a warm
//! sandbox is built from, and starting and removing its container.
//!
//! A warm sandbox under gVisor is one runsc container per open environment. Its root, binds and
//! `/etc` are the same [`LaunchSpec`] the namespaces launcher builds, written as OCI mounts over
//! a read-only root of empty mountpoints; its init is hookbox's own launcher, which finds its
//! request socket on fd 0 (runsc passes the container's stdio through as host descriptors, so
//! no host socket is exposed to the sandbox: `--host-uds` stays `none`). Sandboxed root maps to
//! the environment's host uid range through the OCI user namespace. runsc runs with
//! `--network=none` in a fresh network namespace of its own, inside the environment's cgroup
//! (`--ignore-cgroups`: hookbox, not runsc, owns the limits).
//!
//! This module must not run calls (the launcher's `gvisor_serve` does, inside the sandbox) nor
//! decide which environments run under gVisor.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{LaunchFailure, Stage};
use crate::spec::{Identity, LaunchSpec};

/// The oldest gVisor release (`runsc --version`'s date) the runtime supports: Debian 13's
/// `runsc` 0.0~20240729. Older builds (Debian 12's 0.0~20221219) lack systrap, mount
/// namespaces, `clone3` and the statx flags that Debian's own `ls` uses.
pub const MIN_RELEASE: u32 = 20240729;

/// How many ids of the host an environment's sandbox maps under gVisor, from its own uid on:
/// gVisor's kernel needs `nobody` (65534) mapped, and programs that switch users (`su`,
/// package builds) get distinct unprivileged host ids instead of failing.
pub const ID_SPAN: u32 = 65536;

/// Host tasks a gVisor sandbox needs beyond its programs' own (the application kernel's
/// threads, its gofer, systrap's stubs): added to an environment's process cap in its host
/// cgroup, which is the only cap there is (gVisor's own pids controller and `RLIMIT_NPROC` do
/// not refuse forks in this release). About 60 are in use while idle.
pub const HOST_TASKS: u64 = 256;

/// The sandbox path at which the launcher binary is bound read-only for the container's init.
pub const INIT_PATH: &str = "/.hookbox-init";

/// One host path the sandbox binds, staged by the wrapper at `staged` (see [`wrap`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Staged {
    pub source: PathBuf,
    pub staged: PathBuf,
    pub dir: bool,
    pub writable: bool,
}

/// What the wrapper reads from fd 3: the host paths to stage, and the runsc command.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Wrap {
    pub staged: Vec<Staged>,
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// Every warm sandbox's bundle is a directory of the system temp dir named with this prefix.
pub const BUNDLE_PREFIX: &str = "hookbox-gvisor-";

/// A bundle younger than this is never swept: its sandbox may be starting, before it holds the
/// bundle's lock.
const SWEEP_GRACE: Duration = Duration::from_secs(60);

/// How long one `runsc` housekeeping command (`--version`, `kill`, `delete`) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// gVisor's platform: how the application kernel intercepts its programs' system calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Platform {
    /// seccomp traps into stub processes; works everywhere, the default.
    #[default]
    Systrap,
    /// `PTRACE_SYSEMU`; slower, for kernels without seccomp user notifications.
    Ptrace,
    /// hardware virtualisation through `/dev/kvm`.
    Kvm,
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::Systrap => "systrap",
            Platform::Ptrace => "ptrace",
            Platform::Kvm => "kvm",
        }
    }
}

impl std::str::FromStr for Platform {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "systrap" => Ok(Platform::Systrap),
            "ptrace" => Ok(Platform::Ptrace),
            "kvm" => Ok(Platform::Kvm),
            other => Err(format!(
                "unknown gVisor platform `{other}` (expected systrap, ptrace or kvm)"
            )),
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why the gVisor runtime cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum GvisorError {
    #[error(
        "the gVisor runtime needs runsc (gVisor release {MIN_RELEASE} or newer, Debian 13's `runsc` package): none on PATH; install it (scripts/setup.sh does) or pass --runsc PATH"
    )]
    NotFound,
    #[error("running `{path} --version`: {message}")]
    Version { path: PathBuf, message: String },
    #[error(
        "{path} is gVisor release {found}; hookbox needs {MIN_RELEASE} or newer (Debian 13's `runsc` 0.0~20240729, not Debian 12's 0.0~20221219)"
    )]
    TooOld { path: PathBuf, found: String },
    #[error(
        "the gVisor runtime needs hookbox to run as root (runsc builds the sandbox's namespaces and maps its root to the environment's unprivileged uid)"
    )]
    NotRoot,
    #[error("the gVisor runtime needs full isolation; it cannot run with --insecure-no-isolation")]
    NoIsolation,
    #[error("writing the sandbox's OCI bundle at {path}: {source}")]
    Bundle {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl From<GvisorError> for LaunchFailure {
    /// gVisor cannot be used, or the bundle could not be written: a failure of [`Stage::Runsc`].
    fn from(err: GvisorError) -> Self {
        let errno = match &err {
            GvisorError::Bundle { source, .. } => source.raw_os_error(),
            GvisorError::NotFound
            | GvisorError::Version { .. }
            | GvisorError::TooOld { .. }
            | GvisorError::NotRoot
            | GvisorError::NoIsolation => None,
        };
        LaunchFailure::new(Stage::Runsc, errno, err.to_string())
    }
}

/// A `runsc` that was found and checked, and how to run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runsc {
    pub path: PathBuf,
    /// Its release date, `YYYYMMDD`.
    pub release: u32,
    pub platform: Platform,
}

impl Runsc {
    /// Finds `runsc` (`path`, else on `PATH`), checks its release and that hookbox runs as root.
    pub fn detect(path: Option<&Path>, platform: Platform) -> Result<Self, GvisorError> {
        if !rustix::process::geteuid().is_root() {
            return Err(GvisorError::NotRoot);
        }
        let path = match path {
            Some(path) => path.to_path_buf(),
            None => find_on_path("runsc").ok_or(GvisorError::NotFound)?,
        };
        let mut cmd = std::process::Command::new(&path);
        cmd.arg("--version")
            .env_clear()
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        let output = hookbox_process::host::output(cmd, COMMAND_TIMEOUT).map_err(|e| {
            GvisorError::Version {
                path: path.clone(),
                message: e.to_string(),
            }
        })?;
        let text = String::from_utf8_lossy(&output);
        let release = parse_release(&text).ok_or_else(|| GvisorError::Version {
            path: path.clone(),
            message: format!("no release date in {:?}", text.lines().next().unwrap_or("")),
        })?;
        if release < MIN_RELEASE {
            return Err(GvisorError::TooOld {
                path,
                found: release.to_string(),
            });
        }
        Ok(Self {
            path,
            release,
            platform,
        })
    }

    /// The global flags of every runsc command for a sandbox whose state lives in `state`.
    fn global_args(&self, state: &Path) -> Vec<String> {
        let mut args = match std::env::var_os(crate::env_vars::HOOKBOX_RUNSC_DEBUG_LOG) {
            Some(dir) => vec![
                "--debug".to_owned(),
                format!("--debug-log={}/", Path::new(&dir).display()),
            ],
            None => Vec::new(),
        };
        args.extend([
            format!("--root={}", state.display()),
            format!("--platform={}", self.platform),
            // gVisor's own network stack with only loopback; egress is relayed by the init.
            "--network=none".to_owned(),
            // hookbox's cgroup is around runsc's processes; runsc must not make its own.
            "--ignore-cgroups".to_owned(),
            // The tree is written by hookbox's file tools from outside: never cache it.
            "--file-access-mounts=shared".to_owned(),
            // No overlay on the root (it is read-only, empty mountpoints only).
            "--overlay2=none".to_owned(),
            "--host-uds=none".to_owned(),
        ]);
        args
    }

    /// What creates, starts and waits for container `id` of `bundle`, run through the wrapper
    /// (see [`wrap`]) with `staged` in place.
    pub fn run_wrapped(&self, state: &Path, bundle: &Path, id: &str, staged: Vec<Staged>) -> Wrap {
        let mut args = self.global_args(state);
        args.extend([
            "run".to_owned(),
            format!("--bundle={}", bundle.display()),
            id.to_owned(),
        ]);
        Wrap {
            staged,
            program: self.path.clone(),
            args,
        }
    }

    /// Kills container `id` and deletes its state (bounded; errors only logged: the container
    /// may already be gone).
    pub fn remove(&self, state: &Path, id: &str) {
        for args in [
            vec!["kill", "--all", id, "KILL"],
            vec!["delete", "--force", id],
        ] {
            let mut cmd = std::process::Command::new(&self.path);
            cmd.args(self.global_args(state))
                .args(&args)
                .env_clear()
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Err(error) = hookbox_process::host::run(cmd, COMMAND_TIMEOUT) {
                tracing::debug!(container = id, command = args[0], %error, "runsc housekeeping");
            }
        }
    }
}

/// Opens bundle directory `dir` (never through a symlink) and takes an exclusive lock on it,
/// without waiting. The lock lives as long as the returned descriptor, which is close-on-exec:
/// a process that dies (even by `kill -9`) releases it, so a locked bundle is a live one.
pub fn lock_bundle(dir: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{FlockOperation, Mode, OFlags};
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive)?;
    Ok(fd)
}

impl Runsc {
    /// Removes what a hookbox that died without stopping its sandboxes left in `tmp`: every
    /// bundle directory older than `SWEEP_GRACE` that no live process holds locked (see
    /// [`lock_bundle`]). A container still registered in its state directory is killed and
    /// deleted with runsc first. Symlinks are never followed. Returns how many were removed.
    pub fn sweep_bundles(&self, tmp: &Path) -> usize {
        let Ok(entries) = std::fs::read_dir(tmp) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().filter(|n| n.starts_with(BUNDLE_PREFIX)) else {
                continue;
            };
            let path = entry.path();
            let old_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| {
                m.file_type().is_dir()
                    && m.modified()
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age >= SWEEP_GRACE)
            });
            if !old_dir {
                continue;
            }
            // Held until the directory is gone: no sandbox can take it meanwhile.
            let Ok(_lock) = lock_bundle(&path) else {
                continue;
            };
            let state = path.join("state");
            let registered = std::fs::read_dir(&state).is_ok_and(|mut d| d.next().is_some());
            if registered {
                self.remove(&state, id);
            }
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    removed += 1;
                    tracing::info!(bundle = %path.display(), "removed a stale gVisor bundle");
                }
                Err(e) => {
                    tracing::warn!(bundle = %path.display(), error = %e, "cannot remove a stale gVisor bundle");
                }
            }
        }
        removed
    }
}

/// The wrapper around `runsc run` (the launcher binary with
/// [`WRAP_MARKER`](crate::env_vars::WRAP_MARKER) set, single threaded), still host root: in a
/// private mount namespace and an empty network namespace of its own, binds every host path the
/// sandbox uses at its staged place in the bundle (opened without following a final symlink),
/// read-only unless writable, then execs runsc. Two reasons:
/// - runsc's gofer works as the environment's unprivileged uid, which cannot traverse the data
///   dir's 0700 parents; the staged paths lie beneath the bundle, which it can (as the
///   namespaces launcher stages under `/tmp`);
/// - gVisor honours a read-only OCI mount inside its kernel, but its gofer opens host files with
///   the host's permissions (this release truncated a file of a read-only bind on `O_TRUNC`
///   while reporting `EROFS`); the host kernel's read-only mount makes that impossible.
///
/// The mounts exist only in the wrapper's namespace, which runsc's processes inherit, and go
/// with them.
pub fn wrap(wrap: &Wrap) -> Result<std::convert::Infallible, LaunchFailure> {
    use rustix::fs::{Mode, OFlags};
    let runsc = wrap.program.display();
    let failed = |stage: Stage, errno: Option<i32>, what: String| {
        LaunchFailure::new(stage, errno, format!("starting runsc {runsc}: {what}"))
    };
    let staging = |path: &Path, e: std::io::Error| {
        failed(
            Stage::Staging,
            e.raw_os_error(),
            format!("staging {}: {e}", path.display()),
        )
    };
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS | nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| failed(Stage::Namespaces, Some(e as i32), e.to_string()))?;
    crate::launcher::make_private().map_err(|e| {
        let inner = e.failure();
        failed(inner.stage, inner.errno, inner.message)
    })?;
    for staged in &wrap.staged {
        let fd = rustix::fs::open(
            &staged.source,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| staging(&staged.source, e.into()))?;
        let is_dir = rustix::fs::fstat(&fd)
            .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir())
            .map_err(|e| staging(&staged.source, e.into()))?;
        if is_dir != staged.dir {
            return Err(staging(
                &staged.source,
                std::io::Error::other("changed kind since the bundle was written"),
            ));
        }
        let through = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&fd)
        ));
        crate::launcher::bind(&through, &staged.staged, staged.writable).map_err(|e| {
            let inner = e.failure();
            failed(
                Stage::Staging,
                inner.errno,
                format!("staging {}: {}", staged.source.display(), inner.message),
            )
        })?;
    }
    let nul = |_| {
        failed(
            Stage::Exec,
            None,
            "a NUL byte in runsc's command line".into(),
        )
    };
    let program =
        std::ffi::CString::new(wrap.program.as_os_str().as_encoded_bytes()).map_err(nul)?;
    let mut argv = vec![program.clone()];
    for arg in &wrap.args {
        argv.push(std::ffi::CString::new(arg.as_str()).map_err(nul)?);
    }
    let envp: [std::ffi::CString; 0] = [];
    match nix::unistd::execve(&program, &argv, &envp) {
        Ok(never) => match never {},
        Err(e) => Err(failed(Stage::Runsc, Some(e as i32), e.to_string())),
    }
}

/// The wrapper's entry point (the launcher binary run with
/// [`WRAP_MARKER`](crate::env_vars::WRAP_MARKER)): its [`Wrap`] on [`crate::spec::SPEC_FD`], a
/// failure on stderr, which is the warm sandbox's status channel.
pub(crate) fn wrapper_main() -> i32 {
    let result = crate::launcher::read_json::<Wrap>()
        .map_err(|e| e.failure())
        .and_then(|spec| wrap(&spec));
    match result {
        Ok(never) => match never {},
        Err(failure) => {
            crate::status::report(&mut None, &failure);
            crate::spec::EXIT_SETUP_FAILED
        }
    }
}

/// `20240729` from `runsc version 0.0~20240729.0` or `runsc version release-20240729.0`.
pub fn parse_release(version: &str) -> Option<u32> {
    let line = version
        .lines()
        .find_map(|l| l.trim().strip_prefix("runsc version "))?;
    let bytes = line.as_bytes();
    (0..bytes.len().saturating_sub(7)).find_map(|i| {
        let digits = &line[i..i + 8];
        let before_ok = i == 0 || !bytes[i - 1].is_ascii_digit();
        let after_ok = bytes.get(i + 8).is_none_or(|b| !b.is_ascii_digit());
        (before_ok
            && after_ok
            && digits.starts_with("20")
            && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
    })
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
}

/// Writes the OCI bundle of `spec`'s warm sandbox into `dir` (which must be empty): `rootfs/`
/// with a mountpoint for every mount, `etc/` with the generated files, and `config.json`.
/// `launcher` is the host binary bound at [`INIT_PATH`], run with `args`. Every bind's source
/// is a place under `stage/` that [`wrap`] binds the host path at; returns those.
pub fn write_bundle(
    dir: &Path,
    spec: &LaunchSpec,
    launcher: &Path,
    args: &[String],
) -> Result<Vec<Staged>, GvisorError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| GvisorError::Bundle { path, source }
    };
    let rootfs = dir.join("rootfs");
    let generated = dir.join("etc");
    let stage = dir.join("stage");
    for path in [&rootfs, &generated, &stage] {
        std::fs::create_dir_all(path).map_err(err(path))?;
    }
    // The gofer (the environment's uid) must traverse to the rootfs and the staged binds.
    for path in [dir, &stage] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o711))
            .map_err(err(path))?;
    }
    let mut bundle = Bundle {
        rootfs: &rootfs,
        stage: &stage,
        mounts: vec![
            json!({"destination": "/proc", "type": "proc", "source": "proc"}),
            json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                   "options": ["nosuid", "noexec", "mode=755", "size=65536k"]}),
            json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
                   "options": ["nosuid", "nodev", "mode=1777", "size=65536k"]}),
            // No /sys, as under namespaces (runsc would add gVisor's own).
            json!({"destination": "/sys", "type": "tmpfs", "source": "sys",
                   "options": ["ro", "nosuid", "nodev", "noexec", "mode=555", "size=4k"]}),
        ],
        staged: Vec::new(),
    };
    for dir in ["proc", "dev", "sys"] {
        bundle.mountpoint(dir, true).map_err(err(&rootfs))?;
    }

    for host in &spec.host_read_only {
        bundle
            .host_entry(Path::new(host), host.trim_start_matches('/'))
            .map_err(err(Path::new(host)))?;
    }
    bundle.mountpoint("etc", true).map_err(err(&rootfs))?;
    for entry in &spec.etc_entries {
        let host = Path::new("/etc").join(entry);
        bundle
            .host_entry(&host, &format!("etc/{entry}"))
            .map_err(err(&host))?;
    }
    for (name, content) in crate::spec::generated_etc(&spec.hostname) {
        let path = generated.join(name);
        std::fs::write(&path, content).map_err(err(&path))?;
        bundle.bind(&path, &format!("etc/{name}"), false, false)?;
    }
    for file in &spec.files {
        bundle.bind(
            &file.source,
            file.target.trim_start_matches('/'),
            false,
            false,
        )?;
    }
    bundle.bind(launcher, INIT_PATH.trim_start_matches('/'), false, false)?;
    for b in &spec.binds {
        bundle.bind(
            &b.source,
            b.target.trim_start_matches('/'),
            true,
            b.writable,
        )?;
    }

    let Identity { uid, gid } = spec.identity.ok_or(GvisorError::NotRoot)?;
    let mut argv = vec![INIT_PATH.to_owned()];
    argv.extend(args.iter().cloned());
    // What init needs to build each call (mount its /proc, clone namespaces, drop ids); each
    // call then keeps only the launcher's KEPT_CAPABILITIES.
    let caps: Vec<&str> = INIT_CAPABILITIES.to_vec();
    let config = json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": argv,
            "env": [format!("{}=1", crate::env_vars::INIT_MARKER)],
            "cwd": "/",
            "capabilities": {
                "bounding": caps, "effective": caps, "permitted": caps,
            },
            "noNewPrivileges": true,
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": spec.limits.open_files.max(1024), "soft": spec.limits.open_files.max(1024)}],
        },
        "root": {"path": "rootfs", "readonly": true},
        "hostname": spec.hostname,
        "mounts": bundle.mounts,
        "linux": {
            "namespaces": [
                {"type": "pid"}, {"type": "mount"}, {"type": "ipc"}, {"type": "uts"},
                {"type": "network"}, {"type": "user"},
            ],
            "uidMappings": [{"containerID": 0, "hostID": uid, "size": ID_SPAN}],
            "gidMappings": [{"containerID": 0, "hostID": gid, "size": ID_SPAN}],
        },
    });
    let path = dir.join("config.json");
    let text = serde_json::to_vec_pretty(&config).map_err(std::io::Error::other);
    text.and_then(|bytes| std::fs::write(&path, bytes))
        .map_err(err(&path))?;
    Ok(bundle.staged)
}

/// Capabilities of the container's init (inside gVisor's user namespace).
const INIT_CAPABILITIES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_ADMIN",
    "CAP_SYSLOG",
];

struct Bundle<'a> {
    rootfs: &'a Path,
    stage: &'a Path,
    mounts: Vec<Value>,
    staged: Vec<Staged>,
}

impl Bundle<'_> {
    /// An empty directory (or file) at `rel` in the read-only root, for a mount to cover. A
    /// mountpoint beneath another mount is that mount's business (runsc creates it there when
    /// the mount is writable, and a read-only bind already has it).
    fn mountpoint(&self, rel: &str, dir: bool) -> std::io::Result<()> {
        let path = self.rootfs.join(rel);
        if std::fs::symlink_metadata(&path).is_ok() {
            return Ok(());
        }
        if dir {
            std::fs::create_dir_all(&path)
        } else {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::File::create(&path).map(drop)
        }
    }

    /// Reproduces host path `host` at `rel` as a read-only bind of what it resolves to (a
    /// symlink of the host, such as merged-`/usr`'s `/bin`, becomes a bind of its target:
    /// gVisor's gofer cannot stat symlinks in a read-only root); nothing when the host has none.
    fn host_entry(&mut self, host: &Path, rel: &str) -> std::io::Result<()> {
        let Ok(resolved) = std::fs::canonicalize(host) else {
            return Ok(());
        };
        let dir = std::fs::metadata(&resolved)?.is_dir();
        if !self.inside_bind(rel) {
            self.mountpoint(rel, dir)?;
        }
        self.push(&resolved, rel, dir, false)
    }

    /// Whether `rel` lies beneath a directory already bound (where its mountpoint comes from
    /// the bound directory).
    fn inside_bind(&self, rel: &str) -> bool {
        let target = format!("/{rel}");
        self.mounts.iter().any(|m| {
            m["type"] == "bind"
                && m["destination"]
                    .as_str()
                    .is_some_and(|d| target.starts_with(&format!("{d}/")))
        })
    }

    fn bind(
        &mut self,
        source: &Path,
        rel: &str,
        dir: bool,
        writable: bool,
    ) -> Result<(), GvisorError> {
        let bundle_err = |path: PathBuf| move |source| GvisorError::Bundle { path, source };
        if !self.inside_bind(rel) {
            self.mountpoint(rel, dir)
                .map_err(bundle_err(self.rootfs.join(rel)))?;
        }
        self.push(source, rel, dir, writable)
            .map_err(bundle_err(source.to_path_buf()))
    }

    /// A bind of host `source` at `rel`, staged: the OCI source is a fresh mountpoint under
    /// `stage/`, which the wrapper binds `source` on.
    fn push(&mut self, source: &Path, rel: &str, dir: bool, writable: bool) -> std::io::Result<()> {
        let staged = self.stage.join(self.staged.len().to_string());
        if dir {
            std::fs::create_dir(&staged)?;
        } else {
            std::fs::File::create(&staged)?;
        }
        let mode = if writable { "rw" } else { "ro" };
        self.mounts.push(json!({
            "destination": format!("/{rel}"),
            "type": "bind",
            "source": staged,
            "options": ["rbind", mode, "nosuid", "nodev"],
        }));
        self.staged.push(Staged {
            source: source.to_path_buf(),
            staged,
            dir,
            writable,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_dates_are_read_from_debian_and_upstream_versions() {
        assert_eq!(
            parse_release("runsc version 0.0~20240729.0\nspec: 1.2.0\n"),
            Some(20240729)
        );
        assert_eq!(
            parse_release("runsc version release-20221219.0\n"),
            Some(20221219)
        );
        assert_eq!(parse_release("runsc version 0.0~2024072.0\n"), None);
        assert_eq!(parse_release("something else 20240729\n"), None);
    }

    #[test]
    fn platforms_parse_and_print() {
        for name in ["systrap", "ptrace", "kvm"] {
            assert_eq!(name.parse::<Platform>().unwrap().name(), name);
        }
        assert!("vm".parse::<Platform>().unwrap_err().contains("systrap"));
    }

    #[test]
    fn a_sweep_removes_only_old_unlocked_bundles() {
        let tmp = tempfile::tempdir().unwrap();
        let make = |name: &str, age: Duration| {
            let dir = tmp.path().join(name);
            std::fs::create_dir_all(dir.join("rootfs/etc")).unwrap();
            std::fs::write(dir.join("rootfs/etc/hosts"), "x").unwrap();
            std::fs::create_dir(dir.join("state")).unwrap();
            let then = std::time::SystemTime::now() - age;
            std::fs::File::open(&dir)
                .unwrap()
                .set_modified(then)
                .unwrap();
            dir
        };
        let old = Duration::from_secs(3600);
        let stale = make(&format!("{BUNDLE_PREFIX}stale"), old);
        let live = make(&format!("{BUNDLE_PREFIX}live"), old);
        let young = make(&format!("{BUNDLE_PREFIX}young"), Duration::ZERO);
        let other = make("someone-elses", old);
        // A symlink named like a bundle, to a directory that must survive.
        let target = make("target", old);
        std::os::unix::fs::symlink(&target, tmp.path().join(format!("{BUNDLE_PREFIX}link")))
            .unwrap();
        let _held = lock_bundle(&live).unwrap();
        // A second lock on a held bundle is refused at once.
        assert!(lock_bundle(&live).is_err());
        let runsc = Runsc {
            path: PathBuf::from("/nonexistent/runsc"),
            release: MIN_RELEASE,
            platform: Platform::Systrap,
        };
        assert_eq!(runsc.sweep_bundles(tmp.path()), 1);
        assert!(!stale.exists());
        for kept in [&live, &young, &other, &target] {
            assert!(kept.join("rootfs/etc/hosts").exists(), "{}", kept.display());
        }
    }
}
