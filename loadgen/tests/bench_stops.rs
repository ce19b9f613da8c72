//! `loadgen bench` stopped or misconfigured part way: a signal in the middle
//! of the rounds still gives the report of the runs done and leaves no
//! process or private directory behind; an output path that cannot be
//! written fails before the first run; pinned processes are measured
//! against the cores they could use.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::bins::{apis_dir, assert_children_gone, bench, bin_dir, children, validate, workspace};
use serde_json::Value;

/// The bench's private directories left in `tmp`.
fn left_in(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("loadgen-bench-"))
        .collect()
}

/// What a bench stopped by `signal` after `after` of measuring left:
/// its exit code, stdout, stderr and `--json` report (if written).
fn stopped_bench(signal: i32, after: Duration, dir: &Path) -> (Option<i32>, String, String, Value) {
    let apis = apis_dir(dir);
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let json = dir.join("b.json");
    let _ = std::fs::remove_file(&json);
    // Many short rounds: still measuring when the signal comes, whenever
    // that is; bounded by the kill below if it never stops.
    let child = common::dies_with_test(&mut Command::new(bin_dir().join("loadgen")))
        .arg("bench")
        .args(["--bin-dir", bin_dir().to_str().unwrap()])
        .args(["--upstream-port", "0", "--gateway-port", "0"])
        .args([
            "-n", "20", "-c", "2", "--repeat", "100000", "--warmup", "10",
        ])
        .args(["--routes", "plain", "--apis", apis.to_str().unwrap()])
        .args(["--json", json.to_str().unwrap()])
        .env("TMPDIR", &tmp)
        .current_dir(workspace())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let until = Instant::now() + Duration::from_secs(60);
    while children(pid).len() < 2 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let kids = children(pid);
    assert!(kids.len() >= 2, "the bench did not start its servers");
    std::thread::sleep(after);
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(pid as i32, signal) };
    // Bounded: a bench that does not stop is killed (and the test fails).
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    let until = Instant::now() + Duration::from_secs(60);
    while !waiter.is_finished() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    if !waiter.is_finished() {
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let out = waiter.join().unwrap();
    // Its children are stopped, not merely orphaned.
    for k in kids {
        let stat = std::fs::read_to_string(format!("/proc/{k}/stat")).unwrap_or_default();
        assert!(
            stat.is_empty()
                || stat
                    .rsplit(')')
                    .next()
                    .unwrap()
                    .trim_start()
                    .starts_with('Z'),
            "child {k} outlived the bench"
        );
    }
    assert_eq!(
        left_in(&tmp),
        Vec::<String>::new(),
        "private directory left behind"
    );
    let v = std::fs::read(&json)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        v,
    )
}

#[test]
fn a_bench_stopped_by_ctrl_c_or_sigterm_mid_rounds_reports_the_runs_done_and_leaves_nothing_behind()
{
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let dir = tempfile::tempdir().unwrap();
        // Stopped before any run finished there is nothing to report; wait
        // longer and try again (no timing is asserted, only what it says).
        let mut last = String::new();
        for wait in [2, 5, 15] {
            let (status, stdout, stderr, v) =
                stopped_bench(signal, Duration::from_secs(wait), dir.path());
            assert_eq!(status, Some(code), "signal {signal}: {stderr}");
            if v.is_null() && stderr.contains("interrupted") && stdout.is_empty() {
                last = stderr;
                continue;
            }
            assert!(
                stdout.contains("INCOMPLETE: the measurements stopped in round"),
                "signal {signal}: {stdout}\n{stderr}"
            );
            assert!(
                stderr.contains("loadgen bench: the measurements stopped in round"),
                "{stderr}"
            );
            validate(&v);
            let stopped = v["stopped"].as_str().unwrap();
            assert!(stopped.contains("interrupted"), "{stopped}");
            // The rounds begun, every run in them complete and counted.
            let repeat = v["repeat"].as_u64().unwrap();
            assert!((1..100000).contains(&repeat));
            let plain = v["routes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["route"]["key"] == "plain")
                .unwrap();
            let runs = plain["runs"].as_array().unwrap();
            assert!(!runs.is_empty());
            assert!(runs.iter().all(|r| r["complete"] == 20 && r["failed"] == 0));
            assert_children_gone(&v);
            last.clear();
            break;
        }
        assert!(last.is_empty(), "no run finished in 15 s: {last}");
    }
}

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
