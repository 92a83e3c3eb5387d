//! Subcommand definitions and dispatch. Each subcommand group lives in its own module.

mod args;
mod convert;
mod credential;
mod env;
pub mod full;
mod gate;
mod hook_runtime;
mod hooks;
mod install;
pub mod keeper;
mod lazy;
mod mcp;
pub mod output;
mod project;
mod serve;
mod tool;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use lazy::{Lazy, LazySub};

/// The exit statuses every command shares, in `--help` and the man page.
pub const EXIT_STATUS_HELP: &str = "\
Exit status:
  0   success
  1   failure: an error; a tool that failed (hookbox tool); a gate not in force (hooks check);
      a decision other than --expect (hooks test)
  2   denied: a pre hook denied the call, which did not run (hookbox tool)
  3   asked: a pre hook asks a person to approve the call, which did not run; approvals need
      hookbox serve (hookbox tool)
  64  usage error: an unknown or missing flag, or a malformed argument
A reader of stdout that goes away (| head) ends the command quietly with 0, except that
hookbox tool, hooks check and hooks test keep the status above, serve keeps serving, and
key create revokes the key nobody could read and fails with 1.";

/// Exit statuses (see [`EXIT_STATUS_HELP`]); 0 and 1 are `ExitCode::SUCCESS` and `FAILURE`.
pub mod exit {
    /// A pre hook denied the call.
    pub const DENIED: u8 = 2;
    /// A pre hook asks a person; the call did not run.
    pub const ASKED: u8 = 3;
    /// A usage error (sysexits' `EX_USAGE`), never the same as a denied call.
    pub const USAGE: u8 = 64;
}

/// An error in how the command was called (exit status [`exit::USAGE`]), as opposed to a failure
/// while doing what it asked.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A usage error with `message`, for `?`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// A self-hosted agent sandbox with hooks.
#[derive(Debug, Parser)]
#[command(
    name = "hookbox",
    version,
    about = "A self-hosted agent sandbox with hooks",
    after_help = EXIT_STATUS_HELP
)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace). `RUST_LOG` overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Optional only so that a missing one prints the help (which hides the internal
    /// subcommand) instead of clap's list of every subcommand.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check and try out hooks configurations.
    #[command(subcommand)]
    Hooks(LazySub<hooks::HooksCommand>),
    /// Manage the named secrets the egress proxy injects (values are never shown).
    Credential(Lazy<credential::CredentialArgs>),
    /// Create, list, show and delete sandboxed environments.
    #[command(subcommand)]
    Env(LazySub<env::EnvCommand>),
    /// Run one tool call in an environment through its hooks; prints the result and hook trace.
    Tool(Lazy<tool::ToolArgs>),
    /// Serve the Interactions API for the google-genai SDK (the main command).
    Serve(Lazy<Box<serve::ServeArgs>>),
    /// Serve one environment's tools over MCP (stdio, or streamable HTTP with --listen), every
    /// call through its hooks.
    Mcp(Lazy<mcp::McpArgs>),
    /// Manage projects (tenants of the API) and their quota overrides.
    Project(Lazy<project::ProjectArgs>),
    /// Manage API keys of projects (shown once at creation, stored hashed).
    Key(Lazy<project::KeyArgs>),
    /// Print shell completions for SHELL (bash, zsh, fish, elvish, powershell) on stdout.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout (`hookbox manpage | man -l -`), or write hookbox.1
    /// and a hookbox-COMMAND.1 for every command into a directory.
    Manpage {
        /// Write every page into this directory instead (`--out-dir DIR` also works).
        #[arg(value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
        #[arg(
            long = "out-dir",
            value_name = "DIR",
            hide = true,
            conflicts_with = "dir"
        )]
        out_dir: Option<std::path::PathBuf>,
    },
    /// Internal: the sandbox launcher (hookbox re-executes itself with this).
    #[command(name = "__sandbox-exec", hide = true)]
    SandboxExec,
}

impl Command {
    /// Whether only the whole CLI (`hookbox-full`) runs this command: the server, the MCP server
    /// and what manages the server's projects and keys, and the generated completions and man
    /// pages. The one-shot commands (`tool`, `hooks`, `env`, `credential`) and the launcher run
    /// in the small front (`hookbox`), which does not link the server's crates.
    pub fn needs_full(&self) -> bool {
        match self {
            Command::Serve(_)
            | Command::Mcp(_)
            | Command::Project(_)
            | Command::Key(_)
            | Command::Completions { .. }
            | Command::Manpage { .. } => true,
            Command::Hooks(_)
            | Command::Credential(_)
            | Command::Env(_)
            | Command::Tool(_)
            | Command::SandboxExec => false,
        }
    }

    /// Whether its spans are to be exported ([`otel_wanted`]), which only `hookbox-full` does:
    /// the front hands it over then, if `hookbox-full` is there. Never the launcher, which is
    /// started with an empty environment and must stay single-threaded.
    pub fn exports_spans(&self) -> bool {
        !matches!(self, Command::SandboxExec) && otel_wanted()
    }

    /// Whether the front leaves its address space to a keeper process ([`keeper`]): the
    /// one-shot commands that build a sandbox, `tool` and `hooks test`, whose launcher they do
    /// not wait for either, so that the keeper asks no more of their caller's init (that it
    /// reaps orphans) than the launcher already does.
    pub fn keeps_address_space(&self) -> bool {
        matches!(
            self,
            Command::Tool(_) | Command::Hooks(LazySub(hooks::HooksCommand::Test(_)))
        )
    }

    /// Whether its logs default to errors only (`hooks`, whose output reports every failure).
    pub fn quiet_logs(&self) -> bool {
        matches!(self, Command::Hooks(_))
    }
}

/// Parses the process's arguments; `Err` holds the exit code once clap printed the help, the
/// version or a usage error.
pub fn parse() -> Result<Cli, ExitCode> {
    match Cli::try_parse() {
        Ok(args) => Ok(args),
        // --help and --version print on stdout and succeed; a usage error has its own status,
        // so that a script can tell it from a denied call (2).
        Err(err) => {
            let _ = err.print();
            Err(match err.use_stderr() {
                true => ExitCode::from(exit::USAGE),
                false => ExitCode::SUCCESS,
            })
        }
    }
}

/// The exit code of a command's result, its error printed on stderr.
pub fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        // The reader of stdout went away (`| head`): end quietly, as ripgrep does.
        Err(err) if output::is_reader_gone(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            match err.downcast_ref::<UsageError>() {
                Some(_) => ExitCode::from(exit::USAGE),
                None => ExitCode::FAILURE,
            }
        }
    }
}

/// Runs any command (`hookbox-full`).
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Serve(Lazy(args))) => serve::run(*args),
        Some(Command::Mcp(Lazy(args))) => mcp::run(args),
        Some(Command::Project(Lazy(args))) => project::run_project(args),
        Some(Command::Key(Lazy(args))) => project::run_key(args),
        Some(Command::Completions { shell }) => {
            let mut command = whole_command();
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut command, "hookbox", &mut out);
            print_all(&out)
        }
        Some(Command::Manpage {
            dir: None,
            out_dir: None,
        }) => {
            let mut out = Vec::new();
            clap_mangen::Man::new(whole_command()).render(&mut out)?;
            print_all(&out)
        }
        Some(Command::Manpage { dir, out_dir }) => {
            let Some(dir) = dir.or(out_dir) else {
                return Ok(ExitCode::SUCCESS);
            };
            use anyhow::Context as _;
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(whole_command(), &dir)
                .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
            Ok(ExitCode::SUCCESS)
        }
        command => run_front(Cli { command, ..cli }),
    }
}

/// The whole command tree, every subcommand's arguments defined at once ([`lazy`] otherwise
/// defers them until a subcommand is built): for the generated completions and man pages, which
/// read them all.
fn whole_command() -> clap::Command {
    lazy::eager();
    <Cli as clap::CommandFactory>::command()
}

/// Runs a command of the small front (`hookbox`): every command but those for which
/// [`Command::needs_full`] holds, which the front hands to `hookbox-full` ([`full::exec`])
/// before it gets here. It names none of the server's code, so that the front links none of it.
pub fn run_front(cli: Cli) -> anyhow::Result<ExitCode> {
    let Some(command) = cli.command else {
        let help = <Cli as clap::CommandFactory>::command().render_help();
        eprintln!("error: a command is needed\n\n{help}");
        return Ok(ExitCode::from(exit::USAGE));
    };
    match command {
        Command::Hooks(LazySub(cmd)) => hooks::run(cmd),
        Command::Credential(Lazy(args)) => credential::run(args),
        Command::Env(LazySub(cmd)) => env::run(cmd),
        Command::Tool(Lazy(args)) => tool::run(args),
        Command::SandboxExec => tool::sandbox_exec(),
        Command::Serve(_)
        | Command::Mcp(_)
        | Command::Project(_)
        | Command::Key(_)
        | Command::Completions { .. }
        | Command::Manpage { .. } => anyhow::bail!("internal: this command runs in hookbox-full"),
    }
}

/// Writes `bytes` to stdout; a reader that went away (`| head`) ends it quietly, with 0.
fn print_all(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    output::write_all(bytes)?;
    Ok(ExitCode::SUCCESS)
}

/// A layer that sends spans elsewhere ([`otel_export`]), placed first on the registry.
pub type ExportLayer =
    Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// Logs go to stderr only; stdout is for the command's result. Commands whose output already
/// reports every failure (`hooks`) log only errors by default. Metrics and the audit log get
/// their events whatever the level. `export` is [`otel_export`]'s layer when spans go to an
/// OTLP receiver too.
pub fn init_logging(verbose: u8, quiet: bool, export: Option<ExportLayer>) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{Layer as _, fmt};
    let default = match verbose {
        0 if quiet => "error",
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::registry()
        .with(export)
        .with(
            fmt::layer()
                .with_writer(std::io::stderr)
                // Colour only for a person at a terminal: escape codes in a log file are noise
                // (#31 item 7). NO_COLOR is honoured too.
                .with_ansi(
                    std::io::IsTerminal::is_terminal(&std::io::stderr())
                        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
                )
                .with_filter(filter),
        )
        .with(
            hookbox_server::metrics::MetricsLayer
                .with_filter(hookbox_server::metrics::layer_targets()),
        )
        .with(
            // `hooks gate` logs its own failures as denies (see cli/gate.rs).
            hookbox_server::audit::GlobalAudit.with_filter(
                hookbox_server::audit::layer_targets()
                    .with_target("hookbox::cli::gate", tracing::Level::INFO),
            ),
        )
        .try_init();
}

/// Whether the standard variables ask for spans to go to an OTLP receiver
/// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `..._TRACES_ENDPOINT` set and not empty). Only
/// `hookbox-full` exports them, so the front hands every command to it then.
pub fn otel_wanted() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

/// With [`otel_wanted`], an OTLP/HTTP (protobuf) span exporter (the standard `OTEL_*` variables
/// apply) and the layer for [`init_logging`]; the provider must be shut down at exit to flush
/// the spans still in its batch. Only spans are exported, with the fields each declares: log
/// events (which may carry a deny reason) stay in the log and are never sent as span events.
pub fn otel_export() -> Option<(opentelemetry_sdk::trace::SdkTracerProvider, ExportLayer)> {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig as _;
    use tracing_subscriber::Layer as _;
    if !otel_wanted() {
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .build()
    {
        Ok(exporter) => exporter,
        Err(e) => {
            eprintln!("hookbox: OpenTelemetry export disabled: {e}");
            return None;
        }
    };
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource({
            // OTEL_SERVICE_NAME (read by the builder) wins over the default name.
            let resource = opentelemetry_sdk::Resource::builder();
            match std::env::var_os("OTEL_SERVICE_NAME") {
                Some(_) => resource.build(),
                None => resource.with_service_name("hookbox").build(),
            }
        })
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("hookbox"))
        .with_filter(tracing_subscriber::filter::FilterExt::and(
            hookbox_server::metrics::layer_targets(),
            tracing_subscriber::filter::filter_fn(|meta| meta.is_span()),
        ))
        .boxed();
    Some((provider, layer))
}
