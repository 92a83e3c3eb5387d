//! Finding and loading an environment's hooks files.
//!
//! Two places are read, in this order, and their groups concatenated: `/.agents/hooks.json` (the
//! sandbox root) and `/workspace/.agents/hooks.json` (the working directory's). Paths are resolved
//! inside the environment's tree with [`hookbox_rootfs::RootDir`], because the tree is writable
//! by sandboxed code: a hooks file that is a symlink to a host file, a FIFO or a huge file is
//! reported, never followed out, blocked on or read whole.
//!
//! With vendor dialects enabled ([`load_with_dialects`]; off by default), the other agent CLIs'
//! project files are read after these, in the order [`crate::dialect::load`] documents.
//!
//! Files are re-read on every dispatch so that edits take effect (spec §1); [`HooksCache`] only
//! skips re-parsing when the bytes are unchanged.

use std::sync::{Arc, Mutex};

use hookbox_rootfs::{RootDir, RootFsError};
use serde::Serialize;

use crate::config::{self, HooksConfig};
use crate::diagnostic::{Diagnostic, Severity};
use crate::dialect::{Dialect, DialectSet};

/// The hooks file at the sandbox root.
pub const ROOT_HOOKS_FILE: &str = "/.agents/hooks.json";
/// The hooks file relative to the sandbox working directory `/workspace`.
pub const WORKDIR_HOOKS_FILE: &str = "/workspace/.agents/hooks.json";
/// Both, in dispatch order.
pub const HOOKS_FILES: [&str; 2] = [ROOT_HOOKS_FILE, WORKDIR_HOOKS_FILE];
/// A hooks file larger than this is refused.
pub const MAX_HOOKS_FILE_SIZE: u64 = 1024 * 1024;

/// The merged configuration of an environment and everything found wrong on the way.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Loaded {
    #[serde(skip)]
    pub config: Arc<HooksConfig>,
    /// The hooks files that exist, in the order they were merged.
    pub files: Vec<String>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Loaded {
    /// True when some part of some file was skipped.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// The raw bytes of each hooks file (`None` where absent), or the reason it could not be read,
/// with the dialect it is read in.
type RawFiles = Vec<(String, Dialect, Result<Option<Vec<u8>>, String>)>;

fn read_raw(root: &RootDir, dialects: DialectSet) -> RawFiles {
    read_raw_split(root, root, dialects)
}

/// hookbox's own files from `own`, vendor files from `vendor` (see [`HooksCache::load_split`]).
fn read_raw_split(own: &RootDir, vendor: &RootDir, dialects: DialectSet) -> RawFiles {
    let own_files = HOOKS_FILES
        .into_iter()
        .map(|f| (f.to_owned(), Dialect::Agents, own));
    let vendors = dialects.iter().flat_map(|dialect| {
        crate::dialect::load::BASES
            .into_iter()
            .flat_map(move |base| crate::dialect::load::candidate_files(vendor, dialect, base))
            .map(move |file| (file, dialect, vendor))
    });
    own_files
        .chain(vendors)
        .map(|(file, dialect, root)| {
            let bytes = match root.read_file(&file, MAX_HOOKS_FILE_SIZE) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(RootFsError::NotFound { .. }) => Ok(None),
                Err(err) => Err(err.to_string()),
            };
            (file, dialect, bytes)
        })
        .collect()
}

fn parse_raw(raw: &RawFiles) -> Loaded {
    let mut loaded = Loaded::default();
    let mut groups = Vec::new();
    for (file, dialect, bytes) in raw {
        match bytes {
            Ok(None) => {}
            Ok(Some(bytes)) if *dialect == Dialect::Agents => {
                loaded.files.push(file.clone());
                let (mut file_groups, diagnostics) = config::parse(file, bytes);
                groups.append(&mut file_groups);
                loaded.diagnostics.extend(diagnostics);
            }
            Ok(Some(bytes)) => {
                let (group, diagnostics) = crate::dialect::load::parse(*dialect, file, bytes);
                loaded.diagnostics.extend(diagnostics);
                if let Some(group) = group {
                    loaded.files.push(file.clone());
                    groups.push(group);
                }
            }
            Err(reason) => loaded.diagnostics.push(Diagnostic {
                severity: Severity::Error,
                file: file.clone(),
                path: "$".to_owned(),
                message: format!("cannot read the hooks file: {reason}; file ignored"),
            }),
        }
    }
    // A gate entry `hookbox hooks install` wrote is its CLI's hook, never a handler here.
    for file in crate::dialect::answer_out::drop_gate_entries(&mut groups) {
        loaded.diagnostics.push(Diagnostic {
            severity: Severity::Warning,
            file,
            path: "$".to_owned(),
            message: "the `hookbox hooks gate` entry (written by `hookbox hooks install`) is that CLI's own hook; hookbox does not run it".to_owned(),
        });
    }
    loaded.config = Arc::new(HooksConfig { groups });
    loaded
}

/// Reads and parses the hooks files of the tree at `root` (hookbox's own only).
pub fn load_from_root(root: &RootDir) -> Loaded {
    load_with_dialects(root, DialectSet::NONE)
}

/// Reads and parses the hooks files of the tree at `root`: hookbox's own, then those of each
/// vendor dialect in `dialects` (see [`crate::dialect::load`] for the files and their order).
pub fn load_with_dialects(root: &RootDir, dialects: DialectSet) -> Loaded {
    parse_raw(&read_raw(root, dialects))
}

/// Re-reads the hooks files on each call but re-parses only when their bytes changed.
#[derive(Debug, Default)]
pub struct HooksCache {
    last: Mutex<Option<(RawFiles, Arc<Loaded>)>>,
}

impl HooksCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The current configuration of the tree at `root` (hookbox's own files only).
    pub fn load(&self, root: &RootDir) -> Arc<Loaded> {
        self.load_with_dialects(root, DialectSet::NONE)
    }

    /// The current configuration of the tree at `root`, with the vendor files of `dialects`.
    pub fn load_with_dialects(&self, root: &RootDir, dialects: DialectSet) -> Arc<Loaded> {
        self.load_split(root, root, dialects)
    }

    /// hookbox's own files from `own`, the vendor files of `dialects` from `vendor`. A frozen
    /// environment passes its snapshot as `own`; vendor files are the project's and are read
    /// from its tree (they are not part of the freeze).
    pub fn load_split(&self, own: &RootDir, vendor: &RootDir, dialects: DialectSet) -> Arc<Loaded> {
        let raw = read_raw_split(own, vendor, dialects);
        if let Ok(guard) = self.last.lock()
            && let Some((cached_raw, loaded)) = guard.as_ref()
            && *cached_raw == raw
        {
            return loaded.clone();
        }
        let loaded = Arc::new(parse_raw(&raw));
        // Once per change: a broken file lets calls through (fail open, as the reference says),
        // so the operator must hear of it (#31 item 6), but not on every call.
        for d in loaded
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
        {
            tracing::warn!(
                name: hookbox_protocol::events::HOOKS_FILE_BROKEN,
                file = %d.file,
                path = %d.path,
                error = %d.message,
                "hooks file has an error; that part is skipped"
            );
        }
        if let Ok(mut guard) = self.last.lock() {
            *guard = Some((raw, loaded.clone()));
        }
        loaded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GATE: &str = r#"{"gate":{"pre_tool_execution":[{"matcher":"code_execution","hooks":[{"type":"command","command":"a"}]}]}}"#;
    const AUDIT: &str = r#"{"audit":{"post_tool_execution":[{"matcher":"*","hooks":[{"type":"command","command":"b"}]}]}}"#;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".agents")).unwrap();
        std::fs::create_dir_all(dir.path().join("workspace/.agents")).unwrap();
        dir
    }

    fn names(loaded: &Loaded) -> Vec<&str> {
        loaded
            .config
            .groups
            .iter()
            .map(|g| g.name.as_str())
            .collect()
    }

    #[test]
    fn both_files_merge_root_first() {
        let dir = tree();
        std::fs::write(dir.path().join("workspace/.agents/hooks.json"), AUDIT).unwrap();
        std::fs::write(dir.path().join(".agents/hooks.json"), GATE).unwrap();
        let loaded = load_from_root(&RootDir::open(dir.path()).unwrap());
        assert_eq!(names(&loaded), ["gate", "audit"]);
        assert_eq!(loaded.files, HOOKS_FILES);
        assert!(loaded.diagnostics.is_empty());
    }

    #[test]
    fn either_file_alone_is_found() {
        let dir = tree();
        std::fs::write(dir.path().join("workspace/.agents/hooks.json"), AUDIT).unwrap();
        let loaded = load_from_root(&RootDir::open(dir.path()).unwrap());
        assert_eq!(names(&loaded), ["audit"]);
        let empty = tempfile::tempdir().unwrap();
        let loaded = load_from_root(&RootDir::open(empty.path()).unwrap());
        assert!(loaded.config.groups.is_empty() && loaded.diagnostics.is_empty());
    }

    #[test]
    fn a_hooks_file_symlinked_to_the_host_is_not_followed_out() {
        let outer = tempfile::tempdir().unwrap();
        std::fs::write(outer.path().join("host-hooks.json"), GATE).unwrap();
        let dir = tree();
        let target = outer.path().join("host-hooks.json");
        std::os::unix::fs::symlink(&target, dir.path().join(".agents/hooks.json")).unwrap();
        let loaded = load_from_root(&RootDir::open(dir.path()).unwrap());
        // The absolute link resolves inside the tree, where that path does not exist.
        assert!(loaded.config.groups.is_empty());
    }

    #[test]
    fn unreadable_files_are_diagnosed_and_the_other_still_applies() {
        let dir = tree();
        std::fs::write(
            dir.path().join(".agents/hooks.json"),
            vec![b' '; (MAX_HOOKS_FILE_SIZE + 1) as usize],
        )
        .unwrap();
        std::fs::write(dir.path().join("workspace/.agents/hooks.json"), AUDIT).unwrap();
        let loaded = load_from_root(&RootDir::open(dir.path()).unwrap());
        assert_eq!(names(&loaded), ["audit"]);
        assert_eq!(loaded.diagnostics.len(), 1);
        assert!(
            loaded.diagnostics[0]
                .message
                .contains("larger than the limit")
        );
    }

    #[test]
    fn cache_sees_edits() {
        let dir = tree();
        let root = RootDir::open(dir.path()).unwrap();
        let cache = HooksCache::new();
        std::fs::write(dir.path().join(".agents/hooks.json"), GATE).unwrap();
        let first = cache.load(&root);
        assert_eq!(names(&first), ["gate"]);
        assert!(
            Arc::ptr_eq(&first, &cache.load(&root)),
            "unchanged bytes re-parsed"
        );
        std::fs::write(dir.path().join(".agents/hooks.json"), AUDIT).unwrap();
        assert_eq!(names(&cache.load(&root)), ["audit"]);
    }
}
