//! Credentials as stored, for both backends: metadata columns (id, type, status, times) beside
//! the whole configuration sealed with the store's key ([`SecretKey`]), bound to its project and
//! id. Sealing and opening, reading the metadata, and applying a partial update are written
//! here once; the backends only move the bytes.

use hookbox_protocol::api::{
    Credential, CredentialConfig, CredentialStatus, CredentialType, CredentialUpdate,
};
use serde_json::Value;

use crate::crypto::{Sealed, SecretKey};
use crate::error::{Error, Result};
use crate::projects::DEFAULT_PROJECT;
use crate::row::Columns;

/// The associated data that binds a credential's ciphertext to its project and id. The default
/// project keeps the form used before projects existed, so rows sealed then stay readable.
fn credential_aad(project: &str, id: &str) -> String {
    if project == DEFAULT_PROJECT {
        id.to_owned()
    } else {
        format!("{project}/{id}")
    }
}

/// A configuration sealed for the store: `(nonce, ciphertext)`.
pub(crate) fn seal(key: &SecretKey, project: &str, config: &CredentialConfig) -> Result<Sealed> {
    key.seal(
        &credential_aad(project, config.id()),
        &serde_json::to_vec(config)?,
    )
}

/// A stored configuration opened; [`Error::Decrypt`] when it was not sealed for this project
/// and id with this key.
pub(crate) fn open(
    key: &SecretKey,
    project: &str,
    id: &str,
    nonce: &[u8],
    ciphertext: &[u8],
) -> Result<CredentialConfig> {
    let plain = key.open(&credential_aad(project, id), nonce, ciphertext)?;
    Ok(serde_json::from_slice(&plain)?)
}

/// The metadata columns [`from_row`] reads, in its order.
pub(crate) const COLUMNS: &str = "id, type, status, create_time, update_time";

/// A credential's metadata from its row ([`COLUMNS`]).
pub(crate) fn from_row(r: &impl Columns) -> Result<Credential> {
    Ok(Credential {
        id: r.text(0)?,
        kind: serde_json::from_value::<CredentialType>(Value::String(r.text(1)?))?,
        status: serde_json::from_value::<CredentialStatus>(Value::String(r.text(2)?))?,
        create_time: r.text(3)?,
        update_time: r.text(4)?,
    })
}

/// The metadata of a credential created at `now`.
pub(crate) fn created(config: &CredentialConfig, now: &str) -> Credential {
    Credential {
        id: config.id().to_owned(),
        kind: config.kind(),
        status: CredentialStatus::Active,
        create_time: now.to_owned(),
        update_time: now.to_owned(),
    }
}

/// Applies a partial credential update to a stored configuration.
pub fn apply_credential_update(
    id: &str,
    stored: CredentialConfig,
    update: &CredentialUpdate,
) -> Result<CredentialConfig> {
    fn set<T: Clone>(slot: &mut T, v: &Option<T>) {
        if let Some(v) = v {
            *slot = v.clone();
        }
    }
    fn set_opt<T: Clone>(slot: &mut Option<T>, v: &Option<T>) {
        if v.is_some() {
            slot.clone_from(v);
        }
    }
    let mut cfg = stored;
    match (&mut cfg, update) {
        (
            CredentialConfig::BearerToken {
                token,
                header_name,
                prefix,
                ..
            },
            CredentialUpdate::BearerToken {
                token: t,
                header_name: h,
                prefix: p,
            },
        ) => {
            set(token, t);
            set_opt(header_name, h);
            set_opt(prefix, p);
        }
        (
            CredentialConfig::EnvironmentVariable {
                value,
                injection_location,
                trusted_domains,
                ..
            },
            CredentialUpdate::EnvironmentVariable {
                value: v,
                injection_location: l,
                trusted_domains: d,
            },
        ) => {
            set(value, v);
            set(injection_location, l);
            set_opt(trusted_domains, d);
        }
        (
            CredentialConfig::OAuth2 {
                client_id,
                client_secret,
                refresh_token,
                token_url,
                scopes,
                ..
            },
            CredentialUpdate::OAuth2 {
                client_id: ci,
                client_secret: cs,
                refresh_token: rt,
                token_url: tu,
                scopes: sc,
            },
        ) => {
            set(client_id, ci);
            set(client_secret, cs);
            set(refresh_token, rt);
            set(token_url, tu);
            set_opt(scopes, sc);
        }
        (stored, update) => {
            return Err(Error::CredentialTypeMismatch {
                id: id.to_owned(),
                stored: stored.kind().as_str(),
                update: update_kind(update),
            });
        }
    }
    Ok(cfg)
}

fn update_kind(update: &CredentialUpdate) -> &'static str {
    match update {
        CredentialUpdate::BearerToken { .. } => "bearer_token",
        CredentialUpdate::EnvironmentVariable { .. } => "environment_variable",
        CredentialUpdate::OAuth2 { .. } => "oauth2",
    }
}
