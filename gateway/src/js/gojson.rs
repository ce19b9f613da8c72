//! What Go's `encoding/json` does, where a script's JSON answer reaches Tyk
//! through `json.Unmarshal` into one of its structs and the result depends
//! on Go's rules rather than on JSON's:
//!
//! - a key names a struct field when it equals the field's name under
//!   Unicode simple case folding ([`names`]): `body`, `BODY` and `Body` are
//!   one field, and so are `ſessionMeta` (U+017F, the long s) and
//!   `SessionMeta`;
//! - a field given twice (in any spelling) is decoded twice, in text order:
//!   the last wins, and an object field merges both objects;
//! - `null` leaves a string or number field as it was and sets a map to
//!   nil;
//! - an escaped lone UTF-16 surrogate (`"\ud800"`, which `JSON.stringify`
//!   writes for a string holding one) is read as U+FFFD
//!   ([`lone_surrogates`]), where serde_json refuses the whole text.
//!
//! One departure: a value no field takes (an unknown field, `SessionMeta`'s
//! content) is skipped by serde_json without recursing and without a depth
//! limit, where Go's scanner refuses text nested over 10,000 levels.

use std::borrow::Cow;

/// `key` names the Go struct field `name` (ASCII letters only, as Tyk's
/// are): equal under Unicode simple case folding, by which the only other
/// characters that fold to an ASCII letter are U+017F (to `s`) and U+212A,
/// the Kelvin sign (to `k`).
pub(crate) fn names(key: &str, name: &str) -> bool {
    if key.len() == name.len() {
        return key.eq_ignore_ascii_case(name);
    }
    let mut want = name.bytes();
    for c in key.chars() {
        let Some(w) = want.next() else {
            return false;
        };
        let folds = match c {
            '\u{17f}' => w.eq_ignore_ascii_case(&b's'),
            '\u{212a}' => w.eq_ignore_ascii_case(&b'k'),
            c => c.is_ascii() && (c as u8).eq_ignore_ascii_case(&w),
        };
        if !folds {
            return false;
        }
    }
    want.next().is_none()
}

/// `text` with every `\uXXXX` escape of a lone surrogate replaced by
/// `\ufffd`, as Go's decoder reads it: a high surrogate followed by an
/// escaped low one is a pair and stays; any other surrogate escape becomes
/// U+FFFD and what follows it is read on its own. Borrowed when there is
/// none (no surrogate escape at all is the common case).
pub(crate) fn lone_surrogates(text: &str) -> Cow<'_, str> {
    // Most answers have no `\u` escape at all: one vectorised search
    // instead of a walk over every escape.
    if !text.contains("\\u") {
        return Cow::Borrowed(text);
    }
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(at) = b[i..].iter().position(|&c| c == b'\\') {
        let at = i + at;
        let Some(unit) = escape_unit(b, at) else {
            // `\"`, `\\`, `\n`...: skip the escaped character too.
            i = at + 2;
            continue;
        };
        if !(0xd800..0xe000).contains(&unit) {
            i = at + 6;
            continue;
        }
        let paired = unit < 0xdc00
            && escape_unit(b, at + 6).is_some_and(|low| (0xdc00..0xe000).contains(&low));
        if paired {
            i = at + 12;
            continue;
        }
        let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
        o.push_str(&text[copied..at]);
        o.push_str("\\ufffd");
        copied = at + 6;
        i = copied;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(&text[copied..]);
            Cow::Owned(o)
        }
    }
}

/// The code unit of a `\uXXXX` escape starting at `at`, if one does.
fn escape_unit(b: &[u8], at: usize) -> Option<u32> {
    let e = b.get(at..at + 6)?;
    if e[0] != b'\\' || e[1] != b'u' || !e[2..].iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    // Four hex digits (`from_str_radix` alone would also take a sign).
    let hex = std::str::from_utf8(&e[2..]).ok()?;
    u32::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_fold_as_gos_decoder_folds_them() {
        for key in ["Body", "body", "BODY", "bOdY"] {
            assert!(names(key, "Body"), "{key}");
        }
        assert!(names("\u{17f}essionMeta", "SessionMeta"));
        assert!(names("SESSIONMETA", "SessionMeta"));
        assert!(names("\u{212a}ey", "Key"));
        for key in ["Bod", "Bodyy", "B0dy", "", "Bödy", "\u{17f}ody"] {
            assert!(!names(key, "Body"), "{key}");
        }
    }

    #[test]
    fn lone_surrogates_become_the_replacement_character() {
        let cases = [
            (r#""plain""#, r#""plain""#),
            (r#""a\ud800b""#, r#""a\ufffdb""#),
            (r#""\udc00""#, r#""\ufffd""#),
            (r#""\uD83D\uDE00""#, r#""\uD83D\uDE00""#),
            // A high surrogate before a non-surrogate escape: the escape is
            // read on its own.
            (r#""\ud800\u0041""#, r#""\ufffd\u0041""#),
            (r#""\ud800\ud800\udc00""#, r#""\ufffd\ud800\udc00""#),
            // An escaped backslash before `ud800` is text, not an escape.
            (r#""\\ud800""#, r#""\\ud800""#),
            (r#""\\\ud800""#, r#""\\\ufffd""#),
            (r#""end\ud800""#, r#""end\ufffd""#),
            (r#""\u00e9\n\"""#, r#""\u00e9\n\"""#),
            // Not a full escape: left for the parser to refuse.
            (r#""\ud8"#, r#""\ud8"#),
        ];
        for (text, want) in cases {
            assert_eq!(lone_surrogates(text), want, "{text}");
        }
        assert!(matches!(lone_surrogates(r#""\n""#), Cow::Borrowed(_)));
        let fixed = lone_surrogates(r#"{"a":"x\ud800y\udfffz"}"#);
        let v: serde_json::Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(v["a"], "x\u{fffd}y\u{fffd}z");
    }
}
