//! `hookbox hooks gate --protocol X`: the command an agent CLI's own pre-tool hook runs, so the
//! project's hookbox policy decides that CLI's tool calls.
//!
//! One run: read the CLI's hook payload from stdin (bounded), read it as hookbox tool calls with
//! the dialect tables (`hookbox_hooks::dialect::tools::from_vendor`), evaluate the project's
//! `.agents/hooks.json` through the same engine and the same sandbox as `hooks test --root`
//! (the project directory stands for `/`; its directories are bound read-only unless
//! `--writable`), and print the decision in the CLI's protocol
//! (`hookbox_hooks::dialect::answer_out`).
//!
//! Paths: the CLI sends host paths; a path inside the project becomes the sandbox path under
//! `/` (`<project>/src/a.rs` → `/src/a.rs`), as `hooks test --root <project>` sees it; a path
//! outside it is left as it is. A rewrite maps back the same way.
//!
//! Fail closed: an unreadable or oversized payload, an event that is not the CLI's pre-tool
//! event, a policy file with errors, no policy with `--require-policy`, a sandbox that cannot be
//! built, or a policy that does not decide within `--deadline` all deny, in the CLI's protocol,
//! saying why. A vendor tool with no hookbox counterpart (`WebFetch`, `Grep`, `Task`, …) is not
//! something the policy can speak about: the gate answers nothing and the CLI's own rules apply.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use hookbox_hooks::decision::Decision;
use hookbox_hooks::dialect::answer_out::{self, VendorAnswer, Verdict};
use hookbox_hooks::dialect::tools::{self, HookboxCall, MappingError};
use hookbox_hooks::dialect::{Dialect, DialectSet, absolute_path};
use hookbox_hooks::{HookEngine, Loaded};
use hookbox_protocol::{HookEvent, ToolCall, ToolName};
use hookbox_rootfs::RootDir;
use serde_json::{Map, Value};
use tokio::io::AsyncReadExt as _;

/// The most a hook payload may hold (a `Write` of a large file carries its content).
pub const MAX_PAYLOAD_BYTES: u64 = 16 << 20;

/// How long the gate may take by default; shorter than the time `hooks install` gives the CLI
/// to wait ([`super::install::CLI_TIMEOUT_SECS`]), so the gate answers before the CLI gives up
/// (every CLI lets a call through when its hook times out).
pub const DEFAULT_DEADLINE_SECS: u64 = 100;

#[derive(Debug, Args)]
pub struct GateArgs {
    /// The CLI whose hook payload arrives on stdin and whose protocol the answer is in:
    /// claude-code, gemini-cli, codex, cursor or copilot.
    #[arg(long, value_name = "CLI", value_parser = parse_protocol)]
    protocol: Dialect,
    /// The project directory, which stands for the sandbox root `/` (default: the current
    /// directory). An empty value is an error (and so a deny).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Deny every call when the project has no `.agents/hooks.json` (what a project-level
    /// `hooks install` writes, so that a gate run from the wrong directory cannot open).
    #[arg(long)]
    require_policy: bool,
    /// Deny when the policy has not decided within this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_DEADLINE_SECS)]
    deadline: u64,
    /// Let the policy's command handlers write to the project (read-only by default).
    #[arg(long)]
    writable: bool,
    /// Append every handler's decision, and a failure of the gate itself (group
    /// `hookbox-gate`, a deny), to this audit log (the format of `hookbox serve --audit-log`).
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// The environment id hooks see in their payload (as in `hooks test`).
    #[arg(long, default_value = "env_local")]
    environment_id: String,
    /// The environment's `network` policy as JSON (or @FILE), which http handlers go through
    /// (as in `hooks test`). Default: none, so every http handler is refused.
    #[arg(long, value_name = "JSON|@FILE")]
    network: Option<String>,
    /// Where the credential store lives (default: $HOOKBOX_DATA_DIR or ~/.local/share/hookbox).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    // Never the files of the CLI the gate answers: see [`others_dialects`].
    #[command(flatten)]
    dialects: super::hooks::DialectsArg,
    #[command(flatten)]
    runtime: super::env::RuntimeArgs,
}

fn parse_protocol(s: &str) -> Result<Dialect, String> {
    match s.parse::<Dialect>() {
        Ok(Dialect::Agents) | Err(_) => Err(format!(
            "unknown protocol `{s}` (expected claude-code, gemini-cli, codex, cursor or copilot)"
        )),
        Ok(d) => Ok(d),
    }
}

pub fn run(args: GateArgs) -> anyhow::Result<ExitCode> {
    let dialect = args.protocol;
    let answer = match decide(&args) {
        Ok((verdict, context)) => answer_out::pre_tool(dialect, &verdict, &context),
        Err(reason) => {
            // The gate's own failure, as a handler failure of the group `hookbox-gate`: an
            // audit line like any other denied call's (with --audit-log).
            tracing::warn!(
                name: hookbox_protocol::events::HOOK_FAILED,
                event = HookEvent::PreToolExecution.as_str(),
                tool = "",
                group = "hookbox-gate",
                handler_type = "gate",
                handler = %format!("hooks gate --protocol {dialect}"),
                handler_index = 0u64,
                decision = "deny",
                failure = %reason,
                "hooks gate failed; denying"
            );
            answer_out::failure(dialect, &reason)
        }
    };
    emit(&answer);
    Ok(ExitCode::from(answer.exit_code))
}

fn emit(answer: &VendorAnswer) {
    if !answer.stdout.is_empty() {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", answer.stdout);
        let _ = out.flush();
    }
    if !answer.stderr.is_empty() {
        eprintln!("{}", answer.stderr);
    }
}

/// The verdict and the context for the model, or why the gate could not decide.
fn decide(args: &GateArgs) -> Result<(Verdict, Vec<String>), String> {
    if let Some(path) = &args.audit_log {
        let layer = hookbox_server::audit::AuditLayer::open(
            hookbox_server::audit::AuditOptions::new(path.clone()),
        )
        .map_err(|e| format!("cannot open the audit log {}: {e}", path.display()))?;
        hookbox_server::audit::install(layer);
    }
    let root = match &args.root {
        Some(r) if r.as_os_str().is_empty() => {
            return Err("--root is empty (the CLI did not say where its project is)".into());
        }
        Some(r) => r.clone(),
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    let root = root
        .canonicalize()
        .map_err(|e| format!("cannot use {} as the project: {e}", root.display()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let deadline = Duration::from_secs(args.deadline);
    runtime.block_on(async {
        match tokio::time::timeout(deadline, evaluate(args, &root)).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "the policy did not decide within {} s",
                args.deadline
            )),
        }
    })
}

async fn read_payload() -> Result<Value, String> {
    let mut bytes = Vec::new();
    tokio::io::stdin()
        .take(MAX_PAYLOAD_BYTES + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| format!("cannot read the hook payload: {e}"))?;
    if bytes.len() as u64 > MAX_PAYLOAD_BYTES {
        return Err(format!(
            "the hook payload is over {} MiB",
            MAX_PAYLOAD_BYTES >> 20
        ));
    }
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("the hook payload is not JSON: {e}"))?;
    if !value.is_object() {
        return Err("the hook payload is not a JSON object".into());
    }
    Ok(value)
}

/// What the gate needs from one CLI's pre-tool payload.
#[derive(Debug, PartialEq)]
struct Payload {
    tool_name: String,
    tool_input: Value,
    cwd: Option<String>,
    mcp_server: Option<String>,
}

/// Reads `dialect`'s pre-tool payload (Copilot's camelCase form, or the snake_case form its
/// PascalCase event names select).
fn read_vendor_payload(dialect: Dialect, payload: &Value) -> Result<Payload, String> {
    let str_field = |key: &str| payload.get(key).and_then(Value::as_str).map(str::to_owned);
    if let Some(event) = str_field("hook_event_name") {
        let expected = answer_out::pre_tool_event(dialect);
        let copilot_pascal = dialect == Dialect::Copilot && event == "PreToolUse";
        if event != expected && !copilot_pascal {
            return Err(format!(
                "the gate answers {expected} only, and was run for {event}"
            ));
        }
    }
    let (name_key, input_key) = match (dialect, payload.get("toolName")) {
        (Dialect::Copilot, Some(_)) => ("toolName", "toolArgs"),
        _ => ("tool_name", "tool_input"),
    };
    let tool_name =
        str_field(name_key).ok_or_else(|| format!("the hook payload has no `{name_key}`"))?;
    // Copilot's older payloads and Cursor's MCP calls carry the input as a JSON string.
    let tool_input = match payload.get(input_key) {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(text)) => serde_json::from_str(text)
            .map_err(|e| format!("`{input_key}` is a string that is not JSON: {e}"))?,
        Some(v) => v.clone(),
    };
    if !tool_input.is_object() {
        return Err(format!("`{input_key}` is not a JSON object"));
    }
    Ok(Payload {
        tool_name,
        tool_input,
        cwd: str_field("cwd"),
        mcp_server: str_field("mcp_server_name"),
    })
}

/// The vendor argument names that hold a path (the dialect tables read these).
const VENDOR_PATH_KEYS: [&str; 3] = ["file_path", "path", "dir_path"];

/// Relative vendor paths made absolute against the CLI's working directory (the dialect tables
/// would otherwise read them against an environment's `/workspace`).
fn absolutize_vendor_paths(input: &mut Value, cwd: &Path) {
    let Value::Object(map) = input else { return };
    for key in VENDOR_PATH_KEYS {
        if let Some(Value::String(p)) = map.get_mut(key)
            && !p.starts_with('/')
        {
            *p = cwd.join(&*p).to_string_lossy().into_owned();
        }
    }
}

/// A host path as the sandbox sees it: inside the project, relative to `/`; else unchanged.
fn to_sandbox(root: &Path, path: &str) -> String {
    let path = absolute_path(path);
    match Path::new(&path).strip_prefix(root) {
        Ok(rest) => format!("/{}", rest.to_string_lossy()),
        Err(_) => path,
    }
}

fn map_path(args: &mut Value, f: impl Fn(&str) -> String) {
    if let Some(Value::String(p)) = args.get_mut("path") {
        *p = f(p);
    }
}

async fn evaluate(args: &GateArgs, root: &Path) -> Result<(Verdict, Vec<String>), String> {
    let dialect = args.protocol;
    let raw = read_payload().await?;
    let mut payload = read_vendor_payload(dialect, &raw)?;
    let cwd = payload
        .cwd
        .as_deref()
        .filter(|c| c.starts_with('/'))
        .map_or_else(|| root.to_path_buf(), PathBuf::from);
    absolutize_vendor_paths(&mut payload.tool_input, &cwd);
    let calls = match tools::from_vendor(
        dialect,
        &payload.tool_name,
        &payload.tool_input,
        payload.mcp_server.as_deref(),
    ) {
        Ok(calls) => calls,
        Err(MappingError::NoHookboxTool { .. }) => {
            tracing::info!(protocol = %dialect, tool = %payload.tool_name, "no hookbox tool; the CLI decides");
            return Ok((Verdict::Allow, Vec::new()));
        }
        Err(e) => {
            return Ok((
                Verdict::Deny {
                    reason: e.to_string(),
                },
                Vec::new(),
            ));
        }
    };
    let mut sandbox_calls = calls.clone();
    for call in &mut sandbox_calls {
        map_path(&mut call.args, |p| to_sandbox(root, p));
    }

    let tree = RootDir::open(root)
        .map_err(|e| format!("cannot use {} as the sandbox root: {e}", root.display()))?;
    let dialects = others_dialects(dialect, args.dialects.hook_dialects);
    let loaded = hookbox_hooks::discover::load_with_dialects(&tree, dialects);
    check_policy(&loaded, args.require_policy, root)?;
    // Gate entries read back from vendor files are already out (the loader drops them).
    let config = &loaded.config;
    let network =
        super::hook_runtime::read_network(args.network.as_deref()).map_err(|e| format!("{e:#}"))?;
    let engine = HookEngine::new(
        super::hook_runtime::command_runner(
            root,
            false,
            &args.runtime,
            !args.writable,
            sandbox_calls.iter().any(|call| {
                super::hook_runtime::may_run_commands(
                    config,
                    HookEvent::PreToolExecution,
                    Some(&call.tool),
                )
            }),
        )
        .map(|(runner, _)| runner)
        .map_err(|e| format!("{e:#}"))?,
        super::hook_runtime::http_poster(
            &args.environment_id,
            network.as_ref(),
            args.data_dir.clone(),
            None,
        )
        .map_err(|e| format!("{e:#}"))?,
    );

    let mut context = Vec::new();
    let mut ask = None;
    let mut updated = None;
    for call in &sandbox_calls {
        let dispatch = match call.tool.parse::<ToolName>() {
            Ok(name) => {
                let tool_call = ToolCall {
                    name,
                    args: call.args.clone(),
                };
                engine
                    .pre_tool(config, &tool_call, &args.environment_id)
                    .await
            }
            Err(_) => {
                engine
                    .named_tool(
                        config,
                        HookEvent::PreToolExecution,
                        &call.tool,
                        &call.args,
                        &args.environment_id,
                        None,
                    )
                    .await
            }
        };
        context.extend(dispatch.additional_context);
        match dispatch.decision {
            Decision::Deny { reason, .. } => return Ok((Verdict::Deny { reason }, context)),
            Decision::Ask { reason, .. } => ask = ask.or(Some(reason)),
            Decision::Allow => {}
        }
        if let Some(new_args) = dispatch.updated_args {
            updated = Some((call.clone(), new_args));
        }
    }
    if let Some(reason) = ask {
        return Ok((Verdict::Ask { reason }, context));
    }
    let Some((call, new_args)) = updated else {
        return Ok((Verdict::Allow, context));
    };
    if sandbox_calls.len() != 1 {
        return Ok((
            Verdict::Deny {
                reason: format!(
                    "the policy rewrote one of the {} calls that {} makes of one {} call, which cannot be expressed",
                    sandbox_calls.len(),
                    dialect,
                    payload.tool_name
                ),
            },
            context,
        ));
    }
    let verdict = match rewrite(dialect, root, &payload, &calls[0], &call, new_args) {
        Ok(tool_input) => Verdict::Rewrite { tool_input },
        Err(reason) => Verdict::Deny { reason },
    };
    Ok((verdict, context))
}

/// The vendor dialects the gate for `protocol` reads: the requested ones but the CLI's own
/// (and Claude Code's for Cursor and Copilot, which run Claude's files themselves), so that no
/// hook runs twice.
fn others_dialects(protocol: Dialect, requested: DialectSet) -> DialectSet {
    let own = |d: Dialect| {
        d == protocol
            || (d == Dialect::ClaudeCode && matches!(protocol, Dialect::Cursor | Dialect::Copilot))
    };
    requested.iter().filter(|d| !own(*d)).collect()
}

fn check_policy(loaded: &Loaded, require: bool, root: &Path) -> Result<(), String> {
    if let Some(d) = loaded
        .diagnostics
        .iter()
        .find(|d| d.severity == hookbox_hooks::Severity::Error)
    {
        return Err(format!(
            "the policy has errors (`hookbox hooks check --root {}` lists them): {d}",
            root.display()
        ));
    }
    if require && loaded.files.is_empty() {
        return Err(format!(
            "{} has no .agents/hooks.json (the gate was installed with --require-policy)",
            root.display()
        ));
    }
    Ok(())
}

/// The CLI's `tool_input` for the policy's rewrite of `sandbox_call` into `new_args`: the
/// model's input with exactly the fields the rewrite changed replaced (so fields hookbox has
/// no name for, such as a description or a working directory, stay as the model sent them).
fn rewrite(
    dialect: Dialect,
    root: &Path,
    payload: &Payload,
    host_call: &HookboxCall,
    sandbox_call: &HookboxCall,
    mut new_args: Value,
) -> Result<Value, String> {
    let original_sandbox_path = sandbox_call.args.get("path").and_then(Value::as_str);
    let original_host_path = host_call.args.get("path").and_then(Value::as_str);
    map_path(&mut new_args, |p| {
        match (original_sandbox_path, original_host_path) {
            (Some(sandbox), Some(host)) if absolute_path(p) == sandbox => host.to_owned(),
            _ => root
                .join(absolute_path(p).trim_start_matches('/'))
                .to_string_lossy()
                .into_owned(),
        }
    });
    let cannot = |why: String| {
        format!(
            "the policy's rewrite cannot be expressed as {dialect}'s {}: {why}",
            payload.tool_name
        )
    };
    let before = tools::to_vendor(dialect, &host_call.tool, &host_call.args)
        .map_err(|e| cannot(e.to_string()))?;
    let after =
        tools::to_vendor(dialect, &host_call.tool, &new_args).map_err(|e| cannot(e.to_string()))?;
    let (Some(before), Some(after), 1, 1) =
        (before.first(), after.first(), before.len(), after.len())
    else {
        return Err(cannot("it would take several calls".into()));
    };
    if after.tool_name != payload.tool_name {
        return Err(cannot(format!("it would be a {} call", after.tool_name)));
    }
    let mut input = payload.tool_input.clone();
    if let (Value::Object(input), Value::Object(new)) = (&mut input, &after.tool_input) {
        for (key, value) in new {
            if before.tool_input.get(key) != Some(value) {
                input.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(name: &str) -> Value {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/gate-payloads")
            .join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// The payloads each CLI really sent (captured from the CLIs tests/agent_clis runs).
    #[test]
    fn each_clis_real_payload_reads_as_its_shell_call() {
        for (dialect, file, tool) in [
            (Dialect::ClaudeCode, "claude-code.json", "Bash"),
            (Dialect::GeminiCli, "gemini-cli.json", "run_shell_command"),
            (Dialect::Codex, "codex.json", "Bash"),
            (Dialect::Copilot, "copilot.json", "bash"),
            (Dialect::Copilot, "copilot-pascal.json", "Bash"),
        ] {
            let p = read_vendor_payload(dialect, &fixture(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(p.tool_name, tool, "{file}");
            assert!(
                p.tool_input["command"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("rm -r")),
                "{file}"
            );
            assert_eq!(p.cwd.as_deref(), Some("/home/dev/project"), "{file}");
        }
    }

    #[test]
    fn another_event_or_a_payload_without_a_tool_is_refused() {
        let post = json!({"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {}});
        assert!(read_vendor_payload(Dialect::ClaudeCode, &post).is_err());
        let none = json!({"hook_event_name": "PreToolUse"});
        assert!(read_vendor_payload(Dialect::ClaudeCode, &none).is_err());
        let string_args = json!({"toolName": "bash", "toolArgs": "{\"command\": \"ls\"}"});
        let p =
            read_vendor_payload(Dialect::Copilot, &string_args).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.tool_input, json!({"command": "ls"}));
        let not_json = json!({"toolName": "bash", "toolArgs": "rm -rf /"});
        assert!(read_vendor_payload(Dialect::Copilot, &not_json).is_err());
    }

    #[test]
    fn the_answering_clis_own_files_are_never_read_by_its_gate() {
        let all = DialectSet::all();
        let read = |p| others_dialects(p, all);
        assert!(!read(Dialect::ClaudeCode).contains(Dialect::ClaudeCode));
        assert!(read(Dialect::ClaudeCode).contains(Dialect::GeminiCli));
        assert!(!read(Dialect::Cursor).contains(Dialect::ClaudeCode));
        assert!(!read(Dialect::Copilot).contains(Dialect::ClaudeCode));
        assert!(!read(Dialect::Copilot).contains(Dialect::Copilot));
        assert!(read(Dialect::Codex).contains(Dialect::ClaudeCode));
        assert_eq!(
            others_dialects(Dialect::Codex, DialectSet::NONE),
            DialectSet::NONE
        );
    }

    #[test]
    fn project_paths_become_sandbox_paths_and_others_stay() {
        let root = Path::new("/home/dev/project");
        assert_eq!(to_sandbox(root, "/home/dev/project/src/a.rs"), "/src/a.rs");
        assert_eq!(
            to_sandbox(root, "/home/dev/project/../other/x"),
            "/home/dev/other/x"
        );
        assert_eq!(
            to_sandbox(root, "/home/dev/projectile/x"),
            "/home/dev/projectile/x"
        );
        assert_eq!(to_sandbox(root, "/etc/passwd"), "/etc/passwd");
        let mut input = json!({"file_path": "src/a.rs", "content": "x"});
        absolutize_vendor_paths(&mut input, root);
        assert_eq!(input["file_path"], "/home/dev/project/src/a.rs");
    }

    #[test]
    fn a_rewrite_replaces_only_the_fields_it_changed() {
        let root = Path::new("/p");
        let payload = Payload {
            tool_name: "Bash".into(),
            tool_input: json!({"command": "rm -rf build", "description": "clean"}),
            cwd: None,
            mcp_server: None,
        };
        let call = HookboxCall {
            tool: "code_execution".into(),
            args: json!({"code": "rm -rf build", "language": "bash"}),
        };
        let out = rewrite(
            Dialect::ClaudeCode,
            root,
            &payload,
            &call,
            &call,
            json!({"code": "rm -r build", "language": "bash"}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            out,
            json!({"command": "rm -r build", "description": "clean"})
        );
        let write = Payload {
            tool_name: "Write".into(),
            tool_input: json!({"file_path": "/p/src/a.rs", "content": "x"}),
            cwd: None,
            mcp_server: None,
        };
        let host = HookboxCall {
            tool: "write_to_file".into(),
            args: json!({"path": "/p/src/a.rs", "content": "x"}),
        };
        let sandbox = HookboxCall {
            tool: "write_to_file".into(),
            args: json!({"path": "/src/a.rs", "content": "x"}),
        };
        let out = rewrite(
            Dialect::ClaudeCode,
            root,
            &write,
            &host,
            &sandbox,
            json!({"path": "/src/b.rs", "content": "x"}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out["file_path"], "/p/src/b.rs");
        // One Edit rewritten into a two-chunk edit would be two Edits: not expressible.
        let edit = Payload {
            tool_name: "Edit".into(),
            tool_input: json!({"file_path": "/p/a.txt", "old_string": "a", "new_string": "b"}),
            cwd: None,
            mcp_server: None,
        };
        let host = HookboxCall {
            tool: "replace_file_content".into(),
            args: json!({"path": "/p/a.txt", "old_content": "a", "new_content": "b"}),
        };
        let two = json!({"path": "/a.txt", "chunks": [
            {"old_content": "a", "new_content": "b"}, {"old_content": "c", "new_content": "d"}]});
        let err = rewrite(Dialect::ClaudeCode, root, &edit, &host, &host, two);
        assert!(
            err.as_ref().is_err_and(|e| e.contains("several calls")),
            "{err:?}"
        );
    }
}
