//! `TykMakeHttpRequest` and `TykBatchRequest`: the script's JSON decoded as
//! Go's `encoding/json` decodes it into Tyk's structs, the calls made, and
//! the answer encoded as Tyk encodes it.
//!
//! Go's decoder matches field names case-insensitively (an exact match
//! first), leaves a `null` field at its zero value, ignores unknown fields,
//! and fails on a value of the wrong type: all reproduced here, since a
//! script written against Tyk may rely on any of them.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{Method, Uri};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::task::JoinSet;

use super::http::{block_on, fetch, BodyBudget, Outgoing, Reply};
// Go's decoder reads the escape of a lone surrogate (which
// `JSON.stringify` writes for a string holding one) as U+FFFD, where
// serde_json refuses the whole text.
use super::{deadline, refusal};
// Every failure of a call is logged, as in Tyk, but a script can fail
// calls in a loop (a line per call, ~70,000 a second): each call site
// logs at most `--log-rate` lines a second, saying how many it left out.
use crate::js::gojson::lone_surrogates;
use crate::lograte::{LeftOut, LogGate};

/// Longest body a script may send with `TykMakeHttpRequest`, or with one
/// `TykBatchRequest` in all: the bound on every body the gateway holds
/// whole (`proxy::MAX_BUFFERED_BODY`).
const MAX_OUTGOING_BODY: usize = crate::proxy::MAX_BUFFERED_BODY;

/// Requests of one batch in flight at once (Tyk starts them all; a bound
/// keeps a script from opening thousands of sockets).
const BATCH_PARALLELISM: usize = 32;

/// `TykMakeHttpRequest(json)`: Tyk's `TykJSHttpResponse` JSON, or `None`
/// (the script sees `undefined`) after logging why.
pub(crate) fn make_http_request(arg: &str) -> Option<String> {
    // Tyk: called with no argument, `String(undefined)` is "undefined".
    if arg == "undefined" {
        return None;
    }
    let run = || -> Result<String, String> {
        if let Some(why) = refusal("TykMakeHttpRequest") {
            return Err(why);
        }
        let out = http_request(arg)?;
        // The exchange is the host's (its runtime, connection and buffers,
        // the reply capped at 32 MiB), made and freed uncounted: a thread
        // the allocator stopped in the middle of it would keep the
        // connection open. What the script gets is counted.
        let reply =
            crate::heap::uncounted(|| block_on(deadline(), fetch(out, &BodyBudget::new())))?;
        let json = for_script(&response(&reply));
        crate::heap::uncounted(|| drop(reply));
        json
    };
    run()
        .map_err(|e| {
            static GATE: LogGate = LogGate::new();
            if let Some(left_out) = GATE.admit() {
                crate::heap::uncounted(|| {
                    tracing::error!(target: "jsvm", "TykMakeHttpRequest: {e}{}", LeftOut(left_out))
                });
            }
        })
        .ok()
}

/// `TykBatchRequest(json)`: Tyk's array of `BatchReplyUnit`, or `None`.
pub(crate) fn batch_request(arg: &str) -> Option<String> {
    let run = || -> Result<String, String> {
        if let Some(why) = refusal("TykBatchRequest") {
            return Err(why);
        }
        let (requests, sequential) = batch(arg)?;
        let replies =
            crate::heap::uncounted(|| block_on(deadline(), run_batch(requests, sequential)))?;
        let json = for_script(&replies);
        crate::heap::uncounted(|| drop(replies));
        json
    };
    run()
        .map_err(|e| {
            static GATE: LogGate = LogGate::new();
            if let Some(left_out) = GATE.admit() {
                crate::heap::uncounted(|| {
                    tracing::error!(
                        target: "jsvm",
                        "TykBatchRequest: Batch request error: {e}{}",
                        LeftOut(left_out)
                    )
                });
            }
        })
        .ok()
}

/// Tyk's `TykJSHttpResponse`, fields in its order: `Code`, `Body`,
/// `Headers`, then the lower-case copies that make it a `BatchReplyUnit`.
#[derive(Serialize)]
struct JsHttpResponse<'a> {
    #[serde(rename = "Code")]
    code_upper: u16,
    #[serde(rename = "Body")]
    body_upper: &'a str,
    #[serde(rename = "Headers")]
    headers_upper: &'a BTreeMap<String, Vec<String>>,
    code: u16,
    body: &'a str,
    headers: &'a BTreeMap<String, Vec<String>>,
}

fn response(r: &Reply) -> JsHttpResponse<'_> {
    JsHttpResponse {
        code_upper: r.code,
        body_upper: &r.body,
        headers_upper: &r.headers,
        code: r.code,
        body: &r.body,
        headers: &r.headers,
    }
}

/// `v` as the JSON text the script gets, if that text and the engine's
/// string made of it (boa's: two bytes a character) fit in what the call
/// may still allocate (`heap::room`); else the call fails. Past that room
/// the allocator stops the VM thread for good, holding its heap, in the
/// middle of the host's own copy: a reply of 31 MiB of control characters
/// is 372 MiB of escapes (`\u0001`, and the body is there twice), and each
/// such call parked a boa thread holding ~220 MB until the gateway
/// restarted (a few of them, and no lost JS thread was replaced).
fn for_script<T: Serialize>(v: &T) -> Result<String, String> {
    if let Some(room) = crate::heap::room() {
        let mut len = Length(0);
        serde_json::to_writer(&mut len, v).map_err(|e| e.to_string())?;
        if len.0.saturating_mul(3) > room {
            return Err(format!(
                "the answer is {} of JSON, more than the script may still allocate ({} left under --jsvm-memory's ceiling)",
                crate::js::memory::mib(len.0),
                crate::js::memory::mib(room)
            ));
        }
    }
    serde_json::to_string(v).map_err(|e| e.to_string())
}

/// Counts the bytes written, keeping none.
struct Length(usize);

impl std::io::Write for Length {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Tyk's `BatchReplyUnit`; a request that failed is the zero value
/// (`relative_url` empty, `code` 0, `headers` null), as Tyk answers it.
#[derive(Serialize, Default)]
struct BatchReply {
    relative_url: String,
    code: u16,
    headers: Option<BTreeMap<String, Vec<String>>>,
    body: String,
}

/// Decodes `{Method, Domain, Resource, Headers, Body, FormData}` as Tyk's
/// `TykJSHttpRequest` and builds the request: `Domain + Resource` is the
/// URL; `Body` if not empty, else `FormData` form-encoded (keys sorted).
fn http_request(arg: &str) -> Result<Outgoing, String> {
    let v: Value = serde_json::from_str(&lone_surrogates(arg))
        .map_err(|e| format!("JSVM: Failed to deserialise HTTP Request object: {e}"))?;
    let obj = object(&v, "the argument")?;
    let method = string_field(obj, "Method")?;
    let body = string_field(obj, "Body")?;
    let headers = map_field(obj, "Headers")?;
    let domain = string_field(obj, "Domain")?;
    let resource = string_field(obj, "Resource")?;
    let form = map_field(obj, "FormData")?;
    let url = format!("{domain}{resource}");
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("JSVM: Failed to parse request URI {url:?}: {e}"))?;
    let body = if !body.is_empty() {
        body
    } else if !form.is_empty() {
        let mut pairs = form;
        pairs.sort();
        form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish()
    } else {
        String::new()
    };
    // Held whole and sent whole, as any body the gateway holds: bounded
    // like them (the reply is, by `BodyBudget`).
    crate::body::within(
        body.len(),
        MAX_OUTGOING_BODY,
        "Body",
        "a request a script sends",
    )?;
    Ok(Outgoing {
        method: method_of(&method)?,
        uri,
        headers,
        body: Bytes::from(body),
        close: true,
    })
}

/// Decodes `{requests: [{method, headers, body, relative_url}],
/// suppress_parallel_execution}` (Tyk's `BatchRequestStructure`). As in
/// Tyk's "unsafe" batch from JS, `relative_url` is the whole URL.
fn batch(arg: &str) -> Result<(Vec<(Outgoing, String)>, bool), String> {
    let v: Value = serde_json::from_str(&lone_surrogates(arg))
        .map_err(|e| format!("could not decode batch request, decoding failed: {e}"))?;
    let obj = object(&v, "the argument")?;
    let sequential = match field(obj, "suppress_parallel_execution") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("suppress_parallel_execution must be a boolean".into()),
    };
    let list = match field(obj, "requests") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err("requests must be an array".into()),
    };
    let mut out = Vec::with_capacity(list.len());
    // The batch's bodies together, bounded as one request's (its replies
    // share one budget too).
    let mut total = 0usize;
    for (i, item) in list.iter().enumerate() {
        let r = object(item, &format!("requests[{i}]"))?;
        let url = string_field(r, "relative_url")?;
        let method = method_of(&string_field(r, "method")?)?;
        // Go's `http.NewRequest` accepts a URL without scheme or host; the
        // call then fails and its reply is the zero value.
        let uri: Uri = url.parse().map_err(|e| {
            format!("batch request creation failed, request structure malformed: requests[{i}].relative_url {url:?}: {e}")
        })?;
        let body = string_field(r, "body")?;
        total = total.saturating_add(body.len());
        crate::body::within(
            total,
            MAX_OUTGOING_BODY,
            &format!("requests[0..={i}].body"),
            "what one batch sends",
        )?;
        let outgoing = Outgoing {
            method,
            uri,
            headers: map_field(r, "headers")?,
            body: Bytes::from(body),
            close: false,
        };
        out.push((outgoing, url));
    }
    Ok((out, sequential))
}

/// Runs a batch: in order when `sequential`, else concurrently with the
/// replies in the order they complete (Tyk collects them from a channel).
async fn run_batch(
    requests: Vec<(Outgoing, String)>,
    sequential: bool,
) -> Result<Vec<BatchReply>, String> {
    // Every reply of the batch reads its body from one budget.
    let budget = BodyBudget::new();
    let one = |out: Outgoing, url: String| {
        let budget = budget.clone();
        async move { (fetch(out, &budget).await, url) }
    };
    let settle = |(got, url): (Result<Reply, String>, String)| match got {
        Ok(r) => BatchReply {
            relative_url: url,
            code: r.code,
            headers: Some(r.headers),
            body: r.body,
        },
        Err(e) => {
            // (Uncounted: the whole batch runs so, `batch_request`.)
            static GATE: LogGate = LogGate::new();
            if let Some(left_out) = GATE.admit() {
                tracing::error!(
                    target: "jsvm",
                    "TykBatchRequest: request to {url} failed: {e}{}",
                    LeftOut(left_out)
                );
            }
            BatchReply::default()
        }
    };
    let mut replies = Vec::with_capacity(requests.len());
    if sequential {
        for (out, url) in requests {
            replies.push(settle(one(out, url).await));
        }
        return Ok(replies);
    }
    let mut pending = requests.into_iter();
    let mut running = JoinSet::new();
    loop {
        while running.len() < BATCH_PARALLELISM {
            match pending.next() {
                Some((out, url)) => {
                    running.spawn(one(out, url));
                }
                None => break,
            }
        }
        match running.join_next().await {
            Some(Ok(got)) => replies.push(settle(got)),
            Some(Err(e)) => return Err(format!("a batch request panicked: {e}")),
            None => return Ok(replies),
        }
    }
}

/// Go's `http.NewRequest`: an empty method is GET; otherwise a token.
fn method_of(m: &str) -> Result<Method, String> {
    if m.is_empty() {
        return Ok(Method::GET);
    }
    Method::from_bytes(m.as_bytes()).map_err(|_| format!("net/http: invalid method {m:?}"))
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    match v {
        Value::Object(o) => Ok(o),
        Value::Null => {
            static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
            Ok(EMPTY.get_or_init(Map::new))
        }
        other => Err(format!("{what} must be an object, got {}", kind(other))),
    }
}

/// Go's field matching: the exact name, else any case-insensitive match.
fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).or_else(|| {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

fn string_field(obj: &Map<String, Value>, name: &str) -> Result<String, String> {
    match field(obj, name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("{name} must be a string, got {}", kind(other))),
    }
}

/// A `map[string]string` field, in the object's order.
fn map_field(obj: &Map<String, Value>, name: &str) -> Result<Vec<(String, String)>, String> {
    match field(obj, name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(format!(
                    "{name}[{k:?}] must be a string, got {}",
                    kind(other)
                )),
            })
            .collect(),
        Some(other) => Err(format!("{name} must be an object, got {}", kind(other))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_match_as_go_decodes_them() {
        let out = http_request(
            r#"{"method":"POST","DOMAIN":"http://h:1","Resource":"/p","FormData":{"b":"2","a":"1"}}"#,
        )
        .unwrap();
        assert_eq!(out.method, Method::POST);
        assert_eq!(out.uri.to_string(), "http://h:1/p");
        assert_eq!(&out.body[..], b"a=1&b=2");
        assert!(http_request(r#"{"Method": 1}"#).is_err());
        assert!(http_request(r#"{"Headers": {"a": 1}}"#).is_err());
        assert!(http_request("{not json}").is_err());
        // No Domain or Resource: Go's ParseRequestURI refuses "".
        assert!(http_request(r#"{"Method":"GET"}"#).is_err());
        // A lone surrogate's escape is U+FFFD, as Go reads it.
        let out = http_request(r#"{"Domain":"http://h:1","Headers":{"X-A":"a\ud800"}}"#).unwrap();
        assert_eq!(out.headers, [("X-A".to_string(), "a\u{fffd}".to_string())]);
    }

    #[test]
    fn the_answer_has_tyks_fields_in_tyks_order() {
        let mut headers = BTreeMap::new();
        headers.insert("X-A".to_string(), vec!["1".to_string()]);
        let r = Reply {
            code: 201,
            headers,
            body: "b".into(),
        };
        assert_eq!(
            for_script(&response(&r)).unwrap(),
            r#"{"Code":201,"Body":"b","Headers":{"X-A":["1"]},"code":201,"body":"b","headers":{"X-A":["1"]}}"#
        );
        let failed = serde_json::to_string(&BatchReply::default()).unwrap();
        assert_eq!(
            failed,
            r#"{"relative_url":"","code":0,"headers":null,"body":""}"#
        );
    }
}
