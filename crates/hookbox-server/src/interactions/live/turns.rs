//! The socket-independent half of a live interaction: creating it, running one turn through
//! the same path as `POST /interactions`, an answer over REST going on in place, and its end.

use super::*;

/// Ends live interaction `i` (between turns) with `status`: `completed` by the client's
/// `interaction.complete`, `cancelled` by its cancel. Calls still paused for a reviewer wait
/// for nobody any more.
pub(super) async fn end(
    state: &AppState,
    project: &Project,
    i: &Interaction,
    status: InteractionStatus,
) -> ApiResult<()> {
    if i.status == InteractionStatus::RequiresAction {
        state.inner.store.withdraw_approvals(project, &i.id).await?;
    }
    let errors = match status {
        InteractionStatus::Cancelled => vec![InteractionError {
            code: "cancelled".into(),
            message: "the interaction was cancelled".into(),
        }],
        _ => Vec::new(),
    };
    state
        .inner
        .store
        .update_status(
            &i.id,
            &StatusUpdate {
                status,
                usage: i.usage.clone(),
                errors,
                updated: hookbox_store::time::now_rfc3339(),
            },
        )
        .await?;
    state.wake_webhooks();
    tracing::info!(name: hookbox_protocol::events::INTERACTION_FINISHED, interaction_id = %i.id, status = %status, "interaction finished");
    Ok(())
}

/// `interaction.create`: a new live interaction, `idle`, under a new id; in
/// `previous_interaction_id`'s environment, continuing its history, when named, else in a new
/// environment.
pub(crate) async fn create_live(
    state: &AppState,
    project: &Project,
    create: CreateEvent,
) -> ApiResult<Interaction> {
    if create.store == Some(false) {
        return Err(ApiError::bad_request(
            "A live interaction is always stored (`store: false` is not supported on a live socket).",
        ));
    }
    let functions = request::function_tools(create.tools.as_deref())?;
    let mcp = request::mcp_servers(create.tools.as_deref())?;
    request::tool_search(create.tools.as_deref(), &functions)?;
    request::check_function_names(&functions, &mcp)?;
    let previous = match create.previous_interaction_id.as_deref() {
        Some(prev) => Some(
            state
                .inner
                .store
                .get_interaction(project, prev)
                .await?
                .ok_or_else(|| {
                    ApiError::not_found(format!(
                        "Interaction `{prev}` (previous_interaction_id) not found."
                    ))
                })?,
        ),
        None => None,
    };
    let previous_env = match &previous {
        Some(p) => resolve::history(state, project, &p.id).await?.1,
        None => None,
    };
    let (environment_id, created) =
        resolve::resolve_environment(state, project, None, previous_env.as_deref()).await?;
    if created {
        crate::holder::take_new(state, &environment_id).await?;
    }
    let now = hookbox_store::time::now_rfc3339();
    let mut i = Interaction::new(new_id("int"), InteractionStatus::Idle);
    i.agent = previous.as_ref().and_then(|p| p.agent.clone());
    i.environment_id = Some(environment_id);
    i.created = Some(now.clone());
    i.updated = Some(now);
    i.previous_interaction_id
        .clone_from(&create.previous_interaction_id);
    i.extra.insert(LIVE.into(), Value::Bool(true));
    if let Some(tools) = &create.tools {
        i.extra
            .insert("tools".into(), Value::Array(request::redacted_tools(tools)));
    }
    if let Some(instruction) = &create.system_instruction {
        i.extra
            .insert("system_instruction".into(), instruction.clone());
    }
    if let Some(model) = &create.model {
        i.extra
            .insert("agent_config".into(), serde_json::json!({"model": model}));
    }
    state.inner.store.create_interaction(project, &i).await?;
    tracing::info!(interaction_id = %i.id, environment_id = ?i.environment_id, "live interaction created");
    Ok(i)
}

/// One turn of live interaction `id` with `new_steps` as its input, through the same run as
/// `POST /interactions`. `answering`: the steps answer what a `requires_action` turn waits for
/// (`answers` settle its paused calls), else the interaction must be `idle`. The steps are
/// stored, the status set `in_progress`, and the run started; its events and its end.
pub(crate) async fn turn(
    state: &AppState,
    project: &Project,
    id: &str,
    new_steps: Vec<Step>,
    answers: &[Answer],
    answering: bool,
) -> ApiResult<(
    broadcast::Receiver<Live>,
    tokio::task::JoinHandle<Interaction>,
)> {
    let load = || crate::interactions::load(state, project, id);
    let mut i = load().await?;
    // The previous turn's run stays registered for a moment after it stored its end.
    if !i.status.is_running()
        && let Some(mut previous) = state.inner.running.subscribe(id)
    {
        loop {
            match previous.recv().await {
                Ok(Live::Finished(_)) | Err(RecvError::Closed) => break,
                Ok(_) | Err(RecvError::Lagged(_)) => {}
            }
        }
        i = load().await?;
    }
    if !is_live(&i) {
        return Err(ApiError::failed_precondition(format!(
            "Interaction `{id}` was not made on a live socket; continue it with POST /interactions (previous_interaction_id), or start a live one with interaction.create."
        )));
    }
    match (i.status, answering) {
        (InteractionStatus::Idle, false) | (InteractionStatus::RequiresAction, true) => {}
        (InteractionStatus::RequiresAction, false) => {
            return Err(ApiError::failed_precondition(format!(
                "Interaction `{id}` waits for answers to its function calls (requires_action): answer them over REST (POST /interactions with previous_interaction_id `{id}`)."
            )));
        }
        (status, _) if status.is_running() => {
            return Err(ApiError::failed_precondition(format!(
                "Interaction `{id}` is still {status}; wait for its turn to end."
            )));
        }
        (status, _) => {
            return Err(ApiError::failed_precondition(format!(
                "Interaction `{id}` is {status}: it takes no more input."
            )));
        }
    }
    if new_steps.is_empty() {
        return Err(ApiError::bad_request("The input is empty."));
    }
    let Some(environment_id) = i.environment_id.clone() else {
        return Err(ApiError::internal(
            &"a live interaction without an environment",
        ));
    };
    let running = state.inner.quotas.start_interaction(project).await?;
    // Settled only once nothing else can refuse: of every answer and the sweeper, one wins.
    let settled: Vec<ApprovalRecord> = if answers.is_empty() {
        Vec::new()
    } else {
        let settle = approvals::settlement(id, id, answers);
        match state.inner.store.settle_approvals(project, &settle).await? {
            hookbox_store::approvals::Settled::Won(records) => records,
            hookbox_store::approvals::Settled::Refused(now) => {
                return Err(now
                    .iter()
                    .find(|r| r.state != hookbox_store::approvals::ApprovalState::Pending)
                    .map_or_else(
                        || {
                            ApiError::bad_request(format!(
                                "The approval requests of `{id}` are gone."
                            ))
                        },
                        approvals::already_settled,
                    ));
            }
        }
    };
    let mut conversation = match i.previous_interaction_id.as_deref() {
        Some(previous) => resolve::history(state, project, previous).await?.0,
        None => Vec::new(),
    };
    conversation.extend(i.steps.iter().cloned());
    let mut index = i.steps.len();
    for step in &new_steps {
        state.inner.store.append_step(id, index, step).await?;
        conversation.push(step.clone());
        index += 1;
    }
    state
        .inner
        .store
        .update_status(
            id,
            &StatusUpdate {
                status: InteractionStatus::InProgress,
                usage: i.usage.clone(),
                errors: Vec::new(),
                updated: hookbox_store::time::now_rfc3339(),
            },
        )
        .await?;
    let tools = i
        .extra
        .get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice);
    let functions = request::function_tools(tools).unwrap_or_default();
    // A stored tool list was checked when the interaction was created.
    let search = request::tool_search(tools, &functions).unwrap_or_default();
    let spec = run::RunSpec {
        project: project.clone(),
        running,
        id: id.to_owned(),
        environment_id,
        model_name: i
            .extra
            .get("agent_config")
            .and_then(|c| c.get("model"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        system_instruction: i
            .extra
            .get("system_instruction")
            .and_then(request::instruction_text),
        conversation,
        first_index: index,
        keep: true,
        functions,
        search,
        // The stored tools carry no header values: servers are reached without them.
        mcp: request::mcp_servers(tools.map(request::without_redacted_headers).as_deref())
            .unwrap_or_default(),
        agent: i.agent.clone().unwrap_or_default(),
        input: Some(new_steps),
        prior_usage: i.usage.clone(),
        settled,
        live: true,
    };
    run::start(state, spec)
}

/// `POST /interactions` answering what live interaction `paused` waits for: the answer goes on
/// in place (the same interaction, streamed to its socket), not as a new interaction.
pub(crate) async fn answer_in_place(
    state: &AppState,
    project: &Project,
    paused: &Interaction,
    new_steps: Vec<Step>,
    answers: &[Answer],
) -> ApiResult<(
    broadcast::Receiver<Live>,
    tokio::task::JoinHandle<Interaction>,
)> {
    turn(state, project, &paused.id, new_steps, answers, true).await
}
