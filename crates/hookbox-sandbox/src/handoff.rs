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

    /// `$HOOKBOX_SANDBOX_EXEC` if set; else [`STANDALONE_NAME`] beside the current executable
    /// when it is there (the package installs both, and `cargo build -p hookbox` builds both);
    /// else the current executable with `hidden_subcommand`.
    ///
    /// The standalone launcher is preferred because every cold launch and every warm sandbox
    /// execs it: a binary of a few MB holding only the launcher maps and relocates in a
    /// fraction of the time the whole `hookbox` binary takes. It is looked for only in the
    /// directory of the running binary, which whoever could replace it could replace hookbox in.
    pub fn from_env_or_current_exe(hidden_subcommand: &str) -> std::io::Result<Self> {
        if let Some(path) = std::env::var_os(crate::env_vars::HOOKBOX_SANDBOX_EXEC) {
            return Ok(Self::standalone(PathBuf::from(path)));
        }
        let current = std::env::current_exe()?;
        if let Some(sibling) = standalone_beside(&current) {
            return Ok(Self::standalone(sibling));
        }
        Ok(Self {
            program: current,
            args: vec![hidden_subcommand.to_owned()],
        })
    }
}

/// The file name of the standalone launcher binary, installed beside `hookbox`.
pub const STANDALONE_NAME: &str = "hookbox-sandbox-exec";

/// [`STANDALONE_NAME`] in `exe`'s directory, when it is a regular executable file there.
fn standalone_beside(exe: &std::path::Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let candidate = exe.parent()?.join(STANDALONE_NAME);
    let meta = std::fs::metadata(&candidate).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn standalone_launcher_is_taken_only_when_an_executable_file_sits_beside_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("hookbox");
        std::fs::write(&exe, b"").unwrap();
        let sibling = dir.path().join(STANDALONE_NAME);
        // Nothing beside it: hookbox runs itself.
        assert_eq!(standalone_beside(&exe), None);
        // A directory of that name is not a launcher.
        std::fs::create_dir(&sibling).unwrap();
        assert_eq!(standalone_beside(&exe), None);
        std::fs::remove_dir(&sibling).unwrap();
        // A file that cannot be executed is not either.
        std::fs::write(&sibling, b"").unwrap();
        std::fs::set_permissions(&sibling, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(standalone_beside(&exe), None);
        std::fs::set_permissions(&sibling, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(standalone_beside(&exe), Some(sibling));
    }
}
