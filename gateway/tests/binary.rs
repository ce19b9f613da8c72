//! The `gateway` binary as a user runs it: startup line, signals, exit code.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

#[test]
fn sigterm_drains_the_request_in_flight_and_exits_zero() {
    drains_on(libc::SIGTERM);
}

/// Tyk shuts down gracefully on SIGQUIT as on SIGTERM and SIGINT.
#[test]
fn sigquit_drains_the_request_in_flight_and_exits_zero_as_tyk() {
    drains_on(libc::SIGQUIT);
}

fn drains_on(signal: i32) {
    let (up, rec) = recorder_with_delay(Duration::from_millis(800));
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "a",
        &api_json("a", "/a/", &format!("http://{up}"), true, Value::Null),
    );
    let (mut child, addr) = start_binary(
        &[
            "--apis",
            dir.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--threads",
            "2",
        ],
        Stdio::null(),
    );

    let in_flight = std::thread::spawn(move || get(addr, "/a/slow"));
    for _ in 0..500 {
        if rec.count() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(rec.count(), 1, "the request never reached the upstream");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
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
        ("--jsvm-threads", "100000", "from 0 to 256"),
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

/// Starts the gateway binary with `args` and reads its address from its
/// first stdout line; stderr as `stderr` says.
fn start_binary(args: &[&str], stderr: Stdio) -> (std::process::Child, std::net::SocketAddr) {
    common::spawn_listening(
        common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
            .args(args)
            .stdin(Stdio::null())
            .stderr(stderr),
    )
}

/// One request on a fresh connection, `None` when no answer came within
/// `wait`.
fn answer_within(addr: std::net::SocketAddr, path: &str, wait: Duration) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// Waits (boundedly) for `child` to exit.
fn exits_within(
    child: &mut std::process::Child,
    wait: Duration,
) -> Option<std::process::ExitStatus> {
    let until = std::time::Instant::now() + wait;
    while std::time::Instant::now() < until {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A one-worker gateway whose only API, `/d/`, proxies to a dead address,
/// so that every request to it logs one failure line (no `--log-rate`
/// limit), with its stderr a pipe for the test (`child.stderr`). The
/// definitions' directory and the dead address are held by the first
/// value.
fn failing_with_piped_stderr() -> (
    (tempfile::TempDir, DeadAddr),
    std::process::Child,
    std::net::SocketAddr,
) {
    let dead = dead_addr();
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "d",
        &api_json("d", "/d/", &format!("http://{dead}"), true, Value::Null),
    );
    let (child, addr) = start_binary(
        &[
            "--apis",
            dir.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--threads",
            "1",
            "--log-rate",
            "0",
        ],
        Stdio::piped(),
    );
    ((dir, dead), child, addr)
}

#[test]
fn a_stderr_nobody_reads_never_stops_the_gateway_answering_or_exiting() {
    // stderr is a pipe this test holds open and never reads: once its
    // buffer (64 KiB) is full, a write to it blocks.
    let (_held, mut child, addr) = failing_with_piped_stderr();
    let _unread = child.stderr.take().unwrap();
    // Each request logs its proxy failure (a line of a few hundred bytes):
    // well over the pipe's buffer in all.
    for i in 0..1500 {
        let got = answer_within(addr, "/d/x", Duration::from_secs(20));
        let got = got.unwrap_or_else(|| {
            let _ = child.kill();
            panic!("request {i} got no answer: the worker is stuck writing its log")
        });
        assert!(got.starts_with("HTTP/1.1 500"), "{got}");
    }
    let hello = answer_within(addr, "/hello", Duration::from_secs(20));
    assert!(hello.is_some_and(|h| h.starts_with("HTTP/1.1 200")));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = exits_within(&mut child, Duration::from_secs(30));
    let _ = child.kill();
    let status = status.expect("no exit within 30 s of SIGTERM");
    assert!(status.success(), "gateway exited with {status}");
}

#[test]
fn log_lines_a_full_stderr_dropped_are_counted_in_the_log() {
    use std::io::{Read, Write};
    let (_held, mut child, addr) = failing_with_piped_stderr();
    let mut stderr = child.stderr.take().unwrap();
    // Each failing request logs one line. Unread, stderr takes a pipe's
    // worth (64 KiB, a few hundred lines), the queue 16,384 more: the rest
    // are dropped.
    const REQUESTS: usize = 18_000;
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut answer = |conn: &mut std::net::TcpStream| {
        write!(conn, "GET /d/x HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.starts_with("HTTP/1.1 500"), "{status:?}");
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
    };
    for _ in 0..REQUESTS {
        answer(&mut conn);
    }
    // Now read stderr, and fail one request more: its line says what was
    // dropped before it.
    let read = std::thread::spawn(move || {
        let mut all = String::new();
        let _ = stderr.read_to_string(&mut all);
        all
    });
    answer(&mut conn);
    // The queue drains to the reader; the last line's count is in it once
    // the gateway has exited.
    std::thread::sleep(Duration::from_millis(500));
    drop(conn);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = exits_within(&mut child, Duration::from_secs(30));
    let _ = child.kill();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let log = read.join().unwrap();
    let seen = log.matches("request answered 500").count();
    let dropped: usize = log
        .lines()
        .filter_map(|l| l.strip_prefix("gateway: "))
        .filter_map(|l| l.split_once(" log lines dropped before this one"))
        .map(|(n, _)| n.parse::<usize>().unwrap())
        .sum();
    assert!(dropped > 0, "nothing said dropped; {seen} lines seen");
    // One worker: every failure is a line seen or one counted dropped.
    assert_eq!(
        seen + dropped,
        REQUESTS + 1,
        "seen {seen}, dropped {dropped}"
    );
}

#[test]
fn a_second_signal_during_shutdown_exits_at_once() {
    let (up, rec) = recorder_with_delay(Duration::from_secs(30));
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "a",
        &api_json("a", "/a/", &format!("http://{up}"), true, Value::Null),
    );
    let (mut child, addr) = start_binary(
        &[
            "--apis",
            dir.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--threads",
            "1",
            "--shutdown-grace",
            "60s",
        ],
        Stdio::null(),
    );
    // A request the upstream holds for 30 s: shutdown waits for it.
    std::thread::spawn(move || answer_within(addr, "/a/slow", Duration::from_secs(40)));
    for _ in 0..500 {
        if rec.count() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(rec.count(), 1, "the request never reached the upstream");
    let pid = child.id() as i32;
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let draining = exits_within(&mut child, Duration::from_millis(500));
    assert!(
        draining.is_none(),
        "exited with a request in flight: {draining:?}"
    );
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let status = exits_within(&mut child, Duration::from_secs(15));
    let _ = child.kill();
    let status = status.expect("still draining 15 s after a second signal");
    assert_eq!(status.code(), Some(1), "{status}");
}

#[test]
fn shutdown_ends_even_when_a_worker_is_blocked_in_a_middleware_call() {
    let dir = tempfile::tempdir().unwrap();
    // Backtracking without end in boa's regex engine, which no slice of
    // the JS host interrupts; run inline, it holds the worker thread.
    let script = dir.path().join("redos.js");
    std::fs::write(
        &script,
        r#"var redos = new TykJS.TykMiddleware.NewMiddleware({});
redos.NewProcessRequest(function(request, session, spec) {
    /(a+)+$/.test("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab");
    return redos.ReturnData(request, {});
});
"#,
    )
    .unwrap();
    let up = dead_addr();
    let mw = serde_json::json!({
        "driver": "otto",
        "pre": [{"name": "redos", "path": script.to_str().unwrap()}]
    });
    write_api(
        dir.path(),
        "r",
        &api_json("r", "/r/", &format!("http://{up}"), true, mw),
    );
    let (mut child, addr) = start_binary(
        &[
            "--apis",
            dir.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--threads",
            "1",
            "--jsvm-threads",
            "0",
            "--shutdown-grace",
            "1s",
        ],
        Stdio::null(),
    );
    std::thread::spawn(move || answer_within(addr, "/r/x", Duration::from_secs(40)));
    // The worker answers nothing once the script runs.
    let stuck = (0..20).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        answer_within(addr, "/hello", Duration::from_secs(2)).is_none()
    });
    assert!(stuck, "the script never held the worker");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = exits_within(&mut child, Duration::from_secs(30));
    let _ = child.kill();
    let status = status.expect("no exit within 30 s of SIGTERM (grace 1 s)");
    assert_eq!(status.code(), Some(1), "{status}");
}

#[test]
fn listen_failures_name_the_flag_and_their_likely_cause() {
    let dir = tempfile::tempdir().unwrap();
    let apis = dir.path().to_str().unwrap();
    // TEST-NET-1: no interface of this machine has it.
    let out = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
        .args(["--apis", apis, "--listen", "192.0.2.1:8091"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--listen")
            && err.contains("no interface")
            && !err.contains("another process"),
        "{err}"
    );
    // One listener per worker, more than the fd limit allows.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gateway"));
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 64,
                    rlim_max: 64,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let out = common::dies_with_test(&mut cmd)
        .args([
            "--apis",
            apis,
            "--listen",
            "127.0.0.1:0",
            "--threads",
            "200",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--threads") && err.contains("of 200"), "{err}");
}

#[test]
fn a_rust_log_that_does_not_parse_is_said_not_dropped() {
    let out = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
        .args(["--apis", "/nonexistent/apis", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "gateway=[{oops")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("RUST_LOG") && err.contains("logging at info"),
        "{err}"
    );
}

/// The gateway raises glibc's malloc arena limit before its first thread
/// (`arenas.rs`; `malloc_arenas.rs` shows what the limit does), unless the
/// environment sets it.
#[test]
fn the_malloc_arena_limit_is_raised_unless_the_environment_sets_it() {
    let run = |env: Option<(&str, &str)>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gateway"));
        cmd.args(["--apis", "/nonexistent/apis", "--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "gateway=debug")
            .env_remove("MALLOC_ARENA_MAX")
            .env_remove("GLIBC_TUNABLES");
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = common::dies_with_test(&mut cmd).output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let limit = gateway::arenas::limit_for(cores, None, None).unwrap();
    let err = run(None);
    assert!(
        err.contains(&format!("malloc arenas: up to {limit}")),
        "{err}"
    );
    let err = run(Some(("MALLOC_ARENA_MAX", "4")));
    assert!(
        err.contains("malloc arenas: as MALLOC_ARENA_MAX sets"),
        "{err}"
    );
}

/// `--jsvm-wait` (the in-place wait, gone) still parses, so that command
/// lines that set it keep starting, and says it does nothing.
#[test]
fn jsvm_wait_is_accepted_and_said_to_have_no_effect() {
    let out = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
        .args(["--apis", "/nonexistent/apis", "--listen", "127.0.0.1:0"])
        .args(["--jsvm-wait", "200us"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--jsvm-wait") && err.contains("has no effect"),
        "{err}"
    );
    assert!(
        err.contains("/nonexistent/apis"),
        "it went on to the definitions: {err}"
    );
}

#[test]
fn a_stdout_that_takes_nothing_does_not_stop_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    // A port the kernel found free (there is no line on stdout to read it
    // from).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut child = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
        .args(["--apis", dir.path().to_str().unwrap(), "--listen", &listen])
        .stdin(Stdio::null())
        .stdout(full)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = listen.parse().unwrap();
    let mut hello = None;
    for _ in 0..200 {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the gateway exited with {status}");
        }
        if std::net::TcpStream::connect(addr).is_ok() {
            hello = answer_within(addr, "/hello", Duration::from_secs(10));
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(hello.is_some_and(|h| h.starts_with("HTTP/1.1 200")));
}
