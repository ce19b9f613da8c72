//! A bound on the log lines that requests cause.
//!
//! A middleware that throws, or an upstream that is down, fails every
//! request, and each failure is worth a line. At 10,000 requests a second
//! that is 1.5 MB of log a second (5 GB an hour) and a write per request on
//! the worker, from one broken script. So each source of such lines (one
//! API's middleware on one worker; one worker's proxy failures; a call
//! site) logs at most `--log-rate` lines a second. The lines past it are
//! counted, and the next line let through says how many were left out, so
//! the log still accounts for every failure; `/tyk/stats` counts middleware
//! failures exactly in any case.
//!
//! A [`LogGate`] is a fixed one-second window: the first lines of each
//! second pass. It is consulted only on a failure, never on the common path.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Instant;

/// Lines a second each source may log, unless `--log-rate` says otherwise.
pub const DEFAULT_PER_SECOND: u32 = 10;

/// The bound every gate applies; 0 lets every line through.
static PER_SECOND: AtomicU32 = AtomicU32::new(DEFAULT_PER_SECOND);

/// Sets the bound of every gate (`--log-rate`); 0 lifts it.
pub fn set_per_second(n: u32) {
    PER_SECOND.store(n, Relaxed);
}

/// The bound in force.
pub fn per_second() -> u32 {
    PER_SECOND.load(Relaxed)
}

/// Whole seconds since the first gate was consulted.
fn now_second() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs()
}

/// One source's window. Its counts are atomics, so that a gate can be
/// shared by threads; two lines racing at a window's edge may let one line
/// too many through, never lose a count.
#[derive(Debug, Default)]
pub struct LogGate {
    /// The second the window is in, plus one (0: never used).
    window: AtomicU64,
    /// Lines let through in that second.
    used: AtomicU32,
    /// Lines left out since the last one let through.
    left_out: AtomicU64,
}

impl LogGate {
    /// A gate that has let nothing through yet.
    pub const fn new() -> LogGate {
        LogGate {
            window: AtomicU64::new(0),
            used: AtomicU32::new(0),
            left_out: AtomicU64::new(0),
        }
    }

    /// Whether to log one more line now: `Some(n)` to log it, where `n`
    /// lines were left out before it (say so in the line: [`LeftOut`]);
    /// `None` to leave it out (it is counted).
    pub fn admit(&self) -> Option<u64> {
        self.admit_at(now_second(), per_second())
    }

    fn admit_at(&self, second: u64, limit: u32) -> Option<u64> {
        if limit != 0 {
            let window = second + 1;
            if self.window.swap(window, Relaxed) != window {
                self.used.store(0, Relaxed);
            }
            if self.used.fetch_add(1, Relaxed) >= limit {
                self.left_out.fetch_add(1, Relaxed);
                return None;
            }
        }
        Some(self.left_out.swap(0, Relaxed))
    }
}

/// The note a line carries when lines before it were left out: empty for
/// none, else ` (N like lines left out before this one: --log-rate)`.
#[derive(Debug, Clone, Copy)]
pub struct LeftOut(pub u64);

impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => Ok(()),
            1 => write!(f, " (1 like line left out before this one: --log-rate)"),
            n => write!(f, " ({n} like lines left out before this one: --log-rate)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_second_lets_the_bound_through_and_the_next_line_counts_the_rest() {
        let g = LogGate::new();
        let got: Vec<_> = (0..5).map(|_| g.admit_at(7, 3)).collect();
        assert_eq!(got, [Some(0), Some(0), Some(0), None, None]);
        // A later second: the first line says what was left out, once.
        assert_eq!(g.admit_at(9, 3), Some(2));
        assert_eq!(g.admit_at(9, 3), Some(0));
        // The first second of all (0) is a window too.
        let g = LogGate::new();
        assert_eq!(g.admit_at(0, 1), Some(0));
        assert_eq!(g.admit_at(0, 1), None);
        assert_eq!(g.admit_at(1, 1), Some(1));
    }

    #[test]
    fn no_bound_lets_every_line_through() {
        let g = LogGate::new();
        assert!((0..1000).all(|_| g.admit_at(3, 0) == Some(0)));
        // Lines left out before the bound was lifted are still told.
        let g = LogGate::new();
        g.admit_at(3, 1);
        assert_eq!(g.admit_at(3, 1), None);
        assert_eq!(g.admit_at(3, 0), Some(1));
    }

    #[test]
    fn the_note_reads_as_a_sentence() {
        assert_eq!(LeftOut(0).to_string(), "");
        assert_eq!(
            LeftOut(1).to_string(),
            " (1 like line left out before this one: --log-rate)"
        );
        assert!(LeftOut(12).to_string().contains("12 like lines"));
    }
}
