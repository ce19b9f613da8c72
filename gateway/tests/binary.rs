//! The `gateway` binary as a user runs it: startup line, signals, exit code.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

#[test]
fn sigterm_drains_the_request_in_flight_and_exits_zero() {
    let (up, rec) = recorder_with_delay(Duration::from_millis(800));
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "a",
        &api_json("a", "/a/", &format!("http://{up}"), true, Value::Null),
    );
    let mut child = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
        .args([
            "--apis",
            dir.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--threads",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: std::net::SocketAddr = line
        .trim()
        .strip_prefix("gateway listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();

    let in_flight = std::thread::spawn(move || get(addr, "/a/slow"));
    for _ in 0..500 {
        if rec.count() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(rec.count(), 1, "the request never reached the upstream");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let got = in_flight.join().unwrap();
    assert_eq!(
        (got.status.as_u16(), got.text().as_str()),
        (200, "recorded")
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "gateway exited with {status}");
}

#[test]
fn an_unusable_listen_address_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
        .args(["--apis", dir.path().to_str().unwrap(), "--listen", &addr])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&addr) && err.contains("cannot listen"),
        "{err}"
    );

    let out = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
        .args(["--apis", "/nonexistent/apis", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/apis"), "{err}");
}

#[test]
fn a_port_another_gateway_serves_is_refused_not_shared() {
    let dir = tempfile::tempdir().unwrap();
    let first = gateway::server::Gateway::bind(
        "127.0.0.1:0".parse().unwrap(),
        gateway::server::GatewayConfig {
            apis_dir: dir.path().to_path_buf(),
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let addr = first.local_addr().to_string();
    let out = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
        .args(["--apis", dir.path().to_str().unwrap(), "--listen", &addr])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a second gateway joined {addr}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen"));
}

#[test]
fn placement_flags_reject_what_they_cannot_mean_naming_the_flag() {
    for (flag, value, says) in [
        ("--jsvm-wait", "5s", "200us"),
        ("--jsvm-wait", "2000ms", "between 0 and 1s"),
        ("--jsvm-inline-budget", "1.5s", "200us"),
        ("--cpu-affinity", "sometimes", "auto"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["--listen", "127.0.0.1:0", flag, value])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flag} {value} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(flag) && err.contains(says),
            "{flag} {value}: {err}"
        );
    }
}
