//! The data directory and SQLite's files hold every interaction's content: no other local user
//! may read them. They were created with the umask's modes (0755 and 0644 by default).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use hookbox_store::{SqliteOptions, SqliteStore};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A write, so the write-ahead log and its index are in use.
/// The database's files (WAL and shared memory too) and the credential key in `dir` are 0600.
fn assert_own_files_owner_only(dir: &Path) {
    for name in [
        "hookbox.db",
        "hookbox.db-wal",
        "hookbox.db-shm",
        "secret.key",
    ] {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }
}

async fn write_something(store: &SqliteStore) {
    let project = hookbox_store::ProjectRecord {
        name: "modes".into(),
        created: "2026-01-01T00:00:00Z".into(),
        quotas: Default::default(),
    };
    hookbox_store::Store::create_project(store, &project)
        .await
        .unwrap();
}

#[tokio::test]
async fn data_dir_and_database_files_are_not_readable_by_other_users() {
    let top = tempfile::tempdir().unwrap();
    // As the default data dir is made: its parent missing too.
    let dir = top.path().join("share").join("hookbox");
    let store = SqliteStore::open_in(&dir, &SqliteOptions::default()).unwrap();
    write_something(&store).await;
    assert_eq!(mode(&dir), 0o700, "the data dir");
    assert_eq!(mode(&top.path().join("share")), 0o700, "its new parent");
    assert_own_files_owner_only(&dir);
}

#[tokio::test]
async fn an_old_world_readable_data_dir_and_database_are_made_owner_only() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("hookbox");
    drop(SqliteStore::open_in(&dir, &SqliteOptions::default()).unwrap());
    std::fs::create_dir(dir.join("environments")).unwrap();
    // What older releases left, with the umask's modes.
    set_mode(&dir, 0o755);
    set_mode(&dir.join("hookbox.db"), 0o644);
    set_mode(&dir.join("secret.key"), 0o644);
    set_mode(&dir.join("environments"), 0o755);
    let store = SqliteStore::open_in(&dir, &SqliteOptions::default()).unwrap();
    write_something(&store).await;
    assert_eq!(mode(&dir), 0o700, "the data dir");
    assert_eq!(mode(&dir.join("environments")), 0o700, "environments/");
    assert_own_files_owner_only(&dir);
}

#[tokio::test]
async fn a_data_dir_holding_other_files_is_left_as_is_but_the_database_is_owner_only() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path();
    // `--data-dir $HOME` given by mistake: not hookbox's to change.
    set_mode(dir, 0o755);
    std::fs::write(dir.join(".profile"), "").unwrap();
    set_mode(&dir.join(".profile"), 0o644);
    drop(SqliteStore::open_in(dir, &SqliteOptions::default()).unwrap());
    set_mode(&dir.join("hookbox.db"), 0o644);
    let store = SqliteStore::open_in(dir, &SqliteOptions::default()).unwrap();
    write_something(&store).await;
    assert_eq!(mode(dir), 0o755);
    assert_eq!(mode(&dir.join(".profile")), 0o644);
    assert_own_files_owner_only(dir);
}
