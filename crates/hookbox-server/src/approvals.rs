//! Calls paused for a reviewer (a pre hook's `"decision": "ask"`, hookbox extension): the
//! sweeper that denies the approval requests nobody answered before their deadline
//! (`--ask-timeout`). The paused interaction then goes on in place: its approval requests get a
//! timed-out answer, the model sees each such call denied, and the interaction ends as any
//! other. Paused interactions live only in the store, so a restart loses none: the next sweep
//! finds them.
//!
//! Among replicas, an interaction is timed out by the replica that holds its environment (the
//! one continuations are forwarded to), under the same lock a continuation is stored with.

use std::time::Duration;

use hookbox_protocol::api::InteractionStatus;
use hookbox_store::{InteractionFilter, Page};

use crate::{ApiResult, AppState, Project};

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
