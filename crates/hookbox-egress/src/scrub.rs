//! Keeping injected secrets out of the sandbox when an upstream echoes them back.
//!
//! The proxy injects an allowlist entry's `transform` headers and its credential into a
//! sandbox's request, so the sandbox never holds the secret. An upstream may still send it
//! back: an echo endpoint, a debug page, an error that quotes the key it refused. Every
//! response to a request that carried an injected secret is therefore masked before the
//! sandbox reads it: each occurrence of the secret (and of its [`parts`]: its token after a
//! `Bearer `-style prefix, each `name=value` of a cookie list and its value) in the response's
//! header values and body becomes as many `*` bytes, so lengths and `Content-Length` hold and
//! a streamed body still streams ([`ScrubBody`] withholds only the bytes at a frame's end that
//! could start a secret, never more than the longest secret).
//!
//! The reason phrase is masked like a header value, and a header value, reason phrase or body
//! that ends with four or more bytes of a value's start has those masked too.
//!
//! Only the bytes as sent can be matched: the request asks for `Accept-Encoding: identity`
//! (and loses any `Range`, with which the sandbox could have a value cut into short pieces),
//! and a response that is encoded anyway (a content coding, or a transfer coding other than
//! `chunked`) is refused with a 502 rather than passed on unread. A value transformed by the
//! upstream (base64, escaped) is not recognised; values under [`MIN_SECRET_LEN`] bytes are not
//! masked (they cannot be told apart from ordinary text). Which injected values count as
//! secrets is [`crate::inject::Injected::secret_values`]'s. This module must not decide
//! whether a request is allowed.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use hyper::body::{Body, Frame, SizeHint};

/// Shorter values are not masked (the same bound as the hook engine's scrubber).
pub const MIN_SECRET_LEN: usize = 8;

/// What every byte of a masked value becomes.
pub const MASK: u8 = b'*';

/// What of one injected value counts as secret on its own: the value, its token after the
/// first space (`Bearer TOKEN`), and for a cookie list each `name=value` pair and each value;
/// only those of [`MIN_SECRET_LEN`] bytes or more. The hook engine's scrubber is given the same
/// ([`crate::Egress::injected_values`]).
pub fn parts(value: &[u8]) -> Vec<Vec<u8>> {
    let mut all = vec![value.to_vec()];
    if let Some(space) = value.iter().position(|b| *b == b' ') {
        all.push(value[space + 1..].trim_ascii().to_vec());
    }
    if value.contains(&b';') || value.contains(&b'=') {
        for pair in value.split(|b| *b == b';').map(<[u8]>::trim_ascii) {
            all.push(pair.to_vec());
            if let Some(eq) = pair.iter().position(|b| *b == b'=') {
                all.push(pair[eq + 1..].trim_ascii().to_vec());
            }
        }
    }
    all.retain(|v| v.len() >= MIN_SECRET_LEN);
    all
}

/// The values to mask in one response: what was injected into its request.
#[derive(Clone)]
pub struct Secrets {
    finders: Arc<[memchr::memmem::Finder<'static>]>,
}

impl std::fmt::Debug for Secrets {
    // Never the values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("count", &self.finders.len())
            .finish()
    }
}

impl Secrets {
    /// The [`parts`] of the values (each at least [`MIN_SECRET_LEN`] bytes long); `None` when
    /// nothing is left to mask. Their order does not matter: [`Self::scan`] finds every one in
    /// the raw bytes and masks the union.
    pub fn new<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<Self> {
        let mut all: Vec<Vec<u8>> = values.into_iter().flat_map(parts).collect();
        all.sort();
        all.dedup();
        if all.is_empty() {
            return None;
        }
        let finders = all
            .into_iter()
            .map(|v| memchr::memmem::Finder::new(&v).into_owned())
            .collect();
        Some(Self { finders })
    }

    /// Scans `raw`: a copy with every occurrence of every value masked (overlapping ones
    /// and values inside others too: each is found in the raw bytes, and their union masked),
    /// how many bytes at its end could start a value that goes on past it (the longest proper
    /// prefix of a value that `raw` ends with, found in the raw bytes), and how many of those
    /// end bytes a value found here covers (to be masked when they are sent).
    fn scan(&self, raw: &[u8]) -> (Vec<u8>, usize, usize) {
        let mut out = raw.to_vec();
        let mut found = Vec::new();
        for finder in self.finders.iter() {
            let len = finder.needle().len();
            let mut from = 0;
            while let Some(at) = finder.find(&raw[from..]) {
                let start = from + at;
                out[start..start + len].fill(MASK);
                found.push((start, start + len));
                from = start + 1;
            }
        }
        let mut open = 0;
        for finder in self.finders.iter() {
            let needle = finder.needle();
            let most = (needle.len() - 1).min(raw.len());
            if let Some(n) = (open + 1..=most)
                .rev()
                .find(|n| raw.ends_with(&needle[..*n]))
            {
                open = n;
            }
        }
        let boundary = raw.len() - open;
        // Only a match that starts before the boundary reaches into the held bytes from
        // outside them; one that starts inside is found again with the next frame.
        let covered = found
            .into_iter()
            .filter(|(start, _)| *start < boundary)
            .map(|(_, end)| end.saturating_sub(boundary))
            .max()
            .unwrap_or(0);
        (out, open, covered)
    }

    /// `text`, whole (a header value, a reason phrase): every value masked, and an end that is
    /// the start of a value, [`MIN_CUT_PREFIX`] bytes or more, masked too (what was cut there
    /// still shows the value's start).
    pub fn mask_whole(&self, text: &[u8]) -> Vec<u8> {
        let (mut out, open, _) = self.scan(text);
        if open >= MIN_CUT_PREFIX {
            let len = out.len();
            out[len - open..].fill(MASK);
        }
        out
    }

    /// Masks the values in every header value of `headers`.
    pub fn mask_headers(&self, headers: &mut HeaderMap) {
        for value in headers.values_mut() {
            let masked = self.mask_whole(value.as_bytes());
            if masked != value.as_bytes() {
                // Masking only turns visible bytes into `*`, so this cannot fail; if it did, the
                // value would go rather than stay.
                *value = HeaderValue::from_bytes(&masked)
                    .unwrap_or_else(|_| HeaderValue::from_static("*"));
            }
        }
    }
}

/// The shortest start of a value masked where a text ends (the hook engine's bound too).
pub const MIN_CUT_PREFIX: usize = 4;

/// Whether a response with these (raw, not yet stripped) headers can be masked: its body as
/// hyper hands it over is its content, with no content coding (`Content-Encoding` absent or
/// `identity`) and no transfer coding but `chunked`, which hyper removes.
pub fn readable(headers: &HeaderMap) -> bool {
    let only = |name: http::header::HeaderName, allowed: &str| {
        headers.get_all(name).iter().all(|v| {
            v.to_str().is_ok_and(|v| {
                v.split(',')
                    .all(|c| c.trim().is_empty() || c.trim().eq_ignore_ascii_case(allowed))
            })
        })
    };
    only(http::header::CONTENT_ENCODING, "identity")
        && only(http::header::TRANSFER_ENCODING, "chunked")
}

/// A response body with the values masked, frame by frame.
#[derive(Debug)]
pub struct ScrubBody<B> {
    inner: B,
    secrets: Secrets,
    /// The raw bytes at the end of the last frame that could start a value: sent once the next
    /// frame shows whether they do. Never longer than the longest value.
    held: Vec<u8>,
    /// How many of `held`'s first bytes a value already found covers: masked when sent.
    covered: usize,
    /// Trailers that came while bytes were still held: sent after them.
    trailers: Option<HeaderMap>,
    done: bool,
}

impl<B> ScrubBody<B> {
    pub fn new(inner: B, secrets: Secrets) -> Self {
        Self {
            inner,
            secrets,
            held: Vec::new(),
            covered: 0,
            trailers: None,
            done: false,
        }
    }

    /// `data` after the held bytes, masked: what can be sent now, keeping back an open end.
    fn take(&mut self, data: &[u8]) -> Bytes {
        let mut raw = std::mem::take(&mut self.held);
        raw.extend_from_slice(data);
        let (mut out, open, covered) = self.secrets.scan(&raw);
        out[..self.covered].fill(MASK);
        let boundary = raw.len() - open;
        self.covered = covered.max(self.covered.saturating_sub(boundary));
        self.held = raw.split_off(boundary);
        out.truncate(boundary);
        Bytes::from(out)
    }

    /// The held bytes at the end of the body: what a value found covers, and the whole if it
    /// is a start of a value long enough to tell ([`MIN_CUT_PREFIX`]), masked.
    fn rest(&mut self) -> Bytes {
        let mut out = std::mem::take(&mut self.held);
        let covered = std::mem::take(&mut self.covered).min(out.len());
        out[..covered].fill(MASK);
        if out.len() >= MIN_CUT_PREFIX {
            out.fill(MASK);
        }
        Bytes::from(out)
    }
}

impl<B> Body for ScrubBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        loop {
            if this.done {
                if !this.held.is_empty() {
                    return Poll::Ready(Some(Ok(Frame::data(this.rest()))));
                }
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.done = true,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        let out = this.take(&data);
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(out))));
                        }
                    }
                    Err(frame) => {
                        if let Ok(mut trailers) = frame.into_trailers() {
                            this.secrets.mask_headers(&mut trailers);
                            this.trailers = Some(trailers);
                        }
                        // Trailers end the body: what is held goes first.
                        this.done = true;
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.held.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        // Masking keeps every length: what is held comes on top of what the inner body has
        // left (upper bound first, so the lower never passes it).
        let inner = self.inner.size_hint();
        let held = self.held.len() as u64;
        let mut hint = SizeHint::new();
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + held);
        }
        hint.set_lower(inner.lower() + held);
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    fn secrets(values: &[&str]) -> Secrets {
        Secrets::new(values.iter().map(|v| v.as_bytes())).unwrap()
    }

    /// A body that yields the given frames one by one.
    struct Frames(std::collections::VecDeque<Frame<Bytes>>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    async fn scrubbed(chunks: &[&[u8]], s: &Secrets) -> (Vec<Vec<u8>>, Vec<u8>) {
        let frames = chunks
            .iter()
            .map(|c| Frame::data(Bytes::copy_from_slice(c)))
            .collect();
        let mut body = ScrubBody::new(Frames(frames), s.clone());
        let mut each = Vec::new();
        while let Some(frame) = body.frame().await {
            each.push(frame.unwrap().into_data().unwrap().to_vec());
        }
        let all = each.concat();
        (each, all)
    }

    #[test]
    fn short_values_and_nothing_at_all_mask_nothing() {
        assert!(Secrets::new([b"short".as_slice()]).is_none());
        assert!(Secrets::new(std::iter::empty()).is_none());
        // "Bearer x" is 8 bytes; its token "x" is too short to mask on its own.
        let s = secrets(&["Bearer x"]);
        assert_eq!(s.mask_whole(b"Bearer x and x"), b"******** and x");
    }

    #[test]
    fn the_value_and_its_token_are_masked_wherever_they_stand() {
        let s = secrets(&["Bearer tok-1234567890"]);
        let raw = b"{\"authorization\": \"Bearer tok-1234567890\", \"again\": \"tok-1234567890\"}";
        let text = s.mask_whole(raw);
        assert_eq!(text.len(), raw.len());
        let text = String::from_utf8(text).unwrap();
        assert!(!text.contains("tok-1234567890"), "{text}");
        assert_eq!(
            text,
            "{\"authorization\": \"*********************\", \"again\": \"**************\"}"
        );
    }

    #[tokio::test]
    async fn a_value_split_across_frames_is_masked_and_nothing_else_is_held() {
        let s = secrets(&["Bearer tok-1234567890"]);
        let (each, all) = scrubbed(&[b"echo: Bearer tok-12", b"34567890 end"], &s).await;
        assert_eq!(all, b"echo: ********************* end");
        // The first frame went out at once, up to where the value might start.
        assert_eq!(each[0], b"echo: ");
        // A frame that cannot start a value is not held back at all.
        let (each, _) = scrubbed(&[b"data: 1\n\n", b"data: 2\n\n"], &s).await;
        assert_eq!(each, vec![b"data: 1\n\n".to_vec(), b"data: 2\n\n".to_vec()]);
    }

    #[tokio::test]
    async fn a_value_sent_one_byte_at_a_time_is_masked() {
        let s = secrets(&["Bearer tok-1234567890", "x-team-secret-9"]);
        let text = b"a Bearer tok-1234567890 b x-team-secret-9 c Bearer tok-12345";
        let chunks: Vec<&[u8]> = text.chunks(1).collect();
        let (_, all) = scrubbed(&chunks, &s).await;
        assert_eq!(all.len(), text.len());
        assert_eq!(
            String::from_utf8(all).unwrap(),
            "a ********************* b *************** c ****************"
        );
    }

    #[tokio::test]
    async fn held_bytes_go_before_the_trailers() {
        let s = secrets(&["tok-1234567890"]);
        let mut trailers = HeaderMap::new();
        trailers.insert("x-echo", HeaderValue::from_static("tok-1234567890"));
        let frames = [
            Frame::data(Bytes::from_static(b"ends with tok-1")),
            Frame::trailers(trailers),
        ]
        .into_iter()
        .collect();
        let collected = ScrubBody::new(Frames(frames), s).collect().await.unwrap();
        let trailers = collected.trailers().cloned().unwrap();
        assert_eq!(trailers["x-echo"], "**************");
        // The cut start of the value at the end is masked too.
        assert_eq!(collected.to_bytes().as_ref(), b"ends with *****");
    }

    #[test]
    fn header_values_are_masked_and_encoded_bodies_are_not_readable() {
        let s = secrets(&["tok-1234567890"]);
        let mut headers = HeaderMap::new();
        headers.insert("x-echo", HeaderValue::from_static("got tok-1234567890"));
        headers.insert("content-type", HeaderValue::from_static("text/plain"));
        s.mask_headers(&mut headers);
        assert_eq!(headers["x-echo"], "got **************");
        assert_eq!(headers["content-type"], "text/plain");
        assert!(readable(&headers));
        headers.insert("content-encoding", HeaderValue::from_static("identity"));
        assert!(readable(&headers));
        headers.insert("content-encoding", HeaderValue::from_static("gzip"));
        assert!(!readable(&headers));
        headers.insert("content-encoding", HeaderValue::from_static("identity, br"));
        assert!(!readable(&headers));
        headers.remove("content-encoding");
        headers.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        assert!(readable(&headers));
        headers.insert(
            "transfer-encoding",
            HeaderValue::from_static("gzip, chunked"),
        );
        assert!(!readable(&headers));
    }

    #[tokio::test]
    async fn values_inside_overlapping_or_repeating_each_other_are_masked_whole() {
        // Two values that overlap in the text: their union is masked.
        let s = secrets(&["AAAAAAAA1234", "1234BBBBBBBBBB"]);
        assert_eq!(
            s.mask_whole(b"AAAAAAAA1234BBBBBBBBBB"),
            b"**********************"
        );
        // A value that repeats its own start.
        let s = secrets(&["abcabcab"]);
        assert_eq!(s.mask_whole(b"abcabcabcab"), b"***********");
        // A value that is the start of another, the longer one cut by a frame right after it.
        let s = secrets(&["tok-12345678", "tok-12345678-EXTRA-SECRET"]);
        let (_, all) = scrubbed(&[b"x tok-12345678", b"-EXTRA-SECRET y"], &s).await;
        assert_eq!(all, b"x ************************* y");
        // A value inside another, the longer one cut inside the shorter one.
        let s = secrets(&["acme-prod-1", "sk-acme-prod-1-SECRETXYZ"]);
        let (_, all) = scrubbed(&[b"k=sk-acme-pr", b"od-1-SECRETXYZ;"], &s).await;
        assert_eq!(all, b"k=************************;");
        let (_, all) = scrubbed(&[b"k=sk-acme-prod-1-SEC", b"RETXYZ;"], &s).await;
        assert_eq!(all, b"k=************************;");
    }

    #[tokio::test]
    async fn a_value_cut_at_the_end_of_a_body_or_header_is_masked_from_four_bytes_on() {
        let s = secrets(&["Bearer tok-1234567890"]);
        let (_, all) = scrubbed(&[b"said: Bearer tok-123"], &s).await;
        assert_eq!(all, b"said: **************");
        assert_eq!(s.mask_whole(b"said: Bearer tok-1"), b"said: ************");
        // Three bytes cannot be told from text.
        assert_eq!(s.mask_whole(b"said: Bea"), b"said: Bea");
    }

    #[test]
    fn the_size_hint_counts_held_bytes_without_panicking() {
        let s = secrets(&["tok-1234567890"]);
        let mut body = ScrubBody::new(http_body_util::Full::new(Bytes::new()), s);
        body.held = b"tok-12".to_vec();
        let hint = body.size_hint();
        assert_eq!(hint.exact(), Some(6));
    }

    #[tokio::test]
    async fn a_match_inside_the_held_bytes_does_not_mask_what_comes_before_it() {
        let s = secrets(&["aaaaaaaa", "baaaaaaaaab"]);
        let (_, all) = scrubbed(&[b"baaaaaaaa", b"x"], &s).await;
        assert_eq!(all, s.mask_whole(b"baaaaaaaax"));
        assert_eq!(all, b"b********x");
    }

    #[test]
    fn each_cookie_of_a_cookie_list_is_masked_on_its_own() {
        let s = secrets(&["sid=s3cr3t-v4lue; theme=dark"]);
        assert_eq!(
            s.mask_whole(b"set-cookie: sid=s3cr3t-v4lue; Path=/"),
            b"set-cookie: ****************; Path=/"
        );
        assert_eq!(s.mask_whole(b"v=s3cr3t-v4lue."), b"v=************.");
    }

    #[test]
    fn the_parts_of_a_value_that_count_on_their_own() {
        let as_text = |v: &str| -> Vec<String> {
            parts(v.as_bytes())
                .into_iter()
                .map(|p| String::from_utf8(p).unwrap())
                .collect()
        };
        assert_eq!(
            as_text("Bearer tok-1234567890"),
            ["Bearer tok-1234567890", "tok-1234567890"]
        );
        assert_eq!(
            as_text("sid=s3cr3t-v4lue; theme=dark"),
            [
                "sid=s3cr3t-v4lue; theme=dark",
                "sid=s3cr3t-v4lue; theme=dark".split_once(' ').unwrap().1,
                "sid=s3cr3t-v4lue",
                "s3cr3t-v4lue",
                "theme=dark"
            ]
        );
        assert!(as_text("short").is_empty());
    }
}
