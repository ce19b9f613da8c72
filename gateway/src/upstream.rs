//! The upstream side: sending a request over the worker's pool (see
//! [`crate::pool`]) with nginx's safe retry of a stale pooled connection, and
//! the header hygiene a proxy owes both directions (hop-by-hop headers,
//! `X-Forwarded-For`, Tyk's default `User-Agent`).
//!
//! Upstream connections are reused even when the client spoke HTTP/1.0 and
//! closes after every request, which is ab's default and the seed's
//! workload: without the pool every proxied request would pay a TCP
//! handshake to the upstream as well.
//!
//! Target host names are resolved once at load ([`Resolver::prepare`]): a
//! resolver call per new connection would go through a blocking thread, and
//! `localhost` resolving to `::1` first would cost a refused connect each time
//! when the upstream listens on 127.0.0.1 only.

use std::collections::HashMap;
use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response};
use http_body::Body as _;
use http_body_util::{Either, Full};
use tokio::time::Instant;

use crate::error::{Kind, Origin, ProxyError};
use crate::h1up;
pub use crate::hop::Hop;
use crate::pool::{Pool, ResponseBody, Sender, UpstreamBody, UpstreamId};
use crate::proxy::ClientBody;

/// Resolves target hosts from a table filled at load, falling back to the
/// system resolver for names it has not seen (and remembering the answer).
#[derive(Clone, Default)]
pub struct Resolver {
    table: Arc<RwLock<HashMap<String, Vec<SocketAddr>>>>,
}

impl Resolver {
    /// Resolves `host` now and remembers it, IPv4 first. Errors name the host.
    pub fn prepare(&self, host: &str) -> Result<(), String> {
        let addrs = resolve_blocking(host)?;
        self.table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(host.to_string(), addrs);
        Ok(())
    }
}

fn resolve_blocking(host: &str) -> Result<Vec<SocketAddr>, String> {
    let mut addrs: Vec<SocketAddr> = (host, 0)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
        .collect();
    // Prefer IPv4: local upstreams (the mock, most dev servers) bind 127.0.0.1.
    addrs.sort_by_key(|a| a.is_ipv6());
    addrs.dedup();
    if addrs.is_empty() {
        return Err(format!("{host:?} resolved to no address"));
    }
    Ok(addrs)
}

impl Resolver {
    /// The addresses of `host`: from the table when it is there (every
    /// target is, after load), else from the system resolver on a blocking
    /// thread, remembered for next time.
    pub async fn lookup(&self, host: &str) -> std::io::Result<Vec<SocketAddr>> {
        if let Some(addrs) = self.cached(host) {
            return Ok(addrs);
        }
        let h = host.to_string();
        let addrs = tokio::task::spawn_blocking(move || resolve_blocking(&h))
            .await
            .map_err(std::io::Error::other)?
            .map_err(std::io::Error::other)?;
        self.table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(host.to_string(), addrs.clone());
        Ok(addrs)
    }

    /// The addresses remembered for `host`, if any.
    pub fn cached(&self, host: &str) -> Option<Vec<SocketAddr>> {
        self.table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(host)
            .cloned()
    }
}

/// Tyk's default `User-Agent` for requests whose client sent none (Tyk's
/// director sets `"Tyk/" + VERSION`; this is `internal/build.Version`'s
/// default on Tyk master), so upstreams never see hyper's or nothing.
pub const TYK_USER_AGENT: &str = "Tyk/v5.5.0-dev";

/// Sends `req` to upstream `id` and wraps the response for streaming back.
///
/// A pooled connection may have been closed by the upstream while it sat
/// idle (a server at its keep-alive limit or idle timeout). Then, as nginx
/// does, the request is retried once on a fresh connection when nothing of
/// the response arrived and either the request was never written (hyper
/// hands it back) or it is idempotent and so safe to send twice.
///
/// The request is taken apart when `send` is called, not when the future
/// is first polled: the in-task path encodes it at once ([`Encoded`]), so
/// its future holds a byte buffer, not the request, and the rarer, larger
/// paths (a body still streaming, a new connection) wait in boxes. Every
/// caller above holds and moves this future: its size is paid at each
/// level (see [`crate::proxy::Proxy::handle`]).
///
/// `limit` is `--upstream-timeout`: how long the upstream may take to
/// answer once it has the whole request ([`after_body`] for a body still
/// streaming from the client), else Tyk's 504.
///
/// The response comes back as the client gets it: its body wrapped, its
/// hop-by-hop headers removed.
pub fn send<'a>(
    pool: &'a Rc<Pool>,
    id: UpstreamId,
    mut req: Request<UpstreamBody>,
    added: Added,
    limit: Duration,
) -> impl Future<Output = Result<Response<ClientBody>, ProxyError>> + 'a {
    let work = match req.body_mut() {
        // Still arriving from the client: hyper writes it while it watches
        // for an early answer.
        Either::Left(b) if !http_body::Body::is_end_stream(b) => {
            let progress = b.watch();
            added.apply(req.headers_mut());
            Err(Box::pin(after_body(
                send_streaming(pool, id, req),
                progress,
                limit,
            )))
        }
        _ => Ok(Encoded::new(req, &added)),
    };
    async move {
        match work {
            Ok(req) => send_in_task(pool, id, req, Instant::now() + limit).await,
            Err(streaming) => streaming.await,
        }
    }
}

/// Times an exchange whose body streams from the client, as nginx times
/// one: while the body goes up, the upstream must take each next part of
/// it within `limit` (`proxy_send_timeout`); once it has the whole body,
/// it must answer within `limit`. A client that uploads slowly, or pauses,
/// is not the upstream's fault: its pauses are the client body timeout's
/// (408). (The whole exchange used to be timed from the start: an upload
/// longer than `--upstream-timeout` got a 504 while it was still going.)
async fn after_body(
    work: impl Future<Output = Result<Response<ClientBody>, ProxyError>>,
    progress: Arc<crate::body::Progress>,
    limit: Duration,
) -> Result<Response<ClientBody>, ProxyError> {
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            // An answer that is ready wins over a timer that is too.
            biased;
            resp = &mut work => return resp,
            ended = progress.next() => if ended { break },
            () = tokio::time::sleep(limit) => if !progress.client_turn() {
                return Err(timed_out());
            },
        }
    }
    match tokio::time::timeout(limit, work).await {
        Ok(resp) => resp,
        Err(_) => Err(timed_out()),
    }
}

/// The upstream did not answer within `--upstream-timeout`: Tyk's 504.
fn timed_out() -> ProxyError {
    ProxyError::new(Kind::UpstreamTimeout, Origin::Upstream)
}

/// [`send`] for a request already encoded: the proxy's common path (no
/// middleware, or middleware run in place, and no body to stream), which
/// writes the upstream's head straight from the client's request without
/// building a `Request` for the upstream.
pub fn send_encoded(
    pool: &Rc<Pool>,
    id: UpstreamId,
    req: Encoded,
    limit: Duration,
) -> impl Future<Output = Result<Response<ClientBody>, ProxyError>> + '_ {
    send_in_task(pool, id, req, Instant::now() + limit)
}

/// A request whose body is known (none, or buffered), as the bytes an
/// in-task exchange writes: also what a retry sends again.
pub struct Encoded {
    /// The head, and the body too when it is small enough to go in the
    /// same write ([`h1up::coalesce`]).
    head: Vec<u8>,
    /// The body when it goes in a write of its own; empty otherwise.
    rest: Bytes,
    method: Method,
}

impl Encoded {
    fn new(req: Request<UpstreamBody>, added: &Added) -> Encoded {
        let (parts, body) = req.into_parts();
        let body = match body {
            // A buffered body is one frame, ready now (none when empty).
            Either::Right(full) => full_data(full),
            Either::Left(_) => Bytes::new(),
        };
        let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let target = |d: &mut Vec<u8>| d.extend_from_slice(target.as_bytes());
        Encoded::from_head(&parts.method, target, &parts.headers, added, body)
    }

    /// The request `method target` with `headers` (and `added`), `body`
    /// after them. `target` writes the origin-form request target as it
    /// is: the caller makes it from checked parts (a client's parsed path,
    /// a target URL checked at load) or checks it.
    pub fn from_head(
        method: &Method,
        target: impl FnOnce(&mut Vec<u8>),
        headers: &HeaderMap,
        added: &Added,
        body: Bytes,
    ) -> Encoded {
        let coalesce = h1up::coalesce(body.len());
        let mut head = Vec::with_capacity(256 + if coalesce { body.len() } else { 0 });
        h1up::encode_head(&mut head, method, target, headers, added, body.len());
        let rest = if coalesce {
            head.extend_from_slice(&body);
            Bytes::new()
        } else {
            body
        };
        Encoded {
            head,
            rest,
            method: method.clone(),
        }
    }
}

/// The data of a buffered body: `Full` yields its one frame on the first
/// poll, without waiting.
fn full_data(mut full: Full<Bytes>) -> Bytes {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match Pin::new(&mut full).poll_frame(&mut cx) {
        Poll::Ready(Some(Ok(frame))) => frame.into_data().unwrap_or_default(),
        _ => Bytes::new(),
    }
}

/// [`send`] for a request whose body is known: the exchange runs in this
/// task ([`crate::h1up`]), answered by `deadline` (a new connection's
/// connect included).
async fn send_in_task(
    pool: &Rc<Pool>,
    id: UpstreamId,
    req: Encoded,
    deadline: Instant,
) -> Result<Response<ClientBody>, ProxyError> {
    let (mut conn, reused) = match pool.idle_raw(id) {
        Some(conn) => (conn, true),
        None => (connect_raw(pool, id, deadline).await?, false),
    };
    let head = match conn
        .exchange(&req.head, &req.rest, &req.method, deadline)
        .await
    {
        Ok(h) => h,
        // A pooled connection the upstream had closed: as nginx does, send
        // again on a new one if nothing came back and the request either
        // never left or is idempotent (safe to send twice).
        Err(h1up::Failure::Stale { cause, written })
            if reused && (!written || is_idempotent(&req.method)) =>
        {
            retry_note(pool, id, cause);
            conn = connect_raw(pool, id, deadline).await?;
            conn.exchange(&req.head, &req.rest, &req.method, deadline)
                .await
                .map_err(|e| exchange_error(pool, id, e))?
        }
        Err(e) => return Err(exchange_error(pool, id, e)),
    };
    let body = h1up::RawBody::new(conn, &head, (pool.clone(), id));
    let mut resp = Response::new(Either::Left(ResponseBody::in_task(body, pool)));
    *resp.status_mut() = head.status;
    // The gateway's own version, not the upstream's: an intermediary sends
    // its own (RFC 9112 §2.3), as Go's server does; an HTTP/1.0 upstream's
    // answer went to HTTP/1.1 clients as `HTTP/1.0` and closed their
    // connection. The client's server writes HTTP/1.0 to HTTP/1.0 clients.
    *resp.version_mut() = http::Version::HTTP_11;
    // The map `Response::new` made has no room (no allocation): forgotten,
    // not dropped.
    std::mem::forget(std::mem::replace(resp.headers_mut(), head.headers));
    remove_hop_by_hop(resp.headers_mut());
    Ok(resp)
}

/// A new connection for an in-task exchange. Boxed: connecting (a lookup,
/// a timed connect) makes a future several times the size of the exchange,
/// and most requests find an idle connection instead.
async fn connect_raw(
    pool: &Pool,
    id: UpstreamId,
    deadline: Instant,
) -> Result<h1up::UpConn, ProxyError> {
    match Box::pin(tokio::time::timeout_at(deadline, pool.connect_raw(id))).await {
        Ok(conn) => conn.map_err(|e| connect_error(pool, id, e)),
        Err(_) => Err(timed_out()),
    }
}

/// A failed in-task exchange as Tyk's answer.
fn exchange_error(pool: &Pool, id: UpstreamId, e: h1up::Failure) -> ProxyError {
    let detail = match e {
        h1up::Failure::TimedOut => return timed_out(),
        h1up::Failure::Bad(what) => format!("bad answer from upstream {}: {what}", pool.name(id)),
        h1up::Failure::Stale { cause, .. } => format!("upstream {}: {cause}", pool.name(id)),
        h1up::Failure::Io(e) => format!("upstream {}: {e}", pool.name(id)),
    };
    ProxyError::with_cause(Kind::UpstreamFailed, Origin::Upstream, detail)
}

/// [`send`] for a request whose body still streams from the client.
async fn send_streaming(
    pool: &Rc<Pool>,
    id: UpstreamId,
    mut req: Request<UpstreamBody>,
) -> Result<Response<ClientBody>, ProxyError> {
    let interim = h1up::Interim::watch(&mut req);
    let checkout = pool
        .checkout(id)
        .await
        .map_err(|e| connect_error(pool, id, e))?;
    let mut sender = checkout.sender;
    // Dropped with this future (a timeout) before the answer came: the
    // connection closes instead of writing on (`Sender::abandon_guard`).
    let mut guard = sender.abandon_guard();
    // Only a reused connection can turn out stale, so only then is a copy
    // kept (it costs a header map clone).
    let replay = if checkout.reused {
        replayable_copy(&req)
    } else {
        None
    };
    let resp = match interim.race(sender.try_send_request(req)).await {
        Ok(resp) => resp,
        Err(None) => return Err(too_many_interim(pool, id)),
        Err(Some(mut e)) => {
            let cause = checkout.reused.then(|| stale_cause(e.error())).flatten();
            let again = cause.and_then(|_| e.take_message().or(replay));
            let (Some(cause), Some(mut again)) = (cause, again) else {
                return Err(upstream_error(pool, id, e.into_error()));
            };
            retry_note(pool, id, cause);
            sender = pool
                .connect(id)
                .await
                .map_err(|e| connect_error(pool, id, e))?;
            guard = sender.abandon_guard();
            let interim = h1up::Interim::watch(&mut again);
            match interim.race(sender.send_request(again)).await {
                Ok(resp) => resp,
                Err(None) => return Err(too_many_interim(pool, id)),
                Err(Some(e)) => return Err(upstream_error(pool, id, e)),
            }
        }
    };
    guard.keep();
    finish(pool, id, sender, resp)
}

#[cold]
fn too_many_interim(pool: &Pool, id: UpstreamId) -> ProxyError {
    let detail = format!(
        "bad answer from upstream {}: it sent more than {} interim (1xx) answers",
        pool.name(id),
        h1up::MAX_INTERIM
    );
    ProxyError::with_cause(Kind::UpstreamFailed, Origin::Upstream, detail)
}

/// Checks the response head and wraps its body so the connection returns to
/// the pool when the body ends.
fn finish(
    pool: &Rc<Pool>,
    id: UpstreamId,
    sender: Sender,
    resp: Response<hyper::body::Incoming>,
) -> Result<Response<ClientBody>, ProxyError> {
    if resp.status() == http::StatusCode::SWITCHING_PROTOCOLS {
        // As the in-task reader (`h1up`): no upgrade is ever asked for.
        return Err(ProxyError::with_cause(
            Kind::UpstreamFailed,
            Origin::Upstream,
            format!(
                "bad answer from upstream {}: it switched protocols (101) though no upgrade was asked for",
                pool.name(id)
            ),
        ));
    }
    if let Err(why) = h1up::only_chunked(resp.headers()) {
        return Err(ProxyError::with_cause(
            Kind::UpstreamFailed,
            Origin::Upstream,
            format!("bad answer from upstream {}: {why}", pool.name(id)),
        ));
    }
    let h = resp.headers();
    if h.contains_key(header::CONTENT_LENGTH) && h.contains_key(header::TRANSFER_ENCODING) {
        // Framed two ways: whichever we believed, the client might believe
        // the other (response splitting). Dropping `sender` and the body
        // closes the connection.
        return Err(ProxyError::with_cause(
            Kind::UpstreamFailed,
            Origin::Upstream,
            format!(
                "bad answer from upstream {}: the response has both Content-Length and Transfer-Encoding",
                pool.name(id)
            ),
        ));
    }
    let closing = h
        .get(header::CONNECTION)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
    let (mut parts, body) = resp.into_parts();
    let home = (!closing).then(|| (pool.clone(), id, sender));
    remove_hop_by_hop(&mut parts.headers);
    // The gateway's own version, as on the in-task path (`send_in_task`).
    parts.version = http::Version::HTTP_11;
    Ok(Response::from_parts(
        parts,
        Either::Left(ResponseBody::new(body, home)),
    ))
}

/// Why a pooled connection failed before any response arrived, in plain
/// words; `None` when the failure is not one a fresh connection would avoid.
fn stale_cause(e: &hyper::Error) -> Option<&'static str> {
    if e.is_canceled() {
        return Some("the pooled upstream connection closed before the request was sent");
    }
    if e.is_incomplete_message() {
        return Some("the upstream closed a pooled keep-alive connection without answering");
    }
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>())?;
    match io.kind() {
        std::io::ErrorKind::ConnectionReset => {
            Some("the upstream reset a pooled keep-alive connection")
        }
        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionAborted => {
            Some("the upstream had closed a pooled keep-alive connection (broken pipe)")
        }
        _ => None,
    }
}

/// Says that a stale pooled connection is retried. An upstream that closes
/// every kept-alive connection unannounced makes one of these per request,
/// so they are bounded (`--log-rate`).
fn retry_note(pool: &Pool, id: UpstreamId, cause: &str) {
    static GATE: crate::lograte::LogGate = crate::lograte::LogGate::new();
    if let Some(left_out) = GATE.admit() {
        tracing::info!(
            "upstream {}: {cause}; retrying once on a new connection{}",
            pool.name(id),
            crate::lograte::LeftOut(left_out)
        );
    }
}

fn is_idempotent(m: &Method) -> bool {
    matches!(
        *m,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// A copy of `req` to send again if the first attempt meets a stale
/// connection: idempotent requests whose body is buffered or empty.
fn replayable_copy(req: &Request<UpstreamBody>) -> Option<Request<UpstreamBody>> {
    if !is_idempotent(req.method()) {
        return None;
    }
    let body = match req.body() {
        Either::Right(full) => Either::Right(full.clone()),
        Either::Left(b) if http_body::Body::is_end_stream(b) => Either::Right(Full::default()),
        Either::Left(_) => return None,
    };
    let mut copy = Request::new(body);
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    Some(copy)
}

fn connect_error(pool: &Pool, id: UpstreamId, e: std::io::Error) -> ProxyError {
    ProxyError::with_cause(
        Kind::UpstreamFailed,
        Origin::Upstream,
        format!("cannot connect to upstream {}: {e}", pool.name(id)),
    )
}

/// Maps a failed exchange to its error: the client's fault when its body
/// was bad or stalled, the upstream's otherwise.
fn upstream_error(pool: &Pool, id: UpstreamId, e: hyper::Error) -> ProxyError {
    if let Some(body) = crate::body::ClientBodyError::find(&e) {
        let kind = match body {
            crate::body::ClientBodyError::Timeout(_) => Kind::RequestTimeout,
            crate::body::ClientBodyError::Read(_) => Kind::BadRequest,
        };
        return ProxyError::with_cause(kind, Origin::Client, body.to_string());
    }
    let detail = match std::error::Error::source(&e) {
        Some(src) => format!("{e}: {src}"),
        None => e.to_string(),
    };
    ProxyError::with_cause(
        Kind::UpstreamFailed,
        Origin::Upstream,
        format!("upstream {}: {detail}", pool.name(id)),
    )
}

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1),
/// and so never cross a proxy.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    // hyper frames each side's body itself.
    header::TRANSFER_ENCODING,
];

/// Removes hop-by-hop headers, including any the `Connection` header names.
///
/// One pass over the names first: most requests carry none, and then
/// nothing is hashed or removed.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    if !headers.keys().any(|k| HOP_BY_HOP.contains(k)) {
        return;
    }
    // The names to remove, found by a scan of the map's few names (not a
    // hashed removal of every hop-by-hop name, nor a name made for each
    // `Connection` token such as `keep-alive` or `close`).
    let mut doomed: Vec<HeaderName> = Vec::new();
    let mut hop = [false; 9];
    let connection = headers.get_all(header::CONNECTION);
    let listed = |name: &HeaderName| {
        connection.iter().any(|v| {
            v.as_bytes().split(|&b| b == b',').any(|t| {
                t.trim_ascii()
                    .eq_ignore_ascii_case(name.as_str().as_bytes())
            })
        })
    };
    for name in headers.keys() {
        if let Some(i) = HOP_BY_HOP.iter().position(|h| h == name) {
            hop[i] = true;
        } else if listed(name) {
            doomed.push(name.clone());
        }
    }
    for name in doomed {
        headers.remove(name);
    }
    for (name, present) in HOP_BY_HOP.iter().zip(hop) {
        if present {
            headers.remove(name);
        }
    }
}

/// [`remove_hop_by_hop`] for a request on its way upstream: `TE: trailers`
/// passes, as in Tyk (it says the client accepts trailers, which a gRPC-style
/// upstream needs to know).
pub fn remove_hop_by_hop_request(headers: &mut HeaderMap) {
    let trailers = headers.get(header::TE).is_some_and(|v| v == "trailers");
    remove_hop_by_hop(headers);
    if trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
}

const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Which of the headers a proxy edits a request already has.
#[derive(Default)]
struct Present {
    hop_by_hop: bool,
    content_length: bool,
    forwarded_for: bool,
    user_agent: bool,
    via: bool,
    host: bool,
}

impl Present {
    /// One pass over the names (a request has a handful), instead of a
    /// hashed lookup per header edited.
    fn of(headers: &HeaderMap) -> Present {
        let mut p = Present::default();
        for name in headers.keys() {
            if name == header::USER_AGENT {
                p.user_agent = true;
            } else if name == header::HOST {
                p.host = true;
            } else if name == XFF {
                p.forwarded_for = true;
            } else if name == header::VIA {
                p.via = true;
            } else if name == header::CONTENT_LENGTH {
                p.content_length = true;
            } else if HOP_BY_HOP.contains(name) {
                p.hop_by_hop = true;
            }
        }
        p
    }
}

/// What [`prepare_request`] sets besides what the request brings.
pub struct Outgoing<'a> {
    /// The client's address, for `X-Forwarded-For`.
    pub client: &'a ForwardedFor,
    /// The client's socket address, which `client` formats (cached per worker).
    pub remote: SocketAddr,
    /// This gateway's `Via` entry.
    pub hop: &'a Hop,
    /// The target's `Host`; kept from the client instead when
    /// `preserve_host` and the client sent one.
    pub host: Option<&'a HeaderValue>,
    /// The API's `proxy.preserve_host_header`: forward the client's `Host`.
    pub preserve_host: bool,
}

/// How many headers [`prepare_request`] may insert (`X-Forwarded-For`,
/// `User-Agent`, `Via`, `Host`).
pub const PROXY_HEADERS: usize = 4;

/// The header edits every proxied request gets, with or without middleware:
/// hop-by-hop headers out (but `TE: trailers`), the client's address in
/// `X-Forwarded-For`, Tyk's `User-Agent` when there is none, this gateway in
/// `Via`, and the target's `Host`.
///
/// The common request (none of those headers but `Host` and `User-Agent`)
/// costs one pass over the names and an insert per header set, with no
/// allocation but the map's growth: every value set is a shared copy.
pub fn prepare_request(headers: &mut HeaderMap, out: &Outgoing<'_>) {
    prepare_deferred(headers, out).apply(headers);
}

/// [`prepare_request`] with the common edits left to the request's
/// encoder ([`Added`]): for an in-task exchange they are written straight
/// into the head, with no insert (each a hash and, for a map sized to the
/// client's headers, a growth). The rare edits (a hop-by-hop header to
/// remove, an `X-Forwarded-For` or `Via` to extend) are made in the map.
pub fn prepare_deferred(headers: &mut HeaderMap, out: &Outgoing<'_>) -> Added {
    let mut has = Present::of(headers);
    if has.hop_by_hop {
        remove_hop_by_hop_request(headers);
        // `Connection` may have named any header, these included.
        has = Present::of(headers);
    }
    let mut added = Added {
        content_length: has.content_length,
        ..Added::default()
    };
    match has.forwarded_for {
        true => append_forwarded_for(headers, out.remote),
        false => added.forwarded_for = Some(out.client.value(out.remote.ip())),
    }
    added.user_agent = !has.user_agent;
    match has.via {
        true => out.hop.append(headers),
        false => added.via = Some(out.hop.value.clone()),
    }
    if !(out.preserve_host && has.host) {
        if let Some(v) = out.host {
            added.host = Some(v.clone());
            added.host_replaces = has.host;
        }
    }
    added
}

/// Proxy headers a request still has to get, as if inserted into its map
/// in this order after [`prepare_deferred`]: an insert of a name the map
/// lacks goes last; `Host` replaces the client's in its place.
#[derive(Default)]
pub struct Added {
    forwarded_for: Option<HeaderValue>,
    user_agent: bool,
    via: Option<HeaderValue>,
    host: Option<HeaderValue>,
    /// `host` takes the place of the client's `Host` (else it goes last).
    host_replaces: bool,
    /// The map has a `Content-Length` (and, hop-by-hop headers gone, no
    /// `Transfer-Encoding`): what [`crate::body::frame`] needs to know.
    content_length: bool,
}

impl Added {
    /// Makes the edits in the map (for hyper's client, and the tests).
    pub fn apply(self, headers: &mut HeaderMap) {
        headers.reserve(PROXY_HEADERS);
        if let Some(v) = self.forwarded_for {
            headers.insert(XFF, v);
        }
        if self.user_agent {
            headers.insert(header::USER_AGENT, HeaderValue::from_static(TYK_USER_AGENT));
        }
        if let Some(v) = self.via {
            headers.insert(header::VIA, v);
        }
        if let Some(v) = self.host {
            headers.insert(header::HOST, v);
        }
    }

    /// The map [`prepare_deferred`] left has a `Content-Length`.
    pub fn has_content_length(&self) -> bool {
        self.content_length
    }

    /// The value the client's `Host` line is written with instead of its
    /// own, if any.
    pub fn host_in_place(&self) -> Option<&HeaderValue> {
        self.host.as_ref().filter(|_| self.host_replaces)
    }

    /// The lines that follow the map's, in insert order: (title-case name,
    /// value).
    pub fn lines(&self) -> impl Iterator<Item = (&'static [u8], &[u8])> {
        let xff = self
            .forwarded_for
            .as_ref()
            .map(|v| (&b"X-Forwarded-For"[..], v.as_bytes()));
        let ua = self
            .user_agent
            .then_some((&b"User-Agent"[..], TYK_USER_AGENT.as_bytes()));
        let via = self.via.as_ref().map(|v| (&b"Via"[..], v.as_bytes()));
        let host = self
            .host
            .as_ref()
            .filter(|_| !self.host_replaces)
            .map(|v| (&b"Host"[..], v.as_bytes()));
        xff.into_iter().chain(ua).chain(via).chain(host)
    }
}

/// The last client address written as an `X-Forwarded-For` value, kept
/// per worker: a benchmark's (and many a deployment's) requests all come
/// from one address, which is then formatted and allocated once, not per
/// request.
#[derive(Default)]
pub struct ForwardedFor(std::cell::RefCell<Option<(std::net::IpAddr, HeaderValue)>>);

impl ForwardedFor {
    /// `ip` as a header value.
    pub fn value(&self, ip: std::net::IpAddr) -> HeaderValue {
        if let Some((last, v)) = &*self.0.borrow() {
            if *last == ip {
                return v.clone();
            }
        }
        let v = match ip {
            std::net::IpAddr::V4(v4) => {
                let mut buf = [0u8; 15];
                let n = write_ipv4(&mut buf, v4);
                HeaderValue::from_bytes(&buf[..n])
            }
            std::net::IpAddr::V6(v6) => HeaderValue::from_str(&v6.to_string()),
        }
        .expect("an IP address is a valid header value");
        *self.0.borrow_mut() = Some((ip, v.clone()));
        v
    }
}

/// Writes `ip` in dotted decimal (what `Display` writes, without the
/// formatting machinery); returns the length.
fn write_ipv4(buf: &mut [u8; 15], ip: std::net::Ipv4Addr) -> usize {
    let mut n = 0;
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            buf[n] = b'.';
            n += 1;
        }
        if octet >= 100 {
            buf[n] = b'0' + octet / 100;
            n += 1;
        }
        if octet >= 10 {
            buf[n] = b'0' + octet / 10 % 10;
            n += 1;
        }
        buf[n] = b'0' + octet % 10;
        n += 1;
    }
    n
}

/// Appends the client's address to `X-Forwarded-For`, folding several such
/// headers into one comma-separated list, as Tyk's `requestIPHops` does.
pub fn append_forwarded_for(headers: &mut HeaderMap, client: SocketAddr) {
    use std::fmt::Write as _;
    let mut joined = String::with_capacity(48);
    for prior in headers.get_all(&XFF) {
        if let Ok(p) = prior.to_str() {
            joined.push_str(p);
            joined.push_str(", ");
        }
    }
    let _ = write!(joined, "{}", client.ip());
    if let Ok(v) = HeaderValue::from_str(&joined) {
        headers.insert(XFF, v);
    }
}

/// Sets Tyk's `User-Agent` when the client sent none.
pub fn default_user_agent(headers: &mut HeaderMap) {
    if !headers.contains_key(header::USER_AGENT) {
        headers.insert(header::USER_AGENT, HeaderValue::from_static(TYK_USER_AGENT));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_and_connection_tokens_are_removed() {
        let mut h = HeaderMap::new();
        h.insert("connection", "keep-alive, X-Secret".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert("x-secret", "1".parse().unwrap());
        h.insert("upgrade", "websocket".parse().unwrap());
        h.insert("transfer-encoding", "chunked".parse().unwrap());
        h.insert("x-kept", "yes".parse().unwrap());
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!(h["x-kept"], "yes");
    }

    #[test]
    fn headers_named_on_any_connection_line_are_removed() {
        let mut h = HeaderMap::new();
        h.append("connection", "Close".parse().unwrap());
        h.append("connection", " X-One ,keep-alive".parse().unwrap());
        h.insert("x-one", "1".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert("x-two", "2".parse().unwrap());
        h.insert("te", "trailers".parse().unwrap());
        remove_hop_by_hop_request(&mut h);
        let mut left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        left.sort();
        assert_eq!(left, ["te", "x-two"]);
    }

    #[test]
    fn forwarded_for_is_appended() {
        let mut h = HeaderMap::new();
        let addr: SocketAddr = "10.1.2.3:5555".parse().unwrap();
        append_forwarded_for(&mut h, addr);
        assert_eq!(h["x-forwarded-for"], "10.1.2.3");
        append_forwarded_for(&mut h, "127.0.0.1:1".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "10.1.2.3, 127.0.0.1");
    }

    #[test]
    fn client_addresses_are_written_as_display_writes_them() {
        let cache = ForwardedFor::default();
        for ip in [
            "127.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "10.20.100.9",
            "192.168.1.10",
            "::1",
            "2001:db8::7",
            "127.0.0.1",
        ] {
            let ip: std::net::IpAddr = ip.parse().unwrap();
            assert_eq!(cache.value(ip), ip.to_string().as_str());
        }
    }

    #[test]
    fn a_request_gets_every_proxy_header_in_one_pass() {
        let hop = Hop::random();
        let client = ForwardedFor::default();
        let host = HeaderValue::from_static("up:80");
        let out = Outgoing {
            client: &client,
            remote: "10.0.0.9:1".parse().unwrap(),
            hop: &hop,
            host: Some(&host),
            preserve_host: false,
        };
        let mut h = HeaderMap::new();
        h.insert("host", "gw".parse().unwrap());
        h.insert("connection", "close, user-agent".parse().unwrap());
        h.insert("user-agent", "curl".parse().unwrap());
        h.insert("te", "trailers".parse().unwrap());
        prepare_request(&mut h, &out);
        assert_eq!(h["host"], "up:80");
        assert_eq!(h["x-forwarded-for"], "10.0.0.9");
        // Named by Connection, so hop-by-hop: replaced by Tyk's default.
        assert_eq!(h["user-agent"], TYK_USER_AGENT);
        assert_eq!(h["te"], "trailers");
        assert!(h["via"].to_str().unwrap().starts_with("1.1 gw-"));
        assert!(!h.contains_key("connection"));
        assert!(hop.seen_in(&h));
        assert_eq!(h.len(), 5, "{h:?}");
    }

    #[test]
    fn localhost_prefers_ipv4() {
        let r = Resolver::default();
        r.prepare("localhost").unwrap();
        let t = r.table.read().unwrap();
        assert!(t["localhost"][0].is_ipv4());
    }
}
