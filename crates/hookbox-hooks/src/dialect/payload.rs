//! The input a vendor handler reads on stdin (or as an http body), in its CLI's own shape, and
//! the environment variables its CLI would set.
//!
//! Common fields carry meaningful values: `session_id` is the interaction's id where hookbox
//! knows it (interaction events) and the environment's id otherwise; `cwd` is `/workspace`;
//! `tool_use_id` identifies the call (stable for the same call); `hook_event_name` is the event
//! as written in the file. `transcript_path` is [`TRANSCRIPT_PATH`], a real file of the
//! interaction's steps up to the call as JSON Lines (bounded by the caller, and again here by
//! [`TRANSCRIPT_LIMIT`]; no lines outside an interaction, e.g. `hooks test`, `hookbox tool`):
//! [`transcript_preamble`] writes it in the sandbox's `/dev/shm` (or `/tmp`) under an unguessable
//! name, opens it
//! as descriptor 8 of the handler's shell and deletes the name before the handler starts, so the
//! file is the handler's own copy, readable by it and its children at that path, gone with them,
//! and never seen by another call or interaction. An `http` handler gets `null` (no file exists
//! where it runs). A post event's `tool_response` carries the tool's output as the vendor
//! shapes it (when the caller gave it, [`crate::engine::VendorExtras`]) and its error, bounded
//! by [`TOOL_RESPONSE_LIMIT`]: Claude Code, Codex, Cursor and Copilot's snake_case input get
//! Claude's shapes (`Bash`: `{stdout, stderr, interrupted, isImage}`; other tools: the tool's
//! own output object), Gemini CLI `{llmContent, returnDisplay}` with the text the model reads,
//! Copilot's own input `toolResult.textResultForLlm`, Cursor's `afterShellExecution` `output`.
//! Cursor's `beforeReadFile` `content` is the whole file's text, bounded the same way (empty
//! when the file cannot be read as text: the tool will say why).

use std::hash::{Hash, Hasher};

use hookbox_protocol::HookEvent;
use serde_json::{Value, json};

use super::events::PayloadStyle;
use super::tools::VendorCall;
use super::{Dialect, PROJECT_DIR};

/// What the engine knows about the moment a vendor handler runs.
#[derive(Debug, Clone, Default)]
pub struct Moment<'a> {
    pub environment_id: &'a str,
    /// The interaction's id, when known.
    pub interaction_id: Option<&'a str>,
    /// The call's hookbox arguments serialised (for a stable `tool_use_id`).
    pub call_key: &'a str,
    /// post: the tool's error.
    pub error: Option<&'a str>,
    /// pre_interaction: the user's input text; post_interaction: the model's final text.
    pub prompt: Option<&'a str>,
    pub output: Option<&'a str>,
    pub status: Option<&'a str>,
    /// post: the tool's output as hookbox's JSON.
    pub tool_output: Option<&'a Value>,
    /// pre `view_file`: the file's text (Cursor's `beforeReadFile`).
    pub file_content: Option<&'a str>,
}

/// Where a command handler reads the interaction's transcript: its inherited descriptor 8.
pub const TRANSCRIPT_PATH: &str = "/proc/self/fd/8";

/// The most bytes of transcript a handler is given (newest lines kept): it travels inside the
/// handler's shell line, which must stay under the kernel's 128 KiB limit for one argument.
pub const TRANSCRIPT_LIMIT: usize = 64 * 1024;

/// The shell lines that put `jsonl` (the interaction's steps, one JSON object a line) where
/// [`TRANSCRIPT_PATH`] finds it: written under an unguessable name in the sandbox's `/dev/shm`,
/// else `/tmp` (owner-only, never over an existing file), opened as descriptor 8, its name
/// deleted. Only lines that are JSON
/// objects are kept (a line starts with `{`, so none can end the here-document early), the
/// newest that fit in [`TRANSCRIPT_LIMIT`]. A sandbox where neither can be written fails the
/// handler (exit 1, saying why), as a guard that cannot read its input must.
pub fn transcript_preamble(jsonl: &[u8]) -> String {
    let text = String::from_utf8_lossy(jsonl);
    let mut kept: Vec<&str> = Vec::new();
    let mut total = 0usize;
    for line in text.lines().rev() {
        if !line.starts_with('{') || line.contains('\0') {
            continue;
        }
        if total + line.len() + 1 > TRANSCRIPT_LIMIT {
            break;
        }
        total += line.len() + 1;
        kept.push(line);
    }
    let tag: u128 = rand::random();
    let mut body = String::with_capacity(total);
    for line in kept.iter().rev() {
        body.push_str(line);
        body.push('\n');
    }
    format!(
        "hookbox_transcript=\n\
         for hookbox_dir in /dev/shm /tmp; do\n\
         if (umask 077; set -C; cat >\"$hookbox_dir/.hookbox-transcript-{tag:032x}\") 2>/dev/null <<'HOOKBOX_TRANSCRIPT_{tag:032x}'\n\
         {body}HOOKBOX_TRANSCRIPT_{tag:032x}\n\
         then hookbox_transcript=\"$hookbox_dir/.hookbox-transcript-{tag:032x}\"; break; fi\n\
         rm -f \"$hookbox_dir/.hookbox-transcript-{tag:032x}\" 2>/dev/null\n\
         done\n\
         [ -n \"$hookbox_transcript\" ] || {{ echo 'hookbox: cannot write the transcript file (/dev/shm and /tmp are read-only)' >&2; exit 1; }}\n\
         exec 8<\"$hookbox_transcript\" || exit 1\n\
         rm -f \"$hookbox_transcript\"; unset hookbox_transcript hookbox_dir\n"
    )
}

/// The most bytes of a tool's output a post event's input carries (each text is cut at a
/// character boundary; an output object larger than this is given as its cut JSON text).
pub const TOOL_RESPONSE_LIMIT: usize = 64 * 1024;

/// `text` cut to at most `limit` bytes at a character boundary.
fn bounded(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// The text the model reads of a tool's output: `code_execution`'s stdout (and stderr), a
/// remote tool's text, a file tool's object as JSON; bounded.
fn output_text(output: &Value) -> String {
    let text = match output {
        Value::String(s) => s.clone(),
        Value::Object(o) if o.contains_key("stdout") => {
            let out = o.get("stdout").and_then(Value::as_str).unwrap_or_default();
            let err = o.get("stderr").and_then(Value::as_str).unwrap_or_default();
            match err.is_empty() {
                true => out.to_owned(),
                false => format!("{out}{err}"),
            }
        }
        other => other.to_string(),
    };
    bounded(&text, TOOL_RESPONSE_LIMIT)
}

/// Claude Code's `tool_response` for `tool_name`, made from hookbox's output (bounded).
fn claude_response(tool_name: &str, output: &Value) -> Value {
    match output {
        Value::Object(o) if tool_name == "Bash" || o.contains_key("stdout") => {
            let text = |key: &str| {
                bounded(
                    o.get(key).and_then(Value::as_str).unwrap_or_default(),
                    TOOL_RESPONSE_LIMIT / 2,
                )
            };
            json!({
                "stdout": text("stdout"),
                "stderr": text("stderr"),
                "interrupted": o.get("exit_code").is_some_and(Value::is_null),
                "isImage": false,
            })
        }
        other if other.to_string().len() > TOOL_RESPONSE_LIMIT => {
            json!(bounded(&other.to_string(), TOOL_RESPONSE_LIMIT))
        }
        other => other.clone(),
    }
}

fn tool_use_id(m: &Moment<'_>) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    m.environment_id.hash(&mut h);
    m.call_key.hash(&mut h);
    format!("hookbox_{:016x}", h.finish())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The payload for `dialect`'s event `event_name` (as written), at hookbox `event`, for the
/// vendor call `call` (tool events) or none (interaction events).
pub fn write(
    dialect: Dialect,
    style: PayloadStyle,
    event_name: &str,
    event: HookEvent,
    call: Option<&VendorCall>,
    m: &Moment<'_>,
) -> Value {
    let session = m.interaction_id.unwrap_or(m.environment_id);
    let mut p = match (dialect, style) {
        (Dialect::Copilot, PayloadStyle::Native) => json!({
            "sessionId": session,
            "timestamp": now_ms(),
            "cwd": PROJECT_DIR,
        }),
        (Dialect::Cursor, _) => json!({
            "transcript_path": TRANSCRIPT_PATH,
            "conversation_id": session,
            "generation_id": session,
            "model": "hookbox",
            "hook_event_name": event_name,
            "cursor_version": "hookbox",
            "workspace_roots": [PROJECT_DIR],
            "user_email": null,
        }),
        _ => json!({
            "session_id": session,
            "transcript_path": TRANSCRIPT_PATH,
            "cwd": PROJECT_DIR,
            "hook_event_name": event_name,
        }),
    };
    match dialect {
        Dialect::ClaudeCode | Dialect::Codex => {
            p["permission_mode"] = json!("bypassPermissions");
        }
        Dialect::GeminiCli => {
            p["timestamp"] = json!(iso_now());
        }
        Dialect::Copilot if style == PayloadStyle::SnakeCase => {
            p["timestamp"] = json!(iso_now());
        }
        _ => {}
    }
    if dialect == Dialect::Codex {
        p["turn_id"] = json!(session);
        p["model"] = json!("hookbox");
    }
    let copilot_native = dialect == Dialect::Copilot && style == PayloadStyle::Native;
    if let Some(call) = call {
        match (dialect, event_name) {
            (Dialect::Cursor, "beforeShellExecution" | "afterShellExecution") => {
                p["command"] = call.tool_input.get("command").cloned().unwrap_or_default();
                p["cwd"] = json!(PROJECT_DIR);
                p["sandbox"] = json!(true);
            }
            (Dialect::Cursor, "beforeReadFile") => {
                p["file_path"] = call
                    .tool_input
                    .get("file_path")
                    .cloned()
                    .unwrap_or_default();
                p["content"] = json!(bounded(
                    m.file_content.unwrap_or_default(),
                    TOOL_RESPONSE_LIMIT
                ));
                p["attachments"] = json!([]);
            }
            (Dialect::Cursor, "afterFileEdit") => {
                p["file_path"] = call
                    .tool_input
                    .get("file_path")
                    .cloned()
                    .unwrap_or_default();
                let edit = match (
                    call.tool_input.get("old_string"),
                    call.tool_input.get("new_string"),
                ) {
                    (Some(o), Some(n)) => json!({"old_string": o, "new_string": n}),
                    _ => {
                        json!({"old_string": "", "new_string": call.tool_input.get("content").cloned().unwrap_or_default()})
                    }
                };
                p["edits"] = json!([edit]);
            }
            (Dialect::Cursor, "beforeMCPExecution" | "afterMCPExecution") => {
                p["tool_name"] = json!(call.tool_name.trim_start_matches("MCP:"));
                p["tool_input"] = json!(call.tool_input.to_string());
            }
            _ if copilot_native => {
                p["toolName"] = json!(call.tool_name);
                p["toolArgs"] = call.tool_input.clone();
            }
            _ => {
                p["tool_name"] = json!(call.tool_name);
                p["tool_input"] = call.tool_input.clone();
                if dialect != Dialect::GeminiCli {
                    p["tool_use_id"] = json!(tool_use_id(m));
                }
                if dialect == Dialect::Cursor {
                    p["cwd"] = json!(PROJECT_DIR);
                }
            }
        }
        if event == HookEvent::PostToolExecution {
            let error = m.error.map(str::to_owned);
            let text = m.tool_output.map(output_text);
            match dialect {
                Dialect::GeminiCli => {
                    let shown = text.clone().unwrap_or_default();
                    let mut resp = json!({"llmContent": shown, "returnDisplay": shown});
                    if let Some(e) = &error {
                        resp["error"] = json!(e);
                    }
                    p["tool_response"] = resp;
                }
                _ if copilot_native => {
                    let shown = match (&error, &text) {
                        (Some(e), _) => e.clone(),
                        (None, Some(t)) => t.clone(),
                        (None, None) => String::new(),
                    };
                    p["toolResult"] = json!({"resultType": if error.is_some() { "failure" } else { "success" }, "textResultForLlm": shown});
                }
                _ => {
                    // The error rides beside the output; Bash's stderr already carries it.
                    let mut resp = match m.tool_output {
                        Some(out) => claude_response(&call.tool_name, out),
                        None => json!({}),
                    };
                    if let (Some(e), Some(obj)) = (&error, resp.as_object_mut())
                        && !obj.contains_key("stdout")
                    {
                        obj.insert("error".into(), json!(e));
                    }
                    p["tool_response"] = resp;
                    if dialect == Dialect::Cursor && event_name == "afterShellExecution" {
                        p["output"] = json!(text.clone().unwrap_or_default());
                    }
                    if let Some(e) = error
                        && matches!(event_name, "PostToolUseFailure" | "postToolUseFailure")
                    {
                        p["error"] = json!(e);
                        p["is_interrupt"] = json!(false);
                    }
                }
            }
        }
    } else {
        match event {
            HookEvent::PreInteraction => {
                p["prompt"] = json!(m.prompt.unwrap_or_default());
            }
            HookEvent::PostInteraction => match dialect {
                Dialect::GeminiCli => {
                    p["prompt"] = json!("");
                    p["prompt_response"] = json!(m.output.unwrap_or_default());
                    p["stop_hook_active"] = json!(false);
                }
                Dialect::Cursor => {
                    p["status"] = json!(m.status.unwrap_or("completed"));
                    p["loop_count"] = json!(0);
                }
                _ => {
                    p["stop_hook_active"] = json!(false);
                    p["last_assistant_message"] = json!(m.output.unwrap_or_default());
                }
            },
            _ => {}
        }
    }
    p
}

/// An ISO 8601 UTC timestamp with milliseconds.
fn iso_now() -> String {
    let ms = now_ms();
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, mo, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The environment variables `dialect`'s CLI sets for a hook, with sandbox values.
pub fn env(dialect: Dialect, session: &str) -> Vec<(&'static str, String)> {
    let dir = PROJECT_DIR.to_owned();
    match dialect {
        Dialect::ClaudeCode | Dialect::Codex => vec![("CLAUDE_PROJECT_DIR", dir)],
        Dialect::GeminiCli => vec![
            ("GEMINI_PROJECT_DIR", dir.clone()),
            ("GEMINI_CWD", dir.clone()),
            ("GEMINI_SESSION_ID", session.to_owned()),
            ("CLAUDE_PROJECT_DIR", dir),
        ],
        Dialect::Cursor => vec![
            ("CURSOR_PROJECT_DIR", dir.clone()),
            ("CURSOR_VERSION", "hookbox".to_owned()),
            ("CLAUDE_PROJECT_DIR", dir),
        ],
        Dialect::Copilot | Dialect::Agents => Vec::new(),
    }
}

/// Gemini CLI substitutes its variables into the command text before running it
/// (`$GEMINI_PROJECT_DIR` and `${GEMINI_PROJECT_DIR}`, and the others of [`env()`]).
pub fn substitute(dialect: Dialect, command: &str, vars: &[(&'static str, String)]) -> String {
    if dialect != Dialect::GeminiCli {
        return command.to_owned();
    }
    let mut out = command.to_owned();
    for (name, value) in vars {
        out = out.replace(&format!("${{{name}}}"), value);
        // `$NAME` only where the next character cannot continue the name.
        let plain = format!("${name}");
        let mut result = String::with_capacity(out.len());
        let mut rest = out.as_str();
        while let Some(i) = rest.find(&plain) {
            let after = &rest[i + plain.len()..];
            result.push_str(&rest[..i]);
            if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                result.push_str(&plain);
            } else {
                result.push_str(value);
            }
            rest = after;
        }
        result.push_str(rest);
        out = result;
    }
    out
}

/// The shell line that runs `command` with `vars` exported (values single-quoted) and, for
/// Copilot's `cwd`, from that directory under the project.
pub fn shell_line(command: &str, vars: &[(String, String)], cwd: Option<&str>) -> String {
    let mut line = String::new();
    for (name, value) in vars {
        line.push_str(&format!(
            "export {name}={}\n",
            super::tools::shell_quote(value)
        ));
    }
    if let Some(dir) = cwd {
        let dir = super::absolute_path(dir);
        line.push_str(&format!(
            "cd {} || exit 1\n",
            super::tools::shell_quote(&dir)
        ));
    }
    line.push_str(command);
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> VendorCall {
        VendorCall {
            tool_name: "Bash".into(),
            tool_input: json!({"command": "ls"}),
            chunk: None,
        }
    }

    #[test]
    fn claude_shape_has_the_common_fields() {
        let m = Moment {
            environment_id: "env_1",
            call_key: "k",
            ..Moment::default()
        };
        let p = write(
            Dialect::ClaudeCode,
            PayloadStyle::Native,
            "PreToolUse",
            HookEvent::PreToolExecution,
            Some(&call()),
            &m,
        );
        for key in [
            "session_id",
            "transcript_path",
            "cwd",
            "permission_mode",
            "hook_event_name",
            "tool_name",
            "tool_input",
            "tool_use_id",
        ] {
            assert!(p.get(key).is_some(), "{key}");
        }
        assert_eq!(p["cwd"], json!("/workspace"));
        let again = write(
            Dialect::ClaudeCode,
            PayloadStyle::Native,
            "PreToolUse",
            HookEvent::PreToolExecution,
            Some(&call()),
            &m,
        );
        assert_eq!(p["tool_use_id"], again["tool_use_id"]);
    }

    #[test]
    fn copilot_native_and_snake_case() {
        let m = Moment {
            environment_id: "env_1",
            ..Moment::default()
        };
        let p = write(
            Dialect::Copilot,
            PayloadStyle::Native,
            "preToolUse",
            HookEvent::PreToolExecution,
            Some(&call()),
            &m,
        );
        assert_eq!(p["toolName"], json!("Bash"));
        assert!(p["timestamp"].is_u64());
        let p = write(
            Dialect::Copilot,
            PayloadStyle::SnakeCase,
            "PreToolUse",
            HookEvent::PreToolExecution,
            Some(&call()),
            &m,
        );
        assert_eq!(p["tool_name"], json!("Bash"));
        assert_eq!(p["hook_event_name"], json!("PreToolUse"));
    }

    #[test]
    fn gemini_substitutes_its_variables() {
        let vars = env(Dialect::GeminiCli, "s");
        assert_eq!(
            substitute(
                Dialect::GeminiCli,
                "sh $GEMINI_PROJECT_DIR/a ${GEMINI_CWD} $GEMINI_PROJECT_DIRX",
                &vars
            ),
            "sh /workspace/a /workspace $GEMINI_PROJECT_DIRX"
        );
        assert_eq!(
            substitute(Dialect::ClaudeCode, "$CLAUDE_PROJECT_DIR", &vars),
            "$CLAUDE_PROJECT_DIR"
        );
        assert_eq!(
            shell_line("a", &[("X".into(), "it's".into())], Some("scripts")),
            "export X='it'\\''s'\ncd '/workspace/scripts' || exit 1\na"
        );
        assert!(iso_now().ends_with('Z') && iso_now().len() == 24);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_427), (2025, 12, 5));
    }
}
