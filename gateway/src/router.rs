//! Routing as Tyk does it: `listen_path` is a raw string prefix of the request
//! path, and the longest matching prefix wins.
//!
//! `/gopl/` matches `/gopl/` and `/gopl/hello` but not `/gopl` or `/goplx`;
//! `/gopl` (no slash) matches all four. After routing, [`upstream_path`] strips
//! the listen path (when the API says so) and joins what is left onto the
//! target's base path with exactly one slash.

/// Routes sorted longest listen path first, so the first match is the longest.
pub struct Router<T> {
    routes: Vec<(String, T)>,
}

impl<T> Router<T> {
    /// Builds a router from `(listen_path, value)` pairs.
    pub fn new(mut routes: Vec<(String, T)>) -> Self {
        // Stable sort: equal lengths keep load order (duplicates are refused
        // at load, so ties are only between different paths).
        routes.sort_by_key(|r| std::cmp::Reverse(r.0.len()));
        Router { routes }
    }

    /// The route whose listen path is the longest prefix of `path`.
    ///
    /// Listen paths are compared in line (a few 4- to 16-byte loads), not by
    /// a call to libc's `memcmp` per route.
    pub fn find(&self, path: &str) -> Option<&T> {
        let path = path.as_bytes();
        self.routes
            .iter()
            .find(|(prefix, _)| {
                path.get(..prefix.len())
                    .is_some_and(|p| crate::intern::same(p, prefix.as_bytes()))
            })
            .map(|(_, v)| v)
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// True when there are no routes.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

/// Trims `listen_path` from the front of `path`, keeping a leading `/`.
///
/// `strip("/gopl/", "/gopl/hello/")` is `/hello/`; `strip("/gopl/", "/gopl/")`
/// is `/`. A path that does not start with the listen path is returned as is.
pub fn strip(listen_path: &str, path: &str) -> String {
    match path.strip_prefix(listen_path) {
        Some(rest) if rest.starts_with('/') => rest.to_string(),
        Some(rest) => format!("/{rest}"),
        None => path.to_string(),
    }
}

/// Joins a target base path and a request path as Tyk's `singleJoiningSlash`
/// does: trailing slashes of the base and leading slashes of the path go,
/// one slash joins them, and an empty remainder adds nothing (target
/// `http://h/base` with request `/` goes to `/base`, not `/base/`).
pub fn join(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    let sub = path.trim_start_matches('/');
    match (base.is_empty(), sub.is_empty()) {
        // Go sends an empty path as `/`.
        (true, true) => "/".to_string(),
        (false, true) => base.to_string(),
        _ => format!("{base}/{sub}"),
    }
}

/// The path sent upstream for `path` on an API.
pub fn upstream_path(listen_path: &str, strip_listen_path: bool, base: &str, path: &str) -> String {
    if strip_listen_path {
        join(base, &strip(listen_path, path))
    } else {
        join(base, path)
    }
}

/// The origin-form request target sent upstream: [`upstream_path`], then
/// the target URL's own query and the request's, joined with `&` as Tyk's
/// director does. Held as its pieces; [`Target::string`] and
/// [`Target::write_into`] join them.
pub struct Target<'a> {
    /// The target URL's base path, without trailing slashes.
    base: &'a str,
    /// The request's path after the listen path, without leading slashes.
    sub: &'a str,
    target_query: Option<&'a str>,
    query: Option<&'a str>,
}

impl<'a> Target<'a> {
    /// The target for `path` and `query` on an API with this listen path
    /// (stripped or not) and this target base path and query.
    pub fn new(
        listen_path: &str,
        strip_listen_path: bool,
        base: &'a str,
        path: &'a str,
        target_query: Option<&'a str>,
        query: Option<&'a str>,
    ) -> Self {
        let rest = match strip_listen_path {
            true => path.strip_prefix(listen_path).unwrap_or(path),
            false => path,
        };
        // As `join`: the slashes between the base and the rest become one.
        Target {
            base: base.trim_end_matches('/'),
            sub: rest.trim_start_matches('/'),
            target_query: target_query.filter(|q| !q.is_empty()),
            query: query.filter(|q| !q.is_empty()),
        }
    }

    fn len(&self) -> usize {
        let path = match (self.base.is_empty(), self.sub.is_empty()) {
            (true, true) => 1,
            (false, true) => self.base.len(),
            _ => self.base.len() + 1 + self.sub.len(),
        };
        let query = match (self.target_query, self.query) {
            (None, None) => 0,
            (Some(q), None) | (None, Some(q)) => 1 + q.len(),
            (Some(t), Some(r)) => 2 + t.len() + r.len(),
        };
        path + query
    }

    /// In one string of exactly its length: turned into `Bytes` (and so a
    /// `Uri`), it keeps its buffer instead of being copied.
    pub fn string(&self) -> String {
        let mut out = String::with_capacity(self.len());
        self.write(|piece| out.push_str(piece));
        out
    }

    /// Written at the end of `dst` (an upstream request's head), with no
    /// string of its own.
    pub fn write_into(&self, dst: &mut Vec<u8>) {
        self.write(|piece| dst.extend_from_slice(piece.as_bytes()));
    }

    fn write(&self, mut put: impl FnMut(&str)) {
        match (self.base.is_empty(), self.sub.is_empty()) {
            // Go sends an empty path as `/`.
            (true, true) => put("/"),
            (false, true) => put(self.base),
            _ => {
                put(self.base);
                put("/");
                put(self.sub);
            }
        }
        for (i, q) in self.target_query.into_iter().chain(self.query).enumerate() {
            put(if i == 0 { "?" } else { "&" });
            put(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_prefixes_are_raw() {
        let r = Router::new(vec![
            ("/gopl/".to_string(), "slash"),
            ("/gopl".to_string(), "bare"),
            ("/gopl/deep/".to_string(), "deep"),
        ]);
        assert_eq!(r.find("/gopl/hello"), Some(&"slash"));
        assert_eq!(r.find("/gopl/deep/x"), Some(&"deep"));
        assert_eq!(r.find("/gopl"), Some(&"bare"));
        assert_eq!(r.find("/goplx"), Some(&"bare"));
        assert_eq!(r.find("/other"), None);
        let only_slash = Router::new(vec![("/gopl/".to_string(), ())]);
        assert_eq!(only_slash.find("/gopl"), None);
        assert_eq!(only_slash.find("/goplx"), None);
        // Listen paths of every length up to 40: a path that differs from
        // one in any single byte is not routed to it.
        for n in 1..=40 {
            let lp: String = (0..n).map(|i| (b'a' + i % 26) as char).collect();
            let r = Router::new(vec![(lp.clone(), n)]);
            assert_eq!(r.find(&format!("{lp}/x")), Some(&n), "{lp}");
            assert_eq!(r.find(&lp[..n as usize - 1]), None, "{lp}");
            for i in 0..n as usize {
                let mut other = lp.clone().into_bytes();
                other[i] = b'Z';
                assert_eq!(
                    r.find(std::str::from_utf8(&other).unwrap()),
                    None,
                    "{lp} byte {i}"
                );
            }
        }
    }

    #[test]
    fn strip_and_join_follow_tyk() {
        assert_eq!(upstream_path("/gopl/", true, "", "/gopl/hello/"), "/hello/");
        assert_eq!(upstream_path("/gopl/", true, "/base", "/gopl/x"), "/base/x");
        assert_eq!(upstream_path("/gopl/", true, "", "/gopl/"), "/");
        assert_eq!(upstream_path("/gopl/", true, "/base", "/gopl/"), "/base");
        assert_eq!(
            upstream_path("/gopl/", true, "/base", "/gopl//x"),
            "/base/x"
        );
        assert_eq!(upstream_path("/gopl", true, "/base", "/goplx"), "/base/x");
        assert_eq!(
            upstream_path("/gopl/", false, "", "/gopl/hello"),
            "/gopl/hello"
        );
        assert_eq!(
            upstream_path("/gopl/", false, "/base", "/gopl/a"),
            "/base/gopl/a"
        );
    }

    #[test]
    fn the_target_in_one_string_is_the_path_and_both_queries() {
        for (lp, strip, base, path) in [
            ("/gopl/", true, "", "/gopl/hello/"),
            ("/gopl/", true, "/base", "/gopl/x"),
            ("/gopl/", true, "", "/gopl/"),
            ("/gopl/", true, "/base/", "/gopl/"),
            ("/gopl/", true, "/base", "/gopl//x"),
            ("/gopl", true, "/base", "/goplx"),
            ("/gopl/", false, "", "/gopl/hello"),
            ("/gopl/", false, "/base", "/gopl/a"),
            ("/other/", true, "/b", "/x"),
        ] {
            let p = upstream_path(lp, strip, base, path);
            for (tq, q, want) in [
                (None, None, p.clone()),
                (Some(""), Some(""), p.clone()),
                (Some("k=1"), None, format!("{p}?k=1")),
                (None, Some("a=2"), format!("{p}?a=2")),
                (Some("k=1"), Some("a=2"), format!("{p}?k=1&a=2")),
            ] {
                let target = Target::new(lp, strip, base, path, tq, q);
                let got = target.string();
                assert_eq!(got, want, "{lp} {strip} {base} {path} {tq:?} {q:?}");
                assert_eq!(got.capacity(), got.len());
                // Written into a head after what it already holds.
                let mut head = b"GET ".to_vec();
                target.write_into(&mut head);
                assert_eq!(head, format!("GET {want}").into_bytes());
            }
        }
    }
}
