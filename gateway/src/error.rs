//! Proxy errors and the one place they become Tyk's answers.
//!
//! Every failure on the request path is a [`ProxyError`]: a [`Kind`] (what the
//! client is told), an [`Origin`] (whose fault: client, upstream, middleware or
//! the gateway itself, for logs) and an optional cause, which is its
//! [`std::error::Error::source`]: a middleware failure's cause is the
//! [`crate::middleware::MwError`] itself, with its own kind.
//! [`ProxyError::response`] maps kinds to the status codes and bodies a Tyk
//! user already knows.
//!
//! Tyk's bodies, byte for byte: every error answer but "no API matches" is
//! rendered from Tyk's `templates/error.json`
//!
//! ```text
//! {
//!     "error": "<message>"
//! }
//! ```
//!
//! (no trailing newline) with `Content-Type: application/json`, or from
//! `templates/error.xml` when the request's `Content-Type` is
//! `application/xml`, `text/xml` or `application/soap+xml` ([`ErrorFormat`]),
//! and carries `X-Generator: tyk.io`. No match is Tyk's router's bare
//! `Not Found`.

use std::fmt;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};

/// Where a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The client sent something we cannot serve.
    Client,
    /// The upstream refused, reset, timed out or was unreachable.
    Upstream,
    /// A custom middleware failed.
    Middleware,
    /// The gateway itself: a bug, a resource problem, or its own
    /// configuration (an API whose target is this gateway).
    Internal,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::Client => "client",
            Origin::Upstream => "upstream",
            Origin::Middleware => "middleware",
            Origin::Internal => "gateway",
        }
    }
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
    /// A middleware errored, panicked or timed out, or could not load: 500.
    MiddlewareFailed,
    /// The request body is larger than the gateway buffers for middleware: 413.
    BodyTooLarge,
    /// The request body could not be read from the client: 400.
    BadRequest,
    /// The client stopped sending its request body: 408.
    RequestTimeout,
    /// A method this gateway does not proxy (`CONNECT`, a tunnel): 405.
    MethodNotAllowed,
    /// The API's target is this gateway itself: 508.
    LoopDetected,
    /// A request body in a transfer coding besides `chunked`: 501,
    /// answered as Go's server answers it (plain text, no template).
    CodingNotImplemented,
    /// A request line with a version other than HTTP/1.x: 505, answered
    /// as Go's server answers it, before Tyk sees the request (plain text,
    /// no template).
    VersionNotSupported,
    /// A response middleware failed, or the upstream's body could not be
    /// buffered for it: 500 `Middleware error` (Tyk's words for it).
    ResponseMiddlewareFailed,
    /// A virtual endpoint's function failed (without `proxy_on_error`):
    /// 500 with Tyk's message for it.
    VirtualEndpointFailed,
    /// The gateway holds as many request bodies as it may
    /// (`--max-buffered-bodies`): 503.
    Overloaded,
    /// An `Expect` other than `100-continue`: 417 with no body, answered
    /// as Go's server answers it, before Tyk sees the request.
    ExpectationFailed,
}

impl Kind {
    /// Plain words for logs.
    fn describe(self) -> &'static str {
        match self {
            Kind::NoRoute => "no API matches the path",
            Kind::UpstreamFailed => "the upstream could not be reached or failed",
            Kind::UpstreamTimeout => "the upstream sent no response in time",
            Kind::MiddlewareFailed => "a middleware failed",
            Kind::BodyTooLarge => "the request body is too large to buffer",
            Kind::BadRequest => "the request body could not be read",
            Kind::RequestTimeout => "the client stopped sending its request body",
            Kind::MethodNotAllowed => "the method is not proxied",
            Kind::LoopDetected => "the request would loop back to this gateway",
            Kind::VersionNotSupported => "the request's HTTP version is not served",
            Kind::CodingNotImplemented => "the request body's transfer coding is not implemented",
            Kind::ResponseMiddlewareFailed => "the response middleware failed",
            Kind::VirtualEndpointFailed => "a virtual endpoint failed",
            Kind::Overloaded => "the gateway holds as many request bodies as it may",
            Kind::ExpectationFailed => "the request expects what no server here can meet",
        }
    }
}

/// Which of Tyk's error templates answers, chosen as Tyk's `ErrorHandler`
/// chooses: by the request's `Content-Type`, up to any `;`, compared exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorFormat {
    /// `error.json`, `application/json` (every other request).
    #[default]
    Json,
    /// `error.xml`, answered with the request's own XML media type.
    Xml(&'static str),
}

impl ErrorFormat {
    /// The format for a request with these headers.
    pub fn of(headers: &HeaderMap) -> ErrorFormat {
        // A scan of the request's few names, not a hashed lookup: this runs
        // for every request, and nearly all of them never fail.
        let ct = headers
            .iter()
            .find(|(n, _)| *n == http::header::CONTENT_TYPE)
            .and_then(|(_, v)| v.to_str().ok())
            .unwrap_or("");
        match ct.split(';').next().unwrap_or("") {
            "application/xml" => ErrorFormat::Xml("application/xml"),
            "text/xml" => ErrorFormat::Xml("text/xml"),
            "application/soap+xml" => ErrorFormat::Xml("application/soap+xml"),
            _ => ErrorFormat::Json,
        }
    }
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
    /// Already logged where it happened (a middleware failure names its API
    /// and middleware there; a load failure was logged once at load), so
    /// [`ProxyError::log`] keeps it out of the warning log.
    pub reported: bool,
}

impl ProxyError {
    /// An error without a cause.
    pub fn new(kind: Kind, origin: Origin) -> Self {
        ProxyError {
            kind,
            origin,
            cause: None,
            reported: false,
        }
    }

    /// An error with a cause.
    pub fn with_cause(
        kind: Kind,
        origin: Origin,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        ProxyError {
            cause: Some(cause.into()),
            ..ProxyError::new(kind, origin)
        }
    }

    /// An error whose cause was logged where it happened: logged again only
    /// at debug level.
    pub fn reported(
        kind: Kind,
        origin: Origin,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        ProxyError {
            reported: true,
            ..ProxyError::with_cause(kind, origin, cause)
        }
    }

    /// The status code Tyk answers with.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            Kind::NoRoute => StatusCode::NOT_FOUND,
            Kind::UpstreamFailed
            | Kind::MiddlewareFailed
            | Kind::ResponseMiddlewareFailed
            | Kind::VirtualEndpointFailed => StatusCode::INTERNAL_SERVER_ERROR,
            Kind::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            Kind::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::BadRequest => StatusCode::BAD_REQUEST,
            Kind::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Kind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Kind::LoopDetected => StatusCode::LOOP_DETECTED,
            Kind::VersionNotSupported => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
            Kind::CodingNotImplemented => StatusCode::NOT_IMPLEMENTED,
            Kind::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
            Kind::ExpectationFailed => StatusCode::EXPECTATION_FAILED,
        }
    }

    /// The message inside Tyk's error body.
    pub fn message(&self) -> &'static str {
        match self.kind {
            Kind::NoRoute => "Not Found",
            Kind::UpstreamFailed => "There was a problem proxying the request",
            Kind::UpstreamTimeout => "Upstream service reached hard timeout.",
            Kind::MiddlewareFailed => "Internal Server Error",
            Kind::BodyTooLarge => "Request is too large",
            Kind::BadRequest => "Bad Request",
            Kind::RequestTimeout => "Request Timeout",
            Kind::MethodNotAllowed => "Method Not Allowed",
            Kind::LoopDetected => "Loop Detected",
            Kind::VersionNotSupported => "HTTP Version Not Supported",
            Kind::CodingNotImplemented => "Not Implemented",
            Kind::ResponseMiddlewareFailed => "Middleware error",
            Kind::VirtualEndpointFailed => {
                "Error during virtual endpoint execution. Contact Administrator for more details."
            }
            Kind::Overloaded => "Service Unavailable",
            Kind::ExpectationFailed => "Expectation Failed",
        }
    }

    /// The response the client gets, in the format its request asked for.
    pub fn response(&self, format: ErrorFormat) -> Response<Bytes> {
        // Answers Tyk's templates never render: its router's bare `Not
        // Found` (Go sniffs its content type; no X-Generator), and what
        // Go's `net/http` server answers before Tyk sees the request.
        let plain = match self.kind {
            Kind::NoRoute => Some("Not Found"),
            Kind::VersionNotSupported => {
                Some("505 HTTP Version Not Supported: unsupported protocol version")
            }
            Kind::CodingNotImplemented => Some("Unsupported transfer encoding"),
            _ => None,
        };
        if let Some(body) = plain {
            return text_response(self.status(), "text/plain; charset=utf-8", body);
        }
        if self.kind == Kind::ExpectationFailed {
            // Go writes the status alone: no body, no content type.
            let mut resp = Response::new(Bytes::new());
            *resp.status_mut() = self.status();
            return resp;
        }
        error_response_as(self.status(), self.message(), format)
    }

    /// Logs the failure once, at a level by whose fault it was: the client's
    /// at debug (it is the client's to see), others at warn (as many a
    /// second as `gate` lets through), unless already logged where it
    /// happened.
    pub fn log(&self, gate: &crate::lograte::LogGate) {
        if self.origin == Origin::Client || self.reported {
            tracing::debug!("request answered {}: {self}", self.status().as_u16());
        } else if let Some(left_out) = gate.admit() {
            tracing::warn!(
                "request answered {}: {self}{}",
                self.status().as_u16(),
                crate::lograte::LeftOut(left_out)
            );
        }
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} error)",
            self.kind.describe(),
            self.origin.as_str()
        )?;
        // The whole chain: hyper's "client error (Connect)" says little
        // without the "connection refused" beneath it.
        match &self.cause {
            Some(c) => write!(f, ": {}", ErrorChain(&**c)),
            None => Ok(()),
        }
    }
}

impl std::error::Error for ProxyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_deref().map(|c| c as _)
    }
}

/// Displays an error and every source beneath it, `": "`-separated: the
/// form a log line needs (an error's own `Display` stops at itself).
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(c) = next {
            write!(f, ": {c}")?;
            next = c.source();
        }
        Ok(())
    }
}

/// Tyk's JSON error answer (`templates/error.json`).
pub fn error_response(status: StatusCode, message: &str) -> Response<Bytes> {
    error_response_as(status, message, ErrorFormat::Json)
}

/// Tyk's error answer from the template `format` names, with Tyk's headers.
pub fn error_response_as(
    status: StatusCode,
    message: &str,
    format: ErrorFormat,
) -> Response<Bytes> {
    let (body, content_type) = match format {
        ErrorFormat::Json => (
            format!("{{\n    \"error\": \"{}\"\n}}", json_escape(message)),
            "application/json",
        ),
        ErrorFormat::Xml(media) => (
            format!(
                "<?xml version = \"1.0\" encoding = \"UTF-8\"?>\n<error>{}</error>\n",
                html_escape(message)
            ),
            media,
        ),
    };
    let mut resp = text_response(status, content_type, &body);
    resp.headers_mut()
        .insert("x-generator", HeaderValue::from_static("tyk.io"));
    resp
}

/// Tyk's `jsonEscapeString`: quotes, backslashes and control characters.
fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Go's `html.HTMLEscapeString`, which Tyk applies to XML error messages.
fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
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

/// `text` cut to [`MAX_ERROR_TEXT`] bytes (on a character boundary), `...`
/// marking the cut: the text of an error a script or plugin made (a JS
/// throw on either engine, a native plugin's `set_error`, a Go handler's
/// panic) goes into a log line, and can be megabytes long.
pub(crate) fn clip(mut text: String) -> String {
    if text.len() > MAX_ERROR_TEXT {
        let mut end = MAX_ERROR_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}

/// The longest error text [`clip`] leaves.
pub(crate) const MAX_ERROR_TEXT: usize = 2000;

/// A message a script or plugin wrote, on one log line: control
/// characters escaped as Rust writes them (`\n`, `\r`, `\t`, `\u{1b}`), so
/// a message cannot start log lines of its own (`log("ok\nlevel=ERROR
/// ...")`) or rewrite what a terminal shows; Tyk's logrus quotes such a
/// message the same way. Borrowed when there is nothing to escape, as in
/// almost every message. Both JS engines' `log` and the wasm host's
/// `proxy_log` use it (JS `rawlog` stays raw, as Tyk's).
pub(crate) fn one_line(msg: &str) -> std::borrow::Cow<'_, str> {
    if !msg.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(msg);
    }
    let mut out = String::with_capacity(msg.len() + 8);
    for c in msg.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_tyk_answers() {
        let r = ProxyError::new(Kind::UpstreamFailed, Origin::Upstream).response(ErrorFormat::Json);
        assert_eq!(r.status(), 500);
        assert_eq!(
            r.body().as_ref(),
            b"{\n    \"error\": \"There was a problem proxying the request\"\n}"
        );
        assert_eq!(r.headers()["x-generator"], "tyk.io");
        let r = ProxyError::new(Kind::NoRoute, Origin::Client).response(ErrorFormat::Json);
        assert_eq!(
            (r.status().as_u16(), r.body().as_ref()),
            (404, &b"Not Found"[..])
        );
        assert!(r.headers().get("x-generator").is_none());
    }

    #[test]
    fn messages_are_escaped_as_tyk_escapes_them() {
        let r = error_response(StatusCode::BAD_REQUEST, "a \"b\"\\\n\u{1}");
        assert_eq!(
            r.body().as_ref(),
            b"{\n    \"error\": \"a \\\"b\\\"\\\\\\n\\u0001\"\n}"
        );
        let r = error_response_as(
            StatusCode::FORBIDDEN,
            "<a & 'b'>",
            ErrorFormat::Xml("text/xml"),
        );
        assert_eq!(
            r.body().as_ref(),
            b"<?xml version = \"1.0\" encoding = \"UTF-8\"?>\n<error>&lt;a &amp; &#39;b&#39;&gt;</error>\n"
        );
        assert_eq!(r.headers()["content-type"], "text/xml");
    }

    #[test]
    fn the_request_content_type_picks_the_template() {
        let mut h = HeaderMap::new();
        assert_eq!(ErrorFormat::of(&h), ErrorFormat::Json);
        h.insert(
            "content-type",
            "application/xml; charset=utf-8".parse().unwrap(),
        );
        assert_eq!(ErrorFormat::of(&h), ErrorFormat::Xml("application/xml"));
        h.insert("content-type", "application/soap+xml".parse().unwrap());
        assert_eq!(
            ErrorFormat::of(&h),
            ErrorFormat::Xml("application/soap+xml")
        );
        // Tyk compares exactly: no case folding, no trimming.
        h.insert("content-type", "Application/XML".parse().unwrap());
        assert_eq!(ErrorFormat::of(&h), ErrorFormat::Json);
    }
}
