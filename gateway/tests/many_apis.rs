//! The `gateway` binary over a couple of thousand APIs: every request
//! reaches the API whose listen path is the longest raw prefix of its
//! path, with the router that replaced the longest-first scan.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

/// 2,007 listen paths that nest, share long prefixes and are prefixes of
/// one another without a slash (`/api1` of `/api13/`), and a `/` catch-all.
fn listen_paths() -> Vec<String> {
    let mut paths: Vec<String> = (0..2000)
        .map(|i| match i % 4 {
            0 => format!("/api{i}/"),
            1 => format!("/api{i}"),
            2 => format!("/team{}/svc{i}/", i % 7),
            // Under the `/api{i-3}/` of three before.
            _ => format!("/api{}/v{}/", i - 3, i % 3),
        })
        .collect();
    paths.extend((0..7).map(|k| format!("/team{k}/")));
    paths.push("/".to_string());
    paths
}

/// The reference: the API whose listen path is the longest prefix.
fn expected(paths: &[String], path: &str) -> usize {
    (0..paths.len())
        .filter(|&i| path.starts_with(&paths[i]))
        .max_by_key(|&i| paths[i].len())
        .expect("`/` is a prefix of every request path")
}

#[test]
fn two_thousand_apis_each_answer_their_own_paths() {
    let up = mock();
    let dir = tempfile::tempdir().unwrap();
    let paths = listen_paths();
    for (i, lp) in paths.iter().enumerate() {
        // Each API proxies under a base path of its own, so the path the
        // mock echoes names the API that routed the request.
        let target = format!("http://{up}/own{i}");
        let api = api_json(&format!("api{i}"), lp, &target, true, Value::Null);
        write_api(dir.path(), &format!("{i:05}"), &api);
    }
    let (mut child, addr) = spawn_listening(
        dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
            .args(["--apis", dir.path().to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", "--threads", "1"])
            .stdin(Stdio::null())
            .stderr(Stdio::null()),
    );

    // Each listen path with more after it, and cut one byte short (which
    // belongs to a shorter listen path, at worst the catch-all).
    let mut requests: Vec<String> = Vec::new();
    for lp in &paths {
        requests.push(format!("{lp}hello/"));
        if lp.len() > 1 {
            requests.push(lp[..lp.len() - 1].to_string());
        }
    }
    requests.extend(["/elsewhere".to_string(), "/api".to_string()]);

    // One kept-alive connection; every read is bounded (20 s).
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_nodelay(true).unwrap();
    let mut wrong = Vec::new();
    for path in &requests {
        // One write: a request in pieces waits on Nagle and delayed ACKs.
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        conn.write_all(req.as_bytes()).unwrap();
        let (head, body) = raw::read_framed_response(&mut conn).expect("an answer");
        assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
        let got: Value = serde_json::from_slice(&body).unwrap();
        let e = expected(&paths, path);
        let rest = path[paths[e].len()..].trim_start_matches('/');
        let want = match rest {
            "" => format!("/own{e}"),
            _ => format!("/own{e}/{rest}"),
        };
        if got["path"] != want.as_str() {
            wrong.push(format!("{path} reached {} (want {want})", got["path"]));
        }
    }
    drop(conn);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        wrong.is_empty(),
        "{} of {} requests reached the wrong API, e.g. {:?}",
        wrong.len(),
        requests.len(),
        &wrong[..wrong.len().min(5)]
    );
}
