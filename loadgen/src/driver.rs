//! The one driver loop: generate -> send -> record, for every work mode.
//!
//! Shape: `threads` OS threads, each with its own single-threaded tokio
//! runtime, its own share of the connections and its own [`Recorder`]
//! (shared-nothing, as wrk does: no lock or atomic on the per-request path but
//! the ticket counter). The calling thread coordinates: it ends the run at
//! the deadline or when the caller's stop future resolves, reports progress,
//! and merges the recorders.
//!
//! Stopping follows mini-redis's `run(listener, shutdown)`: whoever starts a
//! run passes the future that ends it. `loadgen URL` passes Ctrl-C, the bench
//! passes "a child exited or Ctrl-C", tests pass a oneshot receiver. Nothing
//! is handed back up to the caller, and nothing polls.
//!
//! Every request starts by taking a ticket. Tickets are what make the modes
//! one loop: `-n` bounds their number, `-t` stops handing them out at the
//! deadline, and `--rate` turns ticket `i` into an intended send time
//! `start + i / rate`, from which latency is also measured (coordinated
//! omission correction, as wrk2).

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config::RunConfig;
use crate::cpu::{CpuProbe, CpuUsage};
use crate::http1::{Conn, Failure};
use crate::record::Recorder;

/// How close to its intended time a `--rate` request is sent by yielding
/// instead of sleeping: tokio's timer wheel has millisecond granularity, so
/// a plain `sleep_until` would send up to ~1 ms late and charge that to the
/// server.
const SPIN: Duration = Duration::from_micros(1_500);

/// The outcome of a run: merged observations and the measurements around them.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Everything recorded, merged over threads.
    pub rec: Recorder,
    /// Wall time from the first request to the end of the run.
    pub elapsed: Duration,
    /// Body length of the first response (ab's "Document Length").
    pub doc_len: u64,
    /// `Server` header of the first response.
    pub server: Option<String>,
    /// CPU time of each `--cpu-pid` process over the run.
    pub cpu: Vec<CpuUsage>,
    /// loadgen's own CPU time over the run.
    pub own_cpu: Duration,
    /// The caller's stop future ended the run before its work was done.
    pub interrupted: bool,
}

/// Progress of a running run, given to the caller's callback.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Requests that came to an end.
    pub done: u64,
    /// Of which failed.
    pub failed: u64,
    /// Time since the run started.
    pub elapsed: Duration,
}

/// State every thread reads; written only through atomics and once-cells.
struct Shared {
    next_ticket: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    start: Instant,
    max: Option<u64>,
    deadline: Option<Instant>,
    /// Nanoseconds between intended send times, with `--rate`.
    interval_ns: Option<f64>,
    /// Until one connection succeeds, a refused connect means "unreachable"
    /// and ends the run with an error instead of counting n failures.
    ever_connected: AtomicBool,
    fatal: Mutex<Option<String>>,
    /// First response's body length and `Server` header.
    first: OnceLock<(u64, Option<String>)>,
    stop: watch::Sender<bool>,
    /// Mirror of `stop` read on every ticket: a plain atomic load, where
    /// the watch channel would take its lock.
    stopped: AtomicBool,
}

impl Shared {
    fn new(cfg: &RunConfig) -> Shared {
        let start = Instant::now();
        Shared {
            next_ticket: AtomicU64::new(0),
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            start,
            max: cfg.mode.max_requests(),
            // A limit past what an `Instant` can hold (`-t 1e19`) is no
            // deadline at all: the run lasts as long as it can anyway.
            deadline: cfg.mode.time_limit().and_then(|d| start.checked_add(d)),
            interval_ns: cfg.rate.map(|r| 1e9 / r),
            ever_connected: AtomicBool::new(false),
            fatal: Mutex::new(None),
            first: OnceLock::new(),
            stop: watch::channel(false).0,
            stopped: AtomicBool::new(false),
        }
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.stop.send_replace(true);
    }

    fn fail(&self, msg: String) {
        self.fatal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(msg);
        self.stop();
    }

    fn progress(&self) -> Progress {
        Progress {
            done: self.done.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            elapsed: self.start.elapsed(),
        }
    }

    /// The next ticket and its intended send time, or `None` when the run is over.
    fn ticket(&self) -> Option<Option<Instant>> {
        if self.stopped.load(Ordering::Relaxed) {
            return None;
        }
        let t = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        if self.max.is_some_and(|m| t >= m) {
            return None;
        }
        let intended = self
            .interval_ns
            .map(|ns| self.start + Duration::from_nanos((t as f64 * ns) as u64));
        let at = intended.unwrap_or_else(Instant::now);
        if self.deadline.is_some_and(|d| at >= d) {
            return None;
        }
        Some(intended)
    }
}

/// Runs `cfg` until its work is done or `stop` resolves, whichever comes
/// first; the result covers what was done. `progress`, if given, is called
/// about ten times a second and once at the end.
///
/// `stop` is polled once before any request goes out, so a future that
/// installs a signal handler on first poll (`tokio::signal::ctrl_c()`) is in
/// place before the first request: an early Ctrl-C still yields a report.
pub fn run(
    cfg: &RunConfig,
    stop: impl Future<Output = ()>,
    mut progress: Option<&mut dyn FnMut(Progress)>,
) -> anyhow::Result<RunResult> {
    let coordinator = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut stop = std::pin::pin!(stop);
    // Phase 1: arm the caller's stop before anything starts.
    let stopped_early = coordinator.block_on(async {
        tokio::select! {
            biased;
            _ = &mut stop => true,
            _ = std::future::ready(()) => false,
        }
    });
    let cfg = Arc::new(cfg.clone());
    let probe = CpuProbe::start(&cfg.cpu_pids);
    let shared = Arc::new(Shared::new(&cfg));
    if stopped_early {
        shared.stop();
    }
    // Phase 2: the load threads.
    let (handles, finished_rx) = spawn_workers(&shared, &cfg)?;
    // Phase 3: wait for the end (work done, deadline, or the caller's stop).
    let interrupted = coordinator.block_on(coordinate(
        &shared,
        finished_rx,
        stop,
        stopped_early,
        &mut progress,
    ));
    // Phase 4: merge what the threads saw.
    let elapsed = shared.start.elapsed();
    let mut rec = Recorder::default();
    for h in handles {
        let part = h
            .join()
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))?;
        rec.merge(&part);
    }
    let (cpu, own_cpu) = probe.finish();
    if let Some(p) = progress.as_mut() {
        p(shared.progress());
    }
    if let Some(msg) = shared
        .fatal
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        anyhow::bail!(msg);
    }
    let (doc_len, server) = shared.first.get().cloned().unwrap_or((0, None));
    Ok(RunResult {
        rec,
        elapsed,
        doc_len,
        server,
        cpu,
        own_cpu,
        interrupted,
    })
}

/// Starts the load threads. Each gets concurrency/threads connections (the
/// remainder spread over the first ones); a thread with none is not started.
/// The receiver yields `None` once every thread has ended.
#[allow(clippy::type_complexity)]
fn spawn_workers(
    shared: &Arc<Shared>,
    cfg: &Arc<RunConfig>,
) -> anyhow::Result<(Vec<JoinHandle<Recorder>>, tokio::sync::mpsc::Receiver<()>)> {
    let threads = cfg.threads.clamp(1, cfg.concurrency.max(1));
    let (finished_tx, finished_rx) = tokio::sync::mpsc::channel::<()>(1);
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        let conns = cfg.concurrency / threads + usize::from(i < cfg.concurrency % threads);
        let (shared, cfg) = (shared.clone(), cfg.clone());
        // Dropped when the thread ends: the coordinator learns that all
        // threads are done when every sender is gone.
        let finished = finished_tx.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("loadgen-{i}"))
                .spawn(move || {
                    let rec = worker_thread(shared, cfg, conns);
                    drop(finished);
                    rec
                })?,
        );
    }
    Ok((handles, finished_rx))
}

/// Waits until every thread is done, stopping them at the deadline or when
/// `stop` resolves (`stop_done`: it already has, and must not be polled
/// again). Returns whether `stop` ended the run.
async fn coordinate(
    shared: &Shared,
    mut finished_rx: tokio::sync::mpsc::Receiver<()>,
    mut stop: std::pin::Pin<&mut impl Future<Output = ()>>,
    stop_done: bool,
    progress: &mut Option<&mut dyn FnMut(Progress)>,
) -> bool {
    let deadline = shared.deadline.map(tokio::time::Instant::from_std);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let (mut interrupted, mut deadline_hit, mut stop_done) = (stop_done, false, stop_done);
    loop {
        tokio::select! {
            _ = finished_rx.recv() => break,
            _ = async { tokio::time::sleep_until(deadline.unwrap()).await }, if deadline.is_some() && !deadline_hit => {
                deadline_hit = true;
                shared.stop();
            }
            _ = &mut stop, if !stop_done => {
                stop_done = true;
                // A run that is already over (work done or deadline) was not interrupted.
                interrupted = !shared.stopped.load(Ordering::Relaxed);
                shared.stop();
            }
            _ = tick.tick() => {
                if let Some(p) = progress.as_mut() {
                    p(shared.progress());
                }
            }
        }
    }
    interrupted
}

/// One load thread: its connections share its recorder through an `Rc`,
/// which is sound because a current-thread runtime never moves them.
fn worker_thread(shared: Arc<Shared>, cfg: Arc<RunConfig>, conns: usize) -> Recorder {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            shared.fail(format!("cannot start a load thread: {e}"));
            return Recorder::default();
        }
    };
    let mut stop_rx = shared.stop.subscribe();
    let rec = Rc::new(RefCell::new(Recorder::default()));
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let tasks: Vec<_> = (0..conns)
            .map(|_| tokio::task::spawn_local(client(shared.clone(), cfg.clone(), rec.clone())))
            .collect();
        let all = async {
            for t in tasks {
                // `client` contains the exchange's panics (see `caught`); a
                // panic anywhere else in it must not pass for a clean run.
                if let Err(e) = t.await {
                    if e.is_panic() {
                        shared.fail(format!(
                            "a connection task panicked (a loadgen bug): {}",
                            panic_message(e.into_panic().as_ref())
                        ));
                    }
                }
            }
        };
        // On stop, in-flight requests are dropped with the LocalSet below.
        tokio::select! {
            _ = all => {}
            _ = stop_rx.wait_for(|s| *s) => {}
        }
    });
    drop(local);
    rec.take()
}

/// Waits until `at`: sleeps while it is far, then yields to the other
/// connections of this thread until it is reached, so that the request goes
/// out within a few µs of its intended time instead of a timer tick late.
async fn wait_until(at: Instant) {
    if let Some(early) = at.checked_sub(SPIN) {
        if early > Instant::now() {
            tokio::time::sleep_until(early.into()).await;
        }
    }
    while Instant::now() < at {
        tokio::task::yield_now().await;
    }
}

/// A future whose panic is returned as an error instead of unwinding
/// through the runtime, which would end the connection's task and, with it,
/// the request's count: a bug in reading one response (a hostile server
/// found some) must cost that request, counted as an exception, not the run.
struct Caught<'a, F>(std::pin::Pin<&'a mut F>);

impl<F: Future> Future for Caught<'_, F> {
    type Output = Result<F::Output, String>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let fut = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(p) => p.map(Ok),
            Err(payload) => std::task::Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

/// Runs `fut`, turning a panic inside it into [`Failure::Exception`]. The
/// future must not be polled again after a panic: it is dropped here.
async fn caught<T>(fut: impl Future<Output = Result<T, Failure>>) -> Result<T, Failure> {
    let mut fut = std::pin::pin!(fut);
    match Caught(fut.as_mut()).await {
        Ok(r) => r,
        Err(msg) => Err(Failure::Exception(format!(
            "loadgen panicked reading the response (a bug): {msg}"
        ))),
    }
}

/// The text of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The error for a connect that failed because loadgen ran out of file
/// descriptors: that is the open-files limit, not the target.
fn fd_limit_message(cfg: &RunConfig, e: &std::io::Error) -> Option<String> {
    if !matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
        return None;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    let limit = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        format!("{} (hard limit {})", lim.rlim_cur, lim.rlim_max)
    } else {
        "unknown".into()
    };
    let whose = if e.raw_os_error() == Some(libc::ENFILE) {
        "the system's open-files table is full"
    } else {
        "loadgen reached its open-files limit"
    };
    Some(format!(
        "cannot open a connection to {}: {e}: {whose}; -c {} needs one descriptor per connection \
         and the limit (ulimit -n) is {limit}: raise it (e.g. ulimit -n {}) or lower -c",
        cfg.target.addr,
        cfg.concurrency,
        cfg.concurrency + 64
    ))
}

/// One connection's loop: take a ticket, wait for its time, exchange, record.
async fn client(shared: Arc<Shared>, cfg: Arc<RunConfig>, rec: Rc<RefCell<Recorder>>) {
    let mut conn = Conn::default();
    while let Some(intended) = shared.ticket() {
        if let Some(at) = intended {
            wait_until(at).await;
        }
        let want_server = shared.first.get().is_none();
        let outcome =
            tokio::time::timeout(cfg.timeout, caught(conn.exchange(&cfg, want_server))).await;
        let mut failed = true;
        match outcome {
            Err(_) => {
                conn.reset();
                let f = Failure::Exception(format!("timeout after {:?}", cfg.timeout));
                crate::verbose::failure(cfg.verbosity, &f);
                rec.borrow_mut().failure(&f);
            }
            // Running out of descriptors is never the target's fault, and
            // every connection after it would fail the same way.
            Ok(Err(Failure::Connect(e))) if fd_limit_message(&cfg, &e).is_some() => {
                shared.fail(fd_limit_message(&cfg, &e).unwrap_or_default());
                return;
            }
            Ok(Err(Failure::Connect(e))) if !shared.ever_connected.load(Ordering::Relaxed) => {
                shared.fail(format!("cannot connect to {}: {e}", cfg.target.addr));
                return;
            }
            Ok(Err(f)) => {
                if !matches!(f, Failure::Connect(_)) {
                    shared.ever_connected.store(true, Ordering::Relaxed);
                }
                crate::verbose::failure(cfg.verbosity, &f);
                rec.borrow_mut().failure(&f);
            }
            Ok(Ok((timing, resp))) => {
                shared.ever_connected.store(true, Ordering::Relaxed);
                crate::verbose::response(cfg.verbosity, &resp);
                let (doc_len, _) = shared
                    .first
                    .get_or_init(|| (resp.body_len, resp.server.clone()));
                let reasons = cfg.expect.check(resp.status, &conn.body);
                let mut r = rec.borrow_mut();
                let before = r.failures.total();
                let doc_len = (!cfg.expect.variable_length).then_some(*doc_len);
                r.response(&timing, &resp, doc_len, reasons, intended);
                failed = r.failures.total() > before;
            }
        }
        if failed {
            shared.failed.fetch_add(1, Ordering::Relaxed);
        }
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_an_exchange_is_an_exception_not_a_lost_task() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // Polled once pending, then panics: as a response reader would.
        let mut polls = 0;
        let exchange = std::future::poll_fn(|cx| {
            polls += 1;
            if polls == 1 {
                cx.waker().wake_by_ref();
                return std::task::Poll::Pending;
            }
            let v: Vec<u8> = Vec::new();
            let at = v.len() + 1;
            std::task::Poll::Ready(Ok::<u8, Failure>(v[at]))
        });
        match rt.block_on(caught(exchange)) {
            Err(Failure::Exception(m)) => {
                assert!(
                    m.contains("panicked") && m.contains("index out of bounds"),
                    "{m}"
                )
            }
            other => panic!(
                "not an exception: {:?}",
                other.map_err(|e| format!("{e:?}"))
            ),
        }
        // An exchange that does not panic is passed through as it ends.
        assert!(matches!(
            rt.block_on(caught(async { Ok::<u8, Failure>(7) })),
            Ok(7)
        ));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(matches!(
            rt.block_on(caught(async { Err::<u8, _>(Failure::Connect(refused)) })),
            Err(Failure::Connect(_))
        ));
    }
}
