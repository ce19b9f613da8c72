//! One request through the gateway:
//!
//! ```text
//! route (longest listen_path) -> pre chain -> post chain -> strip listen path
//!       -> upstream (pooled keep-alive HTTP/1.1) -> response to the client
//! ```
//!
//! As in Tyk, the listen path is stripped by the proxying step itself (Tyk's
//! reverse-proxy director), so both chains see the path the client sent.
//!
//! Routes without middleware take the streaming path: the request body and
//! the upstream's response body flow through without being buffered. Routes
//! with request middleware or virtual endpoints buffer the request body
//! first (a middleware may read or replace it), up to [`MAX_BUFFERED_BODY`];
//! routes with response middleware only stream it. A chain of plugins
//! that never wait (native, wasm) on a request without a body runs in
//! place, inside the synchronous routing step ([`ApiChain::runs_in_place`]),
//! and the request then goes upstream as a route without middleware does.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue, MaxSizeReached};
use http::HeaderMap;
use http::{Request, Response, Uri};
use http_body_util::{Either, Full};

use crate::body::{
    collect_held, Buffered, ClientBodyError, ClientIn, HeldError, RequestBody, Share,
};
use crate::config::{ApiSpec, Hook};
use crate::error::{ErrorFormat, Kind, Origin, ProxyError};
use crate::middleware::{
    ApiChain, ClientHeaders, Flow, LentRequest, MwError, MwErrorKind, MwRequest, MwResponse, ReqMut,
};
use crate::pool::{Pool, ResponseBody, UpstreamBody, UpstreamId};
use crate::router::{self, Router};
use crate::stats::ErrorCounter;
use crate::upstream;

/// Largest request body buffered for middleware (32 MiB); larger gets 413.
pub const MAX_BUFFERED_BODY: usize = 32 << 20;

/// A response on its way to the client: the upstream's, streamed, or one the
/// gateway or a middleware wrote.
pub type ClientBody = Either<ResponseBody, Full<Bytes>>;

/// What [`Proxy::handle`] awaits for a routed request.
// The large variant is the common one, used at once: boxing it would cost
// an allocation per request to save a few hundred bytes of stack.
#[allow(clippy::large_enum_variant)]
enum Plan<'a> {
    /// No body to stream, and no middleware or middleware run in place:
    /// the upstream request's bytes, ready to write.
    Encoded(&'a Route, upstream::Encoded),
    /// An API without middleware, the client's body streaming: the
    /// upstream request, ready to send.
    Stream(&'a Route, Request<UpstreamBody>, upstream::Added),
    /// An API with request middleware: run here, unboxed.
    Chain(
        &'a Route,
        &'a ApiChain,
        http::request::Parts,
        RequestBody,
        SocketAddr,
    ),
    /// Answered already: by a middleware run in place, which wrote its
    /// own response.
    Answer(Response<ClientBody>),
    /// An API with response middleware only: its whole run, boxed.
    Boxed(Pin<Box<dyn Future<Output = Result<Response<ClientBody>, ProxyError>> + 'a>>),
}

/// One API as a worker serves it.
pub struct Route {
    /// The definition.
    pub spec: Arc<ApiSpec>,
    /// This worker's middleware; `None` without middleware. `Err` when the
    /// chain could not be built on this worker: every request then fails
    /// with 500 rather than silently skipping the middleware.
    pub chain: Option<Result<ApiChain, String>>,
    /// The pool slot of the API's target.
    pub upstream: UpstreamId,
    /// The target's `Host` header value (`None` if it is not a valid one).
    pub host: Option<HeaderValue>,
    /// The target is this gateway itself: proxying would loop until fds
    /// run out, so every request gets 508 instead.
    pub loops_to_self: bool,
    /// This worker's count of the API's middleware failures that happen
    /// outside the chain's runners (a chain that is not loaded); the
    /// chain counts its own.
    pub errors: ErrorCounter,
}

/// Everything a worker thread needs to proxy a request.
pub struct Proxy {
    /// Routes by listen path.
    pub router: Router<Route>,
    /// This worker's upstream pool.
    pub pool: Rc<Pool>,
    /// How long to wait for the upstream's response head.
    pub upstream_timeout: Duration,
    /// Longest wait between two reads of a client's request body.
    pub body_timeout: Duration,
    /// The gateway's bound on request bodies held whole at once.
    pub buffered: Arc<Buffered>,
    /// This gateway's `Via` entry: a request that carries it has looped.
    pub hop: upstream::Hop,
    /// The last client address as an `X-Forwarded-For` value.
    pub forwarded_for: upstream::ForwardedFor,
    /// Bounds the lines this worker's failed requests log.
    pub log_gate: crate::lograte::LogGate,
}

impl Proxy {
    /// Proxies one request, mapping every failure to Tyk's answer.
    ///
    /// The routing and the head checks run before anything is awaited
    /// ([`Proxy::plan`]); the streaming path is then awaited right here,
    /// and the middleware paths through a box. A future is moved (copied
    /// whole) at each level that awaits it, and the service future is
    /// copied again into hyper's per-connection slot: keeping the common
    /// path's future small and shallow is what keeps those copies cheap.
    ///
    /// The request is lent to [`Proxy::plan`], not moved into it: on the
    /// common path it is read in place into the upstream's bytes, and its
    /// head (~250 bytes) is not copied from one call to the next.
    pub async fn handle(
        &self,
        mut req: Request<ClientIn>,
        remote: SocketAddr,
    ) -> Response<ClientBody> {
        let format = ErrorFormat::of(req.headers());
        // Headers the request's middleware added to the client's answer
        // (`ClientHeaders`), left here by the chain; merged into the
        // upstream's answer where it arrives, and below into any other.
        let mut client: ClientHeaders = None;
        // Whether `result` is the upstream's answer to a chain run in
        // place (whose headers are merged as Tyk merges the upstream's).
        let mut upstream = false;
        let result = match self.plan(&mut req, remote, &mut client) {
            Ok(Plan::Encoded(route, up)) => {
                // `req` is dropped where it lies when this returns: dropped
                // here it would be moved (copied) into `drop` first.
                let limit = self.upstream_timeout;
                upstream = true;
                upstream::send_encoded(&self.pool, route.upstream, up, limit).await
            }
            Ok(Plan::Stream(route, up, added)) => self.forward(route, up, added).await,
            Ok(Plan::Chain(route, chain, parts, body, remote)) => {
                self.through_chain(route, chain, parts, body, remote, &mut client)
                    .await
            }
            Ok(Plan::Answer(resp)) => Ok(resp),
            Ok(Plan::Boxed(work)) => work.await,
            Err(e) => Err(e),
        };
        let mut resp = match result {
            Ok(resp) => resp,
            Err(e) => {
                upstream = false;
                e.log(&self.log_gate);
                e.response(format).map(|b| Either::Right(Full::new(b)))
            }
        };
        // Edited in place: the common answer is not moved again.
        if let Some(added) = client {
            match upstream {
                true => on_upstream_answer(&mut resp, *added, format, &self.log_gate),
                false => on_written_answer(&mut resp, *added, format, &self.log_gate),
            }
        }
        resp
    }

    /// Routes the request and decides how it goes on: the upstream request
    /// of an API without middleware, ready to send, or the boxed work of
    /// an API with middleware (rarer, and much larger to hold).
    fn plan<'a>(
        &'a self,
        req: &mut Request<ClientIn>,
        remote: SocketAddr,
        client: &mut ClientHeaders,
    ) -> Result<Plan<'a>, ProxyError> {
        let route = self
            .router
            .find(req.uri().path())
            .ok_or_else(|| ProxyError::new(Kind::NoRoute, Origin::Client))?;
        if route.loops_to_self {
            return Err(ProxyError::with_cause(
                Kind::LoopDetected,
                Origin::Internal,
                format!(
                    "api {}: proxy.target_url {} is this gateway itself",
                    route.spec.api_id, route.spec.target.authority
                ),
            ));
        }
        if self.hop.seen_in(req.headers()) {
            return Err(ProxyError::with_cause(
                Kind::LoopDetected,
                Origin::Internal,
                format!(
                    "api {}: the request has been through this gateway before (its Via has {}): a loop through proxy.target_url {}",
                    route.spec.api_id,
                    self.hop.name(),
                    route.spec.target.authority
                ),
            ));
        }
        let ended = http_body::Body::is_end_stream(req.body());
        match &route.chain {
            // The common path: no middleware and no body.
            None if ended => Ok(Plan::Encoded(route, self.encode(route, req, remote))),
            // Streaming path: no middleware, nothing buffered.
            None => {
                let (parts, body) = self.take(req);
                let (up, added) = self.stream(route, parts, body, remote)?;
                Ok(Plan::Stream(route, up, added))
            }
            // Response middleware only: the request body streams too.
            Some(Ok(chain)) if crate::response::only_response(chain) => {
                let (parts, body) = self.take(req);
                let head = crate::response::head_of_parts(&parts, remote);
                let (up, added) = self.stream(route, parts, body, remote)?;
                Ok(Plan::Boxed(Box::pin(async move {
                    let resp = self.forward(route, up, added).await?;
                    crate::response::upstream_answer(chain, &head, resp, &self.buffered).await
                })))
            }
            // Native or wasm middleware and no body to read: the chain
            // runs here and the request goes on like one without.
            Some(Ok(chain)) if chain.runs_in_place() && ended => {
                self.in_place(route, chain, req, remote, client)
            }
            Some(Ok(chain)) => {
                let (parts, body) = self.take(req);
                Ok(Plan::Chain(route, chain, parts, body, remote))
            }
            // Logged once at load (or when the worker built it), not per
            // request; counted per request.
            Some(Err(e)) => {
                route.errors.count(MwErrorKind::NotLoaded);
                let e = MwError::not_loaded(format!("middleware not loaded: {e}"))
                    .context(format_args!("api {}", route.spec.api_id));
                Err(ProxyError::reported(
                    Kind::MiddlewareFailed,
                    Origin::Middleware,
                    e,
                ))
            }
        }
    }

    /// An API without middleware, a request without a body: its head,
    /// edited in place for the upstream, written as the upstream's bytes.
    fn encode(
        &self,
        route: &Route,
        req: &mut Request<ClientIn>,
        remote: SocketAddr,
    ) -> upstream::Encoded {
        let added = self.prepare_headers(route, req.headers_mut(), remote);
        let uri = req.uri();
        let target = |d: &mut Vec<u8>| write_target(d, &route.spec, uri.path(), uri.query());
        upstream::Encoded::from_head(req.method(), target, req.headers(), &added, Bytes::new())
    }

    /// An API without middleware: the head is rewritten for the upstream,
    /// the body will stream.
    fn stream(
        &self,
        route: &Route,
        mut parts: http::request::Parts,
        body: RequestBody,
        remote: SocketAddr,
    ) -> Result<(Request<UpstreamBody>, upstream::Added), ProxyError> {
        // The client's path was valid and the target was checked at load:
        // a join that is not a URI is the gateway's own bug.
        let uri = upstream_uri(&route.spec, parts.uri.path(), parts.uri.query()).map_err(|e| {
            ProxyError::with_cause(
                Kind::UpstreamFailed,
                Origin::Internal,
                format!(
                    "api {}: the upstream URL is not valid: {e}",
                    route.spec.api_id
                ),
            )
        })?;
        let added = self.prepare_headers(route, &mut parts.headers, remote);
        // hyper's client sends no body at all for a GET or HEAD whose body
        // has no length ("almost never have bodies"): a client's chunked
        // body was dropped without a word. Go's client (so Tyk) sends it
        // chunked; so does hyper when asked to.
        if matches!(parts.method, http::Method::GET | http::Method::HEAD)
            && http_body::Body::size_hint(&body).exact().is_none()
        {
            parts.headers.insert(
                http::header::TRANSFER_ENCODING,
                http::HeaderValue::from_static("chunked"),
            );
        }
        parts.uri = uri;
        parts.version = http::Version::HTTP_11;
        Ok((Request::from_parts(parts, Either::Left(body)), added))
    }

    /// An API with middleware: buffer the body, run pre and post on the path
    /// the client sent, then strip the listen path and proxy.
    async fn through_chain(
        &self,
        route: &Route,
        chain: &ApiChain,
        mut parts: http::request::Parts,
        body: RequestBody,
        remote: SocketAddr,
        client: &mut ClientHeaders,
    ) -> Result<Response<ClientBody>, ProxyError> {
        // Held until the exchange ends: the body (or what middleware made
        // of it) lives that long.
        let (body, _share) = read_body(body, &self.buffered).await?;
        let mut mw = chain_request(&mut parts, body, remote);
        // A hook's future is built only if the chain has the hook. After
        // each, the headers it added to the client's answer go to
        // `client`, whatever answer the request ends with.
        if chain.has(Hook::Pre) {
            let end = run_hook(chain, Hook::Pre, &mut mw).await;
            collect_client_headers(&mut mw, client)?;
            if let Some(resp) = end? {
                return Ok(resp);
            }
        }
        // Cold paths are boxed (here and below): their futures would
        // otherwise be part of every middleware request's future, and a
        // future is copied whole each time it moves.
        if chain.has(Hook::Virtual) {
            let answer = Box::pin(crate::response::virtual_endpoint(route, chain, &mw)).await?;
            if let Some(resp) = answer {
                return Ok(resp);
            }
        }
        if chain.has(Hook::Post) {
            let end = run_hook(chain, Hook::Post, &mut mw).await;
            collect_client_headers(&mut mw, client)?;
            if let Some(resp) = end? {
                return Ok(resp);
            }
        }
        clean_rewritten_path(&mut mw);
        // Response middleware sees the request as it went upstream, no body.
        let head = chain
            .has(Hook::Response)
            .then(|| crate::response::head_of(&mw));
        let up = self.chain_encoded(route, chain, &mut mw, remote)?;
        // The format of a 500 for too many client headers: by the request
        // as it goes upstream.
        let format = match client {
            Some(_) => ErrorFormat::of(&mw.headers),
            None => ErrorFormat::default(),
        };
        drop((mw, parts));
        let limit = self.upstream_timeout;
        let resp = upstream::send_encoded(&self.pool, route.upstream, up, limit).await?;
        // As in Tyk, response middleware sees the upstream's answer alone;
        // the client headers are merged into what it leaves.
        let mut answer = match head {
            Some(head) => {
                Box::pin(crate::response::upstream_answer(
                    chain,
                    &head,
                    resp,
                    &self.buffered,
                ))
                .await
            }
            None => Ok(resp),
        };
        if let (Ok(resp), Some(added)) = (&mut answer, client.take()) {
            on_upstream_answer(resp, *added, format, &self.log_gate);
        }
        answer
    }

    /// The request taken whole from the lender, for the paths that keep
    /// it so.
    fn take(&self, req: &mut Request<ClientIn>) -> (http::request::Parts, RequestBody) {
        let (parts, body) = std::mem::take(req).into_parts();
        (parts, RequestBody::new(body, self.body_timeout))
    }

    /// An API whose chain [`ApiChain::runs_in_place`], for a request with
    /// no body to read: `pre` and `post` run right here, and the request
    /// goes on encoded as a route without middleware's does,
    /// [`Plan::Encoded`] (or a middleware's answer as
    /// [`Plan::Answer`]), with no future of the chain's own.
    fn in_place<'a>(
        &'a self,
        route: &'a Route,
        chain: &'a ApiChain,
        req: &mut Request<ClientIn>,
        remote: SocketAddr,
        client: &mut ClientHeaders,
    ) -> Result<Plan<'a>, ProxyError> {
        reserve_chain_room(req.headers_mut());
        let mut lent = LentRequest::new(req, remote);
        // A first entry that may have to be awaited (QuickJS inline) runs
        // first: should it defer, nothing has run or changed, and the
        // request goes the awaited way.
        let mut ran = None;
        if chain.first_defers() {
            match chain.run_first_now(ReqMut::Lent(&mut lent)) {
                (_, None) => {
                    drop(lent);
                    let (parts, body) = self.take(req);
                    return Ok(Plan::Chain(route, chain, parts, body, remote));
                }
                (hook, Some(Ok(Flow::Continue))) => ran = Some(hook),
                (_, Some(end)) => {
                    *client = lent.take_client_headers();
                    return ended_in_place(end);
                }
            }
        }
        for hook in [Hook::Pre, Hook::Post] {
            // A phase without entries is skipped, not run empty; a phase
            // that goes on builds no answer (a large `Result` to move).
            if chain.has(hook) {
                let skip = usize::from(ran == Some(hook));
                match chain.run_now_after(hook, skip, ReqMut::Lent(&mut lent)) {
                    Ok(Flow::Continue) => {}
                    end => {
                        *client = lent.take_client_headers();
                        return ended_in_place(end);
                    }
                }
            }
        }
        // Whatever answer the request now gets, the caller adds these to.
        *client = lent.take_client_headers();
        // A path or query a middleware wrote is cleaned and checked as a
        // URI; the client's, parsed already, is written as it is.
        let written = match lent.is_rewritten() {
            true => Some(lent_uri(route, chain, &mut lent)?),
            false => None,
        };
        let body = lent.into_body();
        // The chain is done with the request: edited where the server put
        // it, it is encoded from there.
        let carries = crate::body::carries_body(req.method());
        let added =
            self.prepare_chain_headers(route, req.headers_mut(), carries, body.len(), remote);
        let uri = req.uri();
        let target = |d: &mut Vec<u8>| {
            chain_target(d, &route.spec, written.as_ref(), uri.path(), uri.query())
        };
        let up = upstream::Encoded::from_head(req.method(), target, req.headers(), &added, body);
        Ok(Plan::Encoded(route, up))
    }

    /// The upstream's request, encoded, from what the chain left of the
    /// client's (its path cleaned, [`clean_rewritten_path`]): the listen
    /// path stripped, the proxy's headers, framing for the (maybe
    /// replaced) body, which it takes. As [`Proxy::in_place`] encodes a
    /// chain's request, so the path a middleware did not rewrite (the
    /// client's, parsed already) is written as it is. Building a `Request`
    /// (its target parsed again as a `Uri`) for `upstream::send` to take
    /// apart into these same bytes cost ~1,000 instructions a request.
    #[inline(always)]
    fn chain_encoded(
        &self,
        route: &Route,
        chain: &ApiChain,
        mw: &mut MwRequest,
        remote: SocketAddr,
    ) -> Result<upstream::Encoded, ProxyError> {
        let written = match mw.is_rewritten() {
            true => Some(chain_uri(route, chain, mw)?),
            false => None,
        };
        let body = std::mem::take(&mut mw.body);
        let carries = crate::body::carries_body(&mw.method);
        let added = self.prepare_chain_headers(route, &mut mw.headers, carries, body.len(), remote);
        let target =
            |d: &mut Vec<u8>| chain_target(d, &route.spec, written.as_ref(), mw.path(), mw.query());
        Ok(upstream::Encoded::from_head(
            &mw.method,
            target,
            &mw.headers,
            &added,
            body,
        ))
    }

    /// Sends `req` upstream within the upstream timeout.
    ///
    /// The send future is made where it is awaited: a future made first
    /// and awaited later (captured by an `async` block) takes its room
    /// twice in the future that holds it.
    async fn forward(
        &self,
        route: &Route,
        req: Request<UpstreamBody>,
        added: upstream::Added,
    ) -> Result<Response<ClientBody>, ProxyError> {
        let limit = self.upstream_timeout;
        upstream::send(&self.pool, route.upstream, req, added, limit).await
    }

    /// [`Proxy::prepare_headers`] for the request a chain leaves, and
    /// framing for its body of `len` bytes (maybe replaced by a middleware;
    /// `carries_body`: [`crate::body::carries_body`] of its method).
    #[inline(always)]
    fn prepare_chain_headers(
        &self,
        route: &Route,
        headers: &mut http::HeaderMap,
        carries_body: bool,
        len: usize,
        remote: SocketAddr,
    ) -> upstream::Added {
        let added = self.prepare_headers(route, headers, remote);
        crate::body::frame_as(headers, carries_body, len, added.has_content_length());
        added
    }

    /// Header edits every proxied request gets, with or without middleware;
    /// the common ones are left for the request's encoder ([`upstream::Added`]).
    fn prepare_headers(
        &self,
        route: &Route,
        headers: &mut http::HeaderMap,
        remote: SocketAddr,
    ) -> upstream::Added {
        let out = upstream::Outgoing {
            client: &self.forwarded_for,
            remote,
            hop: &self.hop,
            // A shared copy: made once per worker, not parsed per request.
            host: route.host.as_ref(),
            preserve_host: route.spec.preserve_host_header,
        };
        upstream::prepare_deferred(headers, &out)
    }
}

/// The middleware's view of the client's request, with its whole `body`.
#[inline(always)]
fn chain_request(parts: &mut http::request::Parts, body: Bytes, remote: SocketAddr) -> MwRequest {
    // Taken, not cloned: the chain edits the client's method, target and
    // headers, and [`Proxy::chain_encoded`] encodes the upstream's request
    // from what it leaves, so the head is neither copied nor moved whole.
    lent(
        std::mem::take(&mut parts.method),
        std::mem::take(&mut parts.uri),
        std::mem::take(&mut parts.headers),
        body,
        remote,
    )
}

/// The middleware request of a lent head.
#[inline(always)]
fn lent(
    method: http::Method,
    uri: Uri,
    mut headers: http::HeaderMap,
    body: Bytes,
    remote: SocketAddr,
) -> MwRequest {
    reserve_chain_room(&mut headers);
    MwRequest::new(method, uri, headers, body, remote)
}

/// Room for the headers a middleware sets, outside its timed call: our
/// own parser made it already (a check, then); hyper's map, of a
/// connection handed to it, is sized to the client's headers.
#[inline(always)]
fn reserve_chain_room(headers: &mut http::HeaderMap) {
    let room = headers.capacity().saturating_sub(headers.keys_len());
    if room < crate::middleware::CHAIN_HEADER_ROOM {
        headers.reserve(crate::middleware::CHAIN_HEADER_ROOM);
    }
}

/// The upstream target of a request a chain has run on: the listen path
/// stripped from the path and query as the chain left them.
fn chain_uri(route: &Route, chain: &ApiChain, mw: &MwRequest) -> Result<Uri, ProxyError> {
    target_uri(route, chain, mw.path(), mw.query())
}

/// [`chain_uri`] for a request a chain run in place rewrote, its path
/// cleaned first ([`clean_rewritten_path`]). Out of line: most chains
/// rewrite nothing.
#[cold]
#[inline(never)]
fn lent_uri(
    route: &Route,
    chain: &ApiChain,
    lent: &mut LentRequest<'_>,
) -> Result<Uri, ProxyError> {
    clean_written_path(ReqMut::Lent(lent));
    target_uri(route, chain, lent.path(), lent.query())
}

/// The upstream target for a `path` and `query` middleware wrote.
fn target_uri(
    route: &Route,
    chain: &ApiChain,
    path: &str,
    query: Option<&str>,
) -> Result<Uri, ProxyError> {
    upstream_uri(&route.spec, path, query).map_err(|e| {
        // Middleware wrote this path or query.
        chain.count(MwErrorKind::BadAnswer);
        let e = MwError::bad_answer("the rewritten URL is not valid").with_source(e);
        ProxyError::with_cause(Kind::MiddlewareFailed, Origin::Middleware, e)
    })
}

/// A middleware may have written a path with dot segments: they never
/// reach the upstream (they could climb out of the target's base). The
/// client's own path was cleaned at the front door (a redirect).
/// The common case, nothing rewritten, is one test in the caller.
#[inline(always)]
fn clean_rewritten_path(mw: &mut MwRequest) {
    if mw.is_rewritten() {
        clean_written_path(ReqMut::Owned(mw));
    }
}

fn clean_written_path(mut req: ReqMut<'_, '_>) {
    if req.path() != req.request_uri().path() {
        if let Some(clean) = crate::path::clean_rewritten(req.path()) {
            req.set_path(clean);
        }
    }
}

/// Runs one hook the chain has; `Some(response)` when a middleware
/// answered the request.
async fn run_hook(
    chain: &ApiChain,
    hook: Hook,
    req: &mut MwRequest,
) -> Result<Option<Response<ClientBody>>, ProxyError> {
    match chain.run(hook, req).await {
        // Tyk's forceResponse from a post hook runs the response chain.
        Ok(Flow::Forced(r)) if hook == Hook::Post && chain.has(Hook::Response) => {
            let head = crate::response::head_of(req);
            Box::pin(crate::response::forced_answer(chain, &head, *r))
                .await
                .map(Some)
        }
        end => phase_answer(end),
    }
}

/// How a chain run in place ended when it did not go on: a middleware's
/// answer (with no response chain here, Tyk's forceResponse is a plain
/// answer too) or Tyk's 500.
#[cold]
fn ended_in_place<'a>(end: Result<Flow, MwError>) -> Result<Plan<'a>, ProxyError> {
    match phase_answer(end)? {
        Some(resp) => Ok(Plan::Answer(resp)),
        None => Err(ProxyError::with_cause(
            Kind::MiddlewareFailed,
            Origin::Internal,
            "a chain run in place ended without an answer",
        )),
    }
}

/// How a request phase ended, as the client's answer: `None` when the
/// request goes on, a middleware's answer, or Tyk's 500 for a failure.
fn phase_answer(end: Result<Flow, MwError>) -> Result<Option<Response<ClientBody>>, ProxyError> {
    match end {
        Ok(Flow::Continue) => Ok(None),
        Ok(Flow::Respond(r) | Flow::Forced(r)) => Ok(Some(middleware_response(*r))),
        Err(e) => Err(ProxyError::reported(
            Kind::MiddlewareFailed,
            Origin::Middleware,
            e,
        )),
    }
}

fn middleware_response(r: MwResponse) -> Response<ClientBody> {
    let mut resp = Response::new(Either::Right(Full::new(r.body)));
    *resp.status_mut() = r.status;
    *resp.headers_mut() = r.headers;
    upstream::remove_hop_by_hop(resp.headers_mut());
    // hyper sets Content-Length from the body; a stale one from the
    // middleware would corrupt the framing.
    resp.headers_mut().remove(header::CONTENT_LENGTH);
    resp
}

/// Reads the client's body whole (for middleware), up to
/// [`MAX_BUFFERED_BODY`] (413 beyond) and within the gateway's bound on
/// bodies held at once (503 beyond, `body::Buffered`), which the returned
/// share holds it to until dropped.
async fn read_body(
    body: RequestBody,
    buffered: &Arc<Buffered>,
) -> Result<(Bytes, Option<Share>), ProxyError> {
    collect_held(body, MAX_BUFFERED_BODY, buffered)
        .await
        .map_err(|e| match e {
            HeldError::Read(e) => {
                let kind = match e {
                    ClientBodyError::Timeout(_) => Kind::RequestTimeout,
                    ClientBodyError::Read(_) => Kind::BadRequest,
                };
                ProxyError::with_cause(kind, Origin::Client, e)
            }
            HeldError::TooLarge => ProxyError::new(Kind::BodyTooLarge, Origin::Client),
            HeldError::Overloaded => overloaded(buffered, "request"),
        })
}

/// The 503 for a `which` ("request" or "response") body that would pass
/// `--max-buffered-bodies`.
#[cold]
pub(crate) fn overloaded(buffered: &Buffered, which: &str) -> ProxyError {
    ProxyError::with_cause(
        Kind::Overloaded,
        Origin::Internal,
        format!(
            "a {which} body held for middleware would pass --max-buffered-bodies ({} MiB held by all requests)",
            buffered.held() >> 20
        ),
    )
}

/// The origin-form request target sent upstream for the request's `path`
/// and `query` on the API of `spec`.
fn target_of<'a>(spec: &'a ApiSpec, path: &'a str, query: Option<&'a str>) -> router::Target<'a> {
    router::Target::new(
        &spec.listen_path,
        spec.strip_listen_path,
        &spec.target.base_path,
        path,
        spec.target.query.as_deref(),
        query,
    )
}

/// [`target_of`] as a `Uri`. The caller says whose fault an invalid one
/// is: middleware's after a rewrite, the gateway's on the streaming path.
fn upstream_uri(
    spec: &ApiSpec,
    path: &str,
    query: Option<&str>,
) -> Result<Uri, http::uri::InvalidUri> {
    Uri::try_from(target_of(spec, path, query).string())
}

/// The upstream's request target of a request a chain ran on: the URI a
/// middleware wrote ([`target_uri`]: cleaned, checked, the listen path
/// stripped), else the client's `path` and `query`, the listen path
/// stripped as they are written.
#[inline(always)]
fn chain_target(
    dst: &mut Vec<u8>,
    spec: &ApiSpec,
    written: Option<&Uri>,
    path: &str,
    query: Option<&str>,
) {
    match written {
        Some(uri) => {
            let target = uri.path_and_query().map_or("/", |pq| pq.as_str());
            dst.extend_from_slice(target.as_bytes());
        }
        None => write_target(dst, spec, path, query),
    }
}

/// [`target_of`] written at the end of an upstream request's head. For a
/// client's path and query, which parsed, and a target URL checked at
/// load, it is a valid request target by how it is joined (no byte is
/// added but `/`, `?` and `&`).
fn write_target(dst: &mut Vec<u8>, spec: &ApiSpec, path: &str, query: Option<&str>) {
    let start = dst.len();
    target_of(spec, path, query).write_into(dst);
    debug_assert!(
        std::str::from_utf8(&dst[start..]).is_ok_and(|t| Uri::try_from(t).is_ok()),
        "{:?}",
        String::from_utf8_lossy(&dst[start..])
    );
}

/// Moves the headers the hook just run added to the client's answer from
/// `mw` to `client`, after any an earlier hook added. Fails only past a
/// header map's bound (32,768 lines), as the adding itself would.
#[inline(always)]
fn collect_client_headers(
    mw: &mut MwRequest,
    client: &mut ClientHeaders,
) -> Result<(), ProxyError> {
    match (mw.client_headers.take(), client.as_deref_mut()) {
        (None, _) => Ok(()),
        (Some(new), None) => {
            *client = Some(new);
            Ok(())
        }
        (Some(new), Some(old)) => {
            if old.len() + new.len() > crate::middleware::MAX_CLIENT_HEADER_LINES {
                return Err(too_many_client_headers());
            }
            append_all(old, *new).map_err(|_| too_many_client_headers())
        }
    }
}

/// Appends every line of `from` to `to`.
fn append_all(to: &mut HeaderMap, from: HeaderMap) -> Result<(), MaxSizeReached> {
    let mut last: Option<HeaderName> = None;
    for (name, value) in from {
        // `into_iter` names a header once, then yields its further values
        // with `None`.
        if let Some(n) = name {
            last = Some(n);
        }
        if let Some(n) = &last {
            to.try_append(n.clone(), value)?;
        }
    }
    Ok(())
}

#[cold]
fn too_many_client_headers() -> ProxyError {
    let e = MwError::bad_answer(
        "too many headers for the client's answer: a request's middleware adds at most 32,768 lines",
    );
    ProxyError::with_cause(Kind::MiddlewareFailed, Origin::Middleware, e)
}

/// The CORS headers Tyk's `removeDuplicateCORSHeader` (gateway/reverse_proxy.go)
/// takes from a plugin over the upstream's.
const CORS: [HeaderName; 6] = [
    header::ACCESS_CONTROL_ALLOW_ORIGIN,
    header::ACCESS_CONTROL_EXPOSE_HEADERS,
    header::ACCESS_CONTROL_MAX_AGE,
    header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
    header::ACCESS_CONTROL_ALLOW_METHODS,
    header::ACCESS_CONTROL_ALLOW_HEADERS,
];

/// The names a middleware may not add to an answer: hop-by-hop ones and
/// `Content-Length`, which the gateway sets from the body it sends (a
/// middleware's would break the framing: Go's server, in Tyk, sends the
/// plugin's `Content-Length` beside the upstream's and cuts the body at
/// the first). As a middleware's written answer is cleaned
/// ([`middleware_response`]).
fn framing_safe(mut added: HeaderMap) -> HeaderMap {
    upstream::remove_hop_by_hop(&mut added);
    added.remove(header::CONTENT_LENGTH);
    added
}

/// The upstream's answer with the headers middleware added to the
/// client's, as Tyk merges them. A Tyk Go plugin's `rw` wraps the client's
/// own `ResponseWriter`, so what a handler that did not write set on
/// `rw.Header()` is still in that map when the proxy answers, and
/// `ReverseProxy.HandleResponse` (gateway/reverse_proxy.go) copies the
/// upstream's headers into it with `copyHeader`, which `Add`s each value:
/// the plugin's values come first, the upstream's follow under the same
/// name (both are sent). Its `removeDuplicateCORSHeader` drops the
/// upstream's CORS headers the plugin set ([`CORS`]). `HandleResponse`
/// strips hop-by-hop headers from the upstream's only; the plugin's reach
/// Go's server, which frames the answer itself: here they are dropped
/// ([`framing_safe`]). Response middleware ran first and saw the
/// upstream's answer alone, as Tyk's does (its chain edits `res` before
/// `HandleResponse` copies it).
#[cold]
#[inline(never)]
fn on_upstream_answer(
    resp: &mut Response<ClientBody>,
    added: HeaderMap,
    format: ErrorFormat,
    gate: &crate::lograte::LogGate,
) {
    let mut merged = framing_safe(added);
    let mut upstream = std::mem::take(resp.headers_mut());
    for name in &CORS {
        if merged.get(name).is_some_and(|v| !v.is_empty()) {
            upstream.remove(name);
        }
    }
    match append_all(&mut merged, upstream) {
        Ok(()) => *resp.headers_mut() = merged,
        Err(_) => {
            let e = too_many_client_headers();
            e.log(gate);
            *resp = e.response(format).map(|b| Either::Right(Full::new(b)));
        }
    }
}

/// An answer the gateway or a middleware wrote, with the headers middleware
/// added to the client's: the answer's own names win and the others are
/// added. In Tyk the same map is written by its error handler
/// (`ErrorHandler.HandleError`, gateway/handler_error.go, which `Set`s
/// `Content-Type` over a plugin's and `Add`s `X-Generator`), so the
/// proxy's 500 when the upstream is down carries a Go plugin's headers
/// too; a later plugin writing its own answer writes into the same map.
#[cold]
#[inline(never)]
fn on_written_answer(
    resp: &mut Response<ClientBody>,
    added: HeaderMap,
    format: ErrorFormat,
    gate: &crate::lograte::LogGate,
) {
    let mut keep = HeaderMap::new();
    let mut last: Option<HeaderName> = None;
    for (name, value) in framing_safe(added) {
        if let Some(n) = name {
            last = Some(n);
        }
        match &last {
            Some(n) if !resp.headers().contains_key(n) => keep.append(n.clone(), value),
            _ => false,
        };
    }
    // `keep` holds fewer lines than the map they came from, which the
    // adding bounded; with the answer's own they may pass the bound.
    if append_all(resp.headers_mut(), keep).is_err() {
        let e = too_many_client_headers();
        e.log(gate);
        *resp = e.response(format).map(|b| Either::Right(Full::new(b)));
    }
}
