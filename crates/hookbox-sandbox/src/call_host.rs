//! A warm sandbox's call hosts (namespaces runtime): processes that each run one call after
//! another, so that a call pays for its program's process and little else.
//!
//! Each call runs in its own PID, mount and IPC namespaces, with its own `/proc` and `/dev/shm`.
//! Cloning those for every call, and tearing them down when it ended, was most of what the
//! launcher cost per call. A host is such a call process, kept:
//!
//! - **The init** ([`serve`]) hands each call (the six descriptors hookbox sent, see
//!   [`crate::warm`]) to an idle host. When none is idle it clones a new one into fresh PID,
//!   mount and IPC namespaces. It keeps at most [`IDLE_HOSTS`] idle and closes the socket of
//!   any more, which ends them.
//! - **A host** first answers `H` with its own pidfd on the call's reply socket. It then changes
//!   to the call's directory and starts the program in a `vfork`-like clone ([`Plan`]). That
//!   clone confines itself (descriptor and process limits, Landlock, seccomp) before `execve`.
//!   The host stays unconfined, which it must, to reset its namespaces. The program cannot
//!   reach it: Landlock scopes ptrace and signals to the program's own domain, the bounding set
//!   leaves it no `CAP_SYS_PTRACE`, seccomp denies `ptrace`, and the host is not dumpable.
//! - **A call ends** when its program does. The host kills what is left in its PID namespace
//!   (`kill(-1, SIGKILL)`, as the kernel did when a call's PID 1 exited) and reaps it, writes the
//!   exit status, and closes the call's descriptors. It then resets what a call may leave
//!   behind: a fresh IPC namespace (System V objects, POSIX message queues), a fresh `/dev/shm`
//!   when the call used it (with the Landlock ruleset for the next call, whose rule names the new
//!   one), `/` as its directory. A call whose processes changed the host's resource limits or
//!   nice value (they share its uid, so `prlimit` can) leaves a host that serves no other call.
//!   Last, it says `I` to the init (only when it can serve again) and `X` to hookbox, in that
//!   order, so the init knows the host is idle before hookbox can send its next call.
//! - **hookbox ends a call early** (a timeout, a cancelled interaction) by shutting down its
//!   end of the reply socket. The host polls that socket while the program runs, kills the PID
//!   namespace's processes, and ends the call without an exit status, as a killed call did.
//!   A host that died says no `X`; hookbox then waits on its pidfd, which reports only once the
//!   whole PID namespace is gone.
//!
//! Single-threaded and free of async, like the launcher. gVisor's init keeps its own call
//! processes (`gvisor_init`'s spares).

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::error::LaunchFailure;
use crate::launcher::{self as l, Ended, LaunchError, Result};
use crate::seccomp::Programs;
use crate::spec::{CallSpec, EXIT_EXEC_FAILED, EXIT_MARK, EXIT_SETUP_FAILED, LaunchSpec};
use crate::status::report;

/// The most idle hosts a warm sandbox keeps. A host that becomes idle beyond them ends, so a
/// burst of concurrent calls leaves at most this many processes (each with its namespaces, its
/// `/proc` and an empty `/dev/shm`) once it is over; they count against the environment's
/// process limit (its pids cgroup) like any of its processes.
pub(crate) const IDLE_HOSTS: usize = 8;

/// The stack a host's program clone runs on until its `execve` (only system calls and plain
/// stores; 64 KiB is far more than that needs).
const CLONE_STACK: usize = 64 * 1024;

/// The six descriptors of one call: spec memfd, stdin, stdout, stderr, status channel, reply
/// socket.
type CallFds = [OwnedFd; 6];

/// The init's end of one host.
struct Host {
    socket: OwnedFd,
    idle: bool,
}

/// The warm init's loop ([`crate::launcher`] has said `R` already): hands each call to an idle
/// host or a new one, until hookbox closes `control`; then closes every host's socket and
/// returns once every host ended (a busy one finishes its call first).
pub(crate) fn serve(spec: &LaunchSpec, control: OwnedFd, programs: &Programs) -> Result<i32> {
    let mut hosts: Vec<Host> = Vec::new();
    'serving: loop {
        let ready: Vec<bool> = {
            let mut polled = Vec::with_capacity(hosts.len() + 1);
            polled.push(PollFd::new(control.as_fd(), PollFlags::POLLIN));
            polled.extend(
                hosts
                    .iter()
                    .map(|host| PollFd::new(host.socket.as_fd(), PollFlags::POLLIN)),
            );
            match nix::poll::poll(&mut polled, PollTimeout::NONE) {
                Ok(_) | Err(nix::Error::EINTR) => {}
                Err(e) => return Err(LaunchError::Wait(e)),
            }
            polled.iter().map(l::ready).collect()
        };
        // Hosts first: a host's `I` is sent before its call's `X`, so it is here before any call
        // hookbox sent after that `X`. Backwards, so that `swap_remove` only moves a host that
        // was already looked at.
        for index in (0..hosts.len()).rev() {
            if !ready[index + 1] {
                continue;
            }
            let said_idle = matches!(
                crate::fdpass::recv(&hosts[index].socket),
                Ok(message) if message.payload == b"I"
            );
            let idle = hosts.iter().filter(|host| host.idle).count();
            if said_idle && idle < IDLE_HOSTS {
                hosts[index].idle = true;
            } else {
                // Gone (end of stream, or anything but `I`), or one idle host too many: closing
                // its socket ends it once it reads that.
                hosts.swap_remove(index);
            }
        }
        if ready[0] {
            let message = match crate::fdpass::recv(&control) {
                Ok(message) => message,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                    ) =>
                {
                    continue;
                }
                Err(_) => break 'serving,
            };
            if message.payload.is_empty() && message.fds.is_empty() {
                break 'serving;
            }
            if let Ok(fds) = <CallFds>::try_from(message.fds) {
                dispatch(spec, programs, &control, &mut hosts, fds);
            }
        }
    }
    drop(hosts);
    drop(control);
    // With SIGCHLD ignored, wait blocks until every host is gone and then fails with ECHILD.
    while l::wait_raw(-1).is_ok() {}
    Ok(0)
}

/// Hands `fds` to the most recently idle host that takes them, else to a new host.
fn dispatch(
    spec: &LaunchSpec,
    programs: &Programs,
    control: &OwnedFd,
    hosts: &mut Vec<Host>,
    fds: CallFds,
) {
    while let Some(index) = hosts.iter().rposition(|host| host.idle) {
        let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|fd| fd.as_fd()).collect();
        if crate::fdpass::send(hosts[index].socket.as_fd(), b"C", &borrowed).is_ok() {
            hosts[index].idle = false;
            return;
        }
        // It ended meanwhile.
        hosts.swap_remove(index);
    }
    if let Some(host) = start_host(spec, programs, control, hosts, fds) {
        hosts.push(host);
    }
}

/// Clones a new host into fresh PID, mount and IPC namespaces, with `fds` as its first call.
/// None when it could not be cloned; the call's reply socket then says why.
fn start_host(
    spec: &LaunchSpec,
    programs: &Programs,
    control: &OwnedFd,
    hosts: &[Host],
    fds: CallFds,
) -> Option<Host> {
    let refuse = |fds: &CallFds, err: std::io::Error| {
        let failure = l::call_clone_failure(err);
        let _ = crate::fdpass::send(fds[5].as_fd(), &failure.encode(), &[]);
    };
    let (ours, theirs) = match crate::fdpass::pair() {
        Ok(pair) => pair,
        Err(err) => {
            refuse(&fds, err);
            return None;
        }
    };
    let pid = l::clone_call();
    if pid == 0 {
        drop(ours);
        // SAFETY: closing our copies of the request socket and of the other hosts' sockets;
        // this process never uses them (a host holding another's socket would keep it alive).
        unsafe { libc::close(control.as_raw_fd()) };
        for host in hosts {
            // SAFETY: as above.
            unsafe { libc::close(host.socket.as_raw_fd()) };
        }
        l::end_call(host_main(spec, programs, theirs, fds));
    }
    if pid < 0 {
        refuse(&fds, std::io::Error::last_os_error());
        return None;
    }
    Some(Host {
        socket: ours,
        idle: false,
    })
}

/// A host's process (PID 1 of its namespaces): sets itself up, runs `first`, then every call
/// the init sends on `init`, until the init closes it or a reset fails.
fn host_main(spec: &LaunchSpec, programs: &Programs, init: OwnedFd, first: CallFds) -> i32 {
    let started = l::monotonic_ns();
    let mut host = match HostState::new(spec, programs, started) {
        Ok(host) => host,
        Err((err, pidfd)) => {
            // The call learns why through its status channel, once it has the host's pidfd to
            // wait on (or, without one, through its reply socket).
            let [_, _, _, _, status, reply] = first;
            match pidfd {
                Some(pidfd) => {
                    let _ = crate::fdpass::send(reply.as_fd(), b"H", &[pidfd.as_fd()]);
                    report(&mut Some(File::from(status)), &err);
                }
                None => {
                    let _ = crate::fdpass::send(reply.as_fd(), &err.encode(), &[]);
                }
            }
            return EXIT_SETUP_FAILED;
        }
    };
    let mut next = Some(first);
    while let Some(fds) = next.take() {
        if let Err(why) = host.call(fds, &init) {
            // Not idle: the init hands it nothing more, and the next call gets a new host.
            crate::status::note(&format!("a call host ends: {why}"));
            return EXIT_SETUP_FAILED;
        }
        next = loop {
            match crate::fdpass::recv(&init) {
                Ok(message) => break <CallFds>::try_from(message.fds).ok(),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break None,
            }
        };
    }
    0
}

/// What a host keeps between calls.
struct HostState<'a> {
    spec: &'a LaunchSpec,
    programs: &'a Programs,
    /// Its own pidfd, sent with `H` on each call's reply socket.
    pidfd: OwnedFd,
    /// SIGCHLD, which stays blocked in the host (its program clone unblocks it before `execve`).
    sigchld: SignalFd,
    /// The Landlock ruleset for the next call.
    ruleset: OwnedFd,
    /// Its set-up stages (clone, `/proc` and `/dev/shm`), reported with its first call only.
    setup_stages: Vec<(&'static str, i128)>,
    /// Its resource limits and nice value as the init gave them: a call's process has the
    /// host's uid, so `prlimit` or `setpriority` could change them, and a host found changed
    /// serves no other call.
    own: Attributes,
    stack: Vec<u8>,
}

impl<'a> HostState<'a> {
    /// Everything of a host that no call changes. An error comes with the pidfd when the host
    /// had one by then.
    fn new(
        spec: &'a LaunchSpec,
        programs: &'a Programs,
        started: i128,
    ) -> std::result::Result<Self, (LaunchFailure, Option<OwnedFd>)> {
        let pidfd = rustix::process::pidfd_open(
            rustix::process::getpid(),
            rustix::process::PidfdFlags::empty(),
        )
        .map_err(|e| {
            let err = std::io::Error::from_raw_os_error(e.raw_os_error());
            (l::call_clone_failure(err), None)
        })?;
        let setup = || -> Result<(SignalFd, OwnedFd)> {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(LaunchError::Pdeathsig)?;
            nix::unistd::setsid().map_err(LaunchError::Setsid)?;
            // Not dumpable: its `/proc` entries are root's, and no process of its calls may
            // trace it or read its memory even with the same credentials.
            // SAFETY: PR_SET_DUMPABLE takes a flag and touches no memory of ours.
            unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
            let mut mask = SigSet::empty();
            mask.add(Signal::SIGCHLD);
            nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None)
                .map_err(LaunchError::Wait)?;
            // SAFETY: the warm init ignores SIGCHLD (so the kernel reaps its hosts); a host
            // reaps its calls' processes itself, through the signalfd.
            unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
            let sigchld =
                SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
                    .map_err(LaunchError::Wait)?;
            l::remount_per_call()?;
            Ok((sigchld, l::landlock_ruleset(spec)?))
        };
        let (sigchld, ruleset) = match setup() {
            Ok(kept) => kept,
            Err(err) => return Err((err.failure(), Some(pidfd))),
        };
        Ok(HostState {
            spec,
            programs,
            pidfd,
            sigchld,
            ruleset,
            setup_stages: vec![
                ("call_cloned", started),
                ("proc_mounted", l::monotonic_ns()),
            ],
            own: Attributes::now(),
            stack: vec![0u8; CLONE_STACK],
        })
    }

    /// Runs one call to its end, resets the host, and says so: `I` to the init on `init` (only
    /// when the reset worked, so a host that cannot serve again is never handed a call), then
    /// `X` to hookbox. `I` goes first, so the init knows the host is idle before hookbox can
    /// send its next call. Why the host cannot serve again, if it cannot.
    fn call(&mut self, fds: CallFds, init: &OwnedFd) -> std::result::Result<(), String> {
        let [call, stdin, stdout, stderr, status, reply] = fds;
        let mut status = Some(File::from(status));
        let handed = crate::fdpass::send(reply.as_fd(), b"H", &[self.pidfd.as_fd()]);
        match &handed {
            Ok(()) => match self.run(call, [stdin, stdout, stderr], &mut status, &reply) {
                Ok(Some(code)) => {
                    if let Some(file) = status.as_mut() {
                        let _ = file.write_all(format!("{EXIT_MARK}{code}\n").as_bytes());
                    }
                }
                // Killed at hookbox's request: no exit status, as a killed call had none.
                Ok(None) => {}
                Err(err) => report(&mut status, &err.failure()),
            },
            // hookbox gone before the call started (nothing ran), or the pidfd could not be
            // sent: then why, in place of `H`, as when a call cannot be cloned.
            Err(err) if !gone(err) => {
                let failure = l::call_clone_failure(std::io::Error::from(err.kind()));
                let _ = crate::fdpass::send(reply.as_fd(), &failure.encode(), &[]);
            }
            Err(_) => {}
        }
        kill_all();
        drop(status);
        let reset = self.reset();
        if reset.is_ok() {
            let _ = crate::fdpass::send(init.as_fd(), b"I", &[]);
        }
        if handed.is_ok()
            && let Err(err) = crate::fdpass::send(reply.as_fd(), b"X", &[])
            && !gone(&err)
        {
            // hookbox still waits, and now on this host's pidfd: it must end.
            return Err(format!("cannot tell hookbox the call ended: {err}"));
        }
        reset
    }

    /// The call's own part: its spec, directory, program; the program's exit status once it
    /// ended (None: hookbox asked for it to be killed). Every process left in the PID namespace
    /// is killed and reaped by the caller.
    fn run(
        &mut self,
        call: OwnedFd,
        stdio: [OwnedFd; 3],
        status: &mut Option<File>,
        reply: &OwnedFd,
    ) -> Result<Option<i32>> {
        let call: CallSpec = l::read_json_from(File::from(call))?;
        let spec = self.spec.with_call(call);
        for (name, at) in std::mem::take(&mut self.setup_stages) {
            l::stage_at(&spec, status, name, at);
        }
        l::stage(&spec, status, "call_received");
        nix::unistd::chdir(spec.cwd.as_str()).map_err(|source| LaunchError::Chdir {
            path: spec.cwd.clone(),
            source,
        })?;
        let (path, argv, envp) = l::exec_args(&spec)?;
        // In the call's directory, where the shell would resolve the words.
        let direct = spec
            .direct
            .as_deref()
            .and_then(|words| crate::direct::prepare(words, &spec.env));
        let mut execs = Vec::with_capacity(2);
        if let Some(direct) = &direct {
            execs.push(Exec::new(&direct.path, &direct.argv, &direct.envp));
        }
        execs.push(Exec::new(&path, &argv, &envp));
        let mut plan = Plan {
            nofile: spec.limits.open_files,
            nproc: spec.limits.nproc,
            ruleset: self.ruleset.as_raw_fd(),
            filter: libc::sock_fprog {
                len: u16::try_from(self.programs.len()).map_err(|_| {
                    LaunchError::Seccomp(crate::seccomp::SeccompError::Install(
                        seccompiler::Error::EmptyFilter,
                    ))
                })?,
                filter: self.programs.as_ptr() as *mut libc::sock_filter,
            },
            stdio: [
                stdio[0].as_raw_fd(),
                stdio[1].as_raw_fd(),
                stdio[2].as_raw_fd(),
            ],
            execs: &execs,
            failed: Step::None,
            errno: 0,
            ran: 0,
            times: [0; 3],
        };
        l::stage(&spec, status, "program_forked");
        let child = match plan.spawn(&mut self.stack) {
            Ok(child) => child,
            // As a failed `posix_spawn` was: the program could not be started.
            Err(errno) => {
                report(status, &l::exec_failure(&spec, errno));
                return Ok(Some(EXIT_EXEC_FAILED));
            }
        };
        if plan.failed != Step::None {
            // The clone exited (it could not confine itself or exec); reaped with the rest.
            let errno = nix::Error::from_raw(plan.errno);
            return match plan.failed {
                Step::Exec => {
                    report(status, &l::exec_failure(&spec, errno));
                    Ok(Some(EXIT_EXEC_FAILED))
                }
                step => Err(step.error(errno)),
            };
        }
        for (name, at) in ["limits_set", "landlock_applied", "seccomp_installed"]
            .into_iter()
            .zip(plan.times)
        {
            l::stage_at(&spec, status, name, at);
        }
        let direct = direct.is_some() && plan.ran == 0;
        let [_stdin, _stdout, stderr] = stdio;
        match self.wait(child, reply)? {
            Some(Ended::Exited(code)) => Ok(Some(code)),
            Some(Ended::Signaled(signal, core_dumped)) => {
                if direct && let Some(line) = crate::direct::signal_message(signal, core_dumped) {
                    let _ = File::from(stderr).write_all(line.as_bytes());
                }
                Ok(Some(128 + signal))
            }
            Some(Ended::Other) | None => Ok(None),
        }
    }

    /// Reaps every child (orphans are re-parented to the host) until `program` ended, and says
    /// how; None when hookbox asked for the call to be killed (it shut down or closed its end of
    /// `reply`), after killing every process of the namespace.
    fn wait(&mut self, program: libc::pid_t, reply: &OwnedFd) -> Result<Option<Ended>> {
        loop {
            // No child at all (an error) means the program cannot still be running.
            while let Some((pid, ended)) =
                l::wait_with(-1, libc::WNOHANG).map_err(LaunchError::Wait)?
            {
                if pid == program {
                    return Ok(Some(ended));
                }
            }
            let mut polled = [
                PollFd::new(self.sigchld.as_fd(), PollFlags::POLLIN),
                PollFd::new(reply.as_fd(), PollFlags::POLLIN),
            ];
            match nix::poll::poll(&mut polled, PollTimeout::NONE) {
                Ok(_) | Err(nix::Error::EINTR) => {}
                Err(e) => return Err(LaunchError::Wait(e)),
            }
            if l::ready(&polled[0]) {
                while let Ok(Some(_)) = self.sigchld.read_signal() {}
            }
            if l::ready(&polled[1]) {
                // Whatever came (a shutdown, a close, a byte), hookbox wants the call gone; the
                // program is reaped with the rest.
                kill_all();
                return Ok(None);
            }
        }
    }

    /// Makes the host as a new one for the next call: `/` as its directory, a fresh `/dev/shm`
    /// and IPC namespace, and a Landlock ruleset that names the new `/dev/shm`; or says why it
    /// cannot serve again.
    fn reset(&mut self) -> std::result::Result<(), String> {
        if Attributes::now() != self.own {
            return Err("a call changed its resource limits or nice value".into());
        }
        self.clean().map_err(|err| err.to_string())
    }

    fn clean(&mut self) -> Result<()> {
        nix::unistd::chdir("/").map_err(|source| LaunchError::Chdir {
            path: "/".into(),
            source,
        })?;
        // A `/dev/shm` as it was mounted is kept, and so is the ruleset that names it.
        if !shm_untouched() {
            nix::mount::umount2("/dev/shm", nix::mount::MntFlags::MNT_DETACH).map_err(
                |source| LaunchError::Mount {
                    what: "tmpfs /dev/shm (unmount)".into(),
                    target: "/dev/shm".into(),
                    source,
                },
            )?;
            l::mount_shm()?;
            self.ruleset = l::landlock_ruleset(self.spec)?;
        }
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWIPC).map_err(LaunchError::Unshare)?;
        // Signals of the last call's processes, already reaped.
        while let Ok(Some(_)) = self.sigchld.read_signal() {}
        Ok(())
    }
}

/// Whether a send failed because hookbox closed its end (it no longer waits for the call).
fn gone(err: &std::io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EPIPE | libc::ECONNRESET | libc::ECONNREFUSED)
    )
}

/// What a process of the host's uid may change in the host from outside: its resource limits
/// (`prlimit`) and nice value (`setpriority`).
#[derive(Debug, PartialEq, Eq)]
struct Attributes {
    limits: Vec<(libc::rlim_t, libc::rlim_t)>,
    nice: i32,
}

impl Attributes {
    fn now() -> Self {
        // Every resource Linux has (`RLIM_NLIMITS` is 16); an unknown one reads as an error,
        // the same every time.
        let limits = (0..16)
            .map(|resource| {
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                // SAFETY: getrlimit writes only to `limit`.
                let got = unsafe { libc::getrlimit(resource as _, &mut limit) };
                match got {
                    0 => (limit.rlim_cur, limit.rlim_max),
                    _ => (libc::rlim_t::MAX, 0),
                }
            })
            .collect();
        // SAFETY: getpriority reads the caller's own nice value.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        Attributes { limits, nice }
    }
}

/// Whether `/dev/shm` is as [`l::mount_shm`] left it: nothing in it (its root is its only
/// inode and no block is used), its mode and owner unchanged, no extended attribute (or ACL) on
/// it but a security module's label. Its times may differ (a file made and removed); nothing
/// else a call did there shows.
fn shm_untouched() -> bool {
    let Ok(fs) = rustix::fs::statvfs("/dev/shm") else {
        return false;
    };
    let Ok(root) = rustix::fs::stat("/dev/shm") else {
        return false;
    };
    // Security modules may label it (`security.*`); any other attribute is a call's.
    let mut names = [0u8; 1024];
    let no_xattrs = match rustix::fs::listxattr("/dev/shm", &mut names[..]) {
        Ok(n) => names[..n]
            .split(|b| *b == 0)
            .all(|name| name.is_empty() || name.starts_with(b"security.")),
        Err(_) => false,
    };
    fs.f_files.saturating_sub(fs.f_ffree) == 1
        && fs.f_blocks == fs.f_bfree
        && root.st_mode == (libc::S_IFDIR | 0o1777)
        && root.st_uid == 0
        && root.st_gid == 0
        && no_xattrs
}

/// Kills every process of this PID namespace but its PID 1 (the caller) and reaps them all:
/// what the kernel did when a call's own PID 1 exited. Every process of the namespace descends
/// from PID 1, so once `wait` says there are no children, none is left.
fn kill_all() {
    loop {
        // SAFETY: kill(-1) from a PID namespace's init signals every other process in it.
        unsafe { libc::kill(-1, libc::SIGKILL) };
        match l::wait_raw(-1) {
            Ok(_) => continue,
            Err(_) => return,
        }
    }
}

/// One `execve` a program clone may make: NUL-terminated pointer arrays over `CString`s that
/// outlive the clone.
struct Exec<'a> {
    path: &'a CStr,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl<'a> Exec<'a> {
    fn new(path: &'a CString, argv: &'a [CString], envp: &'a [CString]) -> Self {
        let pointers = |strings: &'a [CString]| {
            strings
                .iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        Exec {
            path: path.as_c_str(),
            argv: pointers(argv),
            envp: pointers(envp),
        }
    }
}

/// Where a program clone stopped, when it did not exec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    None,
    Nofile,
    Nproc,
    NoNewPrivs,
    Landlock,
    Seccomp,
    Dup,
    Exec,
}

impl Step {
    fn error(self, errno: nix::Error) -> LaunchError {
        let io = || std::io::Error::from_raw_os_error(errno as i32);
        match self {
            Step::Nofile => LaunchError::Rlimit {
                resource: "RLIMIT_NOFILE",
                source: errno,
            },
            Step::Nproc => LaunchError::Rlimit {
                resource: "RLIMIT_NPROC",
                source: errno,
            },
            Step::NoNewPrivs => LaunchError::Seccomp(crate::seccomp::SeccompError::Install(
                seccompiler::Error::Prctl(io()),
            )),
            Step::Landlock => LaunchError::Landlock(format!("landlock_restrict_self: {}", io())),
            Step::Seccomp => LaunchError::Seccomp(crate::seccomp::SeccompError::Install(
                seccompiler::Error::Seccomp(io()),
            )),
            Step::Dup | Step::None | Step::Exec => LaunchError::Prepare {
                path: "the call's stdio".into(),
                source: io(),
            },
        }
    }
}

/// A program's start, prepared by the host before the clone: everything the clone does between
/// `clone` and `execve` is a system call on these values, and its outcome is written back here
/// (the clone shares the host's memory until it execs or exits, and the host waits until then).
struct Plan<'a> {
    nofile: u64,
    nproc: Option<u64>,
    ruleset: RawFd,
    filter: libc::sock_fprog,
    stdio: [RawFd; 3],
    /// The direct words' exec (when there are some), then the shell's.
    execs: &'a [Exec<'a>],
    failed: Step,
    errno: i32,
    /// Which of `execs` ran.
    ran: usize,
    /// When the limits were set, Landlock applied and seccomp installed (`CLOCK_MONOTONIC`).
    times: [i128; 3],
}

impl Plan<'_> {
    /// Clones the program (`CLONE_VM | CLONE_VFORK`: no copy of the host's page tables, and this
    /// returns once it exec'd or gave up) with every signal blocked around the clone, as
    /// `posix_spawn` does, so that no handler runs on its stack. Its pid, or why the clone
    /// failed; what the clone itself did is in `self`.
    fn spawn(&mut self, stack: &mut [u8]) -> std::result::Result<libc::pid_t, nix::Error> {
        let all = SigSet::all();
        let mut before = SigSet::empty();
        nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&all), Some(&mut before))?;
        let plan: *mut Self = self;
        let flags = nix::sched::CloneFlags::CLONE_VM | nix::sched::CloneFlags::CLONE_VFORK;
        // SAFETY: the clone runs `child`, which makes only async-signal-safe system calls and
        // stores into `plan` (alive until the clone exec'd or exited, which `CLONE_VFORK` waits
        // for) on `stack` (unused by anything else meanwhile), then execs or `_exit`s.
        let cloned = unsafe {
            nix::sched::clone(
                Box::new(move || child(&mut *plan)),
                stack,
                flags,
                Some(libc::SIGCHLD),
            )
        };
        let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&before), None);
        cloned.map(|pid| pid.as_raw())
    }
}

/// The program clone: limits, `no_new_privs`, Landlock, seccomp, stdio, signals, `execve` (the
/// direct words', then the shell's). Only system calls and stores into `plan`; never returns
/// on success.
fn child(plan: &mut Plan<'_>) -> isize {
    let fail = |plan: &mut Plan<'_>, step: Step| -> isize {
        plan.failed = step;
        plan.errno = nix::errno::Errno::last_raw();
        // SAFETY: ends the clone at once, without running any of the host's exit handlers.
        unsafe { libc::_exit(EXIT_SETUP_FAILED) }
    };
    let now = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writes only to `ts`.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
    };
    let limit = |value: u64| libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY (every block below): system calls on values the host prepared, which outlive the
    // clone; none allocates or takes a lock.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit(plan.nofile)) } != 0 {
        return fail(plan, Step::Nofile);
    }
    if let Some(nproc) = plan.nproc
        && unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &limit(nproc)) } != 0
    {
        return fail(plan, Step::Nproc);
    }
    plan.times[0] = now();
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return fail(plan, Step::NoNewPrivs);
    }
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, plan.ruleset, 0) } != 0 {
        return fail(plan, Step::Landlock);
    }
    plan.times[1] = now();
    if unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &plan.filter as *const libc::sock_fprog,
        )
    } != 0
    {
        return fail(plan, Step::Seccomp);
    }
    plan.times[2] = now();
    for (fd, target) in plan.stdio.into_iter().zip(0..) {
        // The host's own 0-2 are open, so a call's descriptors are above them: dup2 always
        // makes a copy here, without close-on-exec.
        if unsafe { libc::dup2(fd, target) } < 0 {
            return fail(plan, Step::Dup);
        }
    }
    // Rust's runtime ignores SIGPIPE, and an ignored disposition survives exec (shell pipelines
    // such as `yes | head` rely on the default); the host blocks SIGCHLD, and the mask survives
    // exec too.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
    for (index, exec) in plan.execs.iter().enumerate() {
        plan.ran = index;
        // A failed direct exec leaves the line to the shell, which says why it cannot run it.
        unsafe { libc::execve(exec.path.as_ptr(), exec.argv.as_ptr(), exec.envp.as_ptr()) };
    }
    fail(plan, Step::Exec)
}
