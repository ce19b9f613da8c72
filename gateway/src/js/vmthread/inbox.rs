//! How jobs reach their VM thread: a queue and one wake-up.
//!
//! The I/O side puts a job at the back and unparks the VM thread (one futex
//! wake, and none when the thread is not parked); the VM thread takes jobs
//! from the front until none is left, then parks. Jobs sent while it runs
//! are taken without a wake-up, so the calls of one reactor turn cost one
//! hand-off between them, not one each.
//!
//! A slot and a futex replaced `std::sync::mpsc`, measured (`perf`, boa
//! persistent, `--threads 1`, ab -c 10): its receiver spins and calls
//! `sched_yield` before it parks, and its waker list is a mutex that the
//! sender's notification and the receiver's registration met on (a
//! contended lock, so a third futex sleep), which made ~3.4 context
//! switches per call where two (there and back) are the floor.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread::Thread;

/// The queue both sides share.
pub(super) struct Inbox<J> {
    jobs: Mutex<VecDeque<J>>,
    /// Set by the I/O side when it lets go of the thread (shutdown,
    /// abandonment): the thread exits once its current job is done.
    closed: AtomicBool,
    /// Cleared by the VM thread as it exits (whatever ends it): a job sent
    /// after that would never run.
    alive: AtomicBool,
}

impl<J> Inbox<J> {
    pub(super) fn new() -> Inbox<J> {
        Inbox {
            jobs: Mutex::new(VecDeque::new()),
            closed: AtomicBool::new(false),
            alive: AtomicBool::new(true),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<J>> {
        // The lock is held for a push or a pop only, neither of which
        // panics short of running out of memory.
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `job` at the back and wakes `thread`; hands the job back if the
    /// thread has exited.
    pub(super) fn send(&self, thread: &Thread, job: J) -> Result<(), J> {
        if !self.alive.load(Ordering::Acquire) {
            return Err(job);
        }
        self.queue().push_back(job);
        // The thread may have exited between the look above and the push:
        // `exited` clears `alive` before it empties the queue under the same
        // lock, so either it dropped this job or this load sees it gone.
        if !self.alive.load(Ordering::Acquire) {
            if let Some(job) = self.queue().pop_back() {
                return Err(job);
            }
        }
        thread.unpark();
        Ok(())
    }

    /// Takes out every job not yet started (the thread is being
    /// abandoned): dropped, each tells its caller it did not run.
    pub(super) fn drain(&self) -> VecDeque<J> {
        std::mem::take(&mut *self.queue())
    }

    /// Lets the thread go: it exits when it next looks for a job.
    pub(super) fn close(&self, thread: &Thread) {
        self.closed.store(true, Ordering::Release);
        thread.unpark();
    }

    /// On the VM thread: the next job, parked for until one comes; `None`
    /// once the inbox is closed.
    pub(super) fn recv(&self) -> Option<J> {
        loop {
            if let Some(job) = self.queue().pop_front() {
                return Some(job);
            }
            if self.closed.load(Ordering::Acquire) {
                return None;
            }
            // A job or a close that comes after the look above has left its
            // unpark token: this returns at once. It may also return
            // spuriously; the loop looks again.
            std::thread::park();
        }
    }

    /// On the VM thread as it exits: no more jobs are taken, and those
    /// still queued are dropped here (their answer slots then tell their
    /// callers they did not run).
    pub(super) fn exited(&self) {
        self.alive.store(false, Ordering::Release);
        let left = std::mem::take(&mut *self.queue());
        drop(left);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn jobs_sent_one_at_a_time_or_in_a_burst_arrive_in_order_and_close_ends_the_loop() {
        let inbox = Arc::new(Inbox::<u32>::new());
        let (tx, rx) = std::sync::mpsc::channel();
        let i = inbox.clone();
        let t = std::thread::spawn(move || {
            while let Some(j) = i.recv() {
                tx.send(j).unwrap();
            }
            i.exited();
        });
        for n in 0..1000 {
            inbox.send(t.thread(), n).unwrap();
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), n);
        }
        // Sent in a burst, they arrive in order.
        for n in 1000..1100 {
            inbox.send(t.thread(), n).unwrap();
        }
        for n in 1000..1100 {
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), n);
        }
        inbox.close(t.thread());
        let thread = t.thread().clone();
        t.join().unwrap();
        assert_eq!(inbox.send(&thread, 7), Err(7), "a job for an exited thread");
    }

    #[test]
    fn drain_takes_every_queued_job_and_the_thread_then_finds_none() {
        let inbox = Inbox::<u32>::new();
        let me = std::thread::current();
        for n in 0..5 {
            inbox.send(&me, n).unwrap();
        }
        assert_eq!(Vec::from(inbox.drain()), vec![0, 1, 2, 3, 4]);
        inbox.close(&me);
        assert_eq!(inbox.recv(), None);
    }
}
