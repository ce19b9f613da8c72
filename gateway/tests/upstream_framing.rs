//! How the gateway reads its upstream's responses (RFC 9112 §6.3), through
//! raw upstreams that write exact bytes: interim 1xx answers skipped,
//! chunked bodies (with trailers) streamed, close-delimited bodies read to
//! the end, bodiless answers (HEAD, 204, 304) never waited on, a body cut
//! short never passed off as whole, garbage answered with Tyk's error, and
//! a pooled connection reused only when its last response ended cleanly.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::raw::{
    config, plain_api, raw_upstream, read_framed_response, read_request, read_request_head,
    read_response,
};
use common::{get, send, start_gateway_with, TestGateway};

const TYK_PROXY_ERROR: &str = "There was a problem proxying the request";

/// A gateway whose `/up/` proxies to an upstream that answers every request
/// on a connection with `answer(request_head)` (bytes written as they are),
/// keeping the connection open until the gateway closes it.
fn gateway_to(
    answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static,
) -> (TestGateway, common::raw::RawUpstream, tempfile::TempDir) {
    let (up, stats) = raw_upstream(move |mut s| {
        while let Some(head) = read_request(&mut s) {
            if s.write_all(&answer(&head)).is_err() {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    let gw = start_gateway_with(config(dir.path()));
    (gw, stats, dir)
}

#[test]
fn interim_1xx_answers_are_skipped_and_the_final_one_proxied() {
    let (gw, stats, _dir) = gateway_to(|_| {
        b"HTTP/1.1 100 Continue\r\n\r\n\
          HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
          HTTP/1.1 201 Created\r\nContent-Length: 4\r\nX-Final: yes\r\n\r\ndone"
            .to_vec()
    });
    for _ in 0..3 {
        let got = get(gw.addr, "/up/x");
        assert_eq!(got.status, 201);
        assert_eq!(got.text(), "done");
        assert_eq!(got.headers["x-final"], "yes");
        assert!(!got.headers.contains_key("link"), "{:?}", got.headers);
    }
    // Each exchange ended cleanly: one upstream connection for all three.
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 1);
    gw.stop();
}

#[test]
fn a_chunked_body_with_trailers_streams_whole_and_the_connection_is_reused() {
    let (gw, stats, _dir) = gateway_to(|_| {
        let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for i in 0..50 {
            let chunk = format!("chunk {i:02};");
            r.extend(format!("{:x};ext=1\r\n{chunk}\r\n", chunk.len()).bytes());
        }
        r.extend(b"0\r\nX-Trailer: t\r\n\r\n");
        r
    });
    let want: String = (0..50).map(|i| format!("chunk {i:02};")).collect();
    for _ in 0..3 {
        let got = get(gw.addr, "/up/");
        assert_eq!(got.status, 200);
        assert_eq!(got.text(), want);
    }
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 1);
    gw.stop();
}

/// A chunked body whose lines end in a bare LF is refused as it arrives,
/// by both upstream clients (ours for GETs, hyper's for a chunked upload),
/// as Go does since 1.23.8 (CVE-2025-22871): the client gets the head and
/// the data before it, then the connection closes without the body's end,
/// and the upstream connection is not reused. Ours waited for a CRLF until
/// the read timeout (60 s here; the client below gives up after 20).
#[test]
fn a_chunked_body_with_bare_lf_lines_is_cut_at_once() {
    let (up, stats) = raw_upstream(|mut s| {
        while read_request(&mut s).is_some() {
            let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                           5\r\nhello\r\n3\nabc\n0\n\n";
            if s.write_all(answer).is_err() {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    let gw = start_gateway_with(config(dir.path()));
    let gets = "GET /up/ HTTP/1.1\r\nHost: t\r\n\r\n";
    let upload =
        "POST /up/ HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n";
    for (i, request) in [gets, upload, gets, upload].into_iter().enumerate() {
        let mut s = TcpStream::connect(gw.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got)
            .unwrap_or_else(|e| panic!("{request}: the answer did not end: {e}"));
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{request}: {got}");
        assert!(got.contains("hello"), "{request}: {got}");
        assert!(
            !got.ends_with("0\r\n\r\n"),
            "{request}: passed off as whole: {got}"
        );
        // Each refused body closed its upstream connection.
        assert_eq!(stats.accepted.load(Ordering::SeqCst), i + 1);
    }
    gw.stop();
}

#[test]
fn a_close_delimited_body_is_read_to_the_end_and_not_reused() {
    let body: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let want = body.clone();
    let (up, stats) = raw_upstream(move |mut s| {
        if read_request(&mut s).is_some() {
            // No Content-Length, no chunking: the body ends when we close.
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nX-Close: 1\r\n\r\n");
            for part in body.chunks(7_000) {
                let _ = s.write_all(part);
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    let gw = start_gateway_with(config(dir.path()));
    for _ in 0..2 {
        let got = get(gw.addr, "/up/");
        assert_eq!(got.status, 200);
        assert_eq!(got.body.len(), want.len());
        assert!(got.body == want, "the body changed on its way");
    }
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 2);
    gw.stop();
}

#[test]
fn head_204_and_304_answers_have_no_body_and_keep_the_connection() {
    let (gw, stats, _dir) = gateway_to(|head| {
        let path = head.split(' ').nth(1).unwrap_or("");
        match path {
            // A HEAD answer's Content-Length describes the GET's body.
            _ if head.starts_with("HEAD") => {
                b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n".to_vec()
            }
            "/none" => b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(),
            "/same" => b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n".to_vec(),
            _ => b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello, world".to_vec(),
        }
    });
    for _ in 0..2 {
        let got = send(gw.addr, "HEAD", "/up/h", &[], b"");
        assert_eq!(got.status, 200);
        assert_eq!(got.headers["content-length"], "12");
        assert!(got.body.is_empty());
        let got = get(gw.addr, "/up/none");
        assert_eq!(got.status, 204);
        assert!(got.body.is_empty());
        let got = get(gw.addr, "/up/same");
        assert_eq!(got.status, 304);
        assert_eq!(got.headers["etag"], "\"x\"");
        let got = get(gw.addr, "/up/full");
        assert_eq!(got.text(), "hello, world");
    }
    // None of them was waited on for a body that never came.
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 1);
    gw.stop();
}

#[test]
fn a_big_body_streams_whole_in_both_directions() {
    const LEN: usize = 4 << 20;
    let (up, stats) = raw_upstream(|mut s| {
        let mut body = vec![0u8; LEN];
        while let Some(head) = read_request_head(&mut s) {
            // The request body (Content-Length) is echoed back reversed.
            let len = content_length(&head).unwrap_or(0);
            let got = &mut body[..len];
            if s.read_exact(got).is_err() {
                return;
            }
            got.reverse();
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n");
            if s.write_all(head.as_bytes()).is_err() || s.write_all(got).is_err() {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    let gw = start_gateway_with(config(dir.path()));
    let sent: Vec<u8> = (0..LEN as u32).map(|i| (i * 7 % 251) as u8).collect();
    for method in ["POST", "PUT"] {
        let got = send(gw.addr, method, "/up/echo", &[], &sent);
        assert_eq!(got.status, 200);
        assert_eq!(got.body.len(), LEN);
        assert!(
            got.body.iter().eq(sent.iter().rev()),
            "{method}: the body changed"
        );
    }
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 1);
    gw.stop();
}

#[test]
fn a_body_cut_short_is_never_passed_off_as_whole() {
    let (up, stats) = raw_upstream(|mut s| {
        if read_request(&mut s).is_some() {
            // Promises 1000 bytes, sends 10, closes.
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789");
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    let gw = start_gateway_with(config(dir.path()));
    for _ in 0..2 {
        let mut c = TcpStream::connect(gw.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(b"GET /up/ HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        // The gateway closes the client's connection, either before the
        // head went out (nothing arrives: the client sees no response) or
        // after part of the body (the client can tell it is short of its
        // Content-Length); never with a response that looks whole.
        let _ = c.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        if !text.is_empty() {
            assert!(text.starts_with("HTTP/1.1 200"), "{text}");
            assert!(text.contains("content-length: 1000"), "{text}");
            let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
            assert!(body.len() < 1000, "{text}");
        }
    }
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 2);
    // The worker is fine.
    gw.stop();
}

#[test]
fn garbage_instead_of_a_response_is_tyks_error() {
    for answer in [
        &b"SSH-2.0-OpenSSH_9.2\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        // Codings the client would get unlabelled once de-chunked.
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhello",
    ] {
        let (gw, _stats, _dir) = gateway_to(move |_| answer.to_vec());
        let got = get(gw.addr, "/up/");
        let what = String::from_utf8_lossy(answer);
        assert_eq!(got.status, 500, "{what:?}");
        assert_eq!(got.json()["error"], TYK_PROXY_ERROR, "{what:?}");
        gw.stop();
    }
}

/// A header value folded over lines (obs-fold, RFC 9112 §5.2) reaches the
/// client as one line, as Go's client (so Tyk) reads it: each line
/// trimmed, joined by a space. Both ways of sending: a GET from the
/// request's task (the gateway's own client) and an upload streamed
/// through hyper's client. The connection stays in use after it.
#[test]
fn a_folded_header_value_reaches_the_client_on_one_line() {
    let (gw, stats, _dir) = gateway_to(|_| {
        b"HTTP/1.1 200 OK\r\nX-Before: b\r\nX-Folded: one \r\n  two\r\n\tthree\r\n\
          Content-Length: 4\r\nX-After: a\r\n\r\nbody"
            .to_vec()
    });
    let big = vec![b'x'; 100_000];
    for round in 0..2 {
        for got in [
            get(gw.addr, "/up/"),
            send(gw.addr, "POST", "/up/", &[], &big),
        ] {
            assert_eq!(got.status, 200, "round {round}: {:?}", got.headers);
            assert_eq!(got.headers["x-folded"], "one two three", "round {round}");
            assert_eq!(got.headers["x-before"], "b");
            assert_eq!(got.headers["x-after"], "a");
            assert_eq!(got.text(), "body");
        }
    }
    // Two connections at most (one the streaming side took), each reused.
    assert!(stats.accepted.load(Ordering::SeqCst) <= 2);
    gw.stop();
}

/// The gateway never asks for an upgrade (it removes the client's
/// `Upgrade`), so a 101 is a switch nobody asked for: Tyk's error, not a
/// bare 101 after which the client's connection went on in HTTP. Both
/// ways of sending: a request whose body is known, written in the
/// request's task, and a large upload streamed through hyper's client.
/// Repeated equal lengths are one length (RFC 9110 §8.6), and the client
/// gets that one value, not the list it might refuse.
#[test]
fn a_repeated_content_length_reaches_the_client_as_one() {
    let (gw, _stats, _dir) = gateway_to(|_| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\nhello".to_vec()
    });
    for _ in 0..2 {
        let answer = common::raw(
            gw.addr,
            "GET /up/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let lengths: Vec<&str> = answer
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("content-length:"))
            .collect();
        assert_eq!(lengths.len(), 1, "{answer}");
        assert_eq!(
            lengths[0].split(':').nth(1).unwrap().trim(),
            "5",
            "{answer}"
        );
        assert!(answer.ends_with("\r\n\r\nhello"), "{answer}");
    }
    gw.stop();
}

#[test]
fn an_unasked_switch_of_protocols_is_tyks_error() {
    let (gw, _stats, _dir) = gateway_to(|_| {
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nRAW".to_vec()
    });
    let upgrade = [("connection", "upgrade"), ("upgrade", "x")];
    let upload = vec![b'u'; 1 << 20];
    for (method, body) in [("GET", &b""[..]), ("POST", &upload[..])] {
        for headers in [&[][..], &upgrade[..]] {
            let got = send(gw.addr, method, "/up/", headers, body);
            assert_eq!(got.status, 500, "{method} {headers:?}: {}", got.text());
            assert_eq!(got.json()["error"], TYK_PROXY_ERROR);
        }
    }
    // The gateway still serves on the same connection after it.
    let answer = common::raw(
        gw.addr,
        "GET /up/ HTTP/1.1\r\nHost: t\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
    assert_eq!(answer.matches("HTTP/1.1 ").count(), 2, "{answer}");
    assert!(!answer.contains("101"), "{answer}");
    gw.stop();
}

#[test]
fn an_upstream_that_closes_without_answering_is_tyks_error() {
    let (up, stats) = raw_upstream(|mut s| {
        let _ = read_request(&mut s);
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    let gw = start_gateway_with(config(dir.path()));
    for _ in 0..3 {
        let got = get(gw.addr, "/up/");
        assert_eq!(got.status, 500);
        assert_eq!(got.json()["error"], TYK_PROXY_ERROR);
    }
    // Fresh connections each time: nothing to retry.
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 3);
    gw.stop();
}

#[test]
fn bytes_after_a_response_never_reach_the_next_request() {
    // The upstream answers, then writes a second, unasked-for response on
    // the same connection: it must not be taken as the next answer.
    let (gw, stats, _dir) = gateway_to(|head| {
        if head.contains("/first") {
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst\
              HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil"
                .to_vec()
        } else {
            b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond".to_vec()
        }
    });
    assert_eq!(get(gw.addr, "/up/first").text(), "first");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(get(gw.addr, "/up/second").text(), "second");
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 2);
    gw.stop();
}

#[test]
fn connection_close_from_the_upstream_is_honoured() {
    let (gw, stats, _dir) = gateway_to(|_| {
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok".to_vec()
    });
    for _ in 0..3 {
        let got = get(gw.addr, "/up/");
        assert_eq!(got.text(), "ok");
        // Connection is hop-by-hop: the client's own connection is its own.
        assert!(!got.headers.contains_key("connection"));
    }
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 3);
    gw.stop();
}

#[test]
fn an_http10_upstream_answer_is_not_reused_unless_it_says_keep_alive() {
    let (gw, stats, _dir) = gateway_to(|head| {
        if head.contains("/ka") {
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nka".to_vec()
        } else {
            b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()
        }
    });
    assert_eq!(get(gw.addr, "/up/plain").text(), "ok");
    assert_eq!(get(gw.addr, "/up/plain").text(), "ok");
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 2);
    assert_eq!(get(gw.addr, "/up/ka").text(), "ka");
    assert_eq!(get(gw.addr, "/up/ka").text(), "ka");
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 3);
    gw.stop();
}

/// The client gets the gateway's HTTP version, not the upstream's (RFC
/// 9112 §2.3; Go's server answers in the request's version): an HTTP/1.0
/// upstream's answers, one with a length and one read to the close, reach
/// an HTTP/1.1 client as `HTTP/1.1` on a connection that stays open
/// (the unframed body chunked), through both upstream clients (GETs; a
/// chunked upload goes through hyper's). An HTTP/1.0 client still gets
/// `HTTP/1.0`. It used to be `HTTP/1.0`, and the connection closed.
#[test]
fn an_http10_upstream_answer_reaches_the_client_in_the_gateways_version() {
    let (up, _stats) = raw_upstream(|mut s| {
        while let Some(head) = read_request(&mut s) {
            if head.contains("/close") {
                let _ = s.write_all(b"HTTP/1.0 200 OK\r\nX-U: 1\r\n\r\nto the end");
                return;
            }
            if s.write_all(
                b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
            )
            .is_err()
            {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    let gw = start_gateway_with(config(dir.path()));
    let mut s = TcpStream::connect(gw.addr).unwrap();
    let upload =
        "POST /up/{} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n";
    for round in 0..2 {
        for path in ["len", "close"] {
            let gets = format!("GET /up/{path} HTTP/1.1\r\nHost: t\r\n\r\n");
            for request in [gets, upload.replace("{}", path)] {
                s.write_all(request.as_bytes()).unwrap();
                let (head, body) = read_framed_response(&mut s)
                    .unwrap_or_else(|| panic!("round {round}: {request}: no whole answer"));
                assert!(
                    head.starts_with("HTTP/1.1 200 OK\r\n"),
                    "round {round}: {request}: {head}"
                );
                let want = if path == "len" { "ok" } else { "to the end" };
                assert_eq!(body, want.as_bytes(), "round {round}: {request}");
            }
        }
    }
    drop(s);
    let old = common::raw(gw.addr, "GET /up/close HTTP/1.0\r\nHost: t\r\n\r\n");
    assert!(old.starts_with("HTTP/1.0 200 OK\r\n"), "{old}");
    assert!(old.ends_with("\r\n\r\nto the end"), "{old}");
    // An HTTP/1.0 keep-alive client: an answer with a length keeps the
    // connection; one read to the close ends with the close, and its head
    // says so (it promised `keep-alive`, then closed).
    let kept = common::raw(
        gw.addr,
        "GET /up/len HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\n\r\n\
         GET /up/close HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\n\r\n",
    );
    let (first, second) = kept.split_once("\r\n\r\nok").expect(&kept);
    assert!(first.contains("connection: keep-alive\r\n"), "{kept}");
    assert!(second.starts_with("HTTP/1.0 200 OK\r\n"), "{kept}");
    assert!(
        !second
            .to_ascii_lowercase()
            .contains("connection: keep-alive"),
        "{kept}"
    );
    assert!(second.contains("connection: close\r\n"), "{kept}");
    assert!(second.ends_with("\r\n\r\nto the end"), "{kept}");
    gw.stop();
}

#[test]
fn keep_alive_clients_get_every_answer_in_order() {
    let (gw, stats, _dir) = gateway_to(|head| {
        let path = head.split(' ').nth(1).unwrap_or("").to_string();
        let body = format!("answer to {path}");
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    });
    let mut c = TcpStream::connect(gw.addr).unwrap();
    for i in 0..20 {
        write!(c, "GET /up/{i} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let (status, body) = read_response(&mut c);
        assert_eq!((status, body), (200, format!("answer to /{i}")));
    }
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 1);
    gw.stop();
}

fn content_length(head: &str) -> Option<usize> {
    head.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .strip_prefix("content-length:")
            .and_then(|v| v.trim().parse().ok())
    })
}

#[test]
fn streamed_and_buffered_requests_share_the_pool() {
    // GETs go out from the request's task, bodies still streaming from the
    // client through hyper's client: an idle connection serves either.
    let (gw, stats, _dir) = gateway_to(|head| {
        let body = if head.starts_with("POST") {
            "posted"
        } else {
            "got"
        };
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    });
    for round in 0..5 {
        assert_eq!(get(gw.addr, "/up/g").text(), "got", "round {round}");
        let big = vec![b'x'; 100_000];
        assert_eq!(send(gw.addr, "POST", "/up/p", &[], &big).text(), "posted");
        assert_eq!(get(gw.addr, "/up/g").text(), "got", "round {round}");
    }
    // The first GET's connection went over to the streaming side; the next
    // GET needed one of its own; after that both kinds are reused.
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 2);
    gw.stop();
}

/// Mangled upstream answers, from a fixed seed: each seed response (length,
/// chunked with trailers, HTTP/1.0 keep-alive, interim then 204, unframed,
/// 304 with a length) with bytes flipped to ones that matter to a parser
/// (line ends, spaces, colons, digits, NUL, 0xFF), removed, inserted,
/// repeated, or cut off, half the time with the upstream closing after.
/// Every request through a mangled answer gets a status line (Tyk's error
/// or the answer passed on; never nothing, never a hang), half of them
/// sent by each upstream client (a GET; a streamed upload), to an API
/// without middleware and to ones with a JS response hook on boa and on
/// QuickJS (the answer's body buffered, read and rewritten), nothing in the
/// gateway panics, and after each one a request for a known token gets
/// exactly that token: a connection left with bytes of a mangled answer is
/// never handed to the next request.
#[test]
fn mangled_upstream_answers_are_answered_and_never_leak_into_the_next_one() {
    use std::sync::Arc;

    const CASES: usize = 240;
    const SEEDS: [&[u8]; 6] = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nX: y\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: y\r\n\r\nuntil the close",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
    ];
    const BYTES: &[u8] = b"\r\n \t:09a-;\x00\xff";

    let panics = common::fuzz::panics();
    let panics_before = panics.load(Ordering::SeqCst);

    let (mut rng, n) = common::fuzz::source(0x5eed_f022, CASES);
    let cases: Vec<(Vec<u8>, bool)> = (0..n)
        .map(|_| {
            let seed = rng.usize(..SEEDS.len());
            let mut a = SEEDS[seed].to_vec();
            let mut close = seed == 4 || rng.bool();
            close |= common::fuzz::mangle(&mut rng, &mut a, BYTES);
            (a, close)
        })
        .collect();
    let cases = Arc::new(cases);
    let answers = cases.clone();
    let (up, _stats) = raw_upstream(move |mut s| {
        while let Some(head) = read_request(&mut s) {
            let target = head.split(' ').nth(1).unwrap_or("");
            if let Some(token) = target.strip_prefix("/good/") {
                let ok = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{token}",
                    token.len()
                );
                if s.write_all(ok.as_bytes()).is_err() {
                    return;
                }
            } else if let Some(i) = target.strip_prefix("/case/") {
                let (answer, close) = &answers[i.parse::<usize>().unwrap()];
                // One write: the answer arrives whole, as one segment.
                if s.write_all(answer).is_err() || *close {
                    return;
                }
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    // The same upstream behind a JS response hook on each engine, which
    // buffers the answer's body, reads it and writes another.
    let script = dir.path().join("resp.js");
    std::fs::write(
        &script,
        "var r = new TykJS.TykMiddleware.NewMiddleware({});\n\
         r.NewProcessResponse(function (response, request, session, spec) {\n\
             response.SetHeaders[\"X-Len\"] = String(response.Body.length);\n\
             response.Body = response.Body + \"!\";\n\
             return r.ReturnResponseData(response, {});\n\
         });\n",
    )
    .unwrap();
    for (name, engine) in [("rb", "boa"), ("rq", "quickjs")] {
        let mw = serde_json::json!({
            "driver": "otto",
            "engine": engine,
            "response": [{"name": "r", "path": script}],
        });
        let listen = format!("/{name}/");
        common::write_api(
            dir.path(),
            name,
            &common::api_json(name, &listen, &format!("http://{up}"), true, mw),
        );
    }
    // Short upstream waits: an answer whose head or body never ends (the
    // upstream keeps the connection) costs this, not the defaults.
    let gw = start_gateway_with(gateway::server::GatewayConfig {
        upstream_timeout: Duration::from_millis(300),
        upstream_read_timeout: Duration::from_millis(300),
        ..config(dir.path())
    });
    let upload = "x".repeat(50_000);
    for (i, (answer, close)) in cases.iter().enumerate() {
        let what = format!(
            "case {i} (close {close}): {:?}",
            String::from_utf8_lossy(answer)
        );
        // Each route in turn, by GET and by upload.
        let route = ["up", "rb", "rq"][i / 2 % 3];
        let request = match i % 2 {
            0 => format!("GET /{route}/case/{i} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
            _ => format!(
                "POST /{route}/case/{i} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{upload}",
                upload.len()
            ),
        };
        let got = common::raw(gw.addr, &request);
        let status = got
            .strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse::<u16>().ok());
        // A body broken before its first byte may end the exchange with
        // nothing (hyper's server had not written the head yet; Go's
        // proxy aborts the same way): allowed only after a final head
        // that parses. A head that does not gets Tyk's error.
        assert!(
            matches!(status, Some(200..=999)) || (got.is_empty() && final_head(answer)),
            "{what}\nthe client got {got:?}"
        );
        let token = format!("t{i}x{}", rng.u32(..));
        let good = get(gw.addr, &format!("/up/good/{token}"));
        assert_eq!(
            (good.status.as_u16(), good.text()),
            (200, token),
            "after {what}"
        );
    }
    assert_eq!(
        panics.load(Ordering::SeqCst),
        panics_before,
        "something panicked"
    );
    // The hooks ran (one that failed to load would be 500).
    for route in ["rb", "rq"] {
        let token = format!("last-{route}");
        let got = get(gw.addr, &format!("/{route}/good/{token}"));
        assert_eq!(
            (got.status.as_u16(), got.text()),
            (200, format!("{token}!"))
        );
        assert_eq!(got.headers["x-len"], token.len().to_string().as_str());
    }
    gw.stop();
}

/// Whether `answer` starts with a whole final response head (after any
/// interim ones), as the gateway reads heads (obs-fold allowed).
fn final_head(mut answer: &[u8]) -> bool {
    loop {
        let mut fields = [httparse::EMPTY_HEADER; 16];
        let mut resp = httparse::Response::new(&mut fields);
        let parsed = httparse::ParserConfig::default()
            .allow_obsolete_multiline_headers_in_responses(true)
            .parse_response(&mut resp, answer);
        match (parsed, resp.code) {
            (Ok(httparse::Status::Complete(n)), Some(100..=199)) if resp.code != Some(101) => {
                answer = &answer[n..];
            }
            (Ok(httparse::Status::Complete(_)), Some(200..=999)) => return true,
            _ => return false,
        }
    }
}

/// A response head past 64 KiB is refused (Tyk's 500) by both clients, whether it
/// trickled in or arrived whole in one write (the own client measured only
/// a head still arriving, so a 100 KB head written at once got through); a
/// head just under the bound is proxied.
#[test]
fn a_response_head_past_64_kib_is_refused_however_it_arrives() {
    let (up, stats) = raw_upstream(|mut s| {
        while let Some(head) = read_request(&mut s) {
            let size: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("X-Size: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            let whole = head.contains("X-Whole: 1");
            let mut answer = format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\n", "b".repeat(size));
            answer.push_str("Content-Length: 2\r\n\r\nok");
            let sent = if whole {
                s.write_all(answer.as_bytes())
            } else {
                answer
                    .as_bytes()
                    .chunks(3_000)
                    .try_for_each(|part| s.write_all(part).and_then(|()| s.flush()))
            };
            if sent.is_err() {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    let gw = start_gateway_with(config(dir.path()));
    let mut refused = 0;
    // 65,600: past the bound by less than one read, so the head can be
    // partial below it and whole past it.
    for (size, ok) in [
        (60_000, true),
        (65_600, false),
        (100_000, false),
        (300_000, false),
    ] {
        for whole in [true, false] {
            for upload in [false, true] {
                let mut s = TcpStream::connect(gw.addr).unwrap();
                let tail = if upload {
                    "POST /up/ HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
                } else {
                    "GET /up/ HTTP/1.1\r\nHost: t\r\n\r\n"
                };
                let (method, rest) = tail.split_once("\r\n").unwrap();
                let request = format!(
                    "{method}\r\nX-Size: {size}\r\nX-Whole: {}\r\n{rest}",
                    u8::from(whole)
                );
                s.write_all(request.as_bytes()).unwrap();
                let (status, body) = read_response(&mut s);
                let case = format!("head of {size} bytes, whole {whole}, upload {upload}");
                if ok {
                    assert_eq!((status, body.as_str()), (200, "ok"), "{case}");
                } else {
                    assert_eq!(status, 500, "{case}: {body}");
                    assert!(body.contains(TYK_PROXY_ERROR), "{case}: {body}");
                    refused += 1;
                }
            }
        }
    }
    assert_eq!(refused, 12);
    // The upstream was reached each time (so the refusal was of its head).
    assert!(stats.accepted.load(Ordering::SeqCst) >= 1);
    gw.stop();
}

/// Interim (1xx) answers are skipped up to five, as Go's client (so Tyk)
/// skips them; past that the upstream's answer is refused (500), by both
/// clients (ours for a GET, hyper's for a chunked upload), and an upstream
/// that sends them without end no longer holds the worker parsing them
/// until `--upstream-timeout` (30 s here; the client gives up after 20).
#[test]
fn more_than_five_interim_answers_are_refused_by_both_clients() {
    let (up, stats) = raw_upstream(|mut s| {
        while let Some(head) = read_request(&mut s) {
            let count = head
                .lines()
                .find_map(|l| l.strip_prefix("X-Interim: "))
                .map(|v| v.trim().to_string())
                .unwrap();
            let hint = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n";
            // "endless": until the gateway closes (bounded: ~300 MB).
            let n = count.parse().unwrap_or(5_000_000);
            for _ in 0..n {
                if s.write_all(hint).is_err() {
                    return;
                }
            }
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    let gw = start_gateway_with(config(dir.path()));
    for (count, ok) in [("5", true), ("6", false), ("endless", false)] {
        for upload in [false, true] {
            let request = if upload {
                format!("POST /up/ HTTP/1.1\r\nHost: t\r\nX-Interim: {count}\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n")
            } else {
                format!("GET /up/ HTTP/1.1\r\nHost: t\r\nX-Interim: {count}\r\n\r\n")
            };
            let mut s = TcpStream::connect(gw.addr).unwrap();
            s.write_all(request.as_bytes()).unwrap();
            let (status, body) = read_response(&mut s);
            let case = format!("{count} interim answers, upload {upload}");
            if ok {
                assert_eq!((status, body.as_str()), (200, "ok"), "{case}");
            } else {
                assert_eq!(status, 500, "{case}: {body}");
                assert!(body.contains(TYK_PROXY_ERROR), "{case}: {body}");
            }
        }
    }
    // Each refused exchange closed its connection (never reused): the
    // first refused GET may have had the answered ones' connection, so at
    // least four.
    assert!(stats.accepted.load(Ordering::SeqCst) >= 4);
    gw.stop();
}
