//! `hookbox mcp`: one environment's six tools as an MCP server, every call through its hooks
//! (`hookbox-mcp`). Over stdio by default (what Claude Code, Codex and Gemini CLI launch), or
//! streamable HTTP at `http://ADDR/mcp` with `--listen`. Stdout belongs to the protocol in stdio
//! mode; everything else goes to stderr.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use hookbox_environments::source::{EnvironmentSpec, SourceOrigin};

use super::env::{EgressArgs, StoreArgs, parse_inline, parse_network};

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The environment whose tools to serve. Without it a new environment is made from
    /// --source/--network and its id printed on stderr. (`--env ID` also works.)
    #[arg(long = "env-id", alias = "env", value_name = "ID")]
    pub env_id: Option<String>,
    /// For a new environment: `inline:TARGET=@FILE` or `inline:TARGET=TEXT`. Repeatable.
    #[arg(long = "source", value_name = "SPEC")]
    pub sources: Vec<String>,
    /// For a new environment: its network policy, as JSON or `@FILE`.
    #[arg(long, value_name = "JSON|@FILE")]
    pub network: Option<String>,
    /// For a new environment: its disk cap in bytes (`0`: none; default 10 GiB).
    #[arg(long, value_name = "BYTES")]
    pub disk_limit: Option<u64>,
    /// Serve streamable HTTP on this address (at `/mcp`) instead of stdio. Loopback only unless
    /// --allow-host names the public host clients use.
    #[arg(long, value_parser = super::args::parse_listen)]
    pub listen: Option<SocketAddr>,
    /// A name HTTP clients may send as `Host` besides IP addresses and `localhost`: NAME (any
    /// port) or NAME:PORT (that port only). Every other `Host` gets 403 (DNS-rebinding
    /// defence). Repeatable.
    #[arg(long = "allow-host", value_name = "NAME[:PORT]")]
    pub allow_hosts: Vec<String>,
    /// The origin (SCHEME://HOST[:PORT]) of a web page that may call the endpoint (with CORS
    /// headers). Pages of any other origin get 403. Never `*`. Repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub egress: EgressArgs,
}

pub fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    if args.env_id.is_some() && (!args.sources.is_empty() || args.network.is_some()) {
        bail!(
            "--env-id serves an existing environment; --source and --network make a new one, give one or the other"
        );
    }
    if let Some(addr) = args.listen
        && !addr.ip().is_loopback()
        && args.allow_hosts.is_empty()
    {
        bail!(
            "--listen {addr} is not loopback: name the host clients will use with --allow-host (the MCP endpoint has no authentication of its own; put it behind one)"
        );
    }
    let mut guard = hookbox_browser_guard::Policy::new();
    for host in &args.allow_hosts {
        guard.allow_host(host).context("--allow-host")?;
    }
    for origin in &args.allow_origins {
        guard.allow_origin(origin).context("--allow-origin")?;
    }
    let store = args
        .store
        .open_with(None, args.egress.operator(), false, false)?;
    let env_id = match args.env_id {
        Some(id) => id,
        None => {
            let mut spec = EnvironmentSpec::default();
            for raw in &args.sources {
                spec.sources.push(parse_inline(raw)?);
            }
            if let Some(raw) = &args.network {
                spec.network = Some(parse_network(raw)?);
            }
            spec.disk_limit_bytes = args.disk_limit;
            let meta = store.create(
                &spec,
                SourceOrigin::Operator,
                &mut |line| eprintln!("{line}"),
                false,
            )?;
            args.store.record(&meta.id, &spec)?;
            eprintln!("hookbox mcp: serving new environment {}", meta.id);
            meta.id
        }
    };
    let env = Arc::new(args.store.located(store.open_env(&env_id))?);
    let tools = hookbox_mcp::SandboxTools::new(env);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        match args.listen {
            None => hookbox_mcp::serve_stdio(tools).await?,
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on {addr}"))?;
                let local = listener.local_addr()?;
                eprintln!("hookbox mcp: environment {env_id} at http://{local}/mcp");
                axum::serve(listener, hookbox_mcp::router(tools, &guard))
                    .with_graceful_shutdown(async {
                        let _ = tokio::signal::ctrl_c().await;
                    })
                    .await?;
            }
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
