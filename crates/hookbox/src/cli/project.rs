//! `hookbox project create|list|quota|rm` and `hookbox key create|list|revoke`: managed projects
//! and their API keys, in the data dir's store (the one `hookbox serve` reads). A key is printed
//! once, by `key create`, and only its SHA-256 is stored; nothing else here prints a key.

use super::output::outln;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use hookbox_server::quota::QuotaOverrides;
use hookbox_store::{ApiKeyRecord, ProjectRecord, SqliteOptions, Store};

#[derive(Debug, Args)]
pub struct ProjectArgs {
    /// Data directory (its database holds projects and keys). Default as for every command.
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    #[command(flatten)]
    pub database: super::args::DatabaseArg,
    #[command(subcommand)]
    pub command: ProjectCommand,
}

#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Create a project (then give it keys with `hookbox key create --project NAME`).
    Create {
        name: String,
        /// Quota overrides, NAME=VALUE (repeatable): environments, running_interactions,
        /// sandbox_processes, requests_per_second, burst, disk_bytes_per_environment,
        /// environment_ttl_seconds, live_sockets, live_frames_per_second, live_max_frame_bytes,
        /// live_idle_timeout_seconds.
        #[arg(long = "quota", value_name = "NAME=VALUE")]
        quotas: Vec<String>,
    },
    /// List projects with their quota overrides.
    List,
    /// Set quota overrides of a project (NAME=VALUE ...; `--clear` drops all first). A running
    /// server applies them within seconds.
    Quota {
        name: String,
        #[arg(value_name = "NAME=VALUE")]
        quotas: Vec<String>,
        #[arg(long)]
        clear: bool,
    },
    /// Remove an empty project and its keys (refused while it holds interactions,
    /// environments, credentials or agents).
    Rm { name: String },
}

#[derive(Debug, Args)]
pub struct KeyArgs {
    /// Data directory (its database holds projects and keys). Default as for every command.
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    #[command(flatten)]
    pub database: super::args::DatabaseArg,
    #[command(subcommand)]
    pub command: KeyCommand,
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create an API key for a project and print it, once (it cannot be shown again).
    Create {
        #[arg(long)]
        project: String,
    },
    /// List keys (ids, projects, prefixes; never the keys).
    List,
    /// Revoke a key by id; requests with it are refused at once.
    Revoke { id: String },
}

async fn open(
    data_dir: Option<PathBuf>,
    database: Option<String>,
) -> anyhow::Result<Arc<dyn Store>> {
    let data_dir = match data_dir {
        Some(d) => d,
        None => hookbox_environments::environment::default_data_dir()?,
    };
    hookbox_store::open_store(&data_dir, database.as_deref(), &SqliteOptions::default())
        .await
        .with_context(|| match database {
            Some(_) => "cannot open the PostgreSQL store".to_owned(),
            None => format!("cannot open the store in {}", data_dir.display()),
        })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Refuses `name` unless it can name a project.
pub(super) fn check_name(name: &str) -> anyhow::Result<()> {
    if !hookbox_store::valid_project_name(name) {
        bail!("`{name}` is not a project name (1-63 lowercase letters, digits, `-`, `_`)");
    }
    Ok(())
}

fn overrides(base: QuotaOverrides, assignments: &[String]) -> anyhow::Result<QuotaOverrides> {
    let mut o = base;
    for a in assignments {
        o.set(a).map_err(anyhow::Error::msg)?;
    }
    Ok(o)
}

fn show_quotas(quotas: &serde_json::Map<String, serde_json::Value>) -> String {
    if quotas.is_empty() {
        return "defaults".to_owned();
    }
    quotas
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn run_project(args: ProjectArgs) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        let store = open(args.data_dir, args.database.database).await?;
        match args.command {
            ProjectCommand::Create { name, quotas } => {
                check_name(&name)?;
                let quotas = overrides(QuotaOverrides::default(), &quotas)?;
                store
                    .create_project(&ProjectRecord {
                        name: name.clone(),
                        created: hookbox_store::time::now_rfc3339(),
                        quotas: quotas.to_json(),
                    })
                    .await
                    .map_err(|e| match e {
                        hookbox_store::Error::AlreadyExists { .. } => {
                            anyhow::anyhow!("project `{name}` already exists")
                        }
                        other => other.into(),
                    })?;
                outln!("{name}")?;
            }
            ProjectCommand::List => {
                for p in store.list_projects().await? {
                    outln!("{}\t{}\t{}", p.name, p.created, show_quotas(&p.quotas))?;
                }
            }
            ProjectCommand::Quota {
                name,
                quotas,
                clear,
            } => {
                let Some(project) = store.get_project(&name).await? else {
                    bail!("no project `{name}` (create it with `hookbox project create {name}`)");
                };
                let base = if clear {
                    QuotaOverrides::default()
                } else {
                    QuotaOverrides::from_json(&project.quotas).map_err(anyhow::Error::msg)?
                };
                let updated = overrides(base, &quotas)?;
                store.set_project_quotas(&name, &updated.to_json()).await?;
                outln!("{name}\t{}", show_quotas(&updated.to_json()))?;
            }
            ProjectCommand::Rm { name } => {
                if store.get_project(&name).await?.is_none() {
                    bail!("no project `{name}`");
                }
                let usage = store.project_usage(&name).await?;
                if !usage.is_empty() {
                    bail!(
                        "project `{name}` still holds {} interactions, {} environments, {} credentials, {} agents, {} webhooks and {} triggers; delete them first",
                        usage.interactions,
                        usage.environments,
                        usage.credentials,
                        usage.agents,
                        usage.webhooks,
                        usage.triggers
                    );
                }
                store.delete_project(&name).await?;
                outln!("removed project {name} and its keys")?;
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub fn run_key(args: KeyArgs) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        let store = open(args.data_dir, args.database.database).await?;
        match args.command {
            KeyCommand::Create { project } => {
                check_name(&project)?;
                if store.get_project(&project).await?.is_none() {
                    bail!(
                        "no project `{project}`; create it first with `hookbox project create {project}`"
                    );
                }
                let key = hookbox_store::keys::generate();
                store
                    .create_api_key(
                        &ApiKeyRecord {
                            id: key.id.clone(),
                            project: project.clone(),
                            prefix: key.prefix.clone(),
                            created: hookbox_store::time::now_rfc3339(),
                            revoked: None,
                        },
                        &key.sha256,
                    )
                    .await?;
                eprintln!(
                    "created key {} for project {project}; it is shown once, store it now:",
                    key.id
                );
                // Shown once: a key nobody could read is revoked rather than left to work.
                if let Err(err) = outln!("{}", key.key) {
                    store
                        .revoke_api_key(&key.id, &hookbox_store::time::now_rfc3339())
                        .await?;
                    // A new error, not `err` with context: a reader that went away must not
                    // end this command quietly with success.
                    anyhow::bail!(
                        "key {} was created but could not be shown ({err}), so it was revoked",
                        key.id
                    );
                }
            }
            KeyCommand::List => {
                for k in store.list_api_keys().await? {
                    let state = match &k.revoked {
                        Some(at) => format!("revoked {at}"),
                        None => "active".to_owned(),
                    };
                    outln!(
                        "{}\t{}\t{}…\t{}\t{state}",
                        k.id, k.project, k.prefix, k.created
                    )?;
                }
            }
            KeyCommand::Revoke { id } => {
                if !store
                    .revoke_api_key(&id, &hookbox_store::time::now_rfc3339())
                    .await?
                {
                    bail!("no active key `{id}` (see `hookbox key list`)");
                }
                outln!("revoked {id}")?;
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
