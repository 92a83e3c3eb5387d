//! What a request refers to, looked up in the store: the agent it names (a built-in one, or one
//! created with `POST /agents`), the environment it runs in (named, described by a spec that
//! may name an existing one, the one of the interaction it continues, or a new one), and the
//! steps of the `previous_interaction_id` chain.

use hookbox_agent::seams::EnvironmentSetup;
use hookbox_protocol::api::{
    Agent, CreateInteractionRequest, EnvironmentRef, EnvironmentStatus, Step,
};

use crate::error::{ApiError, ApiResult};
use crate::{AppState, BUILTIN_AGENTS, Project, environments, strip_resource_prefix};

/// How deep `previous_interaction_id` chains are followed.
const MAX_HISTORY_DEPTH: usize = 256;

/// The stored agent `req` names; `None` for a built-in one.
pub(crate) async fn resolve_agent(
    state: &AppState,
    project: &Project,
    req: &CreateInteractionRequest,
) -> ApiResult<Option<Agent>> {
    let Some(name) = req.agent.as_deref() else {
        if req.model.is_some() {
            return Err(ApiError::bad_request(
                "hookbox serves agent interactions only: set `agent` (e.g. \"antigravity-preview-09-2026\") instead of `model`.",
            ));
        }
        return Err(ApiError::bad_request(
            "`agent` is required (e.g. \"antigravity-preview-09-2026\").",
        ));
    };
    if BUILTIN_AGENTS.contains(&name) {
        return Ok(None);
    }
    let id = strip_resource_prefix(name, "agents");
    match state.inner.store.get_agent(project, id).await? {
        Some(agent) => Ok(Some(agent)),
        None => Err(ApiError::bad_request(format!(
            "Unknown agent `{name}`. Use one of {} or the id of an agent created with POST /agents.",
            BUILTIN_AGENTS.join(", ")
        ))),
    }
}

/// The id of the existing environment a request runs in, if it names one (directly, in a spec,
/// or through the interaction it continues).
pub(crate) fn existing_environment(
    requested: Option<&EnvironmentRef>,
    previous_env: Option<&str>,
) -> Option<String> {
    match requested {
        Some(EnvironmentRef::Id(id)) => Some(strip_resource_prefix(id, "environments").to_owned()),
        Some(EnvironmentRef::Spec(spec)) => spec
            .environment_id
            .as_deref()
            .map(|id| strip_resource_prefix(id, "environments").to_owned()),
        None => previous_env.map(str::to_owned),
    }
}

/// Creates or resolves the environment the run uses; returns its id, and whether it is new
/// (created here, so this replica must take it).
pub(crate) async fn resolve_environment(
    state: &AppState,
    project: &Project,
    requested: Option<&EnvironmentRef>,
    previous_env: Option<&str>,
) -> ApiResult<(String, bool)> {
    let store = &state.inner.store;
    let provider = &state.inner.environments;
    let now = hookbox_store::time::now_rfc3339();
    match requested {
        Some(EnvironmentRef::Id(id)) => {
            let id = strip_resource_prefix(id, "environments");
            crate::lifecycle::active_record(state, project, id).await?;
            Ok((id.to_owned(), false))
        }
        Some(EnvironmentRef::Spec(spec)) => {
            environments::check_credentials(
                state,
                project,
                spec.network.as_ref(),
                "environment.network",
            )
            .await?;
            environments::check_mode_fields(
                spec.mode.as_deref(),
                spec.custom_config.as_ref(),
                None,
                "environment.",
            )?;
            let setup = EnvironmentSetup {
                sources: spec.sources.clone().unwrap_or_default(),
                network: spec.network.clone(),
                env: spec.env.clone(),
                ..EnvironmentSetup::default()
            };
            if let Some(existing) = spec.environment_id.as_deref() {
                let id = strip_resource_prefix(existing, "environments");
                let mut record = store.get_environment(project, id).await?.ok_or_else(|| {
                    ApiError::not_found(format!(
                        "Environment `{id}` (environment.environment_id) not found."
                    ))
                })?;
                if record.environment.status == Some(EnvironmentStatus::Expired) {
                    return Err(crate::lifecycle::expired_error(&record));
                }
                provider.update(id, &setup).await?;
                let sources = record.environment.sources.get_or_insert_with(Vec::new);
                sources.extend(setup.sources);
                if setup.network.is_some() {
                    record.environment.network = setup.network;
                }
                if setup.env.is_some() {
                    record.env = setup.env;
                }
                if spec.custom_config.is_some() {
                    record
                        .environment
                        .custom_config
                        .clone_from(&spec.custom_config);
                }
                record.environment.updated = Some(now.clone());
                record.environment.last_accessed = Some(now);
                store.put_environment(project, &record).await?;
                return Ok((id.to_owned(), false));
            }
            Ok((
                environments::create_environment(
                    state,
                    project,
                    setup,
                    spec.custom_config.clone(),
                    None,
                )
                .await?,
                true,
            ))
        }
        None => match previous_env {
            Some(id) => {
                crate::lifecycle::active_record(state, project, id).await?;
                Ok((id.to_owned(), false))
            }
            None => Ok((
                environments::create_environment(
                    state,
                    project,
                    EnvironmentSetup::default(),
                    None,
                    None,
                )
                .await?,
                true,
            )),
        },
    }
}

/// The steps of the `previous_interaction_id` chain, oldest first, and the newest one's env.
pub(crate) async fn history(
    state: &AppState,
    project: &Project,
    previous: &str,
) -> ApiResult<(Vec<Step>, Option<String>)> {
    let mut chain = Vec::new();
    let mut next = Some(previous.to_owned());
    let mut env = None;
    while let Some(id) = next.take() {
        if chain.len() >= MAX_HISTORY_DEPTH {
            break;
        }
        let Some(i) = state.inner.store.get_interaction(project, &id).await? else {
            if chain.is_empty() {
                return Err(ApiError::not_found(format!(
                    "Interaction `{id}` (previous_interaction_id) not found."
                )));
            }
            break;
        };
        if chain.is_empty() {
            if i.status.is_running() {
                return Err(ApiError::bad_request(format!(
                    "Interaction `{id}` (previous_interaction_id) is still {}; wait for it to finish.",
                    i.status
                )));
            }
            env.clone_from(&i.environment_id);
        }
        next.clone_from(&i.previous_interaction_id);
        chain.push(i.steps);
    }
    chain.reverse();
    Ok((chain.into_iter().flatten().collect(), env))
}
