//! The gateway's own endpoints, answered before routing:
//!
//! - `GET /hello`: Tyk's health check, always on.
//! - `/tyk/...`: the control API, on only when a secret is configured; every
//!   call must carry `X-Tyk-Authorization: <secret>`, as Tyk's does.
//!   - `GET /tyk/stats`: middleware call times per API, hook and middleware.
//!   - `DELETE /tyk/stats`: resets them (the bench reads one route at a time).
//!   - `GET /tyk/apis`: the APIs that loaded, and the files that did not.

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode};
use serde_json::json;

use crate::config::LoadError;
use crate::error::{error_response, text_response};
use crate::stats::Stats;

/// Header carrying the control API secret.
pub const AUTH_HEADER: &str = "x-tyk-authorization";

/// State behind the gateway's own endpoints, shared by all workers.
pub struct Control {
    /// The control API secret; `None` turns `/tyk/` off.
    pub secret: Option<String>,
    /// Middleware call times.
    pub stats: Stats,
    /// `(api_id, listen_path, driver)` of each API that loaded.
    pub apis: Vec<(String, String, String)>,
    /// Files that did not load.
    pub load_errors: Vec<LoadError>,
}

impl Control {
    /// Answers the request if it is for the gateway itself; `None` otherwise.
    pub fn handle(
        &self,
        method: &Method,
        path: &str,
        headers: &http::HeaderMap,
    ) -> Option<Response<Bytes>> {
        if path == "/hello" && (method == Method::GET || method == Method::HEAD) {
            return Some(health());
        }
        let secret = self.secret.as_deref()?;
        if !is_control_path(path) {
            return None;
        }
        let given = headers.get(AUTH_HEADER).map(HeaderValue::as_bytes);
        if !given.is_some_and(|g| constant_time_eq(g, secret.as_bytes())) {
            return Some(error_response(
                StatusCode::FORBIDDEN,
                "Attempted administrative access with invalid or missing key!",
            ));
        }
        Some(match (method, path.trim_end_matches('/')) {
            (&Method::GET, "/tyk/stats") => {
                json_response(&json!({ "apis": self.stats.summaries() }))
            }
            (&Method::DELETE, "/tyk/stats") => {
                self.stats.reset();
                json_response(&json!({ "status": "ok", "action": "reset" }))
            }
            (&Method::GET, "/tyk/apis") => json_response(&json!({
                "apis": self.apis.iter().map(|(id, lp, d)| json!({
                    "api_id": id, "listen_path": lp, "driver": d,
                })).collect::<Vec<_>>(),
                "load_errors": self.load_errors.iter().map(|e| json!({
                    "file": e.file.display().to_string(), "field": e.field, "error": e.message,
                })).collect::<Vec<_>>(),
            })),
            (_, "/tyk/stats" | "/tyk/apis") => {
                error_response(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
            }
            _ => error_response(StatusCode::NOT_FOUND, "Not Found"),
        })
    }
}

/// `/tyk` and everything under it, in any letter case: a spelling Tyk's
/// control API would not answer must not fall through to an API either.
fn is_control_path(path: &str) -> bool {
    let p = path.as_bytes();
    p.len() >= 4 && p[..4].eq_ignore_ascii_case(b"/tyk") && (p.len() == 4 || p[4] == b'/')
}

fn health() -> Response<Bytes> {
    json_response(&json!({
        "status": "pass",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "Tyk-compatible gateway (Rust), native and JS middleware",
    }))
}

fn json_response(v: &serde_json::Value) -> Response<Bytes> {
    text_response(StatusCode::OK, "application/json", &v.to_string())
}

/// Compares secrets without leaking the length of the matching prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control(secret: Option<&str>) -> Control {
        Control {
            secret: secret.map(str::to_string),
            stats: Stats::default(),
            apis: vec![],
            load_errors: vec![],
        }
    }

    #[test]
    fn control_api_needs_the_secret_and_is_off_without_one() {
        let mut h = http::HeaderMap::new();
        let c = control(Some("s3cret"));
        let r = c.handle(&Method::GET, "/tyk/stats", &h).unwrap();
        assert_eq!(r.status(), 403);
        h.insert(AUTH_HEADER, "wrong!".parse().unwrap());
        assert_eq!(
            c.handle(&Method::GET, "/tyk/stats", &h).unwrap().status(),
            403
        );
        h.insert(AUTH_HEADER, "s3cret".parse().unwrap());
        assert_eq!(
            c.handle(&Method::GET, "/tyk/stats", &h).unwrap().status(),
            200
        );
        assert!(control(None)
            .handle(&Method::GET, "/tyk/stats", &h)
            .is_none());
        assert_eq!(
            control(None)
                .handle(&Method::GET, "/hello", &h)
                .unwrap()
                .status(),
            200
        );
        assert!(c.handle(&Method::GET, "/plain/", &h).is_none());
        assert!(c.handle(&Method::GET, "/tykx/", &h).is_none());
        for p in ["/TYK/apis", "/Tyk/", "/tyk"] {
            let r = c.handle(&Method::GET, p, &h).expect(p);
            assert_eq!(r.status(), 404, "{p}");
        }
    }
}
