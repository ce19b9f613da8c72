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
//! - `tyk-json`: the persistent context; a call's source is Tyk's, the
//!   request as JSON text in it, parsed and run; the answer is JSON text
//!   (`js/tykjson.rs`, shared with boa).
//! - `fresh`: one runtime and context whose heap is put back before every
//!   call to what it was once the prelude and natives were installed
//!   (`fresh.rs`); the call then runs the scripts' top-level code from
//!   bytecode (no parsing), so every request sees fresh script state, as
//!   in Tyk.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rquickjs::{Context, Ctx, Function, Persistent, Runtime, Value};

use super::answer;
use super::engine::{self, Watch};
use super::fresh::Fresh;
use super::keys::Keys;
use crate::js::{tykjson, Strategy};
use crate::middleware::{Flow, MwError, MwErrorKind, MwRequest, MwResponse, ReqMut};

/// An API's scripts compiled to bytecode, with what building a context needs.
#[derive(Clone)]
pub(crate) struct Program {
    pub(crate) api_id: Arc<str>,
    /// The API's definition file, for errors.
    pub(crate) file: Arc<std::path::Path>,
    /// The TykJS prelude.
    pub(crate) prelude: Vec<u8>,
    /// Each distinct script once: (bytecode, definition field, file).
    pub(crate) scripts: Vec<(Vec<u8>, String, String)>,
    /// Evaluates to `[function (request, spec) {..}, ...]`, one per entry.
    pub(crate) dispatch: Vec<u8>,
    /// Run before the scripts, evaluates to `host`, a function of that
    /// array returning `call` (`host.js`).
    pub(crate) host: Vec<u8>,
    /// `(name, field)` per entry: pre, post, then response entries, then
    /// virtual endpoints (their `response_function_name`).
    pub(crate) entries: Vec<(String, String)>,
    /// How many of `entries` are request-phase entries.
    pub(crate) requests: usize,
    /// How many response entries follow them (the rest are endpoints).
    pub(crate) response: usize,
    pub(crate) timeout: Duration,
    pub(crate) memory: usize,
    pub(crate) strategy: Strategy,
    /// `tyk-json`: what each call's source is written from.
    pub(crate) json: Option<tykjson::Calls>,
}

/// A setup failure: the definition field at fault and what went wrong.
#[derive(Debug)]
pub(crate) struct BuildError {
    pub(crate) field: String,
    pub(crate) message: String,
}

/// Why a call did not produce an answer.
pub(crate) enum Fail {
    /// The script threw or answered with the wrong shape; or, of kind
    /// `out_of_memory`, the host met the memory limit reading the answer
    /// (`answer.rs`, which returns `MwError`s), as [`Fail::Memory`].
    Script(MwError),
    /// The memory limit was hit: the runtime must go.
    Memory,
}

impl Fail {
    /// The memory limit was hit, by the call or by the reading of its
    /// answer.
    fn is_memory(&self) -> bool {
        match self {
            Fail::Memory => true,
            Fail::Script(e) => e.kind() == MwErrorKind::OutOfMemory,
        }
    }
}

/// Runs the prelude, the scripts and the host in `ctx`; returns `call`.
/// `check` verifies each entry names an object with `ProcessRequest` (load
/// and persistent builds).
pub(crate) fn setup<'js>(
    ctx: &Ctx<'js>,
    p: &Program,
    check: bool,
) -> Result<Function<'js>, BuildError> {
    let (_, host) = setup_host(ctx, p)?;
    let mut scripts = Vec::with_capacity(p.scripts.len());
    for (code, field, file) in &p.scripts {
        let func = engine::read(ctx, code).map_err(|e| internal(ctx, e))?;
        scripts.push((func, field.as_str(), file.as_str()));
    }
    let dispatch = engine::read(ctx, &p.dispatch).map_err(|e| internal(ctx, e))?;
    setup_scripts(ctx, p, &scripts, &dispatch, &host, check)
}

/// A setup failure of the host's own code.
fn internal(ctx: &Ctx<'_>, e: rquickjs::Error) -> BuildError {
    BuildError {
        field: "custom_middleware".into(),
        message: format!("JS host setup failed: {}", caught(ctx, e)),
    }
}

/// What every context has before the API's scripts run: the natives, the
/// Tyk API globals, the host code (scopes, lazy `_`), the prelude, and
/// `host.js` run last (it takes the builtins it uses as they are before
/// any script). Returns the natives that no global holds
/// (`hostcode::install`) and `host.js`'s `host`.
pub(crate) fn setup_host<'js>(
    ctx: &Ctx<'js>,
    p: &Program,
) -> Result<(Vec<Function<'js>>, Function<'js>), BuildError> {
    let api_id: Rc<str> = Rc::from(&*p.api_id);
    engine::install_natives(ctx, &api_id).map_err(|e| internal(ctx, e))?;
    crate::js::tykapi::qjs::install(ctx).map_err(|e| internal(ctx, e))?;
    // The scopes' prologue and the lazy `_`, from bytecode compiled once.
    let load = super::hostcode::install(ctx).map_err(|m| BuildError {
        field: "custom_middleware".into(),
        message: format!("JS host setup failed: {m}"),
    })?;
    engine::run(ctx, &p.prelude).map_err(|e| internal(ctx, e))?;
    if p.strategy == Strategy::TykJson {
        engine::eval_sloppy(ctx, tykjson::HELPER).map_err(|e| internal(ctx, e))?;
    }
    let host: Function = engine::run(ctx, &p.host)
        .and_then(|v| v.get())
        .map_err(|e| internal(ctx, e))?;
    Ok((vec![load], host))
}

/// Runs the API's scripts (each a function object from [`engine::read`],
/// with its field and file), checks the entries when `check`, and runs the
/// dispatch array and gives it to `host` ([`setup_host`]); returns `call`.
pub(crate) fn setup_scripts<'js>(
    ctx: &Ctx<'js>,
    p: &Program,
    scripts: &[(Value<'js>, &str, &str)],
    dispatch: &Value<'js>,
    host: &Function<'js>,
    check: bool,
) -> Result<Function<'js>, BuildError> {
    for (func, field, file) in scripts {
        engine::eval_function(ctx, func).map_err(|e| BuildError {
            field: field.to_string(),
            message: format!("{file}: failed while loading: {}", caught(ctx, e)),
        })?;
    }
    if check {
        for (i, (name, field)) in p.entries.iter().enumerate() {
            let kind = if i < p.requests {
                Kind::Request
            } else if i < p.requests + p.response {
                Kind::Response
            } else {
                Kind::Endpoint
            };
            check_entry(ctx, i, name, field, kind)?;
        }
    }
    let dispatch = engine::eval_function(ctx, dispatch).map_err(|e| internal(ctx, e))?;
    host.call((dispatch,)).map_err(|e| internal(ctx, e))
}

/// What an entry's name must be.
#[derive(Clone, Copy)]
enum Kind {
    /// An object with `ProcessRequest`.
    Request,
    /// An object with `ProcessResponse`.
    Response,
    /// A global function (a virtual endpoint's `response_function_name`).
    Endpoint,
}

fn check_entry(
    ctx: &Ctx<'_>,
    index: usize,
    name: &str,
    field: &str,
    kind: Kind,
) -> Result<(), BuildError> {
    let fail = |message: String| BuildError {
        field: field.to_string(),
        message,
    };
    // Request and response entries are found through their file's scope
    // (`js/scope.rs`); a virtual endpoint's function is a global.
    let scoped = format!("(__tykScope[{index}] ? __tykScope[{index}]() : undefined)");
    let probe = match kind {
        Kind::Request => format!(
            "(function (o) {{ return (typeof o === 'object' && o !== null) ? (typeof o.ProcessRequest === 'function') : null; }})({scoped})"
        ),
        Kind::Response => format!(
            "(function (o) {{ return (typeof o === 'object' && o !== null) ? (typeof o.ProcessResponse === 'function') : null; }})({scoped})"
        ),
        Kind::Endpoint => format!("(typeof {name} === 'function') ? true : null"),
    };
    match ctx.eval::<Value, _>(probe) {
        Ok(v) if v.as_bool() == Some(true) => Ok(()),
        Ok(v) if v.as_bool() == Some(false) => Err(fail(format!(
            "object {name:?} has no {} function",
            match kind {
                Kind::Response => "ProcessResponse",
                _ => "ProcessRequest (call NewProcessRequest)",
            }
        ))),
        _ => {
            let _ = ctx.catch();
            Err(fail(match kind {
                Kind::Endpoint => format!(
                    "the scripts define no function {name:?} (response_function_name)"
                ),
                _ => format!(
                    "the scripts define no object {name:?} (expected `var {name} = new TykJS.TykMiddleware.NewMiddleware({{}})`)"
                ),
            }))
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
        /// The answer's property names, made once (`keys.rs`).
        keys: Keys,
        ctx: Context,
        rt: Runtime,
        watch: Rc<Watch>,
    },
    /// A context put back before every call (`fresh.rs`).
    Fresh(Box<Fresh>),
}

impl Live {
    fn build(p: &Program) -> Result<Live, BuildError> {
        if p.strategy == Strategy::Fresh {
            return Ok(Live::Fresh(Box::new(Fresh::build(p)?)));
        }
        let (rt, watch) = engine::runtime(p.memory).map_err(|message| BuildError {
            field: "custom_middleware".into(),
            message,
        })?;
        let ctx = full_context(&rt)?;
        // Top-level code runs under the same time limit as a call, its call
        // outs too (see boa's `run_scripts`); ending after it is running
        // past it.
        let deadline = Instant::now() + p.timeout;
        watch.arm(deadline);
        let built = {
            let _calls = crate::js::tykapi::call_scope(deadline);
            ctx.with(|ctx| {
                let call = setup(&ctx, p, true)?;
                let keys = Keys::persistent(&ctx, &call).map_err(|e| internal(&ctx, e))?;
                Ok((Persistent::save(&ctx, call), keys))
            })
        };
        let stopped = watch.disarm();
        if stopped || Instant::now() >= deadline {
            return Err(BuildError {
                field: "custom_middleware".into(),
                message: format!("top-level code was stopped after {:?}", p.timeout),
            });
        }
        let (call, keys) = built?;
        Ok(Live::Persistent {
            call,
            keys,
            ctx,
            rt,
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
    /// The last call was stopped by the interrupt handler (its deadline),
    /// not by the memory limit: [`QjsApi::take_interrupted`].
    interrupted: bool,
}

impl QjsApi {
    /// Builds the state on the calling thread.
    pub(crate) fn new(program: Arc<Program>) -> Result<QjsApi, BuildError> {
        let live = Live::build(&program)?;
        Ok(QjsApi {
            program,
            live: Some(live),
            interrupted: false,
        })
    }

    /// The state, its context not built yet: the first call builds it
    /// (see [`Self::ensure_built`]).
    pub(crate) fn unbuilt(program: Arc<Program>) -> QjsApi {
        QjsApi {
            program,
            live: None,
            interrupted: false,
        }
    }

    /// Builds the context if there is none (not built yet, or discarded by
    /// a stopped call).
    pub(crate) fn ensure_built(&mut self) -> Result<(), MwError> {
        if self.live.is_none() {
            let live = Live::build(&self.program).map_err(|e| {
                MwError::not_loaded(format!(
                    "{}: building the JS context failed: {}: {}",
                    self.program.file.display(),
                    e.field,
                    e.message
                ))
            })?;
            self.live = Some(live);
        }
        Ok(())
    }

    /// Calls entry `index` on `req`, within the jsvm timeout.
    /// A context built first is not part of the call's time.
    pub(crate) fn call(&mut self, index: usize, req: ReqMut<'_, '_>) -> Result<Flow, MwError> {
        self.ensure_built()?;
        let deadline = Instant::now() + self.program.timeout;
        self.call_until(index, req, deadline)
    }

    /// Calls entry `index` on `req`, stopped at `deadline`.
    /// A request lent to a chain run in place ([`ReqMut::Lent`]) is run
    /// by every strategy but `tyk-json`, whose calls take a middleware
    /// request (`Program::json`).
    pub(crate) fn call_until(
        &mut self,
        index: usize,
        mut req: ReqMut<'_, '_>,
        deadline: Instant,
    ) -> Result<Flow, MwError> {
        // `tyk-json` (persistent contexts only) writes each call's source;
        // only it needs the program inside the call (cloning the `Arc` for
        // every call was an atomic increment and decrement each).
        let program = self.program.json.is_some().then(|| self.program.clone());
        self.with_until(deadline, |ctx, host, keys| {
            match (program.as_ref().and_then(|p| p.json.as_ref()), &mut req) {
                (Some(json), ReqMut::Owned(req)) => json_run(ctx, json, index, req),
                (Some(_), ReqMut::Lent(_)) => Err(Fail::Script(MwError::internal(
                    "a tyk-json call cannot run on a lent request",
                ))),
                (None, req) => run(ctx, host, keys, index, req),
            }
        })
    }

    /// Calls response entry `index` (its place in `entries`) on `resp`.
    pub(crate) fn call_response(
        &mut self,
        index: usize,
        req: &MwRequest,
        resp: &mut MwResponse,
    ) -> Result<(), MwError> {
        self.with(|ctx, host, _| {
            let out =
                answer::call_response(ctx, host, index, req, resp).map_err(|e| failure(ctx, e))?;
            answer::apply_response(ctx, out, resp).map_err(Fail::Script)
        })
    }

    /// Calls virtual endpoint `index` (its place in `entries`) on `req`.
    pub(crate) fn call_endpoint(
        &mut self,
        index: usize,
        req: &MwRequest,
    ) -> Result<MwResponse, MwError> {
        self.with(|ctx, host, _| {
            let ret = answer::call_endpoint(ctx, host, index, req).map_err(|e| failure(ctx, e))?;
            answer::endpoint(ret).map_err(Fail::Script)
        })
    }

    /// Runs `f` with a live context and its `call` function, within the
    /// jsvm timeout; a stopped call (timeout, memory) discards the state.
    fn with<T>(
        &mut self,
        f: impl for<'js> FnOnce(&Ctx<'js>, &Function<'js>, &Keys) -> Result<T, Fail>,
    ) -> Result<T, MwError> {
        self.ensure_built()?;
        let deadline = Instant::now() + self.program.timeout;
        self.with_until(deadline, f)
    }

    /// True once after a call the interrupt handler stopped at the deadline
    /// it was given (a persistent state is discarded too, as
    /// [`Self::is_spent`] says; a fresh one is put back by the next call):
    /// an inline call that overran its slice (`mod.rs`, `Adaptive`).
    pub(crate) fn take_interrupted(&mut self) -> bool {
        std::mem::take(&mut self.interrupted)
    }

    /// True when a stopped call discarded the state: the next call would
    /// rebuild it (a VM thread rebuilds it right away, off the request path).
    pub(crate) fn is_spent(&self) -> bool {
        self.live.is_none()
    }

    /// [`Self::with`], stopped at `deadline`.
    fn with_until<T>(
        &mut self,
        deadline: Instant,
        f: impl for<'js> FnOnce(&Ctx<'js>, &Function<'js>, &Keys) -> Result<T, Fail>,
    ) -> Result<T, MwError> {
        self.ensure_built()?;
        let p = &*self.program;
        // What TykMakeHttpRequest and TykBatchRequest may wait until.
        let _deadline = crate::js::tykapi::call_scope(deadline);
        let (result, interrupted) = match self.live.as_mut().expect("built above") {
            Live::Persistent {
                call,
                keys,
                ctx,
                rt,
                watch,
            } => {
                watch.arm(deadline);
                let r = ctx.with(|ctx| {
                    let host = call
                        .clone()
                        .restore(&ctx)
                        .map_err(|e| Fail::Script(MwError::internal(format!("JS host: {e}"))))?;
                    f(&ctx, &host, keys)
                });
                let (r, late) = settle(r, rt, deadline);
                (r, watch.disarm() || late)
            }
            Live::Fresh(fresh) => {
                fresh.watch.arm(deadline);
                // Its heap is put back before every call: atoms per call.
                let r = fresh.call(p, |ctx, host| {
                    let keys = Keys::new(ctx).map_err(|e| failure(ctx, e))?;
                    f(ctx, host, &keys)
                });
                let (r, late) = settle(r, fresh.runtime(), deadline);
                // No JS value of the call is alive here (`r` is Rust data).
                fresh.trim();
                (r, fresh.watch.disarm() || late)
            }
        };
        // A stopped script may have left its globals half-updated, or the
        // runtime near its memory limit: start over. A `fresh` state does
        // so anyway (the next call puts its image back), so it is kept.
        let keep = matches!(self.live, Some(Live::Fresh(_)));
        match result {
            Ok(v) => Ok(v),
            Err(_) if interrupted => {
                if !keep {
                    self.live = None;
                }
                self.interrupted = true;
                Err(MwError::timed_out(format!(
                    "stopped after the jsvm timeout ({:?})",
                    p.timeout
                )))
            }
            Err(Fail::Script(e)) if e.kind() != MwErrorKind::OutOfMemory => Err(e),
            // The memory limit, met by the script, by the host's steps
            // around it, or by the host reading its answer (`answer.rs`:
            // an `out_of_memory` error saying what it read).
            Err(fail) => {
                if !keep {
                    self.live = None;
                }
                let reading = match fail {
                    Fail::Script(e) => format!(" {}", e.message()),
                    Fail::Memory => String::new(),
                };
                Err(MwError::out_of_memory(format!(
                    "stopped at the jsvm memory limit ({} MiB){reading}",
                    p.memory >> 20
                )))
            }
        }
    }
}

/// Runs the promise jobs a call queued, once its answer is read and
/// within its deadline (`engine::run_jobs`), also after a throw: `r` with
/// a job's failure in it, and true when the jobs ran out of time (the call
/// is then a timeout, and the runtime, whose queue cannot be emptied
/// otherwise, is discarded as after an interrupt). Not after the memory
/// limit: that runtime is discarded anyway.
fn settle<T>(r: Result<T, Fail>, rt: &Runtime, deadline: Instant) -> (Result<T, Fail>, bool) {
    if r.as_ref().is_err_and(Fail::is_memory) {
        return (r, false);
    }
    match engine::run_jobs(rt, deadline) {
        Ok(()) => (r, false),
        Err(engine::JobsStopped::Deadline) => {
            let late = MwError::timed_out("promise jobs ran past the deadline");
            (r.and(Err(Fail::Script(late))), true)
        }
        Err(engine::JobsStopped::Threw(msg)) if engine::is_out_of_memory(&msg) => {
            (Err(Fail::Memory), false)
        }
        Err(engine::JobsStopped::Threw(msg)) => (
            r.and(Err(Fail::Script(MwError::threw(format!(
                "JS error in a promise job: {msg}"
            ))))),
            false,
        ),
    }
}

/// A `tyk-json` call: Tyk's source with the request JSON in it, parsed and
/// run in the persistent context; the answer is JSON text.
fn json_run(
    ctx: &Ctx<'_>,
    json: &tykjson::Calls,
    index: usize,
    req: &mut MwRequest,
) -> Result<Flow, Fail> {
    let source = json.source(index, req, "", "");
    match engine::eval_sloppy(ctx, source) {
        Ok(v) => match v.as_string() {
            Some(text) => {
                let text = text.to_string().map_err(|e| failure(ctx, e))?;
                tykjson::apply(&text, req).map_err(Fail::Script)
            }
            None => Err(Fail::Script(tykjson::no_answer(v.type_name()))),
        },
        Err(rquickjs::Error::Exception) => Err(exception(ctx)),
        Err(e) => Err(Fail::Script(MwError::internal(format!("JS host: {e}")))),
    }
}

/// The pending exception as a call's failure.
fn exception(ctx: &Ctx<'_>) -> Fail {
    thrown(engine::describe(&ctx.catch(), false))
}

/// A thrown value's text (`engine::describe`) as a call's failure.
fn thrown(msg: String) -> Fail {
    if engine::is_out_of_memory(&msg) {
        Fail::Memory
    } else {
        Fail::Script(MwError::threw(format!("JS error: {msg}")))
    }
}

/// Builds the request, runs the script and applies its answer.
fn run<'js>(
    ctx: &Ctx<'js>,
    host: &Function<'js>,
    keys: &Keys,
    index: usize,
    req: &mut ReqMut<'_, '_>,
) -> Result<Flow, Fail> {
    // The script and the reading of its answer see the request as it
    // came; it changes only once both are done (`answer::plan`).
    let planned = {
        let seen: &ReqMut<'_, '_> = req;
        match answer::call(ctx, host, keys, index, seen) {
            Ok((ret, sent)) => {
                let planned = answer::plan(ctx, keys, ret, &sent, seen);
                sent.detach(seen.headers());
                planned
            }
            Err(e) => Err(failure(ctx, e)),
        }
    };
    match planned? {
        answer::Planned::Answer(flow) => Ok(flow),
        answer::Planned::Edits(edits) => answer::commit(edits, req).map_err(Fail::Script),
    }
}

/// A failed call into the host function, or a failed host step around
/// it, as a [`Fail`]. An error of rquickjs's own with an exception pending
/// is that exception's failure (`engine::pending`): at the memory limit,
/// [`Fail::Memory`].
pub(crate) fn failure(ctx: &Ctx<'_>, e: rquickjs::Error) -> Fail {
    match e {
        rquickjs::Error::Exception => exception(ctx),
        e => match engine::pending(ctx) {
            Some(msg) => thrown(msg),
            None => Fail::Script(MwError::internal(format!("JS host: {e}"))),
        },
    }
}
