//! Startup, worker threads, connections and graceful shutdown.
//!
//! The runtime shape is shared-nothing, as in nginx and pingora: one
//! single-threaded tokio runtime per worker thread, each with its own
//! `SO_REUSEPORT` listener on the same port (the kernel spreads new
//! connections across them), its own upstream pool and its own middleware
//! instances. JS contexts are not `Send`, so this is also what lets every
//! worker keep its scripts compiled: nothing is shared on the request path
//! but the call-time counts, each worker's own (relaxed atomic counters,
//! no lock: [`crate::stats`]).
//!
//! Shutdown: the caller's future resolves → every worker stops accepting,
//! serves what is already in its accept queue, and closes its listener (new
//! connections are refused from then on) → in-flight requests finish and
//! their connections close after the response; connections that never sent
//! a request are closed (see [`crate::conn`]) → workers exit, at the latest
//! after the grace period → [`Gateway::run`] returns.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;

use crate::config::{ApiSpec, JsEngine, LoadError};
use crate::control::Control;
use crate::loader::{self, LoadedApi};
use crate::middleware::HostOptions;
use crate::pool::{Pool, PoolConfig};
use crate::proxy::{Proxy, Route};
use crate::router::Router;
use crate::stats::Stats;
use crate::upstream::Resolver;
use crate::{conn, js};

/// What the gateway is started with.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Directory of `*.json` API definitions.
    pub apis_dir: PathBuf,
    /// Worker threads (each with its own listener, runtime and pool).
    pub threads: usize,
    /// Tyk's `jsvm_timeout`.
    pub jsvm_timeout: Duration,
    /// JS VM threads per worker and API; 0 runs scripts on the I/O thread.
    pub jsvm_threads: usize,
    /// QuickJS's inline slice before an API moves to VM threads
    /// (`--jsvm-inline-budget`).
    pub jsvm_inline_budget: Duration,
    /// JS strategy of APIs whose definition names none.
    pub jsvm_strategy: js::Strategy,
    /// JS engine of APIs that name none (`--jsvm-engine`).
    pub jsvm_engine: JsEngine,
    /// Heap limit of one QuickJS context in bytes (`--jsvm-memory`).
    pub jsvm_memory: usize,
    /// Time and memory limits of wasm middleware calls.
    pub wasm: crate::wasm::WasmLimits,
    /// Control API secret; `None` turns `/tyk/` off.
    pub secret: Option<String>,
    /// Pin worker *i* to the *i*-th allowed CPU, and its VM threads with it,
    /// when some API runs JS on VM threads (`--cpu-affinity auto`;
    /// `affinity.rs` says why, and why not otherwise).
    pub cpu_affinity: bool,
    /// How long to wait for an upstream's response head (504 after).
    pub upstream_timeout: Duration,
    /// How long shutdown waits for in-flight requests before exiting anyway.
    pub shutdown_grace: Duration,
    /// How long a client may take to send a request head: the first from
    /// when the connection is accepted, later ones from their first byte
    /// (nginx's `client_header_timeout`).
    pub client_header_timeout: Duration,
    /// How long a keep-alive connection may stay idle between requests
    /// (nginx's `keepalive_timeout`).
    pub client_keepalive_timeout: Duration,
    /// Longest a client may leave a response unread, no byte of it taken,
    /// before its connection is closed (nginx's `send_timeout`): a client
    /// that stops reading would otherwise hold its connection, and the
    /// upstream's that the response comes from, for ever.
    pub client_send_timeout: Duration,
    /// Longest wait between two reads of a request body (nginx's
    /// `client_body_timeout`); 408 after.
    pub client_body_timeout: Duration,
    /// Most bytes of bodies held whole for middleware at once (request
    /// bodies, and upstream bodies for response middleware until the
    /// client has been sent them), across the workers (0: no bound); a
    /// body that would pass it gets 503 ([`crate::body::Buffered`]).
    pub max_buffered_bodies: usize,
    /// Longest wait between two reads of an upstream's response body
    /// (nginx's `proxy_read_timeout`); the response is cut short after.
    pub upstream_read_timeout: Duration,
    /// Idle upstream connections kept per upstream per worker (nginx's
    /// `keepalive`).
    pub upstream_keepalive: usize,
    /// How long an idle upstream connection is kept (nginx's upstream
    /// `keepalive_timeout`).
    pub upstream_keepalive_timeout: Duration,
    /// Who reads client connections: the gateway's own HTTP/1 code for the
    /// common requests ([`crate::h1down`]), or hyper's server connection
    /// for all of them (`--client-http1`).
    pub client_http1: ClientHttp1,
}

/// Who serves client connections' HTTP/1 (see [`crate::h1down`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ClientHttp1 {
    /// The gateway's own reader and writer; hyper takes over a connection
    /// at its first request the own code does not take.
    #[default]
    Own,
    /// hyper's server connection for every request.
    Hyper,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            apis_dir: PathBuf::from("apis"),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            jsvm_timeout: Duration::from_secs(5),
            jsvm_threads: 1,
            jsvm_inline_budget: crate::js::quickjs::DEFAULT_INLINE_BUDGET,
            jsvm_strategy: js::Strategy::default(),
            jsvm_engine: JsEngine::Boa,
            jsvm_memory: crate::middleware::DEFAULT_JSVM_MEMORY,
            wasm: crate::wasm::WasmLimits::default(),
            secret: None,
            cpu_affinity: true,
            upstream_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            client_header_timeout: Duration::from_secs(60),
            client_keepalive_timeout: Duration::from_secs(75),
            client_send_timeout: Duration::from_secs(60),
            client_body_timeout: Duration::from_secs(60),
            max_buffered_bodies: DEFAULT_MAX_BUFFERED_BODIES,
            upstream_read_timeout: Duration::from_secs(60),
            upstream_keepalive: 64,
            upstream_keepalive_timeout: Duration::from_secs(60),
            client_http1: ClientHttp1::default(),
        }
    }
}

/// Default `--max-buffered-bodies`: 1 GiB of bodies held whole
/// for middleware at once (32 bodies of the 32 MiB each may have).
pub const DEFAULT_MAX_BUFFERED_BODIES: usize = 1 << 30;

/// A gateway with its definitions loaded and its listeners bound.
pub struct Gateway {
    config: GatewayConfig,
    listeners: Listeners,
    apis: Vec<LoadedApi>,
    resolver: Resolver,
    control: Arc<Control>,
    hop: crate::upstream::Hop,
}

impl Gateway {
    /// Loads the API definitions and binds one listener per worker on `addr`.
    ///
    /// Definitions that fail to load, and APIs that fail closed (routed,
    /// answering 500), are logged and kept in [`Gateway::load_errors`]; only
    /// an unreadable directory or an address that cannot be bound is an
    /// error here.
    pub fn bind(addr: SocketAddr, config: GatewayConfig) -> anyhow::Result<Gateway> {
        let listeners = Listeners::bind(addr, config.threads)?;
        Gateway::with_listeners(listeners, config)
    }

    /// As [`Gateway::bind`], on listeners bound beforehand (one worker
    /// each, whatever `config.threads` says): for definitions that must
    /// name the gateway's own port, written after the port is held, so no
    /// other socket can take it in between.
    pub fn with_listeners(listeners: Listeners, config: GatewayConfig) -> anyhow::Result<Gateway> {
        let resolver = Resolver::default();
        let load = loader::load(&config.apis_dir, &host_options(&config), &resolver)?;
        let mut warnings = load.warnings;
        for w in crate::control::shadowed(&load.listing, config.secret.is_some()) {
            tracing::warn!("{w}");
            warnings.push(w);
        }
        let control = Arc::new(Control {
            secret: config.secret.clone(),
            stats: Stats::default(),
            apis: load.listing,
            load_errors: load.errors,
            warnings,
        });
        Ok(Gateway {
            config,
            listeners,
            apis: load.apis,
            resolver,
            control,
            hop: crate::upstream::Hop::random(),
        })
    }

    /// The address the listeners are bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listeners.local_addr()
    }

    /// Definitions that did not load and APIs that fail closed, each naming
    /// its file and field.
    pub fn load_errors(&self) -> &[LoadError] {
        &self.control.load_errors
    }

    /// Fields that change Tyk's behaviour but are not implemented here, and
    /// likely typos: each API named is still served.
    pub fn load_warnings(&self) -> &[LoadError] {
        &self.control.warnings
    }

    /// The middleware call-time histograms.
    pub fn stats(&self) -> Stats {
        self.control.stats.clone()
    }

    /// Serves until `shutdown` resolves, then drains in-flight requests.
    /// Blocks the calling thread; workers run on threads of their own.
    pub fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        let (tx, rx) = watch::channel(false);
        let own = self.local_addr();
        let apis: Arc<Vec<LoadedApi>> = Arc::new(self.apis);
        let loops: Arc<Vec<bool>> = Arc::new(
            apis.iter()
                .map(|a| targets_self(&self.resolver, &a.spec, own))
                .collect(),
        );
        let pin = self.config.cpu_affinity
            && crate::affinity::worth_pinning(
                self.config.jsvm_threads,
                apis.iter().map(|a| &*a.spec),
            );
        let mut handles = Vec::new();
        let buffered = crate::body::Buffered::new(self.config.max_buffered_bodies);
        for (i, listener) in self.listeners.0.into_iter().enumerate() {
            let shared = Shared {
                control: self.control.clone(),
                resolver: self.resolver.clone(),
                config: self.config.clone(),
                loops: loops.clone(),
                hop: self.hop.clone(),
                buffered: buffered.clone(),
            };
            let (apis, rx) = (apis.clone(), rx.clone());
            let cpu = pin.then(|| crate::affinity::worker_cpu(i)).flatten();
            let handle = std::thread::Builder::new()
                .name(format!("gw-worker-{i}"))
                // Scripts run here with `--jsvm-threads 0`: the JS host's
                // stack (reserved, committed only when touched).
                .stack_size(js::SCRIPT_STACK_SIZE)
                .spawn(move || {
                    // First, so the VM threads this worker starts inherit
                    // its core.
                    if let Some(cpu) = cpu {
                        if let Err(e) = crate::affinity::pin_current(cpu) {
                            tracing::warn!(cpu, error = %e, "cannot pin worker {i}; left to the kernel");
                        }
                    }
                    worker(listener, &apis, rx, shared)
                })
                .context("cannot spawn a worker thread")?;
            handles.push(handle);
        }
        // The shutdown future may need a runtime (signals, timers, channels):
        // give it a small one of its own on this thread.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(shutdown);
        tracing::info!("shutting down: no new connections, draining in-flight requests");
        let _ = tx.send(true);
        // Workers end by the grace period, unless one is blocked outside its
        // event loop (a native plugin call that never returns): then it is
        // left behind, and the process exits without it, instead of
        // waiting for ever.
        let give_up = std::time::Instant::now() + self.config.shutdown_grace + WORKER_EXIT_MARGIN;
        let mut stuck = Vec::new();
        for (i, h) in handles.into_iter().enumerate() {
            while !h.is_finished() && std::time::Instant::now() < give_up {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !h.is_finished() {
                stuck.push(i.to_string());
                continue;
            }
            if let Err(e) = h.join().map_err(|_| anyhow::anyhow!("worker panicked"))? {
                tracing::error!(error = %e, "worker failed");
            }
        }
        if !stuck.is_empty() {
            anyhow::bail!(
                "worker {} did not stop within the shutdown grace period and {WORKER_EXIT_MARGIN:?} more \
                 (blocked in a middleware call: a native plugin, or a script run inline with \
                 --jsvm-threads 0); exited without it",
                stuck.join(", ")
            );
        }
        Ok(())
    }
}

/// How long past the shutdown grace period [`Gateway::run`] still waits for
/// a worker thread to end (dropping its JS contexts, VM threads and
/// connections) before it returns without it.
const WORKER_EXIT_MARGIN: Duration = Duration::from_secs(5);

/// What the middleware hosts need of the gateway's configuration.
fn host_options(config: &GatewayConfig) -> HostOptions {
    HostOptions {
        jsvm_timeout: config.jsvm_timeout,
        jsvm_threads: config.jsvm_threads,
        jsvm_inline_budget: config.jsvm_inline_budget,
        jsvm_strategy: config.jsvm_strategy,
        jsvm_engine: config.jsvm_engine,
        jsvm_memory: config.jsvm_memory,
        wasm: config.wasm,
    }
}

/// A gateway's listening sockets, bound before it is built
/// ([`Gateway::with_listeners`]).
pub struct Listeners(Vec<std::net::TcpListener>);

impl Listeners {
    /// `n` listeners (one per worker) on `addr`; with port 0 the kernel
    /// picks one port for all.
    pub fn bind(addr: SocketAddr, n: usize) -> anyhow::Result<Listeners> {
        bind_reuseport(addr, n.max(1)).map(Listeners)
    }

    /// The address they are bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.0[0]
            .local_addr()
            .expect("bound listener has an address")
    }
}

/// Binds `n` listeners on the same address with `SO_REUSEPORT`. With port 0,
/// the first picks the port and the rest join it.
///
/// `SO_REUSEPORT` would also let us join a port that another gateway already
/// serves, silently splitting its traffic. A plain bind first proves the port
/// is free (it fails against any listener, reuseport or not).
fn bind_reuseport(addr: SocketAddr, n: usize) -> anyhow::Result<Vec<std::net::TcpListener>> {
    if addr.port() != 0 {
        drop(std::net::TcpListener::bind(addr).map_err(|e| cannot_listen(addr, e))?);
    }
    let mut out: Vec<std::net::TcpListener> = Vec::with_capacity(n);
    for i in 0..n {
        let at = out.first().map_or(Ok(addr), |l| l.local_addr())?;
        let opened = (|| {
            let socket = Socket::new(Domain::for_address(at), Type::STREAM, Some(Protocol::TCP))?;
            socket.set_reuse_address(true)?;
            socket.set_reuse_port(true)?;
            socket.set_nonblocking(true)?;
            socket.set_tcp_nodelay(true)?;
            Ok::<_, std::io::Error>(socket)
        })();
        // One listener per worker: at the fd limit, the count is the
        // likely cause (`--threads 100000` said only "Too many open files").
        let socket = opened.with_context(|| {
            format!(
                "cannot open listening socket {} of {n} (one per worker, --threads)",
                i + 1
            )
        })?;
        socket.bind(&at.into()).map_err(|e| cannot_listen(at, e))?;
        socket.listen(4096).map_err(|e| cannot_listen(at, e))?;
        out.push(socket.into());
    }
    Ok(out)
}

/// `--listen`'s error, with the likely cause of the common ones: only
/// "in use" suggested another process, and a port below 1024 without the
/// right, or an address this machine does not have, said so too.
fn cannot_listen(at: SocketAddr, e: std::io::Error) -> anyhow::Error {
    let hint = match e.kind() {
        std::io::ErrorKind::AddrInUse => " (is another process using it?)",
        std::io::ErrorKind::PermissionDenied if at.port() < 1024 => {
            " (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
        }
        std::io::ErrorKind::AddrNotAvailable => " (no interface of this machine has that address)",
        _ => "",
    };
    anyhow::Error::new(e).context(format!("cannot listen on {at} (--listen){hint}"))
}

/// What every worker gets besides its listener and the APIs.
struct Shared {
    control: Arc<Control>,
    resolver: Resolver,
    config: GatewayConfig,
    /// Per API (same order): its target is this gateway.
    loops: Arc<Vec<bool>>,
    /// This gateway's `Via` entry, the same on every worker.
    hop: crate::upstream::Hop,
    /// The bound on request bodies held whole, shared by the workers.
    buffered: Arc<crate::body::Buffered>,
}

/// True when `spec`'s target is an address this gateway listens on: proxying
/// to it would send every request back to ourselves, forever (each hop a new
/// connection, until file descriptors run out).
fn targets_self(resolver: &Resolver, spec: &ApiSpec, own: SocketAddr) -> bool {
    if spec.target.port != own.port() {
        return false;
    }
    let loops = resolver.cached(&spec.target.host).is_some_and(|addrs| {
        addrs
            .iter()
            .any(|a| a.ip() == own.ip() || (own.ip().is_unspecified() && a.ip().is_loopback()))
    });
    if loops {
        tracing::error!(
            file = %spec.file.display(),
            api_id = %spec.api_id,
            "proxy.target_url {} is this gateway itself ({own}): every request to the API gets 508 Loop Detected",
            spec.target.authority
        );
    }
    loops
}

/// One worker thread: a current-thread runtime serving its own listener.
///
/// Phases: build this worker's routes and middleware → accept until
/// shutdown (each connection served by [`conn::Server::spawn`]) → serve
/// the accept backlog → drain in-flight requests.
fn worker(
    listener: std::net::TcpListener,
    apis: &[LoadedApi],
    mut shutdown: watch::Receiver<bool>,
    shared: Shared,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let proxy = Rc::new(build_proxy(apis, &shared));
        sweep_idle_upstreams(proxy.pool.clone());
        let server = conn::Server::new(
            proxy,
            shared.control.clone(),
            &shared.config,
            shutdown.clone(),
        );
        let listener = tokio::net::TcpListener::from_std(listener)?;
        accept_loop(&listener, &mut shutdown, |stream, remote| {
            server.spawn(stream, remote)
        })
        .await;
        server.stopping();
        drain_backlog(listener, &server);
        server.drain(shared.config.shutdown_grace).await;
        Ok(())
    })
}

/// Closes idle upstream connections past their timeout even when no
/// request comes to notice them. The task dies with the worker's LocalSet.
fn sweep_idle_upstreams(pool: Rc<Pool>) {
    let every = (pool.config().idle_timeout / 4).max(Duration::from_millis(250));
    tokio::task::spawn_local(async move {
        loop {
            tokio::time::sleep(every).await;
            pool.sweep();
        }
    });
}

/// This worker's routes, middleware instances and upstream pool.
fn build_proxy(apis: &[LoadedApi], shared: &Shared) -> Proxy {
    let config = &shared.config;
    let mut pool = Pool::new(
        PoolConfig {
            max_idle: config.upstream_keepalive,
            idle_timeout: config.upstream_keepalive_timeout,
            connect_timeout: PoolConfig::default().connect_timeout,
            read_timeout: config.upstream_read_timeout,
        },
        shared.resolver.clone(),
    );
    // Middleware instances are built here, on this thread, because JS
    // contexts must never leave the thread that created them.
    let routes = apis
        .iter()
        .zip(shared.loops.iter())
        .map(|(api, &loops_to_self)| {
            let chain = api.chain(&shared.control.stats);
            let upstream = pool.register(&api.spec.target.host, api.spec.target.port);
            let host = http::HeaderValue::from_str(&api.spec.target.authority).ok();
            let route = Route {
                host,
                spec: api.spec.clone(),
                chain,
                upstream,
                loops_to_self,
                errors: shared.control.stats.errors(&api.spec.api_id),
            };
            (api.spec.listen_path.clone(), route)
        })
        .collect();
    Proxy {
        router: Router::new(routes),
        pool: Rc::new(pool),
        upstream_timeout: config.upstream_timeout,
        body_timeout: config.client_body_timeout,
        buffered: shared.buffered.clone(),
        hop: shared.hop.clone(),
        forwarded_for: Default::default(),
        log_gate: Default::default(),
    }
}

/// Connections accepted in a row before the accept loop lets the worker's
/// other tasks and its I/O driver run.
///
/// Without a bound, one poll of the loop takes every connection waiting
/// (up to tokio's budget of 128), and each starts its request at once: at
/// `-c 1000` that put more requests in flight upstream than the pool keeps
/// (64 idle), so over a quarter of the requests opened (and then closed) an
/// upstream connection of their own: socket, connect, two setsockopt and
/// getsockopt, epoll registration, close, on both ends. nginx accepts one
/// connection per event-loop turn (`multi_accept off`) and, with the same
/// pool, opened none. Measured (release, `--threads 1`, loadgen `-n 20000
/// -c 1000` on /plain/, 5 alternated rounds, gateway CPU per request):
/// unbounded 41.1-43.1 µs, 16 per turn 24.9-29.1, 4 per turn 25.4-27.4,
/// 1 per turn 27.6-29.1 (an epoll_wait per accept); with `--threads 2`,
/// unbounded 25.7-26.7, 4 per turn 22.6-23.2. Under ab's `-c 10` the bound
/// makes no difference (16.1-18.5 µs either way): there are never more than
/// ten to take.
const ACCEPT_BURST: u32 = 4;

/// Accepts until `shutdown`, handing each connection to `on_accept`, at
/// most [`ACCEPT_BURST`] per turn of the worker's event loop. Accept errors
/// (EMFILE at the fd limit, mostly) back off exponentially up to
/// [`ACCEPT_BACKOFF_MAX`] instead of spinning, and are logged once per run
/// of failures, not once per attempt.
async fn accept_loop(
    listener: &tokio::net::TcpListener,
    shutdown: &mut watch::Receiver<bool>,
    mut on_accept: impl FnMut(tokio::net::TcpStream, SocketAddr),
) {
    let mut backoff = Duration::ZERO;
    let mut failures = 0u64;
    let mut in_turn = 0u32;
    loop {
        if in_turn == ACCEPT_BURST {
            in_turn = 0;
            // Back after the I/O driver has run (tokio defers a yielding
            // task's wake-up until then): the upstream answers that came
            // in meanwhile are taken before more requests are.
            tokio::task::yield_now().await;
        }
        let accepted = tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, remote)) => {
                in_turn += 1;
                if failures > 0 {
                    tracing::info!("accepting connections again after {failures} failed accepts");
                    (failures, backoff) = (0, Duration::ZERO);
                }
                // No set_nodelay here: accepted sockets inherit TCP_NODELAY
                // from the listener (see `bind_reuseport`), which saves a
                // syscall per connection; ab opens one connection per request.
                on_accept(stream, remote);
            }
            // The client gave up before we accepted: nothing to back off for.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => {}
            Err(e) => {
                failures += 1;
                backoff = (backoff * 2).clamp(ACCEPT_BACKOFF_MIN, ACCEPT_BACKOFF_MAX);
                if failures == 1 {
                    tracing::warn!(error = %e, "accept failed (out of file descriptors?); backing off until it succeeds");
                }
                tokio::select! {
                    _ = shutdown.wait_for(|stop| *stop) => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
            }
        }
    }
}

/// First and longest pause after a failed accept.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_millis(500);

/// Serves the connections the kernel has already completed for us before
/// the listener closes: their clients have sent their requests, and closing
/// the listener would reset them. Only connections arriving after this are
/// refused.
fn drain_backlog(listener: tokio::net::TcpListener, server: &conn::Server) {
    let Ok(listener) = listener.into_std() else {
        return;
    };
    let mut served = 0;
    while let Ok((stream, remote)) = listener.accept() {
        let stream = stream
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpStream::from_std(stream));
        if let Ok(stream) = stream {
            server.spawn(stream, remote);
            served += 1;
        }
    }
    if served > 0 {
        tracing::info!("{served} connections accepted from the backlog during shutdown");
    }
    // Dropping `listener` closes it: new connections are refused from here.
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Connections waiting in the backlog are taken a few per turn of the
    /// event loop, other tasks running between the turns: with no bound the
    /// loop took all of them (up to 128) in one go, putting each one's
    /// request upstream before any answer was read.
    #[test]
    fn waiting_connections_are_accepted_a_few_per_turn() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            // Loopback connects complete in the kernel: all 40 wait in the
            // backlog before the loop starts.
            let clients: Vec<_> = (0..40)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            let accepted = Rc::new(Cell::new(0u32));
            let (stop, mut shutdown) = watch::channel(false);
            // Another task of the worker: the most connections accepted
            // between two of its turns.
            let seen = accepted.clone();
            let watcher = tokio::task::spawn_local(async move {
                let (mut last, mut widest) = (0, 0);
                loop {
                    let now = seen.get();
                    widest = widest.max(now - last);
                    last = now;
                    if last == 40 {
                        return widest;
                    }
                    tokio::task::yield_now().await;
                }
            });
            let count = accepted.clone();
            let mut held = Vec::new();
            let accepting = accept_loop(&listener, &mut shutdown, |stream, _| {
                count.set(count.get() + 1);
                held.push(stream);
            });
            let widest = tokio::select! {
                widest = watcher => widest.unwrap(),
                _ = accepting => unreachable!("not stopped yet"),
            };
            stop.send(true).unwrap();
            assert_eq!(accepted.get(), 40);
            // The 40 waiting are more than one turn's bound.
            const _: () = assert!(ACCEPT_BURST < 40);
            assert!(
                widest <= ACCEPT_BURST,
                "{widest} of 40 waiting connections accepted in one turn (bound {ACCEPT_BURST})"
            );
            drop(clients);
        });
    }

    #[test]
    fn accepted_connections_inherit_tcp_nodelay_from_the_listener() {
        let listeners = bind_reuseport("127.0.0.1:0".parse().unwrap(), 2).unwrap();
        let addr = listeners[0].local_addr().unwrap();
        let _client = std::net::TcpStream::connect(addr).unwrap();
        // Either listener may get the connection; poll both (non-blocking).
        let accepted = (0..2000)
            .find_map(|_| {
                let got = listeners.iter().find_map(|l| l.accept().ok());
                if got.is_none() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                got
            })
            .expect("connection accepted");
        assert!(accepted.0.nodelay().unwrap(), "TCP_NODELAY not inherited");
        assert_ne!(listeners[0].local_addr().unwrap().port(), 0);
        assert_eq!(listeners[1].local_addr().unwrap(), addr);
    }
}
