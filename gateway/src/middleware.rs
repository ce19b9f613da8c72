//! The middleware contract: one interface, implemented by two drivers.
//!
//! A request passes these middleware phases ([`Hook`], where each phase's
//! contract is documented), in Tyk's order:
//!
//! ```text
//! pre (Middleware) -> virtual (Endpoint) -> post (Middleware) -> upstream
//!     -> response (ResponseMiddleware) -> client
//! ```
//!
//! In `pre` and `post` a middleware gets the whole request as an
//! [`MwRequest`] (method, path, query, headers, and the buffered body) and
//! may edit any of it. It returns a [`Flow`]: [`Flow::Continue`] runs the
//! next middleware and finally proxies; [`Flow::Respond`] answers the client
//! with the given status, headers and body, and nothing is proxied.
//!
//! An [`MwError`] answers 500 with Tyk's `{"error": "Internal Server
//! Error"}`; the gateway keeps serving. Its [`MwErrorKind`] (threw, timed
//! out, out of memory, bad answer, plugin fault, not loaded, internal) is
//! kept to the end: [`ApiChain`] logs it with the API and middleware's name
//! and counts it per API for `/tyk/stats`.
//!
//! Drivers (the native plugin host and the JS host) are adapters onto this
//! contract, never forks of the request path. Each driver has two halves:
//!
//! - a [`ChainFactory`], built once per API at load on the main thread. Loading
//!   is where every error a user can fix is found: a missing library or
//!   symbol, a script that does not compile. It is `Send + Sync`.
//! - a [`Chain`] of [`Middleware`], built by the factory once per worker
//!   thread. Instances are not `Send`: a JS context belongs to one thread.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};

use crate::config::{ApiSpec, JsEngine};
use crate::stats::{CallRecorder, ErrorCounter, RunRecorder, Started, Stats};

/// The request as a middleware sees and edits it.
///
/// Its path and query are read through [`MwRequest::path`] and
/// [`MwRequest::query`]: until a middleware writes one they are the
/// client's, read from `request_uri` in place (no copy is made for the
/// many requests whose middleware never rewrites the URL).
#[derive(Debug, Clone)]
pub struct MwRequest {
    /// The method as the client sent it; a middleware may change it, and
    /// the upstream request uses whatever it ends as.
    pub method: Method,
    /// Request headers. Hop-by-hop headers are removed later, at the proxy.
    pub headers: HeaderMap,
    /// The whole request body, buffered before the chain runs (empty if none).
    pub body: Bytes,
    /// The client's address (for `X-Forwarded-For`).
    pub remote_addr: SocketAddr,
    /// The request target exactly as the client sent it. Read-only context:
    /// the path and query are what middleware edits (and what `post` sees
    /// stripped); this stays the original (Tyk's `RequestURI`).
    pub request_uri: http::Uri,
    /// The path and query a middleware wrote, once one has; `None` while
    /// they are `request_uri`'s.
    rewritten: Rewritten,
    /// Headers a middleware added to the client's answer
    /// ([`ClientHeaders`]); `None` until one does.
    pub client_headers: ClientHeaders,
}

/// Headers a middleware added, in the request phase, to whatever answer
/// the client gets for the request (a native plugin's `add_client_header`,
/// ABI 1.3; the Go adapter's headers set on `rw.Header()` by a handler that
/// did not write): merged into that answer by [`crate::proxy`]'s
/// `merge_client_headers`. Boxed and `None` until used, so a request whose
/// middleware adds none carries one null pointer.
pub type ClientHeaders = Option<Box<HeaderMap>>;

/// The most lines [`ClientHeaders`] holds, over all the middleware of a
/// request: `http`'s `HeaderMap` bounds distinct names (32,768) but not the
/// values of one name, and a plugin copying unbounded input into one
/// header would grow the answer without end.
pub const MAX_CLIENT_HEADER_LINES: usize = 1 << 15;

/// The most header and query text, names and values, one middleware call
/// may hand the host: 1 MiB, Go's `http.DefaultMaxHeaderBytes` (a Go
/// upstream reads no more of a request's head). A script or module holds
/// its strings by reference: `SetHeaders` can name one 4 MiB string 30,000
/// times at the cost of 4 MiB of its heap, which copied into the request
/// was 120 GiB of the gateway's (a QuickJS script setting 3,000 took the
/// process down at its allocation limit). Past the bound the call fails
/// closed (500): each call takes from one [`HeadBudget`] (`js/headtext.rs`
/// for scripts, `wasm/request.rs` for modules, `native/host.rs` for native
/// plugins and the Go adapter).
pub const MAX_HEAD_TEXT: usize = 1 << 20;

/// What is left of one call's [`MAX_HEAD_TEXT`]: each header or query
/// name and value a middleware hands the host is taken from it before it
/// is copied. One per call (a script's answer, a wasm callback, a native
/// plugin's call); each driver words its own error.
#[derive(Debug, Clone, Copy)]
pub struct HeadBudget {
    left: usize,
}

/// The call's header and query text passed [`MAX_HEAD_TEXT`].
#[derive(Debug)]
pub struct PastHeadText;

impl HeadBudget {
    /// A full budget, for one call.
    pub const fn new() -> HeadBudget {
        HeadBudget {
            left: MAX_HEAD_TEXT,
        }
    }

    /// Takes a name's and a value's bytes; [`PastHeadText`] (nothing
    /// taken) once the call's text would pass the bound.
    #[inline]
    pub fn take(&mut self, name: usize, value: usize) -> Result<(), PastHeadText> {
        match self.left.checked_sub(name.saturating_add(value)) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => Err(PastHeadText),
        }
    }
}

impl Default for HeadBudget {
    fn default() -> Self {
        HeadBudget::new()
    }
}

impl MwRequest {
    /// The request with the client's target `request_uri`, whose path and
    /// query are the request's until a middleware writes others.
    pub fn new(
        method: Method,
        request_uri: http::Uri,
        headers: HeaderMap,
        body: Bytes,
        remote_addr: SocketAddr,
    ) -> MwRequest {
        MwRequest {
            method,
            headers,
            body,
            remote_addr,
            request_uri,
            rewritten: None,
            client_headers: None,
        }
    }

    /// Path (still percent-encoded), always starting with `/`: the client's,
    /// or as a middleware last wrote it.
    pub fn path(&self) -> &str {
        path_of(&self.rewritten, &self.request_uri)
    }

    /// Query string without the `?`; `None` when the URL has no `?`.
    pub fn query(&self) -> Option<&str> {
        query_of(&self.rewritten, &self.request_uri)
    }

    /// Writes path and query at once.
    pub fn set_target(&mut self, path: String, query: Option<String>) {
        self.rewritten = Some(Box::new((path, query)));
    }

    /// Writes the path; the query stays.
    pub fn set_path(&mut self, path: String) {
        set_path_of(&mut self.rewritten, &self.request_uri, path);
    }

    /// Writes the query (`None`: no `?`); the path stays.
    pub fn set_query(&mut self, query: Option<String>) {
        set_query_of(&mut self.rewritten, &self.request_uri, query);
    }

    /// A copy of everything but the body (which stays empty).
    pub fn without_body(&self) -> MwRequest {
        MwRequest {
            method: self.method.clone(),
            headers: self.headers.clone(),
            body: Bytes::new(),
            remote_addr: self.remote_addr,
            request_uri: self.request_uri.clone(),
            rewritten: self.rewritten.clone(),
            // The copy is a head for the response phase, which has no use
            // for them.
            client_headers: None,
        }
    }

    /// True once a middleware has written the path or query (even if it
    /// wrote them back as they were).
    pub fn is_rewritten(&self) -> bool {
        self.rewritten.is_some()
    }
}

/// The path and query a middleware wrote, once one has.
type Rewritten = Option<Box<(String, Option<String>)>>;

/// The path: as written (`rewritten`), else `uri`'s.
fn path_of<'a>(rewritten: &'a Rewritten, uri: &'a http::Uri) -> &'a str {
    match rewritten {
        Some(r) => &r.0,
        None => uri.path(),
    }
}

/// The query: as written, else `uri`'s.
fn query_of<'a>(rewritten: &'a Rewritten, uri: &'a http::Uri) -> Option<&'a str> {
    match rewritten {
        Some(r) => r.1.as_deref(),
        None => uri.query(),
    }
}

/// Writes the path, keeping the query (`uri`'s until one was written).
fn set_path_of(rewritten: &mut Rewritten, uri: &http::Uri, path: String) {
    match rewritten {
        Some(r) => r.0 = path,
        None => *rewritten = Some(Box::new((path, uri.query().map(str::to_string)))),
    }
}

/// Writes the query, keeping the path (`uri`'s until one was written).
fn set_query_of(rewritten: &mut Rewritten, uri: &http::Uri, query: Option<String>) {
    match rewritten {
        Some(r) => r.1 = query,
        None => *rewritten = Some(Box::new((uri.path().to_string(), query))),
    }
}

/// A client's request lent whole to a chain that runs in place
/// ([`ApiChain::run_now`]): its method, target and headers stay in the
/// server's request, where they were parsed, and the chain edits them
/// there; what a request has beyond its head (the body a middleware may
/// set, the path and query it may write) is kept here. Moving the head
/// into an [`MwRequest`] and back cost ~110 instructions a request on
/// the seed's plugin route, a tenth of all it adds over a plain route.
pub struct LentRequest<'h> {
    head: &'h mut http::Request<crate::body::ClientIn>,
    /// Empty unless a middleware set one: lent requests have no body.
    body: Bytes,
    remote_addr: SocketAddr,
    rewritten: Rewritten,
    /// As [`MwRequest::client_headers`].
    client_headers: ClientHeaders,
}

impl<'h> LentRequest<'h> {
    /// `head`, a request without a body, lent to a chain.
    pub fn new(head: &'h mut http::Request<crate::body::ClientIn>, remote: SocketAddr) -> Self {
        LentRequest {
            head,
            body: Bytes::new(),
            remote_addr: remote,
            rewritten: None,
            client_headers: None,
        }
    }

    /// Takes the headers middleware added to the client's answer.
    pub fn take_client_headers(&mut self) -> ClientHeaders {
        self.client_headers.take()
    }

    /// The request's method, headers and original target, as edited.
    pub fn head(&self) -> &http::Request<crate::body::ClientIn> {
        self.head
    }

    /// The body a middleware set (empty if none did).
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Gives the request back, with the body a middleware set (its head
    /// is where it was lent from).
    pub fn into_body(self) -> Bytes {
        self.body
    }

    /// The path, as [`MwRequest::path`].
    pub fn path(&self) -> &str {
        path_of(&self.rewritten, self.head.uri())
    }

    /// The query, as [`MwRequest::query`].
    pub fn query(&self) -> Option<&str> {
        query_of(&self.rewritten, self.head.uri())
    }

    /// True once a middleware has written the path or query.
    pub fn is_rewritten(&self) -> bool {
        self.rewritten.is_some()
    }
}

/// The request a driver that never waits (native, wasm) edits: one the
/// proxy owns ([`MwRequest`]), or one it lends whole ([`LentRequest`]).
/// Every read and edit a plugin makes goes through it.
pub enum ReqMut<'a, 'h> {
    /// A middleware request (a body was read, or other drivers share the chain).
    Owned(&'a mut MwRequest),
    /// The server's own request, lent for a chain run in place.
    Lent(&'a mut LentRequest<'h>),
}

impl ReqMut<'_, '_> {
    /// The method.
    pub fn method(&self) -> &Method {
        match self {
            ReqMut::Owned(r) => &r.method,
            ReqMut::Lent(r) => r.head.method(),
        }
    }

    /// The headers middleware added to the client's answer
    /// ([`ClientHeaders`]), made empty on first use.
    pub fn client_headers_mut(&mut self) -> &mut HeaderMap {
        let slot = match self {
            ReqMut::Owned(r) => &mut r.client_headers,
            ReqMut::Lent(r) => &mut r.client_headers,
        };
        slot.get_or_insert_with(Box::default)
    }

    /// The method, to change.
    pub fn method_mut(&mut self) -> &mut Method {
        match self {
            ReqMut::Owned(r) => &mut r.method,
            ReqMut::Lent(r) => r.head.method_mut(),
        }
    }

    /// The headers.
    #[inline(always)]
    pub fn headers(&self) -> &HeaderMap {
        match self {
            ReqMut::Owned(r) => &r.headers,
            ReqMut::Lent(r) => r.head.headers(),
        }
    }

    /// The headers, to edit.
    #[inline(always)]
    pub fn headers_mut(&mut self) -> &mut HeaderMap {
        match self {
            ReqMut::Owned(r) => &mut r.headers,
            ReqMut::Lent(r) => r.head.headers_mut(),
        }
    }

    /// The whole body.
    pub fn body(&self) -> &Bytes {
        match self {
            ReqMut::Owned(r) => &r.body,
            ReqMut::Lent(r) => &r.body,
        }
    }

    /// The body, to replace or swap. A driver that replaces it also sets
    /// the framing headers ([`ReqMut::set_body`] does both).
    pub fn body_mut(&mut self) -> &mut Bytes {
        match self {
            ReqMut::Owned(r) => &mut r.body,
            ReqMut::Lent(r) => &mut r.body,
        }
    }

    /// Replaces the body, with framing headers for its length
    /// ([`crate::body::reframe`]).
    pub fn set_body(&mut self, body: Bytes) {
        let method = self.method().clone();
        crate::body::reframe(self.headers_mut(), &method, body.len());
        *self.body_mut() = body;
    }

    /// The client's address.
    pub fn remote_addr(&self) -> SocketAddr {
        match self {
            ReqMut::Owned(r) => r.remote_addr,
            ReqMut::Lent(r) => r.remote_addr,
        }
    }

    /// The path, as [`MwRequest::path`].
    pub fn path(&self) -> &str {
        match self {
            ReqMut::Owned(r) => r.path(),
            ReqMut::Lent(r) => r.path(),
        }
    }

    /// The query, as [`MwRequest::query`].
    pub fn query(&self) -> Option<&str> {
        match self {
            ReqMut::Owned(r) => r.query(),
            ReqMut::Lent(r) => r.query(),
        }
    }

    /// The request target exactly as the client sent it.
    pub fn request_uri(&self) -> &http::Uri {
        match self {
            ReqMut::Owned(r) => &r.request_uri,
            ReqMut::Lent(r) => r.head.uri(),
        }
    }

    fn target_mut(&mut self) -> (&mut Rewritten, &http::Uri) {
        match self {
            ReqMut::Owned(r) => (&mut r.rewritten, &r.request_uri),
            ReqMut::Lent(r) => (&mut r.rewritten, r.head.uri()),
        }
    }

    /// Writes path and query at once, as [`MwRequest::set_target`].
    pub fn set_target(&mut self, path: String, query: Option<String>) {
        *self.target_mut().0 = Some(Box::new((path, query)));
    }

    /// Writes the path; the query stays.
    pub fn set_path(&mut self, path: String) {
        let (rewritten, uri) = self.target_mut();
        set_path_of(rewritten, uri, path);
    }

    /// Writes the query (`None`: no `?`); the path stays.
    pub fn set_query(&mut self, query: Option<String>) {
        let (rewritten, uri) = self.target_mut();
        set_query_of(rewritten, uri, query);
    }
}

impl<'h> ReqMut<'_, 'h> {
    /// The same request, borrowed for a shorter while (to pass it on and
    /// use it again after).
    pub fn reborrow(&mut self) -> ReqMut<'_, 'h> {
        match self {
            ReqMut::Owned(r) => ReqMut::Owned(r),
            ReqMut::Lent(r) => ReqMut::Lent(r),
        }
    }
}

/// The room a middleware route's header map gets before its chain runs:
/// two headers a middleware may set (the seed's plugin sets one; more still
/// work, growing the map as usual), so the map grows once, outside any
/// timed call. The proxy's own headers are not inserted: the request's
/// encoder writes them ([`crate::upstream::Added`]).
pub const CHAIN_HEADER_ROOM: usize = 2;

impl MwRequest {
    /// `path?query`, as sent on a request line.
    pub fn path_and_query(&self) -> String {
        match self.query() {
            Some(q) => format!("{}?{}", self.path(), q),
            None => self.path().to_string(),
        }
    }
}

/// Checks a status a middleware chose to end the request with (its own
/// answer, or the status a response middleware sets): any status Go's
/// `WriteHeader` takes, 100..=999, but the informational ones. A 1xx is not
/// an answer in HTTP/1.1: written as the final one, the client waits for
/// the real answer, and on a kept-alive connection takes the next
/// request's answer for it. (Go's server sends a handler's 1xx as an
/// interim response, then its body under an implicit 200; here the
/// request fails, 500.) `field` names the field at fault in the error.
pub fn final_status(status: StatusCode, field: &str) -> Result<StatusCode, MwError> {
    if status.is_informational() {
        return Err(MwError::bad_answer(format!(
            "{field}: {} is an informational status (1xx), which cannot be the answer to a request",
            status.as_u16()
        )));
    }
    Ok(status)
}

/// A complete answer written by a middleware; nothing is proxied.
#[derive(Debug, Clone)]
pub struct MwResponse {
    /// The status the client gets (Tyk's `ResponseCode`); any code a
    /// middleware chooses, 200 when it names none.
    pub status: StatusCode,
    /// Headers sent as given, but for hop-by-hop ones and `Content-Length`,
    /// which the gateway sets from `body` (a stale one would break framing).
    pub headers: HeaderMap,
    /// The whole body, sent as one piece (middleware answers are small).
    pub body: Bytes,
}

/// What the request does after a middleware returns.
///
/// The answers are boxed: a `Result<Flow, MwError>` is moved several times
/// per call on the way out of a driver, and with a response inline (its
/// header map and body) each move is a `memcpy` of ~150 bytes, paid by
/// every request that only continues. An answer is the rare case.
#[derive(Debug)]
pub enum Flow {
    /// Run the next middleware of the phase, then the next phase, and
    /// finally proxy the request as the middleware left it.
    Continue,
    /// Answer the client with this response (Tyk's `ReturnOverrides`, a
    /// native plugin's `respond`): the rest of the chain is skipped, nothing
    /// is proxied, and the response middleware does not run (it has no
    /// upstream answer to see). Hop-by-hop headers are dropped and the
    /// gateway frames the body itself ([`MwResponse::headers`]).
    Respond(Box<MwResponse>),
    /// As `Respond`, for a response Tyk writes through `forceResponse` (a
    /// JS `ReturnOverrides` below 400, or with `OverrideError`): from
    /// `post` it passes the API's response chain, as Tyk's does (from
    /// `pre` it does not, as in Tyk).
    Forced(Box<MwResponse>),
}

/// The request phases a middleware entry runs in, as the API definition
/// names them (`custom_middleware.pre`, `.post`, `.response`, and
/// `extended_paths.virtual`); a request meets them in the order `pre`,
/// `virtual`, `post`, `response` (the variants' order is the order
/// `/tyk/stats` lists them in). Each
/// phase's default, an API that lists nothing for it, is to run nothing:
/// the request passes on unchanged, and only an API with entries in some
/// phase buffers its request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    /// In this phase the request is as the client sent it (path with the
    /// listen path, body buffered). Each [`Middleware::call`] returns a
    /// [`Flow`]: `Continue` goes on to the next entry, then to `virtual`;
    /// `Respond` answers the client at once.
    Pre,
    /// In this phase the request is about to go upstream; it still carries
    /// the path the client sent (the listen path is stripped by the
    /// proxying step itself, as in Tyk). Returns as in `pre`; after the
    /// last `Continue` the request is proxied as the chain left it.
    Post,
    /// In this phase the upstream has answered: [`ResponseMiddleware::call`]
    /// may edit its status, headers and buffered body before the client
    /// gets them; it returns `()`, and an error answers 500 `Middleware
    /// error`. The default streams the upstream's answer unbuffered.
    Response,
    /// In this phase a virtual endpoint whose path and method match answers
    /// the request itself ([`Endpoint::call`]): its answer goes through the
    /// `response` phase to the client and nothing is proxied. An error
    /// answers 500, or, with `proxy_on_error`, lets the request carry on to
    /// `post`. The default (no endpoint matches) carries on to `post`.
    Virtual,
}

impl Hook {
    /// Tyk's name for the phase (the key in `/tyk/stats` and in logs).
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::Pre => "pre",
            Hook::Post => "post",
            Hook::Response => "response",
            Hook::Virtual => "virtual",
        }
    }
}

/// Why a middleware failed (the kinds' names cross the wire, so they are
/// defined in `gateway-wire`).
pub use gateway_wire::MwErrorKind;

/// The cause beneath an [`MwError`]: shared, so an error can be cloned.
type Source = Arc<dyn std::error::Error + Send + Sync>;

/// A middleware failed: the client gets Tyk's 500, and the API's
/// `/tyk/stats` counts it under its [`MwErrorKind`].
///
/// As pingora's `Error`: a kind (what happened, for counts and for code
/// that must tell a timeout from a throw), a context (the message the log
/// prints, prefixed with where it happened as it travels up) and an
/// optional source (the library error beneath it). The kind is kept until
/// the one place that maps it to Tyk's answer (`proxy.rs`).
#[derive(Debug, Clone)]
pub struct MwError {
    kind: MwErrorKind,
    context: String,
    source: Option<Source>,
}

impl MwError {
    /// The bytes its message holds (what leaves a JS thread with it).
    pub(crate) fn message_capacity(&self) -> usize {
        self.context.capacity()
    }

    /// A failure of `kind`, described by `context`.
    pub fn new(kind: MwErrorKind, context: impl Into<String>) -> MwError {
        MwError {
            kind,
            context: context.into(),
            source: None,
        }
    }

    /// [`MwErrorKind::Threw`]: the script or plugin raised an error.
    pub fn threw(context: impl Into<String>) -> MwError {
        MwError::new(MwErrorKind::Threw, context)
    }

    /// [`MwErrorKind::TimedOut`]: stopped at its time limit.
    pub fn timed_out(context: impl Into<String>) -> MwError {
        MwError::new(MwErrorKind::TimedOut, context)
    }

    /// [`MwErrorKind::OutOfMemory`]: stopped at its memory limit.
    pub fn out_of_memory(context: impl Into<String>) -> MwError {
        MwError::new(MwErrorKind::OutOfMemory, context)
    }

    /// [`MwErrorKind::BadAnswer`]: returned something that cannot apply.
    pub fn bad_answer(context: impl Into<String>) -> MwError {
        MwError::new(MwErrorKind::BadAnswer, context)
    }

    /// [`MwErrorKind::PluginFault`]: a plugin broke its ABI contract.
    pub fn plugin_fault(context: impl Into<String>) -> MwError {
        MwError::new(MwErrorKind::PluginFault, context)
    }

    /// [`MwErrorKind::NotLoaded`]: the middleware could not be loaded or built.
    pub fn not_loaded(context: impl Into<String>) -> MwError {
        MwError::new(MwErrorKind::NotLoaded, context)
    }

    /// [`MwErrorKind::Internal`]: the gateway's own host code failed.
    pub fn internal(context: impl Into<String>) -> MwError {
        MwError::new(MwErrorKind::Internal, context)
    }

    /// The same error with the library error beneath it.
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> MwError {
        self.source = Some(Arc::from(source.into()));
        self
    }

    /// The same error, its context prefixed with `outer` (`"name: ..."`),
    /// its kind and source kept.
    pub fn context(mut self, outer: impl std::fmt::Display) -> MwError {
        self.context = format!("{outer}: {}", self.context);
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> MwErrorKind {
        self.kind
    }

    /// The message without its source.
    pub fn message(&self) -> &str {
        &self.context
    }
}

impl std::fmt::Display for MwError {
    /// The context only: the source is [`std::error::Error::source`]'s, so
    /// a printer that walks the chain does not print it twice.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.context)
    }
}

impl std::error::Error for MwError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|s| s as _)
    }
}

/// What a middleware call returns: the answer itself when the call finished
/// synchronously (native and wasm calls, JS run inline), or a future when it
/// awaits something (a VM thread, an HTTP call out).
///
/// Ready answers are not boxed: a boxed future is a malloc and a free per
/// call, inside the timed region the stats report, for a call that never
/// waits.
pub enum MwFuture<'a> {
    /// The call is done; `None` once the answer has been taken.
    Ready(Option<Result<Flow, MwError>>),
    /// The call is in flight.
    Pending(Pin<Box<dyn Future<Output = Result<Flow, MwError>> + 'a>>),
}

impl<'a> MwFuture<'a> {
    /// A call that finished synchronously.
    pub fn ready(result: Result<Flow, MwError>) -> Self {
        MwFuture::Ready(Some(result))
    }

    /// A call that has to be awaited.
    pub fn pending(f: impl Future<Output = Result<Flow, MwError>> + 'a) -> Self {
        MwFuture::Pending(Box::pin(f))
    }

    /// The answer of a call that finished synchronously (`None` if it is
    /// in flight: await it). Taken without an await, a ready answer is
    /// never held in (nor copied along with) the caller's future.
    pub fn take_ready(&mut self) -> Option<Result<Flow, MwError>> {
        match self {
            MwFuture::Ready(result) => result.take(),
            MwFuture::Pending(_) => None,
        }
    }
}

impl Future for MwFuture<'_> {
    type Output = Result<Flow, MwError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            MwFuture::Ready(r) => Poll::Ready(r.take().expect("MwFuture polled after completion")),
            MwFuture::Pending(f) => f.as_mut().poll(cx),
        }
    }
}

/// One middleware instance of the `pre` or `post` phase ([`Hook`]), owned
/// by one worker thread.
pub trait Middleware {
    /// The entry's `name` (symbol or JS object), for logs and stats.
    fn name(&self) -> &str;

    /// Takes the recorder of the time this entry's calls run on a JS VM
    /// thread (`GET /tyk/stats` `vm_thread`): a driver that hands its calls
    /// to another thread keeps it and records each job's own time there.
    /// The default, for drivers whose calls run where they are made, drops
    /// it.
    fn time_vm_runs(&mut self, _runs: RunRecorder) {}

    /// In this phase (`pre` or `post`, whichever lists the entry) the
    /// middleware runs on `req` and may edit any of it in place. The gateway
    /// calls it once per request, in the order the definition lists the
    /// entries, and times the call.
    ///
    /// `req.body` is the whole request body: an API with any middleware
    /// buffers it before the first call (up to
    /// [`crate::proxy::MAX_BUFFERED_BODY`], 413 beyond), so a middleware
    /// never sees a partial body. A driver that replaces the body sets the
    /// framing headers with [`crate::body::reframe`].
    ///
    /// Returns [`Flow::Continue`] to pass the request on, [`Flow::Respond`]
    /// to answer it; an [`MwError`] fails the request closed (500).
    fn call<'a>(&'a self, req: &'a mut MwRequest) -> MwFuture<'a>;

    /// True when every [`Middleware::call`] finishes before it returns
    /// ([`MwFuture::Ready`]): native and wasm plugins. A chain made only of
    /// such entries runs in place, inside the routing step, with no future
    /// of its own ([`ApiChain::runs_in_place`]). The default, `false`, is
    /// always correct; a driver that says `true` and then returns a call
    /// in flight fails that request (500), it never waits.
    fn never_waits(&self) -> bool {
        false
    }

    /// The call as [`ApiChain::run_now`] makes it, for a driver that
    /// [`Middleware::never_waits`]: its answer, with no [`MwFuture`] to
    /// build, take from and drop. The default takes `call`'s ready answer
    /// and fails a call in flight (500); native and wasm plugins answer
    /// directly.
    ///
    /// A [`ReqMut::Lent`] request can only be run by a driver that
    /// overrides this (its calls never reach [`Middleware::call`]); the
    /// default fails it (500).
    fn call_now(&self, req: ReqMut<'_, '_>) -> Result<Flow, MwError> {
        let ReqMut::Owned(req) = req else {
            return Err(MwError::internal(
                "the driver said its calls never wait, and cannot run a lent request",
            ));
        };
        self.call(req).take_ready().unwrap_or_else(|| {
            Err(MwError::internal(
                "the driver said its calls never wait, and this one is in flight",
            ))
        })
    }

    /// True for a driver whose calls usually finish before they return,
    /// but not always: QuickJS inline until a call overruns its slice. A
    /// chain whose first entry says so, and whose other entries never
    /// wait, runs in place while that entry [`Middleware::in_place_now`];
    /// the entry is called with [`Middleware::call_or_defer`]. The
    /// default, `false`, is always correct.
    fn defers(&self) -> bool {
        false
    }

    /// For a driver that [`Middleware::defers`]: true while its next call
    /// can run in place (QuickJS: the API is still inline on this worker).
    fn in_place_now(&self) -> bool {
        true
    }

    /// For a driver that [`Middleware::defers`], the first entry of a
    /// chain run in place: its answer, or `None` when this call has to be
    /// awaited after all. It must then have changed nothing, as the
    /// request goes the awaited way from the start (the chain's
    /// [`Middleware::call`] runs it again). The default never defers.
    fn call_or_defer(&self, req: ReqMut<'_, '_>) -> Option<Result<Flow, MwError>> {
        Some(self.call_now(req))
    }
}

/// The future of a response middleware or virtual endpoint call.
pub type MwFutureOf<'a, T> = Pin<Box<dyn Future<Output = Result<T, MwError>> + 'a>>;

/// One response middleware instance (`custom_middleware.response`), owned
/// by one worker thread.
pub trait ResponseMiddleware {
    /// The entry's `name`, for logs and stats.
    fn name(&self) -> &str;

    /// Takes the recorder of the time this entry's calls run on a JS VM
    /// thread (`GET /tyk/stats` `vm_thread`): a driver that hands its calls
    /// to another thread keeps it and records each job's own time there.
    /// The default, for drivers whose calls run where they are made, drops
    /// it.
    fn time_vm_runs(&mut self, _runs: RunRecorder) {}

    /// In this phase the upstream has answered: `resp` holds its status,
    /// headers (hop-by-hop ones removed) and whole body, and the middleware
    /// may edit any of them in place. `req` is the request as it went
    /// upstream, without its body (Tyk hands response hooks no request
    /// body). An error answers the client 500 `Middleware error`, as Tyk.
    fn call<'a>(&'a self, req: &'a MwRequest, resp: &'a mut MwResponse) -> MwFutureOf<'a, ()>;
}

/// One virtual endpoint instance (`extended_paths.virtual`), owned by one
/// worker thread.
pub trait Endpoint {
    /// The endpoint's `response_function_name`, for logs and stats.
    fn name(&self) -> &str;

    /// Takes the recorder of the time this entry's calls run on a JS VM
    /// thread (`GET /tyk/stats` `vm_thread`): a driver that hands its calls
    /// to another thread keeps it and records each job's own time there.
    /// The default, for drivers whose calls run where they are made, drops
    /// it.
    fn time_vm_runs(&mut self, _runs: RunRecorder) {}

    /// In this phase the request matched the endpoint's path and method
    /// (after `pre`): the endpoint answers it. An error answers 500, or
    /// proxies the request when the endpoint says `proxy_on_error`.
    fn call<'a>(&'a self, req: &'a MwRequest) -> MwFutureOf<'a, MwResponse>;
}

/// One worker thread's middleware for one API.
#[derive(Default)]
pub struct Chain {
    /// `pre` entries, in the definition's order: the order they run in.
    pub pre: Vec<Box<dyn Middleware>>,
    /// `post` entries, in the definition's order: the order they run in.
    pub post: Vec<Box<dyn Middleware>>,
    /// `response` entries in order.
    pub response: Vec<Box<dyn ResponseMiddleware>>,
    /// One per entry of the API's `virtual_endpoints`, in the same order.
    pub endpoints: Vec<Box<dyn Endpoint>>,
}

impl Chain {
    /// Appends `other`'s entries to each list: an API whose middleware
    /// comes from one driver and whose virtual endpoints from the JS host.
    pub fn merge(mut self, other: Chain) -> Chain {
        self.pre.extend(other.pre);
        self.post.extend(other.post);
        self.response.extend(other.response);
        self.endpoints.extend(other.endpoints);
        self
    }
}

/// Builds per-thread [`Chain`]s for one API. Made once at load.
pub trait ChainFactory: Send + Sync {
    /// Builds this worker thread's chain. Called on the worker thread, once,
    /// before it accepts connections.
    fn instantiate(&self) -> Result<Chain, MwError>;
}

/// Settings the middleware hosts need at load.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Tyk's `jsvm_timeout`: a JS call that runs longer is answered 500.
    pub jsvm_timeout: Duration,
    /// JS VM threads per worker and API (`--jsvm-threads`); 0 runs scripts
    /// inline on the worker's I/O thread.
    pub jsvm_threads: usize,
    /// QuickJS: how long an API's call may run inline on the I/O thread
    /// before the API moves to VM threads (`--jsvm-inline-budget`; zero:
    /// VM threads from the start; see `js/quickjs/mod.rs`).
    pub jsvm_inline_budget: Duration,
    /// The JS strategy of APIs that name none (`--jsvm-strategy`).
    pub jsvm_strategy: crate::js::Strategy,
    /// The JS engine of APIs whose definition names none (`--jsvm-engine`).
    pub jsvm_engine: JsEngine,
    /// Heap limit of one JS context, in bytes (`--jsvm-memory`): QuickJS's
    /// allocator limit; boa's counted heap (`js/memory.rs`).
    pub jsvm_memory: usize,
    /// Time and memory limits of WebAssembly calls (`--wasm-timeout`,
    /// `--wasm-memory`).
    pub wasm: crate::wasm::WasmLimits,
}

/// Default `--jsvm-memory`: room for a script's working set and a few
/// copies of a large body, small enough that a runaway allocation is
/// stopped long before it troubles the host.
pub const DEFAULT_JSVM_MEMORY: usize = 64 << 20;

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            jsvm_timeout: Duration::from_secs(5),
            jsvm_threads: 1,
            jsvm_inline_budget: crate::js::quickjs::DEFAULT_INLINE_BUDGET,
            jsvm_strategy: crate::js::Strategy::default(),
            jsvm_engine: JsEngine::Boa,
            jsvm_memory: DEFAULT_JSVM_MEMORY,
            wasm: crate::wasm::WasmLimits::default(),
        }
    }
}

/// A request-phase entry and the recorder of its calls' time.
type Timed = (Box<dyn Middleware>, CallRecorder);

/// A worker's chain for one API, with a call-time recorder per entry and
/// the API's failure counts.
pub struct ApiChain {
    api_id: Arc<str>,
    /// Every failure of a runner below, by kind (`/tyk/stats` `errors`).
    errors: ErrorCounter,
    /// Bounds the lines those failures log ([`crate::lograte`]).
    log_gate: crate::lograte::LogGate,
    pre: Vec<Timed>,
    post: Vec<Timed>,
    response: Vec<(Box<dyn ResponseMiddleware>, CallRecorder)>,
    endpoints: Vec<(Box<dyn Endpoint>, CallRecorder)>,
    /// Only `pre`/`post` entries, none of which waits: see
    /// [`ApiChain::runs_in_place`].
    in_place: bool,
    /// Only `pre`/`post` entries, the first of which
    /// [`Middleware::defers`] and the others never wait.
    first_defers: bool,
}

impl ApiChain {
    /// Wraps `chain`, registering one recorder per entry in `stats`.
    pub fn new(spec: &ApiSpec, chain: Chain, stats: &Stats) -> ApiChain {
        let id = spec.api_id.as_str();
        let wrap = |hook: Hook, list: Vec<Box<dyn Middleware>>| {
            list.into_iter()
                .map(|mut m| {
                    m.time_vm_runs(stats.run_recorder(id, hook, m.name()));
                    let rec = stats.recorder(id, hook, m.name());
                    (m, rec)
                })
                .collect()
        };
        let response: Vec<_> = chain
            .response
            .into_iter()
            .map(|mut m| {
                m.time_vm_runs(stats.run_recorder(id, Hook::Response, m.name()));
                let rec = stats.recorder(id, Hook::Response, m.name());
                (m, rec)
            })
            .collect();
        let endpoints: Vec<_> = chain
            .endpoints
            .into_iter()
            .map(|mut m| {
                m.time_vm_runs(stats.run_recorder(id, Hook::Virtual, m.name()));
                let rec = stats.recorder(id, Hook::Virtual, m.name());
                (m, rec)
            })
            .collect();
        let only_request = response.is_empty() && endpoints.is_empty();
        let mut entries = chain.pre.iter().chain(&chain.post);
        let in_place = only_request && entries.clone().all(|m| m.never_waits());
        let first_defers = only_request
            && !in_place
            && entries.next().is_some_and(|m| m.defers())
            && entries.all(|m| m.never_waits());
        ApiChain {
            in_place,
            first_defers,
            api_id: spec.api_id.as_str().into(),
            errors: stats.errors(&spec.api_id),
            log_gate: crate::lograte::LogGate::new(),
            pre: wrap(Hook::Pre, chain.pre),
            post: wrap(Hook::Post, chain.post),
            response,
            endpoints,
        }
    }

    /// True when the hook has at least one middleware (or endpoint).
    pub fn has(&self, hook: Hook) -> bool {
        match hook {
            Hook::Pre | Hook::Post => !self.list(hook).is_empty(),
            Hook::Response => !self.response.is_empty(),
            Hook::Virtual => !self.endpoints.is_empty(),
        }
    }

    /// The request-phase list of `hook` (empty for the other phases, which
    /// have their own runners).
    fn list(&self, hook: Hook) -> &[Timed] {
        match hook {
            Hook::Pre => &self.pre,
            Hook::Post => &self.post,
            Hook::Response | Hook::Virtual => &[],
        }
    }

    /// Runs every response middleware in order on `resp`, timing each call;
    /// stops at the first error, logged here naming the API and middleware.
    pub async fn run_response(
        &self,
        req: &MwRequest,
        resp: &mut MwResponse,
    ) -> Result<(), MwError> {
        for (mw, rec) in &self.response {
            let start = rec.start();
            let result = mw.call(req, resp).await;
            rec.finish(start);
            if let Err(e) = result {
                self.failed("response", mw.name(), &e);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Runs virtual endpoint `index` (its place in the API's
    /// `virtual_endpoints`), timing the call. A failure is logged here.
    pub async fn run_endpoint(&self, index: usize, req: &MwRequest) -> Result<MwResponse, MwError> {
        let Some((ep, rec)) = self.endpoints.get(index) else {
            let e = MwError::not_loaded(format!("virtual endpoint {index} is not loaded"));
            self.failed("virtual endpoint", "?", &e);
            return Err(e);
        };
        let start = rec.start();
        let result = ep.call(req).await;
        rec.finish(start);
        if let Err(e) = &result {
            self.failed("virtual endpoint", ep.name(), e);
        }
        result
    }

    /// Runs every middleware of `hook` in order, timing each call.
    ///
    /// Stops at the first [`Flow::Respond`] or error. An error is logged here,
    /// naming the API and the middleware, so every driver's failures read alike.
    ///
    /// [`ApiChain::run_now`] runs the same steps without a future.
    pub async fn run(&self, hook: Hook, req: &mut MwRequest) -> Result<Flow, MwError> {
        for (mw, rec) in self.list(hook) {
            let started = rec.start();
            let mut call = mw.call(req);
            let result = match call.take_ready() {
                Some(result) => result,
                None => call.await,
            };
            if let Some(end) = self.settle(hook, &**mw, rec, started, result) {
                return end;
            }
        }
        Ok(Flow::Continue)
    }

    /// True when the chain is only `pre` and `post` middleware that never
    /// waits ([`Middleware::never_waits`]): a request without a body to
    /// read then runs it in place with [`ApiChain::run_now`], in the same
    /// synchronous step that routes it, and goes upstream exactly as a
    /// route without middleware does (no future of the chain's own to
    /// build, move and poll).
    ///
    /// Also true for a chain whose first entry [`Middleware::defers`] and
    /// whose others never wait, while that entry
    /// [`Middleware::in_place_now`]: the caller runs it first with
    /// [`ApiChain::run_first_now`], then the rest with
    /// [`ApiChain::run_now_after`].
    #[inline(always)]
    pub fn runs_in_place(&self) -> bool {
        self.in_place || (self.first_defers && self.first_in_place_now())
    }

    fn first_in_place_now(&self) -> bool {
        self.first().is_some_and(|(_, (mw, _))| mw.in_place_now())
    }

    /// The chain's first entry and the hook that lists it.
    fn first(&self) -> Option<(Hook, &Timed)> {
        match (self.pre.first(), self.post.first()) {
            (Some(first), _) => Some((Hook::Pre, first)),
            (None, Some(first)) => Some((Hook::Post, first)),
            (None, None) => None,
        }
    }

    /// For a chain run in place whose first entry
    /// [`Middleware::defers`]: that entry's call, timed and settled as
    /// [`ApiChain::run_now`]'s are, and the hook that lists it; the
    /// answer is `None` when the call has to be awaited (nothing changed:
    /// the request goes the awaited way, from the start). For any other
    /// chain: nothing runs, and the answer is `Flow::Continue`.
    pub fn run_first_now(&self, req: ReqMut<'_, '_>) -> (Hook, Option<Result<Flow, MwError>>) {
        let Some((hook, (mw, rec))) = self.first().filter(|_| self.first_defers) else {
            return (Hook::Pre, Some(Ok(Flow::Continue)));
        };
        let started = rec.start();
        let Some(result) = mw.call_or_defer(req) else {
            return (hook, None);
        };
        let end = self.settle(hook, &**mw, rec, started, result);
        (hook, Some(end.unwrap_or(Ok(Flow::Continue))))
    }

    /// True when the caller of a chain run in place starts with
    /// [`ApiChain::run_first_now`].
    #[inline(always)]
    pub fn first_defers(&self) -> bool {
        self.first_defers
    }

    /// [`ApiChain::run`] for a chain that [`ApiChain::runs_in_place`]: the
    /// same steps, without awaiting. A call that is in flight all the same
    /// (a driver that broke its word) is dropped and fails the request.
    pub fn run_now(&self, hook: Hook, req: ReqMut<'_, '_>) -> Result<Flow, MwError> {
        self.run_now_after(hook, 0, req)
    }

    /// [`ApiChain::run_now`] for the hook's entries after the first
    /// `skip` (run already: [`ApiChain::run_first_now`]).
    #[inline(always)]
    pub fn run_now_after(
        &self,
        hook: Hook,
        skip: usize,
        mut req: ReqMut<'_, '_>,
    ) -> Result<Flow, MwError> {
        for (mw, rec) in self.list(hook).iter().skip(skip) {
            let started = rec.start();
            let result = mw.call_now(req.reborrow());
            if let Some(end) = self.settle(hook, &**mw, rec, started, result) {
                return end;
            }
        }
        Ok(Flow::Continue)
    }

    /// Records the call of `mw` (timed by `rec`) that started at `started`
    /// and ended with `result`: `None` when the phase goes on to the next
    /// entry, else how the phase ends (an answer or an error, logged here).
    #[inline(always)]
    fn settle(
        &self,
        hook: Hook,
        mw: &dyn Middleware,
        rec: &CallRecorder,
        started: Started,
        result: Result<Flow, MwError>,
    ) -> Option<Result<Flow, MwError>> {
        rec.finish(started);
        match result {
            Ok(Flow::Continue) => None,
            Ok(flow) => Some(Ok(flow)),
            Err(e) => {
                let what = match hook {
                    Hook::Pre => "pre middleware",
                    _ => "post middleware",
                };
                self.failed(what, mw.name(), &e);
                Some(Err(e))
            }
        }
    }

    /// Counts and logs one failure: the one log line every driver's
    /// failures share, naming the API, the entry and the kind. The lines
    /// are bounded per API and worker (`--log-rate`); the counts are not.
    fn failed(&self, what: &str, name: &str, e: &MwError) {
        self.errors.count(e.kind());
        if let Some(left_out) = self.log_gate.admit() {
            tracing::error!(
                "API {}: {what} {name} failed ({}): {}{}",
                self.api_id,
                e.kind(),
                crate::error::ErrorChain(e),
                crate::lograte::LeftOut(left_out)
            );
        }
    }

    /// Counts a failure that belongs to this API's middleware but happened
    /// outside a runner (a rewritten URL that is not valid).
    pub fn count(&self, kind: MwErrorKind) {
        self.errors.count(kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str) -> MwRequest {
        MwRequest::new(
            Method::GET,
            uri.parse().unwrap(),
            HeaderMap::new(),
            Bytes::new(),
            "127.0.0.1:1".parse().unwrap(),
        )
    }

    #[test]
    fn path_and_query_are_the_clients_until_written() {
        let mut r = request("/a/b?x=1");
        assert_eq!((r.path(), r.query()), ("/a/b", Some("x=1")));
        assert!(!r.is_rewritten());
        r.set_path("/c".into());
        assert_eq!(
            (r.path(), r.query()),
            ("/c", Some("x=1")),
            "the query stays"
        );
        assert!(r.is_rewritten());
        r.set_query(None);
        assert_eq!(
            (r.path(), r.query(), r.path_and_query().as_str()),
            ("/c", None, "/c")
        );
        // The client's target is kept, for Tyk's RequestURI.
        assert_eq!(r.request_uri, "/a/b?x=1");

        let mut r = request("/p");
        assert_eq!(r.query(), None);
        r.set_query(Some("y=2".into()));
        assert_eq!(r.path_and_query(), "/p?y=2", "the path stays");
        let head = r.without_body();
        assert_eq!((head.path(), head.query()), ("/p", Some("y=2")));
        assert_eq!(
            request("/e?").query(),
            Some(""),
            "a bare ? is an empty query"
        );
    }

    /// Every edit an in-place driver makes, on a request of each kind:
    /// the owned one and the server's request lent whole end alike.
    #[test]
    fn a_lent_request_reads_and_edits_as_an_owned_one() {
        fn edit(mut r: ReqMut<'_, '_>) {
            assert_eq!((r.path(), r.query()), ("/a/x", Some("q=1")));
            assert_eq!(r.method(), Method::GET);
            assert_eq!(r.remote_addr().port(), 1);
            r.headers_mut().insert("x-set", "v".parse().unwrap());
            *r.method_mut() = Method::PUT;
            r.set_path("/b/y".to_string());
            assert_eq!((r.path(), r.query()), ("/b/y", Some("q=1")));
            r.set_query(None);
            r.set_query(Some("z=2".to_string()));
            r.set_body(Bytes::from_static(b"body"));
            assert_eq!(r.body(), &b"body"[..]);
            assert_eq!(r.headers()["content-length"], "4");
        }
        let mut owned = request("/a/x?q=1");
        owned
            .headers
            .insert("transfer-encoding", "chunked".parse().unwrap());
        edit(ReqMut::Owned(&mut owned));

        let mut head = http::Request::new(crate::body::ClientIn::empty());
        *head.uri_mut() = "/a/x?q=1".parse().unwrap();
        head.headers_mut()
            .insert("transfer-encoding", "chunked".parse().unwrap());
        let mut lent = LentRequest::new(&mut head, "127.0.0.1:1".parse().unwrap());
        edit(ReqMut::Lent(&mut lent));
        assert!(lent.is_rewritten());
        assert_eq!((lent.path(), lent.query()), ("/b/y", Some("z=2")));
        assert_eq!(lent.head().uri(), "/a/x?q=1", "the client's target stays");
        assert_eq!(&lent.into_body()[..], b"body");
        // The edits are in the server's request itself.
        assert_eq!(head.method(), owned.method);
        assert_eq!(head.headers(), &owned.headers);
        assert_eq!((owned.path(), owned.query()), ("/b/y", Some("z=2")));
        assert!(head.headers().get("transfer-encoding").is_none());
    }

    /// A driver that runs only through [`Middleware::call`] cannot be
    /// handed a lent request: it fails (500), it never proxies unrun.
    #[test]
    fn a_lent_request_given_to_an_awaiting_driver_fails() {
        let mut head = http::Request::new(crate::body::ClientIn::empty());
        let mut lent = LentRequest::new(&mut head, "127.0.0.1:1".parse().unwrap());
        let e = Honest.call_now(ReqMut::Lent(&mut lent)).unwrap_err();
        assert_eq!(e.kind(), MwErrorKind::Internal, "{e}");
        assert!(head.headers().get("x-honest").is_none());
    }

    /// Says it never waits, and then does: a driver breaking its word.
    struct Liar;

    impl Middleware for Liar {
        fn name(&self) -> &str {
            "Liar"
        }
        fn call<'a>(&'a self, _: &'a mut MwRequest) -> MwFuture<'a> {
            MwFuture::pending(std::future::pending())
        }
        fn never_waits(&self) -> bool {
            true
        }
    }

    /// Runs at once while `now` says so (setting `x-deferrer`); else
    /// defers, changing nothing, as QuickJS inline does when a call
    /// overruns its slice.
    struct Deferrer {
        now: std::rc::Rc<std::cell::Cell<bool>>,
    }

    impl Deferrer {
        fn new(now: bool) -> Box<Deferrer> {
            Box::new(Deferrer {
                now: std::rc::Rc::new(std::cell::Cell::new(now)),
            })
        }
    }

    impl Middleware for Deferrer {
        fn name(&self) -> &str {
            "Deferrer"
        }
        fn call<'a>(&'a self, req: &'a mut MwRequest) -> MwFuture<'a> {
            req.headers.insert("x-deferrer", "awaited".parse().unwrap());
            MwFuture::pending(std::future::ready(Ok(Flow::Continue)))
        }
        fn defers(&self) -> bool {
            true
        }
        fn in_place_now(&self) -> bool {
            self.now.get()
        }
        fn call_or_defer(&self, mut req: ReqMut<'_, '_>) -> Option<Result<Flow, MwError>> {
            if !self.now.get() {
                return None;
            }
            req.headers_mut()
                .insert("x-deferrer", "in place".parse().unwrap());
            Some(Ok(Flow::Continue))
        }
    }

    struct Honest;

    impl Middleware for Honest {
        fn name(&self) -> &str {
            "Honest"
        }
        fn call<'a>(&'a self, req: &'a mut MwRequest) -> MwFuture<'a> {
            req.headers.insert("x-honest", "1".parse().unwrap());
            MwFuture::ready(Ok(Flow::Continue))
        }
    }

    fn spec() -> ApiSpec {
        let dir = tempfile::tempdir().unwrap();
        let def = include_str!("../../apis/plain-hello.json").replace("plain-hello", "a");
        std::fs::write(dir.path().join("a.json"), def).unwrap();
        let loaded = crate::config::load_dir(dir.path()).unwrap();
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        loaded.apis.into_iter().next().expect("one API")
    }

    #[test]
    fn a_chain_runs_in_place_only_when_every_entry_never_waits() {
        let (spec, stats) = (spec(), Stats::default());
        let of = |pre: Vec<Box<dyn Middleware>>| {
            let chain = Chain {
                pre,
                ..Chain::default()
            };
            ApiChain::new(&spec, chain, &stats)
        };
        assert!(of(vec![Box::new(Liar)]).runs_in_place());
        assert!(!of(vec![Box::new(Liar), Box::new(Honest)]).runs_in_place());

        // The broken promise fails the request (500), it never waits or
        // passes the request on; the failure is counted for the API.
        let chain = of(vec![Box::new(Liar)]);
        let mut req = request("/a/x");
        let e = chain
            .run_now(Hook::Pre, ReqMut::Owned(&mut req))
            .unwrap_err();
        assert_eq!(e.kind(), MwErrorKind::Internal, "{e}");
        assert!(e.message().contains("in flight"), "{e}");
        let errors: Vec<_> = stats
            .error_counts()
            .into_iter()
            .map(|c| (c.api_id, c.kind, c.count))
            .collect();
        assert_eq!(errors, [("a".to_string(), "internal".to_string(), 1)]);

        // What the awaiting runner does for the same chain of honest calls.
        let chain = of(vec![Box::new(Honest)]);
        assert!(matches!(
            chain.run_now(Hook::Pre, ReqMut::Owned(&mut req)),
            Ok(Flow::Continue)
        ));
        assert_eq!(req.headers["x-honest"], "1");
    }

    /// A chain may run in place when its first entry defers and the
    /// others never wait, and only while that entry can run now; the first
    /// entry runs alone first, and a call that defers is neither timed,
    /// counted nor able to change the request.
    #[test]
    fn a_chain_whose_first_entry_defers_runs_in_place_while_it_can() {
        let (spec, stats) = (spec(), Stats::default());
        let of = |pre: Vec<Box<dyn Middleware>>, post: Vec<Box<dyn Middleware>>| {
            ApiChain::new(
                &spec,
                Chain {
                    pre,
                    post,
                    ..Chain::default()
                },
                &stats,
            )
        };
        // Only the first entry may defer; every other must never wait.
        assert!(of(vec![Deferrer::new(true), Box::new(Liar)], vec![]).runs_in_place());
        assert!(of(vec![], vec![Deferrer::new(true)]).runs_in_place());
        assert!(!of(vec![Deferrer::new(true), Box::new(Honest)], vec![]).runs_in_place());
        assert!(!of(vec![Box::new(Liar), Deferrer::new(true)], vec![]).runs_in_place());
        assert!(!of(vec![Deferrer::new(true)], vec![Deferrer::new(true)]).runs_in_place());
        // A chain of entries that never wait starts with none of this.
        let plain = of(vec![Box::new(Liar)], vec![]);
        assert!(plain.runs_in_place() && !plain.first_defers());

        // Runs now: the first entry alone, timed and counted.
        let chain = of(vec![], vec![Deferrer::new(true)]);
        assert!(chain.first_defers());
        let mut head = http::Request::new(crate::body::ClientIn::empty());
        let mut lent = LentRequest::new(&mut head, "127.0.0.1:1".parse().unwrap());
        let (hook, end) = chain.run_first_now(ReqMut::Lent(&mut lent));
        assert_eq!(hook, Hook::Post, "the first entry is the post hook's");
        assert!(matches!(end, Some(Ok(Flow::Continue))));
        assert_eq!(head.headers()["x-deferrer"], "in place");
        let counted = |stats: &Stats| stats.summaries().iter().map(|s| s.count).sum::<u64>();
        assert_eq!(counted(&stats), 1);

        // Cannot run now: not in place; if asked anyway, it defers having
        // done nothing, and nothing is counted.
        let deferrer = Deferrer::new(true);
        let now = deferrer.now.clone();
        let chain = of(vec![deferrer, Box::new(Liar)], vec![]);
        assert!(chain.runs_in_place());
        now.set(false);
        assert!(!chain.runs_in_place(), "the entry cannot run now");
        let mut head = http::Request::new(crate::body::ClientIn::empty());
        let mut lent = LentRequest::new(&mut head, "127.0.0.1:1".parse().unwrap());
        let (hook, end) = chain.run_first_now(ReqMut::Lent(&mut lent));
        assert_eq!(hook, Hook::Pre);
        assert!(end.is_none(), "deferred");
        assert!(head.headers().get("x-deferrer").is_none());
        assert_eq!(counted(&stats), 1, "a deferred call is not counted");
        assert!(stats.error_counts().is_empty());
    }
}
