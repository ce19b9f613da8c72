//! The timeout mechanism: how a script that never ends is stopped.
//!
//! boa 0.22 has no time-based interrupt, and a [`boa_engine::Context`] cannot
//! be touched from another thread, so a watchdog thread cannot stop it. What
//! boa does have is [`boa_engine::Script::evaluate_async_with_budget`]: the
//! interpreter counts the cost of each instruction and, every `budget` units,
//! returns `Poll::Pending` (after waking itself) at an instruction boundary.
//! [`guarded`] polls that future and, each time it yields, checks the deadline
//! and the process's memory growth. When either is exceeded the future is
//! dropped mid-script: the VM stops at once, and because its frame stack is
//! then inconsistent, the caller must discard the whole context (see
//! `vm.rs`).
//!
//! A call that finishes within one slice, which is every ordinary middleware
//! call, never yields: the guard costs nothing on the hot path but the
//! interpreter's budget counter.

use std::future::Future;
use std::pin::pin;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::Instant;

/// Interpreter cost units per slice. One slice of a tight loop is on the
/// order of tens of microseconds; a hello-world handler uses a few hundred
/// units, so ordinary calls complete inside their first slice.
pub(crate) const SLICE_BUDGET: u32 = 50_000;

/// How far the process's peak RSS may grow during one call before the call
/// is stopped as runaway allocation.
const MEMORY_GROWTH_LIMIT_KB: i64 = 256 * 1024;

/// Why a call was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The deadline passed.
    Timeout,
    /// Peak RSS grew more than the limit since the call started.
    Memory,
    /// The thread's boa heap, collected, was still past `--jsvm-memory`
    /// (`memory.rs`).
    Heap,
}

/// A call's limits, checked at each slice boundary.
pub(crate) struct Guard {
    deadline: Instant,
    /// `--jsvm-memory`, per context (0: none).
    heap_limit: usize,
    /// Peak RSS at the start, read lazily at the first yield so that calls
    /// that never yield pay no syscall.
    rss_start_kb: Option<i64>,
}

impl Guard {
    pub(crate) fn new(deadline: Instant, heap_limit: usize) -> Guard {
        Guard {
            deadline,
            heap_limit,
            rss_start_kb: None,
        }
    }

    /// True once the deadline has passed (the cheap part of [`Self::check`]).
    pub(crate) fn expired(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Checks every limit: the deadline, the context's heap, the process's
    /// peak RSS growth (a syscall).
    pub(crate) fn check(&mut self) -> Result<(), Stop> {
        if Instant::now() >= self.deadline {
            return Err(Stop::Timeout);
        }
        super::memory::check_slice(self.heap_limit)?;
        let now = peak_rss_kb();
        let start = *self.rss_start_kb.get_or_insert(now);
        if now - start > MEMORY_GROWTH_LIMIT_KB {
            return Err(Stop::Memory);
        }
        Ok(())
    }
}

/// Peak resident set size of the process in KiB (one `getrusage` syscall).
fn peak_rss_kb() -> i64 {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF is
    // always valid.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return 0;
        }
        usage.ru_maxrss
    }
}

/// Drives `fut` as the caller's executor sees fit, stopping it at a slice
/// boundary once `guard` trips. Each slice boundary is a real yield, so the
/// worker thread serves its other connections between slices of a long
/// script.
pub(crate) async fn guarded<F: Future>(fut: F, mut guard: Guard) -> Result<F::Output, Stop> {
    let mut fut = pin!(fut);
    std::future::poll_fn(move |cx| match fut.as_mut().poll(cx) {
        Poll::Ready(out) => Poll::Ready(Ok(out)),
        Poll::Pending => match guard.check() {
            Ok(()) => Poll::Pending,
            Err(stop) => Poll::Ready(Err(stop)),
        },
    })
    .await
}

/// Runs `fut` to completion on this thread (no executor), with the same
/// guard. Used at load, where a script's top-level code runs before any
/// runtime exists.
pub(crate) fn block_guarded<F: Future>(fut: F, mut guard: Guard) -> Result<F::Output, Stop> {
    let mut fut = pin!(fut);
    let mut cx = TaskContext::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Ok(out);
        }
        guard.check()?;
    }
}

/// Runs `fut` to completion on this thread, polling again at every yield.
/// Used on VM threads, where nothing else waits for the thread: the guard
/// inside `fut` (see [`guarded`]) still checks the deadline at each slice.
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = TaskContext::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}
