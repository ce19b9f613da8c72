//! The `request` object a script sees (Tyk's MiniRequestObject), built
//! natively per call, and the rules that apply what the script returns.
//!
//! Tyk JSON-encodes the request into the script and JSON-decodes the answer.
//! Here the object is built directly from the [`MwRequest`] and only the
//! fields a script may change are read back, with the same type rules Go's
//! JSON decoder would enforce (a number where a string belongs is an error).

use boa_engine::builtins::object::OrdinaryObject;
use boa_engine::gc::{Finalize, Trace};
use boa_engine::object::builtins::{JsArray, JsFunction};
use boa_engine::object::shape::Shape;
use boa_engine::object::ObjectInitializer;
use boa_engine::property::{Attribute, PropertyDescriptor, PropertyKey};
use boa_engine::{
    js_string, Context, JsData, JsObject, JsResult, JsString, JsValue, NativeFunction,
};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method};

use super::forced::Overrides;
use crate::error::ErrorFormat;
use crate::middleware::{Flow, MwError, MwRequest, MwResponse};

/// The object-valued fields of `request`, built on first access.
///
/// Most scripts touch one or two of them (the seed's writes `SetHeaders`), so
/// building all of them per call (an object and an array per header, the
/// query's arrays, six empty containers and `ReturnOverrides`) was the bulk
/// of a call's allocations and of the GC work that followed. Each is an own,
/// enumerable, configurable accessor of the request object, shared by every
/// request object of the context ([`Accessors`]): the getter builds the value
/// from the request data the object carries ([`Pending`]) on first read and
/// returns that same value after; the setter replaces it. So reads, writes,
/// `delete`, `in`, `Object.keys`, `for..in`, spreading and `JSON.stringify`
/// see what they would on the JSON-decoded object Tyk hands a script. What
/// differs: `Object.getOwnPropertyDescriptor` shows an accessor, and a write
/// to a field of a frozen request is ignored by the host rather than by the
/// engine (no `TypeError` in strict code).
///
/// (The accessor is not turned into a data property on first use: in boa
/// 0.22 an accessor-to-data change re-derives the object's shape from the
/// changed key on, uncached, which costs more than the lazy build saves.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lazy {
    Headers,
    SetHeaders,
    DeleteHeaders,
    Params,
    AddParams,
    ExtendedParams,
    DeleteParams,
    ReturnOverrides,
}

impl Lazy {
    const ALL: [Lazy; 8] = [
        Lazy::Headers,
        Lazy::SetHeaders,
        Lazy::DeleteHeaders,
        Lazy::Params,
        Lazy::AddParams,
        Lazy::ExtendedParams,
        Lazy::DeleteParams,
        Lazy::ReturnOverrides,
    ];

    fn key(self) -> JsString {
        match self {
            Lazy::Headers => js_string!("Headers"),
            Lazy::SetHeaders => js_string!("SetHeaders"),
            Lazy::DeleteHeaders => js_string!("DeleteHeaders"),
            Lazy::Params => js_string!("Params"),
            Lazy::AddParams => js_string!("AddParams"),
            Lazy::ExtendedParams => js_string!("ExtendedParams"),
            Lazy::DeleteParams => js_string!("DeleteParams"),
            Lazy::ReturnOverrides => js_string!("ReturnOverrides"),
        }
    }
}

/// The getter and setter of each [`Lazy`] field, made once per context and
/// shared by every request object built in it (so every request object has
/// the same shape and no function object is made per call).
pub(crate) struct Accessors {
    get: [JsFunction; 8],
    set: [JsFunction; 8],
    /// Blank request objects no script has seen, used once each.
    spares: Vec<JsObject>,
}

/// Request objects made ahead, in batches of this many (see [`Accessors::spare`]).
const SPARES: usize = 16;

/// What [`Accessors::state`] found for a lazy field of the built request.
enum FieldState {
    /// Never read nor written: it holds its empty initial value.
    Untouched,
    /// Still the host's accessor, holding this value.
    Held(JsValue),
    /// Replaced by the script (`delete`, `Object.defineProperty`): read it.
    Replaced,
}

impl Accessors {
    pub(crate) fn new(ctx: &mut Context) -> Accessors {
        let get = std::array::from_fn(|i| {
            let field = Lazy::ALL[i];
            NativeFunction::from_copy_closure(move |this, _, ctx| lazy_get(field, this, ctx))
                .to_js_function(ctx.realm())
        });
        let set = std::array::from_fn(|i| {
            let field = Lazy::ALL[i];
            NativeFunction::from_copy_closure(move |this, args, ctx| {
                lazy_set(field, this, args, ctx)
            })
            .to_js_function(ctx.realm())
        });
        Accessors {
            get,
            set,
            spares: Vec::with_capacity(SPARES),
        }
    }

    /// A blank request object for one call.
    ///
    /// Objects are made [`SPARES`] at a time. Giving a fresh object its 14
    /// fields walks a chain of 14 shared shapes; in the gateway the caches
    /// are cold at every call (the network stack, the load generator and the
    /// upstream run between two calls), and that walk was the largest share
    /// of a call's cache misses. Made in a batch, only the first object of
    /// the batch pays them. A call then only writes the string fields that
    /// differ from a blank object's, which keeps the shape. Every object is
    /// used once: a script may keep the request it was given.
    fn spare(&mut self, ctx: &mut Context) -> JsObject {
        if self.spares.is_empty() {
            for _ in 0..SPARES {
                let o = blank(self, ctx);
                self.spares.push(o);
            }
        }
        self.spares.pop().expect("just filled")
    }

    /// The state of `f` on a built request `obj`. `unchanged` (see
    /// [`Built::unchanged`]) vouches that every field is still the host's
    /// accessor, sparing the property lookup that checks it.
    fn state(&self, obj: &JsObject, f: Lazy, unchanged: bool) -> FieldState {
        let ours = unchanged
            || obj
                .borrow()
                .properties()
                .get(&f.key().into())
                .and_then(|d| d.get().and_then(JsValue::as_object))
                .is_some_and(|g| JsObject::equals(&g, &self.get[f as usize]));
        if !ours {
            return FieldState::Replaced;
        }
        match held(obj, f) {
            Some(v) => FieldState::Held(v),
            None => FieldState::Untouched,
        }
    }
}

/// The request data a request object carries for its lazy fields. Tyk's
/// request is a snapshot taken at the call, so a script that keeps the object
/// and reads it in a later call sees this call's request.
struct Pending {
    headers: HeaderMap,
    query: Option<String>,
    /// Each lazy field's value once read or written.
    values: [Option<JsValue>; 8],
}

impl Finalize for Pending {}

// SAFETY: `values` holds the only GC pointers; the rest is plain Rust data.
unsafe impl Trace for Pending {
    boa_engine::gc::custom_trace!(this, mark, mark(&this.values));
}

impl JsData for Pending {}

/// The value `obj`'s [`Pending`] holds for `f`, once read or written.
fn held(obj: &JsObject, f: Lazy) -> Option<JsValue> {
    obj.downcast_ref::<Pending>()
        .and_then(|p| p.values[f as usize].clone())
}

/// The object carrying [`Pending`]: `this`, or the prototype it inherits the
/// field from (`Object.create(request)`).
fn owner(this: &JsValue) -> Option<JsObject> {
    let mut obj = this.as_object()?;
    loop {
        if obj.downcast_ref::<Pending>().is_some() {
            return Some(obj);
        }
        obj = obj.prototype()?;
    }
}

fn lazy_get(f: Lazy, this: &JsValue, ctx: &mut Context) -> JsResult<JsValue> {
    let Some(owner) = owner(this) else {
        return Ok(JsValue::undefined());
    };
    if let Some(v) = held(&owner, f) {
        return Ok(v);
    }
    let value = {
        let pending = owner.downcast_ref::<Pending>().expect("checked by owner()");
        materialise(f, &pending, ctx)?
    };
    if let Some(mut p) = owner.downcast_mut::<Pending>() {
        p.values[f as usize] = Some(value.clone());
    }
    Ok(value)
}

/// Assignment, as on a plain object. On the request itself the value is
/// held for the getter (unless the object was frozen: the write is then
/// ignored, as sloppy code would see it); on an object inheriting from it,
/// the receiver gets its own data property.
fn lazy_set(f: Lazy, this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let Some(obj) = this.as_object() else {
        return Ok(JsValue::undefined());
    };
    let value = args.first().cloned().unwrap_or_default();
    if obj.downcast_ref::<Pending>().is_none() {
        obj.create_data_property(f.key(), value, ctx)?;
        return Ok(JsValue::undefined());
    }
    let frozen = obj
        .borrow()
        .properties()
        .get(&f.key().into())
        .is_some_and(|d| d.configurable() == Some(false));
    if !frozen {
        if let Some(mut p) = obj.downcast_mut::<Pending>() {
            p.values[f as usize] = Some(value);
        }
    }
    Ok(JsValue::undefined())
}

/// `headers` as Go's `http.Header` decodes into JS: each canonical name to
/// the array of its values (the request's and the response's `Headers`).
pub(crate) fn header_object(headers: &http::HeaderMap, ctx: &mut Context) -> JsResult<JsObject> {
    let object = plain(ctx);
    for name in headers.keys() {
        let values = headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let arr = string_array(values, ctx);
        object.create_data_property_or_throw(JsString::from(canonical(name.as_str())), arr, ctx)?;
    }
    Ok(object)
}

/// Builds the initial value of field `f`, as Tyk's JSON would decode it.
fn materialise(f: Lazy, p: &Pending, ctx: &mut Context) -> JsResult<JsValue> {
    let empty = |ctx: &mut Context| JsValue::from(plain(ctx));
    Ok(match f {
        Lazy::Headers => header_object(&p.headers, ctx)?.into(),
        // Params as Go's `url.Values`: name -> every value, in order.
        Lazy::Params => {
            let params = plain(ctx);
            if let Some(q) = &p.query {
                let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
                for (k, v) in super::goquery::parse(q.as_bytes()) {
                    match grouped.iter_mut().find(|(name, _)| *name == k) {
                        Some((_, vals)) => vals.push(v),
                        None => grouped.push((k, vec![v])),
                    }
                }
                for (k, vals) in grouped {
                    let arr = string_array(vals, ctx);
                    params.create_data_property_or_throw(JsString::from(k), arr, ctx)?;
                }
            }
            params.into()
        }
        Lazy::SetHeaders | Lazy::AddParams | Lazy::ExtendedParams => empty(ctx),
        Lazy::DeleteHeaders | Lazy::DeleteParams => JsArray::new(ctx)?.into(),
        Lazy::ReturnOverrides => {
            let response_headers = plain(ctx);
            ObjectInitializer::with_native_data(OrdinaryObject, ctx)
                .property(js_string!("ResponseCode"), 0, Attribute::all())
                .property(js_string!("ResponseError"), js_string!(), Attribute::all())
                .property(js_string!("ResponseBody"), js_string!(), Attribute::all())
                .property(
                    js_string!("ResponseHeaders"),
                    response_headers,
                    Attribute::all(),
                )
                .property(js_string!("OverrideError"), false, Attribute::all())
                .build()
                .into()
        }
    })
}

/// A new `{}`. Unlike `JsObject::with_object_proto` (and
/// `ObjectInitializer::new`), which give each object its own property table
/// (a "unique shape": allocations per object and per property), this starts
/// from the context's shared root shape as a script's `{}` does, so objects
/// built alike share one shape.
pub(crate) fn plain(ctx: &mut Context) -> JsObject {
    ObjectInitializer::with_native_data(OrdinaryObject, ctx).build()
}

/// What the host keeps of a built request to detect the script's changes
/// without converting unchanged strings back to Rust.
pub(crate) struct Built {
    /// The `request` object handed to the script.
    pub(crate) object: JsObject,
    body: JsString,
    url: JsString,
    /// The object's shape as built, when shared (boa gives objects built
    /// alike one immutable shape). Held, so its address cannot be reused:
    /// if the object still has it after the call, the script added, deleted
    /// and reconfigured no property, so every lazy field is still the
    /// host's accessor and its state is in [`Pending`] alone.
    shape: Option<Shape>,
}

impl Built {
    /// True when the request object still has the shape it was built with.
    fn unchanged(&self) -> bool {
        self.shape
            .as_ref()
            .is_some_and(|s| s.to_addr_usize() == self.object.borrow().shape().to_addr_usize())
    }
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

pub(crate) fn string_array<I: IntoIterator<Item = String>>(items: I, ctx: &mut Context) -> JsArray {
    JsArray::from_iter(items.into_iter().map(|s| JsString::from(s).into()), ctx)
}

fn method(m: &Method) -> JsString {
    match *m {
        Method::GET => js_string!("GET"),
        Method::POST => js_string!("POST"),
        Method::PUT => js_string!("PUT"),
        Method::DELETE => js_string!("DELETE"),
        Method::HEAD => js_string!("HEAD"),
        Method::OPTIONS => js_string!("OPTIONS"),
        Method::PATCH => js_string!("PATCH"),
        _ => JsString::from(m.as_str()),
    }
}

/// Builds `request` for one call: the string fields now, the object-valued
/// ones on first access ([`Lazy`]).
pub(crate) fn build(req: &MwRequest, acc: &mut Accessors, ctx: &mut Context) -> JsResult<Built> {
    let body = if req.body.is_empty() {
        js_string!()
    } else {
        JsString::from(String::from_utf8_lossy(&req.body).as_ref())
    };
    let url = match &req.query {
        None => JsString::from(req.path.as_str()),
        Some(_) => JsString::from(req.path_and_query()),
    };
    let object = acc.spare(ctx);
    if let Some(mut p) = object.downcast_mut::<Pending>() {
        p.headers = req.headers.clone();
        p.query = req.query.clone();
    }
    // Each key exists with these attributes: a value write, no new shape.
    let write = |key: JsString, value: JsString| {
        object.insert_property(
            key,
            PropertyDescriptor::builder()
                .value(value)
                .writable(true)
                .enumerable(true)
                .configurable(true),
        );
    };
    // A blank object's Body is empty and its Method GET: a GET without a
    // body (most requests) writes only the two URL fields.
    if !body.is_empty() {
        write(js_string!("Body"), body.clone());
    }
    write(js_string!("URL"), url.clone());
    if req.method != Method::GET {
        write(js_string!("Method"), method(&req.method));
    }
    // The client's URI as sent, also in `post` after the strip (Tyk's
    // r.RequestURI); the same string as `URL` in `pre`, so reuse it.
    write(js_string!("RequestURI"), request_uri(req, &url));
    let shape = Some(object.borrow().shape().clone()).filter(Shape::is_shared);
    Ok(Built {
        object,
        body,
        url,
        shape,
    })
}

/// A fresh request object: every field in Tyk's order, the string fields
/// empty but `Method` (`GET`), no request data yet.
fn blank(acc: &Accessors, ctx: &mut Context) -> JsObject {
    let pending = Pending {
        headers: HeaderMap::new(),
        query: None,
        values: Default::default(),
    };
    let mut init = ObjectInitializer::with_native_data(pending, ctx);
    let lazy = |init: &mut ObjectInitializer<'_>, f: Lazy| {
        init.accessor(
            f.key(),
            Some(acc.get[f as usize].clone()),
            Some(acc.set[f as usize].clone()),
            Attribute::ENUMERABLE | Attribute::CONFIGURABLE,
        );
    };
    lazy(&mut init, Lazy::Headers);
    lazy(&mut init, Lazy::SetHeaders);
    lazy(&mut init, Lazy::DeleteHeaders);
    init.property(js_string!("Body"), js_string!(), Attribute::all())
        .property(js_string!("URL"), js_string!(), Attribute::all());
    lazy(&mut init, Lazy::Params);
    lazy(&mut init, Lazy::AddParams);
    lazy(&mut init, Lazy::ExtendedParams);
    lazy(&mut init, Lazy::DeleteParams);
    lazy(&mut init, Lazy::ReturnOverrides);
    init.property(js_string!("IgnoreBody"), false, Attribute::all())
        .property(js_string!("Method"), js_string!("GET"), Attribute::all())
        .property(js_string!("RequestURI"), js_string!(), Attribute::all())
        .property(js_string!("Scheme"), js_string!("http"), Attribute::all())
        .build()
}

/// The original request target as a JS string, sharing `url` when equal.
fn request_uri(req: &MwRequest, url: &JsString) -> JsString {
    let original = req
        .request_uri
        .path_and_query()
        .map_or("/", |pq| pq.as_str());
    let current_path = original.split('?').next().unwrap_or(original);
    let current_query = original.split_once('?').map(|(_, q)| q);
    if current_path == req.path && current_query == req.query.as_deref() {
        url.clone()
    } else {
        JsString::from(original)
    }
}

/// A script's answer broke a type rule: names the field, as Go's decoder would.
pub(crate) fn shape(field: &str, want: &str, got: &JsValue) -> MwError {
    MwError::bad_answer(format!(
        "the script's answer: {field} must be {want}, got {}",
        got.type_of()
    ))
}

/// Reads field `key` of `obj`; a JS exception (a throwing getter) is an error.
/// `key` is a `js_string!` literal: static, so the hot path allocates nothing
/// to name a field.
pub(crate) fn get(obj: &JsObject, key: JsString, ctx: &mut Context) -> Result<JsValue, MwError> {
    let key = PropertyKey::from(key);
    if let Some(v) = own_data(obj, &key) {
        return Ok(v);
    }
    obj.get(key.clone(), ctx)
        .map_err(|e| MwError::threw(format!("reading {key}: {e}")))
}

/// The value of `obj`'s own data property `key`, read straight from its
/// property table: what `[[Get]]` returns for an ordinary object, without
/// the internal-method dispatch. `None` for an accessor, an inherited or
/// absent key, or an exotic object (a Proxy keeps no own table), which then
/// take the full `[[Get]]`.
fn own_data(obj: &JsObject, key: &PropertyKey) -> Option<JsValue> {
    let o = obj.borrow();
    let desc = o.properties().get(key)?;
    desc.is_data_descriptor()
        .then(|| desc.expect_value().clone())
}

pub(crate) fn opt_object(v: &JsValue, field: &str) -> Result<Option<JsObject>, MwError> {
    match v {
        v if v.is_null_or_undefined() => Ok(None),
        v => v
            .as_object()
            .map(|o| Some(o.clone()))
            .ok_or_else(|| shape(field, "an object", v)),
    }
}

pub(crate) fn string(v: &JsValue, field: &str) -> Result<String, MwError> {
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
        .map_err(|e| MwError::threw(format!("reading {field}: {e}")))?;
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let name = match &key {
            PropertyKey::String(s) => s.to_std_string_lossy(),
            PropertyKey::Index(i) => i.get().to_string(),
            PropertyKey::Symbol(_) => continue,
        };
        let v = match own_data(obj, &key) {
            Some(v) => v,
            None => obj
                .get(key, ctx)
                .map_err(|e| MwError::threw(format!("reading {field}[{name:?}]: {e}")))?,
        };
        out.push((name, v));
    }
    Ok(out)
}

/// Strings of an array-like (`DeleteHeaders`, `DeleteParams`, ...).
pub(crate) fn strings(v: &JsValue, field: &str, ctx: &mut Context) -> Result<Vec<String>, MwError> {
    let Some(obj) = opt_object(v, field)? else {
        return Ok(Vec::new());
    };
    if !obj.is_array() {
        return Err(shape(field, "an array", v));
    }
    let arr = JsArray::from_object(obj).map_err(|e| MwError::threw(e.to_string()))?;
    let len = arr.length(ctx).map_err(|e| MwError::threw(e.to_string()))?;
    (0..len)
        .map(|i| {
            let item = arr.get(i, ctx).map_err(|e| MwError::threw(e.to_string()))?;
            item.as_string()
                .map(|s| s.to_std_string_lossy())
                .ok_or_else(|| shape(&format!("{field}[{i}]"), "a string", &item))
        })
        .collect()
}

pub(crate) fn header(
    name: &str,
    value: &str,
    field: &str,
) -> Result<(HeaderName, HeaderValue), MwError> {
    let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        MwError::bad_answer(format!("{field}: {name:?} is not a valid header name"))
    })?;
    // HeaderValue refuses CR, LF and NUL: a script cannot split the request.
    let v = HeaderValue::from_str(value).map_err(|_| {
        MwError::bad_answer(format!(
            "{field}[{name:?}]: value contains a character not allowed in a header (CR, LF or control)"
        ))
    })?;
    Ok((n, v))
}

pub(crate) fn string_map(
    v: &JsValue,
    field: &str,
    ctx: &mut Context,
) -> Result<Vec<(String, String)>, MwError> {
    let Some(obj) = opt_object(v, field)? else {
        return Ok(Vec::new());
    };
    entries(&obj, field, ctx)?
        .into_iter()
        .map(|(k, v)| match v.as_string() {
            Some(s) => Ok((k, s.to_std_string_lossy())),
            None => Err(shape(&format!("{field}[{k:?}]"), "a string", &v)),
        })
        .collect()
}

/// Applies the script's answer `ret` to `req`, following Tyk's
/// `mw_js_plugin.go`: overrides first (nothing proxied), then body, URL,
/// header deletes before sets, then query deletes, sets and appends.
pub(crate) fn apply(
    ret: &JsValue,
    built: &Built,
    acc: &Accessors,
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
    check_session_fields(&ret, ctx)?;

    // A lazy field the script never touched holds its empty initial value:
    // reading it would only build it to find nothing to apply. `undefined`
    // reads as "nothing" below, exactly as an absent field does.
    let same = JsObject::equals(&r, &built.object);
    let unchanged = same && built.unchanged();
    let field = |f: Lazy, ctx: &mut Context| -> Result<JsValue, MwError> {
        if same {
            match acc.state(&r, f, unchanged) {
                FieldState::Untouched => return Ok(JsValue::undefined()),
                FieldState::Held(v) => return Ok(v),
                FieldState::Replaced => {}
            }
        }
        get(&r, f.key(), ctx)
    };

    let format = ErrorFormat::of(&req.headers);
    if let Some(resp) = overrides(&field(Lazy::ReturnOverrides, ctx)?, format, ctx)? {
        return Ok(Flow::Respond(resp));
    }

    let ignore_body = get(&r, js_string!("IgnoreBody"), ctx)?.to_boolean();
    if !ignore_body {
        let body = get(&r, js_string!("Body"), ctx)?;
        // Any value, as Tyk's `b64enc(Body)` turns it into text (`42`
        // becomes "42"); only a Symbol cannot be.
        let body = match body.as_string() {
            Some(s) => s,
            None => body.to_string(ctx).map_err(|e| {
                MwError::bad_answer(format!("Request.Body cannot be made a string: {e}"))
            })?,
        };
        if body != built.body {
            req.body = Bytes::from(body.to_std_string_lossy());
            crate::body::reframe(&mut req.headers, &req.method, req.body.len());
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
        &field(Lazy::DeleteHeaders, ctx)?,
        "Request.DeleteHeaders",
        ctx,
    )? {
        if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
            req.headers.remove(n);
        }
    }
    let sets = string_map(&field(Lazy::SetHeaders, ctx)?, "Request.SetHeaders", ctx)?;
    for (name, value) in sets {
        let (n, v) = header(&name, &value, "Request.SetHeaders")?;
        req.headers.insert(n, v);
    }

    let deletes = strings(
        &field(Lazy::DeleteParams, ctx)?,
        "Request.DeleteParams",
        ctx,
    )?;
    let adds = string_map(&field(Lazy::AddParams, ctx)?, "Request.AddParams", ctx)?;
    let extended = extended_params(&field(Lazy::ExtendedParams, ctx)?, ctx)?;
    if !deletes.is_empty() || !adds.is_empty() || !extended.is_empty() {
        edit_query(req, &deletes, &adds, &extended);
    }
    Ok(Flow::Continue)
}

/// Tyk decodes `SessionMeta`, `Session` and `AuthValue` too, and fails the
/// request when one has the wrong type (`session.rs`). The common answer,
/// `ReturnData(request, {})`, has an empty `SessionMeta` and costs one read.
fn check_session_fields(ret: &JsObject, ctx: &mut Context) -> Result<(), MwError> {
    type Check = fn(&serde_json::Value) -> Result<(), MwError>;
    let fields: [(JsString, Check); 3] = [
        (
            js_string!("SessionMeta"),
            super::session::check_session_meta,
        ),
        (js_string!("Session"), super::session::check_session),
        (js_string!("AuthValue"), super::session::check_auth_value),
    ];
    for (key, check) in fields {
        let v = get(ret, key.clone(), ctx)?;
        if v.is_undefined() || v.as_object().is_some_and(|o| is_empty_plain(&o)) {
            continue;
        }
        let json = v.to_json(ctx).map_err(|e| {
            MwError::bad_answer(format!(
                "ProcessRequest result: {} cannot be encoded as JSON: {e}",
                key.to_std_string_lossy()
            ))
        })?;
        if let Some(json) = json {
            check(&json)?;
        }
    }
    Ok(())
}

/// An ordinary object without own properties (`{}`).
fn is_empty_plain(o: &JsObject) -> bool {
    if o.is_array() || o.downcast_ref::<OrdinaryObject>().is_none() {
        return false;
    }
    let b = o.borrow();
    b.shape().keys().is_empty() && b.properties().index_property_keys().next().is_none()
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

/// `ReturnOverrides`: `None` when `ResponseCode` is 0 or absent; else the
/// answer Tyk gives ([`Overrides::respond`]), in the request's error format.
fn overrides(
    v: &JsValue,
    format: ErrorFormat,
    ctx: &mut Context,
) -> Result<Option<MwResponse>, MwError> {
    let field = "Request.ReturnOverrides";
    let Some(ro) = opt_object(v, field)? else {
        return Ok(None);
    };
    let code = get(&ro, js_string!("ResponseCode"), ctx)?;
    let code = match code.as_number() {
        Some(0.0) => return Ok(None),
        Some(n) if n.fract() == 0.0 && (100.0..=999.0).contains(&n) => n as u16,
        Some(_) => {
            return Err(MwError::bad_answer(format!(
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
    let headers = string_map(
        &get(&ro, js_string!("ResponseHeaders"), ctx)?,
        "Request.ReturnOverrides.ResponseHeaders",
        ctx,
    )?;
    let override_error = get(&ro, js_string!("OverrideError"), ctx)?.to_boolean();
    let mut text = |key: JsString, name: &str| -> Result<String, MwError> {
        let v = get(&ro, key, ctx)?;
        if v.is_null_or_undefined() {
            Ok(String::new())
        } else {
            string(&v, &format!("{field}.{name}"))
        }
    };
    let error = text(js_string!("ResponseError"), "ResponseError")?;
    let body = text(js_string!("ResponseBody"), "ResponseBody")?;
    Overrides {
        code,
        error,
        body,
        headers,
        override_error,
    }
    .respond(format)
    .map(Some)
}

/// `URL` replaces path and query: an origin-form `/path?query`, or an absolute
/// URL whose path and query are taken (Tyk parses it with `url.Parse`).
pub(crate) fn set_url(req: &mut MwRequest, url: &str) -> Result<(), MwError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| MwError::bad_answer(format!("Request.URL {url:?} is not a URL: {e}")))?;
    let path = uri.path();
    if !path.starts_with('/') {
        return Err(MwError::bad_answer(format!(
            "Request.URL {url:?} has no absolute path"
        )));
    }
    req.path = path.to_string();
    req.query = uri.query().map(str::to_string);
    Ok(())
}

/// Deletes, then sets, then appends query parameters, and re-encodes the
/// query as Go's `url.Values.Encode` does (keys sorted, values in order).
pub(crate) fn edit_query(
    req: &mut MwRequest,
    deletes: &[String],
    adds: &[(String, String)],
    extended: &[(String, Vec<String>)],
) {
    let mut values: Vec<(String, String)> = req
        .query
        .as_deref()
        .map(|q| super::goquery::parse(q.as_bytes()))
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
