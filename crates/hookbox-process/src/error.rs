//! What stops a program from running at all, typed: the caller learns the errno and whether
//! another try may succeed, never by reading a message.

use std::io;

/// Why a process could not be started or waited for.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Spawning failed (fork/exec, or a descriptor the spawn needed): nothing ran.
    #[error("could not start the process: {0}")]
    Spawn(#[source] io::Error),
    /// Waiting for the process failed; it was killed.
    #[error("could not wait for the process: {0}")]
    Wait(#[source] io::Error),
}

impl ProcessError {
    /// The errno behind the failure, when the kernel gave one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            ProcessError::Spawn(err) | ProcessError::Wait(err) => err.raw_os_error(),
        }
    }

    /// Whether starting the program again may succeed: a spawn the kernel refused for a
    /// momentary lack of resources ([`is_momentary`]). A failed wait is never retried: the
    /// program may have run.
    pub fn is_transient(&self) -> bool {
        match self {
            ProcessError::Spawn(err) => err.raw_os_error().is_some_and(is_momentary),
            ProcessError::Wait(_) => false,
        }
    }
}

/// Whether `errno` says "not now" rather than "never": `EAGAIN` (a task or pids cgroup limit,
/// a busy kernel), `ENOMEM` (memory pressure) or `ENOSPC` (a namespace or mount count limit,
/// where the kernel uses it for that).
pub fn is_momentary(errno: i32) -> bool {
    matches!(errno, libc::EAGAIN | libc::ENOMEM | libc::ENOSPC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_spawn_refused_for_momentary_lack_of_resources_is_transient() {
        for errno in [libc::EAGAIN, libc::ENOMEM, libc::ENOSPC] {
            let spawn = ProcessError::Spawn(io::Error::from_raw_os_error(errno));
            assert!(spawn.is_transient(), "{spawn}");
            assert_eq!(spawn.errno(), Some(errno));
            assert!(!ProcessError::Wait(io::Error::from_raw_os_error(errno)).is_transient());
        }
        for errno in [libc::ENOENT, libc::EACCES, libc::EPERM, libc::EBADF] {
            assert!(!ProcessError::Spawn(io::Error::from_raw_os_error(errno)).is_transient());
        }
        assert!(!ProcessError::Spawn(io::Error::other("no errno")).is_transient());
    }
}
