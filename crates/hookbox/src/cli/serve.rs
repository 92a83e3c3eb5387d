//! `hookbox serve`: the Interactions API server that the unmodified `google-genai` SDK talks to
//! when its base URL points here. Wires the store (SQLite in the data dir), the model backend and
//! the real sandbox (environments, hooks, egress with credentials from the same SQLite store) into
//! `hookbox-server`, recovers interactions a previous process left running, prints where it
//! listens and how to point the SDK at it, then serves until Ctrl-C or SIGTERM, and stops
//! cleanly: drain (`hookbox_server::drain`), stop what outlived the grace period, close the
//! sandboxes and unmount their disks, leave the cluster. It must not
//! implement API behaviour itself.

use super::output::{outln, unless_reader_gone};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use hookbox_agent::env_vars as agent_vars;
use hookbox_agent::gemini::GeminiModel;
use hookbox_agent::offline::OfflineModel;
use hookbox_agent::openai::OpenAiModel;
use hookbox_agent::{LoopConfig, Model};
use hookbox_egress::ResolvePin;
use hookbox_egress::ssrf::Cidr;
use hookbox_environments::environment::Environments;
use hookbox_environments::network::{EgressOperator, EgressOptions};
use hookbox_environments::runner::{Launcher, SandboxOptions};
use hookbox_environments::slots::SlotRegistry;
use hookbox_sandbox::spec::Isolation;
use hookbox_sandbox::spec::RuntimeKind;
use hookbox_server::cluster::ClusterConfig;
use hookbox_server::quota::QuotaConfig;
use hookbox_server::sandbox::{CacheLimits, Clock, SandboxBackend};
use hookbox_server::{AppState, Services};
use hookbox_store::{SqliteOptions, Store, Synchronous};

use hookbox_credentials::StoreCredentials;

/// Printed at start and logged on every tool call when isolation is off.
const NO_ISOLATION_WARNING: &str = "WARNING: --insecure-no-isolation: tools and hooks run directly on this machine, with NO sandbox";

/// Default listen address. The SDK has no default local port; 8080 is what the docs use.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// Arguments of `hookbox serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on. Without API keys only loopback addresses are allowed.
    #[arg(long, default_value = DEFAULT_LISTEN, value_parser = super::args::parse_listen)]
    pub listen: SocketAddr,
    /// Data directory (database, secret key, environments). Default: `$HOOKBOX_DATA_DIR`, else
    /// `$XDG_DATA_HOME/hookbox`, else `~/.local/share/hookbox` (the same as every command).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Keep interactions, projects, keys, credentials and agents in this PostgreSQL database
    /// (`postgres://user[:password]@host[:port]/db`) instead of SQLite's file in the data dir,
    /// so that several `hookbox serve` replicas share them. The credential key stays in the data
    /// dir (or `HOOKBOX_SECRET_KEY`); replicas must share it.
    #[arg(long, value_name = "URL", env = hookbox_store::env_vars::HOOKBOX_DATABASE_URL, hide_env_values = true)]
    pub database: Option<String>,
    /// Run as one replica of several sharing `--database` and the data dir: environments are
    /// leased to one replica at a time and requests for them are forwarded there, proven by
    /// this secret (the same on every replica).
    #[arg(
        long,
        value_name = "SECRET",
        env = "HOOKBOX_CLUSTER_SECRET",
        hide_env_values = true
    )]
    pub cluster_secret: Option<String>,
    /// Where the other replicas reach this one (default: http:// and the address it listens on).
    /// Its host is always an allowed Host (see --allow-host).
    #[arg(long, value_name = "URL")]
    pub replica_url: Option<String>,
    /// A name clients may reach the server by besides IP addresses and `localhost`: NAME (any
    /// port) or NAME:PORT (that port only). Every other `Host` gets 403, so that no web page can
    /// reach the server through a name it re-points at this machine (DNS rebinding). Give the
    /// names a reverse proxy or load balancer passes on, and names in the metrics scraper's
    /// targets. Repeatable; also `allow_hosts` in the config file's `[server]` table.
    #[arg(long = "allow-host", value_name = "NAME[:PORT]")]
    pub allow_hosts: Vec<String>,
    /// The origin (SCHEME://HOST[:PORT]) of a web page other than the server's own that may use
    /// the API (another console, a web app): its requests get CORS headers. Pages of any other
    /// origin get 403. Never `*`. Repeatable; also `allow_origins` in `[server]`.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// Append one JSON line per hook decision and per egress decision to FILE (created 0600;
    /// each line written before the decision takes effect, fsynced within a second; rotated to
    /// FILE.1 … FILE.5 past --audit-log-max-bytes).
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Size at which the audit log is rotated.
    #[arg(long, value_name = "BYTES", default_value_t = 100 << 20)]
    pub audit_log_max_bytes: u64,
    /// Also serve Prometheus metrics (`GET /metrics`, every project's) on this address, for the
    /// operator's scraper; keep it off public networks. In local mode the API serves them too.
    /// A scraper that names the server by a host name needs it in --allow-host.
    #[arg(long, value_name = "ADDR", value_parser = super::args::parse_listen)]
    pub metrics_listen: Option<SocketAddr>,
    /// How long a replica's heartbeat and environment leases last unrenewed: after it stops,
    /// another replica takes its environments and fails its interactions within this time. A
    /// replica that cannot renew them for this long (cut off from the database) stops serving
    /// its environments and closes them.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub lease_ttl: u64,
    /// API keys clients may send (comma-separated in the environment variable), each `KEY` (a
    /// project of its own) or `PROJECT:KEY` (keys naming one project share it). Managed keys
    /// (`hookbox key create`) work too. None of either = local mode: no key needed, one project
    /// `default`, loopback only.
    #[arg(long = "api-key", env = hookbox_server::env_vars::HOOKBOX_API_KEYS, value_delimiter = ',', hide_env_values = true)]
    pub api_keys: Vec<String>,
    /// Config file (TOML) with per-project quotas: `[quotas]` for every project and
    /// `[projects.NAME.quotas]` for one, `[projects.NAME] hook_dialects = "LIST|all"` (see
    /// --hook-dialects), and `[server]` with `allow_hosts` and `allow_origins` (see README).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Host uids (and gids) environments' sandboxes run as, FIRST:COUNT; one per environment.
    /// None of them may be a real account.
    #[arg(long, value_name = "FIRST:COUNT", value_parser = hookbox_environments::runner::UidRange::parse)]
    pub sandbox_uid_range: Option<hookbox_environments::runner::UidRange>,
    /// Model backend. Default: `gemini` when GEMINI_API_KEY is set, else `openai` when
    /// HOOKBOX_OPENAI_BASE_URL is set, else the deterministic `offline` agent.
    #[arg(long, value_enum)]
    pub model: Option<ModelKind>,
    /// Model turns per interaction before it stops with `budget_exceeded`.
    #[arg(long, default_value_t = 32)]
    pub max_turns: usize,
    /// How long a tool call that a pre hook asked a person about (`"decision": "ask"`) waits
    /// for an approval; unanswered by then, it is denied and the interaction goes on, saying so.
    #[arg(long, value_name = "SECS", default_value_t = hookbox_agent::agent_loop::DEFAULT_ASK_TIMEOUT.as_secs_f64(), value_parser = parse_ask_timeout)]
    pub ask_timeout: f64,
    /// Remote MCP servers (`mcp_server` tools): how long one tool call may take before the
    /// model gets a time-out error (connecting and listing a server's tools get a quarter of
    /// it, at least 5 s).
    #[arg(long, value_name = "SECS", default_value_t = 60.0, value_parser = parse_mcp_timeout)]
    pub mcp_timeout: f64,
    /// fsync every commit (survives power loss, slower). Default: WAL with synchronous=NORMAL,
    /// which survives a crash or SIGKILL of hookbox.
    #[arg(long)]
    pub sync_full: bool,
    /// DANGEROUS, operator-only: let every environment's egress dial this blocked range anyway
    /// (loopback, private, link-local ...), e.g. 127.0.0.0/8 for a local test receiver.
    /// Repeatable.
    #[arg(long = "egress-allow-cidr", value_name = "CIDR")]
    pub egress_allow_cidrs: Vec<Cidr>,
    /// Pin a name for egress, like curl's --connect-to: HOST:PORT=IP:PORT. The pinned address is
    /// still checked against the blocked ranges. Repeatable.
    #[arg(long = "egress-resolve", value_name = "HOST:PORT=IP:PORT")]
    pub egress_resolve: Vec<ResolvePin>,
    /// A PEM file of extra root certificates the egress proxy trusts for upstream TLS.
    #[arg(long = "egress-extra-ca", value_name = "FILE")]
    pub egress_extra_ca: Option<PathBuf>,
    /// Run tools and hooks WITHOUT any isolation, directly on this machine. Only for kernels that
    /// lack a sandbox feature; a warning is printed at start and logged on every tool call.
    #[arg(long)]
    pub insecure_no_isolation: bool,
    #[command(flatten)]
    pub runtime: super::env::RuntimeArgs,
    /// Close an opened environment (its network namespace, egress proxy and CA, and its disk's
    /// mount and loop device) after this many seconds without use; it is reopened from disk on
    /// next use. A disk some other process left mounted is unmounted once idle as long.
    #[arg(long, value_name = "SECS", default_value_t = hookbox_server::sandbox::DEFAULT_IDLE_TIMEOUT.as_secs())]
    pub env_idle_timeout: u64,
    /// Most environments kept open at once; beyond it the least recently used idle ones are
    /// closed first (environments in use are never closed).
    #[arg(long, value_name = "N", default_value_t = hookbox_server::sandbox::DEFAULT_MAX_OPEN, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_open_environments: usize,
    /// Keep every environment's snapshots in this object store: `s3://BUCKET/PREFIX` (the
    /// usual AWS_* variables, or `?endpoint=…&region=…&access_key_id=…&secret_access_key=…`),
    /// `gs://BUCKET/PREFIX` (GOOGLE_* variables) or `file:///PATH`. Environments are then
    /// checkpointed after every interaction that changed them and when closed, and restored on
    /// any replica that does not have them, so replicas need no shared data dir.
    #[arg(
        long,
        value_name = "URL",
        env = "HOOKBOX_SNAPSHOT_STORE",
        hide_env_values = true
    )]
    pub snapshot_store: Option<String>,
    /// With --snapshot-store: an interaction completes only once its environment's checkpoint
    /// is uploaded (nothing is lost if this host dies right after), at the cost of the upload's
    /// time on every interaction that changed files.
    #[arg(long, requires = "snapshot_store")]
    pub checkpoint_wait: bool,
    /// Also run other agent CLIs' project hooks files in every environment, as their own CLI
    /// would: a comma-separated list of claude-code, gemini-cli, codex, cursor, copilot, or
    /// `all`. Default: none (an environment's `.claude/settings.json` and the like are ignored).
    /// A project's `hook_dialects` in the --config file (`[projects.NAME]`) replaces it for
    /// that project's environments.
    #[arg(long = "hook-dialects", value_name = "LIST|all", env = "HOOKBOX_HOOK_DIALECTS", default_value = "", hide_default_value = true, value_parser = super::hooks::parse_dialects)]
    pub hook_dialects: hookbox_hooks::dialect::DialectSet,
    /// With --snapshot-store: evict closed, fully uploaded environments from the local disk,
    /// least recently used first, while local copies take more than BYTES (they are restored
    /// on next use). Environments with changes not yet uploaded are never evicted.
    #[arg(long, value_name = "BYTES", requires = "snapshot_store")]
    pub local_env_cache_bytes: Option<u64>,
    /// How often the expiry sweeper looks for environments unused past their project's
    /// `environment_ttl_seconds` (and deletes auth tokens expired for more than an hour).
    #[arg(long, value_name = "SECS", default_value_t = hookbox_server::lifecycle::DEFAULT_EXPIRY_INTERVAL.as_secs_f64())]
    pub expiry_interval: f64,
    /// On SIGTERM or SIGINT, how long running interactions get to finish (new ones are turned
    /// away or sent to a peer meanwhile) before they are stopped and marked failed; with
    /// --snapshot-store, also the longest wait for the last checkpoints. A second signal
    /// stops at once.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_SHUTDOWN_GRACE, value_parser = parse_grace)]
    pub shutdown_grace: f64,
    /// Webhook deliveries: attempts per delivery, the first included, before it is `failed`.
    #[arg(long, value_name = "N", default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub webhook_max_attempts: u32,
    /// Webhook deliveries: seconds before the first retry; doubled after each failed attempt
    /// (at most an hour), each wait scaled by a random factor from 0.5 to 1.
    #[arg(long, value_name = "SECS", default_value_t = 5.0, value_parser = parse_retry_base)]
    pub webhook_retry_base: f64,
    /// Failed delivery attempts in a row (no success between) after which a webhook's state is
    /// `disabled_due_to_failed_deliveries` until it is updated to `enabled`; 0: never.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub webhook_disable_after: u32,
    /// Unfinished file uploads: one left untouched this many seconds is dropped, with the
    /// bytes spooled for it (in `<data-dir>/uploads`, never in memory).
    #[arg(long, value_name = "SECS", default_value_t = hookbox_server::uploads::DEFAULT_IDLE_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub upload_idle_timeout: u64,
    /// Unfinished file uploads one project may hold at once.
    #[arg(long, value_name = "N", default_value_t = hookbox_server::uploads::DEFAULT_SESSIONS_PER_PROJECT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub upload_sessions_per_project: usize,
    /// Bytes one project's unfinished file uploads may spool at once.
    #[arg(long, value_name = "BYTES", default_value_t = hookbox_server::uploads::DEFAULT_BYTES_PER_PROJECT)]
    pub upload_project_bytes: u64,
    /// Bytes all projects' unfinished file uploads may spool at once.
    #[arg(long, value_name = "BYTES", default_value_t = hookbox_server::uploads::DEFAULT_BUDGET_BYTES)]
    pub upload_budget_bytes: u64,
}

/// `--webhook-retry-base`: seconds, from 0.01 to an hour.
fn parse_retry_base(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if (0.01..=3600.0).contains(&secs) => Ok(secs),
        _ => Err(format!(
            "`{text}` is not a number of seconds from 0.01 to 3600"
        )),
    }
}

/// `--shutdown-grace`: seconds, from 0 (stop at once) to a day.
fn parse_grace(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if (0.0..=86_400.0).contains(&secs) => Ok(secs),
        _ => Err(format!(
            "`{text}` is not a number of seconds from 0 to 86400"
        )),
    }
}

fn parse_mcp_timeout(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if (1.0..=3600.0).contains(&secs) => Ok(secs),
        _ => Err(format!(
            "`{text}` is not a number of seconds from 1 to 3600"
        )),
    }
}

fn parse_ask_timeout(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if (1.0..=30.0 * 86_400.0).contains(&secs) => Ok(secs),
        _ => Err(format!(
            "`{text}` is not a number of seconds from 1 to 2592000 (30 days)"
        )),
    }
}

/// Default of `--shutdown-grace`, in seconds (the packaged systemd unit waits longer).
pub const DEFAULT_SHUTDOWN_GRACE: f64 = 30.0;

/// Model backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelKind {
    Offline,
    Gemini,
    Openai,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn model(kind: Option<ModelKind>) -> anyhow::Result<(Arc<dyn Model>, String)> {
    let kind = kind.unwrap_or(if env(agent_vars::GEMINI_API_KEY).is_some() {
        ModelKind::Gemini
    } else if env(agent_vars::HOOKBOX_OPENAI_BASE_URL).is_some() {
        ModelKind::Openai
    } else {
        ModelKind::Offline
    });
    Ok(match kind {
        ModelKind::Offline => (Arc::new(OfflineModel::new()?), "offline".to_owned()),
        ModelKind::Gemini => {
            let key =
                env(agent_vars::GEMINI_API_KEY).context("--model gemini needs GEMINI_API_KEY")?;
            let base = env(agent_vars::HOOKBOX_GEMINI_BASE_URL)
                .unwrap_or_else(|| hookbox_agent::gemini::DEFAULT_BASE_URL.to_owned());
            let name = env(agent_vars::HOOKBOX_GEMINI_MODEL)
                .unwrap_or_else(|| hookbox_agent::gemini::DEFAULT_MODEL.to_owned());
            let label = format!("gemini ({name})");
            (Arc::new(GeminiModel::new(&base, &key, &name)), label)
        }
        ModelKind::Openai => {
            let base = env(agent_vars::HOOKBOX_OPENAI_BASE_URL).context(
                "--model openai needs HOOKBOX_OPENAI_BASE_URL (e.g. http://127.0.0.1:11434/v1)",
            )?;
            let name = env(agent_vars::HOOKBOX_OPENAI_MODEL)
                .context("--model openai needs HOOKBOX_OPENAI_MODEL")?;
            let key = env(agent_vars::HOOKBOX_OPENAI_API_KEY);
            let label = format!("openai ({name} at {base})");
            (
                Arc::new(OpenAiModel::new(&base, &name, key.as_deref())),
                label,
            )
        }
    })
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args))
}

/// Reads the `--config` file.
fn read_config(path: Option<&Path>) -> anyhow::Result<QuotaConfig> {
    let Some(path) = path else {
        return Ok(QuotaConfig::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    let config: QuotaConfig =
        toml::from_str(&text).with_context(|| format!("config file {}", path.display()))?;
    config
        .validate()
        .map_err(|e| anyhow::anyhow!("config file {}: {e}", path.display()))?;
    Ok(config)
}

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let specs: Vec<String> = args
        .api_keys
        .into_iter()
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
        .collect();
    let api_keys = hookbox_store::keys::parse_static_keys(&specs)?;
    let quotas = read_config(args.config.as_deref())?;
    let guard = hookbox_server::browser_policy(
        &quotas.server,
        &args.allow_hosts,
        &args.allow_origins,
        args.replica_url.as_deref(),
    )
    .context("--allow-host, --allow-origin or --replica-url")?;
    if !args.listen.ip().is_loopback() && guard.hosts().is_empty() {
        tracing::info!(
            listen = %args.listen,
            "only IP addresses and localhost are answered as Host; give the names clients use (a reverse proxy, a load balancer) with --allow-host"
        );
    }
    let data_dir = match args.data_dir {
        Some(d) => d,
        None => hookbox_environments::environment::default_data_dir()?,
    };
    let options = SqliteOptions {
        synchronous: if args.sync_full {
            Synchronous::Full
        } else {
            Synchronous::Normal
        },
    };
    if let Some(path) = &args.audit_log {
        let layer = hookbox_server::audit::AuditLayer::open(hookbox_server::audit::AuditOptions {
            max_bytes: args.audit_log_max_bytes.max(4096),
            ..hookbox_server::audit::AuditOptions::new(path.clone())
        })
        .with_context(|| format!("cannot open the audit log {}", path.display()))?;
        hookbox_server::audit::install(layer);
    }
    // A keyless server may listen on loopback only, refused before anything listens. Managed
    // keys live in the store, so without a static key a non-loopback address opens it first.
    // Kept for serving: opened (and the data dir checked, with its warnings) once.
    let mut probed = None;
    if api_keys.is_empty() && !args.listen.ip().is_loopback() {
        let probe = hookbox_store::open_store(&data_dir, args.database.as_deref(), &options)
            .await
            .with_context(|| match args.database {
                Some(_) => "cannot open the PostgreSQL store (--database)".to_owned(),
                None => format!("cannot open the store in {}", data_dir.display()),
            })?;
        hookbox_server::check_listen_addr(args.listen, probe.has_api_keys().await?)?;
        probed = Some(probe);
    }
    // Bound next: a replica's address is part of its identity in the cluster.
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr().context("listener address")?;
    let (store, cluster): (Arc<dyn Store>, Option<ClusterConfig>) = match &args.cluster_secret {
        None => (
            match probed {
                Some(store) => store,
                None => hookbox_store::open_store(&data_dir, args.database.as_deref(), &options)
                    .await
                    .with_context(|| match args.database {
                        // Never the URL: it may hold a password.
                        Some(_) => "cannot open the PostgreSQL store (--database)".to_owned(),
                        None => format!("cannot open the store in {}", data_dir.display()),
                    })?,
            },
            None,
        ),
        Some(secret) => {
            let Some(url) = args.database.as_deref() else {
                bail!(
                    "--cluster-secret needs --database postgres://... (replicas share one database)"
                );
            };
            if secret.len() < 16 {
                bail!("--cluster-secret must be at least 16 characters");
            }
            // A replica opens its own store below: the probe's pool is let go now, not held
            // for the server's life; it prepared the data dir already (warnings once).
            if probed.take().is_none() {
                hookbox_store::data_dir::prepare(&data_dir)?;
            }
            let replica = hookbox_store::Replica {
                id: format!("r_{:012x}", rand::random::<u64>() >> 16),
                url: args
                    .replica_url
                    .clone()
                    .unwrap_or_else(|| format!("http://{addr}")),
                lease_ttl: Duration::from_secs(args.lease_ttl.max(1)),
            };
            let key = hookbox_store::SecretKey::load_or_create(&data_dir)?;
            let store = hookbox_store::PostgresStore::connect_replica(
                url,
                key,
                &Default::default(),
                replica.clone(),
            )
            .await
            .context("cannot open the PostgreSQL store (--database)")?;
            let cluster = store
                .cluster()
                .context("the PostgreSQL store has no cluster")?;
            cluster
                .heartbeat()
                .await
                .context("first replica heartbeat")?;
            tracing::info!(replica = %replica.id, url = %replica.url, "joined the cluster");
            (
                Arc::new(store) as Arc<dyn Store>,
                Some(ClusterConfig {
                    cluster,
                    secret: secret.clone(),
                }),
            )
        }
    };
    let has_keys = !api_keys.is_empty() || store.has_api_keys().await?;
    hookbox_server::check_listen_addr(args.listen, has_keys)?;
    let (model, model_label) = model(args.model)?;
    let launcher = Launcher::from_env_or_current_exe(super::env::SANDBOX_EXEC_SUBCOMMAND)
        .context("locating the sandbox launcher")?;
    let mut sandbox = SandboxOptions::new(launcher);
    if args.insecure_no_isolation {
        eprintln!("{NO_ISOLATION_WARNING}");
        sandbox.isolation = Isolation::InsecureNone;
    }
    args.runtime.apply(&mut sandbox)?;
    if quotas.names_runtime(RuntimeKind::Gvisor) && sandbox.runtime != RuntimeKind::Gvisor {
        // The config gives some project gVisor: refuse a missing runsc now, not at its first
        // environment.
        if sandbox.isolation != Isolation::Full {
            bail!(
                "the config file gives a project runtime = \"gvisor\", which cannot run with --insecure-no-isolation"
            );
        }
        sandbox.gvisor.check().map_err(|e| {
            anyhow::anyhow!("the config file gives a project runtime = \"gvisor\": {e}")
        })?;
    }
    let runtime_label = runtime_label(&sandbox, quotas.names_runtime(RuntimeKind::Gvisor));
    if let Some(range) = args.sandbox_uid_range {
        sandbox.identities = Some(range);
    }
    if !args.egress_allow_cidrs.is_empty() {
        let cidrs: Vec<String> = args
            .egress_allow_cidrs
            .iter()
            .map(|c| c.to_string())
            .collect();
        tracing::warn!(cidrs = ?cidrs, "--egress-allow-cidr re-admits blocked ranges for every environment");
    }
    let egress = EgressOptions::new(Arc::new(StoreCredentials::new(store.clone()))).with_operator(
        EgressOperator {
            allowed_cidrs: args.egress_allow_cidrs.clone(),
            extra_ca_file: args.egress_extra_ca.clone(),
            resolve_pins: args.egress_resolve.clone(),
        },
    );
    let environments = Environments::open(&data_dir, sandbox, egress)
        .with_context(|| format!("cannot open the environments in {}", data_dir.display()))?
        .with_hook_dialects(args.hook_dialects)
        .with_project_hook_dialects(quotas.project_hook_dialects());
    if !args.hook_dialects.is_empty() {
        tracing::info!(dialects = %args.hook_dialects, "vendor hooks files are read in every environment");
    }
    let snapshots = match &args.snapshot_store {
        Some(url) => Some(
            open_snapshots(
                url,
                SnapshotArgs {
                    insecure: args.insecure_no_isolation,
                    local_cache_bytes: args.local_env_cache_bytes,
                },
                &quotas,
                &environments,
            )
            .await?,
        ),
        None => None,
    };
    let slots = SlotRegistry::new(
        quotas
            .configured(hookbox_store::DEFAULT_PROJECT)
            .sandbox_processes,
    );
    let mut backend = SandboxBackend::with_limits(
        environments,
        CacheLimits {
            idle_timeout: Duration::from_secs(args.env_idle_timeout),
            max_open: args.max_open_environments,
        },
        Clock::system(),
    )
    .with_slots(slots.clone())
    .with_mcp_options(hookbox_mcp::client::ClientOptions {
        call_timeout: Duration::from_secs_f64(args.mcp_timeout),
        connect_timeout: Duration::from_secs_f64((args.mcp_timeout / 4.0).max(5.0)),
        ..Default::default()
    });
    if let Some(manager) = &snapshots {
        backend = backend.with_snapshots(manager.clone());
        // Among replicas only an environment's lease holder writes its snapshots, each
        // recording the lease's fencing number.
        if let Some(config) = &cluster {
            manager.set_gate(hookbox_server::lifecycle::checkpoint_gate(
                config.cluster.clone(),
            ));
        }
    }
    // Among replicas an environment is opened only under a lease held here, and a copy opened
    // under a lease lost since is closed before the environment is served again.
    if let Some(config) = &cluster {
        backend = backend.with_leases(config.cluster.clone());
    }
    let backend = Arc::new(backend);
    let backend_for_stop = backend.clone();
    let sweeper = backend.spawn_sweeper(backend.sweep_period());
    let lease_watch = cluster
        .as_ref()
        .map(|c| backend.spawn_lease_watch(c.cluster.replica().lease_ttl / 3));
    let heartbeat = cluster
        .as_ref()
        .map(|c| tokio::spawn(hookbox_server::cluster::run(c.cluster.clone())));
    let webhook_store = store.clone();
    let state = AppState::replica(
        Services {
            store,
            model,
            executor: backend.clone(),
            environments: backend,
            api_keys,
            allow_keyless: args.listen.ip().is_loopback(),
            loop_config: LoopConfig {
                max_model_turns: args.max_turns,
                ask_timeout: Duration::from_secs_f64(args.ask_timeout),
            },
            quotas,
            sandbox_slots: Some(slots),
            lifecycle: hookbox_server::lifecycle::Lifecycle {
                checkpoint_wait: args.checkpoint_wait,
                expiry_interval: Duration::from_secs_f64(args.expiry_interval.max(0.1)),
                snapshots: snapshots.clone(),
            },
            uploads: hookbox_server::uploads::UploadOptions {
                spool_dir: data_dir.join("uploads"),
                idle_timeout: Duration::from_secs(args.upload_idle_timeout),
                sessions_per_project: args.upload_sessions_per_project,
                bytes_per_project: args.upload_project_bytes,
                budget_bytes: args.upload_budget_bytes,
            },
        },
        cluster,
    );
    state.recover().await.context("start-up recovery failed")?;
    if let Some(manager) = &snapshots {
        let pending = manager
            .start()
            .context("cannot scan the local environments for changes not yet uploaded")?;
        if pending > 0 {
            tracing::info!(pending, "uploading changes left from before the restart");
        }
    }
    let expiry = tokio::spawn(hookbox_server::lifecycle::run_expiry(state.clone()));
    let upload_sweeper = tokio::spawn(hookbox_server::uploads::run_sweeper(state.clone()));
    // Webhook deliveries leave through egress's SSRF guard, with the operator's CIDRs and CAs.
    let poster = hookbox_egress::EgressPoster::for_webhooks(
        args.egress_allow_cidrs.clone(),
        args.egress_extra_ca.clone(),
        &args.egress_resolve,
    )
    .context("cannot set up webhook deliveries (--egress-extra-ca?)")?;
    let poster = Arc::new(poster);
    state.check_webhook_uris_with({
        let poster = poster.clone();
        hookbox_server::WebhookUriCheck(Arc::new(move |uri: &str| poster.refusal(uri)))
    });
    let deliverer = Arc::new(hookbox_webhooks::Deliverer::new(
        webhook_store,
        poster,
        hookbox_webhooks::DeliveryOptions {
            max_attempts: args.webhook_max_attempts,
            retry_base: Duration::from_secs_f64(args.webhook_retry_base),
            disable_after: args.webhook_disable_after,
            ..Default::default()
        },
    ));
    state.deliver_webhooks_with(deliverer.waker());
    // Triggers: every replica looks for due runs; the store lets one fire each.
    let (stop_triggers, triggers_stopped) = tokio::sync::oneshot::channel::<()>();
    let scheduler = tokio::spawn(hookbox_server::triggers::run_scheduler(
        state.clone(),
        async move {
            let _ = triggers_stopped.await;
        },
    ));
    // Calls paused for a reviewer: unanswered past --ask-timeout, they are denied.
    let (stop_approvals, approvals_stopped) = tokio::sync::oneshot::channel::<()>();
    let approvals = tokio::spawn(hookbox_server::approvals::run_sweeper(
        state.clone(),
        async move {
            let _ = approvals_stopped.await;
        },
    ));
    let (stop_webhooks, webhooks_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut webhooks = tokio::spawn({
        let deliverer = deliverer.clone();
        async move {
            deliverer
                .run(async move {
                    let _ = webhooks_stopped.await;
                })
                .await;
        }
    });

    let metrics = match args.metrics_listen {
        Some(at) => {
            let listener = tokio::net::TcpListener::bind(at)
                .await
                .with_context(|| format!("cannot listen on {at} (--metrics-listen)"))?;
            let bound = listener.local_addr().context("metrics listener address")?;
            Some((
                bound,
                tokio::spawn({
                    let app = hookbox_server::metrics_app(&guard);
                    async move { axum::serve(listener, app).await }
                }),
            ))
        }
        None => None,
    };
    // Before the banner, whose last line tells readers (and the tests) that start-up is done.
    // A reader that went away (`hookbox serve | head -1`) does not stop the server.
    let mut printed = Ok(());
    if let Some((bound, _)) = &metrics {
        printed = outln!("metrics: http://{bound}/metrics");
    }
    printed = printed.and_then(|()| {
        outln!(
            "{}",
            banner(addr, &data_dir, &model_label, &runtime_label, has_keys)
        )
    });
    if args.insecure_no_isolation {
        printed = printed.and_then(|()| outln!("\n{NO_ISOLATION_WARNING}"));
    }
    unless_reader_gone(printed)?;
    let grace = Duration::from_secs_f64(args.shutdown_grace);
    let mut signals = Signals::new()?;
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut http = tokio::spawn({
        let state = state.clone();
        async move {
            hookbox_server::serve(listener, state, &guard, async move {
                let _ = http_stopped.await;
            })
            .await
        }
    });
    tokio::select! {
        () = signals.recv() => {}
        served = &mut http => {
            served.context("the server task failed")??;
            return Ok(ExitCode::SUCCESS);
        }
    }
    // Drain: nothing new starts here; what runs gets the grace period to finish.
    state.begin_drain();
    let _ = stop_triggers.send(());
    let _ = stop_approvals.send(());
    let drain_started = tokio::time::Instant::now();
    let mut hurried = false;
    tokio::select! {
        _ = state.wait_idle(grace) => {}
        () = signals.recv() => {
            hurried = true;
            tracing::warn!("second stop signal: stopping now");
        }
    }
    // From here on, another signal does not wait for anything.
    tokio::spawn(async move {
        signals.recv().await;
        eprintln!("hookbox: stopped without cleaning up");
        std::process::exit(130);
    });
    let mut stopped = state.stop_running(STOP_WAIT).await;
    let _ = stop_http.send(());
    if tokio::time::timeout(STOP_WAIT, &mut http).await.is_err() {
        tracing::warn!("connections still open after the drain; closing them");
        http.abort();
    }
    // A request that was past the drain's check when it began may have started one since.
    if state.running_count() > 0 {
        if !hurried {
            state
                .wait_idle(grace.saturating_sub(drain_started.elapsed()))
                .await;
        }
        stopped += state.stop_running(STOP_WAIT).await;
    }
    // The interactions' last events are in the store; attempts in flight finish, the rest wait
    // there for the next start.
    let _ = stop_webhooks.send(());
    if tokio::time::timeout(STOP_WAIT, &mut webhooks)
        .await
        .is_err()
    {
        tracing::warn!("webhook attempts still running; they are retried after the restart");
        webhooks.abort();
    }
    sweeper.abort();
    if let Some(watch) = lease_watch {
        watch.abort();
    }
    expiry.abort();
    upload_sweeper.abort();
    scheduler.abort();
    approvals.abort();
    let report = backend_for_stop
        .shutdown(if hurried { Duration::ZERO } else { grace })
        .await;
    if let Some(heartbeat) = heartbeat {
        heartbeat.abort();
    }
    state.leave_cluster().await;
    if let Some((_, task)) = metrics {
        task.abort();
    }
    tracing::info!(
        event = "server.stopped",
        stopped_interactions = stopped,
        closed_environments = report.closed,
        unmounted_disks = report.unmounted,
        unuploaded_checkpoints = report.unuploaded,
        "hookbox stopped"
    );
    Ok(ExitCode::SUCCESS)
}

/// Longest a stop waits for stopped interactions to end, and for open connections to close.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// SIGTERM and SIGINT, as one stream of stop requests.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
            int: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        tracing::info!("stop signal received");
    }
}

/// Opens the snapshot store and checks, before serving, that it answers and takes writes.
async fn open_snapshots(
    url: &str,
    args: SnapshotArgs,
    quotas: &QuotaConfig,
    environments: &Environments,
) -> anyhow::Result<Arc<hookbox_snapshot::Manager>> {
    if args.insecure {
        bail!(
            "--snapshot-store needs per-environment disk images, which --insecure-no-isolation does not make"
        );
    }
    if quotas
        .configured(hookbox_store::DEFAULT_PROJECT)
        .disk_bytes_per_environment
        == 0
    {
        bail!(
            "--snapshot-store needs per-environment disk images: set disk_bytes_per_environment above 0"
        );
    }
    // Errors name the URL without its credentials.
    let snapshots = hookbox_snapshot::Snapshots::open(url)?;
    snapshots
        .check(Duration::from_secs(15))
        .await
        .context("the snapshot store (--snapshot-store) cannot be used")?;
    tracing::info!(store = %snapshots.shown(), "snapshots in object storage");
    Ok(hookbox_snapshot::Manager::new(
        snapshots,
        environments.clone(),
        hookbox_snapshot::ManagerOptions {
            local_cache_bytes: args.local_cache_bytes,
        },
    ))
}

/// What [`open_snapshots`] needs of the arguments.
#[derive(Debug, Clone, Copy)]
struct SnapshotArgs {
    insecure: bool,
    local_cache_bytes: Option<u64>,
}

/// The banner's `runtime:` line: what new environments run on, and the checked `runsc` when
/// gVisor is in use (by default, or for projects that `config_names_gvisor`).
fn runtime_label(sandbox: &SandboxOptions, config_names_gvisor: bool) -> String {
    let runsc = || match sandbox.gvisor.check() {
        Ok(runsc) => format!(
            "runsc release {} at {}, {}",
            runsc.release,
            runsc.path.display(),
            runsc.platform
        ),
        Err(e) => e,
    };
    match sandbox.runtime {
        RuntimeKind::Gvisor => format!("gvisor ({})", runsc()),
        RuntimeKind::Namespaces if config_names_gvisor => format!(
            "namespaces; gvisor for the projects the config file names ({})",
            runsc()
        ),
        RuntimeKind::Namespaces => "namespaces".to_owned(),
    }
}

/// What `serve` prints on stdout once it listens.
pub fn banner(
    addr: SocketAddr,
    data_dir: &Path,
    model: &str,
    runtime: &str,
    keyed: bool,
) -> String {
    let url = format!("http://{addr}");
    let (mode, key) = if keyed {
        ("API keys required", "<your API key>")
    } else {
        ("local mode: no API keys configured, loopback only", "local")
    };
    format!(
        "hookbox is listening on {url} ({mode})\n\
         data dir: {}\n\
         model: {model}\n\
         runtime: {runtime}\n\
         console: {url}/console\n\
         \n\
         Point the google-genai SDK (>= 3.3.0) at it:\n\
         \n\
         \x20   from google import genai\n\
         \x20   client = genai.Client(api_key=\"{key}\",\n\
         \x20                         http_options={{\"base_url\": \"{url}\", \"api_version\": \"v1beta\"}})\n\
         \n\
         or set GOOGLE_GEMINI_BASE_URL={url} and GEMINI_API_KEY={key}.",
        data_dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::parse_grace;

    #[test]
    fn the_grace_period_is_seconds_from_zero_to_a_day() {
        assert_eq!(parse_grace("0"), Ok(0.0));
        assert_eq!(parse_grace("2.5"), Ok(2.5));
        for bad in ["-1", "NaN", "inf", "1e9", "soon", ""] {
            let err = parse_grace(bad).unwrap_err();
            assert!(err.contains("0 to 86400"), "{bad}: {err}");
        }
    }
}
