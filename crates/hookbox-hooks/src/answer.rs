//! Reading a handler's answer (spec §5, and hookbox's extensions): only `{"decision":"deny"}`
//! blocks and only `{"decision":"allow"}` is a clean allow (with `updated_args`, a rewrite);
//! `{"decision":"ask"}` asks a person; anything else is a [`Failure`] that fails open. Also the
//! answer's `additional_context`, what in a post hook's answer only pre hooks may use, and the
//! bounds on what is kept of a reason or of bad output. Pure functions over bytes: nothing here
//! runs a handler or records anything.

use hookbox_protocol::HookEvent;

use crate::decision::Failure;

/// The longest deny reason passed on to the model; longer ones are cut.
pub const MAX_REASON_LEN: usize = 8 * 1024;

/// The reason of a `{"decision": "deny"}` that gave none.
pub const DEFAULT_DENY_REASON: &str = "Blocked by a pre_tool_execution hook.";

/// The reason of a `pre_interaction` `{"decision": "deny"}` that gave none.
pub const DEFAULT_TURN_DENY_REASON: &str = "Blocked by a pre_interaction hook.";

/// The reason of a `{"decision": "ask"}` that gave none.
pub const DEFAULT_ASK_REASON: &str =
    "A pre_tool_execution hook asks a person to approve this call.";

/// Longest `additional_context` kept from one handler's answer (characters).
pub const MAX_CONTEXT_LEN: usize = 4 * 1024;

/// How much of a handler's stderr or bad output is kept in the trace.
const EXCERPT_LEN: usize = 512;

/// What a handler's answer says, once read.
pub(crate) enum Verdict {
    /// With the rewritten arguments, if the answer carried `updated_args`.
    Allow(Option<serde_json::Value>),
    Deny(String),
    /// A person decides (hookbox extension).
    Ask(String),
}

/// The `additional_context` of a handler's JSON answer (hookbox extension), cut to
/// [`MAX_CONTEXT_LEN`]; `Err` says why one that is there is ignored. Output that is not a JSON
/// object has none.
pub(crate) fn answer_context(output: &[u8]) -> Result<Option<String>, String> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(output.trim_ascii()) else {
        return Ok(None);
    };
    match value.get("additional_context") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(serde_json::Value::String(text)) => {
            Ok(Some(truncate_chars(text.trim(), MAX_CONTEXT_LEN)))
        }
        Some(other) => Err(format!(
            "additional_context must be a string, found {}; ignored",
            crate::diagnostic::describe(other)
        )),
    }
}

/// What in a post hook's JSON answer only pre hooks may use: `updated_args` or an `ask`
/// decision.
pub(crate) fn pre_only_answer(output: &[u8]) -> Option<&'static str> {
    let value = serde_json::from_slice::<serde_json::Value>(output.trim_ascii()).ok()?;
    if value.get("updated_args").is_some() {
        return Some("updated_args");
    }
    (value.get("decision").and_then(serde_json::Value::as_str) == Some("ask"))
        .then_some("\"decision\": \"ask\"")
}

/// Reads a handler's answer. Only `{"decision":"deny"}` blocks and only `{"decision":"allow"}`
/// is a clean allow; anything else is a failure that fails open.
pub(crate) fn interpret(output: &[u8], event: HookEvent) -> Result<Verdict, Failure> {
    let trimmed = output.trim_ascii();
    if trimmed.is_empty() {
        return Err(Failure::EmptyOutput);
    }
    let value: serde_json::Value =
        serde_json::from_slice(trimmed).map_err(|_| Failure::NotJson {
            excerpt: excerpt(trimmed),
        })?;
    let reason = |default: &str| {
        value
            .get("reason")
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map_or_else(|| default.to_owned(), |r| truncate_chars(r, MAX_REASON_LEN))
    };
    match value.get("decision").and_then(serde_json::Value::as_str) {
        Some("deny") if event == HookEvent::PreInteraction => {
            Ok(Verdict::Deny(reason(DEFAULT_TURN_DENY_REASON)))
        }
        Some("deny") => Ok(Verdict::Deny(reason(DEFAULT_DENY_REASON))),
        Some("ask") => Ok(Verdict::Ask(reason(DEFAULT_ASK_REASON))),
        Some("allow") => Ok(Verdict::Allow(value.get("updated_args").cloned())),
        _ => Err(Failure::NotADecision {
            excerpt: excerpt(trimmed),
        }),
    }
}

/// The start of `bytes` as text, as the trace keeps it.
pub(crate) fn excerpt(bytes: &[u8]) -> String {
    truncate_chars(&String::from_utf8_lossy(bytes), EXCERPT_LEN)
}

/// `text` cut to `max` characters (on a char boundary), marked `…` when cut.
fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(output: &str) -> Result<Option<String>, Failure> {
        interpret(output.as_bytes(), HookEvent::PreToolExecution).map(|v| match v {
            Verdict::Allow(_) => None,
            Verdict::Deny(reason) => Some(reason),
            Verdict::Ask(reason) => Some(format!("ask: {reason}")),
        })
    }

    #[test]
    fn deny_and_allow_are_recognised_with_surrounding_whitespace() {
        assert_eq!(
            verdict("  \n{\"decision\": \"deny\", \"reason\": \"no\"}\n"),
            Ok(Some("no".into()))
        );
        assert_eq!(verdict("{\"decision\":\"allow\"}"), Ok(None));
    }

    #[test]
    fn deny_without_reason_gets_a_default_reason() {
        assert_eq!(
            verdict(r#"{"decision":"deny"}"#),
            Ok(Some("Blocked by a pre_tool_execution hook.".into()))
        );
        assert_eq!(
            verdict(r#"{"decision":"deny","reason":42}"#),
            Ok(Some("Blocked by a pre_tool_execution hook.".into()))
        );
    }

    #[test]
    fn ask_is_a_verdict_with_a_reason_or_a_default_one() {
        assert_eq!(
            verdict(r#"{"decision":"ask","reason":"deploys need a person"}"#),
            Ok(Some("ask: deploys need a person".into()))
        );
        assert_eq!(
            verdict(r#"{"decision":"ask"}"#),
            Ok(Some(format!("ask: {DEFAULT_ASK_REASON}")))
        );
        assert!(matches!(
            verdict(r#"{"decision":"ASK"}"#),
            Err(Failure::NotADecision { .. })
        ));
    }

    #[test]
    fn only_pre_hooks_may_ask_or_rewrite() {
        assert_eq!(
            pre_only_answer(br#"{"decision":"ask"}"#),
            Some("\"decision\": \"ask\"")
        );
        assert_eq!(
            pre_only_answer(br#"{"updated_args":{}}"#),
            Some("updated_args")
        );
        assert_eq!(pre_only_answer(br#"{"decision":"deny"}"#), None);
        assert_eq!(pre_only_answer(b"ok"), None);
    }

    #[test]
    fn anything_else_is_a_failure() {
        assert_eq!(verdict(""), Err(Failure::EmptyOutput));
        assert_eq!(verdict(" \n\t"), Err(Failure::EmptyOutput));
        assert!(matches!(verdict("deny"), Err(Failure::NotJson { .. })));
        assert!(matches!(
            verdict("checking…\n{\"decision\":\"deny\"}"),
            Err(Failure::NotJson { .. })
        ));
        assert!(matches!(verdict("{}"), Err(Failure::NotADecision { .. })));
        let upper = verdict(r#"{"decision":"DENY"}"#);
        assert!(matches!(upper, Err(Failure::NotADecision { .. })));
        // The message says the values are lower case (#31).
        let message = upper.err().map(|f| f.to_string()).unwrap_or_default();
        assert!(message.contains("in lower case"), "{message}");
        assert!(matches!(
            verdict(r#"["deny"]"#),
            Err(Failure::NotADecision { .. })
        ));
        assert!(matches!(
            verdict(r#""deny""#),
            Err(Failure::NotADecision { .. })
        ));
    }

    #[test]
    fn long_reasons_are_cut_on_a_char_boundary() {
        let long = "é".repeat(MAX_REASON_LEN + 10);
        let Ok(Some(reason)) = verdict(&format!("{{\"decision\":\"deny\",\"reason\":\"{long}\"}}"))
        else {
            panic!("expected deny");
        };
        assert_eq!(reason.chars().count(), MAX_REASON_LEN + 1);
        assert!(reason.ends_with('…'));
    }
}
