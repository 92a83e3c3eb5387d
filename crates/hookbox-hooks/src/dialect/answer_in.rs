//! Reading a vendor handler's answer exactly as its own CLI reads it: exit code, stdout,
//! stderr → a [`VendorVerdict`], plus the text it adds for the model and a sentence saying
//! what the answer meant (the trace keeps it).
//!
//! | | deny | ask | rewrite | proceeds although it looks like a "no" |
//! |---|---|---|---|---|
//! | Claude Code | exit 2 (JSON reason, else stderr); `permissionDecision: deny`; legacy `decision: block`; `continue: false` | `ask`, `defer` (hookbox has no defer: ask is closest) | `updatedInput` replaces | exit 1 and other codes without JSON; invalid JSON; time-out |
//! | Gemini CLI | JSON `decision: deny/block` whatever the exit code; plain text with exit ≥ 2 | `decision: ask` | `hookSpecificOutput.tool_input` merges | exit 2 with no output; exit 1; time-out |
//! | Codex | exit 2 with non-empty stderr; `permissionDecision: deny`; `decision: block` | — | `updatedInput` (with allow) replaces | `ask`, `approve`, `continue: false` (the hook "failed"); exit 2 with empty stderr; time-out |
//! | Cursor | exit 2; `permission: deny` | `ask` (not on `preToolUse`) | `updated_input` replaces | other failures, unless `failClosed` |
//! | Copilot | `permissionDecision: deny` | `ask` | `modifiedArgs` replaces | **exit 2 (only a warning)**; time-out |
//!
//! Every "proceeds" that is a failure of the hook (crash, time-out, non-zero exit without a
//! decision) is a [`Failure`], so hookbox's `on_failure` still applies on top (Cursor's
//! `failClosed: true` is `on_failure: "deny"`). `continue: false` denies (hookbox cannot stop a
//! client's agent; refusing the call is the closest) with `stopReason`.

use hookbox_protocol::HookEvent;
use serde_json::Value;

use super::Dialect;
use crate::answer::{MAX_CONTEXT_LEN, MAX_REASON_LEN, excerpt};
use crate::command::Termination;
use crate::decision::Failure;

/// What the answer decides.
#[derive(Debug, Clone, PartialEq)]
pub enum VendorVerdict {
    Allow,
    Deny(String),
    Ask(String),
    /// The call proceeds with this vendor `tool_input` (whole, after a merge where the vendor
    /// merges).
    Update(Value),
    /// The hook failed; the call proceeds unless `on_failure` says otherwise.
    Failed(Failure),
}

/// A read answer.
#[derive(Debug, Clone, PartialEq)]
pub struct VendorAnswer {
    pub verdict: VendorVerdict,
    /// Text for the model (`additionalContext`, …).
    pub context: Option<String>,
    /// What the answer meant, in the vendor's terms (for the trace).
    pub meaning: String,
}

/// A handler's raw result: how it ended, what it printed.
#[derive(Debug, Clone)]
pub struct Raw<'a> {
    pub termination: Termination,
    pub stdout: &'a [u8],
    pub stderr: &'a [u8],
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

fn text(bytes: &[u8]) -> String {
    cut(String::from_utf8_lossy(bytes).trim(), MAX_REASON_LEN)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for key in path {
        cur = cur.get(key)?;
    }
    cur.as_str().map(str::trim).filter(|s| !s.is_empty())
}

fn answer(
    verdict: VendorVerdict,
    context: Option<String>,
    meaning: impl Into<String>,
) -> VendorAnswer {
    VendorAnswer {
        verdict,
        context: context.map(|c| cut(&c, MAX_CONTEXT_LEN)),
        meaning: meaning.into(),
    }
}

/// The JSON object a handler printed, if its stdout is one (Claude Code only reads stdout that
/// starts with `{`).
fn json_object(bytes: &[u8]) -> Option<Value> {
    let trimmed = bytes.trim_ascii();
    if !trimmed.starts_with(b"{") {
        return None;
    }
    serde_json::from_slice::<Value>(trimmed)
        .ok()
        .filter(Value::is_object)
}

fn not_run_failure(t: Termination, timeout_ms: u64, limit: usize) -> Option<Failure> {
    match t {
        Termination::Exited(_) => None,
        Termination::Signaled(signal) => Some(Failure::Signaled { signal }),
        Termination::TimedOut => Some(Failure::TimedOut {
            after_ms: timeout_ms,
        }),
        Termination::OutputLimit => Some(Failure::OutputLimit { limit }),
    }
}

/// Reads `raw` as `dialect` reads an answer at `event` (`vendor_event` as written in the file).
/// `original_input` is the `tool_input` the handler was shown (Gemini merges into it).
pub fn read(
    dialect: Dialect,
    event: HookEvent,
    vendor_event: &str,
    raw: &Raw<'_>,
    original_input: Option<&Value>,
    timeout_ms: u64,
    output_limit: usize,
) -> VendorAnswer {
    if let Some(failure) = not_run_failure(raw.termination, timeout_ms, output_limit) {
        let meaning = format!("{failure}: {dialect} lets the call proceed");
        return answer(VendorVerdict::Failed(failure), None, meaning);
    }
    let Termination::Exited(code) = raw.termination else {
        return answer(
            VendorVerdict::Failed(Failure::EmptyOutput),
            None,
            "no exit status",
        );
    };
    match dialect {
        Dialect::ClaudeCode => claude(event, vendor_event, code, raw),
        Dialect::Codex => codex(event, code, raw),
        Dialect::GeminiCli => gemini(event, code, raw, original_input),
        Dialect::Cursor => cursor(event, vendor_event, code, raw),
        Dialect::Copilot => copilot(event, code, raw),
        Dialect::Agents => answer(
            VendorVerdict::Failed(Failure::NotADecision {
                excerpt: "hookbox's own answers are read by the engine".into(),
            }),
            None,
            "not a vendor dialect",
        ),
    }
}

fn context_of(json: &Value) -> Option<String> {
    str_at(json, &["hookSpecificOutput", "additionalContext"])
        .or_else(|| str_at(json, &["additionalContext"]))
        .map(str::to_owned)
}

fn claude(event: HookEvent, vendor_event: &str, code: i32, raw: &Raw<'_>) -> VendorAnswer {
    let json = json_object(raw.stdout);
    let stderr = text(raw.stderr);
    if code == 2 {
        let reason = json
            .as_ref()
            .and_then(|j| {
                str_at(j, &["hookSpecificOutput", "permissionDecisionReason"])
                    .or_else(|| str_at(j, &["reason"]))
            })
            .map(str::to_owned)
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| {
                if stderr.is_empty() {
                    format!("Blocked by a {vendor_event} hook (exit 2).")
                } else {
                    stderr.clone()
                }
            });
        return match event {
            HookEvent::PreToolExecution | HookEvent::PreInteraction => {
                answer(VendorVerdict::Deny(reason), None, "exit 2: block")
            }
            // PostToolUse / Stop: stderr is shown to the model; nothing left to block.
            _ => answer(
                VendorVerdict::Allow,
                Some(reason),
                "exit 2 after the fact: the reason is shown to the model",
            ),
        };
    }
    let Some(json) = json else {
        if code != 0 {
            return answer(
                VendorVerdict::Failed(Failure::NonZeroExit { code }),
                None,
                format!("exit {code} without JSON: a non-blocking error, the call proceeds"),
            );
        }
        let out = text(raw.stdout);
        // Plain stdout is context only for UserPromptSubmit (and SessionStart).
        let context = (event == HookEvent::PreInteraction && !out.is_empty()).then_some(out);
        return answer(VendorVerdict::Allow, context, "exit 0: proceed");
    };
    let context = context_of(&json);
    if json.get("continue") == Some(&Value::Bool(false)) {
        let reason = str_at(&json, &["stopReason"])
            .unwrap_or("A hook stopped the agent (continue: false).")
            .to_owned();
        return match event {
            HookEvent::PreToolExecution | HookEvent::PreInteraction => answer(
                VendorVerdict::Deny(reason),
                context,
                "continue: false (hookbox denies: it cannot stop a client's agent)",
            ),
            _ => answer(
                VendorVerdict::Allow,
                Some(reason),
                "continue: false after the fact",
            ),
        };
    }
    let reason = |default: &str| {
        str_at(&json, &["hookSpecificOutput", "permissionDecisionReason"])
            .or_else(|| str_at(&json, &["reason"]))
            .map_or_else(|| default.to_owned(), |r| cut(r, MAX_REASON_LEN))
    };
    match event {
        HookEvent::PreToolExecution => {
            let decision = str_at(&json, &["hookSpecificOutput", "permissionDecision"]);
            let legacy = str_at(&json, &["decision"]);
            match (decision, legacy) {
                (Some("deny"), _) | (None, Some("block")) => answer(
                    VendorVerdict::Deny(reason("Blocked by a PreToolUse hook.")),
                    context,
                    "permissionDecision: deny",
                ),
                (Some("defer"), _) => answer(
                    VendorVerdict::Ask(reason(
                        "A PreToolUse hook deferred the decision to a person.",
                    )),
                    context,
                    "defer (hookbox asks a person: its closest equivalent)",
                ),
                (Some("ask"), _) => answer(
                    VendorVerdict::Ask(reason(
                        "A PreToolUse hook asks a person to approve this call.",
                    )),
                    context,
                    "permissionDecision: ask",
                ),
                _ => match json.pointer("/hookSpecificOutput/updatedInput") {
                    Some(input) if input.is_object() => answer(
                        VendorVerdict::Update(input.clone()),
                        context,
                        "updatedInput replaces the tool input",
                    ),
                    _ => answer(
                        VendorVerdict::Allow,
                        context,
                        match decision.or(legacy) {
                            Some(d) => format!("{d}: proceed"),
                            None => "JSON without a decision: proceed".into(),
                        },
                    ),
                },
            }
        }
        HookEvent::PreInteraction => match str_at(&json, &["decision"]) {
            Some("block") => answer(
                VendorVerdict::Deny(reason("Blocked by a UserPromptSubmit hook.")),
                context,
                "decision: block",
            ),
            _ => answer(VendorVerdict::Allow, context, "proceed"),
        },
        HookEvent::PostToolExecution | HookEvent::PostInteraction => {
            let context = match (str_at(&json, &["decision"]), context) {
                (Some("block"), Some(c)) => Some(format!("{}\n{c}", reason(""))),
                (Some("block"), None) => Some(reason("")).filter(|r| !r.is_empty()),
                (_, c) => c,
            };
            answer(
                VendorVerdict::Allow,
                context,
                "after the fact: only context counts",
            )
        }
    }
}

fn codex(event: HookEvent, code: i32, raw: &Raw<'_>) -> VendorAnswer {
    let stderr = text(raw.stderr);
    if code == 2 {
        if stderr.is_empty() {
            return answer(
                VendorVerdict::Failed(Failure::NonZeroExit { code }),
                None,
                "exit 2 with empty stderr: Codex lets the call proceed",
            );
        }
        return match event {
            HookEvent::PreToolExecution | HookEvent::PreInteraction => answer(
                VendorVerdict::Deny(stderr),
                None,
                "exit 2 with stderr: block",
            ),
            _ => answer(VendorVerdict::Allow, Some(stderr), "exit 2 after the fact"),
        };
    }
    if code != 0 {
        return answer(
            VendorVerdict::Failed(Failure::NonZeroExit { code }),
            None,
            format!("exit {code}: the hook failed, the call proceeds"),
        );
    }
    let Some(json) = json_object(raw.stdout) else {
        return answer(
            VendorVerdict::Allow,
            None,
            "exit 0 (plain stdout is ignored): proceed",
        );
    };
    let context = context_of(&json);
    let reason = |d: &str| {
        str_at(&json, &["hookSpecificOutput", "permissionDecisionReason"])
            .or_else(|| str_at(&json, &["reason"]))
            .map_or_else(|| d.to_owned(), |r| cut(r, MAX_REASON_LEN))
    };
    let decision = str_at(&json, &["hookSpecificOutput", "permissionDecision"]);
    let legacy = str_at(&json, &["decision"]);
    if !event.decides() {
        return answer(
            VendorVerdict::Allow,
            context,
            "after the fact: only context counts",
        );
    }
    if decision == Some("deny") || legacy == Some("block") {
        return answer(
            VendorVerdict::Deny(reason("Blocked by a PreToolUse hook.")),
            context,
            "deny",
        );
    }
    if matches!(decision, Some("ask" | "approve"))
        || legacy == Some("approve")
        || json.get("continue") == Some(&Value::Bool(false))
    {
        return answer(
            VendorVerdict::Failed(Failure::NotADecision {
                excerpt: excerpt(raw.stdout),
            }),
            context,
            "ask / approve / continue:false: Codex treats the hook as failed and the call proceeds",
        );
    }
    match json.pointer("/hookSpecificOutput/updatedInput") {
        Some(input) if input.is_object() && event == HookEvent::PreToolExecution => answer(
            VendorVerdict::Update(input.clone()),
            context,
            "updatedInput replaces the tool input",
        ),
        _ => answer(VendorVerdict::Allow, context, "proceed"),
    }
}

fn gemini(event: HookEvent, code: i32, raw: &Raw<'_>, original: Option<&Value>) -> VendorAnswer {
    let parsed = |b: &[u8]| {
        serde_json::from_slice::<Value>(b.trim_ascii())
            .ok()
            .filter(Value::is_object)
    };
    let json = match raw.stdout.trim_ascii().is_empty() {
        false => parsed(raw.stdout),
        true => parsed(raw.stderr),
    };
    let Some(json) = json else {
        let out = if raw.stdout.trim_ascii().is_empty() {
            text(raw.stderr)
        } else {
            text(raw.stdout)
        };
        return match code {
            0 => answer(
                VendorVerdict::Allow,
                None,
                "exit 0: proceed (the text is a system message)",
            ),
            1 => answer(
                VendorVerdict::Failed(Failure::NonZeroExit { code }),
                None,
                "exit 1: a warning, the call proceeds",
            ),
            _ if out.is_empty() => answer(
                VendorVerdict::Failed(Failure::NonZeroExit { code }),
                None,
                format!("exit {code} with no output: no decision, the call proceeds"),
            ),
            _ if event.decides() => answer(
                VendorVerdict::Deny(out),
                None,
                format!("exit {code} with text: deny"),
            ),
            _ => answer(
                VendorVerdict::Allow,
                Some(out),
                format!("exit {code} after the fact"),
            ),
        };
    };
    let context = context_of(&json);
    let reason = |d: &str| {
        str_at(&json, &["reason"]).map_or_else(|| d.to_owned(), |r| cut(r, MAX_REASON_LEN))
    };
    if json.get("continue") == Some(&Value::Bool(false)) && event.decides() {
        let r = str_at(&json, &["stopReason"])
            .unwrap_or("A hook stopped the agent (continue: false).")
            .to_owned();
        return answer(
            VendorVerdict::Deny(r),
            context,
            "continue: false (hookbox denies)",
        );
    }
    if !event.decides() {
        let context = match str_at(&json, &["decision"]) {
            Some("deny" | "block") => Some(reason("")).filter(|r| !r.is_empty()).or(context),
            _ => context,
        };
        return answer(
            VendorVerdict::Allow,
            context,
            "after the fact: JSON decides (exit code ignored)",
        );
    }
    match str_at(&json, &["decision"]) {
        Some("deny" | "block") => answer(
            VendorVerdict::Deny(reason("Blocked by a BeforeTool hook.")),
            context,
            "JSON decision: deny (exit code ignored)",
        ),
        Some("ask") => answer(
            VendorVerdict::Ask(reason(
                "A BeforeTool hook asks a person to approve this call.",
            )),
            context,
            "JSON decision: ask",
        ),
        _ => match (json.pointer("/hookSpecificOutput/tool_input"), original) {
            (Some(Value::Object(patch)), Some(original))
                if event == HookEvent::PreToolExecution =>
            {
                answer(
                    VendorVerdict::Update(super::tools::merge_input(original, patch)),
                    context,
                    "hookSpecificOutput.tool_input merged into the tool input",
                )
            }
            _ => answer(
                VendorVerdict::Allow,
                context,
                "JSON: proceed (exit code ignored)",
            ),
        },
    }
}

fn cursor(event: HookEvent, vendor_event: &str, code: i32, raw: &Raw<'_>) -> VendorAnswer {
    let stderr = text(raw.stderr);
    if code == 2 {
        let reason = if stderr.is_empty() {
            format!("Blocked by a {vendor_event} hook (exit 2).")
        } else {
            stderr
        };
        return match event.decides() {
            true => answer(VendorVerdict::Deny(reason), None, "exit 2: deny"),
            false => answer(VendorVerdict::Allow, None, "exit 2 after the fact"),
        };
    }
    if code != 0 {
        return answer(
            VendorVerdict::Failed(Failure::NonZeroExit { code }),
            None,
            format!("exit {code}: the call proceeds unless failClosed"),
        );
    }
    let Some(json) = json_object(raw.stdout) else {
        return answer(VendorVerdict::Allow, None, "exit 0: proceed");
    };
    let context = str_at(&json, &["additional_context"])
        .or_else(|| str_at(&json, &["agent_message"]))
        .map(str::to_owned);
    if !event.decides() {
        return answer(
            VendorVerdict::Allow,
            context,
            "after the fact: only context counts",
        );
    }
    let reason = |d: &str| {
        str_at(&json, &["agent_message"])
            .or_else(|| str_at(&json, &["user_message"]))
            .map_or_else(|| d.to_owned(), |r| cut(r, MAX_REASON_LEN))
    };
    match (str_at(&json, &["permission"]), str_at(&json, &["continue"])) {
        (Some("deny"), _) => answer(
            VendorVerdict::Deny(reason(&format!("Blocked by a {vendor_event} hook."))),
            None,
            "permission: deny",
        ),
        (Some("ask"), _) if vendor_event == "preToolUse" => answer(
            VendorVerdict::Allow,
            None,
            "permission: ask (Cursor does not enforce ask on preToolUse): proceed",
        ),
        (Some("ask"), _) => answer(
            VendorVerdict::Ask(reason(&format!("A {vendor_event} hook asks a person."))),
            None,
            "permission: ask",
        ),
        _ if event == HookEvent::PreInteraction
            && json.get("continue") == Some(&Value::Bool(false)) =>
        {
            answer(
                VendorVerdict::Deny(reason("Blocked by a beforeSubmitPrompt hook.")),
                None,
                "continue: false",
            )
        }
        _ => match json.get("updated_input") {
            Some(input) if input.is_object() && event == HookEvent::PreToolExecution => answer(
                VendorVerdict::Update(input.clone()),
                None,
                "updated_input replaces the tool input",
            ),
            _ => answer(VendorVerdict::Allow, None, "proceed"),
        },
    }
}

fn copilot(event: HookEvent, code: i32, raw: &Raw<'_>) -> VendorAnswer {
    if code != 0 {
        let meaning = if code == 2 {
            "exit 2: Copilot only warns, the call proceeds".to_owned()
        } else {
            format!("exit {code}: the call proceeds")
        };
        return answer(
            VendorVerdict::Failed(Failure::NonZeroExit { code }),
            None,
            meaning,
        );
    }
    let Some(json) = json_object(raw.stdout) else {
        return answer(VendorVerdict::Allow, None, "exit 0: proceed");
    };
    if !event.decides() {
        return answer(VendorVerdict::Allow, context_of(&json), "after the fact");
    }
    let decision = str_at(&json, &["permissionDecision"])
        .or_else(|| str_at(&json, &["hookSpecificOutput", "permissionDecision"]));
    let reason = |d: &str| {
        str_at(&json, &["permissionDecisionReason"])
            .or_else(|| str_at(&json, &["hookSpecificOutput", "permissionDecisionReason"]))
            .or_else(|| str_at(&json, &["reason"]))
            .map_or_else(|| d.to_owned(), |r| cut(r, MAX_REASON_LEN))
    };
    match decision.or_else(|| str_at(&json, &["decision"])) {
        Some("deny" | "block") => answer(
            VendorVerdict::Deny(reason("Blocked by a preToolUse hook.")),
            None,
            "permissionDecision: deny",
        ),
        Some("ask") => answer(
            VendorVerdict::Ask(reason(
                "A preToolUse hook asks a person to approve this call.",
            )),
            None,
            "permissionDecision: ask",
        ),
        _ => match json
            .get("modifiedArgs")
            .or_else(|| json.pointer("/hookSpecificOutput/updatedInput"))
        {
            Some(input) if input.is_object() && event == HookEvent::PreToolExecution => answer(
                VendorVerdict::Update(input.clone()),
                None,
                "modifiedArgs replace the tool arguments",
            ),
            _ => answer(VendorVerdict::Allow, None, "proceed"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(
        d: Dialect,
        event: HookEvent,
        name: &str,
        code: i32,
        out: &str,
        err: &str,
    ) -> VendorVerdict {
        read(
            d,
            event,
            name,
            &Raw {
                termination: Termination::Exited(code),
                stdout: out.as_bytes(),
                stderr: err.as_bytes(),
            },
            Some(&json!({"command": "a", "description": "x"})),
            1000,
            1024,
        )
        .verdict
    }
    const PRE: HookEvent = HookEvent::PreToolExecution;
    fn deny(s: &str) -> VendorVerdict {
        VendorVerdict::Deny(s.into())
    }

    #[test]
    fn exit_two_per_vendor() {
        assert_eq!(
            r(Dialect::ClaudeCode, PRE, "PreToolUse", 2, "", "no rm -rf"),
            deny("no rm -rf")
        );
        assert_eq!(
            r(
                Dialect::ClaudeCode,
                PRE,
                "PreToolUse",
                2,
                r#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#,
                "no"
            ),
            deny("no"),
            "JSON allow cannot override exit 2"
        );
        assert_eq!(
            r(Dialect::Codex, PRE, "PreToolUse", 2, "", "no"),
            deny("no")
        );
        assert!(matches!(
            r(Dialect::Codex, PRE, "PreToolUse", 2, "", ""),
            VendorVerdict::Failed(_)
        ));
        assert_eq!(
            r(Dialect::Cursor, PRE, "beforeShellExecution", 2, "", "no"),
            deny("no")
        );
        assert!(
            matches!(
                r(Dialect::Copilot, PRE, "preToolUse", 2, "", "no"),
                VendorVerdict::Failed(Failure::NonZeroExit { code: 2 })
            ),
            "Copilot: only a warning"
        );
        assert_eq!(
            r(Dialect::GeminiCli, PRE, "BeforeTool", 2, "", "no"),
            deny("no")
        );
        assert!(matches!(
            r(Dialect::GeminiCli, PRE, "BeforeTool", 2, "", ""),
            VendorVerdict::Failed(_)
        ));
        assert!(matches!(
            r(Dialect::ClaudeCode, PRE, "PreToolUse", 1, "", "oops"),
            VendorVerdict::Failed(_)
        ));
    }

    #[test]
    fn json_fields_per_vendor() {
        let claude_deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"secrets"}}"#;
        assert_eq!(
            r(Dialect::ClaudeCode, PRE, "PreToolUse", 0, claude_deny, ""),
            deny("secrets")
        );
        assert_eq!(
            r(Dialect::Codex, PRE, "PreToolUse", 0, claude_deny, ""),
            deny("secrets")
        );
        // Gemini has no permissionDecision: a migrated Claude answer allows (as Gemini does).
        assert_eq!(
            r(Dialect::GeminiCli, PRE, "BeforeTool", 0, claude_deny, ""),
            VendorVerdict::Allow
        );
        assert_eq!(
            r(
                Dialect::GeminiCli,
                PRE,
                "BeforeTool",
                1,
                r#"{"decision":"deny","reason":"r"}"#,
                ""
            ),
            deny("r"),
            "JSON overrides the exit code"
        );
        assert_eq!(
            r(
                Dialect::ClaudeCode,
                PRE,
                "PreToolUse",
                0,
                r#"{"decision":"block","reason":"old"}"#,
                ""
            ),
            deny("old")
        );
        assert!(matches!(
            r(
                Dialect::ClaudeCode,
                PRE,
                "PreToolUse",
                0,
                r#"{"hookSpecificOutput":{"permissionDecision":"defer"}}"#,
                ""
            ),
            VendorVerdict::Ask(_)
        ));
        assert!(matches!(
            r(
                Dialect::Codex,
                PRE,
                "PreToolUse",
                0,
                r#"{"hookSpecificOutput":{"permissionDecision":"ask"}}"#,
                ""
            ),
            VendorVerdict::Failed(_)
        ));
        assert_eq!(
            r(
                Dialect::ClaudeCode,
                PRE,
                "PreToolUse",
                0,
                r#"{"continue":false,"stopReason":"halt"}"#,
                ""
            ),
            deny("halt")
        );
        assert_eq!(
            r(
                Dialect::Cursor,
                PRE,
                "preToolUse",
                0,
                r#"{"permission":"deny","agent_message":"m"}"#,
                ""
            ),
            deny("m")
        );
        assert_eq!(
            r(
                Dialect::Cursor,
                PRE,
                "preToolUse",
                0,
                r#"{"permission":"ask"}"#,
                ""
            ),
            VendorVerdict::Allow
        );
        assert_eq!(
            r(
                Dialect::Copilot,
                PRE,
                "preToolUse",
                0,
                r#"{"permissionDecision":"deny","permissionDecisionReason":"c"}"#,
                ""
            ),
            deny("c")
        );
    }

    #[test]
    fn rewrites_replace_or_merge() {
        assert_eq!(
            r(
                Dialect::ClaudeCode,
                PRE,
                "PreToolUse",
                0,
                r#"{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"b"}}}"#,
                ""
            ),
            VendorVerdict::Update(json!({"command": "b"}))
        );
        assert_eq!(
            r(
                Dialect::GeminiCli,
                PRE,
                "BeforeTool",
                0,
                r#"{"hookSpecificOutput":{"tool_input":{"command":"b"}}}"#,
                ""
            ),
            VendorVerdict::Update(json!({"command": "b", "description": "x"}))
        );
        assert_eq!(
            r(
                Dialect::Copilot,
                PRE,
                "preToolUse",
                0,
                r#"{"modifiedArgs":{"command":"b"}}"#,
                ""
            ),
            VendorVerdict::Update(json!({"command": "b"}))
        );
    }

    #[test]
    fn timeouts_and_crashes_proceed() {
        for d in Dialect::VENDORS {
            let a = read(
                d,
                PRE,
                "x",
                &Raw {
                    termination: Termination::TimedOut,
                    stdout: b"",
                    stderr: b"",
                },
                None,
                5,
                1,
            );
            assert!(
                matches!(
                    a.verdict,
                    VendorVerdict::Failed(Failure::TimedOut { after_ms: 5 })
                ),
                "{d}"
            );
        }
    }

    #[test]
    fn context_is_read() {
        let a = read(
            Dialect::ClaudeCode,
            PRE,
            "PreToolUse",
            &Raw {
                termination: Termination::Exited(0),
                stdout: br#"{"hookSpecificOutput":{"additionalContext":"use rg"}}"#,
                stderr: b"",
            },
            None,
            1,
            1,
        );
        assert_eq!(a.context.as_deref(), Some("use rg"));
        let a = read(
            Dialect::ClaudeCode,
            HookEvent::PreInteraction,
            "UserPromptSubmit",
            &Raw {
                termination: Termination::Exited(0),
                stdout: b"today is Monday",
                stderr: b"",
            },
            None,
            1,
            1,
        );
        assert_eq!(a.context.as_deref(), Some("today is Monday"));
    }
}
