//! How a job reaches its VM thread: one slot and one wake-up.
//!
//! A lane runs one job at a time (its I/O-side lock), so a VM thread never
//! has more than one job waiting: a slot is all it needs, not a queue. The
//! I/O thread puts the job in and unparks the VM thread (one futex wake,
//! and none when the thread is not parked); the VM thread takes it, or
//! parks until one comes.
//!
//! This replaced `std::sync::mpsc`, measured (`perf`, boa persistent,
//! `--threads 1`, ab -c 10): its receiver spins and calls `sched_yield`
//! before it parks, and its waker list is a mutex that the sender's
//! notification and the receiver's registration met on (a contended lock,
//! so a third futex sleep), which made ~3.4 context switches per call
//! where two (there and back) are the floor.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread::Thread;

/// The slot both sides share.
pub(super) struct Inbox<J> {
    job: Mutex<Option<J>>,
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
            job: Mutex::new(None),
            closed: AtomicBool::new(false),
            alive: AtomicBool::new(true),
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<J>> {
        // The lock is held for a swap only, which cannot panic.
        self.job.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `job` in and wakes `thread`; hands the job back if the thread
    /// has exited.
    pub(super) fn send(&self, thread: &Thread, job: J) -> Result<(), J> {
        if !self.alive.load(Ordering::Acquire) {
            return Err(job);
        }
        *self.slot() = Some(job);
        // The thread may have exited between the look above and the put:
        // `exited` clears `alive` before it empties the slot under the same
        // lock, so either it dropped this job or this load sees it gone.
        if !self.alive.load(Ordering::Acquire) {
            if let Some(job) = self.slot().take() {
                return Err(job);
            }
        }
        thread.unpark();
        Ok(())
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
            if let Some(job) = self.slot().take() {
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

    /// On the VM thread as it exits: no more jobs are taken, and one sent
    /// in the meantime is dropped here (its answer slot then tells the
    /// waiter there is no answer).
    pub(super) fn exited(&self) {
        self.alive.store(false, Ordering::Release);
        drop(self.slot().take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn jobs_sent_one_at_a_time_all_arrive_and_close_ends_the_loop() {
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
        inbox.close(t.thread());
        let thread = t.thread().clone();
        t.join().unwrap();
        assert_eq!(inbox.send(&thread, 7), Err(7), "a job for an exited thread");
    }
}
