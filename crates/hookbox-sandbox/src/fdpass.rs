//! Messages with descriptors over a `SOCK_SEQPACKET` unix socket: how hookbox hands a warm
//! sandbox one call (its spec, stdio and status channel) and gets back the call's pidfd.
//!
//! Blocking or not is the socket's business: the launcher uses blocking sockets, the runner
//! non-blocking ones behind `AsyncFd`. This module owns the framing only; it must not know what
//! a message means.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

/// The most descriptors one message carries.
pub const MAX_FDS: usize = 8;
/// The longest payload one message carries (longer ones are truncated by the receiver).
pub const MAX_PAYLOAD: usize = 4096;

/// A connected pair of close-on-exec `SOCK_SEQPACKET` sockets.
pub fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Sends `payload` (non-empty: an empty message would read as end-of-stream) with `fds`.
pub fn send(socket: BorrowedFd<'_>, payload: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    debug_assert!(!payload.is_empty() && fds.len() <= MAX_FDS);
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other(
            "too many descriptors for one message",
        ));
    }
    rustix::net::sendmsg(
        socket,
        &[IoSlice::new(payload)],
        &mut control,
        SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
    )?;
    Ok(())
}

/// One received message: its payload (empty at end of stream) and descriptors, all
/// close-on-exec.
#[derive(Debug)]
pub struct Message {
    pub payload: Vec<u8>,
    pub fds: Vec<OwnedFd>,
}

/// Receives one message. Descriptors beyond [`MAX_FDS`] are closed by the kernel
/// (`MSG_CTRUNC`); the caller checks the count it expects.
pub fn recv(socket: impl AsFd) -> std::io::Result<Message> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut buf = vec![0u8; MAX_PAYLOAD];
    let received = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    buf.truncate(received.bytes.min(MAX_PAYLOAD));
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    Ok(Message { payload: buf, fds })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_message_carries_its_payload_and_descriptors() {
        let (a, b) = pair().unwrap();
        let (r, w) = rustix::pipe::pipe().unwrap();
        send(a.as_fd(), b"C", &[w.as_fd()]).unwrap();
        drop(w);
        let message = recv(&b).unwrap();
        assert_eq!(message.payload, b"C");
        assert_eq!(message.fds.len(), 1);
        let mut passed = std::fs::File::from(message.fds.into_iter().next().unwrap());
        passed.write_all(b"through").unwrap();
        drop(passed);
        let mut got = String::new();
        std::fs::File::from(r).read_to_string(&mut got).unwrap();
        assert_eq!(got, "through");
    }

    #[test]
    fn a_closed_peer_reads_as_an_empty_message() {
        let (a, b) = pair().unwrap();
        drop(a);
        let message = recv(&b).unwrap();
        assert!(message.payload.is_empty() && message.fds.is_empty());
    }
}
