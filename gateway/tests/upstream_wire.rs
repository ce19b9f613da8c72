//! What an upstream receives, byte for byte, compared with what Tyk sends
//! (issue 14, the proxy's part): header names in Go's canonical case,
//! Tyk's default `User-Agent`, one folded `X-Forwarded-For`, `TE: trailers`
//! kept, the target's query before the request's, and Tyk's path joining.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

use common::*;
use serde_json::Value;

/// An upstream that records each request head exactly as it arrived.
fn raw_recorder() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let h = heads.clone();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let h = h.clone();
            std::thread::spawn(move || loop {
                let mut buf = Vec::new();
                let mut b = [0u8; 1];
                while !buf.ends_with(b"\r\n\r\n") {
                    if s.read(&mut b).map_or(true, |n| n == 0) {
                        return;
                    }
                    buf.push(b[0]);
                }
                h.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buf).into_owned());
                if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .is_err()
                {
                    return;
                }
            });
        }
    });
    (addr, heads)
}

fn last(heads: &Arc<Mutex<Vec<String>>>) -> String {
    heads.lock().unwrap().last().cloned().expect("no request")
}

#[test]
fn headers_reach_the_upstream_as_tyk_sends_them() {
    let (up, heads) = raw_recorder();
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "p",
        &api_json("p", "/p/", &format!("http://{up}"), true, Value::Null),
    );
    let gw = start_gateway(dir.path());
    let got = raw(
        gw.addr,
        "GET /p/x HTTP/1.1\r\nhost: gw\r\nx-certificateouid: 1\r\nx-forwarded-for: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2, 10.0.0.3\r\nte: trailers\r\nconnection: close\r\n\r\n",
    );
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    let head = last(&heads);
    for line in [
        "GET /x HTTP/1.1\r\n",
        "\r\nX-Certificateouid: 1\r\n",
        "\r\nX-Forwarded-For: 10.0.0.1, 10.0.0.2, 10.0.0.3, 127.0.0.1\r\n",
        "\r\nTe: trailers\r\n",
        &format!("\r\nUser-Agent: {}\r\n", gateway::upstream::TYK_USER_AGENT),
        &format!("\r\nHost: {up}\r\n"),
    ] {
        assert!(head.contains(line), "{line:?} not in {head:?}");
    }
    assert_eq!(head.matches("X-Forwarded-For").count(), 1, "{head}");
    assert!(!head.to_ascii_lowercase().contains("connection: close"));

    // A client's own User-Agent is kept; other TE values are hop-by-hop.
    raw(
        gw.addr,
        "GET /p/ HTTP/1.1\r\nHost: gw\r\nUser-Agent: curl/8\r\nTE: gzip\r\nConnection: close\r\n\r\n",
    );
    let head = last(&heads);
    assert!(head.contains("\r\nUser-Agent: curl/8\r\n"), "{head}");
    assert!(!head.contains("Te:"), "{head}");
    gw.stop();
}

#[test]
fn target_paths_and_queries_join_as_tyks_director() {
    let (up, heads) = raw_recorder();
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "base",
        &api_json(
            "base",
            "/b/",
            &format!("http://{up}/base"),
            true,
            Value::Null,
        ),
    );
    write_api(
        dir.path(),
        "query",
        &api_json(
            "query",
            "/q/",
            &format!("http://{up}/api?key=k&v=2"),
            true,
            Value::Null,
        ),
    );
    let gw = start_gateway(dir.path());
    for (request, upstream) in [
        ("/b/", "/base"),
        ("/b/x/", "/base/x/"),
        ("/q/", "/api?key=k&v=2"),
        ("/q/items?page=3", "/api/items?key=k&v=2&page=3"),
        ("/q/items?", "/api/items?key=k&v=2"),
    ] {
        assert_eq!(get(gw.addr, request).status, 200, "{request}");
        let head = last(&heads);
        let line = head.lines().next().unwrap();
        assert_eq!(line, format!("GET {upstream} HTTP/1.1"), "{request}");
    }
    gw.stop();
}
