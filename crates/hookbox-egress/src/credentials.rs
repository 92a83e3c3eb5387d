//! Named secrets that the proxy injects into requests (spec interactions-api §6).
//!
//! Owns the [`CredentialStore`] trait, the file-backed store (`<data_dir>/credentials/<id>.json`,
//! directory 0700, files 0600, atomic rename writes) and [`Secret`], whose `Debug` is redacted
//! and which has no `Display` and no `Serialize`. Metadata ([`CredentialMeta`]) never carries a
//! value. This module must not log values nor hand them out except through
//! [`CredentialStore::reveal`], which only the injection code calls.

use std::fmt;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// A secret value. Never printed: `Debug` shows `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for injection only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Credential types (spec §6). `oauth2` is not supported yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialType {
    BearerToken,
    EnvironmentVariable,
}

/// Where an `environment_variable` credential may be injected (spec §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InjectionLocation {
    Header,
    Query,
    Body,
}

/// What a credential is, with its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSpec {
    /// Injected as `<header_name>: <prefix> <token>` (or just the token when prefix is empty).
    BearerToken {
        token: Secret,
        header_name: Option<String>,
        prefix: Option<String>,
    },
    /// A value mapped into a sandbox's `env` on explicit request; the proxy does not inject it.
    EnvironmentVariable {
        value: Secret,
        injection_location: Vec<InjectionLocation>,
        trusted_domains: Vec<String>,
    },
}

/// A partial update; fields left `None` keep their value. The type cannot change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialUpdate {
    pub secret: Option<Secret>,
    pub header_name: Option<String>,
    pub prefix: Option<String>,
}

/// What may be shown about a credential: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CredentialMeta {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: CredentialType,
    pub status: &'static str,
    pub create_time: String,
    pub update_time: String,
}

/// What the proxy injects for a credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Injection {
    Header { name: String, value: Secret },
}

/// Credential store errors. None of them carries a secret.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("invalid credential id {0:?}: use 1-64 letters, digits, '-' or '_'")]
    InvalidId(String),
    #[error("credential {0:?} already exists")]
    Exists(String),
    #[error("credential {0:?} not found")]
    NotFound(String),
    #[error(
        "credential {0:?} is an environment_variable credential; the proxy only injects bearer_token credentials"
    )]
    NotInjectable(String),
    #[error("invalid credential: {0}")]
    Invalid(String),
    #[error("credential store I/O on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("credential file {path} is corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
}

pub type Result<T, E = CredentialError> = std::result::Result<T, E>;

/// Storage of named secrets; the API and CLI use `create`/`list`/`get`/`update`/`remove`, the
/// proxy uses `reveal`.
pub trait CredentialStore: Send + Sync + fmt::Debug {
    fn create(&self, id: &str, spec: CredentialSpec) -> Result<CredentialMeta>;
    fn list(&self) -> Result<Vec<CredentialMeta>>;
    fn get(&self, id: &str) -> Result<CredentialMeta>;
    fn update(&self, id: &str, update: CredentialUpdate) -> Result<CredentialMeta>;
    fn remove(&self, id: &str) -> Result<()>;
    /// What to inject for `id`; the only way a value leaves the store.
    fn reveal(&self, id: &str) -> Result<Injection>;
    /// The same store seen from `project`: every id resolves inside that project only, so an
    /// environment's allowlist can name only its own project's credentials. `None`: this store
    /// has no projects (a single-tenant store, such as the file store of tests and tools).
    fn scoped(&self, project: &str) -> Option<std::sync::Arc<dyn CredentialStore>> {
        let _ = project;
        None
    }
}

/// Whether `id` is a valid credential id (also keeps ids safe as file names).
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

/// On-disk form. Private: only this module reads and writes it.
#[derive(Serialize, Deserialize)]
struct Stored {
    id: String,
    #[serde(flatten)]
    kind: StoredKind,
    create_time: String,
    update_time: String,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StoredKind {
    BearerToken {
        token: String,
        header_name: String,
        prefix: String,
    },
    EnvironmentVariable {
        value: String,
        injection_location: Vec<InjectionLocation>,
        trusted_domains: Vec<String>,
    },
}

impl Stored {
    fn meta(&self) -> CredentialMeta {
        CredentialMeta {
            id: self.id.clone(),
            kind: match self.kind {
                StoredKind::BearerToken { .. } => CredentialType::BearerToken,
                StoredKind::EnvironmentVariable { .. } => CredentialType::EnvironmentVariable,
            },
            status: "active",
            create_time: self.create_time.clone(),
            update_time: self.update_time.clone(),
        }
    }
}

/// Default header for bearer tokens (spec §6).
pub const DEFAULT_HEADER_NAME: &str = "Authorization";
/// Default prefix for bearer tokens (spec §6).
pub const DEFAULT_PREFIX: &str = "Bearer";

/// Why a `bearer_token` credential's parts cannot make the header the proxy injects, as
/// `(field, why)`: `header_name` must be a header name that may be injected (an RFC 7230
/// token, neither hop-by-hop nor `Host`), `prefix` and `token` valid in a header value (no CR,
/// LF or NUL; visible ASCII, spaces and tabs). Parts left `None` are not checked. Checked when
/// a credential is created or updated, so a bad one is refused there rather than never
/// injected; the message never echoes the token.
pub fn check_bearer_parts(
    header_name: Option<&str>,
    prefix: Option<&str>,
    token: Option<&str>,
) -> std::result::Result<(), (&'static str, String)> {
    if let Some(name) = header_name {
        crate::inject::check_header_name(name).map_err(|why| ("header_name", why.to_owned()))?;
        if crate::inject::is_hop_by_hop(name) || name.eq_ignore_ascii_case("host") {
            return Err(("header_name", "this header cannot be injected".to_owned()));
        }
    }
    if let Some(prefix) = prefix {
        crate::inject::check_header_value(prefix).map_err(|why| ("prefix", why.to_owned()))?;
    }
    if let Some(token) = token {
        crate::inject::check_header_value(token).map_err(|why| ("token", why.to_owned()))?;
    }
    Ok(())
}

fn check_header(name: &str, value: &str) -> Result<()> {
    if let Err(why) = crate::inject::check_header_name(name) {
        return Err(CredentialError::Invalid(format!(
            "header_name {name:?}: {why}"
        )));
    }
    if let Err(why) = crate::inject::check_header_value(value) {
        // The message must not echo the value.
        return Err(CredentialError::Invalid(format!(
            "the secret (with its prefix): {why}"
        )));
    }
    Ok(())
}

fn header_value(prefix: &str, token: &str) -> String {
    if prefix.is_empty() {
        token.to_owned()
    } else {
        format!("{prefix} {token}")
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

/// Credentials as one JSON file each under `<data_dir>/credentials/`.
#[derive(Debug)]
pub struct FileCredentialStore {
    dir: PathBuf,
    /// Serialises read-modify-write within this process.
    lock: Mutex<()>,
}

impl FileCredentialStore {
    /// Opens (and creates, mode 0700) `<data_dir>/credentials`.
    pub fn open(data_dir: &Path) -> Result<Self> {
        let dir = data_dir.join("credentials");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| CredentialError::Io {
                path: dir.clone(),
                source,
            })?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(|source| {
            CredentialError::Io {
                path: dir.clone(),
                source,
            }
        })?;
        Ok(Self {
            dir,
            lock: Mutex::new(()),
        })
    }

    fn path(&self, id: &str) -> Result<PathBuf> {
        if !valid_id(id) {
            return Err(CredentialError::InvalidId(id.to_owned()));
        }
        Ok(self.dir.join(format!("{id}.json")))
    }

    fn read(&self, id: &str) -> Result<Stored> {
        let path = self.path(id)?;
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CredentialError::NotFound(id.to_owned()));
            }
            Err(source) => return Err(CredentialError::Io { path, source }),
        };
        // serde_json's error message names positions, never the content.
        serde_json::from_slice(&bytes).map_err(|e| CredentialError::Corrupt {
            path,
            message: e.to_string(),
        })
    }

    fn write(&self, stored: &Stored) -> Result<()> {
        let path = self.path(&stored.id)?;
        let io = |source| CredentialError::Io {
            path: path.clone(),
            source,
        };
        let bytes = serde_json::to_vec_pretty(stored).map_err(|e| CredentialError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        // NamedTempFile is created 0600 in the same directory, so the rename is atomic and the
        // secret is never world-readable, not even briefly.
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
        tmp.as_file()
            .set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(io)?;
        tmp.write_all(&bytes).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&path).map_err(|e| io(e.error))?;
        Ok(())
    }

    fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl CredentialStore for FileCredentialStore {
    fn create(&self, id: &str, spec: CredentialSpec) -> Result<CredentialMeta> {
        let _g = self.guard();
        if self.path(id)?.exists() {
            return Err(CredentialError::Exists(id.to_owned()));
        }
        let kind = match spec {
            CredentialSpec::BearerToken {
                token,
                header_name,
                prefix,
            } => {
                let header_name = header_name.unwrap_or_else(|| DEFAULT_HEADER_NAME.into());
                let prefix = prefix.unwrap_or_else(|| DEFAULT_PREFIX.into());
                check_header(&header_name, &header_value(&prefix, token.expose()))?;
                StoredKind::BearerToken {
                    token: token.0,
                    header_name,
                    prefix,
                }
            }
            CredentialSpec::EnvironmentVariable {
                value,
                injection_location,
                trusted_domains,
            } => StoredKind::EnvironmentVariable {
                value: value.0,
                injection_location,
                trusted_domains,
            },
        };
        let now = now_rfc3339();
        let stored = Stored {
            id: id.to_owned(),
            kind,
            create_time: now.clone(),
            update_time: now,
        };
        self.write(&stored)?;
        Ok(stored.meta())
    }

    fn list(&self) -> Result<Vec<CredentialMeta>> {
        let entries = fs::read_dir(&self.dir).map_err(|source| CredentialError::Io {
            path: self.dir.clone(),
            source,
        })?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| CredentialError::Io {
                path: self.dir.clone(),
                source,
            })?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if !valid_id(id) {
                continue;
            }
            match self.read(id) {
                Ok(s) => out.push(s.meta()),
                // Removed between read_dir and read.
                Err(CredentialError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    fn get(&self, id: &str) -> Result<CredentialMeta> {
        Ok(self.read(id)?.meta())
    }

    fn update(&self, id: &str, update: CredentialUpdate) -> Result<CredentialMeta> {
        let _g = self.guard();
        let mut stored = self.read(id)?;
        match &mut stored.kind {
            StoredKind::BearerToken {
                token,
                header_name,
                prefix,
            } => {
                if let Some(s) = update.secret {
                    *token = s.0;
                }
                if let Some(h) = update.header_name {
                    *header_name = h;
                }
                if let Some(p) = update.prefix {
                    *prefix = p;
                }
                check_header(header_name, &header_value(prefix, token))?;
            }
            StoredKind::EnvironmentVariable { value, .. } => {
                if update.header_name.is_some() || update.prefix.is_some() {
                    return Err(CredentialError::Invalid(
                        "header_name and prefix only apply to bearer_token credentials".into(),
                    ));
                }
                if let Some(s) = update.secret {
                    *value = s.0;
                }
            }
        }
        stored.update_time = now_rfc3339();
        self.write(&stored)?;
        Ok(stored.meta())
    }

    fn remove(&self, id: &str) -> Result<()> {
        let _g = self.guard();
        let path = self.path(id)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(CredentialError::NotFound(id.to_owned()))
            }
            Err(source) => Err(CredentialError::Io { path, source }),
        }
    }

    fn reveal(&self, id: &str) -> Result<Injection> {
        let stored = self.read(id)?;
        match stored.kind {
            StoredKind::BearerToken {
                token,
                header_name,
                prefix,
            } => Ok(Injection::Header {
                name: header_name,
                value: Secret(header_value(&prefix, &token)),
            }),
            StoredKind::EnvironmentVariable { .. } => {
                Err(CredentialError::NotInjectable(id.to_owned()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 36, flaw 8): a token with CR/LF or a header name with a space was
    /// accepted and then never injected; each part is checked, naming it, never echoing it.
    #[test]
    fn bearer_parts_that_could_never_be_sent_are_refused_by_name() {
        assert_eq!(
            check_bearer_parts(Some("X-Api-Key"), Some("Bearer"), Some("t0k")),
            Ok(())
        );
        assert_eq!(
            check_bearer_parts(None, None, Some("with space and\ttab")),
            Ok(())
        );
        let field = |r: std::result::Result<(), (&'static str, String)>| r.unwrap_err().0;
        assert_eq!(
            field(check_bearer_parts(Some("X Api"), None, None)),
            "header_name"
        );
        assert_eq!(
            field(check_bearer_parts(Some("X-Key:"), None, None)),
            "header_name"
        );
        assert_eq!(
            field(check_bearer_parts(Some("Host"), None, None)),
            "header_name"
        );
        assert_eq!(
            field(check_bearer_parts(Some("Connection"), None, None)),
            "header_name"
        );
        assert_eq!(
            field(check_bearer_parts(None, Some("Bearer\r\n"), None)),
            "prefix"
        );
        for token in ["s3cret\r\nX-Evil: 1", "s3cret\n", "s3cret\0", "s3crét"] {
            let (field, why) = check_bearer_parts(None, None, Some(token)).unwrap_err();
            assert_eq!(field, "token");
            assert!(!why.contains("s3cr"), "{why}");
        }
        // The file store refuses them too.
        let dir = tempfile::tempdir().unwrap();
        let store = FileCredentialStore::open(dir.path()).unwrap();
        assert!(matches!(
            store.create("crlf", bearer("abc\r\nX: y")),
            Err(CredentialError::Invalid(_))
        ));
    }

    fn bearer(token: &str) -> CredentialSpec {
        CredentialSpec::BearerToken {
            token: Secret::new(token),
            header_name: None,
            prefix: None,
        }
    }

    #[test]
    fn lifecycle_and_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCredentialStore::open(dir.path()).unwrap();
        let meta = store.create("tel", bearer("s3cr3t-value")).unwrap();
        assert_eq!(meta.kind, CredentialType::BearerToken);
        assert!(matches!(
            store.create("tel", bearer("x")),
            Err(CredentialError::Exists(_))
        ));
        let file = dir.path().join("credentials/tel.json");
        let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dmode = fs::metadata(dir.path().join("credentials"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dmode, 0o700);

        assert_eq!(
            store.reveal("tel").unwrap(),
            Injection::Header {
                name: "Authorization".into(),
                value: Secret::new("Bearer s3cr3t-value")
            }
        );
        store
            .update(
                "tel",
                CredentialUpdate {
                    secret: Some(Secret::new("new")),
                    header_name: Some("X-Api-Key".into()),
                    prefix: Some(String::new()),
                },
            )
            .unwrap();
        assert_eq!(
            store.reveal("tel").unwrap(),
            Injection::Header {
                name: "X-Api-Key".into(),
                value: Secret::new("new")
            }
        );
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 1);
        let shown = format!("{listed:?} {}", serde_json::to_string(&listed).unwrap());
        assert!(!shown.contains("new\""), "{shown}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        store.remove("tel").unwrap();
        assert!(matches!(
            store.get("tel"),
            Err(CredentialError::NotFound(_))
        ));
        assert!(matches!(
            store.remove("tel"),
            Err(CredentialError::NotFound(_))
        ));
    }

    #[test]
    fn ids_are_validated_and_env_credentials_are_not_injected() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCredentialStore::open(dir.path()).unwrap();
        assert!(matches!(
            store.create("../x", bearer("v")),
            Err(CredentialError::InvalidId(_))
        ));
        store
            .create(
                "env1",
                CredentialSpec::EnvironmentVariable {
                    value: Secret::new("v"),
                    injection_location: vec![InjectionLocation::Header],
                    trusted_domains: vec![],
                },
            )
            .unwrap();
        assert!(matches!(
            store.reveal("env1"),
            Err(CredentialError::NotInjectable(_))
        ));
    }

    #[test]
    fn bad_values_are_refused_without_echo() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCredentialStore::open(dir.path()).unwrap();
        let e = store.create("c", bearer("line\nbreak-secret")).unwrap_err();
        assert!(!e.to_string().contains("break-secret"), "{e}");
        assert_eq!(format!("{:?}", Secret::new("abc")), "[redacted]");
    }
}
