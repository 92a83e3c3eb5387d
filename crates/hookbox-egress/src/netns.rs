//! A fresh network namespace with loopback only, and a proxy listener bound inside it.
//!
//! Owns namespace creation on a dedicated thread (so no runtime thread ever changes namespace)
//! and bringing `lo` up. Processes that join the namespace can reach only its loopback, where the
//! proxy listens: the kernel, not proxy variables, keeps them from getting out, and with no
//! interface but `lo` there is no DNS path either. It must not run the proxy (the caller serves
//! the returned listener from the host namespace, so outbound dials leave from there).

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use nix::sched::{CloneFlags, unshare};

/// Errors creating the namespace. Each syscall has its own variant.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("unshare(CLONE_NEWNET): {0}")]
    Unshare(nix::Error),
    #[error("opening /proc/thread-self/ns/net: {0}")]
    OpenNs(std::io::Error),
    #[error("socket for interface ioctl: {0}")]
    Socket(std::io::Error),
    #[error("SIOCGIFFLAGS on lo: {0}")]
    GetFlags(std::io::Error),
    #[error("SIOCSIFFLAGS on lo: {0}")]
    SetFlags(std::io::Error),
    #[error("binding {addr} in the namespace: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("namespace thread panicked")]
    Thread,
}

/// Creates a network namespace with only `lo` (up), binds a TCP listener on `addr` (use
/// `127.0.0.1:0`) inside it, and returns the namespace's fd (keep it to keep the namespace, pass
/// it to `setns` to join) and the listener, which keeps working from any thread.
pub fn listener_in_new_netns(addr: SocketAddr) -> Result<(OwnedFd, TcpListener), NetnsError> {
    // unshare affects only the calling thread; this thread ends right after, so nothing else
    // ever runs in the new namespace by accident.
    std::thread::spawn(move || -> Result<(OwnedFd, TcpListener), NetnsError> {
        unshare(CloneFlags::CLONE_NEWNET).map_err(NetnsError::Unshare)?;
        let ns = std::fs::File::open("/proc/thread-self/ns/net").map_err(NetnsError::OpenNs)?;
        loopback_up()?;
        let listener =
            TcpListener::bind(addr).map_err(|source| NetnsError::Bind { addr, source })?;
        Ok((OwnedFd::from(ns), listener))
    })
    .join()
    .map_err(|_| NetnsError::Thread)?
}

fn loopback_up() -> Result<(), NetnsError> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(NetnsError::Socket(std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh, valid descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the interface named in req and writes its flags into req,
    // which lives for the whole call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(NetnsError::GetFlags(std::io::Error::last_os_error()));
    }
    // SAFETY: after SIOCGIFFLAGS the union holds ifru_flags.
    unsafe {
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    // SAFETY: as above; SIOCSIFFLAGS only reads req.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(NetnsError::SetFlags(std::io::Error::last_os_error()));
    }
    Ok(())
}
