//! `gateway`: serves the Tyk API definitions in a directory.
//!
//! To try this: 1. `cargo build --release` 2. `target/release/mock-upstream &`
//! 3. `target/release/gateway` 4. `curl -s localhost:8091/plain/hello/`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use gateway::config::JsEngine;
use gateway::server::{Gateway, GatewayConfig};

#[derive(Parser)]
#[command(
    version,
    about = "A Tyk-compatible gateway running custom middleware natively or in a JS VM"
)]
struct Args {
    /// Directory of Tyk API definitions (*.json)
    #[arg(long, default_value = "apis")]
    apis: PathBuf,
    /// Address to listen on: HOST:PORT (a name is resolved), or a port alone for 127.0.0.1:PORT
    #[arg(long, default_value = "127.0.0.1:8091", value_parser = parse_listen)]
    listen: SocketAddr,
    /// Worker threads, each with its own listener, upstream pool and JS contexts [default: one per core]
    #[arg(long)]
    threads: Option<usize>,
    /// Pin worker i to the i-th CPU the process may use, with its JS VM threads, when an API runs JS on VM threads (auto), or leave placement to the kernel (off)
    #[arg(long, default_value = "auto", value_parser = ["auto", "off"])]
    cpu_affinity: String,
    /// Longest a JS middleware call may run before the request gets 500 (Tyk's jsvm_timeout)
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    jsvm_timeout: Duration,
    /// JS VM threads per worker and API (at most 256; each builds its own JS context at its first call, ~0.9 MiB with boa); 0 runs scripts inline on the I/O thread (no isolation)
    #[arg(long, default_value_t = 1, value_parser = parse_jsvm_threads)]
    jsvm_threads: usize,
    /// No longer used: the I/O thread never blocks for a VM thread's answer (calls queue on the thread and are awaited). Accepted, with a warning, so that existing command lines still start
    #[arg(long, hide = true, value_parser = parse_wait)]
    jsvm_wait: Option<Duration>,
    /// QuickJS: how long one call may run inline on the I/O thread; the first call past it moves its API to VM threads on that worker (and runs again there); 0 starts every QuickJS API on VM threads
    #[arg(long, default_value = "1ms", value_parser = parse_wait)]
    jsvm_inline_budget: Duration,
    /// JS strategy of APIs whose custom_middleware.strategy is unset: persistent (state kept across requests), tyk-json (Tyk's JSON marshalling, state kept) or fresh (Tyk's: fresh state per request)
    #[arg(long, default_value = "persistent", value_parser = parse_strategy)]
    jsvm_strategy: gateway::js::Strategy,
    /// JS engine for APIs whose definition sets no custom_middleware.engine: boa or quickjs
    #[arg(long, default_value = "boa", value_parser = parse_engine)]
    jsvm_engine: JsEngine,
    /// Heap limit of one JS context (per API and worker), e.g. 64MiB; a call that allocates past it gets 500 (QuickJS: at the allocation; boa: at its next slice), and a boa context that keeps more than it after a call is rebuilt
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    jsvm_memory: usize,
    /// Longest a WebAssembly middleware call may run before the request gets 500
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    wasm_timeout: Duration,
    /// Most memory one WebAssembly instance may grow to, its linear memories and tables together (KiB, MiB, GiB)
    #[arg(long, default_value = "64MiB", value_parser = gateway::wasm::parse_memory_size)]
    wasm_memory: usize,
    /// Longest to wait for the upstream's response head before answering 504
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    upstream_timeout: Duration,
    /// Longest wait between two reads of the upstream's response body; the response is cut short after (nginx's proxy_read_timeout)
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    upstream_read_timeout: Duration,
    /// Idle keep-alive connections kept per upstream per worker thread; more are closed (nginx's upstream keepalive)
    #[arg(long, default_value_t = 64)]
    upstream_keepalive: usize,
    /// How long an idle upstream connection is kept (nginx's upstream keepalive_timeout)
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    upstream_keepalive_timeout: Duration,
    /// Longest a client may take to send a request head, counted from the connection's accept for the first and from its first byte for later ones (nginx's client_header_timeout)
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    client_header_timeout: Duration,
    /// How long a keep-alive client connection may stay idle between requests before it is closed (nginx's keepalive_timeout)
    #[arg(long, default_value = "75s", value_parser = parse_duration)]
    client_keepalive_timeout: Duration,
    /// Longest wait between two reads of a request body before answering 408 (nginx's client_body_timeout)
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    client_body_timeout: Duration,
    /// Most bytes of bodies held whole for middleware at once (request bodies, and upstream bodies for response middleware until the client has them), all workers together (each body may have 32 MiB); a body that would pass it gets 503. 0: no bound
    #[arg(long, default_value = "1GiB", value_parser = parse_bound)]
    max_buffered_bodies: usize,
    /// Longest a client may leave a response unread (no byte taken) before its connection is closed (nginx's send_timeout)
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    client_send_timeout: Duration,
    /// Who serves client HTTP/1: the gateway's own code for the common requests (hyper takes a connection over at its first other request), or hyper for all
    #[arg(long, value_enum, default_value = "own")]
    client_http1: gateway::server::ClientHttp1,
    /// How long shutdown (SIGTERM, SIGINT, SIGQUIT) waits for in-flight requests before closing what is left
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    shutdown_grace: Duration,
    /// Most log lines a second from each source of per-request failures (one API's middleware on one worker, one worker's proxy failures, a refused client request, a stale-connection retry); the next line let through says how many were left out. 0: no bound
    #[arg(long, default_value_t = gateway::lograte::DEFAULT_PER_SECOND)]
    log_rate: u32,
    /// Secret for the /tyk/ control API (X-Tyk-Authorization); the API is off without one
    #[arg(long, env = "GATEWAY_SECRET", hide_env_values = true)]
    secret: Option<String>,
}

/// Parses `--listen`: `18099` (loopback, as the default is), `127.0.0.1:18099`,
/// `[::1]:18099`, or `localhost:18099` (resolved; IPv4 first, as the
/// upstream resolver prefers).
fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if !s.contains(':') {
        return Err(format!(
            "{s:?} is not a port or HOST:PORT (e.g. 8091, 127.0.0.1:8091, localhost:8091)"
        ));
    }
    let mut addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(s)
        .map_err(|e| format!("cannot resolve {s:?}: {e}"))?
        .collect();
    addrs.sort_by_key(|a| a.is_ipv6());
    addrs
        .into_iter()
        .next()
        .ok_or_else(|| format!("{s:?} resolves to no address"))
}

/// Most `--jsvm-threads`: each thread builds its own context at its first
/// call (~0.9 MiB with boa), for every JS API on every worker, so
/// `--jsvm-threads 100000` could ask for ~90 GB per API and worker under
/// load, and was taken.
const MAX_JSVM_THREADS: usize = 256;

fn parse_jsvm_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n <= MAX_JSVM_THREADS => Ok(n),
        _ => Err(format!(
            "{s:?} is not a count of VM threads from 0 to {MAX_JSVM_THREADS} (each builds a JS context per API and worker, ~0.9 MiB with boa)"
        )),
    }
}

fn parse_strategy(s: &str) -> Result<gateway::js::Strategy, String> {
    gateway::js::Strategy::parse(s)
}

/// Parses `5s`, `250ms`, `2m` or a bare number of seconds.
/// `--jsvm-wait`: microseconds or milliseconds, 0 allowed.
fn parse_wait(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let (num, scale) = if let Some(n) = t.strip_suffix("us").or_else(|| t.strip_suffix("µs")) {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else {
        return Err(format!("{s:?} is not a wait like 200us, 1ms or 0"));
    };
    match num.parse::<f64>() {
        Ok(n) if n.is_finite() && (0.0..=1000.0).contains(&(n * scale * 1e3)) => {
            Ok(Duration::from_secs_f64(n * scale))
        }
        _ => Err(format!("{s:?} is not a wait between 0 and 1s like 200us")),
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or((s, "s"), |i| (&s[..i], &s[i..]));
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 5s or 250ms"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("{s:?}: unit must be ms, s or m")),
    };
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("{s:?} must be a positive duration"));
    }
    // `from_secs_f64` panics past u64 seconds, and a deadline past what an
    // `Instant` can hold would panic when added to now: a year is plenty.
    if secs > MAX_DURATION_SECS {
        return Err(format!("{s:?} is longer than a year"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The longest duration a flag takes: 365 days.
const MAX_DURATION_SECS: f64 = 365.0 * 24.0 * 3600.0;

fn parse_engine(s: &str) -> Result<JsEngine, String> {
    JsEngine::parse(s).ok_or_else(|| format!("{s:?} is not a JS engine; use boa or quickjs"))
}

/// Parses `64MiB`, `512KiB`, `1GiB` or a bare number of bytes.
fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: usize = s[..split]
        .parse()
        .map_err(|_| format!("{s:?} is not a size like 64MiB"))?;
    let unit = match &s[split..] {
        "" | "B" => 1,
        "KiB" | "K" | "KB" => 1 << 10,
        "MiB" | "M" | "MB" => 1 << 20,
        "GiB" | "G" | "GB" => 1 << 30,
        other => return Err(format!("{s:?}: unit {other:?} must be KiB, MiB or GiB")),
    };
    match n.checked_mul(unit) {
        Some(bytes) if bytes >= 1 << 20 => Ok(bytes),
        _ => Err(format!("{s:?} must be at least 1MiB")),
    }
}

/// [`parse_size`], or `0` for no bound.
fn parse_bound(s: &str) -> Result<usize, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    parse_size(s)
}

/// Log lines waiting for stderr before new ones are dropped (a few MB).
const LOG_LINES_BUFFERED: usize = 16_384;

/// The log's writer: [`tracing_appender`]'s queue to the `gw-log` thread,
/// which drops a line when [`LOG_LINES_BUFFERED`] are waiting. The first
/// line that gets through after some were dropped carries, ahead of it, a
/// line saying how many, so a log read later still accounts for every line
/// (as `--log-rate`'s "like lines left out" does). Two atomic loads per
/// line.
struct LogWriter {
    queue: tracing_appender::non_blocking::NonBlocking,
    dropped: tracing_appender::non_blocking::ErrorCounter,
    /// Dropped lines already said.
    said: std::sync::atomic::AtomicUsize,
}

impl LogWriter {
    fn new(queue: tracing_appender::non_blocking::NonBlocking) -> Self {
        let dropped = queue.error_counter();
        Self {
            queue,
            dropped,
            said: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

/// One log line on its way to the queue (tracing's formatter writes each
/// line with one `write_all`).
struct LogLine<'a> {
    queue: tracing_appender::non_blocking::NonBlocking,
    log: &'a LogWriter,
}

impl std::io::Write for LogLine<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }

    fn write_all(&mut self, line: &[u8]) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let dropped = self.log.dropped.dropped_lines();
        let said = self.log.said.load(Relaxed);
        if dropped <= said {
            return self.queue.write_all(line);
        }
        // The count and the line go as one message: both reach stderr, or
        // neither does and the count grows by this line.
        let mut both = format!(
            "gateway: {} log lines dropped before this one: stderr was not taking them \
             ({LOG_LINES_BUFFERED} were waiting)\n",
            dropped - said
        )
        .into_bytes();
        both.extend_from_slice(line);
        self.queue.write_all(&both)?;
        if self.log.dropped.dropped_lines() == dropped {
            let _ = self
                .log
                .said
                .compare_exchange(said, dropped, Relaxed, Relaxed);
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.queue.flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LogLine {
            queue: self.queue.clone(),
            log: self,
        }
    }
}

fn main() -> std::process::ExitCode {
    // Before any thread starts (the log writer's is the first): threads
    // that share a malloc arena contend on its lock (`arenas.rs`).
    let arenas = gateway::arenas::spread();
    // Lines are written to stderr by a thread of their own, and dropped
    // when LOG_LINES_BUFFERED are already waiting: a stderr nobody reads (a
    // pipe whose reader stopped, a parent that never drains it) used to
    // block each worker at its next log line, inside its event loop, so the
    // worker answered nothing more, not even /hello, and shutdown waited for
    // it for ever. The guard flushes what is queued at exit (for at most
    // about a second). Dropped lines are counted and said (LogWriter).
    let (log_writer, _log_guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LOG_LINES_BUFFERED)
        .thread_name("gw-log")
        .finish(std::io::stderr());
    let log_writer = LogWriter::new(log_writer);
    // An unset RUST_LOG means info; one that does not parse means info
    // too, but is said (it was dropped without a word).
    let (filter, bad_filter) = match std::env::var("RUST_LOG") {
        Ok(v) => match tracing_subscriber::EnvFilter::try_new(&v) {
            Ok(f) => (f, None),
            Err(e) => (tracing_subscriber::EnvFilter::new("info"), Some((v, e))),
        },
        Err(_) => (tracing_subscriber::EnvFilter::new("info"), None),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(log_writer)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Some((v, e)) = bad_filter {
        tracing::warn!("RUST_LOG={v:?} is not a filter ({e}); logging at info");
    }
    tracing::debug!("malloc arenas: {arenas}");
    let args = Args::parse();
    if let Some(wait) = args.jsvm_wait {
        tracing::warn!(
            "--jsvm-wait {wait:?} has no effect: the I/O thread no longer waits in place for a VM thread's answer (calls queue on the thread and are awaited); drop the flag"
        );
    }
    gateway::lograte::set_per_second(args.log_rate);
    let mut config = GatewayConfig {
        apis_dir: args.apis,
        jsvm_timeout: args.jsvm_timeout,
        jsvm_threads: args.jsvm_threads,
        jsvm_inline_budget: args.jsvm_inline_budget,
        cpu_affinity: args.cpu_affinity == "auto",
        jsvm_strategy: args.jsvm_strategy,
        jsvm_engine: args.jsvm_engine,
        jsvm_memory: args.jsvm_memory,
        wasm: gateway::wasm::WasmLimits {
            timeout: args.wasm_timeout,
            memory: args.wasm_memory,
        },
        upstream_timeout: args.upstream_timeout,
        upstream_read_timeout: args.upstream_read_timeout,
        upstream_keepalive: args.upstream_keepalive,
        upstream_keepalive_timeout: args.upstream_keepalive_timeout,
        client_header_timeout: args.client_header_timeout,
        client_keepalive_timeout: args.client_keepalive_timeout,
        client_send_timeout: args.client_send_timeout,
        client_body_timeout: args.client_body_timeout,
        max_buffered_bodies: args.max_buffered_bodies,
        shutdown_grace: args.shutdown_grace,
        client_http1: args.client_http1,
        secret: args.secret.filter(|s| !s.is_empty()),
        ..GatewayConfig::default()
    };
    if let Some(n) = args.threads {
        config.threads = n.max(1);
    }
    let gw = match Gateway::bind(args.listen, config) {
        Ok(gw) => gw,
        Err(e) => {
            eprintln!("gateway: {e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // One plain line on stdout for scripts and the bench (logs go to stderr).
    // Written, not `println!`: a stdout that takes nothing (a closed pipe,
    // a full disk) panicked the gateway before it served a request. The
    // line is for whoever reads it; serving does not depend on it.
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let written =
            writeln!(out, "gateway listening on {}", gw.local_addr()).and_then(|()| out.flush());
        if let Err(e) = written {
            tracing::warn!("cannot write the listening line to stdout: {e}");
        }
    }
    let shutdown = match shutdown_signals() {
        Ok(first) => first,
        Err(e) => {
            eprintln!("gateway: cannot handle SIGINT and SIGTERM: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match gw.run(shutdown) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gateway: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Resolves at the first SIGINT, SIGTERM or SIGQUIT, which starts the
/// graceful shutdown. A second one while it drains ends the process at once (exit
/// status 1), as a user pressing Ctrl-C again expects: waiting out
/// `--shutdown-grace` (30 s) for a slow upstream used to be the only way
/// short of SIGKILL. (Tyk takes the second signal and ignores it.)
///
/// The signals are watched by a thread of their own, with a runtime of its
/// own, registered before this returns: the gateway's runtimes are busy
/// draining, or blocked, when the second one comes.
fn shutdown_signals() -> std::io::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // SIGQUIT too, as Tyk (`signal.Notify(sigChan, SIGTERM, SIGQUIT,
    // SIGINT)`): it used to kill the gateway on the spot, in-flight
    // requests and all.
    let (mut term, mut int, mut quit) = rt.block_on(async {
        Ok::<_, std::io::Error>((
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
            signal(SignalKind::quit())?,
        ))
    })?;
    let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("gw-signals".into())
        .spawn(move || {
            rt.block_on(async move {
                let mut first = Some(first_tx);
                loop {
                    let name = tokio::select! {
                        _ = term.recv() => "SIGTERM",
                        _ = int.recv() => "SIGINT",
                        _ = quit.recv() => "SIGQUIT",
                    };
                    match first.take() {
                        Some(tx) => {
                            let _ = tx.send(());
                        }
                        None => {
                            tracing::warn!(
                                "{name} again during shutdown: exiting now, without waiting for in-flight requests"
                            );
                            // The log thread gets a moment for that line.
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            std::process::exit(1);
                        }
                    }
                }
            })
        })?;
    Ok(async move {
        // The sender lives as long as the watching thread, which never
        // ends on its own.
        let _ = first_rx.await;
    })
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_listen};
    use std::time::Duration;

    #[test]
    fn listen_takes_a_port_an_address_or_a_host_name() {
        assert_eq!(
            parse_listen("18099").unwrap().to_string(),
            "127.0.0.1:18099"
        );
        assert_eq!(
            parse_listen("0.0.0.0:80").unwrap().to_string(),
            "0.0.0.0:80"
        );
        assert_eq!(parse_listen("[::1]:80").unwrap().to_string(), "[::1]:80");
        let named = parse_listen("localhost:18099").unwrap();
        assert!(named.ip().is_loopback() && named.port() == 18099, "{named}");
        assert!(parse_listen("localhost").unwrap_err().contains("HOST:PORT"));
        assert!(parse_listen("99999").is_err());
    }

    #[test]
    fn durations_parse_like_tyk_users_write_them() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("5h").is_err());
        assert!(parse_duration("0s").is_err());
        // Past u64 seconds (`from_secs_f64` panicked) or an `Instant`.
        assert!(parse_duration("100000000000000000000").is_err());
        assert!(parse_duration("600000m").is_err());
        assert_eq!(
            parse_duration("525600m"),
            Ok(Duration::from_secs(365 * 24 * 3600))
        );
    }

    #[test]
    fn memory_sizes_parse_with_binary_units() {
        assert_eq!(super::parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(super::parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(super::parse_size("2097152"), Ok(2 << 20));
        assert!(super::parse_size("512KiB").is_err());
        assert!(super::parse_size("64XB").is_err());
        assert_eq!(super::parse_bound("0"), Ok(0));
        assert_eq!(super::parse_bound("2GiB"), Ok(2 << 30));
        assert!(super::parse_bound("512").is_err());
    }
}

/// Counts what each thread's JS engine holds, so `--jsvm-memory` bounds
/// boa contexts too (`gateway::heap`).
#[global_allocator]
static ALLOCATOR: gateway::heap::Counting = gateway::heap::Counting;
