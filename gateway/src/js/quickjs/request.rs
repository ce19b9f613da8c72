//! The request object of a `persistent` call: one exotic QuickJS object
//! whose fields live in Rust slots, not in a property table.
//!
//! Building Tyk's request as an object literal defined ~23 properties per
//! call (the fields, `ReturnOverrides`' five, the empty containers), a
//! quarter of a call that only sets one header. Here a call makes one object
//! ([`Table::make`]); each field is a slot holding its value, or a *lazy*
//! container (`Headers`, `SetHeaders`, `Params`, `ReturnOverrides`, ...)
//! made on the first read of its descriptor and kept from then on. Reading
//! the answer, the host reads the slots directly ([`fields`]): a container
//! never made was never touched, so it is empty.
//!
//! It behaves as an ordinary object with those own properties, in Tyk's
//! order: the class's exotic handlers (`get_own_property`,
//! `get_own_property_names`, `delete_property`, `define_own_property`)
//! implement an ordinary object's rules on the slots, descriptors included
//! (a frozen request stays frozen, a getter a script defines is called).
//! The first *new* key (an unknown name, a symbol, a field deleted and
//! defined again) moves every slot into the object's own property table,
//! in order, and the object is ordinary from then on, so key order stays
//! what it would be. A request kept in a global keeps its own slots: the
//! next call gets a new object, the old one still shows its own request.

use http::HeaderMap;
use rquickjs::qjs::{self, JSValue};

/// The fields, in Tyk's order (`MiniRequestObject`).
pub(crate) const FIELDS: [&str; 14] = [
    "Headers",
    "SetHeaders",
    "DeleteHeaders",
    "Body",
    "URL",
    "Params",
    "AddParams",
    "ExtendedParams",
    "DeleteParams",
    "ReturnOverrides",
    "IgnoreBody",
    "Method",
    "RequestURI",
    "Scheme",
];

/// A field's place in [`FIELDS`] (and in [`Slots::slots`]).
/// Every field is named for its place, though the host reads only some.
#[derive(Clone, Copy)]
#[allow(dead_code)]
pub(crate) enum Field {
    Headers = 0,
    SetHeaders,
    DeleteHeaders,
    Body,
    Url,
    Params,
    AddParams,
    ExtendedParams,
    DeleteParams,
    ReturnOverrides,
    IgnoreBody,
    Method,
    RequestUri,
    Scheme,
}

const C: u8 = qjs::JS_PROP_CONFIGURABLE as u8;
const W: u8 = qjs::JS_PROP_WRITABLE as u8;
const E: u8 = qjs::JS_PROP_ENUMERABLE as u8;
const CWE: u8 = C | W | E;

/// One field of one request object. Values are owned (one reference each).
enum Slot {
    /// Deleted.
    Absent,
    /// `Headers` not read yet: made from the request's headers the host
    /// lends for the call ([`Slots::headers`]), or, for an object still
    /// alive after it, from their text kept then ([`Table::detach`]).
    Pending,
    /// A container not made yet, with what it is made from (the header
    /// text for `Headers`, the query pairs or null for `Params`, else
    /// undefined); a plain writable, enumerable, configurable field.
    Lazy(JSValue),
    Data {
        value: JSValue,
        flags: u8,
    },
    Accessor {
        get: JSValue,
        set: JSValue,
        flags: u8,
    },
}

/// A request object's state (its opaque).
struct Slots {
    /// The context's table; alive whenever a handler can run (see [`Table`]).
    table: *const Table,
    slots: [Slot; FIELDS.len()],
    /// The request's headers, lent for the call (null after it).
    headers: *const HeaderMap,
    /// Every slot moved into the object's own properties: the handlers
    /// step aside.
    plain: bool,
}

/// What one context's request objects share: the class, the field names
/// as atoms, `Object.prototype`, the host's container maker. Owned by the
/// context's `Keys`, which is dropped before the context and the runtime;
/// request objects freed later (at runtime teardown) only run the
/// finalizer, which does not read it.
pub(crate) struct Table {
    rt: *mut qjs::JSRuntime,
    class: qjs::JSClassID,
    atoms: [qjs::JSAtom; FIELDS.len()],
    proto: JSValue,
    /// `host.js`'s `make(field, data)`: `Headers`, `Params` and
    /// `ReturnOverrides` as Tyk's request has them.
    make: JSValue,
    /// `host.js`'s dispatch array: entry `i` is `dispatch[i](request, spec)`.
    dispatch: Vec<JSValue>,
    /// Each entry's object (`mw[i]` in the dispatch), or undefined: a
    /// request-phase call is `objects[i].ProcessRequest(request, {},
    /// spec)` made here, one interpreter frame fewer than through the
    /// dispatch function (which serves where the object is missing, to
    /// throw what it would).
    objects: Vec<JSValue>,
    /// `"ProcessRequest"` as an atom.
    process: qjs::JSAtom,
    /// This API's `spec` object.
    spec: JSValue,
    /// `"http"`, made once.
    scheme: JSValue,
    /// The methods a request most often has, and `""`, made once.
    methods: [(&'static str, JSValue); METHODS.len()],
    empty: JSValue,
    /// Objects of the answers' usual shapes, `{Request}`, `{Request,
    /// SessionMeta}` (`ReturnData`) and `{Request, Session}`
    /// (`ReturnAuthData`), kept for the context's life. QuickJS frees a
    /// shape with its last object and shares a live one: without these,
    /// every call's answer literal made its shapes again (a clone, a hash
    /// insert and a free each).
    shapes: [JSValue; 3],
    /// The last call's `SetHeaders` container, kept until the next call
    /// has made its own, for the same reason: its keys' shapes (the same
    /// headers, call after call) stay alive to be shared.
    kept: std::cell::Cell<JSValue>,
    /// The last call's `URL` string and its text (up to [`URL_KEPT_LEN`]
    /// bytes): a route's requests mostly share a path, and making the
    /// string (an allocation, a copy, a free after) was a tenth of the
    /// host's work on a call. JS strings never change, so sharing one is
    /// sharing its text.
    url: std::cell::RefCell<(String, JSValue)>,
}

/// The longest `URL` text [`Table::url`] keeps.
const URL_KEPT_LEN: usize = 256;

/// The methods whose strings are made once per context.
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"];

struct Exotic(qjs::JSClassExoticMethods);
// SAFETY: plain function pointers, never written after initialisation.
unsafe impl Sync for Exotic {}

static EXOTIC: Exotic = Exotic(qjs::JSClassExoticMethods {
    get_own_property: Some(get_own_property),
    get_own_property_names: Some(get_own_property_names),
    delete_property: Some(delete_property),
    define_own_property: Some(define_own_property),
    has_property: None,
    get_property: None,
    set_property: None,
});

fn undefined() -> JSValue {
    qjs::JS_UNDEFINED
}

impl Table {
    /// Registers the class in `ctx`'s runtime and gathers the rest; `make`
    /// is `host.js`'s container maker, `dispatch` its entries and their
    /// objects, `spec` the API's spec object.
    ///
    /// # Safety
    /// `ctx` is a live context and the values are its own.
    pub(crate) unsafe fn new(
        ctx: *mut qjs::JSContext,
        make: JSValue,
        (dispatch, objects): (&[JSValue], &[JSValue]),
        spec: JSValue,
    ) -> Result<Box<Table>, ()> {
        // SAFETY: as the caller promised; everything made here is owned by
        // the table and freed once in `drop`.
        unsafe {
            let rt = qjs::JS_GetRuntime(ctx);
            let mut class: qjs::JSClassID = 0;
            qjs::JS_NewClassID(rt, &mut class);
            let def = qjs::JSClassDef {
                class_name: c"Object".as_ptr(),
                finalizer: Some(finalize),
                gc_mark: Some(mark),
                call: None,
                exotic: &EXOTIC.0 as *const _ as *mut _,
            };
            if qjs::JS_NewClass(rt, class, &def) != 0 {
                return Err(());
            }
            let mut table = Box::new(Table {
                rt,
                class,
                atoms: [qjs::JS_ATOM_NULL; FIELDS.len()],
                proto: undefined(),
                make: qjs::JS_DupValue(ctx, make),
                dispatch: dispatch.iter().map(|&f| qjs::JS_DupValue(ctx, f)).collect(),
                objects: objects.iter().map(|&o| qjs::JS_DupValue(ctx, o)).collect(),
                process: qjs::JS_NewAtomLen(ctx, c"ProcessRequest".as_ptr(), 14),
                spec: qjs::JS_DupValue(ctx, spec),
                scheme: undefined(),
                methods: METHODS.map(|m| (m, undefined())),
                empty: undefined(),
                shapes: [undefined(); 3],
                kept: std::cell::Cell::new(undefined()),
                url: std::cell::RefCell::new((String::new(), undefined())),
            });
            let string = |s: &str| qjs::JS_NewStringLen(ctx, s.as_ptr().cast(), s.len() as _);
            for (name, value) in table.methods.iter_mut() {
                *value = string(name);
                if qjs::JS_IsException(*value) {
                    return Err(());
                }
            }
            if table.process == qjs::JS_ATOM_NULL {
                return Err(());
            }
            table.empty = string("");
            if qjs::JS_IsException(table.empty) {
                return Err(());
            }
            for (atom, name) in table.atoms.iter_mut().zip(FIELDS) {
                *atom = qjs::JS_NewAtomLen(ctx, name.as_ptr().cast(), name.len() as _);
                if *atom == qjs::JS_ATOM_NULL {
                    return Err(());
                }
            }
            let plain = qjs::JS_NewObject(ctx);
            if qjs::JS_IsException(plain) {
                return Err(());
            }
            table.proto = qjs::JS_GetPrototype(ctx, plain);
            qjs::JS_FreeValue(ctx, plain);
            table.scheme = qjs::JS_NewStringLen(ctx, c"http".as_ptr(), 4);
            if qjs::JS_IsException(table.proto) || qjs::JS_IsException(table.scheme) {
                return Err(());
            }
            let shapes: [&[&std::ffi::CStr]; 3] = [
                &[c"Request"],
                &[c"Request", c"SessionMeta"],
                &[c"Request", c"Session"],
            ];
            for (shape, names) in table.shapes.iter_mut().zip(shapes) {
                // As an object literal defines its fields. One object per
                // shape: an object alone on its shape grows it in place, so
                // `{Request}` needs one of its own to stay alive.
                let obj = qjs::JS_NewObject(ctx);
                *shape = obj;
                if qjs::JS_IsException(obj) {
                    return Err(());
                }
                let flags = qjs::JS_PROP_C_W_E as i32;
                for name in names {
                    if qjs::JS_DefinePropertyValueStr(ctx, obj, name.as_ptr(), undefined(), flags)
                        < 0
                    {
                        return Err(());
                    }
                }
            }
            Ok(table)
        }
    }

    /// A new request object; takes the references of the values given.
    /// `JS_EXCEPTION` when it cannot be made (the values are freed).
    ///
    /// # Safety
    /// `ctx` is the table's live context; the values are its own.
    #[allow(clippy::too_many_arguments)]
    /// `headers` must stay alive and unchanged until [`Table::detach`].
    pub(crate) unsafe fn request(
        &self,
        ctx: *mut qjs::JSContext,
        headers: *const HeaderMap,
        body: JSValue,
        url: JSValue,
        params: JSValue,
        method: JSValue,
        uri: JSValue,
    ) -> JSValue {
        let data = |value| Slot::Data { value, flags: CWE };
        // SAFETY: as the caller promised.
        unsafe {
            let slots = Slots {
                table: self,
                headers,
                slots: [
                    Slot::Pending,
                    Slot::Lazy(undefined()),
                    Slot::Lazy(undefined()),
                    data(body),
                    data(url),
                    Slot::Lazy(params),
                    Slot::Lazy(undefined()),
                    Slot::Lazy(undefined()),
                    Slot::Lazy(undefined()),
                    Slot::Lazy(undefined()),
                    data(qjs::JS_FALSE),
                    data(method),
                    data(uri),
                    data(qjs::JS_DupValue(ctx, self.scheme)),
                ],
                plain: false,
            };
            // In QuickJS's heap, so `--jsvm-memory` counts it too.
            let place = qjs::js_malloc(ctx, std::mem::size_of::<Slots>() as _).cast::<Slots>();
            if place.is_null() {
                free_slots(self.rt, &slots.slots);
                return qjs::JS_EXCEPTION;
            }
            let obj = qjs::JS_NewObjectProtoClass(ctx, self.proto, self.class);
            if qjs::JS_IsException(obj) {
                free_slots(self.rt, &slots.slots);
                qjs::js_free(ctx, place.cast());
                return obj;
            }
            place.write(slots);
            qjs::JS_SetOpaque(obj, place.cast());
            obj
        }
    }

    /// Fields `which` of `obj` when it is one of this table's request
    /// objects still in slots and none of them is an accessor (whose
    /// getter reading must run): each field's value (a new reference), or
    /// null for a container never made (so empty); undefined when deleted.
    /// `None`: read it as any object.
    ///
    /// # Safety
    /// `obj` is a value of the table's live context.
    pub(crate) unsafe fn fields<const N: usize>(
        &self,
        obj: JSValue,
        which: [Field; N],
    ) -> Option<[JSValue; N]> {
        // SAFETY: the opaque of this class is always a `Slots`.
        unsafe {
            let s = qjs::JS_GetOpaque(obj, self.class).cast::<Slots>();
            let s = s.as_ref()?;
            if s.plain {
                return None;
            }
            let mut out = [undefined(); N];
            for (o, &f) in out.iter_mut().zip(&which) {
                *o = match s.slots[f as usize] {
                    Slot::Absent => undefined(),
                    Slot::Lazy(_) | Slot::Pending => qjs::JS_NULL,
                    Slot::Data { value, .. } => value,
                    Slot::Accessor { .. } => return None,
                };
            }
            // Every field is settled: now each reference is taken.
            for &v in &out {
                if qjs::JS_VALUE_GET_TAG(v) < 0 {
                    qjs::JS_DupValueRT(self.rt, v);
                }
            }
            Some(out)
        }
    }

    /// Runs entry `index` on `request` (borrowed): what it returned, or
    /// `JS_EXCEPTION`.
    ///
    /// # Safety
    /// `ctx` is the table's live context, `request` one of its values.
    pub(crate) unsafe fn call(
        &self,
        ctx: *mut qjs::JSContext,
        index: usize,
        request: JSValue,
    ) -> JSValue {
        let Some(&f) = self.dispatch.get(index) else {
            // SAFETY: the live context.
            unsafe { qjs::JS_ThrowTypeError(ctx, c"no such entry".as_ptr()) };
            return qjs::JS_EXCEPTION;
        };
        // SAFETY: as the caller promised; the arguments are borrowed, the
        // method and the session are this call's references, freed once.
        unsafe {
            match self.objects.get(index) {
                Some(&obj) if qjs::JS_IsObject(obj) => {
                    let method = qjs::JS_GetProperty(ctx, obj, self.process);
                    if qjs::JS_IsException(method) {
                        return method;
                    }
                    let session = qjs::JS_NewObject(ctx);
                    if qjs::JS_IsException(session) {
                        qjs::JS_FreeValue(ctx, method);
                        return session;
                    }
                    let mut args = [request, session, self.spec];
                    let ret = qjs::JS_Call(ctx, method, obj, 3, args.as_mut_ptr());
                    qjs::JS_FreeValue(ctx, session);
                    qjs::JS_FreeValue(ctx, method);
                    ret
                }
                _ => {
                    let mut args = [request, self.spec];
                    qjs::JS_Call(ctx, f, qjs::JS_UNDEFINED, 2, args.as_mut_ptr())
                }
            }
        }
    }

    /// `method` as a JS string (a new reference), made once for the usual
    /// methods.
    ///
    /// # Safety
    /// `ctx` is the table's live context.
    pub(crate) unsafe fn method(&self, ctx: *mut qjs::JSContext, method: &str) -> JSValue {
        // SAFETY: the live context; the cached strings are its own.
        unsafe {
            match self.methods.iter().find(|(m, _)| *m == method) {
                Some(&(_, v)) => qjs::JS_DupValue(ctx, v),
                None => qjs::JS_NewStringLen(ctx, method.as_ptr().cast(), method.len() as _),
            }
        }
    }

    /// `text` as a JS string (a new reference), the last call's when its
    /// text is the same; `JS_EXCEPTION` (pending in `ctx`) when it cannot
    /// be made.
    ///
    /// # Safety
    /// `ctx` is the table's live context.
    pub(crate) unsafe fn url(&self, ctx: *mut qjs::JSContext, text: &str) -> JSValue {
        let mut last = self.url.borrow_mut();
        // SAFETY: the live context; the kept string is its own, holding a
        // reference of the table's, freed once (here when replaced, or in
        // `drop`).
        unsafe {
            if last.0 == text && qjs::JS_VALUE_GET_TAG(last.1) == qjs::JS_TAG_STRING {
                return qjs::JS_DupValue(ctx, last.1);
            }
            let v = qjs::JS_NewStringLen(ctx, text.as_ptr().cast(), text.len() as _);
            if !qjs::JS_IsException(v) && text.len() <= URL_KEPT_LEN {
                let old = std::mem::replace(&mut last.1, qjs::JS_DupValue(ctx, v));
                qjs::JS_FreeValue(ctx, old);
                last.0.clear();
                last.0.push_str(text);
            }
            v
        }
    }

    /// `""` (a new reference).
    ///
    /// # Safety
    /// `ctx` is the table's live context.
    pub(crate) unsafe fn empty(&self, ctx: *mut qjs::JSContext) -> JSValue {
        // SAFETY: the live context; the string is its own.
        unsafe { qjs::JS_DupValue(ctx, self.empty) }
    }

    /// Ends the loan of the request's headers to `obj` (made by
    /// [`Table::request`] with `headers`) and drops the caller's reference
    /// to it. When `Headers` was not read and the object outlives that
    /// reference (a global, a closure holds it), their text is kept for a
    /// later read. (Whether it does is seen by its finalizer: QuickJS frees
    /// an object whose last reference goes at once, outside a collection.)
    ///
    /// # Safety
    /// `ctx` is the table's live context and `obj` one of its request
    /// objects, still lent `headers`; the caller's reference is given up.
    pub(crate) unsafe fn detach(
        &self,
        ctx: *mut qjs::JSContext,
        obj: JSValue,
        headers: Option<&HeaderMap>,
    ) {
        // SAFETY: as the caller promised; `s` is read after the free only
        // when the finalizer did not run (the object, and so `s`, lives).
        unsafe {
            let s = qjs::JS_GetOpaque(obj, self.class).cast::<Slots>();
            if s.is_null() {
                qjs::JS_FreeValue(ctx, obj);
                return;
            }
            (*s).headers = std::ptr::null();
            if let Slot::Data { value, .. } = (*s).slots[Field::SetHeaders as usize] {
                if qjs::JS_IsObject(value) {
                    let old = self.kept.replace(qjs::JS_DupValue(ctx, value));
                    qjs::JS_FreeValue(ctx, old);
                }
            }
            if !matches!((*s).slots[Field::Headers as usize], Slot::Pending) {
                qjs::JS_FreeValue(ctx, obj);
                return;
            }
            WATCHED.set(s);
            qjs::JS_FreeValue(ctx, obj);
            if WATCHED.replace(std::ptr::null_mut()).is_null() {
                return; // Freed: nobody can read it.
            }
            let text = headers.map(super::answer::header_text).unwrap_or_default();
            let mut v = qjs::JS_NewStringLen(ctx, text.as_ptr().cast(), text.len() as _);
            if qjs::JS_IsException(v) {
                // Out of memory: the field reads as no headers. The call
                // is answered; its exception is not left pending, where
                // a later failure would be taken for it.
                qjs::JS_FreeValue(ctx, qjs::JS_GetException(ctx));
                v = self.empty(ctx);
            }
            (*s).slots[Field::Headers as usize] = Slot::Lazy(v);
        }
    }

    fn field(&self, atom: qjs::JSAtom) -> Option<usize> {
        self.atoms.iter().position(|&a| a == atom)
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // SAFETY: each made in `new` in this runtime, freed once here.
        unsafe {
            for &atom in &self.atoms {
                if atom != qjs::JS_ATOM_NULL {
                    qjs::JS_FreeAtomRT(self.rt, atom);
                }
            }
            qjs::JS_FreeValueRT(self.rt, self.proto);
            qjs::JS_FreeValueRT(self.rt, self.make);
            for &f in self.dispatch.iter().chain(&self.objects) {
                qjs::JS_FreeValueRT(self.rt, f);
            }
            if self.process != qjs::JS_ATOM_NULL {
                qjs::JS_FreeAtomRT(self.rt, self.process);
            }
            qjs::JS_FreeValueRT(self.rt, self.spec);
            for &(_, m) in &self.methods {
                qjs::JS_FreeValueRT(self.rt, m);
            }
            qjs::JS_FreeValueRT(self.rt, self.empty);
            qjs::JS_FreeValueRT(self.rt, self.scheme);
            for &shape in &self.shapes {
                qjs::JS_FreeValueRT(self.rt, shape);
            }
            qjs::JS_FreeValueRT(self.rt, self.kept.get());
            qjs::JS_FreeValueRT(self.rt, self.url.get_mut().1);
        }
    }
}

/// Frees the values the slots hold.
///
/// # Safety
/// The values belong to `rt`; the slots are not used again.
unsafe fn free_slots(rt: *mut qjs::JSRuntime, slots: &[Slot]) {
    for slot in slots {
        // SAFETY: as the caller promised.
        unsafe { free_slot(rt, slot) };
    }
}

/// # Safety
/// As [`free_slots`].
unsafe fn free_slot(rt: *mut qjs::JSRuntime, slot: &Slot) {
    // SAFETY: as the caller promised.
    unsafe {
        match *slot {
            Slot::Absent | Slot::Pending => {}
            Slot::Lazy(v) | Slot::Data { value: v, .. } => free_rt(rt, v),
            Slot::Accessor { get, set, .. } => {
                free_rt(rt, get);
                free_rt(rt, set);
            }
        }
    }
}

/// `JS_FreeValueRT`, skipped for a value without a reference count (most
/// slots: null, a boolean, undefined): the call is not inlined.
///
/// # Safety
/// `v` belongs to `rt` and its reference is given up.
unsafe fn free_rt(rt: *mut qjs::JSRuntime, v: JSValue) {
    // QuickJS's `JS_VALUE_HAS_REF_COUNT`: the tags below zero.
    // SAFETY: as the caller promised.
    unsafe {
        if qjs::JS_VALUE_GET_TAG(v) < 0 {
            qjs::JS_FreeValueRT(rt, v);
        }
    }
}

/// The object's slots, or null.
///
/// # Safety
/// `obj` is an object of a live runtime.
unsafe fn slots_of(obj: JSValue) -> *mut Slots {
    let mut class = 0;
    // SAFETY: as the caller promised; only this class's objects reach the
    // handlers below, and their opaque is a `Slots`.
    unsafe { qjs::JS_GetAnyOpaque(obj, &mut class).cast() }
}

/// The slots and table of a request object whose fields are still in
/// slots: what every exotic handler starts from. `None` when the object is
/// ordinary now (`plain`: the handler steps aside) or has no opaque.
///
/// A raw pointer, not `&mut Slots`: a handler may call into QuickJS while
/// it works on the slots (making a container runs `host.js`'s `make`, any
/// allocation may run the cycle collector, whose [`mark`] reads the same
/// slots), and a `&mut` held across that would alias those reads. Each
/// handler reads and writes through the pointer, slot by slot.
///
/// # Safety
/// `obj` is a live object of the class (QuickJS calls the handlers only
/// with those). Its table is then alive: the table is owned by the
/// context's `Keys`, dropped only after every script of the context has
/// run, and handlers run only inside a script or a host call.
unsafe fn in_slots<'a>(obj: JSValue) -> Option<(*mut Slots, &'a Table)> {
    // SAFETY: as the caller promised: the opaque is a `Slots` or null, and
    // its table outlives every handler call.
    unsafe {
        let s = slots_of(obj);
        if s.is_null() || (*s).plain {
            return None;
        }
        Some((s, &*(*s).table))
    }
}

thread_local! {
    /// The request object [`Table::detach`] is giving up, until its
    /// finalizer runs (then null).
    static WATCHED: std::cell::Cell<*mut Slots> = const { std::cell::Cell::new(std::ptr::null_mut()) };
}

unsafe extern "C" fn finalize(rt: *mut qjs::JSRuntime, obj: JSValue) {
    // SAFETY: the opaque was written into `js_malloc` memory by `request`;
    // the finalizer runs once.
    unsafe {
        let s = slots_of(obj);
        if !s.is_null() {
            if WATCHED.get() == s {
                WATCHED.set(std::ptr::null_mut());
            }
            // Freed where they are: copying the slots out first was
            // a memcpy of the whole block per request.
            free_slots(rt, &(*s).slots);
            qjs::js_free_rt(rt, s.cast());
        }
    }
}

unsafe extern "C" fn mark(rt: *mut qjs::JSRuntime, obj: JSValue, f: qjs::JS_MarkFunc) {
    // SAFETY: as in `finalize`; marking only reads.
    unsafe {
        let Some(s) = slots_of(obj).as_ref() else {
            return;
        };
        for slot in &s.slots {
            match *slot {
                Slot::Absent | Slot::Pending => {}
                Slot::Lazy(v) | Slot::Data { value: v, .. } => qjs::JS_MarkValue(rt, v, f),
                Slot::Accessor { get, set, .. } => {
                    qjs::JS_MarkValue(rt, get, f);
                    qjs::JS_MarkValue(rt, set, f);
                }
            }
        }
    }
}

/// Makes lazy slot `i` a data slot holding its container. `Err` with an
/// exception pending in `ctx` when making it failed (the slot is kept).
///
/// # Safety
/// `s` is a live request's slots in `ctx`.
unsafe fn settle(ctx: *mut qjs::JSContext, s: *mut Slots, i: usize) -> Result<(), ()> {
    // SAFETY: as the caller promised. The slot is read again after the
    // call into JS (which may touch this object, never its slot `i`'s
    // making: `make` is host code).
    unsafe {
        if matches!((*s).slots[i], Slot::Pending) {
            // During the call: built here from the headers lent for it.
            if let Some(headers) = (*s).headers.as_ref() {
                let value = header_object(ctx, headers);
                if qjs::JS_IsException(value) {
                    return Err(());
                }
                (*s).slots[i] = Slot::Data { value, flags: CWE };
                return Ok(());
            }
            // The header text, from the headers lent for the call.
            let text = (*s).headers.as_ref().map(super::answer::header_text);
            let text = text.unwrap_or_default();
            let v = qjs::JS_NewStringLen(ctx, text.as_ptr().cast(), text.len() as _);
            if qjs::JS_IsException(v) {
                return Err(());
            }
            (*s).slots[i] = Slot::Lazy(v);
        }
        let Slot::Lazy(data) = (*s).slots[i] else {
            return Ok(());
        };
        let table = &*(*s).table;
        let value = match i {
            i if i == Field::SetHeaders as usize
                || i == Field::AddParams as usize
                || i == Field::ExtendedParams as usize =>
            {
                qjs::JS_NewObject(ctx)
            }
            i if i == Field::DeleteHeaders as usize || i == Field::DeleteParams as usize => {
                qjs::JS_NewArray(ctx)
            }
            _ => {
                let mut args = [qjs::JS_MKVAL(qjs::JS_TAG_INT, i as i32), data];
                qjs::JS_Call(ctx, table.make, qjs::JS_UNDEFINED, 2, args.as_mut_ptr())
            }
        };
        if qjs::JS_IsException(value) {
            return Err(());
        }
        if let Slot::Lazy(data) = (*s).slots[i] {
            qjs::JS_FreeValue(ctx, data);
            (*s).slots[i] = Slot::Data { value, flags: CWE };
        } else {
            qjs::JS_FreeValue(ctx, value);
        }
        Ok(())
    }
}

/// `request.Headers` as Tyk's JSON gives it, `{"Name": ["value", ...]}`
/// (canonical names, in the map's order), made with QuickJS's API: an
/// object with `Object.prototype`, and an array per name. Its properties
/// are defined, so a setter a script gave `Object.prototype` is never
/// called. `host.js`'s `lines` made it from the header text with a split
/// and a property write per header, through uncurried builtins: ~26,000
/// instructions for `ab`'s three headers, ~2,000 here. (The text is still
/// what a request object that outlives its call keeps: [`Table::detach`].)
/// An exception value (pending in `ctx`) when out of memory.
///
/// # Safety
/// `ctx` is a live context.
unsafe fn header_object(ctx: *mut qjs::JSContext, headers: &HeaderMap) -> JSValue {
    // SAFETY: `ctx` is live; each value made here is owned once and given
    // to a definition (which takes it, also when it fails) or freed.
    unsafe {
        let obj = qjs::JS_NewObject(ctx);
        if qjs::JS_IsException(obj) {
            return obj;
        }
        let mut name = String::new();
        for key in headers.keys() {
            let values = qjs::JS_NewArray(ctx);
            if qjs::JS_IsException(values) {
                qjs::JS_FreeValue(ctx, obj);
                return values;
            }
            for (j, v) in headers.get_all(key).iter().enumerate() {
                let text = String::from_utf8_lossy(v.as_bytes());
                let s = qjs::JS_NewStringLen(ctx, text.as_ptr().cast(), text.len() as _);
                if qjs::JS_IsException(s)
                    || qjs::JS_DefinePropertyValueUint32(
                        ctx,
                        values,
                        j as u32,
                        s,
                        qjs::JS_PROP_C_W_E as i32,
                    ) < 0
                {
                    qjs::JS_FreeValue(ctx, values);
                    qjs::JS_FreeValue(ctx, obj);
                    return qjs::JS_EXCEPTION;
                }
            }
            name.clear();
            gateway_wire::header::push_canonical_header_key(&mut name, key.as_str());
            let atom = qjs::JS_NewAtomLen(ctx, name.as_ptr().cast(), name.len() as _);
            if atom == qjs::JS_ATOM_NULL {
                qjs::JS_FreeValue(ctx, values);
                qjs::JS_FreeValue(ctx, obj);
                return qjs::JS_EXCEPTION;
            }
            let defined =
                qjs::JS_DefinePropertyValue(ctx, obj, atom, values, qjs::JS_PROP_C_W_E as i32);
            qjs::JS_FreeAtom(ctx, atom);
            if defined < 0 {
                qjs::JS_FreeValue(ctx, obj);
                return qjs::JS_EXCEPTION;
            }
        }
        obj
    }
}

unsafe extern "C" fn get_own_property(
    ctx: *mut qjs::JSContext,
    desc: *mut qjs::JSPropertyDescriptor,
    obj: JSValue,
    prop: qjs::JSAtom,
) -> i32 {
    // SAFETY: QuickJS calls this with a live object of the class
    // (`in_slots`); `desc`, when not null, is QuickJS's to fill.
    unsafe {
        let Some((s, table)) = in_slots(obj) else {
            return 0;
        };
        let Some(i) = table.field(prop) else {
            return 0;
        };
        if matches!((*s).slots[i], Slot::Absent) {
            return 0;
        }
        if desc.is_null() {
            return 1;
        }
        if settle(ctx, s, i).is_err() {
            return -1;
        }
        let d = &mut *desc;
        d.value = undefined();
        d.getter = undefined();
        d.setter = undefined();
        match (*s).slots[i] {
            Slot::Data { value, flags } => {
                d.flags = flags as i32;
                d.value = qjs::JS_DupValue(ctx, value);
            }
            Slot::Accessor { get, set, flags } => {
                d.flags = flags as i32 | qjs::JS_PROP_GETSET as i32;
                d.getter = qjs::JS_DupValue(ctx, get);
                d.setter = qjs::JS_DupValue(ctx, set);
            }
            // Settled above; deleted meanwhile cannot happen (host code).
            Slot::Absent | Slot::Lazy(_) | Slot::Pending => return 0,
        }
        1
    }
}

unsafe extern "C" fn get_own_property_names(
    ctx: *mut qjs::JSContext,
    ptab: *mut *mut qjs::JSPropertyEnum,
    plen: *mut u32,
    obj: JSValue,
) -> i32 {
    // SAFETY: QuickJS calls this with a live object of the class and frees
    // the table (and its atoms) it is given.
    unsafe {
        *ptab = std::ptr::null_mut();
        *plen = 0;
        let Some((s, table)) = in_slots(obj) else {
            return 0;
        };
        let size = std::mem::size_of::<qjs::JSPropertyEnum>() * FIELDS.len();
        let tab = qjs::js_malloc(ctx, size as _).cast::<qjs::JSPropertyEnum>();
        if tab.is_null() {
            return -1;
        }
        let mut n = 0;
        for (slot, &atom) in (*s).slots.iter().zip(&table.atoms) {
            if !matches!(slot, Slot::Absent) {
                tab.add(n).write(qjs::JSPropertyEnum {
                    is_enumerable: false,
                    atom: qjs::JS_DupAtom(ctx, atom),
                });
                n += 1;
            }
        }
        *ptab = tab;
        *plen = n as u32;
        0
    }
}

unsafe extern "C" fn delete_property(
    _ctx: *mut qjs::JSContext,
    obj: JSValue,
    prop: qjs::JSAtom,
) -> i32 {
    // SAFETY: QuickJS calls this with a live object of the class (`in_slots`).
    unsafe {
        let Some((s, table)) = in_slots(obj) else {
            return 1;
        };
        let Some(i) = table.field(prop) else {
            return 1;
        };
        let configurable = match (*s).slots[i] {
            Slot::Absent => return 1,
            Slot::Lazy(_) | Slot::Pending => true,
            Slot::Data { flags, .. } | Slot::Accessor { flags, .. } => flags & C != 0,
        };
        if !configurable {
            return 0;
        }
        let old = std::mem::replace(&mut (*s).slots[i], Slot::Absent);
        free_slot(table.rt, &old);
        1
    }
}

/// The descriptor a define asks for (values borrowed).
struct Wanted {
    value: JSValue,
    get: JSValue,
    set: JSValue,
    flags: u32,
}

impl Wanted {
    fn has(&self, bit: u32) -> bool {
        self.flags & bit != 0
    }
    /// The attribute `attr` (C, W or E), where `has_attr` says it is given.
    fn attr(&self, has_attr: u32, attr: u8) -> Option<bool> {
        self.has(has_attr).then_some(self.flags & attr as u32 != 0)
    }
    fn is_accessor(&self) -> bool {
        self.has(qjs::JS_PROP_HAS_GET) || self.has(qjs::JS_PROP_HAS_SET)
    }
    fn is_data(&self) -> bool {
        self.has(qjs::JS_PROP_HAS_VALUE) || self.has(qjs::JS_PROP_HAS_WRITABLE)
    }
}

/// ValidateAndApplyPropertyDescriptor (ECMA-262 10.1.6.3) on a present,
/// settled slot: false when the change is not allowed.
///
/// # Safety
/// The slot's values and the wanted ones belong to `ctx`.
unsafe fn apply_descriptor(ctx: *mut qjs::JSContext, slot: &mut Slot, w: &Wanted) -> bool {
    let same = |a: JSValue, b: JSValue| {
        // SAFETY: both values of `ctx`.
        unsafe { qjs::JS_IsSameValue(ctx, a, b) }
    };
    let dup = |v: JSValue| {
        // SAFETY: a value of `ctx`.
        unsafe { qjs::JS_DupValue(ctx, v) }
    };
    let flags = match *slot {
        Slot::Data { flags, .. } | Slot::Accessor { flags, .. } => flags,
        Slot::Absent | Slot::Lazy(_) | Slot::Pending => return false,
    };
    let accessor = matches!(slot, Slot::Accessor { .. });
    if flags & C == 0 {
        if w.attr(qjs::JS_PROP_HAS_CONFIGURABLE, C) == Some(true) {
            return false;
        }
        if w.attr(qjs::JS_PROP_HAS_ENUMERABLE, E)
            .is_some_and(|e| e != (flags & E != 0))
        {
            return false;
        }
        if w.is_accessor() || w.is_data() {
            if accessor != w.is_accessor() {
                return false;
            }
            let refused = match *slot {
                Slot::Accessor { get, set, .. } => {
                    (w.has(qjs::JS_PROP_HAS_GET) && !same(w.get, get))
                        || (w.has(qjs::JS_PROP_HAS_SET) && !same(w.set, set))
                }
                Slot::Data { value, .. } if flags & W == 0 => {
                    w.attr(qjs::JS_PROP_HAS_WRITABLE, W) == Some(true)
                        || (w.has(qjs::JS_PROP_HAS_VALUE) && !same(w.value, value))
                }
                _ => false,
            };
            if refused {
                return false;
            }
        }
    }
    // Apply.
    let mut keep = flags & (C | E);
    if let Some(c) = w.attr(qjs::JS_PROP_HAS_CONFIGURABLE, C) {
        keep = (keep & !C) | if c { C } else { 0 };
    }
    if let Some(e) = w.attr(qjs::JS_PROP_HAS_ENUMERABLE, E) {
        keep = (keep & !E) | if e { E } else { 0 };
    }
    let next = match *slot {
        Slot::Data { value, flags } if !w.is_accessor() => {
            let value = if w.has(qjs::JS_PROP_HAS_VALUE) {
                dup(w.value)
            } else {
                dup(value)
            };
            let writable = w
                .attr(qjs::JS_PROP_HAS_WRITABLE, W)
                .unwrap_or(flags & W != 0);
            Slot::Data {
                value,
                flags: keep | if writable { W } else { 0 },
            }
        }
        Slot::Accessor { get, set, .. } if !w.is_data() => Slot::Accessor {
            get: dup(if w.has(qjs::JS_PROP_HAS_GET) {
                w.get
            } else {
                get
            }),
            set: dup(if w.has(qjs::JS_PROP_HAS_SET) {
                w.set
            } else {
                set
            }),
            flags: keep,
        },
        // Data to accessor, or accessor to data: attributes not given
        // take their defaults.
        Slot::Data { .. } => Slot::Accessor {
            get: dup(if w.has(qjs::JS_PROP_HAS_GET) {
                w.get
            } else {
                undefined()
            }),
            set: dup(if w.has(qjs::JS_PROP_HAS_SET) {
                w.set
            } else {
                undefined()
            }),
            flags: keep,
        },
        _ => Slot::Data {
            value: dup(if w.has(qjs::JS_PROP_HAS_VALUE) {
                w.value
            } else {
                undefined()
            }),
            flags: keep
                | if w.attr(qjs::JS_PROP_HAS_WRITABLE, W) == Some(true) {
                    W
                } else {
                    0
                },
        },
    };
    let old = std::mem::replace(slot, next);
    // SAFETY: the old slot's values belong to `ctx`'s runtime.
    unsafe { free_slot(qjs::JS_GetRuntime(ctx), &old) };
    true
}

/// Moves every slot into `obj`'s own properties, in order: the object is
/// ordinary from then on. `Err`: an exception is pending.
///
/// # Safety
/// `s` is `obj`'s slots, in `ctx`.
unsafe fn make_plain(ctx: *mut qjs::JSContext, obj: JSValue, s: *mut Slots) -> Result<(), ()> {
    // SAFETY: as the caller promised.
    unsafe {
        for i in 0..FIELDS.len() {
            settle(ctx, s, i)?;
        }
        (*s).plain = true;
        let table = &*(*s).table;
        let slots = std::mem::replace(&mut (*s).slots, std::array::from_fn(|_| Slot::Absent));
        let mut failed = false;
        for (slot, &atom) in slots.iter().zip(&table.atoms) {
            let base = qjs::JS_PROP_NO_EXOTIC
                | qjs::JS_PROP_HAS_CONFIGURABLE
                | qjs::JS_PROP_HAS_ENUMERABLE
                | qjs::JS_PROP_THROW;
            let r = match *slot {
                Slot::Data { value, flags } => qjs::JS_DefineProperty(
                    ctx,
                    obj,
                    atom,
                    value,
                    undefined(),
                    undefined(),
                    (base | qjs::JS_PROP_HAS_VALUE | qjs::JS_PROP_HAS_WRITABLE | flags as u32)
                        as i32,
                ),
                Slot::Accessor { get, set, flags } => qjs::JS_DefineProperty(
                    ctx,
                    obj,
                    atom,
                    undefined(),
                    get,
                    set,
                    (base | qjs::JS_PROP_HAS_GET | qjs::JS_PROP_HAS_SET | flags as u32) as i32,
                ),
                _ => 1,
            };
            failed |= !failed && r < 0;
        }
        free_slots(table.rt, &slots);
        if failed {
            Err(())
        } else {
            Ok(())
        }
    }
}

unsafe extern "C" fn define_own_property(
    ctx: *mut qjs::JSContext,
    obj: JSValue,
    prop: qjs::JSAtom,
    value: JSValue,
    get: JSValue,
    set: JSValue,
    flags: i32,
) -> i32 {
    let flags = flags as u32;
    // SAFETY: QuickJS calls this with a live object of the class (`in_slots`).
    unsafe {
        let ordinary = || {
            qjs::JS_DefineProperty(
                ctx,
                obj,
                prop,
                value,
                get,
                set,
                (flags | qjs::JS_PROP_NO_EXOTIC) as i32,
            )
        };
        let Some((s, table)) = in_slots(obj) else {
            return ordinary();
        };
        match table.field(prop) {
            Some(i) if !matches!((*s).slots[i], Slot::Absent) => {
                let wanted = Wanted {
                    value,
                    get,
                    set,
                    flags,
                };
                // A plain assignment to a plain field: no need to make a
                // container only to drop it.
                let plain_set = flags & !(qjs::JS_PROP_THROW | qjs::JS_PROP_THROW_STRICT)
                    == qjs::JS_PROP_HAS_VALUE;
                if !plain_set && settle(ctx, s, i).is_err() {
                    return -1;
                }
                let slot = &mut (*s).slots[i];
                if plain_set {
                    if matches!(*slot, Slot::Pending) {
                        *slot = Slot::Data {
                            value: qjs::JS_DupValue(ctx, value),
                            flags: CWE,
                        };
                        return 1;
                    }
                    if let Slot::Lazy(data)
                    | Slot::Data {
                        value: data,
                        flags: CWE,
                    } = *slot
                    {
                        qjs::JS_FreeValue(ctx, data);
                        *slot = Slot::Data {
                            value: qjs::JS_DupValue(ctx, value),
                            flags: CWE,
                        };
                        return 1;
                    }
                }
                if apply_descriptor(ctx, slot, &wanted) {
                    1
                } else if flags & (qjs::JS_PROP_THROW | qjs::JS_PROP_THROW_STRICT) != 0 {
                    qjs::JS_ThrowTypeError(ctx, c"property is not configurable".as_ptr());
                    -1
                } else {
                    0
                }
            }
            // A new key: keep the order an ordinary object would have.
            _ => {
                if qjs::JS_IsExtensible(ctx, obj) == 1 && make_plain(ctx, obj, s).is_err() {
                    return -1;
                }
                ordinary()
            }
        }
    }
}
