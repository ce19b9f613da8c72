//! Applying what a script returns (`ReturnData(request, session)`) to the
//! request, by the rules of Tyk's `mw_js_plugin.go`, and the readers that
//! enforce the type rules Go's JSON decoder would (a number where a string
//! belongs is an error naming the field). The response phase and virtual
//! endpoints (`vm/phases.rs`) and the other strategies (`tykjson.rs`,
//! QuickJS's `answer.rs`) share these readers and edits.

use boa_engine::builtins::object::OrdinaryObject;
use boa_engine::object::builtins::JsArray;
use boa_engine::property::PropertyKey;
use boa_engine::{js_string, Context, JsError, JsObject, JsString, JsValue};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};

use super::build::{name, Accessors, Built, FieldState, Lazy};
use crate::error::ErrorFormat;
use crate::heap::uncounted;
use crate::intern::{BadPair, HeaderCache};
use crate::js::bodies::{BodyField, OVERRIDE_BODY, OVERRIDE_ERROR, REQUEST_BODY};
use crate::js::forced::Overrides;
use crate::js::gostring::{json_null_number, GoString};
use crate::js::headtext::HeadText;
use crate::js::json::is_array_like;
use crate::js::text;
use crate::middleware::{Flow, MwError, MwRequest, ReqMut};

/// A script's answer broke a type rule: names the field, as Go's decoder would.
pub(crate) fn shape(field: &str, want: &str, got: &JsValue) -> MwError {
    MwError::bad_answer(format!(
        "the script's answer: {field} must be {want}, got {}",
        got.type_of()
    ))
}

/// Marks an [`MwError`] whose JS error was the engine's own (a runtime limit
/// such as the stack size a recursing getter reaches, an engine panic), met
/// while the host read the answer outside the script's run: boa then leaves
/// its frame stack as the error found it, and after a few such calls every
/// later call of the context failed ("reached the maximum stack size"). The
/// context is discarded instead (`CallError::Spent`), as after a timeout.
#[derive(Debug)]
pub(crate) struct EngineFault;

impl std::fmt::Display for EngineFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the JS engine failed while the host read the answer")
    }
}

impl std::error::Error for EngineFault {}

/// `err`, marked with [`EngineFault`] when `e` is an engine error.
pub(crate) fn checked(err: MwError, e: &JsError) -> MwError {
    if e.as_engine().is_some() {
        err.with_source(EngineFault)
    } else {
        err
    }
}

/// True when `e` carries [`EngineFault`]: its context must be discarded.
pub(crate) fn spends_context(e: &MwError) -> bool {
    std::error::Error::source(e).is_some_and(|s| s.is::<EngineFault>())
}

/// A JS exception the host met reading `what` of the answer.
fn threw(what: impl std::fmt::Display, e: &JsError) -> MwError {
    checked(
        MwError::threw(format!("reading {what}: {}", crate::js::vm::error_text(e))),
        e,
    )
}

/// Reads field `key` of `obj`; a JS exception (a throwing getter) is an error.
/// `key` is a `js_string!` literal, never an array index ([`name`]): static,
/// so the hot path allocates nothing to name a field.
pub(crate) fn get(obj: &JsObject, key: JsString, ctx: &mut Context) -> Result<JsValue, MwError> {
    let key = name(key);
    if let Some(v) = own_data(obj, &key) {
        return Ok(v);
    }
    obj.get(key.clone(), ctx).map_err(|e| threw(&key, &e))
}

/// The value of `obj`'s own data property `key`, read straight from its
/// property table: what `[[Get]]` returns for an ordinary object, without
/// the internal-method dispatch. `None` for an accessor, an inherited or
/// absent key, or an exotic object (a Proxy keeps no own table), which then
/// take the full `[[Get]]`.
pub(crate) fn own_data(obj: &JsObject, key: &PropertyKey) -> Option<JsValue> {
    let o = obj.borrow();
    let desc = o.properties().get(key)?;
    desc.is_data_descriptor()
        .then(|| desc.expect_value().clone())
}

/// `v` when it is an object in JS's `typeof` sense (not null, not a
/// function); a function is refused as QuickJS's reader refuses it, and
/// as Tyk's `JSON.stringify` would drop it (a function answer is
/// `undefined` there, a 500).
pub(crate) fn plain_object(v: &JsValue) -> Option<JsObject> {
    v.as_object().filter(|o| !o.is_callable())
}

/// A value Tyk's transport makes nothing of where it decodes a map, a
/// list or a struct: `undefined`, a function or a Symbol (which
/// `JSON.stringify` leaves out), `null`, `NaN` or `±Infinity` (JSON
/// `null`, which Go decodes as no change).
pub(crate) fn json_nothing(v: &JsValue) -> bool {
    v.is_null_or_undefined()
        || v.is_symbol()
        || v.as_object().is_some_and(|o| o.is_callable())
        || v.as_number().is_some_and(json_null_number)
}

/// A field Tyk decodes into a Go `bool` (`IgnoreBody`, `OverrideError`,
/// named `key` in its object): a boolean, or nothing (`false`); past
/// those, what `JSON.stringify` makes of it (a `toJSON`'s answer, a
/// `Boolean` object's value); anything else (`1`, `"yes"`) is refused, as
/// Go's decoder refuses it.
pub(crate) fn go_bool(
    v: &JsValue,
    key: JsString,
    field: &str,
    ctx: &mut Context,
) -> Result<bool, MwError> {
    if let Some(b) = v.as_boolean() {
        return Ok(b);
    }
    let made = to_json(v, || key, &|| field.to_string(), ctx)?;
    let boxed = made
        .as_object()
        .and_then(|o| o.downcast_ref::<bool>().map(|b| *b));
    match boxed.or_else(|| made.as_boolean()) {
        Some(b) => Ok(b),
        None if json_nothing(&made) => Ok(false),
        None => Err(shape(field, "a boolean", v)),
    }
}

pub(crate) fn opt_object(v: &JsValue, field: &str) -> Result<Option<JsObject>, MwError> {
    match v {
        v if json_nothing(v) => Ok(None),
        v => plain_object(v)
            .map(Some)
            .ok_or_else(|| shape(field, "an object", v)),
    }
}

/// A field Tyk decodes into a Go map (`SetHeaders`, `AddParams`,
/// `ExtendedParams`, `ResponseHeaders`): an object, never an array, which
/// Go's decoder refuses for a map (the request fails, 500).
pub(crate) fn map_object(
    v: &JsValue,
    field: &str,
    ctx: &mut Context,
) -> Result<Option<JsObject>, MwError> {
    let obj = opt_object(v, field)?;
    if let Some(o) = &obj {
        // A Proxy of an array is an array to `JSON.stringify`.
        if is_array_like(o, ctx).map_err(|e| threw(field, &e))? {
            return Err(not_a_map(field));
        }
    }
    Ok(obj)
}

/// [`map_object`]'s error, the same on both engines.
pub(crate) fn not_a_map(field: &str) -> MwError {
    MwError::bad_answer(format!(
        "the script's answer: {field} must be an object of names to values, got an array"
    ))
}

/// Own enumerable string keys of `obj`, with their values: what
/// `JSON.stringify`, and so Tyk's decoder, would see.
fn entries(
    obj: &JsObject,
    field: &str,
    ctx: &mut Context,
) -> Result<Vec<(String, JsValue)>, MwError> {
    Ok(own_entries(obj, field, ctx)?
        .into_iter()
        .map(|(k, v)| (text::lossy(&k), v))
        .collect())
}

/// [`entries`], the keys as boa holds them (an index key as its digits).
/// An ordinary object answers from its property table, each key looked up
/// once for both its enumerability and its value; any other (a Proxy, an
/// array) lists its keys through `Object.keys`, whose traps run as
/// `JSON.stringify`'s would. A non-enumerable key (a RegExp's
/// `lastIndex`, a property defined with `enumerable: false`) is not part
/// of the answer Tyk decodes.
fn own_entries(
    obj: &JsObject,
    field: &str,
    ctx: &mut Context,
) -> Result<Vec<(JsString, JsValue)>, MwError> {
    let ordinary = obj.is_ordinary();
    let keys = if ordinary {
        obj.own_property_keys(ctx).map_err(|e| threw(field, &e))?
    } else {
        listed_keys(obj, field, ctx)?
    };
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let name = match &key {
            PropertyKey::String(s) => s.clone(),
            PropertyKey::Index(i) => JsString::from(i.get().to_string()),
            PropertyKey::Symbol(_) => continue,
        };
        let data = if ordinary {
            let o = obj.borrow();
            match o.properties().get(&key) {
                Some(d) if d.enumerable() == Some(true) => {
                    d.is_data_descriptor().then(|| d.expect_value().clone())
                }
                _ => continue,
            }
        } else {
            None
        };
        let v = match data {
            Some(v) => v,
            None => obj
                .get(key, ctx)
                .map_err(|e| threw(format_args!("{field}[{:?}]", text::lossy(&name)), &e))?,
        };
        out.push((name, v));
    }
    Ok(out)
}

/// An exotic object's own enumerable string keys, by `Object.keys` (the
/// spec's `EnumerableOwnProperties`, as `JSON.stringify` lists them).
fn listed_keys(
    obj: &JsObject,
    field: &str,
    ctx: &mut Context,
) -> Result<Vec<PropertyKey>, MwError> {
    let listed = OrdinaryObject::keys(&JsValue::undefined(), &[obj.clone().into()], ctx)
        .map_err(|e| threw(field, &e))?;
    let listed = listed
        .as_object()
        .and_then(|a| JsArray::from_object(a).ok())
        .ok_or_else(|| MwError::internal(format!("JS host: {field}: Object.keys gave no array")))?;
    let len = listed.length(ctx).map_err(|e| threw(field, &e))?;
    (0..len)
        .map(|i| {
            let k = listed.get(i, ctx).map_err(|e| threw(field, &e))?;
            k.as_string()
                .map(|s| PropertyKey::from(s.clone()))
                .ok_or_else(|| {
                    MwError::internal(format!("JS host: {field}: a key that is not a string"))
                })
        })
        .collect()
}

/// `v` as `JSON.stringify` first makes it: what its `toJSON` method
/// returns when it has one (called with `key`), else `v`. Asked only of a
/// value that is not what its field wants, so the usual answer pays
/// nothing for it.
fn to_json(
    v: &JsValue,
    key: impl FnOnce() -> JsString,
    what: &impl Fn() -> String,
    ctx: &mut Context,
) -> Result<JsValue, MwError> {
    if let Some(obj) = plain_object(v) {
        let f = obj
            .get(js_string!("toJSON"), ctx)
            .map_err(|e| threw(what(), &e))?;
        if let Some(f) = f.as_callable() {
            return f
                .call(v, &[key().into()], ctx)
                .map_err(|e| threw(what(), &e));
        }
    }
    Ok(v.clone())
}

/// `v` where Tyk's decoder wants a Go string (`gostring.rs`): `None` when
/// it refuses it. Past a plain string, a `toJSON` method is called with
/// `key` (the entry's name, or its index as text), as `JSON.stringify`
/// calls it, and a `String` object is unwrapped; a throw is the answer's
/// error.
pub(crate) fn go_string(
    v: &JsValue,
    key: impl FnOnce() -> JsString,
    what: impl Fn() -> String,
    ctx: &mut Context,
) -> Result<Option<GoString<JsString>>, MwError> {
    if let Some(s) = v.as_string() {
        return Ok(Some(GoString::Text(s)));
    }
    let v = to_json(v, key, &what, ctx)?;
    // A String object is its string.
    let boxed = v
        .as_object()
        .and_then(|o| o.downcast_ref::<JsString>().map(|s| s.clone()));
    Ok(if let Some(s) = boxed.or_else(|| v.as_string()) {
        Some(GoString::Text(s))
    } else if v.is_null() || v.as_number().is_some_and(json_null_number) {
        Some(GoString::Empty)
    } else if json_nothing(&v) {
        Some(GoString::Left)
    } else {
        None
    })
}

/// Strings of an array-like (`DeleteHeaders`, `DeleteParams`, ...), each
/// taken from the answer's `head` text before it is copied.
pub(crate) fn strings(
    v: &JsValue,
    field: &str,
    head: &mut HeadText,
    ctx: &mut Context,
) -> Result<Vec<String>, MwError> {
    let Some(mut obj) = opt_object(v, field)? else {
        return Ok(Vec::new());
    };
    if !is_array_like(&obj, ctx).map_err(|e| threw(field, &e))? {
        // Not a list: what `JSON.stringify` makes of it (a `toJSON`
        // answering `null` is a nil list to Go, one answering a list is
        // that list). The key it is handed is "".
        let made = to_json(v, || js_string!(), &|| field.to_string(), ctx)?;
        if json_nothing(&made) {
            return Ok(Vec::new());
        }
        match made.as_object() {
            Some(o) if is_array_like(&o, ctx).map_err(|e| threw(field, &e))? => obj = o,
            _ => return Err(shape(field, "an array", v)),
        }
    }
    // An Array, or a Proxy of one (its traps run, as `JSON.stringify`'s).
    let len = obj
        .get(js_string!("length"), ctx)
        .and_then(|n| n.to_length(ctx))
        .map_err(|e| threw(field, &e))?;
    (0..len)
        .map(|i| {
            let item = obj
                .get(i, ctx)
                .map_err(|e| threw(format_args!("{field}[{i}]"), &e))?;
            let what = || format!("{field}[{i}]");
            let s = match go_string(&item, || JsString::from(i.to_string()), what, ctx)? {
                Some(GoString::Text(s)) => s,
                // `null` in the array: `""` to Go.
                Some(GoString::Left | GoString::Empty) => js_string!(),
                None => return Err(shape(&what(), "a string", &item)),
            };
            head.take(field, s.len())?;
            Ok(text::lossy(&s))
        })
        .collect()
}

pub(crate) fn header(
    name: &str,
    value: &str,
    field: &str,
) -> Result<(HeaderName, HeaderValue), MwError> {
    let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad_header_name(field, name))?;
    // HeaderValue refuses CR, LF and NUL: a script cannot split the request.
    let v = HeaderValue::from_str(value).map_err(|_| bad_header_value(field, name))?;
    Ok((n, v))
}

/// `SetHeaders[name] = value` as a header: found in `cache` when both are
/// ASCII (read in place, as boa holds them), else converted and parsed as
/// [`header`] does; the same checks and errors either way.
fn set_header(
    cache: &mut HeaderCache,
    name: &JsString,
    value: &JsString,
    field: &str,
) -> Result<(HeaderName, HeaderValue), MwError> {
    let (Some(n), Some(v)) = (text::ascii(name), text::ascii(value)) else {
        return header(&text::lossy(name), &text::lossy(value), field);
    };
    cache.pair(n, v).map_err(|bad| match bad {
        BadPair::Name => bad_header_name(field, &text::lossy(name)),
        BadPair::Value(_) => bad_header_value(field, &text::lossy(name)),
    })
}

/// Sets header `n` in `map` as `insert` does, refusing (an answer error
/// naming `field`) a header past what a map holds (32,768), where
/// `insert` panics: 40,000 `SetHeaders` entries failed the call as "the
/// JS call panicked" (boa: and rebuilt the context).
pub(crate) fn put_header(
    map: &mut http::HeaderMap,
    n: HeaderName,
    v: HeaderValue,
    field: &str,
) -> Result<(), MwError> {
    map.try_insert(n, v).map(drop).map_err(|_| {
        MwError::bad_answer(format!(
            "{field}: too many header fields (a request or response holds at most 32,768)"
        ))
    })
}

/// [`header`]'s error for a name that is not a header name.
pub(crate) fn bad_header_name(field: &str, name: &str) -> MwError {
    MwError::bad_answer(format!("{field}: {name:?} is not a valid header name"))
}

/// [`header`]'s error for a value a header cannot carry.
pub(crate) fn bad_header_value(field: &str, name: &str) -> MwError {
    MwError::bad_answer(format!(
        "{field}[{name:?}]: value contains a character not allowed in a header (CR, LF or control)"
    ))
}

/// A map of names to strings (`AddParams`, `ResponseHeaders`, ...), each
/// name and value taken from the answer's `head` text before it is copied.
pub(crate) fn string_map(
    v: &JsValue,
    field: &str,
    head: &mut HeadText,
    ctx: &mut Context,
) -> Result<Vec<(String, String)>, MwError> {
    let Some(obj) = map_object(v, field, ctx)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (k, v) in own_entries(&obj, field, ctx)? {
        let what = || format!("{field}[{:?}]", text::lossy(&k));
        let s = match go_string(&v, || k.clone(), what, ctx)? {
            Some(GoString::Text(s)) => s,
            Some(GoString::Empty) => js_string!(),
            Some(GoString::Left) => continue,
            None => return Err(shape(&what(), "a string", &v)),
        };
        head.pair(field, k.len(), s.len())?;
        out.push((text::lossy(&k), text::lossy(&s)));
    }
    Ok(out)
}

/// Applies the script's answer `ret` to `req`, following Tyk's
/// `mw_js_plugin.go`: overrides first (nothing proxied), then body, URL,
/// header deletes before sets, then query deletes, sets and appends.
pub(crate) fn apply(
    ret: &JsValue,
    built: &Built,
    acc: &Accessors,
    cache: &mut HeaderCache,
    req: &mut MwRequest,
    ctx: &mut Context,
) -> Result<Flow, MwError> {
    let answer = Answer::read(ret, built, acc, ctx)?;
    let format = ErrorFormat::of(&req.headers);
    let mut head = HeadText::new();
    let ro = answer.field(Lazy::ReturnOverrides, ctx)?;
    if let Some(forced) = overrides(&ro, format, &mut head, ctx)? {
        answer.check_edits(&mut head, ctx)?;
        return Ok(forced);
    }
    answer.apply_body(req, ctx)?;
    answer.apply_url(req, ctx)?;
    answer.apply_headers(req, cache, &mut head, ctx)?;
    answer.apply_query(req, &mut head, ctx)?;
    Ok(Flow::Continue)
}

/// The `Request` object of a script's answer, and what the host knows of it
/// from the build: when it is the object handed over (the common case) and
/// a lazy field is still the host's accessor, the field's state is read
/// from the host's own record instead of through the property.
struct Answer<'a> {
    r: JsObject,
    built: &'a Built,
    acc: &'a Accessors,
    /// `r` is the request object this call built.
    same: bool,
}

impl<'a> Answer<'a> {
    /// Phase 1: the answer's shape (`ReturnData(request, session)`), and
    /// its session fields' types.
    fn read(
        ret: &JsValue,
        built: &'a Built,
        acc: &'a Accessors,
        ctx: &mut Context,
    ) -> Result<Answer<'a>, MwError> {
        let ret = plain_object(ret)
            .ok_or_else(|| shape("the return value", "an object (use ReturnData)", ret))?;
        let r = get(&ret, js_string!("Request"), ctx)?;
        let r =
            plain_object(&r).ok_or_else(|| shape("Request", "an object (use ReturnData)", &r))?;
        check_session_fields(&ret, &acc.stringify, ctx)?;
        let same = JsObject::equals(&r, &built.object);
        Ok(Answer {
            r,
            built,
            acc,
            same,
        })
    }

    /// Lazy field `f`. One the script never touched holds its empty initial
    /// value: reading it would only build it to find nothing to apply, so
    /// it reads as `undefined`, which the phases take as "nothing", exactly
    /// as an absent field.
    fn field(&self, f: Lazy, ctx: &mut Context) -> Result<JsValue, MwError> {
        if self.same {
            match self.acc.state(&self.r, f) {
                FieldState::Untouched => return Ok(JsValue::undefined()),
                FieldState::Held(v) => return Ok(v),
                FieldState::Replaced => {}
            }
        }
        get(&self.r, f.key(), ctx)
    }

    /// What Go's decoder refuses in the edits when an override answers
    /// (Tyk decodes the whole answer before it uses any of it): each field
    /// read and its types checked as the phases below read them, nothing
    /// applied. `Body` is made a string as Tyk's `b64enc` makes it (unless
    /// `IgnoreBody`, as the QuickJS reader does).
    fn check_edits(&self, head: &mut HeadText, ctx: &mut Context) -> Result<(), MwError> {
        let body = get(&self.r, js_string!("Body"), ctx)?;
        let ignored = self.ignore_body(ctx)?;
        if !ignored && !body.is_string() {
            body.to_string(ctx).map_err(|e| threw("Request.Body", &e))?;
        }
        // Left out or `null` is Go's "" (never applied, so never refused).
        let url = get(&self.r, js_string!("URL"), ctx)?;
        if !url.is_string() && !json_nothing(&url) {
            return Err(shape("Request.URL", "a string", &url));
        }
        let deletes = self.field(Lazy::DeleteHeaders, ctx)?;
        strings(&deletes, "Request.DeleteHeaders", head, ctx)?;
        let sets = self.field(Lazy::SetHeaders, ctx)?;
        string_map(&sets, "Request.SetHeaders", head, ctx)?;
        let deletes = self.field(Lazy::DeleteParams, ctx)?;
        strings(&deletes, "Request.DeleteParams", head, ctx)?;
        let adds = self.field(Lazy::AddParams, ctx)?;
        string_map(&adds, "Request.AddParams", head, ctx)?;
        extended_params(&self.field(Lazy::ExtendedParams, ctx)?, head, ctx).map(drop)
    }

    /// `IgnoreBody`, a Go boolean ([`go_bool`]).
    fn ignore_body(&self, ctx: &mut Context) -> Result<bool, MwError> {
        let key = js_string!("IgnoreBody");
        let v = get(&self.r, key.clone(), ctx)?;
        go_bool(&v, key, "Request.IgnoreBody", ctx)
    }

    /// Phase 2: `Body`, unless `IgnoreBody`. Any value, as Tyk's
    /// `b64enc(Body)` turns it into text (`42` becomes "42"); only a Symbol
    /// cannot be.
    fn apply_body(&self, req: &mut MwRequest, ctx: &mut Context) -> Result<(), MwError> {
        if self.ignore_body(ctx)? {
            return Ok(());
        }
        let body = get(&self.r, js_string!("Body"), ctx)?;
        let body = match body.as_string() {
            Some(s) => s,
            None => body.to_string(ctx).map_err(|e| {
                let err = MwError::bad_answer(format!(
                    "Request.Body cannot be made a string: {}",
                    crate::js::vm::error_text(&e)
                ));
                checked(err, &e)
            })?,
        };
        if body != self.built.body {
            // What goes into `req` is the host's (`heap.rs`), as is what
            // it replaces (a body may share the I/O thread's buffer).
            uncounted(|| {
                req.body = Bytes::from(text::body(&body, REQUEST_BODY)?);
                crate::body::reframe(&mut req.headers, &req.method, req.body.len());
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Phase 3: `URL`, when the script changed it.
    fn apply_url(&self, req: &mut MwRequest, ctx: &mut Context) -> Result<(), MwError> {
        let url = get(&self.r, js_string!("URL"), ctx)?;
        let url = url
            .as_string()
            .ok_or_else(|| shape("Request.URL", "a string", &url))?;
        if url != self.built.url {
            uncounted(|| set_url(&mut ReqMut::Owned(req), &text::lossy(&url)))?;
        }
        Ok(())
    }

    /// Phase 4: `DeleteHeaders`, then `SetHeaders`, whose names and values
    /// the context's `cache` parses (what a script sets on every call is
    /// parsed once).
    fn apply_headers(
        &self,
        req: &mut MwRequest,
        cache: &mut HeaderCache,
        head: &mut HeadText,
        ctx: &mut Context,
    ) -> Result<(), MwError> {
        let deletes = self.field(Lazy::DeleteHeaders, ctx)?;
        for name in strings(&deletes, "Request.DeleteHeaders", head, ctx)? {
            if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
                uncounted(|| req.headers.remove(n));
            }
        }
        let field = "Request.SetHeaders";
        let Some(sets) = map_object(&self.field(Lazy::SetHeaders, ctx)?, field, ctx)? else {
            return Ok(());
        };
        let mut sets = own_entries(&sets, field, ctx)?;
        let mut kept = 0;
        for i in 0..sets.len() {
            let (k, v) = &sets[i];
            let s = if let Some(s) = v.as_string() {
                s
            } else {
                let what = || format!("{field}[{:?}]", text::lossy(k));
                match go_string(v, || k.clone(), what, ctx)? {
                    Some(GoString::Text(s)) => s,
                    Some(GoString::Empty) => js_string!(),
                    Some(GoString::Left) => continue,
                    None => return Err(shape(&what(), "a string", v)),
                }
            };
            head.pair(field, k.len(), s.len())?;
            // Only an entry left out, or a value made a string, moves.
            if kept != i || !sets[i].1.is_string() {
                sets[kept] = (sets[i].0.clone(), s.into());
            }
            kept += 1;
        }
        sets.truncate(kept);
        // The cache's work and what goes into `req` are the host's
        // (`heap.rs`).
        uncounted(|| {
            for (k, v) in &sets {
                let v = v.as_string().expect("made a string above");
                let (n, v) = set_header(cache, k, &v, field)?;
                put_header(&mut req.headers, n, v, field)?;
            }
            Ok(())
        })
    }

    /// Phase 5: `DeleteParams`, `AddParams`, `ExtendedParams`, applied
    /// together ([`edit_query`]) when any is non-empty.
    fn apply_query(
        &self,
        req: &mut MwRequest,
        head: &mut HeadText,
        ctx: &mut Context,
    ) -> Result<(), MwError> {
        let deletes = self.field(Lazy::DeleteParams, ctx)?;
        let deletes = strings(&deletes, "Request.DeleteParams", head, ctx)?;
        let adds = self.field(Lazy::AddParams, ctx)?;
        let adds = string_map(&adds, "Request.AddParams", head, ctx)?;
        let extended = extended_params(&self.field(Lazy::ExtendedParams, ctx)?, head, ctx)?;
        if !deletes.is_empty() || !adds.is_empty() || !extended.is_empty() {
            uncounted(|| edit_query(&mut ReqMut::Owned(req), &deletes, &adds, &extended));
        }
        Ok(())
    }
}

/// Tyk decodes `SessionMeta`, `Session` and `AuthValue` too, and fails the
/// request when one has the wrong type (`session.rs`). The common answer,
/// `ReturnData(request, {})`, has an empty `SessionMeta` and costs one read.
fn check_session_fields(
    ret: &JsObject,
    stringify: &JsObject,
    ctx: &mut Context,
) -> Result<(), MwError> {
    type Check = fn(&serde_json::Value) -> Result<(), MwError>;
    let fields: [(JsString, Check); 3] = [
        (
            js_string!("SessionMeta"),
            crate::js::session::check_session_meta,
        ),
        (js_string!("Session"), crate::js::session::check_session),
        (
            js_string!("AuthValue"),
            crate::js::session::check_auth_value,
        ),
    ];
    for (key, check) in fields {
        let v = json_field(ret, key.clone(), ctx)?;
        if v.is_undefined() || v.as_object().is_some_and(|o| is_empty_plain(&o)) {
            continue;
        }
        let what = || key.to_std_string_lossy();
        let text = crate::js::json::to_text(stringify, &v, ctx).map_err(|e| {
            let err = MwError::bad_answer(format!(
                "ProcessRequest result: {} cannot be encoded as JSON: {}",
                what(),
                crate::js::vm::error_text(&e)
            ));
            checked(err, &e)
        })?;
        // Read back as Tyk's decoder reads it (a lone surrogate's escape,
        // which `JSON.stringify` writes, as U+FFFD); serde_json refuses
        // nesting past 128 levels, as the QuickJS host's check does.
        if let Some(text) = text {
            let text = crate::js::gojson::lone_surrogates(&text);
            let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                MwError::bad_answer(format!(
                    "ProcessRequest result: {} cannot be decoded as Tyk would: {e}",
                    what()
                ))
            })?;
            check(&json)?;
        }
    }
    Ok(())
}

/// Field `key` of the answer as Tyk's JSON encoding of it carries it: the
/// value of an own enumerable property, else `undefined` (`JSON.stringify`
/// drops inherited and non-enumerable ones, so Tyk's decoder never sees
/// them). On an ordinary object (what `ReturnData` makes) the property
/// table answers, sparing the prototype walk an absent `Session` and
/// `AuthValue` would take; any other object is asked through its internal
/// methods (a Proxy's traps run).
fn json_field(obj: &JsObject, key: JsString, ctx: &mut Context) -> Result<JsValue, MwError> {
    let key = name(key);
    if obj.is_ordinary() {
        let data = {
            let o = obj.borrow();
            match o.properties().get(&key) {
                None => return Ok(JsValue::undefined()),
                Some(d) if d.enumerable() != Some(true) => return Ok(JsValue::undefined()),
                Some(d) => d.is_data_descriptor().then(|| d.expect_value().clone()),
            }
        };
        if let Some(v) = data {
            return Ok(v);
        }
    } else {
        let own = obj
            .has_own_property(key.clone(), ctx)
            .map_err(|e| threw(&key, &e))?;
        if !own {
            return Ok(JsValue::undefined());
        }
    }
    obj.get(key.clone(), ctx).map_err(|e| threw(&key, &e))
}

/// An ordinary object without own properties (`{}`).
fn is_empty_plain(o: &JsObject) -> bool {
    if o.is_array() || o.downcast_ref::<OrdinaryObject>().is_none() {
        return false;
    }
    let b = o.borrow();
    b.shape().keys().is_empty() && b.properties().index_property_keys().next().is_none()
}

fn extended_params(
    v: &JsValue,
    head: &mut HeadText,
    ctx: &mut Context,
) -> Result<Vec<(String, Vec<String>)>, MwError> {
    let field = "Request.ExtendedParams";
    let Some(obj) = map_object(v, field, ctx)? else {
        return Ok(Vec::new());
    };
    entries(&obj, field, ctx)?
        .into_iter()
        // A value JSON leaves out or makes `null` is a nil list to Go:
        // nothing to add.
        .filter(|(_, v)| !json_nothing(v))
        .map(|(k, v)| {
            head.take(field, k.len())?;
            let vals = strings(&v, &format!("{field}[{k:?}]"), head, ctx)?;
            Ok((k, vals))
        })
        .collect()
}

/// `ReturnOverrides`: `None` when `ResponseCode` is 0 or absent; else the
/// answer Tyk gives ([`Overrides::respond`]), in the request's error format.
fn overrides(
    v: &JsValue,
    format: ErrorFormat,
    head: &mut HeadText,
    ctx: &mut Context,
) -> Result<Option<Flow>, MwError> {
    let field = "Request.ReturnOverrides";
    let Some(ro) = opt_object(v, field)? else {
        return Ok(None);
    };
    let code = get(&ro, js_string!("ResponseCode"), ctx)?;
    // Without a code nothing answers, but the other fields are read all
    // the same: Go decodes them, and refuses a wrong one.
    let code = match code.as_number() {
        _ if json_nothing(&code) => None,
        Some(0.0) => None,
        Some(n) if n.fract() == 0.0 && (100.0..=999.0).contains(&n) => Some(n as u16),
        Some(_) => {
            return Err(MwError::bad_answer(format!(
                "{field}.ResponseCode {} is not an HTTP status",
                code.display()
            )))
        }
        None => {
            return Err(shape(
                "Request.ReturnOverrides.ResponseCode",
                "a number",
                &code,
            ))
        }
    };
    let headers = string_map(
        &get(&ro, js_string!("ResponseHeaders"), ctx)?,
        "Request.ReturnOverrides.ResponseHeaders",
        head,
        ctx,
    )?;
    let key = js_string!("OverrideError");
    let v = get(&ro, key.clone(), ctx)?;
    let override_error = go_bool(&v, key, "Request.ReturnOverrides.OverrideError", ctx)?;
    let mut text = |key: JsString, field: BodyField| -> Result<String, MwError> {
        let v = get(&ro, key.clone(), ctx)?;
        match go_string(&v, || key, || field.name.to_string(), ctx)? {
            Some(GoString::Text(s)) => text::body(&s, field),
            Some(GoString::Left | GoString::Empty) => Ok(String::new()),
            None => Err(shape(field.name, "a string", &v)),
        }
    };
    let error = text(js_string!("ResponseError"), OVERRIDE_ERROR)?;
    let body = text(js_string!("ResponseBody"), OVERRIDE_BODY)?;
    let Some(code) = code else {
        return Ok(None);
    };
    // The answer leaves with the request (`heap.rs`): the strings above
    // are counted, and freed here; their copies in the answer are not.
    let answer = uncounted(|| {
        Overrides {
            code,
            error: error.clone(),
            body: body.clone(),
            headers: headers.clone(),
            override_error,
        }
        .respond(format)
    });
    answer.map(Some)
}

/// `URL` replaces path and query: an origin-form `/path?query`, or an absolute
/// URL whose path and query are taken (Tyk parses it with `url.Parse`).
pub(crate) fn set_url(req: &mut ReqMut<'_, '_>, url: &str) -> Result<(), MwError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| MwError::bad_answer(format!("Request.URL {url:?} is not a URL: {e}")))?;
    let path = uri.path();
    if !path.starts_with('/') {
        return Err(MwError::bad_answer(format!(
            "Request.URL {url:?} has no absolute path"
        )));
    }
    req.set_target(path.to_string(), uri.query().map(str::to_string));
    Ok(())
}

/// Deletes, then sets, then appends query parameters, and re-encodes the
/// query as Go's `url.Values.Encode` does (keys sorted, values in order).
pub(crate) fn edit_query(
    req: &mut ReqMut<'_, '_>,
    deletes: &[String],
    adds: &[(String, String)],
    extended: &[(String, Vec<String>)],
) {
    let values: Vec<(String, String)> = req
        .query()
        .map(|q| crate::js::goquery::parse(q.as_bytes()))
        .unwrap_or_default();
    let values = edited(values, deletes, adds, extended);
    let encoded = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(values)
        .finish();
    req.set_query((!encoded.is_empty()).then_some(encoded));
}

/// The query's `values` after Tyk's edits, in the order Go encodes them:
/// every value of a deleted name goes; each added name's values are
/// replaced by its one value (`url.Values.Set`, the last of a name set
/// twice); extended values are appended (`Add`); then a stable sort by
/// name (values of one name keep their order).
///
/// In linear time but for the sort: the names to drop are looked up in
/// sets. Tyk's loop, each `Set` scanning the whole query, was quadratic:
/// 80,000 `AddParams` took the call past its 5 s timeout, and the 1 MiB
/// an answer may carry (`js/headtext.rs`) holds 150,000.
pub(crate) fn edited(
    mut values: Vec<(String, String)>,
    deletes: &[String],
    adds: &[(String, String)],
    extended: &[(String, Vec<String>)],
) -> Vec<(String, String)> {
    use std::collections::{HashMap, HashSet};
    if !deletes.is_empty() || !adds.is_empty() {
        let deleted: HashSet<&str> = deletes.iter().map(String::as_str).collect();
        // Each added name, to the index of its last `Set`.
        let last: HashMap<&str, usize> = adds
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (k.as_str(), i))
            .collect();
        values.retain(|(k, _)| !deleted.contains(k.as_str()) && !last.contains_key(k.as_str()));
        values.extend(
            adds.iter()
                .enumerate()
                .filter(|(i, (k, _))| last[k.as_str()] == *i)
                .map(|(_, (k, v))| (k.clone(), v.clone())),
        );
    }
    for (k, vals) in extended {
        values.extend(vals.iter().map(|v| (k.clone(), v.clone())));
    }
    values.sort_by(|a, b| a.0.cmp(&b.0));
    values
}
