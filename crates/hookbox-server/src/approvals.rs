//! Calls paused for a reviewer (a pre hook's `"decision": "ask"`, hookbox extension): the
//! listing of their records (`GET /approvals`, what the console's Approvals page shows) and the
//! sweeper that denies the ones nobody answered before their deadline (`--ask-timeout`). The
//! paused interaction then goes on in place (`resume_timed_out`): its approval requests get a
//! timed-out answer, the model sees each such call denied, and the interaction ends as any
//! other. How a continuation's answers are read, checked and settled, and the records a run
//! writes, are `interactions::approvals`'. Paused calls live
//! only in the store, so a restart loses none: the next sweep finds them.
//!
//! Who settles a call is decided by the store's conditional update (`hookbox_store::approvals`),
//! not by a lock: the sweeper resumes an interaction only if its update won, so it and an
//! answer never both settle one call, on one replica or several. Among replicas the sweeper
//! still times out only the interactions whose environment this replica holds (the one
//! continuations are forwarded to), so the in-place run happens where the environment is.

use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, Query, State};
use hookbox_agent::approval;
use hookbox_protocol::api::{InteractionStatus, Step};
use hookbox_store::{
    ApprovalFilter, ApprovalRecord, ApprovalState, InteractionFilter, Page, Settle, Settled,
    Settlement, StatusUpdate,
};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::holder::{self, Needs};
use crate::interactions::{approvals, request, resolve, run};
use crate::{ApiError, ApiResult, AppState, BUILTIN_AGENTS, Project, strip_resource_prefix};

/// Query of `GET /approvals` (a hookbox extension).
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    /// Only this interaction's (the one that paused).
    #[serde(default)]
    interaction: Option<String>,
    /// `pending` (the default), `approved`, `denied`, `timed_out`, or `all`.
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    page_size: Option<u32>,
    #[serde(default)]
    page_token: Option<String>,
}

/// `GET /approvals`: the project's paused calls, oldest first, `pending` ones unless `state`
/// says otherwise: the interaction that paused, the call, its tool and the arguments that run
/// if approved, the hook's reason, the deadline, and once settled, how, when and by whom.
pub async fn list(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let wanted = match q.state.as_deref().filter(|s| !s.is_empty()) {
        None => Some(ApprovalState::Pending),
        Some("all") => None,
        Some(s) => Some(ApprovalState::parse(s).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Unknown approval state `{s}`: pending, approved, denied, timed_out or all."
            ))
        })?),
    };
    let filter = ApprovalFilter {
        interaction_id: q.interaction.filter(|i| !i.is_empty()),
        state: wanted,
    };
    let page = Page {
        size: q.page_size,
        token: q.page_token.filter(|t| !t.is_empty()),
    };
    let listed = state
        .inner
        .store
        .list_approvals(&project, &filter, &page)
        .await?;
    let mut out = Map::new();
    out.insert(
        "approvals".into(),
        serde_json::to_value(&listed.items).unwrap_or_default(),
    );
    if let Some(token) = listed.next_page_token {
        out.insert("next_page_token".into(), Value::String(token));
    }
    Ok(Json(Value::Object(out)))
}

/// Runs the sweeper until `stop` completes, every tenth of the ask timeout (1 to 30 s).
pub async fn run_sweeper(state: AppState, stop: impl std::future::Future<Output = ()>) {
    let every = (state.inner.loop_config.ask_timeout / 10)
        .clamp(Duration::from_secs(1), Duration::from_secs(30));
    tokio::pin!(stop);
    loop {
        match sweep(&state).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(resumed = n, "paused interactions timed out"),
            Err(e) => tracing::warn!(error = %e.message, "approvals sweep failed"),
        }
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// One pass over every project's `requires_action` interactions; returns how many went on
/// because their approvals timed out.
pub async fn sweep(state: &AppState) -> ApiResult<usize> {
    if state.is_draining() {
        return Ok(0);
    }
    let mut projects: Vec<String> = state
        .inner
        .store
        .list_projects()
        .await?
        .into_iter()
        .map(|p| p.name)
        .collect();
    projects.extend(state.inner.api_keys.iter().map(|k| k.project.clone()));
    projects.push(hookbox_store::DEFAULT_PROJECT.to_owned());
    projects.sort();
    projects.dedup();
    let filter = InteractionFilter {
        status: Some(InteractionStatus::RequiresAction.as_str().to_owned()),
        ..Default::default()
    };
    let mut resumed = 0;
    for name in projects {
        let project = Project::new(&name);
        let mut page = Page {
            size: Some(100),
            token: None,
        };
        loop {
            let batch = state
                .inner
                .store
                .list_interactions(&name, &filter, &page)
                .await?;
            for paused in batch.items {
                if !here(state, paused.environment_id.as_deref()).await? {
                    continue;
                }
                match resume_timed_out(state, &project, &paused.id).await {
                    Ok(true) => resumed += 1,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(interaction_id = %paused.id, error = %e.message, "cannot time out a paused interaction; trying again next sweep");
                    }
                }
            }
            match batch.next_page_token {
                Some(token) => page.token = Some(token),
                None => break,
            }
        }
    }
    Ok(resumed)
}

/// Whether this replica runs interactions in `environment_id` (always, without replicas).
async fn here(state: &AppState, environment_id: Option<&str>) -> ApiResult<bool> {
    let Some(env) = environment_id else {
        return Ok(true);
    };
    Ok(matches!(
        holder::locate(state, Needs::Environment(env), false).await?,
        crate::cluster::Placement::Here
    ))
}

/// Times out the paused calls of interaction `id` if one's approval deadline has passed and it
/// still waits for nothing but reviewers: their records are settled `timed_out` by the
/// sweeper (a conditional update: a continuation that answered first wins, and then nothing
/// happens here), the timed-out answers are recorded in the interaction itself, and the same
/// interaction goes on in place, the model seeing each such call denied. `Ok(false)` when
/// there was nothing to do.
async fn resume_timed_out(state: &AppState, project: &Project, id: &str) -> ApiResult<bool> {
    let Some(paused) = state.inner.store.get_interaction(project, id).await? else {
        return Ok(false);
    };
    if paused.status != InteractionStatus::RequiresAction {
        return Ok(false);
    }
    let records = approvals::approval_records(state, project, id).await?;
    let waiting: Vec<&ApprovalRecord> = records
        .iter()
        .filter(|r| r.state == ApprovalState::Pending)
        .collect();
    let now = chrono::Utc::now();
    let expired = |r: &&ApprovalRecord| {
        chrono::DateTime::parse_from_rfc3339(&r.expires_at).map_or(true, |deadline| now >= deadline)
    };
    if !waiting.iter().any(expired) {
        return Ok(false);
    }
    // A turn that also waits for the client's own functions goes on only when the client
    // answers them (an approval answered after its deadline is then denied as timed out).
    let turn = &paused.steps[hookbox_agent::model::current_turn_start(&paused.steps)..];
    if approvals::waiting_calls(turn, &records)
        .iter()
        .any(|(_, name)| *name != approval::APPROVAL_FUNCTION)
    {
        return Ok(false);
    }
    let Some(environment_id) = paused.environment_id.clone() else {
        return Ok(false);
    };
    let running = state.inner.quotas.start_interaction(project).await?;
    let settle = Settle {
        interaction_id: id.to_owned(),
        by: hookbox_store::approvals::SWEEPER.to_owned(),
        settlements: waiting
            .iter()
            .map(|r| Settlement {
                id: r.id.clone(),
                state: ApprovalState::TimedOut,
                reviewer_reason: None,
            })
            .collect(),
        now: hookbox_store::time::now_rfc3339(),
    };
    let won = match state.inner.store.settle_approvals(project, &settle).await? {
        Settled::Won(won) => won,
        // Answered meanwhile: that answer's run settles them.
        Settled::Refused(_) => return Ok(false),
    };
    let (mut conversation, _) = match paused.previous_interaction_id.as_deref() {
        Some(previous) => resolve::history(state, project, previous).await?,
        None => (Vec::new(), None),
    };
    conversation.extend(paused.steps.iter().cloned());
    let mut index = paused.steps.len();
    for record in &won {
        let answer = Step::FunctionResult {
            call_id: record.id.clone(),
            result: approval::timed_out_answer(),
            name: Some(approval::APPROVAL_FUNCTION.to_owned()),
            is_error: None,
            hooks: None,
        };
        state.inner.store.append_step(id, index, &answer).await?;
        conversation.push(answer);
        index += 1;
    }
    state
        .inner
        .store
        .update_status(
            id,
            &StatusUpdate {
                status: InteractionStatus::InProgress,
                usage: None,
                errors: Vec::new(),
                updated: hookbox_store::time::now_rfc3339(),
            },
        )
        .await?;
    tracing::info!(interaction_id = %id, calls = won.len(), "nobody approved paused calls in time: they are denied and the interaction goes on");
    let tools = paused
        .extra
        .get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice);
    let agent = match paused.agent.as_deref() {
        Some(name) if !BUILTIN_AGENTS.contains(&name) => {
            state
                .inner
                .store
                .get_agent(project, strip_resource_prefix(name, "agents"))
                .await?
        }
        _ => None,
    };
    let run = run::RunSpec {
        project: project.clone(),
        running,
        id: id.to_owned(),
        environment_id,
        model_name: paused
            .extra
            .get("agent_config")
            .and_then(|c| c.get("model"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| agent.as_ref()?.agent_config.as_ref()?.model.clone()),
        system_instruction: paused
            .extra
            .get("system_instruction")
            .or(agent.as_ref().and_then(|a| a.system_instruction.as_ref()))
            .and_then(request::instruction_text),
        conversation,
        first_index: index,
        keep: true,
        functions: request::function_tools(tools).unwrap_or_default(),
        search: request::tool_search(tools, &request::function_tools(tools).unwrap_or_default())
            .unwrap_or_default(),
        // The stored tools carry no header values: servers are reached without them.
        mcp: request::mcp_servers(tools.map(request::without_redacted_headers).as_deref())
            .unwrap_or_default(),
        agent: paused.agent.clone().unwrap_or_default(),
        input: None,
        prior_usage: paused.usage.clone(),
        settled: won,
        live: paused.extra.get("live") == Some(&Value::Bool(true)),
    };
    run::start_unwatched(state, run)?;
    Ok(true)
}
