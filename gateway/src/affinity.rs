//! Worker threads pinned to cores (`--cpu-affinity`), and their VM threads
//! beside them.
//!
//! A JS call on a VM thread is a hand-off between two threads (`js/
//! vmthread.rs`). Where the kernel runs the woken thread decides what that
//! costs: on this project's 2-core test VM a futex round trip between two
//! threads on one core costs ~6 µs of CPU, and ~30 µs (44 µs of wall time)
//! when the woken thread lands on the other, idle core (an inter-processor
//! interrupt and a vCPU wake-up each way; `gateway/benches/wakeup_cost.c`: two threads
//! ping-ponging through a futex). Left alone, the scheduler often picks the
//! other core. Measured through the gateway (`gateway/benches/
//! js_placement.sh`, release, `--threads 1`, ab -c 10, 7 alternated
//! rounds; gateway CPU per request over the native plugin's, median): boa
//! on its VM thread +76 µs unpinned, +52 µs pinned, and its mean call time
//! (hand-off included) 755 µs unpinned, 84 µs pinned.
//!
//! So each worker pins itself to one core of the CPUs the process may use
//! (round robin, worker *i* on the *i*-th allowed CPU), before it builds its
//! JS contexts: threads inherit their creator's mask, so every VM thread a
//! worker starts runs on its worker's core, and a hand-off never crosses
//! cores. This is nginx's `worker_cpu_affinity auto`. A VM thread that is
//! abandoned (a script stuck in a native step past its deadline) gets the
//! process's whole mask back, so it burns an idle core rather than its
//! worker's. `--cpu-affinity off` leaves placement to the kernel.
//!
//! Only a worker with VM threads gains from it. Without one, a pinned
//! worker is just a thread the scheduler cannot move off a core the load
//! generator and the upstream need: measured on that VM (release, `--threads
//! 2`, /plain/, `ab -n 10000 -c 10`, 15 alternated rounds, CPU per request
//! minus nginx's with 2 workers, `gateway/benches/proxy_cost.py`), pinned
//! +5.14 µs (95% 4.45 to 5.82), unpinned +2.23 (0.20 to 4.26). So `auto`
//! pins only when some API runs JS on VM threads ([`worth_pinning`]).

use std::sync::OnceLock;

use crate::config::{ApiSpec, Driver, Placement};

/// Whether pinning pays for these APIs: some run JS (middleware or virtual
/// endpoints) on VM threads (`--jsvm-threads` above 0, or the definition's
/// `placement` says so). QuickJS APIs start inline but may move to a VM
/// thread at run time, so they count too; an API placed `inline` does not.
pub fn worth_pinning<'a>(jsvm_threads: usize, apis: impl IntoIterator<Item = &'a ApiSpec>) -> bool {
    apis.into_iter()
        .filter(|a| a.driver == Some(Driver::Js) || !a.virtual_endpoints.is_empty())
        .any(|a| match a.placement {
            None => jsvm_threads > 0,
            Some(Placement::Inline) => false,
            Some(Placement::Threads | Placement::Adaptive) => true,
        })
}

/// The CPUs the process was allowed to run on at start (its affinity mask,
/// as `taskset` or a cgroup cpuset left it), in ascending order.
pub fn allowed() -> &'static [usize] {
    static ALLOWED: OnceLock<Vec<usize>> = OnceLock::new();
    ALLOWED.get_or_init(|| {
        // SAFETY: a zeroed cpu_set_t is a valid empty set, and
        // sched_getaffinity writes at most its size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    })
}

/// The CPU worker `index` is pinned to, `None` when nothing is known.
pub fn worker_cpu(index: usize) -> Option<usize> {
    let cpus = allowed();
    (!cpus.is_empty()).then(|| cpus[index % cpus.len()])
}

/// Pins the calling thread to `cpu`.
pub fn pin_current(cpu: usize) -> std::io::Result<()> {
    set(0, &[cpu])
}

/// Gives thread `tid` the process's whole starting mask back.
pub fn release(tid: libc::pid_t) {
    let cpus = allowed();
    if !cpus.is_empty() {
        // A thread that has just exited fails with ESRCH: nothing to do.
        let _ = set(tid, cpus);
    }
}

fn set(tid: libc::pid_t, cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: as in `allowed`; CPU_SET is given indices below CPU_SETSIZE
    // only (they came from a mask of that size).
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut mask) };
    }
    let size = std::mem::size_of::<libc::cpu_set_t>();
    if unsafe { libc::sched_setaffinity(tid, size, &mask) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_on_its_cpu_and_a_released_one_anywhere() {
        let cpus = allowed();
        assert!(!cpus.is_empty(), "the process has an affinity mask");
        let last = *cpus.last().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            pin_current(last).unwrap();
            // SAFETY: no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            let on = unsafe { libc::sched_getcpu() };
            assert_eq!(on as usize, last);
            std::thread::sleep(std::time::Duration::from_millis(50));
        });
        let tid = rx.recv().unwrap();
        assert_eq!(mask_of(tid), vec![last]);
        release(tid);
        assert_eq!(mask_of(tid), cpus);
        t.join().unwrap();
        assert_eq!(worker_cpu(cpus.len()), Some(cpus[0]));
    }

    fn mask_of(tid: libc::pid_t) -> Vec<usize> {
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        assert_eq!(unsafe { libc::sched_getaffinity(tid, size, &mut set) }, 0);
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    }
}
