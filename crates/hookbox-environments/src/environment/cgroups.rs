//! An environment's cgroups exist only while it is open: made (with its limits) when it is
//! opened and removed by the last close, so a server holding thousands of idle environments
//! holds cgroups for the open ones only, and an environment reopened later gets its limits
//! written afresh ([`hookbox_sandbox::cgroup::setup`]).
//!
//! Across opens (in this process or another, such as the server and a one-shot `hookbox tool`)
//! the cgroups are shared through a `flock` on `<env dir>/cgroup.users`, as [`crate::disk::Hold`]
//! shares a disk: each open holds it shared from before it makes the cgroups until its close;
//! a closing open that then gets it exclusively (without waiting) is the last, and removes them
//! while holding it, so no open makes or joins them while they are removed. A cgroup that still
//! has processes (a sandbox some clone of the runner keeps alive) cannot be removed, and a process
//! that dies with the environment open never closes it, and a one-shot command (`hookbox tool`)
//! returns before its launcher has left them: such cgroups are left for the next open to reuse
//! (its last close removes them), for the idle sweep that unmounts a disk nobody holds
//! ([`remove_if_unused`]) and for the environment's removal.
//!
//! This module must not decide the limits (the caller passes them) or start processes.

use std::path::{Path, PathBuf};

use hookbox_sandbox::cgroup::{self, EnvCgroups};

/// The file every open of an environment holds a shared lock on while it has cgroups.
const USERS_FILE: &str = "cgroup.users";

fn locked(
    dir: &Path,
    op: rustix::fs::FlockOperation,
) -> std::result::Result<std::fs::File, super::EnvError> {
    let path = dir.join(USERS_FILE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(super::io(&path))?;
    rustix::fs::flock(&file, op).map_err(|e| super::io(&path)(e.into()))?;
    Ok(file)
}

/// One open's share of an environment's cgroups; the last to drop removes them.
#[derive(Debug)]
pub(super) struct CgroupHold {
    users: Option<std::fs::File>,
    dir: PathBuf,
    cgroups: EnvCgroups,
}

impl CgroupHold {
    /// Makes (or reuses) the cgroups of environment `id` in `dir` with a cap of `tasks`
    /// processes and `memory_bytes` of memory, and holds them.
    pub(super) fn new(
        dir: &Path,
        id: &str,
        tasks: u64,
        memory_bytes: u64,
    ) -> std::result::Result<Self, super::EnvError> {
        // Waits only while a last close removes them (a few rmdirs).
        let users = locked(dir, rustix::fs::FlockOperation::LockShared)?;
        let cgroups = cgroup::setup(id, tasks, memory_bytes);
        Ok(CgroupHold {
            users: Some(users),
            dir: dir.to_path_buf(),
            cgroups,
        })
    }

    /// What the environment's sandboxes join.
    pub(super) fn cgroups(&self) -> &EnvCgroups {
        &self.cgroups
    }
}

impl Drop for CgroupHold {
    fn drop(&mut self) {
        drop(self.users.take());
        let Ok(_alone) = locked(
            &self.dir,
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        ) else {
            // Another open holds them (it removes them when it closes), or the environment's
            // directory is gone (removed with it, cgroups included).
            return;
        };
        for dir in &self.cgroups.dirs {
            match std::fs::remove_dir(dir) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                // Still has processes: left for the next open and the environment's removal.
                Err(err) => {
                    tracing::debug!(dir = %dir.display(), %err, "environment cgroup kept at close")
                }
            }
        }
    }
}

/// Removes environment `id`'s leftover cgroups (in its directory `dir`) if no open holds them:
/// what a one-shot command or a process that died left behind. A cgroup that still has
/// processes stays. The idle sweep calls this for the environments whose disk it unmounts.
pub(super) fn remove_if_unused(dir: &Path, id: &str) {
    if !dir.join(USERS_FILE).exists() {
        return;
    }
    let Ok(_alone) = locked(dir, rustix::fs::FlockOperation::NonBlockingLockExclusive) else {
        return;
    };
    cgroup::remove_for(id);
}
