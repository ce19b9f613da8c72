//! Promise jobs on boa: what a call queues (a `.then` reaction, the rest of
//! an `async` function after an `await`) runs after the host has read the
//! call's answer, before the call ends, within its deadline. Tyk's goja
//! does the same (it runs its job queue when the call into the VM
//! returns), and its answer is JSON text by then, so a job cannot change
//! it; here the answer is read first for the same reason.
//!
//! boa's own executor keeps every job until someone runs its queue, and
//! nothing did: each `.then` a persistent context saw stayed queued with
//! all it captured, and the heap grew until `--jsvm-memory` rebuilt the
//! context (QuickJS's queue filled the same way, `quickjs/engine.rs`).
//!
//! Between two jobs the call's limits are checked ([`Guard`]): a chain of
//! jobs that never ends (each queuing the next) stops at the deadline, the
//! rest is dropped and the call fails as a timeout. One job runs as a
//! builtin's callback does: boa cannot stop it inside (its loop limit and,
//! on a VM thread, the deadline's abandonment bound it, as the README's
//! guarantees table says).
//!
//! Jobs boa makes only with a runtime this host does not install (timers)
//! or for `FinalizationRegistry` cleanups are dropped, not run.
//!
//! WeakRef targets a call kept alive (`new WeakRef(x)`, `deref()`) are let
//! go when the call ends, as the spec's `ClearKeptObjects` says. boa clears
//! them only in its own job loop, so without this every target of every
//! call stayed alive.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use boa_engine::job::{GenericJob, Job, JobExecutor, PromiseJob};
use boa_engine::{Context, JsError, JsResult};

use super::budget::{Guard, Stop};

/// Jobs between two full checks of the call's limits.
const FULL_CHECK: u64 = 16;

/// The queue of one context's promise jobs ([`JobExecutor`]).
#[derive(Default)]
pub(crate) struct Queue {
    jobs: RefCell<VecDeque<Queued>>,
}

enum Queued {
    Promise(PromiseJob),
    Generic(GenericJob),
}

/// Why [`Queue::run`] stopped before the queue was empty.
pub(crate) enum Stopped {
    /// The call's deadline or memory limit (the rest was dropped).
    Limit(Stop),
    /// A job ended abruptly (a reaction's own throw rejects its promise
    /// instead: this is the engine's error, such as a runtime limit).
    Error(JsError),
}

impl Queue {
    /// Runs the queued jobs, oldest first (and the ones they queue), until
    /// none is left or `guard` says stop. Then lets go of the WeakRef
    /// targets the call kept.
    pub(crate) fn run(&self, ctx: &mut Context, mut guard: Guard) -> Result<(), Stopped> {
        let r = self.run_all(ctx, &mut guard);
        ctx.clear_kept_objects();
        if r.is_err() {
            self.jobs.borrow_mut().clear();
        }
        r
    }

    fn run_all(&self, ctx: &mut Context, guard: &mut Guard) -> Result<(), Stopped> {
        let mut n = 0u64;
        loop {
            // Popped before the call: a job queues more into this queue.
            let Some(job) = self.jobs.borrow_mut().pop_front() else {
                return Ok(());
            };
            // The deadline before every job; the memory limits (a
            // syscall) before every [`FULL_CHECK`]th.
            if n.is_multiple_of(FULL_CHECK) {
                guard.check().map_err(Stopped::Limit)?;
            } else if guard.expired() {
                return Err(Stopped::Limit(Stop::Timeout));
            }
            let r = match job {
                Queued::Promise(j) => j.call(ctx),
                Queued::Generic(j) => j.call(ctx),
            };
            r.map_err(Stopped::Error)?;
            n += 1;
        }
    }

    /// How many jobs are queued.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.jobs.borrow().len()
    }
}

impl JobExecutor for Queue {
    fn enqueue_job(self: Rc<Self>, job: Job, _: &mut Context) {
        let queued = match job {
            Job::PromiseJob(j) => Queued::Promise(j),
            Job::GenericJob(j) => Queued::Generic(j),
            _ => return,
        };
        self.jobs.borrow_mut().push_back(queued);
    }

    /// `Context::run_jobs`, which the host does not call: runs the queue
    /// without limits.
    fn run_jobs(self: Rc<Self>, ctx: &mut Context) -> JsResult<()> {
        let far = std::time::Instant::now() + std::time::Duration::from_secs(3600);
        match self.run(ctx, Guard::new(far, 0)) {
            Ok(()) | Err(Stopped::Limit(_)) => Ok(()),
            Err(Stopped::Error(e)) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boa_engine::context::ContextBuilder;
    use boa_engine::Source;
    use std::time::{Duration, Instant};

    fn context() -> (Context, Rc<Queue>) {
        let queue = Rc::new(Queue::default());
        let ctx = ContextBuilder::new()
            .job_executor(queue.clone())
            .build()
            .unwrap();
        (ctx, queue)
    }

    fn guard(ms: u64) -> Guard {
        Guard::new(Instant::now() + Duration::from_millis(ms), 0)
    }

    #[test]
    fn reactions_run_in_order_with_the_ones_they_queue() {
        let (mut ctx, queue) = context();
        ctx.eval(Source::from_bytes(
            "var seen = []; \
             Promise.resolve(1).then(v => { seen.push(v); return 2; }).then(v => seen.push(v)); \
             (async () => { seen.push('a'); await null; seen.push('b'); })(); \
             seen.push('sync');",
        ))
        .unwrap();
        assert!(queue.len() > 0);
        assert!(queue.run(&mut ctx, guard(5_000)).is_ok());
        assert_eq!(queue.len(), 0);
        let seen = ctx.eval(Source::from_bytes("seen.join()")).unwrap();
        assert_eq!(
            seen.as_string().unwrap().to_std_string_escaped(),
            "a,sync,1,b,2"
        );
    }

    #[test]
    fn a_chain_that_never_ends_stops_at_the_deadline_and_is_dropped() {
        let (mut ctx, queue) = context();
        ctx.eval(Source::from_bytes(
            "var n = 0; function again() { n++; Promise.resolve().then(again); } again();",
        ))
        .unwrap();
        match queue.run(&mut ctx, guard(100)) {
            Err(Stopped::Limit(Stop::Timeout)) => {}
            _ => panic!("expected the deadline to stop the chain"),
        }
        assert_eq!(queue.len(), 0);
        let n = ctx
            .eval(Source::from_bytes("n"))
            .unwrap()
            .as_number()
            .unwrap();
        assert!(n > 1.0, "the chain ran {n} times");
        // The context goes on.
        let v = ctx.eval(Source::from_bytes("1 + 1")).unwrap();
        assert_eq!(v.as_number(), Some(2.0));
    }

    #[test]
    fn a_reaction_that_throws_rejects_its_promise() {
        let (mut ctx, queue) = context();
        ctx.eval(Source::from_bytes(
            "var caught = ''; \
             Promise.resolve().then(() => { throw new Error('in a job'); }) \
               .catch(e => { caught = e.message; });",
        ))
        .unwrap();
        assert!(queue.run(&mut ctx, guard(5_000)).is_ok());
        let caught = ctx.eval(Source::from_bytes("caught")).unwrap();
        assert_eq!(
            caught.as_string().unwrap().to_std_string_escaped(),
            "in a job"
        );
    }
}
