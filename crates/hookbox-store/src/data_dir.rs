//! The data directory's file modes: it holds every interaction's content (prompts, tool and hook
//! outputs in the database), the credential key and the environments' files, so nothing in it
//! may be readable by another local user.
//!
//! [`prepare`] creates a missing data directory (and its missing parents, as the XDG base
//! directory rules ask) with mode 0700. An existing one readable or enterable by group or others
//! is made 0700, with a warning naming it and its old mode (none if it was empty), only when
//! everything in it is hookbox's ([`OWN_ENTRIES`]): a directory given by mistake (`--data-dir /`, `$HOME`) is never
//! changed, only warned about. Either way hookbox's own entries in it are made owner-only
//! (files 0600, directories 0700), each with a warning. Best effort: what hookbox may not change
//! (another user's) is warned about, not fatal. The process umask is never changed: sandboxed
//! programs inherit it.
//!
//! Nothing else needs to enter the data directory: the sandbox launchers run as root and bind
//! what a sandbox sees before it drops to the environment's uid, and runsc's gofer is handed
//! bind-mounted sources (see docs/runtimes.md), which is why the .deb's unit has used a 0700
//! `StateDirectory` all along.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

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
    File,
    Dir,
}

impl Kind {
    fn private_mode(self) -> u32 {
        match self {
            Kind::File => 0o600,
            Kind::Dir => 0o700,
        }
    }
}

/// Creates `dir` owner-only (0700, missing parents too), or makes an existing one and
/// hookbox's entries in it so (see the module doc).
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
        Ok(meta) => {
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o077 != 0 {
                let entries = own_entries(dir).map_err(io)?;
                if entries == Some(0) {
                    // Nothing of hookbox's was exposed yet (a directory made for it, as a
                    // temporary directory is): made private without a warning.
                    if let Err(e) =
                        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    {
                        tracing::warn!(
                            path = %dir.display(),
                            mode = format!("{mode:o}"),
                            error = %e,
                            "the data directory is open to other local users and could not be made owner-only"
                        );
                    }
                } else if entries.is_some() {
                    tighten(dir, mode, 0o700);
                } else {
                    tracing::warn!(
                        path = %dir.display(),
                        mode = format!("{mode:o}"),
                        "the data directory is open to other users and holds files hookbox did not create, so it is left as it is; hookbox's own files in it are made owner-only (give hookbox a directory of its own)"
                    );
                }
            }
        }
    }
    for (name, kind) in OWN_ENTRIES {
        let path = dir.join(name);
        // Not following a symbolic link: only hookbox's own files and directories are changed.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let is_kind = match kind {
            Kind::File => meta.is_file(),
            Kind::Dir => meta.is_dir(),
        };
        let mode = meta.permissions().mode() & 0o7777;
        if is_kind && mode & 0o077 != 0 {
            tighten(&path, mode, kind.private_mode());
        }
    }
    Ok(())
}

/// How many entries `dir` has if every one is one hookbox creates there, else `None`.
fn own_entries(dir: &Path) -> std::io::Result<Option<usize>> {
    let mut count = 0;
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else {
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

/// Best effort: a path hookbox may not change (another user's) is named, not fatal.
fn tighten(path: &Path, old: u32, new: u32) {
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(new)) {
        Ok(()) => tracing::warn!(
            path = %path.display(),
            mode = format!("{old:o}"),
            new_mode = format!("{new:o}"),
            "was readable by other local users; made owner-only"
        ),
        Err(e) => tracing::warn!(
            path = %path.display(),
            mode = format!("{old:o}"),
            error = %e,
            "is readable by other local users and could not be made owner-only"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(mode(&dir.join("environments")), 0o700);
        assert_eq!(mode(outside.path()), 0o644);
    }
}
