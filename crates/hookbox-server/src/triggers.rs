//! `/triggers`: the SDK's `client.triggers` (create, list, get, update, delete, `run`,
//! `list_executions`), and the scheduler that fires them.
//!
//! A trigger is an interaction request run on a cron schedule in a time zone
//! (`schedule.rs`). Every replica runs [`run_scheduler`]; a due run is claimed in the
//! store by moving the trigger's `next_run_ms` in the transaction that writes the execution, so
//! it fires exactly once however many replicas see it due. The interaction is created through
//! the same path as `POST /interactions` (quotas, environments, placement among replicas), in
//! the background; its end (in the store) ends the execution. Runs missed while no replica was
//! up fire **once** when one comes back (the next run is then computed from that moment: a
//! backlog is never replayed).

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use hookbox_protocol::triggers::{
    ExecutionStatus, ListTriggerExecutionsResponse, ListTriggersResponse, Trigger, TriggerCreate,
    TriggerExecution, TriggerStatus, TriggerUpdate,
};
use hookbox_store::{RunStart, TriggerRecord};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::environments::PageQuery;
use crate::error::{ApiError, ApiResult};
use crate::schedule::Schedule;
use crate::{AppState, Project, UpdateQuery, new_id, parse_json};

/// The longest `execution_timeout_seconds`.
const MAX_TIMEOUT_SECS: u32 = 86_400;
/// How often the scheduler looks for due triggers.
pub const SCHEDULER_TICK: Duration = Duration::from_secs(1);
/// Due triggers handled per look.
const DUE_BATCH: u32 = 64;

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("Trigger `{id}` not found."))
}

fn schedule_of(trigger: &Trigger) -> ApiResult<Schedule> {
    Schedule::parse(&trigger.schedule, &trigger.time_zone)
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

fn format_ms(ms: i64) -> String {
    hookbox_store::time::format_unix(ms.div_euclid(1000))
}

/// `POST /triggers`.
pub async fn create(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    body: Bytes,
) -> ApiResult<Json<Trigger>> {
    let input: TriggerCreate = parse_json(&body, "trigger")?;
    let schedule = Schedule::parse(&input.schedule, &input.time_zone)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let Some(request) = input.interaction.as_object() else {
        return Err(ApiError::bad_request(
            "Invalid `interaction`: expected the body of an interactions.create call (an object with `agent` and `input`).",
        ));
    };
    if !request.get("agent").is_some_and(Value::is_string) {
        return Err(ApiError::bad_request(
            "Invalid `interaction.agent`: an agent name is required.",
        ));
    }
    if request.get("input").is_none() {
        return Err(ApiError::bad_request(
            "Invalid `interaction.input`: the input each run sends is required.",
        ));
    }
    crate::interactions::request::check_stored_request(
        request
            .get("tools")
            .and_then(Value::as_array)
            .map(Vec::as_slice),
        request.get("environment"),
        "interaction",
        "interaction.environment",
    )?;
    if let Some(secs) = input.execution_timeout_seconds
        && !(1..=MAX_TIMEOUT_SECS).contains(&secs)
    {
        return Err(ApiError::bad_request(format!(
            "Invalid `execution_timeout_seconds`: {secs} is not from 1 to {MAX_TIMEOUT_SECS}."
        )));
    }
    if input
        .display_name
        .as_deref()
        .is_some_and(|n| n.chars().count() > 256)
    {
        return Err(ApiError::bad_request(
            "Invalid `display_name`: longer than 256 characters.",
        ));
    }
    if let Some(env) = &input.environment_id
        && state
            .inner
            .store
            .get_environment(&project, env)
            .await?
            .is_none()
    {
        return Err(ApiError::bad_request(format!(
            "Invalid `environment_id`: environment `{env}` not found."
        )));
    }
    let now = hookbox_store::time::now_rfc3339();
    let mut record = TriggerRecord {
        trigger: Trigger {
            id: new_id("trg"),
            interaction: input.interaction,
            schedule: input.schedule,
            time_zone: input.time_zone,
            display_name: input.display_name,
            environment_id: input.environment_id,
            execution_timeout_seconds: input.execution_timeout_seconds,
            max_consecutive_failures: input.max_consecutive_failures,
            status: TriggerStatus::Active,
            consecutive_failure_count: 0,
            create_time: now.clone(),
            update_time: now,
            last_pause_time: None,
            last_resume_time: None,
            last_run_time: None,
            next_run_time: None,
            previous_interaction_id: None,
        },
        next_run_ms: None,
    };
    record.set_next_run(schedule.next_after(hookbox_store::webhooks::now_ms()));
    state.inner.store.create_trigger(&project, &record).await?;
    tracing::info!(trigger_id = %record.trigger.id, schedule = %record.trigger.schedule, time_zone = %record.trigger.time_zone, "trigger created");
    Ok(Json(shown(record.trigger)))
}

/// Query of `GET /triggers`: `filter` may be `status=active|paused|error`.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    pub page_size: Option<u32>,
    #[serde(default)]
    pub page_token: Option<String>,
    #[serde(default)]
    pub filter: Option<String>,
}

/// `GET /triggers`.
pub async fn list(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<ListTriggersResponse>> {
    let wanted = match q.filter.as_deref().map(str::trim).filter(|f| !f.is_empty()) {
        None => None,
        Some(filter) => {
            let value = filter
                .split_once('=')
                .filter(|(k, _)| k.trim() == "status")
                .map(|(_, v)| v.trim().trim_matches('"'))
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "Invalid `filter` `{filter}`: only `status=active`, `status=paused` or `status=error` is supported."
                    ))
                })?;
            Some(
                serde_json::from_value::<TriggerStatus>(json!(value)).map_err(|_| {
                    ApiError::bad_request(format!(
                        "Invalid `filter`: `{value}` is not a trigger status (active, paused, error)."
                    ))
                })?,
            )
        }
    };
    let page = PageQuery {
        page_size: q.page_size,
        page_token: q.page_token,
    };
    let page = state
        .inner
        .store
        .list_triggers(&project, &page.page())
        .await?;
    Ok(Json(ListTriggersResponse {
        triggers: page
            .items
            .into_iter()
            .map(|r| shown(r.trigger))
            .filter(|t| wanted.is_none_or(|w| t.status == w))
            .collect(),
        next_page_token: page.next_page_token,
    }))
}

/// A trigger as the API shows it: its interaction's `mcp_server` header values and its
/// environment's `transform` values redacted (the record keeps them, since every run sends
/// them).
fn shown(mut trigger: Trigger) -> Trigger {
    if let Some(Value::Array(tools)) = trigger.interaction.get("tools") {
        trigger.interaction["tools"] =
            Value::Array(crate::interactions::request::redacted_tools(tools));
    }
    if let Some(environment) = trigger.interaction.get_mut("environment") {
        crate::environments::redact_environment_value(environment);
    }
    trigger
}

/// `GET /triggers/{id}`.
pub async fn get(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Trigger>> {
    state
        .inner
        .store
        .get_trigger(&project, &id)
        .await?
        .map(|r| Json(shown(r.trigger)))
        .ok_or_else(|| not_found(&id))
}

/// `PATCH /triggers/{id}`: rename, pause (`status: paused`) or resume (`status: active`,
/// which clears the failure count and schedules the next run from now).
pub(crate) async fn update(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
    Query(q): Query<UpdateQuery>,
    body: Bytes,
) -> ApiResult<Json<Trigger>> {
    let mut update: TriggerUpdate = parse_json(&body, "trigger update")?;
    let applies = q.applies(&["display_name", "status"])?;
    if !applies("display_name") {
        update.display_name = None;
    }
    if !applies("status") {
        update.status = None;
    }
    if update.status == Some(TriggerStatus::Error) {
        return Err(ApiError::bad_request(
            "Invalid `status`: `error` is set by hookbox after max_consecutive_failures; use `active` or `paused`.",
        ));
    }
    let Some(current) = state.inner.store.get_trigger(&project, &id).await? else {
        return Err(not_found(&id));
    };
    let resume_next = schedule_of(&current.trigger)?.next_after(hookbox_store::webhooks::now_ms());
    let record = state
        .inner
        .store
        .update_trigger(
            &project,
            &id,
            &update,
            resume_next,
            &hookbox_store::time::now_rfc3339(),
        )
        .await?
        .ok_or_else(|| not_found(&id))?;
    Ok(Json(shown(record.trigger)))
}

/// `DELETE /triggers/{id}` (its executions go with it; running interactions are not stopped).
pub async fn delete(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    if !state.inner.store.delete_trigger(&project, &id).await? {
        return Err(not_found(&id));
    }
    Ok(Json(json!({})))
}

/// `GET /triggers/{id}/executions`, newest first.
pub async fn list_executions(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<ListTriggerExecutionsResponse>> {
    if state
        .inner
        .store
        .get_trigger(&project, &id)
        .await?
        .is_none()
    {
        return Err(not_found(&id));
    }
    let page = state
        .inner
        .store
        .list_trigger_executions(&project, &id, &q.page())
        .await?;
    Ok(Json(ListTriggerExecutionsResponse {
        trigger_executions: page.items,
        next_page_token: page.next_page_token,
    }))
}

/// `POST /triggers/{id}/executions`: runs it now (whatever its status), outside its schedule.
pub async fn run(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<TriggerExecution>> {
    let Some(record) = state.inner.store.get_trigger(&project, &id).await? else {
        return Err(not_found(&id));
    };
    let now = hookbox_store::time::now_rfc3339();
    let start = state
        .inner
        .store
        .start_trigger_execution(&project, &id, None, &now, &now)
        .await?;
    match start {
        RunStart::Run(execution) => {
            let execution = fire(&state, &project, &record.trigger, execution).await;
            Ok(Json(execution))
        }
        RunStart::Skipped(execution) => Ok(Json(execution)),
        RunStart::Lost => Err(not_found(&id)),
    }
}

/// Creates the interaction of `execution` (in the background) and links it; a refusal (a
/// quota, a missing environment, a drain) ends the execution `failed` with the reason. With
/// `execution_timeout_seconds`, a task times the execution out and cancels its interaction.
/// The execution as it is after the start.
async fn fire(
    state: &AppState,
    project: &str,
    trigger: &Trigger,
    mut execution: TriggerExecution,
) -> TriggerExecution {
    let mut request = trigger.interaction.clone();
    if let Some(body) = request.as_object_mut() {
        body.insert("background".into(), json!(true));
        body.remove("stream");
        if let Some(env) = &trigger.environment_id
            && !body.contains_key("environment")
        {
            body.insert("environment".into(), json!(env));
        }
    }
    let store = &state.inner.store;
    let created = create_interaction(state, project, &request).await;
    let now = hookbox_store::time::now_rfc3339();
    match created {
        Ok((interaction_id, environment_id)) => {
            tracing::info!(trigger_id = %trigger.id, execution_id = %execution.id, interaction_id = %interaction_id, "trigger fired");
            if let Err(e) = store
                .attach_trigger_interaction(
                    project,
                    &execution.id,
                    &interaction_id,
                    environment_id.as_deref(),
                    &now,
                )
                .await
            {
                tracing::error!(execution_id = %execution.id, error = %e, "could not link a trigger's interaction");
            }
            execution.interaction_id = Some(interaction_id.clone());
            if environment_id.is_some() {
                execution.environment_id = environment_id;
            }
            if let Some(secs) = trigger.execution_timeout_seconds {
                tokio::spawn(time_out(
                    state.clone(),
                    Project::new(project),
                    execution.id.clone(),
                    interaction_id,
                    Duration::from_secs(u64::from(secs)),
                ));
            }
        }
        Err(reason) => {
            tracing::warn!(trigger_id = %trigger.id, execution_id = %execution.id, %reason, "trigger run refused");
            let error = format!("the interaction could not be created: {reason}");
            if let Err(e) = store
                .end_trigger_execution(
                    project,
                    &execution.id,
                    ExecutionStatus::Failed,
                    Some(&error),
                    &now,
                )
                .await
            {
                tracing::error!(execution_id = %execution.id, error = %e, "could not end a trigger execution");
            }
            execution.status = ExecutionStatus::Failed;
            execution.end_time = Some(now);
            execution.error = Some(error);
        }
    }
    execution
}

/// Creates an interaction from `request` as `POST /interactions` would: its id and environment,
/// or why not.
async fn create_interaction(
    state: &AppState,
    project: &str,
    request: &Value,
) -> Result<(String, Option<String>), String> {
    use axum::response::IntoResponse;
    let body = serde_json::to_vec(request).map_err(|e| e.to_string())?;
    let response = match crate::interactions::create(
        State(state.clone()),
        Extension(Project::new(project)),
        None,
        axum::http::Uri::from_static("/v1beta/interactions"),
        axum::http::HeaderMap::new(),
        Bytes::from(body),
    )
    .await
    {
        Ok(response) => response,
        Err(e) => return Err(e.message),
    };
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_response().into_body(), 1 << 20)
        .await
        .map_err(|e| e.to_string())?;
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if !status.is_success() {
        return Err(value["error"]["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("HTTP {status}")));
    }
    let id = value["id"]
        .as_str()
        .ok_or_else(|| "the created interaction has no id".to_owned())?;
    Ok((
        id.to_owned(),
        value["environment_id"].as_str().map(str::to_owned),
    ))
}

/// After `after`, ends the execution `timed_out` if it still runs, and cancels its interaction.
async fn time_out(
    state: AppState,
    project: Project,
    execution_id: String,
    interaction_id: String,
    after: Duration,
) {
    tokio::time::sleep(after).await;
    let ended = state
        .inner
        .store
        .end_trigger_execution(
            &project,
            &execution_id,
            ExecutionStatus::TimedOut,
            Some(&format!(
                "timed out after {} s (execution_timeout_seconds); the interaction was cancelled",
                after.as_secs()
            )),
            &hookbox_store::time::now_rfc3339(),
        )
        .await;
    if let Ok(true) = ended {
        tracing::warn!(execution_id = %execution_id, interaction_id = %interaction_id, "trigger execution timed out; cancelling its interaction");
        let _ = crate::interactions::cancel(
            State(state.clone()),
            Extension(project),
            Path(interaction_id),
            axum::http::Uri::from_static("/v1beta/interactions"),
            axum::http::HeaderMap::new(),
        )
        .await;
    }
}

/// One look at the due triggers at `now_ms`: claims and fires each due run; how many fired.
pub async fn tick(state: &AppState, now_ms: i64) -> Result<usize, hookbox_store::Error> {
    let store = &state.inner.store;
    let mut fired = 0;
    for (project, record) in store.due_triggers(now_ms, DUE_BATCH).await? {
        let Some(due) = record.next_run_ms else {
            continue;
        };
        // The next run after now: runs missed while no replica was up collapse into this one.
        let next = match Schedule::parse(&record.trigger.schedule, &record.trigger.time_zone) {
            Ok(schedule) => schedule.next_after(now_ms.max(due)),
            Err(e) => {
                tracing::error!(trigger_id = %record.trigger.id, error = %e, "stored trigger has an invalid schedule; it will not run again");
                None
            }
        };
        let now = hookbox_store::time::now_rfc3339();
        let start = store
            .start_trigger_execution(
                &project,
                &record.trigger.id,
                Some((due, next)),
                &format_ms(due),
                &now,
            )
            .await?;
        match start {
            RunStart::Run(execution) => {
                fired += 1;
                let (state, trigger) = (state.clone(), record.trigger.clone());
                tokio::spawn(async move {
                    fire(&state, &project, &trigger, execution).await;
                });
            }
            RunStart::Skipped(execution) => {
                tracing::info!(trigger_id = %record.trigger.id, execution_id = %execution.id, "trigger run skipped: the previous one still runs");
            }
            RunStart::Lost => {}
        }
    }
    Ok(fired)
}

/// Fires due triggers until `stop` resolves (call it once per replica; stop it when a drain
/// begins, so no new run starts on a stopping server).
pub async fn run_scheduler(state: AppState, stop: impl std::future::Future<Output = ()>) {
    tokio::pin!(stop);
    loop {
        if let Err(e) = tick(&state, hookbox_store::webhooks::now_ms()).await {
            tracing::warn!(error = %e, "trigger scheduler: the store did not answer; trying again");
        }
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(SCHEDULER_TICK) => {}
        }
    }
}
