//! `/environments`: create (from sources or by forking), get, list, delete, file listing and
//! download, and the resumable upload protocol (spec §5.3): `PUT /upload/{v}/…?…` opens a session
//! and answers its URL in `X-Goog-Upload-URL`; `POST` chunks to it, the last one with
//! `X-Goog-Upload-Command: upload, finalize`. Files go through the [`EnvironmentProvider`] seam;
//! metadata through the store.
//!
//! [`EnvironmentProvider`]: hookbox_agent::seams::EnvironmentProvider

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hookbox_agent::seams::EnvironmentSetup;
use hookbox_protocol::api::{
    CreateEnvironmentRequest, Environment, EnvironmentStatus, ListEnvironmentsResponse,
    ListFilesResponse,
};
use hookbox_store::{EnvironmentRecord, Page};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::{AppState, Project, new_id, parse_json, strip_resource_prefix};

/// Largest file accepted by upload.
pub const MAX_UPLOAD_BYTES: u64 = 1024 * 1024 * 1024;

/// Upload sessions open at once; more are refused (abandoned sessions hold memory).
pub const MAX_UPLOAD_SESSIONS: usize = 64;

/// An open upload session.
#[derive(Debug)]
pub struct Upload {
    /// The project that opened the session; only it may send chunks.
    project: Project,
    env: String,
    path: String,
    overwrite: bool,
    buffer: Vec<u8>,
}

/// `page_size` / `page_token` query.
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    #[serde(default)]
    pub page_size: Option<u32>,
    #[serde(default)]
    pub page_token: Option<String>,
}

impl PageQuery {
    pub fn page(&self) -> Page {
        Page {
            size: self.page_size,
            token: self.page_token.clone().filter(|t| !t.is_empty()),
        }
    }
}

/// The environment as shown to clients: `transform` header values of the network redacted (they
/// often carry a token; the egress proxy reads them from the sandbox's metadata, not from here).
fn shown(mut env: Environment) -> Environment {
    if let Some(network) = env.network.take() {
        env.network = serde_json::to_value(&network)
            .ok()
            .map(|v| hookbox_sandbox::network::redact_network(&v))
            .and_then(|v| serde_json::from_value(v).ok());
    }
    env
}

async fn with_usage(state: &AppState, env: Environment) -> Environment {
    let mut env = shown(env);
    if env.status == Some(EnvironmentStatus::Expired) {
        return env;
    }
    if let Ok(usage) = state.inner.environments.usage(&env.id).await {
        env.file_count = Some(usage.file_count);
        env.size_bytes = Some(usage.size_bytes);
    }
    env
}

/// The stored environment `id` of `project`; another project's is "not found", like a missing one.
pub(crate) async fn record(
    state: &AppState,
    project: &str,
    id: &str,
) -> ApiResult<EnvironmentRecord> {
    state
        .inner
        .store
        .get_environment(project, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Environment `{id}` not found.")))
}

/// `POST /environments`.
pub async fn create(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let req: CreateEnvironmentRequest = parse_json(&body, "environment request")?;
    crate::interactions::check_credentials(&state, &project, req.network.as_ref(), "network")
        .await?;
    let id = match req.from_environment.as_deref() {
        Some(from) => {
            if req.sources.as_ref().is_some_and(|s| !s.is_empty()) {
                return Err(ApiError::bad_request(
                    "`sources` must be empty when `from_environment` is set (a fork copies its sources).",
                ));
            }
            let from = strip_resource_prefix(from, "environments");
            let parent = crate::lifecycle::active_record(&state, &project, from).await?;
            // A fork copies the parent where it is held (its newest files may not be uploaded).
            let cluster = state.inner.cluster.as_ref();
            let forwarded = crate::cluster::forwarded(cluster, &headers)?;
            if let (Some(config), crate::cluster::Placement::There { replica, url }) = (
                cluster,
                crate::cluster::place(cluster, from, forwarded).await?,
            ) {
                return crate::cluster::forward(
                    config,
                    (&replica, &url),
                    axum::http::Method::POST,
                    &uri,
                    &headers,
                    body,
                )
                .await;
            }
            let (_creating, disk) = state.inner.quotas.create_environment(&project).await?;
            let setup = EnvironmentSetup {
                sources: Vec::new(),
                network: req
                    .network
                    .clone()
                    .or_else(|| parent.environment.network.clone()),
                env: parent.env.clone(),
                project: project.to_string(),
                disk_limit_bytes: Some(disk),
                // A fork keeps its parent's runtime.
                runtime: None,
            };
            let id = state.inner.environments.fork(from, &setup).await?;
            // The child starts here, where its files are.
            crate::cluster::place(cluster, &id, true).await?;
            let now = hookbox_store::time::now_rfc3339();
            let mut child = parent;
            child.environment.id.clone_from(&id);
            child.environment.created = Some(now.clone());
            child.environment.updated = Some(now.clone());
            child.environment.last_accessed = Some(now);
            child.environment.status = Some(EnvironmentStatus::Active);
            if req.network.is_some() {
                child.environment.network = req.network;
            }
            if let Err(e) = state.inner.store.put_environment(&project, &child).await {
                let _ = state.inner.environments.delete(&id).await;
                return Err(e.into());
            }
            id
        }
        None => {
            let id = crate::interactions::create_environment(
                &state,
                &project,
                EnvironmentSetup {
                    sources: req.sources.unwrap_or_default(),
                    network: req.network,
                    ..EnvironmentSetup::default()
                },
            )
            .await?;
            // A new environment is this replica's from the start: its files are only here.
            crate::cluster::place(state.inner.cluster.as_ref(), &id, true).await?;
            id
        }
    };
    let env = record(&state, &project, &id).await?.environment;
    Ok(Json(with_usage(&state, env).await).into_response())
}

/// `GET /environments/{id}`.
pub async fn get(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Environment>> {
    let env = record(&state, &project, &id).await?.environment;
    Ok(Json(with_usage(&state, env).await))
}

/// `GET /environments`.
pub async fn list(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<ListEnvironmentsResponse>> {
    let page = state
        .inner
        .store
        .list_environments(&project, &q.page())
        .await?;
    Ok(Json(ListEnvironmentsResponse {
        environments: page
            .items
            .into_iter()
            .map(|r| shown(r.environment))
            .collect(),
        next_page_token: page.next_page_token,
    }))
}

/// `DELETE /environments/{id}`.
pub async fn delete(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    record(&state, &project, &id).await?;
    match state.inner.environments.delete(&id).await {
        Ok(()) | Err(hookbox_agent::seams::ProviderError::EnvironmentNotFound(_)) => {}
        Err(e) => return Err(e.into()),
    }
    state.inner.store.delete_environment(&project, &id).await?;
    Ok(Json(Value::Object(Map::new())))
}

/// `GET /environments/{id}/hooks` (hookbox extension): the `hooks check` report of the
/// environment's hooks files.
pub async fn hooks(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    crate::lifecycle::active_record(&state, &project, &id).await?;
    Ok(Json(state.inner.environments.hooks_report(&id).await?))
}

/// Query of file listing and download.
#[derive(Debug, Default, Deserialize)]
pub struct FilesQuery {
    #[serde(default)]
    alt: Option<String>,
    #[serde(default)]
    recursive: Option<String>,
    #[serde(default)]
    page_size: Option<usize>,
    #[serde(default)]
    page_token: Option<String>,
}

/// `GET /environments/{id}/files` (the root).
pub async fn files_root(
    state: State<AppState>,
    project: Extension<Project>,
    Path(id): Path<String>,
    q: Query<FilesQuery>,
) -> ApiResult<Response> {
    files_at(state, project, id, String::new(), q).await
}

/// `GET /environments/{id}/files/{path…}`: listing, or the raw bytes with `alt=media`.
pub async fn files(
    state: State<AppState>,
    project: Extension<Project>,
    Path((id, path)): Path<(String, String)>,
    q: Query<FilesQuery>,
) -> ApiResult<Response> {
    files_at(state, project, id, path, q).await
}

async fn files_at(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    id: String,
    path: String,
    Query(q): Query<FilesQuery>,
) -> ApiResult<Response> {
    crate::lifecycle::active_record(&state, &project, &id).await?;
    let sandbox_path = format!("/{}", path.trim_start_matches('/'));
    if q.alt.as_deref() == Some("media") {
        let bytes = state
            .inner
            .environments
            .read_file(&id, &sandbox_path)
            .await?;
        return Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/octet-stream")],
            bytes,
        )
            .into_response());
    }
    let recursive = matches!(q.recursive.as_deref(), Some("true" | "1"));
    let all = state
        .inner
        .environments
        .list_files(&id, &sandbox_path, recursive)
        .await?;
    let start = match q.page_token.as_deref().filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => t
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request(format!("Invalid page_token `{t}`.")))?,
    };
    let size = q.page_size.filter(|s| *s > 0).unwrap_or(1000).min(10_000);
    let end = start.saturating_add(size).min(all.len());
    let files = all.get(start..end).map(<[_]>::to_vec).unwrap_or_default();
    let next_page_token = (end < all.len()).then(|| end.to_string());
    Ok(Json(ListFilesResponse {
        files,
        next_page_token,
    })
    .into_response())
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
    if let Some(len) = header_str(&headers, "x-goog-upload-header-content-length")
        .and_then(|l| l.parse::<u64>().ok())
        && len > MAX_UPLOAD_BYTES
    {
        return Err(ApiError::bad_request(format!(
            "The file is {len} bytes; hookbox accepts at most {MAX_UPLOAD_BYTES}."
        )));
    }
    let path = path.trim_start_matches('/').to_owned();
    if path.is_empty() {
        return Err(ApiError::bad_request(
            "Upload needs a file path after /files/.",
        ));
    }
    // A replica names itself in its sessions, so their chunks find it from any replica.
    let session = match &state.inner.cluster {
        Some(config) => format!("{}.{}", config.cluster.replica().id, new_id("upl")),
        None => new_id("upl"),
    };
    let mut uploads = state
        .inner
        .uploads
        .lock()
        .map_err(|_| ApiError::internal(&"uploads lock poisoned"))?;
    if uploads.len() >= MAX_UPLOAD_SESSIONS {
        return Err(ApiError::bad_request(format!(
            "Too many unfinished uploads ({MAX_UPLOAD_SESSIONS}); finish or retry later."
        )));
    }
    uploads.insert(
        session.clone(),
        Upload {
            project,
            env: id,
            path,
            overwrite: !matches!(q.overwrite.as_deref(), Some("false" | "0")),
            buffer: Vec::new(),
        },
    );
    drop(uploads);
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

/// `POST /upload/{v}/sessions/{session}`: one chunk; the last one finalizes.
pub async fn upload_chunk(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(session): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let command = header_str(&headers, "x-goog-upload-command").unwrap_or("upload");
    let commands: Vec<&str> = command.split(',').map(str::trim).collect();
    let offset = header_str(&headers, "x-goog-upload-offset")
        .map(|o| {
            o.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("Invalid X-Goog-Upload-Offset `{o}`.")))
        })
        .transpose()?;
    let finalize = commands.contains(&"finalize");
    let done = {
        let mut uploads = state
            .inner
            .uploads
            .lock()
            .map_err(|_| ApiError::internal(&"uploads lock poisoned"))?;
        // Another project's session answers exactly like a missing one.
        let upload = uploads
            .get_mut(&session)
            .filter(|u| u.project == project)
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "Upload session `{session}` not found or already finished."
                ))
            })?;
        if commands.contains(&"upload") {
            let expected = upload.buffer.len();
            if let Some(o) = offset
                && o != expected
            {
                return Err(ApiError::bad_request(format!(
                    "X-Goog-Upload-Offset is {o}, but {expected} bytes have been received."
                )));
            }
            if (expected + body.len()) as u64 > MAX_UPLOAD_BYTES {
                uploads.remove(&session);
                return Err(ApiError::bad_request(format!(
                    "The upload exceeds {MAX_UPLOAD_BYTES} bytes."
                )));
            }
            upload.buffer.extend_from_slice(&body);
        }
        if finalize {
            uploads.remove(&session)
        } else {
            None
        }
    };
    let Some(upload) = done else {
        let mut response = Json(Value::Object(Map::new())).into_response();
        response
            .headers_mut()
            .insert("x-goog-upload-status", HeaderValue::from_static("active"));
        return Ok(response);
    };
    let file = state
        .inner
        .environments
        .write_file(
            &upload.env,
            &format!("/{}", upload.path),
            &upload.buffer,
            upload.overwrite,
        )
        .await?;
    tracing::info!(environment_id = %upload.env, path = %upload.path, bytes = upload.buffer.len(), "file uploaded");
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
