//! A command hook whose line is one simple command is exec'd by the sandbox's init without
//! `/bin/sh` in between (`hookbox_sandbox::direct`), and nothing a hook or the engine can see
//! changes: every line of a table runs through the hook path and through an explicit
//! `/bin/sh -c` argv, in the real sandbox (namespaces, or gVisor with
//! `HOOKBOX_TEST_RUNTIME=gvisor`), and must give the same stdout, stderr, exit status and
//! hooks-engine outcome.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hookbox_hooks::HookEngine;
use hookbox_hooks::command::{CommandOutput, CommandRequest, CommandRunner, RunnerError};
use hookbox_hooks::config::parse;
use hookbox_hooks::http::DirectPoster;
use hookbox_protocol::{ToolCall, ToolName};

use super::common::{Env, env, text};

/// The hook path: the environment's runner as the engine uses it.
struct Hook(Arc<Env>);

/// The old path: the same line as an explicit `/bin/sh -c` argv.
struct Shell(Arc<Env>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

impl std::fmt::Debug for Shell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Shell")
    }
}

#[async_trait]
impl CommandRunner for Hook {
    async fn run(&self, request: CommandRequest) -> Result<CommandOutput, RunnerError> {
        CommandRunner::run(&self.0.runner, request).await
    }
}

#[async_trait]
impl CommandRunner for Shell {
    async fn run(&self, request: CommandRequest) -> Result<CommandOutput, RunnerError> {
        self.0
            .runner
            .run_argv(
                vec!["/bin/sh".into(), "-c".into(), request.command],
                request.stdin,
                request.timeout,
                request.output_limit,
            )
            .await
            .map_err(|e| RunnerError::Sandbox(Box::new(e)))
    }
}

fn request(command: &str, stdin: &[u8], timeout: Duration) -> CommandRequest {
    CommandRequest {
        command: command.into(),
        stdin: stdin.to_vec(),
        timeout,
        output_limit: 1 << 20,
    }
}

/// Writes `content` at `/workspace/name` in the environment, with `mode`.
fn file(env: &Env, name: &str, content: &str, mode: u32) {
    let path = env.dir.path().join("root/workspace").join(name);
    std::fs::write(&path, content).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    if let Some(identity) = super::common::test_identity() {
        std::os::unix::fs::chown(&path, Some(identity.uid), Some(identity.gid)).unwrap();
    }
}

/// Files the table's lines run.
fn scripts(env: &Env) {
    file(
        env,
        "x.sh",
        "echo \"script $0 $1\"; echo to-stderr >&2; exit 3\n",
        0o644,
    );
    file(
        env,
        "prog",
        "#!/bin/sh\necho \"prog $0 $*\"; cat; exit 2\n",
        0o755,
    );
    file(env, "noexec", "#!/bin/sh\necho never\n", 0o644);
    file(
        env,
        "noshebang",
        "echo \"no shebang $0 $1\"\nexit 4\n",
        0o755,
    );
    file(env, "killed.sh", "echo before; kill -9 $$\n", 0o644);
    file(env, "term.sh", "echo before >&2; kill -TERM $$\n", 0o644);
    file(env, "pipe.sh", "kill -PIPE $$\n", 0o644);
    // A real-time signal, which nix's `WaitStatus` cannot hold (its `waitpid` reaps the child,
    // then fails with EINVAL): the shell reports 162 and "Real-time signal 0".
    file(env, "rt.sh", "echo before; kill -34 $$\n", 0o644);
    file(env, "parent.sh", "cat /proc/$PPID/comm\n", 0o644);
    file(
        env,
        "deny.sh",
        "cat >/dev/null; echo '{\"decision\":\"deny\",\"reason\":\"no\"}'\n",
        0o644,
    );
}

/// Lines that must behave identically (the first ones are run directly by the new code, the
/// last ones are not simple commands and run through the shell either way).
const TABLE: &[(&str, &str)] = &[
    ("sh x.sh arg", ""),
    ("sh /workspace/x.sh", ""),
    ("/bin/sh x.sh", ""),
    ("./prog a b", "from stdin\n"),
    ("/workspace/prog", "piped"),
    ("cat", "stdin passes through\n"),
    ("head -c 5", "0123456789"),
    ("/bin/true", ""),
    ("false", ""),
    ("ls /nonexistent-dir", ""),
    ("nosuchprogram arg", ""),
    ("/workspace/nosuch", ""),
    ("./noexec", ""),
    ("noexec", ""),
    ("./noshebang x", ""),
    ("sh killed.sh", ""),
    ("sh term.sh", ""),
    ("sh pipe.sh", ""),
    ("sh rt.sh", ""),
    ("env", ""),
    ("env -i A=1 B=2 /usr/bin/env", ""),
    ("/usr/bin/printf %s-%s a b", ""),
    ("sh deny.sh", "{}"),
    ("echo builtin", ""),
    ("true", ""),
    ("echo 'a  quoted  word'", ""),
    ("sh x.sh; echo after", ""),
];

fn same(what: &str, hook: &CommandOutput, shell: &CommandOutput) {
    assert_eq!(text(&hook.stdout), text(&shell.stdout), "{what}: stdout");
    assert_eq!(text(&hook.stderr), text(&shell.stderr), "{what}: stderr");
    assert_eq!(hook.termination, shell.termination, "{what}: status");
}

/// The engine's outcome as JSON, without its timings.
fn outcome(dispatch: &hookbox_hooks::Dispatch) -> serde_json::Value {
    let mut value = serde_json::to_value(dispatch).unwrap();
    value.as_object_mut().unwrap().remove("duration_ms");
    for trace in value["trace"].as_array_mut().unwrap() {
        trace.as_object_mut().unwrap().remove("duration_ms");
    }
    value
}

#[tokio::test]
async fn a_simple_command_hook_behaves_exactly_as_through_the_shell() {
    let env = Arc::new(env());
    scripts(&env);
    let hook = Hook(env.clone());
    let shell = Shell(env.clone());
    let timeout = Duration::from_secs(20);
    for (line, stdin) in TABLE {
        let stdin = stdin.as_bytes();
        let by_hook = hook.run(request(line, stdin, timeout)).await.unwrap();
        let by_shell = shell.run(request(line, stdin, timeout)).await.unwrap();
        same(line, &by_hook, &by_shell);
    }
    // A few answers the table must contain, so that it tests what it says it tests.
    let run = |line: &'static str| {
        let env = env.clone();
        async move { Hook(env).run(request(line, b"", timeout)).await.unwrap() }
    };
    let killed = run("sh killed.sh").await;
    assert_eq!(
        killed.termination,
        hookbox_hooks::command::Termination::Exited(137)
    );
    assert_eq!(text(&killed.stderr), "Killed\n");
    let realtime = run("sh rt.sh").await;
    assert_eq!(
        realtime.termination,
        hookbox_hooks::command::Termination::Exited(162)
    );
    assert_eq!(text(&realtime.stderr), "Real-time signal 0\n");
    let env_out = text(&run("env").await.stdout);
    assert!(env_out.contains("PWD=/workspace\n"), "{env_out}");
    assert!(env_out.contains("GREETING=hello\n"), "{env_out}");
    let missing = run("nosuchprogram arg").await;
    assert_eq!(
        missing.termination,
        hookbox_hooks::command::Termination::Exited(127)
    );
    assert!(text(&missing.stderr).contains("not found"));
    let noexec = run("./noexec").await;
    assert_eq!(
        noexec.termination,
        hookbox_hooks::command::Termination::Exited(126)
    );
    assert_eq!(
        text(&run("./noshebang x").await.stdout),
        "no shebang ./noshebang x\n"
    );
}

#[tokio::test]
async fn the_engine_reaches_the_same_outcome_for_a_simple_command_hook() {
    let env = Arc::new(env());
    scripts(&env);
    let http = Arc::new(DirectPoster::new().unwrap());
    let direct = HookEngine::new(Arc::new(Hook(env.clone())), http.clone());
    let through_shell = HookEngine::new(Arc::new(Shell(env.clone())), http);
    let call = ToolCall {
        name: ToolName::CodeExecution,
        args: serde_json::json!({"code": "ls", "language": "bash"}),
    };
    for (line, _) in TABLE {
        let json = serde_json::json!({"g": {"pre_tool_execution": [
            {"matcher": "code_execution", "hooks": [{"type": "command", "command": line}]}
        ]}});
        let (groups, _) = parse("/.agents/hooks.json", json.to_string().as_bytes());
        let config = hookbox_hooks::HooksConfig { groups };
        let a = direct.pre_tool(&config, &call, "env_direct").await;
        let b = through_shell.pre_tool(&config, &call, "env_direct").await;
        assert_eq!(outcome(&a), outcome(&b), "{line}");
        if *line == "sh deny.sh" {
            assert!(
                matches!(a.decision, hookbox_hooks::Decision::Deny { .. }),
                "{a:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_timed_out_simple_command_is_killed_as_through_the_shell() {
    let env = Arc::new(env());
    let timeout = Duration::from_millis(300);
    let by_hook = Hook(env.clone())
        .run(request("sleep 60", b"", timeout))
        .await
        .unwrap();
    let by_shell = Shell(env.clone())
        .run(request("sleep 60", b"", timeout))
        .await
        .unwrap();
    same("sleep 60", &by_hook, &by_shell);
    assert_eq!(
        by_hook.termination,
        hookbox_hooks::command::Termination::TimedOut
    );
}

#[tokio::test]
async fn a_simple_command_hook_runs_without_a_shell_in_between() {
    // The script prints its parent's name: the shell that ran the line (`sh`) on the old path,
    // the sandbox's init on the new one.
    let env = Arc::new(env());
    scripts(&env);
    let timeout = Duration::from_secs(20);
    let by_shell = Shell(env.clone())
        .run(request("sh parent.sh", b"", timeout))
        .await
        .unwrap();
    assert_eq!(text(&by_shell.stdout), "sh\n");
    let by_hook = Hook(env.clone())
        .run(request("sh parent.sh", b"", timeout))
        .await
        .unwrap();
    assert!(by_hook.success(), "{by_hook:?}");
    assert_ne!(text(&by_hook.stdout), "sh\n");
    assert!(!by_hook.stdout.is_empty());
    // A line that is not one simple command still gets its shell.
    let compound = Hook(env.clone())
        .run(request("sh parent.sh; true", b"", timeout))
        .await
        .unwrap();
    assert_eq!(text(&compound.stdout), "sh\n");
}
