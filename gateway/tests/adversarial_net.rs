//! Attacks on the network side, kept as tests (issue 11): slow and broken
//! clients, upstreams that close pooled connections or answer badly, paths
//! that try to climb out of an API or into the control API, a definition
//! that points at the gateway itself, and a shutdown in the middle of load.
//!
//! Everything runs on loopback with real sockets (raw `TcpStream`s where a
//! well-behaved client library would refuse to misbehave), bounded in count
//! and time. No test asserts a timing: a bound is only how long a test waits
//! before calling the behaviour missing.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::raw::*;
use common::*;
use gateway::server::{ClientHttp1, GatewayConfig};
use serde_json::Value;

/// Tyk's templates/error.json, as every error answer is written.
const TYK_PROXY_ERROR: &str = "{\n    \"error\": \"There was a problem proxying the request\"\n}";

// ---------------------------------------------------------------- clients

#[test]
fn slowloris_and_idle_connections_are_closed_after_their_timeouts() {
    let (up, _rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(GatewayConfig {
        client_header_timeout: Duration::from_millis(500),
        client_keepalive_timeout: Duration::from_millis(500),
        ..config(dir.path())
    });
    // 50 connections that send a head one byte at a time, never finishing.
    let mut slow: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = TcpStream::connect(gw.addr).unwrap();
            s.write_all(b"GET /plain/ HTTP/1.1\r\nHo").unwrap();
            s
        })
        .collect();
    // One keep-alive client that sends a request, then goes idle.
    let mut idle = TcpStream::connect(gw.addr).unwrap();
    idle.write_all(b"GET /plain/ HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 12];
    idle.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");

    for _ in 0..5 {
        for s in &mut slow {
            let _ = s.write_all(b"s");
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    // One 10 s bound for all of them, not 10 s each.
    let end = Instant::now() + Duration::from_secs(10);
    let still_open = slow
        .iter_mut()
        .map(|s| {
            let left = end.saturating_duration_since(Instant::now());
            closed_by_peer(s, left.max(Duration::from_millis(10)))
        })
        .filter(|closed| !closed)
        .count();
    assert_eq!(still_open, 0, "slowloris connections still open");
    assert!(
        closed_by_peer(&mut idle, Duration::from_secs(10)),
        "the idle keep-alive connection was never closed"
    );
    // And the gateway still serves.
    assert_eq!(get(gw.addr, "/plain/").status, 200);
    gw.stop();
}

#[test]
fn a_slowloris_connection_does_not_hold_shutdown() {
    let (up, _rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let mut gw = start_gateway_with(config(dir.path()));
    let mut slow = TcpStream::connect(gw.addr).unwrap();
    slow.write_all(b"GET /plain/ HTTP/1.1\r\nHost").unwrap();
    // Let the worker accept it.
    std::thread::sleep(Duration::from_millis(200));
    gw.begin_stop();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        gw.join();
        let _ = tx.send(());
    });
    // The grace period is 30 s; the header timeout 60 s.
    assert!(
        rx.recv_timeout(Duration::from_secs(15)).is_ok(),
        "one slowloris connection held the shutdown"
    );
    assert!(closed_by_peer(&mut slow, Duration::from_secs(5)));
}

/// A client that closes its connection (or only its sending side, as nginx
/// and Go's server also read it) before the answer takes its request with
/// it: the upstream exchange is dropped there and then, its connection
/// closed, not held until the upstream answers or times out.
#[test]
fn a_client_that_hangs_up_lets_go_of_its_upstream_exchange() {
    let (deaf, stats) = raw_upstream(|mut s| {
        // Takes the request, never answers; returns when the gateway closes.
        let mut b = [0u8; 4096];
        while let Ok(n) = s.read(&mut b) {
            if n == 0 {
                break;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/deaf/", deaf);
    let gw = start_gateway_with(GatewayConfig {
        upstream_timeout: Duration::from_secs(120),
        ..config(dir.path())
    });
    let get: &[u8] = b"GET /deaf/ HTTP/1.1\r\nHost: x\r\n\r\n";
    // A chunked body: hyper's side serves it (hyper closes a connection
    // whose client closed mid-request, its `half_close` off).
    let chunked: &[u8] =
        b"POST /deaf/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let cases = [(get, false), (get, true), (chunked, false), (get, false)];
    for (i, (request, half)) in cases.into_iter().enumerate() {
        let mut s = TcpStream::connect(gw.addr).unwrap();
        s.write_all(request).unwrap();
        assert!(
            eventually(Duration::from_secs(10), || stats
                .accepted
                .load(Ordering::SeqCst)
                > i),
            "request {i} never reached the upstream"
        );
        if half {
            s.shutdown(std::net::Shutdown::Write).unwrap();
        } else {
            drop(s);
        }
        assert!(
            eventually(Duration::from_secs(10), || stats
                .open
                .load(Ordering::SeqCst)
                == 0),
            "request {i}: the upstream exchange of a client that hung up is still open"
        );
    }
    // Pipelined requests are not a hang-up: both are answered.
    let (up, _rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw2 = start_gateway_with(config(dir.path()));
    let mut s = TcpStream::connect(gw2.addr).unwrap();
    s.write_all(b"GET /plain/a HTTP/1.1\r\nHost: x\r\n\r\nGET /plain/b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s).0, 200);
    assert_eq!(read_response(&mut s).0, 200);
    gw2.stop();
    gw.stop();
}

/// A client that hangs up while the answer's body waits for a stalled
/// upstream takes the exchange with it too: the head and the first bytes
/// went out, the rest never comes, and the upstream connection is closed
/// once the client has gone, not at `--upstream-read-timeout` (60 s), which
/// held both connections until then.
#[test]
fn a_client_that_hangs_up_on_a_stalled_body_lets_go_of_the_upstream() {
    let (stalling, stats) = raw_upstream(|mut s| {
        if read_request_head(&mut s).is_some() {
            // Promises 100 bytes, sends 5, then waits for the gateway to close.
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello");
            let mut b = [0u8; 4096];
            while let Ok(n) = s.read(&mut b) {
                if n == 0 {
                    return;
                }
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/stall/", stalling);
    for client_http1 in [ClientHttp1::Own, ClientHttp1::Hyper] {
        let gw = start_gateway_with(GatewayConfig {
            client_http1,
            ..config(dir.path())
        });
        hang_up_on_stalled_bodies(&gw, &stats, client_http1);
        gw.stop();
    }
}

fn hang_up_on_stalled_bodies(gw: &TestGateway, stats: &RawUpstream, server: ClientHttp1) {
    for half in [false, true] {
        let mut s = TcpStream::connect(gw.addr).unwrap();
        s.write_all(b"GET /stall/ HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut got = [0u8; 16];
        s.read_exact(&mut got).unwrap();
        assert!(got.starts_with(b"HTTP/1.1 200 OK"));
        assert_eq!(stats.open.load(Ordering::SeqCst), 1);
        if half {
            s.shutdown(std::net::Shutdown::Write).unwrap();
        } else {
            drop(s);
        }
        assert!(
            eventually(Duration::from_secs(10), || stats.open.load(Ordering::SeqCst) == 0),
            "{server:?}, half-close {half}: the exchange of a client that hung up on a stalled body is still open"
        );
    }
}

/// Writes the JS API `name` on `/name/`, proxying to `up`: `script`
/// (saved as `name.js`) runs as its `pre` middleware, the function `name`.
fn js_api(dir: &std::path::Path, name: &str, up: SocketAddr, script: &str) {
    let path = dir.join(format!("{name}.js"));
    std::fs::write(&path, script).unwrap();
    let mw = serde_json::json!({"driver": "otto", "pre": [{"name": name, "path": path}]});
    let listen = format!("/{name}/");
    write_api(
        dir,
        name,
        &api_json(name, &listen, &format!("http://{up}"), true, mw),
    );
}

/// Requests whose clients hang up do not pile up behind a busy script: one
/// still waiting for the API's VM thread is dropped with its client, and a
/// job whose client left while it ran stays the thread's only one (the
/// next call waits for it rather than queue behind it). Here 40 clients
/// send a request to a script that runs 0.4 s and hang up, 20 at once and
/// 20 one after another; the script counts its runs, and a client that
/// stays is answered and sees a handful of runs, not 41 (which would also
/// have taken 16 s, past its 5 s `jsvm_timeout`: a 500).
#[test]
fn requests_whose_clients_hung_up_do_not_queue_behind_a_busy_script() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    js_api(
        dir.path(),
        "slow",
        up,
        r#"var runs = 0;
var slow = new TykJS.TykMiddleware.NewMiddleware({});
slow.NewProcessRequest(function (request, session, spec) {
    runs += 1;
    var until = Date.now() + 400;
    while (Date.now() < until) {}
    request.SetHeaders["X-Runs"] = String(runs);
    return slow.ReturnData(request, {});
});
"#,
    );
    let gw = start_gateway_with(config(dir.path()));
    let request = b"GET /slow/ HTTP/1.1\r\nHost: x\r\n\r\n";
    let burst: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(gw.addr).unwrap();
            s.write_all(request).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    drop(burst);
    for _ in 0..20 {
        let mut s = TcpStream::connect(gw.addr).unwrap();
        s.write_all(request).unwrap();
        std::thread::sleep(Duration::from_millis(40));
        drop(s);
    }
    let mut s = TcpStream::connect(gw.addr).unwrap();
    s.write_all(b"GET /slow/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s).0, 200, "the client that stayed");
    let seen = rec.last();
    let runs: usize = seen.headers["x-runs"].to_str().unwrap().parse().unwrap();
    assert!(
        (1..=10).contains(&runs),
        "the script ran {runs} times for 40 requests whose clients left and 1 that stayed"
    );
    gw.stop();
}

/// A runaway (a catastrophic regex on 28 `a`s, ~6.6 s in a debug build
/// here, 3 times the timeout: one native step that no
/// interpreter budget reaches, so its VM thread is abandoned at its
/// deadline and runs on at nice 19 until the step ends) whose client
/// hung up still holds its thread until that deadline, not the next
/// request's: the next call waits for it as the thread's one job, gets a
/// new thread when it is abandoned, and is answered, also after a call
/// that waited for the runaway hung up in turn. (Put in the thread's inbox
/// behind the runaway, it waited until its own deadline: a 500.)
#[test]
fn the_next_request_does_not_wait_behind_a_runaway_whose_client_left() {
    let (up, _rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    js_api(
        dir.path(),
        "runaway",
        up,
        r#"var runaway = new TykJS.TykMiddleware.NewMiddleware({});
runaway.NewProcessRequest(function (request, session, spec) {
    if (request.Headers["X-Hang"]) { /^(a+)+$/.test(new Array(29).join("a") + "!"); }
    return runaway.ReturnData(request, {});
});
"#,
    );
    let gw = start_gateway_with(GatewayConfig {
        jsvm_timeout: Duration::from_secs(2),
        ..config(dir.path())
    });
    let mut hang = TcpStream::connect(gw.addr).unwrap();
    hang.write_all(b"GET /runaway/ HTTP/1.1\r\nHost: x\r\nX-Hang: 1\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(hang);
    // A request that waits for the runaway and hangs up too: the runaway
    // is still the thread's one job for the next call.
    std::thread::sleep(Duration::from_millis(200));
    let mut gives_up = TcpStream::connect(gw.addr).unwrap();
    gives_up
        .write_all(b"GET /runaway/ HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(gives_up);
    // Sent well before the runaway's deadline; its own ends 2 s later.
    std::thread::sleep(Duration::from_millis(300));
    let mut s = TcpStream::connect(gw.addr).unwrap();
    s.write_all(b"GET /runaway/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s).0, 200);
    gw.stop();
}

#[test]
fn a_stalled_request_body_gets_408_and_a_broken_chunked_body_400() {
    let (up, _rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(GatewayConfig {
        client_body_timeout: Duration::from_millis(300),
        ..config(dir.path())
    });
    // Promises 100 bytes, sends 10, then waits.
    let mut s = TcpStream::connect(gw.addr).unwrap();
    s.write_all(b"POST /plain/ HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = vec![0u8; 12];
    s.read_exact(&mut got)
        .expect("no answer to a stalled request body");
    assert_eq!(status_of(&String::from_utf8_lossy(&got)), 408);

    // A chunk size that is not hex.
    let resp = raw(
        gw.addr,
        "POST /plain/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    );
    assert_eq!(status_of(&resp), 400, "{resp}");
    gw.stop();
}

/// Request bodies held whole for middleware are bounded together
/// (`--max-buffered-bodies`, here 1 MiB), not only one by one: a slow
/// upload holding 700 KiB and a 400 KiB one cannot both be held, and the
/// one whose bytes would pass the bound gets 503 as they arrive (the
/// other one, when the gateway was still reading the slow one: that race
/// made this test fail one run in five when it assumed the slow one was
/// read first); once the first has ended, a body of the same size is
/// served. Each was
/// bounded only by its own 32 MiB: a thousand slow uploads could hold
/// 32 GB.
#[test]
fn request_bodies_held_for_middleware_are_bounded_together() {
    let (up, _rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    js_api(
        dir.path(),
        "held",
        up,
        "var held = new TykJS.TykMiddleware.NewMiddleware({});\n\
         held.NewProcessRequest(function (request, session) {\n\
             request.SetHeaders['X-Len'] = String(request.Body.length);\n\
             return held.ReturnData(request, {});\n\
         });",
    );
    let gw = start_gateway_with(GatewayConfig {
        max_buffered_bodies: 1 << 20,
        ..config(dir.path())
    });
    let post = |len: usize| {
        format!(
            "POST /held/ HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        )
    };
    // The slow upload: 700 of its 800 KiB, then a pause.
    let mut slow = TcpStream::connect(gw.addr).unwrap();
    slow.write_all(post(800 << 10).as_bytes()).unwrap();
    slow.write_all(&vec![b'a'; 700 << 10]).unwrap();
    // Another body, until the two pass the bound together. The gateway
    // may still be reading the slow one when the other arrives: then
    // either is the one that would pass it, and gets the 503 (the slow
    // one's comes before its body's end, and its connection closes).
    let other = format!("{}{}", post(400 << 10), "b".repeat(400 << 10));
    let refused_503 = |resp: &str| {
        assert_eq!(status_of(resp), 503, "{resp}");
        assert!(resp.contains(r#""error": "Service Unavailable""#), "{resp}");
    };
    slow.set_nonblocking(true).unwrap();
    let mut slow_answer = Vec::new();
    let mut slow_refused = false;
    let refused = (0..50).any(|_| {
        let resp = raw(gw.addr, &other);
        if status_of(&resp) == 503 {
            refused_503(&resp);
            return true;
        }
        assert_eq!(status_of(&resp), 200, "{resp}");
        // Was the slow one refused instead? (Read to its close.)
        let mut buf = [0u8; 4096];
        loop {
            match slow.read(&mut buf) {
                Ok(0) => {
                    slow_refused = true;
                    return true;
                }
                Ok(n) => slow_answer.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        false
    });
    assert!(refused, "a body past the bound was held");
    slow.set_nonblocking(false).unwrap();
    if slow_refused {
        refused_503(&String::from_utf8_lossy(&slow_answer));
    } else {
        // The slow upload ends, and is served.
        slow.write_all(&vec![b'a'; 100 << 10]).unwrap();
        let mut got = String::new();
        slow.read_to_string(&mut got).unwrap();
        assert_eq!(status_of(&got), 200, "{got}");
    }
    // Its share given back, the other fits.
    let resp = raw(gw.addr, &other);
    assert_eq!(status_of(&resp), 200, "{resp}");
    gw.stop();
}

/// A chunked upload of many tiny chunks reaches the upstream in a few
/// large ones: the data frames already read are joined (up to 64 KiB)
/// before they are sent. Each 1-byte chunk used to become its own chunk
/// and `writev` upstream (~6.5 µs of gateway CPU per 6 bytes the client
/// sent). The bytes, and their order, are the client's.
#[test]
fn tiny_chunks_of_an_upload_reach_the_upstream_joined() {
    let (up, _stats) = raw_upstream(|mut s| {
        while let Some(head) = read_request_head(&mut s) {
            assert!(
                head.to_ascii_lowercase()
                    .contains("transfer-encoding: chunked"),
                "{head}"
            );
            let (mut chunks, mut body) = (0, Vec::new());
            loop {
                let size = usize::from_str_radix(line(&mut s).trim(), 16).unwrap();
                if size == 0 {
                    while !line(&mut s).is_empty() {}
                    break;
                }
                let mut data = vec![0; size + 2];
                s.read_exact(&mut data).unwrap();
                body.extend_from_slice(&data[..size]);
                chunks += 1;
            }
            let text = format!("{chunks} {}", String::from_utf8_lossy(&body));
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
                text.len()
            );
            if s.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(config(dir.path()));
    let sent: String = (0..2_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let mut request = String::from("POST /plain/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    for c in sent.chars() {
        request.push_str(&format!("1\r\n{c}\r\n"));
    }
    request.push_str("0\r\n\r\n");
    let resp = raw(gw.addr, &request);
    assert_eq!(status_of(&resp), 200, "{resp}");
    let (_, body) = resp.split_once("\r\n\r\n").unwrap();
    let (chunks, got) = body.split_once(' ').unwrap();
    assert_eq!(got, sent);
    let chunks: usize = chunks.parse().unwrap();
    assert!(
        chunks <= 100,
        "2,000 one-byte chunks reached the upstream as {chunks}"
    );
    gw.stop();
}

/// One line from `s`, without its CRLF.
fn line(s: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n") {
        s.read_exact(&mut byte).unwrap();
        buf.push(byte[0]);
    }
    buf.truncate(buf.len() - 2);
    String::from_utf8(buf).unwrap()
}

/// `--upstream-timeout` times the upstream, not the client: it starts when
/// the upstream has the whole request (it used to start with the upload,
/// so an upload longer than it got a 504 while it was still going). A
/// client that pauses gets the client body timeout's 408; an upstream
/// that stops taking the body gets the 504 (nginx's `proxy_send_timeout`).
#[test]
fn the_upstream_timeout_starts_when_the_upstream_has_the_body() {
    let (up, rec) = recorder();
    let (deaf, _stats) = raw_upstream(|mut s| {
        // Takes the head, never the body, never answers.
        let _ = read_request_head(&mut s);
        std::thread::sleep(Duration::from_secs(30));
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    write_api(
        dir.path(),
        "deaf",
        &api_json(
            "deaf",
            "/deaf/",
            &format!("http://{deaf}"),
            true,
            Value::Null,
        ),
    );
    let gw = start_gateway_with(GatewayConfig {
        upstream_timeout: Duration::from_millis(500),
        client_body_timeout: Duration::from_millis(1500),
        ..config(dir.path())
    });

    // An upload taking ~2 s, four times the upstream timeout, in 20 parts.
    let mut s = TcpStream::connect(gw.addr).unwrap();
    s.write_all(b"POST /plain/ HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n")
        .unwrap();
    for i in 0..20u8 {
        std::thread::sleep(Duration::from_millis(100));
        s.write_all(&[b'a' + i]).unwrap();
    }
    assert_eq!(read_response(&mut s).0, 200);
    assert_eq!(&rec.last().body[..], b"abcdefghijklmnopqrst");

    // A client that stops half way: its own timeout's 408, not a 504.
    let mut s = TcpStream::connect(gw.addr).unwrap();
    s.write_all(b"POST /plain/ HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        .unwrap();
    assert_eq!(read_response(&mut s).0, 408);

    // An upstream that stops taking the body: 504.
    let mut s = TcpStream::connect(gw.addr).unwrap();
    let len = 64 << 20;
    s.write_all(
        format!("POST /deaf/ HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut w = s.try_clone().unwrap();
    std::thread::spawn(move || {
        let part = vec![b'z'; 1 << 16];
        for _ in 0..len / part.len() {
            if w.write_all(&part).is_err() {
                return;
            }
        }
    });
    assert_eq!(read_response(&mut s).0, 504);
    // Given up, the exchange lets go of both connections: the client's
    // (its body half sent, it cannot carry another request) closes, and
    // the upstream's is not left writing (it held the client's until the
    // upstream closed, and a shutdown waited for it).
    assert!(closed_by_peer(&mut s, Duration::from_secs(10)));
    gw.stop();
}

/// Each pooled upstream connection times its exchanges with one timer of
/// its own, moved to the next exchange's deadline. A connection whose timer
/// went off while it sat idle in the pool is reused and answers (the timer
/// is armed again, not left fired: no 504 for a quick answer), and a slow
/// answer on a reused connection still gets the 504.
#[test]
fn the_upstream_timeout_holds_on_reused_connections_whose_timer_went_off() {
    let (up, stats) = raw_upstream(|mut s| {
        while let Some(head) = read_request_head(&mut s) {
            if head.contains("/slow") {
                std::thread::sleep(Duration::from_secs(3));
            }
            let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            if s.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/up/", up);
    let gw = start_gateway_with(GatewayConfig {
        upstream_timeout: Duration::from_millis(300),
        ..config(dir.path())
    });
    for round in 0..3 {
        assert_eq!(get(gw.addr, "/up/fast").status, 200, "round {round}");
        // Longer than the upstream timeout: the connection's timer goes
        // off while the connection waits in the pool.
        std::thread::sleep(Duration::from_millis(700));
    }
    assert_eq!(
        stats.accepted.load(Ordering::SeqCst),
        1,
        "the idle connection was not reused"
    );
    let slow = get(gw.addr, "/up/slow");
    assert_eq!(slow.status, 504, "{}", slow.text());
    // Given up on, that connection is not reused: the next goes on a new one.
    assert_eq!(get(gw.addr, "/up/fast").status, 200);
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 2);
    gw.stop();
}

/// A client that stops reading a large response: its connection is closed
/// after `--client-send-timeout` without a byte taken (nginx's
/// `send_timeout`), and with it the upstream's the response came from.
/// Before, both were held for as long as the client kept the socket open.
/// On the gateway's own HTTP/1 code and on hyper's.
#[test]
fn a_client_that_stops_reading_is_closed_after_the_send_timeout() {
    for client_http1 in [ClientHttp1::Own, ClientHttp1::Hyper] {
        let upstream_gave_up = Arc::new(AtomicUsize::new(0));
        let gave_up = upstream_gave_up.clone();
        let (up, _stats) = raw_upstream(move |mut s| {
            let _ = read_request_head(&mut s);
            let len = 256 << 20;
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n");
            if s.write_all(head.as_bytes()).is_err() {
                return;
            }
            let part = vec![b'r'; 1 << 16];
            for _ in 0..len / part.len() {
                if s.write_all(&part).is_err() {
                    // The gateway closed its side: it gave the response up.
                    gave_up.fetch_add(1, Ordering::SeqCst);
                    return;
                }
            }
        });
        let dir = tempfile::tempdir().unwrap();
        plain_api(dir.path(), "/plain/", up);
        let gw = start_gateway_with(GatewayConfig {
            client_send_timeout: Duration::from_millis(300),
            client_http1,
            ..config(dir.path())
        });
        let mut s = TcpStream::connect(gw.addr).unwrap();
        s.write_all(b"GET /plain/big HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        // Never read: wait for the gateway to give up on the client.
        assert!(
            eventually(Duration::from_secs(20), || upstream_gave_up
                .load(Ordering::SeqCst)
                == 1),
            "{client_http1:?}: the gateway still holds a response nobody reads"
        );
        // What the socket had buffered, then the end.
        assert!(
            closed_by_peer(&mut s, Duration::from_secs(10)),
            "{client_http1:?}"
        );
        gw.stop();
    }
}

#[test]
fn heads_nginx_refuses_get_400_and_never_reach_the_upstream() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let mut api = api_json("p", "/plain/", &format!("http://{up}"), true, Value::Null);
    api["proxy"]["preserve_host_header"] = true.into();
    write_api(dir.path(), "p", &api);
    let gw = start_gateway_with(config(dir.path()));
    // Each is the connection's last answer, as in Go and nginx: the
    // request after it is never read (a Host error kept it open).
    let next = "GET /plain/after HTTP/1.1\r\nHost: a\r\n\r\n";
    for (what, request) in [
        (
            "two Host headers",
            format!("GET /plain/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n{next}"),
        ),
        (
            "no Host on HTTP/1.1",
            format!("GET /plain/ HTTP/1.1\r\n\r\n{next}"),
        ),
        (
            "a % that starts no escape",
            format!("GET /plain/%zz HTTP/1.1\r\nHost: a\r\n\r\n{next}"),
        ),
        (
            "two different Content-Lengths",
            format!("POST /plain/ HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab{next}"),
        ),
    ] {
        let resp = raw(gw.addr, &request);
        assert_eq!(status_of(&resp), 400, "{what}: {resp}");
        assert_eq!(resp.matches("HTTP/1.1 ").count(), 1, "{what}: {resp}");
    }
    assert_eq!(rec.count(), 0, "a refused request reached the upstream");

    // HTTP/1.0 needs no Host.
    let resp = raw(gw.addr, "GET /plain/ HTTP/1.0\r\n\r\n");
    assert_eq!(status_of(&resp), 200, "{resp}");

    // Content-Length + Transfer-Encoding: refused, the connection closes
    // after the answer, nothing is smuggled (more in adversarial_wire.rs).
    let resp = raw(
        gw.addr,
        "POST /plain/a HTTP/1.1\r\nHost: a\r\nContent-Length: 50\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /plain/smuggled HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert_eq!(status_of(&resp), 400, "{resp}");
    assert!(
        rec.requests().iter().all(|r| !r.uri.contains("smuggled")),
        "a smuggled request reached the upstream: {:?}",
        rec.requests()
    );
    gw.stop();
}

// ---------------------------------------------------------------- paths

#[test]
fn dot_segments_redirect_as_tyks_router_and_never_reach_the_upstream() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "pub",
        &api_json(
            "pub",
            "/pub/",
            &format!("http://{up}/public"),
            true,
            Value::Null,
        ),
    );
    let gw = start_gateway_with(config(dir.path()));
    for (method, path, location) in [
        ("GET", "/pub/../admin", "/admin"),
        ("GET", "/pub/%2e%2e/admin", "/admin"),
        ("GET", "/pub/%2E%2E/admin?x=1", "/admin?x=1"),
        ("GET", "/pub/..%2fadmin", "/admin"),
        ("GET", "/pub/a/./b", "/pub/a/b"),
        ("GET", "//pub/x", "/pub/x"),
        ("GET", "/pub//x/", "/pub/x/"),
        ("GET", "/pub/a%2F%2Fb", "/pub/a/b"),
        // gorilla/mux redirects every method.
        ("POST", "/pub/../admin", "/admin"),
        ("DELETE", "/pub/a/../../admin", "/admin"),
    ] {
        let got = send(gw.addr, method, path, &[], b"");
        assert_eq!(got.status, 301, "{method} {path}");
        assert_eq!(got.headers["location"], location, "{method} {path}");
    }
    assert_eq!(
        rec.count(),
        0,
        "a dot segment reached the upstream: {:?}",
        rec.requests()
    );
    // A clean path still goes through, unreserved escapes decoded.
    assert_eq!(get(gw.addr, "/%70ub/x").status, 200);
    assert_eq!(rec.last().uri, "/public/x");
    gw.stop();
}

/// A slash escape (`%2F`) is a `/` for matching listen paths, as for
/// Tyk's router: `/guarded%2Fx` is the guarded API's, whose middleware
/// fails closed, and never the `/` catch-all's. (Routed on the raw form, it
/// fell through to the catch-all, whose upstream decoded it back to
/// `/guarded/x`: the middleware was skipped.) Past the listen path the
/// escape goes upstream as the client wrote it.
#[test]
fn a_slash_escape_cannot_dodge_a_listen_path() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    js_api(
        dir.path(),
        "guarded",
        up,
        "var guarded = new TykJS.TykMiddleware.NewMiddleware({});\n\
         guarded.NewProcessRequest(function (request, session) {\n\
             throw new Error('denied');\n\
         });",
    );
    write_api(
        dir.path(),
        "open",
        &api_json(
            "open",
            "/open/v1/",
            &format!("http://{up}/o"),
            true,
            Value::Null,
        ),
    );
    write_api(
        dir.path(),
        "all",
        &api_json(
            "all",
            "/",
            &format!("http://{up}/catch-all"),
            false,
            Value::Null,
        ),
    );
    let gw = start_gateway_with(config(dir.path()));
    for path in [
        "/guarded%2Fx",
        "/guarded%2fx/y",
        "/guarded%2F",
        "/%67uarded%2Fx",
    ] {
        let got = get(gw.addr, path);
        assert_eq!(got.status, 500, "{path}: {}", got.text());
    }
    assert_eq!(rec.count(), 0, "reached an upstream: {:?}", rec.requests());
    for (path, upstream) in [
        ("/open%2Fv1/a", "/o/a"),
        ("/open%2fv1%2Fa%2Fb", "/o/a%2Fb"),
        ("/open/v1/a%2Fb", "/o/a%2Fb"),
        ("/other%2Fx", "/catch-all/other%2Fx"),
    ] {
        let got = get(gw.addr, path);
        assert_eq!(got.status, 200, "{path}: {}", got.text());
        assert_eq!(rec.last().uri, upstream, "{path}");
    }
    gw.stop();
}

/// A path a middleware writes loses its dot segments before the upstream,
/// encoded ones too: `%2e%2e` went through as written, and an upstream
/// that decodes it climbed out of the target's base path.
#[test]
fn a_rewritten_path_loses_encoded_dot_segments_too() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    js_api(
        dir.path(),
        "rw",
        up,
        "var rw = new TykJS.TykMiddleware.NewMiddleware({});\n\
         rw.NewProcessRequest(function (request, session) {\n\
             request.URL = request.Headers['X-To'][0];\n\
             return rw.ReturnData(request, {});\n\
         });",
    );
    let gw = start_gateway_with(config(dir.path()));
    for (to, upstream) in [
        ("/rw/a/%2e%2e/%2e%2e/admin", "/admin"),
        ("/rw/a/%2E%2E/x/..%2F..%2fadmin?k=1", "/admin?k=1"),
        ("/rw/a%2F..%2F..%2Fadmin", "/admin"),
        ("/rw/a/b%20c/%2e%2e/d", "/a/d"),
        ("/rw/a/b%20c", "/a/b%20c"),
    ] {
        let got = send(gw.addr, "GET", "/rw/", &[("x-to", to)], b"");
        assert_eq!(got.status, 200, "{to}: {}", got.text());
        assert_eq!(rec.last().uri, upstream, "{to}");
    }
    gw.stop();
}

#[test]
fn no_spelling_of_the_control_api_reaches_a_catch_all_upstream() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/", up);
    let gw = start_gateway_with(GatewayConfig {
        secret: Some("s3cret".into()),
        ..config(dir.path())
    });
    for (path, status) in [
        ("/tyk/apis", 403),
        ("//tyk/apis", 301),
        ("/x/../tyk/", 301),
        ("/tyk/%2e%2e/tyk/apis", 301),
        ("/TYK/apis", 403),
        ("/Tyk/stats", 403),
        ("/%74yk/apis", 403),
        ("/%54%59%4B/apis", 403),
        ("/tyk%2Fapis", 403),
        ("/tyk%2fstats", 403),
        ("/tyk", 403),
    ] {
        let got = get(gw.addr, path);
        assert_eq!(got.status, status, "{path}: {}", got.text());
    }
    let key = [("x-tyk-authorization", "s3cret")];
    assert_eq!(send(gw.addr, "GET", "/%74yk/apis", &key, b"").status, 200);
    assert_eq!(send(gw.addr, "GET", "/TYK/apis", &key, b"").status, 404);
    assert_eq!(rec.count(), 0, "{:?}", rec.requests());
    // Everything else still reaches the catch-all API.
    assert_eq!(get(gw.addr, "/tykx/a").status, 200);
    assert_eq!(rec.count(), 1);
    gw.stop();
}

#[test]
fn an_api_whose_target_is_the_gateway_itself_gets_508() {
    // The definition must name the gateway's port before it starts.
    let listeners = hold_port(1);
    let port = listeners.local_addr().port();
    let dir = tempfile::tempdir().unwrap();
    for (name, target) in [
        ("self", format!("http://127.0.0.1:{port}/loop")),
        ("localhost", format!("http://localhost:{port}")),
    ] {
        write_api(
            dir.path(),
            name,
            &api_json(name, &format!("/{name}/"), &target, true, Value::Null),
        );
    }
    let gw = start_gateway_held(listeners, config(dir.path()));
    for path in ["/self/", "/localhost/x"] {
        let got = get(gw.addr, path);
        assert_eq!(got.status, 508, "{path}");
        assert_eq!(got.json()["error"], "Loop Detected");
    }
    assert_eq!(get(gw.addr, "/hello").status, 200);
    gw.stop();
}

// ---------------------------------------------------------------- upstream

/// An upstream at its keep-alive limit: answers the first request on each
/// connection (keeping it open), then reads the next one and closes without
/// a word.
fn keepalive_limit_upstream(seen: Arc<AtomicUsize>) -> (SocketAddr, RawUpstream) {
    raw_upstream(move |mut s| {
        if read_request(&mut s).is_none() {
            return;
        }
        seen.fetch_add(1, Ordering::SeqCst);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        if read_request(&mut s).is_some() {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        // Dropping `s` closes the connection.
    })
}

#[test]
fn a_pooled_connection_the_upstream_closed_is_retried_once_when_safe() {
    let seen = Arc::new(AtomicUsize::new(0));
    let (up, _) = keepalive_limit_upstream(seen.clone());
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(config(dir.path()));
    let mut failed = 0;
    for i in 0..40 {
        let got = get(gw.addr, &format!("/plain/{i}"));
        if got.status != 200 {
            failed += 1;
        }
    }
    assert_eq!(failed, 0, "GETs on stale pooled connections failed");

    // A POST is not idempotent: it was written, the upstream may have acted
    // on it, so it is not sent twice; the client gets Tyk's error instead.
    let before = seen.load(Ordering::SeqCst);
    let mut posts_failed = 0;
    for _ in 0..6 {
        let got = send(gw.addr, "POST", "/plain/p", &[], b"body");
        if got.status != 200 {
            assert_eq!(got.text(), TYK_PROXY_ERROR);
            posts_failed += 1;
        }
    }
    assert_eq!(
        seen.load(Ordering::SeqCst) - before,
        6,
        "a POST reached the upstream twice"
    );
    assert!(posts_failed > 0, "no POST met a stale connection");
    gw.stop();
}

#[test]
fn the_idle_upstream_pool_is_bounded_per_worker() {
    // A slow upstream, so a burst needs many connections at once.
    let (up, stats) = raw_upstream(|mut s| {
        while read_request(&mut s).is_some() {
            std::thread::sleep(Duration::from_millis(100));
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(GatewayConfig {
        upstream_keepalive: 4,
        ..config(dir.path())
    });
    let burst: Vec<_> = (0..60)
        .map(|_| {
            let addr = gw.addr;
            std::thread::spawn(move || raw(addr, "GET /plain/ HTTP/1.0\r\n\r\n"))
        })
        .collect();
    for t in burst {
        assert_eq!(status_of(&t.join().unwrap()), 200);
    }
    assert!(
        stats.accepted.load(Ordering::SeqCst) > 4,
        "the burst never needed more than 4 connections"
    );
    assert!(
        eventually(Duration::from_secs(10), || stats
            .open
            .load(Ordering::SeqCst)
            <= 4),
        "{} upstream connections kept idle (bound 4)",
        stats.open.load(Ordering::SeqCst)
    );
    gw.stop();
}

#[test]
fn a_response_framed_two_ways_is_a_bad_upstream_answer() {
    let (up, _) = raw_upstream(|mut s| {
        if read_request(&mut s).is_some() {
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n14\r\n01234567890123456789\r\n0\r\n\r\n",
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(config(dir.path()));
    let got = get(gw.addr, "/plain/");
    assert_eq!(got.status, 500);
    assert_eq!(got.text(), TYK_PROXY_ERROR);
    gw.stop();
}

#[test]
fn an_upstream_that_stalls_mid_body_is_cut_off_after_the_read_timeout() {
    let (up, _) = raw_upstream(|mut s| {
        if read_request(&mut s).is_some() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
            // Then nothing, for longer than any test waits.
            std::thread::sleep(Duration::from_secs(60));
        }
    });
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    let gw = start_gateway_with(GatewayConfig {
        upstream_read_timeout: Duration::from_millis(300),
        ..config(dir.path())
    });
    let mut s = TcpStream::connect(gw.addr).unwrap();
    s.write_all(b"GET /plain/ HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert!(
        closed_by_peer(&mut s, Duration::from_secs(10)),
        "the client's connection was held open by a stalled upstream"
    );
    assert_eq!(get(gw.addr, "/hello").status, 200);
    gw.stop();
}

// ---------------------------------------------------------------- shutdown

/// What one client request came to during a shutdown.
#[derive(Debug, PartialEq)]
enum Outcome {
    Answered,
    /// Refused at connect: the listener was closed (allowed).
    Refused,
    /// Connected and sent, then closed or reset without a whole answer.
    Lost(String),
}

fn one_http10_request(addr: SocketAddr) -> Outcome {
    let mut s = match TcpStream::connect(addr) {
        Ok(s) => s,
        Err(_) => return Outcome::Refused,
    };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    if let Err(e) = s.write_all(b"GET /plain/ HTTP/1.0\r\n\r\n") {
        return Outcome::Lost(format!("write: {e}"));
    }
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) if out.starts_with(b"HTTP/1.0 200") && out.ends_with(b"recorded") => {
            Outcome::Answered
        }
        Ok(_) => Outcome::Lost(String::from_utf8_lossy(&out).into_owned()),
        Err(e) => Outcome::Lost(format!("read: {e}")),
    }
}

#[test]
fn sigterm_under_load_answers_every_request_it_accepted() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    // Each request spends 20 ms at the upstream: at the signal, many are in
    // flight and more are waiting in the accept queue.
    let (up, rec) = recorder_with_delay(Duration::from_millis(20));
    let dir = tempfile::tempdir().unwrap();
    plain_api(dir.path(), "/plain/", up);
    // GATEWAY_BIN runs the same attack against another build (before/after).
    let bin = std::env::var("GATEWAY_BIN").unwrap_or(env!("CARGO_BIN_EXE_gateway").into());
    let mut child = common::dies_with_test(&mut Command::new(bin))
        .args(["--apis", dir.path().to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--threads", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line
        .trim()
        .trim_start_matches("gateway listening on ")
        .parse()
        .unwrap();

    // 48 clients, each a new connection per request (ab's default), until
    // refused or 400 requests each.
    let clients: Vec<_> = (0..48)
        .map(|_| {
            std::thread::spawn(move || {
                let mut outcomes = Vec::new();
                for _ in 0..400 {
                    let o = one_http10_request(addr);
                    let refused = o == Outcome::Refused;
                    outcomes.push(o);
                    if refused {
                        break;
                    }
                }
                outcomes
            })
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(30), || rec.count() >= 200),
        "the load never got going"
    );
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let outcomes: Vec<Outcome> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let status = child.wait().unwrap();
    let answered = outcomes.iter().filter(|o| **o == Outcome::Answered).count();
    let lost: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Lost(_)))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} requests lost, e.g. {:?}",
        lost.len(),
        outcomes.len(),
        &lost[..lost.len().min(3)]
    );
    assert!(answered >= 200, "{answered} answered");
    assert!(status.success(), "{status}");
}

/// An upstream body held whole for response middleware counts towards
/// `--max-buffered-bodies` (here 12 MiB) until the client has been sent
/// it: a client that stops reading an 8 MiB answer still holds its 8 MiB,
/// so a second one gets 503; once the first has read its answer, the
/// second is served. Response bodies were bounded only one by one (32 MiB
/// each): a thousand clients that never read could hold 32 GB.
#[test]
fn response_bodies_held_for_response_middleware_count_until_sent() {
    const BODY: usize = 8 << 20;
    let (up, _stats) = raw_upstream(|mut s| {
        while read_request(&mut s).is_some() {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {BODY}\r\n\r\n");
            if s.write_all(head.as_bytes()).is_err() || s.write_all(&vec![b'r'; BODY]).is_err() {
                return;
            }
        }
    });
    let lib = &common::native::plugins().test;
    let dir = tempfile::tempdir().unwrap();
    let mut def = common::native::native_api("resp", "/resp/", &up.to_string(), &[], &[]);
    def["custom_middleware"]["response"] =
        serde_json::json!([{"name": "Noop", "path": lib.to_str().unwrap()}]);
    write_api(dir.path(), "resp", &def);
    let gw = start_gateway_with(GatewayConfig {
        max_buffered_bodies: 12 << 20,
        ..config(dir.path())
    });
    let request = "GET /resp/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    // The reader that stops: a small receive window, so the kernel's
    // buffers on both sides take a few MiB of the 8 at most.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&gw.addr.into()).unwrap();
    let mut stalled: TcpStream = socket.into();
    stalled.write_all(request.as_bytes()).unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut first = [0u8; 12];
    stalled.read_exact(&mut first).unwrap();
    assert_eq!(
        &first,
        b"HTTP/1.1 200",
        "{}",
        String::from_utf8_lossy(&first)
    );
    // The stalled answer holds its share: another gets 503.
    let resp = raw(gw.addr, request);
    assert_eq!(status_of(&resp), 503, "{}", &resp[..resp.len().min(300)]);
    assert!(resp.contains(r#""error": "Service Unavailable""#), "{resp}");
    // Read to the end, it gives the share back.
    let mut rest = Vec::new();
    stalled.read_to_end(&mut rest).unwrap();
    assert_eq!(rest.iter().filter(|&&b| b == b'r').count(), BODY);
    let served = eventually(Duration::from_secs(10), || {
        let resp = raw(gw.addr, request);
        status_of(&resp) == 200 && resp.len() > BODY
    });
    assert!(served, "the share of an answer sent was not given back");
    gw.stop();
}
