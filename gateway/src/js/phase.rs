//! The two JS phases beside the request phase, as data both engines share:
//! what a response middleware's answer changes ([`ResponseEdits`], Tyk's
//! `mw_js_plugin_response.go`), and a virtual endpoint's request and
//! answer ([`endpoint_request`], [`endpoint_answer`], Tyk's
//! `mw_virtual_endpoint.go`).
//!
//! A virtual endpoint crosses the boundary as JSON, exactly as in Tyk: the
//! request object is JSON the function's caller parses, and the function
//! returns `TykJsResponse(...)`, which is `JSON.stringify({Response,
//! SessionMeta})`. It is the one place Tyk's API itself is a JSON string.

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use http::header::HeaderName;
use http::{HeaderMap, StatusCode};
use serde_json::{Map, Value};

use super::forced;
use super::request::{canonical, header};
use crate::middleware::{MwError, MwRequest, MwResponse};

/// What a response middleware's `Response` answer changes, read by either
/// engine with Go's type rules.
pub(crate) struct ResponseEdits {
    /// `StatusCode`; `None` for 0 (unchanged, as Tyk).
    pub(crate) status: Option<u16>,
    /// `Body`: `None` when it is the very string the script was given (the
    /// upstream's bytes then pass unchanged, even when not UTF-8).
    pub(crate) body: Option<String>,
    /// `DeleteHeaders`, applied first.
    pub(crate) delete: Vec<String>,
    /// `SetHeaders`, applied after.
    pub(crate) set: Vec<(String, String)>,
}

impl ResponseEdits {
    /// A `StatusCode` as Go's decoder and `WriteHeader` accept it: an
    /// integer, 0 meaning "unchanged", else 100..=999.
    pub(crate) fn status(n: Option<f64>) -> Result<Option<u16>, MwError> {
        match n {
            None | Some(0.0) => Ok(None),
            Some(n) if n.fract() == 0.0 && (100.0..=999.0).contains(&n) => Ok(Some(n as u16)),
            Some(n) => Err(MwError::bad_answer(format!(
                "Response.StatusCode {n} is not an HTTP status"
            ))),
        }
    }

    /// Applies the edits in Tyk's order: header deletes, sets, the body
    /// (always replaced: a missing `Body` empties it, as in Tyk), then the
    /// status when non-zero.
    pub(crate) fn apply(self, resp: &mut MwResponse) -> Result<(), MwError> {
        for name in &self.delete {
            if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
                resp.headers.remove(n);
            }
        }
        for (name, value) in &self.set {
            let (n, v) = header(name, value, "Response.SetHeaders")?;
            resp.headers.insert(n, v);
        }
        if let Some(body) = self.body {
            resp.body = Bytes::from(body);
        }
        if let Some(code) = self.status {
            resp.status = StatusCode::from_u16(code).map_err(|_| {
                MwError::bad_answer(format!("Response.StatusCode {code} is not an HTTP status"))
            })?;
        }
        Ok(())
    }
}

/// Tyk's `RequestObject`, marshalled as Go marshals it: fields in the
/// struct's order (`Headers`, `Body`, `URL`, `Params`, `Scheme`), map keys
/// sorted. Serialized straight from borrowed data: building a
/// `serde_json::Value` first (a sorted map of the fields too, which put
/// `Body` first) cost twice the instructions.
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct RequestObject<'a> {
    headers: BTreeMap<String, Vec<Cow<'a, str>>>,
    body: Cow<'a, str>,
    #[serde(rename = "URL")]
    url: String,
    params: BTreeMap<String, Vec<String>>,
    scheme: &'static str,
}

/// A virtual endpoint's `request` (Tyk's `RequestObject`) as JSON:
/// `Headers` (canonical names, each with every value), `Body`, `URL` (path
/// and query as the client sent them, after `pre`), `Params` (Go's
/// `r.Form`: a form body's values before the query's) and `Scheme`.
pub(crate) fn endpoint_request(req: &MwRequest) -> String {
    let mut params: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |pairs: Vec<(String, String)>| {
        for (k, v) in pairs {
            params.entry(k).or_default().push(v);
        }
    };
    let form = req
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.split(';').next() == Some("application/x-www-form-urlencoded"));
    if form && matches!(req.method.as_str(), "POST" | "PUT" | "PATCH") {
        add(super::goquery::parse(&req.body));
    }
    if let Some(q) = req.query() {
        add(super::goquery::parse(q.as_bytes()));
    }
    let headers = req
        .headers
        .keys()
        .map(|name| {
            let values = req.headers.get_all(name).iter();
            let values = values
                .map(|v| String::from_utf8_lossy(v.as_bytes()))
                .collect();
            (canonical(name.as_str()), values)
        })
        .collect();
    let object = RequestObject {
        headers,
        body: String::from_utf8_lossy(&req.body),
        url: req.path_and_query(),
        params,
        scheme: "http",
    };
    serde_json::to_string(&object).expect("strings and maps of strings always serialize")
}

/// `obj[key]`, matching the key case-insensitively when no exact key is
/// there, as Go's JSON decoder matches struct fields.
fn field<'v>(obj: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    obj.get(key).or_else(|| {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

/// What a virtual endpoint's function returned (`TykJsResponse(...)`, a
/// JSON string), as the response Tyk's `forceResponse` writes.
pub(crate) fn endpoint_answer(text: &str) -> Result<MwResponse, MwError> {
    let bad = |why: String| MwError::bad_answer(format!("the virtual endpoint's answer {why}"));
    let v: Value = serde_json::from_str(text).map_err(|e| {
        bad(format!(
            "is not the JSON TykJsResponse(response, session) returns ({e})"
        ))
    })?;
    let empty = Map::new();
    let top = v
        .as_object()
        .ok_or_else(|| bad("is not a JSON object".into()))?;
    let resp = match field(top, "Response") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(o)) => o,
        Some(_) => return Err(bad("has a Response that is not an object".into())),
    };
    let body = match field(resp, "Body") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(bad(format!("has a Body that is not a string: {other}"))),
    };
    let code = match field(resp, "Code") {
        Some(Value::Number(n)) => n.as_u64().and_then(|c| u16::try_from(c).ok()),
        _ => None,
    };
    let status = code
        .filter(|c| (100..=999).contains(c))
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or_else(|| {
            bad(format!(
                "has no Code that is an HTTP status: {}",
                field(resp, "Code").unwrap_or(&Value::Null)
            ))
        })?;
    let mut headers = HeaderMap::new();
    match field(resp, "Headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (name, value) in h {
                let value = value
                    .as_str()
                    .ok_or_else(|| bad(format!("has a header {name:?} that is not a string")))?;
                let (n, v) = header(name, value, "Response.Headers")?;
                headers.insert(n, v);
            }
        }
        Some(_) => return Err(bad("has Headers that are not an object".into())),
    }
    Ok(forced::forced(status, headers, Bytes::from(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_decode_as_gos_json_does() {
        let r = endpoint_answer(
            r#"{"Response":{"Body":"{\"a\":1}","Code":202,"Headers":{"X-A":"b"}},"SessionMeta":{}}"#,
        )
        .unwrap();
        assert_eq!(r.status, 202);
        assert_eq!(r.headers["x-a"], "b");
        assert_eq!(r.headers["server"], "tyk");
        assert_eq!(r.headers["content-type"], "text/plain; charset=utf-8");
        // Field names match in any case, as Go's decoder matches them.
        let r = endpoint_answer(r#"{"response":{"body":"x","code":201}}"#).unwrap();
        assert_eq!((r.status.as_u16(), &r.body[..]), (201, &b"x"[..]));
        for bad in [
            "[object Object]",
            "undefined",
            r#"{"Response":{"Body":"x"}}"#,
            r#"{"Response":{"Body":1,"Code":200}}"#,
            r#"{"Response":{"Code":200.5}}"#,
            r#"{"Response":{"Code":200,"Headers":{"X":1}}}"#,
        ] {
            assert!(endpoint_answer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_request_is_tyks_request_object() {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", "k".parse().unwrap());
        headers.insert(
            "content-type",
            "application/x-www-form-urlencoded".parse().unwrap(),
        );
        let req = MwRequest::new(
            http::Method::POST,
            "/v/x?a=2&b=3".parse().unwrap(),
            headers,
            Bytes::from_static(b"a=1"),
            "127.0.0.1:1".parse().unwrap(),
        );
        let text = endpoint_request(&req);
        let v: Value = serde_json::from_str(&text).unwrap();
        // Go marshals a struct's fields in their order, map keys sorted:
        // what `Object.keys(request)` shows the function.
        let keys = |t: &str| -> Vec<String> {
            let order: serde_json::Map<String, Value> = serde_json::from_str(t).unwrap();
            let mut found: Vec<(usize, String)> = order
                .keys()
                .map(|k| (t.find(&format!("\"{k}\":")).unwrap(), k.clone()))
                .collect();
            found.sort();
            found.into_iter().map(|(_, k)| k).collect()
        };
        assert_eq!(keys(&text), ["Headers", "Body", "URL", "Params", "Scheme"]);
        assert!(
            text.starts_with(r#"{"Headers":{"Content-Type":["application/x-www-form-urlencoded"],"X-Api-Key":["k"]},"Body":"a=1","#),
            "{text}"
        );
        assert_eq!(v["URL"], "/v/x?a=2&b=3");
        assert_eq!(v["Headers"]["X-Api-Key"], serde_json::json!(["k"]));
        assert_eq!(v["Params"]["a"], serde_json::json!(["1", "2"]));
        assert_eq!(v["Body"], "a=1");
        assert_eq!(v["Scheme"], "http");
    }
}
