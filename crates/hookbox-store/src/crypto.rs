//! Encryption of credential secrets at rest: XChaCha20-Poly1305 with a random 24-byte nonce per
//! write and the credential id as associated data (a ciphertext moved to another row does not
//! decrypt). The key comes from `HOOKBOX_SECRET_KEY` or from `<data dir>/secret.key`, created
//! 0600 on first use. This module never logs or formats key or plaintext bytes.

use std::fmt;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use crate::error::{Error, Result};

/// Nonce length of XChaCha20-Poly1305.
pub const NONCE_LEN: usize = 24;
const KEY_LEN: usize = 32;
/// File name of the generated key inside the data dir.
pub const KEY_FILE: &str = "secret.key";

/// Bytes sealed with [`SecretKey::seal`]: `(nonce, ciphertext)`.
pub(crate) type Sealed = (Vec<u8>, Vec<u8>);

/// The 32-byte key. `Debug` does not show it.
#[derive(Clone)]
pub struct SecretKey([u8; KEY_LEN]);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

impl SecretKey {
    /// A key from raw bytes.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        SecretKey(bytes)
    }

    /// Parses a key given as 64 hex digits or base64 of 32 bytes.
    pub fn parse(text: &str) -> Result<Self> {
        let text = text.trim();
        let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
                .collect::<std::result::Result<Vec<u8>, _>>()
                .map_err(|_| Error::Key("invalid hex".into()))?
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|_| Error::Key("neither 64 hex digits nor base64".into()))?
        };
        let arr: [u8; KEY_LEN] = bytes
            .try_into()
            .map_err(|_| Error::Key("the key must be exactly 32 bytes".into()))?;
        Ok(SecretKey(arr))
    }

    /// `HOOKBOX_SECRET_KEY` if set, else `<data_dir>/secret.key`, created with mode 0600 and
    /// random bytes if missing.
    pub fn load_or_create(data_dir: &Path) -> Result<Self> {
        if let Ok(text) = std::env::var(crate::env_vars::HOOKBOX_SECRET_KEY) {
            return Self::parse(&text);
        }
        let path = data_dir.join(KEY_FILE);
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        // Written whole under a temporary name, then linked into place: a second process
        // (a replica starting at the same time) finds either no key or the whole key, never a
        // half-written one, and both end up with the same key.
        let temp = data_dir.join(format!("{KEY_FILE}.{:016x}.tmp", rand::random::<u64>()));
        let created = (|| -> std::io::Result<[u8; KEY_LEN]> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            let key: [u8; KEY_LEN] = rand::random();
            file.write_all(&key)?;
            file.sync_all()?;
            std::fs::hard_link(&temp, &path)?;
            Ok(key)
        })();
        let _ = std::fs::remove_file(&temp);
        match created {
            Ok(key) => {
                tracing::info!(path = %path.display(), "created credential encryption key");
                Ok(SecretKey(key))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let mut file = std::fs::File::open(&path).map_err(io)?;
                let mode = file.metadata().map_err(io)?.permissions().mode();
                if mode & 0o077 != 0 {
                    tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "secret key file is readable by group or others");
                }
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes).map_err(io)?;
                let key: [u8; KEY_LEN] = bytes.try_into().map_err(|_| {
                    Error::Key(format!("{} must hold exactly 32 bytes", path.display()))
                })?;
                Ok(SecretKey(key))
            }
            Err(e) => Err(io(e)),
        }
    }

    fn cipher(&self) -> Result<XChaCha20Poly1305> {
        XChaCha20Poly1305::new_from_slice(&self.0).map_err(|_| Error::Encrypt)
    }

    /// Encrypts `plaintext` bound to `aad`; returns `(nonce, ciphertext)`.
    pub fn seal(&self, aad: &str, plaintext: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
        let nonce_bytes: [u8; NONCE_LEN] = rand::random();
        let nonce = XNonce::from(nonce_bytes);
        let ct = self
            .cipher()?
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| Error::Encrypt)?;
        Ok((nonce_bytes.to_vec(), ct))
    }

    /// Decrypts what [`SecretKey::seal`] produced for the same `aad`.
    pub fn open(&self, aad: &str, nonce: &[u8], ciphertext: &[u8]) -> Result<Vec<u8>> {
        let nonce_bytes: [u8; NONCE_LEN] = nonce
            .try_into()
            .map_err(|_| Error::Decrypt(aad.to_owned()))?;
        self.cipher()?
            .decrypt(
                &XNonce::from(nonce_bytes),
                Payload {
                    msg: ciphertext,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| Error::Decrypt(aad.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_round_trip_and_aad_binding() {
        let key = SecretKey::from_bytes([7; 32]);
        let (nonce, ct) = key.seal("cred_a", b"s3cr3t").unwrap();
        assert!(!ct.windows(6).any(|w| w == b"s3cr3t"));
        assert_eq!(key.open("cred_a", &nonce, &ct).unwrap(), b"s3cr3t");
        assert!(key.open("cred_b", &nonce, &ct).is_err());
        let other = SecretKey::from_bytes([8; 32]);
        assert!(other.open("cred_a", &nonce, &ct).is_err());
    }

    #[test]
    fn parse_accepts_hex_and_base64_and_rejects_short_keys() {
        let hex = "00".repeat(32);
        assert!(SecretKey::parse(&hex).is_ok());
        let b64 = base64::engine::general_purpose::STANDARD.encode([1u8; 32]);
        assert!(SecretKey::parse(&b64).is_ok());
        assert!(SecretKey::parse("abcd").is_err());
        assert!(!format!("{:?}", SecretKey::parse(&hex).unwrap()).contains("00"));
    }
}
