//! `String.prototype.repeat` and `Array.prototype.join` for boa, each
//! built in one buffer the size of its result.
//!
//! boa 0.22's make a vector first: `repeat` one 16-byte slice per copy,
//! `join` one 8-byte string per element and one per separator, then the
//! result. So `"x".repeat(16e6)`, a 16 MB string well within
//! `--jsvm-memory`, asked for one 256 MB block; `new Array(8e6 + 1)
//! .join("x")` and `Array.prototype.join.call({length: 8e6})` for 128 MB
//! more than the array. One block past the heap's ceiling (`heap.rs`)
//! cannot be refused by the allocator, and the VM thread making it was
//! stopped there for good, its API served by a new thread until the
//! parked ones filled their budget (then by none until a restart): each
//! such request took one. Scripts pad and mask with both (`"*".repeat(
//! secret.length)`, the pre-ES2015 `new Array(n + 1).join(c)`), so `n` can
//! come from a request.
//!
//! Here the result grows in a boa string builder, Latin-1 until a UTF-16
//! piece comes, and each growth is checked first against what the call may
//! still allocate ([`crate::heap::room`]): past it the call gets a
//! `RangeError` (out of memory) and nothing is allocated. A result within
//! the room is made; the slice check then holds the heap to the limit as
//! for anything a script makes.
//!
//! `join` over more elements than boa's loop iteration limit (`vm.rs`,
//! 1e8) throws boa's `RuntimeLimitError` before looping, as boa's own
//! `repeat` charged that limit per copy: a call cannot spend minutes in
//! one native loop over `{length: 4e9}`.
//!
//! The rest is the spec's, as boa's: `repeat`'s `RangeError`s, `join`'s
//! `ToObject`, `LengthOfArrayLike`, `","` for an undefined separator,
//! `""` for `undefined` and `null` elements, getters and `toString`s run in
//! order. An element that is the array itself is `""` (boa's guard against
//! the cycle; other engines keep a set); boa also gave `""` for an element
//! equal to a primitive `this` (`Array.prototype.join.call("a")` was `""`,
//! not `"a"`), which is gone.

use boa_engine::string::{JsStr, JsStrVariant, Latin1JsStringBuilder, Utf16JsStringBuilder};
use boa_engine::value::IntegerOrInfinity;
use boa_engine::{js_string, Context, JsNativeError, JsObject, JsResult, JsString, JsValue};

/// The longest string boa makes (its `MAX_STRING_LENGTH`, in UTF-16 units).
const MAX_STRING_LENGTH: u64 = u32::MAX as u64;

/// Installs both in `ctx`, replacing boa's.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let string = ctx.intrinsics().constructors().string().prototype();
    let repeat = boa_engine::NativeFunction::from_fn_ptr(repeat);
    super::depth::replace(&string, "repeat", 1, repeat, ctx)?;
    let array = ctx.intrinsics().constructors().array().prototype();
    let join = boa_engine::NativeFunction::from_fn_ptr(join);
    super::depth::replace(&array, "join", 1, join, ctx)?;
    Ok(())
}

/// `String.prototype.repeat(count)`.
fn repeat(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let s = this.require_object_coercible()?.to_string(ctx)?;
    let count = args.first().cloned().unwrap_or_default();
    let n = match count.to_integer_or_infinity(ctx)? {
        IntegerOrInfinity::Integer(n) if n >= 0 => n as u64,
        IntegerOrInfinity::PositiveInfinity => {
            return Err(range(
                "String.prototype.repeat: count must be less than infinity",
            ))
        }
        _ => return Err(range("String.prototype.repeat: count must be non-negative")),
    };
    if n == 0 || s.is_empty() {
        return Ok(js_string!().into());
    }
    let units = n
        .checked_mul(s.len() as u64)
        .filter(|&u| u <= MAX_STRING_LENGTH);
    let Some(units) = units else {
        return Err(range(
            "repeat count must be a positive finite number that doesn't overflow the maximum string length (2^32 - 1)",
        ));
    };
    let units = units as usize;
    let what = "String.prototype.repeat";
    Ok(match s.as_str().variant() {
        JsStrVariant::Latin1(bytes) => {
            room(units, what)?;
            let mut b = Latin1JsStringBuilder::with_capacity(units);
            fill(bytes, n, |c| b.extend_from_slice(c));
            // SAFETY: copies of a Latin-1 string.
            unsafe { b.build_as_latin1() }
        }
        JsStrVariant::Utf16(wide) => {
            room(units.saturating_mul(2), what)?;
            let mut b = Utf16JsStringBuilder::with_capacity(units);
            fill(wide, n, |c| b.extend_from_slice(c));
            b.build()
        }
    }
    .into())
}

/// Writes `piece` `n` times through `write`, a few KiB at a time rather
/// than one call per copy (per character, for a one-character string).
fn fill<T: Copy>(piece: &[T], n: u64, mut write: impl FnMut(&[T])) {
    let per = (4096 / piece.len()).max(1) as u64;
    if n <= per {
        // A short result (most): no chunk to make.
        for _ in 0..n {
            write(piece);
        }
        return;
    }
    let chunk: Vec<T> = (0..per.min(n))
        .flat_map(|_| piece.iter().copied())
        .collect();
    let per = per.min(n);
    for _ in 0..n / per {
        write(&chunk);
    }
    let rest = (n % per) as usize * piece.len();
    write(&chunk[..rest]);
}

/// `Array.prototype.join(separator)`.
fn join(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let o = this.to_object(ctx)?;
    let len = o.get(js_string!("length"), ctx)?.to_length(ctx)?;
    let sep = match args.first() {
        None => js_string!(","),
        Some(v) if v.is_undefined() => js_string!(","),
        Some(v) => v.to_string(ctx)?,
    };
    // boa counts a builtin's own loops against the loop iteration limit
    // (its `repeat` did, per copy): past it, nothing is looped over. And a
    // result whose separators alone could not fit is refused before.
    let limit = ctx.runtime_limits().loop_iteration_limit();
    if len > limit {
        return Err(boa_engine::error::RuntimeLimitError::LoopIteration.into());
    }
    let seps = (len.saturating_sub(1) as usize).saturating_mul(sep.len());
    let wide = if matches!(sep.as_str().variant(), JsStrVariant::Utf16(_)) {
        2
    } else {
        1
    };
    room(seps.saturating_mul(wide), JOIN)?;
    let mut out = Builder::default();
    for k in 0..len {
        if k > 0 {
            out.push(sep.as_str())?;
        }
        let element = o.get(k, ctx)?;
        if element.is_null_or_undefined() || is(&element, &o) {
            continue;
        }
        let next = element.to_string(ctx)?;
        out.push(next.as_str())?;
    }
    Ok(out.build().into())
}

/// Whether `v` is the object `o`.
fn is(v: &JsValue, o: &JsObject) -> bool {
    v.as_object().is_some_and(|e| JsObject::equals(&e, o))
}

fn range(msg: &str) -> boa_engine::JsError {
    JsNativeError::range().with_message(msg.to_string()).into()
}

/// A string under construction: Latin-1 while every piece is, UTF-16
/// from the first piece that is not.
enum Builder {
    Latin1(Latin1JsStringBuilder),
    Utf16(Utf16JsStringBuilder),
}

impl Default for Builder {
    fn default() -> Self {
        Builder::Latin1(Latin1JsStringBuilder::new())
    }
}

impl Builder {
    /// Appends `piece`, the builder's growth (doubling, as a vector's)
    /// checked first against what the call may still allocate.
    fn push(&mut self, piece: JsStr<'_>) -> JsResult<()> {
        if piece.is_empty() {
            return Ok(());
        }
        if let (Builder::Latin1(b), JsStrVariant::Utf16(_)) = (&*self, piece.variant()) {
            // Widened: every unit so far becomes two bytes.
            let want = grown(b.len(), b.len(), piece.len());
            room(want.saturating_mul(2), JOIN)?;
            let mut wide = Utf16JsStringBuilder::with_capacity(want);
            widen(&mut wide, b.as_slice());
            *self = Builder::Utf16(wide);
        }
        match (self, piece.variant()) {
            (Builder::Latin1(b), JsStrVariant::Latin1(bytes)) => {
                if let Some(more) = growth(b.len(), b.capacity(), bytes.len(), 1)? {
                    b.reserve_exact(more);
                }
                b.extend_from_slice(bytes);
            }
            (Builder::Utf16(b), variant) => {
                if let Some(more) = growth(b.len(), b.capacity(), piece.len(), 2)? {
                    b.reserve_exact(more);
                }
                match variant {
                    JsStrVariant::Latin1(bytes) => widen(b, bytes),
                    JsStrVariant::Utf16(units) => b.extend_from_slice(units),
                }
            }
            (Builder::Latin1(_), JsStrVariant::Utf16(_)) => unreachable!("widened above"),
        }
        Ok(())
    }

    fn build(self) -> JsString {
        match self {
            // SAFETY: only Latin-1 pieces went in.
            Builder::Latin1(b) => unsafe { b.build_as_latin1() },
            Builder::Utf16(b) => b.build(),
        }
    }
}

/// Appends Latin-1 `bytes` to a UTF-16 builder, a stack buffer at a time
/// (its `extend` checks the capacity per unit).
fn widen(b: &mut Utf16JsStringBuilder, bytes: &[u8]) {
    let mut buf = [0u16; 128];
    for part in bytes.chunks(buf.len()) {
        for (w, &c) in buf.iter_mut().zip(part) {
            *w = u16::from(c);
        }
        b.extend_from_slice(&buf[..part.len()]);
    }
}

/// Named in `join`'s out-of-memory error.
const JOIN: &str = "Array.prototype.join";

/// The capacity a buffer of `len` units (capacity `cap`) grows to for
/// `add` more: doubled, at least 16, at least what it needs.
fn grown(len: usize, cap: usize, add: usize) -> usize {
    len.saturating_add(add).max(cap.saturating_mul(2)).max(16)
}

/// How many units to reserve past `len` before `add` more go into a
/// buffer of capacity `cap` (units of `unit` bytes): `None` when they
/// fit; the grown block ([`grown`]) checked first.
fn growth(len: usize, cap: usize, add: usize, unit: usize) -> JsResult<Option<usize>> {
    if len + add <= cap {
        return Ok(None);
    }
    let want = grown(len, cap, add);
    room(want.saturating_mul(unit), JOIN)?;
    Ok(Some(want - len))
}

/// How a [`refusal`]'s message starts.
const OUT_OF_MEMORY: &str = "out of memory: ";

/// Whether a call's error `text` is a block refused for the call's heap:
/// this module's, or boa's for an `ArrayBuffer` past `compile::Hooks`'s
/// bound. The call is counted `out_of_memory` (`vm.rs`); a script's own
/// `RangeError` with the same message is counted so too.
pub(crate) fn refused(text: &str) -> bool {
    text.strip_prefix("RangeError: ").is_some_and(|message| {
        is_refusal(message)
            || message.starts_with("cannot allocate a buffer that exceeds the maximum buffer size")
    })
}

/// Refuses a block of `bytes` past what the call may still allocate
/// (the host's `JSON.stringify` asks too, `json.rs`).
pub(crate) fn room(bytes: usize, what: &str) -> JsResult<()> {
    match refusal(bytes, what) {
        Some(why) => Err(range(&why)),
        None => Ok(()),
    }
}

/// Why a block of `bytes` is refused (`out of memory: ...`), when it is
/// past what the call may still allocate ([`crate::heap::room`]; nothing
/// where nothing bounds the call).
pub(crate) fn refusal(bytes: usize, what: &str) -> Option<String> {
    let room = crate::heap::room().filter(|&room| bytes > room)?;
    Some(format!(
        "{OUT_OF_MEMORY}{what} would allocate {}, more than the script may still allocate ({} left under --jsvm-memory's ceiling)",
        super::memory::mib(bytes),
        super::memory::mib(room)
    ))
}

/// Whether `message` (an error's, without its kind) is a [`refusal`].
pub(crate) fn is_refusal(message: &str) -> bool {
    message.starts_with(OUT_OF_MEMORY)
}

#[cfg(test)]
mod tests {
    use boa_engine::{Context, Source};

    fn eval(ctx: &mut Context, code: &str) -> String {
        match ctx.eval(Source::from_bytes(code)) {
            Ok(v) => v.to_string(ctx).unwrap().to_std_string_escaped(),
            Err(e) => format!("threw {e}"),
        }
    }

    /// The host's `repeat` and `join` answer as boa's own on a corpus of
    /// ordinary and odd calls (errors included), but for boa's `""` for an
    /// element equal to a primitive `this`.
    #[test]
    fn repeat_and_join_answer_as_boa_s_own() {
        let corpus = [
            "'ab'.repeat(3)",
            "'ab'.repeat(0)",
            "''.repeat(1e9)",
            "'é'.repeat(3)",
            "'\\u{1F600}'.repeat(2).length",
            "'x'.repeat(2.9)",
            "'x'.repeat('2')",
            "'x'.repeat(-1)",
            "'x'.repeat(Infinity)",
            "'x'.repeat(NaN)",
            "'xx'.repeat(2 ** 31)",
            "String.prototype.repeat.call(null, 2)",
            "String.prototype.repeat.call(12, 2)",
            "String.prototype.repeat.call({toString() { return 'o'; }}, 3)",
            "'x'.repeat({valueOf() { throw new Error('count'); }})",
            "[1, 2, 3].join()",
            "[1, 2, 3].join(undefined)",
            "[1, 2, 3].join(null)",
            "[1, 2, 3].join('')",
            "[1, null, undefined, , 5].join('-')",
            "['a', 'é', '\\u{1F600}', 'b'].join('|')",
            "['é', 'a'].join('\\u{1F600}')",
            "[[1, 2], [3, [4]]].join(';')",
            "(function () { var a = [1]; a.push(a); a.push(2); return a.join(); })()",
            "Array.prototype.join.call({length: 3, 0: 'a', 2: 'c'}, '+')",
            "Array.prototype.join.call({length: -5})",
            "Array.prototype.join.call({length: '2', 0: 'x', 1: 'y'})",
            "Array.prototype.join.call('abc', '.')",
            "Array.prototype.join.call(null)",
            "[{toString() { throw new Error('elem'); }}].join()",
            "[1, 2].join({toString() { return '::'; }})",
            "(function () { var log = []; var o = {length: 2, get 0() { log.push('g0'); return {toString() { log.push('s0'); return 'A'; }}; }, get 1() { log.push('g1'); return 'B'; }}; return Array.prototype.join.call(o) + ' ' + log.join(); })()",
            "new Array(5).join('ab')",
            "[].join()",
            "[Symbol('s')].join()",
            "String.prototype.repeat.name + String.prototype.repeat.length + Array.prototype.join.name + Array.prototype.join.length",
            "Object.getOwnPropertyDescriptor(Array.prototype, 'join').enumerable",
            "typeof new Array(3).toString()",
            "[1, [2, 3]].toString()",
        ];
        let mut theirs = Context::default();
        let mut ours = Context::default();
        super::install(&mut ours).unwrap();
        for code in corpus {
            assert_eq!(eval(&mut ours, code), eval(&mut theirs, code), "{code}");
        }
        // boa's own gave "" for an element equal to a primitive `this`.
        assert_eq!(eval(&mut ours, "Array.prototype.join.call('a')"), "a");
        assert_eq!(eval(&mut theirs, "Array.prototype.join.call('a')"), "");
    }
}
