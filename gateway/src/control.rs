//! The gateway's own endpoints, answered before routing:
//!
//! - `GET /hello`: Tyk's health check, always on.
//! - `OPTIONS *`: 200 with an empty body, as Go's server answers it.
//! - `/tyk/...`: the control API, on only when a secret is configured; every
//!   call must carry `X-Tyk-Authorization: <secret>`, as Tyk's does.
//!   - `GET /tyk/stats`: middleware call times per API, hook and middleware,
//!     middleware failures per API and kind, and the JS VM threads out of
//!     service (abandoned, parked).
//!   - `DELETE /tyk/stats`: resets them (the bench reads one route at a time).
//!   - `GET /tyk/apis`: every API with its status (serving, failing closed
//!     and why, internal), the files that did not load, and the warnings.

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode};
use serde_json::json;

use crate::config::LoadError;
use crate::error::text_response;
use crate::stats::Stats;

/// Header carrying the control API secret (one definition, shared with loadgen).
pub use gateway_wire::AUTH_HEADER;

/// State behind the gateway's own endpoints, shared by all workers.
pub struct Control {
    /// The control API secret; `None` turns `/tyk/` off.
    pub secret: Option<String>,
    /// Middleware call times, shared with the workers that record them.
    pub stats: Stats,
    /// Every valid definition: served, failing closed, or internal.
    pub apis: Vec<ApiListing>,
    /// Files that did not load, and why each failing API fails.
    pub load_errors: Vec<LoadError>,
    /// Fields not implemented here, and likely typos.
    pub warnings: Vec<LoadError>,
}

/// One API as `GET /tyk/apis` lists it.
#[derive(Debug, Clone)]
pub struct ApiListing {
    /// `api_id`: the key the bench and `/tyk/stats` use for this API.
    pub api_id: String,
    /// The definition file, as the `--apis` directory names it.
    pub file: String,
    /// The normalised listen path it is routed under.
    pub listen_path: String,
    /// `native`, `javascript` or `none`.
    pub driver: String,
    /// `serving`; `failing` (routed, every request 500, see `error`); or
    /// `internal` (not routed from outside).
    pub status: &'static str,
    /// Why a failing API fails.
    pub error: Option<String>,
}

impl ApiListing {
    fn to_json(&self) -> serde_json::Value {
        let mut v = json!({
            "api_id": self.api_id, "file": self.file, "listen_path": self.listen_path,
            "driver": self.driver, "status": self.status,
        });
        if let Some(e) = &self.error {
            v["error"] = json!(e);
        }
        v
    }
}

/// Warnings for routed APIs whose requests the gateway's own endpoints
/// answer first: a listen path under `/tyk` while the control API is on
/// (`secret`), all of them; `/hello`, its `GET` and `HEAD` of `/hello`
/// itself. Without a warning, such an API looked served and never was.
pub fn shadowed(apis: &[ApiListing], secret: bool) -> Vec<LoadError> {
    let field = "proxy.listen_path";
    apis.iter()
        .filter(|a| a.status != "internal")
        .filter_map(|a| {
            let file = std::path::Path::new(&a.file);
            let lp = a.listen_path.as_str();
            if secret && is_control_path(lp) {
                let m = format!(
                    "{lp} is under /tyk, the control API's (on: a secret is set), which answers                      every request there first: this API gets none"
                );
                Some(LoadError::new(file, field, m))
            } else if lp.trim_end_matches('/') == "/hello" {
                let m = format!(
                    "{lp}: GET and HEAD of /hello are the gateway's health check, answered                      before routing: this API gets only its other requests"
                );
                Some(LoadError::new(file, field, m))
            } else {
                None
            }
        })
        .collect()
}

fn problems(list: &[LoadError]) -> Vec<serde_json::Value> {
    list.iter()
        .map(|e| {
            json!({
                "file": e.file.display().to_string(), "field": e.field, "error": e.message,
            })
        })
        .collect()
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
        // `OPTIONS *` asks about the server, not a resource: Go's server
        // answers it itself (200, `Content-Length: 0`) before Tyk sees it.
        if path == "*" && method == Method::OPTIONS {
            return Some(Response::new(Bytes::new()));
        }
        let secret = self.secret.as_deref()?;
        if !is_control_path(path) {
            return None;
        }
        let given = headers.get(AUTH_HEADER).map(HeaderValue::as_bytes);
        if !given.is_some_and(|g| constant_time_eq(g, secret.as_bytes())) {
            return Some(control_error(
                StatusCode::FORBIDDEN,
                "Attempted administrative access with invalid or missing key!",
            ));
        }
        Some(match (method, path.trim_end_matches('/')) {
            (&Method::GET, "/tyk/stats") => json_response(&json!(self.stats.body())),
            (&Method::DELETE, "/tyk/stats") => {
                self.stats.reset();
                json_response(&json!({ "status": "ok", "action": "reset" }))
            }
            (&Method::GET, "/tyk/apis") => json_response(&json!({
                "apis": self.apis.iter().map(ApiListing::to_json).collect::<Vec<_>>(),
                "load_errors": problems(&self.load_errors),
                "warnings": problems(&self.warnings),
            })),
            (_, "/tyk/stats" | "/tyk/apis") => {
                control_error(StatusCode::METHOD_NOT_ALLOWED, "Method not supported")
            }
            _ => control_error(StatusCode::NOT_FOUND, "Not Found"),
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

/// Tyk's control API error, as Go's `json.Encoder` writes its struct:
/// `{"status":"error","message":"..."}`, fields in that order, `<>&`
/// escaped, and a newline. Not the proxy's error template.
fn control_error(status: StatusCode, message: &str) -> Response<Bytes> {
    let quoted = serde_json::to_string(message)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let body = format!("{{\"status\":\"error\",\"message\":{quoted}}}\n");
    text_response(status, "application/json", &body)
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
            warnings: vec![],
        }
    }

    #[test]
    fn control_api_needs_the_secret_and_is_off_without_one() {
        let mut h = http::HeaderMap::new();
        let c = control(Some("s3cret"));
        let r = c.handle(&Method::GET, "/tyk/stats", &h).unwrap();
        assert_eq!(r.status(), 403);
        assert_eq!(
            r.body().as_ref(),
            b"{\"status\":\"error\",\"message\":\"Attempted administrative access with invalid or missing key!\"}\n"
        );
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
