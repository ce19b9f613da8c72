//! The globals Tyk gives every script: the TykJS prelude (`js/tyk_prelude.js`,
//! embedded at build time) and the native helpers `log`, `rawlog`, `b64enc`,
//! `b64dec`, `rawb64enc` and `rawb64dec`.

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine as _;
use boa_engine::object::ObjectInitializer;
use boa_engine::property::Attribute;
use boa_engine::{js_string, Context, JsResult, JsString, JsValue, NativeFunction, Source};

/// The TykJS prelude, compiled into the binary so a deployed gateway cannot
/// run against a different prelude than the one it was tested with.
pub(crate) const PRELUDE: &str = include_str!("../../../js/tyk_prelude.js");

/// Name of the hidden global the host passes call arguments through. It is
/// non-enumerable, non-writable and non-configurable, so scripts can neither
/// see it in `for (k in this)` nor replace it.
pub(crate) const HOST_GLOBAL: &str = "__tykHost";

/// Installs the native helpers and evaluates the prelude in `ctx`.
///
/// `api_id` is captured by `log`/`rawlog` so every line names its API, as
/// Tyk's JSVM log lines carry the API's fields.
pub(crate) fn install(ctx: &mut Context, api_id: &str) -> JsResult<()> {
    let api = JsString::from(api_id);
    let log = NativeFunction::from_copy_closure_with_captures(
        |_, args, api: &JsString, ctx| {
            // A call abandoned at its deadline is answered already; what it
            // logs on (one seen writing 5 GB in 40 s from a callback loop)
            // is dropped.
            if crate::heap::abandoned_here() {
                return Ok(JsValue::undefined());
            }
            let (msg, part) = arg_log_text(args, ctx)?;
            let msg = crate::error::log_text(&msg, part, true);
            // Not counted: the log's writer holds a process-wide lock, and
            // the allocator may stop a counted thread for good.
            crate::heap::uncounted(
                || tracing::info!(target: "jsvm", api_id = %api.to_std_string_lossy(), "{msg}"),
            );
            Ok(JsValue::undefined())
        },
        api.clone(),
    );
    let rawlog = NativeFunction::from_copy_closure_with_captures(
        |_, args, api: &JsString, ctx| {
            if crate::heap::abandoned_here() {
                return Ok(JsValue::undefined());
            }
            let (msg, part) = arg_log_text(args, ctx)?;
            let msg = crate::error::log_text(&msg, part, false);
            crate::heap::uncounted(
                || tracing::info!(target: "jsvm::raw", api_id = %api.to_std_string_lossy(), "{msg}"),
            );
            Ok(JsValue::undefined())
        },
        api,
    );
    ctx.register_global_callable(js_string!("log"), 1, log)?;
    ctx.register_global_callable(js_string!("rawlog"), 1, rawlog)?;
    ctx.register_global_callable(js_string!("b64enc"), 1, NativeFunction::from_fn_ptr(b64enc))?;
    ctx.register_global_callable(js_string!("b64dec"), 1, NativeFunction::from_fn_ptr(b64dec))?;
    ctx.register_global_callable(
        js_string!("rawb64enc"),
        1,
        NativeFunction::from_fn_ptr(rawb64enc),
    )?;
    ctx.register_global_callable(
        js_string!("rawb64dec"),
        1,
        NativeFunction::from_fn_ptr(rawb64dec),
    )?;
    let host = ObjectInitializer::new(ctx).build();
    ctx.register_global_property(JsString::from(HOST_GLOBAL), host, Attribute::empty())?;
    ctx.eval(Source::from_bytes(PRELUDE).with_path(std::path::Path::new("js/tyk_prelude.js")))?;
    Ok(())
}

/// First argument as a Rust string, JS `String(x)` semantics (Go's
/// `call.Argument(0).String()`).
fn arg_string(args: &[JsValue], ctx: &mut Context) -> JsResult<String> {
    let v = args.first().cloned().unwrap_or_default();
    Ok(super::text::lossy(&v.to_string(ctx)?))
}

/// The first argument as `String(x)` makes it, for a log line: only as
/// much of it as a line shows ([`crate::error::MAX_LOG_TEXT`]) is
/// converted, in the call's heap count, however long the string is.
fn arg_log_text(args: &[JsValue], ctx: &mut Context) -> JsResult<(String, crate::error::Part)> {
    use crate::error::{Part, MAX_LOG_TEXT};
    let v = args.first().cloned().unwrap_or_default();
    let s = v.to_string(ctx)?;
    let part = match s.len() {
        len if len > MAX_LOG_TEXT => Part::Start {
            len,
            unit: "characters",
        },
        _ => Part::Whole,
    };
    Ok((super::text::lossy_start(&s, MAX_LOG_TEXT), part))
}

fn b64enc(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(JsString::from(STANDARD.encode(arg_string(args, ctx)?)).into())
}

fn rawb64enc(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(JsString::from(STANDARD_NO_PAD.encode(arg_string(args, ctx)?)).into())
}

/// Tyk's `b64dec` tries padded standard base64, then unpadded; on failure it
/// logs and returns `undefined` rather than throwing.
fn b64dec(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let s = arg_string(args, ctx)?;
    let decoded = STANDARD.decode(&s).or_else(|_| STANDARD_NO_PAD.decode(&s));
    Ok(decoded_value(decoded))
}

fn rawb64dec(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let s = arg_string(args, ctx)?;
    Ok(decoded_value(STANDARD_NO_PAD.decode(&s)))
}

fn decoded_value(decoded: Result<Vec<u8>, base64::DecodeError>) -> JsValue {
    match decoded {
        Ok(bytes) => JsString::from(String::from_utf8_lossy(&bytes).as_ref()).into(),
        Err(e) => {
            b64_failed(&e);
            JsValue::undefined()
        }
    }
}

/// Logs a `b64dec`/`rawb64dec` of text that is not base64 (as Tyk does),
/// at most `--log-rate` lines a second, both engines together: a script
/// decoding bad text in a loop wrote a line per call (88,000 a second).
pub(crate) fn b64_failed(e: &base64::DecodeError) {
    static GATE: crate::lograte::LogGate = crate::lograte::LogGate::new();
    if let Some(left_out) = GATE.admit() {
        crate::heap::uncounted(|| {
            tracing::error!(
                target: "jsvm",
                error = %e,
                "Failed to base64 decode{}",
                crate::lograte::LeftOut(left_out)
            )
        });
    }
}
