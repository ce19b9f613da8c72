//! `loadgen bench` end to end, the report: one short bench through the real
//! mock-upstream and gateway binaries and the real add-header plugin, then
//! its text, JSON (against the schema), Markdown and charts checked, and
//! every interval recomputed from the runs the JSON lists.

mod common;

use common::bins::{apis_dir, assert_children_gone, bench, validate};
use loadgen::bench::stats::{paired_difference, paired_ratio, DiffCi, RatioCi};
use serde_json::Value;

/// Rounds and requests per run of the bench below.
const ROUNDS: u64 = 3;
const REQUESTS: u64 = 300;

#[test]
fn a_short_bench_has_spreads_intervals_an_aa_control_and_stamps() {
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_dir(tmp.path());
    let (json, md, svg) = (
        tmp.path().join("b.json"),
        tmp.path().join("b.md"),
        tmp.path().join("b.svg"),
    );
    let out = bench(&[
        "-n",
        &REQUESTS.to_string(),
        "--repeat",
        &ROUNDS.to_string(),
        "--warmup",
        "50",
        "--apis",
        apis.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    check_text(&text);

    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    validate(&v);
    check_stamps(&v);
    check_routes(&v);
    check_comparisons(&v);
    check_design_choices(&v, &text);
    check_markdown_and_charts(&std::fs::read_to_string(&md).unwrap(), tmp.path(), &svg);
    // Our gateway and the upstream, both gone once the bench has returned.
    assert_eq!(v["processes"].as_array().unwrap().len(), 2);
    assert_children_gone(&v);
}

/// The text report has the seed's table, ours, the A/A line and the stamps.
fn check_text(text: &str) {
    for needle in [
        "1. The seed's table",
        "CPU per request (all processes)",
        "Requests/sec",
        "CPU time consumed",
        "Failed requests (all runs)",
        "2. Where the time goes",
        "of it on a VM thread (mean / p50)",
        "Plugin vs VM across gateways",
        "Tyk + otto",
        "12.61x",
        "A/A control",
        concat!("loadgen ", env!("CARGO_PKG_VERSION")),
        "command: ",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
}

fn check_stamps(v: &Value) {
    assert_eq!(v["schema"], "loadgen.bench/2");
    for stamp in ["version", "date", "cores", "command"] {
        assert!(
            !v["stamps"][stamp].is_null(),
            "stamp {stamp} missing: {}",
            v["stamps"]
        );
    }
    assert!(v["stamps"]["command"]
        .as_str()
        .unwrap()
        .contains("--repeat 3"));
}

/// Our route `key` in the report.
fn by_key<'a>(v: &'a Value, k: &str) -> &'a Value {
    v["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["target"] == "ours" && r["route"]["key"] == k)
        .unwrap_or_else(|| panic!("no route {k}"))
}

/// `field` of route `key`'s run in each round (None where it has none).
fn by_round(v: &Value, key: &str, field: &str) -> Vec<Option<f64>> {
    let runs = by_key(v, key)["runs"].as_array().unwrap();
    (0..ROUNDS)
        .map(|k| {
            runs.iter()
                .find(|x| x["round"] == k)
                .and_then(|x| x[field].as_f64())
        })
        .collect()
}

/// Each route ran once per round; its figures come from one of those runs;
/// the middleware ran once per request.
fn check_routes(v: &Value) {
    for key in ["native", "js", "plain", "plain-again", "upstream"] {
        let r = by_key(v, key);
        assert!(r["skipped"].is_null(), "{key}: {}", r["skipped"]);
        let runs = r["runs"].as_array().unwrap();
        assert_eq!(runs.len() as u64, ROUNDS, "{key}");
        let mut rounds: Vec<u64> = runs.iter().map(|x| x["round"].as_u64().unwrap()).collect();
        rounds.sort();
        assert_eq!(rounds, (0..ROUNDS).collect::<Vec<_>>(), "{key}");
        let median = &runs[r["median_run"].as_u64().unwrap() as usize];
        assert_eq!(median["complete"], REQUESTS);
        assert_eq!(r["failed_total"], 0);
        let (lo, hi) = (
            r["spread"]["rps"]["min"].as_f64().unwrap(),
            r["spread"]["rps"]["max"].as_f64().unwrap(),
        );
        let rps = median["rps"].as_f64().unwrap();
        assert!(lo <= rps && rps <= hi, "{key}: {lo} {rps} {hi}");
        assert!(
            median["all_cpu_us_per_req"].as_f64().unwrap()
                > median["server_cpu_us_per_req"].as_f64().unwrap()
        );
    }
    for key in ["native", "js"] {
        let r = by_key(v, key);
        let m = &r["runs"][r["median_run"].as_u64().unwrap() as usize];
        // The gateway ran the middleware once per request (warm-up excluded).
        assert_eq!(m["mw_calls_per_req"], 1.0, "{key}");
        assert!(m["mw_p50_us"].as_f64().unwrap() > 0.0, "{key}");
        // The mean as well as the percentiles (the median hides GC pauses).
        assert!(m["mw_mean_us"].as_f64().unwrap() > 0.0, "{key}");
        let marker = r["route"]["marker"].as_str().unwrap();
        assert!(marker.starts_with("X-Custom-"), "{key}");
        // The JS route's calls ran on a VM thread (boa's default), and
        // their own time there is reported beside the calls'; the native
        // plugin's calls run in place and have none.
        if key == "js" {
            assert!(m["mw_vm_mean_us"].as_f64().unwrap() > 0.0, "{m}");
            assert!(m["mw_vm_p50_us"].as_f64().unwrap() > 0.0, "{m}");
            assert_eq!(m["mw_vm_share"], 1.0, "{m}");
        } else {
            assert!(m["mw_vm_mean_us"].is_null(), "{m}");
        }
    }
    assert!(by_key(v, "plain")["route"]["marker"].is_null());
}

/// Equal within JSON's rounding (17 significant digits at most).
fn close(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-9 * x.abs().max(1.0)
}

fn close_opt(x: Option<f64>, y: Option<f64>) -> bool {
    match (x, y) {
        (Some(x), Some(y)) => close(x, y),
        (None, None) => true,
        _ => false,
    }
}

fn same_ratio(a: &RatioCi, b: &RatioCi) -> bool {
    a.rounds == b.rounds
        && close(a.ratio, b.ratio)
        && close_opt(a.low, b.low)
        && close_opt(a.high, b.high)
}

/// The A/A control is computed exactly as every other comparison: the same
/// paired interval over the same rounds, recomputed here from the runs.
fn check_comparisons(v: &Value) {
    let find = |base: &str, other: &str, metric: &str| {
        v["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| {
                c["base"] == base
                    && c["other"] == other
                    && c["metric"] == metric
                    && c["target"] == "ours"
            })
            .unwrap_or_else(|| panic!("no comparison {base} vs {other} {metric}"))
            .clone()
    };
    for (base, other, control) in [("native", "js", false), ("plain", "plain-again", true)] {
        let c = find(base, other, "rps");
        assert_eq!(c["control"], control);
        let want = paired_ratio(&by_round(v, base, "rps"), &by_round(v, other, "rps")).unwrap();
        let got: RatioCi = serde_json::from_value(c["ci"].clone()).unwrap();
        assert!(
            same_ratio(&got, &want),
            "{base} vs {other}: {got:?} != {want:?}"
        );
        assert!(got.low.unwrap() <= got.ratio && got.ratio <= got.high.unwrap());
        let cpu = find(base, other, "all_cpu_per_request");
        let want = paired_ratio(
            &by_round(v, other, "all_cpu_us_per_req"),
            &by_round(v, base, "all_cpu_us_per_req"),
        )
        .unwrap();
        let got: RatioCi = serde_json::from_value(cpu["ci"].clone()).unwrap();
        assert!(
            same_ratio(&got, &want),
            "{base} vs {other} CPU: {got:?} != {want:?}"
        );
    }
}

/// One design-choice row for each pair of routes that ran and differ in one
/// choice, computed by the same paired method, recomputed here.
fn check_design_choices(v: &Value, text: &str) {
    let choices = v["design_choices"].as_array().unwrap();
    let names: Vec<&str> = choices
        .iter()
        .map(|c| c["choice"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"VM vs native"), "{names:?}");
    for c in choices {
        let (base, other) = (c["base"].as_str().unwrap(), c["other"].as_str().unwrap());
        let (o, b) = (
            by_round(v, other, "server_cpu_us_per_req"),
            by_round(v, base, "server_cpu_us_per_req"),
        );
        let want = paired_difference(&o, &b).unwrap();
        let got: DiffCi = serde_json::from_value(c["gateway_cpu_us"].clone()).unwrap();
        assert!(
            got.rounds == want.rounds
                && close(got.diff, want.diff)
                && close_opt(got.low, want.low)
                && close_opt(got.high, want.high),
            "{c}: {want:?}"
        );
        let ratio: RatioCi = serde_json::from_value(c["gateway_cpu_ratio"].clone()).unwrap();
        assert!(same_ratio(&ratio, &paired_ratio(&o, &b).unwrap()));
        // Both routes ran their middleware: both means are known.
        assert!(c["other_mw_mean_us"].as_f64().unwrap() > 0.0, "{c}");
    }
    // Every JS route on another engine or strategy than the defaults is
    // priced against the route it differs from by one choice, within its
    // role (a QuickJS response hook against boa's response hook); a route
    // of another role on the defaults is the base of its role's rows.
    let ours: Vec<&Value> = v["routes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["target"] == "ours" && r["skipped"].is_null())
        .collect();
    let defaults = |k: &Value| k["engine"] == "boa" && k["strategy"] == "persistent";
    for r in &ours {
        let kind = &r["route"]["kind"];
        let key = r["route"]["key"].as_str().unwrap();
        if kind["family"] != "js" || key == "js" {
            continue;
        }
        let row = |side: &str| {
            choices
                .iter()
                .filter(|c| c[side] == key)
                .map(|c| c["within"].as_str().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        };
        if !defaults(kind) {
            assert!(
                !row("other").is_empty(),
                "{key} ({kind}) has no design-choice row: {names:?}"
            );
        } else if kind["role"] != "request" {
            let partners = ours.iter().any(|o| {
                let k = &o["route"]["kind"];
                k["family"] == "js" && k["role"] == kind["role"] && !defaults(k)
            });
            assert_eq!(
                !row("base").is_empty(),
                partners,
                "{key} ({kind}): {names:?}"
            );
        }
        // Rows outside the seed's role say which role they hold equal.
        if kind["role"] != "request" {
            let words = match kind["role"].as_str().unwrap() {
                "calls-service" => "calling a service".to_string(),
                role => role.replace('-', " "),
            };
            for within in row("other").iter().chain(&row("base")) {
                assert!(within.ends_with(&words), "{key}: {within:?}");
            }
        }
    }
    assert!(
        text.contains("What each design choice costs") && text.contains("middleware mean"),
        "{text}"
    );
}

/// The Markdown embeds both charts; the latency chart's legend and title
/// say what it plots.
fn check_markdown_and_charts(md: &str, dir: &std::path::Path, svg: &std::path::Path) {
    assert!(
        md.contains(
            "| Metric | native plugin | JS (VM) | Difference | no middleware | upstream direct |"
        ),
        "{md}"
    );
    assert!(
        md.contains("(b-headline.svg)") && md.contains("(b-latency.svg)"),
        "{md}"
    );
    assert!(
        md.contains(concat!("loadgen ", env!("CARGO_PKG_VERSION"))),
        "{md}"
    );
    let latency = std::fs::read_to_string(dir.join("b-latency.svg")).unwrap();
    let headline = std::fs::read_to_string(dir.join("b-headline.svg")).unwrap();
    assert!(latency.starts_with("<svg") && headline.starts_with("<svg"));
    // Legend labels as in the tables.
    assert!(latency.contains("native plugin /gopl/hello/"), "{latency}");
    // The title counts what it plots: ROUNDS x REQUESTS per measured route,
    // however many definitions apis/ holds.
    let title = latency
        .split(" requests in all")
        .next()
        .and_then(|head| head.rsplit("Latency by percentile: ").next())
        .expect("latency chart title");
    let (n, total) = title.split_once(" routes, ").expect("N routes, M");
    let (n, total): (u64, u64) = (
        n.trim().parse().unwrap(),
        total.replace(',', "").trim().parse().unwrap(),
    );
    assert!(n >= 5, "{title}");
    assert_eq!(total, n * ROUNDS * REQUESTS, "{title}");
    assert!(headline.contains("Tyk + otto"), "{headline}");
    assert_eq!(std::fs::read_to_string(svg).unwrap(), latency);
}
