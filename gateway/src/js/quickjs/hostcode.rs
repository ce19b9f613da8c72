//! The host's own JavaScript that every context runs, compiled to bytecode
//! once per process: the file scopes' prologue (`js/scope.rs`), the lazy
//! `_` definer and underscore itself (`js/tykapi`).
//!
//! A `fresh` context is built for every request; parsing underscore (~450
//! lines) in each was most of a fresh call that uses `_` (issue 15).
//! QuickJS bytecode is independent of the runtime that made it, so one
//! image serves every runtime and thread, as the API's own scripts do
//! ([`super::api::Program`]). These are compiled in strict mode, as
//! rquickjs's `eval` ran them before.

use std::sync::OnceLock;

use rquickjs::{Context, Ctx, Exception, Function, Runtime, Value};

use super::engine;
use crate::js::{scope, tykapi};

/// The host code's bytecode images.
struct HostCode {
    prologue: Vec<u8>,
    /// Evaluates to `function (load)` that defines the lazy global `_`.
    lazy_underscore: Vec<u8>,
    /// Evaluates to the `_` object.
    underscore: Vec<u8>,
}

/// The images, compiled on first use (in a runtime of their own).
fn host_code() -> Result<&'static HostCode, String> {
    static CODE: OnceLock<Result<HostCode, String>> = OnceLock::new();
    CODE.get_or_init(|| {
        let rt = Runtime::new().map_err(|e| e.to_string())?;
        let ctx = Context::full(&rt).map_err(|e| e.to_string())?;
        ctx.with(|ctx| {
            let compile = |source: &str, file: &str| {
                engine::compile_strict(&ctx, source, file)
                    .map_err(|m| format!("JS host: {file}: {m}"))
            };
            Ok(HostCode {
                prologue: compile(scope::PROLOGUE, "<scope prologue>")?,
                lazy_underscore: compile(tykapi::LAZY_UNDERSCORE, "<lazy underscore>")?,
                underscore: compile(tykapi::UNDERSCORE, "underscore.js")?,
            })
        })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Runs the host code in `ctx`: the scopes' prologue, and the global `_`
/// defined to load underscore's bytecode on first read. Returns the native
/// function that loads it, which only the `_` definer's closure holds (the
/// `fresh` strategy keeps every native alive: `fresh.rs`).
pub(crate) fn install<'js>(ctx: &Ctx<'js>) -> Result<Function<'js>, String> {
    let code = host_code()?;
    let err = |e: rquickjs::Error| engine::describe(&ctx.catch(), false) + &format!(" ({e})");
    engine::run(ctx, &code.prologue).map_err(err)?;
    let define: Function = engine::run(ctx, &code.lazy_underscore)
        .and_then(|v| v.get())
        .map_err(err)?;
    let load = Function::new(ctx.clone(), load_underscore).map_err(err)?;
    define.call::<_, ()>((load.clone(),)).map_err(err)?;
    Ok(load)
}

/// Runs underscore's bytecode in this context (the first read of `_`).
fn load_underscore<'js>(ctx: Ctx<'js>) -> rquickjs::Result<Value<'js>> {
    match host_code() {
        Ok(code) => engine::run(&ctx, &code.underscore),
        Err(m) => Err(Exception::throw_internal(&ctx, &m)),
    }
}
