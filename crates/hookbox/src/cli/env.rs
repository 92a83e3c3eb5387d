//! `hookbox env create|list|show|rm`: environments on this machine (hookbox-environments's store).
//! Creating, forking and removing also write the environment's record in the store `hookbox
//! serve` reads for the same data dir (or `--database`), so the CLI and a running server see the
//! same environments.

use super::output::outln;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use base64::Engine;
use clap::{Args, Subcommand};
use hookbox_egress::ResolvePin;
use hookbox_egress::ssrf::Cidr;
use hookbox_environments::environment::{Environments, default_data_dir};
use hookbox_environments::network::{EgressOperator, EgressOptions};
use hookbox_environments::runner::{GvisorSettings, Launcher, SandboxOptions};
use hookbox_environments::source::{Encoding, EnvValue, EnvironmentSpec, Source, SourceOrigin};
use hookbox_sandbox::gvisor::Platform;
use hookbox_sandbox::spec::{Isolation, RuntimeKind};

/// The hidden subcommand through which the `hookbox` binary acts as its own sandbox launcher.
pub const SANDBOX_EXEC_SUBCOMMAND: &str = "__sandbox-exec";

/// Options shared by every command that touches environments.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// Where environments live (default: $HOOKBOX_DATA_DIR or ~/.local/share/hookbox).
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// Run tools and hooks WITHOUT any isolation, directly on this machine. Only for kernels that
    /// lack a sandbox feature; a warning is printed on every run.
    #[arg(long, global = true)]
    pub insecure_no_isolation: bool,
    /// Build a sandbox for every tool call and command hook instead of starting them inside
    /// the environment's kept (warm) sandbox. Slower; each call then also has its own network
    /// namespace when the environment has no network.
    #[arg(long, global = true)]
    pub cold_sandboxes: bool,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Where the credentials that egress injects live (`hookbox serve --database`).
    #[command(flatten)]
    pub database: super::args::DatabaseArg,
}

/// Which kernel sandboxes run on (`hookbox serve`, `mcp`, `env`, `tool`, `hooks test`).
#[derive(Debug, Clone, Default, Args)]
pub struct RuntimeArgs {
    /// The runtime of environments created without one: `namespaces` (the host kernel behind
    /// namespaces, Landlock and seccomp) or `gvisor` (gVisor's application kernel, `runsc`). An
    /// environment keeps the runtime it was created with.
    #[arg(
        long,
        global = true,
        value_name = "RUNTIME",
        env = "HOOKBOX_RUNTIME",
        default_value = "namespaces"
    )]
    pub runtime: RuntimeKind,
    /// The `runsc` binary for gVisor environments (default: the first on PATH).
    #[arg(long, global = true, value_name = "PATH", env = "HOOKBOX_RUNSC")]
    pub runsc: Option<PathBuf>,
    /// gVisor's platform: `systrap` (works everywhere), `ptrace` or `kvm`.
    #[arg(
        long,
        global = true,
        value_name = "PLATFORM",
        default_value = "systrap"
    )]
    pub runsc_platform: Platform,
}

impl RuntimeArgs {
    /// Puts the runtime choice into `options`; with `--runtime gvisor`, checks `runsc` now, so
    /// a missing or too old one is refused before anything starts.
    pub fn apply(&self, options: &mut SandboxOptions) -> anyhow::Result<()> {
        options.runtime = self.runtime;
        options.gvisor = GvisorSettings::new(self.runsc.clone(), self.runsc_platform);
        if self.runtime == RuntimeKind::Gvisor {
            if options.isolation != Isolation::Full {
                bail!("--runtime gvisor cannot be combined with --insecure-no-isolation");
            }
            let runsc = options
                .gvisor
                .check()
                .map_err(|e| anyhow::anyhow!("--runtime gvisor: {e}"))?;
            tracing::info!(runsc = %runsc.path.display(), release = runsc.release, platform = %runsc.platform, "gVisor runtime");
        }
        Ok(())
    }
}

/// The operator's egress options (`hookbox tool`; `hookbox serve` has the same flags).
#[derive(Debug, Default, Args)]
pub struct EgressArgs {
    /// DANGEROUS: let every environment reach this normally blocked range (loopback, private,
    /// link-local, cloud metadata, ...) when its allowlist allows the host. Repeatable.
    #[arg(long = "egress-allow-cidr", value_name = "CIDR")]
    pub allow_cidrs: Vec<Cidr>,
    /// Connect to IP:PORT whenever HOST:PORT is asked for (like curl --connect-to); TLS still
    /// verifies HOST and the address is still checked. Repeatable.
    #[arg(long = "egress-resolve", value_name = "HOST:PORT=IP:PORT")]
    pub resolve: Vec<ResolvePin>,
    /// A PEM file of extra root certificates trusted for upstream TLS.
    #[arg(long = "egress-extra-ca", value_name = "FILE")]
    pub extra_ca: Option<PathBuf>,
}

impl EgressArgs {
    pub fn operator(&self) -> EgressOperator {
        if !self.allow_cidrs.is_empty() {
            let cidrs: Vec<String> = self.allow_cidrs.iter().map(|c| c.to_string()).collect();
            tracing::warn!(
                ?cidrs,
                "--egress-allow-cidr re-admits blocked ranges for every environment"
            );
        }
        EgressOperator {
            allowed_cidrs: self.allow_cidrs.clone(),
            extra_ca_file: self.extra_ca.clone(),
            resolve_pins: self.resolve.clone(),
        }
    }
}

impl StoreArgs {
    /// The data dir this command uses: `--data-dir`, else the default.
    pub fn data_dir(&self) -> anyhow::Result<PathBuf> {
        match &self.data_dir {
            Some(dir) if dir.as_os_str().is_empty() => {
                Err(super::usage("--data-dir is empty; name a directory"))
            }
            Some(dir) => Ok(dir.clone()),
            None => Ok(default_data_dir()?),
        }
    }

    /// `result`, with a "not found" that names where it looked and how to look elsewhere.
    pub fn located<T>(
        &self,
        result: Result<T, hookbox_environments::environment::EnvError>,
    ) -> anyhow::Result<T> {
        use hookbox_environments::environment::EnvError;
        match result {
            Err(EnvError::NotFound(id)) => {
                let dir = self
                    .data_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default();
                let source = match &self.data_dir {
                    Some(_) => "--data-dir",
                    None => "the default: $HOOKBOX_DATA_DIR, else ~/.local/share/hookbox",
                };
                Err(anyhow::anyhow!(
                    "no environment `{id}` in the data dir {dir} ({source}); --data-dir or HOOKBOX_DATA_DIR chooses another (a `hookbox serve` sees this one only with the same --data-dir)"
                ))
            }
            other => Ok(other?),
        }
    }

    /// Runs `f` on the store `hookbox serve` uses for this data dir (SQLite in it, in WAL mode
    /// with a busy timeout, so a running server and this command share it; or `--database`).
    fn with_store<T>(
        &self,
        f: impl AsyncFnOnce(&dyn hookbox_store::Store) -> hookbox_store::Result<T>,
    ) -> anyhow::Result<T> {
        let data_dir = self.data_dir()?;
        let database = self.database.database.as_deref();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(async {
            let store = hookbox_store::open_store(&data_dir, database, &Default::default())
                .await
                .with_context(|| match database {
                    Some(_) => "cannot open the PostgreSQL store (--database)".to_owned(),
                    None => format!("cannot open the store in {}", data_dir.display()),
                })?;
            Ok(f(store.as_ref()).await?)
        })
    }

    /// Records environment `id`, made from `spec`, where `hookbox serve` looks environments up
    /// (the store), so that the server, the SDK and the console see what the CLI made.
    pub fn record(&self, id: &str, spec: &EnvironmentSpec) -> anyhow::Result<()> {
        let project = spec
            .project
            .clone()
            .unwrap_or_else(|| hookbox_store::DEFAULT_PROJECT.to_owned());
        let now = hookbox_store::time::now_rfc3339();
        // The API's shapes: sources as given (inline content included, as the API keeps it),
        // the network whole (a fork through the API copies it), variables as values.
        let record = serde_json::json!({
            "environment": {
                "id": id,
                "status": "active",
                "created": now,
                "updated": now,
                "last_accessed": now,
                "network": spec.network,
            },
            "env": (!spec.env.is_empty()).then(|| serde_json::to_value(&spec.env)).transpose()?,
        });
        let mut record: hookbox_store::EnvironmentRecord =
            serde_json::from_value(record).context("the environment's record")?;
        let sources = serde_json::to_value(&spec.sources)?;
        record.environment.sources = serde_json::from_value(sources)
            .ok()
            .filter(|s: &Vec<_>| !s.is_empty());
        self.with_store(async |store| store.put_environment(&project, &record).await)
    }

    /// Removes environment `id`'s record of `project` from the store.
    pub fn forget(&self, project: &str, id: &str) -> anyhow::Result<()> {
        self.with_store(async |store| store.delete_environment(project, id).await.map(|_| ()))
    }

    pub fn open(&self) -> anyhow::Result<Environments> {
        self.open_with(None, EgressOperator::default(), false, false)
    }

    /// Opens the store; `tool_timeout` overrides code_execution's wall-clock limit, `operator`
    /// sets the egress operator options. `keep_disks_mounted`: an environment's disk stays
    /// mounted when this process closes it (a one-shot call, which the next one would pay a
    /// mount for; `hookbox serve` unmounts it once idle). `launches_soon`: a sandbox will be
    /// built, so its launcher starts now ([`SandboxOptions::start_launcher_early`]).
    pub fn open_with(
        &self,
        tool_timeout: Option<std::time::Duration>,
        operator: EgressOperator,
        keep_disks_mounted: bool,
        launches_soon: bool,
    ) -> anyhow::Result<Environments> {
        let data_dir = self.data_dir()?;
        let launcher = Launcher::from_env_or_current_exe(SANDBOX_EXEC_SUBCOMMAND)
            .context("locating the sandbox launcher")?;
        let mut options = SandboxOptions::new(launcher);
        // Environments made here get the same disk cap `hookbox serve` gives by default.
        options.disk_limit_bytes =
            Some(hookbox_server::quota::Quotas::default().disk_bytes_per_environment);
        if let Some(timeout) = tool_timeout {
            options.tool_timeout = timeout;
        }
        options.unmount_when_closed = !keep_disks_mounted;
        // Only `hookbox tool` keeps disks mounted: a one-shot call, which need not wait for
        // the kernel to tear its sandbox's namespaces down before it exits.
        options.one_shot = keep_disks_mounted;
        options.warm = !self.cold_sandboxes;
        if self.insecure_no_isolation {
            eprintln!(
                "WARNING: --insecure-no-isolation: tools and hooks run directly on this machine, with NO sandbox"
            );
            options.isolation = Isolation::InsecureNone;
        }
        self.runtime.apply(&mut options)?;
        if launches_soon {
            options.start_launcher_early();
        }
        // Opened only if an environment's egress reads a credential: most calls never do.
        let credentials = hookbox_credentials::LazyStoreCredentials::new(
            &data_dir,
            self.database.database.as_deref(),
        );
        let egress = EgressOptions::new(Arc::new(credentials)).with_operator(operator);
        hookbox_store::data_dir::prepare(&data_dir)?;
        Ok(Environments::open(&data_dir, options, egress)?)
    }
}

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// Create an environment; prints its id.
    Create(CreateArgs),
    /// List environments as JSON lines.
    List(#[command(flatten)] StoreArgs),
    /// Show one environment as JSON (file count and size measured now).
    Show {
        id: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Copy an environment (files, frozen hooks, network, variables) into a new one; prints
    /// its id. Copy-on-write where the filesystem allows; the original is only read.
    Fork(ForkArgs),
    /// Delete an environment and its files.
    Rm {
        id: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// `inline:TARGET=@FILE` (the file's content) or `inline:TARGET=TEXT`. Repeatable. A relative
    /// TARGET is relative to the sandbox root `/`.
    #[arg(long = "source", value_name = "SPEC")]
    pub sources: Vec<String>,
    /// `URL:TARGET`: clone a git repository (local path, file:// or https://) at TARGET.
    #[arg(long = "repo", value_name = "URL:TARGET")]
    pub repos: Vec<String>,
    /// `NAME=VALUE`, applied to every process in the environment. Repeatable.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Snapshot hooks now; `/.agents` is read-only inside the sandbox.
    #[arg(long)]
    pub freeze_hooks: bool,
    /// The network policy: `"disabled"` (the default) or `{"allowlist": [...]}`, as JSON or
    /// `@FILE`. Replaces the spec file's `network`.
    #[arg(long, value_name = "JSON|@FILE")]
    pub network: Option<String>,
    /// A JSON file with the whole spec (`sources`, `env`, `freeze_hooks`, `network`); flags add
    /// to it.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
    /// The environment's disk cap in bytes, enforced by the kernel (its own ext4 image); `0`
    /// for none. Default 10 GiB, as `hookbox serve` gives every environment.
    #[arg(long, value_name = "BYTES")]
    pub disk_limit: Option<u64>,
    /// The project the environment belongs to: its allowlist's `credential`s resolve there
    /// (`hookbox credential --project`). Default: `default`.
    #[arg(long)]
    pub project: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The environment to copy.
    pub id: String,
    /// The fork's network policy (JSON or `@FILE`); default: the original's.
    #[arg(long, value_name = "JSON|@FILE")]
    pub network: Option<String>,
    /// The fork's disk cap in bytes (`0`: none); default 10 GiB.
    #[arg(long, value_name = "BYTES")]
    pub disk_limit: Option<u64>,
    #[command(flatten)]
    pub store: StoreArgs,
}

fn fork(args: ForkArgs) -> anyhow::Result<ExitCode> {
    let store = args.store.open()?;
    // Network and variables come from the original's stored metadata (not the redacted view),
    // so the fork's egress injects the same headers; --network replaces the policy.
    let parent = args.store.located(store.meta_for_fork(&args.id))?;
    let spec = EnvironmentSpec {
        network: match &args.network {
            Some(raw) => Some(parse_network(raw)?),
            None => parent.network,
        },
        env: parent
            .env
            .into_iter()
            .map(|(k, v)| (k, EnvValue::Plain(v)))
            .collect(),
        project: parent.project,
        disk_limit_bytes: args.disk_limit,
        ..EnvironmentSpec::default()
    };
    let meta = args.store.located(store.fork(&args.id, &spec))?;
    if let Err(e) = args.store.record(&meta.id, &spec) {
        let _ = store.remove(&meta.id);
        return Err(e);
    }
    outln!("{}", meta.id)?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn parse_inline(raw: &str) -> anyhow::Result<Source> {
    let Some(rest) = raw.strip_prefix("inline:") else {
        bail!("--source {raw}: expected inline:TARGET=@FILE or inline:TARGET=TEXT");
    };
    let Some((target, value)) = rest.split_once('=') else {
        bail!("--source {raw}: missing `=` between TARGET and content");
    };
    let (content, encoding) = match value.strip_prefix('@') {
        Some(file) => {
            let bytes = std::fs::read(file).with_context(|| format!("reading {file}"))?;
            match String::from_utf8(bytes) {
                Ok(text) => (text, Encoding::Utf8),
                Err(err) => (
                    base64::engine::general_purpose::STANDARD.encode(err.into_bytes()),
                    Encoding::Base64,
                ),
            }
        }
        None => (value.to_owned(), Encoding::Utf8),
    };
    Ok(Source::Inline {
        target: target.to_owned(),
        content,
        encoding,
    })
}

fn parse_repo(raw: &str) -> anyhow::Result<Source> {
    let Some((url, target)) = raw.rsplit_once(':') else {
        bail!("--repo {raw}: expected URL:TARGET");
    };
    if url.is_empty() || target.is_empty() || target.starts_with("//") {
        bail!("--repo {raw}: expected URL:TARGET");
    }
    Ok(Source::Repository {
        url: url.to_owned(),
        target: target.to_owned(),
        reference: None,
    })
}

pub(super) fn parse_network(raw: &str) -> anyhow::Result<serde_json::Value> {
    let text = match raw.strip_prefix('@') {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading --network {path}"))?
        }
        None => raw.to_owned(),
    };
    serde_json::from_str(&text).context("--network is not valid JSON")
}

fn create(args: CreateArgs) -> anyhow::Result<ExitCode> {
    let mut spec = match &args.spec {
        Some(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_slice::<EnvironmentSpec>(&bytes)
                .with_context(|| format!("parsing {}", path.display()))?
        }
        None => EnvironmentSpec::default(),
    };
    for raw in &args.sources {
        spec.sources.push(parse_inline(raw)?);
    }
    for raw in &args.repos {
        spec.sources.push(parse_repo(raw)?);
    }
    for raw in &args.env {
        let Some((name, value)) = raw.split_once('=') else {
            bail!("--env {raw}: expected NAME=VALUE");
        };
        spec.env
            .insert(name.to_owned(), EnvValue::Plain(value.to_owned()));
    }
    spec.freeze_hooks |= args.freeze_hooks;
    if let Some(raw) = &args.network {
        spec.network = Some(parse_network(raw)?);
    }
    if let Some(bytes) = args.disk_limit {
        spec.disk_limit_bytes = Some(bytes);
    }
    if let Some(project) = args.project {
        super::project::check_name(&project)?;
        spec.project = Some(project);
    }
    let store = args.store.open()?;
    // Progress on a terminal (a spinner naming the source being materialised, git's own
    // progress after a clone); nothing when stderr is piped, where only errors belong.
    let progress = Progress::on_tty();
    let meta = store.create(
        &spec,
        SourceOrigin::Operator,
        &mut |line| progress.step(line),
        progress.shown(),
    );
    progress.finish();
    let meta = meta?;
    // The server's record: without it `hookbox serve` on this data dir answers 404 (#31).
    if let Err(e) = args.store.record(&meta.id, &spec) {
        let _ = store.remove(&meta.id);
        return Err(e);
    }
    outln!("{}", meta.id)?;
    Ok(ExitCode::SUCCESS)
}

/// A spinner on stderr when it is a terminal; silent otherwise.
pub struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    pub fn on_tty() -> Self {
        use std::io::IsTerminal as _;
        if !std::io::stderr().is_terminal() {
            return Self(None);
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        Self(Some(bar))
    }

    pub fn shown(&self) -> bool {
        self.0.is_some()
    }

    pub fn step(&self, line: &str) {
        if let Some(bar) = &self.0 {
            // Each step stays on screen above the spinner (println is never rate-limited).
            bar.println(line);
            bar.set_message(line.to_owned());
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

pub fn run(cmd: EnvCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        EnvCommand::Create(args) => create(args),
        EnvCommand::List(store) => {
            for meta in store.open()?.list()? {
                outln!("{}", serde_json::to_string(&with_rfc3339(&meta)?)?)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        EnvCommand::Show { id, store } => {
            let meta = store.located(store.open()?.show(&id))?;
            outln!("{}", serde_json::to_string_pretty(&with_rfc3339(&meta)?)?)?;
            Ok(ExitCode::SUCCESS)
        }
        EnvCommand::Fork(args) => fork(args),
        EnvCommand::Rm { id, store } => {
            let environments = store.open()?;
            let project = store
                .located(environments.show(&id))?
                .project
                .unwrap_or_else(|| hookbox_store::DEFAULT_PROJECT.to_owned());
            store.located(environments.remove(&id))?;
            store.forget(&project, &id)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `meta` as JSON with its times in RFC 3339, as the API prints them (#31: epoch integers).
fn with_rfc3339(meta: &impl serde::Serialize) -> anyhow::Result<serde_json::Value> {
    let mut value = serde_json::to_value(meta)?;
    for key in ["created_at", "updated_at", "last_accessed_at"] {
        if let Some(secs) = value.get(key).and_then(serde_json::Value::as_i64) {
            value[key] = hookbox_store::time::format_unix(secs).into();
        }
    }
    Ok(value)
}
