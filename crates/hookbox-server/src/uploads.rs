//! The resumable upload protocol (spec §5.3): `PUT /upload/{v}/environments/{id}/files/{path…}`
//! opens a session and answers its URL in `X-Goog-Upload-URL`; `POST` chunks to it, the last one
//! with `X-Goog-Upload-Command: upload, finalize` (`query` answers how much arrived).
//!
//! An unfinished upload is held by whoever opened it, so every resource it takes is bounded:
//! - its bytes are spooled to an anonymous file (`O_TMPFILE`) in [`UploadOptions::spool_dir`]
//!   (`<data-dir>/uploads`), never in memory, and vanish with the session or the process;
//! - a file is at most [`MAX_UPLOAD_BYTES`] and at most the project's
//!   `disk_bytes_per_environment` (it could never fit the environment's disk);
//! - a project has at most [`UploadOptions::sessions_per_project`] unfinished sessions and
//!   [`UploadOptions::bytes_per_project`] spooled bytes, so one project cannot take another's
//!   room, and all projects together at most [`UploadOptions::budget_bytes`];
//! - a session untouched for [`UploadOptions::idle_timeout`] is dropped with its spool (checked
//!   on every upload request and by [`run_sweeper`]).
//!
//! Finalizing copies the spool into the environment's tree through the provider's path-safe,
//! atomic write (inside the environment's own disk cap). Among replicas a session's id names
//! the replica that holds it, and its chunks are forwarded there (`cluster`).

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hookbox_protocol::api::ListFilesResponse;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::{AppState, Project, new_id};

/// Largest file accepted by upload.
pub const MAX_UPLOAD_BYTES: u64 = 1024 * 1024 * 1024;

/// Default of [`UploadOptions::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(900);
/// Default of [`UploadOptions::sessions_per_project`].
pub const DEFAULT_SESSIONS_PER_PROJECT: usize = 16;
/// Default of [`UploadOptions::bytes_per_project`] (2 GiB).
pub const DEFAULT_BYTES_PER_PROJECT: u64 = 2 << 30;
/// Default of [`UploadOptions::budget_bytes`] (8 GiB).
pub const DEFAULT_BUDGET_BYTES: u64 = 8 << 30;

/// What a refusal for want of room tells the client to wait (sessions finish or expire).
const ROOM_RETRY_AFTER_SECS: u32 = 30;

/// The operator's bounds on unfinished uploads (`hookbox serve --upload-*`).
#[derive(Debug, Clone)]
pub struct UploadOptions {
    /// Where spools are created (anonymous files: nothing is left there after a crash).
    pub spool_dir: PathBuf,
    /// A session untouched this long is dropped with its spool.
    pub idle_timeout: Duration,
    /// Unfinished sessions one project may hold.
    pub sessions_per_project: usize,
    /// Bytes one project's unfinished sessions may spool together.
    pub bytes_per_project: u64,
    /// Bytes all unfinished sessions may spool together.
    pub budget_bytes: u64,
}

impl Default for UploadOptions {
    fn default() -> Self {
        UploadOptions {
            spool_dir: std::env::temp_dir(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            sessions_per_project: DEFAULT_SESSIONS_PER_PROJECT,
            bytes_per_project: DEFAULT_BYTES_PER_PROJECT,
            budget_bytes: DEFAULT_BUDGET_BYTES,
        }
    }
}

/// The server's unfinished uploads.
#[derive(Debug)]
pub(crate) struct Uploads {
    options: UploadOptions,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

/// One unfinished upload.
#[derive(Debug)]
struct Session {
    /// The project that opened the session; only it may send chunks.
    project: Project,
    env: String,
    path: String,
    overwrite: bool,
    /// The project's disk cap per environment when the session opened (`0`: none).
    disk_cap: u64,
    /// Bytes counted against the budgets: what was received and what is being written.
    reserved: AtomicU64,
    touched: Mutex<Instant>,
    /// `None` once finished or expired. Held while a chunk is written.
    spool: tokio::sync::Mutex<Option<Spool>>,
}

#[derive(Debug)]
struct Spool {
    file: std::fs::File,
    received: u64,
}

impl Session {
    fn touch(&self) {
        if let Ok(mut t) = self.touched.lock() {
            *t = Instant::now();
        }
    }

    fn idle_for(&self) -> Duration {
        self.touched
            .lock()
            .map(|t| t.elapsed())
            .unwrap_or(Duration::ZERO)
    }
}

impl Uploads {
    pub(crate) fn new(options: UploadOptions) -> Self {
        Uploads {
            options,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn book(&self) -> ApiResult<std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>>> {
        self.sessions
            .lock()
            .map_err(|_| ApiError::internal(&"uploads lock poisoned"))
    }

    /// Drops every session untouched for the idle timeout (one a chunk is being written to is
    /// in use, not idle), with its spool. Returns how many.
    pub(crate) fn sweep(&self) -> usize {
        let Ok(mut book) = self.sessions.lock() else {
            return 0;
        };
        let idle = self.options.idle_timeout;
        let expired: Vec<String> = book
            .iter()
            .filter(|(_, s)| s.idle_for() >= idle)
            .filter_map(|(id, s)| {
                // Taken here, so the spool goes now even if a request still holds the session.
                let mut spool = s.spool.try_lock().ok()?;
                spool.take();
                Some(id.clone())
            })
            .collect();
        for id in &expired {
            if let Some(s) = book.remove(id) {
                tracing::info!(session = %id, project = %s.project, environment_id = %s.env, idle_secs = idle.as_secs(), "unfinished upload expired; its spool is deleted");
            }
        }
        expired.len()
    }

    /// Removes `id` from the book (its bytes no longer count), if it is still `session`.
    fn forget(&self, id: &str, session: &Arc<Session>) {
        if let Ok(mut book) = self.sessions.lock()
            && book.get(id).is_some_and(|s| Arc::ptr_eq(s, session))
        {
            book.remove(id);
        }
    }

    /// Counts `len` more bytes for `session` against its project's share and the budget.
    fn reserve(&self, session: &Session, len: u64) -> ApiResult<()> {
        let book = self.book()?;
        let mut project_bytes = 0u64;
        let mut total = 0u64;
        for s in book.values() {
            let bytes = s.reserved.load(Ordering::Relaxed);
            total = total.saturating_add(bytes);
            if s.project == session.project {
                project_bytes = project_bytes.saturating_add(bytes);
            }
        }
        let o = &self.options;
        if project_bytes.saturating_add(len) > o.bytes_per_project {
            return Err(room(format!(
                "Project `{}`'s unfinished uploads hold {project_bytes} bytes; with this chunk of {len} they would pass {}, the most one project may spool at once (--upload-project-bytes). Finish or abandon other uploads, or retry later.",
                session.project, o.bytes_per_project
            )));
        }
        if total.saturating_add(len) > o.budget_bytes {
            return Err(room(format!(
                "hookbox's unfinished uploads hold {total} bytes; with this chunk of {len} they would pass {}, the most it spools at once for all projects (--upload-budget-bytes). Retry later.",
                o.budget_bytes
            )));
        }
        session.reserved.fetch_add(len, Ordering::Relaxed);
        Ok(())
    }
}

/// 429 `RESOURCE_EXHAUSTED` with `Retry-After`: no room for now.
fn room(message: String) -> ApiError {
    ApiError::new(StatusCode::TOO_MANY_REQUESTS, message).retry_after(ROOM_RETRY_AFTER_SECS)
}

fn gone(session: &str) -> ApiError {
    ApiError::not_found(format!(
        "Upload session `{session}` not found, already finished, or expired after being left untouched; start the upload again."
    ))
}

/// Drops unfinished uploads left untouched past the idle timeout (with their spools), at a
/// tenth of that timeout (at least every second, at most every minute); runs until the process
/// ends.
pub async fn run_sweeper(state: AppState) {
    let uploads = &state.inner.uploads;
    let period =
        (uploads.options.idle_timeout / 10).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        uploads.sweep();
    }
}

/// Upload-start query.
#[derive(Debug, Default, Deserialize)]
pub struct UploadQuery {
    #[serde(default)]
    overwrite: Option<String>,
    #[serde(default)]
    extract: Option<String>,
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `PUT /upload/{v}/environments/{id}/files/{path…}`: opens a resumable upload session.
pub async fn upload_start(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path((id, path)): Path<(String, String)>,
    Query(q): Query<UploadQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    crate::lifecycle::active_record(&state, &project, &id).await?;
    if matches!(q.extract.as_deref(), Some("true" | "1")) {
        return Err(ApiError::bad_request(
            "extract=true (unpacking an archive) is not supported yet; upload the files one by one.",
        ));
    }
    if header_str(&headers, "x-goog-upload-protocol") != Some("resumable")
        || header_str(&headers, "x-goog-upload-command") != Some("start")
    {
        return Err(ApiError::bad_request(
            "Upload start needs the headers X-Goog-Upload-Protocol: resumable and X-Goog-Upload-Command: start.",
        ));
    }
    let disk_cap = state
        .inner
        .quotas
        .quotas(&project)
        .await
        .disk_bytes_per_environment;
    if let Some(len) = header_str(&headers, "x-goog-upload-header-content-length")
        .and_then(|l| l.parse::<u64>().ok())
    {
        too_large(len, disk_cap)?;
    }
    let path = path.trim_start_matches('/').to_owned();
    if path.is_empty() {
        return Err(ApiError::bad_request(
            "Upload needs a file path after /files/.",
        ));
    }
    let uploads = &state.inner.uploads;
    let o = &uploads.options;
    uploads.sweep();
    // Owner-only: unfinished uploads are the environments' files (the spool's files are
    // anonymous, 0600, and the data dir 0700 too).
    let spool = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&o.spool_dir)
        .and_then(|()| tempfile::tempfile_in(&o.spool_dir))
        .map_err(|e| {
            ApiError::internal(&format!(
                "cannot create an upload spool in {}: {e}",
                o.spool_dir.display()
            ))
        })?;
    // A replica names itself in its sessions, so their chunks find it from any replica.
    let session = match &state.inner.cluster {
        Some(config) => format!("{}.{}", config.cluster.replica().id, new_id("upl")),
        None => new_id("upl"),
    };
    {
        let mut book = uploads.book()?;
        let open = book.values().filter(|s| s.project == project).count();
        if open >= o.sessions_per_project {
            return Err(room(format!(
                "Project `{project}` has {open} unfinished uploads, the most one project may hold (--upload-sessions-per-project); finish them, or wait: an upload left untouched for {} s is dropped.",
                o.idle_timeout.as_secs()
            )));
        }
        book.insert(
            session.clone(),
            Arc::new(Session {
                project,
                env: id,
                path,
                overwrite: !matches!(q.overwrite.as_deref(), Some("false" | "0")),
                disk_cap,
                reserved: AtomicU64::new(0),
                touched: Mutex::new(Instant::now()),
                spool: tokio::sync::Mutex::new(Some(Spool {
                    file: spool,
                    received: 0,
                })),
            }),
        );
    }
    let url = session_url(&headers, &session);
    let mut response = Json(Value::Object(Map::new())).into_response();
    let h = response.headers_mut();
    h.insert(
        "x-goog-upload-url",
        HeaderValue::from_str(&url).map_err(|e| ApiError::internal(&e))?,
    );
    h.insert("x-goog-upload-status", HeaderValue::from_static("active"));
    Ok(response)
}

/// Where the chunks of `session` go. The Python SDK replaces the URL's scheme and host with its
/// own base URL and keeps the path; the Java SDK posts to the URL as given. So the URL names the
/// host the client asked for (`Host`) and the scheme it used: `https` when a TLS-terminating
/// proxy in front says so (`X-Forwarded-Proto: https`, or `Forwarded: proto=https`), else
/// `http`. Neither header can send the chunks anywhere but where this client's own request says
/// it came from.
fn session_url(headers: &HeaderMap, session: &str) -> String {
    let host = header_str(headers, "host").unwrap_or("127.0.0.1");
    let forwarded_https = header_str(headers, "x-forwarded-proto")
        .and_then(|p| p.split(',').next())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
        || header_str(headers, "forwarded")
            .and_then(|f| f.split(',').next())
            .is_some_and(|first| {
                first.split(';').any(|pair| {
                    pair.trim().split_once('=').is_some_and(|(k, v)| {
                        k.trim().eq_ignore_ascii_case("proto")
                            && v.trim().trim_matches('"').eq_ignore_ascii_case("https")
                    })
                })
            });
    let scheme = if forwarded_https { "https" } else { "http" };
    format!("{scheme}://{host}/upload/v1beta/sessions/{session}")
}

/// Refuses a file of `len` bytes that could not be kept: past [`MAX_UPLOAD_BYTES`], or past the
/// environment's disk cap (`0`: none).
fn too_large(len: u64, disk_cap: u64) -> ApiResult<()> {
    if len > MAX_UPLOAD_BYTES {
        return Err(ApiError::bad_request(format!(
            "The upload is {len} bytes; hookbox accepts at most {MAX_UPLOAD_BYTES} per file."
        )));
    }
    if disk_cap > 0 && len > disk_cap {
        return Err(ApiError::bad_request(format!(
            "The upload is {len} bytes, more than the environment's disk holds ({disk_cap} bytes, disk_bytes_per_environment)."
        )));
    }
    Ok(())
}

/// `POST /upload/{v}/sessions/{session}`: one chunk (`upload`), the last one with `finalize`;
/// `query` answers how many bytes arrived without touching the session.
pub async fn upload_chunk(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let command = header_str(&headers, "x-goog-upload-command").unwrap_or("upload");
    let commands: Vec<&str> = command.split(',').map(str::trim).collect();
    let offset = header_str(&headers, "x-goog-upload-offset")
        .map(|o| {
            o.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("Invalid X-Goog-Upload-Offset `{o}`.")))
        })
        .transpose()?;
    let upload = commands.contains(&"upload");
    let finalize = commands.contains(&"finalize");
    let uploads = &state.inner.uploads;
    uploads.sweep();
    // Another project's session answers exactly like a missing one.
    let session = uploads
        .book()?
        .get(&id)
        .filter(|s| s.project == project)
        .cloned()
        .ok_or_else(|| gone(&id))?;
    if upload || finalize {
        session.touch();
    }
    let mut held = session.spool.lock().await;
    let Some(spool) = held.as_mut() else {
        return Err(gone(&id));
    };
    if upload {
        let expected = spool.received;
        if let Some(o) = offset
            && o != expected
        {
            return Err(ApiError::bad_request(format!(
                "X-Goog-Upload-Offset is {o}, but {expected} bytes have been received."
            )));
        }
        let len = body.len() as u64;
        if let Err(e) = too_large(expected.saturating_add(len), session.disk_cap) {
            held.take();
            uploads.forget(&id, &session);
            return Err(e);
        }
        uploads.reserve(&session, len)?;
        let written = match spool.file.try_clone() {
            Ok(mut file) => tokio::task::spawn_blocking(move || file.write_all(&body))
                .await
                .map_err(std::io::Error::other)
                .and_then(|r| r),
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            held.take();
            uploads.forget(&id, &session);
            if e.kind() == std::io::ErrorKind::StorageFull {
                return Err(ApiError::unavailable(
                    "hookbox's upload spool is out of disk space; start the upload again later.",
                    ROOM_RETRY_AFTER_SECS,
                ));
            }
            return Err(ApiError::internal(&format!(
                "writing an upload's spool: {e}"
            )));
        }
        spool.received = expected.saturating_add(len);
        session.touch();
    }
    let received = spool.received;
    if !finalize {
        drop(held);
        let mut response = Json(Value::Object(Map::new())).into_response();
        let h = response.headers_mut();
        h.insert("x-goog-upload-status", HeaderValue::from_static("active"));
        h.insert("x-goog-upload-size-received", HeaderValue::from(received));
        return Ok(response);
    }
    let Some(spool) = held.take() else {
        return Err(gone(&id));
    };
    drop(held);
    uploads.forget(&id, &session);
    let file = state
        .inner
        .environments
        .write_file_from(
            &session.env,
            &format!("/{}", session.path),
            spool.file,
            session.overwrite,
        )
        .await?;
    tracing::info!(environment_id = %session.env, path = %session.path, bytes = received, "file uploaded");
    let mut response = Json(ListFilesResponse {
        files: vec![file],
        next_page_token: None,
    })
    .into_response();
    response
        .headers_mut()
        .insert("x-goog-upload-status", HeaderValue::from_static("final"));
    Ok(response)
}
