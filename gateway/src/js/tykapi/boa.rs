//! The Tyk API globals on boa: thin wrappers around the engine-agnostic
//! core in this module's parent.

use boa_engine::object::builtins::JsFunction;
use boa_engine::{Context, JsResult, JsString, JsValue, NativeFunction, Source};

/// Registers `TykMakeHttpRequest`, `TykBatchRequest`, `TykGetKeyData`,
/// `TykSetKeyData` and the lazy `_` in `ctx`.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let globals: [(&str, usize, NativeFunction); 4] = [
        (
            "TykMakeHttpRequest",
            1,
            NativeFunction::from_fn_ptr(make_http_request),
        ),
        (
            "TykBatchRequest",
            1,
            NativeFunction::from_fn_ptr(batch_request),
        ),
        (
            "TykGetKeyData",
            2,
            NativeFunction::from_fn_ptr(get_key_data),
        ),
        (
            "TykSetKeyData",
            3,
            NativeFunction::from_fn_ptr(set_key_data),
        ),
    ];
    for (name, arity, f) in globals {
        ctx.register_global_callable(JsString::from(name), arity, f)?;
    }
    let define = ctx.eval(Source::from_bytes(super::LAZY_UNDERSCORE))?;
    let define = define
        .as_object()
        .and_then(JsFunction::from_object)
        .expect("LAZY_UNDERSCORE evaluates to a function");
    let load = NativeFunction::from_fn_ptr(load_underscore).to_js_function(ctx.realm());
    define.call(&JsValue::undefined(), &[load.into()], ctx)?;
    Ok(())
}

/// Argument `i` with JS `String(x)` semantics (Go's `call.Argument(i).String()`).
fn arg(args: &[JsValue], i: usize, ctx: &mut Context) -> JsResult<String> {
    let v = args.get(i).cloned().unwrap_or_default();
    Ok(crate::js::text::lossy(&v.to_string(ctx)?))
}

fn answer(s: Option<String>) -> JsValue {
    s.map_or(JsValue::undefined(), |s| JsString::from(s).into())
}

fn make_http_request(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let json = arg(args, 0, ctx)?;
    Ok(answer(super::make_http_request(&json)))
}

fn batch_request(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let json = arg(args, 0, ctx)?;
    Ok(answer(super::batch_request(&json)))
}

fn get_key_data(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let (key, api) = (arg(args, 0, ctx)?, arg(args, 1, ctx)?);
    Ok(JsString::from(super::get_key_data(&key, &api)).into())
}

fn set_key_data(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let (key, session) = (arg(args, 0, ctx)?, arg(args, 1, ctx)?);
    super::set_key_data(&key, &session);
    Ok(JsValue::undefined())
}

/// Evaluates our underscore once in this context (the first read of `_`).
fn load_underscore(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    ctx.eval(
        Source::from_bytes(super::UNDERSCORE).with_path(std::path::Path::new("js/underscore.js")),
    )
}

#[cfg(test)]
mod tests {
    use boa_engine::{Context, Source};

    /// Prints what evaluating our underscore costs a fresh boa context
    /// (`cargo test -p gateway --lib underscore_eval_cost -- --nocapture`);
    /// asserts only that it evaluates to an object.
    #[test]
    fn underscore_eval_cost() {
        let mut times = Vec::new();
        for _ in 0..5 {
            let mut ctx = Context::default();
            let t = std::time::Instant::now();
            let v = ctx
                .eval(Source::from_bytes(super::super::UNDERSCORE))
                .unwrap();
            times.push(t.elapsed());
            assert!(v.is_callable());
        }
        let mut build = Vec::new();
        for _ in 0..5 {
            let t = std::time::Instant::now();
            let _ctx = Context::default();
            build.push(t.elapsed());
        }
        println!("underscore eval in a new context: {times:?}; Context::default(): {build:?}");
    }
}
