mod approvals;
mod auth;
mod auth_tokens;
mod bounds;
mod environments;
mod errors;
mod interactions;
mod live;
mod projects;
mod quotas;
mod resources;
mod sockets;
mod stats;
mod streaming;
mod triggers;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use hookbox_agent::LoopConfig;
use hookbox_agent::offline::OfflineModel;
use hookbox_server::{AppState, Services, app};
use hookbox_store::{SecretKey, SqliteOptions, SqliteStore};
use hookbox_test_support::{Gate, LocalBackend};
pub use hookbox_test_support::{PII_REASON, RM_REASON};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub state: AppState,
    /// The store the server uses, for setting up what the API cannot (a clock gone by).
    pub store: Arc<dyn hookbox_store::Store>,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_keys(vec![])
    }

    pub fn with_keys(api_keys: Vec<String>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::in_dir(dir, api_keys)
    }

    pub fn in_dir(dir: tempfile::TempDir, api_keys: Vec<String>) -> Self {
        Self::configured(dir, api_keys, Default::default())
    }

    /// A harness whose keys are `api_keys` (`KEY` or `PROJECT:KEY`) and quotas `quotas`.
    pub fn configured(
        dir: tempfile::TempDir,
        api_keys: Vec<String>,
        quotas: hookbox_server::quota::QuotaConfig,
    ) -> Self {
        let uploads = hookbox_server::uploads::UploadOptions {
            spool_dir: dir.path().join("uploads"),
            ..Default::default()
        };
        Self::with_uploads(dir, api_keys, quotas, uploads)
    }

    /// [`Self::configured`], with upload bounds `uploads`.
    pub fn with_uploads(
        dir: tempfile::TempDir,
        api_keys: Vec<String>,
        quotas: hookbox_server::quota::QuotaConfig,
        uploads: hookbox_server::uploads::UploadOptions,
    ) -> Self {
        let store = SqliteStore::open(
            &dir.path().join("hookbox.db"),
            SecretKey::from_bytes([9; 32]),
            &SqliteOptions::default(),
        )
        .unwrap();
        let local = Arc::new(LocalBackend::new(dir.path().join("envs")));
        std::fs::create_dir_all(dir.path().join("envs")).unwrap();
        let store: Arc<dyn hookbox_store::Store> = Arc::new(store);
        let state = AppState::new(Services {
            store: store.clone(),
            model: Arc::new(OfflineModel::new().unwrap()),
            executor: Arc::new(Gate(local.clone())),
            environments: local,
            api_keys: hookbox_store::keys::parse_static_keys(&api_keys).unwrap(),
            allow_keyless: true,
            loop_config: LoopConfig::default(),
            quotas,
            sandbox_slots: None,
            lifecycle: Default::default(),
            uploads,
        });
        Harness { dir, state, store }
    }

    /// Another server on this harness's database (a second opening of its SQLite file, as
    /// a second replica has its own connections), with the same keys and its own memory.
    pub fn replica(&self, api_keys: Vec<String>) -> AppState {
        let store = SqliteStore::open(
            &self.dir.path().join("hookbox.db"),
            SecretKey::from_bytes([9; 32]),
            &SqliteOptions::default(),
        )
        .unwrap();
        let local = Arc::new(LocalBackend::new(self.dir.path().join("envs")));
        AppState::new(Services {
            store: Arc::new(store),
            model: Arc::new(OfflineModel::new().unwrap()),
            executor: Arc::new(Gate(local.clone())),
            environments: local,
            api_keys: hookbox_store::keys::parse_static_keys(&api_keys).unwrap(),
            allow_keyless: true,
            loop_config: LoopConfig::default(),
            quotas: Default::default(),
            sandbox_slots: None,
            lifecycle: Default::default(),
            uploads: hookbox_server::uploads::UploadOptions {
                spool_dir: self.dir.path().join("uploads-2"),
                ..Default::default()
            },
        })
    }

    pub async fn call(
        &self,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let (status, _, bytes) = self
            .raw(method, uri, &[], body.map(|b| b.to_string().into_bytes()))
            .await;
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        (status, value)
    }

    pub async fn raw(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> (StatusCode, HeaderMap, Vec<u8>) {
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(body.map(Body::from).unwrap_or_else(Body::empty))
            .unwrap();
        let resp = app(self.state.clone()).oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        (status, headers, bytes)
    }

    /// Creates an interaction (blocking) and returns the JSON.
    pub async fn interact(&self, body: Value) -> Value {
        let (status, json) = self
            .call(Method::POST, "/v1beta/interactions", Some(body))
            .await;
        assert_eq!(status, StatusCode::OK, "{json}");
        json
    }
}

/// `output_text` as the SDK computes it.
pub fn output_text(interaction: &Value) -> String {
    let steps: Vec<hookbox_protocol::api::Step> =
        serde_json::from_value(interaction["steps"].clone()).unwrap();
    hookbox_protocol::api::output_text(&steps)
}

/// Parses an SSE body the way the SDK does: events split at blank lines, `data:` lines joined.
pub fn sse_events(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}

pub fn seed_environment() -> Value {
    serde_json::json!({
        "type": "remote",
        "sources": [
            {"type": "inline", "target": ".agents/hooks.json", "content": "{}"},
            {"type": "inline", "target": "workspace/private/employees.json", "content": "{\"employees\": [{\"id\": 1}]}"},
            {"type": "inline", "target": "workspace/public/summary.json", "content": "{\"department\": \"Engineering\", \"team_size\": 42}"}
        ]
    })
}
