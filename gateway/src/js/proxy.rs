//! `Proxy` for boa, with the stack checked at every level of a chain.
//!
//! boa 0.22's Proxy internal methods call the target's own (`[[Get]]` of a
//! proxy without a `get` trap is the target's `[[Get]]`), one Rust frame
//! per proxy and no depth check: a script that wrapped an object in a
//! million proxies (a one-line loop, a few MB of heap, so under
//! `--jsvm-memory`) and read a property overflowed the thread's stack and
//! aborted the gateway; `eval` of a request body could do it.
//!
//! Here every proxy a script makes has the host's handler: an object
//! inheriting the host's thirteen traps and holding the script's handler.
//! Each trap first checks the stack left on the thread
//! (`compile::remaining_stack`), and throws a `RangeError` below
//! [`RESERVE`], what a compile leaves too; then it does what the spec does with the script's handler:
//! calls its trap of that name with the same arguments and the handler as
//! `this` when it has one (a trap that is not callable is a `TypeError`),
//! else the default, which is `Reflect`'s function of the same name. So
//! each proxy level passes through a check, and what a script observes is
//! unchanged, but for time (a native call per trap), and `Proxy` called
//! with a constructor as `this` (`Proxy.call(Object, t, h)`), which makes
//! a proxy where the spec throws (a native function cannot tell that call
//! from `new`).

use boa_engine::gc::{Finalize, Trace};
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::property::PropertyDescriptor;
use boa_engine::{
    js_string, Context, JsData, JsNativeError, JsObject, JsResult, JsString, JsValue,
    NativeFunction,
};

use super::compile::{remaining_stack, RESERVE};
use super::depth::method;

/// The traps a handler may have, each with the `Reflect` function that is
/// its default (same name, same arguments).
const TRAPS: [(&str, usize); 13] = [
    ("apply", 3),
    ("construct", 2),
    ("defineProperty", 3),
    ("deleteProperty", 2),
    ("get", 2),
    ("getOwnPropertyDescriptor", 2),
    ("getPrototypeOf", 1),
    ("has", 2),
    ("isExtensible", 1),
    ("ownKeys", 1),
    ("preventExtensions", 1),
    ("set", 3),
    ("setPrototypeOf", 2),
];

/// The handler the host gives every proxy: the script's, held.
struct HostHandler {
    user: JsObject,
}

impl Finalize for HostHandler {}

// SAFETY: `user` is the only GC pointer, traced.
unsafe impl Trace for HostHandler {
    boa_engine::gc::custom_trace!(this, mark, mark(&this.user));
}

impl JsData for HostHandler {}

/// Replaces `Proxy` (and `Proxy.revocable`) in `ctx`'s realm.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let global = ctx.global_object();
    let original = method(&global, "Proxy", ctx)?;
    let reflect = method(&global, "Reflect", ctx)?;
    let table = JsObject::with_null_proto();
    for (name, length) in TRAPS {
        let default = method(&reflect, name, ctx)?;
        let key = JsString::from(name);
        let f = NativeFunction::from_copy_closure_with_captures(
            |this, args, (key, default): &(JsString, JsObject), ctx| {
                trap(this, args, key, default, ctx)
            },
            (key.clone(), default),
        );
        let f = FunctionObjectBuilder::new(ctx.realm(), f)
            .name(key.clone())
            .length(length)
            .build();
        table.set(key, f, true, ctx)?;
    }
    let revocable = method(&original, "revocable", ctx)?;
    let ctor = NativeFunction::from_copy_closure_with_captures(
        |this, args, (original, table): &(JsObject, JsObject), ctx| {
            // Constructed, `this` is the new target; called, it is not a
            // constructor (`undefined` for `Proxy(t, h)`).
            if !this.as_object().is_some_and(|o| o.is_constructor()) {
                return Err(JsNativeError::typ()
                    .with_message("calling a builtin Proxy constructor without new is forbidden")
                    .into());
            }
            let args = wrapped(args, table);
            Ok(original.construct(&args, None, ctx)?.into())
        },
        (original, table.clone()),
    );
    let ctor = FunctionObjectBuilder::new(ctx.realm(), ctor)
        .name(js_string!("Proxy"))
        .length(2)
        .constructor(true)
        .build();
    let revocable = NativeFunction::from_copy_closure_with_captures(
        |_, args, (revocable, table): &(JsObject, JsObject), ctx| {
            revocable.call(&JsValue::undefined(), &wrapped(args, table), ctx)
        },
        (revocable, table),
    );
    let revocable = FunctionObjectBuilder::new(ctx.realm(), revocable)
        .name(js_string!("revocable"))
        .length(2)
        .build();
    let builtin = |value: JsObject| {
        PropertyDescriptor::builder()
            .value(value)
            .writable(true)
            .enumerable(false)
            .configurable(true)
    };
    ctor.define_property_or_throw(js_string!("revocable"), builtin(revocable.into()), ctx)?;
    global.define_property_or_throw(js_string!("Proxy"), builtin(ctor.into()), ctx)?;
    Ok(())
}

/// `Proxy`'s arguments with the script's handler held by a host handler
/// inheriting `table`'s traps; a handler that is no object is passed on,
/// for `Proxy` to refuse as it does.
fn wrapped(args: &[JsValue], table: &JsObject) -> [JsValue; 2] {
    let target = args.first().cloned().unwrap_or_default();
    let handler = args.get(1).cloned().unwrap_or_default();
    let handler = match handler.as_object() {
        Some(user) => JsObject::from_proto_and_data(table.clone(), HostHandler { user }).into(),
        None => handler,
    };
    [target, handler]
}

/// One trap of the host's handler (`this`): the stack check, then the
/// script's trap `key`, or `default`.
fn trap(
    this: &JsValue,
    args: &[JsValue],
    key: &JsString,
    default: &JsObject,
    ctx: &mut Context,
) -> JsResult<JsValue> {
    if remaining_stack().is_some_and(|left| left < RESERVE) {
        return Err(JsNativeError::range()
            .with_message("Proxy: nested too deeply for the stack left on this thread")
            .into());
    }
    let user = this
        .as_object()
        .and_then(|h| h.downcast_ref::<HostHandler>().map(|h| h.user.clone()));
    let Some(user) = user else {
        return default.call(&JsValue::undefined(), args, ctx);
    };
    let own = user.get(key.clone(), ctx)?;
    if own.is_null_or_undefined() {
        return default.call(&JsValue::undefined(), args, ctx);
    }
    match own.as_callable() {
        Some(f) => f.call(&user.into(), args, ctx),
        None => Err(JsNativeError::typ()
            .with_message(format!(
                "the proxy handler's {} is not a function",
                key.to_std_string_lossy()
            ))
            .into()),
    }
}
