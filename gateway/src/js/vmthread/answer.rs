//! One VM-thread job's slot: the job until it starts, then its answer,
//! and how the I/O task awaits it.
//!
//! A job may sit in its thread's inbox behind others ([`super::inbox`]):
//! the slot holds it until the VM thread starts it, which it does only if
//! its caller still wants it ([`Reply::start`]). A caller that gives up on
//! a job not yet started ([`Pending::cancel`], or dropping its end: the
//! client went away) takes it back, so it never runs and never holds the
//! thread. A job dropped unstarted (its thread was abandoned or exited
//! with the job still queued) ends with [`NoAnswer::Unrun`], and its
//! caller takes it back ([`Pending::take_back`]) to send it elsewhere.
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

struct State<R, J> {
    /// The job, until the VM thread starts it (or its caller takes it
    /// back).
    job: Option<J>,
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
struct Shared<R, J>(Mutex<State<R, J>>);

impl<R, J> Shared<R, J> {
    fn lock(&self) -> MutexGuard<'_, State<R, J>> {
        // No code runs with the lock held that could panic; a poisoned lock
        // still holds a consistent state.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The VM thread's end: answers once. Dropped unanswered (the job
/// panicked), it tells the waiter so.
pub(crate) struct Reply<R, J>(Option<Arc<Shared<R, J>>>);

/// The I/O thread's end.
pub(crate) struct Pending<R, J>(Arc<Shared<R, J>>);

/// A new slot holding `job`.
pub(crate) fn slot<R, J>(job: J) -> (Reply<R, J>, Pending<R, J>) {
    let shared = Arc::new(Shared(Mutex::new(State {
        job: Some(job),
        value: None,
        done: false,
        started: false,
        cancelled: false,
        waiter: None,
    })));
    (Reply(Some(shared.clone())), Pending(shared))
}

impl<R, J> Reply<R, J> {
    /// On the VM thread: the job to run, if its caller still wants it.
    /// From here on [`Pending::cancel`] cannot take it back.
    pub(crate) fn start(&self) -> Option<J> {
        let shared = self.0.as_ref()?;
        let mut s = shared.lock();
        if s.cancelled {
            return None;
        }
        s.started = true;
        s.job.take()
    }

    /// Hands the answer over and wakes whoever waits for it.
    pub(crate) fn send(mut self, value: R) {
        if let Some(shared) = self.0.take() {
            finish(&shared, Some(value));
        }
    }
}

impl<R, J> Drop for Reply<R, J> {
    fn drop(&mut self) {
        if let Some(shared) = self.0.take() {
            finish(&shared, None);
        }
    }
}

fn finish<R, J>(shared: &Shared<R, J>, value: Option<R>) {
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

impl<R, J> Pending<R, J> {
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

    /// The job back, if it never started (after [`NoAnswer::Unrun`]).
    pub(crate) fn take_back(&self) -> Option<J> {
        let mut s = self.0.lock();
        if s.started {
            return None;
        }
        s.job.take()
    }
}

/// A caller gone before its job started (its client closed the
/// connection) takes the job back: it never runs.
impl<R, J> Drop for Pending<R, J> {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl<R, J> std::future::Future for Pending<R, J> {
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
        let (reply, pending) = slot(());
        assert!(reply.start().is_some());
        reply.send(7);
        assert_eq!(block_on(pending).unwrap(), 7);
    }

    #[test]
    fn an_awaiting_task_is_woken_by_the_answer() {
        let (reply, pending) = slot(());
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(reply.start().is_some());
            reply.send("done");
        });
        assert_eq!(block_on(pending).unwrap(), "done");
        t.join().unwrap();
    }

    #[test]
    fn a_job_taken_back_before_it_started_never_starts() {
        let (reply, pending) = slot::<u32, ()>(());
        assert!(pending.cancel());
        assert!(reply.start().is_none(), "a cancelled job started");
        // Dropping the caller's end takes it back too.
        let (reply, pending) = slot::<u32, ()>(());
        drop(pending);
        assert!(reply.start().is_none());
    }

    #[test]
    fn a_started_job_cannot_be_taken_back_and_still_answers() {
        let (reply, pending) = slot::<u32, ()>(());
        assert!(reply.start().is_some());
        assert!(pending.started());
        assert!(!pending.cancel());
        reply.send(3);
        assert_eq!(block_on(pending).unwrap(), 3);
    }

    #[test]
    fn a_reply_dropped_says_whether_its_job_ran() {
        let (reply, pending) = slot::<u32, ()>(());
        drop(reply);
        assert_eq!(block_on(pending), Err(NoAnswer::Unrun));
        let (reply, pending) = slot::<u32, ()>(());
        let t = std::thread::spawn(move || {
            assert!(reply.start().is_some());
            drop(reply);
        });
        assert_eq!(block_on(pending), Err(NoAnswer::Panicked));
        t.join().unwrap();
    }
}
