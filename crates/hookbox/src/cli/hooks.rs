//! `hookbox hooks check` and `hookbox hooks test`: the hooks engine for a person at a terminal.
//!
//! `check` shows what the runtime will make of the hooks files (diagnostics, lint, and which
//! tools each rule covers). `test` runs one tool call's hooks for real — real matcher, real
//! handlers, real merge — and prints the decision trace, without running the tool itself.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use hookbox_egress::policy::NetworkPolicy;
use hookbox_egress::{Egress, EgressConfig, EgressPoster};
use hookbox_environments::runner::{Launcher, SandboxLayout, SandboxOptions, SandboxRunner};
use hookbox_hooks::command::CommandRunner;
use hookbox_hooks::config::{Group, HandlerKind, HooksConfig};
use hookbox_hooks::decision::{Decision, Dispatch, Outcome};
use hookbox_hooks::diagnostic::{Diagnostic, Severity};
use hookbox_hooks::{HookEngine, Loaded};
use hookbox_protocol::{HookEvent, ToolCall, ToolName};
use hookbox_rootfs::RootDir;
use hookbox_sandbox::spec::Isolation;

#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Validate hooks files: diagnostics, lint, and which tools each rule covers.
    ///
    /// With FILEs, checks those files. Otherwise discovers `/.agents/hooks.json` and
    /// `/workspace/.agents/hooks.json` under --root, as the runtime does. Exits 1 when any
    /// part of a file would be skipped.
    Check(CheckArgs),
    /// Run the hooks of one tool call (or, with --event pre-interaction|post-interaction, of one
    /// interaction) for real and print the decision trace.
    ///
    /// Command handlers run in a sandbox whose `/` is --root, so paths such as
    /// `/.agents/hooks-scripts/gate.py` work unchanged. The tool itself is not run.
    Test(Box<TestArgs>),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The directory that stands for the sandbox root `/`.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Check these files instead of discovering them under --root.
    files: Vec<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum EventArg {
    /// pre_tool_execution
    Pre,
    /// post_tool_execution
    Post,
    /// pre_interaction (hookbox extension): needs --input
    PreInteraction,
    /// post_interaction (hookbox extension): takes --status and --output
    PostInteraction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Expect {
    Allow,
    Deny,
    /// A pre hook asks a person (hookbox extension).
    Ask,
}

impl Expect {
    fn label(self) -> &'static str {
        match self {
            Expect::Allow => "allow",
            Expect::Deny => "deny",
            Expect::Ask => "ask",
        }
    }
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The directory that stands for the sandbox root `/`.
    #[arg(long)]
    root: PathBuf,
    /// The tool being called (with --event pre or post).
    #[arg(long, value_parser = parse_tool, required_if_eq_any = [("event", "pre"), ("event", "post")])]
    tool: Option<ToolName>,
    /// The tool call's arguments, as JSON.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Which hooks to run.
    #[arg(long, value_enum, default_value = "pre")]
    event: EventArg,
    /// With --event post: the tool's error text, passed to hooks as `error`.
    #[arg(long)]
    error: Option<String>,
    /// The environment id hooks see in their payload.
    #[arg(long, default_value = "env_local")]
    environment_id: String,
    /// With --event pre-interaction: the user's input text.
    #[arg(long, required_if_eq("event", "pre-interaction"))]
    input: Option<String>,
    /// With --event post-interaction: how the turn ended.
    #[arg(long, default_value = "completed")]
    status: String,
    /// With --event post-interaction: the model's final text.
    #[arg(long)]
    output: Option<String>,
    /// With the interaction events: the agent, which their matchers match.
    #[arg(long, default_value = "antigravity-preview-09-2026")]
    agent: String,
    /// Exit 1 unless the decision is this one (for scripts and CI).
    #[arg(long, value_enum)]
    expect: Option<Expect>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// The environment's `network` policy as JSON (or @FILE), which http handlers go through
    /// exactly as at runtime. Default: none, so every http handler is refused (and fails open).
    #[arg(long, value_name = "JSON|@FILE")]
    network: Option<String>,
    /// Where the credential store lives (default: $HOOKBOX_DATA_DIR or ~/.local/share/hookbox).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Where those credentials live when not in the data dir (`hookbox serve --database`).
    #[command(flatten)]
    database: super::args::DatabaseArg,
    /// Run command handlers WITHOUT any isolation, on this machine, with --root as the working
    /// directory (paths like /.agents/... then do not resolve). A warning is printed every run.
    #[arg(long)]
    insecure_no_isolation: bool,
    #[command(flatten)]
    runtime: super::env::RuntimeArgs,
}

fn parse_tool(s: &str) -> Result<ToolName, String> {
    s.parse::<ToolName>()
        .map_err(|e| match hookbox_hooks::matcher::suggest_tool(s) {
            Some(t) => format!("{e}; did you mean `{t}`?"),
            None => e.to_string(),
        })
}

pub fn run(cmd: HooksCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        HooksCommand::Check(args) => check(args),
        HooksCommand::Test(args) => test(*args),
    }
}

fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let loaded = if args.files.is_empty() {
        let root = RootDir::open(&args.root)
            .with_context(|| format!("cannot use {} as the sandbox root", args.root.display()))?;
        hookbox_hooks::load_from_root(&root)
    } else {
        load_files(&args.files)?
    };
    if args.json {
        let report = serde_json::json!({
            "files": loaded.files,
            "diagnostics": loaded.diagnostics,
            "groups": loaded.config.groups.iter().map(group_json).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render_check(&loaded, &args.root));
    }
    Ok(if loaded.has_errors() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Reads named files directly (they are the user's own files, not a sandbox tree).
fn load_files(files: &[PathBuf]) -> anyhow::Result<Loaded> {
    let mut loaded = Loaded::default();
    let mut groups = Vec::new();
    for path in files {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let label = path.display().to_string();
        let (mut file_groups, diagnostics) = hookbox_hooks::config::parse(&label, &bytes);
        groups.append(&mut file_groups);
        loaded.diagnostics.extend(diagnostics);
        loaded.files.push(label);
    }
    loaded.config = Arc::new(HooksConfig { groups });
    Ok(loaded)
}

fn render_check(loaded: &Loaded, root: &std::path::Path) -> String {
    let mut out = String::new();
    if loaded.files.is_empty() && loaded.diagnostics.is_empty() {
        let _ = writeln!(
            out,
            "no hooks files under {} (looked for /.agents/hooks.json and /workspace/.agents/hooks.json)",
            root.display()
        );
        return out;
    }
    for d in &loaded.diagnostics {
        let _ = writeln!(out, "{d}");
    }
    if !loaded.diagnostics.is_empty() {
        out.push('\n');
    }
    let mut current_file = None;
    for group in &loaded.config.groups {
        if current_file != Some(&group.file) {
            let _ = writeln!(out, "{}", group.file);
            current_file = Some(&group.file);
        }
        render_group(&mut out, group);
    }
    let errors = count(&loaded.diagnostics, Severity::Error);
    let warnings = count(&loaded.diagnostics, Severity::Warning);
    let _ = writeln!(
        out,
        "\n{} file(s), {} group(s): {errors} error(s), {warnings} warning(s)",
        loaded.files.len(),
        loaded.config.groups.len()
    );
    out
}

fn render_group(out: &mut String, group: &Group) {
    let state = if group.enabled { "" } else { " (disabled)" };
    let _ = writeln!(out, "  {}{state}", group.name);
    for event in HookEvent::ALL {
        for rule in group.rules(event) {
            let tools: Vec<&str> = rule
                .matcher
                .matched_tools()
                .into_iter()
                .map(ToolName::as_str)
                .collect();
            let covered = if !event.is_tool_event() {
                match &rule.matcher {
                    hookbox_hooks::matcher::Matcher::All => "every agent".to_owned(),
                    hookbox_hooks::matcher::Matcher::Invalid { .. } => "no agent".to_owned(),
                    hookbox_hooks::matcher::Matcher::Regex { .. } => {
                        "agents whose name it matches".to_owned()
                    }
                }
            } else if rule.matcher.is_for_mcp() {
                "remote MCP tools (mcp:<server>/<tool>) it matches".to_owned()
            } else if tools.is_empty() {
                "no tool".to_owned()
            } else {
                tools.join(", ")
            };
            let _ = writeln!(
                out,
                "    {event}[{}] matcher {:?} → {covered}",
                rule.index,
                matcher_pattern(&rule.matcher)
            );
            for h in &rule.handlers {
                let _ = writeln!(
                    out,
                    "      [{}] {} {:?} (timeout {} s)",
                    h.index,
                    h.kind.type_name(),
                    h.kind.target(),
                    h.timeout.as_secs_f64()
                );
            }
        }
    }
}

fn matcher_pattern(m: &hookbox_hooks::matcher::Matcher) -> &str {
    use hookbox_hooks::matcher::Matcher;
    match m {
        Matcher::All => "*",
        Matcher::Regex { pattern, .. } | Matcher::Invalid { pattern, .. } => pattern,
    }
}

fn group_json(group: &Group) -> serde_json::Value {
    let rules = |event: HookEvent| -> Vec<serde_json::Value> {
        group
            .rules(event)
            .iter()
            .map(|r| {
                serde_json::json!({
                    "index": r.index,
                    "matcher": matcher_pattern(&r.matcher),
                    "tools": r.matcher.matched_tools(),
                    "handlers": r.handlers.iter().map(|h| serde_json::json!({
                        "index": h.index,
                        "type": h.kind.type_name(),
                        "target": h.kind.target(),
                        "timeout_s": h.timeout.as_secs_f64(),
                        "headers": match &h.kind {
                            HandlerKind::Http { headers, .. } => headers.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
                            HandlerKind::Command { .. } => Vec::new(),
                        },
                    })).collect::<Vec<_>>(),
                })
            })
            .collect()
    };
    let mut json = serde_json::json!({
        "name": group.name,
        "file": group.file,
        "enabled": group.enabled,
        "pre_tool_execution": rules(HookEvent::PreToolExecution),
        "post_tool_execution": rules(HookEvent::PostToolExecution),
    });
    // The extensions' events appear only when the group uses them.
    for event in [HookEvent::PreInteraction, HookEvent::PostInteraction] {
        if !group.rules(event).is_empty() {
            json[event.as_str()] = serde_json::json!(rules(event));
        }
    }
    json
}

fn count(diagnostics: &[Diagnostic], severity: Severity) -> usize {
    diagnostics
        .iter()
        .filter(|d| d.severity == severity)
        .count()
}

fn test(args: TestArgs) -> anyhow::Result<ExitCode> {
    let call_args: serde_json::Value = serde_json::from_str(&args.args)
        .with_context(|| format!("--args is not valid JSON: {}", args.args))?;
    if !call_args.is_object() {
        bail!("--args must be a JSON object, like '{{\"path\": \"/workspace/a.txt\"}}'");
    }
    if args.error.is_some() && args.event != EventArg::Post {
        bail!("--error only applies to --event post");
    }
    let root = RootDir::open(&args.root)
        .with_context(|| format!("cannot use {} as the sandbox root", args.root.display()))?;
    for dir in ["workspace", "tmp"] {
        if !args.root.join(dir).is_dir() {
            eprintln!(
                "note: {} has no {dir}/, so /{dir} does not exist inside the sandbox",
                args.root.display()
            );
        }
    }
    let loaded = hookbox_hooks::load_from_root(&root);
    // Required by clap for the tool events; unused by the interaction events.
    let call = ToolCall {
        name: args.tool.unwrap_or(ToolName::CodeExecution),
        args: call_args,
    };
    let interaction = |event| {
        hookbox_protocol::InteractionHookPayload {
        interaction_id: "int_local".into(),
        environment_id: args.environment_id.clone(),
        agent: args.agent.clone(),
        input: args.input.as_ref().map(|text| {
            serde_json::json!([{"type": "user_input", "content": [{"type": "text", "text": text}]}])
        }),
        input_text: args.input.clone(),
        status: (event == HookEvent::PostInteraction).then(|| args.status.clone()),
        output: args.output.clone(),
        errors: None,
        hook_event_name: event,
    }
    };
    let network = read_network(args.network.as_deref())?;
    let engine = HookEngine::new(
        command_runner(&args.root, args.insecure_no_isolation, &args.runtime)?,
        http_poster(
            &args.environment_id,
            network.as_ref(),
            args.data_dir,
            args.database.database.as_deref(),
        )?,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let dispatch = runtime.block_on(async {
        match args.event {
            EventArg::Pre => {
                engine
                    .pre_tool(&loaded.config, &call, &args.environment_id)
                    .await
            }
            EventArg::Post => {
                engine
                    .post_tool(
                        &loaded.config,
                        &call,
                        &args.environment_id,
                        args.error.as_deref(),
                    )
                    .await
            }
            EventArg::PreInteraction => {
                engine
                    .interaction(&loaded.config, &interaction(HookEvent::PreInteraction))
                    .await
            }
            EventArg::PostInteraction => {
                engine
                    .interaction(&loaded.config, &interaction(HookEvent::PostInteraction))
                    .await
            }
        }
    });
    if args.json {
        let report = serde_json::json!({
            "files": loaded.files,
            "diagnostics": loaded.diagnostics,
            "dispatch": dispatch,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render_dispatch(&loaded, &dispatch));
    }
    let met = match args.expect {
        None => true,
        Some(expect) => expect.label() == dispatch.decision.label(),
    };
    Ok(if met {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn render_dispatch(loaded: &Loaded, dispatch: &Dispatch) -> String {
    let mut out = String::new();
    for d in &loaded.diagnostics {
        let _ = writeln!(out, "{d}");
    }
    let files = if loaded.files.is_empty() {
        "none".to_owned()
    } else {
        loaded.files.join(", ")
    };
    let _ = writeln!(out, "hooks files: {files}");
    let _ = writeln!(out, "{} {}", dispatch.event, dispatch.tool);
    if dispatch.trace.is_empty() {
        let _ = writeln!(out, "  no handler matches");
    }
    for t in &dispatch.trace {
        let _ = writeln!(
            out,
            "  {} {}[{}].hooks[{}] {} {:?}",
            t.group, dispatch.event, t.rule_index, t.handler_index, t.handler_type, t.target
        );
        let detail = match &t.outcome {
            Outcome::Allow => "allow".to_owned(),
            Outcome::AllowUpdated { updated_args } => {
                format!("allow with updated_args {updated_args}")
            }
            Outcome::InvalidUpdate {
                updated_args,
                reason,
            } => format!("deny: updated_args {updated_args} are invalid: {reason}"),
            Outcome::Deny { reason } => format!("deny: {reason}"),
            Outcome::Ask { reason } => format!("ask a person: {reason}"),
            Outcome::FailedOpen { failure } => format!("failed open: {failure}"),
            Outcome::FailedClosed { failure } => {
                format!("failed closed (on_failure: deny): {failure}")
            }
            Outcome::Completed => "completed".to_owned(),
            Outcome::Failed { failure } => format!("failed: {failure}"),
            Outcome::Skipped => "skipped: an earlier handler denied".to_owned(),
            Outcome::Disabled => "skipped: group disabled".to_owned(),
        };
        let _ = writeln!(out, "    → {detail} ({} ms)", t.duration_ms);
        if let Some(warning) = &t.warning {
            let _ = writeln!(out, "    warning: {warning}");
        }
        if let Some(stderr) = &t.stderr {
            for line in stderr.lines() {
                let _ = writeln!(out, "    stderr: {line}");
            }
        }
    }
    match &dispatch.decision {
        Decision::Allow => {
            let _ = writeln!(out, "decision: allow");
        }
        Decision::Deny { reason, group } => {
            let _ = writeln!(out, "decision: deny (group {group}): {reason}");
        }
        Decision::Ask { reason, group } => {
            let _ = writeln!(
                out,
                "decision: ask (group {group}): {reason}\n  (the API pauses the interaction `requires_action` until a person approves or denies the call)"
            );
        }
    }
    for context in &dispatch.additional_context {
        let _ = writeln!(out, "context for the model: {context}");
    }
    out
}

/// Where `hooks test` runs command handlers: a sandbox whose `/` is `root`, built exactly as
/// for an environment's hooks (namespaces, Landlock, seccomp), so that handler paths such as
/// `/.agents/hooks-scripts/gate.py` and their view of the filesystem are the runtime's.
fn command_runner(
    root: &std::path::Path,
    insecure_no_isolation: bool,
    runtime: &super::env::RuntimeArgs,
) -> anyhow::Result<Arc<dyn CommandRunner>> {
    let root = root
        .canonicalize()
        .with_context(|| format!("cannot use {} as the sandbox root", root.display()))?;
    let launcher = Launcher::from_env_or_current_exe(super::env::SANDBOX_EXEC_SUBCOMMAND)
        .context("locating the sandbox launcher")?;
    let mut options = SandboxOptions::new(launcher);
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
    let mut layout = SandboxLayout::for_tree(root.clone(), options.identities())
        .with_context(|| format!("preparing a sandbox for {}", root.display()))?;
    layout.runtime = options.runtime;
    Ok(Arc::new(
        SandboxRunner::new(Arc::new(options), layout)
            .with_context(|| format!("preparing a sandbox for {}", root.display()))?,
    ))
}

fn read_network(arg: Option<&str>) -> anyhow::Result<Option<serde_json::Value>> {
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

/// http handlers go through the same egress rules as at runtime (allowlist, SSRF defences,
/// header injection, credentials from the data dir's credential store).
fn http_poster(
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
