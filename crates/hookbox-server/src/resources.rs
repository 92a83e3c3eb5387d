//! `/credentials` (create, get, list, update, delete; secret values are write-only: responses carry
//! metadata only) and `/agents` (create, get, list, delete). Both are thin over the store.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use hookbox_protocol::api::{
    Agent, Credential, CredentialConfig, CredentialUpdate, EnvironmentRef, ListAgentsResponse,
    ListCredentialsResponse,
};
use serde_json::{Map, Value};

use crate::environments::PageQuery;
use crate::error::{ApiError, ApiResult};
use crate::{AppState, BUILTIN_AGENTS, Project, new_id, parse_json};

fn empty() -> Json<Value> {
    Json(Value::Object(Map::new()))
}

fn valid_id(id: &str, what: &str) -> ApiResult<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Invalid {what} id `{id}`: use 1-128 letters, digits, `_`, `-` or `.`."
        )))
    }
}

/// Refuses a bearer token whose header the proxy could never send (a header name with a space,
/// a token with CR/LF), naming the field; the token itself is never echoed.
fn check_bearer(
    header_name: Option<&str>,
    prefix: Option<&str>,
    token: Option<&str>,
) -> ApiResult<()> {
    hookbox_egress::credentials::check_bearer_parts(header_name, prefix, token)
        .map_err(|(field, why)| ApiError::bad_request(format!("Invalid `{field}`: {why}.")))
}

/// `POST /credentials`.
pub async fn create_credential(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    body: Bytes,
) -> ApiResult<Json<Credential>> {
    let config: CredentialConfig = parse_json(&body, "credential")?;
    valid_id(config.id(), "credential")?;
    if let CredentialConfig::BearerToken {
        token,
        header_name,
        prefix,
        ..
    } = &config
    {
        check_bearer(header_name.as_deref(), prefix.as_deref(), Some(&token.0))?;
    }
    let meta = state
        .inner
        .store
        .create_credential(&project, &config, &hookbox_store::time::now_rfc3339())
        .await?;
    tracing::info!(credential_id = %meta.id, kind = meta.kind.as_str(), "credential created");
    Ok(Json(meta))
}

/// `GET /credentials/{id}`.
pub async fn get_credential(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Credential>> {
    state
        .inner
        .store
        .get_credential(&project, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("Credential `{id}` not found.")))
}

/// `GET /credentials`.
pub async fn list_credentials(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<ListCredentialsResponse>> {
    let page = state
        .inner
        .store
        .list_credentials(&project, &q.page())
        .await?;
    Ok(Json(ListCredentialsResponse {
        credentials: page.items,
        next_page_token: page.next_page_token,
    }))
}

/// `PATCH /credentials/{id}?update_mask=…`: fields present in the body are applied.
pub async fn update_credential(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Credential>> {
    let update: CredentialUpdate = parse_json(&body, "credential update")?;
    if let CredentialUpdate::BearerToken {
        token,
        header_name,
        prefix,
    } = &update
    {
        check_bearer(
            header_name.as_deref(),
            prefix.as_deref(),
            token.as_ref().map(|t| t.0.as_str()),
        )?;
    }
    let meta = state
        .inner
        .store
        .update_credential(&project, &id, &update, &hookbox_store::time::now_rfc3339())
        .await?;
    tracing::info!(credential_id = %id, "credential updated");
    Ok(Json(meta))
}

/// `DELETE /credentials/{id}`.
pub async fn delete_credential(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    if !state.inner.store.delete_credential(&project, &id).await? {
        return Err(ApiError::not_found(format!("Credential `{id}` not found.")));
    }
    Ok(empty())
}

/// `POST /agents`.
pub async fn create_agent(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    body: Bytes,
) -> ApiResult<Json<Agent>> {
    let mut agent: Agent = parse_json(&body, "agent")?;
    let id = agent.id.get_or_insert_with(|| new_id("agent")).clone();
    valid_id(&id, "agent")?;
    if BUILTIN_AGENTS.contains(&id.as_str()) {
        return Err(ApiError::bad_request(format!(
            "Agent id `{id}` is the name of a built-in agent; choose another id."
        )));
    }
    if let Some(base) = agent.base_agent.as_deref()
        && !BUILTIN_AGENTS.contains(&base)
    {
        return Err(ApiError::bad_request(format!(
            "Unknown base_agent `{base}`. Use one of {}.",
            BUILTIN_AGENTS.join(", ")
        )));
    }
    if let Some(base) = agent.base_environment.as_ref() {
        let base = serde_json::to_value(base).map_err(|e| ApiError::internal(&e))?;
        crate::interactions::request::check_environment_network(Some(&base), "base_environment")?;
    }
    if state.inner.store.get_agent(&project, &id).await?.is_some() {
        return Err(ApiError::bad_request(format!(
            "Agent `{id}` already exists."
        )));
    }
    state.inner.store.put_agent(&project, &agent).await?;
    Ok(Json(shown_agent(agent)))
}

/// An agent as the API shows it: its base environment's `transform` values and its
/// `mcp_server` header values redacted (the record keeps them for its runs).
fn shown_agent(mut agent: Agent) -> Agent {
    if let Some(EnvironmentRef::Spec(spec)) = agent.base_environment.as_mut() {
        spec.network = crate::environments::shown_network(spec.network.take());
    }
    if let Some(tools) = agent.tools.as_mut() {
        *tools = crate::interactions::request::redacted_tools(tools);
    }
    agent
}

/// `GET /agents/{id}`.
pub async fn get_agent(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Agent>> {
    state
        .inner
        .store
        .get_agent(&project, &id)
        .await?
        .map(|a| Json(shown_agent(a)))
        .ok_or_else(|| ApiError::not_found(format!("Agent `{id}` not found.")))
}

/// `GET /agents`.
pub async fn list_agents(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<ListAgentsResponse>> {
    let page = state.inner.store.list_agents(&project, &q.page()).await?;
    Ok(Json(ListAgentsResponse {
        agents: page.items.into_iter().map(shown_agent).collect(),
        next_page_token: page.next_page_token,
    }))
}

/// `DELETE /agents/{id}`.
pub async fn delete_agent(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    if !state.inner.store.delete_agent(&project, &id).await? {
        return Err(ApiError::not_found(format!("Agent `{id}` not found.")));
    }
    Ok(empty())
}
