mod approvals;
mod crash;
mod credentials;
mod file_modes;
mod interactions;
mod postgres;
mod projects;
mod resources;
mod triggers;
mod webhooks;

use std::sync::Arc;

/// The project most tests store into.
pub const P: &str = hookbox_store::DEFAULT_PROJECT;

use hookbox_store::{PostgresOptions, PostgresStore, SecretKey, SqliteOptions, SqliteStore, Store};

/// Selects the backend the backend-neutral tests run against: `postgres` (with
/// `HOOKBOX_TEST_POSTGRES_URL`, a cluster `scripts/postgres.sh start` made) or SQLite (default).
/// `scripts/test.sh` runs this suite once with each.
pub const BACKEND_VAR: &str = "HOOKBOX_TEST_STORE";
pub const POSTGRES_URL_VAR: &str = "HOOKBOX_TEST_POSTGRES_URL";

pub const KEY: [u8; 32] = [42; 32];

/// Where one test's store lives: a temp dir (SQLite's file, and a scratch dir for either), or
/// also a database of its own on the test cluster.
pub struct Place {
    dir: tempfile::TempDir,
    database: Option<String>,
}

impl Place {
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The database's URL, on PostgreSQL.
    pub fn database_url(&self) -> Option<String> {
        self.database.clone()
    }
}

/// The URL of the test cluster; a PostgreSQL run without one is a broken run, not a skip.
pub fn postgres_url() -> String {
    std::env::var(POSTGRES_URL_VAR).unwrap_or_else(|_| {
        panic!(
            "{BACKEND_VAR}=postgres needs {POSTGRES_URL_VAR} (scripts/postgres.sh start prints one)"
        )
    })
}

pub fn on_postgres() -> bool {
    std::env::var(BACKEND_VAR).as_deref() == Ok("postgres")
}

/// A fresh, empty database on the test cluster; its URL.
pub async fn fresh_database() -> String {
    let base = postgres_url();
    let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let name = format!("hb_{:016x}", rand::random::<u64>());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (prefix, _) = base.rsplit_once('/').unwrap();
    format!("{prefix}/{name}")
}

/// A store in a fresh place, on the selected backend.
pub async fn temp_store() -> (Place, Arc<dyn Store>) {
    let place = Place {
        dir: tempfile::tempdir().unwrap(),
        database: if on_postgres() {
            Some(fresh_database().await)
        } else {
            None
        },
    };
    let store = open(&place).await;
    (place, store)
}

/// The store at `place` opened again (a restart), with the tests' key.
pub async fn open(place: &Place) -> Arc<dyn Store> {
    open_with_key(place, SecretKey::from_bytes(KEY))
        .await
        .unwrap()
}

pub async fn open_with_key(place: &Place, key: SecretKey) -> hookbox_store::Result<Arc<dyn Store>> {
    Ok(match &place.database {
        Some(url) => Arc::new(PostgresStore::connect(url, key, &PostgresOptions::default()).await?),
        None => Arc::new(sqlite_open_with(place.path(), key)?),
    })
}

/// SQLite's own file in `dir`, for the tests of what only SQLite has (its file, its migrations
/// from version 1, a writer killed mid-transaction).
pub fn sqlite_open(dir: &std::path::Path) -> SqliteStore {
    sqlite_open_with(dir, SecretKey::from_bytes(KEY)).unwrap()
}

fn sqlite_open_with(dir: &std::path::Path, key: SecretKey) -> hookbox_store::Result<SqliteStore> {
    SqliteStore::open(&dir.join("hookbox.db"), key, &SqliteOptions::default())
}
