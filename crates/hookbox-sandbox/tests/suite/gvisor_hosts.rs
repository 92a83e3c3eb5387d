//! A gVisor sandbox's call hosts (the launcher's `call_host`, run by `gvisor_init`): what only
//! gVisor needs beyond the `hosts` suite, through the real runsc. A host reports its stages
//! and is reused; an idle host that died leaves the next call to a new one; a call whose host
//! died ends as killed; a reused host's call sees nothing of the call before it; new and reused
//! hosts confine their calls alike and run their spec with its stdin.
//!
//! The hosts are watched from the host with runsc itself (`runsc ps` lists the container's
//! processes in its root PID namespace, where the init is PID 1 and every call host is a child
//! of it named after the init's binary) and killed with `runsc kill --pid`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hookbox_sandbox::gvisor::Runsc;
use hookbox_sandbox::spec::RuntimeKind;
use hookbox_sandbox::warm::WarmSandbox;

use super::support::*;

const LIMIT: usize = 64 * 1024;
const TIMEOUT: Duration = Duration::from_secs(120);
/// Bound on one runsc housekeeping command (only a hung one reaches it).
const RUNSC_TIMEOUT: Duration = Duration::from_secs(60);
/// The init's process name (the binary is bound at `gvisor::INIT_PATH`).
const INIT_NAME: &str = ".hookbox-init";

/// A gVisor sandbox under test, and how to reach its container with runsc.
struct Gvisor {
    sandbox: WarmSandbox,
    runsc: PathBuf,
    /// `--root=` of the container's runsc state.
    root: String,
    id: String,
}

/// The runsc to test with, or `None` when the test may skip (see `hookbox_test_require`).
pub(super) fn runsc() -> Option<Runsc> {
    if !hookbox_test_require::root("gVisor sandboxes (runsc runs as root)")
        || !hookbox_test_require::program("runsc", "the gVisor runtime")
    {
        return None;
    }
    Some(
        Runsc::detect(
            std::env::var_os("HOOKBOX_TEST_RUNSC")
                .map(PathBuf::from)
                .as_deref(),
            Default::default(),
        )
        .unwrap(),
    )
}

impl Gvisor {
    async fn start(runsc: &Runsc, t: &Tree) -> Self {
        let mut spec = t.spec.clone();
        spec.runtime = RuntimeKind::Gvisor;
        let (key, _) = spec.split_call();
        let sandbox = WarmSandbox::start_gvisor(runsc, &launcher(), key, None)
            .await
            .unwrap();
        // `runsc run`'s own command line names the state root and the container.
        let pid = sandbox.launcher_pid().unwrap();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8(a.to_vec()).unwrap())
            .collect();
        let root = args
            .iter()
            .find(|a| a.starts_with("--root="))
            .unwrap_or_else(|| panic!("no --root in {args:?}"))
            .clone();
        let id = args.last().unwrap().clone();
        assert!(args.iter().any(|a| a == "run"), "not runsc run: {args:?}");
        Self {
            sandbox,
            runsc: runsc.path.clone(),
            root,
            id,
        }
    }

    fn runsc_command(&self, args: &[&str]) -> Vec<u8> {
        let mut cmd = std::process::Command::new(&self.runsc);
        cmd.arg(&self.root).args(args);
        hookbox_process::host::output(cmd, RUNSC_TIMEOUT)
            .unwrap_or_else(|e| panic!("runsc {args:?}: {e}"))
    }

    /// The container's processes (zombies included): pid, parent pid, name.
    fn processes(&self) -> Vec<(u32, u32, String)> {
        let table = text(&self.runsc_command(&["ps", &self.id]));
        let mut lines = table.lines();
        let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(header.get(1..3), Some(&["PID", "PPID"][..]), "{table}");
        lines
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                (
                    fields[1].parse().unwrap(),
                    fields[2].parse().unwrap(),
                    fields.last().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// The init's call hosts (its children named as it is: the relay is not started without
    /// egress), busy or idle.
    fn hosts(&self) -> Vec<u32> {
        let procs = self.processes();
        assert!(
            procs.iter().any(|p| *p == (1, 0, INIT_NAME.to_owned())),
            "no init: {procs:?}"
        );
        procs
            .into_iter()
            .filter(|(pid, ppid, name)| *ppid == 1 && *pid != 1 && name == INIT_NAME)
            .map(|(pid, _, _)| pid)
            .collect()
    }

    /// The one host there is.
    fn host(&self) -> u32 {
        let hosts = self.hosts();
        assert_eq!(hosts.len(), 1, "not one host: {hosts:?}");
        hosts[0]
    }

    /// Runs the loop `wait` with `sh -c` inside the container until it ends (bounded: only a
    /// hung wait reaches the 60 s).
    fn wait_inside(&self, wait: &str) {
        self.runsc_command(&[
            "exec",
            &self.id,
            "/usr/bin/timeout",
            "60",
            "/bin/sh",
            "-c",
            wait,
        ]);
    }

    /// Kills process `pid` of the container from the host, and waits until it is dead (a
    /// zombie its parent has not reaped yet, or gone).
    fn kill(&self, pid: u32) {
        let pid = pid.to_string();
        self.runsc_command(&["kill", &format!("--pid={pid}"), &self.id, "KILL"]);
        // Waits inside the sandbox, on its own /proc (bounded: only a hung kill reaches it).
        self.wait_inside(&format!(
            "until [ ! -e /proc/{pid} ] || grep -q '^State:.*Z' /proc/{pid}/status; do :; done"
        ));
    }

    /// Runs `script` with `sh -c` as one call and returns its stdout; it must succeed.
    async fn sh(&self, t: &Tree, script: &str) -> String {
        let mut spec = t.spec.clone();
        spec.runtime = RuntimeKind::Gvisor;
        spec.argv = vec!["/bin/sh".into(), "-c".into(), script.into()];
        let out = warm_call(&self.sandbox, &spec, TIMEOUT, LIMIT)
            .await
            .unwrap();
        assert!(
            out.success(),
            "{script}: {:?} {}",
            out.termination,
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// Runs `argv` as one call with stage timings; it must succeed. Its stages by name.
    async fn timed(&self, t: &Tree, argv: &[&str]) -> std::collections::HashMap<String, i128> {
        let mut spec = t.spec.clone();
        spec.runtime = RuntimeKind::Gvisor;
        spec.stage_timings = true;
        spec.argv = argv.iter().map(|a| a.to_string()).collect();
        let (_, call) = spec.split_call();
        let (out, stages) = self
            .sandbox
            .call(&call, None)
            .await
            .unwrap()
            .supervise(std::time::Instant::now(), Vec::new(), TIMEOUT, LIMIT)
            .await
            .unwrap();
        assert!(
            out.success(),
            "{argv:?}: {:?} {}",
            out.termination,
            text(&out.stderr)
        );
        stages.into_iter().collect()
    }

    async fn stop(self) {
        stop(self.sandbox).await;
    }
}

/// A new host's first call reports the host's own set-up (`call_cloned`, `proc_mounted`), then
/// the call's stages; the next call runs in the same host and reports only its own. No
/// `landlock_applied`: gVisor has no Landlock.
#[tokio::test]
async fn under_gvisor_a_host_is_reused_and_its_calls_report_their_stages() {
    let Some(runsc) = runsc() else { return };
    let t = tree(&[]);
    let g = Gvisor::start(&runsc, &t).await;
    let call = [
        "call_received",
        "program_forked",
        "limits_set",
        "seccomp_installed",
    ];
    let first = g.timed(&t, &["/bin/true"]).await;
    let host = g.host();
    let second = g.timed(&t, &["/bin/true"]).await;
    assert_eq!(g.host(), host, "the second call did not reuse the host");
    for (n, stages, expected) in [
        (
            0,
            &first,
            [&["call_cloned", "proc_mounted"][..], &call].concat(),
        ),
        (1, &second, call.to_vec()),
    ] {
        let mut names: Vec<(&i128, &str)> = stages
            .iter()
            .map(|(name, at)| (at, name.as_str()))
            .collect();
        names.sort();
        let names: Vec<&str> = names.into_iter().map(|(_, name)| name).collect();
        assert_eq!(names, expected, "call {n}: {stages:?}");
    }
    g.stop().await;
}

/// An idle host killed from outside (from the host, by its pid in the container) does not take
/// the next call with it: the init learns it is gone from its socket, and the call runs in a
/// new host (its program is that namespace's first process after the host: PID 2), which then
/// serves the call after.
#[tokio::test]
async fn under_gvisor_an_idle_host_that_died_leaves_the_next_call_to_a_new_one() {
    let Some(runsc) = runsc() else { return };
    let t = tree(&[]);
    let g = Gvisor::start(&runsc, &t).await;
    assert_eq!(g.sh(&t, "echo first; echo $$").await, "first\n2\n");
    let host = g.host();
    assert_eq!(
        g.sh(&t, "echo again; echo $$").await,
        "again\n3\n",
        "the host was not reused"
    );
    g.kill(host);
    assert_eq!(g.sh(&t, "echo second; echo $$").await, "second\n2\n");
    let next = g.host();
    assert_ne!(next, host);
    assert!(
        !g.processes().iter().any(|p| p.0 == host),
        "the dead host {host} was not reaped: {:?}",
        g.processes()
    );
    assert_eq!(g.sh(&t, "echo third; echo $$").await, "third\n3\n");
    assert_eq!(g.host(), next);
    g.stop().await;
}

/// A call whose host is killed from outside while its program runs ends as a killed call
/// (gVisor's reply socket is all hookbox has of it: the host's end closes with it), its
/// program goes with the host's PID namespace, and the next call gets a new host.
#[tokio::test]
async fn under_gvisor_a_call_whose_host_died_ends_killed_and_the_next_gets_a_new_host() {
    let Some(runsc) = runsc() else { return };
    let t = tree(&[]);
    let g = Arc::new(Gvisor::start(&runsc, &t).await);
    assert_eq!(g.sh(&t, "echo up").await, "up\n");
    let host = g.host();
    let mut spec = t.spec.clone();
    spec.runtime = RuntimeKind::Gvisor;
    spec.argv = ["/bin/sleep", "1004"].map(String::from).to_vec();
    let (_, call) = spec.split_call();
    let started = std::time::Instant::now();
    let call = g.sandbox.call(&call, None).await.unwrap();
    let supervised =
        tokio::spawn(async move { call.supervise(started, Vec::new(), TIMEOUT, LIMIT).await });
    // The program runs (a child of the host), then the host is killed.
    {
        let g = g.clone();
        tokio::task::spawn_blocking(move || {
            g.wait_inside("until grep -qx sleep /proc/[0-9]*/comm; do :; done");
            g.kill(host);
        })
        .await
        .unwrap();
    }
    let out = tokio::time::timeout(TIMEOUT, supervised)
        .await
        .expect("the call of a dead host never ended")
        .unwrap()
        .unwrap()
        .0;
    assert_eq!(
        out.termination,
        hookbox_process::Termination::Signaled(libc::SIGKILL)
    );
    // The kernel closes a dying process's descriptors before it kills the rest of its PID
    // namespace, so the program may still be going: it must be gone within the bound.
    let gone = {
        let g = g.clone();
        tokio::task::spawn_blocking(move || {
            text(&g.runsc_command(&[
                "exec",
                &g.id,
                "/usr/bin/timeout",
                "60",
                "/bin/sh",
                "-c",
                "while grep -qx sleep /proc/[0-9]*/comm; do :; done; echo gone",
            ]))
        })
        .await
        .unwrap()
    };
    assert_eq!(gone, "gone\n", "the program outlived its host");
    assert_eq!(g.sh(&t, "echo after; echo $$").await, "after\n2\n");
    assert_ne!(g.host(), host);
    Arc::try_unwrap(g).ok().unwrap().stop().await;
}

/// What a call can see of the process state around it, as JSON on stdout: the processes it
/// sees (their command lines, its host's marked as PID 1: pids continue from call to call in a
/// host), `/dev/shm`, System V IPC objects under [`IPC_KEY`], its environment, working
/// directory, umask, rlimits, signal dispositions and mask, its open descriptors (by number
/// and kind: pipe and socket inode numbers differ from call to call) and whether it may list
/// its host's.
const PROBE: &str = r#"
import ctypes, json, os, re, resource, signal
KEY = 0x4b35
libc = ctypes.CDLL(None, use_errno=True)
out = {}
procs = []
for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            line = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError as e:
        line = f"<{e.strerror}>"
    if pid == str(os.getpid()):
        line = "self"
    procs.append(("1 " if pid == "1" else "") + line)
out["procs"] = sorted(procs)
out["shm"] = sorted(os.listdir("/dev/shm"))
def ipc(result):
    return "found" if result >= 0 else os.strerror(ctypes.get_errno())
out["ipc"] = [ipc(libc.shmget(KEY, 0, 0)), ipc(libc.msgget(KEY, 0)), ipc(libc.semget(KEY, 0, 0))]
out["env"] = sorted(f"{k}={v}" for k, v in os.environ.items())
out["cwd"] = os.getcwd()
mask = os.umask(0)
os.umask(mask)
out["umask"] = oct(mask)
out["limits"] = {n: resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith("RLIMIT_")}
out["signals"] = {
    "ignored": sorted(s.name for s in signal.Signals if signal.getsignal(s) == signal.SIG_IGN),
    "blocked": sorted(s.name for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
}
def fds(pid):
    seen = []
    for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        try:
            seen.append(fd + " " + re.sub(r"\[\d+\]", "", os.readlink(f"/proc/{pid}/fd/{fd}")))
        except OSError:
            pass
    return seen
out["fds"] = fds("self")
try:
    out["init_fds"] = fds(1)
except OSError as e:
    out["init_fds"] = e.strerror
print(json.dumps(out, sort_keys=True))
"#;

/// The System V IPC key the first call creates objects under.
const IPC_KEY: &str = "0x4b35";

/// One call changes every piece of process state it can and holds; the call run meanwhile (in a
/// second host), and the one after the first ended (in the first call's host, the second
/// killed so that it must be), see exactly what a call saw before the first ran, and none may
/// list its host's descriptors. The first call's own view shows each change, so the probe sees
/// them where they exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_gvisor_a_reused_host_shows_its_call_nothing_of_the_call_before_it() {
    let Some(runsc) = runsc() else { return };
    let t = tree(&[]);
    let workspace = t.dir.path().join("root/workspace");
    std::fs::write(workspace.join("probe.py"), PROBE).unwrap();
    std::fs::create_dir(workspace.join("one")).unwrap();
    // The sandbox's root is an unprivileged host uid: the calls write their markers here.
    for dir in [&workspace, &workspace.join("one")] {
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    }
    let g = Arc::new(Gvisor::start(&runsc, &t).await);
    let probe = |g: Arc<Gvisor>| {
        let mut spec = t.spec.clone();
        spec.runtime = RuntimeKind::Gvisor;
        spec.argv = ["/usr/bin/python3", "/workspace/probe.py"]
            .map(String::from)
            .to_vec();
        async move {
            let out = warm_call(&g.sandbox, &spec, TIMEOUT, LIMIT).await.unwrap();
            assert!(out.success(), "{:?} {}", out.termination, text(&out.stderr));
            serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
        }
    };
    let before = probe(g.clone()).await;

    // The first call: its own environment and working directory, then every change a shell
    // can make, a System V shared memory segment, message queue and semaphore set, and a
    // process left running; it probes, says so, and holds until told to end.
    let mut first = t.spec.clone();
    first.runtime = RuntimeKind::Gvisor;
    first.cwd = "/workspace/one".into();
    first
        .env
        .push(("CALL_ONE".into(), "from-the-first-call".into()));
    let ipc = format!(
        "import ctypes; l = ctypes.CDLL(None, use_errno=True); \
         assert min(l.shmget({IPC_KEY}, 4096, 0o1600), l.msgget({IPC_KEY}, 0o1600), \
         l.semget({IPC_KEY}, 1, 0o1600)) >= 0, ctypes.get_errno()"
    );
    let script = format!(
        "set -e; export CALL_ONE_SHELL=1; cd /workspace/one; umask 077; ulimit -n 99; \
         ulimit -s 512; trap '' USR1 HUP; exec 7>/workspace/one/held; \
         : > /dev/shm/call-one; python3 -c '{ipc}'; \
         sleep 1000 > /dev/null & \
         python3 /workspace/probe.py; touch /workspace/ready; \
         until [ -e /workspace/done ]; do sleep 0.05; done"
    );
    first.argv = vec!["/bin/sh".into(), "-c".into(), script];
    let host = g.host();
    let running = {
        let g = g.clone();
        tokio::spawn(async move { warm_call(&g.sandbox, &first, TIMEOUT, LIMIT).await })
    };
    // Its marker (a poll bounded by the call's own timeout: only a hung call reaches it).
    let started = std::time::Instant::now();
    while !workspace.join("ready").exists() {
        if running.is_finished() {
            let out = running.await.unwrap().unwrap();
            panic!("{:?} {}", out.termination, text(&out.stderr));
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "the first call never got ready"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let during = probe(g.clone()).await;
    let hosts = {
        let g = g.clone();
        tokio::task::spawn_blocking(move || g.hosts())
            .await
            .unwrap()
    };
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    assert!(
        hosts.contains(&host),
        "the first call's host is gone: {hosts:?}"
    );
    let other = hosts.into_iter().find(|h| *h != host).unwrap();
    std::fs::write(workspace.join("done"), "").unwrap();
    let out = running.await.unwrap().unwrap();
    assert!(out.success(), "{:?} {}", out.termination, text(&out.stderr));
    let changed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    {
        let g = g.clone();
        tokio::task::spawn_blocking(move || g.kill(other))
            .await
            .unwrap();
    }
    let after = probe(g.clone()).await;
    let hosts = {
        let g = g.clone();
        tokio::task::spawn_blocking(move || g.hosts())
            .await
            .unwrap()
    };
    assert_eq!(
        hosts,
        [host],
        "the probe after did not run in the first call's host"
    );

    let fields = [
        "procs", "shm", "ipc", "env", "cwd", "umask", "limits", "signals", "fds",
    ];
    for field in fields {
        assert_ne!(
            changed[field], before[field],
            "the first call's own {field} did not change"
        );
        assert_eq!(
            during[field], before[field],
            "{field} while the first call ran"
        );
        assert_eq!(after[field], before[field], "{field} after the first call");
    }
    // gVisor lets a process of the host's uid list the host's descriptors (it does not apply
    // dumpability to `/proc/PID/fd`, unlike Linux; `/proc/PID/mem` it does refuse): a new host
    // and a reused one hold the same kinds, nothing kept from the call before.
    let kinds = |probe: &serde_json::Value| {
        let mut kinds: Vec<String> = probe["init_fds"]
            .as_array()
            .unwrap_or_else(|| panic!("{probe}"))
            .iter()
            .map(|fd| fd.as_str().unwrap().split_once(' ').unwrap().1.to_owned())
            .collect();
        kinds.sort();
        kinds
    };
    assert_eq!(kinds(&during), kinds(&before), "a new host's descriptors");
    assert_eq!(kinds(&after), kinds(&before), "a reused host's descriptors");
    assert!(
        changed["procs"].to_string().contains("sleep 1000"),
        "{changed}"
    );
    // Nothing of the host's own signal mask (it blocks SIGCHLD for its signalfd) either.
    assert_eq!(
        before["signals"]["blocked"],
        serde_json::json!([]),
        "{before}"
    );
    let before = before.to_string();
    assert!(
        !before.contains("call-one") && !before.contains("CALL_ONE"),
        "{before}"
    );
    drop(during);
    Arc::try_unwrap(g).ok().unwrap().stop().await;
}

/// A call that forks up to the sandbox's pids cap and holds, the case in which a new host's
/// clone would be refused. Under gVisor it never is: gVisor's own pids controller and
/// `RLIMIT_NPROC` do not refuse forks, and the host cgroup's cap (the environment's plus
/// `gvisor::HOST_TASKS`) is met by the application kernel itself, which ends the whole sandbox.
/// So no clone in the init fails with `EAGAIN`. Should a gVisor release refuse the fork
/// instead, this test fails and says what to check.
#[tokio::test]
async fn under_gvisor_a_call_forking_up_to_the_pids_cap_gets_no_clone_refused() {
    if !hookbox_test_require::root("creating a pids cgroup") {
        return;
    }
    let Some(runsc) = runsc() else { return };
    const CAP: u64 = 64 + hookbox_sandbox::gvisor::HOST_TASKS;
    let cgroup = PidsCgroup::new("host-cap", CAP);
    let mut t = tree(&[]);
    t.spec.cgroups = cgroup.0.dirs.clone();
    let g = Gvisor::start(&runsc, &t).await;
    assert_eq!(g.sh(&t, "echo up").await, "up\n");
    let bomb = "import os, signal\n\
                while True:\n    \
                    try:\n        pid = os.fork()\n    \
                    except OSError as e:\n        \
                        print('refused', e.errno, flush=True)\n        break\n    \
                    if pid == 0:\n        signal.pause()\n        os._exit(0)\n\
                signal.pause()\n";
    let mut spec = t.spec.clone();
    spec.runtime = RuntimeKind::Gvisor;
    spec.argv = vec!["/usr/bin/python3".into(), "-c".into(), bomb.into()];
    let out = warm_call(&g.sandbox, &spec, Duration::from_secs(30), LIMIT).await;
    let peak = hookbox_sandbox::cgroup::read_pids_counter(&cgroup.0, "pids.peak").unwrap();
    assert!(peak <= CAP, "peak {peak}");
    let refused = out
        .as_ref()
        .is_ok_and(|o| text(&o.stdout).contains("refused"));
    assert!(
        !refused,
        "gVisor refused a fork at the pids cap ({out:?}): a new host's clone can now fail with \
         EAGAIN too; test here that the call needing it is refused with the reason"
    );
    assert!(out.as_ref().map_or(true, |o| !o.success()), "{out:?}");
    // The next call: the sandbox is gone (its socket says so), or, when the bomb only timed
    // out, it runs; never a refused clone.
    spec.argv = ["/bin/echo", "after"].map(String::from).to_vec();
    match warm_call(&g.sandbox, &spec, TIMEOUT, LIMIT).await {
        Ok(out) => assert_eq!(text(&out.stdout), "after\n"),
        Err(err) => assert_eq!(
            err.stage(),
            Some(hookbox_sandbox::Stage::WarmSocket),
            "{err}"
        ),
    }
    g.stop().await;
    drop(cgroup);
}

/// Under gVisor the init sets the bounding set and the limits no call can change once, before
/// its first host: a new host's call, a reused host's, and a call in the new host that follows
/// a host's death are all confined exactly as the launcher confines a program (see
/// `confinement.rs`).
#[tokio::test]
async fn under_gvisor_new_and_reused_hosts_confine_their_calls_as_every_program() {
    let Some(runsc) = runsc() else { return };
    let t = confinement_tree();
    let expected = expected_confinement(RuntimeKind::Gvisor);
    let g = Gvisor::start(&runsc, &t).await;
    for which in ["new host", "reused host"] {
        let lines = g.sh(&t, CONFINEMENT).await;
        assert_eq!(confinement_lines(lines.as_bytes()), expected, "{which}");
    }
    g.kill(g.host());
    let lines = g.sh(&t, CONFINEMENT).await;
    assert_eq!(
        confinement_lines(lines.as_bytes()),
        expected,
        "the host after a dead one"
    );
    g.stop().await;
}

/// Under gVisor a new host's call and a reused host's both run exactly the spec they were
/// given, short or long, and read their stdin (an empty one as end of file). gVisor's init has
/// its request socket at 0, which a host closes: a call's descriptors must still reach the
/// program at 0-2, whatever numbers they arrived at.
#[tokio::test]
async fn under_gvisor_new_and_reused_hosts_run_their_spec_short_or_long_with_their_stdin() {
    let Some(runsc) = runsc() else { return };
    let t = tree(&[]);
    let g = Gvisor::start(&runsc, &t).await;
    assert_eq!(g.sh(&t, "echo up").await, "up\n");
    for len in super::handover::lengths() {
        for (new, stdin) in [
            (false, ""),
            (false, "given\n"),
            (true, ""),
            (true, "given\n"),
        ] {
            if new {
                g.kill(g.host());
            }
            let (mut spec, pad) = super::handover::padded(&t.spec, len);
            spec.runtime = RuntimeKind::Gvisor;
            assert_eq!(
                super::handover::call_with_stdin(&g.sandbox, &spec, stdin.as_bytes()).await,
                format!("{pad}|{stdin}|"),
                "spec of {len} bytes, new host {new}"
            );
        }
    }
    g.stop().await;
}
