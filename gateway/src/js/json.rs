//! `JSON.parse` and `JSON.stringify` for boa, the host's.
//!
//! # `JSON.parse`
//!
//! boa 0.22's `JSON.parse` validates the text with serde_json, then wraps it
//! in parentheses and runs it as a script: lexed, parsed into an AST,
//! compiled to bytecode and executed, every call. On the bench's response
//! hook (`JSON.parse` of the upstream's ~400-byte echo) that was 174,000
//! instructions of a 400,000-instruction call, the virtual endpoint's
//! request 200,000. Scripts parse request and response bodies all the time,
//! so this replaces it in every boa context: the same serde_json parser
//! (so the same texts are accepted and refused, with the same messages,
//! and the same 128-level nesting limit), building the values directly as
//! it reads them, objects from the root shape as an object literal's are.
//! With a reviver (rare) the call goes to boa's own `JSON.parse`, which
//! hands the reviver the source text it needs.
//!
//! What the builder keeps, as the spec's `JSON.parse` does: keys in text
//! order (array-index keys first, as every object orders them), a repeated
//! key's last value at its first position, `__proto__` as an own data
//! property, `-0` as minus zero. Numbers are read with serde_json's
//! `float_roundtrip` (enabled in `Cargo.toml`), the correctly rounded
//! parse a JS engine does.
//!
//! # `JSON.stringify`
//!
//! boa's serializer allocates a vector and a string per member and joins
//! them level by level; the host also had to pass it a replacer function
//! that recorded each value's depth (`depth.rs`), a native call per value.
//! On the response hook (`JSON.stringify` of the parsed echo) that was
//! 111,000 instructions a call. The host's walks the value by the spec's
//! `SerializeJSONProperty` steps (`toJSON`, the replacer function or key
//! list, `space`, boxed primitives, `JSON.rawJSON` values, cycles as a
//! `TypeError`, BigInt as a `TypeError`, getters and Proxy traps run in the
//! spec's order) into one buffer, and bounds the nesting itself
//! ([`super::depth::MAX_NESTING`], a `RangeError`). Ordinary objects and
//! arrays are read from their property tables; any other object (a Proxy,
//! a typed array, a host object) through its internal methods: the keys
//! from `Object.keys` (the spec's `EnumerableOwnProperties`), the values
//! by `[[Get]]`, arrays by `Array.isArray`. Two departures, both far from
//! what a gateway script does: a `toJSON` getter on `BigInt.prototype`
//! sees a BigInt object as `this`, not the primitive; and a `space` string
//! holding a lone surrogate indents with U+FFFD (the output is built as
//! UTF-8; every other lone surrogate is escaped, as the spec says).
//!
//! `cargo test -p gateway json::` compares both with boa's own on a corpus.

use std::collections::HashSet;
use std::fmt;

use boa_engine::builtins::proxy::Proxy;
use boa_engine::gc::{Finalize, Trace};
use boa_engine::object::builtins::JsArray;
use boa_engine::property::PropertyKey;
use boa_engine::string::{CodePoint, JsStrVariant};
use boa_engine::{
    js_string, Context, JsBigInt, JsNativeError, JsObject, JsResult, JsString, JsValue,
};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::request::{own_data, plain, put_data};

/// Replaces `JSON.parse` (boa's own is kept for revivers) and
/// `JSON.stringify` in `ctx`'s realm; returns the new `JSON.stringify`, for
/// the host's own encoding ([`to_text`]), which a script cannot replace.
pub(crate) fn install(ctx: &mut Context) -> JsResult<JsObject> {
    let json = ctx.intrinsics().objects().json();
    let object = ctx.intrinsics().constructors().object().constructor();
    let array = ctx.intrinsics().constructors().array().constructor();
    let builtins = Builtins {
        keys: super::depth::method(&object, "keys", ctx)?,
        is_array: super::depth::method(&array, "isArray", ctx)?,
        is_raw_json: super::depth::method(&json, "isRawJSON", ctx)?,
    };
    ctx.realm()
        .host_defined_mut()
        .insert(IsArray(builtins.is_array.clone()));
    let stringify = boa_engine::NativeFunction::from_copy_closure_with_captures(
        |_, args, b: &Builtins, ctx| stringify(b, args, ctx),
        builtins,
    );
    let stringify = super::depth::replace(&json, "stringify", 3, stringify, ctx)?;
    let original = super::depth::method(&json, "parse", ctx)?;
    let parse = boa_engine::NativeFunction::from_copy_closure_with_captures(
        |this, args, orig: &JsObject, ctx| {
            if args.get(1).is_some_and(JsValue::is_callable) {
                return orig.call(this, args, ctx);
            }
            let text = args.first().cloned().unwrap_or_default().to_string(ctx)?;
            // As boa's: text that is not Unicode (a lone surrogate) is refused.
            let text = super::text::strict(&text)
                .map_err(|e| JsNativeError::syntax().with_message(e.to_string()))?;
            parse(&text, ctx)
        },
        original,
    );
    super::depth::replace(&json, "parse", 2, parse, ctx)?;
    Ok(stringify)
}

/// `value` as JSON text, by `stringify` (what [`install`] returned), as
/// Tyk's encoder would send it; `None` where `JSON.stringify` answers
/// `undefined`. Nesting is bounded as for scripts
/// ([`super::depth::MAX_NESTING`], a `RangeError`): boa's own
/// `JsValue::to_json` recurses without a bound, and an answer 100,000
/// levels deep overflowed the thread's stack, aborting the process.
pub(crate) fn to_text(
    stringify: &JsObject,
    value: &JsValue,
    ctx: &mut Context,
) -> JsResult<Option<String>> {
    let text = stringify.call(&JsValue::undefined(), std::slice::from_ref(value), ctx)?;
    Ok(text.as_string().map(|s| super::text::lossy(&s)))
}

/// The value of JSON text `text`, or the `SyntaxError` boa would throw.
pub(crate) fn parse(text: &str, ctx: &mut Context) -> JsResult<JsValue> {
    let mut de = serde_json::Deserializer::from_str(text);
    let made = std::cell::Cell::new(0);
    Build { ctx, made: &made }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| {
            let msg = e.to_string();
            let kind = if super::strbuild::is_refusal(&msg) {
                JsNativeError::range()
            } else {
                JsNativeError::syntax()
            };
            kind.with_message(msg).into()
        })
}

/// Builds one JSON value (and, recursively, its members) in `ctx`.
///
/// What it makes is checked against what the call may still allocate
/// (`strbuild::refusal`), so that a text too large for the heap is a
/// `RangeError` (out of memory) rather than the VM thread stopped for good
/// at its ceiling (`heap.rs`): a long string before it is made, an array's
/// or an object's next doubling from 1,024 members on, and every 4,096
/// values whether 4 MiB are still free. `JSON.parse` of 30 M numbers (a
/// 60 MB text) parked the thread holding 255 MiB: each number is 16 bytes
/// as a value, in the vector it is read into and again in the array.
struct Build<'a> {
    ctx: &'a mut Context,
    /// Values made so far.
    made: &'a std::cell::Cell<usize>,
}

/// Below this many members or bytes a block is not checked on its own:
/// the every-4,096-values look covers it.
const CHECKED_FROM: usize = 1024;

/// How much must be free at each look every [`LOOK_EVERY`] values.
const LOOK_MARGIN: usize = 4 << 20;
const LOOK_EVERY: usize = 4096;

/// A JS value's size in an array's storage, and a member's in an
/// object's table (a guess on the high side: key, value and slot).
const VALUE_BYTES: usize = std::mem::size_of::<JsValue>();
const MEMBER_BYTES: usize = 64;

impl Build<'_> {
    fn again(&mut self) -> Build<'_> {
        Build {
            ctx: self.ctx,
            made: self.made,
        }
    }

    /// Counts one value made; every [`LOOK_EVERY`], looks whether
    /// [`LOOK_MARGIN`] is still free.
    #[inline]
    fn count<E: de::Error>(&self) -> Result<(), E> {
        let n = self.made.get() + 1;
        self.made.set(n);
        if n.is_multiple_of(LOOK_EVERY) {
            room(LOOK_MARGIN)?;
        }
        Ok(())
    }
}

/// Refuses a block of `bytes` past what the call may still allocate, as a
/// serde error [`parse`] throws as a `RangeError`.
fn room<E: de::Error>(bytes: usize) -> Result<(), E> {
    match super::strbuild::refusal(bytes, "JSON.parse") {
        Some(why) => Err(E::custom(why)),
        None => Ok(()),
    }
}

/// A JSON number as boa holds a literal: an `i32` when it is one, else `f64`.
fn literal(n: f64) -> JsValue {
    let i = n as i32;
    if f64::from(i) == n && !(n == 0.0 && n.is_sign_negative()) {
        JsValue::from(i)
    } else {
        JsValue::from(n)
    }
}

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = JsValue;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<JsValue, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = JsValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<JsValue, E> {
        Ok(JsValue::null())
    }

    fn visit_bool<E>(self, v: bool) -> Result<JsValue, E> {
        Ok(JsValue::from(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<JsValue, E> {
        Ok(i32::try_from(v).map_or_else(|_| JsValue::from(v as f64), JsValue::from))
    }

    fn visit_u64<E>(self, v: u64) -> Result<JsValue, E> {
        Ok(i32::try_from(v).map_or_else(|_| JsValue::from(v as f64), JsValue::from))
    }

    fn visit_f64<E>(self, v: f64) -> Result<JsValue, E> {
        Ok(literal(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<JsValue, E> {
        self.count()?;
        if v.len() >= CHECKED_FROM {
            // Two bytes a character at most.
            room(v.len().saturating_mul(2))?;
        }
        Ok(JsString::from(v).into())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<JsValue, A::Error> {
        self.count()?;
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(self.again())? {
            if items.len() == items.capacity() && items.len() >= CHECKED_FROM {
                // The doubled vector, and the array's storage made from it.
                let doubled = items.len() * 2;
                room((doubled + items.len()).saturating_mul(VALUE_BYTES))?;
                items.reserve_exact(doubled - items.len());
            }
            items.push(v);
        }
        if items.len() >= CHECKED_FROM {
            room(items.len().saturating_mul(VALUE_BYTES))?;
        }
        Ok(JsArray::from_iter(items, self.ctx).into())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<JsValue, A::Error> {
        self.count()?;
        let object = plain(self.ctx);
        let mut members = 0usize;
        while let Some(key) = map.next_key_seed(Name)? {
            let value = map.next_value_seed(self.again())?;
            members += 1;
            if members >= CHECKED_FROM && members.is_power_of_two() {
                // The table's next doubling.
                room(members.saturating_mul(2 * MEMBER_BYTES))?;
            }
            // The object is new and ordinary: CreateDataProperty cannot be
            // refused (a repeated key keeps its place, as there).
            put_data(&object, key, value);
        }
        Ok(object.into())
    }
}

/// A member name, as the property key the object gets.
struct Name;

impl<'de> DeserializeSeed<'de> for Name {
    type Value = PropertyKey;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<PropertyKey, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Name {
    type Value = PropertyKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, v: &str) -> Result<PropertyKey, E> {
        // "0", "1", ...: an array index key, as the object orders them.
        Ok(JsString::from(v).into())
    }
}

/// The realm's own functions `JSON.stringify` needs for exotic objects,
/// taken at install (a script that replaces `Object.keys` does not change
/// how its values are encoded).
#[derive(Clone)]
struct Builtins {
    /// `Object.keys`: an object's own enumerable string keys, in order.
    keys: JsObject,
    /// `Array.isArray`: true for a Proxy of an array too.
    is_array: JsObject,
    /// `JSON.isRawJSON`.
    is_raw_json: JsObject,
}

impl Finalize for Builtins {}

// SAFETY: the three objects are the only GC pointers, all traced.
unsafe impl Trace for Builtins {
    boa_engine::gc::custom_trace!(this, mark, {
        mark(&this.keys);
        mark(&this.is_array);
        mark(&this.is_raw_json);
    });
}

/// `JSON.stringify(value, replacer, space)`.
fn stringify(b: &Builtins, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let (value, replacer) = (arg(0), arg(1));
    let mut w = Writer {
        b,
        out: String::new(),
        replacer: None,
        keys: None,
        gap: String::new(),
        indent: String::new(),
        stack: HashSet::new(),
        depth: 0,
    };
    if let Some(r) = replacer.as_object() {
        if r.is_callable() {
            w.replacer = Some(r.clone());
        } else if is_array(b, &r, ctx)? {
            w.keys = Some(property_list(&r, ctx)?);
        }
    }
    w.gap = gap(arg(2), ctx)?;
    // The spec's wrapper `{"": value}` is the root's holder: only a
    // replacer function can see it.
    let holder = match &w.replacer {
        Some(_) => {
            let wrapper = plain(ctx);
            wrapper.create_data_property_or_throw(js_string!(), value.clone(), ctx)?;
            Some(wrapper)
        }
        None => None,
    };
    let wrote = w.property(Key::Str(js_string!()), value, holder.as_ref(), ctx)?;
    Ok(if wrote {
        // boa's string of it: one byte a character when ASCII, else two.
        let wide = if w.out.is_ascii() { 1 } else { 2 };
        super::strbuild::room(w.out.len().saturating_mul(wide), "JSON.stringify")?;
        JsString::from(w.out.as_str()).into()
    } else {
        JsValue::undefined()
    })
}

/// The indentation `space` asks for: up to 10 spaces, or the first 10
/// code units of a string.
fn gap(space: JsValue, ctx: &mut Context) -> JsResult<String> {
    let space = match space.as_object() {
        Some(o) if o.is::<f64>() => JsValue::from(space.to_number(ctx)?),
        Some(o) if o.is::<JsString>() => JsValue::from(space.to_string(ctx)?),
        _ => space,
    };
    if let Some(n) = space.as_number() {
        let n = if n.is_nan() { 0.0 } else { n.trunc().min(10.0) };
        return Ok(" ".repeat(if n < 1.0 { 0 } else { n as usize }));
    }
    Ok(match space.as_string() {
        Some(s) => {
            let s = s.get(..10).unwrap_or(s);
            s.to_std_string_lossy()
        }
        None => String::new(),
    })
}

/// An array replacer's keys: strings, numbers, and String and Number
/// objects, each once, in order.
fn property_list(list: &JsObject, ctx: &mut Context) -> JsResult<Vec<JsString>> {
    let len = list.get(js_string!("length"), ctx)?.to_length(ctx)?;
    let mut out: Vec<JsString> = Vec::new();
    for i in 0..len {
        let v = list.get(i, ctx)?;
        let boxed = v
            .as_object()
            .is_some_and(|o| o.is::<JsString>() || o.is::<f64>());
        if v.is_string() || v.is_number() || boxed {
            let s = v.to_string(ctx)?;
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    Ok(out)
}

/// The realm's `Array.isArray` as [`install`] found it, kept in the realm
/// for the answer readers ([`is_array_like`]).
struct IsArray(JsObject);

impl Finalize for IsArray {}

// SAFETY: the one GC pointer, traced.
unsafe impl Trace for IsArray {
    boa_engine::gc::custom_trace!(this, mark, {
        mark(&this.0);
    });
}

impl boa_engine::JsData for IsArray {}

/// `IsArray(o)` as `JSON.stringify` asks it, for the answer readers: an
/// Array, or a Proxy whose target is one (Tyk's transport makes a list of
/// it, where boa's `is_array` says no).
pub(crate) fn is_array_like(o: &JsObject, ctx: &mut Context) -> JsResult<bool> {
    if o.is::<Proxy>() {
        let f = ctx
            .realm()
            .host_defined()
            .get::<IsArray>()
            .map(|f| f.0.clone());
        if let Some(f) = f {
            let v = f.call(&JsValue::undefined(), &[o.clone().into()], ctx)?;
            return Ok(v.to_boolean());
        }
    }
    Ok(o.is_array())
}

/// `IsArray(o)`: an Array, or a Proxy whose target is one.
fn is_array(b: &Builtins, o: &JsObject, ctx: &mut Context) -> JsResult<bool> {
    if o.is::<Proxy>() {
        let v = b
            .is_array
            .call(&JsValue::undefined(), &[o.clone().into()], ctx)?;
        return Ok(v.to_boolean());
    }
    Ok(o.is_array())
}

/// An object whose property table is all there is to it: no exotic
/// internal methods, so its own data properties can be read directly.
fn plain_table(o: &JsObject) -> bool {
    o.is_ordinary() || o.is_array()
}

/// A property name as it is handed to `toJSON` and the replacer.
enum Key {
    Str(JsString),
    Index(u32),
}

impl Key {
    fn js(&self) -> JsString {
        match self {
            Key::Str(s) => s.clone(),
            Key::Index(i) => JsString::from(*i),
        }
    }

    fn property(&self) -> PropertyKey {
        match self {
            Key::Str(s) => s.clone().into(),
            Key::Index(i) => (*i).into(),
        }
    }
}

/// One `JSON.stringify` call's state.
struct Writer<'b> {
    b: &'b Builtins,
    out: String,
    replacer: Option<JsObject>,
    keys: Option<Vec<JsString>>,
    gap: String,
    indent: String,
    /// The objects being written, by address (a cycle is a `TypeError`).
    stack: HashSet<usize>,
    depth: u32,
}

impl Writer<'_> {
    /// Makes sure `bytes` more fit in the output without its growing: it
    /// grows here only, doubling, each new block checked first against
    /// what the call may still allocate (`strbuild::room`). A call
    /// writing hundreds of MB grew it past the heap's ceiling and parked
    /// its VM thread for good; it is refused now. Every write is preceded
    /// by one of these, for at least what it writes.
    #[inline]
    fn room_for(&mut self, bytes: usize) -> JsResult<()> {
        if self.out.capacity() - self.out.len() >= bytes {
            return Ok(());
        }
        self.grow(bytes)
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, bytes: usize) -> JsResult<()> {
        let len = self.out.len();
        let want = len
            .saturating_add(bytes)
            .max(self.out.capacity().saturating_mul(2))
            .max(256);
        super::strbuild::room(want, "JSON.stringify")?;
        self.out.reserve_exact(want - len);
        Ok(())
    }

    /// `holder[key]`: straight from the table of a plain object or array.
    fn get(&self, holder: &JsObject, key: &Key, ctx: &mut Context) -> JsResult<JsValue> {
        let key = key.property();
        if plain_table(holder) {
            if let Some(v) = own_data(holder, &key) {
                return Ok(v);
            }
        }
        holder.get(key, ctx)
    }

    /// `SerializeJSONProperty`: writes the JSON of `value` (`holder[key]`,
    /// already read) and says whether there was one (`undefined`, a
    /// function or a symbol write nothing).
    fn property(
        &mut self,
        key: Key,
        mut value: JsValue,
        holder: Option<&JsObject>,
        ctx: &mut Context,
    ) -> JsResult<bool> {
        if value.is_object() || value.is_bigint() {
            let target = match value.as_object() {
                Some(o) => o,
                None => value.to_object(ctx)?,
            };
            let to_json = target.get(js_string!("toJSON"), ctx)?;
            if let Some(f) = to_json.as_callable() {
                value = f.call(&value, &[key.js().into()], ctx)?;
            }
        }
        if let Some(r) = &self.replacer {
            let this = holder.map_or_else(JsValue::undefined, |h| h.clone().into());
            value = r.call(&this, &[key.js().into(), value], ctx)?;
        }
        if let Some(o) = value.as_object() {
            if o.is::<f64>() {
                value = JsValue::from(value.to_number(ctx)?);
            } else if o.is::<JsString>() {
                value = JsValue::from(value.to_string(ctx)?);
            } else if let Some(b) = o.downcast_ref::<bool>() {
                value = JsValue::from(*b);
            } else if let Some(n) = o.downcast_ref::<JsBigInt>() {
                value = JsValue::from(n.clone());
            } else if o.prototype().is_none() && self.raw_json(&o, ctx)? {
                let raw = o.get(js_string!("rawJSON"), ctx)?;
                if let Some(raw) = raw.as_string() {
                    self.room_for(raw.len().saturating_mul(3))?;
                    self.out.push_str(&super::text::lossy(&raw));
                    return Ok(true);
                }
                return Ok(false);
            }
        }
        if value.is_null() {
            self.room_for(4)?;
            self.out.push_str("null");
        } else if let Some(b) = value.as_boolean() {
            self.room_for(5)?;
            self.out.push_str(if b { "true" } else { "false" });
        } else if let Some(s) = value.as_string() {
            self.room_for(quoted_bound(&s))?;
            quote(&mut self.out, &s);
        } else if let Some(n) = value.as_number() {
            // At most 25 characters (`-1.2345678901234567e-308`).
            self.room_for(32)?;
            number(&mut self.out, n);
        } else if value.is_bigint() {
            return Err(JsNativeError::typ()
                .with_message("cannot serialize bigint to JSON")
                .into());
        } else if let Some(o) = value.as_object().filter(|o| !o.is_callable()) {
            self.enter(&o)?;
            if is_array(self.b, &o, ctx)? {
                self.array(&o, ctx)?;
            } else {
                self.object(&o, ctx)?;
            }
            self.leave(&o);
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    fn raw_json(&self, o: &JsObject, ctx: &mut Context) -> JsResult<bool> {
        let v = self
            .b
            .is_raw_json
            .call(&JsValue::undefined(), &[o.clone().into()], ctx)?;
        Ok(v.to_boolean())
    }

    fn enter(&mut self, o: &JsObject) -> JsResult<()> {
        if !self.stack.insert(address(o)) {
            return Err(JsNativeError::typ()
                .with_message("cyclic object value")
                .into());
        }
        if self.depth >= super::depth::MAX_NESTING {
            return Err(super::depth::too_deep("JSON.stringify"));
        }
        self.depth += 1;
        self.indent.push_str(&self.gap);
        Ok(())
    }

    fn leave(&mut self, o: &JsObject) {
        self.stack.remove(&address(o));
        self.depth -= 1;
        self.indent.truncate(self.indent.len() - self.gap.len());
    }

    /// Before a member: the separator, and the line break and indent when
    /// `space` asked for them.
    fn separate(&mut self, first: bool) {
        if !first {
            self.out.push(',');
        }
        if !self.gap.is_empty() {
            self.out.push('\n');
            self.out.push_str(&self.indent);
        }
    }

    /// After the last member (`any`: there was one): the closing line.
    fn close(&mut self, any: bool, bracket: char) {
        if any && !self.gap.is_empty() {
            self.out.push('\n');
            let stepback = self.indent.len() - self.gap.len();
            self.out.push_str(&self.indent[..stepback]);
        }
        self.out.push(bracket);
    }

    /// What [`Writer::separate`] or [`Writer::close`] write at most,
    /// and four bytes more (`null`, a bracket).
    fn punctuation(&self) -> usize {
        self.indent.len() + 8
    }

    /// `SerializeJSONArray`.
    fn array(&mut self, a: &JsObject, ctx: &mut Context) -> JsResult<()> {
        let len = a.get(js_string!("length"), ctx)?.to_length(ctx)?;
        self.room_for(1)?;
        self.out.push('[');
        for i in 0..len {
            self.room_for(self.punctuation())?;
            self.separate(i == 0);
            let key = match u32::try_from(i) {
                Ok(i) => Key::Index(i),
                Err(_) => Key::Str(JsString::from(i)),
            };
            let value = self.get(a, &key, ctx)?;
            if !self.property(key, value, Some(a), ctx)? {
                self.out.push_str("null");
            }
        }
        self.room_for(self.punctuation())?;
        self.close(len > 0, ']');
        Ok(())
    }

    /// `SerializeJSONObject`.
    fn object(&mut self, o: &JsObject, ctx: &mut Context) -> JsResult<()> {
        let keys = match &self.keys {
            Some(list) => list.clone(),
            None => self.own_keys(o, ctx)?,
        };
        self.room_for(1)?;
        self.out.push('{');
        let mut any = false;
        for k in keys {
            let key = Key::Str(k);
            let value = self.get(o, &key, ctx)?;
            let mark = self.out.len();
            let name = match &key {
                Key::Str(name) => quoted_bound(name),
                Key::Index(_) => 12,
            };
            self.room_for(self.punctuation() + name)?;
            self.separate(!any);
            if let Key::Str(name) = &key {
                quote(&mut self.out, name);
            }
            self.out.push(':');
            if !self.gap.is_empty() {
                self.out.push(' ');
            }
            if self.property(key, value, Some(o), ctx)? {
                any = true;
            } else {
                self.out.truncate(mark);
            }
        }
        self.room_for(self.punctuation())?;
        self.close(any, '}');
        Ok(())
    }

    /// `EnumerableOwnProperties(o, key)`: from the table of a plain object,
    /// else through `Object.keys`.
    fn own_keys(&self, o: &JsObject, ctx: &mut Context) -> JsResult<Vec<JsString>> {
        if plain_table(o) {
            let keys = o.own_property_keys(ctx)?;
            let table = o.borrow();
            let props = table.properties();
            return Ok(keys
                .into_iter()
                .filter(|k| {
                    !matches!(k, PropertyKey::Symbol(_))
                        && props.get(k).is_some_and(|d| d.enumerable() == Some(true))
                })
                .map(|k| match k {
                    PropertyKey::String(s) => s,
                    PropertyKey::Index(i) => JsString::from(i.get()),
                    PropertyKey::Symbol(_) => unreachable!("filtered out"),
                })
                .collect());
        }
        let keys = self
            .b
            .keys
            .call(&JsValue::undefined(), &[o.clone().into()], ctx)?;
        let keys = keys
            .as_object()
            .ok_or_else(|| JsNativeError::typ().with_message("Object.keys gave no array"))?;
        let len = keys.get(js_string!("length"), ctx)?.to_length(ctx)?;
        (0..len).map(|i| keys.get(i, ctx)?.to_string(ctx)).collect()
    }
}

fn address(o: &JsObject) -> usize {
    std::ptr::from_ref(o.as_ref()) as *const u8 as usize
}

/// At least what [`quote`] writes for `s`: for a short string six bytes
/// a UTF-16 unit (`\u001f`, an escaped lone surrogate) and the quotes; a
/// long one is measured ([`quoted_len`]), since six times a 43 MiB base64
/// body (`tyk-json`'s answer) is more than a call's ceiling.
fn quoted_bound(s: &JsString) -> usize {
    if s.len() < 4096 {
        return s.len() * 6 + 2;
    }
    quoted_len(s)
}

/// What [`quote`] writes for `s`, a lone surrogate counted at six bytes
/// (a pair is four, at most twelve counted).
fn quoted_len(s: &JsString) -> usize {
    fn ascii_len(b: u16) -> usize {
        match b {
            0x22 | 0x5c | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 2,
            0..=0x1f => 6,
            _ => 1,
        }
    }
    let body: usize = match s.as_str().variant() {
        JsStrVariant::Latin1(bytes) => bytes
            .iter()
            .map(|&b| if b < 0x80 { ascii_len(u16::from(b)) } else { 2 })
            .sum(),
        JsStrVariant::Utf16(units) => units
            .iter()
            .map(|&u| match u {
                0..=0x7f => ascii_len(u),
                0x80..=0x7ff => 2,
                0xd800..=0xdfff => 6,
                _ => 3,
            })
            .sum(),
    };
    body + 2
}

/// `QuoteJSONString`, well-formed: a lone surrogate is escaped.
fn quote(out: &mut String, s: &JsString) {
    use std::fmt::Write as _;
    out.push('"');
    let one = |out: &mut String, c: char| match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\u{8}' => out.push_str("\\b"),
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\u{c}' => out.push_str("\\f"),
        '\r' => out.push_str("\\r"),
        c if c < ' ' => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => out.push(c),
    };
    match s.as_str().variant() {
        JsStrVariant::Latin1(bytes) => {
            // Runs of plain ASCII are copied whole.
            let mut run = 0;
            for (i, &b) in bytes.iter().enumerate() {
                if b < 0x20 || b == b'"' || b == b'\\' || !b.is_ascii() {
                    out.push_str(ascii(&bytes[run..i]));
                    one(out, char::from(b));
                    run = i + 1;
                }
            }
            out.push_str(ascii(&bytes[run..]));
        }
        JsStrVariant::Utf16(_) => {
            for cp in s.code_points() {
                match cp {
                    CodePoint::Unicode(c) => one(out, c),
                    CodePoint::UnpairedSurrogate(u) => {
                        let _ = write!(out, "\\u{u:04x}");
                    }
                }
            }
        }
    }
    out.push('"');
}

/// Bytes known to be ASCII, as text.
fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("ASCII is UTF-8")
}

/// A finite number as JS writes it (`Number::toString`); not finite: `null`.
fn number(out: &mut String, n: f64) {
    use std::fmt::Write as _;
    if !n.is_finite() {
        out.push_str("null");
    } else if n == n.trunc() && n.abs() < 1e15 {
        // An integer: its digits (minus zero is "0").
        let _ = write!(out, "{}", n as i64);
    } else {
        out.push_str(&JsString::from(n).to_std_string_lossy());
    }
}

#[cfg(test)]
mod tests {
    use boa_engine::{Context, Source};

    /// What `quote` writes is measured exactly (a lone surrogate at six
    /// bytes, a pair within its twelve), so the output's room is checked
    /// for what it really takes.
    #[test]
    fn quoted_len_is_what_quote_writes() {
        use boa_engine::JsString;
        let texts: [&[u16]; 6] = [
            &[],
            &[
                0x61, 0x22, 0x5c, 0x0a, 0x09, 0x08, 0x0c, 0x0d, 0x01, 0x1f, 0x7f, 0x20,
            ],
            &[0xe9, 0xff, 0x80, 0x61],
            &[0x4e2d, 0x6587, 0x7ff, 0x800, 0xffff],
            &[0xd83d, 0xde00, 0x61],
            &[0xd800, 0x61, 0xdc00],
        ];
        for units in texts {
            let s = JsString::from(units);
            let mut out = String::new();
            super::quote(&mut out, &s);
            let pairs = units
                .windows(2)
                .filter(|w| (0xd800..0xdc00).contains(&w[0]) && (0xdc00..0xe000).contains(&w[1]))
                .count();
            assert_eq!(
                super::quoted_len(&s),
                out.len() + pairs * 8,
                "{units:x?}: {out}"
            );
        }
        // Latin-1 as boa holds it.
        let s = JsString::from("a\"é\u{1}");
        let mut out = String::new();
        super::quote(&mut out, &s);
        assert_eq!(super::quoted_len(&s), out.len(), "{out}");
    }

    /// Runs `probe` (JS source whose value is a string) in a context with
    /// the native `JSON.parse` and in a stock boa context: the two must
    /// agree.
    ///
    /// On a script-sized stack, as the gateway runs scripts: boa's parser
    /// in a debug build needs more than a test thread's 2 MiB for nested
    /// function literals.
    fn both(probe: &str) -> (String, String) {
        let probe = probe.to_string();
        std::thread::Builder::new()
            .stack_size(crate::js::SCRIPT_STACK_SIZE)
            .spawn(move || {
                let run = |ctx: &mut Context| {
                    let v = ctx
                        .eval(Source::from_bytes(&probe))
                        .unwrap_or_else(|e| panic!("{probe}: {e}"));
                    v.to_string(ctx).unwrap().to_std_string_lossy()
                };
                let mut ours = Context::default();
                super::install(&mut ours).unwrap();
                let mut stock = Context::default();
                (run(&mut ours), run(&mut stock))
            })
            .unwrap()
            .join()
            .unwrap()
    }

    /// What a parse gives, written out so that any difference shows: the
    /// value's JSON, every object's own keys in order, the types, minus
    /// zero, or the error's type and message.
    const DESCRIBE: &str = r#"
        function describe(text) {
            function walk(v) {
                if (v === null || typeof v !== "object") {
                    return typeof v + ":" + (Object.is(v, -0) ? "-0" : String(v));
                }
                var own = Object.getOwnPropertyNames(v);
                return (Array.isArray(v) ? "[" : "{") + own.map(function (k) {
                    var d = Object.getOwnPropertyDescriptor(v, k);
                    var flags = (d.writable ? "w" : "") + (d.enumerable ? "e" : "") + (d.configurable ? "c" : "");
                    return JSON.stringify(k) + "/" + flags + "=" + walk(v[k]);
                }).join(",") + "|" + (Object.getPrototypeOf(v) === (Array.isArray(v) ? Array.prototype : Object.prototype)) + (Array.isArray(v) ? "]" : "}");
            }
            try {
                return walk(JSON.parse(text));
            } catch (e) {
                return e.name + ": " + e.message;
            }
        }
    "#;

    #[test]
    fn agrees_with_boas_own_json_parse() {
        let texts = [
            r#"{"b":1,"a":[true,false,null],"c":{"d":"e"}}"#,
            r#"{"a":1,"b":2,"a":3}"#,
            r#"{"__proto__":{"x":1},"y":2}"#,
            r#"{"2":"two","1":"one","b":"x","0":"zero","4294967295":"big","-1":"neg"}"#,
            r#"[0,-0,-0.0,1.5,-7,2147483647,2147483648,-2147483648,-2147483649]"#,
            r#"[9007199254740993,18446744073709551615,18446744073709551616,1e308,5e-324,1e-400]"#,
            r#"[0.1,0.2,0.30000000000000004,2.2250738585072011e-308,1.7976931348623157e308]"#,
            r#"[123456789012345678901234567890,3.141592653589793238462643383279]"#,
            r#""\u00e9\ud83d\ude00\n\t\"\\\/ é 😀""#,
            r#"{"":"empty","\u0000":"nul","ключ":"значение"}"#,
            "  \n [ ] ",
            "{}",
            "\"\"",
            "true",
            "null",
            "42",
            "[[[[[[[[[[1]]]]]]]]]]",
            // Refused: the same messages as boa's (serde_json's).
            "",
            "{",
            "[1,]",
            r#"{"a":1,}"#,
            "01",
            "1e400",
            "NaN",
            "'single'",
            r#""\ud800""#,
            "[1] x",
            "\"tab\there\"",
            "undefined",
        ];
        for text in texts {
            let probe = format!(
                "{DESCRIBE} describe({})",
                serde_json::to_string(text).unwrap()
            );
            let (ours, stock) = both(&probe);
            assert_eq!(ours, stock, "JSON.parse({text:?})");
        }
    }

    #[test]
    fn nesting_is_refused_where_boas_is() {
        // On a script-sized stack, as the gateway runs scripts: a debug
        // build's frames for 128 levels pass a test thread's 2 MiB.
        std::thread::Builder::new()
            .stack_size(crate::js::SCRIPT_STACK_SIZE)
            .spawn(nesting)
            .unwrap()
            .join()
            .unwrap();
    }

    fn nesting() {
        for depth in [127, 128, 129, 5000] {
            let probe = format!(
                "try {{ JSON.parse('['.repeat({depth}) + ']'.repeat({depth})).length + ' ok' }} catch (e) {{ e.name + ': ' + e.message }}"
            );
            let (ours, stock) = both(&probe);
            assert_eq!(ours, stock, "depth {depth}");
        }
    }

    #[test]
    fn revivers_and_the_functions_own_shape_are_boas() {
        let probes = [
            r#"JSON.stringify(JSON.parse('{"a":1,"b":[2,3]}', function (k, v) { return typeof v === "number" ? v * 10 : v; }))"#,
            r#"JSON.parse.name + "/" + JSON.parse.length + "/" + Object.keys(JSON).length + "/" + (typeof JSON.parse.prototype)"#,
            r#"(function () { try { new JSON.parse("1"); return "constructed"; } catch (e) { return e.name; } })()"#,
            r#"JSON.parse({ toString: function () { return '[1,2]'; } }).length + "/" + JSON.parse(12) + "/" + JSON.parse(true) + "/" + JSON.parse(null)"#,
            r#"(function () { try { JSON.parse(); return "parsed"; } catch (e) { return e.name + ": " + e.message; } })()"#,
            r#"String(JSON.parse('{"k": "v"}').hasOwnProperty("k")) + Object.getOwnPropertyNames(JSON.parse('[1,2]'))"#,
        ];
        for probe in probes {
            let (ours, stock) = both(probe);
            assert_eq!(ours, stock, "{probe}");
        }
    }

    #[test]
    fn thousands_of_parses_in_one_context_stay_right() {
        // Each result is garbage once the next replaces it.
        let mut ctx = Context::default();
        super::install(&mut ctx).unwrap();
        let probe = r#"
            var text = JSON.stringify({message: "hello", path: "/x", headers: {"A": ["b"], "C": ["d", "e"]}, n: [1, 2.5, -3]});
            var last;
            for (var i = 0; i < 5000; i++) { last = JSON.parse(text); }
            JSON.stringify(last) === text
        "#;
        let v = ctx.eval(Source::from_bytes(probe)).unwrap();
        assert_eq!(v.as_boolean(), Some(true));
    }

    /// `expr` evaluated as the value of a function (its own statements
    /// first, `;`-separated), as a string, or its error's name and message.
    fn guarded(expr: &str) -> String {
        format!(
            "(function () {{ try {{ return String((function () {{ {expr} }})()); }} catch (e) {{ return e.name + ': ' + e.message; }} }})()"
        )
    }

    #[test]
    fn stringify_agrees_with_boas_own() {
        let bodies = [
            r#"return JSON.stringify({b: 1, a: [true, false, null, undefined, function () {}, Symbol()], c: {d: "e"}})"#,
            r#"return JSON.stringify({u: undefined, f: function () {}, s: Symbol("x"), n: null})"#,
            r#"return JSON.stringify("\u2028\u2029\ud800\udc00 \ud800 \udfff \b\f\n\r\t\"\\ \x01\x1f\x7f é ÿ 😀 ☃")"#,
            r#"return JSON.stringify([0, -0, 1.5, -7, 1e21, 1e-7, 123456789012345680000, 0.1 + 0.2, NaN, Infinity, -Infinity, 2 ** 53, 2 ** 53 + 2, 1e15, 999999999999999, 5e-324, 1.7976931348623157e308, -1e-300])"#,
            r#"return JSON.stringify({2: "two", 1: "one", b: "x", 0: "zero", "-1": "neg", 4294967295: "big", 4294967294: "max"})"#,
            r#"return JSON.stringify([new Date(0), new Date(NaN)])"#,
            r#"return JSON.stringify({toJSON: function (k) { return "key:" + k; }})"#,
            r#"return JSON.stringify({a: {toJSON: function (k) { return [k, this.x]; }, x: 5}, b: [{toJSON: function (k) { return typeof k + k; }}]})"#,
            r#"return JSON.stringify([new Number(3), new String("s"), new Boolean(false), Object("x")])"#,
            r#"return JSON.stringify(Object(1n))"#,
            r#"return JSON.stringify({a: 1n})"#,
            r#"BigInt.prototype.toJSON = function () { return this.toString() + "n"; }; try { return JSON.stringify([1n, {b: 2n}]); } finally { delete BigInt.prototype.toJSON; }"#,
            r#"return JSON.stringify({a: 1, b: [1, 2], c: {d: 2}}, function (k, v) { return typeof v === "number" ? v * 2 : v; })"#,
            r#"return JSON.stringify({a: 1}, function (k, v) { return k === "" ? {wrapped: Object.keys(this), key: k} : v; })"#,
            r#"return JSON.stringify([1, 2], function (k, v) { return Array.isArray(this) ? typeof k + k : v; })"#,
            r#"return JSON.stringify({b: 1, a: 2, c: {a: 3, b: 4, 1: 5}}, ["a", "b", 1, new String("c"), "a", {}, true])"#,
            r#"return JSON.stringify([{b: 1, a: 2}], ["a"])"#,
            r#"return JSON.stringify({a: [1, {b: 2}], c: [], d: {}, e: "x"}, null, 2)"#,
            r#"return JSON.stringify({a: [1, {b: 2}], c: []}, null, "--")"#,
            r#"return JSON.stringify({a: [1]}, null, 20)"#,
            r#"return JSON.stringify({a: [1]}, null, new Number(3))"#,
            r#"return JSON.stringify({a: [1]}, null, new String("ab"))"#,
            r#"return JSON.stringify({a: [1]}, null, "abcdefghijklmnop")"#,
            r#"return [0, -1, 3.7, NaN, Infinity, -Infinity, true, null].map(function (s) { return JSON.stringify({a: [1]}, null, s); }).join("|")"#,
            r#"var o = {}; o.self = o; return JSON.stringify(o)"#,
            r#"var a = []; a.push([a]); return JSON.stringify(a)"#,
            r#"var x = {v: 1}; return JSON.stringify([x, x, {y: x}])"#,
            r#"return JSON.stringify({get a() { return 1; }, b: 2})"#,
            r#"var log = []; var o = {get a() { log.push("a"); delete this.b; this.d = 4; return 1; }, b: 2, get c() { log.push("c"); return 3; }}; return JSON.stringify(o) + log.join()"#,
            r#"return JSON.stringify(Object.defineProperty({x: 1}, "h", {value: 1, enumerable: false}))"#,
            r#"var o = {}; o[Symbol("s")] = 1; o.x = 2; return JSON.stringify(o)"#,
            r#"return JSON.stringify(new Proxy({a: 1, b: 2}, {get: function (t, k) { return k === "a" ? 10 : t[k]; }}))"#,
            r#"return JSON.stringify(new Proxy([1, 2, 3], {}))"#,
            r#"var log = []; var p = new Proxy({}, {ownKeys: function () { log.push("keys"); return ["x", "y"]; }, getOwnPropertyDescriptor: function (t, k) { log.push("desc " + k); return {value: k, enumerable: k === "x", configurable: true}; }, get: function (t, k) { log.push("get " + String(k)); return String(k).toUpperCase(); }}); return JSON.stringify({p: p}) + log.join()"#,
            r#"return JSON.stringify([new Uint8Array([1, 2, 3]), new Float64Array([0.5])])"#,
            r#"return (function () { return JSON.stringify(arguments); })(1, "a")"#,
            r#"return JSON.stringify(new String("abc")) + JSON.stringify(new Number(-0)) + JSON.stringify(new Boolean(true))"#,
            r#"return typeof JSON.rawJSON === "function" ? JSON.stringify({a: JSON.rawJSON("1e1000"), b: [JSON.rawJSON("\"x\"")]}) : "no rawJSON""#,
            r#"var n = Object.create(null); n.a = 1; n.toJSON = 5; return JSON.stringify([n])"#,
            r#"function P() { this.own = 1; } P.prototype.inh = 2; return JSON.stringify(new P())"#,
            r#"return JSON.stringify({a: {toJSON: function () { return undefined; }}, b: 1, c: [{toJSON: function () {}}]})"#,
            r#"return String(JSON.stringify(undefined)) + String(JSON.stringify(function () {})) + String(JSON.stringify(Symbol())) + JSON.stringify(null)"#,
            r#"return JSON.stringify([new Map([[1, 2]]), new Set([1]), new Error("x"), /re/g, Math])"#,
            r#"var a = [1, , 3]; a.x = 5; return JSON.stringify([a, new Array(3), []]) + JSON.stringify([], null, 2) + JSON.stringify({}, null, 2)"#,
            r#"return JSON.stringify({"\n": 1, "\"q\"": 2, "é": 3, "\ud800": 4, "": 5})"#,
            r#"return JSON.stringify({toJSON: function () { throw new Error("boom"); }})"#,
            r#"return JSON.stringify({get a() { throw new TypeError("getter"); }})"#,
            r#"return JSON.stringify({a: 1}, function () { return function () {}; })"#,
            r#"return JSON.stringify(1, function (k, v) { return k === "" ? [k, v, this[""]] : v; })"#,
            r#"return JSON.stringify.name + "/" + JSON.stringify.length + "/" + Object.keys(JSON).length"#,
            r#"return JSON.stringify("x".repeat(3000) + "é".repeat(2000) + "☃".repeat(1000)).length"#,
            r#"return JSON.stringify({a: [{b: {c: [1, "two", {d: null}]}}]}, null, "\t")"#,
            r#"var o = {a: 1}; Object.defineProperty(o, "b", {get: function () { return 2; }, enumerable: true}); Object.freeze(o); return JSON.stringify(o)"#,
            r#"return JSON.stringify(JSON.parse('{"b":1,"a":{"c":[1,2,{"d":"e"}]},"__proto__":3}'))"#,
        ];
        for body in bodies {
            let (ours, stock) = both(&guarded(body));
            assert_eq!(ours, stock, "{body}");
        }
    }

    #[test]
    fn stringify_bounds_nesting_with_a_range_error() {
        std::thread::Builder::new()
            .stack_size(crate::js::SCRIPT_STACK_SIZE)
            .spawn(|| {
                let mut ctx = Context::default();
                super::install(&mut ctx).unwrap();
                let deep = |n: u32, open: &str, close: &str| {
                    guarded(&format!(
                        "var v = 1; for (var i = 0; i < {n}; i++) {{ v = {open}v{close}; }} return JSON.stringify(v).length"
                    ))
                };
                let run = |ctx: &mut Context, src: String| {
                    let v = ctx.eval(Source::from_bytes(&src)).unwrap();
                    v.to_string(ctx).unwrap().to_std_string_lossy()
                };
                let max = super::super::depth::MAX_NESTING;
                assert_eq!(run(&mut ctx, deep(max, "[", "]")), (2 * max + 1).to_string());
                for (open, close) in [("[", "]"), ("{a: ", "}")] {
                    assert_eq!(
                        run(&mut ctx, deep(max + 1, open, close)),
                        format!("RangeError: JSON.stringify: value nested deeper than {max} levels")
                    );
                }
                // A replacer that nests deeper at every level is stopped too.
                let src = guarded(
                    "var n = 0; return JSON.stringify({}, function (k, v) { n++; return {a: n}; })",
                );
                assert_eq!(
                    run(&mut ctx, src),
                    format!("RangeError: JSON.stringify: value nested deeper than {max} levels")
                );
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
