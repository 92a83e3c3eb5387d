//! Calls a pre hook asked a person about (hookbox extension, `{"decision": "ask"}`): how the
//! pause looks in an interaction, how a reviewer's answer is read, and what a run is told about
//! the calls a reviewer (or the deadline) settled.
//!
//! The pause is a `function_call` step to the reserved function [`APPROVAL_FUNCTION`], so an
//! unmodified SDK can read it and answer it like any client function: its `arguments` carry the
//! paused call's id, tool, arguments, the hook's reason and the deadline; the client continues
//! the interaction (`previous_interaction_id`) with a `function_result` for it whose `result`
//! is `{"approved": true}` or `{"approved": false, "reason": "…"}` (or that object as JSON text, for
//! SDKs that cannot send an object `result`, such as Java's). Then the tool runs (without
//! its pre hooks again) or the model sees the reviewer's reason as the call's error result. An
//! answer after the deadline, or none at all, denies the call, saying so.
//!
//! The step is only what the client sees. What was paused is reported by the loop as a
//! [`PausedCall`] on a channel no model or client writes to (`LoopEvent::ApprovalRequested`),
//! and the server keeps it as a record; a run is told what to do with paused calls only through
//! [`SettledCall`]s the server hands it after settling those records. Nothing here reads an
//! approval, a request or an answer out of a conversation's steps, so no step a model or client
//! wrote can pause, approve or run anything. A model's own call to the reserved name is
//! answered with [`RESERVED_MESSAGE`] like an unknown tool.
//!
//! The approval steps are between the server and the client: models never see them (the
//! backends skip them through [`crate::steps::as_tool_step`]); the model sees only its own call
//! and, in the end, that call's result. This module decides nothing about storage or HTTP.

use chrono::{DateTime, SecondsFormat, Utc};
use hookbox_protocol::ToolName;
use hookbox_protocol::api::Step;
use serde_json::{Value, json};

/// The reserved name of the function whose calls are approval requests. Clients may not
/// declare a function of this name nor send a call of it; a model's call of it is refused.
pub const APPROVAL_FUNCTION: &str = "hookbox_approval";

/// What a model that calls [`APPROVAL_FUNCTION`] itself is answered (an error result).
pub const RESERVED_MESSAGE: &str = "`hookbox_approval` is reserved: hookbox makes these requests itself when a hook asks a person about a call; it is not a tool you can call";

/// The longest reviewer's reason passed on to the model (characters); longer ones are cut.
pub const MAX_REVIEWER_REASON_LEN: usize = 4 * 1024;

/// How every approval request id begins (no model call id may: the loop renames one that does).
pub const ID_PREFIX: &str = "approval_";

/// The id of the approval request for the call `call_id`.
pub fn approval_id(call_id: &str) -> String {
    format!("{ID_PREFIX}{call_id}")
}

/// Whether `id` is (shaped like) an approval request's id.
pub fn is_approval_id(id: &str) -> bool {
    id.starts_with(ID_PREFIX)
}

/// Whether `step` is an approval request or its answer (hidden from models). A model's own
/// call of the reserved name never has an approval id, so it and its error result are shown.
pub fn is_approval_step(step: &Step) -> bool {
    match step {
        Step::FunctionCall { id, name, .. } => name == APPROVAL_FUNCTION && is_approval_id(id),
        Step::FunctionResult {
            call_id,
            name: Some(name),
            ..
        } => name == APPROVAL_FUNCTION && is_approval_id(call_id),
        _ => false,
    }
}

/// A call a pre hook asked a person about, as the loop reports it (the server records it).
#[derive(Debug, Clone, PartialEq)]
pub struct PausedCall {
    /// The paused call's id.
    pub call_id: String,
    pub tool: ToolName,
    /// The arguments the hooks saw (after any `updated_args`): what runs if approved.
    pub args: Value,
    /// The hook's reason.
    pub reason: String,
    /// The hooks group whose handler asked.
    pub group: String,
    pub expires_at: DateTime<Utc>,
}

impl PausedCall {
    /// Its approval request's id.
    pub fn approval_id(&self) -> String {
        approval_id(&self.call_id)
    }

    /// `expires_at` as RFC 3339 (seconds, `Z`).
    pub fn expires_at_rfc3339(&self) -> String {
        self.expires_at.to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    /// The approval request step the client sees.
    pub fn request_step(&self) -> Step {
        Step::FunctionCall {
            id: self.approval_id(),
            name: APPROVAL_FUNCTION.to_owned(),
            arguments: json!({
                "call_id": self.call_id,
                "tool": self.tool.as_str(),
                "args": self.args,
                "reason": self.reason,
                "hook_group": self.group,
                "expires_at": self.expires_at_rfc3339(),
                "answer": "continue this interaction with a function_result for this call: {\"approved\": true} or {\"approved\": false, \"reason\": \"...\"} (the object, or the same as JSON text)",
            }),
            signature: None,
        }
    }
}

/// A paused call the server settled (from its record, never from a step): a run that continues
/// the pause runs it (approved) or gives the model the verdict as its error result.
#[derive(Debug, Clone, PartialEq)]
pub struct SettledCall {
    pub call_id: String,
    pub tool: ToolName,
    /// Exactly the arguments the hooks saw.
    pub args: Value,
    /// Where the hooks ran; an approved call runs there.
    pub environment_id: String,
    pub verdict: Verdict,
}

/// A reviewer's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Approved,
    /// Denied by the reviewer, with their reason if they gave one.
    Denied(Option<String>),
    /// Nobody answered before the deadline (or the answer came after it).
    TimedOut,
}

impl Verdict {
    /// `approved`, `denied` or `timed_out` (traces, the audit log, metrics).
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Approved => "approved",
            Verdict::Denied(_) => "denied",
            Verdict::TimedOut => "timed_out",
        }
    }

    /// What the model sees as the paused call's (error) result when it did not run.
    pub fn message(&self, tool: &str) -> Option<String> {
        match self {
            Verdict::Approved => None,
            Verdict::Denied(Some(reason)) => Some(format!(
                "Denied by a reviewer: {reason} (a hook asked a person to approve this {tool} call; it did not run)"
            )),
            Verdict::Denied(None) => Some(format!(
                "Denied by a reviewer (a hook asked a person to approve this {tool} call; it did not run; no reason given)"
            )),
            Verdict::TimedOut => Some(format!(
                "Denied: nobody approved this {tool} call before its deadline (a hook asked a person to approve it; it did not run)"
            )),
        }
    }
}

/// Reads a reviewer's `function_result` `result`: `{"approved": bool, "reason"?: string}`. The
/// same object may also come as JSON text: a string, or a list holding one `text` content item.
/// Clients whose SDK cannot send an object `result` answer that way: the Java SDK's
/// `FunctionResultStepResult` has no fields, so an object sent through it arrives as `{}`.
/// `Err` says what is wrong, for a 400.
pub fn parse_answer(result: &Value) -> Result<Verdict, String> {
    match result {
        Value::Object(_) => parse_object(result),
        Value::String(text) => parse_object(&from_text(text)?),
        Value::Array(items) => match items.as_slice() {
            [item] if item.get("type").and_then(Value::as_str) == Some("text") => {
                match item.get("text") {
                    Some(Value::String(text)) => parse_object(&from_text(text)?),
                    _ => Err(expected("a `text` item without text")),
                }
            }
            _ => Err(expected(&format!(
                "a list of {} items (one `text` item holding the object as JSON is accepted)",
                items.len()
            ))),
        },
        other => Err(expected(kind(other))),
    }
}

/// The message for an answer of the wrong shape.
fn expected(found: &str) -> String {
    format!(
        "expected {{\"approved\": true}} or {{\"approved\": false, \"reason\": \"...\"}} (an object, or that object as JSON text), found {found}"
    )
}

/// The object an answer sent as JSON text holds.
fn from_text(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        _ => Err(expected("text that is not a JSON object")),
    }
}

/// Reads the answer object itself.
fn parse_object(result: &Value) -> Result<Verdict, String> {
    let Some(object) = result.as_object() else {
        return Err(expected(kind(result)));
    };
    match object.get("approved") {
        Some(Value::Bool(true)) => Ok(Verdict::Approved),
        Some(Value::Bool(false)) => match object.get("reason") {
            None | Some(Value::Null) => Ok(Verdict::Denied(None)),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(Verdict::Denied(None)),
            Some(Value::String(s)) => Ok(Verdict::Denied(Some(cut(s.trim())))),
            Some(other) => Err(format!("`reason` must be a string, found {}", kind(other))),
        },
        Some(other) => Err(format!(
            "`approved` must be true or false, found {}",
            kind(other)
        )),
        None => Err("`approved` (true or false) is missing".to_owned()),
    }
}

/// The `result` the server records (as the answer step) when nobody answered in time.
pub fn timed_out_answer() -> Value {
    json!({"approved": false, "timed_out": true})
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_REVIEWER_REASON_LEN) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paused() -> PausedCall {
        PausedCall {
            call_id: "call_1".into(),
            tool: ToolName::CodeExecution,
            args: json!({"code": "make deploy"}),
            reason: "deploys need a person".into(),
            group: "review".into(),
            expires_at: DateTime::parse_from_rfc3339("2026-12-04T10:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
        }
    }

    #[test]
    fn answers_are_read_strictly() {
        assert_eq!(
            parse_answer(&json!({"approved": true})),
            Ok(Verdict::Approved)
        );
        assert_eq!(
            parse_answer(&json!({"approved": false, "reason": " not on Fridays "})),
            Ok(Verdict::Denied(Some("not on Fridays".into())))
        );
        assert_eq!(
            parse_answer(&json!({"approved": false})),
            Ok(Verdict::Denied(None))
        );
        // A client cannot claim the deadline's verdict: its timed-out answer is a denial.
        assert_eq!(parse_answer(&timed_out_answer()), Ok(Verdict::Denied(None)));
        for bad in [
            json!("yes"),
            json!({"approved": "true"}),
            json!({}),
            json!({"approved": false, "reason": 3}),
            json!("true"),
            json!("[{\"approved\": true}]"),
            json!([]),
            json!([{"type": "text", "text": "yes"}]),
            json!([{"type": "text", "text": "{\"approved\": true}"}, {"type": "text", "text": "x"}]),
            json!([{"type": "image", "data": "eA=="}]),
            json!(true),
        ] {
            assert!(parse_answer(&bad).is_err(), "{bad}");
        }
    }

    // The Java SDK cannot send an object `result` (its `FunctionResultStepResult` has no
    // fields): its clients answer with the same object as JSON text.
    #[test]
    fn answers_as_json_text_are_read_like_objects() {
        assert_eq!(
            parse_answer(&json!("{\"approved\": true}")),
            Ok(Verdict::Approved)
        );
        assert_eq!(
            parse_answer(&json!(" {\"approved\": false, \"reason\": \"not today\"} ")),
            Ok(Verdict::Denied(Some("not today".into())))
        );
        assert_eq!(
            parse_answer(&json!([{"type": "text", "text": "{\"approved\": true}"}])),
            Ok(Verdict::Approved)
        );
        assert_eq!(
            parse_answer(&json!("{\"approved\": \"yes\"}")),
            Err("`approved` must be true or false, found a string".to_owned())
        );
    }

    #[test]
    fn the_request_step_carries_the_paused_call() {
        let Step::FunctionCall {
            id,
            name,
            arguments,
            ..
        } = paused().request_step()
        else {
            panic!("not a function_call")
        };
        assert_eq!(
            (id.as_str(), name.as_str()),
            ("approval_call_1", APPROVAL_FUNCTION)
        );
        assert_eq!(arguments["call_id"], "call_1");
        assert_eq!(arguments["tool"], "code_execution");
        assert_eq!(arguments["args"], json!({"code": "make deploy"}));
        assert_eq!(arguments["hook_group"], "review");
        assert_eq!(arguments["expires_at"], "2026-12-04T10:00:00Z");
    }

    #[test]
    fn only_approval_ids_make_approval_steps() {
        assert!(is_approval_step(&paused().request_step()));
        let answer = |call_id: &str| Step::FunctionResult {
            call_id: call_id.into(),
            result: json!({"approved": true}),
            name: Some(APPROVAL_FUNCTION.into()),
            is_error: None,
            hooks: None,
        };
        assert!(is_approval_step(&answer("approval_call_1")));
        // A model's own call of the reserved name (any other id) and its result are shown.
        let call = |id: &str, name: &str| Step::FunctionCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({}),
            signature: None,
        };
        let own = call("call_2", APPROVAL_FUNCTION);
        assert!(!is_approval_step(&own));
        assert!(!is_approval_step(&answer("call_2")));
        let other = call("approval_x", "view_file");
        assert!(!is_approval_step(&other));
    }
}
