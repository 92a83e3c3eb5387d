//! A process known by a pidfd: its end seen without polling and without pid reuse races, and
//! SIGKILL sent to that very process. A warm sandbox's call is supervised this way (the pidfd
//! comes from `CLONE_PIDFD` in the sandbox's init, over a socket), and a warm sandbox's launcher
//! is waited for this way when it is stopped.
//!
//! This module must not decide when to kill; its callers do.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A pidfd. Cheap to clone (clones share the descriptor).
#[derive(Debug, Clone)]
pub struct Pidfd(Arc<OwnedFd>);

impl Pidfd {
    /// Opens a pidfd for `pid`, which must be a child of ours (or otherwise not yet reaped) for
    /// the pidfd to name it and not a process that reused its number.
    pub fn open(pid: u32) -> std::io::Result<Self> {
        let pid = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ESRCH))?;
        let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())?;
        Ok(Self(Arc::new(fd)))
    }

    /// A pidfd received from elsewhere (the kernel's `CLONE_PIDFD`, passed over a socket).
    pub fn from_owned(fd: OwnedFd) -> Self {
        Self(Arc::new(fd))
    }

    /// Resolves once the process has exited (its pidfd became readable). Needs a tokio runtime
    /// with I/O enabled; one waiter at a time.
    pub async fn exited(&self) -> std::io::Result<()> {
        // SAFETY: the Arc owns the descriptor, so it stays open and names the same process for
        // as long as the AsyncFd holds its clone.
        let exited = unsafe { AsyncFd::register_with_interest(self.0.clone(), Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        let _ = exited.readable().await?;
        Ok(())
    }

    /// Blocks until the process has exited or `within` passed; true when it exited.
    pub fn wait_exited(&self, within: Duration) -> bool {
        let mut fds = [nix::poll::PollFd::new(
            self.0.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let millis = u16::try_from(within.as_millis()).unwrap_or(u16::MAX);
        matches!(nix::poll::poll(&mut fds, millis), Ok(n) if n > 0)
    }

    /// Sends SIGKILL to the process: idempotent and best effort (harmless once it has exited).
    pub fn kill(&self) {
        let _ = rustix::process::pidfd_send_signal(&*self.0, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_killed_child_is_seen_to_exit() {
        let mut child = std::process::Command::new("sleep")
            .arg("3600")
            .spawn()
            .unwrap();
        let pidfd = Pidfd::open(child.id()).unwrap();
        assert!(!pidfd.wait_exited(Duration::ZERO), "still running");
        pidfd.kill();
        pidfd.exited().await.unwrap();
        assert!(pidfd.wait_exited(Duration::ZERO));
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        // Killing it again (a zombie reaped) is harmless.
        pidfd.kill();
    }
}
