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
    pub fn find(&self, path: &str) -> Option<&T> {
        self.routes
            .iter()
            .find(|(prefix, _)| path.starts_with(prefix.as_str()))
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
}
