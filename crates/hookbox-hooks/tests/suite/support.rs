//! Shared helpers: an engine on the host runner, configs from JSON, tool calls.

use std::path::Path;
use std::sync::Arc;

use hookbox_hooks::command::LocalRunner;
use hookbox_hooks::http::DirectPoster;
use hookbox_hooks::{Dispatch, HookEngine, HooksConfig};
use hookbox_protocol::{ToolCall, ToolName};

pub fn engine_in(dir: &Path) -> HookEngine {
    let runner = LocalRunner {
        cwd: Some(dir.to_path_buf()),
        env: Vec::new(),
    };
    HookEngine::new(Arc::new(runner), Arc::new(DirectPoster::new().unwrap()))
}

pub fn config(json: &str) -> HooksConfig {
    let (groups, diagnostics) =
        hookbox_hooks::config::parse("/.agents/hooks.json", json.as_bytes());
    assert!(
        diagnostics
            .iter()
            .all(|d| d.severity != hookbox_hooks::Severity::Error),
        "{diagnostics:#?}"
    );
    HooksConfig { groups }
}

/// A config with one group, one rule, and the given handlers for `event`.
pub fn single(event: &str, matcher: &str, handlers: serde_json::Value) -> HooksConfig {
    config(
        &serde_json::json!({ "g": { event: [ { "matcher": matcher, "hooks": handlers } ] } })
            .to_string(),
    )
}

pub fn command(cmd: &str, timeout: f64) -> serde_json::Value {
    serde_json::json!({"type": "command", "command": cmd, "timeout": timeout})
}

pub fn call(tool: ToolName) -> ToolCall {
    let args = match tool {
        ToolName::CodeExecution => serde_json::json!({"code": "ls", "language": "bash"}),
        _ => serde_json::json!({"path": "/workspace/x"}),
    };
    ToolCall { name: tool, args }
}

pub fn outcomes(dispatch: &Dispatch) -> Vec<&'static str> {
    dispatch.trace.iter().map(|t| t.outcome.label()).collect()
}
