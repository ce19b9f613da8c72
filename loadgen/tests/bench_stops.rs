//! `loadgen bench` misconfigured: an output path that cannot be written
//! fails before the first run; pinned processes are measured against the
//! cores they could use.

mod common;

use common::bins::{apis_dir, bench, validate};
use serde_json::Value;

#[test]
fn a_chart_beside_the_markdown_that_cannot_be_written_fails_before_any_run() {
    let tmp = tempfile::tempdir().unwrap();
    let md = tmp.path().join("r.md");
    // Where the headline chart goes, a directory: only the chart fails.
    std::fs::create_dir(tmp.path().join("r-headline.svg")).unwrap();
    let apis = apis_dir(tmp.path());
    let out = bench(&[
        "-n",
        "20",
        "-c",
        "2",
        "--repeat",
        "1",
        "--warmup",
        "10",
        "--routes",
        "plain",
        "--apis",
        apis.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("r-headline.svg"), "{stderr}");
    assert!(out.stdout.is_empty(), "measured first");
    assert!(!md.exists());
}

#[test]
fn pinned_processes_are_busy_against_the_cores_they_could_run_on() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        eprintln!("one core: loadgen's own affinity is the machine's, nothing to tell apart");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_dir(tmp.path());
    let json = tmp.path().join("b.json");
    // loadgen alone on core 0, both servers on core 1: the run can keep
    // two cores busy, though loadgen itself may use only one.
    let out = bench(&[
        "-n",
        "100",
        "-c",
        "2",
        "--repeat",
        "2",
        "--warmup",
        "10",
        "--routes",
        "plain",
        "--apis",
        apis.to_str().unwrap(),
        "--cpus",
        "loadgen=0",
        "--cpus",
        "gateway=1",
        "--cpus",
        "upstream=1",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    validate(&v);
    let mut seen = 0;
    for route in v["routes"].as_array().unwrap() {
        for run in route["runs"].as_array().unwrap() {
            let (Some(all), Some(busy)) = (run["all_cpu_s"].as_f64(), run["cores_busy"].as_f64())
            else {
                continue;
            };
            assert_eq!(run["cores"], 2, "{run}");
            let wall = run["wall_s"].as_f64().unwrap().max(1e-9);
            assert!(
                (busy * wall * 2.0 - all).abs() <= 1e-9 * all.max(1.0),
                "cores_busy {busy} is not all_cpu_s {all} over 2 cores x {wall} s"
            );
            seen += 1;
        }
    }
    assert!(seen > 0, "no run had its CPU read");
}
