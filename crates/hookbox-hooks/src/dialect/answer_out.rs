//! The engine's decision written as a vendor CLI's hook answer: what `hookbox hooks gate
//! --protocol X` prints (stdout JSON, stderr, exit code) when that CLI runs it as its own
//! pre-tool hook. The other direction (reading a vendor handler's answer) lives beside the
//! engine.
//!
//! Every answer here is one the CLI was seen to obey (its own pre-tool event, exit 0 with JSON on
//! stdout), chosen so that the reason reaches the model:
//!
//! | | deny | ask | rewrite | context |
//! |---|---|---|---|---|
//! | Claude Code, Codex | `hookSpecificOutput.permissionDecision: "deny"` + `permissionDecisionReason` | `"ask"` (Codex: deny, see below) | `"allow"` + `updatedInput` | `additionalContext` |
//! | Gemini CLI | `decision: "deny"` + `reason` | `decision: "ask"` | `hookSpecificOutput.tool_input` (merged by Gemini) | not delivered (Gemini reads no context on `BeforeTool`) |
//! | Cursor | `permission: "deny"` + `agent_message` (model) + `user_message` | deny, see below | `permission: "allow"` + `updated_input` | `agent_message` |
//! | Copilot | `permissionDecision: "deny"` + `permissionDecisionReason` | `"ask"` | `"allow"` + `modifiedArgs` | not delivered (no field) |
//!
//! An allow without a rewrite prints nothing (or only the context): the CLI's own permission
//! rules still apply, the gate never grants more than the CLI would. Codex treats `ask` as a
//! failed hook and lets the call through, and Cursor does not enforce `ask` on `preToolUse`, so
//! there an ask is a deny whose reason says a person's approval was required.
//!
//! A failure of the gate itself is answered as a deny ([`failure`]). When the gate cannot even
//! start (a missing binary, a crash), the command `hookbox hooks install` writes falls back to
//! [`fallback_shell`]: the deny JSON on stdout, the reason on stderr and exit 2, which each of
//! the five CLIs treats as a deny (Claude Code, Codex and Cursor by exit 2 with stderr, Gemini
//! CLI by the JSON, Copilot by any non-zero exit).

use serde_json::{Map, Value, json};

use super::Dialect;
use crate::config::{Group, HandlerKind};

/// The text in the command of every gate entry `hookbox hooks install` writes into a CLI's
/// settings (`'…/hookbox' hooks gate --protocol X …`).
pub const GATE_MARKER: &str = " hooks gate --protocol ";

/// Whether a vendor command handler is a gate entry: that CLI's hook running hookbox, never a
/// handler of a hookbox policy (run by hookbox it would run hookbox's policy again, or deny
/// everything where the gate cannot start).
pub fn is_gate_command(command: &str) -> bool {
    command.contains(GATE_MARKER)
}

/// Takes every gate entry out of `groups` (and the rules left without handlers); returns the
/// files they came from, once each, for a diagnostic.
pub fn drop_gate_entries(groups: &mut [Group]) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for group in groups {
        let mut dropped = false;
        for rules in [
            &mut group.pre_tool_execution,
            &mut group.post_tool_execution,
            &mut group.pre_interaction,
            &mut group.post_interaction,
        ] {
            // Only the rules this emptied go; a rule that had no handler stays as it was.
            rules.retain_mut(|rule| {
                let before = rule.handlers.len();
                rule.handlers.retain(|h| {
                    !matches!(&h.kind, HandlerKind::Command { command } if is_gate_command(command))
                });
                let emptied = rule.handlers.len() != before;
                dropped |= emptied;
                !(emptied && rule.handlers.is_empty())
            });
        }
        if dropped && !files.contains(&group.file) {
            files.push(group.file.clone());
        }
    }
    files
}

/// What the policy decided about one tool call, ready to be written for a CLI.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// No objection (the CLI's own permission rules decide).
    Allow,
    /// The call must not run; `reason` is for the model.
    Deny { reason: String },
    /// A person must approve the call.
    Ask { reason: String },
    /// The call runs with this vendor `tool_input` instead of the model's.
    Rewrite { tool_input: Value },
}

/// A hook answer as a CLI reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorAnswer {
    /// Empty, or one line of JSON.
    pub stdout: String,
    pub stderr: String,
    pub exit_code: u8,
}

/// The name of `dialect`'s pre-tool event, as its hook payload and answers spell it.
pub const fn pre_tool_event(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::ClaudeCode | Dialect::Codex => "PreToolUse",
        Dialect::GeminiCli => "BeforeTool",
        Dialect::Cursor | Dialect::Copilot => "preToolUse",
        Dialect::Agents => "pre_tool_execution",
    }
}

/// The answer to `dialect`'s pre-tool hook for `verdict`, with the policy's `context` for the
/// model where the CLI has a field for it.
pub fn pre_tool(dialect: Dialect, verdict: &Verdict, context: &[String]) -> VendorAnswer {
    let context = (!context.is_empty()).then(|| context.join("\n"));
    let verdict = match (dialect, verdict) {
        (Dialect::Codex, Verdict::Ask { reason }) => Verdict::Deny {
            reason: format!(
                "{reason} (a person must approve this call, and Codex hooks cannot ask)"
            ),
        },
        (Dialect::Cursor, Verdict::Ask { reason }) => Verdict::Deny {
            reason: format!(
                "{reason} (a person must approve this call, and Cursor does not ask on preToolUse)"
            ),
        },
        _ => verdict.clone(),
    };
    let body = match dialect {
        Dialect::ClaudeCode | Dialect::Codex => claude_like(dialect, &verdict, context),
        Dialect::GeminiCli => gemini(&verdict),
        Dialect::Cursor => cursor(&verdict, context),
        Dialect::Copilot => copilot(&verdict),
        Dialect::Agents => agents(&verdict, context),
    };
    VendorAnswer {
        stdout: if body.is_empty() {
            String::new()
        } else {
            Value::Object(body).to_string()
        },
        stderr: String::new(),
        exit_code: 0,
    }
}

/// The answer when the gate itself failed (unreadable payload, no sandbox, a policy that did
/// not decide in time): a deny in `dialect`'s protocol, saying why.
pub fn failure(dialect: Dialect, reason: &str) -> VendorAnswer {
    let reason = format!("hookbox gate failed, so the call is denied: {reason}");
    let mut answer = pre_tool(
        dialect,
        &Verdict::Deny {
            reason: reason.clone(),
        },
        &[],
    );
    answer.stderr = reason;
    answer
}

/// The reason [`fallback_shell`] gives.
pub const FALLBACK_REASON: &str =
    "hookbox hooks gate could not run (missing or crashed), so the call is denied";

/// A POSIX shell fragment that denies in `dialect`'s protocol whatever happened: run after
/// `||` when the gate exits non-zero (or cannot be started at all). It prints
/// [`FALLBACK_REASON`] as the deny JSON on stdout and on stderr, and exits 2.
pub fn fallback_shell(dialect: Dialect) -> String {
    let json = pre_tool(
        dialect,
        &Verdict::Deny {
            reason: FALLBACK_REASON.to_owned(),
        },
        &[],
    )
    .stdout;
    // Neither text holds a single quote, so single-quoting them is exact.
    format!("{{ printf '%s\\n' '{json}'; echo '{FALLBACK_REASON}' >&2; exit 2; }}")
}

/// The flat shape Claude Code, Codex, Copilot and hookbox's own handlers share, each with its
/// own key names: a deny or an ask is `decision: "deny" | "ask"` with `reason`; a rewrite is
/// `decision: "allow"` (with `rewrite_reason`, where the CLI wants one) and the new input under
/// `rewritten`; an allow writes nothing.
struct DecisionKeys {
    decision: &'static str,
    reason: &'static str,
    rewrite_reason: Option<&'static str>,
    rewritten: &'static str,
}

impl DecisionKeys {
    fn write(&self, into: &mut Map<String, Value>, verdict: &Verdict) {
        let (decision, reason) = match verdict {
            Verdict::Allow => return,
            Verdict::Deny { reason } => ("deny", Some(reason.as_str())),
            Verdict::Ask { reason } => ("ask", Some(reason.as_str())),
            Verdict::Rewrite { .. } => ("allow", self.rewrite_reason),
        };
        into.insert(self.decision.into(), json!(decision));
        if let Some(reason) = reason {
            into.insert(self.reason.into(), json!(reason));
        }
        if let Verdict::Rewrite { tool_input } = verdict {
            into.insert(self.rewritten.into(), tool_input.clone());
        }
    }
}

/// Claude Code and Codex, inside `hookSpecificOutput`.
const CLAUDE_KEYS: DecisionKeys = DecisionKeys {
    decision: "permissionDecision",
    reason: "permissionDecisionReason",
    rewrite_reason: Some("the project's hookbox policy rewrote the call"),
    rewritten: "updatedInput",
};

const COPILOT_KEYS: DecisionKeys = DecisionKeys {
    decision: "permissionDecision",
    reason: "permissionDecisionReason",
    rewrite_reason: None,
    rewritten: "modifiedArgs",
};

/// hookbox's own answer shape (`.agents/hooks.json` handlers).
const AGENTS_KEYS: DecisionKeys = DecisionKeys {
    decision: "decision",
    reason: "reason",
    rewrite_reason: None,
    rewritten: "updated_args",
};

fn claude_like(dialect: Dialect, verdict: &Verdict, context: Option<String>) -> Map<String, Value> {
    let mut specific = Map::new();
    specific.insert("hookEventName".into(), json!(pre_tool_event(dialect)));
    CLAUDE_KEYS.write(&mut specific, verdict);
    if let Some(context) = context {
        specific.insert("additionalContext".into(), json!(context));
    }
    let mut body = Map::new();
    if specific.len() > 1 {
        body.insert("hookSpecificOutput".into(), Value::Object(specific));
    }
    body
}

fn gemini(verdict: &Verdict) -> Map<String, Value> {
    let mut body = Map::new();
    let mut specific = Map::new();
    match verdict {
        Verdict::Allow => {}
        Verdict::Deny { reason } => {
            body.insert("decision".into(), json!("deny"));
            body.insert("reason".into(), json!(reason));
        }
        Verdict::Ask { reason } => {
            body.insert("decision".into(), json!("ask"));
            body.insert("reason".into(), json!(reason));
        }
        Verdict::Rewrite { tool_input } => {
            specific.insert("tool_input".into(), tool_input.clone());
        }
    }
    if !specific.is_empty() {
        body.insert("hookSpecificOutput".into(), Value::Object(specific));
    }
    body
}

fn cursor(verdict: &Verdict, context: Option<String>) -> Map<String, Value> {
    let mut body = Map::new();
    let mut agent_message = context;
    match verdict {
        Verdict::Allow => {}
        Verdict::Deny { reason } | Verdict::Ask { reason } => {
            body.insert("permission".into(), json!("deny"));
            body.insert("user_message".into(), json!(reason));
            agent_message = Some(match agent_message {
                Some(context) => format!("{reason}\n{context}"),
                None => reason.clone(),
            });
        }
        Verdict::Rewrite { tool_input } => {
            body.insert("permission".into(), json!("allow"));
            body.insert("updated_input".into(), tool_input.clone());
        }
    }
    if let Some(message) = agent_message {
        body.insert("agent_message".into(), json!(message));
    }
    body
}

fn copilot(verdict: &Verdict) -> Map<String, Value> {
    let mut body = Map::new();
    COPILOT_KEYS.write(&mut body, verdict);
    body
}

/// hookbox's own answer shape (`.agents/hooks.json` handlers), for completeness.
fn agents(verdict: &Verdict, context: Option<String>) -> Map<String, Value> {
    let mut body = Map::new();
    AGENTS_KEYS.write(&mut body, verdict);
    if let Some(context) = context {
        body.insert("additional_context".into(), json!(context));
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deny(reason: &str) -> Verdict {
        Verdict::Deny {
            reason: reason.into(),
        }
    }

    fn parsed(answer: &VendorAnswer) -> Value {
        serde_json::from_str(&answer.stdout).unwrap_or(Value::Null)
    }

    #[test]
    fn a_deny_carries_the_reason_in_each_clis_own_field() {
        let r = "rm -rf is not allowed";
        for d in [Dialect::ClaudeCode, Dialect::Codex] {
            let a = pre_tool(d, &deny(r), &[]);
            assert_eq!(a.exit_code, 0);
            let v = parsed(&a);
            assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PreToolUse");
            assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
            assert_eq!(v["hookSpecificOutput"]["permissionDecisionReason"], r);
        }
        let v = parsed(&pre_tool(Dialect::GeminiCli, &deny(r), &[]));
        assert_eq!(
            (v["decision"].as_str(), v["reason"].as_str()),
            (Some("deny"), Some(r))
        );
        let v = parsed(&pre_tool(Dialect::Cursor, &deny(r), &[]));
        assert_eq!(v["permission"], "deny");
        assert_eq!(v["agent_message"], r);
        let v = parsed(&pre_tool(Dialect::Copilot, &deny(r), &[]));
        assert_eq!(v["permissionDecision"], "deny");
        assert_eq!(v["permissionDecisionReason"], r);
    }

    #[test]
    fn an_allow_says_nothing_so_the_clis_own_rules_still_apply() {
        for d in Dialect::VENDORS {
            let a = pre_tool(d, &Verdict::Allow, &[]);
            assert_eq!((a.stdout.as_str(), a.exit_code), ("", 0), "{d}");
        }
    }

    #[test]
    fn ask_is_a_deny_where_the_cli_would_let_an_ask_through() {
        let ask = Verdict::Ask {
            reason: "deploys need a person".into(),
        };
        let v = parsed(&pre_tool(Dialect::Codex, &ask, &[]));
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
        assert!(
            v["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .is_some_and(|s| s.starts_with("deploys need a person"))
        );
        assert_eq!(
            parsed(&pre_tool(Dialect::Cursor, &ask, &[]))["permission"],
            "deny"
        );
        let v = parsed(&pre_tool(Dialect::ClaudeCode, &ask, &[]));
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "ask");
        assert_eq!(
            parsed(&pre_tool(Dialect::GeminiCli, &ask, &[]))["decision"],
            "ask"
        );
        assert_eq!(
            parsed(&pre_tool(Dialect::Copilot, &ask, &[]))["permissionDecision"],
            "ask"
        );
    }

    #[test]
    fn rewrites_and_context_use_each_clis_fields() {
        let input = json!({"command": "ls"});
        let rw = Verdict::Rewrite {
            tool_input: input.clone(),
        };
        let v = parsed(&pre_tool(Dialect::ClaudeCode, &rw, &["note".into()]));
        assert_eq!(v["hookSpecificOutput"]["updatedInput"], input);
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "allow");
        assert_eq!(v["hookSpecificOutput"]["additionalContext"], "note");
        let v = parsed(&pre_tool(Dialect::GeminiCli, &rw, &[]));
        assert_eq!(v["hookSpecificOutput"]["tool_input"], input);
        assert_eq!(
            parsed(&pre_tool(Dialect::Cursor, &rw, &[]))["updated_input"],
            input
        );
        assert_eq!(
            parsed(&pre_tool(Dialect::Copilot, &rw, &[]))["modifiedArgs"],
            input
        );
        let v = parsed(&pre_tool(
            Dialect::Codex,
            &Verdict::Allow,
            &["a".into(), "b".into()],
        ));
        assert_eq!(v["hookSpecificOutput"]["additionalContext"], "a\nb");
        assert!(v["hookSpecificOutput"].get("permissionDecision").is_none());
    }

    #[test]
    fn the_flat_shapes_are_whole_answers() {
        let input = json!({"command": "ls"});
        let rw = Verdict::Rewrite {
            tool_input: input.clone(),
        };
        assert_eq!(
            parsed(&pre_tool(Dialect::ClaudeCode, &rw, &[]))["hookSpecificOutput"],
            json!({"hookEventName": "PreToolUse", "permissionDecision": "allow",
                "permissionDecisionReason": "the project's hookbox policy rewrote the call",
                "updatedInput": input})
        );
        assert_eq!(
            parsed(&pre_tool(Dialect::Copilot, &rw, &[])),
            json!({"permissionDecision": "allow", "modifiedArgs": input})
        );
        assert_eq!(
            parsed(&pre_tool(Dialect::Agents, &rw, &["c".into()])),
            json!({"decision": "allow", "updated_args": input, "additional_context": "c"})
        );
        assert_eq!(
            parsed(&pre_tool(Dialect::Agents, &deny("no"), &[])),
            json!({"decision": "deny", "reason": "no"})
        );
    }

    #[test]
    fn a_failure_denies_and_says_so() {
        for d in Dialect::VENDORS {
            let a = failure(d, "no sandbox");
            assert!(a.stdout.contains("deny"), "{d}: {}", a.stdout);
            assert!(a.stdout.contains("hookbox gate failed"), "{d}");
            assert!(a.stderr.contains("no sandbox"));
        }
    }

    /// The fallback is real shell: run it with `sh` and read what a CLI would read.
    #[test]
    fn the_fallback_shell_denies_with_exit_2_and_the_json() {
        for d in Dialect::VENDORS {
            let script = format!("false || {}", fallback_shell(d));
            let out = std::process::Command::new("sh")
                .args(["-c", &script])
                .output()
                .unwrap_or_else(|e| panic!("sh: {e}"));
            assert_eq!(out.status.code(), Some(2), "{d}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let v: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
            assert_eq!(v, parsed(&pre_tool(d, &deny(FALLBACK_REASON), &[])), "{d}");
            assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), FALLBACK_REASON);
        }
    }
}
