//! Subcommand definitions and dispatch. Each subcommand group lives in its own module.

mod credential;
mod env;
mod hooks;
mod mcp;
mod project;
mod serve;
mod tool;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// hookbox: a self-hosted agent sandbox with hooks.
#[derive(Debug, Parser)]
#[command(name = "hookbox", version, about)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace). `RUST_LOG` overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check and try out hooks configurations.
    #[command(subcommand)]
    Hooks(hooks::HooksCommand),
    /// Manage the named secrets the egress proxy injects (values are never shown).
    Credential(credential::CredentialArgs),
    /// Create, list, show and delete sandboxed environments.
    #[command(subcommand)]
    Env(env::EnvCommand),
    /// Run one tool call in an environment through its hooks; prints the result and hook trace.
    Tool(tool::ToolArgs),
    /// Serve the Interactions API for the google-genai SDK (the main command).
    Serve(serve::ServeArgs),
    /// Serve one environment's tools over MCP (stdio, or streamable HTTP with --listen), every
    /// call through its hooks.
    Mcp(mcp::McpArgs),
    /// Manage projects (tenants of the API) and their quota overrides.
    Project(project::ProjectArgs),
    /// Manage API keys of projects (shown once at creation, stored hashed).
    Key(project::KeyArgs),
    /// Internal: the sandbox launcher (hookbox re-executes itself with this).
    #[command(name = "__sandbox-exec", hide = true)]
    SandboxExec,
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Hooks(cmd) => hooks::run(cmd),
        Command::Credential(args) => credential::run(args),
        Command::Env(cmd) => env::run(cmd),
        Command::Tool(args) => tool::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Project(args) => project::run_project(args),
        Command::Key(args) => project::run_key(args),
        Command::SandboxExec => tool::sandbox_exec(),
    }
}

/// Logs go to stderr only; stdout is for the command's result. Commands whose output already
/// reports every failure (`hooks`) log only errors by default. Metrics and the audit log get
/// their events whatever the level. With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`)
/// set, spans go to that OTLP/HTTP receiver too (the standard `OTEL_*` variables apply); the
/// returned provider must be shut down at exit to flush them.
pub fn init_logging(
    verbose: u8,
    quiet: bool,
) -> Option<opentelemetry_sdk::trace::SdkTracerProvider> {
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
    let (provider, otel) = match otel_tracer() {
        Some((provider, tracer)) => (
            Some(provider),
            Some(
                tracing_opentelemetry::layer()
                    .with_tracer(tracer)
                    .with_filter(hookbox_server::metrics::layer_targets()),
            ),
        ),
        None => (None, None),
    };
    let _ = tracing_subscriber::registry()
        .with(
            fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter),
        )
        .with(
            hookbox_server::metrics::MetricsLayer
                .with_filter(hookbox_server::metrics::layer_targets()),
        )
        .with(
            hookbox_server::audit::GlobalAudit.with_filter(hookbox_server::audit::layer_targets()),
        )
        .with(otel)
        .try_init();
    provider
}

/// An OTLP/HTTP (protobuf) span exporter when the standard variables ask for one.
fn otel_tracer() -> Option<(
    opentelemetry_sdk::trace::SdkTracerProvider,
    opentelemetry_sdk::trace::SdkTracer,
)> {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig as _;
    let wanted = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    if !wanted {
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
    let tracer = provider.tracer("hookbox");
    Some((provider, tracer))
}

/// `--database`, for every command that reads or writes the store: the same value as
/// `hookbox serve --database` (or `HOOKBOX_DATABASE_URL`), so the CLI and the server see the
/// same projects, keys and credentials.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DatabaseArg {
    /// The PostgreSQL database `hookbox serve --database` uses (`postgres://…`, with libpq's
    /// `sslmode` and `sslrootcert`); default: SQLite in the data dir.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = hookbox_store::env_vars::HOOKBOX_DATABASE_URL,
        hide_env_values = true
    )]
    pub database: Option<String>,
}
