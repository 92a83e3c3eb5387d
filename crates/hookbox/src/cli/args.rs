//! Arguments several subcommands share.

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
