//! A way into an environment's [`EgressProxy`] for clients inside hookbox itself (the agent's
//! connections to remote MCP servers), so that they leave exactly as the sandbox's traffic does:
//! the allowlist, the SSRF defences, credential injection and the audit log all apply.
//!
//! The proxy is served on a fresh `127.0.0.1` port that only a client presenting this
//! endpoint's random token (`Proxy-Authorization: Basic`, user [`LOCAL_PROXY_USER`]) may use:
//! any other local process is answered 407 and never reaches the proxy, so the endpoint is no
//! open door to the environment's credentials. The token header is removed before the proxy
//! sees the request. The endpoint stops when it is dropped.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine as _;
use rand::RngCore as _;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::proxy::EgressProxy;

/// The user name of the endpoint's proxy credentials.
pub const LOCAL_PROXY_USER: &str = "hookbox";

/// The longest request head read before the token is checked.
const MAX_HEAD: usize = 16 * 1024;

/// How long a client has to send its first request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// A proxy endpoint on `127.0.0.1` for one environment, guarded by a token.
#[derive(Debug)]
pub struct LocalEndpoint {
    url: String,
    token: String,
    task: tokio::task::JoinHandle<()>,
}

impl LocalEndpoint {
    /// `http://127.0.0.1:PORT`, the proxy URL to configure.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The password that goes with [`LOCAL_PROXY_USER`].
    pub fn token(&self) -> &str {
        &self.token
    }
}

impl Drop for LocalEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EgressProxy {
    /// Serves this proxy on a fresh loopback port for hookbox's own clients (see the module
    /// doc). Connections count against the proxy's connection limit.
    pub async fn local_endpoint(&self) -> io::Result<LocalEndpoint> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let mut raw = [0u8; 32];
        rand::rng().fill_bytes(&mut raw);
        let token = hex(&raw);
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{LOCAL_PROXY_USER}:{token}"))
        );
        let proxy = self.clone();
        let task = tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of descriptors or the like: wait a little instead of spinning.
                        tracing::warn!(error = %e, "egress door: accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let proxy = proxy.clone();
                let expected = expected.clone();
                tokio::spawn(async move {
                    admit(proxy, stream, &expected).await;
                });
            }
        });
        Ok(LocalEndpoint { url, token, task })
    }
}

/// Reads the first request head, checks the token, and hands the connection (head without the
/// token, then the rest) to the proxy; anything else gets a 407 or is closed.
async fn admit(proxy: EgressProxy, mut stream: TcpStream, expected: &str) {
    let mut head = Vec::with_capacity(1024);
    let read = tokio::time::timeout(HEAD_TIMEOUT, async {
        let mut buf = [0u8; 2048];
        loop {
            if let Some(end) = find(&head, b"\r\n\r\n") {
                return Some(end + 4);
            }
            if head.len() > MAX_HEAD {
                return None;
            }
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let Ok(Some(end)) = read else {
        return;
    };
    let (lines, rest) = head.split_at(end);
    let Ok(text) = std::str::from_utf8(lines) else {
        return;
    };
    let mut authorised = false;
    let mut kept = String::with_capacity(text.len());
    for line in text.split_inclusive("\r\n") {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("proxy-authorization") => {
                authorised |= constant_time_eq(value.trim().as_bytes(), expected.as_bytes());
            }
            _ => kept.push_str(line),
        }
    }
    if !authorised {
        let _ = stream
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"hookbox\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await;
        return;
    }
    let mut prefix = kept.into_bytes();
    prefix.extend_from_slice(rest);
    proxy.serve_stream(Prefixed {
        prefix,
        at: 0,
        inner: stream,
    });
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A stream that first yields `prefix`, then reads from `inner`; writes go to `inner`.
struct Prefixed {
    prefix: Vec<u8>,
    at: usize,
    inner: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.prefix.len() {
            let n = (self.prefix.len() - self.at).min(buf.remaining());
            let start = self.at;
            buf.put_slice(&self.prefix[start..start + n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
