//! The launcher: the small single-threaded program (`hookbox-sandbox-exec`, or `hookbox
//! __sandbox-exec`) that turns a [`LaunchSpec`] into a sandboxed process.
//!
//! Sequence (each step has its own error, naming the kernel feature it needs, and reported to
//! hookbox on the status channel as its [`Stage`] and errno, see [`crate::status`]):
//! 1. read the spec from fd [`SPEC_FD`] (a launcher started early waits for it there, and reads
//!    end of file if hookbox went away first: `early_spec`); arm `PR_SET_PDEATHSIG` and check
//!    the parent is alive;
//! 2. join the environment's cgroups (pids, memory);
//! 3. optionally `setns` into an inherited network namespace ([`Network::Join`]);
//! 4. with an [`Identity`] (hookbox runs as host root): stage the host paths the sandbox needs
//!    in a private mount namespace under a world-traversable `/tmp`, then become that
//!    unprivileged uid/gid (`stage_host_paths`, `drop_identity`);
//!    then `unshare` user, mount, PID, IPC and UTS namespaces; map uid/gid 0 to our own (the
//!    unprivileged identity when there is one);
//! 5. fork: the child is PID 1 of the new PID namespace ("init"). Without a network namespace
//!    to join, the launcher then creates the sandbox's own (owned by the new user namespace,
//!    `lo` up) while the init builds the root, and hands it to the init (`make_network`). The
//!    launcher waits for the init and exits with its status; if the launcher is killed
//!    (supervise's timeout), init gets SIGKILL through its parent-death signal, and when init
//!    dies the kernel kills the whole namespace;
//! 6. init: `setsid` (no controlling terminal, so no TIOCSTI), builds a tmpfs root with
//!    read-only host binds, minimal `/dev`, fresh `/proc`, the environment's directories, then
//!    `pivot_root`, remounts `/` read-only, joins the network namespace the launcher made (when
//!    there is one), sets rlimits, Landlock and seccomp;
//! 7. init forks the program (so init can reap orphans), execs it, and exits with its status.
//!
//! A warm sandbox ([`LaunchSpec::warm`]) runs steps 1-6 once, and also sets once what no call
//! can change (`confine_once`: the capability bounding set, and the limits that do not bound
//! the init's own work); its init then serves calls from the socket at [`WARM_FD`] (`serve`),
//! each in a call host (`call_host`): a process kept in its own PID, mount and IPC
//! namespaces with its own `/proc` and `/dev/shm`, which runs one call after another. Each
//! call's program sets its own descriptor and process limits, Landlock and seccomp before its
//! `execve`; the host reports its exit status on the call's status channel and leaves nothing
//! of it for the next call. (gVisor's init, `gvisor_init`, runs its calls in call hosts too.)
//!
//! This module must stay free of threads and async: `unshare(CLONE_NEWUSER)` refuses
//! multithreaded callers and `fork` in a threaded process is unsafe. It knows nothing of hooks.
//!
//! Why one file of about a thousand lines: it is one program, read in the order it runs (the
//! numbered steps above, whose functions follow in that order, then the mount, device and
//! confinement helpers they share), and its steps share the spec, the status channel and the
//! stage of each failure; split, a reader would follow one launch across files. The kernel
//! mechanisms it applies that stand alone are files of their own ([`crate::seccomp`],
//! [`crate::cgroup`], [`crate::status`], [`crate::handoff`]).

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::Signal;
use nix::unistd::{ForkResult, Pid};

use crate::error::{LaunchFailure, Stage};
use crate::seccomp;
use crate::spec::{
    EXIT_EXEC_FAILED, EXIT_SETUP_FAILED, Identity, Isolation, LaunchSpec, NETNS_FD, Network,
    SPEC_FD, STAGE_MARK, STATUS_FD, WARM_FD,
};
use crate::status::report;

/// Where an unprivileged launch stages its host paths: a fresh tmpfs over `/tmp` in the
/// launcher's private mount namespace (the host never sees it). `/tmp` is chosen because every
/// system has it and every uid may traverse it, which the data dir's parents need not allow.
const STAGE_DIR: &str = "/tmp";

pub use crate::error::LaunchError;

pub(crate) type Result<T> = std::result::Result<T, LaunchError>;

/// Entry point of the namespaces launcher (see [`crate::launcher_main`], which also dispatches
/// to gVisor's init and wrapper). Never returns on success (the program is exec'd or its status
/// becomes ours); on failure, reports on [`STATUS_FD`] and returns the exit code.
pub(crate) fn main() -> i32 {
    let mut status = status_pipe();
    match run(&mut status) {
        Ok(code) => code,
        Err(err) => {
            report(&mut status, &err.failure());
            EXIT_SETUP_FAILED
        }
    }
}

/// Takes the status fd if it is there, marking it close-on-exec so the program never sees it.
fn status_pipe() -> Option<File> {
    // SAFETY: fcntl on a possibly-closed fd number only reads flags; it fails cleanly with EBADF.
    let flags = unsafe { libc::fcntl(STATUS_FD, libc::F_GETFD) };
    if flags < 0 {
        return None;
    }
    // SAFETY: STATUS_FD is open (checked above) and handed to us by our parent for our sole use;
    // taking ownership here is the only place it is owned.
    let fd = unsafe { OwnedFd::from_raw_fd(STATUS_FD) };
    let _ = rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC);
    Some(File::from(fd))
}

/// Records that `name` just ended, when the spec asks for stage timings.
pub(crate) fn stage(spec: &LaunchSpec, status: &mut Option<File>, name: &str) {
    if spec.stage_timings {
        stage_at(spec, status, name, monotonic_ns());
    }
}

/// Records that `name` ended at `ns` ([`monotonic_ns`]), when the spec asks for stage timings.
pub(crate) fn stage_at(spec: &LaunchSpec, status: &mut Option<File>, name: &str, ns: i128) {
    if !spec.stage_timings {
        return;
    }
    if let Some(file) = status {
        let _ = file.write_all(format!("{STAGE_MARK}{name} {ns}\n").as_bytes());
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock stage timings are read on, on both sides of the
/// launch. Through libc, whose vDSO entry is found as the process starts, so a process forked
/// from the init finds it ready (rustix looks its own up at its first use, which was in every
/// call host) and a program clone may read it too: no memory written, async-signal-safe.
pub fn monotonic_ns() -> i128 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes only to `now`; CLOCK_MONOTONIC is always there, so it cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec)
}

/// Reads the launch spec at [`SPEC_FD`]: a memfd, or, for a launcher started before its spec
/// was known ([`crate::early`]), a socket on which it waits for the spec (see [`early_spec`]).
fn read_spec() -> Result<LaunchSpec> {
    let fd = spec_fd()?;
    let is_socket = rustix::fs::fstat(&fd).is_ok_and(|stat| {
        rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Socket
    });
    match is_socket {
        true => early_spec(fd),
        false => read_json_from(File::from(fd)),
    }
}

/// A spec sent to a launcher started early ([`crate::early`]): one `S` message carrying the
/// spec's sealed memfd and, for a sandbox that joins a network namespace, that namespace, which
/// is placed at [`NETNS_FD`] as if it had been given at spawn. Meanwhile the launcher holds
/// nothing it was not given (an fd of hookbox's that some library left without close-on-exec,
/// or one hookbox's own caller passed down), as a launcher given its spec closes them at once
/// ([`run`]). End of file (hookbox went away first), any other message, or a spec such a
/// launcher cannot build (a cold one, or one without isolation, which need what only a spawn
/// places) is a failure to read the spec.
fn early_spec(socket: OwnedFd) -> Result<LaunchSpec> {
    let failed = |why: &str| LaunchError::ReadSpec(why.to_owned());
    close_unagreed(true);
    let message = loop {
        match crate::fdpass::recv(&socket) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other.map_err(|e| LaunchError::ReadSpec(e.to_string()))?,
        }
    };
    if message.payload.is_empty() {
        return Err(failed("hookbox went away before sending the spec"));
    }
    if message.payload != b"S" {
        return Err(failed("not a spec message"));
    }
    let mut fds = message.fds.into_iter();
    let (Some(spec), netns, None) = (fds.next(), fds.next(), fds.next()) else {
        return Err(failed(
            "a spec message carries the spec and at most a namespace",
        ));
    };
    let spec: LaunchSpec = read_json_from(File::from(spec))?;
    if !spec.warm || spec.isolation != Isolation::Full {
        return Err(failed(
            "a launcher started early builds only warm sandboxes with full isolation",
        ));
    }
    match (&spec.network, netns) {
        (Network::Isolated, None) => {}
        (Network::Join, Some(netns)) => place_netns(netns)?,
        _ => return Err(failed("the spec's network and the namespace sent disagree")),
    }
    Ok(spec)
}

/// Puts `netns` (received close-on-exec, wherever the kernel put it: maybe at NETNS_FD itself,
/// which [`early_spec`] freed) at [`NETNS_FD`] without close-on-exec, where [`run`] takes it.
fn place_netns(netns: OwnedFd) -> Result<()> {
    use std::os::fd::IntoRawFd;
    let placing =
        |e: std::io::Error| LaunchError::ReadSpec(format!("placing the network namespace: {e}"));
    if netns.as_raw_fd() == NETNS_FD {
        rustix::io::fcntl_setfd(&netns, rustix::io::FdFlags::empty())
            .map_err(|e| placing(e.into()))?;
        // Owned from now on by `run`, which takes NETNS_FD.
        let _ = netns.into_raw_fd();
        return Ok(());
    }
    // SAFETY: dup2 onto NETNS_FD, which is free (closed by early_spec and not `netns`); the copy
    // has no close-on-exec, as a namespace placed at spawn would not. `netns` is closed after.
    if unsafe { libc::dup2(netns.as_raw_fd(), NETNS_FD) } < 0 {
        return Err(placing(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Closes every descriptor from [`NETNS_FD`] up but the warm socket at [`WARM_FD`] (when
/// `keep_warm`): nothing of the hookbox process beyond the agreed fds may reach the sandbox, even
/// an fd some library forgot to mark close-on-exec or one hookbox's own caller passed down.
fn close_unagreed(keep_warm: bool) {
    let max = libc::c_uint::MAX;
    // SAFETY: close_range only closes descriptors; those it closes are not ours to keep (a
    // joined netns is consumed before this, an early launcher's comes after).
    unsafe {
        if keep_warm {
            let (netns, warm) = (NETNS_FD as libc::c_uint, WARM_FD as libc::c_uint);
            libc::syscall(libc::SYS_close_range, netns, warm - 1, 0);
            libc::syscall(libc::SYS_close_range, warm + 1, max, 0);
        } else {
            libc::syscall(libc::SYS_close_range, NETNS_FD as libc::c_uint, max, 0);
        }
    }
}

/// Takes [`SPEC_FD`] if it is open.
fn spec_fd() -> Result<OwnedFd> {
    // SAFETY: fcntl only reads the flags of fd 3, failing with EBADF when it is not open.
    if unsafe { libc::fcntl(SPEC_FD, libc::F_GETFD) } < 0 {
        return Err(LaunchError::ReadSpec("not open".into()));
    }
    // SAFETY: fd 3 is open (checked above) and was placed there by our parent for us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(SPEC_FD) })
}

/// Reads the JSON in the memfd at [`SPEC_FD`] (the runsc wrapper's spec).
pub(crate) fn read_json<T: serde::de::DeserializeOwned>() -> Result<T> {
    read_json_from(File::from(spec_fd()?))
}

/// Reads `file` to its end as one JSON value (a launch or call spec).
pub(crate) fn read_json_from<T: serde::de::DeserializeOwned>(mut file: File) -> Result<T> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| LaunchError::ReadSpec(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| LaunchError::ReadSpec(e.to_string()))
}

fn run(status: &mut Option<File>) -> Result<i32> {
    let mut spec = read_spec()?;
    stage(&spec, status, "spec_read");
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(LaunchError::Pdeathsig)?;
    if nix::unistd::getppid().as_raw() != spec.parent_pid {
        return Err(LaunchError::ParentGone);
    }
    match spec.isolation {
        Isolation::Full => {}
        Isolation::InsecureNone => return exec_insecure(&spec, status),
    }
    // Through `tasks` in cgroup v1: this process has one thread (see cgroup::open_self_join).
    for dir in &spec.cgroups {
        crate::cgroup::join_self(dir).map_err(|source| LaunchError::Cgroup {
            path: dir.clone(),
            source,
        })?;
    }
    stage(&spec, status, "cgroups_joined");
    let flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if spec.network == Network::Join {
        // SAFETY: NETNS_FD was placed by our parent for this launch only; we own it now.
        let netns = unsafe { OwnedFd::from_raw_fd(NETNS_FD) };
        nix::sched::setns(&netns, CloneFlags::CLONE_NEWNET).map_err(LaunchError::JoinNetwork)?;
    }
    let warm = if spec.warm {
        // SAFETY: fcntl only reads the flags of WARM_FD, failing with EBADF when it is not open.
        if unsafe { libc::fcntl(WARM_FD, libc::F_GETFD) } < 0 {
            return Err(LaunchError::WarmSocket(std::io::Error::last_os_error()));
        }
        // SAFETY: WARM_FD is open (checked above) and was placed there by our parent for us.
        let socket = unsafe { OwnedFd::from_raw_fd(WARM_FD) };
        let _ = rustix::io::fcntl_setfd(&socket, rustix::io::FdFlags::CLOEXEC);
        Some(socket)
    } else {
        None
    };
    // Consumed by now: the joined netns.
    close_unagreed(warm.is_some());
    stage(&spec, status, "network_joined");
    let staging = match spec.identity {
        Some(identity) => {
            let staging = stage_host_paths(&mut spec)?;
            stage(&spec, status, "host_paths_staged");
            drop_identity(identity, spec.parent_pid)?;
            stage(&spec, status, "identity_dropped");
            Some(staging)
        }
        None => None,
    };
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    nix::sched::unshare(flags).map_err(LaunchError::Unshare)?;
    stage(&spec, status, "namespaces_created");
    write_id_map("/proc/self/setgroups", "deny")?;
    write_id_map("/proc/self/uid_map", &format!("0 {uid} 1"))?;
    write_id_map("/proc/self/gid_map", &format!("0 {gid} 1"))?;
    stage(&spec, status, "id_maps_written");
    // A fresh network namespace, the costliest of the namespaces to create, is made by this
    // process after the fork, while the init builds the root (`make_network`).
    let network = match spec.network {
        Network::Isolated => Some(crate::fdpass::pair().map_err(LaunchError::NetworkHandover)?),
        Network::Join => None,
    };

    // SAFETY: this process is single-threaded (the launcher binary never spawns threads), so the
    // child may run arbitrary code after fork.
    match unsafe { nix::unistd::fork() }.map_err(LaunchError::Fork)? {
        ForkResult::Child => {
            // The host's mount tree is no business of the sandbox's.
            drop(staging);
            let mut network = network.map(|(launcher_end, init_end)| {
                drop(launcher_end);
                init_end
            });
            let code = match init(&spec, status, warm, &mut network) {
                Ok(code) => code,
                Err(err) => {
                    report(status, &err.failure());
                    EXIT_SETUP_FAILED
                }
            };
            drop(network);
            std::process::exit(code);
        }
        ForkResult::Parent { child } => {
            if let Some((launcher_end, init_end)) = network {
                drop(init_end);
                keep_off_the_inits_cpu(child);
                if let Err(err) = make_network(&launcher_end) {
                    report(status, &err.failure());
                }
                // Only now may the init read end of file, and fail after the report above.
                drop(launcher_end);
            }
            // The program must not inherit our copy of the status pipe through init; init has
            // its own. Dropping ours means EOF arrives when init and the program are done.
            drop(status.take());
            // Freed here, once the init has all it needs of this process (see StagingNamespace).
            drop(staging);
            drop(warm);
            wait_for(child)
        }
    }
}

/// Creates the sandbox's network namespace after the fork, beside the init: this process
/// creates it with `lo` up ([`new_network`]) and sends it on `socket`; the init joins it once
/// its root is built (`join_network`), before any call or program is cloned. A closed socket at
/// the answer: the init ended first, and has said why. Either side reports its own failure on
/// the status channel before it closes its end of `socket`, so the other side's failure (end
/// of file), reported after, never comes first.
fn make_network(socket: &OwnedFd) -> Result<()> {
    use std::os::fd::AsFd;
    let netns = new_network()?;
    match crate::fdpass::send(socket.as_fd(), b"N", &[netns.as_fd()]) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPIPE | libc::ECONNRESET)) => Ok(()),
        sent => sent.map_err(LaunchError::NetworkHandover),
    }
}

/// Moves this process to another CPU when the kernel queued the init on this one; best effort
/// (nothing is lost if it fails). A child queued behind its running parent stays there: the
/// init would wait for this process to finish the network namespace, the two running one after
/// the other beside an idle CPU. But the kernel puts a forked child on its parent's CPU only at
/// times (14 and 8 of 30 traced launches, in two traces), and elsewhere at others, where moving
/// this process away would take it onto the init's (as session 53's unconditional move did, 16
/// of 30 times in the first trace). So this process first reads where the init is queued
/// ([`cpu_of`]) and moves only away from it. Only this process's own CPUs change, never the
/// init's: the kernel keeps a mask set by `sched_setaffinity` for every process forked after,
/// and this process forks nothing more.
fn keep_off_the_inits_cpu(init: Pid) {
    let (Ok(here), Some(there)) = (nix::sched::sched_getcpu(), cpu_of(init)) else {
        return;
    };
    if here == there {
        move_off_this_cpu();
    }
}

/// The CPU process `pid` last ran on or, not run yet, is queued on: field 39 of its `stat` line.
/// Read right after the fork, before the init's `pivot_root` (which moves this process's root
/// too) could change what `/proc` names; a wrong answer only costs the move.
fn cpu_of(pid: Pid) -> Option<usize> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // After the command, which is in parentheses and may hold any byte (not UTF-8 either),
    // fields 3 onwards, in ASCII.
    let close = stat.iter().rposition(|byte| *byte == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    rest.split_ascii_whitespace().nth(39 - 3)?.parse().ok()
}

/// Moves this process to another CPU it may run on, if there is one, and leaves it free to run
/// anywhere again.
fn move_off_this_cpu() {
    use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
    let me = Pid::from_raw(0);
    let (Ok(allowed), Ok(here)) = (sched_getaffinity(me), nix::sched::sched_getcpu()) else {
        return;
    };
    let mut elsewhere = allowed;
    if elsewhere.unset(here).is_err() {
        return;
    }
    let others = (0..CpuSet::count()).any(|cpu| elsewhere.is_set(cpu).unwrap_or(false));
    // The first call moves this process before it returns; the second only widens the mask.
    if others && sched_setaffinity(me, &elsewhere).is_ok() {
        let _ = sched_setaffinity(me, &allowed);
    }
}

/// Creates a network namespace for this process and returns it, its `lo` up. This process is in
/// the sandbox's user namespace by now, so the new namespace is owned by it, as it would be had
/// the `unshare` before the fork created it.
fn new_network() -> Result<OwnedFd> {
    nix::sched::unshare(CloneFlags::CLONE_NEWNET).map_err(LaunchError::NetworkNamespace)?;
    let socket = loopback_up().map_err(LaunchError::Loopback)?;
    // SAFETY: SIOCGSKNS takes no argument and returns a new descriptor of the socket's network
    // namespace (this process's), opened close-on-exec, which we own from here on.
    let netns = unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGSKNS) };
    if netns < 0 {
        return Err(LaunchError::NetworkHandover(std::io::Error::last_os_error()));
    }
    // SAFETY: `netns` is a descriptor the kernel just opened for us.
    Ok(unsafe { OwnedFd::from_raw_fd(netns) })
}

/// Waits for the network namespace the launcher made ([`make_network`]) and joins it.
fn join_network(socket: &OwnedFd) -> Result<()> {
    let message = crate::fdpass::recv(socket).map_err(LaunchError::NetworkHandover)?;
    if message.payload.is_empty() {
        return Err(LaunchError::NetworkHandover(std::io::Error::other(
            "the launcher ended before it made the network namespace",
        )));
    }
    let mut fds = message.fds.into_iter();
    match (fds.next(), fds.next()) {
        (Some(netns), None) => nix::sched::setns(&netns, CloneFlags::CLONE_NEWNET)
            .map_err(|e| LaunchError::NetworkHandover(e.into())),
        _ => Err(LaunchError::NetworkHandover(std::io::Error::other(
            "the launcher sent other than one network namespace",
        ))),
    }
}

/// Makes every host path of `spec` reachable by an unprivileged uid: in a private mount
/// namespace (still as host root), each bind and file source is opened without following
/// symlinks, a tmpfs is mounted over [`STAGE_DIR`], and each source is bound at `STAGE_DIR/<n>`
/// through its descriptor (so sources beneath `/tmp` itself, or under a 0700 home, work). The
/// spec's paths are rewritten to the staged ones, and the new root is mounted at
/// `STAGE_DIR/root`. The mounts made here belong to the host's user namespace, so the sandbox
/// later finds them locked: it cannot unmount or reveal what lies beneath them.
///
/// Returns that private namespace, held open so that the `unshare` of the sandbox's own
/// namespaces does not free it (see [`StagingNamespace`]).
fn stage_host_paths(spec: &mut LaunchSpec) -> Result<StagingNamespace> {
    use rustix::fs::{Mode, OFlags};
    let stage_err = |path: &Path| {
        let path = path.display().to_string();
        move |source: std::io::Error| LaunchError::Stage { path, source }
    };
    nix::sched::unshare(CloneFlags::CLONE_NEWNS).map_err(LaunchError::Unshare)?;
    let staging = StagingNamespace::hold()?;
    make_private()?;
    let sources: Vec<&mut PathBuf> = spec
        .binds
        .iter_mut()
        .map(|b| &mut b.source)
        .chain(spec.files.iter_mut().map(|f| &mut f.source))
        .collect();
    let mut opened = Vec::with_capacity(sources.len());
    for source in sources {
        let fd = rustix::fs::open(
            source.as_path(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| stage_err(source)(e.into()))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| stage_err(source)(e.into()))?;
        let is_dir = match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
            rustix::fs::FileType::Directory => true,
            rustix::fs::FileType::RegularFile => false,
            _ => {
                return Err(stage_err(source)(std::io::Error::other(
                    "not a directory or regular file",
                )));
            }
        };
        opened.push((fd, is_dir, source));
    }
    let stage = Path::new(STAGE_DIR);
    nix::mount::mount(
        Some("tmpfs"),
        stage,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=64k"),
    )
    .map_err(mount_err("staging tmpfs", stage))?;
    for (n, (fd, is_dir, source)) in opened.into_iter().enumerate() {
        let target = stage.join(n.to_string());
        if is_dir {
            std::fs::create_dir(&target).map_err(stage_err(&target))?;
        } else {
            File::create(&target).map_err(stage_err(&target))?;
        }
        let through = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        nix::mount::mount(
            Some(&through),
            &target,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(mount_err(&format!("bind of {}", source.display()), &target))?;
        *source = target;
    }
    let root = stage.join("root");
    std::fs::create_dir(&root).map_err(stage_err(&root))?;
    spec.mountpoint = root;
    Ok(staging)
}

/// The private mount namespace [`stage_host_paths`] works in, a copy of the host's mount tree,
/// held by a descriptor of it (opened as host root, close-on-exec).
///
/// Whoever frees a mount namespace unmounts its tree and waits for an expedited RCU grace
/// period (tens of microseconds to a quarter of a millisecond here). Left to itself, this one
/// would be freed by the `unshare` that makes the sandbox's namespaces, on the way to the
/// init's fork; held, it is freed where the launcher drops it, once the init has everything it
/// needs from the launcher. The init drops its inherited copy first thing: nothing of the
/// sandbox keeps a handle on the host's mount tree (joining it would take capabilities the
/// sandbox's user namespace does not have, all the same).
struct StagingNamespace {
    _held: OwnedFd,
}

impl StagingNamespace {
    fn hold() -> Result<Self> {
        let path = "/proc/self/ns/mnt";
        std::fs::File::open(path)
            .map(|file| Self { _held: file.into() })
            .map_err(|source| LaunchError::Stage {
                path: path.to_owned(),
                source,
            })
    }
}

/// Becomes `identity` for good (real, effective and saved ids; no supplementary groups), keeps
/// `/proc/self` writable for the id maps (a credential change makes the process non-dumpable)
/// and re-arms the parent-death signal, which a credential change clears.
fn drop_identity(identity: Identity, parent_pid: i32) -> Result<()> {
    let Identity { uid, gid } = identity;
    let err = |source| LaunchError::DropIdentity { uid, gid, source };
    nix::unistd::setgroups(&[]).map_err(err)?;
    let g = nix::unistd::Gid::from_raw(gid);
    nix::unistd::setresgid(g, g, g).map_err(err)?;
    let u = nix::unistd::Uid::from_raw(uid);
    nix::unistd::setresuid(u, u, u).map_err(err)?;
    // SAFETY: PR_SET_DUMPABLE takes an integer flag and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) } < 0 {
        return Err(err(nix::Error::last()));
    }
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(LaunchError::Pdeathsig)?;
    if nix::unistd::getppid().as_raw() != parent_pid {
        return Err(LaunchError::ParentGone);
    }
    Ok(())
}

fn write_id_map(file: &'static str, content: &str) -> Result<()> {
    std::fs::write(file, content).map_err(|source| LaunchError::IdMap { file, source })
}

/// How a reaped child ended, decoded from its raw wait status. nix's `WaitStatus` cannot hold a
/// real-time signal: its `waitpid` reaps such a child and then fails with `EINVAL`, losing it.
pub(crate) enum Ended {
    Exited(i32),
    /// The signal's number, and whether the child dumped core.
    Signaled(i32, bool),
    /// Stopped or continued (not asked for; skipped).
    Other,
}

/// `waitpid(pid, 0)` (`-1` for any child), again after `EINTR`: the pid reaped and how it ended.
pub(crate) fn wait_raw(pid: libc::pid_t) -> std::result::Result<(libc::pid_t, Ended), nix::Error> {
    loop {
        // Without `WNOHANG`, waitpid returns only once a child ended.
        if let Some(reaped) = wait_with(pid, 0)? {
            return Ok(reaped);
        }
    }
}

/// `waitpid(pid, flags)`, again after `EINTR`: the pid reaped and how it ended, or None when
/// `WNOHANG` found no child ended yet.
pub(crate) fn wait_with(
    pid: libc::pid_t,
    flags: libc::c_int,
) -> std::result::Result<Option<(libc::pid_t, Ended)>, nix::Error> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid writes only to `status`, a valid c_int.
        let reaped = unsafe { libc::waitpid(pid, &mut status, flags) };
        if reaped < 0 {
            match nix::Error::last() {
                nix::Error::EINTR => continue,
                err => return Err(err),
            }
        }
        if reaped == 0 {
            return Ok(None);
        }
        let ended = if libc::WIFEXITED(status) {
            Ended::Exited(libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            Ended::Signaled(libc::WTERMSIG(status), libc::WCOREDUMP(status))
        } else {
            Ended::Other
        };
        return Ok(Some((reaped, ended)));
    }
}

/// Whether a polled descriptor has anything to say (readable, hung up, or in error).
pub(crate) fn ready(polled: &nix::poll::PollFd<'_>) -> bool {
    polled.revents().is_some_and(|r| !r.is_empty())
}

/// Waits for `child` and turns its end into an exit code (128 + signal when killed).
fn wait_for(child: Pid) -> Result<i32> {
    loop {
        match wait_raw(child.as_raw()).map_err(LaunchError::Wait)? {
            (_, Ended::Exited(code)) => return Ok(code),
            (_, Ended::Signaled(signal, _)) => return Ok(128 + signal),
            (_, Ended::Other) => continue,
        }
    }
}

/// PID 1 of the sandbox: builds the filesystem and policies, runs the program, reaps orphans.
fn init(
    spec: &LaunchSpec,
    status: &mut Option<File>,
    warm: Option<OwnedFd>,
    network: &mut Option<OwnedFd>,
) -> Result<i32> {
    // The parent-death signal is cleared by fork; our parent is the launcher.
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(LaunchError::Pdeathsig)?;
    nix::unistd::setsid().map_err(LaunchError::Setsid)?;
    stage(spec, status, "init_forked");
    build_root(spec)?;
    stage(spec, status, "root_built");
    nix::unistd::sethostname(&spec.hostname).map_err(LaunchError::Hostname)?;
    // The socket stays open until the namespace is joined: a failure before is reported first.
    if let Some(socket) = network.as_ref() {
        join_network(socket)?;
    }
    *network = None;
    stage(spec, status, "network_up");
    if let Some(socket) = warm {
        confine_once(spec)?;
        let filters = match spec.one_shot {
            true => crate::call_host::Filters::whole(seccomp::build()?),
            false => crate::call_host::Filters::stacked(seccomp::build_stacked()?),
        };
        return serve(spec, status, socket, &filters);
    }
    confine_and_run(spec, status, &seccomp::build()?)
}

/// What a warm sandbox's init does once for all its calls, because no call can change it
/// ([`LaunchSpec::with_call`] takes only the program, its environment and working directory):
/// the capability bounding set ([`drop_capabilities`]) and the limits that do not bound the
/// init's own work ([`set_fixed_limits`]). Each call and its program inherit both across the
/// clone and the exec; the init keeps its effective capabilities (the bounding set only limits
/// what an exec may gain), which it needs to clone each call's namespaces and mount its `/proc`
/// and `/dev/shm`.
pub(crate) fn confine_once(spec: &LaunchSpec) -> Result<()> {
    set_fixed_limits(spec)?;
    drop_capabilities(spec.runtime)
}

/// The last steps of a cold launch: working directory, limits, capabilities, Landlock,
/// seccomp; then the program is forked and exec'd, and its status returned once it ended
/// (orphans reaped meanwhile). A warm sandbox's calls do the same in their call host
/// ([`crate::call_host`]).
fn confine_and_run(
    spec: &LaunchSpec,
    status: &mut Option<File>,
    programs: &seccomp::Programs,
) -> Result<i32> {
    nix::unistd::chdir(spec.cwd.as_str()).map_err(|source| LaunchError::Chdir {
        path: spec.cwd.clone(),
        source,
    })?;
    confine_once(spec)?;
    set_call_limits(spec)?;
    stage(spec, status, "limits_set");
    // gVisor has no Landlock (ENOSYS); its kernel is the wall, with the read-only binds.
    if spec.runtime == crate::spec::RuntimeKind::Namespaces {
        restrict_filesystem(spec)?;
        stage(spec, status, "landlock_applied");
    }
    let (path, argv, envp) = exec_args(spec)?;
    seccomp::install(programs)?;
    stage(spec, status, "seccomp_installed");

    // The program is started with posix_spawn (a vfork-like clone, then exec) rather than
    // fork: no copy of this process's page tables.
    stage(spec, status, "program_forked");
    let (child, direct) = match start_program(spec, &path, &argv, &envp) {
        Ok(started) => started,
        Err(err) => {
            report(status, &exec_failure(spec, err));
            return Ok(EXIT_EXEC_FAILED);
        }
    };
    drop(status.take());
    reap_until(child, direct)
}

/// Starts the program: the spec's [`LaunchSpec::direct`] words when there are some and they can
/// run exactly as `/bin/sh -c` would run them ([`crate::direct`]), else `argv` (`path`, `argv`,
/// `envp` from [`exec_args`]). Also says whether it was the direct one, whose signal death
/// [`reap_until`] reports as the shell would.
fn start_program(
    spec: &LaunchSpec,
    path: &CString,
    argv: &[CString],
    envp: &[CString],
) -> nix::Result<(Pid, bool)> {
    let direct = spec
        .direct
        .as_deref()
        .and_then(|words| crate::direct::prepare(words, &spec.env));
    // A failed spawn started nothing: the shell then runs the line and says why it cannot.
    if let Some(direct) = direct
        && let Ok(child) = spawn_program(&direct.path, &direct.argv, &direct.envp)
    {
        return Ok((child, true));
    }
    spawn_program(path, argv, envp).map(|child| (child, false))
}

/// Starts the sandboxed program with SIGPIPE at its default (Rust's runtime ignores it, an
/// ignored disposition survives exec, and shell pipelines such as `yes | head` rely on the
/// default) and no signal blocked (whatever the launcher inherited). An exec failure is
/// returned here, from the parent.
fn spawn_program(path: &CString, argv: &[CString], envp: &[CString]) -> nix::Result<Pid> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
    use nix::sys::signal::SigSet;
    let mut attr = PosixSpawnAttr::init()?;
    let mut defaults = SigSet::empty();
    defaults.add(Signal::SIGPIPE);
    defaults.add(Signal::SIGCHLD);
    attr.set_sigdefault(&defaults)?;
    attr.set_sigmask(&SigSet::empty())?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK,
    )?;
    let actions = PosixSpawnFileActions::init()?;
    nix::spawn::posix_spawn(path.as_c_str(), &actions, &attr, argv, envp)
}

/// PID 1 of a warm sandbox: says it is ready, then hands each call to one of its call hosts
/// ([`crate::call_host`]) until hookbox closes the socket, and exits once the last host ended.
/// Hosts are its only children; `call_host::serve` reaps them.
fn serve(
    spec: &LaunchSpec,
    status: &mut Option<File>,
    socket: OwnedFd,
    filters: &crate::call_host::Filters,
) -> Result<i32> {
    use std::os::fd::AsFd;
    stage(spec, status, "warm_ready");
    crate::fdpass::send(socket.as_fd(), b"R", &[]).map_err(LaunchError::WarmSocket)?;
    // Setup is over: the status pipe reaches EOF for hookbox; each call has its own.
    drop(status.take());
    crate::call_host::serve(spec, socket, filters, None)?;
    crate::call_host::wait_all();
    Ok(0)
}

/// Ends a call host (PID 1 of its namespaces, a clone of the warm init) with `code`, without
/// `exit`'s handlers: they would run glibc's and Rust's teardown (`_dl_fini`, the stdio flush),
/// whose code and data a call has not touched yet, so every call faulted their pages in just to
/// end (about 7 of the 50 page faults of a call's process under namespaces; a fault is far
/// dearer under gVisor). Nothing is lost: a call writes only unbuffered (its status channel
/// through a `File`, the shell's signal line through `std::io::stderr`), never through Rust's
/// buffered stdout.
pub(crate) fn end_call(code: i32) -> ! {
    // SAFETY: _exit ends this process at once; nothing of ours is left buffered (see above).
    unsafe { libc::_exit(code) }
}

/// Forks (a fork-like `clone`: no new stack, no shared memory) into fresh PID, mount and IPC
/// namespaces, as every call host runs: 0 in the child, its pid in this process, negative on
/// failure.
pub(crate) fn clone_call() -> libc::c_long {
    let flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    // SAFETY: a fork-like clone of this single-threaded process.
    unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    }
}

/// Why a warm call could not be cloned, for its reply socket.
pub(crate) fn call_clone_failure(err: std::io::Error) -> LaunchFailure {
    LaunchFailure::new(
        Stage::CallClone,
        err.raw_os_error(),
        format!("cannot start the call (clone PID/mount/IPC namespaces): {err}"),
    )
}

/// Why the program could not be executed.
pub(crate) fn exec_failure(spec: &LaunchSpec, err: nix::Error) -> LaunchFailure {
    let program = spec.argv.first().map(String::as_str).unwrap_or_default();
    LaunchFailure::new(
        Stage::Exec,
        Some(err as i32),
        format!("cannot execute {program}: {err}"),
    )
}

/// A call's own `/proc` (showing only its PID namespace) and `/dev/shm`, over the warm
/// sandbox's (in the call's private copy of its mounts).
pub(crate) fn remount_per_call() -> Result<()> {
    nix::mount::mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(mount_err("proc (PID namespace)", Path::new("/proc")))?;
    mount_shm()
}

/// A fresh `/dev/shm` over whatever is there.
pub(crate) fn mount_shm() -> Result<()> {
    nix::mount::mount(
        Some("tmpfs"),
        "/dev/shm",
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=1777,size=64m"),
    )
    .map_err(mount_err("tmpfs /dev/shm", Path::new("/dev/shm")))
}

/// Reaps every child (orphans are re-parented to init) until `program` ends, and returns its
/// exit status (128 + N when killed by signal N, as the shell reports it). A `direct` program
/// (run without the shell, see [`start_program`]) killed by a signal also gets the line the
/// shell would have written on stderr ([`crate::direct::signal_message`]).
fn reap_until(program: Pid, direct: bool) -> Result<i32> {
    loop {
        match wait_raw(-1).map_err(LaunchError::Wait)? {
            (pid, Ended::Exited(code)) if pid == program.as_raw() => return Ok(code),
            (pid, Ended::Signaled(signal, core_dumped)) if pid == program.as_raw() => {
                if direct && let Some(line) = crate::direct::signal_message(signal, core_dumped) {
                    let _ = std::io::stderr().write_all(line.as_bytes());
                }
                return Ok(128 + signal);
            }
            _ => continue,
        }
    }
}

pub(crate) type ExecArgs = (CString, Vec<CString>, Vec<CString>);

pub(crate) fn exec_args(spec: &LaunchSpec) -> Result<ExecArgs> {
    let argv = spec
        .argv
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(|_| LaunchError::Nul))
        .collect::<Result<Vec<_>>>()?;
    let envp = spec
        .env
        .iter()
        .map(|(k, v)| CString::new(format!("{k}={v}")).map_err(|_| LaunchError::Nul))
        .collect::<Result<Vec<_>>>()?;
    let path = argv.first().cloned().ok_or(LaunchError::Nul)?;
    Ok((path, argv, envp))
}

fn exec(path: &CString, argv: &[CString], envp: &[CString]) -> nix::Error {
    // Rust's runtime ignores SIGPIPE; an ignored disposition survives exec, and shell pipelines
    // (`yes | head`) rely on the default.
    // SAFETY: restoring the default disposition installs no handler code.
    let _ =
        unsafe { nix::sys::signal::signal(Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl) };
    match nix::unistd::execve(path, argv, envp) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

fn exec_insecure(spec: &LaunchSpec, status: &mut Option<File>) -> Result<i32> {
    // No setsid: the launcher already leads the process group that supervise kills.
    let cwd = spec.tree.join(spec.cwd.trim_start_matches('/'));
    nix::unistd::chdir(&cwd).map_err(|source| LaunchError::Chdir {
        path: cwd.display().to_string(),
        source,
    })?;
    let (path, argv, envp) = exec_args(spec)?;
    let err = exec(&path, &argv, &envp);
    report(status, &exec_failure(spec, err));
    Ok(EXIT_EXEC_FAILED)
}

fn mount_err(what: &str, target: &Path) -> impl FnOnce(nix::Error) -> LaunchError {
    let what = what.to_owned();
    let target = target.display().to_string();
    move |source| LaunchError::Mount {
        what,
        target,
        source,
    }
}

fn prepare_err(path: &Path) -> impl FnOnce(std::io::Error) -> LaunchError {
    let path = path.display().to_string();
    move |source| LaunchError::Prepare { path, source }
}

/// Binds `source` at `target` (which must exist) and makes it read-only unless `writable`,
/// keeping the flags the kernel locks for mounts that came from a more privileged namespace.
pub(crate) fn bind(source: &Path, target: &Path, writable: bool) -> Result<()> {
    nix::mount::mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(mount_err(&format!("bind of {}", source.display()), target))?;
    let mut flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if !writable {
        flags |= MsFlags::MS_RDONLY;
    }
    if let Ok(stat) = nix::sys::statvfs::statvfs(target) {
        use nix::sys::statvfs::FsFlags;
        let locked = [
            (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
            (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
            (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
            (FsFlags::ST_RDONLY, MsFlags::MS_RDONLY),
        ];
        for (have, keep) in locked {
            if stat.flags().contains(have) {
                flags |= keep;
            }
        }
    }
    nix::mount::mount(None::<&str>, target, None::<&str>, flags, None::<&str>)
        .map_err(mount_err("read-only remount", target))
}

/// Creates an empty mountpoint of the same kind as `source` at `target`.
fn mountpoint_for(source: &Path, target: &Path) -> Result<bool> {
    match std::fs::metadata(source) {
        Ok(meta) => {
            mountpoint(target, meta.is_dir())?;
            Ok(true)
        }
        Err(_) => Ok(false),
    }
}

/// Creates what a bind of a directory (`is_dir`) or of a file lands on at `target`.
fn mountpoint(target: &Path, is_dir: bool) -> Result<()> {
    match is_dir {
        true => std::fs::create_dir_all(target).map_err(prepare_err(target)),
        false => create_file(target),
    }
}

/// Creates the empty file `target` on the root tmpfs, and its parent directories if they are
/// missing: one system call where the parent exists (most `/etc` entries), instead of a
/// `mkdir` failing with `EEXIST` and a `stat` before each.
fn create_file(target: &Path) -> Result<()> {
    match File::create(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(prepare_err(parent))?;
            }
            File::create(target).map_err(prepare_err(target))?;
        }
        created => {
            created.map_err(prepare_err(target))?;
        }
    }
    Ok(())
}

/// Puts host path `host` at `target` in the new root: a link as the same link, anything else
/// bound read-only; nothing when the host has no such path.
fn mirror_read_only(host: &Path, target: &Path) -> Result<()> {
    match std::fs::symlink_metadata(host) {
        Ok(meta) if meta.file_type().is_symlink() => {
            let link = std::fs::read_link(host).map_err(prepare_err(host))?;
            std::os::unix::fs::symlink(link, target).map_err(prepare_err(target))
        }
        // Not a link: what `metadata` would say too.
        Ok(meta) => {
            mountpoint(target, meta.is_dir())?;
            bind(host, target, false)
        }
        Err(_) => Ok(()),
    }
}

/// Makes sure a regular file stands at `target` for a file bind: an existing one (possibly in a
/// read-only bind, which a bind still covers) or a new one on the root tmpfs.
fn file_mountpoint(target: &Path) -> Result<()> {
    match std::fs::symlink_metadata(target) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(LaunchError::Prepare {
            path: target.display().to_string(),
            source: std::io::Error::other("not a regular file"),
        }),
        Err(_) => create_file(target),
    }
}

/// Stops mount events propagating between this mount namespace and the one it was copied from.
pub(crate) fn make_private() -> Result<()> {
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(mount_err("private propagation", Path::new("/")))
}

fn build_root(spec: &LaunchSpec) -> Result<()> {
    let root = spec.mountpoint.as_path();
    make_private()?;
    nix::mount::mount(
        Some("tmpfs"),
        root,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=4m"),
    )
    .map_err(mount_err("tmpfs root", root))?;

    for dir in &spec.host_read_only {
        mirror_read_only(Path::new(dir), &root.join(dir.trim_start_matches('/')))?;
    }

    let etc = root.join("etc");
    std::fs::create_dir_all(&etc).map_err(prepare_err(&etc))?;
    for entry in &spec.etc_entries {
        mirror_read_only(&Path::new("/etc").join(entry), &etc.join(entry))?;
    }
    let generated = crate::spec::generated_etc(&spec.hostname);
    for (name, content) in generated {
        let path = etc.join(name);
        std::fs::write(&path, content).map_err(prepare_err(&path))?;
    }
    for file in &spec.files {
        let target = root.join(file.target.trim_start_matches('/'));
        file_mountpoint(&target)?;
        bind(&file.source, &target, false)?;
    }

    build_dev(root)?;

    let proc_dir = root.join("proc");
    std::fs::create_dir_all(&proc_dir).map_err(prepare_err(&proc_dir))?;
    nix::mount::mount(
        Some("proc"),
        &proc_dir,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(mount_err("proc (PID namespace)", &proc_dir))?;

    for b in &spec.binds {
        let target = root.join(b.target.trim_start_matches('/'));
        std::fs::create_dir_all(&target).map_err(prepare_err(&target))?;
        bind(&b.source, &target, b.writable)?;
    }

    nix::unistd::chdir(root).map_err(|source| LaunchError::Chdir {
        path: root.display().to_string(),
        source,
    })?;
    // pivot_root(".", ".") stacks the old root under the new one; detaching it leaves only the
    // new tree, with no path back to the host's filesystem.
    nix::unistd::pivot_root(".", ".").map_err(LaunchError::PivotRoot)?;
    nix::mount::umount2(".", MntFlags::MNT_DETACH)
        .map_err(mount_err("old root detach", Path::new("/")))?;
    nix::unistd::chdir("/").map_err(|source| LaunchError::Chdir {
        path: "/".into(),
        source,
    })?;
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        None::<&str>,
    )
    .map_err(mount_err("read-only root remount", Path::new("/")))
}

/// A minimal `/dev`: the harmless character devices bound from the host, fd symlinks, and a
/// private `/dev/shm`.
fn build_dev(root: &Path) -> Result<()> {
    let dev = root.join("dev");
    std::fs::create_dir_all(&dev).map_err(prepare_err(&dev))?;
    nix::mount::mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755,size=64k"),
    )
    .map_err(mount_err("tmpfs /dev", &dev))?;
    for node in ["null", "zero", "full", "random", "urandom", "tty"] {
        let host = Path::new("/dev").join(node);
        let target = dev.join(node);
        if mountpoint_for(&host, &target)? {
            nix::mount::mount(
                Some(&host),
                &target,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(mount_err(&format!("bind of {}", host.display()), &target))?;
        }
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let path = dev.join(name);
        std::os::unix::fs::symlink(target, &path).map_err(prepare_err(&path))?;
    }
    let shm = dev.join("shm");
    std::fs::create_dir_all(&shm).map_err(prepare_err(&shm))?;
    nix::mount::mount(
        Some("tmpfs"),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=1777,size=64m"),
    )
    .map_err(mount_err("tmpfs /dev/shm", &shm))
}

/// Brings `lo` up in this process's network namespace; returns the socket it used.
pub(crate) fn loopback_up() -> std::io::Result<OwnedFd> {
    let socket = rustix::net::socket(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::DGRAM,
        None,
    )?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the name and writes ifru_flags of the ifreq we own.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: ifru_flags is the union member SIOCGIFFLAGS just filled in.
    unsafe {
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads the name and flags of the ifreq we own.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(socket)
}

/// Capabilities root keeps inside the sandbox (all within its own user namespace): what ordinary
/// file and process management in its own tree needs. Everything else leaves the bounding set,
/// so not even a re-exec as root gets it back; notably CAP_SYS_ADMIN and CAP_NET_ADMIN (the
/// sandbox must not reconfigure its network namespace).
const KEPT_CAPABILITIES: &[i32] = &[
    0,  // CAP_CHOWN
    1,  // CAP_DAC_OVERRIDE
    2,  // CAP_DAC_READ_SEARCH
    3,  // CAP_FOWNER
    4,  // CAP_FSETID
    5,  // CAP_KILL
    6,  // CAP_SETGID
    7,  // CAP_SETUID
    10, // CAP_NET_BIND_SERVICE
];

/// `CAP_SYSLOG`, kept under gVisor only: its kernel log is gVisor's own ("Starting gVisor..."),
/// which shows a program which kernel it runs on; the host's is never reachable there.
const CAP_SYSLOG: i32 = 34;

pub(crate) fn drop_capabilities(runtime: crate::spec::RuntimeKind) -> Result<()> {
    let gvisor = runtime == crate::spec::RuntimeKind::Gvisor;
    // CAP_LAST_CAP is 40 on current kernels; unknown numbers fail with EINVAL and are skipped.
    for cap in 0..64 {
        if KEPT_CAPABILITIES.contains(&cap) || (gvisor && cap == CAP_SYSLOG) {
            continue;
        }
        // SAFETY: PR_CAPBSET_DROP takes a capability number and touches no memory of ours.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINVAL) {
                break;
            }
            return Err(LaunchError::CapDrop { cap, source: err });
        }
    }
    Ok(())
}

/// The limits a warm sandbox's init sets once for all its calls ([`confine_once`]): they bound
/// what a program may dump, map or write, never the init's own work. `RLIMIT_CORE` is 0.
pub(crate) fn set_fixed_limits(spec: &LaunchSpec) -> Result<()> {
    let limits = &spec.limits;
    let mut pairs = vec![("RLIMIT_CORE", Resource::RLIMIT_CORE, 0)];
    if let Some(bytes) = limits.address_space_bytes {
        pairs.push(("RLIMIT_AS", Resource::RLIMIT_AS, bytes));
    }
    if let Some(bytes) = limits.file_size_bytes {
        pairs.push(("RLIMIT_FSIZE", Resource::RLIMIT_FSIZE, bytes));
    }
    apply_limits(pairs)
}

/// The limits a cold launch's init sets before its program (a warm call's program clone sets
/// the same two itself, `call_host`): `RLIMIT_NOFILE` and `RLIMIT_NPROC` would also bound a
/// warm init's own descriptors and its clones of call hosts, so [`confine_once`] leaves them.
fn set_call_limits(spec: &LaunchSpec) -> Result<()> {
    let limits = &spec.limits;
    let mut pairs = vec![("RLIMIT_NOFILE", Resource::RLIMIT_NOFILE, limits.open_files)];
    if let Some(n) = limits.nproc {
        pairs.push(("RLIMIT_NPROC", Resource::RLIMIT_NPROC, n));
    }
    apply_limits(pairs)
}

fn apply_limits(pairs: Vec<(&'static str, Resource, u64)>) -> Result<()> {
    for (name, resource, value) in pairs {
        setrlimit(resource, value, value).map_err(|source| LaunchError::Rlimit {
            resource: name,
            source,
        })?;
    }
    Ok(())
}

/// Landlock: read and execute everywhere, write only beneath the environment's writable
/// directories and the device nodes; signals and abstract sockets scoped to the sandbox.
fn restrict_filesystem(spec: &LaunchSpec) -> Result<()> {
    use landlock::{RestrictionStatus, RulesetStatus};
    let status: RestrictionStatus = ruleset(spec)?
        .restrict_self()
        .map_err(|e| LaunchError::Landlock(e.to_string()))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err(not_enforced()),
    }
}

/// [`restrict_filesystem`]'s ruleset, not applied: what a call host's program clone applies
/// with `landlock_restrict_self` ([`crate::call_host`]).
pub(crate) fn landlock_ruleset(spec: &LaunchSpec) -> Result<OwnedFd> {
    Option::<OwnedFd>::from(ruleset(spec)?).ok_or_else(not_enforced)
}

fn not_enforced() -> LaunchError {
    LaunchError::Landlock("the kernel does not enforce Landlock".into())
}

/// The rules of [`restrict_filesystem`] (paths as this process sees them now: `/dev/shm` is
/// the one mounted last).
fn ruleset(spec: &LaunchSpec) -> Result<landlock::RulesetCreated> {
    use landlock::{
        ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
        Scope, path_beneath_rules,
    };
    let abi = ABI::V6;
    let err = |e: landlock::RulesetError| LaunchError::Landlock(e.to_string());
    let writable: Vec<&str> = spec
        .binds
        .iter()
        .filter(|b| b.writable)
        .map(|b| b.target.as_str())
        .chain(["/dev/shm"])
        .collect();
    let devices = AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::IoctlDev;
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"],
            devices,
        ))
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cpu_of` reads the CPU a task is on: a thread held on each of its CPUs in turn is found on
    /// that CPU.
    #[test]
    fn cpu_of_reads_the_cpu_a_task_is_on() {
        use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
        let me = Pid::from_raw(0);
        let allowed = sched_getaffinity(me).unwrap();
        let this_thread = nix::unistd::gettid();
        let cpus: Vec<usize> = (0..CpuSet::count())
            .filter(|cpu| allowed.is_set(*cpu).unwrap_or(false))
            .collect();
        for cpu in &cpus {
            let mut only = CpuSet::new();
            only.set(*cpu).unwrap();
            sched_setaffinity(me, &only).unwrap();
            assert_eq!(cpu_of(this_thread), Some(*cpu));
        }
        sched_setaffinity(me, &allowed).unwrap();
    }

    /// `move_off_this_cpu` leaves the thread with the CPUs it had (it narrows them only for the
    /// move).
    #[test]
    fn moving_off_a_cpu_leaves_the_cpus_as_they_were() {
        use nix::sched::sched_getaffinity;
        let me = Pid::from_raw(0);
        let before = sched_getaffinity(me).unwrap();
        move_off_this_cpu();
        assert_eq!(sched_getaffinity(me).unwrap(), before);
    }
}
