//! The seed's `local-mock-server.go`, in Rust.
//!
//! Every method and path gets `200`, `Content-Type: application/json`, and the
//! JSON Go's `json.NewEncoder(w).Encode(map…)` writes for
//! `{message, path, method, headers}`: keys sorted (Go sorts map keys), header
//! names in Go's canonical form with their first value, `Host` absent (Go moves
//! it to `r.Host`), `<`, `>` and `&` escaped as Go does, and a trailing newline.
//! A client of the seed's server sees the same bytes.
//!
//! It must never be the bottleneck of a benchmark: the handler does one small
//! allocation-light write, connections are keep-alive HTTP/1.1 with
//! `TCP_NODELAY`, served by a hand-written connection loop ([`crate::mock_http`]:
//! one read and one write per request, no task per request), and the caller
//! decides how many runtime threads serve it.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use gateway_wire::header;
use http::HeaderMap;
use tokio::net::TcpListener;

/// `n` non-blocking listeners on `addr` with `SO_REUSEPORT`, for one server
/// thread each: the kernel spreads new connections over them. With port 0
/// the first picks a free port and the others bind that one.
pub fn bind_reuseport(addr: SocketAddr, n: usize) -> io::Result<Vec<std::net::TcpListener>> {
    let mut out: Vec<std::net::TcpListener> = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        let at = match out.first() {
            Some(first) => first.local_addr()?,
            None => addr,
        };
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(at),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&at.into())?;
        socket.listen(1024)?;
        out.push(socket.into());
    }
    Ok(out)
}

/// What the echo shows beyond the seed's `{message, path, method, headers}`
/// (`mock-upstream --echo query,body`); off by default, so that the seed's
/// JSON stays byte-identical.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Echo {
    /// Add `"query"`: the raw query string, so `AddParams` edits are visible.
    pub query: bool,
    /// Add `"body"`: the request body (lossy UTF-8), so `Body` edits are visible.
    pub body: bool,
}

impl Echo {
    /// Parses `query,body` (either, both, or `none`).
    pub fn parse(s: &str) -> Result<Echo, String> {
        let mut e = Echo::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "query" => e.query = true,
                "body" => e.body = true,
                "none" => {}
                other => {
                    return Err(format!(
                        "--echo: unknown field {other:?} (known: query, body)"
                    ))
                }
            }
        }
        Ok(e)
    }
}

/// Serves the mock upstream on `listener` until `shutdown` resolves.
///
/// Connections run as tasks on the current runtime; a multi-threaded runtime
/// spreads them across its workers.
pub async fn serve(listener: TcpListener, shutdown: impl Future<Output = ()>) -> io::Result<()> {
    serve_with(listener, Echo::default(), shutdown).await
}

/// As [`serve`], echoing the extra fields of `echo`.
pub async fn serve_with(
    listener: TcpListener,
    echo: Echo,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of file descriptors or a connection reset before accept:
                // keep serving the others.
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    if out_of_resources(&e) {
                        accept_backoff().await;
                    }
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        // One task per connection, none per request: the connection loop
        // (`mock_http`) reads, parses and answers on this task.
        tokio::spawn(async move {
            // Clients closing mid-request are normal under load; nothing to do.
            let _ = crate::mock_http::serve_conn(stream, echo).await;
        });
    }
}

/// How long to pause accepting after running out of descriptors or memory.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(10);

/// Whether an accept failed for want of a resource (`EMFILE`, `ENFILE`,
/// `ENOBUFS`, `ENOMEM`): then the connection stays queued and the next
/// accept fails at once, again and again.
fn out_of_resources(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Pauses the accept loop after [`out_of_resources`]. Without it the loop
/// spun a core, and on a current-thread runtime it also starved this
/// thread's connections, whose closing is what frees a descriptor. The
/// pause blocks the thread (mock-upstream's runtimes have no timer: see
/// `serve_one`), then yields so that those connections run before the next
/// accept. It only happens while the process is out of descriptors.
async fn accept_backoff() {
    std::thread::sleep(ACCEPT_BACKOFF);
    tokio::task::yield_now().await;
}

/// Most request body bytes `--echo body` holds and echoes (1 MiB): a
/// larger body is read and dropped, and answered `413`. Unbounded, one
/// 300 MB upload made the mock hold ~700 MB (the body, then its escaped
/// copy in the JSON).
pub const MAX_ECHO_BODY: usize = 1024 * 1024;

/// The whole echo for a request: the seed's JSON, with the extra fields
/// `echo` asks for (`query` is the raw query string, `body` the request body).
pub fn echo_body(
    method: &str,
    raw_path: &str,
    query: &str,
    headers: &HeaderMap,
    echo: Echo,
    body: &[u8],
) -> String {
    let seed = echo_json(method, raw_path, headers);
    if echo.query || echo.body {
        with_extras(&seed, echo, query, body)
    } else {
        seed
    }
}

/// The exact body the seed's mock server writes for a request.
///
/// This runs once per proxied request of every benchmark, so it is written
/// to allocate twice (the name list and the output) and to copy strings
/// that need no escaping in one piece.
pub fn echo_json(method: &str, raw_path: &str, headers: &HeaderMap) -> String {
    // Go's map iteration is encoded in sorted key order; keep first values.
    let mut names: Vec<(Canonical<'_>, &http::HeaderValue)> =
        Vec::with_capacity(headers.keys_len());
    let mut len = 96 + raw_path.len();
    for (name, value) in headers.iter() {
        if name == http::header::HOST || names.iter().any(|(n, _)| n.raw == name.as_str()) {
            continue;
        }
        len += name.as_str().len() + value.len() + 6;
        names.push((Canonical::of(name.as_str()), value));
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));

    let mut out = String::with_capacity(len);
    out.push_str("{\"headers\":{");
    for (i, (name, value)) in names.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        name.write_json(&mut out);
        out.push(':');
        go_json_string(&mut out, &String::from_utf8_lossy(value.as_bytes()));
    }
    out.push_str("},\"message\":\"hello from mock upstream\",\"method\":");
    go_json_string(&mut out, method);
    out.push_str(",\"path\":");
    go_json_string(&mut out, &percent_decode(raw_path));
    out.push_str("}\n");
    out
}

/// A header name as Go's `CanonicalMIMEHeaderKey` prints it
/// (`gateway_wire::header`), compared and written without building the
/// canonical string.
struct Canonical<'a> {
    raw: &'a str,
    /// A byte that is not a token character: Go leaves the name as is.
    verbatim: bool,
}

impl<'a> Canonical<'a> {
    fn of(raw: &'a str) -> Self {
        Canonical {
            raw,
            verbatim: !header::is_canonicalisable(raw),
        }
    }

    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        header::canonical_header_bytes(self.raw)
    }

    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.bytes().cmp(other.bytes())
    }

    fn write_json(&self, out: &mut String) {
        if self.verbatim {
            return go_json_string(out, self.raw);
        }
        // Token characters need no JSON escaping.
        out.push('"');
        out.extend(self.bytes().map(char::from));
        out.push('"');
    }
}

/// The echo with `"body"` first and `"query"` last, where Go's sorted keys
/// would put them.
fn with_extras(echo_body: &str, echo: Echo, query: &str, data: &[u8]) -> String {
    let mut out = String::with_capacity(echo_body.len() + query.len() + data.len() + 32);
    out.push('{');
    if echo.body {
        out.push_str("\"body\":");
        go_json_string(&mut out, &String::from_utf8_lossy(data));
        out.push(',');
    }
    // The seed's object without its braces and newline.
    out.push_str(&echo_body[1..echo_body.len() - 2]);
    if echo.query {
        out.push_str(",\"query\":");
        go_json_string(&mut out, query);
    }
    out.push_str("}\n");
    out
}

/// Go's `textproto.CanonicalMIMEHeaderKey`: `x-custom-goplugin` becomes
/// `X-Custom-Goplugin`; the one rule the gateway follows too.
pub use gateway_wire::canonical_header_key;

/// Appends `s` as a JSON string the way Go's encoder writes it (HTML-safe).
fn go_json_string(out: &mut String, s: &str) {
    out.push('"');
    let escaped = |c: char| {
        matches!(c, '"' | '\\' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}') || (c as u32) < 0x20
    };
    // Most values need no escaping: copy runs of plain text in one piece.
    let mut rest = s;
    while let Some(at) = rest.find(escaped) {
        out.push_str(&rest[..at]);
        let c = rest[at..].chars().next().expect("a char at a match");
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push_str(&format!("\\u{:04x}", c as u32)),
        }
        rest = &rest[at + c.len_utf8()..];
    }
    out.push_str(rest);
    out.push('"');
}

/// Go reports `r.URL.Path` decoded; decode `%XX` the same way.
fn percent_decode(path: &str) -> String {
    if !path.contains('%') {
        return path.to_string();
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_keys_are_canonical_as_go_prints_them() {
        assert_eq!(
            canonical_header_key("x-custom-goplugin"),
            "X-Custom-Goplugin"
        );
        assert_eq!(canonical_header_key("user-agent"), "User-Agent");
        assert_eq!(canonical_header_key("x-jsvm"), "X-Jsvm");
        assert_eq!(canonical_header_key("bad header"), "bad header");
    }

    #[test]
    fn echo_matches_go_encoder_output() {
        let mut h = HeaderMap::new();
        h.insert("host", "localhost:8222".parse().unwrap());
        h.insert("x-custom-goplugin", "hello-from-go-plugin".parse().unwrap());
        h.insert("accept", "*/*".parse().unwrap());
        h.append("accept", "text/html".parse().unwrap());
        h.insert("x-html", "<a&b>".parse().unwrap());
        assert_eq!(
            echo_json("GET", "/hello%20there/", &h),
            "{\"headers\":{\"Accept\":\"*/*\",\"X-Custom-Goplugin\":\"hello-from-go-plugin\",\
             \"X-Html\":\"\\u003ca\\u0026b\\u003e\"},\"message\":\"hello from mock upstream\",\
             \"method\":\"GET\",\"path\":\"/hello there/\"}\n"
        );
    }

    #[test]
    fn extras_go_where_sorted_keys_put_them() {
        let seed = echo_json("POST", "/p", &HeaderMap::new());
        let both = Echo {
            query: true,
            body: true,
        };
        let out = with_extras(&seed, both, "a=1&b=2", b"hi \"there\"");
        assert_eq!(
            out,
            "{\"body\":\"hi \\\"there\\\"\",\"headers\":{},\"message\":\"hello from mock upstream\",\
             \"method\":\"POST\",\"path\":\"/p\",\"query\":\"a=1\\u0026b=2\"}\n"
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["query"], "a=1&b=2");
        assert_eq!(Echo::parse("query,body").unwrap(), both);
        assert_eq!(Echo::parse("").unwrap(), Echo::default());
        assert!(Echo::parse("cookies").unwrap_err().contains("cookies"));
    }

    #[test]
    fn percent_decoding_leaves_malformed_escapes() {
        assert_eq!(percent_decode("/a%2Fb%zz%4"), "/a/b%zz%4");
    }
}
