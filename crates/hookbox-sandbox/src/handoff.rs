//! Handing a launch over to the launcher program: which program it is ([`Launcher`]), the spec
//! in a memfd ([`spec_memfd`]), and descriptors placed at their agreed numbers between fork and
//! exec ([`place_fds`]). Shared by cold launches ([`crate::runtime::launch_cold`]) and warm
//! sandboxes ([`crate::warm`]); what comes back is [`crate::status`]'s.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

/// The program that builds sandboxes: a binary path plus the arguments that select launcher mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl Launcher {
    /// `hookbox-sandbox-exec` (or any binary whose main is [`crate::launcher_main`]).
    pub fn standalone(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
        }
    }

    /// `$HOOKBOX_SANDBOX_EXEC` if set, else the current executable with `hidden_subcommand`.
    pub fn from_env_or_current_exe(hidden_subcommand: &str) -> std::io::Result<Self> {
        match std::env::var_os(crate::env_vars::HOOKBOX_SANDBOX_EXEC) {
            Some(path) => Ok(Self::standalone(PathBuf::from(path))),
            None => Ok(Self {
                program: std::env::current_exe()?,
                args: vec![hidden_subcommand.to_owned()],
            }),
        }
    }
}

/// `spec` as JSON in a close-on-exec memfd, rewound, for the launcher to read at its fd.
pub fn spec_memfd(spec: &impl serde::Serialize) -> std::io::Result<OwnedFd> {
    use std::io::{Seek, Write};
    let fd = rustix::fs::memfd_create("hookbox-launch-spec", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&serde_json::to_vec(spec).map_err(std::io::Error::other)?)?;
    file.rewind()?;
    Ok(OwnedFd::from(file))
}

/// The most fds [`place_fds`] places.
const MAX_PLACED: usize = 4;

/// Between fork and exec: puts each fd at its agreed number, without CLOEXEC. Goes through
/// temporary high fds first so that a source already sitting on another target is not clobbered.
/// Allocates nothing (a fixed array), as code between fork and exec must not.
pub fn place_fds(fds: &[(OwnedFd, i32)]) -> std::io::Result<()> {
    let mut temps: [(i32, i32); MAX_PLACED] = [(-1, -1); MAX_PLACED];
    for (temp, (source, target)) in temps.iter_mut().zip(fds) {
        // SAFETY: F_DUPFD_CLOEXEC on an fd we own duplicates it; no memory is touched.
        let dup = unsafe { libc::fcntl(source.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
        if dup < 0 {
            return Err(std::io::Error::last_os_error());
        }
        *temp = (dup, *target);
    }
    for (temp, target) in temps.iter().take(fds.len()) {
        // SAFETY: dup2 onto a small fixed number in the child about to exec; the target is not
        // one of our temporaries (those are >= 10).
        if unsafe { libc::dup2(*temp, *target) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
