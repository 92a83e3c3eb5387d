//! Escape attempts: small hostile programs and hostile arguments that must be stopped.

use std::io::Read;
use std::os::linux::net::SocketAddrExt;
use std::time::Duration;

use hookbox_environments::lifecycle::ToolResult;
use hookbox_hooks::command::Termination;
use serde_json::json;

use super::common::*;

fn ok_output(result: &ToolResult) -> serde_json::Value {
    match result {
        ToolResult::Ok { output } => output.json(),
        other => panic!("expected ok, got {other:?}"),
    }
}

#[test]
fn source_targets_that_escape_are_refused_and_nothing_is_written() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    for target in [
        "../escape.txt",
        "/workspace/../../escape.txt",
        "etc/passwd",
        "/usr/bin/evil",
    ] {
        let spec = hookbox_environments::source::EnvironmentSpec {
            sources: vec![
                inline("workspace/first.txt", "written first"),
                inline(target, "x"),
            ],
            ..Default::default()
        };
        let err = store
            .create(
                &spec,
                hookbox_environments::source::SourceOrigin::Operator,
                &mut |_| {},
                false,
            )
            .unwrap_err();
        assert!(err.to_string().contains(target), "{err}");
    }
    assert!(!data.path().join("escape.txt").exists());
    // No environment and no half-built directory was left behind.
    let left: Vec<_> = std::fs::read_dir(data.path().join("environments"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn source_target_through_a_symlink_from_a_repository_is_refused() {
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(repo.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.path().join("README"), "repo readme").unwrap();
    std::os::unix::fs::symlink("/etc", repo.path().join("etc-link")).unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "init"]);

    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let url = repo.path().to_str().unwrap().to_owned();
    let spec: hookbox_environments::source::EnvironmentSpec = serde_json::from_value(json!({
        "sources": [
            {"type": "repository", "url": url, "target": "workspace/repo"},
            {"type": "inline", "target": "workspace/repo/etc-link/passwd", "content": "owned"},
        ]
    }))
    .unwrap();
    let err = store
        .create(
            &spec,
            hookbox_environments::source::SourceOrigin::Operator,
            &mut |_| {},
            false,
        )
        .unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");

    // The same repository alone clones fine, from a local path and a file:// URL.
    for url in [url.clone(), format!("file://{url}")] {
        let meta = create(
            &store,
            json!({"sources": [{"type": "repository", "url": url, "target": "workspace/repo"}]}),
        );
        let readme = data
            .path()
            .join("environments")
            .join(&meta.id)
            .join("root/workspace/repo/README");
        assert_eq!(std::fs::read_to_string(readme).unwrap(), "repo readme");
    }
}

#[tokio::test]
async fn tool_paths_and_planted_symlinks_never_reach_the_host() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.txt");
    std::fs::write(&victim, "host secret").unwrap();
    let victim_path = victim.to_str().unwrap().to_owned();

    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let other = create(
        &store,
        json!({"sources": [{"type": "inline", "target": "workspace/secret", "content": "other env secret"}]}),
    );
    let meta = create(&store, json!({}));
    let env = store.open_env(&meta.id).unwrap();
    let data_path = data.path().to_str().unwrap().to_owned();

    // Hostile code plants symlinks to host paths, /etc/passwd, the data dir and a magic link.
    let plant = format!(
        "ln -s {victim_path} /workspace/victim; ln -s /etc/passwd /workspace/pw; ln -s {data_path} /workspace/data; ln -s /proc/self/root{victim_path} /workspace/magic; ln -s ../../../../../../../.. /workspace/up"
    );
    // Reading the other environment directly from inside the sandbox finds nothing.
    let peek = format!(
        "cat {data_path}/environments/{}/root/workspace/secret; ls {data_path}; find /workspace /tmp /.agents -name secret",
        other.id
    );
    let peeked = env
        .call_tool(call(
            "code_execution",
            json!({"code": peek, "language": "bash"}),
        ))
        .await;
    assert_eq!(ok_output(&peeked.result)["stdout"], "");

    let planted = env
        .call_tool(call(
            "code_execution",
            json!({"code": plant, "language": "bash"}),
        ))
        .await;
    assert_eq!(ok_output(&planted.result)["exit_code"], 0);

    for path in [
        "/workspace/victim",
        "/workspace/pw",
        "/workspace/magic",
        "/workspace/up/../..".to_string().as_str(),
        &format!(
            "/workspace/data/environments/{}/root/workspace/secret",
            other.id
        ),
        &format!("../../..{victim_path}"),
    ] {
        let view = env
            .call_tool(call("view_file", json!({"path": path})))
            .await;
        if let ToolResult::Ok { output } = &view.result {
            let output = output.json();
            let content = output["content"].as_str().unwrap();
            assert!(
                !content.contains("host secret")
                    && !content.contains("root:x:0:0")
                    && !content.contains("other env secret"),
                "{path}: {content}"
            );
        }
        let listing = env
            .call_tool(call("list_dir", json!({"path": format!("{path}/..")})))
            .await;
        if let ToolResult::Ok { output } = &listing.result {
            let output = output.json();
            assert!(
                !output.to_string().contains("victim.txt"),
                "{path}: {output}"
            );
        }
    }
    for path in [
        "/workspace/victim",
        "/workspace/magic",
        &format!("/../../..{victim_path}"),
        "/workspace/up/victim.txt",
    ] {
        env.call_tool(call(
            "write_to_file",
            json!({"path": path, "content": "pwned"}),
        ))
        .await;
        env.call_tool(call(
            "replace_file_content",
            json!({"path": path, "old_content": "host", "new_content": "pwned"}),
        ))
        .await;
        env.call_tool(call("delete_file", json!({"path": path})))
            .await;
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "host secret");
    let other_secret = data
        .path()
        .join("environments")
        .join(&other.id)
        .join("root/workspace/secret");
    assert_eq!(
        std::fs::read_to_string(other_secret).unwrap(),
        "other env secret"
    );
}

#[tokio::test]
async fn code_cannot_see_or_write_the_host_filesystem() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.txt");
    std::fs::write(&victim, "host secret").unwrap();
    let v = victim.to_str().unwrap();
    let env = env();
    let other_tree = env.dir.path().to_str().unwrap();
    let script = format!(
        "cat {v}; cat /proc/self/root{v}; cat /proc/1/root{v}; echo pwned > /proc/self/root{v}; \
         ls {other_tree}; touch /usr/x /etc/x /x /proc/x /dev/x; cat /etc/shadow; \
         echo pwned > /etc/hostname; ls /sys; echo done"
    );
    let out = sh(&env, &script).await;
    let stdout = text(&out.stdout);
    assert_eq!(stdout, "done\n", "stderr: {}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "host secret");
}

#[tokio::test]
async fn code_cannot_reach_host_loopback_services() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let abstract_name = format!("hookbox-test-{}", std::process::id());
    let addr =
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
    let unix = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    unix.set_nonblocking(true).unwrap();

    let env = env();
    let script = format!(
        "python3 - <<'EOF'\nimport socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('tcp-connected')\nexcept OSError as e:\n    print('tcp-refused', e.errno)\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('\\0{abstract_name}')\n    print('unix-connected')\nexcept OSError as e:\n    print('unix-refused', e.errno)\nEOF"
    );
    let out = sh(&env, &script).await;
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("tcp-refused") && stdout.contains("unix-refused"),
        "{stdout} {}",
        text(&out.stderr)
    );
    assert_eq!(
        listener.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
    assert_eq!(
        unix.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}

#[tokio::test]
async fn dangerous_syscalls_are_denied() {
    let env = env();
    let calls = [
        ("ptrace", libc::SYS_ptrace),
        ("process_vm_readv", libc::SYS_process_vm_readv),
        ("io_uring_setup", libc::SYS_io_uring_setup),
        ("mount", libc::SYS_mount),
        ("umount2", libc::SYS_umount2),
        ("pivot_root", libc::SYS_pivot_root),
        ("kexec_load", libc::SYS_kexec_load),
        ("bpf", libc::SYS_bpf),
        ("perf_event_open", libc::SYS_perf_event_open),
        ("keyctl", libc::SYS_keyctl),
        ("unshare", libc::SYS_unshare),
        ("setns", libc::SYS_setns),
        ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ];
    let mut script = String::from("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n");
    for (name, nr) in calls {
        script.push_str(&format!(
            "r = libc.syscall({nr}, 0, 0, 0, 0, 0)\nprint('{name}', r, ctypes.get_errno())\n"
        ));
    }
    // clone with CLONE_NEWUSER (0x10000000) | SIGCHLD must fail; clone3 must be ENOSYS.
    script.push_str(&format!(
        "print('clone_newuser', libc.syscall({}, 0x10000000 | 17, 0, 0, 0, 0), ctypes.get_errno())\n",
        libc::SYS_clone
    ));
    script.push_str(&format!(
        "print('clone3', libc.syscall({}, 0, 0), ctypes.get_errno())\n",
        libc::SYS_clone3
    ));
    let out = env
        .runner
        .run_argv(
            vec!["/usr/bin/python3".into(), "-c".into(), script],
            Vec::new(),
            Duration::from_secs(20),
            1 << 20,
        )
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        calls.len() + 2,
        "{stdout} {}",
        text(&out.stderr)
    );
    for line in &lines[..calls.len() + 1] {
        assert!(line.ends_with(&format!(" -1 {}", libc::EPERM)), "{line}");
    }
    assert_eq!(
        lines[calls.len() + 1],
        format!("clone3 -1 {}", libc::ENOSYS)
    );
}

#[tokio::test]
async fn killing_init_from_inside_fails_and_timeout_kills_detached_daemons() {
    let env = env();
    if gvisor() {
        // gVisor's kill(-1) also ends the caller (Linux spares it), so the shell cannot say it
        // survived; what matters is that the warm sandbox did: the next call runs in it.
        sh(&env, "kill -9 1; kill -9 $PPID; kill -9 -1").await;
        let out = sh(&env, "echo survived").await;
        assert_eq!(text(&out.stdout), "survived\n", "{}", text(&out.stderr));
    } else {
        let out = sh(&env, "kill -9 1; kill -9 $PPID; kill -9 -1; echo survived").await;
        assert!(
            text(&out.stdout).contains("survived"),
            "{}",
            text(&out.stderr)
        );
    }

    // A daemon in its own session keeps stdout open: only the PID namespace dying can close it.
    // The call never ends by itself; it marks that both daemons were started (and "started"
    // written) with a file in the tree. A call killed before that (a slow sandbox start) proves
    // nothing and is run again with a doubled time-out: the test waits for the event, not for a
    // clock, and only a hung call fails the bound.
    let marker = env.dir.path().join("root/workspace/daemons-started");
    let mut timeout = Duration::from_millis(500);
    let out = loop {
        let out = env
            .runner
            .run_argv(
                vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    "setsid sh -c 'sleep 1000' & nohup sleep 1000 & echo started; touch /workspace/daemons-started; wait".into(),
                ],
                Vec::new(),
                timeout,
                1 << 20,
            )
            .await
            .unwrap();
        assert_eq!(out.termination, Termination::TimedOut);
        if marker.exists() {
            break out;
        }
        assert!(
            timeout < Duration::from_secs(60),
            "the call never started its daemons within a {timeout:?} time-out"
        );
        timeout *= 2;
    };
    assert_eq!(text(&out.stdout), "started\n");
    assert!(
        !out.stdout_truncated && !out.stderr_truncated,
        "a process outlived the timeout and held the pipes"
    );
}

#[test]
fn killing_the_launcher_kills_the_sandbox() {
    // Launch directly (no supervise) so the test can kill the launcher itself.
    let env = env();
    let spec = env
        .runner
        .spec(vec![
            "/bin/sh".into(),
            "-c".into(),
            "setsid sleep 1000 & echo ready; exec sleep 1000".into(),
        ])
        .unwrap();
    let memfd = rustix::fs::memfd_create("spec", rustix::fs::MemfdFlags::empty()).unwrap();
    rustix::io::write(&memfd, &serde_json::to_vec(&spec).unwrap()).unwrap();
    rustix::fs::seek(&memfd, rustix::fs::SeekFrom::Start(0)).unwrap();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&memfd);
    let mut cmd = std::process::Command::new(LAUNCHER);
    cmd.stdout(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null());
    // SAFETY: dup2 is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            if libc::dup2(raw, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 6];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"ready\n");
    child.kill().unwrap();
    child.wait().unwrap();
    // EOF on stdout means every process that held it (both sleeps) is gone.
    assert_eof_soon(&mut stdout);
}

/// Forks until the kernel refuses, every child holding its pid (paused) until the sandbox is
/// torn down, then reports how many it got. It stops on the refusal, not on a clock, so the cap
/// is proven on a loaded machine too. (A bash `bomb | bomb &` raced a 2 s timeout and, under a
/// full parallel test run, sometimes ended before reaching the cap: "max 0".)
const FORKER: &str = r#"
import os, sys
children = 0
while children < 10000:
    try:
        pid = os.fork()
    except OSError as e:
        print(f"refused after {children} errno {e.errno}", flush=True)
        sys.exit(0)
    if pid == 0:
        try:
            os.fork()
        except OSError:
            pass
        import signal
        signal.pause()
    children += 1
print("never refused", flush=True)
"#;

#[tokio::test]
async fn fork_bomb_is_capped_by_the_pids_cgroup() {
    if gvisor() {
        return fork_bomb_under_gvisor().await;
    }
    const CAP: u64 = 64;
    let id = format!("env_test{}", std::process::id());
    let cgroups = hookbox_sandbox::cgroup::setup(&id, CAP, 1 << 30);
    assert!(
        cgroups.pids,
        "this machine offers a pids cgroup; the sandbox must use it"
    );
    let cg = cgroups.clone();
    let env = env_with(options(), move |layout| layout.cgroups = cg);
    let out = env
        .runner
        .run_argv(
            vec!["/usr/bin/python3".into(), "-c".into(), FORKER.into()],
            Vec::new(),
            Duration::from_secs(120),
            1 << 20,
        )
        .await
        .unwrap();
    assert_eq!(
        out.termination,
        Termination::Exited(0),
        "{}",
        text(&out.stderr)
    );
    let report = text(&out.stdout);
    let fields: Vec<&str> = report.split_whitespace().collect();
    assert_eq!(fields.first(), Some(&"refused"), "{report}");
    // EAGAIN: the pids cgroup said no.
    assert_eq!(fields.get(4), Some(&"11"), "{report}");
    let children: u64 = fields[2].parse().unwrap();
    assert!(children > 0 && children < CAP, "{report}");
    let peak = hookbox_sandbox::cgroup::read_pids_counter(&cgroups, "pids.peak").unwrap();
    assert!(peak <= CAP, "peak {peak}");
    assert_hit_the_pids_limit(&cgroups);
    // The host can still fork.
    assert!(
        std::process::Command::new("true")
            .status()
            .unwrap()
            .success()
    );
    // After the launcher is gone the namespace is torn down; the cgroup then empties.
    let out = sh(&env, "echo alive").await;
    assert_eq!(text(&out.stdout), "alive\n");
    hookbox_sandbox::cgroup::remove(&cgroups);
}

/// Under gVisor the host cgroup is the cap (gVisor's own pids controller and RLIMIT_NPROC do
/// not refuse forks): it counts the application kernel's threads and stubs too, which
/// [`hookbox_sandbox::gvisor::HOST_TASKS`] leaves room for. A bomb that reaches it ends the
/// sandbox (gVisor cannot grow); the host never goes past the cap, the call ends, and the
/// environment serves calls again in a new sandbox once the bomb's processes are gone.
async fn fork_bomb_under_gvisor() {
    const CAP: u64 = 64 + hookbox_sandbox::gvisor::HOST_TASKS;
    let id = format!("env_test{}", std::process::id());
    let cgroups = hookbox_sandbox::cgroup::setup(&id, CAP, 1 << 30);
    assert!(cgroups.pids, "this machine offers a pids cgroup");
    let cg = cgroups.clone();
    let env = env_with(options(), move |layout| layout.cgroups = cg);
    assert_eq!(text(&sh(&env, "echo up").await.stdout), "up\n");
    let bomb =
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    let out = env
        .runner
        .run_argv(
            vec!["/usr/bin/python3".into(), "-c".into(), bomb.into()],
            Vec::new(),
            Duration::from_secs(30),
            1 << 20,
        )
        .await;
    // Whatever the bomb got (the sandbox ended under it, or the timeout), it did not succeed.
    assert!(out.as_ref().map_or(true, |o| !o.success()), "{out:?}");
    let peak = hookbox_sandbox::cgroup::read_pids_counter(&cgroups, "pids.peak").unwrap();
    assert!(peak <= CAP, "peak {peak}");
    assert_hit_the_pids_limit(&cgroups);
    // gVisor tears the bomb's processes down after the sandbox ended; until it has, the next
    // sandbox shares the cap with them and can be refused too. The environment recovers within
    // a few calls (each a real call; none sleeps).
    let mut attempts = 0;
    let recovered = loop {
        attempts += 1;
        let out = env
            .runner
            .run_argv(
                vec!["/bin/sh".into(), "-c".into(), "echo alive".into()],
                Vec::new(),
                Duration::from_secs(20),
                1 << 20,
            )
            .await;
        if out.as_ref().is_ok_and(|o| o.stdout == b"alive\n") || attempts == 10 {
            break out.is_ok_and(|o| o.stdout == b"alive\n");
        }
    };
    assert!(
        recovered,
        "the environment did not recover in {attempts} calls"
    );
    drop(env);
    hookbox_sandbox::cgroup::remove(&cgroups);
}

#[tokio::test]
async fn memory_is_capped() {
    let mut opts = options();
    opts.limits.memory_bytes = 256 << 20;
    let env = env_with(opts, |_| {});
    let out = sh(
        &env,
        "python3 -c 'b = bytearray(1024 * 1024 * 1024); print(\"allocated\")'",
    )
    .await;
    assert!(!text(&out.stdout).contains("allocated"));
    assert!(!out.success());
}

#[tokio::test]
async fn sandbox_root_cannot_reconfigure_its_network_or_regain_admin_capabilities() {
    let env = env();
    let out = sh(
        &env,
        "ip link set lo down && echo lo-down; ip link add dummy0 type dummy && echo added; grep CapBnd /proc/self/status",
    )
    .await;
    let stdout = text(&out.stdout);
    assert!(
        !stdout.contains("lo-down") && !stdout.contains("added"),
        "{stdout}"
    );
    let bound = u64::from_str_radix(stdout.trim().rsplit('\t').next().unwrap(), 16).unwrap();
    assert_eq!(
        bound & (1 << 21),
        0,
        "CAP_SYS_ADMIN still in the bounding set"
    );
    assert_eq!(
        bound & (1 << 12),
        0,
        "CAP_NET_ADMIN still in the bounding set"
    );
}

#[test]
fn killing_hookbox_kills_the_launcher_and_the_sandbox() {
    // `sh` stands for the hookbox process: it starts the launcher and is then killed. The spec
    // goes through a pipe so that it can name sh's pid as the parent, after sh has started.
    let env = env();
    let (spec_read, spec_write) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&spec_read);
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args(["-c", &format!("{LAUNCHER} & wait")])
        .stdout(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null());
    // SAFETY: dup2 is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            if libc::dup2(raw, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut parent = cmd.spawn().unwrap();
    drop(spec_read);
    let mut spec = env
        .runner
        .spec(vec![
            "/bin/sh".into(),
            "-c".into(),
            "echo ready; exec sleep 1000".into(),
        ])
        .unwrap();
    spec.parent_pid = i32::try_from(parent.id()).unwrap();
    rustix::io::write(&spec_write, &serde_json::to_vec(&spec).unwrap()).unwrap();
    drop(spec_write);
    let mut stdout = parent.stdout.take().unwrap();
    let mut first = [0u8; 6];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"ready\n");
    parent.kill().unwrap();
    parent.wait().unwrap();
    // EOF only once the launcher (parent-death signal) and the sandbox (its init dying) are gone.
    assert_eof_soon(&mut stdout);
}

/// Fails (instead of hanging) if the pipe is still held open after a generous bound: a process
/// that outlived its killers would hold it forever.
fn assert_eof_soon(pipe: &mut std::process::ChildStdout) {
    let fd = std::os::fd::AsRawFd::as_raw_fd(pipe);
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&mut poll, 1, 10_000) };
    assert_eq!(
        ready, 1,
        "the sandbox outlived its parent: stdout still open after 10 s"
    );
    let mut rest = Vec::new();
    pipe.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{}", text(&rest));
}

// Regression: `/etc/ssl` was bound whole, so the host's `ssl/private` keys were readable inside.
#[tokio::test]
async fn host_tls_private_keys_are_not_in_the_sandbox() {
    let env = env();
    let out = sh(
        &env,
        "ls /etc/ssl; test -e /etc/ssl/private; echo \"private=$?\"; test -d /etc/ssl/certs; echo \"certs=$?\"",
    )
    .await;
    let stdout = text(&out.stdout);
    assert!(stdout.ends_with("private=1\ncerts=0\n"), "{stdout}");
}

/// Under gVisor, a syscall its kernel does not implement is a clear `ENOSYS` for the program,
/// and one that would act on the kernel acts on gVisor's: clearing the kernel log inside leaves
/// the host's log as it was (a marker written to it before is still there).
#[tokio::test]
async fn under_gvisor_unimplemented_syscalls_fail_cleanly_and_never_reach_the_host() {
    // A gVisor test: the namespaces run of the suite has nothing to check here.
    if !gvisor() || !hookbox_test_require::root("writing the host's kernel log (/dev/kmsg)") {
        return;
    }
    let marker = format!("hookbox-test-marker-{}", std::process::id());
    std::fs::write("/dev/kmsg", format!("{marker}\n")).unwrap();
    let env = env();
    let script = format!(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         print('landlock', libc.syscall({}, 0, 0, 1), ctypes.get_errno())\n\
         print('syslog_clear', libc.syscall({}, 5, 0, 0), ctypes.get_errno())\n",
        libc::SYS_landlock_create_ruleset,
        libc::SYS_syslog
    );
    let out = env
        .runner
        .run_argv(
            vec!["/usr/bin/python3".into(), "-c".into(), script],
            Vec::new(),
            Duration::from_secs(20),
            1 << 20,
        )
        .await
        .unwrap();
    assert_eq!(
        text(&out.stdout),
        format!("landlock -1 {0}\nsyslog_clear -1 {0}\n", libc::ENOSYS),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        text(&sh(&env, "echo still-serving").await.stdout),
        "still-serving\n"
    );
    let host_log = std::process::Command::new("dmesg").output().unwrap();
    assert!(
        text(&host_log.stdout).contains(&marker),
        "the host's kernel log lost the marker"
    );
}

/// The environment's pids cgroup refused at least one fork.
fn assert_hit_the_pids_limit(cgroups: &hookbox_sandbox::cgroup::EnvCgroups) {
    let events = std::fs::read_to_string(
        cgroups
            .dirs
            .iter()
            .find(|d| d.join("pids.events").exists())
            .unwrap()
            .join("pids.events"),
    )
    .unwrap();
    let hits: u64 = events.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(hits > 0, "the bomb never hit the limit: {events}");
}
