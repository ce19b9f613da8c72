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
    Command::new(bin_dir().join("loadgen"))
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

#[test]
fn a_short_bench_measures_every_working_route_and_stops_its_children() {
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_dir(tmp.path());
    let (json, md, svg) = (
        tmp.path().join("b.json"),
        tmp.path().join("b.md"),
        tmp.path().join("b.svg"),
    );
    // A peer for --compare: a bare echo server, whose /plain/hello/ passes
    // the checks and whose plugin routes must be skipped (no marker).
    let peer = format!("echo=http://{}", common::mock_upstream());
    let out = bench(&[
        "--compare",
        &peer,
        "-n",
        "300",
        "--repeat",
        "1",
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
        "Requests/sec",
        "CPU time consumed",
        "CPU utilization",
        "2. Where the time goes",
        "3. Tyk beside us",
        "Tyk + otto",
        "12.61x",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }

    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "loadgen.bench/1");
    let routes = v["routes"].as_array().unwrap();
    let by_key = |k: &str| {
        routes
            .iter()
            .find(|r| r["target"] == "ours" && r["route"]["key"] == k)
            .unwrap()
    };
    // The routes without plugins always work; the plugin routes either work
    // or say why not (their drivers land separately).
    for key in ["plain", "upstream"] {
        let r = by_key(key);
        assert!(r["skipped"].is_null(), "{key}: {}", r["skipped"]);
        assert_eq!(r["runs"].as_array().unwrap().len(), 1);
        assert_eq!(r["median"]["complete"], 300);
        assert_eq!(r["median"]["failed"], 0);
        assert!(r["median"]["server_cpu_s"].as_f64().unwrap() > 0.0);
        assert!(r["median"]["mw_p50_us"].is_null());
    }
    // Both plugin routes run (the add-header plugin and the seed's script).
    for key in ["native", "js"] {
        let r = by_key(key);
        assert!(r["skipped"].is_null(), "{key}: {}", r["skipped"]);
        assert_eq!(r["median"]["failed"], 0, "{key}");
        // The gateway ran the middleware once per request (warm-up excluded).
        assert_eq!(r["median"]["mw_calls_per_req"], 1.0, "{key}");
        assert!(r["median"]["mw_p50_us"].as_f64().unwrap() > 0.0, "{key}");
    }
    // Gateway routes charge the gateway, the upstream and loadgen itself:
    // more than the gateway alone.
    for key in ["native", "js", "plain"] {
        let m = &by_key(key)["median"];
        let (gateway, all) = (
            m["server_cpu_us_per_req"].as_f64().unwrap(),
            m["all_cpu_us_per_req"].as_f64().unwrap(),
        );
        assert!(all > gateway && gateway > 0.0, "{key}: {m}");
    }
    assert!(text.contains("all CPU/request"), "{text}");
    assert!(
        text.contains("Throughput follows total CPU per request"),
        "{text}"
    );
    let mut measured = 4;

    let peer_route = |k: &str| {
        routes
            .iter()
            .find(|r| r["target"] == "echo" && r["route"]["key"] == k)
            .unwrap()
    };
    assert_eq!(peer_route("plain")["median"]["complete"], 300);
    assert!(peer_route("plain")["median"]["server_cpu_s"].is_null());
    let why = peer_route("native")["skipped"].as_str().unwrap();
    assert!(why.contains("did not see X-Custom-Goplugin"), "{why}");
    assert!(text.contains("4. Every target and route"));
    measured += 1;

    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains(
            "| Metric | native plugin | JS (VM) | Difference | no middleware | upstream direct |"
        ),
        "{md}"
    );
    assert!(md.contains("## 3. Tyk beside us"));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg"));
    assert_eq!(svg.matches("<polyline").count(), measured);

    // Every child is gone once the bench has returned.
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2);
    for p in procs {
        let pid = p[1].as_u64().unwrap();
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{} (pid {pid}) still running",
            p[0]
        );
    }
}

#[test]
fn a_taken_port_or_a_missing_binary_is_a_clear_error() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let out = Command::new(bin_dir().join("loadgen"))
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
    let out = Command::new(bin_dir().join("loadgen"))
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
            let _ = probe::get(gw_addr, &r.path, &[]).unwrap();
        }
    }
    let stats = control.stats().unwrap();
    // Every API whose middleware loaded ran it once per request; APIs
    // without middleware have no entry.
    for r in &routes {
        let entry = stats.iter().find(|s| Some(&s.api_id) == r.api_id.as_ref());
        match (r.marker.is_some(), entry) {
            (_, Some(e)) => {
                assert_eq!(e.count, 7, "{e:?}");
                assert!(e.p50_us > 0.0 && e.p50_us <= e.max_us, "{e:?}");
            }
            (false, None) => {}
            (true, None) => {
                let (status, _) = probe::get(gw_addr, &r.path, &[]).unwrap();
                assert_eq!(
                    status, 404,
                    "{} has middleware that ran but was not recorded",
                    r.path
                );
            }
        }
    }
    control.reset().unwrap();
    assert!(control.stats().unwrap().iter().all(|s| s.count == 0));
}
