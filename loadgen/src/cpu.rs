//! CPU time of other processes and of loadgen itself, in nanoseconds.
//!
//! Linux exposes a per-process CPU clock (`clock_getcpuclockid`) that sums
//! user and system time of every thread, including threads that exited, with
//! nanosecond resolution. `/proc/PID/stat` counts in 10 ms ticks, which is 1%
//! of a one-second run; the clock is what makes short runs comparable.

use std::time::Duration;

/// CPU time consumed so far by process `pid` (user + system, all threads).
pub fn process_cpu(pid: u32) -> std::io::Result<Duration> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "pid out of range"))?;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid out-pointer for the duration of the call.
    let rc = unsafe { libc::clock_getcpuclockid(pid, &mut clock) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    read_clock(clock)
}

/// CPU time consumed so far by this process.
pub fn own_cpu() -> Duration {
    read_clock(libc::CLOCK_PROCESS_CPUTIME_ID).unwrap_or_default()
}

fn read_clock(clock: libc::clockid_t) -> std::io::Result<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// A CPU measurement of one process over a run.
#[derive(Debug, Clone)]
pub struct CpuUsage {
    /// The process.
    pub pid: u32,
    /// CPU time consumed between the two samples, or why it could not be read.
    pub cpu: Result<Duration, String>,
}

/// Samples taken at the start of a run, finished at its end.
pub struct CpuProbe {
    start: Vec<(u32, std::io::Result<Duration>)>,
    own: Duration,
}

impl CpuProbe {
    /// Takes the starting samples.
    pub fn start(pids: &[u32]) -> Self {
        CpuProbe {
            start: pids.iter().map(|&p| (p, process_cpu(p))).collect(),
            own: own_cpu(),
        }
    }

    /// Takes the end samples: per process usage, and loadgen's own.
    pub fn finish(self) -> (Vec<CpuUsage>, Duration) {
        let own = own_cpu().saturating_sub(self.own);
        let usage = self
            .start
            .into_iter()
            .map(|(pid, start)| {
                let cpu = match (start, process_cpu(pid)) {
                    (Ok(a), Ok(b)) => Ok(b.saturating_sub(a)),
                    (Err(e), _) | (_, Err(e)) => {
                        Err(format!("cannot read CPU time of pid {pid}: {e}"))
                    }
                };
                CpuUsage { pid, cpu }
            })
            .collect();
        (usage, own)
    }
}
