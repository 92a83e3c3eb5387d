//! The cache's own tests: idle and LRU eviction, the sweeper, copies under lost leases.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hookbox_agent::seams::{EnvironmentProvider, EnvironmentSetup, ProviderError, ToolExecutor};
use hookbox_environments::environment::{Environment, Environments};
use hookbox_protocol::ToolCall;
use serde_json::json;

use super::*;

/// A store without isolation in `data` (file tools only; no launcher is needed).
pub(in crate::sandbox) fn unisolated_store(data: &std::path::Path) -> Environments {
    let credentials =
        Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data).unwrap());
    let launcher = hookbox_environments::runner::Launcher::standalone("/nonexistent");
    let mut options = hookbox_environments::runner::SandboxOptions::new(launcher);
    options.isolation = hookbox_sandbox::spec::Isolation::InsecureNone;
    Environments::open(
        data,
        options,
        hookbox_environments::EgressOptions::new(credentials),
    )
    .unwrap()
}

/// A backend whose clock only moves when the returned `advance` is called.
fn backend_with_clock(
    data: &std::path::Path,
    limits: CacheLimits,
) -> (SandboxBackend, impl Fn(Duration)) {
    let start = Instant::now();
    let offset = Arc::new(std::sync::Mutex::new(Duration::ZERO));
    let read = offset.clone();
    let clock = Clock::from_fn(move || start + *read.lock().unwrap());
    let backend = SandboxBackend::with_limits(unisolated_store(data), limits, clock);
    (backend, move |by| *offset.lock().unwrap() += by)
}

/// The cache's current `Arc` for `id`, if open.
async fn cached(backend: &SandboxBackend, id: &str) -> Option<Arc<Environment>> {
    backend.open.lock().await.get(id).map(|c| c.env.clone())
}

#[tokio::test]
async fn idle_environment_is_dropped_busy_one_kept_and_files_survive_reopening() {
    let data = tempfile::tempdir().unwrap();
    let limits = CacheLimits {
        idle_timeout: Duration::from_secs(600),
        max_open: 256,
    };
    let (backend, advance) = backend_with_clock(data.path(), limits);
    let idle = backend.create(&EnvironmentSetup::default()).await.unwrap();
    let busy = backend.create(&EnvironmentSetup::default()).await.unwrap();
    backend
        .write_file(&idle, "/workspace/kept.txt", b"before eviction", false)
        .await
        .unwrap();
    let idle_weak = Arc::downgrade(&backend.env(&idle).await.unwrap());
    // Held as `execute` holds it during a running tool call.
    let busy_env = backend.env(&busy).await.unwrap();

    advance(Duration::from_secs(599));
    assert_eq!(backend.evict_idle().await, 0, "not idle long enough yet");
    assert!(idle_weak.upgrade().is_some());

    advance(Duration::from_secs(2));
    assert_eq!(backend.evict_idle().await, 1);
    assert!(
        idle_weak.upgrade().is_none(),
        "the idle environment must be released"
    );
    assert!(cached(&backend, &idle).await.is_none());
    let still = cached(&backend, &busy).await.unwrap();
    assert!(
        Arc::ptr_eq(&still, &busy_env),
        "the busy environment is kept"
    );
    drop(still);

    // Reopened from disk on next use, with what was written before.
    let call = ToolCall {
        name: hookbox_protocol::ToolName::ViewFile,
        args: json!({"path": "/workspace/kept.txt"}),
    };
    let result = backend.execute(&idle, &call).await;
    assert!(!result.is_error, "{result:?}");
    assert!(
        result.output.to_string().contains("before eviction"),
        "{result:?}"
    );
    assert!(cached(&backend, &idle).await.is_some());

    // Once its holder lets go, the busy one idles from then on, like any other.
    drop(busy_env);
    let busy_weak = Arc::downgrade(&cached(&backend, &busy).await.unwrap());
    advance(Duration::from_secs(601));
    assert_eq!(backend.evict_idle().await, 2);
    assert!(busy_weak.upgrade().is_none());
}

#[tokio::test]
async fn over_the_cap_least_recently_used_idle_environment_goes_first() {
    let data = tempfile::tempdir().unwrap();
    let limits = CacheLimits {
        idle_timeout: Duration::from_secs(3600),
        max_open: 2,
    };
    let (backend, advance) = backend_with_clock(data.path(), limits);
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(backend.create(&EnvironmentSetup::default()).await.unwrap());
    }
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
    let weak = |env: Arc<Environment>| Arc::downgrade(&env);
    let a_weak = weak(backend.env(a).await.unwrap());
    advance(Duration::from_secs(1));
    let b_weak = weak(backend.env(b).await.unwrap());
    advance(Duration::from_secs(1));
    backend.usage(a).await.unwrap(); // `a` is now more recent than `b`.
    advance(Duration::from_secs(1));
    let c_env = backend.env(c).await.unwrap();
    assert!(b_weak.upgrade().is_none(), "`b` was least recently used");
    assert!(a_weak.upgrade().is_some());
    assert_eq!(backend.open.lock().await.len(), 2);

    // Environments in use are never evicted, even over the cap.
    let a_env = backend.env(a).await.unwrap();
    let b_env = backend.env(b).await.unwrap();
    assert_eq!(backend.open.lock().await.len(), 3);
    for env in [&a_env, &b_env, &c_env] {
        assert!(Arc::ptr_eq(&cached(&backend, env.id()).await.unwrap(), env));
    }
    drop((a_env, b_env, c_env));
    // Once released, the excess goes. (All three were last used at the same instant, so
    // which one is not specified; the LRU order itself is checked above.)
    assert_eq!(backend.evict_idle().await, 1);
    assert_eq!(backend.open.lock().await.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn sweeper_evicts_on_its_own_and_stops_with_the_backend() {
    let data = tempfile::tempdir().unwrap();
    let (backend, advance) = backend_with_clock(data.path(), CacheLimits::default());
    let backend = Arc::new(backend);
    let id = backend.create(&EnvironmentSetup::default()).await.unwrap();
    let env_weak = Arc::downgrade(&backend.env(&id).await.unwrap());
    advance(DEFAULT_IDLE_TIMEOUT);
    let sweeper = backend.spawn_sweeper(Duration::from_secs(60));
    // Paused tokio time: each sleep lets the sweeper run one tick, with no real waiting.
    for _ in 0..2 {
        if env_weak.upgrade().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    assert!(env_weak.upgrade().is_none(), "the sweeper must evict it");
    drop(backend);
    tokio::time::timeout(Duration::from_secs(600), sweeper)
        .await
        .unwrap()
        .unwrap();
}

/// The leases of one replica as a test sets them: only `fence` is asked by the backend.
#[derive(Debug)]
struct Leases {
    fence: std::sync::Mutex<Option<i64>>,
    replica: hookbox_store::Replica,
}

impl Leases {
    fn new() -> Self {
        Leases {
            fence: std::sync::Mutex::new(None),
            replica: hookbox_store::Replica {
                id: "r_test".into(),
                url: "http://127.0.0.1:1".into(),
                lease_ttl: Duration::from_secs(10),
            },
        }
    }

    fn set(&self, fence: Option<i64>) {
        *self.fence.lock().unwrap() = fence;
    }
}

#[async_trait]
impl hookbox_store::Cluster for Leases {
    fn replica(&self) -> &hookbox_store::Replica {
        &self.replica
    }
    fn fence(&self, _resource: &str) -> Option<i64> {
        *self.fence.lock().unwrap()
    }
    async fn heartbeat(&self) -> hookbox_store::Result<()> {
        unreachable!()
    }
    async fn claim(&self, _: &str) -> hookbox_store::Result<hookbox_store::Claim> {
        unreachable!()
    }
    async fn reap(&self, _: &str, _: &str) -> hookbox_store::Result<Vec<String>> {
        unreachable!()
    }
    fn changes(&self) -> tokio::sync::broadcast::Receiver<String> {
        unreachable!()
    }
    async fn runner_of(&self, _: &str) -> hookbox_store::Result<Option<(String, String)>> {
        unreachable!()
    }
    async fn replica_url(&self, _: &str) -> hookbox_store::Result<Option<String>> {
        unreachable!()
    }
    async fn holder(&self, _: &str) -> hookbox_store::Result<Option<(String, String)>> {
        unreachable!()
    }
    async fn peers(&self) -> hookbox_store::Result<Vec<(String, String)>> {
        unreachable!()
    }
    async fn hold(&self, _: &str, _: &str, _: u64) -> hookbox_store::Result<Option<String>> {
        unreachable!()
    }
    async fn unhold(&self, _: &str) -> hookbox_store::Result<()> {
        unreachable!()
    }
    async fn take_tokens(
        &self,
        _: &str,
        _: f64,
        _: f64,
        _: f64,
    ) -> hookbox_store::Result<hookbox_store::TokenGrant> {
        unreachable!()
    }
    fn held(&self) -> Vec<String> {
        unreachable!()
    }
    async fn release(&self, _: &str) -> hookbox_store::Result<()> {
        unreachable!()
    }
    async fn leave(&self) -> hookbox_store::Result<()> {
        unreachable!()
    }
}

fn unavailable(result: Result<Arc<Environment>, ProviderError>) -> String {
    match result {
        Err(ProviderError::Unavailable(message)) => message,
        other => panic!("expected 503, got {other:?}"),
    }
}

// Regression (issue 36): a replica that lost an environment's lease kept serving the copy it
// had open before, once it held the lease again.
#[tokio::test]
async fn a_copy_opened_under_a_lost_lease_is_closed_before_it_is_served_again() {
    let data = tempfile::tempdir().unwrap();
    let (backend, _advance) = backend_with_clock(data.path(), CacheLimits::default());
    let leases = Arc::new(Leases::new());
    let backend = backend.with_leases(leases.clone());
    let id = backend.create(&EnvironmentSetup::default()).await.unwrap();
    leases.set(Some(1));
    let first = backend.env(&id).await.unwrap();
    let first_weak = Arc::downgrade(&first);
    drop(first);
    // The lease lapses (no renewal within the TTL): not served, and the watch closes it.
    leases.set(None);
    assert!(unavailable(backend.env(&id).await).contains("not held by this replica"));
    // A turn whose interaction hooks cannot be read now is refused, not run without them.
    let payload = hookbox_protocol::InteractionHookPayload {
        interaction_id: "int_1".into(),
        environment_id: id.clone(),
        agent: "antigravity-preview-09-2026".into(),
        input: None,
        input_text: Some("hi".into()),
        status: None,
        output: None,
        errors: None,
        hook_event_name: hookbox_protocol::HookEvent::PreInteraction,
    };
    let hooks = backend.interaction_hooks(&id, &payload).await;
    assert!(
        hooks
            .denied
            .as_deref()
            .is_some_and(|r| r.contains("not held by this replica")),
        "{hooks:?}"
    );
    assert_eq!(backend.close_lost_leases().await, 1);
    assert!(first_weak.upgrade().is_none(), "the lost copy stays open");
    // Held again, under a higher fence: a fresh copy.
    leases.set(Some(3));
    let second = backend.env(&id).await.unwrap();
    // Lost again while a call holds the copy, then held again: the environment is not
    // opened twice; it waits (503) until the call lets go.
    leases.set(Some(4));
    let again = backend.env(&id).await;
    assert!(unavailable(again).contains("still closing"));
    assert!(cached(&backend, &id).await.is_none());
    let second_weak = Arc::downgrade(&second);
    drop(second);
    assert!(second_weak.upgrade().is_none());
    let third = backend.env(&id).await.unwrap();
    assert!(Arc::ptr_eq(&cached(&backend, &id).await.unwrap(), &third));
    // Still held under the same fence: the same copy, and the watch leaves it be.
    assert!(Arc::ptr_eq(&backend.env(&id).await.unwrap(), &third));
    assert_eq!(backend.close_lost_leases().await, 0);
}
