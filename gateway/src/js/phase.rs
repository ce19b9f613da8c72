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
use std::fmt;

use bytes::Bytes;
use http::header::HeaderName;
use http::{HeaderMap, StatusCode};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::error::Category;

use super::bodies::ENDPOINT_BODY;
use super::forced;
use super::headtext::HeadText;
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
    pub(crate) fn apply(mut self, resp: &mut MwResponse) -> Result<(), MwError> {
        self.apply_to(resp)
    }

    /// [`ResponseEdits::apply`] leaving the edits (but the body, moved into
    /// `resp`) to the caller, which may drop them where it counts them.
    pub(crate) fn apply_to(&mut self, resp: &mut MwResponse) -> Result<(), MwError> {
        for name in &self.delete {
            if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
                resp.headers.remove(n);
            }
        }
        for (name, value) in &self.set {
            let (n, v) = header(name, value, "Response.SetHeaders")?;
            crate::js::request::put_header(&mut resp.headers, n, v, "Response.SetHeaders")?;
        }
        if let Some(body) = self.body.take() {
            resp.body = Bytes::from(body);
        }
        if let Some(code) = self.status {
            let status = StatusCode::from_u16(code).map_err(|_| {
                MwError::bad_answer(format!("Response.StatusCode {code} is not an HTTP status"))
            })?;
            resp.status = crate::middleware::final_status(status, "Response.StatusCode")?;
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

/// Tyk's `ResponseObject` (`Body`, `Headers`, `Code`) as Go's decoder
/// fills it from a virtual endpoint's answer: zero values until a key sets
/// them.
#[derive(Default)]
struct Answered {
    body: String,
    /// Empty for Go's nil map (no `Headers`, or `null`) as for an empty one.
    headers: HeaderMap,
    code: i64,
}

/// What a virtual endpoint's function returned (`TykJsResponse(...)`, a
/// JSON string), as the response Tyk's `forceResponse` writes. The text is
/// decoded as Go's `json.Unmarshal` decodes it into Tyk's
/// `VMResponseObject` (see [`gojson`](super::gojson)): field names in any
/// case, the last of a repeated field winning, `null` leaving a field as it
/// was, a lone surrogate read as U+FFFD, unknown fields ignored, and a
/// field of the wrong type failing the answer. It is read straight into
/// [`Answered`]: through a `serde_json::Value` it cost twice the
/// instructions.
pub(crate) fn endpoint_answer(text: &str) -> Result<MwResponse, MwError> {
    let bad = |why: String| MwError::bad_answer(format!("the virtual endpoint's answer {why}"));
    let text = super::gojson::lone_surrogates(text);
    let mut answered = Answered::default();
    let mut de = serde_json::Deserializer::from_str(&text);
    Any(Top(&mut answered))
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| match e.classify() {
            Category::Data => bad(format!("does not decode into Tyk's VMResponseObject ({e})")),
            _ => bad(format!(
                "is not the JSON TykJsResponse(response, session) returns ({e})"
            )),
        })?;
    let status = u16::try_from(answered.code)
        .ok()
        .filter(|c| (100..=999).contains(c))
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or_else(|| {
            bad(format!(
                "has no Response.Code that is an HTTP status (Code is {})",
                answered.code
            ))
        })?;
    ENDPOINT_BODY.check(answered.body.len())?;
    let what = "the virtual endpoint's answer";
    forced::forced(status, answered.headers, Bytes::from(answered.body), what)
}

/// Decodes any JSON value with the visitor it holds: each of the visitors
/// below takes the types its Go field takes and refuses the rest.
struct Any<V>(V);

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for Any<V> {
    type Value = V::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        d.deserialize_any(self.0)
    }
}

/// Which of `fields` a JSON key names, by Go's matching
/// ([`gojson::names`](super::gojson::names)), without copying the key.
struct Key(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Key {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        // Go matches each key to a field, in text order; the last one set
        // wins, whichever spelling it used.
        Ok(self.0.iter().position(|f| super::gojson::names(key, f)))
    }
}

/// Tyk's `VMResponseObject`: `Response` and `SessionMeta`.
struct Top<'a>(&'a mut Answered);

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object with Response and SessionMeta")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        while let Some(key) = m.next_key_seed(Key(&["Response", "SessionMeta"]))? {
            match key {
                Some(0) => m.next_value_seed(Any(Response(&mut *self.0)))?,
                Some(_) => m.next_value_seed(Any(SessionMeta))?,
                None => m.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        Ok(())
    }
}

/// Tyk's `ResponseObject`; a repeated `Response` merges into the first, as
/// Go decodes into the struct it already has.
struct Response<'a>(&'a mut Answered);

impl<'de> Visitor<'de> for Response<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("Response to be an object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        while let Some(key) = m.next_key_seed(Key(&["Body", "Headers", "Code"]))? {
            match key {
                Some(0) => m.next_value_seed(Any(Text(&mut self.0.body, "Response.Body")))?,
                Some(1) => m.next_value_seed(Any(Headers(&mut self.0.headers)))?,
                Some(_) => m.next_value_seed(Any(Code(&mut self.0.code)))?,
                None => m.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        Ok(())
    }
}

/// A Go `string` field: `null` leaves it as it was.
struct Text<'a>(&'a mut String, &'static str);

impl Visitor<'_> for Text<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a string", self.1)
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        v.clone_into(self.0);
        Ok(())
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<(), E> {
        *self.0 = v;
        Ok(())
    }
}

/// `Headers`, a Go `map[string]string`, read straight into the response's
/// headers: `null` makes it nil, an object adds its keys to what it holds
/// (a `null` value is the empty string, a repeated name replaces).
struct Headers<'a>(&'a mut HeaderMap);

impl<'de> Visitor<'de> for Headers<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("Response.Headers to be an object of strings")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.clear();
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        let mut head = HeadText::new();
        while let Some(name) = m.next_key::<String>()? {
            let mut value = String::new();
            m.next_value_seed(Any(Text(&mut value, "each Response.Headers value")))?;
            head.pair("Response.Headers", name.len(), value.len())
                .and_then(|()| header(&name, &value, "Response.Headers"))
                .and_then(|(n, v)| crate::js::request::put_header(self.0, n, v, "Response.Headers"))
                .map_err(|e| de::Error::custom(e.message()))?;
        }
        Ok(())
    }
}

/// `Code`, a Go `int`: an integer literal that fits 64 bits; `null` leaves
/// it as it was.
struct Code<'a>(&'a mut i64);

impl Visitor<'_> for Code<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("Response.Code to be an integer")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        *self.0 = v;
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        *self.0 =
            i64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))?;
        Ok(())
    }
}

/// `SessionMeta`, a Go `map[string]interface{}`: `null` or an object of
/// anything; the gateway keeps no sessions, so its content is skipped.
struct SessionMeta;

impl<'de> Visitor<'de> for SessionMeta {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("SessionMeta to be an object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// A response hook's 1xx and a virtual endpoint's 1xx fail the request:
    /// neither can be the final answer.
    #[test]
    fn informational_statuses_are_refused() {
        let edits = ResponseEdits {
            status: ResponseEdits::status(Some(100.0)).unwrap(),
            body: None,
            delete: Vec::new(),
            set: Vec::new(),
        };
        let mut resp = MwResponse {
            status: StatusCode::OK,
            headers: http::HeaderMap::new(),
            body: Bytes::new(),
        };
        let e = edits.apply(&mut resp).unwrap_err();
        assert!(
            e.message()
                .starts_with("Response.StatusCode: 100 is an informational"),
            "{e}"
        );
        assert_eq!(resp.status, StatusCode::OK);
        let e = endpoint_answer(r#"{"Response":{"Body":"x","Code":101}}"#).unwrap_err();
        assert!(e.message().contains("informational"), "{e}");
    }

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

    /// Each case checked against Go 1.27's `json.Unmarshal` into Tyk's
    /// `VMResponseObject`.
    #[test]
    fn answers_follow_gos_decoder_where_it_differs_from_a_json_map() {
        let ok = |text: &str| {
            let r = endpoint_answer(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let headers: Vec<(String, String)> = r
                .headers
                .iter()
                .filter(|(n, _)| n.as_str().starts_with("x-"))
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_string()))
                .collect();
            let body = String::from_utf8(r.body.to_vec()).unwrap();
            (r.status.as_u16(), body, headers)
        };
        let h = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        };
        // The last spelling of a field wins; null leaves a string or a
        // number as it was.
        assert_eq!(
            ok(r#"{"Response":{"Body":"a","body":null,"BODY":"c","code":201,"Code":null}}"#),
            (201, "c".into(), h(&[]))
        );
        // The long s folds to s, as in Go.
        assert_eq!(
            ok(r#"{"re\u017fponse":{"Body":"s","Code":200}}"#),
            (200, "s".into(), h(&[]))
        );
        // A repeated object merges; a null header value is empty; a null
        // map drops what it held.
        assert_eq!(
            ok(
                r#"{"Response":{"Code":200,"Headers":{"X-A":"1"}},"response":{"headers":{"X-B":"2","X-C":null}}}"#
            ),
            (
                200,
                "".into(),
                h(&[("x-a", "1"), ("x-b", "2"), ("x-c", "")])
            )
        );
        assert_eq!(
            ok(r#"{"Response":{"Code":200,"Headers":{"X-A":"1"},"Headers":null}}"#),
            (200, "".into(), h(&[]))
        );
        // A lone surrogate is U+FFFD; a pair is its character.
        assert_eq!(
            ok(r#"{"Response":{"Body":"a\ud800b\ud83d\ude00","Code":200}}"#),
            (200, "a\u{fffd}b\u{1f600}".into(), h(&[]))
        );
        // Unknown fields, and any SessionMeta object, are ignored.
        assert_eq!(
            ok(
                r#"{"Response":{"Code":204,"Extra":[1,{"a":null}]},"SessionMeta":{"n":[1,2]},"Other":1}"#
            ),
            (204, "".into(), h(&[]))
        );
        for (text, names) in [
            (r#"{"Response":{"Code":200.0}}"#, "Response.Code"),
            (r#"{"Response":{"Code":2e2}}"#, "Response.Code"),
            (r#"{"Response":{"Code":"200"}}"#, "Response.Code"),
            (
                r#"{"Response":{"Code":9223372036854775808}}"#,
                "Response.Code",
            ),
            (r#"{"Response":{"Code":200,"Body":{}}}"#, "Response.Body"),
            (
                r#"{"Response":{"Code":200,"Headers":[]}}"#,
                "Response.Headers",
            ),
            (
                r#"{"Response":{"Code":200,"Headers":{"X":true}}}"#,
                "Response.Headers",
            ),
            (r#"{"Response":[]}"#, "Response"),
            (
                r#"{"Response":{"Code":200},"SessionMeta":"x"}"#,
                "SessionMeta",
            ),
            (r#"{"Response":{"Code":-1}}"#, "HTTP status"),
            (r#"{"Response":{"Body":"no code"}}"#, "HTTP status"),
            (r#"null"#, "HTTP status"),
            (r#"{"Response":{"Code":200}} x"#, "trailing"),
            (
                r#"{"Response":{"Code":302,"Headers":{"Location":"tyk://self/x"}}}"#,
                "a Tyk loop",
            ),
            (r#"{"Response":{"Code":200,"Body":"\ud8"}}"#, "escape"),
        ] {
            let e = endpoint_answer(text)
                .err()
                .unwrap_or_else(|| panic!("{text} decoded"));
            assert!(e.to_string().contains(names), "{text}: {e}");
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
