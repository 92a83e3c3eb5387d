//! Where snapshots go: an `object_store` URL. `s3://bucket/prefix` (credentials and region from
//! the usual `AWS_*` variables, or in the query: `endpoint`, `region`, `access_key_id`,
//! `secret_access_key`, `allow_http`), `gs://bucket/prefix` (`GOOGLE_*` variables, all of them
//! honoured: a GCS-compatible server is a service-account file naming its `gcs_base_url`, and
//! `GOOGLE_ALLOW_HTTP=true` if it speaks http) or
//! `file:///path`. Every error and every log line names the URL through [`redact`], never with
//! its credentials.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use crate::SnapshotError;

/// Query parameters that carry a secret.
const SECRET_PARAMS: &[&str] = &["secret_access_key", "session_token", "token", "password"];

/// The URL as it may be shown: user info and secret query values replaced by `***`.
pub fn redact(raw: &str) -> String {
    let Ok(mut url) = url::Url::parse(raw) else {
        // Unparseable: show only the scheme, which cannot hold a secret.
        return raw.split_once("://").map_or_else(
            || "<unparseable URL>".to_owned(),
            |(s, _)| format!("{s}://…"),
        );
    };
    if !url.username().is_empty() {
        let _ = url.set_username("***");
    }
    if url.password().is_some() {
        let _ = url.set_password(Some("***"));
    }
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| {
            let secret = SECRET_PARAMS.iter().any(|s| k.eq_ignore_ascii_case(s));
            (
                k.into_owned(),
                if secret {
                    "***".to_owned()
                } else {
                    v.into_owned()
                },
            )
        })
        .collect();
    if pairs.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

/// An opened snapshot store location.
#[derive(Debug, Clone)]
pub struct Location {
    pub store: Arc<dyn ObjectStore>,
    /// Every key lives under it.
    pub prefix: ObjectPath,
    /// [`redact`]ed.
    pub shown: String,
}

fn bad(raw: &str, reason: impl Into<String>) -> SnapshotError {
    SnapshotError::BadUrl {
        url: redact(raw),
        reason: reason.into(),
    }
}

/// Retries inside one request are few and short: the checkpoint worker retries whole
/// checkpoints with its own backoff, and a store that is down must not hold a request for
/// minutes.
fn retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: 2,
        retry_timeout: Duration::from_secs(10),
    }
}

/// How long connecting to the store, and one request, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

fn client() -> object_store::ClientOptions {
    object_store::ClientOptions::new()
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_timeout(REQUEST_TIMEOUT)
}

/// Parses `raw` into a store; nothing is contacted yet ([`crate::Snapshots::check`] does).
pub fn parse(raw: &str) -> Result<Location, SnapshotError> {
    let url = url::Url::parse(raw).map_err(|e| bad(raw, e.to_string()))?;
    let prefix = ObjectPath::parse(url.path().trim_matches('/'))
        .map_err(|e| bad(raw, format!("the path is not a valid object prefix: {e}")))?;
    let shown = redact(raw);
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" => {
            let bucket = url
                .host_str()
                .filter(|b| !b.is_empty())
                .ok_or_else(|| bad(raw, "names no bucket (s3://BUCKET/PREFIX)"))?;
            let mut builder = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_retry(retry())
                .with_client_options(client());
            for (key, value) in url.query_pairs() {
                builder = match key.as_ref() {
                    "endpoint" => builder.with_endpoint(value.as_ref()),
                    "region" => builder.with_region(value.as_ref()),
                    "access_key_id" => builder.with_access_key_id(value.as_ref()),
                    "secret_access_key" => builder.with_secret_access_key(value.as_ref()),
                    "session_token" | "token" => builder.with_token(value.as_ref()),
                    "allow_http" => builder.with_allow_http(value == "true" || value == "1"),
                    "virtual_hosted_style_request" => {
                        builder.with_virtual_hosted_style_request(value == "true" || value == "1")
                    }
                    other => {
                        return Err(bad(
                            raw,
                            format!(
                                "unknown parameter `{other}` (endpoint, region, access_key_id, secret_access_key, session_token, allow_http, virtual_hosted_style_request)"
                            ),
                        ));
                    }
                };
            }
            if url
                .query_pairs()
                .any(|(k, v)| k == "endpoint" && v.starts_with("http://"))
            {
                builder = builder.with_allow_http(true);
            }
            Arc::new(builder.build().map_err(|e| bad(raw, e.to_string()))?)
        }
        "gs" => {
            let bucket = url
                .host_str()
                .filter(|b| !b.is_empty())
                .ok_or_else(|| bad(raw, "names no bucket (gs://BUCKET/PREFIX)"))?;
            if url.query().is_some() {
                return Err(bad(
                    raw,
                    "gs:// takes no parameters; use the GOOGLE_* variables",
                ));
            }
            // The time-outs are set one by one: replacing the client options whole would drop
            // what `from_env` read from `GOOGLE_*` (`GOOGLE_ALLOW_HTTP` for a GCS-compatible
            // server on http, `GOOGLE_PROXY_URL`, ...).
            let timeout = |key, value: Duration| {
                (
                    object_store::gcp::GoogleConfigKey::Client(key),
                    format!("{}ms", value.as_millis()),
                )
            };
            let mut builder = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(bucket)
                .with_retry(retry());
            for (key, value) in [
                timeout(
                    object_store::ClientConfigKey::ConnectTimeout,
                    CONNECT_TIMEOUT,
                ),
                timeout(object_store::ClientConfigKey::Timeout, REQUEST_TIMEOUT),
            ] {
                builder = builder.with_config(key, value);
            }
            Arc::new(builder.build().map_err(|e| bad(raw, e.to_string()))?)
        }
        "file" => {
            if url.query().is_some() || url.host_str().is_some_and(|h| !h.is_empty()) {
                return Err(bad(raw, "a file:// URL is file:///ABSOLUTE/PATH"));
            }
            let dir = url
                .to_file_path()
                .map_err(|()| bad(raw, "not an absolute path"))?;
            std::fs::create_dir_all(&dir)
                .map_err(|e| bad(raw, format!("{}: {e}", dir.display())))?;
            let fs = object_store::local::LocalFileSystem::new_with_prefix(&dir)
                .map_err(|e| bad(raw, e.to_string()))?;
            return Ok(Location {
                store: Arc::new(fs),
                prefix: ObjectPath::default(),
                shown,
            });
        }
        other => {
            return Err(bad(
                raw,
                format!("scheme `{other}` is not supported (s3://, gs:// or file://)"),
            ));
        }
    };
    Ok(Location {
        store,
        prefix,
        shown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show() {
        let shown = redact(
            "s3://b/p?endpoint=http://127.0.0.1:3900&access_key_id=GK1&secret_access_key=topsecret",
        );
        assert!(!shown.contains("topsecret"), "{shown}");
        assert!(
            shown.contains("GK1") && shown.contains("127.0.0.1"),
            "{shown}"
        );
        let shown = redact("s3://user:pw@b/p");
        assert!(!shown.contains("pw") && !shown.contains("user"), "{shown}");
        assert_eq!(redact("not a url with secret"), "<unparseable URL>");
    }

    #[test]
    fn bad_urls_are_refused_without_their_secrets() {
        for raw in [
            "ftp://host/x?secret_access_key=topsecret",
            "s3:///nobucket?secret_access_key=topsecret",
            "s3://b/p?bogus=1&secret_access_key=topsecret",
            "file://host/x",
            "::::",
        ] {
            let err = parse(raw).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(!err.is_empty(), "{raw} was accepted");
            assert!(!err.contains("topsecret"), "{err}");
        }
    }

    #[test]
    fn a_file_url_is_a_directory() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let raw = format!("file://{}/store", dir.path().display());
        let loc = parse(&raw).unwrap_or_else(|e| panic!("{e}"));
        assert!(dir.path().join("store").is_dir());
        assert_eq!(loc.shown, raw);
    }
}
