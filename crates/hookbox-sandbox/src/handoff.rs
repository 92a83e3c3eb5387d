//! Handing a launch over to the launcher program: which program it is ([`Launcher`]), the spec
//! in a sealed memfd ([`spec_memfd`]), and descriptors placed at their agreed numbers between
//! fork and exec ([`place_fds`]). Shared by cold launches ([`crate::runtime::launch_cold`]),
//! warm sandboxes ([`crate::warm`]) and launchers started before their spec
//! ([`crate::early`]); what comes back is [`crate::status`]'s.

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

    /// `$HOOKBOX_SANDBOX_EXEC` if set (an absolute path); else [`STANDALONE_NAME`] beside the current executable
    /// when it is there (the package installs both, and `cargo build -p hookbox` builds both);
    /// else the current executable with `hidden_subcommand`.
    ///
    /// The standalone launcher is preferred because every cold launch and every warm sandbox
    /// execs it: a binary of a few MB holding only the launcher maps and relocates in a
    /// fraction of the time the whole `hookbox` binary takes. It is looked for only in the
    /// directory of the running binary, which whoever could replace it could replace hookbox in.
    pub fn from_env_or_current_exe(hidden_subcommand: &str) -> std::io::Result<Self> {
        if let Some(path) = std::env::var_os(crate::env_vars::HOOKBOX_SANDBOX_EXEC) {
            return Self::named(PathBuf::from(path));
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

    /// The standalone launcher at `path`, named by [`crate::env_vars::HOOKBOX_SANDBOX_EXEC`]:
    /// an absolute path, since `posix_spawn` (not `posix_spawnp`) would resolve a bare name
    /// against the working directory, and every launch must run the same program.
    fn named(path: PathBuf) -> std::io::Result<Self> {
        if !path.is_absolute() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} must be an absolute path, not {}",
                    crate::env_vars::HOOKBOX_SANDBOX_EXEC,
                    path.display()
                ),
            ));
        }
        Ok(Self::standalone(path))
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

/// `spec` as JSON in a close-on-exec memfd, rewound and sealed (nothing can write, grow or
/// shrink it any more, even through a reopened `/proc/<pid>/fd/N`), for the launcher to read.
pub fn spec_memfd(spec: &impl serde::Serialize) -> std::io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    use std::io::{Seek, Write};
    let fd = rustix::fs::memfd_create(
        "hookbox-launch-spec",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&serde_json::to_vec(spec).map_err(std::io::Error::other)?)?;
    file.rewind()?;
    rustix::fs::fcntl_add_seals(
        &file,
        SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL,
    )?;
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

/// A launcher process started by [`spawn_launcher`] (or another child adopted with
/// [`LauncherChild::from_pid`]): its pid, reaped only by [`Self::try_wait`] or [`Self::wait`].
/// Dropping it neither waits nor kills.
#[derive(Debug)]
pub struct LauncherChild {
    pid: libc::pid_t,
    status: Option<std::process::ExitStatus>,
}

impl LauncherChild {
    /// A child of this process, by pid (`std::process::Child::id`).
    pub fn from_pid(pid: u32) -> Self {
        Self {
            pid: pid as libc::pid_t,
            status: None,
        }
    }

    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Its exit status if it has exited (reaping it), else `None`.
    pub fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.reap(libc::WNOHANG)
    }

    /// Waits for it to exit and reaps it.
    pub fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        loop {
            if let Some(status) = self.reap(0)? {
                return Ok(status);
            }
        }
    }

    fn reap(&mut self, flags: libc::c_int) -> std::io::Result<Option<std::process::ExitStatus>> {
        use std::os::unix::process::ExitStatusExt;
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        loop {
            let mut raw: libc::c_int = 0;
            // SAFETY: waitpid on our own child writes only to `raw`, a valid c_int.
            let reaped = unsafe { libc::waitpid(self.pid, &mut raw, flags) };
            if reaped < 0 {
                let err = std::io::Error::last_os_error();
                if err.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            if reaped == 0 {
                return Ok(None);
            }
            let status = std::process::ExitStatus::from_raw(raw);
            self.status = Some(status);
            return Ok(Some(status));
        }
    }
}

/// Starts `launcher` with an empty environment, stdin, stdout and stderr on `/dev/null`, in a
/// process group of its own, and each of `fds` at its agreed number (without close-on-exec):
/// with `posix_spawn`, which glibc does with a `vfork`-like clone that shares this process's
/// memory until the exec, instead of the copy of every page table that `fork` makes (what
/// `std::process::Command` falls back to once it has a `pre_exec` hook, as placing fds needs).
/// Each source is first duplicated (close-on-exec) above every agreed number, so that placing
/// one never overwrites another.
pub fn spawn_launcher(
    launcher: &Launcher,
    fds: &[(OwnedFd, i32)],
) -> std::io::Result<LauncherChild> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
    use nix::sys::signal::{SigSet, Signal};
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let cstring = |bytes: &[u8]| {
        CString::new(bytes).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a NUL in the launcher's command",
            )
        })
    };
    let program = cstring(launcher.program.as_os_str().as_bytes())?;
    let mut argv = vec![program.clone()];
    for arg in &launcher.args {
        argv.push(cstring(arg.as_bytes())?);
    }
    let envp: [CString; 0] = [];
    let null = rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let mut high = Vec::with_capacity(fds.len());
    for (source, target) in fds {
        if !(0..FIRST_HIGH).contains(target) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("fd number {target} is not below {FIRST_HIGH}"),
            ));
        }
        high.push((
            rustix::io::fcntl_dupfd_cloexec(source, FIRST_HIGH)?,
            *target,
        ));
    }
    let mut actions = PosixSpawnFileActions::init()?;
    for stdio in 0..3 {
        actions.add_dup2(null.as_raw_fd(), stdio)?;
    }
    for (source, target) in &high {
        // dup2 clears close-on-exec on the copy it makes.
        actions.add_dup2(source.as_raw_fd(), *target)?;
    }
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_pgroup(nix::unistd::Pid::from_raw(0))?;
    attr.set_sigmask(&SigSet::empty())?;
    let mut defaults = SigSet::empty();
    defaults.add(Signal::SIGPIPE);
    attr.set_sigdefault(&defaults)?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETPGROUP
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    let pid = nix::spawn::posix_spawn(program.as_c_str(), &actions, &attr, &argv, &envp)?;
    Ok(LauncherChild {
        pid: pid.as_raw(),
        status: None,
    })
}

/// The lowest fd number a source is moved to before it is placed (above every agreed number).
const FIRST_HIGH: i32 = 10;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_launcher_named_by_the_environment_must_be_an_absolute_path() {
        let err = Launcher::named(PathBuf::from("hookbox-sandbox-exec")).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("absolute"), "{err}");
        assert!(Launcher::named(PathBuf::from("./bin/hookbox-sandbox-exec")).is_err());
        let launcher = Launcher::named(PathBuf::from("/usr/libexec/hookbox-sandbox-exec")).unwrap();
        assert_eq!(
            launcher.program,
            PathBuf::from("/usr/libexec/hookbox-sandbox-exec")
        );
        assert!(launcher.args.is_empty());
    }

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
