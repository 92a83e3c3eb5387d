//! [`ToolExecutor`] for [`SandboxBackend`]: a tool call is handed to the environment's
//! tool-call lifecycle (`hookbox_environments::lifecycle`, where hooks → tool → hooks happen and
//! the outcome is decided) and its typed outcome becomes a [`ToolExecution`], field by field; the
//! call's span and `tool.finished` event are recorded here. Also the environment's interaction
//! hooks and its sessions with remote MCP servers. It must not run hooks or tools itself, nor
//! decide anything about a result (what the model sees, whether it is an error).

use std::sync::Arc;

use async_trait::async_trait;
use hookbox_agent::execution::ToolExecution;
use hookbox_agent::seams::{ProviderError, ToolExecutor};
use hookbox_environments::lifecycle::{Outcome, ToolResult};
use hookbox_protocol::ToolCall;

use super::cache::SandboxBackend;

#[async_trait]
impl ToolExecutor for SandboxBackend {
    async fn execute(&self, environment_id: &str, call: &ToolCall) -> ToolExecution {
        self.run_call(environment_id, call, None).await
    }

    async fn execute_streaming(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: hookbox_agent::OutputSink,
    ) -> ToolExecution {
        self.run_call(environment_id, call, Some(utf8_tap(output)))
            .await
    }

    async fn execute_in(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: Option<hookbox_agent::OutputSink>,
        context: &hookbox_agent::seams::CallContext,
    ) -> ToolExecution {
        self.run_call_in(
            environment_id,
            call,
            output.map(utf8_tap),
            Gate::PreHooks,
            &context.transcript,
        )
        .await
    }

    async fn execute_approved(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: Option<hookbox_agent::OutputSink>,
    ) -> ToolExecution {
        self.run_call_as(environment_id, call, output.map(utf8_tap), Gate::Approved)
            .await
    }

    async fn mcp_session(
        &self,
        environment_id: &str,
        servers: &[hookbox_agent::mcp::McpServerSpec],
    ) -> Arc<dyn hookbox_agent::mcp::McpTools> {
        match self.env(environment_id).await {
            Ok(env) => {
                Arc::new(hookbox_mcp::client::McpSession::connect(env, servers, self.mcp).await)
            }
            Err(err) => {
                tracing::warn!(environment_id, error = %err, "cannot open the environment for its MCP connections");
                Arc::new(hookbox_agent::mcp::Unreachable::all(
                    servers,
                    "the environment could not be opened",
                ))
            }
        }
    }

    async fn interaction_hooks(
        &self,
        environment_id: &str,
        payload: &hookbox_protocol::InteractionHookPayload,
    ) -> hookbox_agent::InteractionHooks {
        let env = match self.env(environment_id).await {
            Ok(env) => env,
            Err(ProviderError::Unavailable(reason)) => {
                // The hooks may exist but cannot be read here now (the lease moved, the store
                // is down): the turn must not run without them.
                tracing::warn!(environment_id, error = %reason, event = %payload.hook_event_name, "the environment is unavailable for its interaction hooks; the turn is refused");
                return hookbox_agent::InteractionHooks {
                    denied: Some(format!(
                        "the environment's interaction hooks could not run: {reason}"
                    )),
                    context: Vec::new(),
                    trace: None,
                };
            }
            Err(err) => {
                // No environment, no hooks file to read: nothing can have been configured.
                tracing::warn!(environment_id, error = %err, event = %payload.hook_event_name, "cannot open the environment for its interaction hooks");
                return hookbox_agent::InteractionHooks::default();
            }
        };
        let dispatch = env.interaction_hooks(payload).await;
        if dispatch.trace.is_empty() {
            return hookbox_agent::InteractionHooks::default();
        }
        tracing::info!(
            environment_id,
            event = %payload.hook_event_name,
            decision = dispatch.decision.label(),
            handlers = dispatch.trace.len(),
            duration_ms = dispatch.duration_ms,
            "interaction hooks ran"
        );
        hookbox_agent::InteractionHooks {
            denied: match &dispatch.decision {
                hookbox_hooks::Decision::Deny { reason, .. } => Some(reason.clone()),
                hookbox_hooks::Decision::Allow | hookbox_hooks::Decision::Ask { .. } => None,
            },
            // The interaction shows what ran (a handler that failed open included), shaped
            // like a tool call's `pre` / `post`.
            trace: serde_json::to_value(&dispatch).ok(),
            context: dispatch.additional_context,
        }
    }
}

/// Whether a call goes through its pre hooks or was approved by a person after one asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    PreHooks,
    Approved,
}

/// Turns stdout bytes into text pieces for `sink`, holding back an incomplete UTF-8 sequence at
/// the end of a chunk so every piece is whole characters and the pieces concatenate to
/// `String::from_utf8_lossy` of the whole (which is how the result step's text begins).
fn utf8_tap(sink: hookbox_agent::OutputSink) -> hookbox_environments::runner::StdoutTap {
    let pending = std::sync::Mutex::new(Vec::<u8>::new());
    Arc::new(move |bytes: &[u8]| {
        let mut buf = pending.lock().unwrap_or_else(|p| p.into_inner());
        buf.extend_from_slice(bytes);
        let whole = match std::str::from_utf8(&buf) {
            Ok(_) => buf.len(),
            // An error with no length is a sequence cut off at the end: keep it for later.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => buf.len(),
        };
        if whole == 0 {
            return;
        }
        let text = String::from_utf8_lossy(&buf[..whole]).into_owned();
        buf.drain(..whole);
        drop(buf);
        sink(&text);
    })
}

impl SandboxBackend {
    async fn run_call(
        &self,
        environment_id: &str,
        call: &ToolCall,
        tap: Option<hookbox_environments::runner::StdoutTap>,
    ) -> ToolExecution {
        self.run_call_as(environment_id, call, tap, Gate::PreHooks)
            .await
    }

    async fn run_call_as(
        &self,
        environment_id: &str,
        call: &ToolCall,
        tap: Option<hookbox_environments::runner::StdoutTap>,
        gate: Gate,
    ) -> ToolExecution {
        self.run_call_in(environment_id, call, tap, gate, &[]).await
    }

    /// Runs a call; `transcript` is the interaction's steps so far as JSON Lines (empty when
    /// the caller has none), for other agent CLIs' hooks.
    async fn run_call_in(
        &self,
        environment_id: &str,
        call: &ToolCall,
        tap: Option<hookbox_environments::runner::StdoutTap>,
        gate: Gate,
        transcript: &[u8],
    ) -> ToolExecution {
        let env = match self.env(environment_id).await {
            Ok(env) => env,
            Err(ProviderError::EnvironmentNotFound(id)) => {
                return ToolExecution::error(format!("environment `{id}` not found"));
            }
            Err(err) => {
                tracing::error!(environment_id, error = %err, "cannot open the environment's sandbox");
                return ToolExecution::error(
                    "the sandbox could not be opened; see the hookbox server log",
                );
            }
        };
        let started = std::time::Instant::now();
        // The call's span (its hook handlers' spans beneath it); never arguments or output.
        let span = tracing::info_span!(
            "tool_call",
            tool = %call.name,
            environment_id,
            outcome = tracing::field::Empty,
            duration_ms = tracing::field::Empty
        );
        let run = async {
            match gate {
                Gate::PreHooks => env.call_tool_in(call.clone(), tap, transcript).await,
                Gate::Approved => env.call_tool_approved(call.clone(), tap).await,
            }
        };
        let outcome = tracing::Instrument::instrument(run, span.clone()).await;
        let duration_ms = started.elapsed().as_millis() as u64;
        let result = outcome.result.label();
        span.record("outcome", result);
        span.record("duration_ms", duration_ms);
        tracing::info!(
            name: hookbox_protocol::events::TOOL_FINISHED,
            environment_id,
            tool = %call.name,
            outcome = result,
            duration_ms,
            pre_handlers = outcome.pre.trace.len(),
            post_handlers = outcome.post.as_ref().map_or(0, |p| p.trace.len()),
            pre_decision = outcome.pre.decision.label(),
            args_rewritten = outcome.original_args.is_some(),
            "tool call finished"
        );
        execution(outcome)
    }
}

/// The lifecycle's outcome as the agent loop takes it: what the model sees, the trace for the
/// step, and the verdict (a deny's reason, or what a reviewer is asked about).
fn execution(outcome: Outcome) -> ToolExecution {
    let (denied_reason, approval) = match &outcome.result {
        ToolResult::Denied { reason } => (Some(reason.clone()), None),
        ToolResult::NeedsApproval { reason, group } => {
            let request = hookbox_agent::ApprovalRequest {
                reason: reason.clone(),
                group: group.clone(),
                args: outcome.call.args.clone(),
            };
            (None, Some(request))
        }
        ToolResult::Ok { .. } | ToolResult::Error { .. } => (None, None),
    };
    ToolExecution {
        output: outcome.view.output,
        is_error: outcome.view.is_error,
        denied_reason,
        trace: outcome.trace,
        approval,
    }
}
