//! hookbox's six tools (and remote MCP tools) ↔ each vendor's tool names and `tool_input`, both
//! directions. The decisions behind the non-obvious rows are in the module doc of [`super`].
//!
//! | hookbox | Claude Code | Codex | Gemini CLI | Cursor | Copilot |
//! |---|---|---|---|---|---|
//! | `code_execution` | `Bash {command}` | `Bash {command}` | `run_shell_command {command}` | `Shell {command, working_directory}` | `bash {command}` |
//! | `view_file` | `Read {file_path, offset, limit}` | `Read` | `read_file {file_path, start_line, end_line}` | `Read {file_path}` | `view {path, view_range}` |
//! | `write_to_file` | `Write {file_path, content}` | `apply_patch` (Add File) | `write_file {file_path, content}` | `Write {file_path, content}` | `create {path, file_text}` |
//! | `replace_file_content` | `Edit {file_path, old_string, new_string, replace_all}` per chunk | `apply_patch` (Update File) | `replace {file_path, old_string, new_string}` per chunk | `Write {file_path, old_string, new_string}` per chunk | `edit {path, old_str, new_str}` per chunk |
//! | `list_dir` | `LS {path}` | `LS {path}` | `list_directory {dir_path}` | `LS {path}` | `view {path}` |
//! | `delete_file` | `Bash rm -- 'PATH'` | `apply_patch` (Delete File) | `run_shell_command rm -- 'PATH'` | `Delete {file_path}` | `bash rm -- 'PATH'` |
//! | `mcp:<s>/<t>` | `mcp__<s>__<t>` | `mcp__<s>__<t>` | `mcp_<s>_<t>` | `MCP:<t>` | `<s>/<t>` |

use hookbox_protocol::ToolName;
use serde_json::{Map, Value, json};

use super::patch::{self, FileOp};
use super::{Dialect, PROJECT_DIR, absolute_path};
use crate::matcher::MCP_PREFIX;

/// A hookbox tool call as a vendor's hooks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorCall {
    pub tool_name: String,
    pub tool_input: Value,
    /// For a `replace_file_content` shown as one vendor call per chunk: which chunk.
    pub chunk: Option<usize>,
}

/// A vendor call read as a hookbox call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookboxCall {
    /// One of the six tool names, or `mcp:<server>/<tool>`.
    pub tool: String,
    pub args: Value,
}

/// Why a call could not be mapped (either direction). Its text is the reason a denied call
/// gives the model and the person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("{dialect} tool `{tool}` has no hookbox equivalent")]
    NoHookboxTool { dialect: Dialect, tool: String },
    #[error("{tool} arguments cannot be read: {reason}")]
    BadArgs { tool: String, reason: String },
    #[error("the hook's rewrite cannot be expressed as hookbox's {tool}: {reason}")]
    Unmappable { tool: String, reason: String },
}

fn bad(tool: &str, reason: impl Into<String>) -> MappingError {
    MappingError::BadArgs {
        tool: tool.to_owned(),
        reason: reason.into(),
    }
}

fn str_arg<'a>(tool: &str, args: &'a Value, key: &str) -> Result<&'a str, MappingError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(tool, format!("`{key}` must be a string")))
}

fn opt_u64(args: &Value, key: &str) -> Option<u64> {
    args.get(key).and_then(Value::as_u64)
}

/// hookbox's replacement chunks of `replace_file_content` args: `(old, new)` each.
fn chunks(args: &Value) -> Result<Vec<(String, String)>, MappingError> {
    let tool = ToolName::ReplaceFileContent.as_str();
    if let Some(list) = args.get("chunks") {
        let Value::Array(list) = list else {
            return Err(bad(tool, "`chunks` must be an array"));
        };
        return list
            .iter()
            .map(|c| {
                Ok((
                    str_arg(tool, c, "old_content")?.to_owned(),
                    str_arg(tool, c, "new_content")?.to_owned(),
                ))
            })
            .collect();
    }
    Ok(vec![(
        str_arg(tool, args, "old_content")?.to_owned(),
        str_arg(tool, args, "new_content")?.to_owned(),
    )])
}

/// `replace_file_content` args for `path` and `chunks`: the one-chunk form for one chunk.
fn replace_args(path: &str, chunks: &[(String, String)]) -> Value {
    match chunks {
        [(old, new)] => json!({"path": path, "old_content": old, "new_content": new}),
        _ => json!({
            "path": path,
            "chunks": chunks
                .iter()
                .map(|(o, n)| json!({"old_content": o, "new_content": n}))
                .collect::<Vec<_>>(),
        }),
    }
}

/// The heredoc delimiter for Python code shown as a shell command, and its numbered variants
/// when the code contains the plain one as a line.
const PY_DELIM: &str = "HOOKBOX_PY";

/// Python code as the shell command that runs it: `python3 - <<'HOOKBOX_PY'` … `HOOKBOX_PY`.
pub fn python_as_shell(code: &str) -> String {
    let mut delim = PY_DELIM.to_owned();
    let mut n = 0u32;
    while code.lines().any(|l| l == delim) {
        n += 1;
        delim = format!("{PY_DELIM}_{n}");
    }
    let newline = if code.ends_with('\n') || code.is_empty() {
        ""
    } else {
        "\n"
    };
    format!("python3 - <<'{delim}'\n{code}{newline}{delim}")
}

/// The Python code of a command written by [`python_as_shell`], if it is one.
pub fn shell_as_python(command: &str) -> Option<String> {
    let (head, rest) = command.split_once('\n')?;
    let delim = head.strip_prefix("python3 - <<'")?.strip_suffix('\'')?;
    let suffix = delim.strip_prefix(PY_DELIM)?;
    if !(suffix.is_empty()
        || suffix
            .strip_prefix('_')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
    {
        return None;
    }
    let body = rest.strip_suffix(delim)?;
    if !(body.is_empty() || body.ends_with('\n')) {
        return None;
    }
    if body.lines().any(|l| l == delim) {
        return None;
    }
    Some(body.to_owned())
}

/// `path` quoted for `sh` (single quotes, `'` written as `'\''`).
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The command a deletion is shown as where a vendor has no delete tool.
pub fn delete_as_shell(path: &str) -> String {
    format!("rm -- {}", shell_quote(path))
}

/// The path of a command written by [`delete_as_shell`] (one single-quoted operand), if it is
/// one.
pub fn shell_as_delete(command: &str) -> Option<String> {
    let quoted = command.trim().strip_prefix("rm -- ")?;
    let inner = quoted.strip_prefix('\'')?.strip_suffix('\'')?;
    let path = inner.replace(r"'\''", "'");
    // What remains must not leave the quotes: no other `'` than the escaped ones.
    (!path.is_empty() && shell_quote(&path) == quoted).then_some(path)
}

/// A remote MCP tool's hookbox name `mcp:<server>/<tool>` as the vendor names it.
fn mcp_to_vendor(dialect: Dialect, name: &str) -> String {
    let rest = name.strip_prefix(MCP_PREFIX).unwrap_or(name);
    let (server, tool) = rest.split_once('/').unwrap_or(("", rest));
    match dialect {
        Dialect::Agents => name.to_owned(),
        Dialect::ClaudeCode | Dialect::Codex => format!("mcp__{server}__{tool}"),
        Dialect::GeminiCli => format!("mcp_{server}_{tool}"),
        Dialect::Cursor => format!("MCP:{tool}"),
        Dialect::Copilot => format!("{server}/{tool}"),
    }
}

/// The vendor's MCP tool name read as hookbox's `mcp:<server>/<tool>`; Gemini's
/// `mcp_<s>_<t>` is split at the first `_` after the prefix (server names with `_` are
/// ambiguous there), Cursor's `MCP:<t>` names no server (`mcp_server_name`).
fn mcp_from_vendor(dialect: Dialect, name: &str, server_hint: Option<&str>) -> Option<String> {
    let (server, tool) = match dialect {
        Dialect::Agents => return name.starts_with(MCP_PREFIX).then(|| name.to_owned()),
        Dialect::ClaudeCode | Dialect::Codex => name.strip_prefix("mcp__")?.split_once("__")?,
        Dialect::GeminiCli => name.strip_prefix("mcp_")?.split_once('_')?,
        Dialect::Cursor => (server_hint?, name.strip_prefix("MCP:")?),
        Dialect::Copilot => return None,
    };
    (!server.is_empty() && !tool.is_empty()).then(|| format!("{MCP_PREFIX}{server}/{tool}"))
}

fn one(tool_name: &str, tool_input: Value) -> Vec<VendorCall> {
    vec![VendorCall {
        tool_name: tool_name.to_owned(),
        tool_input,
        chunk: None,
    }]
}

fn shell(dialect: Dialect, command: String) -> Vec<VendorCall> {
    match dialect {
        Dialect::ClaudeCode | Dialect::Codex | Dialect::Agents => {
            one("Bash", json!({"command": command}))
        }
        Dialect::GeminiCli => one("run_shell_command", json!({"command": command})),
        Dialect::Cursor => one(
            "Shell",
            json!({"command": command, "working_directory": PROJECT_DIR}),
        ),
        Dialect::Copilot => one("bash", json!({"command": command})),
    }
}

/// What `dialect`'s hooks see for the hookbox call `tool` (a built-in name or
/// `mcp:<server>/<tool>`) with `args`: usually one vendor call, one per chunk for a
/// `replace_file_content` with several chunks (except Codex: one patch). For
/// [`Dialect::Agents`], the call itself.
pub fn to_vendor(
    dialect: Dialect,
    tool: &str,
    args: &Value,
) -> Result<Vec<VendorCall>, MappingError> {
    if dialect == Dialect::Agents {
        return Ok(one(tool, args.clone()));
    }
    if tool.starts_with(MCP_PREFIX) {
        return Ok(one(&mcp_to_vendor(dialect, tool), args.clone()));
    }
    let name: ToolName = tool.parse().map_err(|_| bad(tool, "not a hookbox tool"))?;
    let path = || str_arg(tool, args, "path").map(absolute_path);
    Ok(match name {
        ToolName::CodeExecution => {
            let code = str_arg(tool, args, "code")?;
            let command = match args.get("language").and_then(Value::as_str) {
                Some("python") => python_as_shell(code),
                _ => code.to_owned(),
            };
            shell(dialect, command)
        }
        ToolName::ViewFile => {
            let file_path = path()?;
            let start = opt_u64(args, "start_line");
            let end = opt_u64(args, "end_line");
            match dialect {
                Dialect::ClaudeCode | Dialect::Codex | Dialect::Agents => {
                    let mut input = json!({"file_path": file_path});
                    if let Some(s) = start {
                        input["offset"] = json!(s);
                    }
                    if let Some(e) = end {
                        input["limit"] = json!(e.saturating_sub(start.unwrap_or(1)) + 1);
                    }
                    one("Read", input)
                }
                Dialect::GeminiCli => {
                    let mut input = json!({"file_path": file_path});
                    if let Some(s) = start {
                        input["start_line"] = json!(s);
                    }
                    if let Some(e) = end {
                        input["end_line"] = json!(e);
                    }
                    one("read_file", input)
                }
                Dialect::Cursor => one("Read", json!({"file_path": file_path})),
                Dialect::Copilot => {
                    let mut input = json!({"path": file_path});
                    if start.is_some() || end.is_some() {
                        let e = end.map_or(json!(-1), |e| json!(e));
                        input["view_range"] = json!([start.unwrap_or(1), e]);
                    }
                    one("view", input)
                }
            }
        }
        ToolName::WriteToFile => {
            let file_path = path()?;
            let content = str_arg(tool, args, "content")?;
            match dialect {
                Dialect::ClaudeCode | Dialect::Cursor | Dialect::Agents => {
                    one("Write", json!({"file_path": file_path, "content": content}))
                }
                Dialect::Codex => one(
                    "apply_patch",
                    json!({"command": patch::write(&FileOp::Add { path: file_path, content: content.to_owned() })}),
                ),
                Dialect::GeminiCli => one(
                    "write_file",
                    json!({"file_path": file_path, "content": content}),
                ),
                Dialect::Copilot => one("create", json!({"path": file_path, "file_text": content})),
            }
        }
        ToolName::ReplaceFileContent => {
            let file_path = path()?;
            let chunks = chunks(args)?;
            if dialect == Dialect::Codex {
                let text = patch::write(&FileOp::Update {
                    path: file_path,
                    move_to: None,
                    chunks,
                });
                return Ok(one("apply_patch", json!({"command": text})));
            }
            let several = chunks.len() > 1;
            chunks
                .into_iter()
                .enumerate()
                .map(|(i, (old, new))| {
                    let (tool_name, tool_input) = match dialect {
                        Dialect::GeminiCli => (
                            "replace",
                            json!({"file_path": file_path, "old_string": old, "new_string": new}),
                        ),
                        Dialect::Cursor => (
                            "Write",
                            json!({"file_path": file_path, "old_string": old, "new_string": new}),
                        ),
                        Dialect::Copilot => (
                            "edit",
                            json!({"path": file_path, "old_str": old, "new_str": new}),
                        ),
                        Dialect::ClaudeCode | Dialect::Codex | Dialect::Agents => (
                            "Edit",
                            json!({"file_path": file_path, "old_string": old, "new_string": new, "replace_all": false}),
                        ),
                    };
                    VendorCall {
                        tool_name: tool_name.to_owned(),
                        tool_input,
                        chunk: several.then_some(i),
                    }
                })
                .collect()
        }
        ToolName::ListDir => {
            let dir = path()?;
            match dialect {
                Dialect::GeminiCli => one("list_directory", json!({"dir_path": dir})),
                Dialect::Copilot => one("view", json!({"path": dir})),
                Dialect::ClaudeCode | Dialect::Codex | Dialect::Cursor | Dialect::Agents => {
                    one("LS", json!({"path": dir}))
                }
            }
        }
        ToolName::DeleteFile => {
            let file_path = path()?;
            match dialect {
                Dialect::Cursor => one("Delete", json!({"file_path": file_path})),
                Dialect::Codex => one(
                    "apply_patch",
                    json!({"command": patch::write(&FileOp::Delete { path: file_path })}),
                ),
                Dialect::ClaudeCode | Dialect::GeminiCli | Dialect::Copilot | Dialect::Agents => {
                    shell(dialect, delete_as_shell(&file_path))
                }
            }
        }
    })
}

/// Whether a vendor matcher written for `pattern_name` should also match the vendor tool
/// `tool_name`: Codex's own rule that `Edit` and `Write` matchers match `apply_patch`.
pub fn matcher_aliases(dialect: Dialect, tool_name: &str) -> &'static [&'static str] {
    match (dialect, tool_name) {
        (Dialect::Codex, "apply_patch") => &["Edit", "Write"],
        _ => &[],
    }
}

/// A vendor CLI's tool call read as hookbox calls (what `hooks gate` evaluates). Usually one;
/// a Codex patch touching several files gives one per file. `mcp_server` is Cursor's
/// `mcp_server_name` (its tool names carry no server). Vendor tools with no hookbox counterpart
/// (`Glob`, `Grep`, `WebFetch`, `Task`, …) are [`MappingError::NoHookboxTool`].
pub fn from_vendor(
    dialect: Dialect,
    tool_name: &str,
    tool_input: &Value,
    mcp_server: Option<&str>,
) -> Result<Vec<HookboxCall>, MappingError> {
    let call = |tool: ToolName, args: Value| HookboxCall {
        tool: tool.as_str().to_owned(),
        args,
    };
    let none = || MappingError::NoHookboxTool {
        dialect,
        tool: tool_name.to_owned(),
    };
    if dialect == Dialect::Agents {
        return Ok(vec![HookboxCall {
            tool: tool_name.to_owned(),
            args: tool_input.clone(),
        }]);
    }
    if let Some(name) = mcp_from_vendor(dialect, tool_name, mcp_server) {
        return Ok(vec![HookboxCall {
            tool: name,
            args: tool_input.clone(),
        }]);
    }
    let input = tool_input;
    let s = |key: &str| str_arg(tool_name, input, key);
    let shell_call = |command: &str| match shell_as_python(command) {
        Some(code) => call(
            ToolName::CodeExecution,
            json!({"code": code, "language": "python"}),
        ),
        None => call(
            ToolName::CodeExecution,
            json!({"code": command, "language": "bash"}),
        ),
    };
    let calls = match (dialect, tool_name) {
        (Dialect::ClaudeCode | Dialect::Codex, "Bash")
        | (Dialect::GeminiCli, "run_shell_command")
        | (Dialect::Cursor, "Shell")
        | (Dialect::Copilot, "bash") => vec![shell_call(s("command")?)],
        (Dialect::Codex, "apply_patch") => {
            let ops = patch::parse(s("command")?).map_err(|e| bad(tool_name, e.to_string()))?;
            ops.into_iter()
                .map(|op| patch_op_call(tool_name, op))
                .collect::<Result<_, _>>()?
        }
        (Dialect::ClaudeCode | Dialect::Codex | Dialect::Cursor, "Read") => {
            let mut args = json!({"path": s("file_path")?});
            if let Some(offset) = opt_u64(input, "offset") {
                args["start_line"] = json!(offset);
            }
            if let Some(limit) = opt_u64(input, "limit") {
                let start = opt_u64(input, "offset").unwrap_or(1);
                args["end_line"] = json!(start + limit.saturating_sub(1));
            }
            vec![call(ToolName::ViewFile, args)]
        }
        (Dialect::GeminiCli, "read_file") => {
            let mut args = json!({"path": s("file_path")?});
            for key in ["start_line", "end_line"] {
                if let Some(n) = opt_u64(input, key) {
                    args[key] = json!(n);
                }
            }
            vec![call(ToolName::ViewFile, args)]
        }
        // Copilot's `view` also lists directories; without the filesystem it reads as
        // `view_file` (a policy on `view_file|list_dir` sees both).
        (Dialect::Copilot, "view") => {
            let path = s("path")?;
            let mut args = json!({"path": path});
            if let Some(Value::Array(range)) = input.get("view_range") {
                if let Some(start) = range.first().and_then(Value::as_u64) {
                    args["start_line"] = json!(start);
                }
                if let Some(end) = range.get(1).and_then(Value::as_u64) {
                    args["end_line"] = json!(end);
                }
            }
            vec![call(ToolName::ViewFile, args)]
        }
        (Dialect::ClaudeCode | Dialect::GeminiCli, "Write" | "write_file")
        | (Dialect::Cursor, "Write")
            if input.get("content").is_some() =>
        {
            vec![call(
                ToolName::WriteToFile,
                json!({"path": s("file_path")?, "content": s("content")?}),
            )]
        }
        (Dialect::Copilot, "create") => vec![call(
            ToolName::WriteToFile,
            json!({"path": s("path")?, "content": s("file_text")?}),
        )],
        (Dialect::ClaudeCode | Dialect::Codex, "Edit")
        | (Dialect::GeminiCli, "replace")
        | (Dialect::Cursor, "Write") => vec![call(
            ToolName::ReplaceFileContent,
            replace_args(
                s("file_path")?,
                &[(s("old_string")?.to_owned(), s("new_string")?.to_owned())],
            ),
        )],
        (Dialect::ClaudeCode, "MultiEdit") => {
            let Some(Value::Array(edits)) = input.get("edits") else {
                return Err(bad(tool_name, "`edits` must be an array"));
            };
            let chunks = edits
                .iter()
                .map(|e| {
                    Ok((
                        str_arg(tool_name, e, "old_string")?.to_owned(),
                        str_arg(tool_name, e, "new_string")?.to_owned(),
                    ))
                })
                .collect::<Result<Vec<_>, MappingError>>()?;
            vec![call(
                ToolName::ReplaceFileContent,
                replace_args(s("file_path")?, &chunks),
            )]
        }
        (Dialect::Copilot, "edit") => vec![call(
            ToolName::ReplaceFileContent,
            replace_args(
                s("path")?,
                &[(s("old_str")?.to_owned(), s("new_str")?.to_owned())],
            ),
        )],
        (Dialect::ClaudeCode | Dialect::Codex | Dialect::Cursor, "LS") => {
            vec![call(ToolName::ListDir, json!({"path": s("path")?}))]
        }
        (Dialect::GeminiCli, "list_directory") => {
            vec![call(ToolName::ListDir, json!({"path": s("dir_path")?}))]
        }
        (Dialect::Cursor, "Delete") => {
            vec![call(ToolName::DeleteFile, json!({"path": s("file_path")?}))]
        }
        _ => return Err(none()),
    };
    Ok(calls)
}

fn patch_op_call(tool_name: &str, op: FileOp) -> Result<HookboxCall, MappingError> {
    let (tool, args) = match op {
        FileOp::Add { path, content } => (
            ToolName::WriteToFile,
            json!({"path": path, "content": content}),
        ),
        FileOp::Update {
            move_to: Some(_), ..
        } => {
            return Err(bad(
                tool_name,
                "the patch moves a file (`*** Move to:`), which hookbox's file tools cannot do",
            ));
        }
        FileOp::Update {
            path,
            move_to: None,
            chunks,
        } => {
            if chunks.is_empty() || chunks.iter().any(|(old, _)| old.is_empty()) {
                return Err(bad(tool_name, "an update hunk with no old lines"));
            }
            (ToolName::ReplaceFileContent, replace_args(&path, &chunks))
        }
        FileOp::Delete { path } => (ToolName::DeleteFile, json!({"path": path})),
    };
    Ok(HookboxCall {
        tool: tool.as_str().to_owned(),
        args,
    })
}

/// A hook's rewritten vendor input (`updated` is the whole new `tool_input`, after Gemini's
/// merge where that applies) mapped back onto hookbox's arguments for the call `tool`/`args`
/// that was shown as `shown`. An unchanged input gives the original arguments back unchanged
/// (so lossy presentations never alter a call nobody rewrote). `Err` says why the rewrite
/// cannot be expressed; the engine denies the call with that reason.
pub fn update_from_vendor(
    dialect: Dialect,
    tool: &str,
    args: &Value,
    shown: &VendorCall,
    updated: &Value,
) -> Result<Value, MappingError> {
    if *updated == shown.tool_input {
        return Ok(args.clone());
    }
    if dialect == Dialect::Agents || tool.starts_with(MCP_PREFIX) {
        return Ok(updated.clone());
    }
    let unmappable = |reason: String| MappingError::Unmappable {
        tool: tool.to_owned(),
        reason,
    };
    let mut calls = from_vendor(dialect, &shown.tool_name, updated, None)
        .map_err(|e| unmappable(e.to_string()))?;
    let back = match calls.len() {
        1 => calls.remove(0),
        n => return Err(unmappable(format!("it touches {n} files, the call one"))),
    };
    let name: ToolName = tool
        .parse()
        .map_err(|_| unmappable("unknown tool".into()))?;
    let original_path = args.get("path").and_then(Value::as_str).map(absolute_path);
    match name {
        ToolName::CodeExecution if back.tool == ToolName::CodeExecution.as_str() => Ok(back.args),
        ToolName::DeleteFile => {
            let path = match back.tool.as_str() {
                "delete_file" => back.args.get("path").cloned(),
                "code_execution" => back
                    .args
                    .get("code")
                    .and_then(Value::as_str)
                    .and_then(shell_as_delete)
                    .map(Value::String),
                _ => None,
            };
            path.map(|p| json!({"path": p})).ok_or_else(|| {
                unmappable("only a deletion of one file (`rm -- 'PATH'`) can replace it".into())
            })
        }
        ToolName::ReplaceFileContent if back.tool == name.as_str() => {
            let Some(i) = shown.chunk else {
                return Ok(back.args);
            };
            let new_path = back
                .args
                .get("path")
                .and_then(Value::as_str)
                .map(absolute_path);
            if new_path != original_path {
                return Err(unmappable(
                    "it moves one chunk of a multi-chunk edit to another file".into(),
                ));
            }
            let mut all = chunks(args)?;
            let mine = chunks(&back.args)?;
            match (all.get_mut(i), mine.into_iter().next()) {
                (Some(slot), Some(new)) => *slot = new,
                _ => return Err(unmappable("the chunk it rewrote does not exist".into())),
            }
            Ok(replace_args(
                original_path.as_deref().unwrap_or_default(),
                &all,
            ))
        }
        ToolName::ViewFile | ToolName::WriteToFile | ToolName::ListDir
            if back.tool == name.as_str() =>
        {
            Ok(back.args)
        }
        // Copilot's `view` is both; a listing shown as `view` stays a listing.
        ToolName::ListDir if back.tool == ToolName::ViewFile.as_str() => {
            Ok(json!({"path": back.args.get("path").cloned().unwrap_or_default()}))
        }
        _ => Err(unmappable(format!(
            "it turns the call into {} (a rewrite cannot change which tool runs)",
            back.tool
        ))),
    }
}

/// Gemini's `hookSpecificOutput.tool_input`: merged into the arguments (a shallow patch: its
/// keys replace the model's, other keys stay).
pub fn merge_input(original: &Value, patch: &Map<String, Value>) -> Value {
    let mut merged = original.as_object().cloned().unwrap_or_default();
    for (k, v) in patch {
        merged.insert(k.clone(), v.clone());
    }
    Value::Object(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(d: Dialect, tool: &str, args: Value) -> Vec<VendorCall> {
        to_vendor(d, tool, &args).unwrap_or_else(|e| panic!("{e}"))
    }

    fn back(d: Dialect, call: &VendorCall) -> Vec<HookboxCall> {
        from_vendor(d, &call.tool_name, &call.tool_input, Some("srv"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn every_tool_round_trips_through_every_dialect() {
        let cases = [
            (
                "code_execution",
                json!({"code": "ls -la", "language": "bash"}),
            ),
            (
                "code_execution",
                json!({"code": "print(1)\n", "language": "python"}),
            ),
            (
                "view_file",
                json!({"path": "/workspace/a.txt", "start_line": 3, "end_line": 9}),
            ),
            ("view_file", json!({"path": "/workspace/a.txt"})),
            (
                "write_to_file",
                json!({"path": "/workspace/a.txt", "content": "x\n"}),
            ),
            (
                "replace_file_content",
                json!({"path": "/workspace/a.txt", "old_content": "a", "new_content": "b"}),
            ),
            ("list_dir", json!({"path": "/workspace"})),
            ("delete_file", json!({"path": "/workspace/it's.txt"})),
        ];
        for d in Dialect::VENDORS {
            for (tool, args) in &cases {
                let calls = shown(d, tool, args.clone());
                assert_eq!(calls.len(), 1, "{d} {tool}");
                let mapped = back(d, &calls[0]);
                let expected_tool = match (*tool, d) {
                    (
                        "delete_file",
                        Dialect::ClaudeCode | Dialect::GeminiCli | Dialect::Copilot,
                    ) => "code_execution",
                    // Copilot's `view` reads files and lists directories alike.
                    ("list_dir", Dialect::Copilot) => "view_file",
                    _ => tool,
                };
                assert_eq!(mapped.len(), 1);
                assert_eq!(mapped[0].tool, expected_tool, "{d} {tool}");
                if expected_tool == *tool && !(d == Dialect::Cursor && *tool == "view_file") {
                    assert_eq!(&mapped[0].args, args, "{d} {tool}");
                }
                // An unchanged input gives the original arguments back unchanged.
                assert_eq!(
                    update_from_vendor(d, tool, args, &calls[0], &calls[0].tool_input),
                    Ok(args.clone())
                );
            }
        }
    }

    #[test]
    fn vendor_names_and_argument_names_are_the_vendors() {
        let bash = json!({"code": "rm -rf /tmp/x"});
        assert_eq!(
            shown(Dialect::ClaudeCode, "code_execution", bash.clone())[0].tool_input,
            json!({"command": "rm -rf /tmp/x"})
        );
        assert_eq!(
            shown(Dialect::GeminiCli, "code_execution", bash.clone())[0].tool_name,
            "run_shell_command"
        );
        assert_eq!(
            shown(Dialect::Cursor, "code_execution", bash.clone())[0].tool_input,
            json!({"command": "rm -rf /tmp/x", "working_directory": "/workspace"})
        );
        assert_eq!(
            shown(Dialect::Copilot, "code_execution", bash)[0].tool_name,
            "bash"
        );
        let w = shown(
            Dialect::ClaudeCode,
            "write_to_file",
            json!({"path": "src/.env", "content": "k"}),
        );
        assert_eq!(
            w[0].tool_input,
            json!({"file_path": "/workspace/src/.env", "content": "k"})
        );
        let r = shown(
            Dialect::ClaudeCode,
            "view_file",
            json!({"path": "a", "start_line": 10, "end_line": 19}),
        );
        assert_eq!(
            r[0].tool_input,
            json!({"file_path": "/workspace/a", "offset": 10, "limit": 10})
        );
        let c = shown(
            Dialect::Copilot,
            "write_to_file",
            json!({"path": "a", "content": "k"}),
        );
        assert_eq!(
            (c[0].tool_name.as_str(), &c[0].tool_input),
            ("create", &json!({"path": "/workspace/a", "file_text": "k"}))
        );
        let l = shown(Dialect::GeminiCli, "list_dir", json!({"path": "."}));
        assert_eq!(l[0].tool_input, json!({"dir_path": "/workspace"}));
    }

    #[test]
    fn python_is_shown_to_shell_guards_as_a_heredoc() {
        let calls = shown(
            Dialect::ClaudeCode,
            "code_execution",
            json!({"code": "import os\nos.system('rm -rf /')", "language": "python"}),
        );
        assert_eq!(calls[0].tool_name, "Bash");
        let cmd = calls[0].tool_input["command"].as_str().unwrap_or_default();
        assert!(
            cmd.starts_with("python3 - <<'HOOKBOX_PY'\n") && cmd.contains("rm -rf /"),
            "{cmd}"
        );
        // Code containing the delimiter gets another one and still round-trips.
        let code = "x = 1\nHOOKBOX_PY\ny = 2\n";
        let cmd = python_as_shell(code);
        assert!(cmd.starts_with("python3 - <<'HOOKBOX_PY_1'"));
        assert_eq!(shell_as_python(&cmd).as_deref(), Some(code));
        assert_eq!(shell_as_python("python3 - <<'EOF'\nx\nEOF"), None);
        // A rewrite to another shell command runs that command, as bash.
        let args = json!({"code": "print(1)", "language": "python"});
        let updated = json!({"command": "echo replaced"});
        assert_eq!(
            update_from_vendor(
                Dialect::ClaudeCode,
                "code_execution",
                &args,
                &calls[0],
                &updated
            ),
            Ok(json!({"code": "echo replaced", "language": "bash"}))
        );
    }

    #[test]
    fn delete_is_rm_where_the_vendor_has_no_delete_tool() {
        let args = json!({"path": "/workspace/.env"});
        for d in [Dialect::ClaudeCode, Dialect::GeminiCli, Dialect::Copilot] {
            let calls = shown(d, "delete_file", args.clone());
            assert_eq!(
                calls[0].tool_input["command"],
                json!("rm -- '/workspace/.env'")
            );
            // Rewriting the path keeps a deletion; anything else cannot replace a deletion.
            let moved = json!({"command": "rm -- '/workspace/tmp.txt'"});
            assert_eq!(
                update_from_vendor(d, "delete_file", &args, &calls[0], &moved),
                Ok(json!({"path": "/workspace/tmp.txt"}))
            );
            let other = json!({"command": "rm -- '/a' '/b'"});
            assert!(matches!(
                update_from_vendor(d, "delete_file", &args, &calls[0], &other),
                Err(MappingError::Unmappable { .. })
            ));
        }
        assert_eq!(
            shown(Dialect::Cursor, "delete_file", args.clone())[0].tool_name,
            "Delete"
        );
        let codex = shown(Dialect::Codex, "delete_file", args);
        assert_eq!(codex[0].tool_name, "apply_patch");
        assert!(
            codex[0].tool_input["command"]
                .as_str()
                .unwrap_or_default()
                .contains("*** Delete File: /workspace/.env")
        );
        assert_eq!(shell_as_delete("rm -- '/a'\\''b'"), Some("/a'b".into()));
        assert_eq!(shell_as_delete("rm -- '/a'; rm -rf '/'"), None);
    }

    #[test]
    fn several_chunks_are_one_edit_each_and_a_rewrite_lands_on_its_chunk() {
        let args = json!({"path": "/workspace/a.rs", "chunks": [
            {"old_content": "a", "new_content": "b"},
            {"old_content": "c", "new_content": "d"}]});
        let calls = shown(Dialect::ClaudeCode, "replace_file_content", args.clone());
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].chunk, Some(1));
        assert_eq!(calls[1].tool_input["old_string"], json!("c"));
        let mut updated = calls[1].tool_input.clone();
        updated["new_string"] = json!("D");
        assert_eq!(
            update_from_vendor(
                Dialect::ClaudeCode,
                "replace_file_content",
                &args,
                &calls[1],
                &updated
            ),
            Ok(json!({"path": "/workspace/a.rs", "chunks": [
                {"old_content": "a", "new_content": "b"},
                {"old_content": "c", "new_content": "D"}]}))
        );
        updated["file_path"] = json!("/workspace/other.rs");
        assert!(
            update_from_vendor(
                Dialect::ClaudeCode,
                "replace_file_content",
                &args,
                &calls[1],
                &updated
            )
            .is_err()
        );
        // Codex: one patch with two hunks, read back as the same call.
        let codex = shown(Dialect::Codex, "replace_file_content", args.clone());
        assert_eq!(codex.len(), 1);
        assert_eq!(back(Dialect::Codex, &codex[0])[0].args, args);
    }

    #[test]
    fn codex_patch_rewrites_map_back_or_deny() {
        let args = json!({"path": "/workspace/a.txt", "content": "x\n"});
        let calls = shown(Dialect::Codex, "write_to_file", args.clone());
        let new = json!({"command": "*** Begin Patch\n*** Add File: /workspace/b.txt\n+y\n*** End Patch"});
        assert_eq!(
            update_from_vendor(Dialect::Codex, "write_to_file", &args, &calls[0], &new),
            Ok(json!({"path": "/workspace/b.txt", "content": "y\n"}))
        );
        let two = json!({"command": "*** Begin Patch\n*** Add File: /a\n+y\n*** Delete File: /b\n*** End Patch"});
        assert!(matches!(
            update_from_vendor(Dialect::Codex, "write_to_file", &args, &calls[0], &two),
            Err(MappingError::Unmappable { .. })
        ));
        let del = json!({"command": "*** Begin Patch\n*** Delete File: /a\n*** End Patch"});
        assert!(
            update_from_vendor(Dialect::Codex, "write_to_file", &args, &calls[0], &del).is_err()
        );
        let garbage = json!({"command": "rm -rf /"});
        assert!(
            update_from_vendor(Dialect::Codex, "write_to_file", &args, &calls[0], &garbage)
                .is_err()
        );
        assert_eq!(
            matcher_aliases(Dialect::Codex, "apply_patch"),
            &["Edit", "Write"]
        );
    }

    #[test]
    fn a_rewrite_cannot_change_the_tool() {
        let args = json!({"path": "/workspace/a.txt", "content": "x"});
        let calls = shown(Dialect::ClaudeCode, "write_to_file", args.clone());
        let as_edit =
            json!({"file_path": "/workspace/a.txt", "old_string": "a", "new_string": "b"});
        let err = update_from_vendor(
            Dialect::ClaudeCode,
            "write_to_file",
            &args,
            &calls[0],
            &as_edit,
        );
        assert!(
            matches!(err, Err(MappingError::Unmappable { .. })),
            "{err:?}"
        );
    }

    #[test]
    fn mcp_names_and_unknown_tools() {
        assert_eq!(
            shown(Dialect::ClaudeCode, "mcp:github/create_issue", json!({}))[0].tool_name,
            "mcp__github__create_issue"
        );
        assert_eq!(
            shown(Dialect::GeminiCli, "mcp:github/create_issue", json!({}))[0].tool_name,
            "mcp_github_create_issue"
        );
        assert_eq!(
            shown(Dialect::Cursor, "mcp:github/create_issue", json!({}))[0].tool_name,
            "MCP:create_issue"
        );
        assert_eq!(
            back(
                Dialect::ClaudeCode,
                &VendorCall {
                    tool_name: "mcp__gh__x".into(),
                    tool_input: json!({}),
                    chunk: None
                }
            )[0]
            .tool,
            "mcp:gh/x"
        );
        assert_eq!(
            back(
                Dialect::Cursor,
                &VendorCall {
                    tool_name: "MCP:x".into(),
                    tool_input: json!({}),
                    chunk: None
                }
            )[0]
            .tool,
            "mcp:srv/x"
        );
        assert!(matches!(
            from_vendor(Dialect::ClaudeCode, "WebFetch", &json!({}), None),
            Err(MappingError::NoHookboxTool { .. })
        ));
        assert!(matches!(
            from_vendor(Dialect::ClaudeCode, "Bash", &json!({"command": 1}), None),
            Err(MappingError::BadArgs { .. })
        ));
    }

    #[test]
    fn gemini_merges_its_patch() {
        let merged = merge_input(
            &json!({"command": "a", "description": "d"}),
            json!({"command": "b"}).as_object().unwrap_or(&Map::new()),
        );
        assert_eq!(merged, json!({"command": "b", "description": "d"}));
    }
}
