//! The tool-call lifecycle: the one path every tool call of an environment takes, whoever makes
//! it (the API's agent loop through the server's `ToolExecutor`, `hookbox mcp`, `hookbox tool`,
//! and the agent's calls of remote MCP servers' tools).
//!
//! `run` is the whole life of a call, in numbered sections, read top to bottom:
//! 1. **load hooks**: the environment's hooks files (the frozen snapshot when frozen), re-read
//!    for every call so that edits take effect;
//! 2. **pre hooks**: `pre_tool_execution` handlers allow, deny or ask, and may rewrite the
//!    arguments; a call a reviewer approved after a hook asked skips them (the approval is their
//!    decision);
//! 3. **run**: one of the six tools (`code_execution` in the sandbox, file tools confined on the
//!    tree), or a remote MCP server's tool through the caller's closure;
//! 4. **post hooks**: `post_tool_execution` handlers, with `error` when the tool failed or wrote
//!    to stderr (another agent CLI's handlers also get the tool's output as their
//!    `tool_response`, [`hookbox_hooks::VendorExtras`]);
//! 5. **outcome**: one typed [`Outcome`], built once: the tool's output (`code_execution`'s as a
//!    struct), the verdict, what the model sees of it (the result step's output with the hooks'
//!    `additional_context`, and its error flag), the hook trace.
//!
//! Entry points: [`Environment::call_tool`] (and `_streaming`, where a tap sees
//! `code_execution`'s stdout as it is written), [`Environment::call_tool_approved`] and
//! [`Environment::call_remote_tool`].
//!
//! Must not: parse hooks files or interpret handler output (that is `hookbox-hooks`), build
//! sandboxes (the runner and `hookbox-sandbox`), or speak a protocol: callers translate the
//! outcome (the server into a result step, `hookbox-mcp` into an MCP result).

mod outcome;

pub use outcome::{Call, ModelView, Outcome, RemoteReply, Tool, ToolResult};

use futures::future::BoxFuture;
use hookbox_hooks::discover::Loaded;
use hookbox_hooks::{Decision, Dispatch, VendorExtras};
use hookbox_protocol::{HookEvent, HookPayload, ToolCall, ToolName};
use serde_json::Value;

use crate::environment::Environment;
use crate::runner::StdoutTap;
use crate::tools::{self, Ran, ToolError, ToolOutput, Trees};

/// Runs a remote MCP server's tool with the arguments the pre hooks left (step 3 for
/// [`Environment::call_remote_tool`]).
pub type RemoteRun<'a> = Box<dyn FnOnce(Value) -> BoxFuture<'a, RemoteReply> + Send + 'a>;

/// What decides in step 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// The call's pre hooks.
    PreHooks,
    /// A person approved the call after a pre hook asked about it: the pre hooks do not run
    /// again.
    Approved,
}

/// What step 3 runs.
enum Runs<'a> {
    /// One of the six tools; the tap sees `code_execution`'s stdout as it is written.
    Builtin(ToolName, Option<StdoutTap>),
    /// A remote MCP server's tool, by the name its hooks match (`mcp:<server>/<tool>`).
    Remote(String, RemoteRun<'a>),
}

impl Runs<'_> {
    fn tool(&self) -> Tool {
        match self {
            Runs::Builtin(name, _) => Tool::Builtin(*name),
            Runs::Remote(name, _) => Tool::Remote(name.clone()),
        }
    }
}

impl Environment {
    /// Runs one tool call through the hooks: pre hooks (a deny stops here), the tool, post hooks
    /// with `error` when the tool failed or wrote to stderr.
    pub async fn call_tool(&self, call: ToolCall) -> Outcome {
        self.call_tool_streaming(call, None).await
    }

    /// [`Self::call_tool`], with `tap` seeing `code_execution`'s stdout as it is written (only
    /// once the pre hooks allowed the call).
    pub async fn call_tool_streaming(&self, call: ToolCall, tap: Option<StdoutTap>) -> Outcome {
        self.call_tool_in(call, tap, &[]).await
    }

    /// [`Self::call_tool_streaming`] within an interaction: `transcript` is its steps up to
    /// this call as JSON Lines (bounded by the caller), the file other agent CLIs' hooks read at
    /// their `transcript_path` (empty: a file with no lines).
    pub async fn call_tool_in(
        &self,
        call: ToolCall,
        tap: Option<StdoutTap>,
        transcript: &[u8],
    ) -> Outcome {
        let runs = Runs::Builtin(call.name, tap);
        run(self, runs, call.args, Gate::PreHooks, transcript).await
    }

    /// Runs a call that a person approved after a pre hook asked about it (hookbox extension):
    /// the tool with exactly these arguments, then the post hooks. The pre hooks do not run
    /// again: the reviewer's approval is their decision. The outcome's `pre` dispatch is empty.
    pub async fn call_tool_approved(&self, call: ToolCall, tap: Option<StdoutTap>) -> Outcome {
        let runs = Runs::Builtin(call.name, tap);
        run(self, runs, call.args, Gate::Approved, &[]).await
    }

    /// Runs a remote MCP server's tool through this environment's hooks: `name` is what hooks
    /// match (`mcp:<server>/<tool>`; only matchers written for MCP match it, see
    /// `HookEngine::named_tool`), `remote` makes the call with the arguments the pre hooks left.
    /// Nobody can be asked about a remote tool mid-run, so a pre hook's `ask` refuses the call.
    pub async fn call_remote_tool(
        &self,
        name: String,
        args: Value,
        remote: RemoteRun<'_>,
    ) -> Outcome {
        run(self, Runs::Remote(name, remote), args, Gate::PreHooks, &[]).await
    }
}

/// One call's whole life.
async fn run(
    env: &Environment,
    runs: Runs<'_>,
    args: Value,
    gate: Gate,
    transcript: &[u8],
) -> Outcome {
    let id = env.id();
    let mut call = Call {
        tool: runs.tool(),
        args,
    };

    // 1. Load hooks: re-read on every call (parsed again only when a file changed).
    let hooks = env.load_hooks();

    // 2. Pre hooks, or a reviewer's approval in their place.
    let pre = match gate {
        Gate::PreHooks => {
            let mut extras = VendorExtras {
                transcript: transcript.to_vec(),
                ..VendorExtras::default()
            };
            if call.tool == Tool::Builtin(ToolName::ViewFile)
                && hooks.config.has_vendor_rules(HookEvent::PreToolExecution)
            {
                extras.file_content = Some(file_text(env, &call.args));
            }
            dispatch(
                env,
                &hooks,
                HookEvent::PreToolExecution,
                &call,
                None,
                &extras,
            )
            .await
        }
        Gate::Approved => {
            tracing::info!(env_id = %id, tool = %call.tool, "running a call a person approved");
            approved(&call.tool)
        }
    };
    // A pre hook's `updated_args` (validated by the engine for the six tools; any object for a
    // remote tool, whose server checks them) replace the call's arguments for the tool and the
    // post hooks (and what a reviewer is asked about); the originals are kept for the record.
    let mut original_args = pre
        .updated_args
        .clone()
        .map(|updated| std::mem::replace(&mut call.args, updated));
    let stopped = match &pre.decision {
        Decision::Allow => None,
        Decision::Deny { reason, group } => {
            tracing::info!(env_id = %id, tool = %call.tool, %group, %reason, "tool call denied by a pre hook");
            // The model's call is what the record shows for a call that never ran.
            if let Some(original) = original_args.take() {
                call.args = original;
            }
            Some(ToolResult::Denied {
                reason: reason.clone(),
            })
        }
        Decision::Ask { reason, group } => match call.tool {
            Tool::Builtin(_) => {
                tracing::info!(env_id = %id, tool = %call.tool, %group, %reason, "tool call waits for a person's approval");
                Some(ToolResult::NeedsApproval {
                    reason: reason.clone(),
                    group: group.clone(),
                })
            }
            // Approvals pause the sandbox's own tools only: a remote tool is refused, saying why.
            Tool::Remote(_) => {
                tracing::info!(env_id = %id, tool = %call.tool, %group, %reason, "remote tool call refused: a pre hook asks a person");
                Some(ToolResult::Denied {
                    reason: format!(
                        "A hook asks a person to approve this call ({reason}); approvals are for the sandbox's own tools, so the call was not made."
                    ),
                })
            }
        },
    };

    let (result, post) = match stopped {
        Some(result) => (result, None),
        None => {
            // 3. Run: the tool, or the remote server's.
            let (result, hook_error) = match runs {
                Runs::Builtin(name, tap) => ran(builtin(env, name, &call.args, tap).await),
                Runs::Remote(_, remote) => remote_ran(remote(call.args.clone()).await),
            };
            tracing::info!(env_id = %id, tool = %call.tool, ok = matches!(result, ToolResult::Ok { .. }), "tool ran");

            // 4. Post hooks, told what went wrong (and, in another agent CLI's shape, what
            // the tool returned).
            let mut extras = VendorExtras {
                transcript: transcript.to_vec(),
                ..VendorExtras::default()
            };
            if let ToolResult::Ok { output } = &result
                && hooks.config.has_vendor_rules(HookEvent::PostToolExecution)
            {
                extras.tool_output = Some(output.json());
            }
            let post = dispatch(
                env,
                &hooks,
                HookEvent::PostToolExecution,
                &call,
                hook_error.as_deref(),
                &extras,
            )
            .await;
            (result, Some(post))
        }
    };

    // 5. Outcome: what the environment records, then the one typed value every caller reads.
    if let Tool::Builtin(name) = call.tool {
        env.touch(is_write(name) && matches!(result, ToolResult::Ok { .. }));
    }
    Outcome::new(
        id.to_owned(),
        call,
        result,
        (*hooks).clone(),
        (pre, post),
        original_args,
    )
}

/// Runs `event`'s hooks for `call`: the six tools' by their names, a remote tool's only where a
/// matcher written for MCP says so.
async fn dispatch(
    env: &Environment,
    hooks: &Loaded,
    event: HookEvent,
    call: &Call,
    error: Option<&str>,
    extras: &VendorExtras,
) -> Dispatch {
    match &call.tool {
        Tool::Builtin(name) => {
            let payload = HookPayload {
                tool_call: ToolCall {
                    name: *name,
                    args: call.args.clone(),
                },
                environment_id: env.id().to_owned(),
                error: error.map(str::to_owned),
                hook_event_name: event,
            };
            env.engine()
                .dispatch_with(&hooks.config, &payload, extras)
                .await
        }
        Tool::Remote(name) => {
            env.engine()
                .named_tool_with(
                    &hooks.config,
                    event,
                    name,
                    &call.args,
                    env.id(),
                    error,
                    extras,
                )
                .await
        }
    }
}

/// The whole text of the file a `view_file` call names (for Cursor's `beforeReadFile`), read
/// as the tool reads it (confined, capped); empty when it cannot be read as text.
fn file_text(env: &Environment, args: &Value) -> String {
    let trees = Trees {
        tree: env.tree(),
        frozen: env.frozen(),
    };
    let whole = serde_json::json!({"path": args.get("path").cloned().unwrap_or_default()});
    match tools::view_file(trees, &whole) {
        Ok(Ran { output, .. }) => output
            .json()
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        Err(_) => String::new(),
    }
}

/// The pre dispatch of a call a person approved: no handler ran, the reviewer allowed it.
fn approved(tool: &Tool) -> Dispatch {
    Dispatch {
        event: HookEvent::PreToolExecution,
        tool: tool.to_string(),
        decision: Decision::Allow,
        trace: Vec::new(),
        duration_ms: 0,
        updated_args: None,
        additional_context: Vec::new(),
    }
}

/// Step 3 for the six tools.
async fn builtin(
    env: &Environment,
    name: ToolName,
    args: &Value,
    tap: Option<StdoutTap>,
) -> Result<Ran, ToolError> {
    let trees = Trees {
        tree: env.tree(),
        frozen: env.frozen(),
    };
    match name {
        ToolName::CodeExecution => {
            let options = env.runner().options();
            tools::code_execution(
                env.runner(),
                args,
                options.tool_timeout,
                options.output_limit,
                tap,
            )
            .await
        }
        ToolName::ViewFile => tools::view_file(trees, args),
        ToolName::WriteToFile => tools::write_to_file(trees, args),
        ToolName::ReplaceFileContent => tools::replace_file_content(trees, args),
        ToolName::ListDir => tools::list_dir(trees, args),
        ToolName::DeleteFile => tools::delete_file(trees, args),
    }
}

/// A built-in tool's result, and what the post hooks get as `error`.
fn ran(ran: Result<Ran, ToolError>) -> (ToolResult, Option<String>) {
    match ran {
        Ok(Ran { output, hook_error }) => (ToolResult::Ok { output }, hook_error),
        Err(err) => {
            let text = err.to_string();
            (
                ToolResult::Error {
                    error: text.clone(),
                },
                Some(text),
            )
        }
    }
}

/// A remote tool's answer as a result: text, or an error the post hooks are told about.
fn remote_ran(reply: RemoteReply) -> (ToolResult, Option<String>) {
    if reply.is_error {
        (
            ToolResult::Error {
                error: reply.text.clone(),
            },
            Some(reply.text),
        )
    } else {
        let output = ToolOutput::Json(Value::String(reply.text));
        (ToolResult::Ok { output }, None)
    }
}

/// Whether a successful call of `tool` may have changed the tree (the next snapshot must
/// include it).
fn is_write(tool: ToolName) -> bool {
    match tool {
        ToolName::CodeExecution
        | ToolName::WriteToFile
        | ToolName::ReplaceFileContent
        | ToolName::DeleteFile => true,
        ToolName::ViewFile | ToolName::ListDir => false,
    }
}
