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

pub mod definition;
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
    /// Of those calls, the ones that ran on a JS VM thread: the script's
    /// own time there, without the hand-off and the wait for the thread
    /// that the call times above include. Absent for calls made in place
    /// (native, wasm, JS inline), and from a gateway older than the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_thread: Option<RunSummary>,
}

/// The time jobs ran on their VM thread, from the moment the thread took
/// the job to its answer, µs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunSummary {
    /// Jobs recorded: the calls that ran on a VM thread and answered (a
    /// job abandoned at its deadline never does).
    pub count: u64,
    /// Mean run time, µs.
    pub mean_us: f64,
    /// Median run time, µs.
    pub p50_us: f64,
    /// 99th percentile run time, µs.
    pub p99_us: f64,
}

/// The body of `GET /tyk/stats`: every entry, ordered by API, hook, name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StatsBody {
    /// One summary per (API, hook, middleware).
    pub apis: Vec<CallSummary>,
    /// Middleware failures since the last reset, per API and kind, ordered
    /// by API then kind; kinds that did not happen are left out. Added after
    /// `apis`: a body without it (an older gateway) reads as no failures,
    /// and an older reader ignores it.
    #[serde(default)]
    pub errors: Vec<ErrorCount>,
    /// JS VM threads that no longer serve calls, now (gauges: a reset
    /// leaves them). Added last, read as zeros when absent.
    #[serde(default)]
    pub js_threads: JsThreads,
}

/// VM threads taken out of service: abandoned at a call's deadline inside a
/// native step and still running it, and parked: stopped for good by the
/// allocator because their heap passed its bound inside one (they hold it
/// until the gateway restarts).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct JsThreads {
    /// Abandoned, still running their last native step.
    pub abandoned: u64,
    /// Stopped for good in the allocator.
    pub parked: u64,
    /// What the parked threads hold, in bytes.
    pub parked_bytes: u64,
}

/// How many of one API's middleware calls failed with one kind of error.
/// Each such request was answered 500, but for a virtual endpoint with
/// `proxy_on_error`, whose request is proxied instead.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorCount {
    /// The API's `api_id`.
    pub api_id: String,
    /// [`MwErrorKind::as_str`]: kept a string on the wire so that a reader
    /// older than a new kind still reads the body (it sees an unknown name,
    /// not a parse error).
    pub kind: String,
    /// Failures of this kind since the last reset.
    pub count: u64,
}

/// Why a middleware failed: the kind of an `MwError`, counted per API in
/// [`StatsBody::errors`] and named in the gateway's log line. Defined here
/// because its names cross the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MwErrorKind {
    /// The middleware's own code raised an error: a JS exception, or a
    /// native plugin's error return.
    Threw,
    /// Stopped at its time limit (`jsvm_timeout`, `--wasm-timeout`).
    TimedOut,
    /// Stopped at its memory limit (`--jsvm-memory`, `--wasm-memory`, or
    /// boa's runaway-growth guard).
    OutOfMemory,
    /// It returned something the gateway cannot apply: a value of the wrong
    /// shape, an invalid header, status code or URL.
    BadAnswer,
    /// A plugin broke its ABI contract: a native plugin panicked or passed
    /// invalid data to a host call, a wasm module trapped.
    PluginFault,
    /// The middleware (or the state it runs in) could not be loaded or
    /// built, so its API fails closed.
    NotLoaded,
    /// The gateway's own host code failed around an otherwise good call
    /// (an engine error that is not the script's, a lost VM thread).
    Internal,
}

impl MwErrorKind {
    /// Every kind, in the order [`StatsBody::errors`] lists them.
    pub const ALL: [MwErrorKind; 7] = [
        MwErrorKind::Threw,
        MwErrorKind::TimedOut,
        MwErrorKind::OutOfMemory,
        MwErrorKind::BadAnswer,
        MwErrorKind::PluginFault,
        MwErrorKind::NotLoaded,
        MwErrorKind::Internal,
    ];

    /// The kind's name on the wire and in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            MwErrorKind::Threw => "threw",
            MwErrorKind::TimedOut => "timed_out",
            MwErrorKind::OutOfMemory => "out_of_memory",
            MwErrorKind::BadAnswer => "bad_answer",
            MwErrorKind::PluginFault => "plugin_fault",
            MwErrorKind::NotLoaded => "not_loaded",
            MwErrorKind::Internal => "internal",
        }
    }

    /// The kind named `name` ([`MwErrorKind::as_str`]); `None` for a name
    /// this reader does not know (a newer gateway's).
    pub fn parse(name: &str) -> Option<MwErrorKind> {
        MwErrorKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Its place in [`MwErrorKind::ALL`] (for per-kind counter arrays).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for MwErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
                vm_thread: Some(RunSummary {
                    count: 2,
                    mean_us: 0.5,
                    p50_us: 0.4,
                    p99_us: 0.6,
                }),
            }],
            errors: vec![ErrorCount {
                api_id: "a".into(),
                kind: MwErrorKind::Threw.as_str().into(),
                count: 3,
            }],
            js_threads: JsThreads {
                abandoned: 2,
                parked: 1,
                parked_bytes: 64 << 20,
            },
        };
        let v = serde_json::to_value(&body).unwrap();
        // An object's field names, sorted (serde_json's map order).
        let names = |o: &serde_json::Value| -> Vec<String> {
            o.as_object().unwrap().keys().cloned().collect()
        };
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
            "vm_thread",
        ];
        want.sort_unstable();
        let mut keys = names(&v["apis"][0]);
        keys.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(
            serde_json::from_value::<StatsBody>(v.clone()).unwrap(),
            body
        );
        assert_eq!(
            names(&v["apis"][0]["vm_thread"]),
            ["count", "mean_us", "p50_us", "p99_us"]
        );
        assert_eq!(names(&v["errors"][0]), ["api_id", "count", "kind"]);
        assert_eq!(
            names(&v["js_threads"]),
            ["abandoned", "parked", "parked_bytes"]
        );
    }

    /// A body from a gateway that predates `errors` reads as no failures.
    #[test]
    fn a_body_without_errors_still_reads() {
        let old = r#"{"apis":[{"api_id":"a","hook":"pre","middleware":"m","count":1,
            "mean_us":1.0,"p50_us":1.0,"p90_us":1.0,"p99_us":1.0,"max_us":1.0}]}"#;
        let body: StatsBody = serde_json::from_str(old).unwrap();
        assert_eq!((body.apis.len(), body.errors.len()), (1, 0));
        // Nor `vm_thread`: no call ran on a VM thread.
        assert_eq!(body.apis[0].vm_thread, None);
        assert_eq!(body.js_threads, JsThreads::default());
    }

    /// A reader that predates `errors` (the body as it was) reads a new one.
    #[test]
    fn an_older_reader_ignores_errors() {
        #[derive(Deserialize)]
        struct OldBody {
            apis: Vec<CallSummary>,
        }
        let new = StatsBody {
            apis: vec![],
            errors: vec![ErrorCount {
                api_id: "a".into(),
                kind: "timed_out".into(),
                count: 1,
            }],
            js_threads: JsThreads::default(),
        };
        let text = serde_json::to_string(&new).unwrap();
        let old: OldBody = serde_json::from_str(&text).unwrap();
        assert!(old.apis.is_empty());
    }

    #[test]
    fn kind_names_round_trip_and_unknown_names_are_none() {
        for (i, k) in MwErrorKind::ALL.into_iter().enumerate() {
            assert_eq!(MwErrorKind::parse(k.as_str()), Some(k));
            assert_eq!(k.index(), i);
        }
        assert_eq!(MwErrorKind::parse("a_kind_from_the_future"), None);
    }
}
