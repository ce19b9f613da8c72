//! The gateway's own HTTP/1 server side, for the common requests: each
//! head parsed once (`httparse`, with [`crate::wire`]'s framing checks on
//! the same parse), the request served in the connection's own task, and
//! the response head and body written into one buffer and the socket. No
//! dispatcher, no per-connection service, no second parse of the head.
//!
//! What it takes: HTTP/1.0 and 1.1 requests in origin form without a body
//! or with a `Content-Length` body that arrived with the head. The first
//! request it does not take (a chunked or larger body, `Expect`, `Upgrade`,
//! a head refused for its framing, a version other than 1.0 and 1.1 (read
//! as Go reads it by [`crate::wire`]), anything hyper would answer with an
//! error of its own) hands the whole connection to hyper's server
//! connection for the rest of its life, the bytes already read replayed
//! first ([`crate::wire::ClientIo::with_replay`]): hyper then answers it
//! exactly as it always has.
//!
//! The response is written as hyper writes it (its `role::Server::encode`
//! rules): the status line in the client's version, header names lower
//! case in the map's order, `content-length` or `transfer-encoding:
//! chunked` added after them when the body needs one, `connection:
//! keep-alive` for HTTP/1.0 keep-alive clients and `connection: close`
//! for HTTP/1.1 clients that asked to close, and `date` last unless the
//! response has one. HEAD, 204 and 304 answers carry no body. One
//! departure, made on hyper's side too (`conn.rs`): a status without a
//! reason phrase of its own gets Go's `status code N`, where hyper writes
//! `<none>`.
//!
//! Timeouts and shutdown are [`crate::conn`]'s: the first head within the
//! header timeout of the accept, later ones within the keep-alive timeout
//! until their first byte and the header timeout from it; at shutdown an
//! idle connection closes, one mid-request answers and closes, and one that
//! has sent nothing yet gets [`crate::conn::FIRST_REQUEST_GRACE`].

use std::cell::RefCell;
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::ops::Range;
use std::pin::Pin;
use std::task::Poll;
use std::thread::LocalKey;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body::Body;
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::body::ClientIn;
use crate::conn::{Stop, Waiter};
use crate::control::Control;
use crate::intern::{with_wire_names, Wire};
use crate::proxy::{ClientBody, Proxy};
use crate::wire::{declared, Declared};

/// Most header lines in a head (hyper's limit: more goes to hyper, 431).
const MAX_HEADERS: usize = 100;
/// Longest head taken here; a longer one goes to hyper (which takes up to
/// ~400 KiB, and answers 431 past that).
const MAX_OWN_HEAD: usize = 16 * 1024;
/// Longest request target taken here (hyper refuses 65,534 and more: 414).
const MAX_OWN_TARGET: usize = 8 * 1024;
/// Room read into at a time.
const READ_ROOM: usize = 4096;
/// Response bytes gathered before they are written (a head and a small
/// body go out in one write).
const WRITE_ROOM: usize = 4096;

/// What one connection's requests are served with.
pub struct Ctx<'a> {
    /// The worker's proxy.
    pub proxy: &'a Proxy,
    /// The gateway's own endpoints.
    pub control: &'a Control,
    /// Set when shutdown begins: every response from then on closes, and
    /// a connection waiting for a request is woken.
    pub stop: &'a Stop,
    /// The client.
    pub remote: SocketAddr,
    /// `--client-header-timeout`.
    pub header_timeout: Duration,
    /// `--client-keepalive-timeout`.
    pub keepalive_timeout: Duration,
    /// `--client-send-timeout`.
    pub send_timeout: Duration,
}

/// How the own reader left a connection.
pub enum End {
    /// Closed (by either side, a timeout, or shutdown).
    Closed,
    /// A request it does not take: hyper serves the connection from here,
    /// starting with `read` (bytes already read from the stream).
    HandOff {
        /// The client's stream.
        stream: TcpStream,
        /// Read from it and not yet served: the start of a request, so
        /// hyper's side counts the connection as not started (at shutdown
        /// it is given the first request's grace, and answers it).
        read: Bytes,
        /// When the head in `read` had to be whole, if a read waited for
        /// it: hyper's side keeps that deadline rather than starting its
        /// own (a slow head that crossed over got the header timeout twice).
        head_deadline: Option<Instant>,
    },
}

/// Where one header field lies in the head.
#[derive(Clone, Copy)]
struct Span {
    name: (usize, usize),
    value: (usize, usize),
}

/// A head the own reader takes, as offsets into the read buffer.
struct Head {
    len: usize,
    method: Method,
    target: Range<usize>,
    version: Version,
    count: usize,
    body: usize,
    closes: bool,
}

/// One parse of the read buffer.
// The large variant is the common one, returned at once: boxing it would
// cost an allocation per request.
#[allow(clippy::large_enum_variant)]
enum Step {
    Whole((Head, Request<ClientIn>)),
    Partial,
    /// Not for the own reader: hyper's.
    Other,
}

/// Why waiting for a head ended without one.
enum Waited {
    Closed,
    /// With the head's deadline, if a read waited for it.
    HandOff(Option<Instant>),
}

/// Serves `stream` until it closes or hyper has to take it over.
pub async fn serve(mut stream: TcpStream, ctx: Ctx<'_>) -> io::Result<End> {
    let mut rbuf = ReadBuf::take();
    let rbuf = &mut rbuf.0;
    // Never grown: what does not fit is written straight from its frame.
    let mut wbuf = WriteBuf::take();
    let wbuf = &mut wbuf.0;
    let mut served = 0u64;
    let mut in_flight: Option<Pin<Box<Option<_>>>> = None;
    let waits = Waits {
        timer: None,
        stop: Waiter::new(ctx.stop),
    };
    let mut waits = std::pin::pin!(waits);
    loop {
        let (head, req) = match next_head(&mut stream, rbuf, &ctx, waits.as_mut(), served).await? {
            Ok(got) => got,
            Err(Waited::Closed) => return Ok(End::Closed),
            Err(Waited::HandOff(head_deadline)) => {
                return Ok(hand_off(stream, std::mem::take(rbuf), head_deadline))
            }
        };
        served += 1;
        // In a box made once per connection: the request's future is
        // large (the proxy's whole path), and a connection's future
        // holding it would be copied whole when its task is spawned
        // (hyper keeps its service future in such a slot too).
        let serve = || Some(crate::front::serve(ctx.proxy, ctx.control, req, ctx.remote));
        let slot = match &mut in_flight {
            Some(slot) => {
                slot.set(serve());
                slot
            }
            None => in_flight.insert(made_in_box(serve)),
        };
        let Some(fut) = slot.as_mut().as_pin_mut() else {
            unreachable!("set just above")
        };
        let mut gone = false;
        let mut resp = unless_gone(&stream, rbuf, fut, &mut gone).await;
        if gone {
            // Nothing to answer: what the request was doing (a middleware
            // call, the upstream exchange) stopped where it was.
            tracing::debug!(client = %ctx.remote, "the client closed its connection before the answer; request dropped");
            return Ok(End::Closed);
        }
        if ctx.stop.is_set() {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        let keep = write_response(&mut stream, wbuf, rbuf, resp, &head, ctx.send_timeout).await?;
        if !keep || ctx.stop.is_set() {
            return Ok(End::Closed);
        }
    }
}

/// Awaits the answer `fut` while watching the client's side of the
/// connection: when the client closed it (or reset it) before the answer,
/// as nginx (499) and Go's server (a cancelled request context) see it,
/// sets `gone` and returns a stand-in at once, so that what the request
/// was doing can be dropped. A client that shuts down only its sending
/// side counts as gone too, as there. Bytes it pipelines meanwhile are
/// kept in `rbuf` for the next request; past [`MAX_OWN_HEAD`] of them the
/// side is no longer watched. (`gone` and a stand-in rather than an
/// `Option` of the answer: wrapped, the answer was copied once more, ~100
/// instructions a request.)
async fn unless_gone<F: std::future::Future<Output = Response<ClientBody>>>(
    stream: &TcpStream,
    rbuf: &mut BytesMut,
    mut fut: Pin<&mut F>,
    gone: &mut bool,
) -> Response<ClientBody> {
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        if client_gone(stream, rbuf, cx) {
            *gone = true;
            return Poll::Ready(Response::new(http_body_util::Either::Right(
                http_body_util::Full::new(Bytes::new()),
            )));
        }
        Poll::Pending
    })
    .await
}

/// Whether the client closed or reset its connection, reading what it
/// sent meanwhile into `rbuf`; when it has not, its readiness is watched
/// (the task woken when it changes).
fn client_gone(stream: &TcpStream, rbuf: &mut BytesMut, cx: &mut std::task::Context<'_>) -> bool {
    while rbuf.len() < MAX_OWN_HEAD {
        match stream.poll_read_ready(cx) {
            Poll::Pending => return false,
            Poll::Ready(Err(_)) => return true,
            Poll::Ready(Ok(())) => {}
        }
        rbuf.reserve(READ_ROOM);
        match crate::wire::read_drained(stream, rbuf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return true,
        }
    }
    false
}

/// `make()` in a new box, made where it lies (not made on the stack and
/// copied in, which for a request's future is kilobytes per connection).
pub(crate) fn made_in_box<T>(make: impl FnOnce() -> T) -> Pin<Box<T>> {
    let mut b = Box::<T>::new_uninit();
    b.write(make());
    // SAFETY: written just above.
    Box::into_pin(unsafe { b.assume_init() })
}

/// The connection for hyper: what was read and not served goes first.
fn hand_off(stream: TcpStream, rest: BytesMut, head_deadline: Option<Instant>) -> End {
    End::HandOff {
        stream,
        read: rest.freeze(),
        head_deadline,
    }
}

pin_project_lite::pin_project! {
    /// What a connection waits with, kept from one wait to the next.
    struct Waits<'a> {
        // The head's deadline. Made at the first wait, then moved: a
        // deadline later than the one registered is an atomic store, where
        // a timer per wait was registered in the runtime's wheel and
        // removed again.
        #[pin]
        timer: Option<Sleep>,
        // The connection's place among those shutdown wakes.
        stop: Waiter<'a>,
    }
}

/// Why a wait ended.
enum Woke {
    Readable,
    Deadline,
    Stop,
}

impl Waits<'_> {
    /// Waits until `stream` is readable, `at` passes, or (with `stop`)
    /// shutdown begins. One hand-written poll, not `select!` over three
    /// futures made per wait (the readiness future, a timer, a shutdown
    /// wait), each registered somewhere and unregistered when dropped.
    async fn wait(
        self: Pin<&mut Self>,
        stream: &TcpStream,
        at: Instant,
        stop: Option<&Stop>,
    ) -> io::Result<Woke> {
        let this = self.project();
        let mut timer = this.timer;
        match timer.as_mut().as_pin_mut() {
            Some(t) if t.deadline() == at => {}
            Some(t) => t.reset(at),
            None => timer.set(Some(tokio::time::sleep_until(at))),
        }
        let waiter = this.stop;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = stream.poll_read_ready(cx) {
                return Poll::Ready(r.map(|()| Woke::Readable));
            }
            if let Some(t) = timer.as_mut().as_pin_mut() {
                if std::future::Future::poll(t, cx).is_ready() {
                    return Poll::Ready(Ok(Woke::Deadline));
                }
            }
            if let Some(stop) = stop {
                if stop.poll_begun(cx, waiter).is_ready() {
                    return Poll::Ready(Ok(Woke::Stop));
                }
            }
            Poll::Pending
        })
        .await
    }
}

/// Reads until a whole head is buffered, within the connection's waits.
async fn next_head(
    stream: &mut TcpStream,
    rbuf: &mut BytesMut,
    ctx: &Ctx<'_>,
    mut waits: Pin<&mut Waits<'_>>,
    served: u64,
) -> io::Result<Result<(Head, Request<ClientIn>), Waited>> {
    // When the head now awaited must be whole; set when the wait starts.
    let mut deadline: Option<Instant> = None;
    let mut grace = false;
    loop {
        if !rbuf.is_empty() {
            match take_request(rbuf) {
                Step::Whole(got) => return Ok(Ok(got)),
                Step::Other => return Ok(Err(Waited::HandOff(deadline))),
                Step::Partial if rbuf.len() >= MAX_OWN_HEAD => {
                    return Ok(Err(Waited::HandOff(deadline)))
                }
                Step::Partial => {}
            }
        }
        rbuf.reserve(READ_ROOM);
        // A read that does not wait needs no clock and no timer.
        match crate::wire::read_drained(stream, rbuf) {
            Ok(0) => return Ok(Err(Waited::Closed)),
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        let idle = rbuf.is_empty() && served > 0;
        // Counted from the first read that waits, as `ClientIo` counts
        // (for a first head, that is as good as the accept).
        let at = *deadline.get_or_insert_with(|| {
            Instant::now()
                + if idle {
                    ctx.keepalive_timeout
                } else {
                    ctx.header_timeout
                }
        });
        if idle && ctx.stop.is_set() {
            return Ok(Err(Waited::Closed));
        }
        let stop = (!grace).then_some(ctx.stop);
        match waits.as_mut().wait(stream, at, stop).await? {
            Woke::Readable => {
                // The first byte of a keep-alive request: its head has the
                // header timeout from now.
                if idle {
                    deadline = Some(Instant::now() + ctx.header_timeout);
                }
            }
            Woke::Deadline => {
                if !grace && !idle {
                    tracing::debug!(
                        client = %ctx.remote,
                        "the client took longer than {:?} to send a request head (--client-header-timeout); connection closed",
                        ctx.header_timeout
                    );
                }
                return Ok(Err(Waited::Closed));
            }
            Woke::Stop => {
                if idle {
                    return Ok(Err(Waited::Closed));
                }
                // Bytes of a request may be on their way: a short grace.
                grace = true;
                let end = Instant::now() + crate::conn::FIRST_REQUEST_GRACE;
                deadline = Some(at.min(end));
            }
        }
    }
}

/// The request at the start of `rbuf`, taken from it if it is whole and
/// the own reader takes it (in a plain function: the spans stay off the
/// connection's future).
fn take_request(rbuf: &mut BytesMut) -> Step {
    let mut spans = [const { MaybeUninit::<Span>::uninit() }; MAX_HEADERS];
    let head = match parse(rbuf, &mut spans) {
        Step0::Whole(head) => head,
        Step0::Partial => return Step::Partial,
        Step0::Other => return Step::Other,
    };
    // SAFETY: `parse` wrote the first `head.count` spans.
    let spans = unsafe { std::slice::from_raw_parts(spans.as_ptr().cast::<Span>(), head.count) };
    let bytes = rbuf.split_to(head.len).freeze();
    let Some(req) = request(&bytes, &head, spans) else {
        // A target or header hyper reads differently (or refuses): the
        // bytes go back for hyper (rare, so copied).
        let mut all = BytesMut::with_capacity(bytes.len() + rbuf.len());
        all.extend_from_slice(&bytes);
        all.extend_from_slice(rbuf);
        *rbuf = all;
        return Step::Other;
    };
    drop(bytes);
    let body = match head.body {
        0 => ClientIn::empty(),
        n => ClientIn::Known(Some(rbuf.split_to(n).freeze())),
    };
    Step::Whole((head, req.map(|()| body)))
}

/// What [`parse`] found.
enum Step0 {
    Whole(Head),
    Partial,
    Other,
}

/// Parses the buffered bytes as a request head the own reader takes.
fn parse(buf: &[u8], spans: &mut [MaybeUninit<Span>; MAX_HEADERS]) -> Step0 {
    // Uninitialised: zeroing 100 fields per request costs more than the parse.
    let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut req,
        buf,
        &mut fields,
    ) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Step0::Partial,
        // `HTTP/1.2` and the like: hyper's, whole (see `crate::wire`).
        Err(httparse::Error::Version) if crate::wire::version_pending(buf) => {
            return Step0::Partial
        }
        Err(_) => return Step0::Other,
    };
    let (Some(method), Some(target), Some(v)) = (req.method, req.path, req.version) else {
        return Step0::Other;
    };
    if !target.starts_with('/') || target.len() > MAX_OWN_TARGET {
        return Step0::Other;
    }
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return Step0::Other;
    };
    if method == Method::CONNECT {
        return Step0::Other;
    }
    let Declared::Plain { length, closes } = declared(req.version, req.headers) else {
        return Step0::Other;
    };
    let base = buf.as_ptr() as usize;
    for (span, h) in spans.iter_mut().zip(req.headers.iter()) {
        // What hyper treats specially goes to hyper; a length it would
        // read differently (a sign, a list) too.
        let odd = match h.name.len() {
            6 => h.name.eq_ignore_ascii_case("expect"),
            7 => h.name.eq_ignore_ascii_case("upgrade"),
            14 => {
                h.name.eq_ignore_ascii_case("content-length")
                    && (h.value.is_empty() || !h.value.iter().all(u8::is_ascii_digit))
            }
            _ => false,
        };
        if odd {
            return Step0::Other;
        }
        span.write(Span {
            name: (h.name.as_ptr() as usize - base, h.name.len()),
            value: (h.value.as_ptr() as usize - base, h.value.len()),
        });
    }
    let body = match length {
        None => 0,
        // Only a body that came with its head (else hyper streams it).
        Some(n) if n <= (buf.len() - len) as u64 => n as usize,
        Some(_) => return Step0::Other,
    };
    Step0::Whole(Head {
        len,
        method,
        target: target.as_ptr() as usize - base..target.as_ptr() as usize - base + target.len(),
        version: if v == 1 {
            Version::HTTP_11
        } else {
            Version::HTTP_10
        },
        count: req.headers.len(),
        body,
        closes,
    })
}

/// The request `head` describes, its values sharing the head's bytes;
/// `None` for a target or header hyper would not take as is.
fn request(bytes: &Bytes, head: &Head, spans: &[Span]) -> Option<Request<()>> {
    let uri = Uri::from_maybe_shared(bytes.slice(head.target.clone())).ok()?;
    // Room for the headers a middleware chain sets, made now: a map sized
    // to the client's headers alone would be grown (rehashed, reallocated)
    // by the chain's first insert, and the room costs nothing without one.
    let mut headers =
        http::HeaderMap::with_capacity(spans.len() + crate::middleware::CHAIN_HEADER_ROOM);
    with_wire_names(Wire::Request, |names| {
        for span in spans {
            let (n, nl) = span.name;
            let (v, vl) = span.value;
            let name = names.get(&bytes[n..n + nl], HeaderName::from_bytes).ok()?;
            // SAFETY: httparse accepted the value: tab, visible ASCII, space
            // and obs-text, which are what `HeaderValue` allows (hyper takes
            // its values the same way).
            let value = unsafe { HeaderValue::from_maybe_shared_unchecked(bytes.slice(v..v + vl)) };
            headers.append(name, value);
        }
        Some(())
    })?;
    let mut req = Request::new(());
    *req.method_mut() = head.method.clone();
    *req.version_mut() = head.version;
    // The placeholders `Request::new` made (a static "/" and a map with no
    // room) own no memory: forgotten, not dropped (~90 instructions).
    std::mem::forget(std::mem::replace(req.uri_mut(), uri));
    std::mem::forget(std::mem::replace(req.headers_mut(), headers));
    Some(req)
}

/// How the response body is delimited on the wire.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Enc {
    Length(u64),
    Chunked,
    /// Ends with the connection.
    Close,
}

/// Writes all of `buf`, as `write_all` does, but fails (`TimedOut`) when
/// the client takes no byte of it for `limit` (`--client-send-timeout`,
/// nginx's `send_timeout`): a client that stops reading would otherwise
/// hold its connection, and the upstream's its response comes from, for
/// ever. A write the socket takes at once (every small answer) arms no
/// timer.
async fn send_all(stream: &mut TcpStream, mut buf: &[u8], limit: Duration) -> io::Result<()> {
    while !buf.is_empty() {
        match stream.try_write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                match tokio::time::timeout(limit, stream.writable()).await {
                    Ok(ready) => ready?,
                    Err(_) => return Err(crate::wire::send_timed_out(limit)),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes `resp` as hyper would; `true` when the connection stays open.
async fn write_response(
    stream: &mut TcpStream,
    wbuf: &mut Vec<u8>,
    rbuf: &mut BytesMut,
    resp: Response<ClientBody>,
    req: &Head,
    limit: Duration,
) -> io::Result<bool> {
    let (mut parts, mut body) = resp.into_parts();
    let length = if body.is_end_stream() {
        None
    } else {
        Some(body.size_hint().exact())
    };
    wbuf.clear();
    let (enc, last) = encode_head(wbuf, &mut parts, req, length);
    let mut left = match enc {
        Enc::Length(0) => {
            send_all(stream, wbuf, limit).await?;
            return Ok(!last);
        }
        Enc::Length(n) => n,
        _ => u64::MAX,
    };
    loop {
        let polled = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx)));
        let frame = match polled.await {
            Poll::Ready(f) => f,
            Poll::Pending => {
                // Nothing more yet: what is gathered goes out first.
                if !wbuf.is_empty() {
                    send_all(stream, wbuf, limit).await?;
                    wbuf.clear();
                }
                // The client is watched while the body waits, as while
                // the answer's head did ([`unless_gone`]): one that hangs
                // up on a body the upstream has stalled drops the exchange
                // now, not at `--upstream-read-timeout` (60 s), which held
                // both connections until then.
                let stream = &*stream;
                let next = std::future::poll_fn(|cx| {
                    if let Poll::Ready(frame) = Pin::new(&mut body).poll_frame(cx) {
                        return Poll::Ready(Some(frame));
                    }
                    if client_gone(stream, rbuf, cx) {
                        return Poll::Ready(None);
                    }
                    Poll::Pending
                });
                match next.await {
                    Some(frame) => frame,
                    None => {
                        tracing::debug!("the client closed its connection while the answer's body was waiting for the upstream; exchange dropped");
                        return Ok(false);
                    }
                }
            }
        };
        let data = match frame {
            None => break,
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                // Trailers: hyper sends them only when the response
                // declares them in `Trailer`, which never passes the proxy.
                Err(_) => continue,
            },
            Some(Err(e)) => {
                tracing::debug!(error = %e, "response body failed; connection closed");
                let _ = send_all(stream, wbuf, limit).await;
                return Ok(false);
            }
        };
        if data.is_empty() {
            continue;
        }
        let mut size = [0u8; 18];
        let size: &[u8] = match enc {
            Enc::Length(_) if data.len() as u64 > left => {
                tracing::debug!("the response body is longer than its length; connection closed");
                return Ok(false);
            }
            Enc::Length(_) => {
                left -= data.len() as u64;
                &[]
            }
            Enc::Chunked => {
                let n = hex_line(&mut size, data.len());
                &size[..n]
            }
            Enc::Close => &[],
        };
        let tail: &[u8] = if enc == Enc::Chunked { b"\r\n" } else { &[] };
        let whole = size.len() + data.len() + tail.len();
        if wbuf.len() + whole > wbuf.capacity() && !wbuf.is_empty() {
            send_all(stream, wbuf, limit).await?;
            wbuf.clear();
        }
        wbuf.extend_from_slice(size);
        if whole <= wbuf.capacity() {
            wbuf.extend_from_slice(&data);
        } else {
            // Larger than the buffer: straight from the frame.
            send_all(stream, wbuf, limit).await?;
            wbuf.clear();
            send_all(stream, &data, limit).await?;
        }
        wbuf.extend_from_slice(tail);
        // As hyper: a body that says it has ended is not polled again.
        if left == 0 || body.is_end_stream() {
            break;
        }
    }
    match enc {
        Enc::Chunked => wbuf.extend_from_slice(b"0\r\n\r\n"),
        Enc::Length(_) if left != 0 => {
            // Shorter than its length: the client must not wait for more.
            let _ = send_all(stream, wbuf, limit).await;
            return Ok(false);
        }
        _ => {}
    }
    if !wbuf.is_empty() {
        send_all(stream, wbuf, limit).await?;
    }
    Ok(!last && enc != Enc::Close)
}

/// `len` in hex and CRLF, as a chunk-size line.
fn hex_line(dst: &mut [u8; 18], len: usize) -> usize {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let digits = ((usize::BITS - len.leading_zeros()).max(1)).div_ceil(4) as usize;
    for i in 0..digits {
        dst[digits - 1 - i] = HEX[(len >> (4 * i)) & 0xf];
    }
    dst[digits] = b'\r';
    dst[digits + 1] = b'\n';
    digits + 2
}

/// Whether a response to `method` with `status` may have a body at all.
fn can_have_body(method: &Method, status: StatusCode) -> bool {
    !(*method == Method::HEAD
        || status.is_informational()
        || matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED))
}

/// An answer to an HTTP/1.0 client whose body has no length (`length`
/// as [`encode_head`] takes it) ends at the close: HTTP/1.0 has no chunks.
/// Its connection cannot stay open, so the answer says `connection: close`
/// (when it says nothing of it yet) and true is returned. hyper's rules
/// said `keep-alive` to a keep-alive client, then closed; Go's server
/// says nothing. Both servers apply it (`conn.rs` for hyper's), so they
/// answer alike.
pub(crate) fn closes_http10(
    version: Version,
    method: &Method,
    parts: &mut http::response::Parts,
    length: Option<Option<u64>>,
) -> bool {
    if version != Version::HTTP_10
        || !matches!(length, Some(None))
        || !can_have_body(method, parts.status)
        || parts.headers.contains_key(header::CONTENT_LENGTH)
    {
        return false;
    }
    if !parts.headers.contains_key(header::CONNECTION) {
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    // An HTTP/1.0 answer: hyper then closes without adding `keep-alive`.
    parts.version = Version::HTTP_10;
    true
}

/// Whether `value` (a `Connection` header) has the token `token`.
fn has_token(value: &HeaderValue, token: &str) -> bool {
    value
        .as_bytes()
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// The response head, as hyper's server encodes it; what delimits the
/// body and whether this is the connection's last response. `length` is
/// `None` for a body that has ended, `Some(None)` for one of unknown length.
fn encode_head(
    dst: &mut Vec<u8>,
    parts: &mut http::response::Parts,
    req: &Head,
    length: Option<Option<u64>>,
) -> (Enc, bool) {
    let mut keep_alive = !req.closes;
    let mut version = parts.version;
    if closes_http10(req.version, &req.method, parts, length) {
        keep_alive = false;
    }
    // hyper's `enforce_version`.
    if req.version == Version::HTTP_10 {
        // A scan, not a hashed lookup: a response has a handful of headers.
        let says_keep_alive = parts
            .headers
            .iter()
            .any(|(n, v)| *n == header::CONNECTION && has_token(v, "keep-alive"));
        if !says_keep_alive {
            match version {
                Version::HTTP_10 => keep_alive = false,
                Version::HTTP_11 if keep_alive => {
                    parts
                        .headers
                        .append(header::CONNECTION, HeaderValue::from_static("keep-alive"));
                }
                _ => {}
            }
        }
        version = Version::HTTP_10;
    } else if !keep_alive
        && !parts
            .headers
            .iter()
            .any(|(n, v)| *n == header::CONNECTION && has_token(v, "close"))
    {
        parts
            .headers
            .append(header::CONNECTION, HeaderValue::from_static("close"));
    }
    let mut last = !keep_alive;
    let status = parts.status;
    if version == Version::HTTP_11 && status == StatusCode::OK {
        dst.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        dst.extend_from_slice(if version == Version::HTTP_10 {
            b"HTTP/1.0 "
        } else {
            b"HTTP/1.1 "
        });
        dst.extend_from_slice(status.as_str().as_bytes());
        dst.push(b' ');
        match status.canonical_reason() {
            Some(reason) => dst.extend_from_slice(reason.as_bytes()),
            // Go's words for a code it has none for (hyper's: `<none>`).
            None => {
                dst.extend_from_slice(b"status code ");
                dst.extend_from_slice(status.as_str().as_bytes());
            }
        }
        dst.extend_from_slice(b"\r\n");
    }
    let head_req = req.method == Method::HEAD;
    let chunkable = version != Version::HTTP_10 && can_have_body(&req.method, status);
    let mut enc = Enc::Length(0);
    let mut wrote_len = false;
    let mut wrote_date = false;
    // A name whose values are joined on one line (`connection`, ...): the
    // line is open until the next name.
    let mut open_line = false;
    let mut prev: Option<HeaderName> = None;
    for (name, value) in parts.headers.iter() {
        let same = prev.as_ref() == Some(name);
        if !same {
            if open_line {
                dst.extend_from_slice(b"\r\n");
                open_line = false;
            }
            prev = Some(name.clone());
        }
        if *name == header::CONTENT_LENGTH {
            match length {
                Some(Some(n)) => {
                    if !same {
                        enc = Enc::Length(n);
                        line_start(dst, name);
                        dst.extend_from_slice(value.as_bytes());
                        wrote_len = true;
                        open_line = true;
                    }
                    continue;
                }
                Some(None) => {
                    if !same {
                        let n = std::str::from_utf8(value.as_bytes())
                            .ok()
                            .and_then(|v| v.trim().parse::<u64>().ok())
                            .unwrap_or(0);
                        enc = Enc::Length(n);
                        line_start(dst, name);
                        dst.extend_from_slice(value.as_bytes());
                        wrote_len = true;
                        open_line = true;
                    }
                    continue;
                }
                None if head_req => wrote_len = true,
                None => continue,
            }
        } else if *name == header::TRANSFER_ENCODING || *name == header::TRAILER {
            // Never on a proxied response (hop-by-hop); kept as hyper
            // would only where chunking is possible.
            if !chunkable {
                continue;
            }
            if *name == header::TRANSFER_ENCODING {
                wrote_len = true;
                enc = Enc::Chunked;
            }
            join(dst, name, value, same);
            open_line = true;
            continue;
        } else if *name == header::CONNECTION {
            if has_token(value, "close") {
                last = true;
            }
            join(dst, name, value, same);
            open_line = true;
            continue;
        } else if *name == header::DATE {
            wrote_date = true;
        }
        dst.extend_from_slice(name.as_str().as_bytes());
        dst.extend_from_slice(b": ");
        dst.extend_from_slice(value.as_bytes());
        dst.extend_from_slice(b"\r\n");
    }
    if open_line {
        dst.extend_from_slice(b"\r\n");
    }
    if !wrote_len {
        enc = match length {
            Some(None) if !chunkable => Enc::Close,
            Some(None) => {
                dst.extend_from_slice(b"transfer-encoding: chunked\r\n");
                Enc::Chunked
            }
            None | Some(Some(0)) => {
                if !head_req
                    && !status.is_informational()
                    && !matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED)
                {
                    dst.extend_from_slice(b"content-length: 0\r\n");
                }
                Enc::Length(0)
            }
            Some(Some(n)) => {
                if status.is_informational()
                    || matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED)
                {
                    Enc::Length(0)
                } else {
                    dst.extend_from_slice(b"content-length: ");
                    dst.extend_from_slice(itoa(n, &mut [0u8; 20]));
                    dst.extend_from_slice(b"\r\n");
                    Enc::Length(n)
                }
            }
        };
    }
    if !can_have_body(&req.method, status) {
        enc = Enc::Length(0);
    }
    if !wrote_date {
        dst.extend_from_slice(b"date: ");
        with_date(|d| dst.extend_from_slice(d));
        dst.extend_from_slice(b"\r\n");
    }
    dst.extend_from_slice(b"\r\n");
    (enc, last)
}

/// `name: ` at the start of a header line.
fn line_start(dst: &mut Vec<u8>, name: &HeaderName) {
    dst.extend_from_slice(name.as_str().as_bytes());
    dst.extend_from_slice(b": ");
}

/// One more value of a header whose values share a line.
fn join(dst: &mut Vec<u8>, name: &HeaderName, value: &HeaderValue, same: bool) {
    if same {
        dst.extend_from_slice(b", ");
    } else {
        line_start(dst, name);
    }
    dst.extend_from_slice(value.as_bytes());
}

/// `n` in decimal.
fn itoa(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// A connection's response buffer, from the worker's spares and back to
/// them when the connection ends: a connection per request (ab's
/// workload) then costs no allocation for it.
struct WriteBuf(Vec<u8>);

/// A connection's read buffer, from the worker's spares and back (the
/// request heads it held are gone by then, so its room is whole again).
struct ReadBuf(BytesMut);

/// Spare buffers kept per worker: enough for a busy worker's connections
/// at once, few enough that a burst of thousands leaves no more behind.
const SPARE_BUFS: usize = 64;

thread_local! {
    static SPARE_WRITES: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    static SPARE_READS: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// A spare from `list`, or a new one from `make`.
fn take_spare<T: 'static>(list: &'static LocalKey<RefCell<Vec<T>>>, make: fn() -> T) -> T {
    list.with(|s| s.borrow_mut().pop()).unwrap_or_else(make)
}

/// Gives `buf` back to `list`, unless the list is full.
fn give_back<T: 'static>(list: &'static LocalKey<RefCell<Vec<T>>>, buf: T) {
    list.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_BUFS {
            s.push(buf);
        }
    });
}

impl ReadBuf {
    fn take() -> ReadBuf {
        ReadBuf(take_spare(&SPARE_READS, || {
            BytesMut::with_capacity(READ_ROOM)
        }))
    }
}

impl Drop for ReadBuf {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.0);
        buf.clear();
        // Only a buffer no request value still shares gets its room back.
        if buf.try_reclaim(READ_ROOM) {
            give_back(&SPARE_READS, buf);
        }
    }
}

impl WriteBuf {
    fn take() -> WriteBuf {
        WriteBuf(take_spare(&SPARE_WRITES, || Vec::with_capacity(WRITE_ROOM)))
    }
}

impl Drop for WriteBuf {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.0);
        // A head larger than the room grew it: not kept.
        if buf.capacity() == WRITE_ROOM {
            buf.clear();
            give_back(&SPARE_WRITES, buf);
        }
    }
}

thread_local! {
    /// The `date` value of the current second, made once a second (as
    /// hyper caches it).
    static DATE: RefCell<(u64, Vec<u8>)> = const { RefCell::new((u64::MAX, Vec::new())) };
}

/// Calls `f` with the current `date` value.
fn with_date(f: impl FnOnce(&[u8])) {
    let now = SystemTime::now();
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != secs {
            cached.1 = httpdate::fmt_http_date(now).into_bytes();
            cached.0 = secs;
        }
        f(&cached.1);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_size_lines_are_upper_hex() {
        let mut b = [0u8; 18];
        let n = hex_line(&mut b, 0x1a2b);
        assert_eq!(&b[..n], b"1A2B\r\n");
        let n = hex_line(&mut b, 1);
        assert_eq!(&b[..n], b"1\r\n");
        let n = hex_line(&mut b, 0);
        assert_eq!(&b[..n], b"0\r\n");
        assert_eq!(itoa(0, &mut [0; 20]), b"0");
        assert_eq!(itoa(1234567, &mut [0; 20]), b"1234567");
    }
}
