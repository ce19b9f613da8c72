//! One client connection: HTTP/1 over the checked stream of [`crate::wire`],
//! and its part in shutdown.
//!
//! A connection starts on the gateway's own HTTP/1 code ([`crate::h1down`],
//! `--client-http1 own`, the default), which keeps the waits and the
//! shutdown rules below itself; at its first request the own code does not
//! take, the connection moves to hyper's server connection, as every
//! connection does with `--client-http1 hyper`. What follows is that side.
//!
//! - [`crate::wire::ClientIo`] bounds how long a client may take to send a
//!   request head (slowloris connections, a byte every few seconds, were
//!   once held forever), how long a keep-alive connection may stay idle and
//!   how long a client may leave a response unread, and marks request heads
//!   nginx refuses; the service answers those 400
//!   and closes. hyper's own `header_read_timeout` is off: it is one timer
//!   for both waits, and it allocates a timer for every request.
//! - Each response's body is wrapped ([`Answered`]) so the reader knows when
//!   the response is done and the connection idle.
//! - At shutdown each connection is told to finish: one with a request in
//!   flight completes it and closes; one idle between keep-alive requests
//!   closes now (hyper's graceful shutdown). A connection that has not yet
//!   delivered its first request gets [`FIRST_REQUEST_GRACE`] to do so (its
//!   answer carries `Connection: close`): a client whose request bytes are
//!   already on their way is answered, a slowloris connection does not hold
//!   the shutdown.
//! - The worker waits for its connections up to the shutdown grace period,
//!   then drops whatever is left.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http_body::{Body, Frame, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

use crate::body::ClientIn;
use crate::control::Control;
use crate::h1down::End;
use crate::proxy::{ClientBody, Proxy};
use crate::server::{ClientHttp1, GatewayConfig};
use crate::wire::{ClientIo, ConnState, HeadTimeout};

/// How long a connection that has sent no request yet may still deliver one
/// once shutdown begins.
pub const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(1);

/// Serves a worker's client connections and knows how many are open.
pub struct Server {
    /// What every connection's task needs (one count to clone per
    /// connection).
    shared: Rc<Shared>,
    shutdown: watch::Receiver<bool>,
    open: Rc<Open>,
}

/// A worker's connections' common state.
struct Shared {
    proxy: Rc<Proxy>,
    control: Arc<Control>,
    /// Each connection handed to hyper makes its connection from this.
    http: http1::Builder,
    /// Whether connections start on the gateway's own HTTP/1 code.
    own: bool,
    header_timeout: Duration,
    keepalive_timeout: Duration,
    send_timeout: Duration,
    /// Set when shutdown begins: every response from then on closes its
    /// connection, and the own reader's idle connections are woken.
    stop: Stop,
}

/// Shutdown as the own reader's connections see it: a flag, and the
/// wakers of the connections waiting for their next request.
///
/// A `watch` channel did this before: every wait for a request made a
/// `wait_for` future, which locked the channel's value and its `Notify`
/// (a mutex) to enter a waiter list, and locked it again to leave; ~350
/// instructions per kept-alive request. Here a connection takes a slot
/// once, and a wait stores its waker in it only when the task's waker
/// changed (never, for a connection's own task).
#[derive(Default)]
pub struct Stop {
    set: Cell<bool>,
    /// One per connection that has waited; `None` when free or woken.
    waiters: RefCell<Vec<Option<Waker>>>,
    /// Slots given back, for the next connection that waits.
    free: RefCell<Vec<usize>>,
}

impl Stop {
    /// Whether shutdown has begun.
    pub fn is_set(&self) -> bool {
        self.set.get()
    }

    /// Begins shutdown: the flag is set and every waiting connection woken.
    pub fn begin(&self) {
        self.set.set(true);
        // Taken out first: no borrow is held while tasks are woken.
        let woken: Vec<Waker> = self
            .waiters
            .borrow_mut()
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        for w in woken {
            w.wake();
        }
    }

    /// Ready once shutdown has begun; until then `cx`'s task is woken when
    /// it does. `slot` is the connection's, taken at its first wait.
    pub fn poll_begun(&self, cx: &mut Context<'_>, slot: &mut Waiter<'_>) -> Poll<()> {
        if self.set.get() {
            return Poll::Ready(());
        }
        let mut waiters = self.waiters.borrow_mut();
        let i = *slot
            .index
            .get_or_insert_with(|| match self.free.borrow_mut().pop() {
                Some(i) => i,
                None => {
                    waiters.push(None);
                    waiters.len() - 1
                }
            });
        match &mut waiters[i] {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// A connection's slot in [`Stop`]'s waiters, given back when it ends.
pub struct Waiter<'a> {
    stop: &'a Stop,
    index: Option<usize>,
}

impl<'a> Waiter<'a> {
    /// No slot yet: one is taken at the first wait.
    pub fn new(stop: &'a Stop) -> Self {
        Waiter { stop, index: None }
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if let Some(i) = self.index {
            self.stop.waiters.borrow_mut()[i] = None;
            self.stop.free.borrow_mut().push(i);
        }
    }
}

/// Open connections, so shutdown can wait for the last one.
#[derive(Default)]
struct Open {
    count: Cell<usize>,
    /// Most connections open at once since the worker last went quiet.
    peak: Cell<usize>,
    none_left: Notify,
}

/// Connections open at once that make a burst worth a heap trim once the
/// worker is quiet again (ab's `-c 10` never trims; a `-c 1000` run does).
const BURST: usize = 256;

impl Open {
    fn opened(&self) {
        let n = self.count.get() + 1;
        self.count.set(n);
        self.peak.set(self.peak.get().max(n));
    }
}

/// Held by each connection task; counts it out when the task ends.
struct OpenGuard(Rc<Open>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        let open = &self.0;
        open.count.set(open.count.get() - 1);
        if open.count.get() == 0 {
            open.none_left.notify_waiters();
            if open.peak.replace(0) >= BURST {
                trim_heap();
            }
        }
    }
}

/// Gives the pages a burst of connections left free back to the kernel.
///
/// Each of a burst's connections held hyper's read and write buffers and a
/// task (tens of KiB); freed, they stay in glibc's per-thread arenas, which
/// return memory to the kernel only from the top of a heap: a c=1000 burst
/// left tens of MB resident for good. `malloc_trim` releases free pages
/// anywhere in every arena. It walks the heaps (a millisecond or so), so it
/// runs once per burst, when the worker's last connection closes.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl Server {
    /// A server for one worker; `shutdown` turns true when the gateway stops.
    pub fn new(
        proxy: Rc<Proxy>,
        control: Arc<Control>,
        config: &GatewayConfig,
        shutdown: watch::Receiver<bool>,
    ) -> Server {
        let mut http = http1::Builder::new();
        // No timer: the waits are bounded by `ClientIo` (see module docs).
        http.keep_alive(true).header_read_timeout(None);
        Server {
            shared: Rc::new(Shared {
                proxy,
                control,
                http,
                own: config.client_http1 == ClientHttp1::Own,
                header_timeout: config.client_header_timeout,
                keepalive_timeout: config.client_keepalive_timeout,
                send_timeout: config.client_send_timeout,
                stop: Stop::default(),
            }),
            shutdown,
            open: Rc::new(Open::default()),
        }
    }

    /// Serves `stream` on a task of this worker's LocalSet.
    pub fn spawn(&self, stream: TcpStream, remote: SocketAddr) {
        let shared = self.shared.clone();
        let shutdown = self.shutdown.clone();
        self.open.opened();
        let guard = OpenGuard(self.open.clone());
        // Boxed here: tokio moves a task's future several times while it
        // spawns, polls and completes it (each a copy of the whole future);
        // a box is copied once, and the task itself stays small. Two
        // kinds of task, so that each is only as large as it needs.
        if !shared.own {
            tokio::task::spawn_local(Box::pin(async move {
                let _guard = guard;
                serve_hyper(shared, shutdown, stream, Bytes::new(), None, remote).await
            }));
            return;
        }
        // Made in its box: a connection's future is kilobytes.
        tokio::task::spawn_local(crate::h1down::made_in_box(move || async move {
            let _guard = guard;
            let ctx = crate::h1down::Ctx {
                proxy: &shared.proxy,
                control: &shared.control,
                stop: &shared.stop,
                remote,
                header_timeout: shared.header_timeout,
                keepalive_timeout: shared.keepalive_timeout,
                send_timeout: shared.send_timeout,
            };
            match crate::h1down::serve(stream, ctx).await {
                Ok(End::HandOff {
                    stream,
                    read,
                    head_deadline,
                }) => {
                    // Boxed: rare, and hyper's connection is large.
                    let hyper = serve_hyper(shared, shutdown, stream, read, head_deadline, remote);
                    Box::pin(hyper).await
                }
                Ok(End::Closed) => {}
                Err(e) => {
                    tracing::debug!(client = %remote, error = %e, "connection ended with an error")
                }
            }
        }));
    }

    /// Marks the start of shutdown (before the backlog is drained).
    pub fn stopping(&self) {
        self.shared.stop.begin();
    }

    /// Waits for every connection to end, at most `grace`.
    pub async fn drain(&self, grace: Duration) {
        let all_closed = async {
            loop {
                let notified = self.open.none_left.notified();
                if self.open.count.get() == 0 {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(grace, all_closed).await.is_err() {
            tracing::warn!(
                "shutdown grace period over; closing {} remaining connections",
                self.open.count.get()
            );
        }
    }
}

/// Serves a connection with hyper's server connection, `read` (bytes the
/// own reader already took from the stream) first, the head they start
/// due by `head_deadline` when the own reader had set one.
async fn serve_hyper(
    shared: Rc<Shared>,
    mut shutdown: watch::Receiver<bool>,
    stream: TcpStream,
    read: Bytes,
    head_deadline: Option<tokio::time::Instant>,
    remote: SocketAddr,
) {
    let state = Rc::new(ConnState::default());
    let service = {
        let (shared, state) = (shared.clone(), state.clone());
        service_fn(move |req| {
            let refused = state.next_request();
            let shared = shared.clone();
            let state = state.clone();
            async move {
                // HTTP/1.0's method, for the rule below (most requests
                // are HTTP/1.1: nothing to keep).
                let http10 =
                    (req.version() == http::Version::HTTP_10).then(|| req.method().clone());
                let mut resp = match refused {
                    Some(fault) => crate::front::refuse(&req, remote, fault),
                    None => {
                        let req = req.map(ClientIn::Hyper);
                        crate::front::serve(&shared.proxy, &shared.control, req, remote).await
                    }
                };
                // The own server's rule for an HTTP/1.0 answer without a
                // length (hyper would say `keep-alive`, then close).
                if let Some(method) = http10 {
                    let length = {
                        use http_body::Body as _;
                        let body = resp.body();
                        (!body.is_end_stream()).then(|| body.size_hint().exact())
                    };
                    let (mut parts, body) = resp.into_parts();
                    let v = http::Version::HTTP_10;
                    crate::h1down::closes_http10(v, &method, &mut parts, length);
                    resp = http::Response::from_parts(parts, body);
                }
                if shared.stop.is_set() || refused.is_some() {
                    // The last response on this connection.
                    resp.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                go_reason_phrase(&mut resp);
                Ok::<_, std::convert::Infallible>(resp.map(|body| Answered { body, state }))
            }
        })
    };
    let io = ClientIo::new(
        stream,
        state.clone(),
        shared.header_timeout,
        shared.keepalive_timeout,
    )
    .with_replay(read, head_deadline)
    .with_send_timeout(shared.send_timeout);
    // Made here, not captured: a connection made outside and pinned
    // in here would take its room twice in the task's future.
    let conn = shared.http.serve_connection(TokioIo::new(io), service);
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.wait_for(|stop| *stop) => {
            // Boxed: the shutdown wait (a timer) is rare, and would
            // otherwise widen every connection's task.
            match Box::pin(at_shutdown(conn.as_mut(), &state, remote)).await {
                Some(r) => r,
                None => return,
            }
        }
    };
    if let Err(e) = result {
        if let Some(t) = find_cause::<HeadTimeout>(&e) {
            tracing::debug!(client = %remote, "{t}; connection closed");
        } else {
            tracing::debug!(client = %remote, error = %e, "connection ended with an error");
        }
    }
}

/// A client connection's end once shutdown has begun: `None` when it is
/// dropped unanswered (it never sent a request).
async fn at_shutdown<S>(
    mut conn: Pin<&mut http1::Connection<TokioIo<ClientIo>, S>>,
    state: &ConnState,
    remote: SocketAddr,
) -> Option<hyper::Result<()>>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = Answered>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let started = || state.started.get();
    if started() {
        // Idle between requests: closed now. Mid-request: answered, then
        // closed.
        conn.as_mut().graceful_shutdown();
        return Some(conn.await);
    }
    // Not hyper's graceful shutdown: it closes a connection it has read
    // nothing from yet, even when the request is already in the socket
    // buffer. The response says `Connection: close` instead (see
    // `stopping`).
    match tokio::time::timeout(FIRST_REQUEST_GRACE, conn.as_mut()).await {
        Ok(r) => Some(r),
        Err(_) if !started() => {
            tracing::debug!(client = %remote, "shutdown: closing a connection that sent no request");
            None
        }
        Err(_) => {
            conn.as_mut().graceful_shutdown();
            Some(conn.await)
        }
    }
}

/// The first cause of type `T` in `e`'s chain.
fn find_cause<'a, T: std::error::Error + 'static>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(found) = err.downcast_ref::<T>() {
            return Some(found);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if let Some(found) = io.get_ref().and_then(|i| i.downcast_ref::<T>()) {
                return Some(found);
            }
        }
        cur = err.source();
    }
    None
}

/// A response body that tells the connection's reader when hyper is done
/// with it (written to its end, or dropped on an error): from then on the
/// connection is idle, and the keep-alive timeout runs.
pub struct Answered {
    body: ClientBody,
    state: Rc<ConnState>,
}

impl Body for Answered {
    type Data = Bytes;
    type Error = <ClientBody as Body>::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Answered {
    fn drop(&mut self) {
        self.state.answered();
    }
}

/// The reason phrase hyper writes for `resp`, made Go's: the status's
/// own words, `status code N` for a code without any (hyper writes
/// `<none>`), and never an upstream's own phrase (which hyper's client
/// keeps in the response and its server would write back; Go's
/// `ReverseProxy` sends only the code). The own writer does the same
/// (`h1down::write_response`).
fn go_reason_phrase<B>(resp: &mut http::Response<B>) {
    // An upstream's phrase is rare, and an empty extension map is not
    // searched.
    resp.extensions_mut().remove::<hyper::ext::ReasonPhrase>();
    let status = resp.status();
    if status.canonical_reason().is_none() {
        let phrase = format!("status code {}", status.as_u16());
        if let Ok(p) = hyper::ext::ReasonPhrase::try_from(phrase) {
            resp.extensions_mut().insert(p);
        }
    }
}
