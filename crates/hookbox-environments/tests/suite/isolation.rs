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
    if gvisor() {
        // A namespaces primitive: gVisor has its own network stack, and egress is relayed into
        // it (the network suite tests that).
        return;
    }
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
    let hookbox_environments::lifecycle::ToolResult::Ok { output } = outcome.result else {
        panic!("{:?}", outcome.result)
    };
    let output = output.json();
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
        hookbox_hooks::command::Termination::OutputLimit
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
    let layout = hookbox_environments::runner::SandboxLayout::for_tree(
        dir.path().to_path_buf(),
        options().identities(),
    )
    .unwrap();
    let runner =
        hookbox_environments::runner::SandboxRunner::new(std::sync::Arc::new(options()), layout)
            .unwrap();
    let request = hookbox_hooks::command::CommandRequest {
        command: "sh /.agents/hello.sh; pwd".into(),
        stdin: Vec::new(),
        timeout: std::time::Duration::from_secs(20),
        output_limit: 1024,
    };
    let out = hookbox_hooks::command::CommandRunner::run(&runner, request)
        .await
        .unwrap();
    assert_eq!(text(&out.stdout), "from-agents\n/workspace\n");
}

/// The stage names of one timed `/bin/true` launch in `env`, checked to be in time order.
async fn timed_stages(env: &Env) -> Vec<String> {
    let (out, times) = env
        .runner
        .run_argv_timed(vec!["/bin/true".into()], std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert!(out.success());
    // Stages inside gVisor are on gVisor's own monotonic clock: in order among themselves only.
    let mut last = match gvisor() {
        true => times.stages.first().map_or(times.started, |(_, at)| *at),
        false => times.started,
    };
    for (name, at) in &times.stages {
        assert!(*at >= last, "{name} went back in time");
        last = *at;
    }
    assert!(gvisor() || times.ended >= last);
    times.stages.into_iter().map(|(n, _)| n).collect()
}

#[tokio::test]
async fn a_timed_launch_reports_every_stage_in_order_and_a_normal_one_reports_none() {
    if gvisor() {
        // gVisor sandboxes are always warm: only the warm half applies.
        return warm_call_stages().await;
    }
    let cold = env_with(
        hookbox_environments::runner::SandboxOptions {
            warm: false,
            ..options()
        },
        |_| {},
    );
    let names = timed_stages(&cold).await;
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
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    // Without timings the status pipe stays silent, so nothing is mistaken for a failure.
    assert!(sh(&cold, "true").await.success());

    warm_call_stages().await;
}

/// A warm sandbox is built once. Under namespaces every call after the first is run by the
/// call host the first one left (the launcher's `call_host`), which builds nothing: the
/// program's clone confines itself. The same under gVisor, whose init keeps call hosts too.
async fn warm_call_stages() {
    let warm = env();
    assert!(sh(&warm, "true").await.success());
    let names = timed_stages(&warm).await;
    let expected = if gvisor() {
        // No Landlock in gVisor.
        vec![
            "call_received",
            "program_forked",
            "limits_set",
            "seccomp_installed",
        ]
    } else {
        vec![
            "call_received",
            "program_forked",
            "limits_set",
            "landlock_applied",
            "seccomp_installed",
        ]
    };
    assert_eq!(names, expected, "a warm call rebuilt its sandbox");
    assert!(sh(&warm, "true").await.success());
}

#[tokio::test]
async fn calls_of_one_warm_sandbox_cannot_see_each_other() {
    let env = env();
    // A stays alive (until its timeout kills it) once it has said so in the shared tree.
    let holder = {
        let runner = env.runner.clone();
        tokio::spawn(async move {
            runner
                .run_argv(
                    vec![
                        "/bin/sh".into(),
                        "-c".into(),
                        "touch /dev/shm/a-was-here; echo $$ > /workspace/a-started; exec sleep 1000.4242".into(),
                    ],
                    Vec::new(),
                    std::time::Duration::from_secs(120),
                    1024,
                )
                .await
        })
    };
    // B waits for A's mark (bounded), then looks for A's processes every way it can.
    let out = sh(
        &env,
        "i=0; while [ ! -s /workspace/a-started ] && [ $i -lt 1000000 ]; do i=$((i+1)); done; \
         test -s /workspace/a-started && echo a-alive; \
         ls /proc | grep -c '^[0-9]'; \
         cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'slee[p] 1000.4242'; \
         ls /dev/shm | wc -l",
    )
    .await;
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"a-alive"), "{stdout}");
    // Only this call's init, shell and the `ls` itself are numbered in its /proc.
    let visible: u32 = lines[1].trim().parse().unwrap();
    assert!(visible <= 4, "saw {visible} processes: {stdout}");
    assert_eq!(lines[2].trim(), "0", "A's process is visible: {stdout}");
    assert_eq!(lines[3].trim(), "0", "A's /dev/shm is visible: {stdout}");
    if gvisor() {
        // gVisor's processes are not the host's: there is no host pid to watch. Abandoning a
        // call kills it through its reply socket; the timeout tests check the same path.
        holder.abort();
        return;
    }
    // The host sees A's program; abandoning the call (as a cancelled interaction does) kills it.
    let sleeper = host_pid_running(&["sleep", "1000.4242"]).expect("A's program on the host");
    let pidfd = rustix::process::pidfd_open(sleeper, rustix::process::PidfdFlags::empty()).unwrap();
    holder.abort();
    assert!(holder.await.unwrap_err().is_cancelled());
    let mut fds = [nix::poll::PollFd::new(
        std::os::fd::AsFd::as_fd(&pidfd),
        nix::poll::PollFlags::POLLIN,
    )];
    let ready = nix::poll::poll(&mut fds, 20_000u16).unwrap();
    assert_eq!(ready, 1, "the abandoned call's program outlived it");
}

/// The host pid of a process whose argv is `argv`.
fn host_pid_running(argv: &[&str]) -> Option<rustix::process::Pid> {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            (std::fs::read(entry.path().join("cmdline")).ok()? == wanted)
                .then(|| rustix::process::Pid::from_raw(pid))
                .flatten()
        })
}

#[tokio::test]
async fn a_new_top_level_directory_reaches_the_next_call() {
    let env = env();
    assert!(sh(&env, "test ! -e /later").await.success());
    let later = env.dir.path().join("root/later");
    std::fs::create_dir(&later).unwrap();
    std::fs::write(later.join("note"), "bound").unwrap();
    if let Some(id) = test_identity() {
        hookbox_rootfs::RootDir::open(&env.dir.path().join("root"))
            .unwrap()
            .chown_tree(id.uid, id.gid)
            .unwrap();
    }
    let out = sh(&env, "cat /later/note && echo more > /later/written").await;
    assert_eq!(text(&out.stdout), "bound", "{}", text(&out.stderr));
    assert!(out.success());
    assert_eq!(
        std::fs::read_to_string(later.join("written")).unwrap(),
        "more\n"
    );
}

/// The cgroups of an open environment, as its sandboxes join them.
fn cgroups_of(
    env: &hookbox_environments::environment::Environment,
) -> hookbox_sandbox::cgroup::EnvCgroups {
    let spec = env.runner().spec(vec!["/bin/true".into()]).unwrap();
    hookbox_sandbox::cgroup::EnvCgroups {
        dirs: spec.cgroups,
        pids: true,
        memory: true,
    }
}

/// The value of control file `name` in whichever of `dirs` has it.
fn control(dirs: &[std::path::PathBuf], name: &str) -> String {
    dirs.iter()
        .find_map(|d| std::fs::read_to_string(d.join(name)).ok())
        .unwrap_or_else(|| panic!("no {name} in {dirs:?}"))
        .trim()
        .to_owned()
}

/// An environment holds its cgroups only while it is open: a server holding thousands of idle
/// environments held a pids and a memory cgroup for each of them, for their whole life. Two
/// opens share them, the last close removes them, and a reopened environment gets them again
/// with its limits, and its sandboxes run inside them.
#[tokio::test]
async fn an_idle_environment_holds_no_cgroup_and_is_reopened_with_its_limits() {
    if !hookbox_test_require::root("per-environment cgroups") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let opts = options();
    let tasks = opts.limits.max_processes
        + if gvisor() {
            hookbox_sandbox::gvisor::HOST_TASKS
        } else {
            0
        };
    let memory = opts.limits.memory_bytes;
    let store = store_with(data.path(), opts);
    let a = create(&store, serde_json::json!({"sources": []}));

    let first = store.open_env(&a.id).unwrap();
    let cgroups = cgroups_of(&first);
    assert!(
        !cgroups.dirs.is_empty(),
        "no cgroup for an open environment"
    );
    assert!(cgroups.dirs.iter().all(|d| d.exists()), "{cgroups:?}");
    assert_eq!(control(&cgroups.dirs, "pids.max"), tasks.to_string());
    // A second open shares them: closing the first leaves them to it.
    let second = store.open_env(&a.id).unwrap();
    assert_eq!(cgroups_of(&second).dirs, cgroups.dirs);
    drop(first);
    assert!(cgroups.dirs.iter().all(|d| d.exists()), "{cgroups:?}");
    bash_ok(&second, "true").await;
    drop(second);
    wait_cgroups_gone(&cgroups.dirs);

    // Reopened: made again, with the environment's limits, and its calls run inside them.
    let again = store.open_env(&a.id).unwrap();
    assert_eq!(cgroups_of(&again).dirs, cgroups.dirs);
    assert_eq!(control(&cgroups.dirs, "pids.max"), tasks.to_string());
    let memory_limit = cgroups
        .dirs
        .iter()
        .find_map(|d| {
            ["memory.max", "memory.limit_in_bytes"]
                .iter()
                .find_map(|f| std::fs::read_to_string(d.join(f)).ok())
        })
        .expect("a memory cgroup");
    assert_eq!(memory_limit.trim(), memory.to_string());
    assert_eq!(
        hookbox_sandbox::cgroup::read_pids_counter(&cgroups, "pids.current"),
        Some(0),
        "a fresh cgroup"
    );
    let out = bash_ok(&again, "echo ran").await;
    assert_eq!(out["stdout"], "ran\n", "{out}");
    let peak = hookbox_sandbox::cgroup::read_pids_counter(&cgroups, "pids.peak").unwrap();
    assert!(
        peak > 0,
        "the call did not run in the reopened environment's cgroup"
    );
    drop(again);
    wait_cgroups_gone(&cgroups.dirs);
}

/// Waits (bounded) until the last close has removed `dirs`: at once, or, while the sandbox's
/// last processes are still exiting (a gVisor sandbox's), by its retries off the closing thread.
fn wait_cgroups_gone(dirs: &[std::path::PathBuf]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while let Some(left) = dirs.iter().find(|d| d.exists()) {
        assert!(
            std::time::Instant::now() < deadline,
            "{} is left after the last close",
            left.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[tokio::test]
async fn the_first_warm_sandbox_takes_the_launcher_started_early() {
    let options = options();
    options.start_launcher_early();
    let slot = options.early.clone();
    let alive = |pid: u32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    if gvisor() {
        // Started only for the namespaces runtime (gVisor's launcher is runsc's child).
        assert!(slot.pid().is_none());
        return;
    }
    let early = slot
        .pid()
        .expect("started: namespaces, full isolation, warm");
    let env = env_with(options, |_| {});
    let out = sh(&env, "echo ran").await;
    assert_eq!(text(&out.stdout), "ran\n", "{}", text(&out.stderr));
    assert!(slot.pid().is_none(), "taken by the sandbox");
    // Not dropped (which kills and reaps it): it is the running sandbox's launcher.
    assert!(alive(early), "the sandbox's launcher");
    drop(env);
}

#[test]
fn no_launcher_starts_early_for_cold_sandboxes_or_without_isolation() {
    let mut cold = options();
    cold.warm = false;
    cold.start_launcher_early();
    assert!(cold.early.pid().is_none());
    let mut insecure = options();
    insecure.isolation = hookbox_sandbox::spec::Isolation::InsecureNone;
    insecure.start_launcher_early();
    assert!(insecure.early.pid().is_none());
}
