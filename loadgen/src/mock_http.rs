//! The mock upstream's HTTP/1.1 connection loop, written by hand.
//!
//! Why not hyper, as the gateway uses: the mock answers one fixed kind of
//! request with one small JSON body, and in a benchmark it must cost as
//! little CPU per request as possible, since every µs it spends is charged
//! to the machine the gateway is measured on. Per request this loop makes
//! one `read` (the whole request, usually) and one `write` (head and body
//! together); nothing is spawned per request, the connection's buffers are
//! reused, and a head seen before is answered without being parsed again
//! (`memo`). What it must still do right, as any HTTP/1.1 server: keep-alive
//! by version and `Connection`, pipelined requests, `Content-Length` and
//! chunked bodies (read whole, even when not echoed, so the next request
//! starts where it should), `Expect: 100-continue`, `HEAD`, and a `400`
//! (then close) for a head it cannot read or a body framed two ways.

use std::io;

use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::mock::{echo_body, Echo, MAX_ECHO_BODY};

/// Request heads larger than this are refused (hyper's default limit is
/// about the same, 8 KiB..400 KiB; Go's is 1 MiB): the mock's clients send
/// a handful of headers.
const MAX_HEAD: usize = 64 * 1024;

/// Most headers a request may have (hyper's default is 100).
const MAX_HEADERS: usize = 100;

/// What a request head says, owned, so that the buffer can take more bytes.
struct Head {
    method: String,
    /// The request target as sent (path and query).
    target: String,
    headers: HeaderMap,
    http10: bool,
    keep_alive: bool,
    body: Framing,
    expect_continue: bool,
}

enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// A request the mock cannot read: answered `400` and the connection closed.
struct BadRequest(&'static str);

/// How a request body's reading ended.
enum BodyEnd {
    /// Read whole (and kept, when asked for).
    Whole,
    /// Read whole, but it was larger than [`MAX_ECHO_BODY`]: not kept.
    TooLarge,
    /// The client closed before its end.
    Closed,
}

/// Buffers that grew past this for one request are given back after it,
/// so a connection that once carried a large body does not hold its size.
const KEEP_CAPACITY: usize = 64 * 1024;

/// Serves one connection until the client closes it (or asks to).
pub async fn serve_conn(mut stream: TcpStream, echo: Echo) -> io::Result<()> {
    // One buffer for what was read, one for what is written, both reused
    // for every request of the connection.
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    let mut out: Vec<u8> = Vec::with_capacity(1024);
    let mut body: Vec<u8> = Vec::new();
    let mut raw_head: Vec<u8> = Vec::new();
    loop {
        // Phase 0: a head seen before gets its answer again (see `memo`).
        if buf.is_empty() && fill(&mut stream, &mut buf).await? == 0 {
            // The client closed between requests.
            return Ok(());
        }
        out.clear();
        if let Some(keep_alive) = memo::answer(&mut buf, echo, &mut out) {
            stream.write_all(&out).await?;
            if !keep_alive {
                return Ok(());
            }
            continue;
        }
        // Phase 1: a whole head (pipelined requests may already be in `buf`).
        let head = match read_head(&mut stream, &mut buf, &mut raw_head).await? {
            Some(Ok(h)) => h,
            Some(Err(BadRequest(why))) => return refuse(&mut stream, why).await,
            None => return Ok(()),
        };
        // Phase 2: the body, consumed whole so the next head starts where
        // this body ends; kept only when it is echoed.
        if head.expect_continue && !matches!(head.body, Framing::None) && buf.is_empty() {
            stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        body.clear();
        let keep = echo.body.then_some(&mut body);
        let too_large = match read_body(&mut stream, &mut buf, &head.body, keep).await? {
            Ok(BodyEnd::Whole) => false,
            Ok(BodyEnd::TooLarge) => true,
            // The client closed mid-body: nobody is left to answer.
            Ok(BodyEnd::Closed) => return Ok(()),
            Err(BadRequest(why)) => return refuse(&mut stream, why).await,
        };
        if too_large {
            body = Vec::new();
            out.clear();
            write_too_large(&mut out, head.http10, head.keep_alive);
            stream.write_all(&out).await?;
            if !head.keep_alive {
                return Ok(());
            }
            continue;
        }
        // Phase 3: the answer, head and body in one write.
        let json = answer_body(&head, echo, &body);
        if matches!(head.body, Framing::None) {
            // Without a body the answer depends on the head's bytes alone.
            memo::keep(&raw_head, &head, echo, &json);
        }
        write_answer(
            &mut out,
            head.http10,
            head.keep_alive,
            head.method != "HEAD",
            json.as_bytes(),
        );
        stream.write_all(&out).await?;
        if !head.keep_alive {
            return Ok(());
        }
        if body.capacity() > KEEP_CAPACITY {
            body = Vec::new();
        }
        if out.capacity() > KEEP_CAPACITY {
            out = Vec::with_capacity(1024);
        }
    }
}

/// The answer to a body over [`MAX_ECHO_BODY`] with `--echo body`.
fn write_too_large(out: &mut Vec<u8>, http10: bool, keep_alive: bool) {
    use std::io::Write as _;
    let why = b"request body over 1 MiB, the most --echo body holds\n";
    out.extend_from_slice(if http10 {
        b"HTTP/1.0 413 Content Too Large\r\n"
    } else {
        b"HTTP/1.1 413 Content Too Large\r\n"
    });
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "Content-Type: text/plain\r\nContent-Length: {}\r\n",
        why.len()
    );
    match (http10, keep_alive) {
        (true, true) => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        (false, false) => out.extend_from_slice(b"Connection: close\r\n"),
        _ => {}
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(why);
}

/// Answers a request that cannot be read with `400` naming why, and closes.
async fn refuse(stream: &mut TcpStream, why: &str) -> io::Result<()> {
    let msg = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{why}",
        why.len()
    );
    stream.write_all(msg.as_bytes()).await
}

/// Reads until `buf` starts with a complete head and takes it out of
/// `buf`, its bytes into `raw`. `None` when the client closed between requests.
async fn read_head(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    raw: &mut Vec<u8>,
) -> io::Result<Option<Result<Head, BadRequest>>> {
    loop {
        if !buf.is_empty() {
            match parse_head(buf) {
                Ok(Some((head, len))) => {
                    raw.clear();
                    raw.extend_from_slice(&buf[..len]);
                    buf.drain(..len);
                    return Ok(Some(Ok(head)));
                }
                Ok(None) if buf.len() > MAX_HEAD => {
                    return Ok(Some(Err(BadRequest("request head too large"))))
                }
                Ok(None) => {}
                Err(e) => return Ok(Some(Err(e))),
            }
        }
        if fill(stream, buf).await? == 0 {
            // EOF: between requests a normal close; inside a head, nothing
            // can be answered either.
            return Ok(None);
        }
    }
}

/// Reads more bytes into `buf`; `Ok(0)` is EOF.
async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(8 * 1024);
    }
    stream.read_buf(buf).await
}

/// Parses the head at the start of `buf`: the head and its length, or
/// `None` while it is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, BadRequest> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(BadRequest("too many headers")),
        Err(_) => return Err(BadRequest("malformed request head")),
    };
    let http10 = req.version == Some(0);
    let (mut close, mut keep_alive_token, mut expect_continue) = (false, false, false);
    let (mut length, mut chunked, mut lengths) = (None, false, 0);
    let mut map = HeaderMap::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| BadRequest("invalid header name"))?;
        let value =
            HeaderValue::from_bytes(h.value).map_err(|_| BadRequest("invalid header value"))?;
        if name == http::header::CONTENT_LENGTH {
            lengths += 1;
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or(BadRequest("invalid Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(BadRequest("two different Content-Length headers"));
            }
            length = Some(n);
        } else if name == http::header::TRANSFER_ENCODING {
            // Only chunked as the last coding frames a request body.
            let last = h.value.rsplit(|b| *b == b',').next().unwrap_or(b"");
            chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
            if !chunked {
                return Err(BadRequest("unsupported Transfer-Encoding"));
            }
        } else if name == http::header::CONNECTION {
            close |= has_token(h.value, b"close");
            keep_alive_token |= has_token(h.value, b"keep-alive");
        } else if name == http::header::EXPECT {
            expect_continue = h.value.eq_ignore_ascii_case(b"100-continue");
        }
        map.append(name, value);
    }
    if chunked && lengths > 0 {
        return Err(BadRequest("body framed by both Content-Length and chunked"));
    }
    let body = match (chunked, length) {
        (true, _) => Framing::Chunked,
        (false, Some(n)) if n > 0 => Framing::Length(n),
        _ => Framing::None,
    };
    let head = Head {
        method: req.method.unwrap_or("GET").to_string(),
        target: req.path.unwrap_or("/").to_string(),
        headers: map,
        http10,
        keep_alive: if http10 {
            keep_alive_token && !close
        } else {
            !close
        },
        body,
        expect_continue: expect_continue && !http10,
    };
    Ok(Some((head, len)))
}

fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Reads the body that `framing` announces, from `buf` and then the
/// socket, leaving in `buf` only what follows it. What is read is added to
/// `keep` up to [`MAX_ECHO_BODY`] bytes; a longer body is still read to its
/// end (so the connection can go on), but not kept: `TooLarge`.
async fn read_body(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    framing: &Framing,
    mut keep: Option<&mut Vec<u8>>,
) -> io::Result<Result<BodyEnd, BadRequest>> {
    let mut too_large = false;
    let mut over = |keep: &mut Option<&mut Vec<u8>>| {
        if keep.as_deref().is_some_and(|k| k.len() > MAX_ECHO_BODY) {
            *keep = None;
            too_large = true;
        }
    };
    let end = match framing {
        Framing::None => BodyEnd::Whole,
        Framing::Length(n) => {
            if *n > MAX_ECHO_BODY as u64 && keep.is_some() {
                keep = None;
                too_large = true;
            }
            let mut left = *n;
            loop {
                let take = left.min(buf.len() as u64) as usize;
                if let Some(k) = keep.as_deref_mut() {
                    k.extend_from_slice(&buf[..take]);
                }
                buf.drain(..take);
                left -= take as u64;
                if left == 0 {
                    break BodyEnd::Whole;
                }
                if fill(stream, buf).await? == 0 {
                    break BodyEnd::Closed;
                }
            }
        }
        Framing::Chunked => {
            let mut state = Chunked::Size;
            loop {
                let done = state.advance(buf, keep.as_deref_mut());
                over(&mut keep);
                match done {
                    Ok(true) => break BodyEnd::Whole,
                    Ok(false) => {}
                    Err(e) => return Ok(Err(e)),
                }
                if fill(stream, buf).await? == 0 {
                    break BodyEnd::Closed;
                }
            }
        }
    };
    Ok(Ok(match end {
        BodyEnd::Whole if too_large => BodyEnd::TooLarge,
        end => end,
    }))
}

/// Where a chunked body's decoding is, between reads.
enum Chunked {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes to go.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// In the trailer section, after the last (zero) chunk.
    Trailer,
}

impl Chunked {
    /// Consumes what it can from the front of `buf`. `Ok(true)` when the
    /// body has ended, `Ok(false)` when more bytes are needed.
    fn advance(
        &mut self,
        buf: &mut Vec<u8>,
        mut keep: Option<&mut Vec<u8>>,
    ) -> Result<bool, BadRequest> {
        let mut pos = 0;
        let done = loop {
            let rest = &buf[pos..];
            match *self {
                Chunked::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((used, 0))) => {
                        pos += used;
                        *self = Chunked::Trailer;
                    }
                    Ok(httparse::Status::Complete((used, n))) => {
                        pos += used;
                        *self = Chunked::Data(n);
                    }
                    Ok(httparse::Status::Partial) if rest.len() > 4096 => {
                        return Err(BadRequest("chunk size line too long"))
                    }
                    Ok(httparse::Status::Partial) => break false,
                    Err(_) => return Err(BadRequest("invalid chunk size")),
                },
                Chunked::Data(left) => {
                    if rest.is_empty() {
                        break false;
                    }
                    let take = left.min(rest.len() as u64) as usize;
                    if let Some(k) = keep.as_deref_mut() {
                        k.extend_from_slice(&rest[..take]);
                    }
                    pos += take;
                    *self = if left == take as u64 {
                        Chunked::DataEnd
                    } else {
                        Chunked::Data(left - take as u64)
                    };
                }
                Chunked::DataEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        pos += 2;
                        *self = Chunked::Size;
                    }
                    [] | [b'\r'] => break false,
                    _ => return Err(BadRequest("chunk data longer than its size")),
                },
                Chunked::Trailer => match rest.windows(2).position(|w| w == b"\r\n") {
                    Some(0) => {
                        pos += 2;
                        break true;
                    }
                    Some(i) => pos += i + 2,
                    None if rest.len() > MAX_HEAD => {
                        return Err(BadRequest("trailer section too large"))
                    }
                    None => break false,
                },
            }
        };
        buf.drain(..pos);
        Ok(done)
    }
}

/// The echo a request gets (see [`crate::mock`]).
fn answer_body(head: &Head, echo: Echo, body: &[u8]) -> String {
    let (path, query) = split_target(&head.target);
    echo_body(&head.method, path, query, &head.headers, echo, body)
}

/// Writes the answer: Go's status line for the request's version, Go's
/// headers in Go's order, and `json` unless the request was `HEAD`.
fn write_answer(out: &mut Vec<u8>, http10: bool, keep_alive: bool, with_body: bool, json: &[u8]) {
    use std::io::Write as _;
    out.extend_from_slice(if http10 {
        b"HTTP/1.0 200 OK\r\n"
    } else {
        b"HTTP/1.1 200 OK\r\n"
    });
    out.extend_from_slice(b"Content-Type: application/json\r\nDate: ");
    date::with_now(|d| out.extend_from_slice(d));
    // Writing into a Vec cannot fail.
    let _ = write!(out, "\r\nContent-Length: {}\r\n", json.len());
    match (http10, keep_alive) {
        (true, true) => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        (false, false) => out.extend_from_slice(b"Connection: close\r\n"),
        _ => {}
    }
    out.extend_from_slice(b"\r\n");
    if with_body {
        out.extend_from_slice(json);
    }
}

/// Answers for the request heads a thread saw last.
///
/// A benchmark sends the same head over and over (the gateway's proxied
/// request differs from one API to the next, not from one request to the
/// next), and building the echo (a header map, Go's canonical names, sorted,
/// escaped) was most of the mock's own CPU per request. A head without a
/// body is answered from its bytes alone, so a head equal byte for byte to
/// one answered before gets the same echo without being parsed; only the
/// `Date` is fresh. Kept per thread (each server thread answers its own
/// connections), a few heads, replaced round-robin.
mod memo {
    use std::cell::RefCell;

    use super::{write_answer, Echo, Head};

    /// Heads remembered per thread: a bench alternates a few routes.
    const SLOTS: usize = 8;
    /// Longer heads are not remembered (they are not a benchmark's).
    const MAX_HEAD: usize = 4096;

    struct Entry {
        head: Vec<u8>,
        /// Two servers on one thread (tests) may echo differently.
        echo: Echo,
        http10: bool,
        keep_alive: bool,
        with_body: bool,
        json: Vec<u8>,
    }

    #[derive(Default)]
    struct Memo {
        entries: Vec<Entry>,
        next: usize,
    }

    thread_local! {
        static MEMO: RefCell<Memo> = RefCell::new(Memo::default());
    }

    /// If `buf` starts with a remembered head, takes it out of `buf`,
    /// writes its answer to `out` and returns whether to keep the
    /// connection open.
    pub(super) fn answer(buf: &mut Vec<u8>, echo: Echo, out: &mut Vec<u8>) -> Option<bool> {
        MEMO.with(|m| {
            let m = m.borrow();
            let e = m
                .entries
                .iter()
                .find(|e| e.echo == echo && buf.starts_with(&e.head))?;
            write_answer(out, e.http10, e.keep_alive, e.with_body, &e.json);
            buf.drain(..e.head.len());
            Some(e.keep_alive)
        })
    }

    /// Remembers the answer to `raw`, a complete head without a body.
    pub(super) fn keep(raw: &[u8], head: &Head, echo: Echo, json: &str) {
        if raw.len() > MAX_HEAD {
            return;
        }
        MEMO.with(|m| {
            let mut m = m.borrow_mut();
            let entry = Entry {
                head: raw.to_vec(),
                echo,
                http10: head.http10,
                keep_alive: head.keep_alive,
                with_body: head.method != "HEAD",
                json: json.as_bytes().to_vec(),
            };
            if m.entries.len() < SLOTS {
                m.entries.push(entry);
            } else {
                let at = m.next;
                m.entries[at] = entry;
                m.next = (at + 1) % SLOTS;
            }
        });
    }
}

/// Path and query of a request target; an absolute-form target
/// (`http://host/path`) loses its scheme and authority, as `r.URL.Path`.
fn split_target(target: &str) -> (&str, &str) {
    let target = match target.find("://") {
        Some(i) if !target.starts_with('/') => {
            let rest = &target[i + 3..];
            rest.find(['/', '?']).map_or("/", |j| &rest[j..])
        }
        _ => target,
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    (if path.is_empty() { "/" } else { path }, query)
}

/// The `Date` header's value, formatted once a second per thread (as Go
/// and hyper cache it).
mod date {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};

    thread_local! {
        static CACHE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }

    /// Calls `f` with the current date in HTTP's format.
    pub fn with_now(f: impl FnOnce(&[u8])) {
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        CACHE.with(|c| {
            let mut c = c.borrow_mut();
            if c.0 != secs {
                *c = (secs, httpdate::fmt_http_date(now));
            }
            f(c.1.as_bytes());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Option<(Head, usize)>, BadRequest> {
        parse_head(text.as_bytes())
    }

    #[test]
    fn keep_alive_follows_the_version_and_connection() {
        let cases = [
            ("GET / HTTP/1.1\r\nHost: h\r\n\r\n", true),
            ("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n", false),
            ("GET / HTTP/1.0\r\n\r\n", false),
            ("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        ];
        for (text, keep) in cases {
            let (h, len) = head(text).ok().unwrap().unwrap();
            assert_eq!((h.keep_alive, len), (keep, text.len()), "{text:?}");
        }
        assert!(head("GET / HTTP/1.1\r\nHost: h\r\n")
            .ok()
            .unwrap()
            .is_none());
    }

    #[test]
    fn bodies_framed_two_ways_or_badly_are_refused() {
        for text in [
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            "GET /\0 HTTP/1.1\r\n\r\n",
        ] {
            assert!(head(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn chunked_bodies_decode_across_any_split() {
        let wire = b"5;ext=1\r\nhello\r\n1\r\n,\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        // Every split point: the decoder keeps its place between reads.
        for cut in 0..wire.len() {
            let (mut state, mut buf, mut body) = (Chunked::Size, wire[..cut].to_vec(), Vec::new());
            let mut done = state.advance(&mut buf, Some(&mut body)).ok().unwrap();
            // The rest arrives; a body that had ended leaves it untouched.
            buf.extend_from_slice(&wire[cut..]);
            if !done {
                done = state.advance(&mut buf, Some(&mut body)).ok().unwrap();
            }
            assert!(done, "cut {cut}");
            assert_eq!(body, b"hello, world", "cut {cut}");
            assert_eq!(buf, b"NEXT", "cut {cut}");
        }
        let mut bad = b"3\r\nabcdef\r\n".to_vec();
        assert!(Chunked::Size.advance(&mut bad, None).is_err());
    }

    #[test]
    fn a_remembered_head_gets_the_same_answer_and_leaves_what_follows() {
        let text = "GET /memo/?q=1 HTTP/1.1\r\nX-Memo-Test: 1\r\n\r\n";
        let (h, len) = head(text).ok().unwrap().unwrap();
        let json = answer_body(&h, Echo::default(), b"");
        let mut fresh = Vec::new();
        write_answer(&mut fresh, h.http10, h.keep_alive, true, json.as_bytes());
        memo::keep(&text.as_bytes()[..len], &h, Echo::default(), &json);

        let mut buf = format!("{text}GET /next").into_bytes();
        let mut out = Vec::new();
        assert_eq!(
            memo::answer(&mut buf, Echo::default(), &mut out),
            Some(true)
        );
        // The same bytes but for the Date, which may have ticked.
        let strip = |b: &[u8]| {
            let t = String::from_utf8(b.to_vec()).unwrap();
            let (a, rest) = t.split_once("Date: ").unwrap();
            format!("{a}{}", &rest[29..])
        };
        assert_eq!(strip(&out), strip(&fresh));
        assert_eq!(buf, b"GET /next");
        // Another echo, a prefix of the head, or another head: not remembered.
        let query = Echo {
            query: true,
            body: false,
        };
        let mut again = text.as_bytes().to_vec();
        assert_eq!(memo::answer(&mut again, query, &mut out), None);
        let mut part = text.as_bytes()[..len - 1].to_vec();
        assert_eq!(memo::answer(&mut part, Echo::default(), &mut out), None);
        let mut other = text
            .replace("X-Memo-Test: 1", "X-Memo-Test: 2")
            .into_bytes();
        assert_eq!(memo::answer(&mut other, Echo::default(), &mut out), None);
    }

    #[test]
    fn targets_split_into_path_and_query() {
        assert_eq!(split_target("/a/b?x=1&y"), ("/a/b", "x=1&y"));
        assert_eq!(split_target("/a"), ("/a", ""));
        assert_eq!(split_target("http://h:1/p?q"), ("/p", "q"));
        assert_eq!(split_target("http://h"), ("/", ""));
        assert_eq!(split_target("*"), ("*", ""));
    }

    #[test]
    fn responses_carry_gos_headers_and_no_body_for_head() {
        let (h, _) = head("HEAD /p HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .ok()
            .unwrap()
            .unwrap();
        let mut out = Vec::new();
        let json = answer_body(&h, Echo::default(), b"");
        write_answer(
            &mut out,
            h.http10,
            h.keep_alive,
            h.method != "HEAD",
            json.as_bytes(),
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nDate: "));
        assert!(
            text.ends_with("\r\nConnection: keep-alive\r\n\r\n"),
            "{text}"
        );
        let len: usize = text
            .split("Content-Length: ")
            .nth(1)
            .and_then(|r| r.split("\r\n").next())
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            len,
            echo_body("HEAD", "/p", "", &h.headers, Echo::default(), b"").len()
        );
    }
}
