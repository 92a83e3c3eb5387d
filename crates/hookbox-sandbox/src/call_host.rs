//! A warm sandbox's call hosts (both runtimes; under gVisor run by `gvisor_init`): processes
//! that each run one call after another, so that a call pays for its program's process and
//! little else.
//!
//! Each call runs in its own PID, mount and IPC namespaces, with its own `/proc` and `/dev/shm`.
//! Cloning those for every call, and tearing them down when it ended, was most of what the
//! launcher cost per call. A host is such a call process, kept:
//!
//! - **The init** ([`serve`]) hands each call (the six descriptors hookbox sent, see
//!   [`crate::warm`]) to an idle host. When none is idle it clones a new one into fresh PID,
//!   mount and IPC namespaces. It keeps [`IDLE_HOSTS`] idle hosts for good; one idle beyond
//!   them (after a burst) is kept for [`IDLE_LINGER`] and then let go: the init closes its
//!   socket, kills it and reaps it.
//! - **A host** first answers `H` with its own pidfd on the call's reply socket (under gVisor,
//!   where no descriptor crosses back out, `P` alone: the socket stands in for a pidfd). It then changes
//!   to the call's directory and starts the program in a `vfork`-like clone ([`Plan`]). That
//!   clone confines itself (descriptor and process limits, Landlock, seccomp) before `execve`.
//!   The host has no Landlock domain and keeps its capabilities, which it must, to reset its
//!   namespaces. Under namespaces (not for a one-shot command) it installs, once set up, the
//!   part of the seccomp filter that leaves it those resets ([`Filters`],
//!   [`seccomp::Stacked`]), and each program adds only the short rest: the same verdicts, for
//!   a fraction of the kernel's work per program. The program cannot reach it: Landlock scopes
//!   ptrace and signals to the program's own domain, the bounding set leaves it no
//!   `CAP_SYS_PTRACE`, seccomp denies `ptrace`, the host is not dumpable, and the
//!   kernel drops signals sent to a PID namespace's init from inside it. gVisor has no Landlock
//!   and delivers those signals, so there seccomp also denies any signal naming PID 1, and the
//!   program starts its own session (a `kill 0` cannot reach the host's group).
//! - **A call ends** when its program does. The host kills what is left in its PID namespace,
//!   if anything is (`kill(-1, SIGKILL)`, as the kernel did when a call's PID 1 exited; not when
//!   the host has no child left, see [`kill_all`]) and reaps it, writes the
//!   exit status, and closes the call's descriptors. It then resets what a call may leave
//!   behind: a fresh IPC namespace when the call left a System V object or a POSIX message
//!   queue in it (always under gVisor; [`ipc_untouched`]), a fresh `/dev/shm` when the call
//!   used it (with the Landlock ruleset for the next call, whose rule names the new
//!   one), `/` as its directory. A call whose processes changed the host's resource limits or
//!   nice value (they share its uid, so `prlimit` can) leaves a host that serves no other call.
//!   Last, it says `I` to the init (only when it can serve again) and `X` to hookbox, in that
//!   order, so the init knows the host is idle before hookbox can send its next call. A
//!   one-shot command's host ([`LaunchSpec::one_shot`]) checks only its limits before `I` and
//!   `X`, and resets the rest when its next call comes.
//! - **hookbox ends a call early** (a timeout, a cancelled interaction) by shutting down its
//!   end of the reply socket. The host polls that socket while the program runs, kills the PID
//!   namespace's processes, and ends the call without an exit status, as a killed call did.
//!   A host that died says no `X`; hookbox then waits on its pidfd, which reports only once the
//!   whole PID namespace is gone (under gVisor, with no pidfd, the init says `X` for it). The
//!   init watches that socket too, and wakes or kills a host that does not end the call
//!   ([`KILL_LOOK`]): a program under gVisor can stop its host.
//!
//! Single-threaded and free of async, like the launcher.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::error::LaunchFailure;
use crate::launcher::{self as l, Ended, LaunchError, Result};
use crate::seccomp::{self, Programs};
use crate::spec::{
    CallSpec, EXIT_EXEC_FAILED, EXIT_MARK, EXIT_SETUP_FAILED, LaunchSpec, RuntimeKind,
};
use crate::status::report;

/// The most idle hosts a warm sandbox keeps for good: a burst of concurrent calls leaves at
/// most this many processes (each with its namespaces, its `/proc` and an empty `/dev/shm`)
/// once it is over and [`IDLE_LINGER`] passed; they count against the environment's process
/// limit (its pids cgroup) like any of its processes.
pub(crate) const IDLE_HOSTS: usize = 8;

/// How long a host idle beyond the [`IDLE_HOSTS`] most recently idle is kept before it is let
/// go. Under a steady load of more concurrent calls than that, the number of busy hosts swings
/// from call to call: ending each host one too many at once, and cloning a new one (its
/// namespaces, `/proc`, `/dev/shm`, and their teardown) a moment later, was one call in nine
/// at 16 concurrent interactions, and about a sixth of an interaction's CPU. An idle host is
/// reused within milliseconds there; after a burst the extra ones go this long after their
/// last call.
const IDLE_LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// How often the init looks for the end of hosts it let go after [`IDLE_LINGER`], to reap them:
/// until then each is a zombie holding a pid of the environment's process limit, and nothing
/// else may wake the init for a long while.
const REAP_LOOK: std::time::Duration = std::time::Duration::from_millis(5);

/// The size of the stack a host's program clone runs on until its `execve` (only system calls
/// and plain stores; 64 KiB is far more than that needs).
const CLONE_STACK: usize = 64 * 1024;

/// The stack a host's program clones run on: an anonymous private mapping of [`CLONE_STACK`]
/// bytes, so that the kernel provides only the pages a clone touches (a few at its top),
/// zero-filled. A zeroed heap buffer cost every host sixteen page faults before its first
/// program, most of them copies of pages its fork shared with the init.
struct CloneStack {
    base: std::ptr::NonNull<u8>,
}

impl CloneStack {
    fn new() -> Result<Self> {
        use rustix::mm::{MapFlags, ProtFlags};
        // SAFETY: a new anonymous mapping placed by the kernel: no memory of ours is touched.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                CLONE_STACK,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::STACK | MapFlags::NORESERVE,
            )
        }
        // Reported as a failed fork would be: what the host's programs are cloned with.
        .map_err(|e| LaunchError::Fork(nix::Error::from_raw(e.raw_os_error())))?;
        std::ptr::NonNull::new(base.cast())
            .map(|base| Self { base })
            .ok_or(LaunchError::Fork(nix::Error::ENOMEM))
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `base` starts a readable, writable mapping of CLONE_STACK bytes, owned by
        // `self` and unmapped only on drop; anonymous memory reads as zeros until written, so
        // every byte is initialized.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr(), CLONE_STACK) }
    }
}

impl Drop for CloneStack {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping `new` made, which nothing uses past this point.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), CLONE_STACK) };
    }
}

/// The six descriptors of one call: spec memfd, stdin, stdout, stderr, status channel, reply
/// socket.
type CallFds = [OwnedFd; 6];

/// How often the init looks at a host whose call hookbox asked to be killed (shut down or
/// closed its end of the call's reply socket) and that has not said it is idle yet. A host
/// normally answers in milliseconds. Under gVisor a program can stop its host with `SIGIO`
/// (`F_SETOWN` naming PID 1, `F_SETSIG` a stop signal: seccomp cannot see a file's owner), and a
/// stopped host would never answer, so hookbox's wait for the call's end would never end: the
/// init sends the host `SIGCONT` when the kill is asked for and at each look, and kills a host
/// it finds stopped. Under namespaces the kernel drops such signals (the host is its PID
/// namespace's init) and this never fires.
const KILL_LOOK: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a host that is not stopped has to end a call hookbox asked to be killed before the
/// init kills it anyway (a hung host; a slow one, killing a large tree on a loaded machine, has
/// this long).
const KILL_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// The seccomp filters of a warm sandbox's calls: what each host installs on itself once it
/// is set up (`None`: nothing), and what each program it starts adds before `execve`.
pub(crate) struct Filters {
    host: Option<Programs>,
    program: Programs,
}

impl Filters {
    /// The whole filter on each program; the host stays unfiltered. For gVisor, whose sentry
    /// evaluates a filtered task's filters again at each of its forks, and for a one-shot
    /// command's host, which mostly serves one call and would pay both attaches for it.
    pub(crate) fn whole(program: Programs) -> Self {
        Filters {
            host: None,
            program,
        }
    }

    /// [`seccomp::Stacked`]: the host installs its part once, and each program adds only the
    /// short rest, which the kernel copies, checks, compiles and frees in a fraction of the
    /// whole program's time. What a program may call is the same.
    pub(crate) fn stacked(stacked: seccomp::Stacked) -> Self {
        Filters {
            host: Some(stacked.host),
            program: stacked.call,
        }
    }
}

/// The init's end of one host.
struct Host {
    socket: OwnedFd,
    pid: libc::pid_t,
    /// Since when it is idle; None while it runs a call.
    idle: Option<std::time::Instant>,
    /// The running call's reply socket (the init's copy of the host's end; None while idle, or
    /// when it could not be copied): readable once hookbox asks for the call to be killed.
    call: Option<OwnedFd>,
    /// Since hookbox asked for the running call to be killed: the next look, and when the host
    /// is killed whatever it is doing ([`KILL_LOOK`], [`KILL_PATIENCE`]).
    kill: Option<(std::time::Instant, std::time::Instant)>,
    /// The init killed it; it is dropped once its socket reaches end of stream.
    killed: bool,
}

/// What one polled descriptor of [`serve`] belongs to.
#[derive(Clone, Copy)]
enum Polled {
    Control,
    Host(usize),
    Call(usize),
}

/// The warm init's loop (the init has said `R` already): hands each call to an idle host or a
/// new one, and sees that a call hookbox asked to be killed ends (see [`KILL_LOOK`]); until
/// hookbox closes `control`; hosts idle beyond [`IDLE_HOSTS`] are let go after [`IDLE_LINGER`].
/// Then idle hosts are let go (closing their socket ends them) and busy ones finish their call
/// first; it returns once every host ended. It reaps its children (SIGCHLD must not be
/// ignored: a host's pid stays its own until reaped here, so a signal never reaches a process
/// that reused it); `relay` is gVisor's egress relay, whose end is noted. The caller then waits
/// for what is left with [`wait_all`].
pub(crate) fn serve(
    spec: &LaunchSpec,
    control: OwnedFd,
    filters: &Filters,
    relay: Option<libc::pid_t>,
) -> Result<()> {
    let gvisor = spec.runtime == RuntimeKind::Gvisor;
    let mut hosts: Vec<Host> = Vec::new();
    // Hosts let go after their linger and not reaped yet.
    let mut leaving: Vec<libc::pid_t> = Vec::new();
    let mut accepting = true;
    while accepting || !hosts.is_empty() {
        let now = std::time::Instant::now();
        let (tags, ready): (Vec<Polled>, Vec<bool>) = {
            let mut tags = Vec::with_capacity(2 * hosts.len() + 1);
            let mut polled = Vec::with_capacity(2 * hosts.len() + 1);
            if accepting {
                tags.push(Polled::Control);
                polled.push(PollFd::new(control.as_fd(), PollFlags::POLLIN));
            }
            for (index, host) in hosts.iter().enumerate() {
                tags.push(Polled::Host(index));
                polled.push(PollFd::new(host.socket.as_fd(), PollFlags::POLLIN));
                // A call whose kill was asked for is not polled again (its socket stays
                // readable); its host's looks run instead.
                if let (None, Some(call), None, false) =
                    (host.idle, &host.call, host.kill, host.killed)
                {
                    tags.push(Polled::Call(index));
                    polled.push(PollFd::new(call.as_fd(), PollFlags::POLLIN));
                }
            }
            let lingering = lingering(&hosts);
            let timeout = hosts
                .iter()
                .filter_map(|host| host.kill.map(|(look, _)| look))
                .chain(lingering.iter().map(|(_, until)| *until))
                .chain((!leaving.is_empty()).then(|| now + REAP_LOOK))
                .min()
                .map_or(PollTimeout::NONE, |look| {
                    let ms = look.saturating_duration_since(now).as_millis() + 1;
                    PollTimeout::try_from(ms.min(60_000) as i32).unwrap_or(PollTimeout::MAX)
                });
            match nix::poll::poll(&mut polled, timeout) {
                Ok(_) | Err(nix::Error::EINTR) => {}
                Err(e) => return Err(LaunchError::Wait(e)),
            }
            (tags, polled.iter().map(l::ready).collect())
        };
        let now = std::time::Instant::now();
        // Calls hookbox wants killed: their host is woken in case a call stopped it, and looked
        // at again until it says it is idle. (Before any host is removed: the tags' indices.)
        for (tag, ready) in tags.iter().zip(&ready) {
            if let (Polled::Call(index), true) = (tag, ready) {
                let host = &mut hosts[*index];
                // SAFETY: kill(2) of our own child, not reaped yet (see the reaping below).
                unsafe { libc::kill(host.pid, libc::SIGCONT) };
                host.kill = Some((now + KILL_LOOK, now + KILL_PATIENCE));
            }
        }
        // Hosts next: a host's `I` is sent before its call's `X`, so it is here before any call
        // hookbox sent after that `X`. Backwards, so that `swap_remove` only moves a host that
        // was already looked at.
        for (tag, ready) in tags.iter().zip(&ready).rev() {
            let (Polled::Host(index), true) = (tag, ready) else {
                continue;
            };
            let index = *index;
            let said_idle = matches!(
                crate::fdpass::recv(&hosts[index].socket),
                Ok(message) if message.payload == b"I"
            );
            if said_idle && accepting && !hosts[index].killed {
                hosts[index].idle = Some(now);
                hosts[index].call = None;
                hosts[index].kill = None;
            } else {
                // Gone (end of stream, or anything but `I`), killed, or no more calls: closing
                // its socket ends it once it reads that.
                let host = hosts.swap_remove(index);
                if gvisor
                    && !said_idle
                    && let Some(call) = &host.call
                {
                    // It died or was killed during its call, which it can no longer end with
                    // `X`; under gVisor closing the copy is not enough (a descriptor gVisor
                    // imported from the host may be closed there late). Under namespaces
                    // hookbox waits on the host's pidfd instead.
                    let _ = crate::fdpass::send(call.as_fd(), b"X", &[]);
                }
            }
        }
        // Hosts idle beyond the kept ones for longer than the linger: let go (closing the
        // socket ends them; killed too, as nothing of a call is left in an idle host, so that
        // they end for certain), and looked for until reaped. Backwards, so that `swap_remove`
        // moves no host still to be let go.
        let mut expired: Vec<usize> = lingering(&hosts)
            .into_iter()
            .filter(|(_, until)| *until <= now)
            .map(|(index, _)| index)
            .collect();
        expired.sort_unstable();
        for index in expired.into_iter().rev() {
            let host = hosts.swap_remove(index);
            // SAFETY: kill(2) of our own child, not reaped yet (see the reaping below).
            unsafe { libc::kill(host.pid, libc::SIGKILL) };
            leaving.push(host.pid);
        }
        // Hosts still busy with a call hookbox wants killed, at their look: one a call stopped
        // (or that hangs past the patience) is killed; its socket's end of stream removes it.
        for host in hosts.iter_mut() {
            let Some((look, patience)) = host.kill else {
                continue;
            };
            if look > now {
                continue;
            }
            if stopped(host.pid) || patience <= now {
                // SAFETY: as above: our child, not reaped yet.
                unsafe { libc::kill(host.pid, libc::SIGKILL) };
                host.kill = None;
                host.killed = true;
            } else {
                // SAFETY: as above.
                unsafe { libc::kill(host.pid, libc::SIGCONT) };
                host.kill = Some((now + KILL_LOOK, patience));
            }
        }
        // The request socket was polled first, while accepting (`accepting` has not changed
        // since).
        if accepting && ready[0] {
            match crate::fdpass::recv(&control) {
                Ok(message) if !message.payload.is_empty() || !message.fds.is_empty() => {
                    if let Ok(fds) = <CallFds>::try_from(message.fds) {
                        dispatch(spec, filters, &control, &mut hosts, fds);
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                    ) => {}
                // hookbox is done: no more calls. Idle hosts go now, busy ones once idle.
                _ => {
                    accepting = false;
                    hosts.retain(|host| host.idle.is_none());
                }
            }
        }
        // Children that ended. Only here, after the last signal of this round: a host that
        // ended is reaped only after its socket told us (its descriptors close before it
        // becomes a zombie), so its pid is never free while it may still be signalled.
        while let Ok(Some((pid, _))) = l::wait_with(-1, libc::WNOHANG) {
            leaving.retain(|left| *left != pid);
            if Some(pid) == relay {
                crate::status::note("the egress relay ended");
            }
        }
    }
    drop(control);
    Ok(())
}

/// The idle hosts beyond the [`IDLE_HOSTS`] most recently idle, by index, each with when it is
/// to be let go (idle since then plus [`IDLE_LINGER`]).
fn lingering(hosts: &[Host]) -> Vec<(usize, std::time::Instant)> {
    let mut newest_first: Vec<(std::time::Instant, usize)> = idle(hosts).collect();
    if newest_first.len() <= IDLE_HOSTS {
        return Vec::new();
    }
    // Most recently idle first; the rest linger.
    newest_first.sort_unstable_by(|a, b| b.cmp(a));
    newest_first
        .into_iter()
        .skip(IDLE_HOSTS)
        .map(|(since, index)| (index, since + IDLE_LINGER))
        .collect()
}

/// The idle hosts, each as since when it is idle and its index: the later, the more recently
/// idle.
fn idle(hosts: &[Host]) -> impl Iterator<Item = (std::time::Instant, usize)> + '_ {
    hosts
        .iter()
        .enumerate()
        .filter_map(|(index, host)| host.idle.map(|since| (since, index)))
}

/// Whether process `pid` is stopped (`T`, or `t` under a tracer), from its `/proc` stat line
/// (the field after the parenthesised command, which may itself hold parentheses).
fn stopped(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state == 'T' || state == 't')
    })
}

/// Returns once the caller has no child left: `wait` blocks until every child is gone and
/// then fails with `ECHILD`.
pub(crate) fn wait_all() {
    while l::wait_raw(-1).is_ok() {}
}

/// Hands `fds` to the most recently idle host that takes them, else to a new host.
fn dispatch(
    spec: &LaunchSpec,
    filters: &Filters,
    control: &OwnedFd,
    hosts: &mut Vec<Host>,
    fds: CallFds,
) {
    // The init's copy of the call's reply socket, to see hookbox ask for a kill. Without one the
    // call is still served, only without the deadline.
    let call = fds[5].try_clone().ok();
    // The most recently idle: the longest idle are the ones to linger and go.
    while let Some((_, index)) = idle(hosts).max() {
        let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|fd| fd.as_fd()).collect();
        if crate::fdpass::send(hosts[index].socket.as_fd(), b"C", &borrowed).is_ok() {
            hosts[index].idle = None;
            hosts[index].call = call;
            return;
        }
        // It ended meanwhile.
        hosts.swap_remove(index);
    }
    if let Some(host) = start_host(spec, filters, control, hosts, fds, call) {
        hosts.push(host);
    }
}

/// Clones a new host into fresh PID, mount and IPC namespaces, with `fds` as its first call
/// (`call`: the init's copy of its reply socket). None when it could not be cloned; the call's
/// reply socket then says why.
fn start_host(
    spec: &LaunchSpec,
    filters: &Filters,
    control: &OwnedFd,
    hosts: &[Host],
    fds: CallFds,
    call: Option<OwnedFd>,
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
        drop(call);
        // SAFETY: closing our copies of the request socket, of the other hosts' sockets and of
        // their calls' reply sockets; this process never uses them (a host holding another's
        // socket would keep it alive, and hookbox would not see that call end with its host).
        unsafe { libc::close(control.as_raw_fd()) };
        for host in hosts {
            // SAFETY: as above.
            unsafe { libc::close(host.socket.as_raw_fd()) };
            if let Some(call) = &host.call {
                // SAFETY: as above.
                unsafe { libc::close(call.as_raw_fd()) };
            }
        }
        l::end_call(host_main(spec, filters, theirs, fds));
    }
    if pid < 0 {
        refuse(&fds, std::io::Error::last_os_error());
        return None;
    }
    Some(Host {
        socket: ours,
        pid: pid as libc::pid_t,
        idle: None,
        call,
        kill: None,
        killed: false,
    })
}

/// A host's process (PID 1 of its namespaces): sets itself up, runs `first`, then every call
/// the init sends on `init`, until the init closes it or a reset fails.
fn host_main(spec: &LaunchSpec, filters: &Filters, init: OwnedFd, first: CallFds) -> i32 {
    let started = l::monotonic_ns();
    let mut host = match HostState::new(spec, filters, started) {
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
    filters: &'a Filters,
    /// Its own pidfd, sent with `H` on each call's reply socket (namespaces). None under
    /// gVisor, where no descriptor crosses back out: the host answers `P` alone, and its reply
    /// socket is all hookbox has of the call.
    pidfd: Option<OwnedFd>,
    /// SIGCHLD, which stays blocked in the host (its program clone unblocks it before `execve`).
    sigchld: SignalFd,
    /// The Landlock ruleset for the next call (none under gVisor, which has no Landlock).
    ruleset: Option<OwnedFd>,
    /// Its set-up stages (clone, `/proc` and `/dev/shm`), reported with its first call only.
    setup_stages: Vec<(&'static str, i128)>,
    /// Its resource limits and nice value as the init gave them: a call's process has the
    /// host's uid, so `prlimit` or `setpriority` could change them, and a host found changed
    /// serves no other call.
    own: Attributes,
    /// A one-shot command's host whose last call ended: its IPC namespace and `/dev/shm` are
    /// reset ([`Self::clean`]) when the next call comes, not before.
    unclean: bool,
    /// The POSIX message queues of its IPC namespace, a mount of their file system that no
    /// process of a call can see (see [`ipc_untouched`]); made again with each new IPC
    /// namespace. None under gVisor, or where it could not be made: then every reset renews
    /// the IPC namespace.
    queues: Option<MessageQueues>,
    stack: CloneStack,
}

impl<'a> HostState<'a> {
    /// Everything of a host that no call changes. An error comes with the pidfd when the host
    /// had one by then.
    fn new(
        spec: &'a LaunchSpec,
        filters: &'a Filters,
        started: i128,
    ) -> std::result::Result<Self, (LaunchFailure, Option<OwnedFd>)> {
        let gvisor = spec.runtime == RuntimeKind::Gvisor;
        let pidfd = match gvisor {
            true => None,
            false => Some(
                rustix::process::pidfd_open(
                    rustix::process::getpid(),
                    rustix::process::PidfdFlags::empty(),
                )
                .map_err(|e| {
                    let err = std::io::Error::from_raw_os_error(e.raw_os_error());
                    (l::call_clone_failure(err), None)
                })?,
            ),
        };
        let setup = || -> Result<(SignalFd, Option<OwnedFd>, CloneStack)> {
            hold_stdio()?;
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
            // SAFETY: sets a disposition, no handler code. The default whatever the init
            // inherited (an ignored SIGCHLD survives exec and would reap for the host): a host
            // reaps its calls' processes itself, through the signalfd.
            unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
            let sigchld =
                SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
                    .map_err(LaunchError::Wait)?;
            l::remount_per_call()?;
            let ruleset = match gvisor {
                true => None,
                false => Some(l::landlock_ruleset(spec)?),
            };
            // Set up: from here on the host lives under the part of its calls' filter that
            // leaves it what it still does (see [`Filters`]).
            if let Some(host) = &filters.host {
                seccomp::install(host)?;
            }
            Ok((sigchld, ruleset, CloneStack::new()?))
        };
        let (sigchld, ruleset, stack) = match setup() {
            Ok(kept) => kept,
            Err(err) => return Err((err.failure(), pidfd)),
        };
        // Only with Landlock, which keeps the namespace's sysctls read-only to a call (none
        // under gVisor, whose namespace is always renewed).
        let queues = ruleset.as_ref().and_then(|_| MessageQueues::new());
        Ok(HostState {
            spec,
            filters,
            pidfd,
            sigchld,
            ruleset,
            setup_stages: vec![
                ("call_cloned", started),
                ("proc_mounted", l::monotonic_ns()),
            ],
            own: Attributes::now(),
            unclean: false,
            queues,
            stack,
        })
    }

    /// Runs one call to its end, resets the host, and says so: `I` to the init on `init` (only
    /// when the reset worked, so a host that cannot serve again is never handed a call), then
    /// `X` to hookbox. `I` goes first, so the init knows the host is idle before hookbox can
    /// send its next call. Why the host cannot serve again, if it cannot.
    ///
    /// For a one-shot command ([`LaunchSpec::one_shot`]) only the check of the host's limits
    /// comes before `I` and `X`; the rest of the reset (its IPC namespace and `/dev/shm`) waits
    /// for the next call, so that a command whose last call ended does not wait for it, nor
    /// share the machine with the kernel's work of freeing what it replaced. A host whose
    /// deferred reset fails answers that call with why, in place of `H`, and ends: nothing of
    /// the call ran.
    fn call(&mut self, fds: CallFds, init: &OwnedFd) -> std::result::Result<(), String> {
        let [call, stdin, stdout, stderr, status, reply] = fds;
        if self.unclean {
            if let Err(err) = self.clean() {
                let _ = crate::fdpass::send(reply.as_fd(), &err.failure().encode(), &[]);
                return Err(err.to_string());
            }
            self.unclean = false;
        }
        let mut status = Some(File::from(status));
        let handed = match &self.pidfd {
            Some(pidfd) => crate::fdpass::send(reply.as_fd(), b"H", &[pidfd.as_fd()]),
            None => crate::fdpass::send(reply.as_fd(), b"P", &[]),
        };
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
        let reset = match self.spec.one_shot {
            true => {
                self.unclean = true;
                self.unchanged()
            }
            false => self.reset(),
        };
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
            ruleset: self.ruleset.as_ref().map(|ruleset| ruleset.as_raw_fd()),
            own_session: self.spec.runtime == RuntimeKind::Gvisor,
            filter: libc::sock_fprog {
                len: u16::try_from(self.filters.program.len()).map_err(|_| {
                    LaunchError::Seccomp(crate::seccomp::SeccompError::Install(
                        seccompiler::Error::EmptyFilter,
                    ))
                })?,
                filter: self.filters.program.as_ptr() as *mut libc::sock_filter,
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
        let child = match plan.spawn(self.stack.as_mut_slice()) {
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
            if name != "landlock_applied" || plan.ruleset.is_some() {
                l::stage_at(&spec, status, name, at);
            }
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
    /// (with a Landlock ruleset that names it) and IPC namespace where the call left something
    /// in them; or says why it cannot serve again.
    fn reset(&mut self) -> std::result::Result<(), String> {
        self.unchanged()?;
        self.clean().map_err(|err| err.to_string())
    }

    /// Whether the host's resource limits and nice value are still the init's.
    fn unchanged(&self) -> std::result::Result<(), String> {
        match Attributes::now() == self.own {
            true => Ok(()),
            false => Err("a call changed its resource limits or nice value".into()),
        }
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
            if self.ruleset.is_some() {
                self.ruleset = Some(l::landlock_ruleset(self.spec)?);
            }
        }
        // Renewing it costs more than the rest of a reset (and the kernel's freeing of the old
        // one after it), so it is kept when the call left nothing in it.
        if !ipc_untouched(self.queues.as_ref()) {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWIPC)
                .map_err(LaunchError::Unshare)?;
            self.queues = self.queues.take().and_then(|_| MessageQueues::new());
        }
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
/// inode, or, where the file system counts no inodes (gVisor's tmpfs), nothing listed in it;
/// and no block is used), its mode and owner unchanged, no extended attribute (or ACL) on it
/// but a security module's label. Its times may differ (a file made and removed); nothing
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
        // A file system without extended attributes has none a call could have set.
        Err(rustix::io::Errno::NOTSUP) => true,
        Err(_) => false,
    };
    let empty = match fs.f_files {
        0 => std::fs::read_dir("/dev/shm").is_ok_and(|mut entries| entries.next().is_none()),
        files => files.saturating_sub(fs.f_ffree) == 1,
    };
    empty
        && fs.f_blocks == fs.f_bfree
        && root.st_mode == (libc::S_IFDIR | 0o1777)
        && root.st_uid == 0
        && root.st_gid == 0
        && no_xattrs
}

/// The POSIX message queues of this process's IPC namespace: a detached mount of their file
/// system, where each queue is a file in the root. Attached nowhere, so no process of a call
/// can see it, and close-on-exec, so none inherits it.
struct MessageQueues {
    root: OwnedFd,
    /// The root's size when the namespace was new: it grows by a fixed size with each queue.
    empty: u64,
}

impl MessageQueues {
    /// Made in a new IPC namespace, before any call ran in it. None when the kernel cannot
    /// (`fsopen(2)` came with Linux 5.2).
    fn new() -> Option<Self> {
        use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags};
        let context = rustix::mount::fsopen("mqueue", FsOpenFlags::FSOPEN_CLOEXEC).ok()?;
        rustix::mount::fsconfig_create(&context).ok()?;
        let root = rustix::mount::fsmount(
            &context,
            FsMountFlags::FSMOUNT_CLOEXEC,
            MountAttrFlags::MOUNT_ATTR_RDONLY
                | MountAttrFlags::MOUNT_ATTR_NOSUID
                | MountAttrFlags::MOUNT_ATTR_NODEV
                | MountAttrFlags::MOUNT_ATTR_NOEXEC,
        )
        .ok()?;
        let empty = Self::size(&root)?;
        Some(MessageQueues { root, empty })
    }

    fn size(root: &OwnedFd) -> Option<u64> {
        rustix::fs::fstat(root)
            .ok()
            .and_then(|stat| u64::try_from(stat.st_size).ok())
    }

    /// Whether the namespace holds no queue (false when that cannot be read).
    fn none(&self) -> bool {
        Self::size(&self.root) == Some(self.empty)
    }
}

/// Whether this process's IPC namespace holds nothing a call made: no System V shared memory
/// segment, semaphore set or message queue (the kernel's counts, from `SHM_INFO`, `SEM_INFO`
/// and `MSG_INFO`), and no POSIX message queue ([`MessageQueues`]). Nothing else of it
/// can change under a call: its limits are sysctls under `/proc/sys`, which Landlock keeps
/// read-only. False when any of it cannot be read, or without `queues`: then the namespace is
/// renewed.
fn ipc_untouched(queues: Option<&MessageQueues>) -> bool {
    /// The `struct shm_info` that `SHM_INFO` writes (`<sys/shm.h>`; not in the libc crate).
    #[repr(C)]
    struct ShmInfo {
        used_ids: libc::c_int,
        shm_tot: libc::c_ulong,
        shm_rss: libc::c_ulong,
        shm_swp: libc::c_ulong,
        swap_attempts: libc::c_ulong,
        swap_successes: libc::c_ulong,
    }
    const SHM_INFO: libc::c_int = 14;
    let Some(queues) = queues else {
        return false;
    };
    let mut shm = ShmInfo {
        used_ids: -1,
        shm_tot: 0,
        shm_rss: 0,
        shm_swp: 0,
        swap_attempts: 0,
        swap_successes: 0,
    };
    // SAFETY: SHM_INFO writes a `struct shm_info` (which `ShmInfo` is) through the pointer.
    let shm_read = unsafe { libc::shmctl(0, SHM_INFO, (&raw mut shm).cast()) } >= 0;
    // SAFETY: all-zero is a valid `seminfo` and `msginfo` (plain integers).
    let (mut sem, mut msg): (libc::seminfo, libc::msginfo) = unsafe { std::mem::zeroed() };
    // SAFETY: SEM_INFO writes a `struct seminfo` through the pointer (semctl's fourth argument,
    // a `union semun`, passed as its pointer member).
    let sem_read = unsafe { libc::semctl(0, 0, libc::SEM_INFO, &raw mut sem) } >= 0;
    // SAFETY: MSG_INFO writes a `struct msginfo` through the pointer.
    let msg_read = unsafe { libc::msgctl(0, libc::MSG_INFO, (&raw mut msg).cast()) } >= 0;
    shm_read
        && shm.used_ids == 0
        && sem_read
        && sem.semusz == 0
        && msg_read
        && msg.msgpool == 0
        && queues.none()
}

/// Keeps descriptors 0, 1 and 2 of the host taken (by `/dev/null` where the init had none:
/// gVisor's init got its request socket at 0 and the host closed its copy), so that a call's
/// descriptors always arrive above them and the program clone's `dup2` onto 0-2 always makes a
/// copy, never a no-op that would leave close-on-exec set or overwrite another of the call's.
/// (Without it only a call's spec, the first descriptor it sends, would land at 0, and the
/// spec is closed before the program starts; this keeps that from resting on the order.)
fn hold_stdio() -> Result<()> {
    loop {
        let null = rustix::fs::open(
            "/dev/null",
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| LaunchError::Prepare {
            path: "/dev/null".into(),
            source: e.into(),
        })?;
        if null.as_raw_fd() > 2 {
            return Ok(());
        }
        // Kept for the host's life, at the number it took.
        std::mem::forget(null);
    }
}

/// Kills every process of this PID namespace but its PID 1 (the caller) and reaps them all:
/// what the kernel did when a call's own PID 1 exited. Every process of the namespace descends
/// from PID 1 (an orphan is given to PID 1 or to a subreaper that descends from it, and no
/// program may `setns`; nothing outside, the init or hookbox, forks into it), so once `wait`
/// says there are no children, none is left. When that is so from the start (a program that
/// left nothing behind), nothing is signalled: `kill(-1)` walks every process of the machine, on
/// the way from the program's exit to hookbox's answer. Once there was a child, the kill comes
/// first in every round, so that no process making children of this one (`CLONE_PARENT`)
/// outruns the reaping.
fn kill_all() {
    // `__WALL`, here and below: children whatever signal they were to send at their end (all
    // send `SIGCHLD` today: programs are cloned with it, and an adopted orphan is given it).
    if let Err(nix::Error::ECHILD) = l::wait_with(-1, libc::WNOHANG | libc::__WALL) {
        return;
    }
    loop {
        // SAFETY: kill(-1) from a PID namespace's init signals every other process in it.
        unsafe { libc::kill(-1, libc::SIGKILL) };
        // Without `WNOHANG`, this returns only once a child ended, or fails (`ECHILD`).
        match l::wait_with(-1, libc::__WALL) {
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
    Session,
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
            Step::Session => LaunchError::Setsid(errno),
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
    /// None: no Landlock (gVisor).
    ruleset: Option<RawFd>,
    /// Whether the program starts its own session (gVisor; see [`child`]).
    own_session: bool,
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
    let now = l::monotonic_ns;
    let limit = |value: u64| libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY (every block below): system calls on values the host prepared, which outlive the
    // clone; none allocates or takes a lock.
    //
    // Under gVisor the program gets its own session (and process group): gVisor does not
    // shield a PID namespace's init from signals sent inside it, so `kill(0, ...)` from the
    // host's group would reach the host (signals naming PID 1 its seccomp filter denies).
    // Under namespaces the kernel and Landlock keep the host out of reach, and the program
    // stays in its host's session, as it was in its call init's.
    if plan.own_session && unsafe { libc::setsid() } < 0 {
        return fail(plan, Step::Session);
    }
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
    if let Some(ruleset) = plan.ruleset
        && unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0) } != 0
    {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in the copy of [`each_kind_of_ipc_object_keeps_a_namespace_from_being_kept`] that runs
    /// in new user and IPC namespaces.
    const IN_NAMESPACE: &str = "HOOKBOX_TEST_IPC_NAMESPACE";

    const NAME: &str =
        "call_host::tests::each_kind_of_ipc_object_keeps_a_namespace_from_being_kept";

    /// Issue 35: a host keeps its IPC namespace for the next call only when [`ipc_untouched`]
    /// finds nothing in it. Each kind of object a process can leave there is seen while it
    /// exists, and nothing once it is gone (a sandboxed call's `mq_open` makes a queue but
    /// cannot open it, Landlock denies that, so only here is one removed again). The checks
    /// run in a copy of this test started by `unshare(1)` in user, mount and IPC namespaces of
    /// its own, as a host has.
    #[test]
    fn each_kind_of_ipc_object_keeps_a_namespace_from_being_kept() {
        if std::env::var_os(IN_NAMESPACE).is_some() {
            return in_namespace();
        }
        let out = std::process::Command::new("unshare")
            .args(["--user", "--map-root-user", "--mount", "--ipc", "--"])
            .arg(std::env::current_exe().expect("the test binary"))
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(IN_NAMESPACE, "1")
            .output()
            .expect("unshare(1) runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn in_namespace() {
        let queues = MessageQueues::new().expect("a mount of the namespace's message queues");
        assert!(ipc_untouched(Some(&queues)), "a new namespace");
        assert!(!ipc_untouched(None), "kept without a look at its queues");
        let seen = |kind: &str, made: bool, remove: &dyn Fn()| {
            assert!(made, "could not make a {kind}");
            assert!(!ipc_untouched(Some(&queues)), "a {kind} was not seen");
            remove();
            assert!(
                ipc_untouched(Some(&queues)),
                "a {kind} removed is still seen"
            );
        };
        let private = libc::IPC_PRIVATE;
        // SAFETY (each block below): System V and POSIX IPC calls on values of this test.
        let id = unsafe { libc::shmget(private, 4096, 0o600) };
        seen("shared memory segment", id >= 0, &|| unsafe {
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
        });
        let id = unsafe { libc::semget(private, 1, 0o600) };
        seen("semaphore set", id >= 0, &|| unsafe {
            libc::semctl(id, 0, libc::IPC_RMID);
        });
        let id = unsafe { libc::msgget(private, 0o600) };
        seen("System V message queue", id >= 0, &|| unsafe {
            libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut());
        });
        let name = c"/hookbox-test";
        let mode: libc::mode_t = 0o600;
        let queue = unsafe {
            libc::mq_open(
                name.as_ptr(),
                libc::O_CREAT | libc::O_RDWR,
                mode,
                std::ptr::null::<libc::mq_attr>(),
            )
        };
        seen("POSIX message queue", queue >= 0, &|| unsafe {
            libc::mq_close(queue);
            libc::mq_unlink(name.as_ptr());
        });
    }
}
