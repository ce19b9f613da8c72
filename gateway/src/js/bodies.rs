//! The bound on every body a script hands the host, the same on both
//! engines, in every strategy and phase.
//!
//! Every other body the gateway holds whole is bounded at 32 MiB: a
//! client's (413 past `MAX_BUFFERED_BODY`), an upstream's for response
//! middleware (500 past `MAX_BUFFERED_RESPONSE`), a native plugin's
//! (`native/host.rs`), and `heap::BODY_FACTOR` counts on bodies no larger.
//! A script's were not: `request.Body = "x".repeat(32 * 1024 * 1024 + 1)`
//! went upstream with 200, bounded only by `--jsvm-memory`. Each field of
//! an answer that becomes a body is a [`BodyField`] here, and every reader
//! (boa's `request/apply.rs` and `vm/phases.rs`, QuickJS's `answer.rs`,
//! `tykjson.rs`, `phase.rs` for virtual endpoints) refuses a body past its
//! bound through it: a bad answer (500, counted as `bad_answer`), the log
//! naming the field and the bound.
//!
//! A JS string is checked by its length before it is converted
//! ([`BodyField::convert`]): each UTF-16 unit is at least one UTF-8 byte,
//! so a string past the bound in units is refused before a byte of it is
//! copied; one within it is measured again in bytes once converted (a
//! non-ASCII character takes two or three).

use crate::middleware::MwError;
use crate::proxy::MAX_BUFFERED_BODY;
use crate::response::MAX_BUFFERED_RESPONSE;

/// A field of a script's answer that the host makes a body of, and the
/// bound on that body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyField {
    /// The field as errors name it (`Request.Body`).
    pub(crate) name: &'static str,
    /// The body it becomes, for the error.
    what: &'static str,
    bound: usize,
}

/// `request.Body` of a request-phase answer: the body sent upstream.
pub(crate) const REQUEST_BODY: BodyField = BodyField {
    name: "Request.Body",
    what: "a request body",
    bound: MAX_BUFFERED_BODY,
};

/// `ReturnOverrides.ResponseBody`: a forced answer's body, or the message
/// of an error answer.
pub(crate) const OVERRIDE_BODY: BodyField = BodyField {
    name: "Request.ReturnOverrides.ResponseBody",
    what: "a middleware's own answer",
    bound: MAX_BUFFERED_BODY,
};

/// `ReturnOverrides.ResponseError`, which replaces `ResponseBody` when
/// not empty.
pub(crate) const OVERRIDE_ERROR: BodyField = BodyField {
    name: "Request.ReturnOverrides.ResponseError",
    what: "a middleware's own answer",
    bound: MAX_BUFFERED_BODY,
};

/// A response hook's `Response.Body`: the body the client gets.
pub(crate) const RESPONSE_BODY: BodyField = BodyField {
    name: "Response.Body",
    what: "a response body held for response middleware",
    bound: MAX_BUFFERED_RESPONSE,
};

/// The `Body` of what a virtual endpoint's `TykJsResponse` returns.
pub(crate) const ENDPOINT_BODY: BodyField = BodyField {
    name: "the virtual endpoint's Response.Body",
    what: "a middleware's own answer",
    bound: MAX_BUFFERED_BODY,
};

impl BodyField {
    /// Refuses a body of `len` bytes past the bound.
    #[inline]
    pub(crate) fn check(self, len: usize) -> Result<(), MwError> {
        crate::body::within(len, self.bound, self.name, self.what).map_err(MwError::bad_answer)
    }

    /// The body a JS string of `units` UTF-16 units (its `length`) makes:
    /// refused past the bound before `convert` copies it, and checked
    /// again in bytes once it has.
    #[inline]
    pub(crate) fn convert(
        self,
        units: usize,
        convert: impl FnOnce() -> Result<String, MwError>,
    ) -> Result<String, MwError> {
        if units > self.bound {
            let at_least = format!("at least {units}");
            let why = crate::body::past_bound(self.name, &at_least, self.bound, self.what);
            return Err(MwError::bad_answer(why));
        }
        let text = convert()?;
        self.check(text.len())?;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_passes_and_one_byte_more_is_refused_naming_the_field() {
        let bound = 32 << 20;
        for field in [
            REQUEST_BODY,
            OVERRIDE_BODY,
            OVERRIDE_ERROR,
            RESPONSE_BODY,
            ENDPOINT_BODY,
        ] {
            assert!(field.check(bound).is_ok());
            let e = field.check(bound + 1).unwrap_err();
            assert_eq!(e.kind(), crate::middleware::MwErrorKind::BadAnswer);
            let want = format!(
                "{}: a body of 33554433 bytes is past the 32 MiB bound",
                field.name
            );
            assert!(e.message().starts_with(&want), "{e}");
            assert!(e.message().ends_with("(33554432 bytes)"), "{e}");
        }
    }

    /// Past the bound in units, the string is never converted; within it,
    /// the converted bytes are what count.
    #[test]
    fn a_string_is_refused_by_its_length_before_it_is_converted() {
        let bound = 32 << 20;
        let e = REQUEST_BODY
            .convert(bound + 1, || panic!("converted"))
            .unwrap_err();
        assert!(e.message().contains("at least 33554433 bytes"), "{e}");
        // Two-byte characters: within the bound in units, past it in bytes.
        let e = REQUEST_BODY
            .convert(bound / 2 + 1, || Ok("\u{e9}".repeat(bound / 2 + 1)))
            .unwrap_err();
        assert!(e.message().contains("a body of 33554434 bytes"), "{e}");
        let ok = REQUEST_BODY.convert(3, || Ok("abc".into())).unwrap();
        assert_eq!(ok, "abc");
    }
}
