//! What a tool call came to, typed: the [`Outcome`] the lifecycle builds once (step 5) and
//! every caller reads. What the model sees of a call ([`ModelView`]: the result step's output
//! with the hooks' context, and its error flag) and the hook trace are decided here, from the
//! typed output, never from the tool's JSON read back by key.
//!
//! Must not: run anything (the lifecycle does), or know a caller's protocol (a result step, an
//! MCP result): it hands them typed parts.

use std::fmt;

use hookbox_hooks::Dispatch;
use hookbox_hooks::discover::Loaded;
use hookbox_protocol::{HOOK_CONTEXT_PREFIX, ToolName};
use serde::{Serialize, Serializer};
use serde_json::{Value, json};

use crate::tools::{CodeOutput, ToolOutput};

/// The tool a call names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tool {
    /// One of the six built-in tools.
    Builtin(ToolName),
    /// A remote MCP server's tool, by the name hooks match: `mcp:<server>/<tool>`.
    Remote(String),
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tool::Builtin(name) => f.write_str(name.as_str()),
            Tool::Remote(name) => f.write_str(name),
        }
    }
}

impl Serialize for Tool {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A call: the tool and its arguments (serialised as `{"name", "args"}`, like a `ToolCall`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    #[serde(rename = "name")]
    pub tool: Tool,
    pub args: Value,
}

/// What a remote MCP server's tool answered (its text, scrubbed and cut by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteReply {
    pub text: String,
    /// The server said the call failed, or it could not be made.
    pub is_error: bool,
}

/// What a tool call produced: the verdict, and the output when the tool ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ToolResult {
    /// The tool ran. For `code_execution` this includes a non-zero exit and stderr.
    Ok { output: ToolOutput },
    /// The tool could not do what was asked (bad arguments, missing file, sandbox failure; a
    /// remote server's error).
    Error { error: String },
    /// A pre hook denied the call; the tool did not run. (A remote tool a hook asked about is
    /// denied too: nobody can approve it.)
    Denied { reason: String },
    /// A pre hook asked a person to decide (hookbox extension); the tool did not run. The
    /// caller pauses the call until someone approves it
    /// ([`crate::environment::Environment::call_tool_approved`]).
    NeedsApproval { reason: String, group: String },
}

impl ToolResult {
    /// `ok`, `error`, `denied` or `ask`: the outcome as logs and spans name it.
    pub fn label(&self) -> &'static str {
        match self {
            ToolResult::Ok { .. } => "ok",
            ToolResult::Error { .. } => "error",
            ToolResult::Denied { .. } => "denied",
            ToolResult::NeedsApproval { .. } => "ask",
        }
    }
}

/// What the model sees of a call: the result step's output and whether it is an error.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelView {
    /// Text (command output, a reason, an error) or JSON (a file tool's object), with the hooks'
    /// `additional_context` when they answered one.
    pub output: Value,
    /// The tool failed (an error, a `code_execution` that did not exit 0) or was denied.
    pub is_error: bool,
}

/// Everything about one tool call: the result, the hooks that ran around it, and what the model
/// sees of it. Serialised (as `hookbox tool` prints it) it is the record: the environment, the
/// call, the result, the hooks files read and both dispatches.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub environment_id: String,
    /// The call as the tool ran it (after any pre hook's `updated_args`); as the model made it
    /// when a pre hook denied it.
    pub call: Call,
    pub result: ToolResult,
    /// The hooks files read for this call and their diagnostics.
    pub hooks: Loaded,
    pub pre: Dispatch,
    /// Absent when the call was denied or waits for approval.
    pub post: Option<Dispatch>,
    /// The arguments the call came with, when a pre hook rewrote them (`call` then holds the
    /// arguments the tool ran with).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_args: Option<Value>,
    /// What the hooks answered as `additional_context` (hookbox extension), pre hooks first.
    #[serde(skip)]
    pub context: Vec<String>,
    /// What the model sees of the call.
    #[serde(skip)]
    pub view: ModelView,
    /// The hooks that ran and what they decided, as the result step records them (`null` when
    /// there is nothing to record).
    #[serde(skip)]
    pub trace: Value,
}

impl Outcome {
    /// Step 5 of the lifecycle: the outcome, with what the model sees and the trace decided
    /// once, here.
    pub(super) fn new(
        environment_id: String,
        call: Call,
        result: ToolResult,
        hooks: Loaded,
        (pre, post): (Dispatch, Option<Dispatch>),
        original_args: Option<Value>,
    ) -> Outcome {
        let context: Vec<String> = pre
            .additional_context
            .iter()
            .chain(post.iter().flat_map(|p| p.additional_context.iter()))
            .cloned()
            .collect();
        let mut outcome = Outcome {
            environment_id,
            call,
            result,
            hooks,
            pre,
            post,
            original_args,
            context,
            view: ModelView {
                output: Value::Null,
                is_error: false,
            },
            trace: Value::Null,
        };
        outcome.view = outcome.model_view();
        outcome.trace = outcome.hook_trace();
        outcome
    }

    /// The hooks' `additional_context`, each as the model is shown it: `[context from hooks]
    /// TEXT`.
    pub fn context_lines(&self) -> Vec<String> {
        self.context
            .iter()
            .map(|c| format!("{HOOK_CONTEXT_PREFIX}{c}"))
            .collect()
    }

    /// The `code_execution` output, when the tool ran it.
    pub fn code(&self) -> Option<&CodeOutput> {
        match &self.result {
            ToolResult::Ok {
                output: ToolOutput::Code(code),
            } => Some(code),
            _ => None,
        }
    }

    fn model_view(&self) -> ModelView {
        let (output, is_error) = match &self.result {
            ToolResult::Ok {
                output: ToolOutput::Code(code),
            } => (Value::String(code_text(code)), code.failed()),
            ToolResult::Ok {
                output: ToolOutput::Json(value),
            } => (value.clone(), false),
            ToolResult::Error { error } => (Value::String(error.clone()), true),
            ToolResult::Denied { reason } => (Value::String(reason.clone()), true),
            // Not an error: the call waits for a reviewer, who sees the reason.
            ToolResult::NeedsApproval { reason, .. } => (Value::String(reason.clone()), false),
        };
        // Hooks that answered `additional_context` (hookbox extension): the model sees it with
        // a built-in tool's result; without one, the result is exactly the tool's. A remote
        // tool's result has always been the server's answer alone.
        let output = match self.call.tool {
            Tool::Builtin(_) if !self.context.is_empty() => {
                with_context(output, &self.context_lines())
            }
            Tool::Builtin(_) | Tool::Remote(_) => output,
        };
        ModelView { output, is_error }
    }

    fn hook_trace(&self) -> Value {
        match self.call.tool {
            Tool::Builtin(_) => {
                let mut trace = json!({
                    "files": self.hooks.files,
                    "diagnostics": self.hooks.diagnostics,
                    "pre": self.pre,
                    "post": self.post,
                });
                // A pre hook rewrote the arguments (hookbox extension): the step keeps the
                // model's call, the trace says what actually ran.
                if self.original_args.is_some()
                    && let Some(map) = trace.as_object_mut()
                {
                    map.insert("ran_with_args".into(), self.call.args.clone());
                }
                trace
            }
            // Hooks see a remote tool only through a matcher written for MCP; without one
            // nothing ran, and there is no trace.
            Tool::Remote(_) => {
                let post = self.post.as_ref().filter(|p| !p.trace.is_empty());
                if self.pre.trace.is_empty() && post.is_none() {
                    return Value::Null;
                }
                let mut trace = json!({"pre": self.pre});
                if let (Some(post), Some(map)) = (post, trace.as_object_mut()) {
                    map.insert("post".into(), json!(post));
                }
                trace
            }
        }
    }
}

/// What the model reads of a `code_execution`: stdout then stderr, a note when it did not exit
/// 0 (its status, or how it was stopped), and one when the output was cut.
fn code_text(code: &CodeOutput) -> String {
    let mut text = format!("{}{}", code.stdout, code.stderr);
    match code.exit_code {
        Some(0) => {}
        Some(status) => text.push_str(&format!("(exit status {status})")),
        None => text.push_str(&format!("({})", code.termination)),
    }
    if code.truncated {
        text.push_str("\n(output truncated)");
    }
    text
}

/// A tool result with the hooks' `additional_context` lines: appended to a text result, as an
/// `additional_context` list in a JSON one.
fn with_context(output: Value, context: &[String]) -> Value {
    match output {
        Value::String(mut text) => {
            for line in context {
                text.push('\n');
                text.push_str(line);
            }
            Value::String(text)
        }
        Value::Object(mut map) => {
            map.insert("additional_context".into(), json!(context));
            Value::Object(map)
        }
        other => json!({"result": other, "additional_context": context}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_hooks::Decision;
    use hookbox_process::Termination;
    use hookbox_protocol::HookEvent;

    fn dispatch(context: &[&str]) -> Dispatch {
        Dispatch {
            event: HookEvent::PreToolExecution,
            tool: "code_execution".into(),
            decision: Decision::Allow,
            trace: Vec::new(),
            duration_ms: 0,
            updated_args: None,
            additional_context: context.iter().map(|c| c.to_string()).collect(),
        }
    }

    fn outcome(tool: Tool, result: ToolResult, context: &[&str]) -> Outcome {
        Outcome::new(
            "env_x".into(),
            Call {
                tool,
                args: json!({}),
            },
            result,
            Loaded::default(),
            (dispatch(context), None),
            None,
        )
    }

    fn code(stdout: &str, stderr: &str, termination: Termination) -> ToolResult {
        let exit_code = match termination {
            Termination::Exited(code) => Some(code),
            _ => None,
        };
        ToolResult::Ok {
            output: ToolOutput::Code(CodeOutput {
                stdout: stdout.into(),
                stderr: stderr.into(),
                exit_code,
                termination,
                truncated: false,
            }),
        }
    }

    const CODE: Tool = Tool::Builtin(ToolName::CodeExecution);

    #[test]
    fn code_execution_output_is_text_and_non_zero_exit_is_an_error() {
        let view = |result| outcome(CODE, result, &[]).view;
        let ok = view(code("a\n", "", Termination::Exited(0)));
        assert_eq!((ok.output, ok.is_error), (json!("a\n"), false));
        let bad = view(code("", "no\n", Termination::Exited(2)));
        assert_eq!(
            (bad.output, bad.is_error),
            (json!("no\n(exit status 2)"), true)
        );
        let killed = view(code("", "", Termination::TimedOut));
        assert_eq!(
            (killed.output, killed.is_error),
            (json!("(timed out)"), true)
        );
        let file = json!({"path": "/w", "content": "x"});
        let ok_file = ToolResult::Ok {
            output: ToolOutput::Json(file.clone()),
        };
        let view = outcome(Tool::Builtin(ToolName::ViewFile), ok_file, &[]).view;
        assert_eq!((view.output, view.is_error), (file, false));
    }

    #[test]
    fn code_output_serialises_as_the_tool_json_it_always_was() {
        let ToolResult::Ok { output } = code("a", "b", Termination::Exited(0)) else {
            unreachable!()
        };
        assert_eq!(
            serde_json::to_string(&output).unwrap(),
            r#"{"stdout":"a","stderr":"b","exit_code":0,"termination":"exited with status 0","truncated":false}"#
        );
        assert_eq!(
            output.json().to_string(),
            serde_json::to_string(&output).unwrap()
        );
    }

    #[test]
    fn hook_context_follows_a_text_result_and_joins_a_json_one() {
        let text = outcome(CODE, code("a\n", "", Termination::Exited(0)), &["x", "y"]);
        assert_eq!(
            text.view.output,
            json!("a\n\n[context from hooks] x\n[context from hooks] y")
        );
        let denied = ToolResult::Denied {
            reason: "no".into(),
        };
        let denied = outcome(CODE, denied, &["why"]);
        assert_eq!(denied.view.output, json!("no\n[context from hooks] why"));
        assert!(denied.view.is_error);
        let file = ToolResult::Ok {
            output: ToolOutput::Json(json!({"path": "/w"})),
        };
        let file = outcome(Tool::Builtin(ToolName::ListDir), file, &["z"]);
        assert_eq!(
            file.view.output,
            json!({"path": "/w", "additional_context": ["[context from hooks] z"]})
        );
        // A remote tool's result is its server's answer alone, as it always was.
        let remote = ToolResult::Ok {
            output: ToolOutput::Json(json!("answer")),
        };
        let remote = outcome(Tool::Remote("mcp:docs/search".into()), remote, &["z"]);
        assert_eq!(remote.view.output, json!("answer"));
    }

    #[test]
    fn a_remote_tool_without_mcp_hooks_has_no_trace_and_a_builtin_one_always_has() {
        let ok = || ToolResult::Ok {
            output: ToolOutput::Json(json!("answer")),
        };
        let remote = outcome(Tool::Remote("mcp:docs/search".into()), ok(), &[]);
        assert_eq!(remote.trace, Value::Null);
        let builtin = outcome(Tool::Builtin(ToolName::ListDir), ok(), &[]);
        assert_eq!(
            builtin
                .trace
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["files", "diagnostics", "pre", "post"]
        );
    }
}
