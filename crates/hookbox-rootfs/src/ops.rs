//! Confined operations built on [`RootDir::open_at`]: create directories, write files atomically,
//! list, stat, delete, symlink, and measure a tree.
//!
//! Every operation resolves the *parent* of its target inside the tree with `openat2`
//! (`RESOLVE_IN_ROOT`) and then acts on the final name relative to that directory fd with the
//! `*at` syscalls and `AT_SYMLINK_NOFOLLOW`/`O_NOFOLLOW`, so a symlink at the final name is
//! never followed out of the tree: writing replaces it, deleting removes the link itself.
//!
//! This module must not know about tools, hooks or sandboxes; callers map sandbox paths.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::{Result, RootDir, RootFsError};

/// What a name in the tree is, without following a symlink at that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// FIFO, socket or device node.
    Other,
}

impl EntryKind {
    fn of(stat: &Stat) -> Self {
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => EntryKind::File,
            FileType::Directory => EntryKind::Dir,
            FileType::Symlink => EntryKind::Symlink,
            FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice
            | FileType::Unknown => EntryKind::Other,
        }
    }

    /// The lowercase name used in tool output.
    pub const fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
            EntryKind::Other => "other",
        }
    }
}

/// The size, kind and permission bits of one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    pub kind: EntryKind,
    pub size: u64,
    pub mode: u32,
}

impl Metadata {
    fn of(stat: &Stat) -> Self {
        Self {
            kind: EntryKind::of(stat),
            size: u64::try_from(stat.st_size).unwrap_or(0),
            mode: stat.st_mode & 0o7777,
        }
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The name, with invalid UTF-8 replaced.
    pub name: String,
    pub kind: EntryKind,
    /// Size in bytes (of the link itself for a symlink).
    pub size: u64,
}

/// Totals for a whole tree: regular files and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub files: u64,
    pub bytes: u64,
}

/// Distinguishes concurrent temporary files of one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn errno(path: &str, err: Errno) -> RootFsError {
    match err {
        Errno::NOENT => RootFsError::NotFound {
            path: path.to_owned(),
        },
        Errno::NOTDIR => RootFsError::NotADirectory {
            path: path.to_owned(),
        },
        Errno::ISDIR => RootFsError::IsADirectory {
            path: path.to_owned(),
        },
        Errno::NOSYS => RootFsError::Openat2Unsupported,
        other => RootFsError::Io {
            path: path.to_owned(),
            source: other.into(),
        },
    }
}

/// Splits `path` into the directory to resolve in the tree and the final name to act on.
fn split_parent(path: &str) -> Result<(&str, &str)> {
    let trimmed = path.trim_end_matches('/');
    let (parent, name) = match trimmed.rfind('/') {
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => ("", trimmed),
    };
    if name.is_empty() || name == "." || name == ".." {
        return Err(RootFsError::InvalidPath {
            path: path.to_owned(),
            reason: "must end in a name (not the top, `.` or `..`)",
        });
    }
    Ok((if parent.is_empty() { "/" } else { parent }, name))
}

impl RootDir {
    /// Opens a directory of the tree for use as a `*at` base.
    fn open_dir(&self, path: &str) -> Result<OwnedFd> {
        self.open_at(path, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
            .map_err(|e| match e {
                RootFsError::Io { path, source }
                    if source.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) =>
                {
                    RootFsError::NotADirectory { path }
                }
                other => other,
            })
    }

    /// Metadata of `path`, following symlinks inside the tree.
    pub fn metadata(&self, path: &str) -> Result<Metadata> {
        let fd = self.open_at(path, OFlags::PATH, Mode::empty())?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| errno(path, e))?;
        Ok(Metadata::of(&stat))
    }

    /// Metadata of the final name of `path` itself (a symlink is reported as one).
    pub fn symlink_metadata(&self, path: &str) -> Result<Metadata> {
        let (parent, name) = split_parent(path)?;
        let dir = self.open_dir(parent)?;
        let stat = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| errno(path, e))?;
        Ok(Metadata::of(&stat))
    }

    /// Creates `path` and any missing parents as directories (mode 0755). Existing directories
    /// (and symlinks to directories inside the tree) are kept; a dangling symlink is an error.
    pub fn create_dir_all(&self, path: &str) -> Result<()> {
        let mut prefix = String::new();
        for component in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
            let parent = if prefix.is_empty() {
                "/".to_owned()
            } else {
                prefix.clone()
            };
            prefix.push('/');
            prefix.push_str(component);
            match self.open_dir(&prefix) {
                Ok(_) => continue,
                Err(RootFsError::NotFound { .. }) => {}
                Err(other) => return Err(other),
            }
            let dir = self.open_dir(&parent)?;
            match rustix::fs::mkdirat(&dir, component, Mode::from_raw_mode(0o755)) {
                Ok(()) => self.own(&dir, component, &prefix)?,
                Err(Errno::EXIST) => {}
                Err(e) => return Err(errno(&prefix, e)),
            }
            // Confirms what now stands there is a directory we can enter (a racing writer or a
            // dangling symlink makes this fail instead of silently writing elsewhere).
            self.open_dir(&prefix)?;
        }
        Ok(())
    }

    /// Replaces `path` with `bytes` atomically (temporary file in the same directory, then
    /// rename). A symlink at `path` is replaced, not written through; an existing regular file
    /// keeps its permission bits. With `create_parents`, missing directories are created.
    pub fn write_file(&self, path: &str, bytes: &[u8], create_parents: bool) -> Result<()> {
        self.write_file_from(path, &mut &bytes[..], create_parents)
    }

    /// [`Self::write_file`] with the content read from `source` to its end (an upload's spool
    /// file), copied without holding it in memory. The same atomic replacement: a failure
    /// (a full disk, a read error) leaves the old file whole.
    pub fn write_file_from(
        &self,
        path: &str,
        source: &mut dyn std::io::Read,
        create_parents: bool,
    ) -> Result<()> {
        let (parent, name) = split_parent(path)?;
        if create_parents {
            self.create_dir_all(parent)?;
        }
        let dir = self.open_dir(parent)?;
        let mode = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => match EntryKind::of(&stat) {
                EntryKind::Dir => {
                    return Err(RootFsError::IsADirectory {
                        path: path.to_owned(),
                    });
                }
                EntryKind::File => stat.st_mode & 0o7777,
                EntryKind::Symlink | EntryKind::Other => 0o644,
            },
            Err(Errno::NOENT) => 0o644,
            Err(e) => return Err(errno(path, e)),
        };
        let temp = format!(
            ".hookbox-tmp-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let fd = rustix::fs::openat(
            &dir,
            temp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| errno(path, e))?;
        let written = (|| -> std::io::Result<()> {
            if let Some((uid, gid)) = self.owner() {
                let (uid, gid) = owner_ids(uid, gid);
                rustix::fs::fchown(&fd, Some(uid), Some(gid))?;
            }
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
            let mut file = File::from(fd);
            std::io::copy(source, &mut file)?;
            file.flush()
        })()
        .map_err(|source| RootFsError::Io {
            path: path.to_owned(),
            source,
        })
        .and_then(|()| {
            rustix::fs::renameat(&dir, temp.as_str(), &dir, name).map_err(|e| errno(path, e))
        });
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&dir, temp.as_str(), AtFlags::empty());
        }
        written
    }

    /// Creates a symlink at `path` pointing to `target` (stored verbatim; it is resolved inside
    /// the tree whenever this crate follows it).
    pub fn symlink(&self, target: &str, path: &str) -> Result<()> {
        let (parent, name) = split_parent(path)?;
        let dir = self.open_dir(parent)?;
        rustix::fs::symlinkat(target, &dir, name).map_err(|e| errno(path, e))?;
        self.own(&dir, name, path)
    }

    /// Removes the file, symlink or special file at `path`. Directories are refused.
    pub fn remove_file(&self, path: &str) -> Result<()> {
        let (parent, name) = split_parent(path)?;
        let dir = self.open_dir(parent)?;
        let stat = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| errno(path, e))?;
        if EntryKind::of(&stat) == EntryKind::Dir {
            return Err(RootFsError::IsADirectory {
                path: path.to_owned(),
            });
        }
        rustix::fs::unlinkat(&dir, name, AtFlags::empty()).map_err(|e| errno(path, e))
    }

    /// Lists a directory, sorted by name, without following symlinks in it.
    pub fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>> {
        let fd = self.open_at(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        let mut entries = Vec::new();
        for entry in rustix::fs::Dir::read_from(&fd).map_err(|e| errno(path, e))? {
            let entry = entry.map_err(|e| errno(path, e))?;
            let raw = entry.file_name();
            if raw.to_bytes() == b"." || raw.to_bytes() == b".." {
                continue;
            }
            let stat = match rustix::fs::statat(&fd, raw, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                // Removed between readdir and stat.
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(errno(path, e)),
            };
            let meta = Metadata::of(&stat);
            entries.push(DirEntry {
                name: raw.to_string_lossy().into_owned(),
                kind: meta.kind,
                size: meta.size,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Counts regular files and their bytes in the whole tree, never following symlinks.
    pub fn usage(&self) -> Result<Usage> {
        let mut usage = Usage::default();
        self.walk(|_, _, stat| {
            if EntryKind::of(stat) == EntryKind::File {
                usage.files += 1;
                usage.bytes += u64::try_from(stat.st_size).unwrap_or(0);
            }
            Ok(())
        })?;
        Ok(usage)
    }

    /// Gives the whole tree (its top included) to `uid`/`gid`, never following symlinks (a link
    /// itself changes owner, its target does not). For trees written by hookbox on the host
    /// (sources, clones) that an unprivileged sandbox must then own.
    pub fn chown_tree(&self, uid: u32, gid: u32) -> Result<()> {
        let (uid, gid) = owner_ids(uid, gid);
        let top = self.open_at("/", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        rustix::fs::fchown(&top, Some(uid), Some(gid)).map_err(|e| errno("/", e))?;
        self.walk(|dir, name, _| {
            match rustix::fs::chownat(dir, name, Some(uid), Some(gid), AtFlags::SYMLINK_NOFOLLOW) {
                // Removed while we walked.
                Ok(()) | Err(Errno::NOENT) => Ok(()),
                Err(e) => Err(errno(&name.to_string_lossy(), e)),
            }
        })
    }

    /// Visits every entry beneath the top with its directory fd, name and `lstat`, descending
    /// into directories without following symlinks. Holds one fd per directory level (not per
    /// directory), so a wide tree cannot exhaust fds.
    fn walk(
        &self,
        mut visit: impl FnMut(&OwnedFd, &std::ffi::CStr, &Stat) -> Result<()>,
    ) -> Result<()> {
        let top = self.open_at("/", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        let mut subdirs = Vec::new();
        scan(&top, &mut visit, &mut subdirs)?;
        let mut stack = vec![(top, subdirs)];
        while let Some((dir, pending)) = stack.last_mut() {
            let Some(name) = pending.pop() else {
                stack.pop();
                continue;
            };
            let Ok(child) = rustix::fs::openat(
                dir.as_fd(),
                name.as_c_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) else {
                continue;
            };
            let mut subdirs = Vec::new();
            scan(&child, &mut visit, &mut subdirs)?;
            stack.push((child, subdirs));
        }
        Ok(())
    }

    /// Gives a name this tree just created to the tree's owner, if it has one.
    fn own(&self, dir: &OwnedFd, name: &str, path: &str) -> Result<()> {
        let Some((uid, gid)) = self.owner() else {
            return Ok(());
        };
        let (uid, gid) = owner_ids(uid, gid);
        rustix::fs::chownat(dir, name, Some(uid), Some(gid), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| errno(path, e))
    }
}

/// `u32::MAX` means "unchanged" to chown; owners come from a configured range that excludes it.
fn owner_ids(uid: u32, gid: u32) -> (rustix::fs::Uid, rustix::fs::Gid) {
    (
        rustix::fs::Uid::from_raw_unchecked(uid),
        rustix::fs::Gid::from_raw_unchecked(gid),
    )
}

/// Visits the entries of `dir` and collects its subdirectory names.
fn scan(
    dir: &OwnedFd,
    visit: &mut impl FnMut(&OwnedFd, &std::ffi::CStr, &Stat) -> Result<()>,
    subdirs: &mut Vec<std::ffi::CString>,
) -> Result<()> {
    for entry in rustix::fs::Dir::read_from(dir).map_err(|e| errno("/", e))? {
        let entry = entry.map_err(|e| errno("/", e))?;
        let raw = entry.file_name();
        if raw.to_bytes() == b"." || raw.to_bytes() == b".." {
            continue;
        }
        let Ok(stat) = rustix::fs::statat(dir, raw, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        visit(dir, raw, &stat)?;
        if EntryKind::of(&stat) == EntryKind::Dir {
            subdirs.push(raw.to_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, std::path::PathBuf, RootDir) {
        let outer = tempfile::tempdir().unwrap();
        let tree = outer.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        let root = RootDir::open(&tree).unwrap();
        (outer, tree, root)
    }

    #[test]
    fn write_creates_parents_and_replaces_atomically_keeping_mode() {
        let (_outer, tree, root) = tree();
        root.write_file("/workspace/a/b.txt", b"one", true).unwrap();
        assert_eq!(
            std::fs::read(tree.join("workspace/a/b.txt")).unwrap(),
            b"one"
        );
        std::fs::set_permissions(
            tree.join("workspace/a/b.txt"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        root.write_file("workspace/a/b.txt", b"two", false).unwrap();
        assert_eq!(
            std::fs::read(tree.join("workspace/a/b.txt")).unwrap(),
            b"two"
        );
        assert_eq!(root.metadata("/workspace/a/b.txt").unwrap().mode, 0o755);
        // No temporary files are left behind.
        let names: Vec<_> = root.list_dir("/workspace/a").unwrap();
        assert_eq!(names.len(), 1);
        assert!(matches!(
            root.write_file("/missing/x", b"", false),
            Err(RootFsError::NotFound { .. })
        ));
    }

    #[test]
    fn write_through_symlinked_parent_stays_inside_and_final_symlink_is_replaced() {
        let (outer, tree, root) = tree();
        let victim = outer.path().join("victim");
        std::fs::write(&victim, b"host").unwrap();
        // Parent is an absolute symlink: resolved inside the tree, so the write lands in tree/etc.
        std::fs::create_dir(tree.join("etc")).unwrap();
        symlink("/etc", tree.join("etcdir")).unwrap();
        root.write_file("/etcdir/passwd", b"x", true).unwrap();
        assert_eq!(std::fs::read(tree.join("etc/passwd")).unwrap(), b"x");
        // Final name is a symlink to a host file: replaced by a regular file, host untouched.
        symlink(&victim, tree.join("link")).unwrap();
        root.write_file("/link", b"inside", false).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"host");
        assert_eq!(
            root.symlink_metadata("/link").unwrap().kind,
            EntryKind::File
        );
        // `..` cannot climb out.
        root.write_file("/../../victim", b"climb", false).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"host");
        assert_eq!(std::fs::read(tree.join("victim")).unwrap(), b"climb");
    }

    #[test]
    fn create_dir_all_refuses_dangling_symlink_and_file_in_the_way() {
        let (_outer, tree, root) = tree();
        symlink("/nowhere", tree.join("dangling")).unwrap();
        assert!(root.create_dir_all("/dangling/x").is_err());
        assert!(!tree.join("nowhere").exists());
        std::fs::write(tree.join("file"), b"").unwrap();
        assert!(matches!(
            root.create_dir_all("/file/x"),
            Err(RootFsError::NotADirectory { .. })
        ));
        root.create_dir_all("/a/./b/../c").unwrap();
        assert!(tree.join("a/c").is_dir());
    }

    #[test]
    fn list_reports_kinds_and_sizes_without_following() {
        let (_outer, tree, root) = tree();
        std::fs::create_dir(tree.join("d")).unwrap();
        std::fs::write(tree.join("f"), b"12345").unwrap();
        symlink("/etc/passwd", tree.join("l")).unwrap();
        let entries = root.list_dir("/").unwrap();
        let summary: Vec<_> = entries
            .iter()
            .map(|e| {
                (
                    e.name.as_str(),
                    e.kind,
                    if e.kind == EntryKind::File { e.size } else { 0 },
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("d", EntryKind::Dir, 0),
                ("f", EntryKind::File, 5),
                ("l", EntryKind::Symlink, 0)
            ]
        );
        assert!(matches!(
            root.list_dir("/f"),
            Err(RootFsError::Io { .. } | RootFsError::NotADirectory { .. })
        ));
    }

    #[test]
    fn remove_deletes_links_not_targets_and_refuses_dirs() {
        let (outer, tree, root) = tree();
        let victim = outer.path().join("victim");
        std::fs::write(&victim, b"host").unwrap();
        symlink(&victim, tree.join("l")).unwrap();
        root.remove_file("/l").unwrap();
        assert!(victim.exists());
        assert!(tree.join("l").symlink_metadata().is_err());
        std::fs::create_dir(tree.join("d")).unwrap();
        assert!(matches!(
            root.remove_file("/d"),
            Err(RootFsError::IsADirectory { .. })
        ));
        assert!(matches!(
            root.remove_file("/gone"),
            Err(RootFsError::NotFound { .. })
        ));
        assert!(matches!(
            root.remove_file("/"),
            Err(RootFsError::InvalidPath { .. })
        ));
    }

    #[test]
    fn usage_counts_files_and_skips_symlinks() {
        let (_outer, tree, root) = tree();
        root.write_file("/a/b/c", b"123", true).unwrap();
        root.write_file("/d", b"45", true).unwrap();
        symlink("/", tree.join("loop")).unwrap();
        assert_eq!(root.usage().unwrap(), Usage { files: 2, bytes: 5 });
    }
}
