//! Heap allocations per proxied request on a route without middleware
//! (issue 16): a benchmark, not a test; it prints and asserts nothing.
//!
//! To try this: 1. `cargo bench -p gateway --bench proxy_allocs`
//! 2. read allocations (and bytes) per request, for ab's workload (a new
//! HTTP/1.0 connection per request) and for keep-alive HTTP/1.1;
//! `CLIENT_HTTP1=hyper` for hyper's server connection instead of the own.
//!
//! The gateway runs in this process with one worker; the client and the
//! upstream are plain threads that read and write into fixed buffers, so
//! (after a warm-up) every allocation counted is the gateway's.
//! `TRACE_ALLOCS=1` prints the size of each allocation of one request.

use std::alloc::{GlobalAlloc, Layout};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use gateway::server::{ClientHttp1, Gateway, GatewayConfig};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static REALLOCS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);
static TRACE: AtomicBool = AtomicBool::new(false);

// SAFETY: forwards to the gateway's allocator (the one the binary
// installs: `gateway::heap`); only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        if TRACE.load(Ordering::Relaxed) {
            trace(layout.size());
        }
        gateway::heap::Counting.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        gateway::heap::Counting.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        REALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new, Ordering::Relaxed);
        gateway::heap::Counting.realloc(ptr, layout, new)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Prints an allocation's size with a raw write (printing through std
/// would allocate, and recurse).
fn trace(size: usize) {
    let mut buf = [0u8; 24];
    let mut n = buf.len();
    let mut v = size;
    buf[n - 1] = b'\n';
    n -= 1;
    loop {
        n -= 1;
        buf[n] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf[n - 1] = b' ';
    // SAFETY: write(2) of a stack buffer to stderr.
    unsafe {
        libc::write(2, buf[n - 1..].as_ptr().cast(), buf.len() - n + 1);
    }
}

/// A keep-alive upstream answering every request with two bytes.
fn upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || serve_upstream(s));
        }
    });
    addr
}

fn serve_upstream(mut s: TcpStream) {
    let mut buf = [0u8; 8192];
    let mut have = 0;
    loop {
        match s.read(&mut buf[have..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => have += n,
        }
        // Requests here have no body: each ends at its blank line.
        while let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
            buf.copy_within(end + 4..have, 0);
            have -= end + 4;
        }
    }
}

/// One request on a new connection, as ab sends it; the whole response.
fn http10(addr: SocketAddr, buf: &mut [u8]) -> usize {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /plain/ HTTP/1.0\r\nHost: 127.0.0.1\r\nUser-Agent: ApacheBench/2.3\r\nAccept: */*\r\n\r\n")
        .unwrap();
    let mut n = 0;
    loop {
        match s.read(&mut buf[n..]).unwrap() {
            0 => return n,
            k => n += k,
        }
    }
}

/// One request on a kept connection; reads until the 2-byte body.
fn http11(s: &mut TcpStream, buf: &mut [u8]) -> usize {
    s.write_all(b"GET /plain/ HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: wrk\r\n\r\n")
        .unwrap();
    let mut n = 0;
    while !buf[..n].ends_with(b"\r\n\r\nok") {
        n += s.read(&mut buf[n..]).unwrap();
    }
    n
}

fn measure(label: &str, requests: usize, mut one: impl FnMut() -> usize) {
    for _ in 0..200 {
        one();
    }
    let (a, r, b) = (
        ALLOCS.load(Ordering::Relaxed),
        REALLOCS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    for _ in 0..requests {
        assert!(one() > 0);
    }
    let per = |now: usize, before: usize| (now - before) as f64 / requests as f64;
    println!(
        "{label:28} {:6.2} allocations, {:5.2} reallocs, {:7.0} bytes per request",
        per(ALLOCS.load(Ordering::Relaxed), a),
        per(REALLOCS.load(Ordering::Relaxed), r),
        per(BYTES.load(Ordering::Relaxed), b),
    );
    if std::env::var_os("TRACE_ALLOCS").is_some() {
        eprintln!("sizes allocated by one request ({label}):");
        TRACE.store(true, Ordering::Relaxed);
        one();
        TRACE.store(false, Ordering::Relaxed);
    }
}

fn main() {
    let up = upstream();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("plain.json"),
        format!(
            r#"{{"name":"plain","api_id":"plain","org_id":"default","active":true,"use_keyless":true,
               "proxy":{{"listen_path":"/plain/","target_url":"http://{up}","strip_listen_path":true}}}}"#
        ),
    )
    .unwrap();
    // `CLIENT_HTTP1=hyper` counts hyper's server connection instead of
    // the gateway's own HTTP/1 code.
    let client_http1 = match std::env::var("CLIENT_HTTP1").as_deref() {
        Ok("hyper") => ClientHttp1::Hyper,
        _ => ClientHttp1::Own,
    };
    let config = GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        client_http1,
        ..GatewayConfig::default()
    };
    let gw = Gateway::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let addr = gw.local_addr();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        gw.run(async move {
            let _ = rx.await;
        })
    });
    let requests: usize = std::env::var("REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5000);
    let mut buf = vec![0u8; 1 << 16];
    println!("gateway, one worker, /plain/ (no middleware), client HTTP/1 {client_http1:?}, {requests} requests each:");
    measure("HTTP/1.0, new connection", requests, || {
        http10(addr, &mut buf)
    });
    let mut kept = TcpStream::connect(addr).unwrap();
    kept.set_nodelay(true).unwrap();
    measure("HTTP/1.1 keep-alive", requests, || {
        http11(&mut kept, &mut buf)
    });
    drop(kept);
    let _ = tx.send(());
    thread.join().unwrap().unwrap();
}
