//! The six built-in tools, each taking the model's JSON arguments and returning a typed output
//! ([`ToolOutput`]: `code_execution`'s [`CodeOutput`], a file tool's JSON) or an error text. File
//! tools act on the environment's tree from the host through `hookbox-rootfs` (openat2
//! `RESOLVE_IN_ROOT`), never with plain paths; `code_execution` runs in the sandbox through
//! [`SandboxRunner`].
//!
//! Paths are sandbox paths: absolute (`/workspace/x`, `/.agents/...`) or relative to
//! `/workspace`. This module must not run hooks, nor decide what the model sees of an output;
//! the lifecycle ([`crate::lifecycle`]) does both.

use std::time::Duration;

use hookbox_process::{CommandOutput, Termination};
use hookbox_protocol::ToolName;
use hookbox_rootfs::{RootDir, RootFsError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::runner::SandboxRunner;

/// Largest file `view_file` and `replace_file_content` read.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;
/// Largest `code` accepted: one exec argument (Linux caps a single argument at 128 KiB).
pub const MAX_CODE_BYTES: usize = 128 * 1024 - 1;

/// Why a tool failed. The text is what the model and the post hooks' `error` see.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments for {tool}: {message}")]
    Args { tool: &'static str, message: String },
    #[error(transparent)]
    Fs(#[from] RootFsError),
    #[error("{path}: hooks are frozen in this environment, /.agents is read-only")]
    Frozen { path: String },
    #[error("{path}: old_content not found")]
    NotFound { path: String },
    #[error(
        "{path}: old_content occurs {count} times; include more surrounding text so it is unique"
    )]
    Ambiguous { path: String, count: usize },
    #[error("{path}: not valid UTF-8 text")]
    NotText { path: String },
    #[error("code is {len} bytes; the limit is {MAX_CODE_BYTES}")]
    CodeTooLong { len: usize },
    #[error("the sandbox failed: {0}")]
    Sandbox(#[from] crate::runner::RunError),
    #[error(transparent)]
    Quota(#[from] crate::slots::SlotsExhausted),
}

/// What a tool produced. Serialised, it is the JSON `hookbox tool` prints and `hookbox mcp`
/// returns: `code_execution`'s fields, or the file tool's object as it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ToolOutput {
    /// `code_execution`'s output.
    Code(CodeOutput),
    /// Any other tool's output as JSON: a file tool's object, a remote MCP server tool's text.
    Json(Value),
}

impl ToolOutput {
    /// The output as JSON (see the type's serialisation).
    pub fn json(&self) -> Value {
        match self {
            ToolOutput::Json(value) => value.clone(),
            // Serialising plain strings, numbers and booleans cannot fail.
            ToolOutput::Code(code) => serde_json::to_value(code).unwrap_or_default(),
        }
    }
}

/// `code_execution`'s output, typed: what the model, the post hooks and `hookbox tool` see of a
/// run are all made from it, never read back from JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CodeOutput {
    /// stdout as text (invalid UTF-8 replaced).
    pub stdout: String,
    /// stderr as text (invalid UTF-8 replaced).
    pub stderr: String,
    /// The exit status; absent when the program did not exit by itself (a signal, the timeout,
    /// the output limit).
    pub exit_code: Option<i32>,
    /// How it ended; serialised as its text (`exited with status 0`, `timed out`, ...).
    #[serde(serialize_with = "as_text")]
    pub termination: Termination,
    /// stdout or stderr went past the output limit and was cut.
    pub truncated: bool,
}

impl CodeOutput {
    /// Whether the run counts as failed for the model: it did not exit with status 0.
    pub fn failed(&self) -> bool {
        self.exit_code != Some(0)
    }
}

fn as_text<S: serde::Serializer>(
    termination: &Termination,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(termination)
}

/// A tool that ran: its output, plus the text post hooks receive as `error` when the tool ran
/// but reported a problem (`code_execution` with stderr, or killed).
#[derive(Debug, Clone)]
pub struct Ran {
    pub output: ToolOutput,
    pub hook_error: Option<String>,
}

impl Ran {
    fn clean(output: Value) -> Self {
        Self {
            output: ToolOutput::Json(output),
            hook_error: None,
        }
    }
}

fn args<T: for<'de> Deserialize<'de>>(tool: &'static str, value: &Value) -> Result<T, ToolError> {
    serde_json::from_value(value.clone()).map_err(|e| ToolError::Args {
        tool,
        message: e.to_string(),
    })
}

/// Whether `raw` are valid arguments of `tool` (the same parsing the tool itself does, without
/// running it): what pre hooks' `updated_args` are checked with. `Err` says why not.
pub fn validate_args(tool: ToolName, raw: &Value) -> Result<(), String> {
    let checked = match tool {
        ToolName::CodeExecution => args::<CodeArgs>("code_execution", raw).and_then(|a| {
            if a.code.len() > MAX_CODE_BYTES {
                return Err(ToolError::CodeTooLong { len: a.code.len() });
            }
            Ok(())
        }),
        ToolName::ViewFile => args::<ViewArgs>("view_file", raw).map(drop),
        ToolName::WriteToFile => args::<WriteArgs>("write_to_file", raw).map(drop),
        ToolName::ReplaceFileContent => args::<ReplaceArgs>("replace_file_content", raw).map(drop),
        ToolName::ListDir => args::<PathArgs>("list_dir", raw).map(drop),
        ToolName::DeleteFile => args::<PathArgs>("delete_file", raw).map(drop),
    };
    checked.map_err(|e| e.to_string())
}

/// Turns a tool path into an absolute sandbox path, lexically normalised (`.` and `..` folded,
/// never above `/`; relative to `/workspace`), as vendor hooks are told it
/// ([`hookbox_hooks::dialect::absolute_path`]). The kernel resolves symlinks later, inside the
/// tree.
pub fn sandbox_path(path: &str) -> Result<String, ToolError> {
    if path.is_empty() || path.contains('\0') {
        return Err(ToolError::Args {
            tool: "path",
            message: "path must be a non-empty string without NUL bytes".into(),
        });
    }
    Ok(hookbox_hooks::dialect::absolute_path(path))
}

/// Where file tools read and write.
#[derive(Debug, Clone, Copy)]
pub struct Trees<'a> {
    pub tree: &'a RootDir,
    /// When hooks are frozen: the snapshot, which serves reads under `/.agents`.
    pub frozen: Option<&'a RootDir>,
}

impl Trees<'_> {
    fn under_agents(path: &str) -> bool {
        path == "/.agents" || path.starts_with("/.agents/")
    }

    fn for_read(&self, path: &str) -> &RootDir {
        match self.frozen {
            Some(frozen) if Self::under_agents(path) => frozen,
            _ => self.tree,
        }
    }

    fn for_write(&self, path: &str) -> Result<&RootDir, ToolError> {
        if self.frozen.is_some() && Self::under_agents(path) {
            return Err(ToolError::Frozen {
                path: path.to_owned(),
            });
        }
        Ok(self.tree)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewArgs {
    path: String,
    #[serde(default)]
    start_line: Option<usize>,
    #[serde(default)]
    end_line: Option<usize>,
}

pub fn view_file(trees: Trees<'_>, raw: &Value) -> Result<Ran, ToolError> {
    let a: ViewArgs = args("view_file", raw)?;
    let path = sandbox_path(&a.path)?;
    let bytes = trees.for_read(&path).read_file(&path, MAX_READ_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|_| ToolError::NotText { path: path.clone() })?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let total = lines.len();
    let start = a.start_line.unwrap_or(1).max(1);
    let end = a.end_line.unwrap_or(total).min(total);
    let content: String = if start > end {
        String::new()
    } else {
        lines[start - 1..end].concat()
    };
    Ok(Ran::clean(json!({
        "path": path,
        "content": content,
        "start_line": start,
        "end_line": end,
        "total_lines": total,
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

pub fn write_to_file(trees: Trees<'_>, raw: &Value) -> Result<Ran, ToolError> {
    let a: WriteArgs = args("write_to_file", raw)?;
    let path = sandbox_path(&a.path)?;
    trees
        .for_write(&path)?
        .write_file(&path, a.content.as_bytes(), true)?;
    Ok(Ran::clean(
        json!({"path": path, "bytes_written": a.content.len()}),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Chunk {
    old_content: String,
    new_content: String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ReplaceArgs {
    One {
        path: String,
        old_content: String,
        new_content: String,
    },
    Many {
        path: String,
        chunks: Vec<Chunk>,
    },
}

pub fn replace_file_content(trees: Trees<'_>, raw: &Value) -> Result<Ran, ToolError> {
    let (path, chunks) = match args("replace_file_content", raw)? {
        ReplaceArgs::One {
            path,
            old_content,
            new_content,
        } => (
            path,
            vec![Chunk {
                old_content,
                new_content,
            }],
        ),
        ReplaceArgs::Many { path, chunks } => (path, chunks),
    };
    let path = sandbox_path(&path)?;
    let tree = trees.for_write(&path)?;
    let bytes = tree.read_file(&path, MAX_READ_BYTES)?;
    let mut text =
        String::from_utf8(bytes).map_err(|_| ToolError::NotText { path: path.clone() })?;
    if chunks.is_empty() {
        return Err(ToolError::Args {
            tool: "replace_file_content",
            message: "no chunks given".into(),
        });
    }
    // Every chunk is checked against the text as the earlier chunks left it; nothing is written
    // unless all of them apply.
    for chunk in &chunks {
        if chunk.old_content.is_empty() {
            return Err(ToolError::Args {
                tool: "replace_file_content",
                message: "old_content must not be empty".into(),
            });
        }
        match text.matches(chunk.old_content.as_str()).count() {
            0 => return Err(ToolError::NotFound { path }),
            1 => text = text.replacen(&chunk.old_content, &chunk.new_content, 1),
            count => return Err(ToolError::Ambiguous { path, count }),
        }
    }
    tree.write_file(&path, text.as_bytes(), false)?;
    Ok(Ran::clean(
        json!({"path": path, "replacements": chunks.len()}),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    path: String,
}

pub fn list_dir(trees: Trees<'_>, raw: &Value) -> Result<Ran, ToolError> {
    let a: PathArgs = args("list_dir", raw)?;
    let path = sandbox_path(&a.path)?;
    let entries = trees.for_read(&path).list_dir(&path)?;
    let entries: Vec<Value> = entries
        .into_iter()
        .map(|e| json!({"name": e.name, "kind": e.kind.as_str(), "size": e.size}))
        .collect();
    Ok(Ran::clean(json!({"path": path, "entries": entries})))
}

pub fn delete_file(trees: Trees<'_>, raw: &Value) -> Result<Ran, ToolError> {
    let a: PathArgs = args("delete_file", raw)?;
    let path = sandbox_path(&a.path)?;
    trees.for_write(&path)?.remove_file(&path)?;
    Ok(Ran::clean(json!({"path": path, "deleted": true})))
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Language {
    Bash,
    Python,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CodeArgs {
    code: String,
    #[serde(default = "default_language")]
    language: Language,
}

fn default_language() -> Language {
    Language::Bash
}

/// Runs the code; `tap`, when given, sees its stdout as it is written.
pub async fn code_execution(
    runner: &SandboxRunner,
    raw: &Value,
    timeout: Duration,
    output_limit: usize,
    tap: Option<hookbox_process::OutputTap>,
) -> Result<Ran, ToolError> {
    let a: CodeArgs = args("code_execution", raw)?;
    if a.code.len() > MAX_CODE_BYTES {
        return Err(ToolError::CodeTooLong { len: a.code.len() });
    }
    let argv = match a.language {
        Language::Bash => vec!["/bin/bash".to_owned(), "-c".to_owned(), a.code],
        Language::Python => vec![
            "/usr/bin/env".to_owned(),
            "python3".to_owned(),
            "-c".to_owned(),
            a.code,
        ],
    };
    let slot = runner.reserve()?;
    let out = runner
        .run_argv_tapped(slot, argv, Vec::new(), timeout, output_limit, tap)
        .await?;
    Ok(code_output(&out, timeout))
}

fn code_output(out: &CommandOutput, timeout: Duration) -> Ran {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let (exit_code, note) = match out.termination {
        Termination::Exited(code) => (Some(code), None),
        Termination::Signaled(signal) => (None, Some(format!("killed by signal {signal}"))),
        Termination::TimedOut => (
            None,
            Some(format!(
                "timed out after {} s; the whole process tree was killed",
                timeout.as_secs()
            )),
        ),
        Termination::OutputLimit => (
            None,
            Some("output limit exceeded; the process tree was killed".to_owned()),
        ),
    };
    let hook_error = match (&note, stderr.is_empty()) {
        (None, true) => None,
        (None, false) => Some(stderr.clone()),
        (Some(note), true) => Some(note.clone()),
        (Some(note), false) => Some(format!("{stderr}\n{note}")),
    };
    Ran {
        output: ToolOutput::Code(CodeOutput {
            stdout,
            stderr,
            exit_code,
            termination: out.termination,
            truncated: out.stdout_truncated || out.stderr_truncated,
        }),
        hook_error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_paths_are_normalised_and_relative_means_workspace() {
        assert_eq!(sandbox_path("a/b").unwrap(), "/workspace/a/b");
        assert_eq!(sandbox_path("/.agents/x").unwrap(), "/.agents/x");
        assert_eq!(sandbox_path("../../etc/passwd").unwrap(), "/etc/passwd");
        assert_eq!(sandbox_path("/a/./b/../c/").unwrap(), "/a/c");
        assert!(sandbox_path("").is_err());
        assert!(sandbox_path("a\0b").is_err());
    }

    fn tree() -> (tempfile::TempDir, RootDir) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("workspace")).unwrap();
        let root = RootDir::open(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn replace_fails_on_absent_or_ambiguous_text_and_writes_nothing() {
        let (dir, root) = tree();
        let trees = Trees {
            tree: &root,
            frozen: None,
        };
        std::fs::write(dir.path().join("workspace/f"), "a b a c").unwrap();
        let absent = replace_file_content(
            trees,
            &json!({"path": "f", "old_content": "zzz", "new_content": "y"}),
        );
        assert!(matches!(absent, Err(ToolError::NotFound { .. })));
        let ambiguous = replace_file_content(
            trees,
            &json!({"path": "f", "chunks": [{"old_content": "b", "new_content": "B"}, {"old_content": "a", "new_content": "y"}]}),
        );
        assert!(matches!(
            ambiguous,
            Err(ToolError::Ambiguous { count: 2, .. })
        ));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("workspace/f")).unwrap(),
            "a b a c"
        );
        replace_file_content(
            trees,
            &json!({"path": "/workspace/f", "chunks": [{"old_content": "b", "new_content": "B"}, {"old_content": "a c", "new_content": "C"}]}),
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("workspace/f")).unwrap(),
            "a B C"
        );
    }

    #[test]
    fn view_file_line_range() {
        let (dir, root) = tree();
        std::fs::write(dir.path().join("workspace/f"), "1\n2\n3\n4\n").unwrap();
        let trees = Trees {
            tree: &root,
            frozen: None,
        };
        let out = view_file(trees, &json!({"path": "f", "start_line": 2, "end_line": 3})).unwrap();
        assert_eq!(out.output.json()["content"], "2\n3\n");
        assert_eq!(out.output.json()["total_lines"], 4);
    }

    #[test]
    fn frozen_agents_refuse_writes_and_read_from_snapshot() {
        let (_dir, root) = tree();
        let (snap_dir, snap) = tree();
        std::fs::create_dir_all(snap_dir.path().join(".agents")).unwrap();
        std::fs::write(snap_dir.path().join(".agents/hooks.json"), "{}").unwrap();
        let trees = Trees {
            tree: &root,
            frozen: Some(&snap),
        };
        let write = write_to_file(
            trees,
            &json!({"path": "/workspace/../.agents/hooks.json", "content": "x"}),
        );
        assert!(matches!(write, Err(ToolError::Frozen { .. })));
        let del = delete_file(trees, &json!({"path": "/.agents/hooks.json"}));
        assert!(matches!(del, Err(ToolError::Frozen { .. })));
        let view = view_file(trees, &json!({"path": "/.agents/hooks.json"})).unwrap();
        assert_eq!(view.output.json()["content"], "{}");
    }
}
