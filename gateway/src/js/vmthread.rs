//! VM threads: where scripts run, beside the I/O threads.
//!
//! A script can run for as long as it likes inside one native step that no
//! interpreter budget reaches (a catastrophic regex, a loop inside a
//! `forEach` callback, later a synchronous `TykMakeHttpRequest`). Run on the
//! I/O thread, that step holds every connection of the worker. So each
//! worker gives each JS API one or more *VM threads* of its own ([`VmPool`]),
//! and a call is a hand-off: the I/O task sends the job, then awaits its
//! answer with the call's deadline. The I/O thread never runs script code
//! and never waits past the deadline:
//!
//! - a job that ends by its deadline answers as it would inline; one that
//!   ends after it, within the grace below, is a timeout all the same (as
//!   inline): a blocking host call (`TykMakeHttpRequest`) gives up at the
//!   deadline and the script, handed `undefined`, may end before the
//!   interpreter's next look at the clock; its answer was applied;
//! - a job still running at the deadline (plus [`ABANDON_GRACE`], so that a
//!   script the interpreter budget stops on time keeps its thread) is
//!   *abandoned*: the request gets its 500 at once, the thread is marked,
//!   lowered to the idlest CPU priority and dropped from the pool, and a new
//!   thread takes its place for the next call. The abandoned thread exits
//!   when its native step returns (it finds its inbox closed);
//! - a job whose heap the allocator stopped (`heap::Halt`: past its
//!   ceiling inside one native step, or past its limit once abandoned)
//!   never returns: its thread sleeps for good, holding that heap, and a
//!   call still waiting for it fails within [`HALT_LOOK`].
//!
//! This module knows nothing of boa: the pool runs closures against a
//! per-thread state `S` that a builder makes on the VM thread, so any engine
//! (boa's `Context`, QuickJS's runtime) can use it. States are not `Send`;
//! only jobs and their answers cross threads.
//!
//! The answer comes back through [`answer`]: the I/O thread first waits for
//! it in place, briefly, then asynchronously (see that module for why).
//!
//! One job at a time per thread: a request queued for a busy thread waits
//! on the I/O side (an async lock with the request's own deadline), never in
//! the thread's inbox, so a request never sits behind a job that is about
//! to be abandoned. A call dropped while its job runs (its client closed
//! the connection) leaves the job behind as the lane's *orphan*: the next
//! call on that lane waits for it first, abandoning the thread at the
//! orphan's own deadline, so clients that send requests and hang up can
//! neither queue jobs in a thread's inbox nor hold more than that one.

use std::cell::Cell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::heap::Halt;
use crate::middleware::MwError;
use crate::stats::RunRecorder;

mod answer;
mod inbox;

pub use answer::DEFAULT_WAIT;

/// Stack of every thread that runs scripts: the VM threads, and the I/O
/// threads when scripts run inline (`--jsvm-threads 0`). boa recurses on the
/// machine stack in some builtins (see `depth.rs` for the per-level figures);
/// the size is reserved address space, committed only as deep calls touch
/// it, so it costs nothing until a script nests deeply.
pub const SCRIPT_STACK_SIZE: usize = 256 << 20;

/// How long after its deadline a job may still answer before its thread is
/// abandoned. The interpreter budget stops a script at most one slice (tens
/// of microseconds) after the deadline; this keeps that thread, and its
/// compiled context, for the next call.
pub(crate) const ABANDON_GRACE: Duration = Duration::from_millis(20);

/// How often a call waited for asynchronously looks whether its thread was
/// stopped in the allocator.
const HALT_LOOK: Duration = Duration::from_millis(50);

/// Most abandoned threads still running their last native step, process
/// wide (`heap::out_of_service`). Past it, a pool does not replace a thread
/// it abandons: its API answers 500 until one exits, rather than let an
/// attacker pile up threads that each burn a core. Threads parked for good
/// by the allocator (`heap::Halt`) burn nothing but hold their heap: they
/// have their own bound (`heap::MAX_PARKED`, `heap::PARKED_CEILINGS`), past
/// which no thread is replaced either, until a restart.
const MAX_ABANDONED: usize = 16;

/// Builds a VM thread's state, on that thread.
pub(crate) type Builder<S> = Arc<dyn Fn() -> Result<S, MwError> + Send + Sync>;

/// A VM thread's state, built lazily: absent before the first build, after
/// a failed one, or after a job discarded it.
pub(crate) struct Slot<S> {
    state: Option<S>,
    build: Builder<S>,
}

impl<S> Slot<S> {
    /// The state, built first if absent.
    pub(crate) fn get(&mut self) -> Result<&mut S, MwError> {
        match &mut self.state {
            Some(s) => Ok(s),
            empty => Ok(empty.insert((self.build)()?)),
        }
    }

    /// Drops the state; the next [`Slot::get`] builds a fresh one.
    pub(crate) fn discard(&mut self) {
        self.state = None;
    }
}

type Job<S> = Box<dyn FnOnce(&mut Slot<S>) + Send>;

/// Why [`VmPool::run`] gave no answer.
#[derive(Debug)]
pub(crate) enum RunError {
    /// The deadline passed (waiting for the thread, or in the job).
    Timeout,
    /// No thread could take the job (spawn failed, too many abandoned
    /// threads, or the job panicked).
    Unavailable(String),
    /// The thread stopped for good in the allocator, holding this many
    /// bytes ([`Halt`]); it was abandoned.
    Parked(usize),
}

/// One VM thread, as its pool sees it.
struct VmThread<S> {
    jobs: Arc<inbox::Inbox<Job<S>>>,
    /// The thread, to wake it when a job comes.
    thread: std::thread::Thread,
    /// Abandonment, and the thread's stop in the allocator.
    halt: Arc<Halt>,
    /// The kernel thread id, for lowering its priority when abandoned.
    tid: Arc<AtomicI32>,
}

impl<S: 'static> VmThread<S> {
    fn spawn(name: &str, build: Builder<S>) -> Result<VmThread<S>, RunError> {
        let jobs = Arc::new(inbox::Inbox::new());
        let rx = jobs.clone();
        let halt = Arc::new(Halt::default());
        let tid = Arc::new(AtomicI32::new(0));
        let (h, t) = (halt.clone(), tid.clone());
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .stack_size(SCRIPT_STACK_SIZE)
            .spawn(move || serve(&rx, build, h, t))
            .map_err(|e| RunError::Unavailable(format!("cannot start a JS thread: {e}")))?;
        Ok(VmThread {
            jobs,
            thread: handle.thread().clone(),
            halt,
            tid,
        })
    }

    /// Marks the thread abandoned; it exits when its current job returns.
    fn abandon(self) {
        self.halt.abandon();
        let tid = self.tid.load(Ordering::SeqCst);
        if tid > 0 {
            // SAFETY: setpriority on a thread id of this process; a stale id
            // (the thread just exited) fails harmlessly with ESRCH.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) };
            // Off its worker's core (`affinity.rs`): it burns an idle one.
            crate::affinity::release(tid);
        }
        // Dropping `self` closes the inbox: the thread's next look fails.
    }
}

impl<S> Drop for VmThread<S> {
    fn drop(&mut self) {
        self.jobs.close(&self.thread);
    }
}

/// The VM thread's loop: build the state, then run jobs until the pool
/// closes the inbox (shutdown or abandonment).
fn serve<S>(jobs: &inbox::Inbox<Job<S>>, build: Builder<S>, halt: Arc<Halt>, tid: Arc<AtomicI32>) {
    // However the thread ends (a panic while building its state
    // included), a job sent to it from then on fails at once.
    struct Exit<'a, J>(&'a inbox::Inbox<J>);
    impl<J> Drop for Exit<'_, J> {
        fn drop(&mut self) {
            self.0.exited();
        }
    }
    let _exit = Exit(jobs);
    // The allocator may stop this thread for good (a heap past its ceiling,
    // or past its limit once abandoned): see `heap::Halt`.
    let _halt = halt.enter();
    // SAFETY: gettid has no preconditions.
    tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
    let mut slot = Slot { state: None, build };
    // Built before any job: the pool's first job on a new thread waits for
    // the build ([`built`]); a failure is reported by the first call.
    let _ = slot.get();
    while let Some(job) = jobs.recv() {
        // A panic in a job (an engine bug) fails that call only: its answer
        // slot is dropped, and the state, possibly inconsistent, too.
        if std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut slot))).is_err() {
            slot.discard();
        }
        // A job that discarded the state (a stopped script, or the `fresh`
        // strategy after every call) has answered already: build the next
        // state now, off the next request's path.
        if slot.state.is_none() {
            let _ = slot.get();
        }
    }
    halt.exiting();
}

/// Waits for the answer `pending` of the job on `held`'s thread until
/// `end`, looking every `HALT_LOOK` whether the allocator stopped the
/// thread (`heap::Halt`: it will never answer, so the call fails now rather
/// than at its deadline). At `end`, or stopped, the thread is abandoned.
async fn settle<S: 'static, F: Future + Unpin>(
    held: &mut Option<VmThread<S>>,
    pending: &mut F,
    end: tokio::time::Instant,
) -> Result<F::Output, RunError> {
    let Some(halt) = held.as_ref().map(|t| t.halt.clone()) else {
        return Err(RunError::Unavailable("the JS thread has exited".into()));
    };
    loop {
        let look = (tokio::time::Instant::now() + HALT_LOOK).min(end);
        if let Ok(got) = tokio::time::timeout_at(look, &mut *pending).await {
            return Ok(got);
        }
        let stopped = halt.held();
        if stopped > 0 || look >= end {
            if let Some(t) = held.take() {
                t.abandon();
            }
            return Err(match stopped {
                0 => RunError::Timeout,
                bytes => RunError::Parked(bytes),
            });
        }
    }
}

/// Waits until the thread just started on `held` has built its state (or
/// failed to: its first job then reports why), outside any call's
/// deadline: a state's build is not a script call (it used to run when the
/// gateway started), and may itself take most of `--jsvm-timeout` (its
/// top-level code is held to that), which would leave the call nothing.
/// The wait is a no-op job, which the thread takes once its build returns.
///
/// The build's top-level code is held to `--jsvm-timeout` as at load,
/// where it ran once in time; a build still running at `limit` (twice
/// that, and a second: stuck in a native step no budget reaches) fails the
/// waiting call with 500 and its thread is abandoned.
async fn built<S: 'static>(
    held: &mut Option<VmThread<S>>,
    limit: Duration,
) -> Result<(), RunError> {
    let Some(thread) = held.as_ref() else {
        return Err(RunError::Unavailable("the JS thread has exited".into()));
    };
    let (reply, mut pending) = answer::slot();
    let sent = thread.jobs.send(
        &thread.thread,
        Box::new(move |_: &mut Slot<S>| reply.send(())),
    );
    if sent.is_err() {
        *held = None;
        return Err(RunError::Unavailable("the JS thread has exited".into()));
    }
    let end = tokio::time::Instant::now() + limit;
    match settle(held, &mut pending, end).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(RunError::Unavailable(
            "the JS thread ended while building its context".into(),
        )),
        Err(RunError::Timeout) => Err(RunError::Unavailable(format!(
            "the JS context took longer than {limit:?} to build; its thread was abandoned"
        ))),
        Err(e) => Err(e),
    }
}

/// A lane: one VM thread slot of a pool and how many calls want it.
struct Lane<S> {
    thread: tokio::sync::Mutex<Option<VmThread<S>>>,
    /// A thread was started on this lane once: a thread missing now was
    /// lost (abandoned, parked, exited), and replacing it is bounded.
    started: Cell<bool>,
    /// Calls waiting for or holding this lane (to pick the least busy).
    load: Cell<usize>,
    /// The job of a call dropped while it ran, still on the thread.
    orphan: Cell<Option<Orphan>>,
}

/// A job whose call was dropped: its answer, to wait for (the answer's
/// type erased: it is thrown away), and when its thread is abandoned.
struct Orphan {
    done: Pin<Box<dyn Future<Output = ()>>>,
    end: tokio::time::Instant,
}

/// Leaves the call's job to the lane as its [`Orphan`] if the call is
/// dropped before the answer came (armed while `pending` is `Some`).
struct OrphanGuard<'a, R: 'static> {
    orphan: &'a Cell<Option<Orphan>>,
    pending: Option<answer::Pending<R>>,
    end: tokio::time::Instant,
}

impl<R: 'static> Drop for OrphanGuard<'_, R> {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            self.orphan.set(Some(Orphan {
                done: Box::pin(async move {
                    let _ = pending.await;
                }),
                end: self.end,
            }));
        }
    }
}

/// Gives an [`Orphan`] that a call was waiting for back to its lane if the
/// call is dropped first (armed while `orphan` is `Some`).
struct PutBack<'a> {
    lane: &'a Cell<Option<Orphan>>,
    orphan: Option<Orphan>,
}

impl Drop for PutBack<'_> {
    fn drop(&mut self) {
        if let Some(orphan) = self.orphan.take() {
            self.lane.set(Some(orphan));
        }
    }
}

/// One API's VM threads on one I/O worker.
pub(crate) struct VmPool<S> {
    lanes: Vec<Lane<S>>,
    build: Builder<S>,
    name: String,
    /// Longest the I/O thread waits in place for an answer (`--jsvm-wait`).
    wait: Duration,
    /// Longest a new thread's state may take to build ([`built`]).
    build_limit: Duration,
    /// Mean time this API's recent jobs ran on their VM thread, each
    /// clamped at `wait`, in nanoseconds ([`answer::mix`]). The job's own
    /// time, not the wait seen from here: a wait inflated by scheduling
    /// (a busy core, a slow asynchronous wake-up) must not switch the
    /// in-place wait off, or the slower path would keep itself chosen.
    recent_ns: Cell<u64>,
}

/// Decrements a lane's load when the call leaves it, however it leaves.
struct LoadGuard<'a>(&'a Cell<usize>);

impl Drop for LoadGuard<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl<S: 'static> VmPool<S> {
    /// A pool of `threads` (at least one) VM threads named `name`, each
    /// building its state with `build`, whose top-level code is held to
    /// `timeout` (`--jsvm-timeout`); the I/O thread waits in place for an
    /// answer for up to `wait`.
    ///
    /// No thread starts here: a lane starts its thread, and the thread
    /// builds its state, at the lane's first call ([`VmPool::run`]). A
    /// gateway with 2,000 JS APIs and two workers built 4,000 contexts
    /// before its first answer (boa: 3.6 GB, 4,000 threads, ~5 s) where
    /// its traffic used a few.
    pub(crate) fn new(
        name: &str,
        threads: usize,
        wait: Duration,
        timeout: Duration,
        build: Builder<S>,
    ) -> VmPool<S> {
        let lanes = (0..threads.max(1))
            .map(|_| Lane {
                thread: tokio::sync::Mutex::new(None),
                started: Cell::new(false),
                load: Cell::new(0),
                orphan: Cell::new(None),
            })
            .collect();
        VmPool {
            lanes,
            build,
            name: name.to_string(),
            wait,
            build_limit: timeout.saturating_mul(2) + Duration::from_secs(1),
            recent_ns: Cell::new(0),
        }
    }

    /// Runs `job` on a VM thread and returns its answer, or
    /// [`RunError::Timeout`] at `deadline` whatever the job is doing. The
    /// job is given the deadline it must keep: `deadline`, moved later by
    /// the time a thread started for this call took to build its state
    /// (a build is not the call's: see [`built`]). The time the job ran on
    /// its thread goes to `runs`, the calling entry's recorder, when given.
    pub(crate) async fn run<R, F>(
        &self,
        deadline: Instant,
        runs: Option<&RunRecorder>,
        job: F,
    ) -> Result<R, RunError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Slot<S>, Instant) -> R + Send + 'static,
    {
        let mut deadline = deadline;
        // Phase 1: the least busy lane, waited for until the deadline.
        let lane = self
            .lanes
            .iter()
            .min_by_key(|l| l.load.get())
            .expect("a pool has a lane");
        lane.load.set(lane.load.get() + 1);
        let _load = LoadGuard(&lane.load);
        let mut until = tokio::time::Instant::from_std(deadline);
        let mut held = tokio::time::timeout_at(until, lane.thread.lock())
            .await
            .map_err(|_| RunError::Timeout)?;

        // The job of a call dropped while it ran goes first: waited for
        // until its own deadline, when its thread is abandoned.
        // Dropped meanwhile (its own client gone), this call puts the
        // orphan back for the next one.
        if let Some(orphan) = lane.orphan.take() {
            let mut back = PutBack {
                lane: &lane.orphan,
                orphan: Some(orphan),
            };
            let orphan = back.orphan.as_mut().expect("just set");
            let end = orphan.end + ABANDON_GRACE;
            let _ = settle(&mut held, &mut orphan.done, end).await;
            back.orphan = None;
        }

        // Phase 2: a live thread (the lane's first, or one replacing an
        // abandoned one), and the job.
        if held.is_none() {
            // The bounds on lost threads hold back replacements only: an
            // API whose lane never started has lost nothing, and serves as
            // it would had its thread started with the gateway.
            let out = crate::heap::out_of_service();
            let replacing = lane.started.get();
            if replacing && out.running >= MAX_ABANDONED {
                return Err(RunError::Unavailable(format!(
                    "{MAX_ABANDONED} stopped scripts are still running their last native step; not starting another JS thread"
                )));
            }
            if replacing && out.parked_full() {
                return Err(RunError::Unavailable(format!(
                    "{} JS threads are parked for good, holding {} (at most {} threads and {}); not starting another JS thread until the gateway restarts",
                    out.parked,
                    super::memory::mib(out.parked_bytes),
                    crate::heap::MAX_PARKED,
                    super::memory::mib(out.parked_budget)
                )));
            }
            *held = Some(VmThread::spawn(&self.name, self.build.clone())?);
            lane.started.set(true);
            let building = Instant::now();
            built(&mut held, self.build_limit).await?;
            deadline += building.elapsed();
            until = tokio::time::Instant::from_std(deadline);
        }
        let thread = held.as_ref().expect("just ensured");
        let (reply, pending) = answer::slot();
        let sent_at = Instant::now();
        let sent = thread.jobs.send(
            &thread.thread,
            Box::new(move |slot: &mut Slot<S>| {
                let started = Instant::now();
                let answer = job(slot, deadline);
                // Read here, where the job ended: the I/O thread may look
                // later than that.
                let late = Instant::now() >= deadline;
                reply.send((answer, started.elapsed(), late));
            }),
        );
        if sent.is_err() {
            *held = None;
            return Err(RunError::Unavailable("the JS thread has exited".into()));
        }

        // Phase 3: the answer, waited for in place while the API's calls
        // are usually quick, then asynchronously until the deadline; at the
        // deadline the thread is abandoned.
        let recent = Duration::from_nanos(self.recent_ns.get());
        let in_place = answer::budget(recent, self.wait);
        let quick = if in_place.is_zero() {
            None
        } else {
            pending.wait_until((sent_at + in_place).min(deadline))
        };
        let got = match quick {
            Some(got) => got,
            None => {
                // Dropped from here on (its client gone), the call leaves
                // its job to the lane.
                let mut guard = OrphanGuard {
                    orphan: &lane.orphan,
                    pending: Some(pending),
                    end: until,
                };
                let pending = guard.pending.as_mut().expect("just set");
                let got = settle(&mut held, pending, until + ABANDON_GRACE).await;
                guard.pending = None;
                match got {
                    Ok(got) => got,
                    Err(e) => {
                        self.note(self.wait);
                        return Err(e);
                    }
                }
            }
        };
        if let (Ok((_, ran, _)), Some(runs)) = (&got, runs) {
            runs.record(*ran);
        }
        match got {
            // Past the deadline: a timeout, as it would be a moment later
            // (the thread, which answered, is kept).
            Ok((_, ran, true)) => {
                self.note(ran);
                Err(RunError::Timeout)
            }
            Ok((answer, ran, false)) => {
                self.note(ran);
                Ok(answer)
            }
            Err(_) => Err(RunError::Unavailable("the JS call panicked".into())),
        }
    }

    /// Adds one job's run time to the recent mean, clamped at the wait
    /// ceiling so that one GC pause moves it by at most an eighth of that.
    fn note(&self, ran: Duration) {
        let sample = ran.min(self.wait);
        self.recent_ns
            .set(answer::mix(self.recent_ns.get(), sample));
    }
}
