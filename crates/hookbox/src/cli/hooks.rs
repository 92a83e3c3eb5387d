//! `hookbox hooks check`, `hookbox hooks test` and `hookbox hooks convert`: the hooks engine for
//! a person at a terminal.
//!
//! `check` shows what the runtime will make of the hooks files (diagnostics, lint, and which
//! tools each rule covers). `test` runs one tool call's hooks for real — real matcher, real
//! handlers, real merge — and prints the decision trace, without running the tool itself.
//! `gate` and `install` (modules `gate` and `install`) put the same decision into other agent
//! CLIs' own hooks.
//! `convert` writes a vendor hooks file in another dialect where the mapping is exact
//! ([`hookbox_hooks::dialect::convert`]) and otherwise lists what it refuses.

use super::output::{out, outln, unless_reader_gone};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use hookbox_hooks::config::{Group, HandlerKind, HooksConfig};
use hookbox_hooks::decision::{Decision, Dispatch, Outcome};
use hookbox_hooks::diagnostic::{Diagnostic, Severity};
use hookbox_hooks::dialect::{Dialect, DialectSet};
use hookbox_hooks::{HookEngine, Loaded};
use hookbox_protocol::{HookEvent, ToolCall, ToolName};
use hookbox_rootfs::RootDir;

use super::hook_runtime::{
    NoHttpHandlers, command_runner, http_poster, may_run_commands, read_network,
};
use super::lazy::Lazy;

#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Validate hooks files: diagnostics, lint, and which tools each rule covers.
    ///
    /// With FILEs, checks those files. Otherwise discovers `/.agents/hooks.json` and
    /// `/workspace/.agents/hooks.json` under --root, as the runtime does, and with
    /// --hook-dialects the other agent CLIs' files too (listing the active ones and their
    /// traps). Each command handler's program and script are looked up under --root as the
    /// sandbox sees it (the host's /usr, /bin, /lib; the rest from --root).
    ///
    /// Exits 1 when a gate the file meant to install is not in force: a part skipped, an
    /// unknown event, a matcher (or an alternative in it) naming no tool, a misspelt
    /// on_failure, a handler script missing or not executable, a vendor trap that opens a gate.
    /// Warnings (nothing lost) exit 0.
    Check(Lazy<CheckArgs>),
    /// Run the hooks of one tool call (or, with --event pre-interaction|post-interaction, of one
    /// interaction) for real and print the decision trace.
    ///
    /// Command handlers run in a sandbox whose `/` is --root, so paths such as
    /// `/.agents/hooks-scripts/gate.py` work unchanged. The tool itself is not run.
    Test(Lazy<Box<TestArgs>>),
    /// The hook an agent CLI runs before each tool call: reads the CLI's hook payload on stdin,
    /// decides with the project's hookbox policy, answers in that CLI's protocol.
    ///
    /// The project (--root, default the current directory) stands for the sandbox root `/`
    /// exactly as in `hooks test`, and command handlers run in the same sandbox, with the project
    /// read-only (--writable lifts that). With --hook-dialects other CLIs' files join the
    /// policy, never the files of the CLI the gate answers (it runs those itself). A failure of
    /// the gate itself is a deny. `hookbox hooks install` writes the command that runs this.
    Gate(Lazy<Box<super::gate::GateArgs>>),
    /// Put `hookbox hooks gate` into an agent CLI's own settings (or take it out): the project's
    /// by default, the user's with --user. Shows the diff; other hooks and keys stay. Prints
    /// the trust step the CLI still needs (for Codex, the trust lines for its config.toml).
    Install(Lazy<super::install::InstallArgs>),
    /// Write one dialect's hooks file in another dialect, where the mapping is exact.
    ///
    /// Refuses (exit 1), naming each entry, handler or field and why, whatever cannot be
    /// written with the same meaning: events and matchers that select other calls, timeouts
    /// not expressible in the target's unit, handler types or fields the target lacks, and a
    /// command's answer protocol (exit codes and JSON are read differently by each CLI, so a
    /// command converts only to its own dialect). It never writes a weaker gate.
    Convert(Lazy<super::convert::ConvertArgs>),
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
    #[command(flatten)]
    dialects: DialectsArg,
}

/// `--hook-dialects`: which other agent CLIs' hooks files are read besides `.agents/hooks.json`.
#[derive(Debug, Clone, Args)]
pub struct DialectsArg {
    /// Also read these agent CLIs' project hooks files at / and /workspace: a comma-separated
    /// list of claude-code, gemini-cli, codex, cursor, copilot, or `all` (default: none).
    #[arg(long = "hook-dialects", value_name = "LIST|all", env = "HOOKBOX_HOOK_DIALECTS", default_value = "", hide_default_value = true, value_parser = parse_dialects)]
    pub hook_dialects: DialectSet,
}

pub fn parse_dialects(s: &str) -> Result<DialectSet, String> {
    s.parse::<DialectSet>().map_err(|e| e.to_string())
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
    /// The directory that stands for the sandbox root `/` (as for `hooks check`).
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// The tool being called (with a tool event).
    #[arg(long, value_parser = parse_tool)]
    tool: Option<ToolName>,
    /// The tool call's arguments, as JSON or `@FILE`.
    #[arg(long, value_name = "JSON|@FILE", default_value = "{}")]
    args: String,
    /// Which hooks to run: pre, post, pre-interaction, post-interaction, or a vendor event by
    /// its own name (PreToolUse, BeforeTool, beforeShellExecution, …; only that event's hooks
    /// of the enabled dialects run).
    #[arg(long, default_value = "pre")]
    event: String,
    #[command(flatten)]
    dialects: DialectsArg,
    /// With --event post: the tool's error text, passed to hooks as `error`.
    #[arg(long)]
    error: Option<String>,
    /// With --event post: the tool's output as JSON (`code_execution`'s `{"stdout": …,
    /// "stderr": …, "exit_code": …}`, a file tool's object), which other agent CLIs' hooks get
    /// as their `tool_response` (hookbox's own hooks are not given it).
    #[arg(long)]
    tool_output: Option<String>,
    /// The environment id hooks see in their payload (`--environment-id` also works).
    #[arg(
        long = "env-id",
        alias = "environment-id",
        value_name = "ID",
        default_value = "env_local"
    )]
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
        HooksCommand::Check(Lazy(args)) => check(args),
        HooksCommand::Test(Lazy(args)) => test(*args),
        HooksCommand::Gate(Lazy(args)) => super::gate::run(*args),
        HooksCommand::Install(Lazy(args)) => super::install::run(args),
        HooksCommand::Convert(Lazy(args)) => super::convert::run(args),
    }
}

fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let root = RootDir::open(&args.root)
        .with_context(|| format!("cannot use {} as the sandbox root", args.root.display()));
    let mut loaded = if args.files.is_empty() {
        let root = root.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let mut loaded =
            hookbox_hooks::discover::load_with_dialects(root, args.dialects.hook_dialects);
        loaded
            .diagnostics
            .extend(vendor_script_traps(root, &loaded));
        loaded
    } else {
        load_files(&args.files, args.dialects.hook_dialects)?
    };
    // Each command handler's program and script, looked up as the sandbox will see them.
    if let Ok(root) = root {
        let view = hookbox_environments::runner::SandboxView::new(root);
        let found = hookbox_hooks::lint::handler_programs(&loaded.config, &view);
        loaded.diagnostics.extend(found);
    }
    if args.json {
        let report = serde_json::json!({
            "hook_dialects": args.dialects.hook_dialects.to_string(),
            "files": loaded.files,
            "diagnostics": loaded.diagnostics,
            "groups": loaded.config.groups.iter().map(group_json).collect::<Vec<_>>(),
        });
        unless_reader_gone(outln!("{}", serde_json::to_string_pretty(&report)?))?;
    } else {
        unless_reader_gone(out!(
            "{}",
            render_check(&loaded, &args.root, args.dialects.hook_dialects)
        ))?;
    }
    Ok(if loaded.has_errors() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

pub(super) fn read_bounded(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if meta.len() > hookbox_hooks::discover::MAX_HOOKS_FILE_SIZE {
        bail!("{} is larger than a hooks file may be", path.display());
    }
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The dialect of a named file, from its path (`.claude/settings.json` → claude-code, …);
/// anything else is hookbox's own format.
pub(super) fn dialect_of(path: &std::path::Path) -> Dialect {
    let text = path.to_string_lossy();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if text.contains(".claude/") {
        Dialect::ClaudeCode
    } else if text.contains(".gemini/") {
        Dialect::GeminiCli
    } else if text.contains(".codex/") {
        Dialect::Codex
    } else if text.contains(".cursor/") {
        Dialect::Cursor
    } else if text.contains(".github/hooks/") && name.ends_with(".json") {
        Dialect::Copilot
    } else {
        Dialect::Agents
    }
}

/// Reads named files directly (they are the user's own files, not a sandbox tree). A vendor
/// file (by its path) is read in its dialect when that dialect is enabled.
fn load_files(files: &[PathBuf], dialects: DialectSet) -> anyhow::Result<Loaded> {
    let mut loaded = Loaded::default();
    let mut groups = Vec::new();
    for path in files {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let label = path.display().to_string();
        let dialect = dialect_of(path);
        if dialect != Dialect::Agents {
            if !dialects.contains(dialect) {
                bail!(
                    "{label} is a {dialect} hooks file; pass --hook-dialects {dialect} to check it"
                );
            }
            let (group, diagnostics) = hookbox_hooks::dialect::load::parse(dialect, &label, &bytes);
            loaded.diagnostics.extend(diagnostics);
            if let Some(group) = group {
                groups.push(group);
            }
            loaded.files.push(label);
            continue;
        }
        let (mut file_groups, diagnostics) = hookbox_hooks::config::parse(&label, &bytes);
        groups.append(&mut file_groups);
        loaded.diagnostics.extend(diagnostics);
        loaded.files.push(label);
    }
    loaded.config = Arc::new(HooksConfig { groups });
    Ok(loaded)
}

fn render_check(loaded: &Loaded, root: &std::path::Path, dialects: DialectSet) -> String {
    let mut out = String::new();
    if !dialects.is_empty() {
        let _ = writeln!(out, "hook dialects: {dialects}");
        let _ = writeln!(
            out,
            "active files: {}",
            if loaded.files.is_empty() {
                "none".to_owned()
            } else {
                loaded.files.join(", ")
            }
        );
    }
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
            if let Some(v) = &rule.vendor {
                let _ = writeln!(
                    out,
                    "    {}[{}] ({}) matcher {:?} → {event}",
                    v.event_name,
                    rule.index,
                    v.dialect,
                    v.matcher.pattern()
                );
                render_handlers(out, rule);
                continue;
            }
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
            render_handlers(out, rule);
        }
    }
}

fn render_handlers(out: &mut String, rule: &hookbox_hooks::config::Rule) {
    for h in &rule.handlers {
        let closed = match h.on_failure {
            hookbox_hooks::OnFailure::Deny => ", fails closed",
            hookbox_hooks::OnFailure::Allow => "",
        };
        let _ = writeln!(
            out,
            "      [{}] {} {:?} (timeout {} s{closed})",
            h.index,
            h.kind.type_name(),
            h.kind.target(),
            h.timeout.as_secs_f64()
        );
    }
}

/// Copilot's trap: a `preToolUse` script that exits 2 to deny. Copilot only warns on exit 2,
/// so such a gate never denies. Reads the command line and the scripts it names (paths under
/// --root, as the sandbox sees them).
fn vendor_script_traps(root: &RootDir, loaded: &Loaded) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    for group in &loaded.config.groups {
        for rule in &group.pre_tool_execution {
            let Some(v) = &rule.vendor else { continue };
            if v.dialect != Dialect::Copilot {
                continue;
            }
            for h in &rule.handlers {
                let HandlerKind::Command { command } = &h.kind else {
                    continue;
                };
                let mut texts = vec![command.clone()];
                for word in command.split_whitespace() {
                    let word = word.trim_matches(['"', '\'']);
                    let path = if word.starts_with('/') {
                        word.to_owned()
                    } else if word.contains('/') || word.ends_with(".sh") || word.ends_with(".py") {
                        format!("/workspace/{}", word.trim_start_matches("./"))
                    } else {
                        continue;
                    };
                    if let Ok(bytes) = root.read_file(&path, 256 * 1024) {
                        texts.push(String::from_utf8_lossy(&bytes).into_owned());
                    }
                }
                if texts.iter().any(|t| exits_two(t)) {
                    found.push(Diagnostic {
                        severity: Severity::Error,
                        file: group.file.clone(),
                        path: format!("$.hooks.{}[{}]", v.event_name, rule.index),
                        message: "this Copilot hook exits 2 to deny, but Copilot only warns on exit 2 and the call proceeds (hookbox reads it as Copilot does): the gate is gone; print {\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"...\"} instead".to_owned(),
                    });
                }
            }
        }
    }
    found
}

fn exits_two(text: &str) -> bool {
    ["exit 2", "sys.exit(2)", "process.exit(2)", "exit(2)"]
        .iter()
        .any(|needle| text.contains(needle))
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
                let mut rule = serde_json::json!({
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
                            HandlerKind::Command { .. } | HandlerKind::Unsupported { .. } => Vec::new(),
                        },
                    })).collect::<Vec<_>>(),
                });
                if let Some(v) = &r.vendor {
                    rule["dialect"] = serde_json::json!(v.dialect);
                    rule["vendor_event"] = serde_json::json!(v.event_name);
                    rule["matcher"] = serde_json::json!(v.matcher.pattern());
                    rule["tools"] = serde_json::json!([]);
                }
                rule
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
    let call_args = super::args::json_arg("--args", &args.args)?;
    if !call_args.is_object() {
        return Err(super::usage(
            "--args must be a JSON object, like '{\"path\": \"/workspace/a.txt\"}'",
        ));
    }
    let (event, vendor_event) = resolve_event(&args.event, args.dialects.hook_dialects)?;
    if args.error.is_some() && event != HookEvent::PostToolExecution {
        return Err(super::usage("--error only applies to --event post"));
    }
    let tool_output = match &args.tool_output {
        Some(_) if event != HookEvent::PostToolExecution => {
            return Err(super::usage("--tool-output only applies to --event post"));
        }
        Some(text) => Some(
            serde_json::from_str::<serde_json::Value>(text)
                .with_context(|| format!("--tool-output is not valid JSON: {text}"))?,
        ),
        None => None,
    };
    if event.is_tool_event() && args.tool.is_none() {
        return Err(super::usage(format!("--event {} needs --tool", args.event)));
    }
    if event == HookEvent::PreInteraction && args.input.is_none() {
        return Err(super::usage(format!(
            "--event {} needs --input",
            args.event
        )));
    }
    let root = RootDir::open(&args.root)
        .with_context(|| format!("cannot use {} as the sandbox root", args.root.display()))?;
    // Said only when a handler failed, where a missing directory may be why (#31: the same
    // two notes on every run were noise).
    let notes: Vec<String> = ["workspace", "tmp"]
        .into_iter()
        .filter(|dir| !args.root.join(dir).is_dir())
        .map(|dir| {
            format!(
                "note: {} has no {dir}/, so /{dir} does not exist inside the sandbox",
                args.root.display()
            )
        })
        .collect();
    let mut loaded =
        hookbox_hooks::discover::load_with_dialects(&root, args.dialects.hook_dialects);
    if let Some((dialect, name)) = &vendor_event {
        loaded.config = Arc::new(only_vendor_event(&loaded.config, *dialect, name));
    }
    // Checked above for the tool events; unused by the interaction events.
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
    // The credential store (a database in the data dir) is opened only when an http handler
    // may need its credentials: without one, `hooks test` creates nothing (#31).
    let has_http = loaded.config.groups.iter().any(|g| {
        HookEvent::ALL.iter().any(|e| {
            g.rules(*e).iter().any(|r| {
                r.handlers
                    .iter()
                    .any(|h| matches!(h.kind, HandlerKind::Http { .. }))
            })
        })
    });
    let poster: Arc<dyn hookbox_hooks::http::HttpPoster> = match has_http {
        true => http_poster(
            &args.environment_id,
            network.as_ref(),
            args.data_dir,
            args.database.database.as_deref(),
        )?,
        false => Arc::new(NoHttpHandlers),
    };
    let (runner, identity) = command_runner(
        &args.root,
        args.insecure_no_isolation,
        &args.runtime,
        false,
        may_run_commands(
            &loaded.config,
            event,
            event.is_tool_event().then(|| call.name.as_str()),
        ),
    )?;
    // #31: a hook that could not write the tree got a bare PermissionError. Hooks run as the
    // tree's owner, or as an unprivileged uid when root owns it.
    let mut notes = notes;
    if let Some(identity) = identity {
        let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&args.root)?);
        if owner == 0 && identity.uid != 0 {
            notes.push(format!(
                "note: {} belongs to root, so hooks run as the unprivileged uid {} and cannot write what is not theirs there (a PermissionError); chown the tree to a user and they run as that user",
                args.root.display(),
                identity.uid
            ));
        }
    }
    let engine = HookEngine::new(runner, poster);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let dispatch = runtime.block_on(async {
        match event {
            HookEvent::PreToolExecution => {
                engine
                    .pre_tool(&loaded.config, &call, &args.environment_id)
                    .await
            }
            HookEvent::PostToolExecution => {
                let payload = hookbox_protocol::HookPayload {
                    tool_call: call.clone(),
                    environment_id: args.environment_id.clone(),
                    error: args.error.clone(),
                    hook_event_name: HookEvent::PostToolExecution,
                };
                let extras = hookbox_hooks::VendorExtras {
                    tool_output,
                    ..hookbox_hooks::VendorExtras::default()
                };
                engine
                    .dispatch_with(&loaded.config, &payload, &extras)
                    .await
            }
            HookEvent::PreInteraction => {
                engine
                    .interaction(&loaded.config, &interaction(HookEvent::PreInteraction))
                    .await
            }
            HookEvent::PostInteraction => {
                engine
                    .interaction(&loaded.config, &interaction(HookEvent::PostInteraction))
                    .await
            }
        }
    });
    let failed = dispatch.trace.iter().any(|t| {
        matches!(
            t.outcome,
            Outcome::FailedOpen { .. } | Outcome::FailedClosed { .. } | Outcome::Failed { .. }
        )
    });
    if failed {
        for note in &notes {
            eprintln!("{note}");
        }
    }
    if args.json {
        // `pre` or `post` as `hookbox tool` names the same dispatch (`pre_interaction` and
        // `post_interaction` for those events); `dispatch` is kept for scripts that read it.
        let key = match event {
            HookEvent::PreToolExecution => "pre",
            HookEvent::PostToolExecution => "post",
            HookEvent::PreInteraction => "pre_interaction",
            HookEvent::PostInteraction => "post_interaction",
        };
        let mut report = serde_json::json!({
            "files": loaded.files,
            "diagnostics": loaded.diagnostics,
            "dispatch": dispatch,
        });
        report[key] = serde_json::to_value(&dispatch)?;
        unless_reader_gone(outln!("{}", serde_json::to_string_pretty(&report)?))?;
    } else {
        unless_reader_gone(out!("{}", render_dispatch(&loaded, &dispatch)))?;
    }
    match args.expect {
        Some(expect) if expect.label() != dispatch.decision.label() => {
            eprintln!("{}", expect_mismatch(expect, &dispatch));
            Ok(ExitCode::FAILURE)
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// `expected X, got Y (why)`: the line `--expect` prints on stderr when the decision differs.
fn expect_mismatch(expect: Expect, dispatch: &Dispatch) -> String {
    let got = dispatch.decision.label();
    let why = match &dispatch.decision {
        Decision::Deny { reason, group } => format!("group {group} denied: {reason}"),
        Decision::Ask { reason, group } => format!("group {group} asks a person: {reason}"),
        Decision::Allow if dispatch.trace.is_empty() => {
            let what = match dispatch.tool.is_empty() {
                true => dispatch.event.to_string(),
                false => format!("{} {}", dispatch.event, dispatch.tool),
            };
            format!("no handler matches {what}")
        }
        Decision::Allow => {
            let failed: Vec<String> = dispatch
                .trace
                .iter()
                .filter_map(|t| match &t.outcome {
                    Outcome::FailedOpen { failure } => Some(format!(
                        "{} {}[{}].hooks[{}] failed open: {failure}",
                        t.group, dispatch.event, t.rule_index, t.handler_index
                    )),
                    _ => None,
                })
                .collect();
            match failed.is_empty() {
                true => format!(
                    "every one of the {} handler(s) that ran allowed",
                    dispatch.trace.len()
                ),
                false => failed.join("; "),
            }
        }
    };
    format!("expected {}, got {got}: {why}", expect.label())
}

/// `--event`: hookbox's four events by their short names, or a vendor's event by its own name
/// in one of the enabled dialects (then only that event's hooks run).
fn resolve_event(
    name: &str,
    dialects: DialectSet,
) -> anyhow::Result<(HookEvent, Option<(Dialect, String)>)> {
    use hookbox_hooks::dialect::events::{self, EventMeaning};
    let own = match name {
        "pre" | "pre_tool_execution" => Some(HookEvent::PreToolExecution),
        "post" | "post_tool_execution" => Some(HookEvent::PostToolExecution),
        "pre-interaction" | "pre_interaction" => Some(HookEvent::PreInteraction),
        "post-interaction" | "post_interaction" => Some(HookEvent::PostInteraction),
        _ => None,
    };
    if let Some(event) = own {
        return Ok((event, None));
    }
    let mut inactive = Vec::new();
    for dialect in dialects.iter() {
        match events::meaning(dialect, name) {
            EventMeaning::Active { event, .. } => {
                return Ok((event, Some((dialect, name.to_owned()))));
            }
            EventMeaning::Inactive => inactive.push(dialect.as_str()),
            EventMeaning::Unknown => {}
        }
    }
    if !inactive.is_empty() {
        bail!(
            "{name} ({}) is inactive in hookbox: hookbox never emits it, so its hooks never run",
            inactive.join(", ")
        );
    }
    let owners: Vec<&str> = Dialect::VENDORS
        .into_iter()
        .filter(|d| events::meaning(*d, name) != EventMeaning::Unknown)
        .map(Dialect::as_str)
        .collect();
    if owners.is_empty() {
        bail!(
            "unknown --event {name:?}: expected pre, post, pre-interaction, post-interaction, or a vendor event such as PreToolUse or BeforeTool"
        );
    }
    bail!(
        "{name} is a {} event; enable it with --hook-dialects {}",
        owners.join(" / "),
        owners.join(",")
    )
}

/// The configuration with only the rules of `dialect`'s event `name` (Copilot's two spellings
/// of one event are the same event).
fn only_vendor_event(config: &HooksConfig, dialect: Dialect, name: &str) -> HooksConfig {
    use hookbox_hooks::dialect::events;
    let canonical = |n: &str| events::lookup(dialect, n).map(|(info, _)| info.name);
    let wanted = canonical(name);
    let mut groups = Vec::new();
    for group in &config.groups {
        let mut g = group.clone();
        for rules in [
            &mut g.pre_tool_execution,
            &mut g.post_tool_execution,
            &mut g.pre_interaction,
            &mut g.post_interaction,
        ] {
            rules.retain(|r| {
                r.vendor
                    .as_ref()
                    .is_some_and(|v| v.dialect == dialect && canonical(&v.event_name) == wanted)
            });
        }
        groups.push(g);
    }
    HooksConfig { groups }
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
            Outcome::Skipped if t.vendor.is_some() => "skipped".to_owned(),
            Outcome::Skipped => "skipped: an earlier handler denied".to_owned(),
            Outcome::Disabled => "skipped: group disabled".to_owned(),
        };
        if let Some(v) = &t.vendor {
            let tool = v
                .tool_name
                .as_deref()
                .map(|n| format!(" {n}"))
                .unwrap_or_default();
            let chunk = v.chunk.map(|c| format!(" chunk {c}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "    {} {} ({}){tool}{chunk}: {}",
                v.dialect, v.event, t.file, v.meaning
            );
        }
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
