//! Credentials: their configs (secrets wrapped so `Debug` never shows them), updates, types,
//! status and the object the API returns.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A write-only secret: it deserialises from the request and serialises (for encrypted storage),
/// but its `Debug` never shows the value, so it cannot reach a log by accident.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where an `environment_variable` credential is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InjectionLocation {
    Header,
    Query,
    Body,
}

/// One location or a list of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum InjectionLocations {
    One(InjectionLocation),
    Many(Vec<InjectionLocation>),
}

/// `POST /credentials` body (spec §6). The client picks `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CredentialConfig {
    BearerToken {
        id: String,
        token: Secret,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        header_name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefix: Option<String>,
    },
    EnvironmentVariable {
        id: String,
        value: Secret,
        injection_location: InjectionLocations,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trusted_domains: Option<Vec<String>>,
    },
    #[serde(rename = "oauth2")]
    OAuth2 {
        id: String,
        client_id: String,
        client_secret: Secret,
        refresh_token: Secret,
        token_url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scopes: Option<Vec<String>>,
    },
}

impl CredentialConfig {
    /// The client-chosen id.
    pub fn id(&self) -> &str {
        match self {
            CredentialConfig::BearerToken { id, .. }
            | CredentialConfig::EnvironmentVariable { id, .. }
            | CredentialConfig::OAuth2 { id, .. } => id,
        }
    }

    /// The wire `type`.
    pub fn kind(&self) -> CredentialType {
        match self {
            CredentialConfig::BearerToken { .. } => CredentialType::BearerToken,
            CredentialConfig::EnvironmentVariable { .. } => CredentialType::EnvironmentVariable,
            CredentialConfig::OAuth2 { .. } => CredentialType::OAuth2,
        }
    }
}

/// `PATCH /credentials/{id}` body: the create shapes with every field optional but `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CredentialUpdate {
    BearerToken {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<Secret>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        header_name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefix: Option<String>,
    },
    EnvironmentVariable {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<Secret>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        injection_location: Option<InjectionLocations>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trusted_domains: Option<Vec<String>>,
    },
    #[serde(rename = "oauth2")]
    OAuth2 {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_secret: Option<Secret>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refresh_token: Option<Secret>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token_url: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scopes: Option<Vec<String>>,
    },
}

/// Credential `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialType {
    BearerToken,
    EnvironmentVariable,
    #[serde(rename = "oauth2")]
    OAuth2,
}

impl CredentialType {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            CredentialType::BearerToken => "bearer_token",
            CredentialType::EnvironmentVariable => "environment_variable",
            CredentialType::OAuth2 => "oauth2",
        }
    }
}

/// `active` or `revoked`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialStatus {
    Active,
    Revoked,
}

/// The Credential resource as returned: metadata only, never a secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Credential {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: CredentialType,
    pub status: CredentialStatus,
    pub create_time: String,
    pub update_time: String,
}

/// `GET /credentials` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListCredentialsResponse {
    pub credentials: Vec<Credential>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}
