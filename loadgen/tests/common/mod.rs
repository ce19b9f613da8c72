//! Purpose-built HTTP/1 servers for loadgen's tests: each misbehaves in one
//! known way, and counts what it accepted, so tests compare loadgen's report
//! with what really happened on the wire. [`bins`] finds the real
//! binaries for end-to-end tests.
#![allow(dead_code)]

pub mod bins;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server answers.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// `status` with `body`, honouring keep-alive.
    Ok { status: u16, body: &'static str },
    /// Reads the request, then closes without answering.
    CloseEarly,
    /// Declares 100 body bytes, sends 10, closes.
    ShortBody,
    /// Every other response has a longer body.
    Varying,
    /// A chunked HTTP/1.1 response in three chunks.
    Chunked,
    /// `200 hello`, but every `n`th response on a connection says
    /// `Connection: close` and closes it.
    CloseEvery(u64),
}

/// A running test server; stops when dropped.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// TCP connections accepted.
    pub accepted: Arc<AtomicU64>,
    /// Requests read.
    pub requests: Arc<AtomicU64>,
    /// Request bodies received.
    pub bodies: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Starts a server on 127.0.0.1:0.
    pub fn start(mode: Mode) -> Server {
        Server::start_limited(mode, None)
    }

    /// Starts a server that stops listening after `max_conns` connections,
    /// so later connects are refused.
    pub fn start_limited(mode: Mode, max_conns: Option<u64>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(AtomicU64::new(0));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (acc, req, bod, st) = (
            accepted.clone(),
            requests.clone(),
            bodies.clone(),
            stop.clone(),
        );
        std::thread::spawn(move || {
            let mut n = 0u64;
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                acc.fetch_add(1, Ordering::SeqCst);
                n += 1;
                let (req, bod) = (req.clone(), bod.clone());
                std::thread::spawn(move || serve(conn, mode, n, &req, &bod));
                if max_conns.is_some_and(|m| n >= m) {
                    // Dropping the listener makes later connects fail with
                    // "connection refused".
                    break;
                }
            }
        });
        Server {
            addr,
            accepted,
            requests,
            bodies,
            stop,
        }
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

fn serve(
    conn: TcpStream,
    mode: Mode,
    conn_no: u64,
    requests: &AtomicU64,
    bodies: &Mutex<Vec<Vec<u8>>>,
) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    let mut served = 0u64;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let http11 = line.trim_end().ends_with("HTTP/1.1");
        let (mut len, mut keep, mut close) = (0usize, false, false);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end().to_ascii_lowercase();
            if h.is_empty() {
                break;
            }
            if let Some(v) = h.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if h.starts_with("connection:") {
                keep |= h.contains("keep-alive");
                close |= h.contains("close");
            }
        }
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        requests.fetch_add(1, Ordering::SeqCst);
        bodies.lock().unwrap().push(body);
        let mut keep_alive = if http11 { !close } else { keep };
        served += 1;
        if let Mode::CloseEvery(n) = mode {
            keep_alive &= !served.is_multiple_of(n);
        }
        let conn_hdr = if keep_alive {
            "Connection: keep-alive\r\n"
        } else {
            "Connection: close\r\n"
        };
        let resp = match mode {
            Mode::CloseEvery(_) => format!(
                "HTTP/1.1 200 OK\r\nServer: testsrv\r\nContent-Length: 5\r\n{conn_hdr}\r\nhello"
            ),
            Mode::Ok { status, body } => format!(
                "HTTP/1.1 {status} X\r\nServer: testsrv\r\nContent-Length: {}\r\n{conn_hdr}\r\n{body}",
                body.len()
            ),
            Mode::CloseEarly => return,
            Mode::ShortBody => {
                let _ = out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
                return;
            }
            Mode::Varying => {
                let body = if (conn_no + served).is_multiple_of(2) { "short" } else { "a longer body" };
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{conn_hdr}\r\n{body}", body.len())
            }
            Mode::Chunked => format!(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n{conn_hdr}\r\n5\r\nhello\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
            ),
        };
        if out.write_all(resp.as_bytes()).is_err() || !keep_alive {
            return;
        }
    }
}

/// The real mock upstream (`loadgen::mock`, the seed's echo server) on
/// 127.0.0.1:0 in a background thread, for the test process's lifetime.
pub fn mock_upstream() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            loadgen::mock::serve(l, std::future::pending())
                .await
                .unwrap();
        });
    });
    addr
}

/// Makes the process `cmd` starts die with this test: the kernel sends it
/// SIGKILL when the thread that spawned it exits (Linux `PR_SET_PDEATHSIG`),
/// which a test's thread does when the test ends, panics, or the whole test
/// binary is killed (`kill -9`, a cancelled `cargo test`). Without it a
/// gateway or mock started by a killed test lives on, holding its port.
/// Each test spawns, and waits for, its children on its own thread.
pub fn dies_with_test(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe; the closure touches
    // nothing but the copied pid.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The test may have died between fork and prctl: then no signal
            // will ever come, so do not start at all.
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("the test process is gone"));
            }
            Ok(())
        });
    }
    cmd
}

/// Sends `request` on a connection of its own and reads to the end (the
/// request must close the connection), returning the status and the body,
/// de-chunked if need be (empty for an answer without one, as to HEAD).
pub fn exchange(addr: SocketAddr, request: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(&raw).unwrap() {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => panic!("incomplete response: {raw:?}"),
    };
    let chunked = resp.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding")
            && String::from_utf8_lossy(h.value).contains("chunked")
    });
    let body = &raw[len..];
    let body = if chunked && !body.is_empty() {
        dechunk(body)
    } else {
        body.to_vec()
    };
    (resp.code.unwrap(), body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&b[..line]).unwrap(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[line + 2..line + 2 + size]);
        b = &b[line + 4 + size..];
    }
}

/// A loopback port nothing listens on, held so until dropped: a socket
/// bound there that never listens, so a connection is refused and no
/// other socket can take the port meanwhile (a port bound then closed can
/// be another test's listener by the time it is dialled).
pub struct DeadPort(socket2::Socket);

impl DeadPort {
    pub fn new() -> DeadPort {
        use socket2::{Domain, Protocol, Socket, Type};
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        s.bind(&any.into()).unwrap();
        DeadPort(s)
    }

    pub fn port(&self) -> u16 {
        self.0.local_addr().unwrap().as_socket().unwrap().port()
    }
}
