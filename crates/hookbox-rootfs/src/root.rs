//! The confinement root: [`RootDir`], a tree opened on the host, and every lookup in it through
//! `openat2(2)` with `RESOLVE_IN_ROOT`; the crate's errors.

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};

/// Errors from confined path operations.
#[derive(Debug, thiserror::Error)]
pub enum RootFsError {
    // The OS error is in the message and deliberately not a `source`: a chain printer would
    // otherwise print it twice (#31).
    #[error("cannot open the tree root {path}: {error}")]
    OpenRoot {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: not found")]
    NotFound { path: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a regular file")]
    NotAFile { path: String },
    #[error("{path}: larger than the limit of {limit} bytes")]
    TooLarge { path: String, limit: u64 },
    #[error("this kernel lacks openat2(2) (Linux 5.6+), which hookbox needs to confine paths")]
    Openat2Unsupported,
    #[error("{path}: {reason}")]
    InvalidPath { path: String, reason: &'static str },
    #[error("{path}: is a directory")]
    IsADirectory { path: String },
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
}

pub type Result<T> = std::result::Result<T, RootFsError>;

/// A directory tree that paths are resolved inside.
#[derive(Debug)]
pub struct RootDir {
    fd: OwnedFd,
    host_path: PathBuf,
    /// Host uid/gid given to everything this handle creates (files, directories, links), so that
    /// an unprivileged sandbox owns what hookbox writes into its tree. `None`: the caller's.
    owner: Option<(u32, u32)>,
}

impl RootDir {
    /// Opens `path` on the host as a confinement root.
    pub fn open(path: &Path) -> Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| RootFsError::OpenRoot {
            path: path.to_path_buf(),
            error: e.into(),
        })?;
        Ok(Self {
            fd,
            host_path: path.to_path_buf(),
            owner: None,
        })
    }

    /// Everything this handle creates from now on is owned by `owner` (uid, gid).
    pub fn with_owner(mut self, owner: Option<(u32, u32)>) -> Self {
        self.owner = owner;
        self
    }

    /// Who owns what this handle creates (`None`: the caller).
    pub fn owner(&self) -> Option<(u32, u32)> {
        self.owner
    }

    /// The tree's location on the host.
    pub fn host_path(&self) -> &Path {
        &self.host_path
    }

    /// Opens `path` (a sandbox path: absolute from the tree's top, or relative to it) with
    /// `flags`, resolving every component inside the tree.
    pub fn open_at(&self, path: &str, flags: OFlags, mode: Mode) -> Result<OwnedFd> {
        // openat2 refuses flags that O_PATH ignores, so NOCTTY only goes with real opens.
        let extra = if flags.contains(OFlags::PATH) {
            OFlags::CLOEXEC
        } else {
            OFlags::CLOEXEC | OFlags::NOCTTY
        };
        rustix::fs::openat2(
            &self.fd,
            path,
            flags | extra,
            mode,
            ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|e| match e {
            rustix::io::Errno::NOENT => RootFsError::NotFound {
                path: path.to_owned(),
            },
            rustix::io::Errno::NOSYS => RootFsError::Openat2Unsupported,
            other => RootFsError::Io {
                path: path.to_owned(),
                source: other.into(),
            },
        })
    }

    /// Reads a regular file of at most `limit` bytes. FIFOs, devices and directories are
    /// refused without blocking.
    pub fn read_file(&self, path: &str, limit: u64) -> Result<Vec<u8>> {
        let fd = self.open_at(path, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| RootFsError::Io {
            path: path.to_owned(),
            source: e.into(),
        })?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(RootFsError::NotAFile {
                path: path.to_owned(),
            });
        }
        let mut bytes = Vec::new();
        File::from(fd)
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|source| RootFsError::Io {
                path: path.to_owned(),
                source,
            })?;
        if bytes.len() as u64 > limit {
            return Err(RootFsError::TooLarge {
                path: path.to_owned(),
                limit,
            });
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn reads_a_file_by_sandbox_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".agents")).unwrap();
        std::fs::write(dir.path().join(".agents/hooks.json"), b"{}").unwrap();
        let root = RootDir::open(dir.path()).unwrap();
        assert_eq!(root.read_file("/.agents/hooks.json", 10).unwrap(), b"{}");
        assert_eq!(root.read_file(".agents/hooks.json", 10).unwrap(), b"{}");
    }

    #[test]
    fn absolute_symlink_resolves_inside_the_tree_not_on_the_host() {
        let outer = tempfile::tempdir().unwrap();
        std::fs::write(outer.path().join("secret"), b"host secret").unwrap();
        let tree = outer.path().join("tree");
        std::fs::create_dir_all(tree.join("etc")).unwrap();
        std::fs::write(tree.join("etc/passwd"), b"tree passwd").unwrap();
        symlink("/etc/passwd", tree.join("link")).unwrap();
        symlink("../secret", tree.join("up")).unwrap();
        let root = RootDir::open(&tree).unwrap();
        assert_eq!(root.read_file("/link", 100).unwrap(), b"tree passwd");
        // `..` from the top stays at the top, so ../secret names tree/secret, which is absent.
        assert!(matches!(
            root.read_file("/up", 100),
            Err(RootFsError::NotFound { .. })
        ));
        assert!(matches!(
            root.read_file("../../secret", 100),
            Err(RootFsError::NotFound { .. })
        ));
    }

    #[test]
    fn refuses_fifo_without_blocking_and_caps_size() {
        let dir = tempfile::tempdir().unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            dir.path().join("fifo"),
            Mode::RUSR | Mode::WUSR,
        )
        .unwrap();
        std::fs::write(dir.path().join("big"), vec![b'x'; 11]).unwrap();
        let root = RootDir::open(dir.path()).unwrap();
        assert!(matches!(
            root.read_file("/fifo", 100),
            Err(RootFsError::NotAFile { .. })
        ));
        assert!(matches!(
            root.read_file("/big", 10),
            Err(RootFsError::TooLarge { limit: 10, .. })
        ));
        assert_eq!(root.read_file("/big", 11).unwrap().len(), 11);
    }

    #[test]
    fn magic_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        symlink("/proc/self/root/etc/hostname", dir.path().join("magic")).unwrap();
        let root = RootDir::open(dir.path()).unwrap();
        // Inside the tree, /proc does not exist, so the link cannot reach the host.
        assert!(root.read_file("/magic", 100).is_err());
    }
}
