//! The bench's results: per target and route, every run's figures, the
//! median run, the spread, and the paired ratios between routes.
//! Serialised as is by `--json` (schema `loadgen.bench/2`, documented field
//! by field in `loadgen/schema/bench-report.schema.json`).

use serde::{Deserialize, Serialize};

use super::apis::Route;
use super::design::{design_choices, DesignChoice};
use super::probe::CallStats;
use super::stamp::Stamps;
use super::stats::{median_index, paired_ratio, RatioCi, Spread};
use crate::record::Hist;

/// The schema identifier of the bench's JSON.
pub const SCHEMA: &str = "loadgen.bench/2";

/// One measured run of one route.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunFigures {
    /// The round this run belongs to (0-based); runs of one round are paired.
    pub round: usize,
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
    /// CPU time of the process serving the route (gateway, upstream or peer), s.
    pub server_cpu_s: Option<f64>,
    /// `server_cpu_s` / `wall_s`.
    pub server_cpu_util: Option<f64>,
    /// Server CPU per request, µs.
    pub server_cpu_us_per_req: Option<f64>,
    /// CPU time of the upstream, s (for routes through a gateway).
    pub upstream_cpu_s: Option<f64>,
    /// Upstream CPU per request, µs.
    pub upstream_cpu_us_per_req: Option<f64>,
    /// loadgen's own CPU time, s.
    pub loadgen_cpu_s: f64,
    /// loadgen's own CPU per request, µs.
    pub loadgen_cpu_us_per_req: f64,
    /// CPU of every process in the run (server, upstream, loadgen), s.
    pub all_cpu_s: Option<f64>,
    /// `all_cpu_s` per request, µs: the headline cross-route figure.
    pub all_cpu_us_per_req: Option<f64>,
    /// `all_cpu_s` / (`wall_s` x `cores`): how busy the run kept the cores
    /// its processes could run on.
    pub cores_busy: Option<f64>,
    /// The cores the run's processes (server, upstream, loadgen) could run
    /// on: the machine's, or fewer when `--cpus` pinned them all.
    #[serde(default)]
    pub cores: Option<usize>,
    /// Median middleware call time, µs (gateway routes with middleware).
    pub mw_p50_us: Option<f64>,
    /// 99th percentile middleware call time, µs.
    pub mw_p99_us: Option<f64>,
    /// Mean middleware call time, µs (when the gateway reports it).
    pub mw_mean_us: Option<f64>,
    /// Middleware calls per request.
    pub mw_calls_per_req: Option<f64>,
    /// Mean time the middleware's jobs ran on a JS VM thread, µs: the
    /// script's own time there, without the hand-off and the wait for the
    /// thread that `mw_mean_us` includes. None for calls made in place
    /// (native, wasm, JS inline).
    #[serde(default)]
    pub mw_vm_mean_us: Option<f64>,
    /// Median time the jobs ran on their VM thread, µs.
    #[serde(default)]
    pub mw_vm_p50_us: Option<f64>,
    /// The share of the calls that ran on a VM thread (QuickJS starts in
    /// place and moves an API whose call overruns its slice).
    #[serde(default)]
    pub mw_vm_share: Option<f64>,
}

/// One latency curve point.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct CurvePoint {
    /// Percentile, 0-100.
    pub percentile: f64,
    /// Latency at that percentile, ms.
    pub ms: f64,
}

/// The spread of a route's main figures over its runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RouteSpread {
    /// Requests per second.
    pub rps: Option<Spread>,
    /// All processes' CPU per request, µs.
    pub all_cpu_us_per_req: Option<Spread>,
    /// Server CPU per request, µs.
    pub server_cpu_us_per_req: Option<Spread>,
    /// Mean latency, ms.
    pub mean_latency_ms: Option<Spread>,
}

/// A route of a target: measured, or skipped with the reason.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RouteResult {
    /// `ours` or the peer's name.
    pub target: String,
    /// The route.
    pub route: Route,
    /// Why the route was not measured.
    pub skipped: Option<String>,
    /// The user asked for this route by name (`--routes`): skipping it fails the bench.
    pub requested: bool,
    /// Every run, in the order they ran.
    pub runs: Vec<RunFigures>,
    /// Index in `runs` of the median run by req/s: every figure the tables
    /// show for this route comes from that one run.
    pub median_run: Option<usize>,
    /// Failed requests summed over all runs.
    pub failed_total: u64,
    /// Min-max over the runs.
    pub spread: RouteSpread,
    /// The last `/tyk/stats` entries of this route's API.
    pub middleware: Vec<CallStats>,
    /// Latency percentile curve over all runs.
    pub curve: Vec<CurvePoint>,
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
            requested: false,
            runs: Vec::new(),
            median_run: None,
            failed_total: 0,
            spread: RouteSpread::default(),
            middleware: Vec::new(),
            curve: Vec::new(),
            hist: None,
        }
    }

    /// The median run's figures.
    pub fn median(&self) -> Option<&RunFigures> {
        self.median_run.and_then(|i| self.runs.get(i))
    }

    /// Picks the median run, the spread and the curve once all runs are in.
    pub fn finish(&mut self) {
        let r = &self.runs;
        let all = |f: &dyn Fn(&RunFigures) -> Option<f64>| -> Vec<f64> {
            r.iter().filter_map(f).collect()
        };
        self.median_run = median_index(&all(&|x| Some(x.rps)));
        self.failed_total = r.iter().map(|x| x.failed).sum();
        self.spread = RouteSpread {
            rps: Spread::of(&all(&|x| Some(x.rps))),
            all_cpu_us_per_req: Spread::of(&all(&|x| x.all_cpu_us_per_req)),
            server_cpu_us_per_req: Spread::of(&all(&|x| x.server_cpu_us_per_req)),
            mean_latency_ms: Spread::of(&all(&|x| Some(x.mean_latency_ms))),
        };
        if let Some(h) = &self.hist {
            self.curve = h
                .iter_quantiles(2)
                .map(|v| CurvePoint {
                    percentile: v.quantile_iterated_to() * 100.0,
                    ms: v.value_iterated_to() as f64 / 1000.0,
                })
                .collect();
        }
    }

    /// `f` of the run of each round `0..rounds` (None where it has none).
    pub fn by_round(
        &self,
        rounds: usize,
        f: impl Fn(&RunFigures) -> Option<f64>,
    ) -> Vec<Option<f64>> {
        (0..rounds)
            .map(|k| self.runs.iter().find(|x| x.round == k).and_then(&f))
            .collect()
    }
}

/// Which figure a [`Comparison`] compares.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Requests per second; ratio = base / other (above 1: base is faster).
    Rps,
    /// All processes' CPU per request; ratio = other / base (above 1: base costs less).
    AllCpuPerRequest,
    /// The serving process's CPU per request; ratio = other / base.
    ServerCpuPerRequest,
}

/// A paired ratio between two routes of one target, with its 95% interval.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    /// `ours` or the peer's name.
    pub target: String,
    /// The reference route's key (`native`, or `plain` for the A/A control).
    pub base: String,
    /// The other route's key.
    pub other: String,
    /// The figure compared.
    pub metric: Metric,
    /// This is the A/A control: one route measured twice under two names,
    /// so its interval shows the bench's own noise and should contain 1.
    pub control: bool,
    /// The ratio and its interval (see `stats.rs` for the method).
    pub ci: RatioCi,
}

/// A peer gateway the user asked for, and what became of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PeerStatus {
    /// `nginx` or `haproxy`.
    pub name: String,
    /// The repo's config template it was started from.
    pub config: String,
    /// Why it was not measured (not installed, did not start).
    pub skipped: Option<String>,
    /// Asked for by `--peer NAME` (skipping it fails the bench), not just `--peers`.
    pub requested: bool,
}

/// A process the bench started.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Process {
    /// What it is.
    pub name: String,
    /// Its pid (stopped when the bench ends).
    pub pid: u32,
    /// The cores it was pinned to (`--cpus`), if any.
    pub cpus: Option<Vec<usize>>,
}

/// What the bench did and found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchReport {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Version, commit, date, machine and command line.
    pub stamps: Stamps,
    /// Requests per run.
    pub requests: u64,
    /// Concurrency.
    pub concurrency: usize,
    /// Keep-alive on the client side.
    pub keepalive: bool,
    /// Rounds: every route runs once per round, in a rotated order.
    pub repeat: usize,
    /// Gateway worker threads (None: the gateway's default).
    pub gateway_threads: Option<usize>,
    /// The cores loadgen itself was pinned to (`--cpus`), if any.
    pub loadgen_cpus: Option<Vec<usize>>,
    /// The processes the bench started; all stopped when it ends.
    pub processes: Vec<Process>,
    /// Peer gateways asked for.
    pub peers: Vec<PeerStatus>,
    /// Every route of every target.
    pub routes: Vec<RouteResult>,
    /// Paired ratios with intervals.
    pub comparisons: Vec<Comparison>,
    /// What each design choice costs: paired differences in gateway CPU
    /// per request between routes that differ in one choice.
    #[serde(default)]
    pub design_choices: Vec<DesignChoice>,
    /// Why the measurements stopped before the last round (a child
    /// exited, Ctrl-C): `repeat` then counts the rounds begun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// One line per reason the exit status is not 0.
    pub problems: Vec<String>,
}

impl BenchReport {
    /// The route `key` on `target`.
    pub fn route(&self, target: &str, key: &str) -> Option<&RouteResult> {
        self.routes
            .iter()
            .find(|r| r.target == target && r.route.key == key)
    }

    /// The median run of `key` on `target`, if it was measured.
    pub fn get(&self, target: &str, key: &str) -> Option<&RunFigures> {
        self.route(target, key).and_then(RouteResult::median)
    }

    /// The comparison of `other` against `base` on `target` for `metric`.
    pub fn comparison(
        &self,
        target: &str,
        base: &str,
        other: &str,
        metric: Metric,
    ) -> Option<&Comparison> {
        self.comparisons.iter().find(|c| {
            c.target == target && c.base == base && c.other == other && c.metric == metric
        })
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

    /// Computes every comparison: on each target, each route with
    /// middleware against `native`; and the A/A control (`plain` against
    /// `plain-again`), by exactly the same code.
    pub fn compare(&mut self) {
        let mut out = Vec::new();
        for target in self.targets() {
            let mut pairs: Vec<(&str, String, bool)> = Vec::new();
            for r in self.routes.iter().filter(|r| r.target == target) {
                if r.route.key == "plain-again" {
                    pairs.push(("plain", r.route.key.clone(), true));
                } else if r.route.has_middleware && r.route.key != "native" {
                    pairs.push(("native", r.route.key.clone(), false));
                }
            }
            for (base, other, control) in pairs {
                for metric in [
                    Metric::Rps,
                    Metric::AllCpuPerRequest,
                    Metric::ServerCpuPerRequest,
                ] {
                    if let Some(ci) = self.paired(&target, base, &other, metric) {
                        out.push(Comparison {
                            target: target.clone(),
                            base: base.into(),
                            other: other.clone(),
                            metric,
                            control,
                            ci,
                        });
                    }
                }
            }
        }
        self.comparisons = out;
        self.design_choices = design_choices(self);
    }

    fn paired(&self, target: &str, base: &str, other: &str, metric: Metric) -> Option<RatioCi> {
        let (b, o) = (self.route(target, base)?, self.route(target, other)?);
        let n = self.repeat;
        match metric {
            Metric::Rps => paired_ratio(
                &b.by_round(n, |f| Some(f.rps)),
                &o.by_round(n, |f| Some(f.rps)),
            ),
            Metric::AllCpuPerRequest => paired_ratio(
                &o.by_round(n, |f| f.all_cpu_us_per_req),
                &b.by_round(n, |f| f.all_cpu_us_per_req),
            ),
            Metric::ServerCpuPerRequest => paired_ratio(
                &o.by_round(n, |f| f.server_cpu_us_per_req),
                &b.by_round(n, |f| f.server_cpu_us_per_req),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A route whose run `i` belongs to `rounds[i]`, with req/s and all-CPU
    /// per request given per run.
    fn route(target: &str, key: &str, mw: bool, runs: &[(usize, f64, f64)]) -> RouteResult {
        let mut rr = RouteResult::new(target, Route::bare(key, key, "/x/", mw));
        rr.runs = runs
            .iter()
            .map(|&(round, rps, cpu)| RunFigures {
                round,
                rps,
                failed: round as u64,
                all_cpu_us_per_req: Some(cpu),
                server_cpu_us_per_req: Some(cpu / 2.0),
                mean_latency_ms: 1000.0 / rps,
                ..RunFigures::default()
            })
            .collect();
        rr.finish();
        rr
    }

    fn report(repeat: usize, routes: Vec<RouteResult>) -> BenchReport {
        let mut r: BenchReport = serde_json::from_value(serde_json::json!({
            "schema": SCHEMA, "requests": 1, "concurrency": 1, "keepalive": false,
            "repeat": repeat,
            "stamps": {"version": "0", "date": "d", "cores": 2, "command": "c"},
            "processes": [], "peers": [], "routes": [], "comparisons": [], "problems": []
        }))
        .unwrap();
        r.routes = routes;
        r.compare();
        r
    }

    #[test]
    fn every_figure_comes_from_the_median_run_and_failures_are_summed() {
        // The median by req/s is the run of round 2; its CPU is not the
        // median CPU (the slowest run has the lowest CPU here).
        let rr = route(
            "ours",
            "native",
            true,
            &[(0, 900.0, 40.0), (1, 1100.0, 60.0), (2, 1000.0, 70.0)],
        );
        let m = rr.median().unwrap();
        assert_eq!(
            (m.round, m.rps, m.all_cpu_us_per_req),
            (2, 1000.0, Some(70.0))
        );
        assert_eq!(rr.failed_total, 3);
        assert_eq!(
            rr.spread.rps,
            Some(Spread {
                min: 900.0,
                max: 1100.0
            })
        );
        assert_eq!(
            rr.spread.server_cpu_us_per_req,
            Some(Spread {
                min: 20.0,
                max: 35.0
            })
        );
        // No runs: no median, no spread.
        let empty = route("ours", "plain", false, &[]);
        assert!(empty.median().is_none() && empty.spread.rps.is_none());
    }

    #[test]
    fn rounds_are_matched_by_their_number_not_their_position() {
        let rr = route("ours", "js", true, &[(2, 3.0, 0.0), (0, 1.0, 0.0)]);
        assert_eq!(
            rr.by_round(3, |f| Some(f.rps)),
            vec![Some(1.0), None, Some(3.0)]
        );
    }

    #[test]
    fn comparisons_pair_rounds_per_target_and_the_control_is_computed_alike() {
        let r = report(
            2,
            vec![
                route(
                    "ours",
                    "native",
                    true,
                    &[(0, 1000.0, 50.0), (1, 1200.0, 50.0)],
                ),
                // Ran in the other order: still paired with the same rounds.
                route("ours", "js", true, &[(1, 600.0, 100.0), (0, 500.0, 100.0)]),
                route(
                    "ours",
                    "plain",
                    false,
                    &[(0, 2000.0, 30.0), (1, 2000.0, 30.0)],
                ),
                route(
                    "ours",
                    "plain-again",
                    false,
                    &[(0, 2000.0, 30.0), (1, 2000.0, 30.0)],
                ),
                route(
                    "nginx",
                    "native",
                    true,
                    &[(0, 3000.0, 20.0), (1, 3000.0, 20.0)],
                ),
                route(
                    "nginx",
                    "lua",
                    true,
                    &[(0, 1500.0, 40.0), (1, 1500.0, 40.0)],
                ),
            ],
        );
        let rps = r.comparison("ours", "native", "js", Metric::Rps).unwrap();
        // base / other per round: 2.0 and 2.0.
        assert!((rps.ci.ratio - 2.0).abs() < 1e-12 && !rps.control);
        let cpu = r
            .comparison("ours", "native", "js", Metric::AllCpuPerRequest)
            .unwrap();
        // other / base: the JS route costs twice the CPU.
        assert!((cpu.ci.ratio - 2.0).abs() < 1e-12);
        let aa = r
            .comparison("ours", "plain", "plain-again", Metric::Rps)
            .unwrap();
        assert!(aa.control && aa.ci.ratio == 1.0 && aa.ci.rounds == 2);
        // Peers are compared within themselves, never across targets.
        let lua = r.comparison("nginx", "native", "lua", Metric::Rps).unwrap();
        assert!((lua.ci.ratio - 2.0).abs() < 1e-12);
        assert!(r.comparison("ours", "native", "lua", Metric::Rps).is_none());
        // Routes without middleware are not compared with native.
        assert!(r
            .comparison("ours", "native", "plain", Metric::Rps)
            .is_none());
        assert_eq!(r.comparisons.len(), 3 * 3);
        assert_eq!(r.targets(), vec!["ours".to_string(), "nginx".to_string()]);
    }
}
