//! One API's QuickJS state on one thread, and a call on it.
//!
//! [`Program`] is what load compiled (bytecode, limits, strategy): `Send +
//! Sync`, shared by every thread. [`QjsApi`] is one thread's state for one
//! API, built from it on the thread that owns it, and [`QjsApi::call`] is a
//! plain synchronous function: it can run inline on a worker or on a VM
//! thread that owns the struct.
//!
//! - `persistent`: one runtime and context, built once (prelude and scripts
//!   run once); a call only runs `host.js`'s `call`.
//! - `fresh`: one runtime; every call makes a new context, loads the prelude,
//!   the scripts and the host from bytecode (no parsing) and runs their
//!   top-level code, so every request sees fresh script state, as in Tyk.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rquickjs::{Context, Ctx, Function, Persistent, Runtime, Value};

use super::answer;
use super::engine::{self, Watch};
use crate::middleware::{Flow, MwError, MwRequest};

/// How an API keeps script state between requests on QuickJS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    Persistent,
    Fresh,
}

/// An API's scripts compiled to bytecode, with what building a context needs.
#[derive(Clone)]
pub(crate) struct Program {
    pub(crate) api_id: Arc<str>,
    /// The TykJS prelude.
    pub(crate) prelude: Vec<u8>,
    /// Each distinct script once: (bytecode, definition field, file).
    pub(crate) scripts: Vec<(Vec<u8>, String, String)>,
    /// Evaluates to `[function (request, spec) {..}, ...]`, one per entry.
    pub(crate) dispatch: Vec<u8>,
    /// Evaluates to a function of that array returning `call`.
    pub(crate) host: Vec<u8>,
    /// `(name, field)` per entry, pre then post.
    pub(crate) entries: Vec<(String, String)>,
    pub(crate) timeout: Duration,
    pub(crate) memory: usize,
    pub(crate) strategy: Strategy,
}

/// A setup failure: the definition field at fault and what went wrong.
#[derive(Debug)]
pub(crate) struct BuildError {
    pub(crate) field: String,
    pub(crate) message: String,
}

/// Why a call did not produce an answer.
enum Fail {
    /// The script threw or answered with the wrong shape.
    Script(MwError),
    /// The memory limit was hit: the runtime must go.
    Memory,
}

/// Runs the prelude, the scripts and the host in `ctx`; returns `call`.
/// `check` verifies each entry names an object with `ProcessRequest` (load
/// and persistent builds; a fresh call relies on load having done so).
pub(crate) fn setup<'js>(
    ctx: &Ctx<'js>,
    p: &Program,
    check: bool,
) -> Result<Function<'js>, BuildError> {
    let api_id: Rc<str> = Rc::from(&*p.api_id);
    let internal = |ctx: &Ctx<'js>, e: rquickjs::Error| BuildError {
        field: "custom_middleware".into(),
        message: format!("JS host setup failed: {}", caught(ctx, e)),
    };
    engine::install_natives(ctx, &api_id).map_err(|e| internal(ctx, e))?;
    crate::js::tykapi::qjs::install(ctx).map_err(|e| internal(ctx, e))?;
    ctx.eval::<(), _>(crate::js::scope::PROLOGUE)
        .map_err(|e| internal(ctx, e))?;
    engine::run(ctx, &p.prelude).map_err(|e| internal(ctx, e))?;
    for (code, field, file) in &p.scripts {
        engine::run(ctx, code).map_err(|e| BuildError {
            field: field.clone(),
            message: format!("{file}: failed while loading: {}", caught(ctx, e)),
        })?;
    }
    if check {
        for (index, (name, field)) in p.entries.iter().enumerate() {
            check_entry(ctx, index, name, field)?;
        }
    }
    let dispatch = engine::run(ctx, &p.dispatch).map_err(|e| internal(ctx, e))?;
    let make: Function = engine::run(ctx, &p.host)
        .and_then(|v| v.get())
        .map_err(|e| internal(ctx, e))?;
    make.call((dispatch,)).map_err(|e| internal(ctx, e))
}

fn check_entry(ctx: &Ctx<'_>, index: usize, name: &str, field: &str) -> Result<(), BuildError> {
    let fail = |message: String| BuildError {
        field: field.to_string(),
        message,
    };
    let probe = format!(
        "(function (o) {{ return (typeof o === 'object' && o !== null) ? (typeof o.ProcessRequest === 'function') : null; }})(__tykScope[{index}] ? __tykScope[{index}]() : undefined)"
    );
    match ctx.eval::<Value, _>(probe) {
        Ok(v) if v.as_bool() == Some(true) => Ok(()),
        Ok(v) if v.as_bool() == Some(false) => Err(fail(format!(
            "object {name:?} has no ProcessRequest function (call NewProcessRequest)"
        ))),
        _ => {
            let _ = ctx.catch();
            Err(fail(format!(
                "the scripts define no object {name:?} (expected `var {name} = new TykJS.TykMiddleware.NewMiddleware({{}})`)"
            )))
        }
    }
}

/// The pending exception of a failed rquickjs call, as one line.
fn caught(ctx: &Ctx<'_>, e: rquickjs::Error) -> String {
    match e {
        rquickjs::Error::Exception => engine::describe(&ctx.catch(), false),
        other => other.to_string(),
    }
}

/// One thread's live QuickJS state for an API. Field order is drop order:
/// every JS value before its context, the context before its runtime.
enum Live {
    Persistent {
        call: Persistent<Function<'static>>,
        ctx: Context,
        _rt: Runtime,
        watch: Rc<Watch>,
    },
    Fresh {
        rt: Runtime,
        watch: Rc<Watch>,
    },
}

impl Live {
    fn build(p: &Program) -> Result<Live, BuildError> {
        let (rt, watch) = engine::runtime(p.memory).map_err(|message| BuildError {
            field: "custom_middleware".into(),
            message,
        })?;
        if p.strategy == Strategy::Fresh {
            return Ok(Live::Fresh { rt, watch });
        }
        let ctx = full_context(&rt)?;
        // Top-level code runs under the same time limit as a call.
        watch.arm(Instant::now() + p.timeout);
        let call = ctx.with(|ctx| setup(&ctx, p, true).map(|f| Persistent::save(&ctx, f)));
        if watch.disarm() {
            return Err(BuildError {
                field: "custom_middleware".into(),
                message: format!("top-level code was stopped after {:?}", p.timeout),
            });
        }
        Ok(Live::Persistent {
            call: call?,
            ctx,
            _rt: rt,
            watch,
        })
    }
}

fn full_context(rt: &Runtime) -> Result<Context, BuildError> {
    Context::full(rt).map_err(|e| BuildError {
        field: "custom_middleware".into(),
        message: format!("cannot create a QuickJS context: {e}"),
    })
}

/// One API's QuickJS state on the thread that owns it.
pub(crate) struct QjsApi {
    program: Arc<Program>,
    /// `None` after a stopped call discarded it; the next call rebuilds.
    live: Option<Live>,
}

impl QjsApi {
    /// Builds the state on the calling thread.
    pub(crate) fn new(program: Arc<Program>) -> Result<QjsApi, BuildError> {
        let live = Live::build(&program)?;
        Ok(QjsApi {
            program,
            live: Some(live),
        })
    }

    /// Calls entry `index` on `req`, within the jsvm timeout.
    pub(crate) fn call(&mut self, index: usize, req: &mut MwRequest) -> Result<Flow, MwError> {
        let deadline = Instant::now() + self.program.timeout;
        if self.live.is_none() {
            let live = Live::build(&self.program).map_err(|e| {
                MwError(format!(
                    "rebuilding the JS context failed: {}: {}",
                    e.field, e.message
                ))
            })?;
            self.live = Some(live);
        }
        let p = &*self.program;
        // What TykMakeHttpRequest and TykBatchRequest may wait until.
        let _deadline = crate::js::tykapi::call_scope(deadline);
        let (result, interrupted) = match self.live.as_ref().expect("built above") {
            Live::Persistent {
                call, ctx, watch, ..
            } => {
                watch.arm(deadline);
                let r = ctx.with(|ctx| {
                    let host = call
                        .clone()
                        .restore(&ctx)
                        .map_err(|e| Fail::Script(MwError(format!("JS host: {e}"))))?;
                    run(&ctx, &host, index, req)
                });
                (r, watch.disarm())
            }
            Live::Fresh { rt, watch } => {
                watch.arm(deadline);
                let r = fresh_call(rt, p, index, req);
                (r, watch.disarm())
            }
        };
        match result {
            Ok(flow) => Ok(flow),
            // A stopped script may have left its globals half-updated (and
            // a fresh runtime near its memory limit): start over.
            Err(_) if interrupted => {
                self.live = None;
                Err(MwError(format!(
                    "stopped after the jsvm timeout ({:?})",
                    p.timeout
                )))
            }
            Err(Fail::Memory) => {
                self.live = None;
                Err(MwError(format!(
                    "stopped at the jsvm memory limit ({} MiB)",
                    p.memory >> 20
                )))
            }
            Err(Fail::Script(e)) => Err(e),
        }
    }
}

/// A fresh context for one call: Tyk's fresh-state semantics.
fn fresh_call(rt: &Runtime, p: &Program, index: usize, req: &mut MwRequest) -> Result<Flow, Fail> {
    let ctx = full_context(rt).map_err(|e| Fail::Script(MwError(e.message)))?;
    let result = fresh_run(&ctx, p, index, req);
    drop(ctx);
    // A context's intrinsics reference each other (prototypes and
    // constructors), so only the cycle collector frees them. Collecting now,
    // while the call's context is the only garbage, costs what the
    // collector would spend later, without a pause every few hundred calls
    // that scans many dead contexts at once.
    rt.run_gc();
    result
}

fn fresh_run(ctx: &Context, p: &Program, index: usize, req: &mut MwRequest) -> Result<Flow, Fail> {
    ctx.with(|ctx| {
        let host = setup(&ctx, p, false).map_err(|e| {
            if engine::is_out_of_memory(&e.message) {
                Fail::Memory
            } else {
                Fail::Script(MwError(format!("{}: {}", e.field, e.message)))
            }
        })?;
        run(&ctx, &host, index, req)
    })
}

/// Builds the request, runs the script and applies its answer.
fn run<'js>(
    ctx: &Ctx<'js>,
    host: &Function<'js>,
    index: usize,
    req: &mut MwRequest,
) -> Result<Flow, Fail> {
    match answer::call(ctx, host, index, req) {
        Ok((ret, sent)) => answer::apply(ctx, ret, &sent, req).map_err(Fail::Script),
        Err(rquickjs::Error::Exception) => {
            let msg = engine::describe(&ctx.catch(), false);
            if engine::is_out_of_memory(&msg) {
                Err(Fail::Memory)
            } else {
                Err(Fail::Script(MwError(format!("JS error: {msg}"))))
            }
        }
        Err(e) => Err(Fail::Script(MwError(format!("JS host: {e}")))),
    }
}
