//! Go's header-name rule, `net/textproto.CanonicalMIMEHeaderKey`, shared by
//! the gateway (the names a JS script sees in `request.Headers`, Tyk's
//! JSON) and loadgen's mock upstream (the names its echo prints, as Tyk's
//! Go upstream does). One implementation, so the two ends cannot disagree
//! on a name.
//!
//! Go's rule, from `textproto/reader.go`:
//! - a name with a byte that is not an RFC 7230 token character (`tchar`:
//!   letters, digits and ``!#$%&'*+-.^_`|~``; so also any space or non-ASCII
//!   byte) is returned unchanged;
//! - otherwise the first letter and every letter after a `-` are upper-cased
//!   and every other letter lower-cased (`uSER-aGENT` becomes `User-Agent`).
//!
//! (Go then interns common names; that changes no byte of the result.)

/// True when `b` may appear in a header name (RFC 7230 `tchar`), Go's
/// `validHeaderFieldByte`.
pub fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// True when Go would canonicalise `name` (every byte a token character),
/// false when it returns the name as it is.
pub fn is_canonicalisable(name: &str) -> bool {
    name.bytes().all(is_token_byte)
}

/// The bytes of `name`'s canonical form, without building it: callers that
/// compare or write names (the mock's sorted echo) need no allocation.
pub fn canonical_header_bytes(name: &str) -> impl Iterator<Item = u8> + Clone + '_ {
    let change = is_canonicalisable(name);
    let mut upper = true;
    name.bytes().map(move |b| {
        if !change {
            return b;
        }
        let out = if upper {
            b.to_ascii_uppercase()
        } else {
            b.to_ascii_lowercase()
        };
        upper = b == b'-';
        out
    })
}

/// Appends Go's `CanonicalMIMEHeaderKey(name)` to `out`. (A plain loop: the
/// QuickJS host writes every request header's name through this.)
pub fn push_canonical_header_key(out: &mut String, name: &str) {
    if !is_canonicalisable(name) {
        out.push_str(name);
        return;
    }
    let mut upper = true;
    for &b in name.as_bytes() {
        // Token characters are ASCII: each byte is one char.
        out.push(char::from(if upper {
            b.to_ascii_uppercase()
        } else {
            b.to_ascii_lowercase()
        }));
        upper = b == b'-';
    }
}

/// Go's `CanonicalMIMEHeaderKey(name)`: `x-api-key` becomes `X-Api-Key`.
pub fn canonical_header_key(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    push_canonical_header_key(&mut out, name);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's own table (`net/textproto/header_test.go`,
    /// `canonicalHeaderKeyTests`), then the names this project meets.
    #[test]
    fn matches_go_canonical_mime_header_key() {
        let cases = [
            ("a-b-c", "A-B-C"),
            ("a-1-c", "A-1-C"),
            ("User-Agent", "User-Agent"),
            ("uSER-aGENT", "User-Agent"),
            ("user-agent", "User-Agent"),
            ("USER-AGENT", "User-Agent"),
            // Other valid tchar bytes in tokens.
            ("foo-bar_baz", "Foo-Bar_baz"),
            ("foo-bar$baz", "Foo-Bar$baz"),
            ("foo-bar~baz", "Foo-Bar~baz"),
            ("foo-bar*baz", "Foo-Bar*baz"),
            // Non-ASCII or anything with spaces or non-token chars is unchanged.
            ("üser-agenT", "üser-agenT"),
            ("a B", "a B"),
            ("C Ontent-Transfer-Encoding", "C Ontent-Transfer-Encoding"),
            ("foo bar", "foo bar"),
            // Ours: lowercase `http::HeaderName`s, doubled and edge dashes,
            // a colon (not a tchar), the empty name.
            ("x-api-key", "X-Api-Key"),
            ("x-custom-jsvm", "X-Custom-Jsvm"),
            ("host", "Host"),
            ("www-authenticate", "Www-Authenticate"),
            ("a--b", "A--B"),
            ("-x-", "-X-"),
            ("x:y", "x:y"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(canonical_header_key(input), want, "{input:?}");
            let bytes: Vec<u8> = canonical_header_bytes(input).collect();
            assert_eq!(bytes, want.as_bytes(), "{input:?} as bytes");
        }
    }

    #[test]
    fn pushes_after_what_is_there() {
        let mut out = String::from("k\n");
        push_canonical_header_key(&mut out, "content-type");
        assert_eq!(out, "k\nContent-Type");
    }
}
