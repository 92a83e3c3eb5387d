//! `/interactions`: create (blocking, `background`, or `stream`), get (JSON or SSE replay/resume),
//! list, cancel and delete. A create validates the request ([`request`]), resolves its agent,
//! environment and the history of `previous_interaction_id` ([`resolve`]), checks the answers
//! of a continuation against what the interaction it continues waits for ([`approvals`]), runs
//! where its environment is held ([`crate::holder`]), stores the interaction, then starts its
//! run ([`run`]); a stream follows it ([`stream`]). A live socket ([`live`]) starts each turn
//! through the same run; an answer to a live turn goes on in place.
//!
//! This module is the HTTP side: the run itself must not depend on it.

pub(crate) mod approvals;
pub(crate) mod live;
pub(crate) mod request;
pub(crate) mod resolve;
pub(crate) mod run;
pub(crate) mod stream;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use axum::response::{IntoResponse, Response};
use hookbox_protocol::api::{
    CreateInteractionRequest, Interaction, InteractionError, InteractionStatus, Step,
};
use hookbox_store::StatusUpdate;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::auth::TokenScope;
use crate::error::{ApiError, ApiResult};
use crate::holder::{self, Needs, Received, Routed};
use crate::{AppState, Project, new_id, parse_json};

/// `POST /interactions`.
pub async fn create(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    token: Option<Extension<TokenScope>>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let req: CreateInteractionRequest = parse_json(&body, "interaction request")?;
    // An auth token continues its own interaction, in its own environment and nothing else.
    if let Some(Extension(scope)) = &token {
        scope.check_continues(req.previous_interaction_id.as_deref())?;
        if req.environment.is_some() {
            return Err(ApiError::new(
                axum::http::StatusCode::UNAUTHORIZED,
                "With an auth token, leave `environment` out: the interaction continues in its own environment.",
            ));
        }
    }
    let received = Received::new(&state, axum::http::Method::POST, &uri, &headers, body)?;
    let agent = resolve::resolve_agent(&state, &project, &req).await?;
    let Some(input) = req.input.as_ref() else {
        return Err(ApiError::bad_request("`input` is required."));
    };
    let mut new_steps = request::input_steps(input)?;
    if new_steps.is_empty() {
        return Err(ApiError::bad_request("`input` is empty."));
    }
    let functions = request::function_tools(req.tools.as_deref())?;
    let mcp = request::mcp_servers(req.tools.as_deref())?;
    let search = request::tool_search(req.tools.as_deref(), &functions)?;
    request::check_function_names(&functions, &mcp)?;
    let previous = match req.previous_interaction_id.as_deref() {
        Some(prev) => state.inner.store.get_interaction(&project, prev).await?,
        None => None,
    };
    // What the previous interaction's run paused: its records, never its steps.
    let records = match &previous {
        Some(p) => approvals::approval_records(&state, &project, &p.id).await?,
        None => Vec::new(),
    };
    let mut answers = Vec::new();
    if req.previous_interaction_id.is_none() || previous.is_some() {
        approvals::check_result_steps(previous.as_ref(), &records, &new_steps)?;
        answers = approvals::approval_answers(previous.as_ref(), &records, &mut new_steps)?;
    }
    let (history, previous_env) = match req.previous_interaction_id.as_deref() {
        Some(prev) => resolve::history(&state, &project, prev).await?,
        None => (Vec::new(), None),
    };
    // An approved call runs where its hooks ran, or not at all.
    approvals::check_approval_environment(
        &answers,
        &approvals::continuation_environment(
            req.environment.as_ref(),
            agent.as_ref(),
            previous_env.as_deref(),
        ),
    )?;
    // An existing environment runs on the replica that holds it: the request goes there.
    let env_request = req
        .environment
        .clone()
        .or_else(|| agent.as_ref().and_then(|a| a.base_environment.clone()));
    // Nor through an agent's base environment: a token reaches no other environment.
    if token.is_some()
        && let Some(env) = &env_request
        && !matches!(env, hookbox_protocol::api::EnvironmentRef::Id(id)
            if Some(crate::strip_resource_prefix(id, "environments")) == previous_env.as_deref())
    {
        return Err(ApiError::new(
            axum::http::StatusCode::UNAUTHORIZED,
            "With an auth token, the interaction continues in its own environment; this agent names another.",
        ));
    }
    let existing = resolve::existing_environment(env_request.as_ref(), previous_env.as_deref());
    let needs = Needs::Interaction {
        project: &project,
        environment: existing.as_deref(),
    };
    if let Routed::There(answer) = holder::to_holder(&state, needs, received).await? {
        return Ok(answer);
    }
    // Answers to a live interaction's paused turn go on in place, streamed to its socket.
    if let Some(paused) = previous
        .as_ref()
        .filter(|p| live::is_live(p) && p.status == InteractionStatus::RequiresAction)
    {
        let (events_rx, handle) =
            live::answer_in_place(&state, &project, paused, new_steps, &answers).await?;
        drop(events_rx);
        if req.stream == Some(true) {
            let sse = stream::sse(state, project, paused.id.clone(), None).await?;
            return Ok(sse.into_response());
        }
        if req.background == Some(true) {
            return Ok(
                Json(without_input(load(&state, &project, &paused.id).await?)).into_response(),
            );
        }
        return match handle.await {
            Ok(done) => Ok(Json(without_input(done)).into_response()),
            Err(e) => Err(ApiError::internal(&e)),
        };
    }
    // Checked before anything is created or stored, so a refusal changes nothing.
    let running = state.inner.quotas.start_interaction(&project).await?;
    let (environment_id, created) = resolve::resolve_environment(
        &state,
        &project,
        env_request.as_ref(),
        previous_env.as_deref(),
    )
    .await?;

    let system_instruction = req
        .system_instruction
        .as_ref()
        .or(agent.as_ref().and_then(|a| a.system_instruction.as_ref()))
        .and_then(request::instruction_text);
    let model_name = req
        .agent_config
        .as_ref()
        .and_then(|c| c.model.clone())
        .or_else(|| {
            agent
                .as_ref()
                .and_then(|a| a.agent_config.as_ref()?.model.clone())
        });

    // A new environment is this replica's from the start (an existing one was placed above).
    if created {
        holder::take_new(&state, &environment_id).await?;
    }
    let now = hookbox_store::time::now_rfc3339();
    let mut interaction = Interaction::new(new_id("int"), InteractionStatus::InProgress);
    interaction.agent.clone_from(&req.agent);
    interaction.environment_id = Some(environment_id.clone());
    interaction.created = Some(now.clone());
    interaction.updated = Some(now);
    interaction
        .previous_interaction_id
        .clone_from(&req.previous_interaction_id);
    interaction.steps.clone_from(&new_steps);
    interaction.input = serde_json::to_value(input).ok();
    interaction.extra = request::echoes(&req);
    // Who continued it (hookbox extension): the token's public id, never the token.
    if let Some(Extension(scope)) = &token {
        interaction.extra.insert(
            "auth_token_id".into(),
            Value::String(scope.token_id.clone()),
        );
    }
    let settled =
        approvals::store_continuation(&state, &project, &interaction, previous.as_ref(), &answers)
            .await?;
    tracing::info!(interaction_id = %interaction.id, environment_id = %environment_id, agent = ?req.agent, "interaction created");

    let mut conversation = history;
    conversation.extend(new_steps);
    let run = run::RunSpec {
        project: project.clone(),
        running,
        id: interaction.id.clone(),
        environment_id,
        model_name,
        system_instruction,
        conversation,
        first_index: interaction.steps.len(),
        keep: req.store != Some(false),
        functions,
        mcp,
        search,
        agent: req.agent.clone().unwrap_or_default(),
        input: Some(interaction.steps.clone()),
        prior_usage: None,
        settled,
        live: false,
    };
    let handle = run::start_unwatched(&state, run)?;

    if req.stream == Some(true) {
        let sse = stream::sse(state, project, interaction.id.clone(), None).await?;
        return Ok(sse.into_response());
    }
    if req.background == Some(true) {
        return Ok(Json(without_input(interaction)).into_response());
    }
    match handle.await {
        Ok(done) => Ok(Json(without_input(done)).into_response()),
        Err(e) => Err(ApiError::internal(&e)),
    }
}

fn without_input(mut i: Interaction) -> Interaction {
    i.input = None;
    i
}

#[derive(Debug, Deserialize)]
pub struct GetQuery {
    #[serde(default)]
    stream: Option<String>,
    #[serde(default)]
    include_input: Option<String>,
    #[serde(default)]
    last_event_id: Option<String>,
}

fn truthy(v: Option<&str>) -> bool {
    matches!(v, Some("true" | "True" | "1"))
}

/// `GET /interactions/{id}`.
pub async fn get(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
    Query(q): Query<GetQuery>,
) -> ApiResult<Response> {
    if truthy(q.stream.as_deref()) {
        let after = match q.last_event_id.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some(e) => Some(e.parse::<stream::ResumePoint>().map_err(|_| {
                ApiError::bad_request(format!(
                    "Invalid last_event_id `{e}`: expected an event_id from this interaction's stream."
                ))
            })?),
        };
        return Ok(stream::sse(state, project, id, after)
            .await?
            .into_response());
    }
    let i = load(&state, &project, &id).await?;
    Ok(Json(if truthy(q.include_input.as_deref()) {
        i
    } else {
        without_input(i)
    })
    .into_response())
}

async fn load(state: &AppState, project: &Project, id: &str) -> ApiResult<Interaction> {
    state
        .inner
        .store
        .get_interaction(project, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Interaction `{id}` not found.")))
}

/// `POST /interactions/{id}/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> ApiResult<Response> {
    let before = load(&state, &project, &id).await?;
    let received = Received::new(
        &state,
        axum::http::Method::POST,
        &uri,
        &headers,
        Bytes::new(),
    )?;
    // Running on another replica: only that one can stop its loop.
    if before.status.is_running()
        && state.inner.running.subscribe(&id).is_none()
        && let Routed::There(answer) = holder::to_holder(&state, Needs::Run(&id), received).await?
    {
        return Ok(answer);
    }
    if !run::cancel_and_wait(&state, &id).await && before.status.is_running() {
        // Running in the store but not here (should not happen after start-up recovery).
        let update = StatusUpdate {
            status: InteractionStatus::Cancelled,
            usage: before.usage.clone(),
            errors: vec![InteractionError {
                code: "cancelled".into(),
                message: "the interaction was cancelled".into(),
            }],
            updated: hookbox_store::time::now_rfc3339(),
        };
        state.inner.store.update_status(&id, &update).await?;
    }
    Ok(Json(without_input(load(&state, &project, &id).await?)).into_response())
}

/// Query of `GET /interactions` (a hookbox extension: the reference API has no listing).
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    environment: Option<String>,
    /// RFC 3339, inclusive.
    #[serde(default)]
    created_after: Option<String>,
    /// RFC 3339, exclusive.
    #[serde(default)]
    created_before: Option<String>,
    /// Only the continuations of this interaction (hookbox extension).
    #[serde(default)]
    previous_interaction: Option<String>,
    /// `true`: each listed interaction with `hook_outcomes` (hookbox extension).
    #[serde(default)]
    hooks: Option<String>,
    #[serde(default)]
    page_size: Option<u32>,
    #[serde(default)]
    page_token: Option<String>,
}

/// `GET /interactions`: the project's interactions, newest first, without steps or input;
/// filtered by status, agent, environment, creation time and the interaction continued.
pub async fn list(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    if let Some(status) = q.status.as_deref()
        && InteractionStatus::parse(status).is_none()
    {
        return Err(ApiError::bad_request(format!("Unknown status `{status}`.")));
    }
    let nonempty = |v: Option<String>| v.filter(|s| !s.is_empty());
    let filter = hookbox_store::InteractionFilter {
        status: nonempty(q.status),
        agent: nonempty(q.agent),
        environment_id: nonempty(q.environment)
            .map(|e| crate::strip_resource_prefix(&e, "environments").to_owned()),
        created_after: nonempty(q.created_after),
        created_before: nonempty(q.created_before),
        previous_interaction_id: nonempty(q.previous_interaction)
            .map(|i| crate::strip_resource_prefix(&i, "interactions").to_owned()),
    };
    let with_hooks = matches!(q.hooks.as_deref(), Some("true" | "1"));
    let page = hookbox_store::Page {
        // Marks read each listed interaction whole: a smaller page bounds what one request reads.
        size: if with_hooks {
            Some(
                q.page_size
                    .unwrap_or(MAX_PAGE_WITH_HOOKS)
                    .min(MAX_PAGE_WITH_HOOKS),
            )
        } else {
            q.page_size
        },
        token: nonempty(q.page_token),
    };
    let listed = state
        .inner
        .store
        .list_interactions(&project, &filter, &page)
        .await?;
    let mut items = Vec::with_capacity(listed.items.len());
    for listed in &listed.items {
        let mut item = serde_json::to_value(listed).unwrap_or_default();
        // What the console's list marks (denies, fail-opens): read from each one's steps.
        if with_hooks
            && let Some(full) = state
                .inner
                .store
                .get_interaction(&project, &listed.id)
                .await?
            && let Value::Object(fields) = &mut item
        {
            fields.insert(
                "hook_outcomes".into(),
                serde_json::to_value(hook_outcomes(&full)).unwrap_or_default(),
            );
        }
        items.push(item);
    }
    let mut out = Map::new();
    out.insert("interactions".into(), Value::Array(items));
    if let Some(token) = listed.next_page_token {
        out.insert("next_page_token".into(), Value::String(token));
    }
    Ok(Json(Value::Object(out)))
}

/// The most interactions one `hooks=true` list page holds (each is read whole for its marks).
const MAX_PAGE_WITH_HOOKS: u32 = 50;

/// How often each hook outcome (`allow`, `deny`, `ask`, `failed_open`, ...) is in the traces of
/// `i`'s tool results and of its own interaction hooks, pre and post; skipped and disabled
/// handlers are not counted.
fn hook_outcomes(i: &Interaction) -> std::collections::BTreeMap<String, u64> {
    let mut counts = std::collections::BTreeMap::new();
    let steps = i.steps.iter().filter_map(|step| match step {
        Step::FunctionResult { hooks: Some(h), .. }
        | Step::CodeExecutionResult { hooks: Some(h), .. }
        | Step::McpServerToolResult { hooks: Some(h), .. } => Some(h),
        _ => None,
    });
    for hooks in i.hooks.iter().chain(steps) {
        for phase in ["pre", "post"] {
            let trace = hooks
                .get(phase)
                .and_then(|d| d.get("trace"))
                .and_then(Value::as_array);
            for h in trace.into_iter().flatten() {
                let outcome = h.get("outcome").and_then(Value::as_str).unwrap_or("");
                if !outcome.is_empty() && !matches!(outcome, "skipped" | "disabled") {
                    *counts.entry(outcome.to_owned()).or_insert(0) += 1;
                }
            }
        }
    }
    counts
}

/// `DELETE /interactions/{id}`.
pub async fn delete(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    load(&state, &project, &id).await?;
    run::cancel_and_wait(&state, &id).await;
    if !state.inner.store.delete_interaction(&project, &id).await? {
        return Err(ApiError::not_found(format!(
            "Interaction `{id}` not found."
        )));
    }
    Ok(Json(Value::Object(Map::new())))
}

#[cfg(test)]
mod tests {
    use super::hook_outcomes;

    #[test]
    fn hook_outcomes_count_pre_and_post_traces_of_every_result() {
        let i: hookbox_protocol::api::Interaction = serde_json::from_value(serde_json::json!({
            "id": "int_1", "status": "completed",
            "steps": [
                {"type": "code_execution_call", "id": "c1", "arguments": {"code": "rm -rf /"}},
                {"type": "code_execution_result", "call_id": "c1", "result": "no", "is_error": true, "hooks": {
                    "pre": {"trace": [{"group": "gate", "outcome": "deny"}, {"group": "flaky", "outcome": "failed_open"},
                                      {"group": "off", "outcome": "skipped"}]}}},
                {"type": "function_result", "call_id": "f1", "name": "x", "result": "ok", "hooks": {
                    "pre": {"trace": [{"group": "gate", "outcome": "allow"}]},
                    "post": {"trace": [{"group": "flaky", "outcome": "failed_open"}]}}}
            ]
        }))
        .unwrap();
        let counts = hook_outcomes(&i);
        assert_eq!(
            serde_json::to_value(counts).unwrap(),
            serde_json::json!({"allow": 1, "deny": 1, "failed_open": 2})
        );
    }
}
