//! Calls a pre hook asked a person about (hookbox extension, `{"decision": "ask"}`): how the
//! pause looks in an interaction, and how a reviewer's answer is read.
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
//! The approval steps are between the server and the client: models never see them (the
//! backends skip them through [`crate::tools::as_tool_step`]); the model sees only its own call
//! and, in the end, that call's result. This module decides nothing about storage or HTTP.

use chrono::{DateTime, SecondsFormat, Utc};
use hookbox_protocol::ToolName;
use hookbox_protocol::api::Step;
use serde_json::{Value, json};

use crate::seams::ApprovalRequest;

/// The reserved name of the function whose calls are approval requests. Clients may not
/// declare a function of this name nor send a call of it.
pub const APPROVAL_FUNCTION: &str = "hookbox_approval";

/// The longest reviewer's reason passed on to the model (characters); longer ones are cut.
pub const MAX_REVIEWER_REASON_LEN: usize = 4 * 1024;

/// The id of the approval request for the call `call_id`.
pub fn approval_id(call_id: &str) -> String {
    format!("approval_{call_id}")
}

/// The approval request step for the call `call_id` of `tool`, answerable until `expires_at`.
pub fn request_step(
    call_id: &str,
    tool: ToolName,
    request: &ApprovalRequest,
    expires_at: DateTime<Utc>,
) -> Step {
    Step::FunctionCall {
        id: approval_id(call_id),
        name: APPROVAL_FUNCTION.to_owned(),
        arguments: json!({
            "call_id": call_id,
            "tool": tool.as_str(),
            "args": request.args,
            "reason": request.reason,
            "hook_group": request.group,
            "expires_at": expires_at.to_rfc3339_opts(SecondsFormat::Secs, true),
            "answer": "continue this interaction with a function_result for this call: {\"approved\": true} or {\"approved\": false, \"reason\": \"...\"} (the object, or the same as JSON text)",
        }),
        signature: None,
    }
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

/// Reads a reviewer's `function_result` `result`: `{"approved": bool, "reason"?: string}`
/// (the result of an answer that timed out carries `"timed_out": true`). The same object may
/// also come as JSON text: a string, or a list holding one `text` content item. Clients whose SDK
/// cannot send an object `result` answer that way: the Java SDK's `FunctionResultStepResult` has
/// no fields, so an object sent through it arrives as `{}`. `Err` says what is wrong, for a 400.
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
    if object.get("timed_out") == Some(&Value::Bool(true)) {
        return Ok(Verdict::TimedOut);
    }
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

/// The `result` the server records when nobody answered in time.
pub fn timed_out_answer() -> Value {
    json!({"approved": false, "timed_out": true})
}

/// An approval request as found in a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The approval step's id (what the client's `function_result` answers).
    pub id: String,
    /// The paused call's id.
    pub call_id: String,
    pub tool: ToolName,
    pub args: Value,
    pub expires_at: Option<DateTime<Utc>>,
}

impl Request {
    /// Reads an approval request step; `None` for any other step.
    pub fn from_step(step: &Step) -> Option<Request> {
        let Step::FunctionCall {
            id,
            name,
            arguments,
            ..
        } = step
        else {
            return None;
        };
        if name != APPROVAL_FUNCTION {
            return None;
        }
        Some(Request {
            id: id.clone(),
            call_id: arguments.get("call_id")?.as_str()?.to_owned(),
            tool: arguments.get("tool")?.as_str()?.parse().ok()?,
            args: arguments.get("args")?.clone(),
            expires_at: arguments
                .get("expires_at")
                .and_then(Value::as_str)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc)),
        })
    }

    /// Whether its deadline has passed at `now`.
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|deadline| now >= deadline)
    }
}

/// The approval requests of `steps` that have an answer (a `function_result` for them) but
/// whose paused call has no result yet, each with the answer's verdict (an answer after the
/// deadline is [`Verdict::TimedOut`]; one that cannot be read is a denial saying so).
pub fn answered(steps: &[Step], now: DateTime<Utc>) -> Vec<(Request, Verdict)> {
    let results: Vec<(&str, &Value)> = steps
        .iter()
        .filter_map(|s| match s {
            Step::FunctionResult {
                call_id, result, ..
            } => Some((call_id.as_str(), result)),
            Step::CodeExecutionResult {
                call_id, result, ..
            } => Some((call_id.as_str(), result)),
            _ => None,
        })
        .collect();
    steps
        .iter()
        .filter_map(Request::from_step)
        .filter(|r| !results.iter().any(|(id, _)| *id == r.call_id))
        .filter_map(|r| {
            let (_, answer) = results.iter().find(|(id, _)| *id == r.id)?;
            let verdict = match parse_answer(answer) {
                Ok(Verdict::Approved) if r.expired(now) => Verdict::TimedOut,
                Ok(verdict) => verdict,
                Err(why) => Verdict::Denied(Some(format!("the answer could not be read: {why}"))),
            };
            Some((r, verdict))
        })
        .collect()
}

/// The approval requests of `steps` nobody answered yet.
pub fn unanswered(steps: &[Step]) -> Vec<Request> {
    steps
        .iter()
        .filter_map(Request::from_step)
        .filter(|r| {
            !steps
                .iter()
                .any(|s| matches!(s, Step::FunctionResult { call_id, .. } if *call_id == r.id))
        })
        .collect()
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

    fn request(expires_at: DateTime<Utc>) -> Step {
        request_step(
            "call_1",
            ToolName::CodeExecution,
            &ApprovalRequest {
                reason: "deploys need a person".into(),
                group: "review".into(),
                args: json!({"code": "make deploy"}),
            },
            expires_at,
        )
    }

    fn answer(result: Value) -> Step {
        Step::FunctionResult {
            call_id: "approval_call_1".into(),
            result,
            name: Some(APPROVAL_FUNCTION.into()),
            is_error: None,
            hooks: None,
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
        assert_eq!(parse_answer(&timed_out_answer()), Ok(Verdict::TimedOut));
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
    fn a_request_round_trips_and_is_answered_once() {
        let now = Utc::now();
        let later = now + chrono::Duration::hours(1);
        let steps = vec![request(later)];
        let r = Request::from_step(&steps[0]).unwrap();
        assert_eq!(r.call_id, "call_1");
        assert_eq!(r.tool, ToolName::CodeExecution);
        assert_eq!(r.args, json!({"code": "make deploy"}));
        assert!(!r.expired(now));
        assert!(r.expired(later));
        assert_eq!(unanswered(&steps).len(), 1);
        assert!(answered(&steps, now).is_empty());

        let mut with_answer = steps.clone();
        with_answer.push(answer(json!({"approved": true})));
        assert!(unanswered(&with_answer).is_empty());
        assert_eq!(answered(&with_answer, now)[0].1, Verdict::Approved);
        // Approved too late is timed out.
        assert_eq!(
            answered(&with_answer, later + chrono::Duration::seconds(1))[0].1,
            Verdict::TimedOut
        );
        // Once the paused call has its result, the request is settled.
        with_answer.push(crate::tools::result_step(
            "call_1",
            "code_execution",
            json!("done"),
            false,
            None,
        ));
        assert!(answered(&with_answer, now).is_empty());
    }

    #[test]
    fn other_calls_are_not_requests() {
        let step = crate::tools::call_step("call_2", "view_file", &json!({"path": "/a"}), None);
        assert_eq!(Request::from_step(&step), None);
    }
}
