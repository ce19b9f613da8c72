//! Middleware call-time histograms, per API, hook and middleware.
//!
//! Each worker thread records into its own histogram per middleware entry, so
//! the hot path takes an uncontended lock and never waits for another worker.
//! Readers (`GET /tyk/stats`, the bench) merge the per-worker histograms.
//! Values are nanoseconds: a native call takes well under a microsecond.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::config::Hook;

type Key = (String, Hook, String);
type Shared = Arc<Mutex<Histogram<u64>>>;

/// The registry of every recorder, shared by all workers.
#[derive(Clone, Default)]
pub struct Stats {
    inner: Arc<Mutex<Vec<(Key, Shared)>>>,
}

/// One worker's histogram for one middleware entry.
#[derive(Clone)]
pub struct CallRecorder {
    hist: Shared,
}

impl CallRecorder {
    /// Records one call's duration.
    pub fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
        // A poisoned lock only means a panic elsewhere mid-record; the
        // histogram itself is still consistent enough to keep counting.
        let mut h = self.hist.lock().unwrap_or_else(|p| p.into_inner());
        h.saturating_record(ns);
    }
}

/// One entry's call times, µs: the `/tyk/stats` wire format, defined once
/// in `gateway-wire` for the gateway and loadgen both.
pub use gateway_wire::CallSummary;

impl Stats {
    /// A new recorder for one worker's instance of a middleware entry.
    pub fn recorder(&self, api_id: &str, hook: Hook, name: &str) -> CallRecorder {
        // 1 ns to 1 hour at 3 significant digits: covers a 50 ns native call
        // and a JS call that hits a multi-second timeout.
        let hist = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
        let hist = Arc::new(Mutex::new(hist));
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(((api_id.to_string(), hook, name.to_string()), hist.clone()));
        CallRecorder { hist }
    }

    /// Merged histograms, per (api, hook, middleware), in key order.
    pub fn merged(&self) -> BTreeMap<(String, Hook, String), Histogram<u64>> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: BTreeMap<Key, Histogram<u64>> = BTreeMap::new();
        for (key, hist) in inner.iter() {
            let h = hist.lock().unwrap_or_else(|p| p.into_inner());
            match out.get_mut(key) {
                Some(acc) => {
                    // Same bounds everywhere, so adding cannot fail.
                    let _ = acc.add(&*h);
                }
                None => {
                    out.insert(key.clone(), h.clone());
                }
            }
        }
        out
    }

    /// Per-middleware summaries, in key order.
    pub fn summaries(&self) -> Vec<CallSummary> {
        let us = |ns: u64| ns as f64 / 1000.0;
        self.merged()
            .into_iter()
            .map(|((api_id, hook, middleware), h)| CallSummary {
                api_id,
                hook: hook.as_str().to_string(),
                middleware,
                count: h.len(),
                mean_us: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
                p50_us: us(h.value_at_quantile(0.5)),
                p90_us: us(h.value_at_quantile(0.9)),
                p99_us: us(h.value_at_quantile(0.99)),
                max_us: us(h.max()),
            })
            .collect()
    }

    /// Clears every histogram (the bench resets between routes).
    pub fn reset(&self) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for (_, h) in inner.iter() {
            h.lock().unwrap_or_else(|p| p.into_inner()).reset();
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
}
