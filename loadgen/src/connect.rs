//! Opening a connection and sending the request on it, for as little CPU
//! as the kernel allows.
//!
//! With ab's workload (a new connection per request) the TCP handshake and
//! teardown are most of a client's CPU: every segment costs its sender the
//! transmit path and, on loopback, the receiver's input path too (it runs
//! in the sender's softirq). Two choices here cut that, measured on this
//! machine's loopback (`/proc/net/snmp` segment counts, a fresh network
//! namespace):
//!
//! - **Delayed ACKs from the start** (`TCP_QUICKACK` off before `connect`):
//!   the last ACK of the handshake rides on the request and the ACK of the
//!   response rides on our FIN, so a connection takes 8 segments instead of
//!   10 (request, response and everything HTTP sees are unchanged). The
//!   request goes out right after `connect`, so the delayed ACK is never
//!   waited for.
//! - **No wait for writability**: on loopback the handshake is usually done
//!   when `connect` returns (`EINPROGRESS` notwithstanding), so the request
//!   is sent at once; only if the socket is not connected yet (`EAGAIN`) is
//!   it registered and awaited. That saves an event-loop turn and the
//!   `SO_ERROR` check per connection.
//!
//! `TCP_NODELAY` is set only for requests too big for one segment: a request
//! that fits one segment is one write, which Nagle never holds back.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::http1::Failure;

/// Requests up to this size fit one TCP segment on any usual path (an
/// Ethernet MSS is 1460), so Nagle cannot delay them.
const ONE_SEGMENT: usize = 1200;

/// A connection with the request written on it.
pub struct Sent {
    /// The connection, registered with the runtime.
    pub stream: TcpStream,
    /// When the connection was established.
    pub connected: Instant,
    /// When the request was fully written.
    pub written: Instant,
}

/// Connects to `addr` and writes `request`. A failure to connect is
/// [`Failure::Connect`]; a failure to write on an established connection
/// is [`Failure::Exception`], as ab counts them.
pub async fn connect_and_send(addr: SocketAddr, request: &[u8]) -> Result<Sent, Failure> {
    let socket = open(addr, request.len()).map_err(Failure::Connect)?;
    let connect_returned = Instant::now();
    // Fast path: the handshake finished inside `connect`.
    let sent = match socket.send_with_flags(request, libc::MSG_NOSIGNAL) {
        Ok(n) => Some(n),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
        // Before the connection is up, a send fails with the connect's own
        // error (refused, unreachable); after, it is a write error.
        Err(e) if socket.peer_addr().is_err() => return Err(Failure::Connect(e)),
        Err(e) => return Err(Failure::Exception(format!("write: {e}"))),
    };
    let mut stream =
        TcpStream::from_std(socket.into()).map_err(|e| Failure::Exception(format!("{e}")))?;
    let (connected, sent) = match sent {
        Some(n) => (connect_returned, n),
        None => {
            // Slow path: wait until the handshake ends, one way or the other.
            stream.writable().await.map_err(Failure::Connect)?;
            if let Some(e) = stream.take_error().map_err(Failure::Connect)? {
                return Err(Failure::Connect(e));
            }
            (Instant::now(), 0)
        }
    };
    if sent < request.len() {
        stream
            .write_all(&request[sent..])
            .await
            .map_err(|e| Failure::Exception(format!("write: {e}")))?;
    }
    Ok(Sent {
        stream,
        connected,
        written: Instant::now(),
    })
}

/// A non-blocking socket with its options set, its connect started.
fn open(addr: SocketAddr, request_len: usize) -> io::Result<Socket> {
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )?;
    // Best effort: a kernel without it only sends two more ACKs.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _ = socket.set_tcp_quickack(false);
    if request_len > ONE_SEGMENT {
        socket.set_tcp_nodelay(true)?;
    }
    match socket.connect(&SockAddr::from(addr)) {
        Ok(()) => Ok(socket),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(socket),
        Err(e) => Err(e),
    }
}
