//! `/interactions`: create (blocking, `background`, or `stream`), get (JSON or SSE replay/resume),
//! cancel and delete. A create validates the request, resolves the environment and the history of
//! `previous_interaction_id`, stores the interaction, then runs the agent loop in its own task:
//! each step is appended to the store *before* it is broadcast, so what a client has seen is
//! durable. The run survives the client going away.
//!
//! A continuation that answers calls paused for a reviewer is checked against their records
//! (what the paused run recorded, never what its steps say), refused if it would run anywhere
//! but where they were paused, and stored only in the transaction that settles them
//! (`Store::create_interaction_settling`); its run is handed the settled calls. A run's
//! `LoopEvent::ApprovalRequested` is recorded before its request step is stored.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use axum::response::{IntoResponse, Response};
use hookbox_agent::agent_loop::{LoopContext, LoopEvent, LoopOutcome};
use hookbox_agent::approval;
use hookbox_agent::mcp::McpServerSpec;
use hookbox_agent::seams::EnvironmentSetup;
use hookbox_protocol::api::{
    Agent, Content, CreateInteractionRequest, EnvironmentRef, EnvironmentStatus, Input,
    Interaction, InteractionError, InteractionStatus, Step,
};
use hookbox_protocol::{HookEvent, InteractionHookPayload, ToolName};
use hookbox_store::{
    ApprovalFilter, ApprovalRecord, ApprovalState, EnvironmentRecord, Settle, Settled, Settlement,
    StatusUpdate,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::{broadcast, mpsc, watch};

use crate::error::{ApiError, ApiResult};
use crate::quota::RunningGuard;
use crate::{AppState, BUILTIN_AGENTS, Project, new_id, parse_json, strip_resource_prefix};

/// Messages from a running interaction to its SSE subscribers.
#[derive(Debug, Clone)]
pub enum Live {
    /// A step, already stored, at this index.
    Step(usize, Step),
    /// A piece of running code's stdout for the `code_execution_result` step that will be
    /// stored at `index`, starting at byte `offset` of that stdout. Never stored.
    Output {
        index: usize,
        offset: usize,
        text: String,
    },
    /// The run ended; the final stored interaction.
    Finished(Box<Interaction>),
}

/// Bookkeeping of a running interaction.
#[derive(Debug)]
pub struct Running {
    /// The environment it runs in (a draining server keeps that one until it ends).
    pub(crate) environment_id: String,
    events: broadcast::Sender<Live>,
    pub(crate) cancel: watch::Sender<bool>,
    finished: watch::Receiver<bool>,
}

/// How deep `previous_interaction_id` chains are followed.
const MAX_HISTORY_DEPTH: usize = 256;

const CONTENT_TYPES: &[&str] = &["text", "image", "audio", "document", "video"];

/// A live-event receiver for `id`, if it is running.
pub fn subscribe(state: &AppState, id: &str) -> Option<broadcast::Receiver<Live>> {
    state
        .inner
        .running
        .lock()
        .ok()?
        .get(id)
        .map(|r| r.events.subscribe())
}

/// Normalises `input` into steps (spec §3.1): text and content items become one `user_input`;
/// step objects are kept.
fn input_steps(input: &Input) -> ApiResult<Vec<Step>> {
    let content_value = |v: &Value| -> ApiResult<Content> {
        let mut v = v.clone();
        if let Some(obj) = v.as_object_mut()
            && !obj.contains_key("type")
            && obj.contains_key("text")
        {
            obj.insert("type".into(), Value::String("text".into()));
        }
        serde_json::from_value(v)
            .map_err(|e| ApiError::bad_request(format!("Invalid content in `input`: {e}.")))
    };
    match input {
        Input::Text(text) => Ok(vec![Step::user_text(text.clone())]),
        Input::Single(obj) => Ok(vec![Step::UserInput {
            content: Some(vec![content_value(&Value::Object(obj.clone()))?]),
        }]),
        Input::List(items) => {
            let mut steps = Vec::new();
            let mut pending: Vec<Content> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let ty = item.get("type").and_then(Value::as_str);
                let is_content = match ty {
                    Some(t) => CONTENT_TYPES.contains(&t),
                    None => item.get("text").is_some(),
                };
                if is_content {
                    pending.push(content_value(item)?);
                    continue;
                }
                if ty.is_none() {
                    return Err(ApiError::bad_request(format!(
                        "Invalid `input[{i}]`: expected a content object (`type` text, image, …) or a step (`type` user_input, function_result, …)."
                    )));
                }
                if !pending.is_empty() {
                    steps.push(Step::UserInput {
                        content: Some(std::mem::take(&mut pending)),
                    });
                }
                let step: Step = serde_json::from_value(item.clone())
                    .map_err(|e| ApiError::bad_request(format!("Invalid `input[{i}]`: {e}.")))?;
                steps.push(step);
            }
            if !pending.is_empty() {
                steps.push(Step::UserInput {
                    content: Some(pending),
                });
            }
            Ok(steps)
        }
    }
}

/// `system_instruction` as plain text (a string, a content object or a list of them).
fn instruction_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("text").and_then(Value::as_str).map(str::to_owned),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().filter_map(instruction_text).collect();
            (!parts.is_empty()).then(|| parts.join("\n"))
        }
        _ => None,
    }
}

async fn resolve_agent(
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

/// Creates or resolves the environment the run uses; returns its id.
/// The id of the existing environment a request runs in, if it names one (directly, in a spec,
/// or through the interaction it continues).
fn existing_environment(
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

async fn resolve_environment(
    state: &AppState,
    project: &Project,
    requested: Option<&EnvironmentRef>,
    previous_env: Option<&str>,
) -> ApiResult<String> {
    let store = &state.inner.store;
    let provider = &state.inner.environments;
    let now = hookbox_store::time::now_rfc3339();
    match requested {
        Some(EnvironmentRef::Id(id)) => {
            let id = strip_resource_prefix(id, "environments");
            crate::lifecycle::active_record(state, project, id).await?;
            Ok(id.to_owned())
        }
        Some(EnvironmentRef::Spec(spec)) => {
            check_credentials(state, project, spec.network.as_ref(), "environment.network").await?;
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
                record.environment.updated = Some(now.clone());
                record.environment.last_accessed = Some(now);
                store.put_environment(project, &record).await?;
                return Ok(id.to_owned());
            }
            create_environment(state, project, setup).await
        }
        None => match previous_env {
            Some(id) => {
                crate::lifecycle::active_record(state, project, id).await?;
                Ok(id.to_owned())
            }
            None => create_environment(state, project, EnvironmentSetup::default()).await,
        },
    }
}

/// Materialises and records a new environment of `project`, within its `environments` quota and
/// with its disk cap.
pub(crate) async fn create_environment(
    state: &AppState,
    project: &Project,
    mut setup: EnvironmentSetup,
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
    let record = EnvironmentRecord {
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
        },
        env: setup.env,
    };
    if let Err(e) = state.inner.store.put_environment(project, &record).await {
        let _ = state.inner.environments.delete(&id).await;
        return Err(e.into());
    }
    Ok(id)
}

/// The steps of the `previous_interaction_id` chain, oldest first, and the newest one's env.
async fn history(
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

/// The `function` tools of `tools` (the client runs them): checked names, unique, never one of
/// the sandbox's own tools. Other tool types are echoed and otherwise ignored here.
fn function_tools(tools: Option<&[Value]>) -> ApiResult<Vec<hookbox_agent::model::FunctionDecl>> {
    let mut functions: Vec<hookbox_agent::model::FunctionDecl> = Vec::new();
    for (i, tool) in tools.unwrap_or_default().iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            continue;
        }
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            return Err(ApiError::bad_request(format!(
                "Invalid `tools[{i}].name` `{name}`: 1-64 letters, digits, `_`, `-` or `.`, starting with a letter or `_`."
            )));
        }
        if name.parse::<ToolName>().is_ok() {
            return Err(ApiError::bad_request(format!(
                "Invalid `tools[{i}].name`: `{name}` is one of the sandbox's own tools; give the function another name."
            )));
        }
        if name == approval::APPROVAL_FUNCTION {
            return Err(ApiError::bad_request(format!(
                "Invalid `tools[{i}].name`: `{name}` is reserved for hookbox's approval requests; give the function another name."
            )));
        }
        if functions.iter().any(|f| f.name == name) {
            return Err(ApiError::bad_request(format!(
                "Invalid `tools[{i}].name`: `{name}` is declared twice."
            )));
        }
        let parameters = match tool.get("parameters") {
            None | Some(Value::Null) => serde_json::json!({"type": "object"}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "Invalid `tools[{i}].parameters`: expected a JSON schema object."
                )));
            }
        };
        functions.push(hookbox_agent::model::FunctionDecl {
            name: name.to_owned(),
            description: tool
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            parameters,
        });
    }
    Ok(functions)
}

/// A client's answer to one approval request of the interaction it continues.
#[derive(Debug)]
struct Answer {
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
fn approval_answers(
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
fn already_settled(record: &ApprovalRecord) -> ApiError {
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
async fn approval_records(
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
fn continuation_environment(
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
fn check_approval_environment(
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

/// The longest MCP server name (it is part of every name the model calls its tools by).
const MAX_MCP_SERVER_NAME: usize = 32;

/// The `mcp_server` tools of `tools`: a name (letters, digits, `_`, `-`; unique), an `http(s)`
/// URL, string headers, and `allowed_tools` (`[{"tools": [...]}]`).
fn mcp_servers(tools: Option<&[Value]>) -> ApiResult<Vec<McpServerSpec>> {
    let mut servers: Vec<McpServerSpec> = Vec::new();
    for (i, tool) in tools.unwrap_or_default().iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("mcp_server") {
            continue;
        }
        let bad = |field: &str, why: &str| {
            ApiError::bad_request(format!("Invalid `tools[{i}].{field}`: {why}."))
        };
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty()
            || name.len() > MAX_MCP_SERVER_NAME
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            return Err(bad(
                "name",
                &format!("`{name}` must be 1-{MAX_MCP_SERVER_NAME} letters, digits, `_` or `-`"),
            ));
        }
        if servers.iter().any(|s| s.name == name) {
            return Err(bad("name", &format!("`{name}` is declared twice")));
        }
        let url = tool.get("url").and_then(Value::as_str).unwrap_or_default();
        match reqwest::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
            _ => return Err(bad("url", &format!("`{url}` is not an http(s) URL"))),
        }
        let headers = match tool.get("headers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(map)) => {
                let mut headers = Vec::new();
                for (k, v) in map {
                    let Some(v) = v.as_str() else {
                        return Err(bad(&format!("headers.{k}"), "expected a string"));
                    };
                    // Refused here, never silently left out of the connection later.
                    if let Err(why) = hookbox_egress::inject::check_header_name(k)
                        .and_then(|()| hookbox_egress::inject::check_header_value(v))
                    {
                        return Err(bad(&format!("headers.{k}"), why));
                    }
                    // What an echoed interaction shows instead of a value: resending it would
                    // send the marker to the server as if it were the secret.
                    if v == REDACTED {
                        return Err(bad(
                            &format!("headers.{k}"),
                            &format!(
                                "`{REDACTED}` is the placeholder hookbox echoes instead of a header value, not a value; send the real value, or leave the header out"
                            ),
                        ));
                    }
                    headers.push((k.clone(), v.to_owned()));
                }
                headers
            }
            Some(_) => return Err(bad("headers", "expected an object of strings")),
        };
        let allowed_tools = match tool.get("allowed_tools") {
            None | Some(Value::Null) => None,
            Some(Value::Array(entries)) => {
                let mut names = Vec::new();
                for (j, entry) in entries.iter().enumerate() {
                    match entry.get("tools") {
                        None | Some(Value::Null) => {}
                        Some(Value::Array(list)) => {
                            for t in list {
                                match t.as_str() {
                                    Some(t) => names.push(t.to_owned()),
                                    None => {
                                        return Err(bad(
                                            &format!("allowed_tools[{j}].tools"),
                                            "expected tool names (strings)",
                                        ));
                                    }
                                }
                            }
                        }
                        Some(_) => {
                            return Err(bad(
                                &format!("allowed_tools[{j}].tools"),
                                "expected a list of tool names",
                            ));
                        }
                    }
                }
                Some(names)
            }
            Some(_) => {
                return Err(bad(
                    "allowed_tools",
                    "expected a list of {\"tools\": [...]}",
                ));
            }
        };
        servers.push(McpServerSpec {
            name: name.to_owned(),
            url: url.to_owned(),
            headers,
            allowed_tools,
        });
    }
    if servers.len() > hookbox_agent::mcp::MAX_SERVERS {
        return Err(ApiError::bad_request(format!(
            "Invalid `tools`: {} mcp_server entries; hookbox connects to at most {} MCP servers per interaction.",
            servers.len(),
            hookbox_agent::mcp::MAX_SERVERS
        )));
    }
    // The model calls a tool `<server>__<tool>`: a server named after another's prefix could
    // list a tool whose name is the other's (`a` + `b__c` and `a__b` + `c`).
    for s in &servers {
        if let Some(other) = servers
            .iter()
            .find(|o| o.name != s.name && s.name.starts_with(&format!("{}__", o.name)))
        {
            return Err(ApiError::bad_request(format!(
                "Invalid mcp_server name `{}`: it starts with `{}__`, the prefix of MCP server `{}`'s tools, so their tools' names could clash; rename one.",
                s.name, other.name, other.name
            )));
        }
    }
    Ok(servers)
}

/// What stored and echoed `tools` show instead of an `mcp_server` header's value.
pub(crate) const REDACTED: &str = "[redacted]";

/// Checks, when it is stored, what a stored request (a trigger's `interaction`) sends at every
/// run, as `POST /interactions` checks it: its `tools` (`at`: where the request is in the
/// body) and its embedded environment's `network` (`environment_at`: where that environment
/// is). A bad header name or value is refused here, naming the field, never silently dropped
/// at run time.
pub(crate) fn check_stored_request(
    tools: Option<&[Value]>,
    environment: Option<&Value>,
    at: &str,
    environment_at: &str,
) -> ApiResult<()> {
    let within = |e: ApiError| ApiError {
        message: format!("In `{at}`: {}", e.message),
        ..e
    };
    let functions = function_tools(tools).map_err(within)?;
    let servers = mcp_servers(tools).map_err(within)?;
    check_function_names(&functions, &servers).map_err(within)?;
    check_environment_network(environment, environment_at)
}

/// Refuses an embedded environment spec (JSON, at `at` in the body) whose `network` could not
/// be enforced as written.
pub(crate) fn check_environment_network(environment: Option<&Value>, at: &str) -> ApiResult<()> {
    if let Some(network) = environment.and_then(|e| e.get("network"))
        && let Err(e) = hookbox_sandbox::network::validate_policy(Some(network))
    {
        return Err(ApiError::bad_request(format!(
            "Invalid `{at}.network{}`: {}.",
            e.path, e.message
        )));
    }
    Ok(())
}

/// Refuses a client function whose name an MCP server's tools could take (`<server>__...`):
/// the model's call would be ambiguous.
fn check_function_names(
    functions: &[hookbox_agent::model::FunctionDecl],
    servers: &[McpServerSpec],
) -> ApiResult<()> {
    for f in functions {
        if let Some(s) = servers.iter().find(|s| {
            f.name
                .starts_with(&hookbox_agent::mcp::model_name(&s.name, ""))
        }) {
            return Err(ApiError::bad_request(format!(
                "Invalid function name `{}`: it starts with `{}__`, the prefix of MCP server `{}`'s tools, so it could clash with one of them; rename it.",
                f.name, s.name, s.name
            )));
        }
    }
    Ok(())
}

/// `tools` as stored and echoed: `mcp_server` headers' values are secrets, never kept.
pub(crate) fn redacted_tools(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let mut tool = tool.clone();
            if tool.get("type").and_then(Value::as_str) == Some("mcp_server")
                && let Some(Value::Object(headers)) = tool.get_mut("headers")
            {
                for value in headers.values_mut() {
                    *value = Value::String(REDACTED.into());
                }
            }
            tool
        })
        .collect()
}

/// A result step of a client's input: its type and the call it answers (if it names one).
fn result_of(step: &Step) -> Option<(&str, Option<&str>)> {
    match step {
        Step::FunctionResult { call_id, .. }
        | Step::CodeExecutionResult { call_id, .. }
        | Step::McpServerToolResult { call_id, .. } => {
            Some((step.type_name(), Some(call_id.as_str())))
        }
        Step::Other(v) => {
            let ty = v.get("type").and_then(Value::as_str)?;
            ty.ends_with("_result")
                .then(|| (ty, v.get("call_id").and_then(Value::as_str)))
        }
        _ => None,
    }
}

/// Checks the result steps of a continuation's input against what `previous` waits for:
/// every `function_result`, `code_execution_result`, `mcp_server_tool_result` or other
/// `*_result` must answer a call `previous` waits for (a client function's call, or a pending
/// approval request), so it must be `requires_action`, and every call it waits for must get
/// exactly one. hookbox runs the other tools itself, so their results never come from a
/// client; a result with no interaction to answer is refused too.
fn check_result_steps(
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

/// `POST /interactions`.
pub async fn create(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let req: CreateInteractionRequest = parse_json(&body, "interaction request")?;
    let cluster = state.inner.cluster.as_ref();
    let forwarded = crate::cluster::forwarded(cluster, &headers)?;
    let agent = resolve_agent(&state, &project, &req).await?;
    let Some(input) = req.input.as_ref() else {
        return Err(ApiError::bad_request("`input` is required."));
    };
    let mut new_steps = input_steps(input)?;
    if new_steps.is_empty() {
        return Err(ApiError::bad_request("`input` is empty."));
    }
    let functions = function_tools(req.tools.as_deref())?;
    let mcp = mcp_servers(req.tools.as_deref())?;
    check_function_names(&functions, &mcp)?;
    let previous = match req.previous_interaction_id.as_deref() {
        Some(prev) => state.inner.store.get_interaction(&project, prev).await?,
        None => None,
    };
    // What the previous interaction's run paused: its records, never its steps.
    let records = match &previous {
        Some(p) => approval_records(&state, &project, &p.id).await?,
        None => Vec::new(),
    };
    let mut answers = Vec::new();
    if req.previous_interaction_id.is_none() || previous.is_some() {
        check_result_steps(previous.as_ref(), &records, &new_steps)?;
        answers = approval_answers(previous.as_ref(), &records, &mut new_steps)?;
    }
    let (history, previous_env) = match req.previous_interaction_id.as_deref() {
        Some(prev) => history(&state, &project, prev).await?,
        None => (Vec::new(), None),
    };
    // An approved call runs where its hooks ran, or not at all.
    check_approval_environment(
        &answers,
        &continuation_environment(
            req.environment.as_ref(),
            agent.as_ref(),
            previous_env.as_deref(),
        ),
    )?;
    // An existing environment runs on the replica that holds it: send the request there.
    let env_request = req
        .environment
        .clone()
        .or_else(|| agent.as_ref().and_then(|a| a.base_environment.clone()));
    // Only a replica looks the environment up here; a lone server goes straight on.
    let existing = match cluster {
        Some(_) => match existing_environment(env_request.as_ref(), previous_env.as_deref()) {
            Some(id)
                if state
                    .inner
                    .store
                    .get_environment(&project, &id)
                    .await?
                    .is_some() =>
            {
                Some(id)
            }
            _ => None,
        },
        None => None,
    };
    if state.is_draining() {
        return crate::drain::elsewhere(
            &state,
            existing.as_deref(),
            forwarded,
            (&uri, &headers),
            body,
        )
        .await;
    }
    let mut placed = false;
    if let (Some(config), Some(existing)) = (cluster, existing.as_deref()) {
        match crate::cluster::place(cluster, existing, forwarded).await? {
            crate::cluster::Placement::There { replica, url } => {
                return crate::cluster::forward(
                    config,
                    (&replica, &url),
                    axum::http::Method::POST,
                    &uri,
                    &headers,
                    body,
                )
                .await;
            }
            crate::cluster::Placement::Here => placed = true,
        }
    }
    // Checked before anything is created or stored, so a refusal changes nothing.
    let running = state.inner.quotas.start_interaction(&project).await?;
    let environment_id = resolve_environment(
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
        .and_then(instruction_text);
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
    if !placed
        && let crate::cluster::Placement::There { replica, .. } =
            crate::cluster::place(cluster, &environment_id, true).await?
    {
        return Err(crate::ApiError::unavailable(
            format!("Environment `{environment_id}` was taken by replica `{replica}`; retry."),
            crate::drain::RETRY_AFTER_SECS,
        ));
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
    interaction.extra = echoes(&req);
    // A continuation that answers paused calls is stored in the transaction that settles them,
    // or not at all: of any number of answers (stored, `store: false`, deleted, concurrent, on
    // any replica) and the deadline's sweeper, one settles each call.
    let settled = match previous.as_ref().filter(|_| !answers.is_empty()) {
        None => {
            state
                .inner
                .store
                .create_interaction(&project, &interaction)
                .await?;
            Vec::new()
        }
        Some(paused) => {
            let settle = settlement(&paused.id, &interaction.id, &answers);
            match state
                .inner
                .store
                .create_interaction_settling(&project, &interaction, &settle)
                .await?
            {
                Settled::Won(records) => records,
                Settled::Refused(now) => {
                    return Err(now
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
                        ));
                }
            }
        }
    };
    tracing::info!(interaction_id = %interaction.id, environment_id = %environment_id, agent = ?req.agent, "interaction created");

    let mut conversation = history;
    conversation.extend(new_steps);
    let run = RunSpec {
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
        agent: req.agent.clone().unwrap_or_default(),
        input: Some(interaction.steps.clone()),
        prior_usage: None,
        settled,
    };
    let (events_rx, handle) = start(&state, run)?;
    drop(events_rx);

    if req.stream == Some(true) {
        let sse = crate::stream::sse(state, project, interaction.id.clone(), None).await?;
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

/// Request fields echoed on the Interaction.
fn echoes(req: &CreateInteractionRequest) -> Map<String, Value> {
    let mut extra = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            extra.insert(k.to_owned(), v);
        }
    };
    put(
        "agent_config",
        req.agent_config
            .as_ref()
            .and_then(|c| serde_json::to_value(c).ok()),
    );
    put(
        "tools",
        req.tools
            .as_deref()
            .map(|tools| Value::Array(redacted_tools(tools))),
    );
    put("system_instruction", req.system_instruction.clone());
    for key in ["labels", "service_tier", "webhook_config"] {
        put(key, req.extra.get(key).cloned());
    }
    extra
}

fn without_input(mut i: Interaction) -> Interaction {
    i.input = None;
    i
}

struct RunSpec {
    project: Project,
    /// The run's place in its project's `running_interactions` quota, freed when it ends.
    running: RunningGuard,
    id: String,
    environment_id: String,
    model_name: Option<String>,
    system_instruction: Option<String>,
    conversation: Vec<Step>,
    first_index: usize,
    keep: bool,
    /// The client's `function` tools.
    functions: Vec<hookbox_agent::model::FunctionDecl>,
    /// The remote MCP servers (`mcp_server` tools).
    mcp: Vec<McpServerSpec>,
    /// The agent it runs, as named in the request (what interaction hooks' matchers match).
    agent: String,
    /// The steps this interaction was given, for `pre_interaction` hooks; `None` for a paused
    /// interaction that goes on in place (no new input, no new `pre_interaction`).
    input: Option<Vec<Step>>,
    /// What the interaction had used before this run (a paused one going on in place): the
    /// stored usage is the sum.
    prior_usage: Option<hookbox_protocol::api::Usage>,
    /// The records of the paused calls this run settled (the store said it won them): their
    /// results come first.
    settled: Vec<ApprovalRecord>,
}

/// What settles the records `answers` answer: each becomes its verdict, an approval that
/// came after the record's deadline a time-out.
fn settlement(paused: &str, by: &str, answers: &[Answer]) -> Settle {
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
/// does not run (denied, saying why).
fn settled_calls(records: &[ApprovalRecord]) -> Vec<approval::SettledCall> {
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

/// Registers and spawns the run. The returned receiver exists so callers can subscribe before
/// the first step is sent.
fn start(
    state: &AppState,
    run: RunSpec,
) -> ApiResult<(
    broadcast::Receiver<Live>,
    tokio::task::JoinHandle<Interaction>,
)> {
    let (events, events_rx) = broadcast::channel(1024);
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let (finished_tx, finished_rx) = watch::channel(false);
    state
        .inner
        .running
        .lock()
        .map_err(|_| ApiError::internal(&"running-interactions lock poisoned"))?
        .insert(
            run.id.clone(),
            Running {
                environment_id: run.environment_id.clone(),
                events: events.clone(),
                cancel: cancel_tx,
                finished: finished_rx,
            },
        );
    let state = state.clone();
    // Everything the run logs (hook decisions included) carries its interaction, project and
    // environment, for the audit log.
    let span = tracing::info_span!(
        "interaction",
        interaction_id = %run.id,
        project = %run.project.0,
        environment_id = %run.environment_id
    );
    let handle = tokio::spawn(tracing::Instrument::instrument(
        async move {
            let id = run.id.clone();
            let project = run.project.clone();
            let keep = run.keep;
            let final_interaction = drive(&state, run, events.clone(), cancel_rx).await;
            if let Ok(mut running) = state.inner.running.lock() {
                running.remove(&id);
            }
            let _ = events.send(Live::Finished(Box::new(final_interaction.clone())));
            let _ = finished_tx.send(true);
            state.inner.drain.ended_one();
            if !keep && let Err(e) = state.inner.store.delete_interaction(&project, &id).await {
                tracing::warn!(interaction_id = %id, error = %e, "could not delete an interaction with store=false");
            }
            final_interaction
        },
        span,
    ));
    Ok((events_rx, handle))
}

/// Runs the loop and persists every step before broadcasting it; returns the final interaction.
async fn drive(
    state: &AppState,
    run: RunSpec,
    events: broadcast::Sender<Live>,
    cancel: watch::Receiver<bool>,
) -> Interaction {
    let inner = Arc::clone(&state.inner);
    let (tx, mut rx) = mpsc::channel::<LoopEvent>(256);
    // Among replicas, each tool call also holds a place of the project's cluster-wide count.
    let counted = crate::quota::ClusterSlots {
        inner: inner.executor.as_ref(),
        book: &inner.quotas,
        project: &run.project,
    };
    let executor: &dyn hookbox_agent::seams::ToolExecutor = if inner.cluster.is_some() {
        &counted
    } else {
        inner.executor.as_ref()
    };
    // pre_interaction hooks (hookbox extension): may deny the turn or add context.
    let pre = match &run.input {
        Some(input) => {
            let payload = interaction_payload(&run, HookEvent::PreInteraction, |p| {
                p.input_text = Some(
                    input
                        .iter()
                        .filter_map(Step::text)
                        .collect::<Vec<_>>()
                        .join("\n"),
                );
                p.input = serde_json::to_value(input).ok();
            });
            executor
                .interaction_hooks(&run.environment_id, &payload)
                .await
        }
        None => hookbox_agent::InteractionHooks::default(),
    };
    // pre_interaction hooks' context, one `[context from hooks] TEXT` line each.
    let system_instruction = hookbox_agent::model::with_notes(
        run.system_instruction.as_deref(),
        pre.context
            .iter()
            .map(|c| format!("{}{c}", hookbox_agent::model::HOOK_CONTEXT_PREFIX)),
    );
    let mcp: Arc<dyn hookbox_agent::mcp::McpTools> = match (&pre.denied, run.mcp.is_empty()) {
        (None, false) => executor.mcp_session(&run.environment_id, &run.mcp).await,
        _ => Arc::new(hookbox_agent::mcp::Unreachable::default()),
    };
    // Each paused call this run settled, once (the store said this run won it).
    for record in &run.settled {
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
    let settled = settled_calls(&run.settled);
    let ctx = LoopContext {
        model: inner.model.as_ref(),
        executor,
        environment_id: Some(&run.environment_id),
        model_name: run.model_name.as_deref(),
        system_instruction: system_instruction.as_deref(),
        tools: &ToolName::ALL,
        functions: &run.functions,
        mcp: mcp.as_ref(),
        settled: &settled,
    };
    let persist = async {
        let mut index = run.first_index;
        let mut store_error = None;
        // The model's last text, for post_interaction hooks.
        let mut last_output = None;
        // Whether this run paused a call (its record is withdrawn if the run ends otherwise).
        let mut asked = false;
        while let Some(event) = rx.recv().await {
            let step = match event {
                LoopEvent::Step(step) => step,
                // A hook asked: the record first (what may run, and where), then the step the
                // client sees; a request without its record is never shown.
                LoopEvent::ApprovalRequested { step, call } => {
                    let (id, expires_at) = (call.approval_id(), call.expires_at_rfc3339());
                    let record = ApprovalRecord {
                        id,
                        interaction_id: run.id.clone(),
                        call_id: call.call_id.clone(),
                        environment_id: run.environment_id.clone(),
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
                    };
                    if let Err(e) = inner.store.create_approval(&run.project, &record).await {
                        tracing::error!(interaction_id = %run.id, error = %e, "could not record a paused call");
                        store_error.get_or_insert(e.to_string());
                        continue;
                    }
                    asked = true;
                    step
                }
                // Running code's output, for the step about to come at `index`: live only.
                LoopEvent::Output { offset, text } => {
                    let _ = events.send(Live::Output {
                        index,
                        offset,
                        text,
                    });
                    continue;
                }
            };
            if let Err(e) = inner.store.append_step(&run.id, index, &step).await {
                tracing::error!(interaction_id = %run.id, error = %e, "could not store a step");
                store_error.get_or_insert(e.to_string());
                continue;
            }
            if let Step::ModelOutput { .. } = &step {
                last_output = step.text();
            }
            let _ = events.send(Live::Step(index, step));
            index += 1;
        }
        (store_error, last_output, asked)
    };
    let run_loop = async {
        let outcome = match &pre.denied {
            Some(reason) => {
                tracing::info!(interaction_id = %run.id, reason = %reason, "a pre_interaction hook denied the turn");
                LoopOutcome {
                    status: InteractionStatus::Failed,
                    usage: Default::default(),
                    errors: vec![InteractionError {
                        code: "denied_by_hook".into(),
                        message: reason.clone(),
                    }],
                }
            }
            None => {
                hookbox_agent::run(
                    ctx,
                    inner.loop_config,
                    run.conversation.clone(),
                    &tx,
                    cancel,
                )
                .await
            }
        };
        drop(tx);
        outcome
    };
    let (mut outcome, (store_error, last_output, asked)) = tokio::join!(run_loop, persist);
    // Stopped because the server stops, not by a client: as after a crash.
    if outcome.status == InteractionStatus::Cancelled && inner.drain.stopping() {
        outcome.status = InteractionStatus::Failed;
        outcome.errors = vec![InteractionError {
            code: "server_stopped".into(),
            message: crate::drain::STOPPED_REASON.into(),
        }];
    }
    // Used until its end: the expiry clock starts when the interaction stops.
    let touch = hookbox_store::EnvironmentChange::Touch {
        now: hookbox_store::time::now_rfc3339(),
    };
    if let Err(e) = inner
        .store
        .change_environment(&run.project, &run.environment_id, &touch)
        .await
    {
        tracing::warn!(environment_id = %run.environment_id, error = %e, "cannot record the environment's last use");
    }
    if let Some(message) = crate::lifecycle::after_interaction(state, &run.environment_id).await {
        outcome.errors.push(InteractionError {
            code: "checkpoint_failed".into(),
            message,
        });
    }
    if store_error.is_some() {
        outcome.status = InteractionStatus::Failed;
        outcome.errors.push(InteractionError {
            code: "storage_error".into(),
            message: "a step could not be stored; see the server log".into(),
        });
    }
    // Calls paused in a run that then ended otherwise (cancelled, failed) wait for nobody.
    if asked
        && outcome.status != InteractionStatus::RequiresAction
        && let Err(e) = inner.store.withdraw_approvals(&run.project, &run.id).await
    {
        tracing::warn!(interaction_id = %run.id, error = %e, "could not withdraw paused calls nobody can answer");
    }
    // post_interaction hooks (hookbox extension): they see how the turn ended, before the
    // status is stored (a client that saw the end can rely on them having run).
    if !inner.drain.stopping() {
        let payload = interaction_payload(&run, HookEvent::PostInteraction, |p| {
            p.status = Some(outcome.status.as_str().to_owned());
            p.output = last_output;
            p.errors = (!outcome.errors.is_empty())
                .then(|| serde_json::to_value(&outcome.errors).ok())
                .flatten();
        });
        executor
            .interaction_hooks(&run.environment_id, &payload)
            .await;
    }
    if let Some(prior) = &run.prior_usage {
        outcome.usage.add(prior);
    }
    let update = StatusUpdate {
        status: outcome.status,
        usage: (outcome.usage != hookbox_protocol::api::Usage::default()).then_some(outcome.usage),
        errors: outcome.errors,
        updated: hookbox_store::time::now_rfc3339(),
    };
    if let Err(e) = inner.store.update_status(&run.id, &update).await {
        tracing::error!(interaction_id = %run.id, error = %e, "could not store the final status");
    }
    // The store wrote the webhook events with the status; send them now.
    inner.wake_webhooks();
    tracing::info!(name: hookbox_protocol::events::INTERACTION_FINISHED, interaction_id = %run.id, status = %update.status, "interaction finished");
    let ended = inner.store.get_interaction(&run.project, &run.id).await;
    drop(run.running);
    match ended {
        Ok(Some(i)) => i,
        _ => {
            let mut i = Interaction::new(run.id.clone(), update.status);
            i.errors = update.errors;
            i.environment_id = Some(run.environment_id.clone());
            i
        }
    }
}

/// Times out the paused calls of interaction `id` if one's approval deadline has passed and it
/// still waits for nothing but reviewers: their records are settled `timed_out` by the
/// sweeper (a conditional update: a continuation that answered first wins, and then nothing
/// happens here), the timed-out answers are recorded in the interaction itself, and the same
/// interaction goes on in place, the model seeing each such call denied. `Ok(false)` when
/// there was nothing to do.
pub(crate) async fn resume_timed_out(
    state: &AppState,
    project: &Project,
    id: &str,
) -> ApiResult<bool> {
    let Some(paused) = state.inner.store.get_interaction(project, id).await? else {
        return Ok(false);
    };
    if paused.status != InteractionStatus::RequiresAction {
        return Ok(false);
    }
    let records = approval_records(state, project, id).await?;
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
    if waiting_calls(turn, &records)
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
        Some(previous) => history(state, project, previous).await?,
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
    let run = RunSpec {
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
            .and_then(instruction_text),
        conversation,
        first_index: index,
        keep: true,
        functions: function_tools(tools).unwrap_or_default(),
        // The stored tools carry no header values: servers are reached without them.
        mcp: mcp_servers(tools.map(without_redacted_headers).as_deref()).unwrap_or_default(),
        agent: paused.agent.clone().unwrap_or_default(),
        input: None,
        prior_usage: paused.usage.clone(),
        settled: won,
    };
    let (events_rx, _handle) = start(state, run)?;
    drop(events_rx);
    Ok(true)
}

/// Stored `tools` with the redacted `mcp_server` header values left out (the servers are then
/// reached without them).
fn without_redacted_headers(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let mut tool = tool.clone();
            if let Some(Value::Object(headers)) = tool.get_mut("headers") {
                headers.retain(|_, v| v.as_str() != Some(REDACTED));
            }
            tool
        })
        .collect()
}

/// The `function_call`s of `turn` that wait for the client's answer, as `(id, name)`: client
/// functions' calls with no result yet, and the approval requests whose record (what the run
/// paused, not what a step says) is still pending. A call paused for a reviewer is answered
/// through its approval request, not directly; a request-shaped step without a pending record
/// (a model's own call of the reserved name) waits for nothing.
fn waiting_calls<'a>(turn: &'a [Step], records: &[ApprovalRecord]) -> Vec<(&'a str, &'a str)> {
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

/// The payload of an interaction hook for `run`, with `fill` adding the event's own fields.
fn interaction_payload(
    run: &RunSpec,
    event: HookEvent,
    fill: impl FnOnce(&mut InteractionHookPayload),
) -> InteractionHookPayload {
    let mut payload = InteractionHookPayload {
        interaction_id: run.id.clone(),
        environment_id: run.environment_id.clone(),
        agent: run.agent.clone(),
        input: None,
        input_text: None,
        status: None,
        output: None,
        errors: None,
        hook_event_name: event,
    };
    fill(&mut payload);
    payload
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
            Some(e) => Some(e.parse::<crate::stream::ResumePoint>().map_err(|_| {
                ApiError::bad_request(format!(
                    "Invalid last_event_id `{e}`: expected an event_id from this interaction's stream."
                ))
            })?),
        };
        return Ok(crate::stream::sse(state, project, id, after)
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

/// Signals cancellation and waits until the run has stopped. `false` if it was not running.
async fn cancel_and_wait(state: &AppState, id: &str) -> bool {
    let finished = {
        let Ok(running) = state.inner.running.lock() else {
            return false;
        };
        let Some(r) = running.get(id) else {
            return false;
        };
        let _ = r.cancel.send(true);
        r.finished.clone()
    };
    let mut finished = finished;
    let _ = finished.wait_for(|done| *done).await;
    true
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
    let forwarded = crate::cluster::forwarded(state.inner.cluster.as_ref(), &headers)?;
    // Running on another replica: only that one can stop its loop.
    if let Some(config) = state.inner.cluster.as_ref()
        && !forwarded
        && before.status.is_running()
        && crate::interactions::subscribe(&state, &id).is_none()
        && let Some((replica, url)) = config.cluster.runner_of(&id).await?
    {
        return crate::cluster::forward(
            config,
            (&replica, &url),
            axum::http::Method::POST,
            &uri,
            &headers,
            Bytes::new(),
        )
        .await;
    }
    if !cancel_and_wait(&state, &id).await && before.status.is_running() {
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
    #[serde(default)]
    page_size: Option<u32>,
    #[serde(default)]
    page_token: Option<String>,
}

/// `GET /interactions`: the project's interactions, newest first, without steps or input;
/// filtered by status, agent, environment and creation time.
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
    };
    let page = hookbox_store::Page {
        size: q.page_size,
        token: nonempty(q.page_token),
    };
    let listed = state
        .inner
        .store
        .list_interactions(&project, &filter, &page)
        .await?;
    let mut out = Map::new();
    out.insert(
        "interactions".into(),
        serde_json::to_value(&listed.items).unwrap_or_default(),
    );
    if let Some(token) = listed.next_page_token {
        out.insert("next_page_token".into(), Value::String(token));
    }
    Ok(Json(Value::Object(out)))
}

/// `DELETE /interactions/{id}`.
pub async fn delete(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    load(&state, &project, &id).await?;
    cancel_and_wait(&state, &id).await;
    if !state.inner.store.delete_interaction(&project, &id).await? {
        return Err(ApiError::not_found(format!(
            "Interaction `{id}` not found."
        )));
    }
    Ok(Json(Value::Object(Map::new())))
}

#[cfg(test)]
mod tests {
    use super::*;
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
            hookbox_agent::tools::call_step("call_1", "f", &json!({}), None),
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
