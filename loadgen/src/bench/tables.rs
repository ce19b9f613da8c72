//! The bench's tables, built once from the report and printed by
//! [`super::render`] as aligned text or Markdown.
//!
//! Every figure of a route comes from one run: the median run by req/s
//! (its CPU, latency and utilisation belong together). Spreads are min-max
//! over the rounds; "Failed requests" is the sum over all runs. Ratios carry
//! the 95% interval of [`super::stats`].

use super::model::{BenchReport, Metric, RouteResult, RunFigures};
use super::stats::{RatioCi, Spread};

/// The seed's published numbers (Tyk + otto, ab -n 10000 -c 10): req/s
/// native, req/s JS, gateway CPU seconds native, JS.
pub const SEED_OTTO: (f64, f64, f64, f64) = (14_247.0, 1_130.0, 2.32, 21.51);
/// Tyk's later numbers after moving the JSVM to goja (req/s).
pub const TYK_GOJA: (f64, f64) = (14_593.0, 14_061.0);
/// Requests in each of the seed's runs (to turn its CPU seconds into µs per request).
pub const SEED_REQUESTS: f64 = 10_000.0;
/// Share of the cores that must be busy for throughput to follow CPU per request.
pub const SATURATED: f64 = 0.90;

/// A titled table.
pub struct Table {
    /// Title.
    pub title: String,
    /// Column heads.
    pub head: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
    /// Lines printed under the table.
    pub notes: Vec<String>,
}

impl Table {
    /// An empty table.
    pub fn new(title: &str, head: &[&str]) -> Table {
        Table {
            title: title.into(),
            head: head.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// 13257.4 -> "13,257".
pub fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x);
    let (sign, digits) = s.split_at(if s.starts_with('-') { 1 } else { 0 });
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

pub(super) fn cell(f: Option<&RunFigures>, show: impl Fn(&RunFigures) -> Option<String>) -> String {
    f.and_then(show).unwrap_or_else(|| "n/a".into())
}

/// "13,257 (12,901-13,480)" or "133.9 µs (131.0-137.2)": the median
/// run's value and the spread over the rounds.
fn with_spread(
    v: Option<f64>,
    s: Option<Spread>,
    fmt: &dyn Fn(f64) -> String,
    unit: &str,
) -> String {
    match (v, s) {
        (Some(v), Some(s)) if s.min < s.max => {
            format!("{}{unit} ({}-{})", fmt(v), fmt(s.min), fmt(s.max))
        }
        (Some(v), _) => format!("{}{unit}", fmt(v)),
        _ => "n/a".into(),
    }
}

fn one_decimal(v: f64) -> String {
    format!("{v:.1}")
}

/// "native ~1.12x faster (1.08-1.16)", "JS ~1.05x faster (1.02-1.08)" or
/// "no significant difference (0.97-1.04)": `ci.ratio` above 1 means
/// `base` is better; the words name whichever is.
pub fn difference(ci: Option<&RatioCi>, base: &str, other: &str, better: &str) -> String {
    let Some(ci) = ci else {
        return "n/a".into();
    };
    let (who, k, lo, hi) = if ci.ratio >= 1.0 {
        (base, ci.ratio, ci.low, ci.high)
    } else {
        (
            other,
            1.0 / ci.ratio,
            ci.high.map(|h| 1.0 / h),
            ci.low.map(|l| 1.0 / l),
        )
    };
    match (lo, hi) {
        (Some(l), Some(h)) if ci.significant() => {
            format!("{who} ~{k:.2}x {better} ({l:.2}-{h:.2})")
        }
        (Some(_), Some(_)) => format!(
            "no significant difference ({:.2}-{:.2})",
            ci.low.unwrap_or(0.0),
            ci.high.unwrap_or(0.0)
        ),
        _ => format!("{who} ~{k:.2}x {better} (1 round: no interval)"),
    }
}

/// "1.12x (1.08-1.16)".
pub(super) fn ratio_cell(ci: Option<&RatioCi>) -> String {
    match ci {
        Some(RatioCi {
            ratio,
            low: Some(l),
            high: Some(h),
            ..
        }) => format!("{ratio:.2}x ({l:.2}-{h:.2})"),
        Some(c) => format!("{:.2}x", c.ratio),
        None => "n/a".into(),
    }
}

pub(super) fn us(v: f64) -> String {
    format!("{v:.1} µs")
}

/// The report's tables, in print order.
pub fn tables(r: &BenchReport) -> Vec<Table> {
    let mut out = vec![seed_table(r), time_table(r)];
    if let Some(t) = others_table(r) {
        out.push(t);
    }
    out.extend(super::design::design_table(r));
    out.push(super::gateways::gateways_table(r));
    if r.targets().len() > 1 {
        out.push(targets_table(r));
    }
    out
}

/// Table 1: the seed's rows for the seed's pair, CPU per request first.
fn seed_table(r: &BenchReport) -> Table {
    let cols: Vec<Option<&RouteResult>> = ["native", "js", "plain", "upstream"]
        .iter()
        .map(|k| r.route("ours", k))
        .collect();
    let mut t = Table::new(
        &format!(
            "1. The seed's table, our numbers (the median run of {} by req/s; min-max over the rounds)",
            r.repeat
        ),
        &["Metric", "native plugin", "JS (VM)", "Difference", "no middleware", "upstream direct"],
    );
    t.rows = seed_rows(r, &cols);
    t.notes.push(
        "CPU per request (all processes) = gateway + upstream + loadgen: the headline, steadier than req/s. \
         CPU time consumed / utilization: the gateway's (for \"upstream direct\", mock-upstream's)."
            .into(),
    );
    t.notes.push(
        "Difference: paired ratio over the rounds with its 95% interval (t interval on per-round log ratios); \
         \"no significant difference\" when the interval contains 1."
            .into(),
    );
    if let Some(line) = control_line(r, "ours") {
        t.notes.push(line);
    }
    for rr in r.routes.iter().filter(|rr| rr.target == "ours") {
        if let Some(why) = &rr.skipped {
            t.notes
                .push(format!("{} was not measured: {why}", rr.route.title()));
        }
    }
    t
}

/// Table 1's rows: one metric each, over the seed's pair and the two baselines.
fn seed_rows(r: &BenchReport, cols: &[Option<&RouteResult>]) -> Vec<Vec<String>> {
    let cmp = |m| r.comparison("ours", "native", "js", m).map(|c| &c.ci);
    let row = |name: &str, show: &dyn Fn(&RouteResult) -> String, diff: String| {
        let mut v = vec![name.to_string()];
        let cell = |i: usize| {
            cols[i]
                .filter(|c| c.median().is_some())
                .map_or("n/a".into(), show)
        };
        v.extend([cell(0), cell(1), diff, cell(2), cell(3)]);
        v
    };
    vec![
        row(
            "CPU per request (all processes)",
            &|c| {
                with_spread(
                    c.median().and_then(|f| f.all_cpu_us_per_req),
                    c.spread.all_cpu_us_per_req,
                    &one_decimal,
                    " µs",
                )
            },
            difference(cmp(Metric::AllCpuPerRequest), "native", "JS", "less CPU"),
        ),
        row(
            "Gateway CPU per request",
            &|c| {
                with_spread(
                    c.median().and_then(|f| f.server_cpu_us_per_req),
                    c.spread.server_cpu_us_per_req,
                    &one_decimal,
                    " µs",
                )
            },
            difference(cmp(Metric::ServerCpuPerRequest), "native", "JS", "less CPU"),
        ),
        row(
            "Requests/sec",
            &|c| with_spread(c.median().map(|f| f.rps), c.spread.rps, &thousands, ""),
            difference(cmp(Metric::Rps), "native", "JS", "faster"),
        ),
        row(
            "Mean latency",
            &|c| cell(c.median(), |f| Some(format!("{:.3} ms", f.mean_latency_ms))),
            String::new(),
        ),
        row(
            "Wall time",
            &|c| cell(c.median(), |f| Some(format!("{:.2} s", f.wall_s))),
            String::new(),
        ),
        row(
            "CPU time consumed",
            &|c| cell(c.median(), |f| f.server_cpu_s.map(|s| format!("{s:.2} s"))),
            String::new(),
        ),
        row(
            "CPU utilization",
            &|c| {
                cell(c.median(), |f| {
                    f.server_cpu_util.map(|u| format!("{:.0}%", u * 100.0))
                })
            },
            String::new(),
        ),
        row(
            "Failed requests (all runs)",
            &|c| c.failed_total.to_string(),
            String::new(),
        ),
    ]
}

/// The A/A control's line: the bench's own noise floor on `target`.
pub fn control_line(r: &BenchReport, target: &str) -> Option<String> {
    let c = |m| {
        r.comparison(target, "plain", "plain-again", m)
            .map(|c| &c.ci)
    };
    let rps = c(Metric::Rps)?;
    Some(format!(
        "A/A control (no middleware measured twice, as \"no middleware\" and \"no middleware (again)\"): \
         throughput {}, CPU per request {}: {}; differences within these bounds are the bench's noise.",
        ratio_cell(Some(rps)),
        ratio_cell(c(Metric::AllCpuPerRequest)),
        if rps.low.is_none() {
            // One round: no interval, so nothing to contain 1 or not.
            "with one round it has no interval, so this run says nothing about its own noise (use --repeat 3 or more)"
        } else if rps.significant() {
            "its interval excludes 1, so this run was noisier than its intervals claim"
        } else {
            "its interval contains 1, as it should"
        }
    ))
}

/// Table 2: where the time goes, for every route of ours.
fn time_table(r: &BenchReport) -> Table {
    let mut t = Table::new(
        "2. Where the time goes (the median run)",
        &[
            "Route",
            "middleware mean",
            "middleware p50",
            "middleware p99",
            "of it on a VM thread (mean / p50)",
            "calls/request",
            "gateway CPU/request",
            "upstream CPU/request",
            "loadgen CPU/request",
            "all CPU/request",
            "latency p50",
            "latency p99",
        ],
    );
    for rr in r.routes.iter().filter(|rr| rr.target == "ours") {
        let f = rr.median();
        t.rows.push(vec![
            rr.route.title(),
            cell(f, |f| f.mw_mean_us.map(|v| format!("{v:.2} µs"))),
            cell(f, |f| f.mw_p50_us.map(|v| format!("{v:.2} µs"))),
            cell(f, |f| f.mw_p99_us.map(|v| format!("{v:.2} µs"))),
            cell(f, vm_cell),
            cell(f, |f| f.mw_calls_per_req.map(|v| format!("{v:.2}"))),
            cell(f, |f| f.server_cpu_us_per_req.map(us)),
            cell(f, |f| f.upstream_cpu_us_per_req.map(us)),
            cell(f, |f| Some(us(f.loadgen_cpu_us_per_req))),
            cell(f, |f| f.all_cpu_us_per_req.map(us)),
            cell(f, |f| Some(format!("{:.3} ms", f.p50_ms))),
            cell(f, |f| Some(format!("{:.3} ms", f.p99_ms))),
        ]);
    }
    t.notes = vec![
        "middleware = time inside the middleware call, from the gateway's own histograms (GET /tyk/stats); the mean \
         includes what the median hides (GC pauses, spare-object batches);".into(),
        "of it on a VM thread = the script's own time on its JS VM thread, from the moment the thread took the job to \
         its answer (the share of calls that ran there when not all did); the rest of the middleware time is the \
         hand-off (waking the thread, then the I/O thread) and the wait behind other calls on that thread;".into(),
        "gateway CPU/request above the no-middleware route's is what the middleware costs in all (call + marshalling);".into(),
        "for \"upstream direct\" the gateway column is mock-upstream's own CPU.".into(),
    ];
    t
}

/// The time a route's jobs ran on their VM thread, or nothing for calls
/// made in place.
fn vm_cell(f: &RunFigures) -> Option<String> {
    let (mean, p50) = (f.mw_vm_mean_us?, f.mw_vm_p50_us?);
    let mut out = format!("{mean:.2} / {p50:.2} µs");
    if let Some(share) = f.mw_vm_share.filter(|s| *s < 0.995) {
        out += &format!(" ({:.0}% of calls)", share * 100.0);
    }
    Some(out)
}

/// Table 3: every further route of ours against the native plugin.
fn others_table(r: &BenchReport) -> Option<Table> {
    let others: Vec<&RouteResult> = r
        .routes
        .iter()
        .filter(|rr| {
            rr.target == "ours"
                && rr.route.has_middleware
                && !["native", "js"].contains(&rr.route.key.as_str())
        })
        .collect();
    if others.is_empty() {
        return None;
    }
    let mut t = Table::new(
        "3. Every middleware kind against the native plugin (the median run; ratios with 95% intervals)",
        &[
            "Route",
            "req/s",
            "throughput vs native",
            "all CPU/request",
            "CPU vs native",
            "extra µs/request",
            "gateway CPU/request",
            "gateway CPU vs native",
        ],
    );
    let native = r.get("ours", "native");
    for rr in others {
        let f = rr.median();
        let cmp = |m| {
            r.comparison("ours", "native", &rr.route.key, m)
                .map(|c| &c.ci)
        };
        let extra = match (
            f.and_then(|f| f.all_cpu_us_per_req),
            native.and_then(|n| n.all_cpu_us_per_req),
        ) {
            (Some(a), Some(b)) => format!("{:+.1} µs", a - b),
            _ => "n/a".into(),
        };
        t.rows.push(vec![
            rr.route.title(),
            with_spread(f.map(|f| f.rps), rr.spread.rps, &thousands, ""),
            difference(cmp(Metric::Rps), "native", "it", "faster"),
            with_spread(
                f.and_then(|f| f.all_cpu_us_per_req),
                rr.spread.all_cpu_us_per_req,
                &one_decimal,
                " µs",
            ),
            difference(cmp(Metric::AllCpuPerRequest), "native", "it", "less CPU"),
            extra,
            with_spread(
                f.and_then(|f| f.server_cpu_us_per_req),
                rr.spread.server_cpu_us_per_req,
                &one_decimal,
                " µs",
            ),
            ratio_cell(cmp(Metric::ServerCpuPerRequest)),
        ]);
        if let Some(why) = &rr.skipped {
            t.notes
                .push(format!("{} was not measured: {why}", rr.route.title()));
        }
    }
    Some(t)
}

/// Table 6: every route of every target.
fn targets_table(r: &BenchReport) -> Table {
    let mut t = Table::new(
        "6. Every target and route (the median run)",
        &[
            "Target",
            "Route",
            "req/s",
            "all CPU/request",
            "mean latency",
            "p50",
            "p99",
            "failed (all runs)",
        ],
    );
    for rr in &r.routes {
        let f = rr.median();
        t.rows.push(vec![
            rr.target.clone(),
            rr.route.title(),
            with_spread(f.map(|f| f.rps), rr.spread.rps, &thousands, ""),
            cell(f, |f| f.all_cpu_us_per_req.map(us)),
            cell(f, |f| Some(format!("{:.3} ms", f.mean_latency_ms))),
            cell(f, |f| Some(format!("{:.3} ms", f.p50_ms))),
            cell(f, |f| Some(format!("{:.3} ms", f.p99_ms))),
            rr.failed_total.to_string(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VM thread's job time shows beside the call's, with the share of
    /// calls when only some ran there; calls made in place show none.
    #[test]
    fn vm_thread_time_cell() {
        let f = |mean, p50, share| RunFigures {
            mw_vm_mean_us: mean,
            mw_vm_p50_us: p50,
            mw_vm_share: share,
            ..RunFigures::default()
        };
        let all = f(Some(10.75), Some(5.891), Some(1.0));
        assert_eq!(vm_cell(&all).as_deref(), Some("10.75 / 5.89 µs"));
        let some = f(Some(3.0), Some(2.5), Some(0.25));
        assert_eq!(
            vm_cell(&some).as_deref(),
            Some("3.00 / 2.50 µs (25% of calls)")
        );
        assert_eq!(vm_cell(&f(None, None, None)), None);
        assert_eq!(cell(Some(&f(None, None, None)), vm_cell), "n/a");
    }

    fn ci(ratio: f64, low: f64, high: f64) -> RatioCi {
        RatioCi {
            ratio,
            low: Some(low),
            high: Some(high),
            rounds: 5,
        }
    }

    #[test]
    fn differences_name_the_winner_with_the_interval() {
        assert_eq!(
            difference(Some(&ci(1.12, 1.08, 1.16)), "native", "JS", "faster"),
            "native ~1.12x faster (1.08-1.16)"
        );
        assert_eq!(
            difference(Some(&ci(0.8, 0.75, 0.85)), "native", "JS", "faster"),
            "JS ~1.25x faster (1.18-1.33)"
        );
        assert_eq!(
            difference(Some(&ci(1.01, 0.97, 1.05)), "native", "JS", "faster"),
            "no significant difference (0.97-1.05)"
        );
        let one = RatioCi {
            ratio: 1.1,
            low: None,
            high: None,
            rounds: 1,
        };
        assert_eq!(
            difference(Some(&one), "native", "JS", "faster"),
            "native ~1.10x faster (1 round: no interval)"
        );
        assert_eq!(difference(None, "native", "JS", "faster"), "n/a");
    }

    #[test]
    fn the_aa_control_claims_nothing_about_an_interval_it_does_not_have() {
        let mut r: BenchReport = serde_json::from_value(serde_json::json!({
            "schema": "x", "requests": 1, "concurrency": 1, "keepalive": false, "repeat": 1,
            "stamps": {"version": "0", "date": "d", "cores": 2, "command": "c"},
            "processes": [], "peers": [], "routes": [], "comparisons": [], "problems": []
        }))
        .unwrap();
        for (key, rps) in [("plain", 1000.0), ("plain-again", 1010.0)] {
            let route = crate::bench::apis::Route::bare(key, key, "/plain/hello/", false);
            let mut rr = RouteResult::new("ours", route);
            rr.runs = vec![RunFigures {
                rps,
                all_cpu_us_per_req: Some(100.0),
                ..RunFigures::default()
            }];
            rr.finish();
            r.routes.push(rr);
        }
        r.compare();
        let line = control_line(&r, "ours").unwrap();
        assert!(!line.contains("contains 1"), "{line}");
        assert!(line.contains("one round it has no interval"), "{line}");
        // With rounds, the words follow the interval.
        r.repeat = 2;
        r.routes[0].runs.push(RunFigures {
            round: 1,
            rps: 1000.0,
            all_cpu_us_per_req: Some(100.0),
            ..RunFigures::default()
        });
        r.routes[1].runs.push(RunFigures {
            round: 1,
            rps: 990.0,
            all_cpu_us_per_req: Some(100.0),
            ..RunFigures::default()
        });
        r.compare();
        let line = control_line(&r, "ours").unwrap();
        assert!(
            line.contains("its interval contains 1, as it should"),
            "{line}"
        );
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(13257.4), "13,257");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(-1234.0), "-1,234");
    }
}
