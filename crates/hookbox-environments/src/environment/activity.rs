//! The record of an environment's use: its `generation` (grows with every change of the tree)
//! and its `updated_at` / `last_accessed_at` times, kept apart from `environment.json` in
//! [`ACTIVITY_FILE`] so that a tool call records them without rewriting the metadata.
//!
//! The file is one fixed-size record ([`RECORD_LEN`] bytes: a magic, then the three values as
//! little-endian `u64`), changed only in place by one `pwrite` at offset 0 under an exclusive
//! `flock` of the file: no temporary file, no rename, no new inode, so no ext4 flush-on-rename.
//! The lock makes a change a read-modify-write no other thread or process (the server's
//! threads, a CLI sharing the data directory) can interleave with, so no bump is lost; readers
//! take it shared, so they never see half a record.
//!
//! What a reader sees is `environment.json` with each of the three values raised to the
//! record's when the record is larger (`merge`): all three only grow, so the larger is the
//! newer. `environment.json` keeps being rewritten whole by what changes the rest of the
//! metadata (the sandbox uid given at an open, a fork's copy), always from such a merged read,
//! so it should never hold more than the record; still, every change starts from the larger
//! of the two (a build without records, or a power loss that kept the rewritten
//! `environment.json` and not the record's page, could leave it larger).
//!
//! A crash (the process killed) at any point leaves the old record or the new one (a `pwrite`
//! of a few bytes within one page of a regular file is not torn by a kill), or a record
//! created and never written, which readers ignore: a record is only ever short before its
//! first write, and then `environment.json` holds everything. The lock goes with the process.
//! So no change recorded is ever read back as "no change". Against a power loss the record is
//! as durable as the rename it replaces was: a change starts the page's write-back at once
//! (`sync_file_range`, not waited for, as ext4's flush on rename was not); nothing is
//! `fsync`ed, before or now.

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use rustix::fs::FlockOperation;

use super::EnvironmentMeta;

/// The activity record in an environment's directory (outside the tree).
pub const ACTIVITY_FILE: &str = "activity";

/// The record's size: magic, generation, updated_at, last_accessed_at.
pub const RECORD_LEN: usize = 32;

/// What a record starts with (its layout's version in the last byte).
const MAGIC: [u8; 8] = *b"hbactiv1";

/// The values the record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Activity {
    pub generation: u64,
    pub updated_at: u64,
    pub last_accessed_at: u64,
}

impl Activity {
    fn of(meta: &EnvironmentMeta) -> Self {
        Self {
            generation: meta.generation,
            updated_at: meta.updated_at,
            last_accessed_at: meta.last_accessed_at,
        }
    }

    fn encode(&self) -> [u8; RECORD_LEN] {
        let mut out = [0u8; RECORD_LEN];
        out[..8].copy_from_slice(&MAGIC);
        out[8..16].copy_from_slice(&self.generation.to_le_bytes());
        out[16..24].copy_from_slice(&self.updated_at.to_le_bytes());
        out[24..32].copy_from_slice(&self.last_accessed_at.to_le_bytes());
        out
    }

    /// `None` for anything but a whole record (a file created and not yet written).
    fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < RECORD_LEN || bytes[..8] != MAGIC {
            return None;
        }
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(w)
        };
        Some(Self {
            generation: word(8),
            updated_at: word(16),
            last_accessed_at: word(24),
        })
    }
}

/// Raises `meta`'s generation and times to the record's where it holds more.
pub(crate) fn merge(meta: &mut EnvironmentMeta, activity: Option<Activity>) {
    if let Some(a) = activity {
        meta.generation = meta.generation.max(a.generation);
        meta.updated_at = meta.updated_at.max(a.updated_at);
        meta.last_accessed_at = meta.last_accessed_at.max(a.last_accessed_at);
    }
}

fn read_record(file: &std::fs::File) -> std::io::Result<Option<Activity>> {
    let mut buf = [0u8; RECORD_LEN];
    let mut len = 0;
    while len < RECORD_LEN {
        match file.read_at(&mut buf[len..], len as u64)? {
            0 => break,
            n => len += n,
        }
    }
    Ok(Activity::decode(&buf[..len]))
}

/// The record of environment directory `dir`, read under a shared lock; `None` when there is
/// none (yet) or it was never completed.
pub(crate) fn read(dir: &Path) -> std::io::Result<Option<Activity>> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(ACTIVITY_FILE))
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    rustix::fs::flock(&file, FlockOperation::LockShared)?;
    read_record(&file)
}

/// Why a [`record`] failed.
#[derive(Debug)]
pub(crate) enum RecordError {
    Io(std::io::Error),
    /// Reading `environment.json` to start the record.
    Meta(super::EnvError),
}

/// Records a use of environment directory `dir` at `now` (Unix seconds): `last_accessed_at`
/// raised to `now` (never lowered), and when `modified`, `updated_at` likewise and the
/// generation one higher. A use that changes nothing (not `modified`, and its second already
/// recorded) writes nothing. `meta` reads `environment.json`: for every change (the record
/// continues from the larger of the two), and when the record is not there yet.
pub(crate) fn record(
    dir: &Path,
    modified: bool,
    now: u64,
    meta: impl FnOnce() -> super::Result<EnvironmentMeta>,
) -> Result<(), RecordError> {
    let path = dir.join(ACTIVITY_FILE);
    let open = |create: bool| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            // Readable as `environment.json` is: whoever may read the metadata may read this.
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
    };
    // A read in a second already recorded: one open and one read, no lock (a stale answer
    // only says the second was recorded, which stays true).
    if !modified
        && let Ok(file) = open(false)
        && let Ok(Some(current)) = read_record(&file)
        && current.last_accessed_at >= now
    {
        return Ok(());
    }
    let file = open(true).map_err(RecordError::Io)?;
    // Held until `file` is closed, at return (or by the kernel, if this process dies).
    rustix::fs::flock(&file, FlockOperation::LockExclusive)
        .map_err(|e| RecordError::Io(e.into()))?;
    let stored = read_record(&file).map_err(RecordError::Io)?;
    let current = match stored {
        // A change also looks at `environment.json`: should it ever hold more than the record
        // (rewritten by a build without records, or durable when the record's page was not),
        // a bump from the record alone would stay hidden behind it.
        Some(current) if modified => {
            let mut merged = meta().map_err(RecordError::Meta)?;
            merge(&mut merged, Some(current));
            Activity::of(&merged)
        }
        Some(current) => current,
        None => Activity::of(&meta().map_err(RecordError::Meta)?),
    };
    let mut next = current;
    next.last_accessed_at = current.last_accessed_at.max(now);
    if modified {
        next.updated_at = current.updated_at.max(now);
        next.generation = current.generation.saturating_add(1);
    }
    // A record not there yet is written even unchanged, so that the next read of the same
    // second takes the fast path above.
    if next == current && stored.is_some() {
        return Ok(());
    }
    file.write_all_at(&next.encode(), 0)
        .map_err(RecordError::Io)?;
    if modified {
        // Starts writing the page back now, without waiting, as ext4 did for the
        // rename that recorded a change before: a change of the tree (an image whose own
        // journal flushes) must not reach the disk long before the bump that marks it.
        // SAFETY: `file` is open for the call's duration; the call only reads its arguments.
        let rc = unsafe {
            libc::sync_file_range(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
                RECORD_LEN as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        if rc != 0 {
            return Err(RecordError::Io(std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_anything_short_or_foreign_is_none() {
        let a = Activity {
            generation: 7,
            updated_at: 1_700_000_000,
            last_accessed_at: 1_700_000_005,
        };
        let bytes = a.encode();
        assert_eq!(Activity::decode(&bytes), Some(a));
        assert_eq!(Activity::decode(&bytes[..RECORD_LEN - 1]), None);
        assert_eq!(Activity::decode(&[]), None);
        let mut foreign = bytes;
        foreign[7] = b'9';
        assert_eq!(Activity::decode(&foreign), None);
    }
}
