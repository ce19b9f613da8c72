//! The `mock-upstream` binary as a user runs it: flags, environment, output.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// Starts the binary and reads the address from its first line.
fn start(args: &[&str], env: &[(&str, &str)]) -> (Child, String) {
    try_start(args, env).unwrap_or_else(|line| panic!("unexpected first line {line:?}"))
}

/// As [`start`]; the first line when it is not the address (empty when the
/// binary exited at once, e.g. its port was taken).
fn try_start(args: &[&str], env: &[(&str, &str)]) -> Result<(Child, String), String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mock-upstream"));
    common::dies_with_test(&mut cmd);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    match line.trim().strip_prefix("Mock server listening on ") {
        Some(addr) => Ok((child, addr.to_string())),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(line)
        }
    }
}

/// Starts the binary on a port named to it in `args`/`env` (built from the
/// port by `with`): a port found free and released can be taken by another
/// test's socket before the binary binds it, so a start that fails is
/// retried on another port, a bounded number of times.
fn start_on_named_port(
    with: impl Fn(&str) -> (Vec<String>, Vec<(String, String)>),
) -> (u16, Child, String) {
    let mut last = String::new();
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (args, env) = with(&port.to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        match try_start(&args, &env) {
            Ok((child, addr)) => return (port, child, addr),
            Err(line) => last = line,
        }
    }
    panic!("no start on a named port in 5 tries; last first line {last:?}")
}

fn get(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn echoes_like_the_seeds_go_server() {
    let (mut child, addr) = start(&["--listen", "127.0.0.1:0"], &[]);
    let resp = get(
        &addr,
        "POST /any/path?x=1 HTTP/1.1\r\nHost: h\r\nx-custom-goplugin: hello-from-go-plugin\r\n\
         Content-Length: 3\r\nConnection: close\r\n\r\nabc",
    );
    child.kill().unwrap();
    let _ = child.wait();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    assert_eq!(
        body,
        "{\"headers\":{\"Connection\":\"close\",\"Content-Length\":\"3\",\
         \"X-Custom-Goplugin\":\"hello-from-go-plugin\"},\"message\":\"hello from mock upstream\",\
         \"method\":\"POST\",\"path\":\"/any/path\"}\n"
    );
}

#[test]
fn port_comes_from_the_flag_then_mock_port() {
    // A free port, released, asked for by environment.
    let (port, mut child, addr) =
        start_on_named_port(|p| (vec![], vec![("MOCK_PORT".into(), p.into())]));
    assert_eq!(addr, format!("127.0.0.1:{port}"));
    child.kill().unwrap();
    let _ = child.wait();

    let (port2, mut child, addr) = start_on_named_port(|p| {
        (
            vec!["--port".into(), p.into()],
            vec![("MOCK_PORT".into(), "1".into())],
        )
    });
    assert_eq!(
        addr,
        format!("127.0.0.1:{port2}"),
        "--port wins over MOCK_PORT"
    );
    assert!(get(&addr, "GET / HTTP/1.0\r\n\r\n").contains("hello from mock upstream"));
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn a_port_in_use_is_one_plain_line_and_exit_1() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let out = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_mock-upstream")))
        .args(["--listen", &addr])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("mock-upstream: cannot listen on {addr}"))
            && err.contains("another process listens there")
            && !err.contains("Error:"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn every_server_thread_answers_on_the_one_port() {
    let (mut child, addr) = start(&["--listen", "127.0.0.1:0", "--threads", "3"], &[]);
    // Many fresh connections: the kernel spreads them over the threads'
    // SO_REUSEPORT listeners; every one is answered.
    for _ in 0..30 {
        let resp = get(&addr, "GET /t HTTP/1.0\r\n\r\n");
        assert!(
            resp.starts_with("HTTP/1.0 200 OK") || resp.starts_with("HTTP/1.1 200 OK"),
            "{resp}"
        );
    }
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn echo_query_body_shows_what_the_seeds_server_hides() {
    let request =
        "POST /p?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    let body_of = |resp: &str| resp.split_once("\r\n\r\n").unwrap().1.to_string();
    // Default: the seed's JSON, no extra keys.
    let (mut child, addr) = start(&["--listen", "127.0.0.1:0"], &[]);
    let plain: serde_json::Value = serde_json::from_str(&body_of(&get(&addr, request))).unwrap();
    child.kill().unwrap();
    let _ = child.wait();
    assert!(
        plain.get("query").is_none() && plain.get("body").is_none(),
        "{plain}"
    );
    let (mut child, addr) = start(&["--listen", "127.0.0.1:0", "--echo", "query,body"], &[]);
    let v: serde_json::Value = serde_json::from_str(&body_of(&get(&addr, request))).unwrap();
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(
        (v["query"].as_str(), v["body"].as_str()),
        (Some("a=1"), Some("hello")),
        "{v}"
    );
    let out = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_mock-upstream")))
        .args(["--echo", "cookies"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The status codes of the responses in `raw`, in order.
fn statuses(raw: &str) -> Vec<&str> {
    raw.match_indices("HTTP/1.1 ")
        .map(|(i, _)| &raw[i + 9..i + 12])
        .collect()
}

#[test]
fn echo_body_holds_at_most_1_mib_and_answers_413_beyond() {
    const MIB: usize = 1024 * 1024;
    let (mut child, addr) = start(&["--listen", "127.0.0.1:0", "--echo", "body"], &[]);
    // One byte over, then a small body on the same connection: the large
    // one is read to its end (so the next request is found) but not held.
    let over = "x".repeat(MIB + 1);
    let resp = get(
        &addr,
        &format!(
            "POST /big HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\n{over}\
             POST /small HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            over.len()
        ),
    );
    assert_eq!(
        statuses(&resp),
        ["413", "200"],
        "{}",
        &resp[..resp.len().min(400)]
    );
    assert!(resp.contains("request body over 1 MiB"), "{resp}");
    assert!(resp.contains("\"body\":\"hello\""), "{resp}");
    // Chunked, 2 MiB in 64 KiB chunks.
    let chunk = format!("10000\r\n{}\r\n", "y".repeat(0x10000));
    let resp = get(
        &addr,
        &format!(
            "POST /chunked HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n\r\n{}0\r\n\r\n",
            chunk.repeat(32)
        ),
    );
    assert_eq!(statuses(&resp), ["413"], "{}", &resp[..resp.len().min(400)]);
    // Exactly 1 MiB is echoed.
    let resp = get(
        &addr,
        &format!(
            "POST /max HTTP/1.1\r\nHost: h\r\nContent-Length: {MIB}\r\nConnection: close\r\n\r\n{}",
            "z".repeat(MIB)
        ),
    );
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(statuses(&resp), ["200"]);
    assert!(resp.contains(&format!("\"body\":\"{}\"", "z".repeat(MIB))));
}

#[test]
fn out_of_descriptors_it_pauses_accepting_instead_of_spinning() {
    // mock-upstream with 24 descriptors, 40 connections waiting: accept
    // fails with EMFILE while they stay queued. Before, the accept loop
    // retried at once, forever: a core spun and every failure was logged
    // (tens of thousands of lines a second); and the thread's own
    // connections were starved, so none could close to free a descriptor.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mock.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mock-upstream"));
    common::dies_with_test(&mut cmd);
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 24,
                rlim_max: 24,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .args(["--listen", "127.0.0.1:0", "--threads", "1"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().rsplit(' ').next().unwrap().to_string();
    let held: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    // Let it fail for a while (the count is what is checked, not a time).
    let failures = || {
        std::fs::read_to_string(&log)
            .unwrap()
            .matches("accept failed")
            .count()
    };
    for _ in 0..100 {
        if failures() > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let seen = failures();
    // Still serving: a connection it holds answers; once the others close,
    // new ones are accepted again.
    let mut answered = false;
    // The first connections were accepted before the limit bit.
    for mut s in held.into_iter().take(3) {
        if !answered
            && s.write_all(b"GET /held HTTP/1.1\r\nConnection: close\r\n\r\n")
                .is_ok()
        {
            s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let mut out = String::new();
            answered = s.read_to_string(&mut out).is_ok() && out.starts_with("HTTP/1.1 200");
        }
    }
    let after = get(&addr, "GET /after HTTP/1.0\r\n\r\n");
    child.kill().unwrap();
    let _ = child.wait();
    assert!(seen > 0, "accept never failed: the limit did not bite");
    // At 10 ms a pause, a few dozen at most in ~0.3 s; spinning made
    // thousands even on a loaded machine.
    assert!(seen < 500, "{seen} accept failures logged");
    assert!(answered, "no held connection was answered");
    assert!(after.starts_with("HTTP/1.0 200"), "{after}");
}
