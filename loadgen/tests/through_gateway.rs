//! Every request sent twice, as hyper's `t!` harness does: straight to the
//! real mock-upstream, and through a real gateway's `/plain/` route (no
//! middleware) in front of the same upstream. The upstream's echo shows what
//! it saw each time; the two must be the same request but for what the
//! README documents a proxy changes:
//! - `X-Forwarded-For` gets the client's address (appended to one list when
//!   the client sent one), and `Via` gets this gateway's entry;
//! - `User-Agent: Tyk/…` is added only when the client sent none;
//! - hop-by-hop headers (`Connection`, `Keep-Alive`, `TE` but `TE: trailers`,
//!   `Transfer-Encoding`, and any header `Connection` names) do not cross;
//! - a chunked body may be re-framed: the bytes must match, not the framing.
//!
//! Everything else (method, path, query, body, every other header and its
//! value) must arrive unchanged.

mod common;

use std::net::SocketAddr;
use std::path::Path;

use common::bins::start_ready;
use common::exchange;
use loadgen::bench::procs::Child;
use serde_json::{Map, Value};

/// One request of the table. `path` is what the upstream should see; the
/// gateway is sent `/plain` + `path`.
struct Case {
    name: &'static str,
    method: &'static str,
    path: &'static str,
    version: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: Body,
}

enum Body {
    None,
    /// Framed by `Content-Length`.
    Length(Vec<u8>),
    /// Chunked, in pieces of this size.
    Chunked(Vec<u8>, usize),
}

fn cases() -> Vec<Case> {
    let big: Vec<u8> = (0..100 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let close = &[("Connection", "close")][..];
    vec![
        Case {
            name: "GET with odd-case headers and a query",
            method: "GET",
            path: "/hello/odd?b=2&a=%20x",
            version: "HTTP/1.1",
            headers: &[
                ("x-ODD-case", "Value With Spaces"),
                ("ACCEPT", "text/plain"),
                ("x-multi", "first"),
                ("X-Multi", "second"),
                ("X_Under", "1"),
                ("User-Agent", "client/1"),
                ("Connection", "close"),
            ],
            body: Body::None,
        },
        Case {
            name: "POST with a Content-Length body",
            method: "POST",
            path: "/hello/post",
            version: "HTTP/1.1",
            headers: &[
                ("Content-Type", "application/json"),
                ("User-Agent", "client/1"),
                ("Connection", "close"),
            ],
            body: Body::Length(br#"{"a":[1,2,3],"s":"<&>"}"#.to_vec()),
        },
        Case {
            name: "PUT with a chunked 100 KiB body",
            method: "PUT",
            path: "/hello/put",
            version: "HTTP/1.1",
            headers: &[("User-Agent", "client/1"), ("Connection", "close")],
            body: Body::Chunked(big, 7001),
        },
        Case {
            name: "PATCH with an empty body",
            method: "PATCH",
            path: "/hello/patch",
            version: "HTTP/1.1",
            headers: close,
            body: Body::Length(Vec::new()),
        },
        Case {
            name: "DELETE with hop-by-hop headers and a forwarded-for",
            method: "DELETE",
            path: "/hello/a%20b/",
            version: "HTTP/1.1",
            headers: &[
                ("Connection", "close, X-Hop-Only"),
                ("X-Hop-Only", "dropped"),
                ("Keep-Alive", "timeout=5"),
                ("TE", "trailers"),
                ("X-Forwarded-For", "10.0.0.1"),
                ("User-Agent", "client/1"),
            ],
            body: Body::None,
        },
        Case {
            name: "OPTIONS, HTTP/1.0 without Host or User-Agent",
            method: "OPTIONS",
            path: "/hello/ten",
            version: "HTTP/1.0",
            headers: &[("X-Ten", "1.0")],
            body: Body::None,
        },
    ]
}

/// The request's bytes, sent to `prefix` + the case's path.
fn encode(c: &Case, prefix: &str) -> Vec<u8> {
    let mut out = format!("{} {prefix}{} {}\r\n", c.method, c.path, c.version);
    if c.version == "HTTP/1.1" {
        out.push_str("Host: h\r\n");
    }
    for (n, v) in c.headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    let mut out = out.into_bytes();
    match &c.body {
        Body::None => out.extend_from_slice(b"\r\n"),
        Body::Length(b) => {
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
        }
        Body::Chunked(b, size) => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for piece in b.chunks(*size) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    out
}

/// The upstream's echo of what it saw.
fn echo(addr: SocketAddr, request: &[u8], name: &str) -> Map<String, Value> {
    let (status, body) = exchange(addr, request);
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{name}: {text}");
    match serde_json::from_slice(&body) {
        Ok(Value::Object(m)) => m,
        _ => panic!("{name}: not an echo: {text}"),
    }
}

/// A running mock-upstream and a gateway whose `/plain/` route proxies to it.
struct Pair {
    upstream: SocketAddr,
    gateway: SocketAddr,
    _children: (Child, Child),
}

fn start(dir: &Path) -> Pair {
    let up = [
        "--listen",
        "127.0.0.1:0",
        "--threads",
        "1",
        "--echo",
        "query,body",
    ];
    let (up, upstream) = start_ready("mock-upstream", &up, dir, "/");
    let apis = dir.join("apis");
    std::fs::create_dir_all(&apis).unwrap();
    let def = serde_json::json!({
        "name": "Plain", "api_id": "plain", "org_id": "default", "active": true,
        "use_keyless": true,
        "proxy": {"listen_path": "/plain/", "target_url": format!("http://{upstream}"),
                  "strip_listen_path": true}
    });
    std::fs::write(apis.join("plain.json"), def.to_string()).unwrap();
    let gw = ["--apis", apis.to_str().unwrap(), "--listen", "127.0.0.1:0"];
    let (gw, gateway) = start_ready("gateway", &gw, dir, "/hello");
    Pair {
        upstream,
        gateway,
        _children: (up, gw),
    }
}

/// Checks the documented differences of the proxied echo's headers and
/// removes them, so that what is left must equal the direct echo's.
fn undo_proxy_edits(c: &Case, direct: &mut Map<String, Value>, proxied: &mut Map<String, Value>) {
    let name = c.name;
    let (d, p) = (
        direct["headers"].as_object_mut().unwrap(),
        proxied["headers"].as_object_mut().unwrap(),
    );
    // The client's address, last in one folded list.
    let xff = p
        .remove("X-Forwarded-For")
        .unwrap_or_else(|| panic!("{name}: no XFF"));
    let want = match d.remove("X-Forwarded-For") {
        Some(Value::String(sent)) => format!("{sent}, 127.0.0.1"),
        _ => "127.0.0.1".into(),
    };
    assert_eq!(xff, want, "{name}");
    let via = p.remove("Via").unwrap_or_else(|| panic!("{name}: no Via"));
    assert!(
        via.as_str().unwrap().starts_with("1.1 gw-"),
        "{name}: {via}"
    );
    // Tyk's User-Agent, only where the client sent none.
    if !d.contains_key("User-Agent") {
        let ua = p
            .remove("User-Agent")
            .unwrap_or_else(|| panic!("{name}: no UA"));
        assert!(ua.as_str().unwrap().starts_with("Tyk/"), "{name}: {ua}");
    }
    // A chunked body is framed anew on the upstream hop (chunked again, or
    // by length): the framing headers are that hop's; the bytes are
    // compared below.
    if matches!(c.body, Body::Chunked(..)) {
        for framing in ["Content-Length", "Transfer-Encoding"] {
            d.remove(framing);
            p.remove(framing);
        }
    }
    // Hop-by-hop headers stay on the client's hop (TE: trailers excepted).
    let named: Vec<String> = d
        .get("Connection")
        .and_then(Value::as_str)
        .map(|v| v.split(',').map(|t| t.trim().to_string()).collect())
        .unwrap_or_default();
    for hop in ["Connection", "Keep-Alive", "Transfer-Encoding"]
        .into_iter()
        .map(String::from)
        .chain(named.into_iter().filter(|n| n != "close"))
    {
        assert!(!p.contains_key(&hop), "{name}: {hop} crossed the proxy");
        d.remove(&hop);
    }
}

#[test]
fn the_upstream_sees_the_same_request_direct_and_through_the_gateway() {
    let tmp = tempfile::tempdir().unwrap();
    let pair = start(tmp.path());
    for c in cases() {
        let mut direct = echo(pair.upstream, &encode(&c, ""), c.name);
        let mut proxied = echo(pair.gateway, &encode(&c, "/plain"), c.name);
        // The echo shows what was sent: the table is not empty of meaning.
        if let Body::Length(b) | Body::Chunked(b, _) = &c.body {
            assert_eq!(direct["body"], *String::from_utf8_lossy(b), "{}", c.name);
        }
        assert_eq!(direct["method"], c.method, "{}", c.name);
        undo_proxy_edits(&c, &mut direct, &mut proxied);
        assert_eq!(
            Value::Object(proxied),
            Value::Object(direct),
            "{}: the upstream saw a different request through the gateway",
            c.name
        );
    }
}
