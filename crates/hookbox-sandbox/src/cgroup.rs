//! Per-environment cgroups: the pids and memory caps shared by every process of an environment.
//!
//! Each environment gets `hookbox/<env_id>` under hookbox's own cgroup, in cgroup v2 when the
//! unified hierarchy offers the controller, else in the v1 `pids` / `memory` hierarchies. The
//! launcher joins these directories before it creates namespaces. A controller that cannot be
//! used is reported as absent and the caller falls back to rlimits (or refuses, see
//! [`crate::features`]). This module must not spawn processes.

use std::path::{Path, PathBuf};

/// Which caps the environment's cgroups enforce.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvCgroups {
    /// Directories to join, one per hierarchy.
    pub dirs: Vec<PathBuf>,
    /// `pids.max` is enforced.
    pub pids: bool,
    /// The memory limit is enforced.
    pub memory: bool,
}

/// One line of `/proc/self/cgroup`.
struct Membership {
    controllers: Vec<String>,
    path: String,
}

fn memberships() -> Vec<Membership> {
    let Ok(text) = std::fs::read_to_string("/proc/self/cgroup") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            Some(Membership {
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect(),
                path: path.to_owned(),
            })
        })
        .collect()
}

fn v2_mount() -> Option<PathBuf> {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.join("cgroup.controllers").exists())
}

fn join(mount: &Path, own: &str, env_id: &str) -> PathBuf {
    mount
        .join(own.trim_start_matches('/'))
        .join("hookbox")
        .join(env_id)
}

/// Creates (or reuses) the environment's cgroups and writes their limits. Best effort: what
/// fails is simply not in the result.
pub fn setup(env_id: &str, max_processes: u64, memory_bytes: u64) -> EnvCgroups {
    let mut out = EnvCgroups::default();
    let members = memberships();
    if let (Some(mount), Some(own)) = (
        v2_mount(),
        members.iter().find(|m| m.controllers.is_empty()),
    ) {
        let parent = mount.join(own.path.trim_start_matches('/')).join("hookbox");
        let available = std::fs::read_to_string(
            parent
                .parent()
                .unwrap_or(&mount)
                .join("cgroup.subtree_control"),
        )
        .unwrap_or_default();
        let want: Vec<&str> = ["pids", "memory"]
            .into_iter()
            .filter(|c| available.split_whitespace().any(|a| a == *c))
            .collect();
        if !want.is_empty() && std::fs::create_dir_all(&parent).is_ok() {
            let enable: Vec<String> = want.iter().map(|c| format!("+{c}")).collect();
            let _ = std::fs::write(parent.join("cgroup.subtree_control"), enable.join(" "));
            let dir = join(&mount, &own.path, env_id);
            if std::fs::create_dir_all(&dir).is_ok() {
                out.pids = want.contains(&"pids")
                    && std::fs::write(dir.join("pids.max"), max_processes.to_string()).is_ok();
                out.memory = want.contains(&"memory")
                    && std::fs::write(dir.join("memory.max"), memory_bytes.to_string()).is_ok();
                if out.pids || out.memory {
                    out.dirs.push(dir);
                }
            }
        }
    }
    for (controller, file, value) in [
        ("pids", "pids.max", max_processes),
        ("memory", "memory.limit_in_bytes", memory_bytes),
    ] {
        let done = match controller {
            "pids" => out.pids,
            _ => out.memory,
        };
        if done {
            continue;
        }
        let Some(own) = members
            .iter()
            .find(|m| m.controllers.iter().any(|c| c == controller))
        else {
            continue;
        };
        let mount = Path::new("/sys/fs/cgroup").join(controller);
        let dir = join(&mount, &own.path, env_id);
        if std::fs::create_dir_all(&dir).is_ok()
            && std::fs::write(dir.join(file), value.to_string()).is_ok()
        {
            match controller {
                "pids" => out.pids = true,
                _ => out.memory = true,
            }
            out.dirs.push(dir);
        }
    }
    tracing::debug!(env_id, pids = out.pids, memory = out.memory, dirs = ?out.dirs, "environment cgroups");
    out
}

/// Removes whatever cgroup directories exist for `env_id`, without creating any.
pub fn remove_for(env_id: &str) {
    let members = memberships();
    let mut dirs = Vec::new();
    if let (Some(mount), Some(own)) = (
        v2_mount(),
        members.iter().find(|m| m.controllers.is_empty()),
    ) {
        dirs.push(join(&mount, &own.path, env_id));
    }
    for controller in ["pids", "memory"] {
        if let Some(own) = members
            .iter()
            .find(|m| m.controllers.iter().any(|c| c == controller))
        {
            dirs.push(join(
                &Path::new("/sys/fs/cgroup").join(controller),
                &own.path,
                env_id,
            ));
        }
    }
    dirs.retain(|d| d.exists());
    remove(&EnvCgroups {
        dirs,
        pids: false,
        memory: false,
    });
}

/// Removes the environment's cgroup directories (they must be empty of processes).
pub fn remove(cgroups: &EnvCgroups) {
    for dir in &cgroups.dirs {
        if let Err(err) = std::fs::remove_dir(dir) {
            tracing::warn!(dir = %dir.display(), %err, "could not remove an environment cgroup");
        }
    }
}

/// Reads a numeric control file of the environment's pids cgroup (`pids.peak`, `pids.current`).
pub fn read_pids_counter(cgroups: &EnvCgroups, file: &str) -> Option<u64> {
    cgroups
        .dirs
        .iter()
        .find_map(|d| std::fs::read_to_string(d.join(file)).ok())
        .and_then(|s| s.trim().parse().ok())
}

/// Opens the file through which a single-threaded process moves itself into cgroup `dir`: in
/// cgroup v1 the `tasks` file, else `cgroup.procs`.
///
/// Why not `cgroup.procs` everywhere: moving a whole thread group takes the kernel's global
/// `cgroup_threadgroup_rwsem` for writing, which waits for an RCU grace period (10 to 27 ms on
/// this project's loaded 2-core machine, most of a one-shot `hookbox tool`), while the calling
/// thread moving itself through `tasks` (writing `0`) skips that lock (Linux 5.17+) and takes
/// about 0.3 ms. For a process with one thread both move the same, and only task: every
/// process it forks afterwards starts in the cgroup. The callers are single-threaded by
/// construction (the launcher, which `unshare(CLONE_NEWUSER)` later refuses to be anything
/// else, and a child between fork and exec). cgroup v2 has no `tasks` file; there a thread
/// group moves through `cgroup.procs` as before.
pub fn open_self_join(dir: &Path) -> std::io::Result<std::fs::File> {
    let open = |name: &str| std::fs::OpenOptions::new().write(true).open(dir.join(name));
    match open("tasks") {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => open("cgroup.procs"),
        other => other,
    }
}

/// Moves the calling single-threaded process into cgroup `dir` (see [`open_self_join`]).
pub fn join_self(dir: &Path) -> std::io::Result<()> {
    use std::io::Write as _;
    open_self_join(dir)?.write_all(b"0")
}

/// The files through which a process joins an environment's cgroups ([`open_self_join`]),
/// opened ahead of a fork so that the child can join them between fork and exec (where
/// nothing may allocate).
#[derive(Debug)]
pub struct ProcsFiles(Vec<std::os::fd::OwnedFd>);

impl ProcsFiles {
    pub fn open(dirs: &[PathBuf]) -> std::io::Result<Self> {
        dirs.iter()
            .map(|dir| open_self_join(dir).map(std::os::fd::OwnedFd::from))
            .collect::<std::io::Result<Vec<_>>>()
            .map(Self)
    }

    /// Moves the calling process into every cgroup (async-signal-safe: one `write` each).
    pub fn join(&self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        for fd in &self.0 {
            // SAFETY: writes one byte from a static buffer to a descriptor we own.
            if unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}
