//! What `hooks test` and `hooks gate` run a policy's handlers with: command handlers in a
//! sandbox whose `/` is the project tree (as for an environment's hooks), http handlers through
//! the same egress rules as at runtime, and the network policy they read.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use hookbox_egress::policy::NetworkPolicy;
use hookbox_egress::{Egress, EgressConfig, EgressPoster};
use hookbox_environments::runner::{Launcher, SandboxLayout, SandboxOptions, SandboxRunner};
use hookbox_hooks::command::CommandRunner;
use hookbox_hooks::config::{HandlerKind, HooksConfig};
use hookbox_protocol::HookEvent;
use hookbox_sandbox::spec::Isolation;

/// Where `hooks test` runs command handlers: a sandbox whose `/` is `root`, built exactly as
/// for an environment's hooks (namespaces, Landlock, seccomp), so that handler paths such as
/// `/.agents/hooks-scripts/gate.py` and their view of the filesystem are the runtime's.
/// `read_only`: the tree's directories are bound read-only (`hooks gate`).
/// Also returns the host identity hooks run as (`None`: hookbox's own).
pub(super) fn command_runner(
    root: &std::path::Path,
    insecure_no_isolation: bool,
    runtime: &super::env::RuntimeArgs,
    read_only: bool,
    launches_soon: bool,
) -> anyhow::Result<(
    Arc<dyn CommandRunner>,
    Option<hookbox_sandbox::spec::Identity>,
)> {
    let root = root
        .canonicalize()
        .with_context(|| format!("cannot use {} as the sandbox root", root.display()))?;
    let launcher = Launcher::from_env_or_current_exe(super::env::SANDBOX_EXEC_SUBCOMMAND)
        .context("locating the sandbox launcher")?;
    let mut options = SandboxOptions::new(launcher);
    // `hooks test` and `hooks gate` exit right after their hooks ran, and mount no disk.
    options.one_shot = true;
    options.unmount_when_closed = false;
    if insecure_no_isolation {
        eprintln!(
            "WARNING: --insecure-no-isolation: hook commands run directly on this machine, with NO sandbox"
        );
        options.isolation = Isolation::InsecureNone;
    } else if let Some(feature) = hookbox_sandbox::features::missing().into_iter().next() {
        bail!(
            "this kernel lacks {feature}, which the sandbox needs; refusing to run hooks without isolation (--insecure-no-isolation overrides, unsafely)"
        );
    }
    runtime.apply(&mut options)?;
    if launches_soon {
        options.start_launcher_early();
    }
    let mut layout = SandboxLayout::for_tree(root.clone(), options.identities())
        .with_context(|| format!("preparing a sandbox for {}", root.display()))?;
    layout.runtime = options.runtime;
    layout.read_only = read_only;
    let identity = match options.isolation {
        Isolation::Full => layout.identity,
        Isolation::InsecureNone => None,
    };
    let runner = SandboxRunner::new(Arc::new(options), layout)
        .with_context(|| format!("preparing a sandbox for {}", root.display()))?;
    Ok((Arc::new(runner), identity))
}

/// Whether `config` has a command handler that a call of `tool` (of any tool: `None`) may run
/// at `event`, matched as the engine matches rules ([`hookbox_hooks::engine::matching_rules`]):
/// then the sandbox's launcher is started early ([`command_runner`]'s `launches_soon`).
pub(super) fn may_run_commands(config: &HooksConfig, event: HookEvent, tool: Option<&str>) -> bool {
    let runs_commands = |group: &hookbox_hooks::config::Group,
                         rule: &hookbox_hooks::config::Rule| {
        group.enabled
            && rule
                .handlers
                .iter()
                .any(|h| matches!(h.kind, HandlerKind::Command { .. }))
    };
    match tool {
        Some(tool) => hookbox_hooks::engine::matching_rules(config, event, tool)
            .any(|(group, rule)| runs_commands(group, rule)),
        None => config.groups.iter().any(|group| {
            group
                .rules(event)
                .iter()
                .any(|rule| runs_commands(group, rule))
        }),
    }
}

pub(super) fn read_network(arg: Option<&str>) -> anyhow::Result<Option<serde_json::Value>> {
    let Some(arg) = arg else { return Ok(None) };
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --network file {path}"))?,
        None => arg.to_owned(),
    };
    let value = serde_json::from_str(&text)
        .with_context(|| format!("--network is not valid JSON: {text}"))?;
    Ok(Some(value))
}

/// The poster of a configuration without http handlers: never called, and refusing if it were.
#[derive(Debug)]
pub(super) struct NoHttpHandlers;

#[async_trait::async_trait]
impl hookbox_hooks::http::HttpPoster for NoHttpHandlers {
    async fn post(
        &self,
        _: hookbox_hooks::http::HttpRequest,
    ) -> Result<hookbox_hooks::http::HttpResponse, hookbox_hooks::http::HttpError> {
        Err(hookbox_hooks::http::HttpError::Other(
            "no http handler was loaded".into(),
        ))
    }
}

/// http handlers go through the same egress rules as at runtime (allowlist, SSRF defences,
/// header injection, credentials from the data dir's credential store).
pub(super) fn http_poster(
    environment_id: &str,
    network: Option<&serde_json::Value>,
    data_dir: Option<PathBuf>,
    database: Option<&str>,
) -> anyhow::Result<Arc<dyn hookbox_hooks::http::HttpPoster>> {
    let policy = NetworkPolicy::from_json(network).context("invalid --network policy")?;
    let data_dir = match data_dir {
        Some(dir) => dir,
        None => hookbox_environments::environment::default_data_dir()?,
    };
    // Opened only if the policy injects a credential.
    let credentials = hookbox_credentials::LazyStoreCredentials::new(&data_dir, database);
    let config = EgressConfig::new(environment_id, policy, Arc::new(credentials));
    let egress = Egress::new(config).context("cannot set up egress")?;
    Ok(Arc::new(hookbox_environments::network::HookPoster(
        EgressPoster::new(Arc::new(egress)),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> HooksConfig {
        let (groups, diagnostics) =
            hookbox_hooks::config::parse(".agents/hooks.json", json.as_bytes());
        assert!(
            diagnostics
                .iter()
                .all(|d| d.severity != hookbox_hooks::Severity::Error),
            "{diagnostics:?}"
        );
        HooksConfig { groups }
    }

    #[test]
    fn a_launcher_starts_early_only_for_a_command_handler_the_call_may_run() {
        let pre = HookEvent::PreToolExecution;
        let command = config(
            r#"{"hooks":{"pre_tool_execution":[{"matcher":"code_execution","hooks":[{"type":"command","command":"true"}]}]}}"#,
        );
        assert!(may_run_commands(&command, pre, Some("code_execution")));
        assert!(may_run_commands(&command, pre, None));
        assert!(!may_run_commands(&command, pre, Some("view_file")));
        assert!(!may_run_commands(
            &command,
            HookEvent::PostToolExecution,
            Some("code_execution")
        ));
        let http = config(
            r#"{"hooks":{"pre_tool_execution":[{"matcher":"","hooks":[{"type":"http","url":"https://hooks.example/"}]}]}}"#,
        );
        assert!(!may_run_commands(&http, pre, Some("code_execution")));
        assert!(!may_run_commands(&config(r#"{"hooks":{}}"#), pre, None));
        // A remote MCP tool is matched only by a matcher written for one, as the engine does.
        let all = config(
            r#"{"hooks":{"pre_tool_execution":[{"matcher":"","hooks":[{"type":"command","command":"true"}]}]}}"#,
        );
        assert!(may_run_commands(&all, pre, Some("view_file")));
        assert!(!may_run_commands(&all, pre, Some("mcp:docs/search")));
        let mcp = config(
            r#"{"hooks":{"pre_tool_execution":[{"matcher":"mcp:docs/.*","hooks":[{"type":"command","command":"true"}]}]}}"#,
        );
        assert!(may_run_commands(&mcp, pre, Some("mcp:docs/search")));
        // A disabled group runs nothing.
        let mut disabled = command;
        disabled.groups[0].enabled = false;
        assert!(!may_run_commands(&disabled, pre, Some("code_execution")));
    }
}
