//! What a dispatch decided and what each of its handlers did: the [`Decision`] (allow, deny,
//! ask), each handler's [`Outcome`] (with the [`Failure`] that made it fail open or closed) in
//! its [`HandlerTrace`] line, and the whole [`Dispatch`] (the step's trace, the tenant's). Values
//! only, serialised as the trace the API returns; the engine builds them and logs them, this
//! module runs nothing.

use hookbox_protocol::HookEvent;
use serde::Serialize;

/// The verdict of a dispatch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny {
        reason: String,
        /// The group whose handler denied.
        group: String,
    },
    /// A pre hook asked a person to decide (hookbox extension, only when a handler answers
    /// `ask`): the tool must not run until someone approves it.
    Ask {
        reason: String,
        /// The group whose handler asked.
        group: String,
    },
}

impl Decision {
    /// `allow`, `deny` or `ask`.
    pub fn label(&self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny { .. } => "deny",
            Decision::Ask { .. } => "ask",
        }
    }
}

/// Why a handler produced no decision. Each of these fails open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Failure {
    Spawn {
        message: String,
    },
    NonZeroExit {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    TimedOut {
        after_ms: u64,
    },
    OutputLimit {
        limit: usize,
    },
    EmptyOutput,
    NotJson {
        excerpt: String,
    },
    NotADecision {
        excerpt: String,
    },
    HttpStatus {
        status: u16,
    },
    Http {
        message: String,
    },
    ResponseTooLarge {
        limit: usize,
    },
    /// A vendor handler type hookbox cannot run (`prompt`, `agent`, `mcp_tool`).
    Unsupported {
        handler_type: String,
    },
}

impl Failure {
    /// The failure as telemetry and the logs tell it: without what the handler printed (its
    /// output is the tenant's, and may echo arguments or secrets), which only the step's trace
    /// keeps.
    pub fn summary(&self) -> String {
        match self {
            Failure::NotJson { .. } => "output is not JSON".to_owned(),
            Failure::NotADecision { .. } => "output is not a decision".to_owned(),
            Failure::Spawn { .. }
            | Failure::NonZeroExit { .. }
            | Failure::Signaled { .. }
            | Failure::TimedOut { .. }
            | Failure::OutputLimit { .. }
            | Failure::EmptyOutput
            | Failure::HttpStatus { .. }
            | Failure::Http { .. }
            | Failure::ResponseTooLarge { .. }
            | Failure::Unsupported { .. } => self.to_string(),
        }
    }

    /// The failure's texts that came from outside (a handler's output, an error message).
    pub(crate) fn texts_mut(&mut self) -> Option<&mut String> {
        match self {
            Failure::NotJson { excerpt } | Failure::NotADecision { excerpt } => Some(excerpt),
            Failure::Spawn { message } | Failure::Http { message } => Some(message),
            Failure::NonZeroExit { .. }
            | Failure::Signaled { .. }
            | Failure::TimedOut { .. }
            | Failure::OutputLimit { .. }
            | Failure::EmptyOutput
            | Failure::HttpStatus { .. }
            | Failure::ResponseTooLarge { .. }
            | Failure::Unsupported { .. } => None,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Spawn { message } => write!(f, "could not run: {message}"),
            Failure::NonZeroExit { code } => write!(f, "exited with status {code}"),
            Failure::Signaled { signal } => write!(f, "killed by signal {signal}"),
            Failure::TimedOut { after_ms } => write!(f, "timed out after {after_ms} ms"),
            Failure::OutputLimit { limit } => write!(f, "printed more than {limit} bytes"),
            Failure::EmptyOutput => f.write_str("printed nothing"),
            Failure::NotJson { excerpt } => write!(f, "output is not JSON: {excerpt:?}"),
            // #31: `{"decision": "Deny"}` said only "not a decision".
            Failure::NotADecision { excerpt } => write!(
                f,
                "output is not a decision: {excerpt:?} (expected {{\"decision\": \"allow\"}}, \"deny\" or \"ask\", in lower case)"
            ),
            Failure::HttpStatus { status } => write!(f, "answered HTTP {status}"),
            Failure::Http { message } => write!(f, "request failed: {message}"),
            Failure::ResponseTooLarge { limit } => {
                write!(f, "response body larger than {limit} bytes")
            }
            Failure::Unsupported { handler_type } => {
                write!(f, "handler type {handler_type:?} cannot run in hookbox")
            }
        }
    }
}

/// What one handler did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// pre: the handler answered `{"decision":"allow"}`.
    Allow,
    /// pre: the handler answered `{"decision":"deny"}`.
    Deny { reason: String },
    /// pre: the handler answered `{"decision":"ask"}` (hookbox extension): a person decides.
    Ask { reason: String },
    /// pre: the handler answered `{"decision":"allow","updated_args":{...}}` (hookbox
    /// extension); later handlers, the tool and the post hooks see these arguments.
    AllowUpdated { updated_args: serde_json::Value },
    /// pre: the handler's `updated_args` do not fit the tool's arguments; the call is denied.
    InvalidUpdate {
        updated_args: serde_json::Value,
        reason: String,
    },
    /// pre: no decision; the call proceeds.
    FailedOpen { failure: Failure },
    /// pre: the handler failed and is `"on_failure": "deny"`; the call is denied.
    FailedClosed { failure: Failure },
    /// post: the handler ran to a clean end (exit 0 or 2xx).
    Completed,
    /// post: the handler failed; nothing else happens.
    Failed { failure: Failure },
    /// Not run, because an earlier handler denied.
    Skipped,
    /// Not run, because its group has `"enabled": false`.
    Disabled,
}

impl Outcome {
    /// A short word for logs: allow, deny, failed_open, completed, failed, skipped, disabled.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Allow => "allow",
            Outcome::AllowUpdated { .. } => "allow_updated",
            Outcome::InvalidUpdate { .. } => "invalid_update",
            Outcome::Deny { .. } => "deny",
            Outcome::Ask { .. } => "ask",
            Outcome::FailedOpen { .. } => "failed_open",
            Outcome::FailedClosed { .. } => "failed_closed",
            Outcome::Completed => "completed",
            Outcome::Failed { .. } => "failed",
            Outcome::Skipped => "skipped",
            Outcome::Disabled => "disabled",
        }
    }
}

/// One line of the decision trace: which handler, where it is written, what it did, how long.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandlerTrace {
    pub group: String,
    pub file: String,
    pub rule_index: usize,
    pub handler_index: usize,
    /// `command` or `http`.
    pub handler_type: &'static str,
    /// The command line or the URL.
    pub target: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    pub duration_ms: u64,
    /// The start of what the handler wrote to stderr, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// The `additional_context` the handler answered (hookbox extension): text the model sees
    /// with the tool's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
    /// Something about the handler's answer a person should know (an extension used where it
    /// has no effect).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// For a handler from another agent CLI's hooks file: its dialect, event, the tool as it
    /// saw it, and what its answer meant in that CLI's terms. Absent for hookbox's own files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor: Option<VendorTrace>,
}

/// The vendor side of a [`HandlerTrace`] line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VendorTrace {
    pub dialect: crate::dialect::Dialect,
    /// The event as written in the file.
    pub event: String,
    /// The tool name and input the handler was shown (absent for interaction events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// Which chunk of a several-chunk edit it saw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk: Option<usize>,
    /// What the answer meant, as that CLI reads it.
    pub meaning: String,
}

/// The result of running one event's hooks for one tool call (or one interaction).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dispatch {
    pub event: HookEvent,
    /// The tool's name; empty for interaction events.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tool: String,
    /// Always `Allow` for `post_tool_execution`.
    #[serde(flatten)]
    pub decision: Decision,
    pub trace: Vec<HandlerTrace>,
    pub duration_ms: u64,
    /// The arguments after pre hooks rewrote them (`updated_args`); absent when none did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_args: Option<serde_json::Value>,
    /// Every handler's `additional_context`, in the order they ran (hookbox extension; only
    /// when a handler answers one): the model sees it with the tool's result.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub additional_context: Vec<String>,
}
