mod crash;
mod credentials;
mod interactions;
mod projects;
mod resources;

/// The project most tests store into.
pub const P: &str = hookbox_store::DEFAULT_PROJECT;

use hookbox_store::{SecretKey, SqliteOptions, SqliteStore};

/// A store in a fresh temp dir (kept alive by the returned guard).
pub fn temp_store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    (dir, store)
}

pub fn open(dir: &std::path::Path) -> SqliteStore {
    SqliteStore::open(
        &dir.join("hookbox.db"),
        SecretKey::from_bytes([42; 32]),
        &SqliteOptions::default(),
    )
    .unwrap()
}
