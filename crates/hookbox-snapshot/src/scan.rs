//! Reading a blob into chunks: only the data regions of a sparse file are read (`SEEK_DATA` /
//! `SEEK_HOLE`), all-zero chunks are left out, every other chunk is hashed, and the chunks whose
//! hash the previous snapshot does not already hold are copied to a spool (an unnamed temporary
//! file beside the environment), so the filesystem can be thawed before anything is uploaded.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::manifest::{BlobState, ChunkMap};

/// Chunks waiting for upload, by hash, in a temporary file.
#[derive(Debug)]
pub struct Spool {
    file: File,
    len: u64,
    /// (hash, offset, length), in the order written.
    pub entries: Vec<(String, u64, usize)>,
    hashes: BTreeSet<String>,
}

impl Spool {
    /// A spool in an unnamed temporary file in `dir` (gone when dropped, or on a crash).
    pub fn new_in(dir: &Path) -> std::io::Result<Self> {
        Ok(Spool {
            file: tempfile::tempfile_in(dir)?,
            len: 0,
            entries: Vec::new(),
            hashes: BTreeSet::new(),
        })
    }

    fn push(&mut self, hash: &str, bytes: &[u8]) -> std::io::Result<()> {
        if !self.hashes.insert(hash.to_owned()) {
            return Ok(());
        }
        self.file.seek(SeekFrom::Start(self.len))?;
        self.file.write_all(bytes)?;
        self.entries.push((hash.to_owned(), self.len, bytes.len()));
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// The bytes of entry `i`.
    pub fn read(&self, i: usize) -> std::io::Result<Vec<u8>> {
        let Some((_, offset, len)) = self.entries.get(i) else {
            return Err(std::io::Error::other("no such spool entry"));
        };
        let mut buf = vec![0; *len];
        self.file.read_exact_at(&mut buf, *offset)?;
        Ok(buf)
    }

    /// Bytes spooled (before compression).
    pub fn bytes(&self) -> u64 {
        self.len
    }
}

/// The hex BLAKE3 hash of `bytes`.
pub fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// What scanning read: bytes of data regions read and hashed.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScanStats {
    pub read_bytes: u64,
}

/// Chunks the file `file` of `size` bytes; chunks not in `known` go to `spool`.
pub fn scan_file(
    file: &File,
    size: u64,
    chunk_size: u64,
    known: &BTreeSet<String>,
    spool: &mut Spool,
    stats: &mut ScanStats,
) -> std::io::Result<BlobState> {
    let mut chunks = ChunkMap::new();
    let mut buf = vec![0u8; usize::try_from(chunk_size).map_err(std::io::Error::other)?];
    // The next chunk index not yet looked at: data regions may share a chunk.
    let mut next_index = 0u64;
    let mut pos = 0u64;
    while pos < size {
        let data = match rustix::fs::seek(file, rustix::fs::SeekFrom::Data(pos)) {
            Ok(d) => d,
            Err(rustix::io::Errno::NXIO) => break,
            Err(e) => return Err(e.into()),
        };
        let hole = rustix::fs::seek(file, rustix::fs::SeekFrom::Hole(data))?.min(size);
        let first = (data / chunk_size).max(next_index);
        let last = hole.saturating_sub(1) / chunk_size;
        for index in first..=last {
            let offset = index * chunk_size;
            if offset >= size {
                break;
            }
            let len = chunk_size.min(size - offset) as usize;
            let chunk = &mut buf[..len];
            file.read_exact_at(chunk, offset)?;
            stats.read_bytes += len as u64;
            if chunk.iter().all(|b| *b == 0) {
                continue;
            }
            let h = hash(chunk);
            if !known.contains(&h) {
                spool.push(&h, chunk)?;
            }
            chunks.insert(index, h);
        }
        next_index = last + 1;
        pos = hole.max(next_index * chunk_size);
    }
    Ok(BlobState { size, chunks })
}

/// Chunks an in-memory blob.
pub fn scan_bytes(
    bytes: &[u8],
    chunk_size: u64,
    known: &BTreeSet<String>,
    spool: &mut Spool,
) -> std::io::Result<BlobState> {
    let mut chunks = ChunkMap::new();
    let size = usize::try_from(chunk_size).map_err(std::io::Error::other)?;
    for (index, chunk) in bytes.chunks(size).enumerate() {
        if chunk.iter().all(|b| *b == 0) {
            continue;
        }
        let h = hash(chunk);
        if !known.contains(&h) {
            spool.push(&h, chunk)?;
        }
        chunks.insert(index as u64, h);
    }
    Ok(BlobState {
        size: bytes.len() as u64,
        chunks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_and_zeros_are_skipped_and_known_chunks_not_spooled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let cs = 4096u64;
        file.set_len(64 * cs).unwrap();
        file.write_all_at(&[7u8; 100], 3 * cs + 5).unwrap();
        file.write_all_at(&[0u8; 4096], 10 * cs).unwrap(); // written zeros
        file.write_all_at(b"tail", 64 * cs - 4).unwrap();
        let mut spool = Spool::new_in(dir.path()).unwrap();
        let mut stats = ScanStats::default();
        let blob = scan_file(&file, 64 * cs, cs, &BTreeSet::new(), &mut spool, &mut stats).unwrap();
        assert_eq!(blob.chunks.keys().copied().collect::<Vec<_>>(), vec![3, 63]);
        assert_eq!(spool.entries.len(), 2);
        assert!(stats.read_bytes < 64 * cs, "holes were read: {stats:?}");
        let known: BTreeSet<String> = blob.chunks.values().cloned().collect();
        let mut again = Spool::new_in(dir.path()).unwrap();
        let same = scan_file(&file, 64 * cs, cs, &known, &mut again, &mut stats).unwrap();
        assert_eq!(same, blob);
        assert!(
            again.entries.is_empty(),
            "unchanged chunks were spooled again"
        );
        let first = spool.read(0).unwrap();
        assert_eq!(hash(&first), blob.chunks[&3]);
    }
}
