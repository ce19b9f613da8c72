//! The bench's results: per target and route, every run's figures and their
//! medians. Serialised as is by `--json` (schema `loadgen.bench/1`).

use serde::{Deserialize, Serialize};

use super::apis::Route;
use super::probe::CallStats;
use crate::record::Hist;

/// The schema identifier of the bench's JSON.
pub const SCHEMA: &str = "loadgen.bench/1";

/// One measured run of one route.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunFigures {
    /// Requests that came to an end.
    pub complete: u64,
    /// Failed requests (every response is checked).
    pub failed: u64,
    /// Requests per second.
    pub rps: f64,
    /// ab's "Time per request (mean)": concurrency * wall / requests, ms.
    pub mean_latency_ms: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Wall time, s.
    pub wall_s: f64,
    /// CPU time of the process serving the route (gateway or upstream), s.
    pub server_cpu_s: Option<f64>,
    /// `server_cpu_s` / `wall_s`.
    pub server_cpu_util: Option<f64>,
    /// Server CPU per request, µs.
    pub server_cpu_us_per_req: Option<f64>,
    /// CPU time of the upstream, s (for gateway routes).
    pub upstream_cpu_s: Option<f64>,
    /// loadgen's own CPU time, s.
    pub loadgen_cpu_s: f64,
    /// CPU of every process in the run (server, upstream and loadgen itself)
    /// per request, µs. Where they share the cores and keep them busy,
    /// throughput follows this figure.
    #[serde(default)]
    pub all_cpu_us_per_req: Option<f64>,
    /// Median middleware call time, µs (gateway routes with middleware).
    pub mw_p50_us: Option<f64>,
    /// 99th percentile middleware call time, µs.
    pub mw_p99_us: Option<f64>,
    /// Middleware calls per request.
    pub mw_calls_per_req: Option<f64>,
}

/// A route of a target: measured, or skipped with the reason.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RouteResult {
    /// `ours` or the `--compare` name.
    pub target: String,
    /// The route.
    pub route: Route,
    /// Why the route was not measured (its check failed, typically).
    pub skipped: Option<String>,
    /// Every run, in the order they ran.
    pub runs: Vec<RunFigures>,
    /// Field-wise medians of `runs`.
    pub median: Option<RunFigures>,
    /// The last `/tyk/stats` entries of this route's API.
    pub middleware: Vec<CallStats>,
    /// Latency percentile curve over all runs: (percentile, ms).
    pub curve: Vec<(f64, f64)>,
    /// Merged latency histogram (µs) behind `curve`.
    #[serde(skip)]
    pub hist: Option<Hist>,
}

impl RouteResult {
    /// A route about to be measured.
    pub fn new(target: &str, route: Route) -> Self {
        RouteResult {
            target: target.into(),
            route,
            skipped: None,
            runs: Vec::new(),
            median: None,
            middleware: Vec::new(),
            curve: Vec::new(),
            hist: None,
        }
    }

    /// Computes medians and the curve once all runs are in.
    pub fn finish(&mut self) {
        if self.runs.is_empty() {
            return;
        }
        let r = &self.runs;
        let m = |f: &dyn Fn(&RunFigures) -> f64| median(r.iter().map(f).collect());
        let mo = |f: &dyn Fn(&RunFigures) -> Option<f64>| {
            let v: Vec<f64> = r.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| median(v))
        };
        self.median = Some(RunFigures {
            complete: r.iter().map(|x| x.complete).sum::<u64>() / r.len() as u64,
            failed: r.iter().map(|x| x.failed).sum(),
            rps: m(&|x| x.rps),
            mean_latency_ms: m(&|x| x.mean_latency_ms),
            p50_ms: m(&|x| x.p50_ms),
            p99_ms: m(&|x| x.p99_ms),
            wall_s: m(&|x| x.wall_s),
            server_cpu_s: mo(&|x| x.server_cpu_s),
            server_cpu_util: mo(&|x| x.server_cpu_util),
            server_cpu_us_per_req: mo(&|x| x.server_cpu_us_per_req),
            upstream_cpu_s: mo(&|x| x.upstream_cpu_s),
            loadgen_cpu_s: m(&|x| x.loadgen_cpu_s),
            all_cpu_us_per_req: mo(&|x| x.all_cpu_us_per_req),
            mw_p50_us: mo(&|x| x.mw_p50_us),
            mw_p99_us: mo(&|x| x.mw_p99_us),
            mw_calls_per_req: mo(&|x| x.mw_calls_per_req),
        });
        if let Some(h) = &self.hist {
            self.curve = h
                .iter_quantiles(2)
                .map(|v| {
                    (
                        v.quantile_iterated_to() * 100.0,
                        v.value_iterated_to() as f64 / 1000.0,
                    )
                })
                .collect();
        }
    }
}

/// The median of `v` (mean of the middle two for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// What the bench did and found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchReport {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Requests per run.
    pub requests: u64,
    /// Concurrency.
    pub concurrency: usize,
    /// Keep-alive on the client side.
    pub keepalive: bool,
    /// Runs per route.
    pub repeat: usize,
    /// CPU cores on this machine.
    pub cores: usize,
    /// Gateway worker threads (None: the gateway's default).
    pub gateway_threads: Option<usize>,
    /// The exact command line.
    pub command: String,
    /// The processes the bench started, (name, pid); all stopped when it ends.
    pub processes: Vec<(String, u32)>,
    /// Every route of every target.
    pub routes: Vec<RouteResult>,
}

impl BenchReport {
    /// The result for `key` on `target`, if it was measured.
    pub fn get(&self, target: &str, key: &str) -> Option<&RunFigures> {
        self.routes
            .iter()
            .find(|r| r.target == target && r.route.key == key)
            .and_then(|r| r.median.as_ref())
    }

    /// Targets in order of first appearance.
    pub fn targets(&self) -> Vec<String> {
        let mut t: Vec<String> = Vec::new();
        for r in &self.routes {
            if !t.contains(&r.target) {
                t.push(r.target.clone());
            }
        }
        t
    }
}
