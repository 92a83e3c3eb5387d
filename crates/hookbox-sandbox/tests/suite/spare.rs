//! The spare call of a gVisor sandbox (see the launcher's `gvisor_init`): a call process its
//! init builds ahead, confined before any call arrives. Through the real runsc: a spare that
//! dies before its call, the stop after [`SPARE_FAILURES`] failures in a row, and what one call
//! can leave behind for the next.
//!
//! The spares are watched from the host with runsc itself (`runsc ps` lists the container's
//! processes in its root PID namespace, where the init is PID 1 and every spare and every
//! running call's PID 1 is a child of it named after the init's binary) and killed with `runsc
//! kill --pid`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hookbox_sandbox::gvisor::Runsc;
use hookbox_sandbox::spec::RuntimeKind;
use hookbox_sandbox::warm::WarmSandbox;

use super::support::*;

/// The init's bound on spares that failed in a row (`gvisor_init::SPARE_FAILURES`).
const SPARE_FAILURES: usize = 3;
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
fn runsc() -> Option<Runsc> {
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

    /// The init's call processes other than `busy` (the PID 1s of running calls): between
    /// calls, the spares.
    fn spares(&self, busy: &[u32]) -> Vec<u32> {
        let procs = self.processes();
        assert!(
            procs.iter().any(|p| *p == (1, 0, INIT_NAME.to_owned())),
            "no init: {procs:?}"
        );
        procs
            .into_iter()
            .filter(|(pid, ppid, name)| *ppid == 1 && name == INIT_NAME && !busy.contains(pid))
            .map(|(pid, _, _)| pid)
            .collect()
    }

    /// The one spare there is between calls.
    fn spare(&self) -> u32 {
        let spares = self.spares(&[]);
        assert_eq!(spares.len(), 1, "not one spare between calls: {spares:?}");
        spares[0]
    }

    /// Waits until every process in `pids` has installed its seccomp filter (its
    /// `/proc/PID/status` inside the container says `Seccomp: 2`): spares that are confined.
    fn wait_confined(&self, pids: &[u32]) {
        let files: Vec<String> = pids.iter().map(|p| format!("/proc/{p}/status")).collect();
        self.wait_inside(&format!(
            "for f in {}; do until grep -q '^Seccomp:[[:space:]]*2' $f; do :; done; done",
            files.join(" ")
        ));
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

/// A call handed to its spare reports, besides the spare's own stages (reached before the
/// call came), `call_arrived`: when the init read the call, on the same clock. A spare
/// confined before the call came (waited for in `/proc`) has `seccomp_installed` before
/// `call_arrived`, and the program starts after it; a call that waited for its spare would
/// show `seccomp_installed` after `call_arrived` (how the breakdown bench counts waits).
#[tokio::test]
async fn under_gvisor_a_call_handed_to_its_spare_reports_when_it_arrived() {
    let Some(runsc) = runsc() else { return };
    let t = tree(&[]);
    let g = Gvisor::start(&runsc, &t).await;
    assert_eq!(g.sh(&t, "echo up").await, "up\n");
    for n in 0..2 {
        g.wait_confined(&[g.spare()]);
        let stages = g.timed(&t, &["/bin/true"]).await;
        for stage in [
            "call_cloned",
            "seccomp_installed",
            "call_arrived",
            "program_forked",
        ] {
            assert!(
                stages.contains_key(stage),
                "call {n}: no {stage}: {stages:?}"
            );
        }
        assert!(
            stages["call_cloned"] < stages["seccomp_installed"]
                && stages["seccomp_installed"] < stages["call_arrived"]
                && stages["call_arrived"] < stages["program_forked"],
            "call {n}: {stages:?}"
        );
    }
    g.stop().await;
}

/// A spare killed before its call (from the host, by its pid in the container) does not take
/// the call with it: the init finds it dead when the call comes, reaps it, runs the call on a
/// fresh clone, and builds the next spare.
#[tokio::test]
async fn under_gvisor_a_spare_killed_before_its_call_leaves_the_call_to_a_fresh_clone() {
    let Some(runsc) = runsc() else { return };
    let t = tree(&[]);
    let g = Gvisor::start(&runsc, &t).await;
    assert_eq!(g.sh(&t, "echo first").await, "first\n");
    // The spare built for the next call.
    let spare = g.spare();
    g.kill(spare);
    assert!(
        g.processes().iter().any(|p| p.0 == spare),
        "the dead spare is reaped by the init only when a call comes for it"
    );
    assert_eq!(g.sh(&t, "echo second; echo $$").await, "second\n2\n");
    // The dead spare was reaped, and a new one built for the call after.
    let next = g.spare();
    assert_ne!(next, spare);
    assert!(
        !g.processes().iter().any(|p| p.0 == spare),
        "the dead spare {spare} was not reaped: {:?}",
        g.processes()
    );
    // Which serves it.
    assert_eq!(g.sh(&t, "echo third").await, "third\n");
    assert!(!g.processes().iter().any(|p| p.0 == next));
    g.spare();
    g.stop().await;
}

/// After `SPARE_FAILURES` spares in a row died before their call, the init stops building
/// them: calls are cloned when they arrive, and still run. A spare that serves its call resets
/// the count.
#[tokio::test]
async fn under_gvisor_three_failed_spares_in_a_row_stop_the_spares_and_a_served_call_resets_the_count()
 {
    let Some(runsc) = runsc() else { return };
    let t = tree(&[]);
    let g = Gvisor::start(&runsc, &t).await;
    assert_eq!(g.sh(&t, "echo up").await, "up\n");
    // Two failures, then a call served by its spare, then two more failures: never three in a
    // row, so there is still a spare.
    for round in 0..2 {
        for _ in 0..SPARE_FAILURES - 1 {
            g.kill(g.spare());
            assert_eq!(g.sh(&t, "echo ran").await, "ran\n");
        }
        if round == 0 {
            let served = g.spare();
            assert_eq!(g.sh(&t, "echo served").await, "served\n");
            assert!(!g.processes().iter().any(|p| p.0 == served));
        }
    }
    // The third failure in a row: no spare is built any more.
    g.kill(g.spare());
    assert_eq!(g.sh(&t, "echo ran").await, "ran\n");
    assert_eq!(g.spares(&[]), Vec::<u32>::new(), "{:?}", g.processes());
    // Calls still run (each cloned when it comes), and no spare comes back.
    for n in 0..2 {
        assert_eq!(
            g.sh(&t, &format!("echo {n}; echo $$")).await,
            format!("{n}\n2\n")
        );
        assert_eq!(g.spares(&[]), Vec::<u32>::new(), "{:?}", g.processes());
    }
    g.stop().await;
}

/// What a call can see of the process state around it, as JSON on stdout: the processes it
/// sees, `/dev/shm`, System V IPC objects under [`IPC_KEY`], its environment, working
/// directory, umask, rlimits, signal dispositions and mask, its open descriptors and those of
/// its PID 1 (by number and kind: pipe and socket inode numbers differ from call to call).
const PROBE: &str = r#"
import ctypes, json, os, re, resource, signal
KEY = 0x4b35
libc = ctypes.CDLL(None, use_errno=True)
out = {}
procs = []
for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            procs.append(pid + " " + f.read().replace(b"\0", b" ").decode(errors="replace").strip())
    except OSError as e:
        procs.append(f"{pid} <{e.strerror}>")
out["procs"] = procs
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
out["init_fds"] = fds(1)
print(json.dumps(out, sort_keys=True))
"#;

/// The System V IPC key the first call creates objects under.
const IPC_KEY: &str = "0x4b35";

/// One call changes every piece of process state it can and holds; the next call, handed to
/// the spare the init built while the first ran, and the one after the first ended, see
/// exactly what a call saw before the first ran. The first call's own view shows each change,
/// so the probe sees them where they exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_gvisor_a_spare_call_sees_nothing_of_the_call_before_it() {
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
    let spare = g.spare();
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
    // The spare the init builds once it handed the first call over (that call's PID 1 is the
    // spare it was handed to). Waited for, not assumed: the init may not have cloned it yet.
    let next = {
        let g = g.clone();
        tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            loop {
                let next = g.spares(&[spare]);
                if !next.is_empty() || started.elapsed() > TIMEOUT {
                    return next;
                }
            }
        })
        .await
        .unwrap()
    };
    assert_eq!(next.len(), 1, "{next:?}");
    let during = probe(g.clone()).await;
    // It served the call (and was reaped with it).
    let after_call = {
        let g = g.clone();
        tokio::task::spawn_blocking(move || g.processes())
            .await
            .unwrap()
    };
    assert!(
        !after_call.iter().any(|p| p.0 == next[0]),
        "the spare {} did not serve the call: {after_call:?}",
        next[0]
    );
    std::fs::write(workspace.join("done"), "").unwrap();
    let out = running.await.unwrap().unwrap();
    assert!(out.success(), "{:?} {}", out.termination, text(&out.stderr));
    let changed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let after = probe(g.clone()).await;

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
    assert_eq!(
        during["init_fds"], before["init_fds"],
        "the spare's PID 1 descriptors"
    );
    assert_eq!(after["init_fds"], before["init_fds"]);
    assert!(
        changed["procs"].to_string().contains("sleep 1000"),
        "{changed}"
    );
    // Nothing of the init's own signal mask (it blocks SIGCHLD for its signalfd) either.
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

/// A call that forks up to the sandbox's pids cap and holds, the case in which a spare's clone
/// would be refused. Under gVisor it never is: gVisor's own pids controller and
/// `RLIMIT_NPROC` do not refuse forks, and the host cgroup's cap (the environment's plus
/// `gvisor::HOST_TASKS`) is met by the application kernel itself, which ends the whole sandbox.
/// So no clone in the init fails with `EAGAIN`, which is why a failed spare clone is not
/// counted among the spare failures (no later call pays two clones for it). Should a gVisor
/// release refuse the fork instead, this test fails and says what to change.
#[tokio::test]
async fn under_gvisor_a_call_forking_up_to_the_pids_cap_gets_no_clone_refused() {
    if !hookbox_test_require::root("creating a pids cgroup") {
        return;
    }
    let Some(runsc) = runsc() else { return };
    const CAP: u64 = 64 + hookbox_sandbox::gvisor::HOST_TASKS;
    let cgroup = PidsCgroup::new("spare-cap", CAP);
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
        "gVisor refused a fork at the pids cap ({out:?}): a spare's clone can now fail with \
         EAGAIN too; count that as a spare failure in gvisor_init's loop and test it here"
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
/// its first spare: a call run by a spare and one run by a fresh clone (its spare killed) are
/// both confined exactly as the launcher confines a program (see `confinement.rs`).
#[tokio::test]
async fn under_gvisor_spare_and_fresh_calls_are_confined_as_every_program() {
    let Some(runsc) = runsc() else { return };
    let t = confinement_tree();
    let expected = expected_confinement(RuntimeKind::Gvisor);
    let g = Gvisor::start(&runsc, &t).await;
    let spared = g.sh(&t, CONFINEMENT).await;
    assert_eq!(confinement_lines(spared.as_bytes()), expected, "spare call");
    g.kill(g.spare());
    let fresh = g.sh(&t, CONFINEMENT).await;
    assert_eq!(confinement_lines(fresh.as_bytes()), expected, "fresh clone");
    g.stop().await;
}

/// Under gVisor a call handed to its spare and one cloned on arrival (its spare killed) both
/// run exactly the spec they were given, short or long, and read their stdin (an empty one as
/// end of file). A spare receives the call's descriptors at the lowest free numbers, which
/// include 0 (it closed the init's request socket there): whatever lands there must not cost
/// the program its stdin.
#[tokio::test]
async fn under_gvisor_spare_and_fresh_calls_run_their_spec_short_or_long_with_their_stdin() {
    let Some(runsc) = runsc() else { return };
    let t = tree(&[]);
    let g = Gvisor::start(&runsc, &t).await;
    for len in super::handover::lengths() {
        for (fresh, stdin) in [
            (false, ""),
            (false, "given\n"),
            (true, ""),
            (true, "given\n"),
        ] {
            if fresh {
                g.kill(g.spare());
            }
            let (mut spec, pad) = super::handover::padded(&t.spec, len);
            spec.runtime = RuntimeKind::Gvisor;
            assert_eq!(
                super::handover::call_with_stdin(&g.sandbox, &spec, stdin.as_bytes()).await,
                format!("{pad}|{stdin}|"),
                "spec of {len} bytes, fresh clone {fresh}"
            );
        }
    }
    g.stop().await;
}
