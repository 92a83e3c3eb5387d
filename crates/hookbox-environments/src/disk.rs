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
    mkfs.args(["-q", "-F", "-m", "0", "-E"]);
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
/// created without a cap, or before caps existed).
pub fn ensure_mounted(image: &Path, mountpoint: &Path) -> Result<bool> {
    if !image.exists() {
        return Ok(false);
    }
    // One mount at a time in this process, so two opens cannot stack two mounts.
    static MOUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = MOUNTING.lock().ok();
    if !is_mountpoint(mountpoint) {
        mount(image, mountpoint)?;
        tracing::info!(image = %image.display(), "environment disk mounted");
    }
    Ok(true)
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
    let Ok(dir) = dir.canonicalize() else { return };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut targets: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|target| PathBuf::from(target.replace("\\040", " ")))
        .filter(|target| target.starts_with(&dir) && target != &dir)
        .collect();
    targets.sort_by_key(|t| std::cmp::Reverse(t.components().count()));
    for target in targets {
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
