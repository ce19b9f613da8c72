//! The middleware contract: one interface, implemented by two drivers.
//!
//! A request passes these middleware phases, in Tyk's order:
//!
//! - **pre**: in this phase the request is exactly as the client sent it.
//! - **virtual** ([`Endpoint`]): in this phase a virtual endpoint whose path
//!   and method match answers the request itself; nothing is proxied.
//! - **post**: in this phase the request is about to go upstream. Both `pre`
//!   and `post` see the path the client sent: the listen path is stripped
//!   by the proxying step itself, as in Tyk.
//! - **response** ([`ResponseMiddleware`]): in this phase the upstream has
//!   answered; its status, headers and buffered body may be edited before
//!   they go to the client. Only APIs with response middleware buffer the
//!   upstream's body.
//!
//! In either phase a middleware gets the whole request as an [`MwRequest`]
//! (method, path, query, headers, and the buffered body) and may edit any of
//! it. It returns a [`Flow`]: [`Flow::Continue`] runs the next middleware and
//! finally proxies; [`Flow::Respond`] answers the client with the given status,
//! headers and body, and nothing is proxied. An [`MwError`] answers 500 with
//! Tyk's `{"error": "Internal Server Error"}` and is logged with the API and
//! the middleware's name; the gateway keeps serving.
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
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};

use crate::config::{ApiSpec, Hook, JsEngine};
use crate::stats::{CallRecorder, Stats};

/// The request as a middleware sees and edits it.
#[derive(Debug, Clone)]
pub struct MwRequest {
    /// The method as the client sent it; a middleware may change it, and
    /// the upstream request uses whatever it ends as.
    pub method: Method,
    /// Path as received (still percent-encoded), always starting with `/`.
    pub path: String,
    /// Query string without the `?`; `None` when the URL has no `?`.
    pub query: Option<String>,
    /// Request headers. Hop-by-hop headers are removed later, at the proxy.
    pub headers: HeaderMap,
    /// The whole request body, buffered before the chain runs (empty if none).
    pub body: Bytes,
    /// The client's address (for `X-Forwarded-For`).
    pub remote_addr: SocketAddr,
    /// The request target exactly as the client sent it. Read-only context:
    /// `path`/`query` are what middleware edits (and what `post` sees
    /// stripped); this stays the original (Tyk's `RequestURI`).
    pub request_uri: http::Uri,
}

impl MwRequest {
    /// `path?query`, as sent on a request line.
    pub fn path_and_query(&self) -> String {
        match &self.query {
            Some(q) => format!("{}?{}", self.path, q),
            None => self.path.clone(),
        }
    }
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
#[derive(Debug)]
pub enum Flow {
    /// Run the next middleware, then proxy.
    Continue,
    /// Answer the client with this response; stop the chain; do not proxy.
    Respond(MwResponse),
    /// As `Respond`, for a response Tyk writes through `forceResponse` (a
    /// JS `ReturnOverrides` below 400, or with `OverrideError`): from
    /// `post` it passes the API's response chain, as Tyk's does (from
    /// `pre` it does not, as in Tyk).
    Forced(MwResponse),
}

/// A middleware failed. The client gets Tyk's 500; the message is logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MwError(pub String);

impl std::fmt::Display for MwError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MwError {}

/// The future a middleware call returns. Native calls are ready at once; the
/// JS host may await a VM thread.
pub type MwFuture<'a> = Pin<Box<dyn Future<Output = Result<Flow, MwError>> + 'a>>;

/// One middleware instance, owned by one worker thread.
pub trait Middleware {
    /// The entry's `name` (symbol or JS object), for logs and stats.
    fn name(&self) -> &str;

    /// Runs the middleware on `req`, which it may edit in place.
    ///
    /// The default path through the gateway calls this once per request per
    /// entry, in the order the API definition lists them.
    fn call<'a>(&'a self, req: &'a mut MwRequest) -> MwFuture<'a>;
}

/// The future of a response middleware or virtual endpoint call.
pub type MwFutureOf<'a, T> = Pin<Box<dyn Future<Output = Result<T, MwError>> + 'a>>;

/// One response middleware instance (`custom_middleware.response`), owned
/// by one worker thread.
pub trait ResponseMiddleware {
    /// The entry's `name`, for logs and stats.
    fn name(&self) -> &str;

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
    /// Longest the I/O thread waits in place (blocked) for a VM thread's
    /// answer before it serves other connections (`--jsvm-wait`; see
    /// `js/vmthread/answer.rs`).
    pub jsvm_wait: Duration,
    /// QuickJS: how long an API's call may run inline on the I/O thread
    /// before the API moves to VM threads (`--jsvm-inline-budget`; zero:
    /// VM threads from the start; see `js/quickjs/mod.rs`).
    pub jsvm_inline_budget: Duration,
    /// The JS strategy of APIs that name none (`--jsvm-strategy`).
    pub jsvm_strategy: crate::js::Strategy,
    /// The JS engine of APIs whose definition names none (`--jsvm-engine`).
    pub jsvm_engine: JsEngine,
    /// Heap limit of one QuickJS context, in bytes (`--jsvm-memory`).
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
            jsvm_wait: crate::js::DEFAULT_WAIT,
            jsvm_inline_budget: crate::js::quickjs::DEFAULT_INLINE_BUDGET,
            jsvm_strategy: crate::js::Strategy::default(),
            jsvm_engine: JsEngine::Boa,
            jsvm_memory: DEFAULT_JSVM_MEMORY,
            wasm: crate::wasm::WasmLimits::default(),
        }
    }
}

/// A worker's chain for one API, with a call-time recorder per entry.
pub struct ApiChain {
    api_id: Arc<str>,
    pre: Vec<(Box<dyn Middleware>, CallRecorder)>,
    post: Vec<(Box<dyn Middleware>, CallRecorder)>,
    response: Vec<(Box<dyn ResponseMiddleware>, CallRecorder)>,
    endpoints: Vec<(Box<dyn Endpoint>, CallRecorder)>,
}

impl ApiChain {
    /// Wraps `chain`, registering one recorder per entry in `stats`.
    pub fn new(spec: &ApiSpec, chain: Chain, stats: &Stats) -> ApiChain {
        let wrap = |hook: Hook, list: Vec<Box<dyn Middleware>>| {
            list.into_iter()
                .map(|m| {
                    let rec = stats.recorder(&spec.api_id, hook, m.name());
                    (m, rec)
                })
                .collect()
        };
        let response = chain
            .response
            .into_iter()
            .map(|m| {
                let rec = stats.recorder(&spec.api_id, Hook::Response, m.name());
                (m, rec)
            })
            .collect();
        let endpoints = chain
            .endpoints
            .into_iter()
            .map(|m| {
                let rec = stats.recorder(&spec.api_id, Hook::Virtual, m.name());
                (m, rec)
            })
            .collect();
        ApiChain {
            api_id: spec.api_id.as_str().into(),
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
    fn list(&self, hook: Hook) -> &[(Box<dyn Middleware>, CallRecorder)] {
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
            let start = Instant::now();
            let result = mw.call(req, resp).await;
            rec.record(start.elapsed());
            if let Err(e) = result {
                tracing::error!(
                    "API {}: response middleware {} failed: {e}",
                    self.api_id,
                    mw.name()
                );
                return Err(e);
            }
        }
        Ok(())
    }

    /// Runs virtual endpoint `index` (its place in the API's
    /// `virtual_endpoints`), timing the call. A failure is logged here.
    pub async fn run_endpoint(&self, index: usize, req: &MwRequest) -> Result<MwResponse, MwError> {
        let Some((ep, rec)) = self.endpoints.get(index) else {
            return Err(MwError(format!("virtual endpoint {index} is not loaded")));
        };
        let start = Instant::now();
        let result = ep.call(req).await;
        rec.record(start.elapsed());
        if let Err(e) = &result {
            tracing::error!(
                "API {}: virtual endpoint {} failed: {e}",
                self.api_id,
                ep.name()
            );
        }
        result
    }

    /// Runs every middleware of `hook` in order, timing each call.
    ///
    /// Stops at the first [`Flow::Respond`] or error. An error is logged here,
    /// naming the API and the middleware, so every driver's failures read alike.
    pub async fn run(&self, hook: Hook, req: &mut MwRequest) -> Result<Flow, MwError> {
        for (mw, rec) in self.list(hook) {
            let start = Instant::now();
            let result = mw.call(req).await;
            rec.record(start.elapsed());
            match result {
                Ok(Flow::Continue) => {}
                Ok(flow) => return Ok(flow),
                Err(e) => {
                    tracing::error!(
                        "API {}: {} middleware {} failed: {e}",
                        self.api_id,
                        hook.as_str(),
                        mw.name()
                    );
                    return Err(e);
                }
            }
        }
        Ok(Flow::Continue)
    }
}
