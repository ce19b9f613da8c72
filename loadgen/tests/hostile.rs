//! loadgen against servers that break HTTP/1 framing on purpose: huge or
//! malformed chunk sizes, endless chunked bodies, interim `1xx` heads, more
//! headers than usual, bodies longer than they say. Each server is a thread
//! of this test on 127.0.0.1:0 that serves a fixed number of connections;
//! each run is bounded by `-n` and `-s`, and waited for at most 60 s.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use clap::Parser;
use loadgen::cli::Args;
use loadgen::{RunConfig, RunResult, Summary};

fn config(args: &[&str]) -> RunConfig {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    Args::try_parse_from(argv).unwrap().into_config().unwrap()
}

/// Runs `cfg` on a thread of its own and waits at most 60 s for it: a
/// run that hangs fails the test instead of hanging it.
fn run_cfg(cfg: RunConfig) -> (RunResult, Summary) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let res = loadgen::run(&cfg, std::future::pending(), None);
        let _ = tx.send(res.map(|r| {
            let s = Summary::new(&cfg, &r);
            (r, s)
        }));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(res) => res.unwrap(),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the run did not end within 60 s"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the run panicked"),
    }
}

fn run(args: &[&str]) -> Summary {
    run_cfg(config(args)).1
}

/// A server for `conns` connections, each on a thread of its own: for every
/// request head read (bodies are not expected), writes `answer(n)`, `n`
/// counting requests over the connection's life from 0, then closes when
/// `close` says so, or waits for the next request. Ends a connection when
/// the client does, or after 10 s without a byte.
fn hostile(
    conns: usize,
    close: bool,
    answer: impl Fn(usize) -> Vec<u8> + Send + Sync + 'static,
) -> String {
    hostile_in_pieces(conns, close, move |n| vec![answer(n)])
}

/// As [`hostile`], the answer written in pieces, 20 ms apart.
fn hostile_in_pieces(
    conns: usize,
    close: bool,
    answer: impl Fn(usize) -> Vec<Vec<u8>> + Send + Sync + 'static,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for _ in 0..conns {
            let Ok((s, _)) = listener.accept() else {
                return;
            };
            let answer = answer.clone();
            std::thread::spawn(move || serve(s, close, &*answer));
        }
    });
    url
}

fn serve(mut s: TcpStream, close: bool, answer: &dyn Fn(usize) -> Vec<Vec<u8>>) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut pending = Vec::new();
    let mut chunk = [0u8; 4096];
    for n in 0.. {
        while !pending.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(k) => pending.extend_from_slice(&chunk[..k]),
            }
        }
        let end = pending.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        pending.drain(..end);
        for (i, piece) in answer(n).iter().enumerate() {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
            if s.write_all(piece).is_err() {
                return;
            }
        }
        if close {
            return;
        }
    }
}

/// A chunked response head followed by `rest`.
fn chunked(rest: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{rest}").into_bytes()
}

/// The distinct failure messages of a run, one string.
fn messages(s: &Summary) -> String {
    format!("{:?}", s.failed_requests.errors)
}

#[test]
fn a_chunk_size_near_u64_max_is_a_chunk_that_never_ends() {
    // Before, `pos + size` wrapped: sizes landing before the chunk's own
    // line looped forever without yielding (no -s, no Ctrl-C), others
    // panicked the connection's task and its count was lost.
    const SIZES: [&str; 4] = [
        "ffffffffffffffec",
        "fffffffffffffffe",
        "ffffffffffffffff",
        "8000000000000000",
    ];
    for size in SIZES {
        let url = hostile(3, true, move |_| {
            chunked(&format!("{size}\r\nhello\r\n0\r\n\r\n"))
        });
        let s = run(&["-n", "3", "-s", "20", &url]);
        assert_eq!(s.complete_requests, 3, "{size}");
        // The server closed inside the chunk: a body cut short.
        assert_eq!(s.failed_requests.length, 3, "{size}: {}", messages(&s));
        assert_eq!(s.failed_requests.total, 3, "{size}");
    }
}

#[test]
fn a_chunked_body_is_read_in_bounded_memory() {
    // 128 MiB of chunked body to the loadgen binary; its peak RSS (the
    // kernel's, from wait4) must stay far below the body's size. Before,
    // the decoder kept every byte of the body in its buffer.
    const MIB: usize = 1024 * 1024;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut req = [0u8; 4096];
        let _ = s.read(&mut req);
        let mut chunk = format!("{MIB:x}\r\n").into_bytes();
        chunk.extend(std::iter::repeat_n(b'x', MIB));
        chunk.extend_from_slice(b"\r\n");
        let _ = s.write_all(&chunked(""));
        for _ in 0..128 {
            if s.write_all(&chunk).is_err() {
                return;
            }
        }
        let _ = s.write_all(b"0\r\n\r\n");
    });
    // Reaped by wait4 below, which std's `wait` would not give the usage of.
    #[allow(clippy::zombie_processes)]
    let mut child = common::dies_with_test(&mut std::process::Command::new(env!(
        "CARGO_BIN_EXE_loadgen"
    )))
    .args(["-n", "1", "-s", "60", "-q", "--json", "-", &url])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, writing into the two locals.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t);
    server.join().unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["failed_requests"]["total"], 0, "{out}");
    assert_eq!(v["document_length"], 128 * MIB, "{out}");
    let peak_mib = usage.ru_maxrss as usize / 1024;
    assert!(peak_mib < 48, "peak RSS {peak_mib} MiB for a 128 MiB body");
}

#[test]
fn chunk_size_lines_and_trailers_are_bounded() {
    let long_line = format!("5;{}\r\nhello\r\n0\r\n\r\n", "e".repeat(8192));
    let url = hostile(2, true, move |_| chunked(&long_line));
    let s = run(&["-n", "2", "-s", "20", &url]);
    assert_eq!(s.failed_requests.exceptions, 2, "{}", messages(&s));
    assert!(
        messages(&s).contains("chunk size line over 4 KiB"),
        "{}",
        messages(&s)
    );

    let trailers = format!(
        "5\r\nhello\r\n0\r\n{}\r\n",
        "X-T: aaaaaaaa\r\n".repeat(6000)
    );
    let url = hostile(2, true, move |_| chunked(&trailers));
    let s = run(&["-n", "2", "-s", "20", &url]);
    assert_eq!(s.failed_requests.exceptions, 2, "{}", messages(&s));
    assert!(
        messages(&s).contains("trailer section over 64 KiB"),
        "{}",
        messages(&s)
    );
}

#[test]
fn framing_that_does_not_add_up_is_an_exception() {
    let cases: [(&str, &[u8], &str); 4] = [
        // Chunk data must end with CRLF; before, any two bytes were skipped.
        (
            "no CRLF after chunk data",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
            "chunk data not followed by CRLF",
        ),
        // A size is hex digits; Rust's from_str_radix took a sign.
        (
            "signed chunk size",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\nhello\r\n0\r\n\r\n",
            "invalid chunk size line",
        ),
        (
            "empty chunk size",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
            "invalid chunk size line",
        ),
        // The last one won before.
        (
            "two Content-Length values",
            b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nContent-Length: 5\r\n\r\nhello world\n",
            "two different Content-Length headers",
        ),
    ];
    for (what, answer, message) in cases {
        let url = hostile(2, true, move |_| answer.to_vec());
        let s = run(&["-n", "2", "-s", "20", &url]);
        assert_eq!(s.failed_requests.exceptions, 2, "{what}: {}", messages(&s));
        assert!(messages(&s).contains(message), "{what}: {}", messages(&s));
    }
    // The same length twice is one length.
    let url = hostile(2, true, |_| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello".to_vec()
    });
    let s = run(&["-n", "2", "-s", "20", &url]);
    assert_eq!(s.failed_requests.total, 0, "{}", messages(&s));
}

#[test]
fn bytes_past_a_kept_alive_response_are_an_exception() {
    // Content-Length 5, then seven more bytes in the same write. Before,
    // the buffer was cleared for the next response and they vanished;
    // they belong to no response, so this one's framing is wrong.
    let url = hostile(4, false, |_| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello world!".to_vec()
    });
    let s = run(&["-n", "4", "-c", "1", "-k", "-s", "20", &url]);
    assert_eq!(s.complete_requests, 4);
    assert_eq!(s.failed_requests.exceptions, 4, "{}", messages(&s));
    assert!(
        messages(&s).contains("response longer than its framing: 7 more bytes"),
        "{}",
        messages(&s)
    );
    // The same after a chunked body.
    let url = hostile(4, false, |_| chunked("5\r\nhello\r\n0\r\n\r\nHTTP/1.1"));
    let s = run(&["-n", "4", "-c", "1", "-k", "-s", "20", &url]);
    assert_eq!(s.failed_requests.exceptions, 4, "{}", messages(&s));
}

#[test]
fn interim_1xx_heads_are_skipped_for_the_final_response() {
    // 100 Continue and 103 Early Hints, then the answer, on kept-alive
    // connections; every other time the final head comes in a later write.
    let url = hostile_in_pieces(2, false, |n| {
        let interim =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n";
        let fin = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        if n % 2 == 0 {
            vec![[&interim[..], &fin[..]].concat()]
        } else {
            vec![interim.to_vec(), fin.to_vec()]
        }
    });
    let s = run(&["-n", "10", "-c", "2", "-k", "-s", "20", &url]);
    assert_eq!(s.failed_requests.total, 0, "{}", messages(&s));
    assert_eq!(s.status_codes.get(&200), Some(&10), "{:?}", s.status_codes);
    assert_eq!(s.document_length, 5);
    assert_eq!(s.html_transferred_bytes, 50);
}

#[test]
fn a_response_with_150_headers_is_read() {
    let url = hostile(2, true, |_| {
        let mut r = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..150 {
            r.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
        }
        r.extend_from_slice(b"Content-Length: 5\r\n\r\nhello");
        r
    });
    let s = run(&["-n", "2", "-s", "20", &url]);
    assert_eq!(s.failed_requests.total, 0, "{}", messages(&s));
    assert_eq!(s.document_length, 5);
}

#[test]
fn a_head_over_64_kib_is_named_so_however_many_lines_it_has() {
    // 10,000 header lines of 1 KB: too many lines too, but its size is
    // what the bound is about (before: "too many headers").
    let url = hostile(1, true, |_| {
        let mut r = b"HTTP/1.1 200 OK\r\n".to_vec();
        for _ in 0..10_000 {
            r.extend_from_slice(b"X-Pad: ");
            r.extend(std::iter::repeat_n(b'a', 1000));
            r.extend_from_slice(b"\r\n");
        }
        r.extend_from_slice(b"Content-Length: 5\r\n\r\nhello");
        r
    });
    let s = run(&["-n", "1", "-s", "20", &url]);
    assert_eq!(s.failed_requests.exceptions, 1, "{}", messages(&s));
    assert!(
        messages(&s).contains("response head over 64 KiB"),
        "{}",
        messages(&s)
    );
    // 300 short lines fit in 64 KiB: that is too many lines.
    let url = hostile(1, true, |_| {
        let mut r = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..300 {
            r.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
        }
        r.extend_from_slice(b"Content-Length: 5\r\n\r\nhello");
        r
    });
    let s = run(&["-n", "1", "-s", "20", &url]);
    assert!(
        messages(&s).contains("more than 256 header lines"),
        "{}",
        messages(&s)
    );
}

#[test]
fn a_time_limit_past_what_a_clock_holds_is_no_deadline() {
    // The bench builds its RunConfig without the command line's bound.
    let url = hostile(3, true, |_| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec()
    });
    let mut cfg = config(&["-n", "3", "-s", "20", &url]);
    cfg.mode = loadgen::config::WorkMode::CountOrDuration(3, Duration::MAX);
    let (_, s) = run_cfg(cfg);
    assert_eq!(s.complete_requests, 3);
    assert_eq!(s.failed_requests.total, 0, "{}", messages(&s));
}

#[test]
fn an_ipv6_host_goes_in_brackets() {
    let Ok(listener) = TcpListener::bind("[::1]:0") else {
        eprintln!("no IPv6 loopback here: skipped");
        return;
    };
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut req = Vec::new();
        let mut chunk = [0u8; 1024];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => req.extend_from_slice(&chunk[..n]),
            }
        }
        let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
        let _ = tx.send(String::from_utf8_lossy(&req).into_owned());
    });
    let s = run(&["-n", "1", "-s", "20", &format!("http://[::1]:{port}/")]);
    assert_eq!(s.failed_requests.total, 0, "{}", messages(&s));
    let req = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(
        req.contains(&format!("\r\nHost: [::1]:{port}\r\n")),
        "{req}"
    );
}

#[test]
fn running_out_of_file_descriptors_names_the_limit_and_c() {
    // loadgen with 64 descriptors asked for 200 connections. The listener
    // never accepts: its backlog (128) completes the handshakes.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_loadgen"));
    common::dies_with_test(&mut cmd);
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 64,
                rlim_max: 64,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd
        .args(["-n", "200", "-c", "200", "-s", "5", "-q", &url])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("open-files limit") && err.contains("ulimit -n") && err.contains("-c 200"),
        "{err}"
    );
    assert!(err.contains("is 64 (hard limit 64)"), "{err}");
    drop(listener);
}

#[test]
fn a_reset_inside_a_chunked_body_on_a_reused_connection_is_a_failure() {
    // The decoder empties its buffer as it goes; a read error then must
    // not pass for "the server closed the idle connection", which is
    // retried silently on a new one.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        // One connection, two requests; a second connection is answered
        // whole, so a silent retry would count no failure at all.
        for conn in 0..2 {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let mut chunk = [0u8; 4096];
            for n in 0..2 {
                if matches!(s.read(&mut chunk), Ok(0) | Err(_)) {
                    break;
                }
                if conn == 0 && n == 1 {
                    let _ = s.write_all(&chunked("5\r\nhel"));
                    std::thread::sleep(Duration::from_millis(100));
                    // Closing with linger 0 sends a reset.
                    let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                    break;
                }
                let _ = s.write_all(&chunked("5\r\nhello\r\n0\r\n\r\n"));
            }
        }
    });
    let s = run(&["-n", "2", "-c", "1", "-k", "-s", "20", &url]);
    assert_eq!(s.complete_requests, 2);
    assert_eq!(s.failed_requests.receive, 1, "{}", messages(&s));
}
