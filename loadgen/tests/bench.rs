//! `loadgen bench` end to end: the real mock-upstream and gateway binaries
//! and the real add-header plugin.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use loadgen::bench::probe::{self, Control};
use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Where the gateway and mock-upstream binaries are.
///
/// `cargo test --workspace` (the README's test command) has already built
/// both next to this package's `loadgen` binary, so the bench test reuses
/// them instead of compiling the gateway (and boa) a second time. Run alone
/// (`cargo test -p loadgen`), the gateway may be missing there: then they are
/// built into a separate target directory.
fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let own = Path::new(env!("CARGO_BIN_EXE_loadgen")).parent().unwrap();
        if own.join("gateway").is_file() && own.join("mock-upstream").is_file() {
            return own.to_path_buf();
        }
        cargo_build(&["-p", "gateway", "-p", "loadgen", "--bins"])
    })
}

/// The add-header plugin library (cargo test does not produce cdylibs).
fn plugin_so() -> &'static Path {
    static SO: OnceLock<PathBuf> = OnceLock::new();
    SO.get_or_init(|| cargo_build(&["-p", "add-header", "--lib"]).join("libadd_header.so"))
}

/// Runs a nested cargo build into a separate target directory (a nested
/// cargo on the outer test's target directory would wait for its lock).
fn cargo_build(args: &[&str]) -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-target");
    let out = Command::new(env!("CARGO"))
        .arg("build")
        .args(args)
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(workspace())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "build failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug")
}

/// The repo's definitions, with the plugin path pointing at the plugin we built.
fn apis_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("apis");
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(workspace().join("apis")).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let so = plugin_so();
        let text = text.replace("target/release/libadd_header.so", so.to_str().unwrap());
        let js = workspace().join("js/");
        let text = text.replace("\"js/", &format!("\"{}", js.to_str().unwrap()));
        std::fs::write(dir.join(p.file_name().unwrap()), text).unwrap();
    }
    dir
}

fn bench(args: &[&str]) -> Output {
    common::dies_with_test(&mut Command::new(bin_dir().join("loadgen")))
        .arg("bench")
        .args([
            "--bin-dir",
            bin_dir().to_str().unwrap(),
            "--upstream-port",
            "0",
            "--gateway-port",
            "0",
        ])
        .args(args)
        .current_dir(workspace())
        .output()
        .unwrap()
}

/// The report's JSON must validate against the schema file in the repo.
fn validate(v: &Value) {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("loadgen/schema/bench-report.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "the report does not match its schema:\n{}",
        errors.join("\n")
    );
}

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
        "300",
        "--repeat",
        "3",
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
    for needle in [
        "1. The seed's table",
        "CPU per request (all processes)",
        "Requests/sec",
        "CPU time consumed",
        "Failed requests (all runs)",
        "2. Where the time goes",
        "Plugin vs VM across gateways",
        "Tyk + otto",
        "12.61x",
        "A/A control",
        concat!("loadgen ", env!("CARGO_PKG_VERSION")),
        "command: ",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }

    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    validate(&v);
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
    let routes = v["routes"].as_array().unwrap();
    let by_key = |k: &str| {
        routes
            .iter()
            .find(|r| r["target"] == "ours" && r["route"]["key"] == k)
            .unwrap_or_else(|| panic!("no route {k}"))
    };
    for key in ["native", "js", "plain", "plain-again", "upstream"] {
        let r = by_key(key);
        assert!(r["skipped"].is_null(), "{key}: {}", r["skipped"]);
        let runs = r["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3, "{key}");
        // One run per round, and the reported run is one of them.
        let rounds: Vec<u64> = runs.iter().map(|x| x["round"].as_u64().unwrap()).collect();
        let mut sorted = rounds.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2], "{key}");
        let median = &runs[r["median_run"].as_u64().unwrap() as usize];
        assert_eq!(median["complete"], 300);
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
        let r = by_key(key);
        let m = &r["runs"][r["median_run"].as_u64().unwrap() as usize];
        // The gateway ran the middleware once per request (warm-up excluded).
        assert_eq!(m["mw_calls_per_req"], 1.0, "{key}");
        assert!(m["mw_p50_us"].as_f64().unwrap() > 0.0, "{key}");
        // The mean as well as the percentiles (the median hides GC pauses).
        assert!(m["mw_mean_us"].as_f64().unwrap() > 0.0, "{key}");
        assert!(
            r["route"]["marker"]
                .as_str()
                .unwrap()
                .starts_with("X-Custom-"),
            "{key}"
        );
    }
    assert!(by_key("plain")["route"]["marker"].is_null());

    // The A/A control is computed exactly as every other comparison: the
    // same paired interval over the same rounds, recomputed here from the
    // runs in the JSON.
    let comparisons = v["comparisons"].as_array().unwrap();
    let find = |base: &str, other: &str, metric: &str| {
        comparisons
            .iter()
            .find(|c| {
                c["base"] == base
                    && c["other"] == other
                    && c["metric"] == metric
                    && c["target"] == "ours"
            })
            .unwrap_or_else(|| panic!("no comparison {base} vs {other} {metric}"))
    };
    let by_round = |key: &str, field: &str| -> Vec<Option<f64>> {
        let runs = by_key(key)["runs"].as_array().unwrap().clone();
        (0..3u64)
            .map(|k| {
                runs.iter()
                    .find(|x| x["round"] == k)
                    .and_then(|x| x[field].as_f64())
            })
            .collect()
    };
    // JSON keeps 17 significant digits at most: equal within rounding.
    let same = |a: &loadgen::bench::stats::RatioCi, b: &loadgen::bench::stats::RatioCi| {
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(1.0);
        let opt = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) => close(x, y),
            (None, None) => true,
            _ => false,
        };
        a.rounds == b.rounds && close(a.ratio, b.ratio) && opt(a.low, b.low) && opt(a.high, b.high)
    };
    for (base, other, control) in [("native", "js", false), ("plain", "plain-again", true)] {
        let c = find(base, other, "rps");
        assert_eq!(c["control"], control);
        let want =
            loadgen::bench::stats::paired_ratio(&by_round(base, "rps"), &by_round(other, "rps"))
                .unwrap();
        let got: loadgen::bench::stats::RatioCi = serde_json::from_value(c["ci"].clone()).unwrap();
        assert!(same(&got, &want), "{base} vs {other}: {got:?} != {want:?}");
        assert!(got.low.unwrap() <= got.ratio && got.ratio <= got.high.unwrap());
        let cpu = find(base, other, "all_cpu_per_request");
        let want = loadgen::bench::stats::paired_ratio(
            &by_round(other, "all_cpu_us_per_req"),
            &by_round(base, "all_cpu_us_per_req"),
        )
        .unwrap();
        let got: loadgen::bench::stats::RatioCi =
            serde_json::from_value(cpu["ci"].clone()).unwrap();
        assert!(
            same(&got, &want),
            "{base} vs {other} CPU: {got:?} != {want:?}"
        );
    }

    // The design-choice rows: one for each pair of routes that ran and
    // differ in one choice, computed by the same paired method over the
    // same rounds, recomputed here from the runs.
    let choices = v["design_choices"].as_array().unwrap();
    let names: Vec<&str> = choices
        .iter()
        .map(|c| c["choice"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"VM vs native"), "{names:?}");
    for c in choices {
        let (base, other) = (c["base"].as_str().unwrap(), c["other"].as_str().unwrap());
        let (o, b) = (
            by_round(other, "server_cpu_us_per_req"),
            by_round(base, "server_cpu_us_per_req"),
        );
        let want = loadgen::bench::stats::paired_difference(&o, &b).unwrap();
        let got: loadgen::bench::stats::DiffCi =
            serde_json::from_value(c["gateway_cpu_us"].clone()).unwrap();
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(1.0);
        assert!(
            got.rounds == want.rounds
                && close(got.diff, want.diff)
                && close(got.low.unwrap(), want.low.unwrap())
                && close(got.high.unwrap(), want.high.unwrap()),
            "{c}: {want:?}"
        );
        let ratio: loadgen::bench::stats::RatioCi =
            serde_json::from_value(c["gateway_cpu_ratio"].clone()).unwrap();
        assert!(same(
            &ratio,
            &loadgen::bench::stats::paired_ratio(&o, &b).unwrap()
        ));
        // Both routes ran their middleware: both means are known.
        assert!(c["other_mw_mean_us"].as_f64().unwrap() > 0.0, "{c}");
    }
    // Every JS route that is not the seed's (another engine or strategy)
    // is priced against the route it differs from by one choice.
    for r in routes
        .iter()
        .filter(|r| r["target"] == "ours" && r["skipped"].is_null())
    {
        let kind = &r["route"]["kind"];
        let key = r["route"]["key"].as_str().unwrap();
        if kind["family"] == "js" && key != "js" {
            assert!(
                choices.iter().any(|c| c["other"] == key),
                "{key} ({kind}) has no design-choice row: {names:?}"
            );
        }
    }
    assert!(
        text.contains("What each design choice costs") && text.contains("middleware mean"),
        "{text}"
    );

    let md = std::fs::read_to_string(&md).unwrap();
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
    let latency = std::fs::read_to_string(tmp.path().join("b-latency.svg")).unwrap();
    let headline = std::fs::read_to_string(tmp.path().join("b-headline.svg")).unwrap();
    assert!(latency.starts_with("<svg") && headline.starts_with("<svg"));
    // Legend labels as in the tables, title counting what is plotted.
    assert!(latency.contains("native plugin /gopl/hello/"), "{latency}");
    // The title counts what it plots: 900 requests (3 rounds x 300) per
    // measured route, however many definitions apis/ holds.
    let title = latency
        .split(" requests in all")
        .next()
        .and_then(|head| head.rsplit("Latency by percentile: ").next())
        .expect("latency chart title");
    let (n, total) = title.split_once(" routes, ").expect("N routes, M");
    let (n, total): (usize, usize) = (
        n.trim().parse().unwrap(),
        total.replace(',', "").trim().parse().unwrap(),
    );
    assert!(n >= 5, "{title}");
    assert_eq!(total, n * 900, "{title}");
    assert!(headline.contains("Tyk + otto"), "{headline}");
    assert_eq!(std::fs::read_to_string(&svg).unwrap(), latency);

    // Every child is gone once the bench has returned.
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2);
    for p in procs {
        let pid = p["pid"].as_u64().unwrap();
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{} (pid {pid}) still running",
            p["name"]
        );
    }
}

/// A definition whose plugin file does not exist, beside the repo's.
fn apis_with_missing_plugin(tmp: &Path) -> PathBuf {
    let apis = apis_dir(tmp);
    let def = serde_json::json!({
        "name": "Missing", "api_id": "missing-hello", "active": true, "use_keyless": true,
        "proxy": {"listen_path": "/missing/", "target_url": "http://localhost:8222", "strip_listen_path": true},
        "custom_middleware": {"driver": "wasm", "pre": [{"name": "hello", "path": "target/release/nope.wasm"}]}
    });
    std::fs::write(apis.join("missing-hello.json"), def.to_string()).unwrap();
    apis
}

#[test]
fn a_skipped_route_names_the_users_file_and_fails_only_when_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_with_missing_plugin(tmp.path());
    let json = tmp.path().join("b.json");
    let common = [
        "-n",
        "40",
        "-c",
        "2",
        "--repeat",
        "1",
        "--warmup",
        "10",
        "--apis",
        apis.to_str().unwrap(),
    ];
    // Not asked for: skipped with its reason, the rest measured, exit 0.
    let mut args = common.to_vec();
    args.extend([
        "--routes",
        "plain,missing-hello",
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = bench(&common);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let file = apis.join("missing-hello.json");
    assert!(
        text.contains(&format!("{}: middleware file", file.display())),
        "{text}"
    );
    assert!(
        text.contains("WebAssembly plugin /missing/hello/ was not measured"),
        "{text}"
    );
    // Asked for by name: the same skip fails the bench, one line naming the file.
    let out = bench(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("route missing-hello (ours) was not measured"))
        .unwrap_or_else(|| panic!("no reason line:\n{stderr}"));
    assert!(
        line.contains(&file.display().to_string()) && line.contains("cargo build --release"),
        "{line}"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    validate(&v);
    assert_eq!(
        v["problems"].as_array().unwrap().len(),
        1,
        "{}",
        v["problems"]
    );
    // --routes picked plain (and its A/A twin) and the missing one, nothing else.
    let keys: Vec<&str> = v["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["route"]["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, vec!["plain", "missing-hello", "plain-again"]);
}

#[test]
fn an_unreachable_compare_peer_or_an_unknown_peer_fails_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_dir(tmp.path());
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = bench(&[
        "-n",
        "40",
        "-c",
        "2",
        "--repeat",
        "1",
        "--warmup",
        "10",
        "--apis",
        apis.to_str().unwrap(),
        "--routes",
        "plain",
        "--compare",
        &format!("gone=http://127.0.0.1:{port}"),
        "--peer",
        "squid",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("route plain (gone) was not measured"),
        "{stderr}"
    );
    assert!(
        stderr.contains("peer squid was not measured: unknown peer \"squid\""),
        "{stderr}"
    );
}

#[test]
fn peers_from_the_repo_configs_are_measured_when_installed() {
    let installed: Vec<&str> = ["nginx", "haproxy"]
        .into_iter()
        .filter(|p| loadgen::bench::peers::plan(p).is_ok())
        .collect();
    if installed.is_empty() {
        eprintln!("skipped: neither nginx nor haproxy is installed (Debian: apt-get install nginx-light libnginx-mod-http-js libnginx-mod-http-lua haproxy)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_dir(tmp.path());
    let json = tmp.path().join("b.json");
    let out = bench(&[
        "-n",
        "200",
        "--repeat",
        "2",
        "--warmup",
        "20",
        "--apis",
        apis.to_str().unwrap(),
        "--routes",
        "native,js",
        "--peers",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{text}");
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    validate(&v);
    for peer in &installed {
        let routes: Vec<&Value> = v["routes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["target"] == *peer)
            .collect();
        assert!(!routes.is_empty(), "{peer}: no routes");
        for r in &routes {
            if let Some(why) = r["skipped"].as_str() {
                // Only a missing module may skip a route, and it says how to install it.
                assert!(
                    why.contains("apt-get install"),
                    "{peer} {}: {why}",
                    r["route"]["key"]
                );
                continue;
            }
            let m = &r["runs"][r["median_run"].as_u64().unwrap() as usize];
            assert_eq!(r["failed_total"], 0, "{peer} {}", r["route"]["key"]);
            // The peer's own processes are measured: CPU per request is known.
            assert!(
                m["server_cpu_us_per_req"].as_f64().unwrap() > 0.0,
                "{peer}: {m}"
            );
            if r["route"]["has_middleware"] == true {
                assert!(
                    r["route"]["marker"]
                        .as_str()
                        .unwrap()
                        .starts_with("X-Custom-"),
                    "{peer}: {}",
                    r["route"]
                );
            }
        }
        let native_vs_vm = v["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["target"] == *peer && c["base"] == "native");
        assert!(native_vs_vm, "{peer}: no native-vs-VM comparison");
        assert!(
            text.contains(&format!("{peer}: ")),
            "{peer} missing from the gateways table:\n{text}"
        );
    }
    let procs = v["processes"].as_array().unwrap();
    for p in procs {
        let pid = p["pid"].as_u64().unwrap();
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{} (pid {pid}) still running",
            p["name"]
        );
    }
}

#[test]
fn a_taken_port_or_a_missing_binary_is_a_clear_error() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let out = common::dies_with_test(&mut Command::new(bin_dir().join("loadgen")))
        .args([
            "bench",
            "--bin-dir",
            bin_dir().to_str().unwrap(),
            "--gateway-port",
            &port,
            "--upstream-port",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("port {port} on 127.0.0.1 is taken"))
            && err.contains("--gateway-port"),
        "{err}"
    );

    let empty = tempfile::tempdir().unwrap();
    let out = common::dies_with_test(&mut Command::new(bin_dir().join("loadgen")))
        .args(["bench", "--bin-dir", empty.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mock-upstream binary not found") && err.contains("cargo build --release"),
        "{err}"
    );
}

#[test]
fn tyk_stats_needs_the_secret_and_counts_known_traffic() {
    use loadgen::bench::procs::Child;
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_dir(tmp.path());
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let timeout = std::time::Duration::from_secs(20);
    let mut up = Child::start(
        "mock-upstream",
        &bin_dir().join("mock-upstream"),
        &args(&["--listen", "127.0.0.1:0"]),
        tmp.path(),
        tmp.path().join("up.log"),
        timeout,
    )
    .unwrap();
    let up_addr = up.addr.unwrap();
    loadgen::bench::procs::wait_ready(&mut up, up_addr, "/", timeout).unwrap();
    let routes = loadgen::bench::apis::prepare(
        &apis,
        &tmp.path().join("defs"),
        &workspace(),
        up_addr.port(),
    )
    .unwrap();
    let defs = tmp.path().join("defs");
    let mut gw = Child::start(
        "gateway",
        &bin_dir().join("gateway"),
        &args(&[
            "--apis",
            defs.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--secret",
            "s3cret",
        ]),
        tmp.path(),
        tmp.path().join("gw.log"),
        timeout,
    )
    .unwrap();
    let gw_addr = gw.addr.unwrap();
    loadgen::bench::procs::wait_ready(&mut gw, gw_addr, "/hello", timeout).unwrap();

    let (status, _) = probe::get(gw_addr, "/tyk/stats", &[]).unwrap();
    assert_eq!(status, 403);
    let (status, _) =
        probe::get(gw_addr, "/tyk/stats", &[("X-Tyk-Authorization", "wrong")]).unwrap();
    assert_eq!(status, 403);

    let control = Control {
        addr: gw_addr,
        secret: "s3cret".into(),
    };
    control.reset().unwrap();
    for r in &routes {
        for _ in 0..7 {
            let _ = probe::get(gw_addr, &r.route.path, &[]).unwrap();
        }
    }
    let stats = control.stats().unwrap();
    // Every API whose middleware loaded ran it once per request; APIs
    // without middleware have no entry.
    for r in &routes {
        let entry = stats
            .iter()
            .find(|s| Some(&s.api_id) == r.route.api_id.as_ref());
        match (r.route.has_middleware, entry) {
            (_, Some(e)) => {
                assert_eq!(e.count, 7, "{e:?}");
                assert!(e.p50_us > 0.0 && e.p50_us <= e.max_us, "{e:?}");
            }
            (false, None) => {}
            (true, None) => {
                let (status, _) = probe::get(gw_addr, &r.route.path, &[]).unwrap();
                // Middleware that did not load fails closed (Tyk's 500),
                // so nothing ran and nothing was recorded.
                assert_eq!(
                    status, 500,
                    "{} has middleware that ran but was not recorded",
                    r.route.path
                );
            }
        }
    }
    control.reset().unwrap();
    assert!(control.stats().unwrap().iter().all(|s| s.count == 0));
}

#[test]
fn outside_the_repo_root_the_bench_says_where_it_looked_and_what_to_pass() {
    let elsewhere = tempfile::tempdir().unwrap();
    let out = common::dies_with_test(&mut Command::new(bin_dir().join("loadgen")))
        .args(["bench", "--bin-dir", bin_dir().to_str().unwrap()])
        .args(["--upstream-port", "0", "--gateway-port", "0"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let looked = elsewhere.path().join("apis");
    assert!(
        err.contains(&format!("looked in {}", looked.display())) && err.contains("pass --apis DIR"),
        "{err}"
    );
    let help = common::dies_with_test(&mut Command::new(bin_dir().join("loadgen")))
        .args(["bench", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("Usage: loadgen bench"), "{help}");
    assert!(
        help.contains("only when it was asked for by name"),
        "{help}"
    );
}
