//! "What each design choice costs": every choice this gateway makes a
//! switch of (issue 12), priced from routes measured in the same run.
//!
//! A choice is a pair of routes that differ in that one respect: the seed's
//! JS route against the native plugin ("VM vs native"), Tyk's JSON
//! marshalling against the persistent strategy on the same engine, fresh
//! state against persistent, QuickJS against boa with the same strategy,
//! WebAssembly and the Go adapter against the native plugin. Its cost is
//! the paired difference of the two routes' gateway CPU per request over
//! the rounds, with the same paired 95% t interval as every ratio of the
//! report ([`super::stats::paired_difference`]); the ratio beside it is
//! [`super::stats::paired_ratio`] on the same figures. Gateway CPU, not all
//! processes': the upstream and loadgen do the same work on both routes.
//!
//! Routes are paired by what their definitions say ([`MiddlewareKind`]), so
//! a user's own definitions get rows too; a row exists only when both of its
//! routes were measured. Routes are compared only within one [`Role`]: a
//! response hook's engine comparison is a row of its own, never mistaken
//! for the seed's middleware.

use serde::{Deserialize, Serialize};

use super::apis::{MiddlewareKind, Role, DEFAULT_ENGINE, DEFAULT_STRATEGY};
use super::model::{BenchReport, RouteResult, RunFigures};
use super::stats::{paired_difference, paired_ratio, DiffCi, RatioCi};
use super::tables::{ratio_cell, Table};

/// The cost of one design choice, measured in this run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DesignChoice {
    /// What is chosen: `VM vs native`, `Tyk's marshalling`, `fresh state`,
    /// `engine`, `wasm vs native`, `Go adapter vs Rust native`, or
    /// `strategy NAME` for a strategy the bench does not know.
    pub choice: String,
    /// The condition held equal ("boa", "persistent"), if any.
    pub within: Option<String>,
    /// The reference route's key (what the choice is measured against).
    pub base: String,
    /// The key of the route that makes the choice.
    pub other: String,
    /// `other - base`: gateway CPU µs per request, paired over the rounds.
    pub gateway_cpu_us: DiffCi,
    /// `other / base` gateway CPU per request, paired over the rounds.
    pub gateway_cpu_ratio: Option<RatioCi>,
    /// Mean middleware call time of the base route's median run, µs.
    pub base_mw_mean_us: Option<f64>,
    /// Mean middleware call time of the other route's median run, µs.
    pub other_mw_mean_us: Option<f64>,
    /// Of the base route's calls, the mean time their jobs ran on a JS VM
    /// thread, µs (None for calls made in place).
    #[serde(default)]
    pub base_mw_vm_mean_us: Option<f64>,
    /// The same for the other route, µs.
    #[serde(default)]
    pub other_mw_vm_mean_us: Option<f64>,
}

/// A choice to look for: its name, what is held equal, and the two kinds.
struct Pair {
    choice: String,
    within: Option<String>,
    base: Box<dyn Fn(&MiddlewareKind) -> bool>,
    other: Box<dyn Fn(&MiddlewareKind) -> bool>,
}

/// Request-phase middleware of family `f` (as the seed's).
fn family(f: &'static str) -> Box<dyn Fn(&MiddlewareKind) -> bool> {
    Box::new(move |k| k.family == f && k.role == Role::Request)
}

/// JS on `engine` with `strategy` in `role`, placed where the gateway
/// places it (no `placement` in the definition).
fn js(engine: String, strategy: String, role: Role) -> Box<dyn Fn(&MiddlewareKind) -> bool> {
    placed(engine, strategy, role, None)
}

/// As [`js`], placed as `placement` says (`None`: the gateway's choice).
fn placed(
    engine: String,
    strategy: String,
    role: Role,
    placement: Option<String>,
) -> Box<dyn Fn(&MiddlewareKind) -> bool> {
    Box::new(move |k| {
        k.family == "js"
            && k.role == role
            && k.engine.as_deref() == Some(engine.as_str())
            && k.strategy.as_deref() == Some(strategy.as_str())
            && k.placement == placement
    })
}

/// What a pair holds equal: "boa", or "boa, response hook" outside the
/// seed's role.
fn within(held: &str, role: Role) -> Option<String> {
    Some(match role.words() {
        Some(w) => format!("{held}, {w}"),
        None => held.to_string(),
    })
}

/// What a strategy other than the default buys, by name.
fn strategy_choice(s: &str) -> String {
    match s {
        "tyk-json" => "Tyk's marshalling".into(),
        "fresh" => "fresh state".into(),
        other => format!("strategy {other}"),
    }
}

/// A definition's placement against the gateway's own, on each engine
/// (persistent, in `role`). boa's own is a VM thread, so its `inline`
/// route prices the isolation: the VM-thread route minus the inline one.
/// Any other placement is its route minus the gateway's choice.
fn placement_pairs(engines: &[String], placements: &[String], role: Role) -> Vec<Pair> {
    let persistent = DEFAULT_STRATEGY.to_string();
    let mut out = Vec::new();
    for e in engines {
        for p in placements {
            let given = placed(e.clone(), persistent.clone(), role, Some(p.clone()));
            let own = js(e.clone(), persistent.clone(), role);
            out.push(if e == DEFAULT_ENGINE && p == "inline" {
                Pair {
                    choice: "isolation: VM thread vs inline".into(),
                    within: within(e, role),
                    base: given,
                    other: own,
                }
            } else {
                Pair {
                    choice: format!("placement {p}"),
                    within: within(e, role),
                    base: own,
                    other: given,
                }
            });
        }
    }
    out
}

/// Every pair worth a row, given the JS engines, strategies, placements
/// and roles measured: the seed's role first, then the other kinds against
/// native, then the JS choices of each other role.
fn pairs(
    engines: &[String],
    strategies: &[String],
    placements: &[String],
    roles: &[Role],
) -> Vec<Pair> {
    let mut out = vec![Pair {
        choice: "VM vs native".into(),
        within: None,
        base: family("native"),
        other: js(
            DEFAULT_ENGINE.into(),
            DEFAULT_STRATEGY.into(),
            Role::Request,
        ),
    }];
    // The seed's script inline against native: the JS call with no
    // hand-off, what an engine and its host cost alone.
    if placements.iter().any(|p| p == "inline") {
        out.push(Pair {
            choice: "VM vs native".into(),
            within: Some(format!("{DEFAULT_ENGINE} inline")),
            base: family("native"),
            other: placed(
                DEFAULT_ENGINE.into(),
                DEFAULT_STRATEGY.into(),
                Role::Request,
                Some("inline".into()),
            ),
        });
    }
    // The seed's script on each other engine against native, placed by
    // the gateway: what issue 12's per-engine targets are stated in.
    for e in engines.iter().filter(|e| *e != DEFAULT_ENGINE) {
        out.push(Pair {
            choice: "VM vs native".into(),
            within: Some(engine_name(e).to_string()),
            base: family("native"),
            other: js(e.clone(), DEFAULT_STRATEGY.into(), Role::Request),
        });
    }
    out.extend(js_pairs(engines, strategies, Role::Request));
    out.extend(placement_pairs(engines, placements, Role::Request));
    out.push(Pair {
        choice: "wasm vs native".into(),
        within: None,
        base: family("native"),
        other: family("wasm"),
    });
    out.push(Pair {
        choice: "Go adapter vs Rust native".into(),
        within: None,
        base: family("native"),
        other: family("go"),
    });
    for &role in roles.iter().filter(|r| **r != Role::Request) {
        out.extend(js_pairs(engines, strategies, role));
    }
    out
}

/// Within one role: each strategy against persistent on the same engine,
/// then each engine against boa with the same strategy.
fn js_pairs(engines: &[String], strategies: &[String], role: Role) -> Vec<Pair> {
    let (boa, persistent) = (DEFAULT_ENGINE.to_string(), DEFAULT_STRATEGY.to_string());
    let mut out = Vec::new();
    for e in engines {
        for s in strategies.iter().filter(|s| **s != persistent) {
            out.push(Pair {
                choice: strategy_choice(s),
                within: within(e, role),
                base: js(e.clone(), persistent.clone(), role),
                other: js(e.clone(), s.clone(), role),
            });
        }
    }
    for s in strategies {
        for e in engines.iter().filter(|e| **e != boa) {
            out.push(Pair {
                choice: format!("engine: {} vs {boa}", engine_name(e)),
                within: within(s, role),
                base: js(boa.clone(), s.clone(), role),
                other: js(e.clone(), s.clone(), role),
            });
        }
    }
    out
}

fn engine_name(e: &str) -> &str {
    if e == "quickjs" {
        "QuickJS"
    } else {
        e
    }
}

/// Our measured routes with a middleware kind.
fn measured(r: &BenchReport) -> Vec<(&RouteResult, &MiddlewareKind)> {
    r.routes
        .iter()
        .filter(|rr| rr.target == "ours" && rr.median().is_some())
        .filter_map(|rr| rr.route.kind.as_ref().map(|k| (rr, k)))
        .collect()
}

/// Distinct values of `f` over the measured JS routes, the default first.
fn distinct(
    routes: &[(&RouteResult, &MiddlewareKind)],
    f: impl Fn(&MiddlewareKind) -> Option<&String>,
    default: &str,
) -> Vec<String> {
    let mut out = vec![default.to_string()];
    for (_, k) in routes.iter().filter(|(_, k)| k.family == "js") {
        if let Some(v) = f(k) {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
    }
    out
}

/// Every design choice both of whose routes were measured on our gateway.
pub fn design_choices(r: &BenchReport) -> Vec<DesignChoice> {
    let routes = measured(r);
    let engines = distinct(&routes, |k| k.engine.as_ref(), DEFAULT_ENGINE);
    let strategies = distinct(&routes, |k| k.strategy.as_ref(), DEFAULT_STRATEGY);
    // Placements given by a definition (none is the gateway's own).
    let mut placements: Vec<String> = Vec::new();
    for p in routes.iter().filter_map(|(_, k)| k.placement.as_ref()) {
        if !placements.contains(p) {
            placements.push(p.clone());
        }
    }
    let mut roles = vec![Role::Request];
    for (_, k) in &routes {
        if !roles.contains(&k.role) {
            roles.push(k.role);
        }
    }
    let find = |pred: &dyn Fn(&MiddlewareKind) -> bool| {
        routes.iter().find(|(_, k)| pred(k)).map(|(rr, _)| *rr)
    };
    let gateway = |f: &RunFigures| f.server_cpu_us_per_req;
    let mut out = Vec::new();
    for p in pairs(&engines, &strategies, &placements, &roles) {
        let (Some(base), Some(other)) = (find(&*p.base), find(&*p.other)) else {
            continue;
        };
        let (b, o) = (
            base.by_round(r.repeat, gateway),
            other.by_round(r.repeat, gateway),
        );
        let Some(diff) = paired_difference(&o, &b) else {
            continue;
        };
        out.push(DesignChoice {
            choice: p.choice,
            within: p.within,
            base: base.route.key.clone(),
            other: other.route.key.clone(),
            gateway_cpu_us: diff,
            gateway_cpu_ratio: paired_ratio(&o, &b),
            base_mw_mean_us: base.median().and_then(|f| f.mw_mean_us),
            other_mw_mean_us: other.median().and_then(|f| f.mw_mean_us),
            base_mw_vm_mean_us: base.median().and_then(|f| f.mw_vm_mean_us),
            other_mw_vm_mean_us: other.median().and_then(|f| f.mw_vm_mean_us),
        });
    }
    out
}

/// "+31.0 µs (24.1 to 37.9)", with "not significant" when the interval
/// contains 0.
pub fn diff_cell(d: &DiffCi) -> String {
    match (d.low, d.high) {
        (Some(l), Some(h)) if d.significant() => format!("{:+.1} µs ({l:.1} to {h:.1})", d.diff),
        (Some(l), Some(h)) => format!("{:+.1} µs ({l:.1} to {h:.1}), not significant", d.diff),
        _ => format!("{:+.1} µs (1 round: no interval)", d.diff),
    }
}

/// "91.65 µs", or "91.65 µs (10.75 on its VM thread)" for calls that ran
/// on one.
fn mean_cell(v: Option<f64>, vm: Option<f64>) -> String {
    match (v, vm) {
        (None, _) => "n/a".into(),
        (Some(v), None) => format!("{v:.2} µs"),
        (Some(v), Some(vm)) => format!("{v:.2} µs ({vm:.2} on its VM thread)"),
    }
}

/// The table: one row per design choice measured in this run.
pub fn design_table(r: &BenchReport) -> Option<Table> {
    if r.design_choices.is_empty() {
        return None;
    }
    let mut t = Table::new(
        "4. What each design choice costs (gateway CPU per request, paired over the rounds; 95% intervals)",
        &[
            "Design choice",
            "route",
            "against",
            "gateway CPU µs/request",
            "gateway CPU ratio",
            "middleware mean",
        ],
    );
    let title = |key: &str| {
        r.route("ours", key)
            .map_or(key.to_string(), |rr| rr.route.title())
    };
    for d in &r.design_choices {
        let choice = match &d.within {
            Some(w) => format!("{} ({w})", d.choice),
            None => d.choice.clone(),
        };
        t.rows.push(vec![
            choice,
            title(&d.other),
            title(&d.base),
            diff_cell(&d.gateway_cpu_us),
            ratio_cell(d.gateway_cpu_ratio.as_ref()),
            format!(
                "{} vs {}",
                mean_cell(d.other_mw_mean_us, d.other_mw_vm_mean_us),
                mean_cell(d.base_mw_mean_us, d.base_mw_vm_mean_us)
            ),
        ]);
    }
    t.notes.push(
        "gateway CPU µs/request = the route's minus the one it is against, per round, averaged, with a 95% t interval \
         over the rounds (\"not significant\" when it contains 0); the ratio is the same pairing as the other ratios."
            .into(),
    );
    t.notes.push(
        "middleware mean = the mean call time from the gateway's own histograms (the median hides GC pauses and \
         spare-object batches); the rest of a difference is marshalling, GC and caches left cold outside the call. \
         On its VM thread = the script's own time there: the rest of such a call's mean is the hand-off and the wait \
         for the thread, time the request waits rather than CPU it costs."
            .into(),
    );
    if let Some(aa) = control_difference(r) {
        t.notes.push(format!(
            "A/A control, the same figure for no middleware measured twice: {}.",
            diff_cell(&aa)
        ));
    }
    Some(t)
}

/// The A/A control's gateway CPU difference: the noise floor of the table.
fn control_difference(r: &BenchReport) -> Option<DiffCi> {
    let (a, b) = (r.route("ours", "plain")?, r.route("ours", "plain-again")?);
    let g = |f: &RunFigures| f.server_cpu_us_per_req;
    paired_difference(&b.by_round(r.repeat, g), &a.by_round(r.repeat, g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::apis::Route;

    fn route(
        key: &str,
        family: &str,
        engine: Option<&str>,
        strategy: Option<&str>,
        cpu: &[f64],
    ) -> RouteResult {
        let mut route = Route::bare(key, key, &format!("/{key}/hello/"), family != "plain");
        route.kind = (family != "plain").then(|| MiddlewareKind {
            family: family.into(),
            driver: family.into(),
            engine: engine.map(str::to_string),
            strategy: strategy.map(str::to_string),
            placement: None,
            role: Role::Request,
        });
        let mut rr = RouteResult::new("ours", route);
        rr.runs = cpu
            .iter()
            .enumerate()
            .map(|(round, c)| RunFigures {
                round,
                rps: 1000.0 + round as f64,
                server_cpu_us_per_req: Some(*c),
                mw_mean_us: (family != "plain").then_some(*c / 10.0),
                // boa's calls run on a VM thread (QuickJS's in place).
                mw_vm_mean_us: (engine == Some("boa")).then_some(*c / 100.0),
                ..RunFigures::default()
            })
            .collect();
        rr.finish();
        rr
    }

    fn report(routes: Vec<RouteResult>) -> BenchReport {
        let mut r: BenchReport = serde_json::from_value(serde_json::json!({
            "schema": "x", "requests": 1, "concurrency": 1, "keepalive": false, "repeat": 3,
            "stamps": {"version": "0", "date": "d", "cores": 2, "command": "c"},
            "processes": [], "peers": [], "routes": [], "comparisons": [], "problems": []
        }))
        .unwrap();
        r.routes = routes;
        r.design_choices = design_choices(&r);
        r
    }

    #[test]
    fn rows_exist_only_for_pairs_that_were_both_measured() {
        let r = report(vec![
            route("native", "native", None, None, &[50.0, 52.0, 51.0]),
            route(
                "js",
                "js",
                Some("boa"),
                Some("persistent"),
                &[60.0, 63.0, 61.0],
            ),
            route(
                "tj",
                "js",
                Some("boa"),
                Some("tyk-json"),
                &[250.0, 260.0, 255.0],
            ),
            route(
                "qj",
                "js",
                Some("quickjs"),
                Some("persistent"),
                &[58.0, 60.0, 59.0],
            ),
            route(
                "odd",
                "js",
                Some("quickjs"),
                Some("pooled"),
                &[70.0, 70.0, 70.0],
            ),
        ]);
        let names: Vec<String> = r
            .design_choices
            .iter()
            .map(|d| {
                format!(
                    "{} [{}] {} - {}",
                    d.choice,
                    d.within.as_deref().unwrap_or(""),
                    d.other,
                    d.base
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                "VM vs native [] js - native",
                "VM vs native [QuickJS] qj - native",
                "Tyk's marshalling [boa] tj - js",
                "strategy pooled [quickjs] odd - qj",
                "engine: QuickJS vs boa [persistent] qj - js",
            ]
        );
        let vm = &r.design_choices[0];
        // Per-round differences 10, 11, 10.
        assert!((vm.gateway_cpu_us.diff - 31.0 / 3.0).abs() < 1e-9);
        assert_eq!(vm.gateway_cpu_us.rounds, 3);
        assert_eq!(
            (vm.base_mw_mean_us, vm.other_mw_mean_us),
            (Some(5.2), Some(6.3))
        );
        assert_eq!(
            (vm.base_mw_vm_mean_us, vm.other_mw_vm_mean_us),
            (None, Some(0.63))
        );
        let t = design_table(&r).unwrap();
        assert_eq!(t.rows[0][5], "6.30 µs (0.63 on its VM thread) vs 5.20 µs");
        assert_eq!(t.rows.len(), 5);
        assert_eq!(t.rows[1][0], "VM vs native (QuickJS)");
        assert!(t.rows[2][0] == "Tyk's marshalling (boa)", "{:?}", t.rows[2]);
        assert!(t.rows[0][3].starts_with("+10.3 µs ("), "{:?}", t.rows[0]);
    }

    /// A route placed by its definition is paired only with its engine's
    /// route placed by the gateway: boa inline prices the isolation (the
    /// VM-thread route minus it), any other placement is its own row; no
    /// other pair picks a placed route, wherever it is listed.
    #[test]
    fn a_placed_route_prices_its_placement_only() {
        let place = |mut rr: RouteResult, p: &str| {
            if let Some(k) = rr.route.kind.as_mut() {
                k.placement = Some(p.into());
            }
            rr
        };
        let boa = |key, cpu| route(key, "js", Some("boa"), Some("persistent"), cpu);
        let qjs = |key, cpu| route(key, "js", Some("quickjs"), Some("persistent"), cpu);
        let r = report(vec![
            route("native", "native", None, None, &[50.0, 50.0, 50.0]),
            place(boa("inl", &[55.0, 56.0, 55.0]), "inline"),
            place(qjs("qt", &[57.0, 57.0, 57.0]), "threads"),
            boa("js", &[65.0, 66.0, 65.0]),
            qjs("qj", &[51.0, 51.0, 51.0]),
        ]);
        let rows: Vec<String> = r
            .design_choices
            .iter()
            .map(|d| {
                let within = d.within.as_deref().unwrap_or("");
                format!("{} [{within}] {} - {}", d.choice, d.other, d.base)
            })
            .collect();
        assert_eq!(
            rows,
            [
                "VM vs native [] js - native",
                "VM vs native [boa inline] inl - native",
                "VM vs native [QuickJS] qj - native",
                "engine: QuickJS vs boa [persistent] qj - js",
                "isolation: VM thread vs inline [boa] js - inl",
                "placement threads [quickjs] qt - qj",
            ]
        );
        assert!((r.design_choices[4].gateway_cpu_us.diff - 10.0).abs() < 1e-9);
        // QuickJS placed by the gateway against native: +1 µs.
        assert!((r.design_choices[2].gateway_cpu_us.diff - 1.0).abs() < 1e-9);
        let t = design_table(&r).unwrap();
        assert_eq!(t.rows[1][0], "VM vs native (boa inline)");
        assert_eq!(t.rows[2][0], "VM vs native (QuickJS)");
        let inl = r.route("ours", "inl").unwrap();
        assert_eq!(inl.route.kind.as_ref().unwrap().label("inl"), "JS inline");
    }

    #[test]
    fn no_measured_pair_means_no_table() {
        let r = report(vec![route(
            "native",
            "native",
            None,
            None,
            &[50.0, 52.0, 51.0],
        )]);
        assert!(r.design_choices.is_empty());
        assert!(design_table(&r).is_none());
    }

    #[test]
    fn fresh_state_wasm_and_the_go_adapter_are_priced_against_their_references() {
        let mut r = report(vec![
            route("native", "native", None, None, &[50.0, 50.0, 50.0]),
            route(
                "js",
                "js",
                Some("boa"),
                Some("persistent"),
                &[60.0, 60.0, 60.0],
            ),
            route(
                "fresh",
                "js",
                Some("boa"),
                Some("fresh"),
                &[90.0, 91.0, 89.0],
            ),
            route("wasm", "wasm", None, None, &[55.0, 56.0, 54.0]),
            route("go", "go", None, None, &[70.0, 70.0, 70.0]),
            route("plain", "plain", None, None, &[30.0, 31.0, 29.0]),
            route("plain-again", "plain", None, None, &[30.0, 30.0, 30.0]),
        ]);
        let rows: Vec<(&str, &str, &str)> = r
            .design_choices
            .iter()
            .map(|d| (d.choice.as_str(), d.other.as_str(), d.base.as_str()))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("VM vs native", "js", "native"),
                ("fresh state", "fresh", "js"),
                ("wasm vs native", "wasm", "native"),
                ("Go adapter vs Rust native", "go", "native"),
            ]
        );
        let go = &r.design_choices[3];
        // Identical rounds: a zero-width interval, significant.
        assert_eq!(
            (go.gateway_cpu_us.low, go.gateway_cpu_us.high),
            (Some(20.0), Some(20.0))
        );
        assert!((go.gateway_cpu_ratio.unwrap().ratio - 1.4).abs() < 1e-12);
        // The A/A control is the table's noise floor, computed by the same
        // paired difference (plain-again - plain: 0, +1, -1 → mean 0).
        let t = design_table(&r).unwrap();
        let note = t
            .notes
            .iter()
            .find(|n| n.starts_with("A/A control"))
            .unwrap();
        assert!(
            note.contains("+0.0 µs (") && note.contains("not significant"),
            "{note}"
        );
        // Without the second plain route there is no such note.
        r.routes.retain(|rr| rr.route.key != "plain-again");
        let t = design_table(&r).unwrap();
        assert!(!t.notes.iter().any(|n| n.starts_with("A/A control")));
    }

    /// `route`, with the middleware in `role`.
    fn route_in(role: Role, key: &str, engine: &str, cpu: &[f64]) -> RouteResult {
        let mut rr = route(key, "js", Some(engine), Some("persistent"), cpu);
        rr.route.kind.as_mut().unwrap().role = role;
        rr
    }

    #[test]
    fn routes_of_other_roles_are_compared_only_among_themselves() {
        // The QuickJS response hook comes first, as its file name sorts
        // before the seed-like QuickJS route's: it must not become the
        // seed's engine row, nor the boa response hook the VM row.
        let r = report(vec![
            route("native", "native", None, None, &[50.0, 50.0, 50.0]),
            route_in(Role::ResponseHook, "rh", "boa", &[140.0, 141.0, 139.0]),
            route_in(Role::ResponseHook, "qrh", "quickjs", &[80.0, 80.0, 80.0]),
            route_in(Role::VirtualEndpoint, "ve", "boa", &[90.0, 90.0, 90.0]),
            route_in(Role::CallsService, "mk", "quickjs", &[70.0, 70.0, 70.0]),
            route(
                "js",
                "js",
                Some("boa"),
                Some("persistent"),
                &[60.0, 60.0, 60.0],
            ),
            route(
                "qj",
                "js",
                Some("quickjs"),
                Some("persistent"),
                &[55.0, 55.0, 55.0],
            ),
            route("wasm", "wasm", None, None, &[54.0, 54.0, 54.0]),
        ]);
        let rows: Vec<(&str, Option<&str>, &str, &str)> = r
            .design_choices
            .iter()
            .map(|d| {
                (
                    d.choice.as_str(),
                    d.within.as_deref(),
                    d.other.as_str(),
                    d.base.as_str(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                ("VM vs native", None, "js", "native"),
                ("VM vs native", Some("QuickJS"), "qj", "native"),
                ("engine: QuickJS vs boa", Some("persistent"), "qj", "js"),
                ("wasm vs native", None, "wasm", "native"),
                (
                    "engine: QuickJS vs boa",
                    Some("persistent, response hook"),
                    "qrh",
                    "rh"
                ),
            ]
        );
        assert!((r.design_choices[4].gateway_cpu_us.diff + 60.0).abs() < 1e-9);
        let t = design_table(&r).unwrap();
        assert_eq!(
            t.rows[4][0],
            "engine: QuickJS vs boa (persistent, response hook)"
        );
    }

    #[test]
    fn difference_cells_say_significant_not_significant_or_one_round() {
        let d = |diff, low, high, rounds| DiffCi {
            diff,
            low,
            high,
            rounds,
        };
        assert_eq!(
            diff_cell(&d(31.0, Some(24.1), Some(37.9), 5)),
            "+31.0 µs (24.1 to 37.9)"
        );
        assert_eq!(
            diff_cell(&d(-0.5, Some(-2.0), Some(1.0), 5)),
            "-0.5 µs (-2.0 to 1.0), not significant"
        );
        assert_eq!(
            diff_cell(&d(3.0, None, None, 1)),
            "+3.0 µs (1 round: no interval)"
        );
    }
}
