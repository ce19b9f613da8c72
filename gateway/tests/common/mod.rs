//! Test harness: real servers on 127.0.0.1:0, the real gateway in-process,
//! and a plain HTTP client. Each test binary includes it with `mod common;`.
#![allow(dead_code)]

pub mod fuzz;
pub mod native;
pub mod raw;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use gateway::config::LoadError;
use gateway::server::{Gateway, GatewayConfig, Listeners};
use gateway::stats::Stats;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{json, Value};

/// Runs `f` on a fresh thread with its own current-thread runtime.
fn spawn_runtime<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(f());
    });
}

fn bind_local() -> (std::net::TcpListener, SocketAddr) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    (l, addr)
}

/// Every JS engine by every strategy: the combinations the JS scenario
/// suites run (`js_strategies.rs`, `js_answer_tricks.rs`).
pub const JS_COMBOS: &[(gateway::config::JsEngine, gateway::js::Strategy)] = {
    use gateway::config::JsEngine::{Boa, QuickJs};
    use gateway::js::Strategy::{Fresh, Persistent, TykJson};
    &[
        (Boa, Persistent),
        (Boa, TykJson),
        (Boa, Fresh),
        (QuickJs, Persistent),
        (QuickJs, TykJson),
        (QuickJs, Fresh),
    ]
};

/// Starts the real mock upstream (the seed's echo server); returns its address.
pub fn mock() -> SocketAddr {
    let (l, addr) = bind_local();
    spawn_runtime(move || async move {
        let l = tokio::net::TcpListener::from_std(l).unwrap();
        loadgen::mock::serve(l, std::future::pending())
            .await
            .unwrap();
    });
    addr
}

/// One request as an upstream received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    /// Path and query, as on the request line.
    pub uri: String,
    pub version: http::Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A capturing upstream: records every request in full and answers 200
/// `recorded` with `X-Upstream: recorder` (plus a hop-by-hop header that must
/// not reach the client).
#[derive(Clone, Default)]
pub struct Recorder {
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// TCP connections the recorder accepted (pooling shows here).
    pub connections: Arc<AtomicUsize>,
}

impl Recorder {
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    pub fn last(&self) -> Seen {
        self.seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("the upstream saw no request")
    }
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Starts a capturing upstream; returns its address and its record.
pub fn recorder() -> (SocketAddr, Recorder) {
    recorder_with_delay(Duration::ZERO)
}

/// A capturing upstream that waits `delay` before answering.
pub fn recorder_with_delay(delay: Duration) -> (SocketAddr, Recorder) {
    let (l, addr) = bind_local();
    let rec = Recorder::default();
    let r = rec.clone();
    spawn_runtime(move || async move {
        let l = tokio::net::TcpListener::from_std(l).unwrap();
        loop {
            let (s, _) = l.accept().await.unwrap();
            r.connections.fetch_add(1, Ordering::SeqCst);
            let r = r.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let r = r.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await.unwrap().to_bytes();
                        r.seen.lock().unwrap().push(Seen {
                            method: parts.method,
                            uri: parts.uri.to_string(),
                            version: parts.version,
                            headers: parts.headers,
                            body,
                        });
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        let mut resp = Response::new(Full::new(Bytes::from_static(b"recorded")));
                        resp.headers_mut()
                            .insert("x-upstream", "recorder".parse().unwrap());
                        resp.headers_mut()
                            .insert("keep-alive", "timeout=5".parse().unwrap());
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    (addr, rec)
}

/// An HTTP/1.1 upstream on its own thread that answers every request with
/// `handler` (keep-alive; each connection served in its own task).
pub fn upstream_fn<F, Fut, E>(handler: F) -> SocketAddr
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<Response<Full<Bytes>>, E>> + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
{
    let (l, addr) = bind_local();
    spawn_runtime(move || async move {
        let l = tokio::net::TcpListener::from_std(l).unwrap();
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                loop {
                    let (s, _) = l.accept().await.unwrap();
                    let handler = handler.clone();
                    tokio::task::spawn_local(async move {
                        let svc = hyper::service::service_fn(handler);
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                            .await;
                    });
                }
            })
            .await;
    });
    addr
}

/// An address nothing listens on, held so until dropped: a socket bound
/// there that never listens, so a connection is refused and no other
/// socket can take the port meanwhile (a port bound then closed can be
/// another test's listener by the time it is dialled).
pub struct DeadAddr(socket2::Socket);

impl DeadAddr {
    pub fn addr(&self) -> SocketAddr {
        self.0.local_addr().unwrap().as_socket().unwrap()
    }
}

impl std::fmt::Display for DeadAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.addr().fmt(f)
    }
}

pub fn dead_addr() -> DeadAddr {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    s.bind(&any.into()).unwrap();
    DeadAddr(s)
}

/// A minimal keyless API definition, as a Tyk user writes one.
pub fn api_json(api_id: &str, listen_path: &str, target: &str, strip: bool, mw: Value) -> Value {
    let mut v = json!({
        "name": api_id,
        "api_id": api_id,
        "org_id": "default",
        "active": true,
        "use_keyless": true,
        "proxy": {
            "listen_path": listen_path,
            "target_url": target,
            "strip_listen_path": strip
        }
    });
    if !mw.is_null() {
        v["custom_middleware"] = mw;
    }
    v
}

/// Writes a definition as `dir/name.json`.
pub fn write_api(dir: &Path, name: &str, v: &Value) {
    std::fs::write(
        dir.join(format!("{name}.json")),
        serde_json::to_vec_pretty(v).unwrap(),
    )
    .unwrap();
}

/// A gateway running in-process on its own threads.
pub struct TestGateway {
    pub addr: SocketAddr,
    pub load_errors: Vec<LoadError>,
    pub load_warnings: Vec<LoadError>,
    pub stats: Stats,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl TestGateway {
    /// Signals shutdown and waits for the gateway to drain and exit.
    pub fn stop(mut self) {
        self.shutdown();
    }
    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap().unwrap();
        }
    }
    /// Starts shutdown without waiting; `join` waits.
    pub fn begin_stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
    pub fn join(mut self) {
        self.shutdown();
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// Starts a gateway on 127.0.0.1:0 over the definitions in `dir`.
pub fn start_gateway(dir: &Path) -> TestGateway {
    start_gateway_with(GatewayConfig {
        apis_dir: dir.to_path_buf(),
        threads: 2,
        ..GatewayConfig::default()
    })
}

/// Starts a gateway with a full configuration.
pub fn start_gateway_with(config: GatewayConfig) -> TestGateway {
    start_gateway_on(Gateway::bind("127.0.0.1:0".parse().unwrap(), config).unwrap())
}

/// Listeners on 127.0.0.1:0 held for a gateway not built yet, for a
/// definition that must name the gateway's own port (freeing a port and
/// binding it again later races every other test's sockets).
pub fn hold_port(threads: usize) -> Listeners {
    Listeners::bind("127.0.0.1:0".parse().unwrap(), threads).unwrap()
}

/// Starts a gateway on listeners from [`hold_port`].
pub fn start_gateway_held(listeners: Listeners, config: GatewayConfig) -> TestGateway {
    start_gateway_on(Gateway::with_listeners(listeners, config).unwrap())
}

fn start_gateway_on(gw: Gateway) -> TestGateway {
    let addr = gw.local_addr();
    let load_errors = gw.load_errors().to_vec();
    let load_warnings = gw.load_warnings().to_vec();
    let stats = gw.stats();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        gw.run(async move {
            let _ = rx.await;
        })
    });
    TestGateway {
        addr,
        load_errors,
        load_warnings,
        stats,
        stop: Some(tx),
        thread: Some(thread),
    }
}

/// A response as the client saw it.
#[derive(Debug)]
pub struct Got {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Got {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request over a fresh HTTP/1.1 connection.
pub fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Got {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(Bytes::copy_from_slice(body))).unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(30), sender.send_request(req))
            .await
            .expect("no response within 30 s")
            .unwrap();
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Got {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    })
}

/// `GET path` with no extra headers.
pub fn get(addr: SocketAddr, path: &str) -> Got {
    send(addr, "GET", path, &[], b"")
}

/// Writes raw bytes on a fresh connection and reads until the server closes.
pub fn raw(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// Spawns `cmd` (the gateway binary, with its arguments) with stdout piped,
/// and reads the address it serves from its first stdout line, `gateway
/// listening on ADDR`.
pub fn spawn_listening(
    cmd: &mut std::process::Command,
) -> (std::process::Child, std::net::SocketAddr) {
    use std::io::BufRead;
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("gateway listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();
    (child, addr)
}

/// Runs the real binary over `dir` with `--listen listen`; returns its child
/// and address (from its startup line). stderr goes to `log`.
pub fn spawn_binary(
    dir: &Path,
    listen: &str,
    log: &Path,
) -> (std::process::Child, std::net::SocketAddr) {
    spawn_binary_with(dir, listen, log, &["--threads", "2"])
}

/// [`spawn_binary`] with `args` (and no `--threads 2`).
pub fn spawn_binary_with(
    dir: &Path,
    listen: &str,
    log: &Path,
    args: &[&str],
) -> (std::process::Child, std::net::SocketAddr) {
    spawn_listening(
        dies_with_test(&mut std::process::Command::new(env!(
            "CARGO_BIN_EXE_gateway"
        )))
        .args(["--apis", dir.to_str().unwrap(), "--listen", listen])
        .args(args)
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(log).unwrap()),
    )
}

/// Stops the binary with SIGTERM; it must exit cleanly.
pub fn stop_binary(mut child: std::process::Child) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert!(child.wait().unwrap().success());
}

/// Makes the process `cmd` starts die with this test: the kernel sends it
/// SIGKILL when the thread that spawned it exits (Linux `PR_SET_PDEATHSIG`),
/// which a test's thread does when the test ends, panics, or the whole test
/// binary is killed (`kill -9`, a cancelled `cargo test`). Without it a
/// gateway or mock started by a killed test lives on, holding its port.
/// Each test spawns, and waits for, its children on its own thread.
pub fn dies_with_test(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe; the closure touches
    // nothing but the copied pid.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The test may have died between fork and prctl: then no signal
            // will ever come, so do not start at all.
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("the test process is gone"));
            }
            Ok(())
        });
    }
    cmd
}

/// Threads of process `pid` whose name starts with `prefix`
/// (`/proc/PID/task/*/comm`; 0 once the process is gone).
pub fn threads_named(pid: u32, prefix: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.starts_with(prefix))
                })
                .count()
        })
        .unwrap_or(0)
}

/// `(api_id, kind) -> count` of the middleware failures `GET /tyk/stats`
/// reports, as loadgen's reader (the bench's own code) reads them.
pub fn error_counts(control: &loadgen::bench::probe::Control) -> BTreeMap<(String, String), u64> {
    let body = control.stats_body().expect("loadgen reads /tyk/stats");
    body.errors
        .into_iter()
        .map(|e| ((e.api_id, e.kind), e.count))
        .collect()
}
