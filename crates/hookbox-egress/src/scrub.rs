//! Keeping injected secrets out of the sandbox when an upstream echoes them back.
//!
//! The proxy injects an allowlist entry's `transform` headers and its credential into a
//! sandbox's request, so the sandbox never holds the secret. An upstream may still send it
//! back: an echo endpoint, a debug page, an error that quotes the key it refused. Every
//! response to a request that carried an injected secret is therefore masked before the
//! sandbox reads it: each occurrence of the secret (and of its [`parts`]: its token after a
//! `Bearer `-style prefix, each `name=value` of a cookie list and its value) in the response's
//! header values and body becomes as many `*` bytes, so lengths and `Content-Length` hold and
//! a streamed body still streams ([`ScrubBody`]).
//!
//! What the sandbox gets must not tell it anything about a secret it does not echo whole: it
//! can have an upstream reflect text of its choosing (a request header copied into a response
//! header, an error quoting its input, a streaming echo), so masking the *start* of a value
//! where a text ends would answer "is this a prefix of the secret?", one guessed byte at a
//! time. Only whole occurrences are masked, and a streamed body is held back by the same rule
//! whatever its content: the last bytes of each frame, as many as the longest value less one,
//! go out with the next frame, at the end, or [`FLUSH_AFTER`] after the upstream paused, so
//! neither the framing nor the timing of what the sandbox reads depends on what it matched.
//! The reason phrase is masked like a header value.
//!
//! Only the bytes as sent can be matched: the request asks for `Accept-Encoding: identity`
//! (and loses any `Range`, with which the sandbox could have a value cut into short pieces),
//! and a response that is encoded anyway (a content coding, or a transfer coding other than
//! `chunked`) is refused with a 502 rather than passed on unread. Not recognised: a value the
//! upstream transformed (base64, escaped) or cut short, the start of one it split across a
//! pause longer than [`FLUSH_AFTER`] (counted from when the upstream went silent; that start
//! has gone out by then), and values under [`MIN_SECRET_LEN`] bytes (they cannot be told apart
//! from ordinary text). Which injected values count as secrets is
//! [`crate::inject::Injected::secret_values`]'s. This module must not decide whether a request
//! is allowed.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use hyper::body::{Body, Frame, SizeHint};

pub use hookbox_protocol::MIN_SECRET_LEN;

/// What every byte of a masked value becomes.
pub const MASK: u8 = b'*';

/// How long held bytes wait for the upstream's next frame before they go out anyway.
pub const FLUSH_AFTER: std::time::Duration = std::time::Duration::from_millis(50);

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
    /// The length of the longest value.
    longest: usize,
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
    /// nothing is left to mask. Their order does not matter: `Self::scan` finds every one in
    /// the raw bytes and masks the union.
    pub fn new<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<Self> {
        let mut all: Vec<Vec<u8>> = values.into_iter().flat_map(parts).collect();
        all.sort();
        all.dedup();
        if all.is_empty() {
            return None;
        }
        let longest = all.iter().map(Vec::len).max().unwrap_or(0);
        let finders = all
            .into_iter()
            .map(|v| memchr::memmem::Finder::new(&v).into_owned())
            .collect();
        Some(Self { finders, longest })
    }

    /// `raw` with every occurrence of every value masked (overlapping ones and values inside
    /// others too: each is found in the raw bytes, and their union masked), and where each
    /// occurrence starts and ends.
    fn scan(&self, raw: &[u8]) -> (Vec<u8>, Vec<(usize, usize)>) {
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
        (out, found)
    }

    /// `text`, whole (a header value, a reason phrase), with every value masked.
    pub fn mask_whole(&self, text: &[u8]) -> Vec<u8> {
        self.scan(text).0
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
    /// The last raw bytes seen, at most the longest value less one: where a value the next
    /// frame completes would start.
    tail: Vec<u8>,
    /// How many of `tail`'s last bytes are not sent yet.
    held: usize,
    /// How many of the held bytes' first ones a value already found covers: masked when sent.
    covered: usize,
    /// Armed while bytes are held and the upstream is silent: they go out when it fires.
    flush: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Trailers that came while bytes were still held: sent after them.
    trailers: Option<HeaderMap>,
    done: bool,
}

impl<B> ScrubBody<B> {
    pub fn new(inner: B, secrets: Secrets) -> Self {
        Self {
            inner,
            secrets,
            tail: Vec::new(),
            held: 0,
            covered: 0,
            flush: None,
            trailers: None,
            done: false,
        }
    }

    /// The held bytes and `data`, masked, less the last `hold` bytes not sent yet, held for
    /// later: as many as the longest value less one after a frame ([`Self::take`]), none at
    /// the end of the body or after the upstream's pause ([`Self::release`]). The tail of the
    /// last bytes seen stays either way, so a value a later frame completes is still masked
    /// from there on.
    fn emit(&mut self, data: &[u8], hold: usize) -> Bytes {
        let keep = self.secrets.longest.saturating_sub(1);
        let mut raw = std::mem::take(&mut self.tail);
        let sent = raw.len() - self.held;
        raw.extend_from_slice(data);
        let (mut out, found) = self.secrets.scan(&raw);
        out[sent..sent + self.covered].fill(MASK);
        let held = hold.min(raw.len() - sent);
        let boundary = raw.len() - held;
        // A value found before the boundary that reaches past it covers held bytes; one that
        // starts after it is found again with the next frame (the tail keeps its start).
        self.covered = found
            .into_iter()
            .filter(|(start, _)| *start < boundary)
            .map(|(_, end)| end.saturating_sub(boundary))
            .chain([(sent + self.covered).saturating_sub(boundary)])
            .max()
            .unwrap_or(0);
        self.held = held;
        self.tail = raw.split_off(raw.len() - keep.min(raw.len()));
        Bytes::from(out[sent..boundary].to_vec())
    }

    /// What can go out after a frame of `data`, whatever its content.
    fn take(&mut self, data: &[u8]) -> Bytes {
        self.emit(data, self.secrets.longest.saturating_sub(1))
    }

    /// The held bytes, all of them.
    fn release(&mut self) -> Bytes {
        self.emit(&[], 0)
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
                if this.held > 0 {
                    return Poll::Ready(Some(Ok(Frame::data(this.release()))));
                }
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => {
                    if this.held == 0 {
                        return Poll::Pending;
                    }
                    let flush = this
                        .flush
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(FLUSH_AFTER)));
                    if flush.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    this.flush = None;
                    return Poll::Ready(Some(Ok(Frame::data(this.release()))));
                }
                Poll::Ready(None) => this.done = true,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.flush = None;
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
        self.done && self.held == 0 && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        // Masking keeps every length: what is held comes on top of what the inner body has
        // left (upper bound first, so the lower never passes it).
        let inner = self.inner.size_hint();
        let held = self.held as u64;
        let mut hint = SizeHint::new();
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(held));
        }
        hint.set_lower(inner.lower().saturating_add(held));
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

    /// A body whose frames come from a channel, pending until the next one is sent.
    struct Channel(tokio::sync::mpsc::Receiver<Bytes>);

    impl Body for Channel {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.0
                .poll_recv(cx)
                .map(|data| data.map(|d| Ok(Frame::data(d))))
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
    async fn a_value_split_across_frames_is_masked() {
        let s = secrets(&["Bearer tok-1234567890"]);
        let (_, all) = scrubbed(&[b"echo: Bearer tok-12", b"34567890 end"], &s).await;
        assert_eq!(all, b"echo: ********************* end");
    }

    /// The sandbox can have an upstream echo text of its choosing, frame by frame: what it gets
    /// back, and in which pieces, must not say whether that text starts a secret.
    #[tokio::test]
    async fn neither_the_bytes_nor_the_framing_say_whether_a_guess_starts_a_value() {
        let s = secrets(&["Bearer tok-1234567890"]);
        let right = [
            b"x: Bearer tok-12".as_slice(),
            b"9 and more text after it",
            b".",
        ];
        let wrong = [
            b"x: Bearer tak-12".as_slice(),
            b"9 and more text after it",
            b".",
        ];
        let (right_each, right_all) = scrubbed(&right, &s).await;
        let (wrong_each, wrong_all) = scrubbed(&wrong, &s).await;
        assert_eq!(right_all, right.concat());
        assert_eq!(wrong_all, wrong.concat());
        let lengths = |each: &[Vec<u8>]| each.iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(lengths(&right_each), lengths(&wrong_each));
        // Whole texts: a header value or reason phrase that ends with a guess.
        assert_eq!(s.mask_whole(b"said: Bearer tok-1"), b"said: Bearer tok-1");
        // The longest value less one byte is held at each frame's end, whatever it is.
        let frame = b"data: 1 and twenty-four more\n\n";
        let (each, _) = scrubbed(&[frame, b"data: 2\n\n"], &s).await;
        assert_eq!(
            each[0],
            frame[..frame.len() - ("Bearer tok-1234567890".len() - 1)]
        );
    }

    /// Held bytes go out once the upstream has been silent for [`FLUSH_AFTER`] (a stream that
    /// pauses is not held up), and a value the next frame completes is still masked from there.
    #[tokio::test(start_paused = true)]
    async fn held_bytes_go_out_when_the_upstream_pauses() {
        let s = secrets(&["Bearer tok-1234567890"]);
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let mut body = ScrubBody::new(Channel(rx), s);
        tx.send(Bytes::from_static(b"event one; Bearer tok-1"))
            .await
            .unwrap();
        let started = tokio::time::Instant::now();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        // 23 bytes, of which the longest value's length less one (20) is held.
        assert_eq!(first.as_ref(), b"eve");
        let held = tokio::time::timeout(FLUSH_AFTER * 10, body.frame())
            .await
            .expect("the held bytes never went out")
            .unwrap()
            .unwrap()
            .into_data()
            .unwrap();
        assert_eq!(held.as_ref(), b"nt one; Bearer tok-1");
        assert!(started.elapsed() >= FLUSH_AFTER);
        tx.send(Bytes::from_static(b"234567890 two")).await.unwrap();
        drop(tx);
        let rest = body.collect().await.unwrap().to_bytes();
        assert_eq!(rest.as_ref(), b"********* two");
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
            "a ********************* b *************** c Bearer tok-12345"
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
        assert_eq!(collected.to_bytes().as_ref(), b"ends with tok-1");
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

    #[test]
    fn the_size_hint_counts_held_bytes_without_panicking() {
        let s = secrets(&["tok-1234567890"]);
        let mut body = ScrubBody::new(http_body_util::Full::new(Bytes::new()), s);
        body.tail = b"tok-12".to_vec();
        body.held = 6;
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
