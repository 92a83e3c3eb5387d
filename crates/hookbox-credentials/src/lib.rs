//! Credentials as the egress proxy sees them, kept in the store: [`StoreCredentials`] is
//! `hookbox_egress`'s [`CredentialStore`] over a [`hookbox_store::Store`] (SQLite in the data
//! dir, or PostgreSQL), seen from one project, where the API's `/credentials` also writes. The
//! CLI (`hookbox credential`) and the egress proxy of `hookbox serve` both go through it, so a
//! credential created by either is the same credential; [`CredentialStore::scoped`] gives an
//! environment's proxy its own project's credentials only.
//!
//! Secrets stay encrypted at rest (the store seals them) and are decrypted only by
//! [`CredentialStore::reveal`], which only the proxy calls at injection time. This crate must
//! not inject anything itself (egress does), serve HTTP, or log or format a secret.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use hookbox_egress::credentials::{
    CredentialError, CredentialMeta, CredentialSpec, CredentialStore, CredentialType,
    CredentialUpdate, DEFAULT_HEADER_NAME, DEFAULT_PREFIX, Injection, InjectionLocation, Secret,
    valid_id,
};
use hookbox_protocol::api::{self, CredentialConfig, InjectionLocations};
use hookbox_store::{DEFAULT_PROJECT, Page, SqliteOptions, Store};

/// Why the store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The runtime that opens it could not run (`what` says why).
    #[error("cannot open the store: {0}")]
    Runtime(&'static str),
    /// The store refused: its error (never the database URL, which may hold a password).
    #[error(transparent)]
    Store(#[from] hookbox_store::Error),
}

/// [`CredentialStore`] backed by a [`Store`], seen from one project.
#[derive(Debug, Clone)]
pub struct StoreCredentials {
    store: Arc<dyn Store>,
    project: String,
}

impl StoreCredentials {
    /// The credentials of the `default` project (local mode's, and the CLI's without
    /// `--project`); [`CredentialStore::scoped`] gives any other project's.
    pub fn new(store: Arc<dyn Store>) -> Self {
        StoreCredentials {
            store,
            project: DEFAULT_PROJECT.to_owned(),
        }
    }

    /// Opens the store `hookbox serve` uses with the same data dir and database: the
    /// PostgreSQL database when `database` names one, else SQLite's file in `data_dir`. Callable
    /// from sync code, on a tokio runtime or not.
    pub fn open(data_dir: &Path, database: Option<&str>) -> Result<Self, OpenError> {
        let store = on_own_runtime(hookbox_store::open_store(
            data_dir,
            database,
            &SqliteOptions::default(),
        ))
        .map_err(OpenError::Runtime)??;
        Ok(Self::new(store))
    }

    /// The same store seen from `project`.
    pub fn for_project(&self, project: &str) -> Self {
        StoreCredentials {
            store: self.store.clone(),
            project: project.to_owned(),
        }
    }

    /// Runs a store future to completion from sync code (see [`on_own_runtime`]).
    fn block<T: Send>(&self, fut: impl Future<Output = T> + Send) -> Result<T, CredentialError> {
        on_own_runtime(fut)
            .map_err(|what| CredentialError::Invalid(format!("credential store: {what}")))
    }
}

/// Runs `fut` to completion from sync code, whether or not the caller is on a tokio runtime
/// (the proxy calls `reveal` from async tasks): on a scoped thread with its own small runtime,
/// so no runtime is ever blocked from inside. `Err` says what failed.
fn on_own_runtime<T: Send>(fut: impl Future<Output = T> + Send) -> Result<T, &'static str> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map(|rt| rt.block_on(fut))
            })
            .join()
    })
    .map_err(|_| "worker thread panicked")?
    .map_err(|_| "cannot start a runtime")
}

/// The API's check of a bearer token's header, for the CLI's credentials too.
fn check_bearer(
    header_name: Option<&str>,
    prefix: Option<&str>,
    token: Option<&str>,
) -> Result<(), CredentialError> {
    hookbox_egress::credentials::check_bearer_parts(header_name, prefix, token)
        .map_err(|(field, why)| CredentialError::Invalid(format!("{field}: {why}")))
}

fn store_error(err: hookbox_store::Error) -> CredentialError {
    match err {
        hookbox_store::Error::AlreadyExists { id, .. } => CredentialError::Exists(id),
        hookbox_store::Error::NotFound { id, .. } => CredentialError::NotFound(id),
        // Store errors never carry secret values.
        other => CredentialError::Invalid(other.to_string()),
    }
}

fn meta(c: api::Credential) -> Result<CredentialMeta, CredentialError> {
    Ok(CredentialMeta {
        kind: match c.kind {
            api::CredentialType::BearerToken => CredentialType::BearerToken,
            api::CredentialType::EnvironmentVariable => CredentialType::EnvironmentVariable,
            api::CredentialType::OAuth2 => {
                return Err(CredentialError::Invalid(format!(
                    "credential {:?} is an oauth2 credential, which hookbox cannot use yet",
                    c.id
                )));
            }
        },
        status: match c.status {
            api::CredentialStatus::Active => "active",
            api::CredentialStatus::Revoked => "revoked",
        },
        id: c.id,
        create_time: c.create_time,
        update_time: c.update_time,
    })
}

fn location(l: InjectionLocation) -> api::InjectionLocation {
    match l {
        InjectionLocation::Header => api::InjectionLocation::Header,
        InjectionLocation::Query => api::InjectionLocation::Query,
        InjectionLocation::Body => api::InjectionLocation::Body,
    }
}

fn now() -> String {
    hookbox_store::time::now_rfc3339()
}

impl CredentialStore for StoreCredentials {
    fn create(&self, id: &str, spec: CredentialSpec) -> Result<CredentialMeta, CredentialError> {
        if !valid_id(id) {
            return Err(CredentialError::InvalidId(id.to_owned()));
        }
        let config = match spec {
            CredentialSpec::BearerToken {
                token,
                header_name,
                prefix,
            } => {
                check_bearer(
                    header_name.as_deref(),
                    prefix.as_deref(),
                    Some(token.expose()),
                )?;
                CredentialConfig::BearerToken {
                    id: id.to_owned(),
                    token: api::Secret(token.expose().to_owned()),
                    header_name,
                    prefix,
                }
            }
            CredentialSpec::EnvironmentVariable {
                value,
                injection_location,
                trusted_domains,
            } => CredentialConfig::EnvironmentVariable {
                id: id.to_owned(),
                value: api::Secret(value.expose().to_owned()),
                injection_location: InjectionLocations::Many(
                    injection_location.into_iter().map(location).collect(),
                ),
                trusted_domains: (!trusted_domains.is_empty()).then_some(trusted_domains),
            },
        };
        let created = self
            .block(self.store.create_credential(&self.project, &config, &now()))?
            .map_err(store_error)?;
        meta(created)
    }

    fn list(&self) -> Result<Vec<CredentialMeta>, CredentialError> {
        let mut out = Vec::new();
        let mut page = Page {
            size: Some(Page::MAX_SIZE),
            token: None,
        };
        loop {
            let got = self
                .block(self.store.list_credentials(&self.project, &page))?
                .map_err(store_error)?;
            for c in got.items {
                // An oauth2 credential made through the API cannot be shown as egress metadata;
                // it is skipped here rather than failing the whole listing.
                if let Ok(m) = meta(c) {
                    out.push(m);
                }
            }
            match got.next_page_token {
                Some(token) => page.token = Some(token),
                None => return Ok(out),
            }
        }
    }

    fn get(&self, id: &str) -> Result<CredentialMeta, CredentialError> {
        let got = self
            .block(self.store.get_credential(&self.project, id))?
            .map_err(store_error)?;
        meta(got.ok_or_else(|| CredentialError::NotFound(id.to_owned()))?)
    }

    fn update(
        &self,
        id: &str,
        update: CredentialUpdate,
    ) -> Result<CredentialMeta, CredentialError> {
        let current = self.get(id)?;
        let secret = update.secret.map(|s| api::Secret(s.expose().to_owned()));
        let update = match current.kind {
            CredentialType::BearerToken => {
                check_bearer(
                    update.header_name.as_deref(),
                    update.prefix.as_deref(),
                    secret.as_ref().map(|s| s.0.as_str()),
                )?;
                api::CredentialUpdate::BearerToken {
                    token: secret,
                    header_name: update.header_name,
                    prefix: update.prefix,
                }
            }
            CredentialType::EnvironmentVariable => {
                if update.header_name.is_some() || update.prefix.is_some() {
                    return Err(CredentialError::Invalid(
                        "header name and prefix apply to bearer_token credentials".into(),
                    ));
                }
                api::CredentialUpdate::EnvironmentVariable {
                    value: secret,
                    injection_location: None,
                    trusted_domains: None,
                }
            }
        };
        let updated = self
            .block(
                self.store
                    .update_credential(&self.project, id, &update, &now()),
            )?
            .map_err(store_error)?;
        meta(updated)
    }

    fn remove(&self, id: &str) -> Result<(), CredentialError> {
        if self
            .block(self.store.delete_credential(&self.project, id))?
            .map_err(store_error)?
        {
            Ok(())
        } else {
            Err(CredentialError::NotFound(id.to_owned()))
        }
    }

    fn reveal(&self, id: &str) -> Result<Injection, CredentialError> {
        let config = self
            .block(self.store.credential_secret(&self.project, id))?
            .map_err(store_error)?
            .ok_or_else(|| CredentialError::NotFound(id.to_owned()))?;
        match config {
            CredentialConfig::BearerToken {
                token,
                header_name,
                prefix,
                ..
            } => {
                let prefix = prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_owned());
                let value = if prefix.is_empty() {
                    token.0
                } else {
                    format!("{prefix} {}", token.0)
                };
                Ok(Injection::Header {
                    name: header_name.unwrap_or_else(|| DEFAULT_HEADER_NAME.to_owned()),
                    value: Secret::new(value),
                })
            }
            CredentialConfig::EnvironmentVariable { .. } => {
                Err(CredentialError::NotInjectable(id.to_owned()))
            }
            CredentialConfig::OAuth2 { .. } => Err(CredentialError::Invalid(format!(
                "credential {id:?} is an oauth2 credential, which the proxy cannot inject yet"
            ))),
        }
    }

    fn scoped(&self, project: &str) -> Option<Arc<dyn CredentialStore>> {
        Some(Arc::new(self.for_project(project)))
    }
}

/// [`StoreCredentials`] opened at first use: what the one-shot commands (`hookbox tool`,
/// `hooks test`, `env`, `mcp`) hand to egress, so that a call in an environment whose egress
/// injects no credential (most of them) never opens the database, reads its sealing key or runs
/// its migrations. Once opened, the store is kept; an open that failed is tried again at the
/// next use (a PostgreSQL server that was down may be back), and its error is the use's.
#[derive(Clone)]
pub struct LazyStoreCredentials {
    opener: Arc<Opener>,
    /// The project seen from: `None` for the `default` project.
    project: Option<String>,
}

/// Where the store is and, once opened, the store.
struct Opener {
    data_dir: std::path::PathBuf,
    /// A PostgreSQL URL, which may hold a password: never formatted.
    database: Option<String>,
    opened: std::sync::Mutex<Option<StoreCredentials>>,
}

impl std::fmt::Debug for LazyStoreCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyStoreCredentials")
            .field("data_dir", &self.opener.data_dir)
            .field("database", &self.opener.database.as_ref().map(|_| "<set>"))
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl LazyStoreCredentials {
    /// The store [`StoreCredentials::open`] would open, opened when first used.
    pub fn new(data_dir: &Path, database: Option<&str>) -> Self {
        LazyStoreCredentials {
            opener: Arc::new(Opener {
                data_dir: data_dir.to_path_buf(),
                database: database.map(str::to_owned),
                opened: std::sync::Mutex::new(None),
            }),
            project: None,
        }
    }

    /// Whether the store has been opened (for tests and diagnostics).
    pub fn is_open(&self) -> bool {
        self.opener
            .opened
            .lock()
            .map(|o| o.is_some())
            .unwrap_or(true)
    }

    /// The store, opened now if it was not yet, seen from this view's project.
    fn store(&self) -> Result<StoreCredentials, CredentialError> {
        let mut opened = self
            .opener
            .opened
            .lock()
            .map_err(|_| CredentialError::Invalid("credential store: lock poisoned".into()))?;
        let store = match &*opened {
            Some(store) => store.clone(),
            None => {
                let store =
                    StoreCredentials::open(&self.opener.data_dir, self.opener.database.as_deref())
                        .map_err(|e| CredentialError::Invalid(format!("credential store: {e}")))?;
                *opened = Some(store.clone());
                store
            }
        };
        Ok(match &self.project {
            Some(project) => store.for_project(project),
            None => store,
        })
    }
}

impl CredentialStore for LazyStoreCredentials {
    fn create(&self, id: &str, spec: CredentialSpec) -> Result<CredentialMeta, CredentialError> {
        self.store()?.create(id, spec)
    }
    fn list(&self) -> Result<Vec<CredentialMeta>, CredentialError> {
        self.store()?.list()
    }
    fn get(&self, id: &str) -> Result<CredentialMeta, CredentialError> {
        self.store()?.get(id)
    }
    fn update(
        &self,
        id: &str,
        update: CredentialUpdate,
    ) -> Result<CredentialMeta, CredentialError> {
        self.store()?.update(id, update)
    }
    fn remove(&self, id: &str) -> Result<(), CredentialError> {
        self.store()?.remove(id)
    }
    fn reveal(&self, id: &str) -> Result<Injection, CredentialError> {
        self.store()?.reveal(id)
    }
    fn scoped(&self, project: &str) -> Option<Arc<dyn CredentialStore>> {
        Some(Arc::new(LazyStoreCredentials {
            opener: self.opener.clone(),
            project: Some(project.to_owned()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl StoreCredentials {
        /// The SQLite store of `data_dir` (what `hookbox serve` uses without `--database`).
        fn open_in(data_dir: &Path) -> Result<Self, hookbox_store::Error> {
            let store = hookbox_store::SqliteStore::open_in(data_dir, &SqliteOptions::default())?;
            Ok(Self::new(Arc::new(store)))
        }
    }

    fn bearer(token: &str) -> CredentialSpec {
        CredentialSpec::BearerToken {
            token: Secret::new(token),
            header_name: None,
            prefix: None,
        }
    }

    #[test]
    fn lifecycle_over_real_sqlite_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = StoreCredentials::open_in(dir.path()).unwrap();
        let m = store.create("telemetry", bearer("tok_1")).unwrap();
        assert_eq!((m.kind, m.status), (CredentialType::BearerToken, "active"));
        assert!(matches!(
            store.create("telemetry", bearer("x")),
            Err(CredentialError::Exists(_))
        ));
        assert!(matches!(
            store.create("bad id", bearer("x")),
            Err(CredentialError::InvalidId(_))
        ));
        drop(store);
        // A second process (the server) sees what the first (the CLI) wrote.
        let store = StoreCredentials::open_in(dir.path()).unwrap();
        let Injection::Header { name, value } = store.reveal("telemetry").unwrap();
        assert_eq!(
            (name.as_str(), value.expose()),
            ("Authorization", "Bearer tok_1")
        );
        store
            .update(
                "telemetry",
                CredentialUpdate {
                    secret: Some(Secret::new("tok_2")),
                    header_name: Some("X-Key".into()),
                    prefix: Some(String::new()),
                },
            )
            .unwrap();
        let Injection::Header { name, value } = store.reveal("telemetry").unwrap();
        assert_eq!((name.as_str(), value.expose()), ("X-Key", "tok_2"));
        assert_eq!(store.list().unwrap().len(), 1);
        store.remove("telemetry").unwrap();
        assert!(matches!(
            store.reveal("telemetry"),
            Err(CredentialError::NotFound(_))
        ));
        assert!(matches!(
            store.remove("telemetry"),
            Err(CredentialError::NotFound(_))
        ));
        // Secrets are encrypted at rest: the token is nowhere in the database file.
        let db = std::fs::read(dir.path().join(hookbox_store::sqlite::DB_FILE)).unwrap();
        assert!(!db.windows(5).any(|w| w == b"tok_1" || w == b"tok_2"));
    }

    #[test]
    fn environment_variable_credentials_are_not_injected() {
        let dir = tempfile::tempdir().unwrap();
        let store = StoreCredentials::open_in(dir.path()).unwrap();
        store
            .create(
                "envcred",
                CredentialSpec::EnvironmentVariable {
                    value: Secret::new("v"),
                    injection_location: vec![InjectionLocation::Header],
                    trusted_domains: vec![],
                },
            )
            .unwrap();
        assert!(matches!(
            store.reveal("envcred"),
            Err(CredentialError::NotInjectable(_))
        ));
    }

    #[test]
    fn a_project_sees_only_its_own_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let store = StoreCredentials::open_in(dir.path()).unwrap();
        store.create("shared", bearer("default-secret")).unwrap();
        let team = store.scoped("team-a").unwrap();
        assert!(matches!(
            team.reveal("shared"),
            Err(CredentialError::NotFound(_))
        ));
        assert!(team.list().unwrap().is_empty());
        team.create("shared", bearer("team-secret")).unwrap();
        let Injection::Header { value, .. } = team.reveal("shared").unwrap();
        assert_eq!(value.expose(), "Bearer team-secret");
        let Injection::Header { value, .. } = store.reveal("shared").unwrap();
        assert_eq!(value.expose(), "Bearer default-secret");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reveal_works_from_inside_a_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let store = StoreCredentials::open_in(dir.path()).unwrap();
        store.create("t", bearer("abc")).unwrap();
        let Injection::Header { value, .. } = store.reveal("t").unwrap();
        assert_eq!(value.expose(), "Bearer abc");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn reveal_works_from_a_current_thread_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let store = StoreCredentials::open_in(dir.path()).unwrap();
        store.create("t", bearer("abc")).unwrap();
        assert!(store.reveal("t").is_ok());
    }

    #[test]
    fn the_lazy_store_opens_nothing_until_a_credential_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let lazy = LazyStoreCredentials::new(dir.path(), None);
        let team = lazy.scoped("team-a").unwrap();
        // Views made, nothing read: no database file exists yet.
        let db = dir.path().join(hookbox_store::sqlite::DB_FILE);
        assert!(!lazy.is_open());
        assert!(!db.exists());
        // The first use opens the same store `StoreCredentials::open` would, once.
        team.create("shared", bearer("team-secret")).unwrap();
        assert!(lazy.is_open());
        assert!(db.exists());
        lazy.create("shared", bearer("default-secret")).unwrap();
        let Injection::Header { value, .. } = team.reveal("shared").unwrap();
        assert_eq!(value.expose(), "Bearer team-secret");
        let direct = StoreCredentials::open(dir.path(), None).unwrap();
        let Injection::Header { value, .. } = direct.reveal("shared").unwrap();
        assert_eq!(value.expose(), "Bearer default-secret");
    }

    #[test]
    fn a_lazy_store_that_cannot_open_says_so_at_use_and_opens_once_it_can() {
        let dir = tempfile::tempdir().unwrap();
        // The data dir is a file: the store cannot be created under it.
        let blocker = dir.path().join("data");
        std::fs::write(&blocker, b"").unwrap();
        let lazy = LazyStoreCredentials::new(&blocker, None);
        assert!(matches!(
            lazy.reveal("x"),
            Err(CredentialError::Invalid(message)) if message.starts_with("credential store:")
        ));
        assert!(!lazy.is_open());
        std::fs::remove_file(&blocker).unwrap();
        std::fs::create_dir(&blocker).unwrap();
        assert!(matches!(
            lazy.reveal("x"),
            Err(CredentialError::NotFound(_))
        ));
        assert!(lazy.is_open());
    }
}
