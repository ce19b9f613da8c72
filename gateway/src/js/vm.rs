//! One API's JS context on one worker thread: built once with the prelude and
//! the API's scripts, then called once per request.
//!
//! Per call nothing is parsed: the dispatch expression for each middleware
//! entry (`<name>.ProcessRequest(request, session, spec)`) is compiled into a
//! [`Script`] at build time, and its arguments travel through a hidden global
//! object rather than through source text. The `tyk-json` strategy is the
//! exception by design: each call's source is Tyk's, with the request as
//! JSON text in it (`tykjson.rs`), parsed and run in this same context.

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use boa_engine::object::ObjectInitializer;
use boa_engine::property::{Attribute, PropertyKey};
use boa_engine::vm::RuntimeLimits;
use boa_engine::{js_string, Context, JsObject, JsString, JsValue, Script, Source};

mod phases;
pub(crate) use phases::session_argument;

use super::budget::{self, Guard, Stop, SLICE_BUDGET};
use super::{depth, memory, prelude, reactions, request, scope, tykapi, tykjson, Strategy};
use crate::error::clip;
use crate::heap::Uncounted;
use crate::intern::HeaderCache;
use crate::middleware::{Flow, MwError, MwRequest};

/// Recursion depth at which a call is stopped (boa's default, stated here
/// because the timeout guarantee relies on it).
const RECURSION_LIMIT: usize = 512;

/// Loop iterations one function frame may run. The slice guard bounds time in
/// the main interpreter loop; this bounds a loop inside a callback that a
/// native builtin runs (`[].forEach(fn)`), which cannot yield. At boa's speed
/// this is roughly a second or two of a tight loop.
const LOOP_ITERATION_LIMIT: u64 = 100_000_000;

/// One script file of an API, read at load.
#[derive(Debug, Clone)]
pub(crate) struct ScriptFile {
    /// Path as given in the definition.
    pub(crate) file: PathBuf,
    /// The JSON field that named it, for errors.
    pub(crate) field: String,
    /// Its source.
    pub(crate) text: String,
}

/// Everything a worker needs to build an API's context; `Send + Sync`.
#[derive(Debug)]
pub(crate) struct Sources {
    pub(crate) api_id: String,
    pub(crate) org_id: String,
    /// `None` when `config_data_disabled`: Tyk then leaves the key out.
    pub(crate) config_data: Option<serde_json::Value>,
    /// Each distinct script once, in the order the entries name them.
    pub(crate) scripts: Vec<ScriptFile>,
    /// `(name, field)` per middleware entry, pre then post.
    pub(crate) entries: Vec<(String, String)>,
    /// `(name, field)` per response entry.
    pub(crate) response: Vec<(String, String)>,
    /// `(response_function_name, field)` per virtual endpoint.
    pub(crate) endpoints: Vec<(String, String)>,
    /// `use_session` per virtual endpoint (`sources::ApiScripts::sessions`).
    pub(crate) sessions: Vec<bool>,
    /// Time allowed to a script's top-level code at build.
    pub(crate) timeout: std::time::Duration,
    /// `--jsvm-memory`: the heap one context may hold (`memory.rs`).
    pub(crate) memory: usize,
    /// How calls reach the scripts: `tyk-json` writes each call's source.
    pub(crate) strategy: Strategy,
}

/// A build failure, naming the definition field at fault.
#[derive(Debug)]
pub(crate) struct BuildError {
    pub(crate) field: String,
    pub(crate) message: String,
}

/// Why a call failed.
pub(crate) enum CallError {
    /// The script threw, or answered with the wrong shape: the context is
    /// intact and serves the next request.
    Failed(MwError),
    /// The guard stopped the script mid-run: the context must be discarded.
    Stopped(Stop),
    /// The call failed on an engine error outside the script's run (the
    /// host reading a recursing getter of the answer hit a runtime limit,
    /// `request::EngineFault`): the request fails and the context, whose
    /// frame stack boa left as the error found it, is discarded.
    Spent(MwError),
}

impl CallError {
    /// A failure reading the script's answer: [`CallError::Spent`] when it
    /// was the engine's own, else [`CallError::Failed`].
    pub(crate) fn answer(e: MwError) -> CallError {
        if request::spends_context(&e) {
            CallError::Spent(e)
        } else {
            CallError::Failed(e)
        }
    }

    /// True when the context that made this error must not serve again.
    pub(crate) fn discards_context(&self) -> bool {
        matches!(self, CallError::Stopped(_) | CallError::Spent(_))
    }
}

/// An API's live JS context.
pub(crate) struct Vm {
    /// First: the fields below drop counted (`memory.rs`).
    _window: memory::DropWindow,
    /// The context's promise jobs (`reactions.rs`).
    jobs: Rc<reactions::Queue>,
    ctx: Context,
    /// The hidden `__tykHost` global: `request` and `spec`.
    host: JsObject,
    /// One compiled dispatch expression per entry.
    dispatch: Vec<Script>,
    /// The lazy request fields' getters and setters.
    accessors: request::Accessors,
    /// `SetHeaders` names and values as parsed before (`request::apply`);
    /// the host's memory, out of the JS heap's count.
    headers: Uncounted<HeaderCache>,
    /// The response entries' and virtual endpoints' dispatch.
    phases: phases::Phases,
    /// `tyk-json`: what each call's source is written from.
    json: Option<tykjson::Calls>,
    /// Top-level throws the build survived, for the loader to log once.
    pub(crate) thrown: Vec<String>,
    /// `--jsvm-memory`.
    memory: usize,
    /// The live heap a call left past `memory`: the context must not serve
    /// again ([`Vm::retired`]).
    over: Option<usize>,
    /// Counts this context on its thread; last, so it drops last.
    _tenant: memory::Tenant,
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// A failure of the host's own setup code (not the user's scripts).
fn internal(e: boa_engine::JsError) -> BuildError {
    BuildError {
        field: "custom_middleware".into(),
        message: format!("JS host setup failed: {e}"),
    }
}

/// Build phase 1: a context with the runtime limits and every global the
/// host provides (depth guard, TykJS prelude, the `tyk-json` helper, Tyk's
/// API globals, the file scopes' prologue), and underscore evaluated when a
/// script uses `_`.
fn new_context(src: &Sources) -> Result<(Context, JsObject, Rc<reactions::Queue>), BuildError> {
    let jobs = Rc::new(reactions::Queue::default());
    let mut ctx = boa_engine::context::ContextBuilder::new()
        .host_hooks(Rc::new(super::compile::Hooks))
        .job_executor(jobs.clone())
        .build()
        .map_err(internal)?;
    let mut limits = RuntimeLimits::default();
    limits.set_recursion_limit(RECURSION_LIMIT);
    limits.set_loop_iteration_limit(LOOP_ITERATION_LIMIT);
    ctx.set_runtime_limits(limits);
    memory::install_symbol_registry(&mut ctx).map_err(internal)?;
    depth::install(&mut ctx).map_err(internal)?;
    let stringify = super::json::install(&mut ctx).map_err(internal)?;
    super::strbuild::install(&mut ctx).map_err(internal)?;
    super::proxy::install(&mut ctx).map_err(internal)?;
    prelude::install(&mut ctx, &src.api_id).map_err(internal)?;
    if src.strategy == Strategy::TykJson {
        ctx.eval(Source::from_bytes(tykjson::HELPER))
            .map_err(internal)?;
    }
    tykapi::boa::install(&mut ctx).map_err(internal)?;
    ctx.eval(Source::from_bytes(scope::PROLOGUE))
        .map_err(internal)?;
    if src.scripts.iter().any(|s| tykapi::uses_underscore(&s.text)) {
        ctx.eval(Source::from_bytes(tykapi::PRELOAD_UNDERSCORE))
            .map_err(internal)?;
    }
    Ok((ctx, stringify, jobs))
}

/// Build phase 2: each script's top-level code, within the timeout. Tyk
/// runs each file and only logs a top-level throw: whatever the script
/// defined before it still works. The throws are returned; an object a
/// script never got to define is caught by [`compile_dispatch`], which
/// quotes them.
fn run_scripts(src: &Sources, ctx: &mut Context) -> Result<Vec<String>, BuildError> {
    let mut thrown = Vec::new();
    for s in &src.scripts {
        let fail = |message: String| BuildError {
            field: s.field.clone(),
            message: format!("{}: {message}", s.file.display()),
        };
        let source = Source::from_bytes(&s.text).with_path(&s.file);
        let script =
            Script::parse(source, None, ctx).map_err(|e| fail(format!("does not compile: {e}")))?;
        let deadline = Instant::now() + src.timeout;
        // A call out in top-level code ends by the same deadline (it had 5 s
        // of its own: past `--jsvm-timeout`, a build whose call out waited
        // on a silent service passed the load's check, then held each VM
        // thread that rebuilt it while requests timed out and abandoned
        // it). Code that ends after its deadline ran past it, even when no
        // slice was left to see it.
        let run = {
            let _calls = super::tykapi::call_scope(deadline);
            budget::block_guarded(
                script.evaluate_async_with_budget(ctx, SLICE_BUDGET),
                Guard::new(deadline, src.memory),
            )
        };
        let run = match run {
            Ok(_) if Instant::now() >= deadline => Err(Stop::Timeout),
            run => run,
        };
        match run {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => thrown.push(format!(
                "{}: top-level code threw: {}",
                s.file.display(),
                error_text(&e)
            )),
            Err(stop) => {
                let why = match stop {
                    Stop::Timeout => format!("ran past --jsvm-timeout ({:?})", src.timeout),
                    Stop::Memory => "grew the process's peak RSS by 256 MiB".to_string(),
                    Stop::Heap => memory::passed(src.memory),
                };
                return Err(fail(format!("top-level code was stopped: {why}")));
            }
        }
    }
    Ok(thrown)
}

/// Build phase 3: each request entry's object, found through its file's
/// scope (`scope.rs`) and checked to have `ProcessRequest`, and its
/// compiled dispatch expression.
fn compile_dispatch(
    src: &Sources,
    thrown: &[String],
    ctx: &mut Context,
) -> Result<Vec<Script>, BuildError> {
    let h = prelude::HOST_GLOBAL;
    // Written into the host object's table, as every host write to it: a
    // script's top-level code may have frozen the object, or put a getter
    // of its own where the host writes (it is a global a script can reach).
    let mw = ctx
        .eval(Source::from_bytes(scope::RESOLVE))
        .map_err(internal)?;
    hand_to(&host_object(ctx)?, js_string!("mw"), mw);
    let mut dispatch = Vec::with_capacity(src.entries.len());
    for (index, (name, field)) in src.entries.iter().enumerate() {
        let fail = |message: String| BuildError {
            field: field.clone(),
            message,
        };
        if !is_identifier(name) {
            return Err(fail(format!("{name:?} is not a JavaScript identifier")));
        }
        check_entry(ctx, index, name, thrown).map_err(fail)?;
        // The session is a fresh `{}` per call (no auth plugins here):
        // made by the script itself, it costs less than a host write.
        //
        // The call is wrapped in a try/catch at the script's own level:
        // boa 0.22 leaves a throwing function's frame values on its VM
        // stack when the exception leaves the script uncaught (its
        // `handle_throw` returns before truncating the stack), so ~540
        // uncaught exceptions filled the stack and every later call of
        // the context failed with `RuntimeLimitError: reached the maximum
        // stack size`. Caught here, the script returns normally and boa
        // truncates its stack. A throw answers `[host, exception]`
        // ([`caught`], [`thrown`]).
        let expr = caught(&format!(
            "{h}.mw[{index}].ProcessRequest({h}.request, {{}}, {h}.spec)"
        ));
        let script = Script::parse(Source::from_bytes(&expr), None, ctx)
            .map_err(|e| fail(format!("cannot compile the dispatch for {name:?}: {e}")))?;
        dispatch.push(script);
    }
    Ok(dispatch)
}

/// Entry `index` (named `name`) resolved to an object with a
/// `ProcessRequest` function; otherwise what is wrong, quoting the scripts'
/// top-level throws when there were some.
fn check_entry(
    ctx: &mut Context,
    index: usize,
    name: &str,
    thrown: &[String],
) -> Result<(), String> {
    let h = prelude::HOST_GLOBAL;
    let check = format!(
        "(function (o) {{ return (typeof o === 'object' && o !== null) ? (typeof o.ProcessRequest === 'function') : null; }})({h}.mw[{index}])"
    );
    match ctx.eval(Source::from_bytes(&check)) {
        Ok(v) if v.as_boolean() == Some(true) => Ok(()),
        Ok(v) if v.as_boolean() == Some(false) => Err(format!(
            "object {name:?} has no ProcessRequest function (call NewProcessRequest)"
        )),
        _ if !thrown.is_empty() => Err(format!(
            "the scripts define no object {name:?}: {}",
            thrown.join("; ")
        )),
        _ => Err(format!(
            "the scripts define no object {name:?} (expected `var {name} = new TykJS.TykMiddleware.NewMiddleware({{}})`)"
        )),
    }
}

/// Build phase 4: the hidden host global, given this API's `spec`
/// (`APIID`, `OrgID`, and `config_data` unless `config_data_disabled`, as
/// Tyk's `specToJson` leaves the key out).
fn host_with_spec(src: &Sources, ctx: &mut Context) -> Result<JsObject, BuildError> {
    let host = host_object(ctx)?;
    let mut spec = ObjectInitializer::new(ctx);
    spec.property(
        js_string!("APIID"),
        JsString::from(src.api_id.as_str()),
        Attribute::all(),
    )
    .property(
        js_string!("OrgID"),
        JsString::from(src.org_id.as_str()),
        Attribute::all(),
    );
    let spec = spec.build();
    if let Some(data) = &src.config_data {
        let config = JsValue::from_json(data, ctx).map_err(|e| BuildError {
            field: "config_data".into(),
            message: format!("cannot be given to JS: {e}"),
        })?;
        spec.set(js_string!("config_data"), config, false, ctx)
            .map_err(internal)?;
    }
    hand_to(&host, js_string!("spec"), spec.into());
    Ok(host)
}

/// The hidden host global's object (`prelude::HOST_GLOBAL`). The global
/// binding cannot be replaced (non-writable, non-configurable); the object
/// it holds is written only through its table ([`hand_to`]).
fn host_object(ctx: &mut Context) -> Result<JsObject, BuildError> {
    ctx.global_object()
        .get(JsString::from(prelude::HOST_GLOBAL), ctx)
        .ok()
        .and_then(|v| v.as_object())
        .ok_or_else(|| BuildError {
            field: "custom_middleware".into(),
            message: "JS host setup failed: host global missing".into(),
        })
}

impl Vm {
    /// Builds the context, in phases: the host's globals, the scripts
    /// (top-level code runs once, here), the request entries' dispatch,
    /// the `spec` object, then the response and endpoint phases.
    pub(crate) fn build(src: &Sources) -> Result<Vm, BuildError> {
        let _w = crate::heap::Window::open();
        let tenant = memory::Tenant::new();
        let (mut ctx, stringify, jobs) = new_context(src)?;
        let thrown = run_scripts(src, &mut ctx)?;
        let dispatch = compile_dispatch(src, &thrown, &mut ctx)?;
        let host = host_with_spec(src, &mut ctx)?;
        let accessors = request::Accessors::new(stringify, &mut ctx);
        let phases = phases::compile(src, &mut ctx)?;
        let json = (src.strategy == Strategy::TykJson).then(|| {
            let names = src.entries.iter().map(|(n, _)| n.clone()).collect();
            tykjson::Calls::new(names, &src.api_id, &src.org_id, src.config_data.as_ref())
        });
        // A context over its limit before any call would be rebuilt after
        // every call: refused here, at load, as top-level code past it is.
        if let Err(memory::Over(live)) = memory::check(src.memory) {
            return Err(BuildError {
                field: "custom_middleware".into(),
                message: format!(
                    "the JS context holds {} once built (the scripts' top-level data, config_data), past --jsvm-memory ({})",
                    memory::mib(live),
                    memory::mib(src.memory)
                ),
            });
        }
        Ok(Vm {
            _window: memory::DropWindow::new(),
            jobs,
            ctx,
            host,
            dispatch,
            accessors,
            headers: Uncounted::default(),
            phases,
            json,
            thrown,
            memory: src.memory,
            over: None,
            _tenant: tenant,
        })
    }

    /// Calls entry `index` on `req`. Awaiting it may yield between slices of
    /// a long script; `deadline` bounds the whole call.
    pub(crate) async fn call(
        &mut self,
        index: usize,
        req: &mut MwRequest,
        deadline: Instant,
    ) -> Result<Flow, CallError> {
        let body_len = req.body.len();
        let result = self.call_once(index, req, deadline).await;
        if body_len >= LARGE_BODY {
            collect_large_body();
        }
        result
    }

    /// After a call (any phase), once its answer is read: runs the promise
    /// jobs it queued, within its deadline and memory limit
    /// (`reactions.rs`). Stopped at a limit, the rest is dropped and the
    /// call fails as a timeout (or out of memory); a job ending in an
    /// engine error fails it too, and spends the context.
    pub(crate) fn run_jobs(&mut self, deadline: Instant) -> Result<(), CallError> {
        match self
            .jobs
            .run(&mut self.ctx, Guard::new(deadline, self.memory))
        {
            Ok(()) => Ok(()),
            Err(reactions::Stopped::Limit(stop)) => Err(CallError::Stopped(stop)),
            Err(reactions::Stopped::Error(e)) => {
                let err = MwError::threw(format!("JS error in a promise job: {}", error_text(&e)));
                Err(if e.as_engine().is_some() {
                    CallError::Spent(err)
                } else {
                    CallError::Failed(err)
                })
            }
        }
    }

    /// After a call (any phase): collects when the heap is due, and
    /// retires the context when what it keeps is past `--jsvm-memory`.
    pub(crate) fn check_heap(&mut self) {
        if let Err(memory::Over(live)) = memory::check(self.memory) {
            self.over = Some(live);
        }
    }

    /// The live heap past `--jsvm-memory` that a call left, when it did:
    /// the caller drops this context and logs why.
    pub(crate) fn retired(&self) -> Option<usize> {
        self.over
    }

    async fn call_once(
        &mut self,
        index: usize,
        req: &mut MwRequest,
        deadline: Instant,
    ) -> Result<Flow, CallError> {
        if self.json.is_some() {
            return self.call_json(index, req, deadline).await;
        }
        let failed = |e: String| CallError::Failed(MwError::internal(e));
        let built = request::build(req, &mut self.accessors, &mut self.ctx)
            .map_err(|e| failed(e.to_string()))?;
        // One host write per call: the previous call's request stays
        // referenced here until this write replaces it (one object per
        // context), unless it carries a body (cleared below, so a large
        // upload is not kept alive by an idle API).
        self.hand(js_string!("request"), built.object.clone().into());
        let ret = run(
            &mut self.ctx,
            &self.host,
            self.memory,
            &self.dispatch[index],
            deadline,
        )
        .await;
        if !req.body.is_empty() {
            self.hand(js_string!("request"), JsValue::undefined());
        }
        let ret = ret?;
        let ctx = &mut self.ctx;
        request::apply(&ret, &built, &self.accessors, &mut self.headers, req, ctx)
            .map_err(CallError::answer)
    }

    /// Puts `value` in the hidden host object's field `key`, where the
    /// dispatch reads it: into the object's table, not through `[[Set]]`,
    /// so a script that froze the object (a global it can reach) or gave
    /// the field a getter of its own cannot make the write fail or be read
    /// back as something else; and it costs ~600 instructions, not ~1,900.
    fn hand(&self, key: JsString, value: JsValue) {
        hand_to(&self.host, key, value);
    }

    /// [`run`] in this context.
    async fn run(&mut self, script: &Script, deadline: Instant) -> Result<JsValue, CallError> {
        run(&mut self.ctx, &self.host, self.memory, script, deadline).await
    }

    /// A `tyk-json` call: Tyk's source, the request JSON pasted in, parsed
    /// and run here; the answer is JSON text (`tykjson.rs`). The try/catch
    /// is the dispatch's (see [`compile_dispatch`] for the boa stack leak it avoids).
    async fn call_json(
        &mut self,
        index: usize,
        req: &mut MwRequest,
        deadline: Instant,
    ) -> Result<Flow, CallError> {
        let failed = |e: String| CallError::Failed(MwError::internal(e));
        let json = self.json.as_ref().expect("a tyk-json context");
        let source = json.source(index, req, CAUGHT_HEAD, &CAUGHT_TAIL);
        let script = Script::parse(Source::from_bytes(&source), None, &mut self.ctx)
            .map_err(|e| failed(format!("JS host: the call's source does not parse: {e}")))?;
        drop(source);
        let ret = self.run(&script, deadline).await?;
        match ret.as_string() {
            Some(text) => {
                // Rust only, and what it makes leaves with `req` (`heap.rs`).
                crate::heap::uncounted(|| tykjson::apply(&super::text::lossy(&text), req))
                    .map_err(CallError::Failed)
            }
            None => Err(CallError::Failed(tykjson::no_answer(ret.type_of()))),
        }
    }
}

/// `expr` in a try/catch at the script's own level (see [`compile_dispatch`]
/// for the boa stack leak an uncaught exception causes): a throw answers
/// `[host, exception]`, the hidden host object first ([`thrown`]).
fn caught(expr: &str) -> String {
    format!("{CAUGHT_HEAD}{expr}{}", *CAUGHT_TAIL)
}

/// What [`caught`] writes before the expression.
const CAUGHT_HEAD: &str = "try { ";

/// What [`caught`] writes after the expression (made once: a `tyk-json`
/// call writes it into every call's source).
static CAUGHT_TAIL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let h = prelude::HOST_GLOBAL;
    format!(" }} catch (e) {{ [{h}, e] }}")
});

/// Evaluates a dispatch script under the deadline; a script-level throw
/// (`[host, exception]`, [`thrown`]) becomes a failure. (A function of the
/// context's parts, so a call can run a script it borrows from the same
/// `Vm`.)
async fn run(
    ctx: &mut Context,
    host: &JsObject,
    memory: usize,
    script: &Script,
    deadline: Instant,
) -> Result<JsValue, CallError> {
    let run = budget::guarded(
        script.evaluate_async_with_budget(ctx, SLICE_BUDGET),
        Guard::new(deadline, memory),
    )
    .await
    .map_err(CallError::Stopped)?;
    let ret = run.map_err(|e| js_error(&e))?;
    match thrown(&ret, host) {
        None => Ok(ret),
        Some(e) => Err(js_error(&boa_engine::JsError::from_opaque(e))),
    }
}

/// A JS error a call ended with, as the call's failure.
fn js_error(e: &boa_engine::JsError) -> CallError {
    let text = error_text(e);
    // A builtin refused a block past what the call may still allocate
    // (`strbuild.rs`, `compile::Hooks`): counted as the heap's, as the
    // allocator's stop is.
    let failed = if super::strbuild::refused(&text) {
        MwError::out_of_memory
    } else {
        MwError::threw
    };
    CallError::Failed(failed(format!("JS error: {text}")))
}

/// Writes `value` into the hidden host object's field `key` ([`Vm::hand`]).
fn hand_to(host: &JsObject, key: JsString, value: JsValue) {
    request::put_data(host, request::name(key), value);
}

/// The exception a [`caught`] dispatch answered with, when `ret` is that
/// answer: an array whose first element is `host`. The exception travels
/// in the answer, not in a field of the host object: the object is a
/// global a script can reach, freeze, or give a getter, and the host must
/// still tell every throw. (A script that itself answers an array starting
/// with the host object gets its call failed, as a throw would.)
fn thrown(ret: &JsValue, host: &JsObject) -> Option<JsValue> {
    let arr = ret.as_object().filter(JsObject::is_array)?;
    let first = request::own_data(&arr, &PropertyKey::from(0u32))?;
    if !first
        .as_object()
        .is_some_and(|o| JsObject::equals(&o, host))
    {
        return None;
    }
    Some(request::own_data(&arr, &PropertyKey::from(1u32)).unwrap_or_default())
}

/// After a call with a large body: boa's collector runs on its own
/// allocation count, and a body string is one allocation however large
/// (strings are reference counted, outside that count): without this, a
/// 1 MiB body stays alive until hundreds of ordinary calls later trigger a
/// collection (300 POSTs of 1 MiB grew RSS 14 -> 479 MB). The objects that
/// held it are garbage now; collect them, on success and on failure alike.
fn collect_large_body() {
    boa_engine::gc::force_collect();
    // What a large body's parse freed (`JSON.parse` of 8 MiB makes a
    // serde_json tree, an AST and bytecode) sits in this thread's malloc
    // arena; glibc returns an arena's free pages to the kernel only on a
    // trim. Only after large bodies: it walks the heap.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A JS error on one line: boa's message and the script positions it passed
/// through, without the frames of the host's own dispatch expression (which
/// has no file, so boa shows it as `(unknown at :1:18)`).
pub(crate) fn error_text(e: &boa_engine::JsError) -> String {
    clip(error_lines(e))
}

/// A thrown value that is an object but no Error is named by its kind, as
/// `String(value)` names a plain object in Tyk's engines (`[object
/// Object]`): boa's own display of it prints every property of every
/// level, one line each, which for an object nested 20,000 deep panicked
/// inside boa ("Formatting argument out of range") and for a large one
/// built megabytes of text.
fn error_lines(e: &boa_engine::JsError) -> String {
    if let Some(o) = e.as_opaque().and_then(JsValue::as_object) {
        if !o.is::<boa_engine::builtins::error::Error>() {
            return object_tag(&o).to_string();
        }
    }
    let full = e.to_string();
    let mut lines = full.lines();
    let first = lines.next().unwrap_or_default();
    let first = match first.rfind(" (unknown at ") {
        Some(i) if first.ends_with(')') => &first[..i],
        _ => first,
    };
    // A frame reads `<main> (file.js:2:71)` or `handler (file.js:3:5)`.
    let frames: Vec<String> = lines
        .filter_map(|l| l.trim().strip_prefix("at "))
        .filter(|l| !l.contains("unknown at"))
        .map(|l| match l.split_once(" (") {
            Some(("<main>", at)) => at.trim_end_matches(')').to_string(),
            Some((func, at)) => format!("{func} at {}", at.trim_end_matches(')')),
            None => l.to_string(),
        })
        .collect();
    if frames.is_empty() {
        first.to_string()
    } else {
        format!("{first} (at {})", frames.join(", called from "))
    }
}

/// `v` for a message, bounded: a primitive as boa shows it (a string
/// quoted, cut at [`crate::error::MAX_ERROR_TEXT`] bytes), an object by its kind only
/// ([`object_tag`]), not boa's dump of its contents.
fn value_text(v: &JsValue) -> String {
    match v.as_object() {
        Some(o) => object_tag(&o).to_string(),
        None => clip(v.display().to_string()),
    }
}

/// An object's kind as `Object.prototype.toString` would tag the common
/// ones, read without running any of the script's code.
fn object_tag(o: &JsObject) -> &'static str {
    if o.is_array() {
        "[object Array]"
    } else if o.is_callable() {
        "[object Function]"
    } else if o.is::<boa_engine::builtins::error::Error>() {
        "[object Error]"
    } else {
        "[object Object]"
    }
}

/// Bodies from this size on are collected right after the call (see
/// [`Vm::call`]). Smaller ones wait for boa's own collections: collecting
/// after every call would cost more than the request.
const LARGE_BODY: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::MAX_ERROR_TEXT;
    use boa_engine::{JsError, JsNativeError};

    #[test]
    fn thrown_values_read_as_one_bounded_line() {
        let mut ctx = Context::default();
        // An Error keeps boa's own words.
        let e = JsNativeError::typ().with_message("bad thing");
        let e = JsError::from_opaque(e.into_opaque(&mut ctx).into());
        assert!(error_text(&e).starts_with("TypeError: bad thing"));
        // Anything else that is an object is named by its kind only.
        let plain = JsError::from_opaque(JsObject::with_null_proto().into());
        assert_eq!(error_text(&plain), "[object Object]");
        let array = boa_engine::object::builtins::JsArray::new(&mut ctx).unwrap();
        assert_eq!(
            error_text(&JsError::from_opaque(array.into())),
            "[object Array]"
        );
        // A long text is cut on a character boundary, the cut marked.
        let long = JsString::from("\u{e9}".repeat(5 * MAX_ERROR_TEXT).as_str());
        let text = error_text(&JsError::from_opaque(long.clone().into()));
        assert!(text.len() <= MAX_ERROR_TEXT + 3, "{}", text.len());
        assert!(text.ends_with("..."));
        assert!(text.starts_with("\"\u{e9}\u{e9}"), "{}", &text[..10]);
        let text = value_text(&long.into());
        assert!(text.len() <= MAX_ERROR_TEXT + 3 && text.ends_with("..."));
        assert_eq!(value_text(&JsValue::from(42)), "42");
    }

    #[test]
    fn a_thrown_answer_is_told_from_a_plain_one() {
        let mut ctx = Context::default();
        let host = JsObject::with_null_proto();
        let err = JsValue::from(js_string!("boom"));
        let caught = boa_engine::object::builtins::JsArray::from_iter(
            [host.clone().into(), err.clone()],
            &mut ctx,
        );
        assert_eq!(thrown(&caught.into(), &host), Some(err));
        // An array that does not start with the host object, or no array.
        let other = boa_engine::object::builtins::JsArray::from_iter(
            [JsObject::with_null_proto().into(), JsValue::from(1)],
            &mut ctx,
        );
        assert_eq!(thrown(&other.into(), &host), None);
        assert_eq!(thrown(&host.clone().into(), &host), None);
        assert_eq!(thrown(&JsValue::undefined(), &host), None);
    }
}
