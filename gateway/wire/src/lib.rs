//! The gateway's control API as both ends of the wire see it: the gateway
//! (`gateway/src/control.rs`, `gateway/src/stats.rs`) writes these values,
//! `loadgen bench` (`loadgen/src/bench/probe.rs`) reads them. One definition
//! here, imported by both, so a renamed or added field is a compile error on
//! both sides instead of a bench that breaks at run time.
//!
//! `gateway/tests/stats_wire.rs` round-trips a running gateway's
//! `GET /tyk/stats` through loadgen's reader.
//!
//! [`header`] holds the one Go-compatible header-name rule both crates
//! follow (the names JS scripts see, the names the mock upstream echoes).

#![deny(missing_docs)]

pub mod header;
pub use header::canonical_header_key;

use serde::{Deserialize, Serialize};

/// The header that carries the control API secret (Tyk's
/// `X-Tyk-Authorization`), lowercase as `http::HeaderName` stores it; HTTP
/// header names are case-insensitive, so either spelling works on the wire.
pub const AUTH_HEADER: &str = "x-tyk-authorization";

/// `GET` answers a [`StatsBody`]; `DELETE` clears every histogram (the
/// bench measures one route at a time).
pub const STATS_PATH: &str = "/tyk/stats";

/// One middleware entry's call times since the last reset, merged over
/// every worker. Times are microseconds of wall time inside the call, as
/// the gateway's per-call HDR histograms (1 ns resolution, 3 significant
/// digits) report them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CallSummary {
    /// The API's `api_id`: which definition the entry belongs to.
    pub api_id: String,
    /// The phase it runs in: `pre` (before the listen path is stripped) or
    /// `post` (just before proxying).
    pub hook: String,
    /// The entry's `name` (symbol, JS object or wasm plugin name): two
    /// entries of one API are told apart by it.
    pub middleware: String,
    /// Calls recorded; 0 after a reset, before the next request.
    pub count: u64,
    /// Mean call time, µs; 0 when `count` is 0.
    pub mean_us: f64,
    /// Median call time, µs: the figure the bench's tables quote.
    pub p50_us: f64,
    /// 90th percentile call time, µs.
    pub p90_us: f64,
    /// 99th percentile call time, µs: where GC pauses and slow paths show.
    pub p99_us: f64,
    /// Slowest call, µs (a timeout shows here as the timeout itself).
    pub max_us: f64,
}

/// The body of `GET /tyk/stats`: every entry, ordered by API, hook, name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StatsBody {
    /// One summary per (API, hook, middleware).
    pub apis: Vec<CallSummary>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field names are the wire format: a rename must be deliberate.
    #[test]
    fn stats_body_has_the_documented_json_shape() {
        let body = StatsBody {
            apis: vec![CallSummary {
                api_id: "a".into(),
                hook: "pre".into(),
                middleware: "m".into(),
                count: 2,
                mean_us: 1.5,
                p50_us: 1.0,
                p90_us: 2.0,
                p99_us: 2.0,
                max_us: 2.0,
            }],
        };
        let v = serde_json::to_value(&body).unwrap();
        let keys: Vec<&str> = v["apis"][0]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut want = vec![
            "api_id",
            "hook",
            "middleware",
            "count",
            "mean_us",
            "p50_us",
            "p90_us",
            "p99_us",
            "max_us",
        ];
        want.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(serde_json::from_value::<StatsBody>(v).unwrap(), body);
    }
}
