//! The Tyk API globals on QuickJS (rquickjs): thin wrappers around the
//! engine-agnostic core in this module's parent.

use rquickjs::function::Opt;
use rquickjs::{Ctx, Function, Value};

/// Registers `TykMakeHttpRequest`, `TykBatchRequest`, `TykGetKeyData` and
/// `TykSetKeyData` in `ctx`'s global object. (The lazy `_` is defined from
/// bytecode compiled once: `js/quickjs/hostcode.rs`.)
pub(crate) fn install(ctx: &Ctx<'_>) -> rquickjs::Result<()> {
    let g = ctx.globals();
    g.set(
        "TykMakeHttpRequest",
        Function::new(ctx.clone(), |v: Opt<Value<'_>>| {
            arg(v).map(|json| super::make_http_request(&json))
        })?,
    )?;
    g.set(
        "TykBatchRequest",
        Function::new(ctx.clone(), |v: Opt<Value<'_>>| {
            arg(v).map(|json| super::batch_request(&json))
        })?,
    )?;
    g.set(
        "TykGetKeyData",
        Function::new(ctx.clone(), |k: Opt<Value<'_>>, a: Opt<Value<'_>>| {
            rquickjs::Result::Ok(super::get_key_data(&arg(k)?, &arg(a)?))
        })?,
    )?;
    g.set(
        "TykSetKeyData",
        Function::new(ctx.clone(), |k: Opt<Value<'_>>, s: Opt<Value<'_>>| {
            super::set_key_data(&arg(k)?, &arg(s)?);
            rquickjs::Result::Ok(())
        })?,
    )?;
    Ok(())
}

/// An argument with JS `String(x)` semantics; a missing one is "undefined".
fn arg(v: Opt<Value<'_>>) -> rquickjs::Result<String> {
    crate::js::quickjs::engine::arg_string(v)
}
