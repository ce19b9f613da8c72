//! The one driver loop: generate -> send -> record, for every work mode.
//!
//! Shape: `threads` OS threads, each with its own single-threaded tokio
//! runtime, its own share of the connections and its own [`Recorder`]
//! (shared-nothing, as wrk does: no lock or atomic on the per-request path but
//! the ticket counter). The calling thread coordinates: it ends the run at
//! the deadline or on Ctrl-C, reports progress, and merges the recorders.
//!
//! Every request starts by taking a ticket. Tickets are what make the modes
//! one loop: `-n` bounds their number, `-t` stops handing them out at the
//! deadline, and `--rate` turns ticket `i` into an intended send time
//! `start + i / rate`, from which latency is also measured (coordinated
//! omission correction, as wrk2).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use crate::config::RunConfig;
use crate::cpu::{CpuProbe, CpuUsage};
use crate::http1::{Conn, Failure};
use crate::record::Recorder;

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
    /// The run was cut short by Ctrl-C (or [`StopHandle::stop`]).
    pub interrupted: bool,
}

/// Ends a running run from elsewhere, as Ctrl-C does.
#[derive(Clone)]
pub struct StopHandle(Arc<Shared>);

impl StopHandle {
    /// Asks the run to stop; in-flight requests are abandoned, not counted.
    pub fn stop(&self) {
        self.0.stop();
    }
}

/// State every thread reads; written only through atomics and once-cells.
struct Shared {
    next_ticket: AtomicU64,
    done: AtomicU64,
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
    stop: Arc<watch::Sender<bool>>,
    /// Mirror of `stop` read on every ticket: a plain atomic load, where
    /// the watch channel would take its lock.
    stopped: AtomicBool,
}

impl Shared {
    fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.stop.send_replace(true);
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

/// Runs `cfg` to completion. With `ctrl_c`, Ctrl-C ends the run early and the
/// result covers what was done. `progress` is called with the number of
/// requests done about ten times a second.
pub fn run(
    cfg: &RunConfig,
    ctrl_c: bool,
    progress: Option<&mut dyn FnMut(u64)>,
) -> anyhow::Result<RunResult> {
    run_with(cfg, ctrl_c, progress, None)
}

/// As [`run`], handing a [`StopHandle`] to `on_start` before requests begin.
pub fn run_with(
    cfg: &RunConfig,
    ctrl_c: bool,
    mut progress: Option<&mut dyn FnMut(u64)>,
    on_start: Option<&mut dyn FnMut(StopHandle)>,
) -> anyhow::Result<RunResult> {
    let coordinator = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    // Installed before any request goes out, so an early Ctrl-C is never
    // the default "kill the process" and always yields a report.
    let mut sigint = if ctrl_c {
        let _guard = coordinator.enter();
        Some(signal(SignalKind::interrupt())?)
    } else {
        None
    };
    let cfg = Arc::new(cfg.clone());
    let probe = CpuProbe::start(&cfg.cpu_pids);
    let start = Instant::now();
    let shared = Arc::new(Shared {
        next_ticket: AtomicU64::new(0),
        done: AtomicU64::new(0),
        start,
        max: cfg.mode.max_requests(),
        deadline: cfg.mode.time_limit().map(|d| start + d),
        interval_ns: cfg.rate.map(|r| 1e9 / r),
        ever_connected: AtomicBool::new(false),
        fatal: Mutex::new(None),
        first: OnceLock::new(),
        stop: stop_tx.clone(),
        stopped: AtomicBool::new(false),
    });
    if let Some(f) = on_start {
        f(StopHandle(shared.clone()));
    }

    // Each thread gets concurrency/threads connections (the remainder spread
    // over the first ones); a thread with none is not started.
    let threads = cfg.threads.clamp(1, cfg.concurrency.max(1));
    let (finished_tx, mut finished_rx) = tokio::sync::mpsc::channel::<()>(1);
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        let conns = cfg.concurrency / threads + usize::from(i < cfg.concurrency % threads);
        let (shared, cfg, stop_rx) = (shared.clone(), cfg.clone(), stop_rx.clone());
        // Dropped when the thread ends: the coordinator learns that all
        // threads are done when every sender is gone.
        let finished = finished_tx.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("loadgen-{i}"))
                .spawn(move || {
                    let rec = worker_thread(shared, cfg, conns, stop_rx);
                    drop(finished);
                    rec
                })?,
        );
    }
    drop(finished_tx);

    let mut interrupted = false;
    let mut deadline_hit = false;
    coordinator.block_on(async {
        let deadline = shared.deadline.map(tokio::time::Instant::from_std);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = finished_rx.recv() => break,
                _ = async { tokio::time::sleep_until(deadline.unwrap()).await }, if deadline.is_some() && !deadline_hit => {
                    deadline_hit = true;
                    shared.stop();
                }
                _ = async { sigint.as_mut().unwrap().recv().await }, if sigint.is_some() && !interrupted => {
                    interrupted = true;
                    shared.stop();
                }
                _ = tick.tick() => {
                    if let Some(p) = progress.as_mut() {
                        p(shared.done.load(Ordering::Relaxed));
                    }
                }
            }
        }
    });
    let elapsed = start.elapsed();
    let mut rec = Recorder::default();
    for h in handles {
        let part = h
            .join()
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))?;
        rec.merge(&part);
    }
    let (cpu, own_cpu) = probe.finish();
    if let Some(p) = progress.as_mut() {
        p(shared.done.load(Ordering::Relaxed));
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
        interrupted: interrupted || (*stop_rx.borrow() && !deadline_hit),
    })
}

/// One load thread: its connections share its recorder through an `Rc`,
/// which is sound because a current-thread runtime never moves them.
fn worker_thread(
    shared: Arc<Shared>,
    cfg: Arc<RunConfig>,
    conns: usize,
    mut stop_rx: watch::Receiver<bool>,
) -> Recorder {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            *shared.fatal.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(format!("cannot start a load thread: {e}"));
            shared.stop();
            return Recorder::default();
        }
    };
    let rec = Rc::new(RefCell::new(Recorder::default()));
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let tasks: Vec<_> = (0..conns)
            .map(|_| tokio::task::spawn_local(client(shared.clone(), cfg.clone(), rec.clone())))
            .collect();
        let all = async {
            for t in tasks {
                let _ = t.await;
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

/// One connection's loop: take a ticket, wait for its time, exchange, record.
async fn client(shared: Arc<Shared>, cfg: Arc<RunConfig>, rec: Rc<RefCell<Recorder>>) {
    let mut conn = Conn::default();
    while let Some(intended) = shared.ticket() {
        if let Some(at) = intended {
            tokio::time::sleep_until(at.into()).await;
        }
        let want_server = shared.first.get().is_none();
        let outcome = tokio::time::timeout(cfg.timeout, conn.exchange(&cfg, want_server)).await;
        match outcome {
            Err(_) => {
                conn.reset();
                let msg = format!("timeout after {:?}", cfg.timeout);
                rec.borrow_mut().failure(&Failure::Exception(msg));
            }
            Ok(Err(Failure::Connect(e))) if !shared.ever_connected.load(Ordering::Relaxed) => {
                let msg = format!("cannot connect to {}: {e}", cfg.target.addr);
                shared
                    .fatal
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(msg);
                shared.stop();
                return;
            }
            Ok(Err(f)) => {
                if !matches!(f, Failure::Connect(_)) {
                    shared.ever_connected.store(true, Ordering::Relaxed);
                }
                rec.borrow_mut().failure(&f);
            }
            Ok(Ok((timing, resp))) => {
                shared.ever_connected.store(true, Ordering::Relaxed);
                let (doc_len, _) = shared
                    .first
                    .get_or_init(|| (resp.body_len, resp.server.clone()));
                let reasons = cfg.expect.check(resp.status, &conn.body);
                rec.borrow_mut()
                    .response(&timing, &resp, *doc_len, reasons, intended);
            }
        }
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
}
