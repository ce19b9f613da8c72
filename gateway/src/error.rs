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

/// The most bytes of a middleware's message one log line carries: 16 KiB,
/// what Docker's `json-file` driver keeps in one record. A script's
/// `log(request.Body)` fits; `log` of 8 Mi control characters wrote a
/// 40 MB line (on boa, its copy and escapes, 56 MB, made in the call's
/// heap count, which stops a VM thread for good past its ceiling).
pub(crate) const MAX_LOG_TEXT: usize = 16 * 1024;

/// What of a message a log line is handed: all of it, or only its start
/// (a long JS string or plugin buffer is not converted whole).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Part {
    /// The whole message.
    Whole,
    /// The start of a message `len` `unit`s long (a JS string's `length`
    /// in "characters", a plugin's buffer in "bytes").
    Start { len: usize, unit: &'static str },
}

/// A message a script or plugin wrote, as one bounded log line: with
/// `escape`, control characters escaped as Rust writes them (`\n`, `\r`,
/// `\t`, `\u{1b}`), so a message cannot start log lines of its own
/// (`log("ok\nlevel=ERROR ...")`) or rewrite what a terminal shows (Tyk's
/// logrus quotes such a message the same way); then cut to
/// [`MAX_LOG_TEXT`] bytes, on a character and never inside an escape, and
/// ended with a note of the message's whole length. Borrowed when there is
/// nothing to escape or cut, as in almost every message. Every middleware
/// kind's log goes through it: JS `log` (escaped) and `rawlog` (raw, as
/// Tyk's) on both engines, the WebAssembly host's `proxy_log`, the native
/// plugin ABI's `log`.
pub(crate) fn log_text(text: &str, part: Part, escape: bool) -> std::borrow::Cow<'_, str> {
    let escapes = |c: char| escape && c.is_control();
    if matches!(part, Part::Whole) && text.len() <= MAX_LOG_TEXT && !text.chars().any(escapes) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(MAX_LOG_TEXT) + 64);
    let mut cut = !matches!(part, Part::Whole);
    for c in text.chars() {
        let esc = escapes(c);
        let need = if esc {
            c.escape_default().len()
        } else {
            c.len_utf8()
        };
        if out.len() + need > MAX_LOG_TEXT {
            cut = true;
            break;
        }
        if esc {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if cut {
        let (len, unit) = match part {
            Part::Whole => (text.len(), "bytes"),
            Part::Start { len, unit } => (len, unit),
        };
        out.push_str(&format!("... [cut: the message is {len} {unit} long]"));
    }
    std::borrow::Cow::Owned(out)
}

/// [`log_text`] of a plugin's message bytes (UTF-8 expected, each invalid
/// byte one U+FFFD): only the start that can be shown is converted.
pub(crate) fn log_bytes(msg: &[u8], escape: bool) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let (end, part) = if msg.len() <= MAX_LOG_TEXT {
        (msg.len(), Part::Whole)
    } else {
        // A character's start within its last three bytes is not cut in two.
        let mut end = MAX_LOG_TEXT;
        while end > MAX_LOG_TEXT - 3 && msg[end] & 0xc0 == 0x80 {
            end -= 1;
        }
        let unit = "bytes";
        (
            end,
            Part::Start {
                len: msg.len(),
                unit,
            },
        )
    };
    match String::from_utf8_lossy(&msg[..end]) {
        Cow::Borrowed(text) => log_text(text, part, escape),
        // Invalid bytes replaced: that copy is the line, unless there is
        // more to escape or cut.
        Cow::Owned(text) => {
            if let Cow::Owned(line) = log_text(&text, part, escape) {
                return Cow::Owned(line);
            }
            Cow::Owned(text)
        }
    }
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

    #[test]
    fn a_log_message_is_one_line_of_at_most_the_bound() {
        use std::borrow::Cow;
        // Nothing to escape or cut: borrowed, as it was.
        assert!(matches!(
            log_text("plain ünïcode", Part::Whole, true),
            Cow::Borrowed("plain ünïcode")
        ));
        assert_eq!(
            log_text("a\nb\u{1b}[31m", Part::Whole, true),
            "a\\nb\\u{1b}[31m"
        );
        // Raw (`rawlog`): control characters kept.
        assert_eq!(log_text("a\nb", Part::Whole, false), "a\nb");
        let note = |len: usize, unit: &str| format!("... [cut: the message is {len} {unit} long]");
        // The bound passes; one byte more is cut, and says so.
        let full = "x".repeat(MAX_LOG_TEXT);
        assert!(matches!(
            log_text(&full, Part::Whole, true),
            Cow::Borrowed(_)
        ));
        let over = "x".repeat(MAX_LOG_TEXT + 1);
        assert_eq!(
            log_text(&over, Part::Whole, true),
            format!("{full}{}", note(MAX_LOG_TEXT + 1, "bytes"))
        );
        // Escapes count as they are written, and none is cut in two: 16
        // KiB of `\u{1}` (5 bytes each escaped) ends at the last whole one.
        let controls = "\u{1}".repeat(MAX_LOG_TEXT);
        let line = log_text(&controls, Part::Whole, true);
        let kept = MAX_LOG_TEXT / r"\u{1}".len();
        assert_eq!(
            line,
            format!("{}{}", r"\u{1}".repeat(kept), note(MAX_LOG_TEXT, "bytes"))
        );
        // Raw, the same 16 KiB is within the bound: nothing cut.
        assert_eq!(log_text(&controls, Part::Whole, false), controls);
        // A character is never cut in two.
        let wide = "é".repeat(MAX_LOG_TEXT);
        let line = log_text(&wide, Part::Whole, true);
        assert_eq!(
            line,
            format!(
                "{}{}",
                "é".repeat(MAX_LOG_TEXT / 2),
                note(2 * MAX_LOG_TEXT, "bytes")
            )
        );
        // The start of a longer message: noted even when it fits.
        let start = Part::Start {
            len: 8_000_000,
            unit: "characters",
        };
        assert_eq!(
            log_text("abc", start, true),
            format!("abc{}", note(8_000_000, "characters"))
        );
    }

    #[test]
    fn a_plugin_s_log_bytes_are_converted_only_as_far_as_shown() {
        assert_eq!(log_bytes(b"ok\n", true), "ok\\n");
        assert_eq!(log_bytes(b"bad \xff", true), "bad \u{fffd}");
        // A 3-byte character across the bound is left out whole, not made
        // a U+FFFD.
        let mut msg = "x".repeat(MAX_LOG_TEXT - 1).into_bytes();
        msg.extend("€".repeat(10).bytes());
        let line = log_bytes(&msg, true);
        let want = format!(
            "{}... [cut: the message is {} bytes long]",
            "x".repeat(MAX_LOG_TEXT - 1),
            msg.len()
        );
        assert_eq!(line, want);
        let huge = vec![b'\n'; 32 << 20];
        let line = log_bytes(&huge, true);
        assert!(line.len() < MAX_LOG_TEXT + 64, "{}", line.len());
        assert!(line.ends_with("... [cut: the message is 33554432 bytes long]"));
    }
}
