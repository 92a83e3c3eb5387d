//! Shared helpers: a throwaway environment layout and a runner over the test launcher binary.

use std::sync::Arc;
use std::time::Duration;

use hookbox_environments::runner::{
    GvisorSettings, Launcher, SandboxLayout, SandboxOptions, SandboxRunner,
};
use hookbox_hooks::command::CommandOutput;
use hookbox_sandbox::spec::Identity;
use hookbox_sandbox::spec::RuntimeKind;

pub const LAUNCHER: &str = env!("CARGO_BIN_EXE_hookbox-environments-launcher");

pub struct Env {
    pub dir: tempfile::TempDir,
    pub runner: SandboxRunner,
}

/// The runtime this run of the suite tests: `HOOKBOX_TEST_RUNTIME` (`namespaces` by default;
/// `scripts/test.sh` runs the suite again with `gvisor`).
pub fn runtime() -> RuntimeKind {
    match std::env::var("HOOKBOX_TEST_RUNTIME") {
        Ok(name) => name.parse().unwrap(),
        Err(_) => RuntimeKind::Namespaces,
    }
}

pub fn gvisor() -> bool {
    runtime() == RuntimeKind::Gvisor
}

pub fn options() -> SandboxOptions {
    let mut options = SandboxOptions::new(Launcher::standalone(LAUNCHER));
    options.runtime = runtime();
    options.gvisor = GvisorSettings::new(
        std::env::var_os("HOOKBOX_TEST_RUNSC").map(Into::into),
        Default::default(),
    );
    options
}

/// The unprivileged host identity test sandboxes run as when the tests run as host root (as CI
/// does), as an environment's would; `None` for an unprivileged test run.
pub fn test_identity() -> Option<Identity> {
    options().identities().map(|range| range.nth(4242))
}

pub fn layout(dir: &std::path::Path) -> SandboxLayout {
    let tree = dir.join("root");
    for sub in ["workspace", "tmp", ".agents"] {
        std::fs::create_dir_all(tree.join(sub)).unwrap();
    }
    std::fs::create_dir_all(dir.join("mnt")).unwrap();
    let identity = test_identity();
    if let Some(Identity { uid, gid }) = identity {
        hookbox_rootfs::RootDir::open(&tree)
            .unwrap()
            .chown_tree(uid, gid)
            .unwrap();
    }
    SandboxLayout {
        tree,
        mountpoint: dir.join("mnt"),
        frozen_agents: None,
        env: vec![("GREETING".into(), "hello".into())],
        cgroups: Default::default(),
        netns: None,
        identity,
        runtime: runtime(),
        read_only: false,
    }
}

pub fn env_with(options: SandboxOptions, edit: impl FnOnce(&mut SandboxLayout)) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let mut layout = layout(dir.path());
    edit(&mut layout);
    let runner = SandboxRunner::new(Arc::new(options), layout).unwrap();
    Env { dir, runner }
}

pub fn env() -> Env {
    env_with(options(), |_| {})
}

pub async fn sh(env: &Env, script: &str) -> CommandOutput {
    env.runner
        .run_argv(
            vec!["/bin/sh".into(), "-c".into(), script.into()],
            Vec::new(),
            Duration::from_secs(20),
            1 << 20,
        )
        .await
        .unwrap()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

/// A store whose environments are removed when the test ends, so their cgroups do not pile up
/// on the machine.
pub struct TestEnvironments(pub hookbox_environments::environment::Environments);

impl std::ops::Deref for TestEnvironments {
    type Target = hookbox_environments::environment::Environments;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Drop for TestEnvironments {
    fn drop(&mut self) {
        for meta in self.0.list().unwrap_or_default() {
            let _ = self.0.remove(&meta.id);
        }
    }
}

pub fn store_with(data: &std::path::Path, options: SandboxOptions) -> TestEnvironments {
    store_with_egress(data, options, Default::default())
}

/// A store whose credentials live in `data` and whose operator options are `operator`.
pub fn store_with_egress(
    data: &std::path::Path,
    options: SandboxOptions,
    operator: hookbox_environments::network::EgressOperator,
) -> TestEnvironments {
    let credentials =
        Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data).unwrap());
    let egress =
        hookbox_environments::network::EgressOptions::new(credentials).with_operator(operator);
    TestEnvironments(
        hookbox_environments::environment::Environments::open(data, options, egress).unwrap(),
    )
}

pub fn inline(target: &str, content: &str) -> hookbox_environments::source::Source {
    hookbox_environments::source::Source::Inline {
        target: target.into(),
        content: content.into(),
        encoding: Default::default(),
    }
}

pub fn create(
    store: &hookbox_environments::environment::Environments,
    spec: serde_json::Value,
) -> hookbox_environments::environment::EnvironmentMeta {
    let spec: hookbox_environments::source::EnvironmentSpec = serde_json::from_value(spec).unwrap();
    store
        .create(
            &spec,
            hookbox_environments::source::SourceOrigin::Operator,
            &mut |_| {},
            false,
        )
        .unwrap()
}

pub fn call(name: &str, args: serde_json::Value) -> hookbox_protocol::ToolCall {
    hookbox_protocol::ToolCall {
        name: name.parse().unwrap(),
        args,
    }
}

/// Runs `code` with bash through the environment's whole tool-call lifecycle; the tool's output
/// (panics unless the tool ran).
pub async fn bash_ok(
    env: &hookbox_environments::environment::Environment,
    code: &str,
) -> serde_json::Value {
    let out = env
        .call_tool(call(
            "code_execution",
            serde_json::json!({"code": code, "language": "bash"}),
        ))
        .await;
    match out.result {
        hookbox_environments::lifecycle::ToolResult::Ok { output } => output.json(),
        other => panic!("{other:?}"),
    }
}
