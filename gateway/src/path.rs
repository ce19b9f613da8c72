//! Path cleaning before routing, as Tyk's router (gorilla/mux) does it.
//!
//! mux decodes the path (`%2e` → `.`, `%2f` → `/`), cleans it with Go's
//! `path.Clean` (no `.` or `..` segments, no empty segments; a trailing
//! slash is kept), and when the cleaned path differs it answers every method
//! with `301 Moved Permanently` to the cleaned path, query kept. So nothing
//! with a dot segment is ever routed, let alone proxied: `/pub/../admin`,
//! `/pub/%2e%2e/admin`, `/pub/..%2fadmin` and `//tyk/apis` all get a 301.
//!
//! A path that needs no cleaning is routed with its unreserved characters
//! decoded (RFC 3986 §6.2.2.2: `/%74yk/` and `/tyk/` are the same path), so
//! an encoding cannot dodge a listen path or the control API. A slash
//! escape (`%2F`) is a `/` for matching listen paths and the control API,
//! as for mux ([`slashes_decoded`], [`aligned`]); past the listen path it
//! stays as the client wrote it, and so do other escapes (`%20`). A `%`
//! that starts no escape is refused (400), as Go's server refuses it
//! before mux sees it.

use std::borrow::Cow;

/// What routing should do with a request path.
#[derive(Debug, PartialEq, Eq)]
pub enum Cleaned<'a> {
    /// Route on this path (borrowed when it was already normal).
    Route(Cow<'a, str>),
    /// Answer 301 with this `Location`.
    Redirect(String),
    /// Refuse (400): a `%` not followed by two hex digits, which Go's
    /// server (`url.ParseRequestURI`, so Tyk) refuses too.
    BadEscape,
}

/// Cleans `raw` (a request path as sent); `query` is kept on a redirect.
pub fn clean<'a>(raw: &'a str, query: Option<&str>) -> Cleaned<'a> {
    // The fast path: no escapes and nothing to clean (every benchmark
    // request): no allocation.
    if !raw.starts_with('/') || (!raw.contains('%') && !needs_cleaning(raw.as_bytes())) {
        return Cleaned::Route(Cow::Borrowed(raw));
    }
    if !escapes_valid(raw.as_bytes()) {
        return Cleaned::BadEscape;
    }
    let decoded = percent_decode(raw.as_bytes(), |_| true);
    if needs_cleaning(&decoded) {
        let mut location = escape_path(&go_clean(&decoded));
        if let Some(q) = query {
            location.push('?');
            location.push_str(q);
        }
        return Cleaned::Redirect(location);
    }
    let unreserved = percent_decode(raw.as_bytes(), is_unreserved);
    // Decoding unreserved bytes only ever yields ASCII.
    Cleaned::Route(Cow::Owned(
        String::from_utf8_lossy(&unreserved).into_owned(),
    ))
}

/// `raw` (a cleaned path) with its slash escapes (`%2F`, `%2f`) decoded:
/// what gorilla/mux, so Tyk, matches listen paths and its own endpoints
/// against. `None` when it has none (every path without a `%`).
///
/// Routing on the raw form let `/api%2Fadmin/x` dodge the listen path
/// `/api/admin/` (and its middleware) and fall through to a shorter one,
/// such as a `/` catch-all, whose upstream then decoded it back.
pub fn slashes_decoded(raw: &str) -> Option<String> {
    let has = |p: &str| p.contains("%2F") || p.contains("%2f");
    has(raw).then(|| raw.replace("%2F", "/").replace("%2f", "/"))
}

/// The path to route `raw` by, once its slash-decoded form (see
/// [`slashes_decoded`]) matched `listen_path`: the listen path as written,
/// then the rest of `raw` with its escapes as the client sent them (what
/// Tyk sends upstream, from Go's raw path). `raw` itself when its front
/// already is the listen path.
pub fn aligned(raw: &str, listen_path: &str) -> Option<String> {
    // The bytes of `raw` that decode to the listen path's: an escape is
    // three bytes for one.
    let (mut at, mut decoded) = (0, 0);
    let bytes = raw.as_bytes();
    while decoded < listen_path.len() && at < bytes.len() {
        let escape = bytes[at] == b'%' && matches!(bytes.get(at + 1..at + 3), Some(b"2F" | b"2f"));
        at += if escape { 3 } else { 1 };
        decoded += 1;
    }
    (raw[..at] != *listen_path).then(|| format!("{listen_path}{}", &raw[at..]))
}

/// `raw` with every escape decoded, as Go's `URL.Path` holds it (what
/// Tyk matches extended paths against); borrowed when it has none.
pub fn decode(raw: &str) -> Cow<'_, str> {
    if !raw.contains('%') {
        return Cow::Borrowed(raw);
    }
    let bytes = percent_decode(raw.as_bytes(), |_| true);
    Cow::Owned(String::from_utf8_lossy(&bytes).into_owned())
}

/// Cleans a path a middleware wrote, so no dot segment reaches the upstream
/// whatever a script does, encoded ones too (`/a/%2e%2e/etc`, which an
/// upstream decodes to `/a/../etc`, went through as written); `None` when
/// it is clean already. A path with encoded dot segments comes back with
/// its other escapes re-encoded as the front door's redirect writes them.
pub fn clean_rewritten(path: &str) -> Option<String> {
    if path.contains('%') {
        let decoded = percent_decode(path.as_bytes(), |_| true);
        if needs_cleaning(&decoded) {
            return Some(escape_path(&go_clean(&decoded)));
        }
    }
    needs_cleaning(path.as_bytes())
        .then(|| String::from_utf8_lossy(&go_clean(path.as_bytes())).into_owned())
}

/// True when `p` has an empty, `.` or `..` segment.
fn needs_cleaning(p: &[u8]) -> bool {
    // Segment 0 is what precedes the leading `/`; the last may be empty
    // (a trailing slash), no other may.
    let last = p.iter().filter(|&&b| b == b'/').count();
    p.split(|&b| b == b'/')
        .enumerate()
        .skip(1)
        .any(|(i, seg)| seg == b"." || seg == b".." || (seg.is_empty() && i != last))
}

/// Go's `path.Clean` for a rooted path, then mux's rule: a trailing slash
/// stays (except on `/` itself).
fn go_clean(p: &[u8]) -> Vec<u8> {
    let mut segs: Vec<&[u8]> = Vec::new();
    for seg in p.split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    let mut out = Vec::with_capacity(p.len());
    for s in &segs {
        out.push(b'/');
        out.extend_from_slice(s);
    }
    // Empty means `/`; a trailing slash stays.
    if out.is_empty() || p.ends_with(b"/") {
        out.push(b'/');
    }
    out
}

/// Whether every `%` in `p` starts an escape: two hex digits follow it.
fn escapes_valid(p: &[u8]) -> bool {
    let mut i = 0;
    while let Some(at) = p[i..].iter().position(|&b| b == b'%') {
        let at = i + at;
        match p.get(at + 1..at + 3) {
            Some(&[h, l]) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => i = at + 3,
            _ => return false,
        }
    }
    true
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Decodes `%XX` escapes whose byte `keep` accepts; others (and malformed
/// escapes) stay as written.
fn percent_decode(p: &[u8], keep: impl Fn(u8) -> bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        if p[i] == b'%' && i + 2 < p.len() {
            if let (Some(h), Some(l)) = (hex(p[i + 1]), hex(p[i + 2])) {
                let b = h << 4 | l;
                if keep(b) {
                    out.push(b);
                    i += 3;
                    continue;
                }
            }
        }
        out.push(p[i]);
        i += 1;
    }
    out
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Escapes what may not appear raw in a path, as Go's `URL.EscapedPath`.
fn escape_path(p: &[u8]) -> String {
    let mut out = String::with_capacity(p.len());
    for &b in p {
        if is_unreserved(b) || b"/$&+,:;=@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(p: &str) -> String {
        match clean(p, None) {
            Cleaned::Route(r) => r.into_owned(),
            Cleaned::Redirect(l) => panic!("{p} redirected to {l}"),
            Cleaned::BadEscape => panic!("{p} refused"),
        }
    }

    fn redirect(p: &str, q: Option<&str>) -> String {
        match clean(p, q) {
            Cleaned::Redirect(l) => l,
            Cleaned::Route(r) => panic!("{p} routed as {r}"),
            Cleaned::BadEscape => panic!("{p} refused"),
        }
    }

    #[test]
    fn slash_escapes_match_listen_paths_and_stay_escaped_past_them() {
        assert_eq!(slashes_decoded("/api/x"), None);
        assert_eq!(slashes_decoded("/api/a%20b"), None);
        assert_eq!(
            slashes_decoded("/l%2Fmissing%2fx/y").as_deref(),
            Some("/l/missing/x/y")
        );
        // The listen path written out; the rest as the client sent it.
        assert_eq!(
            aligned("/l%2Fmissing/x%2Fy", "/l/missing/").as_deref(),
            Some("/l/missing/x%2Fy")
        );
        assert_eq!(
            aligned("/l%2fmissing%2Fx", "/l/missing/").as_deref(),
            Some("/l/missing/x")
        );
        // The escape is past the listen path: nothing to change.
        assert_eq!(aligned("/api/a%2Fb", "/api/"), None);
        assert_eq!(aligned("/api/a%2Fb", "/"), None);
        // A listen path without a trailing slash.
        assert_eq!(
            aligned("/v1%2Fusers%2F7", "/v1/users").as_deref(),
            Some("/v1/users%2F7")
        );
    }

    #[test]
    fn a_percent_that_starts_no_escape_is_refused() {
        for bad in ["/a/%zz", "/a/%", "/a/%4", "/a/%4g/b", "/%%41", "/a/%41%"] {
            assert_eq!(clean(bad, None), Cleaned::BadEscape, "{bad}");
        }
        for good in ["/a/%41", "/a/%2f%2F", "/a/%e2%82%ac"] {
            assert_ne!(clean(good, None), Cleaned::BadEscape, "{good}");
        }
        // The query is not the path's: Go leaves it for the handler.
        assert!(matches!(clean("/a/", Some("x=%zz")), Cleaned::Route(_)));
    }

    #[test]
    fn normal_paths_route_unchanged_and_unreserved_escapes_decode() {
        assert!(matches!(
            clean("/plain/", None),
            Cleaned::Route(Cow::Borrowed(_))
        ));
        assert_eq!(route("/a/b.c/d..e/.x"), "/a/b.c/d..e/.x");
        assert_eq!(route("/%74yk/apis"), "/tyk/apis");
        assert_eq!(route("/a%2Fb%20c"), "/a%2Fb%20c");
        assert_eq!(route("/"), "/");
    }

    #[test]
    fn dot_segments_and_empty_segments_redirect_like_gorilla_mux() {
        assert_eq!(redirect("/pub/../admin", None), "/admin");
        assert_eq!(redirect("/pub/%2e%2e/admin", None), "/admin");
        assert_eq!(redirect("/pub/%2E%2E/admin/", Some("a=1")), "/admin/?a=1");
        assert_eq!(redirect("/pub/..%2fadmin", None), "/admin");
        assert_eq!(redirect("//tyk/apis", None), "/tyk/apis");
        assert_eq!(redirect("/x/../tyk/", None), "/tyk/");
        assert_eq!(redirect("/a%2F%2Fb", None), "/a/b");
        assert_eq!(redirect("/a/./b", None), "/a/b");
        assert_eq!(redirect("/..", None), "/");
        assert_eq!(redirect("/a/..", None), "/");
        assert_eq!(redirect("/a b/../c d", None), "/c%20d");
    }

    #[test]
    fn rewritten_paths_lose_their_dot_segments() {
        assert_eq!(clean_rewritten("/base/x"), None);
        assert_eq!(clean_rewritten("/base/../../etc").as_deref(), Some("/etc"));
        for sneaky in [
            "/a/%2e%2e/%2e%2e/etc/passwd",
            "/a/%2E%2E/%2e./etc/passwd",
            "/a/..%2f..%2Fetc/passwd",
            "/a%2F..%2F..%2Fetc/passwd",
        ] {
            assert_eq!(
                clean_rewritten(sneaky).as_deref(),
                Some("/etc/passwd"),
                "{sneaky}"
            );
        }
        // Escapes that hide no dot segment stay as written.
        assert_eq!(clean_rewritten("/a/x%2Fb%20c/%2e%2ex"), None);
        assert_eq!(
            clean_rewritten("/a/b%20c/%2e%2e/d").as_deref(),
            Some("/a/d")
        );
        assert_eq!(
            clean_rewritten("/a/b%20c/../%2e%2e/x/%3F").as_deref(),
            Some("/x/%3F")
        );
    }
}
