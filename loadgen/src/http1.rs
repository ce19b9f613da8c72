//! One HTTP/1 exchange on a raw TCP connection, with ab's timestamps.
//!
//! Why not hyper's client: ab's numbers need the instants hyper hides (connect
//! done, request written, first response byte) and the exact byte count on the
//! wire ("Total transferred" includes headers and chunk framing). The client
//! side of HTTP/1 that a load generator needs is small: write a pre-encoded
//! request, parse the head with `httparse`, then read a body framed by
//! `Content-Length`, chunked encoding or connection close.

use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::RunConfig;

/// The instants of one request, as ab takes them.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Connection attempt began (or, on a reused connection, the request began).
    pub start: Instant,
    /// TCP connection established (equals `start` on a reused connection).
    pub connected: Instant,
    /// Request fully written.
    pub written: Instant,
    /// First response byte read.
    pub first_byte: Instant,
    /// Response complete.
    pub done: Instant,
    /// Sent on a kept-alive connection.
    pub reused: bool,
}

/// What was read back.
#[derive(Debug, Default)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Every byte read for this response: head, body and framing.
    pub wire_bytes: u64,
    /// Body bytes after de-chunking (ab's "Document Length").
    pub body_len: u64,
    /// The body ended before its declared length.
    pub truncated: bool,
    /// The connection may carry another request.
    pub keep_alive: bool,
    /// The `Server` header, when asked for.
    pub server: Option<String>,
    /// What ab counts as a "Keep-Alive request": keep-alive was asked for
    /// (`-k`), the head announced it (`Connection: keep-alive` or a
    /// `Keep-Alive` header) and the body was complete; the first response
    /// on each connection included.
    pub ab_keep_alive: bool,
    /// The response head as received, kept only at `-v 4`.
    pub head: Option<String>,
}

/// Why an exchange failed, in ab's failure classes.
#[derive(Debug)]
pub enum Failure {
    /// The TCP connection could not be established.
    Connect(std::io::Error),
    /// The connection failed or closed before a complete response head.
    Receive(String),
    /// Anything else: write error, malformed response, timeout.
    Exception(String),
}

/// Response heads larger than this are treated as malformed.
const MAX_HEAD: usize = 64 * 1024;

/// Per-connection state that survives between requests: the socket (when
/// kept alive) and the read buffer, whose capacity is reused.
#[derive(Default)]
pub struct Conn {
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    /// The current response body, kept only when a check needs it.
    pub body: Vec<u8>,
}

impl Conn {
    /// Drops the socket, e.g. after a timeout left it mid-response.
    pub fn reset(&mut self) {
        self.stream = None;
    }

    /// Sends `cfg.request` and reads one response. A kept-alive connection
    /// that the server closed while idle is retried once on a new connection,
    /// silently, as ab does: that is not a failure of the request.
    pub async fn exchange(
        &mut self,
        cfg: &RunConfig,
        want_server: bool,
    ) -> Result<(Timing, Response), Failure> {
        loop {
            let start = Instant::now();
            let reused = self.stream.is_some();
            let (mut stream, connected, written) = match self.stream.take() {
                Some(mut s) => {
                    if s.write_all(&cfg.request).await.is_err() {
                        // The server closed the idle connection: retry on a new one.
                        continue;
                    }
                    (s, start, Instant::now())
                }
                None => {
                    let sent =
                        crate::connect::connect_and_send(cfg.target.addr, &cfg.request).await?;
                    (sent.stream, sent.connected, sent.written)
                }
            };
            self.body.clear();
            match read_response(
                &mut Wire {
                    stream: &mut stream,
                    reads: 0,
                },
                &mut self.buf,
                &mut self.body,
                cfg,
                want_server,
            )
            .await
            {
                Ok((first_byte, resp)) => {
                    if cfg.keepalive && resp.keep_alive {
                        self.stream = Some(stream);
                    }
                    let done = Instant::now();
                    let timing = Timing {
                        start,
                        connected,
                        written,
                        first_byte,
                        done,
                        reused,
                    };
                    return Ok((timing, resp));
                }
                Err(ReadError::Idle) if reused => continue,
                Err(ReadError::Idle) => {
                    return Err(Failure::Receive(
                        "connection closed before any response byte".into(),
                    ))
                }
                Err(ReadError::Closed) => {
                    return Err(Failure::Receive(
                        "connection closed inside the response head".into(),
                    ))
                }
                Err(ReadError::Io(e)) if reused && self.buf.is_empty() => {
                    let _ = e;
                    continue;
                }
                Err(ReadError::Io(e)) => return Err(Failure::Receive(format!("read: {e}"))),
                Err(ReadError::Malformed(m)) => return Err(Failure::Exception(m)),
            }
        }
    }
}

enum ReadError {
    /// EOF before any byte: a kept-alive connection the server closed.
    Idle,
    /// EOF inside the head.
    Closed,
    Io(std::io::Error),
    Malformed(String),
}

/// The socket a response is read from, counting the reads it takes.
struct Wire<'a> {
    stream: &'a mut TcpStream,
    reads: u32,
}

impl Wire<'_> {
    /// Reads more bytes into `buf`; `Ok(0)` is EOF.
    async fn fill(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
        if self.reads == 1 {
            // A response that takes more than one read: ACK what came at
            // once from now on. Our ACKs are delayed (see `connect`), and a
            // server that writes its head and body in two small writes
            // without TCP_NODELAY holds the second back until the first is
            // ACKed (Nagle), which a delayed ACK would make 40 ms.
            #[cfg(any(target_os = "linux", target_os = "android"))]
            let _ = socket2::SockRef::from(&*self.stream).set_tcp_quickack(true);
        }
        self.reads += 1;
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
        self.stream.read_buf(buf).await
    }
}

/// Reads one response: its head, then its body as the head frames it.
async fn read_response(
    wire: &mut Wire<'_>,
    buf: &mut Vec<u8>,
    body: &mut Vec<u8>,
    cfg: &RunConfig,
    want_server: bool,
) -> Result<(Instant, Response), ReadError> {
    let (first_byte, head_len, framing, mut resp) = read_head(wire, buf, cfg, want_server).await?;
    let keep = cfg.expect.needs_body().then_some(body);
    let no_body = cfg.head || resp.status == 204 || resp.status == 304 || resp.status < 200;
    let mut wire_bytes = buf.len() as u64;
    match framing {
        _ if no_body => {}
        Framing::Length(len) => {
            let (have, read) = read_plain(wire, buf, head_len, Some(len), keep).await?;
            resp.truncated = have < len;
            resp.body_len = have.min(len);
            wire_bytes += read;
        }
        Framing::Close => {
            resp.keep_alive = false;
            let (have, read) = read_plain(wire, buf, head_len, None, keep).await?;
            resp.body_len = have;
            wire_bytes += read;
        }
        Framing::Chunked => {
            let (len, read) = read_chunked(wire, buf, head_len, keep).await?;
            resp.truncated = len == u64::MAX;
            resp.body_len = if resp.truncated { 0 } else { len };
            wire_bytes += read;
        }
    }
    resp.wire_bytes = wire_bytes;
    if resp.truncated {
        resp.keep_alive = false;
    }
    resp.ab_keep_alive &= cfg.keepalive && !resp.truncated;
    Ok((first_byte, resp))
}

/// Phase one: reads until the head parses. Returns the instant of the first
/// byte, the head's length in `buf`, the body's framing, and the response
/// with what the head says (status, reuse, `Server`).
async fn read_head(
    wire: &mut Wire<'_>,
    buf: &mut Vec<u8>,
    cfg: &RunConfig,
    want_server: bool,
) -> Result<(Instant, usize, Framing, Response), ReadError> {
    buf.clear();
    let mut first_byte = None;
    let mut resp = Response::default();
    loop {
        let n = wire.fill(buf).await.map_err(ReadError::Io)?;
        if n == 0 {
            return Err(if buf.is_empty() {
                ReadError::Idle
            } else {
                ReadError::Closed
            });
        }
        let first_byte = *first_byte.get_or_insert_with(Instant::now);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Response::new(&mut headers);
        match parsed.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                let framing = head_info(&parsed, &mut resp, want_server)?;
                if cfg.verbosity >= crate::verbose::HEADS {
                    resp.head = Some(String::from_utf8_lossy(&buf[..len]).into_owned());
                }
                return Ok((first_byte, len, framing, resp));
            }
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                return Err(ReadError::Malformed("response head over 64 KiB".into()))
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => return Err(ReadError::Malformed(format!("malformed response: {e}"))),
        }
    }
}

/// Phase two for an unchunked body that starts at `buf[head_len..]`: reads
/// until `limit` bytes (a `Content-Length`) or, without one, until the
/// server closes. Returns the body bytes seen and the bytes read from the
/// socket beyond what `buf` held on entry; fewer than `limit` means the
/// connection closed early.
async fn read_plain(
    wire: &mut Wire<'_>,
    buf: &mut Vec<u8>,
    head_len: usize,
    limit: Option<u64>,
    mut body: Option<&mut Vec<u8>>,
) -> Result<(u64, u64), ReadError> {
    let mut have = (buf.len() - head_len) as u64;
    let mut read = 0u64;
    if let Some(b) = body.as_deref_mut() {
        b.extend_from_slice(&buf[head_len..]);
    }
    while limit.is_none_or(|len| have < len) {
        // The head is parsed already: the buffer's capacity is reused for
        // each read of the body.
        buf.clear();
        let n = wire.fill(buf).await.map_err(ReadError::Io)?;
        if n == 0 {
            break;
        }
        have += n as u64;
        read += n as u64;
        if let Some(b) = body.as_deref_mut() {
            b.extend_from_slice(buf);
        }
    }
    Ok((have, read))
}

enum Framing {
    Length(u64),
    Chunked,
    Close,
}

/// Pulls status, framing and connection reuse out of a parsed head.
fn head_info(
    parsed: &httparse::Response<'_, '_>,
    resp: &mut Response,
    want_server: bool,
) -> Result<Framing, ReadError> {
    resp.status = parsed.code.unwrap_or(0);
    let http11 = parsed.version == Some(1);
    let (mut close, mut keepalive, mut framing) = (false, false, Framing::Close);
    for h in parsed.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let len = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| ReadError::Malformed("invalid Content-Length header".into()))?;
            if !matches!(framing, Framing::Chunked) {
                framing = Framing::Length(len);
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if contains_token(h.value, "chunked") {
                framing = Framing::Chunked;
            }
        } else if h.name.eq_ignore_ascii_case("connection") {
            close |= contains_token(h.value, "close");
            keepalive |= contains_token(h.value, "keep-alive");
        } else if h.name.eq_ignore_ascii_case("keep-alive") {
            // ab looks for "Keep-Alive" anywhere in the head.
            resp.ab_keep_alive = true;
        } else if want_server && h.name.eq_ignore_ascii_case("server") {
            resp.server = Some(String::from_utf8_lossy(h.value).into_owned());
        }
    }
    resp.keep_alive = if http11 { !close } else { keepalive && !close };
    resp.ab_keep_alive |= keepalive;
    Ok(framing)
}

fn contains_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Decodes a chunked body that starts at `buf[pos..]`. Returns the body
/// length (`u64::MAX` when the connection closed mid-body) and the bytes read
/// from the socket beyond what `buf` held on entry.
async fn read_chunked(
    wire: &mut Wire<'_>,
    buf: &mut Vec<u8>,
    mut pos: usize,
    mut body: Option<&mut Vec<u8>>,
) -> Result<(u64, u64), ReadError> {
    let entry = buf.len();
    let mut len = 0u64;
    // Reads until `buf[pos..]` holds `need` bytes, or reports a truncation.
    async fn need(wire: &mut Wire<'_>, buf: &mut Vec<u8>, upto: usize) -> Result<bool, ReadError> {
        while buf.len() < upto {
            if wire.fill(buf).await.map_err(ReadError::Io)? == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }
    loop {
        let line_end = loop {
            if let Some(i) = buf[pos..].windows(2).position(|w| w == b"\r\n") {
                break pos + i;
            }
            if !need(wire, buf, buf.len() + 1).await? {
                return Ok((u64::MAX, (buf.len() - entry) as u64));
            }
        };
        let line = std::str::from_utf8(&buf[pos..line_end]).unwrap_or("");
        let hex = line.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(hex, 16)
            .map_err(|_| ReadError::Malformed(format!("invalid chunk size {hex:?}")))?;
        pos = line_end + 2;
        if size == 0 {
            // Trailer section: header lines until an empty line.
            loop {
                if !need(wire, buf, pos + 2).await? {
                    return Ok((u64::MAX, (buf.len() - entry) as u64));
                }
                match buf[pos..].windows(2).position(|w| w == b"\r\n") {
                    Some(0) => return Ok((len, (buf.len() - entry) as u64)),
                    Some(i) => pos += i + 2,
                    None => {
                        if !need(wire, buf, buf.len() + 1).await? {
                            return Ok((u64::MAX, (buf.len() - entry) as u64));
                        }
                    }
                }
            }
        }
        let end = pos + size as usize;
        if !need(wire, buf, end + 2).await? {
            return Ok((u64::MAX, (buf.len() - entry) as u64));
        }
        if let Some(b) = body.as_deref_mut() {
            b.extend_from_slice(&buf[pos..end]);
        }
        len += size;
        pos = end + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `head_info` makes of a complete response head.
    fn head(text: &str, want_server: bool) -> Result<(Framing, Response), ReadError> {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut parsed = httparse::Response::new(&mut headers);
        assert!(parsed.parse(text.as_bytes()).unwrap().is_complete());
        let mut resp = Response::default();
        head_info(&parsed, &mut resp, want_server).map(|f| (f, resp))
    }

    fn framing(text: &str) -> Framing {
        head(text, false).ok().unwrap().0
    }

    #[test]
    fn reuse_follows_the_version_and_connection_tokens() {
        let cases = [
            ("HTTP/1.1 200 OK\r\n\r\n", true),
            ("HTTP/1.1 200 OK\r\nConnection: Close\r\n\r\n", false),
            (
                "HTTP/1.1 200 OK\r\nConnection: upgrade, close\r\n\r\n",
                false,
            ),
            // HTTP/1.0 closes unless it says otherwise.
            ("HTTP/1.0 200 OK\r\n\r\n", false),
            ("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n", true),
            (
                "HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\n\r\n",
                false,
            ),
        ];
        for (text, keep) in cases {
            let (_, r) = head(text, false).ok().unwrap();
            assert_eq!(r.keep_alive, keep, "{text:?}");
            assert_eq!(r.status, 200);
        }
    }

    #[test]
    fn ab_counts_keep_alive_when_the_head_announces_it() {
        let (_, r) = head("HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\n\r\n", false)
            .ok()
            .unwrap();
        assert!(r.ab_keep_alive);
        // An HTTP/1.1 response that says nothing is reusable but, for ab,
        // not a "Keep-Alive request".
        let (_, r) = head("HTTP/1.1 200 OK\r\n\r\n", false).ok().unwrap();
        assert!(r.keep_alive && !r.ab_keep_alive);
    }

    #[test]
    fn chunked_wins_over_content_length_in_either_order() {
        let te_first =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n";
        let cl_first = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(framing(te_first), Framing::Chunked));
        assert!(matches!(framing(cl_first), Framing::Chunked));
        assert!(matches!(
            framing("HTTP/1.1 200 OK\r\nContent-Length:  12 \r\n\r\n"),
            Framing::Length(12)
        ));
        assert!(matches!(framing("HTTP/1.0 200 OK\r\n\r\n"), Framing::Close));
    }

    #[test]
    fn a_bad_content_length_is_malformed_and_names_the_header() {
        for bad in ["-1", "12abc", ""] {
            let text = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\n");
            match head(&text, false) {
                Err(ReadError::Malformed(m)) => assert!(m.contains("Content-Length"), "{m}"),
                _ => panic!("{bad:?} accepted"),
            }
        }
    }

    #[test]
    fn the_server_header_is_kept_only_when_asked_for() {
        let text = "HTTP/1.1 404 Not Found\r\nserver: tyk\r\n\r\n";
        let (_, r) = head(text, true).ok().unwrap();
        assert_eq!((r.status, r.server.as_deref()), (404, Some("tyk")));
        let (_, r) = head(text, false).ok().unwrap();
        assert_eq!(r.server, None);
    }

    #[test]
    fn tokens_match_whole_comma_separated_items_case_blind() {
        assert!(contains_token(b"Upgrade, Close", "close"));
        assert!(contains_token(b" chunked ", "chunked"));
        assert!(!contains_token(b"closed", "close"));
        assert!(!contains_token(b"", "close"));
    }
}
