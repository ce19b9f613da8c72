//! The client's byte stream, seen before hyper reads it: every request head
//! checked as the client sent it, and the two waits nginx bounds separately,
//! for a request head and between keep-alive requests.
//!
//! Why under hyper rather than after it: hyper normalises a head as it
//! parses it. With `Content-Length` and `Transfer-Encoding` it drops the
//! length, and of two equal `Content-Length`s it keeps one, so the request
//! a service gets no longer shows what was sent. nginx refuses both (400):
//! a proxy in front of us, or behind us, may have read the body the other
//! way (request smuggling). [`ClientIo`] follows the framing of the byte
//! stream (head, then a sized or chunked body, then the next head) and
//! parses each head with `httparse`, the parser hyper itself uses, so the
//! two agree on where each head is; a refused head is marked in
//! [`ConnState`] for the service to answer 400.
//!
//! The one edit made to the bytes: a request line whose version httparse
//! refuses but Go's server reads (`HTTP/` digit `.` digit) has its version
//! rewritten `HTTP/1.1` before hyper reads it. `HTTP/1.2` and the like are
//! then served as Go serves them, as HTTP/1.1; another major version
//! (`HTTP/2.0` spelled as text, `HTTP/0.9`) is marked refused, for the
//! service to answer 505 as Go does ([`HeadFault::Version`]).
//!
//! Timeouts (replacing hyper's `header_read_timeout`, which starts when a
//! connection waits for a head and so is also its idle timeout):
//!
//! - a connection's first request head must arrive within the header timeout
//!   of the connection being accepted (nginx's `client_header_timeout`), and
//!   any later head within the header timeout of its first byte;
//! - between two requests a connection may stay idle for the keep-alive
//!   timeout (nginx's `keepalive_timeout`), counted from when the previous
//!   response was written and nothing of the next request has arrived;
//! - while a request is in flight neither applies (the body and upstream
//!   timeouts do);
//! - a write that finds no room waits at most the send timeout for the
//!   client to take a byte (nginx's `send_timeout`), then fails, and the
//!   connection closes: its timer is armed only while a write waits.
//!
//! A head timeout fails the read (hyper closes the connection and reports
//! the error); an idle timeout reads as a clean end of stream. Timers are
//! armed only while a read waits, once per connection: a head that arrives
//! whole in one read (the common case) costs no clock read and no timer.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

mod head;

pub use head::{declared, Declared, HeadFault};
use head::{parse_head, version_token, Head, Parsed, VersionToken};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// Whether a request line `httparse` refused for its version may still
/// turn out to be one Go's server reads (`HTTP/` digit `.` digit) once
/// more of it arrives: a reader that hands its bytes on should wait for
/// them first, so that the version can be rewritten in one piece.
pub fn version_pending(data: &[u8]) -> bool {
    version_token(data) == VersionToken::Partial
}

/// Where the version of `head`'s request line, which `httparse` refused,
/// can be rewritten ([`head::version_token`]): `(at, major, minor)` when it
/// is one Go reads and starts at or after `editable` (the bytes before
/// that are hyper's already: a version split across reads is left for it
/// to refuse, 400); otherwise what the head is meanwhile.
fn version_at(head: &[u8], editable: usize) -> Result<(usize, u8, u8), Parsed> {
    match version_token(head) {
        VersionToken::At(at, major, minor) if at >= editable => Ok((at, major, minor)),
        VersionToken::Partial => Err(Parsed::Partial),
        _ => Err(Parsed::Invalid),
    }
}

/// Largest head kept while it arrives in pieces: hyper's read buffer limit
/// (a longer head is refused by hyper with 431).
const MAX_HEAD: usize = 8192 + 4096 * 100;

/// What a connection's reader and its service share (one per connection,
/// behind an `Rc`: both live on the worker's thread).
#[derive(Default)]
pub struct ConnState {
    /// Set when the first request head has arrived (shutdown treats a
    /// connection that never sent one differently: see [`crate::conn`]).
    pub started: Cell<bool>,
    /// Requests the service has been called for.
    served: Cell<u64>,
    /// Responses whose body hyper has finished with (written or dropped).
    answered: Cell<u64>,
    /// The first refused head: its number on the connection, and why.
    refused: Cell<Option<(u64, HeadFault)>>,
    /// The reader's task, waiting while a keep-alive request is in flight:
    /// woken when its response is done, so the idle timer starts (hyper
    /// would not read again until the socket is readable).
    waiting: Cell<Option<Waker>>,
}

impl ConnState {
    /// Called once per request, in order: why its head is refused, if it is.
    pub fn next_request(&self) -> Option<HeadFault> {
        self.started.set(true);
        let n = self.served.get();
        self.served.set(n + 1);
        match self.refused.get() {
            Some((at, fault)) if at == n => Some(fault),
            _ => None,
        }
    }

    /// Called when a response is done with.
    pub fn answered(&self) {
        self.answered.set(self.answered.get() + 1);
        if let Some(w) = self.waiting.take() {
            w.wake();
        }
    }
}

/// Where the reader is in the client's byte stream.
enum Framing {
    /// Between messages or inside a head; `partial` holds a head that has
    /// not arrived whole yet.
    Head,
    /// Inside a body with this many bytes left.
    Sized(u64),
    /// Inside a chunked body.
    Chunked(Chunk),
    /// Stopped following: the head was refused (answered, then closed) or
    /// the body is one hyper refuses; hyper closes the connection after
    /// its answer.
    Off,
    /// Stopped following a head that cannot be parsed. hyper answers it
    /// 400, but only once it has the head's end (after a partial read it
    /// parses again only when a blank line has arrived): until then this
    /// is still a head being waited for, bounded by the header timeout.
    /// (Taken as [`Framing::Off`], unbounded, a bad head sent in two
    /// pieces and never ended held its connection for good.)
    BadHead,
}

/// Position inside a chunked body, step for step as hyper's decoder
/// (`proto/h1/decode.rs`) reads it: hyper validates, this only follows,
/// but where the body ends must be where hyper ends it, or the bytes after
/// are read as another head than hyper's. (Following bare line feeds as
/// line ends, a body hyper read on, through a "trailer" `\nGARBAGE`, was
/// taken to end early: the next head was garbage, so the connection was
/// waited on without a timer while hyper waited for its next request.)
/// Where hyper refuses a byte, following stops ([`Framing::Off`]): hyper
/// answers and closes.
#[derive(Clone, Copy)]
enum Chunk {
    /// At a chunk-size line's first byte (a hex digit).
    Start,
    /// In a chunk-size line's hex digits, `size` so far.
    Size(u64),
    /// In whitespace after the digits.
    SizeLws(u64),
    /// In a chunk extension, up to the line's CR.
    Extension(u64),
    /// After the size line's CR.
    SizeLf(u64),
    /// In chunk data, this many bytes left.
    Data(u64),
    /// After chunk data: its CR, then its LF.
    DataCr,
    DataLf,
    /// After the last chunk's size line, at the start of a trailer line
    /// (or of the final CRLF).
    EndCr,
    /// After the final CR.
    EndLf,
    /// In a trailer line, up to its CR, then its LF.
    Trailer,
    TrailerLf,
}

/// What a read that has to wait is waiting for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Nothing bounded here (a body, or the last request on the connection).
    Unbounded,
    /// A keep-alive request in flight: the idle wait starts when it is
    /// answered.
    InFlight,
    /// The first request head, since the connection was accepted.
    FirstHead,
    /// The rest of a head whose first byte has arrived.
    Head,
    /// The next request of a keep-alive connection.
    Idle,
}

/// The accepted stream, with the head checks and timeouts described above.
pub struct ClientIo {
    stream: TcpStream,
    state: std::rc::Rc<ConnState>,
    framing: Framing,
    partial: Vec<u8>,
    /// Heads seen, refused ones included.
    heads: u64,
    /// The last head asked for the connection to close after its answer.
    closes: bool,
    /// When the head now arriving must be complete (set at its first byte).
    head_deadline: Option<Instant>,
    /// What the armed timer is for, and the timer itself (made on first need).
    armed: Option<Wait>,
    sleep: Option<Pin<Box<Sleep>>>,
    header_timeout: Duration,
    keepalive_timeout: Duration,
    /// `--client-send-timeout`: how long a write may wait for the client
    /// to take a byte, and its timer, armed while a write waits.
    send_timeout: Duration,
    send_sleep: Option<Pin<Box<Sleep>>>,
    send_armed: bool,
    /// Bytes already read from the stream by the gateway's own reader
    /// ([`crate::h1down`]) before it handed the connection over: read
    /// first, as if they came from the socket.
    replay: bytes::Bytes,
}

impl ClientIo {
    /// Wraps an accepted stream.
    pub fn new(
        stream: TcpStream,
        state: std::rc::Rc<ConnState>,
        header_timeout: Duration,
        keepalive_timeout: Duration,
    ) -> ClientIo {
        ClientIo {
            stream,
            state,
            framing: Framing::Head,
            partial: Vec::new(),
            heads: 0,
            closes: false,
            head_deadline: None,
            armed: None,
            sleep: None,
            header_timeout,
            keepalive_timeout,
            send_timeout: DEFAULT_SEND_TIMEOUT,
            send_sleep: None,
            send_armed: false,
            replay: bytes::Bytes::new(),
        }
    }

    /// Sets `--client-send-timeout` (60 s unless set).
    pub fn with_send_timeout(mut self, limit: Duration) -> ClientIo {
        self.send_timeout = limit;
        self
    }

    /// After a write that found no room: fails once the client has taken
    /// no byte for the send timeout, else waits (the timer wakes the task).
    fn poll_send_timeout<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        if !self.send_armed {
            let at = deadline_after(self.send_timeout);
            match &mut self.send_sleep {
                Some(s) => s.as_mut().reset(at),
                None => self.send_sleep = Some(Box::pin(tokio::time::sleep_until(at))),
            }
            self.send_armed = true;
        }
        match self.send_sleep.as_mut().map(|s| s.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Err(send_timed_out(self.send_timeout))),
            _ => Poll::Pending,
        }
    }

    /// A write's outcome, the send timer disarmed when it moved bytes.
    fn wrote(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Pending => self.poll_send_timeout(cx),
            done => {
                self.send_armed = false;
                done
            }
        }
    }

    /// Reads `prefix` before anything more from the stream; a head it
    /// starts must be whole by `head_deadline` when one is given (the own
    /// reader's, which had been waiting for it: counted afresh here, a
    /// head sent slowly past the hand-over had the header timeout twice).
    pub fn with_replay(mut self, prefix: bytes::Bytes, head_deadline: Option<Instant>) -> ClientIo {
        self.replay = prefix;
        self.head_deadline = head_deadline;
        self
    }

    /// Follows the framing through bytes just read (which it may edit: see
    /// [`ClientIo::fix_version`]).
    fn feed(&mut self, mut data: &mut [u8]) {
        while !data.is_empty() {
            let d = std::mem::take(&mut data);
            let used = match self.framing {
                Framing::Head => self.feed_head(d),
                Framing::Sized(left) => {
                    let n = left.min(d.len() as u64);
                    self.framing = match left - n {
                        0 => Framing::Head,
                        rest => Framing::Sized(rest),
                    };
                    n as usize
                }
                Framing::Chunked(c) => d.len() - self.feed_chunked(c, d).len(),
                Framing::Off | Framing::BadHead => return,
            };
            data = &mut d[used..];
        }
    }

    /// Bytes of a head: parsed in place when the head is whole in one read,
    /// kept until it is otherwise. Returns how many bytes the head used.
    fn feed_head(&mut self, data: &mut [u8]) -> usize {
        if self.partial.is_empty() {
            let mut parsed = parse_head(data);
            if let Parsed::Version = parsed {
                parsed = match version_at(data, 0) {
                    // Read again as the HTTP/1.1 it now says.
                    Ok((at, major, minor)) => {
                        self.fix_version(&mut data[at..at + 8], major, minor);
                        parse_head(data)
                    }
                    Err(other) => other,
                };
            }
            match parsed {
                Parsed::Complete(n, head) => {
                    self.on_head(head);
                    return n;
                }
                Parsed::Partial => {
                    if self.head_deadline.is_none() {
                        self.head_deadline = Some(Instant::now() + self.header_timeout);
                    }
                    self.partial.extend_from_slice(data);
                }
                Parsed::Invalid | Parsed::Version => self.bad_head(),
            }
            return data.len();
        }
        if self.partial.len() + data.len() > MAX_HEAD {
            self.bad_head();
            return data.len();
        }
        self.partial.extend_from_slice(data);
        // A head can only end at a line feed, and a version is read only
        // with its line's: no need to parse again before. (Nothing here
        // may scan what was kept, once per read: a head sent a byte at a
        // time would cost its length squared.)
        if !data.contains(&b'\n') {
            return data.len();
        }
        let mut parsed = parse_head(&self.partial);
        if let Parsed::Version = parsed {
            // Only bytes of this read can still be edited (hyper has the
            // earlier ones).
            let earlier = self.partial.len() - data.len();
            parsed = match version_at(&self.partial, earlier) {
                Ok((at, major, minor)) => {
                    self.fix_version(&mut data[at - earlier..][..8], major, minor);
                    self.partial[at..at + 8].copy_from_slice(b"HTTP/1.1");
                    parse_head(&self.partial)
                }
                Err(other) => other,
            };
        }
        match parsed {
            Parsed::Complete(n, head) => {
                let rest = self.partial.len() - n;
                self.partial = Vec::new();
                self.on_head(head);
                data.len() - rest
            }
            Parsed::Partial => data.len(),
            Parsed::Invalid | Parsed::Version => {
                self.bad_head();
                data.len()
            }
        }
    }

    /// The head now arriving cannot be parsed: following stops, and the
    /// wait for the rest of it stays bounded ([`Framing::BadHead`]).
    fn bad_head(&mut self) {
        self.framing = Framing::BadHead;
        self.partial = Vec::new();
        if self.head_deadline.is_none() {
            self.head_deadline = Some(Instant::now() + self.header_timeout);
        }
    }

    /// The version `token` (`HTTP/major.minor`, 8 bytes) of a request line
    /// `httparse` refused, as Go's server reads it
    /// ([`head::version_token`]): rewritten `HTTP/1.1` where it lies,
    /// before hyper reads it. `HTTP/1.x` is then served as HTTP/1.1; for
    /// another major version the head is marked refused (505), and hyper
    /// calls the service with it so that it can answer.
    fn fix_version(&mut self, token: &mut [u8], major: u8, minor: u8) {
        token.copy_from_slice(b"HTTP/1.1");
        if major != 1 && self.state.refused.get().is_none() {
            self.state
                .refused
                .set(Some((self.heads, HeadFault::Version(major, minor))));
        }
    }

    /// A whole head has arrived: note it, and whether it is refused.
    fn on_head(&mut self, head: Head) {
        let n = self.heads;
        self.heads += 1;
        self.head_deadline = None;
        self.closes = head.closes;
        match head.framing {
            Ok(f) => self.framing = f,
            Err(fault) => {
                if self.state.refused.get().is_none() {
                    self.state.refused.set(Some((n, fault)));
                }
                // The refusal closes the connection: nothing after matters.
                self.framing = Framing::Off;
            }
        }
    }

    fn feed_chunked<'a>(&mut self, mut c: Chunk, mut data: &'a [u8]) -> &'a [u8] {
        while let Some((&b, rest)) = data.split_first() {
            if let Chunk::Data(left) = c {
                let n = left.min(data.len() as u64);
                c = match left - n {
                    0 => Chunk::DataCr,
                    more => Chunk::Data(more),
                };
                data = &data[n as usize..];
                continue;
            }
            let next = match (c, b) {
                // A size past u64 is refused by hyper.
                (Chunk::Start, _) | (Chunk::Size(_), _) if b.is_ascii_hexdigit() => {
                    let so_far = if let Chunk::Size(size) = c { size } else { 0 };
                    let digit = u64::from((b as char).to_digit(16).unwrap_or(0));
                    so_far
                        .checked_mul(16)
                        .and_then(|s| s.checked_add(digit))
                        .map(Chunk::Size)
                }
                (Chunk::Size(size) | Chunk::SizeLws(size), b'\t' | b' ') => {
                    Some(Chunk::SizeLws(size))
                }
                (Chunk::Size(size) | Chunk::SizeLws(size), b';') => Some(Chunk::Extension(size)),
                (Chunk::Size(size) | Chunk::SizeLws(size) | Chunk::Extension(size), b'\r') => {
                    Some(Chunk::SizeLf(size))
                }
                (Chunk::Extension(_), b'\n') => None,
                (Chunk::Extension(size), _) => Some(Chunk::Extension(size)),
                (Chunk::SizeLf(0), b'\n') => Some(Chunk::EndCr),
                (Chunk::SizeLf(size), b'\n') => Some(Chunk::Data(size)),
                (Chunk::DataCr, b'\r') => Some(Chunk::DataLf),
                (Chunk::DataLf, b'\n') => Some(Chunk::Start),
                (Chunk::EndCr, b'\r') => Some(Chunk::EndLf),
                (Chunk::Trailer, b'\r') => Some(Chunk::TrailerLf),
                (Chunk::EndCr | Chunk::Trailer, _) => Some(Chunk::Trailer),
                (Chunk::TrailerLf, b'\n') => Some(Chunk::EndCr),
                (Chunk::EndLf, b'\n') => {
                    self.framing = Framing::Head;
                    return rest;
                }
                _ => None,
            };
            match next {
                Some(n) => c = n,
                None => {
                    self.framing = Framing::Off;
                    return rest;
                }
            }
            data = rest;
        }
        self.framing = Framing::Chunked(c);
        data
    }

    /// What a read that would block now waits for.
    fn wait(&self) -> Wait {
        match self.framing {
            Framing::Head if !self.partial.is_empty() => Wait::Head,
            Framing::BadHead => Wait::Head,
            Framing::Head if self.heads == 0 => Wait::FirstHead,
            Framing::Head if self.heads == self.state.answered.get() => Wait::Idle,
            Framing::Head if !self.closes => Wait::InFlight,
            _ => Wait::Unbounded,
        }
    }

    /// A read would block: polls the timer for what it waits for. `Ready`
    /// with the read's outcome when the wait is over.
    fn poll_timeout(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let wait = self.wait();
        if matches!(wait, Wait::Unbounded | Wait::InFlight) {
            if wait == Wait::InFlight {
                self.state.waiting.set(Some(cx.waker().clone()));
            }
            self.armed = None;
            return Poll::Pending;
        }
        if self.armed != Some(wait) {
            let deadline = match wait {
                Wait::Head => self
                    .head_deadline
                    .unwrap_or_else(|| Instant::now() + self.header_timeout),
                Wait::Idle => Instant::now() + self.keepalive_timeout,
                _ => Instant::now() + self.header_timeout,
            };
            match &mut self.sleep {
                Some(s) => s.as_mut().reset(deadline),
                None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            self.armed = Some(wait);
        }
        let Some(sleep) = self.sleep.as_mut() else {
            return Poll::Pending;
        };
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.armed = None;
        match wait {
            // hyper reads an end of stream between requests as a clean close.
            Wait::Idle => Poll::Ready(Ok(())),
            _ => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                HeadTimeout(self.header_timeout),
            ))),
        }
    }
}

/// `--client-send-timeout`'s default: nginx's `send_timeout`.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// `limit` from now; a limit too large to add is as good as never.
fn deadline_after(limit: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(limit)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// Reads what `stream` holds into `buf`'s spare room without waiting
/// (`WouldBlock` when nothing is there), as `TcpStream::try_read_buf` does,
/// and then tells tokio when the read drained the socket.
///
/// Tokio clears a socket's readiness only when a read fails with
/// `WouldBlock` (its `poll_read` also after a short read, its `try_read`s
/// not). So after a request or response was read whole, the next read of
/// that socket was a system call that could only fail (`EAGAIN`): on a
/// keep-alive connection, one per request. A read that returned less than
/// the room it had emptied the socket's receive queue (epoll is
/// edge-triggered: bytes that arrive later raise a new event), so here it
/// clears the readiness as a failed read would. Readiness for a close
/// (`EPOLLRDHUP`) is never cleared (tokio keeps closed states), so a FIN
/// that came with the last bytes is still seen by the next read.
pub fn read_drained(stream: &TcpStream, buf: &mut bytes::BytesMut) -> io::Result<usize> {
    let room = buf.capacity() - buf.len();
    let mut short = None;
    let read = stream.try_io(tokio::io::Interest::READABLE, || {
        let n = stream.try_read_buf(buf)?;
        if n > 0 && n < room {
            // Reported as `WouldBlock` so that `try_io` clears the
            // readiness; the bytes are kept and returned below.
            short = Some(n);
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    });
    match (read, short) {
        (_, Some(n)) => Ok(n),
        (read, None) => read,
    }
}

/// The error of a write the client took no byte of within `limit`.
pub fn send_timed_out(limit: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the client took no byte of the response for {limit:?} (--client-send-timeout); connection closed"),
    )
}

/// A request head that took longer than the header timeout.
#[derive(Debug)]
pub struct HeadTimeout(pub Duration);

impl fmt::Display for HeadTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the client took longer than {:?} to send a request head (--client-header-timeout)",
            self.0
        )
    }
}

impl std::error::Error for HeadTimeout {}

impl AsyncRead for ClientIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.replay.is_empty() {
            let n = this.replay.len().min(buf.remaining());
            let part = this.replay.split_to(n);
            let before = buf.filled().len();
            buf.put_slice(&part);
            this.feed(&mut buf.filled_mut()[before..]);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = &mut buf.filled_mut()[before..];
                if !read.is_empty() {
                    this.armed = None;
                    this.feed(read);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => this.poll_timeout(cx),
            failed => failed,
        }
    }
}

impl AsyncWrite for ClientIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.wrote(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.wrote(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use bytes::BytesMut;
    use tokio::io::{AsyncWriteExt, Interest};
    use tokio::net::{TcpListener, TcpStream};

    use super::read_drained;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    /// Whether tokio still holds `stream` readable: a read now would make a
    /// system call.
    fn held_readable(stream: &TcpStream) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        matches!(stream.poll_read_ready(&mut cx), Poll::Ready(_))
    }

    fn would_block(r: std::io::Result<usize>) -> bool {
        matches!(r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    const BOUND: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn a_short_read_clears_readiness_and_later_bytes_raise_it_again() {
        let (mut client, server) = pair().await;
        let mut buf = BytesMut::with_capacity(4096);
        for round in 0..3 {
            let sent = format!("request {round}");
            client.write_all(sent.as_bytes()).await.unwrap();
            tokio::time::timeout(BOUND, server.readable())
                .await
                .unwrap()
                .unwrap();
            buf.clear();
            buf.reserve(4096);
            assert_eq!(read_drained(&server, &mut buf).unwrap(), sent.len());
            assert_eq!(&buf[..], sent.as_bytes());
            // Drained: the next read waits for the kernel's next event
            // rather than asking (and failing with EAGAIN).
            assert!(
                !held_readable(&server),
                "round {round}: readiness kept after a short read"
            );
            assert!(would_block(read_drained(&server, &mut buf)));
        }
    }

    #[tokio::test]
    async fn a_read_that_fills_the_room_keeps_readiness_for_the_rest() {
        let (mut client, server) = pair().await;
        client.write_all(b"0123456789").await.unwrap();
        let mut got = Vec::new();
        let mut reads = 0;
        while got.len() < 10 {
            tokio::time::timeout(BOUND, server.readable())
                .await
                .unwrap()
                .unwrap();
            let mut buf = BytesMut::with_capacity(4);
            let room = buf.capacity();
            match read_drained(&server, &mut buf) {
                Ok(n) => {
                    assert!(n > 0);
                    reads += 1;
                    if n == room {
                        // More may be queued: readiness stays.
                        assert!(
                            held_readable(&server),
                            "readiness cleared after a full read"
                        );
                    }
                    got.extend_from_slice(&buf);
                }
                Err(e) => assert!(e.kind() == std::io::ErrorKind::WouldBlock, "{e}"),
            }
        }
        assert_eq!(got, b"0123456789");
        assert!(
            reads >= 2,
            "ten bytes through a smaller buffer came in {reads} read"
        );
    }

    #[tokio::test]
    async fn a_close_that_came_with_the_last_bytes_is_still_seen() {
        let (mut client, server) = pair().await;
        client.write_all(b"last").await.unwrap();
        client.shutdown().await.unwrap();
        // Wait until the FIN is queued behind the bytes.
        tokio::time::timeout(BOUND, async {
            while !server
                .ready(Interest::READABLE)
                .await
                .unwrap()
                .is_read_closed()
            {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        let mut buf = BytesMut::with_capacity(4096);
        assert_eq!(read_drained(&server, &mut buf).unwrap(), 4);
        // The short read must not hide the close: the next read reports it.
        assert!(
            held_readable(&server),
            "the close was cleared with the bytes"
        );
        assert_eq!(read_drained(&server, &mut buf).unwrap(), 0);
    }
}
