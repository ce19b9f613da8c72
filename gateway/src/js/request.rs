//! The `request` object a script sees (Tyk's MiniRequestObject), built
//! natively per call, and the rules that apply what the script returns.
//!
//! Tyk JSON-encodes the request into the script and JSON-decodes the answer.
//! Here the object is built directly from the [`MwRequest`] and only the
//! fields a script may change are read back, with the same type rules Go's
//! JSON decoder would enforce (a number where a string belongs is an error).

use boa_engine::object::builtins::JsArray;
use boa_engine::object::ObjectInitializer;
use boa_engine::property::{Attribute, PropertyKey};
use boa_engine::{js_string, Context, JsObject, JsResult, JsString, JsValue};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, StatusCode};

use crate::middleware::{Flow, MwError, MwRequest, MwResponse};

/// What the host keeps of a built request to detect the script's changes
/// without converting unchanged strings back to Rust.
pub(crate) struct Built {
    /// The `request` object handed to the script.
    pub(crate) object: JsObject,
    body: JsString,
    url: JsString,
}

/// Go's `textproto.CanonicalMIMEHeaderKey` for a lowercase, valid token (what
/// [`HeaderName`] holds): upper-case the first letter and each letter after
/// `-`. Tyk's scripts index `request.Headers["X-Api-Key"]`.
pub(crate) fn canonical(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper { c.to_ascii_uppercase() } else { c };
            upper = c == '-';
            out
        })
        .collect()
}

fn string_array<I: IntoIterator<Item = String>>(items: I, ctx: &mut Context) -> JsArray {
    JsArray::from_iter(items.into_iter().map(|s| JsString::from(s).into()), ctx)
}

/// Builds `request` for one call.
pub(crate) fn build(req: &MwRequest, ctx: &mut Context) -> JsResult<Built> {
    let headers = JsObject::with_object_proto(ctx.intrinsics());
    for name in req.headers.keys() {
        let values = req
            .headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let arr = string_array(values, ctx);
        headers.create_data_property_or_throw(
            JsString::from(canonical(name.as_str())),
            arr,
            ctx,
        )?;
    }
    // Params as Go's `url.Values`: name -> every value, in order.
    let params = JsObject::with_object_proto(ctx.intrinsics());
    if let Some(q) = &req.query {
        let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            match grouped.iter_mut().find(|(name, _)| *name == k) {
                Some((_, vals)) => vals.push(v.into_owned()),
                None => grouped.push((k.into_owned(), vec![v.into_owned()])),
            }
        }
        for (k, vals) in grouped {
            let arr = string_array(vals, ctx);
            params.create_data_property_or_throw(JsString::from(k), arr, ctx)?;
        }
    }
    let body = JsString::from(String::from_utf8_lossy(&req.body).as_ref());
    let url = JsString::from(req.path_and_query());
    let response_headers = JsObject::with_object_proto(ctx.intrinsics());
    let overrides = ObjectInitializer::new(ctx)
        .property(js_string!("ResponseCode"), 0, Attribute::all())
        .property(js_string!("ResponseError"), js_string!(), Attribute::all())
        .property(js_string!("ResponseBody"), js_string!(), Attribute::all())
        .property(
            js_string!("ResponseHeaders"),
            response_headers,
            Attribute::all(),
        )
        .property(js_string!("OverrideError"), false, Attribute::all())
        .build();
    let empty = |ctx: &mut Context| JsObject::with_object_proto(ctx.intrinsics());
    let (set_headers, add_params, ext_params) = (empty(ctx), empty(ctx), empty(ctx));
    let (del_headers, del_params) = (JsArray::new(ctx)?, JsArray::new(ctx)?);
    let object = ObjectInitializer::new(ctx)
        .property(js_string!("Headers"), headers, Attribute::all())
        .property(js_string!("SetHeaders"), set_headers, Attribute::all())
        .property(js_string!("DeleteHeaders"), del_headers, Attribute::all())
        .property(js_string!("Body"), body.clone(), Attribute::all())
        .property(js_string!("URL"), url.clone(), Attribute::all())
        .property(js_string!("Params"), params, Attribute::all())
        .property(js_string!("AddParams"), add_params, Attribute::all())
        .property(js_string!("ExtendedParams"), ext_params, Attribute::all())
        .property(js_string!("DeleteParams"), del_params, Attribute::all())
        .property(js_string!("ReturnOverrides"), overrides, Attribute::all())
        .property(js_string!("IgnoreBody"), false, Attribute::all())
        .property(
            js_string!("Method"),
            JsString::from(req.method.as_str()),
            Attribute::all(),
        )
        // Our MwRequest has no separate original URI: in `post` this is the
        // stripped path, where Tyk would still show the client's URI.
        .property(js_string!("RequestURI"), url.clone(), Attribute::all())
        .property(js_string!("Scheme"), js_string!("http"), Attribute::all())
        .build();
    Ok(Built { object, body, url })
}

/// A script's answer broke a type rule: names the field, as Go's decoder would.
fn shape(field: &str, want: &str, got: &JsValue) -> MwError {
    MwError(format!(
        "ProcessRequest result: {field} must be {want}, got {}",
        got.type_of()
    ))
}

/// Reads field `key` of `obj`; a JS exception (a throwing getter) is an error.
/// `key` is a `js_string!` literal: static, so the hot path allocates nothing
/// to name a field.
fn get(obj: &JsObject, key: JsString, ctx: &mut Context) -> Result<JsValue, MwError> {
    obj.get(key.clone(), ctx)
        .map_err(|e| MwError(format!("reading {}: {e}", key.to_std_string_lossy())))
}

fn opt_object(v: &JsValue, field: &str) -> Result<Option<JsObject>, MwError> {
    match v {
        v if v.is_null_or_undefined() => Ok(None),
        v => v
            .as_object()
            .map(|o| Some(o.clone()))
            .ok_or_else(|| shape(field, "an object", v)),
    }
}

fn string(v: &JsValue, field: &str) -> Result<String, MwError> {
    v.as_string()
        .map(|s| s.to_std_string_lossy())
        .ok_or_else(|| shape(field, "a string", v))
}

/// Own enumerable-or-not string keys of `obj`, with their values.
fn entries(
    obj: &JsObject,
    field: &str,
    ctx: &mut Context,
) -> Result<Vec<(String, JsValue)>, MwError> {
    let keys = obj
        .own_property_keys(ctx)
        .map_err(|e| MwError(format!("reading {field}: {e}")))?;
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let name = match &key {
            PropertyKey::String(s) => s.to_std_string_lossy(),
            PropertyKey::Index(i) => i.get().to_string(),
            PropertyKey::Symbol(_) => continue,
        };
        let v = obj
            .get(key, ctx)
            .map_err(|e| MwError(format!("reading {field}[{name:?}]: {e}")))?;
        out.push((name, v));
    }
    Ok(out)
}

/// Strings of an array-like (`DeleteHeaders`, `DeleteParams`, ...).
fn strings(v: &JsValue, field: &str, ctx: &mut Context) -> Result<Vec<String>, MwError> {
    let Some(obj) = opt_object(v, field)? else {
        return Ok(Vec::new());
    };
    if !obj.is_array() {
        return Err(shape(field, "an array", v));
    }
    let arr = JsArray::from_object(obj).map_err(|e| MwError(e.to_string()))?;
    let len = arr.length(ctx).map_err(|e| MwError(e.to_string()))?;
    (0..len)
        .map(|i| {
            let item = arr.get(i, ctx).map_err(|e| MwError(e.to_string()))?;
            string(&item, &format!("{field}[{i}]"))
        })
        .collect()
}

fn header(name: &str, value: &str, field: &str) -> Result<(HeaderName, HeaderValue), MwError> {
    let n = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| MwError(format!("{field}: {name:?} is not a valid header name")))?;
    // HeaderValue refuses CR, LF and NUL: a script cannot split the request.
    let v = HeaderValue::from_str(value).map_err(|_| {
        MwError(format!(
            "{field}[{name:?}]: value contains a character not allowed in a header (CR, LF or control)"
        ))
    })?;
    Ok((n, v))
}

fn string_map(
    v: &JsValue,
    field: &str,
    ctx: &mut Context,
) -> Result<Vec<(String, String)>, MwError> {
    let Some(obj) = opt_object(v, field)? else {
        return Ok(Vec::new());
    };
    entries(&obj, field, ctx)?
        .into_iter()
        .map(|(k, v)| {
            let s = string(&v, &format!("{field}[{k:?}]"))?;
            Ok((k, s))
        })
        .collect()
}

/// Applies the script's answer `ret` to `req`, following Tyk's
/// `mw_js_plugin.go`: overrides first (nothing proxied), then body, URL,
/// header deletes before sets, then query deletes, sets and appends.
pub(crate) fn apply(
    ret: &JsValue,
    built: &Built,
    req: &mut MwRequest,
    ctx: &mut Context,
) -> Result<Flow, MwError> {
    let ret = ret
        .as_object()
        .ok_or_else(|| shape("the return value", "an object (use ReturnData)", ret))?;
    let r = get(&ret, js_string!("Request"), ctx)?;
    let r = r
        .as_object()
        .ok_or_else(|| shape("Request", "an object (use ReturnData)", &r))?;

    if let Some(resp) = overrides(&r, ctx)? {
        return Ok(Flow::Respond(resp));
    }

    let ignore_body = get(&r, js_string!("IgnoreBody"), ctx)?.to_boolean();
    if !ignore_body {
        let body = get(&r, js_string!("Body"), ctx)?;
        let body = body
            .as_string()
            .ok_or_else(|| shape("Request.Body", "a string", &body))?;
        if body != built.body {
            req.body = Bytes::from(body.to_std_string_lossy());
            if req.headers.contains_key(CONTENT_LENGTH) {
                req.headers
                    .insert(CONTENT_LENGTH, HeaderValue::from(req.body.len()));
            }
        }
    }

    let url = get(&r, js_string!("URL"), ctx)?;
    let url = url
        .as_string()
        .ok_or_else(|| shape("Request.URL", "a string", &url))?;
    if url != built.url {
        set_url(req, &url.to_std_string_lossy())?;
    }

    for name in strings(
        &get(&r, js_string!("DeleteHeaders"), ctx)?,
        "Request.DeleteHeaders",
        ctx,
    )? {
        if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
            req.headers.remove(n);
        }
    }
    let sets = string_map(
        &get(&r, js_string!("SetHeaders"), ctx)?,
        "Request.SetHeaders",
        ctx,
    )?;
    for (name, value) in sets {
        let (n, v) = header(&name, &value, "Request.SetHeaders")?;
        req.headers.insert(n, v);
    }

    let deletes = strings(
        &get(&r, js_string!("DeleteParams"), ctx)?,
        "Request.DeleteParams",
        ctx,
    )?;
    let adds = string_map(
        &get(&r, js_string!("AddParams"), ctx)?,
        "Request.AddParams",
        ctx,
    )?;
    let extended = extended_params(&get(&r, js_string!("ExtendedParams"), ctx)?, ctx)?;
    if !deletes.is_empty() || !adds.is_empty() || !extended.is_empty() {
        edit_query(req, &deletes, &adds, &extended);
    }
    Ok(Flow::Continue)
}

fn extended_params(v: &JsValue, ctx: &mut Context) -> Result<Vec<(String, Vec<String>)>, MwError> {
    let field = "Request.ExtendedParams";
    let Some(obj) = opt_object(v, field)? else {
        return Ok(Vec::new());
    };
    entries(&obj, field, ctx)?
        .into_iter()
        .map(|(k, v)| {
            let vals = strings(&v, &format!("{field}[{k:?}]"), ctx)?;
            Ok((k, vals))
        })
        .collect()
}

/// `ReturnOverrides`: a `ResponseCode` >= 400 without `OverrideError` is
/// answered with Tyk's error body; any other non-zero code with `ResponseBody`.
fn overrides(r: &JsObject, ctx: &mut Context) -> Result<Option<MwResponse>, MwError> {
    let field = "Request.ReturnOverrides";
    let Some(ro) = opt_object(&get(r, js_string!("ReturnOverrides"), ctx)?, field)? else {
        return Ok(None);
    };
    let code = get(&ro, js_string!("ResponseCode"), ctx)?;
    let code = match code.as_number() {
        Some(0.0) => return Ok(None),
        Some(n) if n.fract() == 0.0 && (100.0..=999.0).contains(&n) => n as u16,
        Some(_) => {
            return Err(MwError(format!(
                "{field}.ResponseCode {} is not an HTTP status",
                code.display()
            )))
        }
        None if code.is_null_or_undefined() => return Ok(None),
        None => {
            return Err(shape(
                "Request.ReturnOverrides.ResponseCode",
                "a number",
                &code,
            ))
        }
    };
    let status = StatusCode::from_u16(code)
        .map_err(|_| MwError(format!("{field}.ResponseCode {code} is not an HTTP status")))?;
    let mut headers = HeaderMap::new();
    let hdrs = string_map(
        &get(&ro, js_string!("ResponseHeaders"), ctx)?,
        "Request.ReturnOverrides.ResponseHeaders",
        ctx,
    )?;
    for (name, value) in hdrs {
        let (n, v) = header(&name, &value, "Request.ReturnOverrides.ResponseHeaders")?;
        headers.insert(n, v);
    }
    let override_error = get(&ro, js_string!("OverrideError"), ctx)?.to_boolean();
    let body = if code >= 400 && !override_error {
        let msg = get(&ro, js_string!("ResponseError"), ctx)?;
        let msg = if msg.is_null_or_undefined() {
            String::new()
        } else {
            string(&msg, "Request.ReturnOverrides.ResponseError")?
        };
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Bytes::from(serde_json::json!({ "error": msg }).to_string())
    } else {
        let b = get(&ro, js_string!("ResponseBody"), ctx)?;
        if b.is_null_or_undefined() {
            Bytes::new()
        } else {
            Bytes::from(string(&b, "Request.ReturnOverrides.ResponseBody")?)
        }
    };
    Ok(Some(MwResponse {
        status,
        headers,
        body,
    }))
}

/// `URL` replaces path and query: an origin-form `/path?query`, or an absolute
/// URL whose path and query are taken (Tyk parses it with `url.Parse`).
fn set_url(req: &mut MwRequest, url: &str) -> Result<(), MwError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| MwError(format!("Request.URL {url:?} is not a URL: {e}")))?;
    let path = uri.path();
    if !path.starts_with('/') {
        return Err(MwError(format!("Request.URL {url:?} has no absolute path")));
    }
    req.path = path.to_string();
    req.query = uri.query().map(str::to_string);
    Ok(())
}

/// Deletes, then sets, then appends query parameters, and re-encodes the
/// query as Go's `url.Values.Encode` does (keys sorted, values in order).
fn edit_query(
    req: &mut MwRequest,
    deletes: &[String],
    adds: &[(String, String)],
    extended: &[(String, Vec<String>)],
) {
    let mut values: Vec<(String, String)> = req
        .query
        .as_deref()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    values.retain(|(k, _)| !deletes.contains(k));
    for (k, v) in adds {
        values.retain(|(name, _)| name != k);
        values.push((k.clone(), v.clone()));
    }
    for (k, vals) in extended {
        values.extend(vals.iter().map(|v| (k.clone(), v.clone())));
    }
    // Stable sort: values of one key keep their order, as in Go.
    values.sort_by(|a, b| a.0.cmp(&b.0));
    let encoded = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(values)
        .finish();
    req.query = (!encoded.is_empty()).then_some(encoded);
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn header_names_become_go_canonical() {
        assert_eq!(canonical("x-api-key"), "X-Api-Key");
        assert_eq!(canonical("host"), "Host");
        assert_eq!(canonical("x-custom-jsvm"), "X-Custom-Jsvm");
        assert_eq!(canonical("a--b"), "A--B");
    }
}
