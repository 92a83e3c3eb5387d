//! The `offline` model: deterministic, no network, for developing and testing hooks. It performs
//! exactly the operations the latest user input names with backticks, one tool call per turn, in
//! order, then answers with one line per operation saying what happened (output, error or the
//! hook's deny reason).
//!
//! Grammar (case-insensitive verbs; the *last* verb word between the previous backtick span and
//! this one decides):
//! - `` run|execute|exec `CMD` `` → `code_execution {code: CMD, language: "bash"}`
//! - `` read|view|open|show|cat `PATH` `` → `view_file {path}`
//! - `` create|write `PATH` containing|with content 'TEXT' `` (single or double quotes, in the
//!   text after the span) → `write_to_file {path, content: TEXT}` (empty content if no quotes)
//! - `` list `PATH` `` → `list_dir {path}`;  `` delete|remove `PATH` `` → `delete_file {path}`
//! - `` replace 'OLD' with 'NEW' in `PATH` `` → `replace_file_content {path, old_content, new_content}`
//! - no verb: a span starting with `/`, `./` or `~/` without spaces is read (`view_file`),
//!   anything else is run (`code_execution`)
//! - `read it` / `read it back` after a span → `view_file` of that span's path, after it
//! - `` search `QUERY` `` → a call of the interaction's `tool_search` function with
//!   `{"query": QUERY}`; `` load `NAME` `` → with `{"function_names": [NAME]}` (a server-side
//!   search is answered by hookbox and the answer says `loaded NAME, …`; a client-side one waits
//!   for the client, as a function call does)
//! - `` call `NAME` with `{JSON}` `` → a call of the client's `function` tool NAME with those
//!   arguments (`{}` without a `with` span); consecutive calls go out together in one turn (in
//!   parallel), and the interaction then waits (`requires_action`) for their results
//!
//! With no backtick span it answers with this grammar and calls no tool; when the input also
//! says "show your system instruction" it adds `[system instruction] TEXT` (the whole system
//! instruction it was given). It never loops: each
//! turn looks at how many tool results follow the last `user_input`. Context that hooks gave it
//! (`[context from hooks] …` lines of the system instruction, from `pre_interaction` hooks) is
//! repeated at the end of its answer, so that what the model was told is visible.

use async_trait::async_trait;
use hookbox_protocol::api::Step;
use regex::Regex;
use serde_json::{Value, json};

use crate::model::{Model, ModelCall, ModelRequest, ModelTurn, current_turn_start};
use crate::steps::{ToolStep, as_tool_step, output_as_text};

/// One planned operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub tool: &'static str,
    pub args: Value,
    /// For a client function call (`tool` is [`FUNCTION`]): its name.
    pub function: Option<String>,
}

/// [`Operation::tool`] of a call of a client `function` tool.
pub const FUNCTION: &str = "function";
/// [`Operation::tool`] of a tool search (the interaction's `tool_search` function).
pub const SEARCH: &str = "tool_search";

/// The deterministic offline model.
#[derive(Debug)]
pub struct OfflineModel {
    span: Regex,
    quoted: Regex,
    read_back: Regex,
    replace: Regex,
}

/// Shown when the input names nothing to do.
pub const HELP: &str = "The offline agent performs only operations named with backticks: \
run `CMD`; read `PATH`; create `PATH` containing 'TEXT'; list `PATH`; delete `PATH`; \
replace 'OLD' with 'NEW' in `PATH`; call `FUNCTION` with `{JSON}`; search `QUERY`; load `TOOL`.";

/// Input words (with no backtick span) that make it repeat its whole system instruction after
/// [`HELP`], as `[system instruction] TEXT`: how tests see what an interaction was told (an
/// environment's `system_instruction`, say).
pub const SHOW_INSTRUCTION: &str = "show your system instruction";

impl OfflineModel {
    pub fn new() -> crate::Result<Self> {
        let re = |p: &str| Regex::new(p).map_err(|e| crate::Error::ModelResponse(e.to_string()));
        Ok(OfflineModel {
            span: re(r"`([^`]+)`")?,
            quoted: re(r#"(?:containing|content|with)\s*:?\s*(?:'([^']*)'|"([^"]*)")"#)?,
            read_back: re(r"(?i)\bread\s+(?:it|them)\b")?,
            replace: re(
                r#"(?i)replace\s+(?:'([^']*)'|"([^"]*)")\s+with\s+(?:'([^']*)'|"([^"]*)")"#,
            )?,
        })
    }

    /// The operations `input` names, in order.
    pub fn plan(&self, input: &str) -> Vec<Operation> {
        let spans: Vec<_> = self.span.captures_iter(input).collect();
        let mut ops = Vec::new();
        let mut prev_end = 0;
        let mut skip_next = false;
        for (i, cap) in spans.iter().enumerate() {
            let (Some(whole), Some(inner)) = (cap.get(0), cap.get(1)) else {
                continue;
            };
            if std::mem::take(&mut skip_next) {
                prev_end = whole.end();
                continue;
            }
            let before = &input[prev_end..whole.start()];
            let after_end = spans
                .get(i + 1)
                .and_then(|c| c.get(0))
                .map_or(input.len(), |m| m.start());
            let after = &input[whole.end()..after_end];
            prev_end = whole.end();
            let target = inner.as_str().trim();
            let path_like =
                (target.starts_with('/') || target.starts_with("./") || target.starts_with("~/"))
                    && !target.contains(char::is_whitespace);
            let op = match last_verb(before) {
                Some(Verb::Call) => {
                    // `with `{JSON}``: the next span holds the arguments.
                    let args = match spans.get(i + 1).and_then(|c| c.get(1)) {
                        Some(next) if after.trim().eq_ignore_ascii_case("with") => {
                            skip_next = true;
                            serde_json::from_str(next.as_str())
                                .unwrap_or_else(|_| json!({"invalid_arguments": next.as_str()}))
                        }
                        _ => json!({}),
                    };
                    Operation {
                        tool: FUNCTION,
                        args,
                        function: Some(target.to_owned()),
                    }
                }
                Some(Verb::Search) => Operation {
                    tool: SEARCH,
                    args: json!({"query": target}),
                    function: None,
                },
                Some(Verb::Load) => Operation {
                    tool: SEARCH,
                    args: json!({"function_names": [target]}),
                    function: None,
                },
                Some(Verb::Run) => Operation::code(target),
                Some(Verb::Read) => Operation::path("view_file", target),
                Some(Verb::List) => Operation::path("list_dir", target),
                Some(Verb::Delete) => Operation::path("delete_file", target),
                Some(Verb::Create) => {
                    let content = self
                        .quoted
                        .captures(after)
                        .and_then(|c| c.get(1).or_else(|| c.get(2)))
                        .map_or("", |m| m.as_str());
                    Operation {
                        tool: "write_to_file",
                        args: json!({"path": target, "content": content}),
                        function: None,
                    }
                }
                Some(Verb::Replace) => match self.replace.captures(before) {
                    Some(c) => Operation {
                        tool: "replace_file_content",
                        args: json!({
                            "path": target,
                            "old_content": c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str()),
                            "new_content": c.get(3).or_else(|| c.get(4)).map_or("", |m| m.as_str()),
                        }),
                        function: None,
                    },
                    None => Operation::path("view_file", target),
                },
                None if path_like => Operation::path("view_file", target),
                None => Operation::code(target),
            };
            let is_path_op = !matches!(op.tool, "code_execution" | FUNCTION | SEARCH);
            ops.push(op);
            if is_path_op && self.read_back.is_match(after) {
                ops.push(Operation::path("view_file", target));
            }
        }
        ops
    }
}

impl Operation {
    fn code(code: &str) -> Self {
        Operation {
            tool: "code_execution",
            args: json!({"code": code, "language": "bash"}),
            function: None,
        }
    }

    fn path(tool: &'static str, path: &str) -> Self {
        Operation {
            tool,
            args: json!({"path": path}),
            function: None,
        }
    }

    /// The name the model calls it by.
    fn call_name(&self) -> &str {
        self.function.as_deref().unwrap_or(self.tool)
    }

    fn describe_failure(&self) -> String {
        let arg = |k: &str| self.args.get(k).and_then(Value::as_str).unwrap_or("");
        match self.tool {
            FUNCTION => format!("`{}` failed", self.call_name()),
            SEARCH => "The tool search failed".to_owned(),
            "code_execution" => format!("Could not run `{}`", arg("code")),
            "view_file" => format!("Could not read `{}`", arg("path")),
            "write_to_file" => format!("Could not write `{}`", arg("path")),
            "replace_file_content" => format!("Could not edit `{}`", arg("path")),
            "list_dir" => format!("Could not list `{}`", arg("path")),
            _ => format!("Could not delete `{}`", arg("path")),
        }
    }

    fn describe(&self) -> String {
        let arg = |k: &str| self.args.get(k).and_then(Value::as_str).unwrap_or("");
        match self.tool {
            FUNCTION => format!("Called `{}`", self.call_name()),
            SEARCH => "Searched for tools".to_owned(),
            "code_execution" => format!("Ran `{}`", arg("code")),
            "view_file" => format!("Read `{}`", arg("path")),
            "write_to_file" => format!("Wrote `{}`", arg("path")),
            "replace_file_content" => format!("Edited `{}`", arg("path")),
            "list_dir" => format!("Listed `{}`", arg("path")),
            _ => format!("Deleted `{}`", arg("path")),
        }
    }
}

/// A server-side `tool_search_result` step as the answer shows it: the names it loaded.
fn search_result(step: &Step) -> Option<String> {
    let Step::Other(v) = step else { return None };
    if v.get("type").and_then(Value::as_str) != Some("tool_search_result") {
        return None;
    }
    let names: Vec<&str> = v
        .get("result")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| d.get("name").and_then(Value::as_str))
        .collect();
    Some(if names.is_empty() {
        "found nothing".to_owned()
    } else {
        format!("loaded {}", names.join(", "))
    })
}

/// A tool result as the answer shows it: a file's `content` (view_file), a command's stdout and
/// stderr with a non-zero exit status (code_execution), a plain string as is, other JSON as JSON.
fn render(output: &Value) -> String {
    let mut text = render_result(output);
    // Hooks' additional_context (hookbox extension), shown after the result.
    if let Some(context) = output.get("additional_context").and_then(Value::as_array) {
        for line in context.iter().filter_map(Value::as_str) {
            text.push('\n');
            text.push_str(line);
        }
    }
    text
}

fn render_result(output: &Value) -> String {
    if let Some(content) = output.get("content").and_then(Value::as_str) {
        return content.to_owned();
    }
    if let Some(stdout) = output.get("stdout").and_then(Value::as_str) {
        let mut text = stdout.to_owned();
        text.push_str(output.get("stderr").and_then(Value::as_str).unwrap_or(""));
        match output.get("exit_code").and_then(Value::as_i64) {
            Some(0) => {}
            Some(code) => text.push_str(&format!("(exit status {code})")),
            None => {
                let how = output.get("termination").and_then(Value::as_str);
                text.push_str(&format!("({})", how.unwrap_or("killed")));
            }
        }
        return text;
    }
    if let Some(entries) = output.get("entries").and_then(Value::as_array) {
        let names: Vec<String> = entries
            .iter()
            .filter_map(|e| {
                let name = e.get("name")?.as_str()?;
                let dir = e.get("kind").and_then(Value::as_str) == Some("dir");
                Some(format!("{name}{}", if dir { "/" } else { "" }))
            })
            .collect();
        return names.join("\n");
    }
    output_as_text(output)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Run,
    Read,
    Create,
    List,
    Delete,
    Replace,
    Call,
    Search,
    Load,
}

fn last_verb(text: &str) -> Option<Verb> {
    text.split(|c: char| !c.is_ascii_alphabetic())
        .rev()
        .find_map(|w| match w.to_ascii_lowercase().as_str() {
            "run" | "execute" | "exec" => Some(Verb::Run),
            "read" | "view" | "open" | "show" | "cat" => Some(Verb::Read),
            "create" | "write" => Some(Verb::Create),
            "list" => Some(Verb::List),
            "delete" | "remove" => Some(Verb::Delete),
            "replace" => Some(Verb::Replace),
            "call" => Some(Verb::Call),
            "search" => Some(Verb::Search),
            "load" => Some(Verb::Load),
            _ => None,
        })
}

#[async_trait]
impl Model for OfflineModel {
    fn name(&self) -> &'static str {
        "offline"
    }

    async fn turn(&self, request: &ModelRequest<'_>) -> crate::Result<ModelTurn> {
        let start = current_turn_start(request.steps);
        let input = start
            .checked_sub(1)
            .and_then(|i| request.steps.get(i))
            .and_then(Step::text)
            .unwrap_or_default();
        let ops = self.plan(&input);
        let results: Vec<(String, bool)> = request.steps[start..]
            .iter()
            .filter_map(|s| match as_tool_step(s) {
                Some(ToolStep::Result {
                    output, is_error, ..
                }) => Some((render(output), is_error)),
                _ => search_result(s).map(|found| (found, false)),
            })
            .collect();
        let hook_context: Vec<&str> = request
            .system_instruction
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(crate::model::HOOK_CONTEXT_PREFIX))
            .collect();
        let with_context = |mut text: String| {
            for line in &hook_context {
                text.push('\n');
                text.push_str(line);
            }
            text
        };
        if ops.is_empty() {
            let mut text = HELP.to_owned();
            if input.to_lowercase().contains(SHOW_INSTRUCTION) {
                text.push_str("\n[system instruction] ");
                text.push_str(request.system_instruction.unwrap_or_default());
            }
            return Ok(ModelTurn {
                text: Some(with_context(text)),
                ..ModelTurn::default()
            });
        }
        if let Some(next) = ops.get(results.len()) {
            // Consecutive client function calls go out together (in parallel).
            let together = if next.tool == FUNCTION {
                ops[results.len()..]
                    .iter()
                    .take_while(|op| op.tool == FUNCTION)
                    .count()
            } else {
                1
            };
            return Ok(ModelTurn {
                calls: ops[results.len()..results.len() + together]
                    .iter()
                    .map(|op| ModelCall {
                        id: None,
                        // A search calls the interaction's search function, whatever its name.
                        name: match op.tool {
                            SEARCH => request.tool_search.unwrap_or(SEARCH).to_owned(),
                            _ => op.call_name().to_owned(),
                        },
                        args: op.args.clone(),
                        signature: None,
                    })
                    .collect(),
                ..ModelTurn::default()
            });
        }
        let lines: Vec<String> = ops
            .iter()
            .zip(&results)
            .map(|(op, (out, is_error))| {
                let out = out.trim_end();
                let shows_output = matches!(
                    op.tool,
                    "code_execution" | "view_file" | "list_dir" | FUNCTION | SEARCH
                );
                match (is_error, out.is_empty() || !shows_output) {
                    (true, _) => format!("{}: {out}", op.describe_failure()),
                    (false, true) => format!("{}: done.", op.describe()),
                    (false, false) => format!("{}:\n{out}", op.describe()),
                }
            })
            .collect();
        Ok(ModelTurn {
            text: Some(with_context(lines.join("\n"))),
            ..ModelTurn::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(input: &str) -> Vec<(String, Value)> {
        OfflineModel::new()
            .unwrap()
            .plan(input)
            .into_iter()
            .map(|o| (o.tool.to_owned(), o.args))
            .collect()
    }

    #[test]
    fn reference_inputs_plan_the_expected_calls() {
        assert_eq!(
            tools("Run `rm -rf /tmp/forbidden` using code_execution."),
            [(
                "code_execution".into(),
                json!({"code": "rm -rf /tmp/forbidden", "language": "bash"})
            )]
        );
        assert_eq!(
            tools(
                "Use your filesystem tool to read `/workspace/private/employees.json` and summarize the employee details."
            ),
            [(
                "view_file".into(),
                json!({"path": "/workspace/private/employees.json"})
            )]
        );
        assert_eq!(
            tools(
                "Understood. Please read the approved `/workspace/public/summary.json` file instead and provide the summary."
            ),
            [(
                "view_file".into(),
                json!({"path": "/workspace/public/summary.json"})
            )]
        );
        assert_eq!(
            tools(
                "Use your filesystem tool to create `/workspace/audit.log` containing 'event 1', then immediately read it back using your filesystem read tool."
            ),
            [
                (
                    "write_to_file".into(),
                    json!({"path": "/workspace/audit.log", "content": "event 1"})
                ),
                ("view_file".into(), json!({"path": "/workspace/audit.log"})),
            ]
        );
    }

    #[test]
    fn sandbox_outputs_render_as_text() {
        assert_eq!(
            render(&json!({"path": "/w/a", "content": "event 1", "total_lines": 1})),
            "event 1"
        );
        assert_eq!(
            render(&json!({"stdout": "A", "stderr": "", "exit_code": 3, "termination": "exit 3"})),
            "A(exit status 3)"
        );
        assert_eq!(
            render(
                &json!({"stdout": "", "stderr": "", "exit_code": null, "termination": "timed out"})
            ),
            "(timed out)"
        );
        assert_eq!(
            render(
                &json!({"path": "/w", "entries": [{"name": "a", "kind": "dir"}, {"name": "b", "kind": "file"}]})
            ),
            "a/\nb"
        );
        assert_eq!(render(&json!("plain")), "plain");
        assert_eq!(render(&json!({"deleted": true})), r#"{"deleted":true}"#);
    }

    #[test]
    fn other_verbs_and_defaults() {
        assert_eq!(
            tools("list `/workspace` then delete `/workspace/a`")[1].0,
            "delete_file"
        );
        assert_eq!(tools("list `/workspace`")[0].0, "list_dir");
        assert_eq!(tools("`/etc/hostname`")[0].0, "view_file");
        assert_eq!(tools("`echo hi`")[0].0, "code_execution");
        assert_eq!(
            tools("replace 'a' with \"b\" in `/w/x`")[0].1,
            json!({"path": "/w/x", "old_content": "a", "new_content": "b"})
        );
        assert!(tools("hello there").is_empty());
    }
}
