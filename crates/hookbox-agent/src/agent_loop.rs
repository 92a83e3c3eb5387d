//! The agent loop, top to bottom: ask the model; if it answered, emit `model_output` and stop;
//! otherwise, for each tool call, emit the call step, run it through the [`ToolExecutor`] (where
//! pre hooks → tool → post hooks happen), emit the result step (a denial's reason as an error
//! result) and ask the model again, until it answers, the step budget is spent, the model fails
//! or the run is cancelled. Every step is sent on the channel as soon as it exists; the caller
//! persists and streams it. This module must not store or serve anything itself.
//!
//! A call a pre hook asks a person about (hookbox extension) does not run: the loop reports it
//! as [`LoopEvent::ApprovalRequested`] (the paused call and the request step the client sees;
//! the caller records both) and the turn ends `requires_action`, like a client function's. Only
//! that event pauses a call: a model's own call of the reserved `hookbox_approval` is answered
//! with an error result, like an unknown tool. A run that continues such a turn is given the
//! calls the server settled ([`LoopContext::settled`], from its records, never from steps):
//! the approved ones run (without their pre hooks, in the environment and with the arguments
//! the hooks saw), the others get the reviewer's reason (or the deadline's) as their error
//! result; then the model is asked again.

use std::str::FromStr;

use hookbox_protocol::api::{InteractionError, InteractionStatus, Step, Usage};
use hookbox_protocol::{ToolCall, ToolName};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::approval;
use crate::model::{Model, ModelRequest};
use crate::seams::ToolExecutor;
use crate::steps::{call_step, result_step};

/// Limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopConfig {
    /// Model turns before the run stops with `budget_exceeded`.
    pub max_model_turns: usize,
    /// How long a call a hook asked a person about waits for an answer before it is denied.
    pub ask_timeout: std::time::Duration,
}

/// The default of [`LoopConfig::ask_timeout`]: one hour.
pub const DEFAULT_ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            max_model_turns: 32,
            ask_timeout: DEFAULT_ASK_TIMEOUT,
        }
    }
}

/// What one run needs.
#[derive(Debug, Clone, Copy)]
pub struct LoopContext<'a> {
    pub model: &'a dyn Model,
    pub executor: &'a dyn ToolExecutor,
    /// Without an environment, tool calls get an error result.
    pub environment_id: Option<&'a str>,
    pub model_name: Option<&'a str>,
    pub system_instruction: Option<&'a str>,
    pub tools: &'a [ToolName],
    /// The client's `function` tools: their calls are not run here; the run ends
    /// `requires_action` with them (every call of that turn emitted first).
    pub functions: &'a [crate::model::FunctionDecl],
    /// The remote MCP servers' tools (`mcp_server` tools), called through this seam.
    pub mcp: &'a dyn crate::mcp::McpTools,
    /// Paused calls of the turn this run continues that the server settled: they get their
    /// results first (an approved one runs).
    pub settled: &'a [approval::SettledCall],
    /// The interaction's `tool_search` tool and its deferred tools ([`crate::tool_search`]).
    pub search: Option<&'a crate::tool_search::Search>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopOutcome {
    pub status: InteractionStatus,
    pub usage: Usage,
    pub errors: Vec<InteractionError>,
}

/// What the loop reports while it runs, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum LoopEvent {
    /// A new step of the interaction.
    Step(Step),
    /// A call a pre hook asked a person about, paused: the caller records `call` (what runs
    /// if a reviewer approves) and stores `step` (the request the client sees) as the next
    /// step. Only the loop sends this, for a hook's `ask`.
    ApprovalRequested {
        step: Step,
        call: approval::PausedCall,
    },
    /// A piece of the running `code_execution`'s stdout, for the result step that comes next:
    /// `offset` is where it starts in that stdout (bytes), so a gap (a piece dropped because
    /// the receiver was slow) is visible. Not stored: the result step holds the whole output.
    Output { offset: usize, text: String },
}

/// Runs the loop over `conversation` (earlier turns plus this turn's `user_input`), sending each
/// new step (and the output of running code) on `steps`. `cancel` turning `true` stops the run
/// with `cancelled`.
pub async fn run(
    ctx: LoopContext<'_>,
    config: LoopConfig,
    mut conversation: Vec<Step>,
    steps: &mpsc::Sender<LoopEvent>,
    mut cancel: watch::Receiver<bool>,
) -> LoopOutcome {
    let mut usage = Usage::default();
    let cancelled = |usage: Usage| LoopOutcome {
        status: InteractionStatus::Cancelled,
        usage,
        errors: vec![InteractionError {
            code: "cancelled".into(),
            message: "the interaction was cancelled".into(),
        }],
    };
    // A continuation of a turn that waited for reviewers: their answered calls first.
    let settle = settle_approvals(&ctx, &mut conversation, steps);
    tokio::select! {
        () = settle => {}
        _ = wait_cancelled(&mut cancel) => return cancelled(usage),
    }
    // The model is offered the client's functions and the MCP servers' tools together, and
    // told which servers could not be reached.
    let all_offered = offered_functions(&ctx);
    let system_instruction = with_unavailable_servers(ctx.system_instruction, ctx.mcp);
    for _turn in 0..config.max_model_turns {
        if *cancel.borrow() {
            return cancelled(usage);
        }
        // Deferred tools only by name until a search (in the conversation) loaded them.
        let offered = match ctx.search {
            Some(search) => search.offered(&all_offered, &conversation),
            None => all_offered.clone(),
        };
        let request = ModelRequest {
            model: ctx.model_name,
            system_instruction: system_instruction.as_deref(),
            steps: &conversation,
            tools: ctx.tools,
            functions: &offered,
            tool_search: ctx.search.map(|s| s.name.as_str()),
        };
        let model_started = std::time::Instant::now();
        let span = tracing::info_span!(
            "model_turn",
            model = ctx.model.name(),
            ok = tracing::field::Empty
        );
        let turn = tokio::select! {
            turn = tracing::Instrument::instrument(ctx.model.turn(&request), span.clone()) => turn,
            _ = wait_cancelled(&mut cancel) => return cancelled(usage),
        };
        span.record("ok", turn.is_ok());
        tracing::debug!(
            name: hookbox_protocol::events::MODEL_TURN,
            model = ctx.model.name(),
            ok = turn.is_ok(),
            duration_ms = model_started.elapsed().as_millis() as u64,
            "model turn"
        );
        let turn = match turn {
            Ok(turn) => turn,
            Err(err) => {
                tracing::warn!(model = ctx.model.name(), error = %err, "model call failed");
                return LoopOutcome {
                    status: InteractionStatus::Failed,
                    usage,
                    errors: vec![InteractionError {
                        code: "model_error".into(),
                        message: err.to_string(),
                    }],
                };
            }
        };
        usage.add(&turn.usage);
        if let Some(thought) = &turn.thought {
            let step = Step::Thought {
                signature: None,
                summary: Some(vec![hookbox_protocol::api::Content::text(thought)]),
            };
            emit(&mut conversation, steps, step).await;
        }
        if turn.calls.is_empty() {
            let text = turn.text.unwrap_or_default();
            emit(&mut conversation, steps, Step::model_text(text)).await;
            return LoopOutcome {
                status: InteractionStatus::Completed,
                usage,
                errors: Vec::new(),
            };
        }
        if let Some(text) = turn.text.filter(|t| !t.is_empty()) {
            emit(&mut conversation, steps, Step::model_text(text)).await;
        }
        let mut for_the_client = 0;
        for call in turn.calls {
            // A model's id never looks like an approval request's.
            let id = call
                .id
                .clone()
                .filter(|id| !approval::is_approval_id(id))
                .unwrap_or_else(|| format!("call_{}", conversation.len()));
            // The reserved name: never a request, whoever asks; an error result like an
            // unknown tool's (the model sees it and goes on; the turn budget bounds a loop).
            if call.name == approval::APPROVAL_FUNCTION {
                tracing::info!(call_id = %id, "the model called the reserved hookbox_approval; refused");
                emit(
                    &mut conversation,
                    steps,
                    call_step(&id, &call.name, &call.args, call.signature.clone()),
                )
                .await;
                emit(
                    &mut conversation,
                    steps,
                    result_step(
                        &id,
                        &call.name,
                        Value::String(approval::RESERVED_MESSAGE.to_owned()),
                        true,
                        None,
                    ),
                )
                .await;
                continue;
            }
            // A server-side tool search: answered here, then the loop goes on.
            if let Some(search) = ctx.search
                && search.execution == crate::tool_search::Execution::Server
                && call.name == search.name
            {
                let deferred = search.deferred(&all_offered);
                let found = crate::tool_search::search(&deferred, &call.args);
                tracing::info!(call_id = %id, found = found.len(), "tool search answered");
                emit(
                    &mut conversation,
                    steps,
                    crate::tool_search::call_step(&id, &call.args),
                )
                .await;
                emit(
                    &mut conversation,
                    steps,
                    crate::tool_search::result_step(&id, &found),
                )
                .await;
                continue;
            }
            // A deferred tool not loaded yet is not callable (the model saw only its name).
            if let Some(search) = ctx.search
                && !search.may_call(&all_offered, &conversation, &call.name)
            {
                emit(
                    &mut conversation,
                    steps,
                    call_step(&id, &call.name, &call.args, call.signature.clone()),
                )
                .await;
                let message = format!(
                    "`{}` is not loaded: search for it with `{}` first.",
                    call.name, search.name
                );
                emit(
                    &mut conversation,
                    steps,
                    result_step(&id, &call.name, Value::String(message), true, None),
                )
                .await;
                continue;
            }
            // A remote MCP server's tool: its own step types, run through the MCP seam.
            if let Some((server, tool)) = crate::mcp::resolve(ctx.mcp, &call.name) {
                let (server, tool) = (server.to_owned(), tool.map(str::to_owned));
                let name = tool.clone().unwrap_or_else(|| call.name.clone());
                emit(
                    &mut conversation,
                    steps,
                    Step::McpServerToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        server_name: server.clone(),
                        arguments: call.args.clone(),
                    },
                )
                .await;
                let execution = match &tool {
                    Some(tool) => tokio::select! {
                        r = ctx.mcp.call(&server, tool, &call.args) => r,
                        _ = wait_cancelled(&mut cancel) => return cancelled(usage),
                    },
                    None => crate::execution::ToolExecution::error(not_callable_message(
                        ctx.mcp, &server, &call.name,
                    )),
                };
                emit(
                    &mut conversation,
                    steps,
                    Step::McpServerToolResult {
                        call_id: id,
                        result: execution.output,
                        name: Some(name),
                        server_name: Some(server),
                        is_error: Some(execution.is_error),
                        hooks: (!execution.trace.is_null()).then_some(execution.trace),
                    },
                )
                .await;
                continue;
            }
            emit(
                &mut conversation,
                steps,
                call_step(&id, &call.name, &call.args, call.signature.clone()),
            )
            .await;
            // A client function: the client runs it and answers with a function_result; hooks
            // never see it (the reference).
            let client_search = ctx.search.is_some_and(|s| {
                s.execution == crate::tool_search::Execution::Client && call.name == s.name
            });
            if client_search || ctx.functions.iter().any(|f| f.name == call.name) {
                for_the_client += 1;
                continue;
            }
            let (output, is_error, hooks, ask) = tokio::select! {
                r = execute(&ctx, &call.name, &call.args, steps, &conversation) => r,
                _ = wait_cancelled(&mut cancel) => return cancelled(usage),
            };
            // A pre hook asked a person: the call waits for a reviewer's answer.
            if let Some((tool, request)) = ask {
                let deadline = chrono::Utc::now()
                    + chrono::Duration::from_std(config.ask_timeout)
                        .unwrap_or(chrono::Duration::MAX);
                tracing::info!(tool = %tool, group = %request.group, "tool call waits for a reviewer");
                let call = approval::PausedCall {
                    call_id: id.clone(),
                    tool,
                    args: request.args,
                    reason: request.reason,
                    group: request.group,
                    expires_at: deadline,
                };
                let step = call.request_step();
                conversation.push(step.clone());
                // A closed receiver means nobody listens any more; the run still finishes.
                let _ = steps
                    .send(LoopEvent::ApprovalRequested { step, call })
                    .await;
                for_the_client += 1;
                continue;
            }
            emit(
                &mut conversation,
                steps,
                result_step(&id, &call.name, output, is_error, hooks),
            )
            .await;
        }
        if for_the_client > 0 {
            return LoopOutcome {
                status: InteractionStatus::RequiresAction,
                usage,
                errors: Vec::new(),
            };
        }
    }
    LoopOutcome {
        status: InteractionStatus::BudgetExceeded,
        usage,
        errors: vec![InteractionError {
            code: "step_budget_exceeded".into(),
            message: format!(
                "the agent did not answer within {} model turns",
                config.max_model_turns
            ),
        }],
    }
}

/// The client's functions and the MCP servers' tools, as the model is offered them.
fn offered_functions(ctx: &LoopContext<'_>) -> Vec<crate::model::FunctionDecl> {
    let mut offered = ctx.functions.to_vec();
    offered.extend(ctx.mcp.tools().iter().map(|t| crate::model::FunctionDecl {
        name: t.model_name(),
        description: format!("[MCP server `{}`] {}", t.server, t.description),
        parameters: t.parameters.clone(),
    }));
    offered
}

/// The system instruction, with one line per MCP server that could not be reached and per
/// listed tool withheld for a clashing name.
fn with_unavailable_servers(
    system: Option<&str>,
    mcp: &dyn crate::mcp::McpTools,
) -> Option<String> {
    let notes = mcp
        .unavailable()
        .iter()
        .map(|(server, _)| format!("[mcp] {}", unavailable_message(mcp, server)))
        .chain(
            mcp.withheld()
                .iter()
                .map(|w| format!("[mcp] {}", withheld_message(w))),
        );
    crate::model::with_notes(system, notes)
}

fn withheld_message(w: &crate::mcp::Withheld) -> String {
    format!(
        "MCP server `{}`'s tool `{}` is not offered: {}",
        w.server, w.tool, w.why
    )
}

/// Why the model's call `name` of an MCP server's tool cannot be made: the tool is withheld,
/// or its server is unavailable.
fn not_callable_message(mcp: &dyn crate::mcp::McpTools, server: &str, name: &str) -> String {
    match mcp.withheld().iter().find(|w| w.model_name == name) {
        Some(w) => withheld_message(w),
        None => unavailable_message(mcp, server),
    }
}

fn unavailable_message(mcp: &dyn crate::mcp::McpTools, server: &str) -> String {
    let why = mcp
        .unavailable()
        .iter()
        .find(|(s, _)| s == server)
        .map_or("not connected", |(_, why)| why.as_str());
    format!("MCP server `{server}` is unavailable, so none of its tools can be called: {why}")
}

/// What [`execute`] returns: what the model sees, whether it is an error, the hook trace, and
/// the approval a pre hook asked for instead of running the call.
type Executed = (
    Value,
    bool,
    Option<Value>,
    Option<(ToolName, crate::execution::ApprovalRequest)>,
);

/// Runs one call.
async fn execute(
    ctx: &LoopContext<'_>,
    name: &str,
    args: &Value,
    events: &mpsc::Sender<LoopEvent>,
    conversation: &[Step],
) -> Executed {
    let tool = match ToolName::from_str(name) {
        Ok(tool) if ctx.tools.contains(&tool) => tool,
        Ok(_) | Err(_) => {
            return (
                Value::String(format!(
                    "tool `{name}` is not available; available tools: {}",
                    ctx.tools
                        .iter()
                        .map(|t| t.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                true,
                None,
                None,
            );
        }
    };
    let Some(env) = ctx.environment_id else {
        return (
            Value::String("this interaction has no environment to run tools in".into()),
            true,
            None,
            None,
        );
    };
    let call = ToolCall {
        name: tool,
        args: args.clone(),
    };
    let context = crate::seams::CallContext {
        transcript: crate::transcript::jsonl(conversation),
    };
    let sink = (tool == ToolName::CodeExecution).then(|| output_sink(events.clone()));
    let execution = ctx.executor.execute_in(env, &call, sink, &context).await;
    if let Some(reason) = &execution.denied_reason {
        tracing::info!(environment_id = env, tool = name, reason = %reason, "tool call denied by hook");
    }
    let hooks = (!execution.trace.is_null()).then_some(execution.trace);
    let ask = execution.approval.map(|request| (tool, request));
    (execution.output, execution.is_error, hooks, ask)
}

/// Gives the paused calls the server settled their results: an approved call runs in the
/// environment its hooks ran in, with exactly the arguments they saw (its post hooks too, not
/// its pre hooks); any other verdict becomes the call's error result. Each result step is
/// emitted; its trace says who decided.
async fn settle_approvals(
    ctx: &LoopContext<'_>,
    conversation: &mut Vec<Step>,
    steps: &mpsc::Sender<LoopEvent>,
) {
    for settled in ctx.settled {
        let tool = settled.tool;
        let verdict = &settled.verdict;
        let mut decided = serde_json::json!({"verdict": verdict.label()});
        if let approval::Verdict::Denied(reason) = verdict {
            decided["reason"] = serde_json::json!(reason);
        }
        let decided = serde_json::json!({"approval": decided});
        let step = match verdict {
            approval::Verdict::Approved => {
                let call = ToolCall {
                    name: tool,
                    args: settled.args.clone(),
                };
                let sink = (tool == ToolName::CodeExecution).then(|| output_sink(steps.clone()));
                let execution = ctx
                    .executor
                    .execute_approved(&settled.environment_id, &call, sink)
                    .await;
                let mut trace = execution.trace;
                match trace.as_object_mut() {
                    Some(map) => {
                        map.insert("approval".into(), decided["approval"].clone());
                    }
                    None => trace = decided,
                }
                result_step(
                    &settled.call_id,
                    tool.as_str(),
                    execution.output,
                    execution.is_error,
                    Some(trace),
                )
            }
            other => result_step(
                &settled.call_id,
                tool.as_str(),
                Value::String(other.message(tool.as_str()).unwrap_or_default()),
                true,
                Some(decided),
            ),
        };
        emit(conversation, steps, step).await;
    }
}

async fn emit(conversation: &mut Vec<Step>, steps: &mpsc::Sender<LoopEvent>, step: Step) {
    conversation.push(step.clone());
    // A closed receiver means nobody listens any more; the run still finishes.
    let _ = steps.send(LoopEvent::Step(step)).await;
}

/// Output pieces as [`LoopEvent::Output`]s. Never waits: a piece that finds the channel full is
/// dropped (its offset shows the gap to whoever streams it; the result step has it all).
fn output_sink(events: mpsc::Sender<LoopEvent>) -> crate::seams::OutputSink {
    let offset = std::sync::atomic::AtomicUsize::new(0);
    std::sync::Arc::new(move |text: &str| {
        let at = offset.fetch_add(text.len(), std::sync::atomic::Ordering::SeqCst);
        let _ = events.try_send(LoopEvent::Output {
            offset: at,
            text: text.to_owned(),
        });
    })
}

async fn wait_cancelled(cancel: &mut watch::Receiver<bool>) {
    loop {
        if *cancel.borrow_and_update() {
            return;
        }
        if cancel.changed().await.is_err() {
            // Sender gone: nobody can cancel any more.
            std::future::pending::<()>().await;
        }
    }
}
