//! Middleware call-time histograms, per API, hook and middleware.
//!
//! Each worker thread records into its own counts per middleware entry
//! ([`CallCounts`]: HDR histogram buckets as relaxed atomic counters), so the
//! hot path takes no lock and never waits for another worker. Readers
//! (`GET /tyk/stats`, the bench) turn each worker's counts into an
//! `hdrhistogram::Histogram` of the same buckets and merge them. Values are
//! nanoseconds: a native call takes well under a microsecond.
//!
//! Beside the times, each API counts its middleware failures by kind
//! ([`ErrorCounter`]): the same per-worker registration, with atomic
//! counters since a failure is rare and a count needs no lock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::middleware::{Hook, MwErrorKind};

type Key = (String, Hook, String);
type Shared = Arc<CallCounts>;
type Counts = Arc<[AtomicU64; MwErrorKind::ALL.len()]>;

/// The registry of every recorder and error counter, shared by all workers.
#[derive(Clone, Default)]
pub struct Stats {
    inner: Arc<Mutex<Vec<(Key, Shared)>>>,
    /// The time calls ran on a JS VM thread, per entry and worker
    /// ([`RunRecorder`]): registered at an entry's first such call.
    runs: Arc<Mutex<Vec<(Key, Shared)>>>,
    /// One counter set per worker per API (and per route's own failures).
    errors: Arc<Mutex<Vec<(String, Counts)>>>,
}

/// One worker's failure counts for one API, by [`MwErrorKind`].
#[derive(Clone)]
pub struct ErrorCounter {
    counts: Counts,
}

impl ErrorCounter {
    /// Counts one failure of `kind`.
    pub fn count(&self, kind: MwErrorKind) {
        // Relaxed: each count is independent; readers only sum them.
        self.counts[kind.index()].fetch_add(1, Ordering::Relaxed);
    }
}

/// One API's failures of one kind: the `/tyk/stats` wire format.
pub use gateway_wire::ErrorCount;

/// One worker's histogram for one middleware entry.
#[derive(Clone)]
pub struct CallRecorder {
    counts: Shared,
    clock: &'static quanta::Clock,
}

/// One worker's histogram of the time one entry's calls ran on a JS VM
/// thread: from the moment the thread took the job to its answer, without
/// the hand-off and the wait for the thread that the entry's call time
/// ([`CallRecorder`]) includes. The counts are made at the first recorded
/// job, so entries whose calls never leave the I/O thread (native, wasm,
/// JS inline) hold none.
pub struct RunRecorder {
    stats: Stats,
    key: Key,
    counts: std::cell::OnceCell<Shared>,
}

impl RunRecorder {
    /// Records one job's run time, measured on its VM thread.
    pub fn record(&self, ran: Duration) {
        let counts = self.counts.get_or_init(|| {
            let counts = Arc::new(CallCounts::new());
            self.stats
                .runs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((self.key.clone(), counts.clone()));
            counts
        });
        counts.record(u64::try_from(ran.as_nanos()).unwrap_or(u64::MAX));
    }
}

/// When a timed call started: a raw reading of the call clock
/// ([`CallRecorder::start`]).
#[derive(Clone, Copy, Debug)]
pub struct Started(u64);

/// The clock calls are timed with, made (and calibrated) once per process,
/// when the first recorder is registered: quanta's, which reads the CPU's
/// time-stamp counter where it is invariant (one instruction; scaled to
/// nanoseconds by a multiply and a shift, after a calibration against the
/// OS clock of at most 200 ms), and is the OS monotonic clock elsewhere.
/// `std::time::Instant` is a `clock_gettime` call each read: the two reads
/// and the `Duration` arithmetic of a call cost ~200 instructions, a third
/// of what the seed's native plugin costs to run.
fn call_clock() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

impl CallRecorder {
    /// Now, for a call about to start.
    pub fn start(&self) -> Started {
        Started(self.clock.raw())
    }

    /// Records the call that began at `started` and has just ended.
    #[inline]
    pub fn finish(&self, started: Started) {
        let ns = self.clock.delta_as_nanos(started.0, self.clock.raw());
        self.record_ns(ns);
    }

    /// Records one call's duration.
    pub fn record(&self, d: Duration) {
        self.record_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    #[inline]
    fn record_ns(&self, ns: u64) {
        self.counts.record(ns);
    }
}

/// The largest call time kept, ns (one hour; longer calls count as an
/// hour): covers a 50 ns native call and a JS call that hits a
/// multi-second timeout.
const HIGHEST: u64 = 3_600_000_000_000;

/// log2 of half the slots per power of two: 2,048 slots from each power of
/// two to the next keep 3 significant digits, as an HDR histogram with
/// `sigfig` 3 does.
const HALF_MAGNITUDE: u32 = 10;
const SUB_MASK: u64 = (1 << (HALF_MAGNITUDE + 1)) - 1;

/// One worker's call-time counts for one entry, in the bucket layout of
/// `hdrhistogram` with lowest value 1, [`HIGHEST`] and 3 significant
/// digits (`Histogram::new_with_bounds(1, HIGHEST, 3)`), each slot a
/// relaxed atomic counter.
///
/// Recording was a `Mutex` lock and unlock and HDR's `record` (which also
/// keeps a total, a minimum and a maximum): ~100 instructions a call, a
/// tenth of what the seed's native plugin route adds to a request. Here it
/// is a slot index (a leading-zero count, a shift) and one atomic add,
/// ~15. Readers
/// rebuild an HDR histogram with the same buckets ([`CallCounts::histogram`]),
/// so every summary is what HDR itself reports for the same calls. A
/// reader may see a call in flight on another thread counted or not, as
/// it could not tell the difference before either.
pub(crate) struct CallCounts {
    slots: Box<[AtomicU64]>,
}

impl CallCounts {
    fn new() -> CallCounts {
        CallCounts {
            slots: (0..=slot(HIGHEST)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts one call of `ns` nanoseconds (0 as 1, past [`HIGHEST`] as
    /// [`HIGHEST`], as HDR's `saturating_record` of `ns.max(1)` did).
    #[inline]
    fn record(&self, ns: u64) {
        // Relaxed: each count is independent; readers only sum them.
        self.slots[slot(ns.clamp(1, HIGHEST))].fetch_add(1, Ordering::Relaxed);
    }

    /// These counts as an HDR histogram: each slot's count recorded at the
    /// lowest value of its bucket, which is that same bucket there.
    fn histogram(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for (i, n) in self.slots.iter().enumerate() {
            let n = n.load(Ordering::Relaxed);
            if n > 0 {
                h.saturating_record_n(lowest_of(i), n);
            }
        }
        h
    }

    fn reset(&self) {
        for n in self.slots.iter() {
            n.store(0, Ordering::Relaxed);
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST, 3).expect("valid bounds")
}

/// The slot of `v` (1..=[`HIGHEST`]): HDR's index with unit magnitude 0.
/// Values below 2,048 have a slot each; above, each power of two is split
/// in 1,024 equal buckets.
#[inline(always)]
fn slot(v: u64) -> usize {
    // The power of two above the first 2,048 values that `v` is in (0 for those).
    let bucket = (u64::BITS - HALF_MAGNITUDE - 1) - (v | SUB_MASK).leading_zeros();
    let sub = v >> bucket;
    (((bucket as u64 + 1) << HALF_MAGNITUDE) + sub - (1 << HALF_MAGNITUDE)) as usize
}

/// The lowest value whose [`slot`] is `i`.
fn lowest_of(i: usize) -> u64 {
    let i = i as u64;
    if i <= SUB_MASK {
        return i;
    }
    let bucket = (i >> HALF_MAGNITUDE) - 1;
    let sub = (i & ((1 << HALF_MAGNITUDE) - 1)) + (1 << HALF_MAGNITUDE);
    sub << bucket
}

/// One entry's call times, µs: the `/tyk/stats` wire format, defined once
/// in `gateway-wire` for the gateway and loadgen both.
pub use gateway_wire::{CallSummary, RunSummary};

/// The histograms of `list`, merged over workers per key, in key order.
fn merge(list: &Mutex<Vec<(Key, Shared)>>) -> BTreeMap<Key, Histogram<u64>> {
    let list = list.lock().unwrap_or_else(|p| p.into_inner());
    let mut out: BTreeMap<Key, Histogram<u64>> = BTreeMap::new();
    for (key, counts) in list.iter() {
        let h = counts.histogram();
        match out.get_mut(key) {
            Some(acc) => {
                // Same bounds everywhere, so adding cannot fail.
                let _ = acc.add(&h);
            }
            None => {
                out.insert(key.clone(), h);
            }
        }
    }
    out
}

impl Stats {
    /// A new recorder for one worker's instance of a middleware entry.
    pub fn recorder(&self, api_id: &str, hook: Hook, name: &str) -> CallRecorder {
        let counts = Arc::new(CallCounts::new());
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(((api_id.to_string(), hook, name.to_string()), counts.clone()));
        CallRecorder {
            counts,
            clock: call_clock(),
        }
    }

    /// A recorder of the time one worker's instance of an entry runs its
    /// calls on a VM thread (`/tyk/stats` `vm_thread`).
    pub fn run_recorder(&self, api_id: &str, hook: Hook, name: &str) -> RunRecorder {
        RunRecorder {
            stats: self.clone(),
            key: (api_id.to_string(), hook, name.to_string()),
            counts: std::cell::OnceCell::new(),
        }
    }

    /// Merged histograms, per (api, hook, middleware), in key order.
    pub fn merged(&self) -> BTreeMap<(String, Hook, String), Histogram<u64>> {
        merge(&self.inner)
    }

    /// Per-middleware summaries, in key order.
    pub fn summaries(&self) -> Vec<CallSummary> {
        let us = |ns: u64| ns as f64 / 1000.0;
        let mean_us = |h: &Histogram<u64>| if h.is_empty() { 0.0 } else { h.mean() / 1000.0 };
        let mut runs = merge(&self.runs);
        self.merged()
            .into_iter()
            .map(|(key, h)| {
                let vm_thread = runs
                    .remove(&key)
                    .filter(|r| !r.is_empty())
                    .map(|r| RunSummary {
                        count: r.len(),
                        mean_us: mean_us(&r),
                        p50_us: us(r.value_at_quantile(0.5)),
                        p99_us: us(r.value_at_quantile(0.99)),
                    });
                let (api_id, hook, middleware) = key;
                CallSummary {
                    api_id,
                    hook: hook.as_str().to_string(),
                    middleware,
                    count: h.len(),
                    mean_us: mean_us(&h),
                    p50_us: us(h.value_at_quantile(0.5)),
                    p90_us: us(h.value_at_quantile(0.9)),
                    p99_us: us(h.value_at_quantile(0.99)),
                    max_us: us(h.max()),
                    vm_thread,
                }
            })
            .collect()
    }

    /// A new failure counter for one worker's instance of an API.
    pub fn errors(&self, api_id: &str) -> ErrorCounter {
        let counts: Counts = Arc::new(std::array::from_fn(|_| AtomicU64::new(0)));
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((api_id.to_string(), counts.clone()));
        ErrorCounter { counts }
    }

    /// Failures per API and kind, summed over workers, ordered by API then
    /// kind; kinds with no failure are left out.
    pub fn error_counts(&self) -> Vec<ErrorCount> {
        let inner = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        let mut sums: BTreeMap<(&str, MwErrorKind), u64> = BTreeMap::new();
        for (api, counts) in inner.iter() {
            for kind in MwErrorKind::ALL {
                let n = counts[kind.index()].load(Ordering::Relaxed);
                if n > 0 {
                    *sums.entry((api.as_str(), kind)).or_default() += n;
                }
            }
        }
        sums.into_iter()
            .map(|((api_id, kind), count)| ErrorCount {
                api_id: api_id.to_string(),
                kind: kind.as_str().to_string(),
                count,
            })
            .collect()
    }

    /// The whole `GET /tyk/stats` body.
    pub fn body(&self) -> gateway_wire::StatsBody {
        gateway_wire::StatsBody {
            apis: self.summaries(),
            errors: self.error_counts(),
            js_threads: crate::js::threads_out_of_service(),
        }
    }

    /// Clears every histogram and failure count (the bench resets between
    /// routes).
    pub fn reset(&self) {
        for list in [&self.inner, &self.runs] {
            let list = list.lock().unwrap_or_else(|p| p.into_inner());
            for (_, counts) in list.iter() {
                counts.reset();
            }
        }
        let errors = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        for (_, counts) in errors.iter() {
            for c in counts.iter() {
                c.store(0, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_worker_histograms_merge_by_key() {
        let stats = Stats::default();
        let a = stats.recorder("api", Hook::Pre, "mw");
        let b = stats.recorder("api", Hook::Pre, "mw");
        let c = stats.recorder("api", Hook::Post, "mw");
        a.record(Duration::from_nanos(1000));
        b.record(Duration::from_nanos(3000));
        c.record(Duration::from_micros(7));
        let s = stats.summaries();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].hook.as_str(), s[0].count), ("pre", 2));
        assert!((s[0].max_us - 3.0).abs() < 0.01, "{s:?}");
        assert_eq!((s[1].hook.as_str(), s[1].count), ("post", 1));
        stats.reset();
        assert!(stats.summaries().iter().all(|s| s.count == 0));
    }

    /// A VM thread's job times merge per entry like the call times, sit
    /// beside them in the entry's summary, and are absent for an entry
    /// none of whose jobs ran (made before any call, or reset).
    #[test]
    fn vm_thread_run_times_join_their_entry() {
        let stats = Stats::default();
        let call = stats.recorder("api", Hook::Pre, "mw");
        let other = stats.recorder("api", Hook::Post, "mw");
        let (a, b) = (
            stats.run_recorder("api", Hook::Pre, "mw"),
            stats.run_recorder("api", Hook::Pre, "mw"),
        );
        let _unused = stats.run_recorder("api", Hook::Post, "mw");
        assert!(stats.summaries().iter().all(|s| s.vm_thread.is_none()));
        for _ in 0..3 {
            call.record(Duration::from_micros(20));
            other.record(Duration::from_micros(1));
        }
        a.record(Duration::from_micros(4));
        b.record(Duration::from_micros(6));
        let s = stats.summaries();
        assert_eq!((s[0].hook.as_str(), s[0].count), ("pre", 3));
        let vm = s[0].vm_thread.as_ref().expect("pre ran on a VM thread");
        assert_eq!(vm.count, 2);
        assert!((vm.mean_us - 5.0).abs() < 0.01, "{vm:?}");
        assert!((vm.p99_us - 6.0).abs() < 0.01, "{vm:?}");
        assert_eq!((s[1].hook.as_str(), &s[1].vm_thread), ("post", &None));
        stats.reset();
        assert!(stats.summaries().iter().all(|s| s.vm_thread.is_none()));
    }

    /// The call clock (the TSC, scaled) agrees with the OS clock: a call
    /// timed by the recorder inside an interval the OS clock times lasts
    /// no longer than that interval (unscaled ticks would read ~2-4x it),
    /// and at least as long as the sleep inside it.
    #[test]
    fn a_timed_call_reads_in_nanoseconds_on_the_os_clock_scale() {
        let stats = Stats::default();
        let rec = stats.recorder("api", Hook::Pre, "mw");
        let sleep = Duration::from_millis(20);
        let outer = std::time::Instant::now();
        let started = rec.start();
        std::thread::sleep(sleep);
        rec.finish(started);
        let outer = outer.elapsed();
        let s = &stats.summaries()[0];
        let timed_us = s.max_us;
        // The histogram keeps 3 significant digits: 0.1% either way.
        let (low, high) = (sleep.as_secs_f64() * 1e6, outer.as_secs_f64() * 1e6);
        assert!(
            timed_us >= low * 0.999 && timed_us <= high * 1.002 + 1.0,
            "timed {timed_us} µs; slept {low} µs inside an interval of {high} µs"
        );
    }

    /// Values spread over every bucket: each power of two from 1 to past
    /// [`HIGHEST`], at its ends and a few points between, and a
    /// pseudo-random walk of 20,000 more (a fixed xorshift: reproducible).
    fn spread() -> Vec<u64> {
        let mut out = vec![0, 1, 2, 2047, 2048, 2049, 4095, 4096, HIGHEST - 1, HIGHEST];
        out.extend([HIGHEST + 1, u64::MAX]);
        for p in 0..63 {
            let b = 1u64 << p;
            out.extend([b - 1, b, b + 1, b + b / 3, b + b / 2 + 7]);
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Log-uniform over 1 ns .. ~4.4e12 ns.
            out.push((x >> 22) >> (x % 42));
        }
        out
    }

    /// The lock-free counts use HDR's own buckets: every value lands in the
    /// slot HDR indexes it by, and the histogram rebuilt from the counts
    /// equals the one HDR makes from the same values (counts, total,
    /// minimum, maximum, and so every summary `/tyk/stats` reports); 0
    /// counts as 1 and anything past an hour as an hour.
    #[test]
    fn the_atomic_counts_keep_hdr_buckets_exactly() {
        let counts = CallCounts::new();
        let mut direct = new_histogram();
        let values = spread();
        for &v in &values {
            counts.record(v);
            // HDR would count a value past `HIGHEST` (but inside its last
            // power of two) where it falls; these counts keep it at `HIGHEST`.
            direct.record(v.clamp(1, HIGHEST)).expect("in range");
        }
        assert!(counts.slots.len() <= direct.distinct_values());
        for &v in &values {
            let v = v.clamp(1, HIGHEST);
            let i = slot(v);
            let low = lowest_of(i);
            assert!(
                low <= v && direct.equivalent(low, v),
                "{v} in slot {i} from {low}"
            );
            assert_eq!(direct.lowest_equivalent(v), low, "{v}");
        }
        let rebuilt = counts.histogram();
        assert_eq!(rebuilt.len(), values.len() as u64);
        // Not `assert_eq!`: a failure would print 33,000 counts twice.
        assert!(rebuilt == direct, "the rebuilt histogram differs");
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(rebuilt.value_at_quantile(q), direct.value_at_quantile(q));
        }
        assert_eq!(rebuilt.mean(), direct.mean());
        assert_eq!((rebuilt.min(), rebuilt.max()), (direct.min(), direct.max()));
        counts.reset();
        assert!(counts.histogram().is_empty());
    }

    /// Two threads recording into one entry's counts lose no call.
    #[test]
    fn counts_recorded_from_two_threads_all_arrive() {
        let stats = Stats::default();
        let rec = stats.recorder("api", Hook::Pre, "mw");
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let rec = rec.clone();
                s.spawn(move || {
                    for i in 0..50_000u64 {
                        rec.record(Duration::from_nanos(100 + (i + t) % 7));
                    }
                });
            }
        });
        assert_eq!(stats.summaries()[0].count, 100_000);
    }

    #[test]
    fn failures_sum_over_workers_per_api_and_kind() {
        let stats = Stats::default();
        let (a, b, c) = (stats.errors("x"), stats.errors("x"), stats.errors("w"));
        a.count(MwErrorKind::Threw);
        b.count(MwErrorKind::Threw);
        b.count(MwErrorKind::TimedOut);
        c.count(MwErrorKind::NotLoaded);
        let got: Vec<(String, String, u64)> = stats
            .error_counts()
            .into_iter()
            .map(|e| (e.api_id, e.kind, e.count))
            .collect();
        let want = [
            ("w", "not_loaded", 1),
            ("x", "threw", 2),
            ("x", "timed_out", 1),
        ];
        let want: Vec<(String, String, u64)> = want
            .iter()
            .map(|(a, k, n)| (a.to_string(), k.to_string(), *n))
            .collect();
        assert_eq!(got, want);
        stats.reset();
        assert!(stats.error_counts().is_empty());
    }
}
