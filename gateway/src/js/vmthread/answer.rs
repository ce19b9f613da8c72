//! The answer of one VM-thread job, and how the I/O task awaits it.
//!
//! A job may sit in its thread's inbox behind others ([`super::inbox`]):
//! the slot also tells the two sides whether the job has started. The VM
//! thread starts a job only if its caller still wants it ([`Reply::start`]);
//! a caller that gives up on a job not yet started ([`Pending::cancel`], or
//! dropping its end: the client went away) takes it back, so it never runs
//! and never holds the thread. A job dropped unstarted (its thread was
//! abandoned or exited with the job still queued) ends with
//! [`NoAnswer::Unrun`], which the pool answers by running it elsewhere.
//!
//! The I/O task awaits the answer asynchronously: the VM thread wakes it
//! through its runtime. An earlier design blocked the I/O thread on a futex
//! for a quick answer instead ("in place"), which saved a reactor turn per
//! call but held every other connection of the worker for it: requests
//! that came meanwhile could not join the thread's inbox, so every call
//! cost its own two context switches. Awaiting lets the calls of one
//! reactor turn queue up and the VM thread run them in one go (see
//! `vmthread.rs` for the figures).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

struct State<R> {
    /// The answer; `None` with `done` set means the job ended without one
    /// (it panicked, or was dropped unstarted: see `started`).
    value: Option<R>,
    done: bool,
    /// The VM thread has started the job: it can no longer be taken back.
    started: bool,
    /// The caller took the job back before it started: it will not run.
    cancelled: bool,
    /// The I/O task awaiting the answer.
    waiter: Option<Waker>,
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
        started: false,
        cancelled: false,
        waiter: None,
    })));
    (Reply(Some(shared.clone())), Pending(shared))
}

impl<R> Reply<R> {
    /// On the VM thread, before running the job: whether its caller still
    /// wants it. From here on [`Pending::cancel`] cannot take it back.
    pub(crate) fn start(&self) -> bool {
        let Some(shared) = &self.0 else {
            return false;
        };
        let mut s = shared.lock();
        if s.cancelled {
            return false;
        }
        s.started = true;
        true
    }

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
        s.waiter.take()
    };
    // Woken outside the lock, so the woken side never blocks on it.
    if let Some(w) = waiter {
        w.wake();
    }
}

/// Why a job ended without an answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NoAnswer {
    /// It was dropped before it started (its thread was abandoned or
    /// exited with the job in its inbox): it may run elsewhere.
    Unrun,
    /// It started and did not answer (it panicked).
    Panicked,
}

impl<R> Pending<R> {
    /// Whether the VM thread has started the job.
    pub(crate) fn started(&self) -> bool {
        self.0.lock().started
    }

    /// Takes the job back if it has not started: it will not run. `false`
    /// if it has (or has ended): its answer is still to come.
    pub(crate) fn cancel(&self) -> bool {
        let mut s = self.0.lock();
        if s.started || s.done {
            return false;
        }
        s.cancelled = true;
        true
    }
}

/// A caller gone before its job started (its client closed the
/// connection) takes the job back: it never runs.
impl<R> Drop for Pending<R> {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl<R> std::future::Future for Pending<R> {
    type Output = Result<R, NoAnswer>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.0.lock();
        if s.done {
            let no = if s.started {
                NoAnswer::Panicked
            } else {
                NoAnswer::Unrun
            };
            return Poll::Ready(s.value.take().ok_or(no));
        }
        match &s.waiter {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waiter = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn an_answer_sent_before_the_await_is_taken_at_once() {
        let (reply, pending) = slot();
        assert!(reply.start());
        reply.send(7);
        assert_eq!(block_on(pending).unwrap(), 7);
    }

    #[test]
    fn an_awaiting_task_is_woken_by_the_answer() {
        let (reply, pending) = slot();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(reply.start());
            reply.send("done");
        });
        assert_eq!(block_on(pending).unwrap(), "done");
        t.join().unwrap();
    }

    #[test]
    fn a_job_taken_back_before_it_started_never_starts() {
        let (reply, pending) = slot::<u32>();
        assert!(pending.cancel());
        assert!(!reply.start(), "a cancelled job started");
        // Dropping the caller's end takes it back too.
        let (reply, pending) = slot::<u32>();
        drop(pending);
        assert!(!reply.start());
    }

    #[test]
    fn a_started_job_cannot_be_taken_back_and_still_answers() {
        let (reply, pending) = slot::<u32>();
        assert!(reply.start());
        assert!(pending.started());
        assert!(!pending.cancel());
        reply.send(3);
        assert_eq!(block_on(pending).unwrap(), 3);
    }

    #[test]
    fn a_reply_dropped_says_whether_its_job_ran() {
        let (reply, pending) = slot::<u32>();
        drop(reply);
        assert_eq!(block_on(pending), Err(NoAnswer::Unrun));
        let (reply, pending) = slot::<u32>();
        let t = std::thread::spawn(move || {
            assert!(reply.start());
            drop(reply);
        });
        assert_eq!(block_on(pending), Err(NoAnswer::Panicked));
        t.join().unwrap();
    }
}
