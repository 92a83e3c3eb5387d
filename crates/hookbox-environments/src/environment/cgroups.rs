//! An environment's cgroups exist only while it is open: made (with its limits) when it is
//! opened and removed by the last close, so a server holding thousands of idle environments
//! holds cgroups for the open ones only, and an environment reopened later gets its limits
//! written afresh ([`hookbox_sandbox::cgroup::setup`]).
//!
//! Across opens (in this process or another, such as the server and a one-shot `hookbox tool`)
//! the cgroups are shared through a `flock` on `<env dir>/cgroup.users`, as [`crate::disk::Hold`]
//! shares a disk: each open holds it shared from before it makes the cgroups until its close;
//! a closing open that then gets it exclusively (without waiting) is the last, and removes them
//! while holding it, so no open makes or joins them while they are removed. A cgroup whose
//! processes are still exiting is tried again for about two seconds, off the closing thread
//! (not in a one-shot process: that thread would die with it at once). A cgroup that still has
//! processes (a sandbox some clone of the runner keeps alive) cannot be removed, a process that
//! dies with the environment open never closes it, and a one-shot command (`hookbox tool`)
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
    crate::disk::open_flocked(&path, op).map_err(super::io(&path))
}

/// One open's share of an environment's cgroups; the last to drop removes them.
#[derive(Debug)]
pub(super) struct CgroupHold {
    users: Option<std::fs::File>,
    dir: PathBuf,
    cgroups: EnvCgroups,
    /// Try a busy removal again off the closing thread: not in a one-shot process, which
    /// exits right after its close (the retry thread would die with it) and whose detached
    /// sandbox still holds the cgroups then.
    retry_busy: bool,
}

impl CgroupHold {
    /// Makes (or reuses) the cgroups of environment `id` in `dir` with a cap of `tasks`
    /// processes and `memory_bytes` of memory, and holds them. `one_shot`: this process exits
    /// right after it closes the environment (see [`Self::retry_busy`]).
    pub(super) fn new(
        dir: &Path,
        id: &str,
        tasks: u64,
        memory_bytes: u64,
        one_shot: bool,
    ) -> std::result::Result<Self, super::EnvError> {
        // Waits only while a last close removes them (a few rmdirs).
        let users = locked(dir, rustix::fs::FlockOperation::LockShared)?;
        let cgroups = cgroup::setup(id, tasks, memory_bytes);
        Ok(CgroupHold {
            users: Some(users),
            dir: dir.to_path_buf(),
            cgroups,
            retry_busy: !one_shot,
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
        // Busy: a process of the sandbox is still exiting (a gVisor sandbox's, reaped by whoever
        // inherited it, or a launcher a one-shot close did not wait for). That passes within
        // moments, so a few more tries follow, off this thread (not in a one-shot process).
        if remove_unused(&self.dir, &self.cgroups.dirs) == Removal::Busy && self.retry_busy {
            let (dir, dirs) = (self.dir.clone(), self.cgroups.dirs.clone());
            let spawned = std::thread::Builder::new()
                .name("cgroup-remove".into())
                .spawn(move || retry_remove(&dir, &dirs));
            if let Err(err) = spawned {
                tracing::warn!(%err, "cannot start the removal retry of a closed environment's cgroups");
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Removal {
    /// Removed (or already gone).
    Done,
    /// Another open holds them (it removes them when it closes), or the environment's
    /// directory is gone (removed with it, cgroups included).
    Held,
    /// Nobody holds them but one still has processes.
    Busy,
}

/// Removes `dirs`, the cgroups of the environment in `dir`, if no open holds them; while it
/// holds the lock exclusively, no open makes or joins them.
fn remove_unused(dir: &Path, dirs: &[PathBuf]) -> Removal {
    let Ok(_alone) = locked(dir, rustix::fs::FlockOperation::NonBlockingLockExclusive) else {
        return Removal::Held;
    };
    let mut outcome = Removal::Done;
    for cgroup in dirs {
        match std::fs::remove_dir(cgroup) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                tracing::debug!(dir = %cgroup.display(), %err, "environment cgroup still busy at close");
                outcome = Removal::Busy;
            }
        }
    }
    outcome
}

/// Tries to remove a closed environment's cgroups a few more times (about two seconds in all),
/// stopping once they are gone or an open holds them; what is still busy after that is left
/// to the next open's last close, the idle sweep and the environment's removal.
fn retry_remove(dir: &Path, dirs: &[PathBuf]) {
    let mut pause = std::time::Duration::from_millis(2);
    for _ in 0..24 {
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(100));
        if remove_unused(dir, dirs) != Removal::Busy {
            return;
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
