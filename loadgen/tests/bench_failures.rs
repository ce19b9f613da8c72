//! `loadgen bench` end to end, when something is wrong: a route that cannot
//! be measured, a peer that is unreachable or unknown, a taken port, a
//! missing binary, no `apis/` where the bench looked. Each fails (or not)
//! as documented, with one line naming the user's file or flag.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::bins::{apis_dir, bench, bin_dir, children, validate, workspace};
use serde_json::Value;

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
    let dead = common::DeadPort::new();
    let port = dead.port();
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

/// A `--compare` host that does not resolve is no usage error (exit 2 is
/// for a value of the wrong form): the bench fails when it plans the peer,
/// exit 1, naming the flag and its value.
#[test]
fn a_compare_host_that_does_not_resolve_fails_naming_the_flag() {
    let value = "tyk=http://no-such-host.invalid/";
    let out = bench(&["--routes", "plain", "--compare", value]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--compare {value:?}: cannot resolve no-such-host.invalid"
        )),
        "{stderr}"
    );
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
        // The repo root, where the default `apis` is (elsewhere that is
        // the error, exit 2, before any port is tried).
        .current_dir(workspace())
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
        // Ports the OS picks: the defaults (8222, 8091) may be in use here.
        .args(["--upstream-port", "0", "--gateway-port", "0"])
        .current_dir(workspace())
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
fn outside_the_repo_root_the_bench_says_where_it_looked_and_what_to_pass() {
    let elsewhere = tempfile::tempdir().unwrap();
    let out = common::dies_with_test(&mut Command::new(bin_dir().join("loadgen")))
        .args(["bench", "--bin-dir", bin_dir().to_str().unwrap()])
        .args(["--upstream-port", "0", "--gateway-port", "0"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    // A usage error, found before anything starts (exit 2, as --help says).
    assert_eq!(out.status.code(), Some(2));
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

fn alive(pid: u32) -> bool {
    // A zombie has exited; only a process that still runs counts.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

#[test]
fn a_killed_bench_leaves_no_gateway_or_upstream_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_dir(tmp.path());
    // Long enough that it is still measuring when it is killed; bounded so
    // that a bench that somehow survives ends anyway.
    let mut child = common::dies_with_test(&mut Command::new(bin_dir().join("loadgen")))
        .arg("bench")
        .args(["--bin-dir", bin_dir().to_str().unwrap()])
        .args(["--upstream-port", "0", "--gateway-port", "0"])
        .args(["-n", "200000", "-c", "2", "--repeat", "1", "--warmup", "10"])
        .args(["--routes", "plain", "--apis", apis.to_str().unwrap()])
        .current_dir(common::bins::workspace())
        // Killed, loadgen cannot remove its private directory: it goes in
        // this test's, which is removed.
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait (bounded) until both servers run: mock-upstream and gateway.
    let mut kids = Vec::new();
    for _ in 0..300 {
        kids = children(pid);
        if kids.len() >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        kids.len() >= 2,
        "the bench did not start its servers: {kids:?}"
    );
    // SIGKILL: loadgen gets no chance to stop them itself.
    child.kill().unwrap();
    child.wait().unwrap();
    // The kernel's death signal does; reaped by init, they vanish.
    for _ in 0..100 {
        if !kids.iter().any(|&k| alive(k)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let left: Vec<_> = kids.into_iter().filter(|&k| alive(k)).collect();
    for &k in &left {
        // SAFETY: kill(2); clean up what the test found before failing.
        unsafe { libc::kill(k as i32, libc::SIGKILL) };
    }
    panic!("children outlived a killed loadgen bench: {left:?}");
}
