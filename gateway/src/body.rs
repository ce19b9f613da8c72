//! Bodies in flight, with the timeouts a trusted proxy has.
//!
//! - [`RequestBody`] wraps the client's request body: a client that stops
//!   sending for longer than `--client-body-timeout` (nginx's
//!   `client_body_timeout`, counted between two reads, not for the whole
//!   body) fails its request with 408 instead of holding a connection (and an
//!   upstream connection) forever. Its errors say they are the client's, so a
//!   bad chunked body is answered 400 and logged as a client error, not as an
//!   upstream failure.
//! - The upstream's response body is wrapped by [`crate::pool`], which adds
//!   the upstream read timeout and gives the connection back to the pool when
//!   the body ends.
//!
//! The timer is armed lazily: a body whose frames are ready when polled (the
//! common case on loopback) never allocates one.
//!
//! [`reframe`] is the one rule for a request's framing headers once
//! middleware has replaced its body: every driver and the proxy use it.
//!
//! [`Buffered`] bounds the bodies a gateway holds whole at once (for
//! middleware, request and response), across its workers; [`collect_held`]
//! reads a body whole within it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

/// A read deadline between two frames, armed only while a read waits.
#[derive(Default)]
pub struct Idle {
    sleep: Option<Pin<Box<Sleep>>>,
    armed: bool,
}

/// A frame, or why none came: the body's own error or the idle deadline.
pub enum Stalled<E> {
    /// The wrapped body failed.
    Inner(E),
    /// Nothing arrived within the limit.
    Idle,
}

/// What [`Idle::poll_frame`] yields.
pub type Polled<B> = Poll<Option<Result<Frame<<B as Body>::Data>, Stalled<<B as Body>::Error>>>>;

impl Idle {
    /// Polls `inner` for a frame, failing with [`Stalled::Idle`] when none
    /// came within `limit` of the wait starting.
    pub fn poll_frame<B: Body + Unpin>(
        &mut self,
        inner: &mut B,
        limit: Duration,
        cx: &mut Context<'_>,
    ) -> Polled<B> {
        if let Poll::Ready(frame) = Pin::new(inner).poll_frame(cx) {
            self.armed = false;
            return Poll::Ready(frame.map(|r| r.map_err(Stalled::Inner)));
        }
        if !self.armed {
            let deadline = Instant::now() + limit;
            match &mut self.sleep {
                Some(s) => s.as_mut().reset(deadline),
                None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            self.armed = true;
        }
        match self.sleep.as_mut().map(|s| s.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Some(Err(Stalled::Idle))),
            _ => Poll::Pending,
        }
    }
}

/// Why reading the client's body failed.
#[derive(Debug)]
pub enum ClientBodyError {
    /// The client sent nothing for longer than the body timeout.
    Timeout(Duration),
    /// The body was malformed (bad chunked framing) or the client went away.
    Read(hyper::Error),
}

impl fmt::Display for ClientBodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientBodyError::Timeout(d) => write!(
                f,
                "the client sent no request body data for {d:?} (--client-body-timeout)"
            ),
            ClientBodyError::Read(e) => write!(f, "cannot read the client's request body: {e}"),
        }
    }
}

impl std::error::Error for ClientBodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientBodyError::Timeout(_) => None,
            ClientBodyError::Read(e) => Some(e),
        }
    }
}

impl ClientBodyError {
    /// Finds a client body failure anywhere in `e`'s chain of causes (hyper's
    /// client wraps a body error it could not send in its own).
    pub fn find<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a ClientBodyError> {
        let mut cur = Some(e);
        while let Some(err) = cur {
            if let Some(found) = err.downcast_ref::<ClientBodyError>() {
                return Some(found);
            }
            cur = err.source();
        }
        None
    }
}

/// A client's request body as the connection delivers it: hyper's stream,
/// or bytes the gateway's own HTTP/1 reader already holds whole (none for
/// most requests).
pub enum ClientIn {
    /// Read by hyper's server connection as it arrives.
    Hyper(Incoming),
    /// Read with the head: `None` once taken (or for a request without a body).
    Known(Option<Bytes>),
}

impl ClientIn {
    /// A request without a body.
    pub fn empty() -> ClientIn {
        ClientIn::Known(None)
    }
}

/// No body: what a request lent whole leaves in its place
/// ([`std::mem::take`]).
impl Default for ClientIn {
    fn default() -> Self {
        ClientIn::empty()
    }
}

impl From<Incoming> for ClientIn {
    fn from(b: Incoming) -> Self {
        ClientIn::Hyper(b)
    }
}

impl Body for ClientIn {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            ClientIn::Hyper(b) => Pin::new(b).poll_frame(cx),
            ClientIn::Known(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ClientIn::Hyper(b) => b.is_end_stream(),
            ClientIn::Known(b) => b.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ClientIn::Hyper(b) => b.size_hint(),
            ClientIn::Known(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}

/// The client's request body with a timeout between reads.
pub struct RequestBody {
    inner: ClientIn,
    limit: Duration,
    idle: Idle,
    /// Told of every frame taken and of the end, when someone watches
    /// ([`RequestBody::watch`]): the upstream's response timeout starts
    /// when the body has gone, not while the client is still uploading.
    progress: Option<Arc<Progress>>,
    /// The join of small frames ([`RequestBody::poll_joined`]), made at
    /// the first: boxed, so the body (moved whole with the futures that
    /// hold it, on every request) stays small.
    join: Option<Box<Join>>,
}

/// Small data frames being joined into one.
#[derive(Default)]
struct Join {
    /// The data joined so far; `None` between joins.
    buf: Option<bytes::BytesMut>,
    /// Turns the join has yielded since its last frame came.
    yields: u8,
    /// What the client's body gave after the joined data (trailers, an
    /// error, the end), for the next poll.
    held: Option<Option<Result<Frame<Bytes>, hyper::Error>>>,
}

/// A data frame under this many bytes starts a join ([`RequestBody::poll_joined`]).
const SMALL: usize = 4 * 1024;

/// Most bytes joined into one frame.
const JOINED: usize = 64 * 1024;

/// Turns of the worker's scheduler a join waits for the next frame: the
/// client's connection task needs one to decode a chunk it has read and
/// one more to hand it over.
const YIELDS: u8 = 2;

/// What a body streaming upstream tells the one who times the exchange
/// ([`crate::upstream::send`]): a frame was taken (the upstream is reading)
/// or the body ended (the upstream's turn to answer).
#[derive(Debug, Default)]
pub struct Progress {
    /// One permit per signal: the waiter cannot miss one that came first.
    moved: tokio::sync::Notify,
    ended: AtomicBool,
    /// The last poll found no data: the wait is the client's (timed by
    /// the body's own idle timeout), not the upstream's.
    client_turn: AtomicBool,
}

impl Progress {
    /// Waits for the next frame or the end; true when the body has ended.
    pub async fn next(&self) -> bool {
        self.moved.notified().await;
        self.ended.load(Ordering::Acquire)
    }

    /// True while the body waits for the client's next bytes.
    pub fn client_turn(&self) -> bool {
        self.client_turn.load(Ordering::Acquire)
    }

    fn polled<T>(&self, frame: &Poll<Option<Result<T, ClientBodyError>>>, end: bool) {
        let Poll::Ready(frame) = frame else {
            self.client_turn.store(true, Ordering::Release);
            return;
        };
        self.client_turn.store(false, Ordering::Release);
        // An error ends it too: the exchange fails on it anyway.
        if end || !matches!(frame, Some(Ok(_))) {
            self.ended.store(true, Ordering::Release);
        }
        self.moved.notify_one();
    }
}

impl RequestBody {
    /// Wraps the client's body; `limit` is the longest wait for the next frame.
    pub fn new(inner: ClientIn, limit: Duration) -> Self {
        RequestBody {
            inner,
            limit,
            idle: Idle::default(),
            progress: None,
            join: None,
        }
    }

    /// The next frame, small data frames joined. A chunked upload is
    /// decoded one chunk to a frame, handed over one at a time by the
    /// client's connection task, and each frame became one chunk and one
    /// `writev` to the upstream: a client sending 1-byte chunks made the
    /// gateway spend ~6.5 µs of CPU per 6 bytes it sent. So a data frame
    /// under [`SMALL`] bytes is held, and the frames after it are joined
    /// on while they come (the task yields to let the connection decode the
    /// next chunk it has read), up to [`JOINED`] bytes. When none came
    /// within [`YIELDS`] turns, the client is slow and the data goes as it
    /// is: the join adds a few turns of the worker's scheduler, never a
    /// wait for the client. A frame that is not data, an error or the end
    /// is held for the next poll. Larger frames pass as they are. 2,000
    /// one-byte chunks sent at once now reach the upstream as one chunk.
    fn poll_joined(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        let limit = self.limit;
        let read = |e| ClientBodyError::Read(e);
        let joining = self.join.as_ref().is_some_and(|j| j.buf.is_some());
        if !joining {
            if let Some(held) = self.join.as_mut().and_then(|j| j.held.take()) {
                return Poll::Ready(held.map(|r| r.map_err(read)));
            }
            let frame = match ready!(self.idle.poll_frame(&mut self.inner, limit, cx)) {
                Some(Ok(frame)) => frame,
                Some(Err(Stalled::Inner(e))) => return Poll::Ready(Some(Err(read(e)))),
                Some(Err(Stalled::Idle)) => {
                    return Poll::Ready(Some(Err(ClientBodyError::Timeout(limit))))
                }
                None => return Poll::Ready(None),
            };
            match frame.into_data() {
                Ok(data) if data.len() < SMALL && !self.inner.is_end_stream() => {
                    let join = self.join.get_or_insert_with(Box::default);
                    join.buf = Some(bytes::BytesMut::from(data));
                    join.yields = 0;
                }
                Ok(data) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                Err(frame) => return Poll::Ready(Some(Ok(frame))),
            }
        }
        let join = self.join.as_mut().expect("set above");
        let buf = join.buf.as_mut().expect("set above");
        while buf.len() < JOINED && !self.inner.is_end_stream() {
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending if join.yields < YIELDS => {
                    join.yields += 1;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Poll::Pending => break,
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        buf.extend_from_slice(&data);
                        join.yields = 0;
                    }
                    Err(frame) => {
                        join.held = Some(Some(Ok(frame)));
                        break;
                    }
                },
                Poll::Ready(other) => {
                    join.held = Some(other);
                    break;
                }
            }
        }
        let data = join.buf.take().expect("set above").freeze();
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    /// Signals each frame taken from now on, and the end of the body.
    pub fn watch(&mut self) -> Arc<Progress> {
        self.progress.get_or_insert_with(Arc::default).clone()
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        let this = self.get_mut();
        let polled = this.poll_joined(cx);
        if let Some(p) = &this.progress {
            p.polled(&polled, this.is_end_stream());
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.join {
            Some(j) if j.buf.is_some() => false,
            Some(j) if j.held.is_some() => matches!(j.held, Some(None)),
            _ => self.inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The one rule for a body middleware hands the gateway (a native
/// plugin's `set_body`, a script's `Request.Body`, a wasm module's
/// buffer): refused past `bound` before it is copied, as every other body
/// the gateway holds whole is bounded (`MAX_BUFFERED_BODY`, 413 for a
/// client's; `MAX_BUFFERED_RESPONSE`, 500 for an upstream's), and
/// `heap::BODY_FACTOR` counts on bodies no larger. `at` names where the
/// body came from (a callback, a field), `what` the body it would be.
pub(crate) fn within(len: usize, bound: usize, at: &str, what: &str) -> Result<(), String> {
    if len > bound {
        return Err(past_bound(at, &len, bound, what));
    }
    Ok(())
}

/// [`within`]'s refusal; `len` may be a lower bound ("at least N") when
/// the body was refused before it was measured in bytes.
#[cold]
pub(crate) fn past_bound(at: &str, len: &dyn fmt::Display, bound: usize, what: &str) -> String {
    format!(
        "{at}: a body of {len} bytes is past the {} MiB bound on {what} ({bound} bytes)",
        bound >> 20
    )
}

/// Sets a request's framing headers for a body of `len` bytes that is now
/// held whole (middleware replaced it, or the proxy is about to send it):
/// the one rule, used by every driver after a body edit and by the proxy
/// before it sends a buffered request, so what the next middleware sees
/// and what the upstream gets agree.
///
/// - `Transfer-Encoding` goes: the body is no longer the client's chunks.
/// - `Content-Length` is `len`, and is sent even as `0` for a method that
///   carries a body (POST, PUT, PATCH), as Go's client sends it; a
///   bodyless GET or HEAD carries none, so an upstream never reads a body
///   the method does not have.
pub fn reframe(headers: &mut http::HeaderMap, method: &http::Method, len: usize) {
    use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
    // One pass over the names (a request has a handful) rather than a
    // hashed removal of each: most requests have neither.
    let (mut sized, mut chunked) = (false, false);
    for name in headers.keys() {
        sized |= name == CONTENT_LENGTH;
        chunked |= name == TRANSFER_ENCODING;
    }
    if chunked {
        headers.remove(TRANSFER_ENCODING);
    }
    frame(headers, method, len, sized);
}

/// [`reframe`] for a map known to have no `Transfer-Encoding` (hop-by-hop
/// headers removed, [`crate::upstream::prepare_deferred`]), whose scan
/// already told whether it has a `Content-Length` (`sized`): a bodyless
/// GET without one, the common case, touches the map not at all.
pub fn frame(headers: &mut http::HeaderMap, method: &http::Method, len: usize, sized: bool) {
    frame_as(headers, carries_body(method), len, sized);
}

/// Whether a request of `method` says its body's length even when empty
/// (`Content-Length: 0`), as Go's client does.
pub fn carries_body(method: &http::Method) -> bool {
    matches!(
        *method,
        http::Method::POST | http::Method::PUT | http::Method::PATCH
    )
}

/// [`frame`] with the method's part decided ([`carries_body`]).
#[inline]
pub fn frame_as(headers: &mut http::HeaderMap, carries_body: bool, len: usize, sized: bool) {
    use http::header::CONTENT_LENGTH;
    if len > 0 || carries_body {
        headers.insert(CONTENT_LENGTH, http::HeaderValue::from(len));
    } else if sized {
        headers.remove(CONTENT_LENGTH);
    }
}

#[cfg(test)]
mod tests {
    use super::reframe;
    use http::{HeaderMap, Method};

    fn framed(method: Method, before: &[(&'static str, &'static str)], len: usize) -> Vec<String> {
        let mut h = HeaderMap::new();
        for (k, v) in before {
            h.append(*k, v.parse().unwrap());
        }
        reframe(&mut h, &method, len);
        let mut out: Vec<String> = h
            .iter()
            .map(|(k, v)| format!("{k}: {}", v.to_str().unwrap()))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_replaced_body_is_framed_by_its_length_alone() {
        let chunked = [("transfer-encoding", "chunked")];
        assert_eq!(framed(Method::POST, &chunked, 14), ["content-length: 14"]);
        let stale = [("content-length", "5")];
        assert_eq!(framed(Method::POST, &stale, 0), ["content-length: 0"]);
        assert_eq!(framed(Method::GET, &stale, 3), ["content-length: 3"]);
        assert!(framed(Method::GET, &stale, 0).is_empty());
        assert!(framed(Method::HEAD, &chunked, 0).is_empty());
    }
}

/// The bytes of bodies a gateway holds whole for middleware at once
/// (request bodies, and upstream bodies for response middleware until the
/// client has been sent them), across its workers, and their bound
/// (`--max-buffered-bodies`).
/// Each body is bounded on its own (`MAX_BUFFERED_BODY`, 413); without
/// this, many slow uploads together were not: ten 30 MB uploads left one
/// byte short grew the gateway by 300 MB, and a thousand would have taken
/// 32 GB. A body that would pass the bound fails with 503 as it arrives.
#[derive(Debug)]
pub struct Buffered {
    held: AtomicUsize,
    limit: usize,
}

impl Buffered {
    /// A bound of `limit` bytes (0: none).
    pub fn new(limit: usize) -> Arc<Buffered> {
        Arc::new(Buffered {
            held: AtomicUsize::new(0),
            limit,
        })
    }

    /// The bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// One body's share of a [`Buffered`] bound, given back when dropped.
#[derive(Debug)]
pub struct Share {
    of: Arc<Buffered>,
    bytes: usize,
}

impl Share {
    /// An empty share of `of`.
    pub fn of(of: &Arc<Buffered>) -> Share {
        Share {
            of: of.clone(),
            bytes: 0,
        }
    }

    /// Takes `n` more bytes; false (taking none) when that would pass the
    /// bound.
    pub fn grow(&mut self, n: usize) -> bool {
        let limit = self.of.limit;
        let taken = self
            .of
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                let now = held.checked_add(n)?;
                (limit == 0 || now <= limit).then_some(now)
            })
            .is_ok();
        if taken {
            self.bytes += n;
        }
        taken
    }

    /// Gives back what it holds past `n` bytes (a body middleware made
    /// smaller); a share never grows this way.
    pub fn shrink_to(&mut self, n: usize) {
        if let Some(extra) = self.bytes.checked_sub(n).filter(|&e| e > 0) {
            self.of.held.fetch_sub(extra, Ordering::AcqRel);
            self.bytes = n;
        }
    }
}

/// Why [`collect_held`] stopped.
#[derive(Debug)]
pub enum HeldError<E> {
    /// The body's own error.
    Read(E),
    /// The body is longer than the one-body bound.
    TooLarge,
    /// Holding it would pass `--max-buffered-bodies`.
    Overloaded,
}

/// Reads `body` whole, up to `max` bytes, each frame taking its part of
/// `buffered` as it arrives; returns the bytes and the share that holds
/// them to the bound until dropped. A body that is over before it starts
/// (most GETs) takes no share: the `Arc` every worker shares would be one
/// more contended count per request. One frame is kept as it came; more
/// are joined once, at the end.
pub async fn collect_held<B: Body<Data = Bytes>>(
    body: B,
    max: usize,
    buffered: &Arc<Buffered>,
) -> Result<(Bytes, Option<Share>), HeldError<B::Error>> {
    if body.is_end_stream() {
        return Ok((Bytes::new(), None));
    }
    let mut share = Share::of(buffered);
    let mut body = std::pin::pin!(body);
    let mut parts: Vec<Bytes> = Vec::new();
    let mut len = 0usize;
    while let Some(frame) = http_body_util::BodyExt::frame(&mut body).await {
        let Ok(data) = frame.map_err(HeldError::Read)?.into_data() else {
            continue;
        };
        len += data.len();
        if len > max {
            return Err(HeldError::TooLarge);
        }
        if !share.grow(data.len()) {
            return Err(HeldError::Overloaded);
        }
        parts.push(data);
    }
    let whole = match parts.len() {
        0 => Bytes::new(),
        1 => parts.pop().expect("one part"),
        _ => {
            let mut whole = bytes::BytesMut::with_capacity(len);
            for part in &parts {
                whole.extend_from_slice(part);
            }
            whole.freeze()
        }
    };
    Ok((whole, Some(share)))
}

impl Drop for Share {
    fn drop(&mut self) {
        self.of.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod share_tests {
    use super::*;

    #[test]
    fn shares_stay_within_the_bound_and_give_back_what_they_took() {
        let bound = Buffered::new(100);
        let mut a = Share::of(&bound);
        let mut b = Share::of(&bound);
        assert!(a.grow(60));
        assert!(!b.grow(41), "past the bound");
        assert_eq!(bound.held(), 60, "a refused grow takes nothing");
        assert!(b.grow(40));
        assert!(!a.grow(1));
        drop(a);
        assert_eq!(bound.held(), 40);
        assert!(b.grow(60));
        b.shrink_to(30);
        assert_eq!(bound.held(), 30);
        b.shrink_to(50);
        assert_eq!(bound.held(), 30, "shrink_to never grows");
        drop(b);
        assert_eq!(bound.held(), 0);
        let unbounded = Buffered::new(0);
        let mut c = Share::of(&unbounded);
        assert!(c.grow(usize::MAX / 2) && c.grow(usize::MAX / 2));
        assert!(!c.grow(usize::MAX), "an overflowing total is refused");
    }
}
