//! Per-environment disk caps that the kernel enforces: an environment's tree is its own ext4
//! filesystem, in a sparse image file beside it (`<env dir>/disk.img`), loop-mounted on
//! `<env dir>/root`. A process that fills it gets `ENOSPC` at the cap; the host's filesystem
//! and every other environment are untouched, and the image only takes the space its files
//! use (`discard` hands freed blocks back to the host).
//!
//! Why images and not ext4/XFS project quotas: those need the data dir's filesystem mounted
//! with `prjquota`, which an operator rarely controls for `/`; a loop-mounted image works
//! rootful on any ext4 (or other) host filesystem, survives restarts (the image is remounted on
//! open) and is removed with the environment. Caps are sparse, so the sum of all caps may exceed
//! the host's free space: keep the `environments` quota times the cap within the disk.
//!
//! A disk is mounted while some process has its environment open ([`Hold`]: a shared `flock`
//! each) and unmounted by the last to close it, or by a server's idle sweep
//! ([`unmount_if_unused`]), so idle environments hold no mount and no loop device, and every new
//! mount namespace copies only the mounts of open ones. Mounting, unmounting and reading an
//! unmounted image take the environment's [`MountLock`].
//!
//! Tools: `mkfs.ext4` (e2fsprogs) and `mount` (util-linux), bounded by [`TOOL_TIMEOUT`]. This
//! module must not know about sandboxes, hooks or tools.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The image file in an environment's directory.
pub const IMAGE_FILE: &str = "disk.img";

/// Smallest cap accepted (ext4 needs room for its own metadata and journal).
pub const MIN_BYTES: u64 = 16 << 20;

/// Longest `mkfs.ext4` or `mount` may take before it is killed.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// Mount options: `discard` frees host blocks when files are deleted; `noinit_itable` keeps
/// the kernel from zeroing inode tables in the background (which would grow the sparse image).
const MOUNT_OPTIONS: &str = "loop,discard,nosuid,nodev,noinit_itable";

/// Why a disk could not be made, mounted or unmounted.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("a disk cap of {bytes} bytes is too small; the smallest is {MIN_BYTES} bytes (16 MiB)")]
    TooSmall { bytes: u64 },
    #[error(
        "per-environment disk caps need hookbox to run as root (loop-mounted images); run as root or set the disk cap to 0 (no cap) explicitly"
    )]
    NeedsRoot,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{tool}` failed for {path}: {message}")]
    Tool {
        tool: &'static str,
        path: PathBuf,
        message: String,
    },
}

pub type Result<T> = std::result::Result<T, DiskError>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DiskError {
    let path = path.to_path_buf();
    move |source| DiskError::Io { path, source }
}

/// Runs `cmd` to completion within [`TOOL_TIMEOUT`], killing it past that.
fn run(tool: &'static str, cmd: Command, path: &Path) -> Result<()> {
    hookbox_process::host::run(cmd, TOOL_TIMEOUT).map_err(|e| DiskError::Tool {
        tool,
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Whether `path` is the root of a mount (its device differs from its parent's).
pub fn is_mountpoint(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(here), Some(Ok(parent))) = (
        std::fs::symlink_metadata(path),
        path.parent().map(std::fs::metadata),
    ) else {
        return false;
    };
    here.is_dir() && here.dev() != parent.dev()
}

/// Creates a sparse `bytes`-sized ext4 image at `image` whose root belongs to `owner`, and
/// mounts it on the (existing, empty) directory `mountpoint`.
pub fn create(
    image: &Path,
    mountpoint: &Path,
    bytes: u64,
    owner: Option<(u32, u32)>,
) -> Result<()> {
    if bytes < MIN_BYTES {
        return Err(DiskError::TooSmall { bytes });
    }
    if !rustix::process::geteuid().is_root() {
        return Err(DiskError::NeedsRoot);
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(image)
        .map_err(io(image))?;
    file.set_len(bytes).map_err(io(image))?;
    drop(file);
    let mut mkfs = Command::new("mkfs.ext4");
    // `^resize_inode`: no blocks reserved for growing the filesystem online (hookbox never
    // grows one), which mkfs would write out: 4.3 MB of a 10 GiB image's 4.5, so an empty
    // environment takes about 0.35 MB of disk instead.
    mkfs.args(["-q", "-F", "-m", "0", "-O", "^resize_inode", "-E"]);
    let mut extended = "lazy_itable_init=1,lazy_journal_init=1,nodiscard".to_owned();
    if let Some((uid, gid)) = owner {
        extended.push_str(&format!(",root_owner={uid}:{gid}"));
    }
    mkfs.arg(extended).arg(image);
    run("mkfs.ext4", mkfs, image)?;
    mount(image, mountpoint)?;
    // mkfs's lost+found would show up as a top-level directory of the sandbox.
    let lost = mountpoint.join("lost+found");
    std::fs::remove_dir(&lost).map_err(io(&lost))
}

fn mount(image: &Path, mountpoint: &Path) -> Result<()> {
    let mut cmd = Command::new("mount");
    cmd.args(["-t", "ext4", "-o", MOUNT_OPTIONS])
        .arg(image)
        .arg(mountpoint);
    run("mount", cmd, image)
}

/// Mounts `image` on `mountpoint` unless something is mounted there already (after a host
/// reboot, or an unmount by the operator). `Ok(false)`: there is no image (an environment
/// created without a cap, or before caps existed). The caller holds the environment's
/// [`MountLock`].
fn ensure_mounted_locked(image: &Path, mountpoint: &Path) -> Result<bool> {
    if !image.exists() {
        return Ok(false);
    }
    if !is_mountpoint(mountpoint) {
        mount(image, mountpoint)?;
        tracing::info!(image = %image.display(), "environment disk mounted");
    }
    Ok(true)
}

/// The lock file beside an image: whoever holds it exclusively may mount or unmount the disk
/// (or read the image unmounted).
pub const LOCK_FILE: &str = "disk.lock";
/// The file every user of a mounted disk holds a shared lock on ([`Hold`]).
pub const USERS_FILE: &str = "disk.users";

fn flocked(dir: &Path, name: &str, op: rustix::fs::FlockOperation) -> Result<std::fs::File> {
    let path = dir.join(name);
    open_flocked(&path, op).map_err(io(&path))
}

/// Opens (creating it if need be) the lock file at `path` and takes `op` on it: the file holds
/// the lock until it is dropped.
pub(crate) fn open_flocked(
    path: &Path,
    op: rustix::fs::FlockOperation,
) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    rustix::fs::flock(&file, op)?;
    Ok(file)
}

/// The right to mount or unmount one environment's disk, or to read its image while it is not
/// mounted: an exclusive `flock` on `<env dir>/disk.lock`, so processes (the server, the CLI,
/// a checkpoint) take turns. Held only for a mount, an unmount or a checkpoint's read.
#[derive(Debug)]
pub struct MountLock {
    _file: std::fs::File,
}

impl MountLock {
    /// Waits for the lock of the environment in `dir`.
    pub fn acquire(dir: &Path) -> Result<Self> {
        Ok(MountLock {
            _file: flocked(dir, LOCK_FILE, rustix::fs::FlockOperation::LockExclusive)?,
        })
    }
}

/// One user of an environment's mounted disk (an open [`crate::environment::Environment`], a
/// `show`, a fork's parent): a shared `flock` on `<env dir>/disk.users`, taken under the
/// [`MountLock`] once the disk is mounted. While any process holds one, nobody unmounts the
/// disk; the last user to let go unmounts it when asked to ([`Hold::new`]'s `unmount_when_last`).
/// A process that dies holding one loses it with its descriptors: its mount stays until the next
/// user closes or a server's sweep ([`unmount_if_unused`]) finds it unused. The filesystem is
/// ext4 with its journal, so a crash between a write and an unmount loses nothing written.
#[derive(Debug)]
pub struct Hold {
    users: Option<std::fs::File>,
    dir: PathBuf,
    mountpoint: PathBuf,
    unmount_when_last: bool,
}

impl Hold {
    /// Mounts the image of the environment in `dir` on `mountpoint` if it is not mounted, and
    /// holds it. `Ok(None)`: the environment has no image (no disk cap).
    pub fn new(dir: &Path, mountpoint: &Path, unmount_when_last: bool) -> Result<Option<Self>> {
        let image = dir.join(IMAGE_FILE);
        if !image.exists() {
            return Ok(None);
        }
        let _lock = MountLock::acquire(dir)?;
        ensure_mounted_locked(&image, mountpoint)?;
        // Never waits long: an exclusive lock on it is only ever tried (not waited for) under
        // the mount lock, which this holds.
        let users = flocked(dir, USERS_FILE, rustix::fs::FlockOperation::LockShared)?;
        Ok(Some(Hold {
            users: Some(users),
            dir: dir.to_path_buf(),
            mountpoint: mountpoint.to_path_buf(),
            unmount_when_last,
        }))
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        drop(self.users.take());
        if !self.unmount_when_last {
            return;
        }
        match unmount_if_unused(&self.dir, &self.mountpoint) {
            Ok(true) => {}
            // Busy: another open holds it (it unmounts when it closes), or a process this one
            // is spawning still shares its descriptors between fork and exec. The second
            // passes within moments, so a few more tries follow, off this thread.
            Ok(false) if is_mountpoint(&self.mountpoint) => {
                let (dir, mountpoint) = (self.dir.clone(), self.mountpoint.clone());
                let spawned = std::thread::Builder::new()
                    .name("disk-unmount".into())
                    .spawn(move || retry_unmount(&dir, &mountpoint));
                if let Err(err) = spawned {
                    tracing::warn!(%err, "cannot start the unmount retry of a closed environment's disk");
                }
            }
            Ok(false) => {}
            Err(err) => {
                tracing::warn!(mountpoint = %self.mountpoint.display(), %err, "cannot unmount a closed environment's disk");
            }
        }
    }
}

/// Tries to unmount a closed environment's disk a few more times (about two seconds in all),
/// stopping as soon as it is unmounted or no longer mounted; a disk still held after that is
/// left to its last holder's close or the server's idle sweep.
fn retry_unmount(dir: &Path, mountpoint: &Path) {
    let mut pause = std::time::Duration::from_millis(2);
    for _ in 0..24 {
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(100));
        match unmount_if_unused(dir, mountpoint) {
            Ok(true) => return,
            Ok(false) if is_mountpoint(mountpoint) => {}
            Ok(false) => return,
            Err(err) => {
                tracing::warn!(mountpoint = %mountpoint.display(), %err, "cannot unmount a closed environment's disk");
                return;
            }
        }
    }
}

/// Unmounts the disk of the environment in `dir` (mounted on `mountpoint`) when no process
/// holds it ([`Hold`]): `Ok(true)` when it did. A plain unmount, so the loop device is released
/// with it; if this process still has a file open on it (`EBUSY`) it stays mounted, for a
/// later try.
pub fn unmount_if_unused(dir: &Path, mountpoint: &Path) -> Result<bool> {
    let _lock = MountLock::acquire(dir)?;
    let Ok(_alone) = flocked(
        dir,
        USERS_FILE,
        rustix::fs::FlockOperation::NonBlockingLockExclusive,
    ) else {
        return Ok(false);
    };
    if !is_mountpoint(mountpoint) {
        return Ok(false);
    }
    match nix::mount::umount2(mountpoint, nix::mount::MntFlags::empty()) {
        Ok(()) => {
            tracing::debug!(mountpoint = %mountpoint.display(), "environment disk unmounted");
            Ok(true)
        }
        Err(nix::errno::Errno::EBUSY) => Ok(false),
        Err(e) => Err(io(mountpoint)(e.into())),
    }
}

/// The directories under `root` on which something is mounted (from this process's mount
/// table), deepest first.
pub fn mounts_under(root: &Path) -> Vec<PathBuf> {
    let Ok(root) = root.canonicalize() else {
        return Vec::new();
    };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut targets: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|target| PathBuf::from(target.replace("\\040", " ")))
        .filter(|target| target.starts_with(&root) && target != &root)
        .collect();
    targets.sort_by_key(|t| std::cmp::Reverse(t.components().count()));
    targets
}

/// Detaches whatever is mounted on `mountpoint` (the loop device is released with it).
pub fn unmount(mountpoint: &Path) -> Result<()> {
    if !is_mountpoint(mountpoint) {
        return Ok(());
    }
    nix::mount::umount2(mountpoint, nix::mount::MntFlags::MNT_DETACH)
        .map_err(|e| io(mountpoint)(e.into()))
}

/// Unmounts `mountpoint` at a clean stop, when nothing should use it any more: a plain unmount
/// (the loop device is detached before this returns), or, if something still holds the
/// filesystem, a lazy one (detached once the last user lets go). `Ok(false)`: nothing was
/// mounted there.
pub fn unmount_now(mountpoint: &Path) -> Result<bool> {
    if !is_mountpoint(mountpoint) {
        return Ok(false);
    }
    match nix::mount::umount2(mountpoint, nix::mount::MntFlags::empty()) {
        Ok(()) => Ok(true),
        Err(nix::errno::Errno::EBUSY) => {
            tracing::warn!(mountpoint = %mountpoint.display(), "environment disk still in use at stop; detaching it lazily");
            nix::mount::umount2(mountpoint, nix::mount::MntFlags::MNT_DETACH)
                .map(|()| true)
                .map_err(|e| io(mountpoint)(e.into()))
        }
        Err(e) => Err(io(mountpoint)(e.into())),
    }
}

/// Detaches every mount beneath `dir` (deepest first): for removing a whole data dir, as test
/// harnesses and scripts do after killing hookbox.
pub fn unmount_all_under(dir: &Path) {
    for target in mounts_under(dir) {
        let _ = nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// `FIFREEZE` and `FITHAW` (`linux/fs.h`: `_IOWR('X', 119, int)` and `_IOWR('X', 120, int)`).
const FIFREEZE: libc::c_ulong = 0xC004_5877;
const FITHAW: libc::c_ulong = 0xC004_5878;

/// A filesystem frozen with `FIFREEZE`: its dirty data and journal are flushed, and every
/// writer blocks until the guard is dropped (which thaws it), so the image beneath reads as one
/// consistent, cleanly unmountable filesystem. Hold it only for as long as reading the image
/// takes.
#[derive(Debug)]
pub struct Frozen {
    dir: std::fs::File,
    mountpoint: PathBuf,
}

impl Frozen {
    /// Freezes the filesystem mounted on `mountpoint`.
    pub fn freeze(mountpoint: &Path) -> Result<Self> {
        let dir = std::fs::File::open(mountpoint).map_err(io(mountpoint))?;
        ioctl(&dir, FIFREEZE).map_err(io(mountpoint))?;
        Ok(Frozen {
            dir,
            mountpoint: mountpoint.to_path_buf(),
        })
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if let Err(err) = ioctl(&self.dir, FITHAW) {
            tracing::error!(mountpoint = %self.mountpoint.display(), %err, "cannot thaw an environment disk");
        }
    }
}

fn ioctl(file: &std::fs::File, request: libc::c_ulong) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut arg: libc::c_int = 0;
    // SAFETY: FIFREEZE and FITHAW take a pointer to an int they do not keep; `file` is open
    // for the duration of the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), request, &mut arg) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Thaws the filesystem on `mountpoint` if a process that froze it died before thawing it
/// (`EINVAL`, not frozen, is the usual answer and is ignored). Call it at start-up only: it
/// would also thaw a checkpoint of this process in progress.
pub fn thaw_if_frozen(mountpoint: &Path) {
    if let Ok(dir) = std::fs::File::open(mountpoint)
        && ioctl(&dir, FITHAW).is_ok()
    {
        tracing::warn!(mountpoint = %mountpoint.display(), "thawed an environment disk left frozen");
    }
}
