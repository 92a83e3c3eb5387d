//! The sandbox's shape: namespaces, filesystem view, limits.

use super::common::*;

#[tokio::test]
async fn runs_in_workspace_with_env_and_own_namespaces() {
    let env = env();
    let out = sh(&env, "pwd; echo $GREETING; id -u; hostname; echo $$; ls /").await;
    assert!(out.success(), "{} {}", text(&out.stdout), text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(&lines[..4], &["/workspace", "hello", "0", "hookbox"]);
    // The program is PID 2: PID 1 is the sandbox's init.
    assert_eq!(lines[4], "2");
}

/// Creates a network namespace with `lo` up (as the egress crate will) and binds a listener in it,
/// on a throwaway thread so the test process itself stays in the host namespace.
fn netns_with_listener() -> (std::os::fd::OwnedFd, std::net::TcpListener) {
    std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let ns = std::fs::File::open("/proc/thread-self/ns/net").unwrap();
        let status = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status();
        // `ip` runs in the thread's namespace because it is forked from this thread.
        assert!(status.unwrap().success());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        (std::os::fd::OwnedFd::from(ns), listener)
    })
    .join()
    .unwrap()
}

#[tokio::test]
async fn joins_an_inherited_network_namespace() {
    let (ns, listener) = netns_with_listener();
    let port = listener.local_addr().unwrap().port();
    let env = env_with(options(), |layout| {
        layout.netns = Some(std::sync::Arc::new(ns))
    });
    let script = format!(
        "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=5); s.sendall(b'from-sandbox')\""
    );
    let out = sh(&env, &script).await;
    assert!(out.success(), "{}", text(&out.stderr));
    let (mut conn, _) = listener.accept().unwrap();
    let mut got = String::new();
    std::io::Read::read_to_string(&mut conn, &mut got).unwrap();
    assert_eq!(got, "from-sandbox");
}

#[tokio::test]
async fn environment_variables_reach_code_and_hooks() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let hooks = r#"{"g": {"pre_tool_execution": [{"matcher": "code_execution", "hooks": [{"type": "command", "command": "echo \"$API_MODE\" > /tmp/hook-saw"}]}]}}"#;
    let meta = create(
        &store,
        serde_json::json!({
            "sources": [{"type": "inline", "target": ".agents/hooks.json", "content": hooks}],
            "env": {"API_MODE": {"value": "sandboxed"}, "PLAIN": "yes"},
        }),
    );
    let env = store.open_env(&meta.id).unwrap();
    let outcome = env
        .call_tool(call(
            "code_execution",
            serde_json::json!({"code": "echo $API_MODE $PLAIN; cat /tmp/hook-saw"}),
        ))
        .await;
    let hookbox_sandbox::environment::ToolResult::Ok { output } = outcome.result else {
        panic!("{:?}", outcome.result)
    };
    assert_eq!(output["stdout"], "sandboxed yes\nsandboxed\n");
}

#[tokio::test]
async fn output_is_capped_and_the_tree_killed() {
    let env = env();
    let out = env
        .runner
        .run_argv(
            vec!["/bin/sh".into(), "-c".into(), "yes".into()],
            Vec::new(),
            std::time::Duration::from_secs(20),
            4096,
        )
        .await
        .unwrap();
    assert_eq!(
        out.termination,
        hookbox_hooks::runner::Termination::OutputLimit
    );
    assert_eq!(out.stdout.len(), 4096);
    assert!(out.stdout_truncated);
}

#[tokio::test]
async fn a_sandbox_that_cannot_be_built_is_an_error_not_a_silent_run() {
    // A directory to bind is missing, so building the root fails inside the launcher.
    let env = env_with(options(), |layout| {
        layout.frozen_agents = Some(layout.tree.join("nope/none"))
    });
    let err = env
        .runner
        .run_argv(
            vec!["/bin/true".into()],
            Vec::new(),
            std::time::Duration::from_secs(20),
            1024,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nope/none"), "{err}");
}

#[tokio::test]
async fn any_tree_can_stand_for_the_sandbox_root() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("workspace")).unwrap();
    std::fs::create_dir_all(dir.path().join(".agents")).unwrap();
    std::fs::write(dir.path().join(".agents/hello.sh"), "echo from-agents").unwrap();
    let layout = hookbox_sandbox::runner::SandboxLayout::for_tree(
        dir.path().to_path_buf(),
        options().identities(),
    )
    .unwrap();
    let runner =
        hookbox_sandbox::runner::SandboxRunner::new(std::sync::Arc::new(options()), layout)
            .unwrap();
    let request = hookbox_hooks::runner::CommandRequest {
        command: "sh /.agents/hello.sh; pwd".into(),
        stdin: Vec::new(),
        timeout: std::time::Duration::from_secs(20),
        output_limit: 1024,
    };
    let out = hookbox_hooks::runner::CommandRunner::run(&runner, request)
        .await
        .unwrap();
    assert_eq!(text(&out.stdout), "from-agents\n/workspace\n");
}

#[tokio::test]
async fn a_timed_launch_reports_every_stage_in_order_and_a_normal_one_reports_none() {
    let env = env();
    let (out, times) = env
        .runner
        .run_argv_timed(vec!["/bin/true".into()], std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert!(out.success());
    let names: Vec<&str> = times.stages.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "spec_read",
        "cgroups_joined",
        "namespaces_created",
        "id_maps_written",
        "init_forked",
        "root_built",
        "landlock_applied",
        "seccomp_installed",
        "program_forked",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let mut last = times.started;
    for (name, at) in &times.stages {
        assert!(*at >= last, "{name} went back in time");
        last = *at;
    }
    assert!(times.ended >= last);
    // Without timings the status pipe stays silent, so nothing is mistaken for a failure.
    let plain = sh(&env, "true").await;
    assert!(plain.success());
}
