//! A bound on the nesting depth boa's recursive builtins may reach.
//!
//! boa's recursion limit counts interpreter frames. Some builtins recurse on
//! the machine stack instead, one or more Rust frames per level of the value
//! they walk, with no bound of their own: `JSON.stringify` of a 2,000-deep
//! object overflowed a 2 MiB worker stack and aborted the process. Measured
//! with `cargo bench -p gateway --bench js_stack_depth` (bytes of stack per
//! level, 2,000 levels; dev build, whose dependencies are `opt-level = 2`):
//!
//! | builtin                          | bytes/level |
//! |----------------------------------|------------:|
//! | `JSON.stringify` (objects)       |       1,090 |
//! | `JSON.stringify` (arrays)        |       1,026 |
//! | `String(array)` (join/toString)  |       2,770 |
//! | `Array.prototype.flat(Infinity)` |         290 |
//! | Proxy chain `[[Get]]`            |         401 |
//! | prototype chain lookup           |         225 |
//! | bound function chain             | (iterative) |
//!
//! The host's own `JSON.stringify` (`json.rs`, which replaced boa's), in
//! the release build the same bench runs by default: 707 bytes per level
//! of objects and 515 of arrays, against boa's 1,250 and 1,218 there.
//!
//! `JSON.parse` is bounded already: the host's (`json.rs`) reads the text
//! with serde_json, whose recursion limit (128) refuses deeper text with a
//! `SyntaxError`, as boa's own did.
//!
//! Two defences, together:
//!
//! 1. Scripts run on threads with a [`SCRIPT_STACK_SIZE`] stack (reserved,
//!    committed only when touched).
//! 2. The builtins a script reaches with request data are wrapped here so
//!    that no call nests past [`MAX_NESTING`] levels; deeper throws a
//!    `RangeError`, which fails that request only (or is caught by the
//!    script). At the worst measured cost (`String(array)`, ~2.8 KB per
//!    level plus our wrapper's frame), [`MAX_NESTING`] levels use under
//!    40 MiB, a sixth of the stack.
//!
//!    - `Array.prototype.join`, `toString`, `toLocaleString`: recursion
//!      passes through these (an element's `ToString` calls its `toString`,
//!      which calls `join`), so a per-thread depth counter around them sees
//!      every level.
//!    - `JSON.stringify` is the host's (`json.rs`), which counts its own
//!      levels. (Before it, a wrapper passed boa's a replacer function
//!      that recorded each object's depth: a native call per value.)
//!    - `Array.prototype.flat`: the depth argument is capped.
//!
//! Prototype chains need no wrapper: boa walks them in a loop. Proxy chains
//! do recurse, one level per proxy, and a million of them fit in a few MB
//! (under `--jsvm-memory`): every proxy has the host's handler, whose
//! traps check the stack left (`proxy.rs`). Source text compiled at run
//! time (`eval`, `new Function`) is bounded by its length (`compile.rs`).
//!
//! [`SCRIPT_STACK_SIZE`]: super::vmthread::SCRIPT_STACK_SIZE

use std::cell::Cell;

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::property::PropertyDescriptor;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction};

/// Deepest nesting a wrapped builtin may reach.
pub(crate) const MAX_NESTING: u32 = 10_000;

thread_local! {
    /// Nesting of the wrapped array builtins on this thread.
    static ARRAY_DEPTH: Cell<u32> = const { Cell::new(0) };
}

pub(super) fn too_deep(what: &str) -> boa_engine::JsError {
    JsNativeError::range()
        .with_message(format!(
            "{what}: value nested deeper than {MAX_NESTING} levels"
        ))
        .into()
}

/// One level of the array builtins' recursion; leaving it (however) pops it.
struct Level;

impl Level {
    fn enter(what: &str) -> JsResult<Level> {
        ARRAY_DEPTH.with(|d| {
            if d.get() >= MAX_NESTING {
                return Err(too_deep(what));
            }
            d.set(d.get() + 1);
            Ok(Level)
        })
    }
}

impl Drop for Level {
    fn drop(&mut self) {
        ARRAY_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Wraps the recursive builtins of `ctx`'s realm. Called once per context,
/// before the prelude.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let array_proto = ctx.intrinsics().constructors().array().prototype();
    for (name, length) in [("join", 1), ("toString", 0), ("toLocaleString", 0)] {
        let original = method(&array_proto, name, ctx)?;
        let f = NativeFunction::from_copy_closure_with_captures(
            |this, args, (orig, name): &(JsObject, JsString), ctx| {
                let _level =
                    Level::enter(&format!("Array.prototype.{}", name.to_std_string_lossy()))?;
                orig.call(this, args, ctx)
            },
            (original, JsString::from(name)),
        );
        replace(&array_proto, name, length, f, ctx)?;
    }

    let original = method(&array_proto, "flat", ctx)?;
    let flat = NativeFunction::from_copy_closure_with_captures(
        |this, args, orig: &JsObject, ctx| {
            let depth = match args.first() {
                Some(v) if !v.is_undefined() => v.to_number(ctx)?,
                _ => 1.0,
            };
            let capped = JsValue::from(depth.min(f64::from(MAX_NESTING)));
            orig.call(this, &[capped], ctx)
        },
        original,
    );
    replace(&array_proto, "flat", 0, flat, ctx)?;
    Ok(())
}

pub(super) fn method(obj: &JsObject, name: &str, ctx: &mut Context) -> JsResult<JsObject> {
    obj.get(JsString::from(name), ctx)?
        .as_object()
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message(format!("{name} is not an object"))
                .into()
        })
}

/// Installs `f` as `obj[name]` with a builtin's attributes, name and
/// length; returns the function object.
pub(super) fn replace(
    obj: &JsObject,
    name: &str,
    length: usize,
    f: NativeFunction,
    ctx: &mut Context,
) -> JsResult<JsObject> {
    let func = FunctionObjectBuilder::new(ctx.realm(), f)
        .name(JsString::from(name))
        .length(length)
        .constructor(false)
        .build();
    obj.define_property_or_throw(
        JsString::from(name),
        PropertyDescriptor::builder()
            .value(func.clone())
            .writable(true)
            .enumerable(false)
            .configurable(true),
        ctx,
    )?;
    Ok(func.into())
}
