//! Query strings parsed as Go's `url.ParseQuery` parses them, which is what
//! a Tyk script's `request.Params` (and a virtual endpoint's form) holds:
//!
//! - pairs are split on `&` only; a pair whose key part contains `;` is
//!   dropped (Go 1.17+: "invalid semicolon separator in query");
//! - empty pairs are skipped;
//! - `+` is a space, and a pair with a bad `%` escape (not two hex digits)
//!   is dropped whole, key and value, where a WHATWG parser keeps it.
//!
//! The bytes unescaped are made text lossily, as the JS engines need
//! strings.

/// The pairs Go's parser keeps, in order.
pub(crate) fn parse(query: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for pair in query.split(|&b| b == b'&') {
        if pair.is_empty() || pair.contains(&b';') {
            continue;
        }
        let (key, value) = match pair.iter().position(|&b| b == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &[][..]),
        };
        if let (Some(k), Some(v)) = (unescape(key), unescape(value)) {
            out.push((k, v));
        }
    }
    out
}

/// Go's `QueryUnescape`: `None` for a `%` not followed by two hex digits.
fn unescape(s: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let hi = hex(*s.get(i + 1)?)?;
                let lo = hex(*s.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::parse;

    fn pairs(q: &str) -> Vec<(String, String)> {
        parse(q.as_bytes())
    }

    fn p(k: &str, v: &str) -> (String, String) {
        (k.into(), v.into())
    }

    #[test]
    fn drops_what_gos_parser_drops() {
        // Go: url.ParseQuery("a=1;b=2&c=3") keeps only c (the first pair's
        // key part holds a ';').
        assert_eq!(pairs("a=1;b=2&c=3"), vec![p("c", "3")]);
        // A bad escape drops its pair, key and value.
        assert_eq!(pairs("bad=%zz&ok=%41&half=%4&k%g=1"), vec![p("ok", "A")]);
        // Empty pairs are skipped; a key without '=' has an empty value.
        assert_eq!(pairs("&&x&y=&=z"), vec![p("x", ""), p("y", ""), p("", "z")]);
    }

    #[test]
    fn unescapes_as_go_does() {
        assert_eq!(
            pairs("a+b=c+d%20e&n=%E2%82%AC"),
            vec![p("a b", "c d e"), p("n", "€")]
        );
        assert_eq!(pairs("m=1&m=2"), vec![p("m", "1"), p("m", "2")]);
        // A '=' in the value stays: only the first one splits.
        assert_eq!(pairs("e=a=b"), vec![p("e", "a=b")]);
    }
}
