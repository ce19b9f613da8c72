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

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
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

/// The client's request body with a timeout between reads.
pub struct RequestBody {
    inner: Incoming,
    limit: Duration,
    idle: Idle,
}

impl RequestBody {
    /// Wraps the client's body; `limit` is the longest wait for the next frame.
    pub fn new(inner: Incoming, limit: Duration) -> Self {
        RequestBody {
            inner,
            limit,
            idle: Idle::default(),
        }
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
        let limit = this.limit;
        this.idle
            .poll_frame(&mut this.inner, limit, cx)
            .map_err(|e| match e {
                Stalled::Inner(e) => ClientBodyError::Read(e),
                Stalled::Idle => ClientBodyError::Timeout(limit),
            })
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
