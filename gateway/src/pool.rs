//! The per-worker upstream connection pool: keep-alive HTTP/1.1 connections
//! made with hyper's `client::conn`, owned by one worker thread.
//!
//! Why not hyper-util's `Client`: it is built to be shared across threads
//! (a Mutex-guarded pool keyed by a hashed scheme+authority, a connection
//! task fed through mpsc + oneshot + want channels). A worker here owns its
//! pool outright, as an nginx worker does, so the pool is a `RefCell` of
//! idle senders per upstream, indexed by a small number fixed when the
//! worker starts; nothing is hashed or locked per request.
//!
//! The rules, each nginx's:
//!
//! - At most `max_idle` idle connections per upstream per worker (nginx's
//!   `keepalive N`); one more is closed instead of kept. Idle ones older
//!   than `idle_timeout` are closed (nginx's upstream `keepalive_timeout`).
//! - The most recently used idle connection is reused first (warm, and the
//!   least likely to have been closed by the upstream's own idle timer).
//! - A connection goes back to the pool only once its response body has
//!   been read to the end ([`ResponseBody`]); a response cut short closes it.
//! - The upstream read timeout applies between two reads of the response
//!   body (nginx's `proxy_read_timeout`); the wait for the response head has
//!   its own timeout in [`crate::proxy`].

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::body::{Idle, RequestBody, Stalled};
use crate::h1up::{RawBody, UpConn};
use crate::upstream::Resolver;

/// A request body on its way upstream: the client's, streamed, or one a
/// middleware buffered or rewrote.
pub type UpstreamBody = Either<RequestBody, Full<Bytes>>;

/// One connection's request handle.
pub struct Sender {
    send: http1::SendRequest<UpstreamBody>,
    /// The task that drives the connection ([`Pool::handshake`]).
    task: tokio::task::AbortHandle,
}

impl std::ops::Deref for Sender {
    type Target = http1::SendRequest<UpstreamBody>;
    fn deref(&self) -> &Self::Target {
        &self.send
    }
}

impl std::ops::DerefMut for Sender {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.send
    }
}

impl Sender {
    /// Closes the connection if dropped before [`Abandon::keep`]: an
    /// exchange given up midway (the upstream timed out while it was
    /// still taking the body) must not leave the connection's task
    /// writing the client's body to an upstream that stopped reading,
    /// holding both connections until the upstream closes.
    pub fn abandon_guard(&self) -> Abandon {
        Abandon(Some(self.task.clone()))
    }
}

/// See [`Sender::abandon_guard`].
pub struct Abandon(Option<tokio::task::AbortHandle>);

impl Abandon {
    /// The exchange ended as it should: the connection lives on.
    pub fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// How a worker's pool behaves (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct PoolConfig {
    /// Idle connections kept per upstream per worker.
    pub max_idle: usize,
    /// How long an idle connection is kept.
    pub idle_timeout: Duration,
    /// How long a TCP connect to the upstream may take.
    pub connect_timeout: Duration,
    /// Longest wait between two reads of the upstream's response body.
    pub read_timeout: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            max_idle: 64,
            idle_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(60),
        }
    }
}

/// Which upstream of a worker's pool a route sends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamId(usize);

/// One upstream (`host:port`) and its idle connections, most recent last.
struct Slot {
    host: String,
    port: u16,
    /// Connections hyper's `client::conn` drives (streaming request bodies).
    idle: RefCell<VecDeque<(Sender, Instant)>>,
    /// Connections the request's own task drives ([`crate::h1up`]).
    raw: RefCell<VecDeque<(UpConn, Instant)>>,
}

impl Slot {
    fn idle_len(&self) -> usize {
        self.idle.borrow().len() + self.raw.borrow().len()
    }

    /// Makes room for one more idle connection: the oldest goes (closing it
    /// by dropping it), as nginx's keepalive cache does.
    fn make_room(&self, max_idle: usize) {
        while self.idle_len() >= max_idle {
            let oldest_raw = self.raw.borrow().front().map(|(_, t)| *t);
            let oldest_hyper = self.idle.borrow().front().map(|(_, t)| *t);
            match (oldest_raw, oldest_hyper) {
                (Some(r), Some(h)) if h < r => drop(self.idle.borrow_mut().pop_front()),
                (Some(_), _) => drop(self.raw.borrow_mut().pop_front()),
                (None, Some(_)) => drop(self.idle.borrow_mut().pop_front()),
                (None, None) => return,
            }
        }
    }
}

/// A worker's upstream connections.
pub struct Pool {
    slots: Vec<Slot>,
    config: PoolConfig,
    resolver: Resolver,
    builder: http1::Builder,
}

/// A connection ready for one request, and whether it came from the pool
/// (only a reused connection may have been closed under us: see
/// [`crate::upstream::send`]).
pub struct Checkout {
    /// The request handle.
    pub sender: Sender,
    /// True when the connection had served a request before.
    pub reused: bool,
}

impl Pool {
    /// An empty pool; add upstreams with [`Pool::register`].
    pub fn new(config: PoolConfig, resolver: Resolver) -> Pool {
        let mut builder = http1::Builder::new();
        // Go writes header names in canonical form (`X-Forwarded-For`), and
        // so Tyk's upstreams see them that way; hyper keeps them lowercase
        // unless asked.
        builder.title_case_headers(true);
        // A value folded over lines (obs-fold), read as one as Go's client
        // does; the own client (`h1up`) unfolds it the same way.
        builder.allow_obsolete_multiline_headers_in_responses(true);
        // The own client's bound on a response head (and hyper's on a
        // trailer section): without it, a head hyper read whole in one go
        // was never measured.
        builder.max_header_size(crate::h1up::MAX_HEAD);
        Pool {
            slots: Vec::new(),
            config,
            resolver,
            builder,
        }
    }

    /// The slot for `host:port`, made on first use.
    pub fn register(&mut self, host: &str, port: u16) -> UpstreamId {
        if let Some(i) = self
            .slots
            .iter()
            .position(|s| s.host == host && s.port == port)
        {
            return UpstreamId(i);
        }
        self.slots.push(Slot {
            host: host.to_string(),
            port,
            idle: RefCell::new(VecDeque::new()),
            raw: RefCell::new(VecDeque::new()),
        });
        UpstreamId(self.slots.len() - 1)
    }

    /// `host:port` of upstream `id`, for logs and error messages.
    pub fn name(&self, id: UpstreamId) -> String {
        let s = &self.slots[id.0];
        format!("{}:{}", s.host, s.port)
    }

    /// The pool's settings.
    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// A connection to `id`: the most recent live idle one, or a new one.
    pub async fn checkout(&self, id: UpstreamId) -> std::io::Result<Checkout> {
        loop {
            // Never hold the RefCell borrow across an await.
            let popped = self.slots[id.0].idle.borrow_mut().pop_back();
            let Some((mut sender, since)) = popped else {
                break;
            };
            if sender.is_closed() || since.elapsed() > self.config.idle_timeout {
                continue;
            }
            // Just checked in: the connection task may not have seen the end
            // of the previous response yet. `ready` waits for it, or fails if
            // the connection closed.
            if sender.is_ready() || sender.ready().await.is_ok() {
                return Ok(Checkout {
                    sender,
                    reused: true,
                });
            }
        }
        // An idle connection of the in-task kind serves as well: hyper
        // takes it over (it does not come back to that kind).
        if let Some(conn) = self.pop_raw(id) {
            return Ok(Checkout {
                sender: self.handshake(conn.into_stream()).await?,
                reused: true,
            });
        }
        self.connect(id).await.map(|sender| Checkout {
            sender,
            reused: false,
        })
    }

    /// The most recent live idle in-task connection to `id`.
    fn pop_raw(&self, id: UpstreamId) -> Option<UpConn> {
        loop {
            let (mut conn, since) = self.slots[id.0].raw.borrow_mut().pop_back()?;
            if since.elapsed() <= self.config.idle_timeout && conn.still_open() {
                return Some(conn);
            }
        }
    }

    /// The most recent live idle in-task connection to `id`
    /// ([`crate::h1up`]), if there is one.
    pub fn idle_raw(&self, id: UpstreamId) -> Option<UpConn> {
        self.pop_raw(id)
    }

    /// A new connection to `id` for an in-task exchange.
    pub async fn connect_raw(&self, id: UpstreamId) -> std::io::Result<UpConn> {
        Ok(UpConn::new(self.connect_stream(id).await?))
    }

    /// Gives an in-task connection back after its response ended cleanly.
    pub fn checkin_raw(&self, id: UpstreamId, conn: UpConn) {
        if self.config.max_idle == 0 {
            return;
        }
        let slot = &self.slots[id.0];
        slot.make_room(self.config.max_idle);
        slot.raw.borrow_mut().push_back((conn, Instant::now()));
    }

    /// Opens a new connection to `id` for hyper's `client::conn`.
    pub async fn connect(&self, id: UpstreamId) -> std::io::Result<Sender> {
        let stream = self.connect_stream(id).await?;
        self.handshake(stream).await
    }

    /// Opens a TCP connection to `id`, trying each resolved address in turn.
    async fn connect_stream(&self, id: UpstreamId) -> std::io::Result<TcpStream> {
        let slot = &self.slots[id.0];
        let addrs = self.resolver.lookup(&slot.host).await?;
        let mut last = None;
        for ip in addrs {
            let addr = SocketAddr::new(ip.ip(), slot.port);
            match tokio::time::timeout(self.config.connect_timeout, TcpStream::connect(addr)).await
            {
                Ok(Ok(stream)) => {
                    stream.set_nodelay(true)?;
                    return Ok(stream);
                }
                Ok(Err(e)) => last = Some(std::io::Error::new(e.kind(), format!("{addr}: {e}"))),
                Err(_) => {
                    last = Some(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "{addr}: connect timed out after {:?}",
                            self.config.connect_timeout
                        ),
                    ))
                }
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no address to connect to")))
    }

    async fn handshake(&self, stream: TcpStream) -> std::io::Result<Sender> {
        let (sender, conn) = self
            .builder
            .handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        // The connection runs as a task of this worker's LocalSet; it ends
        // when the sender is dropped and no request is in flight, or when
        // the upstream closes.
        let task = tokio::task::spawn_local(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "upstream connection ended with an error");
            }
        });
        Ok(Sender {
            send: sender,
            task: task.abort_handle(),
        })
    }

    /// Gives a connection back after its response ended.
    pub fn checkin(&self, id: UpstreamId, sender: Sender) {
        if sender.is_closed() || self.config.max_idle == 0 {
            return;
        }
        let slot = &self.slots[id.0];
        slot.make_room(self.config.max_idle);
        slot.idle.borrow_mut().push_back((sender, Instant::now()));
    }

    /// Closes idle connections older than the idle timeout; the worker calls
    /// it periodically so an idle pool shrinks without traffic.
    pub fn sweep(&self) {
        for slot in &self.slots {
            let mut idle = slot.idle.borrow_mut();
            idle.retain(|(s, since)| !s.is_closed() && since.elapsed() <= self.config.idle_timeout);
            let mut raw = slot.raw.borrow_mut();
            raw.retain_mut(|(c, since)| {
                since.elapsed() <= self.config.idle_timeout && c.still_open()
            });
        }
    }

    /// Idle connections held now, all upstreams together.
    pub fn idle_count(&self) -> usize {
        self.slots.iter().map(Slot::idle_len).sum()
    }
}

/// The upstream's response body, streamed to the client: fails when the
/// upstream stalls longer than the read timeout, and returns the connection
/// to the pool when the body has been read to its end.
pub struct ResponseBody {
    inner: Inner,
    idle: Idle,
    read_timeout: Duration,
    /// Where a hyper connection goes back when the body ends; `None` once
    /// given back (or when the connection must not be reused). An in-task
    /// body gives its connection back itself. Boxed: only hyper's side has
    /// one, and every response's body is moved a few times on its way.
    home: Option<Box<(Rc<Pool>, UpstreamId, Sender)>>,
}

/// Who reads the body off the connection.
enum Inner {
    Hyper(Incoming),
    InTask(RawBody),
}

impl Body for Inner {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            Inner::Hyper(b) => Pin::new(b).poll_frame(cx).map_err(Into::into),
            Inner::InTask(b) => Pin::new(b).poll_frame(cx).map_err(Into::into),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Inner::Hyper(b) => b.is_end_stream(),
            Inner::InTask(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Inner::Hyper(b) => b.size_hint(),
            Inner::InTask(b) => b.size_hint(),
        }
    }
}

impl ResponseBody {
    /// Wraps hyper's `inner`; `home` is the pool slot its connection
    /// returns to.
    pub fn new(inner: Incoming, home: Option<(Rc<Pool>, UpstreamId, Sender)>) -> Self {
        let read_timeout = home
            .as_ref()
            .map_or(PoolConfig::default().read_timeout, |(p, ..)| {
                p.config.read_timeout
            });
        let mut body = ResponseBody {
            inner: Inner::Hyper(inner),
            idle: Idle::default(),
            read_timeout,
            home: home.map(Box::new),
        };
        // No body at all (HEAD, 204, Content-Length: 0): hyper may never
        // poll it, so give the connection back now.
        if body.inner.is_end_stream() {
            body.give_back();
        }
        body
    }

    /// Wraps an in-task body read from a connection of `pool`.
    pub fn in_task(inner: RawBody, pool: &Pool) -> Self {
        ResponseBody {
            inner: Inner::InTask(inner),
            idle: Idle::default(),
            read_timeout: pool.config.read_timeout,
            home: None,
        }
    }

    fn give_back(&mut self) {
        if let Some(home) = self.home.take() {
            let (pool, id, sender) = *home;
            pool.checkin(id, sender);
        }
    }
}

/// The upstream stalled mid-body.
#[derive(Debug)]
pub struct UpstreamReadTimeout(pub Duration);

impl std::fmt::Display for UpstreamReadTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the upstream sent no response body data for {:?} (--upstream-read-timeout)",
            self.0
        )
    }
}

impl std::error::Error for UpstreamReadTimeout {}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let limit = this.read_timeout;
        match this.idle.poll_frame(&mut this.inner, limit, cx) {
            Poll::Ready(None) => {
                this.give_back();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                // A broken or stalled body: never reuse the connection.
                this.home = None;
                let e: Self::Error = match e {
                    Stalled::Inner(e) => e,
                    Stalled::Idle => UpstreamReadTimeout(limit).into(),
                };
                static GATE: crate::lograte::LogGate = crate::lograte::LogGate::new();
                if let Some(left_out) = GATE.admit() {
                    tracing::warn!(
                        "upstream response body failed; the client's response is cut short: {e}{}",
                        crate::lograte::LeftOut(left_out)
                    );
                }
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        // hyper drops a body once it has written its last frame, sometimes
        // without polling for the end: the connection is reusable then.
        if self.inner.is_end_stream() {
            self.give_back();
        }
    }
}
