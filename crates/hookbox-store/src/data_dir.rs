//! The data directory's file modes: it holds every interaction's content (prompts, tool and hook
//! outputs in the database), the credential key and the environments' files, so nothing in it
//! may be readable by another local user.
//!
//! [`prepare`] creates a missing data directory (and its missing parents, as the XDG base
//! directory rules ask) with mode 0700. An existing one readable or enterable by group or others
//! is made 0700, with a warning naming it and its old mode (none if it was empty), only when
//! everything in it is hookbox's ([`OWN_ENTRIES`]) and it is hookbox's user's and not shared
//! (sticky or world-writable, as `/tmp` is): any other directory (`--data-dir /`, `$HOME`,
//! `/tmp`, one hookbox may not list) is never changed, only warned about. hookbox's own entries
//! in it are made owner-only (files 0600, directories 0700), each with a warning; in a directory
//! not hookbox's own, only its distinctively named files (the database files, `secret.key`), not
//! `environments/`, `uploads/` or `credentials/`. An entry is changed only through a descriptor
//! opened without following a symbolic link, and only if it is of the expected type, owned by
//! hookbox's user and, for a file, has no other hard link (one could name a file elsewhere).
//! Best effort: what hookbox may not change is warned about, not fatal. The process umask is
//! never changed: sandboxed programs inherit it.
//!
//! Nothing else needs to enter the data directory: the sandbox launchers run as root and bind
//! what a sandbox sees before it drops to the environment's uid, and runsc's gofer is handed
//! bind-mounted sources (see docs/runtimes.md), which is why the .deb's unit has used a 0700
//! `StateDirectory` all along.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

use crate::error::{Error, Result};

/// What hookbox creates directly in a data directory. Files are kept 0600, directories 0700.
pub const OWN_ENTRIES: &[(&str, Kind)] = &[
    (crate::sqlite::DB_FILE, Kind::File),
    ("hookbox.db-wal", Kind::File),
    ("hookbox.db-shm", Kind::File),
    ("hookbox.db-journal", Kind::File),
    (crate::crypto::KEY_FILE, Kind::File),
    ("environments", Kind::Dir),
    ("uploads", Kind::Dir),
    ("credentials", Kind::Dir),
];

/// What an entry of [`OWN_ENTRIES`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A file: its name is hookbox's alone, so it is made owner-only in any directory.
    File,
    /// A directory: a generic name, made owner-only only in a data directory of hookbox's own.
    Dir,
}

impl Kind {
    fn private_mode(self) -> u32 {
        match self {
            Kind::File => 0o600,
            Kind::Dir => 0o700,
        }
    }

    fn file_type(self) -> FileType {
        match self {
            Kind::File => FileType::RegularFile,
            Kind::Dir => FileType::Directory,
        }
    }
}

/// Whether this process has not yet warned about `path` at this place (`site`: the line of the
/// warning). One command prepares the data dir more than once (the environments, the store,
/// `serve`'s key probe): a warning about what is left as it is says nothing new the second
/// time. What is changed (a mode made owner-only) is told each time it happens.
fn first_time(path: &Path, site: u32) -> bool {
    static WARNED: std::sync::Mutex<Vec<(std::path::PathBuf, u32)>> =
        std::sync::Mutex::new(Vec::new());
    let mut warned = WARNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if warned.iter().any(|(p, l)| p == path && *l == site) {
        return false;
    }
    warned.push((path.to_path_buf(), site));
    true
}

/// `tracing::warn!` once per path and place in this process ([`first_time`]).
macro_rules! warn_once {
    ($path:expr, $($arg:tt)+) => {
        if first_time($path, line!()) {
            tracing::warn!($($arg)+)
        }
    };
}

/// Creates `dir` owner-only (0700, missing parents too), or makes an existing one and
/// hookbox's entries in it so (see the module doc). Each warning about what is left as it is
/// is printed once per path and process.
pub fn prepare(dir: &Path) -> Result<()> {
    let io = |source| Error::Io {
        path: dir.display().to_string(),
        source,
    };
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Recursive: a second process creating it at the same time is no error.
            return std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io);
        }
        Err(e) => return Err(io(e)),
        Ok(meta) if !meta.is_dir() => return Ok(()), // opening the store names the problem
        Ok(_) => {}
    }
    // The operator's path may be a symbolic link: followed for the directory itself only.
    let dir_fd = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io(e.into()))?;
    let stat = rustix::fs::fstat(&dir_fd).map_err(|e| io(e.into()))?;
    let mode = stat.st_mode & 0o7777;
    let euid = rustix::process::geteuid().as_raw();
    let shared = mode & 0o1002 != 0 || stat.st_uid != euid;
    let entries = own_entries(dir_fd.as_fd());
    if let Err(e) = &entries {
        warn_once!(dir,
            path = %dir.display(),
            mode = format!("{mode:o}"),
            error = %e,
            "the data directory {} could not be listed ({e}), so it is left as it is; only hookbox's own files in it are made owner-only",
            dir.display()
        );
    }
    if mode & 0o077 != 0 {
        match entries {
            Err(_) => {} // warned about above
            _ if shared => warn_once!(dir,
                path = %dir.display(),
                mode = format!("{mode:o}"),
                "the data directory {} (mode {mode:o}) is open to other local users and is shared (sticky or world-writable) or another user's, so it is left as it is; only hookbox's own files in it are made owner-only (give hookbox a directory of its own)",
                dir.display()
            ),
            Ok(Some(0)) => {
                // Nothing of hookbox's was exposed yet (a directory made for it, as a
                // temporary directory is): made private without a warning.
                if let Err(e) = chmod_fd(dir_fd.as_fd(), 0o700) {
                    warn_once!(dir,
                        path = %dir.display(),
                        mode = format!("{mode:o}"),
                        error = %e,
                        "the data directory {} (mode {mode:o}) is open to other local users and could not be made owner-only: {e}",
                        dir.display()
                    );
                }
            }
            Ok(Some(_)) => tighten(dir_fd.as_fd(), dir, mode, 0o700),
            Ok(None) => warn_once!(dir,
                path = %dir.display(),
                mode = format!("{mode:o}"),
                "the data directory {} (mode {mode:o}) is open to other local users and holds files hookbox did not create, so it is left as it is; only hookbox's own files in it are made owner-only (give hookbox a directory of its own)",
                dir.display()
            ),
        }
    }
    let own_dir = !shared && matches!(entries, Ok(Some(_)));
    for (name, kind) in OWN_ENTRIES {
        let change = *kind == Kind::File || own_dir;
        tighten_entry(dir_fd.as_fd(), dir, name, *kind, euid, change);
    }
    Ok(())
}

/// How many entries the directory `dir_fd` has if every one is one hookbox creates there, else
/// `None`.
fn own_entries(dir_fd: BorrowedFd<'_>) -> std::io::Result<Option<usize>> {
    let fd = rustix::fs::openat(
        dir_fd,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut count = 0;
    for entry in rustix::fs::Dir::new(fd)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        // A dedicated volume mounted as the data directory has its `lost+found`.
        if name == b"." || name == b".." || name == b"lost+found" {
            continue;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            return Ok(None);
        };
        let own = OWN_ENTRIES.iter().any(|(own, _)| *own == name)
            // A key being written (crypto::SecretKey::load_or_create).
            || (name.starts_with(crate::crypto::KEY_FILE) && name.ends_with(".tmp"));
        if !own {
            return Ok(None);
        }
        count += 1;
    }
    Ok(Some(count))
}

/// Makes `name` in `dir_fd` owner-only if it is open to others and is what hookbox made: of
/// `kind`'s type (not a symbolic link: never followed), owned by `euid`, and for a file with no
/// other hard link (one would make the mode of a file elsewhere change). Else, or when
/// `change` is false (a generic name in a directory that is not hookbox's own), warns.
fn tighten_entry(
    dir_fd: BorrowedFd<'_>,
    dir: &Path,
    name: &str,
    kind: Kind,
    euid: u32,
    change: bool,
) {
    let path = dir.join(name);
    let fd: OwnedFd = match rustix::fs::openat(
        dir_fd,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return,
        Err(e) => {
            warn_once!(&path, path = %path.display(), error = %e, "{} could not be checked: {e}", path.display());
            return;
        }
    };
    let stat = match rustix::fs::fstat(&fd) {
        Ok(stat) => stat,
        Err(e) => {
            warn_once!(&path, path = %path.display(), error = %e, "{} could not be checked: {e}", path.display());
            return;
        }
    };
    let mode = stat.st_mode & 0o7777;
    if mode & 0o077 == 0 {
        return;
    }
    let why = if FileType::from_raw_mode(stat.st_mode) != kind.file_type() {
        "is not what hookbox makes there (a symbolic link, or another type)"
    } else if stat.st_uid != euid {
        "is another user's"
    } else if kind == Kind::File && stat.st_nlink != 1 {
        "has another hard link (its mode would change a file elsewhere)"
    } else if !change {
        "the data directory holds files hookbox did not create (give hookbox a directory of its own)"
    } else {
        tighten(fd.as_fd(), &path, mode, kind.private_mode());
        return;
    };
    warn_once!(&path,
        path = %path.display(),
        mode = format!("{mode:o}"),
        "{} (mode {mode:o}) is open to other local users but {why}, so it is left as it is",
        path.display()
    );
}

/// Changes the mode of the file `fd` (an `O_PATH` descriptor) refers to, through the descriptor
/// (no path is resolved again).
fn chmod_fd(fd: BorrowedFd<'_>, mode: u32) -> std::io::Result<()> {
    // fchmod refuses an O_PATH descriptor; its /proc link names exactly the file it holds.
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::chmod(link.as_str(), Mode::from_raw_mode(mode))?;
    Ok(())
}

/// Best effort: a path hookbox may not change is named, not fatal.
fn tighten(fd: BorrowedFd<'_>, path: &Path, old: u32, new: u32) {
    match chmod_fd(fd, new) {
        Ok(()) => tracing::warn!(
            path = %path.display(),
            mode = format!("{old:o}"),
            new_mode = format!("{new:o}"),
            "{} was open to other local users (mode {old:o}); made owner-only ({new:o})",
            path.display()
        ),
        Err(e) => warn_once!(path,
            path = %path.display(),
            mode = format!("{old:o}"),
            error = %e,
            "{} is open to other local users (mode {old:o}) and could not be made owner-only: {e}",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// The uid of `nobody`: files of another user (these tests run as root, as the suite does).
    const NOBODY: u32 = 65534;

    fn set_mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn chown_nobody(path: &Path) {
        std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY))
            .unwrap_or_else(|e| panic!("chown {} (these tests need root): {e}", path.display()));
    }

    #[test]
    fn a_hard_link_in_the_data_dir_does_not_change_the_mode_of_a_file_outside() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        set_mode(&dir, 0o700);
        let outside = top.path().join("outside.conf");
        std::fs::write(&outside, "shared").unwrap();
        set_mode(&outside, 0o644);
        // Only a name of hookbox's in it, so the directory counts as hookbox's own.
        std::fs::hard_link(&outside, dir.join("hookbox.db-journal")).unwrap();
        // And a symbolic link: not followed.
        let linked = top.path().join("linked.conf");
        std::fs::write(&linked, "shared").unwrap();
        set_mode(&linked, 0o644);
        std::os::unix::fs::symlink(&linked, dir.join("secret.key")).unwrap();
        prepare(&dir).unwrap();
        assert_eq!(mode(&outside), 0o644);
        assert_eq!(mode(&linked), 0o644);
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn another_users_file_in_the_data_dir_is_left_alone() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path();
        set_mode(dir, 0o700);
        std::fs::write(dir.join("hookbox.db"), "").unwrap();
        set_mode(&dir.join("hookbox.db"), 0o644);
        chown_nobody(&dir.join("hookbox.db"));
        std::fs::create_dir(dir.join("environments")).unwrap();
        set_mode(&dir.join("environments"), 0o755);
        chown_nobody(&dir.join("environments"));
        prepare(dir).unwrap();
        assert_eq!(mode(&dir.join("hookbox.db")), 0o644);
        assert_eq!(mode(&dir.join("environments")), 0o755);
    }

    #[test]
    fn an_empty_shared_or_sticky_or_other_users_directory_is_not_made_owner_only() {
        for (old, other_owner) in [
            (0o1777, false),
            (0o777, false),
            (0o1755, false),
            (0o755, true),
        ] {
            let top = tempfile::tempdir().unwrap();
            let dir = top.path().join("tmp");
            std::fs::create_dir(&dir).unwrap();
            set_mode(&dir, old);
            if other_owner {
                chown_nobody(&dir);
            }
            prepare(&dir).unwrap();
            assert_eq!(mode(&dir), old, "{old:o}, another user's: {other_owner}");
        }
    }

    #[test]
    fn generic_names_in_a_directory_holding_other_files_are_not_changed() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path();
        set_mode(dir, 0o700);
        std::fs::write(dir.join(".profile"), "").unwrap();
        for name in ["uploads", "credentials", "environments"] {
            std::fs::create_dir(dir.join(name)).unwrap();
            set_mode(&dir.join(name), 0o755);
        }
        std::fs::write(dir.join("secret.key"), "").unwrap();
        set_mode(&dir.join("secret.key"), 0o644);
        prepare(dir).unwrap();
        for name in ["uploads", "credentials", "environments"] {
            assert_eq!(mode(&dir.join(name)), 0o755, "{name}");
        }
        assert_eq!(mode(&dir.join("secret.key")), 0o600);
        assert_eq!(
            std::fs::metadata(dir.join("secret.key")).unwrap().uid(),
            rustix::process::geteuid().as_raw()
        );
    }

    // Review: a dedicated volume mounted as the data directory holds `lost+found`, which made
    // it look like a directory that is not hookbox's own: it and its `environments/` and
    // `uploads/` stayed open.
    #[test]
    fn a_volume_with_lost_and_found_is_still_hookboxs_own() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path();
        set_mode(dir, 0o755);
        std::fs::create_dir(dir.join("lost+found")).unwrap();
        set_mode(&dir.join("lost+found"), 0o700);
        std::fs::create_dir(dir.join("environments")).unwrap();
        set_mode(&dir.join("environments"), 0o755);
        std::fs::write(dir.join("hookbox.db"), "").unwrap();
        set_mode(&dir.join("hookbox.db"), 0o644);
        prepare(dir).unwrap();
        assert_eq!(mode(dir), 0o700);
        assert_eq!(mode(&dir.join("environments")), 0o700);
        assert_eq!(mode(&dir.join("hookbox.db")), 0o600);
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_missing_directory_and_its_parents_are_created_owner_only() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("share/hookbox");
        prepare(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&top.path().join("share")), 0o700);
    }

    #[test]
    fn a_directory_holding_other_files_is_left_but_hookbox_files_are_tightened() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        std::fs::set_permissions(
            dir.join("notes.txt"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        std::fs::write(dir.join("hookbox.db"), "").unwrap();
        std::fs::set_permissions(
            dir.join("hookbox.db"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        std::fs::create_dir(dir.join("environments")).unwrap();
        std::fs::set_permissions(
            dir.join("environments"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        // A symbolic link named like hookbox's file is not followed.
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.join("secret.key")).unwrap();
        prepare(dir).unwrap();
        assert_eq!(mode(dir), 0o755);
        assert_eq!(mode(&dir.join("notes.txt")), 0o644);
        assert_eq!(mode(&dir.join("hookbox.db")), 0o600);
        // A generic name in a directory not hookbox's own: not changed.
        assert_eq!(mode(&dir.join("environments")), 0o755);
        assert_eq!(mode(outside.path()), 0o644);
    }
}
