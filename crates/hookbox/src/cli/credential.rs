//! `hookbox credential create|list|update|rm`: the named secrets the egress proxy injects. They
//! live in the store (encrypted): SQLite in the data dir, or `--database`'s PostgreSQL; the same
//! one `hookbox serve` and the API's `/credentials` use (`hookbox_credentials`), so CLI and API
//! see the same credentials.
//!
//! A secret is read from standard input or `--value-file`, never from the command line (argv is
//! visible to every user through /proc). Nothing this module prints contains a secret: create,
//! update and list show metadata only.

use super::output::out;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use hookbox_egress::credentials::{
    CredentialMeta, CredentialSpec, CredentialStore, CredentialUpdate, InjectionLocation, Secret,
};

use hookbox_credentials::{OpenError, StoreCredentials};

#[derive(Debug, Args)]
pub struct CredentialArgs {
    /// Data directory; credentials live (encrypted) in its database, `<data-dir>/hookbox.db`
    /// (unless --database names a PostgreSQL one).
    /// Default: `$HOOKBOX_DATA_DIR`, else `$XDG_DATA_HOME/hookbox`, else `~/.local/share/hookbox`.
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// The project whose credentials these are (environments of other projects cannot use
    /// them). Default: `default`, the project of local mode.
    #[arg(long, global = true, default_value = hookbox_store::DEFAULT_PROJECT)]
    pub project: String,
    #[command(flatten)]
    pub database: super::args::DatabaseArg,
    #[command(subcommand)]
    pub command: CredentialCommand,
}

#[derive(Debug, Subcommand)]
pub enum CredentialCommand {
    /// Store a new credential. The secret is read from stdin unless --value-file is given.
    Create(CreateArgs),
    /// List credentials (never their values).
    List(ListArgs),
    /// Change a credential's secret (with --value-file or --value-stdin) or its header settings.
    Update(UpdateArgs),
    /// Delete a credential.
    Rm {
        /// The credential id.
        id: String,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Kind {
    /// Injected by the egress proxy as `<header-name>: <prefix> <token>`.
    BearerToken,
    /// Mapped into a sandbox's `env` when an environment asks for it; never injected by the proxy.
    EnvironmentVariable,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Location {
    Header,
    Query,
    Body,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The credential id (1-64 letters, digits, '-' or '_').
    pub id: String,
    #[arg(long = "type", value_enum, default_value = "bearer-token")]
    pub kind: Kind,
    /// bearer-token: header to set (default Authorization).
    #[arg(long)]
    pub header_name: Option<String>,
    /// bearer-token: prefix before the token (default "Bearer"; "" for none).
    #[arg(long)]
    pub prefix: Option<String>,
    /// environment-variable: where it may be injected.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub injection_location: Vec<Location>,
    /// environment-variable: domains it may be sent to (repeatable).
    #[arg(long = "trusted-domain")]
    pub trusted_domains: Vec<String>,
    /// Read the secret from this file instead of stdin.
    #[arg(long)]
    pub value_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    pub id: String,
    /// Read the new secret from this file.
    #[arg(long, conflicts_with = "value_stdin")]
    pub value_file: Option<PathBuf>,
    /// Read the new secret from stdin.
    #[arg(long)]
    pub value_stdin: bool,
    #[arg(long)]
    pub header_name: Option<String>,
    #[arg(long)]
    pub prefix: Option<String>,
}

pub fn run(args: CredentialArgs) -> anyhow::Result<ExitCode> {
    let data_dir = match args.data_dir {
        Some(d) => d,
        None => hookbox_environments::environment::default_data_dir()?,
    };
    super::project::check_name(&args.project)?;
    let store =
        open_credentials(&data_dir, args.database.database.as_deref())?.for_project(&args.project);
    let out = execute(&store, args.command, &mut std::io::stdin().lock())?;
    out!("{out}")?;
    Ok(ExitCode::SUCCESS)
}

/// The credentials of the store `hookbox serve` uses with the same `--data-dir` and
/// `--database`, with the error saying which store failed (never the URL: it may hold a
/// password).
pub(super) fn open_credentials(
    data_dir: &Path,
    database: Option<&str>,
) -> anyhow::Result<StoreCredentials> {
    StoreCredentials::open(data_dir, database).map_err(|e| match e {
        OpenError::Runtime(_) => anyhow::Error::from(e),
        OpenError::Store(e) => {
            let e = anyhow::Error::from(e);
            match database {
                Some(_) => e.context("cannot open the PostgreSQL store (--database)"),
                None => e.context(format!("cannot open the store in {}", data_dir.display())),
            }
        }
    })
}

/// Runs one command against `store`, reading secrets from `stdin`; returns what to print.
fn execute(
    store: &dyn CredentialStore,
    command: CredentialCommand,
    stdin: &mut dyn std::io::Read,
) -> anyhow::Result<String> {
    match command {
        CredentialCommand::Create(a) => {
            let secret = match &a.value_file {
                Some(p) => read_secret_file(p)?,
                None => read_secret(stdin, "stdin")?,
            };
            let spec = match a.kind {
                Kind::BearerToken => {
                    if !a.injection_location.is_empty() || !a.trusted_domains.is_empty() {
                        bail!(
                            "--injection-location and --trusted-domain apply to environment-variable credentials"
                        );
                    }
                    CredentialSpec::BearerToken {
                        token: secret,
                        header_name: a.header_name,
                        prefix: a.prefix,
                    }
                }
                Kind::EnvironmentVariable => {
                    if a.header_name.is_some() || a.prefix.is_some() {
                        bail!("--header-name and --prefix apply to bearer-token credentials");
                    }
                    if a.injection_location.is_empty() {
                        bail!("environment-variable credentials need --injection-location");
                    }
                    CredentialSpec::EnvironmentVariable {
                        value: secret,
                        injection_location: a
                            .injection_location
                            .iter()
                            .map(|l| match l {
                                Location::Header => InjectionLocation::Header,
                                Location::Query => InjectionLocation::Query,
                                Location::Body => InjectionLocation::Body,
                            })
                            .collect(),
                        trusted_domains: a.trusted_domains,
                    }
                }
            };
            Ok(json_line(&store.create(&a.id, spec)?)?)
        }
        CredentialCommand::List(a) => {
            let all = store.list()?;
            if a.json {
                return Ok(format!("{}\n", serde_json::to_string_pretty(&all)?));
            }
            let mut out = format!(
                "{:<24} {:<22} {:<8} {:<26} {}\n",
                "ID", "TYPE", "STATUS", "CREATED", "UPDATED"
            );
            for m in &all {
                let kind = serde_json::to_value(m.kind)?;
                out.push_str(&format!(
                    "{:<24} {:<22} {:<8} {:<26} {}\n",
                    m.id,
                    kind.as_str().unwrap_or(""),
                    m.status,
                    m.create_time,
                    m.update_time
                ));
            }
            Ok(out)
        }
        CredentialCommand::Update(a) => {
            let secret = match (&a.value_file, a.value_stdin) {
                (Some(p), _) => Some(read_secret_file(p)?),
                (None, true) => Some(read_secret(stdin, "stdin")?),
                (None, false) => None,
            };
            if secret.is_none() && a.header_name.is_none() && a.prefix.is_none() {
                bail!(
                    "nothing to update: give --value-file, --value-stdin, --header-name or --prefix"
                );
            }
            let meta = store.update(
                &a.id,
                CredentialUpdate {
                    secret,
                    header_name: a.header_name,
                    prefix: a.prefix,
                },
            )?;
            Ok(json_line(&meta)?)
        }
        CredentialCommand::Rm { id } => {
            store.remove(&id)?;
            Ok(format!("removed {id}\n"))
        }
    }
}

fn json_line(meta: &CredentialMeta) -> anyhow::Result<String> {
    Ok(format!("{}\n", serde_json::to_string(meta)?))
}

/// Largest secret accepted; bounds the read.
const MAX_SECRET: u64 = 64 * 1024;

fn read_secret_file(path: &Path) -> anyhow::Result<Secret> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    read_secret(&mut file, &path.display().to_string())
}

/// Reads a secret, dropping one trailing newline (as `echo` and editors add).
fn read_secret(r: &mut dyn std::io::Read, from: &str) -> anyhow::Result<Secret> {
    let mut buf = String::new();
    r.take(MAX_SECRET + 1)
        .read_to_string(&mut buf)
        .with_context(|| format!("reading the secret from {from}"))?;
    if buf.len() as u64 > MAX_SECRET {
        bail!("the secret from {from} is larger than {MAX_SECRET} bytes");
    }
    let value = buf
        .strip_suffix("\r\n")
        .or_else(|| buf.strip_suffix('\n'))
        .unwrap_or(&buf);
    if value.is_empty() {
        bail!("empty secret from {from}");
    }
    Ok(Secret::new(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(subcommand)]
        c: CredentialCommand,
    }

    /// The SQLite store of `data_dir` (what `hookbox serve` uses without `--database`).
    fn open_in(data_dir: &Path) -> StoreCredentials {
        let store = hookbox_store::SqliteStore::open_in(data_dir, &Default::default()).unwrap();
        StoreCredentials::new(std::sync::Arc::new(store))
    }

    fn run_args(store: &dyn CredentialStore, args: &[&str], stdin: &str) -> anyhow::Result<String> {
        let t = T::try_parse_from(std::iter::once("credential").chain(args.iter().copied()))?;
        execute(store, t.c, &mut stdin.as_bytes())
    }

    #[test]
    fn create_list_update_rm_without_printing_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_in(dir.path());
        let out = run_args(&store, &["create", "telemetry"], "tok-SECRET-1\n").unwrap();
        assert!(out.contains("\"id\":\"telemetry\""), "{out}");
        assert!(out.contains("\"type\":\"bearer_token\""), "{out}");
        assert!(!out.contains("SECRET"));
        let listed = run_args(&store, &["list"], "").unwrap();
        assert!(listed.starts_with("ID "), "{listed}");
        assert!(listed.contains("telemetry") && listed.contains("bearer_token"));
        let json = run_args(&store, &["list", "--json"], "").unwrap();
        assert!(!json.contains("SECRET") && !listed.contains("SECRET"));

        let file = dir.path().join("v");
        std::fs::write(&file, "tok-SECRET-2").unwrap();
        run_args(
            &store,
            &[
                "update",
                "telemetry",
                "--value-file",
                file.to_str().unwrap(),
                "--prefix",
                "Token",
            ],
            "",
        )
        .unwrap();
        match store.reveal("telemetry").unwrap() {
            hookbox_egress::credentials::Injection::Header { name, value } => {
                assert_eq!(name, "Authorization");
                assert_eq!(value.expose(), "Token tok-SECRET-2");
            }
        }
        assert!(run_args(&store, &["update", "telemetry"], "").is_err());
        assert_eq!(
            run_args(&store, &["rm", "telemetry"], "").unwrap(),
            "removed telemetry\n"
        );
        assert!(run_args(&store, &["rm", "telemetry"], "").is_err());
    }

    #[test]
    fn secrets_are_never_taken_from_argv_and_never_empty() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_in(dir.path());
        assert!(run_args(&store, &["create", "x", "--value", "s"], "").is_err());
        assert!(run_args(&store, &["create", "x"], "\n").is_err());
        run_args(
            &store,
            &[
                "create",
                "envcred",
                "--type",
                "environment-variable",
                "--injection-location",
                "header,query",
            ],
            "v",
        )
        .unwrap();
        assert!(store.reveal("envcred").is_err());
    }
}
