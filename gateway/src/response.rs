//! The two phases that produce an answer rather than pass a request on:
//! virtual endpoints (after `pre`, in place of the upstream) and response
//! middleware (after the upstream answered).
//!
//! ```text
//! pre -> [virtual endpoint matches? -> its answer -> response chain -> client]
//!     -> post -> upstream -> [response chain, when the API has one] -> client
//! ```
//!
//! Only an API with response middleware buffers the upstream's body, up to
//! [`MAX_BUFFERED_RESPONSE`]; a larger body, or one the upstream breaks
//! off, is answered `500 Middleware error`, as Tyk answers a response hook
//! that cannot read the body. The buffered body counts towards
//! `--max-buffered-bodies` (503 beyond) until the client has been sent it. A virtual endpoint's answer, and a JS `post`
//! hook's forced `ReturnOverrides` answer, go through the response chain
//! too, as Tyk's `forceResponse` runs it (a `pre` hook's does not).

use std::sync::Arc;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::Response;
use http_body_util::{Either, Full};

use crate::body::{collect_held, Buffered, HeldError, Share};
use crate::config::Hook;
use crate::error::{Kind, Origin, ProxyError};
use crate::middleware::{ApiChain, MwRequest, MwResponse};
use crate::proxy::{ClientBody, Route};

/// Largest upstream body buffered for response middleware (32 MiB, the
/// request side's limit).
pub const MAX_BUFFERED_RESPONSE: usize = 32 << 20;

/// The upstream's `resp` through the API's response chain; unchanged
/// (still streaming) when the API has none. `req` is the request as it
/// went upstream (its body is not needed).
pub async fn upstream_answer(
    chain: &ApiChain,
    req: &MwRequest,
    resp: Response<ClientBody>,
    buffered: &Arc<Buffered>,
) -> Result<Response<ClientBody>, ProxyError> {
    if !chain.has(Hook::Response) {
        return Ok(resp);
    }
    let (parts, body) = resp.into_parts();
    let (body, share) = collect(body, buffered).await?;
    let mw = MwResponse {
        status: parts.status,
        headers: parts.headers,
        body,
    };
    run_chain(chain, req, mw, share).await
}

/// The upstream's whole body, up to [`MAX_BUFFERED_RESPONSE`] (500
/// beyond) and within `--max-buffered-bodies` (503 beyond), with the share
/// of that bound it holds.
async fn collect(
    body: ClientBody,
    buffered: &Arc<Buffered>,
) -> Result<(Bytes, Option<Share>), ProxyError> {
    let failed = |cause: String| {
        ProxyError::with_cause(Kind::ResponseMiddlewareFailed, Origin::Upstream, cause)
    };
    collect_held(body, MAX_BUFFERED_RESPONSE, buffered)
        .await
        .map_err(|e| match e {
            HeldError::Read(e) => failed(format!(
                "reading the upstream's response body for response middleware: {e}"
            )),
            HeldError::TooLarge => failed(format!(
                "the upstream's response body is larger than the {} MiB buffered for response middleware",
                MAX_BUFFERED_RESPONSE >> 20
            )),
            HeldError::Overloaded => crate::proxy::overloaded(buffered, "response"),
        })
}

/// A forced response from `post` (Tyk's `forceResponse` with `isPre`
/// false) through the response chain; `req` is the request as `post` left
/// it, without its body.
pub async fn forced_answer(
    chain: &ApiChain,
    req: &MwRequest,
    mw: MwResponse,
) -> Result<Response<ClientBody>, ProxyError> {
    run_chain(chain, req, mw, None).await
}

/// Runs the response chain on `mw` and makes the client's response. The
/// `share` of `--max-buffered-bodies` that held the upstream's body is
/// held by the body the chain leaves until the client has been sent it
/// (or has gone): a client that reads slowly, or not at all, still holds
/// the bytes.
async fn run_chain(
    chain: &ApiChain,
    req: &MwRequest,
    mut mw: MwResponse,
    share: Option<Share>,
) -> Result<Response<ClientBody>, ProxyError> {
    if chain.has(Hook::Response) {
        chain.run_response(req, &mut mw).await.map_err(|e| {
            ProxyError::reported(Kind::ResponseMiddlewareFailed, Origin::Middleware, e)
        })?;
    }
    let body = match share {
        Some(mut share) if !mw.body.is_empty() => {
            // A body the chain made bigger keeps the upstream's count: the
            // middleware's own bytes are not bounded here (nor are those
            // it makes on the request side).
            share.shrink_to(mw.body.len());
            held(mw.body, share)
        }
        _ => mw.body,
    };
    let mut resp = Response::new(Either::Right(Full::new(body)));
    *resp.status_mut() = mw.status;
    *resp.headers_mut() = mw.headers;
    crate::upstream::remove_hop_by_hop(resp.headers_mut());
    // The body is whole and may have changed: hyper frames it from its
    // length; a stale Content-Length or chunked encoding would corrupt it.
    resp.headers_mut().remove(CONTENT_LENGTH);
    resp.headers_mut().remove(TRANSFER_ENCODING);
    Ok(resp)
}

/// The virtual endpoint that answers `req` on `route`, if one matches its
/// method and path: its answer through the response chain. `Ok(None)`
/// when none matches, or when the matching one failed with
/// `proxy_on_error` (the request then carries on to `post` and upstream).
pub async fn virtual_endpoint(
    route: &Route,
    chain: &ApiChain,
    req: &MwRequest,
) -> Result<Option<Response<ClientBody>>, ProxyError> {
    let spec = &route.spec;
    if !chain.has(Hook::Virtual) {
        return Ok(None);
    }
    let found = spec
        .virtual_endpoints
        .iter()
        .position(|v| v.matches(req.method.as_str(), &spec.listen_path, req.path()));
    let Some(index) = found else {
        return Ok(None);
    };
    match chain.run_endpoint(index, req).await {
        Ok(answer) => run_chain(chain, req, answer, None).await.map(Some),
        Err(e) if spec.virtual_endpoints[index].proxy_on_error => {
            static GATE: crate::lograte::LogGate = crate::lograte::LogGate::new();
            if let Some(left_out) = GATE.admit() {
                tracing::info!(
                    "API {}: virtual endpoint {} failed; proxying the request (proxy_on_error): {e}{}",
                    spec.api_id,
                    spec.virtual_endpoints[index].function,
                    crate::lograte::LeftOut(left_out)
                );
            }
            Ok(None)
        }
        Err(e) => Err(ProxyError::reported(
            Kind::VirtualEndpointFailed,
            Origin::Middleware,
            e,
        )),
    }
}

/// `body` holding `share` for as long as any copy of it lives (the frame
/// the server writes included).
fn held(body: Bytes, share: Share) -> Bytes {
    struct Held {
        body: Bytes,
        _share: Share,
    }
    impl AsRef<[u8]> for Held {
        fn as_ref(&self) -> &[u8] {
            &self.body
        }
    }
    Bytes::from_owner(Held {
        body,
        _share: share,
    })
}

/// True when the API's chain has response middleware and nothing that
/// reads the request (no `pre`, `post` or virtual endpoint): its request
/// body can stream to the upstream unbuffered.
pub fn only_response(chain: &ApiChain) -> bool {
    chain.has(Hook::Response)
        && !chain.has(Hook::Pre)
        && !chain.has(Hook::Post)
        && !chain.has(Hook::Virtual)
}

/// The request head the response phase gets when the request body
/// streams (`only_response`): the client's request, no body.
pub fn head_of_parts(parts: &http::request::Parts, remote: std::net::SocketAddr) -> MwRequest {
    MwRequest::new(
        parts.method.clone(),
        parts.uri.clone(),
        parts.headers.clone(),
        Bytes::new(),
        remote,
    )
}

/// A request head for the response phase: what went upstream, no body.
pub fn head_of(req: &MwRequest) -> MwRequest {
    req.without_body()
}
