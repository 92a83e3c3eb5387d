//! The SQLite backend of [`Store`](crate::Store): one database file, WAL journal, versioned
//! migrations.
//!
//! Durability: every trait method has committed when it returns. In WAL mode a commit appends
//! to the `-wal` file with `write()` before returning, so a SIGKILL of hookbox cannot lose it:
//! the bytes are in the kernel. `synchronous=NORMAL` (the default here) skips the fsync per
//! commit, so a *power loss* may drop the last commits (never corrupt the file);
//! `Synchronous::Full` fsyncs every commit and survives power loss too, at a throughput cost.
//!
//! Threading: one thread owns the connection (`worker.rs`); every call is queued to it (a
//! bounded queue: callers wait for a place when it is full) as a read (`SqliteStore::read`) or
//! a write (`SqliteStore::with`) and awaits its answer. Reads run in a deferred transaction
//! (several together in one), each in a savepoint, and never take the write lock (so a batch of
//! reads is answered while another process, such as a `hookbox` CLI command, writes the file; a
//! "read" that changed a row is rolled back and fails). Writes it
//! finds queued together run back to back in one transaction, each in a savepoint of its own (a
//! failed call undoes only its own changes; one cannot end the transaction itself), and are
//! answered once that transaction has committed: one commit (and one fsync under
//! `Synchronous::Full`) for the group instead of one per call. A call that panics is answered
//! with an error and the thread goes on. The thread ends when the last handle drops.
//!
//! Layout: this file opens the database and hands a call to the thread (`SqliteStore::with`);
//! `worker.rs` is the thread; `migrations.rs` holds the schema; `store.rs` maps each
//! [`Store`](crate::Store) method to the function of the resource file that serves it
//! (`interactions.rs`, `approvals.rs`, `environments.rs`, `credentials.rs`, `webhooks.rs`,
//! `deliveries.rs`, `triggers.rs`, `projects.rs`; `documents.rs` for the tables of one JSON
//! document per row, which is all agents are). Resource functions are plain synchronous
//! functions of a connection; one that writes several statements opens a savepoint (not a
//! transaction: it may run inside a group's); what both backends decide alike (row mappings,
//! pages, sealing, the rules of each resource) comes from the crate's shared modules.

mod approvals;
mod auth_tokens;
mod credentials;
mod deliveries;
mod documents;
mod environments;
mod interactions;
mod migrations;
mod projects;
mod store;
mod triggers;
mod webhooks;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::Connection;

use crate::crypto::SecretKey;
use crate::error::{Error, Result};

pub use migrations::SCHEMA_VERSION;

/// Database file name inside the data dir.
pub const DB_FILE: &str = "hookbox.db";

/// Creates an empty database file at `path` with mode 0600 unless one exists (SQLite makes an
/// empty file a new database; left to SQLite, the file takes 0644 less the umask).
fn create_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(Error::Io {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// How many prepared statements the connection keeps (each is a few KiB).
const STATEMENT_CACHE: usize = 256;

/// `PRAGMA synchronous` level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Safe against process crashes (SIGKILL); the default.
    #[default]
    Normal,
    /// Also safe against power loss; one fsync per commit.
    Full,
}

/// Options of [`SqliteStore::open`].
#[derive(Debug, Clone, Default)]
pub struct SqliteOptions {
    pub synchronous: Synchronous,
}

/// SQLite-backed [`Store`](crate::Store). Clones share one connection and its thread.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    // Dropped before `thread`: the last handle closes the queue, then waits for the thread.
    queue: tokio::sync::mpsc::Sender<worker::Job>,
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "held for its Drop, which joins the thread")
    )]
    thread: Arc<worker::Thread>,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) `<data_dir>/hookbox.db` with the key from
    /// [`SecretKey::load_or_create`]; `data_dir` is created or kept owner-only
    /// ([`crate::data_dir::prepare`]).
    pub fn open_in(data_dir: &Path, options: &SqliteOptions) -> Result<Self> {
        crate::data_dir::prepare(data_dir)?;
        let key = SecretKey::load_or_create(data_dir)?;
        Self::open(&data_dir.join(DB_FILE), key, options)
    }

    /// Opens the database file at `path` and runs pending migrations. A new file is created
    /// owner-only (0600) before SQLite opens it, so its `-wal` and `-shm` files are too: SQLite's
    /// unix VFS gives them the database file's mode.
    pub fn open(path: &Path, key: SecretKey, options: &SqliteOptions) -> Result<Self> {
        create_private(path)?;
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(
            None,
            "synchronous",
            match options.synchronous {
                Synchronous::Normal => "NORMAL",
                Synchronous::Full => "FULL",
            },
        )?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // rusqlite keeps 16 by default; the store has more distinct statements than that (32
        // cached call sites, some once per table), so a busy server evicted and parsed some
        // again and again.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        migrations::migrate(&mut conn)?;
        let (queue, thread) = worker::start(conn, key, path)?;
        Ok(SqliteStore {
            queue,
            thread: Arc::new(thread),
            path: path.to_owned(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version recorded in the file.
    pub async fn schema_version(&self) -> Result<i64> {
        self.read(|c, _| migrations::version(c)).await
    }

    /// Runs `f`, a call that may write, on the connection (with the credential key) on the
    /// store thread: no other call interleaves with it. Waits for a place in the queue when it
    /// is full.
    async fn with<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &SecretKey) -> Result<T> + Send + 'static,
    {
        self.queue_call(worker::job(worker::Kind::Write, f)).await
    }

    /// Runs `f`, a call that only reads, as [`SqliteStore::with`] does, but in a deferred
    /// transaction (a row it changes is rolled back and it fails), never taking SQLite's write
    /// lock.
    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &SecretKey) -> Result<T> + Send + 'static,
    {
        let call = move |c: &mut Connection, key: &SecretKey| f(c, key);
        self.queue_call(worker::job(worker::Kind::Read, call)).await
    }

    async fn queue_call<T>(
        &self,
        (job, answer): (worker::Job, tokio::sync::oneshot::Receiver<Result<T>>),
    ) -> Result<T> {
        self.queue.send(job).await.map_err(|_| Error::Stopped)?;
        answer.await.map_err(|_| Error::CallPanicked)?
    }
}
