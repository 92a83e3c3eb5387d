//! Calls paused for a reviewer (a pre hook's `"decision": "ask"`, hookbox extension): the
//! listing of their records (`GET /approvals`, what the console's Approvals page shows) and the
//! sweeper that denies the ones nobody answered before their deadline (`--ask-timeout`). The
//! paused interaction then goes on in place: its approval requests get a timed-out answer, the
//! model sees each such call denied, and the interaction ends as any other. Paused calls live
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
use hookbox_protocol::api::InteractionStatus;
use hookbox_store::{ApprovalFilter, ApprovalState, InteractionFilter, Page};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::{ApiError, ApiResult, AppState, Project};

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
                match crate::interactions::resume_timed_out(state, &project, &paused.id).await {
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
    let (Some(_), Some(env)) = (state.inner.cluster.as_ref(), environment_id) else {
        return Ok(true);
    };
    Ok(matches!(
        crate::cluster::place(state.inner.cluster.as_ref(), env, false).await?,
        crate::cluster::Placement::Here
    ))
}
