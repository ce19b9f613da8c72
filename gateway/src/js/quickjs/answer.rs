//! One call's data crossing the host boundary: the request handed to
//! `host.js`'s `call`, and the rules that apply what the script returns.
//!
//! Tyk JSON-decodes the script's answer into Go structs, so a number where a
//! string belongs is an error there; the same type rules apply here, each
//! error naming the field. What is applied, and in which order, follows
//! Tyk's `mw_js_plugin.go`: overrides first (nothing proxied), then body,
//! URL, header deletes before sets, then query deletes, sets and appends.

use crate::error::ErrorFormat;
use crate::js::bodies::{BodyField, OVERRIDE_BODY, OVERRIDE_ERROR, REQUEST_BODY, RESPONSE_BODY};
use crate::js::forced::Overrides;
use crate::js::gostring::{json_null_number, GoString};
use crate::js::headtext::HeadText;
use crate::js::request::{bad_header_name, bad_header_value, edit_query, set_url};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;
use rquickjs::function::Args;
use rquickjs::object::Property;
use rquickjs::{qjs, Array, Coerced, Ctx, Function, IntoJs, Object, Value};

use super::api::{failure, Fail};
use super::keys::{Key, Keys};
use super::request::{Field, Table};

use crate::js::phase::{endpoint_answer, endpoint_request, ResponseEdits};
use crate::middleware::{Flow, MwError, MwRequest, MwResponse, ReqMut};

/// The request as a request-phase call reads it: a middleware request, or
/// the client's request lent to a chain run in place
/// ([`crate::middleware::ReqMut`]).
pub(crate) trait Seen {
    fn method(&self) -> &http::Method;
    fn headers(&self) -> &HeaderMap;
    fn body(&self) -> &Bytes;
    fn path(&self) -> &str;
    fn query(&self) -> Option<&str>;
    /// The target exactly as the client sent it.
    fn request_uri(&self) -> &http::Uri;
}

impl Seen for MwRequest {
    fn method(&self) -> &http::Method {
        &self.method
    }
    fn headers(&self) -> &HeaderMap {
        &self.headers
    }
    fn body(&self) -> &Bytes {
        &self.body
    }
    fn path(&self) -> &str {
        MwRequest::path(self)
    }
    fn query(&self) -> Option<&str> {
        MwRequest::query(self)
    }
    fn request_uri(&self) -> &http::Uri {
        &self.request_uri
    }
}

impl Seen for ReqMut<'_, '_> {
    fn method(&self) -> &http::Method {
        ReqMut::method(self)
    }
    fn headers(&self) -> &HeaderMap {
        ReqMut::headers(self)
    }
    fn body(&self) -> &Bytes {
        ReqMut::body(self)
    }
    fn path(&self) -> &str {
        ReqMut::path(self)
    }
    fn query(&self) -> Option<&str> {
        ReqMut::query(self)
    }
    fn request_uri(&self) -> &http::Uri {
        ReqMut::request_uri(self)
    }
}

/// The strings handed to the script that it may give back unchanged. A JS
/// string the script did not replace is the same refcounted string, so
/// comparing values (pointer identity) finds "unchanged" without copying a
/// body back to Rust.
pub(crate) struct Sent<'js> {
    body: Value<'js>,
    url: Value<'js>,
    /// A persistent call's request object, lent the request's headers
    /// until [`Sent::detach`] (`request.rs`).
    request: Option<(Value<'js>, *const Table)>,
}

impl Sent<'_> {
    /// Ends the request object's loan of `headers` (the request's, as the
    /// script got them): call before the request changes.
    pub(crate) fn detach(mut self, headers: &HeaderMap) {
        self.end(Some(headers));
    }

    fn end(&mut self, headers: Option<&HeaderMap>) {
        if let Some((obj, table)) = self.request.take() {
            let ctx = obj.ctx().as_raw().as_ptr();
            // SAFETY: the table outlives every call (it is the context's);
            // `obj` is its request object, lent `headers` until now; its
            // reference is handed over.
            unsafe {
                let raw = qjs::JS_DupValue(ctx, obj.as_raw());
                drop(obj);
                (*table).detach(ctx, raw, headers)
            };
        }
    }
}

impl Drop for Sent<'_> {
    /// Not detached (an early return): the loan ends without the headers,
    /// so a kept object cannot read them after they are gone.
    fn drop(&mut self) {
        self.end(None);
    }
}

/// Runs entry `index` of `host.js`'s `call` on `req`; returns the script's
/// answer and what was sent.
pub(crate) fn call<'js, R: Seen + ?Sized>(
    ctx: &Ctx<'js>,
    host: &Function<'js>,
    keys: &Keys,
    index: usize,
    req: &R,
) -> rquickjs::Result<(Value<'js>, Sent<'js>)> {
    if let Some(table) = keys.request() {
        return call_native(ctx, table, index, req);
    }
    let body =
        rquickjs::String::from_str(ctx.clone(), &String::from_utf8_lossy(req.body()))?.into_value();
    let (args, url) = request_args(ctx, index, req, body.clone())?;
    let ret = host.call_arg(args)?;
    let request = None;
    Ok((ret, Sent { body, url, request }))
}

/// [`call`] in a persistent context: the request is one native object
/// (`request.rs`), handed to `host.js`'s `direct`.
fn call_native<'js, R: Seen + ?Sized>(
    ctx: &Ctx<'js>,
    table: &Table,
    index: usize,
    req: &R,
) -> rquickjs::Result<(Value<'js>, Sent<'js>)> {
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: new references of this context's strings, handed to `Value`s.
    let (body, method) = unsafe {
        let body = if req.body().is_empty() {
            table.empty(raw)
        } else {
            let text = String::from_utf8_lossy(req.body());
            qjs::JS_NewStringLen(raw, text.as_ptr().cast(), text.len() as _)
        };
        let method = table.method(raw, req.method().as_str());
        if qjs::JS_IsException(body) || qjs::JS_IsException(method) {
            qjs::JS_FreeValue(raw, body);
            qjs::JS_FreeValue(raw, method);
            return Err(rquickjs::Error::Exception);
        }
        (
            Value::from_raw(ctx.clone(), body),
            Value::from_raw(ctx.clone(), method),
        )
    };
    let (url, uri, params) = request_values(ctx, req, Some(table))?;
    // SAFETY: every value is of this context; `request` takes a reference
    // of each (duplicated here, the `Value`s keep theirs) and the call's
    // result is handed to a `Value`. The headers are lent until the
    // `Sent` returned (or dropped on an error) detaches them, before the
    // request can change.
    unsafe {
        let dup = |v: &Value<'js>| qjs::JS_DupValue(raw, v.as_raw());
        let obj = table.request(
            raw,
            req.headers(),
            dup(&body),
            dup(&url),
            params.as_ref().map_or(qjs::JS_NULL, dup),
            dup(&method),
            dup(uri.as_ref().unwrap_or(&url)),
        );
        if qjs::JS_IsException(obj) {
            return Err(rquickjs::Error::Exception);
        }
        let mut sent = Sent {
            body,
            url,
            request: Some((Value::from_raw(ctx.clone(), obj), table)),
        };
        let ret = table.call(raw, index, obj);
        if qjs::JS_IsException(ret) {
            sent.end(Some(req.headers()));
            return Err(rquickjs::Error::Exception);
        }
        Ok((Value::from_raw(ctx.clone(), ret), sent))
    }
}

/// The request's URL, RequestURI (`None`: the URL's string) and query
/// pairs (`None`: null), as the script gets them.
fn request_values<'js, R: Seen + ?Sized>(
    ctx: &Ctx<'js>,
    req: &R,
    table: Option<&Table>,
) -> rquickjs::Result<(Value<'js>, Option<Value<'js>>, Option<Value<'js>>)> {
    let string = |s: &str| rquickjs::String::from_str(ctx.clone(), s).map(|s| s.into_value());
    // The path alone needs no joined copy (the usual request has no query).
    let joined;
    let pq = match req.query() {
        None => req.path(),
        Some(q) => {
            joined = format!("{}?{q}", req.path());
            joined.as_str()
        }
    };
    let url = match table {
        // SAFETY: the table is this context's; the new reference is
        // handed to the `Value`.
        Some(t) => unsafe {
            let raw = ctx.as_raw().as_ptr();
            let v = t.url(raw, pq);
            if qjs::JS_IsException(v) {
                return Err(rquickjs::Error::Exception);
            }
            Value::from_raw(ctx.clone(), v)
        },
        None => string(pq)?,
    };
    let original = req
        .request_uri()
        .path_and_query()
        .map_or("/", |pq| pq.as_str());
    // The client's URI as sent, also in `post` after the strip (Tyk's
    // r.RequestURI); in `pre` it equals URL, so share the string.
    let uri = if original == pq {
        None
    } else {
        Some(string(original)?)
    };
    let params = match req.query() {
        None => None,
        Some(q) => Some(params(ctx, q)?.into_value()),
    };
    Ok((url, uri, params))
}

/// `call`'s first seven arguments: entry `index` and the request.
fn request_args<'js, R: Seen + ?Sized>(
    ctx: &Ctx<'js>,
    index: usize,
    req: &R,
    body: Value<'js>,
) -> rquickjs::Result<(Args<'js>, Value<'js>)> {
    let (url, uri, params) = request_values(ctx, req, None)?;
    let uri = uri.unwrap_or_else(|| url.clone());
    let params = params.unwrap_or_else(|| Value::new_null(ctx.clone()));
    let headers = rquickjs::String::from_str(ctx.clone(), &header_text(req.headers()))?;
    let mut args = Args::new(ctx.clone(), 8);
    args.push_arg(index as u32)?;
    args.push_arg(req.method().as_str())?;
    args.push_arg(url.clone())?;
    args.push_arg(uri)?;
    args.push_arg(body)?;
    args.push_arg(headers)?;
    args.push_arg(params)?;
    Ok((args, url))
}

/// Runs response entry `index` on `resp`: the script's answer as
/// `host.js`'s `answerResponse` read it, and the body string sent.
pub(crate) fn call_response<'js>(
    ctx: &Ctx<'js>,
    host: &Function<'js>,
    index: usize,
    req: &MwRequest,
    resp: &MwResponse,
) -> rquickjs::Result<(Value<'js>, Value<'js>)> {
    let empty = rquickjs::String::from_str(ctx.clone(), "")?.into_value();
    let (mut args, _) = request_args(ctx, index, req, empty)?;
    let body =
        rquickjs::String::from_str(ctx.clone(), &String::from_utf8_lossy(&resp.body))?.into_value();
    let extra = Array::new(ctx.clone())?;
    extra.set(0, resp.status.as_u16())?;
    extra.set(1, body.clone())?;
    extra.set(2, header_text(&resp.headers))?;
    args.push_arg(extra)?;
    Ok((host.call_arg(args)?, body))
}

/// Runs virtual endpoint `index` on `req`: what its function returned.
pub(crate) fn call_endpoint<'js>(
    ctx: &Ctx<'js>,
    host: &Function<'js>,
    index: usize,
    req: &MwRequest,
) -> rquickjs::Result<Value<'js>> {
    let mut args = Args::new(ctx.clone(), 8);
    args.push_arg(index as u32)?;
    for _ in 0..5 {
        args.push_arg("")?;
    }
    args.push_arg(Value::new_null(ctx.clone()))?;
    args.push_arg(endpoint_request(req))?;
    host.call_arg(args)
}

/// A virtual endpoint's return value: `TykJsResponse(...)`'s JSON text.
pub(crate) fn endpoint(ret: Value<'_>) -> Result<MwResponse, MwError> {
    match ret.as_string() {
        Some(s) => {
            let text = super::engine::lossy(s).map_err(|e| thrown(s.ctx(), e, "the answer"))?;
            endpoint_answer(&text)
        }
        None => Err(MwError::bad_answer(format!(
            "the virtual endpoint returned a JS {}, not TykJsResponse(...)'s JSON",
            type_of(&ret)
        ))),
    }
}

/// Applies a response entry's answer (`out`, from `answerResponse`:
/// `[ret]` when the shape is wrong, else the five fields) to `resp`.
pub(crate) fn apply_response<'js>(
    ctx: &Ctx<'js>,
    out: (Value<'js>, Value<'js>),
    resp: &mut MwResponse,
) -> Result<(), MwError> {
    let (out, sent) = out;
    let out = out
        .into_array()
        .ok_or_else(|| MwError::internal("JS host: answerResponse() did not return an array"))?;
    let at = |i: usize| -> Result<Value<'js>, MwError> {
        out.get(i).map_err(|e| thrown(ctx, e, "the answer"))
    };
    if out.len() == 1 {
        let ret = at(0)?;
        return Err(shape(
            "Response",
            "an object (use ReturnResponseData)",
            &ret,
        ));
    }
    let code = at(1)?;
    let status = match code.as_number() {
        Some(n) => ResponseEdits::status(Some(n))?,
        None if nothing(&code) => None,
        None => return Err(shape("Response.StatusCode", "a number", &code)),
    };
    let body = at(2)?;
    let body = if body == sent {
        None
    } else if nothing(&body) {
        Some(String::new())
    } else {
        match body.as_string() {
            Some(s) => Some(body_text(ctx, s, RESPONSE_BODY)?),
            None => return Err(shape(RESPONSE_BODY.name, "a string", &body)),
        }
    };
    let mut head = HeadText::new();
    ResponseEdits {
        status,
        body,
        delete: strings(at(3)?, "Response.DeleteHeaders", &mut head, ctx)?,
        set: string_map(at(4)?, "Response.SetHeaders", &mut head, ctx)?,
    }
    .apply(resp)
}

/// `Name\nv1\0v2\nName2\nv` with Go's canonical names (what `host.js` reads).
pub(crate) fn header_text(headers: &HeaderMap) -> String {
    let mut out = String::with_capacity(headers.len() * 32);
    for name in headers.keys() {
        if !out.is_empty() {
            out.push('\n');
        }
        gateway_wire::header::push_canonical_header_key(&mut out, name.as_str());
        out.push('\n');
        for (i, v) in headers.get_all(name).iter().enumerate() {
            if i > 0 {
                out.push('\0');
            }
            out.push_str(&String::from_utf8_lossy(v.as_bytes()));
        }
    }
    out
}

/// The query as Go's `url.Values`: `[name, [values], ...]`, names in first
/// appearance order, each with every value in order.
fn params<'js>(ctx: &Ctx<'js>, query: &str) -> rquickjs::Result<Array<'js>> {
    let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
    for (k, v) in crate::js::goquery::parse(query.as_bytes()) {
        match grouped.iter_mut().find(|(name, _)| *name == k) {
            Some((_, vals)) => vals.push(v),
            None => grouped.push((k, vec![v])),
        }
    }
    // Elements are defined, not assigned: an index setter a script gave
    // `Array.prototype` is not called.
    let element = |v| Property::from(v).writable().enumerable().configurable();
    let out = Array::new(ctx.clone())?;
    for (i, (k, vals)) in grouped.into_iter().enumerate() {
        let arr = Array::new(ctx.clone())?;
        for (j, v) in vals.into_iter().enumerate() {
            arr.prop(j as u32, element(v.into_js(ctx)?))?;
        }
        out.prop((2 * i) as u32, element(k.into_js(ctx)?))?;
        out.prop((2 * i + 1) as u32, element(arr.into_value()))?;
    }
    Ok(out)
}

/// JS `typeof`, for error messages.
fn type_of(v: &Value<'_>) -> &'static str {
    if v.is_undefined() {
        "undefined"
    } else if v.is_null() {
        "object"
    } else if v.is_bool() {
        "boolean"
    } else if v.is_number() {
        "number"
    } else if v.is_string() {
        "string"
    } else if v.is_function() {
        "function"
    } else if v.is_symbol() {
        "symbol"
    } else if v.is_big_int() {
        "bigint"
    } else {
        "object"
    }
}

/// A script's answer broke a type rule: names the field, as Go's decoder would.
fn shape(field: &str, want: &str, got: &Value<'_>) -> MwError {
    MwError::bad_answer(format!(
        "the script's answer: {field} must be {want}, got {}",
        type_of(got)
    ))
}

/// Reads `obj[key]`; a throwing getter is an error naming the field.
fn get<'js>(obj: &Object<'js>, key: &str, ctx: &Ctx<'js>) -> Result<Value<'js>, MwError> {
    obj.get(key).map_err(|e| thrown(ctx, e, key))
}

/// A failed read of the answer's `what`: the exception it threw (a
/// getter's, a `toString`'s), or, when it is QuickJS's answer to the memory
/// limit, an `out_of_memory` error (`api.rs` reports it with the limit and
/// discards the context, as after a call that met it). An error of
/// rquickjs's own is that exception when one is pending
/// (`engine::pending`: a string QuickJS could not convert).
fn thrown(ctx: &Ctx<'_>, e: rquickjs::Error, what: &str) -> MwError {
    let pending = match e {
        rquickjs::Error::Exception => Some(super::engine::describe(&ctx.catch(), false)),
        _ => super::engine::pending(ctx),
    };
    match pending {
        Some(msg) if super::engine::is_out_of_memory(&msg) => {
            MwError::out_of_memory(format!("while reading {what}"))
        }
        Some(msg) => MwError::threw(format!("reading {what}: {msg}")),
        None => MwError::internal(format!("reading {what}: {e}")),
    }
}

fn nothing(v: &Value<'_>) -> bool {
    v.is_undefined() || v.is_null()
}

/// A value Tyk's transport makes nothing of where it decodes a map, a
/// list or a struct (the boa reader's rule,
/// `crate::js::request::json_nothing`): `undefined`, a function or a
/// Symbol (left out by `JSON.stringify`), `null`, `NaN`, `±Infinity`
/// (JSON `null`).
fn json_nothing(v: &Value<'_>) -> bool {
    nothing(v) || v.is_symbol() || v.is_function() || v.as_number().is_some_and(json_null_number)
}

/// `IsArray(v)` as `JSON.stringify` asks it: an Array, or a Proxy whose
/// target is one, however deep (`JS_IsArray` no longer looks through a
/// Proxy). A revoked Proxy throws, as `JSON.stringify` would.
fn is_array_like<'js>(ctx: &Ctx<'js>, v: &Value<'js>) -> rquickjs::Result<bool> {
    // SAFETY: reads the class of a live value.
    if !unsafe { qjs::JS_IsProxy(v.as_raw()) } {
        // SAFETY: as above.
        return Ok(unsafe { qjs::JS_IsArray(v.as_raw()) });
    }
    let mut v = v.clone();
    loop {
        // SAFETY: reads the class of a live value.
        if unsafe { qjs::JS_IsArray(v.as_raw()) } {
            return Ok(true);
        }
        // SAFETY: as above.
        if !unsafe { qjs::JS_IsProxy(v.as_raw()) } {
            return Ok(false);
        }
        // SAFETY: a new reference, or an exception (a revoked Proxy).
        let target = unsafe { qjs::JS_GetProxyTarget(ctx.as_raw().as_ptr(), v.as_raw()) };
        // SAFETY: reads the tag.
        if unsafe { qjs::JS_IsException(target) } {
            return Err(rquickjs::Error::Exception);
        }
        // SAFETY: the target's new reference, handed over.
        v = unsafe { Value::from_raw(ctx.clone(), target) };
    }
}

/// A field Tyk decodes into a Go `bool` (`IgnoreBody`, `OverrideError`,
/// named `key` in its object): a boolean, or nothing (`false`); past
/// those, what `JSON.stringify` makes of it (a `toJSON`'s answer, a
/// `Boolean` object's value); anything else is refused, as Go's decoder
/// refuses it (the boa reader's rule, `crate::js::request::go_bool`).
fn go_bool<'js>(v: &Value<'js>, key: &str, field: &str, ctx: &Ctx<'js>) -> Result<bool, MwError> {
    if let Some(b) = v.as_bool() {
        return Ok(b);
    }
    let made = to_json(v, || key.to_string(), &|| field.to_string(), ctx)?;
    if class_of(&made) == CLASS_BOOLEAN {
        let b: Coerced<bool> = made.get().map_err(|e| thrown(ctx, e, field))?;
        return Ok(b.0);
    }
    match made.as_bool() {
        Some(b) => Ok(b),
        None if json_nothing(&made) => Ok(false),
        None => Err(shape(field, "a boolean", v)),
    }
}

/// QuickJS's class ids (`quickjs.c`): an ordinary object, a `String`
/// object, a `Boolean` object.
const CLASS_OBJECT: qjs::JSClassID = 1;
const CLASS_STRING: qjs::JSClassID = 5;
const CLASS_BOOLEAN: qjs::JSClassID = 6;

/// The class id of `v` (0 for a value that is not an object).
fn class_of(v: &Value<'_>) -> qjs::JSClassID {
    // SAFETY: reads the class of a live value; no reference changes hands.
    unsafe { qjs::JS_GetClassID(v.as_raw()) }
}

/// `v` as `JSON.stringify` first makes it: what its `toJSON` method
/// returns when it has one (called with `key`), else `v`. Asked only of a
/// value that is not what its field wants.
fn to_json<'js>(
    v: &Value<'js>,
    key: impl FnOnce() -> String,
    what: &impl Fn() -> String,
    ctx: &Ctx<'js>,
) -> Result<Value<'js>, MwError> {
    if let Some(obj) = v.as_object().filter(|_| !v.is_function()) {
        let f: Value = obj.get("toJSON").map_err(|e| thrown(ctx, e, &what()))?;
        if let Some(f) = f.as_function() {
            return f
                .call((rquickjs::function::This(v.clone()), key()))
                .map_err(|e| thrown(ctx, e, &what()));
        }
    }
    Ok(v.clone())
}

/// `v` where Tyk's decoder wants a Go string (`gostring.rs`, the boa
/// reader's `go_string`): `None` when it refuses it. Past a plain string,
/// a `toJSON` method is called with `key`, as `JSON.stringify` calls it,
/// and a `String` object is unwrapped; a throw is the answer's error.
fn go_string<'js>(
    v: &Value<'js>,
    key: impl FnOnce() -> String,
    what: impl Fn() -> String,
    ctx: &Ctx<'js>,
) -> Result<Option<GoString<String>>, MwError> {
    if v.is_string() {
        return string_at(v, what).map(|s| Some(GoString::Text(s)));
    }
    let v = to_json(v, key, &what, ctx)?;
    Ok(if class_of(&v) == CLASS_STRING {
        // A String object is its string.
        let s: Coerced<String> = v.get().map_err(|e| thrown(ctx, e, &what()))?;
        Some(GoString::Text(s.0))
    } else if v.is_string() {
        Some(GoString::Text(string_at(&v, &what)?))
    } else if v.is_null() || v.as_number().is_some_and(json_null_number) {
        Some(GoString::Empty)
    } else if json_nothing(&v) {
        Some(GoString::Left)
    } else {
        None
    })
}

fn opt_object<'js>(v: Value<'js>, field: &str) -> Result<Option<Object<'js>>, MwError> {
    if json_nothing(&v) {
        return Ok(None);
    }
    match v.as_object() {
        Some(o) if !v.is_function() => Ok(Some(o.clone())),
        _ => Err(shape(field, "an object", &v)),
    }
}

/// A field Tyk decodes into a Go map: an object, never an array (the
/// boa reader's rule, `crate::js::request::map_object`).
fn map_object<'js>(v: Value<'js>, field: &str) -> Result<Option<Object<'js>>, MwError> {
    Ok(if is_map(&v, field)? {
        v.into_object()
    } else {
        None
    })
}

/// `s` as the body `field` of an answer: refused past the field's bound
/// by its length before it is converted (`js/bodies.rs`).
fn body_text(ctx: &Ctx<'_>, s: &rquickjs::String<'_>, field: BodyField) -> Result<String, MwError> {
    field.convert(super::engine::units(s), || {
        super::engine::lossy(s).map_err(|e| thrown(ctx, e, field.name))
    })
}

fn string(v: &Value<'_>, field: &str) -> Result<String, MwError> {
    string_at(v, || field.to_string())
}

/// [`string`], with the field's name made only for the error (an entry's
/// name is formatted: per entry on every call, that was a tenth of a call).
fn string_at(v: &Value<'_>, field: impl FnOnce() -> String) -> Result<String, MwError> {
    match v.as_string() {
        Some(s) => super::engine::lossy(s).map_err(|e| thrown(s.ctx(), e, &field())),
        None => Err(shape(&field(), "a string", v)),
    }
}

/// Own enumerable string keys of `obj` with their values: what
/// `JSON.stringify`, and so Tyk's decoder, would see.
fn entries<'js>(
    obj: &Object<'js>,
    field: &str,
    ctx: &Ctx<'js>,
) -> Result<Vec<(String, Value<'js>)>, MwError> {
    super::keys::own_entries(ctx, obj.as_value()).map_err(|e| thrown(ctx, e, field))
}

/// Strings of an array (`DeleteHeaders`, `DeleteParams`, ...), each taken
/// from the answer's `head` text once read (`js/headtext.rs`).
fn strings<'js>(
    v: Value<'js>,
    field: &str,
    head: &mut HeadText,
    ctx: &Ctx<'js>,
) -> Result<Vec<String>, MwError> {
    let Some(mut obj) = opt_object(v.clone(), field)? else {
        return Ok(Vec::new());
    };
    if !is_array_like(ctx, &v).map_err(|e| thrown(ctx, e, field))? {
        // Not a list: what `JSON.stringify` makes of it (the boa reader's
        // rule, `crate::js::request::strings`).
        let made = to_json(&v, String::new, &|| field.to_string(), ctx)?;
        if json_nothing(&made) {
            return Ok(Vec::new());
        }
        if !is_array_like(ctx, &made).map_err(|e| thrown(ctx, e, field))? {
            return Err(shape(field, "an array", &v));
        }
        obj = made.into_object().expect("an array is an object");
    }
    // An Array, or a Proxy of one (its traps run, as `JSON.stringify`'s).
    let len = match obj.as_array() {
        Some(arr) => arr.len(),
        None => {
            let n: Coerced<f64> = obj.get("length").map_err(|e| thrown(ctx, e, field))?;
            n.0.clamp(0.0, u32::MAX as f64) as usize
        }
    };
    (0..len)
        .map(|i| {
            let item: Value = obj.get(i as u32).map_err(|e| thrown(ctx, e, field))?;
            let what = || format!("{field}[{i}]");
            let s = match go_string(&item, || i.to_string(), what, ctx)? {
                Some(GoString::Text(s)) => s,
                // `null` in the array: `""` to Go.
                Some(GoString::Left | GoString::Empty) => String::new(),
                None => return Err(shape(&what(), "a string", &item)),
            };
            head.take(field, s.len())?;
            Ok(s)
        })
        .collect()
}

/// A map of names to strings (`AddParams`, `ResponseHeaders`, ...), each
/// name and value taken from the answer's `head` text once read.
fn string_map<'js>(
    v: Value<'js>,
    field: &str,
    head: &mut HeadText,
    ctx: &Ctx<'js>,
) -> Result<Vec<(String, String)>, MwError> {
    let Some(obj) = map_object(v, field)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (k, v) in entries(&obj, field, ctx)? {
        let what = || format!("{field}[{k:?}]");
        let s = match go_string(&v, || k.clone(), what, ctx)? {
            Some(GoString::Text(s)) => s,
            Some(GoString::Empty) => String::new(),
            Some(GoString::Left) => continue,
            None => return Err(shape(&what(), "a string", &v)),
        };
        head.pair(field, k.len(), s.len())?;
        out.push((k, s));
    }
    Ok(out)
}

/// `SetHeaders` read straight into header names and values: the same
/// rules as [`string_map`] (an object, each value a string, else an error
/// naming the key), without making Rust strings of either. Outer error:
/// the answer's shape (reported while reading, as for any field); inner:
/// the first key or value a header cannot carry, reported when the
/// headers apply ([`commit`]), where [`crate::js::request::header`]
/// reports it for the other readers.
///
/// Each value is checked as it is read, not gathered first (a `Vec` of
/// `Value`s per call, and a clone of the object to check its shape, were
/// a sixth of reading the usual answer); every getter still runs, as when
/// Tyk's encoder reads them all, and the first wrong one is reported.
fn header_map<'js>(
    v: Value<'js>,
    field: &str,
    keys: &Keys,
    head: &mut HeadText,
    ctx: &Ctx<'js>,
) -> Result<Result<Vec<(HeaderName, HeaderValue)>, MwError>, MwError> {
    if !is_map(&v, field)? {
        return Ok(Ok(Vec::new()));
    }
    let table = super::keys::own_keys(ctx, &v).map_err(|e| thrown(ctx, e, field))?;
    let mut out = Vec::with_capacity(table.len());
    let mut wrong = None;
    let mut invalid = None;
    for atom in table.atoms() {
        let value = table
            .get(ctx, &v, atom)
            .map_err(|e| thrown(ctx, e, field))?;
        // Past a wrong value the rest are only read (their getters run).
        if wrong.is_some() {
            continue;
        }
        let parsed = match value.as_string() {
            // A bad name or value is reported when the headers apply; a
            // wrong value after it still wins, as the answer's shape.
            Some(_) if invalid.is_some() => continue,
            Some(s) => keys
                .header_value(ctx, s)
                .map_err(|e| thrown(ctx, e, field))?,
            // Not a string: what Tyk's transport makes of it, if anything.
            None => {
                let what = || format!("{field}[{:?}]", table.text(atom));
                let text = match go_string(&value, || table.text(atom), what, ctx)? {
                    Some(GoString::Text(s)) => s,
                    Some(GoString::Empty) => String::new(),
                    Some(GoString::Left) => continue,
                    None => {
                        wrong = Some(shape(&what(), "a string", &value));
                        continue;
                    }
                };
                if invalid.is_some() {
                    continue;
                }
                HeaderValue::from_str(&text).map_err(drop)
            }
        };
        let name = keys
            .header_name(ctx, atom)
            .map_err(|e| thrown(ctx, e, field))?;
        // Past the answer's bound nothing more is read (a value is taken
        // once read: its length is its text's).
        let name_len = name.as_ref().map_or(0, |n| n.as_str().len());
        let value_len = parsed.as_ref().map_or(0, |v| v.len());
        head.pair(field, name_len, value_len)?;
        match (name, parsed) {
            (Some(n), Ok(v)) => out.push((n, v)),
            (None, _) => invalid = Some(bad_header_name(field, &table.text(atom))),
            (Some(_), Err(_)) => invalid = Some(bad_header_value(field, &table.text(atom))),
        }
    }
    if let Some(e) = wrong {
        return Err(e);
    }
    Ok(match invalid {
        Some(e) => Err(e),
        None => Ok(out),
    })
}

/// The rule for a field Tyk decodes into a Go map ([`map_object`]), on a
/// borrowed value: `true` for an object to read, `false` for null or
/// undefined (nothing to apply), an error for an array or anything else.
fn is_map(v: &Value<'_>, field: &str) -> Result<bool, MwError> {
    if json_nothing(v) {
        return Ok(false);
    }
    // A Proxy of an array is an array to `JSON.stringify`.
    if is_array_like(v.ctx(), v).map_err(|e| thrown(v.ctx(), e, field))? {
        return Err(crate::js::request::not_a_map(field));
    }
    if is_object(v) {
        Ok(true)
    } else {
        Err(shape(field, "an object", v))
    }
}

/// The session fields' JSON text (`[SessionMeta, Session, AuthValue]`),
/// each checked as Tyk's decoder would.
fn check_session_fields(text: &str) -> Result<(), MwError> {
    // A lone surrogate's escape is U+FFFD to Tyk's decoder.
    let text = crate::js::gojson::lone_surrogates(text);
    let parsed: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| MwError::internal(format!("JS host: session fields: {e}")))?;
    let parts = parsed.as_array().map(Vec::as_slice).unwrap_or_default();
    for (part, check) in parts.iter().zip(crate::js::session::CHECKS) {
        check(part)?;
    }
    Ok(())
}

/// What the script answered, read field by field in the order Tyk's
/// decoder meets them (each getter runs once), before anything applies.
/// The containers are `None` when null or undefined (nothing to apply):
/// the usual answer leaves all but one or two of them unmade, and a
/// `Value` costs a context reference to make and drop.
struct Answer<'js> {
    overrides: Option<Value<'js>>,
    ignore_body: Value<'js>,
    body: Value<'js>,
    url: Value<'js>,
    delete_headers: Option<Value<'js>>,
    set_headers: Option<Value<'js>>,
    delete_params: Option<Value<'js>>,
    add_params: Option<Value<'js>>,
    extended_params: Option<Value<'js>>,
}

/// `v`, or `None` when it is null or undefined.
fn present(v: Value<'_>) -> Option<Value<'_>> {
    (!nothing(&v)).then_some(v)
}

/// A plain object (`typeof v === "object"`, not null).
fn is_object(v: &Value<'_>) -> bool {
    v.is_object() && !v.is_function()
}

/// Reads the answer `ret` (`{Request: ..., SessionMeta: ...}`). A getter
/// that throws fails the call as a throw in the script does.
fn read<'js>(
    ctx: &Ctx<'js>,
    keys: &Keys,
    ret: &Value<'js>,
) -> Result<Result<Answer<'js>, MwError>, Fail> {
    let get = |obj: &Value<'js>, key: Key| keys.get(ctx, obj, key).map_err(|e| failure(ctx, e));
    if !is_object(ret) {
        return Ok(Err(shape(
            "the return value",
            "an object (use ReturnData)",
            ret,
        )));
    }
    let r = get(ret, Key::Request)?;
    if !is_object(&r) {
        return Ok(Err(shape("Request", "an object (use ReturnData)", &r)));
    }
    let answer = match native_fields(ctx, keys, &r) {
        Some(a) => a,
        None => Answer {
            overrides: present(get(&r, Key::ReturnOverrides)?),
            ignore_body: get(&r, Key::IgnoreBody)?,
            body: get(&r, Key::Body)?,
            url: get(&r, Key::Url)?,
            delete_headers: present(get(&r, Key::DeleteHeaders)?),
            set_headers: present(get(&r, Key::SetHeaders)?),
            delete_params: present(get(&r, Key::DeleteParams)?),
            add_params: present(get(&r, Key::AddParams)?),
            extended_params: present(get(&r, Key::ExtendedParams)?),
        },
    };
    if let Err(e) = check_session(ctx, keys, ret)? {
        return Ok(Err(e));
    }
    Ok(Ok(answer))
}

/// The answer's fields read from the slots of a native request object
/// (`request.rs`) that has no accessors: what reading them would give,
/// with a container never made (so never touched) as null. `None` for any
/// other object.
fn native_fields<'js>(ctx: &Ctx<'js>, keys: &Keys, r: &Value<'js>) -> Option<Answer<'js>> {
    let table = keys.request()?;
    use Field::*;
    let read = [
        ReturnOverrides,
        IgnoreBody,
        Body,
        Url,
        DeleteHeaders,
        SetHeaders,
        DeleteParams,
        AddParams,
        ExtendedParams,
    ];
    // SAFETY: `r` is a value of the table's context; each value returned
    // is a new reference, handed to a `Value` once below (null and
    // undefined hold none).
    let [overrides, ignore_body, body, url, delete_headers, set_headers, delete_params, add_params, extended_params] =
        unsafe { table.fields(r.as_raw(), read)? };
    // SAFETY: a new reference of this context (above), handed over.
    let value = |v| unsafe { Value::from_raw(ctx.clone(), v) };
    let opt = |v: qjs::JSValue| {
        // SAFETY: reads the tag of a value.
        let tag = unsafe { qjs::JS_VALUE_GET_TAG(v) };
        (tag != qjs::JS_TAG_NULL && tag != qjs::JS_TAG_UNDEFINED).then(|| value(v))
    };
    Some(Answer {
        overrides: opt(overrides),
        ignore_body: value(ignore_body),
        body: value(body),
        url: value(url),
        delete_headers: opt(delete_headers),
        set_headers: opt(set_headers),
        delete_params: opt(delete_params),
        add_params: opt(add_params),
        extended_params: opt(extended_params),
    })
}

/// Tyk decodes `SessionMeta`, `Session` and `AuthValue` too, and fails the
/// request when one has the wrong type (`js/session.rs`). The usual
/// `ReturnData(request, {})` has nothing to check; anything else is checked
/// as the JSON text Tyk would decode.
fn check_session<'js>(
    ctx: &Ctx<'js>,
    keys: &Keys,
    ret: &Value<'js>,
) -> Result<Result<(), MwError>, Fail> {
    // Absent (the usual `Session` and `AuthValue`) makes no `Value`.
    let get = |key: Key| {
        keys.get_json_field(ctx, ret, key)
            .map_err(|e| failure(ctx, e))
    };
    let (meta, session, auth) = (
        get(Key::SessionMeta)?,
        get(Key::Session)?,
        get(Key::AuthValue)?,
    );
    let empty_meta = match &meta {
        None => true,
        Some(m) => {
            // An ordinary object (a `Date` has no own keys either, but
            // `JSON.stringify` makes it a string, which Tyk cannot decode).
            class_of(m) == CLASS_OBJECT
                && super::keys::no_own_keys(ctx, m).map_err(|e| failure(ctx, e))?
        }
    };
    if empty_meta && session.is_none() && auth.is_none() {
        return Ok(Ok(()));
    }
    let null = || Value::new_null(ctx.clone());
    let or_null = |v: Option<Value<'js>>| v.unwrap_or_else(null);
    let parts = Array::new(ctx.clone()).map_err(|e| failure(ctx, e))?;
    let meta = if empty_meta { null() } else { or_null(meta) };
    for (i, v) in [meta, or_null(session), or_null(auth)]
        .into_iter()
        .enumerate()
    {
        parts.set(i, v).map_err(|e| failure(ctx, e))?;
    }
    let text = ctx
        .json_stringify(parts)
        .map_err(|e| failure(ctx, e))?
        .map(|s| s.to_string())
        .transpose()
        .map_err(|e| failure(ctx, e))?
        .unwrap_or_default();
    Ok(check_session_fields(&text))
}

/// What applying an answer will do, read in full before anything
/// applies: every getter, Proxy trap and `toString` of the answer has run
/// by then, so no script runs while the request changes (a request object
/// a script kept reads the request as the script got it: `request.rs`).
pub(crate) enum Planned {
    /// `ReturnOverrides` answers: nothing is proxied.
    Answer(Flow),
    Edits(Edits),
}

/// The edits of an answer, in the order they apply.
pub(crate) struct Edits {
    body: Option<String>,
    url: Option<String>,
    delete_headers: Vec<String>,
    /// Parsed while reading; a bad name or value fails when they apply.
    set_headers: Result<Vec<(HeaderName, HeaderValue)>, MwError>,
    delete_params: Vec<String>,
    add_params: Vec<(String, String)>,
    extended_params: Vec<(String, Vec<String>)>,
}

/// Reads the script's answer `ret` into what it asks of `req`.
pub(crate) fn plan<'js, R: Seen + ?Sized>(
    ctx: &Ctx<'js>,
    keys: &Keys,
    ret: Value<'js>,
    sent: &Sent<'js>,
    req: &R,
) -> Result<Planned, Fail> {
    match read(ctx, keys, &ret)? {
        Ok(answer) => plan_read(ctx, keys, answer, sent, req).map_err(Fail::Script),
        Err(e) => Err(Fail::Script(e)),
    }
}

fn plan_read<'js, R: Seen + ?Sized>(
    ctx: &Ctx<'js>,
    keys: &Keys,
    a: Answer<'js>,
    sent: &Sent<'js>,
    req: &R,
) -> Result<Planned, MwError> {
    let mut head = HeadText::new();
    // An override answers, but only once the edits below are read: Tyk
    // decodes the whole answer before it uses any of it, so an edit Go's
    // decoder refuses fails the request all the same (a header that is
    // valid JSON but not a valid header does not: it is never applied).
    let forced = a
        .overrides
        .map_or(Ok(None), |o| overrides(o, req.headers(), &mut head, ctx))?;
    let mut body = None;
    let ignore_body = go_bool(&a.ignore_body, "IgnoreBody", "Request.IgnoreBody", ctx)?;
    if !ignore_body && a.body != sent.body {
        // Any value, as Tyk's `b64enc(Body)` turns it into text (`42`
        // becomes "42").
        let text = a
            .body
            .get::<Coerced<rquickjs::String>>()
            .map_err(|e| thrown(ctx, e, REQUEST_BODY.name))?;
        body = Some(body_text(ctx, &text.0, REQUEST_BODY)?);
    }
    let url = if a.url == sent.url || forced.is_some() && json_nothing(&a.url) {
        // Under an override, left out or `null` is Go's "" (never applied,
        // so never refused).
        None
    } else {
        Some(string(&a.url, "Request.URL")?)
    };
    let head = &mut head;
    let delete_headers = a.delete_headers.map_or(Ok(Vec::new()), |v| {
        strings(v, "Request.DeleteHeaders", head, ctx)
    })?;
    let set_headers = a.set_headers.map_or(Ok(Ok(Vec::new())), |v| {
        header_map(v, "Request.SetHeaders", keys, head, ctx)
    })?;
    let delete_params = a.delete_params.map_or(Ok(Vec::new()), |v| {
        strings(v, "Request.DeleteParams", head, ctx)
    })?;
    let add_params = a.add_params.map_or(Ok(Vec::new()), |v| {
        string_map(v, "Request.AddParams", head, ctx)
    })?;
    let field = "Request.ExtendedParams";
    let mut extended_params = Vec::new();
    if let Some(obj) = a
        .extended_params
        .map_or(Ok(None), |v| map_object(v, field))?
    {
        for (k, v) in entries(&obj, field, ctx)? {
            // A value JSON leaves out or makes `null` is a nil list to
            // Go: nothing to add.
            if json_nothing(&v) {
                continue;
            }
            head.take(field, k.len())?;
            let vals = strings(v, &format!("{field}[{k:?}]"), head, ctx)?;
            extended_params.push((k, vals));
        }
    }
    if let Some(answer) = forced {
        return Ok(Planned::Answer(answer));
    }
    Ok(Planned::Edits(Edits {
        body,
        url,
        delete_headers,
        set_headers,
        delete_params,
        add_params,
        extended_params,
    }))
}

/// Applies the planned edits to `req`, in Tyk's order: body, URL, header
/// deletes, then sets, then query deletes, sets and appends.
pub(crate) fn commit(e: Edits, req: &mut ReqMut<'_, '_>) -> Result<Flow, MwError> {
    if let Some(text) = e.body {
        req.set_body(Bytes::from(text));
    }
    if let Some(url) = e.url {
        set_url(req, &url)?;
    }
    for name in e.delete_headers {
        if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
            req.headers_mut().remove(n);
        }
    }
    for (n, v) in e.set_headers? {
        crate::js::request::put_header(req.headers_mut(), n, v, "Request.SetHeaders")?;
    }
    let (deletes, adds, ext) = (e.delete_params, e.add_params, e.extended_params);
    if !deletes.is_empty() || !adds.is_empty() || !ext.is_empty() {
        edit_query(req, &deletes, &adds, &ext);
    }
    Ok(Flow::Continue)
}

/// `ReturnOverrides`: `None` when `ResponseCode` is 0 or absent; else the
/// answer Tyk gives ([`Overrides::respond`]), in the error format of
/// `request_headers` (looked up only when there is an answer).
fn overrides<'js>(
    v: Value<'js>,
    request_headers: &HeaderMap,
    head: &mut HeadText,
    ctx: &Ctx<'js>,
) -> Result<Option<Flow>, MwError> {
    let field = "Request.ReturnOverrides";
    let Some(ro) = opt_object(v, field)? else {
        return Ok(None);
    };
    let code = get(&ro, "ResponseCode", ctx)?;
    // Without a code nothing answers, but the other fields are read all
    // the same: Go decodes them, and refuses a wrong one.
    let code = match code.as_number() {
        _ if json_nothing(&code) => None,
        Some(0.0) => None,
        Some(n) if n.fract() == 0.0 && (100.0..=999.0).contains(&n) => Some(n as u16),
        Some(n) => {
            return Err(MwError::bad_answer(format!(
                "{field}.ResponseCode {n} is not an HTTP status"
            )))
        }
        None => return Err(shape(&format!("{field}.ResponseCode"), "a number", &code)),
    };
    let hfield = "Request.ReturnOverrides.ResponseHeaders";
    let headers = string_map(get(&ro, "ResponseHeaders", ctx)?, hfield, head, ctx)?;
    let override_error = go_bool(
        &get(&ro, "OverrideError", ctx)?,
        "OverrideError",
        "Request.ReturnOverrides.OverrideError",
        ctx,
    )?;
    let text = |key: &str, field: BodyField| -> Result<String, MwError> {
        let v = get(&ro, key, ctx)?;
        if let Some(s) = v.as_string() {
            return body_text(ctx, s, field);
        }
        match go_string(&v, || key.to_string(), || field.name.to_string(), ctx)? {
            Some(GoString::Text(s)) => field.check(s.len()).map(|()| s),
            Some(GoString::Left | GoString::Empty) => Ok(String::new()),
            None => Err(shape(field.name, "a string", &v)),
        }
    };
    let (error, body) = (
        text("ResponseError", OVERRIDE_ERROR)?,
        text("ResponseBody", OVERRIDE_BODY)?,
    );
    let Some(code) = code else {
        return Ok(None);
    };
    Overrides {
        code,
        error,
        body,
        headers,
        override_error,
    }
    .respond(ErrorFormat::of(request_headers))
    .map(Some)
}
