//! Runs through the library against purpose-built servers: counts, each
//! failure class, keep-alive, -t, --rate and the checks.

mod common;

use std::sync::atomic::Ordering;

use clap::Parser;
use common::{Mode, Server};
use loadgen::cli::Args;
use loadgen::{RunConfig, RunResult, Summary};

fn config(args: &[&str]) -> RunConfig {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    Args::try_parse_from(argv).unwrap().into_config().unwrap()
}

fn run(args: &[&str]) -> (RunConfig, RunResult, Summary) {
    let cfg = config(args);
    let res = loadgen::run(&cfg, std::future::pending(), None).unwrap();
    let sum = Summary::new(&cfg, &res);
    (cfg, res, sum)
}

const HELLO: Mode = Mode::Ok {
    status: 200,
    body: "hello",
};

#[test]
fn exact_count_without_keepalive_opens_one_connection_per_request() {
    let srv = Server::start(HELLO);
    let (_, _, s) = run(&["-n", "137", "-c", "5", &srv.url("/x")]);
    assert_eq!(s.complete_requests, 137);
    assert_eq!(s.failed_requests.total, 0);
    assert_eq!(srv.requests.load(Ordering::SeqCst), 137);
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 137);
    assert_eq!(s.document_length, 5);
    assert_eq!(s.html_transferred_bytes, 137 * 5);
    assert_eq!(s.server_software.as_deref(), Some("testsrv"));
    assert_eq!(s.keepalive_requests, 0);
    assert_eq!(s.status_codes.get(&200), Some(&137));
}

#[test]
fn keepalive_reuses_one_connection_per_concurrent_client() {
    let srv = Server::start(HELLO);
    let (_, _, s) = run(&["-n", "100", "-c", "4", "-k", &srv.url("/")]);
    assert_eq!(s.complete_requests, 100);
    assert_eq!(s.failed_requests.total, 0);
    assert_eq!(srv.requests.load(Ordering::SeqCst), 100);
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 4);
    // ab's count: every response that announced keep-alive, the first on
    // each connection included (not only the 96 sent on reused ones).
    assert_eq!(s.keepalive_requests, 100);
    // Reused connections have no connect phase.
    assert_eq!(s.connection_times_ms.connect.median, 0.0);
}

#[test]
fn refused_connections_after_the_server_stops_listening_are_connect_failures() {
    let srv = Server::start_limited(HELLO, Some(3));
    let (_, _, s) = run(&["-n", "10", "-c", "1", &srv.url("/")]);
    assert_eq!(s.complete_requests, 10);
    assert_eq!(s.failed_requests.connect, 7);
    assert_eq!(s.failed_requests.total, 7);
    assert!(s
        .failed_requests
        .errors
        .keys()
        .any(|k| k.starts_with("connect:")));
}

#[test]
fn an_unreachable_target_is_an_error_not_a_report() {
    let dead = common::DeadPort::new();
    let port = dead.port();
    let cfg = config(&["-n", "5", &format!("http://127.0.0.1:{port}/")]);
    let err = loadgen::run(&cfg, std::future::pending(), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot connect to 127.0.0.1"), "{err}");
}

#[test]
fn a_server_closing_before_answering_is_a_receive_failure() {
    let srv = Server::start(Mode::CloseEarly);
    let (_, _, s) = run(&["-n", "6", "-c", "2", &srv.url("/")]);
    assert_eq!(s.complete_requests, 6);
    assert_eq!(s.failed_requests.receive, 6);
    assert_eq!(s.failed_requests.total, 6);
}

#[test]
fn a_body_cut_short_is_a_length_failure() {
    let srv = Server::start(Mode::ShortBody);
    let (_, _, s) = run(&["-n", "4", &srv.url("/")]);
    assert_eq!(s.failed_requests.length, 4);
    assert_eq!(s.failed_requests.total, 4);
}

#[test]
fn bodies_of_another_length_than_the_first_are_length_failures() {
    let srv = Server::start(Mode::Varying);
    let (_, _, s) = run(&["-n", "10", "-c", "1", &srv.url("/")]);
    assert_eq!(s.complete_requests, 10);
    assert_eq!(s.failed_requests.length, 5);
    assert_eq!(s.document_length, 5);
}

#[test]
fn non_2xx_is_counted_and_fails_only_when_a_status_is_expected() {
    let srv = Server::start(Mode::Ok {
        status: 503,
        body: "busy",
    });
    let (_, _, s) = run(&["-n", "8", "-c", "2", &srv.url("/")]);
    assert_eq!(s.non_2xx_responses, 8);
    assert_eq!(s.failed_requests.total, 0);

    let (_, _, s) = run(&[
        "-n",
        "8",
        "-c",
        "2",
        "--expect-status",
        "503",
        &srv.url("/"),
    ]);
    assert_eq!(s.failed_requests.total, 0);

    let (_, _, s) = run(&[
        "-n",
        "8",
        "-c",
        "2",
        "--expect-status",
        "200",
        &srv.url("/"),
    ]);
    assert_eq!(s.failed_requests.total, 8);
    assert_eq!(
        s.failed_requests
            .expectations
            .get("status 503, expected 200"),
        Some(&8)
    );
}

#[test]
fn a_missing_body_text_fails_the_check_with_the_reason() {
    let srv = Server::start(HELLO);
    let url = srv.url("/");
    let (_, _, s) = run(&["-n", "5", "-k", "--expect-body-contains", "ell", &url]);
    assert_eq!(s.failed_requests.total, 0);
    let (_, _, s) = run(&["-n", "5", "-k", "--expect-body-contains", "X-Custom", &url]);
    assert_eq!(s.failed_requests.total, 5);
    assert_eq!(
        s.failed_requests
            .expectations
            .get("body does not contain \"X-Custom\""),
        Some(&5)
    );
}

#[test]
fn chunked_responses_are_decoded_and_kept_alive() {
    let srv = Server::start(Mode::Chunked);
    let url = srv.url("/");
    let (_, _, s) = run(&[
        "-n",
        "20",
        "-c",
        "2",
        "-k",
        "--expect-body-contains",
        "hello, world",
        &url,
    ]);
    assert_eq!(s.failed_requests.total, 0, "{:?}", s.failed_requests);
    assert_eq!(s.document_length, 12);
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 2);
}

#[test]
fn post_sends_the_file_body_with_its_content_type() {
    let srv = Server::start(HELLO);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body.json");
    std::fs::write(&file, br#"{"a":1}"#).unwrap();
    let (cfg, _, s) = run(&[
        "-n",
        "3",
        "-p",
        file.to_str().unwrap(),
        "-T",
        "application/json",
        &srv.url("/"),
    ]);
    assert_eq!(s.failed_requests.total, 0);
    let req = String::from_utf8_lossy(&cfg.request).to_string();
    assert!(req.starts_with("POST / HTTP/1.0\r\n"), "{req}");
    assert!(req.contains("Content-Type: application/json\r\n"), "{req}");
    let bodies = srv.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 3);
    assert!(bodies.iter().all(|b| b == br#"{"a":1}"#));
}

#[test]
fn a_time_limit_alone_runs_until_the_deadline() {
    let srv = Server::start(HELLO);
    let (_, res, s) = run(&["-t", "0.3", "-c", "2", "-k", &srv.url("/")]);
    assert!(s.complete_requests > 0);
    assert!(!res.interrupted);
    assert!(res.elapsed.as_secs_f64() >= 0.3);
    // In-flight requests at the deadline are abandoned, never half-counted.
    assert!(srv.requests.load(Ordering::SeqCst) >= s.complete_requests);
}

#[test]
fn rate_mode_paces_requests_and_reports_corrected_percentiles() {
    let srv = Server::start(HELLO);
    let (_, res, s) = run(&["-n", "20", "-c", "2", "--rate", "100", &srv.url("/")]);
    assert_eq!(s.complete_requests, 20);
    // Request 19 is not sent before 190 ms: pacing holds back, never forward.
    assert!(res.elapsed.as_secs_f64() >= 0.19, "{:?}", res.elapsed);
    let corrected = s
        .corrected_percentiles_ms
        .expect("corrected table with --rate");
    assert_eq!(corrected.len(), s.percentiles_ms.len());
    // Measured from the intended time, which is never after the actual send.
    let max = |p: &[loadgen::report::Percentile]| p.last().unwrap().ms;
    assert!(max(&corrected) >= max(&s.percentiles_ms));
}

#[test]
fn the_callers_stop_future_ends_the_run_and_keeps_what_was_done() {
    let srv = Server::start(HELLO);
    let cfg = config(&["-t", "30", "-c", "2", "-k", &srv.url("/")]);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let run = std::thread::spawn(move || {
        loadgen::run(
            &cfg,
            async {
                let _ = rx.await;
            },
            None,
        )
    });
    // Stop once some requests went through (bounded wait: 5 s at most).
    for _ in 0..500 {
        if srv.requests.load(Ordering::SeqCst) >= 10 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    tx.send(()).unwrap();
    let res = run.join().unwrap().unwrap();
    assert!(res.interrupted);
    assert!(res.rec.complete >= 10);
}

#[test]
fn a_stop_future_that_is_already_done_sends_nothing() {
    let srv = Server::start(HELLO);
    let cfg = config(&["-n", "1000", "-c", "2", "-k", &srv.url("/")]);
    let res = loadgen::run(&cfg, std::future::ready(()), None).unwrap();
    assert!(res.interrupted);
    assert_eq!(res.rec.complete, 0);
    assert_eq!(srv.requests.load(Ordering::SeqCst), 0);
}

#[test]
fn progress_reports_requests_and_failures() {
    let srv = Server::start(Mode::Ok {
        status: 500,
        body: "no",
    });
    let cfg = config(&[
        "-n",
        "40",
        "-c",
        "2",
        "--expect-status",
        "200",
        &srv.url("/"),
    ]);
    let mut last = None;
    let mut seen = |p: loadgen::driver::Progress| last = Some(p);
    let res = loadgen::run(&cfg, std::future::pending(), Some(&mut seen)).unwrap();
    let last = last.expect("progress is reported at the end");
    assert_eq!((last.done, last.failed), (40, 40));
    assert_eq!(res.rec.failures.total(), 40);
}

#[test]
fn rate_mode_reports_loadgens_own_send_lag() {
    let srv = Server::start(HELLO);
    let (_, res, s) = run(&["-n", "20", "-c", "2", "--rate", "200", "-k", &srv.url("/")]);
    assert_eq!(res.rec.send_lag.len(), 20);
    let lag = s.send_lag_ms.expect("send lag with --rate");
    // Never sent before its intended time.
    assert!(lag.min >= 0.0 && lag.max >= lag.median);
    let mut text = Vec::new();
    loadgen::report::write_text(&s, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("Send lag:"), "{text}");
    // ab's "Time per request" means nothing when the schedule sets the rate.
    assert!(!text.contains("Time per request"), "{text}");
}

/// A server of its own on `listener`: for each of `conns` connections, reads
/// a request and writes `pieces` of the answer in as many writes, without
/// TCP_NODELAY, `gap` apart; then waits for the client to close.
fn serve_in_pieces(
    listener: std::net::TcpListener,
    conns: usize,
    pieces: &'static [&'static str],
    gap: std::time::Duration,
) -> std::thread::JoinHandle<usize> {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        let mut served = 0;
        for _ in 0..conns {
            let Ok((mut s, _)) = listener.accept() else {
                break;
            };
            let mut req = Vec::new();
            let mut chunk = [0u8; 1024];
            while !req.ends_with(b"\r\n\r\n") {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&chunk[..n]),
                }
            }
            for p in pieces {
                let _ = s.write_all(p.as_bytes());
                std::thread::sleep(gap);
            }
            // Close only after the client has: a close would push out
            // whatever Nagle holds back.
            let _ = s.read(&mut chunk);
            served += 1;
        }
        served
    })
}

#[test]
fn a_response_written_in_small_pieces_is_read_whole() {
    // Head and body in separate small writes, Nagle on at the server: the
    // second piece waits for the client's ACK of the first, which loadgen
    // (whose ACKs are delayed, see `loadgen::connect`) must send at once.
    const PIECES: &[&str] = &[
        "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\n",
        "hello",
        " world",
    ];
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = serve_in_pieces(listener, 12, PIECES, std::time::Duration::ZERO);
    let url = format!("http://127.0.0.1:{port}/");
    let (_, _, s) = run(&["-n", "12", "-c", "3", "-s", "10", &url]);
    assert_eq!(server.join().unwrap(), 12);
    assert_eq!(s.complete_requests, 12);
    assert_eq!(s.failed_requests.total, 0);
    assert_eq!(s.document_length, 11);
    assert_eq!(s.html_transferred_bytes, 12 * 11);
}

#[test]
fn a_handshake_that_ends_after_connect_returns_still_carries_the_request() {
    // A listener whose accept queue is full drops new SYNs: those
    // connections are still being set up when `connect` returns (the kernel
    // retries the SYN after about a second), so their request waits for the
    // handshake instead of going out at once.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    socket.listen(1).unwrap();
    let listener: std::net::TcpListener = socket.into();
    let port = listener.local_addr().unwrap().port();
    const ANSWER: &[&str] = &["HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"];
    let late = std::thread::spawn(move || {
        // Accept only once every connection has sent its SYN.
        std::thread::sleep(std::time::Duration::from_millis(300));
        serve_in_pieces(listener, 6, ANSWER, std::time::Duration::ZERO)
            .join()
            .unwrap()
    });
    let url = format!("http://127.0.0.1:{port}/");
    let (_, _, s) = run(&["-n", "6", "-c", "6", "-s", "20", &url]);
    assert_eq!(late.join().unwrap(), 6);
    assert_eq!(s.complete_requests, 6);
    assert_eq!(s.failed_requests.total, 0, "{:?}", s.failed_requests);
    assert_eq!(s.html_transferred_bytes, 6 * 2);
}
