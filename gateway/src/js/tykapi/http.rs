//! The blocking HTTP/1.1 client behind `TykMakeHttpRequest` and
//! `TykBatchRequest`: hyper's client connection on a current-thread tokio
//! runtime that each VM thread builds once, so a call is one `block_on`.
//!
//! Why not the gateway's upstream pool: it belongs to an I/O worker (its
//! connections are driven by that worker's runtime), and Tyk itself opens a
//! new connection per call (a new `http.Transport`, `Connection: close` for
//! `TykMakeHttpRequest`). Why hyper rather than another client crate: it is
//! already here, and it does HTTP/1.1 framing (chunked, keep-alive, header
//! case) right.
//!
//! As Go's `http.Client`: redirects are followed (at most 10; 301/302/303
//! turn the request into a GET without body), `User-Agent:
//! Go-http-client/1.1` is sent when the script sets none, header names go
//! out in canonical case. Plain `http://` only: an `https://` target is an
//! error (there is no TLS client in this gateway).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, HOST, LOCATION, USER_AGENT};
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

// Interim (1xx) answers taken before the final one, as Go's client.
use crate::h1up::MAX_INTERIM;

/// The most response body a call reads, or a batch reads in all its
/// replies together; past it the call (the batch) fails.
pub(crate) const MAX_RESPONSE_BODY: usize = 32 << 20;

/// What a call, or every request of one batch together, may still read of
/// response bodies ([`MAX_RESPONSE_BODY`]). A batch's replies were bounded
/// one by one only: any number of 32 MiB replies, held at once outside the
/// script's heap count (20 of them peaked at 1.2 GB for one request).
#[derive(Clone)]
pub(crate) struct BodyBudget(Arc<AtomicUsize>);

impl BodyBudget {
    pub(crate) fn new() -> BodyBudget {
        BodyBudget(Arc::new(AtomicUsize::new(MAX_RESPONSE_BODY)))
    }

    /// Takes `n` bytes; false (nothing taken) when fewer are left.
    fn take(&self, n: usize) -> bool {
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(n)
            })
            .is_ok()
    }

    /// Gives back `n` bytes taken for a body that was dropped (a redirect's).
    fn give_back(&self, n: usize) {
        self.0.fetch_add(n, Ordering::SeqCst);
    }
}

/// Go's `http.Client` limit.
const MAX_REDIRECTS: usize = 10;

/// One outgoing request, as a script described it.
#[derive(Clone)]
pub(crate) struct Outgoing {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    /// Names as the script wrote them; sent in canonical case.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Bytes,
    /// Send `Connection: close` (Tyk's `r.Close = true`).
    pub(crate) close: bool,
}

/// What came back: status, headers (Go's `http.Header`: canonical name to
/// every value, keys sorted as Go's JSON encoder writes a map), body.
pub(crate) struct Reply {
    pub(crate) code: u16,
    pub(crate) headers: BTreeMap<String, Vec<String>>,
    pub(crate) body: String,
}

thread_local! {
    /// This thread's runtime, built on the first call.
    static RUNTIME: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
}

/// Runs `fut` to completion on this thread's runtime, or fails at `deadline`.
pub(crate) fn block_on<F, T>(deadline: Instant, fut: F) -> Result<T, String>
where
    F: std::future::Future<Output = Result<T, String>>,
{
    RUNTIME.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()
                .map_err(|e| format!("cannot start the HTTP client runtime: {e}"))?;
            *slot = Some(rt);
        }
        let rt = slot.as_ref().expect("just built");
        let until = tokio::time::Instant::from_std(deadline);
        rt.block_on(async move {
            tokio::time::timeout_at(until, fut)
                .await
                .unwrap_or_else(|_| Err("timed out at the middleware call's deadline".into()))
        })
    })
}

/// Sends `out`, following redirects as Go's client does, reading bodies
/// within `budget`.
pub(crate) async fn fetch(mut out: Outgoing, budget: &BodyBudget) -> Result<Reply, String> {
    // The script's headers, and the host it meant its credentials for.
    let asked = out.headers.clone();
    let initial = out.uri.host().unwrap_or_default().to_ascii_lowercase();
    for _ in 0..=MAX_REDIRECTS {
        let (status, headers, body) = send_once(&out, budget).await?;
        let location = headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .filter(|_| status.is_redirection() && status != StatusCode::NOT_MODIFIED);
        let Some(location) = location else {
            return Ok(reply(status, &headers, &body));
        };
        budget.give_back(body.len());
        out.uri = resolve(&out.uri, location)?;
        let trusted = same_domain(&out.uri, &initial);
        out.headers = asked
            .iter()
            .filter(|(name, _)| trusted || !credential(name))
            .cloned()
            .collect();
        if matches!(status.as_u16(), 301..=303) && out.method != Method::HEAD {
            out.method = Method::GET;
            out.body = Bytes::new();
        }
    }
    Err(format!("stopped after {MAX_REDIRECTS} redirects"))
}

/// Headers Go's client sends on a redirect only to the initial host or a
/// subdomain of it. They were sent to wherever a service redirected: a
/// script's `Authorization: Bearer ...` reached any host a redirect named.
fn credential(name: &str) -> bool {
    ["Authorization", "Www-Authenticate", "Cookie", "Cookie2"]
        .iter()
        .any(|c| c.eq_ignore_ascii_case(name))
}

/// Whether `dest`'s host is `initial` or a subdomain of it (Go's
/// `isDomainOrSubdomain`; an IPv6 address only when equal).
fn same_domain(dest: &Uri, initial: &str) -> bool {
    let host = dest.host().unwrap_or_default().to_ascii_lowercase();
    host == initial
        || (!host.contains([':', '%'])
            && host
                .strip_suffix(initial)
                .is_some_and(|sub| sub.ends_with('.')))
}

/// One request on a new connection.
async fn send_once(
    out: &Outgoing,
    budget: &BodyBudget,
) -> Result<(StatusCode, HeaderMap, Bytes), String> {
    let (host, port, authority) = target(&out.uri)?;
    let stream = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake::<_, Full<Bytes>>(TokioIo::new(stream))
        .await
        .map_err(|e| format!("{authority}: {e}"))?;
    // The connection task ends with the exchange (or when dropped below).
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = build(out, &authority)?;
    // Go's client takes at most `MAX_INTERIM` interim (1xx) answers before
    // the final one; hyper's skips them without end: a service sending
    // them forever held the call, its VM thread parsing, until the
    // deadline.
    let interim = crate::h1up::Interim::watch(&mut req);
    let result = async {
        let resp = match interim.race(sender.send_request(req)).await {
            Ok(resp) => resp,
            Err(Some(e)) => return Err(format!("{authority}: {e}")),
            Err(None) => {
                return Err(format!(
                    "{authority}: more than {MAX_INTERIM} interim (1xx) answers"
                ))
            }
        };
        let (parts, mut body) = resp.into_parts();
        let mut read = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("reading the response of {authority}: {e}"))?;
            if let Ok(data) = frame.into_data() {
                if !budget.take(data.len()) {
                    return Err(format!(
                        "reading the response of {authority}: response bodies over {} MiB (one call's, or one batch's together)",
                        MAX_RESPONSE_BODY >> 20
                    ));
                }
                read.extend_from_slice(&data);
            }
        }
        Ok((parts.status, parts.headers, Bytes::from(read)))
    }
    .await;
    driver.abort();
    result
}

/// Host, port and `host:port` of an absolute `http://` URI.
fn target(uri: &Uri) -> Result<(String, u16, String), String> {
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(format!(
                "{uri}: https is not supported (this gateway has no TLS client)"
            ))
        }
        Some(other) => return Err(format!("{uri}: unsupported protocol scheme {other:?}")),
        None => return Err(format!("{uri}: unsupported protocol scheme \"\"")),
    }
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("{uri}: no host"))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(80);
    // Go's `URL.Host`: the authority without its userinfo, which Go's
    // client sends as `Authorization: Basic` instead ([`userinfo`]).
    let authority = uri.authority().map_or(host.clone(), |a| {
        a.as_str()
            .rsplit_once('@')
            .map_or(a.as_str(), |(_, hostport)| hostport)
            .to_string()
    });
    Ok((host, port, authority))
}

/// The `Authorization: Basic` value Go's client sends for a URL's
/// userinfo (`http://user:pass@host/`, percent-escapes decoded) when the
/// request has no `Authorization` of its own. The userinfo went out in
/// the `Host` header instead, credentials and all.
fn userinfo(uri: &Uri) -> Option<HeaderValue> {
    use base64::Engine as _;
    let (info, _) = uri.authority()?.as_str().rsplit_once('@')?;
    let (user, pass) = info.split_once(':').unwrap_or((info, ""));
    let pair = format!(
        "{}:{}",
        crate::path::decode(user),
        crate::path::decode(pass)
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    HeaderValue::from_str(&format!("Basic {encoded}")).ok()
}

fn build(out: &Outgoing, authority: &str) -> Result<Request<Full<Bytes>>, String> {
    let path = out.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let mut req = Request::builder()
        .method(out.method.clone())
        .uri(path)
        .body(Full::new(out.body.clone()))
        .map_err(|e| format!("cannot build the request: {e}"))?;
    let headers = req.headers_mut();
    for (name, value) in &out.headers {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("Headers: {name:?} is not a valid header name"))?;
        let v = HeaderValue::from_str(value)
            .map_err(|_| format!("Headers[{name:?}]: value not allowed in a header"))?;
        // Go sends the URL's host, whatever `Header["Host"]` says.
        if n != HOST {
            headers
                .try_insert(n, v)
                .map_err(|_| "Headers: too many header fields (at most 32,768)".to_string())?;
        }
    }
    let host = HeaderValue::from_str(authority).map_err(|e| e.to_string())?;
    headers.insert(HOST, host);
    if let Some(basic) = userinfo(&out.uri) {
        headers.entry(http::header::AUTHORIZATION).or_insert(basic);
    }
    headers
        .entry(USER_AGENT)
        .or_insert(HeaderValue::from_static("Go-http-client/1.1"));
    if !out.body.is_empty() || !matches!(out.method, Method::GET | Method::HEAD) {
        headers.insert(http::header::CONTENT_LENGTH, out.body.len().into());
    }
    if out.close {
        headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(req)
}

/// A redirect's `Location` against the URI that answered it.
fn resolve(base: &Uri, location: &str) -> Result<Uri, String> {
    if location.contains("://") {
        return location
            .parse()
            .map_err(|e| format!("redirect to {location:?}: {e}"));
    }
    let scheme = base.scheme_str().unwrap_or("http");
    let authority = base.authority().map_or("", |a| a.as_str());
    let path = if location.starts_with('/') {
        location.to_string()
    } else {
        let dir = base.path().rsplit_once('/').map_or("", |(d, _)| d);
        format!("{dir}/{location}")
    };
    format!("{scheme}://{authority}{path}")
        .parse()
        .map_err(|e| format!("redirect to {location:?}: {e}"))
}

/// The reply as Go's client hands it over: `Transfer-Encoding` is not a
/// header there (it is `resp.TransferEncoding`), everything else is.
fn reply(status: StatusCode, headers: &HeaderMap, body: &Bytes) -> Reply {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if name == http::header::TRANSFER_ENCODING {
            continue;
        }
        map.entry(crate::js::request::canonical(name.as_str()))
            .or_default()
            .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
    }
    Reply {
        code: status.as_u16(),
        headers: map,
        body: String::from_utf8_lossy(body).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{build, resolve, target, Outgoing};

    /// As Go's client, credentials follow a redirect only to the initial
    /// host or a subdomain of it.
    #[test]
    fn credentials_follow_redirects_only_within_the_domain() {
        use super::{credential, same_domain};
        let at = |u: &str| u.parse::<http::Uri>().unwrap();
        assert!(same_domain(
            &at("http://Api.Example.com:9/x"),
            "example.com"
        ));
        assert!(same_domain(&at("http://example.com/x"), "example.com"));
        assert!(!same_domain(&at("http://badexample.com/"), "example.com"));
        assert!(!same_domain(&at("http://localhost:1/"), "127.0.0.1"));
        assert!(same_domain(&at("http://127.0.0.1:2/"), "127.0.0.1"));
        assert!(credential("authorization") && credential("COOKIE"));
        assert!(!credential("X-Api-Key"));
    }

    /// As Go's client: the userinfo is `Authorization: Basic`, never part of
    /// `Host`; a script's own `Authorization` wins.
    #[test]
    fn userinfo_is_basic_auth_not_part_of_the_host() {
        let uri: http::Uri = "http://us%65r:p%40ss@h:1/x".parse().unwrap();
        let (_, _, authority) = target(&uri).unwrap();
        assert_eq!(authority, "h:1");
        let mut out = Outgoing {
            method: http::Method::GET,
            uri,
            headers: Vec::new(),
            body: bytes::Bytes::new(),
            close: true,
        };
        let req = build(&out, &authority).unwrap();
        assert_eq!(req.headers()["host"], "h:1");
        // base64 of "user:p@ss".
        assert_eq!(req.headers()["authorization"], "Basic dXNlcjpwQHNz");
        out.headers = vec![("Authorization".into(), "Bearer t".into())];
        let req = build(&out, &authority).unwrap();
        assert_eq!(req.headers()["authorization"], "Bearer t");
    }

    #[test]
    fn redirects_resolve_as_urls_do() {
        let base: http::Uri = "http://h:1/a/b?q".parse().unwrap();
        assert_eq!(resolve(&base, "/x").unwrap().to_string(), "http://h:1/x");
        assert_eq!(resolve(&base, "c").unwrap().to_string(), "http://h:1/a/c");
        assert_eq!(
            resolve(&base, "http://o/p").unwrap().to_string(),
            "http://o/p"
        );
    }
}
