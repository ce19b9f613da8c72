//! The `tyk-json` strategy's marshalling, shared by both engines: Tyk's own
//! transport between the gateway and the VM, reproduced so its cost can be
//! measured beside the native request object.
//!
//! What Tyk's `gateway/mw_js_plugin.go` does per call, and so this does:
//!
//! 1. JSON-encode the request as Go's `MiniRequestObject` (fields in its
//!    order; `Body` is a Go `[]byte`, so base64 text; maps with sorted
//!    keys, as `encoding/json` writes them), the session and the spec
//!    (`{"APIID", "OrgID", "config_data"}`);
//! 2. paste the three texts into the call's source,
//!    `<name>.DoProcessRequest(<request>, <session>, <spec>)`, which the
//!    engine parses and runs in the API's persistent context;
//! 3. `DoProcessRequest` base64-decodes `Body`, calls `ProcessRequest`,
//!    resets `Request.Headers`, base64-encodes `Body` and returns
//!    `JSON.stringify` of the answer;
//! 4. JSON-decode that text as Go's `VMReturnObject` and apply it.
//!
//! Step 3 runs in [`HELPER`], a hidden global the host defines before the
//! API's scripts (so a script's own `DoProcessRequest` cannot change how the
//! host talks to it, as in the other strategies). Steps 1 and 4 are here.
//!
//! Where this departs from Go's bytes on purpose, so that every strategy
//! passes the same scenarios: the session is `{}` (the other strategies'
//! session; Tyk encodes an empty `SessionState` with all its fields), and
//! `ReturnOverrides.ResponseHeaders` is `{}` where Go's nil map is `null`.
//! The answer's rules (types, order of application, overrides) are the
//! other strategies' (`request.rs`), so a script gets the same result
//! whichever strategy runs it.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;
use http::header::HeaderName;
use serde::Serialize;
use serde_json::{Map, Value};

use super::bodies::{BodyField, OVERRIDE_BODY, OVERRIDE_ERROR, REQUEST_BODY};
use super::headtext::HeadText;
use super::request::{canonical, edit_query, header, set_url};
use crate::error::ErrorFormat;
use crate::middleware::{Flow, MwError, MwRequest, ReqMut};

/// Tyk's `DoProcessRequest`, as a non-writable, non-enumerable global
/// `__tykJson(mw, request, session, spec)`. It captures `b64dec`, `b64enc`
/// and `log` when defined, so a script that reassigns them does not break
/// the transport. A `Request` that is not an object is left for the host to
/// name (Tyk's would throw a `TypeError` at `Request.Headers`).
pub(crate) const HELPER: &str = r#"Object.defineProperty(globalThis, "__tykJson", {
    value: (function (dec, enc, log) {
        return function (mw, request, session, config) {
            request.Body = dec(request.Body);
            var processed = mw.ProcessRequest(request, session, config);
            if (!processed) {
                log("Middleware didn't return request object!");
                return;
            }
            var r = processed.Request;
            if (r !== null && typeof r === "object") {
                r.Headers = {};
                r.Body = enc(r.Body);
            }
            return JSON.stringify(processed);
        };
    })(b64dec, b64enc, log)
});"#;

/// What an API's calls need to write their source: each entry's object name
/// and the spec's JSON text (made once: it never changes).
#[derive(Debug, Clone)]
pub(crate) struct Calls {
    names: Vec<String>,
    spec: String,
}

impl Calls {
    /// `names` are the entries' object names, already checked to be
    /// identifiers (they are pasted into source text).
    /// `config` is `None` when `config_data_disabled`: the key is left out,
    /// as Tyk's `specToJson` does.
    pub(crate) fn new(
        names: Vec<String>,
        api_id: &str,
        org_id: &str,
        config: Option<&Value>,
    ) -> Calls {
        // A `json!` map is sorted: APIID, OrgID, config_data, as Go's
        // encoder writes a `map[string]interface{}`.
        let mut spec = serde_json::json!({"APIID": api_id, "OrgID": org_id});
        if let Some(config) = config {
            spec["config_data"] = config.clone();
        }
        Calls {
            names,
            spec: spec.to_string(),
        }
    }

    /// The source of one call of entry `index`: `__tykJson(<name>,
    /// <request JSON>, {}, <spec JSON>)`, wrapped in `before` and `after`
    /// (the engine's own catch, if any).
    pub(crate) fn source(
        &self,
        index: usize,
        req: &MwRequest,
        before: &str,
        after: &str,
    ) -> String {
        let request = request_json(req);
        let name = &self.names[index];
        let mut src = String::with_capacity(request.len() + self.spec.len() + 64);
        src.push_str(before);
        src.push_str("__tykJson(");
        src.push_str(name);
        src.push_str(", ");
        src.push_str(&request);
        src.push_str(", {}, ");
        src.push_str(&self.spec);
        src.push(')');
        src.push_str(after);
        src
    }
}

/// Go's `ReturnOverrides`, as encoded for a new request.
#[derive(Serialize)]
#[allow(non_snake_case)]
struct Overrides {
    ResponseCode: u16,
    ResponseError: &'static str,
    ResponseBody: &'static str,
    ResponseHeaders: BTreeMap<String, String>,
    OverrideError: bool,
}

/// Go's `MiniRequestObject`, field for field, in its declaration order
/// (which is the order `encoding/json` writes).
#[derive(Serialize)]
#[allow(non_snake_case)]
struct MiniRequest<'a> {
    Headers: BTreeMap<String, Vec<String>>,
    SetHeaders: BTreeMap<String, String>,
    DeleteHeaders: [&'static str; 0],
    Body: String,
    URL: &'a str,
    Params: BTreeMap<String, Vec<String>>,
    AddParams: BTreeMap<String, String>,
    ExtendedParams: BTreeMap<String, Vec<String>>,
    DeleteParams: [&'static str; 0],
    ReturnOverrides: Overrides,
    IgnoreBody: bool,
    Method: &'a str,
    RequestURI: &'a str,
    Scheme: &'static str,
}

/// The request as Tyk's JSON text.
pub(crate) fn request_json(req: &MwRequest) -> String {
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in req.headers.keys() {
        let values = req.headers.get_all(name).iter();
        let values = values.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        headers.insert(canonical(name.as_str()), values.collect());
    }
    let mut params: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(q) = req.query() {
        for (k, v) in super::goquery::parse(q.as_bytes()) {
            params.entry(k).or_default().push(v);
        }
    }
    let url = req.path_and_query();
    let uri = req
        .request_uri
        .path_and_query()
        .map_or("/", |pq| pq.as_str());
    let mini = MiniRequest {
        Headers: headers,
        SetHeaders: BTreeMap::new(),
        DeleteHeaders: [],
        Body: STANDARD.encode(&req.body),
        URL: &url,
        Params: params,
        AddParams: BTreeMap::new(),
        ExtendedParams: BTreeMap::new(),
        DeleteParams: [],
        ReturnOverrides: Overrides {
            ResponseCode: 0,
            ResponseError: "",
            ResponseBody: "",
            ResponseHeaders: BTreeMap::new(),
            OverrideError: false,
        },
        IgnoreBody: false,
        Method: req.method.as_str(),
        RequestURI: uri,
        Scheme: "http",
    };
    serde_json::to_string(&mini).expect("strings and maps always encode")
}

/// The JSON type of a value, for error messages.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) | Value::Object(_) => "object",
    }
}

/// An answer broke a type rule: names the field, as the other strategies do.
fn shape(field: &str, want: &str, got: &Value) -> MwError {
    MwError::bad_answer(format!(
        "ProcessRequest result: {field} must be {want}, got {}",
        type_of(got)
    ))
}

/// The error of a call whose `DoProcessRequest` returned no text (the
/// handler returned nothing): `got` is the JS type of what it returned.
pub(crate) fn no_answer(got: &str) -> MwError {
    MwError::bad_answer(format!(
        "ProcessRequest result: the return value must be an object (use ReturnData), got {got}"
    ))
}

fn opt_object<'a>(
    v: Option<&'a Value>,
    field: &str,
) -> Result<Option<&'a Map<String, Value>>, MwError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(other) => Err(shape(field, "an object", other)),
    }
}

/// The other strategies' `strings` on decoded JSON: each taken from the
/// answer's `head` text, as they take it (`js/headtext.rs`).
fn strings(v: Option<&Value>, field: &str, head: &mut HeadText) -> Result<Vec<String>, MwError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => head.take(field, s.len()).map(|()| s.clone()),
                // Go decodes `null` into a string as no change: `""`
                // (`gostring.rs`).
                Value::Null => Ok(String::new()),
                other => Err(shape(&format!("{field}[{i}]"), "a string", other)),
            })
            .collect(),
        Some(other) => Err(shape(field, "an array", other)),
    }
}

fn string_map(
    v: Option<&Value>,
    field: &str,
    head: &mut HeadText,
) -> Result<Vec<(String, String)>, MwError> {
    let Some(m) = opt_object(v, field)? else {
        return Ok(Vec::new());
    };
    m.iter()
        .map(|(k, v)| {
            let s = match v {
                Value::String(s) => s.as_str(),
                // `null`: `""` to Go (`gostring.rs`).
                Value::Null => "",
                other => return Err(shape(&format!("{field}[{k:?}]"), "a string", other)),
            };
            head.pair(field, k.len(), s.len())
                .map(|()| (k.clone(), s.to_string()))
        })
        .collect()
}

/// A field Go decodes into a `bool` (`IgnoreBody`, `OverrideError`): a
/// boolean, or absent or `null` (`false`); anything else is refused, as
/// the other strategies refuse it (`crate::js::request::go_bool`).
fn go_bool(v: Option<&Value>, field: &str) -> Result<bool, MwError> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(shape(field, "a boolean", other)),
    }
}

/// Decodes the text `DoProcessRequest` returned and applies it to `req`, by
/// the rules of `request::apply`: overrides first (nothing proxied), then
/// body, URL, header deletes before sets, then query deletes, sets and
/// appends.
pub(crate) fn apply(answer: &str, req: &mut MwRequest) -> Result<Flow, MwError> {
    // A header the script set may hold a lone surrogate: Go reads it as
    // U+FFFD where serde_json would refuse the whole answer.
    let ret: Value = serde_json::from_str(&super::gojson::lone_surrogates(answer))
        .map_err(|e| MwError::bad_answer(format!("ProcessRequest result is not JSON: {e}")))?;
    let Value::Object(ret) = &ret else {
        return Err(shape(
            "the return value",
            "an object (use ReturnData)",
            &ret,
        ));
    };
    let r = match ret.get("Request") {
        Some(Value::Object(r)) => r,
        other => {
            return Err(shape(
                "Request",
                "an object (use ReturnData)",
                other.unwrap_or(&Value::Null),
            ))
        }
    };
    // Go decodes the whole answer before using any of it: a session field
    // of the wrong type fails the request even when the rest would apply.
    use crate::js::session::{CHECKS, FIELDS};
    for (key, check) in FIELDS.into_iter().zip(CHECKS) {
        if let Some(v) = ret.get(key) {
            check(v)?;
        }
    }
    let mut head = HeadText::new();
    let format = ErrorFormat::of(&req.headers);
    if let Some(answer) = overrides(r.get("ReturnOverrides"), format, &mut head)? {
        // Go decoded the edits too before the override answered: one it
        // cannot decode fails the request all the same.
        check_edits(r, &mut head)?;
        return Ok(answer);
    }
    if !go_bool(r.get("IgnoreBody"), "Request.IgnoreBody")? {
        let body = match r.get("Body") {
            Some(Value::String(b)) => STANDARD
                .decode(b)
                .map_err(|e| MwError::bad_answer(format!("Request.Body is not base64: {e}")))?,
            None | Some(Value::Null) => Vec::new(),
            Some(other) => return Err(shape("Request.Body", "a string", other)),
        };
        REQUEST_BODY.check(body.len())?;
        if body != req.body {
            req.body = Bytes::from(body);
            crate::body::reframe(&mut req.headers, &req.method, req.body.len());
        }
    }
    match r.get("URL") {
        Some(Value::String(url)) if *url != req.path_and_query() => {
            set_url(&mut ReqMut::Owned(req), url)?
        }
        Some(Value::String(_)) => {}
        other => {
            let got = other.unwrap_or(&Value::Null);
            return Err(shape("Request.URL", "a string", got));
        }
    }
    for name in strings(r.get("DeleteHeaders"), "Request.DeleteHeaders", &mut head)? {
        if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
            req.headers.remove(n);
        }
    }
    for (name, value) in string_map(r.get("SetHeaders"), "Request.SetHeaders", &mut head)? {
        let (n, v) = header(&name, &value, "Request.SetHeaders")?;
        crate::js::request::put_header(&mut req.headers, n, v, "Request.SetHeaders")?;
    }
    apply_params(r, req, &mut head)?;
    Ok(Flow::Continue)
}

/// The edits' types, read as [`apply`] reads them, nothing applied: what
/// Go's decoder refuses when an override answers.
fn check_edits(r: &Map<String, Value>, head: &mut HeadText) -> Result<(), MwError> {
    go_bool(r.get("IgnoreBody"), "Request.IgnoreBody")?;
    // Absent or `null` is Go's "" (never applied, so never refused).
    match r.get("URL") {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(other) => return Err(shape("Request.URL", "a string", other)),
    }
    strings(r.get("DeleteHeaders"), "Request.DeleteHeaders", head)?;
    string_map(r.get("SetHeaders"), "Request.SetHeaders", head)?;
    query_edits(r, head).map(drop)
}

/// `DeleteParams`, `AddParams` and `ExtendedParams`.
type QueryEdits = (
    Vec<String>,
    Vec<(String, String)>,
    Vec<(String, Vec<String>)>,
);

/// `DeleteParams`, `AddParams` and `ExtendedParams`, read.
fn query_edits(r: &Map<String, Value>, head: &mut HeadText) -> Result<QueryEdits, MwError> {
    let deletes = strings(r.get("DeleteParams"), "Request.DeleteParams", head)?;
    let adds = string_map(r.get("AddParams"), "Request.AddParams", head)?;
    let field = "Request.ExtendedParams";
    let mut ext = Vec::new();
    if let Some(m) = opt_object(r.get("ExtendedParams"), field)? {
        // A `null` list is nil to Go: nothing to add.
        for (k, v) in m.iter().filter(|(_, v)| !v.is_null()) {
            head.take(field, k.len())?;
            ext.push((
                k.clone(),
                strings(Some(v), &format!("{field}[{k:?}]"), head)?,
            ));
        }
    }
    Ok((deletes, adds, ext))
}

/// Query deletes, sets and appends.
fn apply_params(
    r: &Map<String, Value>,
    req: &mut MwRequest,
    head: &mut HeadText,
) -> Result<(), MwError> {
    let (deletes, adds, ext) = query_edits(r, head)?;
    if !deletes.is_empty() || !adds.is_empty() || !ext.is_empty() {
        edit_query(&mut ReqMut::Owned(req), &deletes, &adds, &ext);
    }
    Ok(())
}

/// `ReturnOverrides`, read with the other strategies' type rules and
/// answered by the same rules (`forced.rs`): a non-empty `ResponseError`
/// replaces `ResponseBody`; a code >= 400 without `OverrideError` is Tyk's
/// error template in the request's `format`; any other non-zero code is a
/// forced response.
fn overrides(
    v: Option<&Value>,
    format: ErrorFormat,
    head: &mut HeadText,
) -> Result<Option<Flow>, MwError> {
    let field = "Request.ReturnOverrides";
    let Some(ro) = opt_object(v, field)? else {
        return Ok(None);
    };
    let code = match ro.get("ResponseCode") {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(other) => return Err(shape(&format!("{field}.ResponseCode"), "a number", other)),
    };
    let code = match code {
        0.0 => None,
        c if c.fract() == 0.0 && (100.0..=999.0).contains(&c) => Some(c as u16),
        _ => {
            return Err(MwError::bad_answer(format!(
                "{field}.ResponseCode {code} is not an HTTP status"
            )))
        }
    };
    let hfield = "Request.ReturnOverrides.ResponseHeaders";
    let headers = string_map(ro.get("ResponseHeaders"), hfield, head)?;
    let text = |key: &str, field: BodyField| -> Result<String, MwError> {
        match ro.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => field.check(s.len()).map(|()| s.clone()),
            Some(other) => Err(shape(field.name, "a string", other)),
        }
    };
    let (error, body) = (
        text("ResponseError", OVERRIDE_ERROR)?,
        text("ResponseBody", OVERRIDE_BODY)?,
    );
    let override_error = go_bool(
        ro.get("OverrideError"),
        "Request.ReturnOverrides.OverrideError",
    )?;
    // Without a code nothing answers; the fields were read all the same,
    // as Go decodes them.
    let Some(code) = code else {
        return Ok(None);
    };
    let o = super::forced::Overrides {
        code,
        error,
        body,
        headers,
        override_error,
    };
    o.respond(format).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue};

    fn req(uri: &str, body: &str) -> MwRequest {
        let mut headers = HeaderMap::new();
        headers.append("x-b", HeaderValue::from_static("2"));
        headers.append("x-a", HeaderValue::from_static("1"));
        headers.append("x-a", HeaderValue::from_static("one"));
        MwRequest::new(
            http::Method::POST,
            uri.parse().unwrap(),
            headers,
            Bytes::from(body.to_string()),
            "127.0.0.1:1".parse().unwrap(),
        )
    }

    #[test]
    fn the_request_is_tyks_mini_request_object_with_a_base64_body() {
        let text = request_json(&req("/p?z=1&a=2&z=3", "hi"));
        // Go's field order; map keys sorted; []byte as base64.
        assert_eq!(
            text,
            concat!(
                r#"{"Headers":{"X-A":["1","one"],"X-B":["2"]},"SetHeaders":{},"DeleteHeaders":[],"#,
                r#""Body":"aGk=","URL":"/p?z=1&a=2&z=3","Params":{"a":["2"],"z":["1","3"]},"#,
                r#""AddParams":{},"ExtendedParams":{},"DeleteParams":[],"ReturnOverrides":"#,
                r#"{"ResponseCode":0,"ResponseError":"","ResponseBody":"","ResponseHeaders":{},"#,
                r#""OverrideError":false},"IgnoreBody":false,"Method":"POST","#,
                r#""RequestURI":"/p?z=1&a=2&z=3","Scheme":"http"}"#
            )
        );
        let calls = Calls::new(
            vec!["mw".into()],
            "api",
            "org",
            Some(&serde_json::json!({"k": 1})),
        );
        let src = calls.source(0, &req("/", ""), "try { ", " } catch (e) {}");
        assert!(src.starts_with("try { __tykJson(mw, {\"Headers\""), "{src}");
        assert!(
            src.ends_with(
                r#", {}, {"APIID":"api","OrgID":"org","config_data":{"k":1}}) } catch (e) {}"#
            ),
            "{src}"
        );
    }

    #[test]
    fn the_answer_is_decoded_by_the_rules_of_the_other_strategies() {
        let mut r = req("/p?a=1", "hi");
        let answer = r#"{"Request":{"Body":"Ynll","URL":"/q?a=1","SetHeaders":{"X-S":"v"},
            "DeleteHeaders":["X-B"],"AddParams":{"n":"1"}},"SessionMeta":{}}"#;
        assert!(matches!(apply(answer, &mut r), Ok(Flow::Continue)));
        assert_eq!(&r.body[..], b"bye");
        assert_eq!(r.path(), "/q");
        assert_eq!(r.query(), Some("a=1&n=1"));
        assert_eq!(r.headers.get("x-s").unwrap(), "v");
        assert!(r.headers.get("x-b").is_none());

        let mut r = req("/", "");
        let lone = r#"{"Request":{"URL":"/","SetHeaders":{"X-L":"a\ud800b"}}}"#;
        assert!(matches!(apply(lone, &mut r), Ok(Flow::Continue)));
        assert_eq!(r.headers["x-l"].as_bytes(), "a\u{fffd}b".as_bytes());

        let mut r = req("/", "");
        let bad = r#"{"Request":{"URL":"/","SetHeaders":{"X-N":42}}}"#;
        let e = apply(bad, &mut r).unwrap_err();
        assert!(
            e.message()
                .contains(r#"Request.SetHeaders["X-N"] must be a string"#),
            "{e}"
        );
        let e = apply(r#"{"Request":{"Body":"%%"}}"#, &mut r).unwrap_err();
        assert!(e.message().contains("Request.Body is not base64"), "{e}");
        let e = apply(r#"{"Nope":1}"#, &mut r).unwrap_err();
        assert!(e.message().contains("Request must be an object"), "{e}");

        let over = r#"{"Request":{"ReturnOverrides":{"ResponseCode":403,"ResponseError":"no"}}}"#;
        match apply(over, &mut r) {
            Ok(Flow::Respond(resp)) => {
                assert_eq!(resp.status, 403);
                // Tyk's error template (templates/error.json).
                assert_eq!(&resp.body[..], b"{\n    \"error\": \"no\"\n}");
            }
            other => panic!("{other:?}"),
        }
    }
}
