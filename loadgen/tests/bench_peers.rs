//! `loadgen bench --peers` end to end: nginx and HAProxy started from the
//! repo's configs in front of the same mock-upstream, when installed (the
//! test says it skipped otherwise; CI installs them).

mod common;

use common::bins::{apis_dir, assert_children_gone, bench, validate};
use serde_json::Value;

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
    assert_children_gone(&v);
}
