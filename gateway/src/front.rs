//! The front door: what every request passes before it is routed.
//!
//! ```text
//! check the head (Host; framing headers in crate::wire) -> clean the path (301 as Tyk's mux)
//!       -> the gateway's own endpoints (/hello, /tyk/) -> proxy
//! ```
//!
//! The control API is matched here on the cleaned path, after a redirect
//! has taken care of `//tyk/` and `/x/../tyk/`, with unreserved escapes
//! decoded (`/%74yk/`) and in any letter case (`/TYK/`): no spelling of
//! `/tyk/` can reach a catch-all API's upstream.

use std::borrow::Cow;
use std::net::SocketAddr;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{Either, Full};

use crate::body::ClientIn;
use crate::control::Control;
use crate::error::{ErrorFormat, Kind, Origin, ProxyError};
use crate::path::{self, Cleaned};
use crate::proxy::{ClientBody, Proxy};

/// Serves one request from a client connection.
pub async fn serve(
    proxy: &Proxy,
    control: &Control,
    req: Request<ClientIn>,
    remote: SocketAddr,
) -> Response<ClientBody> {
    if let Err(e) = check_head(&req) {
        return refused(&req, remote, e);
    }
    let cleaned = match path::clean(req.uri().path(), req.uri().query()) {
        Cleaned::Route(Cow::Borrowed(_)) => None,
        Cleaned::Route(Cow::Owned(p)) => Some(Ok(p)),
        Cleaned::Redirect(location) => Some(Err(location)),
        Cleaned::BadEscape => {
            let why = "the path has a % that starts no escape (two hex digits)";
            let e = ProxyError::with_cause(Kind::BadRequest, Origin::Client, why);
            return refused(&req, remote, e);
        }
    };
    let (req, slashes) = match cleaned {
        None => (req, None),
        Some(Ok(p)) => match path::slashes_decoded(&p) {
            None => (with_path(req, p), None),
            Some(decoded) => {
                // Matched as mux matches it (`%2F` is a `/`), sent on with
                // the escapes after the listen path as the client wrote them.
                let routed = proxy
                    .router
                    .find(&decoded)
                    .and_then(|r| path::aligned(&p, &r.spec.listen_path));
                (with_path(req, routed.unwrap_or(p)), Some(decoded))
            }
        },
        Some(Err(location)) => return redirect(&location),
    };
    let path = slashes.as_deref().unwrap_or(req.uri().path());
    if let Some(resp) = control.handle(req.method(), path, req.headers()) {
        return full(resp);
    }
    proxy.handle(req, remote).await
}

/// Answers a request whose head [`crate::wire`] refused (framing headers
/// that could be read two ways: 400; a transfer coding besides `chunked`:
/// 501; a version other than HTTP/1.x: 505);
/// the connection closes after it.
pub fn refuse<B>(
    req: &Request<B>,
    remote: SocketAddr,
    fault: crate::wire::HeadFault,
) -> Response<ClientBody> {
    let kind = match fault {
        crate::wire::HeadFault::Version(..) => Kind::VersionNotSupported,
        crate::wire::HeadFault::Coding => Kind::CodingNotImplemented,
        _ => Kind::BadRequest,
    };
    refused(
        req,
        remote,
        ProxyError::with_cause(kind, Origin::Client, fault.to_string()),
    )
}

/// The answer to a request refused for the client's fault, logged once:
/// the connection's last, as Go's server and nginx close after a request
/// they refuse (a refused `Host` kept the connection open). Any client can
/// cause these lines, so they are bounded (`--log-rate`).
fn refused<B>(req: &Request<B>, remote: SocketAddr, e: ProxyError) -> Response<ClientBody> {
    static GATE: crate::lograte::LogGate = crate::lograte::LogGate::new();
    if let Some(left_out) = GATE.admit() {
        tracing::info!(
            "request from {remote} refused (client error): {e}{}",
            crate::lograte::LeftOut(left_out)
        );
    }
    let mut resp = full(e.response(ErrorFormat::of(req.headers())));
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// Refuses heads nginx refuses: a missing `Host` on HTTP/1.1, more than
/// one `Host` (which would reach the upstream twice), and `CONNECT`. Two
/// `Content-Length`s, or one with `Transfer-Encoding`, are refused before
/// hyper has read them (it keeps one of each): see [`crate::wire`].
fn check_head<B>(req: &Request<B>) -> Result<(), ProxyError> {
    let refuse = |why: String| {
        Err(ProxyError::with_cause(
            Kind::BadRequest,
            Origin::Client,
            why,
        ))
    };
    // A scan of the few headers a request has, not a hashed lookup.
    let (mut hosts, mut malformed) = (0, false);
    let mut expect = None;
    for (n, v) in req.headers() {
        if *n == header::HOST {
            hosts += 1;
            malformed |= !v.as_bytes().iter().all(|&b| HOST_BYTE[usize::from(b)]);
        } else if *n == header::EXPECT && expect.is_none() {
            expect = Some(v);
        }
    }
    if let Some(v) = expect {
        unmet_expectation(v)?;
    }
    if hosts > 1 {
        return refuse(format!("the request has {hosts} Host headers"));
    }
    if malformed {
        return refuse("the Host header has a byte no host name or address has".into());
    }
    if hosts == 0 && req.version() == http::Version::HTTP_11 {
        return refuse("an HTTP/1.1 request without a Host header".into());
    }
    // A tunnel is not proxied (nginx: 405). Sent on, an upstream's 2xx
    // made hyper take the connection for a tunnel: the client got no
    // answer at all.
    if req.method() == http::Method::CONNECT {
        return Err(ProxyError::with_cause(
            Kind::MethodNotAllowed,
            Origin::Client,
            "CONNECT: this gateway proxies requests, not tunnels",
        ));
    }
    Ok(())
}

/// Go's server (so Tyk) meets one expectation, `100-continue` (a token of
/// the first `Expect` line, in any letter case); any other non-empty one
/// gets 417 and the connection closes, before a handler runs. Sent on, an
/// upstream could read a request its client meant only if its expectation
/// was met.
#[cold]
fn unmet_expectation(v: &http::HeaderValue) -> Result<(), ProxyError> {
    let value = v.as_bytes().trim_ascii();
    let continues = value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"100-continue"));
    if value.is_empty() || continues {
        return Ok(());
    }
    Err(ProxyError::with_cause(
        Kind::ExpectationFailed,
        Origin::Client,
        format!(
            "Expect: {:?} is not 100-continue",
            String::from_utf8_lossy(value)
        ),
    ))
}

/// The bytes a `Host` value may have, as Go's server (so Tyk) allows
/// them (`httpguts.ValidHostHeader`: what a host name, an IP literal, a
/// port and a percent-escaped zone use); anything else (a space, `@`, `/`,
/// a control byte, non-ASCII) gets 400 there and here.
const HOST_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let punctuation = b"!$%&'()*+,-.:;=[]_~";
    let mut i = 0;
    while i < punctuation.len() {
        t[punctuation[i] as usize] = true;
        i += 1;
    }
    t
};

/// The request with its path replaced by the normalised one (query kept).
fn with_path<B>(req: Request<B>, path: String) -> Request<B> {
    let (mut parts, body) = req.into_parts();
    let pq = match parts.uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    // Built from a path that parsed a moment ago with fewer escapes.
    if let Ok(uri) = Uri::try_from(pq) {
        parts.uri = uri;
    }
    Request::from_parts(parts, body)
}

/// gorilla/mux's answer to an uncleaned path: 301, `Location`, no body.
fn redirect(location: &str) -> Response<ClientBody> {
    let mut resp = Response::new(Either::Right(Full::new(Bytes::new())));
    *resp.status_mut() = StatusCode::MOVED_PERMANENTLY;
    if let Ok(v) = HeaderValue::from_str(location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

fn full(resp: Response<Bytes>) -> Response<ClientBody> {
    resp.map(|b| Either::Right(Full::new(b)))
}
