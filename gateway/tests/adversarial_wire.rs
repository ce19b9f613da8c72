//! More attacks on the network side (issue 11's remainder): request heads
//! framed two ways, the keep-alive idle wait told apart from the head wait,
//! and a loop through two gateways.
//!
//! Real sockets on loopback, raw `TcpStream`s where a client library would
//! refuse to misbehave. No test asserts a timing: a bound is only how long a
//! test waits before calling the behaviour missing.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::raw::*;
use common::*;
use gateway::server::GatewayConfig;
use serde_json::Value;

// ---------------------------------------------------------------- framing

/// `CONNECT` is a tunnel, which the gateway does not proxy: 405, the
/// upstream never sees it. Proxied, an upstream's 200 made hyper take the
/// connection for a tunnel and the client got no answer at all.
#[test]
fn connect_gets_405_and_never_reaches_the_upstream() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(config(dir.path()));
    for target in ["/plain/hello/", "upstream.example:443", "/nowhere/"] {
        let resp = raw(
            gw.addr,
            &format!("CONNECT {target} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(status_of(&resp), 405, "{target}: {resp}");
        assert!(resp.contains("Method Not Allowed"), "{target}: {resp}");
    }
    assert_eq!(rec.count(), 0, "a CONNECT reached the upstream");
    // Other methods still go through.
    assert_eq!(get(gw.addr, "/plain/hello/").status, 200);
    assert_eq!(rec.count(), 1);
    gw.stop();
}

#[test]
fn heads_framed_two_ways_get_400_and_never_reach_the_upstream() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(config(dir.path()));
    for (what, request) in [
        (
            "Content-Length then Transfer-Encoding",
            "POST /plain/ HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ),
        (
            "Transfer-Encoding then Content-Length",
            "POST /plain/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        ),
        (
            "two equal Content-Lengths",
            "POST /plain/ HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nab",
        ),
        (
            "two Transfer-Encodings",
            "POST /plain/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ),
    ] {
        // `raw` reads to the end: the connection must close after the 400.
        let resp = raw(gw.addr, request);
        assert_eq!(status_of(&resp), 400, "{what}: {resp}");
        assert!(resp.contains("\"error\""), "{what}: not Tyk's error body: {resp}");
    }
    assert_eq!(rec.count(), 0, "a refused request reached the upstream");
    gw.stop();
}

#[test]
fn framing_is_followed_across_bodies_on_one_keep_alive_connection() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(config(dir.path()));
    let mut s = TcpStream::connect(gw.addr).unwrap();
    // Bodies that look like heads framed two ways: only a reader that
    // follows the framing knows they are bodies.
    let looks_bad = "Content-Length: 1\r\nContent-Length: 1\r\n\r\n";
    let sized = format!(
        "POST /plain/a HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n{looks_bad}",
        looks_bad.len()
    );
    let chunked = format!(
        "POST /plain/b HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n{:x};ext=1\r\n{looks_bad}\r\n0\r\nX-Trailer: t\r\n\r\n",
        looks_bad.len()
    );
    // All written at once (pipelined), then a head with two lengths.
    let smuggler =
        "POST /plain/c HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n";
    let after = "GET /plain/d HTTP/1.1\r\nHost: a\r\n\r\n";
    s.write_all(format!("{sized}{chunked}{smuggler}{after}").as_bytes())
        .unwrap();
    assert_eq!(read_response(&mut s).0, 200, "the sized body's request");
    assert_eq!(read_response(&mut s).0, 200, "the chunked body's request");
    let (status, body) = read_response(&mut s);
    assert_eq!(status, 400, "{body}");
    assert!(
        closed_by_peer(&mut s, Duration::from_secs(10)),
        "the connection stayed open after a refused head"
    );
    let uris: Vec<String> = rec.requests().into_iter().map(|r| r.uri).collect();
    assert_eq!(uris, ["/a", "/b"], "what reached the upstream");
    assert_eq!(rec.requests()[0].body, looks_bad.as_bytes());

    // A head that arrives a few bytes at a time is checked all the same.
    let mut s = TcpStream::connect(gw.addr).unwrap();
    for piece in smuggler.as_bytes().chunks(7) {
        s.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(read_response(&mut s).0, 400);
    assert_eq!(rec.count(), 2);
    gw.stop();
}

/// Requests that arrive in pieces and responses that arrive in pieces, on
/// one kept-alive client connection and one pooled upstream connection.
/// Every read of ours that comes up short tells tokio the socket is drained
/// (`wire::read_drained`), so the next read waits for the kernel's next
/// event: a read that forgot bytes still queued, or an event that came
/// between, would leave a request unanswered here. Every tenth response is
/// 300 KB written at once, more than a read's room, so reads that fill
/// their room are followed by more.
#[test]
fn heads_and_bodies_in_pieces_on_kept_alive_connections_all_arrive() {
    const BIG: usize = 300 * 1024;
    fn body_for(i: usize) -> Vec<u8> {
        let len = if i % 10 == 9 { BIG } else { 64 + i };
        (0..len).map(|k| b'a' + ((k + i) % 26) as u8).collect()
    }
    let (up, stats) = raw_upstream(|mut s| {
        while let Some(head) = read_request(&mut s) {
            let path = head.split(' ').nth(1).unwrap_or("/").to_string();
            let i: usize = path.trim_start_matches('/').parse().unwrap_or(0);
            let body = body_for(i);
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            if s.write_all(head.as_bytes()).is_err() {
                return;
            }
            if body.len() == BIG {
                if s.write_all(&body).is_err() {
                    return;
                }
                continue;
            }
            // The body in four pieces, a pause before each.
            for piece in body.chunks(body.len().div_ceil(4)) {
                std::thread::sleep(Duration::from_millis(2));
                if s.write_all(piece).is_err() {
                    return;
                }
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(config(dir.path()));
    let mut s = TcpStream::connect(gw.addr).unwrap();
    s.set_nodelay(true).unwrap();
    for i in 0..40 {
        let request = format!(
            "GET /plain/{i} HTTP/1.1\r\nHost: a\r\nX-Pad: {}\r\n\r\n",
            "p".repeat(i)
        );
        // The head in three pieces, a pause after each.
        for piece in request.as_bytes().chunks(request.len().div_ceil(3)) {
            s.write_all(piece).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        let (status, body) = read_response(&mut s);
        assert_eq!(status, 200, "request {i}: {body:.200}");
        assert!(
            body.as_bytes() == body_for(i),
            "request {i}: a body of {} bytes, not the upstream's {}",
            body.len(),
            body_for(i).len()
        );
    }
    // Every response ended cleanly, so one pooled connection carried all.
    assert_eq!(stats.accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    gw.stop();
}

// ---------------------------------------------------------------- timeouts

#[test]
fn an_idle_keep_alive_connection_closes_after_the_idle_timeout() {
    let (up, _rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    // A long head timeout: only the idle timeout can close this connection
    // within the test's bound.
    let gw = start_gateway_with(GatewayConfig {
        client_header_timeout: Duration::from_secs(60),
        client_keepalive_timeout: Duration::from_millis(300),
        ..config(dir.path())
    });
    let mut s = TcpStream::connect(gw.addr).unwrap();
    for _ in 0..3 {
        s.write_all(b"GET /plain/ HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut s).0, 200);
    }
    assert!(
        closed_by_peer(&mut s, Duration::from_secs(10)),
        "the idle keep-alive connection was not closed by the idle timeout"
    );
    gw.stop();
}

/// A connection's idle deadline moves with each request (one timer per
/// connection, set later each time it waits): used more often than the
/// idle timeout, for longer than it in all, it stays open; then left idle,
/// it closes.
#[test]
fn a_keep_alive_connection_used_within_the_idle_timeout_stays_open() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(GatewayConfig {
        client_header_timeout: Duration::from_secs(60),
        client_keepalive_timeout: Duration::from_millis(1000),
        ..config(dir.path())
    });
    let mut s = TcpStream::connect(gw.addr).unwrap();
    // Ten requests 250 ms apart: 2.5 s in all, each wait a quarter of the
    // idle timeout.
    for i in 0..10 {
        s.write_all(b"GET /plain/ HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut s).0, 200, "request {i}");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(rec.count(), 10);
    assert!(
        closed_by_peer(&mut s, Duration::from_secs(10)),
        "the idle keep-alive connection was not closed by the idle timeout"
    );
    gw.stop();
}

#[test]
fn the_idle_wait_is_not_the_head_wait_and_a_slow_head_is_still_cut() {
    let (up, _rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(GatewayConfig {
        client_header_timeout: Duration::from_millis(300),
        client_keepalive_timeout: Duration::from_secs(60),
        ..config(dir.path())
    });
    let mut s = TcpStream::connect(gw.addr).unwrap();
    s.write_all(b"GET /plain/ HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s).0, 200);
    // Idle for longer than the head timeout: still open, and serving.
    std::thread::sleep(Duration::from_millis(1200));
    s.write_all(b"GET /plain/ HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s).0, 200, "closed while idle");
    // Now a head that trickles in: cut by the head timeout.
    s.write_all(b"GET /plain/ HTTP/1.1\r\n").unwrap();
    let mut cut = false;
    for _ in 0..100 {
        if s.write_all(b"X-Slow: 1\r\n").is_err() {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        cut || closed_by_peer(&mut s, Duration::from_secs(1)),
        "a slow head on a keep-alive connection was not cut by the head timeout"
    );
    // A connection that never sends a byte: the head timeout from accept.
    let mut silent = TcpStream::connect(gw.addr).unwrap();
    assert!(closed_by_peer(&mut silent, Duration::from_secs(10)));
    gw.stop();
}

#[test]
fn a_request_in_flight_longer_than_the_idle_timeout_is_answered() {
    let (up, _rec) = recorder_with_delay(Duration::from_millis(1500));
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(GatewayConfig {
        client_keepalive_timeout: Duration::from_millis(200),
        client_header_timeout: Duration::from_millis(200),
        ..config(dir.path())
    });
    let mut s = TcpStream::connect(gw.addr).unwrap();
    for _ in 0..2 {
        s.write_all(b"GET /plain/ HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut s).0, 200);
    }
    // And once answered, the idle timeout applies again.
    assert!(closed_by_peer(&mut s, Duration::from_secs(10)));
    gw.stop();
}

// ---------------------------------------------------------------- loops

#[test]
fn a_loop_through_two_gateways_gets_508() {
    let (l1, l2) = (hold_port(1), hold_port(1));
    let (p1, p2) = (l1.local_addr().port(), l2.local_addr().port());
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (up, rec) = recorder();
    // gateway 1: /loop/ -> gateway 2, /chain/ -> gateway 2.
    // gateway 2: /loop/ -> gateway 1, /chain/ -> the upstream.
    for (dir, loop_to, chain_to) in [
        (&d1, format!("127.0.0.1:{p2}"), format!("127.0.0.1:{p2}")),
        (&d2, format!("127.0.0.1:{p1}"), up.to_string()),
    ] {
        for (name, to) in [("loop", &loop_to), ("chain", &chain_to)] {
            let api = api_json(
                name,
                &format!("/{name}/"),
                &format!("http://{to}"),
                false,
                Value::Null,
            );
            write_api(dir.path(), name, &api);
        }
    }
    // A bounded wait upstream: without loop detection the first request
    // would end in a 504 (the hops wait on each other), not a 508.
    let quick = |dir: &tempfile::TempDir| GatewayConfig {
        upstream_timeout: Duration::from_secs(5),
        ..config(dir.path())
    };
    let g1 = start_gateway_held(l1, quick(&d1));
    let g2 = start_gateway_held(l2, quick(&d2));
    for _ in 0..3 {
        let got = get(g1.addr, "/loop/x");
        assert_eq!(got.status, 508, "{}", got.text());
        assert_eq!(got.json()["error"], "Loop Detected");
    }
    // Two gateways in a row without a loop: proxied, each named in Via.
    let got = send(
        g1.addr,
        "GET",
        "/chain/y",
        &[("via", "1.0 client-proxy")],
        b"",
    );
    assert_eq!(got.status, 200, "{}", got.text());
    let via = rec.last().headers["via"].to_str().unwrap().to_string();
    let hops: Vec<&str> = via.split(", ").collect();
    assert_eq!(hops.len(), 3, "{via}");
    assert_eq!(hops[0], "1.0 client-proxy");
    assert!(
        hops[1].starts_with("1.1 gw-") && hops[2].starts_with("1.1 gw-"),
        "{via}"
    );
    assert_ne!(hops[1], hops[2], "two gateways with one name: {via}");
    assert_eq!(rec.count(), 1);
    g1.stop();
    g2.stop();
}
