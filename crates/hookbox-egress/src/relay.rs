//! Relaying a tunnel's bytes between two TCP sockets with `splice(2)` through a pipe, so the
//! data never enters user space, with half-close and an idle timeout.
//!
//! Also owns [`IdleIo`], the idle timeout on HTTP connections. Owns only byte movement and
//! timing; it must not look at the bytes (the SNI check happens before).

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// Bytes moved per splice call.
const CHUNK: usize = 256 * 1024;

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are fresh descriptors owned by nobody else.
    let pair = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // A bigger pipe means fewer wake-ups; failure only costs speed.
    // SAFETY: F_SETPIPE_SZ on a pipe we own.
    unsafe { libc::fcntl(pair.1.as_raw_fd(), libc::F_SETPIPE_SZ, CHUNK as libc::c_int) };
    Ok(pair)
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: both descriptors are open for the duration of the call; null offsets mean "use
    // and advance the file position", as required for sockets and pipes.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Moves bytes from `src` to `dst` until `src` reaches end of stream, then half-closes `dst`.
async fn one_way(
    src: &TcpStream,
    dst: &TcpStream,
    last: &AtomicU64,
    start: Instant,
) -> io::Result<()> {
    let (pipe_r, pipe_w) = pipe()?;
    loop {
        let n = loop {
            src.readable().await?;
            match src.try_io(Interest::READABLE, || {
                splice(src.as_raw_fd(), pipe_w.as_raw_fd(), CHUNK)
            }) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        if n == 0 {
            // SAFETY: shutdown(2) on a socket we hold a reference to.
            unsafe { libc::shutdown(dst.as_raw_fd(), libc::SHUT_WR) };
            return Ok(());
        }
        let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        last.store(ms, Ordering::Relaxed);
        let mut pending = n;
        while pending > 0 {
            dst.writable().await?;
            match dst.try_io(Interest::WRITABLE, || {
                splice(pipe_r.as_raw_fd(), dst.as_raw_fd(), pending)
            }) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => pending -= m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Relays both ways between `a` and `b` until both directions end, one fails, or nothing moves
/// for `idle`.
pub(crate) async fn splice_bidirectional(
    a: TcpStream,
    b: TcpStream,
    idle: Duration,
) -> io::Result<()> {
    let last = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let both = async {
        tokio::try_join!(one_way(&a, &b, &last, start), one_way(&b, &a, &last, start)).map(|_| ())
    };
    tokio::pin!(both);
    loop {
        tokio::select! {
            r = &mut both => return r,
            () = tokio::time::sleep(idle) => {
                let quiet = start
                    .elapsed()
                    .saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
                if quiet >= idle {
                    return Err(io::ErrorKind::TimedOut.into());
                }
            }
        }
    }
}

/// A stream that fails with `TimedOut` once neither a read nor a write has made progress for
/// `idle`, so that no stalled peer holds a connection (and its task) forever.
pub(crate) struct IdleIo<T> {
    inner: T,
    idle: Duration,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl<T> IdleIo<T> {
    pub(crate) fn new(inner: T, idle: Duration) -> Self {
        Self {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }

    fn progress(&mut self) {
        let next = tokio::time::Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }

    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        self.deadline.as_mut().poll(cx).is_ready()
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connection idle too long")
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                self.progress();
                Poll::Ready(r)
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(r) => {
                self.progress();
                Poll::Ready(r)
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                self.progress();
                Poll::Ready(r)
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    #[tokio::test(start_paused = true)]
    async fn idle_streams_time_out_and_busy_ones_do_not() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut io = IdleIo::new(a, Duration::from_secs(5));
        let mut buf = [0u8; 8];
        // Data keeps coming: no timeout.
        use tokio::io::AsyncWriteExt as _;
        b.write_all(b"x").await.unwrap();
        assert_eq!(io.read(&mut buf).await.unwrap(), 1);
        // Nothing for longer than the limit: TimedOut (paused clock auto-advances).
        let err = io.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
