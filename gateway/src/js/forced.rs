//! What a JS script's answer becomes when it answers the request itself,
//! the same for every JS engine: `ReturnOverrides` (Tyk's
//! `mw_js_plugin.go`) and the responses Tyk's `forceResponse` writes
//! (`mw_virtual_endpoint.go`), for overrides and virtual endpoints alike.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_ENCODING, CONTENT_TYPE, LOCATION, SERVER};
use http::{HeaderMap, StatusCode};

use super::request::header;
use super::sniff;
use crate::error::{error_response_as, ErrorFormat};
use crate::middleware::{Flow, MwError, MwResponse};

/// A script's `ReturnOverrides` with a non-zero `ResponseCode`, as read by
/// either engine (type rules already checked).
pub(crate) struct Overrides {
    /// `ResponseCode`, 100..=999.
    pub(crate) code: u16,
    /// `ResponseError`.
    pub(crate) error: String,
    /// `ResponseBody`.
    pub(crate) body: String,
    /// `ResponseHeaders`, in the script's order.
    pub(crate) headers: Vec<(String, String)>,
    /// `OverrideError`.
    pub(crate) override_error: bool,
}

const FIELD: &str = "Request.ReturnOverrides.ResponseHeaders";

impl Overrides {
    /// The answer Tyk gives, in its order of rules:
    ///
    /// 1. a non-empty `ResponseError` replaces `ResponseBody`;
    /// 2. a code >= 400 without `OverrideError` is an error answer: the
    ///    message is that body, rendered through Tyk's error template in
    ///    the request's `format`, after the script's headers (so the
    ///    template's `Content-Type` wins);
    /// 3. any other code is a forced response ([`forced`]) with that body
    ///    ([`Flow::Forced`]: from `post`, it passes the response chain).
    pub(crate) fn respond(self, format: ErrorFormat) -> Result<Flow, MwError> {
        let status = StatusCode::from_u16(self.code).map_err(|_| {
            MwError::bad_answer(format!(
                "Request.ReturnOverrides.ResponseCode {} is not an HTTP status",
                self.code
            ))
        })?;
        let message = if self.error.is_empty() {
            self.body
        } else {
            self.error
        };
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let (n, v) = header(name, value, FIELD)?;
            crate::js::request::put_header(&mut headers, n, v, FIELD)?;
        }
        if self.code >= 400 && !self.override_error {
            let (parts, body) = error_response_as(status, &message, format).into_parts();
            for (name, value) in &parts.headers {
                // (A map the script filled to the brim goes without them.)
                let _ = if name == CONTENT_TYPE {
                    headers.try_insert(name, value.clone()).map(drop)
                } else {
                    // Tyk `Add`s X-Generator: a script's own one stays.
                    headers.try_append(name, value.clone()).map(drop)
                };
            }
            return Ok(Flow::Respond(Box::new(MwResponse {
                status,
                headers,
                body,
            })));
        }
        Ok(Flow::Forced(Box::new(forced(
            status,
            headers,
            Bytes::from(message),
            "Request.ReturnOverrides",
        )?)))
    }
}

/// A response as Tyk's `forceResponse` writes it through Go's server: the
/// script's headers, `Server: tyk` (the `Date` comes from the server, as
/// Go's), and, when the script set no `Content-Type` (nor a
/// `Content-Encoding`) and the body is not empty, the type Go's
/// `http.DetectContentType` sniffs from the body.
///
/// Refused: a 301 or 302 whose `Location` starts with `tyk://`. Tyk's
/// `forceResponse` writes nothing for it and loops the request to that
/// internal URL, which this gateway does not implement; sending the
/// redirect to the client instead would hand it a URL it cannot follow.
/// `what` names the answer in that error.
pub(crate) fn forced(
    status: StatusCode,
    mut headers: HeaderMap,
    body: Bytes,
    what: &str,
) -> Result<MwResponse, MwError> {
    crate::middleware::final_status(status, what)?;
    if let (301 | 302, Some(loc)) = (status.as_u16(), headers.get(LOCATION)) {
        if loc.as_bytes().starts_with(b"tyk://") {
            return Err(MwError::bad_answer(format!(
                "{what} is {} to {:?}, a Tyk loop to an internal URL, which this gateway does not implement",
                status.as_u16(),
                String::from_utf8_lossy(loc.as_bytes())
            )));
        }
    }
    headers.insert(SERVER, HeaderValue::from_static("tyk"));
    let sniffs = !headers.contains_key(CONTENT_TYPE)
        && !headers.contains_key(CONTENT_ENCODING)
        && !body.is_empty()
        && body_allowed(status);
    if sniffs {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(sniff::detect(&body)));
    }
    Ok(MwResponse {
        status,
        headers,
        body,
    })
}

/// Go's `bodyAllowedForStatus`: not 1xx, 204 or 304.
fn body_allowed(status: StatusCode) -> bool {
    !(status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer of `o`, and whether it is forced (not an error answer).
    trait Answer {
        fn answer(self) -> MwResponse;
        fn forced(self) -> bool;
    }

    impl Answer for Result<Flow, MwError> {
        fn answer(self) -> MwResponse {
            match self {
                Ok(Flow::Respond(r) | Flow::Forced(r)) => *r,
                other => panic!("not an answer: {other:?}"),
            }
        }
        fn forced(self) -> bool {
            matches!(self, Ok(Flow::Forced(_)))
        }
    }

    /// A 1xx is never an answer, from overrides or a virtual endpoint; the
    /// codes around it are.
    #[test]
    fn informational_codes_are_refused_as_answers() {
        for code in [100, 101, 103, 199] {
            let e = o(code, "", "x", false)
                .respond(ErrorFormat::Json)
                .unwrap_err();
            assert_eq!(e.kind(), crate::middleware::MwErrorKind::BadAnswer);
            assert!(e.message().contains("informational"), "{e}");
            let status = StatusCode::from_u16(code).unwrap();
            let what = "the virtual endpoint's answer";
            let e = forced(status, HeaderMap::new(), Bytes::new(), what).unwrap_err();
            assert!(e.message().starts_with(what), "{e}");
        }
        for code in [200, 204, 299, 999] {
            assert!(o(code, "", "x", false).respond(ErrorFormat::Json).is_ok());
        }
    }

    fn o(code: u16, error: &str, body: &str, override_error: bool) -> Overrides {
        Overrides {
            code,
            error: error.into(),
            body: body.into(),
            headers: vec![("X-Why".into(), "policy".into())],
            override_error,
        }
    }

    #[test]
    fn overrides_follow_tyks_rules() {
        // ResponseError wins over ResponseBody, in the template.
        let r = o(403, "go away", "ignored", false)
            .respond(ErrorFormat::Json)
            .answer();
        assert_eq!(&r.body[..], b"{\n    \"error\": \"go away\"\n}");
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(r.headers["x-generator"], "tyk.io");
        assert_eq!(r.headers["x-why"], "policy");
        // No ResponseError: the body is the message.
        let r = o(401, "", "who are you", false)
            .respond(ErrorFormat::Json)
            .answer();
        assert_eq!(&r.body[..], b"{\n    \"error\": \"who are you\"\n}");
        let r = o(401, "", "who", false)
            .respond(ErrorFormat::Xml("text/xml"))
            .answer();
        assert_eq!(r.headers["content-type"], "text/xml");
        // OverrideError: forced, ResponseError still replacing the body.
        let r = o(418, "short", "teapot body", true)
            .respond(ErrorFormat::Json)
            .answer();
        assert_eq!((r.status.as_u16(), &r.body[..]), (418, &b"short"[..]));
        assert_eq!(r.headers["server"], "tyk");
        assert_eq!(r.headers["content-type"], "text/plain; charset=utf-8");
        assert!(r.headers.get("x-generator").is_none());
        let r = o(200, "", "<html><p>hi</p></html>", false)
            .respond(ErrorFormat::Json)
            .answer();
        assert_eq!(r.headers["content-type"], "text/html; charset=utf-8");
        let r = o(204, "", "", false).respond(ErrorFormat::Json).answer();
        assert!(r.headers.get("content-type").is_none());
        // Which of them Tyk writes through forceResponse.
        assert!(!o(403, "", "x", false).respond(ErrorFormat::Json).forced());
        assert!(o(403, "", "x", true).respond(ErrorFormat::Json).forced());
        assert!(o(200, "", "x", false).respond(ErrorFormat::Json).forced());
    }

    #[test]
    fn a_redirect_to_a_tyk_loop_is_refused_not_sent() {
        let with = |code: u16, location: &str| Overrides {
            code,
            error: String::new(),
            body: String::new(),
            headers: vec![("Location".into(), location.into())],
            override_error: false,
        };
        for code in [301, 302] {
            let e = with(code, "tyk://self/other").respond(ErrorFormat::Json);
            let e = e.expect_err("a loop is refused");
            assert!(e.to_string().contains("tyk://self/other"), "{e}");
            assert!(e.to_string().contains("does not implement"), "{e}");
        }
        // Not a loop: a 303, another scheme, or Go's case-sensitive prefix.
        for (code, location) in [
            (303, "tyk://self/x"),
            (302, "http://h/x"),
            (302, "TYK://self/x"),
        ] {
            let r = with(code, location).respond(ErrorFormat::Json).answer();
            assert_eq!(r.status.as_u16(), code);
            assert_eq!(r.headers["location"], location);
        }
    }
}
