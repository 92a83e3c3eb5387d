//! The store thread: the one thread that owns SQLite's connection and runs every call of a
//! [`SqliteStore`](super::SqliteStore), fed by a bounded queue; each caller awaits a oneshot
//! answer.
//!
//! - One wake-up per call and no lock handed between threads: callers queue a boxed call
//!   ([`Job`]) and the thread, when it finds several queued, runs them back to back without
//!   sleeping.
//! - Back-pressure: the queue holds at most [`QUEUE`] calls; a caller beyond that waits for a
//!   place (asynchronously) instead of the queue growing.
//! - Reads and writes: each call is queued as a [`Kind::Read`] or a [`Kind::Write`]. Of the
//!   calls found queued together, the reads run first (any order of calls that were all
//!   waiting at once is one they could have had), as one deferred transaction, each in a
//!   savepoint: under WAL a read never takes or waits for the write lock, so reads are
//!   answered even while another process (a `hookbox` CLI command) holds a write transaction
//!   on the same file. A "read" that changed a row anyway (SQLite's change counter moved) is
//!   rolled back to its savepoint and answered with an error. (Not `PRAGMA query_only`:
//!   switching it expires every prepared statement of the connection.) Then the writes run;
//!   reads queued behind a write that waits for the lock wait with it.
//! - Group commit: the writes found queued together (at most [`MAX_GROUP`] calls in all) run in
//!   one `BEGIN IMMEDIATE` transaction, each in a savepoint of its own: a call that fails (or
//!   panics) rolls back its own savepoint only and is answered with its error; the transaction
//!   commits once (with its fsync under `synchronous=FULL`), and only then are the callers
//!   answered, so no caller learns of a success that a rollback later undoes. If the
//!   transaction itself does not survive (its commit fails, SQLite rolled it back on an I/O
//!   error), every call of it that had succeeded is answered with that error instead. A lone
//!   write runs as before, on the connection in autocommit mode (a lone read still runs in its
//!   deferred transaction and savepoint, so that one that writes can be undone).
//! - A grouped call cannot end the group's transaction: while it runs, an authorizer refuses
//!   (when the statement is prepared) `BEGIN`, `COMMIT`, `ROLLBACK` and the release or rollback
//!   of the worker's savepoint, so such a statement fails that call only (its savepoint is
//!   rolled back, the others commit). A call that still ends the transaction (a statement it
//!   prepared and cached outside a group) is caught after it returns: the group's calls are
//!   then answered with [`Error::Undone`] (their outcome is unknown to the thread).
//! - A call that panics is answered with [`Error::CallPanicked`] (its oneshot is dropped as the
//!   panic unwinds; the thread catches it); any transaction it left open is rolled back, and
//!   the thread goes on serving the others.
//! - The thread ends when the last handle drops (the queue closes); the last handle's drop
//!   waits for it, so the connection is closed (and the WAL checkpointed) when it returns.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rusqlite::Connection;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use tokio::sync::{mpsc, oneshot};

use crate::crypto::SecretKey;
use crate::error::{Error, Result};

/// How many calls may wait in the queue; callers beyond it wait for a place.
pub(super) const QUEUE: usize = 256;

/// At most this many queued calls share one transaction.
pub(super) const MAX_GROUP: usize = 64;

/// The savepoint each grouped call runs in.
const SAVEPOINT: &str = "hookbox_call";

/// The thread's own statements around a group and its calls, kept in the connection's
/// statement cache (parsed once instead of at every call, as `execute_batch` did: about a
/// dozen per interaction). Each text begins with a comment, so that it, the cache's key, is
/// never one a call prepares: a grouped call cannot take these statements, prepared while the
/// authorizer of [`guard_groups`] let them through, from the cache.
const BEGIN_DEFERRED: &str = "/* worker */ BEGIN DEFERRED";
const BEGIN_IMMEDIATE: &str = "/* worker */ BEGIN IMMEDIATE";
const COMMIT: &str = "/* worker */ COMMIT";
const SAVEPOINT_CALL: &str = "/* worker */ SAVEPOINT hookbox_call";
const RELEASE_CALL: &str = "/* worker */ RELEASE hookbox_call";

/// Runs one of the thread's own statements (above) through the statement cache.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Whether a call only reads (and may run beside another process's write transaction) or may
/// write (and takes SQLite's write lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Runs in a deferred transaction: a row it changes is rolled back and the call fails.
    Read,
    Write,
}

/// A call, as the thread runs it: it returns whether it succeeded and how to answer its caller.
type Call = Box<dyn FnOnce(&mut Connection, &SecretKey) -> Ran + Send>;

/// A queued call and its kind.
pub(super) struct Job {
    kind: Kind,
    call: Call,
}

/// A call that ran: whether it succeeded, and its answer, sent when the thread knows its
/// changes are committed (or rolled back).
pub(super) struct Ran {
    ok: bool,
    answer: Answer,
}

/// Sends a call's result to its caller; given why, when its transaction was rolled back.
type Answer = Box<dyn FnOnce(Option<&Undone>) + Send>;

/// Why the calls of a transaction that did not commit were undone.
pub(super) enum Undone {
    Sqlite(rusqlite::ffi::Error, Option<String>),
    Other(String),
}

impl Undone {
    fn of(e: rusqlite::Error) -> Self {
        match e {
            rusqlite::Error::SqliteFailure(code, message) => Undone::Sqlite(code, message),
            other => Undone::Other(other.to_string()),
        }
    }

    /// The error a caller whose success was undone gets: SQLite's own error when there is one
    /// (so [`Error::is_unavailable`] still sees a busy database), else [`Error::Undone`].
    fn error(&self) -> Error {
        match self {
            Undone::Sqlite(code, message) => {
                Error::Sqlite(rusqlite::Error::SqliteFailure(*code, message.clone()))
            }
            Undone::Other(message) => Error::Undone(message.clone()),
        }
    }
}

/// `f` as a [`Job`] of `kind`, and the receiver of its answer.
pub(super) fn job<T, F>(kind: Kind, f: F) -> (Job, oneshot::Receiver<Result<T>>)
where
    T: Send + 'static,
    F: FnOnce(&mut Connection, &SecretKey) -> Result<T> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let call = Box::new(move |conn: &mut Connection, key: &SecretKey| {
        let result = f(conn, key);
        Ran {
            ok: result.is_ok(),
            answer: Box::new(move |undone: Option<&Undone>| {
                // Undone: whatever the call saw (another grouped call's writes included) was
                // rolled back, so its own error may rest on them too; a retry tells.
                let result = match (undone, result) {
                    (Some(undone), _) => Err(undone.error()),
                    (None, result) => result,
                };
                // A caller that stopped waiting (its request was cancelled) is no error.
                let _ = tx.send(result);
            }),
        }
    });
    (Job { kind, call }, rx)
}

/// What the thread counts (read by tests, and logged at debug level).
#[derive(Debug, Default)]
pub(super) struct Stats {
    /// Transactions that held more than one call.
    pub(super) groups: AtomicU64,
    /// Calls run in those transactions.
    pub(super) grouped_calls: AtomicU64,
    /// Those transactions that held reads only (deferred, never taking the write lock).
    pub(super) read_groups: AtomicU64,
}

/// The store thread's handle: joined when the last [`SqliteStore`](super::SqliteStore) drops.
#[derive(Debug)]
pub(super) struct Thread {
    handle: Option<std::thread::JoinHandle<()>>,
    pub(super) stats: Arc<Stats>,
}

impl Drop for Thread {
    fn drop(&mut self) {
        // Every sender is gone by now (each handle drops its sender before this), so the thread
        // finishes the calls still queued and closes the connection.
        if let Some(handle) = self.handle.take()
            && handle.thread().id() != std::thread::current().id()
            && handle.join().is_err()
        {
            tracing::error!("the SQLite store thread panicked");
        }
        tracing::debug!(
            groups = self.stats.groups.load(Ordering::Relaxed),
            grouped_calls = self.stats.grouped_calls.load(Ordering::Relaxed),
            "the SQLite store thread ended"
        );
    }
}

/// Starts the thread owning `conn` (at `path`); the sender of its queue.
pub(super) fn start(
    mut conn: Connection,
    key: SecretKey,
    path: &std::path::Path,
) -> Result<(mpsc::Sender<Job>, Thread)> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let stats = Arc::new(Stats::default());
    let counted = Arc::clone(&stats);
    let grouped = Arc::new(AtomicBool::new(false));
    guard_groups(&mut conn, Arc::clone(&grouped))?;
    let handle = std::thread::Builder::new()
        .name("hookbox-store".into())
        .spawn(move || {
            let mut thread = Worker {
                conn,
                key: &key,
                stats: &counted,
                grouped: &grouped,
            };
            thread.run(rx);
        })
        .map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
    Ok((
        tx,
        Thread {
            handle: Some(handle),
            stats,
        },
    ))
}

/// Refuses, while `grouped` is set (a grouped call runs), the statements that would end the
/// group's transaction or the call's savepoint: `BEGIN`, `COMMIT`, `ROLLBACK`, and `RELEASE` or
/// `ROLLBACK TO` of [`SAVEPOINT`]. SQLite asks when a statement is prepared, so the statement
/// fails with "not authorized" and the transaction is untouched. Set once: setting an
/// authorizer expires every prepared statement.
fn guard_groups(conn: &mut Connection, grouped: Arc<AtomicBool>) -> Result<()> {
    conn.authorizer(Some(move |ctx: AuthContext<'_>| {
        if !grouped.load(Ordering::Relaxed) {
            return Authorization::Allow;
        }
        match ctx.action {
            AuthAction::Transaction { .. } => Authorization::Deny,
            AuthAction::Savepoint { savepoint_name, .. }
                if savepoint_name.eq_ignore_ascii_case(SAVEPOINT) =>
            {
                Authorization::Deny
            }
            _ => Authorization::Allow,
        }
    }))?;
    Ok(())
}

/// The thread's state: the connection and what its calls need.
struct Worker<'a> {
    conn: Connection,
    key: &'a SecretKey,
    stats: &'a Stats,
    /// Set while a grouped call runs (read by the authorizer of [`guard_groups`]).
    grouped: &'a AtomicBool,
}

impl Worker<'_> {
    /// Waits for a call, takes whatever else is queued with it (up to [`MAX_GROUP`]), runs its
    /// reads (in one deferred transaction) then its writes (one alone, several as one group),
    /// and waits again; ends when the queue closes.
    fn run(&mut self, mut queue: mpsc::Receiver<Job>) {
        let mut reads: Vec<Job> = Vec::with_capacity(MAX_GROUP);
        let mut writes: Vec<Job> = Vec::with_capacity(MAX_GROUP);
        while let Some(first) = queue.blocking_recv() {
            let mut taken = 0;
            let mut next = Some(first);
            while let Some(job) = next {
                taken += 1;
                match job.kind {
                    Kind::Read => reads.push(job),
                    Kind::Write => writes.push(job),
                }
                next = if taken < MAX_GROUP {
                    queue.try_recv().ok()
                } else {
                    None
                };
            }
            self.serve(Kind::Read, &mut reads);
            self.serve(Kind::Write, &mut writes);
        }
    }

    /// Runs `jobs`, all of `kind`: one write alone, several writes as a group; reads always
    /// in a transaction (so one that writes can be undone).
    fn serve(&mut self, kind: Kind, jobs: &mut Vec<Job>) {
        match jobs.len() {
            0 => {}
            1 if kind == Kind::Read => self.group(kind, jobs),
            1 => {
                for job in jobs.drain(..) {
                    self.alone(job);
                }
            }
            n => {
                self.stats.groups.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .grouped_calls
                    .fetch_add(n as u64, Ordering::Relaxed);
                if kind == Kind::Read {
                    self.stats.read_groups.fetch_add(1, Ordering::Relaxed);
                }
                self.group(kind, jobs);
            }
        }
    }

    /// Runs `job` on the connection as it is (autocommit: the call's own transaction, if it
    /// opens one, commits before it returns) and answers it.
    fn alone(&mut self, job: Job) {
        let conn = &mut self.conn;
        match catch_unwind(AssertUnwindSafe(|| (job.call)(conn, self.key))) {
            // A call that returned with a transaction still open (a failed outermost `RELEASE`
            // whose rollback failed too) committed nothing: it is undone, not answered "ok", and
            // later calls do not pile into its transaction.
            Ok(ran) if !conn.is_autocommit() => {
                let undone = match conn.execute_batch("ROLLBACK") {
                    Ok(()) => {
                        Undone::Other("the call left its transaction open; rolled back".into())
                    }
                    Err(e) => Undone::of(e),
                };
                tracing::error!(error = %undone.error(), "a SQLite store call left a transaction open");
                (ran.answer)(Some(&undone));
            }
            Ok(ran) => (ran.answer)(None),
            Err(_) => {
                tracing::error!("a SQLite store call panicked; it was answered with an error");
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
            }
        }
    }

    /// Runs `jobs` in one transaction (deferred for reads, immediate for writes), each in its
    /// savepoint, commits, then answers them.
    fn group(&mut self, kind: Kind, jobs: &mut Vec<Job>) {
        let mut jobs = jobs.drain(..);
        let begin = match kind {
            Kind::Read => BEGIN_DEFERRED,
            Kind::Write => BEGIN_IMMEDIATE,
        };
        if let Err(e) = run_cached(&self.conn, begin) {
            tracing::warn!(error = %e, "could not begin a group transaction; running the calls one by one");
            for job in jobs {
                self.alone(job);
            }
            return;
        }
        let mut done: Vec<(Ran, Option<Undone>)> = Vec::with_capacity(jobs.len());
        let mut failure = None;
        let mut not_run = None;
        for job in jobs.by_ref() {
            if let Err((e, job)) = self.in_savepoint(kind, job, &mut done) {
                failure = Some(e);
                not_run = job;
                break;
            }
        }
        let failure = match failure {
            Some(e) => Some(e),
            None => run_cached(&self.conn, COMMIT).err().map(Undone::of),
        };
        match failure {
            None => {
                for (ran, own) in done {
                    (ran.answer)(own.as_ref());
                }
            }
            Some(undone) => {
                if !self.conn.is_autocommit() {
                    let _ = self.conn.execute_batch("ROLLBACK");
                }
                tracing::error!(
                    error = %undone.error(),
                    calls = done.len(),
                    "a SQLite group transaction did not commit; its calls were answered with the error"
                );
                for (ran, _) in done {
                    (ran.answer)(Some(&undone));
                }
                // What was not run yet runs on its own.
                for job in not_run.into_iter().chain(jobs) {
                    self.alone(job);
                }
            }
        }
    }

    /// Runs `job` in a savepoint of the open transaction: kept if it succeeded, rolled back if
    /// it failed or panicked, or if it is a read that changed a row; its answer (unless it
    /// panicked) goes to `done`, with its own error when it was a read that wrote. `Err` when
    /// the transaction itself did not survive (with `job`, if it did not run).
    fn in_savepoint(
        &mut self,
        kind: Kind,
        job: Job,
        done: &mut Vec<(Ran, Option<Undone>)>,
    ) -> std::result::Result<(), (Undone, Option<Job>)> {
        if let Err(e) = run_cached(&self.conn, SAVEPOINT_CALL) {
            return Err((Undone::of(e), Some(job)));
        }
        let changes = self.conn.total_changes();
        let conn = &mut self.conn;
        self.grouped.store(true, Ordering::Relaxed);
        let ran = catch_unwind(AssertUnwindSafe(|| (job.call)(conn, self.key)));
        self.grouped.store(false, Ordering::Relaxed);
        let wrote = kind == Kind::Read && self.conn.total_changes() != changes;
        let keep = match ran {
            Ok(ran) if wrote => {
                tracing::error!("a SQLite store call queued as a read changed rows; it was undone");
                let own = Undone::Other("a read call changed the database; undone".to_owned());
                done.push((ran, Some(own)));
                false
            }
            Ok(ran) => {
                let ok = ran.ok;
                done.push((ran, None));
                ok
            }
            Err(_) => {
                tracing::error!("a SQLite store call panicked; it was answered with an error");
                false
            }
        };
        // The guard let a statement end the transaction (one prepared before it was set):
        // whatever the group did is committed or rolled back, and no longer this thread's to
        // answer for as one.
        if self.conn.is_autocommit() {
            tracing::error!("a grouped SQLite store call ended the group's transaction itself");
            return Err((
                Undone::Other("a call ended the group's transaction itself".to_owned()),
                None,
            ));
        }
        let ended = match keep {
            true => run_cached(&self.conn, RELEASE_CALL),
            false => self
                .conn
                .execute_batch("ROLLBACK TO hookbox_call; RELEASE hookbox_call"),
        };
        ended.map_err(|e| (Undone::of(e), None))?;
        if self.conn.is_autocommit() {
            return Err((
                Undone::Other("SQLite rolled back the transaction".to_owned()),
                None,
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Mutex;
    use std::task::{Context, Poll};

    use hookbox_protocol::api::{Interaction, InteractionStatus, Step};
    use rusqlite::params;

    use super::super::{SqliteOptions, SqliteStore};
    use super::*;
    use crate::interactions::StatusUpdate;
    use crate::store::Store;

    const P: &str = crate::DEFAULT_PROJECT;

    fn open(dir: &std::path::Path) -> SqliteStore {
        SqliteStore::open(
            &dir.join("hookbox.db"),
            SecretKey::from_bytes([7; 32]),
            &SqliteOptions::default(),
        )
        .unwrap()
    }

    fn interaction(id: &str) -> Interaction {
        let mut i = Interaction::new(id, InteractionStatus::InProgress);
        i.created = Some("2026-05-20T10:00:00Z".into());
        i.updated = Some("2026-05-20T10:00:00Z".into());
        i.steps = vec![Step::user_text("hello")];
        i
    }

    /// A table of numbers the tests write to directly.
    async fn numbers(store: &SqliteStore) {
        store
            .with(|c, _| Ok(c.execute_batch("CREATE TABLE numbers (n INTEGER NOT NULL)")?))
            .await
            .unwrap();
    }

    /// Inserts `n` into `numbers`.
    fn insert(c: &Connection, n: i64) -> Result<()> {
        c.execute("INSERT INTO numbers (n) VALUES (?1)", params![n])?;
        Ok(())
    }

    /// How many rows of `numbers` hold `n`, read through a connection of its own (so only what
    /// is committed).
    fn committed(dir: &std::path::Path, n: i64) -> i64 {
        let conn = Connection::open(dir.join("hookbox.db")).unwrap();
        conn.query_row(
            "SELECT count(*) FROM numbers WHERE n = ?1",
            params![n],
            |r| r.get(0),
        )
        .unwrap()
    }

    /// Holds the store thread inside a call until the returned sender is used (or dropped);
    /// returns once the thread is held, so what is queued next waits in the queue.
    async fn hold(store: &SqliteStore) -> std::sync::mpsc::Sender<()> {
        let (held_tx, held_rx) = oneshot::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let store = store.clone();
        tokio::spawn(async move {
            store
                .with(move |_, _| {
                    let _ = held_tx.send(());
                    let _ = release_rx.recv();
                    Ok(())
                })
                .await
                .unwrap();
        });
        held_rx.await.unwrap();
        release_tx
    }

    type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

    /// Polls `call` once: far enough to queue it (when the queue has a place); whether it has
    /// finished. Run it under [`tokio::task::unconstrained`]: a task that used up its
    /// cooperative budget sees a queue with places as full.
    fn poll_once<T>(call: &mut Call<'_, T>) -> bool {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        matches!(call.as_mut().poll(&mut cx), Poll::Ready(_))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn many_concurrent_callers_lose_and_duplicate_no_write() {
        // More tasks than a group holds, so a full group happens.
        const TASKS: i64 = MAX_GROUP as i64 + 16;
        const ROUNDS: i64 = 10;
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(open(dir.path()));
        numbers(&store).await;
        // Every task's first call is queued while the thread is held, so at least one group
        // holds all of them; the rest race as they come.
        let release = hold(&store).await;
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let store = Arc::clone(&store);
            let task: Call<'static, ()> = Box::pin(async move {
                for r in 0..ROUNDS {
                    let n = t * ROUNDS + r;
                    store.with(move |c, _| insert(c, n)).await?;
                    let id = format!("int_{n}");
                    store.create_interaction(P, &interaction(&id)).await?;
                    store.append_step(&id, 1, &Step::model_text(&id)).await?;
                    let update = StatusUpdate {
                        status: InteractionStatus::Completed,
                        usage: None,
                        errors: vec![],
                        updated: "2026-05-20T10:00:01Z".into(),
                    };
                    store.update_status(&id, &update).await?;
                    let got = store.get_interaction(P, &id).await?.unwrap();
                    assert_eq!(got.id, id);
                    assert_eq!(got.status, InteractionStatus::Completed);
                    assert_eq!(got.steps.len(), 2, "{id}");
                    assert_eq!(
                        serde_json::to_value(&got.steps[1])?,
                        serde_json::to_value(Step::model_text(&id))?
                    );
                }
                Ok(())
            });
            tasks.push(task);
        }
        let tasks: Vec<_> = tokio::task::unconstrained(async {
            tasks
                .into_iter()
                .map(|mut task| {
                    assert!(!poll_once(&mut task));
                    tokio::spawn(task)
                })
                .collect()
        })
        .await;
        release.send(()).unwrap();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert!(store.thread.stats.groups.load(Ordering::Relaxed) >= 1);
        drop(store);

        let conn = Connection::open(dir.path().join("hookbox.db")).unwrap();
        let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(count("SELECT count(*) FROM numbers"), TASKS * ROUNDS);
        assert_eq!(
            count("SELECT count(DISTINCT n) FROM numbers"),
            TASKS * ROUNDS
        );
        assert_eq!(count("SELECT count(*) FROM interactions"), TASKS * ROUNDS);
        assert_eq!(
            count("SELECT count(*) FROM interactions WHERE status = 'completed'"),
            TASKS * ROUNDS
        );
        assert_eq!(count("SELECT count(*) FROM steps"), 2 * TASKS * ROUNDS);
    }

    #[tokio::test]
    async fn an_error_in_a_grouped_call_undoes_that_call_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        numbers(&store).await;
        let int_c = interaction("int_c");
        let release = hold(&store).await;
        let mut a: Call<'_, ()> = Box::pin(store.with(|c, _| insert(c, 1)));
        // Writes, then fails: its write must be undone, and only its.
        let mut b: Call<'_, ()> = Box::pin(store.with(|c, _| {
            insert(c, 2)?;
            Err(Error::not_found("thing", "x"))
        }));
        let mut c: Call<'_, ()> = Box::pin(store.create_interaction(P, &int_c));
        // Refused by what `c` wrote in the same transaction; opens its own savepoint.
        let mut d: Call<'_, ()> = Box::pin(store.create_interaction(P, &int_c));
        let mut e: Call<'_, ()> = Box::pin(store.with(|c, _| insert(c, 3)));
        for call in [&mut a, &mut b, &mut c, &mut d, &mut e] {
            assert!(!poll_once(call));
        }
        release.send(()).unwrap();
        a.await.unwrap();
        assert!(matches!(b.await, Err(Error::NotFound { .. })));
        c.await.unwrap();
        assert!(matches!(d.await, Err(Error::AlreadyExists { .. })));
        e.await.unwrap();
        assert_eq!(store.thread.stats.groups.load(Ordering::Relaxed), 1);
        assert_eq!(store.thread.stats.grouped_calls.load(Ordering::Relaxed), 5);
        assert_eq!(committed(dir.path(), 1), 1);
        assert_eq!(committed(dir.path(), 2), 0);
        assert_eq!(committed(dir.path(), 3), 1);
        assert!(store.get_interaction(P, "int_c").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_panicking_call_is_answered_with_an_error_and_the_store_keeps_working() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        numbers(&store).await;

        // Alone, inside a transaction it opened: answered, and its transaction rolled back.
        let alone = store.with(|c, _| -> Result<()> {
            c.execute_batch("BEGIN")?;
            insert(c, 9)?;
            panic!("a bug in a store call");
        });
        assert!(matches!(alone.await, Err(Error::CallPanicked)));
        store.with(|c, _| insert(c, 10)).await.unwrap();
        assert_eq!(committed(dir.path(), 9), 0);
        assert_eq!(committed(dir.path(), 10), 1);

        // In a group: only its own savepoint is undone.
        let release = hold(&store).await;
        let mut a: Call<'_, ()> = Box::pin(store.with(|c, _| insert(c, 11)));
        let mut p: Call<'_, ()> = Box::pin(store.with(|c, _| -> Result<()> {
            insert(c, 12)?;
            panic!("a bug in a store call");
        }));
        let mut b: Call<'_, ()> = Box::pin(store.with(|c, _| insert(c, 13)));
        for call in [&mut a, &mut p, &mut b] {
            assert!(!poll_once(call));
        }
        release.send(()).unwrap();
        a.await.unwrap();
        assert!(matches!(p.await, Err(Error::CallPanicked)));
        b.await.unwrap();
        assert_eq!(store.thread.stats.groups.load(Ordering::Relaxed), 1);
        assert_eq!(committed(dir.path(), 11), 1);
        assert_eq!(committed(dir.path(), 12), 0);
        assert_eq!(committed(dir.path(), 13), 1);
        store
            .create_interaction(P, &interaction("int_after"))
            .await
            .unwrap();
        assert_eq!(
            store.schema_version().await.unwrap(),
            super::super::SCHEMA_VERSION
        );
    }

    // Review: a lone call that returned with its transaction still open was answered "ok"
    // though nothing of it was committed, and every later call's writes went into that
    // transaction, never committed either.
    #[tokio::test]
    async fn a_call_that_leaves_its_transaction_open_is_undone_and_later_calls_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        numbers(&store).await;
        let open_ended = store.with(|c, _| -> Result<()> {
            c.execute_batch("BEGIN")?;
            insert(c, 20)
        });
        assert!(
            open_ended.await.is_err(),
            "answered ok with nothing committed"
        );
        assert_eq!(committed(dir.path(), 20), 0);
        store.with(|c, _| insert(c, 21)).await.unwrap();
        assert_eq!(committed(dir.path(), 21), 1);
    }

    /// How long a test waits for an answer that comes at once unless the store is stuck: it
    /// fails only a hung test.
    const BOUND: std::time::Duration = std::time::Duration::from_secs(60);

    /// Reads how many rows of `numbers` hold `n`, as a read call.
    fn count(c: &Connection, n: i64) -> Result<i64> {
        Ok(c.query_row(
            "SELECT count(*) FROM numbers WHERE n = ?1",
            params![n],
            |r| r.get(0),
        )?)
    }

    // Review: a group of reads ran in `BEGIN IMMEDIATE`, so it waited for the write lock (up to
    // the busy timeout) behind another process writing the file, where WAL lets reads through.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_are_answered_while_another_connection_holds_a_write_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        numbers(&store).await;
        store.with(|c, _| insert(c, 1)).await.unwrap();
        // A call that waited for the write lock would wait past the test's bound.
        store
            .with(|c, _| Ok(c.busy_timeout(std::time::Duration::from_secs(3600))?))
            .await
            .unwrap();
        let other = Connection::open(dir.path().join("hookbox.db")).unwrap();
        other
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO numbers (n) VALUES (99)")
            .unwrap();

        // Alone.
        let lone = tokio::time::timeout(BOUND, store.read(|c, _| count(c, 1))).await;
        assert_eq!(lone.expect("a lone read hung").unwrap(), 1);

        // A group of reads, and reads queued together with a write: the reads are answered
        // while the other connection still holds its write transaction; the write waits for it.
        let release = hold(&store).await;
        let mut r1: Call<'_, i64> = Box::pin(store.read(|c, _| count(c, 1)));
        let mut r2: Call<'_, i64> = Box::pin(store.read(|c, _| count(c, 99)));
        let mut w: Call<'_, ()> = Box::pin(store.with(|c, _| insert(c, 2)));
        let mut r3: Call<'_, i64> = Box::pin(async {
            let got = store.get_interaction(P, "int_x").await?;
            Ok(i64::from(got.is_some()))
        });
        for call in [&mut r1, &mut r2, &mut r3] {
            assert!(!poll_once(call));
        }
        assert!(!poll_once(&mut w));
        release.send(()).unwrap();
        for (call, expected) in [(r1, 1), (r2, 0), (r3, 0)] {
            let got = tokio::time::timeout(BOUND, call).await;
            assert_eq!(got.expect("a grouped read hung").unwrap(), expected);
        }
        assert_eq!(store.thread.stats.read_groups.load(Ordering::Relaxed), 1);
        assert!(
            !other.is_autocommit(),
            "the other writer still holds its transaction"
        );
        other.execute_batch("COMMIT").unwrap();
        tokio::time::timeout(BOUND, w)
            .await
            .expect("the write hung")
            .unwrap();
        assert_eq!(committed(dir.path(), 2), 1);
        assert_eq!(committed(dir.path(), 99), 1);
    }

    #[tokio::test]
    async fn a_read_call_that_writes_fails_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        numbers(&store).await;
        assert!(store.read(|c, _| insert(c, 30)).await.is_err());
        let release = hold(&store).await;
        let mut a: Call<'_, i64> = Box::pin(store.read(|c, _| count(c, 30)));
        let mut b: Call<'_, ()> = Box::pin(store.read(|c, _| insert(c, 31)));
        assert!(!poll_once(&mut a));
        assert!(!poll_once(&mut b));
        release.send(()).unwrap();
        assert_eq!(a.await.unwrap(), 0);
        assert!(b.await.is_err());
        assert_eq!(store.thread.stats.read_groups.load(Ordering::Relaxed), 1);
        // Writes work again after reads.
        store.with(|c, _| insert(c, 32)).await.unwrap();
        assert_eq!(committed(dir.path(), 30), 0);
        assert_eq!(committed(dir.path(), 31), 0);
        assert_eq!(committed(dir.path(), 32), 1);
    }

    // Review: reads ran under `PRAGMA query_only`, switched on and off per batch; switching a
    // flag pragma expires every prepared statement, so each batch with a read made every cached
    // statement of the store compile again.
    #[tokio::test]
    async fn reads_do_not_expire_the_cached_statements() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        numbers(&store).await;
        const SQL: &str = "SELECT count(*) FROM numbers WHERE n = ?1";
        let reprepared = |c: &Connection| -> Result<i32> {
            let mut statement = c.prepare_cached(SQL)?;
            let _: i64 = statement.query_row(params![1], |r| r.get(0))?;
            Ok(statement.get_status(rusqlite::StatementStatus::RePrepare))
        };
        assert_eq!(store.with(move |c, _| reprepared(c)).await.unwrap(), 0);
        for n in 0..3 {
            store.read(move |c, _| count(c, n)).await.unwrap();
            store.with(move |c, _| insert(c, n)).await.unwrap();
        }
        assert_eq!(store.with(move |c, _| reprepared(c)).await.unwrap(), 0);
    }

    // Issue 35: SQLite recompiled the steps' `ORDER BY idx` read at every read of an
    // interaction (a new value bound to its key's first column), and `execute_batch` parsed
    // the thread's transaction statements at every call.
    #[tokio::test]
    async fn reading_interactions_and_grouping_calls_compile_no_statement_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for id in ["int_a", "int_b", "int_c"] {
            store.create_interaction(P, &interaction(id)).await.unwrap();
            store
                .append_step(id, 1, &Step::model_text(id))
                .await
                .unwrap();
        }
        for id in ["int_a", "int_b", "int_c", "int_a"] {
            let got = store.get_interaction(P, id).await.unwrap().unwrap();
            assert_eq!(
                got.steps,
                vec![Step::user_text("hello"), Step::model_text(id)]
            );
        }
        let steps = super::super::interactions::STEPS;
        let (reprepared, runs) = compiled_and_run(&store, steps).await;
        assert_eq!((reprepared, runs), (0, 4), "the steps' read");
        // The thread's own statements ran from the cache: the savepoint once per read (each ran
        // alone, in a deferred transaction and its savepoint; the writes ran in autocommit).
        let (reprepared, runs) = compiled_and_run(&store, SAVEPOINT_CALL).await;
        assert_eq!((reprepared, runs), (0, 4), "the thread's savepoint");
    }

    /// How often the cached statement `sql` was compiled again, and how often it ran.
    async fn compiled_and_run(store: &SqliteStore, sql: &'static str) -> (i32, i32) {
        store
            .with(move |c, _| {
                let statement = c.prepare_cached(sql)?;
                Ok((
                    statement.get_status(rusqlite::StatementStatus::RePrepare),
                    statement.get_status(rusqlite::StatementStatus::Run),
                ))
            })
            .await
            .unwrap()
    }

    // Issue 35: the webhooks an interaction's status change may go to were read with
    // `(?2 IS NULL OR id = ?2)`, which SQLite compiled again at every status change.
    #[tokio::test]
    async fn an_interactions_status_change_compiles_no_statement_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for id in ["int_a", "int_b", "int_c"] {
            store.create_interaction(P, &interaction(id)).await.unwrap();
            let update = StatusUpdate {
                status: InteractionStatus::Completed,
                usage: None,
                errors: vec![],
                updated: "2026-05-20T10:00:01Z".into(),
            };
            store.update_status(id, &update).await.unwrap();
        }
        let sql = super::super::webhooks::WEBHOOKS_OF_PROJECT;
        let (reprepared, runs) = compiled_and_run(&store, sql).await;
        assert_eq!((reprepared, runs), (0, 3), "the webhooks' read");
    }

    // Review: only convention kept a grouped call from running `COMMIT` (or `ROLLBACK`) itself,
    // which committed (or undid) the calls before it and broke the group's answers.
    #[tokio::test]
    async fn a_grouped_call_cannot_end_the_groups_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        numbers(&store).await;
        let release = hold(&store).await;
        let mut a: Call<'_, ()> = Box::pin(store.with(|c, _| insert(c, 40)));
        let mut b: Call<'_, ()> = Box::pin(store.with(|c, _| {
            insert(c, 41)?;
            Ok(c.execute_batch("COMMIT")?)
        }));
        let mut c: Call<'_, ()> = Box::pin(store.with(|c, _| insert(c, 42)));
        let mut d: Call<'_, ()> = Box::pin(store.with(|c, _| {
            insert(c, 43)?;
            Ok(c.execute_batch("ROLLBACK")?)
        }));
        let mut e: Call<'_, ()> = Box::pin(store.with(|c, _| {
            insert(c, 44)?;
            Ok(c.execute_batch("RELEASE hookbox_call")?)
        }));
        let mut f: Call<'_, ()> = Box::pin(store.with(|c, _| insert(c, 45)));
        for call in [&mut a, &mut b, &mut c, &mut d, &mut e, &mut f] {
            assert!(!poll_once(call));
        }
        release.send(()).unwrap();
        a.await.unwrap();
        assert!(b.await.is_err(), "a grouped COMMIT was allowed");
        c.await.unwrap();
        assert!(d.await.is_err(), "a grouped ROLLBACK was allowed");
        assert!(
            e.await.is_err(),
            "a grouped release of the call's savepoint was allowed"
        );
        f.await.unwrap();
        assert_eq!(store.thread.stats.groups.load(Ordering::Relaxed), 1);
        for (n, expected) in [(40, 1), (41, 0), (42, 1), (43, 0), (44, 0), (45, 1)] {
            assert_eq!(committed(dir.path(), n), expected, "{n}");
        }
        // Alone, a call may still run its own transaction.
        store
            .with(|c, _| {
                c.execute_batch("BEGIN")?;
                insert(c, 46)?;
                Ok(c.execute_batch("COMMIT")?)
            })
            .await
            .unwrap();
        assert_eq!(committed(dir.path(), 46), 1);
    }

    #[tokio::test]
    async fn the_queue_holds_at_most_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let ran = Arc::new(Mutex::new(Vec::new()));
        let release = hold(&store).await;
        let record = |i: usize| {
            let ran = Arc::clone(&ran);
            move |_: &mut Connection, _: &SecretKey| {
                ran.lock().unwrap().push(i);
                Ok(())
            }
        };
        let mut calls: Vec<Call<'_, ()>> = (0..=QUEUE)
            .map(|i| Box::pin(store.with(record(i))) as Call<'_, ()>)
            .collect();
        tokio::task::unconstrained(async {
            for call in &mut calls {
                assert!(!poll_once(call));
            }
        })
        .await;
        let extra = calls.pop().unwrap();
        release.send(()).unwrap();
        for call in calls {
            call.await.unwrap();
        }
        // The extra call never got a place (it was not polled again): dropping it drops it. Had
        // the queue taken it, it would run before the next call.
        drop(extra);
        store.with(record(usize::MAX)).await.unwrap();
        let ran = ran.lock().unwrap().clone();
        assert!(
            !ran.contains(&QUEUE),
            "the call beyond the bound was queued"
        );
        let expected: Vec<usize> = (0..QUEUE).chain([usize::MAX]).collect();
        assert_eq!(ran, expected);
    }

    #[tokio::test]
    async fn the_thread_ends_and_closes_the_database_when_the_last_handle_drops() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let clone = store.clone();
        drop(store);
        clone
            .create_interaction(P, &interaction("int_1"))
            .await
            .unwrap();
        let wal = dir.path().join("hookbox.db-wal");
        assert!(wal.exists());
        drop(clone);
        // The last connection's close checkpoints the WAL into the file and deletes it.
        assert!(!wal.exists());
        let reopened = open(dir.path());
        assert!(
            reopened
                .get_interaction(P, "int_1")
                .await
                .unwrap()
                .is_some()
        );
    }
}
