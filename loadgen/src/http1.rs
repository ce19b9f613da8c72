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
            let mut wire = Wire {
                stream: &mut stream,
                reads: 0,
                received: false,
            };
            let result =
                read_response(&mut wire, &mut self.buf, &mut self.body, cfg, want_server).await;
            let received = wire.received;
            match result {
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
                // Not one byte of the answer came: the server closed the
                // idle connection as the request arrived. (`buf` is no
                // witness: bodies are read through it and it is emptied.)
                Err(ReadError::Io(_)) if reused && !received => continue,
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
    /// Some byte of the response has arrived.
    received: bool,
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
        let n = self.stream.read_buf(buf).await?;
        self.received |= n > 0;
        Ok(n)
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
    // Bytes read past the end of this response.
    let mut extra = (buf.len() - head_len) as u64;
    match framing {
        _ if no_body => {}
        Framing::Length(len) => {
            let (have, read) = read_plain(wire, buf, head_len, Some(len), keep).await?;
            resp.truncated = have < len;
            resp.body_len = have.min(len);
            extra = have.saturating_sub(len);
            wire_bytes += read;
        }
        Framing::Close => {
            resp.keep_alive = false;
            let (have, read) = read_plain(wire, buf, head_len, None, keep).await?;
            resp.body_len = have;
            extra = 0;
            wire_bytes += read;
        }
        Framing::Chunked => {
            let chunked = read_chunked(wire, buf, head_len, keep).await?;
            resp.truncated = chunked.len.is_none();
            resp.body_len = chunked.len.unwrap_or(0);
            extra = chunked.extra as u64;
            wire_bytes += chunked.read;
        }
    }
    resp.wire_bytes = wire_bytes;
    if resp.truncated {
        resp.keep_alive = false;
    }
    // Only a connection that carries another request is hurt by more bytes
    // than the response framed: they would be read as (the start of) the
    // next response, or dropped unseen with the buffer. Either way the
    // framing is wrong, and this response is where it shows.
    if extra > 0 && cfg.keepalive && resp.keep_alive {
        return Err(ReadError::Malformed(format!(
            "response longer than its framing: {extra} more bytes after its end"
        )));
    }
    resp.ab_keep_alive &= cfg.keepalive && !resp.truncated;
    Ok((first_byte, resp))
}

/// Most header lines a response head may have. hyper's client allows 100;
/// ab has no count, only its head size, so this is set above what real
/// servers send rather than at hyper's number. httparse needs one slot per
/// header, on the stack while a head is parsed (32 bytes each).
const MAX_HEADERS: usize = 256;

/// Phase one: reads until the final head parses. Returns the instant of the
/// first byte, the length in `buf` of the heads (interim `1xx` heads
/// included), the body's framing, and the response with what the final head
/// says (status, reuse, `Server`).
///
/// Interim responses (`100 Continue`, `103 Early Hints`) are skipped, as RFC
/// 9112 asks: the final response follows them on the same connection. `101
/// Switching Protocols` is final: after it the connection no longer speaks
/// HTTP/1. Interim heads count towards the 64 KiB bound of the head.
async fn read_head(
    wire: &mut Wire<'_>,
    buf: &mut Vec<u8>,
    cfg: &RunConfig,
    want_server: bool,
) -> Result<(Instant, usize, Framing, Response), ReadError> {
    buf.clear();
    let mut first_byte = None;
    let mut resp = Response::default();
    // Where the head being parsed starts: past the interim heads.
    let mut start = 0;
    loop {
        if buf.len() > start {
            // Uninitialised: zeroing 256 slots (8 KiB) per response would
            // cost more than parsing a short head.
            let mut headers =
                [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut []);
            match httparse::ParserConfig::default().parse_response_with_uninit_headers(
                &mut parsed,
                &buf[start..],
                &mut headers,
            ) {
                Ok(httparse::Status::Complete(len))
                    if parsed
                        .code
                        .is_some_and(|c| (100..200).contains(&c) && c != 101) =>
                {
                    start += len;
                    continue;
                }
                Ok(httparse::Status::Complete(len)) => {
                    let framing = head_info(&parsed, &mut resp, want_server)?;
                    if cfg.verbosity >= crate::verbose::HEADS {
                        resp.head = Some(String::from_utf8_lossy(&buf[..start + len]).into_owned());
                    }
                    let first_byte = first_byte.unwrap_or_else(Instant::now);
                    return Ok((first_byte, start + len, framing, resp));
                }
                // httparse stops at its slot count before the head ends: the
                // head may still turn out too large, which is the message
                // that says what is wrong.
                Err(httparse::Error::TooManyHeaders) => {
                    match buf[start..].windows(4).position(|w| w == b"\r\n\r\n") {
                        Some(end) if start + end + 4 <= MAX_HEAD => {
                            return Err(ReadError::Malformed(format!(
                                "response head has more than {MAX_HEADERS} header lines"
                            )))
                        }
                        Some(_) => return Err(head_too_large()),
                        None if buf.len() > MAX_HEAD => return Err(head_too_large()),
                        None => {}
                    }
                }
                Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                    return Err(head_too_large())
                }
                Ok(httparse::Status::Partial) => {}
                Err(e) => return Err(ReadError::Malformed(format!("malformed response: {e}"))),
            }
        }
        let n = wire.fill(buf).await.map_err(ReadError::Io)?;
        if n == 0 {
            return Err(if buf.is_empty() {
                ReadError::Idle
            } else {
                ReadError::Closed
            });
        }
        first_byte.get_or_insert_with(Instant::now);
    }
}

fn head_too_large() -> ReadError {
    ReadError::Malformed("response head over 64 KiB".into())
}

/// Phase two for an unchunked body that starts at `buf[head_len..]`: reads
/// until `limit` bytes (a `Content-Length`) or, without one, until the
/// server closes. Returns the body bytes seen (more than `limit` when the
/// server sent more) and the bytes read from the socket beyond what `buf`
/// held on entry; fewer than `limit` means the connection closed early.
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
    let mut length = None;
    for h in parsed.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let len = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| ReadError::Malformed("invalid Content-Length header".into()))?;
            // RFC 9112 6.3: differing lengths leave the body's end unknown
            // (the last one winning is how responses get smuggled).
            if length.is_some_and(|l| l != len) {
                return Err(ReadError::Malformed(
                    "two different Content-Length headers".into(),
                ));
            }
            length = Some(len);
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
    // After `101 Switching Protocols` the connection is no longer HTTP/1.
    resp.keep_alive = resp.status != 101 && if http11 { !close } else { keepalive && !close };
    resp.ab_keep_alive |= keepalive;
    Ok(framing)
}

fn contains_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Most bytes a chunk-size line may take, extensions included: a size
/// line is a few bytes, and extensions are rare and short.
const MAX_CHUNK_LINE: usize = 4096;

/// What [`read_chunked`] found.
struct Chunked {
    /// The body's length, `None` when the connection closed mid-body.
    len: Option<u64>,
    /// Bytes read from the socket beyond what `buf` held on entry.
    read: u64,
    /// Bytes left in `buf` after the body's end.
    extra: usize,
}

/// Where a chunked body's decoding is, between reads.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ChunkState {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes to go.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// In the trailer section, after the last (zero) chunk; this many
    /// bytes of it seen.
    Trailer(usize),
    /// The body has ended.
    Done,
}

/// One step of the decoding: the next state, the bytes of `rest` it used,
/// and whether they were chunk data. `None` when `rest` is too short to tell.
fn chunk_step(
    state: ChunkState,
    rest: &[u8],
) -> Result<Option<(ChunkState, usize, bool)>, ReadError> {
    let bad = |m: &str| Err(ReadError::Malformed(m.to_string()));
    Ok(Some(match state {
        ChunkState::Size => match httparse::parse_chunk_size(rest) {
            // httparse takes an empty size as 0; RFC 9112 wants a digit.
            Ok(httparse::Status::Complete(_)) if !rest[0].is_ascii_hexdigit() => {
                return bad("invalid chunk size line")
            }
            Ok(httparse::Status::Complete((used, _))) if used > MAX_CHUNK_LINE => {
                return bad("chunk size line over 4 KiB")
            }
            Ok(httparse::Status::Complete((used, 0))) => (ChunkState::Trailer(0), used, false),
            Ok(httparse::Status::Complete((used, n))) => (ChunkState::Data(n), used, false),
            Ok(httparse::Status::Partial) if rest.len() > MAX_CHUNK_LINE => {
                return bad("chunk size line over 4 KiB")
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return bad("invalid chunk size line"),
        },
        ChunkState::Data(_) if rest.is_empty() => return Ok(None),
        ChunkState::Data(left) => {
            // Compared, never added: `left` may be near u64::MAX.
            let take = left.min(rest.len() as u64);
            let next = match left - take {
                0 => ChunkState::DataEnd,
                more => ChunkState::Data(more),
            };
            (next, take as usize, true)
        }
        ChunkState::DataEnd => match rest {
            [b'\r', b'\n', ..] => (ChunkState::Size, 2, false),
            [] | [b'\r'] => return Ok(None),
            _ => return bad("chunk data not followed by CRLF"),
        },
        ChunkState::Trailer(seen) => match rest.windows(2).position(|w| w == b"\r\n") {
            Some(0) => (ChunkState::Done, 2, false),
            Some(i) if seen + i + 2 <= MAX_HEAD => {
                (ChunkState::Trailer(seen + i + 2), i + 2, false)
            }
            None if seen + rest.len() <= MAX_HEAD => return Ok(None),
            _ => return bad("trailer section over 64 KiB"),
        },
        ChunkState::Done => return Ok(None),
    }))
}

/// Decodes a chunked body that starts at `buf[pos..]`.
///
/// Memory stays bounded whatever the body's size: decoded bytes are dropped
/// from `buf` before each read (only an unfinished size line or trailer
/// line is kept), a size line is at most 4 KiB, the trailer section 64 KiB
/// (the head's bound). A chunk size is only ever compared with the bytes at
/// hand, never added to an index, so a size near `u64::MAX` is simply a
/// chunk that does not end: the read waits for bytes (and `-s`) like any
/// other. The framing is checked as RFC 9112 7.1 writes it: a size line is
/// hex digits (then optional extensions), and chunk data ends with CRLF.
async fn read_chunked(
    wire: &mut Wire<'_>,
    buf: &mut Vec<u8>,
    mut pos: usize,
    mut body: Option<&mut Vec<u8>>,
) -> Result<Chunked, ReadError> {
    let (mut len, mut read, mut state) = (0u64, 0u64, ChunkState::Size);
    loop {
        while let Some((next, used, data)) = chunk_step(state, &buf[pos..])? {
            if data {
                if let Some(b) = body.as_deref_mut() {
                    b.extend_from_slice(&buf[pos..pos + used]);
                }
                len += used as u64;
            }
            pos += used;
            state = next;
            if state == ChunkState::Done {
                return Ok(Chunked {
                    len: Some(len),
                    read,
                    extra: buf.len() - pos,
                });
            }
        }
        buf.drain(..pos);
        pos = 0;
        let n = wire.fill(buf).await.map_err(ReadError::Io)?;
        if n == 0 {
            return Ok(Chunked {
                len: None,
                read,
                extra: 0,
            });
        }
        read += n as u64;
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
