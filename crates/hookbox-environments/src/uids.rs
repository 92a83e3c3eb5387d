//! Which host ids environments hold, as files: an environment holding ids `[a, b)` has a file
//! named `a-b` in `<environments>/.uids/<block>/` for every block of 65 536 ids its range
//! touches. Picking an id for a new environment then reads the one or two small directories of
//! its candidate's blocks, not every environment's metadata (which made creation cost grow with
//! the number of environments held).
//!
//! Across processes (the server and the CLI creating at once), a range is claimed by creating
//! its files first and checking the blocks for an overlapping range after: of two overlapping
//! claims, the later check always sees the earlier file, so at most one survives; the loser
//! removes its files and tries another candidate. Environments made before these files existed
//! are entered once, from their metadata, when `.uids/.complete` is missing.
//!
//! This module must not know what the ids are used for (the sandbox's identity).

use std::path::{Path, PathBuf};

/// The directory under the environments' root.
const DIR: &str = ".uids";
/// Present once every environment's range is entered.
const COMPLETE: &str = ".complete";
/// Ids per block (one gVisor environment's span).
const BLOCK: u64 = 65_536;

/// The ranges claimed under one environments root.
#[derive(Debug, Clone)]
pub(crate) struct Claims {
    dir: PathBuf,
}

/// A half-open range of host ids `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    pub start: u64,
    pub end: u64,
}

impl Range {
    fn name(self) -> String {
        format!("{}-{}", self.start, self.end)
    }

    fn parse(name: &str) -> Option<Self> {
        let (a, b) = name.split_once('-')?;
        Some(Range {
            start: a.parse().ok()?,
            end: b.parse().ok()?,
        })
    }

    fn overlaps(self, other: Range) -> bool {
        self.start < other.end && other.start < self.end
    }

    fn blocks(self) -> impl Iterator<Item = u64> {
        (self.start / BLOCK)..=(self.end.saturating_sub(1) / BLOCK)
    }
}

impl Claims {
    pub(crate) fn new(root: &Path) -> Self {
        Claims {
            dir: root.join(DIR),
        }
    }

    fn block_dir(&self, block: u64) -> PathBuf {
        self.dir.join(block.to_string())
    }

    /// Whether the ranges of environments made before these files existed are entered.
    pub(crate) fn complete(&self) -> bool {
        self.dir.join(COMPLETE).exists()
    }

    /// Enters `ranges` (every environment's, read from their metadata) and marks the files
    /// complete. Ranges entered already are kept.
    pub(crate) fn backfill(&self, ranges: &[Range]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        for range in ranges {
            self.write(*range)?;
        }
        std::fs::write(self.dir.join(COMPLETE), b"")
    }

    fn write(&self, range: Range) -> std::io::Result<()> {
        for block in range.blocks() {
            let dir = self.block_dir(block);
            std::fs::create_dir_all(&dir)?;
            match std::fs::File::create_new(dir.join(range.name())) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Claims `range` if no claimed range overlaps it: `Ok(true)` when it is now this caller's.
    pub(crate) fn try_claim(&self, range: Range) -> std::io::Result<bool> {
        let mut written = Vec::new();
        for block in range.blocks() {
            let dir = self.block_dir(block);
            std::fs::create_dir_all(&dir)?;
            let path = dir.join(range.name());
            match std::fs::File::create_new(&path) {
                Ok(_) => written.push(path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    remove_all(&written);
                    return Ok(false);
                }
                Err(e) => {
                    remove_all(&written);
                    return Err(e);
                }
            }
        }
        for block in range.blocks() {
            for entry in std::fs::read_dir(self.block_dir(block))? {
                let name = entry?.file_name();
                let Some(other) = name.to_str().and_then(Range::parse) else {
                    continue;
                };
                if other != range && other.overlaps(range) {
                    remove_all(&written);
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Releases `range` (its environment is removed).
    pub(crate) fn release(&self, range: Range) {
        for block in range.blocks() {
            let _ = std::fs::remove_file(self.block_dir(block).join(range.name()));
        }
    }

    /// Enters `range` as held (an environment restored from elsewhere with its recorded ids).
    pub(crate) fn enter(&self, range: Range) -> std::io::Result<()> {
        self.write(range)
    }
}

fn remove_all(paths: &[PathBuf]) {
    for path in paths {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> Range {
        Range { start, end }
    }

    #[test]
    fn an_overlapping_claim_loses_and_a_released_range_is_free_again() {
        let root = tempfile::tempdir().unwrap();
        let claims = Claims::new(root.path());
        let gvisor = r(1_000_000_000, 1_000_000_000 + BLOCK);
        assert!(claims.try_claim(gvisor).unwrap());
        // The same range, and a single id inside it (in either of the two blocks it touches).
        assert!(!claims.try_claim(gvisor).unwrap());
        assert!(!claims.try_claim(r(1_000_000_005, 1_000_000_006)).unwrap());
        assert!(!claims.try_claim(r(gvisor.end - 1, gvisor.end)).unwrap());
        // Just past it is free.
        assert!(claims.try_claim(r(gvisor.end, gvisor.end + 1)).unwrap());
        // The losers left no file behind: releasing the winner frees the ids.
        claims.release(gvisor);
        assert!(claims.try_claim(r(1_000_000_005, 1_000_000_006)).unwrap());
    }

    #[test]
    fn a_later_claim_sees_an_earlier_one_in_another_block_order() {
        let root = tempfile::tempdir().unwrap();
        let claims = Claims::new(root.path());
        // A single id claimed, then a span over its block from an unaligned start.
        assert!(claims.try_claim(r(3 * BLOCK + 10, 3 * BLOCK + 11)).unwrap());
        assert!(!claims.try_claim(r(2 * BLOCK + 20, 3 * BLOCK + 20)).unwrap());
        assert!(claims.try_claim(r(2 * BLOCK + 20, 3 * BLOCK + 10)).unwrap());
    }

    #[test]
    fn backfill_of_no_environments_marks_completion() {
        let root = tempfile::tempdir().unwrap();
        let claims = Claims::new(&root.path().join("environments"));
        std::fs::create_dir(root.path().join("environments")).unwrap();
        claims.backfill(&[]).unwrap();
        assert!(claims.complete());
    }

    #[test]
    fn backfill_enters_existing_ranges_and_marks_completion() {
        let root = tempfile::tempdir().unwrap();
        let claims = Claims::new(root.path());
        assert!(!claims.complete());
        claims.backfill(&[r(5, 6), r(BLOCK, 2 * BLOCK)]).unwrap();
        assert!(claims.complete());
        assert!(!claims.try_claim(r(5, 6)).unwrap());
        assert!(!claims.try_claim(r(BLOCK + 7, BLOCK + 8)).unwrap());
        // Entering a range twice is harmless.
        claims.enter(r(5, 6)).unwrap();
    }
}
