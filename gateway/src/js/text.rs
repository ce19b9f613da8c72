//! boa strings to Rust strings, fast.
//!
//! boa 0.22's `to_std_string_lossy` formats the string through `Display`,
//! one `write_char` per character (~38 instructions each), and
//! `to_std_string` collects a Latin-1 string char by char: on a virtual
//! endpoint's ~240-character answer that was 9,000 instructions per request,
//! and a response hook's rewritten body, a `tyk-json` answer and every
//! `JSON.parse` text paid the same per character. Most strings a script
//! hands back are ASCII, held by boa as Latin-1 bytes: those are copied
//! whole.

use boa_engine::string::JsStrVariant;
use boa_engine::JsString;

use super::bodies::BodyField;
use crate::middleware::MwError;

/// `s` as UTF-8, each lone surrogate replaced by U+FFFD (as
/// `to_std_string_lossy`).
pub(crate) fn lossy(s: &JsString) -> String {
    match s.as_str().variant() {
        JsStrVariant::Latin1(bytes) => latin1(bytes),
        JsStrVariant::Utf16(units) => String::from_utf16_lossy(units),
    }
}

/// The first `units` UTF-16 units of `s` (all of it when shorter) as
/// [`lossy`] makes them, without converting the rest; a surrogate pair the
/// cut would split is left out whole.
pub(crate) fn lossy_start(s: &JsString, units: usize) -> String {
    match s.as_str().variant() {
        JsStrVariant::Latin1(bytes) => latin1(&bytes[..bytes.len().min(units)]),
        JsStrVariant::Utf16(all) => {
            let mut end = all.len().min(units);
            if end < all.len() && end > 0 && (0xd800..0xdc00).contains(&all[end - 1]) {
                end -= 1;
            }
            String::from_utf16_lossy(&all[..end])
        }
    }
}

/// `s` as the body `field` of an answer: [`lossy`], refused past the
/// field's bound by its length before it is converted (`bodies.rs`).
pub(crate) fn body(s: &JsString, field: BodyField) -> Result<String, MwError> {
    field.convert(s.len(), || Ok(lossy(s)))
}

/// `s` as UTF-8, or the error `to_std_string` gives for a lone surrogate.
pub(crate) fn strict(s: &JsString) -> Result<String, std::string::FromUtf16Error> {
    match s.as_str().variant() {
        JsStrVariant::Latin1(bytes) => Ok(latin1(bytes)),
        JsStrVariant::Utf16(units) => String::from_utf16(units),
    }
}

/// `s`'s bytes when it is ASCII, as boa holds it (its Latin-1 bytes are
/// then its UTF-8): read in place, nothing converted. `None` for anything
/// else, which [`lossy`] converts.
pub(crate) fn ascii(s: &JsString) -> Option<&[u8]> {
    match s.as_str().variant() {
        JsStrVariant::Latin1(bytes) if bytes.is_ascii() => Some(bytes),
        _ => None,
    }
}

/// Latin-1 bytes as UTF-8: ASCII copied whole, the rest two bytes each.
fn latin1(bytes: &[u8]) -> String {
    if bytes.is_ascii() {
        return std::str::from_utf8(bytes)
            .expect("ASCII is UTF-8")
            .to_owned();
    }
    bytes.iter().copied().map(char::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use boa_engine::js_string;

    #[test]
    fn every_kind_of_string_converts_as_boas_own_conversions_do() {
        let surrogate = JsString::from(&[0x61, 0xd800, 0x62][..]);
        let cases = [
            js_string!(),
            js_string!("plain ascii {\"json\": [1, 2]}"),
            JsString::from("latin-1: caf\u{e9} \u{ff}"),
            JsString::from("utf-16: \u{2603} \u{1f600}"),
            surrogate.clone(),
        ];
        for s in &cases {
            assert_eq!(lossy(s), s.to_std_string_lossy(), "{s:?}");
            assert_eq!(
                strict(s).ok(),
                s.to_std_string().ok(),
                "{:?}",
                s.to_std_string_lossy()
            );
        }
        assert_eq!(lossy(&surrogate), "a\u{fffd}b");
        assert!(strict(&surrogate).is_err());
        // Latin-1 held strings really are the Latin-1 variant here.
        assert!(matches!(
            cases[2].as_str().variant(),
            JsStrVariant::Latin1(_)
        ));
    }
}
