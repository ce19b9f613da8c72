//! The gateway's own HTTP/1 server side (`h1down`) against hyper's: the
//! same raw requests sent to a gateway of each kind answer with the same
//! bytes (but for `date` and the gateway's name in `Via`), including the
//! requests the own code hands to hyper mid-connection; and hostile
//! clients (garbage heads, pipelined bursts, a client gone mid-body) leave
//! the own path serving.
//!
//! Real sockets on loopback; every wait is bounded, no timing asserted.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::raw::*;
use common::*;
use gateway::server::{ClientHttp1, GatewayConfig};

/// An upstream whose answer depends on the path: the framings a proxied
/// response can have.
fn framings_upstream() -> SocketAddr {
    let (addr, _stats) = raw_upstream(|mut s| {
        while let Some(head) = read_request(&mut s) {
            let path = head.split(' ').nth(1).unwrap_or("/").to_string();
            let head_req = head.starts_with("HEAD ");
            let reply: Vec<u8> = match path.as_str() {
                "/204" => b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n".to_vec(),
                "/304" => b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n".to_vec(),
                "/chunked" => {
                    let mut r =
                        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-B: 2\r\n\r\n".to_vec();
                    if !head_req {
                        for i in 0..5 {
                            let c = format!("part {i};");
                            r.extend(format!("{:x}\r\n{c}\r\n", c.len()).bytes());
                        }
                        r.extend(b"0\r\nX-Trailer: t\r\n\r\n");
                    }
                    r
                }
                "/600" => b"HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\nok".to_vec(),
                "/phrase" => b"HTTP/1.1 200 Fine Indeed\r\nContent-Length: 2\r\n\r\nok".to_vec(),
                "/close" => {
                    let _ = s.write_all(b"HTTP/1.0 200 OK\r\nX-C: 3\r\n\r\nuntil the end");
                    return;
                }
                "/large" => {
                    let body = "x".repeat(100_000);
                    let mut r =
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len())
                            .into_bytes();
                    if !head_req {
                        r.extend(body.bytes());
                    }
                    r
                }
                _ => {
                    let body = format!("seen {path}");
                    let mut r = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: keep-alive\r\nX-Multi: a\r\nX-Multi: b\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    if !head_req {
                        r.extend(body.bytes());
                    }
                    r
                }
            };
            if s.write_all(&reply).is_err() {
                return;
            }
        }
    });
    addr
}

/// Sends `request` on a new connection and reads until the gateway closes
/// it (or 5 s pass): what the client saw, `date` and `Via` names blanked.
fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&got);
    let date = regex::Regex::new(r"(?im)^date: [^\r]*").unwrap();
    let via = regex::Regex::new(r"gw-[0-9a-f]+").unwrap();
    via.replace_all(&date.replace_all(&text, "date: X"), "gw-X")
        .into_owned()
}

fn gateway(kind: ClientHttp1, dir: &std::path::Path) -> TestGateway {
    start_gateway_with(GatewayConfig {
        client_http1: kind,
        ..config(dir)
    })
}

#[test]
fn own_and_hyper_answer_every_request_with_the_same_bytes() {
    let echo = mock();
    let framings = framings_upstream();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", echo);
    write_api(
        dir.path(),
        "framings",
        &api_json(
            "framings",
            "/f/",
            &format!("http://{framings}"),
            true,
            serde_json::Value::Null,
        ),
    );
    let own = gateway(ClientHttp1::Own, dir.path());
    let hyper = gateway(ClientHttp1::Hyper, dir.path());
    let long_header = format!(
        "GET /plain/g HTTP/1.1\r\nHost: a\r\nX-Long: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(20_000)
    );
    let pipelined: String = (0..20)
        .map(|i| format!("GET /plain/p{i} HTTP/1.1\r\nHost: a\r\n\r\n"))
        .chain(["GET /plain/last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".into()])
        .collect();
    // Reason phrases: Go's for a code without one (hyper wrote `<none>`),
    // never the upstream's own (through both upstream clients: a chunked
    // body goes through hyper's, which keeps the phrase it read).
    let reasons: [(&[u8], [&str; 2]); 2] = [
        (
            b"GET /f/600 HTTP/1.1\r\nHost: a\r\n\r\nGET /f/phrase HTTP/1.0\r\n\r\n",
            ["HTTP/1.1 600 status code 600", "HTTP/1.0 200 OK"],
        ),
        (
            b"POST /f/phrase HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\nPOST /f/600 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
            ["HTTP/1.1 200 OK", "HTTP/1.1 600 status code 600"],
        ),
    ];
    for (case, want) in reasons {
        for gw in [&own, &hyper] {
            let got = exchange(gw.addr, case);
            assert_eq!(statuses(&got), want, "{got}");
        }
    }
    let cases: Vec<&[u8]> = vec![
        // HTTP/1.0 as ab sends it, and with keep-alive.
        b"GET /plain/hello/ HTTP/1.0\r\n\r\n",
        b"GET /plain/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /plain/b HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET /plain/c HTTP/1.0\r\n\r\n",
        // A `close` wins over a `keep-alive` beside or after it (the own
        // reader kept these alive; hyper and Go close).
        b"GET /plain/a HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\nGET /plain/b HTTP/1.0\r\n\r\n",
        b"GET /plain/a HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\n\r\nGET /plain/b HTTP/1.0\r\n\r\n",
        b"GET /f/x HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /f/chunked HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        // HTTP/1.1 keep-alive, HEAD, a 404, the close on request.
        b"GET /plain/a HTTP/1.1\r\nHost: a\r\n\r\nHEAD /plain/b HTTP/1.1\r\nHost: a\r\n\r\nGET /nope HTTP/1.1\r\nHost: a\r\nconnection: Close\r\n\r\n",
        b"GET /f/x HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n",
        // Response framings: 204, 304, chunked (trailers dropped), close-delimited, large.
        b"GET /f/204 HTTP/1.1\r\nHost: a\r\n\r\nGET /f/304 HTTP/1.1\r\nHost: a\r\n\r\nHEAD /f/chunked HTTP/1.1\r\nHost: a\r\n\r\nGET /f/chunked HTTP/1.1\r\nHost: a\r\nTE: trailers\r\n\r\nHEAD /f/large HTTP/1.1\r\nHost: a\r\n\r\nGET /f/large HTTP/1.1\r\nHost: a\r\n\r\nGET /f/close HTTP/1.1\r\nHost: a\r\n\r\n",
        reasons[0].0,
        reasons[1].0,
        // Request bodies: with the head, chunked (hyper's from there on), larger than one read.
        b"POST /plain/c HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        b"GET /plain/0 HTTP/1.1\r\nHost: a\r\n\r\nPOST /plain/c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /plain/d HTTP/1.1\r\nHost: a\r\n\r\nGET /plain/e HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        b"POST /plain/c HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
        b"POST /plain/c HTTP/1.1\r\nHost: a\r\nContent-Length: +2\r\nConnection: close\r\n\r\nhi",
        b"POST /plain/c HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 2\r\nConnection: close\r\n\r\nhi",
        // Refusals: the front door's and hyper's own.
        b"GET /plain/../x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        b"GET /plain/e HTTP/1.1\r\nConnection: close\r\n\r\n",
        b"GET /plain/e HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
        b"GET /plain/0 HTTP/1.1\r\nHost: a\r\n\r\nGET /plain/e HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
        b"GET /plain/e HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"garbage\r\n\r\n",
        b"GET /plain/0 HTTP/1.1\r\nHost: a\r\n\r\n\x01\x02 nonsense\r\n\r\n",
        b"GET /plain/\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /tyk/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        b"GET http://a/plain/abs HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        b"OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        b"GET /plain/u HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: close\r\n\r\n",
        // Versions as Go's server reads them: 1.x served as 1.1, other
        // majors 505, malformed ones 400.
        b"GET /plain/v HTTP/2.0\r\nHost: a\r\n\r\n",
        b"GET /plain/v HTTP/1.2\r\nHost: a\r\n\r\nGET /plain/w HTTP/1.9\r\nHost: a\r\n\r\nGET /plain/x HTTP/1.0\r\n\r\n",
        b"GET /plain/0 HTTP/1.1\r\nHost: a\r\n\r\nGET /plain/v HTTP/0.9\r\nHost: a\r\n\r\n",
        b"GET /plain/v HTTP/1.10\r\nHost: a\r\n\r\n",
        b"GET /plain/v http/1.1\r\nHost: a\r\n\r\n",
        long_header.as_bytes(),
        pipelined.as_bytes(),
    ];
    for case in cases {
        let (a, b) = (exchange(own.addr, case), exchange(hyper.addr, case));
        assert_eq!(
            a,
            b,
            "own vs hyper for {:?}",
            String::from_utf8_lossy(&case[..case.len().min(200)])
        );
        assert!(!a.is_empty(), "no answer to {case:?}");
    }
    own.stop();
    hyper.stop();
}

/// The status line of each answer in `text`, in order.
fn statuses(text: &str) -> Vec<&str> {
    text.match_indices("HTTP/1.")
        .filter_map(|(i, _)| text[i..].split("\r\n").next())
        .filter(|line| line.len() > 9 && line.as_bytes()[9].is_ascii_digit())
        .collect()
}

/// A request line's version read as Go's server (so Tyk) reads it
/// (`http.ParseHTTPVersion`, `http1ServerSupportsRequest`): any
/// `HTTP/1.x` is served as HTTP/1.1 (httparse, and so hyper, took only 1.0
/// and 1.1: 400), `HTTP/2.0` spelled as text and other majors get Go's
/// 505 and a close, and what is not `HTTP/digit.digit` stays 400. The
/// same on both servers, and on the own one also when the version comes
/// in pieces.
#[test]
fn request_line_versions_are_read_as_gos_server_reads_them() {
    let echo = mock();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", echo);
    let own = gateway(ClientHttp1::Own, dir.path());
    let hyper = gateway(ClientHttp1::Hyper, dir.path());
    let served = "HTTP/1.1 200 OK";
    let refused = "HTTP/1.1 505 HTTP Version Not Supported";
    let bad = "HTTP/1.1 400 Bad Request";
    let cases: Vec<(&[u8], Vec<&str>)> = vec![
        // Kept alive as 1.1 is, each answer the upstream's.
        (
            b"GET /plain/a HTTP/1.2\r\nHost: a\r\n\r\nGET /plain/b HTTP/1.9\r\nHost: a\r\nConnection: close\r\n\r\n",
            vec![served, served],
        ),
        // After a request served by the own reader.
        (
            b"GET /plain/a HTTP/1.1\r\nHost: a\r\n\r\nGET /plain/b HTTP/1.5\r\nHost: a\r\nConnection: close\r\n\r\n",
            vec![served, served],
        ),
        (b"GET /plain/a HTTP/2.0\r\nHost: a\r\n\r\n", vec![refused]),
        (b"GET /plain/a HTTP/0.9\r\nHost: a\r\n\r\n", vec![refused]),
        // The HTTP/2 preface (prior knowledge): hyper closed without a word.
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", vec![refused]),
        (b"POST /plain/a HTTP/3.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi", vec![refused]),
        // The 505 ends the connection: nothing after it is answered.
        (
            b"GET /plain/a HTTP/1.1\r\nHost: a\r\n\r\nGET /plain/b HTTP/2.0\r\nHost: a\r\n\r\nGET /plain/c HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![served, refused],
        ),
        (b"GET /plain/a HTTP/1.10\r\nHost: a\r\n\r\n", vec![bad]),
        (b"GET /plain/a HTTP/01.1\r\nHost: a\r\n\r\n", vec![bad]),
        (b"GET /plain/a http/1.1\r\nHost: a\r\n\r\n", vec![bad]),
        (b"GET /plain/a HTTP/1.x\r\nHost: a\r\n\r\n", vec![bad]),
    ];
    for (case, want) in &cases {
        let what = String::from_utf8_lossy(case);
        for gw in [&own, &hyper] {
            let got = exchange(gw.addr, case);
            assert_eq!(statuses(&got), *want, "{what}: {got}");
            if want[0] == served {
                assert!(got.contains("\"path\":\"/a\""), "{what}: {got}");
            }
            if want.contains(&refused) {
                assert!(
                    got.ends_with("505 HTTP Version Not Supported: unsupported protocol version"),
                    "{what}: {got}"
                );
                assert!(got.contains("connection: close\r\n"), "{what}: {got}");
            }
        }
    }
    // The own reader waits for a version that arrives in pieces (hyper
    // has the first piece already: 400 there).
    for (pieces, want) in [
        (
            [
                "GET /plain/a HTTP/1",
                ".2\r\nHost: a\r\nConnection: close\r\n\r\n",
            ],
            200,
        ),
        (
            [
                "GET /plain/a HTTP/1.2",
                "\r\nHost: a\r\nConnection: close\r\n\r\n",
            ],
            200,
        ),
        (["GET /plain/a HTTP/2", ".0\r\nHost: a\r\n\r\n"], 505),
    ] {
        let mut s = TcpStream::connect(own.addr).unwrap();
        s.set_nodelay(true).unwrap();
        for piece in pieces {
            s.write_all(piece.as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        let (status, _) = read_response(&mut s);
        assert_eq!(status, want, "{pieces:?}");
    }
    own.stop();
    hyper.stop();
}

/// Heads Go's server refuses before Tyk sees them, and nginx too, are
/// refused here, on both servers, and never reach the upstream: a `Host`
/// with a byte no host has (Go's `httpguts.ValidHostHeader`), a `%` that
/// starts no escape in the path (`url.ParseRequestURI`), and a transfer
/// coding besides `chunked` (501: the body would have gone on still in
/// that coding, with nothing to say so). What they allow still passes.
#[test]
fn heads_go_refuses_are_refused_and_never_reach_the_upstream() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let own = gateway(ClientHttp1::Own, dir.path());
    let hyper = gateway(ClientHttp1::Hyper, dir.path());
    let get = |host: &str, path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").into_bytes()
    };
    let refused: Vec<(Vec<u8>, &str)> = vec![
        (get("a b", "/plain/"), "HTTP/1.1 400 Bad Request"),
        (get("user@evil", "/plain/"), "HTTP/1.1 400 Bad Request"),
        (get("a/b", "/plain/"), "HTTP/1.1 400 Bad Request"),
        (get("\u{e9}", "/plain/"), "HTTP/1.1 400 Bad Request"),
        (get("a", "/plain/%zz"), "HTTP/1.1 400 Bad Request"),
        (get("a", "/plain/x%"), "HTTP/1.1 400 Bad Request"),
        (
            b"POST /plain/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n".to_vec(),
            "HTTP/1.1 501 Not Implemented",
        ),
    ];
    for gw in [&own, &hyper] {
        for (case, want) in &refused {
            let got = exchange(gw.addr, case);
            assert_eq!(statuses(&got), [*want], "{got}");
            if want.contains("501") {
                assert!(
                    got.ends_with("\r\n\r\nUnsupported transfer encoding"),
                    "{got}"
                );
                assert!(got.contains("connection: close\r\n"), "{got}");
            }
        }
    }
    assert_eq!(rec.count(), 0, "a refused request reached the upstream");
    let allowed: Vec<Vec<u8>> = vec![
        get("[::1]:8080", "/plain/a"),
        get("a_b~c!$&'()*+,;=%25:1", "/plain/b"),
        get("", "/plain/c"),
        get("a", "/plain/%41%2f"),
        get("a", "/plain/d?q=%zz"),
        b"POST /plain/e HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\nConnection: close\r\n\r\n2\r\nhi\r\n0\r\n\r\n".to_vec(),
    ];
    for gw in [&own, &hyper] {
        for case in &allowed {
            let got = exchange(gw.addr, case);
            assert_eq!(statuses(&got), ["HTTP/1.1 200 OK"], "{got}");
        }
    }
    let uris: Vec<String> = rec.requests().into_iter().map(|r| r.uri).collect();
    assert_eq!(
        uris,
        ["/a", "/b", "/c", "/A%2f", "/d?q=%zz", "/e"].repeat(2),
        "unreserved escapes decoded, others kept"
    );
    own.stop();
    hyper.stop();
}

#[test]
fn hostile_clients_leave_the_own_path_serving() {
    let echo = mock();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", echo);
    let gw = gateway(ClientHttp1::Own, dir.path());
    // Garbage heads: a bounded set of byte patterns, each on its own
    // connection; each gets an answer or a close, never a hang.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..40 {
        let len = 1 + i * 7;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8
            })
            .chain(*b"\r\n\r\n")
            .collect();
        let mut s = TcpStream::connect(gw.addr).unwrap();
        let _ = s.write_all(&bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        assert!(
            closed_by_peer(&mut s, Duration::from_secs(10)),
            "garbage {i} left open"
        );
    }
    // Clients gone mid-body and mid-head.
    for _ in 0..10 {
        let mut s = TcpStream::connect(gw.addr).unwrap();
        s.write_all(b"POST /plain/x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nonly ten b")
            .unwrap();
        drop(s);
        let mut s = TcpStream::connect(gw.addr).unwrap();
        s.write_all(b"GET /plain/x HTTP/1.1\r\nHo").unwrap();
        drop(s);
    }
    // A slow client: a head in pieces, then a keep-alive request whose
    // head and body come in pieces.
    let mut s = TcpStream::connect(gw.addr).unwrap();
    s.set_nodelay(true).unwrap();
    for piece in ["GET /plain/sl", "ow HTTP/1.1\r", "\nHost: a\r\n", "\r\n"] {
        s.write_all(piece.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, body) = read_response(&mut s);
    assert_eq!(status, 200);
    assert!(body.contains("\"path\":\"/slow\""), "{body}");
    drop(s);
    // A pipelined burst on one connection: every answer, in order.
    let mut s = TcpStream::connect(gw.addr).unwrap();
    let burst: String = (0..100)
        .map(|i| format!("GET /plain/n{i} HTTP/1.1\r\nHost: a\r\n\r\n"))
        .collect();
    s.write_all(burst.as_bytes()).unwrap();
    for i in 0..100 {
        let (status, body) = read_response(&mut s);
        assert_eq!(status, 200);
        assert!(body.contains(&format!("\"path\":\"/n{i}\"")), "{body}");
    }
    // A body sent after the head, slowly: hyper takes it over, and the
    // connection serves on.
    s.write_all(b"POST /plain/late HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nab")
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    s.write_all(b"cdGET /plain/after HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let (status, body) = read_response(&mut s);
    assert_eq!(status, 200);
    assert!(body.contains("\"path\":\"/late\""), "{body}");
    let (status, body) = read_response(&mut s);
    assert_eq!(status, 200);
    assert!(body.contains("\"path\":\"/after\""), "{body}");
    drop(s);
    assert_eq!(get(gw.addr, "/plain/still").status, 200);
    gw.stop();
}

#[test]
fn shutdown_closes_idle_connections_and_answers_the_rest_once() {
    // The same on both sides.
    for kind in [ClientHttp1::Own, ClientHttp1::Hyper] {
        shutdown_with(kind);
    }
}

fn shutdown_with(kind: ClientHttp1) {
    let (up, rec) = recorder_with_delay(Duration::from_millis(500));
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let mut gw = gateway(kind, dir.path());
    // Idle between keep-alive requests.
    let mut idle = TcpStream::connect(gw.addr).unwrap();
    idle.write_all(b"GET /plain/idle HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut idle).0, 200);
    // A request in flight at the upstream.
    let mut busy = TcpStream::connect(gw.addr).unwrap();
    busy.write_all(b"GET /plain/busy HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || rec.count() == 2),
        "the request never reached the upstream"
    );
    // Accepted, its request not sent yet.
    let mut late = TcpStream::connect(gw.addr).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    gw.begin_stop();
    late.write_all(b"GET /plain/late HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert!(
        closed_by_peer(&mut idle, Duration::from_secs(10)),
        "the idle connection stayed open"
    );
    for (s, name) in [(&mut busy, "busy"), (&mut late, "late")] {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut all = String::new();
        let _ = s.read_to_string(&mut all);
        assert_eq!(status_of(&all), 200, "{kind:?} {name}: {all}");
        assert!(all.contains("connection: close\r\n"), "{name}: {all}");
        assert!(all.ends_with("recorded"), "{name}: {all}");
    }
    gw.join();
}

/// The gateway finds where a chunked request body ends exactly where hyper,
/// which reads it, does (CRLF line ends only; a trailer line runs to its
/// CR): it found the end early in `0\r\n\nGARBAGE\r\n\r\n`, read
/// `GARBAGE` as a refused head, and stopped timing the connection while
/// hyper, which had read `\nGARBAGE` as a trailer, waited for the next
/// request: the client's connection was held for as long as it liked.
/// Now each of these ends on its own (answered, then the idle or header
/// timeout or a refusal), on both servers, and a request after a
/// well-formed body with trailers is answered as the next one.
#[test]
fn a_chunked_body_ends_where_hyper_ends_it_and_no_connection_is_held() {
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", mock());
    let short = Duration::from_millis(300);
    let post = "POST /plain/c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    for kind in [ClientHttp1::Own, ClientHttp1::Hyper] {
        let gw = start_gateway_with(GatewayConfig {
            client_http1: kind,
            client_header_timeout: short,
            client_keepalive_timeout: short,
            client_body_timeout: short,
            ..config(dir.path())
        });
        for (body, answers) in [
            // A bare LF where the final CRLF should be starts a trailer line.
            ("3\r\nabc\r\n0\r\n\nGARBAGE\r\n\r\n", 1),
            ("3\r\nabc\r\n0\r\n\n", 0),
            ("0\r\nX: y\nGET /plain/x HTTP/1.1\r\n\r\n", 1),
            // Bare LFs in size lines and after data: refused by hyper.
            ("3\nabc\r\n0\r\n\r\nGARBAGE\r\n\r\n", 1),
            ("3\r\nabc\n0\r\n\r\nGARBAGE\r\n\r\n", 1),
            // Well-formed, with trailers, and a request after it.
            (
                "3;x=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\nGET /plain/next HTTP/1.1\r\nHost: t\r\n\r\n",
                2,
            ),
        ] {
            let mut s = TcpStream::connect(gw.addr).unwrap();
            s.write_all(format!("{post}{body}").as_bytes()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut got = Vec::new();
            let ended = match s.read_to_end(&mut got) {
                Ok(_) => true,
                Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            };
            let got = String::from_utf8_lossy(&got);
            assert!(
                ended,
                "{kind:?}: {body:?}: the connection was held; got {got}"
            );
            let statuses = statuses(&got);
            assert!(statuses.len() >= answers, "{kind:?}: {body:?}: {got}");
            if answers == 2 {
                assert_eq!(statuses[..2], ["HTTP/1.1 200 OK"; 2], "{kind:?}: {got}");
                assert!(got.contains("/next"), "{kind:?}: {got}");
            }
        }
        gw.stop();
    }
}

/// A head that cannot be parsed, sent in pieces and never ended, is still
/// a head being waited for: the header timeout closes it. hyper answers
/// a bad head only once its end has arrived (after a partial read it
/// parses again only at a blank line), and the gateway had stopped timing
/// the head when it saw it was bad: the connection was held for good.
/// Also the same heads, ended: 400 at once.
#[test]
fn a_bad_head_in_pieces_is_still_timed_out() {
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", mock());
    let short = Duration::from_millis(300);
    for kind in [ClientHttp1::Own, ClientHttp1::Hyper] {
        let gw = start_gateway_with(GatewayConfig {
            client_http1: kind,
            client_header_timeout: short,
            ..config(dir.path())
        });
        for head in [
            "POST /a /b\r\n",
            "POST /plain/c HTTP/1.1\r\nHost t\r\n",
            "GET /plain/ HTTP/1.1\r\nHost: t\r\nX: \x01\r\n",
        ] {
            for ended in [false, true] {
                let mut s = TcpStream::connect(gw.addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let (first, rest) = head.split_at(5);
                s.write_all(first.as_bytes()).unwrap();
                std::thread::sleep(Duration::from_millis(20));
                s.write_all(rest.as_bytes()).unwrap();
                if ended {
                    s.write_all(b"\r\n").unwrap();
                }
                let mut got = Vec::new();
                let closed = match s.read_to_end(&mut got) {
                    Ok(_) => true,
                    Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
                };
                let got = String::from_utf8_lossy(&got);
                assert!(
                    closed,
                    "{kind:?}: {head:?} (ended {ended}): held; got {got}"
                );
                if ended {
                    assert!(
                        got.starts_with("HTTP/1.1 400 "),
                        "{kind:?}: {head:?}: {got}"
                    );
                }
            }
        }
        gw.stop();
    }
}

/// A head the own reader hands to hyper half-way (it grew past the own
/// reader's 16 KiB, or a byte in it is one hyper must refuse) keeps the
/// deadline it had: the header timeout counts from its start, not again
/// from the hand-over. hyper's side started its own timer on the bytes it
/// was given, so a slowloris head that crossed over had the header
/// timeout twice. The client here keeps sending after the crossing; it
/// must be cut at the first deadline (checked with half the timeout of
/// slack, where a second timer would give it almost the timeout again).
#[test]
fn a_slow_head_handed_to_hyper_keeps_its_header_deadline() {
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", mock());
    let timeout = Duration::from_secs(3);
    let gw = start_gateway_with(GatewayConfig {
        client_http1: ClientHttp1::Own,
        client_header_timeout: timeout,
        ..config(dir.path())
    });
    let big = "a".repeat(17_000);
    for (what, crossing) in [
        ("past 16 KiB", big.as_str()),
        ("a byte hyper refuses", "\x01"),
    ] {
        let start = std::time::Instant::now();
        let mut s = TcpStream::connect(gw.addr).unwrap();
        s.set_nodelay(true).unwrap();
        s.write_all(b"GET /plain/ HTTP/1.1\r\nHost: a\r\nX-Slow: ")
            .unwrap();
        std::thread::sleep(timeout - Duration::from_millis(200));
        // Written after the own reader's deadline has passed: the
        // connection may be closed already (the write then fails).
        let crossed = s.write_all(crossing.as_bytes()).is_ok();
        // More of the head, a byte at a time, for as long as it is taken.
        let mut cut = !crossed;
        while !cut && start.elapsed() < timeout * 3 {
            std::thread::sleep(Duration::from_millis(50));
            cut = s.write_all(b"b").is_err() || closed_by_peer(&mut s, Duration::from_millis(1));
        }
        let took = start.elapsed();
        assert!(cut, "{what}: the head was never cut");
        assert!(
            took < timeout + Duration::from_millis(1500),
            "{what}: cut after {took:?}, the header timeout ({timeout:?}) given again at the hand-over"
        );
    }
    gw.stop();
}

/// A chunked body on a GET or HEAD reaches the upstream, chunked, on a
/// route whose body streams (no middleware), on both servers, as Go's
/// client (so Tyk) sends it. hyper's client, which sends streamed bodies,
/// sends none at all for a GET or HEAD without a length: the body was
/// read from the client and dropped without a word. One with a length
/// already went.
#[test]
fn a_chunked_body_on_a_get_or_head_reaches_the_upstream() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    for kind in [ClientHttp1::Own, ClientHttp1::Hyper] {
        let gw = gateway(kind, dir.path());
        for method in ["GET", "HEAD", "DELETE"] {
            for (framing, body) in [
                (
                    "Transfer-Encoding: chunked",
                    "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
                ),
                ("Content-Length: 5", "abcde"),
            ] {
                let before = rec.count();
                let request = format!(
                    "{method} /plain/b HTTP/1.1\r\nHost: a\r\n{framing}\r\nConnection: close\r\n\r\n{body}"
                );
                let got = exchange(gw.addr, request.as_bytes());
                assert_eq!(
                    statuses(&got),
                    ["HTTP/1.1 200 OK"],
                    "{kind:?} {method} {framing}: {got}"
                );
                assert_eq!(rec.count(), before + 1);
                let seen = rec.last();
                assert_eq!(seen.method.as_str(), method);
                assert_eq!(
                    &seen.body[..],
                    b"abcde",
                    "{kind:?} {method} {framing}: the body"
                );
            }
        }
        gw.stop();
    }
}

/// `OPTIONS *` (a question about the server, not a resource) is answered
/// as Go's server, so Tyk, answers it: 200 with an empty body, on both
/// servers, and not proxied (it was the router's 404, even with a
/// catch-all API). Another method on `*` is not this question.
#[test]
fn options_star_is_answered_as_gos_server_answers_it() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/", up);
    for kind in [ClientHttp1::Own, ClientHttp1::Hyper] {
        let gw = gateway(kind, dir.path());
        let got = exchange(
            gw.addr,
            b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\nGET /after HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(statuses(&got), ["HTTP/1.1 200 OK"; 2], "{kind:?}: {got}");
        assert!(
            got.starts_with(
                "HTTP/1.1 200 OK\r\ncontent-length: 0\r\ndate: X\r\n\r\nHTTP/1.1 200 OK"
            ),
            "{kind:?}: {got}"
        );
        let got = exchange(
            gw.addr,
            b"GET * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        );
        assert_ne!(statuses(&got), ["HTTP/1.1 200 OK"], "{kind:?}: {got}");
        gw.stop();
    }
    let uris: Vec<String> = rec.requests().into_iter().map(|r| r.uri).collect();
    assert_eq!(uris, ["/after"; 2]);
}

/// An `Expect` other than `100-continue` is answered as Go's server (so
/// Tyk) answers it, before any handler: 417 with no body, and the
/// connection closes (what follows is not read as a request); it was
/// proxied with the header. `100-continue` among other tokens, in any
/// case, and an empty `Expect` go on as before; only the first line counts.
#[test]
fn an_expectation_other_than_100_continue_is_417_as_go_answers_it() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/", up);
    for kind in [ClientHttp1::Own, ClientHttp1::Hyper] {
        let gw = gateway(kind, dir.path());
        for expect in [
            "Expect: foo",
            "Expect: 100-continuex",
            "Expect: foo\r\nExpect: 100-continue",
        ] {
            let request = format!(
                "POST /refused HTTP/1.1\r\nHost: a\r\n{expect}\r\nContent-Length: 2\r\n\r\nhiGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
            );
            let got = exchange(gw.addr, request.as_bytes());
            assert_eq!(
                got,
                "HTTP/1.1 417 Expectation Failed\r\nconnection: close\r\ncontent-length: 0\r\ndate: X\r\n\r\n",
                "{kind:?}, {expect:?}"
            );
        }
        for expect in [
            "Expect: 100-Continue",
            "Expect: foo, 100-continue",
            "Expect: ",
            "Expect: 100-continue\r\nExpect: foo",
        ] {
            let request = format!(
                "POST /met HTTP/1.1\r\nHost: a\r\n{expect}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
            );
            let got = exchange(gw.addr, request.as_bytes());
            assert!(
                statuses(&got).last() == Some(&"HTTP/1.1 200 OK"),
                "{kind:?}, {expect:?}: {got}"
            );
        }
        gw.stop();
    }
    let uris: Vec<String> = rec.requests().into_iter().map(|r| r.uri).collect();
    assert_eq!(uris, ["/met"; 8]);
}

/// Mangled client requests, from a fixed seed, on both servers: each seed
/// request (a GET with a query, a POST with a length, a chunked POST with
/// trailers, an HTTP/1.0 keep-alive GET, two pipelined GETs, a PUT with
/// `Expect: 100-continue` and dot segments), to an API without middleware
/// or one with JS middleware on boa or QuickJS (the body buffered, read
/// and rewritten), with bytes flipped to ones that matter to a parser,
/// removed, inserted, repeated or cut off, sent in up to three pieces. Every
/// connection ends (answered, refused, or timed out: never held), every
/// answer is HTTP, nothing in the gateway panics, and every request that
/// reaches the upstream is well-formed by a strict parser (head and
/// framing): the gateway never passes on a request it read one way and
/// the upstream could read another.
#[test]
fn mangled_requests_are_answered_or_closed_and_reach_the_upstream_well_formed() {
    use std::io::BufRead;
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};

    const SEEDS: [&[u8]; 6] = [
        b"GET /plain/a?q=1 HTTP/1.1\r\nHost: t\r\nX-A: b\r\nAccept: */*\r\n\r\n",
        b"POST /plain/p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello",
        b"POST /plain/c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;e=1\r\nabc\r\n0\r\nT: v\r\n\r\n",
        b"GET /plain/old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"GET /plain/1 HTTP/1.1\r\nHost: t\r\n\r\nGET /plain/2 HTTP/1.1\r\nHost: t\r\n\r\n",
        b"PUT /plain/%41b/../c HTTP/1.1\r\nHost: t:80\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
    ];
    const BYTES: &[u8] = b"\r\n \t:09a-;/%?\x00\xff";
    const CASES: usize = 150;

    let panics = common::fuzz::panics();
    let panics_before = panics.load(Ordering::SeqCst);

    // The upstream reads each request strictly (httparse's defaults, then
    // the body by its framing, chunk by chunk) and keeps what it could not.
    let bad: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen_bad = bad.clone();
    let (up, _stats) = raw_upstream(move |s| {
        let mut w = s.try_clone().unwrap();
        let mut r = std::io::BufReader::new(s);
        let line = |r: &mut std::io::BufReader<TcpStream>| {
            let mut l = Vec::new();
            r.read_until(b'\n', &mut l)
                .ok()
                .filter(|&n| n > 0)
                .map(|_| l)
        };
        loop {
            let mut head = Vec::new();
            loop {
                let Some(l) = line(&mut r) else { return };
                let end = l == b"\r\n";
                head.extend(l);
                if end {
                    break;
                }
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            let mut fields = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut fields);
            if !matches!(req.parse(&head), Ok(httparse::Status::Complete(_))) {
                seen_bad.lock().unwrap().push(text);
                return;
            }
            let field = |name: &str| {
                req.headers
                    .iter()
                    .filter(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).into_owned())
                    .collect::<Vec<_>>()
            };
            let (lengths, codings) = (field("content-length"), field("transfer-encoding"));
            // Some(true): read whole; Some(false): bytes no framing allows;
            // None: the gateway stopped mid-body (a client's body that
            // broke while it streamed: cut short, never misframed).
            let framed = match (&lengths[..], &codings[..]) {
                ([], []) => Some(true),
                ([n], []) => match n.parse::<usize>() {
                    Ok(n) => {
                        let mut body = vec![0; n];
                        std::io::Read::read_exact(&mut r, &mut body)
                            .ok()
                            .map(|_| true)
                    }
                    Err(_) => Some(false),
                },
                ([], [c]) if c.eq_ignore_ascii_case("chunked") => loop {
                    let Some(size) = line(&mut r) else { break None };
                    let size = String::from_utf8_lossy(&size);
                    let Some(size) = size.strip_suffix("\r\n") else {
                        break None;
                    };
                    let Ok(size) = usize::from_str_radix(size.split(';').next().unwrap(), 16)
                    else {
                        break Some(false);
                    };
                    if size == 0 {
                        // Trailers, to the empty line.
                        break loop {
                            match line(&mut r) {
                                Some(l) if l == b"\r\n" => break Some(true),
                                Some(l) if l.ends_with(b"\r\n") && l.contains(&b':') => {}
                                Some(_) => break Some(false),
                                None => break None,
                            }
                        };
                    }
                    let mut data = vec![0; size + 2];
                    if std::io::Read::read_exact(&mut r, &mut data).is_err() {
                        break None;
                    }
                    if !data.ends_with(b"\r\n") {
                        break Some(false);
                    }
                },
                _ => Some(false),
            };
            match framed {
                Some(true) => {}
                Some(false) => {
                    seen_bad.lock().unwrap().push(text);
                    return;
                }
                None => return,
            }
            if w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    // The same upstream behind JS middleware on each engine, which buffers
    // the body, reads it and writes another.
    let script = dir.path().join("mw.js");
    std::fs::write(
        &script,
        "var m = new TykJS.TykMiddleware.NewMiddleware({});\n\
         m.NewProcessRequest(function (request, session, spec) {\n\
             request.SetHeaders[\"X-Len\"] = String(request.Body.length);\n\
             request.Body = request.Body + \"!\";\n\
             return m.ReturnData(request, {});\n\
         });\n",
    )
    .unwrap();
    for (name, engine) in [("js", "boa"), ("qjs", "quickjs")] {
        let mw = serde_json::json!({
            "driver": "otto",
            "engine": engine,
            "pre": [{"name": "m", "path": script}],
        });
        let listen = format!("/{name}/");
        write_api(
            dir.path(),
            name,
            &api_json(name, &listen, &format!("http://{up}"), true, mw),
        );
    }
    // Short client waits: a request cut short costs this, not the defaults.
    let short = Duration::from_millis(300);
    let gateways = [ClientHttp1::Own, ClientHttp1::Hyper].map(|kind| {
        start_gateway_with(GatewayConfig {
            client_http1: kind,
            client_header_timeout: short,
            client_body_timeout: short,
            client_keepalive_timeout: short,
            ..config(dir.path())
        })
    });

    let (mut rng, n) = common::fuzz::source(0xc11e_27f0, CASES);
    let cases: Vec<(Vec<u8>, Vec<usize>)> = (0..n)
        .map(|_| {
            let route = ["/plain/", "/js/", "/qjs/"][rng.usize(..3)];
            let seed = String::from_utf8_lossy(SEEDS[rng.usize(..SEEDS.len())]);
            let mut a = seed.replace("/plain/", route).into_bytes();
            common::fuzz::mangle(&mut rng, &mut a, BYTES);
            // Up to two cuts, as lengths of the pieces before the last.
            let cuts = (0..rng.usize(..3))
                .map(|_| rng.usize(..a.len() + 1))
                .collect();
            (a, cuts)
        })
        .collect();
    // A batch of connections at a time: most wait out a short timeout.
    for batch in cases.chunks(25) {
        let threads: Vec<_> = gateways
            .iter()
            .flat_map(|gw| batch.iter().map(move |case| (gw.addr, case.clone())))
            .map(|(addr, (case, cuts))| {
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    // In pieces (split where the case says), a little
                    // apart: heads and bodies that arrive over more reads.
                    let mut rest = &case[..];
                    for cut in cuts {
                        let (piece, after) = rest.split_at(cut.min(rest.len()));
                        let _ = s.write_all(piece);
                        std::thread::sleep(Duration::from_millis(5));
                        rest = after;
                    }
                    let _ = s.write_all(rest);
                    let mut got = Vec::new();
                    let ended = match s.read_to_end(&mut got) {
                        Ok(_) => true,
                        // Reset by the gateway after refusing: ended too.
                        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
                    };
                    (case, ended, got)
                })
            })
            .collect();
        for t in threads {
            let (case, ended, got) = t.join().unwrap();
            let what = String::from_utf8_lossy(&case);
            assert!(ended, "the connection was held: {what:?}");
            assert!(
                got.is_empty() || got.starts_with(b"HTTP/1."),
                "{what:?} got {:?}",
                String::from_utf8_lossy(&got)
            );
        }
    }
    assert_eq!(
        *bad.lock().unwrap(),
        Vec::<String>::new(),
        "the upstream got these"
    );
    assert_eq!(
        panics.load(Ordering::SeqCst),
        panics_before,
        "something panicked"
    );
    for gw in gateways {
        // All three still serve (a middleware that failed to load is 500).
        for route in ["/plain/", "/js/", "/qjs/"] {
            let got = get(gw.addr, &format!("{route}after"));
            assert_eq!(
                (got.status.as_u16(), got.text()),
                (200, "ok".into()),
                "{route}"
            );
        }
        gw.stop();
    }
}
