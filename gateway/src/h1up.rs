//! An HTTP/1.1 exchange with the upstream that runs inside the request's
//! own task: the request is written, the response head read and parsed
//! (`httparse`, as hyper does), and the body streamed to the client straight
//! from the socket as the client's side polls it.
//!
//! Why not hyper's `client::conn` for every request: it runs each upstream
//! connection as a task of its own, fed through channels (a request queue,
//! a oneshot for the response, a "want" signal for flow), so one proxied
//! request cost five task polls and four wake-ups besides the client's own,
//! and a dozen allocations (issue 16). A worker here owns its connections
//! outright, as an nginx worker does; nothing else can touch a connection
//! while a request uses it, so there is nothing to hand over.
//!
//! What is sent this way: every request whose body is known before it is
//! sent (none, or one middleware buffered). A request whose body is still
//! streaming from the client goes through hyper's `client::conn`
//! ([`crate::pool`]), which writes the body while it watches for an early
//! answer (a 413 before the upload ends).
//!
//! The response is read as RFC 9112 §6.3 says: interim 1xx answers are
//! skipped (a 101 is refused: no upgrade is ever asked for); HEAD, 204 and
//! 304 answers have no body; a `Transfer-Encoding` of `chunked` is decoded
//! (any other coding is refused, as Go's client refuses it: the client
//! would get coded bytes unlabelled); else `Content-Length`, which must be
//! one number (repeats equal, passed on as one); else the body ends when
//! the upstream closes. A connection goes back to
//! the pool only when its response ended exactly where its framing said, with
//! no stray bytes after it, and neither side said `close` (HTTP/1.0:
//! unless the upstream said `keep-alive`).

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::intern::{with_wire_names, Wire};
use crate::pool::{Pool, UpstreamId};

/// At most this many response header fields (hyper's default too).
const MAX_HEADERS: usize = 100;
/// The longest response head (status line and fields) read; each interim
/// answer is held to it on its own, as hyper's `max_header_size` does (the
/// pool's client is given the same bound).
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// At most this many interim (1xx) answers before the final one, as Go's
/// client (so Tyk) allows: an upstream that sends them without end would
/// hold the worker parsing until `--upstream-timeout`.
pub(crate) const MAX_INTERIM: u8 = 5;
/// The longest chunk-size line or trailer line.
const MAX_LINE: usize = 4096;
/// Bytes asked of the socket per read.
const READ_SIZE: usize = 16 * 1024;
/// A buffered body up to this size is written in the same write as the head.
const COALESCE: usize = 16 * 1024;

/// One upstream connection: the socket, the bytes read past the last
/// response parsed, and the timer its exchanges are timed with.
pub struct UpConn {
    io: TcpStream,
    buf: BytesMut,
    /// Made at the first exchange, moved at each next one.
    timer: Option<Pin<Box<Sleep>>>,
}

/// Why an exchange failed.
#[derive(Debug)]
pub enum Failure {
    /// Nothing of a response arrived: the connection was closed or reset
    /// (a pooled one the upstream had given up on). `written` says whether
    /// any of the request may have reached the upstream.
    Stale {
        /// What happened, in plain words.
        cause: &'static str,
        /// Some of the request may have been written.
        written: bool,
    },
    /// The upstream answered something that is not a valid response.
    Bad(String),
    /// The socket failed mid-exchange.
    Io(io::Error),
    /// No response head by the exchange's deadline (`--upstream-timeout`).
    TimedOut,
}

/// A parsed response head and how its body is framed.
pub struct Head {
    /// The final status (interim 1xx answers skipped).
    pub status: StatusCode,
    /// The upstream's HTTP version.
    pub version: Version,
    /// The response's header fields as sent.
    pub headers: HeaderMap,
    framing: Framing,
    reusable: bool,
}

/// How a response body ends (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// No body (HEAD, 1xx, 204, 304).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Until the upstream closes.
    Close,
}

impl UpConn {
    /// A connection on `io`, with nothing read yet.
    pub fn new(io: TcpStream) -> UpConn {
        UpConn {
            io,
            buf: BytesMut::new(),
            timer: None,
        }
    }

    /// The socket.
    pub fn into_stream(self) -> TcpStream {
        self.io
    }

    /// True when an idle connection can take a request: nothing arrived on
    /// it while it sat in the pool (neither a close nor stray bytes). Costs
    /// no system call unless the socket has signalled readiness.
    pub fn still_open(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match self.io.poll_read_ready(&mut cx) {
            Poll::Pending => true,
            Poll::Ready(Err(_)) => false,
            // Readable: a FIN, a reset or bytes nobody asked for; or a stale
            // readiness, which the read clears.
            Poll::Ready(Ok(())) => {
                let mut probe = [0u8; 1];
                matches!(self.io.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
        }
    }

    /// Writes the request (`head` then `body`) and reads the response head,
    /// by `deadline`.
    ///
    /// The deadline is this connection's own timer, moved from one exchange
    /// to the next: moving a registered timer later is an atomic store,
    /// where a new timer per request (`tokio::time::timeout`) was registered
    /// in the runtime's wheel and removed again (~500 instructions).
    pub async fn exchange(
        &mut self,
        head: &[u8],
        body: &[u8],
        method: &Method,
        deadline: Instant,
    ) -> Result<Head, Failure> {
        let mut timer = match self.timer.take() {
            Some(mut t) => {
                t.as_mut().reset(deadline);
                t
            }
            None => Box::pin(tokio::time::sleep_until(deadline)),
        };
        let head_request = method == Method::HEAD;
        let result = {
            let mut work = std::pin::pin!(async {
                self.write_request(head, body).await?;
                self.read_head(head_request).await
            });
            // The exchange first: an answer that is ready wins over a timer
            // that is too (as `tokio::time::timeout` polls).
            std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = work.as_mut().poll(cx) {
                    return Poll::Ready(r);
                }
                timer.as_mut().poll(cx).map(|()| Err(Failure::TimedOut))
            })
            .await
        };
        self.timer = Some(timer);
        result
    }

    async fn write_request(&mut self, head: &[u8], body: &[u8]) -> Result<(), Failure> {
        // The first write's failure means nothing was sent.
        let n = self
            .io
            .write(head)
            .await
            .map_err(|e| stale_write(e, false))?;
        let rest = &head[n..];
        self.io
            .write_all(rest)
            .await
            .map_err(|e| stale_write(e, true))?;
        if !body.is_empty() {
            self.io
                .write_all(body)
                .await
                .map_err(|e| stale_write(e, true))?;
        }
        Ok(())
    }

    async fn read_head(&mut self, head_request: bool) -> Result<Head, Failure> {
        let mut got_any = false;
        let mut interim = 0;
        loop {
            if !self.buf.is_empty() {
                got_any = true;
                match parse_unfolding(&mut self.buf, head_request, &mut interim)? {
                    Some(head) => return Ok(head),
                    None if self.buf.len() > MAX_HEAD => return Err(head_too_long()),
                    None => {}
                }
            }
            self.buf.reserve(READ_SIZE);
            match self.io.read_buf(&mut self.buf).await {
                Ok(0) if !got_any => {
                    return Err(Failure::Stale {
                        cause: "the upstream closed the connection without answering",
                        written: true,
                    })
                }
                Ok(0) => {
                    return Err(Failure::Bad(
                        "the upstream closed the connection in the middle of the response head"
                            .into(),
                    ))
                }
                Ok(_) => {}
                Err(e) if !got_any && is_reset(&e) => {
                    return Err(Failure::Stale {
                        cause: "the upstream reset the connection without answering",
                        written: true,
                    })
                }
                Err(e) => return Err(Failure::Io(e)),
            }
        }
    }
}

/// Counts the interim (1xx) answers hyper's client skips for one request,
/// and gives up the exchange past [`MAX_INTERIM`], as the in-task reader
/// does (Go's client allows as many): the gateway's upstream client and
/// the JS host's call outs. hyper's own bound is per head: an upstream
/// sending 1xx heads without end held the worker (or the VM thread)
/// parsing them until the deadline.
#[derive(Default)]
pub(crate) struct Interim {
    seen: AtomicU8,
    over: tokio::sync::Notify,
}

impl Interim {
    /// A count of `req`'s interim answers.
    pub(crate) fn watch<B>(req: &mut http::Request<B>) -> Arc<Interim> {
        let watch = Arc::new(Interim::default());
        let seen = watch.clone();
        hyper::ext::on_informational(req, move |_| {
            let before = seen.seen.fetch_add(1, Relaxed);
            if before == MAX_INTERIM {
                seen.over.notify_one();
            }
        });
        watch
    }

    /// `exchange`'s result (its error as `Some`), or `Err(None)` once the
    /// upstream has sent one interim answer too many, even when the final
    /// one came in the same read. The exchange is dropped then: its
    /// connection must not be used again.
    pub(crate) async fn race<T, E>(
        &self,
        exchange: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Option<E>> {
        let r = tokio::select! {
            biased;
            r = exchange => r.map_err(Some),
            () = self.over.notified() => return Err(None),
        };
        if self.seen.load(Relaxed) > MAX_INTERIM {
            return Err(None);
        }
        r
    }
}

#[cold]
fn too_many_interim() -> Failure {
    Failure::Bad(format!(
        "the upstream sent more than {MAX_INTERIM} interim (1xx) answers"
    ))
}

#[cold]
fn head_too_long() -> Failure {
    Failure::Bad(format!(
        "the response head is longer than {} KiB",
        MAX_HEAD / 1024
    ))
}

fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    )
}

fn stale_write(e: io::Error, written: bool) -> Failure {
    if is_reset(&e) {
        Failure::Stale {
            cause: "the upstream had closed the connection (broken pipe)",
            written,
        }
    } else {
        Failure::Io(e)
    }
}

/// Parses one response head from the front of `buf`, skipping interim
/// answers (counted in `interim`, at most [`MAX_INTERIM`]); `None` when
/// more bytes are needed. The head's bytes are taken off `buf`; header
/// values share them (one allocation for all).
fn parse_head(
    buf: &mut BytesMut,
    head_request: bool,
    interim: &mut u8,
) -> Result<Option<Head>, Failure> {
    loop {
        // Uninitialised: zeroing 100 fields per response cost more than
        // parsing them.
        let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut spans = [const { MaybeUninit::<Span>::uninit() }; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            buf,
            &mut fields,
        );
        let len = match parsed {
            // Whole in the buffer is no excuse: a head that arrived in one
            // read is held to the same bound as one that trickled in.
            Ok(httparse::Status::Complete(len)) if len > MAX_HEAD => return Err(head_too_long()),
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => {
                return Err(Failure::Bad(format!(
                    "the response head is not HTTP/1.x: {e}"
                )))
            }
        };
        let code = resp.code.unwrap_or(0);
        if code == 101 {
            // The gateway removes the client's `Upgrade` (hop-by-hop) and
            // never asks for one itself: a switch nobody asked for would
            // hand the client bytes of a protocol it never chose, on a
            // connection it still speaks HTTP on (nginx: 502).
            return Err(Failure::Bad(
                "the upstream switched protocols (101) though no upgrade was asked for".into(),
            ));
        }
        if (100..200).contains(&code) {
            if *interim >= MAX_INTERIM {
                return Err(too_many_interim());
            }
            *interim += 1;
            buf.advance(len);
            continue;
        }
        let status = StatusCode::from_u16(code)
            .map_err(|_| Failure::Bad(format!("status code {code} is not valid")))?;
        let version = match resp.version {
            Some(1) => Version::HTTP_11,
            _ => Version::HTTP_10,
        };
        // Where each field lies in `buf`, so that the values can share one
        // frozen copy of the head.
        let base = buf.as_ptr() as usize;
        let count = resp.headers.len();
        for (span, h) in spans.iter_mut().zip(resp.headers.iter()) {
            span.write(Span {
                name: (h.name.as_ptr() as usize - base, h.name.len()),
                value: (h.value.as_ptr() as usize - base, h.value.len()),
            });
        }
        let bytes = buf.split_to(len).freeze();
        // One more than the upstream sent: writing the response to the
        // client, hyper takes an entry for `Connection` (to see whether to
        // add `keep-alive`), and that entry would grow a full map (a new
        // table, every header hashed again).
        let mut headers = HeaderMap::with_capacity(count + 1);
        let mut seen = Seen::default();
        with_wire_names(Wire::Response, |names| {
            for span in &spans[..count] {
                // SAFETY: the loop above wrote the first `count` spans.
                let Span {
                    name: (n, nl),
                    value: (v, vl),
                } = unsafe { span.assume_init_read() };
                let name = names
                    .get(&bytes[n..n + nl], HeaderName::from_bytes)
                    .map_err(|_| Failure::Bad("a response header name is not valid".into()))?;
                let value = HeaderValue::from_maybe_shared(bytes.slice(v..v + vl))
                    .map_err(|_| Failure::Bad(format!("the {name} header's value is not valid")))?;
                seen.note(&name, &bytes[v..v + vl]);
                headers.append(name, value);
            }
            Ok::<_, Failure>(())
        })?;
        let framing = framing(status, &mut headers, head_request, seen)?;
        let reusable = framing != Framing::Close
            && status != StatusCode::SWITCHING_PROTOCOLS
            && match seen.connection {
                true => keeps_alive(version, &headers),
                false => version == Version::HTTP_11,
            };
        return Ok(Some(Head {
            status,
            version,
            headers,
            framing,
            reusable,
        }));
    }
}

/// [`parse_head`], and for a head it refuses, the same head with its
/// folded values (obs-fold, RFC 9112 §5.2) on one line each: Go's client
/// (so Tyk) reads a folded value as one line. Only a refused head is
/// looked at again ([`unfold_head`]), so the common head pays nothing
/// (the check inside `parse_head` cost ~100 instructions a request: the
/// compiler then left its header loop and `framing` out of line).
fn parse_unfolding(
    buf: &mut BytesMut,
    head_request: bool,
    interim: &mut u8,
) -> Result<Option<Head>, Failure> {
    loop {
        match parse_head(buf, head_request, interim) {
            // Refused by the parser for a header name (a line that starts
            // with a space is none), so before `parse_head` took anything
            // off `buf`: the head is still there to look at again.
            Err(Failure::Bad(why)) if why.ends_with(&httparse::Error::HeaderName.to_string()) => {
                match unfold_head(buf) {
                    Unfolded::Again => continue,
                    Unfolded::Partial => return Ok(None),
                    Unfolded::NoFold => return Err(Failure::Bad(why)),
                }
            }
            other => return other,
        }
    }
}

/// What [`unfold_head`] made of a head the parser refused.
enum Unfolded {
    /// Its folded values are now on one line each: read it again.
    Again,
    /// It has not arrived whole.
    Partial,
    /// It has no folded value: it is refused for what it is.
    NoFold,
}

/// The head at the front of `buf`, whose folded header values (obs-fold)
/// are put on one line each ([`unfold`]), the head rewritten in place of
/// the old one (the bytes after it kept). Rare: a copy is fine.
#[cold]
#[inline(never)]
fn unfold_head(buf: &mut BytesMut) -> Unfolded {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut fields);
    let parsed = httparse::ParserConfig::default()
        .allow_obsolete_multiline_headers_in_responses(true)
        .parse_response(&mut resp, buf);
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Unfolded::Partial,
        Err(_) => return Unfolded::NoFold,
    };
    if !resp.headers.iter().any(|h| h.value.contains(&b'\n')) {
        // Unfolded already, or refused for another reason: never again.
        return Unfolded::NoFold;
    }
    let status_line = buf.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut head = Vec::with_capacity(len);
    head.extend_from_slice(&buf[..status_line]);
    for h in resp.headers.iter() {
        let mut value = h.value.to_vec();
        let n = unfold(&mut value);
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(&value[..n]);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    let rest = buf.split_off(len);
    buf.clear();
    buf.extend_from_slice(&head);
    buf.unsplit(rest);
    Unfolded::Again
}

/// A header value that went on over more lines (obs-fold) as one line, in
/// place: each line's surrounding whitespace dropped, the lines joined by
/// one space, as Go's `textproto` and hyper's client read it (so both of
/// this gateway's upstream clients give the same value). Returns the new
/// length; a value on one line is left as it is.
fn unfold(value: &mut [u8]) -> usize {
    let mut out = 0;
    let mut start = 0;
    loop {
        let end = value[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(value.len(), |i| start + i);
        let line = value[start..end].trim_ascii();
        let from = line.as_ptr() as usize - value.as_ptr() as usize;
        let n = line.len();
        if start > 0 {
            // Where the line end was, or before it: never past what is
            // still to be read.
            value[out] = b' ';
            out += 1;
        }
        value.copy_within(from..from + n, out);
        out += n;
        if end == value.len() {
            return out;
        }
        start = end + 1;
    }
}

/// Which of the headers that frame a response it has, noted while its
/// head is read: most responses have `Content-Length` alone, and then the
/// map is not searched (hashed) for the other two.
#[derive(Clone, Copy, Default)]
struct Seen<'a> {
    transfer_encoding: bool,
    content_length: bool,
    connection: bool,
    /// The value of the `Content-Length` field when there is one field.
    only_length: Option<&'a [u8]>,
}

impl<'a> Seen<'a> {
    #[inline(always)]
    fn note(&mut self, name: &HeaderName, value: &'a [u8]) {
        self.transfer_encoding |= name == header::TRANSFER_ENCODING;
        self.connection |= name == header::CONNECTION;
        if name == header::CONTENT_LENGTH {
            self.only_length = (!self.content_length).then_some(value);
            self.content_length = true;
        }
    }
}

/// Where one header field's name and value lie in the head: (offset, length).
#[derive(Clone, Copy)]
struct Span {
    name: (usize, usize),
    value: (usize, usize),
}

/// Refuses a `Transfer-Encoding` other than `chunked` alone: the body
/// goes to the client re-framed, without the upstream's
/// `Transfer-Encoding` (hop-by-hop), so a `gzip` coding in it would reach
/// the client as unlabelled compressed bytes. Go's client (Tyk) refuses
/// such a response, and nginx answers 502. Shared with the hyper path
/// (`upstream::finish`).
pub(crate) fn only_chunked(headers: &HeaderMap) -> Result<(), String> {
    for v in headers.get_all(header::TRANSFER_ENCODING) {
        for coding in v.as_bytes().split(|&b| b == b',') {
            if !coding.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                return Err(format!(
                    "the response's Transfer-Encoding {:?} is not chunked alone",
                    String::from_utf8_lossy(v.as_bytes())
                ));
            }
        }
    }
    Ok(())
}

/// How the body of a response with this head is delimited. Repeated
/// equal `Content-Length` values (`5, 5`) are one length, and the client
/// gets that one value.
fn framing(
    status: StatusCode,
    headers: &mut HeaderMap,
    head_request: bool,
    seen: Seen,
) -> Result<Framing, Failure> {
    if head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Empty);
    }
    if seen.transfer_encoding {
        if seen.content_length {
            // Framed two ways: whichever we believed, the client might
            // believe the other (response splitting).
            return Err(Failure::Bad(
                "the response has both Content-Length and Transfer-Encoding".into(),
            ));
        }
        only_chunked(headers).map_err(Failure::Bad)?;
        return Ok(Framing::Chunked);
    }
    if !seen.content_length {
        return Ok(Framing::Close);
    }
    let mut length = None;
    let mut parts = 0;
    let mut add = |v: &[u8]| {
        for part in v.split(|&b| b == b',') {
            let n = decimal(part.trim_ascii()).ok_or_else(|| {
                Failure::Bad(format!(
                    "Content-Length {:?} is not a number",
                    String::from_utf8_lossy(v)
                ))
            })?;
            if length.is_some_and(|l| l != n) {
                return Err(Failure::Bad(
                    "the response has Content-Length values that differ".into(),
                ));
            }
            length = Some(n);
            parts += 1;
        }
        Ok(())
    };
    match seen.only_length {
        // One field: the value noted while the head was read.
        Some(v) => add(v)?,
        None => {
            for v in headers.get_all(header::CONTENT_LENGTH) {
                add(v.as_bytes())?;
            }
        }
    }
    if let (Some(n), 2..) = (length, parts) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    Ok(match length {
        Some(0) => Framing::Empty,
        Some(n) => Framing::Length(n),
        None => Framing::Close,
    })
}

/// `digits` as a number: ASCII digits only (no sign, no space), at least
/// one, and no more than a `u64` holds.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
            .flatten()
    })
}

/// Whether the connection may carry another request after this response.
fn keeps_alive(version: Version, headers: &HeaderMap) -> bool {
    let mut close = false;
    let mut keep_alive = false;
    for v in headers.get_all(header::CONNECTION) {
        for token in v.to_str().unwrap_or("").split(',') {
            let token = token.trim();
            close |= token.eq_ignore_ascii_case("close");
            keep_alive |= token.eq_ignore_ascii_case("keep-alive");
        }
    }
    !close && (version == Version::HTTP_11 || keep_alive)
}

/// Writes a request head as hyper's client does with title-case header
/// names (`X-Forwarded-For`: the names Go, and so Tyk, sends), adding
/// `Content-Length` for a body when the headers have none. `target`
/// writes the origin-form request target.
pub fn encode_head(
    dst: &mut Vec<u8>,
    method: &Method,
    target: impl FnOnce(&mut Vec<u8>),
    headers: &HeaderMap,
    added: &crate::upstream::Added,
    body_len: usize,
) {
    dst.extend_from_slice(method.as_str().as_bytes());
    dst.push(b' ');
    target(dst);
    dst.extend_from_slice(b" HTTP/1.1\r\n");
    let mut has_length = false;
    let host = added.host_in_place();
    for (name, value) in headers {
        // The body is sent as one known length, never chunked.
        if name == header::TRANSFER_ENCODING {
            continue;
        }
        has_length |= name == header::CONTENT_LENGTH;
        let value = match host {
            Some(h) if name == header::HOST => h,
            _ => value,
        };
        title_case(dst, name.as_str().as_bytes());
        dst.extend_from_slice(b": ");
        dst.extend_from_slice(value.as_bytes());
        dst.extend_from_slice(b"\r\n");
    }
    for (name, value) in added.lines() {
        dst.extend_from_slice(name);
        dst.extend_from_slice(b": ");
        dst.extend_from_slice(value);
        dst.extend_from_slice(b"\r\n");
    }
    if body_len > 0 && !has_length {
        use std::io::Write as _;
        let _ = write!(dst, "Content-Length: {body_len}\r\n");
    }
    dst.extend_from_slice(b"\r\n");
}

fn title_case(dst: &mut Vec<u8>, name: &[u8]) {
    // Copied whole, then capitalised in place (a push per byte checked the
    // capacity per byte), eight bytes at a time: a byte-at-a-time loop was
    // ~5 instructions a byte, ~90 for a name like `X-Custom-GoPlugin`.
    let start = dst.len();
    dst.extend_from_slice(name);
    let out = &mut dst[start..];
    // 1 when the next byte starts a word: the first one, or one after `-`.
    let mut starts_word = 1u64;
    let (chunks, rest) = out.as_chunks_mut::<8>();
    for chunk in chunks {
        let x = u64::from_le_bytes(*chunk);
        let dashes = bytes_equal(x, b'-');
        // The high bit of each byte that starts a word: after a dash in
        // this chunk, or the first byte after the last chunk's.
        let starts = (dashes << 8) | (starts_word << 7);
        starts_word = dashes >> 63;
        let upper = starts & lowercase(x);
        // 0x80 >> 2 is 0x20, the case bit.
        *chunk = (x - (upper >> 2)).to_le_bytes();
    }
    let mut word_start = starts_word == 1;
    for c in rest {
        if word_start {
            c.make_ascii_uppercase();
        }
        word_start = *c == b'-';
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `x` equal to `b` (exactly: no carries
/// cross bytes).
fn bytes_equal(x: u64, b: u8) -> u64 {
    let t = x ^ (ONES * u64::from(b));
    !(((t & !HIGH) + !HIGH) | t) & HIGH
}

/// The high bit of each byte of `x` in `a..=z`.
fn lowercase(x: u64) -> u64 {
    let low7 = x & !HIGH;
    // A byte's high bit, after adding: set from `a` up, and from past `z` up.
    let from_a = low7 + ONES * u64::from(0x80 - b'a');
    let past_z = low7 + ONES * u64::from(0x80 - b'z' - 1);
    from_a & !past_z & !x & HIGH
}

/// Whether a buffered body of `len` bytes goes in the head's write.
pub fn coalesce(len: usize) -> bool {
    len <= COALESCE
}

/// The response body, read from the connection as the client's side polls
/// it; at its clean end the connection goes back to the pool.
pub struct RawBody {
    /// `None` once given back or closed.
    conn: Option<UpConn>,
    state: State,
    reusable: bool,
    home: Option<(Rc<Pool>, UpstreamId)>,
    /// Trailers of a chunked body, once read. Boxed: rare, and the body is
    /// moved with each response (a map inline was 88 more bytes a move).
    trailers: Option<Box<HeaderMap>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// This many bytes of a Content-Length body left.
    Length(u64),
    /// At a chunk-size line.
    ChunkSize,
    /// This many bytes of the current chunk left.
    ChunkData(u64),
    /// The CRLF after a chunk's data.
    ChunkEnd,
    /// Trailer lines, up to the empty one.
    Trailers,
    /// Until the upstream closes.
    Close,
    /// The body ended.
    Done,
}

impl RawBody {
    /// The body of the response `head` read from `conn`; `home` is where the
    /// connection returns at the end.
    pub fn new(conn: UpConn, head: &Head, home: (Rc<Pool>, UpstreamId)) -> RawBody {
        let state = match head.framing {
            Framing::Empty => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::ChunkSize,
            Framing::Close => State::Close,
        };
        let mut body = RawBody {
            conn: Some(conn),
            state,
            reusable: head.reusable,
            home: Some(home),
            trailers: None,
        };
        if state == State::Done {
            body.finish();
        }
        body
    }

    /// The body ended where its framing said: the connection goes back to
    /// the pool if it may carry another request and nothing follows.
    fn finish(&mut self) {
        self.state = State::Done;
        let (Some(conn), Some((pool, id))) = (self.conn.take(), self.home.take()) else {
            return;
        };
        // Not with bytes after the response that nobody asked for.
        if self.reusable && conn.buf.is_empty() {
            pool.checkin_raw(id, conn);
        }
    }

    /// Reads more into the buffer; `Ok(false)` at end of stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<io::Result<bool>> {
        let conn = self.conn.as_mut().expect("polled after the end");
        conn.buf.reserve(want.clamp(1, 4 * READ_SIZE));
        loop {
            ready!(conn.io.poll_read_ready(cx))?;
            match crate::wire::read_drained(&conn.io, &mut conn.buf) {
                Ok(n) => return Poll::Ready(Ok(n > 0)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn buf(&mut self) -> &mut BytesMut {
        &mut self.conn.as_mut().expect("polled after the end").buf
    }

    /// One line (without its CRLF) from the front of the buffer, or `None`
    /// when it has not all arrived. A line ending in a bare LF is an error,
    /// as in hyper (our chunked uploads' client) and Go since 1.23.8
    /// (CVE-2025-22871): waiting for a CRLF that never came held such a
    /// body until the read timeout (60 s), then cut it short.
    fn take_line(&mut self) -> Result<Option<Bytes>, BodyError> {
        let buf = self.buf();
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) if i == 0 || buf[i - 1] != b'\r' => {
                Err(BodyError::bad("a chunk line ends in a bare LF"))
            }
            Some(i) => {
                let line = buf.split_to(i - 1).freeze();
                buf.advance(2);
                Ok(Some(line))
            }
            None if buf.len() > MAX_LINE => Err(BodyError::bad("a chunk line is too long")),
            None => Ok(None),
        }
    }

    fn step(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        loop {
            match self.state {
                State::Done => {
                    return Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(*t))))
                }
                State::Length(0) => self.finish(),
                State::Length(left) | State::ChunkData(left) => {
                    if self.buf().is_empty() {
                        if !ready!(self.poll_fill(cx, left.min(usize::MAX as u64) as usize))? {
                            return Poll::Ready(Some(Err(BodyError::bad(
                                "the upstream closed the connection before the body's end",
                            ))));
                        }
                        continue;
                    }
                    let n = (self.buf().len() as u64).min(left);
                    let data = self.buf().split_to(n as usize).freeze();
                    self.state = match self.state {
                        State::Length(_) => State::Length(left - n),
                        _ if left == n => State::ChunkEnd,
                        _ => State::ChunkData(left - n),
                    };
                    if self.state == State::Length(0) {
                        // Given back before the last frame is even written.
                        self.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                State::Close => {
                    if self.buf().is_empty() {
                        if !ready!(self.poll_fill(cx, READ_SIZE))? {
                            self.reusable = false;
                            self.finish();
                        }
                        continue;
                    }
                    let data = self.buf().split().freeze();
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                State::ChunkSize | State::ChunkEnd | State::Trailers => match self.take_line()? {
                    Some(line) => self.on_line(&line)?,
                    None => {
                        if !ready!(self.poll_fill(cx, READ_SIZE))? {
                            return Poll::Ready(Some(Err(BodyError::bad(
                                "the upstream closed the connection in the middle of a chunked body",
                            ))));
                        }
                    }
                },
            }
        }
    }

    fn on_line(&mut self, line: &[u8]) -> Result<(), BodyError> {
        match self.state {
            State::ChunkSize => {
                let size = chunk_size(line)?;
                self.state = if size == 0 {
                    State::Trailers
                } else {
                    State::ChunkData(size)
                };
            }
            State::ChunkEnd if line.is_empty() => self.state = State::ChunkSize,
            State::ChunkEnd => {
                return Err(BodyError::bad("a chunk's data is longer than its size"))
            }
            State::Trailers if line.is_empty() => self.finish(),
            State::Trailers => {
                let (name, value) = trailer(line)?;
                let map = self.trailers.get_or_insert_with(Box::default);
                if map.len() >= MAX_HEADERS {
                    return Err(BodyError::bad("too many trailer fields"));
                }
                map.append(name, value);
            }
            _ => unreachable!("lines are read only in chunk states"),
        }
        Ok(())
    }
}

/// A chunk-size line: hex digits, then optional extensions (ignored).
fn chunk_size(line: &[u8]) -> Result<u64, BodyError> {
    let end = line
        .iter()
        .position(|&b| b == b';' || b == b' ' || b == b'\t')
        .unwrap_or(line.len());
    let digits = &line[..end];
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err(BodyError::bad("a chunk size is not a hexadecimal number"));
    }
    let text = std::str::from_utf8(digits).expect("hex digits are ASCII");
    Ok(u64::from_str_radix(text, 16).expect("at most 15 hex digits"))
}

fn trailer(line: &[u8]) -> Result<(HeaderName, HeaderValue), BodyError> {
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .ok_or_else(|| BodyError::bad("a trailer line has no colon"))?;
    let name = HeaderName::from_bytes(&line[..colon])
        .map_err(|_| BodyError::bad("a trailer name is not valid"))?;
    let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii())
        .map_err(|_| BodyError::bad("a trailer value is not valid"))?;
    Ok((name, value))
}

/// A response body that could not be read to its end.
#[derive(Debug)]
pub enum BodyError {
    /// The body broke its framing (or ended early).
    Bad(&'static str),
    /// The socket failed.
    Io(io::Error),
}

impl BodyError {
    fn bad(what: &'static str) -> BodyError {
        BodyError::Bad(what)
    }
}

impl From<io::Error> for BodyError {
    fn from(e: io::Error) -> Self {
        BodyError::Io(e)
    }
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Bad(what) => write!(f, "bad response body from upstream: {what}"),
            BodyError::Io(e) => write!(f, "reading the upstream's response body: {e}"),
        }
    }
}

impl std::error::Error for BodyError {}

impl Body for RawBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        let polled = this.step(cx);
        if let Poll::Ready(Some(Err(_))) = polled {
            // Never reuse a connection whose response broke.
            this.conn = None;
            this.home = None;
            this.state = State::Done;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.state == State::Done && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.state {
            State::Done => SizeHint::with_exact(0),
            State::Length(n) => SizeHint::with_exact(n),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(bytes: &[u8], head_request: bool) -> Result<Option<Head>, Failure> {
        let mut buf = BytesMut::from(bytes);
        parse_head(&mut buf, head_request, &mut 0)
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let cases: [(&[u8], bool, Option<Framing>, bool); 13] = [
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", false, Some(Framing::Length(5)), true),
            // Two equal fields are one length; any spelling of the names.
            (b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nCONTENT-LENGTH: 7\r\n\r\n", false, Some(Framing::Length(7)), true),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n", false, Some(Framing::Length(u64::MAX)), true),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", false, Some(Framing::Empty), false),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive\r\n\r\n", false, Some(Framing::Length(2)), true),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: upgrade, CLOSE\r\n\r\n", false, Some(Framing::Length(2)), false),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true, Some(Framing::Empty), true),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", false, Some(Framing::Length(5)), true),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", false, Some(Framing::Chunked), true),
            (b"HTTP/1.1 200 OK\r\n\r\n", false, Some(Framing::Close), false),
            (b"HTTP/1.1 204 No Content\r\n\r\n", false, Some(Framing::Empty), true),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false, Some(Framing::Length(1)), false),
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n", false, Some(Framing::Empty), false),
        ];
        for (bytes, is_head, framing, reusable) in cases {
            let h = head(bytes, is_head).ok().flatten();
            let what = String::from_utf8_lossy(bytes);
            assert_eq!(h.as_ref().map(|h| h.framing), framing, "{what}");
            assert_eq!(h.map(|h| h.reusable), Some(reusable), "{what}");
        }
    }

    #[test]
    fn bad_heads_are_refused_and_partial_ones_wait() {
        for bad in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5,\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\ncontent-length: 5\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"SSH-2.0-OpenSSH_9.2\r\n",
        ] {
            assert!(
                matches!(head(bad, false), Err(Failure::Bad(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(matches!(
            head(b"HTTP/1.1 200 OK\r\nContent-Le", false),
            Ok(None)
        ));
        assert!(matches!(
            head(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2", false),
            Ok(None)
        ));
    }

    #[test]
    fn header_values_share_the_head_and_the_rest_stays_buffered() {
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 200 OK\r\nX-A: 1\r\nx-b: two\r\nContent-Length: 3\r\n\r\nabcHTTP"[..],
        );
        let h = parse_head(&mut buf, false, &mut 0).ok().flatten().unwrap();
        assert_eq!(h.headers["x-a"], "1");
        assert_eq!(h.headers["x-b"], "two");
        assert_eq!(&buf[..], b"abcHTTP");
    }

    #[test]
    fn folded_values_are_read_as_one_line() {
        for (raw, want) in [
            (&b"a"[..], &b"a"[..]),
            (b"", b""),
            (b"first\r\n second", b"first second"),
            (b"first \r\n\t \tsecond\t\r\n  third", b"first second third"),
            (b"bare\n lf", b"bare lf"),
            (b"x\r\n \r\n y", b"x  y"),
        ] {
            let mut v = raw.to_vec();
            let n = unfold(&mut v);
            assert_eq!(&v[..n], want, "{:?}", String::from_utf8_lossy(raw));
        }
        // Through the head parser: the folded value is one value, the
        // headers around it untouched, and the body's bytes left in `buf`.
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 200 OK\r\nX-A: 1\r\nX-Folded: one\r\n  two\r\n\tthree\r\nContent-Length: 2\r\n\r\nok"[..],
        );
        let head = parse_unfolding(&mut buf, false, &mut 0).unwrap().unwrap();
        assert_eq!(head.headers["x-folded"], "one two three");
        assert_eq!(head.headers["x-a"], "1");
        assert_eq!(head.framing, Framing::Length(2));
        assert_eq!(&buf[..], b"ok");
        // Folds in an interim answer and in the final one, and a folded
        // head that arrives in two reads.
        let whole = &b"HTTP/1.1 103 Early\r\nLink: a\r\n b\r\n\r\nHTTP/1.1 200 OK\r\nX:1\r\n 2\r\nContent-Length: 0\r\n\r\n"[..];
        let mut buf = BytesMut::from(&whole[..50]);
        assert!(parse_unfolding(&mut buf, false, &mut 0).unwrap().is_none());
        buf.extend_from_slice(&whole[50..]);
        let head = parse_unfolding(&mut buf, false, &mut 0).unwrap().unwrap();
        assert_eq!(head.headers["x"], "1 2");
        assert!(buf.is_empty());
        // A line that is no header and no fold is still refused.
        let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\nX-A: 1\r\nno colon\r\n\r\n"[..]);
        assert!(parse_unfolding(&mut buf, false, &mut 0).is_err());
        // A folded head refused for its framing is refused, once.
        let mut buf =
            BytesMut::from(&b"HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: nope\r\n\r\n"[..]);
        assert!(parse_unfolding(&mut buf, false, &mut 0).is_err());
    }

    #[test]
    fn title_case_matches_a_byte_at_a_time_at_every_offset() {
        fn slow(name: &[u8]) -> Vec<u8> {
            let mut word_start = true;
            name.iter()
                .map(|&c| {
                    let out = if word_start {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    };
                    word_start = c == b'-';
                    out
                })
                .collect()
        }
        // Every byte value once, dashes at every offset of a chunk, and
        // dashes that end a chunk (the next chunk's first byte starts a word).
        let every: Vec<u8> = (0..=255u8).collect();
        let mut names = vec![every.clone(), every.iter().rev().copied().collect()];
        for n in 0..=24 {
            for dash in 0..n {
                let mut name: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
                name[dash] = b'-';
                names.push(name);
            }
        }
        names.push(b"x-custom-goplugin".to_vec());
        names.push(b"--a-b--c-d-e-f-g-h-i-j".to_vec());
        names.push(b"`az{@AZ[-`-a-z-{-@".to_vec());
        for name in names {
            let mut dst = b"prefix".to_vec();
            title_case(&mut dst, &name);
            assert_eq!(&dst[..6], b"prefix");
            assert_eq!(
                dst[6..],
                slow(&name),
                "{:?}",
                String::from_utf8_lossy(&name)
            );
        }
    }

    #[test]
    fn request_heads_are_title_cased_with_a_length() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("up:1"));
        headers.insert("x-forwarded-for", HeaderValue::from_static("127.0.0.1"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        let mut out = Vec::new();
        encode_head(
            &mut out,
            &Method::POST,
            |d: &mut Vec<u8>| d.extend_from_slice(b"/a?b=1"),
            &headers,
            &crate::upstream::Added::default(),
            3,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /a?b=1 HTTP/1.1\r\nHost: up:1\r\nX-Forwarded-For: 127.0.0.1\r\nContent-Length: 3\r\n\r\n"
        );
    }

    #[test]
    fn chunk_sizes_are_hex_with_optional_extensions() {
        assert_eq!(chunk_size(b"1a").unwrap(), 26);
        assert_eq!(chunk_size(b"0;name=value").unwrap(), 0);
        assert_eq!(chunk_size(b"A \t").unwrap(), 10);
        for bad in [&b""[..], b"g", b"-1", b";x", b"1000000000000000"] {
            assert!(
                chunk_size(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
