//! A continuation's answers to calls paused for a reviewer, and the records behind them. The
//! records (what the paused run recorded: environment, tool, arguments and their hash, deadline,
//! state) decide, never what the interaction's steps say: [`check_result_steps`] refuses result
//! steps that answer nothing the previous interaction waits for, [`approval_answers`] reads the
//! answers, [`check_approval_environment`] refuses a continuation that would run them anywhere
//! but where they were paused, and [`store_continuation`] stores it in the transaction that
//! settles them (`Store::create_interaction_settling`; of every answer and the deadline's
//! sweeper, one settles each call). A run records each call a hook paused
//! ([`paused_record`]) and is handed the calls it settled ([`settled_calls`]).
//!
//! The deadline's sweeper, which times records out and resumes their interaction, is
//! [`crate::approvals`].

use hookbox_agent::approval;
use hookbox_protocol::ToolName;
use hookbox_protocol::api::{Agent, EnvironmentRef, Interaction, InteractionStatus, Step};
use hookbox_store::{ApprovalFilter, ApprovalRecord, ApprovalState, Settle, Settled, Settlement};
use serde_json::Value;

use super::request::result_of;
use crate::error::{ApiError, ApiResult};
use crate::{AppState, Project, strip_resource_prefix};

/// A client's answer to one approval request of the interaction it continues.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The record it answers.
    record: ApprovalRecord,
    verdict: approval::Verdict,
}

/// Reads the answers to approval requests in `new_steps`, from the records of `previous` (what
/// its run paused), and names them after the reserved function so the record says what they
/// are and models never see them. Refuses input that could pass for the server's own requests
/// (only the loop makes those), an answer that cannot be read, and one to a request that is
/// settled already (saying by whom and how; the conditional update at store time decides
/// races).
pub(crate) fn approval_answers(
    previous: Option<&Interaction>,
    records: &[ApprovalRecord],
    new_steps: &mut [Step],
) -> ApiResult<Vec<Answer>> {
    let mut answers = Vec::new();
    for (i, step) in new_steps.iter_mut().enumerate() {
        match step {
            Step::FunctionCall { name, .. } if name == approval::APPROVAL_FUNCTION => {
                return Err(ApiError::bad_request(format!(
                    "Invalid `input[{i}]`: `{name}` calls are hookbox's approval requests; only the server makes them."
                )));
            }
            // Not even one that does not parse as a call.
            Step::Other(v)
                if v.get("name").and_then(Value::as_str) == Some(approval::APPROVAL_FUNCTION)
                    && result_of(step).is_none() =>
            {
                return Err(ApiError::bad_request(format!(
                    "Invalid `input[{i}]`: `{}` steps are hookbox's approval requests; only the server makes them.",
                    approval::APPROVAL_FUNCTION
                )));
            }
            Step::FunctionResult {
                call_id,
                result,
                name,
                ..
            } => {
                let Some(record) = records.iter().find(|r| r.id == *call_id) else {
                    if name.as_deref() == Some(approval::APPROVAL_FUNCTION)
                        || approval::is_approval_id(call_id)
                    {
                        return Err(ApiError::bad_request(format!(
                            "Invalid `input[{i}]`: `{call_id}` is no approval request of {}; a `function_result` for `{}` answers only a request a hook's ask made.",
                            previous.map_or_else(
                                || "any interaction (set `previous_interaction_id`)".to_owned(),
                                |p| format!("interaction `{}`", p.id)
                            ),
                            approval::APPROVAL_FUNCTION
                        )));
                    }
                    continue;
                };
                if record.state != ApprovalState::Pending {
                    return Err(already_settled(record));
                }
                let verdict = approval::parse_answer(result).map_err(|why| {
                    ApiError::bad_request(format!(
                        "Invalid `input[{i}].result` for approval request `{call_id}`: {why}."
                    ))
                })?;
                if answers.iter().any(|a: &Answer| a.record.id == record.id) {
                    return Err(ApiError::bad_request(format!(
                        "Invalid `input`: approval request `{call_id}` is answered twice."
                    )));
                }
                *name = Some(approval::APPROVAL_FUNCTION.to_owned());
                answers.push(Answer {
                    record: record.clone(),
                    verdict,
                });
            }
            _ => {}
        }
    }
    Ok(answers)
}

/// The 400 for an answer to a request that is settled already.
pub(crate) fn already_settled(record: &ApprovalRecord) -> ApiError {
    let by = match record.settled_by.as_deref() {
        Some(hookbox_store::approvals::SWEEPER) => "by the deadline's sweeper".to_owned(),
        Some(by) => format!("by interaction `{by}`"),
        None => "before".to_owned(),
    };
    ApiError::bad_request(format!(
        "Approval request `{}` of interaction `{}` was already answered: {} {by}{}; a paused call is settled once.",
        record.id,
        record.interaction_id,
        record.state,
        record
            .settled_at
            .as_deref()
            .map(|at| format!(" at {at}"))
            .unwrap_or_default()
    ))
}

/// Every approval record of interaction `id`.
pub(crate) async fn approval_records(
    state: &AppState,
    project: &Project,
    id: &str,
) -> ApiResult<Vec<ApprovalRecord>> {
    let filter = ApprovalFilter {
        interaction_id: Some(id.to_owned()),
        state: None,
    };
    let mut page = hookbox_store::Page {
        size: Some(hookbox_store::Page::MAX_SIZE),
        token: None,
    };
    let mut records = Vec::new();
    loop {
        let batch = state
            .inner
            .store
            .list_approvals(project, &filter, &page)
            .await?;
        records.extend(batch.items);
        match batch.next_page_token {
            Some(token) => page.token = Some(token),
            None => return Ok(records),
        }
    }
}

/// Where a continuation would run, as `(environment id, where that comes from)`; `None`: a new
/// environment.
pub(crate) fn continuation_environment(
    requested: Option<&EnvironmentRef>,
    agent: Option<&Agent>,
    previous_env: Option<&str>,
) -> (Option<String>, String) {
    let (reference, from) = match (requested, agent.and_then(|a| a.base_environment.as_ref())) {
        (Some(r), _) => (Some(r), "`environment`".to_owned()),
        (None, Some(r)) => (
            Some(r),
            format!(
                "agent `{}`'s `base_environment`",
                agent.and_then(|a| a.id.as_deref()).unwrap_or_default()
            ),
        ),
        (None, None) => (None, "the interaction it continues".to_owned()),
    };
    match reference {
        None => (previous_env.map(str::to_owned), from),
        Some(EnvironmentRef::Id(id)) => (
            Some(strip_resource_prefix(id, "environments").to_owned()),
            from,
        ),
        Some(EnvironmentRef::Spec(spec)) => match spec.environment_id.as_deref() {
            Some(id) => (
                Some(strip_resource_prefix(id, "environments").to_owned()),
                format!("{from} (`environment_id`)"),
            ),
            None => (
                None,
                format!("{from}, a spec without `environment_id`, which makes a new environment"),
            ),
        },
    }
}

/// Refuses a continuation that answers approval requests but would run anywhere else than
/// where their hooks ran: an approved call runs only there.
pub(crate) fn check_approval_environment(
    answers: &[Answer],
    target: &(Option<String>, String),
) -> ApiResult<()> {
    let (env, from) = target;
    for answer in answers {
        if env.as_deref() != Some(answer.record.environment_id.as_str()) {
            return Err(ApiError::bad_request(format!(
                "This continuation answers approval request `{}`, whose call was paused in environment `{}`, but it would run in {} (from {from}). An approved call runs only where its hooks ran: leave `environment` out (and use an agent without a `base_environment`), or name environment `{}`.",
                answer.record.id,
                answer.record.environment_id,
                env.as_deref().map_or_else(
                    || "a new environment".to_owned(),
                    |e| format!("environment `{e}`")
                ),
                answer.record.environment_id
            )));
        }
    }
    Ok(())
}

/// Checks the result steps of a continuation's input against what `previous` waits for:
/// every `function_result`, `code_execution_result`, `mcp_server_tool_result` or other
/// `*_result` must answer a call `previous` waits for (a client function's call, or a pending
/// approval request), so it must be `requires_action`, and every call it waits for must get
/// exactly one. hookbox runs the other tools itself, so their results never come from a
/// client; a result with no interaction to answer is refused too.
pub(crate) fn check_result_steps(
    previous: Option<&Interaction>,
    records: &[ApprovalRecord],
    new_steps: &[Step],
) -> ApiResult<()> {
    let results: Vec<(usize, &str, Option<&str>)> = new_steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| result_of(s).map(|(ty, id)| (i, ty, id)))
        .collect();
    let Some(previous) = previous else {
        return match results.first() {
            None => Ok(()),
            Some((i, ty, _)) => Err(ApiError::bad_request(format!(
                "Invalid `input` step {i}: a `{ty}` answers a call an interaction waits for; set `previous_interaction_id` to the one that is `requires_action`."
            ))),
        };
    };
    if previous.status != InteractionStatus::RequiresAction {
        if results.is_empty() {
            return Ok(());
        }
        return Err(ApiError::bad_request(format!(
            "Interaction `{}` (previous_interaction_id) is `{}`, not `requires_action`: it waits for no `function_result`.",
            previous.id, previous.status
        )));
    }
    let turn = &previous.steps[hookbox_agent::model::current_turn_start(&previous.steps)..];
    let pending = waiting_calls(turn, records);
    let waits_for = || {
        pending
            .iter()
            .map(|(p, n)| format!("`{p}` ({n})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut answered: Vec<&str> = Vec::new();
    for (i, ty, id) in &results {
        let id = id.unwrap_or_default();
        if *ty != "function_result" {
            return Err(ApiError::bad_request(format!(
                "Invalid `input` step {i}: a `{ty}` (call_id `{id}`) is not something a client sends: hookbox runs its sandbox and MCP tools itself. Interaction `{}` waits only for `function_result`s, for: {}.",
                previous.id,
                waits_for()
            )));
        }
        if !pending.iter().any(|(p, _)| p == &id) {
            if let Some(settled) = records.iter().find(|r| r.id == id) {
                return Err(already_settled(settled));
            }
            return Err(ApiError::bad_request(format!(
                "Invalid `input`: `function_result` (step {i}) answers call_id `{id}`, which interaction `{}` does not wait for (it waits for: {}).",
                previous.id,
                waits_for()
            )));
        }
        if answered.contains(&id) {
            return Err(ApiError::bad_request(format!(
                "Invalid `input`: call_id `{id}` is answered twice."
            )));
        }
        answered.push(id);
    }
    let missing: Vec<String> = pending
        .iter()
        .filter(|(p, _)| !answered.contains(p))
        .map(|(p, n)| format!("`{p}` ({n})"))
        .collect();
    if !missing.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Invalid `input`: interaction `{}` also waits for a `function_result` for {}.",
            previous.id,
            missing.join(", ")
        )));
    }
    Ok(())
}

/// The `function_call`s of `turn` that wait for the client's answer, as `(id, name)`: client
/// functions' calls with no result yet, and the approval requests whose record (what the run
/// paused, not what a step says) is still pending. A call paused for a reviewer is answered
/// through its approval request, not directly; a request-shaped step without a pending record
/// (a model's own call of the reserved name) waits for nothing.
pub(crate) fn waiting_calls<'a>(
    turn: &'a [Step],
    records: &[ApprovalRecord],
) -> Vec<(&'a str, &'a str)> {
    let results: Vec<&str> = turn
        .iter()
        .filter_map(|s| result_of(s).and_then(|(_, id)| id))
        .collect();
    turn.iter()
        .filter_map(|s| match s {
            Step::FunctionCall { id, name, .. } if !results.contains(&id.as_str()) => {
                let waits = if name == approval::APPROVAL_FUNCTION {
                    records
                        .iter()
                        .any(|r| r.id == *id && r.state == ApprovalState::Pending)
                } else {
                    !records.iter().any(|r| r.call_id == *id)
                };
                waits.then_some((id.as_str(), name.as_str()))
            }
            _ => None,
        })
        .collect()
}

/// What settles the records `answers` answer: each becomes its verdict, an approval that
/// came after the record's deadline a time-out.
pub(crate) fn settlement(paused: &str, by: &str, answers: &[Answer]) -> Settle {
    let now = chrono::Utc::now();
    Settle {
        interaction_id: paused.to_owned(),
        by: by.to_owned(),
        settlements: answers
            .iter()
            .map(|a| {
                let expired = chrono::DateTime::parse_from_rfc3339(&a.record.expires_at)
                    .map_or(true, |deadline| now >= deadline);
                let (state, reviewer_reason) = match &a.verdict {
                    approval::Verdict::Approved if expired => (ApprovalState::TimedOut, None),
                    approval::Verdict::Approved => (ApprovalState::Approved, None),
                    approval::Verdict::Denied(reason) => (ApprovalState::Denied, reason.clone()),
                    approval::Verdict::TimedOut => (ApprovalState::TimedOut, None),
                };
                Settlement {
                    id: a.record.id.clone(),
                    state,
                    reviewer_reason,
                }
            })
            .collect(),
        now: hookbox_store::time::now_rfc3339(),
    }
}

/// What a run is told about records it settled: the call, where and with what it runs, and the
/// verdict. A record whose arguments no longer match their hash, or whose tool is unknown,
/// does not run (denied, saying why). Each is logged as settled (once: only the run that won
/// it is handed it).
pub(crate) fn settled_calls(records: &[ApprovalRecord]) -> Vec<approval::SettledCall> {
    for record in records {
        tracing::info!(
            name: hookbox_protocol::events::APPROVAL_SETTLED,
            tool = %record.tool,
            call_id = %record.call_id,
            approval_id = %record.id,
            paused_interaction = %record.interaction_id,
            outcome = record.state.as_str(),
            reason = record.reviewer_reason.as_deref().unwrap_or(""),
            "a paused call is settled"
        );
    }
    records
        .iter()
        .filter_map(|r| {
            let Ok(tool) = r.tool.parse::<ToolName>() else {
                tracing::error!(interaction_id = %r.interaction_id, approval = %r.id, tool = %r.tool, "a paused call names no tool; it cannot run");
                return None;
            };
            let mut verdict = match r.state {
                ApprovalState::Approved => approval::Verdict::Approved,
                ApprovalState::Denied => approval::Verdict::Denied(r.reviewer_reason.clone()),
                ApprovalState::TimedOut | ApprovalState::Pending => approval::Verdict::TimedOut,
            };
            if verdict == approval::Verdict::Approved && !r.args_intact() {
                tracing::error!(interaction_id = %r.interaction_id, approval = %r.id, "a paused call's arguments do not match their hash; it does not run");
                verdict = approval::Verdict::Denied(Some(
                    "the paused call's recorded arguments failed their integrity check".into(),
                ));
            }
            Some(approval::SettledCall {
                call_id: r.call_id.clone(),
                tool,
                args: r.args.clone(),
                environment_id: r.environment_id.clone(),
                verdict,
            })
        })
        .collect()
}

/// The record of a call a hook paused in run `interaction_id` (in environment `environment_id`),
/// `pending` until its deadline: what may run if approved, and where.
pub(crate) fn paused_record(
    interaction_id: &str,
    environment_id: &str,
    call: approval::PausedCall,
) -> ApprovalRecord {
    let (id, expires_at) = (call.approval_id(), call.expires_at_rfc3339());
    ApprovalRecord {
        id,
        interaction_id: interaction_id.to_owned(),
        call_id: call.call_id.clone(),
        environment_id: environment_id.to_owned(),
        tool: call.tool.as_str().to_owned(),
        args_sha256: hookbox_store::approvals::args_sha256(&call.args),
        args: call.args,
        reason: call.reason,
        hook_group: call.group,
        expires_at,
        created: hookbox_store::time::now_rfc3339(),
        state: ApprovalState::Pending,
        settled_by: None,
        settled_at: None,
        reviewer_reason: None,
    }
}

/// Stores `interaction`; a continuation that answers paused calls of `previous` only in the
/// transaction that settles them, or not at all: of any number of answers (stored,
/// `store: false`, deleted, concurrent, on any replica) and the deadline's sweeper, one settles
/// each call. Returns the records it settled (the calls its run is handed).
pub(crate) async fn store_continuation(
    state: &AppState,
    project: &Project,
    interaction: &Interaction,
    previous: Option<&Interaction>,
    answers: &[Answer],
) -> ApiResult<Vec<ApprovalRecord>> {
    let Some(paused) = previous.filter(|_| !answers.is_empty()) else {
        state
            .inner
            .store
            .create_interaction(project, interaction)
            .await?;
        return Ok(Vec::new());
    };
    let settle = settlement(&paused.id, &interaction.id, answers);
    match state
        .inner
        .store
        .create_interaction_settling(project, interaction, &settle)
        .await?
    {
        Settled::Won(records) => Ok(records),
        Settled::Refused(now) => Err(now
            .iter()
            .find(|r| r.state != ApprovalState::Pending)
            .map_or_else(
                || {
                    ApiError::bad_request(format!(
                        "The approval requests this continuation answers are gone (interaction `{}` was deleted meanwhile).",
                        paused.id
                    ))
                },
                already_settled,
            )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interactions::request::input_steps;
    use hookbox_protocol::api::Input;
    use serde_json::json;

    fn input(items: Value) -> Vec<Step> {
        let Value::Array(items) = items else {
            panic!("a list")
        };
        input_steps(&Input::List(items)).unwrap()
    }

    fn paused() -> Interaction {
        let mut i = Interaction::new("int_p".to_owned(), InteractionStatus::RequiresAction);
        i.steps = vec![
            Step::user_text("go"),
            hookbox_agent::steps::call_step("call_1", "f", &json!({}), None),
        ];
        i
    }

    // Regression (issue 36): a client-supplied `code_execution_result` (or any result step)
    // was stored unchecked, and the approval check took it as an answer.
    #[test]
    fn result_steps_that_answer_nothing_pending_are_refused_for_every_result_type() {
        for step in [
            json!({"type": "code_execution_result", "call_id": "call_2", "result": "x"}),
            json!({"type": "mcp_server_tool_result", "call_id": "call_2", "result": "x"}),
            json!({"type": "google_search_result", "call_id": "call_2", "result": []}),
            json!({"type": "url_context_result", "call_id": "call_2"}),
            // A function_result that does not parse as one is still a result step.
            json!({"type": "function_result", "result": {"approved": true}}),
            json!({"type": "function_result", "call_id": "call_2", "result": "x"}),
        ] {
            let steps = input(json!([{"type": "text", "text": "hi"}, step.clone()]));
            let without = check_result_steps(None, &[], &steps).unwrap_err();
            assert!(
                without.message.contains("previous_interaction_id"),
                "{step}: {}",
                without.message
            );
            // Continuing an interaction that waits for `f`: only its function_result passes.
            let mut answered =
                input(json!([{"type": "function_result", "call_id": "call_1", "result": "ok"}]));
            answered.extend(input(json!([step.clone()])));
            let refused = check_result_steps(Some(&paused()), &[], &answered).unwrap_err();
            assert_eq!(
                refused.status,
                axum::http::StatusCode::BAD_REQUEST,
                "{step}"
            );
        }
        let ok = input(json!([{"type": "function_result", "call_id": "call_1", "result": "ok"}]));
        check_result_steps(Some(&paused()), &[], &ok).unwrap();
    }

    #[test]
    fn request_shaped_input_is_refused_even_when_it_does_not_parse() {
        for step in [
            json!({"type": "function_call", "id": "approval_x", "name": "hookbox_approval", "arguments": {}}),
            json!({"type": "function_call", "name": "hookbox_approval"}),
        ] {
            let mut steps = input(json!([step.clone()]));
            let err = approval_answers(None, &[], &mut steps).unwrap_err();
            assert!(err.message.contains("hookbox_approval"), "{step}");
        }
    }
}
