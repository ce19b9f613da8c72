//! Building the `request` object for one call: its fields in Tyk's order
//! ([`fields!`], the one table), the lazy object-valued ones, and the
//! shape-preserving rule every call relies on.
//!
//! # One shape
//!
//! Every request object of a context has the same properties, in the same
//! order, with the same attributes: boa then gives them one shared shape,
//! and the inline caches of the script's property reads (`request.Headers`,
//! `request.SetHeaders[...]`) hit from the second call on. A call therefore
//! never adds, deletes or reconfigures a property of the object it hands
//! over: it only writes new values into the string fields a blank object
//! already has ([`build`]). The test `every_call_gets_one_shape` holds the
//! rule; `cargo bench -p gateway --bench js_call` shows what it is worth.

use boa_engine::builtins::object::OrdinaryObject;
use boa_engine::gc::{Finalize, Trace};
use boa_engine::object::builtins::{JsArray, JsFunction};
#[cfg(test)]
use boa_engine::object::shape::Shape;
use boa_engine::object::{NativeObject, ObjectInitializer};
use boa_engine::property::{Attribute, PropertyDescriptor, PropertyKey};
use boa_engine::{
    js_string, Context, JsData, JsNativeError, JsObject, JsResult, JsStr, JsString, JsValue,
    NativeFunction,
};
use http::{HeaderMap, Method};

use crate::heap::Uncounted;
use crate::middleware::MwRequest;

/// Declares the request object's fields, in Tyk's order (the order of its
/// one shape): adding a field is one line here.
///
/// - `lazy Name "Name" = init;`: an object-valued field built on first
///   access by `init(&Pending, &mut Context)` (see [`Lazy`]).
/// - `value Name "Name" = v;`: a string or boolean field that a blank object
///   holds as `v`; [`build`] writes the call's value where it differs.
///
/// The macro makes the [`Lazy`] enum (with its key, initialiser and
/// [`LAZY_COUNT`]) from the `lazy` lines and [`blank_fields`] from all of
/// them. (The key is written out because `js_string!` needs a literal to
/// make a static string.)
macro_rules! fields {
    ($($kind:ident $name:ident $key:literal = $init:expr;)*) => {
        fields!(@lazy [] $($kind $name $key = $init;)*);

        /// Gives a blank request object every field, in order.
        fn blank_fields(init: &mut ObjectInitializer<'_>, acc: &Accessors) {
            $(fields!(@field init acc $kind $name $key $init);)*
        }
    };
    (@field $init:ident $acc:ident lazy $name:ident $key:literal $value:expr) => {
        $init.accessor(
            name(js_string!($key)),
            Some($acc.get[Lazy::$name as usize].clone()),
            Some($acc.set[Lazy::$name as usize].clone()),
            Attribute::ENUMERABLE | Attribute::CONFIGURABLE,
        );
    };
    (@field $init:ident $acc:ident value $name:ident $key:literal $value:expr) => {
        $init.property(name(js_string!($key)), $value, Attribute::all());
    };
    // Collects the `lazy` lines, then makes the enum.
    (@lazy [$($acc:tt)*] lazy $name:ident $key:literal = $init:expr; $($rest:tt)*) => {
        fields!(@lazy [$($acc)* $name $key $init,] $($rest)*);
    };
    (@lazy [$($acc:tt)*] value $name:ident $key:literal = $init:expr; $($rest:tt)*) => {
        fields!(@lazy [$($acc)*] $($rest)*);
    };
    (@lazy [$($name:ident $key:literal $init:expr,)*]) => {
        /// The object-valued fields of `request`, built on first access.
        ///
        /// Most scripts touch one or two of them (the seed's writes
        /// `SetHeaders`), so building all of them per call (an object and
        /// an array per header, the query's arrays, six empty containers
        /// and `ReturnOverrides`) was the bulk of a call's allocations and
        /// of the GC work that followed. Each is an own, enumerable,
        /// configurable accessor of the request object, shared by every
        /// request object of the context ([`Accessors`]): the getter builds
        /// the value from the request data the object carries ([`Pending`])
        /// on first read and returns that same value after; the setter
        /// replaces it. So reads, writes, `delete`, `in`, `Object.keys`,
        /// `for..in`, spreading and `JSON.stringify` see what they would on
        /// the JSON-decoded object Tyk hands a script. What differs:
        /// `Object.getOwnPropertyDescriptor` shows an accessor, and a write
        /// to a field of a frozen request is ignored by the host rather than
        /// by the engine (no `TypeError` in strict code).
        ///
        /// (The accessor is not turned into a data property on first use:
        /// in boa 0.22 an accessor-to-data change re-derives the object's
        /// shape from the changed key on, uncached, which costs more than
        /// the lazy build saves.)
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Lazy {
            $(
                #[doc = concat!("`request.", $key, "`.")]
                $name,
            )*
        }

        /// How many [`Lazy`] fields there are.
        const LAZY_COUNT: usize = [$($key),*].len();

        impl Lazy {
            const ALL: [Lazy; LAZY_COUNT] = [$(Lazy::$name),*];

            /// The field's name in the request object.
            pub(super) fn key(self) -> JsString {
                match self {
                    $(Lazy::$name => js_string!($key),)*
                }
            }

            /// Builds the field's initial value, as Tyk's JSON would decode it.
            fn materialise(self, p: &Pending, ctx: &mut Context) -> JsResult<JsValue> {
                match self {
                    $(Lazy::$name => $init(p, ctx),)*
                }
            }
        }
    };
}

fields! {
    lazy Headers "Headers" = headers;
    lazy SetHeaders "SetHeaders" = empty_object;
    lazy DeleteHeaders "DeleteHeaders" = empty_array;
    value Body "Body" = js_string!();
    value Url "URL" = js_string!();
    lazy Params "Params" = params;
    lazy AddParams "AddParams" = empty_object;
    lazy ExtendedParams "ExtendedParams" = empty_object;
    lazy DeleteParams "DeleteParams" = empty_array;
    lazy ReturnOverrides "ReturnOverrides" = return_overrides;
    value IgnoreBody "IgnoreBody" = false;
    value Method "Method" = js_string!("GET");
    value RequestUri "RequestURI" = js_string!();
    value Scheme "Scheme" = js_string!("http");
}

fn headers(p: &Pending, ctx: &mut Context) -> JsResult<JsValue> {
    header_object(&p.headers, ctx).map(JsValue::from)
}

fn empty_object(_: &Pending, ctx: &mut Context) -> JsResult<JsValue> {
    Ok(plain(ctx).into())
}

fn empty_array(_: &Pending, ctx: &mut Context) -> JsResult<JsValue> {
    Ok(JsArray::new(ctx)?.into())
}

/// `Params` as Go's `url.Values`: name -> every value, in order.
fn params(p: &Pending, ctx: &mut Context) -> JsResult<JsValue> {
    let params = plain(ctx);
    if let Some(q) = &p.query {
        let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
        for (k, v) in crate::js::goquery::parse(q.as_bytes()) {
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
    Ok(params.into())
}

/// `ReturnOverrides` as Tyk sends it: code 0 (no override), empty texts.
fn return_overrides(_: &Pending, ctx: &mut Context) -> JsResult<JsValue> {
    let response_headers = plain(ctx);
    Ok(ObjectInitializer::with_native_data(OrdinaryObject, ctx)
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
        .into())
}

/// The getter and setter of each [`Lazy`] field, made once per context and
/// shared by every request object built in it (so every request object has
/// the same shape and no function object is made per call).
pub(crate) struct Accessors {
    get: [JsFunction; LAZY_COUNT],
    set: [JsFunction; LAZY_COUNT],
    /// The host's `JSON.stringify`, as installed (`json::to_text`): how
    /// the answer's session fields are encoded for their checks.
    pub(super) stringify: JsObject,
    /// Blank request objects no script has seen, used once each.
    spares: Vec<JsObject>,
}

/// Request objects made ahead, in batches of this many (see [`Accessors::spare`]).
const SPARES: usize = 16;

/// What [`Accessors::state`] found for a lazy field of the built request.
pub(super) enum FieldState {
    /// Never read nor written: it holds its empty initial value.
    Untouched,
    /// Still the host's accessor, holding this value.
    Held(JsValue),
    /// Replaced by the script (`delete`, `Object.defineProperty`): read it.
    Replaced,
}

impl Accessors {
    pub(crate) fn new(stringify: JsObject, ctx: &mut Context) -> Accessors {
        let get = std::array::from_fn(|i| {
            let field = Lazy::ALL[i];
            NativeFunction::from_copy_closure(move |this, _, ctx| {
                lazy_get::<Pending>(field, this, ctx)
            })
            .to_js_function(ctx.realm())
        });
        let set = std::array::from_fn(|i| {
            let field = Lazy::ALL[i];
            NativeFunction::from_copy_closure(move |this, args, ctx| {
                lazy_set::<Pending>(field, this, args, ctx)
            })
            .to_js_function(ctx.realm())
        });
        Accessors {
            get,
            set,
            stringify,
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

    /// The state of `f` on a built request `obj`.
    ///
    /// The field's getter is looked up on every call, even when the object
    /// kept its built shape: a shape records keys and attributes, not
    /// values, so `Object.defineProperty(request, "ReturnOverrides", {get:
    /// ...})` (an accessor for an accessor, same attributes) leaves the
    /// shape as built. Trusting the shape there read the host's record
    /// instead of the script's getter, and a `ReturnOverrides` that denied
    /// the request was never seen (the request was proxied).
    pub(super) fn state(&self, obj: &JsObject, f: Lazy) -> FieldState {
        let ours = obj
            .borrow()
            .properties()
            .get(&name(f.key()))
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
    /// A clone of the request's map: its values share the I/O thread's
    /// buffers, so it is kept out of the heap count (`heap.rs`).
    headers: Uncounted<HeaderMap>,
    query: Option<String>,
    /// Each lazy field's value once read or written.
    values: [Option<JsValue>; LAZY_COUNT],
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

impl LazyData for Pending {
    type Field = Lazy;

    fn key(f: Lazy) -> JsString {
        f.key()
    }

    fn slot(&mut self, f: Lazy) -> &mut Option<JsValue> {
        &mut self.values[f as usize]
    }

    fn materialise(&self, f: Lazy, ctx: &mut Context) -> JsResult<JsValue> {
        f.materialise(self, ctx)
    }
}

/// The host data an object carries for its lazy fields (the request's
/// [`Pending`], the response's headers): each field's value once read or
/// written, and how to build it on first read. [`lazy_get`] and
/// [`lazy_set`] are the fields' accessors.
pub(crate) trait LazyData: NativeObject + Sized {
    /// Names a lazy field.
    type Field: Copy;
    /// The field's property key.
    fn key(f: Self::Field) -> JsString;
    /// The field's value once read or written.
    fn slot(&mut self, f: Self::Field) -> &mut Option<JsValue>;
    /// Builds the field's initial value.
    fn materialise(&self, f: Self::Field, ctx: &mut Context) -> JsResult<JsValue>;
}

/// The object carrying the host's data `T`: `this`, or the prototype `this`
/// inherits the field from (`Object.create(request)`).
fn carrier<T: NativeObject>(this: &JsValue) -> Option<JsObject> {
    let mut obj = this.as_object()?;
    loop {
        if obj.downcast_ref::<T>().is_some() {
            return Some(obj);
        }
        obj = obj.prototype()?;
    }
}

/// A lazy field's getter: the value held, else the one built now (and held).
///
/// Read through an object that neither is nor inherits from the object
/// carrying the data, it throws a `TypeError`. That is a Proxy around the
/// request (`new Proxy(request, {})`: the getter runs with the Proxy as
/// `this`, and boa gives no way to reach a Proxy's target) or the getter
/// taken out with `Object.getOwnPropertyDescriptor` and called on something
/// else. Answering `undefined` there made a Proxy'd request's
/// `ReturnOverrides` and `SetHeaders` read as empty: a script that denied
/// the request had it proxied. The throw fails the call instead (500).
pub(crate) fn lazy_get<T: LazyData>(
    f: T::Field,
    this: &JsValue,
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let Some(owner) = carrier::<T>(this) else {
        return Err(JsNativeError::typ()
            .with_message(format!(
                "{} can only be read on the object the host built (or an object inheriting from it), not through a Proxy",
                T::key(f).to_std_string_lossy()
            ))
            .into());
    };
    let held = owner
        .downcast_mut::<T>()
        .and_then(|mut d| d.slot(f).clone());
    if let Some(v) = held {
        return Ok(v);
    }
    let value = {
        let data = owner.downcast_ref::<T>().expect("checked by carrier");
        data.materialise(f, ctx)?
    };
    if let Some(mut d) = owner.downcast_mut::<T>() {
        *d.slot(f) = Some(value.clone());
    }
    Ok(value)
}

/// A lazy field's setter: assignment, as on a plain object. On the object
/// carrying the data the value is held for the getter (unless the object
/// was frozen: the write is then ignored, as sloppy code would see it); on
/// an object inheriting from it, the receiver gets its own data property.
pub(crate) fn lazy_set<T: LazyData>(
    f: T::Field,
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let Some(obj) = this.as_object() else {
        return Ok(JsValue::undefined());
    };
    let value = args.first().cloned().unwrap_or_default();
    if obj.downcast_ref::<T>().is_none() {
        obj.create_data_property(T::key(f), value, ctx)?;
        return Ok(JsValue::undefined());
    }
    let frozen = obj
        .borrow()
        .properties()
        .get(&name(T::key(f)))
        .is_some_and(|d| d.configurable() == Some(false));
    if !frozen {
        if let Some(mut d) = obj.downcast_mut::<T>() {
            *d.slot(f) = Some(value);
        }
    }
    Ok(JsValue::undefined())
}

/// `headers` as Go's `http.Header` decodes into JS: each canonical name to
/// the array of its values (the request's and the response's `Headers`).
pub(crate) fn header_object(headers: &http::HeaderMap, ctx: &mut Context) -> JsResult<JsObject> {
    let object = plain(ctx);
    // One buffer for every name's canonical form, and each string made
    // from its bytes: a `String` per name and per value, then copied into
    // a `JsString`, was two allocations where one does.
    let mut key = String::new();
    for name in headers.keys() {
        let values = headers
            .get_all(name)
            .iter()
            .map(|v| JsValue::from(header_text(v.as_bytes())));
        let arr = JsArray::from_iter(values, ctx);
        key.clear();
        gateway_wire::header::push_canonical_header_key(&mut key, name.as_str());
        // A header name is ASCII, so its bytes are its Latin-1 text.
        let key = JsString::from(JsStr::latin1(key.as_bytes()));
        object.create_data_property_or_throw(key, arr, ctx)?;
    }
    Ok(object)
}

/// A header value as a script sees it: its bytes when ASCII (Latin-1 text
/// as they are), else decoded from UTF-8 with bad bytes replaced, as
/// before.
fn header_text(v: &[u8]) -> JsString {
    if v.is_ascii() {
        JsString::from(JsStr::latin1(v))
    } else {
        JsString::from(String::from_utf8_lossy(v).as_ref())
    }
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
    pub(super) body: JsString,
    pub(super) url: JsString,
    /// The object's shape as built, when shared (boa gives objects built
    /// alike one immutable shape). Held, so its address cannot be reused.
    /// Only the shape rule's test reads it: a shape that stays as built
    /// says no property was added, deleted or reconfigured, but not that
    /// no accessor was replaced by another (see [`Accessors::state`]).
    #[cfg(test)]
    shape: Option<Shape>,
}

#[cfg(test)]
impl Built {
    /// True when the request object still has the shape it was built with.
    pub(super) fn unchanged(&self) -> bool {
        self.shape
            .as_ref()
            .is_some_and(|s| s.to_addr_usize() == self.object.borrow().shape().to_addr_usize())
    }
}

fn string_array<I: IntoIterator<Item = String>>(items: I, ctx: &mut Context) -> JsArray {
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
    let url = match req.query() {
        None => JsString::from(req.path()),
        Some(_) => JsString::from(req.path_and_query()),
    };
    let object = acc.spare(ctx);
    if let Some(mut p) = object.downcast_mut::<Pending>() {
        p.headers = Uncounted::make(|| req.headers.clone());
        p.query = req.query().map(str::to_string);
    }
    // Each key exists with these attributes: a value write, no new shape.
    let write = |key: JsString, value: JsString| put_data(&object, name(key), value);
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
    #[cfg(test)]
    let shape = Some(object.borrow().shape().clone()).filter(Shape::is_shared);
    Ok(Built {
        #[cfg(test)]
        shape,
        object,
        body,
        url,
    })
}

/// The property key of `key`, a name the host gives literally (a field of
/// the request, of the answer, of the host object): never an array index,
/// so it is a string key as it stands. `PropertyKey::from` would check each
/// time whether it reads as an index (through the string's vtable, for the
/// static strings these are): ~1,100 instructions a call over the names
/// the host reads and writes.
pub(crate) fn name(key: JsString) -> PropertyKey {
    debug_assert!(
        matches!(PropertyKey::from(key.clone()), PropertyKey::String(_)),
        "{} reads as an array index",
        key.to_std_string_lossy()
    );
    PropertyKey::String(key)
}

/// Puts a writable, enumerable, configurable data property into `object`'s
/// table, as `CreateDataProperty` would on an object that cannot refuse it
/// (an ordinary, extensible one), without its checks: a key it has keeps
/// its place and gets the value.
pub(crate) fn put_data(object: &JsObject, key: impl Into<PropertyKey>, value: impl Into<JsValue>) {
    object.insert_property(
        key,
        PropertyDescriptor::builder()
            .value(value)
            .writable(true)
            .enumerable(true)
            .configurable(true),
    );
}

/// A fresh request object: every field in Tyk's order ([`fields!`]), the
/// string fields empty but `Method` (`GET`), no request data yet.
fn blank(acc: &Accessors, ctx: &mut Context) -> JsObject {
    let pending = Pending {
        headers: Uncounted::default(),
        query: None,
        values: Default::default(),
    };
    let mut init = ObjectInitializer::with_native_data(pending, ctx);
    blank_fields(&mut init, acc);
    init.build()
}

/// The original request target as a JS string, sharing `url` when equal.
fn request_uri(req: &MwRequest, url: &JsString) -> JsString {
    let original = req
        .request_uri
        .path_and_query()
        .map_or("/", |pq| pq.as_str());
    let current_path = original.split('?').next().unwrap_or(original);
    let current_query = original.split_once('?').map(|(_, q)| q);
    if current_path == req.path() && current_query == req.query() {
        url.clone()
    } else {
        JsString::from(original)
    }
}
