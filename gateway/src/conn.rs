//! One client connection: HTTP/1 with a head timeout, and its part in
//! shutdown.
//!
//! - hyper's `header_read_timeout` bounds how long a client may take to send
//!   a request head. It needs a timer, which hyper does not have unless
//!   given one; without it slowloris connections (a byte every few seconds)
//!   were held forever. hyper starts the timer as soon as the connection
//!   waits for a head, so it is also the keep-alive idle timeout.
//! - At shutdown each connection is told to finish: one with a request in
//!   flight completes it and closes; one idle between keep-alive requests
//!   closes now (hyper's graceful shutdown). A connection that has not yet
//!   delivered its first request gets [`FIRST_REQUEST_GRACE`] to do so (its
//!   answer carries `Connection: close`): a client whose request bytes are
//!   already on their way is answered, a slowloris connection does not hold
//!   the shutdown.
//! - The worker waits for its connections up to the shutdown grace period,
//!   then drops whatever is left.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use http::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

use crate::control::Control;
use crate::proxy::Proxy;
use crate::server::GatewayConfig;

/// How long a connection that has sent no request yet may still deliver one
/// once shutdown begins.
pub const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(1);

/// Serves a worker's client connections and knows how many are open.
pub struct Server {
    proxy: Rc<Proxy>,
    control: Arc<Control>,
    http: http1::Builder,
    shutdown: watch::Receiver<bool>,
    /// Set when shutdown begins: every response from then on closes its
    /// connection.
    stopping: Rc<Cell<bool>>,
    open: Rc<Open>,
}

/// Open connections, so shutdown can wait for the last one.
#[derive(Default)]
struct Open {
    count: Cell<usize>,
    none_left: Notify,
}

/// Held by each connection task; counts it out when the task ends.
struct OpenGuard(Rc<Open>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        let open = &self.0;
        open.count.set(open.count.get() - 1);
        if open.count.get() == 0 {
            open.none_left.notify_waiters();
        }
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
        http.keep_alive(true)
            .timer(TokioTimer::new())
            .header_read_timeout(config.client_header_timeout);
        Server {
            proxy,
            control,
            http,
            shutdown,
            stopping: Rc::default(),
            open: Rc::new(Open::default()),
        }
    }

    /// Serves `stream` on a task of this worker's LocalSet.
    pub fn spawn(&self, stream: TcpStream, remote: SocketAddr) {
        // Set when the first request head has arrived (see module docs).
        let started = Rc::new(Cell::new(false));
        let service = {
            let (proxy, control, started) =
                (self.proxy.clone(), self.control.clone(), started.clone());
            let stopping = self.stopping.clone();
            service_fn(move |req| {
                started.set(true);
                let (proxy, control, stopping) = (proxy.clone(), control.clone(), stopping.clone());
                async move {
                    let mut resp = crate::front::serve(&proxy, &control, req, remote).await;
                    if stopping.get() {
                        // The last response on this connection.
                        resp.headers_mut()
                            .insert(header::CONNECTION, HeaderValue::from_static("close"));
                    }
                    Ok::<_, std::convert::Infallible>(resp)
                }
            })
        };
        let conn = self.http.serve_connection(TokioIo::new(stream), service);
        let mut shutdown = self.shutdown.clone();
        self.open.count.set(self.open.count.get() + 1);
        let guard = OpenGuard(self.open.clone());
        tokio::task::spawn_local(async move {
            let _guard = guard;
            let mut conn = std::pin::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = shutdown.wait_for(|stop| *stop) => {
                    if started.get() {
                        // Idle between requests: closed now. Mid-request:
                        // answered, then closed.
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    } else {
                        // Not hyper's graceful shutdown: it closes a
                        // connection it has read nothing from yet, even when
                        // the request is already in the socket buffer. The
                        // response says `Connection: close` instead (see
                        // `stopping`).
                        match tokio::time::timeout(FIRST_REQUEST_GRACE, conn.as_mut()).await {
                            Ok(r) => r,
                            Err(_) if !started.get() => {
                                tracing::debug!(client = %remote, "shutdown: closing a connection that sent no request");
                                return;
                            }
                            Err(_) => {
                                conn.as_mut().graceful_shutdown();
                                conn.await
                            }
                        }
                    }
                }
            };
            if let Err(e) = result {
                if e.is_timeout() {
                    tracing::debug!(client = %remote, "client took longer than --client-header-timeout to send a request head; connection closed");
                } else {
                    tracing::debug!(client = %remote, error = %e, "connection ended with an error");
                }
            }
        });
    }

    /// Marks the start of shutdown (before the backlog is drained).
    pub fn stopping(&self) {
        self.stopping.set(true);
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
