//! The answer of one VM-thread job, and the two ways the I/O thread waits
//! for it.
//!
//! A script call costs a few microseconds; waking a sleeping thread costs
//! about as much, and the I/O thread's usual way of waiting (return
//! `Pending`, run other tasks, sleep in `epoll_wait`, be woken through the
//! runtime's eventfd) adds a reactor turn and a second kind of wake-up on
//! top. So the I/O thread first waits *in place*: it blocks on a futex
//! (`park_timeout`, not a spin: the VM thread may need this very core) for
//! up to a short budget, and the VM thread wakes it directly when it has
//! answered. Only a call still running when the budget ends is awaited the
//! asynchronous way, so a slow script (a `TykMakeHttpRequest` call, a
//! runaway loop) holds the I/O thread for the budget at most, never for
//! the call.
//!
//! [`budget`] decides that budget from the API's recent calls: calls that
//! usually answer quickly are waited for in place, calls that usually do
//! not are not waited for at all.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Who is waiting for an answer, and how to wake them.
enum Waiter {
    None,
    /// The I/O thread, blocked in place.
    Thread(Thread),
    /// The I/O task, awaiting.
    Task(Waker),
}

struct State<R> {
    /// The answer; `None` with `done` set means the job ended without one
    /// (it panicked).
    value: Option<R>,
    done: bool,
    waiter: Waiter,
}

/// The slot both sides share.
struct Shared<R>(Mutex<State<R>>);

impl<R> Shared<R> {
    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // No code runs with the lock held that could panic; a poisoned lock
        // still holds a consistent state.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The VM thread's end: answers once. Dropped unanswered (the job
/// panicked), it tells the waiter so.
pub(crate) struct Reply<R>(Option<Arc<Shared<R>>>);

/// The I/O thread's end.
pub(crate) struct Pending<R>(Arc<Shared<R>>);

/// A new answer slot.
pub(crate) fn slot<R>() -> (Reply<R>, Pending<R>) {
    let shared = Arc::new(Shared(Mutex::new(State {
        value: None,
        done: false,
        waiter: Waiter::None,
    })));
    (Reply(Some(shared.clone())), Pending(shared))
}

impl<R> Reply<R> {
    /// Hands the answer over and wakes whoever waits for it.
    pub(crate) fn send(mut self, value: R) {
        if let Some(shared) = self.0.take() {
            finish(&shared, Some(value));
        }
    }
}

impl<R> Drop for Reply<R> {
    fn drop(&mut self) {
        if let Some(shared) = self.0.take() {
            finish(&shared, None);
        }
    }
}

fn finish<R>(shared: &Shared<R>, value: Option<R>) {
    let waiter = {
        let mut s = shared.lock();
        s.value = value;
        s.done = true;
        std::mem::replace(&mut s.waiter, Waiter::None)
    };
    // Woken outside the lock, so the woken side never blocks on it.
    match waiter {
        Waiter::None => {}
        Waiter::Thread(t) => t.unpark(),
        Waiter::Task(w) => w.wake(),
    }
}

/// The job ended without an answer.
#[derive(Debug)]
pub(crate) struct NoAnswer;

impl<R> Pending<R> {
    /// Blocks the calling thread until the answer comes or `until` passes;
    /// `None` if it has not come (the job is still running).
    pub(crate) fn wait_until(&self, until: Instant) -> Option<Result<R, NoAnswer>> {
        loop {
            let left = {
                let mut s = self.0.lock();
                if s.done {
                    return Some(s.value.take().ok_or(NoAnswer));
                }
                let now = Instant::now();
                if now >= until {
                    s.waiter = Waiter::None;
                    return None;
                }
                if !matches!(s.waiter, Waiter::Thread(_)) {
                    s.waiter = Waiter::Thread(std::thread::current());
                }
                until - now
            };
            // May return early (an unpark meant for an earlier wait, or a
            // spurious wake-up): the loop looks again.
            std::thread::park_timeout(left);
        }
    }
}

impl<R> std::future::Future for Pending<R> {
    type Output = Result<R, NoAnswer>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.0.lock();
        if s.done {
            return Poll::Ready(s.value.take().ok_or(NoAnswer));
        }
        match &s.waiter {
            Waiter::Task(w) if w.will_wake(cx.waker()) => {}
            _ => s.waiter = Waiter::Task(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// Longest the I/O thread waits in place (the default of `--jsvm-wait`).
pub const DEFAULT_WAIT: Duration = Duration::from_micros(200);

/// How long to wait in place for a call, given the mean time the API's
/// recent jobs ran on their VM thread and the configured ceiling: long
/// enough for a usual call and the VM thread's wake-up, and not at all when
/// the API's calls usually take longer than half the ceiling (a script
/// that calls out, say).
pub(crate) fn budget(recent: Duration, ceiling: Duration) -> Duration {
    if ceiling.is_zero() || recent > ceiling / 2 {
        return Duration::ZERO;
    }
    (recent * 4 + Duration::from_micros(50)).min(ceiling)
}

/// An exponentially weighted mean of call times (1/8 weight per call), in
/// nanoseconds: cheap enough to update per call.
pub(crate) fn mix(mean_ns: u64, sample: Duration) -> u64 {
    let s = u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX);
    mean_ns - mean_ns / 8 + s / 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_sent_before_the_wait_is_taken_at_once() {
        let (reply, pending) = slot();
        reply.send(7);
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(pending.wait_until(far).unwrap().unwrap(), 7);
    }

    #[test]
    fn a_blocked_waiter_is_woken_by_the_answer() {
        let (reply, pending) = slot();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            reply.send("done");
        });
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(pending.wait_until(far).unwrap().unwrap(), "done");
        t.join().unwrap();
    }

    #[test]
    fn a_wait_that_ends_first_leaves_the_answer_for_the_future() {
        let (reply, pending) = slot::<u32>();
        assert!(pending.wait_until(Instant::now()).is_none());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            reply.send(3);
        });
        assert_eq!(rt.block_on(pending).unwrap(), 3);
        t.join().unwrap();
    }

    #[test]
    fn a_reply_dropped_unanswered_ends_both_waits() {
        let (reply, pending) = slot::<u32>();
        drop(reply);
        assert!(pending.wait_until(Instant::now()).unwrap().is_err());
        let (reply, pending) = slot::<u32>();
        let t = std::thread::spawn(move || drop(reply));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(rt.block_on(pending).is_err());
        t.join().unwrap();
    }

    #[test]
    fn slow_apis_are_not_waited_for_in_place() {
        let ceiling = DEFAULT_WAIT;
        assert_eq!(
            budget(Duration::from_micros(5), ceiling),
            Duration::from_micros(70)
        );
        assert_eq!(budget(Duration::from_micros(60), ceiling), ceiling);
        assert_eq!(budget(Duration::from_millis(3), ceiling), Duration::ZERO);
        assert_eq!(budget(Duration::ZERO, Duration::ZERO), Duration::ZERO);
        let mut mean = 0;
        for _ in 0..64 {
            mean = mix(mean, Duration::from_micros(8));
        }
        assert!((7_900..=8_000).contains(&mean), "{mean}");
    }
}
