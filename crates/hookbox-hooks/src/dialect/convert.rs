//! `hookbox hooks convert`: one dialect's hooks file written in another where the mapping is
//! exact, refused — naming each entry, handler and field and why — where it is not. A
//! conversion never weakens a gate: every part of a rule (event, matcher, handler type,
//! timeout, failure behaviour, the handler's answer protocol) must carry over with the same
//! meaning, or the whole conversion is refused.
//!
//! Rules (each in `docs/vendor-hooks.md`, "Converting"):
//! - **Event**: the target event with the same hookbox event and the same "fires" (Cursor's
//!   `beforeShellExecution` fires for shell calls only, Claude's `PostToolUseFailure` only
//!   after failures, …); none → refused.
//! - **Matcher**: the source matcher, read with the source's semantics, selects a set of
//!   hookbox calls; the target matcher must select exactly that set in the target's semantics
//!   (written as an exact list, anchored for Gemini). A regular expression also selects MCP
//!   tools, whose names differ between dialects, so only a same-dialect conversion keeps one.
//!   A matcher on a target event that ignores matchers is refused unless it selects everything.
//! - **Timeout**: always written explicitly (the defaults differ), in the target's unit
//!   (Gemini milliseconds, seconds elsewhere); one that is not a whole number of the target's
//!   unit is refused rather than rounded.
//! - **Handler type**: `command` everywhere; `http` only to Claude Code and Copilot; types
//!   hookbox cannot run (`prompt`, `agent`, …) are refused.
//! - **Answer protocol**: a command written for dialect A prints A's answers (exit codes, JSON
//!   fields); a target B reads them differently for part of that space in every pair of
//!   dialects (see [`super::answer_in`]), and which part a script uses is not knowable without
//!   running it. So a command converts only to its own dialect; any other target is refused,
//!   naming the difference. `.agents/hooks.json` cannot say "this handler speaks A" (and there
//!   is no adapter command), so every vendor handler is refused there too.
//! - Cursor's `failClosed`, Copilot's `env`/`cwd` and Claude Code's `if` carry over only where
//!   the target has the same field (`if` only to Claude Code); a disabled file is refused (converting it would turn its
//!   hooks on).

use hookbox_protocol::HookEvent;
use serde_json::{Map, Value, json};

use super::Dialect;
use super::events::{self, EventInfo};
use super::load::{VendorMatcher, VendorRule};
use crate::config::{Group, Handler, HandlerKind, OnFailure, Rule};

/// Why a part of the source cannot be written in the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Where in the source file (`hooks.PreToolUse[0].hooks[1]`).
    pub path: String,
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

// The hookbox calls a matcher can select, as bits (Python code runs through the shell tool
// everywhere, so it is one kind with shell commands).
const SHELL: u8 = 1;
const READ: u8 = 2;
const WRITE: u8 = 4;
const EDIT: u8 = 8;
const LIST: u8 = 16;
const DELETE: u8 = 32;

/// Which hookbox calls a dialect shows its hooks under each tool name (see [`super::tools`]).
fn name_kinds(dialect: Dialect) -> &'static [(&'static str, u8)] {
    match dialect {
        Dialect::ClaudeCode => &[
            ("Bash", SHELL | DELETE),
            ("Read", READ),
            ("Write", WRITE),
            ("Edit", EDIT),
            ("LS", LIST),
        ],
        Dialect::Codex => &[
            ("Bash", SHELL),
            ("apply_patch", WRITE | EDIT | DELETE),
            ("Read", READ),
            ("LS", LIST),
        ],
        Dialect::GeminiCli => &[
            ("run_shell_command", SHELL | DELETE),
            ("read_file", READ),
            ("write_file", WRITE),
            ("replace", EDIT),
            ("list_directory", LIST),
        ],
        Dialect::Cursor => &[
            ("Shell", SHELL),
            ("Read", READ),
            ("Write", WRITE | EDIT),
            ("Delete", DELETE),
            ("LS", LIST),
        ],
        Dialect::Copilot => &[
            ("bash", SHELL | DELETE),
            ("view", READ | LIST),
            ("create", WRITE),
            ("edit", EDIT),
        ],
        Dialect::Agents => &[],
    }
}

fn kinds_of(dialect: Dialect, name: &str) -> u8 {
    // Codex's own matchers `Edit` and `Write` select `apply_patch`.
    let name = match (dialect, name) {
        (Dialect::Codex, "Edit" | "Write") => "apply_patch",
        _ => name,
    };
    name_kinds(dialect)
        .iter()
        .filter(|(n, _)| *n == name)
        .fold(0, |acc, (_, k)| acc | k)
}

fn kind_names(kinds: u8) -> String {
    let names = [
        (SHELL, "shell commands and code"),
        (READ, "view_file"),
        (WRITE, "write_to_file"),
        (EDIT, "replace_file_content"),
        (LIST, "list_dir"),
        (DELETE, "delete_file"),
    ];
    names
        .iter()
        .filter(|(k, _)| kinds & k != 0)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a target event's matcher must be.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TargetMatcher {
    /// Omitted: every call.
    All,
    Pattern(String),
}

/// The target matcher selecting exactly what `matcher` selects in `from`.
fn convert_matcher(
    from: Dialect,
    matcher: &VendorMatcher,
    to: Dialect,
    to_takes_matcher: bool,
) -> Result<TargetMatcher, String> {
    if from == to {
        return Ok(match matcher {
            VendorMatcher::All => TargetMatcher::All,
            VendorMatcher::Invalid { pattern, error } => {
                return Err(format!(
                    "matcher {pattern:?} does not compile ({error}), so the entry never runs; fix it before converting"
                ));
            }
            other => TargetMatcher::Pattern(other.pattern()),
        });
    }
    let kinds = match matcher {
        VendorMatcher::All => return Ok(TargetMatcher::All),
        VendorMatcher::Invalid { pattern, error } => {
            return Err(format!(
                "matcher {pattern:?} does not compile ({error}), so the entry never runs; fix it before converting"
            ));
        }
        VendorMatcher::Regex { pattern, .. } => {
            return Err(format!(
                "matcher {pattern:?} is a regular expression: it also selects MCP tools by name, and {from} and {to} write MCP tool names differently, so no {to} matcher selects exactly the same calls; write it as a list of tool names"
            ));
        }
        VendorMatcher::Names(names) => {
            let mut kinds = 0;
            for name in names {
                if name.starts_with("mcp") || name.starts_with("MCP") {
                    return Err(format!(
                        "matcher names the MCP tool {name:?}; {from} and {to} write MCP tool names differently"
                    ));
                }
                kinds |= kinds_of(from, name);
            }
            if kinds == 0 {
                return Err(format!(
                    "matcher {:?} selects no tool hookbox shows {from} hooks, so the entry never runs; there is nothing exact to write",
                    matcher.pattern()
                ));
            }
            kinds
        }
    };
    if !to_takes_matcher {
        return Err(format!(
            "the {to} event ignores matchers, and matcher {:?} selects only {}",
            matcher.pattern(),
            kind_names(kinds)
        ));
    }
    let names: Vec<&str> = name_kinds(to)
        .iter()
        .filter(|(_, k)| k & !kinds == 0)
        .map(|(n, _)| *n)
        .collect();
    let covered = names.iter().fold(0, |acc, n| acc | kinds_of(to, n));
    if covered != kinds {
        return Err(format!(
            "matcher {:?} selects {} in {from}; {to} shows {} under tool names it shares with other calls, so no {to} matcher selects exactly the same calls",
            matcher.pattern(),
            kind_names(kinds),
            kind_names(kinds & !covered)
        ));
    }
    let list = names.join("|");
    Ok(TargetMatcher::Pattern(match to {
        // Gemini compiles matchers as unanchored regular expressions.
        Dialect::GeminiCli => format!("^(?:{list})$"),
        _ => list,
    }))
}

/// How each dialect reads a command's answer, in one line (the differences a refusal names).
fn protocol(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::ClaudeCode => {
            "exit 2 blocks (even with empty stderr); `permissionDecision` deny/ask/defer; `updatedInput` replaces"
        }
        Dialect::GeminiCli => {
            "JSON `decision` overrides any exit code; `tool_input` merges into the input"
        }
        Dialect::Codex => {
            "exit 2 blocks only with stderr; `ask` is a failure that proceeds; the reason is stderr"
        }
        Dialect::Cursor => {
            "exit 2 blocks; the JSON field is `permission`, not `permissionDecision`; `updated_input` replaces"
        }
        Dialect::Copilot => {
            "exit 2 is only a warning (the call proceeds); `permissionDecision` deny/ask; `modifiedArgs` replaces"
        }
        Dialect::Agents => "hookbox's own answers (`decision`, `reason`, exit codes)",
    }
}

fn protocol_refusal(from: Dialect, to: Dialect) -> String {
    match to {
        Dialect::Agents => format!(
            "the command answers in {from}'s protocol ({}); .agents/hooks.json has no way to say a handler speaks {from}, so hookbox would read its answers as its own ({}) — and it would see hookbox's input, not {from}'s",
            protocol(from),
            protocol(Dialect::Agents)
        ),
        _ => format!(
            "the command answers in {from}'s protocol ({}); {to} reads answers differently ({}), and it would be shown {to}'s input (tool names and fields), so which of its answers keep their meaning cannot be known without running it",
            protocol(from),
            protocol(to)
        ),
    }
}

/// Converts the vendor file `file` (its bytes) of dialect `from` to `to`. Besides
/// [`convert`]'s rules, refuses whatever hookbox's reading of the file leaves out, since the
/// converted file would silently lose it: entries `hooks check` reports as errors (skipped),
/// events hookbox never emits or does not know (they cannot be carried over with a checked
/// meaning), and Gemini's `hooksConfig.disabled` names.
pub fn convert_file(
    from: Dialect,
    file: &str,
    bytes: &[u8],
    to: Dialect,
) -> Result<Value, Vec<Refusal>> {
    if from == Dialect::Agents {
        return Err(vec![Refusal {
            path: "$".into(),
            reason: "a file of hookbox's own format: its handlers answer in hookbox's protocol, which no vendor CLI reads".into(),
        }]);
    }
    let (group, diagnostics) = super::load::parse(from, file, bytes);
    let mut refusals: Vec<Refusal> = diagnostics
        .iter()
        .filter(|d| d.severity == crate::diagnostic::Severity::Error)
        .map(|d| Refusal {
            path: if d.path.is_empty() {
                "$".into()
            } else {
                d.path.clone()
            },
            reason: format!("{} (fix what `hooks check` reports first)", d.message),
        })
        .collect();
    let Some(group) = group else {
        if refusals.is_empty() {
            refusals.push(Refusal {
                path: "$".into(),
                reason: "holds no hooks".into(),
            });
        }
        return Err(refusals);
    };
    let raw: Value = if file.ends_with(".toml") {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|t| toml::from_str::<toml::Value>(t).ok())
            .and_then(|v| serde_json::to_value(v).ok())
            .unwrap_or_default()
    } else {
        serde_json::from_slice(bytes).unwrap_or_default()
    };
    if let Some(Value::Object(hooks)) = raw.get("hooks") {
        for name in hooks.keys() {
            match events::lookup(from, name) {
                Some((info, _)) if info.event.is_some() => {}
                Some(_) => refusals.push(Refusal {
                    path: format!("hooks.{name}"),
                    reason: format!("{name} is inactive in hookbox (it has no {name} moment), so hookbox cannot carry it over with a checked meaning; convert it by hand"),
                }),
                None => refusals.push(Refusal {
                    path: format!("hooks.{name}"),
                    reason: format!("{name:?} is not a {from} event hookbox knows"),
                }),
            }
        }
    }
    if let Some(Value::Object(hooks)) = raw.get("hooks") {
        for (name, entries) in hooks {
            let Value::Array(entries) = entries else {
                continue;
            };
            for (i, entry) in entries.iter().enumerate() {
                let path = format!("hooks.{name}[{i}]");
                unknown_fields(entry, &path, &mut refusals);
                if let Some(Value::Array(list)) = entry.get("hooks") {
                    for (j, h) in list.iter().enumerate() {
                        unknown_fields(h, &format!("{path}.hooks[{j}]"), &mut refusals);
                    }
                }
            }
        }
    }
    if let Some(Value::Array(names)) = raw.pointer("/hooksConfig/disabled")
        && !names.is_empty()
    {
        refusals.push(Refusal {
            path: "hooksConfig.disabled".into(),
            reason: "hooksConfig.disabled is not carried over; remove the disabled hooks or the list first".into(),
        });
    }
    match convert(&group, to) {
        Ok(v) if refusals.is_empty() => Ok(v),
        Ok(_) => Err(refusals),
        Err(more) => {
            refusals.extend(more);
            Err(refusals)
        }
    }
}

/// Fields a conversion carries over, or drops without changing what a hook decides
/// (`statusMessage`, `name`, `description` only describe; `async: true` hooks are written
/// synchronous, which can only make a gate stricter).
const KNOWN_FIELDS: &[&str] = &[
    "type",
    "command",
    "bash",
    "timeout",
    "timeoutSec",
    "matcher",
    "hooks",
    "url",
    "headers",
    "if",
    "failClosed",
    "env",
    "cwd",
    "prompt",
    "statusMessage",
    "name",
    "description",
    "comment",
    "async",
];

/// Refuses each field of `value` (an entry or handler object) a conversion would lose.
fn unknown_fields(value: &Value, path: &str, refusals: &mut Vec<Refusal>) {
    let Value::Object(map) = value else { return };
    for key in map.keys() {
        if !KNOWN_FIELDS.contains(&key.as_str()) {
            refusals.push(Refusal {
                path: format!("{path}.{key}"),
                reason: format!(
                    "{key:?} is not carried over by a conversion; remove it or convert by hand"
                ),
            });
        }
    }
}

/// Writes `group` (a vendor file parsed by [`super::load::parse`]) in `to`'s format, or says
/// everything that cannot be written exactly.
pub fn convert(group: &Group, to: Dialect) -> Result<Value, Vec<Refusal>> {
    let mut refusals = Vec::new();
    let mut events_out: Map<String, Value> = Map::new();
    if !group.enabled {
        refusals.push(Refusal {
            path: "$".into(),
            reason:
                "every hook of this file is switched off; the converted file would switch them on"
                    .into(),
        });
    }
    let rules = [
        (HookEvent::PreToolExecution, &group.pre_tool_execution),
        (HookEvent::PostToolExecution, &group.post_tool_execution),
        (HookEvent::PreInteraction, &group.pre_interaction),
        (HookEvent::PostInteraction, &group.post_interaction),
    ];
    for (event, list) in rules {
        for rule in list.iter() {
            convert_rule(event, rule, to, &mut events_out, &mut refusals);
        }
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    Ok(match to {
        Dialect::Cursor | Dialect::Copilot => json!({"version": 1, "hooks": events_out}),
        // Written out so that hooks are on whatever the user's own settings say.
        Dialect::GeminiCli => json!({"hooksConfig": {"enabled": true}, "hooks": events_out}),
        _ => json!({ "hooks": events_out }),
    })
}

fn convert_rule(
    event: HookEvent,
    rule: &Rule,
    to: Dialect,
    out: &mut Map<String, Value>,
    refusals: &mut Vec<Refusal>,
) {
    let Some(vendor) = rule.vendor.as_deref() else {
        refusals.push(Refusal {
            path: format!("{event}[{}]", rule.index),
            reason: "a rule of hookbox's own format: its handlers answer in hookbox's protocol, which no vendor CLI reads".into(),
        });
        return;
    };
    let from = vendor.dialect;
    let flat_source = matches!(from, Dialect::Cursor | Dialect::Copilot);
    let entry_path = format!("hooks.{}[{}]", vendor.event_name, rule.index);
    let mut refuse = |path: &str, reason: String| {
        refusals.push(Refusal {
            path: path.to_owned(),
            reason,
        })
    };
    let target = target_event(vendor, event, to);
    let Some(target) = target else {
        refuse(
            &entry_path,
            format!(
                "{to} has no event that runs at the same moment as {from}'s {} (hookbox event {event})",
                vendor.event_name
            ),
        );
        return;
    };
    let event_name = if from == to {
        vendor.event_name.clone()
    } else {
        target.name.to_owned()
    };
    let matcher = match convert_matcher(from, &vendor.matcher, to, target.takes_matcher) {
        Ok(m) => Some(m),
        Err(reason) => {
            refuse(&format!("{entry_path}.matcher"), reason);
            None
        }
    };
    if to != Dialect::Copilot && (!vendor.env.is_empty() || vendor.cwd.is_some()) {
        refuse(
            &entry_path,
            format!("{to} has no per-hook `env` or `cwd`; the command would run differently"),
        );
    }
    let mut handlers = Vec::new();
    for h in &rule.handlers {
        let path = if flat_source {
            entry_path.clone()
        } else {
            format!("{entry_path}.hooks[{}]", h.index)
        };
        let mut failed = false;
        let mut refuse_h = |reason: String| {
            failed = true;
            refusals.push(Refusal {
                path: path.clone(),
                reason,
            });
        };
        if from != to {
            refuse_h(protocol_refusal(from, to));
        }
        let fields = handler_fields(h, to, &mut refuse_h);
        if !failed {
            handlers.push(fields);
        }
    }
    let Some(matcher) = matcher else { return };
    if handlers.len() != rule.handlers.len() {
        return;
    }
    let entries = out
        .entry(event_name)
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(entries) = entries else {
        return;
    };
    match to {
        Dialect::Cursor | Dialect::Copilot => {
            for mut fields in handlers {
                if let TargetMatcher::Pattern(p) = &matcher {
                    fields.insert("matcher".into(), json!(p));
                }
                if to == Dialect::Copilot {
                    if !vendor.env.is_empty() {
                        let env: Map<String, Value> = vendor
                            .env
                            .iter()
                            .map(|(k, v)| (k.clone(), json!(v)))
                            .collect();
                        fields.insert("env".into(), Value::Object(env));
                    }
                    if let Some(cwd) = &vendor.cwd {
                        fields.insert("cwd".into(), json!(cwd));
                    }
                }
                entries.push(Value::Object(fields));
            }
        }
        _ => {
            let mut entry = Map::new();
            if let TargetMatcher::Pattern(p) = &matcher {
                entry.insert("matcher".into(), json!(p));
            }
            entry.insert(
                "hooks".into(),
                Value::Array(handlers.into_iter().map(Value::Object).collect()),
            );
            entries.push(Value::Object(entry));
        }
    }
}

/// The target event running at the same moment, for the same calls.
fn target_event(vendor: &VendorRule, event: HookEvent, to: Dialect) -> Option<EventInfo> {
    if vendor.dialect == to {
        return events::lookup(to, &vendor.event_name).map(|(info, _)| info);
    }
    events::table(to)
        .iter()
        .find(|i| i.event == Some(event) && i.fires == vendor.fires)
        .copied()
}

/// A handler's fields in `to`'s format; what cannot be written goes to `refuse`.
fn handler_fields(h: &Handler, to: Dialect, refuse: &mut dyn FnMut(String)) -> Map<String, Value> {
    let mut m = Map::new();
    match &h.kind {
        HandlerKind::Command { command } => {
            if to == Dialect::Copilot {
                m.insert("type".into(), json!("command"));
                m.insert("bash".into(), json!(command));
            } else {
                if to != Dialect::Cursor {
                    m.insert("type".into(), json!("command"));
                }
                m.insert("command".into(), json!(command));
            }
        }
        HandlerKind::Http {
            url,
            headers,
            allowed_env_vars,
        } => {
            if matches!(to, Dialect::ClaudeCode | Dialect::Copilot) {
                m.insert("type".into(), json!("http"));
                m.insert("url".into(), json!(url));
                if !headers.is_empty() {
                    let hs: Map<String, Value> =
                        headers.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                    m.insert("headers".into(), Value::Object(hs));
                }
                // Header interpolation (`$NAME` from the listed variables) is Claude Code's.
                match (to, allowed_env_vars.is_empty()) {
                    (_, true) => {}
                    (Dialect::ClaudeCode, false) => {
                        m.insert("allowedEnvVars".into(), json!(allowed_env_vars));
                    }
                    (_, false) => refuse(format!(
                        "{to} has no `allowedEnvVars`: its headers would be sent without the variables"
                    )),
                }
            } else {
                refuse(format!("{to} has no `http` handlers"));
            }
        }
        HandlerKind::Unsupported { type_name, .. } => refuse(format!(
            "handler type {type_name:?} cannot run in hookbox, so its meaning cannot be checked; convert it by hand"
        )),
    }
    match to {
        Dialect::GeminiCli => {
            m.insert("timeout".into(), json!(h.timeout.as_millis()));
        }
        _ => {
            let key = if to == Dialect::Copilot {
                "timeoutSec"
            } else {
                "timeout"
            };
            if h.timeout.subsec_nanos() != 0 {
                refuse(format!(
                    "timeout {} ms is not a whole number of seconds, {to}'s unit; rounding would change when the hook is killed",
                    h.timeout.as_millis()
                ));
            } else {
                m.insert(key.into(), json!(h.timeout.as_secs()));
            }
        }
    }
    if h.on_failure == OnFailure::Deny {
        if to == Dialect::Cursor {
            m.insert("failClosed".into(), json!(true));
        } else {
            refuse(format!(
                "the hook fails closed (`failClosed`); {to} lets the call through when a hook fails or times out"
            ));
        }
    }
    match &h.condition {
        None => {}
        Some(Ok(condition)) if to == Dialect::ClaudeCode => {
            m.insert("if".into(), json!(condition.text));
        }
        Some(Ok(condition)) => refuse(format!(
            "the `if` condition {:?} (a Claude Code permission rule) has no equivalent in {to}",
            condition.text
        )),
        Some(Err(e)) => refuse(format!("the `if` condition cannot be read ({e})")),
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::load::parse;

    fn group(d: Dialect, json: &str) -> Group {
        let (g, diags) = parse(d, "/f", json.as_bytes());
        g.unwrap_or_else(|| panic!("no group: {diags:?}"))
    }

    fn refusals(d: Dialect, json: &str, to: Dialect) -> Vec<Refusal> {
        match convert(&group(d, json), to) {
            Ok(v) => panic!("converted: {v}"),
            Err(r) => r,
        }
    }

    const CLAUDE_BASH: &str = r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"./guard.sh"}]}]}}"#;

    #[test]
    fn same_dialect_keeps_the_matcher_and_writes_the_default_timeout_explicitly() {
        let out = convert(
            &group(Dialect::ClaudeCode, CLAUDE_BASH),
            Dialect::ClaudeCode,
        )
        .unwrap_or_else(|r| panic!("{r:?}"));
        assert_eq!(
            out,
            json!({"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"./guard.sh","timeout":600}]}]}})
        );
    }

    #[test]
    fn codex_config_toml_converts_to_codex_hooks_json() {
        let g = {
            let (g, d) = parse(
                Dialect::Codex,
                "/.codex/config.toml",
                b"[[hooks.PreToolUse]]\nmatcher = \"Bash\"\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"g\"\ntimeout = 5\n",
            );
            g.unwrap_or_else(|| panic!("{d:?}"))
        };
        let out = convert(&g, Dialect::Codex).unwrap_or_else(|r| panic!("{r:?}"));
        assert_eq!(
            out,
            json!({"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"g","timeout":5}]}]}})
        );
    }

    #[test]
    fn another_dialect_is_refused_for_the_answer_protocol() {
        let r = refusals(Dialect::ClaudeCode, CLAUDE_BASH, Dialect::Copilot);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].path, "hooks.PreToolUse[0].hooks[0]");
        assert!(r[0].reason.contains("exit 2 is only a warning"), "{}", r[0]);
        let r = refusals(Dialect::ClaudeCode, CLAUDE_BASH, Dialect::Codex);
        assert!(
            r.iter()
                .any(|r| r.reason.contains("exit 2 blocks only with stderr")),
            "{r:?}"
        );
    }

    #[test]
    fn agents_is_refused_because_it_cannot_say_which_dialect_a_handler_speaks() {
        let r = refusals(
            Dialect::GeminiCli,
            r#"{"hooks":{"BeforeTool":[{"matcher":"run_shell_command","hooks":[{"type":"command","command":"g","timeout":5000}]}]}}"#,
            Dialect::Agents,
        );
        assert!(
            r.iter().any(|r| r
                .reason
                .contains("no way to say a handler speaks gemini-cli")),
            "{r:?}"
        );
    }

    #[test]
    fn gemini_timeouts_are_written_in_milliseconds() {
        let g = group(
            Dialect::GeminiCli,
            r#"{"hooks":{"BeforeTool":[{"matcher":"write_file","hooks":[{"type":"command","command":"g","timeout":2500}]}]}}"#,
        );
        let out = convert(&g, Dialect::GeminiCli).unwrap_or_else(|r| panic!("{r:?}"));
        assert_eq!(
            out["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"],
            json!(2500)
        );
        // 2.5 s is not a whole number of seconds: refused, never rounded.
        let mut refused = Vec::new();
        handler_fields(
            &g.pre_tool_execution[0].handlers[0],
            Dialect::ClaudeCode,
            &mut |r| refused.push(r),
        );
        assert!(
            refused[0].contains("2500 ms is not a whole number of seconds"),
            "{refused:?}"
        );
    }

    #[test]
    fn matchers_select_the_same_calls_in_the_target_semantics() {
        let names = |d: Dialect, p: &str| VendorMatcher::new(d, Some(p), true);
        // Claude exact list → Gemini anchored expression (Gemini's are unanchored).
        assert_eq!(
            convert_matcher(
                Dialect::ClaudeCode,
                &names(Dialect::ClaudeCode, "Edit|Write"),
                Dialect::GeminiCli,
                true
            ),
            Ok(TargetMatcher::Pattern("^(?:write_file|replace)$".into()))
        );
        // Codex `Edit` is apply_patch: writes, edits and deletions.
        assert_eq!(
            convert_matcher(
                Dialect::Codex,
                &names(Dialect::Codex, "Edit"),
                Dialect::Cursor,
                true
            ),
            Ok(TargetMatcher::Pattern("Write|Delete".into()))
        );
        // Claude `Read` is file reads only; Copilot's `view` also lists directories.
        let e = convert_matcher(
            Dialect::ClaudeCode,
            &names(Dialect::ClaudeCode, "Read"),
            Dialect::Copilot,
            true,
        )
        .unwrap_err();
        assert!(e.contains("view_file"), "{e}");
        // Claude's Bash also carries deletions; Codex shows those as apply_patch.
        assert!(
            convert_matcher(
                Dialect::ClaudeCode,
                &names(Dialect::ClaudeCode, "Bash"),
                Dialect::Codex,
                true
            )
            .is_err()
        );
        // Unanchored regexes also select MCP tools: refused across dialects.
        let e = convert_matcher(
            Dialect::ClaudeCode,
            &names(Dialect::ClaudeCode, "Edit.*"),
            Dialect::Codex,
            true,
        )
        .unwrap_err();
        assert!(e.contains("regular expression"), "{e}");
        // A matcher on an event that ignores matchers.
        let e = convert_matcher(
            Dialect::ClaudeCode,
            &names(Dialect::ClaudeCode, "Bash"),
            Dialect::Cursor,
            false,
        )
        .unwrap_err();
        assert!(e.contains("ignores matchers"), "{e}");
        assert_eq!(
            convert_matcher(
                Dialect::ClaudeCode,
                &VendorMatcher::All,
                Dialect::Cursor,
                false
            ),
            Ok(TargetMatcher::All)
        );
    }

    #[test]
    fn events_map_by_moment_and_by_which_calls_they_fire_for() {
        // Cursor's beforeShellExecution fires for shell calls only: Claude has no such event.
        let r = refusals(
            Dialect::Cursor,
            r#"{"version":1,"hooks":{"beforeShellExecution":[{"command":"g"}]}}"#,
            Dialect::ClaudeCode,
        );
        assert!(
            r.iter().any(|r| r
                .reason
                .contains("has no event that runs at the same moment")),
            "{r:?}"
        );
    }

    #[test]
    fn cursor_fail_closed_is_kept_or_refused() {
        let src = r#"{"version":1,"hooks":{"preToolUse":[{"command":"g","failClosed":true,"timeout":7}]}}"#;
        let out = convert(&group(Dialect::Cursor, src), Dialect::Cursor)
            .unwrap_or_else(|r| panic!("{r:?}"));
        assert_eq!(
            out,
            json!({"version":1,"hooks":{"preToolUse":[{"command":"g","timeout":7,"failClosed":true}]}})
        );
        let mut refused = Vec::new();
        let g = group(Dialect::Cursor, src);
        handler_fields(
            &g.pre_tool_execution[0].handlers[0],
            Dialect::ClaudeCode,
            &mut |r| refused.push(r),
        );
        assert!(
            refused.iter().any(|r| r.contains("fails closed")),
            "{refused:?}"
        );
    }

    #[test]
    fn http_and_unrunnable_types_are_refused_where_the_target_lacks_them() {
        let src = r#"{"hooks":{"PreToolUse":[{"hooks":[{"type":"http","url":"http://127.0.0.1:9/h"},{"type":"prompt","prompt":"is it safe?"}]}]}}"#;
        let g = group(Dialect::ClaudeCode, src);
        let mut refused = Vec::new();
        for h in &g.pre_tool_execution[0].handlers {
            handler_fields(h, Dialect::GeminiCli, &mut |r| refused.push(r));
        }
        assert!(refused[0].contains("no `http` handlers"), "{refused:?}");
        assert!(refused[1].contains("\"prompt\" cannot run"), "{refused:?}");
        let r = refusals(Dialect::ClaudeCode, src, Dialect::ClaudeCode);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].path, "hooks.PreToolUse[0].hooks[1]");
    }

    #[test]
    fn what_hookbox_leaves_out_of_a_file_is_refused_not_dropped() {
        let src = br#"{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"s"}]}],"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command"}]}]}}"#;
        let r = match convert_file(
            Dialect::ClaudeCode,
            "/.claude/settings.json",
            src,
            Dialect::ClaudeCode,
        ) {
            Ok(v) => panic!("converted: {v}"),
            Err(r) => r,
        };
        assert!(
            r.iter()
                .any(|r| r.path == "hooks.SessionStart" && r.reason.contains("inactive")),
            "{r:?}"
        );
        assert!(
            r.iter().any(|r| r.reason.contains("missing \"command\"")),
            "{r:?}"
        );
        let ok = convert_file(
            Dialect::ClaudeCode,
            "/.claude/settings.json",
            CLAUDE_BASH.as_bytes(),
            Dialect::ClaudeCode,
        );
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn a_disabled_file_is_refused() {
        let r = refusals(
            Dialect::ClaudeCode,
            r#"{"disableAllHooks":true,"hooks":{"Stop":[{"hooks":[{"type":"command","command":"g"}]}]}}"#,
            Dialect::ClaudeCode,
        );
        assert!(r[0].reason.contains("switched off"), "{r:?}");
    }
}
