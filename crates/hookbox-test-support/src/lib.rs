//! The harness shared by hookbox's test suites and benches. **For tests only**: it runs tools
//! with no isolation and no hooks, so it must only ever appear under `[dev-dependencies]` and
//! must never be wired into the `hookbox` binary or any library's normal dependencies.
//!
//! - [`local::LocalBackend`]: directory-backed environments behind both agent seams.
//! - [`Gate`]: a tiny fixed policy in front of an executor, standing in for hooks.
//! - [`spawn_server`]: an axum router served on `127.0.0.1:0` until the handle is dropped
//!   ([`spawn_server_on`]: on another loopback address).
//! - [`DataDir`]: a temporary data dir whose environment disks are unmounted when it goes.

pub mod local;

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use hookbox_agent::execution::ToolExecution;
use hookbox_agent::seams::ToolExecutor;
use hookbox_protocol::{ToolCall, ToolName};

pub use local::LocalBackend;

/// A temporary data directory for a hookbox under test. Environments created with a disk cap
/// are loop-mounted images; dropping this detaches every mount beneath it before the directory
/// is removed, so a test (or a killed server) leaves no mount or loop device behind.
#[derive(Debug)]
pub struct DataDir(tempfile::TempDir);

impl DataDir {
    pub fn new() -> Self {
        DataDir(tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}")))
    }

    pub fn path(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl Default for DataDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        hookbox_environments::disk::unmount_all_under(self.0.path());
    }
}

/// The reason [`Gate`] gives for a command containing `rm -rf`.
pub const RM_REASON: &str = "Destructive command blocked by security gate.";
/// The reason [`Gate`] gives for a `view_file` under `/private/`.
pub const PII_REASON: &str = "Access to confidential `/private/` records is blocked by PII compliance policy. Query approved `/public/` summary tables instead.";

/// A local backend behind a tiny real policy standing in for hooks: `code_execution` containing
/// `rm -rf` and `view_file` under `/private/` are denied with the reference's reasons
/// ([`RM_REASON`], [`PII_REASON`]); `code_execution` containing `deploy` asks a person
/// ([`ASK_REASON`]); everything else runs.
#[derive(Debug)]
pub struct Gate(pub Arc<LocalBackend>);

#[async_trait]
impl ToolExecutor for Gate {
    async fn execute(&self, env: &str, call: &ToolCall) -> ToolExecution {
        let args = call.args.to_string();
        if call.name == ToolName::CodeExecution && args.contains("rm -rf") {
            return ToolExecution::denied(RM_REASON);
        }
        if call.name == ToolName::ViewFile && args.contains("/private/") {
            return ToolExecution::denied(PII_REASON);
        }
        if let Some(reason) = ask_reason(call) {
            return ToolExecution::ask(hookbox_agent::ApprovalRequest {
                reason,
                group: "gate".into(),
                args: call.args.clone(),
            });
        }
        self.0.execute(env, call).await
    }

    /// The reviewer decided instead of the gate: the call runs.
    async fn execute_approved(
        &self,
        env: &str,
        call: &ToolCall,
        output: Option<hookbox_agent::OutputSink>,
    ) -> ToolExecution {
        self.0.execute_approved(env, call, output).await
    }
}

/// The reason [`Gate`] asks a person about a `code_execution` containing `deploy`.
pub const ASK_REASON: &str = "Deploys need a person's approval.";

fn ask_reason(call: &ToolCall) -> Option<String> {
    (call.name == ToolName::CodeExecution && call.args.to_string().contains("deploy"))
        .then(|| ASK_REASON.to_owned())
}

/// A server on `127.0.0.1:0`; it shuts down gracefully when dropped.
#[derive(Debug)]
pub struct TestServer {
    pub addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl TestServer {
    /// `http://ADDR:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Serves `router` on a fresh loopback port.
///
/// # Panics
/// When no loopback port can be bound, or the server fails (a test failure either way).
pub async fn spawn_server(router: axum::Router) -> TestServer {
    spawn_server_on("127.0.0.1:0", router).await
}

/// Serves `router` on `addr` (another loopback address such as `127.0.0.2:0`, for a receiver
/// that a policy must refuse: a broken policy would reach it, and it would record the hit).
///
/// # Panics
/// When `addr` cannot be bound, or the server fails (a test failure either way).
#[allow(clippy::expect_used)] // test harness: a failure here is a failed test
pub async fn spawn_server_on(addr: &str, router: axum::Router) -> TestServer {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    let addr = listener.local_addr().expect("local address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
            .expect("test server failed");
    });
    TestServer { addr, _stop: stop }
}
