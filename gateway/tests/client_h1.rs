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
