//! QuickJS itself: a runtime with the gateway's limits, the native globals
//! Tyk gives scripts, and scripts compiled once to bytecode.
//!
//! # The limits, and why each is safe to hit
//!
//! - **Time** (`--jsvm-timeout`): QuickJS calls the runtime's interrupt
//!   handler every 10,000 bytecode branches and calls, and every 10,000 steps
//!   of a regular expression match. The handler compares the clock with the
//!   call's deadline; once it has passed, QuickJS throws an uncatchable error
//!   that unwinds every frame, builtins included (`forEach`, `sort`,
//!   `replace`). The engine stays consistent, but the script's globals may be
//!   half-updated, so the host discards the context all the same (`api.rs`).
//! - **Memory** (`--jsvm-memory`): a per-runtime malloc limit. Past it every
//!   allocation fails with an `InternalError: out of memory`; the host
//!   discards the runtime, which frees all of it.
//! - **Stack**: QuickJS measures the native stack it uses from the top
//!   recorded when a call enters the runtime (rquickjs does it in
//!   `Context::with`); deep recursion, deep `JSON.stringify` and deep regex
//!   backtracking throw a `RangeError` long before the thread's stack ends.

use std::cell::Cell;
use std::ffi::CString;
use std::rc::Rc;
use std::time::Instant;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine as _;
use rquickjs::function::Opt;
use rquickjs::{qjs, Coerced, Ctx, Function, Runtime, Value};

/// Native stack one call may use. Worker and test threads have at least
/// 2 MiB; this leaves room for the gateway's own frames below the runtime.
pub(crate) const STACK_LIMIT: usize = 1024 * 1024;

/// What the interrupt handler reads and writes: the running call's deadline,
/// and whether the handler stopped it.
#[derive(Default)]
pub(crate) struct Watch {
    deadline: Cell<Option<Instant>>,
    fired: Cell<bool>,
}

impl Watch {
    /// Arms the handler for a call ending at `deadline`.
    pub(crate) fn arm(&self, deadline: Instant) {
        self.fired.set(false);
        self.deadline.set(Some(deadline));
    }

    /// Disarms it; true when the call was interrupted.
    pub(crate) fn disarm(&self) -> bool {
        self.deadline.set(None);
        self.fired.replace(false)
    }
}

/// Why [`run_jobs`] stopped before the queue was empty.
pub(crate) enum JobsStopped {
    /// The deadline passed between two jobs.
    Deadline,
    /// A job ended in an exception the engine raised itself (out of
    /// memory, the interrupt): a reaction's own throw rejects its promise.
    Threw(String),
}

/// Runs the promise jobs (`.then` reactions, the rest of an `async`
/// function after an `await`) queued in `rt`, oldest first, with the ones
/// they queue, until none is left or `deadline` passes; the interrupt
/// handler, still armed, stops one job that runs past it. Tyk's goja runs
/// its job queue when a call returns; QuickJS runs none unless asked, so
/// each `.then` of a persistent context stayed queued with what it
/// captured until `--jsvm-memory` failed an unrelated request.
pub(crate) fn run_jobs(rt: &Runtime, deadline: Instant) -> Result<(), JobsStopped> {
    while rt.is_job_pending() {
        if Instant::now() >= deadline {
            return Err(JobsStopped::Deadline);
        }
        if let Err(e) = rt.execute_pending_job() {
            return Err(JobsStopped::Threw(
                e.0.with(|ctx| describe(&ctx.catch(), false)),
            ));
        }
    }
    Ok(())
}

/// A new runtime with the memory and stack limits, and an interrupt handler
/// driven by the returned [`Watch`].
pub(crate) fn runtime(memory_limit: usize) -> Result<(Runtime, Rc<Watch>), String> {
    let rt = Runtime::new().map_err(|e| format!("cannot create a QuickJS runtime: {e}"))?;
    limits(rt, memory_limit)
}

/// [`runtime`], allocating in `arena` (the `fresh` strategy's heap that can
/// be put back, `snapshot.rs`).
pub(crate) fn runtime_in(
    arena: super::snapshot::Arena,
    memory_limit: usize,
) -> Result<(Runtime, Rc<Watch>), String> {
    let rt = Runtime::new_with_alloc(arena)
        .map_err(|e| format!("cannot create a QuickJS runtime: {e}"))?;
    limits(rt, memory_limit)
}

fn limits(rt: Runtime, memory_limit: usize) -> Result<(Runtime, Rc<Watch>), String> {
    rt.set_memory_limit(memory_limit);
    rt.set_max_stack_size(STACK_LIMIT);
    let watch = Rc::new(Watch::default());
    let w = watch.clone();
    rt.set_interrupt_handler(Some(Box::new(move || match w.deadline.get() {
        // One clock read per 10,000 interpreter steps: a few ns per call.
        Some(deadline) if Instant::now() >= deadline => {
            w.fired.set(true);
            true
        }
        _ => false,
    })));
    Ok((rt, watch))
}

/// True when a failure's text (from [`describe`]) is QuickJS's answer to
/// the memory limit: an `InternalError: out of memory`, or `null` when even
/// that error object could not be allocated. (A script that throws `null`
/// itself is taken for one too: its state is rebuilt, which is harmless.)
/// A script's own error that only mentions memory (`Error: cache out of
/// memory`) is not: it was, counted as `out_of_memory` with its context
/// rebuilt and the log blaming `--jsvm-memory`.
/// The host's own steps (reading an answer's fields, converting its
/// strings) fail the same way at the limit: [`pending`] finds their
/// exception when rquickjs reports another error.
pub(crate) fn is_out_of_memory(message: &str) -> bool {
    message.contains("InternalError: out of memory")
        || message == "null"
        || message.ends_with(": null")
}

/// The exception a failed step left pending in `ctx`, taken, as one line
/// ([`describe`]); `None` when there is none. rquickjs reports some
/// failures of QuickJS as errors of its own (a string QuickJS could not
/// convert is `Error::Unknown`) while the exception that says why, at the
/// memory limit `null` or `InternalError: out of memory`, is pending.
pub(crate) fn pending(ctx: &Ctx<'_>) -> Option<String> {
    ctx.has_exception().then(|| describe(&ctx.catch(), false))
}

/// Installs `log`, `rawlog`, `b64enc`, `b64dec`, `rawb64enc` and `rawb64dec`.
/// The closures capture only Rust data: a JS value captured by a native
/// function would be a reference QuickJS's cycle collector cannot see.
pub(crate) fn install_natives(ctx: &Ctx<'_>, api_id: &Rc<str>) -> rquickjs::Result<()> {
    let g = ctx.globals();
    let api = api_id.clone();
    g.set(
        "log",
        Function::new(ctx.clone(), move |v: Opt<Value<'_>>| {
            let (msg, part) = arg_log_text(v)?;
            let msg = crate::error::log_text(&msg, part, true);
            tracing::info!(target: "jsvm", api_id = %api, "{msg}");
            rquickjs::Result::Ok(())
        })?,
    )?;
    let api = api_id.clone();
    g.set(
        "rawlog",
        Function::new(ctx.clone(), move |v: Opt<Value<'_>>| {
            let (msg, part) = arg_log_text(v)?;
            let msg = crate::error::log_text(&msg, part, false);
            tracing::info!(target: "jsvm::raw", api_id = %api, "{msg}");
            rquickjs::Result::Ok(())
        })?,
    )?;
    g.set(
        "b64enc",
        Function::new(ctx.clone(), |v: Opt<Value<'_>>| {
            arg_string(v).map(|s| STANDARD.encode(s))
        })?,
    )?;
    g.set(
        "rawb64enc",
        Function::new(ctx.clone(), |v: Opt<Value<'_>>| {
            arg_string(v).map(|s| STANDARD_NO_PAD.encode(s))
        })?,
    )?;
    // Tyk's b64dec tries padded, then unpadded base64; on failure it logs and
    // returns undefined rather than throwing.
    g.set(
        "b64dec",
        Function::new(ctx.clone(), |v: Opt<Value<'_>>| {
            let s = arg_string(v)?;
            let d = STANDARD.decode(&s).or_else(|_| STANDARD_NO_PAD.decode(&s));
            rquickjs::Result::Ok(decoded(d))
        })?,
    )?;
    g.set(
        "rawb64dec",
        Function::new(ctx.clone(), |v: Opt<Value<'_>>| {
            let s = arg_string(v)?;
            rquickjs::Result::Ok(decoded(STANDARD_NO_PAD.decode(&s)))
        })?,
    )?;
    Ok(())
}

/// The first argument with JS `String(x)` semantics (Go's
/// `call.Argument(0).String()`).
pub(crate) fn arg_string(v: Opt<Value<'_>>) -> rquickjs::Result<String> {
    match v.0 {
        Some(v) => coerced(&v),
        None => Ok("undefined".into()),
    }
}

/// The first argument as [`arg_string`] makes it, for a log line: a string
/// longer than a line shows ([`crate::error::MAX_LOG_TEXT`] units) is made
/// UTF-8 by QuickJS in its own heap (within `--jsvm-memory`, refused as any
/// allocation past it), and only the start a line shows is copied out.
pub(crate) fn arg_log_text(v: Opt<Value<'_>>) -> rquickjs::Result<(String, crate::error::Part)> {
    use crate::error::{Part, MAX_LOG_TEXT};
    let Some(v) = v.0 else {
        return Ok(("undefined".into(), Part::Whole));
    };
    let s = v.get::<Coerced<rquickjs::String>>()?.0;
    let len = units(&s);
    if len <= MAX_LOG_TEXT {
        return Ok((lossy(&s)?, Part::Whole));
    }
    let start = with_utf8(&s, |bytes| {
        let mut end = bytes.len().min(MAX_LOG_TEXT);
        // Not inside a character (a surrogate's three bytes included).
        while end < bytes.len() && end > 0 && bytes[end] & 0xc0 == 0x80 {
            end -= 1;
        }
        wtf8_lossy(&bytes[..end]).into_owned()
    })?;
    let unit = "characters";
    Ok((start, Part::Start { len, unit }))
}

/// `String(v)` as UTF-8, each lone surrogate one U+FFFD ([`lossy`]).
pub(crate) fn coerced(v: &Value<'_>) -> rquickjs::Result<String> {
    lossy(&v.get::<Coerced<rquickjs::String>>()?.0)
}

/// `s`'s JS `length` (UTF-16 units), read without converting it: QuickJS
/// answers a string's (or a rope's) `length` from its header, running no
/// script. A length that cannot be read is 0 (never seen: a string always
/// has one), which leaves [`BodyField::convert`]'s check in bytes.
///
/// [`BodyField::convert`]: crate::js::bodies::BodyField::convert
pub(crate) fn units(s: &rquickjs::String<'_>) -> usize {
    let mut len: i64 = 0;
    // SAFETY: the live context and one of its strings, read in place.
    let rc = unsafe { qjs::JS_GetLength(s.ctx().as_raw().as_ptr(), s.as_raw(), &mut len) };
    if rc < 0 {
        return 0;
    }
    usize::try_from(len).unwrap_or(0)
}

/// `s` as UTF-8, each lone surrogate replaced by one U+FFFD, as boa's host
/// reads it (`text::lossy`) and as Tyk's goja and Go's JSON decoder do.
/// rquickjs's `to_string` refuses such a string (QuickJS writes a lone
/// surrogate as its three WTF-8 bytes), and every host path that read one
/// failed its request: a `log` line, `b64enc`, a header value or body the
/// script set, a call out's JSON (a string cut inside an emoji is enough).
pub(crate) fn lossy(s: &rquickjs::String<'_>) -> rquickjs::Result<String> {
    match s.to_string() {
        Err(rquickjs::Error::Utf8(_)) => {}
        other => return other,
    }
    with_utf8(s, |bytes| wtf8_lossy(bytes).into_owned())
}

/// `read` of `s`'s WTF-8 bytes (QuickJS's UTF-8, a lone surrogate as its
/// three bytes), made by QuickJS in its heap and freed after.
fn with_utf8<T>(s: &rquickjs::String<'_>, read: impl FnOnce(&[u8]) -> T) -> rquickjs::Result<T> {
    let raw = s.ctx().as_raw().as_ptr();
    let mut len = 0;
    // SAFETY: the live context and one of its strings; the C string is
    // read before it is freed, once.
    unsafe {
        let p = qjs::JS_ToCStringLen(raw, &mut len, s.as_raw());
        if p.is_null() {
            return Err(rquickjs::Error::Exception);
        }
        let out = read(std::slice::from_raw_parts(p.cast::<u8>(), len));
        qjs::JS_FreeCString(raw, p);
        Ok(out)
    }
}

/// WTF-8 (UTF-8 that may hold surrogates, three bytes each) as UTF-8: a
/// surrogate's three bytes become one U+FFFD, any other invalid byte one
/// U+FFFD each.
pub(crate) fn wtf8_lossy(mut bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(bytes.len());
    loop {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(s);
                return std::borrow::Cow::Owned(out);
            }
            Err(e) => {
                let (good, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).expect("checked up to here"));
                out.push('\u{fffd}');
                let surrogate = matches!(rest, [0xed, 0xa0..=0xbf, 0x80..=0xbf, ..]);
                let skip = if surrogate {
                    3
                } else {
                    e.error_len().unwrap_or(rest.len())
                };
                bytes = &rest[skip..];
            }
        }
    }
}

fn decoded(d: Result<Vec<u8>, base64::DecodeError>) -> Option<String> {
    match d {
        Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) => {
            crate::js::prelude::b64_failed(&e);
            None
        }
    }
}

/// Compiles a sloppy-mode global script to QuickJS bytecode, which any
/// runtime of this build can load ([`run`]) without parsing. Users'
/// scripts are sloppy, as Tyk's engines run them.
pub(crate) fn compile(ctx: &Ctx<'_>, source: &str, file: &str) -> Result<Vec<u8>, String> {
    compile_with(ctx, source, file, false)
}

/// [`compile`] in strict mode: the host's own code (`hostcode.rs`).
pub(crate) fn compile_strict(ctx: &Ctx<'_>, source: &str, file: &str) -> Result<Vec<u8>, String> {
    compile_with(ctx, source, file, true)
}

fn compile_with(ctx: &Ctx<'_>, source: &str, file: &str, strict: bool) -> Result<Vec<u8>, String> {
    let src = CString::new(source).map_err(|_| "contains a NUL character".to_string())?;
    let name = CString::new(file).map_err(|_| "file name contains NUL".to_string())?;
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: `raw` is the live context `ctx` borrows; the source and name
    // outlive the call; every JSValue returned is freed exactly once.
    unsafe {
        let mut flags = (qjs::JS_EVAL_TYPE_GLOBAL | qjs::JS_EVAL_FLAG_COMPILE_ONLY) as i32;
        if strict {
            flags |= qjs::JS_EVAL_FLAG_STRICT as i32;
        }
        let func = qjs::JS_Eval(raw, src.as_ptr(), source.len() as _, name.as_ptr(), flags);
        if qjs::JS_IsException(func) {
            return Err(describe(&ctx.catch(), true));
        }
        let mut size = 0;
        let buf = qjs::JS_WriteObject(raw, &mut size, func, qjs::JS_WRITE_OBJ_BYTECODE as i32);
        qjs::JS_FreeValue(raw, func);
        if buf.is_null() {
            return Err(describe(&ctx.catch(), false));
        }
        let bytes = std::slice::from_raw_parts(buf, size as usize).to_vec();
        qjs::js_free(raw, buf.cast());
        Ok(bytes)
    }
}

/// Evaluates `source` as a sloppy-mode global script, as Tyk's engines run
/// scripts (rquickjs's `eval` forces strict mode, where a write to a frozen
/// object throws).
pub(crate) fn eval_sloppy<'js>(
    ctx: &Ctx<'js>,
    source: impl Into<Vec<u8>>,
) -> rquickjs::Result<Value<'js>> {
    let mut opts = rquickjs::context::EvalOptions::default();
    opts.strict = false;
    ctx.eval_with_options(source, opts)
}

/// Loads bytecode made by [`compile`] and runs it: the script's top-level
/// code, in `ctx`'s global scope. Returns its completion value.
pub(crate) fn run<'js>(ctx: &Ctx<'js>, code: &[u8]) -> rquickjs::Result<Value<'js>> {
    eval_function(ctx, &read(ctx, code)?)
}

/// Loads bytecode made by [`compile`] without running it: the script as a
/// function object that [`eval_function`] runs, as often as wanted.
pub(crate) fn read<'js>(ctx: &Ctx<'js>, code: &[u8]) -> rquickjs::Result<Value<'js>> {
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: `code` is our own `compile` output (a trusted bytecode image
    // of this same QuickJS build); the result is owned by the returned Value.
    unsafe {
        let func = qjs::JS_ReadObject(
            raw,
            code.as_ptr(),
            code.len() as _,
            qjs::JS_READ_OBJ_BYTECODE as i32,
        );
        if qjs::JS_IsException(func) {
            return Err(rquickjs::Error::Exception);
        }
        Ok(Value::from_raw(ctx.clone(), func))
    }
}

/// Runs a script [`read`] returned: its top-level code, in `ctx`'s global
/// scope. Returns its completion value.
pub(crate) fn eval_function<'js>(
    ctx: &Ctx<'js>,
    func: &Value<'js>,
) -> rquickjs::Result<Value<'js>> {
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: JS_EvalFunction takes the reference JS_DupValue adds; `func`
    // keeps its own.
    unsafe {
        let v = qjs::JS_EvalFunction(raw, qjs::JS_DupValue(raw, func.as_raw()));
        if qjs::JS_IsException(v) {
            return Err(rquickjs::Error::Exception);
        }
        Ok(Value::from_raw(ctx.clone(), v))
    }
}

/// A thrown value as one line: `String(e)` (`TypeError: x is not a
/// function`), and for a syntax error where it is (`line 4, column 41 of
/// file.js`), read from the first stack frame.
pub(crate) fn describe(thrown: &Value<'_>, with_place: bool) -> String {
    // Cut as boa's are (2,000 bytes): the text goes into a log line, and a
    // script's `throw new Error(big)` wrote all 4 MiB of it, per request.
    let text = crate::error::clip(coerced(thrown).unwrap_or_else(|_| unshown(thrown.ctx())));
    if !with_place {
        return text;
    }
    let stack: Option<String> = thrown.as_object().and_then(|o| o.get("stack").ok());
    let place = stack.as_deref().and_then(|s| {
        let frame = s.lines().find_map(|l| l.trim().strip_prefix("at "))?;
        let frame = frame.trim_start_matches('<').trim_end_matches(')');
        let frame = frame.rsplit(" (").next().unwrap_or(frame);
        let mut it = frame.rsplitn(3, ':');
        let (col, line, file) = (it.next()?, it.next()?, it.next()?);
        Some(format!("line {line}, column {col} of {file}"))
    });
    match place {
        Some(p) => format!("{text} (at {p})"),
        None => text,
    }
}

/// What [`describe`] says of a value whose text could not be made: making
/// it takes heap too, so at the memory limit it fails with QuickJS's
/// `null`. That exception is taken (nothing is left pending) and named,
/// so that [`is_out_of_memory`] sees it.
fn unshown(ctx: &Ctx<'_>) -> String {
    let why = ctx.catch();
    let text = if why.is_null() {
        "null".to_string()
    } else {
        coerced(&why).unwrap_or_else(|_| {
            let _ = ctx.catch();
            "another exception".to_string()
        })
    };
    format!("an exception that cannot be shown: {text}")
}

#[cfg(test)]
mod tests {
    use super::wtf8_lossy;

    #[test]
    fn a_lone_surrogate_is_one_replacement_character() {
        assert_eq!(wtf8_lossy(b"plain \xe2\x98\x83"), "plain \u{2603}");
        // U+D83D and U+DC00 as QuickJS writes them, alone.
        assert_eq!(wtf8_lossy(b"a\xed\xa0\xbdb"), "a\u{fffd}b");
        assert_eq!(wtf8_lossy(b"\xed\xb0\x80"), "\u{fffd}");
        // Other invalid bytes: one each, as `from_utf8_lossy`.
        assert_eq!(wtf8_lossy(b"x\xff\xfey\xed"), "x\u{fffd}\u{fffd}y\u{fffd}");
    }
}
