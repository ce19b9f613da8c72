//! Raw-socket helpers for the adversarial tests, where a client library
//! would refuse to misbehave: a one-worker gateway config, a plain API,
//! a raw upstream that hands each connection to the test, and byte-level
//! readers of one request or response.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway::server::GatewayConfig;
use serde_json::Value;

use super::{api_json, write_api};

/// A gateway on one worker thread serving the definitions in `dir`: one
/// worker, so a test's connections all meet the same pool and timers.
pub fn config(dir: &std::path::Path) -> GatewayConfig {
    GatewayConfig {
        apis_dir: dir.to_path_buf(),
        threads: 1,
        ..GatewayConfig::default()
    }
}

/// Writes the API `plain` on `listen_path` (stripped), proxying to `target`.
pub fn plain_api(dir: &std::path::Path, listen_path: &str, target: SocketAddr) {
    write_api(
        dir,
        "plain",
        &api_json(
            "plain",
            listen_path,
            &format!("http://{target}"),
            true,
            Value::Null,
        ),
    );
}

/// A raw upstream: every accepted connection is handed to `handle` on its
/// own thread. Counts connections accepted and connections still open.
#[derive(Clone, Default)]
pub struct RawUpstream {
    /// Connections accepted.
    pub accepted: Arc<AtomicUsize>,
    /// Connections whose handler has not returned.
    pub open: Arc<AtomicUsize>,
}

pub fn raw_upstream(
    handle: impl Fn(TcpStream) + Send + Sync + 'static,
) -> (SocketAddr, RawUpstream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let stats = RawUpstream::default();
    let s = stats.clone();
    let handle = Arc::new(handle);
    std::thread::spawn(move || {
        for stream in l.incoming().flatten() {
            s.accepted.fetch_add(1, Ordering::SeqCst);
            s.open.fetch_add(1, Ordering::SeqCst);
            let (s, handle) = (s.clone(), handle.clone());
            std::thread::spawn(move || {
                stream
                    .set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                handle(stream);
                s.open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (addr, stats)
}

/// Reads one request head (and a Content-Length body) from `s`; `None` at
/// EOF. Returns the head as text.
pub fn read_request(s: &mut TcpStream) -> Option<String> {
    let head = read_request_head(s)?;
    read_body(s, &head)?;
    Some(head)
}

/// Reads one response from a keep-alive connection: its head (status line
/// first) and its body, framed by Content-Length or chunked (chunks
/// joined); `None` at EOF first.
pub fn read_framed_response(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = read_through(s, b"\r\n\r\n")?;
    let body = read_body(s, &head)?;
    Some((head, body))
}

/// The body after `head`: Content-Length bytes, or chunks (without
/// extensions) up to the last one and an empty trailer.
fn read_body(s: &mut TcpStream, head: &str) -> Option<Vec<u8>> {
    let len = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    s.read_exact(&mut body).ok()?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.trim_end().ends_with("chunked")
    });
    if chunked {
        loop {
            let size = usize::from_str_radix(read_line(s)?.trim(), 16).ok()?;
            if size == 0 {
                while !read_line(s)?.is_empty() {}
                break;
            }
            let mut data = vec![0; size + 2];
            s.read_exact(&mut data).ok()?;
            body.extend_from_slice(&data[..size]);
        }
    }
    Some(body)
}

/// One line from `s`, without its CRLF; `None` at EOF.
fn read_line(s: &mut TcpStream) -> Option<String> {
    let mut line = read_through(s, b"\r\n")?;
    line.truncate(line.len() - 2);
    Some(line)
}

/// Reads one request head from `s`, not its body; `None` at EOF.
pub fn read_request_head(s: &mut TcpStream) -> Option<String> {
    read_through(s, b"\r\n\r\n")
}

/// What `s` sends up to and including `end`, a byte at a time (nothing
/// after it is read); `None` at EOF first.
fn read_through(s: &mut TcpStream, end: &[u8]) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(end) {
        match s.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Waits up to `limit` for `cond`, polling.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// True when the peer has closed `s` (EOF or reset) within `limit`.
pub fn closed_by_peer(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// The status code on a raw response's first line.
pub fn status_of(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"))
}

/// Reads one response (head and Content-Length body) from a keep-alive
/// connection: its status and body.
pub fn read_response(s: &mut TcpStream) -> (u16, String) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = s.read(&mut b).expect("no whole response head");
        assert_eq!(
            n,
            1,
            "closed mid-head after {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head[9..12].parse().unwrap();
    let len = head
        .lines()
        .find_map(|l| {
            let l = l.to_ascii_lowercase();
            l.strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}
