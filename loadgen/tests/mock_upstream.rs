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
