//! The property names the host reads from a script's answer, made atoms
//! once per context, and the few raw reads that use them.
//!
//! rquickjs turns a `&str` key into an atom on every read (a hash and a
//! table lookup, then a free); a persistent context keeps these for its
//! lifetime instead, so reading the answer is one `JS_GetProperty` per field.
//! A `fresh` context makes them per call (its heap is put back before each).

use http::header::{HeaderName, HeaderValue};
use rquickjs::{qjs, Array, Ctx, Object, Value};

use super::request::Table;

/// A field of the answer the host reads, in the order it reads them.
#[derive(Clone, Copy)]
pub(crate) enum Key {
    Request,
    ReturnOverrides,
    IgnoreBody,
    Body,
    Url,
    DeleteHeaders,
    SetHeaders,
    DeleteParams,
    AddParams,
    ExtendedParams,
    SessionMeta,
    Session,
    AuthValue,
}

/// Each [`Key`]'s JS name, in the enum's order.
const NAMES: [&str; 13] = [
    "Request",
    "ReturnOverrides",
    "IgnoreBody",
    "Body",
    "URL",
    "DeleteHeaders",
    "SetHeaders",
    "DeleteParams",
    "AddParams",
    "ExtendedParams",
    "SessionMeta",
    "Session",
    "AuthValue",
];

/// One context's atoms for [`NAMES`]. Freed on drop, through the runtime,
/// which must still be alive (`api.rs` drops this before it).
pub(crate) struct Keys {
    rt: *mut qjs::JSRuntime,
    atoms: [qjs::JSAtom; NAMES.len()],
    /// `persistent` contexts: the request objects' class (`request.rs`).
    request: Option<Box<Table>>,
    /// `SetHeaders` keys met before, as header names: each atom holds a
    /// reference (so it cannot be freed and its number reused for another
    /// name). A script sets the same few headers call after call; parsing
    /// the name (its text out of QuickJS, lowercased, allocated) was a
    /// tenth of a call. Bounded: names past [`NAMES_KEPT`] are parsed.
    names: std::cell::RefCell<Vec<(qjs::JSAtom, HeaderName)>>,
    /// `SetHeaders` values met before, by the JS string's identity: each
    /// string holds a reference, so while it is here no other string can
    /// take its address (JS strings never change). A script's constant
    /// value (`"hello-from-jsvm"`) is one string, call after call, and
    /// copying it out of QuickJS into a new header value was another
    /// tenth. Bounded: the first [`VALUES_KEPT`] values up to
    /// [`VALUE_KEPT_LEN`] bytes; others are converted each time.
    values: std::cell::RefCell<Vec<(qjs::JSValue, HeaderValue)>>,
}

/// How many header names [`Keys`] keeps.
const NAMES_KEPT: usize = 32;

/// How many header values [`Keys`] keeps, and up to what length.
const VALUES_KEPT: usize = 16;
const VALUE_KEPT_LEN: usize = 256;

impl Keys {
    /// Makes the atoms in `ctx`'s runtime.
    pub(crate) fn new(ctx: &Ctx<'_>) -> rquickjs::Result<Keys> {
        let raw = ctx.as_raw().as_ptr();
        // SAFETY: `raw` is the live context; each atom made here is owned by
        // `Keys` and freed once, in `drop`, with the runtime it belongs to.
        unsafe {
            let mut keys = Keys {
                rt: qjs::JS_GetRuntime(raw),
                atoms: [qjs::JS_ATOM_NULL; NAMES.len()],
                request: None,
                names: Default::default(),
                values: Default::default(),
            };
            for (atom, name) in keys.atoms.iter_mut().zip(NAMES) {
                *atom = qjs::JS_NewAtomLen(raw, name.as_ptr().cast(), name.len() as _);
                if *atom == qjs::JS_ATOM_NULL {
                    return Err(rquickjs::Error::Exception);
                }
            }
            Ok(keys)
        }
    }

    /// [`Keys::new`], and the request objects' class with what `host.js`'s
    /// `call` carries: the container maker `make`, the `dispatch` array and
    /// `spec` (a persistent context: registering a class per call, as a
    /// `fresh` context would, would grow the runtime).
    pub(crate) fn persistent<'js>(ctx: &Ctx<'js>, call: &Object<'js>) -> rquickjs::Result<Keys> {
        let mut keys = Keys::new(ctx)?;
        let make: Value = call.get("make")?;
        let spec: Value = call.get("spec")?;
        let dispatch: Array = call.get("dispatch")?;
        let entries = dispatch
            .iter::<Value>()
            .collect::<rquickjs::Result<Vec<_>>>()?;
        let objects: Array = dispatch.as_object().get("objects")?;
        let objects = objects
            .iter::<Value>()
            .collect::<rquickjs::Result<Vec<_>>>()?;
        let raw: Vec<_> = entries.iter().map(Value::as_raw).collect();
        let objects: Vec<_> = objects.iter().map(Value::as_raw).collect();
        // SAFETY: the live context and its values (borrowed: the table
        // takes references of its own).
        let table = unsafe {
            Table::new(
                ctx.as_raw().as_ptr(),
                make.as_raw(),
                (&raw, &objects),
                spec.as_raw(),
            )
        };
        keys.request = Some(table.map_err(|()| rquickjs::Error::Exception)?);
        Ok(keys)
    }

    /// The request objects' class, in a persistent context.
    pub(crate) fn request(&self) -> Option<&Table> {
        self.request.as_deref()
    }

    /// `obj[key]` (getters run; a throw is `Error::Exception`, pending in
    /// `ctx`). `obj` must be an object.
    pub(crate) fn get<'js>(
        &self,
        ctx: &Ctx<'js>,
        obj: &Value<'js>,
        key: Key,
    ) -> rquickjs::Result<Value<'js>> {
        // SAFETY: the atom is alive (owned by `self`, made in this runtime);
        // the returned value's reference is handed to the `Value`.
        unsafe {
            let v = qjs::JS_GetProperty(
                ctx.as_raw().as_ptr(),
                obj.as_raw(),
                self.atoms[key as usize],
            );
            if qjs::JS_IsException(v) {
                return Err(rquickjs::Error::Exception);
            }
            Ok(Value::from_raw(ctx.clone(), v))
        }
    }
}

impl Keys {
    /// The key `atom` (of this context) as a header name; `None` when it
    /// is not one; an error (`Error::Exception`, pending in `ctx`) when
    /// QuickJS cannot give its text (out of memory).
    pub(crate) fn header_name(
        &self,
        ctx: &Ctx<'_>,
        atom: qjs::JSAtom,
    ) -> rquickjs::Result<Option<HeaderName>> {
        let mut names = self.names.borrow_mut();
        if let Some((_, name)) = names.iter().find(|(a, _)| *a == atom) {
            return Ok(Some(name.clone()));
        }
        let raw = ctx.as_raw().as_ptr();
        let mut len = 0;
        // SAFETY: the live context and one of its atoms; the C string is
        // freed once; a kept atom holds a reference of its own, freed in
        // `drop`.
        unsafe {
            let s = qjs::JS_AtomToCStringLen(raw, &mut len, atom);
            let name = c_string_bytes(ctx, s, len as usize, |b| HeaderName::from_bytes(b).ok())?;
            let Some(name) = name else {
                return Ok(None);
            };
            if names.len() < NAMES_KEPT {
                names.push((qjs::JS_DupAtom(raw, atom), name.clone()));
            }
            Ok(Some(name))
        }
    }
}

impl Keys {
    /// The JS string `s` as a header value: an error (`Error::Exception`,
    /// pending in `ctx`) when QuickJS cannot give its text (out of
    /// memory), `Ok(Err)` when a header cannot carry it (CR, LF,
    /// another control character: [`HeaderValue::from_str`], as on every
    /// path). A lone surrogate is U+FFFD, as Tyk's decoder reads the
    /// `\ud800` that `JSON.stringify` writes for it (and as boa's host).
    pub(crate) fn header_value(
        &self,
        ctx: &Ctx<'_>,
        s: &rquickjs::String<'_>,
    ) -> rquickjs::Result<Result<HeaderValue, ()>> {
        let v = s.as_raw();
        // SAFETY: `v` is a string: its pointer is its identity.
        let ptr = unsafe { qjs::JS_VALUE_GET_PTR(v) };
        let mut values = self.values.borrow_mut();
        // SAFETY: each kept value is a string (reading its pointer).
        if let Some((_, hv)) = values
            .iter()
            .find(|(k, _)| unsafe { qjs::JS_VALUE_GET_PTR(*k) } == ptr)
        {
            return Ok(Ok(hv.clone()));
        }
        let raw = ctx.as_raw().as_ptr();
        let mut len = 0;
        // SAFETY: the live context and one of its strings; the C string is
        // freed once; a kept string holds a reference of its own, freed in
        // `drop`.
        unsafe {
            let p = qjs::JS_ToCStringLen(raw, &mut len, v);
            let parsed = c_string_bytes(ctx, p, len, |b| {
                HeaderValue::from_str(&super::engine::wtf8_lossy(b)).map_err(drop)
            })?;
            if let Ok(hv) = &parsed {
                if values.len() < VALUES_KEPT && len <= VALUE_KEPT_LEN {
                    values.push((qjs::JS_DupValue(raw, v), hv.clone()));
                }
            }
            Ok(parsed)
        }
    }
}

/// `f` of the bytes of the C string quickjs just made of a string or an
/// atom (`p`, `len` bytes), the string freed after; `Error::Exception`
/// when quickjs could not make it (out of memory: its exception is left
/// pending, for the caller to report).
///
/// # Safety
/// `p` and `len` come from `JS_ToCStringLen` or `JS_AtomToCStringLen` on
/// the live context `ctx`, and `p` is not used after.
unsafe fn c_string_bytes<R>(
    ctx: &Ctx<'_>,
    p: *const std::ffi::c_char,
    len: usize,
    f: impl FnOnce(&[u8]) -> R,
) -> rquickjs::Result<R> {
    if p.is_null() {
        return Err(rquickjs::Error::Exception);
    }
    // SAFETY: per the contract, `len` bytes at `p`, freed once here.
    unsafe {
        let out = f(std::slice::from_raw_parts(p.cast::<u8>(), len));
        qjs::JS_FreeCString(ctx.as_raw().as_ptr(), p);
        Ok(out)
    }
}

impl Keys {
    /// [`Keys::get`], `None` when the value is undefined (no `Value` made).
    pub(crate) fn get_defined<'js>(
        &self,
        ctx: &Ctx<'js>,
        obj: &Value<'js>,
        key: Key,
    ) -> rquickjs::Result<Option<Value<'js>>> {
        // SAFETY: as in `get`; undefined holds no reference.
        unsafe {
            let v = qjs::JS_GetProperty(
                ctx.as_raw().as_ptr(),
                obj.as_raw(),
                self.atoms[key as usize],
            );
            if qjs::JS_IsException(v) {
                return Err(rquickjs::Error::Exception);
            }
            if qjs::JS_VALUE_GET_TAG(v) == qjs::JS_TAG_UNDEFINED {
                return Ok(None);
            }
            Ok(Some(Value::from_raw(ctx.clone(), v)))
        }
    }

    /// What Tyk's JSON encoding of an answer carries of `obj`'s field
    /// `key`: the value of an own enumerable property (a getter runs), else
    /// `None` (`JSON.stringify` drops inherited and non-enumerable ones,
    /// and undefined ones, so Tyk's decoder never sees them). A Proxy's
    /// traps run. `obj` is an object.
    pub(crate) fn get_json_field<'js>(
        &self,
        ctx: &Ctx<'js>,
        obj: &Value<'js>,
        key: Key,
    ) -> rquickjs::Result<Option<Value<'js>>> {
        let raw = ctx.as_raw().as_ptr();
        let atom = self.atoms[key as usize];
        let mut desc = std::mem::MaybeUninit::<qjs::JSPropertyDescriptor>::uninit();
        // SAFETY: `obj` is a value of this context and `atom` an atom of its
        // runtime; on 1 the descriptor is filled with new references (value,
        // getter, setter; undefined for those it lacks), each freed or
        // handed over once below.
        unsafe {
            let found = qjs::JS_GetOwnProperty(raw, desc.as_mut_ptr(), obj.as_raw(), atom);
            if found < 0 {
                return Err(rquickjs::Error::Exception);
            }
            if found == 0 {
                return Ok(None);
            }
            let desc = desc.assume_init();
            let enumerable = desc.flags & qjs::JS_PROP_ENUMERABLE as std::ffi::c_int != 0;
            let accessor = desc.flags & qjs::JS_PROP_GETSET as std::ffi::c_int != 0;
            qjs::JS_FreeValue(raw, desc.getter);
            qjs::JS_FreeValue(raw, desc.setter);
            if !enumerable || accessor {
                qjs::JS_FreeValue(raw, desc.value);
            }
            if !enumerable {
                return Ok(None);
            }
            if accessor {
                return self.get_defined(ctx, obj, key);
            }
            if qjs::JS_VALUE_GET_TAG(desc.value) == qjs::JS_TAG_UNDEFINED {
                return Ok(None);
            }
            Ok(Some(Value::from_raw(ctx.clone(), desc.value)))
        }
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        for (atom, _) in self.names.take() {
            // SAFETY: a reference taken in `header_name`, freed once here.
            unsafe { qjs::JS_FreeAtomRT(self.rt, atom) };
        }
        for (v, _) in self.values.take() {
            // SAFETY: a reference taken in `header_value`, freed once here.
            unsafe { qjs::JS_FreeValueRT(self.rt, v) };
        }
        self.request = None;
        for &atom in &self.atoms {
            if atom != qjs::JS_ATOM_NULL {
                // SAFETY: made by `new` in this runtime, freed once here.
                unsafe { qjs::JS_FreeAtomRT(self.rt, atom) };
            }
        }
    }
}

/// `obj`'s own enumerable string keys (`Object.keys` order), as QuickJS's
/// table: freed when dropped.
struct OwnKeys {
    raw: *mut qjs::JSContext,
    tab: *mut qjs::JSPropertyEnum,
    len: u32,
}

impl OwnKeys {
    fn of(ctx: &Ctx<'_>, obj: &Value<'_>) -> rquickjs::Result<OwnKeys> {
        let raw = ctx.as_raw().as_ptr();
        let mut keys = OwnKeys {
            raw,
            tab: std::ptr::null_mut(),
            len: 0,
        };
        let flags = (qjs::JS_GPN_STRING_MASK | qjs::JS_GPN_ENUM_ONLY) as i32;
        // SAFETY: `raw` is the live context and `obj` a value of it; on
        // success the table is ours (freed in `drop`), on failure it is
        // left null.
        let r = unsafe {
            qjs::JS_GetOwnPropertyNames(raw, &mut keys.tab, &mut keys.len, obj.as_raw(), flags)
        };
        if r < 0 {
            keys.len = 0;
            return Err(rquickjs::Error::Exception);
        }
        Ok(keys)
    }

    fn atoms(&self) -> impl Iterator<Item = qjs::JSAtom> + '_ {
        let props = if self.tab.is_null() {
            &[][..]
        } else {
            // SAFETY: QuickJS's table of `len` entries, alive until drop.
            unsafe { std::slice::from_raw_parts(self.tab, self.len as usize) }
        };
        props.iter().map(|p| p.atom)
    }
}

impl Drop for OwnKeys {
    fn drop(&mut self) {
        if !self.tab.is_null() {
            // SAFETY: the table `of` got, freed once.
            unsafe { qjs::JS_FreePropertyEnum(self.raw, self.tab, self.len) };
        }
    }
}

/// `obj`'s own enumerable string keys with their values (what
/// `JSON.stringify`, and so Tyk's decoder, would see), reading each value
/// by the atom the enumeration gave, not by its name made an atom again.
pub(crate) fn own_entries<'js>(
    ctx: &Ctx<'js>,
    obj: &Value<'js>,
) -> rquickjs::Result<Vec<(String, Value<'js>)>> {
    let keys = OwnKeys::of(ctx, obj)?;
    let raw = keys.raw;
    let mut out = Vec::with_capacity(keys.len as usize);
    for atom in keys.atoms() {
        // SAFETY: `atom` is alive (in the table); the returned value's
        // reference is handed to the `Value`.
        unsafe {
            let v = qjs::JS_GetProperty(raw, obj.as_raw(), atom);
            if qjs::JS_IsException(v) {
                return Err(rquickjs::Error::Exception);
            }
            let value = Value::from_raw(ctx.clone(), v);
            let key = atom_string(raw, atom).ok_or(rquickjs::Error::Exception)?;
            out.push((key, value));
        }
    }
    Ok(out)
}

/// `obj`'s own enumerable string keys as atoms (alive while the table
/// is), for a reader that reads each value by its atom ([`AtomTable::get`])
/// and needs the text only for an error.
pub(crate) fn own_keys(ctx: &Ctx<'_>, obj: &Value<'_>) -> rquickjs::Result<AtomTable> {
    OwnKeys::of(ctx, obj).map(AtomTable)
}

/// The keys [`own_keys`] read, in order.
pub(crate) struct AtomTable(OwnKeys);

impl AtomTable {
    pub(crate) fn atoms(&self) -> impl Iterator<Item = qjs::JSAtom> + '_ {
        self.0.atoms()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len as usize
    }

    /// `obj[atom]` (a getter runs; a throw is `Error::Exception`, pending
    /// in `ctx`), `atom` one of this table's.
    pub(crate) fn get<'js>(
        &self,
        ctx: &Ctx<'js>,
        obj: &Value<'js>,
        atom: qjs::JSAtom,
    ) -> rquickjs::Result<Value<'js>> {
        // SAFETY: `atom` is alive (in the table); the returned value's
        // reference is handed to the `Value`.
        unsafe {
            let v = qjs::JS_GetProperty(self.0.raw, obj.as_raw(), atom);
            if qjs::JS_IsException(v) {
                return Err(rquickjs::Error::Exception);
            }
            Ok(Value::from_raw(ctx.clone(), v))
        }
    }

    /// The text of one of these atoms, for an error's message: empty when
    /// QuickJS cannot give it (out of memory; its exception dropped, as
    /// the error being made says what went wrong).
    pub(crate) fn text(&self, atom: qjs::JSAtom) -> String {
        // SAFETY: the table's live context; the atom is alive in the table;
        // the exception taken is freed once.
        unsafe {
            atom_string(self.0.raw, atom).unwrap_or_else(|| {
                qjs::JS_FreeValue(self.0.raw, qjs::JS_GetException(self.0.raw));
                String::new()
            })
        }
    }
}

/// An atom's text (a lone surrogate becomes U+FFFD); `None` when QuickJS
/// cannot make it (out of memory: its exception is pending).
///
/// # Safety
/// `raw` is a live context and `atom` one of its atoms.
unsafe fn atom_string(raw: *mut qjs::JSContext, atom: qjs::JSAtom) -> Option<String> {
    let mut len = 0;
    // SAFETY: as the caller promised; the C string is freed once.
    unsafe {
        let s = qjs::JS_AtomToCStringLen(raw, &mut len, atom);
        if s.is_null() {
            return None;
        }
        let bytes = std::slice::from_raw_parts(s.cast::<u8>(), len as usize);
        let text = super::engine::wtf8_lossy(bytes).into_owned();
        qjs::JS_FreeCString(raw, s);
        Some(text)
    }
}

/// True when `obj` has no own enumerable string key (`Object.keys(obj)`
/// is empty); no getter runs.
pub(crate) fn no_own_keys(ctx: &Ctx<'_>, obj: &Value<'_>) -> rquickjs::Result<bool> {
    Ok(OwnKeys::of(ctx, obj)?.len == 0)
}
