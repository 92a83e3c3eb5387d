//! Projects and their managed API keys as stored, for both backends: the records, what a
//! project still holds before it may be removed ([`ProjectUsage`]), and how their rows are read.
//! A key is stored only as its SHA-256 (see [`crate::keys`]).

use serde_json::{Map, Value};

use crate::error::Result;
use crate::row::Columns;

/// The project of local mode, and of everything stored before projects existed.
pub const DEFAULT_PROJECT: &str = "default";

/// Whether `name` may name a project: 1-63 lowercase letters, digits, `-` and `_`, starting
/// with a letter or digit.
pub fn valid_project_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// A managed project.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectRecord {
    pub name: String,
    /// RFC 3339.
    pub created: String,
    /// Quota overrides for this project (a JSON object; absent keys use the server's defaults).
    pub quotas: Map<String, Value>,
}

/// A managed API key, without the key: the store keeps only its SHA-256.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyRecord {
    pub id: String,
    pub project: String,
    /// The key's first characters, to tell keys apart in listings.
    pub prefix: String,
    pub created: String,
    /// RFC 3339 of the revocation; a revoked key authenticates nothing.
    pub revoked: Option<String>,
}

/// What a project still holds (a project is removed only when empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProjectUsage {
    pub interactions: u64,
    pub environments: u64,
    pub credentials: u64,
    pub agents: u64,
    pub webhooks: u64,
    pub triggers: u64,
}

impl ProjectUsage {
    pub fn is_empty(&self) -> bool {
        *self == ProjectUsage::default()
    }

    /// From the rows of `project` in each of [`USAGE_TABLES`], in that order.
    pub(crate) fn from_counts(
        [
            interactions,
            environments,
            credentials,
            agents,
            webhooks,
            triggers,
        ]: [u64; 6],
    ) -> Self {
        ProjectUsage {
            interactions,
            environments,
            credentials,
            agents,
            webhooks,
            triggers,
        }
    }
}

/// The tables whose rows of a project [`ProjectUsage`] counts. Constants, never input.
pub(crate) const USAGE_TABLES: [&str; 6] = [
    "interactions",
    "environments",
    "credentials",
    "agents",
    "webhooks",
    "triggers",
];

/// The columns [`project_from_row`] reads, in its order.
pub(crate) const PROJECT_COLUMNS: &str = "name, created, quotas_json";

pub(crate) fn project_from_row(r: &impl Columns) -> Result<ProjectRecord> {
    Ok(ProjectRecord {
        name: r.text(0)?,
        created: r.text(1)?,
        quotas: r.json::<Map<String, Value>>(2)?,
    })
}

/// The columns [`api_key_from_row`] reads, in its order.
pub(crate) const API_KEY_COLUMNS: &str = "id, project, prefix, created, revoked";

pub(crate) fn api_key_from_row(r: &impl Columns) -> Result<ApiKeyRecord> {
    Ok(ApiKeyRecord {
        id: r.text(0)?,
        project: r.text(1)?,
        prefix: r.text(2)?,
        created: r.text(3)?,
        revoked: r.opt_text(4)?,
    })
}
