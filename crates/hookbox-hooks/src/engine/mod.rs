//! Dispatch: running the handlers that match a tool call, in order, and deciding.
//!
//! The rules (spec §4–§6), all in [`HookEngine::dispatch`]:
//! - groups in file order, disabled groups skipped; within a group, rules in order; within a
//!   matching rule, handlers in order; one at a time, awaited;
//! - in `pre_tool_execution`, the first `{"decision":"deny"}` blocks the call and the handlers
//!   after it do not run; `{"decision":"allow"}` and every failure (spawn error, non-zero exit,
//!   signal, timeout, output overflow, empty/non-JSON/unrecognised output, non-2xx, unreachable)
//!   let the call proceed: fail open, logged with the handler's identity;
//! - in `post_tool_execution` output is ignored; failures are logged and traced.
//!
//! hookbox extensions, opt-in per handler or per answer (a reference-style file never uses
//! them, so it behaves exactly as the reference says):
//! - `"on_failure": "deny"` on a handler: its failure in a pre hook denies the call with a
//!   reason naming the failure (fail closed); in a post hook it is recorded as such;
//! - a pre hook answering `{"decision": "allow", "updated_args": {...}}` rewrites the call's
//!   arguments: they are validated against the tool's argument schema (when the engine has a
//!   validator), later handlers and the post hooks see them, and the tool runs with them;
//!   invalid ones deny the call with the validator's reason;
//! - a pre hook answering `{"decision": "ask", "reason": "..."}` asks a person: the call neither
//!   runs nor is denied here ([`Decision::Ask`]); the caller pauses it for a reviewer. Later
//!   handlers still run: a deny among them wins over the ask (nobody is asked about a call that
//!   is refused anyway), and their `updated_args` apply to the call the reviewer sees. The first
//!   ask's reason is the one shown.
//!
//! A rule from another agent CLI's hooks file ([`crate::dialect`], enabled per server) runs its
//! handlers once for each vendor call the hookbox call is shown as (one per chunk of a
//! several-chunk edit) that its own matcher and event accept, with the vendor's input and
//! environment; its answer is read as that CLI reads it and becomes the same outcomes (deny,
//! ask, rewrite mapped back — or denied when it cannot be —, failure under `on_failure`). The
//! same vendor handler reached through two files runs once per call. Its trace line adds a
//! `vendor` record.
//!
//! What is recorded where: the [`Dispatch`] (the step's trace, the tenant's) keeps what each
//! handler said: its stderr, an excerpt of an unparseable answer, its reason. With
//! [`HookEngine::with_secrets`] every such text is first scrubbed of the values the
//! environment's egress injects. The `hook_handler` span carries the event, tool, group,
//! handler type, decision and failure kind ([`Failure::summary`]); the `hook.ran` /
//! `hook.failed` log events add the handler (its command line or URL), the duration and the
//! deny or ask reason (the audit log reads them). Neither ever carries a handler's input,
//! output or `updated_args`.
//!
//! The engine does not know where commands run or how HTTP leaves: see [`crate::command`] and
//! [`crate::http`]. What a handler's answer means is read in [`crate::answer`]; the values a
//! dispatch produces are [`crate::decision`]'s. The `hook.ran` / `hook.failed` events are
//! emitted here, so their target stays `hookbox_hooks::engine` (the metrics and audit layers
//! select them by it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::field::Empty;

use hookbox_protocol::{HookEvent, HookPayload, InteractionHookPayload, ToolCall, ToolName};

use crate::answer::{Verdict, answer_context, excerpt, interpret, pre_only_answer};
use crate::command::{CommandRequest, CommandRunner, DEFAULT_OUTPUT_LIMIT, Termination};
use crate::config::{Group, Handler, HandlerKind, HooksConfig, OnFailure, Rule};
use crate::decision::{Decision, Dispatch, Failure, HandlerTrace, Outcome, VendorTrace};
use crate::dialect::{self, answer_in::VendorVerdict, load::VendorRule, tools::VendorCall};
use crate::http::{DEFAULT_RESPONSE_LIMIT, HttpError, HttpPoster, HttpRequest};
use crate::matcher::MCP_PREFIX;

mod vendor;

/// What the lifecycle knows of a call beyond the reference payload. Only vendor handlers'
/// input carries it ([`crate::dialect::payload`]); a reference handler's input never changes.
#[derive(Debug, Clone, Default)]
pub struct VendorExtras {
    /// post: the tool's output as JSON (`code_execution`'s `{stdout, stderr, exit_code, …}`,
    /// a file tool's object, a remote tool's text). Bounded when it is written into the
    /// input ([`crate::dialect::payload::TOOL_RESPONSE_LIMIT`]).
    pub tool_output: Option<serde_json::Value>,
    /// The interaction's steps up to the call as JSON Lines, already bounded by the caller
    /// (empty: no interaction, a file with no lines). A command handler reads it at its
    /// `transcript_path` ([`crate::dialect::payload::transcript_preamble`]).
    pub transcript: Vec<u8>,
    /// pre `view_file`: the whole file's text, for Cursor's `beforeReadFile` `content` (bounded
    /// when written, [`crate::dialect::payload::TOOL_RESPONSE_LIMIT`]).
    pub file_content: Option<String>,
}

/// Checks rewritten arguments against a tool's argument schema: `Err(why)` when they do not fit.
pub type ArgsValidator =
    Arc<dyn Fn(ToolName, &serde_json::Value) -> Result<(), String> + Send + Sync>;

/// Runs hooks. Cheap to clone; one per environment is typical, since the command runner decides
/// where commands run.
#[derive(Debug, Clone)]
pub struct HookEngine {
    commands: Arc<dyn CommandRunner>,
    http: Arc<dyn HttpPoster>,
    output_limit: usize,
    validator: Option<ValidatorHandle>,
    /// What must be scrubbed from every text a handler produced before it is recorded.
    secrets: Option<Arc<dyn crate::scrub::Secrets>>,
    /// The variables the environment declares: the only values a vendor http handler's
    /// `allowedEnvVars` can put into its headers (never the host's environment).
    declared_env: Arc<[(String, String)]>,
}

/// [`ArgsValidator`] with a `Debug` the engine can derive.
#[derive(Clone)]
struct ValidatorHandle(ArgsValidator);

impl std::fmt::Debug for ValidatorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArgsValidator")
    }
}

impl HookEngine {
    pub fn new(commands: Arc<dyn CommandRunner>, http: Arc<dyn HttpPoster>) -> Self {
        Self {
            commands,
            http,
            output_limit: DEFAULT_OUTPUT_LIMIT,
            validator: None,
            secrets: None,
            declared_env: Arc::from(Vec::new()),
        }
    }

    /// The variables the environment declares, which a Claude Code http handler's
    /// `allowedEnvVars` may interpolate into its headers. Without it they resolve to empty.
    pub fn with_declared_env(mut self, env: Vec<(String, String)>) -> Self {
        self.declared_env = Arc::from(env);
        self
    }

    /// Scrubs `secrets` (the values the environment's egress injects) out of every text a
    /// handler produced (its stderr, its unparseable output, its reason, its context) before
    /// anything records it: an upstream may echo injected headers into a handler's output.
    pub fn with_secrets(mut self, secrets: Arc<dyn crate::scrub::Secrets>) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// Scrubs the texts of one handler's result (see [`Self::with_secrets`]); the secrets are
    /// read only when there is text.
    fn scrub(&self, outcome: &mut Outcome, others: [&mut Option<String>; 3]) {
        let Some(source) = &self.secrets else {
            return;
        };
        let mut texts: Vec<&mut String> = others.into_iter().flatten().collect();
        match outcome {
            Outcome::Deny { reason } | Outcome::Ask { reason } => texts.push(reason),
            Outcome::InvalidUpdate { reason, .. } => texts.push(reason),
            Outcome::FailedOpen { failure }
            | Outcome::FailedClosed { failure }
            | Outcome::Failed { failure } => texts.extend(failure.texts_mut()),
            Outcome::Allow
            | Outcome::AllowUpdated { .. }
            | Outcome::Completed
            | Outcome::Skipped
            | Outcome::Disabled => {}
        }
        if texts.iter().all(|t| t.is_empty()) {
            return;
        }
        let secrets = source.values();
        if secrets.is_empty() {
            return;
        }
        for text in texts {
            *text = crate::scrub::scrub(text, &secrets);
        }
    }

    /// Checks `updated_args` with `validator` before anything uses them. Without one, any JSON
    /// object is accepted (the tool still checks its arguments when it runs).
    pub fn with_args_validator(mut self, validator: ArgsValidator) -> Self {
        self.validator = Some(ValidatorHandle(validator));
        self
    }

    /// Caps what is read from each handler (stdout, stderr, HTTP body). Default 1 MiB.
    pub fn with_output_limit(mut self, limit: usize) -> Self {
        self.output_limit = limit;
        self
    }

    /// Runs `pre_tool_execution` hooks; the decision says whether the tool may run.
    pub async fn pre_tool(
        &self,
        config: &HooksConfig,
        call: &ToolCall,
        environment_id: &str,
    ) -> Dispatch {
        let payload = HookPayload {
            tool_call: call.clone(),
            environment_id: environment_id.to_owned(),
            error: None,
            hook_event_name: HookEvent::PreToolExecution,
        };
        self.dispatch(config, &payload).await
    }

    /// Runs `post_tool_execution` hooks; `error` is the tool's stderr or failure, if any.
    pub async fn post_tool(
        &self,
        config: &HooksConfig,
        call: &ToolCall,
        environment_id: &str,
        error: Option<&str>,
    ) -> Dispatch {
        let payload = HookPayload {
            tool_call: call.clone(),
            environment_id: environment_id.to_owned(),
            error: error.map(str::to_owned),
            hook_event_name: HookEvent::PostToolExecution,
        };
        self.dispatch(config, &payload).await
    }

    /// Runs `event`'s hooks for a call of a tool that is not one of the six (a remote MCP
    /// server's, `name` = `mcp:<server>/<tool>`; hookbox extension). Only matchers that start
    /// with `mcp:` match such names, so a reference-style file never sees them. `updated_args`
    /// are accepted as any JSON object (the server checks them); `error` as in
    /// [`Self::post_tool`].
    pub async fn named_tool(
        &self,
        config: &HooksConfig,
        event: HookEvent,
        name: &str,
        args: &serde_json::Value,
        environment_id: &str,
        error: Option<&str>,
    ) -> Dispatch {
        self.named_tool_with(
            config,
            event,
            name,
            args,
            environment_id,
            error,
            &VendorExtras::default(),
        )
        .await
    }

    /// [`Self::named_tool`], with what only vendor handlers' input carries.
    #[allow(clippy::too_many_arguments)]
    pub async fn named_tool_with(
        &self,
        config: &HooksConfig,
        event: HookEvent,
        name: &str,
        args: &serde_json::Value,
        environment_id: &str,
        error: Option<&str>,
        extras: &VendorExtras,
    ) -> Dispatch {
        let mut payload = serde_json::json!({
            "tool_call": {"name": name, "args": args},
            "environment_id": environment_id,
        });
        if let Some(error) = error {
            payload["error"] = serde_json::Value::String(error.to_owned());
        }
        payload["hook_event_name"] = serde_json::json!(event);
        self.dispatch_value(config, event, name, None, Payload::Json(payload), extras)
            .await
    }

    /// Runs `pre_interaction` or `post_interaction` hooks (hookbox extension): their matchers
    /// are matched against the agent's name. A `pre_interaction` deny stops the turn; every
    /// `additional_context` is for the model.
    pub async fn interaction(
        &self,
        config: &HooksConfig,
        payload: &InteractionHookPayload,
    ) -> Dispatch {
        // Serialising our own types cannot fail; an empty body would still fail open safely.
        let value = serde_json::to_value(payload).unwrap_or_default();
        let mut dispatch = self
            .dispatch_value(
                config,
                payload.hook_event_name,
                &payload.agent,
                None,
                Payload::Json(value),
                &VendorExtras::default(),
            )
            .await;
        dispatch.tool.clear();
        dispatch
    }

    /// Runs every matching handler of `payload.hook_event_name`, in order.
    pub async fn dispatch(&self, config: &HooksConfig, payload: &HookPayload) -> Dispatch {
        self.dispatch_with(config, payload, &VendorExtras::default())
            .await
    }

    /// [`Self::dispatch`], with what only vendor handlers' input carries (the tool's output
    /// for a post event); a reference handler's input is the same as without it.
    pub async fn dispatch_with(
        &self,
        config: &HooksConfig,
        payload: &HookPayload,
        extras: &VendorExtras,
    ) -> Dispatch {
        let tool = payload.tool_call.name;
        self.dispatch_value(
            config,
            payload.hook_event_name,
            tool.as_str(),
            Some(tool),
            Payload::Tool(std::borrow::Cow::Borrowed(payload)),
            extras,
        )
        .await
    }

    /// The dispatch itself: `subject` is what matchers match (a tool's or an agent's name),
    /// `tool` the built-in tool whose argument schema checks `updated_args` (none: any JSON
    /// object), `payload` what handlers receive.
    async fn dispatch_value(
        &self,
        config: &HooksConfig,
        event: HookEvent,
        subject: &str,
        tool: Option<ToolName>,
        payload: Payload<'_>,
        extras: &VendorExtras,
    ) -> Dispatch {
        let started = Instant::now();
        let mut state = State {
            extras,
            body: payload.body(),
            payload,
            decision: Decision::Allow,
            trace: Vec::new(),
            updated_args: None,
            additional_context: Vec::new(),
            ran_vendor: Vec::new(),
        };

        let (tool_field, agent_field) = subject_fields(event, subject);
        for (group, rule) in matching_rules(config, event, subject) {
            for handler in &rule.handlers {
                if let Some(vendor) = &rule.vendor {
                    self.vendor_handler(
                        &mut state, event, subject, tool, group, rule, vendor, handler,
                    )
                    .await;
                    continue;
                }
                let outcome = if !group.enabled {
                    Outcome::Disabled
                } else if matches!(state.decision, Decision::Deny { .. }) {
                    Outcome::Skipped
                } else {
                    let handler_started = Instant::now();
                    let span = handler_span(event, subject, group);
                    let (mut outcome, mut stderr, mut warning, mut context) =
                        tracing::Instrument::instrument(
                            self.run_handler(event, tool, handler, &state.body),
                            span.clone(),
                        )
                        .await;
                    self.scrub(&mut outcome, [&mut stderr, &mut warning, &mut context]);
                    let mut entry =
                        trace_entry(group, rule, handler, outcome, stderr, handler_started);
                    entry.warning = warning;
                    entry.additional_context = context;
                    state.record(&span, event, subject, group, rule, handler, entry);
                    continue;
                };
                state.trace.push(trace_entry(
                    group,
                    rule,
                    handler,
                    outcome,
                    None,
                    Instant::now(),
                ));
            }
        }

        let dispatch = Dispatch {
            event,
            tool: subject.to_owned(),
            decision: state.decision,
            trace: state.trace,
            duration_ms: millis(started.elapsed()),
            updated_args: state.updated_args,
            additional_context: state.additional_context,
        };
        tracing::debug!(
            tool = tool_field,
            agent = agent_field,
            event = %event,
            decision = dispatch.decision.label(),
            handlers = dispatch.trace.len(),
            duration_ms = dispatch.duration_ms,
            "hooks dispatched"
        );
        dispatch
    }

    async fn run_handler(
        &self,
        event: HookEvent,
        tool: Option<ToolName>,
        handler: &Handler,
        body: &[u8],
    ) -> (Outcome, Option<String>, Option<String>, Option<String>) {
        let (result, stderr) = match &handler.kind {
            HandlerKind::Command { command } => self.run_command(command, handler, body).await,
            HandlerKind::Http { url, headers, .. } => {
                (self.run_http(url, headers, handler, body).await, None)
            }
            // Only vendor files have these; they never reach here, but fail like one.
            HandlerKind::Unsupported { type_name, .. } => (
                Err(Failure::Unsupported {
                    handler_type: (*type_name).to_owned(),
                }),
                None,
            ),
        };
        let fail_closed = handler.on_failure == OnFailure::Deny;
        let failed = |failure| match fail_closed {
            true => Outcome::FailedClosed { failure },
            false => Outcome::FailedOpen { failure },
        };
        let mut warning = None;
        let mut context = None;
        if let Ok(stdout) = &result {
            match answer_context(stdout) {
                Ok(found) => context = found,
                Err(why) => warning = Some(why),
            }
        }
        let tool_event = event.is_tool_event();
        let outcome = match (event.decides(), result) {
            (true, Ok(stdout)) => match interpret(&stdout, event) {
                Ok(Verdict::Allow(None)) => Outcome::Allow,
                Ok(Verdict::Allow(Some(_))) if !tool_event => {
                    warning = Some(format!(
                        "updated_args is honoured only in pre_tool_execution hooks; ignored in {event}"
                    ));
                    Outcome::Allow
                }
                Ok(Verdict::Allow(Some(updated_args))) => {
                    match self.validate(tool, &updated_args) {
                        Ok(()) => Outcome::AllowUpdated { updated_args },
                        Err(reason) => Outcome::InvalidUpdate {
                            updated_args,
                            reason,
                        },
                    }
                }
                Ok(Verdict::Deny(reason)) => Outcome::Deny { reason },
                Ok(Verdict::Ask(reason)) if tool_event => Outcome::Ask { reason },
                // Only a tool call can wait for a person: an ask elsewhere is no decision.
                Ok(Verdict::Ask(_)) => failed(Failure::NotADecision {
                    excerpt: format!(
                        "\"decision\": \"ask\" is honoured only in pre_tool_execution hooks, not {event}"
                    ),
                }),
                Err(failure) => failed(failure),
            },
            (true, Err(failure)) => failed(failure),
            (false, Ok(stdout)) => {
                if let Some(key) = pre_only_answer(&stdout) {
                    warning = Some(format!(
                        "{key} is honoured only in pre_tool_execution hooks; ignored here"
                    ));
                }
                Outcome::Completed
            }
            (false, Err(failure)) => Outcome::Failed { failure },
        };
        (outcome, stderr, warning, context)
    }

    fn validate(&self, tool: Option<ToolName>, args: &serde_json::Value) -> Result<(), String> {
        if !args.is_object() {
            return Err(format!(
                "updated_args must be a JSON object of the tool's arguments, found {}",
                crate::diagnostic::describe(args)
            ));
        }
        match (&self.validator, tool) {
            (Some(ValidatorHandle(validate)), Some(tool)) => validate(tool, args),
            _ => Ok(()),
        }
    }

    /// Ok(stdout) when the command exited 0; the failure otherwise. Also returns a stderr excerpt.
    async fn run_command(
        &self,
        command: &str,
        handler: &Handler,
        body: &[u8],
    ) -> (Result<Vec<u8>, Failure>, Option<String>) {
        let mut stdin = body.to_vec();
        stdin.push(b'\n');
        let request = CommandRequest {
            command: command.to_owned(),
            stdin,
            timeout: handler.timeout,
            output_limit: self.output_limit,
        };
        let output = match self.commands.run(request).await {
            Ok(output) => output,
            Err(err) => {
                return (
                    Err(Failure::Spawn {
                        message: err.to_string(),
                    }),
                    None,
                );
            }
        };
        let stderr = (!output.stderr.is_empty()).then(|| excerpt(&output.stderr));
        let result = match output.termination {
            Termination::Exited(0) => Ok(output.stdout),
            Termination::Exited(code) => Err(Failure::NonZeroExit { code }),
            Termination::Signaled(signal) => Err(Failure::Signaled { signal }),
            Termination::TimedOut => Err(Failure::TimedOut {
                after_ms: millis(handler.timeout),
            }),
            Termination::OutputLimit => Err(Failure::OutputLimit {
                limit: self.output_limit,
            }),
        };
        (result, stderr)
    }

    /// Ok(body) on a 2xx answer; the failure otherwise.
    async fn run_http(
        &self,
        url: &str,
        headers: &[(String, String)],
        handler: &Handler,
        body: &[u8],
    ) -> Result<Vec<u8>, Failure> {
        let request = HttpRequest {
            url: url.to_owned(),
            headers: headers.to_vec(),
            body: body.to_vec(),
            timeout: handler.timeout,
            response_limit: self.output_limit.min(DEFAULT_RESPONSE_LIMIT),
        };
        match self.http.post(request).await {
            Ok(response) if !(200..300).contains(&response.status) => Err(Failure::HttpStatus {
                status: response.status,
            }),
            Ok(response) if response.truncated => Err(Failure::ResponseTooLarge {
                limit: self.output_limit.min(DEFAULT_RESPONSE_LIMIT),
            }),
            Ok(response) => Ok(response.body),
            Err(HttpError::TimedOut) => Err(Failure::TimedOut {
                after_ms: millis(handler.timeout),
            }),
            Err(err) => Err(Failure::Http {
                message: err.to_string(),
            }),
        }
    }
}

/// Claude Code's header interpolation: `$NAME` and `${NAME}` become `declared`'s value of NAME
/// when `allowed` lists it, and nothing otherwise; any other text is kept as written.
fn interpolate_header(value: &str, allowed: &[String], declared: &[(String, String)]) -> String {
    let lookup = |name: &str| -> String {
        if !allowed.iter().any(|a| a == name) {
            return String::new();
        }
        declared
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(braced) = after.strip_prefix('{')
            && let Some(end) = braced.find('}')
            && !braced[..end].is_empty()
            && braced[..end].chars().all(is_name)
        {
            out.push_str(&lookup(&braced[..end]));
            rest = &braced[end + 1..];
            continue;
        }
        let len = after
            .char_indices()
            .find(|&(_, c)| !is_name(c))
            .map_or(after.len(), |(j, _)| j);
        if len == 0 || after.starts_with(|c: char| c.is_ascii_digit()) {
            out.push('$');
            rest = after;
            continue;
        }
        out.push_str(&lookup(&after[..len]));
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

/// What handlers receive: a built-in tool call's typed payload (copied only when a handler
/// rewrites its arguments, since it may carry a whole file), or any other JSON payload.
enum Payload<'a> {
    Tool(std::borrow::Cow<'a, HookPayload>),
    Json(serde_json::Value),
}

impl Payload<'_> {
    /// The bytes handlers read. Serialising our own types cannot fail; an empty body would
    /// still fail open safely.
    fn body(&self) -> Vec<u8> {
        match self {
            Payload::Tool(p) => serde_json::to_vec(&**p),
            Payload::Json(v) => serde_json::to_vec(v),
        }
        .unwrap_or_default()
    }

    /// Rewrites `tool_call.args` (a handler's `updated_args`).
    fn set_args(&mut self, args: &serde_json::Value) {
        match self {
            Payload::Tool(p) => p.to_mut().tool_call.args = args.clone(),
            Payload::Json(v) => {
                if let Some(slot) = v.pointer_mut("/tool_call/args") {
                    *slot = args.clone();
                }
            }
        }
    }
}

/// What vendor payloads are made of, read from the payload handlers receive.
struct Facts {
    environment_id: String,
    interaction_id: Option<String>,
    args: serde_json::Value,
    error: Option<String>,
    prompt: Option<String>,
    output: Option<String>,
    status: Option<String>,
}

impl Payload<'_> {
    fn facts(&self) -> Facts {
        let text = |v: &serde_json::Value, key: &str| {
            v.get(key)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        match self {
            Payload::Tool(p) => Facts {
                environment_id: p.environment_id.clone(),
                interaction_id: None,
                args: p.tool_call.args.clone(),
                error: p.error.clone(),
                prompt: None,
                output: None,
                status: None,
            },
            Payload::Json(v) => Facts {
                environment_id: text(v, "environment_id").unwrap_or_default(),
                interaction_id: text(v, "interaction_id"),
                args: v.pointer("/tool_call/args").cloned().unwrap_or_default(),
                error: text(v, "error"),
                prompt: text(v, "input_text"),
                output: text(v, "output"),
                status: text(v, "status"),
            },
        }
    }
}

/// A dispatch under way.
struct State<'a> {
    payload: Payload<'a>,
    extras: &'a VendorExtras,
    body: Vec<u8>,
    decision: Decision,
    trace: Vec<HandlerTrace>,
    updated_args: Option<serde_json::Value>,
    additional_context: Vec<String>,
    /// Vendor handlers that ran (type, target, chunk) and the file they came from: the same
    /// handler reached through two files runs once.
    ran_vendor: Vec<(RanKey, String)>,
}

/// A vendor handler's identity within one dispatch: its type, its command line or URL, and the
/// chunk it saw.
type RanKey = (&'static str, String, Option<usize>);

impl State<'_> {
    /// Takes in what one handler did: logs it, and lets a deny, ask or rewrite change the
    /// dispatch.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        span: &tracing::Span,
        event: HookEvent,
        subject: &str,
        group: &Group,
        rule: &Rule,
        handler: &Handler,
        entry: HandlerTrace,
    ) {
        if let Some(context) = &entry.additional_context {
            self.additional_context.push(context.clone());
        }
        record_handler(span, &entry);
        let (tool, agent) = subject_fields(event, subject);
        span.in_scope(|| log_handler(event.as_str(), tool, agent, &entry));
        match &entry.outcome {
            Outcome::Deny { reason } => {
                self.decision = Decision::Deny {
                    reason: reason.clone(),
                    group: group.name.clone(),
                };
            }
            Outcome::FailedClosed { failure } => {
                self.decision = Decision::Deny {
                    reason: format!(
                        "Blocked: the hook `{}` ({} handler {} of rule {}) failed ({failure}) and is set to fail closed (on_failure: deny).",
                        group.name,
                        handler.kind.type_name(),
                        handler.index,
                        rule.index
                    ),
                    group: group.name.clone(),
                };
            }
            Outcome::InvalidUpdate { reason, .. } => {
                self.decision = Decision::Deny {
                    reason: format!(
                        "Blocked: the hook `{}` rewrote the arguments of {subject} into invalid ones: {reason}",
                        group.name
                    ),
                    group: group.name.clone(),
                };
            }
            Outcome::Ask { reason } => {
                // The first ask is the one a person sees; a deny still overrides it.
                if self.decision == Decision::Allow {
                    self.decision = Decision::Ask {
                        reason: reason.clone(),
                        group: group.name.clone(),
                    };
                }
            }
            Outcome::AllowUpdated { updated_args: args } => {
                // Later handlers (and the caller) see the rewritten call.
                self.payload.set_args(args);
                self.body = self.payload.body();
                self.updated_args = Some(args.clone());
            }
            Outcome::Allow
            | Outcome::FailedOpen { .. }
            | Outcome::Completed
            | Outcome::Failed { .. }
            | Outcome::Skipped
            | Outcome::Disabled => {}
        }
        self.trace.push(entry);
    }
}

/// The subject as the `tool` and `agent` fields: a tool's name for tool events, an agent's for
/// interaction events (#31: a `pre_interaction` failure logged the agent as `tool`, and
/// client-chosen agent names became metric labels).
fn subject_fields(event: HookEvent, subject: &str) -> (&str, &str) {
    match event.is_tool_event() {
        true => (subject, ""),
        false => ("", subject),
    }
}

fn handler_span(event: HookEvent, subject: &str, group: &Group) -> tracing::Span {
    let (tool, agent) = subject_fields(event, subject);
    tracing::info_span!(
        "hook_handler",
        event = event.as_str(),
        tool,
        agent,
        group = %group.name,
        handler_type = Empty,
        decision = Empty,
        failure = Empty
    )
}

/// Every (group, rule) whose matcher accepts `subject`, in dispatch order.
/// The rules of `config` at `event` that a call of `subject` (a tool's name, or an MCP tool's
/// `mcp:<server>/<tool>`) matches, in order, with their groups (enabled or not: a disabled
/// group's rules are traced as skipped).
pub fn matching_rules<'a>(
    config: &'a HooksConfig,
    event: HookEvent,
    subject: &'a str,
) -> impl Iterator<Item = (&'a Group, &'a Rule)> {
    // A remote MCP tool (`mcp:<server>/<tool>`) is matched only by matchers written for one.
    let mcp = subject.starts_with(MCP_PREFIX);
    config.groups.iter().flat_map(move |group| {
        group
            .rules(event)
            .iter()
            // A vendor rule's own matcher decides, on the vendor's tool names (MCP included).
            .filter(move |rule| {
                rule.vendor.is_some()
                    || (rule.matcher.is_for_mcp() == mcp && rule.matcher.matches(subject))
            })
            .map(move |rule| (group, rule))
    })
}

fn trace_entry(
    group: &Group,
    rule: &Rule,
    handler: &Handler,
    outcome: Outcome,
    stderr: Option<String>,
    started: Instant,
) -> HandlerTrace {
    HandlerTrace {
        group: group.name.clone(),
        file: group.file.clone(),
        rule_index: rule.index,
        handler_index: handler.index,
        handler_type: handler.kind.type_name(),
        target: handler.kind.target().to_owned(),
        outcome,
        duration_ms: millis(started.elapsed()),
        stderr,
        additional_context: None,
        warning: None,
        vendor: None,
    }
}

/// What a handler's span says once it ran: its type, its decision, and the kind of failure
/// ([`Failure::summary`]). Never its input, its output, nor a deny reason (policy text that
/// may quote the call; the server log and the audit log have it, spans go to a collector).
fn record_handler(span: &tracing::Span, entry: &HandlerTrace) {
    span.record("handler_type", entry.handler_type);
    span.record("decision", entry.outcome.label());
    match &entry.outcome {
        Outcome::FailedOpen { failure }
        | Outcome::FailedClosed { failure }
        | Outcome::Failed { failure } => {
            span.record("failure", failure.summary().as_str());
        }
        Outcome::Allow
        | Outcome::AllowUpdated { .. }
        | Outcome::InvalidUpdate { .. }
        | Outcome::Deny { .. }
        | Outcome::Ask { .. }
        | Outcome::Completed
        | Outcome::Skipped
        | Outcome::Disabled => {}
    }
}

fn log_handler(event: &str, tool: &str, agent: &str, entry: &HandlerTrace) {
    let failure = match &entry.outcome {
        Outcome::FailedOpen { failure }
        | Outcome::FailedClosed { failure }
        | Outcome::Failed { failure } => Some(failure),
        Outcome::Allow
        | Outcome::AllowUpdated { .. }
        | Outcome::InvalidUpdate { .. }
        | Outcome::Deny { .. }
        | Outcome::Ask { .. }
        | Outcome::Completed
        | Outcome::Skipped
        | Outcome::Disabled => None,
    };
    match failure {
        Some(failure) => tracing::warn!(
            name: hookbox_protocol::events::HOOK_FAILED,
            event,
            tool,
            agent,
            group = %entry.group,
            handler_type = entry.handler_type,
            handler = %entry.target,
            handler_index = entry.handler_index,
            decision = entry.outcome.label(),
            duration_ms = entry.duration_ms,
            failure = %failure.summary(),
            "hook handler failed"
        ),
        None => tracing::info!(
            name: hookbox_protocol::events::HOOK_RAN,
            event,
            tool,
            agent,
            group = %entry.group,
            handler_type = entry.handler_type,
            reason = match &entry.outcome {
                Outcome::Deny { reason } | Outcome::Ask { reason } => reason.as_str(),
                _ => "",
            },
            handler = %entry.target,
            handler_index = entry.handler_index,
            decision = entry.outcome.label(),
            duration_ms = entry.duration_ms,
            "hook handler ran"
        ),
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
