//! The init of a gVisor container: hookbox's launcher, run by runsc as the container's first
//! process (see [`crate::gvisor`]), serving calls the way the namespaces launcher's warm init
//! does, with what gVisor lacks done another way.
//!
//! - Its request socket is fd 0 (runsc passes stdio through as host descriptors). The first
//!   message (`S`) brings the warm spec in a memfd, and, when the environment allows egress, the
//!   egress channel; init answers `R` once ready.
//! - Before any call, init sets what no call can change, as the namespaces launcher's warm init
//!   does ([`crate::launcher::confine_once`]: the capability bounding set, and the limits that
//!   do not bound init's own work); every call host inherits it.
//! - Calls (`C`, with the same six descriptors as under namespaces) run in call hosts
//!   ([`crate::call_host`]), as under namespaces: a host is PID 1 of its own PID, mount and IPC
//!   namespaces and runs one call after another, its program's clone confining itself (limits,
//!   seccomp; gVisor has no Landlock) before `execve`. What differs: gVisor has no pidfds and
//!   no descriptor crosses back out, so a host answers `P` alone and its reply socket stands in
//!   for a pidfd (it kills the call when hookbox shuts its end down or closes it, and says `X`
//!   once every process of the call was reaped; a host that died closes it). Without Landlock,
//!   and with gVisor delivering signals sent inside a PID namespace to its init (Linux drops
//!   them), what keeps a program from its host is: seccomp denies `ptrace` and any signal
//!   naming PID 1, the program has its own session (no process group it can name holds the
//!   host), the host is not dumpable (gVisor refuses its `/proc/1/mem`, though not the listing
//!   of `/proc/1/fd`), and the init wakes (`SIGCONT`), or kills, a host that does not end a call
//!   hookbox asked to be killed (a program can still stop it with `SIGIO`, see
//!   `call_host::KILL_LOOK`); a host whose limits a call changed is retired, as under
//!   namespaces.
//! - Egress: gVisor's network stack is the sandbox's own (`--network=none`, loopback only), so
//!   hookbox's proxy cannot listen inside it. A relay process listens on the proxy's port on
//!   the sandbox's `127.0.0.1` and, for each connection, asks hookbox for a socket over the
//!   egress channel (`E`; hookbox serves the other end with the environment's proxy) and
//!   copies bytes both ways. Programs keep the same `HTTP(S)_PROXY` as under namespaces.
//!
//! Like the launcher, this module must stay single-threaded and free of async.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::launcher::{LaunchError, Result};
use crate::spec::LaunchSpec;
use crate::status::report;

/// The request socket runsc hands the container's init.
const CONTROL_FD: i32 = 0;

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
    let filters = crate::call_host::Filters::whole(crate::seccomp::build_gvisor()?);
    let relay = match (egress, spec.egress_port) {
        (Some(channel), Some(port)) => Some(start_relay(channel, port)?),
        _ => None,
    };
    // Once for every call host, as the namespaces launcher's warm init does.
    crate::launcher::confine_once(&spec)?;

    crate::fdpass::send(control.as_fd(), b"R", &[]).map_err(LaunchError::WarmSocket)?;
    // Returns once every call ended: they keep their egress until then. It reaps the hosts and
    // notes the relay's end.
    crate::call_host::serve(&spec, control, &filters, relay.map(Pid::as_raw))?;
    if let Some(relay) = relay {
        // The relay, and its connections' children: its process group.
        let _ = nix::sys::signal::kill(relay, Signal::SIGKILL);
        let _ = nix::sys::signal::killpg(relay, Signal::SIGKILL);
    }
    crate::call_host::wait_all();
    Ok(0)
}

/// Starts the egress relay: a child listening on `127.0.0.1:port` in gVisor's network stack, in
/// a process group of its own with the children it forks per connection (so that the init can
/// end them all).
fn start_relay(channel: OwnedFd, port: u16) -> Result<Pid> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))
        .map_err(LaunchError::Loopback)?;
    // SAFETY: this process is single-threaded; the child only runs the relay loop.
    match unsafe { nix::unistd::fork() }.map_err(LaunchError::Fork)? {
        nix::unistd::ForkResult::Child => {
            let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
            // SAFETY: the relay's own children are reaped by the kernel.
            unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
            // SAFETY: closing our copy of the request socket; the relay never uses it.
            unsafe { libc::close(CONTROL_FD) };
            relay(listener, channel);
            std::process::exit(0);
        }
        nix::unistd::ForkResult::Parent { child } => {
            // Also here, so that the group exists whichever of the two runs first.
            let _ = nix::unistd::setpgid(child, child);
            Ok(child)
        }
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
