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
//! Jobs reach a thread through its inbox, a queue ([`inbox`]), and answers
//! come back through [`answer`], which the I/O task awaits. Sending a job
//! wakes the thread only when it sleeps: the calls made in one turn of the
//! worker's reactor join its inbox while it runs and cost one pair of
//! context switches between them. A pair is the hand-off's price (~6 µs of
//! CPU on the 2-core test VM, `benches/wakeup_cost.c`); when every call
//! paid its own (the lane was locked until the answer, and the I/O thread
//! blocked for it in place), boa's `/jsvm/` under `ab -c 10 -k` made
//! 2.43-2.64 context switches a request and cost 48.2-54.5 µs of gateway
//! CPU; queued, 1.56-1.89 and 37.1-39.9 µs, with mean latency 0.35-0.41 ->
//! 0.29-0.32 ms (`perf stat` on the gateway, `--threads 2`, six alternated
//! rounds of 20,000 requests).
//!
//! A job queued behind one that overruns is not held by it: every caller
//! watches the job its thread is running, and the first to see it past its
//! deadline and [`ABANDON_GRACE`] abandons the thread, whoever's job it is
//! (its own caller may have gone: its client closed the connection). The
//! jobs still queued are taken out unstarted and sent again, to the
//! thread that replaces it. A caller that gives up (its deadline, or its
//! client gone) before its job started takes the job back: it never runs,
//! so clients that send requests and hang up queue nothing.

use std::cell::Cell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use crate::heap::Halt;
use crate::middleware::MwError;
use crate::stats::RunRecorder;

mod answer;
mod inbox;

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

/// How often a caller looks whether its thread was stopped in the
/// allocator, or its running job overran (sooner when that job's deadline
/// comes first).
const HALT_LOOK: Duration = Duration::from_millis(50);

/// How many times a call whose job was taken out unstarted (its thread was
/// abandoned or exited) sends it again before it fails.
const RESENDS: usize = 2;

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
    /// The deadline of the job the thread is running ([`Running`]).
    running: Arc<Running>,
}

/// The deadline of the job a thread is running, for every caller waiting
/// on that thread to judge: nanoseconds since [`EPOCH`] plus one, 0 when
/// the thread runs none.
#[derive(Default)]
struct Running(AtomicU64);

/// The origin of [`Running`]'s figures.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

impl Running {
    /// Marks a job with `deadline` running until the guard drops (however
    /// the job ends: a panic included).
    fn enter(&self, deadline: Instant) -> impl Drop + '_ {
        struct Idle<'a>(&'a AtomicU64);
        impl Drop for Idle<'_> {
            fn drop(&mut self) {
                self.0.store(0, Ordering::Release);
            }
        }
        let ns = deadline.saturating_duration_since(*EPOCH).as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX - 1);
        self.0.store(ns + 1, Ordering::Release);
        Idle(&self.0)
    }

    /// The running job's deadline, if one runs.
    fn deadline(&self) -> Option<Instant> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            ns => Some(*EPOCH + Duration::from_nanos(ns - 1)),
        }
    }
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
            running: Arc::default(),
        })
    }

    /// Marks the thread abandoned; it exits when its current job returns.
    /// The jobs still queued are dropped unstarted: each caller sends its
    /// own again ([`NoAnswer::Unrun`](answer::NoAnswer::Unrun)).
    fn abandon(self) {
        drop(self.jobs.drain());
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
    let (reply, mut pending) = answer::slot(());
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
    /// Held to start or replace the thread, and to send to it.
    thread: tokio::sync::Mutex<Option<VmThread<S>>>,
    /// A thread was started on this lane once: a thread missing now was
    /// lost (abandoned, parked, exited), and replacing it is bounded.
    started: Cell<bool>,
    /// Calls waiting for or holding this lane (to pick the least busy).
    load: Cell<usize>,
}

/// What a caller keeps of the thread its job went to, to judge it while
/// waiting (the lane may have replaced it meanwhile).
struct Sent {
    halt: Arc<Halt>,
    running: Arc<Running>,
}

impl Sent {
    /// Whether `thread` is the one this job went to.
    fn is<S>(&self, thread: &VmThread<S>) -> bool {
        Arc::ptr_eq(&self.halt, &thread.halt)
    }
}

/// One API's VM threads on one I/O worker.
pub(crate) struct VmPool<S> {
    lanes: Vec<Lane<S>>,
    build: Builder<S>,
    name: String,
    /// Longest a new thread's state may take to build ([`built`]).
    build_limit: Duration,
}

/// Decrements a lane's load when the call leaves it, however it leaves.
struct LoadGuard<'a>(&'a Cell<usize>);

impl Drop for LoadGuard<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// The answer a job sends back: its value, how long it ran, and whether it
/// ended past its deadline.
type Answer<R> = (R, Duration, bool);

impl<S: 'static> VmPool<S> {
    /// A pool of `threads` (at least one) VM threads named `name`, each
    /// building its state with `build`, whose top-level code is held to
    /// `timeout` (`--jsvm-timeout`).
    ///
    /// No thread starts here: a lane starts its thread, and the thread
    /// builds its state, at the lane's first call ([`VmPool::run`]). A
    /// gateway with 2,000 JS APIs and two workers built 4,000 contexts
    /// before its first answer (boa: 3.6 GB, 4,000 threads, ~5 s) where
    /// its traffic used a few.
    pub(crate) fn new(
        name: &str,
        threads: usize,
        timeout: Duration,
        build: Builder<S>,
    ) -> VmPool<S> {
        let lanes = (0..threads.max(1))
            .map(|_| Lane {
                thread: tokio::sync::Mutex::new(None),
                started: Cell::new(false),
                load: Cell::new(0),
            })
            .collect();
        VmPool {
            lanes,
            build,
            name: name.to_string(),
            build_limit: timeout.saturating_mul(2) + Duration::from_secs(1),
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
        let lane = self
            .lanes
            .iter()
            .min_by_key(|l| l.load.get())
            .expect("a pool has a lane");
        lane.load.set(lane.load.get() + 1);
        let _load = LoadGuard(&lane.load);
        let mut job = job;
        let mut deadline = deadline;
        for _ in 0..=RESENDS {
            let (sent, mut pending) = self.send(lane, &mut deadline, job).await?;
            match self.wait(lane, &sent, &mut pending, deadline).await? {
                Ok((_, ran, late)) if late => {
                    record(runs, ran);
                    // Past the deadline: a timeout, as it would be a moment
                    // later (the thread, which answered, is kept).
                    return Err(RunError::Timeout);
                }
                Ok((answer, ran, _)) => {
                    record(runs, ran);
                    return Ok(answer);
                }
                Err(answer::NoAnswer::Panicked) => {
                    return Err(RunError::Unavailable("the JS call panicked".into()))
                }
                // Taken out unstarted (its thread abandoned or gone): sent
                // again.
                Err(answer::NoAnswer::Unrun) => match pending.take_back() {
                    Some(back) => job = back,
                    None => break,
                },
            }
        }
        Err(RunError::Unavailable(
            "the JS threads this call was sent to were lost before it ran".into(),
        ))
    }

    /// Puts the job in the lane's thread's inbox, starting (or replacing)
    /// the thread first if it has none. The lane is held only for this.
    async fn send<R, F>(
        &self,
        lane: &Lane<S>,
        deadline: &mut Instant,
        job: F,
    ) -> Result<(Sent, answer::Pending<Answer<R>, F>), RunError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Slot<S>, Instant) -> R + Send + 'static,
    {
        let until = tokio::time::Instant::from_std(*deadline);
        let mut held = tokio::time::timeout_at(until, lane.thread.lock())
            .await
            .map_err(|_| RunError::Timeout)?;
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
            *deadline += building.elapsed();
        }
        let thread = held.as_ref().expect("just ensured");
        let (reply, pending) = answer::slot(job);
        let running = thread.running.clone();
        let keep = *deadline;
        let sent = thread.jobs.send(
            &thread.thread,
            Box::new(move |slot: &mut Slot<S>| {
                // Its caller gave up (its deadline, its client gone) or it
                // was taken out: not run.
                let Some(job) = reply.start() else {
                    return;
                };
                let _running = running.enter(keep);
                let started = Instant::now();
                let answer = job(slot, keep);
                // Read here, where the job ended: the I/O thread may look
                // later than that.
                let late = Instant::now() >= keep;
                reply.send((answer, started.elapsed(), late));
            }),
        );
        if sent.is_err() {
            *held = None;
            return Err(RunError::Unavailable("the JS thread has exited".into()));
        }
        let sent = Sent {
            halt: thread.halt.clone(),
            running: thread.running.clone(),
        };
        Ok((sent, pending))
    }

    /// Awaits the answer of a job sent to `sent`'s thread. Meanwhile it
    /// watches that thread: the job it runs (this one or another, queued
    /// ahead) past its deadline and [`ABANDON_GRACE`], or the thread
    /// stopped in the allocator, and the thread is abandoned; its queued
    /// jobs then come back unstarted. At its own deadline a job not yet
    /// started is taken back (a timeout that costs the thread nothing).
    async fn wait<R, F>(
        &self,
        lane: &Lane<S>,
        sent: &Sent,
        pending: &mut answer::Pending<Answer<R>, F>,
        deadline: Instant,
    ) -> Result<Result<Answer<R>, answer::NoAnswer>, RunError> {
        loop {
            let now = Instant::now();
            let mut look = now + HALT_LOOK;
            if let Some(theirs) = sent.running.deadline() {
                look = look.min(theirs + ABANDON_GRACE);
            }
            if !pending.started() {
                look = look.min(deadline);
            }
            let look = tokio::time::Instant::from_std(look.max(now));
            if let Ok(got) = tokio::time::timeout_at(look, &mut *pending).await {
                return Ok(got);
            }
            let now = Instant::now();
            let parked = sent.halt.held();
            let overran = sent
                .running
                .deadline()
                .is_some_and(|theirs| now >= theirs + ABANDON_GRACE);
            if parked > 0 || overran {
                let mine = pending.started();
                self.abandon(lane, sent).await;
                if mine {
                    return Err(match parked {
                        0 => RunError::Timeout,
                        bytes => RunError::Parked(bytes),
                    });
                }
                // Queued behind it: taken out with the thread's inbox, it
                // answers `Unrun` at the next look and is sent again.
                continue;
            }
            if now >= deadline && pending.cancel() {
                return Err(RunError::Timeout);
            }
        }
    }

    /// Abandons `sent`'s thread if it is still its lane's.
    async fn abandon(&self, lane: &Lane<S>, sent: &Sent) {
        // Abandoned already (by another caller, under the lane's lock): no
        // need to wait for the lock, which the replacement's build may
        // hold for a while.
        if sent.halt.abandoned() {
            return;
        }
        let mut held = lane.thread.lock().await;
        if held.as_ref().is_some_and(|t| sent.is(t)) {
            if let Some(t) = held.take() {
                t.abandon();
            }
        }
    }
}

/// Adds a job's time on its thread to the entry's recorder.
fn record(runs: Option<&RunRecorder>, ran: Duration) {
    if let Some(runs) = runs {
        runs.record(ran);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A pool whose threads' state is their build's number (1, 2, ...).
    fn pool(threads: usize) -> VmPool<usize> {
        let builds = Arc::new(AtomicUsize::new(0));
        let build: Builder<usize> = Arc::new(move || Ok(builds.fetch_add(1, Ordering::SeqCst) + 1));
        VmPool::new("gw-test", threads, Duration::from_secs(1), build)
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Polls every future of `fs` until all are done, as one task.
    async fn join_all<F: Future>(fs: impl IntoIterator<Item = F>) -> Vec<F::Output> {
        let mut fs: Vec<_> = fs.into_iter().map(Box::pin).collect();
        let mut out: Vec<Option<F::Output>> = fs.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut all = true;
            for (f, o) in fs.iter_mut().zip(out.iter_mut()) {
                if o.is_none() {
                    match f.as_mut().poll(cx) {
                        std::task::Poll::Ready(v) => *o = Some(v),
                        std::task::Poll::Pending => all = false,
                    }
                }
            }
            if all {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
        out.into_iter()
            .map(|o| o.expect("polled to the end"))
            .collect()
    }

    fn ready<T>(p: std::task::Poll<T>) -> Option<T> {
        match p {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }

    fn after(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    /// Which thread ran a job, and in what order jobs ran.
    fn tagged(
        order: &Arc<std::sync::Mutex<Vec<u32>>>,
        tag: u32,
    ) -> impl FnOnce(&mut Slot<usize>, Instant) -> usize {
        let order = order.clone();
        move |slot, _| {
            order.lock().unwrap().push(tag);
            *slot.get().unwrap()
        }
    }

    #[test]
    fn calls_made_together_queue_on_one_thread_and_each_runs_once_in_order() {
        let pool = pool(1);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let got = block_on(async {
            let calls = (0..50).map(|n| pool.run(after(5_000), None, tagged(&order, n)));
            join_all(calls).await
        });
        assert!(got.iter().all(|g| matches!(g, Ok(1))), "{got:?}");
        assert_eq!(*order.lock().unwrap(), (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn calls_queued_behind_an_overrun_are_answered_by_the_thread_that_replaces_it() {
        let pool = pool(1);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stuck, queued) = block_on(async {
            // A native step no budget reaches: 1.5 s against a 100 ms
            // deadline.
            let stuck = pool.run(after(100), None, |slot: &mut Slot<usize>, _| {
                std::thread::sleep(Duration::from_millis(1_500));
                *slot.get().unwrap()
            });
            let queued = join_all((0..5).map(|n| pool.run(after(1_000), None, tagged(&order, n))));
            // Had they waited for it to end, their deadlines would have
            // passed first.
            tokio::join!(stuck, queued)
        });
        assert!(matches!(stuck, Err(RunError::Timeout)), "{stuck:?}");
        // The second build: a new thread, not the stuck one.
        assert!(queued.iter().all(|g| matches!(g, Ok(2))), "{queued:?}");
        assert_eq!(*order.lock().unwrap(), (0..5).collect::<Vec<_>>());
    }

    /// A call whose job overran answers at its deadline and grace even
    /// when another caller abandoned its thread first and holds the lane
    /// while the replacement builds (the build here waits for that answer:
    /// had the call waited for the lane, the build would have waited out
    /// its 5 s and said so).
    #[test]
    fn an_overrun_answers_without_waiting_for_its_replacement_to_build() {
        let answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let saw = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let builds = Arc::new(AtomicUsize::new(0));
        let (a, s) = (answered.clone(), saw.clone());
        let build: Builder<usize> = Arc::new(move || {
            let n = builds.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 2 {
                let until = Instant::now() + Duration::from_secs(5);
                while !a.load(Ordering::SeqCst) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(1));
                }
                s.store(a.load(Ordering::SeqCst), Ordering::SeqCst);
            }
            Ok(n)
        });
        let pool = VmPool::new("gw-test", 1, Duration::from_secs(1), build);
        let (queued, stuck) = block_on(async {
            // Thread 1 built, so that the next call sends at once.
            let warm = pool.run(after(1_000), None, |slot: &mut Slot<usize>, _| {
                *slot.get().unwrap()
            });
            assert!(matches!(warm.await, Ok(1)));
            let stuck = async {
                let got = pool
                    .run(after(100), None, |slot: &mut Slot<usize>, _| {
                        std::thread::sleep(Duration::from_millis(1_500));
                        *slot.get().unwrap()
                    })
                    .await;
                answered.store(true, Ordering::SeqCst);
                got
            };
            // Sent first (one poll), then the call queued behind it.
            let mut stuck = std::pin::pin!(stuck);
            std::future::poll_fn(|cx| {
                assert!(stuck.as_mut().poll(cx).is_pending());
                std::task::Poll::Ready(())
            })
            .await;
            let queued = pool.run(after(8_000), None, |slot: &mut Slot<usize>, _| {
                *slot.get().unwrap()
            });
            // The queued call is polled first (`tokio::join!` rotates): at
            // the same instant it is the one that abandons the thread and
            // starts the next.
            let mut queued = std::pin::pin!(queued);
            let (mut q, mut s) = (None, None);
            std::future::poll_fn(|cx| {
                if q.is_none() {
                    q = ready(queued.as_mut().poll(cx));
                }
                if s.is_none() {
                    s = ready(stuck.as_mut().poll(cx));
                }
                if q.is_some() && s.is_some() {
                    std::task::Poll::Ready(())
                } else {
                    std::task::Poll::Pending
                }
            })
            .await;
            (q.expect("done"), s.expect("done"))
        });
        assert!(matches!(stuck, Err(RunError::Timeout)), "{stuck:?}");
        assert!(matches!(queued, Ok(2)), "{queued:?}");
        assert!(
            saw.load(Ordering::SeqCst),
            "the overrun call waited for its replacement's build"
        );
    }

    #[test]
    fn a_call_that_gives_up_before_its_job_started_never_runs_it() {
        let pool = pool(1);
        let ran = Arc::new(AtomicUsize::new(0));
        let (first, late, dropped) = block_on(async {
            let first = pool.run(after(2_000), None, |slot: &mut Slot<usize>, _| {
                std::thread::sleep(Duration::from_millis(300));
                *slot.get().unwrap()
            });
            let r = ran.clone();
            // Its deadline passes while the first job runs.
            let late = pool.run(after(50), None, move |_: &mut Slot<usize>, _| {
                r.fetch_add(1, Ordering::SeqCst);
            });
            let r = ran.clone();
            // Its caller goes away (a client that hung up) meanwhile.
            let dropped = tokio::time::timeout(
                Duration::from_millis(100),
                pool.run(after(2_000), None, move |_: &mut Slot<usize>, _| {
                    r.fetch_add(1, Ordering::SeqCst);
                }),
            );
            tokio::join!(first, late, dropped)
        });
        assert!(matches!(first, Ok(1)), "{first:?}");
        assert!(matches!(late, Err(RunError::Timeout)), "{late:?}");
        assert!(dropped.is_err(), "the dropped call ended first");
        // One more call after both: the thread ran neither, and is kept.
        let next = block_on(pool.run(after(1_000), None, |slot: &mut Slot<usize>, _| {
            *slot.get().unwrap()
        }));
        assert!(matches!(next, Ok(1)), "{next:?}");
        assert_eq!(ran.load(Ordering::SeqCst), 0, "a job given up on ran");
    }
}
