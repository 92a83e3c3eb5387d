//! Reading the server name from a TLS ClientHello without consuming it, so a tunnelled
//! connection can be checked (SNI must equal the CONNECT host) before any byte goes upstream.
//!
//! Owns a bounded parser of TLS records (at most [`MAX_HELLO`] bytes, reassembling a ClientHello
//! that spans records). It must not terminate TLS nor look at anything but the SNI extension.

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// Largest ClientHello we accept (post-quantum key shares make them ~2 KB; 16 KB is generous).
pub const MAX_HELLO: usize = 16 * 1024;

/// Why the first bytes of a tunnel are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    #[error("not a TLS handshake")]
    NotTls,
    #[error("ClientHello larger than {MAX_HELLO} bytes")]
    TooLarge,
    #[error("malformed ClientHello")]
    Malformed,
    #[error("connection closed before the ClientHello was complete")]
    Eof,
    #[error("I/O error reading the ClientHello: {0}")]
    Io(String),
}

/// What was read: every byte (to forward as is) and the server name, if one was sent.
#[derive(Debug)]
pub struct Hello {
    pub raw: Vec<u8>,
    pub server_name: Option<String>,
}

/// Reads the TLS records holding the ClientHello from `r`.
pub async fn read_client_hello<R: AsyncRead + Unpin>(r: &mut R) -> Result<Hello, HelloError> {
    let mut raw = Vec::with_capacity(2048);
    let mut handshake = Vec::with_capacity(2048);
    loop {
        let mut header = [0u8; 5];
        read_exact(r, &mut header).await?;
        if header[0] != 22 || header[1] != 3 {
            return Err(HelloError::NotTls);
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if raw.len() + 5 + len > MAX_HELLO {
            return Err(HelloError::TooLarge);
        }
        raw.extend_from_slice(&header);
        let start = raw.len();
        raw.resize(start + len, 0);
        read_exact(r, &mut raw[start..]).await?;
        handshake.extend_from_slice(&raw[start..]);
        if handshake.len() >= 4 {
            if handshake[0] != 1 {
                return Err(HelloError::NotTls);
            }
            let body_len = (usize::from(handshake[1]) << 16)
                | (usize::from(handshake[2]) << 8)
                | usize::from(handshake[3]);
            if body_len + 4 > MAX_HELLO {
                return Err(HelloError::TooLarge);
            }
            if handshake.len() >= body_len + 4 {
                let server_name = parse_sni(&handshake[4..4 + body_len])?;
                return Ok(Hello { raw, server_name });
            }
        }
    }
}

async fn read_exact<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> Result<(), HelloError> {
    match r.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(HelloError::Eof),
        Err(e) => Err(HelloError::Io(e.to_string())),
    }
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], HelloError> {
        if self.0.len() < n {
            return Err(HelloError::Malformed);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<usize, HelloError> {
        Ok(usize::from(self.take(1)?[0]))
    }
    fn u16(&mut self) -> Result<usize, HelloError> {
        let b = self.take(2)?;
        Ok(usize::from(u16::from_be_bytes([b[0], b[1]])))
    }
}

/// The host_name of the server_name extension (RFC 6066) in a ClientHello body.
fn parse_sni(body: &[u8]) -> Result<Option<String>, HelloError> {
    let mut c = Cursor(body);
    c.take(2 + 32)?; // version, random
    let n = c.u8()?;
    c.take(n)?; // session id
    let n = c.u16()?;
    c.take(n)?; // cipher suites
    let n = c.u8()?;
    c.take(n)?; // compression
    if c.0.is_empty() {
        return Ok(None);
    }
    let n = c.u16()?;
    let mut exts = Cursor(c.take(n)?);
    let mut found = None;
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let n = exts.u16()?;
        let data = exts.take(n)?;
        if kind == 0 {
            if found.is_some() {
                return Err(HelloError::Malformed);
            }
            let mut d = Cursor(data);
            let n = d.u16()?;
            let mut list = Cursor(d.take(n)?);
            while !list.0.is_empty() {
                let name_type = list.u8()?;
                let n = list.u16()?;
                let name = list.take(n)?;
                if name_type == 0 {
                    let s = std::str::from_utf8(name).map_err(|_| HelloError::Malformed)?;
                    found = Some(s.to_owned());
                }
            }
        }
    }
    Ok(found)
}
