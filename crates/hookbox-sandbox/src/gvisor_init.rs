//! The init of a gVisor container: hookbox's launcher, run by runsc as the container's first
//! process (see [`crate::gvisor`]), serving calls the way the namespaces launcher's warm init
//! does, with what gVisor lacks done another way.
//!
//! - Its request socket is fd 0 (runsc passes stdio through as host descriptors). The first
//!   message (`S`) brings the warm spec in a memfd, and, when the environment allows egress, the
//!   egress channel; init answers `R` once ready.
//! - Before any call, init sets what no call can change, as the namespaces launcher's warm init
//!   does ([`crate::launcher::confine_once`]: the capability bounding set, and the limits that
//!   do not bound init's own work); every call and spare inherits it.
//! - Each call (`C`, with the same six descriptors as under namespaces) is cloned into its own
//!   PID, mount and IPC namespace and confined by [`crate::launcher::call_init`] (its
//!   descriptor and process limits, seccomp; gVisor has no Landlock). gVisor has no pidfds and no descriptor crosses back out, so the call's reply
//!   socket stands in for one: init answers `P`, kills the call's PID namespace when hookbox
//!   writes to or closes its end, and closes its own end once the call has been reaped, which is
//!   how hookbox learns that it ended.
//! - A spare call: cloning a call's namespaces, mounting its `/proc` and `/dev/shm` and
//!   confining it (limits, seccomp) is most of what a warm call costs inside gVisor besides its
//!   program, and none of it depends on the call. So init keeps one spare
//!   built ahead, which says `r` once confined; a call is handed to it (the same six
//!   descriptors) and it only reads its spec, takes its stdio, changes directory and starts the
//!   program, while init builds the next spare. A spare that failed (it exits without `r`)
//!   leaves the call to the path above, which reports why; after [`SPARE_FAILURES`] in a row,
//!   init stops building them. With stage timings on, a call handed to its spare also reports
//!   `call_arrived` (when init read it, on the spare's clock): a `seccomp_installed` after it
//!   means the call waited for its spare to be confined. One spare is enough at concurrency 1:
//!   the next is built while the call's program runs, and in the benchmarks no call waited for
//!   it (two spares, and a replacement built only once the program started, were measured and
//!   not kept: see `docs/runtimes.md`).
//! - Egress: gVisor's network stack is the sandbox's own (`--network=none`, loopback only), so
//!   hookbox's proxy cannot listen inside it. A relay process listens on the proxy's port on
//!   the sandbox's `127.0.0.1` and, for each connection, asks hookbox for a socket over the
//!   egress channel (`E`; hookbox serves the other end with the environment's proxy) and
//!   copies bytes both ways. Programs keep the same `HTTP(S)_PROXY` as under namespaces.
//!
//! Like the launcher, this module must stay single-threaded and free of async.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::launcher::{LaunchError, Result};
use crate::spec::LaunchSpec;
use crate::status::{note, report};

/// The request socket runsc hands the container's init.
const CONTROL_FD: i32 = 0;

/// Spares that failed in a row after which init stops building them (every call is then
/// cloned when it arrives, as without spares).
const SPARE_FAILURES: u32 = 3;

/// A call process built ahead (see the module doc): its pid and init's end of the socket it is
/// handed its call on.
struct Spare {
    pid: Pid,
    socket: OwnedFd,
}

/// One running call: its pid (PID 1 of its namespace) and our end of its reply socket.
struct Call {
    reply: OwnedFd,
    killed: bool,
}

/// Entry point inside the container. Setup failures go to stderr (typed, see
/// [`crate::status`]), which runsc passes to hookbox.
pub fn main() -> i32 {
    match run() {
        Ok(code) => code,
        Err(err) => {
            report(&mut None, &err.failure());
            crate::spec::EXIT_SETUP_FAILED
        }
    }
}

fn run() -> Result<i32> {
    // SAFETY: fd 0 is the request socket runsc passed for us alone; nothing else owns it.
    let control = unsafe { OwnedFd::from_raw_fd(CONTROL_FD) };
    let _ = rustix::io::fcntl_setfd(&control, rustix::io::FdFlags::CLOEXEC);
    let first = recv_blocking(&control)?;
    if first.payload != b"S" || first.fds.is_empty() {
        return Err(LaunchError::ReadSpec(
            "the first message on the request socket is not the spec".into(),
        ));
    }
    let mut fds = first.fds.into_iter();
    let spec: LaunchSpec = crate::launcher::read_json_from(
        fds.next()
            .map(File::from)
            .ok_or_else(|| LaunchError::ReadSpec("no spec".into()))?,
    )?;
    let egress = fds.next();
    let _ = nix::unistd::setsid();
    // gVisor brings its loopback up itself (`--network=none` is loopback only).
    let programs = crate::seccomp::build_gvisor()?;
    let relay = match (egress, spec.egress_port) {
        (Some(channel), Some(port)) => Some(start_relay(channel, port)?),
        _ => None,
    };
    // Once for every call and spare, as the namespaces launcher's warm init does.
    crate::launcher::confine_once(&spec)?;

    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None)
        .map_err(LaunchError::Wait)?;
    let sigchld = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(LaunchError::Wait)?;
    crate::fdpass::send(control.as_fd(), b"R", &[]).map_err(LaunchError::WarmSocket)?;

    let mut calls: HashMap<i32, Call> = HashMap::new();
    let mut spare_failures = 0u32;
    let mut spare = start_spare(&spec, &programs, &control, &[]);
    let mut accepting = true;
    while accepting || !calls.is_empty() {
        let pids: Vec<i32> = calls.keys().copied().collect();
        let (control_ready, sigchld_ready, replies_ready) = {
            let mut polled = Vec::with_capacity(calls.len() + 2);
            polled.push(PollFd::new(sigchld.as_fd(), PollFlags::POLLIN));
            if accepting {
                polled.push(PollFd::new(control.as_fd(), PollFlags::POLLIN));
            }
            for pid in &pids {
                if let Some(call) = calls.get(pid) {
                    polled.push(PollFd::new(call.reply.as_fd(), PollFlags::POLLIN));
                }
            }
            match nix::poll::poll(&mut polled, PollTimeout::NONE) {
                Ok(_) | Err(nix::Error::EINTR) => {}
                Err(e) => return Err(LaunchError::Wait(e)),
            }
            let ready = crate::launcher::ready;
            let offset = if accepting { 2 } else { 1 };
            (
                accepting && ready(&polled[1]),
                ready(&polled[0]),
                pids.iter()
                    .zip(&polled[offset..])
                    .filter(|(_, p)| ready(p))
                    .map(|(pid, _)| *pid)
                    .collect::<Vec<_>>(),
            )
        };
        if sigchld_ready {
            while let Ok(Some(_)) = sigchld.read_signal() {}
        }
        reap(&mut calls, relay);
        for pid in replies_ready {
            if let Some(call) = calls.get_mut(&pid) {
                // hookbox wrote (a kill) or closed its end (it stopped waiting): either way the
                // call's whole PID namespace goes.
                let mut byte = [0u8; 16];
                let _ = rustix::io::read(&call.reply, &mut byte);
                if !call.killed {
                    let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
                    call.killed = true;
                }
            }
        }
        if control_ready {
            match crate::fdpass::recv(&control) {
                Ok(message) if message.payload.is_empty() && message.fds.is_empty() => {
                    accepting = false;
                    if let Some(spare) = spare.take() {
                        end_spare(spare);
                    }
                }
                Ok(message) => {
                    let arrived = crate::launcher::monotonic_ns();
                    if let Ok(fds) = <[OwnedFd; 6]>::try_from(message.fds) {
                        let (handed, fds) = match spare.take() {
                            Some(ready) => match hand_to_spare(ready, fds, arrived) {
                                Ok(started) => {
                                    spare_failures = 0;
                                    (Some(started), None)
                                }
                                Err(fds) => {
                                    spare_failures += 1;
                                    (None, Some(fds))
                                }
                            },
                            None => (None, Some(fds)),
                        };
                        let started = match (handed, fds) {
                            (Some(started), _) => Some(started),
                            (None, Some(fds)) => {
                                let others: Vec<i32> =
                                    calls.values().map(|c| c.reply.as_raw_fd()).collect();
                                start_call(&spec, &programs, &control, &others, fds)
                            }
                            (None, None) => None,
                        };
                        if let Some((pid, reply)) = started {
                            let killed = false;
                            calls.insert(pid, Call { reply, killed });
                        }
                        if spare_failures < SPARE_FAILURES {
                            let others: Vec<i32> =
                                calls.values().map(|c| c.reply.as_raw_fd()).collect();
                            spare = start_spare(&spec, &programs, &control, &others);
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    accepting = false;
                    if let Some(spare) = spare.take() {
                        end_spare(spare);
                    }
                }
            }
        }
    }
    if let Some(relay) = relay {
        let _ = nix::sys::signal::kill(relay, Signal::SIGKILL);
        let _ = waitpid(relay, None);
    }
    Ok(0)
}

/// Reaps every child that ended; a call's entry goes with it (closing our end of its reply
/// socket tells hookbox). The relay ending is logged to stderr: egress stops working.
fn reap(calls: &mut HashMap<i32, Call>, relay: Option<Pid>) {
    let pids: Vec<i32> = calls.keys().copied().collect();
    for pid in pids {
        match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(..)) | Ok(WaitStatus::Signaled(..)) | Err(_) => {
                // Said, not only closed: a descriptor gVisor imported from the host may be
                // closed on the host later than here.
                if let Some(call) = calls.remove(&pid) {
                    let _ = crate::fdpass::send(call.reply.as_fd(), b"X", &[]);
                }
            }
            Ok(_) => {}
        }
    }
    if let Some(relay) = relay
        && let Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) =
            waitpid(relay, Some(WaitPidFlag::WNOHANG))
    {
        note("the egress relay ended");
    }
}

/// Clones one call into fresh PID, mount and IPC namespaces; answers `P` on its reply socket
/// (or why it could not start) and returns its pid with our end of that socket. `others` are
/// the running calls' reply sockets, which the new call closes: it must not hold them open.
fn start_call(
    spec: &LaunchSpec,
    programs: &crate::seccomp::Programs,
    control: &OwnedFd,
    others: &[i32],
    fds: [OwnedFd; 6],
) -> Option<(i32, OwnedFd)> {
    let pid = crate::launcher::clone_call();
    let [call, stdin, stdout, stderr, status, reply] = fds;
    if pid == 0 {
        drop(reply);
        // SAFETY: closing our copies of the request socket and of the other calls' reply
        // sockets; this process never uses them.
        unsafe { libc::close(control.as_raw_fd()) };
        for fd in others {
            // SAFETY: as above.
            unsafe { libc::close(*fd) };
        }
        crate::launcher::end_call(crate::launcher::call_init(
            spec,
            programs,
            call,
            [stdin, stdout, stderr],
            status,
        ));
    }
    if pid < 0 {
        let failure = crate::launcher::call_clone_failure(std::io::Error::last_os_error());
        let _ = crate::fdpass::send(reply.as_fd(), &failure.encode(), &[]);
        return None;
    }
    let _ = crate::fdpass::send(reply.as_fd(), b"P", &[]);
    Some((pid as i32, reply))
}

/// Clones the next spare call process (see the module doc), in fresh PID, mount and IPC
/// namespaces; `others` are the running calls' reply sockets, which it closes. None when the
/// clone fails (the next call is then cloned when it arrives, and reports why if it cannot be).
fn start_spare(
    spec: &LaunchSpec,
    programs: &crate::seccomp::Programs,
    control: &OwnedFd,
    others: &[i32],
) -> Option<Spare> {
    let (ours, theirs) = crate::fdpass::pair().ok()?;
    let pid = crate::launcher::clone_call();
    if pid == 0 {
        drop(ours);
        // SAFETY: closing our copies of the request socket and of the running calls' reply
        // sockets; this process never uses them.
        unsafe { libc::close(control.as_raw_fd()) };
        for fd in others {
            // SAFETY: as above.
            unsafe { libc::close(*fd) };
        }
        crate::launcher::end_call(spare_main(spec, programs, theirs));
    }
    if pid < 0 {
        return None;
    }
    Some(Spare {
        pid: Pid::from_raw(pid as i32),
        socket: ours,
    })
}

/// Hands a call's six descriptors to `spare` once it said it is confined (`r`), and answers
/// `P` on the call's reply socket; `arrived` (when init read the call, on gVisor's clock) goes
/// with them, for the call's `call_arrived` stage. Gives the descriptors back when the spare
/// failed (it exited without `r`; it is reaped here).
fn hand_to_spare(
    spare: Spare,
    fds: [OwnedFd; 6],
    arrived: i128,
) -> std::result::Result<(i32, OwnedFd), [OwnedFd; 6]> {
    let confined = matches!(recv_blocking(&spare.socket), Ok(m) if m.payload == b"r");
    let handed = confined && {
        let borrowed: Vec<BorrowedFd<'_>> = fds[..5].iter().map(|fd| fd.as_fd()).collect();
        let payload = format!("C{arrived}");
        crate::fdpass::send(spare.socket.as_fd(), payload.as_bytes(), &borrowed).is_ok()
    };
    if !handed {
        end_spare(spare);
        return Err(fds);
    }
    let [_call, _stdin, _stdout, _stderr, _status, reply] = fds;
    let _ = crate::fdpass::send(reply.as_fd(), b"P", &[]);
    Ok((spare.pid.as_raw(), reply))
}

/// Kills an unused spare and reaps it.
fn end_spare(spare: Spare) {
    drop(spare.socket);
    let _ = nix::sys::signal::kill(spare.pid, Signal::SIGKILL);
    let _ = waitpid(spare.pid, None);
}

/// PID 1 of a spare call: everything of [`crate::launcher::call_init`] that does not depend on
/// the call (its `/proc` and `/dev/shm`, limits, seccomp), then `r` on `socket`;
/// then the call's five descriptors (spec, stdin, stdout, stderr, status channel), and the
/// rest. A failure before `r` exits in silence: init gives the call to a fresh clone, which
/// reports it. Stage timings name the same stages as a call cloned on arrival, at the times
/// they were reached (before the call arrived, unless it waited), then `call_arrived`, when init
/// read the call.
fn spare_main(spec: &LaunchSpec, programs: &crate::seccomp::Programs, socket: OwnedFd) -> i32 {
    use crate::launcher as l;
    let mut stages = vec![("call_cloned", l::monotonic_ns())];
    // SAFETY: restores the default disposition (the spare must reap its program itself).
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
    // init blocks SIGCHLD (it reads it from a signalfd); a blocked mask would survive exec.
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    let confined = (|| {
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(LaunchError::Pdeathsig)?;
        nix::unistd::setsid().map_err(LaunchError::Setsid)?;
        l::remount_per_call()?;
        stages.push(("proc_mounted", l::monotonic_ns()));
        l::set_call_limits(spec)?;
        stages.push(("limits_set", l::monotonic_ns()));
        crate::seccomp::install(programs)?;
        stages.push(("seccomp_installed", l::monotonic_ns()));
        Ok::<(), LaunchError>(())
    })();
    if confined.is_err() || crate::fdpass::send(socket.as_fd(), b"r", &[]).is_err() {
        return crate::spec::EXIT_SETUP_FAILED;
    }
    let Ok(message) = recv_blocking(&socket) else {
        return crate::spec::EXIT_SETUP_FAILED;
    };
    drop(socket);
    // `C`, then when init read the call (`call_arrived`: before `seccomp_installed` when the
    // call waited for this spare to be confined).
    let arrived = message
        .payload
        .strip_prefix(b"C")
        .and_then(|ns| std::str::from_utf8(ns).ok()?.parse::<i128>().ok());
    if let Some(ns) = arrived {
        stages.push(("call_arrived", ns));
    }
    let Ok([call, stdin, stdout, stderr, status]) = <[OwnedFd; 5]>::try_from(message.fds) else {
        return crate::spec::EXIT_SETUP_FAILED;
    };
    let mut status = Some(File::from(status));
    let result = (|| {
        let call: crate::spec::CallSpec = crate::launcher::read_json_from(File::from(call))?;
        let spec = spec.with_call(call);
        if spec.stage_timings
            && let Some(file) = status.as_mut()
        {
            for (name, ns) in &stages {
                let mark = crate::spec::STAGE_MARK;
                let _ = std::io::Write::write_all(file, format!("{mark}{name} {ns}\n").as_bytes());
            }
        }
        for (fd, target) in [stdin, stdout, stderr].iter().zip(0..) {
            // SAFETY: dup2 onto 0, 1, 2 of this process; the sources are ours (received
            // close-on-exec at higher numbers).
            if unsafe { libc::dup2(fd.as_raw_fd(), target) } < 0 {
                return Err(LaunchError::Prepare {
                    path: format!("fd {target}"),
                    source: std::io::Error::last_os_error(),
                });
            }
        }
        nix::unistd::chdir(spec.cwd.as_str()).map_err(|source| LaunchError::Chdir {
            path: spec.cwd.clone(),
            source,
        })?;
        let (path, argv, envp) = l::exec_args(&spec)?;
        l::stage(&spec, &mut status, "program_forked");
        match l::start_program(&spec, &path, &argv, &envp) {
            Ok((child, direct)) => l::reap_until(child, direct),
            Err(err) => {
                report(&mut status, &l::exec_failure(&spec, err));
                Ok(crate::spec::EXIT_EXEC_FAILED)
            }
        }
    })();
    match result {
        Ok(code) => {
            if let Some(file) = status.as_mut() {
                let mark = crate::spec::EXIT_MARK;
                let _ = std::io::Write::write_all(file, format!("{mark}{code}\n").as_bytes());
            }
            code
        }
        Err(err) => {
            report(&mut status, &err.failure());
            crate::spec::EXIT_SETUP_FAILED
        }
    }
}

/// Starts the egress relay: a child listening on `127.0.0.1:port` in gVisor's network stack.
fn start_relay(channel: OwnedFd, port: u16) -> Result<Pid> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))
        .map_err(LaunchError::Loopback)?;
    // SAFETY: this process is single-threaded; the child only runs the relay loop.
    match unsafe { nix::unistd::fork() }.map_err(LaunchError::Fork)? {
        nix::unistd::ForkResult::Child => {
            // SAFETY: the relay's own children are reaped by the kernel.
            unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
            // SAFETY: closing our copy of the request socket; the relay never uses it.
            unsafe { libc::close(CONTROL_FD) };
            relay(listener, channel);
            std::process::exit(0);
        }
        nix::unistd::ForkResult::Parent { child } => Ok(child),
    }
}

/// Accepts connections until the channel to hookbox is gone; each is copied to a socket that
/// hookbox's proxy serves, in a child of its own.
fn relay(listener: std::net::TcpListener, channel: OwnedFd) {
    loop {
        let Ok((client, _)) = listener.accept() else {
            continue;
        };
        if crate::fdpass::send(channel.as_fd(), b"E", &[]).is_err() {
            return;
        }
        let upstream = match recv_blocking(&channel) {
            Ok(message) if message.payload == b"F" => match message.fds.into_iter().next() {
                Some(fd) => fd,
                None => continue,
            },
            Ok(message) if message.payload.is_empty() => return,
            Ok(_) => continue,
            Err(_) => return,
        };
        // SAFETY: the relay is single-threaded; the child copies and exits.
        match unsafe { nix::unistd::fork() } {
            Ok(nix::unistd::ForkResult::Child) => {
                drop(listener);
                drop(channel);
                splice(OwnedFd::from(client), upstream);
                std::process::exit(0);
            }
            Ok(nix::unistd::ForkResult::Parent { .. }) | Err(_) => {}
        }
    }
}

/// Copies bytes both ways between `a` and `b` until both directions reached end of stream,
/// passing each half-close on.
fn splice(a: OwnedFd, b: OwnedFd) {
    let mut open = [true, true]; // a -> b, b -> a
    let mut buf = vec![0u8; 64 * 1024];
    while open[0] || open[1] {
        let directions: Vec<usize> = (0..2).filter(|d| open[*d]).collect();
        let mut fds: Vec<PollFd> = directions
            .iter()
            .map(|d| {
                PollFd::new(
                    if *d == 0 { a.as_fd() } else { b.as_fd() },
                    PollFlags::POLLIN,
                )
            })
            .collect();
        match nix::poll::poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(_) => return,
        }
        let ready: Vec<bool> = fds.iter().map(crate::launcher::ready).collect();
        drop(fds);
        for (direction, ready) in directions.iter().zip(ready) {
            if !ready {
                continue;
            }
            let (from, to) = if *direction == 0 { (&a, &b) } else { (&b, &a) };
            match rustix::io::read(from, &mut buf) {
                Ok(0) | Err(_) => {
                    open[*direction] = false;
                    let _ = rustix::net::shutdown(to, rustix::net::Shutdown::Write);
                }
                Ok(n) => {
                    if !write_all(to.as_fd(), &buf[..n]) {
                        return;
                    }
                }
            }
        }
    }
}

fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return false,
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
    true
}

/// One message from a socket, waiting for it ([`crate::fdpass::send`] is non-blocking; these
/// sockets are blocking, so a receive waits).
fn recv_blocking(socket: &OwnedFd) -> Result<crate::fdpass::Message> {
    loop {
        match crate::fdpass::recv(socket) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other.map_err(LaunchError::WarmSocket),
        }
    }
}
