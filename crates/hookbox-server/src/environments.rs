//! `/environments`: create (from sources or by forking), get, list, delete, file listing and
//! download (uploads: [`crate::uploads`]). Files go through the [`EnvironmentProvider`] seam;
//! metadata through the store. [`create_environment`] (within the project's quota and disk
//! cap, on its runtime) and [`check_credentials`] (a `network` names only credentials the
//! project has) serve interactions' environment specs too.
//!
//! [`EnvironmentProvider`]: hookbox_agent::seams::EnvironmentProvider

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
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
use crate::holder::{self, Needs, Received, Routed};
use crate::{AppState, Project, parse_json, strip_resource_prefix};

/// Longest environment `system_instruction` kept (it is sent with every model turn).
pub(crate) const MAX_SYSTEM_INSTRUCTION_BYTES: usize = 32 * 1024;
/// Largest `custom_config`, as JSON.
pub(crate) const MAX_CUSTOM_CONFIG_BYTES: usize = 64 * 1024;

/// The modes fields of a create request (`environments.create`, or an interaction's embedded
/// environment at `at`), checked: `mode` must be `on_demand` (the default); `self_hosted` is
/// refused until remote runners exist (never quietly run on demand); `custom_config` and
/// `system_instruction` are bounded.
pub(crate) fn check_mode_fields(
    mode: Option<&str>,
    custom_config: Option<&Map<String, Value>>,
    system_instruction: Option<&str>,
    at: &str,
) -> ApiResult<()> {
    use hookbox_protocol::api::EnvironmentMode;
    match mode {
        None | Some(EnvironmentMode::ON_DEMAND) => {}
        Some(EnvironmentMode::SELF_HOSTED) => {
            return Err(ApiError::bad_request(format!(
                "`{at}mode` is `self_hosted`, but hookbox has no remote runners yet: every environment runs on this server. Leave `mode` out or use `on_demand`."
            )));
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Unknown `{at}mode` `{other}`: hookbox serves `on_demand` (`self_hosted` needs remote runners, which do not exist yet)."
            )));
        }
    }
    if let Some(config) = custom_config {
        let size = serde_json::to_vec(config).map_or(usize::MAX, |v| v.len());
        if size > MAX_CUSTOM_CONFIG_BYTES {
            return Err(ApiError::bad_request(format!(
                "`{at}custom_config` is {size} bytes of JSON; at most {MAX_CUSTOM_CONFIG_BYTES} are kept."
            )));
        }
    }
    if let Some(text) = system_instruction
        && text.len() > MAX_SYSTEM_INSTRUCTION_BYTES
    {
        return Err(ApiError::bad_request(format!(
            "`{at}system_instruction` is {} bytes; at most {MAX_SYSTEM_INSTRUCTION_BYTES} are kept.",
            text.len()
        )));
    }
    Ok(())
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
    env.network = shown_network(env.network.take());
    env
}

/// A `network` as clients are shown it, wherever an environment spec is echoed (environments,
/// triggers, agents): every `transform` header value redacted by the one function that does it
/// ([`hookbox_environments::network::redact_network`]).
pub(crate) fn shown_network(
    network: Option<hookbox_protocol::api::Network>,
) -> Option<hookbox_protocol::api::Network> {
    let network = network?;
    serde_json::to_value(&network)
        .ok()
        .map(|v| hookbox_environments::network::redact_network(&v))
        .and_then(|v| serde_json::from_value(v).ok())
}

/// An environment spec kept as JSON (a trigger's `interaction.environment`) as clients are
/// shown it: its `network` as [`shown_network`] shows it. An id or anything else is kept.
pub(crate) fn redact_environment_value(environment: &mut Value) {
    if let Some(network) = environment.get_mut("network") {
        *network = hookbox_environments::network::redact_network(network);
    }
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

/// Refuses a `network` whose allowlist names a credential `project` does not have (or has
/// revoked), naming the field (`at`: where `network` is in the request): otherwise the sandbox
/// would only ever see its tunnel refused.
pub(crate) async fn check_credentials(
    state: &AppState,
    project: &Project,
    network: Option<&hookbox_protocol::api::Network>,
    at: &str,
) -> ApiResult<()> {
    use hookbox_protocol::api::{Allowlist, CredentialStatus, Network};
    let Some(Network::Rules {
        allowlist: Allowlist::Entries(entries),
    }) = network
    else {
        return Ok(());
    };
    for (i, entry) in entries.iter().enumerate() {
        let Some(id) = entry.credential.as_deref() else {
            continue;
        };
        let problem = match state.inner.store.get_credential(project, id).await? {
            None => "which this project does not have",
            Some(c) if c.status == CredentialStatus::Revoked => "which is revoked",
            Some(_) => continue,
        };
        return Err(ApiError::bad_request(format!(
            "`{at}.allowlist[{i}].credential` names credential `{id}` (for `{}`), {problem}. Create it first (POST /v1beta/credentials, or `hookbox credential create {id} --project {project}`).",
            entry.domain
        )));
    }
    Ok(())
}

/// Sets the mode fields of a new (or forked) environment: `on_demand` (the only mode served),
/// and the `custom_config` and `system_instruction` given (a fork keeps its parent's unless
/// given new ones). Checked first by [`check_mode_fields`].
fn set_mode_fields(
    env: &mut Environment,
    custom_config: Option<Map<String, Value>>,
    system_instruction: Option<String>,
) {
    env.mode = Some(hookbox_protocol::api::EnvironmentMode::ON_DEMAND.to_owned());
    if custom_config.is_some() {
        env.custom_config = custom_config;
    }
    if system_instruction.is_some() {
        env.system_instruction = system_instruction;
    }
    // Only a self-hosted runner has a key, and there are none.
    env.environment_key = None;
}

/// Materialises and records a new environment of `project`, within its `environments` quota and
/// with its disk cap, with its mode fields ([`check_mode_fields`] checked them).
pub(crate) async fn create_environment(
    state: &AppState,
    project: &Project,
    mut setup: EnvironmentSetup,
    custom_config: Option<Map<String, Value>>,
    system_instruction: Option<String>,
) -> ApiResult<String> {
    let (_creating, disk) = state.inner.quotas.create_environment(project).await?;
    setup.project = project.to_string();
    setup.disk_limit_bytes = Some(disk);
    setup.runtime = state
        .inner
        .quotas
        .runtime(project)
        .map(|r| r.name().to_owned());
    let id = state.inner.environments.create(&setup).await?;
    let now = hookbox_store::time::now_rfc3339();
    let mut record = EnvironmentRecord {
        environment: hookbox_protocol::api::Environment {
            id: id.clone(),
            status: Some(EnvironmentStatus::Active),
            created: Some(now.clone()),
            updated: Some(now.clone()),
            last_accessed: Some(now),
            file_count: None,
            size_bytes: None,
            sources: (!setup.sources.is_empty()).then_some(setup.sources),
            network: setup.network,
            ..Environment::default()
        },
        env: setup.env,
    };
    set_mode_fields(&mut record.environment, custom_config, system_instruction);
    if let Err(e) = state.inner.store.put_environment(project, &record).await {
        let _ = state.inner.environments.delete(&id).await;
        return Err(e.into());
    }
    Ok(id)
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
    check_mode_fields(
        req.mode.as_deref(),
        req.custom_config.as_ref(),
        req.system_instruction.as_deref(),
        "",
    )?;
    check_credentials(&state, &project, req.network.as_ref(), "network").await?;
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
            let received = Received::new(&state, Method::POST, &uri, &headers, body)?;
            if let Routed::There(answer) =
                holder::to_holder(&state, Needs::Environment(from), received).await?
            {
                return Ok(answer);
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
            holder::take_new(&state, &id).await?;
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
            set_mode_fields(
                &mut child.environment,
                req.custom_config,
                req.system_instruction,
            );
            if let Err(e) = state.inner.store.put_environment(&project, &child).await {
                let _ = state.inner.environments.delete(&id).await;
                return Err(e.into());
            }
            id
        }
        None => {
            let id = create_environment(
                &state,
                &project,
                EnvironmentSetup {
                    sources: req.sources.unwrap_or_default(),
                    network: req.network,
                    ..EnvironmentSetup::default()
                },
                req.custom_config,
                req.system_instruction,
            )
            .await?;
            // A new environment is this replica's from the start: its files are only here.
            holder::take_new(&state, &id).await?;
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

/// `GET /environments` query: a page, and `mode` to list only that mode's environments.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    pub page_size: Option<u32>,
    #[serde(default)]
    pub page_token: Option<String>,
    #[serde(default)]
    pub mode: Option<String>,
}

/// `GET /environments[?mode=]`.
pub async fn list(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<ListEnvironmentsResponse>> {
    // Any mode string filters (an unknown one lists nothing), as the SDK's enum is open.
    let mode = q.mode.as_deref().filter(|m| !m.is_empty());
    let page = state
        .inner
        .store
        .list_environments(
            &project,
            mode,
            &Page {
                size: q.page_size,
                token: q.page_token.clone().filter(|t| !t.is_empty()),
            },
        )
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

/// `Content-Disposition: attachment` naming the last part of `path`: an ASCII `filename` (other
/// characters, quotes and backslashes as `_`) and the exact name as RFC 5987 `filename*`.
fn attachment(path: &str) -> header::HeaderValue {
    let name = path.rsplit('/').next().unwrap_or_default();
    let ascii: String = name
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut exact = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            exact.push(char::from(b));
        } else {
            exact.push_str(&format!("%{b:02X}"));
        }
    }
    header::HeaderValue::from_str(&format!(
        "attachment; filename=\"{ascii}\"; filename*=UTF-8''{exact}"
    ))
    .unwrap_or_else(|_| header::HeaderValue::from_static("attachment"))
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
        // Bytes from the sandbox, never a page: a download under the file's name, whatever a
        // browser would sniff (the console's Download; a link to it only ever downloads).
        return Ok((
            StatusCode::OK,
            [
                (
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static("application/octet-stream"),
                ),
                (header::CONTENT_DISPOSITION, attachment(&sandbox_path)),
                (
                    header::X_CONTENT_TYPE_OPTIONS,
                    header::HeaderValue::from_static("nosniff"),
                ),
            ],
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

#[cfg(test)]
mod tests {
    use super::attachment;

    #[test]
    fn a_download_is_an_attachment_named_after_the_file() {
        assert_eq!(
            attachment("/workspace/notes.txt"),
            "attachment; filename=\"notes.txt\"; filename*=UTF-8''notes.txt"
        );
        // Quotes, line breaks and non-ASCII cannot break out of the header or the name.
        assert_eq!(
            attachment("/workspace/a\"b\r\nX-Evil: 1 é.txt"),
            "attachment; filename=\"a_b__X-Evil: 1 _.txt\"; filename*=UTF-8''a%22b%0D%0AX-Evil%3A%201%20%C3%A9.txt"
        );
    }
}
