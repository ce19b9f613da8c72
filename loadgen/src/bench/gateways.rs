//! Table 5, "plugin vs VM across gateways": Tyk's two published results,
//! then the native/VM ratio and the VM's µs per request on every gateway
//! measured in the run (ours and the peers), and why our ratio is what it is.

use super::model::{BenchReport, Metric, RunFigures};
use super::tables::{
    cell, ratio_cell, thousands, us, Table, SATURATED, SEED_OTTO, SEED_REQUESTS, TYK_GOJA,
};

/// Table 5: Tyk's two published results, then plugin-vs-VM on every
/// gateway measured in this run (ours and the peers).
pub fn gateways_table(r: &BenchReport) -> Table {
    let mut t = Table::new(
        "5. Plugin vs VM across gateways (Tyk's published numbers; the others measured in this run)",
        &[
            "Gateway: VM",
            "native req/s",
            "VM req/s",
            "throughput ratio",
            "native CPU/request",
            "VM CPU/request",
            "CPU ratio",
            "VM µs per request",
        ],
    );
    t.rows = published_rows();
    t.rows.extend(measured_rows(r));
    t.notes = notes(r);
    t
}

/// Tyk's two published results, Tyk + otto's CPU seconds turned into µs
/// per request over its 10,000 requests.
fn published_rows() -> Vec<Vec<String>> {
    let per_req = |s: f64| s * 1e6 / SEED_REQUESTS;
    let (on, oj) = (per_req(SEED_OTTO.2), per_req(SEED_OTTO.3));
    vec![
        vec![
            "Tyk + otto (seed: Go plugin vs JSVM)".into(),
            thousands(SEED_OTTO.0),
            thousands(SEED_OTTO.1),
            format!("{:.2}x", SEED_OTTO.0 / SEED_OTTO.1),
            us(on),
            us(oj),
            format!("{:.2}x", oj / on),
            format!("{:+.0} µs", oj - on),
        ],
        vec![
            "Tyk + goja (later Tyk)".into(),
            thousands(TYK_GOJA.0),
            thousands(TYK_GOJA.1),
            format!("{:.2}x", TYK_GOJA.0 / TYK_GOJA.1),
            "-".into(),
            "-".into(),
            "-".into(),
            "~20 µs (latency)".into(),
        ],
    ]
}

/// One row per route with middleware on every target that has a native
/// route, against that native route.
fn measured_rows(r: &BenchReport) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for target in r.targets() {
        let Some(native) = r.route(&target, "native").filter(|n| n.median().is_some()) else {
            continue;
        };
        let n = native.median();
        for vm in r
            .routes
            .iter()
            .filter(|v| v.target == target && v.route.has_middleware && v.route.key != "native")
        {
            let Some(v) = vm.median() else { continue };
            let cmp = |m| {
                r.comparison(&target, "native", &vm.route.key, m)
                    .map(|c| &c.ci)
            };
            let gateway = if target == "ours" {
                "this gateway".to_string()
            } else {
                target.clone()
            };
            let all = |f: &RunFigures| f.all_cpu_us_per_req;
            rows.push(vec![
                format!("{gateway}: {}", vm.route.label),
                cell(n, |f| Some(thousands(f.rps))),
                thousands(v.rps),
                ratio_cell(cmp(Metric::Rps)),
                cell(n, |f| all(f).map(us)),
                all(v).map_or("n/a".into(), us),
                ratio_cell(cmp(Metric::AllCpuPerRequest)),
                match (n.and_then(all), all(v)) {
                    (Some(a), Some(b)) => format!("{:+.1} µs", b - a),
                    _ => "n/a".into(),
                },
            ]);
        }
    }
    rows
}

/// What the columns mean, why our ratio is what it is, and what was skipped.
fn notes(r: &BenchReport) -> Vec<String> {
    let mut notes = vec![
        "throughput ratio = native req/s / VM req/s; CPU = all processes' CPU per request (Tyk + otto: the \
         gateway's CPU seconds over 10,000 requests); VM µs per request = VM CPU/request - native CPU/request."
            .to_string(),
    ];
    if let (Some(n), Some(j)) = (r.get("ours", "native"), r.get("ours", "js")) {
        notes.extend(ratio_explained(n, j, r.stamps.cores));
    }
    for p in &r.peers {
        if let Some(why) = &p.skipped {
            notes.push(format!("peer {} was not measured: {why}", p.name));
        }
    }
    for rr in r.routes.iter().filter(|rr| rr.target != "ours") {
        if let Some(why) = &rr.skipped {
            notes.push(format!(
                "{} {} was not measured: {why}",
                rr.target,
                rr.route.title()
            ));
        }
    }
    notes
}

/// Why this gateway's throughput ratio is what it is: where the load
/// generator, gateway and upstream share the cores and keep them busy,
/// throughput follows the CPU all of them spend per request, so the ratio
/// is the JS route's total over the native route's. That holds only when
/// the cores are saturated; otherwise the note says so instead of
/// predicting. Empty when a figure is missing.
pub fn ratio_explained(nat: &RunFigures, js: &RunFigures, cores: usize) -> Vec<String> {
    let (Some(gn), Some(gj), Some(an), Some(aj)) = (
        nat.server_cpu_us_per_req,
        js.server_cpu_us_per_req,
        nat.all_cpu_us_per_req,
        js.all_cpu_us_per_req,
    ) else {
        return Vec::new();
    };
    if an <= 0.0 || aj <= 0.0 || js.rps <= 0.0 {
        return Vec::new();
    }
    let busy_of = |f: &RunFigures, all: f64| {
        f.cores_busy
            .unwrap_or(all * f.rps / 1e6 / cores.max(1) as f64)
    };
    let (bn, bj) = (busy_of(nat, an), busy_of(js, aj));
    // The cores the runs could use (fewer than the machine's when pinned).
    let cores = nat.cores.unwrap_or(cores);
    let mut out = vec![format!(
        "this gateway: JS adds {:.1} µs of gateway CPU per request, {:.1} µs across all processes \
         (which kept {:.0}% and {:.0}% of the {cores} cores busy).",
        gj - gn,
        aj - an,
        bn * 100.0,
        bj * 100.0
    )];
    if bn.min(bj) >= SATURATED {
        out.push(format!(
            "Throughput follows total CPU per request: {an:.1} vs {aj:.1} µs predicts {:.2}x, measured {:.2}x; \
             each µs costs ~{:.1}% of throughput here, and Tyk + goja's {:.2}x would allow ~{:.1} µs.",
            aj / an,
            nat.rps / js.rps,
            100.0 / an,
            TYK_GOJA.0 / TYK_GOJA.1,
            (TYK_GOJA.0 / TYK_GOJA.1 - 1.0) * an
        ));
    } else {
        out.push(format!(
            "The cores were not saturated ({:.0}% busy, below {:.0}%): throughput is not predicted from CPU per request \
             here; compare CPU per request.",
            bn.min(bj) * 100.0,
            SATURATED * 100.0
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prediction_is_printed_only_when_the_cores_were_saturated() {
        let fig = |rps: f64, gateway: f64, all: f64, busy: f64| RunFigures {
            rps,
            server_cpu_us_per_req: Some(gateway),
            all_cpu_us_per_req: Some(all),
            cores_busy: Some(busy),
            ..RunFigures::default()
        };
        let (nat, js) = (
            fig(20_000.0, 50.0, 100.0, 0.95),
            fig(18_000.0, 60.0, 112.0, 0.93),
        );
        let text = ratio_explained(&nat, &js, 2).join("\n");
        for needle in [
            "JS adds 10.0 µs of gateway CPU per request, 12.0 µs across all processes",
            "kept 95% and 93% of the 2 cores busy",
            "100.0 vs 112.0 µs predicts 1.12x, measured 1.11x",
            "each µs costs ~1.0% of throughput",
            "1.04x would allow ~3.8 µs",
        ] {
            assert!(text.contains(needle), "{needle:?} missing:\n{text}");
        }
        let idle = fig(18_000.0, 60.0, 112.0, 0.63);
        let text = ratio_explained(&nat, &idle, 2).join("\n");
        assert!(
            text.contains("The cores were not saturated (63% busy"),
            "{text}"
        );
        assert!(!text.contains("predicts"), "{text}");
        // A figure the run could not read: no explanation rather than a wrong one.
        let unknown = RunFigures {
            all_cpu_us_per_req: None,
            ..js.clone()
        };
        assert!(ratio_explained(&nat, &unknown, 2).is_empty());
    }
}
