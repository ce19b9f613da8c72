//! Startup, worker threads, connections and graceful shutdown.
//!
//! The runtime shape is shared-nothing, as in nginx and pingora: one
//! single-threaded tokio runtime per worker thread, each with its own
//! `SO_REUSEPORT` listener on the same port (the kernel spreads new
//! connections across them), its own upstream pool and its own middleware
//! instances. JS contexts are not `Send`, so this is also what lets every
//! worker keep its scripts compiled: nothing is shared on the request path
//! but the call-time histograms, each behind its own uncontended lock.
//!
//! Shutdown: the caller's future resolves → every worker stops accepting and
//! closes its listener → in-flight requests finish (HTTP/1 connections close
//! after their current response) → workers exit → [`Gateway::run`] returns.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;

use crate::config::{self, ApiSpec, Driver, LoadError};
use crate::control::Control;
use crate::middleware::{ApiChain, ChainFactory, HostOptions};
use crate::proxy::{ClientBody, Proxy, Route};
use crate::router::Router;
use crate::stats::Stats;
use crate::upstream::{self, Resolver};
use crate::{js, native, wasm};

/// What the gateway is started with.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Directory of `*.json` API definitions.
    pub apis_dir: PathBuf,
    /// Worker threads (each with its own listener, runtime and pool).
    pub threads: usize,
    /// Tyk's `jsvm_timeout`.
    pub jsvm_timeout: Duration,
    /// Time and memory limits of wasm middleware calls.
    pub wasm: wasm::WasmLimits,
    /// Control API secret; `None` turns `/tyk/` off.
    pub secret: Option<String>,
    /// How long to wait for an upstream's response head (504 after).
    pub upstream_timeout: Duration,
    /// How long shutdown waits for in-flight requests before exiting anyway.
    pub shutdown_grace: Duration,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            apis_dir: PathBuf::from("apis"),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            jsvm_timeout: Duration::from_secs(5),
            wasm: wasm::WasmLimits::default(),
            secret: None,
            upstream_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

/// An API that loaded, with its middleware host (if it has middleware).
struct LoadedApi {
    spec: Arc<ApiSpec>,
    factory: Option<Arc<dyn ChainFactory>>,
}

/// A gateway with its definitions loaded and its listeners bound.
pub struct Gateway {
    config: GatewayConfig,
    listeners: Vec<std::net::TcpListener>,
    apis: Vec<LoadedApi>,
    resolver: Resolver,
    control: Arc<Control>,
}

impl Gateway {
    /// Loads the API definitions and binds one listener per worker on `addr`.
    ///
    /// Definitions that fail to load are logged and kept in
    /// [`Gateway::load_errors`]; only an unreadable directory or an address
    /// that cannot be bound is an error here.
    pub fn bind(addr: SocketAddr, config: GatewayConfig) -> anyhow::Result<Gateway> {
        let threads = config.threads.max(1);
        let loaded = config::load_dir(&config.apis_dir).with_context(|| {
            format!(
                "cannot read the API definitions directory {}",
                config.apis_dir.display()
            )
        })?;
        for file in &loaded.inactive {
            tracing::info!(file = %file.display(), "API is inactive (\"active\": false); skipped");
        }
        let mut errors = loaded.errors;
        let opts = HostOptions {
            jsvm_timeout: config.jsvm_timeout,
            workers: threads,
        };
        let resolver = Resolver::default();
        let mut apis = Vec::new();
        for spec in loaded.apis {
            if let Err(m) = resolver.prepare(&spec.target.host) {
                // Not fatal: the host may resolve later (DNS up after us);
                // the connector retries on each new connection.
                tracing::warn!(file = %spec.file.display(), "proxy.target_url: {m}");
            }
            let factory = match spec.driver {
                None => Ok(None),
                Some(Driver::Native) => native::load(&spec, &opts).map(Some),
                Some(Driver::Js) => js::load(&spec, &opts).map(Some),
                Some(Driver::Wasm) => wasm::load(&spec, &config.wasm).map(Some),
            };
            match factory {
                Ok(factory) => apis.push(LoadedApi {
                    spec: Arc::new(spec),
                    factory,
                }),
                Err(e) => errors.push(e),
            }
        }
        for e in &errors {
            tracing::error!("API definition not loaded: {e}");
        }
        for api in &apis {
            tracing::info!(
                api_id = %api.spec.api_id,
                listen_path = %api.spec.listen_path,
                target = %api.spec.target.authority,
                driver = ?api.spec.driver,
                "API loaded"
            );
        }
        if apis.is_empty() {
            tracing::error!(
                dir = %config.apis_dir.display(),
                "NO API LOADED: every request except /hello will get 404"
            );
        }

        let listeners = bind_reuseport(addr, threads)?;
        let control = Arc::new(Control {
            secret: config.secret.clone(),
            stats: Stats::default(),
            apis: apis
                .iter()
                .map(|a| {
                    let driver = a.spec.driver.map_or("none", |d| match d {
                        Driver::Native => "native",
                        Driver::Js => "javascript",
                        Driver::Wasm => "wasm",
                    });
                    (
                        a.spec.api_id.clone(),
                        a.spec.listen_path.clone(),
                        driver.to_string(),
                    )
                })
                .collect(),
            load_errors: errors,
        });
        Ok(Gateway {
            config,
            listeners,
            apis,
            resolver,
            control,
        })
    }

    /// The address the listeners are bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listeners[0]
            .local_addr()
            .expect("bound listener has an address")
    }

    /// Definitions that did not load, each naming its file and field.
    pub fn load_errors(&self) -> &[LoadError] {
        &self.control.load_errors
    }

    /// The middleware call-time histograms.
    pub fn stats(&self) -> Stats {
        self.control.stats.clone()
    }

    /// Serves until `shutdown` resolves, then drains in-flight requests.
    /// Blocks the calling thread; workers run on threads of their own.
    pub fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        let (tx, rx) = watch::channel(false);
        let apis: Arc<Vec<LoadedApi>> = Arc::new(self.apis);
        let mut handles = Vec::new();
        for (i, listener) in self.listeners.into_iter().enumerate() {
            let (apis, rx, control, resolver, config) = (
                apis.clone(),
                rx.clone(),
                self.control.clone(),
                self.resolver.clone(),
                self.config.clone(),
            );
            let handle = std::thread::Builder::new()
                .name(format!("gw-worker-{i}"))
                .spawn(move || worker(listener, &apis, rx, control, resolver, config))
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
        for h in handles {
            if let Err(e) = h.join().map_err(|_| anyhow::anyhow!("worker panicked"))? {
                tracing::error!(error = %e, "worker failed");
            }
        }
        Ok(())
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
        drop(
            std::net::TcpListener::bind(addr).with_context(|| {
                format!("cannot listen on {addr} (is another process using it?)")
            })?,
        );
    }
    let mut out: Vec<std::net::TcpListener> = Vec::with_capacity(n);
    for _ in 0..n {
        let at = out.first().map_or(Ok(addr), |l| l.local_addr())?;
        let socket = Socket::new(Domain::for_address(at), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.set_tcp_nodelay(true)?;
        socket
            .bind(&at.into())
            .with_context(|| format!("cannot listen on {at} (is another process using it?)"))?;
        socket.listen(4096)?;
        out.push(socket.into());
    }
    Ok(out)
}

/// One worker thread: a current-thread runtime serving its own listener.
fn worker(
    listener: std::net::TcpListener,
    apis: &[LoadedApi],
    mut shutdown: watch::Receiver<bool>,
    control: Arc<Control>,
    resolver: Resolver,
    config: GatewayConfig,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        // Middleware instances are built here, on this thread, because JS
        // contexts must never leave the thread that created them.
        let routes = apis
            .iter()
            .map(|api| {
                let chain = api.factory.as_ref().map(|f| {
                    f.instantiate()
                        .map(|c| ApiChain::new(&api.spec, c, &control.stats))
                        .map_err(|e| {
                            tracing::error!(api_id = %api.spec.api_id, error = %e, "middleware failed to start on a worker");
                            e.to_string()
                        })
                });
                (api.spec.listen_path.clone(), Route { spec: api.spec.clone(), chain })
            })
            .collect();
        let proxy = Rc::new(Proxy {
            router: Router::new(routes),
            client: upstream::client(resolver),
            upstream_timeout: config.upstream_timeout,
        });
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        loop {
            let (stream, remote) = tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => break,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // EMFILE and friends: back off briefly instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
            };
            // No set_nodelay here: accepted sockets inherit TCP_NODELAY from
            // the listener (see `bind_reuseport`), which saves a syscall per
            // connection; ab opens one connection per request.
            let (proxy, control) = (proxy.clone(), control.clone());
            let service = service_fn(move |req| {
                let (proxy, control) = (proxy.clone(), control.clone());
                async move {
                    if let Some(resp) = control.handle(req.method(), req.uri().path(), req.headers()) {
                        return Ok::<_, std::convert::Infallible>(resp.map(|b| -> ClientBody {
                            http_body_util::Either::Right(http_body_util::Full::new(b))
                        }));
                    }
                    Ok(proxy.handle(req, remote).await)
                }
            });
            let conn = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            let conn = graceful.watch(conn);
            tokio::task::spawn_local(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
            });
        }
        drop(listener);
        tokio::select! {
            _ = graceful.shutdown() => {}
            _ = tokio::time::sleep(config.shutdown_grace) => {
                tracing::warn!("shutdown grace period over; closing remaining connections");
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
