//! Proxy errors and the one place they become Tyk's answers.
//!
//! Every failure on the request path is a [`ProxyError`]: a [`Kind`] (what the
//! client is told), an [`Origin`] (whose fault: client, upstream, middleware or
//! the gateway itself, for logs) and an optional cause. [`ProxyError::response`]
//! maps kinds to the status codes and bodies a Tyk user already knows.

use std::fmt;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};

/// Where a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The client sent something we cannot serve.
    Client,
    /// The upstream refused, reset, timed out or was unreachable.
    Upstream,
    /// A custom middleware failed.
    Middleware,
    /// A bug or resource problem in the gateway.
    Internal,
}

/// What went wrong, as the client will be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// No API's listen path matches: 404 `Not Found` (plain text, as Tyk).
    NoRoute,
    /// The upstream could not be reached or failed mid-request: 500.
    UpstreamFailed,
    /// The upstream sent no response head within the timeout: 504.
    UpstreamTimeout,
    /// A middleware errored, panicked or timed out: 500.
    MiddlewareFailed,
    /// The request body is larger than the gateway buffers for middleware: 413.
    BodyTooLarge,
    /// The request body could not be read from the client: 400.
    BadRequest,
    /// The client stopped sending its request body: 408.
    RequestTimeout,
    /// The API's target is this gateway itself: 508.
    LoopDetected,
}

/// A failure on the request path.
#[derive(Debug)]
pub struct ProxyError {
    /// What the client is told.
    pub kind: Kind,
    /// Whose fault it was.
    pub origin: Origin,
    /// The underlying cause, for logs.
    pub cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ProxyError {
    /// An error without a cause.
    pub fn new(kind: Kind, origin: Origin) -> Self {
        ProxyError {
            kind,
            origin,
            cause: None,
        }
    }

    /// An error with a cause.
    pub fn with_cause(
        kind: Kind,
        origin: Origin,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        ProxyError {
            kind,
            origin,
            cause: Some(cause.into()),
        }
    }

    /// The status code Tyk answers with.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            Kind::NoRoute => StatusCode::NOT_FOUND,
            Kind::UpstreamFailed | Kind::MiddlewareFailed => StatusCode::INTERNAL_SERVER_ERROR,
            Kind::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            Kind::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::BadRequest => StatusCode::BAD_REQUEST,
            Kind::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Kind::LoopDetected => StatusCode::LOOP_DETECTED,
        }
    }

    /// The message inside Tyk's `{"error": "..."}` body.
    pub fn message(&self) -> &'static str {
        match self.kind {
            Kind::NoRoute => "Not Found",
            Kind::UpstreamFailed => "There was a problem proxying the request",
            Kind::UpstreamTimeout => "Upstream service reached hard timeout.",
            Kind::MiddlewareFailed => "Internal Server Error",
            Kind::BodyTooLarge => "Request is too large",
            Kind::BadRequest => "Bad Request",
            Kind::RequestTimeout => "Request Timeout",
            Kind::LoopDetected => "Loop Detected",
        }
    }

    /// The response the client gets.
    pub fn response(&self) -> Response<Bytes> {
        if self.kind == Kind::NoRoute {
            // Tyk answers an unmatched path with a bare text body.
            return text_response(self.status(), "text/plain; charset=utf-8", "Not Found");
        }
        error_response(self.status(), self.message())
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({:?})", self.kind, self.origin)?;
        if let Some(c) = &self.cause {
            write!(f, ": {c}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ProxyError {}

/// Tyk's JSON error body: `{"error": "<message>"}`.
pub fn error_response(status: StatusCode, message: &str) -> Response<Bytes> {
    // Byte for byte the body Tyk writes, space included.
    let quoted = serde_json::to_string(message).unwrap_or_else(|_| "\"\"".into());
    let body = format!("{{\"error\": {quoted}}}");
    text_response(status, "application/json", &body)
}

/// A response with a fixed body and content type.
pub fn text_response(
    status: StatusCode,
    content_type: &'static str,
    body: &str,
) -> Response<Bytes> {
    let mut resp = Response::new(Bytes::copy_from_slice(body.as_bytes()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_tyk_answers() {
        let r = ProxyError::new(Kind::UpstreamFailed, Origin::Upstream).response();
        assert_eq!(r.status(), 500);
        assert_eq!(
            r.body().as_ref(),
            br#"{"error": "There was a problem proxying the request"}"#
        );
        let r = ProxyError::new(Kind::NoRoute, Origin::Client).response();
        assert_eq!(
            (r.status().as_u16(), r.body().as_ref()),
            (404, &b"Not Found"[..])
        );
        let r = ProxyError::new(Kind::MiddlewareFailed, Origin::Middleware).response();
        assert_eq!(r.body().as_ref(), br#"{"error": "Internal Server Error"}"#);
    }
}
