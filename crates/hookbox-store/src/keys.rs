//! API keys: generation, the SHA-256 the store keeps instead of the key, and how a key given on
//! the command line names its project. Keys are 32 random bytes, so a plain SHA-256 is enough to
//! make the stored form useless to a reader of the database (no password stretching needed).
//! Nothing here logs or formats a key.

use base64::Engine;
use sha2::{Digest, Sha256};

/// What every managed key starts with, so that a leaked key is recognisable.
pub const KEY_PREFIX: &str = "hbk_";

/// A freshly generated managed key.
#[derive(Clone)]
pub struct NewKey {
    /// The key itself: shown once, never stored.
    pub key: String,
    /// Its stable, public id (`key_` and 12 hex digits of its hash).
    pub id: String,
    /// The first characters of the key, for listings.
    pub prefix: String,
    pub sha256: [u8; 32],
}

impl std::fmt::Debug for NewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewKey")
            .field("id", &self.id)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// The SHA-256 of a key as presented.
pub fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new random key.
pub fn generate() -> NewKey {
    let bytes: [u8; 32] = rand::random();
    let key = format!(
        "{KEY_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let sha256 = hash_key(&key);
    NewKey {
        id: format!("key_{}", hex(&sha256[..6])),
        prefix: key.chars().take(KEY_PREFIX.len() + 4).collect(),
        key,
        sha256,
    }
}

/// A key given to the server directly (`--api-key`, `HOOKBOX_API_KEYS`) and its project.
#[derive(Clone, PartialEq, Eq)]
pub struct StaticKey {
    pub project: String,
    pub key: String,
}

impl std::fmt::Debug for StaticKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticKey")
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

/// Errors of [`parse_static_keys`]; they never contain a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeySpecError {
    #[error("API key #{0} is empty")]
    Empty(usize),
    #[error(
        "API key #{index}: `{project}` is not a project name (1-63 lowercase letters, digits, `-`, `_`)"
    )]
    BadProject { index: usize, project: String },
}

/// Parses keys written `KEY` (a project of its own, named `key-` and 12 hex digits of the key's
/// hash, so the name reveals nothing) or `PROJECT:KEY` (keys naming one project share it).
/// `index` in errors counts from 1.
pub fn parse_static_keys(specs: &[String]) -> Result<Vec<StaticKey>, KeySpecError> {
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let index = i + 1;
            let spec = spec.trim();
            let (project, key) = match spec.split_once(':') {
                Some((project, key)) => {
                    if !crate::projects::valid_project_name(project) {
                        return Err(KeySpecError::BadProject {
                            index,
                            project: project.to_owned(),
                        });
                    }
                    (project.to_owned(), key.to_owned())
                }
                None => (
                    format!("key-{}", hex(&hash_key(spec)[..6])),
                    spec.to_owned(),
                ),
            };
            if key.is_empty() {
                return Err(KeySpecError::Empty(index));
            }
            Ok(StaticKey { project, key })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_keys_get_their_own_project_and_prefixed_keys_share_one() {
        let keys =
            parse_static_keys(&["k1".into(), "k2".into(), "team:k3".into(), "team:k4".into()])
                .unwrap();
        assert_ne!(keys[0].project, keys[1].project);
        assert!(keys[0].project.starts_with("key-"));
        assert!(!keys[0].project.contains("k1"));
        assert_eq!(keys[2].project, "team");
        assert_eq!(keys[3].project, "team");
        assert_eq!(keys[3].key, "k4");
        assert_eq!(
            parse_static_keys(&["Bad Name:k".into()]),
            Err(KeySpecError::BadProject {
                index: 1,
                project: "Bad Name".into()
            })
        );
        assert_eq!(
            parse_static_keys(&["team:".into()]),
            Err(KeySpecError::Empty(1))
        );
        assert!(!format!("{:?}", keys[0]).contains("k1"));
    }

    #[test]
    fn generated_keys_are_distinct_and_hash_to_their_id() {
        let (a, b) = (generate(), generate());
        assert_ne!(a.key, b.key);
        assert!(a.key.starts_with(KEY_PREFIX) && a.key.len() > 40);
        assert_eq!(a.sha256, hash_key(&a.key));
        assert!(a.key.starts_with(&a.prefix));
        assert!(!format!("{a:?}").contains(&a.key));
    }
}
